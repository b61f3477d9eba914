// SPDX-License-Identifier: BSD-2-Clause
/*
 * proxy.c - Select, Forward and Respond for one request: read a small
 * body whole first, choose an endpoint, connect (or reuse a pooled
 * connection), send the rebuilt head and the body, parse the response
 * head, rebuild it for the client and relay the body, with backpressure
 * both ways (a side stops reading while the other side has
 * PROXY_HIGH_WATER bytes queued). A 101 to a forwarded Upgrade turns the
 * pair into a tunnel (tunnel.h) until it closes.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clk.h"
#include "edge_assert.h"
#include "h2up.h"
#include "hedge.h"
#include "inject.h"
#include "req.h"
#include "proxy.h"
#include "siphash.h"
#include "sockio.h"
#include "tls.h"
#include "tls_up.h"
#include "tunnel.h"
#include "upreg.h"
#include "upstream.h"
#include "worker.h"

/* The request's upstream side: its state, in the request's up. */
#define PX(r) ((struct proxy *)(void *)(r)->up)
_Static_assert(sizeof(struct proxy) <= REQ_UPSTREAM_SIZE,
	       "struct proxy fits struct req's up");
_Static_assert(_Alignof(struct proxy) <= _Alignof(max_align_t),
	       "struct proxy's alignment");

static void proxy_connect(struct req *r);
static void proxy_relay(struct req *r);
static void proxy_h2_cb(struct h2up_stream *st, unsigned ev, void *arg);
static void proxy_h2_retry(struct req *r, bool fresh);
static void proxy_hedge_arm(struct req *r);
static void proxy_hedge_free(struct req *r);
static bool proxy_hedge_takeover(struct req *r);

/* The upstream side the request has: an HTTP/1.1 connection or an
 * HTTP/2 stream, and the buffers of either (the response's bytes as
 * they come, the request's to send). */
static bool px_up(const struct proxy *p)
{
	return p->uio || p->h2;
}

/* A response read for injection (inject.h): what the upstream sent from
 * its head on, and, until it is decided, what is made of it. */
struct proxy_inject {
	struct evbuffer *raw;	/* as it came, the head first */
	struct evbuffer *scan;	/* a copy of the body's bytes (framing) */
	struct evbuffer *coded; /* the body's data (framing read) */
	struct evbuffer *page;	/* ... decoded */
	struct body fr;		/* the body's framing */
	struct dec_stream *dec; /* its decoder, NULL: not coded */
	size_t head_len;
	bool stream;  /* streamed instead (raw NULL): the body pump's */
	bool decided; /* raw is the response now, as it goes on */
	bool broken;  /* out of memory while copying: passed on */
	char *etag;   /* an injected page's weak ETag */
};

/* Copy what from holds to the end of to. 0 or -1. */
static int px_copy(struct evbuffer *from, struct evbuffer *to)
{
	struct evbuffer_ptr pos;
	struct evbuffer_iovec v;

	if (evbuffer_ptr_set(from, &pos, 0, EVBUFFER_PTR_SET))
		return 0;
	while (evbuffer_peek(from, -1, &pos, &v, 1) > 0 && v.iov_len) {
		if (evbuffer_add(to, v.iov_base, v.iov_len))
			return -1;
		if (evbuffer_ptr_set(from, &pos, v.iov_len, EVBUFFER_PTR_ADD))
			break;
	}
	return 0;
}

/* The response's bytes: the upstream's input, or, for a response read
 * for injection, its raw buffer, where that input is moved (and, until
 * it is decided, copied for the framing). */
static struct evbuffer *px_in(const struct proxy *p)
{
	struct proxy_inject *ij = p->inj;
	struct evbuffer *in;

	if (ij && ij->raw && !px_up(p))
		return ij->raw;
	in = p->h2 ? h2up_stream_in(p->h2) : sockio_input(p->uio);
	if (!ij || !ij->raw)
		return in;
	if (evbuffer_get_length(in)) {
		if (!ij->decided && px_copy(in, ij->scan))
			ij->broken = true;
		/* a page comes in many reads, maybe of a byte each */
		if (sockio_move(in, ij->raw, evbuffer_get_length(in)))
			ij->broken = true;
	}
	return ij->raw;
}

static void proxy_inject_free(struct proxy_inject *ij)
{
	if (!ij)
		return;
	if (ij->raw)
		evbuffer_free(ij->raw);
	if (ij->scan)
		evbuffer_free(ij->scan);
	if (ij->coded)
		evbuffer_free(ij->coded);
	if (ij->page)
		evbuffer_free(ij->page);
	body_free(&ij->fr);
	dec_stream_free(ij->dec);
	free(ij->etag);
	free(ij);
}

static struct evbuffer *px_out(const struct proxy *p)
{
	return p->h2 ? h2up_stream_out(p->h2) : sockio_output(p->uio);
}

/* Read the upstream or not while relaying (an HTTP/2 stream's window
 * bounds it: its timer, the response's body timeout, stops while the
 * client holds it back, as the connection's read timeout does). */
static void px_read(struct req *r, bool on)
{
	struct proxy *p = PX(r);

	if (p->h2) {
		if (on)
			req_timer(r, r->w->set.timeouts.upstream_response_ms);
		else
			req_timer_stop(r);
		return;
	}
	if (!p->uio)
		return;
	if (on)
		sockio_enable(p->uio, EV_READ);
	else
		sockio_disable(p->uio, EV_READ);
}
/* Arm the request's timer for ms (0: none) while edge waits for the
 * upstream before the response head (connect, backoff, response head),
 * sooner when the request's deadline (timeouts.request_total) comes
 * first: proxy_timeout then ends it 504 deadline_exceeded. */
static void px_timer(struct req *r, uint64_t ms)
{
	struct proxy *p = PX(r);
	uint64_t now, left;

	if (p->deadline) {
		now = clk_now_ns();
		left = p->deadline > now
			   ? (p->deadline - now + 999999) / 1000000
			   : 0;
		p->capped = ms == 0 || left <= ms;
		if (p->capped)
			ms = left ? left : 1;
	}
	req_timer(r, ms);
}

/*
 * The request's timer fired before its response head: whether it was
 * the deadline's. A timer capped by the deadline that fires before it
 * (libevent counts from the loop's cached time, which may be earlier
 * than the clock the deadline was read with) is armed again for what
 * is left, and the phase's own timeout has not come: true too, nothing
 * else to do. Ends the request 504 deadline_exceeded when it passed.
 */
static bool px_deadline(struct req *r)
{
	struct proxy *p = PX(r);
	uint64_t now;

	if (!p->deadline || r->resp_started)
		return false;
	now = clk_fresh_ns();
	if (now >= p->deadline) {
		/* the whole request's time is up, retries included: not
		 * the endpoint's failure (its own timeouts say when it
		 * fails) */
		p->reusable = false;
		req_end(r, OUTCOME_DEADLINE_EXCEEDED, NULL);
		return true;
	}
	if (!p->capped)
		return false;
	req_timer(r, (p->deadline - now + 999999) / 1000000);
	return true;
}

static void proxy_body_clock(struct req *r);
static void proxy_slot_unlink(struct req *r);
static void proxy_slot_freed(struct worker *w);
static void proxy_request_sent(struct req *r);
static void proxy_send_stalled(struct req *r);

/* A pooled upstream connection closed, failed or sent unsolicited bytes:
 * out of the pool and closed (arg: its endpoint). */
static void proxy_pool_read_cb(struct sockio *uio, void *arg)
{
	upstream_pool_forget(arg, uio);
	sockio_free(uio);
}

static void proxy_pool_event_cb(struct sockio *uio, short what, void *arg)
{
	(void)what;
	proxy_pool_read_cb(uio, arg);
}

static void proxy_pool_release(void *obj, int fd)
{
	(void)fd;
	sockio_free(obj);
}

/* Close the upstream connection, or give a clean one to the pool as it
 * is (still registered, watched for EOF and stray bytes). */
static void proxy_drop_uio(struct req *r, bool give)
{
	struct proxy *p = PX(r);
	struct sockio *uio = p->uio;

	if (p->h2) {
		h2up_stream_close(p->h2); /* reset when not complete */
		p->h2 = NULL;
	}
	if (!uio)
		return;
	p->uio = NULL;
	if (give && p->u.ep && evbuffer_get_length(sockio_input(uio)) == 0 &&
	    evbuffer_get_length(sockio_output(uio)) == 0) {
		sockio_setcb(uio, proxy_pool_read_cb, NULL, proxy_pool_event_cb,
			     p->u.ep);
		sockio_set_read_timeout(uio, 0);
		sockio_set_watermarks(uio, 0, 0);
		sockio_enable(uio, EV_READ);
		upstream_pool_give_tag(r->w->up, p->u.ep, sockio_fd(uio), uio,
				       p->u.tag, clk_now_ns());
		return;
	}
	sockio_free(uio);
}

static uint64_t proxy_retry_key(const struct req *r);

/*
 * What r's end says of its deployment's upstream (docs/upstream.md,
 * "Circuit breaking"): relayed (ok, or a tunnel), a failure when the
 * upstream's status was 5xx, else a success; ended by edge, a failure
 * when the upstream could not be reached, reset or closed the connection,
 * answered with nothing valid, failed TLS or did not answer in time (its
 * timeout or the request's deadline); any other end (the client left, a
 * body too large, edge's own error) says nothing.
 */
static enum circuit_result proxy_circuit_result(const struct req *r, bool ok)
{
	if (ok || r->outcome == OUTCOME_TUNNEL)
		return r->up_status >= 500 && r->up_status <= 599
			   ? CIRCUIT_FAILURE
			   : CIRCUIT_SUCCESS;
	switch (r->outcome) {
	case OUTCOME_UPSTREAM_UNAVAILABLE:
	case OUTCOME_UPSTREAM_TIMEOUT:
	case OUTCOME_UPSTREAM_BAD_RESPONSE:
	case OUTCOME_UPSTREAM_CLOSED:
	case OUTCOME_UPSTREAM_TLS_FAILED:
	case OUTCOME_DEADLINE_EXCEEDED:
		return CIRCUIT_FAILURE;
	default:
		return CIRCUIT_NONE;
	}
}

static void proxy_release(struct req *r, bool ok)
{
	struct proxy *p = PX(r);
	struct tunnel_stats st;
	bool give;

	proxy_hedge_free(r); /* a hedge still running lost */
	if (p->circuit) {
		p->circuit = false;
		upstream_circuit_end(r->w->up, proxy_retry_key(r), r->m.circuit,
				     clk_now_ns(), p->circuit_trial,
				     proxy_circuit_result(r, ok));
	}

	if (p->tun) {
		tunnel_stats(p->tun, &st);
		r->bytes_in += st.bytes_up;
		r->bytes_out += st.bytes_down;
		r->mover = tunnel_movers(&st);
		tunnel_free(p->tun);
		p->tun = NULL;
	}
	if (p->u.ep && p->u.counted)
		upreg_count_bytes(upstream_ep_shared(p->u.ep), r->bytes_in,
				  r->bytes_out);
	if (p->h2)
		proxy_drop_uio(r, false);
	if (p->uio) {
		give = ok && p->reusable && p->req_body.done &&
		       p->resp_body.done &&
		       evbuffer_get_length(sockio_input(p->uio)) == 0 &&
		       evbuffer_get_length(sockio_output(p->uio)) == 0;
		proxy_drop_uio(r, give);
	}
	if (p->state == PROXY_QUEUED)
		proxy_slot_unlink(r);
	if (p->u.counted)
		proxy_slot_freed(r->w);
	upconn_done(&p->u);
	body_free(&p->req_body);
	/* a streamed page counted once whole */
	if (p->inj && p->inj->stream && p->resp_body.inj && p->resp_body.done)
		inject_count(inject_stream_injected(p->resp_body.inj)
				 ? INJECT_INJECTED
				 : INJECT_NO_TAG);
	body_free(&p->resp_body);
	proxy_inject_free(p->inj);
	p->inj = NULL;
	if (p->held) {
		evbuffer_free(p->held);
		p->held = NULL;
	}
	req_body_timer_stop(r);
	p->state = PROXY_IDLE;
	EDGE_ASSERT(!p->uio && !p->h2 && !p->tun && !p->u.counted);
}

/* r's route for an upstream failure's log line (upconn_log): "route
 * HOST/PREFIX, environment ID". */
#define PROXY_WHERE_MAX                                                        \
	(sizeof("route , environment ") + CONFIG_HOST_MAX +                    \
	 CONFIG_PREFIX_MAX + CONFIG_ID_MAX)

static const char *proxy_where(const struct req *r, char *buf, size_t len)
{
	const char *host = r->h.host ? r->h.host : "";
	size_t hn = req_host_only(host, r->h.host ? r->h.host_len : 0);

	snprintf(buf, len, "route %.*s%s, environment %s",
		 (int)(hn < CONFIG_HOST_MAX ? hn : CONFIG_HOST_MAX), host,
		 r->m.prefix ? r->m.prefix : "/",
		 r->m.env_id ? r->m.env_id : "-");
	return buf;
}

/* The attempt's endpoint failed r (why, errno err or 0; detail or NULL):
 * logged (limited) and reported to passive health. */
static void proxy_ep_failed(struct req *r, enum upreg_why why, int err,
			    const char *detail)
{
	char where[PROXY_WHERE_MAX];

	upconn_report(&PX(r)->u, r->w, REQ_LOG_CTX(r), why, err, detail,
		      proxy_where(r, where, sizeof(where)));
}

/* The response's body failed after its head (why, errno err or 0):
 * logged (limited) and kept as the endpoint's last failure; not the
 * attempt's failure (passive health counted its head a success). */
static void proxy_body_failed(struct req *r, enum upreg_why why, int err)
{
	struct proxy *p = PX(r);
	char where[PROXY_WHERE_MAX];

	upconn_log(&p->u, REQ_LOG_CTX(r), why, err, NULL,
		   proxy_where(r, where, sizeof(where)));
	if (p->u.ep)
		upreg_set_failure(upstream_ep_shared(p->u.ep), why, err);
}

static bool method_idempotent(enum h1_method m)
{
	return m == H1_M_GET || m == H1_M_HEAD || m == H1_M_OPTIONS ||
	       m == H1_M_PUT || m == H1_M_DELETE || m == H1_M_TRACE;
}

/* Whether r has a retry group (its deployment's retry). */
static bool proxy_retry_group(const struct req *r)
{
	return r->m.retry && r->m.retry->set;
}

/* The deployment's key in the worker's retry budgets. */
static uint64_t proxy_retry_key(const struct req *r)
{
	const char *id = r->m.deployment_id ? r->m.deployment_id : "";

	return siphash_key(id, strlen(id));
}

/*
 * Whether r goes again after its attempt failed in a way of bit on
 * (CONFIG_RETRY_ON_), under its deployment's retry group: the failure is
 * one it lists, no response byte went to the client, fewer than max
 * retries so far, an endpoint not tried yet is left, and, when the
 * upstream may have received the request (received), the method is
 * idempotent and the body none or held whole (p->held, sent again); then
 * the budget (retry.h) decides, and a retry it allows is counted.
 */
static bool proxy_may_retry(struct req *r, unsigned on, bool received)
{
	const struct config_retry *rt = r->m.retry;
	struct proxy *p = PX(r);

	if (!proxy_retry_group(r) || !(rt->on & on) || r->resp_started ||
	    p->retries >= rt->max || (p->upgrade && received) ||
	    p->u.ntried >= r->m.n_upstreams || p->u.ntried >= UPCONN_TRIES_MAX)
		return false;
	if (received && (!method_idempotent(r->h.method) ||
			 (p->req_body.in != BODY_NONE && !p->buffered)))
		return false;
	if (!upstream_retry_take(r->w->up, proxy_retry_key(r), rt->budget,
				 clk_now_ns())) {
		log_debug_ctx(REQ_LOG_CTX(r),
			      "retry refused by the deployment's budget (%u%%)",
			      rt->budget);
		return false;
	}
	p->retries++;
	return true;
}

/* Send r again after a failed attempt (proxy_may_retry said yes): the
 * attempt's connection closed (an HTTP/2 stream reset), its in-flight
 * count dropped, and after the deployment's backoff (doubled for each
 * retry before) the next endpoint chosen. */
static void proxy_retry(struct req *r)
{
	struct proxy *p = PX(r);
	uint64_t ms = r->m.retry->backoff_ms << (p->retries - 1);

	p->reusable = false;
	proxy_drop_uio(r, false);
	upconn_done(&p->u);
	proxy_slot_freed(r->w);
	p->u.ep = NULL;
	p->state = PROXY_BACKOFF;
	px_timer(r, ms);
}

/* The current attempt failed before any response byte (why, errno err
 * or 0): report it and try another endpoint (nothing of the request was
 * consumed yet): at once without a retry group, else when the group
 * lists "connect" and allows it (proxy_may_retry; otherwise 502
 * upstream_unavailable). */
static void proxy_attempt_failed(struct req *r, enum upreg_why why, int err)
{
	struct proxy *p = PX(r);
	char where[PROXY_WHERE_MAX];

	upconn_failed(&p->u, r->w, REQ_LOG_CTX(r), why, err, NULL,
		      proxy_where(r, where, sizeof(where)));
	proxy_drop_uio(r, false);
	if (proxy_hedge_takeover(r))
		return;
	if (!proxy_retry_group(r)) {
		proxy_connect(r);
		return;
	}
	if (!proxy_may_retry(r, CONFIG_RETRY_ON_CONNECT, false)) {
		p->reusable = false;
		req_upstream_unavailable(r);
		return;
	}
	proxy_retry(r);
}

/*
 * The phase timer while a request is with the upstream. Until the last
 * byte of the request is queued for it, the client's side is timed by the
 * body clock (proxy_body_clock) and the upstream only while it takes none
 * of what edge holds for it (proxy_send_stalled: timeouts.upstream_response
 * from the moment its output reached PROXY_HIGH_WATER, re-armed when it
 * drains); from then on timeouts.upstream_response runs for the response
 * head (proxy_request_sent). A slow upload is never the upstream's fault.
 */
static void proxy_request_sent(struct req *r)
{
	struct proxy *p = PX(r);

	p->send_stalled = false;
	if (p->state == PROXY_WAITING)
		px_timer(r, r->w->set.timeouts.upstream_response_ms);
}

static void proxy_send_stalled(struct req *r)
{
	struct proxy *p = PX(r);

	if (p->state != PROXY_WAITING || p->send_stalled)
		return;
	p->send_stalled = true;
	px_timer(r, r->w->set.timeouts.upstream_response_ms);
}

/* Move what the client sent of the body towards the upstream. */
static void proxy_pump_request(struct req *r)
{
	struct proxy *p = PX(r);
	struct evbuffer *cin = req_client_in(r), *uout;
	size_t before, queued;
	uint64_t data;
	int rc;

	if (p->req_body.done)
		return;
	if (!px_up(p) || p->state < PROXY_WAITING) {
		proxy_body_clock(r); /* the body waits in the client's input */
		return;
	}
	uout = px_out(p);
	queued = evbuffer_get_length(uout);
	if (queued >= PROXY_HIGH_WATER) {
		req_client_read(r, false);
		proxy_send_stalled(r);
		proxy_body_clock(r);
		return;
	}
	before = evbuffer_get_length(cin);
	rc = body_pump(&p->req_body, cin, uout, PROXY_HIGH_WATER - queued,
		       &data);
	r->bytes_in += before - evbuffer_get_length(cin);
	if (rc == -EFBIG) {
		/* counted before it was written: the upstream never gets a
		 * complete request, and the connection closes (body unread) */
		p->reusable = false;
		req_end(r, OUTCOME_BODY_TOO_LARGE, NULL);
		return;
	}
	if (rc < 0) {
		p->reusable = false;
		req_end(r, OUTCOME_BAD_REQUEST, NULL);
		return;
	}
	if (rc == 1) {
		if (p->h2)
			h2up_stream_body_end(p->h2, p->req_body.trailers);
		proxy_body_clock(r); /* stops it */
		if (p->resp_body.done && p->state == PROXY_RELAYING &&
		    (!p->h2 || p->up_eof)) {
			req_end(r, OUTCOME_OK, NULL);
			return;
		}
		proxy_request_sent(r);
		return;
	}
	if (evbuffer_get_length(uout) >= PROXY_HIGH_WATER) {
		req_client_read(r, false);
		proxy_send_stalled(r);
	}
	proxy_body_clock(r);
}

/* Write what edge read of the body before connecting: the whole body,
 * added by reference so that it stays in p->held for a retry on another
 * connection, or the first piece of a longer chunked body as one chunk
 * (the rest follows from the client). Returns 0 or -ENOMEM. */
static int proxy_send_held(struct req *r)
{
	struct proxy *p = PX(r);
	struct evbuffer *uout = px_out(p);
	size_t n = evbuffer_get_length(p->held);

	if (n == 0)
		return 0;
	if (p->buffered)
		return evbuffer_add_buffer_reference(uout, p->held) ? -ENOMEM
								    : 0;
	if (p->h2) /* HTTP/2 frames it */
		return evbuffer_add_buffer(uout, p->held) ? -ENOMEM : 0;
	if (evbuffer_add_printf(uout, "%zx\r\n", n) < 0 ||
	    evbuffer_add_buffer(uout, p->held) || evbuffer_add(uout, "\r\n", 2))
		return -ENOMEM;
	return 0;
}

/* The rebuilt request head into b (hdr_buf_init'ed; the caller frees
 * it): 0 or -1 (out of memory). */
static int proxy_build_head(struct req *r, struct hdr_buf *b)
{
	struct proxy *p = PX(r);
	struct hdr_fwd f;

	memset(&f, 0, sizeof(f));
	f.request_id = r->id;
	f.traceparent = r->trace.traceparent[0] ? r->trace.traceparent : NULL;
	f.tracestate = r->trace.continued;
	f.project_id = r->m.project_id;
	f.environment_id = r->m.env_id;
	f.deployment_id = r->m.deployment_id;
	f.client_ip = r->client_ip;
	f.proto = r->tls ? "https" : "http";
	/* the connection's peer: the load balancer, when its list named
	 * the client (req_xff_client) */
	f.xff_trusted = r->xff_client ||
			trusted_has(&r->w->set.trusted_proxies, r->peer_cidr);
	f.peer_ip = r->xff_client ? r->conn_ip : NULL;
	if (r->m.path) {
		f.path = r->m.path;
		f.path_len = r->m.path_len;
		if (r->h.query && f.path_len >= r->h.query_len + 1)
			f.path_len -= r->h.query_len + 1;
	}
	if (p->buffered) {
		f.content_length = (int64_t)evbuffer_get_length(p->held);
	} else {
		f.chunked = r->h.h.chunked;
		f.content_length = r->h.h.chunked ? -1 : r->h.h.content_length;
	}
	f.tunnel = p->upgrade;
	f.via = r->w->sh->via[0] ? r->w->sh->via : NULL;
	f.via_proto = req_via_version(r);
	f.early_data = r->early_data;
	f.edit = r->req_ed;
	return hdr_build_request(b, &r->h, &f) ? -1 : 0;
}

/* Connected (or reusing a pooled connection): send the rebuilt head. */
static void proxy_connected(struct req *r)
{
	struct proxy *p = PX(r);
	struct hdr_buf b;

	upconn_connected(&p->u, clk_now_ns());
	hdr_buf_init(&b, 0);
	if (proxy_build_head(r, &b)) {
		hdr_buf_free(&b);
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	}
	if (p->h2) {
		/* its fields from the same head; the body unframed */
		p->req_body.out_chunked = false;
		if (h2up_stream_submit(p->h2, b.p, b.len,
				       p->req_body.in != BODY_NONE)) {
			hdr_buf_free(&b);
			proxy_h2_retry(r,
				       false); /* the session takes no more */
			return;
		}
	} else if (evbuffer_add(sockio_output(p->uio), b.p, b.len)) {
		/* the head (and a body read whole) go out at the end of
		 * this loop turn, in one send */
		hdr_buf_free(&b);
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	}
	hdr_buf_free(&b);
	if (p->held && proxy_send_held(r)) {
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	}
	p->state = PROXY_WAITING;
	p->reusable = !p->upgrade; /* an upgrade's connection is never pooled */
	h1_response_init(&p->resp);
	p->head_held = false;
	if (p->uio)
		sockio_enable(p->uio, EV_READ | EV_WRITE);
	if (p->req_body.done) {
		if (p->h2)
			h2up_stream_body_end(p->h2, p->req_body.trailers);
		proxy_request_sent(r);
		return;
	}
	/* the body streams: its clock times the client, not this timer */
	req_timer_stop(r);
	p->send_stalled = false;
	req_client_read(r, true);
	proxy_pump_request(r);
}

static void proxy_up_event_cb(struct sockio *uio, short what, void *arg);
static void proxy_up_read_cb(struct sockio *uio, void *arg);
static void proxy_up_write_cb(struct sockio *uio, void *arg);

/* The bytes of a response head edge reads before it must have it whole,
 * with room for the first chunk line after it (proxy_first_chunk). */
static size_t proxy_head_room(const struct h1_limits *h1)
{
	return h1->head_max + 1 + H1_CHUNK_DIGITS_MAX + h1->chunk_ext_max + 2;
}

/* p->uio is uio (a new or a pooled connection): its callbacks and
 * watermarks set. */
static void proxy_set_uio(struct req *r, struct sockio *uio)
{
	struct proxy *p = PX(r);
	size_t high = proxy_head_room(&r->w->set.h1);

	p->uio = uio;
	if (high < PROXY_HIGH_WATER)
		high = PROXY_HIGH_WATER;
	sockio_setcb(p->uio, proxy_up_read_cb, proxy_up_write_cb,
		     proxy_up_event_cb, r);
	sockio_set_watermarks(p->uio, high, PROXY_LOW_WATER);
}

/* ---- waiting for an endpoint's slot (a deployment's max_inflight) ------ */

/* How often a worker with waiters looks again (another worker's request
 * may have freed a slot: only a slot freed here kicks it at once), how
 * many waiters one look sends on at most, how far into the queue it
 * looks for one whose endpoints have room, and how many routes found
 * full it remembers during a look (their other waiters are passed over
 * without asking again: a full deployment's waiters do not hold up
 * another's behind them). */
#define PROXY_SLOT_POLL_MS 5
#define PROXY_SLOT_BATCH 32
#define PROXY_SLOT_SCAN 4096
#define PROXY_SLOT_FULL 8

/* A worker's requests in PROXY_QUEUED, oldest first. */
struct proxy_set {
	struct worker *w;
	struct req *head, *tail;
	size_t n;
	struct event *kick; /* made active when a slot is freed here */
	struct event *poll; /* armed while anyone waits */
};

static void proxy_slot_unlink(struct req *r)
{
	struct proxy_set *ps = r->w->px;
	struct proxy *p = PX(r);

	if (!ps) /* the set went first (the worker's end) */
		return;
	if (p->wprev)
		PX(p->wprev)->wnext = p->wnext;
	else
		ps->head = p->wnext;
	if (p->wnext)
		PX(p->wnext)->wprev = p->wprev;
	else
		ps->tail = p->wprev;
	p->wnext = p->wprev = NULL;
	ps->n--;
}

/* A slot of some endpoint was freed on this worker: the waiters are
 * looked at once the current event is done. */
static void proxy_slot_freed(struct worker *w)
{
	if (w->px && w->px->n)
		event_active(w->px->kick, 0, 0);
}

/* Send on the oldest waiters whose endpoints have room (a waiter
 * whose have none keeps its place). Each ends or connects; the list may
 * change under any of them, so every pick starts from the head. */
static void proxy_slot_look(struct proxy_set *ps)
{
	uint64_t now = clk_now_ns(), full[PROXY_SLOT_FULL];
	size_t sent, k, i, nfull = 0;
	struct req *r;

	for (sent = 0; sent < PROXY_SLOT_BATCH && ps->n; sent++) {
		for (r = ps->head, k = 0; r && k < PROXY_SLOT_SCAN;
		     r = PX(r)->wnext, k++) {
			/* a retry's waiter (endpoints tried) is asked
			 * itself: its route's room may not be its */
			bool known_full = false;

			for (i = 0; i < nfull && PX(r)->u.ntried == 0; i++)
				if (full[i] == r->m.route_key)
					known_full = true;
			if (known_full)
				continue;
			if (upstream_has_room(ps->w->up, r->m.upstreams,
					      r->m.n_upstreams, PX(r)->u.tried,
					      PX(r)->u.ntried,
					      r->m.ep_max_inflight, now))
				break;
			if (PX(r)->u.ntried == 0 && nfull < PROXY_SLOT_FULL)
				full[nfull++] = r->m.route_key;
		}
		if (!r || k == PROXY_SLOT_SCAN)
			break;
		proxy_slot_unlink(r);
		PX(r)->state = PROXY_IDLE;
		req_timer_stop(r);
		if (!PX(r)->wread)
			req_client_read(r, false);
		proxy_connect(r);
	}
	if (ps->n) {
		struct timeval tv = {0, PROXY_SLOT_POLL_MS * 1000};

		evtimer_add(ps->poll, &tv);
	}
}

static void proxy_slot_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	proxy_slot_look(arg);
}

/* Every endpoint left for r is at the deployment's max_inflight: r waits
 * for a slot, at most timeouts.queue (and its deadline), while the
 * worker has fewer than limits.max_queued waiting; else 503 overloaded
 * at once. */
static void proxy_slot_wait(struct req *r)
{
	static const char retry[] = "Retry-After: 1\r\n";
	struct proxy_set *ps = r->w->px;
	struct proxy *p = PX(r);

	if (!ps || ps->n >= r->w->set.limits.max_queued) {
		upstream_count_ep_full(r->w->up, true);
		log_warnx_ctx_rl(REQ_LOG_CTX(r),
				 "every endpoint at the deployment's "
				 "max_inflight (%u), no room to wait "
				 "(limits.max_queued): 503 overloaded",
				 r->m.ep_max_inflight);
		req_end(r, OUTCOME_OVERLOADED, retry);
		return;
	}
	upstream_count_ep_full(r->w->up, false);
	/* a client that leaves meanwhile is seen (proxy_client_gone) */
	p->wread = req_client_reading(r);
	if (!p->wread)
		req_client_read(r, true);
	p->state = PROXY_QUEUED;
	p->wnext = NULL;
	p->wprev = ps->tail;
	if (ps->tail)
		PX(ps->tail)->wnext = r;
	else
		ps->head = r;
	ps->tail = r;
	if (ps->n++ == 0) {
		struct timeval tv = {0, PROXY_SLOT_POLL_MS * 1000};

		evtimer_add(ps->poll, &tv);
	}
	px_timer(r, r->w->set.timeouts.queue_ms);
}

/* A waiter's timer: timeouts.queue is over. */
static void proxy_slot_timeout(struct req *r)
{
	static const char retry[] = "Retry-After: 1\r\n";

	proxy_slot_unlink(r);
	PX(r)->state = PROXY_IDLE;
	upstream_count_ep_full(r->w->up, true);
	log_warnx_ctx_rl(REQ_LOG_CTX(r),
			 "waited timeouts.queue (%llu ms) for an endpoint "
			 "under the deployment's max_inflight (%u): 503 "
			 "overloaded",
			 (unsigned long long)r->w->set.timeouts.queue_ms,
			 r->m.ep_max_inflight);
	req_end(r, OUTCOME_OVERLOADED, retry);
}

/* The next attempt (upconn.h): a pooled connection goes on at once, a
 * new one connects within timeouts.upstream_connect; none left is
 * upstream_unavailable; every endpoint at max_inflight, wait for a slot
 * (proxy_slot_wait); out of descriptors, 503 fd_exhausted with
 * Retry-After (not the endpoint's fault). */
static void proxy_connect(struct req *r)
{
	static const char retry[] = "Retry-After: 1\r\n";
	struct worker *w = r->w;
	struct proxy *p = PX(r);
	const struct upconn_target t = {.m = &r->m,
					.slot = 0,
					.peer = r->peer,
					.pool = true,
					.h2 = !p->upgrade,
					.host = r->h.host ? r->h.host : "",
					.host_len =
					    r->h.host ? r->h.host_len : 0,
					.client_fd = r->conn_fd};
	struct h2up_sess *sess = NULL;
	struct sockio *uio;

	if (r->attempts == 0)
		proxy_hedge_arm(r);
	switch (upconn_open(&p->u, w, &t, REQ_LOG_CTX(r), &uio)) {
	case UPCONN_NONE:
		req_upstream_unavailable(r);
		return;
	case UPCONN_FULL:
		proxy_slot_wait(r);
		return;
	case UPCONN_NO_FD:
		p->reusable = false;
		req_end(r, OUTCOME_FD_EXHAUSTED, retry);
		return;
	case UPCONN_TLS:
		p->reusable = false;
		req_end(r, OUTCOME_UPSTREAM_TLS_FAILED, NULL);
		return;
	case UPCONN_FAILED:
		p->reusable = false;
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	case UPCONN_POOLED:
		r->attempts++;
		memcpy(r->up_addr, p->u.addr, sizeof(r->up_addr));
		r->t_connect = p->u.t_connect;
		proxy_set_uio(r, uio);
		proxy_connected(r);
		return;
	case UPCONN_SHARED:
		sess = p->u.sess;
		break;
	case UPCONN_NEW:
		break;
	}
	r->attempts++;
	memcpy(r->up_addr, p->u.addr, sizeof(r->up_addr));
	r->t_connect = p->u.t_connect;
	if (!sess && p->u.h2) {
		/* a new connection for an HTTP/2 session, shared from now */
		sess = h2up_sess_new(
		    w, upstream_ep_addr(p->u.ep), p->u.tag, uio,
		    upstream_ep_addr(p->u.ep)->scheme == CONFIG_SCHEME_HTTPS);
		if (!sess) {
			p->reusable = false;
			req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
			return;
		}
		if (upconn_connect(&p->u, h2up_sess_io(sess)) < 0) {
			int e = errno;

			h2up_sess_abort(sess);
			errno = e;
			proxy_attempt_failed(r, UPREG_WHY_CONNECT, errno);
			return;
		}
	}
	if (sess) {
		p->h2 = h2up_stream_new(sess, proxy_h2_cb, r);
		if (!p->h2) {
			req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
			return;
		}
		if (h2up_stream_ready(p->h2)) {
			proxy_connected(r);
			return;
		}
		/* its session connects: the connect timeout runs for it */
		p->state = PROXY_CONNECTING;
		px_timer(r, w->set.timeouts.upstream_connect_ms);
		return;
	}
	proxy_set_uio(r, uio);
	p->state = PROXY_CONNECTING;
	px_timer(r, w->set.timeouts.upstream_connect_ms);
	if (upconn_connect(&p->u, p->uio) < 0)
		proxy_attempt_failed(r, UPREG_WHY_CONNECT, errno);
}

/* ---- hedging (docs/upstream.md, "Hedging") ------------------------------ */

/* One hedge: an extra attempt of a request, to an endpoint it has not
 * tried, until it answers first (then it is the request's attempt, its
 * connection or stream handed to the proxy), fails (reported to passive
 * health, the request goes on) or is cancelled (closed, or its HTTP/2
 * stream reset). */
struct proxy_try {
	struct req *r;
	struct upconn u;
	struct sockio *uio;	/* HTTP/1.1 */
	struct h2up_stream *h2; /* or an HTTP/2 stream */
	struct event *tmo;	/* its connect, then response timeout */
	bool on;		/* running */
	bool sent;		/* its request went */
};

/* A request's hedges: the next one's timer, how many went, and whether
 * an answer came (no more then). */
struct proxy_hedges {
	struct event *ev;
	uint64_t after_ns; /* the delay from the first attempt */
	unsigned sent;
	bool over;
	struct proxy_try t[CONFIG_HEDGE_MAX];
};

static void proxy_parse(struct req *r);

/* Whether r's request may be sent twice: idempotent, its body none or
 * held whole, no Upgrade (the rule of proxy_may_retry for a request the
 * upstream received). */
static bool proxy_hedgeable(const struct req *r)
{
	const struct proxy *p = PX(r);

	return r->m.hedge && r->m.hedge->set &&
	       method_idempotent(r->h.method) && !p->upgrade &&
	       (p->req_body.in == BODY_NONE || p->buffered);
}

/* End try t: a running stream reset (CANCEL), a connection closed,
 * never pooled; its in-flight count dropped (no report: the caller's). */
static void proxy_try_drop(struct proxy_try *t)
{
	if (t->tmo) {
		event_free(t->tmo);
		t->tmo = NULL;
	}
	if (t->h2) {
		h2up_stream_close(t->h2);
		t->h2 = NULL;
	}
	if (t->uio) {
		sockio_free(t->uio);
		t->uio = NULL;
	}
	if (t->u.counted)
		proxy_slot_freed(t->r->w);
	upconn_done(&t->u);
	t->on = false;
}

/* Cancel the request's running hedges and send no more (an answer came,
 * or the request ends). */
static void proxy_hedge_over(struct req *r)
{
	struct proxy_hedges *hg = PX(r)->hg;
	unsigned i;

	if (!hg)
		return;
	hg->over = true;
	if (hg->ev)
		evtimer_del(hg->ev);
	for (i = 0; i < CONFIG_HEDGE_MAX; i++)
		if (hg->t[i].on)
			proxy_try_drop(&hg->t[i]);
}

static void proxy_hedge_free(struct req *r)
{
	struct proxy *p = PX(r);

	if (!p->hg)
		return;
	proxy_hedge_over(r);
	if (p->hg->ev)
		event_free(p->hg->ev);
	free(p->hg);
	p->hg = NULL;
}

static void proxy_try_arm(struct proxy_try *t, uint64_t ms)
{
	struct timeval tv;

	evtimer_add(t->tmo, worker_timeout(t->r->w, ms, &tv));
}

/* Try t failed (why, errno err or 0, detail or NULL): logged, reported
 * to passive health and dropped; the request goes on without it. */
static void proxy_try_failed(struct proxy_try *t, enum upreg_why why, int err,
			     const char *detail)
{
	struct req *r = t->r;
	char where[PROXY_WHERE_MAX];

	upconn_failed(&t->u, r->w, REQ_LOG_CTX(r), why, err, detail,
		      proxy_where(r, where, sizeof(where)));
	proxy_try_drop(t);
}

static void proxy_try_read_cb(struct sockio *uio, void *arg);
static void proxy_try_write_cb(struct sockio *uio, void *arg);
static void proxy_try_event_cb(struct sockio *uio, short what, void *arg);
static void proxy_try_h2_cb(struct h2up_stream *st, unsigned ev, void *arg);

/* Try t's connection is uio: its callbacks and watermarks set. */
static void proxy_try_set_uio(struct proxy_try *t, struct sockio *uio)
{
	size_t high = proxy_head_room(&t->r->w->set.h1);

	t->uio = uio;
	if (high < PROXY_HIGH_WATER)
		high = PROXY_HIGH_WATER;
	sockio_setcb(uio, proxy_try_read_cb, proxy_try_write_cb,
		     proxy_try_event_cb, t);
	sockio_set_watermarks(uio, high, PROXY_LOW_WATER);
}

/* Try t is connected: send the request (its head, and the body held
 * whole, by reference), then wait timeouts.upstream_response for an
 * answer. */
static void proxy_try_send(struct proxy_try *t)
{
	struct req *r = t->r;
	struct proxy *p = PX(r);
	struct evbuffer *out;
	struct hdr_buf b;
	int rc;

	upconn_connected(&t->u, clk_now_ns());
	hdr_buf_init(&b, 0);
	if (proxy_build_head(r, &b)) {
		hdr_buf_free(&b);
		proxy_try_drop(t);
		return;
	}
	if (t->h2) {
		if (h2up_stream_submit(t->h2, b.p, b.len,
				       p->req_body.in != BODY_NONE)) {
			/* the session takes no more: not the endpoint's
			 * fault, and no hedge */
			hdr_buf_free(&b);
			proxy_try_drop(t);
			return;
		}
		out = h2up_stream_out(t->h2);
		rc = 0;
	} else {
		out = sockio_output(t->uio);
		rc = evbuffer_add(out, b.p, b.len);
	}
	hdr_buf_free(&b);
	if (rc == 0 && p->held && evbuffer_get_length(p->held))
		rc = evbuffer_add_buffer_reference(out, p->held);
	if (rc) {
		proxy_try_drop(t);
		return;
	}
	if (t->h2)
		h2up_stream_body_end(t->h2, p->req_body.trailers);
	else
		sockio_enable(t->uio, EV_READ | EV_WRITE);
	t->sent = true;
	proxy_try_arm(t, r->w->set.timeouts.upstream_response_ms);
}

/*
 * Make try t the request's attempt (its first answer came, or the
 * request's attempt failed while t runs): the request's own attempt
 * cancelled (its connection closed, its stream reset; not reported: it
 * did not fail), t's connection or stream handed over in the state it is
 * in (connecting, or waiting for the response with
 * timeouts.upstream_response from now).
 */
static void proxy_try_promote(struct proxy_try *t)
{
	struct req *r = t->r;
	struct proxy *p = PX(r);
	struct sockio *uio = t->uio;
	struct h2up_stream *h2 = t->h2;
	bool sent = t->sent;

	if (p->state == PROXY_QUEUED) /* not while a hedge runs, but safe */
		proxy_slot_unlink(r);
	proxy_drop_uio(r, false);
	if (p->u.counted)
		proxy_slot_freed(r->w);
	upconn_done(&p->u);
	p->u = t->u;
	t->u.counted = false; /* p->u's now */
	t->uio = NULL;
	t->h2 = NULL;
	proxy_try_drop(t);
	memcpy(r->up_addr, p->u.addr, sizeof(r->up_addr));
	r->t_connect = p->u.t_connect;
	h1_response_init(&p->resp);
	p->head_held = false;
	p->send_stalled = false;
	if (h2) {
		p->h2 = h2;
		h2up_stream_setcb(h2, proxy_h2_cb, r);
	} else {
		proxy_set_uio(r, uio);
	}
	if (!sent) {
		p->state = PROXY_CONNECTING;
		px_timer(r, r->w->set.timeouts.upstream_connect_ms);
		return;
	}
	p->state = PROXY_WAITING;
	p->reusable = true;
	if (p->uio)
		sockio_enable(p->uio, EV_READ | EV_WRITE);
	px_timer(r, r->w->set.timeouts.upstream_response_ms);
}

/* Try t answered first: it wins, its answer is parsed as the request's
 * (the other attempts cancelled there, proxy_parse). */
static void proxy_try_won(struct proxy_try *t)
{
	struct req *r = t->r;

	upstream_hedge_won(r->w->up);
	log_debug_ctx(REQ_LOG_CTX(r), "hedge to %s answered first", t->u.addr);
	proxy_try_promote(t);
	proxy_parse(r);
}

/* The request's own attempt failed while a hedge runs: the oldest
 * running hedge takes its place (the caller reported the failure).
 * Whether one did. */
static bool proxy_hedge_takeover(struct req *r)
{
	struct proxy_hedges *hg = PX(r)->hg;
	unsigned i;

	if (!hg)
		return false;
	for (i = 0; i < CONFIG_HEDGE_MAX; i++)
		if (hg->t[i].on) {
			log_debug_ctx(REQ_LOG_CTX(r),
				      "the hedge to %s goes on alone",
				      hg->t[i].u.addr);
			proxy_try_promote(&hg->t[i]);
			return true;
		}
	return false;
}

static void proxy_try_read_cb(struct sockio *uio, void *arg)
{
	struct proxy_try *t = arg;

	if (t->sent && evbuffer_get_length(sockio_input(uio)))
		proxy_try_won(t);
}

static void proxy_try_write_cb(struct sockio *uio, void *arg)
{
	(void)uio;
	(void)arg;
}

static void proxy_try_event_cb(struct sockio *uio, short what, void *arg)
{
	struct proxy_try *t = arg;
	struct req *r = t->r;
	int err = what & SOCKIO_ERROR ? errno : 0;

	if (!t->sent) {
		if (what & SOCKIO_CONNECTED)
			proxy_try_send(t);
		else
			proxy_try_failed(t, UPREG_WHY_CONNECT, err, NULL);
		return;
	}
	if (what & SOCKIO_TIMEOUT)
		return;
	if (evbuffer_get_length(sockio_input(uio))) {
		/* an answer, then its end: the proxy reads both */
		proxy_try_won(t);
		if (r->active && PX(r)->uio == uio)
			proxy_up_event_cb(uio, what, r);
		return;
	}
	proxy_try_failed(t, UPREG_WHY_CLOSED, err, "a hedge's connection");
}

static void proxy_try_h2_cb(struct h2up_stream *st, unsigned ev, void *arg)
{
	struct proxy_try *t = arg;
	struct sockio *uio;

	switch (ev) {
	case H2UP_EV_READY:
		if (!t->sent)
			proxy_try_send(t);
		return;
	case H2UP_EV_HTTP1:
		uio = h2up_stream_take(st);
		t->h2 = NULL;
		proxy_try_set_uio(t, uio);
		proxy_try_send(t);
		return;
	case H2UP_EV_HEAD:
		proxy_try_won(t);
		return;
	case H2UP_EV_CLOSED:
		if (h2up_stream_refused(st)) {
			proxy_try_drop(t); /* never processed: no blame */
			return;
		}
		proxy_try_failed(t, UPREG_WHY_CLOSED, h2up_stream_err(st),
				 "a hedge's stream");
		return;
	default:
		return;
	}
}

static void proxy_try_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_try *t = arg;

	(void)fd;
	(void)what;
	proxy_try_failed(
	    t, t->sent ? UPREG_WHY_RESPONSE_TIMEOUT : UPREG_WHY_CONNECT_TIMEOUT,
	    0, "a hedge");
}

/* Whether r sends a hedge now: it is hedgeable, waits for its attempt
 * (connecting or sent, no byte of an answer yet), fewer than max went,
 * an endpoint none of its attempts tried is left, and the deployment's
 * retry budget allows one (then counted). */
static bool proxy_may_hedge(struct req *r)
{
	struct proxy *p = PX(r);
	struct proxy_hedges *hg = p->hg;
	unsigned i, pct, n = (unsigned)p->u.ntried;

	if (hg->over || r->resp_started || hg->sent >= r->m.hedge->max ||
	    !proxy_hedgeable(r) || !p->req_body.done || p->head_held ||
	    (p->state != PROXY_CONNECTING && p->state != PROXY_WAITING))
		return false;
	for (i = 0; i < CONFIG_HEDGE_MAX; i++)
		n += hg->t[i].on;
	if (n >= r->m.n_upstreams || n >= UPCONN_TRIES_MAX)
		return false;
	pct = proxy_retry_group(r) ? r->m.retry->budget
				   : HEDGE_BUDGET_DEFAULT_PCT;
	if (!upstream_hedge_take(r->w->up, proxy_retry_key(r), pct,
				 clk_now_ns())) {
		log_debug_ctx(REQ_LOG_CTX(r),
			      "hedge refused by the deployment's budget (%u%%)",
			      pct);
		return false;
	}
	return true;
}

/* Send a hedge of r: a try to an endpoint none of its attempts has. */
static void proxy_hedge_send(struct req *r)
{
	struct worker *w = r->w;
	struct proxy *p = PX(r);
	struct proxy_hedges *hg = p->hg;
	const struct upconn_target tt = {.m = &r->m,
					 .slot = 0,
					 .peer = r->peer,
					 .pool = true,
					 .h2 = true,
					 .host = r->h.host ? r->h.host : "",
					 .host_len =
					     r->h.host ? r->h.host_len : 0,
					 .client_fd = r->conn_fd};
	struct proxy_try *t = NULL;
	struct h2up_sess *sess = NULL;
	struct sockio *uio;
	unsigned i;

	for (i = 0; i < CONFIG_HEDGE_MAX && !t; i++)
		if (!hg->t[i].on)
			t = &hg->t[i];
	if (!t)
		return;
	memset(t, 0, sizeof(*t));
	t->r = r;
	memcpy(t->u.tried, p->u.tried, sizeof(t->u.tried));
	t->u.ntried = p->u.ntried;
	for (i = 0; i < CONFIG_HEDGE_MAX; i++)
		if (hg->t[i].on && hg->t[i].u.ep &&
		    t->u.ntried < UPCONN_TRIES_MAX)
			t->u.tried[t->u.ntried++] = hg->t[i].u.ep;
	t->tmo = evtimer_new(w->base, proxy_try_timeout_cb, t);
	if (!t->tmo)
		return;
	switch (upconn_open(&t->u, w, &tt, REQ_LOG_CTX(r), &uio)) {
	case UPCONN_POOLED:
		break;
	case UPCONN_SHARED:
		sess = t->u.sess;
		break;
	case UPCONN_NEW:
		if (!t->u.h2)
			break;
		sess = h2up_sess_new(
		    w, upstream_ep_addr(t->u.ep), t->u.tag, uio,
		    upstream_ep_addr(t->u.ep)->scheme == CONFIG_SCHEME_HTTPS);
		if (!sess)
			goto fail;
		if (upconn_connect(&t->u, h2up_sess_io(sess)) < 0) {
			int e = errno;

			h2up_sess_abort(sess);
			t->on = true;
			proxy_try_failed(t, UPREG_WHY_CONNECT, e, NULL);
			return;
		}
		break;
	default:
		goto fail;
	}
	t->on = true;
	hg->sent++;
	r->attempts++;
	log_debug_ctx(REQ_LOG_CTX(r), "hedge %u to %s", hg->sent, t->u.addr);
	if (sess) {
		t->h2 = h2up_stream_new(sess, proxy_try_h2_cb, t);
		if (!t->h2) {
			proxy_try_drop(t);
			return;
		}
		if (h2up_stream_ready(t->h2)) {
			proxy_try_send(t);
			return;
		}
		proxy_try_arm(t, w->set.timeouts.upstream_connect_ms);
		return;
	}
	proxy_try_set_uio(t, uio);
	if (t->u.reused) {
		proxy_try_send(t);
		return;
	}
	proxy_try_arm(t, w->set.timeouts.upstream_connect_ms);
	if (upconn_connect(&t->u, t->uio) < 0)
		proxy_try_failed(t, UPREG_WHY_CONNECT, errno, NULL);
	return;
fail:
	t->on = true;
	proxy_try_drop(t);
}

static void proxy_hedge_arm_next(struct req *r)
{
	struct proxy_hedges *hg = PX(r)->hg;
	struct timeval tv;
	uint64_t ms = (hg->after_ns + 999999) / 1000000;

	evtimer_add(hg->ev, worker_timeout(r->w, ms ? ms : 1, &tv));
}

/* The hedge timer: one more hedge when r may send it, and the timer
 * again for the next while fewer than max went. */
static void proxy_hedge_fire_cb(evutil_socket_t fd, short what, void *arg)
{
	struct req *r = arg;
	struct proxy_hedges *hg = PX(r)->hg;

	(void)fd;
	(void)what;
	if (!proxy_may_hedge(r))
		return;
	proxy_hedge_send(r);
	if (!hg->over && hg->sent < r->m.hedge->max)
		proxy_hedge_arm_next(r);
}

/* At r's first attempt: when r is hedgeable and its deployment's delay
 * is known (a duration, or a percentile of enough recent answers), the
 * hedge timer armed for it. */
static void proxy_hedge_arm(struct req *r)
{
	const struct config_hedge *h = r->m.hedge;
	struct proxy *p = PX(r);
	uint64_t ns;

	if (p->hg || !proxy_hedgeable(r))
		return;
	if (h->pct) {
		if (!upstream_hedge_percentile(r->w->up, proxy_retry_key(r),
					       h->pct, clk_now_ns(), &ns))
			return; /* too few answers yet */
	} else {
		ns = h->after_ms * 1000000;
	}
	p->hg = calloc(1, sizeof(*p->hg));
	if (!p->hg)
		return;
	p->hg->after_ns = ns;
	p->hg->ev = evtimer_new(r->w->base, proxy_hedge_fire_cb, r);
	if (!p->hg->ev) {
		free(p->hg);
		p->hg = NULL;
		return;
	}
	proxy_hedge_arm_next(r);
}

/* PROXY_BUFFERING: decode what the client sent of the body into p->held,
 * at most body_buffer + 1 bytes. The whole body within body_buffer: it
 * goes upstream with one Content-Length. More (chunked only; a longer
 * Content-Length never buffers): connect, and the rest streams with
 * edge's chunking. A framing error or the route's limit ends the request
 * before any upstream is chosen. */
static void proxy_buffer_body(struct req *r)
{
	uint64_t cap = r->w->set.limits.body_buffer;
	struct proxy *p = PX(r);
	struct evbuffer *cin = req_client_in(r);
	size_t before = evbuffer_get_length(cin);
	size_t held = evbuffer_get_length(p->held);
	uint64_t data;
	int rc;

	rc = body_pump(&p->req_body, cin, p->held, (size_t)(cap + 1 - held),
		       &data);
	r->bytes_in += before - evbuffer_get_length(cin);
	if (rc == -EFBIG) {
		req_end(r, OUTCOME_BODY_TOO_LARGE, NULL);
		return;
	}
	if (rc < 0) {
		log_debug_ctx(
		    REQ_LOG_CTX(r), "bad chunked body: %s at body byte %zu",
		    h1_err_name(p->req_body.ck.err), p->req_body.ck.err_off);
		req_end(r, OUTCOME_BAD_REQUEST, NULL);
		return;
	}
	if (rc == 1) {
		p->buffered = true;
	} else if (evbuffer_get_length(p->held) <= cap) {
		proxy_body_clock(r);
		return; /* more to come */
	} else {
		p->req_body.out_chunked = true; /* the rest streams */
	}
	proxy_body_clock(r);
	proxy_connect(r);
}

/* Whether r is a gRPC call (Content-Type application/grpc, +proto...):
 * its messages stream both ways, never read whole first. */
static bool proxy_grpc(const struct req *r)
{
	const struct h1_header *f;
	unsigned i;

	for (i = 0; i < r->h.h.nheaders; i++) {
		f = &r->h.h.headers[i];
		if (h1_eq(f->name, f->name_len, "content-type"))
			return f->value_len >= 16 &&
			       strncasecmp(f->value, "application/grpc", 16) ==
				   0 &&
			       (f->value_len == 16 || f->value[16] == '+' ||
				f->value[16] == ';');
	}
	return false;
}

/* Whether r's deployment's circuit lets it through (none: yes); if not,
 * r ended 503 circuit_open, with a Retry-After of what is left of the
 * circuit's open_for (at least 1 s). */
static bool proxy_circuit_admit(struct req *r)
{
	struct proxy *p = PX(r);
	char retry[48];
	uint64_t wait_ms;

	if (!r->m.circuit || !r->m.circuit->set)
		return true;
	if (upstream_circuit_admit(r->w->up, proxy_retry_key(r), clk_now_ns(),
				   &p->circuit_trial, &wait_ms)) {
		p->circuit = true;
		return true;
	}
	snprintf(
	    retry, sizeof(retry), "Retry-After: %llu\r\n",
	    (unsigned long long)(wait_ms > 1000 ? (wait_ms + 999) / 1000 : 1));
	req_end(r, OUTCOME_CIRCUIT_OPEN, retry);
	return false;
}

static void proxy_start(struct req *r)
{
	const struct worker_settings *set = &r->w->set;
	uint64_t cap = set->limits.body_buffer;
	struct proxy *p = PX(r);

	if (r->h.h.chunked) {
		body_init(&p->req_body, BODY_CHUNKED, 0, true);
		p->req_body.limit = &r->limit;
		/* its trailers go on to an HTTP/2 upstream only: to an
		 * HTTP/1.1 one they are dropped, as they always were (a
		 * backend that merges them into its headers is spared) */
	} else if (r->h.h.content_length > 0)
		body_init(&p->req_body, BODY_LENGTH,
			  (uint64_t)r->h.h.content_length, false);
	else
		body_init(&p->req_body, BODY_NONE, 0, false);
	p->grpc = proxy_grpc(r);
	if (!proxy_circuit_admit(r))
		return;
	if (r->m.request_total_ms)
		p->deadline = clk_now_ns() + r->m.request_total_ms * 1000000;
	/* the budget's requests: retries and hedges take from it */
	if (proxy_retry_group(r) || (r->m.hedge && r->m.hedge->set))
		upstream_retry_request(r->w->up, proxy_retry_key(r),
				       clk_now_ns());
	/* Upgrade is forwarded for requests without a body only, so the
	 * protocol switch never falls in the middle of edge's re-framing */
	p->upgrade = r->h.upgrade && p->req_body.in == BODY_NONE;
	/* a body waits in the client's input (bounded by the read
	 * watermark) until it is buffered or an upstream is connected */
	req_client_watermarks(r, PROXY_HIGH_WATER, PROXY_LOW_WATER);
	if (p->req_body.done) {
		proxy_connect(r);
		return;
	}
	admit_rate_init(&p->rate, set->timeouts.body_ms,
			set->timeouts.body_min_rate, clk_now_ns());
	req_client_read(r, true);
	if (cap > 0 && !p->grpc &&
	    (p->req_body.in == BODY_CHUNKED || p->req_body.left <= cap)) {
		p->held = evbuffer_new();
		if (!p->held) {
			req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
			return;
		}
		p->req_body.out_chunked = false; /* decoded into held */
		p->state = PROXY_BUFFERING;
		proxy_buffer_body(r);
		return;
	}
	proxy_body_clock(r);
	proxy_connect(r);
}

/*
 * Bring the request body's clock up to date and arm its timer for its
 * deadline. The clock counts the body bytes received (consumed plus
 * waiting in the client's input) and runs only while edge reads the
 * client: reading enabled and the input below its watermark. It stops
 * for good once the body is complete.
 */
static void proxy_body_clock(struct req *r)
{
	struct proxy *p = PX(r);
	struct evbuffer *cin;
	uint64_t now, dl;
	size_t queued;

	/* a gRPC stream's messages come when they come: its body is not
	 * held to timeouts.body and body_min_rate (both ends keep it) */
	if (p->req_body.done || req_client_closed(r) || !r->active || p->grpc) {
		req_body_timer_stop(r);
		return;
	}
	cin = req_client_in(r);
	queued = evbuffer_get_length(cin);
	now = clk_now_ns();
	admit_rate_seen(&p->rate, r->bytes_in - r->head_len + queued, now);
	if (req_client_reading(r) && queued < PROXY_HIGH_WATER)
		admit_rate_resume(&p->rate, now);
	else
		admit_rate_pause(&p->rate, now);
	dl = admit_rate_deadline(&p->rate);
	if (dl == UINT64_MAX) {
		req_body_timer_stop(r);
		return;
	}
	req_body_timer(r, dl > now ? (dl - now + 999999) / 1000000 : 0);
}

static void proxy_body_timeout(struct req *r)
{
	struct proxy *p = PX(r);

	if (!r->active || p->req_body.done || p->state == PROXY_TUNNEL)
		return;
	proxy_body_clock(r); /* re-armed unless it has run out */
	if (!admit_rate_expired(&p->rate, clk_now_ns()))
		return;
	log_debug_ctx(REQ_LOG_CTX(r),
		      "request body too slow: %llu bytes in %llu ms",
		      (unsigned long long)p->rate.bytes,
		      (unsigned long long)((clk_now_ns() - r->t0) / 1000000));
	p->reusable = false;
	req_close_after(r, false);
	req_end(r, OUTCOME_BODY_TIMEOUT, NULL);
}

/* Alt-Svc for a response over TLS on TCP when edged serves HTTP/3
 * (tls.quic_advertise): the port of the first tls.quic_listen address
 * of the running sockets (the start-up configuration's), for a day */
static void proxy_alt_svc(const struct req *r, char *buf, size_t len, size_t *n)
{
	const struct config_tls *t = &r->w->sh->cfg->tls;
	const struct sockaddr_storage *ss;
	unsigned port;
	char v[48];

	if (!r->tls || !r->w->set.quic_advertise || t->n_quic_listen == 0 ||
	    (r->http_version && strcmp(r->http_version, "HTTP/3") == 0))
		return;
	ss = &t->quic_listen[0].ss;
	port = ntohs(ss->ss_family == AF_INET6
			 ? ((const struct sockaddr_in6 *)ss)->sin6_port
			 : ((const struct sockaddr_in *)ss)->sin_port);
	snprintf(v, sizeof(v), "h3=\":%u\"; ma=86400", port);
	hdr_extra_append(buf, len, n, "Alt-Svc", v);
}

/* Security headers of the route, and X-Edge-Cold-Start for a request
 * that waited for its environment's wake, as extra response lines. */
static void proxy_security(const struct req *r, char *buf, size_t len)
{
	const struct config_security_headers *s = r->m.security;
	size_t n = 0;

	buf[0] = '\0';
	if (r->sw.woken) {
		char ms[24];

		snprintf(ms, sizeof(ms), "%llu",
			 (unsigned long long)r->sw.cold_ms);
		hdr_extra_append(buf, len, &n, "X-Edge-Cold-Start", ms);
	}
	proxy_alt_svc(r, buf, len, &n);
	if (!s)
		return;
	if (s->hsts && r->tls) {
		char v[64];

		snprintf(v, sizeof(v), "max-age=%llu%s",
			 (unsigned long long)s->hsts_max_age_s,
			 s->hsts_subdomains ? "; includeSubDomains" : "");
		hdr_extra_append(buf, len, &n, "Strict-Transport-Security", v);
	}
	if (s->nosniff)
		hdr_extra_append(buf, len, &n, "X-Content-Type-Options",
				 "nosniff");
	if (s->frame_options && s->frame_options[0])
		hdr_extra_append(buf, len, &n, "X-Frame-Options",
				 s->frame_options);
	if (s->referrer_policy && s->referrer_policy[0])
		hdr_extra_append(buf, len, &n, "Referrer-Policy",
				 s->referrer_policy);
	if (n >= len)
		buf[0] = '\0';
}

/* Whether the protocol a 101 switches to is one the client asked for
 * (RFC 9110 section 7.8). */
static bool proxy_upgrade_matches(const struct req *r,
				  const struct h1_response *resp)
{
	char proto[128];
	size_t n = resp->h.upgrade_len;

	if (!resp->h.upgrade_proto || n == 0 || n >= sizeof(proto) ||
	    !r->h.h.upgrade_proto)
		return false;
	memcpy(proto, resp->h.upgrade_proto, n);
	proto[n] = '\0';
	return h1_list_has(r->h.h.upgrade_proto, r->h.h.upgrade_len, proto);
}

/* The tunnel ended: so does the request (outcome tunnel, one event). */
static void proxy_tunnel_done(struct tunnel *t, const struct tunnel_stats *st,
			      void *arg)
{
	struct req *r = arg;

	(void)t;
	log_debug_ctx(REQ_LOG_CTX(r), "tunnel %s: %llu bytes up, %llu down",
		      st->end == TUNNEL_END_IDLE    ? "idle"
		      : st->end == TUNNEL_END_ERROR ? "failed"
						    : "closed",
		      (unsigned long long)st->bytes_up,
		      (unsigned long long)st->bytes_down);
	req_end(r, OUTCOME_TUNNEL, NULL); /* frees the tunnel */
}

/*
 * The 101 head is queued for the client: hand both sockios to a tunnel
 * with what they hold: the client's output (the 101 head) and input
 * (whatever the client sent after its request head), the upstream's
 * output and input (whatever it sent after its head), each written or
 * moved first, in order. The client connection closes when the request
 * ends. The admission in-flight gauges are released now (a tunnel is
 * bounded by limits.max_connections, not by the in-flight caps); the
 * endpoint's in-flight count is kept until the tunnel ends.
 */
static void proxy_tunnel_begin(struct req *r)
{
	struct proxy *p = PX(r);
	struct sockio *uio = p->uio, *cio;
	int rc;

	r->bytes_in += evbuffer_get_length(req_client_in(r));
	r->bytes_out += evbuffer_get_length(sockio_input(uio));
	req_timer_stop(r);
	req_leave_inflight(r);
	/* open, it holds its environment awake (docs/wake.md) */
	stream_wake_tunnel(&r->sw, r->w);
	p->uio = NULL; /* the tunnel's, never pooled */
	cio = req_client_take(r);
	p->state = PROXY_TUNNEL;
	rc = tunnel_start(r->w, cio, uio, TUNNEL_KIND_UPGRADE,
			  r->w->set.timeouts.tunnel_idle_ms, proxy_tunnel_done,
			  r, &p->tun);
	if (rc) {
		p->state = PROXY_RELAYING;
		p->reusable = false;
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
	}
}

static void proxy_respond(struct req *r, size_t head_len);

/* The fields of an injected page's head: no Content-Encoding (its
 * coding, if any, is the client's, compress.h), no Accept-Ranges (its
 * bytes are edge's), a strong ETag made weak. */
static void proxy_inject_head(struct proxy *p)
{
	struct h1_head *h = &p->resp.h;
	struct h1_header *f;
	unsigned i, n = 0;

	for (i = 0; i < h->nheaders; i++) {
		f = &h->headers[i];
		if (h1_eq(f->name, f->name_len, "content-encoding") ||
		    h1_eq(f->name, f->name_len, "accept-ranges"))
			continue;
		if (h1_eq(f->name, f->name_len, "etag") && !p->inj->etag &&
		    f->value_len >= 2 && f->value[0] == '"' &&
		    asprintf(&p->inj->etag, "W/%.*s", (int)f->value_len,
			     f->value) > 0) {
			f->value = p->inj->etag;
			f->value_len = f->value_len + 2;
		}
		h->headers[n++] = *f;
	}
	h->nheaders = n;
}

/* ... its body the page read whole, of len bytes. */
static void proxy_inject_fields(struct proxy *p, uint64_t len)
{
	struct h1_head *h = &p->resp.h;

	proxy_inject_head(p);
	p->resp.body = H1_BODY_LENGTH;
	h->content_length = (int64_t)len;
	h->chunked = false;
}

/* Decided: the response goes on from the raw buffer (as the upstream
 * sent it, or the injected page of len bytes when injected), its head
 * read again from there. */
static void proxy_inject_replay(struct req *r, bool injected, uint64_t len)
{
	struct proxy *p = PX(r);
	struct proxy_inject *ij = p->inj;
	const char *head;
	int rc;

	ij->decided = true;
	evbuffer_free(ij->scan);
	evbuffer_free(ij->coded);
	evbuffer_free(ij->page);
	ij->scan = ij->coded = ij->page = NULL;
	body_free(&ij->fr);
	dec_stream_free(ij->dec);
	ij->dec = NULL;
	head = (const char *)evbuffer_pullup(ij->raw, (ssize_t)ij->head_len);
	h1_response_init(&p->resp);
	rc = head ? h1_parse_response(head, ij->head_len, &r->w->set.h1,
				      r->h.method, p->upgrade, &p->resp)
		  : -1;
	if (rc != (int)ij->head_len) {
		p->reusable = false;
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	}
	if (injected)
		proxy_inject_fields(p, len);
	proxy_respond(r, ij->head_len);
}

/* Passed on as the upstream sent it, counted as result (-1: not counted,
 * the relay judges it: a framing error, a body cut short). */
static void proxy_inject_pass(struct req *r, int result)
{
	if (result >= 0)
		inject_count((enum inject_result)result);
	proxy_inject_replay(r, false, 0);
}

/* The page read whole: the snippets go in, or it goes on as it came. */
static void proxy_inject_finish(struct req *r)
{
	struct proxy *p = PX(r);
	struct proxy_inject *ij = p->inj;
	size_t n = evbuffer_get_length(ij->page);
	const char *page = n ? (const char *)evbuffer_pullup(ij->page, -1) : "";
	struct evbuffer *out = evbuffer_new(), *raw = evbuffer_new();
	uint64_t len;

	if (!out || !raw || (n && !page)) {
		if (out)
			evbuffer_free(out);
		if (raw)
			evbuffer_free(raw);
		proxy_inject_pass(r, INJECT_UNDECODABLE);
		return;
	}
	if (!inject_apply(r->m.inject, page, n, out)) {
		evbuffer_free(out);
		evbuffer_free(raw);
		proxy_inject_pass(r, INJECT_NO_TAG);
		return;
	}
	/* bytes after the body: the connection is not pooled */
	if (evbuffer_get_length(ij->scan))
		p->reusable = false;
	len = evbuffer_get_length(out);
	evbuffer_remove_buffer(ij->raw, raw, ij->head_len);
	evbuffer_add_buffer(raw, out);
	evbuffer_free(out);
	evbuffer_free(ij->raw);
	ij->raw = raw;
	inject_count(INJECT_INJECTED);
	proxy_inject_replay(r, true, len);
}

/* More of a response read for injection came (or its end). */
static void proxy_inject_read(struct req *r)
{
	struct proxy *p = PX(r);
	struct proxy_inject *ij = p->inj;
	uint64_t lim = r->w->set.limits.max_inject_bytes, data;
	size_t n;
	int rc, drc = 0;

	(void)px_in(p);
	if (ij->broken) {
		proxy_inject_pass(r, INJECT_UNDECODABLE);
		return;
	}
	rc = body_pump(&ij->fr, ij->scan, ij->coded, SIZE_MAX, &data);
	if (rc < 0) {
		proxy_inject_pass(r, -1);
		return;
	}
	n = evbuffer_get_length(ij->coded);
	if (ij->dec && n) {
		drc = dec_stream_write(ij->dec,
				       evbuffer_pullup(ij->coded, (ssize_t)n),
				       n, ij->page, lim);
		evbuffer_drain(ij->coded, n);
	} else if (n) {
		if (sockio_move(ij->coded, ij->page, n))
			ij->broken = true;
	}
	if (drc < 0 || ij->broken) {
		proxy_inject_pass(r, INJECT_UNDECODABLE);
		return;
	}
	/* the framing of a body counted too (chunk lines) */
	if (drc > 0 || evbuffer_get_length(ij->page) > lim ||
	    evbuffer_get_length(ij->raw) > 2 * lim + ij->head_len) {
		proxy_inject_pass(r, INJECT_TOO_LARGE);
		return;
	}
	if (rc == 0 && ij->fr.in == BODY_CLOSE && p->up_eof && !p->up_reset &&
	    evbuffer_get_length(ij->scan) == 0)
		rc = 1;
	if (rc == 1) {
		if (ij->dec && !dec_stream_done(ij->dec))
			proxy_inject_pass(r, INJECT_UNDECODABLE);
		else
			proxy_inject_finish(r);
		return;
	}
	if (p->up_eof)
		proxy_inject_pass(r, -1); /* cut short: the relay says so */
}

/*
 * Whether the response whose head (head_len bytes) was just parsed is
 * read whole for injection (inject.h) before its head goes on: then
 * proxy_respond is called again once it is decided. A body of kind (of
 * len bytes when BODY_LENGTH).
 */
static bool proxy_inject_begin(struct req *r, size_t head_len,
			       enum body_kind kind, int64_t len)
{
	struct proxy *p = PX(r);
	struct proxy_inject *ij;
	uint64_t ms = r->w->set.timeouts.upstream_response_ms;
	int coding;

	if (!r->m.inject || p->inj ||
	    !inject_applies(r->m.inject, &r->h, &p->resp, &coding))
		return false;
	if (kind == BODY_NONE || (kind == BODY_LENGTH && len == 0))
		return false;
	if (coding < 0) {
		inject_count(INJECT_UNDECODABLE);
		return false;
	}
	if (kind == BODY_LENGTH &&
	    (uint64_t)len > r->w->set.limits.max_inject_bytes &&
	    coding != ENC_IDENTITY) {
		inject_count(INJECT_TOO_LARGE);
		return false;
	}
	if (coding == ENC_IDENTITY &&
	    (kind != BODY_LENGTH ||
	     (uint64_t)len > r->w->set.limits.max_inject_bytes)) {
		/* streamed, or too long to hold: injected as it streams
		 * (proxy_respond) */
		if ((ij = calloc(1, sizeof(*ij)))) {
			ij->stream = ij->decided = true;
			p->inj = ij;
		}
		return false;
	}
	ij = calloc(1, sizeof(*ij));
	if (!ij || !(ij->raw = evbuffer_new()) ||
	    !(ij->scan = evbuffer_new()) || !(ij->coded = evbuffer_new()) ||
	    !(ij->page = evbuffer_new()) ||
	    (coding != ENC_IDENTITY &&
	     !(ij->dec = dec_stream_new((enum enc)coding)))) {
		proxy_inject_free(ij);
		return false; /* as it is */
	}
	body_init(&ij->fr, kind, kind == BODY_LENGTH ? (uint64_t)len : 0,
		  false);
	ij->head_len = head_len;
	p->inj = ij;
	(void)px_in(p); /* the head and what came after it */
	evbuffer_drain(ij->scan, head_len);
	p->state = PROXY_RELAYING;
	if (p->h2) {
		req_timer(r, ms); /* re-armed as DATA comes */
	} else {
		req_timer_stop(r);
		sockio_set_read_timeout(p->uio, ms);
	}
	proxy_inject_read(r);
	return true;
}

/* The response head is parsed: send the client its rebuilt head. */
static void proxy_respond(struct req *r, size_t head_len)
{
	struct proxy *p = PX(r);
	const struct h1_response *resp = &p->resp;
	bool close = req_closing(r), chunked = false;
	int64_t cl = -1;
	enum body_kind kind = BODY_NONE;
	char extra[512];
	uint64_t ms = r->w->set.timeouts.upstream_response_ms;
	struct enc_stream *enc = NULL;
	enum enc coding;
	int64_t blen;

	switch (resp->body) {
	case H1_BODY_NONE:
		if (r->h.method == H1_M_HEAD)
			cl = resp->h.content_length;
		break;
	case H1_BODY_LENGTH:
		kind = BODY_LENGTH;
		cl = resp->h.content_length;
		break;
	case H1_BODY_CHUNKED:
	case H1_BODY_CLOSE:
		kind =
		    resp->body == H1_BODY_CHUNKED ? BODY_CHUNKED : BODY_CLOSE;
		/* an HTTP/2 answer in one HEADERS frame (gRPC's
		 * trailers-only) goes on as one, without a body */
		if (p->h2 && h2up_stream_bodiless(p->h2)) {
			kind = BODY_LENGTH;
			cl = 0;
		}
		break;
	}
	p->reusable = p->reusable && resp->h.keep_alive && !resp->no_reuse &&
		      resp->body != H1_BODY_CLOSE;
	blen = cl; /* what the body pump reads: the upstream's length */
	if (proxy_inject_begin(r, head_len, kind, blen))
		return;
	if (p->inj && p->inj->stream) {
		/* injected as it streams: its length is edge's */
		proxy_inject_head(p);
		cl = -1;
	}
	coding = compress_choose(r->m.compression, &r->h, resp, cl);
	if (coding != ENC_IDENTITY &&
	    (enc = enc_stream_new(coding, r->m.compression
					      ? r->m.compression->level[coding]
					      : 0))) {
		/* its length is the coder's: chunked on HTTP/1.1 */
		cl = -1;
		r->resp_ed =
		    compress_edit_init(&p->cedit, coding, resp, r->resp_ed);
	}
	proxy_security(r, extra, sizeof(extra));
	if (req_respond(r, resp, extra, cl, &chunked, &close)) {
		enc_stream_free(enc);
		p->reusable = false;
		req_end(r, OUTCOME_UPSTREAM_BAD_RESPONSE, NULL);
		return;
	}
	/* the spans of resp point into the input: no use after this */
	evbuffer_drain(px_in(p), head_len);
	r->status = resp->code;
	r->resp_started = true;
	r->t_resp = clk_now_ns();
	if (p->resp.upgrade) {
		proxy_tunnel_begin(r);
		return;
	}
	if (close)
		req_close_after(r, false); /* delimited by the close */
	p->state = PROXY_RELAYING;
	body_init(&p->resp_body, kind, kind == BODY_LENGTH ? (uint64_t)blen : 0,
		  chunked);
	if (enc && body_encode(&p->resp_body, enc)) {
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	}
	if (p->inj && p->inj->stream &&
	    body_inject(&p->resp_body, inject_stream_new(r->m.inject))) {
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	}
	/* trailers in a chunked response to a client that takes them */
	p->resp_body.pass_trailers = r->h.te_trailers;
	if (p->h2) {
		req_timer(r, ms); /* re-armed as DATA comes */
	} else {
		req_timer_stop(r);
		sockio_set_read_timeout(p->uio, ms);
	}
	proxy_relay(r);
}

/*
 * A chunked response's first chunk line, s[0..n) being what came after
 * its head: checked before the head goes to the client, so that a broken
 * one is answered 502 rather than a 200 cut short. Returns true when the
 * line is there and valid. Otherwise false: the request has ended (502
 * upstream_bad_response), or the line is not complete yet and the head
 * is held until it is, timeouts.upstream_response from the head's
 * arrival at most (then 504 upstream_timeout, proxy_timeout).
 */
static bool proxy_first_chunk(struct req *r, const char *s, size_t n)
{
	struct proxy *p = PX(r);
	enum h1_err e = H1_E_NONE;
	int rc;

	rc = h1_chunk_line_check(s, n, &r->w->set.h1, &e);
	if (rc > 0)
		return true;
	if (rc == 0) {
		if (!p->head_held) {
			p->head_held = true;
			px_timer(r, r->w->set.timeouts.upstream_response_ms);
		}
		return false;
	}
	proxy_ep_failed(r, UPREG_WHY_BAD_CHUNK, 0, h1_err_name(e));
	p->reusable = false;
	req_end(r, OUTCOME_UPSTREAM_BAD_RESPONSE, NULL);
	return false;
}

/* Parse the response head in the upstream's input (and a chunked one's
 * first chunk line). */
static void proxy_parse(struct req *r)
{
	const struct h1_limits *h1 = &r->w->set.h1;
	struct proxy *p = PX(r);
	struct evbuffer *in = px_in(p);
	const char *buf;
	size_t len, n, avail;
	uint64_t now;
	int rc;

	/* an answer: the request's other attempts lose */
	if (p->hg && evbuffer_get_length(in))
		proxy_hedge_over(r);
	for (;;) {
		len = evbuffer_get_length(in);
		if (len == 0)
			return;
		n = len < h1->head_max + 1 ? len : h1->head_max + 1;
		/* the head and the first chunk line after it, at most */
		avail = len < proxy_head_room(h1) ? len : proxy_head_room(h1);
		buf = (const char *)evbuffer_pullup(in, (ssize_t)avail);
		rc = h1_parse_response(buf, n, h1, r->h.method, p->upgrade,
				       &p->resp);
		if (rc == 0)
			return;
		if (rc < 0) {
			proxy_ep_failed(r, UPREG_WHY_BAD_RESPONSE, 0,
					h1_err_name(p->resp.h.err));
			p->reusable = false;
			req_end(r, OUTCOME_UPSTREAM_BAD_RESPONSE, NULL);
			return;
		}
		if (p->resp.code >= 200 || p->resp.upgrade) {
			r->up_status = p->resp.code;
			/* a woken endpoint that answers serves */
			wake_answered(r->w->sh->wake, r->sw.env, true);
			break;
		}
		/* an interim 1xx (100 Continue: edge sent its own) */
		evbuffer_drain(in, (size_t)rc);
		h1_response_init(&p->resp);
	}
	if (p->resp.upgrade && !proxy_upgrade_matches(r, &p->resp)) {
		proxy_ep_failed(r, UPREG_WHY_BAD_UPGRADE, 0, NULL);
		p->reusable = false;
		req_end(r, OUTCOME_UPSTREAM_BAD_RESPONSE, NULL);
		return;
	}
	if (p->resp.body == H1_BODY_CHUNKED &&
	    !proxy_first_chunk(r, buf + rc, avail - (size_t)rc))
		return;
	now = clk_now_ns();
	upstream_report(r->w->up, p->u.ep, true, now);
	if (r->m.hedge && r->m.hedge->set)
		upstream_hedge_sample(
		    r->w->up, proxy_retry_key(r),
		    now > p->u.t_connect ? now - p->u.t_connect : 0, now);
	{
		struct ssl_st *ssl =
		    p->h2 ? h2up_stream_ssl(p->h2)
			  : tls_transport_ssl(sockio_transport(p->uio));

		upreg_set_proto(upstream_ep_shared(p->u.ep), p->h2 ? 2 : 1);
		if (ssl)
			upreg_set_tls(upstream_ep_shared(p->u.ep),
				      tls_up_verified(ssl)
					  ? UPREG_TLS_VERIFIED
					  : UPREG_TLS_UNVERIFIED);
	}
	upreg_count_response(upstream_ep_shared(p->u.ep), p->resp.code,
			     now > r->t_connect ? now - r->t_connect : 0);
	/* a 502, 503 or 504 the retry group lists: another endpoint may
	 * answer better (the response goes if it may not) */
	if (p->resp.code >= 502 && p->resp.code <= 504 &&
	    proxy_may_retry(r, CONFIG_RETRY_ON_502 << (p->resp.code - 502),
			    true)) {
		proxy_retry(r);
		return;
	}
	/* the head must outlive the input: respond before draining it */
	proxy_respond(r, (size_t)rc);
}

/* Relay what the upstream sent of the response body to the client. */
static void proxy_relay(struct req *r)
{
	struct proxy *p = PX(r);
	struct evbuffer *uin, *cout;
	size_t queued, before;
	uint64_t data;
	int rc;

	if (p->state != PROXY_RELAYING || !px_up(p))
		return;
	if (p->inj && !p->inj->decided) {
		proxy_inject_read(r);
		return;
	}
	uin = px_in(p);
	cout = req_client_out(r);
	queued = evbuffer_get_length(cout);
	if (queued >= PROXY_HIGH_WATER) {
		px_read(r, false);
		return;
	}
	before = queued;
	rc = body_pump(&p->resp_body, uin, cout, PROXY_HIGH_WATER - queued,
		       &data);
	r->bytes_out += evbuffer_get_length(cout) - before;
	/* a page replayed from memory (injection) gets no read event for
	 * what is left of it: go on while the client takes it */
	while (rc == 0 && p->inj && p->inj->raw &&
	       evbuffer_get_length(uin) > 0 &&
	       (queued = evbuffer_get_length(cout)) < PROXY_HIGH_WATER) {
		rc = body_pump(&p->resp_body, uin, cout,
			       PROXY_HIGH_WATER - queued, &data);
		r->bytes_out += evbuffer_get_length(cout) - queued;
	}
	if (rc < 0) {
		proxy_body_failed(r, UPREG_WHY_BAD_BODY, 0);
		p->reusable = false;
		req_end(r, OUTCOME_UPSTREAM_BAD_RESPONSE, NULL);
		return;
	}
	if (p->resp_body.in == BODY_CLOSE && p->up_eof && !p->up_reset &&
	    evbuffer_get_length(uin) == 0) {
		r->bytes_out += body_close(&p->resp_body, cout,
					   p->h2 && r->h.te_trailers
					       ? h2up_stream_trailers(p->h2)
					       : NULL);
		rc = 1;
	}
	if (rc == 1 && p->h2 && !p->up_eof)
		return; /* its END_STREAM (and trailers) to come */
	if (rc == 1 && !p->up_reset) {
		/* trailers for a client whose body is not chunked (HTTP/2) */
		if (!p->resp_body.out_chunked)
			req_client_trailers(r, p->h2
						   ? h2up_stream_trailers(p->h2)
						   : p->resp_body.trailers);
		if (evbuffer_get_length(uin) > 0)
			p->reusable = false; /* more than it announced */
		if (!p->req_body.done)
			p->reusable = false;
		req_end(r, OUTCOME_OK, NULL);
		return;
	}
	if (p->up_eof && evbuffer_get_length(uin) == 0) {
		/* the upstream died before the end of the body */
		proxy_body_failed(r, UPREG_WHY_BODY_CLOSED, p->up_err);
		p->reusable = false;
		req_end(r, OUTCOME_UPSTREAM_BAD_RESPONSE, NULL);
		return;
	}
	if (evbuffer_get_length(cout) >= PROXY_HIGH_WATER)
		px_read(r, false);
}

static void proxy_up_read_cb(struct sockio *uio, void *arg)
{
	struct req *r = arg;

	(void)uio;
	if (PX(r)->state == PROXY_WAITING)
		proxy_parse(r);
	else if (PX(r)->state == PROXY_RELAYING)
		proxy_relay(r);
}

/* The upstream took request bytes: the body goes on. */
static void proxy_up_writable(struct req *r)
{
	if (!PX(r)->req_body.done) {
		if (PX(r)->send_stalled && PX(r)->state == PROXY_WAITING) {
			/* the upstream took bytes again (a held head keeps
			 * its timer) */
			PX(r)->send_stalled = false;
			if (!PX(r)->head_held)
				req_timer_stop(r);
		}
		req_client_read(r, true);
		proxy_pump_request(r);
	}
}

static void proxy_up_write_cb(struct sockio *uio, void *arg)
{
	(void)uio;
	proxy_up_writable(arg);
}

/* An https:// endpoint's TLS failed (its certificate not verified, the
 * handshake refused, an alert): 502 upstream_tls_failed, the reason
 * logged and reported. Whether it did. */
static bool proxy_tls_failed(struct req *r)
{
	struct proxy *p = PX(r);
	char why[200];

	struct ssl_st *ssl;

	/* a pooled connection's handshake was done long ago: its end is the
	 * upstream's keep-alive race (retried below), not TLS's */
	if (!p->uio || p->u.reused)
		return false;
	if (!tls_transport_failure(sockio_transport(p->uio), why,
				   sizeof(why))) {
		/* closed before a byte of the response, after asking for
		 * a client certificate it did not get */
		ssl = tls_transport_ssl(sockio_transport(p->uio));
		if (!ssl || p->u.reused || !tls_up_cert_wanted(ssl) ||
		    evbuffer_get_length(sockio_input(p->uio)))
			return false;
		snprintf(why, sizeof(why),
			 "the upstream asked for a client certificate; the "
			 "deployment has none (tls.cert, tls.key)");
	}
	p->reusable = false;
	upreg_set_tls(upstream_ep_shared(p->u.ep), UPREG_TLS_FAILED);
	proxy_ep_failed(r, UPREG_WHY_TLS, 0, why);
	req_end(r, OUTCOME_UPSTREAM_TLS_FAILED, NULL);
	return true;
}

static void proxy_up_event_cb(struct sockio *uio, short what, void *arg)
{
	struct req *r = arg;
	struct proxy *p = PX(r);
	int err = what & SOCKIO_ERROR ? errno : 0;
	char detail[64];

	(void)uio;
	switch (p->state) {
	case PROXY_CONNECTING:
		if (what & SOCKIO_CONNECTED)
			proxy_connected(r);
		else if (!proxy_tls_failed(r)) /* a handshake's failure */
			proxy_attempt_failed(r, UPREG_WHY_CONNECT, err);
		return;
	case PROXY_WAITING:
		if (what & SOCKIO_TIMEOUT)
			return;
		if (proxy_tls_failed(r))
			return;
		if (p->u.reused &&
		    (p->req_body.in == BODY_NONE || p->buffered) &&
		    method_idempotent(r->h.method) &&
		    evbuffer_get_length(sockio_input(p->uio)) == 0) {
			/* a pooled connection the upstream had closed: retry
			 * on a new one (tried[] still lets another endpoint
			 * be chosen; this one is not blamed); a buffered body
			 * is still in p->held */
			proxy_drop_uio(r, false);
			upconn_retry(&p->u);
			proxy_connect(r);
			return;
		}
		p->reusable = false;
		if (evbuffer_get_length(sockio_input(p->uio)) == 0 &&
		    p->u.reused) {
			/* most likely the pool's race with the upstream's
			 * keep-alive timeout, not a failing endpoint; the
			 * request may have been acted on: not retried */
			if (proxy_hedge_takeover(r))
				return;
			req_end(r, OUTCOME_UPSTREAM_CLOSED, NULL);
			return;
		}
		/* reached, but it closed with no head or half of one, or
		 * before a held head's first chunk line */
		snprintf(detail, sizeof(detail),
			 "after %zu bytes of response head%s",
			 evbuffer_get_length(sockio_input(p->uio)),
			 p->head_held ? " and before its first chunk line"
				      : "");
		proxy_ep_failed(r, UPREG_WHY_CLOSED, err, detail);
		if (proxy_hedge_takeover(r))
			return;
		if (proxy_may_retry(r, CONFIG_RETRY_ON_RESET, true)) {
			proxy_retry(r);
			return;
		}
		/* a woken endpoint that resets its first request fails its
		 * wake */
		wake_answered(r->w->sh->wake, r->sw.env, false);
		req_end(r, OUTCOME_UPSTREAM_BAD_RESPONSE, NULL);
		return;
	case PROXY_RELAYING:
		if (what & SOCKIO_TIMEOUT) {
			proxy_body_failed(r, UPREG_WHY_BODY_TIMEOUT, 0);
			p->reusable = false;
			req_end(r, OUTCOME_UPSTREAM_TIMEOUT, NULL);
			return;
		}
		p->up_eof = true;
		p->up_err = err;
		p->reusable = false;
		sockio_disable(p->uio, EV_READ);
		proxy_relay(r);
		return;
	case PROXY_IDLE:
	case PROXY_BUFFERING: /* no upstream yet */
	case PROXY_BACKOFF:
	case PROXY_QUEUED:
	case PROXY_TUNNEL: /* the tunnel has its own descriptors */
		return;
	}
}

/* A request on an HTTP/2 stream goes again, on a stream of another
 * session or endpoint (fresh: of a new connection, its own at first):
 * when its body can be sent again (none, or read whole), at most
 * UPCONN_TRIES_MAX times; else 502 upstream_closed. */
static void proxy_h2_retry(struct req *r, bool fresh)
{
	struct proxy *p = PX(r);

	proxy_drop_uio(r, false);
	if ((p->req_body.in != BODY_NONE && !p->buffered) ||
	    ++p->h2_retries > UPCONN_TRIES_MAX) {
		p->reusable = false;
		req_end(r, OUTCOME_UPSTREAM_CLOSED, NULL);
		return;
	}
	p->u.fresh = fresh;
	upconn_retry(&p->u);
	proxy_connect(r);
}

/*
 * The stream ended before its response did (h2up.h's H2UP_EV_CLOSED).
 * Connecting: its session's connect or TLS failed (the attempt's
 * failure), or its connection chose http/1.1 for another request (this
 * one goes again). Waiting for the head: a stream the server never
 * processed (REFUSED_STREAM, above a GOAWAY's last stream) goes again,
 * as does an idempotent one whose shared connection ended (the server
 * may have closed it as it went); otherwise 502. Relaying: the body is
 * cut short.
 */
static void proxy_h2_closed(struct req *r, struct h2up_stream *st)
{
	struct proxy *p = PX(r);
	uint32_t code = h2up_stream_code(st);
	int err = h2up_stream_err(st);
	char why[200];

	switch (p->state) {
	case PROXY_CONNECTING:
		if (h2up_stream_tls_failure(st, why, sizeof(why))) {
			p->reusable = false;
			upreg_set_tls(upstream_ep_shared(p->u.ep),
				      UPREG_TLS_FAILED);
			proxy_ep_failed(r, UPREG_WHY_TLS, 0, why);
			req_end(r, OUTCOME_UPSTREAM_TLS_FAILED, NULL);
			return;
		}
		if (!err && h2up_stream_refused(st)) {
			proxy_h2_retry(r, false);
			return;
		}
		proxy_attempt_failed(r, UPREG_WHY_CONNECT, err);
		return;
	case PROXY_WAITING:
		if (h2up_stream_refused(st)) {
			proxy_h2_retry(r, false);
			return;
		}
		/* the request may be what ended the connection: it goes
		 * again on a new one, where it cannot end other streams */
		if (!code && h2up_stream_reused(st) &&
		    method_idempotent(r->h.method)) {
			proxy_h2_retry(r, true);
			return;
		}
		if (code)
			snprintf(why, sizeof(why), "stream reset: %s",
				 h2up_code_name(code));
		else
			snprintf(why, sizeof(why),
				 "the connection ended before the response");
		proxy_ep_failed(r, UPREG_WHY_CLOSED, code ? 0 : err, why);
		if (proxy_hedge_takeover(r))
			return;
		if (proxy_may_retry(r, CONFIG_RETRY_ON_RESET, true)) {
			proxy_retry(r);
			return;
		}
		wake_answered(r->w->sh->wake, r->sw.env, false);
		p->reusable = false;
		req_end(r, OUTCOME_UPSTREAM_BAD_RESPONSE, NULL);
		return;
	case PROXY_RELAYING:
		p->up_reset = true;
		p->up_eof = true;
		p->up_err = err ? err : ECONNRESET;
		proxy_relay(r);
		return;
	default:
		return;
	}
}

/* An event of the request's HTTP/2 stream (one at a time; none after
 * the stream is closed). */
static void proxy_h2_cb(struct h2up_stream *st, unsigned ev, void *arg)
{
	struct req *r = arg;
	struct proxy *p = PX(r);
	struct sockio *uio;

	switch (ev) {
	case H2UP_EV_READY:
		if (p->state == PROXY_CONNECTING)
			proxy_connected(r);
		return;
	case H2UP_EV_HTTP1:
		/* its connection chose http/1.1 by ALPN: the request goes
		 * over it as HTTP/1.1 */
		uio = h2up_stream_take(st);
		p->h2 = NULL;
		proxy_set_uio(r, uio);
		proxy_connected(r);
		return;
	case H2UP_EV_HEAD:
		if (p->state == PROXY_WAITING)
			proxy_parse(r);
		return;
	case H2UP_EV_DATA:
		if (p->state == PROXY_RELAYING) {
			req_timer(r, r->w->set.timeouts.upstream_response_ms);
			proxy_relay(r);
		}
		return;
	case H2UP_EV_END:
		p->up_eof = true;
		if (p->state == PROXY_RELAYING)
			proxy_relay(r);
		return;
	case H2UP_EV_DRAINED:
		proxy_up_writable(r);
		return;
	case H2UP_EV_CLOSED:
		proxy_h2_closed(r, st);
		return;
	default:
		return;
	}
}

static void proxy_client_readable(struct req *r)
{
	if (PX(r)->state == PROXY_TUNNEL)
		return;
	if (PX(r)->state == PROXY_BUFFERING)
		proxy_buffer_body(r);
	else
		proxy_pump_request(r);
}

static void proxy_client_drained(struct req *r)
{
	struct proxy *p = PX(r);

	if (p->state == PROXY_RELAYING && px_up(p)) {
		if (!p->up_eof)
			px_read(r, true);
		proxy_relay(r);
	}
}

static void proxy_client_gone(struct req *r, bool eof)
{
	struct proxy *p = PX(r);

	if (p->state == PROXY_TUNNEL)
		return; /* the tunnel has the socket and ends itself */
	if (p->state == PROXY_QUEUED) {
		/* waiting for an endpoint's slot: a client that closes (or
		 * half-closes: the two look the same until edge writes) has
		 * given up, as in the admission queue; never sent */
		req_end(r, OUTCOME_CLIENT_CLOSED, NULL);
		return;
	}
	if (eof && p->req_body.done) {
		/* a half-close after a complete request: answer, then close */
		req_close_after(r, true);
		return;
	}
	p->reusable = false;
	req_end(r, OUTCOME_CLIENT_CLOSED, NULL);
}

static void proxy_timeout(struct req *r)
{
	struct proxy *p = PX(r);

	if ((p->state == PROXY_CONNECTING || p->state == PROXY_BACKOFF ||
	     p->state == PROXY_QUEUED || p->state == PROXY_WAITING) &&
	    px_deadline(r))
		return;
	switch (p->state) {
	case PROXY_QUEUED:
		proxy_slot_timeout(r);
		return;
	case PROXY_CONNECTING:
		proxy_attempt_failed(r, UPREG_WHY_CONNECT_TIMEOUT, 0);
		return;
	case PROXY_BACKOFF:
		req_timer_stop(r);
		proxy_connect(r);
		return;
	case PROXY_WAITING:
		proxy_ep_failed(
		    r, UPREG_WHY_RESPONSE_TIMEOUT, 0,
		    p->head_held ? "waiting for its first chunk line" : NULL);
		if (proxy_hedge_takeover(r))
			return;
		p->reusable = false;
		req_end(r, OUTCOME_UPSTREAM_TIMEOUT, NULL);
		return;
	case PROXY_RELAYING:
		if (!p->h2) /* the connection's read timeout times it */
			return;
		proxy_body_failed(r, UPREG_WHY_BODY_TIMEOUT, 0);
		req_end(r, OUTCOME_UPSTREAM_TIMEOUT, NULL);
		return;
	default:
		return;
	}
}

/* Clear the upstream side for a new request: all but the response's
 * header array (3 KB, see h1_zero_around). */
static void proxy_reset(struct req *r)
{
	struct proxy *p = PX(r);

	h1_zero_around(p, sizeof(*p), p->resp.h.headers,
		       sizeof(p->resp.h.headers));
}

static bool proxy_tunnel(const struct req *r)
{
	return PX(r)->state == PROXY_TUNNEL;
}

static bool proxy_body_done(const struct req *r)
{
	return PX(r)->req_body.done;
}

const struct req_upstream_ops proxy_ops = {
    .start = proxy_start,
    .readable = proxy_client_readable,
    .drained = proxy_client_drained,
    .gone = proxy_client_gone,
    .timeout = proxy_timeout,
    .btimeout = proxy_body_timeout,
    .release = proxy_release,
    .reset = proxy_reset,
    .tunnel = proxy_tunnel,
    .body_done = proxy_body_done,
};

/* The service's init: the upstream pool gives its idle connections back
 * through the proxy. */
static int proxy_worker_init(struct worker *w, struct errbuf *err)
{
	struct proxy_set *ps = calloc(1, sizeof(*ps));

	if (!ps) {
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	ps->w = w;
	ps->kick = event_new(w->base, -1, 0, proxy_slot_cb, ps);
	ps->poll = evtimer_new(w->base, proxy_slot_cb, ps);
	if (!ps->kick || !ps->poll) {
		if (ps->kick)
			event_free(ps->kick);
		if (ps->poll)
			event_free(ps->poll);
		free(ps);
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	w->px = ps;
	upstream_worker_set_release(w->up, proxy_pool_release);
	return 0;
}

/* The service's free (before the connections' own, services being freed
 * in reverse): the waiters are let go of, their requests end later. */
static void proxy_worker_free(struct worker *w)
{
	struct proxy_set *ps = w->px;
	struct req *r, *next;

	if (!ps)
		return;
	for (r = ps->head; r; r = next) {
		next = PX(r)->wnext;
		PX(r)->wnext = PX(r)->wprev = NULL;
	}
	event_free(ps->kick);
	event_free(ps->poll);
	free(ps);
	w->px = NULL;
}

const struct worker_service proxy_service = {
    .name = "proxy",
    .init = proxy_worker_init,
    .free = proxy_worker_free,
};
