/* SPDX-License-Identifier: BSD-2-Clause */
/* test_config_check.c - the checks of a project's values without
 * libconfig (config_check.h), as the file loader and the PostgreSQL
 * loader use them: domains, endpoints, path prefixes, ids, names, IP
 * rules, balancing modes, security header values, durations. */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "config_check.h"
#include "unit.h"

/* The checks are usable without libconfig: their header pulls none in. */
#ifdef LIBCONFIG_VER_MAJOR
#error "config_check.h includes libconfig"
#endif

#define CK_NELEM(a) (sizeof(a) / sizeof((a)[0]))

struct dom_case {
	const char *in;
	bool wildcard_ok;
	const char *out; /* NULL: refused, with msg */
	const char *msg;
};

static const struct dom_case doms[] = {
    {"WWW.Example.COM", false, "www.example.com", NULL},
    {"a-b.c0.example", false, "a-b.c0.example", NULL},
    {"*.Preview.example.com", true, "*.preview.example.com", NULL},
    {"*.example.com", false, NULL, "no wildcard allowed"},
    {"*.com", true, NULL, "two labels"},
    {"a.*.example.com", true, NULL, "only as the whole leftmost label"},
    {"*x.example.com", true, NULL, "whole leftmost label"},
    {"", true, NULL, "empty domain"},
    {"a..example.com", true, NULL, "empty label"},
    {"example.com.", true, NULL, "trailing dot"},
    {"-a.example.com", true, NULL, "starts with '-'"},
    {"a-.example.com", true, NULL, "ends with '-'"},
    {"example.com:80", true, NULL, "no port"},
    {"exa_mple.com", true, NULL, "invalid character '_'"},
    {"a.example.com-", true, NULL, "ends with '-'"},
};

START_TEST(test_domain)
{
	const struct dom_case *t = &doms[_i];
	struct errbuf err = {""};
	char d[300];
	int rc;

	snprintf(d, sizeof(d), "%s", t->in);
	rc = config_domain_check(d, t->wildcard_ok, &err);
	if (t->out) {
		ck_assert_msg(rc == 0, "%s: %s", t->in, err.msg);
		ck_assert_str_eq(d, t->out);
	} else {
		ck_assert_int_eq(rc, -EINVAL);
		ck_assert_msg(strstr(err.msg, t->msg), "%s: '%s' lacks '%s'",
			      t->in, err.msg, t->msg);
	}
}
END_TEST

/* The length rules: 63 bytes a label, 253 in all. */
START_TEST(test_domain_lengths)
{
	struct errbuf err = {""};
	char d[300];

	memset(d, 'a', 63);
	snprintf(d + 63, sizeof(d) - 63, ".example.com");
	ck_assert_int_eq(config_domain_check(d, false, &err), 0);
	memset(d, 'a', 64);
	snprintf(d + 64, sizeof(d) - 64, ".example.com");
	ck_assert_int_eq(config_domain_check(d, false, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "longer than 63"));
	/* labels of 63, 63, 63 and 60 bytes with 3 dots: 252, then 253, 254 */
	memset(d, 'a', 252);
	d[63] = d[127] = d[191] = '.';
	d[251] = 'a';
	d[252] = '\0';
	ck_assert_int_eq(config_domain_check(d, false, &err), 0);
	d[252] = 'b';
	d[253] = '\0';
	ck_assert_int_eq(config_domain_check(d, false, &err), 0);
	d[253] = 'c';
	d[254] = '\0';
	ck_assert_int_eq(config_domain_check(d, false, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "longer than 253"));
}
END_TEST

struct addr_case {
	const char *in;
	const char *text; /* NULL: refused, with msg */
	const char *msg;
};

static const struct addr_case addrs[] = {
    {"10.0.0.1:80", "10.0.0.1:80", NULL},
    {"[2001:DB8::1]:8443", "[2001:db8::1]:8443", NULL},
    {"[::]:65535", "[::]:65535", NULL},
    {"1.2.3.4", NULL, "expected ADDR:PORT"},
    {"example.com:80", NULL, "not resolved"},
    {"1.2.3.04:80", NULL, "not a numeric"},
    {"1.2.3.4:0", NULL, "1..65535"},
    {"1.2.3.4:65536", NULL, "1..65535"},
    {"1.2.3.4:080", NULL, "1..65535"},
    {"::1:80", NULL, "brackets"},
    {"[::1:80", NULL, "[IPV6]:PORT"},
    {"[fe80::1%eth0]:80", NULL, "zone ids"},
    {"[]:80", NULL, "not a numeric"},
    {"", NULL, "empty address"},
};

START_TEST(test_addr)
{
	const struct addr_case *t = &addrs[_i];
	struct errbuf err = {""};
	struct config_addr a;
	int rc;

	rc = config_addr_parse(t->in, &a, &err);
	if (t->text) {
		ck_assert_msg(rc == 0, "%s: %s", t->in, err.msg);
		ck_assert_str_eq(a.text, t->text);
		ck_assert_uint_eq(a.len, a.ss.ss_family == AF_INET
					     ? sizeof(struct sockaddr_in)
					     : sizeof(struct sockaddr_in6));
	} else {
		ck_assert_int_eq(rc, -EINVAL);
		ck_assert_msg(strstr(err.msg, t->msg), "%s: '%s' lacks '%s'",
			      t->in, err.msg, t->msg);
	}
}
END_TEST

static const struct addr_case prefixes[] = {
    {"/fn", "", NULL},
    {"/a/b-c/d.e/~f/@g:h", "", NULL},
    {"fn", NULL, "start with '/'"},
    {"/", NULL, "must be 2..256 bytes"},
    {"/fn/", NULL, "trailing"},
    {"/a//b", NULL, "empty segment"},
    {"/a/../b", NULL, "'..'"},
    {"/a/./b", NULL, "'.'"},
    {"/a%20b", NULL, "invalid character '%'"},
    {"/a?b", NULL, "invalid character '?'"},
};

START_TEST(test_prefix)
{
	const struct addr_case *t = &prefixes[_i];
	struct errbuf err = {""};
	int rc = config_prefix_check(t->in, &err);

	if (t->text) {
		ck_assert_msg(rc == 0, "%s: %s", t->in, err.msg);
	} else {
		ck_assert_int_eq(rc, -EINVAL);
		ck_assert_msg(strstr(err.msg, t->msg), "%s: '%s' lacks '%s'",
			      t->in, err.msg, t->msg);
	}
}
END_TEST

START_TEST(test_prefix_length)
{
	struct errbuf err = {""};
	char p[300];

	p[0] = '/';
	memset(p + 1, 'a', 255);
	p[256] = '\0';
	ck_assert_int_eq(config_prefix_check(p, &err), 0);
	p[256] = 'a';
	p[257] = '\0';
	ck_assert_int_eq(config_prefix_check(p, &err), -EINVAL);
}
END_TEST

START_TEST(test_ids_names)
{
	struct errbuf err = {""};
	char s[200];

	ck_assert_int_eq(config_id_check("shop-prod_2.x", &err), 0);
	ck_assert_int_eq(config_id_check("", &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "must be 1..64 bytes"));
	ck_assert_int_eq(config_id_check("a b", &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "only letters, digits"));
	ck_assert_int_eq(config_id_check("a/b", &err), -EINVAL);
	memset(s, 'a', 65);
	s[65] = '\0';
	ck_assert_int_eq(config_id_check(s, &err), -EINVAL);
	s[64] = '\0';
	ck_assert_int_eq(config_id_check(s, &err), 0);

	ck_assert_int_eq(config_name_check("Shop — production", &err), 0);
	ck_assert_int_eq(config_name_check("", &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "must be 1..128 bytes"));
	ck_assert_int_eq(config_name_check("a\tb", &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "control character"));
	ck_assert_int_eq(config_name_check("a\x7f", &err), -EINVAL);
	memset(s, 'n', 129);
	s[129] = '\0';
	ck_assert_int_eq(config_name_check(s, &err), -EINVAL);
	s[128] = '\0';
	ck_assert_int_eq(config_name_check(s, &err), 0);
}
END_TEST

START_TEST(test_ip_rules)
{
	struct errbuf err = {""}, note = {"x"};
	struct rules r = {0};

	ck_assert_int_eq(config_ip_rule_add(&r, EDGE_ACT_BLOCK,
					    "203.0.113.0/24", &note, &err),
			 0);
	ck_assert_str_eq(note.msg, "");
	ck_assert_int_eq(
	    config_ip_rule_add(&r, EDGE_ACT_ALLOW, "203.0.113.7", &note, &err),
	    0);
	ck_assert_int_eq(
	    config_ip_rule_add(&r, EDGE_ACT_BLOCK, "10.1.2.3/8", &note, &err),
	    0);
	ck_assert_str_eq(note.msg,
			 "\"10.1.2.3/8\" has host bits set; using 10.0.0.0/8");
	ck_assert_uint_eq(r.n, 3);
	/* a prefix once, under either action */
	ck_assert_int_eq(
	    config_ip_rule_add(&r, EDGE_ACT_ALLOW, "10.0.0.0/8", &note, &err),
	    -EINVAL);
	ck_assert_str_eq(err.msg, "10.0.0.0/8 is already in ip_block");
	ck_assert_int_eq(config_ip_rule_add(&r, EDGE_ACT_BLOCK,
					    "203.0.113.7/32", NULL, &err),
			 -EINVAL);
	ck_assert_str_eq(err.msg, "203.0.113.7/32 is already in ip_allow");
	ck_assert_int_eq(
	    config_ip_rule_add(&r, EDGE_ACT_BLOCK, "10.0.0.0/33", NULL, &err),
	    -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "prefix"));
	ck_assert_uint_eq(r.n, 3);
	ck_assert_uint_eq(rules_find(&r, &r.v[2].cidr)->action, EDGE_ACT_BLOCK);
	rules_free(&r);
}
END_TEST

START_TEST(test_choices)
{
	struct errbuf err = {""};
	enum config_balance b = CONFIG_BALANCE_ROUND_ROBIN;

	ck_assert_int_eq(config_balance_parse("ip_hash", &b, &err), 0);
	ck_assert_int_eq(b, CONFIG_BALANCE_IP_HASH);
	ck_assert_int_eq(config_balance_parse("least_inflight", &b, &err), 0);
	ck_assert_int_eq(b, CONFIG_BALANCE_LEAST_INFLIGHT);
	ck_assert_int_eq(config_balance_parse("random", &b, &err), -EINVAL);
	ck_assert_int_eq(b, CONFIG_BALANCE_LEAST_INFLIGHT);
	ck_assert_ptr_nonnull(strstr(err.msg, "\"random\": expected"));
	ck_assert_str_eq(config_balance_name(CONFIG_BALANCE_ROUND_ROBIN),
			 "round_robin");
	ck_assert_str_eq(config_balance_name((enum config_balance)9), "?");

	ck_assert_int_eq(config_frame_options_check("", &err), 0);
	ck_assert_int_eq(config_frame_options_check("DENY", &err), 0);
	ck_assert_int_eq(config_frame_options_check("SAMEORIGIN", &err), 0);
	ck_assert_int_eq(config_frame_options_check("deny", &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "expected \"DENY\""));
	ck_assert_int_eq(config_referrer_policy_check("", &err), 0);
	ck_assert_int_eq(config_referrer_policy_check("no-referrer", &err), 0);
	ck_assert_int_eq(config_referrer_policy_check(
			     "strict-origin-when-cross-origin", &err),
			 0);
	ck_assert_int_eq(config_referrer_policy_check("never", &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "not a Referrer-Policy"));
}
END_TEST

/* The timeouts' duration: the one grammar, in ms, 1 ms .. 7 days. */
START_TEST(test_duration)
{
	struct errbuf err = {""};
	uint64_t ms = 0;

	ck_assert_int_eq(config_duration_parse("1d2h3m4s5ms", &ms, &err), 0);
	ck_assert_uint_eq(ms, 93784005);
	ck_assert_int_eq(config_duration_parse("7d", &ms, &err), 0);
	ck_assert_uint_eq(ms, CONFIG_DURATION_MAX_MS);
	ck_assert_int_eq(config_duration_parse("7d1ms", &ms, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "too long (max 7d)"));
	ck_assert_int_eq(config_duration_parse("10", &ms, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "needs a unit"));
}
END_TEST

static Suite *config_check_suite(void)
{
	Suite *s = suite_create("config_check");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_domain, 0, CK_NELEM(doms));
	tcase_add_test(tc, test_domain_lengths);
	tcase_add_loop_test(tc, test_addr, 0, CK_NELEM(addrs));
	tcase_add_loop_test(tc, test_prefix, 0, CK_NELEM(prefixes));
	tcase_add_test(tc, test_prefix_length);
	tcase_add_test(tc, test_ids_names);
	tcase_add_test(tc, test_ip_rules);
	tcase_add_test(tc, test_choices);
	tcase_add_test(tc, test_duration);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(config_check_suite());
}
