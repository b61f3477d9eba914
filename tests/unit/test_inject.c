/* SPDX-License-Identifier: BSD-2-Clause */
/* test_inject.c - script and pixel injection (userspace/inject.c): where
 * the snippets go (the first </head>, the last </body>, any case, white
 * space before '>', look-alikes refused), when a response is read for
 * it, the database's JSON, the CSP check at load; and the decoders
 * (userspace/encoding.c) an injected page is read with: each coding's
 * own encoder's output decoded back, fed a byte at a time, several gzip
 * members and zstd frames, a bomb stopped at its limit, a truncated or
 * corrupt stream and bytes after a br stream refused. */
#include <brotli/encode.h>
#include <check.h>
#include <event2/buffer.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "encoding.h"
#include "inject.h"
#include "unit.h"

static struct config_inject snippets(const char *head, const char *body)
{
	struct config_inject c;

	memset(&c, 0, sizeof(c));
	if (head)
		ck_assert_int_eq(inject_set(&c, INJECT_HEAD_END, head,
					    strlen(head), NULL, NULL),
				 0);
	if (body)
		ck_assert_int_eq(inject_set(&c, INJECT_BODY_END, body,
					    strlen(body), NULL, NULL),
				 0);
	return c;
}

/* page with c's snippets, as a string ("" when no tag) */
static char *apply(const struct config_inject *c, const char *page)
{
	struct evbuffer *out = evbuffer_new();
	size_t n;
	char *s;

	if (!inject_apply(c, page, strlen(page), out)) {
		ck_assert_uint_eq(evbuffer_get_length(out), 0);
		evbuffer_free(out);
		return strdup("");
	}
	n = evbuffer_get_length(out);
	s = malloc(n + 1);
	evbuffer_remove(out, s, n);
	s[n] = '\0';
	evbuffer_free(out);
	return s;
}

#define APPLY_EQ(c, page, want)                                                \
	do {                                                                   \
		char *got_ = apply(c, page);                                   \
		ck_assert_str_eq(got_, want);                                  \
		free(got_);                                                    \
	} while (0)

START_TEST(test_where)
{
	struct config_inject both = snippets("[H]", "[B]");
	struct config_inject head = snippets("[H]", NULL);
	struct config_inject body = snippets(NULL, "[B]");

	APPLY_EQ(&both, "<head></head><body></body>",
		 "<head>[H]</head><body>[B]</body>");
	APPLY_EQ(&both, "<HEAD></HEAD ><BODY></Body\n>",
		 "<HEAD>[H]</HEAD ><BODY>[B]</Body\n>");
	/* the first </head>, the last </body> */
	APPLY_EQ(&both, "</head></head></body>x</body>y",
		 "[H]</head></head></body>x[B]</body>y");
	/* one tag only */
	APPLY_EQ(&both, "<p>x</p></body>", "<p>x</p>[B]</body>");
	APPLY_EQ(&head, "</head></body>", "[H]</head></body>");
	APPLY_EQ(&body, "</head></body>", "</head>[B]</body>");
	/* odd order: each at its place */
	APPLY_EQ(&both, "</body></head>", "[B]</body>[H]</head>");
	/* look-alikes are not the tags */
	APPLY_EQ(&both, "</header></bodyx></ head></head", "");
	APPLY_EQ(&both, "", "");
	APPLY_EQ(&both, "</body", "");
	APPLY_EQ(&head, "<p>no head end</p></body>", "");
	ck_assert_int_eq(inject_find(INJECT_HEAD_END, "a</head>", 8), 1);
	ck_assert_int_eq(inject_find(INJECT_BODY_END, "</body></body>", 14), 7);
	ck_assert_int_eq(inject_find(INJECT_BODY_END, "</body \t>", 9), 0);
	ck_assert_int_eq(inject_find(INJECT_BODY_END, "</body \t", 8), -1);
	inject_free(&both);
	inject_free(&head);
	inject_free(&body);
}
END_TEST

START_TEST(test_set)
{
	struct config_inject c;
	struct errbuf e;
	char *big = calloc(1, INJECT_SNIPPET_MAX + 2);

	memset(&c, 0, sizeof(c));
	ck_assert(!inject_any(&c));
	ck_assert(!inject_any(NULL));
	memset(big, 'a', INJECT_SNIPPET_MAX + 1);
	ck_assert_int_eq(inject_set(&c, INJECT_HEAD_END, big,
				    INJECT_SNIPPET_MAX + 1, NULL, &e),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "at most"));
	ck_assert_int_eq(
	    inject_set(&c, INJECT_HEAD_END, big, INJECT_SNIPPET_MAX, NULL, &e),
	    0);
	ck_assert_int_eq(inject_set(&c, INJECT_BODY_END, "a\0b", 3, NULL, &e),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "NUL"));
	ck_assert(inject_any(&c));
	/* empty: none */
	ck_assert_int_eq(inject_set(&c, INJECT_HEAD_END, "", 0, NULL, &e), 0);
	ck_assert(!inject_any(&c));
	inject_free(&c);
	free(big);
}
END_TEST

START_TEST(test_json)
{
	struct config_inject c, d;
	struct errbuf e;
	json_t *o, *back;

	o = json_loads("{\"head_end\": \"<script>x</script>\", "
		       "\"body_end\": null}",
		       0, NULL);
	ck_assert_int_eq(inject_from_json(o, &c, &e), 0);
	ck_assert_str_eq(c.text[INJECT_HEAD_END], "<script>x</script>");
	ck_assert_ptr_null(c.text[INJECT_BODY_END]);
	back = inject_to_json(&c);
	ck_assert_int_eq(inject_from_json(back, &d, &e), 0);
	ck_assert_str_eq(d.text[INJECT_HEAD_END], "<script>x</script>");
	json_decref(back);
	json_decref(o);
	inject_free(&d);
	ck_assert_int_eq(inject_dup(&c, &d), 0);
	ck_assert_str_eq(d.text[INJECT_HEAD_END], "<script>x</script>");
	inject_free(&d);
	inject_free(&c);
	ck_assert_int_eq(inject_from_json(NULL, &c, &e), 0);
	ck_assert(!inject_any(&c));
	ck_assert_ptr_null(inject_to_json(&c));
	o = json_null();
	ck_assert_int_eq(inject_from_json(o, &c, &e), 0);
	json_decref(o);
	/* refused, each with its reason */
	static const struct {
		const char *json, *why;
	} bad[] = {
	    {"[]", "an object"},
	    {"{\"head_end\": 5}", "a string"},
	    {"{\"head_end\": {\"file\": \"/etc/passwd\"}}", "names no file"},
	    {"{\"file\": \"/x\"}", "not a key"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o = json_loads(bad[i].json, JSON_DECODE_ANY, NULL);
		ck_assert_ptr_nonnull(o);
		ck_assert_int_eq(inject_from_json(o, &c, &e), -EINVAL);
		ck_assert_msg(strstr(e.msg, bad[i].why), "%s: %s", bad[i].json,
			      e.msg);
		ck_assert(!inject_any(&c));
		json_decref(o);
	}
}
END_TEST

/* page through an inject_stream in pieces of the sizes cuts says (0
 * ends; the rest in one), as a string */
static char *streamed(const struct config_inject *c, const char *page,
		      const size_t *cuts)
{
	struct inject_stream *st = inject_stream_new(c);
	struct evbuffer *out = evbuffer_new();
	size_t n = strlen(page), off = 0, k, len;
	char *s;

	ck_assert_ptr_nonnull(st);
	for (; cuts && *cuts && off < n; cuts++) {
		k = *cuts < n - off ? *cuts : n - off;
		ck_assert_int_eq(inject_stream_write(st, page + off, k, out),
				 0);
		off += k;
	}
	ck_assert_int_eq(inject_stream_write(st, page + off, n - off, out), 0);
	ck_assert_int_eq(inject_stream_finish(st, out), 0);
	len = evbuffer_get_length(out);
	s = malloc(len + 1);
	evbuffer_remove(out, s, len);
	s[len] = '\0';
	evbuffer_free(out);
	inject_stream_free(st);
	return s;
}

START_TEST(test_stream)
{
	static const char *const pages[] = {
	    "<html><head><title>t</title></head>\n<body><p>x</p></body>\n"
	    "</html>\n",
	    "<HTML><HEAD></HEAD ><body><!-- </body> --><p>x</p></BODY\t>\n",
	    "</head></head></body>x</body>y</body >z",
	    "<<</</h</he</hea</head</head </bo</bod</body</body >",
	    "no tags at all < / << </ </b </h",
	    "</head></body",
	    "",
	};
	struct config_inject both = snippets("[H]", "[B]");
	struct config_inject body = snippets(NULL, "[B]");
	size_t cuts[3] = {0, 0, 0}, i, a, b, n;

	for (i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
		char *want = apply(&both, pages[i]), *got;

		if (!*want) {
			free(want);
			want = strdup(pages[i]);
		}
		n = strlen(pages[i]);
		/* whole, every split in two, every split in three */
		for (a = 0; a <= n; a++)
			for (b = 0; b <= n - a; b++) {
				cuts[0] = a;
				cuts[1] = b;
				got =
				    streamed(&both, pages[i], a ? cuts : NULL);
				ck_assert_msg(strcmp(got, want) == 0,
					      "page %zu cut %zu+%zu: %s", i, a,
					      b, got);
				free(got);
				if (!a)
					break;
			}
		/* a byte at a time */
		{
			size_t ones[512];

			for (a = 0; a < 511; a++)
				ones[a] = 1;
			ones[511] = 0;
			got = streamed(&both, pages[i], ones);
			ck_assert_str_eq(got, want);
			free(got);
		}
		free(want);
	}
	/* more than INJECT_HOLD_MAX after a </body>: body_end goes before
	 * it, nothing more looked for */
	{
		size_t len = INJECT_HOLD_MAX + 10000;
		char *page = malloc(len + 40), *got;

		strcpy(page, "<p></body>");
		memset(page + 10, 'x', len);
		strcpy(page + 10 + len, "</body>end");
		size_t pieces[40] = {0};

		for (i = 0; i < 39; i++)
			pieces[i] = 4096;
		got = streamed(&body, page, pieces);
		ck_assert(strncmp(got, "<p>[B]</body>xxx", 16) == 0);
		ck_assert_str_eq(got + strlen(got) - 10, "</body>end");
		ck_assert_uint_eq(strlen(got), strlen(page) + 3);
		free(got);
		free(page);
	}
	inject_free(&both);
	inject_free(&body);
}
END_TEST

/* a response head parsed from text, and a GET request */
static void parse(const char *resp, struct h1_response *rs, const char *req,
		  struct h1_request *rq)
{
	h1_request_init(rq);
	ck_assert_int_eq(h1_parse_request(req, strlen(req), NULL, rq),
			 (int)strlen(req));
	h1_response_init(rs);
	ck_assert_int_eq(
	    h1_parse_response(resp, strlen(resp), NULL, rq->method, false, rs),
	    (int)strlen(resp));
}

static bool applies(const char *resp, const char *req, int *coding)
{
	static struct h1_response rs;
	static struct h1_request rq;
	struct config_inject c = snippets("[H]", NULL);
	bool ok;

	parse(resp, &rs, req, &rq);
	ok = inject_applies(&c, &rq, &rs, coding);
	inject_free(&c);
	return ok;
}

#define GET "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
#define HTML "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"

START_TEST(test_applies)
{
	struct config_inject none;
	static struct h1_response rs;
	static struct h1_request rq;
	int e;

	ck_assert(applies(HTML "Content-Length: 5\r\n\r\n", GET, &e));
	ck_assert_int_eq(e, ENC_IDENTITY);
	ck_assert(applies(HTML "Content-Encoding: br\r\n"
			       "Transfer-Encoding: chunked\r\n\r\n",
			  GET, &e));
	ck_assert_int_eq(e, ENC_BR);
	ck_assert(applies(HTML "Content-Encoding: deflate\r\n"
			       "Content-Length: 5\r\n\r\n",
			  GET, &e));
	ck_assert_int_eq(e, -1);
	ck_assert(applies(HTML "Content-Encoding: gzip\r\nContent-Encoding: "
			       "br\r\nContent-Length: 5\r\n\r\n",
			  GET, &e));
	ck_assert_int_eq(e, -1);
	ck_assert(!applies("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
			   "Content-Length: 5\r\n\r\n",
			   GET, &e));
	ck_assert(
	    !applies("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", GET, &e));
	ck_assert(!applies(HTML "Content-Length: 5\r\n\r\n",
			   "HEAD / HTTP/1.1\r\nHost: a\r\n\r\n", &e));
	ck_assert(!applies(
	    HTML "Content-Length: 5\r\n\r\n",
	    "GET / HTTP/1.1\r\nHost: a\r\nRange: bytes=0-\r\n\r\n", &e));
	ck_assert(!applies(HTML "Cache-Control: public, no-transform\r\n"
				"Content-Length: 5\r\n\r\n",
			   GET, &e));
	ck_assert(!applies("HTTP/1.1 206 Partial\r\nContent-Type: text/html\r\n"
			   "Content-Length: 5\r\n\r\n",
			   GET, &e));
	ck_assert(!applies("HTTP/1.1 204 No\r\nContent-Type: text/html\r\n\r\n",
			   GET, &e));
	memset(&none, 0, sizeof(none));
	parse(HTML "Content-Length: 5\r\n\r\n", &rs, GET, &rq);
	ck_assert(!inject_applies(&none, &rq, &rs, &e));
	ck_assert(!inject_applies(NULL, &rq, &rs, &e));
}
END_TEST

START_TEST(test_csp)
{
	const char *d;
	size_t n;
	const char *inl = "<script>x()</script>";

	ck_assert(inject_csp_blocks("script-src 'self'", 17, inl, &d, &n));
	ck_assert_uint_eq(n, 17);
	ck_assert(!inject_csp_blocks("script-src 'self' 'unsafe-inline'", 33,
				     inl, &d, &n));
	ck_assert(inject_csp_blocks("script-src 'unsafe-inline' 'nonce-x'", 36,
				    inl, &d, &n));
	ck_assert(inject_csp_blocks("default-src 'self'; img-src *", 29, inl,
				    &d, &n));
	ck_assert_uint_eq(n, 18);
	/* script-src over default-src */
	ck_assert(!inject_csp_blocks("default-src 'self'; script-src "
				     "'unsafe-inline'",
				     46, inl, &d, &n));
	/* no script directive: not stopped */
	ck_assert(!inject_csp_blocks("img-src *", 9, inl, &d, &n));
	/* not an inline script */
	ck_assert(!inject_csp_blocks("script-src 'self'", 17,
				     "<script src=\"/a.js\"></script>", &d,
				     &n));
	ck_assert(!inject_csp_blocks("script-src 'self'", 17,
				     "<img src=/p.gif>", &d, &n));
	ck_assert(inject_csp_blocks("script-src 'self'", 17,
				    "<SCRIPT type=module>x</SCRIPT>", &d, &n));
	ck_assert(!inject_csp_blocks("script-src 'self'", 17,
				     "<scripts>x</scripts>", &d, &n));
}
END_TEST

/* p[0..n) coded in e by the coding's own library (gzip: two members when
 * two) */
static size_t encode(enum enc e, const char *p, size_t n, unsigned char *out,
		     size_t room, bool two)
{
	size_t k = 0, half = two ? n / 2 : n;

	if (e == ENC_GZIP) {
		for (int m = 0; m < (two ? 2 : 1); m++) {
			z_stream z;

			memset(&z, 0, sizeof(z));
			ck_assert_int_eq(deflateInit2(&z, 6, Z_DEFLATED, 31, 8,
						      Z_DEFAULT_STRATEGY),
					 Z_OK);
			z.next_in = (Bytef *)(p + (m ? half : 0));
			z.avail_in = (uInt)(m ? n - half : half);
			z.next_out = out + k;
			z.avail_out = (uInt)(room - k);
			ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
			k = room - z.avail_out;
			deflateEnd(&z);
		}
		return k;
	}
	if (e == ENC_BR) {
		k = room;
		ck_assert(BrotliEncoderCompress(5, 22, BROTLI_MODE_TEXT, n,
						(const uint8_t *)p, &k, out));
		return k;
	}
	k = ZSTD_compress(out, room, p, half, 3);
	ck_assert(!ZSTD_isError(k));
	if (two) {
		size_t k2 =
		    ZSTD_compress(out + k, room - k, p + half, n - half, 3);
		ck_assert(!ZSTD_isError(k2));
		k += k2;
	}
	return k;
}

START_TEST(test_decoders)
{
	enum enc e = (enum enc)(ENC_GZIP + _i);
	static char page[200000];
	static unsigned char z[300000];
	struct evbuffer *out;
	struct dec_stream *d;
	size_t n, i;

	for (i = 0; i < sizeof(page); i++)
		page[i] = "<html>abcdefgh</html>\n"[i % 22] + (char)(i % 7);
	/* whole, then a byte at a time */
	for (int way = 0; way < 2; way++) {
		n = encode(e, page, sizeof(page), z, sizeof(z), false);
		out = evbuffer_new();
		d = dec_stream_new(e);
		if (way == 0) {
			ck_assert_int_eq(
			    dec_stream_write(d, z, n, out, sizeof(page)), 0);
		} else {
			for (i = 0; i < n; i++) {
				ck_assert(!dec_stream_done(d));
				ck_assert_int_eq(dec_stream_write(d, z + i, 1,
								  out,
								  sizeof(page)),
						 0);
			}
		}
		ck_assert(dec_stream_done(d));
		ck_assert_uint_eq(evbuffer_get_length(out), sizeof(page));
		ck_assert(
		    memcmp(evbuffer_pullup(out, -1), page, sizeof(page)) == 0);
		dec_stream_free(d);
		evbuffer_free(out);
	}
	/* two gzip members, two zstd frames: both read */
	if (e != ENC_BR) {
		n = encode(e, page, sizeof(page), z, sizeof(z), true);
		out = evbuffer_new();
		d = dec_stream_new(e);
		ck_assert_int_eq(dec_stream_write(d, z, n, out, sizeof(page)),
				 0);
		ck_assert(dec_stream_done(d));
		ck_assert_uint_eq(evbuffer_get_length(out), sizeof(page));
		dec_stream_free(d);
		evbuffer_free(out);
	}
	/* a limit: stopped just past it, not decoded whole */
	n = encode(e, page, sizeof(page), z, sizeof(z), false);
	out = evbuffer_new();
	d = dec_stream_new(e);
	ck_assert_int_eq(dec_stream_write(d, z, n, out, 50000), 1);
	ck_assert_uint_gt(evbuffer_get_length(out), 50000);
	ck_assert_uint_lt(evbuffer_get_length(out), 50000 + 65536);
	dec_stream_free(d);
	evbuffer_free(out);
	/* truncated: not done */
	out = evbuffer_new();
	d = dec_stream_new(e);
	ck_assert_int_eq(dec_stream_write(d, z, n - 3, out, sizeof(page)), 0);
	ck_assert(!dec_stream_done(d));
	dec_stream_free(d);
	evbuffer_free(out);
	/* not a stream of the coding (its first bytes spoilt) */
	out = evbuffer_new();
	d = dec_stream_new(e);
	memset(z, 0xff, 8);
	ck_assert_int_eq(dec_stream_write(d, z, n, out, sizeof(page)), -1);
	dec_stream_free(d);
	evbuffer_free(out);
	/* bytes after the end (garbage, not another member or frame) */
	n = encode(e, page, 1000, z, sizeof(z), false);
	memcpy(z + n, "garbage!", 8);
	out = evbuffer_new();
	d = dec_stream_new(e);
	ck_assert_int_eq(dec_stream_write(d, z, n + 8, out, sizeof(page)), -1);
	dec_stream_free(d);
	evbuffer_free(out);
	/* output of exactly a multiple of the decoder's piece: still at its
	 * end (asking again started another member) */
	for (size_t sz = 16384; sz <= 65536; sz += 16384) {
		n = encode(e, page, sz, z, sizeof(z), false);
		out = evbuffer_new();
		d = dec_stream_new(e);
		ck_assert_int_eq(dec_stream_write(d, z, n, out, sizeof(page)),
				 0);
		ck_assert_msg(dec_stream_done(d), "%zu bytes", sz);
		ck_assert_uint_eq(evbuffer_get_length(out), sz);
		dec_stream_free(d);
		evbuffer_free(out);
	}
	ck_assert_ptr_null(dec_stream_new(ENC_IDENTITY));
	dec_stream_free(NULL);
}
END_TEST

static Suite *inject_suite(void)
{
	Suite *s = suite_create("inject");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_where);
	tcase_add_test(tc, test_stream);
	tcase_add_test(tc, test_set);
	tcase_add_test(tc, test_json);
	tcase_add_test(tc, test_applies);
	tcase_add_test(tc, test_csp);
	tcase_add_loop_test(tc, test_decoders, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(inject_suite());
}
