// SPDX-License-Identifier: BSD-2-Clause
/*
 * http2.c - the HTTP/2 adapter (http2.h): a session of nghttp2's per
 * connection, fed from the connection's input and written to its output;
 * a stream per request, each a struct req with its client side here.
 *
 * nghttp2's callbacks only record what happened (a head complete, body
 * bytes, a stream closed); the requests hear of it after
 * nghttp2_session_mem_recv or _mem_send has returned (h2_work), so that
 * a request that ends, answers or resets does so outside nghttp2.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "clk.h"
#include "h2fields.h"
#include "h2mem.h"
#include "hdr.h"
#include "http2.h"
#include "hrule.h"
#include "req.h"
#include "sockio.h"
#include "worker.h"

/* The connection window edge opens beyond the streams' (a multiple of
 * initial_window_size), at most 16 MiB. */
#define H2_CONN_WINDOWS 4
#define H2_CONN_WINDOW_MAX (16u * 1024 * 1024)
/* Bytes of the header block per field beyond its name and value (RFC
 * 9113 section 6.5.2's 32). */
#define H2_FIELD_OVERHEAD 32
/* The HPACK dynamic table of edged's responses (bytes, RFC 7541's
 * count): the fields repeated from response to response (server,
 * content-type, ...) fit; what it holds stays with an idle connection. */
#define H2_DEFLATE_TABLE 1024
/* An idle connection's session is released (h2_release) once parked;
 * one whose client's HPACK table holds fields is first asked to empty it
 * (SETTINGS_HEADER_TABLE_SIZE 0) after this long without a stream's
 * progress, and gets the table back with its next request. */
#define H2_SHRINK_MS 1000
#define H2_HD_TABLE 4096 /* RFC 7541's default, the one edge offers */
/* A session made again within this long of its release and given no
 * request (a client that pings or sends other frames often) is kept
 * until the client has sent nothing for this long: at most one new
 * session per connection in this time without a request. */
#define H2_RELEASE_AGAIN_MS 10000
struct h2c;

/* What a released session is made again from (h2_renew): the settings
 * both ways, the connection windows, the highest stream id the client
 * used. */
#define H2_LOCAL_SETTINGS 6
#define H2_REMOTE_SETTINGS 7
struct h2saved {
	uint32_t local[H2_LOCAL_SETTINGS];   /* h2_saved_ids' values */
	uint32_t remote[H2_REMOTE_SETTINGS]; /* the client's */
	int32_t local_window;		     /* the client may send */
	int32_t remote_window;		     /* edge may send */
};

/* What a stream has for its request once nghttp2 has returned. */
#define H2_EV_HEAD 0x01	   /* its head is complete */
#define H2_EV_DATA 0x02	   /* body bytes (or its end) arrived */
#define H2_EV_CLOSED 0x04  /* nghttp2 closed the stream */
#define H2_EV_DRAINED 0x08 /* its response output went below low water */

struct h2s {
	TAILQ_ENTRY(h2s) link;	/* in hc->streams */
	TAILQ_ENTRY(h2s) wlink; /* in hc->work while ev != 0 */
	struct h2c *hc;
	int32_t id;
	unsigned ev;
	bool in_work;
	struct evbuffer *in;	 /* the request body, HTTP/1.1-framed */
	struct evbuffer *out;	 /* the response body */
	struct h2f_req q;	 /* its header block, for its HTTP/1.1 head */
	struct evbuffer *tr_in;	 /* the request's trailers, as lines */
	struct evbuffer *tr_out; /* the response's, to send after its body */
	size_t hdr_bytes;	 /* the header list's size so far */
	uint64_t in_unacked;	 /* body bytes not given back yet */
	uint64_t in_framed;	 /* bytes in in holding them, framing too */
	size_t write_low;
	struct event *timer, *btimer;
	bool chunked;	    /* framed as chunked for the proxy */
	bool in_eos;	    /* the client's END_STREAM */
	bool fields_done;   /* its header block is complete */
	bool head_done;	    /* its head went to the request */
	bool closed;	    /* nghttp2 closed it */
	bool resp_sent;	    /* a response was submitted */
	bool out_eos;	    /* the response body is complete in out */
	bool deferred;	    /* the data source waits for out */
	bool reset;	    /* edge reset it */
	bool reading;	    /* the proxy reads its body */
	bool out_added;	    /* out grew since the last drained */
	bool own;	    /* the response is edge's own answer */
	bool sending;	    /* its request waits for out to be taken */
	bool rst_sent;	    /* a RST_STREAM went out (nghttp2's or edge's) */
	uint32_t rst_code;  /* ... with this code */
	enum outcome why_o; /* the outcome of a reset of edge's */
	struct req r;
};

TAILQ_HEAD(h2s_list, h2s);

struct h2c {
	struct conn *c;	    /* NULL while parked */
	nghttp2_session *s; /* NULL while parked and released */
	struct h2s_list streams;
	struct h2s_list work;
	unsigned nactive;	 /* streams whose request is active */
	struct event *flush;	 /* h2_flush from the loop; NULL while parked */
	struct sockio_soon soon; /* ... or at the end of the turn */
	uint64_t last_progress;	 /* ns: a stream's bytes moved */
	uint64_t last_io;	 /* ns: bytes read, or written */
	int depth;		 /* inside nghttp2 or h2_work */
	bool dead;		 /* the connection is closing */
	bool goaway;		 /* GOAWAY sent */
	bool why_counted;	 /* its end is counted by edge's reason */
	bool finishing;		 /* conn_next(c, true) was called */
	bool park_armed;	 /* c->btimer runs to park the connection */
	bool shrunk;		 /* HEADER_TABLE_SIZE 0 went out */
	bool renewing;		 /* h2_renew feeds the new session */
	bool update_owed;	 /* edge's HEADER_TABLE_SIZE 0 acknowledged, no
				    header block from the client since */
	bool hold; /* made again soon, no request since: H2_RELEASE_AGAIN_MS */
	uint64_t last_read;	   /* ns: the client's last bytes */
	uint64_t released_at;	   /* ns: the session's last release */
	unsigned settings_unacked; /* edge's SETTINGS not acknowledged */
	int32_t max_id;		   /* the highest HEADERS stream id seen */
	struct h2saved saved;	   /* while s is NULL (released) */
	struct h2mem mem;	   /* nghttp2's allocator, its output paged */
};

static void h2_flush(struct h2c *hc);
static void h2_flush_soon(struct h2c *hc);
static void h2_work(struct h2c *hc);
static void h2_finish(struct h2c *hc);
static void h2_fatal(struct h2c *hc, int err);
static void h2_in_cb(struct evbuffer *b, const struct evbuffer_cb_info *info,
		     void *arg);
static void h2_out_cb(struct evbuffer *b, const struct evbuffer_cb_info *info,
		      void *arg);

int http2_preface(const char *p, size_t n)
{
	size_t k = n < HTTP2_PREFACE_LEN ? n : HTTP2_PREFACE_LEN;

	if (memcmp(p, HTTP2_PREFACE, k) != 0)
		return -1;
	return k == HTTP2_PREFACE_LEN ? 1 : 0;
}

/* ---- streams --------------------------------------------------------------
 */

static struct h2c *h2c_of(struct conn *c)
{
	return *(struct h2c **)conn_proto(c);
}

static struct h2s *h2s_of(const struct req *r)
{
	return r->cl_arg;
}

/* Have s's request hear of ev once nghttp2 has returned. */
static void h2_post(struct h2s *s, unsigned ev)
{
	s->ev |= ev;
	if (!s->in_work) {
		s->in_work = true;
		TAILQ_INSERT_TAIL(&s->hc->work, s, wlink);
	}
	if (s->hc->depth == 0)
		h2_flush_soon(s->hc);
}

/* Reset stream s with code, counted; its request hears of the close. */
static void h2_reset(struct h2s *s, uint32_t code, enum outcome o)
{
	if (s->reset || s->closed)
		return;
	s->reset = true;
	s->why_o = o;
	nghttp2_submit_rst_stream(s->hc->s, NGHTTP2_FLAG_NONE, s->id, code);
	h2_flush_soon(s->hc);
}

static void h2_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h2s *s = arg;

	(void)fd;
	(void)what;
	if (s->r.active)
		req_timeout(&s->r);
	h2_flush(s->hc);
}

static void h2_btimer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h2s *s = arg;

	(void)fd;
	(void)what;
	if (s->r.active)
		req_body_timeout(&s->r);
	h2_flush(s->hc);
}

/* The proxy took n bytes from s->in: give the client back the window
 * of the body bytes among them. With chunk framing (edge's, not the
 * client's) the share of body bytes in what was taken is the share in
 * what was held: never more window than body bytes left in, so a client
 * cannot make edge hold more than its window, however small its DATA
 * frames. The proxy counts the n bytes in the request's bytes_in once
 * it has taken them (right after this returns): the framing among them
 * is taken off first, so that bytes_in holds the client's DATA bytes
 * only (unsigned: a moment below zero is made good by the proxy's
 * addition). */
static void h2_in_cb(struct evbuffer *b, const struct evbuffer_cb_info *info,
		     void *arg)
{
	struct h2s *s = arg;
	uint64_t n = info->n_deleted, credit;

	(void)b;
	if (n == 0 || s->in_framed == 0)
		return;
	if (n >= s->in_framed) {
		credit = s->in_unacked;
		s->in_framed = 0;
	} else {
		credit = s->in_unacked * n / s->in_framed;
		s->in_framed -= n;
	}
	s->in_unacked -= credit;
	s->r.bytes_in -= n - credit;
	if (credit == 0 || s->closed || s->hc->dead)
		return;
	nghttp2_session_consume(s->hc->s, s->id, (size_t)credit);
	h2_flush_soon(s->hc);
}

/* The proxy added response bytes to s->out: the data source goes on. */
static void h2_out_cb(struct evbuffer *b, const struct evbuffer_cb_info *info,
		      void *arg)
{
	struct h2s *s = arg;

	(void)b;
	if (info->n_added == 0)
		return;
	s->out_added = true;
	if (s->deferred && !s->closed && !s->hc->dead) {
		s->deferred = false;
		nghttp2_session_resume_data(s->hc->s, s->id);
	}
	h2_flush_soon(s->hc);
}

static void h2s_free(struct h2s *s)
{
	struct h2c *hc = s->hc;

	TAILQ_REMOVE(&hc->streams, s, link);
	if (s->in)
		evbuffer_remove_cb(s->in, h2_in_cb, s);
	if (s->out)
		evbuffer_remove_cb(s->out, h2_out_cb, s);
	if (s->in_work)
		TAILQ_REMOVE(&hc->work, s, wlink);
	if (s->id && !hc->dead)
		nghttp2_session_set_stream_user_data(hc->s, s->id, NULL);
	if (s->timer)
		event_free(s->timer);
	if (s->btimer)
		event_free(s->btimer);
	if (s->in)
		evbuffer_free(s->in);
	if (s->out)
		evbuffer_free(s->out);
	h2f_req_free(&s->q);
	if (s->tr_in)
		evbuffer_free(s->tr_in);
	if (s->tr_out)
		evbuffer_free(s->tr_out);
	free(s->r.head);
	free(s);
}

/* Free the streams whose request has ended and that nghttp2 is done
 * with (from the loop only: nothing up the stack holds them). */
static void h2_sweep(struct h2c *hc)
{
	struct h2s *s, *next;

	for (s = TAILQ_FIRST(&hc->streams); s; s = next) {
		next = TAILQ_NEXT(s, link);
		if (!s->r.active && s->closed && !s->in_work)
			h2s_free(s);
	}
}

static const struct req_client_ops h2_client;

/* A stream the client opened: its request begins (the clock starts). */
static struct h2s *h2s_new(struct h2c *hc, int32_t id)
{
	struct conn *c = hc->c;
	struct event_base *base = c->w->base;
	struct h2s *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->hc = hc;
	s->id = id;
	s->in = evbuffer_new();
	s->out = evbuffer_new();
	s->timer = evtimer_new(base, h2_timer_cb, s);
	s->btimer = evtimer_new(base, h2_btimer_cb, s);
	TAILQ_INSERT_TAIL(&hc->streams, s, link);
	if (h2f_req_init(&s->q) || !s->in || !s->out || !s->timer ||
	    !s->btimer) {
		h2s_free(s);
		return NULL;
	}
	evbuffer_add_cb(s->in, h2_in_cb, s);
	evbuffer_add_cb(s->out, h2_out_cb, s);
	s->reading = true;
	s->r.cl = &h2_client;
	s->r.cl_arg = s;
	s->r.w = c->w;
	s->r.client_ip = c->client_ip;
	s->r.peer = &c->peer.sa;
	s->r.peer_cidr = &c->peer_cidr;
	s->r.conn_fd = c->io ? sockio_fd(c->io) : -1;
	s->r.tls = c->tls;
	s->r.tls_resumed = c->tls_resumed;
	s->r.tls_version = c->tls_version;
	s->r.tls_cipher = c->tls_cipher;
	s->r.http_version = "HTTP/2";
	req_begin(&s->r);
	hc->nactive++;
	c->nreq++;
	http2_count_stream();
	return s;
}

/* ---- the request's client side -------------------------------------------
 */

static struct evbuffer *h2_in(const struct req *r)
{
	return h2s_of(r)->in;
}

static struct evbuffer *h2_out(const struct req *r)
{
	return h2s_of(r)->out;
}

static void h2_read(struct req *r, bool on)
{
	h2s_of(r)->reading = on;
}

static bool h2_reading(const struct req *r)
{
	return h2s_of(r)->reading;
}

static void h2_watermarks(struct req *r, size_t read_high, size_t write_low)
{
	(void)read_high; /* the stream's window bounds its input */
	h2s_of(r)->write_low = write_low;
}

static bool h2_closed(const struct req *r)
{
	struct h2s *s = h2s_of(r);

	return s->closed || s->reset || s->hc->dead;
}

/* A stream's end never ends the connection. */
static void h2_close_after(struct req *r, bool half_closed)
{
	(void)r;
	(void)half_closed;
}

static bool h2_closing(const struct req *r)
{
	(void)r;
	return false;
}

static struct sockio *h2_take(struct req *r)
{
	(void)r;
	return NULL;
}

static void h2_timer(struct req *r, uint64_t ms)
{
	struct h2s *s = h2s_of(r);
	struct timeval tv;

	evtimer_add(s->timer, worker_timeout(r->w, ms, &tv));
}

static void h2_timer_stop(struct req *r)
{
	evtimer_del(h2s_of(r)->timer);
}

static void h2_btimer(struct req *r, uint64_t ms)
{
	struct timeval tv = {(time_t)(ms / 1000),
			     (suseconds_t)(ms % 1000) * 1000};

	evtimer_add(h2s_of(r)->btimer, &tv);
}

static void h2_btimer_stop(struct req *r)
{
	evtimer_del(h2s_of(r)->btimer);
}

static void h2_admitted(struct req *r)
{
	(void)r;
}

/* The response's trailers, from the proxy: kept for the data source. */
static void h2_trailers(struct req *r, struct evbuffer *tr)
{
	struct h2s *s = h2s_of(r);
	size_t n = evbuffer_get_length(tr);

	if (s->own || s->tr_out || !(s->tr_out = evbuffer_new()))
		return;
	evbuffer_add(s->tr_out, evbuffer_pullup(tr, (ssize_t)n), n);
}

/* The response's data source: s->out, its end once the request ended. */
static ssize_t h2_data_cb(nghttp2_session *session, int32_t id, uint8_t *buf,
			  size_t length, uint32_t *flags,
			  nghttp2_data_source *src, void *user)
{
	struct h2s *s = src->ptr;
	size_t n;

	(void)session;
	(void)id;
	(void)user;
	n = (size_t)evbuffer_remove(s->out, buf, length);
	if (n > 0)
		s->hc->last_progress = clk_now_ns();
	if (evbuffer_get_length(s->out) == 0 && s->out_eos) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		if (s->tr_out &&
		    h2f_submit_trailers(s->hc->s, s->id, s->tr_out) == 0)
			*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
		if (s->sending) /* all of it taken: its request ends */
			h2_post(s, H2_EV_DRAINED);
		return (ssize_t)n;
	}
	if (s->out_added && evbuffer_get_length(s->out) <= s->write_low) {
		s->out_added = false;
		h2_post(s, H2_EV_DRAINED);
	}
	if (n == 0) {
		s->deferred = true;
		return NGHTTP2_ERR_DEFERRED;
	}
	return (ssize_t)n;
}

/* Submit the response head in b (with a body from s->out unless
 * bodiless). 0 or -1. */
static int h2_submit(struct h2s *s, struct hdr_buf *b, bool bodiless)
{
	nghttp2_nv nv[H1_MAX_HEADERS + 16 + HRULE_FIELDS_MAX];
	nghttp2_data_provider dp = {.source.ptr = s,
				    .read_callback = h2_data_cb};
	int n;

	if (s->resp_sent || s->closed || s->reset || s->hc->dead)
		return -1;
	n = h2f_response_nv(b->p, b->len, nv, sizeof(nv) / sizeof(nv[0]));
	if (n < 0)
		return -1;
	if (nghttp2_submit_response(s->hc->s, s->id, nv, (size_t)n,
				    bodiless ? NULL : &dp) != 0)
		return -1;
	s->resp_sent = true;
	h2_flush_soon(s->hc);
	return 0;
}

static void h2_cont(struct req *r)
{
	struct h2s *s = h2s_of(r);
	nghttp2_nv nv = {(uint8_t *)":status", (uint8_t *)"100", 7, 3,
			 NGHTTP2_NV_FLAG_NONE};

	if (!s->closed && !s->reset && !s->hc->dead &&
	    nghttp2_submit_headers(s->hc->s, NGHTTP2_FLAG_NONE, s->id, NULL,
				   &nv, 1, NULL) == 0)
		h2_flush_soon(s->hc);
}

static int h2_respond(struct req *r, const struct h1_response *resp,
		      const char *extra, int64_t cl, bool *chunked, bool *close)
{
	struct h2s *s = h2s_of(r);
	struct hdr_buf b;
	int rc;

	(void)close;
	*chunked = false;
	hdr_buf_init(&b, 0);
	rc = hdr_build_response(&b, resp, r->id, extra, r->resp_ed, cl, false,
				false);
	if (rc == 0)
		rc = h2_submit(s, &b, resp->body == H1_BODY_NONE || cl == 0);
	if (rc == 0) /* counted in its HTTP/1.1 form, as the request's */
		r->bytes_out += b.len;
	hdr_buf_free(&b);
	return rc ? -1 : 0;
}

static void h2_error(struct req *r, int status, const char *extra,
		     const char *body, size_t blen, bool close)
{
	struct h2s *s = h2s_of(r);
	bool bodiless = blen == 0 || (r->head && r->h.method == H1_M_HEAD);
	struct hdr_buf b;

	(void)close;
	hdr_buf_init(&b, 0);
	if (hdr_build_error(&b, status, r->id, r->own_ctype, extra, blen,
			    false) == 0) {
		if (!bodiless) {
			evbuffer_add(s->out, body, blen);
			r->bytes_out += blen;
		}
		s->out_eos = true;
		s->own = true;
		if (h2_submit(s, &b, bodiless) == 0)
			r->bytes_out += b.len;
	}
	hdr_buf_free(&b);
}

/* The request ended: its response is complete in s->out (ok), or was cut
 * short (the stream is reset), or no response could be sent. */
static void h2_ended(struct req *r, bool close)
{
	struct h2s *s = h2s_of(r);
	struct h2c *hc = s->hc;

	(void)close;
	hc->nactive--;
	evtimer_del(s->timer);
	evtimer_del(s->btimer);
	if (!s->resp_sent || (!s->own && r->outcome != OUTCOME_OK))
		/* no answer could go, or a relayed one was cut short */
		h2_reset(s, NGHTTP2_INTERNAL_ERROR, OUTCOME_INTERNAL_ERROR);
	else if (!s->out_eos) {
		s->out_eos = true;
		if (s->deferred && !s->closed && !hc->dead) {
			s->deferred = false;
			nghttp2_session_resume_data(hc->s, s->id);
		}
	}
	h2_flush_soon(hc);
}

/* The relayed response is complete in s->out (req_end asks before it
 * records ok): its end is the data source's EOF; whether bytes of it
 * still wait for the client's window (or for nghttp2 to take them): the
 * request then ends when the EOF goes (H2_EV_DRAINED), or as the client
 * leaving, as an HTTP/1.1 client that leaves in the middle of a response
 * is recorded. */
static bool h2_pending(struct req *r)
{
	struct h2s *s = h2s_of(r);
	struct h2c *hc = s->hc;

	if (s->own || !s->resp_sent || s->closed || s->reset || hc->dead)
		return false;
	if (!s->out_eos) {
		s->out_eos = true;
		if (s->deferred) {
			s->deferred = false;
			nghttp2_session_resume_data(hc->s, s->id);
			h2_flush_soon(hc);
		}
	}
	s->sending = evbuffer_get_length(s->out) > 0;
	return s->sending;
}

static const struct req_client_ops h2_client = {
    .in = h2_in,
    .out = h2_out,
    .read = h2_read,
    .reading = h2_reading,
    .watermarks = h2_watermarks,
    .closed = h2_closed,
    .close_after = h2_close_after,
    .closing = h2_closing,
    .take = h2_take,
    .timer = h2_timer,
    .timer_stop = h2_timer_stop,
    .btimer = h2_btimer,
    .btimer_stop = h2_btimer_stop,
    .admitted = h2_admitted,
    .cont = h2_cont,
    .respond = h2_respond,
    .error = h2_error,
    .pending = h2_pending,
    .ended = h2_ended,
    .trailers = h2_trailers,
};

/* ---- nghttp2's callbacks --------------------------------------------------
 */

static int h2_on_begin_headers(nghttp2_session *session,
			       const nghttp2_frame *frame, void *user)
{
	struct h2c *hc = user;
	struct h2s *s;

	if (hc->renewing) /* h2_renew's stream: no request */
		return 0;
	if (frame->hd.type != NGHTTP2_HEADERS ||
	    frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	hc->hold = false; /* a request: not a client that only wakes it */
	if (hc->shrunk) {
		/* the client's HPACK table back for what follows */
		nghttp2_settings_entry t = {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE,
					    H2_HD_TABLE};

		if (nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, &t,
					    1) == 0)
			hc->shrunk = false;
	}
	s = h2s_new(hc, frame->hd.stream_id);
	if (!s) {
		nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE,
					  frame->hd.stream_id,
					  NGHTTP2_INTERNAL_ERROR);
		return 0;
	}
	nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, s);
	return 0;
}

static int h2_on_header(nghttp2_session *session, const nghttp2_frame *frame,
			const uint8_t *name, size_t namelen,
			const uint8_t *value, size_t valuelen, uint8_t flags,
			void *user)
{
	struct h2c *hc = user;
	struct h2s *s;
	int rc;

	(void)flags;
	if (frame->hd.type != NGHTTP2_HEADERS)
		return 0;
	s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
	if (!s || s->reset)
		return 0;
	s->hdr_bytes += namelen + valuelen + H2_FIELD_OVERHEAD;
	if (s->hdr_bytes > hc->c->w->set.http2.max_header_list_size) {
		http2_count_why(HTTP2_WHY_HEADER_LIST);
		h2_reset(s, NGHTTP2_PROTOCOL_ERROR, OUTCOME_HEADERS_TOO_LARGE);
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
		/* a trailer: never the head's; the body's trailer section
		 * when it is chunked (h2_in_end), counted with the head */
		if (!s->fields_done || (namelen > 0 && name[0] == ':'))
			return 0;
		if (!s->tr_in && !(s->tr_in = evbuffer_new()))
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		/* within the chunked trailer section the proxy reads them
		 * from (its lines and the final CRLF): refused before they
		 * go, as an HTTP/1.1 client's too large one is */
		if (evbuffer_get_length(s->tr_in) + namelen + valuelen + 6 >
		    hc->c->w->set.h1.trailer_max) {
			http2_count_why(HTTP2_WHY_HEADER_LIST);
			h2_reset(s, NGHTTP2_PROTOCOL_ERROR,
				 OUTCOME_HEADERS_TOO_LARGE);
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		}
		if (evbuffer_add(s->tr_in, name, namelen) ||
		    evbuffer_add(s->tr_in, ": ", 2) ||
		    evbuffer_add(s->tr_in, value, valuelen) ||
		    evbuffer_add(s->tr_in, "\r\n", 2))
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		return 0;
	}
	if (s->fields_done)
		return 0;
	rc = h2f_req_field(&s->q, name, namelen, value, valuelen);
	if (rc < 0)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	if (rc == 0)
		return 0;
	/* a second Host field */
	http2_count_why(HTTP2_WHY_INVALID_HEADER);
	h2_reset(s, NGHTTP2_PROTOCOL_ERROR, OUTCOME_BAD_REQUEST);
	return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

/* A field HTTP/2 forbids (CR, LF, NUL, a character a name may not have):
 * the stream is reset, nothing of it goes upstream. */
static int h2_on_invalid_header(nghttp2_session *session,
				const nghttp2_frame *frame, const uint8_t *name,
				size_t namelen, const uint8_t *value,
				size_t valuelen, uint8_t flags, void *user)
{
	struct h2s *s;

	(void)name;
	(void)namelen;
	(void)value;
	(void)valuelen;
	(void)flags;
	(void)user;
	s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
	http2_count_why(HTTP2_WHY_INVALID_HEADER);
	if (s)
		h2_reset(s, NGHTTP2_PROTOCOL_ERROR, OUTCOME_BAD_REQUEST);
	else
		nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE,
					  frame->hd.stream_id,
					  NGHTTP2_PROTOCOL_ERROR);
	return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

static int h2_on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id,
			    const uint8_t *data, size_t len, void *user)
{
	struct h2s *s = nghttp2_session_get_stream_user_data(session, id);
	char line[24];
	int n;

	(void)flags;
	(void)user;
	if (!s || s->reset || !s->r.active || s->sending) {
		/* nobody reads it: its window is given back at once */
		nghttp2_session_consume(session, id, len);
		return 0;
	}
	s->hc->last_progress = clk_now_ns();
	s->in_unacked += len;
	s->in_framed += len;
	if (s->chunked && len > 0) {
		n = snprintf(line, sizeof(line), "%zx\r\n", len);
		evbuffer_add(s->in, line, (size_t)n);
		evbuffer_add(s->in, data, len);
		evbuffer_add(s->in, "\r\n", 2);
		s->in_framed += (uint64_t)n + 2;
	} else {
		evbuffer_add(s->in, data, len);
	}
	if (s->head_done)
		h2_post(s, H2_EV_DATA);
	return 0;
}

/* The client's END_STREAM on s: a chunked body gets its last chunk. */
static void h2_in_end(struct h2s *s)
{
	if (s->in_eos)
		return;
	s->in_eos = true;
	if (s->chunked && s->r.active) {
		size_t n = s->tr_in ? evbuffer_get_length(s->tr_in) : 0;

		/* its trailers in the chunked body's trailer section */
		evbuffer_add(s->in, "0\r\n", 3);
		if (n)
			evbuffer_add_buffer(s->in, s->tr_in);
		evbuffer_add(s->in, "\r\n", 2);
		s->in_framed += 5 + n;
	}
	if (s->head_done)
		h2_post(s, H2_EV_DATA);
}

/* Every frame's header: the highest stream id a HEADERS frame named
 * (nghttp2's own, last_recv_stream_id, is not to be read), for a
 * released session to be made again with it. */
static int h2_on_begin_frame(nghttp2_session *session,
			     const nghttp2_frame_hd *hd, void *user)
{
	struct h2c *hc = user;

	(void)session;
	if (hd->type != NGHTTP2_HEADERS || hc->renewing)
		return 0;
	hc->update_owed = false; /* a block: it starts with the update */
	if (hd->stream_id > hc->max_id)
		hc->max_id = hd->stream_id;
	return 0;
}

static int h2_on_frame_recv(nghttp2_session *session,
			    const nghttp2_frame *frame, void *user)
{
	struct h2c *hc = user;
	struct h2s *s;

	if (hc->renewing)
		return 0;
	switch (frame->hd.type) {
	case NGHTTP2_SETTINGS:
		if (frame->hd.flags & NGHTTP2_FLAG_ACK) {
			if (hc->settings_unacked > 0)
				hc->settings_unacked--;
			/* edge's settings are in force when it is called */
			if (nghttp2_session_get_local_settings(
				session, NGHTTP2_SETTINGS_HEADER_TABLE_SIZE) ==
			    0)
				hc->update_owed = true;
			return 0;
		}
		return 0;
	case NGHTTP2_GOAWAY:
		http2_count_frame(false, true, frame->goaway.error_code);
		return 0;
	case NGHTTP2_RST_STREAM:
		http2_count_frame(false, false, frame->rst_stream.error_code);
		return 0;
	case NGHTTP2_HEADERS:
	case NGHTTP2_DATA:
		break;
	default:
		return 0;
	}
	s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
	if (!s)
		return 0;
	hc->last_progress = clk_now_ns();
	if (frame->hd.type == NGHTTP2_HEADERS &&
	    frame->headers.cat == NGHTTP2_HCAT_REQUEST && !s->fields_done &&
	    !s->reset && (frame->hd.flags & NGHTTP2_FLAG_END_HEADERS)) {
		s->fields_done = true;
		s->in_eos = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;
		/* a body of unknown length goes to the parser chunked */
		s->chunked = !s->in_eos && !s->q.has_cl;
		h2_post(s, H2_EV_HEAD);
		return 0;
	}
	if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
		h2_in_end(s);
	return 0;
}

/* A GOAWAY with an error went out that edge did not ask for (nghttp2
 * found a connection error while it took the input: a frame on a closed
 * or idle stream, a window overflow, ..., or its stream reset rate
 * limit): the connection's end counted by reason, as h2_fatal's are. */
static void h2_count_goaway_why(struct h2c *hc, uint32_t code)
{
	if (code == NGHTTP2_NO_ERROR || hc->why_counted)
		return;
	hc->why_counted = true;
	switch (code) {
	case NGHTTP2_ENHANCE_YOUR_CALM:
	case NGHTTP2_INTERNAL_ERROR: /* nghttp2's: its stream reset limit */
		http2_count_why(HTTP2_WHY_FLOOD);
		break;
	default:
		http2_count_why(HTTP2_WHY_PROTOCOL);
		break;
	}
}

static int h2_on_frame_send(nghttp2_session *session,
			    const nghttp2_frame *frame, void *user)
{
	struct h2c *hc = user;
	struct h2s *s;

	if (hc->renewing)
		return 0;
	switch (frame->hd.type) {
	case NGHTTP2_SETTINGS:
		if (!(frame->hd.flags & NGHTTP2_FLAG_ACK))
			hc->settings_unacked++;
		return 0;
	case NGHTTP2_GOAWAY:
		http2_count_frame(true, true, frame->goaway.error_code);
		h2_count_goaway_why(hc, frame->goaway.error_code);
		return 0;
	case NGHTTP2_RST_STREAM:
		http2_count_frame(true, false, frame->rst_stream.error_code);
		s = nghttp2_session_get_stream_user_data(session,
							 frame->hd.stream_id);
		if (s) {
			s->rst_sent = true;
			s->rst_code = frame->rst_stream.error_code;
		}
		return 0;
	case NGHTTP2_DATA:
	case NGHTTP2_HEADERS:
		break;
	default:
		return 0;
	}
	if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
	/* the response is complete while the client still sends: it need
	 * not (RFC 9113 section 8.1) */
	if (s && !s->in_eos && !s->reset) {
		s->reset = true;
		nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, s->id,
					  NGHTTP2_NO_ERROR);
	}
	return 0;
}

static int h2_on_stream_close(nghttp2_session *session, int32_t id,
			      uint32_t err, void *user)
{
	struct h2s *s = nghttp2_session_get_stream_user_data(session, id);

	(void)user;
	(void)err; /* counted when the RST_STREAM or GOAWAY came */
	if (!s)
		return 0;
	s->closed = true;
	nghttp2_session_set_stream_user_data(session, id, NULL);
	h2_post(s, H2_EV_CLOSED);
	return 0;
}

/* ---- the requests hear of it ---------------------------------------------
 */

/* s's head is complete: the HTTP/1.1 head its fields make, parsed as a
 * client's, then the stream core's stages. */
static void h2_head(struct h2s *s)
{
	struct req *r = &s->r;
	const struct h1_limits *h1 = &r->w->set.h1;
	size_t len;
	int rc;

	s->head_done = true;
	rc = h2f_req_head(&s->q, s->chunked, &r->head, &len);
	if (rc) {
		if (rc == H2F_HOST_MISMATCH)
			http2_count_why(HTTP2_WHY_HOST_MISMATCH);
		req_end(r,
			rc == H2F_HOST_MISMATCH || rc == H2F_NO_PSEUDO
			    ? OUTCOME_BAD_REQUEST
			: rc == H2F_CONNECT ? OUTCOME_METHOD_NOT_ALLOWED
					    : OUTCOME_INTERNAL_ERROR,
			NULL);
		return;
	}
	h2f_req_free(&s->q); /* the head has it all now */
	r->head_len = len;
	r->bytes_in = len;
	rc = h1_parse_request(r->head, len, h1, &r->h);
	if (rc != (int)len) {
		log_debug_ctx(REQ_LOG_CTX(r), "bad HTTP/2 request: %s",
			      rc < 0 ? h1_err_name(r->h.h.err) : "incomplete");
		free(r->head);
		r->head = NULL; /* no head: not recorded as one */
		req_end(r,
			rc < 0 ? outcome_of_parse(r->h.h.status)
			       : OUTCOME_BAD_REQUEST,
			NULL);
		return;
	}
	req_head(
	    r); /* a chunked body's end comes with END_STREAM (h2_in_end) */
}

/* nghttp2 closed s while its request is under way: a reset of edge's
 * ends it with its reason, one of nghttp2's (a message HTTP/2 forbids,
 * a stream over the limit) as bad_request or overloaded, the client's
 * as the client leaving. */
static void h2_closed_stream(struct h2s *s)
{
	struct req *r = &s->r;

	if (s->reset && s->why_o != OUTCOME_OK) {
		req_end(r, s->why_o, NULL);
		return;
	}
	if (s->rst_sent && s->rst_code == NGHTTP2_REFUSED_STREAM) {
		req_end(r, OUTCOME_OVERLOADED, NULL);
		return;
	}
	if (s->rst_sent && s->rst_code != NGHTTP2_NO_ERROR &&
	    s->rst_code != NGHTTP2_CANCEL) {
		req_end(r, OUTCOME_BAD_REQUEST, NULL);
		return;
	}
	req_client_gone(r, false);
	if (r->active) /* a half-close it waits out: not in HTTP/2 */
		req_end(r, OUTCOME_CLIENT_CLOSED, NULL);
}

/* Hand each stream's news to its request, outside nghttp2. */
static void h2_work(struct h2c *hc)
{
	struct h2s *s;
	unsigned ev;

	hc->depth++;
	while ((s = TAILQ_FIRST(&hc->work))) {
		TAILQ_REMOVE(&hc->work, s, wlink);
		s->in_work = false;
		ev = s->ev;
		s->ev = 0;
		if ((ev & H2_EV_HEAD) && s->r.active && !s->reset)
			h2_head(s);
		if ((ev & H2_EV_DATA) && s->r.active && !(ev & H2_EV_HEAD))
			req_client_readable(&s->r);
		if ((ev & H2_EV_DRAINED) && s->r.active)
			req_client_drained(&s->r);
		if ((ev & H2_EV_CLOSED) && s->r.active)
			h2_closed_stream(s);
	}
	hc->depth--;
}

/* ---- the connection -------------------------------------------------------
 */

/* The session is over (GOAWAY exchanged, or a connection error): the
 * requests still under way end as the client leaving, what is queued is
 * flushed, then the connection closes. */
static void h2_finish(struct h2c *hc)
{
	struct h2s *s;

	if (hc->finishing || hc->dead)
		return;
	hc->finishing = true;
	hc->depth++;
	for (s = TAILQ_FIRST(&hc->streams); s; s = TAILQ_NEXT(s, link)) {
		if (s->r.active)
			req_end(&s->r, OUTCOME_CLIENT_CLOSED, NULL);
	}
	hc->depth--;
	hc->dead = true;
	conn_next(hc->c, true);
}

/* Write what nghttp2 has to send into the connection's output, as far
 * as it takes (CONN_HIGH_WATER), then let the requests hear of it. */
static void h2_flush(struct h2c *hc)
{
	struct conn *c = hc->c;
	struct evbuffer *out;
	const uint8_t *data;
	ssize_t n;

	if (hc->dead || !c->io || hc->depth > 0)
		return;
	out = sockio_output(c->io);
	for (int round = 0; round < 4; round++) {
		hc->depth++;
		while (evbuffer_get_length(out) < CONN_HIGH_WATER) {
			n = nghttp2_session_mem_send(hc->s, &data);
			if (n < 0) {
				hc->depth--;
				log_debug("http2: %s: closed",
					  nghttp2_strerror((int)n));
				conn_close(c);
				return;
			}
			if (n == 0)
				break;
			evbuffer_add(out, data, (size_t)n);
			h2mem_mark(&hc->mem, data);
			hc->last_io = clk_now_ns();
		}
		hc->depth--;
		if (TAILQ_EMPTY(&hc->work))
			break;
		h2_work(hc);
		if (hc->dead)
			return;
	}
	if (!TAILQ_EMPTY(&hc->work))
		h2_flush_soon(hc); /* the rest at the next turn */
	h2_sweep(hc);
	if (!nghttp2_session_want_read(hc->s) &&
	    !nghttp2_session_want_write(hc->s)) {
		h2_finish(hc);
		return;
	}
	if (!hc->park_armed && TAILQ_EMPTY(&hc->streams)) {
		/* no stream left: park the connection once it stays idle */
		hc->park_armed = true;
		conn_btimer(c, CONN_PARK_MS);
	}
}

static void h2_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	h2_flush(arg);
}

static void h2_flush_soon(struct h2c *hc)
{
	if (!hc->dead && hc->flush)
		sockio_soon(&hc->soon, hc->flush);
}

/* nghttp2 refused the connection's input (err): counted by reason, a
 * GOAWAY (nghttp2's, or one here: ENHANCE_YOUR_CALM for a flood,
 * PROTOCOL_ERROR else) flushed, and the connection ends. */
static void h2_fatal(struct h2c *hc, int err)
{
	struct conn *c = hc->c;
	enum http2_why w;
	uint32_t code = NGHTTP2_PROTOCOL_ERROR;

	switch (err) {
	case NGHTTP2_ERR_FLOODED:
		w = HTTP2_WHY_FLOOD;
		code = NGHTTP2_ENHANCE_YOUR_CALM;
		break;
	case NGHTTP2_ERR_TOO_MANY_CONTINUATIONS:
		w = HTTP2_WHY_CONTINUATION;
		code = NGHTTP2_ENHANCE_YOUR_CALM;
		break;
	case NGHTTP2_ERR_TOO_MANY_SETTINGS:
		w = HTTP2_WHY_SETTINGS;
		code = NGHTTP2_ENHANCE_YOUR_CALM;
		break;
	case NGHTTP2_ERR_BAD_CLIENT_MAGIC:
		w = HTTP2_WHY_PREFACE;
		break;
	default:
		w = HTTP2_WHY_PROTOCOL;
		break;
	}
	if (!hc->why_counted)
		http2_count_why(w);
	hc->why_counted = true;
	log_debug_ctx(&(const struct log_ctx){c->client_ip, "-"},
		      "http2: %s: the connection ends", nghttp2_strerror(err));
	evbuffer_drain(sockio_input(c->io),
		       evbuffer_get_length(sockio_input(c->io)));
	if (!hc->goaway) {
		hc->goaway = true;
		nghttp2_session_terminate_session(hc->s, code);
	}
	/* what nghttp2 queued (its GOAWAY) goes first: a session that
	 * refuses to send now is closed at once */
	hc->depth++;
	for (;;) {
		const uint8_t *data;
		ssize_t n = nghttp2_session_mem_send(hc->s, &data);

		if (n <= 0)
			break;
		evbuffer_add(sockio_output(c->io), data, (size_t)n);
		if (evbuffer_get_length(sockio_output(c->io)) > CONN_HIGH_WATER)
			break;
	}
	hc->depth--;
	h2_finish(hc);
}

/* The connection's input: fed to nghttp2 whole. */
static void h2_readable(struct conn *c)
{
	struct h2c *hc = h2c_of(c);
	struct evbuffer *in = sockio_input(c->io);
	struct evbuffer_iovec v[8];
	ssize_t n;
	int k, i;

	hc->last_io = hc->last_read = clk_now_ns();
	while (!hc->dead && evbuffer_get_length(in) > 0) {
		k = evbuffer_peek(in, -1, NULL, v, 8);
		if (k > 8)
			k = 8;
		for (i = 0; i < k; i++) {
			hc->depth++;
			n = nghttp2_session_mem_recv(hc->s, v[i].iov_base,
						     v[i].iov_len);
			hc->depth--;
			if (n < 0) {
				h2_fatal(hc, (int)n);
				return;
			}
		}
		for (i = 0; i < k; i++)
			evbuffer_drain(in, v[i].iov_len);
	}
	h2_work(hc);
	h2_flush(hc);
}

static void h2_drained(struct conn *c)
{
	struct h2c *hc = h2c_of(c);

	hc->last_progress = clk_now_ns();
	h2_flush(hc);
}

static void h2_gone(struct conn *c, bool eof)
{
	(void)eof;
	conn_close(c);
}

/* Whether a stream waits for the client's window with a response ready. */
static bool h2_window_stalled(struct h2c *hc)
{
	struct h2s *s;

	for (s = TAILQ_FIRST(&hc->streams); s; s = TAILQ_NEXT(s, link)) {
		if (!s->resp_sent || s->closed || s->reset ||
		    evbuffer_get_length(s->out) == 0)
			continue;
		if (nghttp2_session_get_stream_remote_window_size(hc->s,
								  s->id) <= 0 ||
		    nghttp2_session_get_remote_window_size(hc->s) <= 0)
			return true;
	}
	return false;
}

/* The progress timer (c->timer, timeouts.idle_keepalive): one whose
 * responses (relayed or edge's own) wait for the client's window is
 * closed; an idle connection gets GOAWAY; one whose streams wait for
 * upstreams goes on. */
static void h2_timeout(struct conn *c)
{
	struct h2c *hc = h2c_of(c);
	uint64_t ms = c->w->set.timeouts.idle_keepalive_ms;
	uint64_t waited = (clk_now_ns() - hc->last_progress) / 1000000;

	if (waited < ms) {
		conn_timer(c, ms - waited);
		return;
	}
	if (h2_window_stalled(hc)) {
		http2_count_why(HTTP2_WHY_WINDOW_STALLED);
		hc->why_counted = true;
		log_debug_ctx(&(const struct log_ctx){c->client_ip, "-"},
			      "http2: no window from the client for %llu ms: "
			      "closed",
			      (unsigned long long)waited);
		conn_close(c);
		return;
	}
	if (hc->nactive == 0) {
		http2_count_why(HTTP2_WHY_IDLE);
		hc->goaway = true;
		nghttp2_session_terminate_session(hc->s, NGHTTP2_NO_ERROR);
		h2_flush(hc);
		return;
	}
	conn_timer(c, ms);
}

/* Whether the session has nothing under way: no stream (nghttp2 keeps no
 * closed one), nothing to send, no GOAWAY. */
static bool h2_quiet(const struct h2c *hc)
{
	return !hc->dead && !hc->goaway && !hc->finishing && hc->depth == 0 &&
	       TAILQ_EMPTY(&hc->streams) && TAILQ_EMPTY(&hc->work) &&
	       nghttp2_session_want_read(hc->s) &&
	       !nghttp2_session_want_write(hc->s);
}

/* The settings a released session keeps (struct h2saved): the client's
 * all of them, edge's the first H2_LOCAL_SETTINGS. */
static const int32_t h2_saved_ids[H2_REMOTE_SETTINGS] = {
    NGHTTP2_SETTINGS_HEADER_TABLE_SIZE,
    NGHTTP2_SETTINGS_ENABLE_PUSH,
    NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
    NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE,
    NGHTTP2_SETTINGS_MAX_FRAME_SIZE,
    NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
    NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES,
};

/* Whether hc's quiet session could be released but for its client's
 * HPACK table (how many bytes it holds, *table): the client's SETTINGS
 * came (NO_RFC7540_PRIORITIES is 0 or 1 only after them) and edge's are
 * acknowledged. */
static bool h2_could_release(struct h2c *hc, size_t *table)
{
	uint32_t pri = nghttp2_session_get_remote_settings(
	    hc->s, NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES);
	int32_t win = nghttp2_session_get_remote_window_size(hc->s);

	*table = nghttp2_session_get_hd_inflate_dynamic_table_size(hc->s);
	/* a window below the initial one is taken down to it by a stream's
	 * body (h2_renew): there must have been one */
	return hc->settings_unacked == 0 && pri <= 1 && win >= 0 &&
	       (win >= NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE ||
		hc->max_id > 0);
}

/* Release hc's session (parked, quiet, h2_could_release with an empty
 * table): what h2_renew needs is kept in hc->saved. */
static void h2_release(struct h2c *hc)
{
	struct h2saved *v = &hc->saved;
	unsigned i;

	for (i = 0; i < H2_LOCAL_SETTINGS; i++)
		v->local[i] =
		    nghttp2_session_get_local_settings(hc->s, h2_saved_ids[i]);
	for (i = 0; i < H2_REMOTE_SETTINGS; i++)
		v->remote[i] =
		    nghttp2_session_get_remote_settings(hc->s, h2_saved_ids[i]);
	v->local_window =
	    nghttp2_session_get_effective_local_window_size(hc->s);
	v->remote_window = nghttp2_session_get_remote_window_size(hc->s);
	nghttp2_session_del(hc->s);
	hc->s = NULL;
	hc->released_at = clk_now_ns();
	http2_count_released(1);
}

static int h2_session_new(struct h2c *hc);

/* A frame header at p: 9 bytes. */
static size_t h2_frame_hd(uint8_t *p, uint32_t len, uint8_t type, uint8_t flags,
			  int32_t id)
{
	p[0] = (uint8_t)(len >> 16);
	p[1] = (uint8_t)(len >> 8);
	p[2] = (uint8_t)len;
	p[3] = type;
	p[4] = flags;
	p[5] = (uint8_t)((uint32_t)id >> 24) & 0x7f;
	p[6] = (uint8_t)((uint32_t)id >> 16);
	p[7] = (uint8_t)((uint32_t)id >> 8);
	p[8] = (uint8_t)id;
	return 9;
}

static size_t h2_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
	return 4;
}

/* Feed n bytes at p to hc's session, and drop what it answers. */
static int h2_feed(struct h2c *hc, const uint8_t *p, size_t n)
{
	const uint8_t *data;
	ssize_t k;

	if (n && nghttp2_session_mem_recv(hc->s, p, n) != (ssize_t)n)
		return -1;
	while ((k = nghttp2_session_mem_send(hc->s, &data)) > 0)
		;
	return k < 0 ? -1 : 0;
}

/* h2_renew's response body: *source.ptr zero bytes. */
static ssize_t h2_renew_read(nghttp2_session *session, int32_t id, uint8_t *buf,
			     size_t len, uint32_t *flags,
			     nghttp2_data_source *source, void *user)
{
	uint32_t *left = source->ptr;
	size_t n = len < *left ? len : *left;

	(void)session;
	(void)id;
	(void)user;
	memset(buf, 0, n);
	*left -= (uint32_t)n;
	if (*left == 0)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

/* A session for a released hc, in the state the released one was in as
 * far as either side can tell: edge's settings acknowledged, the
 * client's as they were, both connection windows, and the client's
 * highest stream id (later frames of older streams are those of closed
 * streams, not idle ones). It is made by feeding a new session the
 * frames that lead there and dropping what it sends: the preface, the
 * client's SETTINGS, a WINDOW_UPDATE for a window above the initial
 * one, a request with that stream id (only fields that leave both HPACK
 * tables as they are) and the ACK of edge's SETTINGS — the ACK after the
 * request while the client owes the table size update for edge's
 * HEADER_TABLE_SIZE 0 (the decoder then waits for it, as the released
 * session's did), before it otherwise (the request then led by that
 * update, so that the decoder waits for nothing) — then the request's
 * response, whose body takes the connection window down to what it
 * was, and the client's HEADER_TABLE_SIZE once more.
 * 0, or -1: no memory, or a state not as it was (logged). */
static int h2_renew(struct h2c *hc)
{
	static const uint8_t req[] = {
	    0x82,	     /* :method GET */
	    0x84,	     /* :path / */
	    0x87,	     /* :scheme https */
	    0x01, 0x01, 'a', /* :authority a, not indexed */
	};
	const struct h2saved *v = &hc->saved;
	nghttp2_settings_entry iv[H2_LOCAL_SETTINGS];
	nghttp2_nv st = {(uint8_t *)":status", (uint8_t *)"200", 7, 3,
			 NGHTTP2_NV_FLAG_NONE};
	nghttp2_data_provider prd = {.read_callback = h2_renew_read};
	uint8_t b[128], *p = b;
	uint32_t need = 0;
	int32_t up;
	unsigned i;
	int rc = -1;
	bool owed;

	if (h2_session_new(hc))
		return -1;
	http2_count_released(-1);
	hc->renewing = true;
	for (i = 0; i < H2_LOCAL_SETTINGS; i++)
		iv[i] = (nghttp2_settings_entry){h2_saved_ids[i], v->local[i]};
	if (nghttp2_submit_settings(hc->s, NGHTTP2_FLAG_NONE, iv,
				    H2_LOCAL_SETTINGS) ||
	    (v->local_window != NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE &&
	     nghttp2_session_set_local_window_size(hc->s, NGHTTP2_FLAG_NONE, 0,
						   v->local_window)))
		goto out;
	memcpy(p, NGHTTP2_CLIENT_MAGIC, NGHTTP2_CLIENT_MAGIC_LEN);
	p += NGHTTP2_CLIENT_MAGIC_LEN;
	p += h2_frame_hd(p, 6 * H2_REMOTE_SETTINGS, NGHTTP2_SETTINGS, 0, 0);
	for (i = 0; i < H2_REMOTE_SETTINGS; i++) {
		*p++ = (uint8_t)(h2_saved_ids[i] >> 8);
		*p++ = (uint8_t)h2_saved_ids[i];
		p += h2_put32(p, v->remote[i]);
	}
	up = v->remote_window - NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE;
	if (up > 0) {
		p += h2_frame_hd(p, 4, NGHTTP2_WINDOW_UPDATE, 0, 0);
		p += h2_put32(p, (uint32_t)up);
	}
	if (h2_feed(hc, b, (size_t)(p - b)))
		goto out;
	p = b;
	owed = v->local[0] == 0 && hc->update_owed; /* HEADER_TABLE_SIZE */
	if (!owed)
		p += h2_frame_hd(p, 0, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0);
	if (hc->max_id > 0) {
		bool upd = !owed && v->local[0] == 0;

		p += h2_frame_hd(
		    p, (uint32_t)(sizeof(req) + upd), NGHTTP2_HEADERS,
		    NGHTTP2_FLAG_END_STREAM | NGHTTP2_FLAG_END_HEADERS,
		    hc->max_id);
		if (upd)
			*p++ = 0x20; /* dynamic table size update: 0 */
		memcpy(p, req, sizeof(req));
		p += sizeof(req);
		if (v->remote_window < NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE)
			need =
			    (uint32_t)(NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE -
				       v->remote_window);
		if (need > v->remote[3]) { /* INITIAL_WINDOW_SIZE */
			p += h2_frame_hd(p, 4, NGHTTP2_WINDOW_UPDATE, 0,
					 hc->max_id);
			p += h2_put32(p, need - v->remote[3]);
		}
	}
	if (owed)
		p += h2_frame_hd(p, 0, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0);
	if (h2_feed(hc, b, (size_t)(p - b)))
		goto out;
	if (hc->max_id > 0) {
		prd.source.ptr = &need;
		if (nghttp2_submit_response(hc->s, hc->max_id, &st, 1,
					    need ? &prd : NULL) < 0 ||
		    h2_feed(hc, NULL, 0) || need)
			goto wrong;
	}
	/* the table size update the response above took may be owed to the
	 * client (its HEADER_TABLE_SIZE came after edge's last header block,
	 * or none was sent) and its decoder may insist: the client's
	 * HEADER_TABLE_SIZE again has nghttp2 start its next header block
	 * with it (if not owed, an update to the size the client's table
	 * already has: nothing changes) */
	p = b;
	p += h2_frame_hd(p, 6, NGHTTP2_SETTINGS, 0, 0);
	*p++ = 0;
	*p++ = NGHTTP2_SETTINGS_HEADER_TABLE_SIZE;
	p += h2_put32(p, v->remote[0]);
	if (h2_feed(hc, b, (size_t)(p - b)))
		goto out;
	for (i = 0; i < H2_LOCAL_SETTINGS; i++)
		if (nghttp2_session_get_local_settings(
			hc->s, h2_saved_ids[i]) != v->local[i])
			goto wrong;
	for (i = 0; i < H2_REMOTE_SETTINGS; i++)
		if (nghttp2_session_get_remote_settings(
			hc->s, h2_saved_ids[i]) != v->remote[i])
			goto wrong;
	if (nghttp2_session_get_effective_local_window_size(hc->s) !=
		v->local_window ||
	    nghttp2_session_get_remote_window_size(hc->s) != v->remote_window ||
	    nghttp2_session_get_last_proc_stream_id(hc->s) != hc->max_id ||
	    nghttp2_session_want_write(hc->s) ||
	    !nghttp2_session_want_read(hc->s))
		goto wrong;
	rc = 0;
	hc->hold =
	    clk_now_ns() - hc->released_at < H2_RELEASE_AGAIN_MS * 1000000ULL;
	http2_count_renewed();
	goto out;
wrong:
	log_warn("http2: a released session made again is not as it was: "
		 "the connection closes");
out:
	hc->renewing = false;
	return rc;
}

/* Ask the client to empty its HPACK table (HEADER_TABLE_SIZE 0): once it
 * acknowledges, the session can be released. */
static void h2_shrink(struct h2c *hc)
{
	nghttp2_settings_entry t = {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 0};

	if (nghttp2_submit_settings(hc->s, NGHTTP2_FLAG_NONE, &t, 1))
		return;
	hc->shrunk = true;
	hc->park_armed = true;
	conn_btimer(hc->c, CONN_PARK_MS);
	h2_flush(hc);
}

/* The park timer (c->btimer, armed when the last stream went): a
 * connection without a stream and without bytes either way for
 * CONN_PARK_MS is parked, keeping only its session (and its transport):
 * its struct conn, sockio, buffers and events are freed, and the pages
 * of nghttp2's output buffer given back, until its next byte or its
 * idle deadline (h2_unpark). The session itself is released too when
 * nothing of it need be kept but a few values (h2_release); a client's
 * HPACK table that holds fields is emptied first, once the connection
 * has been idle for H2_SHRINK_MS (the park ends then to ask); a session
 * made again soon after its release and given no request since waits
 * for H2_RELEASE_AGAIN_MS without a byte from the client (the park ends
 * then). */
static void h2_btimeout(struct conn *c)
{
	struct h2c *hc = h2c_of(c);
	uint64_t now = clk_now_ns(), ms = c->w->set.timeouts.idle_keepalive_ms;
	uint64_t quiet = (now - hc->last_io) / 1000000;
	uint64_t waited = (now - hc->last_progress) / 1000000, park;
	uint64_t heard = (now - hc->last_read) / 1000000;
	size_t table = 0;
	int32_t recv;
	bool could, release, held;

	hc->park_armed = false;
	if (!TAILQ_EMPTY(&hc->streams) || hc->goaway || hc->finishing ||
	    hc->dead)
		return; /* armed again when the last stream goes; or ending */
	if (!h2_quiet(hc) || !conn_parkable(c) || quiet < CONN_PARK_MS) {
		/* bytes moved since, or some are still buffered: later */
		hc->park_armed = true;
		conn_btimer(c, quiet < CONN_PARK_MS ? CONN_PARK_MS - quiet
						    : CONN_PARK_MS);
		return;
	}
	if (waited >= ms)
		return; /* the progress timer ends it now */
	could = h2_could_release(hc, &table);
	held = hc->hold && heard < H2_RELEASE_AGAIN_MS;
	release = could && table == 0 && !held;
	recv = nghttp2_session_get_effective_recv_data_length(hc->s);
	if (release && recv > 0) {
		/* the connection window the client's DATA took and edge has
		 * not given back yet (below half the window): a new session
		 * would forget it, the client never: given back first */
		if (nghttp2_submit_window_update(hc->s, NGHTTP2_FLAG_NONE, 0,
						 recv) == 0) {
			hc->park_armed = true;
			conn_btimer(c, CONN_PARK_MS);
			h2_flush(hc);
			return;
		}
		release = false;
	}
	park = ms - waited;
	if (could && held && H2_RELEASE_AGAIN_MS - heard < park)
		park = H2_RELEASE_AGAIN_MS - heard; /* back then to release */
	if (could && table > 0 && !hc->shrunk && !held) {
		if (waited >= H2_SHRINK_MS) {
			h2_shrink(hc);
			return;
		}
		if (H2_SHRINK_MS - waited < park)
			park = H2_SHRINK_MS - waited; /* back then to ask */
	}
	*(struct h2c **)conn_proto(c) = NULL;
	hc->c = NULL;
	if (conn_park_keep(c, hc, park)) {
		/* no memory for the entry: it waits on as it is */
		hc->c = c;
		*(struct h2c **)conn_proto(c) = hc;
		return;
	}
	sockio_soon_cancel(&hc->soon);
	event_free(hc->flush);
	hc->flush = NULL;
	if (release)
		h2_release(hc);
	else
		h2mem_release(&hc->mem);
}

/* Draining: GOAWAY with the last stream taken; the open ones finish. */
static void h2_drain(struct conn *c)
{
	struct h2c *hc = h2c_of(c);

	if (hc->goaway || hc->dead)
		return;
	hc->goaway = true;
	http2_count_why(HTTP2_WHY_DRAIN);
	if (hc->nactive == 0)
		nghttp2_session_terminate_session(hc->s, NGHTTP2_NO_ERROR);
	else
		nghttp2_submit_goaway(
		    hc->s, NGHTTP2_FLAG_NONE,
		    nghttp2_session_get_last_proc_stream_id(hc->s),
		    NGHTTP2_NO_ERROR, NULL, 0);
	h2_flush(hc);
}

static bool h2_active(const struct conn *c)
{
	(void)c;
	return true; /* never parked, never closed as idle by a drain */
}

/* The connection closes: every request under way ends as client_closed. */
static void h2_close(struct conn *c)
{
	struct h2c *hc = h2c_of(c);
	struct h2s *s, *next;

	if (!hc || hc->dead) /* none: the session went on parked */
		return;
	hc->depth++;
	for (s = TAILQ_FIRST(&hc->streams); s; s = next) {
		next = TAILQ_NEXT(s, link);
		if (s->r.active)
			req_end(&s->r, OUTCOME_CLIENT_CLOSED, NULL);
	}
	hc->depth--;
	hc->dead = true;
}

static void h2_closed_hook(struct conn *c)
{
	struct h2c *hc = h2c_of(c);
	struct h2s *s;

	if (!hc)
		return;
	hc->dead = true;
	for (s = TAILQ_FIRST(&hc->streams); s; s = TAILQ_NEXT(s, link))
		req_release(&s->r);
}

/* Free hc: its streams, its session (the conn_ops keep_free hook of a
 * parked one). */
static void h2c_free(void *keep)
{
	struct h2c *hc = keep;
	struct h2s *s;

	hc->dead = true;
	while ((s = TAILQ_FIRST(&hc->streams))) {
		if (s->in_work) {
			TAILQ_REMOVE(&hc->work, s, wlink);
			s->in_work = false;
		}
		h2s_free(s);
	}
	sockio_soon_cancel(&hc->soon);
	if (hc->flush)
		event_free(hc->flush);
	if (hc->s)
		nghttp2_session_del(hc->s);
	else
		http2_count_released(-1);
	http2_count_conn(-1);
	free(hc);
}

static void h2_free(struct conn *c)
{
	struct h2c *hc = h2c_of(c);

	if (!hc)
		return;
	h2c_free(hc);
	*(struct h2c **)conn_proto(c) = NULL;
}

static void h2_attach(struct conn *c, struct h2c *hc);

/* A parked connection is back (a byte, its EOF, its deadline, a drain):
 * its session goes on on c. */
static void h2_unpark(struct conn *c, void *keep)
{
	struct h2c *hc = keep;

	hc->c = c;
	*(struct h2c **)conn_proto(c) = hc;
	hc->flush = event_new(c->w->base, -1, 0, h2_flush_cb, hc);
	if (!hc->flush || (!hc->s && h2_renew(hc))) {
		conn_close(c);
		return;
	}
	h2_attach(c, hc);
	/* parked again if what woke it brings no stream */
	hc->park_armed = true;
	conn_btimer(c, CONN_PARK_MS);
}

static void h2_refuse(struct conn *c, enum outcome o)
{
	(void)c;
	(void)o;
}

static void h2_input(struct conn *c)
{
	h2_readable(c);
}

const struct conn_ops http2_ops = {
    .size = sizeof(struct h2c *),
    .input = h2_input,
    .active = h2_active,
    .refuse = h2_refuse,
    .readable = h2_readable,
    .drained = h2_drained,
    .gone = h2_gone,
    .timeout = h2_timeout,
    .btimeout = h2_btimeout,
    .drain = h2_drain,
    .close = h2_close,
    .closed = h2_closed_hook,
    .free = h2_free,
    .unpark = h2_unpark,
    .keep_free = h2c_free,
};

/* A new nghttp2 session for hc (hc->s), no settings submitted. 0 or -1. */
static int h2_session_new(struct h2c *hc)
{
	nghttp2_session_callbacks *cb;
	nghttp2_option *opt;
	nghttp2_mem mem;
	int rc;

	if (nghttp2_session_callbacks_new(&cb))
		return -1;
	if (nghttp2_option_new(&opt)) {
		nghttp2_session_callbacks_del(cb);
		return -1;
	}
	nghttp2_session_callbacks_set_on_begin_frame_callback(
	    cb, h2_on_begin_frame);
	nghttp2_session_callbacks_set_on_begin_headers_callback(
	    cb, h2_on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, h2_on_header);
	nghttp2_session_callbacks_set_on_invalid_header_callback(
	    cb, h2_on_invalid_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
	    cb, h2_on_data_chunk);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb,
							     h2_on_frame_recv);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb,
							     h2_on_frame_send);
	nghttp2_session_callbacks_set_on_stream_close_callback(
	    cb, h2_on_stream_close);
	/* the window is given back as the proxy takes the body */
	nghttp2_option_set_no_auto_window_update(opt, 1);
	nghttp2_option_set_max_deflate_dynamic_table_size(opt,
							  H2_DEFLATE_TABLE);
	/* a closed stream is forgotten at once (no priority tree kept) */
	nghttp2_option_set_no_closed_streams(opt, 1);
	h2mem_init(&hc->mem, &mem);
	rc = nghttp2_session_server_new3(&hc->s, cb, hc, opt, &mem);
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	if (rc) {
		hc->s = NULL;
		return -1;
	}
	return 0;
}

/* nghttp2's session for hc, with w's settings. 0 or -1. */
static int h2_session(struct h2c *hc)
{
	const struct config_http2 *set = &hc->c->w->set.http2;
	nghttp2_settings_entry iv[4];
	uint32_t win = set->initial_window_size, cwin;

	if (h2_session_new(hc))
		return -1;
	iv[0] =
	    (nghttp2_settings_entry){NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
				     set->max_concurrent_streams};
	iv[1] =
	    (nghttp2_settings_entry){NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, win};
	iv[2] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
					 set->max_header_list_size};
	iv[3] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_ENABLE_PUSH, 0};
	if (nghttp2_submit_settings(hc->s, NGHTTP2_FLAG_NONE, iv, 4))
		return -1;
	cwin = win > H2_CONN_WINDOW_MAX / H2_CONN_WINDOWS
		   ? H2_CONN_WINDOW_MAX
		   : win * H2_CONN_WINDOWS;
	if (cwin > NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE &&
	    nghttp2_session_set_local_window_size(hc->s, NGHTTP2_FLAG_NONE, 0,
						  (int32_t)cwin))
		return -1;
	return 0;
}

void http2_start(struct conn *c)
{
	struct h2c *hc = calloc(1, sizeof(*hc));

	if (!hc) {
		conn_close(c);
		return;
	}
	hc->c = c;
	TAILQ_INIT(&hc->streams);
	TAILQ_INIT(&hc->work);
	hc->last_progress = clk_now_ns();
	hc->flush = event_new(c->w->base, -1, 0, h2_flush_cb, hc);
	if (!hc->flush || h2_session(hc)) {
		if (hc->flush)
			event_free(hc->flush);
		if (hc->s)
			nghttp2_session_del(hc->s);
		free(hc);
		conn_close(c);
		return;
	}
	http2_count_conn(1);
	/* the request slot the connection was made with is not used (the
	 * connection is made anew, without it, once parked) */
	c->ops = &http2_ops;
	*(struct h2c **)conn_proto(c) = hc;
	h2_attach(c, hc);
	h2_readable(c);
}

/* c (its adapter state hc) goes on as an HTTP/2 connection: reading,
 * the progress timer armed for what is left of timeouts.idle_keepalive. */
static void h2_attach(struct conn *c, struct h2c *hc)
{
	uint64_t ms = c->w->set.timeouts.idle_keepalive_ms;
	uint64_t waited = (clk_now_ns() - hc->last_progress) / 1000000;

	c->state = CONN_BUSY;
	c->timer_mode = CONN_T_NONE;
	c->kick = false;
	hc->last_io = clk_now_ns();
	sockio_set_watermarks(c->io, 0, CONN_LOW_WATER);
	/* an idle connection writes nothing: a reset that came with its
	 * client's last bytes must be read, not left for idle_keepalive */
	sockio_set_read_all(c->io, true);
	sockio_enable(c->io, EV_READ | EV_WRITE);
	conn_timer(c, waited < ms ? ms - waited : 1);
}
