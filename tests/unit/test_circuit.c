/* SPDX-License-Identifier: BSD-2-Clause */
/* test_circuit.c - a deployment's circuit (circuit.h): opening at the
 * error share past min_requests, the sliding window, open, half-open's
 * one trial, closing and reopening. */
#include <check.h>
#include <stdlib.h>

#include "circuit.h"
#include "lib/config_check.h"
#include "unit.h"

#define S 1000000000ULL

static const struct config_circuit cfg = {
    .set = true,
    .errors = 50,
    .window_ms = 10000,
    .min_requests = 20,
    .open_for_ms = 5000,
};

/* n requests of key ended with res at now; whether one opened it */
static bool ends(struct circuits *cs, uint64_t key, unsigned n,
		 enum circuit_result res, uint64_t now)
{
	bool opened = false, trial;
	uint64_t wait;
	unsigned i;

	for (i = 0; i < n; i++) {
		ck_assert(circuit_admit(cs, key, now, &trial, &wait));
		ck_assert(!trial);
		opened |= circuit_end(cs, key, &cfg, now, false, res);
	}
	return opened;
}

START_TEST(test_circuit_opens)
{
	struct circuits *cs = calloc(1, sizeof(*cs));
	uint64_t now = 100 * S, req, fail, wait;
	bool trial;

	ck_assert_ptr_nonnull(cs);
	/* 19 failures: under min_requests */
	ck_assert(!ends(cs, 7, 19, CIRCUIT_FAILURE, now));
	/* no verdict does not count */
	ck_assert(!ends(cs, 7, 5, CIRCUIT_NONE, now));
	ck_assert_int_eq(circuit_state(cs, 7, now, &req, &fail),
			 CIRCUIT_CLOSED);
	ck_assert_uint_eq(req, 19);
	/* the 20th opens it */
	ck_assert(ends(cs, 7, 1, CIRCUIT_FAILURE, now));
	ck_assert(!circuit_admit(cs, 7, now + S, &trial, &wait));
	ck_assert_uint_eq(wait, 4000);
	ck_assert_uint_eq(circuit_count_open(cs), 1);
	/* another deployment is not concerned */
	ck_assert(circuit_admit(cs, 8, now, &trial, &wait));
	/* half-open: one trial at a time */
	ck_assert(circuit_admit(cs, 7, now + 5 * S, &trial, &wait));
	ck_assert(trial);
	ck_assert(!circuit_admit(cs, 7, now + 5 * S, &trial, &wait));
	ck_assert_uint_eq(wait, 0);
	/* its failure opens it again */
	ck_assert(circuit_end(cs, 7, &cfg, now + 6 * S, true, CIRCUIT_FAILURE));
	ck_assert(!circuit_admit(cs, 7, now + 10 * S, &trial, &wait));
	/* a trial without a verdict lets the next one try */
	ck_assert(circuit_admit(cs, 7, now + 11 * S, &trial, &wait));
	ck_assert(trial);
	ck_assert(!circuit_end(cs, 7, &cfg, now + 11 * S, true, CIRCUIT_NONE));
	ck_assert(circuit_admit(cs, 7, now + 11 * S, &trial, &wait));
	ck_assert(trial);
	/* a straggler's end has no say */
	ck_assert(
	    !circuit_end(cs, 7, &cfg, now + 11 * S, false, CIRCUIT_FAILURE));
	/* success closes it, its window empty */
	ck_assert(
	    !circuit_end(cs, 7, &cfg, now + 12 * S, true, CIRCUIT_SUCCESS));
	ck_assert_int_eq(circuit_state(cs, 7, now + 12 * S, &req, &fail),
			 CIRCUIT_CLOSED);
	ck_assert_uint_eq(req, 0);
	ck_assert_uint_eq(circuit_count_open(cs), 0);
	free(cs);
}
END_TEST

START_TEST(test_circuit_share_window)
{
	struct circuits *cs = calloc(1, sizeof(*cs));
	uint64_t now = 100 * S, req, fail;

	ck_assert_ptr_nonnull(cs);
	/* 11 successes, 10 failures: 47 % */
	ck_assert(!ends(cs, 9, 11, CIRCUIT_SUCCESS, now));
	ck_assert(!ends(cs, 9, 10, CIRCUIT_FAILURE, now));
	/* 11 of 22: 50 % */
	ck_assert(ends(cs, 9, 1, CIRCUIT_FAILURE, now));
	/* the window slides: 10 s later the old ends are gone */
	ck_assert(!ends(cs, 10, 15, CIRCUIT_FAILURE, now));
	circuit_state(cs, 10, now + 10 * S, &req, &fail);
	ck_assert_uint_eq(req, 0);
	ck_assert(!ends(cs, 10, 15, CIRCUIT_FAILURE, now + 10 * S));
	circuit_state(cs, 10, now + 10 * S, &req, &fail);
	ck_assert_uint_eq(fail, 15);
	free(cs);
}
END_TEST

/* The operator's view: what a next request meets, the window's counts,
 * open's end. */
START_TEST(test_circuit_view)
{
	struct circuits *cs = calloc(1, sizeof(*cs));
	struct circuit_view v[4];
	uint64_t now = 100 * S;

	ck_assert_ptr_nonnull(cs);
	ck_assert_uint_eq(circuit_view(cs, now, v, 4), 0);
	ck_assert(!ends(cs, 7, 12, CIRCUIT_SUCCESS, now));
	ck_assert(ends(cs, 7, 12, CIRCUIT_FAILURE, now));
	ck_assert(!ends(cs, 9, 3, CIRCUIT_FAILURE, now));
	ck_assert_uint_eq(circuit_view(cs, now + S, v, 4), 2);
	if (v[0].key != 7) {
		struct circuit_view x = v[0];

		v[0] = v[1];
		v[1] = x;
	}
	ck_assert_uint_eq(v[0].key, 7);
	ck_assert_int_eq(v[0].state, CIRCUIT_OPEN);
	ck_assert_uint_eq(v[0].requests, 24);
	ck_assert_uint_eq(v[0].failures, 12);
	ck_assert_uint_eq(v[0].until, now + 5 * S);
	ck_assert_int_eq(v[1].state, CIRCUIT_CLOSED);
	ck_assert_uint_eq(v[1].requests, 3);
	ck_assert_uint_eq(v[1].failures, 3);
	/* past open_for: half-open for the next request; max holds */
	ck_assert_uint_eq(circuit_view(cs, now + 5 * S, v, 1), 1);
	ck_assert_int_eq(v[0].key == 7 ? v[0].state : CIRCUIT_HALF_OPEN,
			 CIRCUIT_HALF_OPEN);
	ck_assert_uint_eq(v[0].until, 0);
	free(cs);
}
END_TEST

static Suite *circuit_suite(void)
{
	Suite *s = suite_create("circuit");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_circuit_opens);
	tcase_add_test(tc, test_circuit_share_window);
	tcase_add_test(tc, test_circuit_view);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(circuit_suite());
}
