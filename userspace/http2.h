/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * http2.h - the HTTP/2 adapter of a client connection (conn.h's struct
 * conn_ops), on nghttp2's framing (no I/O of its: the connection's sockio
 * carries the bytes). A connection becomes HTTP/2 at its first bytes:
 * over TLS when ALPN chose "h2", in cleartext when they are the
 * connection preface and http2.cleartext is on (prior knowledge; no
 * Upgrade: h2c).
 *
 * Each stream is one request of the stream core (req.h): its head is the
 * HTTP/1.1 head the stream's fields make (":method :path HTTP/1.1",
 * Host from :authority, the cookies joined, the other fields as sent),
 * parsed by the same strict parser as an HTTP/1.1 client's, so that both
 * get the same route, admission and header policy; its body is handed on
 * as an HTTP/1.1 body (Content-Length as sent, else chunked); the
 * response goes back as HEADERS and DATA, edge's own answers too. What
 * HTTP/2 forbids is refused by nghttp2's messaging checks or here, as a
 * stream error (RST_STREAM PROTOCOL_ERROR), counted, before anything goes
 * upstream. Request bodies are read only as fast as the proxy moves them
 * (the client's window is given back as they leave, nghttp2_session_
 * consume); responses wait for the client's window.
 *
 * Limits: http2.max_concurrent_streams (more: REFUSED_STREAM), the
 * decoded header list against http2.max_header_list_size (RST_STREAM),
 * nghttp2's stream reset rate (rapid reset), CONTINUATION frames per
 * header block, SETTINGS entries and queued PING/SETTINGS acks (GOAWAY),
 * and timeouts.idle_keepalive without progress: an idle connection gets
 * GOAWAY, one whose streams wait for the client's window is closed
 * (window_stalled). A drain sends GOAWAY with the last stream taken; the
 * open streams finish.
 *
 * A connection without a stream and without bytes either way for
 * CONN_PARK_MS is parked (conn_park_keep): its session and transport are
 * kept, its struct conn, buffers and events freed, until its next byte,
 * its idle deadline (then GOAWAY) or a drain (GOAWAY).
 */
#ifndef EDGE_HTTP2_H
#define EDGE_HTTP2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "conn.h"

/* The connection preface's first bytes as an HTTP/1.1 parser sees them. */
#define HTTP2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define HTTP2_PREFACE_LEN 24

/* Whether p (n bytes) is the preface (1), a prefix of it (0: wait for
 * more), or not it (-1). */
int http2_preface(const char *p, size_t n);

/* Make c (CONN_HEAD, nothing parsed yet) an HTTP/2 connection: its
 * session with w's http2 settings, SETTINGS sent, what is buffered
 * parsed. On failure c is closed. */
void http2_start(struct conn *c);

extern const struct conn_ops http2_ops;

/* Error codes counted by name (RFC 9113 section 7), and the reasons edge
 * resets a stream or ends a connection itself. */
#define HTTP2_CODES 14
enum http2_why {
	HTTP2_WHY_INVALID_HEADER = 0, /* CR, LF, NUL, uppercase, ... */
	HTTP2_WHY_HEADER_LIST,	      /* over max_header_list_size */
	HTTP2_WHY_HOST_MISMATCH,      /* :authority and Host differ */
	HTTP2_WHY_IDLE,		      /* GOAWAY: no stream, no progress */
	HTTP2_WHY_WINDOW_STALLED,     /* closed: streams wait for a window */
	HTTP2_WHY_DRAIN,	      /* GOAWAY: edge drains */
	HTTP2_WHY_FLOOD,	/* PING/SETTINGS acks or resets piling up */
	HTTP2_WHY_CONTINUATION, /* CONTINUATION frames past the limit */
	HTTP2_WHY_SETTINGS,	/* a SETTINGS frame with too many entries */
	HTTP2_WHY_PREFACE,	/* not the connection preface */
	HTTP2_WHY_PROTOCOL,	/* another connection error */
	HTTP2_WHY_MAX
};

struct metrics;

/* Register the HTTP/2 series in m (before the workers start): connections
 * (edge_http2_connections_total, edge_http2_connections open now),
 * idle ones whose session is released (edge_http2_connections_released)
 * and sessions made again (edge_http2_sessions_renewed_total),
 * streams (edge_http2_streams_total), RST_STREAM and GOAWAY frames by
 * direction and error code (edge_http2_resets_total,
 * edge_http2_goaways_total), and edge's own reasons
 * (edge_http2_refusals_total). 0 or -ENOMEM. Without it nothing is
 * counted. */
int http2_metrics(struct metrics *m);

/* The same counts as a JSON object (edgectl status). */
json_t *http2_counts_json(void);

/* Count (for http2.c): a RST_STREAM or GOAWAY frame sent or received
 * with code; one of edge's reasons; a connection made (+1) or gone (-1);
 * a stream begun. */
void http2_count_frame(bool sent, bool goaway, uint32_t code);
void http2_count_why(enum http2_why w);
void http2_count_conn(int delta);
void http2_count_stream(void);
/* An idle connection's session released (+1), or made again or ended
 * released (-1). */
void http2_count_released(int delta);
/* A released session made again. */
void http2_count_renewed(void);

#endif /* EDGE_HTTP2_H */
