/* SPDX-License-Identifier: BSD-2-Clause */
/* test_retry.c - a deployment's retry budget (retry.h): the share of its
 * recent requests, the allowance, the sliding window, eviction. */
#include <check.h>
#include <stdlib.h>

#include "retry.h"
#include "unit.h"

#define S 1000000000ULL

START_TEST(test_budget_share)
{
	struct retry_budgets *b = calloc(1, sizeof(*b));
	uint64_t now = 100 * S, req, ret;
	unsigned i, ok = 0;

	ck_assert_ptr_nonnull(b);
	for (i = 0; i < 100; i++)
		retry_budget_request(b, 42, now);
	/* 20% of 100 plus the allowance */
	for (i = 0; i < 100; i++)
		ok += retry_budget_take(b, 42, 20, now);
	ck_assert_uint_eq(ok, 20 + RETRY_ALLOWANCE);
	retry_budget_counts(b, 42, now, &req, &ret);
	ck_assert_uint_eq(req, 100);
	ck_assert_uint_eq(ret, 20 + RETRY_ALLOWANCE);
	/* another deployment has a budget of its own */
	ck_assert(retry_budget_take(b, 43, 20, now));
	/* 0%: the allowance only */
	for (ok = 0, i = 0; i < 10; i++)
		ok += retry_budget_take(b, 44, 0, now);
	ck_assert_uint_eq(ok, RETRY_ALLOWANCE);
	free(b);
}
END_TEST

START_TEST(test_budget_window)
{
	struct retry_budgets *b = calloc(1, sizeof(*b));
	uint64_t now = 1000 * S, req, ret;
	unsigned i;

	ck_assert_ptr_nonnull(b);
	for (i = 0; i < 50; i++)
		retry_budget_request(b, 7, now);
	while (retry_budget_take(b, 7, 10, now))
		;
	/* still inside the window: still spent */
	ck_assert(!retry_budget_take(b, 7, 10, now + (RETRY_WINDOW_S - 1) * S));
	/* the requests and retries of that second have left the window */
	retry_budget_counts(b, 7, now + RETRY_WINDOW_S * S, &req, &ret);
	ck_assert_uint_eq(req, 0);
	ck_assert_uint_eq(ret, 0);
	ck_assert(retry_budget_take(b, 7, 10, now + RETRY_WINDOW_S * S));
	free(b);
}
END_TEST

START_TEST(test_budget_evict)
{
	struct retry_budgets *b = calloc(1, sizeof(*b));
	uint64_t req, ret, k;

	ck_assert_ptr_nonnull(b);
	/* RETRY_WAYS + 1 keys of one set: the least recently used goes */
	for (k = 0; k <= RETRY_WAYS; k++)
		retry_budget_request(b, 5 + k * RETRY_SETS, (10 + k) * S);
	retry_budget_counts(b, 5, 15 * S, &req, &ret);
	ck_assert_uint_eq(req, 0);
	retry_budget_counts(b, 5 + RETRY_WAYS * RETRY_SETS, 15 * S, &req, &ret);
	ck_assert_uint_eq(req, 1);
	free(b);
}
END_TEST

static Suite *retry_suite(void)
{
	Suite *s = suite_create("retry");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_budget_share);
	tcase_add_test(tc, test_budget_window);
	tcase_add_test(tc, test_budget_evict);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(retry_suite());
}
