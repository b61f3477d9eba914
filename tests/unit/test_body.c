/* SPDX-License-Identifier: BSD-2-Clause */
/* test_body.c - body_pump: copying a request or response body between
 * evbuffers by Content-Length or chunked, decoded or re-chunked, never
 * more than max data bytes per call (which request buffering relies on),
 * the route's limit, framing errors, and any split of the input. */
#include <check.h>
#include <errno.h>
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "body.h"

#define CHUNKED "5\r\nhello\r\n6;x=y\r\n world\r\n0\r\nT: 1\r\n\r\nNEXT"

struct pump {
	struct evbuffer *in, *out;
};

static void pump_new(struct pump *t, const char *in)
{
	t->in = evbuffer_new();
	t->out = evbuffer_new();
	ck_assert_ptr_nonnull(t->in);
	ck_assert_ptr_nonnull(t->out);
	evbuffer_add(t->in, in, strlen(in));
}

static void pump_free(struct pump *t)
{
	evbuffer_free(t->in);
	evbuffer_free(t->out);
}

/* b's contents as a NUL-terminated string (static buffer). */
static const char *text(struct evbuffer *b)
{
	static char s[256];
	size_t n = evbuffer_get_length(b);

	ck_assert_uint_lt(n, sizeof(s));
	evbuffer_copyout(b, s, n);
	s[n] = '\0';
	return s;
}

START_TEST(test_length)
{
	struct body b;
	struct pump t;
	uint64_t data;

	pump_new(&t, "abcdefNEXT");
	body_init(&b, BODY_LENGTH, 6, false);
	ck_assert(!b.done);
	ck_assert_int_eq(body_pump(&b, t.in, t.out, 4, &data), 0);
	ck_assert_uint_eq(data, 4);
	ck_assert_int_eq(body_pump(&b, t.in, t.out, 100, &data), 1);
	ck_assert_uint_eq(data, 2);
	ck_assert(b.done);
	ck_assert_str_eq(text(t.out), "abcdef");
	ck_assert_str_eq(text(t.in), "NEXT"); /* the next message stays */
	ck_assert_int_eq(body_pump(&b, t.in, t.out, 100, &data), 1);
	ck_assert_uint_eq(data, 0);
	body_free(&b);
	pump_free(&t);
	/* no body, or an empty one, is done at once */
	body_init(&b, BODY_NONE, 0, false);
	ck_assert(b.done);
	body_init(&b, BODY_LENGTH, 0, false);
	ck_assert(b.done);
	/* re-chunked: its last chunk at its end */
	pump_new(&t, "abc");
	body_init(&b, BODY_LENGTH, 3, true);
	ck_assert_int_eq(body_pump(&b, t.in, t.out, 100, &data), 1);
	ck_assert_str_eq(text(t.out), "3\r\nabc\r\n0\r\n\r\n");
	body_free(&b);
	pump_free(&t);
}
END_TEST

START_TEST(test_chunked_decode)
{
	struct body b;
	struct pump t;
	uint64_t data;

	pump_new(&t, CHUNKED);
	body_init(&b, BODY_CHUNKED, 0, false);
	ck_assert_int_eq(body_pump(&b, t.in, t.out, 100, &data), 1);
	ck_assert_uint_eq(data, 11);
	ck_assert_str_eq(text(t.out), "hello world"); /* no ext, no trailer */
	ck_assert_str_eq(text(t.in), "NEXT");
	/* the trailer section is kept, for whoever passes it on */
	ck_assert_ptr_nonnull(b.trailers);
	ck_assert_str_eq(text(b.trailers), "T: 1\r\n");
	body_free(&b);
	pump_free(&t);

	pump_new(&t, CHUNKED);
	body_init(&b, BODY_CHUNKED, 0, true);
	ck_assert_int_eq(body_pump(&b, t.in, t.out, 100, &data), 1);
	ck_assert_str_eq(text(t.out), "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
	body_free(&b);
	pump_free(&t);

	/* passed on: its fields that may be trailers, one byte at a time */
	pump_new(&t, "1\r\nx\r\n0\r\ngrpc-status: 0\r\nContent-Length: 9\r\n"
		     "Grpc-Message:  ok \r\n\r\n");
	body_init(&b, BODY_CHUNKED, 0, true);
	b.pass_trailers = true;
	{
		struct evbuffer *all = t.in;
		int rc = 0;

		t.in = evbuffer_new();
		while (rc == 0 && evbuffer_get_length(all) > 0) {
			evbuffer_remove_buffer(all, t.in, 1);
			rc = body_pump(&b, t.in, t.out, 100, &data);
		}
		ck_assert_int_eq(rc, 1);
		evbuffer_free(all);
	}
	ck_assert_str_eq(text(t.out), "1\r\nx\r\n0\r\ngrpc-status: 0\r\n"
				      "Grpc-Message: ok\r\n\r\n");
	body_free(&b);
	pump_free(&t);
}
END_TEST

/* Never more than max data bytes: exactly what request buffering needs
 * to tell "the whole body within N bytes" (max N + 1) from "more". */
START_TEST(test_chunked_max)
{
	struct body b;
	struct pump t;
	uint64_t data;

	pump_new(&t, CHUNKED);
	body_init(&b, BODY_CHUNKED, 0, false);
	ck_assert_int_eq(body_pump(&b, t.in, t.out, 7, &data), 0);
	ck_assert_uint_eq(data, 7);
	ck_assert_str_eq(text(t.out), "hello w");
	ck_assert_int_eq(body_pump(&b, t.in, t.out, 1, &data), 0);
	ck_assert_uint_eq(data, 1);
	ck_assert_int_eq(body_pump(&b, t.in, t.out, 100, &data), 1);
	ck_assert_uint_eq(data, 3);
	ck_assert_str_eq(text(t.out), "hello world");
	body_free(&b);
	pump_free(&t);

	/* a body of exactly 11 bytes: with max 11 the end is not yet seen,
	 * with max 12 it is (and no more than 11 bytes came) */
	pump_new(&t, CHUNKED);
	body_init(&b, BODY_CHUNKED, 0, false);
	ck_assert_int_eq(body_pump(&b, t.in, t.out, 11, &data), 0);
	ck_assert_uint_eq(data, 11);
	ck_assert_int_eq(body_pump(&b, t.in, t.out, 1, &data), 1);
	ck_assert_uint_eq(data, 0);
	ck_assert_str_eq(text(t.in), "NEXT");
	body_free(&b);
	pump_free(&t);
	pump_new(&t, CHUNKED);
	body_init(&b, BODY_CHUNKED, 0, false);
	ck_assert_int_eq(body_pump(&b, t.in, t.out, 12, &data), 1);
	ck_assert_uint_eq(data, 11);
	body_free(&b);
	pump_free(&t);
}
END_TEST

START_TEST(test_chunked_limit_and_errors)
{
	struct admit_body lim;
	struct body b;
	struct pump t;
	uint64_t data;

	/* over the limit: the data that passes it is not written */
	pump_new(&t, CHUNKED);
	body_init(&b, BODY_CHUNKED, 0, false);
	admit_body_init(&lim, 8);
	b.limit = &lim;
	ck_assert_int_eq(body_pump(&b, t.in, t.out, 100, &data), -EFBIG);
	ck_assert_str_eq(text(t.out), "hello");
	body_free(&b);
	pump_free(&t);

	pump_new(&t, "5\r\nhello\r\nzz\r\n");
	body_init(&b, BODY_CHUNKED, 0, false);
	ck_assert_int_eq(body_pump(&b, t.in, t.out, 100, &data), -1);
	ck_assert_int_eq(b.ck.err, H1_E_CHUNK_SIZE);
	ck_assert_str_eq(text(t.out), "hello");
	body_free(&b);
	pump_free(&t);

	pump_new(&t, "5\r\nhelloGET / HTTP/1.1\r\n");
	body_init(&b, BODY_CHUNKED, 0, false);
	ck_assert_int_eq(body_pump(&b, t.in, t.out, 100, &data), -1);
	ck_assert_int_eq(b.ck.err, H1_E_CHUNK_CRLF);
	body_free(&b);
	pump_free(&t);
}
END_TEST

/* Fed one byte at a time with a data budget of one byte per call, the
 * result is the same. */
START_TEST(test_chunked_split)
{
	const char *in = CHUNKED;
	struct body b;
	struct pump t;
	uint64_t data, total = 0;
	size_t i;
	int rc = 0;

	pump_new(&t, "");
	body_init(&b, BODY_CHUNKED, 0, true);
	for (i = 0; in[i] && rc == 0; i++) {
		evbuffer_add(t.in, in + i, 1);
		do {
			rc = body_pump(&b, t.in, t.out, 1, &data);
			ck_assert_uint_le(data, 1);
			total += data;
		} while (rc == 0 && data);
	}
	ck_assert_int_eq(rc, 1);
	ck_assert_uint_eq(total, 11);
	ck_assert_uint_eq(i, strlen(in) - strlen("NEXT")); /* ends exactly */
	ck_assert_uint_eq(evbuffer_get_length(t.in), 0);
	body_free(&b);
	pump_free(&t);
}
END_TEST

/* A body that comes a byte a read (each its own chain, as a read's is)
 * while nothing takes the output: the output holds the bytes in a few
 * chains, not a chain a byte; a bulk read's chain is still handed on. */
START_TEST(test_trickle_chains)
{
	struct evbuffer *in = evbuffer_new(), *out = evbuffer_new(), *one;
	struct body b;
	uint64_t data;
	int i;

	body_init(&b, BODY_LENGTH, 3000 + 65536, false);
	for (i = 0; i < 3000; i++) {
		one = evbuffer_new();
		evbuffer_add(one, "x", 1);
		evbuffer_add_buffer(in, one);
		evbuffer_free(one);
		ck_assert_int_eq(body_pump(&b, in, out, 1 << 20, &data), 0);
		ck_assert_uint_eq(data, 1);
	}
	ck_assert_uint_eq(evbuffer_get_length(out), 3000);
	ck_assert_int_le(evbuffer_peek(out, -1, NULL, NULL, 0), 4);
	{
		static char big[65536];

		evbuffer_add(in, big, sizeof(big));
		ck_assert_int_eq(body_pump(&b, in, out, 1 << 20, &data), 1);
		ck_assert_uint_eq(evbuffer_get_length(out), 3000 + 65536);
	}
	body_free(&b);
	evbuffer_free(in);
	evbuffer_free(out);
}
END_TEST

static Suite *body_suite(void)
{
	Suite *s = suite_create("body");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_length);
	tcase_add_test(tc, test_chunked_decode);
	tcase_add_test(tc, test_chunked_max);
	tcase_add_test(tc, test_chunked_limit_and_errors);
	tcase_add_test(tc, test_chunked_split);
	tcase_add_test(tc, test_trickle_chains);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(body_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
