/* SPDX-License-Identifier: BSD-2-Clause */
/* test_cidr.c - strict CIDR parsing, normalisation, containment. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "cidr.h"
#include "unit.h"

struct good_case {
	const char *in;
	const char *out;
	unsigned notes;
};

static const struct good_case good[] = {
    {"10.0.0.0/8", "10.0.0.0/8", 0},
    {"10.1.2.3/8", "10.0.0.0/8", CIDR_NOTE_HOST_BITS},
    {"1.2.3.4", "1.2.3.4/32", 0},
    {"0.0.0.0/0", "0.0.0.0/0", 0},
    {"255.255.255.255/32", "255.255.255.255/32", 0},
    {"192.168.1.129/25", "192.168.1.128/25", CIDR_NOTE_HOST_BITS},
    {"0.0.0.0", "0.0.0.0/32", 0},
    {"2001:db8::/32", "2001:db8::/32", 0},
    {"2001:db8::1", "2001:db8::1/128", 0},
    {"2001:DB8::1/64", "2001:db8::/64", CIDR_NOTE_HOST_BITS},
    {"::/0", "::/0", 0},
    {"::1", "::1/128", 0},
    {"::ffff:1.2.3.4", "1.2.3.4/32", CIDR_NOTE_MAPPED},
    {"::ffff:1.2.3.4/128", "1.2.3.4/32", CIDR_NOTE_MAPPED},
    {"::ffff:1.2.3.4/120", "1.2.3.0/24",
     CIDR_NOTE_MAPPED | CIDR_NOTE_HOST_BITS},
    {"::ffff:0:0/96", "0.0.0.0/0", CIDR_NOTE_MAPPED},
    {"::ffff:0:0/95", "::fffe:0:0/95", CIDR_NOTE_HOST_BITS},
    {"fe80::1/10", "fe80::/10", CIDR_NOTE_HOST_BITS},
};

struct bad_case {
	const char *in;
	const char *msg; /* fragment of the error message */
};

static const struct bad_case bad[] = {
    {"", "empty"},
    {"garbage", "not an IPv4 or IPv6 address"},
    {" 1.2.3.4", "whitespace"},
    {"1.2.3.4 ", "whitespace"},
    {"1.2.3.4/ 8", "whitespace"},
    {"1.2.3.4\t", "whitespace"},
    {"1.2.3.4/33", "prefix length 33 too long (max 32"},
    {"2001:db8::/129", "prefix length 129 too long (max 128"},
    {"1.2.3.4/1000", "too long"},
    {"300.1.1.1", "octet 300 out of range"},
    {"1.2.3.256", "octet 256 out of range"},
    {"1.2.3.1000", "out of range"},
    {"1.2.3", "needs 4 octets"},
    {"1.2.3.", "needs 4 octets"},
    {"1.2.3.4.5", "only 4 octets"},
    {"01.2.3.4", "leading zero"},
    {"1.2.3.04", "leading zero"},
    {"1.2.3.4/", "missing prefix length"},
    {"/8", "missing address"},
    {"1.2.3.4/+8", "not a decimal number"},
    {"1.2.3.4/-8", "not a decimal number"},
    {"1.2.3.4/08", "leading zero"},
    {"1.2.3.4/8a", "not a decimal number"},
    {"1.2.3.4/0x8", "not a decimal number"},
    {"1.2.3.4/8/8", "more than one '/'"},
    {"1.2.3.x", "unexpected character 'x'"},
    {"1..3.4", "needs 4 octets"},
    {"2001:db8:::1", "not a valid IPv6"},
    {"2001:db8::g", "unexpected character 'g'"},
    {"fe80::1%eth0", "zone ids"},
    {"1.2.3.4\x01", "control"},
    {"::ffff:01.2.3.4", "not a valid IPv6"},
    {"1111111111111111111111111111111111111111111111111111111111111111111",
     "too long"},
};

START_TEST(test_good)
{
	const struct good_case *t = &good[_i];
	struct errbuf err = {""};
	char s[CIDR_STR_MAX];
	struct cidr c;
	unsigned notes = 99;

	ck_assert_msg(cidr_parse(t->in, &c, &notes, &err) == 0, "%s: %s", t->in,
		      err.msg);
	ck_assert_str_eq(cidr_format(&c, s, sizeof(s)), t->out);
	ck_assert_uint_eq(notes, t->notes);
}
END_TEST

START_TEST(test_bad)
{
	const struct bad_case *t = &bad[_i];
	struct errbuf err = {""};
	struct cidr c;

	ck_assert_int_eq(cidr_parse(t->in, &c, NULL, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, t->msg) != NULL,
		      "'%s': message '%s' lacks '%s'", t->in, err.msg, t->msg);
}
END_TEST

START_TEST(test_null)
{
	struct errbuf err = {""};
	struct cidr c;

	ck_assert_int_eq(cidr_parse(NULL, &c, NULL, &err), -EINVAL);
	ck_assert_int_eq(cidr_parse("1.2.3.4", &c, NULL, NULL), 0);
	ck_assert_int_eq(cidr_parse("1.2.3.400", &c, NULL, NULL), -EINVAL);
}
END_TEST

START_TEST(test_addr_only)
{
	struct errbuf err = {""};
	struct cidr c;

	ck_assert_int_eq(cidr_parse_addr("10.0.0.1", &c, &err), 0);
	ck_assert_uint_eq(c.prefixlen, 32);
	ck_assert_int_eq(cidr_parse_addr("10.0.0.0/8", &c, &err), -EINVAL);
	ck_assert_int_eq(cidr_parse_addr("::ffff:10.0.0.1", &c, &err), 0);
	ck_assert_uint_eq(c.family, AF_INET);
}
END_TEST

START_TEST(test_contains)
{
	struct cidr net, a;

	ck_assert_int_eq(cidr_parse("10.0.0.0/8", &net, NULL, NULL), 0);
	ck_assert_int_eq(cidr_parse("10.255.1.2", &a, NULL, NULL), 0);
	ck_assert(cidr_contains(&net, &a));
	ck_assert_int_eq(cidr_parse("11.0.0.1", &a, NULL, NULL), 0);
	ck_assert(!cidr_contains(&net, &a));
	ck_assert_int_eq(cidr_parse("192.168.1.128/25", &net, NULL, NULL), 0);
	ck_assert_int_eq(cidr_parse("192.168.1.127", &a, NULL, NULL), 0);
	ck_assert(!cidr_contains(&net, &a));
	ck_assert_int_eq(cidr_parse("192.168.1.200", &a, NULL, NULL), 0);
	ck_assert(cidr_contains(&net, &a));
	ck_assert_int_eq(cidr_parse("0.0.0.0/0", &net, NULL, NULL), 0);
	ck_assert(cidr_contains(&net, &a));
	/* families never mix */
	ck_assert_int_eq(cidr_parse("::/0", &net, NULL, NULL), 0);
	ck_assert(!cidr_contains(&net, &a));
	ck_assert_int_eq(cidr_parse("2001:db8::/33", &net, NULL, NULL), 0);
	ck_assert_int_eq(cidr_parse("2001:db8:7fff::1", &a, NULL, NULL), 0);
	ck_assert(cidr_contains(&net, &a));
	ck_assert_int_eq(cidr_parse("2001:db8:8000::1", &a, NULL, NULL), 0);
	ck_assert(!cidr_contains(&net, &a));
	/* a longer prefix is not contained by a shorter query */
	ck_assert_int_eq(cidr_parse("10.0.0.0/8", &a, NULL, NULL), 0);
	ck_assert_int_eq(cidr_parse("10.0.0.0/16", &net, NULL, NULL), 0);
	ck_assert(!cidr_contains(&net, &a));
}
END_TEST

START_TEST(test_equal)
{
	struct cidr a, b;

	ck_assert_int_eq(cidr_parse("10.1.2.3/8", &a, NULL, NULL), 0);
	ck_assert_int_eq(cidr_parse("10.0.0.0/8", &b, NULL, NULL), 0);
	ck_assert(cidr_equal(&a, &b));
	ck_assert_int_eq(cidr_parse("10.0.0.0/9", &b, NULL, NULL), 0);
	ck_assert(!cidr_equal(&a, &b));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cidr");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_good, 0, sizeof(good) / sizeof(good[0]));
	tcase_add_loop_test(tc, test_bad, 0, sizeof(bad) / sizeof(bad[0]));
	tcase_add_test(tc, test_null);
	tcase_add_test(tc, test_addr_only);
	tcase_add_test(tc, test_contains);
	tcase_add_test(tc, test_equal);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
