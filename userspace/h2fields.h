/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * h2fields.h - HTTP/2 field lists and edge's HTTP/1.1 text, both ways,
 * for the HTTP/2 adapter (http2.c) and HTTP/2 upstreams (h2up.c): so
 * that one strict parser (h1.c) and one header policy (hdr.c) serve
 * every protocol, HTTP/2 fields are turned into an HTTP/1.1 head on the
 * way in and edge's own HTTP/1.1 heads and trailer lines into fields on
 * the way out.
 *
 * The heads read here are edge's own making ("Name: value" CRLF lines
 * after a start line, a blank line at the end). Fields made from them
 * point into the head, whose names are lowercased in place: the head
 * must outlive the nghttp2 call that takes them (which copies).
 *
 * Thread-safety: none needed (no shared state).
 */
#ifndef EDGE_H2FIELDS_H
#define EDGE_H2FIELDS_H

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stddef.h>

#include "h1.h"

struct evbuffer;

/* ---- in: an HTTP/2 request's header block as an HTTP/1.1 head ---- */

struct h2f_req {
	char *method, *path, *authority, *host;
	struct evbuffer *cookie; /* the cookie fields, joined by "; " */
	struct evbuffer *hdr;	 /* the other regular fields, as lines */
	bool has_cl;		 /* a content-length field came */
};

/* What h2f_req_head refuses (besides -ENOMEM). */
enum h2f_refusal {
	H2F_NO_PSEUDO = 1, /* :method or :path missing */
	H2F_HOST_MISMATCH, /* :authority and Host both, and different */
	H2F_CONNECT,	   /* CONNECT: not served */
};

/* 0 or -ENOMEM (q half made: h2f_req_free it). */
int h2f_req_init(struct h2f_req *q);
void h2f_req_free(struct h2f_req *q);

/*
 * One field of the request's header block (nghttp2 has checked its
 * characters, the pseudo-headers' order and repeats): :method, :path,
 * :authority kept (:scheme dropped: X-Forwarded-Proto is edge's), Host
 * kept apart, cookie fields joined (RFC 9113 section 8.2.3), the rest as
 * lines. Returns 0, 1 when the field makes the request bad (a second
 * Host), or -ENOMEM.
 */
int h2f_req_field(struct h2f_req *q, const uint8_t *name, size_t namelen,
		  const uint8_t *value, size_t valuelen);

/*
 * The HTTP/1.1 head q's fields make: "METHOD PATH HTTP/1.1", Host from
 * :authority (else Host), the cookie line, the fields, and
 * "Transfer-Encoding: chunked" when chunked (a body of unknown length,
 * framed by the adapter). 0 with *out (malloc'ed, *len bytes), or an
 * enum h2f_refusal, or -ENOMEM. The cookie and field lines move into the
 * head (not copied): q is only to be freed after.
 */
int h2f_req_head(struct h2f_req *q, bool chunked, char **out, size_t *len);

/* ---- out: edge's HTTP/1.1 text as HTTP/2 fields ---- */

/*
 * The next "Name: value" line at *pos (before end; *pos moves past it):
 * 1 with the name lowercased in place and the value without its leading
 * blanks and CRLF, 0 at the blank line or the end, -1 for a line without
 * a colon.
 */
int h2f_line_next(char **pos, char *end, char **name, size_t *namelen,
		  char **value, size_t *valuelen);

/*
 * The response head p (edge's "HTTP/1.1 NNN ..." head) as fields in nv
 * (max of them): :status first, the fields HTTP/2 has no place for left
 * out (connection, keep-alive, proxy-connection, transfer-encoding,
 * upgrade), x-request-id never indexed. The count, or -1.
 */
int h2f_response_nv(char *p, size_t len, nghttp2_nv *nv, size_t max);

/*
 * The request head p (edge's "METHOD PATH HTTP/1.1" head, for an HTTP/2
 * upstream) as fields in nv (max of them, at least 5): :method, :scheme
 * (https when tls), :path, :authority (Host, else authority), then the
 * fields but those HTTP/2 has no place for (connection, keep-alive,
 * proxy-connection, transfer-encoding, upgrade, http2-settings, Host, a
 * te other than "trailers"), and "te: trailers" when the head had none
 * and nv has room (edge takes trailers; gRPC servers want it said). The
 * count, or -1.
 */
int h2f_request_nv(char *p, size_t len, bool tls, const char *authority,
		   nghttp2_nv *nv, size_t max);

/*
 * The trailer lines in tr (edge's "Name: value" CRLF lines: those
 * hdr_trailer_next passes) as fields in nv, at most max, their names
 * lower-cased in place (tr's bytes: nv points into them; HTTP/3 wants
 * them lower-case). The count.
 */
#define H2F_TRAILERS_MAX (H1_MAX_HEADERS + 32)
size_t h2f_trailers_nv(struct evbuffer *tr, nghttp2_nv *nv, size_t max);

/*
 * Submit tr's trailer lines (h2f_trailers_nv) as stream id's trailers on
 * ng, at most H2F_TRAILERS_MAX fields. 0, or -1 when none passed or
 * nghttp2 refused (the caller then ends the body without them).
 */
int h2f_submit_trailers(nghttp2_session *ng, int32_t id, struct evbuffer *tr);

#endif /* EDGE_H2FIELDS_H */
