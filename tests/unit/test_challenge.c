/* SPDX-License-Identifier: BSD-2-Clause */
/* test_challenge.c - the proof-of-work challenge's pieces
 * (userspace/challenge.c): key files, tokens made and solved (and every
 * way one fails: tampered, another environment's or client prefix's,
 * expired, unsolved, no decimal), passes among Cookie fields, return
 * paths, the page's substitutions and escaping, the bounded tables, the
 * attack-mode set. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "challenge.h"
#include "h1.h"
#include "unit.h"

static const char key_hex[] =
    "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

static struct chal_keys keys1(void)
{
	struct chal_keys k;
	char err[160];

	ck_assert_int_eq(
	    chal_keys_parse(key_hex, sizeof(key_hex) - 1, &k, err, sizeof(err)),
	    0);
	return k;
}

static struct cidr v4(const char *a)
{
	struct cidr c, p;

	memset(&c, 0, sizeof(c));
	c.family = AF_INET;
	c.prefixlen = 32;
	ck_assert_int_eq(inet_pton(AF_INET, a, c.addr), 1);
	chal_prefix(&c, &p);
	return p;
}

/* The smallest n solving token, as text. */
static void solve(const char *token, char *n, size_t len)
{
	unsigned diff = 0;
	unsigned long long i;
	const char *p = strchr(strchr(token, '.') + 1, '.') + 1;

	diff = (unsigned)atoi(p);
	for (i = 0;; i++) {
		char buf[256];
		unsigned char md[32];
		unsigned z = 0, b;

		snprintf(buf, sizeof(buf), "%s.%llu", token, i);
		SHA256((const unsigned char *)buf, strlen(buf), md);
		for (b = 0; b < 256 && !(md[b / 8] & (0x80 >> (b % 8))); b++)
			z++;
		if (z >= diff) {
			snprintf(n, len, "%llu", i);
			return;
		}
	}
}

START_TEST(test_keys)
{
	struct chal_keys k;
	char err[160], two[200], three[300];

	snprintf(two, sizeof(two), "%s\n\n%s\r\n", key_hex, key_hex);
	ck_assert_int_eq(chal_keys_parse(two, strlen(two), &k, err, 160), 0);
	ck_assert_uint_eq(k.n, 2);
	ck_assert_uint_eq(k.k[0][1], 0x11);
	snprintf(three, sizeof(three), "%s\n%s\n%s\n", key_hex, key_hex,
		 key_hex);
	ck_assert_int_eq(chal_keys_parse(three, strlen(three), &k, err, 160),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "at most two"));
	ck_assert_int_eq(chal_keys_parse("abcd\n", 5, &k, err, 160), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "64 hex digits"));
	ck_assert_uint_eq(k.n, 0);
	snprintf(two, sizeof(two), "%.63sg", key_hex);
	ck_assert_int_eq(chal_keys_parse(two, strlen(two), &k, err, 160),
			 -EINVAL);
	ck_assert_int_eq(chal_keys_parse("\n\n", 2, &k, err, 160), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "no key"));
	memset(two, '0', 64);
	two[64] = '\n';
	ck_assert_int_eq(chal_keys_parse(two, 65, &k, err, 160), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "zeros"));
}
END_TEST

START_TEST(test_token)
{
	struct chal_keys k = keys1(), other = keys1(), both;
	struct cidr a = v4("198.51.100.7"), b = v4("198.51.100.200"),
		    c = v4("198.51.101.7");
	char t[CHAL_TOKEN_MAX], n[32], bad[CHAL_TOKEN_MAX];
	uint64_t now = 1800000000, tag = 0, tag2 = 0, until = 0;
	size_t tl;

	ck_assert_mem_eq(&a, &b, sizeof(a)); /* one /24 */
	tl = chal_token_make(&k, "e1", &a, 6, now, t);
	ck_assert_uint_gt(tl, 40);
	ck_assert_uint_eq(tl, strlen(t));
	ck_assert_uint_lt(tl, CHAL_TOKEN_MAX);
	ck_assert_ptr_null(strpbrk(t, "+/=&%\"' <>"));
	solve(t, n, sizeof(n));
	ck_assert_int_eq(chal_solution_check(&k, "e1", &b, t, tl, n, strlen(n),
					     now + 5, &tag, &until),
			 CHAL_GOOD);
	ck_assert_uint_eq(until, now + CHAL_TOKEN_TTL_S);
	/* two tokens: two tags */
	{
		char t2[CHAL_TOKEN_MAX], n2[32];
		size_t tl2 = chal_token_make(&k, "e1", &a, 6, now, t2);

		solve(t2, n2, sizeof(n2));
		ck_assert_int_eq(chal_solution_check(&k, "e1", &a, t2, tl2, n2,
						     strlen(n2), now, &tag2,
						     &until),
				 CHAL_GOOD);
		ck_assert_uint_ne(tag, tag2);
	}
	/* the other environment, the other prefix, another key */
	ck_assert_int_eq(chal_solution_check(&k, "e2", &a, t, tl, n, strlen(n),
					     now, &tag, &until),
			 CHAL_FORGED);
	ck_assert_int_eq(chal_solution_check(&k, "e1", &c, t, tl, n, strlen(n),
					     now, &tag, &until),
			 CHAL_FORGED);
	other.k[0][0] ^= 1;
	ck_assert_int_eq(chal_solution_check(&other, "e1", &a, t, tl, n,
					     strlen(n), now, &tag, &until),
			 CHAL_FORGED);
	/* rotation: the old key second verifies */
	both = other;
	both.n = 2;
	memcpy(both.k[1], k.k[0], CHAL_KEY_LEN);
	ck_assert_int_eq(chal_solution_check(&both, "e1", &a, t, tl, n,
					     strlen(n), now, &tag, &until),
			 CHAL_GOOD);
	/* expired; from too far ahead */
	ck_assert_int_eq(chal_solution_check(&k, "e1", &a, t, tl, n, strlen(n),
					     now + CHAL_TOKEN_TTL_S + 1, &tag,
					     &until),
			 CHAL_EXPIRED);
	ck_assert_int_eq(chal_solution_check(&k, "e1", &a, t, tl, n, strlen(n),
					     now - 2 * CHAL_TOKEN_TTL_S, &tag,
					     &until),
			 CHAL_EXPIRED);
	/* each byte of the token changed: never good */
	for (size_t i = 0; i < tl; i++) {
		enum chal_check r;

		memcpy(bad, t, tl + 1);
		bad[i] = bad[i] == 'A' ? 'B' : 'A';
		r = chal_solution_check(&k, "e1", &a, bad, tl, n, strlen(n),
					now, &tag, &until);
		ck_assert_msg(r == CHAL_FORGED || r == CHAL_MALFORMED,
			      "byte %zu changed: %s", i, chal_check_name(r));
	}
	/* cut short, too long */
	ck_assert_int_eq(chal_solution_check(&k, "e1", &a, t, tl - 1, n,
					     strlen(n), now, &tag, &until),
			 CHAL_MALFORMED);
	ck_assert_int_eq(chal_solution_check(&k, "e1", &a, t, 0, n, strlen(n),
					     now, &tag, &until),
			 CHAL_MALFORMED);
	/* solutions that are not */
	{
		static const char *const nots[] = {
		    "", "-1", "01", "1e3", " 1", "99999999999999999999"};
		char wrong[32];
		unsigned long long v = strtoull(n, NULL, 10);

		for (size_t i = 0; i < sizeof(nots) / sizeof(nots[0]); i++)
			ck_assert_int_eq(chal_solution_check(&k, "e1", &a, t,
							     tl, nots[i],
							     strlen(nots[i]),
							     now, &tag, &until),
					 CHAL_UNSOLVED);
		/* n is the smallest: every one below it fails */
		for (unsigned long long j = 0; j < v && j < 200; j++) {
			snprintf(wrong, sizeof(wrong), "%llu", j);
			ck_assert_int_eq(chal_solution_check(
					     &k, "e1", &a, t, tl, wrong,
					     strlen(wrong), now, &tag, &until),
					 CHAL_UNSOLVED);
		}
	}
	/* no key: no token */
	{
		struct chal_keys none = {0};

		ck_assert_uint_eq(chal_token_make(&none, "e1", &a, 6, now, t),
				  0);
	}
}
END_TEST

/* A head with the Cookie fields given. */
static void head_with(struct h1_head *h, const char *const *cookies, size_t n)
{
	memset(h, 0, sizeof(*h));
	for (size_t i = 0; i < n; i++) {
		h->headers[i].name = "Cookie";
		h->headers[i].name_len = 6;
		h->headers[i].value = cookies[i];
		h->headers[i].value_len = strlen(cookies[i]);
	}
	h->nheaders = (unsigned)n;
}

START_TEST(test_pass)
{
	struct chal_keys k = keys1();
	struct cidr a = v4("203.0.113.5"), c = v4("203.0.114.5");
	uint64_t now = 1800000000, exp = 0;
	char p[CHAL_PASS_MAX], c1[200], c2[200], bad[CHAL_PASS_MAX];
	struct h1_head *h = calloc(1, sizeof(*h));
	const char *f[2];
	size_t pl;

	ck_assert_ptr_nonnull(h);
	pl = chal_pass_make(&k, "e1", &a, now + 3600, p);
	ck_assert_uint_eq(pl, strlen(p));
	snprintf(c1, sizeof(c1), "a=1; " CHAL_COOKIE "=%s; b=2", p);
	f[0] = c1;
	head_with(h, f, 1);
	ck_assert_int_eq(chal_pass_find(&k, "e1", &a, h, now, &exp), CHAL_GOOD);
	ck_assert_uint_eq(exp, now + 3600);
	ck_assert_int_eq(chal_pass_find(&k, "e2", &a, h, now, &exp),
			 CHAL_FORGED);
	ck_assert_int_eq(chal_pass_find(&k, "e1", &c, h, now, &exp),
			 CHAL_FORGED);
	ck_assert_int_eq(chal_pass_find(&k, "e1", &a, h, now + 3600, &exp),
			 CHAL_EXPIRED);
	/* a bad one first, the good one in a second field, quoted */
	snprintf(c1, sizeof(c1), CHAL_COOKIE "=1.5.xyz;x=" CHAL_COOKIE);
	snprintf(c2, sizeof(c2), "  " CHAL_COOKIE "=\"%s\"  ", p);
	f[0] = c1;
	f[1] = c2;
	head_with(h, f, 2);
	ck_assert_int_eq(chal_pass_find(&k, "e1", &a, h, now, &exp), CHAL_GOOD);
	head_with(h, f, 1);
	ck_assert_int_eq(chal_pass_find(&k, "e1", &a, h, now, &exp),
			 CHAL_MALFORMED);
	/* none, a look-alike name */
	f[0] = "my" CHAL_COOKIE "=1; " CHAL_COOKIE "x=2";
	head_with(h, f, 1);
	ck_assert_int_eq(chal_pass_find(&k, "e1", &a, h, now, &exp),
			 CHAL_ABSENT);
	/* each byte changed */
	for (size_t i = 0; i < pl; i++) {
		enum chal_check r;

		memcpy(bad, p, pl + 1);
		bad[i] = bad[i] == '7' ? '8' : '7';
		snprintf(c1, sizeof(c1), CHAL_COOKIE "=%s", bad);
		f[0] = c1;
		head_with(h, f, 1);
		r = chal_pass_find(&k, "e1", &a, h, now, &exp);
		ck_assert_msg(r != CHAL_GOOD, "byte %zu changed: good", i);
	}
	/* only the first CHAL_PASSES_TRIED are checked */
	{
		char many[1024];
		size_t o = 0;

		for (int j = 0; j < CHAL_PASSES_TRIED; j++)
			o += (size_t)snprintf(many + o, sizeof(many) - o,
					      CHAL_COOKIE "=1.5.%s; ",
					      "AAAAAAAAAAAAAAAAAAAAAA");
		snprintf(many + o, sizeof(many) - o, CHAL_COOKIE "=%s", p);
		f[0] = many;
		head_with(h, f, 1);
		ck_assert_int_eq(chal_pass_find(&k, "e1", &a, h, now, &exp),
				 CHAL_FORGED);
		/* one fewer bad: the good one is the last tried */
		f[0] =
		    many + strlen(CHAL_COOKIE "=1.5.AAAAAAAAAAAAAAAAAAAAAA; ");
		head_with(h, f, 1);
		ck_assert_int_eq(chal_pass_find(&k, "e1", &a, h, now, &exp),
				 CHAL_GOOD);
	}
	/* __Host- ones first: a sibling's junk edge_pass cookies do not
	 * crowd out the client's pass */
	{
		char many[1024];
		size_t o = 0;

		for (int j = 0; j < 6; j++)
			o += (size_t)snprintf(many + o, sizeof(many) - o,
					      CHAL_COOKIE "=1.5.%s; ",
					      "AAAAAAAAAAAAAAAAAAAAAA");
		snprintf(many + o, sizeof(many) - o, CHAL_COOKIE_TLS "=%s", p);
		f[0] = many;
		head_with(h, f, 1);
		ck_assert_int_eq(chal_pass_find(&k, "e1", &a, h, now, &exp),
				 CHAL_GOOD);
		/* and five junk __Host- ones leave the edge_pass tried */
		o = 0;
		for (int j = 0; j < 5; j++)
			o += (size_t)snprintf(many + o, sizeof(many) - o,
					      CHAL_COOKIE_TLS "=1.5.%s; ",
					      "AAAAAAAAAAAAAAAAAAAAAA");
		snprintf(many + o, sizeof(many) - o, CHAL_COOKIE "=%s", p);
		head_with(h, f, 1);
		ck_assert_int_eq(chal_pass_find(&k, "e1", &a, h, now, &exp),
				 CHAL_GOOD);
	}
	/* a pass beyond any ttl edge gives: refused */
	pl = chal_pass_make(&k, "e1", &a, now + CHAL_TTL_MAX_S + 7200, p);
	snprintf(c1, sizeof(c1), CHAL_COOKIE "=%s", p);
	f[0] = c1;
	head_with(h, f, 1);
	ck_assert_int_eq(chal_pass_find(&k, "e1", &a, h, now, &exp),
			 CHAL_EXPIRED);
	free(h);
}
END_TEST

START_TEST(test_query_return)
{
	static const struct {
		const char *in, *out;
		int rc;
	} cases[] = {
	    {"%2F", "/", 0},
	    {"%2Fa%3Fb%3D1%26c", "/a?b=1&c", 0},
	    {"/plain", "/plain", 0},

	    {"%2F%2Fevil", "/", -EINVAL},
	    {"%2F%5Cevil", "/", -EINVAL},
	    {"https%3A%2F%2Fevil", "/", -EINVAL},
	    {"%2Fa%0D%0Ab", "/", -EINVAL},
	    {"%2Fa%20b", "/", -EINVAL},
	    {"%2Fa+b", "/", -EINVAL},
	    {"%2F%C3%A9", "/", -EINVAL},
	    {"%2", "/", -EINVAL},
	    {"%zz", "/", -EINVAL},
	    {"", "/", -EINVAL},
	};
	const char *v;
	size_t vl;
	char out[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(chal_return_path(cases[i].in,
						  strlen(cases[i].in), out,
						  sizeof(out)),
				 cases[i].rc);
		ck_assert_str_eq(out, cases[i].out);
	}
	/* too long for out */
	ck_assert_int_eq(chal_return_path("/0123456789", 11, out, 8), -EINVAL);
	ck_assert_str_eq(out, "/");
	ck_assert(chal_query_param("t=1&n=22&r=x", 12, "n", &v, &vl));
	ck_assert_uint_eq(vl, 2);
	ck_assert_mem_eq(v, "22", 2);
	ck_assert(chal_query_param("t=1&n=&r=x", 10, "n", &v, &vl));
	ck_assert_uint_eq(vl, 0);
	ck_assert(!chal_query_param("tn=1&xn=2", 9, "n", &v, &vl));
	ck_assert(!chal_query_param("n", 1, "n", &v, &vl));
}
END_TEST

START_TEST(test_page)
{
	size_t len = 0;
	char *p = chal_page("1.2.3.abc.def", 17, "/a?x='\"<>&\\", &len);

	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(len, strlen(p));
	ck_assert_ptr_nonnull(strstr(p, "\"1.2.3.abc.def\", D = 17, ret = "));
	ck_assert_ptr_nonnull(strstr(p, "A = \"" CHAL_PATH "\""));
	ck_assert_ptr_nonnull(
	    strstr(p, "\"/a?x=\\u0027\\\"\\u003c\\u003e\\u0026\\\\\""));
	ck_assert_ptr_null(memmem(p, len, "<>", 2));
	ck_assert_ptr_null(memmem(p, len, "{{TOKEN}}", 9));
	ck_assert_ptr_null(memmem(p, len, "{{DIFFICULTY}}", 14));
	ck_assert_ptr_null(memmem(p, len, "{{RETURN}}", 10));
	ck_assert_ptr_null(memmem(p, len, "{{ACTION}}", 10));
	free(p);
}
END_TEST

START_TEST(test_table)
{
	struct chal_table *t = chal_table_new(64);
	uint64_t now = 1000;
	unsigned i, kept = 0;

	ck_assert_ptr_nonnull(t);
	ck_assert(chal_table_add(t, 7, now + 10, now));
	ck_assert(!chal_table_add(t, 7, now + 99, now)); /* a replay */
	ck_assert(chal_table_has(t, 7, now + 9));
	ck_assert(!chal_table_has(t, 7, now + 10)); /* expired */
	ck_assert(chal_table_add(t, 7, now + 30, now + 10));
	ck_assert(!chal_table_has(t, 8, now));
	/* many more keys than slots: bounded, the latest-expiring kept */
	for (i = 0; i < 10000; i++)
		chal_table_add(t, 1000 + i, now + 100 + i, now);
	ck_assert_uint_le(chal_table_count(t, now), 64);
	for (i = 9900; i < 10000; i++)
		kept += chal_table_has(t, 1000 + i, now);
	ck_assert_uint_gt(kept, 20);
	chal_table_free(t);
	chal_table_free(NULL);
	ck_assert_uint_ne(chal_table_key('i', "e1", &(struct cidr){0}),
			  chal_table_key('f', "e1", &(struct cidr){0}));
	ck_assert_uint_ne(chal_table_key('i', "e1", &(struct cidr){0}),
			  chal_table_key('i', "e2", &(struct cidr){0}));
}
END_TEST

START_TEST(test_force_modes)
{
	enum chal_mode m;
	char id[80];

	ck_assert(!chal_forced("e1"));
	ck_assert_int_eq(chal_force("e1", true), 0);
	ck_assert_int_eq(chal_force("e1", true), 0); /* once */
	ck_assert(chal_forced("e1"));
	ck_assert(!chal_forced("e"));
	ck_assert_int_eq(chal_force("e1", false), 0);
	ck_assert(!chal_forced("e1"));
	ck_assert_int_eq(chal_force("e1", false), 0);
	ck_assert_int_eq(chal_force("", true), -EINVAL);
	memset(id, 'x', 70);
	id[70] = '\0';
	ck_assert_int_eq(chal_force(id, true), -EINVAL);
	for (int i = 0; i < CHAL_FORCED_MAX; i++) {
		snprintf(id, sizeof(id), "env-%d", i);
		ck_assert_int_eq(chal_force(id, true), 0);
	}
	ck_assert_int_eq(chal_force("one-more", true), -ENOSPC);
	ck_assert(chal_forced("env-4095"));
	ck_assert_int_eq(chal_force("env-0", false), 0);
	ck_assert(chal_forced("env-4095"));
	ck_assert(!chal_forced("env-0"));
	ck_assert_int_eq(chal_mode_parse("on_rate_limit", &m), 0);
	ck_assert_int_eq(m, CHAL_ON_RATE_LIMIT);
	ck_assert_int_eq(chal_mode_parse("on", &m), -EINVAL);
	ck_assert_str_eq(chal_mode_name(CHAL_NEW_IP), "new_ip");
	ck_assert_ptr_nonnull(chal_random_keys());
	ck_assert_uint_eq(chal_random_keys()->n, 1);
}
END_TEST

/* which of the database's keys sign and verify when (chal_keys_pick) */
START_TEST(test_keys_pick)
{
	struct chal_key_row v[4];
	struct chal_keys k;
	int64_t sig, oth, next;
	int i;

	memset(v, 0, sizeof(v));
	for (i = 0; i < 4; i++) {
		v[i].id = i + 1;
		memset(v[i].k, 0x10 + i, CHAL_KEY_LEN);
	}
	v[0].signs_from = 100; /* A: signs from 100 */
	chal_keys_pick(v, 1, 50, &k, &sig, &oth, &next);
	ck_assert_uint_eq(k.n, 0); /* not yet */
	ck_assert_int_eq(next, 100);
	chal_keys_pick(v, 1, 100, &k, &sig, &oth, &next);
	ck_assert_uint_eq(k.n, 1);
	ck_assert_int_eq(sig, 1);
	ck_assert_int_eq(k.k[0][0], 0x10);
	ck_assert_int_eq(next, 0);
	v[1].signs_from = 200; /* B: pending until 200 */
	chal_keys_pick(v, 2, 150, &k, &sig, &oth, &next);
	ck_assert_uint_eq(k.n, 2);
	ck_assert_int_eq(sig, 1);
	ck_assert_int_eq(oth, 2);
	ck_assert_int_eq(k.k[1][0], 0x11);
	ck_assert_int_eq(next, 200);
	chal_keys_pick(v, 2, 200, &k, &sig, &oth, &next);
	ck_assert_int_eq(sig, 2);
	ck_assert_int_eq(oth, 1); /* the one that signed before */
	ck_assert_int_eq(k.k[0][0], 0x11);
	v[2].signs_from = 300; /* C pending, D later still */
	v[3].signs_from = 400;
	chal_keys_pick(v, 4, 250, &k, &sig, &oth, &next);
	ck_assert_int_eq(sig, 2);
	ck_assert_int_eq(oth, 3); /* the next to sign, not A, not D */
	ck_assert_int_eq(next, 300);
	chal_keys_pick(v, 4, 1000, &k, &sig, &oth, &next);
	ck_assert_int_eq(sig, 4);
	ck_assert_int_eq(oth, 3);
	ck_assert_int_eq(next, 0);
	/* the same signs_from: the higher id is newer */
	v[0].signs_from = v[1].signs_from = 10;
	chal_keys_pick(v, 2, 20, &k, &sig, &oth, &next);
	ck_assert_int_eq(sig, 2);
	ck_assert_int_eq(oth, 1);
	/* A signs from 0; B (2) and C (3) both from 50: before, C (the one
	 * that will sign) verifies; after, C signs and A (which signed the
	 * passes about) verifies, not B, which never signed */
	v[0].signs_from = 0;
	v[1].signs_from = v[2].signs_from = 50;
	chal_keys_pick(v, 3, 40, &k, &sig, &oth, &next);
	ck_assert_int_eq(sig, 1);
	ck_assert_int_eq(oth, 3);
	ck_assert_int_eq(next, 50);
	chal_keys_pick(v, 3, 60, &k, &sig, &oth, &next);
	ck_assert_int_eq(sig, 3);
	ck_assert_int_eq(oth, 1);
	chal_keys_pick(v, 0, 20, &k, &sig, &oth, &next);
	ck_assert_uint_eq(k.n, 0);
	ck_assert_int_eq(sig, 0);
}
END_TEST

static Suite *challenge_suite(void)
{
	Suite *s = suite_create("challenge");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_keys);
	tcase_add_test(tc, test_token);
	tcase_add_test(tc, test_pass);
	tcase_add_test(tc, test_query_return);
	tcase_add_test(tc, test_page);
	tcase_add_test(tc, test_table);
	tcase_add_test(tc, test_force_modes);
	tcase_add_test(tc, test_keys_pick);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(challenge_suite());
}
