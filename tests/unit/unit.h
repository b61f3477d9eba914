/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/unit/unit.h - shared by the Check unit tests (tests/unit/test_*.c):
 * the end of every main().
 */
#ifndef EDGE_TEST_UNIT_H
#define EDGE_TEST_UNIT_H

#include <check.h>
#include <stdlib.h>

/* Run every case of suite s (Check's default fork mode, CK_NORMAL output,
 * whose summary line tests/run counts) and free the runner, which owns s:
 * EXIT_SUCCESS when no case failed, else EXIT_FAILURE. */
static inline int unit_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif /* EDGE_TEST_UNIT_H */
