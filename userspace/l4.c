// SPDX-License-Identifier: BSD-2-Clause
/*
 * l4.c - plain TCP (L4) routes (l4.h): a connection accepted on a TCP
 * route's listener is admitted, resolved to its environment's endpoints
 * through the route table, connected to one of them and handed to a
 * tunnel; l4_end() records and releases it, once.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clk.h"
#include "conn.h"
#include "edge_assert.h"
#include "l4.h"
#include "listener.h"
#include "mailbox.h"
#include "record.h"
#include "sni.h"
#include "stream.h"
#include "sockio.h"
#include "tunnel.h"
#include "upconn.h"
#include "upreg.h"
#include "upstream.h"
#include "wake.h"
#include "worker.h"

_Static_assert(ROUTE_TCP_MAX >= CONFIG_TCP_ROUTES_MAX,
	       "a route table holds every TCP route of the settings");

enum l4_state {
	L4_HELLO = 0,  /* TLS passthrough: waiting for the ClientHello */
	L4_ADMIT,      /* accepted: resolving and admitting */
	L4_WAKING,     /* its on-demand environment wakes: waiting */
	L4_CONNECTING, /* connecting to an endpoint */
	L4_TUNNEL,     /* the tunnel has both sockets */
};

/* One TCP route connection, from accept to l4_end. */
struct l4_conn {
	TAILQ_ENTRY(l4_conn) link;
	struct worker *w;
	char listen[CONFIG_ADDR_STR_MAX]; /* the address it came to */
	bool passthrough;		  /* a TLS passthrough address's */
	unsigned slot; /* its TCP route's, once known (slot_counted) */
	size_t idx;    /* its TCP route in rt */
	enum l4_state state;
	bool ended;
	/* the client's stream, not read until the tunnel takes it */
	struct transport client;
	union conn_addr peer;
	struct cidr peer_cidr;
	char client_ip[INET6_ADDRSTRLEN];
	char id[HDR_REQUEST_ID_MAX + 1]; /* for logs and the record */
	/* held from the pick of its route until connected: m points into
	 * it */
	struct route_table *rt;
	struct route_match m;
	bool routed;	   /* the ids below are the route's */
	bool slot_counted; /* in sh->tcp_open[slot] (once its route is known) */
	char project_id[CONFIG_ID_MAX + 1];
	char env_id[CONFIG_ID_MAX + 1];
	char deployment_id[CONFIG_ID_MAX + 1];
	/* the upstream side */
	struct sockio *uio; /* while connecting */
	struct upconn u;    /* its attempts (upconn.h), counted until the end */
	struct event *timer; /* the connect timeout */
	struct tunnel *tun;
	/* monotonic ns: accepted, connected */
	uint64_t t0, t_up;
	uint64_t t0_real;
	uint64_t bytes_in, bytes_out; /* client -> upstream, and back */
	const char *mover;	      /* tunnel_movers(), once it ended */
	/* TLS passthrough: the client's socket watched, its bytes peeked
	 * at (never read) until the ClientHello is whole */
	struct event *hello;
	struct event *hello_retry;  /* a stalled peek: watch again later */
	size_t peeked;		    /* bytes the last peek saw */
	unsigned stalls;	    /* l4_hello_stalled so far */
	char sni[SNI_NAME_MAX + 1]; /* its server name, "" for none */
	/* Wake: its part in its on-demand environment's wake (stream.h),
	 * waiting in it while L4_WAKING, named by handle */
	struct stream_wake sw;
	uint64_t handle;
};

#define L4_LOG_CTX(c) (&(const struct log_ctx){(c)->client_ip, (c)->id})

static void l4_connect(struct l4_conn *c);
static void l4_wake_end(struct l4_conn *c, enum outcome o);

/* The service's init: w's (empty) set. */
static int l4_set_init(struct worker *w, struct errbuf *err)
{
	w->l4 = calloc(1, sizeof(*w->l4));
	if (!w->l4) {
		errbuf_set(err, "worker %u: out of memory", w->id);
		return -ENOMEM;
	}
	TAILQ_INIT(&w->l4->open);
	return 0;
}

/* Record: the stream's one record (record.h): kind tunnel, no HTTP. */
static void l4_record(const struct l4_conn *c, enum outcome o)
{
	struct record rec = {
	    .tcp = true,
	    .outcome = o,
	    .t0 = c->t0,
	    .t_connect = c->u.t_connect,
	    .t_up = c->t_up,
	    .t0_real = c->t0_real,
	    .bytes_in = c->bytes_in,
	    .bytes_out = c->bytes_out,
	    .id = c->id,
	    .client_ip = c->client_ip,
	    .mover = c->mover,
	    .up_addr = c->u.addr,
	    .woken = c->sw.woken,
	    .cold_ms = c->sw.cold_ms,
	    .host = c->sni[0] ? c->sni : NULL,
	    .host_len = SIZE_MAX,
	};

	if (c->routed) {
		rec.project_id = c->project_id;
		rec.env_id = c->env_id;
		rec.deployment_id = c->deployment_id;
	}
	record_end(c->w->sh, &rec);
}

/* The route table and what points into it: once connected (or ending),
 * the connection needs only the ids it copied. */
static void l4_unroute(struct l4_conn *c)
{
	route_table_put(c->rt);
	c->rt = NULL;
	memset(&c->m, 0, sizeof(c->m));
}

/* A connection that never became a tunnel (refused, or its upstream
 * not reached) is closed without a byte, but not with a reset: what the
 * client sent and the kernel holds for it is read and thrown away first
 * (at most L4_REFUSE_DRAIN bytes), since close(2) on a socket with
 * unread bytes sends a reset in place of the FIN, as an HTTP connection
 * refused at accept does (conn.c). Bytes that arrive after the close
 * still meet a reset. */
static void l4_close_client(struct l4_conn *c)
{
	char buf[4096];
	size_t done = 0;
	ssize_t n;

	if (!transport_open(&c->client))
		return;
	while (done < L4_REFUSE_DRAIN &&
	       (n = transport_read(&c->client, buf, sizeof(buf))) > 0)
		done += (size_t)n;
	transport_close(&c->client);
}

/*
 * The one ending of a TCP route connection, once: the tunnel's byte
 * counts taken and the tunnel closed (or the sockets closed), the
 * endpoint's count and the route table released, one analytics event
 * and the request_done hook, the connection uncounted and freed. Callers
 * return at once: c is gone.
 */
static void l4_end(struct l4_conn *c, enum outcome o)
{
	struct worker *w = c->w;
	struct worker_shared *sh = w->sh;
	struct tunnel_stats st;

	if (c->ended)
		return;
	c->ended = true;
	if (c->tun) {
		tunnel_stats(c->tun, &st);
		c->bytes_in = st.bytes_up;
		c->bytes_out = st.bytes_down;
		c->mover = tunnel_movers(&st);
		tunnel_free(c->tun);
		c->tun = NULL;
	}
	/* the hello's events watch the client's descriptor: gone before
	 * it is closed */
	if (c->hello)
		event_free(c->hello);
	c->hello = NULL;
	if (c->hello_retry)
		event_free(c->hello_retry);
	c->hello_retry = NULL;
	sockio_free(c->uio);
	c->uio = NULL;
	l4_close_client(c);
	if (c->timer)
		event_free(c->timer);
	c->timer = NULL;
	if (c->handle)
		worker_handle_free(w, c->handle);
	c->handle = 0;
	stream_wake_leave(&c->sw, w);
	upconn_done(&c->u);
	l4_unroute(c);
	if (!c->id[0] && hdr_request_id_new(c->id))
		snprintf(c->id, sizeof(c->id), "-");
	log_debug_ctx(
	    L4_LOG_CTX(c), "tcp route %s%s%s: %s, %llu bytes up, %llu down",
	    c->listen, c->sni[0] ? " sni " : "", c->sni, outcome_name(o),
	    (unsigned long long)c->bytes_in, (unsigned long long)c->bytes_out);
	l4_record(c, o);
	TAILQ_REMOVE(&w->l4->open, c, link);
	EDGE_ASSERT(w->l4->n > 0);
	w->l4->n--;
	atomic_fetch_sub(&sh->connections, 1);
	if (c->slot_counted)
		atomic_fetch_sub(&sh->tcp_open[c->slot], 1);
	free(c);
	/* a descriptor came free: a paused listener may go on, a
	 * draining worker may be done */
	listener_resume_all(w);
	worker_maybe_exit(w);
}

/* The tunnel ended (tunnel.h): so does the connection. */
static void l4_tunnel_done(struct tunnel *t, const struct tunnel_stats *st,
			   void *arg)
{
	struct l4_conn *c = arg;

	(void)t; /* l4_end reads its counts, then frees it */
	log_debug_ctx(L4_LOG_CTX(c), "tcp route tunnel %s",
		      st->end == TUNNEL_END_IDLE    ? "idle"
		      : st->end == TUNNEL_END_ERROR ? "failed"
						    : "closed");
	l4_end(c, OUTCOME_TUNNEL);
}

/*
 * Connected: both sockets become a tunnel. The one place a TCP route
 * calls tunnel_start(): the client's stream gets its sockio only now, so
 * whatever it sent meanwhile (and its EOF) is read by the tunnel and goes
 * first.
 */
static void l4_tunnel_begin(struct l4_conn *c)
{
	struct worker *w = c->w;
	struct sockio *cio, *uio = c->uio;
	int rc;

	cio = sockio_new(w->base, &c->client);
	if (!cio) {
		l4_end(c, OUTCOME_INTERNAL_ERROR);
		return;
	}
	c->client.ops = NULL; /* the sockio's */
	c->uio = NULL;	      /* the tunnel's */
	c->state = L4_TUNNEL;
	rc = tunnel_start(
	    w, cio, uio,
	    c->passthrough ? TUNNEL_KIND_PASSTHROUGH : TUNNEL_KIND_TCP,
	    w->set.timeouts.tunnel_idle_ms, l4_tunnel_done, c, &c->tun);
	if (rc) { /* both sockios freed */
		log_warnx_ctx_rl(L4_LOG_CTX(c), "tcp route %s: tunnel: %s",
				 c->listen, strerror(-rc));
		l4_end(c, OUTCOME_INTERNAL_ERROR);
		return;
	}
	/* an open tunnel of an on-demand environment: counted until it
	 * ends (its entry keeps the environment awake meanwhile, whichever
	 * mover has it) */
	stream_wake_tunnel(&c->sw, w);
}

/* The connect failed or timed out (why, errno err or 0): say so (at
 * most once a second per endpoint and reason), report it, try another
 * endpoint (the client has sent nothing anyone read). */
static void l4_attempt_failed(struct l4_conn *c, enum upreg_why why, int err)
{
	char where[CONFIG_ADDR_STR_MAX + SNI_NAME_MAX + CONFIG_ID_MAX + 64];

	snprintf(where, sizeof(where), "tcp route %s%s%s, environment %s",
		 c->listen, c->sni[0] ? " sni " : "", c->sni,
		 c->env_id[0] ? c->env_id : "-");
	upconn_failed(&c->u, c->w, L4_LOG_CTX(c), why, err, NULL, where);
	evtimer_del(c->timer);
	sockio_free(c->uio);
	c->uio = NULL;
	l4_connect(c);
}

static void l4_up_event_cb(struct sockio *uio, short what, void *arg)
{
	struct l4_conn *c = arg;

	(void)uio;
	if (c->state != L4_CONNECTING)
		return;
	if (!(what & SOCKIO_CONNECTED)) {
		l4_attempt_failed(c, UPREG_WHY_CONNECT,
				  what & SOCKIO_ERROR ? errno : 0);
		return;
	}
	evtimer_del(c->timer);
	c->t_up = clk_now_ns();
	upstream_report(c->w->up, c->u.ep, true, c->t_up);
	upconn_connected(&c->u, c->t_up);
	l4_unroute(c);
	l4_tunnel_begin(c);
}

static void l4_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct l4_conn *c = arg;

	(void)fd;
	(void)what;
	if (c->state == L4_HELLO)
		l4_end(
		    c,
		    OUTCOME_CLIENT_HELLO_TIMEOUT); /* timeouts.client_hello */
	else if (c->state == L4_CONNECTING)
		l4_attempt_failed(c, UPREG_WHY_CONNECT_TIMEOUT,
				  0); /* timeouts.upstream_connect */
	else if (c->state == L4_WAKING)
		l4_wake_end(c, OUTCOME_WAKE_PENDING); /* its notify was lost */
}

/* Every endpoint failed: upstream_unavailable, or, for an on-demand
 * environment that is not running as far as edge knows (wake_refused:
 * it just woke, or it is asleep or waking), environment_restarting and
 * a wake, or wake_failed (the woken endpoint failing its first
 * connection fails its wake, or a back-off runs). */
static void l4_unavailable(struct l4_conn *c)
{
	unsigned retry_s;

	switch (stream_wake_refused(&c->sw, c->w, &retry_s)) {
	case WAKE_RESTARTING:
		l4_end(c, OUTCOME_ENVIRONMENT_RESTARTING);
		return;
	case WAKE_REFUSED_FAILED:
		l4_wake_end(c, OUTCOME_WAKE_FAILED);
		return;
	case WAKE_DOWN:
		break;
	}
	l4_end(c, OUTCOME_UPSTREAM_UNAVAILABLE);
}

/* The next attempt (upconn.h; never a pooled connection: those carry
 * HTTP), connected within timeouts.upstream_connect; none left is
 * l4_unavailable; out of descriptors, fd_exhausted (not the endpoint's
 * fault). */
static void l4_connect(struct l4_conn *c)
{
	struct worker *w = c->w;
	/* the slot: HTTP and each TCP route keep round-robin positions of
	 * their own */
	const struct upconn_target t = {.m = &c->m,
					.slot = c->slot + 1,
					.peer = &c->peer.sa,
					.nodelay = true,
					.client_fd = c->client.fd};
	struct timeval tv;

	switch (upconn_open(&c->u, w, &t, L4_LOG_CTX(c), &c->uio)) {
	case UPCONN_NONE:
		l4_unavailable(c);
		return;
	case UPCONN_NO_FD:
		l4_end(c, OUTCOME_FD_EXHAUSTED);
		return;
	case UPCONN_FAILED:
	case UPCONN_TLS:    /* no https:// for a TCP route */
	case UPCONN_POOLED: /* not asked for */
	case UPCONN_SHARED:
	case UPCONN_FULL: /* a TCP route's match has no cap */
		l4_end(c, OUTCOME_INTERNAL_ERROR);
		return;
	case UPCONN_NEW:
		break;
	}
	sockio_setcb(c->uio, NULL, NULL, l4_up_event_cb, c);
	c->state = L4_CONNECTING;
	evtimer_add(c->timer, worker_timeout(
				  w, w->set.timeouts.upstream_connect_ms, &tv));
	if (upconn_connect(&c->u, c->uio) < 0)
		l4_attempt_failed(c, UPREG_WHY_CONNECT, errno);
}

/*
 * Wake (docs/wake.md): an on-demand environment that runs, on to Select
 * now; one that sleeps or wakes, c waits in L4_WAKING (its client's
 * socket still unread: what it sends waits in the kernel), its timer at
 * the wake timeout plus WAKE_GRACE_MS in case its notify is lost; the
 * wake's end comes as L4_MSG_WAKE. No slot for a needed wake, or
 * wake.max_waiting_connections connections waiting already: closed as
 * wake_throttled. Its last wake failed and the back-off runs: closed as
 * wake_failed at once.
 */
static void l4_wake(struct l4_conn *c)
{
	struct worker *w = c->w;
	struct wake *wk = w->sh->wake;
	struct timeval tv;

	if (!c->m.on_demand || !wk) {
		l4_connect(c);
		return;
	}
	if (worker_handle_new(w, c, &c->handle)) {
		c->handle = 0;
		l4_end(c, OUTCOME_INTERNAL_ERROR);
		return;
	}
	switch (stream_wake_enter(&c->sw, w, c->env_id, c->handle, L4_MSG_WAKE,
				  true)) {
	case WAKE_GO:
		worker_handle_free(w, c->handle);
		c->handle = 0;
		l4_connect(c);
		return;
	case WAKE_WAIT:
		c->state = L4_WAKING;
		evtimer_add(c->timer,
			    worker_timeout(w, stream_wake_wait_ms(w), &tv));
		log_debug_ctx(
		    L4_LOG_CTX(c),
		    "tcp route %s: waiting for environment %s to wake",
		    c->listen, c->env_id);
		return;
	case WAKE_THROTTLED:
		l4_wake_end(c, OUTCOME_WAKE_THROTTLED);
		return;
	case WAKE_BACKOFF:
		l4_wake_end(c, OUTCOME_WAKE_FAILED);
		return;
	case WAKE_ASLEEP: /* a TCP route's connection is of class app */
		l4_wake_end(c, OUTCOME_ENVIRONMENT_SLEEPING);
		return;
	}
}

/* c waited for a wake: the route may have changed meanwhile (the
 * orchestrator gives the woken environment new endpoints). When the
 * current table still routes c's address (and server name) to the same
 * environment, c goes to that route's endpoints. */
static void l4_reresolve(struct l4_conn *c)
{
	struct route_table *t = route_table_current(&c->w->sh->routes);
	struct route_match m;
	bool passthrough;
	size_t idx;
	int rc;

	if (!t || t == c->rt) {
		route_table_put(t);
		return;
	}
	rc = c->passthrough ? route_tcp_sni(t, c->listen, c->sni, &idx)
			    : route_tcp_addr(t, c->listen, &passthrough, &idx);
	if (rc || route_tcp_lookup(t, idx, &m) != ROUTE_OK ||
	    strcmp(m.env_id, c->env_id) != 0 || m.n_upstreams == 0) {
		route_table_put(t);
		return;
	}
	route_table_put(c->rt);
	c->rt = t;
	c->idx = idx;
	c->m = m;
	snprintf(c->deployment_id, sizeof(c->deployment_id), "%s",
		 m.deployment_id);
}

/* c's environment is not awake for it (o: wake_pending, wake_failed,
 * wake_throttled): logged and closed (a TCP route has no way to say why
 * to its client). */
static void l4_wake_end(struct l4_conn *c, enum outcome o)
{
	log_warnx_ctx_rl(L4_LOG_CTX(c),
			 "tcp route %s: environment %s not awake (%s): "
			 "closed",
			 c->listen, c->env_id, outcome_name(o));
	l4_end(c, o);
}

/* L4_MSG_WAKE for the connection named handle on w: on to Select, or
 * closed as wake_pending / wake_failed; one that ended meanwhile is not
 * found. */
static void l4_message(struct worker *w, uint64_t handle, uint64_t res)
{
	struct l4_conn *c = worker_handle_get(w, handle);

	/* a connection that ended meanwhile left the waiters then */
	if (!c || c->state != L4_WAKING)
		return;
	worker_handle_free(w, c->handle);
	c->handle = 0;
	evtimer_del(c->timer);
	switch (stream_wake_result(&c->sw, res)) {
	case WAKE_R_READY:
		c->state = L4_ADMIT;
		l4_reresolve(c);
		l4_connect(c);
		return;
	case WAKE_R_FAILED:
		l4_wake_end(c, OUTCOME_WAKE_FAILED);
		return;
	default:
		l4_wake_end(c, OUTCOME_WAKE_PENDING);
		return;
	}
}

/* Its route picked (route idx of c->rt, held): counted on the route's
 * slot from now on. */
static void l4_picked(struct l4_conn *c, size_t idx)
{
	c->idx = idx;
	c->slot = route_tcp_at(c->rt, idx)->slot;
	atomic_fetch_add(&c->w->sh->tcp_open[c->slot], 1);
	c->slot_counted = true;
}

/* Resolve and Admit: the route's environment (in the table that picked
 * the route), its project's IP rules, the per-client rate limit; then
 * Select. */
static void l4_admit(struct l4_conn *c)
{
	enum route_status rs;
	enum outcome o;
	unsigned retry;

	rs = route_tcp_lookup(c->rt, c->idx, &c->m);
	if (rs == ROUTE_ENV_NOT_FOUND) {
		log_debug_ctx(L4_LOG_CTX(c),
			      "tcp route %s: its environment is in no source",
			      c->listen);
		l4_end(c, OUTCOME_ENVIRONMENT_NOT_FOUND);
		return;
	}
	c->routed = true;
	snprintf(c->project_id, sizeof(c->project_id), "%s", c->m.project_id);
	snprintf(c->env_id, sizeof(c->env_id), "%s", c->m.env_id);
	snprintf(c->deployment_id, sizeof(c->deployment_id), "%s",
		 c->m.deployment_id);
	if (rs == ROUTE_PROJECT_DISABLED) {
		l4_end(c, OUTCOME_PROJECT_DISABLED);
		return;
	}
	o = stream_admit(c->w, &c->m, &c->peer_cidr, &retry);
	if (o != OUTCOME_OK) {
		l4_end(c, o);
		return;
	}
	l4_wake(c);
}

/* The peek buffer: a peek parses from the stream's start every time, so
 * one per worker thread serves all its connections. */
static _Thread_local uint8_t l4_peek[SNI_PEEK_MAX];

/* SO_RCVLOWAT of the client's socket: wake for that many bytes. */
static void l4_lowat(const struct l4_conn *c, size_t n)
{
	int v = (int)n;

	if (setsockopt(c->client.fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)))
		log_debug_ctx(L4_LOG_CTX(c), "SO_RCVLOWAT %d: %s", v,
			      strerror(errno));
}

/* A stalled peek is tried again after this long (ms), doubled at each
 * stall of the connection up to L4_HELLO_RETRY_MS << L4_HELLO_RETRY_MAX:
 * each peek walks every segment queued, and a client that sends its
 * hello in many small segments (what makes a stall) must not make edged
 * peek at them a hundred times a second. */
#define L4_HELLO_RETRY_MS 10
#define L4_HELLO_RETRY_MAX 5

/* Whether the client has shut its side down or failed: a readable socket
 * that shows no byte more than the last peek is either that or a socket
 * that SO_RCVLOWAT no longer holds back (the kernel reports it readable
 * early when its receive window or memory runs short, as many small
 * segments make it: tcp_epollin_ready), whose client is still sending. */
static bool l4_client_gone(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};

	return poll(&p, 1, 0) != 0 &&
	       (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* The stalled peek's pause is over: watch the client's socket again. */
static void l4_hello_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct l4_conn *c = arg;

	(void)fd;
	(void)what;
	if (c->state == L4_HELLO && event_add(c->hello, NULL))
		l4_end(c, OUTCOME_INTERNAL_ERROR);
}

/*
 * A readable socket with no byte more than the last peek, its client
 * still there: level-triggered, it would wake the loop at once again, so
 * stop watching it for a while (L4_HELLO_RETRY_MS, doubling) and peek
 * then (the bytes that arrive meanwhile wait in the kernel).
 * timeouts.client_hello still bounds the whole wait.
 */
static void l4_hello_stalled(struct l4_conn *c)
{
	unsigned k =
	    c->stalls < L4_HELLO_RETRY_MAX ? c->stalls : L4_HELLO_RETRY_MAX;
	struct timeval tv;

	c->stalls++;
	if (!c->hello_retry)
		c->hello_retry = evtimer_new(c->w->base, l4_hello_retry_cb, c);
	if (!c->hello_retry || event_del(c->hello) ||
	    evtimer_add(
		c->hello_retry,
		worker_timeout(c->w, (uint64_t)L4_HELLO_RETRY_MS << k, &tv)))
		l4_end(c, OUTCOME_INTERNAL_ERROR);
}

/*
 * TLS passthrough: the client's socket is readable. Peek (never read:
 * the upstream gets the stream from its first byte) and parse the
 * ClientHello from its start; not whole yet, wait (SO_RCVLOWAT) until as
 * many bytes are there as it needs at least; whole, pick the route by
 * its server name and go on as a plain TCP route's connection. A socket
 * readable with no byte more than the last peek saw has reached its
 * end or failed (the client left before its hello was whole), or is one
 * SO_RCVLOWAT no longer holds back (l4_client_gone, l4_hello_stalled).
 */
static void l4_hello_cb(evutil_socket_t fd, short what, void *arg)
{
	struct l4_conn *c = arg;
	char name[SNI_NAME_MAX + 1];
	enum sni_result r;
	size_t need = 0, idx;
	ssize_t n;

	(void)what;
	n = recv(fd, l4_peek, sizeof(l4_peek), MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 &&
	    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0 || ((size_t)n <= c->peeked && l4_client_gone(fd))) {
		l4_end(c, OUTCOME_CLIENT_CLOSED);
		return;
	}
	if ((size_t)n <= c->peeked) {
		l4_hello_stalled(c);
		return;
	}
	r = sni_parse(l4_peek, (size_t)n, name, &need);
	if (r == SNI_NEED_MORE) {
		c->peeked = (size_t)n;
		l4_lowat(c, need);
		return;
	}
	if (r != SNI_FOUND && r != SNI_NONE) {
		log_debug_ctx(L4_LOG_CTX(c),
			      "tls passthrough %s: %s after %zd bytes",
			      c->listen, sni_result_name(r), n);
		l4_end(c, OUTCOME_CLIENT_HELLO_INVALID);
		return;
	}
	if (c->peeked)
		l4_lowat(c, 1);
	event_del(c->hello);
	evtimer_del(c->timer);
	snprintf(c->sni, sizeof(c->sni), "%s", name);
	/* the route the name picks in the table as it is now (routes may
	 * have come or gone on the address since the accept) */
	c->rt = route_table_current(&c->w->sh->routes);
	if (!c->rt || route_tcp_sni(c->rt, c->listen, name, &idx)) {
		log_debug_ctx(L4_LOG_CTX(c),
			      "tls passthrough %s: no route for \"%s\"",
			      c->listen, name);
		l4_end(c, r == SNI_FOUND ? OUTCOME_SNI_UNKNOWN
					 : OUTCOME_SNI_MISSING);
		return;
	}
	l4_picked(c, idx);
	c->state = L4_ADMIT;
	l4_admit(c);
}

/* TLS passthrough: wait for the ClientHello, timeouts.client_hello at
 * most. */
static void l4_hello_begin(struct l4_conn *c)
{
	struct worker *w = c->w;
	struct timeval tv;

	c->state = L4_HELLO;
	c->hello = event_new(w->base, c->client.fd, EV_READ | EV_PERSIST,
			     l4_hello_cb, c);
	if (!c->hello || event_add(c->hello, NULL)) {
		l4_end(c, OUTCOME_INTERNAL_ERROR);
		return;
	}
	evtimer_add(c->timer,
		    worker_timeout(w, w->set.timeouts.client_hello_ms, &tv));
}

void l4_accept(struct worker *w, int fd, const struct sockaddr *sa,
	       socklen_t len, const char *listen)
{
	struct worker_shared *sh = w->sh;
	unsigned long n, cap = (unsigned long)w->set.limits.max_connections;
	struct l4_conn *c;
	size_t idx;
	int one = 1;

	c = calloc(1, sizeof(*c));
	if (c)
		c->timer = evtimer_new(w->base, l4_timer_cb, c);
	if (!c || !c->timer) {
		free(c);
		close(fd); /* not counted: nothing to record it with */
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	transport_tcp(&c->client, fd);
	c->w = w;
	snprintf(c->listen, sizeof(c->listen), "%s", listen);
	c->t0 = clk_now_ns();
	c->t0_real = clk_real_ns();
	if (len > sizeof(c->peer))
		len = sizeof(c->peer);
	memcpy(&c->peer, sa, len);
	if (c->peer.sa.sa_family == AF_INET6)
		inet_ntop(AF_INET6, &c->peer.v6.sin6_addr, c->client_ip,
			  sizeof(c->client_ip));
	else
		inet_ntop(AF_INET, &c->peer.v4.sin_addr, c->client_ip,
			  sizeof(c->client_ip));
	if (cidr_parse_addr(c->client_ip, &c->peer_cidr, NULL))
		memset(&c->peer_cidr, 0, sizeof(c->peer_cidr));
	if (hdr_request_id_new(c->id))
		snprintf(c->id, sizeof(c->id), "-");
	TAILQ_INSERT_TAIL(&w->l4->open, c, link);
	w->l4->n++;
	worker_lag_wake(w, fd);
	/* the same cap as HTTP connections: both count in connections */
	n = atomic_fetch_add(&sh->connections, 1) + 1;
	if (w->draining) {
		l4_end(c, OUTCOME_SHUTTING_DOWN);
		return;
	}
	if (n > cap) {
		log_warnx_rl(
		    "limits.max_connections (%lu) reached: a tcp route "
		    "%s connection closed (connection_limit)",
		    cap, c->listen);
		l4_end(c, OUTCOME_CONNECTION_LIMIT);
		return;
	}
	c->state = L4_ADMIT;
	/* what the table routes on the address: its plain route, counted on
	 * it at once; TLS passthrough routes, one of which the ClientHello
	 * will pick (then it counts); none, when the address's routes went
	 * and its listener is about to close */
	c->rt = route_table_current(&sh->routes);
	if (!c->rt || route_tcp_addr(c->rt, c->listen, &c->passthrough, &idx)) {
		log_debug_ctx(L4_LOG_CTX(c), "tcp route %s: no longer routed",
			      c->listen);
		l4_end(c, OUTCOME_ENVIRONMENT_NOT_FOUND);
		return;
	}
	if (c->passthrough) {
		l4_unroute(c); /* the hello may take seconds */
		l4_hello_begin(c);
		return;
	}
	l4_picked(c, idx);
	l4_admit(c);
}

/* The service's drain: the connections still waiting for a TLS
 * ClientHello are closed (shutting_down), as idle HTTP connections are;
 * the others go on until they end or the drain does. */
static void l4_drain_all(struct worker *w)
{
	struct l4_conn *c, *next;

	for (c = TAILQ_FIRST(&w->l4->open); c; c = next) {
		next = TAILQ_NEXT(c, link);
		if (c->state == L4_HELLO)
			l4_end(c, OUTCOME_SHUTTING_DOWN);
	}
}

/* The service's free: every connection of w ended at once (its loop has
 * stopped), each recorded as it stood (tunnel, or shutting_down). */
static void l4_free_all(struct worker *w)
{
	struct l4_conn *c;

	if (!w->l4)
		return;
	while ((c = TAILQ_FIRST(&w->l4->open)))
		l4_end(c, c->state == L4_TUNNEL ? OUTCOME_TUNNEL
						: OUTCOME_SHUTTING_DOWN);
	free(w->l4);
	w->l4 = NULL;
}

static size_t l4_busy(const struct worker *w)
{
	return w->l4 ? w->l4->n : 0;
}

static bool l4_mail(struct worker *w, const struct mailbox_msg *m)
{
	if (m->type != L4_MSG_WAKE)
		return false;
	l4_message(w, m->target, m->arg);
	return true;
}

const struct worker_service l4_service = {
    .name = "l4",
    .init = l4_set_init,
    .drain = l4_drain_all,
    .free = l4_free_all,
    .busy = l4_busy,
    .mail = l4_mail,
};
