/* SPDX-License-Identifier: BSD-2-Clause */
/* test_proxyproto.c - the PROXY protocol (userspace/proxyproto.c): v1 and
 * v2 headers read, every prefix of a good one waiting for more, each
 * refusal by its reason, TLVs skipped, LOCAL/UNKNOWN keeping the peer,
 * and what pp_write writes read back the same. */
#include <arpa/inet.h>
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "proxyproto.h"
#include "unit.h"

/* src's address and port as "ADDR PORT". */
static void str_of(const struct sockaddr_storage *ss, char *buf, size_t cap)
{
	char a[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)ss;

		inet_ntop(AF_INET, &s->sin_addr, a, sizeof(a));
		snprintf(buf, cap, "%s %u", a, ntohs(s->sin_port));
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)ss;

		inet_ntop(AF_INET6, &s->sin6_addr, a, sizeof(a));
		snprintf(buf, cap, "%s %u", a, ntohs(s->sin6_port));
	} else {
		snprintf(buf, cap, "-");
	}
}

/* v1 lines: the result (length, or a reason), and the client as
 * "ADDR PORT" ("-" when local). */
static const struct {
	const char *in;
	int want; /* > 0: the header's length */
	const char *src;
} v1s[] = {
    {"PROXY TCP4 192.0.2.1 198.51.100.2 51000 443\r\nGET", 45,
     "192.0.2.1 51000"},
    {"PROXY TCP6 2001:db8::1 2001:db8::2 1 65535\r\n", 44, "2001:db8::1 1"},
    {"PROXY TCP6 ::ffff:192.0.2.7 ::1 0 80\r\n", 38, "192.0.2.7 0"},
    {"PROXY UNKNOWN\r\n", 15, "-"},
    {"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n", 35, "-"},
    {"PROXY TCP4 192.0.2.1 198.51.100.2 51000\r\n", PP_BAD_V1, NULL},
    {"PROXY TCP4 192.0.2.1 198.51.100.2 51000 443 9\r\n", PP_BAD_V1, NULL},
    {"PROXY TCP4  192.0.2.1 198.51.100.2 1 2\r\n", PP_BAD_V1, NULL},
    {"PROXY TCP4 192.0.2.1 198.51.100.2 1 2 \r\n", PP_BAD_V1, NULL},
    {"PROXY TCP4 2001:db8::1 198.51.100.2 1 2\r\n", PP_BAD_V1, NULL},
    {"PROXY TCP6 192.0.2.1 2001:db8::2 1 2\r\n", PP_BAD_V1, NULL},
    {"PROXY TCP4 192.0.2.01 198.51.100.2 1 2\r\n", PP_BAD_V1, NULL},
    {"PROXY TCP4 192.0.2.1 198.51.100.2 01 2\r\n", PP_BAD_V1, NULL},
    {"PROXY TCP4 192.0.2.1 198.51.100.2 65536 2\r\n", PP_BAD_V1, NULL},
    {"PROXY TCP4 192.0.2.1 198.51.100.2 -1 2\r\n", PP_BAD_V1, NULL},
    {"PROXY TCP5 192.0.2.1 198.51.100.2 1 2\r\n", PP_BAD_V1, NULL},
    {"PROXY UDP4 192.0.2.1 198.51.100.2 1 2\r\n", PP_BAD_V1, NULL},
    {"PROXY UNKNOWNX\r\n", PP_BAD_V1, NULL},
    {"PROXY TCP4 192.0.2.1 198.51.100.2 1 2\n", PP_BAD_V1, NULL},
    {"PROXY TCP4 192.0.2.1 198.51.100.2 1 2\rX", PP_BAD_V1, NULL},
    {"PROXY TCP4 192.0.2.1\t198.51.100.2 1 2\r\n", PP_BAD_V1, NULL},
    {"PROXY \r\n", PP_BAD_V1, NULL},
    {"proxy TCP4 192.0.2.1 198.51.100.2 1 2\r\n", PP_NOT_PROXY, NULL},
    {"GET / HTTP/1.1\r\n", PP_NOT_PROXY, NULL},
    {"PROXYTCP4\r\n", PP_NOT_PROXY, NULL},
    {"\x16\x03\x01\x02\x00", PP_NOT_PROXY, NULL},
};

START_TEST(test_v1)
{
	struct pp_info pi;
	char got[128];
	int r;

	r = pp_parse((const uint8_t *)v1s[_i].in, strlen(v1s[_i].in), &pi);
	ck_assert_msg(r == v1s[_i].want, "%s: %d (%s), not %d", v1s[_i].in, r,
		      pp_reason(r), v1s[_i].want);
	if (r <= 0)
		return;
	ck_assert_uint_eq(pi.version, 1);
	ck_assert(!pi.local);
	if (pi.unknown)
		snprintf(got, sizeof(got), "-");
	else
		str_of(&pi.src, got, sizeof(got));
	ck_assert_str_eq(got, v1s[_i].src);
}
END_TEST

/* Every proper prefix of a good header waits; the longest line is 107
 * bytes, one more is too long. */
START_TEST(test_v1_prefixes_and_bounds)
{
	/* the specification's worst case */
	const char *h =
	    "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
	    "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
	char long_line[200];
	struct pp_info pi;
	size_t i, n = strlen(h);

	ck_assert_uint_eq(n, PP_V1_MAX);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(pp_parse((const uint8_t *)h, i, &pi),
				 PP_NEED_MORE);
	ck_assert_int_eq(pp_parse((const uint8_t *)h, n, &pi), (int)n);
	memset(long_line, 'a', sizeof(long_line));
	memcpy(long_line, "PROXY UNKNOWN ", 14);
	memcpy(long_line + 106, "\r\n", 2); /* 108 bytes */
	ck_assert_int_eq(pp_parse((const uint8_t *)long_line, 108, &pi),
			 PP_TOO_LONG);
	ck_assert_int_eq(pp_parse((const uint8_t *)long_line, 106, &pi),
			 PP_NEED_MORE);
	/* no CRLF in 107 bytes: too long, whatever comes after */
	ck_assert_int_eq(pp_parse((const uint8_t *)long_line, 107, &pi),
			 PP_TOO_LONG);
	memcpy(long_line + 105, "\r\n", 2); /* 107 bytes: the longest */
	ck_assert_int_eq(pp_parse((const uint8_t *)long_line, 107, &pi), 107);
	ck_assert(pi.unknown);
}
END_TEST

static const uint8_t sig[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
				0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};

/* A v2 header: ver_cmd, fam, the address block and TLV bytes. */
static size_t v2(uint8_t *b, uint8_t vc, uint8_t fam, const uint8_t *body,
		 size_t n)
{
	memcpy(b, sig, 12);
	b[12] = vc;
	b[13] = fam;
	b[14] = (uint8_t)(n >> 8);
	b[15] = (uint8_t)n;
	if (n)
		memcpy(b + 16, body, n);
	return 16 + n;
}

START_TEST(test_v2)
{
	uint8_t b[PP_V2_MAX + 64], body[PP_V2_MAX];
	struct pp_info pi;
	char got[128];
	size_t n, i;
	/* 192.0.2.1:51000 -> 198.51.100.2:443 */
	const uint8_t a4[12] = {192, 0, 2,    1,    198,  51,
				100, 2, 0xc7, 0x38, 0x01, 0xbb};

	/* TCP4 with two TLVs (ALPN "h2", an unknown type 0xE0 of 5 bytes) */
	memcpy(body, a4, 12);
	memcpy(body + 12,
	       "\x01\x00\x02"
	       "h2"
	       "\xe0\x00\x05"
	       "abcde",
	       13);
	n = v2(b, 0x21, 0x11, body, 25);
	ck_assert_int_eq(pp_parse(b, n, &pi), (int)n);
	ck_assert_uint_eq(pi.version, 2);
	ck_assert(!pi.local);
	str_of(&pi.src, got, sizeof(got));
	ck_assert_str_eq(got, "192.0.2.1 51000");
	str_of(&pi.dst, got, sizeof(got));
	ck_assert_str_eq(got, "198.51.100.2 443");
	/* every proper prefix waits */
	for (i = 0; i < n; i++)
		ck_assert_int_eq(pp_parse(b, i, &pi), PP_NEED_MORE);
	/* a TLV past the end, a TLV header cut short */
	body[14] = 3;
	n = v2(b, 0x21, 0x11, body, 25);
	ck_assert_int_eq(pp_parse(b, n, &pi), PP_BAD_TLV);
	body[14] = 2;
	n = v2(b, 0x21, 0x11, body, 26);
	ck_assert_int_eq(pp_parse(b, n, &pi), PP_BAD_TLV);
	/* TCP6 */
	memset(body, 0, 36);
	body[0] = 0x20, body[1] = 0x01, body[2] = 0x0d, body[3] = 0xb8;
	body[15] = 1;
	body[31] = 2;
	body[32] = 0x12, body[33] = 0x34, body[34] = 0, body[35] = 80;
	n = v2(b, 0x21, 0x21, body, 36);
	ck_assert_int_eq(pp_parse(b, n, &pi), 52);
	str_of(&pi.src, got, sizeof(got));
	ck_assert_str_eq(got, "2001:db8::1 4660");
	/* LOCAL (with an address block, ignored; any family byte): local;
	 * PROXY with UNSPEC, UNIX: unknown */
	n = v2(b, 0x20, 0x11, a4, 12);
	ck_assert_int_eq(pp_parse(b, n, &pi), (int)n);
	ck_assert(pi.local && !pi.unknown);
	n = v2(b, 0x20, 0x00, NULL, 0);
	ck_assert_int_eq(pp_parse(b, n, &pi), 16);
	ck_assert(pi.local);
	n = v2(b, 0x20, 0x77, NULL, 0);
	ck_assert_int_eq(pp_parse(b, n, &pi), 16);
	ck_assert(pi.local);
	n = v2(b, 0x21, 0x00, NULL, 0);
	ck_assert_int_eq(pp_parse(b, n, &pi), 16);
	ck_assert(pi.unknown && !pi.local);
	memset(body, 'x', 216);
	n = v2(b, 0x21, 0x31, body, 216);
	ck_assert_int_eq(pp_parse(b, n, &pi), (int)n);
	ck_assert(pi.unknown);
	/* an IPv4-mapped source given as IPv4 */
	memset(body, 0, 36);
	body[10] = body[11] = 0xff;
	body[12] = 192, body[13] = 0, body[14] = 2, body[15] = 44;
	body[27] = 1;
	body[32] = 0x12, body[33] = 0x34;
	n = v2(b, 0x21, 0x21, body, 36);
	ck_assert_int_eq(pp_parse(b, n, &pi), 52);
	str_of(&pi.src, got, sizeof(got));
	ck_assert_str_eq(got, "192.0.2.44 4660");
	ck_assert_uint_eq(pi.src_len, sizeof(struct sockaddr_in));
	/* refused: version 1 or 3, command 2, UDP, unknown family, short */
	n = v2(b, 0x11, 0x11, a4, 12);
	ck_assert_int_eq(pp_parse(b, n, &pi), PP_BAD_VERSION);
	n = v2(b, 0x31, 0x11, a4, 12);
	ck_assert_int_eq(pp_parse(b, n, &pi), PP_BAD_VERSION);
	n = v2(b, 0x22, 0x11, a4, 12);
	ck_assert_int_eq(pp_parse(b, 16, &pi), PP_BAD_VERSION);
	n = v2(b, 0x21, 0x12, a4, 12);
	ck_assert_int_eq(pp_parse(b, 16, &pi), PP_BAD_FAMILY);
	n = v2(b, 0x21, 0x13, a4, 12);
	ck_assert_int_eq(pp_parse(b, 16, &pi), PP_BAD_FAMILY);
	n = v2(b, 0x21, 0x41, a4, 12);
	ck_assert_int_eq(pp_parse(b, n, &pi), PP_BAD_FAMILY);
	n = v2(b, 0x21, 0x11, a4, 11);
	ck_assert_int_eq(pp_parse(b, 16, &pi), PP_BAD_LENGTH);
	n = v2(b, 0x21, 0x21, body, 35);
	ck_assert_int_eq(pp_parse(b, 16, &pi), PP_BAD_LENGTH);
	/* the longest taken; one byte more refused before it all comes */
	memset(body, 0, sizeof(body));
	memcpy(body, a4, 12);
	body[12] = 0xe1;
	body[13] = (uint8_t)((PP_V2_MAX - 16 - 15) >> 8);
	body[14] = (uint8_t)(PP_V2_MAX - 16 - 15);
	n = v2(b, 0x21, 0x11, body, PP_V2_MAX - 16);
	ck_assert_int_eq(pp_parse(b, n, &pi), PP_V2_MAX);
	n = v2(b, 0x21, 0x11, body, PP_V2_MAX - 15);
	ck_assert_int_eq(pp_parse(b, 16, &pi), PP_TOO_LONG);
	/* a signature gone wrong at any byte */
	for (i = 0; i < 12; i++) {
		n = v2(b, 0x21, 0x11, a4, 12);
		b[i] ^= 0x20;
		ck_assert_int_eq(pp_parse(b, n, &pi), PP_NOT_PROXY);
		ck_assert_int_eq(pp_parse(b, i + 1, &pi), PP_NOT_PROXY);
	}
	ck_assert_int_eq(pp_parse(b, 0, &pi), PP_NEED_MORE);
}
END_TEST

/* Written, then read back: the same addresses and ports. */
START_TEST(test_write_read)
{
	struct sockaddr_in s4 = {.sin_family = AF_INET,
				 .sin_port = htons(40000)};
	struct sockaddr_in d4 = {.sin_family = AF_INET, .sin_port = htons(80)};
	struct sockaddr_in6 d6 = {.sin6_family = AF_INET6,
				  .sin6_port = htons(8443)};
	struct sockaddr_un {
		sa_family_t f;
		char p[8];
	} un = {AF_UNIX, "/x"};
	uint8_t buf[PP_WRITE_MAX];
	struct pp_info pi;
	char got[128];
	unsigned v;
	size_t n;

	inet_pton(AF_INET, "203.0.113.9", &s4.sin_addr);
	inet_pton(AF_INET, "10.0.0.1", &d4.sin_addr);
	inet_pton(AF_INET6, "2001:db8::5", &d6.sin6_addr);
	for (v = 1; v <= 2; v++) {
		n = pp_write(v, (struct sockaddr *)&s4, (struct sockaddr *)&d4,
			     buf);
		ck_assert_uint_gt(n, 0);
		ck_assert_int_eq(pp_parse(buf, n, &pi), (int)n);
		ck_assert(!pi.local);
		str_of(&pi.src, got, sizeof(got));
		ck_assert_str_eq(got, "203.0.113.9 40000");
		str_of(&pi.dst, got, sizeof(got));
		ck_assert_str_eq(got, "10.0.0.1 80");
		/* mixed families: both as IPv6, the IPv4 one read back as it */
		n = pp_write(v, (struct sockaddr *)&s4, (struct sockaddr *)&d6,
			     buf);
		ck_assert_int_eq(pp_parse(buf, n, &pi), (int)n);
		str_of(&pi.src, got, sizeof(got));
		ck_assert_str_eq(got, "203.0.113.9 40000");
		str_of(&pi.dst, got, sizeof(got));
		ck_assert_str_eq(got, "2001:db8::5 8443");
		/* a Unix socket's peer: UNKNOWN / UNSPEC */
		n = pp_write(v, (struct sockaddr *)&un, (struct sockaddr *)&d4,
			     buf);
		ck_assert_int_eq(pp_parse(buf, n, &pi), (int)n);
		ck_assert(pi.unknown && !pi.local);
		n = pp_write(v, NULL, (struct sockaddr *)&d4, buf);
		ck_assert_int_eq(pp_parse(buf, n, &pi), (int)n);
		ck_assert(pi.unknown);
		/* edged's own connection (a health check): v2 LOCAL, v1
		 * UNKNOWN */
		n = pp_write_local(v, buf);
		ck_assert_int_eq(pp_parse(buf, n, &pi), (int)n);
		ck_assert(v == 2 ? pi.local && !pi.unknown
				 : pi.unknown && !pi.local);
	}
	ck_assert_uint_eq(pp_write_local(3, buf), 0);
	ck_assert_uint_eq(
	    pp_write(3, (struct sockaddr *)&s4, (struct sockaddr *)&d4, buf),
	    0);
	ck_assert_str_eq(pp_reason(PP_BAD_TLV), "v2: malformed TLV");
}
END_TEST

static Suite *proxyproto_suite(void)
{
	Suite *s = suite_create("proxyproto");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_v1, 0,
			    (int)(sizeof(v1s) / sizeof(v1s[0])));
	tcase_add_test(tc, test_v1_prefixes_and_bounds);
	tcase_add_test(tc, test_v2);
	tcase_add_test(tc, test_write_read);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(proxyproto_suite());
}
