/* SPDX-License-Identifier: BSD-2-Clause */
/* test_compress.c - response compression's decision and head
 * (userspace/compress.c): every case never compressed, the coding by
 * Accept-Encoding (fields joined), the head's changes through the head
 * builder (Content-Encoding, Vary, a weak ETag, no Content-Length), the
 * group read from JSON and written back. */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "compress.h"
#include "unit.h"

static struct h1_request *req(const char *in)
{
	struct h1_request *r = malloc(sizeof(*r));

	ck_assert_ptr_nonnull(r);
	h1_request_init(r);
	ck_assert_int_eq(h1_parse_request(in, strlen(in), NULL, r),
			 (int)strlen(in));
	return r;
}

static struct h1_response *resp(const char *in, enum h1_method m)
{
	struct h1_response *p = malloc(sizeof(*p));

	ck_assert_ptr_nonnull(p);
	h1_response_init(p);
	ck_assert_int_eq(h1_parse_response(in, strlen(in), NULL, m, false, p),
			 (int)strlen(in));
	return p;
}

#define GZ "GET / HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip\r\n\r\n"
#define OK(fields) "HTTP/1.1 200 OK\r\n" fields "\r\n"

static enum enc choose(const char *rq, const char *rs, int64_t cl,
		       const struct config_compression *c)
{
	struct h1_request *q = req(rq);
	struct h1_response *p = resp(rs, q->method);
	enum enc e = compress_choose(c, q, p, cl);

	free(q);
	free(p);
	return e;
}

START_TEST(test_choose)
{
	struct config_compression c;
	static const char json_5k[] =
	    OK("Content-Type: application/json\r\nContent-Length: 5000\r\n");

	ck_assert_int_eq(choose(GZ, json_5k, 5000, NULL), ENC_GZIP);
	ck_assert_int_eq(
	    choose("GET / HTTP/1.1\r\nHost: a\r\nAccept-Encoding: br\r\n"
		   "Accept-Encoding: zstd;q=0.5\r\n\r\n",
		   json_5k, 5000, NULL),
	    ENC_BR);
	ck_assert_int_eq(
	    choose("GET / HTTP/1.1\r\nHost: a\r\n\r\n", json_5k, 5000, NULL),
	    ENC_IDENTITY);
	/* never */
	ck_assert_int_eq(choose("HEAD / HTTP/1.1\r\nHost: a\r\n"
				"Accept-Encoding: gzip\r\n\r\n",
				json_5k, 5000, NULL),
			 ENC_IDENTITY);
	ck_assert_int_eq(choose("GET / HTTP/1.1\r\nHost: a\r\nRange: "
				"bytes=0-1\r\nAccept-Encoding: gzip\r\n\r\n",
				json_5k, 5000, NULL),
			 ENC_IDENTITY);
	ck_assert_int_eq(choose(GZ,
				"HTTP/1.1 206 Partial Content\r\nContent-Type: "
				"text/plain\r\nContent-Length: 5000\r\n\r\n",
				5000, NULL),
			 ENC_IDENTITY);
	ck_assert_int_eq(choose(GZ,
				"HTTP/1.1 204 No Content\r\nContent-Type: "
				"text/plain\r\n\r\n",
				-1, NULL),
			 ENC_IDENTITY);
	ck_assert_int_eq(choose(GZ,
				"HTTP/1.1 304 Not Modified\r\nContent-Type: "
				"text/plain\r\n\r\n",
				-1, NULL),
			 ENC_IDENTITY);
	ck_assert_int_eq(choose(GZ,
				OK("Content-Type: application/json\r\n"
				   "Content-Encoding: gzip\r\n"
				   "Content-Length: 5000\r\n"),
				5000, NULL),
			 ENC_IDENTITY);
	ck_assert_int_eq(choose(GZ,
				OK("Content-Type: application/json\r\n"
				   "Content-Encoding: identity\r\n"
				   "Content-Length: 5000\r\n"),
				5000, NULL),
			 ENC_GZIP);
	ck_assert_int_eq(choose(GZ,
				OK("Content-Type: application/json\r\n"
				   "Cache-Control: public, No-Transform\r\n"
				   "Content-Length: 5000\r\n"),
				5000, NULL),
			 ENC_IDENTITY);
	ck_assert_int_eq(choose(GZ,
				OK("Content-Type: image/png\r\n"
				   "Content-Length: 5000\r\n"),
				5000, NULL),
			 ENC_IDENTITY);
	ck_assert_int_eq(choose(GZ, OK("Content-Length: 5000\r\n"), 5000, NULL),
			 ENC_IDENTITY);
	ck_assert_int_eq(choose(GZ,
				OK("Content-Type: text/html\r\n"
				   "Content-Length: 1023\r\n"),
				1023, NULL),
			 ENC_IDENTITY);
	ck_assert_int_eq(choose(GZ,
				OK("Content-Type: text/html\r\n"
				   "Transfer-Encoding: chunked\r\n"),
				-1, NULL),
			 ENC_GZIP);
	/* a group of its own */
	compress_defaults(&c);
	c.algos[0] = ENC_BR;
	c.n_algos = 1;
	c.min_bytes = 0;
	ck_assert_int_eq(choose(GZ, json_5k, 5000, &c), ENC_IDENTITY);
	c.algos[1] = ENC_GZIP;
	c.n_algos = 2;
	ck_assert_int_eq(choose(GZ,
				OK("Content-Type: text/html\r\n"
				   "Content-Length: 3\r\n"),
				3, &c),
			 ENC_GZIP);
	/* an empty body, even at min_bytes 0 (its coded form would be a
	 * body where there was none) */
	ck_assert_int_eq(choose(GZ,
				OK("Content-Type: text/html\r\n"
				   "Content-Length: 0\r\n"),
				0, &c),
			 ENC_IDENTITY);
	c.enabled = false;
	ck_assert_int_eq(choose(GZ, json_5k, 5000, &c), ENC_IDENTITY);
}
END_TEST

START_TEST(test_head)
{
	struct h1_response *p =
	    resp(OK("Content-Type: text/html\r\nETag: \"v1\"\r\n"
		    "Content-Encoding: identity\r\nContent-Length: 5000\r\n"),
		 H1_M_GET);
	struct compress_edit ce;
	struct hdr_buf b;

	hdr_buf_init(&b, 0);
	ck_assert_int_eq(
	    hdr_build_response(
		&b, p, "rid", "X-Content-Type-Options: nosniff\r\n",
		compress_edit_init(&ce, ENC_BR, p, NULL), -1, true, false),
	    0);
	ck_assert_int_eq(hdr_buf_add(&b, "", 1), 0);
	ck_assert_str_eq(b.p, "HTTP/1.1 200 OK\r\n"
			      "Content-Type: text/html\r\n"
			      "X-Request-ID: rid\r\n"
			      "X-Content-Type-Options: nosniff\r\n"
			      "Content-Encoding: br\r\n"
			      "Vary: Accept-Encoding\r\n"
			      "ETag: W/\"v1\"\r\n"
			      "Transfer-Encoding: chunked\r\n\r\n");
	hdr_buf_free(&b);
	free(p);
}
END_TEST

START_TEST(test_json)
{
	struct config_compression c, d;
	struct errbuf e;
	json_t *o, *back;

	o = json_loads(
	    "{\"enabled\": true, \"algorithms\": [\"br\", \"gzip\"], "
	    "\"min_bytes\": 10, \"types\": [\"text/*\"], "
	    "\"level\": {\"gzip\": 9}}",
	    0, NULL);
	ck_assert_int_eq(compress_from_json(o, &c, &e), 0);
	json_decref(o);
	ck_assert_uint_eq(c.n_algos, 2);
	ck_assert_int_eq(c.algos[0], ENC_BR);
	ck_assert_uint_eq(c.min_bytes, 10);
	ck_assert_uint_eq(c.n_types, 1);
	ck_assert_int_eq(c.level[ENC_GZIP], 9);
	back = compress_to_json(&c);
	ck_assert_int_eq(compress_from_json(back, &d, NULL), 0);
	ck_assert_uint_eq(d.n_algos, 2);
	ck_assert_str_eq(d.types[0], "text/*");
	ck_assert_int_eq(d.level[ENC_GZIP], 9);
	json_decref(back);
	compress_free(&c);
	compress_free(&d);
#define BAD(T, M)                                                              \
	do {                                                                   \
		o = json_loads(T, JSON_DECODE_ANY, NULL);                      \
		ck_assert_ptr_nonnull(o);                                      \
		errbuf_clear(&e);                                              \
		ck_assert_int_eq(compress_from_json(o, &c, &e), -EINVAL);      \
		ck_assert_msg(strstr(e.msg, M), "%s: %s", T, e.msg);           \
		ck_assert(c.enabled &&c.n_algos == 3 && !c.types);             \
		json_decref(o);                                                \
	} while (0)
	BAD("[]", "an object");
	BAD("{\"enabled\": 1}", "true or false");
	BAD("{\"algorithms\": []}", "1 to 3");
	BAD("{\"algorithms\": [\"gzip\", \"gzip\"]}", "once");
	BAD("{\"algorithms\": [\"deflate\"]}", "zstd, br or gzip");
	BAD("{\"min_bytes\": -1}", "a number of bytes");
	BAD("{\"types\": [\"text\"]}", "types[0]");
	BAD("{\"types\": [\"text/html\", 5]}", "types[1]");
	BAD("{\"level\": {\"gzip\": 10}}", "level.gzip");
	BAD("{\"level\": {\"deflate\": 1}}", "level.deflate");
	BAD("{\"speed\": 1}", "unknown key");
#undef BAD
	ck_assert_int_eq(compress_from_json(NULL, &c, NULL), 0);
	ck_assert(c.enabled);
}
END_TEST

static Suite *compress_suite(void)
{
	Suite *s = suite_create("compress");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_choose);
	tcase_add_test(tc, test_head);
	tcase_add_test(tc, test_json);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(compress_suite());
}
