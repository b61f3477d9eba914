// SPDX-License-Identifier: BSD-2-Clause
/*
 * http1.c - the HTTP/1.1 adapter (http1.h): a client connection's hooks
 * (conn.h), each handed to the request it carries, and the request's
 * client side (req.h's struct req_client_ops) on the connection's socket:
 * heads parsed with h1.c, responses and edge's own answers written as
 * HTTP/1.1.
 */
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "hdr.h"
#include "http1.h"
#include "http2.h"
#include "req.h"
#include "sockio.h"
#include "worker.h"

/* ---- the request's client side ------------------------------------------ */

static struct conn *h1c(const struct req *r)
{
	return r->cl_arg;
}

static struct evbuffer *http1_in(const struct req *r)
{
	return sockio_input(h1c(r)->io);
}

static struct evbuffer *http1_out(const struct req *r)
{
	return sockio_output(h1c(r)->io);
}

/* Write n bytes of response to the client, counted in bytes_out. */
static void http1_write(struct req *r, const void *p, size_t n)
{
	struct conn *c = h1c(r);

	if (c->closed || !c->io)
		return;
	evbuffer_add(sockio_output(c->io), p, n);
	r->bytes_out += n;
}

static void http1_read(struct req *r, bool on)
{
	struct conn *c = h1c(r);

	if (!c->io)
		return;
	if (on)
		sockio_enable(c->io, EV_READ);
	else
		sockio_disable(c->io, EV_READ);
}

static bool http1_reading(const struct req *r)
{
	struct conn *c = h1c(r);

	return c->io && (sockio_enabled(c->io) & EV_READ);
}

static void http1_watermarks(struct req *r, size_t read_high, size_t write_low)
{
	struct conn *c = h1c(r);

	if (c->io)
		sockio_set_watermarks(c->io, read_high, write_low);
}

static bool http1_client_closed(const struct req *r)
{
	return h1c(r)->closed;
}

static void http1_close_after(struct req *r, bool half_closed)
{
	struct conn *c = h1c(r);

	c->close_after = true;
	if (half_closed)
		c->client_eof = true;
}

static bool http1_closing(const struct req *r)
{
	return h1c(r)->close_after;
}

static struct sockio *http1_take(struct req *r)
{
	struct conn *c = h1c(r);
	struct sockio *io = c->io;

	c->io = NULL;
	c->close_after = true;
	c->client_eof = true; /* nothing left to linger for */
	return io;
}

static void http1_timer(struct req *r, uint64_t ms)
{
	conn_timer(h1c(r), ms);
}

static void http1_timer_stop(struct req *r)
{
	evtimer_del(h1c(r)->timer);
}

static void http1_btimer(struct req *r, uint64_t ms)
{
	struct timeval tv = {(time_t)(ms / 1000),
			     (suseconds_t)(ms % 1000) * 1000};

	evtimer_add(h1c(r)->btimer, &tv);
}

static void http1_btimer_stop(struct req *r)
{
	struct conn *c = h1c(r);

	if (c->btimer)
		evtimer_del(c->btimer);
}

static void http1_admitted(struct req *r)
{
	h1c(r)->state = CONN_BUSY;
}

static void http1_cont(struct req *r)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

	http1_write(r, cont, sizeof(cont) - 1);
}

/* The upstream's response head, rebuilt: a body of unknown length is
 * chunked for an HTTP/1.1 client, delimited by the close for 1.0. */
static int http1_respond(struct req *r, const struct h1_response *resp,
			 const char *extra, int64_t cl, bool *chunked,
			 bool *close)
{
	struct hdr_buf b;
	int rc;

	*chunked = false;
	/* a length unknown (the upstream's, or a compressed body's) */
	if (resp->body != H1_BODY_NONE && cl < 0) {
		if (r->h.h.minor == 1)
			*chunked = true;
		else
			*close = true;
	}
	hdr_buf_init(&b, 0);
	rc = hdr_build_response(&b, resp, r->id, extra, r->resp_ed, cl,
				*chunked, *close);
	if (rc == 0)
		http1_write(r, b.p, b.len);
	hdr_buf_free(&b);
	return rc ? -1 : 0;
}

static void http1_error(struct req *r, int status, const char *extra,
			const char *body, size_t blen, bool close)
{
	struct hdr_buf b;

	hdr_buf_init(&b, 0);
	if (hdr_build_error(&b, status, r->id, r->own_ctype, extra, blen,
			    close) == 0) {
		http1_write(r, b.p, b.len);
		if (!(r->head && r->h.method == H1_M_HEAD))
			http1_write(r, body, blen);
	}
	hdr_buf_free(&b);
}

static void http1_ended(struct req *r, bool close)
{
	conn_next(h1c(r), close);
}

static const struct req_client_ops http1_client = {
    .in = http1_in,
    .out = http1_out,
    .read = http1_read,
    .reading = http1_reading,
    .watermarks = http1_watermarks,
    .closed = http1_client_closed,
    .close_after = http1_close_after,
    .closing = http1_closing,
    .take = http1_take,
    .timer = http1_timer,
    .timer_stop = http1_timer_stop,
    .btimer = http1_btimer,
    .btimer_stop = http1_btimer_stop,
    .admitted = http1_admitted,
    .cont = http1_cont,
    .respond = http1_respond,
    .error = http1_error,
    .ended = http1_ended,
};

/* ---- the connection's hooks --------------------------------------------- */

/* A new (or unparked) connection: its request slot, with what belongs to
 * the connection. */
static void http1_open(struct conn *c)
{
	struct req *r = conn_proto(c);

	r->cl = &http1_client;
	r->cl_arg = c;
	r->w = c->w;
	r->client_ip = c->client_ip;
	r->peer = &c->peer.sa;
	r->peer_cidr = &c->peer_cidr;
	r->conn_fd = c->io ? sockio_fd(c->io) : -1;
	r->tls = c->tls;
	r->tls_resumed = c->tls_resumed;
	r->tls_version = c->tls_version;
	r->tls_cipher = c->tls_cipher;
}

/* Begin a request on c at its first byte. */
static void http1_begin(struct conn *c, struct req *r)
{
	req_begin(r);
	c->nreq++;
}

/* The head parser for c's input (CONN_HEAD): begins a request at its
 * first byte, parses, and once the head is complete hands it to
 * req_head. Ends the request on a parse error, with its status. */
static void http1_input(struct conn *c)
{
	const struct h1_limits *h1 = &c->w->set.h1;
	struct evbuffer *in = sockio_input(c->io);
	struct req *r = conn_proto(c);
	size_t len = evbuffer_get_length(in), n;
	const char *buf;
	int rc;

	n = len < h1->head_max + 1 ? len : h1->head_max + 1;
	buf = (const char *)evbuffer_pullup(in, (ssize_t)n);
	if (!r->active && c->nreq == 0 && buf &&
	    (c->h2 || (!c->tls && c->w->set.http2.enabled &&
		       c->w->set.http2.cleartext))) {
		/* HTTP/2: ALPN said so, or the connection preface (prior
		 * knowledge) on a plain listener */
		int pre = c->h2 ? 1 : http2_preface(buf, n);

		if (pre == 0 && !c->client_eof)
			return; /* a prefix of it: wait for more */
		if (pre == 1) {
			http2_start(c);
			return;
		}
	}
	if (!r->active)
		http1_begin(c, r);
	if (!buf) {
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	}
	rc = h1_parse_request(buf, n, h1, &r->h);
	if (rc == 0) {
		if (c->client_eof)
			req_end(r, OUTCOME_CLIENT_CLOSED, NULL);
		return;
	}
	evtimer_del(c->timer);
	c->timer_mode = CONN_T_NONE;
	if (rc < 0) {
		r->bytes_in = n;
		c->close_after = true;
		log_debug_ctx(REQ_LOG_CTX(r), "bad request: %s at byte %zu",
			      h1_err_name(r->h.h.err), r->h.h.err_off);
		req_end(r, outcome_of_parse(r->h.h.status), NULL);
		return;
	}
	/* keep a copy of the head: the spans must outlive the input */
	r->head = malloc((size_t)rc);
	if (!r->head) {
		req_end(r, OUTCOME_INTERNAL_ERROR, NULL);
		return;
	}
	memcpy(r->head, buf, (size_t)rc);
	r->head_len = (size_t)rc;
	h1_parse_request(r->head, r->head_len, h1, &r->h);
	evbuffer_drain(in, r->head_len);
	r->bytes_in = r->head_len;
	req_head(r);
}

/* Refused at accept: a request begun and ended at once with o. */
static void http1_refuse(struct conn *c, enum outcome o)
{
	struct req *r = conn_proto(c);

	http1_begin(c, r);
	req_end(r, o, NULL);
}

static bool http1_active(const struct conn *c)
{
	return ((const struct req *)(const void *)c->proto)->active;
}

static void http1_header_timeout(struct conn *c)
{
	req_end(conn_proto(c), OUTCOME_HEADER_TIMEOUT, NULL);
}

static void http1_readable(struct conn *c)
{
	req_client_readable(conn_proto(c));
}

static void http1_drained(struct conn *c)
{
	req_client_drained(conn_proto(c));
}

static void http1_gone(struct conn *c, bool eof)
{
	req_client_gone(conn_proto(c), eof);
}

static void http1_timeout(struct conn *c)
{
	req_timeout(conn_proto(c));
}

static void http1_btimeout(struct conn *c)
{
	req_body_timeout(conn_proto(c));
}

/* The connection closes: a request under way ends as client_closed. */
static void http1_close(struct conn *c)
{
	struct req *r = conn_proto(c);

	if (!r->active)
		return;
	c->close_after = true;
	c->client_eof = true;
	req_end(r, OUTCOME_CLIENT_CLOSED, NULL);
}

/* Draining: idle between requests, closed now; else closed after the
 * request under way (or the first, not come yet). */
static void http1_drain(struct conn *c)
{
	if (c->state == CONN_HEAD && !http1_active(c) && c->nreq)
		conn_close(c);
	else
		c->close_after = true;
}

static void http1_conn_closed(struct conn *c)
{
	req_release(conn_proto(c));
}

static void http1_free(struct conn *c)
{
	struct req *r = conn_proto(c);

	free(r->head);
	r->head = NULL;
}

const struct conn_ops http1_ops = {
    .size = sizeof(struct req),
    .open = http1_open,
    .input = http1_input,
    .active = http1_active,
    .header_timeout = http1_header_timeout,
    .refuse = http1_refuse,
    .readable = http1_readable,
    .drained = http1_drained,
    .gone = http1_gone,
    .timeout = http1_timeout,
    .btimeout = http1_btimeout,
    .drain = http1_drain,
    .close = http1_close,
    .closed = http1_conn_closed,
    .free = http1_free,
};
