/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * h1.h - strict, bounded, resumable HTTP/1.1 message-head parser and
 * chunked body decoder (RFC 9112).
 *
 * Pure: no I/O, no allocation, no global state; includes only libc
 * headers. What is accepted and rejected, with the reasons, is in
 * docs/http.md.
 *
 * Resuming: the caller keeps the bytes it has read so far in one buffer and
 * calls the parser again with the same bytes plus whatever arrived since
 * (the buffer may have moved; spans are rebased onto the new one). The
 * parser remembers how far it got, so feeding a head one byte at a time
 * costs O(length) overall, and the result is the same however the bytes
 * were split.
 */
#ifndef EDGE_H1_H
#define EDGE_H1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Field lines a head may hold at most (arrays are this big); the runtime
 * limit h1_limits.headers_max may only lower it. */
#define H1_MAX_HEADERS 100

/* Largest Content-Length accepted (2^62): more is H1_E_BAD_CL. */
#define H1_CL_MAX ((int64_t)1 << 62)

/* Hex digits a chunk-size may have (leading zeros included). */
#define H1_CHUNK_DIGITS_MAX 16

/* Defaults of struct h1_limits (docs/http.md). */
#define H1_DEFAULT_LINE_MAX 8192
#define H1_DEFAULT_HEAD_MAX 32768
#define H1_DEFAULT_HEADERS_MAX 100
#define H1_DEFAULT_EMPTY_LINES_MAX 4
#define H1_DEFAULT_CHUNK_EXT_MAX 256
#define H1_DEFAULT_TRAILER_MAX 4096

/* Limits of one parse. A zero member means its default. */
struct h1_limits {
	size_t line_max;	  /* request/status line incl. CRLF: 414 */
	size_t head_max;	  /* whole head incl. empty lines: 431 */
	unsigned headers_max;	  /* field lines, <= H1_MAX_HEADERS: 431 */
	unsigned empty_lines_max; /* CRLFs skipped before a request line */
	size_t chunk_ext_max;	  /* chunk extensions per chunk line */
	size_t trailer_max;	  /* trailer section bytes incl. CRLFs */
};

/*
 * Every error the parser and decoder report, as X(NAME, STATUS, TEXT):
 * H1_E_NAME, the status a server answers a request with (a response from
 * upstream that fails to parse is always answered 502), and a short
 * description. Append-only: the ids appear in logs and metrics.
 */
#define H1_ERRORS(X)                                                           \
	X(NONE, 0, "no error")                                                 \
	X(EMPTY_LINES, 400, "too many empty lines before the request line")    \
	X(BARE_LF, 400, "line ends in LF without CR")                          \
	X(BARE_CR, 400, "CR not followed by LF")                               \
	X(LINE_TOO_LONG, 414, "request line too long")                         \
	X(HEAD_TOO_LARGE, 431, "header section too large")                     \
	X(TOO_MANY_HEADERS, 431, "too many header fields")                     \
	X(METHOD, 400, "method is not a token")                                \
	X(REQUEST_LINE, 400,                                                   \
	  "request line is not METHOD SP TARGET SP VERSION")                   \
	X(TARGET, 400, "invalid request-target")                               \
	X(VERSION, 400, "malformed HTTP-version")                              \
	X(VERSION_UNSUPPORTED, 505, "HTTP version not supported")              \
	X(CONNECT, 501, "CONNECT is not supported")                            \
	X(FIELD_NAME, 400, "field name is not a token")                        \
	X(SPACE_BEFORE_COLON, 400, "whitespace between field name and colon")  \
	X(FIELD_VALUE, 400, "control character in field value")                \
	X(OBS_FOLD, 400, "obsolete line folding")                              \
	X(CL_TE, 400, "both Content-Length and Transfer-Encoding")             \
	X(BAD_CL, 400, "invalid Content-Length")                               \
	X(DUP_CL, 400, "differing Content-Length values")                      \
	X(BAD_TE, 400, "chunked not the only transfer coding, or in HTTP/1.0") \
	X(TE_UNSUPPORTED, 501, "unsupported transfer coding")                  \
	X(NO_HOST, 400, "missing Host")                                        \
	X(DUP_HOST, 400, "more than one Host")                                 \
	X(BAD_HOST, 400, "invalid Host")                                       \
	X(BAD_CONNECTION, 400, "invalid Connection list")                      \
	X(DUP_UPGRADE, 400, "more than one Upgrade field")                     \
	X(EXPECT, 417, "unsupported expectation")                              \
	X(STATUS_LINE, 502, "malformed status line")                           \
	X(BODY_NOT_ALLOWED, 502, "body indicated where none is allowed")       \
	X(UNSOLICITED_101, 502, "101 without a requested upgrade")             \
	X(CHUNK_SIZE, 400, "invalid chunk size")                               \
	X(CHUNK_EXT, 400, "invalid chunk extension")                           \
	X(CHUNK_CRLF, 400, "chunk data not followed by CRLF")                  \
	X(TRAILER, 400, "invalid trailer field")                               \
	X(TRAILER_TOO_LARGE, 400, "trailer section too large")

#define H1_ERR_ENUM(name, status, text) H1_E_##name,
enum h1_err { H1_ERRORS(H1_ERR_ENUM) H1_E__COUNT };
#undef H1_ERR_ENUM

/* Request methods known by name; others are H1_M_OTHER (see method_str). */
enum h1_method {
	H1_M_OTHER = 0,
	H1_M_GET,
	H1_M_HEAD,
	H1_M_POST,
	H1_M_PUT,
	H1_M_DELETE,
	H1_M_CONNECT,
	H1_M_OPTIONS,
	H1_M_TRACE,
	H1_M_PATCH,
};

/* The form of a request-target (RFC 9112 section 3.2). */
enum h1_form {
	H1_FORM_ORIGIN = 0, /* /path?query */
	H1_FORM_ABSOLUTE,   /* http://authority/path?query */
	H1_FORM_ASTERISK,   /* * (OPTIONS only) */
};

/* How the body of a response is delimited. */
enum h1_body {
	H1_BODY_NONE = 0, /* 1xx, 204, 304, answer to HEAD */
	H1_BODY_LENGTH,	  /* content_length bytes */
	H1_BODY_CHUNKED,  /* chunked: feed it to h1_chunked_feed */
	H1_BODY_CLOSE,	  /* until the upstream closes */
};

/* One field line; name and value point into the caller's buffer, the
 * value without leading and trailing whitespace. */
struct h1_header {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
};

/* Parser state kept between calls. Private. */
struct h1_state {
	uintptr_t base;	   /* buf of the previous call, to rebase spans */
	size_t pos;	   /* start of the next unparsed line */
	size_t scan;	   /* bytes of that line already searched for LF */
	unsigned phase;	   /* 0 start line, 1 field lines, 2 done */
	unsigned empty;	   /* empty lines skipped */
	int rc;		   /* the result, once done */
	unsigned nte;	   /* Transfer-Encoding: codings seen */
	unsigned nchunked; /* ... of which "chunked" */
	bool te_other;	   /* a coding other than chunked */
	bool te_bad;	   /* chunked not last, or list syntax */
	bool last_chunked; /* the last coding seen is chunked */
	unsigned nhost;
	unsigned nupgrade;
	size_t te_off, cl_off, host_off, upgrade_off, conn_off;
};

/*
 * What both heads share. err/err_off/status describe a failure: the code,
 * the byte offset in buf where it was found and the status to answer
 * (requests; responses that fail are answered 502 by the caller).
 */
struct h1_head {
	int minor; /* 0 or 1: HTTP/1.minor */
	unsigned nheaders;
	struct h1_header headers[H1_MAX_HEADERS];
	int64_t content_length; /* -1: no Content-Length */
	bool chunked;		/* Transfer-Encoding: chunked */
	bool conn_close;	/* Connection tokens seen */
	bool conn_keep_alive;
	bool conn_upgrade;
	unsigned nconnection; /* Connection field lines */
	bool keep_alive;      /* the connection may carry another message */
	const char *upgrade_proto; /* the Upgrade field's value, or NULL */
	size_t upgrade_len;
	enum h1_err err;
	size_t err_off;
	int status;
	struct h1_state st;
};

/* A parsed request head. */
struct h1_request {
	struct h1_head h;
	enum h1_method method;
	const char *method_str;
	size_t method_len;
	enum h1_form form;
	const char *target; /* the request-target as sent */
	size_t target_len;
	const char *path; /* path part (empty in http://a?q means "/") */
	size_t path_len;
	const char *query; /* after '?', NULL if there is no '?' */
	size_t query_len;
	const char *host; /* Host, or the absolute-form authority */
	size_t host_len;
	bool expect_continue; /* HTTP/1.1 Expect: 100-continue */
	bool upgrade;	      /* HTTP/1.1 Upgrade with Connection: upgrade */
	bool te_trailers;     /* TE lists "trailers": it takes trailer fields */
};

/* A parsed response head. */
struct h1_response {
	struct h1_head h;
	int code;	    /* status code 100..599 */
	const char *reason; /* reason phrase, possibly empty */
	size_t reason_len;
	enum h1_body body;
	bool upgrade;  /* a 101 accepted as the answer to an upgrade */
	bool no_reuse; /* 304 carried Content-Length: do not pool */
};

/* Result of h1_chunked_feed other than 0 (need more) and errors. */
#define H1_CHUNK_DATA 1
#define H1_CHUNK_DONE 2
#define H1_CHUNK_TRAILER 3

/* Chunked decoder state. Initialise with h1_chunked_init. */
struct h1_chunked {
	unsigned state;
	unsigned ndigits;
	uint64_t size;	    /* chunk-size being read */
	uint64_t remaining; /* data bytes left in the current chunk */
	size_t ext_len;	    /* extension bytes on this chunk line */
	size_t trailer_len; /* trailer-section bytes so far */
	size_t ext_max, trailer_max;
	uint64_t offset;	   /* bytes consumed since init */
	uint64_t data_total;	   /* data bytes returned */
	unsigned trailers_dropped; /* trailer fields discarded */
	bool keep_trailers;	   /* set by the caller: H1_CHUNK_TRAILER */
	enum h1_err err;
	uint64_t err_off; /* offset of the error since init */
};

/* Fill *lim with the defaults. */
void h1_limits_default(struct h1_limits *lim);

/* Zero the n bytes at p but for the hole_n bytes at hole (inside them): a
 * head's header array (3 KB) need not be cleared, as only its first
 * nheaders entries, written by the parser, are ever read. */
static inline void h1_zero_around(void *p, size_t n, const void *hole,
				  size_t hole_n)
{
	size_t a = (size_t)((const char *)hole - (const char *)p);

	memset(p, 0, a);
	memset((char *)p + a + hole_n, 0, n - a - hole_n);
}

/* Prepare *r for a new request: must be called before the first
 * h1_parse_request of every message. Its header array is not cleared. */
void h1_request_init(struct h1_request *r);

/* Prepare *resp for a new response head. */
void h1_response_init(struct h1_response *resp);

/*
 * Parse the request head at the start of buf[0..len). lim may be NULL for
 * the defaults. Returns the size of the complete head (>0; the body, if
 * any, starts there), 0 when more bytes are needed (and nothing seen so
 * far breaks a limit), or -1 with r->h.err, r->h.err_off and r->h.status
 * set. Call again with the same bytes and more until it does not return
 * 0; once it has returned non-zero it returns the same until
 * h1_request_init. All spans in *r point into the latest buf.
 */
int h1_parse_request(const char *buf, size_t len, const struct h1_limits *lim,
		     struct h1_request *r);

/*
 * Parse an upstream response head, like h1_parse_request. req_method is
 * the method of the request it answers (HEAD: no body), upgrade says
 * whether that request asked for an upgrade (otherwise 101 is an error).
 * On success resp->body says how the body is delimited. Any error means
 * the upstream connection must be closed; h.status is 502.
 */
int h1_parse_response(const char *buf, size_t len, const struct h1_limits *lim,
		      enum h1_method req_method, bool upgrade,
		      struct h1_response *resp);

/* Prepare a chunked decoder; lim may be NULL for the defaults. */
void h1_chunked_init(struct h1_chunked *st, const struct h1_limits *lim);

/*
 * Decode chunked framing from in[0..len), without copying. Returns
 *   H1_CHUNK_DATA: in[*data_off .. *data_off + *data_len) is body data;
 *   H1_CHUNK_DONE: the last chunk and trailers ended; bytes after
 *                  *consumed belong to the next message;
 *   0:             all of in was framing or data consumed, need more;
 *   -1:            st->err, st->err_off set (answer 400 / 502).
 *   H1_CHUNK_TRAILER (st->keep_trailers only): in[*data_off ..
 *                  *data_off + *data_len) are bytes of the trailer
 *                  section, checked so far (field lines "Name: value"
 *                  with their CRLFs, a line maybe cut at the span's end;
 *                  never the final CRLF);
 * *consumed is always the number of bytes of in used (for DATA up to the
 * end of the span). Call again with the rest. Trailer fields are checked
 * and bounded (trailer_max), and dropped (st->trailers_dropped) unless
 * kept.
 */
int h1_chunked_feed(struct h1_chunked *st, const char *in, size_t len,
		    size_t *consumed, size_t *data_off, size_t *data_len);

/*
 * Check the first chunk line of a chunked body, in[0..len), as
 * h1_chunked_feed reads it (lim may be NULL for the defaults): a
 * chunk-size of 1..H1_CHUNK_DIGITS_MAX hex digits, extensions, CRLF.
 * Consumes nothing. Returns 1 when the line is complete and valid, 0 when
 * what there is may still become one (the line is at most
 * H1_CHUNK_DIGITS_MAX + chunk_ext_max + 2 bytes, so 0 never lasts past
 * that), or -1 with *err (H1_E_CHUNK_SIZE or H1_E_CHUNK_EXT).
 */
int h1_chunk_line_check(const char *in, size_t len, const struct h1_limits *lim,
			enum h1_err *err);

/* The identifier ("CL_TE"), the description, and the status for a
 * request of an error code. Unknown codes give "?", "?" and 400. */
const char *h1_err_name(enum h1_err e);
const char *h1_err_text(enum h1_err e);
int h1_err_status(enum h1_err e);

/* The method's name for a known method, NULL for H1_M_OTHER. */
const char *h1_method_name(enum h1_method m);

/* Whether c may appear in a token (RFC 9110 tchar). */
bool h1_tchar(unsigned char c);

/* Case-insensitive comparison of s[0..n) with lit[0..n) (lit lowercase
 * or not; n bytes of both are read). */
bool h1_eq_n(const char *s, const char *lit, size_t n);

/* c with 'A'..'Z' made lowercase. */
static inline unsigned char h1_lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c | 0x20) : c;
}

/* Case-insensitive comparison of s[0..n) with the NUL-terminated lit.
 * Inline so that the length of a literal lit is known at compile time and
 * most names are told apart by their length alone, most of the rest by
 * their first byte, without a call. */
static inline bool h1_eq(const char *s, size_t n, const char *lit)
{
	return n == __builtin_strlen(lit) &&
	       (n == 0 || h1_lower((unsigned char)s[0]) ==
			      h1_lower((unsigned char)lit[0])) &&
	       h1_eq_n(s, lit, n);
}

/* The value of hex digit c (either case), or -1. */
int h1_hexval(char c);

/* An element of a list, without its white space (h1_each's). */
typedef int (*h1_elem_fn)(const char *e, size_t n, void *arg);

/* Call fn on each element of the list s[0..n) separated by sep (',' for a
 * field's list, ';' for Cookie's pairs), without its optional white
 * space, empty ones skipped; stops at fn's first nonzero return, which
 * it returns (else 0). */
int h1_each(const char *s, size_t n, char sep, h1_elem_fn fn, void *arg);

/* Whether the comma-separated list s[0..n) holds the token tok
 * (case-insensitive). */
bool h1_list_has(const char *s, size_t n, const char *tok);

/* The first field of h named lit (lowercase), or NULL. */
const struct h1_header *h1_head_field(const struct h1_head *h, const char *lit);
/* Whether a field of h named lit (lowercase) lists tok (h1_list_has). */
bool h1_head_has(const struct h1_head *h, const char *lit, const char *tok);

#endif /* EDGE_H1_H */
