/* SPDX-License-Identifier: BSD-2-Clause */
/* test_log.c - the log module: text lines as they always were, JSON lines
 * (parsed back with jansson) with the connection's context, escaping of
 * whatever a message holds, libbpf's output as debug lines, rate limits
 * per call site (a flood from one site, four threads on one site, the
 * held-back count taken by a timer), the
 * single-thread rate limit (log_rl_allow) and the error buffer. stderr is
 * captured through a pipe (dup2) in each test's own process. */
#include <bpf/libbpf.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "unit.h"

#define MS 1000000ull

START_TEST(test_rl_first_then_held)
{
	struct log_rl rl = {0};
	uint64_t held = 99;
	unsigned i;

	/* the first message passes, even at time 0 */
	ck_assert(log_rl_allow(&rl, 0, 10000 * MS, &held));
	ck_assert_uint_eq(held, 0);
	/* within the interval: held back and counted */
	for (i = 0; i < 1000; i++)
		ck_assert(!log_rl_allow(&rl, i * MS, 10000 * MS, &held));
	ck_assert(!log_rl_allow(&rl, 9999 * MS, 10000 * MS, &held));
	/* at the end of the interval: one passes, saying how many were held */
	ck_assert(log_rl_allow(&rl, 10000 * MS, 10000 * MS, &held));
	ck_assert_uint_eq(held, 1001);
	/* and the count starts again */
	ck_assert(!log_rl_allow(&rl, 10001 * MS, 10000 * MS, &held));
	ck_assert(log_rl_allow(&rl, 30000 * MS, 10000 * MS, &held));
	ck_assert_uint_eq(held, 1);
}
END_TEST

START_TEST(test_rl_flood_bounded)
{
	struct log_rl rl = {0};
	uint64_t held, t, passed = 0;

	/* a million attempts over 100 s at a 10 s interval: 10 lines */
	for (t = 0; t < 1000000; t++)
		passed += log_rl_allow(&rl, t * 100000ull, 10000 * MS, &held);
	ck_assert_uint_eq(passed, 10);
}
END_TEST

START_TEST(test_errbuf)
{
	struct errbuf e;
	char longer[ERRBUF_LEN * 2];

	errbuf_set(&e, "%s:%d: %s", "f.conf", 3, "bad");
	ck_assert_str_eq(e.msg, "f.conf:3: bad");
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	errbuf_set(&e, "%s", longer);
	ck_assert_uint_eq(strlen(e.msg), ERRBUF_LEN - 1);
	errbuf_clear(&e);
	ck_assert_str_eq(e.msg, "");
	errbuf_set(NULL, "ignored");
	errbuf_clear(NULL);
}
END_TEST

/* stderr, captured */
struct cap {
	int saved, rd;
};

static void cap_start(struct cap *c)
{
	int p[2];

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	/* room for every test's output; and should a broken limit let a
	 * flood through, lines are lost (EAGAIN) rather than the writer
	 * blocked: the test then fails on the count, not on a timeout */
	(void)fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
	ck_assert_int_eq(fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
	c->saved = dup(STDERR_FILENO);
	ck_assert_int_ge(c->saved, 0);
	ck_assert_int_eq(dup2(p[1], STDERR_FILENO), STDERR_FILENO);
	close(p[1]);
	c->rd = p[0];
}

/* Everything written since cap_start (the caller frees it). */
static char *cap_end(struct cap *c)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	ssize_t n;

	ck_assert_int_eq(dup2(c->saved, STDERR_FILENO), STDERR_FILENO);
	close(c->saved);
	ck_assert_ptr_nonnull(buf);
	for (;;) {
		if (cap - len < 4096) {
			char *bigger = realloc(buf, cap * 2);

			ck_assert_ptr_nonnull(bigger);
			buf = bigger;
			cap *= 2;
		}
		n = read(c->rd, buf + len, cap - len - 1);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(c->rd);
	buf[len] = '\0';
	return buf;
}

static unsigned count_lines(const char *s)
{
	unsigned n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* The sum of the "(N suppressed)" counts in text output. */
static uint64_t sum_suppressed(const char *s)
{
	unsigned long long n;
	uint64_t sum = 0;
	const char *p;

	for (p = s; (p = strstr(p, " (")) != NULL; p++)
		if (sscanf(p, " (%llu suppressed)", &n) == 1)
			sum += n;
	return sum;
}

START_TEST(test_text_unchanged)
{
	struct cap c;
	char *out;

	log_init("edged", false);
	log_set_format(LOG_FORMAT_TEXT);
	cap_start(&c);
	log_warnx("listen %s: %d", "[::]:80", 3);
	errno = ENOENT;
	log_warn("open %s", "/etc/edge.conf");
	ck_assert_int_eq(errno, ENOENT);
	log_note("reload %s", "done");
	log_debug("not shown %d", 1);
	log_init("edged", true);
	log_set_format(LOG_FORMAT_TEXT);
	log_debug("shown %d", 2);
	log_warnx("tab\there, UTF-8 \xc3\xa9, raw \xff");
	out = cap_end(&c);
	ck_assert_str_eq(out, "edged: listen [::]:80: 3\n"
			      "edged: open /etc/edge.conf: No such file or "
			      "directory\n"
			      "edged: note: reload done\n"
			      "edged: debug: shown 2\n"
			      "edged: tab\there, UTF-8 \xc3\xa9, raw \xff\n");
	free(out);
}
END_TEST

START_TEST(test_text_ctx)
{
	struct log_ctx both = {"203.0.113.9", "4bf92f3577b34da6"};
	struct log_ctx v6 = {"2001:db8::1", NULL};
	struct log_ctx rid = {NULL, "id with space\n"};
	struct cap c;
	char *out;

	log_init("edged", true);
	log_set_format(LOG_FORMAT_TEXT);
	cap_start(&c);
	log_warnx_ctx(&both, "upstream %s: timeout", "app");
	log_note_ctx(&v6, "slow");
	errno = ECONNREFUSED;
	log_warn_ctx(&rid, "connect");
	log_debug_ctx(NULL, "no context");
	/* one call, one line: a newline in a message cannot forge another */
	log_warnx("two\nlines\r");
	out = cap_end(&c);
	ck_assert_str_eq(
	    out, "edged: client=203.0.113.9 request_id=4bf92f3577b34da6: "
		 "upstream app: timeout\n"
		 "edged: note: client=2001:db8::1: slow\n"
		 "edged: request_id=id\\x20with\\x20space\\x0a: connect: "
		 "Connection refused\n"
		 "edged: debug: no context\n"
		 "edged: two\\x0alines\\x0d\n");
	free(out);
}
END_TEST

/* out as JSON lines: each parsed into lines[i] (at most max). */
static unsigned parse_lines(char *out, json_t **lines, unsigned max)
{
	json_error_t jerr;
	char *line, *save = NULL;
	unsigned n = 0;

	for (line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		ck_assert_uint_lt(n, max);
		lines[n] = json_loads(line, JSON_REJECT_DUPLICATES, &jerr);
		ck_assert_msg(lines[n], "not JSON: %s: %s", jerr.text, line);
		ck_assert(json_is_object(lines[n]));
		n++;
	}
	return n;
}

static const char *jstr(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* time is RFC 3339 UTC with milliseconds, and now */
static void check_time(const char *t)
{
	struct tm tm = {0};
	const char *end;
	time_t then, now = time(NULL);

	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(strlen(t), 24);
	end = strptime(t, "%Y-%m-%dT%H:%M:%S", &tm);
	ck_assert_ptr_nonnull(end);
	ck_assert(end[0] == '.' && end[1] >= '0' && end[1] <= '9' &&
		  end[2] >= '0' && end[2] <= '9' && end[3] >= '0' &&
		  end[3] <= '9' && end[4] == 'Z');
	then = timegm(&tm);
	ck_assert(then <= now && now - then < 60);
}

START_TEST(test_json_fields)
{
	struct log_ctx both = {"203.0.113.9", "4bf92f3577b34da6"};
	struct log_ctx cl = {"198.51.100.7", NULL};
	json_t *l[8];
	struct cap c;
	char *out;
	unsigned n, i;

	log_init("edged", true);
	log_set_format(LOG_FORMAT_JSON);
	ck_assert_int_eq(log_get_format(), LOG_FORMAT_JSON);
	cap_start(&c);
	log_warnx("plain %d", 1);
	errno = EPIPE;
	log_warn_ctx(&both, "write");
	log_note_ctx(&cl, "note");
	log_debug("dbg");
	out = cap_end(&c);
	n = parse_lines(out, l, 8);
	ck_assert_uint_eq(n, 4);
	for (i = 0; i < n; i++) {
		check_time(jstr(l[i], "time"));
		ck_assert_str_eq(jstr(l[i], "prog"), "edged");
	}
	ck_assert_str_eq(jstr(l[0], "level"), "warn");
	ck_assert_str_eq(jstr(l[0], "msg"), "plain 1");
	ck_assert_ptr_null(json_object_get(l[0], "client"));
	ck_assert_ptr_null(json_object_get(l[0], "request_id"));
	ck_assert_ptr_null(json_object_get(l[0], "suppressed"));
	ck_assert_uint_eq(json_object_size(l[0]), 4);
	ck_assert_str_eq(jstr(l[1], "level"), "warn");
	ck_assert_str_eq(jstr(l[1], "msg"), "write: Broken pipe");
	ck_assert_str_eq(jstr(l[1], "client"), "203.0.113.9");
	ck_assert_str_eq(jstr(l[1], "request_id"), "4bf92f3577b34da6");
	ck_assert_str_eq(jstr(l[2], "level"), "note");
	ck_assert_str_eq(jstr(l[2], "client"), "198.51.100.7");
	ck_assert_ptr_null(json_object_get(l[2], "request_id"));
	ck_assert_str_eq(jstr(l[3], "level"), "debug");
	ck_assert_str_eq(jstr(l[3], "msg"), "dbg");
	for (i = 0; i < n; i++)
		json_decref(l[i]);
	free(out);
	/* and back to text */
	log_set_format(LOG_FORMAT_TEXT);
	cap_start(&c);
	log_warnx("text again");
	out = cap_end(&c);
	ck_assert_str_eq(out, "edged: text again\n");
	free(out);
}
END_TEST

START_TEST(test_json_escaping)
{
	/* a client's X-Request-ID may hold anything */
	struct log_ctx evil = {"203.0.113.9\"", "a\xff\"\\\x01"};
	json_t *l[4];
	struct cap c;
	char *out;
	char big[LOG_MSG_MAX * 2];

	log_init("edged", false);
	log_set_format(LOG_FORMAT_JSON);
	cap_start(&c);
	log_warnx_ctx(&evil, "say \"hi\"\nthen \xff\xfe \\ \x01\x1f\x7f "
			     "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 "
			     "\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82");
	/* the longest message, every byte escaped */
	memset(big, '\x01', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	log_warnx("%s", big);
	memset(big, '\xff', sizeof(big) - 1);
	log_warnx("%s", big);
	out = cap_end(&c);
	log_set_format(LOG_FORMAT_TEXT);
	ck_assert_uint_eq(parse_lines(out, l, 4), 3);
	ck_assert_str_eq(jstr(l[0], "msg"),
			 "say \"hi\"\nthen \xef\xbf\xbd\xef\xbf\xbd \\ "
			 "\x01\x1f\x7f \xc3\xa9 \xe2\x82\xac "
			 "\xf0\x9f\x98\x80 "
			 /* overlong, surrogate, > U+10FFFF, truncated */
			 "\xef\xbf\xbd\xef\xbf\xbd "
			 "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
			 "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
			 "\xef\xbf\xbd\xef\xbf\xbd");
	ck_assert_str_eq(jstr(l[0], "client"), "203.0.113.9\"");
	ck_assert_str_eq(jstr(l[0], "request_id"), "a\xef\xbf\xbd\"\\\x01");
	ck_assert_uint_eq(strlen(jstr(l[1], "msg")), LOG_MSG_MAX - 1);
	ck_assert_uint_eq(strlen(jstr(l[2], "msg")), (LOG_MSG_MAX - 1) * 3);
	json_decref(l[0]);
	json_decref(l[1]);
	json_decref(l[2]);
	free(out);
}
END_TEST

START_TEST(test_format_parse)
{
	enum log_format f = LOG_FORMAT_TEXT;

	ck_assert_int_eq(log_format_parse("json", &f), 0);
	ck_assert_int_eq(f, LOG_FORMAT_JSON);
	ck_assert_int_eq(log_format_parse("text", &f), 0);
	ck_assert_int_eq(f, LOG_FORMAT_TEXT);
	f = LOG_FORMAT_JSON;
	ck_assert_int_eq(log_format_parse("JSON", &f), -EINVAL);
	ck_assert_int_eq(log_format_parse("", &f), -EINVAL);
	ck_assert_int_eq(log_format_parse("text ", &f), -EINVAL);
	ck_assert_int_eq(f, LOG_FORMAT_JSON);
	ck_assert_str_eq(log_format_name(LOG_FORMAT_TEXT), "text");
	ck_assert_str_eq(log_format_name(LOG_FORMAT_JSON), "json");
	ck_assert_ptr_null(log_format_name((enum log_format)7));
	ck_assert_int_eq(log_get_format(), LOG_FORMAT_TEXT);
}
END_TEST

static int call_print(libbpf_print_fn_t fn, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = fn(LIBBPF_WARN, fmt, ap);
	va_end(ap);
	return rc;
}

START_TEST(test_libbpf_is_debug)
{
	libbpf_print_fn_t fn;
	struct cap c;
	char *out;

	log_init("edgectl", false);
	log_set_format(LOG_FORMAT_TEXT);
	fn = libbpf_set_print(NULL);
	ck_assert_ptr_nonnull(fn);
	cap_start(&c);
	call_print(fn, "libbpf: scary %s\n", "warning");
	log_init("edgectl", true);
	log_set_format(LOG_FORMAT_TEXT);
	fn = libbpf_set_print(NULL);
	call_print(fn, "libbpf: %s\n", "one");
	call_print(fn, "-- BEGIN --\nline %d\n-- END --\n", 2);
	log_set_format(LOG_FORMAT_JSON);
	call_print(fn, "as json\n");
	out = cap_end(&c);
	/* not verbose: nothing; then one debug line per line */
	ck_assert(strncmp(out,
			  "edgectl: debug: libbpf: libbpf: one\n"
			  "edgectl: debug: libbpf: -- BEGIN --\n"
			  "edgectl: debug: libbpf: line 2\n"
			  "edgectl: debug: libbpf: -- END --\n"
			  "{\"time\":\"",
			  strlen("edgectl: debug: libbpf: libbpf: one\n"
				 "edgectl: debug: libbpf: -- BEGIN --\n"
				 "edgectl: debug: libbpf: line 2\n"
				 "edgectl: debug: libbpf: -- END --\n"
				 "{\"time\":\"")) == 0);
	ck_assert_ptr_nonnull(strstr(out, "\"level\":\"debug\",\"prog\":"
					  "\"edgectl\",\"msg\":\"libbpf: as "
					  "json\"}\n"));
	log_set_format(LOG_FORMAT_TEXT);
	free(out);
}
END_TEST

START_TEST(test_site_bucket)
{
	struct log_site site = LOG_SITE_INIT(10, 1000);
	struct log_site one = LOG_SITE_INIT(1, 60000);
	uint64_t sup = 99, t0 = 5000 * MS;
	unsigned i;

	/* a burst of 10 at once, then held back */
	for (i = 0; i < 10; i++) {
		ck_assert(log_site_allow(&site, t0, &sup));
		ck_assert_uint_eq(sup, 0);
	}
	for (i = 0; i < 500; i++)
		ck_assert(!log_site_allow(&site, t0 + i * MS, &sup));
	/* one token a second, the first saying what was held back */
	ck_assert(!log_site_allow(&site, t0 + 999 * MS, &sup));
	ck_assert(log_site_allow(&site, t0 + 1000 * MS, &sup));
	ck_assert_uint_eq(sup, 501);
	ck_assert(!log_site_allow(&site, t0 + 1500 * MS, &sup));
	ck_assert(log_site_allow(&site, t0 + 2000 * MS, &sup));
	ck_assert_uint_eq(sup, 1);
	/* a long quiet fills the bucket back to 10, no more */
	for (i = 0; i < 10; i++)
		ck_assert(log_site_allow(&site, t0 + 3600000 * MS, &sup));
	ck_assert(!log_site_allow(&site, t0 + 3600000 * MS, &sup));
	/* burst 1: once a minute, even at time 0 */
	ck_assert(log_site_allow(&one, 0, &sup));
	ck_assert(!log_site_allow(&one, 59999 * MS, &sup));
	ck_assert(log_site_allow(&one, 60000 * MS, &sup));
	ck_assert_uint_eq(sup, 1);
}
END_TEST

/* The held-back count said without a next line (a timer asks): only
 * once the limit lets a line through, never a line counted that was not
 * held back, and the line it takes counts against the limit. */
START_TEST(test_site_take_held)
{
	struct log_site site = LOG_SITE_INIT(1, 1000);
	uint64_t sup = 99, t0 = 5000 * MS;
	unsigned i;

	/* nothing held: nothing to say, and no token spent */
	ck_assert(!log_site_take_held(&site, t0, &sup));
	ck_assert(log_site_allow(&site, t0, &sup));
	ck_assert_uint_eq(sup, 0);
	for (i = 0; i < 49; i++)
		ck_assert(!log_site_allow(&site, t0 + i * MS, &sup));
	/* within the second: not yet, and asking holds nothing back */
	ck_assert(!log_site_take_held(&site, t0 + 500 * MS, &sup));
	ck_assert(!log_site_take_held(&site, t0 + 999 * MS, &sup));
	ck_assert(log_site_take_held(&site, t0 + 1000 * MS, &sup));
	ck_assert_uint_eq(sup, 49);
	/* said: nothing more to say, and that line took the second's token */
	ck_assert(!log_site_take_held(&site, t0 + 1001 * MS, &sup));
	ck_assert(!log_site_allow(&site, t0 + 1500 * MS, &sup));
	ck_assert(log_site_take_held(&site, t0 + 2000 * MS, &sup));
	ck_assert_uint_eq(sup, 1);
	/* a failure after a quiet spell passes with nothing held */
	ck_assert(log_site_allow(&site, t0 + 9000 * MS, &sup));
	ck_assert_uint_eq(sup, 0);
}
END_TEST

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One call site, whoever calls it. */
static void flood_site(unsigned i)
{
	log_warnx_rl("flood %u", i);
}

START_TEST(test_rl_flood_site)
{
	enum { CALLS = 100000 };
	struct timespec pause = {0, 1000000};
	uint64_t t0, elapsed, held;
	unsigned i, lines, written;
	struct cap c;
	char *out, *last;

	log_init("edged", false);
	log_set_format(LOG_FORMAT_TEXT);
	cap_start(&c);
	t0 = now_ms();
	/* 100000 calls spread over about a second */
	for (i = 0; i < CALLS; i++) {
		flood_site(i);
		if (i % 100 == 99)
			nanosleep(&pause, NULL);
	}
	elapsed = now_ms() - t0;
	out = cap_end(&c);
	lines = count_lines(out);
	/* burst + one a second (+1 for the coarse clock's granularity) */
	ck_assert_uint_ge(lines, LOG_RL_BURST);
	ck_assert_uint_le(lines,
			  LOG_RL_BURST + elapsed / LOG_RL_INTERVAL_MS + 1);
	ck_assert(strncmp(out, "edged: flood 0\n", 15) == 0);
	written = lines;
	held = sum_suppressed(out);
	free(out);
	/* a line after a quiet second says how many it held back */
	pause.tv_sec = 1;
	pause.tv_nsec = 100000000;
	nanosleep(&pause, NULL);
	cap_start(&c);
	flood_site(CALLS);
	out = cap_end(&c);
	ck_assert_uint_eq(count_lines(out), 1);
	last = strstr(out, "edged: flood 100000 (");
	ck_assert_msg(last, "no count: %s", out);
	ck_assert_uint_gt(sum_suppressed(out), 0);
	/* every call was written or counted */
	ck_assert_uint_eq(written + 1 + held + sum_suppressed(out), CALLS + 1);
	free(out);
}
END_TEST

/* Four threads on shared sites: every call is written or counted, once,
 * and whole lines only. hammer_site has the default limit; fast_site lets
 * thousands of lines through, so that writing (and resetting the count)
 * races with counting. */
#define HAMMER_THREADS 4
#define HAMMER_CALLS 50000
#define FAST_BURST 100
#define FAST_INTERVAL_NS 50000ull

static struct log_site hammer_site =
    LOG_SITE_INIT(LOG_RL_BURST, LOG_RL_INTERVAL_MS);
static struct log_site fast_site = {.interval_ns = FAST_INTERVAL_NS,
				    .burst = FAST_BURST};
static atomic_uint hammer_go;

static void *hammer_main(void *arg)
{
	unsigned i;

	(void)arg;
	while (!atomic_load(&hammer_go))
		;
	for (i = 0; i < HAMMER_CALLS; i++) {
		/* half way, a pause longer than the coarse clock's tick: on a
		 * fast machine all the calls may otherwise fit in one tick,
		 * and fast_site would let its burst through and no more */
		if (i == HAMMER_CALLS / 2)
			usleep(20000);
		log_site_warnx(&hammer_site, NULL, "hammer %u", i);
		log_site_warnx(&fast_site, NULL, "fast %u", i);
		if (i % 5000 == 0)
			log_warnx_rl("macro site %u", i);
	}
	return NULL;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

START_TEST(test_rl_threads)
{
	pthread_t th[HAMMER_THREADS];
	uint64_t t0, elapsed, sup[2] = {0, 0}, lines[2] = {0, 0};
	unsigned i;
	struct cap c;
	char *out, *p, *save = NULL;

	log_init("edged", false);
	log_set_format(LOG_FORMAT_TEXT);
	cap_start(&c);
	t0 = now_ns();
	for (i = 0; i < HAMMER_THREADS; i++)
		ck_assert_int_eq(
		    pthread_create(&th[i], NULL, hammer_main, NULL), 0);
	atomic_store(&hammer_go, 1);
	for (i = 0; i < HAMMER_THREADS; i++)
		pthread_join(th[i], NULL);
	elapsed = now_ns() - t0;
	out = cap_end(&c);
	for (p = strtok_r(out, "\n", &save); p;
	     p = strtok_r(NULL, "\n", &save)) {
		unsigned long long n;
		unsigned k, f;
		char end;

		if (strncmp(p, "edged: macro site ", 18) == 0)
			continue;
		f = strncmp(p, "edged: fast ", 12) == 0;
		p += f ? 12 : 14;
		ck_assert_msg(f || strncmp(p - 14, "edged: hammer ", 14) == 0,
			      "mangled: %s", p);
		/* "N" or "N (M suppressed)", nothing else */
		if (sscanf(p, "%u (%llu suppressed%c", &k, &n, &end) == 3) {
			ck_assert_int_eq(end, ')');
			sup[f] += n;
		} else {
			ck_assert_msg(sscanf(p, "%u%c", &k, &end) == 1,
				      "mangled: %s", p);
		}
		lines[f]++;
	}
	ck_assert_uint_le(lines[0],
			  LOG_RL_BURST +
			      elapsed / (LOG_RL_INTERVAL_MS * 1000000ull) + 1);
	/* the coarse clock may lag real time by a tick (<= 10 ms) */
	ck_assert_uint_le(lines[1], FAST_BURST + (elapsed + 10000000ull) /
						     FAST_INTERVAL_NS);
	ck_assert_uint_gt(lines[1], FAST_BURST);
	ck_assert_uint_eq(lines[0] + sup[0] +
			      atomic_load(&hammer_site.suppressed),
			  HAMMER_THREADS * HAMMER_CALLS);
	ck_assert_uint_eq(lines[1] + sup[1] +
			      atomic_load(&fast_site.suppressed),
			  HAMMER_THREADS * HAMMER_CALLS);
	free(out);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("log");

	tcase_add_test(tc, test_rl_first_then_held);
	tcase_add_test(tc, test_rl_flood_bounded);
	tcase_add_test(tc, test_errbuf);
	tcase_add_test(tc, test_text_unchanged);
	tcase_add_test(tc, test_text_ctx);
	tcase_add_test(tc, test_json_fields);
	tcase_add_test(tc, test_json_escaping);
	tcase_add_test(tc, test_format_parse);
	tcase_add_test(tc, test_libbpf_is_debug);
	tcase_add_test(tc, test_site_bucket);
	tcase_add_test(tc, test_site_take_held);
	tcase_add_test(tc, test_rl_flood_site);
	tcase_add_test(tc, test_rl_threads);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
