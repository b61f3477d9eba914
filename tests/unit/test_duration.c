/* SPDX-License-Identifier: BSD-2-Clause */
/* test_duration.c - durations: the one grammar in whole seconds and in
 * milliseconds, limits, formatting; also the policy module's port lists
 * and rates, which follow the same rules. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"
#include "policy.h"
#include "unit.h"

struct dur_good {
	const char *in;
	uint64_t secs;
	const char *fmt;
};

static const struct dur_good dgood[] = {
    {"30s", 30, "30s"},	      {"10m", 600, "10m"},
    {"2h", 7200, "2h"},	      {"1d", 86400, "1d"},
    {"1h30m", 5400, "1h30m"}, {"90", 90, "1m30s"},
    {"1", 1, "1s"},	      {"1d2h3m4s", 93784, "1d2h3m4s"},
    {"598s", 598, "9m58s"},   {"365d", 365 * 86400ULL, "365d"},
    {"90m", 5400, "1h30m"},   {"31536000", 31536000, "365d"},
    {"05m", 300, "5m"},
};

struct dur_bad {
	const char *in;
	const char *msg;
};

static const struct dur_bad dbad[] = {
    {"", "empty"},
    {"0", "longer than zero"},
    {"0s", "longer than zero"},
    {"0h0m", "longer than zero"},
    {"-5m", "negative"},
    {"+5m", "expected a number"},
    {"abc", "expected a number"},
    {"10x", "unknown unit 'x'"},
    {"10M", "unknown unit 'M'"},
    {"1h30", "has no unit"},
    {"30m1h", "largest to smallest"},
    {"1h1h", "largest to smallest"},
    {"366d", "too long"},
    {"365d1s", "too long"},
    {"31536001", "too long"},
    {"99999999999999999999999", "too long"},
    {"18446744073709551617s", "too long"},
    {" 5m", "expected a number"},
    {"5m ", "expected a number"},
    {"5 m", "unknown unit ' '"},
    {"1.5h", "unknown unit '.'"},
    {"h", "expected a number"},
};

START_TEST(test_dur_good)
{
	const struct dur_good *t = &dgood[_i];
	struct errbuf err = {""};
	char buf[DURATION_STR_MAX];
	uint64_t s = 0;

	ck_assert_msg(duration_parse(t->in, &s, &err) == 0, "%s: %s", t->in,
		      err.msg);
	ck_assert_uint_eq(s, t->secs);
	ck_assert_str_eq(duration_format(s, buf, sizeof(buf)), t->fmt);
	/* what is formatted parses back to the same */
	ck_assert_int_eq(duration_parse(buf, &s, NULL), 0);
	ck_assert_uint_eq(s, t->secs);
}
END_TEST

START_TEST(test_dur_bad)
{
	const struct dur_bad *t = &dbad[_i];
	struct errbuf err = {""};
	uint64_t s = 12345;

	ck_assert_int_eq(duration_parse(t->in, &s, &err), -EINVAL);
	ck_assert_uint_eq(s, 12345);
	ck_assert_msg(strstr(err.msg, t->msg) != NULL,
		      "'%s': message '%s' lacks '%s'", t->in, err.msg, t->msg);
}
END_TEST

/* The same grammar in milliseconds (edged's timeouts): every unit, ms
 * included, in the order d, h, m, s, ms; a bare number is refused. */
struct dur_ms_good {
	const char *in;
	uint64_t ms;
};

static const struct dur_ms_good msgood[] = {
    {"500ms", 500},	    {"10s", 10000},	     {"1m30s", 90000},
    {"1h2m3s4ms", 3723004}, {"1d", 86400000},	     {"1d2h3m4s5ms", 93784005},
    {"1m500ms", 60500},	    {"7d", 7ULL * 86400000}, {"05ms", 5},
};

static const struct dur_bad msbad[] = {
    {"10", "a number needs a unit"},
    {"0", "a number needs a unit"},
    {"", "empty"},
    {"0s", "longer than zero"},
    {"0ms", "longer than zero"},
    {"5ms5s", "largest to smallest"},
    {"1s1m", "units must go"},
    {"1ms1ms", "each once"},
    {"1h30", "has no unit"},
    {"10x", "unknown unit 'x'"},
    {"10MS", "unknown unit 'M'"},
    {"-5s", "negative"},
    {"7d1ms", "too long (max 7d)"},
    {"8d", "too long"},
    {"604800001ms", "too long"},
    {"99999999999999999999s", "too long"},
    {"1.5s", "unknown unit '.'"},
    {"1msx", "expected a number"},
};

START_TEST(test_dur_ms_good)
{
	const struct dur_ms_good *t = &msgood[_i];
	struct errbuf err = {""};
	uint64_t ms = 0;

	ck_assert_msg(duration_parse_ms(t->in, 7ULL * 86400000, &ms, &err) == 0,
		      "%s: %s", t->in, err.msg);
	ck_assert_uint_eq(ms, t->ms);
}
END_TEST

START_TEST(test_dur_ms_bad)
{
	const struct dur_bad *t = &msbad[_i];
	struct errbuf err = {""};
	uint64_t ms = 12345;

	ck_assert_int_eq(duration_parse_ms(t->in, 7ULL * 86400000, &ms, &err),
			 -EINVAL);
	ck_assert_uint_eq(ms, 12345);
	ck_assert_msg(strstr(err.msg, t->msg) != NULL,
		      "'%s': message '%s' lacks '%s'", t->in, err.msg, t->msg);
}
END_TEST

/* In whole seconds (hsts_max_age, --ttl): ms is a unit of the grammar
 * too, but the total must be whole seconds; a bare number is seconds. */
START_TEST(test_dur_whole_seconds)
{
	struct errbuf err = {""};
	uint64_t s = 7;

	ck_assert_int_eq(duration_parse("2000ms", &s, &err), 0);
	ck_assert_uint_eq(s, 2);
	ck_assert_int_eq(duration_parse("1m30s1000ms", &s, &err), 0);
	ck_assert_uint_eq(s, 91);
	s = 7;
	ck_assert_int_eq(duration_parse("1500ms", &s, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "not whole seconds"));
	ck_assert_int_eq(duration_parse("1s1ms", &s, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "not whole seconds"));
	ck_assert_uint_eq(s, 7);
	/* a bare number, and its own limit */
	ck_assert_int_eq(duration_parse_secs("90", 90, &s, &err), 0);
	ck_assert_uint_eq(s, 90);
	ck_assert_int_eq(duration_parse_secs("91", 90, &s, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "too long (max 1m30s)"));
	ck_assert_int_eq(duration_parse_secs("1m31s", 90, &s, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "too long (max 1m30s)"));
	/* the ms grammar refuses what the seconds one reads as seconds */
	ck_assert_int_eq(duration_parse_ms("90", 1000000, &s, &err), -EINVAL);
	ck_assert_uint_eq(s, 90);
}
END_TEST

START_TEST(test_dur_format_edges)
{
	char buf[DURATION_STR_MAX];

	ck_assert_str_eq(duration_format(0, buf, sizeof(buf)), "0s");
	ck_assert_str_eq(duration_format(86401, buf, sizeof(buf)), "1d1s");
	ck_assert_int_eq(duration_parse(NULL, &(uint64_t){0}, NULL), -EINVAL);
}
END_TEST

static const struct dur_bad pbad[] = {
    {"", "empty port list"},
    {"0", "out of range"},
    {"65536", "out of range"},
    {"100000", "out of range"},
    {"80,", "empty item"},
    {",80", "empty item"},
    {"80,,443", "empty item"},
    {"080", "leading zero"},
    {"http", "not a port number"},
    {"-80", "empty port number"},
    {"80-", "empty port number"},
    {"90-80", "backwards"},
    {"80-90-100", "not a port number"},
    {"+80", "not a port number"},
    {"80 ,443", "not a port number"},
};

START_TEST(test_ports_bad)
{
	const struct dur_bad *t = &pbad[_i];
	struct errbuf err = {""};
	struct policy_ports p;

	ck_assert_int_eq(policy_ports_parse(t->in, &p, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, t->msg) != NULL,
		      "'%s': message '%s' lacks '%s'", t->in, err.msg, t->msg);
}
END_TEST

START_TEST(test_ports_good)
{
	struct errbuf err = {""};
	struct policy_ports p;
	char *s;

	ck_assert_int_eq(
	    policy_ports_parse("443,80,8000-8100,8080,1,65535", &p, &err), 0);
	ck_assert(policy_port_guarded(&p, 80));
	ck_assert(policy_port_guarded(&p, 8050));
	ck_assert(!policy_port_guarded(&p, 22));
	ck_assert(!policy_port_guarded(&p, 0));
	ck_assert_uint_eq(policy_ports_count(&p), 105);
	s = policy_ports_format(&p);
	ck_assert_str_eq(s, "1,80,443,8000-8100,65535");
	free(s);
	ck_assert_int_eq(policy_ports_parse("1-65535", &p, &err), 0);
	ck_assert_uint_eq(policy_ports_count(&p), 65535);
	s = policy_ports_format(&p);
	ck_assert_str_eq(s, "1-65535");
	free(s);
}
END_TEST

START_TEST(test_rates)
{
	struct errbuf err = {""};
	struct edge_rl_conf conf;
	struct policy_rl rl;
	uint64_t r;

	char buf[32];

	/* rates are kept per minute */
	ck_assert_int_eq(policy_rate_parse("100", &r, &err), 0);
	ck_assert_uint_eq(r, 6000);
	ck_assert_int_eq(policy_rate_parse("100/s", &r, &err), 0);
	ck_assert_uint_eq(r, 6000);
	ck_assert_int_eq(policy_rate_parse("6000/m", &r, &err), 0);
	ck_assert_uint_eq(r, 6000);
	ck_assert_int_eq(policy_rate_parse("1/m", &r, &err), 0);
	ck_assert_uint_eq(r, 1);
	ck_assert_int_eq(policy_rate_parse("61/m", &r, &err), 0);
	ck_assert_uint_eq(r, 61);
	policy_rate_format(6000, buf, sizeof(buf));
	ck_assert_str_eq(buf, "100/s");
	policy_rate_format(61, buf, sizeof(buf));
	ck_assert_str_eq(buf, "61/m");
	ck_assert_int_eq(policy_rate_parse("100000000", &r, &err), 0);
	ck_assert_int_eq(policy_rate_parse("100000001", &r, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "too high"));
	ck_assert_int_eq(policy_rate_parse("6000000000/m", &r, &err), 0);
	ck_assert_int_eq(policy_rate_parse("6000000001/m", &r, &err), -EINVAL);
	ck_assert_int_eq(policy_rate_parse("0", &r, &err), -EINVAL);
	ck_assert_int_eq(policy_rate_parse("-1", &r, &err), -EINVAL);
	ck_assert_int_eq(policy_rate_parse("10/h", &r, &err), -EINVAL);
	ck_assert_int_eq(policy_rate_parse("1e3", &r, &err), -EINVAL);
	ck_assert_int_eq(policy_rate_parse("", &r, &err), -EINVAL);
	ck_assert_int_eq(policy_rate_parse("/s", &r, &err), -EINVAL);
	ck_assert_int_eq(policy_rate_parse("99999999999999999999999", &r, &err),
			 -EINVAL);
	ck_assert_int_eq(policy_burst_parse("0", &r, &err), -EINVAL);
	ck_assert_int_eq(policy_burst_parse("100000001", &r, &err), -EINVAL);
	ck_assert_int_eq(policy_burst_parse("100000000", &r, &err), 0);
	ck_assert_uint_eq(policy_burst_default(0), 1);
	ck_assert_uint_eq(policy_burst_default(1), 1);	   /* 1/m */
	ck_assert_uint_eq(policy_burst_default(3000), 50); /* 50/s */
	ck_assert_uint_eq(policy_burst_default(3001), 51);

	rl.rate = 7;
	rl.burst = 10;
	ck_assert_int_eq(policy_rl_conf(&rl, &conf), 0);
	ck_assert_uint_eq(conf.fill_ns, 85714285715ULL); /* rounded up */
	rl.rate = 1;
	rl.burst = EDGE_RL_BURST_MAX; /* 1e8 * 6e10: needs > 64 bits */
	ck_assert_int_eq(policy_rl_conf(&rl, &conf), 0);
	ck_assert_uint_eq(conf.fill_ns, EDGE_RL_BURST_MAX * EDGE_RL_SCALE);
	rl.rate = 0;
	ck_assert_int_eq(policy_rl_conf(&rl, &conf), 0);
	ck_assert_uint_eq(conf.fill_ns, 0);
	ck_assert_uint_eq(conf.burst, 0);
	rl.rate = EDGE_RL_RATE_MAX + 1;
	ck_assert_int_eq(policy_rl_conf(&rl, &conf), -ERANGE);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("duration");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_dur_good, 0,
			    sizeof(dgood) / sizeof(dgood[0]));
	tcase_add_loop_test(tc, test_dur_bad, 0,
			    sizeof(dbad) / sizeof(dbad[0]));
	tcase_add_loop_test(tc, test_dur_ms_good, 0,
			    sizeof(msgood) / sizeof(msgood[0]));
	tcase_add_loop_test(tc, test_dur_ms_bad, 0,
			    sizeof(msbad) / sizeof(msbad[0]));
	tcase_add_test(tc, test_dur_whole_seconds);
	tcase_add_test(tc, test_dur_format_edges);
	tcase_add_loop_test(tc, test_ports_bad, 0,
			    sizeof(pbad) / sizeof(pbad[0]));
	tcase_add_test(tc, test_ports_good);
	tcase_add_test(tc, test_rates);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
