// SPDX-License-Identifier: BSD-2-Clause
/*
 * http3.c - HTTP/3 requests on QUIC connections (http3.h).
 */
#include "http3.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <nghttp3/nghttp3.h>
#include <stddef.h>

#include "clk.h"
#include "h2fields.h"
#include "hdr.h"
#include "hrule.h"
#include "log.h"
#include "req.h"
#include "worker.h"

/* h2fields.c's nghttp2 fields serve nghttp3 as they are */
_Static_assert(sizeof(nghttp2_nv) == sizeof(nghttp3_nv) &&
		   offsetof(nghttp2_nv, name) == offsetof(nghttp3_nv, name) &&
		   offsetof(nghttp2_nv, value) == offsetof(nghttp3_nv, value) &&
		   offsetof(nghttp2_nv, namelen) ==
		       offsetof(nghttp3_nv, namelen) &&
		   offsetof(nghttp2_nv, valuelen) ==
		       offsetof(nghttp3_nv, valuelen) &&
		   offsetof(nghttp2_nv, flags) == offsetof(nghttp3_nv, flags) &&
		   NGHTTP2_NV_FLAG_NO_INDEX == NGHTTP3_NV_FLAG_NEVER_INDEX,
	       "nghttp2_nv and nghttp3_nv differ");

/* what a stream has for its request once nghttp3 and ngtcp2 returned */
#define H3_EV_HEAD 0x01
#define H3_EV_DATA 0x02
#define H3_EV_CLOSED 0x04
#define H3_EV_DRAINED 0x08

/* response bytes handed to nghttp3, kept until acknowledged */
struct h3blk {
	struct h3blk *next;
	size_t len, acked;
	uint8_t data[];
};

/* while requests are in flight, a PING this often (or at half the idle
 * timeout both ends agreed on, when shorter) keeps the connection from
 * its idle timeout (an upstream may take longer to answer) */
#define H3_KEEPALIVE_NS (15ULL * NGTCP2_SECONDS)
#define H3_KEEPALIVE_MIN_NS (1ULL * NGTCP2_SECONDS)

/* response bytes a stream keeps unacknowledged at most: past it, the
 * stream waits for acknowledgements (a client that holds one early
 * packet's ACK back cannot make edge keep the whole download) */
#define H3_UNACKED_MAX (1024 * 1024)

/* bytes of response body taken from the proxy's buffer per read */
#define H3_READ_MAX 16384

struct h3c;

struct h3s {
	TAILQ_ENTRY(h3s) link;
	TAILQ_ENTRY(h3s) wlink;
	struct h3c *hc;
	int64_t id;
	unsigned ev;
	bool in_work;
	struct evbuffer *in, *out;
	struct h2f_req q;
	struct evbuffer *tr_out;
	struct h3blk *sent, *sent_tail; /* handed, not yet acknowledged */
	size_t sent_bytes;		/* ... their bytes */
	size_t hdr_bytes;
	uint64_t in_unacked, in_framed;
	size_t write_low;
	struct event *timer, *btimer;
	bool chunked, in_eos, fields_done, head_done, closed, resp_sent;
	bool out_eos, deferred, reset, reading, out_added, own, sending;
	bool gone;   /* the client reset its side or asked edge to stop */
	bool early;  /* part of its field section came in 0-RTT */
	size_t lost; /* packets with its data declared lost, counted */
	enum outcome why_o;
	uint64_t close_code; /* the client's, at the close */
	struct req r;
};

TAILQ_HEAD(h3s_list, h3s);

struct h3c {
	struct quic_conn *qc;
	nghttp3_conn *h3;
	struct h3s_list streams, work;
	unsigned nactive;
	int depth;
	unsigned char goaway;	/* h3_drain: 1 notice sent, 2 GOAWAY sent */
	bool rx_early;		/* the bytes being read came in 0-RTT */
	uint64_t last_progress; /* ns: a stream's bytes moved to or from
				   the client */
	struct event *stall;	/* the stall and idle check */
};

static void h3_stall_arm(struct h3c *hc);

static struct h3c *h3c_of(const struct quic_conn *qc)
{
	return quic_conn_app(qc);
}

static struct h3s *h3s_of(const struct req *r)
{
	return r->cl_arg;
}

static void h3_post(struct h3s *s, unsigned ev)
{
	s->ev |= ev;
	if (!s->in_work) {
		s->in_work = true;
		TAILQ_INSERT_TAIL(&s->hc->work, s, wlink);
	}
	quic_conn_flush_soon(s->hc->qc);
}

/* edge resets s (both ways), its request ending as o */
static void h3_reset(struct h3s *s, uint64_t code, enum outcome o)
{
	if (s->reset || s->closed)
		return;
	s->reset = true;
	s->why_o = o;
	ngtcp2_conn_shutdown_stream(quic_conn_ngtcp2(s->hc->qc), s->id, code);
	h3_post(s, H3_EV_CLOSED); /* its request ends now */
}

static void h3_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h3s *s = arg;

	(void)fd;
	(void)what;
	if (s->r.active)
		req_timeout(&s->r);
	quic_conn_flush_soon(s->hc->qc);
}

static void h3_btimer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h3s *s = arg;

	(void)fd;
	(void)what;
	if (s->r.active)
		req_body_timeout(&s->r);
	quic_conn_flush_soon(s->hc->qc);
}

/* the proxy took n bytes of s->in: the client's flow control credit for
 * the body bytes among them (as http2.c's h2_in_cb) */
static void h3_in_cb(struct evbuffer *b, const struct evbuffer_cb_info *info,
		     void *arg)
{
	struct h3s *s = arg;
	uint64_t n = info->n_deleted, credit;
	ngtcp2_conn *qc;

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
	if (credit == 0)
		return;
	qc = quic_conn_ngtcp2(s->hc->qc);
	if (!s->closed)
		ngtcp2_conn_extend_max_stream_offset(qc, s->id, credit);
	ngtcp2_conn_extend_max_offset(qc, credit);
	quic_conn_flush_soon(s->hc->qc);
}

static void h3_out_cb(struct evbuffer *b, const struct evbuffer_cb_info *info,
		      void *arg)
{
	struct h3s *s = arg;

	(void)b;
	if (info->n_added == 0)
		return;
	s->out_added = true;
	if (s->deferred && !s->closed) {
		s->deferred = false;
		nghttp3_conn_resume_stream(s->hc->h3, s->id);
	}
	quic_conn_flush_soon(s->hc->qc);
}

static void h3s_free(struct h3s *s)
{
	struct h3c *hc = s->hc;

	TAILQ_REMOVE(&hc->streams, s, link);
	if (s->in_work)
		TAILQ_REMOVE(&hc->work, s, wlink);
	if (s->in) {
		evbuffer_remove_cb(s->in, h3_in_cb, s);
		evbuffer_free(s->in);
	}
	if (s->out) {
		evbuffer_remove_cb(s->out, h3_out_cb, s);
		evbuffer_free(s->out);
	}
	if (!s->closed && hc->h3)
		nghttp3_conn_set_stream_user_data(hc->h3, s->id, NULL);
	if (s->timer)
		event_free(s->timer);
	if (s->btimer)
		event_free(s->btimer);
	h2f_req_free(&s->q);
	if (s->tr_out)
		evbuffer_free(s->tr_out);
	while (s->sent) {
		struct h3blk *k = s->sent;

		s->sent = k->next;
		free(k);
	}
	free(s->r.head);
	free(s);
}

/* free the streams whose request has ended and that nghttp3 is done
 * with */
static void h3_sweep(struct h3c *hc)
{
	struct h3s *s, *next;

	for (s = TAILQ_FIRST(&hc->streams); s; s = next) {
		next = TAILQ_NEXT(s, link);
		if (!s->r.active && s->closed && !s->in_work)
			h3s_free(s);
	}
}

/* ---- the request's client side ----------------------------------------- */

static struct evbuffer *h3_in(const struct req *r)
{
	return h3s_of(r)->in;
}

static struct evbuffer *h3_out(const struct req *r)
{
	return h3s_of(r)->out;
}

static void h3_read(struct req *r, bool on)
{
	h3s_of(r)->reading = on;
}

static bool h3_reading(const struct req *r)
{
	return h3s_of(r)->reading;
}

static void h3_watermarks(struct req *r, size_t read_high, size_t write_low)
{
	(void)read_high; /* the stream's flow control bounds its input */
	h3s_of(r)->write_low = write_low;
}

static bool h3_closed(const struct req *r)
{
	const struct h3s *s = h3s_of(r);

	return s->closed || s->reset || s->gone;
}

static void h3_close_after(struct req *r, bool half_closed)
{
	(void)r;
	(void)half_closed;
}

static bool h3_closing(const struct req *r)
{
	(void)r;
	return false;
}

static struct sockio *h3_take(struct req *r)
{
	(void)r;
	return NULL;
}

static void h3_timer(struct req *r, uint64_t ms)
{
	struct timeval tv;

	evtimer_add(h3s_of(r)->timer, worker_timeout(r->w, ms, &tv));
}

static void h3_timer_stop(struct req *r)
{
	evtimer_del(h3s_of(r)->timer);
}

static void h3_btimer(struct req *r, uint64_t ms)
{
	struct timeval tv = {(time_t)(ms / 1000),
			     (suseconds_t)(ms % 1000) * 1000};

	evtimer_add(h3s_of(r)->btimer, &tv);
}

static void h3_btimer_stop(struct req *r)
{
	evtimer_del(h3s_of(r)->btimer);
}

static void h3_admitted(struct req *r)
{
	(void)r;
}

static void h3_trailers(struct req *r, struct evbuffer *tr)
{
	struct h3s *s = h3s_of(r);
	size_t n = evbuffer_get_length(tr);

	if (s->own || s->tr_out || !(s->tr_out = evbuffer_new()))
		return;
	evbuffer_add(s->tr_out, evbuffer_pullup(tr, (ssize_t)n), n);
}

/* the trailer lines kept (hdr_trailer_next passes them) as fields on
 * stream s, names lowercased in place (nghttp3 copies them): 0 or -1 */
static int h3_submit_trailers(struct h3s *s)
{
	nghttp2_nv nv[H2F_TRAILERS_MAX];
	size_t n = h2f_trailers_nv(s->tr_out, nv, H2F_TRAILERS_MAX);

	if (n == 0 || nghttp3_conn_submit_trailers(
			  s->hc->h3, s->id, (const nghttp3_nv *)nv, n) != 0)
		return -1;
	return 0;
}

/* the response body's source: s->out, kept until acknowledged */
static nghttp3_ssize h3_data_cb(nghttp3_conn *conn, int64_t id,
				nghttp3_vec *vec, size_t veccnt,
				uint32_t *flags, void *user, void *suser)
{
	struct h3s *s = suser;
	struct h3blk *k;
	size_t n;

	(void)conn;
	(void)id;
	(void)user;
	if (!s || veccnt == 0)
		return NGHTTP3_ERR_CALLBACK_FAILURE;
	n = evbuffer_get_length(s->out);
	if (n > H3_READ_MAX)
		n = H3_READ_MAX;
	if (n > 0 && s->sent_bytes >= H3_UNACKED_MAX) {
		s->deferred = true; /* until acknowledgements come */
		return NGHTTP3_ERR_WOULDBLOCK;
	}
	if (n > 0) {
		k = malloc(sizeof(*k) + n);
		if (!k)
			return NGHTTP3_ERR_CALLBACK_FAILURE;
		k->next = NULL;
		k->len = n;
		k->acked = 0;
		evbuffer_remove(s->out, k->data, n);
		if (s->sent_tail)
			s->sent_tail->next = k;
		else
			s->sent = k;
		s->sent_tail = k;
		s->sent_bytes += n;
		s->hc->last_progress = clk_now_ns();
		vec[0].base = k->data;
		vec[0].len = n;
	}
	if (evbuffer_get_length(s->out) == 0 && s->out_eos) {
		*flags |= NGHTTP3_DATA_FLAG_EOF;
		if (s->tr_out && h3_submit_trailers(s) == 0)
			*flags |= NGHTTP3_DATA_FLAG_NO_END_STREAM;
		if (s->sending)
			h3_post(s, H3_EV_DRAINED);
		return n > 0 ? 1 : 0;
	}
	if (s->out_added && evbuffer_get_length(s->out) <= s->write_low) {
		s->out_added = false;
		h3_post(s, H3_EV_DRAINED);
	}
	if (n == 0) {
		s->deferred = true;
		return NGHTTP3_ERR_WOULDBLOCK;
	}
	return 1;
}

static int h3_submit(struct h3s *s, struct hdr_buf *b, bool bodiless)
{
	nghttp2_nv nv[H1_MAX_HEADERS + 16 + HRULE_FIELDS_MAX];
	nghttp3_data_reader dr = {.read_data = h3_data_cb};
	int n;

	if (s->resp_sent || s->closed || s->reset)
		return -1;
	n = h2f_response_nv(b->p, b->len, nv, sizeof(nv) / sizeof(nv[0]));
	if (n < 0)
		return -1;
	if (nghttp3_conn_submit_response(s->hc->h3, s->id,
					 (const nghttp3_nv *)nv, (size_t)n,
					 bodiless ? NULL : &dr) != 0)
		return -1;
	s->resp_sent = true;
	quic_conn_flush_soon(s->hc->qc);
	return 0;
}

static void h3_cont(struct req *r)
{
	struct h3s *s = h3s_of(r);
	nghttp3_nv nv = {(uint8_t *)":status", (uint8_t *)"100", 7, 3,
			 NGHTTP3_NV_FLAG_NONE};

	if (!s->closed && !s->reset &&
	    nghttp3_conn_submit_info(s->hc->h3, s->id, &nv, 1) == 0)
		quic_conn_flush_soon(s->hc->qc);
}

static int h3_respond(struct req *r, const struct h1_response *resp,
		      const char *extra, int64_t cl, bool *chunked, bool *close)
{
	struct h3s *s = h3s_of(r);
	struct hdr_buf b;
	int rc;

	(void)close;
	*chunked = false;
	hdr_buf_init(&b, 0);
	rc = hdr_build_response(&b, resp, r->id, extra, r->resp_ed, cl, false,
				false);
	if (rc == 0)
		rc = h3_submit(s, &b, resp->body == H1_BODY_NONE || cl == 0);
	if (rc == 0)
		r->bytes_out += b.len;
	hdr_buf_free(&b);
	return rc ? -1 : 0;
}

static void h3_error(struct req *r, int status, const char *extra,
		     const char *body, size_t blen, bool close)
{
	struct h3s *s = h3s_of(r);
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
		if (h3_submit(s, &b, bodiless) == 0)
			r->bytes_out += b.len;
	}
	hdr_buf_free(&b);
}

static void h3_ended(struct req *r, bool close)
{
	struct h3s *s = h3s_of(r);
	struct h3c *hc = s->hc;

	(void)close;
	if (--hc->nactive == 0) {
		ngtcp2_conn_set_keep_alive_timeout(quic_conn_ngtcp2(hc->qc), 0);
		hc->last_progress = clk_now_ns(); /* idle from now */
		h3_stall_arm(hc);
	}
	evtimer_del(s->timer);
	evtimer_del(s->btimer);
	/* body bytes nobody will read: their credit back */
	if (s->in_unacked) {
		ngtcp2_conn *nc = quic_conn_ngtcp2(hc->qc);

		if (!s->closed)
			ngtcp2_conn_extend_max_stream_offset(nc, s->id,
							     s->in_unacked);
		ngtcp2_conn_extend_max_offset(nc, s->in_unacked);
		s->in_unacked = 0;
		s->in_framed = 0;
	}
	if (!s->resp_sent || (!s->own && r->outcome != OUTCOME_OK))
		h3_reset(s, NGHTTP3_H3_INTERNAL_ERROR, OUTCOME_INTERNAL_ERROR);
	else if (!s->out_eos) {
		s->out_eos = true;
		if (s->deferred && !s->closed) {
			s->deferred = false;
			nghttp3_conn_resume_stream(hc->h3, s->id);
		}
	}
	quic_conn_flush_soon(hc->qc);
}

static bool h3_pending(struct req *r)
{
	struct h3s *s = h3s_of(r);

	if (s->own || !s->resp_sent || s->closed || s->reset)
		return false;
	if (!s->out_eos) {
		s->out_eos = true;
		if (s->deferred) {
			s->deferred = false;
			nghttp3_conn_resume_stream(s->hc->h3, s->id);
			quic_conn_flush_soon(s->hc->qc);
		}
	}
	s->sending = evbuffer_get_length(s->out) > 0;
	return s->sending;
}

static const struct req_client_ops h3_client = {
    .in = h3_in,
    .out = h3_out,
    .read = h3_read,
    .reading = h3_reading,
    .watermarks = h3_watermarks,
    .closed = h3_closed,
    .close_after = h3_close_after,
    .closing = h3_closing,
    .take = h3_take,
    .timer = h3_timer,
    .timer_stop = h3_timer_stop,
    .btimer = h3_btimer,
    .btimer_stop = h3_btimer_stop,
    .admitted = h3_admitted,
    .cont = h3_cont,
    .respond = h3_respond,
    .error = h3_error,
    .pending = h3_pending,
    .ended = h3_ended,
    .trailers = h3_trailers,
};

/* ---- a connection whose client stalls -------------------------------- */

static uint64_t h3_idle_ms(const struct h3c *hc)
{
	return quic_idle_ms(quic_conn_worker(hc->qc));
}

/* H3_KEEPALIVE_NS, or half the idle timeout in force (the lower of both
 * ends' max_idle_timeout) when that is shorter, but not under
 * H3_KEEPALIVE_MIN_NS: a client's tiny max_idle_timeout would have edged
 * PING it a thousand times a second (it then goes idle, its choice) */
static ngtcp2_duration h3_keepalive_ns(const struct h3c *hc)
{
	ngtcp2_conn *c = quic_conn_ngtcp2(hc->qc);
	const ngtcp2_transport_params *l =
	    ngtcp2_conn_get_local_transport_params(c);
	const ngtcp2_transport_params *r =
	    ngtcp2_conn_get_remote_transport_params(c);
	ngtcp2_duration idle = H3_KEEPALIVE_NS * 2;

	if (l && l->max_idle_timeout && l->max_idle_timeout < idle)
		idle = l->max_idle_timeout;
	if (r && r->max_idle_timeout && r->max_idle_timeout < idle)
		idle = r->max_idle_timeout;
	return idle / 2 < H3_KEEPALIVE_MIN_NS ? H3_KEEPALIVE_MIN_NS : idle / 2;
}

/* whether every request in flight waits for the client: its field
 * section unfinished, or its response held by the client's flow control
 * or acknowledgements (none waits for an upstream, whose own timers
 * run) */
static bool h3_waiting_on_client(const struct h3c *hc)
{
	const struct h3s *s;
	bool any = false;

	for (s = TAILQ_FIRST(&hc->streams); s; s = TAILQ_NEXT(s, link)) {
		if (!s->r.active)
			continue;
		if (s->fields_done &&
		    !(s->resp_sent &&
		      (evbuffer_get_length(s->out) > 0 || s->sent_bytes > 0)))
			return false;
		any = true;
	}
	return any;
}

static void h3_stall_arm(struct h3c *hc)
{
	uint64_t ms = h3_idle_ms(hc) / 4;
	struct timeval tv;

	if (ms < 1000)
		ms = 1000;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	evtimer_add(hc->stall, &tv);
}

/* the keep-alive PINGs keep QUIC's idle timeout away while requests are
 * in flight: a client that stops taking responses (or never finishes a
 * field section) is closed here after timeouts.idle_keepalive without
 * progress; and a client's own PINGs would keep it away from a
 * connection without requests: one is closed here after
 * timeouts.idle_keepalive without a request */
static void h3_stall_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h3c *hc = arg;
	bool idle =
	    clk_now_ns() - hc->last_progress >= h3_idle_ms(hc) * 1000000ULL;

	(void)fd;
	(void)what;
	if (hc->nactive == 0 && idle) {
		log_debug("http3: %s: no request for %llu ms: closed",
			  quic_conn_client_ip(hc->qc),
			  (unsigned long long)h3_idle_ms(hc));
		quic_conn_close(hc->qc, NGHTTP3_H3_NO_ERROR);
		return;
	}
	if (hc->nactive > 0 && idle && h3_waiting_on_client(hc)) {
		log_debug("http3: %s: no progress for %llu ms: closed",
			  quic_conn_client_ip(hc->qc),
			  (unsigned long long)h3_idle_ms(hc));
		quic_conn_close(hc->qc, NGHTTP3_H3_NO_ERROR);
		return;
	}
	h3_stall_arm(hc);
}

/* ---- a stream the client opened ---------------------------------------- */

static struct h3s *h3s_new(struct h3c *hc, int64_t id)
{
	struct quic_conn *qc = hc->qc;
	struct worker *w = quic_conn_worker(qc);
	struct h3s *s = calloc(1, sizeof(*s));
	bool resumed;

	if (!s)
		return NULL;
	s->hc = hc;
	s->id = id;
	s->in = evbuffer_new();
	s->out = evbuffer_new();
	s->timer = evtimer_new(w->base, h3_timer_cb, s);
	s->btimer = evtimer_new(w->base, h3_btimer_cb, s);
	TAILQ_INSERT_TAIL(&hc->streams, s, link);
	if (h2f_req_init(&s->q) || !s->in || !s->out || !s->timer ||
	    !s->btimer) {
		h3s_free(s);
		return NULL;
	}
	evbuffer_add_cb(s->in, h3_in_cb, s);
	evbuffer_add_cb(s->out, h3_out_cb, s);
	s->reading = true;
	s->r.cl = &h3_client;
	s->r.cl_arg = s;
	s->r.w = w;
	s->r.client_ip = quic_conn_client_ip(qc);
	s->r.peer = quic_conn_peer(qc);
	s->r.peer_cidr = quic_conn_peer_cidr(qc);
	s->r.conn_fd = -1;
	s->r.tls = true;
	quic_conn_tls_info(qc, &s->r.tls_version, &s->r.tls_cipher, &resumed);
	s->r.tls_resumed = resumed;
	s->r.http_version = "HTTP/3";
	req_begin(&s->r);
	quic_count(w->id, QUIC_EV_STREAM);
	hc->last_progress = clk_now_ns();
	if (hc->nactive++ == 0) { /* the idle timeout is for idle ones */
		ngtcp2_conn_set_keep_alive_timeout(quic_conn_ngtcp2(qc),
						   h3_keepalive_ns(hc));
		h3_stall_arm(hc);
	}
	return s;
}

/* ---- nghttp3's callbacks ----------------------------------------------- */

static int h3_begin_headers_cb(nghttp3_conn *conn, int64_t id, void *user,
			       void *suser)
{
	struct h3c *hc = user;
	struct h3s *s;

	(void)suser;
	s = h3s_new(hc, id);
	if (!s) {
		ngtcp2_conn_shutdown_stream(quic_conn_ngtcp2(hc->qc), id,
					    NGHTTP3_H3_INTERNAL_ERROR);
		return 0;
	}
	s->early = hc->rx_early;
	nghttp3_conn_set_stream_user_data(conn, id, s);
	return 0;
}

static int h3_recv_header_cb(nghttp3_conn *conn, int64_t id, int32_t token,
			     nghttp3_rcbuf *name, nghttp3_rcbuf *value,
			     uint8_t flags, void *user, void *suser)
{
	struct h3s *s = suser;
	nghttp3_vec n = nghttp3_rcbuf_get_buf(name);
	nghttp3_vec v = nghttp3_rcbuf_get_buf(value);
	int rc;

	(void)conn;
	(void)id;
	(void)token;
	(void)flags;
	(void)user;
	if (!s || s->reset || s->fields_done)
		return 0;
	s->hdr_bytes += n.len + v.len + 32;
	if (s->hdr_bytes >
	    quic_conn_worker(s->hc->qc)->set.http2.max_header_list_size) {
		h3_reset(s, NGHTTP3_H3_EXCESSIVE_LOAD,
			 OUTCOME_HEADERS_TOO_LARGE);
		return 0;
	}
	rc = h2f_req_field(&s->q, n.base, n.len, v.base, v.len);
	if (rc < 0)
		return NGHTTP3_ERR_CALLBACK_FAILURE;
	if (rc > 0) /* a second Host */
		h3_reset(s, NGHTTP3_H3_MESSAGE_ERROR, OUTCOME_BAD_REQUEST);
	return 0;
}

static int h3_end_headers_cb(nghttp3_conn *conn, int64_t id, int fin,
			     void *user, void *suser)
{
	struct h3s *s = suser;

	(void)conn;
	(void)id;
	(void)user;
	if (!s || s->reset || s->fields_done)
		return 0;
	s->fields_done = true;
	s->early |= s->hc->rx_early;
	s->in_eos = fin != 0;
	s->chunked = !s->in_eos && !s->q.has_cl;
	h3_post(s, H3_EV_HEAD);
	return 0;
}

static int h3_recv_data_cb(nghttp3_conn *conn, int64_t id, const uint8_t *data,
			   size_t len, void *user, void *suser)
{
	struct h3s *s = suser;
	struct h3c *hc = user;
	char line[24];
	int n;

	(void)conn;
	if (!s || s->reset || !s->r.active || s->sending) {
		ngtcp2_conn_extend_max_stream_offset(quic_conn_ngtcp2(hc->qc),
						     id, len);
		ngtcp2_conn_extend_max_offset(quic_conn_ngtcp2(hc->qc), len);
		return 0;
	}
	hc->last_progress = clk_now_ns();
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
		h3_post(s, H3_EV_DATA);
	return 0;
}

static int h3_deferred_consume_cb(nghttp3_conn *conn, int64_t id,
				  size_t consumed, void *user, void *suser)
{
	struct h3c *hc = user;

	(void)conn;
	(void)suser;
	ngtcp2_conn_extend_max_stream_offset(quic_conn_ngtcp2(hc->qc), id,
					     consumed);
	ngtcp2_conn_extend_max_offset(quic_conn_ngtcp2(hc->qc), consumed);
	return 0;
}

static int h3_end_stream_cb(nghttp3_conn *conn, int64_t id, void *user,
			    void *suser)
{
	struct h3s *s = suser;

	(void)conn;
	(void)id;
	(void)user;
	if (!s || s->in_eos)
		return 0;
	s->in_eos = true;
	if (s->chunked && s->r.active) {
		evbuffer_add(s->in, "0\r\n\r\n", 5);
		s->in_framed += 5;
	}
	if (s->head_done)
		h3_post(s, H3_EV_DATA);
	return 0;
}

static int h3_acked_cb(nghttp3_conn *conn, int64_t id, uint64_t len, void *user,
		       void *suser)
{
	struct h3s *s = suser;

	(void)conn;
	(void)user;
	if (s) { /* counted as learnt: ngtcp2 forgets it at the close */
		size_t lost = ngtcp2_conn_get_stream_loss_count(
		    quic_conn_ngtcp2(s->hc->qc), id);

		if (lost > s->lost) {
			quic_count_lost(quic_conn_worker(s->hc->qc)->id,
					lost - s->lost);
			s->lost = lost;
		}
	}
	while (s && len > 0 && s->sent) {
		struct h3blk *k = s->sent;
		size_t take = k->len - k->acked;

		if (take > len)
			take = (size_t)len;
		k->acked += take;
		len -= take;
		s->sent_bytes -= take;
		if (k->acked == k->len) {
			s->sent = k->next;
			if (!s->sent)
				s->sent_tail = NULL;
			free(k);
		}
	}
	if (s) {
		s->hc->last_progress = clk_now_ns();
		if (s->deferred && !s->closed &&
		    s->sent_bytes < H3_UNACKED_MAX &&
		    (evbuffer_get_length(s->out) > 0 || s->out_eos)) {
			s->deferred = false;
			nghttp3_conn_resume_stream(s->hc->h3, s->id);
		}
	}
	return 0;
}

static int h3_stream_close_cb(nghttp3_conn *conn, int64_t id, uint64_t app_err,
			      void *user, void *suser)
{
	struct h3c *hc = user;
	struct h3s *s = suser;

	(void)conn;
	/* room for another request stream */
	if (ngtcp2_is_bidi_stream(id))
		ngtcp2_conn_extend_max_streams_bidi(quic_conn_ngtcp2(hc->qc),
						    1);
	if (!s)
		return 0;
	s->closed = true;
	s->close_code = app_err;
	h3_post(s, H3_EV_CLOSED);
	return 0;
}

/* nghttp3 refused what came on a stream (app_err other than
 * H3_NO_ERROR: a malformed message) or is done reading it: its request
 * ends at once, as bad_request when it was refused */
static void h3_refused(struct h3s *s, uint64_t app_err)
{
	if (!s || app_err == NGHTTP3_H3_NO_ERROR || s->reset)
		return;
	s->reset = true;
	s->why_o = OUTCOME_BAD_REQUEST;
	h3_post(s, H3_EV_CLOSED);
}

static int h3_stop_sending_cb(nghttp3_conn *conn, int64_t id, uint64_t app_err,
			      void *user, void *suser)
{
	struct h3c *hc = user;

	(void)conn;
	h3_refused(suser, app_err);
	ngtcp2_conn_shutdown_stream_read(quic_conn_ngtcp2(hc->qc), id, app_err);
	return 0;
}

static int h3_reset_stream_cb(nghttp3_conn *conn, int64_t id, uint64_t app_err,
			      void *user, void *suser)
{
	struct h3c *hc = user;

	(void)conn;
	h3_refused(suser, app_err);
	ngtcp2_conn_shutdown_stream_write(quic_conn_ngtcp2(hc->qc), id,
					  app_err);
	return 0;
}

/* ---- the requests hear of it -------------------------------------------- */

static void h3_head(struct h3s *s)
{
	struct req *r = &s->r;
	const struct h1_limits *h1 = &r->w->set.h1;
	size_t len;
	int rc;

	s->head_done = true;
	rc = h2f_req_head(&s->q, s->chunked, &r->head, &len);
	if (rc) {
		req_end(r,
			rc == H2F_HOST_MISMATCH || rc == H2F_NO_PSEUDO
			    ? OUTCOME_BAD_REQUEST
			: rc == H2F_CONNECT ? OUTCOME_METHOD_NOT_ALLOWED
					    : OUTCOME_INTERNAL_ERROR,
			NULL);
		return;
	}
	h2f_req_free(&s->q);
	r->head_len = len;
	r->bytes_in = len;
	rc = h1_parse_request(r->head, len, h1, &r->h);
	if (rc != (int)len) {
		free(r->head);
		r->head = NULL;
		req_end(r,
			rc < 0 ? outcome_of_parse(r->h.h.status)
			       : OUTCOME_BAD_REQUEST,
			NULL);
		return;
	}
	if (s->early) {
		/* a replay of it could reach the upstream: safe methods only
		 * (RFC 8470), the others asked again after the handshake */
		if (r->h.method != H1_M_GET && r->h.method != H1_M_HEAD &&
		    r->h.method != H1_M_OPTIONS) {
			req_end(r, OUTCOME_TOO_EARLY, NULL);
			return;
		}
		r->early_data = true;
		quic_count(r->w->id, QUIC_EV_EARLY_REQUEST);
	}
	req_head(r); /* a chunked body's end: h3_end_stream_cb */
}

static void h3_closed_stream(struct h3s *s)
{
	struct req *r = &s->r;

	if (s->reset && s->why_o != OUTCOME_OK) {
		req_end(r, s->why_o, NULL);
		return;
	}
	if (!s->closed && !s->gone)
		return; /* an event of a reset of edge's own, already ended */
	req_client_gone(r, false);
	if (r->active)
		req_end(r, OUTCOME_CLIENT_CLOSED, NULL);
}

/* hand each stream's news to its request, outside ngtcp2 and nghttp3 */
static void h3_work(struct h3c *hc)
{
	struct h3s *s;
	unsigned ev;

	hc->depth++;
	while ((s = TAILQ_FIRST(&hc->work))) {
		TAILQ_REMOVE(&hc->work, s, wlink);
		s->in_work = false;
		ev = s->ev;
		s->ev = 0;
		if ((ev & H3_EV_HEAD) && s->r.active && !s->reset)
			h3_head(s);
		if ((ev & H3_EV_DATA) && s->r.active && !(ev & H3_EV_HEAD))
			req_client_readable(&s->r);
		if ((ev & H3_EV_DRAINED) && s->r.active)
			req_client_drained(&s->r);
		if ((ev & H3_EV_CLOSED) && s->r.active)
			h3_closed_stream(s);
	}
	hc->depth--;
	h3_sweep(hc);
}

/* ---- the transport's application --------------------------------------- */

static int h3_start(struct quic_conn *qc)
{
	static const nghttp3_callbacks cb = {
	    .acked_stream_data = h3_acked_cb,
	    .stream_close = h3_stream_close_cb,
	    .recv_data = h3_recv_data_cb,
	    .deferred_consume = h3_deferred_consume_cb,
	    .begin_headers = h3_begin_headers_cb,
	    .recv_header = h3_recv_header_cb,
	    .end_headers = h3_end_headers_cb,
	    .stop_sending = h3_stop_sending_cb,
	    .end_stream = h3_end_stream_cb,
	    .reset_stream = h3_reset_stream_cb,
	};
	ngtcp2_conn *nc = quic_conn_ngtcp2(qc);
	struct worker *w = quic_conn_worker(qc);
	nghttp3_settings st;
	struct h3c *hc;
	int64_t ctrl, enc, dec;

	if (ngtcp2_conn_get_max_local_streams_uni(nc) < 3)
		return -1;
	hc = calloc(1, sizeof(*hc));
	if (!hc)
		return -1;
	hc->qc = qc;
	TAILQ_INIT(&hc->streams);
	TAILQ_INIT(&hc->work);
	quic_conn_set_app(qc, hc);
	hc->stall = evtimer_new(w->base, h3_stall_cb, hc);
	if (!hc->stall)
		return -1;
	hc->last_progress = clk_now_ns();
	h3_stall_arm(hc);
	nghttp3_settings_default(&st);
	st.max_field_section_size = w->set.http2.max_header_list_size;
	st.qpack_max_dtable_capacity = 4096;
	st.qpack_blocked_streams = 100;
	if (nghttp3_conn_server_new(&hc->h3, &cb, &st, NULL, hc))
		return -1;
	nghttp3_conn_set_max_client_streams_bidi(
	    hc->h3, w->set.http2.max_concurrent_streams);
	if (ngtcp2_conn_open_uni_stream(nc, &ctrl, NULL) ||
	    nghttp3_conn_bind_control_stream(hc->h3, ctrl) ||
	    ngtcp2_conn_open_uni_stream(nc, &enc, NULL) ||
	    ngtcp2_conn_open_uni_stream(nc, &dec, NULL) ||
	    nghttp3_conn_bind_qpack_streams(hc->h3, enc, dec))
		return -1;
	return 0;
}

static ssize_t h3_recv(struct quic_conn *qc, int64_t id, const uint8_t *data,
		       size_t len, bool fin, bool early)
{
	struct h3c *hc = h3c_of(qc);
	nghttp3_ssize n;

	hc->depth++;
	hc->rx_early = early;
	n = nghttp3_conn_read_stream(hc->h3, id, data, len, fin);
	hc->rx_early = false;
	hc->depth--;
	if (n < 0) {
		quic_conn_app_error(
		    qc, nghttp3_err_infer_quic_app_error_code((int)n));
		return -1;
	}
	return (ssize_t)n;
}

static int h3_acked(struct quic_conn *qc, int64_t id, uint64_t len)
{
	return nghttp3_conn_add_ack_offset(h3c_of(qc)->h3, id, len) ? -1 : 0;
}

static int h3_closed_q(struct quic_conn *qc, int64_t id, uint64_t app_err)
{
	struct h3c *hc = h3c_of(qc);
	int rv = nghttp3_conn_close_stream(
	    hc->h3, id, app_err ? app_err : NGHTTP3_H3_NO_ERROR);

	if (rv == NGHTTP3_ERR_STREAM_NOT_FOUND) {
		if (ngtcp2_is_bidi_stream(id))
			ngtcp2_conn_extend_max_streams_bidi(
			    quic_conn_ngtcp2(qc), 1);
		return 0;
	}
	if (rv) {
		quic_conn_app_error(qc,
				    nghttp3_err_infer_quic_app_error_code(rv));
		return -1;
	}
	return 0;
}

static struct h3s *h3_find(struct h3c *hc, int64_t id)
{
	struct h3s *s;

	TAILQ_FOREACH(s, &hc->streams, link)
	if (s->id == id)
		return s;
	return NULL;
}

/* the client reset its sending side (a body it will not finish) or
 * asked edge to stop sending: the request ends as the client leaving,
 * as an HTTP/2 client's RST_STREAM ends it */
static int h3_reset_q(struct quic_conn *qc, int64_t id, bool stop_sending)
{
	struct h3c *hc = h3c_of(qc);
	struct h3s *s = h3_find(hc, id);

	if (s && !s->gone && (stop_sending || !s->in_eos)) {
		s->gone = true;
		h3_post(s, H3_EV_CLOSED);
	}
	if (stop_sending)
		return 0; /* nghttp3 learns of the write side's end */
	return nghttp3_conn_shutdown_stream_read(hc->h3, id) ? -1 : 0;
}

static int h3_unblock(struct quic_conn *qc, int64_t id)
{
	return nghttp3_conn_unblock_stream(h3c_of(qc)->h3, id) ? -1 : 0;
}

static void h3_max_streams(struct quic_conn *qc, uint64_t max)
{
	nghttp3_conn_set_max_client_streams_bidi(h3c_of(qc)->h3, max);
}

static ssize_t h3_writev(struct quic_conn *qc, int64_t *id, int *fin,
			 ngtcp2_vec *vec, size_t n)
{
	struct h3c *hc = h3c_of(qc);
	nghttp3_ssize r;

	r = nghttp3_conn_writev_stream(hc->h3, id, fin, (nghttp3_vec *)vec, n);
	if (r < 0) {
		quic_conn_app_error(
		    qc, nghttp3_err_infer_quic_app_error_code((int)r));
		return -1;
	}
	return (ssize_t)r;
}

/* the streams' news, before a write: a response submitted now goes
 * out in it */
static void h3_work_q(struct quic_conn *qc)
{
	struct h3c *hc = h3c_of(qc);

	if (hc->depth == 0 && !TAILQ_EMPTY(&hc->work))
		h3_work(hc);
}

static void h3_blocked(struct quic_conn *qc, int64_t id)
{
	nghttp3_conn_block_stream(h3c_of(qc)->h3, id);
}

static void h3_shut_write(struct quic_conn *qc, int64_t id)
{
	nghttp3_conn_shutdown_stream_write(h3c_of(qc)->h3, id);
}

static int h3_written(struct quic_conn *qc, int64_t id, size_t n)
{
	return nghttp3_conn_add_write_offset(h3c_of(qc)->h3, id, n) ? -1 : 0;
}

/* The graceful end in two steps (RFC 9114 section 5.2): a first call
 * sends the notice (a GOAWAY naming the largest ID: the client opens no
 * more streams), a later one (the next drain tick) the GOAWAY with the
 * last stream taken; a request the client sent before it saw the notice
 * is served, never refused. */
static void h3_drain(struct quic_conn *qc)
{
	struct h3c *hc = h3c_of(qc);

	if (hc->goaway == 2)
		return;
	if (hc->goaway++ == 0)
		nghttp3_conn_submit_shutdown_notice(hc->h3);
	else
		nghttp3_conn_shutdown(hc->h3);
}

static bool h3_busy(const struct quic_conn *qc)
{
	return h3c_of(qc)->nactive > 0;
}

static void h3_free(struct quic_conn *qc)
{
	struct h3c *hc = h3c_of(qc);
	struct h3s *s;

	hc->depth++;
	TAILQ_FOREACH(s, &hc->streams, link)
	if (s->r.active) {
		s->closed = true;
		req_end(&s->r, OUTCOME_CLIENT_CLOSED, NULL);
	}
	hc->depth--;
	while ((s = TAILQ_FIRST(&hc->streams))) {
		s->closed = true;
		h3s_free(s);
	}
	if (hc->h3)
		nghttp3_conn_del(hc->h3);
	if (hc->stall)
		event_free(hc->stall);
	free(hc);
	quic_conn_set_app(qc, NULL);
}

const struct quic_app_ops http3_app = {
    .start = h3_start,
    .recv = h3_recv,
    .acked = h3_acked,
    .closed = h3_closed_q,
    .reset = h3_reset_q,
    .unblock = h3_unblock,
    .max_streams = h3_max_streams,
    .work = h3_work_q,
    .writev = h3_writev,
    .blocked = h3_blocked,
    .shut_write = h3_shut_write,
    .written = h3_written,
    .drain = h3_drain,
    .busy = h3_busy,
    .free = h3_free,
};
