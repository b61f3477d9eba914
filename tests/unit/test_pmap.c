/* SPDX-License-Identifier: BSD-2-Clause */
/* test_pmap.c - the persistent hash trie: set, get, replace, delete; old
 * versions unchanged by later changes; a change's cost its path, not the
 * map (nodes made); keys whose hashes collide in part or in all 64 bits;
 * values freed exactly once when the last version holding them goes (the
 * count here, leaks and double frees under ASan); a random workload
 * checked against a plain array. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmap.h"
#include "unit.h"

/* values: counted allocations */
static int live;

static void val_free(void *v)
{
	live--;
	free(v);
}

static const struct pmap_ops ops = {val_free};

static char *val(const char *s)
{
	char *v = strdup(s);

	ck_assert_ptr_nonnull(v);
	live++;
	return v;
}

static void set(struct pmap_node **r, const char *k, const char *v,
		uint64_t epoch)
{
	ck_assert_int_eq(pmap_set(r, k, strlen(k), val(v), epoch, &ops), 0);
}

static const char *get(const struct pmap_node *r, const char *k)
{
	return pmap_get(r, k, strlen(k));
}

static void teardown(void)
{
	pmap_test_hash(NULL);
}

START_TEST(test_basic)
{
	struct pmap_node *r = NULL;
	uint64_t e = pmap_epoch();

	live = 0;
	ck_assert_ptr_null(get(r, "a"));
	set(&r, "a", "1", e);
	set(&r, "b", "2", e);
	set(&r, "a", "3", e); /* replaced: the old value freed */
	ck_assert_int_eq(live, 2);
	ck_assert_str_eq(get(r, "a"), "3");
	ck_assert_str_eq(get(r, "b"), "2");
	ck_assert_ptr_null(get(r, "c"));
	ck_assert_ptr_null(pmap_get(r, "a", 0));
	ck_assert_uint_eq(pmap_count(r), 2);
	ck_assert_int_eq(pmap_del(&r, "zz", 2, e, &ops), 0); /* absent */
	ck_assert_int_eq(pmap_del(&r, "a", 1, e, &ops), 0);
	ck_assert_ptr_null(get(r, "a"));
	ck_assert_int_eq(live, 1);
	ck_assert_int_eq(pmap_del(&r, "b", 1, e, &ops), 0);
	ck_assert_ptr_null(r);
	ck_assert_int_eq(live, 0);
}
END_TEST

/* A version taken before a batch reads on unchanged after it; putting
 * the versions frees every value once. */
START_TEST(test_versions)
{
	struct pmap_node *v1 = NULL, *v2;
	uint64_t e = pmap_epoch();
	char k[32];
	int i;

	live = 0;

	for (i = 0; i < 1000; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		set(&v1, k, k, e);
	}
	v2 = pmap_ref(v1); /* v1 published; a new batch on v2 */
	e = pmap_epoch();
	for (i = 0; i < 1000; i += 2) {
		snprintf(k, sizeof(k), "k%d", i);
		ck_assert_int_eq(pmap_del(&v2, k, strlen(k), e, &ops), 0);
	}
	set(&v2, "k1", "changed", e);
	set(&v2, "new", "n", e);
	for (i = 0; i < 1000; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		ck_assert_str_eq(get(v1, k), k);
		if (i % 2 == 0)
			ck_assert_ptr_null(get(v2, k));
		else
			ck_assert_str_eq(get(v2, k), i == 1 ? "changed" : k);
	}
	ck_assert_ptr_null(get(v1, "new"));
	ck_assert_uint_eq(pmap_count(v1), 1000);
	ck_assert_uint_eq(pmap_count(v2), 501);
	/* 1000 in v1, + "changed" and "new" in v2 */
	ck_assert_int_eq(live, 1002);
	pmap_put(v1, &ops);
	ck_assert_int_eq(live, 501); /* what only v1 held */
	pmap_put(v2, &ops);
	ck_assert_int_eq(live, 0);
}
END_TEST

/* One change to a map of 100,000 keys makes a handful of nodes: its
 * path, not a copy of the map. */
START_TEST(test_change_costs_its_path)
{
	struct pmap_node *v1 = NULL, *v2;
	uint64_t e = pmap_epoch(), before;
	char k[32];
	int i;

	live = 0;
	for (i = 0; i < 100000; i++) {
		snprintf(k, sizeof(k), "site%d.example", i);
		set(&v1, k, "x", e);
	}
	v2 = pmap_ref(v1);
	e = pmap_epoch();
	before = pmap_nodes_made();
	set(&v2, "site5.example", "y", e);
	/* a leaf and at most one inner node per level (16) */
	ck_assert_uint_le(pmap_nodes_made() - before, 17);
	before = pmap_nodes_made();
	set(&v2, "another.example", "z", e);
	ck_assert_uint_le(pmap_nodes_made() - before, 17);
	before = pmap_nodes_made();
	ck_assert_int_eq(pmap_del(&v2, "site7.example", 13, e, &ops), 0);
	ck_assert_uint_le(pmap_nodes_made() - before, 17);
	ck_assert_str_eq(get(v1, "site5.example"), "x");
	ck_assert_str_eq(get(v2, "site5.example"), "y");
	ck_assert_str_eq(get(v1, "site7.example"), "x");
	ck_assert_ptr_null(get(v2, "site7.example"));
	pmap_put(v1, &ops);
	pmap_put(v2, &ops);
	ck_assert_int_eq(live, 0);
}
END_TEST

/* hashes under the test's control: the key's first byte picks one of a
 * few, so that keys collide in all 64 bits, or share their low bits */
static uint64_t hash_full(const void *d, size_t n)
{
	(void)n;
	return 0x1234567890abcdefull + (uint64_t)(((const char *)d)[0] % 3);
}

static uint64_t hash_low(const void *d, size_t n)
{
	/* the same low 60 bits: they part at the last level only */
	return 0x0fffffffffffffffull | ((uint64_t)(n % 16) << 60) |
	       (uint64_t)((const unsigned char *)d)[n - 1] << 56;
}

START_TEST(test_collisions)
{
	uint64_t (*fns[2])(const void *, size_t) = {hash_full, hash_low};
	struct pmap_node *v1 = NULL, *v2;
	uint64_t e;
	char k[32];
	int i;

	live = 0;
	pmap_test_hash(fns[_i]);
	e = pmap_epoch();
	for (i = 0; i < 200; i++) {
		snprintf(k, sizeof(k), "%c%d", 'a' + i % 26, i);
		set(&v1, k, k, e);
	}
	v2 = pmap_ref(v1);
	e = pmap_epoch();
	for (i = 0; i < 200; i++) {
		snprintf(k, sizeof(k), "%c%d", 'a' + i % 26, i);
		ck_assert_str_eq(get(v1, k), k);
		if (i % 3 == 0)
			ck_assert_int_eq(pmap_del(&v2, k, strlen(k), e, &ops),
					 0);
		else if (i % 3 == 1)
			set(&v2, k, "again", e);
	}
	for (i = 0; i < 200; i++) {
		snprintf(k, sizeof(k), "%c%d", 'a' + i % 26, i);
		ck_assert_str_eq(get(v1, k), k);
		if (i % 3 == 0)
			ck_assert_ptr_null(get(v2, k));
		else
			ck_assert_str_eq(get(v2, k), i % 3 == 1 ? "again" : k);
	}
	ck_assert_ptr_null(get(v2, "zz-absent"));
	ck_assert_uint_eq(pmap_count(v1), 200);
	pmap_put(v1, &ops);
	for (i = 0; i < 200; i++) {
		snprintf(k, sizeof(k), "%c%d", 'a' + i % 26, i);
		ck_assert_int_eq(pmap_del(&v2, k, strlen(k), e, &ops), 0);
	}
	ck_assert_ptr_null(v2);
	ck_assert_int_eq(live, 0);
}
END_TEST

/* Random sets and deletes over a few batches, each version checked
 * against a plain array of what it must hold. */
START_TEST(test_random)
{
	enum { KEYS = 3000, BATCHES = 6, OPS = 4000 };
	struct pmap_node *ver[BATCHES + 1] = {NULL};
	static int truth[BATCHES + 1][KEYS]; /* value + 1, 0: absent */
	char k[32], v[32];
	int b, i, j;

	live = 0;
	srand(7);
	for (b = 1; b <= BATCHES; b++) {
		uint64_t e = pmap_epoch();

		ver[b] = pmap_ref(ver[b - 1]);
		memcpy(truth[b], truth[b - 1], sizeof(truth[b]));
		for (i = 0; i < OPS; i++) {
			j = rand() % KEYS;
			snprintf(k, sizeof(k), "key-%d", j);
			if (rand() % 3 == 0) {
				ck_assert_int_eq(
				    pmap_del(&ver[b], k, strlen(k), e, &ops),
				    0);
				truth[b][j] = 0;
			} else {
				truth[b][j] = rand() % 1000 + 1;
				snprintf(v, sizeof(v), "%d", truth[b][j]);
				set(&ver[b], k, v, e);
			}
		}
	}
	for (b = 0; b <= BATCHES; b++) {
		size_t n = 0;

		for (j = 0; j < KEYS; j++) {
			const char *got;

			snprintf(k, sizeof(k), "key-%d", j);
			got = get(ver[b], k);
			if (!truth[b][j]) {
				ck_assert_ptr_null(got);
				continue;
			}
			n++;
			ck_assert_ptr_nonnull(got);
			ck_assert_int_eq(atoi(got), truth[b][j]);
		}
		ck_assert_uint_eq(pmap_count(ver[b]), n);
	}
	for (b = 0; b <= BATCHES; b++)
		pmap_put(ver[b], &ops);
	ck_assert_int_eq(live, 0);
}
END_TEST

static Suite *pmap_suite(void)
{
	Suite *s = suite_create("pmap");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_basic);
	tcase_add_test(tc, test_versions);
	tcase_add_test(tc, test_change_costs_its_path);
	tcase_add_loop_test(tc, test_collisions, 0, 2);
	tcase_add_test(tc, test_random);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(pmap_suite());
}
