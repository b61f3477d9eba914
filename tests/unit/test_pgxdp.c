/* SPDX-License-Identifier: BSD-2-Clause */
/* test_pgxdp.c - which of the database's global rules go into the XDP
 * maps (pgxdp_plan): one rule per prefix, a block before an allow, then
 * the lowest id, whatever order the rows came in; no block that would
 * drop the database's own address. */
#include <check.h>
#include <string.h>

#include "pgxdp.h"
#include "unit.h"

static struct pgm_rule mk(int64_t id, const char *cidr, uint8_t action)
{
	struct pgm_rule r;

	memset(&r, 0, sizeof(r));
	r.id = id;
	r.action = action;
	ck_assert_int_eq(cidr_parse(cidr, &r.cidr, NULL, NULL), 0);
	return r;
}

#define B EDGE_ACT_BLOCK
#define A EDGE_ACT_ALLOW
#define W PGXDP_WRITE
#define D PGXDP_DUPLICATE
#define R PGXDP_REFUSED

static const struct cidr *keep;
static size_t nkeep;

static void plan_is(const struct pgm_rule *v, size_t n, const uint8_t *want)
{
	uint8_t out[16];
	size_t w = 99, i, nw = 0;

	ck_assert_int_eq(pgxdp_plan(v, n, keep, nkeep, out, &w), 0);
	for (i = 0; i < n; i++) {
		ck_assert_msg(out[i] == want[i],
			      "rule %zu (id %lld): %u, want %u", i,
			      (long long)v[i].id, out[i], want[i]);
		nw += want[i] == W;
	}
	ck_assert_uint_eq(w, nw);
}

START_TEST(distinct_prefixes_all_go_in)
{
	struct pgm_rule v[] = {
	    mk(1, "198.18.0.0/24", B), mk(2, "198.18.0.0/25", A),
	    mk(3, "198.18.0.3", A),    mk(4, "2001:db8::/64", B),
	    mk(5, "2001:db8::/65", B), mk(6, "::/0", A),
	    mk(7, "0.0.0.0/0", B),
	};
	const uint8_t want[] = {W, W, W, W, W, W, W};

	plan_is(v, 7, want);
	ck_assert_int_eq(pgxdp_plan(v, 0, NULL, 0, NULL, &(size_t){5}), 0);
}
END_TEST

START_TEST(block_beats_allow_either_order)
{
	struct pgm_rule v1[] = {mk(10, "198.18.0.2/32", A),
				mk(11, "198.18.0.2/32", B)};
	struct pgm_rule v2[] = {mk(10, "198.18.0.2/32", B),
				mk(11, "198.18.0.2/32", A)};
	/* a mapped IPv6 row is the same IPv4 prefix */
	struct pgm_rule v3[] = {
	    mk(3, "2001:db8::1", A), mk(9, "::ffff:1.2.3.4", A),
	    mk(8, "1.2.3.4/32", B), mk(2, "2001:db8::1/128", B)};
	const uint8_t w1[] = {D, W}, w2[] = {W, D}, w3[] = {D, D, W, W};

	plan_is(v1, 2, w1);
	plan_is(v2, 2, w2);
	plan_is(v3, 4, w3);
}
END_TEST

START_TEST(same_action_lowest_id)
{
	struct pgm_rule v[] = {
	    mk(30, "10.0.0.0/8", B), mk(7, "10.0.0.0/8", B),
	    mk(12, "10.0.0.0/8", B), mk(40, "10.0.0.0/8", A),
	    mk(5, "10.0.0.0/8", A),
	};
	const uint8_t want[] = {D, W, D, D, D};

	plan_is(v, 5, want);
}
END_TEST

static struct cidr addr(const char *s)
{
	struct cidr c;

	ck_assert_int_eq(cidr_parse_addr(s, &c, NULL), 0);
	return c;
}

START_TEST(no_block_of_the_database)
{
	struct cidr db[2] = {addr("192.0.2.10"), addr("2001:db8:5::1")};
	/* the fat finger, and a block of the database's own network */
	struct pgm_rule v1[] = {mk(1, "0.0.0.0/0", B), mk(2, "198.18.0.2", B),
				mk(3, "192.0.2.0/24", B), mk(4, "::/0", B),
				mk(5, "2001:db8:5::/48", A)};
	const uint8_t w1[] = {R, W, R, W, W};
	/* an allow of the database's address lets the blocks around it in;
	 * a longer block inside that allow is refused, and one beside the
	 * address is not */
	struct pgm_rule v2[] = {
	    mk(1, "0.0.0.0/0", B),    mk(2, "192.0.2.0/28", A),
	    mk(3, "192.0.2.8/30", B), mk(4, "192.0.2.4/30", B),
	    mk(5, "192.0.2.10", B),   mk(6, "2001:db8:5::1", B)};
	const uint8_t w2[] = {W, W, R, W, R, R};
	/* a duplicate allow is no allow (the block on its prefix goes in) */
	struct pgm_rule v3[] = {mk(1, "192.0.2.10", A), mk(2, "192.0.2.10", B),
				mk(3, "192.0.2.0/24", A)};
	const uint8_t w3[] = {D, R, W};

	keep = db;
	nkeep = 2;
	plan_is(v1, 5, w1);
	plan_is(v2, 6, w2);
	plan_is(v3, 3, w3);
	nkeep = 0; /* nothing to keep: every block goes in */
	{
		const uint8_t all[] = {W, W, W, W, W};

		plan_is(v1, 5, all);
	}
}
END_TEST

static Suite *pgxdp_suite(void)
{
	Suite *s = suite_create("pgxdp");
	TCase *tc = tcase_create("plan");

	tcase_add_test(tc, distinct_prefixes_all_go_in);
	tcase_add_test(tc, block_beats_allow_either_order);
	tcase_add_test(tc, same_action_lowest_id);
	tcase_add_test(tc, no_block_of_the_database);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(pgxdp_suite());
}
