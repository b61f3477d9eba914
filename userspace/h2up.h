/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * h2up.h - HTTP/2 to upstreams: h2c:// endpoints (prior knowledge) and
 * https:// ones whose ALPN chose h2. A session is nghttp2's client on one
 * connection, shared by its worker's requests to the same endpoint and
 * TLS profile (tag) up to the server's SETTINGS_MAX_CONCURRENT_STREAMS
 * (until its SETTINGS came: H2UP_STREAMS_FIRST, or less when another
 * session to the same address was told less); beyond that a request
 * opens another connection. Nothing here chooses an endpoint or connects:
 * upconn.h makes the connection, the proxy attaches its request.
 *
 * A stream carries one request: its head, edge's HTTP/1.1 head as the
 * proxy built it, turned into HTTP/2 fields (Host as :authority, the
 * fields HTTP/2 has no place for left out, "te: trailers" added), its
 * body's bytes (unframed) from out and its trailers, and brings back the
 * response as an HTTP/1.1 head in in,
 * parsed by the proxy with the strict parser an HTTP/1.1 upstream's goes
 * through, then the body's bytes; interim 1xx heads are dropped. The
 * server's window for a response is given back as the proxy takes its
 * bytes from in, so a stream holds at most H2UP_STREAM_WINDOW of it; its
 * trailers are kept for the proxy (h2up_stream_trailers).
 *
 * Its owner hears of it through its callback (H2UP_EV_*), never from
 * inside nghttp2 and never from inside an h2up_* call: the events of a
 * loop turn come together after the session has read or written.
 *
 * GOAWAY from the server: the session takes no new stream; the streams
 * above its last stream id, and those never sent, end H2UP_EV_CLOSED
 * with h2up_stream_refused true (the server never processed them: safe
 * to retry anywhere); the others run to their end. The connection's
 * end or failure ends every open stream (refused only when never sent).
 * A session without streams is closed after timeouts.idle_keepalive
 * (GOAWAY), at once on a draining worker.
 */
#ifndef EDGE_H2UP_H
#define EDGE_H2UP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config_check.h"

struct evbuffer;
struct sockio;
struct ssl_st;
struct worker;
struct worker_service;

struct h2up_set;    /* a worker's sessions */
struct h2up_sess;   /* one connection */
struct h2up_stream; /* one request on it */

/* Streams a session takes before the server's SETTINGS say how many. */
#define H2UP_STREAMS_FIRST 100
/* ... and at most, whatever they say. */
#define H2UP_STREAMS_MAX 1000
/* A stream's receive window (bytes), and the connection's. */
#define H2UP_STREAM_WINDOW (256u * 1024)
#define H2UP_CONN_WINDOW (16u * 1024 * 1024)
/* A response's header block (and its trailers') at most, bytes as RFC
 * 9113 section 6.5.2 counts them (announced, and enforced). */
#define H2UP_HEADER_LIST_MAX (64u * 1024)
/* The request body's out drained to this: H2UP_EV_DRAINED. */
#define H2UP_LOW_WATER (16u * 1024)

/* What a stream's owner is told, one event a call, in this order (none
 * after it has closed the stream). */
#define H2UP_EV_READY 0x01   /* the session is up: submit the request */
#define H2UP_EV_HTTP1 0x02   /* ALPN chose http/1.1: h2up_stream_take */
#define H2UP_EV_HEAD 0x04    /* the response head is in in */
#define H2UP_EV_DATA 0x08    /* body bytes came into in */
#define H2UP_EV_END 0x10     /* the response is complete (END_STREAM) */
#define H2UP_EV_DRAINED 0x20 /* out drained to H2UP_LOW_WATER */
#define H2UP_EV_CLOSED                                                         \
	0x40 /* it ended before END: h2up_stream_* say                         \
		why; nothing more comes */

typedef void (*h2up_cb)(struct h2up_stream *st, unsigned ev, void *arg);

/* The worker service that keeps w's sessions (worker.h): made at its
 * start, idle sessions closed at its drain, all at its end. */
extern const struct worker_service h2up_service;

/* A session to endpoint a (h2c:// or https://) made with tag (its TLS
 * profile and name, 0: plain) that takes one more stream: ready or
 * connecting, no GOAWAY; NULL when none. */
struct h2up_sess *h2up_find(struct worker *w, const struct config_addr *a,
			    uint64_t tag);

/* Whether a's https:// endpoint (with tag) chose http/1.1 by ALPN in the
 * last minute: its requests go over HTTP/1.1 without asking again. */
bool h2up_known_h1(struct worker *w, const struct config_addr *a, uint64_t tag,
		   uint64_t now_ns);

/* A session on uio, a new connection of upconn's to a that is about to
 * connect (it owns uio from now on; its callbacks are the session's);
 * tls: its ALPN decides whether it is HTTP/2 (else its first stream
 * takes it as HTTP/1.1, the others are refused). NULL when out of
 * memory (uio freed). */
struct h2up_sess *h2up_sess_new(struct worker *w, const struct config_addr *a,
				uint64_t tag, struct sockio *uio, bool tls);

/* The session's connection, to connect (upconn_connect). */
struct sockio *h2up_sess_io(struct h2up_sess *s);

/* Close a session whose connect failed at once (it has no stream). */
void h2up_sess_abort(struct h2up_sess *s);

/* A stream of s for an owner (cb with arg), not submitted yet. NULL when
 * out of memory. */
struct h2up_stream *h2up_stream_new(struct h2up_sess *s, h2up_cb cb, void *arg);

/* Give st to another owner (cb with arg): the events from now on go
 * there, the ones of the current call's rest included. */
void h2up_stream_setcb(struct h2up_stream *st, h2up_cb cb, void *arg);

/* Whether its session is up (submit now; else H2UP_EV_READY comes). */
bool h2up_stream_ready(const struct h2up_stream *st);

/* Whether its session served a stream before this one. */
bool h2up_stream_reused(const struct h2up_stream *st);

/*
 * Submit the request: head (len bytes) is edge's HTTP/1.1 request head
 * (changed in place), body whether a body follows in out (its end said
 * by h2up_stream_body_end). 0, or -1 (the session takes no more streams:
 * the request may go elsewhere, nothing was sent).
 */
int h2up_stream_submit(struct h2up_stream *st, char *head, size_t len,
		       bool body);

/* The response as it comes (head, then body bytes), and the request
 * body's bytes to send. */
struct evbuffer *h2up_stream_in(const struct h2up_stream *st);
struct evbuffer *h2up_stream_out(const struct h2up_stream *st);

/* The request body is complete in out: END_STREAM once it has gone,
 * after trailers (NULL or empty: none; lines as struct body's, the
 * fields that may be trailers sent, hdr_trailer_next). */
void h2up_stream_body_end(struct h2up_stream *st, struct evbuffer *trailers);

/* Whether the response's HEADERS ended the stream (no body, no
 * trailers: a gRPC "trailers-only" answer), known with H2UP_EV_HEAD. */
bool h2up_stream_bodiless(const struct h2up_stream *st);

/* The response's trailers once H2UP_EV_END came ("name: value\r\n"
 * lines), NULL when it had none. */
struct evbuffer *h2up_stream_trailers(const struct h2up_stream *st);

/* Why a stream ended H2UP_EV_CLOSED: refused (never processed by the
 * server: REFUSED_STREAM, above a GOAWAY's last stream, never sent, or
 * its connection chose http/1.1); the RST_STREAM or GOAWAY error code
 * (0: none); the connection's errno (0: none); the connection's TLS
 * failure, written to buf (false: it was not TLS's). */
bool h2up_stream_refused(const struct h2up_stream *st);
uint32_t h2up_stream_code(const struct h2up_stream *st);
int h2up_stream_err(const struct h2up_stream *st);
bool h2up_stream_tls_failure(const struct h2up_stream *st, char *buf,
			     size_t len);

/* The RFC 9113 name of an error code ("REFUSED_STREAM"). */
const char *h2up_code_name(uint32_t code);

/* Its connection's SSL (NULL: h2c). */
struct ssl_st *h2up_stream_ssl(const struct h2up_stream *st);

/* H2UP_EV_HTTP1: the connection, connected, for the owner to speak
 * HTTP/1.1 on (its callbacks to set); st is freed. */
struct sockio *h2up_stream_take(struct h2up_stream *st);

/* The owner is done with st (freed): a stream still open is reset
 * (CANCEL); its session may close if it was the last one. */
void h2up_stream_close(struct h2up_stream *st);

#endif /* EDGE_H2UP_H */
