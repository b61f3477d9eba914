/* SPDX-License-Identifier: BSD-2-Clause */
/* test_reqid.c - generation-checked ids (userspace/reqid.c): ids are never
 * 0, stale ids miss after their slot is reused, the table grows to its
 * bound and says -ENOSPC beyond it. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "reqid.h"
#include "unit.h"

START_TEST(test_alloc_lookup_release)
{
	struct reqid_table *t;
	int a, b;
	uint64_t ia, ib;

	ck_assert_int_eq(reqid_table_new(4, 0, &t), 0);
	ck_assert_int_eq(reqid_alloc(t, &a, &ia), 0);
	ck_assert_int_eq(reqid_alloc(t, &b, &ib), 0);
	ck_assert(ia != 0 && ib != 0 && ia != ib);
	ck_assert_uint_eq(REQID_GEN(ia), 1);
	ck_assert_uint_eq(REQID_SLOT(ia), 0);
	ck_assert_uint_eq(REQID_SLOT(ib), 1);
	ck_assert_ptr_eq(reqid_lookup(t, ia), &a);
	ck_assert_ptr_eq(reqid_lookup(t, ib), &b);
	ck_assert_uint_eq(reqid_count(t), 2);
	ck_assert_int_eq(reqid_release(t, ia), 0);
	ck_assert_ptr_null(reqid_lookup(t, ia));
	ck_assert_ptr_eq(reqid_lookup(t, ib), &b);
	/* twice, or an id never handed out: -ENOENT */
	ck_assert_int_eq(reqid_release(t, ia), -ENOENT);
	ck_assert_int_eq(reqid_release(t, 0), -ENOENT);
	ck_assert_int_eq(reqid_release(t, (uint64_t)1 << 32 | 3), -ENOENT);
	ck_assert_uint_eq(reqid_count(t), 1);
	/* garbage: beyond the slots, generation 0, the wrong generation */
	ck_assert_ptr_null(reqid_lookup(t, 0));
	ck_assert_ptr_null(reqid_lookup(t, (uint64_t)1 << 32 | 1000));
	ck_assert_ptr_null(reqid_lookup(t, REQID_SLOT(ib)));
	ck_assert_ptr_null(reqid_lookup(t, ib + ((uint64_t)1 << 32)));
	ck_assert_int_eq(reqid_alloc(t, NULL, &ia), -EINVAL);
	reqid_table_free(t);
	reqid_table_free(NULL);
}
END_TEST

START_TEST(test_stale_after_reuse)
{
	struct reqid_table *t;
	int a, b;
	uint64_t ia, ib;

	ck_assert_int_eq(reqid_table_new(0, 0, &t), 0);
	ck_assert_int_eq(reqid_alloc(t, &a, &ia), 0);
	ck_assert_int_eq(reqid_release(t, ia), 0);
	/* the slot comes back with the next generation */
	ck_assert_int_eq(reqid_alloc(t, &b, &ib), 0);
	ck_assert_uint_eq(REQID_SLOT(ib), REQID_SLOT(ia));
	ck_assert_uint_eq(REQID_GEN(ib), REQID_GEN(ia) + 1);
	/* the old id misses the new object, and cannot free it */
	ck_assert_ptr_null(reqid_lookup(t, ia));
	ck_assert_int_eq(reqid_release(t, ia), -ENOENT);
	ck_assert_ptr_eq(reqid_lookup(t, ib), &b);
	reqid_table_free(t);
}
END_TEST

START_TEST(test_grow_and_bound)
{
	enum { MAX = 64 };
	struct reqid_table *t;
	uint64_t ids[MAX], extra;
	int objs[MAX];
	unsigned i;

	ck_assert_int_eq(reqid_table_new(2, MAX, &t), 0);
	for (i = 0; i < MAX; i++)
		ck_assert_int_eq(reqid_alloc(t, &objs[i], &ids[i]), 0);
	ck_assert_int_eq(reqid_alloc(t, &objs[0], &extra), -ENOSPC);
	/* growing moved the slots, not the objects */
	for (i = 0; i < MAX; i++)
		ck_assert_ptr_eq(reqid_lookup(t, ids[i]), &objs[i]);
	ck_assert_int_eq(reqid_release(t, ids[7]), 0);
	ck_assert_int_eq(reqid_alloc(t, &objs[7], &extra), 0);
	ck_assert_uint_eq(REQID_SLOT(extra), 7);
	ck_assert_int_eq(reqid_alloc(t, &objs[0], &extra), -ENOSPC);
	reqid_table_free(t);
}
END_TEST

/* Many rounds of random allocs and frees against a model: every live id
 * finds its object, every freed one misses. */
START_TEST(test_churn)
{
	enum { N = 512, ROUNDS = 200000 };
	struct reqid_table *t;
	uint64_t live[N], dead[N];
	int objs[N];
	unsigned i, r, seed = 1;

	ck_assert_int_eq(reqid_table_new(8, 0, &t), 0);
	for (i = 0; i < N; i++)
		live[i] = dead[i] = 0;
	for (r = 0; r < ROUNDS; r++) {
		i = (unsigned)rand_r(&seed) % N;
		if (live[i]) {
			ck_assert_ptr_eq(reqid_lookup(t, live[i]), &objs[i]);
			ck_assert_int_eq(reqid_release(t, live[i]), 0);
			dead[i] = live[i];
			live[i] = 0;
		} else {
			ck_assert_int_eq(reqid_alloc(t, &objs[i], &live[i]), 0);
			ck_assert(live[i] != 0);
		}
		if (dead[i])
			ck_assert_ptr_null(reqid_lookup(t, dead[i]));
	}
	for (i = 0; i < N; i++)
		ck_assert_ptr_eq(reqid_lookup(t, live[i]),
				 live[i] ? &objs[i] : NULL);
	reqid_table_free(t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("reqid");
	TCase *tc = tcase_create("reqid");

	tcase_add_test(tc, test_alloc_lookup_release);
	tcase_add_test(tc, test_stale_after_reuse);
	tcase_add_test(tc, test_grow_and_bound);
	tcase_add_test(tc, test_churn);
	/* 200,000 rounds: seconds under ASan on a loaded machine, not the
	 * default 4 */
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
