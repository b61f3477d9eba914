// SPDX-License-Identifier: BSD-2-Clause
/*
 * conn.c - a client connection: Parse, Resolve, Admit, and conn_req_end(),
 * the one function every request ends in.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <inttypes.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analytics.h"
#include "sockio.h"
#include "conn.h"
#include "listener.h"
#include "stats.h"
#include "upstream.h"
#include "worker.h"

static void conn_parse(struct conn *c);
static void conn_write_cb(struct sockio *io, void *arg);
static uint64_t conn_idle_ms(const struct conn *c);
static void conn_idle_tick(struct conn *c);

static const char *status_text(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 408:
		return "Request Timeout";
	case 413:
		return "Content Too Large";
	case 414:
		return "URI Too Long";
	case 417:
		return "Expectation Failed";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	case 505:
		return "HTTP Version Not Supported";
	default:
		return "Error";
	}
}

/* The outcome for a request head the parser refused, by its status. */
static enum outcome outcome_of_parse(int status)
{
	switch (status) {
	case 414:
		return OUTCOME_URI_TOO_LONG;
	case 431:
		return OUTCOME_HEADERS_TOO_LARGE;
	case 501:
		return OUTCOME_NOT_IMPLEMENTED;
	case 505:
		return OUTCOME_VERSION_NOT_SUPPORTED;
	case 417:
		return OUTCOME_EXPECTATION_FAILED;
	default:
		return OUTCOME_BAD_REQUEST;
	}
}

void conn_write(struct conn *c, const void *p, size_t n)
{
	if (c->closed)
		return;
	evbuffer_add(sockio_output(c->io), p, n);
	c->r.bytes_out += n;
}

void conn_timer(struct conn *c, uint64_t ms)
{
	struct timeval tv;

	evtimer_add(c->timer, worker_timeout(c->w, ms, &tv));
}

/* Whether the request has body bytes the client may still send. */
static bool req_body_pending(const struct req *r)
{
	if (!r->head)
		return false; /* no complete head: the connection closes */
	if (!r->h.h.chunked && r->h.h.content_length <= 0)
		return false;
	return !r->p.req_body.done;
}

/* First value of header name in h, or NULL. */
static const struct h1_header *find_header(const struct h1_head *h,
					   const char *name)
{
	unsigned i;

	for (i = 0; i < h->nheaders; i++)
		if (h1_eq(h->headers[i].name, h->headers[i].name_len, name))
			return &h->headers[i];
	return NULL;
}

static void conn_record(struct conn *c, enum outcome o)
{
	struct analytics *a = c->w->sh->analytics;
	struct req *r = &c->r;
	struct analytics_event ev;
	const struct h1_header *f;

	if (!a)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.time_ns = r->t0_real;
	ev.duration_ns = worker_now_ns() - r->t0;
	if (r->t_resp && r->p.t_connect)
		ev.upstream_ns = r->t_resp - r->p.t_connect;
	ev.bytes_in = r->bytes_in;
	ev.bytes_out = r->bytes_out;
	ev.status = (uint16_t)r->status;
	ev.kind = o == OUTCOME_TUNNEL ? ANALYTICS_KIND_TUNNEL
				      : ANALYTICS_KIND_REQUEST;
	ev.outcome = (uint8_t)o;
	analytics_event_set(&ev, ANALYTICS_F_REQUEST_ID, r->id, SIZE_MAX);
	analytics_event_set(&ev, ANALYTICS_F_CLIENT_IP, c->client_ip, SIZE_MAX);
	if (r->routed) {
		analytics_event_set(&ev, ANALYTICS_F_PROJECT_ID,
				    r->m.project_id, SIZE_MAX);
		analytics_event_set(&ev, ANALYTICS_F_ENVIRONMENT_ID,
				    r->m.env_id, SIZE_MAX);
		analytics_event_set(&ev, ANALYTICS_F_DEPLOYMENT_ID,
				    r->m.deployment_id, SIZE_MAX);
	}
	if (r->head) {
		analytics_event_set(&ev, ANALYTICS_F_HOST, r->h.host,
				    r->h.host_len);
		analytics_event_set(&ev, ANALYTICS_F_METHOD, r->h.method_str,
				    r->h.method_len);
		analytics_event_set(&ev, ANALYTICS_F_PATH, r->h.target,
				    r->h.target_len);
		f = find_header(&r->h.h, "user-agent");
		if (f)
			analytics_event_set(&ev, ANALYTICS_F_USER_AGENT,
					    f->value, f->value_len);
		f = find_header(&r->h.h, "referer");
		if (f)
			analytics_event_set(&ev, ANALYTICS_F_REFERRER, f->value,
					    f->value_len);
	}
	analytics_enqueue(a, &ev);
}

/* Write the JSON error response for o. */
static void conn_send_error(struct conn *c, enum outcome o, const char *extra,
			    bool close)
{
	struct req *r = &c->r;
	char body[1024], head[1024];
	ssize_t blen;
	int status = outcome_status(o), hlen;

	blen = outcome_error_body(o, r->id, body, sizeof(body));
	if (blen < 0)
		blen = 0;
	hlen =
	    snprintf(head, sizeof(head),
		     "HTTP/1.1 %d %s\r\n"
		     "Content-Type: application/json\r\n"
		     "Content-Length: %zd\r\n"
		     "X-Request-ID: %s\r\n"
		     "Cache-Control: no-store\r\n"
		     "%s%s\r\n",
		     status, status_text(status), blen, r->id,
		     extra ? extra : "", close ? "Connection: close\r\n" : "");
	if (hlen < 0 || (size_t)hlen >= sizeof(head))
		return;
	conn_write(c, head, (size_t)hlen);
	if (!(r->head && r->h.method == H1_M_HEAD))
		conn_write(c, body, (size_t)blen);
	r->status = status;
	r->resp_started = true;
}

/* Shut down our side once the output is flushed, then read and discard
 * until the client closes (bounded in time and bytes). */
static void conn_linger(struct conn *c)
{
	if (evbuffer_get_length(sockio_output(c->io)) > 0)
		return; /* the write callback comes back here */
	shutdown(sockio_fd(c->io), SHUT_WR);
}

/* Flush what is queued for the client, then close (CONN_CLOSING). */
static void conn_finish(struct conn *c)
{
	if (c->closed)
		return;
	c->state = CONN_CLOSING;
	sockio_set_read_timeout(c->io, 0);
	sockio_set_watermarks(c->io, 0, 0);
	sockio_enable(c->io, EV_READ | EV_WRITE);
	conn_timer(c, CONN_LINGER_MS);
	if (c->client_eof && evbuffer_get_length(sockio_output(c->io)) == 0) {
		conn_close(c);
		return;
	}
	conn_linger(c);
}

/* c waits for its next head with nothing buffered: arm the idle timer
 * (it parks c after CONN_PARK_MS, closes it after the idle timeout). */
static void conn_idle_begin(struct conn *c)
{
	uint64_t ms = conn_idle_ms(c);

	c->kick = false;
	c->timer_mode = CONN_T_IDLE;
	c->idle_since = worker_now_ns();
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
	sockio_set_watermarks(c->io, h1->head_max + 1, PROXY_LOW_WATER);
	sockio_enable(c->io, EV_READ | EV_WRITE);
	if (evbuffer_get_length(sockio_input(c->io)) == 0 && !c->client_eof) {
		conn_idle_begin(c); /* nothing to parse: no kick needed */
		return;
	}
	c->kick = true;
	evtimer_add(c->timer, &zero);
}

_Static_assert(offsetof(struct req, p) + sizeof(struct proxy) ==
		   sizeof(struct req),
	       "conn_req_begin zeroes struct req up to p, then p to the end");

static void conn_req_begin(struct conn *c)
{
	struct req *r = &c->r;

	/* all but the request's and the response's header arrays, 3 KB
	 * each (see h1_zero_around); p is the last member */
	h1_zero_around(r, offsetof(struct req, p), r->h.h.headers,
		       sizeof(r->h.h.headers));
	h1_zero_around(&r->p, sizeof(*r) - offsetof(struct req, p),
		       r->p.resp.h.headers, sizeof(r->p.resp.h.headers));
	r->active = true;
	r->t0 = worker_now_ns();
	r->t0_real = worker_now_real_ns();
	h1_request_init(&r->h);
	c->nreq++;
}

void conn_req_end(struct conn *c, enum outcome o, const char *extra)
{
	struct worker_shared *sh = c->w->sh;
	struct req *r = &c->r;
	bool close;

	if (!r->active)
		return;
	r->active = false;
	if (r->p.state == PROXY_TUNNEL) {
		/* however a tunnel ends (closed, idle, error, edge closing the
		 * connection), it is recorded as one: proxy_release closes it
		 * and adds its byte counts before conn_record */
		o = OUTCOME_TUNNEL;
		c->close_after = true;
		c->client_eof = true;
	}
	if (!r->id[0] && hdr_request_id_new(r->id))
		snprintf(r->id, sizeof(r->id), "-");
	close = c->close_after || c->w->draining || !r->head ||
		req_body_pending(r) || r->p.client_close;
	if (outcome_sends_error(o)) {
		if (o == OUTCOME_CONNECTION_LIMIT ||
		    o == OUTCOME_HEADER_TIMEOUT || o == OUTCOME_BODY_TIMEOUT ||
		    o == OUTCOME_INTERNAL_ERROR || o == OUTCOME_FD_EXHAUSTED)
			close = true;
		if (!r->resp_started)
			conn_send_error(c, o, extra, close);
		else
			close = true; /* a relayed response was cut short */
	} else if (o == OUTCOME_CLIENT_CLOSED) {
		close = true;
		if (!r->resp_started)
			r->status = OUTCOME_CLIENT_CLOSED_STATUS;
	}
	proxy_release(c, o == OUTCOME_OK);
	conn_record(c, o);
	stats_request_done(o, r->status, r->t0, r->p.t_connect, r->t_resp);
	if (r->inflight)
		admit_inflight_leave(&sh->inflight, r->m.inflight);
	r->inflight = false;
	route_table_put(r->rt);
	r->rt = NULL;
	r->routed = false;
	free(r->head);
	r->head = NULL;
	if (c->closed)
		return;
	if (close)
		conn_finish(c);
	else
		conn_wait_head(c);
}

/* The head is complete: Resolve and Admit, then hand over to the proxy. */
static void conn_req_head(struct conn *c)
{
	struct worker *w = c->w;
	struct worker_shared *sh = w->sh;
	struct req *r = &c->r;
	struct h1_request *h = &r->h;
	enum route_status rs;
	const char *id, *path;
	size_t idn = 0, path_len;
	unsigned retry = 0;
	char extra[64];

	id = hdr_request_id_get(&h->h, &idn);
	if (id && idn < sizeof(r->id)) {
		memcpy(r->id, id, idn);
		r->id[idn] = '\0';
	} else if (hdr_request_id_new(r->id)) {
		conn_req_end(c, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	}
	if (!h->h.keep_alive || w->draining)
		c->close_after = true;

	/* Resolve */
	r->rt = route_table_current(&sh->routes);
	if (!r->rt || !h->host) {
		conn_req_end(c, OUTCOME_DOMAIN_NOT_FOUND, NULL);
		return;
	}
	path = h->path;
	path_len = h->query ? (size_t)(h->query + h->query_len - h->path)
			    : h->path_len;
	rs = route_lookup(r->rt, h->host, h->host_len, path, path_len, &r->m);
	if (rs == ROUTE_DOMAIN_NOT_FOUND) {
		conn_req_end(c, OUTCOME_DOMAIN_NOT_FOUND, NULL);
		return;
	}
	r->routed = true;
	if (rs == ROUTE_PROJECT_DISABLED) {
		conn_req_end(c, OUTCOME_PROJECT_DISABLED, NULL);
		return;
	}

	/* Admit */
	if (!route_ip_allowed(&r->m, &c->peer_cidr)) {
		conn_req_end(c, OUTCOME_IP_DENIED, NULL);
		return;
	}
	if (w->limiter && admit_take(w->limiter, &c->peer_cidr, worker_now_ns(),
				     &retry) == -EAGAIN) {
		snprintf(extra, sizeof(extra), "Retry-After: %u\r\n", retry);
		conn_req_end(c, OUTCOME_RATE_LIMITED, extra);
		return;
	}
	if (h->h.content_length >= 0 &&
	    !admit_body_declared_ok((uint64_t)h->h.content_length,
				    r->m.max_body_bytes)) {
		conn_req_end(c, OUTCOME_BODY_TOO_LARGE, NULL);
		return;
	}
	admit_body_init(&r->limit, r->m.max_body_bytes);
	if (admit_inflight_enter(&sh->inflight, r->m.inflight)) {
		conn_req_end(c, OUTCOME_OVERLOADED, NULL);
		return;
	}
	r->inflight = true;
	if (h->expect_continue && (h->h.chunked || h->h.content_length > 0)) {
		static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

		conn_write(c, cont, sizeof(cont) - 1);
	}
	c->state = CONN_PROXY;
	proxy_start(c);
}

static void conn_parse(struct conn *c)
{
	const struct h1_limits *h1 = &c->w->set.h1;
	struct evbuffer *in = sockio_input(c->io);
	struct req *r = &c->r;
	size_t len = evbuffer_get_length(in), n;
	const char *buf;
	int rc;

	if (c->state != CONN_HEAD || c->closed)
		return;
	c->kick = false; /* this parse is what the kick asked for */
	if (evbuffer_get_length(sockio_output(c->io)) > PROXY_HIGH_WATER)
		return; /* pipelined answers pile up: the write cb resumes */
	if (len == 0) {
		if (c->client_eof) {
			conn_close(c);
			return;
		}
		if (c->timer_mode == CONN_T_NONE)
			conn_idle_begin(c);
		return;
	}
	if (!r->active)
		conn_req_begin(c);
	if (c->timer_mode != CONN_T_HEADER) {
		c->timer_mode = CONN_T_HEADER;
		conn_timer(c, c->w->set.timeouts.header_ms);
	}
	n = len < h1->head_max + 1 ? len : h1->head_max + 1;
	buf = (const char *)evbuffer_pullup(in, (ssize_t)n);
	if (!buf) {
		conn_req_end(c, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	}
	rc = h1_parse_request(buf, n, h1, &r->h);
	if (rc == 0) {
		if (c->client_eof)
			conn_req_end(c, OUTCOME_CLIENT_CLOSED, NULL);
		return;
	}
	evtimer_del(c->timer);
	c->timer_mode = CONN_T_NONE;
	if (rc < 0) {
		r->bytes_in = n;
		c->close_after = true;
		log_debug("%s: bad request: %s at byte %zu", c->client_ip,
			  h1_err_name(r->h.h.err), r->h.h.err_off);
		conn_req_end(c, outcome_of_parse(r->h.h.status), NULL);
		return;
	}
	/* keep a copy of the head: the spans must outlive the input */
	r->head = malloc((size_t)rc);
	if (!r->head) {
		conn_req_end(c, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	}
	memcpy(r->head, buf, (size_t)rc);
	r->head_len = (size_t)rc;
	h1_parse_request(r->head, r->head_len, h1, &r->h);
	evbuffer_drain(in, r->head_len);
	r->bytes_in = r->head_len;
	conn_req_head(c);
}

static void conn_read_cb(struct sockio *io, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = sockio_input(io);

	switch (c->state) {
	case CONN_HEAD:
		conn_parse(c);
		break;
	case CONN_PROXY:
		proxy_client_readable(c);
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
		conn_parse(c);
		break;
	case CONN_PROXY:
		proxy_client_drained(c);
		break;
	case CONN_CLOSING:
		if (c->client_eof)
			conn_close(c);
		else
			conn_linger(c);
		break;
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
			conn_parse(c);
		} else {
			conn_close(c);
		}
		break;
	case CONN_PROXY:
		proxy_client_gone(c, eof);
		break;
	case CONN_CLOSING:
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
			conn_parse(c);
		} else if (c->timer_mode == CONN_T_HEADER && c->r.active) {
			c->close_after = true;
			conn_req_end(c, OUTCOME_HEADER_TIMEOUT, NULL);
		} else {
			conn_idle_tick(c);
		}
		break;
	case CONN_PROXY:
		proxy_timeout(c);
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
	if (c->state == CONN_PROXY)
		proxy_body_timeout(c);
}

/* Make the connection object for fd (a new or an unparked connection)
 * and wait for its next head. NULL when out of memory (fd closed). */
static struct conn *conn_open(struct worker *w, int fd,
			      const union conn_addr *peer, socklen_t len,
			      unsigned nreq)
{
	struct conn *c;

	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return NULL;
	}
	c->w = w;
	c->nreq = nreq;
	c->peer = *peer;
	c->peer_len = len;
	if (peer->sa.sa_family == AF_INET6)
		inet_ntop(AF_INET6, &peer->v6.sin6_addr, c->client_ip,
			  sizeof(c->client_ip));
	else
		inet_ntop(AF_INET, &peer->v4.sin_addr, c->client_ip,
			  sizeof(c->client_ip));
	if (cidr_parse_addr(c->client_ip, &c->peer_cidr, NULL))
		memset(&c->peer_cidr, 0, sizeof(c->peer_cidr));
	c->io = sockio_new(w->base, fd);
	c->timer = evtimer_new(w->base, conn_timer_cb, c);
	c->btimer = evtimer_new(w->base, conn_btimer_cb, c);
	if (!c->io || !c->timer || !c->btimer) {
		if (c->io)
			sockio_free(c->io);
		else
			close(fd);
		if (c->timer)
			event_free(c->timer);
		if (c->btimer)
			event_free(c->btimer);
		free(c);
		return NULL;
	}
	sockio_setcb(c->io, conn_read_cb, conn_write_cb, conn_event_cb, c);
	TAILQ_INSERT_TAIL(&w->conns, c, link);
	w->nconns++;
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
	size_t sz = conn_park_size(), i;
	struct conn_park_slab *slab;
	struct conn_park *k;

	if (!w->park_free) {
		slab = malloc(sizeof(*slab) + CONN_PARK_SLAB * sz);
		if (!slab)
			return NULL;
		slab->next = w->park_slabs;
		w->park_slabs = slab;
		for (i = CONN_PARK_SLAB; i-- > 0;) {
			k = (struct conn_park *)(void *)(slab->mem + i * sz);
			k->next_free = w->park_free;
			w->park_free = k;
		}
	}
	k = w->park_free;
	w->park_free = k->next_free;
	memset(k, 0, sz);
	return k;
}

/* Return an unused entry to w's slabs. */
static void conn_park_put(struct worker *w, struct conn_park *k)
{
	k->next_free = w->park_free;
	w->park_free = k;
}

/* Forget a parked connection: free it, and close its socket unless it
 * goes on as a struct conn (keep_fd). */
static void conn_park_free(struct conn_park *k, bool keep_fd)
{
	struct worker *w = k->w;

	event_del((struct event *)k->ev);
	TAILQ_REMOVE(&w->parked, k, link);
	atomic_fetch_sub(&w->sh->parked, 1);
	if (!keep_fd) {
		close(k->fd);
		w->nconns--;
		atomic_fetch_sub(&w->sh->connections, 1);
		if (w->accept_paused)
			listener_resume_all(w);
	}
	conn_park_put(w, k);
}

/* A parked connection's socket is readable (a request, or EOF), or its
 * idle deadline passed (closed without an answer, as an idle keep-alive
 * connection is). */
static void conn_park_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn_park *k = arg;
	struct worker *w = k->w;
	union conn_addr peer = k->peer;
	socklen_t len = k->peer_len;
	unsigned nreq = k->nreq;

	(void)fd;
	if (!(what & EV_READ)) {
		conn_park_free(k, false);
		worker_maybe_exit(w);
		return;
	}
	fd = k->fd;
	conn_park_free(k, true);
	w->nconns--; /* conn_open counts it again */
	if (!conn_open(w, fd, &peer, len, nreq)) {
		atomic_fetch_sub(&w->sh->connections, 1);
		worker_maybe_exit(w);
	}
}

/* Park fd for at most ms; the caller has counted it in w->nconns and
 * sh->connections. Returns -1 when out of memory, fd left to the caller. */
static int conn_park(struct worker *w, int fd, const union conn_addr *peer,
		     socklen_t len, unsigned nreq, uint64_t ms)
{
	struct timeval tv = {(time_t)(ms / 1000),
			     (suseconds_t)((ms % 1000) * 1000)};
	struct conn_park *k;

	k = conn_park_alloc(w);
	if (!k)
		return -1;
	k->w = w;
	k->fd = fd;
	k->nreq = nreq;
	k->peer = *peer;
	k->peer_len = len;
	if (event_assign((struct event *)k->ev, w->base, fd, EV_READ,
			 conn_park_cb, k) ||
	    event_add((struct event *)k->ev, &tv)) {
		conn_park_put(w, k);
		return -1;
	}
	TAILQ_INSERT_TAIL(&w->parked, k, link);
	atomic_fetch_add(&w->sh->parked, 1);
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
	uint64_t waited = (worker_now_ns() - c->idle_since) / 1000000;
	uint64_t limit = conn_idle_ms(c);
	struct conn_park *k;
	int fd;

	if (waited >= limit) {
		conn_close(c); /* idle keep-alive connection */
		return;
	}
	if (c->state != CONN_HEAD || c->r.active || c->client_eof ||
	    c->close_after || w->draining ||
	    evbuffer_get_length(sockio_input(c->io)) ||
	    evbuffer_get_length(sockio_output(c->io))) {
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
	/* hand the socket to the parked entry, then close c */
	fd = sockio_release(c->io);
	c->io = NULL;
	if (conn_park(w, fd, &c->peer, c->peer_len, c->nreq, limit - waited)) {
		close(fd); /* could not watch it (epoll): it closes */
		conn_close(c);
		return;
	}
	w->nconns++; /* the parked entry; conn_close takes c's away */
	w->parks++;
	atomic_fetch_add(&w->sh->connections, 1);
	conn_close(c);
}

/*
 * A connection refused at accept has its 503 queued: write it now and
 * close, without the lingering close, so that a storm of refused
 * connections (the cap is there because descriptors or memory run short)
 * holds no descriptor past this callback. What the client already sent
 * is read first (at most CONN_REJECT_DRAIN bytes), so that the close
 * sends a FIN behind the answer rather than a reset in front of it.
 */
#define CONN_REJECT_DRAIN 65536
static void conn_reject_now(struct conn *c)
{
	char buf[4096];
	size_t drained = 0;
	ssize_t n;
	int fd;

	if (c->closed)
		return;
	fd = sockio_fd(c->io);
	evbuffer_drain(sockio_input(c->io),
		       evbuffer_get_length(sockio_input(c->io)));
	while (drained < CONN_REJECT_DRAIN &&
	       (n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		drained += (size_t)n;
	evbuffer_write(sockio_output(c->io), fd);
	shutdown(fd, SHUT_WR);
	c->client_eof = true;
	conn_close(c);
}

void conn_accept(struct worker *w, int fd, const struct sockaddr *sa,
		 socklen_t len)
{
	struct worker_shared *sh = w->sh;
	unsigned long n, cap = (unsigned long)w->set.limits.max_connections;

	/* over cap: 503; the descriptor limit's cap is the listener's */
	union conn_addr peer;
	struct conn *c;
	int one = 1;

	memset(&peer, 0, sizeof(peer));
	if (len > sizeof(peer))
		len = sizeof(peer);
	memcpy(&peer, sa, len);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	n = atomic_fetch_add(&sh->connections, 1) + 1;
	if (n <= cap && !w->draining) {
		w->nconns++;
		if (conn_park(w, fd, &peer, len, 0,
			      w->set.timeouts.header_ms) == 0)
			return;
		w->nconns--;
	}
	c = conn_open(w, fd, &peer, len, 0);
	if (!c) {
		atomic_fetch_sub(&sh->connections, 1);
		return;
	}
	if (n > cap || w->draining) {
		evtimer_del(c->timer);
		c->kick = false;
		conn_req_begin(c);
		conn_req_end(c,
			     w->draining ? OUTCOME_SHUTTING_DOWN
					 : OUTCOME_CONNECTION_LIMIT,
			     NULL);
		conn_reject_now(c);
	}
}

void conn_close(struct conn *c)
{
	struct worker *w = c->w;

	if (c->closed)
		return;
	if (c->r.active) {
		c->close_after = true;
		c->client_eof = true;
		conn_req_end(c, OUTCOME_CLIENT_CLOSED, NULL);
		if (c->closed)
			return; /* conn_req_end closed it */
	}
	c->closed = true;
	proxy_release(c, false);
	sockio_free(c->io);
	c->io = NULL;
	event_free(c->timer);
	c->timer = NULL;
	event_free(c->btimer);
	c->btimer = NULL;
	atomic_fetch_sub(&w->sh->connections, 1);
	TAILQ_REMOVE(&w->conns, c, link);
	w->nconns--;
	TAILQ_INSERT_TAIL(&w->dead, c, link);
	event_active(w->reap, EV_TIMEOUT, 0);
	if (w->accept_paused)
		listener_resume_all(w);
	worker_maybe_exit(w);
}

void conn_reap(struct worker *w)
{
	struct conn *c;

	while ((c = TAILQ_FIRST(&w->dead))) {
		TAILQ_REMOVE(&w->dead, c, link);
		free(c->r.head);
		free(c);
	}
}

void conn_drain_all(struct worker *w)
{
	struct conn *c, *next;
	struct conn_park *k;

	while ((k = TAILQ_FIRST(&w->parked)))
		conn_park_free(k, false);

	for (c = TAILQ_FIRST(&w->conns); c; c = next) {
		next = TAILQ_NEXT(c, link);
		if (c->state == CONN_HEAD && !c->r.active)
			conn_close(c);
		else
			c->close_after = true;
	}
}

void conn_free_all(struct worker *w)
{
	struct conn *c;
	struct conn_park *k;
	struct conn_park_slab *slab;

	while ((k = TAILQ_FIRST(&w->parked)))
		conn_park_free(k, false);
	while ((c = TAILQ_FIRST(&w->conns)))
		conn_close(c);
	conn_reap(w);
	while ((slab = w->park_slabs)) {
		w->park_slabs = slab->next;
		free(slab);
	}
	w->park_free = NULL;
}
