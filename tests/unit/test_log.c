/* SPDX-License-Identifier: BSD-2-Clause */
/* test_log.c - the log module's rate limit for one source of messages
 * (log_rl_allow) and the error buffer. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "log.h"
#include "unit.h"

#define MS 1000000ull

START_TEST(test_rl_first_then_held)
{
	struct log_rl rl = {0};
	uint64_t held = 99;
	unsigned i;

	/* the first message passes, even at time 0 */
	ck_assert(log_rl_allow(&rl, 0, 10000 * MS, &held));
	ck_assert_uint_eq(held, 0);
	/* within the interval: held back and counted */
	for (i = 0; i < 1000; i++)
		ck_assert(!log_rl_allow(&rl, i * MS, 10000 * MS, &held));
	ck_assert(!log_rl_allow(&rl, 9999 * MS, 10000 * MS, &held));
	/* at the end of the interval: one passes, saying how many were held */
	ck_assert(log_rl_allow(&rl, 10000 * MS, 10000 * MS, &held));
	ck_assert_uint_eq(held, 1001);
	/* and the count starts again */
	ck_assert(!log_rl_allow(&rl, 10001 * MS, 10000 * MS, &held));
	ck_assert(log_rl_allow(&rl, 30000 * MS, 10000 * MS, &held));
	ck_assert_uint_eq(held, 1);
}
END_TEST

START_TEST(test_rl_flood_bounded)
{
	struct log_rl rl = {0};
	uint64_t held, t, passed = 0;

	/* a million attempts over 100 s at a 10 s interval: 10 lines */
	for (t = 0; t < 1000000; t++)
		passed += log_rl_allow(&rl, t * 100000ull, 10000 * MS, &held);
	ck_assert_uint_eq(passed, 10);
}
END_TEST

START_TEST(test_errbuf)
{
	struct errbuf e;
	char longer[ERRBUF_LEN * 2];

	errbuf_set(&e, "%s:%d: %s", "f.conf", 3, "bad");
	ck_assert_str_eq(e.msg, "f.conf:3: bad");
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	errbuf_set(&e, "%s", longer);
	ck_assert_uint_eq(strlen(e.msg), ERRBUF_LEN - 1);
	errbuf_clear(&e);
	ck_assert_str_eq(e.msg, "");
	errbuf_set(NULL, "ignored");
	errbuf_clear(NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("log");

	tcase_add_test(tc, test_rl_first_then_held);
	tcase_add_test(tc, test_rl_flood_bounded);
	tcase_add_test(tc, test_errbuf);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
