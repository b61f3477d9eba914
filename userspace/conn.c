// SPDX-License-Identifier: BSD-2-Clause
/*
 * conn.c - a client connection: accepted (or refused over the cap),
 * parked while idle, handed to its protocol's adapter (struct conn_ops)
 * while a unit is under way, lingering at its close, then freed from the
 * loop.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clk.h"
#include "conn.h"
#include "edge_assert.h"
#include "listener.h"
#include "sockio.h"
#include "tls.h"
#include "worker.h"

/* Parked connections after which freed memory is handed back to the
 * kernel (malloc_trim): at least this many, at the first tick with none
 * new, or at the latest after CONN_TRIM_PARKS_MAX. */
#define CONN_TRIM_PARKS 32
#define CONN_TRIM_PARKS_MAX 8192
/* What a connection refused at accept reads before its close. */
#define CONN_REJECT_DRAIN 65536

static void conn_idle_tick(struct conn *c);
static uint64_t conn_idle_ms(const struct conn *c);

static void conn_reap_cb(evutil_socket_t fd, short what, void *arg);

/* The service's init: w's (empty) connection set. */
static int conn_set_init(struct worker *w, struct errbuf *err)
{
	struct conn_set *cs = calloc(1, sizeof(*cs));

	if (!cs) {
		errbuf_set(err, "worker %u: out of memory", w->id);
		return -ENOMEM;
	}
	w->cs = cs;
	TAILQ_INIT(&cs->open);
	TAILQ_INIT(&cs->parked);
	TAILQ_INIT(&cs->hs);
	TAILQ_INIT(&cs->dead);
	cs->reap = event_new(w->base, -1, 0, conn_reap_cb, w);
	if (!cs->reap) {
		errbuf_set(err, "worker %u: out of memory", w->id);
		return -ENOMEM;
	}
	worker_add_common(w, CONN_PARK_MS);
	worker_add_common(w, CONN_LINGER_MS);
	return 0;
}

void conn_timer(struct conn *c, uint64_t ms)
{
	struct timeval tv;

	evtimer_add(c->timer, worker_timeout(c->w, ms, &tv));
}

void conn_btimer(struct conn *c, uint64_t ms)
{
	struct timeval tv;

	evtimer_add(c->btimer, worker_timeout(c->w, ms, &tv));
}

/* A descriptor came free on w: a listener paused for want of one may go
 * on; a draining worker may be done. */
static void conn_gone(struct worker *w)
{
	listener_resume_all(w);
	worker_maybe_exit(w);
}

/* Shut down our side once the output is flushed, then read and discard
 * until the client closes (bounded in time and bytes). */
static void conn_finish(struct conn *c)
{
	if (c->closed)
		return;
	if (!c->io) { /* a tunnel had it: nothing left to say */
		conn_close(c);
		return;
	}
	c->state = CONN_CLOSING;
	sockio_set_read_timeout(c->io, 0);
	sockio_set_watermarks(c->io, 0, 0);
	sockio_enable(c->io, EV_READ | EV_WRITE);
	conn_timer(c, CONN_LINGER_MS);
	if (c->client_eof && evbuffer_get_length(sockio_output(c->io)) == 0) {
		conn_close(c);
		return;
	}
	sockio_shutdown(c->io); /* once the output is out */
}

/* c waits for its next head with nothing buffered: arm the idle timer
 * (it parks c after CONN_PARK_MS, closes it after the idle timeout). */
static void conn_idle_begin(struct conn *c)
{
	uint64_t ms = conn_idle_ms(c);

	c->kick = false;
	c->timer_mode = CONN_T_IDLE;
	c->idle_since = clk_now_ns();
	conn_timer(c, ms < CONN_PARK_MS ? ms : CONN_PARK_MS);
}

/* Wait for the next request head on c (keep-alive), parsing whatever is
 * already buffered from the loop rather than recursively. */
static void conn_wait_head(struct conn *c)
{
	static const struct timeval zero = {0, 0};
	const struct h1_limits *h1 = &c->w->set.h1;

	c->state = CONN_HEAD;
	c->timer_mode = CONN_T_NONE;
	sockio_set_read_timeout(c->io, 0);
	sockio_set_watermarks(c->io, h1->head_max + 1, CONN_LOW_WATER);
	sockio_enable(c->io, EV_READ | EV_WRITE);
	if (evbuffer_get_length(sockio_input(c->io)) == 0 && !c->client_eof) {
		conn_idle_begin(c); /* nothing to parse: no kick needed */
		return;
	}
	c->kick = true;
	evtimer_add(c->timer, &zero);
}

void conn_next(struct conn *c, bool close)
{
	if (c->closed)
		return;
	if (close || !c->io)
		conn_finish(c);
	else
		conn_wait_head(c);
}

/* A connection waiting for a head: parse what arrived (the adapter), unless
 * pipelined answers pile up (the write callback resumes). */
static void conn_head_input(struct conn *c)
{
	if (c->state != CONN_HEAD || c->closed)
		return;
	c->kick = false; /* this parse is what the kick asked for */
	if (evbuffer_get_length(sockio_output(c->io)) > CONN_HIGH_WATER)
		return;
	if (evbuffer_get_length(sockio_input(c->io)) == 0) {
		if (c->client_eof) {
			conn_close(c);
			return;
		}
		if (c->timer_mode == CONN_T_NONE)
			conn_idle_begin(c);
		return;
	}
	if (c->timer_mode != CONN_T_HEADER) {
		c->timer_mode = CONN_T_HEADER;
		conn_timer(c, c->w->set.timeouts.header_ms);
	}
	c->ops->input(c);
}

static void conn_read_cb(struct sockio *io, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = sockio_input(io);

	switch (c->state) {
	case CONN_HEAD:
		conn_head_input(c);
		break;
	case CONN_BUSY:
		c->ops->readable(c);
		break;
	case CONN_CLOSING:
		c->discarded += evbuffer_get_length(in);
		evbuffer_drain(in, evbuffer_get_length(in));
		if (c->discarded > CONN_LINGER_BYTES)
			conn_close(c);
		break;
	}
}

static void conn_write_cb(struct sockio *io, void *arg)
{
	struct conn *c = arg;

	(void)io;
	switch (c->state) {
	case CONN_HEAD:
		conn_head_input(c);
		break;
	case CONN_BUSY:
		c->ops->drained(c);
		break;
	case CONN_CLOSING:
		break; /* the shutdown follows the output */
	}
}

static void conn_event_cb(struct sockio *io, short what, void *arg)
{
	struct conn *c = arg;
	bool eof = (what & SOCKIO_EOF) && (what & SOCKIO_READING);

	(void)io;
	switch (c->state) {
	case CONN_HEAD:
		if (eof) {
			c->client_eof = true;
			conn_head_input(c);
		} else {
			conn_close(c);
		}
		break;
	case CONN_BUSY:
		c->ops->gone(c, eof);
		break;
	case CONN_CLOSING:
		if (what & SOCKIO_SHUT) {
			if (c->client_eof)
				conn_close(c); /* both sides done */
			break;		       /* linger: read and discard */
		}
		conn_close(c);
		break;
	}
}

static void conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	(void)fd;
	(void)what;
	switch (c->state) {
	case CONN_HEAD:
		if (c->kick) {
			conn_head_input(c);
		} else if (c->timer_mode == CONN_T_HEADER &&
			   c->ops->active(c)) {
			c->close_after = true;
			c->ops->header_timeout(c);
		} else {
			conn_idle_tick(c);
		}
		break;
	case CONN_BUSY:
		c->ops->timeout(c);
		break;
	case CONN_CLOSING:
		conn_close(c);
		break;
	}
}

static void conn_btimer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	(void)fd;
	(void)what;
	if (c->state == CONN_BUSY)
		c->ops->btimeout(c);
}

static socklen_t conn_addr_len(const union conn_addr *a)
{
	return a->sa.sa_family == AF_INET6 ? sizeof(a->v6) : sizeof(a->v4);
}

/* Make the connection object for transport t (a new or an unparked
 * connection) and wait for its next head; or, with keep (the state
 * adapter kops kept over a park), hand keep back to kops (which may
 * close c). NULL when out of memory (t closed, keep freed). */
static struct conn *conn_open(struct worker *w, struct transport *t,
			      const union conn_addr *peer, unsigned nreq,
			      const struct conn_ops *kops, void *keep)
{
	const struct conn_ops *ops = keep ? kops : w->sh->conn_ops;
	struct conn *c;

	c = calloc(1, sizeof(*c) + ops->size);
	if (!c) {
		transport_close(t);
		if (keep)
			kops->keep_free(keep);
		return NULL;
	}
	c->w = w;
	c->ops = ops;
	c->nreq = nreq;
	c->peer = *peer;
	c->tls = tls_transport_info(t, &c->tls_version, &c->tls_cipher,
				    &c->tls_resumed);
	c->h2 = c->tls && tls_transport_h2(t);
	c->peer_len = conn_addr_len(peer);
	if (peer->sa.sa_family == AF_INET6)
		inet_ntop(AF_INET6, &peer->v6.sin6_addr, c->client_ip,
			  sizeof(c->client_ip));
	else
		inet_ntop(AF_INET, &peer->v4.sin_addr, c->client_ip,
			  sizeof(c->client_ip));
	if (cidr_parse_addr(c->client_ip, &c->peer_cidr, NULL))
		memset(&c->peer_cidr, 0, sizeof(c->peer_cidr));
	c->io = sockio_new(w->base, t);
	c->timer = evtimer_new(w->base, conn_timer_cb, c);
	c->btimer = evtimer_new(w->base, conn_btimer_cb, c);
	if (!c->io || !c->timer || !c->btimer) {
		if (c->io)
			sockio_free(c->io);
		else
			transport_close(t);
		if (c->timer)
			event_free(c->timer);
		if (c->btimer)
			event_free(c->btimer);
		free(c);
		if (keep)
			kops->keep_free(keep);
		return NULL;
	}
	if (!keep && ops->open)
		ops->open(c);
	sockio_setcb(c->io, conn_read_cb, conn_write_cb, conn_event_cb, c);
	TAILQ_INSERT_TAIL(&w->cs->open, c, link);
	w->cs->n++;
	worker_lag_wake(w, t->fd);
	if (keep)
		ops->unpark(c, keep);
	else
		conn_wait_head(c);
	return c;
}

/* Parked entries come from per-worker slabs of CONN_PARK_SLAB: the many
 * small, long-lived entries sit together rather than between the large,
 * short-lived struct conns, whose freed pages malloc_trim can then give
 * back whole. Slabs are kept until the worker ends (conn_free_all). */
#define CONN_PARK_SLAB 128

struct conn_park_slab {
	struct conn_park_slab *next;
	_Alignas(max_align_t) unsigned char mem[];
};

/* Bytes of one parked entry with its event, aligned for the next. */
static size_t conn_park_size(void)
{
	size_t a = _Alignof(max_align_t);

	return (sizeof(struct conn_park) + event_get_struct_event_size() + a -
		1) /
	       a * a;
}

/* A zeroed parked entry, or NULL when out of memory. */
static struct conn_park *conn_park_alloc(struct worker *w)
{
	struct conn_set *cs = w->cs;
	size_t sz = conn_park_size(), i;
	struct conn_park_slab *slab;
	struct conn_park *k;

	if (!cs->park_free) {
		slab = malloc(sizeof(*slab) + CONN_PARK_SLAB * sz);
		if (!slab)
			return NULL;
		slab->next = cs->park_slabs;
		cs->park_slabs = slab;
		for (i = CONN_PARK_SLAB; i-- > 0;) {
			k = (struct conn_park *)(void *)(slab->mem + i * sz);
			k->next_free = cs->park_free;
			cs->park_free = k;
		}
	}
	k = cs->park_free;
	cs->park_free = k->next_free;
	memset(k, 0, sz);
	return k;
}

/* Return an unused entry to w's slabs. */
static void conn_park_put(struct worker *w, struct conn_park *k)
{
	k->next_free = w->cs->park_free;
	w->cs->park_free = k;
}

/* Forget a parked connection: free its entry, and close its transport
 * (and free what its adapter kept) unless it goes on as a struct conn
 * (keep: the transport is copied to *keep; the adapter's state is the
 * caller's to take from k first). */
static void conn_park_free(struct conn_park *k, struct transport *keep)
{
	struct worker *w = k->w;

	event_del((struct event *)k->ev);
	TAILQ_REMOVE(&w->cs->parked, k, link);
	atomic_fetch_sub(&w->sh->parked, 1);
	if (k->nreq)
		atomic_fetch_sub(&w->sh->parked_idle, 1);
	if (keep) {
		*keep = k->t;
	} else {
		transport_close(&k->t);
		if (k->keep)
			k->ops->keep_free(k->keep);
		w->cs->n--;
		atomic_fetch_sub(&w->sh->connections, 1);
	}
	conn_park_put(w, k);
}

/* Bring the parked connection k back as a struct conn (with the state
 * its adapter kept, if any): NULL when out of memory (it is gone). */
static struct conn *conn_unpark(struct conn_park *k)
{
	struct worker *w = k->w;
	union conn_addr peer = k->peer;
	unsigned nreq = k->nreq;
	const struct conn_ops *kops = k->ops;
	void *keep = k->keep;
	struct transport t;
	struct conn *c;

	k->keep = NULL; /* conn_open's now */
	conn_park_free(k, &t);
	w->cs->n--; /* conn_open counts it again */
	c = conn_open(w, &t, &peer, nreq, kops, keep);
	if (!c) {
		atomic_fetch_sub(&w->sh->connections, 1);
		conn_gone(w);
	}
	return c;
}

/* A parked connection's socket is readable (a request, or EOF), or its
 * idle deadline passed: closed without an answer, as an idle keep-alive
 * connection is, unless its adapter kept state (then its timeout hook
 * says what to do, an HTTP/2 GOAWAY). */
static void conn_park_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn_park *k = arg;
	struct worker *w = k->w;
	struct conn *c;

	(void)fd;
	if (!(what & EV_READ) && !k->keep) {
		log_debug("conn: closed at its timeout: no %s request in "
			  "the %llu ms parked",
			  k->nreq ? "next" : "first",
			  (unsigned long long)k->ms);
		conn_park_free(k, NULL);
		conn_gone(w);
		return;
	}
	c = conn_unpark(k);
	if (c && !c->closed && !(what & EV_READ))
		c->ops->timeout(c);
}

/* Park the stream t for at most ms, with what adapter kops keeps (keep,
 * or NULL); the caller has counted it in w->cs->n and sh->connections.
 * Returns -1 when out of memory or the loop refused the event, t and keep
 * left to the caller. */
static int conn_park(struct worker *w, const struct transport *t,
		     const union conn_addr *peer, unsigned nreq, uint64_t ms,
		     const struct conn_ops *kops, void *keep)
{
	struct timeval tv = {(time_t)(ms / 1000),
			     (suseconds_t)((ms % 1000) * 1000)};
	struct conn_park *k;

	k = conn_park_alloc(w);
	if (!k)
		return -1;
	k->w = w;
	k->t = *t;
	k->nreq = nreq;
	k->ms = ms;
	k->peer = *peer;
	k->ops = kops;
	k->keep = keep;
	if (event_assign((struct event *)k->ev, w->base, t->fd, EV_READ,
			 conn_park_cb, k) ||
	    event_add((struct event *)k->ev, &tv)) {
		conn_park_put(w, k);
		return -1;
	}
	TAILQ_INSERT_TAIL(&w->cs->parked, k, link);
	atomic_fetch_add(&w->sh->parked, 1);
	if (nreq)
		atomic_fetch_add(&w->sh->parked_idle, 1);
	return 0;
}

/* How long c may wait for its next head in all (the idle keep-alive
 * timeout, or for a first request the header timeout). */
static uint64_t conn_idle_ms(const struct conn *c)
{
	const struct config_timeouts *t = &c->w->set.timeouts;

	return c->nreq ? t->idle_keepalive_ms : t->header_ms;
}

/* c's idle timer fired: close it when its idle time is up, park it when
 * nothing is buffered, else wait on. */
static void conn_idle_tick(struct conn *c)
{
	struct worker *w = c->w;
	uint64_t waited = (clk_now_ns() - c->idle_since) / 1000000;
	uint64_t limit = conn_idle_ms(c);
	struct transport t;
	struct conn_park *k;

	if (waited >= limit) {
		conn_close(c); /* idle keep-alive connection */
		return;
	}
	if (c->state != CONN_HEAD || c->ops->active(c) || !conn_parkable(c)) {
		conn_timer(c, limit - waited);
		return;
	}
	/* an entry for it first (put back, it is the one conn_park takes):
	 * without memory for one, c just waits on */
	k = conn_park_alloc(w);
	if (!k) {
		conn_timer(c, limit - waited);
		return;
	}
	conn_park_put(w, k);
	/* hand the stream to the parked entry, then close c */
	sockio_release(c->io, &t);
	c->io = NULL;
	if (conn_park(w, &t, &c->peer, c->nreq, limit - waited, NULL, NULL)) {
		transport_close(&t); /* could not watch it (epoll): it closes */
		conn_close(c);
		return;
	}
	w->cs->n++; /* the parked entry; conn_close takes c's away */
	w->cs->parks++;
	atomic_fetch_add(&w->sh->connections, 1);
	conn_close(c);
}

bool conn_parkable(const struct conn *c)
{
	return !c->closed && c->io && !c->client_eof && !c->close_after &&
	       !c->w->draining &&
	       evbuffer_get_length(sockio_input(c->io)) == 0 &&
	       evbuffer_get_length(sockio_output(c->io)) == 0 &&
	       sockio_pending(c->io) == 0;
}

int conn_park_keep(struct conn *c, void *keep, uint64_t ms)
{
	struct worker *w = c->w;
	struct transport t;
	struct conn_park *k;

	/* an entry first, as conn_idle_tick takes one */
	k = conn_park_alloc(w);
	if (!k)
		return -ENOMEM;
	conn_park_put(w, k);
	sockio_release(c->io, &t);
	c->io = NULL;
	if (conn_park(w, &t, &c->peer, c->nreq, ms, c->ops, keep)) {
		transport_close(&t); /* could not watch it (epoll): it closes */
		c->ops->keep_free(keep);
		conn_close(c);
		return 0;
	}
	w->cs->n++; /* the parked entry; conn_close takes c's away */
	w->cs->parks++;
	atomic_fetch_add(&w->sh->connections, 1);
	conn_close(c);
	return 0;
}

/*
 * A connection refused at accept has its 503 queued: write it now and
 * close, without the lingering close, so that a storm of refused
 * connections (the cap is there because descriptors or memory run short)
 * holds no descriptor past this callback. What the client already sent
 * is read first (at most CONN_REJECT_DRAIN bytes), so that the close
 * sends a FIN behind the answer rather than a reset in front of it.
 */
static void conn_reject_now(struct conn *c)
{
	if (c->closed)
		return;
	sockio_discard(c->io, CONN_REJECT_DRAIN);
	sockio_flush(c->io); /* the close sends the FIN behind it */
	c->client_eof = true;
	conn_close(c);
}

void conn_accept(struct worker *w, int fd, const struct sockaddr *sa,
		 socklen_t len, const char *listen)
{
	struct worker_shared *sh = w->sh;
	unsigned long n, cap = (unsigned long)w->set.limits.max_connections;
	union conn_addr peer;
	struct transport t;
	struct conn *c;
	int one = 1;

	(void)listen;
	memset(&peer, 0, sizeof(peer));
	if (len > sizeof(peer))
		len = sizeof(peer);
	memcpy(&peer, sa, len);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	transport_tcp(&t, fd);
	/* over cap: 503; the descriptor limit's cap is the listener's */
	n = atomic_fetch_add(&sh->connections, 1) + 1;
	if (n <= cap && !w->draining) {
		w->cs->n++;
		if (conn_park(w, &t, &peer, 0, w->set.timeouts.header_ms, NULL,
			      NULL) == 0)
			return;
		w->cs->n--;
	}
	c = conn_open(w, &t, &peer, 0, NULL, NULL);
	if (!c) {
		atomic_fetch_sub(&sh->connections, 1);
		return;
	}
	if (n > cap || w->draining) {
		evtimer_del(c->timer);
		c->kick = false;
		if (!w->draining)
			log_warnx_rl("limits.max_connections (%lu) reached: "
				     "a connection refused (503 "
				     "connection_limit)",
				     cap);
		c->ops->refuse(c, w->draining ? OUTCOME_SHUTTING_DOWN
					      : OUTCOME_CONNECTION_LIMIT);
		conn_reject_now(c);
	}
}

/* A TLS handshake under way on an HTTPS listener's connection. */
struct conn_hs {
	TAILQ_ENTRY(conn_hs) link;
	struct worker *w;
	union conn_addr peer;
	struct tls_hs *hs;
};

/* A handshake ended: the connection goes on (parked until its first
 * request, unless TLS holds bytes of it already), or is gone. */
static void conn_hs_done(int rc, struct transport *t, void *arg)
{
	struct conn_hs *ch = arg;
	struct worker *w = ch->w;
	union conn_addr peer = ch->peer;

	TAILQ_REMOVE(&w->cs->hs, ch, link);
	free(ch);
	if (rc == 0 && tls_transport_acme(t)) {
		/* a tls-alpn-01 validation: the handshake was all of it */
		transport_close(t);
		rc = -1;
	}
	if (rc == 0) {
		/* draining: its first request is served (with
		 * Connection: close), as a parked one's is */
		if (!w->draining && transport_pending(t) == 0 &&
		    conn_park(w, t, &peer, 0, w->set.timeouts.header_ms, NULL,
			      NULL) == 0)
			return;
		w->cs->n--; /* conn_open counts it again */
		if (conn_open(w, t, &peer, 0, NULL, NULL))
			return;
		w->cs->n++;
	}
	w->cs->n--;
	atomic_fetch_sub(&w->sh->connections, 1);
	conn_gone(w);
}

void conn_accept_tls(struct worker *w, int fd, const struct sockaddr *sa,
		     socklen_t len, const char *listen)
{
	struct worker_shared *sh = w->sh;
	unsigned long n, cap = (unsigned long)w->set.limits.max_connections;
	struct tls_store *st;
	struct conn_hs *ch;
	struct timeval tv;
	int one = 1;

	(void)listen;
	n = atomic_fetch_add(&sh->connections, 1) + 1;
	st = tls_holder_get(&sh->tls);
	ch = n <= cap && !w->draining && st ? calloc(1, sizeof(*ch)) : NULL;
	if (!ch) {
		/* over the cap, draining: no HTTP answer can be given before
		 * a handshake, so closed; counted as conn_accept's 503 */
		if (st && n > cap && !w->draining)
			log_warnx_rl(
			    "limits.max_connections (%lu) reached: an "
			    "HTTPS connection closed (connection_limit)",
			    cap);
		if (st && sh->request_done && (n > cap || w->draining))
			sh->request_done(sh->request_done_arg,
					 w->draining ? OUTCOME_SHUTTING_DOWN
						     : OUTCOME_CONNECTION_LIMIT,
					 0, clk_now_ns(), 0, 0);
		tls_store_put(st);
		close(fd);
		atomic_fetch_sub(&sh->connections, 1);
		return;
	}
	ch->w = w;
	if (len > sizeof(ch->peer))
		len = sizeof(ch->peer);
	memcpy(&ch->peer, sa, len);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	w->cs->n++;
	TAILQ_INSERT_TAIL(&w->cs->hs, ch, link);
	if (tls_hs_start(
		w->base, st, fd,
		worker_timeout(w, w->set.timeouts.tls_handshake_ms, &tv),
		conn_hs_done, ch, &ch->hs)) {
		TAILQ_REMOVE(&w->cs->hs, ch, link);
		free(ch);
		w->cs->n--;
		atomic_fetch_sub(&sh->connections, 1);
	}
	tls_store_put(st);
}

/* Abandon every handshake of w (draining, shutdown). */
static void conn_hs_abort_all(struct worker *w)
{
	struct conn_hs *ch;

	while ((ch = TAILQ_FIRST(&w->cs->hs))) {
		TAILQ_REMOVE(&w->cs->hs, ch, link);
		tls_hs_abort(ch->hs);
		free(ch);
		w->cs->n--;
		atomic_fetch_sub(&w->sh->connections, 1);
	}
}

void conn_close(struct conn *c)
{
	struct worker *w = c->w;

	if (c->closed)
		return;
	c->ops->close(c);
	if (c->closed)
		return; /* the adapter's ending closed it */
	c->closed = true;
	c->ops->closed(c);
	sockio_free(c->io);
	c->io = NULL;
	event_free(c->timer);
	c->timer = NULL;
	event_free(c->btimer);
	c->btimer = NULL;
	atomic_fetch_sub(&w->sh->connections, 1);
	TAILQ_REMOVE(&w->cs->open, c, link);
	EDGE_ASSERT(w->cs->n > 0);
	w->cs->n--;
	TAILQ_INSERT_TAIL(&w->cs->dead, c, link);
	event_active(w->cs->reap, EV_TIMEOUT, 0);
	conn_gone(w);
}

/* Free the memory of w's closed connections. */
static void conn_reap(struct worker *w)
{
	struct conn *c;

	while ((c = TAILQ_FIRST(&w->cs->dead))) {
		TAILQ_REMOVE(&w->cs->dead, c, link);
		if (c->ops->free)
			c->ops->free(c);
		free(c);
	}
}

static void conn_reap_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conn_reap(arg);
}

/* The service's tick: whether memory may be handed back. */
static bool conn_tick_trim(struct worker *w)
{
	struct conn_set *cs = w->cs;
	bool trim;

	/* once a burst of connections has gone idle (a tick without parks
	 * after some), their request memory is free but scattered between
	 * parked entries: give its pages back; a steady stream of parks
	 * reuses the memory instead */
	cs->parks_untrimmed += cs->parks;
	trim = cs->parks_untrimmed >= CONN_TRIM_PARKS_MAX ||
	       (cs->parks == 0 && cs->parks_untrimmed >= CONN_TRIM_PARKS);
	if (trim)
		cs->parks_untrimmed = 0;
	cs->parks = 0;
	return trim;
}

/* The service's drain: close every connection of w that is idle between
 * requests (parked or not), and mark the others to close after their
 * current request; a parked one whose adapter kept state comes back to
 * hear of the drain from its adapter (HTTP/2: GOAWAY). A connection that
 * has had no request yet (parked since its accept, or in its TLS
 * handshake) gets its first one served: its client sent it, or is about
 * to, to a socket edge accepted (the next edged of an upgrade has the
 * listener now). */
static void conn_drain_all(struct worker *w)
{
	struct conn *c, *next;
	struct conn_park *k, *knext;

	for (k = TAILQ_FIRST(&w->cs->parked); k; k = knext) {
		knext = TAILQ_NEXT(k, link);
		if (k->keep || !k->nreq)
			conn_unpark(k);
		else
			conn_park_free(k, NULL);
	}

	for (c = TAILQ_FIRST(&w->cs->open); c; c = next) {
		next = TAILQ_NEXT(c, link);
		if (c->state == CONN_CLOSING)
			continue;
		c->ops->drain(c);
	}
}

/* The service's free: every connection of w at once (shutdown), and the
 * memory kept for parking. */
static void conn_free_all(struct worker *w)
{
	struct conn_set *cs = w->cs;
	struct conn *c;
	struct conn_park *k;
	struct conn_park_slab *slab;

	if (!cs)
		return;
	while ((k = TAILQ_FIRST(&cs->parked)))
		conn_park_free(k, NULL);
	conn_hs_abort_all(w);
	while ((c = TAILQ_FIRST(&cs->open)))
		conn_close(c);
	conn_reap(w);
	while ((slab = cs->park_slabs)) {
		cs->park_slabs = slab->next;
		free(slab);
	}
	if (cs->reap)
		event_free(cs->reap);
	free(cs);
	w->cs = NULL;
}

static size_t conn_busy(const struct worker *w)
{
	return w->cs ? w->cs->n : 0;
}

const struct worker_service conn_service = {
    .name = "conn",
    .init = conn_set_init,
    .drain = conn_drain_all,
    .free = conn_free_all,
    .busy = conn_busy,
    .tick = conn_tick_trim,
};
