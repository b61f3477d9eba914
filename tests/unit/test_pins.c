/* SPDX-License-Identifier: BSD-2-Clause */
/* test_pins.c - what pins.c computes without touching a map: a rule's
 * wall-clock expiry in the kernel's boot-time nanoseconds. */
#include <check.h>
#include <stdint.h>

#include "pins.h"
#include "unit.h"

#define NS 1000000000ULL

START_TEST(expiry_near)
{
	uint64_t boot = 3600 * NS; /* up for an hour */

	ck_assert_uint_eq(pins_expiry_ns(1000 + 5, 1000, boot), boot + 5 * NS);
	ck_assert_uint_eq(pins_expiry_ns(1000 + 1, 1000, 0), NS);
	/* a year ahead, as edgectl --ttl 365d gives */
	ck_assert_uint_eq(pins_expiry_ns(1000 + 31536000, 1000, boot),
			  boot + 31536000 * NS);
}
END_TEST

START_TEST(expiry_far_never_wraps)
{
	int64_t wall = 1796000000; /* 2026 */
	uint64_t boot = 3600 * NS;
	/* 2^64 ns is 18446744073.709551616 s: five seconds past it wrapped
	 * around to about five seconds from now before */
	int64_t wrap = wall + 18446744073LL + 5;
	/* the last second that still fits, and the first that does not */
	uint64_t fit = (UINT64_MAX - boot) / NS;

	ck_assert_uint_eq(pins_expiry_ns(wrap, wall, boot), UINT64_MAX);
	ck_assert_uint_eq(pins_expiry_ns(wall + (int64_t)fit, wall, boot),
			  boot + fit * NS);
	ck_assert_uint_eq(pins_expiry_ns(wall + (int64_t)fit + 1, wall, boot),
			  UINT64_MAX);
	/* the latest timestamptz PostgreSQL holds, 294276 AD */
	ck_assert_uint_eq(pins_expiry_ns(9224318015999LL, wall, boot),
			  UINT64_MAX);
	/* boot time itself near its end */
	ck_assert_uint_eq(pins_expiry_ns(wall + 10, wall, UINT64_MAX - NS),
			  UINT64_MAX);
}
END_TEST

static Suite *pins_suite(void)
{
	Suite *s = suite_create("pins");
	TCase *tc = tcase_create("expiry");

	tcase_add_test(tc, expiry_near);
	tcase_add_test(tc, expiry_far_never_wraps);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(pins_suite());
}
