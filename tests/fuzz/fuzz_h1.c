/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fuzz_h1.c - libFuzzer target for userspace/h1.c. The input is parsed as
 * a request head, a response head and a chunked body, each whole and split
 * in two at a point derived from the data (the second call sees the bytes
 * in a different buffer, so spans must be rebased). Asserts: consumed <=
 * len, every span inside the buffer, and identical results either way.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "h1.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                               \
	do {                                                                   \
		if (!(x))                                                      \
			abort();                                               \
	} while (0)

static void span_in(const char *p, size_t n, const char *buf, size_t len)
{
	if (!p) {
		CHECK(n == 0);
		return;
	}
	CHECK(p >= buf && p <= buf + len && n <= (size_t)(buf + len - p));
}

static size_t span_off(const char *p, const char *buf)
{
	return p ? (size_t)(p - buf) + 1 : 0;
}

static void head_check(const struct h1_head *h, const char *buf, size_t len,
		       int rc)
{
	unsigned i;

	CHECK(rc <= (int)len);
	CHECK(h->nheaders <= H1_MAX_HEADERS);
	if (rc < 0)
		CHECK(h->err != H1_E_NONE && h->err_off <= len &&
		      h->status >= 400);
	for (i = 0; i < h->nheaders; i++) {
		span_in(h->headers[i].name, h->headers[i].name_len, buf, len);
		span_in(h->headers[i].value, h->headers[i].value_len, buf, len);
	}
	span_in(h->upgrade_proto, h->upgrade_len, buf, len);
}

static void head_same(const struct h1_head *a, const char *abuf,
		      const struct h1_head *b, const char *bbuf)
{
	unsigned i;

	CHECK(a->err == b->err && a->err_off == b->err_off &&
	      a->status == b->status);
	if (a->err != H1_E_NONE)
		return;
	CHECK(a->nheaders == b->nheaders);
	CHECK(a->content_length == b->content_length);
	CHECK(a->chunked == b->chunked && a->keep_alive == b->keep_alive);
	for (i = 0; i < a->nheaders; i++) {
		CHECK(span_off(a->headers[i].name, abuf) ==
		      span_off(b->headers[i].name, bbuf));
		CHECK(a->headers[i].value_len == b->headers[i].value_len);
	}
}

static void request(const char *buf, const char *copy, size_t len, size_t k,
		    const struct h1_limits *lim)
{
	static struct h1_request a, b;
	int ra, rb;

	h1_request_init(&a);
	ra = h1_parse_request(buf, len, lim, &a);
	head_check(&a.h, buf, len, ra);
	span_in(a.target, a.target_len, buf, len);
	span_in(a.path, a.path_len, buf, len);
	span_in(a.query, a.query_len, buf, len);
	span_in(a.host, a.host_len, buf, len);
	span_in(a.method_str, a.method_len, buf, len);
	if (ra > 0)
		CHECK(a.h.minor == 0 || a.h.minor == 1);

	h1_request_init(&b);
	rb = h1_parse_request(copy, k, lim, &b);
	if (rb == 0)
		rb = h1_parse_request(buf, len, lim, &b);
	else
		CHECK(rb < 0 || rb == ra);
	CHECK(ra == rb);
	head_same(&a.h, buf, &b.h,
		  rb == ra && b.h.st.base == (uintptr_t)copy ? copy : buf);
	if (ra > 0 && b.h.st.base == (uintptr_t)buf) {
		CHECK(span_off(a.host, buf) == span_off(b.host, buf));
		CHECK(span_off(a.path, buf) == span_off(b.path, buf));
		CHECK(a.method == b.method && a.upgrade == b.upgrade);
	}
}

static void response(const char *buf, const char *copy, size_t len, size_t k,
		     enum h1_method m, bool up)
{
	static struct h1_response a, b;
	int ra, rb;

	h1_response_init(&a);
	ra = h1_parse_response(buf, len, NULL, m, up, &a);
	head_check(&a.h, buf, len, ra);
	span_in(a.reason, a.reason_len, buf, len);
	if (ra < 0)
		CHECK(a.h.status == 502);
	if (ra > 0)
		CHECK(a.code >= 100 && a.code <= 599);

	h1_response_init(&b);
	rb = h1_parse_response(copy, k, NULL, m, up, &b);
	if (rb == 0)
		rb = h1_parse_response(buf, len, NULL, m, up, &b);
	CHECK(ra == rb);
	CHECK(a.h.err == b.h.err && a.h.err_off == b.h.err_off);
	if (ra > 0)
		CHECK(a.code == b.code && a.body == b.body &&
		      a.upgrade == b.upgrade && a.no_reuse == b.no_reuse);
}

/* Decode buf in pieces ending at k and len; the data goes to out. */
static int chunked(const char *buf, size_t len, size_t k, char *out,
		   size_t *nout, struct h1_chunked *st)
{
	size_t pos = 0, end, used, off, n;
	int rc = 0;

	*nout = 0;
	h1_chunked_init(st, NULL);
	while (pos < len) {
		end = pos < k ? k : len;
		while (pos < end) {
			rc = h1_chunked_feed(st, buf + pos, end - pos, &used,
					     &off, &n);
			CHECK(used <= end - pos);
			if (rc == H1_CHUNK_DATA) {
				CHECK(n > 0 && off + n <= used);
				memcpy(out + *nout, buf + pos + off, n);
				*nout += n;
			} else if (rc == 0) {
				CHECK(used == end - pos);
			}
			pos += used;
			if (rc == H1_CHUNK_DONE || rc < 0)
				return rc;
		}
	}
	return rc == H1_CHUNK_DATA ? 0 : rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct h1_limits small = {.line_max = 64,
					       .head_max = 256,
					       .headers_max = 8,
					       .empty_lines_max = 1};
	struct h1_chunked sa, sb;
	char *buf, *copy, *oa, *ob;
	const char *eol;
	size_t len, k, na, nb;
	enum h1_err e = H1_E_NONE;
	int ca, cb, cl;
	uint8_t sel;

	if (size < 1)
		return 0;
	sel = data[0];
	len = size - 1;
	buf = malloc(len ? len : 1);
	copy = malloc(len ? len : 1);
	oa = malloc(len ? len : 1);
	ob = malloc(len ? len : 1);
	CHECK(buf && copy && oa && ob);
	memcpy(buf, data + 1, len);
	memcpy(copy, data + 1, len);
	k = len ? (size_t)sel * len / 255 : 0;

	request(buf, copy, len, k, NULL);
	request(buf, copy, len, k, &small);
	response(buf, copy, len, k, (sel & 1) ? H1_M_HEAD : H1_M_GET,
		 (sel & 2) != 0);

	ca = chunked(buf, len, len, oa, &na, &sa);
	cb = chunked(buf, len, k, ob, &nb, &sb);
	CHECK(ca == cb && na == nb && !memcmp(oa, ob, na));
	CHECK(sa.err == sb.err && sa.err_off == sb.err_off &&
	      sa.trailers_dropped == sb.trailers_dropped);
	CHECK(sa.data_total == na);

	/* the first chunk line alone: refused exactly when the decoder fails
	 * inside it (with the same error), complete exactly when the decoder
	 * got past its LF */
	cl = h1_chunk_line_check(buf, len, NULL, &e);
	eol = memchr(buf, '\n', len);
	if (cl < 0)
		CHECK(ca < 0 && sa.err == e &&
		      (!eol || sa.err_off <= (uint64_t)(eol - buf)));
	else if (cl == 1)
		CHECK(eol && (ca >= 0 || sa.err_off > (uint64_t)(eol - buf)));
	else
		CHECK(ca == 0);

	free(buf);
	free(copy);
	free(oa);
	free(ob);
	return 0;
}
