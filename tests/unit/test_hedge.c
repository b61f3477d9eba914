/* SPDX-License-Identifier: BSD-2-Clause */
/* test_hedge.c - a deployment's recent times to a response head
 * (hedge.h): the percentile, the samples needed first, the ring, the
 * stale reset; and hedge.after's parser (config_check.h). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config_check.h"
#include "hedge.h"
#include "unit.h"

#define S 1000000000ULL
#define MS 1000000ULL

START_TEST(test_percentile)
{
	struct hedge_table *h = calloc(1, sizeof(*h));
	uint64_t now = 100 * S, ns = 0;
	unsigned i;

	ck_assert_ptr_nonnull(h);
	/* too few answers: none */
	for (i = 1; i < HEDGE_MIN_SAMPLES; i++)
		hedge_sample(h, 42, i * MS, now);
	ck_assert(!hedge_percentile(h, 42, 95, now, &ns));
	/* 1..100 ms: p95 is 95 ms, p50 50 ms (nearest rank) */
	for (; i <= 100; i++)
		hedge_sample(h, 42, i * MS, now);
	ck_assert(hedge_percentile(h, 42, 95, now, &ns));
	ck_assert_uint_eq(ns, 95 * MS);
	ck_assert(hedge_percentile(h, 42, 50, now, &ns));
	ck_assert_uint_eq(ns, 50 * MS);
	/* another deployment knows nothing */
	ck_assert(!hedge_percentile(h, 43, 95, now, &ns));
	/* the ring keeps the last HEDGE_SAMPLES: 200 fast ones push the
	 * slow ones out */
	for (i = 0; i < 2 * HEDGE_SAMPLES; i++)
		hedge_sample(h, 42, 2 * MS, now);
	ck_assert(hedge_percentile(h, 42, 99, now, &ns));
	ck_assert_uint_eq(ns, 2 * MS);
	/* stale: forgotten after HEDGE_STALE_S without a sample */
	now += (HEDGE_STALE_S + 1) * S;
	ck_assert(!hedge_percentile(h, 42, 95, now, &ns));
	free(h);
}
END_TEST

START_TEST(test_after_parse)
{
	struct config_hedge c;
	struct errbuf e;

	memset(&c, 0, sizeof(c));
	ck_assert_int_eq(config_hedge_after_parse("p95", &c, &e), 0);
	ck_assert_uint_eq(c.pct, 95);
	ck_assert_int_eq(config_hedge_after_parse("50ms", &c, &e), 0);
	ck_assert_uint_eq(c.pct, 0);
	ck_assert_uint_eq(c.after_ms, 50);
	ck_assert_int_eq(config_hedge_after_parse("60s", &c, &e), 0);
	ck_assert_int_eq(config_hedge_after_parse("p49", &c, &e), -EINVAL);
	ck_assert_int_eq(config_hedge_after_parse("p100", &c, &e), -EINVAL);
	ck_assert_int_eq(config_hedge_after_parse("p", &c, &e), -EINVAL);
	ck_assert_int_eq(config_hedge_after_parse("p95x", &c, &e), -EINVAL);
	ck_assert_int_eq(config_hedge_after_parse("61s", &c, &e), -EINVAL);
	ck_assert_int_eq(config_hedge_after_parse("0ms", &c, &e), -EINVAL);
	ck_assert_int_eq(config_hedge_after_parse("fast", &c, &e), -EINVAL);
}
END_TEST

static Suite *hedge_suite(void)
{
	Suite *s = suite_create("hedge");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_percentile);
	tcase_add_test(tc, test_after_parse);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(hedge_suite());
}
