// SPDX-License-Identifier: BSD-2-Clause
/*
 * listener.c - Accept: SO_REUSEPORT listening sockets, one per worker per
 * listen address, so the kernel spreads new connections over the workers
 * without a shared accept lock.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cidr.h"
#include "clk.h"
#include "listener.h"
#include "mailbox.h"
#include "proxyproto.h"
#include "sockreg.h"
#include "trusted.h"
#include "worker.h"

/* A worker's listening sockets (w->ls): HTTP and HTTPS first, then the
 * TCP routes' addresses. */
/* A connection of a proxy_protocol listener whose header is being read:
 * what it has of it so far (read off the socket only as far as the
 * header goes: peeked first), its peer, and where it goes then. */
struct listener_pp {
	TAILQ_ENTRY(listener_pp) link;
	struct worker *w;
	int fd;
	struct event *ev, *timer;
	listener_accept_fn *accept;
	struct sockaddr_storage peer;
	socklen_t peer_len;
	char text[CONFIG_ADDR_STR_MAX];
	size_t have;
	uint8_t buf[PP_V2_MAX];
};

struct listener_set {
	struct listener **ls;
	size_t n, cap;
	unsigned paused;  /* of them, paused (listener_pause) */
	struct log_rl rl; /* the pauses' log lines */
	TAILQ_HEAD(listener_pp_list, listener_pp) pp; /* headers being read */
};

struct listener {
	struct worker *w;
	int fd;
	struct event *ev;
	struct event *resume; /* ends a pause (listener_pause) */
	bool paused;
	uint64_t tcp_id; /* 0: HTTP; else the TCP routes' address's */
	bool pp;	 /* its connections begin with a PROXY header */
	listener_accept_fn *accept; /* where its connections go */
	char text[CONFIG_ADDR_STR_MAX];
};

static void listener_free(struct listener *l);

/* Whether accept failed for want of a resource that a closing connection
 * gives back (descriptors, socket buffers), rather than for this one
 * connection. */
static bool listener_errno_resource(int e)
{
	return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
}

/* Accept failed for want of a resource, or took one of the last spare
 * descriptors (why says which): stop watching the socket for
 * LISTENER_PAUSE_MS, or until one of the worker's connections closes
 * (listener_resume_all). The connections waiting stay in the kernel's
 * backlog. One log line per LISTENER_LOG_INTERVAL_MS per worker, counted
 * in edge_accept_pauses_total. */
static void listener_pause(struct listener *l, const char *why)
{
	struct worker *w = l->w;
	struct timeval tv;
	uint64_t held;

	if (l->paused)
		return;
	event_del(l->ev);
	l->paused = true;
	w->ls->paused++;
	atomic_fetch_add(&w->sh->accept_pauses, 1);
	evtimer_add(l->resume, worker_timeout(w, LISTENER_PAUSE_MS, &tv));
	if (log_rl_allow(&w->ls->rl, clk_now_ns(),
			 LISTENER_LOG_INTERVAL_MS * 1000000ull, &held))
		log_warnx("worker %u: accept on %s: %s: pausing accepts for "
			  "%d ms (%llu more pauses since the last message)",
			  w->id, l->text, why, LISTENER_PAUSE_MS,
			  (unsigned long long)held);
}

/* Whether accepting fd left fewer than LISTENER_FD_SPARE descriptors
 * free: the kernel hands out the lowest free number, so every number
 * below fd is in use. */
static bool listener_fds_short(const struct worker *w, int fd)
{
	unsigned long spare = w->nofile / 8;

	if (spare < LISTENER_FD_SPARE)
		spare = LISTENER_FD_SPARE;
	return w->nofile && (unsigned long)fd + 1 + spare > w->nofile;
}

/*
 * Whether one more connection could leave a request without a
 * descriptor for its upstream: a connection idle between requests
 * (parked after one) holds one descriptor, any other two (its
 * upstream's, or the one its request will need: a connection that has
 * sent nothing yet is about to), a pooled upstream connection one, and
 * edged keeps a reserve.
 */
static bool listener_fds_full(const struct worker *w)
{
	const struct worker_shared *sh = w->sh;
	unsigned long long conns, idle, est;

	if (!w->nofile)
		return false;
	conns = atomic_load_explicit(&sh->connections, memory_order_relaxed);
	idle = atomic_load_explicit(&sh->parked_idle, memory_order_relaxed);
	if (idle > conns)
		idle = conns; /* read apart: not in step */
	est = 2 * conns - idle +
	      atomic_load_explicit(&sh->up.idle_fds, memory_order_relaxed) +
	      w->fd_reserve;
	return est + 2 > w->nofile;
}

static void listener_resume(struct listener *l)
{
	if (!l->paused)
		return;
	l->paused = false;
	l->w->ls->paused--;
	evtimer_del(l->resume);
	if (l->fd >= 0)
		event_add(l->ev, NULL);
}

static void listener_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	listener_resume(arg);
}

void listener_resume_all(struct worker *w)
{
	struct listener_set *ls = w->ls;
	size_t i;

	for (i = 0; ls && i < ls->n && ls->paused; i++)
		listener_resume(ls->ls[i]);
}

_Static_assert(sizeof(((struct worker_shared *)0)->pp) ==
		   LISTENER_PP_N * sizeof(atomic_ullong),
	       "worker_shared.pp holds one counter per result");

static const char *const listener_pp_names[LISTENER_PP_N] = {
    "ok",     "untrusted", "malformed", "timeout",
    "closed", "local",	   "unknown",	"over_limit"};

const char *listener_pp_name(enum listener_pp_result r)
{
	return (unsigned)r < LISTENER_PP_N ? listener_pp_names[r] : "?";
}

/* Bytes of a refused connection read and thrown away before its close. */
#define LISTENER_REFUSE_DRAIN 65536

/* Close fd, a connection refused before its first byte was taken, with a
 * FIN rather than a reset: what the peer sent and the kernel holds (the
 * PROXY header only peeked at, a forged one, a request behind it) is
 * read and thrown away first (at most LISTENER_REFUSE_DRAIN bytes), since
 * close(2) on a socket with unread bytes resets it, as l4.c and conn.c
 * do. Bytes that arrive after the close still meet a reset. */
static void listener_close_refused(int fd)
{
	char buf[4096];
	size_t done = 0;
	ssize_t n;

	while (done < LISTENER_REFUSE_DRAIN &&
	       (n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		done += (size_t)n;
	close(fd);
}

/* The end of p: counted as r, why (NULL: nothing) logged; its connection
 * closed unless handed on (p->fd -1). */
static void listener_pp_end(struct listener_pp *p, enum listener_pp_result r,
			    const char *why)
{
	struct worker *w = p->w;

	atomic_fetch_add_explicit(&w->sh->pp[r], 1, memory_order_relaxed);
	if (why) {
		char a[INET6_ADDRSTRLEN] = "?";

		if (p->peer.ss_family == AF_INET)
			inet_ntop(AF_INET,
				  &((struct sockaddr_in *)&p->peer)->sin_addr,
				  a, sizeof(a));
		else if (p->peer.ss_family == AF_INET6)
			inet_ntop(AF_INET6,
				  &((struct sockaddr_in6 *)&p->peer)->sin6_addr,
				  a, sizeof(a));
		log_warnx_rl("listen %s: a connection from %s closed: PROXY "
			     "protocol header %s",
			     p->text, a, why);
	}
	/* counted as a connection while it waits (limits.max_connections,
	 * the descriptors): the accept function counts it again */
	atomic_fetch_sub(&w->sh->connections, 1);
	if (p->fd >= 0) {
		listener_close_refused(p->fd);
		listener_resume_all(w);
	}
	TAILQ_REMOVE(&w->ls->pp, p, link);
	event_free(p->ev);
	event_free(p->timer);
	free(p);
}

static void listener_pp_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct listener_pp *p = arg;
	struct pp_info pi;
	ssize_t n;
	int r;

	(void)what;
	/* look first: what follows the header is the connection's own */
	n = recv(fd, p->buf + p->have, sizeof(p->buf) - p->have, MSG_PEEK);
	if (n < 0 &&
	    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		listener_pp_end(p, LISTENER_PP_CLOSED,
				n == 0 ? "cut short: the peer closed"
				       : "cut short: the connection failed");
		return;
	}
	r = pp_parse(p->buf, p->have + (size_t)n, &pi);
	if (r < 0) {
		listener_pp_end(p, LISTENER_PP_BAD, pp_reason(r));
		return;
	}
	/* all of it is header (whole, or not yet): taken off the socket */
	if (r > 0 && (size_t)r <= p->have) { /* never: pp_parse waited */
		listener_pp_end(p, LISTENER_PP_BAD, "out of step");
		return;
	}
	n = r == PP_NEED_MORE ? n : (ssize_t)((size_t)r - p->have);
	if (recv(fd, p->buf + p->have, (size_t)n, 0) != n) {
		listener_pp_end(p, LISTENER_PP_CLOSED,
				"cut short: the connection failed");
		return;
	}
	p->have += (size_t)n;
	if (r == PP_NEED_MORE)
		return;
	if (pi.unknown) {
		/* a client the sender could not name: neither its address
		 * nor the balancer's may stand for it (the balancer's would
		 * make its X-Forwarded-For believed) */
		listener_pp_end(p, LISTENER_PP_UNKNOWN,
				"names no client address (UNKNOWN, UNSPEC or "
				"UNIX)");
		return;
	}
	{
		struct worker *w = p->w;
		listener_accept_fn *accept = p->accept;
		struct sockaddr_storage ss = pi.local ? p->peer : pi.src;
		socklen_t len = pi.local ? p->peer_len : pi.src_len;
		char text[CONFIG_ADDR_STR_MAX];

		memcpy(text, p->text, sizeof(text));
		p->fd = -1; /* handed on */
		listener_pp_end(
		    p, pi.local ? LISTENER_PP_LOCAL : LISTENER_PP_OK, NULL);
		worker_sync_settings(w);
		accept(w, fd, (struct sockaddr *)&ss, len, text);
	}
}

static void listener_pp_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	listener_pp_end(arg, LISTENER_PP_TIMEOUT,
			"not whole within timeouts.client_header");
}

/* A connection on l's proxy_protocol address: from a trusted peer its
 * header is read, then it goes on as the client's the header names;
 * from any other peer it is closed at once, without a byte. */
static void listener_pp_start(struct listener *l, int fd,
			      const struct sockaddr_storage *ss, socklen_t len)
{
	struct worker *w = l->w;
	struct listener_pp *p;
	struct cidr peer;
	char a[INET6_ADDRSTRLEN] = "";
	struct timeval tv;
	uint64_t ms = w->set.timeouts.client_header_ms;
	unsigned long long n;

	if (ss->ss_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr,
			  a, sizeof(a));
	else if (ss->ss_family == AF_INET6)
		inet_ntop(AF_INET6,
			  &((const struct sockaddr_in6 *)ss)->sin6_addr, a,
			  sizeof(a));
	if (cidr_parse_addr(a, &peer, NULL) ||
	    !trusted_has(&w->set.trusted_proxies, &peer)) {
		atomic_fetch_add_explicit(&w->sh->pp[LISTENER_PP_UNTRUSTED], 1,
					  memory_order_relaxed);
		log_warnx_rl("listen %s: a connection from %s closed: not in "
			     "trusted_proxies (this address takes the PROXY "
			     "protocol)",
			     l->text, a);
		listener_close_refused(fd);
		return;
	}
	/* a wait holds a descriptor and 4 KiB: it counts as a connection */
	n = atomic_fetch_add(&w->sh->connections, 1) + 1;
	if (n > (unsigned long long)w->set.limits.max_connections ||
	    w->draining) {
		atomic_fetch_sub(&w->sh->connections, 1);
		atomic_fetch_add_explicit(&w->sh->pp[LISTENER_PP_OVER], 1,
					  memory_order_relaxed);
		log_warnx_rl("listen %s: a connection from %s closed: "
			     "limits.max_connections (%llu) reached",
			     l->text, a,
			     (unsigned long long)w->set.limits.max_connections);
		listener_close_refused(fd);
		return;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		atomic_fetch_sub(&w->sh->connections, 1);
		close(fd);
		return;
	}
	p->w = w;
	p->fd = fd;
	p->accept = l->accept;
	memcpy(&p->peer, ss, sizeof(*ss));
	p->peer_len = len;
	memcpy(p->text, l->text, sizeof(p->text));
	p->ev = event_new(w->base, fd, EV_READ | EV_PERSIST,
			  listener_pp_read_cb, p);
	p->timer = evtimer_new(w->base, listener_pp_timer_cb, p);
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000 * 1000);
	if (!p->ev || !p->timer || event_add(p->ev, NULL) ||
	    evtimer_add(p->timer, &tv)) {
		if (p->ev)
			event_free(p->ev);
		if (p->timer)
			event_free(p->timer);
		free(p);
		atomic_fetch_sub(&w->sh->connections, 1);
		close(fd);
		return;
	}
	TAILQ_INSERT_TAIL(&w->ls->pp, p, link);
}

static void listener_accept_cb(evutil_socket_t fd, short what, void *arg)
{
	struct listener *l = arg;
	unsigned i;

	(void)what;
	/* a reload published before these connections came: theirs */
	worker_sync_settings(l->w);
	for (i = 0; i < LISTENER_ACCEPT_BATCH; i++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int cfd;

		if (listener_fds_full(l->w)) {
			/* as many as the descriptor limit allows: the next
			 * ones wait in the backlog for one to close */
			listener_pause(l, "as many connections as the "
					  "descriptor limit allows");
			return;
		}
		cfd = accept4(fd, (struct sockaddr *)&ss, &len,
			      SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (listener_errno_resource(errno)) {
				int e = errno;

				worker_read_nofile(l->w); /* changed? */
				listener_pause(l, strerror(e));
			} else if (errno != EAGAIN && errno != EWOULDBLOCK)
				log_warn("accept on %s", l->text);
			return;
		}
		if (l->w->id < CONFIG_WORKERS_MAX)
			atomic_fetch_add_explicit(
			    &l->w->sh->accepted[l->w->id].n, 1,
			    memory_order_relaxed);
		if (l->pp)
			listener_pp_start(l, cfd, &ss, len);
		else
			l->accept(l->w, cfd, (struct sockaddr *)&ss, len,
				  l->text);
		if (listener_fds_short(l->w, cfd)) {
			/* what is left goes to upstreams of the connections
			 * accepted, not to more clients */
			listener_pause(l, "descriptors nearly exhausted");
			return;
		}
	}
}

int listener_socket(const struct config_addr *a, int *fd, struct errbuf *err)
{
	int one = 1, s, rc;

	s = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		   0);
	if (s < 0)
		goto fail;
	if (setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    setsockopt(s, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)))
		goto fail;
	if (a->ss.ss_family == AF_INET6 &&
	    setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)))
		goto fail;
	if (bind(s, (const struct sockaddr *)&a->ss, a->len) ||
	    listen(s, LISTENER_BACKLOG))
		goto fail;
	*fd = s;
	return 0;
fail:
	rc = -errno;
	errbuf_set(err, "listen %s: %s", a->text, strerror(errno));
	if (s >= 0)
		close(s);
	return rc;
}

int listener_probe(const struct config_addr *a, struct errbuf *err)
{
	int one = 1, rc = 0, s;

	s = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		rc = -errno;
		errbuf_set(err, "listen %s: %s", a->text, strerror(errno));
		return rc;
	}
	/* SO_REUSEADDR: connections in TIME_WAIT, or still open from a
	 * listener that is gone, do not count */
	if (setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    (a->ss.ss_family == AF_INET6 &&
	     setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)))) {
		rc = -errno;
		errbuf_set(err, "listen %s: %s", a->text, strerror(errno));
	} else if (bind(s, (const struct sockaddr *)&a->ss, a->len)) {
		rc = -errno;
		if (errno == EADDRINUSE)
			errbuf_set(
			    err,
			    "listen %s: address already in use by another "
			    "process (another edged?); edged shares a port "
			    "only among its own workers",
			    a->text);
		else
			errbuf_set(err, "listen %s: %s", a->text,
				   strerror(errno));
	}
	close(s);
	return rc;
}

/* A listener for w on fd (taken), its connections handed to accept, its
 * events made on w's loop (not added). 0 and *out, or -ENOMEM. */
static int listener_make(struct worker *w, int fd, const char *text,
			 uint64_t tcp_id, bool pp, listener_accept_fn *accept,
			 struct listener **out)
{
	struct listener *l = calloc(1, sizeof(*l));

	if (!l) {
		close(fd);
		return -ENOMEM;
	}
	l->pp = pp;
	l->w = w;
	l->fd = fd;
	l->tcp_id = tcp_id;
	l->accept = accept;
	snprintf(l->text, sizeof(l->text), "%s", text);
	l->ev = event_new(w->base, l->fd, EV_READ | EV_PERSIST,
			  listener_accept_cb, l);
	l->resume = evtimer_new(w->base, listener_resume_cb, l);
	if (!l->ev || !l->resume) {
		listener_free(l);
		return -ENOMEM;
	}
	*out = l;
	return 0;
}

/* Stop accepting and close the socket; idempotent. */
static void listener_close(struct listener *l)
{
	if (!l)
		return;
	if (l->resume)
		listener_resume(l); /* forget the pause */
	if (l->ev)
		event_del(l->ev);
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}

static void listener_free(struct listener *l)
{
	if (!l)
		return;
	listener_close(l);
	if (l->ev)
		event_free(l->ev);
	if (l->resume)
		event_free(l->resume);
	free(l);
}

/* Add l (made) to w's set and start accepting on it. 0, or -ENOMEM /
 * -EINVAL with l freed. */
static int listener_add(struct worker *w, struct listener *l)
{
	struct listener_set *ls = w->ls;
	size_t cap = ls->cap ? ls->cap * 2 : 8;
	struct listener **v;

	if (ls->n == ls->cap) {
		v = realloc(ls->ls, cap * sizeof(*v));
		if (!v) {
			listener_free(l);
			return -ENOMEM;
		}
		ls->ls = v;
		ls->cap = cap;
	}
	ls->ls[ls->n++] = l;
	return event_add(l->ev, NULL) ? -EINVAL : 0;
}

/* Close and forget listener i of w. */
static void listener_drop(struct worker *w, size_t i)
{
	struct listener_set *ls = w->ls;

	listener_free(ls->ls[i]);
	memmove(&ls->ls[i], &ls->ls[i + 1], (ls->n - i - 1) * sizeof(*ls->ls));
	ls->n--;
}

/* fd, listening on a (k), one more of w's listeners, noted for a
 * successor. 0 or -errno with err set (fd closed). */
static int listener_adopt(struct worker *w, int fd, enum sockreg_kind k,
			  const struct config_addr *a, struct errbuf *err)
{
	const struct listener_accepts *acc = w->sh->accepts;
	struct listener *l;
	int rc = sockreg_add(k, a->text, 0, fd);

	if (rc) {
		close(fd);
		errbuf_set(err, "listen %s: %s", a->text, strerror(-rc));
		return rc;
	}
	rc = listener_make(w, fd, a->text, 0, a->proxy_protocol,
			   k == SOCKREG_HTTPS ? acc->https : acc->http, &l);
	if (rc == 0)
		rc = listener_add(w, l);
	if (rc)
		errbuf_set(err, "listen %s: %s", a->text, strerror(-rc));
	return rc;
}

/* The service's init: w's HTTP and HTTPS listeners, a predecessor's
 * (sockreg_take) or bound now (the first worker's socket is then the
 * process's first on the address: nothing else may listen there,
 * listener_probe); each noted for a successor (sockreg_add). The last
 * worker also takes the predecessor's sockets left on its addresses (it
 * had more workers): connections waiting in them are accepted, not
 * reset when the predecessor exits. */
static int listener_init(struct worker *w, struct errbuf *err)
{
	const struct config *cfg = w->sh->cfg;
	bool last = w->id + 1 == cfg->workers;
	size_t i;
	int fd, rc;

	w->ls = calloc(1, sizeof(*w->ls));
	if (!w->ls) {
		errbuf_set(err, "worker %u: out of memory", w->id);
		return -ENOMEM;
	}
	TAILQ_INIT(&w->ls->pp);
	for (i = 0; i < cfg->n_listen + cfg->tls.n_listen; i++) {
		bool tls = i >= cfg->n_listen;
		const struct config_addr *a =
		    tls ? &cfg->tls.listen[i - cfg->n_listen] : &cfg->listen[i];

		enum sockreg_kind k = tls ? SOCKREG_HTTPS : SOCKREG_HTTP;

		fd = sockreg_take(k, a->text);
		if (fd < 0 && w->id == 0 && (rc = listener_probe(a, err)) != 0)
			return rc;
		if (fd < 0 && (rc = listener_socket(a, &fd, err)) != 0)
			return rc;
		rc = listener_adopt(w, fd, k, a, err);
		while (rc == 0 && last && (fd = sockreg_take(k, a->text)) >= 0)
			rc = listener_adopt(w, fd, k, a, err);
		if (rc)
			return rc;
	}
	return 0;
}

static void listener_drain(struct worker *w)
{
	size_t i;

	for (i = 0; w->ls && i < w->ls->n; i++)
		listener_close(w->ls->ls[i]);
	/* a connection still in its PROXY header has sent no request */
	while (w->ls && !TAILQ_EMPTY(&w->ls->pp))
		listener_pp_end(TAILQ_FIRST(&w->ls->pp), LISTENER_PP_CLOSED,
				NULL);
}

static void listener_fini(struct worker *w)
{
	size_t i;

	if (!w->ls)
		return;
	while (!TAILQ_EMPTY(&w->ls->pp))
		listener_pp_end(TAILQ_FIRST(&w->ls->pp), LISTENER_PP_CLOSED,
				NULL);
	for (i = 0; i < w->ls->n; i++)
		listener_free(w->ls->ls[i]);
	free(w->ls->ls);
	free(w->ls);
	w->ls = NULL;
}

/* LISTENER_MSG_OPEN: fd (m->arg) listening on address m->ptr becomes
 * a listener m->target of w (a worker may have several of one target:
 * an upgrade's extra sockets); w's of another target on that address go
 * first. */
static void listener_open_msg(struct worker *w, const struct mailbox_msg *m)
{
	struct listener *l;
	int fd = (int)m->arg, rc;
	size_t i;

	for (i = w->ls->n; i-- > 0;)
		if (w->ls->ls[i]->tcp_id && w->ls->ls[i]->tcp_id != m->target &&
		    strcmp(w->ls->ls[i]->text, m->ptr) == 0)
			listener_drop(w, i);
	if (w->draining) {
		close(fd);
		return;
	}
	rc = listener_make(w, fd, m->ptr, m->target, m->flags != 0,
			   w->sh->accepts->tcp, &l);
	if (rc == 0)
		rc = listener_add(w, l);
	if (rc)
		log_warnx("worker %u: listen %s: %s", w->id,
			  (const char *)m->ptr, strerror(-rc));
}

/* LISTENER_MSG_CLOSE: w's listeners m->target close. */
static void listener_close_msg(struct worker *w, const struct mailbox_msg *m)
{
	size_t i;

	for (i = w->ls->n; i-- > 0;)
		if (w->ls->ls[i]->tcp_id == m->target)
			listener_drop(w, i);
}

/* LISTENER_MSG_PP: w's listener m->target takes a PROXY header (flags)
 * on the connections it accepts from now on, or not. */
static void listener_pp_msg(struct worker *w, const struct mailbox_msg *m)
{
	size_t i;

	for (i = 0; i < w->ls->n; i++)
		if (w->ls->ls[i]->tcp_id == m->target)
			w->ls->ls[i]->pp = m->flags != 0;
}

static bool listener_mail(struct worker *w, const struct mailbox_msg *m)
{
	switch (m->type) {
	case LISTENER_MSG_PP:
		listener_pp_msg(w, m);
		return true;
	case LISTENER_MSG_OPEN:
		listener_open_msg(w, m);
		free(m->ptr);
		return true;
	case LISTENER_MSG_CLOSE:
		listener_close_msg(w, m);
		return true;
	default:
		return false;
	}
}

/* A message that will never be handled: an open's socket is closed. */
static bool listener_mail_drop(struct worker *w, const struct mailbox_msg *m)
{
	(void)w;
	if (m->type == LISTENER_MSG_OPEN) {
		close((int)m->arg);
		free(m->ptr);
		return true;
	}
	return m->type == LISTENER_MSG_CLOSE || m->type == LISTENER_MSG_PP;
}

const struct worker_service listener_service = {
    .name = "listener",
    .init = listener_init,
    .drain = listener_drain,
    .free = listener_fini,
    .mail = listener_mail,
    .mail_drop = listener_mail_drop,
};

int listener_post_open(struct worker *w, int fd, const char *text, uint64_t id,
		       bool pp)
{
	struct mailbox_msg m = {.type = LISTENER_MSG_OPEN,
				.flags = pp,
				.target = id,
				.arg = (uint64_t)fd};
	int rc;

	m.ptr = strdup(text);
	if (!m.ptr)
		return -ENOMEM;
	rc = mailbox_post(w->mbox, &m);
	if (rc)
		free(m.ptr);
	return rc;
}

int listener_post_close(struct worker *w, uint64_t id)
{
	struct mailbox_msg m = {.type = LISTENER_MSG_CLOSE, .target = id};

	return mailbox_post(w->mbox, &m);
}

int listener_post_pp(struct worker *w, uint64_t id, bool pp)
{
	struct mailbox_msg m = {
	    .type = LISTENER_MSG_PP, .flags = pp, .target = id};

	return mailbox_post(w->mbox, &m);
}
