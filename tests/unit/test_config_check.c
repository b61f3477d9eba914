/* SPDX-License-Identifier: BSD-2-Clause */
/* test_config_check.c - the checks of a project's values without
 * libconfig (config_check.h), as the file loader and the PostgreSQL
 * loader use them: domains, endpoints, path prefixes, ids, names, IP
 * rules, balancing modes, security header values, durations, and a
 * health_check given as a JSON object (deployments.health_check). */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/un.h>
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

/* upstream endpoints: a scheme before the address, or a Unix socket */
static const struct addr_case endpoints[] = {
    {"10.0.0.1:80", "10.0.0.1:80", NULL},
    {"http://10.0.0.1:80", "10.0.0.1:80", NULL},
    {"HTTP://10.0.0.1:80", "10.0.0.1:80", NULL},
    {"https://10.0.0.1:443", "https://10.0.0.1:443", NULL},
    {"h2c://[::1]:8080", "h2c://[::1]:8080", NULL},
    {"https://[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:65535",
     "https://[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535", NULL},
    {"unix:/run/app.sock", "unix:/run/app.sock", NULL},
    {"unix:/a/b-c_d.e/@f:g,h=i", "unix:/a/b-c_d.e/@f:g,h=i", NULL},
    {"unix:run/app.sock", NULL, "absolute path"},
    {"unix:", NULL, "absolute path"},
    {"unix:/a b", NULL, "without spaces"},
    {"unix:/a\"b", NULL, "quotes"},
    {"unix:/a\\b", NULL, "backslashes"},
    {"unix:/a\tb", NULL, "printable"},
    {"unix:/\xc3\xa9", NULL, "printable"},
    {"ftp://10.0.0.1:21", NULL, "unknown scheme"},
    {"https://10.0.0.1:443/", NULL, "no path"},
    {"http://user@10.0.0.1:80", NULL, "no path or user"},
    {"https://example.com:443", NULL, "not resolved"},
    {"https://10.0.0.1", NULL, "expected ADDR:PORT"},
    {"http://", NULL, "empty address"},
};

START_TEST(test_endpoint)
{
	const struct addr_case *t = &endpoints[_i];
	struct errbuf err = {""};
	struct config_addr a;
	int rc;

	rc = config_endpoint_parse(t->in, CONFIG_SCHEMES_ALL, &a, &err);
	if (t->text) {
		ck_assert_msg(rc == 0, "%s: %s", t->in, err.msg);
		ck_assert_str_eq(a.text, t->text);
	} else {
		ck_assert_int_eq(rc, -EINVAL);
		ck_assert_msg(strstr(err.msg, t->msg), "%s: '%s' lacks '%s'",
			      t->in, err.msg, t->msg);
	}
}
END_TEST

/* The scheme, the family and the socket address each form gives; a
 * scheme outside the mask is refused by name; the longest Unix path. */
START_TEST(test_endpoint_scheme)
{
	struct errbuf err = {""};
	struct config_addr a;
	char path[200];
	const struct sockaddr_un *un = (const void *)&a.ss;

	ck_assert_int_eq(config_endpoint_parse("https://10.0.0.1:443",
					       CONFIG_SCHEMES_ALL, &a, &err),
			 0);
	ck_assert_int_eq(a.scheme, CONFIG_SCHEME_HTTPS);
	ck_assert_int_eq(a.ss.ss_family, AF_INET);
	ck_assert_int_eq(config_endpoint_parse("10.0.0.1:80", 0x1, &a, &err),
			 0);
	ck_assert_int_eq(a.scheme, CONFIG_SCHEME_HTTP);
	ck_assert_int_eq(config_endpoint_parse("unix:/run/x.sock",
					       CONFIG_SCHEMES_ALL, &a, &err),
			 0);
	ck_assert_int_eq(a.scheme, CONFIG_SCHEME_UNIX);
	ck_assert_int_eq(a.ss.ss_family, AF_UNIX);
	ck_assert_str_eq(un->sun_path, "/run/x.sock");
	ck_assert_uint_eq(a.len, offsetof(struct sockaddr_un, sun_path) +
				     sizeof("/run/x.sock"));
	ck_assert_int_eq(config_endpoint_parse("h2c://10.0.0.1:80",
					       1u << CONFIG_SCHEME_HTTP, &a,
					       &err),
			 -EINVAL);
	ck_assert_msg(strstr(err.msg, "h2c:// endpoints are not supported"),
		      "%s", err.msg);
	ck_assert_int_eq(config_endpoint_parse(
			     "unix:/x", 1u << CONFIG_SCHEME_HTTP, &a, &err),
			 -EINVAL);
	ck_assert_msg(strstr(err.msg, "unix: endpoints are not supported"),
		      "%s", err.msg);
	/* sun_path holds 107 bytes and its NUL */
	memset(path, 'p', sizeof(path));
	path[0] = '/';
	path[107] = '\0';
	ck_assert_int_eq(
	    config_endpoint_parse(NULL, CONFIG_SCHEMES_ALL, &a, &err), -EINVAL);
	{
		char in[220];

		snprintf(in, sizeof(in), "unix:%s", path);
		ck_assert_int_eq(
		    config_endpoint_parse(in, CONFIG_SCHEMES_ALL, &a, &err), 0);
		ck_assert_uint_eq(strlen(a.text), 5 + 107);
		path[107] = 'p';
		path[108] = '\0';
		snprintf(in, sizeof(in), "unix:%s", path);
		ck_assert_int_eq(
		    config_endpoint_parse(in, CONFIG_SCHEMES_ALL, &a, &err),
		    -EINVAL);
		ck_assert_msg(strstr(err.msg, "at most 107 bytes"), "%s",
			      err.msg);
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

/* ---- health_check as a JSON object (deployments.health_check) ---------- */

struct hc_bad {
	const char *json;
	const char *msg; /* the whole message */
};

/* Every shape the database's column may hold that is not a check. */
static const struct hc_bad hc_bads[] = {
    {"[1, 2]", "expected a JSON object, found an array"},
    {"\"http\"", "expected a JSON object, found a string"},
    {"42", "expected a JSON object, found an integer"},
    {"4.5", "expected a JSON object, found a float"},
    {"null", "expected a JSON object, found null"},
    {"true", "expected a JSON object, found a boolean"},
    {"{}", "type: missing (required)"},
    {"{\"path\": \"/h\"}", "type: missing (required)"},
    {"{\"type\": \"http\", \"bogus\": 1}", "bogus: unknown key"},
    {"{\"Type\": \"http\"}", "Type: unknown key"},
    {"{\"type\": \"udp\"}", "type: must be \"http\" or \"tcp\""},
    {"{\"type\": \"HTTP\"}", "type: must be \"http\" or \"tcp\""},
    {"{\"type\": 1}", "type: expected a string, found an integer"},
    {"{\"type\": null}", "type: expected a string, found null"},
    {"{\"type\": [\"http\"]}", "type: expected a string, found an array"},
    {"{\"type\": \"http\", \"path\": \"h\"}",
     "path: must start with \"/\" and be shorter than 256 bytes"},
    {"{\"type\": \"http\", \"path\": \"\"}",
     "path: must start with \"/\" and be shorter than 256 bytes"},
    {"{\"type\": \"http\", \"path\": \"/a b\"}",
     "path: no spaces or control characters"},
    {"{\"type\": \"http\", \"path\": \"/a\\tb\"}",
     "path: no spaces or control characters"},
    {"{\"type\": \"http\", \"path\": \"/a\\u007fb\"}",
     "path: no spaces or control characters"},
    {"{\"type\": \"http\", \"path\": {}}",
     "path: expected a string, found an object"},
    {"{\"type\": \"tcp\", \"path\": \"/h\"}", "path: only for type \"http\""},
    {"{\"type\": \"http\", \"interval\": \"5x\"}", NULL},
    {"{\"type\": \"http\", \"interval\": \"10\"}", NULL},
    {"{\"type\": \"http\", \"interval\": 2}",
     "interval: expected a duration string such as \"10s\", found an "
     "integer"},
    {"{\"type\": \"http\", \"interval\": true}",
     "interval: expected a duration string such as \"10s\", found a "
     "boolean"},
    {"{\"type\": \"http\", \"interval\": \"99ms\"}",
     "interval: \"99ms\" is out of range 100ms..3600000ms"},
    {"{\"type\": \"http\", \"interval\": \"1h1ms\"}",
     "interval: \"1h1ms\" is out of range 100ms..3600000ms"},
    {"{\"type\": \"http\", \"timeout\": \"9ms\"}",
     "timeout: \"9ms\" is out of range 10ms..60000ms"},
    {"{\"type\": \"http\", \"interval\": \"1h\", \"timeout\": \"61s\"}",
     "timeout: \"61s\" is out of range 10ms..60000ms"},
    {"{\"type\": \"http\", \"interval\": \"1s\", \"timeout\": \"2s\"}",
     "timeout (2000 ms) is longer than interval (1000 ms)"},
    {"{\"type\": \"http\", \"expect_status\": 99}",
     "expect_status: 99 is out of range 100..599"},
    {"{\"type\": \"http\", \"expect_status\": 600}",
     "expect_status: 600 is out of range 100..599"},
    {"{\"type\": \"http\", \"expect_status\": \"200\"}",
     "expect_status: expected an integer, found a string"},
    {"{\"type\": \"http\", \"expect_status\": 200.0}",
     "expect_status: expected an integer, found a float"},
    {"{\"type\": \"http\", \"rise\": 0}", "rise: 0 is out of range 1..100"},
    {"{\"type\": \"http\", \"rise\": 101}", "rise: 101 is out of range 1..100"},
    {"{\"type\": \"http\", \"rise\": -1}", "rise: -1 is out of range 1..100"},
    {"{\"type\": \"http\", \"fall\": -9223372036854775808}",
     "fall: -9223372036854775808 is out of range 1..100"},
    {"{\"type\": \"http\", \"fall\": 9223372036854775807}",
     "fall: 9223372036854775807 is out of range 1..100"},
    {"{\"type\": \"http\", \"fall\": false}",
     "fall: expected an integer, found a boolean"},
};

/* A refused value: -EINVAL, its message, and no part of a check left. */
START_TEST(test_hc_json_bad)
{
	const struct hc_bad *c = &hc_bads[_i];
	struct config_health_check hc;
	struct errbuf err = {""};
	json_error_t je;
	json_t *o = json_loads(c->json, JSON_DECODE_ANY, &je);

	ck_assert_msg(o != NULL, "%s: %s", c->json, je.text);
	memset(&hc, 0xa5, sizeof(hc));
	ck_assert_int_eq(config_health_check_json(o, &hc, &err), -EINVAL);
	if (c->msg)
		ck_assert_str_eq(err.msg, c->msg);
	else /* the duration grammar's own words, after the key */
		ck_assert_msg(strncmp(err.msg, "interval: ", 10) == 0 &&
				  strlen(err.msg) > 10,
			      "%s: %s", c->json, err.msg);
	ck_assert_int_eq(hc.type, CONFIG_HC_NONE);
	ck_assert_str_eq(hc.path, "");
	ck_assert_uint_eq(hc.interval_ms + hc.timeout_ms + hc.rise + hc.fall +
			      hc.expect_status,
			  0);
	/* without an errbuf (the local snapshot's read): refused the same,
	 * no crash */
	memset(&hc, 0xa5, sizeof(hc));
	ck_assert_int_eq(config_health_check_json(o, &hc, NULL), -EINVAL);
	ck_assert_int_eq(hc.type, CONFIG_HC_NONE);
	json_decref(o);
}
END_TEST

/* No object at all, and a path one byte too long. */
START_TEST(test_hc_json_edges)
{
	struct config_health_check hc;
	struct errbuf err = {""};
	char path[CONFIG_HC_PATH_MAX + 1];
	json_t *o;

	ck_assert_int_eq(config_health_check_json(NULL, &hc, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "expected a JSON object, found nothing");
	memset(path, 'a', sizeof(path));
	path[0] = '/';
	path[CONFIG_HC_PATH_MAX - 1] = '\0'; /* 255 bytes: the longest */
	o = json_pack("{s:s, s:s}", "type", "http", "path", path);
	ck_assert_int_eq(config_health_check_json(o, &hc, &err), 0);
	ck_assert_uint_eq(strlen(hc.path), CONFIG_HC_PATH_MAX - 1);
	json_decref(o);
	path[CONFIG_HC_PATH_MAX - 1] = 'a';
	path[CONFIG_HC_PATH_MAX] = '\0'; /* 256 */
	o = json_pack("{s:s, s:s}", "type", "http", "path", path);
	ck_assert_int_eq(config_health_check_json(o, &hc, &err), -EINVAL);
	ck_assert_str_eq(
	    err.msg,
	    "path: must start with \"/\" and be shorter than 256 bytes");
	json_decref(o);
	/* a NUL inside a string (jansson keeps it when told to) */
	o = json_loads("{\"type\": \"http\", \"path\": \"/a\\u0000b\"}",
		       JSON_ALLOW_NUL, NULL);
	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(config_health_check_json(o, &hc, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "path: a NUL byte in the string");
	json_decref(o);
}
END_TEST

/* The defaults, every key set, and the object written back reading as
 * the same check. */
START_TEST(test_hc_json_good)
{
	struct config_health_check hc, back;
	struct errbuf err = {""};
	json_t *o, *w;

	o = json_loads("{\"type\": \"tcp\"}", 0, NULL);
	ck_assert_int_eq(config_health_check_json(o, &hc, &err), 0);
	ck_assert_int_eq(hc.type, CONFIG_HC_TCP);
	ck_assert_str_eq(hc.path, "/");
	ck_assert_uint_eq(hc.interval_ms, 2000);
	ck_assert_uint_eq(hc.timeout_ms, 1000);
	ck_assert_uint_eq(hc.expect_status, 200);
	ck_assert_uint_eq(hc.rise, 2);
	ck_assert_uint_eq(hc.fall, 3);
	json_decref(o);
	o = json_loads("{\"type\": \"http\", \"path\": \"/healthz?x=1\", "
		       "\"interval\": \"1m30s\", \"timeout\": \"250ms\", "
		       "\"expect_status\": 204, \"rise\": 100, \"fall\": 1}",
		       0, NULL);
	ck_assert_int_eq(config_health_check_json(o, &hc, &err), 0);
	ck_assert_int_eq(hc.type, CONFIG_HC_HTTP);
	ck_assert_str_eq(hc.path, "/healthz?x=1");
	ck_assert_uint_eq(hc.interval_ms, 90000);
	ck_assert_uint_eq(hc.timeout_ms, 250);
	ck_assert_uint_eq(hc.expect_status, 204);
	ck_assert_uint_eq(hc.rise, 100);
	ck_assert_uint_eq(hc.fall, 1);
	w = config_health_check_to_json(&hc);
	ck_assert_ptr_nonnull(w);
	ck_assert_int_eq(config_health_check_json(w, &back, &err), 0);
	ck_assert_mem_eq(&hc, &back, sizeof(hc));
	json_decref(w);
	json_decref(o);
	/* the interval equal to the timeout is allowed */
	o = json_loads("{\"type\": \"http\", \"interval\": \"1s\", "
		       "\"timeout\": \"1s\"}",
		       0, NULL);
	ck_assert_int_eq(config_health_check_json(o, &hc, &err), 0);
	json_decref(o);
}
END_TEST

/* deployments.tls: each bad shape refused with its reason, the group
 * left refused-free and empty (the caller marks it refused). */
static const struct {
	const char *json, *msg;
} tls_bads[] = {
    {"[]", "expected a JSON object, found an array"},
    {"{\"sni\": \"a.test\"}", "sni: unknown key"},
    {"{\"verify\": \"no\"}", "verify: expected a boolean, found a string"},
    {"{\"verify\": 0}", "verify: expected a boolean, found an integer"},
    {"{\"server_name\": true}",
     "server_name: expected a string, found a boolean"},
    {"{\"server_name\": \"*.up.test\"}", NULL},
    {"{\"server_name\": \"UP test\"}", NULL},
    {"{\"ca\": \"ca.pem\"}", "ca: an absolute path of at most 255 bytes"},
    {"{\"ca\": 1}", "ca: expected a string, found an integer"},
    {"{\"ca\": \"/a\\nb\"}", "ca: a control character in the path"},
    {"{\"cert\": \"/c.pem\"}",
     "cert and key go together (a client certificate and its key), or "
     "neither"},
    {"{\"key\": \"/k.pem\", \"verify\": true}",
     "cert and key go together (a client certificate and its key), or "
     "neither"},
};

START_TEST(test_up_tls_json_bad)
{
	struct config_up_tls t, zero;
	struct errbuf err = {""};
	json_t *o = json_loads(tls_bads[_i].json, JSON_DECODE_ANY, NULL);

	ck_assert_ptr_nonnull(o);
	memset(&zero, 0, sizeof(zero));
	memset(&t, 0xa5, sizeof(t));
	ck_assert_int_eq(config_up_tls_json(o, &t, &err), -EINVAL);
	if (tls_bads[_i].msg)
		ck_assert_str_eq(err.msg, tls_bads[_i].msg);
	else
		ck_assert_msg(strncmp(err.msg,
				      "server_name: a host name or a numeric "
				      "address: ",
				      39) == 0,
			      "%s", err.msg);
	ck_assert_mem_eq(&t, &zero, sizeof(t));
	ck_assert_int_eq(config_up_tls_json(o, &t, NULL), -EINVAL);
	json_decref(o);
}
END_TEST

/* Good groups, and each written back reads the same. */
START_TEST(test_up_tls_json_good)
{
	struct config_up_tls t, back;
	struct errbuf err = {""};
	json_t *o, *w;

	o = json_loads("{\"verify\": false, \"server_name\": \"api.internal\", "
		       "\"ca\": \"/etc/ca.pem\", \"cert\": \"/c.pem\", "
		       "\"key\": \"/k.pem\"}",
		       0, NULL);
	ck_assert_int_eq(config_up_tls_json(o, &t, &err), 0);
	ck_assert(t.no_verify);
	ck_assert(!t.refused);
	ck_assert_str_eq(t.server_name, "api.internal");
	ck_assert_str_eq(t.ca, "/etc/ca.pem");
	ck_assert_str_eq(t.cert, "/c.pem");
	ck_assert_str_eq(t.key, "/k.pem");
	w = config_up_tls_to_json(&t);
	ck_assert_ptr_nonnull(w);
	ck_assert_int_eq(config_up_tls_json(w, &back, &err), 0);
	ck_assert_mem_eq(&t, &back, sizeof(t));
	json_decref(w);
	json_decref(o);
	/* an address as the name; verify true said; empty: the defaults */
	o = json_loads("{\"server_name\": \"10.0.0.1\", \"verify\": true}", 0,
		       NULL);
	ck_assert_int_eq(config_up_tls_json(o, &t, &err), 0);
	ck_assert(!t.no_verify);
	ck_assert_str_eq(t.server_name, "10.0.0.1");
	json_decref(o);
	o = json_object();
	ck_assert_int_eq(config_up_tls_json(o, &t, &err), 0);
	ck_assert(!t.no_verify && !t.ca[0] && !t.server_name[0]);
	w = config_up_tls_to_json(&t);
	ck_assert_uint_eq(json_object_size(w), 0);
	json_decref(w);
	json_decref(o);
}
END_TEST

/* Refused retry and circuit groups: their messages, nothing set. */
static const struct rc_bad {
	bool circuit;
	const char *json, *msg;
} rc_bads[] = {
    {false, "[]", "expected a JSON object, found an array"},
    {false, "{\"tries\": 2}", "tries: unknown key"},
    {false, "{\"on\": \"502\"}", "on: expected a list [ ... ], found a string"},
    {false, "{\"on\": [\"502\", \"500\"]}",
     "on[1]: \"500\": expected connect, reset, 502, 503 or 504"},
    {false, "{\"on\": [\"502\", 503]}", "on[1]: expected a string"},
    {false,
     "{\"on\": [\"502\", \"502\", \"502\", \"502\", \"502\", \"502\", "
     "\"502\", \"502\", \"502\", \"502\", \"502\", \"502\", \"502\", "
     "\"502\", \"502\", \"502\", \"502\"]}",
     "on: more than 16 items"},
    {false, "{\"max\": 4}", "max: 4 is out of range 0..3"},
    {false, "{\"max\": -1}", "max: -1 is out of range 0..3"},
    {false, "{\"max\": \"2\"}", "max: expected an integer, found a string"},
    {false, "{\"budget\": \"120%\"}",
     "budget: \"120%\": expected a percentage 0%..100%"},
    {false, "{\"budget\": 20}", "budget: expected a string, found an integer"},
    {false, "{\"backoff\": \"11s\"}",
     "backoff: \"11s\" is out of range 1ms..10000ms"},
    {true, "1", "expected a JSON object, found an integer"},
    {true, "{\"threshold\": \"50%\"}", "threshold: unknown key"},
    {true, "{\"errors\": \"0%\"}",
     "errors: \"0%\": 0% would open the circuit on any request: expected "
     "1%..100%"},
    {true, "{\"errors\": 50}", "errors: expected a string, found an integer"},
    {true, "{\"window\": \"100ms\"}",
     "window: \"100ms\" is out of range 1000ms..3600000ms"},
    {true, "{\"min_requests\": 0}",
     "min_requests: 0 is out of range 1..1000000"},
    {true, "{\"open_for\": \"2h\"}",
     "open_for: \"2h\" is out of range 100ms..3600000ms"},
};

START_TEST(test_rc_json_bad)
{
	const struct rc_bad *c = &rc_bads[_i];
	struct config_retry rt, rz;
	struct config_circuit cc, cz;
	struct errbuf err = {""};
	json_t *o = json_loads(c->json, JSON_DECODE_ANY, NULL);

	ck_assert_msg(o != NULL, "%s", c->json);
	memset(&rz, 0, sizeof(rz));
	memset(&cz, 0, sizeof(cz));
	memset(&rt, 0xa5, sizeof(rt));
	memset(&cc, 0xa5, sizeof(cc));
	if (c->circuit) {
		ck_assert_int_eq(config_circuit_json(o, &cc, &err), -EINVAL);
		ck_assert_mem_eq(&cc, &cz, sizeof(cc));
		ck_assert_int_eq(config_circuit_json(o, &cc, NULL), -EINVAL);
	} else {
		ck_assert_int_eq(config_retry_json(o, &rt, &err), -EINVAL);
		ck_assert_mem_eq(&rt, &rz, sizeof(rt));
		ck_assert_int_eq(config_retry_json(o, &rt, NULL), -EINVAL);
	}
	ck_assert_str_eq(err.msg, c->msg);
	json_decref(o);
}
END_TEST

/* Good groups, the defaults, and each written back reads the same. */
START_TEST(test_rc_json_good)
{
	struct config_retry rt, rback;
	struct config_circuit cc, cback;
	struct errbuf err = {""};
	json_t *o, *w;

	o = json_object();
	ck_assert_int_eq(config_retry_json(o, &rt, &err), 0);
	ck_assert(rt.set);
	ck_assert_uint_eq(rt.on, 0x1f);
	ck_assert_uint_eq(rt.max, 2);
	ck_assert_uint_eq(rt.budget, 20);
	ck_assert_uint_eq(rt.backoff_ms, 25);
	ck_assert_int_eq(config_circuit_json(o, &cc, &err), 0);
	ck_assert(cc.set);
	ck_assert_uint_eq(cc.errors, 50);
	ck_assert_uint_eq(cc.window_ms, 10000);
	ck_assert_uint_eq(cc.min_requests, 20);
	ck_assert_uint_eq(cc.open_for_ms, 5000);
	json_decref(o);
	o = json_loads("{\"on\": [\"connect\", \"503\"], \"max\": 0, "
		       "\"budget\": \"0%\", \"backoff\": \"1s500ms\"}",
		       0, NULL);
	ck_assert_int_eq(config_retry_json(o, &rt, &err), 0);
	ck_assert_uint_eq(rt.on, CONFIG_RETRY_ON_CONNECT | CONFIG_RETRY_ON_503);
	ck_assert_uint_eq(rt.max, 0);
	ck_assert_uint_eq(rt.budget, 0);
	ck_assert_uint_eq(rt.backoff_ms, 1500);
	w = config_retry_to_json(&rt);
	ck_assert_int_eq(config_retry_json(w, &rback, &err), 0);
	ck_assert_mem_eq(&rt, &rback, sizeof(rt));
	json_decref(w);
	json_decref(o);
	o = json_loads("{\"errors\": \"100%\", \"window\": \"1h\", "
		       "\"min_requests\": 1000000, \"open_for\": \"100ms\"}",
		       0, NULL);
	ck_assert_int_eq(config_circuit_json(o, &cc, &err), 0);
	ck_assert_uint_eq(cc.errors, 100);
	ck_assert_uint_eq(cc.window_ms, 3600000);
	ck_assert_uint_eq(cc.min_requests, 1000000);
	ck_assert_uint_eq(cc.open_for_ms, 100);
	w = config_circuit_to_json(&cc);
	ck_assert_int_eq(config_circuit_json(w, &cback, &err), 0);
	ck_assert_mem_eq(&cc, &cback, sizeof(cc));
	json_decref(w);
	json_decref(o);
}
END_TEST

/* deployments.hedge (config_hedge_json): the file's checks, refusals
 * named by key, the group zeroed; the defaults; each written back reads
 * the same. */
static const struct {
	const char *json, *msg;
} hedge_bads[] = {
    {"[]", "expected a JSON object, found an array"},
    {"{\"delay\": \"50ms\"}", "delay: unknown key"},
    {"{\"after\": \"p10\"}",
     "after: \"p10\": expected a percentile p50..p99 or a duration"},
    {"{\"after\": \"2m\"}", "after: \"2m\" is out of range 1ms..60000ms"},
    {"{\"after\": 50}", "after: expected a string, found an integer"},
    {"{\"max\": 0}", "max: 0 is out of range 1..3"},
    {"{\"max\": 4}", "max: 4 is out of range 1..3"},
    {"{\"max\": \"1\"}", "max: expected an integer, found a string"},
};

START_TEST(test_hedge_json_bad)
{
	struct config_hedge h, hz;
	struct errbuf err = {""};
	json_t *o = json_loads(hedge_bads[_i].json, JSON_DECODE_ANY, NULL);

	ck_assert_msg(o != NULL, "%s", hedge_bads[_i].json);
	memset(&hz, 0, sizeof(hz));
	memset(&h, 0xa5, sizeof(h));
	ck_assert_int_eq(config_hedge_json(o, &h, &err), -EINVAL);
	ck_assert_mem_eq(&h, &hz, sizeof(h));
	ck_assert_int_eq(config_hedge_json(o, &h, NULL), -EINVAL);
	ck_assert_str_eq(err.msg, hedge_bads[_i].msg);
	json_decref(o);
}
END_TEST

START_TEST(test_hedge_json_good)
{
	static const char *const goods[] = {"{}", "{\"after\": \"50ms\"}",
					    "{\"after\": \"p99\", \"max\": 3}",
					    "{\"after\": \"1m\", \"max\": 1}"};
	struct config_hedge h, back;
	struct errbuf err = {""};
	json_t *o, *w;
	size_t i;

	o = json_object();
	ck_assert_int_eq(config_hedge_json(o, &h, &err), 0);
	ck_assert(h.set);
	ck_assert_uint_eq(h.pct, 95);
	ck_assert_uint_eq(h.max, 1);
	json_decref(o);
	for (i = 0; i < CK_NELEM(goods); i++) {
		o = json_loads(goods[i], 0, NULL);
		ck_assert_int_eq(config_hedge_json(o, &h, &err), 0);
		w = config_hedge_to_json(&h);
		ck_assert_ptr_nonnull(w);
		ck_assert_int_eq(config_hedge_json(w, &back, &err), 0);
		ck_assert_mem_eq(&h, &back, sizeof(h));
		json_decref(w);
		json_decref(o);
	}
	o = json_loads("{\"after\": \"50ms\", \"max\": 2}", 0, NULL);
	ck_assert_int_eq(config_hedge_json(o, &h, &err), 0);
	ck_assert_uint_eq(h.pct, 0);
	ck_assert_uint_eq(h.after_ms, 50);
	ck_assert_uint_eq(h.max, 2);
	json_decref(o);
}
END_TEST

static Suite *config_check_suite(void)
{
	Suite *s = suite_create("config_check");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_domain, 0, CK_NELEM(doms));
	tcase_add_test(tc, test_domain_lengths);
	tcase_add_loop_test(tc, test_addr, 0, CK_NELEM(addrs));
	tcase_add_loop_test(tc, test_endpoint, 0, CK_NELEM(endpoints));
	tcase_add_test(tc, test_endpoint_scheme);
	tcase_add_loop_test(tc, test_prefix, 0, CK_NELEM(prefixes));
	tcase_add_test(tc, test_prefix_length);
	tcase_add_test(tc, test_ids_names);
	tcase_add_test(tc, test_ip_rules);
	tcase_add_test(tc, test_choices);
	tcase_add_test(tc, test_duration);
	tcase_add_loop_test(tc, test_hc_json_bad, 0, CK_NELEM(hc_bads));
	tcase_add_test(tc, test_hc_json_edges);
	tcase_add_test(tc, test_hc_json_good);
	tcase_add_loop_test(tc, test_up_tls_json_bad, 0, CK_NELEM(tls_bads));
	tcase_add_test(tc, test_up_tls_json_good);
	tcase_add_loop_test(tc, test_rc_json_bad, 0, CK_NELEM(rc_bads));
	tcase_add_test(tc, test_rc_json_good);
	tcase_add_loop_test(tc, test_hedge_json_bad, 0, CK_NELEM(hedge_bads));
	tcase_add_test(tc, test_hedge_json_good);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(config_check_suite());
}
