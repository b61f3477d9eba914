/* SPDX-License-Identifier: BSD-2-Clause */
/* test_h1.c - the HTTP/1.1 parser and chunked decoder, table-driven: each
 * case parsed whole, one byte at a time (in a buffer that moves) and, for
 * the decoder, split at every byte. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h1.h"
#include "unit.h"

#define S(lit) lit, sizeof(lit) - 1
#define MORE (-2) /* expected: need more bytes */

/* flags checked on successful requests and responses */
#define F_CHUNKED 0x1
#define F_KA 0x2
#define F_EXPECT 0x4
#define F_UPGRADE 0x8
#define F_NOREUSE 0x10

static const struct h1_limits small = {
    .line_max = 32, .head_max = 96, .headers_max = 4, .empty_lines_max = 2};

struct req_case {
	const char *in;
	size_t len;
	enum h1_err err; /* H1_E_NONE: success (or MORE in cl) */
	int64_t cl;	 /* expected content_length, MORE: need more */
	unsigned flags;
	const struct h1_limits *lim;
};

#define OK(in, cl, fl)                                                         \
	{                                                                      \
		S(in), H1_E_NONE, cl, fl, NULL                                 \
	}
#define BAD(in, e)                                                             \
	{                                                                      \
		S(in), H1_E_##e, 0, 0, NULL                                    \
	}
#define BADL(in, e)                                                            \
	{                                                                      \
		S(in), H1_E_##e, 0, 0, &small                                  \
	}
#define H "Host: a\r\n"

static const struct req_case reqs[] = {
    /* valid */
    OK("GET / HTTP/1.1\r\nHost: a\r\n\r\n", -1, F_KA),
    OK("GET /a/b?c=d&e HTTP/1.1\r\nHost: example.com\r\n\r\n", -1, F_KA),
    OK("\r\nGET / HTTP/1.1\r\n" H "\r\n", -1, F_KA),
    OK("\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\n" H "\r\n", -1, F_KA),
    OK("POST / HTTP/1.1\r\n" H "Content-Length: 5\r\n\r\n", 5, F_KA),
    OK("POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n\r\n", -1,
       F_KA | F_CHUNKED),
    OK("POST / HTTP/1.1\r\n" H "Transfer-Encoding: Chunked\r\n\r\n", -1,
       F_KA | F_CHUNKED),
    OK("POST / HTTP/1.1\r\n" H "Transfer-Encoding:\tchunked \r\n\r\n", -1,
       F_KA | F_CHUNKED),
    OK("GET / HTTP/1.0\r\n\r\n", -1, 0),
    OK("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", -1, F_KA),
    OK("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", -1, 0),
    OK("GET / HTTP/1.1\r\n" H "Connection: close\r\n\r\n", -1, 0),
    OK("GET / HTTP/1.1\r\n" H "Connection: Keep-Alive, Upgrade\r\n"
       "Upgrade: websocket\r\n\r\n",
       -1, F_KA | F_UPGRADE),
    OK("GET / HTTP/1.1\r\n" H "Upgrade: websocket\r\n\r\n", -1, F_KA),
    OK("GET / HTTP/1.0\r\n" H "Connection: upgrade\r\n"
       "Upgrade: websocket\r\n\r\n",
       -1, 0),
    OK("POST / HTTP/1.1\r\n" H "Expect: 100-continue\r\n"
       "Content-Length: 3\r\n\r\n",
       3, F_KA | F_EXPECT),
    OK("POST / HTTP/1.1\r\n" H "Expect: 100-Continue\r\n\r\n", -1,
       F_KA | F_EXPECT),
    OK("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n", -1, 0),
    OK("POST / HTTP/1.1\r\n" H "Content-Length: 5\r\nContent-Length: 5\r\n\r\n",
       5, F_KA),
    OK("POST / HTTP/1.1\r\n" H "Content-Length: 005\r\n\r\n", 5, F_KA),
    OK("POST / HTTP/1.1\r\n" H "Content-Length:0\r\n\r\n", 0, F_KA),
    OK("POST / HTTP/1.1\r\n" H "Content-Length:  7 \t\r\n\r\n", 7, F_KA),
    OK("POST / HTTP/1.1\r\n" H "Content-Length: 4611686018427387904\r\n\r\n",
       H1_CL_MAX, F_KA),
    OK("OPTIONS * HTTP/1.1\r\n" H "\r\n", -1, F_KA),
    OK("GET http://Example.com:8080/p?q HTTP/1.1\r\nHost: other\r\n\r\n", -1,
       F_KA),
    OK("GET https://a.example?q HTTP/1.1\r\nHost: a.example\r\n\r\n", -1, F_KA),
    OK("PURGE /x HTTP/1.1\r\n" H "\r\n", -1, F_KA),
    OK("get / HTTP/1.1\r\n" H "\r\n", -1, F_KA),
    OK("GET / HTTP/1.1\r\n" H "X-A:  a \t b  \r\n\r\n", -1, F_KA),
    OK("GET / HTTP/1.1\r\n" H "X-Utf8: caf\xc3\xa9\r\n\r\n", -1, F_KA),
    OK("GET / HTTP/1.1\r\nHost: a.example:80\r\n\r\n", -1, F_KA),
    OK("GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", -1, F_KA),
    OK("GET / HTTP/1.1\r\nHost: 192.0.2.1\r\n\r\n", -1, F_KA),
    OK("GET / HTTP/1.1\r\nHost:\r\n\r\n", -1, F_KA),
    OK("GET / HTTP/1.1\r\n" H "X-Empty:\r\n\r\n", -1, F_KA),
    OK("GET /a%20b/%7E?x=%2F HTTP/1.1\r\n" H "\r\n", -1, F_KA),
    OK("GET /@:!$&'()*+,;=-._~ HTTP/1.1\r\n" H "\r\n", -1, F_KA),
    OK("GET / HTTP/1.1\r\n" H "Connection: ,, close ,\r\n\r\n", -1, 0),
    /* incomplete */
    {S("GET / HTTP/1.1\r\nHost: a\r\n"), H1_E_NONE, MORE, 0, NULL},
    {S("GET / HTTP/1.1\r\nHost: a\r\n\r"), H1_E_NONE, MORE, 0, NULL},
    {S("GET / HTTP/1.1"), H1_E_NONE, MORE, 0, NULL},
    {S("\r\n\r\n"), H1_E_NONE, MORE, 0, NULL},
    /* request smuggling classics */
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 5\r\n"
	"Transfer-Encoding: chunked\r\n\r\n",
	CL_TE),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n"
	"Content-Length: 5\r\n\r\n",
	CL_TE),
    BAD("POST / HTTP/1.0\r\nContent-Length: 5\r\n"
	"Transfer-Encoding: chunked\r\n\r\n",
	CL_TE),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding:\r\n chunked\r\n\r\n",
	OBS_FOLD),
    BAD("POST / HTTP/1.1\r\n" H "X: a\r\n\tb\r\n\r\n", OBS_FOLD),
    BAD("POST / HTTP/1.1\r\n Host: a\r\n\r\n", OBS_FOLD),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding : chunked\r\n\r\n",
	SPACE_BEFORE_COLON),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length\t: 5\r\n\r\n",
	SPACE_BEFORE_COLON),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: xchunked\r\n\r\n",
	TE_UNSUPPORTED),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: gzip\r\n\r\n",
	TE_UNSUPPORTED),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: identity\r\n\r\n",
	TE_UNSUPPORTED),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: gzip, chunked\r\n\r\n",
	TE_UNSUPPORTED),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked, gzip\r\n\r\n",
	BAD_TE),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked, chunked\r\n\r\n",
	BAD_TE),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n"
	"Transfer-Encoding: chunked\r\n\r\n",
	BAD_TE),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n"
	"Transfer-Encoding: x\r\n\r\n",
	BAD_TE),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding:\r\n\r\n", BAD_TE),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked,\r\n\r\n", BAD_TE),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked;q=1\r\n\r\n",
	BAD_TE),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: \"chunked\"\r\n\r\n",
	BAD_TE),
    BAD("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", BAD_TE),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: +5\r\n\r\n", BAD_CL),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: -1\r\n\r\n", BAD_CL),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 5, 5\r\n\r\n", BAD_CL),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 1e3\r\n\r\n", BAD_CL),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 0x10\r\n\r\n", BAD_CL),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 5 5\r\n\r\n", BAD_CL),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length:\r\n\r\n", BAD_CL),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 99999999999999999999\r\n\r\n",
	BAD_CL),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 4611686018427387905\r\n\r\n",
	BAD_CL),
    BAD("POST / HTTP/1.1\r\n" H
	"Content-Length: 5\r\nContent-Length: 6\r\n\r\n",
	DUP_CL),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 5\r\nContent-Length: 05\r\n"
	"Content-Length: 6\r\n\r\n",
	DUP_CL),
    /* Host */
    BAD("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", DUP_HOST),
    BAD("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", DUP_HOST),
    BAD("GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n", DUP_HOST),
    BAD("GET / HTTP/1.1\r\n\r\n", NO_HOST),
    BAD("GET http://a/ HTTP/1.1\r\n\r\n", NO_HOST),
    BAD("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", BAD_HOST),
    BAD("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", BAD_HOST),
    BAD("GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", BAD_HOST),
    BAD("GET / HTTP/1.1\r\nHost: a:80x\r\n\r\n", BAD_HOST),
    BAD("GET / HTTP/1.1\r\nHost: a:123456\r\n\r\n", BAD_HOST),
    BAD("GET / HTTP/1.1\r\nHost: :80\r\n\r\n", BAD_HOST),
    BAD("GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", BAD_HOST),
    /* request line */
    BAD("GET  / HTTP/1.1\r\n" H "\r\n", REQUEST_LINE),
    BAD("GET /  HTTP/1.1\r\n" H "\r\n", REQUEST_LINE),
    BAD("GET / HTTP/1.1 \r\n" H "\r\n", REQUEST_LINE),
    BAD(" GET / HTTP/1.1\r\n" H "\r\n", REQUEST_LINE),
    BAD("GET\t/ HTTP/1.1\r\n" H "\r\n", REQUEST_LINE),
    BAD("GET /\tHTTP/1.1\r\n" H "\r\n", REQUEST_LINE),
    BAD("GET /a b HTTP/1.1\r\n" H "\r\n", REQUEST_LINE),
    BAD("GET /\r\n" H "\r\n", REQUEST_LINE),
    BAD("GET\r\n" H "\r\n", REQUEST_LINE),
    BAD("G@T / HTTP/1.1\r\n" H "\r\n", METHOD),
    BAD("GE\0T / HTTP/1.1\r\n" H "\r\n", METHOD),
    BAD("GET /\0 HTTP/1.1\r\n" H "\r\n", TARGET),
    BAD("GET / http/1.1\r\n" H "\r\n", VERSION),
    BAD("GET / HTTP/1.10\r\n" H "\r\n", VERSION),
    BAD("GET / HTTP/1\r\n" H "\r\n", VERSION),
    BAD("GET / HTTP/1.1\0\r\n" H "\r\n", VERSION),
    BAD("GET / HTTP/2.0\r\n" H "\r\n", VERSION_UNSUPPORTED),
    BAD("GET / HTTP/1.2\r\n" H "\r\n", VERSION_UNSUPPORTED),
    BAD("GET / HTTP/0.9\r\n" H "\r\n", VERSION_UNSUPPORTED),
    BAD("CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n",
	CONNECT),
    BAD("GET * HTTP/1.1\r\n" H "\r\n", TARGET),
    BAD("GET a/b HTTP/1.1\r\n" H "\r\n", TARGET),
    BAD("GET /a#frag HTTP/1.1\r\n" H "\r\n", TARGET),
    BAD("GET /a%2 HTTP/1.1\r\n" H "\r\n", TARGET),
    BAD("GET /a%zz HTTP/1.1\r\n" H "\r\n", TARGET),
    BAD("GET /<script> HTTP/1.1\r\n" H "\r\n", TARGET),
    BAD("GET /caf\xc3\xa9 HTTP/1.1\r\n" H "\r\n", TARGET),
    BAD("GET ftp://a/b HTTP/1.1\r\n" H "\r\n", TARGET),
    BAD("GET http:///x HTTP/1.1\r\n" H "\r\n", TARGET),
    BAD("GET http://u@a/ HTTP/1.1\r\n" H "\r\n", TARGET),
    BAD("\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\n" H "\r\n", EMPTY_LINES),
    /* line endings and control characters */
    BAD("GET / HTTP/1.1\nHost: a\n\n", BARE_LF),
    BAD("GET / HTTP/1.1\r\nHost: a\n\r\n", BARE_LF),
    BAD("GET / HTTP/1.1\r\n" H "\n", BARE_LF),
    BAD("\nGET / HTTP/1.1\r\n" H "\r\n", BARE_LF),
    BAD("GET / HTTP/1.1\r\n" H "X: a\rb\r\n\r\n", BARE_CR),
    BAD("GET /\r HTTP/1.1\r\n" H "\r\n", BARE_CR),
    BAD("GET / HTTP/1.1\r\r\n" H "\r\n", BARE_CR),
    BAD("GET / HTTP/1.1\r\n" H "\r\r\n", BARE_CR),
    BAD("GET / HTTP/1.1\r\n" H "X: a\0b\r\n\r\n", FIELD_VALUE),
    BAD("GET / HTTP/1.1\r\n" H "X: a\x01\r\n\r\n", FIELD_VALUE),
    BAD("GET / HTTP/1.1\r\n" H "X: a\x7f\r\n\r\n", FIELD_VALUE),
    BAD("GET / HTTP/1.1\r\n" H "X(: a\r\n\r\n", FIELD_NAME),
    BAD("GET / HTTP/1.1\r\n" H ": a\r\n\r\n", FIELD_NAME),
    BAD("GET / HTTP/1.1\r\n" H "NoColon\r\n\r\n", FIELD_NAME),
    BAD("GET / HTTP/1.1\r\n" H "X\0: a\r\n\r\n", FIELD_NAME),
    /* other fields */
    BAD("POST / HTTP/1.1\r\n" H "Expect: 200-ok\r\n\r\n", EXPECT),
    BAD("POST / HTTP/1.1\r\n" H "Expect: 100-continue, x\r\n\r\n", EXPECT),
    BAD("GET / HTTP/1.1\r\n" H "Connection: close;x\r\n\r\n", BAD_CONNECTION),
    BAD("GET / HTTP/1.1\r\n" H "Upgrade: a\r\nUpgrade: b\r\n\r\n", DUP_UPGRADE),
    /* limits (line_max 32, head_max 96, 4 field lines, 2 empty lines) */
    BADL("GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\n" H "\r\n",
	 LINE_TOO_LONG),
    BADL("GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", LINE_TOO_LONG),
    BADL("GET / HTTP/1.1\r\n" H "A: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n",
	 TOO_MANY_HEADERS),
    BADL("GET / HTTP/1.1\r\n" H "X: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n",
	 HEAD_TOO_LARGE),
    BADL("GET / HTTP/1.1\r\n" H "X: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	 HEAD_TOO_LARGE),
    BADL("\r\n\r\n\r\nGET / HTTP/1.1\r\n" H "\r\n", EMPTY_LINES),
    {S("GET / HTTP/1.1\r\n" H "A: 1\r\nB: 2\r\nC: 3\r\n\r\n"), H1_E_NONE, -1,
     F_KA, &small},
};

/* Parse c->in whole; returns rc. */
static int parse_whole(const char *in, size_t len, const struct h1_limits *lim,
		       struct h1_request *r)
{
	h1_request_init(r);
	return h1_parse_request(in, len, lim, r);
}

/* Parse c->in one byte more per call, copying the bytes into a new
 * buffer each time so that the parser must rebase its spans. Checks that
 * every call before the last that returns non-zero returned 0 before. */
static int parse_bytes(const char *in, size_t len, const struct h1_limits *lim,
		       struct h1_request *r, char **keep)
{
	char *buf = NULL, *nb;
	size_t k;
	int rc = 0, first = 0;

	h1_request_init(r);
	for (k = 1; k <= len; k++) {
		nb = malloc(k);
		ck_assert_ptr_nonnull(nb);
		memcpy(nb, in, k);
		free(buf);
		buf = nb;
		rc = h1_parse_request(buf, k, lim, r);
		if (first)
			ck_assert_int_eq(rc, first); /* sticky result */
		else if (rc != 0)
			first = rc;
	}
	*keep = buf;
	return rc;
}

static void span_eq(const char *a, size_t alen, const char *abase,
		    const char *b, size_t blen, const char *bbase)
{
	ck_assert_uint_eq(alen, blen);
	ck_assert(!a == !b);
	if (a)
		ck_assert_uint_eq((size_t)(a - abase), (size_t)(b - bbase));
}

/* A complete head parsed again from a copy: the result is the same and
 * every span points into the copy (how edged keeps a head past its input
 * buffer). */
START_TEST(test_request_rebase_done)
{
	static const char in[] =
	    "GET /p?q HTTP/1.1\r\nHost: a.b\r\nX: y\r\n\r\n";
	struct h1_request *r = malloc(sizeof(*r));
	char copy[sizeof(in)];
	int rc;

	ck_assert_ptr_nonnull(r);
	h1_request_init(r);
	rc = h1_parse_request(in, sizeof(in) - 1, NULL, r);
	ck_assert_int_eq(rc, (int)sizeof(in) - 1);
	memcpy(copy, in, sizeof(in));
	ck_assert_int_eq(h1_parse_request(copy, sizeof(in) - 1, NULL, r), rc);
	ck_assert_ptr_eq(r->host, copy + (r->host - copy));
	ck_assert(r->host >= copy && r->host < copy + sizeof(copy));
	ck_assert(r->path >= copy && r->path < copy + sizeof(copy));
	ck_assert(r->method_str == copy);
	ck_assert(r->h.headers[1].value >= copy &&
		  r->h.headers[1].value < copy + sizeof(copy));
	free(r);
}
END_TEST

START_TEST(test_request)
{
	const struct req_case *c = &reqs[_i];
	struct h1_request *w = malloc(sizeof(*w)), *b = malloc(sizeof(*b));
	char *keep = NULL;
	int rw, rb;
	unsigned fl, i;

	ck_assert_ptr_nonnull(w);
	ck_assert_ptr_nonnull(b);
	rw = parse_whole(c->in, c->len, c->lim, w);
	rb = parse_bytes(c->in, c->len, c->lim, b, &keep);
	ck_assert_msg(rw == rb, "case %d: whole %d, bytes %d", _i, rw, rb);
	if (c->err != H1_E_NONE) {
		ck_assert_msg(rw == -1 && w->h.err == c->err,
			      "case %d: rc %d err %s (%s at %zu), want %s", _i,
			      rw, h1_err_name(w->h.err), h1_err_text(w->h.err),
			      w->h.err_off, h1_err_name(c->err));
		ck_assert_int_eq(w->h.status, h1_err_status(c->err));
		ck_assert_int_eq(b->h.err, w->h.err);
		ck_assert_uint_eq(b->h.err_off, w->h.err_off);
		ck_assert_uint_le(w->h.err_off, c->len);
		goto out;
	}
	if (c->cl == MORE) {
		ck_assert_msg(rw == 0, "case %d: rc %d (%s), want 0", _i, rw,
			      h1_err_name(w->h.err));
		goto out;
	}
	ck_assert_msg(rw == (int)c->len, "case %d: rc %d err %s at %zu", _i, rw,
		      h1_err_name(w->h.err), w->h.err_off);
	ck_assert_int_eq(w->h.content_length, c->cl);
	fl = (w->h.chunked ? F_CHUNKED : 0) | (w->h.keep_alive ? F_KA : 0) |
	     (w->expect_continue ? F_EXPECT : 0) | (w->upgrade ? F_UPGRADE : 0);
	ck_assert_msg(fl == c->flags, "case %d: flags %#x want %#x", _i, fl,
		      c->flags);
	ck_assert_int_eq(w->method, b->method);
	span_eq(w->host, w->host_len, c->in, b->host, b->host_len, keep);
	span_eq(w->path, w->path_len, c->in, b->path, b->path_len, keep);
	span_eq(w->query, w->query_len, c->in, b->query, b->query_len, keep);
	span_eq(w->target, w->target_len, c->in, b->target, b->target_len,
		keep);
	ck_assert_uint_eq(w->h.nheaders, b->h.nheaders);
	for (i = 0; i < w->h.nheaders; i++) {
		span_eq(w->h.headers[i].name, w->h.headers[i].name_len, c->in,
			b->h.headers[i].name, b->h.headers[i].name_len, keep);
		span_eq(w->h.headers[i].value, w->h.headers[i].value_len, c->in,
			b->h.headers[i].value, b->h.headers[i].value_len, keep);
	}
out:
	free(keep);
	free(w);
	free(b);
}
END_TEST

static bool span_is(const char *s, size_t n, const char *lit)
{
	return s && n == strlen(lit) && !memcmp(s, lit, n);
}

START_TEST(test_request_fields)
{
	static const char in[] =
	    "GET http://Example.com:8080/p/q?x=1&y HTTP/1.1\r\n"
	    "Host: other.example\r\nX-A:  a \t b  \r\n"
	    "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\nBODY";
	struct h1_request *r = malloc(sizeof(*r));
	int rc;

	ck_assert_ptr_nonnull(r);
	h1_request_init(r);
	rc = h1_parse_request(in, sizeof(in) - 1, NULL, r);
	ck_assert_int_eq(rc, (int)(sizeof(in) - 1 - 4));
	ck_assert_int_eq(r->method, H1_M_GET);
	ck_assert(span_is(r->method_str, r->method_len, "GET"));
	ck_assert_int_eq(r->form, H1_FORM_ABSOLUTE);
	ck_assert(span_is(r->host, r->host_len, "Example.com:8080"));
	ck_assert(span_is(r->path, r->path_len, "/p/q"));
	ck_assert(span_is(r->query, r->query_len, "x=1&y"));
	ck_assert_int_eq(r->h.minor, 1);
	ck_assert_uint_eq(r->h.nheaders, 4);
	ck_assert(
	    span_is(r->h.headers[1].name, r->h.headers[1].name_len, "X-A"));
	ck_assert(span_is(r->h.headers[1].value, r->h.headers[1].value_len,
			  "a \t b"));
	ck_assert(r->upgrade);
	ck_assert(span_is(r->h.upgrade_proto, r->h.upgrade_len, "websocket"));
	/* sticky: same answer again */
	ck_assert_int_eq(h1_parse_request(in, sizeof(in) - 1, NULL, r), rc);

	h1_request_init(r);
	rc = h1_parse_request(S("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"), NULL,
			      r);
	ck_assert_int_gt(rc, 0);
	ck_assert_int_eq(r->form, H1_FORM_ASTERISK);
	ck_assert_ptr_null(r->path);
	h1_request_init(r);
	rc = h1_parse_request(S("GET /p HTTP/1.1\r\nHost: a\r\n\r\n"), NULL, r);
	ck_assert_int_gt(rc, 0);
	ck_assert_ptr_null(r->query);
	ck_assert(span_is(r->host, r->host_len, "a"));
	free(r);
}
END_TEST

START_TEST(test_request_limits_default)
{
	struct h1_request *r = malloc(sizeof(*r));
	size_t n = H1_DEFAULT_LINE_MAX + 64, i;
	char *buf = malloc(n);
	int rc;

	ck_assert_ptr_nonnull(r);
	ck_assert_ptr_nonnull(buf);
	memcpy(buf, "GET /", 5);
	for (i = 5; i < n; i++)
		buf[i] = 'a';
	h1_request_init(r);
	/* a line one byte short of the limit may still end in CRLF... */
	ck_assert_int_eq(
	    h1_parse_request(buf, H1_DEFAULT_LINE_MAX - 1, NULL, r), 0);
	/* ...one of line_max bytes cannot any more */
	rc = h1_parse_request(buf, H1_DEFAULT_LINE_MAX, NULL, r);
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(r->h.err, H1_E_LINE_TOO_LONG);
	ck_assert_int_eq(r->h.status, 414);
	ck_assert_uint_eq(r->h.err_off, H1_DEFAULT_LINE_MAX);

	/* 101 field lines: 431 */
	free(buf);
	buf = malloc(64 + 101 * 8);
	ck_assert_ptr_nonnull(buf);
	n = (size_t)sprintf(buf, "GET / HTTP/1.1\r\n");
	for (i = 0; i < 101; i++)
		n += (size_t)sprintf(buf + n, "X%02zu: 1\r\n", i);
	n += (size_t)sprintf(buf + n, "\r\n");
	h1_request_init(r);
	ck_assert_int_eq(h1_parse_request(buf, n, NULL, r), -1);
	ck_assert_int_eq(r->h.err, H1_E_TOO_MANY_HEADERS);
	ck_assert_int_eq(r->h.status, 431);
	free(buf);
	free(r);
}
END_TEST

/* --- responses ----------------------------------------------------------- */

struct resp_case {
	const char *in;
	size_t len;
	enum h1_method method;
	bool upgrade;
	enum h1_err err;
	int code;
	enum h1_body body;
	unsigned flags;
};

#define ROK(in, code, body, fl)                                                \
	{                                                                      \
		S(in), H1_M_GET, false, H1_E_NONE, code, body, fl              \
	}
#define RBAD(in, e)                                                            \
	{                                                                      \
		S(in), H1_M_GET, false, H1_E_##e, 0, 0, 0                      \
	}

static const struct resp_case resps[] = {
    ROK("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", 200, H1_BODY_LENGTH,
	F_KA),
    ROK("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 200,
	H1_BODY_CHUNKED, F_KA | F_CHUNKED),
    ROK("HTTP/1.1 200 OK\r\n\r\n", 200, H1_BODY_CLOSE, 0),
    ROK("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", 200, H1_BODY_LENGTH, 0),
    ROK("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: "
	"1\r\n\r\n",
	200, H1_BODY_LENGTH, F_KA),
    ROK("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n",
	200, H1_BODY_LENGTH, 0),
    ROK("HTTP/1.1 204 No Content\r\n\r\n", 204, H1_BODY_NONE, F_KA),
    ROK("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", 204,
	H1_BODY_NONE, F_KA),
    ROK("HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n", 304,
	H1_BODY_NONE, F_KA | F_NOREUSE),
    ROK("HTTP/1.1 304 Not Modified\r\n\r\n", 304, H1_BODY_NONE, F_KA),
    ROK("HTTP/1.1 100 Continue\r\n\r\n", 100, H1_BODY_NONE, F_KA),
    ROK("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", 103, H1_BODY_NONE,
	F_KA),
    ROK("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", 200, H1_BODY_LENGTH, F_KA),
    ROK("HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n", 200, H1_BODY_LENGTH,
	F_KA),
    ROK("HTTP/1.1 404 Not \t Found \xff\r\nContent-Length: 0\r\n\r\n", 404,
	H1_BODY_LENGTH, F_KA),
    ROK("HTTP/1.1 599 X\r\n\r\n", 599, H1_BODY_CLOSE, 0),
    {S("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"), H1_M_HEAD, false,
     H1_E_NONE, 200, H1_BODY_NONE, F_KA},
    {S("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), H1_M_HEAD,
     false, H1_E_NONE, 200, H1_BODY_NONE, F_KA | F_CHUNKED},
    {S("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
       "Upgrade: websocket\r\n\r\n"),
     H1_M_GET, true, H1_E_NONE, 101, H1_BODY_NONE, F_KA | F_UPGRADE},
    {S("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"),
     H1_M_GET, false, H1_E_UNSOLICITED_101, 0, 0, 0},
    {S("HTTP/1.1 101 Switching Protocols\r\n\r\n"), H1_M_GET, true,
     H1_E_UNSOLICITED_101, 0, 0, 0},
    {S("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n"), H1_M_GET, false, H1_E_NONE,
     MORE, 0, 0},
    RBAD("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
	 BODY_NOT_ALLOWED),
    RBAD("HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n",
	 BODY_NOT_ALLOWED),
    RBAD("HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
	 BODY_NOT_ALLOWED),
    RBAD("HTTP/1.1 100 Continue\r\nContent-Length: 5\r\n\r\n",
	 BODY_NOT_ALLOWED),
    RBAD("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
	 "Transfer-Encoding: chunked\r\n\r\n",
	 CL_TE),
    RBAD("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
	 DUP_CL),
    RBAD("HTTP/1.1 200 OK\r\nContent-Length: 5,5\r\n\r\n", BAD_CL),
    RBAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", TE_UNSUPPORTED),
    RBAD("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", BAD_TE),
    RBAD("HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", OBS_FOLD),
    RBAD("HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n", BARE_LF),
    RBAD("HTTP/1.1 200 OK\r\nX: \rb\r\n\r\n", BARE_CR),
    RBAD("HTTP/1.1 20 OK\r\n\r\n", STATUS_LINE),
    RBAD("HTTP/1.1 2000 OK\r\n\r\n", STATUS_LINE),
    RBAD("HTTP/1.1 099 X\r\n\r\n", STATUS_LINE),
    RBAD("HTTP/1.1 600 X\r\n\r\n", STATUS_LINE),
    RBAD("HTTP/1.1  200 OK\r\n\r\n", STATUS_LINE),
    RBAD("http/1.1 200 OK\r\n\r\n", STATUS_LINE),
    RBAD("HTTP/1.1 200 O\x01K\r\n\r\n", STATUS_LINE),
    RBAD("\r\nHTTP/1.1 200 OK\r\n\r\n", STATUS_LINE),
    RBAD("HTTP/2.0 200 OK\r\n\r\n", VERSION_UNSUPPORTED),
    RBAD("HTTP/1.1 200 OK\r\nX : y\r\n\r\n", SPACE_BEFORE_COLON),
};

static int presp_whole(const struct resp_case *c, struct h1_response *p)
{
	h1_response_init(p);
	return h1_parse_response(c->in, c->len, NULL, c->method, c->upgrade, p);
}

static int presp_bytes(const struct resp_case *c, struct h1_response *p)
{
	size_t k;
	int rc = 0;

	h1_response_init(p);
	for (k = 1; k <= c->len; k++) {
		rc =
		    h1_parse_response(c->in, k, NULL, c->method, c->upgrade, p);
		if (rc != 0 && k < c->len)
			ck_assert_int_lt(rc, 0); /* only errors come early */
	}
	return rc;
}

START_TEST(test_response)
{
	const struct resp_case *c = &resps[_i];
	struct h1_response *w = malloc(sizeof(*w)), *b = malloc(sizeof(*b));
	int rw, rb;
	unsigned fl;

	ck_assert_ptr_nonnull(w);
	ck_assert_ptr_nonnull(b);
	rw = presp_whole(c, w);
	rb = presp_bytes(c, b);
	ck_assert_msg(rw == rb, "case %d: whole %d, bytes %d", _i, rw, rb);
	if (c->err != H1_E_NONE) {
		ck_assert_msg(rw == -1 && w->h.err == c->err,
			      "case %d: rc %d err %s at %zu, want %s", _i, rw,
			      h1_err_name(w->h.err), w->h.err_off,
			      h1_err_name(c->err));
		ck_assert_int_eq(w->h.status, 502);
		ck_assert_int_eq(b->h.err, w->h.err);
		ck_assert_uint_eq(b->h.err_off, w->h.err_off);
	} else if (c->code == MORE) {
		ck_assert_int_eq(rw, 0);
	} else {
		ck_assert_msg(rw == (int)c->len, "case %d: rc %d err %s", _i,
			      rw, h1_err_name(w->h.err));
		ck_assert_int_eq(w->code, c->code);
		ck_assert_int_eq(w->body, c->body);
		fl = (w->h.chunked ? F_CHUNKED : 0) |
		     (w->h.keep_alive ? F_KA : 0) |
		     (w->upgrade ? F_UPGRADE : 0) |
		     (w->no_reuse ? F_NOREUSE : 0);
		ck_assert_msg(fl == c->flags, "case %d: flags %#x want %#x", _i,
			      fl, c->flags);
	}
	free(w);
	free(b);
}
END_TEST

/* --- chunked ------------------------------------------------------------- */

static const struct h1_limits ck_small = {.chunk_ext_max = 8,
					  .trailer_max = 16};

struct ck_case {
	const char *in;
	size_t len;
	int rc;		  /* H1_CHUNK_DONE, 0 (more) or -1 */
	enum h1_err err;  /* for -1 */
	const char *data; /* decoded body */
	size_t used;	  /* bytes consumed when DONE */
	unsigned trailers;
	const struct h1_limits *lim;
};

#define CDONE(in, data, used, tr)                                              \
	{                                                                      \
		S(in), H1_CHUNK_DONE, 0, data, used, tr, NULL                  \
	}
#define CMORE(in, data)                                                        \
	{                                                                      \
		S(in), 0, 0, data, 0, 0, NULL                                  \
	}
#define CBAD(in, e)                                                            \
	{                                                                      \
		S(in), -1, H1_E_##e, NULL, 0, 0, NULL                          \
	}
#define CBADL(in, e)                                                           \
	{                                                                      \
		S(in), -1, H1_E_##e, NULL, 0, 0, &ck_small                     \
	}

static const struct ck_case cks[] = {
    CDONE("5\r\nhello\r\n0\r\n\r\n", "hello", 15, 0),
    CDONE("5\r\nhello\r\n0\r\n\r\nGET / HTTP/1.1", "hello", 15, 0),
    CDONE("A\r\n0123456789\r\n0\r\n\r\n", "0123456789", 20, 0),
    CDONE("a\r\n0123456789\r\n1\r\nx\r\n0\r\n\r\n", "0123456789x", 26, 0),
    CDONE("0\r\n\r\n", "", 5, 0),
    CDONE("000\r\n\r\n", "", 7, 0),
    CDONE("0005\r\nhello\r\n0\r\n\r\n", "hello", 18, 0),
    CDONE("5;ext\r\nhello\r\n0\r\n\r\n", "hello", 19, 0),
    CDONE("5;a=b;c=\"q d\"\r\nhello\r\n0;z\r\n\r\n", "hello", 29, 0),
    CDONE("5;a=\"x\\\"y\"\r\nhello\r\n0\r\n\r\n", "hello", 24, 0),
    CDONE("0\r\nX-T: v\r\nY:w\r\n\r\n", "", 18, 2),
    CDONE("2\r\n\r\n\r\n0\r\n\r\n", "\r\n", 12, 0),
    CMORE("5\r\nhel", "hel"),
    CMORE("0\r\n\r", ""),
    CMORE("ffffffffffffffff\r\nab", "ab"),
    CMORE("5;a=\"x", ""),
    CBAD("5 \r\nhello\r\n0\r\n\r\n", CHUNK_SIZE),
    CBAD("5\t;x\r\n", CHUNK_SIZE),
    CBAD(" 5\r\n", CHUNK_SIZE),
    CBAD("-5\r\n", CHUNK_SIZE),
    CBAD("+5\r\n", CHUNK_SIZE),
    CBAD("0x5\r\n", CHUNK_SIZE),
    CBAD("\r\n", CHUNK_SIZE),
    CBAD("g\r\n", CHUNK_SIZE),
    CBAD("11111111111111111\r\n", CHUNK_SIZE),
    CBAD("5\nhello\r\n", CHUNK_SIZE),
    CBAD("5\r\r\n", CHUNK_SIZE),
    CBAD(";x\r\n", CHUNK_SIZE),
    CBAD("5;\r\nhello", CHUNK_EXT),
    CBAD("5;=x\r\n", CHUNK_EXT),
    CBAD("5;a=\r\n", CHUNK_EXT),
    CBAD("5;a b\r\n", CHUNK_EXT),
    CBAD("5; a\r\n", CHUNK_EXT),
    CBAD("5;a=\"x\r\n", CHUNK_EXT),
    CBAD("5;a=\"x\"y\r\n", CHUNK_EXT),
    CBAD("5;a\r\r\n", CHUNK_EXT),
    CBADL("5;abcdefghij\r\nhello\r\n0\r\n\r\n", CHUNK_EXT),
    CBAD("5\r\nhelloX\r\n0\r\n\r\n", CHUNK_CRLF),
    CBAD("5\r\nhello\n0\r\n\r\n", CHUNK_CRLF),
    CBAD("5\r\nhello\r0\r\n\r\n", CHUNK_CRLF),
    CBAD("3\r\nhello\r\n0\r\n\r\n", CHUNK_CRLF),
    CBAD("0\r\nA: b\r\n c\r\n\r\n", TRAILER),
    CBAD("0\r\nA b\r\n\r\n", TRAILER),
    CBAD("0\r\nA: b\n\r\n", TRAILER),
    CBAD("0\r\nA: b\0\r\n\r\n", TRAILER),
    CBAD("0\r\n\rX", TRAILER),
    CBAD("0\r\n\n", TRAILER),
    CBADL("0\r\nX-Long: 0123456789\r\n\r\n", TRAILER_TOO_LARGE),
};

struct ck_out {
	int rc;
	enum h1_err err;
	uint64_t err_off;
	char data[128];
	size_t ndata;
	size_t used; /* consumed in total */
	unsigned trailers;
};

/* Feed in[0..len) in pieces of at most step bytes (0: the first split
 * bytes, then the rest). */
static void ck_run(const struct ck_case *c, size_t split, size_t step,
		   struct ck_out *o)
{
	struct h1_chunked st;
	size_t pos = 0, end, used, off, n;
	int rc = 0;

	memset(o, 0, sizeof(*o));
	h1_chunked_init(&st, c->lim);
	while (pos < c->len) {
		end = step ? pos + step : (pos < split ? split : c->len);
		if (end > c->len)
			end = c->len;
		while (pos < end) {
			rc = h1_chunked_feed(&st, c->in + pos, end - pos, &used,
					     &off, &n);
			ck_assert_uint_le(used, end - pos);
			if (rc == H1_CHUNK_DATA) {
				ck_assert_uint_le(off + n, used);
				ck_assert_uint_le(o->ndata + n,
						  sizeof(o->data));
				memcpy(o->data + o->ndata, c->in + pos + off,
				       n);
				o->ndata += n;
			}
			pos += used;
			if (rc == H1_CHUNK_DONE || rc < 0)
				goto out;
		}
	}
out:
	o->rc = rc == H1_CHUNK_DATA ? 0 : rc;
	o->err = st.err;
	o->err_off = st.err_off;
	o->used = pos;
	o->trailers = st.trailers_dropped;
}

START_TEST(test_chunked)
{
	const struct ck_case *c = &cks[_i];
	struct ck_out w, s;
	size_t k;

	ck_run(c, c->len, 0, &w);
	ck_assert_msg(w.rc == c->rc, "case %d: rc %d (%s at %llu) want %d", _i,
		      w.rc, h1_err_name(w.err), (unsigned long long)w.err_off,
		      c->rc);
	if (c->rc < 0) {
		ck_assert_msg(w.err == c->err, "case %d: %s want %s", _i,
			      h1_err_name(w.err), h1_err_name(c->err));
	} else {
		ck_assert_uint_eq(w.ndata, strlen(c->data));
		ck_assert(!memcmp(w.data, c->data, w.ndata));
		ck_assert_uint_eq(w.trailers, c->trailers);
		if (c->rc == H1_CHUNK_DONE)
			ck_assert_uint_eq(w.used, c->used);
	}
	for (k = 0; k <= c->len + 1; k++) {
		if (k <= c->len)
			ck_run(c, k, 0, &s);
		else
			ck_run(c, 0, 1, &s);
		ck_assert_msg(s.rc == w.rc, "case %d split %zu: rc %d", _i, k,
			      s.rc);
		ck_assert_int_eq(s.err, w.err);
		ck_assert_uint_eq(s.err_off, w.err_off);
		ck_assert_uint_eq(s.ndata, w.ndata);
		ck_assert(!memcmp(s.data, w.data, w.ndata));
		ck_assert_uint_eq(s.trailers, w.trailers);
		if (w.rc != 0)
			ck_assert_uint_eq(s.used, w.used);
	}
}
END_TEST

START_TEST(test_chunked_sticky)
{
	struct h1_chunked st;
	size_t used, off, n;

	h1_chunked_init(&st, NULL);
	ck_assert_int_eq(h1_chunked_feed(&st, S("0\r\n\r\nX"), &used, &off, &n),
			 H1_CHUNK_DONE);
	ck_assert_uint_eq(used, 5);
	ck_assert_int_eq(h1_chunked_feed(&st, S("X"), &used, &off, &n),
			 H1_CHUNK_DONE);
	ck_assert_uint_eq(used, 0);
	h1_chunked_init(&st, NULL);
	ck_assert_int_eq(h1_chunked_feed(&st, S("z"), &used, &off, &n), -1);
	ck_assert_int_eq(h1_chunked_feed(&st, S("0\r\n\r\n"), &used, &off, &n),
			 -1);
	ck_assert_int_eq(st.err, H1_E_CHUNK_SIZE);
}
END_TEST

START_TEST(test_helpers)
{
	ck_assert_str_eq(h1_err_name(H1_E_CL_TE), "CL_TE");
	ck_assert_int_eq(h1_err_status(H1_E_LINE_TOO_LONG), 414);
	ck_assert_int_eq(h1_err_status(H1_E_TOO_MANY_HEADERS), 431);
	ck_assert_int_eq(h1_err_status(H1_E_VERSION_UNSUPPORTED), 505);
	ck_assert_int_eq(h1_err_status(H1_E_TE_UNSUPPORTED), 501);
	ck_assert_int_eq(h1_err_status(H1_E_EXPECT), 417);
	ck_assert_str_eq(h1_err_name((enum h1_err)999), "?");
	ck_assert_str_eq(h1_method_name(H1_M_PATCH), "PATCH");
	ck_assert_ptr_null(h1_method_name(H1_M_OTHER));
	ck_assert(h1_list_has(S("a, Close ,b"), "close"));
	ck_assert(!h1_list_has(S("closed"), "close"));
	ck_assert(h1_eq(S("Host"), "host"));
	ck_assert(!h1_eq(S("Hos"), "host"));
	ck_assert(!h1_eq(S("Hosts"), "host"));
}
END_TEST

/* The first chunk line alone: complete and valid, a valid start, or
 * broken (what h1_chunked_feed would say), whatever follows it. */
static const struct {
	const char *in;
	int rc;
	enum h1_err err;
} lines[] = {
    {"5\r\nhello\r\n0\r\n\r\n", 1, H1_E_NONE},
    {"0\r\n\r\n", 1, H1_E_NONE},
    {"0\r\n", 1, H1_E_NONE},
    {"00000000000000ff;a=b;c=\"d\"\r\nx", 1, H1_E_NONE},
    {"", 0, H1_E_NONE},
    {"1", 0, H1_E_NONE},
    {"1f;ext", 0, H1_E_NONE},
    {"1f\r", 0, H1_E_NONE},
    {"zz\r\nok\r\n0\r\n\r\n", -1, H1_E_CHUNK_SIZE},
    {"z", -1, H1_E_CHUNK_SIZE},
    {"10000000000000000\r\n", -1, H1_E_CHUNK_SIZE},
    {"00000000000000001", -1, H1_E_CHUNK_SIZE},
    {" 5\r\n", -1, H1_E_CHUNK_SIZE},
    {"5 \r\n", -1, H1_E_CHUNK_SIZE},
    {"5\n", -1, H1_E_CHUNK_SIZE},
    {"5\r5", -1, H1_E_CHUNK_SIZE},
    {"5;\r\n", -1, H1_E_CHUNK_EXT},
    {"5;a b\r\n", -1, H1_E_CHUNK_EXT},
    {"\r\n", -1, H1_E_CHUNK_SIZE},
};

START_TEST(test_chunk_line)
{
	const char *in = lines[_i].in;
	enum h1_err e = H1_E_NONE;
	struct h1_chunked st;
	size_t used, off, n;

	ck_assert_int_eq(h1_chunk_line_check(in, strlen(in), NULL, &e),
			 lines[_i].rc);
	if (lines[_i].rc < 0) {
		ck_assert_str_eq(h1_err_name(e), h1_err_name(lines[_i].err));
		/* the decoder refuses the same bytes */
		h1_chunked_init(&st, NULL);
		ck_assert_int_eq(
		    h1_chunked_feed(&st, in, strlen(in), &used, &off, &n), -1);
		ck_assert_int_eq(st.err, lines[_i].err);
	}
}
END_TEST

/* An over-long extension is refused within chunk_ext_max bytes. */
START_TEST(test_chunk_line_ext_max)
{
	struct h1_limits lim;
	enum h1_err e = H1_E_NONE;
	char in[64] = "1;";

	h1_limits_default(&lim);
	lim.chunk_ext_max = 8;
	memset(in + 2, 'a', 8);
	ck_assert_int_eq(h1_chunk_line_check(in, 9, &lim, &e), 0);
	ck_assert_int_eq(h1_chunk_line_check(in, 10, &lim, &e), -1);
	ck_assert_int_eq(e, H1_E_CHUNK_EXT);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("h1");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_request, 0,
			    sizeof(reqs) / sizeof(reqs[0]));
	tcase_add_test(tc, test_request_fields);
	tcase_add_test(tc, test_request_rebase_done);
	tcase_add_test(tc, test_request_limits_default);
	tcase_add_loop_test(tc, test_response, 0,
			    sizeof(resps) / sizeof(resps[0]));
	tcase_add_loop_test(tc, test_chunked, 0, sizeof(cks) / sizeof(cks[0]));
	tcase_add_test(tc, test_chunked_sticky);
	tcase_add_loop_test(tc, test_chunk_line, 0,
			    sizeof(lines) / sizeof(lines[0]));
	tcase_add_test(tc, test_chunk_line_ext_max);
	tcase_add_test(tc, test_helpers);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
