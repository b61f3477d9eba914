/* SPDX-License-Identifier: BSD-2-Clause */
/* test_encoding.c - content codings (userspace/encoding.c): the coding
 * Accept-Encoding and edge's preference choose (q-values, "*", q=0,
 * malformed members), media types listed, and each streaming encoder's
 * output decoded by the coding's own decoder (zlib, libbrotli, libzstd):
 * whole at the end, and up to every flush as it goes (what a client of a
 * paused stream has). */
#include <brotli/decode.h>
#include <check.h>
#include <event2/buffer.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "encoding.h"
#include "unit.h"

static const enum enc prefs[] = {ENC_ZSTD, ENC_BR, ENC_GZIP};

static enum enc choose(const char *ae)
{
	return enc_choose(ae, ae ? strlen(ae) : 0, prefs, 3);
}

START_TEST(test_choose)
{
	static const enum enc gz_only[] = {ENC_GZIP};

	ck_assert_int_eq(choose(NULL), ENC_IDENTITY);
	ck_assert_int_eq(choose(""), ENC_IDENTITY);
	ck_assert_int_eq(choose("gzip"), ENC_GZIP);
	ck_assert_int_eq(choose("GZip"), ENC_GZIP);
	ck_assert_int_eq(choose("gzip, deflate, br"), ENC_BR);
	ck_assert_int_eq(choose("gzip, deflate, br, zstd"), ENC_ZSTD);
	ck_assert_int_eq(choose("br;q=0.5, gzip"), ENC_GZIP);
	ck_assert_int_eq(choose("br ; q=0.8 , gzip;q=0.8"), ENC_BR);
	ck_assert_int_eq(choose("*"), ENC_ZSTD);
	ck_assert_int_eq(choose("*;q=0, gzip"), ENC_GZIP);
	ck_assert_int_eq(choose("zstd;q=0, *;q=0.1"), ENC_BR);
	ck_assert_int_eq(choose("gzip;q=0"), ENC_IDENTITY);
	ck_assert_int_eq(choose("gzip;q=0.000"), ENC_IDENTITY);
	ck_assert_int_eq(choose("gzip;q=0.001"), ENC_GZIP);
	ck_assert_int_eq(choose("identity"), ENC_IDENTITY);
	ck_assert_int_eq(choose("x-gzip, deflate"), ENC_IDENTITY);
	ck_assert_int_eq(choose("br;level=5"), ENC_BR);
	/* malformed members are ignored, the others kept */
	ck_assert_int_eq(choose("gzip;q=1.5"), ENC_IDENTITY);
	ck_assert_int_eq(choose("gzip;q=, br"), ENC_BR);
	ck_assert_int_eq(choose("gzip;q=0.5000"), ENC_IDENTITY);
	ck_assert_int_eq(choose("gzip q=1"), ENC_IDENTITY);
	ck_assert_int_eq(choose(";q=1, gzip"), ENC_GZIP);
	ck_assert_int_eq(choose(",,, ,gzip,,"), ENC_GZIP);
	/* the last of a coding named twice counts only if higher */
	ck_assert_int_eq(choose("gzip;q=0, gzip;q=1"), ENC_GZIP);
	/* only what edge offers */
	ck_assert_int_eq(enc_choose("br, zstd", 8, gz_only, 1), ENC_IDENTITY);
	ck_assert_int_eq(enc_choose("br, gzip;q=0.1", 14, gz_only, 1),
			 ENC_GZIP);
	ck_assert_int_eq(enc_parse("zstd", 4), ENC_ZSTD);
	ck_assert_int_eq(enc_parse("zst", 3), -1);
	ck_assert_str_eq(enc_name(ENC_BR), "br");
}
END_TEST

START_TEST(test_types)
{
	static const char *const types[] = {"text/*", "application/json",
					    "image/svg+xml"};
#define LISTED(ct) enc_type_listed(ct, strlen(ct), types, 3)

	ck_assert(LISTED("text/html"));
	ck_assert(LISTED("text/html; charset=utf-8"));
	ck_assert(LISTED("TEXT/CSS"));
	ck_assert(LISTED("  application/json ;charset=utf-8"));
	ck_assert(LISTED("image/SVG+xml"));
	ck_assert(!LISTED("application/jsonx"));
	ck_assert(!LISTED("application/javascript"));
	ck_assert(!LISTED("textual/html"));
	ck_assert(!LISTED("text"));
	ck_assert(!LISTED(""));
	ck_assert(!LISTED("image/png"));
	ck_assert(enc_type_valid("text/*"));
	ck_assert(enc_type_valid("application/vnd.api+json"));
	ck_assert(!enc_type_valid("*/*"));
	ck_assert(!enc_type_valid("text/h*"));
	ck_assert(!enc_type_valid("text"));
	ck_assert(!enc_type_valid("text/"));
	ck_assert(!enc_type_valid("/html"));
	ck_assert(!enc_type_valid("text/html; charset=utf-8"));
#undef LISTED
}
END_TEST

/* Decode all of in (coding e) into out (cap bytes): its length, or -1
 * when it does not decode. A stream not finished decodes as far as it
 * goes (what a flush must make whole). */
static long decode(enum enc e, const unsigned char *in, size_t n,
		   unsigned char *out, size_t cap)
{
	if (e == ENC_GZIP) {
		z_stream z;
		long got;
		int rc;

		memset(&z, 0, sizeof(z));
		ck_assert_int_eq(inflateInit2(&z, 15 + 16), Z_OK);
		z.next_in = (Bytef *)(uintptr_t)in;
		z.avail_in = (uInt)n;
		z.next_out = out;
		z.avail_out = (uInt)cap;
		rc = inflate(&z, Z_SYNC_FLUSH);
		got = (long)(cap - z.avail_out);
		inflateEnd(&z);
		return rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR
			   ? got
			   : -1;
	}
	if (e == ENC_BR) {
		BrotliDecoderState *d =
		    BrotliDecoderCreateInstance(NULL, NULL, NULL);
		const uint8_t *ip = in;
		uint8_t *op = out;
		size_t ai = n, ao = cap;
		BrotliDecoderResult r =
		    BrotliDecoderDecompressStream(d, &ai, &ip, &ao, &op, NULL);

		BrotliDecoderDestroyInstance(d);
		return r == BROTLI_DECODER_RESULT_ERROR ? -1 : (long)(cap - ao);
	} else {
		ZSTD_DStream *d = ZSTD_createDStream();
		ZSTD_inBuffer ib = {in, n, 0};
		ZSTD_outBuffer ob = {out, cap, 0};
		size_t r = ZSTD_decompressStream(d, &ob, &ib);

		while (!ZSTD_isError(r) && ib.pos < ib.size && ob.pos < cap)
			r = ZSTD_decompressStream(d, &ob, &ib);
		ZSTD_freeDStream(d);
		return ZSTD_isError(r) ? -1 : (long)ob.pos;
	}
}

/* the body: text that compresses, with some noise */
static unsigned char *body_make(size_t n)
{
	unsigned char *b = malloc(n);
	uint32_t x = 12345;
	size_t i;

	ck_assert_ptr_nonnull(b);
	for (i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		b[i] = (i % 61 == 60) ? '\n'
		       : (x >> 28) == 0
			   ? (unsigned char)('A' + (x >> 16) % 26)
			   : (unsigned char)("edge proxy "[i % 11]);
	}
	return b;
}

START_TEST(test_streams)
{
	const size_t n = 1 << 20;
	unsigned char *body = body_make(n), *dec = malloc(n + 16), *flat;
	enum enc e = (enum enc)(_i + 1);
	struct evbuffer *out = evbuffer_new();
	struct enc_stream *s = enc_stream_new(e, 0);
	size_t off = 0, piece = 1, flushed_at = 0;
	long got;

	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_nonnull(dec);
	while (off < n) {
		if (piece > n - off)
			piece = n - off;
		ck_assert_int_eq(enc_stream_write(s, body + off, piece, out),
				 0);
		off += piece;
		piece = piece * 3 + 7;
		if (piece > 200000)
			piece = 5;
		/* a pause: everything so far decodes, and nothing more */
		if (off > flushed_at + 300000) {
			ck_assert_int_eq(enc_stream_flush(s, out), 0);
			flat = evbuffer_pullup(out, -1);
			got = decode(e, flat, evbuffer_get_length(out), dec,
				     n + 16);
			ck_assert_int_eq(got, (long)off);
			ck_assert(memcmp(dec, body, off) == 0);
			flushed_at = off;
		}
	}
	ck_assert_int_eq(enc_stream_finish(s, out), 0);
	ck_assert_uint_eq(enc_stream_in(s), n);
	ck_assert_uint_eq(enc_stream_out(s), evbuffer_get_length(out));
	/* it compressed */
	ck_assert_uint_lt(evbuffer_get_length(out), n / 3);
	flat = evbuffer_pullup(out, -1);
	got = decode(e, flat, evbuffer_get_length(out), dec, n + 16);
	ck_assert_int_eq(got, (long)n);
	ck_assert(memcmp(dec, body, n) == 0);
	enc_stream_free(s);
	evbuffer_free(out);
	free(body);
	free(dec);
}
END_TEST

/* An empty body still makes a whole stream; levels out of range are
 * clamped; identity makes none. */
START_TEST(test_edges)
{
	enum enc e;
	unsigned char dec[8];

	ck_assert_ptr_null(enc_stream_new(ENC_IDENTITY, 0));
	ck_assert_ptr_null(enc_stream_new(ENC_N, 0));
	for (e = ENC_GZIP; e < ENC_N; e++) {
		struct evbuffer *out = evbuffer_new();
		struct enc_stream *s = enc_stream_new(e, 1000);

		ck_assert_ptr_nonnull(s);
		ck_assert_int_eq(enc_stream_flush(s, out), 0);
		ck_assert_int_eq(enc_stream_flush(s, out), 0);
		ck_assert_int_eq(enc_stream_finish(s, out), 0);
		ck_assert_uint_gt(evbuffer_get_length(out), 0);
		ck_assert_int_eq(decode(e, evbuffer_pullup(out, -1),
					evbuffer_get_length(out), dec,
					sizeof(dec)),
				 0);
		enc_stream_free(s);
		evbuffer_free(out);
	}
	enc_stream_free(NULL);
}
END_TEST

static Suite *encoding_suite(void)
{
	Suite *s = suite_create("encoding");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_choose);
	tcase_add_test(tc, test_types);
	tcase_add_loop_test(tc, test_streams, 0, 3);
	tcase_add_test(tc, test_edges);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(encoding_suite());
}
