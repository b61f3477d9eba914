/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hdr.h - header rules for the Forward and Respond stages: which fields
 * are hop-by-hop or edge's own, request ids, and a bounded builder that
 * writes the rebuilt head sent upstream (or to the client).
 *
 * Pure apart from hdr_request_id_new (OpenSSL's RNG) and the builder's
 * allocation. Framing is never passed through: the builder drops every
 * Content-Length, Transfer-Encoding and hop-by-hop field and writes the
 * framing edge chose. docs/http.md has the rules.
 */
#ifndef EDGE_HDR_H
#define EDGE_HDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cidr.h"
#include "h1.h"

/* Longest X-Request-ID kept from a client; length of a generated one. */
#define HDR_REQUEST_ID_MAX 128
#define HDR_REQUEST_ID_LEN 32

/* Default hard cap of a built head. */
#define HDR_BUF_MAX 65536

/* A growing output buffer with a hard cap. Once an append fails, every
 * later one fails too (err keeps the first error), so a builder can check
 * once at the end. */
/* Bytes a head builder holds before it allocates: a usual head fits. */
#define HDR_BUF_INLINE 1024

/* A growing byte buffer for a head being built. p points into the
 * structure itself until it outgrows HDR_BUF_INLINE: do not copy one. */
struct hdr_buf {
	char *p;
	size_t len;
	size_t cap;
	size_t max;
	int err; /* 0, -ENOMEM or -E2BIG */
	char inl[HDR_BUF_INLINE];
};

/*
 * Header rules applied to a head being built (hrule.h makes them): every
 * field the builder would write, the client's or upstream's or edge's
 * own (but X-Request-ID and the framing), is left out when drop() says
 * so; add() appends the rules' own before the framing. Edits chain.
 */
struct hdr_edit {
	bool (*drop)(const struct hdr_edit *e, const char *name, size_t n);
	void (*add)(const struct hdr_edit *e, struct hdr_buf *b);
	/* another edit applied with this one (NULL: none): a field any of
	 * them drops is dropped; each adds its own, this one's first */
	const struct hdr_edit *next;
};

/* What edge adds to a request it forwards. NULL strings are left out. */
struct hdr_fwd {
	const char *request_id; /* valid client id or a new one */
	const char *project_id;
	const char *environment_id;
	const char *deployment_id;
	const char *client_ip; /* the client's address, text */
	/* the peer's (appended to a trusted peer's X-Forwarded-For; NULL:
	 * client_ip): the load balancer whose list named the client */
	const char *peer_ip;
	const char *proto;	 /* "http" or "https" */
	bool xff_trusted;	 /* peer is a trusted proxy: its XFF is kept
				    (hdr_xff_append), else replaced; its
				    other address fields kept, else dropped */
	bool tunnel;		 /* forwarding an upgrade: keep Upgrade */
	const char *via;	 /* edge's Via member (hdr_via_init), or NULL */
	const char *via_proto;	 /* the client's protocol version, its
				    received-protocol ("1.0", "1.1", "2");
				    NULL: "1.1" */
	bool early_data;	 /* Early-Data: 1 (RFC 8470), unless the
				    client sent one */
	const char *traceparent; /* edge's (hdr_traceparent); the client's
				    is never sent */
	bool tracestate;	 /* the client's tracestate goes on */
	const char *path;	 /* path to send instead of r's (prefix
				    stripped), or NULL */
	size_t path_len;
	int64_t content_length; /* body framing edge sends: >= 0 a length, */
	bool chunked;		/* or edge's own chunking, or no body */
	const struct hdr_edit *edit; /* header rules, or NULL */
};

/* Start an empty buffer that may grow to max bytes (0: HDR_BUF_MAX). */
void hdr_buf_init(struct hdr_buf *b, size_t max);

/* Release the buffer's memory; accepts NULL. */
void hdr_buf_free(struct hdr_buf *b);

/* Append n bytes. Returns 0, -ENOMEM or -E2BIG (over max; nothing
 * appended). */
int hdr_buf_add(struct hdr_buf *b, const char *s, size_t n);

/* Append a NUL-terminated string; NULL appends nothing. Same returns. */
int hdr_buf_str(struct hdr_buf *b, const char *s);

/* Append "name: value\r\n". Same returns. */
int hdr_buf_field(struct hdr_buf *b, const char *name, const char *value,
		  size_t value_len);

/* Bytes hdr_fmt_u64 may write: the 20 digits of UINT64_MAX. */
#define HDR_U64_MAX 20

/* Write v in decimal (no sign, no leading zeros, no NUL) at out. Returns
 * the number of digits, 1..HDR_U64_MAX. */
size_t hdr_fmt_u64(char out[HDR_U64_MAX], uint64_t v);

/*
 * The next field of a trailer section p[0..len) ("Name: value" lines with
 * CRLFs, as h1_chunked_feed checked them or edge wrote them) from *off
 * that may go on as a trailer: true with its name and value (without the
 * spaces around it) and *off past its line; false at the end. Left out:
 * what RFC 9110 section 6.5.1 forbids in trailers (framing, routing,
 * authentication, conditionals, the content's own fields), hop-by-hop
 * fields, and
 * edge's own and the client address fields (as in a request's head).
 */
bool hdr_trailer_next(const char *p, size_t len, size_t *off, const char **name,
		      size_t *nlen, const char **value, size_t *vlen);

/* Whether name[0..n) is a hop-by-hop field (Connection, Keep-Alive,
 * Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade). */
bool hdr_is_hop_by_hop(const char *name, size_t n);

/* Whether name[0..n) is one of the fields edge sets itself (X-Request-ID,
 * X-Project-ID, X-Environment-ID, X-Deployment-ID, X-Client-IP,
 * X-Forwarded-For, X-Forwarded-Proto, X-Forwarded-Host): a client's copy
 * is never forwarded as it is. */
bool hdr_is_edge_owned(const char *name, size_t n);

/* Whether name[0..n) is a field edge manages itself: hop-by-hop,
 * Content-Length, Host, edge's own, the address fields (Forwarded,
 * X-Real-IP, Client-IP, True-Client-IP, X-Cluster-Client-IP), and any
 * spelling of the last two with '_' for '-'. */
bool hdr_is_managed(const char *name, size_t n);

/* Whether a Connection field of h names name[0..n). */
bool hdr_named_in_connection(const struct h1_head *h, const char *name,
			     size_t n);

/* Whether f of head h is dropped when the head is forwarded as a
 * response is: hop-by-hop (Upgrade survives when tunnel), named in
 * Connection, Content-Length, Host (rewritten) or edge's own. A request
 * drops more (hdr_build_request). */
bool hdr_drop(const struct h1_head *h, const struct h1_header *f, bool tunnel);

/* Whether s[0..n) may be kept as a request id: 1..HDR_REQUEST_ID_MAX bytes
 * of [A-Za-z0-9._-]. */
bool hdr_request_id_valid(const char *s, size_t n);

/* The client's X-Request-ID value if there is exactly one and it is
 * valid, else NULL (*n untouched). */
const char *hdr_request_id_get(const struct h1_head *h, size_t *n);

/* Write a new id of HDR_REQUEST_ID_LEN lowercase hex characters (128
 * random bits from OpenSSL's DRBG, drawn a batch at a time per thread, each
 * byte used once) and a NUL into out. Returns 0, or -EIO when the RNG
 * fails. */
int hdr_request_id_new(char out[HDR_REQUEST_ID_LEN + 1]);

/*
 * W3C Trace Context (Level 1). Edge is a participant: it keeps the
 * client's trace id and sampled flag, and names a span of its own as the
 * parent of what it sends upstream. A client without a valid traceparent
 * (none, two, bad syntax, version ff, an all-zero id) starts a new trace:
 * a random trace id, sampled, and its tracestate is dropped.
 */
#define HDR_TRACE_ID_LEN 32    /* hex characters of a trace id */
#define HDR_SPAN_ID_LEN 16     /* hex characters of a span (parent) id */
#define HDR_TRACEPARENT_LEN 55 /* "00-" trace "-" span "-" flags */
#define HDR_TRACE_SAMPLED 0x01
/* the flags passed on: sampled, and Level 2's random-trace-id */
#define HDR_TRACE_FLAGS_KNOWN 0x03

struct hdr_trace {
	char trace_id[HDR_TRACE_ID_LEN + 1]; /* the client's or a new one */
	char span_id[HDR_SPAN_ID_LEN + 1];   /* edge's: the parent-id sent */
	uint8_t flags;			     /* trace-flags sent */
	bool continued; /* the client's traceparent was taken: its
			   tracestate goes on with it */
	char traceparent[HDR_TRACEPARENT_LEN + 1]; /* the value sent */
};

/* Read a traceparent value s[0..n): version 00 exactly, or a later one
 * (not ff) read as 00 with what follows its 55th character (a '-')
 * ignored; lowercase hex, the ids not all zero. */
bool hdr_traceparent_parse(const char *s, size_t n,
			   char trace_id[HDR_TRACE_ID_LEN + 1],
			   char parent_id[HDR_SPAN_ID_LEN + 1], uint8_t *flags);

/* Fill t for a request with head h: the client's one traceparent
 * continued, or a new trace; edge's span id drawn anew either way (the
 * request id's RNG), and the traceparent to send written. Returns 0 or
 * -EIO. */
int hdr_trace_init(const struct h1_head *h, struct hdr_trace *t);

/* Read one X-Forwarded-For element s[0..n) (OWS already trimmed): an
 * IPv4 or IPv6 address as cidr_parse_addr takes it, alone or with a port
 * ("192.0.2.1:4711", "[2001:db8::1]:4711"; a bracketed address must be
 * IPv6). Writes the address alone, in canonical form (an IPv4-mapped one
 * as IPv4), into out. Returns 0, or -EINVAL for anything else ("unknown",
 * an obfuscated identifier, a name, garbage). */
int hdr_xff_addr(const char *s, size_t n, char out[CIDR_STR_MAX]);

/*
 * Append "X-Forwarded-For: " with what a trusted peer says of its
 * clients, then client_ip (the peer's own address). h's X-Forwarded-For
 * fields are one comma-separated list, in order; empty elements are
 * skipped. The list is kept from its right end up to the first element
 * that is not an address (hdr_xff_addr): that element and every one
 * before it are dropped, since what the peer vouches for is the right
 * end, and what comes before a malformed element is not to be believed.
 * The kept elements are written in canonical form, ports left out.
 * Returns how many elements were dropped; a buffer error is in b->err.
 */
size_t hdr_xff_append(struct hdr_buf *b, const struct h1_head *h,
		      const char *client_ip);

struct trusted;

/* X-Forwarded-For elements hdr_xff_client looks at, from the right. */
#define HDR_XFF_CLIENT_MAX 32

/*
 * The client a trusted peer's X-Forwarded-For names (nginx's
 * real_ip_recursive): from the list's right end, the first address not
 * in t; when every address up to the list's start (or up to an element
 * that is not an address, or HDR_XFF_CLIENT_MAX of them) is in t, the
 * leftmost of those. Writes it, canonical, into out and *c. Returns 0,
 * or -ENOENT when the list is absent or its last element is not an
 * address. The caller checks that the peer itself is trusted.
 */
int hdr_xff_client(const struct h1_head *h, const struct trusted *t,
		   char out[CIDR_STR_MAX], struct cidr *c);

/* Append "X-Forwarded-For: client_ip" (the peer is not trusted). */
int hdr_xff_replace(struct hdr_buf *b, const char *client_ip);

/*
 * Write the head edge sends upstream for r: "METHOD origin-form
 * HTTP/1.1", Host (the absolute-form authority wins over Host), every
 * field hdr_drop keeps in its order but these: the other fields backends
 * read a client's address from (Forwarded, X-Real-IP, True-Client-IP,
 * Client-IP, X-Cluster-Client-IP) unless f->xff_trusted, and every name
 * that reads as one of those or of edge's own with its underscores taken
 * for dashes (X_Forwarded_For: a CGI-style server's HTTP_X_FORWARDED_FOR
 * all the same); then edge's fields from f (X-Forwarded-Host is the
 * client's host), the header rules' fields (f->edit, which filters all of
 * the above but X-Request-ID), Connection/Upgrade for a tunnel, and the
 * framing of f: Content-Length, Transfer-Encoding: chunked or none.
 * Returns 0 or b->err.
 */
int hdr_build_request(struct hdr_buf *b, const struct h1_request *r,
		      const struct hdr_fwd *f);

/* The longest Via member hdr_via_init writes, with its NUL. */
#define HDR_VIA_MAX 160

/* Write into out (len bytes, at most HDR_VIA_MAX) the Via member edge adds
 * to what it forwards, but for its received-protocol (the client's
 * version, hdr_fwd's via_proto, goes first): "NAME (edge)", NAME being
 * name (host_name) with every byte that is not a token character made '-'
 * and cut to fit. */
void hdr_via_init(char *out, size_t len, const char *name);

/* Whether one of h's Via fields lists via (hdr_via_init) as a member,
 * whatever its received-protocol: the request has been through this edge
 * already (a routing loop), over HTTP/1.x or HTTP/2. */
bool hdr_via_has(const struct h1_head *h, const char *via);

/* Append "name: value\r\n" and a NUL to the extra lines being written at
 * out[*n] (out holds cap bytes) and advance *n, if all of it fits; else
 * set *n to cap, so that later appends fail too and *n >= cap tells the
 * caller the lines did not fit. */
void hdr_extra_append(char *out, size_t cap, size_t *n, const char *name,
		      const char *value);

/*
 * Write the head edge sends the client for an upstream response p:
 * "HTTP/1.1 code reason", the fields hdr_drop keeps (X-Request-ID and the
 * other edge fields from upstream dropped), X-Request-ID: request_id,
 * extra (pre-formatted "Name: value\r\n" lines such as security headers,
 * may be NULL), the header rules' of edit (NULL: none; they see the
 * kept fields and extra's lines too), Connection/Upgrade for a 101, and
 * the framing: a length if content_length >= 0, else chunked if chunked,
 * else "Connection: close" if close. Returns 0 or b->err.
 */
int hdr_build_response(struct hdr_buf *b, const struct h1_response *p,
		       const char *request_id, const char *extra,
		       const struct hdr_edit *edit, int64_t content_length,
		       bool chunked, bool close);

/*
 * Write the head of an error edge answers itself: "HTTP/1.1 status
 * text", Content-Type: ctype (NULL: application/json), Cache-Control:
 * no-store (not for a redirect, 3xx),
 * X-Request-ID: request_id (omitted when NULL or empty), extra (may be
 * NULL), Content-Length: body_len, and Connection: close if close. The
 * same builder as hdr_build_response. Returns 0 or b->err.
 */
int hdr_build_error(struct hdr_buf *b, int status, const char *request_id,
		    const char *ctype, const char *extra, size_t body_len,
		    bool close);

/* The reason phrase edge writes for one of its own statuses ("Service
 * Unavailable"); "Error" for one it never sends. Never NULL. */
const char *hdr_status_text(int status);

#endif /* EDGE_HDR_H */
