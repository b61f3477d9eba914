// SPDX-License-Identifier: BSD-2-Clause
/*
 * req.c - a request's life (req.h): begin at its first byte, parse the
 * head, Resolve, Admit (or wait in the admission queue), hand over to the
 * proxy, and req_end(), the one function every request ends in: the
 * error answer, the analytics record and metrics, the release of what the
 * request held.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "acme_chal.h"
#include "analytics.h"
#include "auth.h"
#include "challenge.h"
#include "clk.h"
#include "edge_assert.h"
#include "fauth.h"
#include "mailbox.h"
#include "record.h"
#include "req.h"
#include "sockio.h"
#include "worker.h"

/* The port an https:// URL leaves out. */
#define REQ_HTTPS_PORT 443

/* ---- the client's side, for the proxy ----------------------------------- */

struct evbuffer *req_client_in(const struct req *r)
{
	return r->cl->in(r);
}

struct evbuffer *req_client_out(const struct req *r)
{
	return r->cl->out(r);
}

void req_client_read(struct req *r, bool on)
{
	r->cl->read(r, on);
}

bool req_client_reading(const struct req *r)
{
	return r->cl->reading(r);
}

void req_client_watermarks(struct req *r, size_t read_high, size_t write_low)
{
	r->cl->watermarks(r, read_high, write_low);
}

bool req_client_closed(const struct req *r)
{
	return r->cl->closed(r);
}

void req_close_after(struct req *r, bool half_closed)
{
	r->cl->close_after(r, half_closed);
}

bool req_closing(const struct req *r)
{
	return r->cl->closing(r);
}

void req_client_trailers(struct req *r, struct evbuffer *tr)
{
	if (tr && evbuffer_get_length(tr) > 0 && r->cl->trailers)
		r->cl->trailers(r, tr);
}

struct sockio *req_client_take(struct req *r)
{
	return r->cl->take(r);
}

int req_respond(struct req *r, const struct h1_response *resp,
		const char *extra, int64_t cl, bool *chunked, bool *close)
{
	return r->cl->respond(r, resp, extra, cl, chunked, close);
}

void req_timer(struct req *r, uint64_t ms)
{
	r->cl->timer(r, ms);
}

void req_timer_stop(struct req *r)
{
	r->cl->timer_stop(r);
}

void req_body_timer(struct req *r, uint64_t ms)
{
	r->cl->btimer(r, ms);
}

void req_body_timer_stop(struct req *r)
{
	r->cl->btimer_stop(r);
}

/* ---- begin and end ------------------------------------------------------- */

_Static_assert(offsetof(struct req, up) + REQ_UPSTREAM_SIZE ==
		   sizeof(struct req),
	       "req_begin zeroes struct req up to up, then up_ops resets up");

/* The upstream side's hooks (services.c installs proxy.c's). */
static const struct req_upstream_ops *req_up(const struct req *r)
{
	return r->w->sh->up_ops;
}

void req_release(struct req *r)
{
	req_up(r)->release(r, false);
}

/* A peer in trusted_proxies that says, in X-Forwarded-For, whom it
 * forwards: that client is the request's for every stage from here (IP
 * rules, the rate limit, ip_hash, X-Client-IP, analytics); the
 * connection's own address stays what X-Forwarded-For is trusted by and
 * appended with. */
static void req_xff_client(struct req *r)
{
	struct sockaddr_storage *ss = &r->xff_sa;

	if (!r->peer_cidr || !r->w->set.trusted_proxies.n ||
	    !trusted_has(&r->w->set.trusted_proxies, r->peer_cidr) ||
	    hdr_xff_client(&r->h.h, &r->w->set.trusted_proxies, r->xff_ip,
			   &r->xff_cidr))
		return;
	memset(ss, 0, sizeof(*ss));
	if (r->xff_cidr.family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;

		a->sin_family = AF_INET;
		memcpy(&a->sin_addr, r->xff_cidr.addr, 4);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		a->sin6_family = AF_INET6;
		memcpy(&a->sin6_addr, r->xff_cidr.addr, 16);
	}
	r->xff_client = true;
	r->conn_ip = r->client_ip;
	r->conn_peer = r->peer;
	r->conn_cidr = r->peer_cidr;
	r->client_ip = r->xff_ip;
	r->peer = (const struct sockaddr *)ss;
	r->peer_cidr = &r->xff_cidr;
}

void req_begin(struct req *r)
{
	const struct req_client_ops *cl = r->cl;
	void *cl_arg = r->cl_arg;
	struct worker *w = r->w;
	/* the connection's, not the last request's X-Forwarded-For client */
	const char *ip = r->xff_client ? r->conn_ip : r->client_ip;
	const struct sockaddr *peer = r->xff_client ? r->conn_peer : r->peer;
	const struct cidr *peer_cidr =
	    r->xff_client ? r->conn_cidr : r->peer_cidr;
	bool tls = r->tls, tls_resumed = r->tls_resumed;
	const char *tls_version = r->tls_version, *tls_cipher = r->tls_cipher;
	const char *http_version = r->http_version;
	int conn_fd = r->conn_fd;

	/* all but the request's header array, 3 KB (see h1_zero_around);
	 * the upstream side's state, up, is the last member: its own */
	h1_zero_around(r, offsetof(struct req, up), r->h.h.headers,
		       sizeof(r->h.h.headers));
	w->sh->up_ops->reset(r);
	r->cl = cl;
	r->cl_arg = cl_arg;
	r->w = w;
	r->client_ip = ip;
	r->peer = peer;
	r->peer_cidr = peer_cidr;
	r->conn_fd = conn_fd;
	r->tls = tls;
	r->tls_resumed = tls_resumed;
	r->tls_version = tls_version;
	r->tls_cipher = tls_cipher;
	r->http_version = http_version;
	r->active = true;
	r->state = REQ_HEAD;
	r->t0 = clk_now_ns();
	r->t0_real = clk_real_ns();
	h1_request_init(&r->h);
}

const char *req_via_version(const struct req *r)
{
	const char *v = r->http_version;

	if (v && strncmp(v, "HTTP/", 5) == 0)
		return v + 5;
	return r->h.h.minor ? "1.1" : "1.0";
}

/* Whether the request has body bytes the client may still send. */
static bool req_body_pending(const struct req *r)
{
	if (!r->head)
		return false; /* no complete head: the connection closes */
	if (!r->h.h.chunked && r->h.h.content_length <= 0)
		return false;
	return !req_up(r)->body_done(r);
}

/* Record: the stream's one record (record.h). */
static void req_record(struct req *r, enum outcome o)
{
	struct record rec = {
	    .outcome = o,
	    .status = r->status,
	    .t0 = r->t0,
	    .t_connect = r->t_connect,
	    .t_up = r->t_resp,
	    .t0_real = r->t0_real,
	    .bytes_in = r->bytes_in,
	    .bytes_out = r->bytes_out,
	    .id = r->id,
	    .client_ip = r->client_ip,
	    .mover = r->mover,
	    .up_addr = r->up_addr,
	    .up_status = r->up_status,
	    .attempts = r->attempts,
	    .woken = r->sw.woken,
	    .cold_ms = r->sw.cold_ms,
	    .tls = r->tls,
	    .tls_resumed = r->tls_resumed,
	    .tls_version = r->tls_version,
	    .tls_cipher = r->tls_cipher,
	    .challenge = r->chal,
	    .auth = r->auth_m ? auth_method_name(r->auth_m) : NULL,
	    .trace_id = r->trace.trace_id[0] ? r->trace.trace_id : NULL,
	    .span_id = r->trace.span_id[0] ? r->trace.span_id : NULL,
	};

	if (r->routed) {
		rec.project_id = r->m.project_id;
		rec.env_id = r->m.env_id;
		rec.deployment_id = r->m.deployment_id;
	}
	if (r->head) {
		rec.host = r->h.host;
		rec.host_len = r->h.host_len;
		rec.http = &r->h;
		rec.http_version = r->http_version;
	}
	record_end(r->w->sh, &rec);
}

/* The JSON error response for o, built like every other head. */
static void req_send_error(struct req *r, enum outcome o, const char *extra,
			   bool close)
{
	char body[1024];
	ssize_t blen;
	int status = r->own_status ? r->own_status : outcome_status(o);

	if (r->own_body)
		r->cl->error(r, status, extra, r->own_body, r->own_body_len,
			     close);
	else {
		blen = outcome_error_body(o, r->id, body, sizeof(body));
		r->cl->error(r, status, extra, body,
			     blen < 0 ? 0 : (size_t)blen, close);
	}
	r->status = status;
	r->resp_started = true;
}

void req_leave_inflight(struct req *r)
{
	struct worker_shared *sh = r->w->sh;

	if (!r->inflight)
		return;
	r->inflight = false;
	admit_inflight_leave(&sh->inflight, r->m.inflight);
	admit_queue_kick(&sh->queue);
}

/* Out of the admission queue (if in it) and its id given back. */
static void req_unqueue(struct req *r)
{
	struct worker_shared *sh = r->w->sh;

	if (r->waiter.queued && admit_queue_remove(&sh->queue, &r->waiter))
		if (r->waiter.notified)
			admit_queue_kick(&sh->queue); /* pass it on */
	if (r->handle)
		worker_handle_free(r->w, r->handle);
	r->handle = 0;
}

void req_end(struct req *r, enum outcome o, const char *extra)
{
	bool close;

	if (!r->active)
		return;
	if (o == OUTCOME_OK && r->state == REQ_PROXY && r->cl->pending &&
	    !req_up(r)->tunnel(r) && r->cl->pending(r)) {
		/* the upstream is done with: it goes now; the request ends
		 * when its client has taken the response, or leaves */
		req_up(r)->release(r, true);
		req_leave_inflight(r);
		r->state = REQ_SENDING;
		return;
	}
	r->active = false;
	if (req_up(r)->tunnel(r)) {
		/* however a tunnel ends (closed, idle, error, edge closing the
		 * connection), it is recorded as one: the release closes it
		 * and adds its byte counts before req_record */
		o = OUTCOME_TUNNEL;
		req_close_after(r, true);
	}
	if (!r->id[0] && hdr_request_id_new(r->id))
		snprintf(r->id, sizeof(r->id), "-");
	close =
	    req_closing(r) || r->w->draining || !r->head || req_body_pending(r);
	if (outcome_sends_error(o)) {
		if (o == OUTCOME_CONNECTION_LIMIT ||
		    o == OUTCOME_HEADER_TIMEOUT || o == OUTCOME_BODY_TIMEOUT ||
		    o == OUTCOME_INTERNAL_ERROR || o == OUTCOME_FD_EXHAUSTED)
			close = true;
		if (!r->resp_started)
			req_send_error(r, o, extra, close);
		else
			close = true; /* a relayed response was cut short */
	} else if (o == OUTCOME_CLIENT_CLOSED) {
		close = true;
		if (!r->resp_started)
			r->status = OUTCOME_CLIENT_CLOSED_STATUS;
	}
	r->outcome = o;
	fauth_cancel(r->fauth);
	r->fauth = NULL;
	req_unqueue(r);
	stream_wake_leave(&r->sw, r->w);
	EDGE_ASSERT(!r->waiter.queued && !r->handle);
	req_up(r)->release(r, o == OUTCOME_OK);
	req_record(r, o);
	/* the route's series (its table is held until below) */
	if (r->routed && r->m.classes && r->status >= 100 && r->status <= 599)
		atomic_fetch_add_explicit(&r->m.classes[r->status / 100 - 1], 1,
					  memory_order_relaxed);
	req_leave_inflight(r);
	route_table_put(r->rt);
	r->rt = NULL;
	route_table_put(r->rt_woken);
	r->rt_woken = NULL;
	r->routed = false;
	r->state = REQ_IDLE;
	free(r->head);
	r->head = NULL;
	free(r->own_body);
	r->own_body = NULL;
	free(r->auth_fields);
	r->auth_fields = NULL;
	free(r->fwd_fields);
	r->fwd_fields = NULL;
	r->cl->ended(r, close);
}

/* ---- Resolve and Admit --------------------------------------------------- */

/* Hand r to the proxy (Resolve and Admit passed, in-flight slot held). */
static void req_forward(struct req *r)
{
	struct h1_request *h = &r->h;

	if (h->expect_continue && (h->h.chunked || h->h.content_length > 0))
		r->cl->cont(r);
	r->state = REQ_PROXY;
	req_up(r)->start(r);
}

/* End r with o (a 503 of the wake stage), Retry-After: retry_s. */
static void req_end_retry(struct req *r, enum outcome o, unsigned retry_s)
{
	char retry[40];

	snprintf(retry, sizeof(retry), "Retry-After: %u\r\n", retry_s);
	req_end(r, o, retry);
}

/*
 * Wake: r's environment is on demand (docs/wake.md). Running: on to the
 * proxy now. Waking (or woken by r, a slot being free): r waits in
 * REQ_WAKING, with an id its worker's mailbox names it by, its timer at
 * the wake timeout plus WAKE_GRACE_MS in case the notify is lost; the
 * wake's end comes as REQ_MSG_WAKE. No slot: 503 wake_throttled. Its
 * last wake failed and the back-off runs: 503 wake_failed at once.
 */
static void req_go(struct req *r)
{
	static const char retry[] = "Retry-After: 1\r\n";
	struct wake *wk = r->w->sh->wake;

	_Static_assert(WAKE_RETRY_AFTER_S == 1, "retry above");
	if (!r->m.on_demand || !wk) {
		req_forward(r);
		return;
	}
	if (worker_handle_new(r->w, r, &r->handle)) {
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	}
	r->sw.cls = r->m.no_wake      ? WAKE_CLS_PASSIVE
		    : r->m.background ? WAKE_CLS_BACKGROUND
				      : WAKE_CLS_APP;
	switch (stream_wake_enter(&r->sw, r->w, r->m.env_id, r->handle,
				  REQ_MSG_WAKE, false)) {
	case WAKE_GO:
		worker_handle_free(r->w, r->handle);
		r->handle = 0;
		req_forward(r);
		return;
	case WAKE_WAIT:
		r->state = REQ_WAKING;
		req_timer(r, stream_wake_wait_ms(r->w));
		return;
	case WAKE_THROTTLED:
		req_end(r, OUTCOME_WAKE_THROTTLED, retry);
		return;
	case WAKE_BACKOFF:
		req_end_retry(r, OUTCOME_WAKE_FAILED, r->sw.wait.retry_s);
		return;
	case WAKE_ASLEEP:
		worker_handle_free(r->w, r->handle);
		r->handle = 0;
		req_end(r, OUTCOME_ENVIRONMENT_SLEEPING, NULL);
		return;
	}
}

void req_upstream_unavailable(struct req *r)
{
	unsigned retry_s;

	switch (stream_wake_refused(&r->sw, r->w, &retry_s)) {
	case WAKE_RESTARTING:
		req_end_retry(r, OUTCOME_ENVIRONMENT_RESTARTING, retry_s);
		return;
	case WAKE_REFUSED_FAILED:
		req_end_retry(r, OUTCOME_WAKE_FAILED, retry_s);
		return;
	case WAKE_DOWN:
		break;
	}
	req_end(r, OUTCOME_UPSTREAM_UNAVAILABLE, NULL);
}

int req_wake_notify(const struct wake_waiter *wt, uint64_t result)
{
	return worker_post_arg(wt->owner, wt->msg, wt->handle, result);
}

/*
 * r waited for a wake: the route may have changed meanwhile (an
 * orchestrator gives the woken environment new endpoints, through the
 * database). Re-resolve it: when the current table still sends r's host
 * and path to the same environment, r goes to that route's endpoints
 * (the table held in rt_woken); what admission counted r against stays
 * as matched.
 */
static void req_reresolve(struct req *r)
{
	struct route_table *t = route_table_current(&r->w->sh->routes);
	struct h1_request *h = &r->h;
	struct route_match m;
	size_t path_len;

	if (!t || t == r->rt) {
		route_table_put(t);
		return;
	}
	path_len = h->query ? (size_t)(h->query + h->query_len - h->path)
			    : h->path_len;
	if (route_lookup(t, h->host, h->host_len, h->path, path_len, &m) !=
		ROUTE_OK ||
	    !m.env_id || strcmp(m.env_id, r->m.env_id) != 0 ||
	    m.n_upstreams == 0) {
		route_table_put(t);
		return;
	}
	route_table_put(r->rt_woken);
	r->rt_woken = t;
	r->m.upstreams = m.upstreams;
	r->m.n_upstreams = m.n_upstreams;
	r->m.balance = m.balance;
	r->m.deployment_id = m.deployment_id;
}

/* REQ_MSG_WAKE for r: its environment's wake ended with res. */
static void req_woken(struct req *r, uint64_t res)
{
	worker_handle_free(r->w, r->handle);
	r->handle = 0;
	req_timer_stop(r);
	switch (stream_wake_result(&r->sw, res)) {
	case WAKE_R_READY:
		req_reresolve(r);
		req_forward(r);
		return;
	case WAKE_R_FAILED:
		req_end_retry(r, OUTCOME_WAKE_FAILED,
			      wake_retry_after(r->w->sh->wake, r->sw.env));
		return;
	default:
		req_end_retry(r, OUTCOME_WAKE_PENDING,
			      wake_retry_after(r->w->sh->wake, r->sw.env));
		return;
	}
}

/*
 * Take an in-flight slot for r, or a place in the queue: a request that
 * finds others waiting queues behind them (and kicks, in case a slot is
 * free), one that finds the caps full waits when the queue has room.
 * Returns 1 when r may go on now, 0 when it waits (REQ_QUEUED, its timer
 * armed for timeouts.queue), -EBUSY when it must be refused.
 */
static int req_admit_inflight(struct req *r)
{
	struct worker_shared *sh = r->w->sh;
	struct admit_queue *q = &sh->queue;

	if (!admit_queue_busy(q) &&
	    admit_inflight_enter(&sh->inflight, r->m.inflight) == 0)
		return 1;
	if (worker_handle_new(r->w, r, &r->handle) == 0) {
		r->waiter.owner = r->w;
		r->waiter.handle = r->handle;
		r->waiter.route = r->m.inflight;
		if (admit_queue_add(q, &r->waiter) == 0) {
			r->state = REQ_QUEUED;
			req_timer(r, r->w->set.timeouts.queue_ms);
			admit_queue_kick(q);
			return 0;
		}
		worker_handle_free(r->w, r->handle);
		r->handle = 0;
	}
	/* no queue (or full): a free slot is still taken */
	if (admit_inflight_enter(&sh->inflight, r->m.inflight) == 0)
		return 1;
	return -EBUSY;
}

size_t req_host_only(const char *h, size_t n)
{
	const char *e;

	if (n && h[0] == '[') {
		e = memchr(h, ']', n);
		return e ? (size_t)(e - h) + 1 : n;
	}
	e = memchr(h, ':', n);
	return e ? (size_t)(e - h) : n;
}

/* A route that wants HTTPS, over plain HTTP: 308 to the https:// URL of
 * the same host (the first tls.listen port when it is not 443), path
 * and query. */
static void req_redirect_https(struct req *r, const char *path, size_t path_len)
{
	const struct config *cfg = r->w->sh->cfg;
	struct h1_request *h = &r->h;
	size_t hn = req_host_only(h->host, h->host_len), len;
	char port[16] = "";
	char *extra;
	bool slash;

	if (cfg->tls.n_listen) {
		const struct config_addr *a = &cfg->tls.listen[0];
		unsigned p =
		    a->ss.ss_family == AF_INET6
			? ntohs(
			      ((const struct sockaddr_in6 *)&a->ss)->sin6_port)
			: ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);

		if (p != REQ_HTTPS_PORT)
			snprintf(port, sizeof(port), ":%u", p);
	}
	/* no path (OPTIONS *, an absolute form without one): the root,
	 * before a query if there is one */
	if (!path || (path_len == 1 && path[0] == '*'))
		path_len = 0;
	slash = path_len == 0 || path[0] != '/';
	len = sizeof("Location: https:///\r\n") + hn + strlen(port) + path_len;
	extra = malloc(len);
	if (!extra) {
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	}
	snprintf(extra, len, "Location: https://%.*s%s%s%.*s\r\n", (int)hn,
		 h->host, port, slash ? "/" : "", (int)path_len,
		 path_len ? path : "");
	req_end(r, OUTCOME_HTTPS_REDIRECT, extra);
	free(extra);
}

/* The environment's redirect rule for the request's path, if one
 * matches: answered (outcome redirect, the rule's status and Location).
 * Returns whether it did. */
static bool req_redirect(struct req *r)
{
	const struct h1_request *h = &r->h;
	const struct hredirect *d;
	struct hdr_buf b;

	const char *path = h->path;
	size_t len = h->path_len;

	if (h->form == H1_FORM_ASTERISK)
		return false;
	if (!path || len == 0) { /* "http://a.test": the root, as sent up */
		path = "/";
		len = 1;
	}
	if (path[0] != '/')
		return false;
	d = hredirects_find(r->m.redirects, path, len);
	if (!d)
		return false;
	hdr_buf_init(&b, 0);
	if (hredirect_location(d, path, len, h->query, h->query_len, &b) ||
	    hdr_buf_add(&b, "", 1)) {
		hdr_buf_free(&b);
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
		return true;
	}
	r->own_status = (int)d->status;
	req_end(r, OUTCOME_REDIRECT, b.p);
	hdr_buf_free(&b);
	return true;
}

/* ---- the challenge (challenge.h) ------------------------------------------
 */

/* Whether r comes from a browser that can solve a page: a GET or HEAD
 * (or the exchange's POST: verify) that accepts text/html. */
static bool req_chal_browser(const struct req *r, bool verify)
{
	const struct h1_request *h = &r->h;
	size_t i;

	if (h->method != H1_M_GET && h->method != H1_M_HEAD &&
	    !(verify && h->method == H1_M_POST))
		return false;
	for (i = 0; i < h->h.nheaders; i++) {
		const struct h1_header *f = &h->h.headers[i];

		if (h1_eq(f->name, f->name_len, "accept") &&
		    memmem(f->value, f->value_len, "text/html", 9))
			return true;
	}
	return false;
}

/* Challenge r: a browser gets the page (a token to solve, then back to
 * ret), any other client 403 challenge_required. */
static void req_chal_issue(struct req *r, const struct chal_keys *keys,
			   const struct cidr *pfx, const char *ret,
			   uint64_t now, bool verify)
{
	static const char extra[] =
	    "X-Robots-Tag: noindex\r\nContent-Security-Policy: ";
	const struct config_challenge *cc = r->m.challenge;
	unsigned diff =
	    cc->difficulty ? cc->difficulty : CHAL_DIFFICULTY_DEFAULT;
	char token[CHAL_TOKEN_MAX], hdr[512];

	static atomic_bool said;

	if (r->w->set.chal_random && !atomic_exchange(&said, true))
		log_note("challenge: no challenge.key_file or database "
			 "challenge_keys: passes are signed with a key made at "
			 "start, so they end when edged does, and no other "
			 "host accepts them");
	chal_count(CHAL_R_ISSUED);
	if (!r->chal)
		r->chal = chal_result_name(CHAL_R_ISSUED);
	if (!req_chal_browser(r, verify)) {
		req_end(r, OUTCOME_CHALLENGE_REQUIRED, NULL);
		return;
	}
	if (!chal_token_make(keys, r->m.env_id, pfx, diff, now, token)) {
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	}
	r->own_body = chal_page(token, diff, ret, &r->own_body_len);
	if (!r->own_body) {
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	}
	r->own_ctype = "text/html; charset=utf-8";
	snprintf(hdr, sizeof(hdr), "%s%s\r\n", extra, chal_page_csp);
	req_end(r, OUTCOME_CHALLENGE_REQUIRED, hdr);
}

/* The request's own target as a return path: its path and query when
 * they are a local path chal_return_path would accept, else "/". */
static void req_chal_here(const struct req *r, char *out, size_t len)
{
	const struct h1_request *h = &r->h;
	size_t n = h->query ? (size_t)(h->query + h->query_len - h->path)
			    : h->path_len;

	if (!h->path || n == 0 || n >= len || h->path[0] != '/' ||
	    (n > 1 && (h->path[1] == '/' || h->path[1] == '\\'))) {
		snprintf(out, len, "/");
		return;
	}
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)h->path[i] <= 0x20 ||
		    (unsigned char)h->path[i] >= 0x7f) {
			snprintf(out, len, "/");
			return;
		}
	memcpy(out, h->path, n);
	out[n] = '\0';
}

/* POST CHAL_PATH?t=TOKEN&n=N&r=RETURN: a solved token becomes a pass
 * (303 to RETURN with the cookie); anything else is challenged again. */
static void req_chal_verify(struct req *r, const struct chal_keys *keys,
			    const struct cidr *pfx, uint64_t now)
{
	const struct h1_request *h = &r->h;
	const struct config_challenge *cc = r->m.challenge;
	uint32_t ttl = cc->ttl_s ? cc->ttl_s : CHAL_TTL_DEFAULT_S;
	const char *t = NULL, *n = NULL, *rv = NULL;
	size_t tl = 0, nl = 0, rl = 0;
	char ret[1024], pass[CHAL_PASS_MAX], *hdr;
	enum chal_check c;
	uint64_t tag = 0, until = 0;
	struct chal_table *used = chal_mem(CHAL_USED);

	if (h->method != H1_M_POST) {
		r->own_status = 0;
		req_end(r, OUTCOME_METHOD_NOT_ALLOWED, "Allow: POST\r\n");
		return;
	}
	if (!h->query ||
	    !chal_query_param(h->query, h->query_len, "r", &rv, &rl) ||
	    chal_return_path(rv, rl, ret, sizeof(ret)))
		snprintf(ret, sizeof(ret), "/");
	if (!h->query ||
	    !chal_query_param(h->query, h->query_len, "t", &t, &tl) ||
	    !chal_query_param(h->query, h->query_len, "n", &n, &nl))
		c = CHAL_MALFORMED;
	else
		c = chal_solution_check(keys, r->m.env_id, pfx, t, tl, n, nl,
					now, &tag, &until);
	if (c == CHAL_GOOD && (!used || !chal_table_add(used, tag, until, now)))
		c = CHAL_REPLAYED;
	if (c != CHAL_GOOD) {
		chal_count(CHAL_R_FAILED);
		chal_fail_count(c);
		r->chal = chal_result_name(CHAL_R_FAILED);
		req_chal_issue(r, keys, pfx, ret, now, true);
		return;
	}
	if (!chal_pass_make(keys, r->m.env_id, pfx, now + ttl, pass)) {
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	}
	chal_count(CHAL_R_SOLVED);
	r->chal = chal_result_name(CHAL_R_SOLVED);
	if (cc->mode == CHAL_NEW_IP && chal_mem(CHAL_SEEN))
		chal_table_add(chal_mem(CHAL_SEEN),
			       chal_table_key('i', r->m.env_id, pfx), now + ttl,
			       now);
	/* over HTTPS a __Host- cookie: Secure, this host's only */
	if (asprintf(&hdr,
		     "Set-Cookie: %s=%s; Path=/; Max-Age=%u; "
		     "HttpOnly; SameSite=Lax%s\r\nLocation: %s\r\n"
		     "Cache-Control: no-store\r\n",
		     r->tls ? CHAL_COOKIE_TLS : CHAL_COOKIE, pass,
		     (unsigned)ttl, r->tls ? "; Secure" : "", ret) < 0) {
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	}
	req_end(r, OUTCOME_CHALLENGE_PASSED, hdr);
	free(hdr);
}

/* The challenge mode of r's environment: its own, or always while
 * edgectl put it in attack mode. */
static enum chal_mode req_chal_mode(const struct req *r)
{
	const struct config_challenge *cc = r->m.challenge;

	if (!r->m.env_id)
		return CHAL_OFF;
	if (chal_forced(r->m.env_id))
		return CHAL_ALWAYS;
	return cc ? cc->mode : CHAL_OFF;
}

/* Whether r is for the exchange (CHAL_PATH) of a challenged
 * environment: edge's own, before redirects and unmatched paths. */
static bool req_chal_exchange(const struct req *r)
{
	const struct h1_request *h = &r->h;

	return h->path && h->path_len == sizeof(CHAL_PATH) - 1 &&
	       memcmp(h->path, CHAL_PATH, sizeof(CHAL_PATH) - 1) == 0 &&
	       req_chal_mode(r) != CHAL_OFF;
}

/* Never challenged: an ACME HTTP-01 validation (a CA's servers cannot
 * solve a page): a GET or HEAD of /.well-known/acme-challenge/TOKEN, the
 * token base64url (RFC 8555, 8.3), no query; nothing else under it
 * ("../" would lead elsewhere upstream). */
static bool req_chal_exempt(const struct req *r)
{
	static const char acme[] = ACME_CHAL_HTTP_PREFIX;
	const struct h1_request *h = &r->h;
	size_t i, n = sizeof(acme) - 1;

	if ((h->method != H1_M_GET && h->method != H1_M_HEAD) || !h->path ||
	    h->query || h->path_len <= n || memcmp(h->path, acme, n) != 0)
		return false;
	for (i = n; i < h->path_len; i++) {
		char c = h->path[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (c >= '0' && c <= '9') || c == '-' || c == '_'))
			return false;
	}
	return true;
}

/* The environment's challenge, after the IP rules and the rate limit
 * (limited: r went over it): whether it answered r (a page, a 403, the
 * exchange of a solution). A pass held lets r go on (to a 429 if
 * limited). */
static bool req_challenge(struct req *r, bool limited)
{
	enum chal_mode mode = req_chal_mode(r);
	const struct chal_keys *keys = &r->w->set.chal_keys;
	struct chal_table *seen = chal_mem(CHAL_SEEN);
	struct chal_table *flags = chal_mem(CHAL_FLAGS);
	struct cidr any = {.family = AF_INET}, pfx;
	const struct h1_request *h = &r->h;
	uint64_t now = (uint64_t)time(NULL), exp = 0, k;
	enum chal_check pass;
	char ret[1024];
	bool need;

	/* over the limit, but for on_rate_limit: the small 429, not a page
	 * (a pass does not lift the limit either) */
	if (mode == CHAL_OFF || req_chal_exempt(r) ||
	    (limited && mode != CHAL_ON_RATE_LIMIT))
		return false;
	chal_prefix(r->peer_cidr ? r->peer_cidr : &any, &pfx);
	if (req_chal_exchange(r)) {
		req_chal_verify(r, keys, &pfx, now);
		return true;
	}
	pass = chal_pass_find(keys, r->m.env_id, &pfx, &h->h, now, &exp);
	if (pass == CHAL_GOOD && limited)
		return false; /* the 429: not admitted */
	if (pass == CHAL_GOOD) {
		chal_count(CHAL_R_PASSED);
		r->chal = chal_result_name(CHAL_R_PASSED);
		if (mode == CHAL_NEW_IP && seen)
			chal_table_add(seen,
				       chal_table_key('i', r->m.env_id, &pfx),
				       exp, now);
		return false;
	}
	switch (mode) {
	case CHAL_NEW_IP:
		k = chal_table_key('i', r->m.env_id, &pfx);
		need = !seen || !chal_table_has(seen, k, now);
		break;
	case CHAL_ON_RATE_LIMIT:
		k = chal_table_key('f', r->m.env_id, &pfx);
		if (limited && flags)
			chal_table_add(flags, k, now + CHAL_FLAG_S, now);
		need = limited || (flags && chal_table_has(flags, k, now));
		break;
	default:
		need = true;
	}
	if (!need) {
		if (mode == CHAL_NEW_IP) {
			chal_count(CHAL_R_PASSED);
			r->chal = chal_result_name(CHAL_R_PASSED);
		}
		return false;
	}
	if (pass != CHAL_ABSENT) {
		chal_count(CHAL_R_FAILED);
		chal_fail_count(pass);
		r->chal = chal_result_name(CHAL_R_FAILED);
	}
	req_chal_here(r, ret, sizeof(ret));
	req_chal_issue(r, keys, &pfx, ret, now, false);
	return true;
}

/* ---- the credential gate (auth.h) --------------------------------------- */

/* A client's own X-Jwt-Claim-* and X-Api-Key-Name never reach the
 * upstream of a gated route: only the gate's. */
static const struct req *req_of_auth_edit(const struct hdr_edit *e)
{
	return (const struct req *)((const char *)e -
				    offsetof(struct req, auth_edit));
}

/* ... nor the fields its forward auth copies from the service */
static bool req_auth_drop(const struct hdr_edit *e, const char *name, size_t n)
{
	const struct fauth_conf *c = auth_gate_fwd(req_of_auth_edit(e)->m.auth);

	return auth_field_reserved(name, n) ||
	       (c && fauth_field_copied(c, name, n));
}

static void req_auth_add(const struct hdr_edit *e, struct hdr_buf *b)
{
	const struct req *r = req_of_auth_edit(e);

	if (r->auth_fields)
		hdr_buf_add(b, r->auth_fields, r->auth_fields_len);
	if (r->fwd_fields)
		hdr_buf_add(b, r->fwd_fields, r->fwd_fields_len);
}

/* The API key or JWT r's route asks for, before the rate limit and
 * admission: whether it answered r (401 unauthorized, with a
 * WWW-Authenticate). Admitted, the edit that passes what the check
 * learnt upstream goes first in the request's chain. */
static bool req_auth(struct req *r)
{
	struct auth_out out;
	enum auth_result res;
	char extra[96];

	if (auth_gate_checks(r->m.auth)) {
		res =
		    auth_check(r->m.auth, &r->h.h, (uint64_t)time(NULL), &out);
		r->auth_m = out.method;
		auth_count(out.method, res);
		if (res != AUTH_R_OK) {
			free(out.fields);
			snprintf(extra, sizeof(extra),
				 "WWW-Authenticate: %s\r\n",
				 auth_challenge_header(res));
			req_end(r, OUTCOME_UNAUTHORIZED, extra);
			return true;
		}
		r->auth_fields = out.fields;
		r->auth_fields_len = out.fields_len;
	}
	r->auth_edit.drop = req_auth_drop;
	r->auth_edit.add = req_auth_add;
	r->auth_edit.next = r->req_ed;
	r->req_ed = &r->auth_edit;
	return false;
}

/* ---- forward auth (fauth.h) --------------------------------------------- */

static void req_admitted(struct req *r);

static void req_fauth_unavailable(struct req *r, const char *why)
{
	auth_count(AUTH_M_FORWARD, AUTH_R_UNAVAILABLE);
	log_warnx_ctx_rl(REQ_LOG_CTX(r),
			 "auth_request %s: %s: 503 auth_unavailable",
			 auth_gate_fwd(r->m.auth)->url, why);
	req_end(r, OUTCOME_AUTH_UNAVAILABLE, NULL);
}

/* The service answered r (its call is gone). */
static void req_fauth_done(void *arg, struct fauth_result *res)
{
	struct req *r = arg;

	r->fauth = NULL;
	req_timer_stop(r);
	if (!r->auth_m)
		r->auth_m = AUTH_M_FORWARD;
	switch (res->v) {
	case FAUTH_ALLOW:
		auth_count(AUTH_M_FORWARD, AUTH_R_OK);
		r->fwd_fields = res->fields;
		r->fwd_fields_len = res->fields_len;
		r->state = REQ_HEAD;
		req_go(r);
		return;
	case FAUTH_DENY:
	case FAUTH_REDIRECT:
		r->auth_m = AUTH_M_FORWARD;
		auth_count(AUTH_M_FORWARD, res->v == FAUTH_DENY
					       ? AUTH_R_DENIED
					       : AUTH_R_REDIRECTED);
		/* the service's body as it is, even an empty one */
		r->own_body = res->body ? res->body : calloc(1, 1);
		r->own_body_len = res->body_len;
		_Static_assert(sizeof(r->fwd_ctype) == FAUTH_CTYPE_MAX + 1,
			       "fwd_ctype");
		memcpy(r->fwd_ctype, res->ctype, sizeof(r->fwd_ctype));
		r->own_ctype = r->fwd_ctype[0] ? r->fwd_ctype
			       : res->body_len ? "application/octet-stream"
					       : "text/plain";
		r->own_status = res->status;
		req_end(r,
			res->v == FAUTH_DENY ? OUTCOME_AUTH_DENIED
					     : OUTCOME_AUTH_REDIRECT,
			res->fields);
		free(res->fields);
		return;
	case FAUTH_UNAVAILABLE:
		r->auth_m = AUTH_M_FORWARD;
		req_fauth_unavailable(r, res->why);
		return;
	}
}

/* r's gate asks its authorization service, r holding its in-flight slot
 * (the caps bound the subrequests too): whether r waits for it (or was
 * answered). A cached admission goes on at once. */
static bool req_fauth(struct req *r)
{
	const struct fauth_conf *c = auth_gate_fwd(r->m.auth);
	struct fauth_result res;
	struct fauth_req q = {.h = &r->h,
			      .client_ip = r->client_ip,
			      .request_id = r->id,
			      .via = r->w->sh->via[0] ? r->w->sh->via : NULL,
			      .tls = r->tls,
			      .traceparent = r->trace.traceparent,
			      .tracestate = r->trace.continued};

	if (fauth_cached(c, &r->h, &res)) {
		auth_count(AUTH_M_FORWARD, AUTH_R_OK);
		if (!r->auth_m)
			r->auth_m = AUTH_M_FORWARD;
		r->fwd_fields = res.fields;
		r->fwd_fields_len = res.fields_len;
		return false;
	}
	r->fauth = fauth_start(r->w->base, c, &q, req_fauth_done, r);
	if (!r->fauth) {
		r->auth_m = AUTH_M_FORWARD;
		req_fauth_unavailable(r, "no socket or memory for it");
		return true;
	}
	r->state = REQ_AUTHING;
	req_timer(r, c->timeout_ms);
	return true;
}

/* r holds its in-flight slot: its forward auth, then the wake and the
 * proxy. */
static void req_next(struct req *r)
{
	if (auth_gate_fwd(r->m.auth) && req_fauth(r))
		return;
	req_go(r);
}

/*
 * An ACME http-01 challenge this edged (or another host of its database)
 * answers now (acme_chal.h): a GET or HEAD of /.well-known/acme-challenge/
 * TOKEN (on a plain listener, or a TLS one a validator was redirected
 * to), for the token's name, answered 200 with the
 * key authorization, before routing (the name need not be routed yet, and
 * no gate, redirect or rule of its environment applies). A token not
 * known goes on as any request (the site may answer its own). Returns
 * whether it answered.
 */
static bool req_acme_http01(struct req *r)
{
	static const char pfx[] = ACME_CHAL_HTTP_PREFIX;
	const struct h1_request *h = &r->h;
	char ka[ACME_CHAL_KEYAUTH_MAX + 1];
	ssize_t n;

	if (!h->host || !req_chal_exempt(r))
		return false;
	n = acme_chal_http(h->host, h->host_len, h->path + sizeof(pfx) - 1,
			   h->path_len - (sizeof(pfx) - 1), ka, sizeof(ka));
	if (n < 0)
		return false;
	r->own_body = malloc((size_t)n + 1);
	if (!r->own_body) {
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
		return true;
	}
	memcpy(r->own_body, ka, (size_t)n + 1);
	r->own_body_len = (size_t)n;
	r->own_ctype = "text/plain";
	req_end(r, OUTCOME_ACME_CHALLENGE, "Cache-Control: no-store\r\n");
	return true;
}

void req_head(struct req *r)
{
	struct worker *w = r->w;
	struct worker_shared *sh = w->sh;
	struct h1_request *h = &r->h;
	enum route_status rs;
	const char *id, *path;
	size_t idn = 0, path_len;
	unsigned retry = 0;
	enum outcome o;
	char extra[64];

	id = hdr_request_id_get(&h->h, &idn);
	if (id && idn < sizeof(r->id)) {
		memcpy(r->id, id, idn);
		r->id[idn] = '\0';
	} else if (hdr_request_id_new(r->id)) {
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	}
	if (hdr_trace_init(&h->h, &r->trace)) {
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	}
	if (!h->h.keep_alive || w->draining)
		req_close_after(r, false);
	req_xff_client(r);

	/* an upstream that leads back here would take a connection per
	 * round until none is left: refuse at the second visit */
	if (sh->via[0] && hdr_via_has(&h->h, sh->via)) {
		req_end(r, OUTCOME_LOOP_DETECTED, NULL);
		return;
	}

	if (req_acme_http01(r))
		return;

	/* Resolve */
	r->rt = route_table_current(&sh->routes);
	if (!r->rt || !h->host) {
		req_end(r, OUTCOME_DOMAIN_NOT_FOUND, NULL);
		return;
	}
	path = h->path;
	path_len = h->query ? (size_t)(h->query + h->query_len - h->path)
			    : h->path_len;
	rs = route_lookup(r->rt, h->host, h->host_len, path, path_len, &r->m);
	if (rs == ROUTE_DOMAIN_NOT_FOUND) {
		req_end(r, OUTCOME_DOMAIN_NOT_FOUND, NULL);
		return;
	}
	r->routed = true;
	if (rs == ROUTE_PROJECT_DISABLED) {
		req_end(r, OUTCOME_PROJECT_DISABLED, NULL);
		return;
	}
	/* a host whose paths lead to more than one gate: another spelling
	 * of a gated path must not reach the upstream by another route */
	if (r->m.strict_path && !route_path_normal(path, path_len)) {
		req_end(r, OUTCOME_BAD_REQUEST, NULL);
		return;
	}
	if (r->m.security && r->m.security->https_redirect && !r->tls) {
		req_redirect_https(r, path, path_len);
		return;
	}
	if (r->m.redirects && !req_chal_exchange(r) && req_redirect(r))
		return;
	if (r->m.unmatched_not_found && !r->m.prefix && !req_chal_exchange(r)) {
		req_end(r, OUTCOME_ROUTE_NOT_FOUND, NULL);
		return;
	}
	/* brownout: refused before the gate, the body, the wake and the
	 * upstream cost anything, so that the requests admitted finish */
	if (stream_shed(w, &r->m)) {
		log_warnx_ctx_rl(REQ_LOG_CTX(r),
				 "the worker's loop lags over "
				 "limits.brownout_lag and the route sheds: "
				 "503 overloaded");
		req_end(r, OUTCOME_OVERLOADED, "Retry-After: 1\r\n");
		return;
	}
	r->hv.request_id = r->id;
	r->hv.client_ip = r->client_ip;
	r->hv.host = h->host;
	r->hv.host_len = h->host_len;
	r->hv.project_id = r->m.project_id;
	r->hv.environment_id = r->m.env_id;
	r->hv.trace_id = r->trace.trace_id;
	r->req_ed = hrule_edit_init(&r->req_edit, r->m.env_headers,
				    r->m.route_headers, &r->hv, false);
	r->resp_ed = hrule_edit_init(&r->resp_edit, r->m.env_headers,
				     r->m.route_headers, &r->hv, true);
	if (r->m.auth && req_auth(r))
		return;

	/* Admit */
	switch (o = stream_admit(w, &r->m, r->peer_cidr, &retry)) {
	case OUTCOME_OK:
	case OUTCOME_RATE_LIMITED:
		if (req_challenge(r, o == OUTCOME_RATE_LIMITED))
			return;
		if (o == OUTCOME_OK)
			break;
		snprintf(extra, sizeof(extra), "Retry-After: %u\r\n", retry);
		req_end(r, OUTCOME_RATE_LIMITED, extra);
		return;
	default:
		req_end(r, OUTCOME_IP_DENIED, NULL);
		return;
	}
	if (h->h.content_length >= 0 &&
	    !admit_body_declared_ok((uint64_t)h->h.content_length,
				    r->m.max_body_bytes)) {
		req_end(r, OUTCOME_BODY_TOO_LARGE, NULL);
		return;
	}
	admit_body_init(&r->limit, r->m.max_body_bytes);
	r->cl->admitted(r);
	req_admitted(r);
}

/* r passed Admit but for its in-flight slot. */
static void req_admitted(struct req *r)
{
	int rc = req_admit_inflight(r);

	if (rc < 0) {
		log_warnx_ctx_rl(REQ_LOG_CTX(r),
				 "limits.max_inflight or the route's "
				 "max_inflight_per_route full, the admission "
				 "queue too: 503 overloaded");
		req_end(r, OUTCOME_OVERLOADED, NULL);
		return;
	}
	if (rc == 0)
		return; /* queued: req_message goes on */
	r->inflight = true;
	req_next(r);
}

/* ---- the waiting state -------------------------------------------------- */

int req_queue_notify(void *owner, uint64_t handle)
{
	/* a full mailbox: the waiter keeps its turn and its timeout, and is
	 * told at a later kick */
	return worker_post(owner, REQ_MSG_ADMIT, handle);
}

void req_message(struct worker *w, uint32_t type, uint64_t handle, uint64_t arg)
{
	struct worker_shared *sh = w->sh;
	struct req *r = worker_handle_get(w, handle);

	if (type == REQ_MSG_WAKE) {
		/* a request that ended meanwhile left the waiters then */
		if (r && r->active && r->state == REQ_WAKING)
			req_woken(r, arg);
		return;
	}
	if (!EDGE_ASSERT_MSG(type == REQ_MSG_ADMIT, "message type %u", type))
		return;
	if (!r || !r->active || r->state != REQ_QUEUED) {
		/* ended meanwhile: the next waiter may have the slot */
		admit_queue_kick(&sh->queue);
		return;
	}
	if (admit_inflight_enter(&sh->inflight, r->m.inflight)) {
		admit_queue_retry(&sh->queue, &r->waiter); /* taken first */
		admit_queue_kick(&sh->queue);
		return;
	}
	r->inflight = true;
	admit_queue_remove(&sh->queue, &r->waiter);
	worker_handle_free(w, r->handle);
	r->handle = 0;
	req_timer_stop(r);
	req_next(r);
}

static bool req_mail(struct worker *w, const struct mailbox_msg *m)
{
	if (m->type != REQ_MSG_ADMIT && m->type != REQ_MSG_WAKE)
		return false;
	req_message(w, m->type, m->target, m->arg);
	return true;
}

const struct worker_service req_service = {
    .name = "req",
    .mail = req_mail,
};

/* ---- the client connection's events ------------------------------------- */

void req_client_readable(struct req *r)
{
	if (r->state == REQ_PROXY)
		req_up(r)->readable(r);
	/* queued: a body waits in the input (bounded by the watermark) */
}

void req_client_drained(struct req *r)
{
	if (r->state == REQ_PROXY)
		req_up(r)->drained(r);
	else if (r->state == REQ_SENDING && !r->cl->pending(r))
		req_end(r, OUTCOME_OK, NULL);
}

void req_client_gone(struct req *r, bool eof)
{
	if (r->state == REQ_PROXY) {
		req_up(r)->gone(r, eof);
		return;
	}
	/* queued: a client that closes (or half-closes: the two look the
	 * same until edge writes) is taken to have given up, as HAProxy's
	 * option abortonclose does; its request never reaches an upstream.
	 * Sending: it left before it took the whole response */
	(void)eof;
	req_end(r, OUTCOME_CLIENT_CLOSED, NULL);
}

void req_timeout(struct req *r)
{
	static const char retry[] = "Retry-After: 1\r\n";

	if (r->state == REQ_QUEUED) {
		log_warnx_ctx_rl(
		    REQ_LOG_CTX(r),
		    "waited timeouts.queue (%llu ms) in the "
		    "admission queue: 503 overloaded",
		    (unsigned long long)r->w->set.timeouts.queue_ms);
		req_end(r, OUTCOME_OVERLOADED, retry);
		return;
	}
	if (r->state == REQ_AUTHING) {
		fauth_cancel(r->fauth);
		r->fauth = NULL;
		r->auth_m = AUTH_M_FORWARD;
		req_fauth_unavailable(r, "no answer within its timeout");
		return;
	}
	if (r->state == REQ_WAKING) {
		/* the wake's own deadline answers first; this is its notify
		 * lost to a full mailbox */
		req_end(r, OUTCOME_WAKE_PENDING, retry);
		return;
	}
	if (r->state == REQ_PROXY)
		req_up(r)->timeout(r);
}

void req_body_timeout(struct req *r)
{
	if (r->state == REQ_PROXY)
		req_up(r)->btimeout(r);
}
