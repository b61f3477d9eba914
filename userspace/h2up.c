// SPDX-License-Identifier: BSD-2-Clause
/*
 * h2up.c - HTTP/2 to upstreams (h2up.h): a worker's client sessions, each
 * nghttp2's on one sockio, and the streams of the requests on them.
 *
 * nghttp2's callbacks only record what happened on a stream (its ev
 * bits, the stream queued in its session's work list); the owners hear
 * of it once nghttp2 has returned (sess_leave), so that a request that
 * ends, retries or closes its stream does so outside nghttp2. A session
 * is freed only outside its own calls (depth 0) and without streams:
 * a stream's pointer to its session stays valid until it is closed.
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
#include "h1.h"
#include "h2up.h"
#include "hrule.h"
#include "h2fields.h"
#include "hdr.h"
#include "log.h"
#include "sockio.h"
#include "tls.h"
#include "worker.h"

/* The session's output queued in its sockio at most before nghttp2 is
 * asked for more; the write callback comes at the low mark. */
#define H2UP_OUT_HIGH (128u * 1024)
#define H2UP_OUT_LOW (32u * 1024)
/* How long an https:// endpoint's choice of http/1.1 is remembered, and
 * how many such endpoints a worker remembers. */
#define H2UP_H1_MEMORY_NS (60ull * 1000000000ull)
#define H2UP_H1_SLOTS 32
/* Bytes a field costs in a header list beyond its name and value. */
#define H2UP_FIELD_OVERHEAD 32
/* Fields of a request at most (the head's, and the pseudo-fields). */
#define H2UP_NV_MAX (H1_MAX_HEADERS + 32 + HRULE_FIELDS_MAX)

struct h2up_sess;

struct h2up_stream {
	TAILQ_ENTRY(h2up_stream) link;	/* in s->streams */
	TAILQ_ENTRY(h2up_stream) wlink; /* in s->work while ev */
	struct h2up_sess *s;
	h2up_cb cb;
	void *arg;
	int32_t id;   /* 0: not submitted */
	unsigned ev;  /* H2UP_EV_* to tell */
	bool in_work; /* in s->work */
	struct evbuffer *in, *out;
	struct evbuffer *hdr;	 /* the response's fields so far, as lines */
	struct evbuffer *tr_in;	 /* its trailers, as lines (NULL: none) */
	struct evbuffer *tr_out; /* the request's trailers to send (NULL) */
	struct evbuffer_cb_entry *in_cb, *out_cb;
	size_t hdr_bytes; /* the header block's size so far */
	size_t uncounted; /* bytes of in that are its head, not DATA */
	int status;	  /* its :status */
	bool sent;	  /* its HEADERS went */
	bool body;	  /* a body follows the head */
	bool body_end;	  /* ... and is complete in out */
	bool deferred;	  /* the data source waits for out */
	bool want_drain;  /* out went above H2UP_LOW_WATER */
	bool got_head;	  /* its final response head came */
	bool ended;	  /* END_STREAM came */
	bool head_end;	  /* ... on the response's HEADERS: no body */
	bool closed;	  /* it ended otherwise (H2UP_EV_CLOSED) */
	bool ng_closed;	  /* nghttp2 has closed it */
	bool refused;	  /* never processed by the server */
	bool take;	  /* H2UP_EV_HTTP1: it takes the connection */
	bool reused;	  /* its session had served before it came */
	bool orphan;	  /* its owner left while its HEADERS waited to go:
			     nghttp2 holds it until it cancels them */
	uint32_t code;	  /* RST_STREAM's or GOAWAY's code */
	int err;	  /* the connection's errno */
};

TAILQ_HEAD(h2up_stream_list, h2up_stream);

struct h2up_sess {
	TAILQ_ENTRY(h2up_sess) link; /* in the set's sessions */
	struct h2up_set *set;
	struct worker *w;
	struct config_addr addr;
	uint64_t tag;
	struct sockio *io; /* NULL once failed or taken */
	nghttp2_session *ng;
	struct h2up_stream_list streams, work;
	struct h2up_stream *cur; /* the stream being told, NULL once gone */
	unsigned nstreams;
	struct event *flush;	 /* sess_flush_cb from the loop */
	struct sockio_soon soon; /* ... or at the end of the turn */
	struct event *idle;	 /* no stream for timeouts.idle_keepalive */
	int depth;		 /* inside its calls */
	bool tls;		 /* its ALPN decides */
	bool up;		 /* connected, HTTP/2 */
	bool dead;		 /* failed, closed or handed over */
	bool goaway;		 /* takes no new stream */
	bool settings;		 /* the server's SETTINGS came */
	bool served;		 /* a stream has been submitted on it */
	bool tls_failed;	 /* tls_why says why its TLS failed */
	int32_t goaway_last;	 /* a GOAWAY's last stream id */
	char tls_why[200];
	/* the streams it takes until its SETTINGS come: H2UP_STREAMS_FIRST,
	 * or what another session to its address was told when less */
	uint32_t first_room;
};

TAILQ_HEAD(h2up_sess_list, h2up_sess);

/* An https:// endpoint that chose http/1.1 (h2up_known_h1). */
struct h2up_h1 {
	char text[CONFIG_ADDR_STR_MAX];
	uint64_t tag;
	uint64_t until; /* monotonic ns; 0: a free slot */
};

struct h2up_set {
	struct h2up_sess_list sessions;
	nghttp2_session_callbacks *cbs;
	nghttp2_option *opt;
	bool draining;
	unsigned h1_next;
	struct h2up_h1 h1[H2UP_H1_SLOTS];
};

static void sess_leave(struct h2up_sess *s);

static bool addr_same(const struct config_addr *a, const struct config_addr *b)
{
	return a->scheme == b->scheme && strcmp(a->text, b->text) == 0;
}

/* ---- what owners are told ------------------------------------------------
 */

static void flush_soon(struct h2up_sess *s)
{
	if (s->flush && !s->depth)
		sockio_soon(&s->soon, s->flush);
}

static void post(struct h2up_stream *st, unsigned ev)
{
	struct h2up_sess *s = st->s;

	st->ev |= ev;
	if (!st->in_work) {
		st->in_work = true;
		TAILQ_INSERT_TAIL(&s->work, st, wlink);
	}
	flush_soon(s);
}

/* Tell the owners, an event at a time, in H2UP_EV_* order, until the
 * stream is closed (an owner may close it, or open others). */
static void sess_work(struct h2up_sess *s)
{
	struct h2up_stream *st;
	unsigned ev, bit;

	while ((st = TAILQ_FIRST(&s->work))) {
		TAILQ_REMOVE(&s->work, st, wlink);
		st->in_work = false;
		ev = st->ev;
		st->ev = 0;
		s->cur = st;
		for (bit = 1; bit <= H2UP_EV_CLOSED && s->cur == st; bit <<= 1)
			if (ev & bit)
				st->cb(st, bit, st->arg);
		s->cur = NULL;
	}
}

/* ---- the session's I/O ----------------------------------------------------
 */

static void sess_fail(struct h2up_sess *s, int err);

/* What nghttp2 has to send, into the connection's output (up to
 * H2UP_OUT_HIGH queued). */
static void sess_send(struct h2up_sess *s)
{
	struct evbuffer *out;
	const uint8_t *p;
	ssize_t n;

	if (!s->up || s->dead)
		return;
	out = sockio_output(s->io);
	while (evbuffer_get_length(out) < H2UP_OUT_HIGH) {
		n = nghttp2_session_mem_send(s->ng, &p);
		if (n < 0) {
			sess_fail(s, EPROTO);
			return;
		}
		if (n == 0)
			break;
		if (evbuffer_add(out, p, (size_t)n)) {
			sess_fail(s, ENOMEM);
			return;
		}
	}
}

static void sess_enter(struct h2up_sess *s)
{
	s->depth++;
}

static void stream_release(struct h2up_stream *st);

static void sess_free(struct h2up_sess *s)
{
	struct h2up_stream *st;

	/* orphans only (or any, at the worker's end) */
	while ((st = TAILQ_FIRST(&s->streams))) {
		TAILQ_REMOVE(&s->streams, st, link);
		stream_release(st);
	}
	TAILQ_REMOVE(&s->set->sessions, s, link);
	if (s->ng)
		nghttp2_session_del(s->ng);
	if (s->io)
		sockio_free(s->io);
	sockio_soon_cancel(&s->soon);
	if (s->flush)
		event_free(s->flush);
	if (s->idle)
		event_free(s->idle);
	free(s);
}

/* Close an idle or drained session: GOAWAY, written now if the socket
 * takes it, then the connection closed. */
static void sess_close(struct h2up_sess *s)
{
	if (s->up && !s->dead) {
		nghttp2_session_terminate_session(s->ng, NGHTTP2_NO_ERROR);
		sess_send(s);
		if (s->io)
			sockio_flush(s->io);
	}
	s->dead = true;
}

/* The end of a call into s: the output written, the owners told, and s
 * freed or its idle clock armed as its streams and state say. */
static void sess_leave(struct h2up_sess *s)
{
	struct timeval tv;
	uint64_t ms;

	if (s->depth == 1) {
		for (;;) {
			sess_send(s);
			/* nghttp2 ended the session (its GOAWAY after an
			 * error of the server's, or both sides done): the
			 * streams are told in this loop */
			if (s->up && !s->dead &&
			    !nghttp2_session_want_read(s->ng) &&
			    !nghttp2_session_want_write(s->ng))
				sess_fail(s, 0);
			/* nobody waits for a connection still being made */
			if (s->nstreams == 0 && !s->up && !s->dead)
				sess_fail(s, ECANCELED);
			if (TAILQ_EMPTY(&s->work))
				break;
			sess_work(s);
		}
		if (s->nstreams == 0 && !s->dead &&
		    (s->goaway || s->set->draining))
			sess_close(s);
	}
	if (--s->depth > 0)
		return;
	if (s->nstreams == 0 && s->dead) {
		sess_free(s);
		return;
	}
	if (s->nstreams == 0 && s->up && s->idle &&
	    !evtimer_pending(s->idle, NULL)) {
		ms = s->w->set.timeouts.idle_keepalive_ms;
		tv.tv_sec = (time_t)(ms / 1000);
		tv.tv_usec = (suseconds_t)(ms % 1000 * 1000);
		evtimer_add(s->idle, &tv);
	}
}

/* The connection failed or ended (err, 0: a clean end): every open
 * stream ends H2UP_EV_CLOSED, refused when it never went. */
static void sess_fail(struct h2up_sess *s, int err)
{
	struct h2up_stream *st;

	if (s->dead)
		return;
	s->dead = true;
	if (!s->up && s->tls && s->io)
		s->tls_failed = tls_transport_failure(
		    sockio_transport(s->io), s->tls_why, sizeof(s->tls_why));
	for (st = TAILQ_FIRST(&s->streams); st; st = TAILQ_NEXT(st, link)) {
		if (st->ended || st->closed || st->orphan)
			continue;
		st->closed = true;
		st->err = err ? err : ECONNRESET;
		if (!st->sent)
			st->refused = true;
		post(st, H2UP_EV_CLOSED);
	}
	if (s->io) {
		sockio_free(s->io);
		s->io = NULL;
	}
}

static void sess_read_cb(struct sockio *io, void *arg)
{
	struct h2up_sess *s = arg;
	struct evbuffer *in = sockio_input(io);
	struct evbuffer_iovec v[8];
	ssize_t rv;
	int n, i;

	sess_enter(s);
	while (!s->dead && evbuffer_get_length(in) > 0) {
		n = evbuffer_peek(in, -1, NULL, v, 8);
		if (n > 8)
			n = 8;
		for (i = 0; i < n && !s->dead; i++) {
			rv = nghttp2_session_mem_recv(s->ng, v[i].iov_base,
						      v[i].iov_len);
			if (rv < 0) {
				log_debug("upstream %s: HTTP/2: %s",
					  s->addr.text,
					  nghttp2_strerror((int)rv));
				sess_fail(s, EPROTO);
				break;
			}
		}
		if (!s->dead)
			for (i = 0; i < n; i++)
				evbuffer_drain(in, v[i].iov_len);
	}
	sess_leave(s);
}

static void sess_write_cb(struct sockio *io, void *arg)
{
	(void)io;
	sess_enter(arg);
	sess_leave(arg);
}

/* The connection is up (a TLS one's handshake done): HTTP/2 when ALPN
 * chose h2 (or h2c://); else the first stream takes it as HTTP/1.1 and
 * the others are refused, to go over HTTP/1.1 from now on. */
static void sess_up(struct h2up_sess *s)
{
	nghttp2_settings_entry iv[] = {
	    {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
	    {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2UP_STREAM_WINDOW},
	    {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, H2UP_HEADER_LIST_MAX},
	};
	struct h2up_set *set = s->set;
	struct h2up_stream *st, *first;
	struct h2up_h1 *m;

	if (s->tls && !tls_transport_h2(sockio_transport(s->io))) {
		m = &set->h1[set->h1_next++ % H2UP_H1_SLOTS];
		memcpy(m->text, s->addr.text, sizeof(m->text));
		m->tag = s->tag;
		m->until = clk_now_ns() + H2UP_H1_MEMORY_NS;
		s->dead = true;
		first = TAILQ_FIRST(&s->streams);
		for (st = TAILQ_FIRST(&s->streams); st;
		     st = TAILQ_NEXT(st, link)) {
			if (st == first) {
				st->take = true;
				post(st, H2UP_EV_HTTP1);
				continue;
			}
			st->closed = true;
			st->refused = true;
			post(st, H2UP_EV_CLOSED);
		}
		if (!first) {
			sockio_free(s->io);
			s->io = NULL;
		}
		return;
	}
	if (nghttp2_session_client_new2(&s->ng, set->cbs, s, set->opt)) {
		sess_fail(s, ENOMEM);
		return;
	}
	if (nghttp2_submit_settings(s->ng, NGHTTP2_FLAG_NONE, iv,
				    sizeof(iv) / sizeof(iv[0])) ||
	    nghttp2_session_set_local_window_size(s->ng, NGHTTP2_FLAG_NONE, 0,
						  H2UP_CONN_WINDOW)) {
		sess_fail(s, ENOMEM);
		return;
	}
	s->up = true;
	evtimer_del(s->idle);
	sockio_set_read_all(s->io, true);
	sockio_set_watermarks(s->io, 0, H2UP_OUT_LOW);
	sockio_enable(s->io, EV_READ | EV_WRITE);
	for (st = TAILQ_FIRST(&s->streams); st; st = TAILQ_NEXT(st, link))
		post(st, H2UP_EV_READY);
}

static void sess_event_cb(struct sockio *io, short what, void *arg)
{
	struct h2up_sess *s = arg;
	int err = what & SOCKIO_ERROR ? errno : 0;

	(void)io;
	sess_enter(s);
	if (what & SOCKIO_CONNECTED)
		sess_up(s);
	else if (!(what & SOCKIO_TIMEOUT))
		sess_fail(s, err ? err : ECONNRESET);
	sess_leave(s);
}

static void sess_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	sess_enter(arg);
	sess_leave(arg);
}

static void sess_idle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct h2up_sess *s = arg;

	(void)fd;
	(void)what;
	sess_enter(s);
	if (!s->up) /* its connect's bound: timeouts.upstream_connect */
		sess_fail(s, ETIMEDOUT);
	else if (s->nstreams == 0)
		sess_close(s);
	sess_leave(s);
}

/* ---- nghttp2's callbacks --------------------------------------------------
 */

/* The stream id is, NULL when its owner has left. */
static struct h2up_stream *stream_of(struct h2up_sess *s, int32_t id)
{
	struct h2up_stream *st =
	    nghttp2_session_get_stream_user_data(s->ng, id);

	return st && !st->orphan ? st : NULL;
}

/* A stream submitted but not opened yet is not nghttp2's to name. */
static struct h2up_stream *stream_find(struct h2up_sess *s, int32_t id)
{
	struct h2up_stream *st;

	for (st = TAILQ_FIRST(&s->streams); st; st = TAILQ_NEXT(st, link))
		if (st->id == id)
			return st;
	return NULL;
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame,
			    void *user)
{
	struct h2up_stream *st = stream_of(user, frame->hd.stream_id);

	(void)ng;
	if (st)
		st->hdr_bytes = 0;
	return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame,
		     const uint8_t *name, size_t namelen, const uint8_t *value,
		     size_t valuelen, uint8_t flags, void *user)
{
	struct h2up_stream *st = stream_of(user, frame->hd.stream_id);

	(void)ng;
	(void)flags;
	if (!st || frame->hd.type != NGHTTP2_HEADERS)
		return 0;
	st->hdr_bytes += namelen + valuelen + H2UP_FIELD_OVERHEAD;
	if (st->hdr_bytes > H2UP_HEADER_LIST_MAX)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* reset */
	if (st->got_head) {				      /* trailers */
		if (namelen > 0 && name[0] == ':')
			return 0;
		if (!st->tr_in && !(st->tr_in = evbuffer_new()))
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		if (evbuffer_add(st->tr_in, name, namelen) ||
		    evbuffer_add(st->tr_in, ": ", 2) ||
		    evbuffer_add(st->tr_in, value, valuelen) ||
		    evbuffer_add(st->tr_in, "\r\n", 2))
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		return 0;
	}
	if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
		if (valuelen != 3)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		st->status = (value[0] - '0') * 100 + (value[1] - '0') * 10 +
			     (value[2] - '0');
		if (st->status < 100 || st->status > 599)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		return 0;
	}
	if (namelen > 0 && name[0] == ':')
		return 0;
	if (evbuffer_add(st->hdr, name, namelen) ||
	    evbuffer_add(st->hdr, ": ", 2) ||
	    evbuffer_add(st->hdr, value, valuelen) ||
	    evbuffer_add(st->hdr, "\r\n", 2))
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	return 0;
}

/* The final response's head, as HTTP/1.1, into st->in. */
static int stream_head(struct h2up_stream *st)
{
	size_t before = evbuffer_get_length(st->in);

	if (evbuffer_add_printf(st->in, "HTTP/1.1 %03d\r\n", st->status) < 0 ||
	    evbuffer_add_buffer(st->in, st->hdr) ||
	    evbuffer_add(st->in, "\r\n", 2))
		return -1;
	/* (in is empty: the head goes before any DATA) taken by the proxy,
	 * it is no window the server gave */
	st->uncounted = evbuffer_get_length(st->in) - before;
	st->got_head = true;
	post(st, H2UP_EV_HEAD);
	return 0;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame,
			 void *user)
{
	struct h2up_sess *s = user;
	struct h2up_stream *st;

	(void)ng;
	switch (frame->hd.type) {
	case NGHTTP2_SETTINGS:
		if (!(frame->hd.flags & NGHTTP2_FLAG_ACK))
			s->settings = true;
		return 0;
	case NGHTTP2_GOAWAY:
		s->goaway = true;
		s->goaway_last = frame->goaway.last_stream_id;
		log_debug("upstream %s: GOAWAY %s, last stream %d",
			  s->addr.text,
			  h2up_code_name(frame->goaway.error_code),
			  frame->goaway.last_stream_id);
		return 0;
	case NGHTTP2_HEADERS:
	case NGHTTP2_DATA:
		break;
	default:
		return 0;
	}
	st = stream_of(s, frame->hd.stream_id);
	if (!st)
		return 0;
	if (frame->hd.type == NGHTTP2_HEADERS && !st->got_head) {
		if (st->status < 200)
			evbuffer_drain(st->hdr, evbuffer_get_length(st->hdr));
		else if (stream_head(st))
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		else if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
			st->head_end = true; /* the answer in one frame */
	}
	if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && st->got_head) {
		st->ended = true;
		post(st, H2UP_EV_END);
	}
	return 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id,
			 const uint8_t *data, size_t len, void *user)
{
	struct h2up_stream *st = stream_of(user, id);

	(void)flags;
	if (!st || st->closed) { /* its owner left: the window given back */
		nghttp2_session_consume(ng, id, len);
		return 0;
	}
	if (evbuffer_add(st->in, data, len))
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	post(st, H2UP_EV_DATA);
	return 0;
}

static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *frame,
			 void *user)
{
	struct h2up_stream *st;

	(void)ng;
	if (frame->hd.type != NGHTTP2_HEADERS)
		return 0;
	st = stream_of(user, frame->hd.stream_id);
	if (st)
		st->sent = true;
	return 0;
}

static int on_frame_not_send(nghttp2_session *ng, const nghttp2_frame *frame,
			     int lib_error, void *user)
{
	struct h2up_sess *s = user;
	struct h2up_stream *st;

	(void)ng;
	(void)lib_error;
	if (frame->hd.type != NGHTTP2_HEADERS)
		return 0;
	st = stream_find(s, frame->hd.stream_id);
	if (!st || st->orphan || st->sent || st->closed || st->ended)
		return 0;
	/* after a GOAWAY, or the stream ids ran out: never sent */
	s->goaway = true;
	st->closed = true;
	st->refused = true;
	post(st, H2UP_EV_CLOSED);
	return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code,
			   void *user)
{
	struct h2up_sess *s = user;
	struct h2up_stream *st = nghttp2_session_get_stream_user_data(ng, id);

	if (st && st->orphan) { /* nghttp2 is done with it */
		TAILQ_REMOVE(&s->streams, st, link);
		stream_release(st);
		return 0;
	}
	if (!st)
		return 0;
	st->ng_closed = true;
	if (st->ended || st->closed)
		return 0;
	st->closed = true;
	st->code = code;
	if (code == NGHTTP2_REFUSED_STREAM || !st->sent ||
	    (s->goaway && id > s->goaway_last))
		st->refused = true;
	post(st, H2UP_EV_CLOSED);
	return 0;
}

/* The request body's data source: st->out, its end once body_end. */
static ssize_t data_cb(nghttp2_session *ng, int32_t id, uint8_t *buf,
		       size_t length, uint32_t *flags, nghttp2_data_source *src,
		       void *user)
{
	struct h2up_stream *st = stream_of(user, id);
	size_t n;

	(void)ng;
	(void)src;
	if (!st)
		return NGHTTP2_ERR_DEFERRED; /* reset already */
	n = (size_t)evbuffer_remove(st->out, buf, length);
	if (evbuffer_get_length(st->out) == 0 && st->body_end) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		if (st->tr_out &&
		    h2f_submit_trailers(st->s->ng, st->id, st->tr_out) == 0)
			*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
		return (ssize_t)n;
	}
	if (st->want_drain && evbuffer_get_length(st->out) <= H2UP_LOW_WATER) {
		st->want_drain = false;
		post(st, H2UP_EV_DRAINED);
	}
	if (n == 0) {
		st->deferred = true;
		return NGHTTP2_ERR_DEFERRED;
	}
	return (ssize_t)n;
}

/* ---- the set --------------------------------------------------------------
 */

static int h2up_worker_init(struct worker *w, struct errbuf *err)
{
	struct h2up_set *set = calloc(1, sizeof(*set));
	nghttp2_session_callbacks *cb;

	if (!set || nghttp2_session_callbacks_new(&set->cbs) ||
	    nghttp2_option_new(&set->opt)) {
		if (set && set->cbs)
			nghttp2_session_callbacks_del(set->cbs);
		free(set);
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	TAILQ_INIT(&set->sessions);
	cb = set->cbs;
	nghttp2_session_callbacks_set_on_begin_headers_callback(
	    cb, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
	    cb, on_data_chunk);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
	nghttp2_session_callbacks_set_on_frame_not_send_callback(
	    cb, on_frame_not_send);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb,
							       on_stream_close);
	nghttp2_option_set_no_auto_window_update(set->opt, 1);
	nghttp2_option_set_peer_max_concurrent_streams(set->opt,
						       H2UP_STREAMS_FIRST);
	w->h2up = set;
	return 0;
}

static void h2up_worker_drain(struct worker *w)
{
	struct h2up_sess *s, *next;

	if (!w->h2up)
		return;
	w->h2up->draining = true;
	for (s = TAILQ_FIRST(&w->h2up->sessions); s; s = next) {
		next = TAILQ_NEXT(s, link);
		if (s->nstreams > 0 || s->depth)
			continue;
		sess_close(s);
		sess_free(s);
	}
}

static void h2up_worker_free(struct worker *w)
{
	struct h2up_set *set = w->h2up;
	struct h2up_sess *s;

	if (!set)
		return;
	/* the requests have ended: no stream is left but an orphan's */
	while ((s = TAILQ_FIRST(&set->sessions))) {
		sess_free(s);
	}
	nghttp2_session_callbacks_del(set->cbs);
	nghttp2_option_del(set->opt);
	free(set);
	w->h2up = NULL;
}

const struct worker_service h2up_service = {
    .name = "h2up",
    .init = h2up_worker_init,
    .drain = h2up_worker_drain,
    .free = h2up_worker_free,
};

/* How many streams s takes at once: what the server's SETTINGS said
 * (H2UP_STREAMS_MAX at most), s->first_room until they come. */
static unsigned sess_room(const struct h2up_sess *s)
{
	uint32_t max = s->first_room;

	if (s->up && s->settings) {
		max = nghttp2_session_get_remote_settings(
		    s->ng, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
		if (max > H2UP_STREAMS_MAX)
			max = H2UP_STREAMS_MAX;
	}
	return max;
}

/* The streams a new session to a takes before its server's SETTINGS
 * come: H2UP_STREAMS_FIRST, or fewer when a session of set to the same
 * address has been told fewer (a server's limit is the same on its next
 * connection: the requests sent before its SETTINGS are read must not
 * exceed it). */
static uint32_t sess_first_room(const struct h2up_set *set,
				const struct config_addr *a)
{
	uint32_t room = H2UP_STREAMS_FIRST, max;
	const struct h2up_sess *s;

	for (s = TAILQ_FIRST(&set->sessions); s; s = TAILQ_NEXT(s, link)) {
		if (!s->up || !s->settings || !s->ng || !addr_same(&s->addr, a))
			continue;
		max = nghttp2_session_get_remote_settings(
		    s->ng, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
		if (max < room)
			room = max;
	}
	return room;
}

struct h2up_sess *h2up_find(struct worker *w, const struct config_addr *a,
			    uint64_t tag)
{
	struct h2up_sess *s;

	if (!w->h2up)
		return NULL;
	for (s = TAILQ_FIRST(&w->h2up->sessions); s; s = TAILQ_NEXT(s, link))
		if (!s->dead && !s->goaway && s->tag == tag &&
		    addr_same(&s->addr, a) && s->nstreams < sess_room(s))
			return s;
	return NULL;
}

bool h2up_known_h1(struct worker *w, const struct config_addr *a, uint64_t tag,
		   uint64_t now_ns)
{
	const struct h2up_h1 *m;
	unsigned i;

	if (!w->h2up)
		return true;
	for (i = 0; i < H2UP_H1_SLOTS; i++) {
		m = &w->h2up->h1[i];
		if (m->until > now_ns && m->tag == tag &&
		    strcmp(m->text, a->text) == 0)
			return true;
	}
	return false;
}

struct h2up_sess *h2up_sess_new(struct worker *w, const struct config_addr *a,
				uint64_t tag, struct sockio *uio, bool tls)
{
	struct h2up_sess *s = calloc(1, sizeof(*s));

	if (!s || !w->h2up) {
		free(s);
		sockio_free(uio);
		return NULL;
	}
	s->set = w->h2up;
	s->w = w;
	s->addr = *a;
	s->tag = tag;
	s->io = uio;
	s->tls = tls;
	s->first_room = sess_first_room(s->set, a);
	TAILQ_INIT(&s->streams);
	TAILQ_INIT(&s->work);
	TAILQ_INSERT_TAIL(&s->set->sessions, s, link);
	s->flush = event_new(w->base, -1, 0, sess_flush_cb, s);
	s->idle = evtimer_new(w->base, sess_idle_cb, s);
	if (!s->flush || !s->idle) {
		sess_free(s);
		return NULL;
	}
	sockio_setcb(uio, sess_read_cb, sess_write_cb, sess_event_cb, s);
	{
		uint64_t ms = w->set.timeouts.upstream_connect_ms;
		struct timeval tv = {(time_t)(ms / 1000),
				     (suseconds_t)(ms % 1000 * 1000)};

		evtimer_add(s->idle, &tv); /* the connect's bound */
	}
	return s;
}

struct sockio *h2up_sess_io(struct h2up_sess *s)
{
	return s->io;
}

void h2up_sess_abort(struct h2up_sess *s)
{
	if (s->nstreams == 0 && !s->depth)
		sess_free(s);
	else
		sess_fail(s, ECONNREFUSED);
}

/* ---- streams --------------------------------------------------------------
 */

/* Bytes the owner took from in: the server's window given back. */
static void stream_in_cb(struct evbuffer *b,
			 const struct evbuffer_cb_info *info, void *arg)
{
	struct h2up_stream *st = arg;
	struct h2up_sess *s = st->s;
	size_t n = info->n_deleted, k;

	(void)b;
	k = n < st->uncounted ? n : st->uncounted;
	st->uncounted -= k;
	n -= k;
	if (!n || !st->id || s->dead || !s->ng)
		return;
	nghttp2_session_consume(s->ng, st->id, n);
	flush_soon(s);
}

/* Bytes the owner added to out: the data source goes on. */
static void stream_out_cb(struct evbuffer *b,
			  const struct evbuffer_cb_info *info, void *arg)
{
	struct h2up_stream *st = arg;
	struct h2up_sess *s = st->s;

	if (!info->n_added)
		return;
	if (evbuffer_get_length(b) > H2UP_LOW_WATER)
		st->want_drain = true;
	if (st->deferred && st->id && !s->dead) {
		st->deferred = false;
		nghttp2_session_resume_data(s->ng, st->id);
	}
	flush_soon(s);
}

void h2up_stream_setcb(struct h2up_stream *st, h2up_cb cb, void *arg)
{
	st->cb = cb;
	st->arg = arg;
}

struct h2up_stream *h2up_stream_new(struct h2up_sess *s, h2up_cb cb, void *arg)
{
	struct h2up_stream *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->s = s;
	st->cb = cb;
	st->arg = arg;
	st->in = evbuffer_new();
	st->out = evbuffer_new();
	st->hdr = evbuffer_new();
	if (!st->in || !st->out || !st->hdr)
		goto fail;
	st->in_cb = evbuffer_add_cb(st->in, stream_in_cb, st);
	st->out_cb = evbuffer_add_cb(st->out, stream_out_cb, st);
	if (!st->in_cb || !st->out_cb)
		goto fail;
	TAILQ_INSERT_TAIL(&s->streams, st, link);
	s->nstreams++;
	st->reused = s->served;
	if (s->idle && s->up)
		evtimer_del(s->idle);
	return st;
fail:
	if (st->in)
		evbuffer_free(st->in);
	if (st->out)
		evbuffer_free(st->out);
	if (st->hdr)
		evbuffer_free(st->hdr);
	free(st);
	return NULL;
}

bool h2up_stream_ready(const struct h2up_stream *st)
{
	return st->s->up && !st->s->dead;
}

bool h2up_stream_reused(const struct h2up_stream *st)
{
	return st->reused;
}

int h2up_stream_submit(struct h2up_stream *st, char *head, size_t len,
		       bool body)
{
	struct h2up_sess *s = st->s;
	nghttp2_nv nv[H2UP_NV_MAX];
	nghttp2_data_provider dp = {.source.ptr = NULL,
				    .read_callback = data_cb};
	int32_t id;
	int n;

	if (!s->up || s->dead || s->goaway)
		return -1;
	n = h2f_request_nv(head, len, s->tls, s->addr.text, nv, H2UP_NV_MAX);
	if (n < 0)
		return -1;
	st->body = body;
	id = nghttp2_submit_request(s->ng, NULL, nv, (size_t)n,
				    body ? &dp : NULL, st);
	if (id < 0) {
		s->goaway = true; /* ids ran out, or out of memory */
		return -1;
	}
	st->id = id;
	s->served = true;
	flush_soon(s);
	return 0;
}

struct evbuffer *h2up_stream_in(const struct h2up_stream *st)
{
	return st->in;
}

struct evbuffer *h2up_stream_out(const struct h2up_stream *st)
{
	return st->out;
}

void h2up_stream_body_end(struct h2up_stream *st, struct evbuffer *trailers)
{
	struct h2up_sess *s = st->s;

	size_t n = trailers ? evbuffer_get_length(trailers) : 0;

	/* a copy (4 KiB at most: the chunked decoder's trailer_max) */
	if (n && !st->tr_out && (st->tr_out = evbuffer_new()))
		evbuffer_add(st->tr_out, evbuffer_pullup(trailers, (ssize_t)n),
			     n);
	st->body_end = true;
	if (st->deferred && st->id && !s->dead) {
		st->deferred = false;
		nghttp2_session_resume_data(s->ng, st->id);
	}
	flush_soon(s);
}

bool h2up_stream_bodiless(const struct h2up_stream *st)
{
	return st->head_end;
}

struct evbuffer *h2up_stream_trailers(const struct h2up_stream *st)
{
	return st->tr_in;
}

bool h2up_stream_refused(const struct h2up_stream *st)
{
	return st->refused;
}

uint32_t h2up_stream_code(const struct h2up_stream *st)
{
	return st->code;
}

int h2up_stream_err(const struct h2up_stream *st)
{
	return st->err;
}

bool h2up_stream_tls_failure(const struct h2up_stream *st, char *buf,
			     size_t len)
{
	if (!st->s->tls_failed)
		return false;
	snprintf(buf, len, "%s", st->s->tls_why);
	return true;
}

const char *h2up_code_name(uint32_t code)
{
	static const char *const names[] = {"NO_ERROR",
					    "PROTOCOL_ERROR",
					    "INTERNAL_ERROR",
					    "FLOW_CONTROL_ERROR",
					    "SETTINGS_TIMEOUT",
					    "STREAM_CLOSED",
					    "FRAME_SIZE_ERROR",
					    "REFUSED_STREAM",
					    "CANCEL",
					    "COMPRESSION_ERROR",
					    "CONNECT_ERROR",
					    "ENHANCE_YOUR_CALM",
					    "INADEQUATE_SECURITY",
					    "HTTP_1_1_REQUIRED"};

	return code < sizeof(names) / sizeof(names[0]) ? names[code]
						       : "UNKNOWN";
}

struct ssl_st *h2up_stream_ssl(const struct h2up_stream *st)
{
	return st->s->io ? tls_transport_ssl(sockio_transport(st->s->io))
			 : NULL;
}

/* Its buffers and itself freed (out of every list already). */
static void stream_release(struct h2up_stream *st)
{
	if (st->in_cb)
		evbuffer_remove_cb_entry(st->in, st->in_cb);
	if (st->out_cb)
		evbuffer_remove_cb_entry(st->out, st->out_cb);
	evbuffer_free(st->in);
	evbuffer_free(st->out);
	evbuffer_free(st->hdr);
	if (st->tr_in)
		evbuffer_free(st->tr_in);
	if (st->tr_out)
		evbuffer_free(st->tr_out);
	free(st);
}

/* Its owner is gone: out of its session's work and count; freed, or kept
 * as an orphan (in s->streams) until nghttp2 lets go of it. */
static void stream_drop(struct h2up_stream *st, bool orphan)
{
	struct h2up_sess *s = st->s;

	if (st->in_work)
		TAILQ_REMOVE(&s->work, st, wlink);
	st->in_work = false;
	if (s->cur == st)
		s->cur = NULL;
	s->nstreams--;
	if (orphan) {
		st->orphan = true;
		return;
	}
	TAILQ_REMOVE(&s->streams, st, link);
	stream_release(st);
}

struct sockio *h2up_stream_take(struct h2up_stream *st)
{
	struct h2up_sess *s = st->s;
	struct sockio *io = s->io;

	s->io = NULL;
	sess_enter(s);
	stream_drop(st, false);
	sess_leave(s);
	return io;
}

void h2up_stream_close(struct h2up_stream *st)
{
	struct h2up_sess *s = st->s;
	bool orphan = false;

	sess_enter(s);
	if (st->id && !s->dead && s->ng) {
		if (!st->ng_closed) {
			/* open: nghttp2 forgets it; its HEADERS still
			 * waiting: they are cancelled, and nghttp2 holds
			 * it until then */
			if (nghttp2_session_find_stream(s->ng, st->id))
				nghttp2_session_set_stream_user_data(
				    s->ng, st->id, NULL);
			else
				orphan = true;
			nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE,
						  st->id, NGHTTP2_CANCEL);
		}
		/* what it had not taken of the response: the window back */
		if (evbuffer_get_length(st->in) > st->uncounted)
			nghttp2_session_consume(s->ng, st->id,
						evbuffer_get_length(st->in) -
						    st->uncounted);
	}
	stream_drop(st, orphan);
	sess_leave(s);
}
