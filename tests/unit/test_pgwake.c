/* SPDX-License-Identifier: BSD-2-Clause */
/* test_pgwake.c - the wake_request_change payload (pgwake_parse_change):
 * "ENV_ID REQUEST_ID STATE", and the environment_wake_failed one
 * (pgwake_parse_failed): "ENV_ID RETRY_MS HOST"; every other shape
 * refused. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "pgwake.h"
#include "unit.h"

START_TEST(parse_good)
{
	char env[16], state[16];
	int64_t req = 0;

	ck_assert_int_eq(pgwake_parse_change("od 42 failed", env, sizeof(env),
					     &req, state, sizeof(state)),
			 0);
	ck_assert_str_eq(env, "od");
	ck_assert_int_eq(req, 42);
	ck_assert_str_eq(state, "failed");
	ck_assert_int_eq(pgwake_parse_change("a.b_c-d 9223372036854775807 "
					     "timeout",
					     env, sizeof(env), &req, state,
					     sizeof(state)),
			 0);
	ck_assert_str_eq(env, "a.b_c-d");
	ck_assert_int_eq(req, INT64_MAX);
	ck_assert_str_eq(state, "timeout");
}
END_TEST

START_TEST(parse_bad)
{
	static const char *const bad[] = {
	    "",
	    "od",
	    "od 1",
	    "od 1 ",
	    " 1 failed",
	    "od  1 failed",
	    "od 0 failed",
	    "od -1 failed",
	    "od 01 failed",
	    "od x failed",
	    "od 1x failed",
	    "od 99999999999999999999 failed",
	    "od 1 failed extra",
	    "an-id-longer-than-fifteen 1 failed",
	    "od 1 a-state-too-long-here",
	};
	char env[16], state[16];
	int64_t req = 7;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(pgwake_parse_change(bad[i], env, sizeof(env),
						  &req, state,
						  sizeof(state)) == -EINVAL,
			      "accepted \"%s\"", bad[i]);
	ck_assert_int_eq(pgwake_parse_change(NULL, env, sizeof(env), &req,
					     state, sizeof(state)),
			 -EINVAL);
	ck_assert_int_eq(req, 7);
}
END_TEST

START_TEST(parse_failed)
{
	static const char *const bad[] = {
	    "",
	    "od",
	    "od 1000",
	    "od 1000 ",
	    " 1000 host-1",
	    "od  1000 host-1",
	    "od -1 host-1",
	    "od x host-1",
	    "od 1x host-1",
	    "od 86400001 host-1",
	    "od 99999999999999999999 host-1",
	    "an-id-longer-than-fifteen 1000 host-1",
	    "od 1000 a-host-name-too-long",
	};
	char env[16], host[16];
	uint64_t ms = 7;
	size_t i;

	ck_assert_int_eq(pgwake_parse_failed("od 2000 host 1", env, sizeof(env),
					     &ms, host, sizeof(host)),
			 0);
	ck_assert_str_eq(env, "od");
	ck_assert_uint_eq(ms, 2000);
	ck_assert_str_eq(host, "host 1"); /* the rest of the line */
	ck_assert_int_eq(pgwake_parse_failed("a.b_c-d 86400000 h", env,
					     sizeof(env), &ms, host,
					     sizeof(host)),
			 0);
	ck_assert_uint_eq(ms, 86400000);
	ms = 7;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(pgwake_parse_failed(bad[i], env, sizeof(env), &ms,
						  host,
						  sizeof(host)) == -EINVAL,
			      "accepted \"%s\"", bad[i]);
	ck_assert_int_eq(pgwake_parse_failed(NULL, env, sizeof(env), &ms, host,
					     sizeof(host)),
			 -EINVAL);
	ck_assert_uint_eq(ms, 7);
}
END_TEST

static Suite *pgwake_suite(void)
{
	Suite *s = suite_create("pgwake");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, parse_good);
	tcase_add_test(tc, parse_bad);
	tcase_add_test(tc, parse_failed);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(pgwake_suite());
}
