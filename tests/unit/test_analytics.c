/* SPDX-License-Identifier: BSD-2-Clause */
/* test_analytics.c - events, the queue, the writer, the spool and the
 * JSON-lines file sink; several sinks at once, and a sink's disk spool
 * (spilled in order, replayed oldest first, capped, kept across a stop). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "analytics.h"
#include "analytics_spool.h"
#include "unit.h"

static char tmpdir[64];
static char path[128];

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/edge-analytics.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(path, sizeof(path), "%s/events.jsonl", tmpdir);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static void fill(struct analytics_event *ev, const char *id)
{
	memset(ev, 0, sizeof(*ev));
	ev->time_ns = 1700000000123456789ULL;
	ev->duration_ns = 1500000;
	ev->upstream_ns = 1000000;
	ev->bytes_in = 100;
	ev->bytes_out = 2000;
	ev->status = 200;
	ev->outcome = OUTCOME_OK;
	analytics_event_set(ev, ANALYTICS_F_REQUEST_ID, id, SIZE_MAX);
	analytics_event_set(ev, ANALYTICS_F_PROJECT_ID, "p1", SIZE_MAX);
	analytics_event_set(ev, ANALYTICS_F_HOST, "app.example.com", SIZE_MAX);
	analytics_event_set(ev, ANALYTICS_F_METHOD, "GET", SIZE_MAX);
	analytics_event_set(ev, ANALYTICS_F_PATH, "/index.html", SIZE_MAX);
	analytics_event_set(ev, ANALYTICS_F_CLIENT_IP, "203.0.113.9", SIZE_MAX);
}

static struct analytics *make(struct analytics_conf *conf)
{
	struct analytics *a = NULL;

	ck_assert_int_eq(analytics_file_sink(path, &conf->sink), 0);
	ck_assert_int_eq(analytics_new(conf, &a), 0);
	return a;
}

static struct analytics_stats stats(struct analytics *a)
{
	struct analytics_stats st;

	analytics_stats(a, &st);
	return st;
}

/* Poll until expr holds, for up to 10 s. */
#define WAIT_FOR(expr)                                                         \
	do {                                                                   \
		int waited_ = 0;                                               \
		while (!(expr) && waited_++ < 2000)                            \
			usleep(5000);                                          \
		ck_assert_msg((expr), "timed out waiting for " #expr);         \
	} while (0)

/* The file's lines, each parsed; returns how many, checks each is JSON. */
static size_t read_lines(const char *p, json_t ***out)
{
	FILE *f = fopen(p, "r");
	char *line = NULL;
	size_t cap = 0, n = 0;
	json_t **v = NULL, **nv;
	ssize_t len;

	if (!f) {
		*out = NULL;
		return 0;
	}
	while ((len = getline(&line, &cap, f)) >= 0) {
		json_error_t err;

		ck_assert_int_gt(len, 0);
		ck_assert_int_eq(line[len - 1], '\n');
		nv = realloc(v, (n + 1) * sizeof(*v));
		ck_assert_ptr_nonnull(nv);
		v = nv;
		v[n] = json_loads(line, 0, &err);
		ck_assert_msg(v[n] != NULL, "line %zu: %s: %s", n, line,
			      err.text);
		ck_assert(json_is_object(v[n]));
		n++;
	}
	free(line);
	fclose(f);
	*out = v;
	return n;
}

static void free_lines(json_t **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		json_decref(v[i]);
	free(v);
}

static size_t count_lines(const char *p)
{
	json_t **v;
	size_t n = read_lines(p, &v);

	free_lines(v, n);
	return n;
}

static const char *jstr(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* nginx's combined line: escaped as nginx does, empty fields "-"; the
 * upstream fields as JSON numbers and strings. */
START_TEST(test_event_combined)
{
	static const char want[] =
	    "203.0.113.9 - - [14/Nov/2023:22:13:20 +0000] \"GET /index.html "
	    "HTTP/1.1\" 200 2000 \"-\" \"ua \\x22q\\x22 \\xFF\\x5C\"\n";
	struct analytics_event ev;
	char out[ANALYTICS_COMBINED_MAX], *line;
	size_t n, len;
	json_t *j;

	fill(&ev, "req-1");
	analytics_event_set(&ev, ANALYTICS_F_HTTP_VERSION, "HTTP/1.1",
			    SIZE_MAX);
	analytics_event_set(&ev, ANALYTICS_F_USER_AGENT, "ua \"q\" \xff\\",
			    SIZE_MAX);
	analytics_event_set(&ev, ANALYTICS_F_UPSTREAM_ADDR, "10.0.0.1:80",
			    SIZE_MAX);
	analytics_event_set(&ev, ANALYTICS_F_UPSTREAM_STATUS, "503", SIZE_MAX);
	n = analytics_event_combined(&ev, out);
	ck_assert_uint_eq(n, strlen(want));
	ck_assert_msg(memcmp(out, want, n) == 0, "got %.*s", (int)n, out);
	/* no request line read: "-" */
	fill(&ev, "req-2");
	ev.method[0] = '\0';
	n = analytics_event_combined(&ev, out);
	ck_assert_msg(n > 40 && memmem(out, n, "] \"-\" 200 ", 10) != NULL,
		      "got %.*s", (int)n, out);
	/* JSON: upstream_status a number, upstream_addr a string */
	fill(&ev, "req-3");
	analytics_event_set(&ev, ANALYTICS_F_UPSTREAM_ADDR, "10.0.0.1:80",
			    SIZE_MAX);
	analytics_event_set(&ev, ANALYTICS_F_UPSTREAM_STATUS, "503", SIZE_MAX);
	ck_assert_int_eq(analytics_event_json(&ev, &line, &len), 0);
	j = json_loads(line, 0, NULL);
	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(j, "upstream_status")), 503);
	ck_assert_str_eq(jstr(j, "upstream_addr"), "10.0.0.1:80");
	ck_assert(json_is_null(json_object_get(j, "http_version")));
	json_decref(j);
	free(line);
}
END_TEST

START_TEST(test_event_fields)
{
	struct analytics_event ev;
	char big[2000], *line;
	json_t *j, *t;
	size_t len;

	fill(&ev, "req-1");
	analytics_event_set(&ev, ANALYTICS_F_USER_AGENT, "curl/8", SIZE_MAX);
	ck_assert_int_eq(analytics_event_json(&ev, &line, &len), 0);
	ck_assert_uint_eq(strlen(line), len);
	ck_assert_int_eq(line[len - 1], '\n');
	ck_assert_ptr_eq(strchr(line, '\n'), line + len - 1);
	j = json_loads(line, 0, NULL);
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(jstr(j, "time"), "2023-11-14T22:13:20.123456789Z");
	ck_assert_str_eq(jstr(j, "kind"), "request");
	ck_assert_str_eq(jstr(j, "request_id"), "req-1");
	ck_assert_str_eq(jstr(j, "project_id"), "p1");
	ck_assert(json_is_null(json_object_get(j, "environment_id")));
	ck_assert(json_is_null(json_object_get(j, "deployment_id")));
	ck_assert_str_eq(jstr(j, "host"), "app.example.com");
	ck_assert_str_eq(jstr(j, "method"), "GET");
	ck_assert_str_eq(jstr(j, "path"), "/index.html");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "status")), 200);
	ck_assert_str_eq(jstr(j, "outcome"), "ok");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "bytes_in")),
			 100);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "bytes_out")),
			 2000);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "duration_ns")),
			 1500000);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "upstream_ns")),
			 1000000);
	ck_assert_str_eq(jstr(j, "client_ip"), "203.0.113.9");
	ck_assert_str_eq(jstr(j, "user_agent"), "curl/8");
	ck_assert(json_is_null(json_object_get(j, "referrer")));
	ck_assert(json_is_null(json_object_get(j, "tls_version")));
	ck_assert(json_is_null(json_object_get(j, "mover")));
	ck_assert(json_is_null(json_object_get(j, "tls_cipher")));
	ck_assert(json_is_null(json_object_get(j, "tls_resumed")));
	ck_assert(json_is_null(json_object_get(j, "cold_start_ms")));
	ck_assert(json_is_null(json_object_get(j, "upstream_addr")));
	ck_assert(json_is_null(json_object_get(j, "upstream_status")));
	ck_assert(json_is_null(json_object_get(j, "http_version")));
	ck_assert(json_is_null(json_object_get(j, "challenge")));
	ck_assert(json_is_null(json_object_get(j, "auth")));
	ck_assert(json_is_null(json_object_get(j, "trace_id")));
	ck_assert(json_is_null(json_object_get(j, "span_id")));
	ck_assert(json_is_null(json_object_get(j, "attempts")));
	ck_assert_ptr_null(json_object_get(j, "truncated"));
	ck_assert_uint_eq(json_object_size(j), 31);
	json_decref(j);
	free(line);

	/* a woken request: its cold start as a number */
	analytics_event_set(&ev, ANALYTICS_F_COLD_START_MS, "1234", SIZE_MAX);
	ck_assert_int_eq(analytics_event_json(&ev, &line, &len), 0);
	j = json_loads(line, 0, NULL);
	ck_assert_ptr_nonnull(j);
	ck_assert(json_is_integer(json_object_get(j, "cold_start_ms")));
	ck_assert_int_eq(
	    json_integer_value(json_object_get(j, "cold_start_ms")), 1234);
	json_decref(j);
	free(line);
	memset(ev.cold_start_ms, 0, sizeof(ev.cold_start_ms));

	/* over TLS: the version, the suite, and resumed as a boolean */
	analytics_event_set(&ev, ANALYTICS_F_TLS_VERSION, "TLSv1.3", SIZE_MAX);
	analytics_event_set(&ev, ANALYTICS_F_TLS_CIPHER,
			    "TLS_AES_128_GCM_SHA256", SIZE_MAX);
	analytics_event_set(&ev, ANALYTICS_F_TLS_RESUMED, "true", SIZE_MAX);
	ck_assert_int_eq(analytics_event_json(&ev, &line, &len), 0);
	j = json_loads(line, 0, NULL);
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(jstr(j, "tls_version"), "TLSv1.3");
	ck_assert_str_eq(jstr(j, "tls_cipher"), "TLS_AES_128_GCM_SHA256");
	ck_assert(json_is_true(json_object_get(j, "tls_resumed")));
	json_decref(j);
	free(line);
	analytics_event_set(&ev, ANALYTICS_F_TLS_RESUMED, "false", SIZE_MAX);
	ck_assert_int_eq(analytics_event_json(&ev, &line, &len), 0);
	j = json_loads(line, 0, NULL);
	ck_assert(json_is_false(json_object_get(j, "tls_resumed")));
	json_decref(j);
	free(line);
	memset(ev.tls_version, 0, sizeof(ev.tls_version));
	memset(ev.tls_cipher, 0, sizeof(ev.tls_cipher));
	memset(ev.tls_resumed, 0, sizeof(ev.tls_resumed));

	/* truncation: marked, cut on a character boundary; invalid UTF-8
	 * replaced */
	memset(big, 'a', sizeof(big));
	big[1022] = '\xc3';
	big[1023] = '\xa9'; /* "é" straddles the 1023-byte limit */
	ck_assert(
	    !analytics_event_set(&ev, ANALYTICS_F_PATH, big, sizeof(big)));
	ck_assert_uint_eq(strlen(ev.path), 1022);
	ck_assert(ev.truncated & (1u << ANALYTICS_F_PATH));
	ck_assert(analytics_event_set(&ev, ANALYTICS_F_REFERRER, "r\xff\"x",
				      SIZE_MAX));
	ev.kind = ANALYTICS_KIND_TUNNEL;
	ev.outcome = OUTCOME_TUNNEL;
	ev.status = OUTCOME_TUNNEL_STATUS;
	ck_assert_int_eq(analytics_event_json(&ev, &line, &len), 0);
	j = json_loads(line, 0, NULL);
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(jstr(j, "kind"), "tunnel");
	ck_assert_str_eq(jstr(j, "outcome"), "tunnel");
	ck_assert_uint_eq(strlen(jstr(j, "path")), 1022);
	ck_assert_str_eq(jstr(j, "referrer"), "r\xef\xbf\xbd\"x");
	t = json_object_get(j, "truncated");
	ck_assert_uint_eq(json_array_size(t), 1);
	ck_assert_str_eq(json_string_value(json_array_get(t, 0)), "path");
	json_decref(j);
	free(line);

	/* a short value clears the mark; bad field ids are refused */
	ck_assert(analytics_event_set(&ev, ANALYTICS_F_PATH, "/", 1));
	ck_assert(!(ev.truncated & (1u << ANALYTICS_F_PATH)));
	ck_assert(!analytics_event_set(&ev, ANALYTICS_F_MAX, "x", 1));
	ck_assert_str_eq(analytics_field_name(ANALYTICS_F_USER_AGENT),
			 "user_agent");
}
END_TEST

/* One piece of a strange field and what JSON must say for it: a control
 * character, '"', '\\', a byte that is never UTF-8, a 2-byte character, a
 * surrogate (3 bytes, each replaced), DEL, '/', a newline, a tab, an
 * overlong '/' (2 bytes, each replaced), a 4-byte character. */
static const char strange_in[] =
    "a\x01\"\\\xff\xc3\xa9\xed\xa0\x80\x7f/\n\t\xc0\xaf\xf0\x9f\x98\x80";
static const char strange_out[] = "a\x01\"\\\xef\xbf\xbd\xc3\xa9"
				  "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
				  "\x7f/\n\t\xef\xbf\xbd\xef\xbf\xbd"
				  "\xf0\x9f\x98\x80";

/* Fill field f to its longest with strange_in repeated (whole pieces,
 * then 'z'), and want with what its JSON string decodes to. */
static void strange_field(struct analytics_event *ev, enum analytics_field f,
			  char *want)
{
	size_t size = analytics_field_size(f), n = 0, w = 0;
	char *dst = (char *)analytics_event_get(ev, f);

	while (n + sizeof(strange_in) - 1 <= size - 1) {
		memcpy(dst + n, strange_in, sizeof(strange_in) - 1);
		n += sizeof(strange_in) - 1;
		memcpy(want + w, strange_out, sizeof(strange_out) - 1);
		w += sizeof(strange_out) - 1;
	}
	while (n < size - 1) {
		dst[n++] = 'z';
		want[w++] = 'z';
	}
	dst[n] = '\0';
	want[w] = '\0';
}

/* Every string field at its longest and strangest, the numbers at their
 * edges, a 9-digit nanosecond part with leading zeros: the line is one
 * valid JSON object whose values are the fields, invalid UTF-8 (only)
 * replaced by U+FFFD. */
START_TEST(test_event_json_strange)
{
	static char want[ANALYTICS_F_MAX][1024 * 3];
	struct analytics_event ev;
	char *line;
	size_t len;
	json_t *j, *t;
	unsigned f;

	memset(&ev, 0, sizeof(ev));
	for (f = 0; f < ANALYTICS_F_MAX; f++)
		strange_field(&ev, f, want[f]);
	/* fields a sink reads as numbers or a boolean */
	strcpy(ev.cold_start_ms, "00012345678");
	strcpy(ev.upstream_status, "abc");
	strcpy(ev.tls_resumed, "maybe");
	strcpy(ev.attempts, "3");
	ev.time_ns = 1700000000ULL * 1000000000ULL + 5; /* .000000005 */
	ev.duration_ns = UINT64_MAX >> 1;
	ev.bytes_in = 0;
	ev.bytes_out = 9223372036854775807ULL;
	ev.status = 65535;
	ev.outcome = 250; /* no such outcome */
	ev.kind = 77;
	ev.truncated = ~0u;
	ck_assert_int_eq(analytics_event_json(&ev, &line, &len), 0);
	ck_assert_uint_le(len, ANALYTICS_JSON_MAX);
	ck_assert_uint_eq(strlen(line), len);
	ck_assert_ptr_eq(strchr(line, '\n'), line + len - 1);
	j = json_loads(line, JSON_REJECT_DUPLICATES, NULL);
	ck_assert_msg(j != NULL, "not JSON: %.200s", line);
	for (f = 0; f < ANALYTICS_F_MAX; f++) {
		const char *name = analytics_field_name(f);

		if (f == ANALYTICS_F_COLD_START_MS ||
		    f == ANALYTICS_F_UPSTREAM_STATUS ||
		    f == ANALYTICS_F_TLS_RESUMED || f == ANALYTICS_F_ATTEMPTS)
			continue;
		ck_assert_msg(jstr(j, name) &&
				  strcmp(jstr(j, name), want[f]) == 0,
			      "%s: %s", name, jstr(j, name));
	}
	ck_assert_int_eq(
	    json_integer_value(json_object_get(j, "cold_start_ms")), 12345678);
	ck_assert(json_is_null(json_object_get(j, "upstream_status")));
	ck_assert_int_eq(json_integer_value(json_object_get(j, "attempts")), 3);
	ck_assert(json_is_false(json_object_get(j, "tls_resumed")));
	ck_assert_str_eq(jstr(j, "time"), "2023-11-14T22:13:20.000000005Z");
	ck_assert_str_eq(jstr(j, "kind"), "request");
	ck_assert_str_eq(jstr(j, "outcome"), "unknown");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "status")),
			 65535);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "bytes_in")), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "bytes_out")),
			 INT64_MAX);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "duration_ns")),
			 INT64_MAX);
	t = json_object_get(j, "truncated");
	ck_assert_uint_eq(json_array_size(t), ANALYTICS_F_MAX);
	ck_assert_str_eq(json_string_value(json_array_get(t, 0)), "request_id");
	ck_assert_uint_eq(json_object_size(j), 32);
	json_decref(j);
	free(line);
}
END_TEST

/* A record whose fields lost their NUL (a damaged disk spool, a bug)
 * among good ones: each field is read no further than its size, every
 * line is written and valid, and the good records behind it land. */
START_TEST(test_event_json_no_nul)
{
	struct analytics_conf conf = {.flush_ms = 10, .batch_max = 8};
	struct analytics *a;
	struct analytics_event ev, bad;
	json_t **lines;
	size_t n, i;

	memset(&bad, 'x', sizeof(bad));
	bad.truncated = 0;
	bad.status = 500;
	bad.outcome = 255;
	a = make(&conf);
	ck_assert_int_eq(analytics_start(a), 0);
	fill(&ev, "good-1");
	ck_assert_int_eq(analytics_enqueue(a, &ev), 0);
	ck_assert_int_eq(analytics_enqueue(a, &bad), 0);
	for (i = 2; i <= 5; i++) {
		char id[16];

		snprintf(id, sizeof(id), "good-%zu", i);
		fill(&ev, id);
		ck_assert_int_eq(analytics_enqueue(a, &ev), 0);
	}
	WAIT_FOR(stats(a).written == 6);
	ck_assert_int_eq(analytics_stop(a), 0);
	n = read_lines(path, &lines);
	ck_assert_uint_eq(n, 6);
	ck_assert_str_eq(jstr(lines[0], "request_id"), "good-1");
	/* the queue keeps a field's first size - 1 bytes */
	ck_assert_uint_eq(strlen(jstr(lines[1], "path")),
			  analytics_field_size(ANALYTICS_F_PATH) - 1);
	ck_assert_uint_eq(strlen(jstr(lines[1], "client_ip")),
			  analytics_field_size(ANALYTICS_F_CLIENT_IP) - 1);
	ck_assert_str_eq(jstr(lines[1], "outcome"), "unknown");
	ck_assert_str_eq(jstr(lines[5], "request_id"), "good-5");
	free_lines(lines, n);
	analytics_free(a);
	/* encoded as it is (a record read back from the disk spool): a
	 * field is read to its size, no further */
	{
		char *line;
		size_t ll;
		json_t *j;

		ck_assert_int_eq(analytics_event_json(&bad, &line, &ll), 0);
		j = json_loads(line, 0, NULL);
		ck_assert_ptr_nonnull(j);
		ck_assert_uint_eq(strlen(jstr(j, "path")),
				  analytics_field_size(ANALYTICS_F_PATH));
		json_decref(j);
		free(line);
	}
	/* the combined line too, each field bounded by its size */
	{
		static char buf[ANALYTICS_COMBINED_MAX];
		size_t cl = analytics_event_combined(&bad, buf);

		ck_assert_uint_le(cl, sizeof(buf));
		ck_assert_ptr_eq(memchr(buf, '\n', cl), buf + cl - 1);
		/* the method: its 24 bytes, a space, the path */
		ck_assert_ptr_nonnull(
		    memmem(buf, cl, "\"xxxxxxxxxxxxxxxxxxxxxxxx x", 27));
	}
}
END_TEST

/* The queue holds events packed: its bytes (queue x 512) fill before its
 * count when the events are long, the event that does not fit is dropped
 * and counted, and what was queued comes out intact. */
START_TEST(test_queue_bytes)
{
	struct analytics_conf conf = {.flush_ms = 10, .queue_cap = 16};
	struct analytics *a;
	struct analytics_event ev;
	char big[1100];
	json_t **lines;
	size_t n, i, accepted = 0;
	int rc;

	a = make(&conf);
	fill(&ev, "long");
	memset(big, 'p', sizeof(big) - 1);
	big[0] = '/';
	big[sizeof(big) - 1] = '\0';
	analytics_event_set(&ev, ANALYTICS_F_PATH, big, SIZE_MAX);
	analytics_event_set(&ev, ANALYTICS_F_REFERRER, big, SIZE_MAX);
	analytics_event_set(&ev, ANALYTICS_F_USER_AGENT, big, SIZE_MAX);
	/* not started: nothing leaves the queue */
	for (i = 0; i < 16; i++) {
		rc = analytics_enqueue(a, &ev);
		if (rc == -ENOBUFS)
			break;
		ck_assert_int_eq(rc, 0);
		accepted++;
	}
	ck_assert_uint_ge(accepted, 4);
	ck_assert_uint_lt(accepted, 16);
	ck_assert_uint_eq(stats(a).dropped_queue_full, 1);
	ck_assert_int_eq(analytics_start(a), 0);
	WAIT_FOR(stats(a).written == accepted);
	/* emptied, it takes events again */
	fill(&ev, "short");
	ck_assert_int_eq(analytics_enqueue(a, &ev), 0);
	WAIT_FOR(stats(a).written == accepted + 1);
	ck_assert_int_eq(analytics_stop(a), 0);
	n = read_lines(path, &lines);
	ck_assert_uint_eq(n, accepted + 1);
	for (i = 0; i < accepted; i++) {
		ck_assert_uint_eq(strlen(jstr(lines[i], "path")), 1023);
		ck_assert_uint_eq(strlen(jstr(lines[i], "referrer")), 511);
		ck_assert_uint_eq(strlen(jstr(lines[i], "user_agent")), 255);
		ck_assert_str_eq(jstr(lines[i], "client_ip"), "203.0.113.9");
	}
	ck_assert_str_eq(jstr(lines[accepted], "request_id"), "short");
	ck_assert_str_eq(jstr(lines[accepted], "path"), "/index.html");
	free_lines(lines, n);
	analytics_free(a);
}
END_TEST

#define THREADS 4
#define PER_THREAD 5000

struct producer {
	struct analytics *a;
	int id;
};

static void *produce(void *arg)
{
	struct producer *p = arg;
	struct analytics_event ev;
	char id[32];
	int i;

	for (i = 0; i < PER_THREAD; i++) {
		snprintf(id, sizeof(id), "t%d-%d", p->id, i);
		fill(&ev, id);
		ev.bytes_in = (uint64_t)i;
		/* the queue is large enough that nothing is dropped; retry
		 * anyway so that a slow CI host cannot make the test flaky */
		while (analytics_enqueue(p->a, &ev) == -ENOBUFS)
			usleep(1000);
	}
	return NULL;
}

START_TEST(test_threads_exactly_once)
{
	struct analytics_conf conf = {.queue_cap = 4096, .batch_max = 256};
	struct analytics *a = make(&conf);
	struct producer p[THREADS];
	pthread_t th[THREADS];
	static unsigned char seen[THREADS][PER_THREAD];
	struct analytics_stats st;
	json_t **v;
	size_t n, i;
	int k;

	memset(seen, 0, sizeof(seen));
	ck_assert_int_eq(analytics_start(a), 0);
	ck_assert_int_eq(analytics_start(a), -EALREADY);
	for (k = 0; k < THREADS; k++) {
		p[k].a = a;
		p[k].id = k;
		ck_assert_int_eq(pthread_create(&th[k], NULL, produce, &p[k]),
				 0);
	}
	for (k = 0; k < THREADS; k++)
		pthread_join(th[k], NULL);
	ck_assert_int_eq(analytics_stop(a), 0);
	st = stats(a);
	n = read_lines(path, &v);
	ck_assert_uint_eq(n, THREADS * PER_THREAD);
	for (i = 0; i < n; i++) {
		int t, j;

		ck_assert_int_eq(
		    sscanf(jstr(v[i], "request_id"), "t%d-%d", &t, &j), 2);
		ck_assert(t >= 0 && t < THREADS && j >= 0 && j < PER_THREAD);
		ck_assert_msg(!seen[t][j], "duplicate t%d-%d", t, j);
		seen[t][j] = 1;
		ck_assert_int_eq(
		    json_integer_value(json_object_get(v[i], "bytes_in")), j);
		ck_assert_str_eq(jstr(v[i], "host"), "app.example.com");
	}
	free_lines(v, n);
	ck_assert_uint_eq(st.enqueued, THREADS * PER_THREAD);
	ck_assert_uint_eq(st.written, THREADS * PER_THREAD);
	ck_assert_uint_eq(st.write_errors, 0);
	ck_assert_uint_eq(st.dropped_spool_full + st.dropped_shutdown, 0);
	ck_assert_uint_ge(st.batches, THREADS * PER_THREAD / 256);
	analytics_free(a);
}
END_TEST

START_TEST(test_queue_full)
{
	struct analytics_conf conf = {.queue_cap = 16, .batch_max = 4};
	struct analytics *a = make(&conf);
	struct analytics_event ev;
	struct analytics_stats st;
	int i, ok = 0, full = 0;

	fill(&ev, "q");
	/* the writer is not running yet: the queue only fills */
	for (i = 0; i < 20; i++) {
		int rc = analytics_enqueue(a, &ev);

		if (rc == 0)
			ok++;
		else if (rc == -ENOBUFS)
			full++;
	}
	ck_assert_int_eq(ok, 16);
	ck_assert_int_eq(full, 4);
	st = stats(a);
	ck_assert_uint_eq(st.enqueued, 16);
	ck_assert_uint_eq(st.dropped_queue_full, 4);
	ck_assert_uint_eq(st.written, 0);
	ck_assert_int_eq(analytics_start(a), 0);
	ck_assert_int_eq(analytics_stop(a), 0);
	ck_assert_int_eq(analytics_enqueue(a, &ev), -ESHUTDOWN);
	st = stats(a);
	ck_assert_uint_eq(st.written, 16);
	ck_assert_uint_eq(st.dropped_queue_full, 5);
	ck_assert_uint_eq(count_lines(path), 16);
	analytics_free(a);
}
END_TEST

START_TEST(test_stop_flushes)
{
	/* a long flush interval and a large batch: only stop writes */
	struct analytics_conf conf = {.flush_ms = 60000, .batch_max = 1000};
	struct analytics *a = make(&conf);
	struct analytics_event ev;
	int i;

	ck_assert_int_eq(analytics_start(a), 0);
	fill(&ev, "s");
	for (i = 0; i < 10; i++)
		ck_assert_int_eq(analytics_enqueue(a, &ev), 0);
	usleep(50000);
	ck_assert_uint_eq(stats(a).written, 0);
	ck_assert_int_eq(analytics_stop(a), 0);
	ck_assert_uint_eq(stats(a).written, 10);
	ck_assert_uint_eq(count_lines(path), 10);
	analytics_free(a);
	analytics_free(NULL);
}
END_TEST

START_TEST(test_reopen)
{
	struct analytics_conf conf = {.flush_ms = 10};
	struct analytics *a = make(&conf);
	struct analytics_event ev;
	char old[160];
	int i;

	snprintf(old, sizeof(old), "%s.1", path);
	ck_assert_int_eq(analytics_start(a), 0);
	fill(&ev, "before");
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(analytics_enqueue(a, &ev), 0);
	WAIT_FOR(stats(a).written == 5);
	ck_assert_int_eq(rename(path, old), 0);
	analytics_reopen(a);
	fill(&ev, "after");
	for (i = 0; i < 7; i++)
		ck_assert_int_eq(analytics_enqueue(a, &ev), 0);
	WAIT_FOR(stats(a).written == 12);
	ck_assert_int_eq(analytics_stop(a), 0);
	ck_assert_uint_eq(count_lines(old), 5);
	ck_assert_uint_eq(count_lines(path), 7);
	analytics_free(a);
}
END_TEST

/* A FIFO without a reader: open(O_WRONLY | O_NONBLOCK) fails with ENXIO,
 * for root too. Removing it lets the sink create a regular file. */
START_TEST(test_failure_spooled_then_written)
{
	struct analytics_conf conf = {
	    .flush_ms = 10, .retry_min_ms = 5, .retry_max_ms = 40};
	struct analytics *a;
	struct analytics_event ev;
	struct analytics_stats st;
	int i;

	ck_assert_int_eq(mkfifo(path, 0600), 0);
	a = make(&conf);
	ck_assert_int_eq(analytics_start(a), 0);
	fill(&ev, "f");
	for (i = 0; i < 10; i++)
		ck_assert_int_eq(analytics_enqueue(a, &ev), 0);
	WAIT_FOR(stats(a).write_errors >= 3);
	st = stats(a);
	ck_assert_uint_eq(st.written, 0);
	ck_assert_uint_eq(st.spooled, 10);
	ck_assert_int_eq(unlink(path), 0);
	WAIT_FOR(stats(a).written == 10);
	ck_assert_uint_eq(stats(a).spooled, 0);
	ck_assert_int_eq(analytics_stop(a), 0);
	ck_assert_uint_eq(count_lines(path), 10);
	analytics_free(a);
}
END_TEST

/* /dev/full: the open works, every write fails with ENOSPC. */
START_TEST(test_failure_enospc)
{
	struct analytics_conf conf = {
	    .flush_ms = 10, .retry_min_ms = 5, .retry_max_ms = 40};
	struct analytics *a;
	struct analytics_event ev;
	int i;

	ck_assert_int_eq(symlink("/dev/full", path), 0);
	a = make(&conf);
	ck_assert_int_eq(analytics_start(a), 0);
	fill(&ev, "e");
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(analytics_enqueue(a, &ev), 0);
	WAIT_FOR(stats(a).write_errors >= 2);
	ck_assert_uint_eq(stats(a).written, 0);
	ck_assert_int_eq(unlink(path), 0);
	WAIT_FOR(stats(a).written == 5);
	ck_assert_int_eq(analytics_stop(a), 0);
	ck_assert_uint_eq(count_lines(path), 5);
	analytics_free(a);
}
END_TEST

START_TEST(test_spool_cap)
{
	struct analytics_conf conf = {.flush_ms = 10,
				      .batch_max = 4,
				      .spool_cap = 8,
				      .retry_min_ms = 5,
				      .retry_max_ms = 40};
	struct analytics *a;
	struct analytics_event ev;
	struct analytics_stats st;
	int i;

	ck_assert_int_eq(mkfifo(path, 0600), 0);
	a = make(&conf);
	ck_assert_int_eq(analytics_start(a), 0);
	fill(&ev, "c");
	for (i = 0; i < 20; i++)
		ck_assert_int_eq(analytics_enqueue(a, &ev), 0);
	WAIT_FOR(stats(a).dropped_spool_full == 12);
	st = stats(a);
	ck_assert_uint_eq(st.written, 0);
	ck_assert_uint_eq(st.spooled, 8);
	ck_assert_int_eq(unlink(path), 0);
	WAIT_FOR(stats(a).written == 8);
	ck_assert_int_eq(analytics_stop(a), 0);
	st = stats(a);
	ck_assert_uint_eq(st.enqueued, 20);
	ck_assert_uint_eq(st.written + st.dropped_spool_full, 20);
	ck_assert_uint_eq(count_lines(path), 8);
	analytics_free(a);
}
END_TEST

/* Fewer than a batch arriving while the sink fails and the spool is full
 * are dropped after the next failed retry, not kept waiting from retry to
 * retry (which made the counts depend on when the lane woke). */
START_TEST(test_spool_full_few)
{
	struct analytics_conf conf = {.flush_ms = 10,
				      .batch_max = 4,
				      .spool_cap = 8,
				      .retry_min_ms = 5,
				      .retry_max_ms = 40};
	struct analytics *a;
	struct analytics_event ev;
	int i;

	ck_assert_int_eq(mkfifo(path, 0600), 0);
	a = make(&conf);
	ck_assert_int_eq(analytics_start(a), 0);
	fill(&ev, "w");
	for (i = 0; i < 8; i++)
		ck_assert_int_eq(analytics_enqueue(a, &ev), 0);
	WAIT_FOR(stats(a).spooled == 8 && stats(a).write_errors >= 1);
	for (i = 0; i < 2; i++)
		ck_assert_int_eq(analytics_enqueue(a, &ev), 0);
	WAIT_FOR(stats(a).dropped_spool_full == 2);
	ck_assert_uint_eq(stats(a).spooled, 8);
	ck_assert_int_eq(unlink(path), 0);
	WAIT_FOR(stats(a).written == 8);
	ck_assert_int_eq(analytics_stop(a), 0);
	ck_assert_uint_eq(stats(a).dropped_spool_full, 2);
	ck_assert_uint_eq(count_lines(path), 8);
	analytics_free(a);
}
END_TEST

START_TEST(test_stop_gives_up)
{
	struct analytics_conf conf = {
	    .flush_ms = 10, .retry_min_ms = 5, .retry_max_ms = 50};
	struct analytics *a;
	struct analytics_event ev;
	struct analytics_stats st;
	int i;

	ck_assert_int_eq(mkfifo(path, 0600), 0);
	a = make(&conf);
	ck_assert_int_eq(analytics_start(a), 0);
	fill(&ev, "g");
	for (i = 0; i < 6; i++)
		ck_assert_int_eq(analytics_enqueue(a, &ev), 0);
	ck_assert_int_eq(analytics_stop(a), 0);
	st = stats(a);
	ck_assert_uint_eq(st.written, 0);
	ck_assert_uint_eq(st.dropped_shutdown, 6);
	ck_assert_uint_eq(st.spooled, 0);
	analytics_free(a);
}
END_TEST

/* A short write cuts a line: the rest is written on the next call, never
 * the line twice. A pipe of known capacity makes the cut. */
START_TEST(test_short_write_completed)
{
	struct analytics_sink sk;
	struct analytics_event ev[4];
	char buf[65536 * 4];
	int rfd;
	size_t done, total = 0;
	ssize_t r;
	int i, rc;
	json_t **v;
	size_t n;

	ck_assert_int_eq(mkfifo(path, 0600), 0);
	rfd = open(path, O_RDONLY | O_NONBLOCK);
	ck_assert_int_ge(rfd, 0);
	ck_assert_int_eq(analytics_file_sink(path, &sk), 0);
	for (i = 0; i < 4; i++) {
		char big[1100];

		fill(&ev[i], i % 2 ? "odd" : "even");
		memset(big, 'a' + i, sizeof(big));
		analytics_event_set(&ev[i], ANALYTICS_F_PATH, big, sizeof(big));
	}
	/* fill the pipe until a batch is cut */
	ck_assert_int_ge(fcntl(rfd, F_SETPIPE_SZ, 4096), 4096);
	rc = sk.ops->write_batch(sk.ctx, ev, 4, &done);
	ck_assert_int_eq(rc, -EAGAIN);
	ck_assert_uint_lt(done, 4);
	/* drain and retry what is left, until everything is through */
	while ((r = read(rfd, buf + total, sizeof(buf) - total)) > 0)
		total += (size_t)r;
	while (done < 4) {
		size_t d2 = 0;

		rc = sk.ops->write_batch(sk.ctx, ev + done, 4 - done, &d2);
		done += d2;
		while ((r = read(rfd, buf + total, sizeof(buf) - total)) > 0)
			total += (size_t)r;
		ck_assert(rc == 0 || rc == -EAGAIN);
	}
	close(rfd);
	sk.ops->close(sk.ctx);
	buf[total] = '\0';
	/* exactly four whole lines */
	{
		char *save = NULL, *line;

		n = 0;
		v = calloc(8, sizeof(*v));
		for (line = strtok_r(buf, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save)) {
			ck_assert_uint_lt(n, 8);
			v[n] = json_loads(line, 0, NULL);
			ck_assert_ptr_nonnull(v[n]);
			n++;
		}
	}
	ck_assert_uint_eq(n, 4);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(jstr(v[i], "path")[0], 'a' + i);
	free_lines(v, n);
}
END_TEST

/* A write error cuts a line (here the file size limit), the file is then
 * rotated away: the next write opens a new file and must start it with a
 * whole line, not with the rest of the cut one. */
START_TEST(test_cut_line_not_carried_to_new_file)
{
	struct analytics_sink sk;
	struct analytics_event ev;
	struct rlimit lim, old;
	char moved[160], big[600];
	size_t done = 9;
	json_t **v;
	size_t n;

	fill(&ev, "cut");
	memset(big, 'a', sizeof(big));
	analytics_event_set(&ev, ANALYTICS_F_PATH, big, sizeof(big));
	ck_assert_int_eq(analytics_file_sink(path, &sk), 0);
	signal(SIGXFSZ, SIG_IGN);
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = 100;
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
	ck_assert_int_eq(sk.ops->write_batch(sk.ctx, &ev, 1, &done), -EFBIG);
	ck_assert_uint_eq(done, 0);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
	snprintf(moved, sizeof(moved), "%s.1", path);
	ck_assert_int_eq(rename(path, moved), 0);
	ck_assert_int_eq(sk.ops->write_batch(sk.ctx, &ev, 1, &done), 0);
	ck_assert_uint_eq(done, 1);
	sk.ops->close(sk.ctx);
	n = read_lines(path, &v); /* each line whole JSON */
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(jstr(v[0], "request_id"), "cut");
	free_lines(v, n);
}
END_TEST

/* A line cut by a write error, then a reopen (SIGHUP) that finds the same
 * file: the line is finished, not started again after its cut part. */
START_TEST(test_cut_line_finished_after_reopen_same_file)
{
	struct analytics_sink sk;
	struct analytics_event ev;
	struct rlimit lim, old;
	char big[600];
	size_t done = 9;
	json_t **v;
	size_t n;

	fill(&ev, "cut");
	memset(big, 'a', sizeof(big));
	analytics_event_set(&ev, ANALYTICS_F_PATH, big, sizeof(big));
	ck_assert_int_eq(analytics_file_sink(path, &sk), 0);
	signal(SIGXFSZ, SIG_IGN);
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = 100;
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
	ck_assert_int_eq(sk.ops->write_batch(sk.ctx, &ev, 1, &done), -EFBIG);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
	ck_assert_int_eq(sk.ops->reopen(sk.ctx), 0);
	ck_assert_int_eq(sk.ops->write_batch(sk.ctx, &ev, 1, &done), 0);
	ck_assert_uint_eq(done, 1);
	sk.ops->close(sk.ctx);
	n = read_lines(path, &v); /* each line whole JSON */
	ck_assert_uint_eq(n, 1);
	free_lines(v, n);
}
END_TEST

/* ---- a sink that fails on demand and remembers what it got ---------- */

#define FAKE_MAX 100000

struct fake {
	_Atomic bool fail;
	_Atomic unsigned calls;
	_Atomic size_t n; /* events stored */
	unsigned ids[FAKE_MAX];
};

static int fake_write(void *ctx, const struct analytics_event *ev, size_t n,
		      size_t *done)
{
	struct fake *f = ctx;
	size_t i, k = atomic_load(&f->n);

	atomic_fetch_add(&f->calls, 1);
	*done = 0;
	if (atomic_load(&f->fail))
		return -ECONNREFUSED;
	for (i = 0; i < n; i++) {
		ck_assert_uint_lt(k, FAKE_MAX);
		ck_assert_int_eq(sscanf(ev[i].request_id, "n%u", &f->ids[k]),
				 1);
		k++;
	}
	atomic_store(&f->n, k);
	*done = n;
	return 0;
}

static void fake_close(void *ctx)
{
	(void)ctx; /* the test's */
}

static const struct analytics_sink_ops fake_ops = {
    .name = "fake", .write_batch = fake_write, .close = fake_close};

static struct fake *fake_new(bool fail)
{
	struct fake *f = calloc(1, sizeof(*f));

	ck_assert_ptr_nonnull(f);
	atomic_store(&f->fail, fail);
	return f;
}

static struct analytics_sink fake_sink(struct fake *f)
{
	struct analytics_sink sk = {&fake_ops, f};

	return sk;
}

/* Events numbered first..first+n-1 ("n%u"), in order. */
static void enqueue_n(struct analytics *a, unsigned first, unsigned n)
{
	struct analytics_event ev;
	char id[32];
	unsigned i;

	for (i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "n%u", first + i);
		fill(&ev, id);
		ck_assert_int_eq(analytics_enqueue(a, &ev), 0);
	}
}

/* The fake got exactly first..first+n-1, in order. */
static void fake_got(const struct fake *f, unsigned first, unsigned n)
{
	unsigned i;

	ck_assert_uint_eq(atomic_load(&f->n), n);
	for (i = 0; i < n; i++)
		ck_assert_msg(f->ids[i] == first + i,
			      "event %u is n%u, want n%u", i, f->ids[i],
			      first + i);
}

static struct analytics_spool *disk_open(uint64_t max)
{
	struct analytics_spool *d = NULL;
	struct errbuf err = {""};
	char p[160];

	snprintf(p, sizeof(p), "%s/spool", tmpdir);
	ck_assert_msg(analytics_spool_open(p, max, NULL, &d, &err) == 0, "%s",
		      err.msg);
	return d;
}

static uint64_t sink_stats_disk_events_of(const struct analytics_spool *d)
{
	struct analytics_spool_stats st;

	analytics_spool_stats(d, &st);
	return st.events;
}

static struct analytics_sink_stats sink_stats(struct analytics *a, unsigned i)
{
	struct analytics_sink_stats st;

	ck_assert_int_eq(analytics_sink_stats(a, i, &st), 0);
	return st;
}

/* Two sinks: the file gets every event at once while the other fails;
 * the other gets them all, in order, once it works. */
START_TEST(test_two_sinks_apart)
{
	struct analytics_conf conf = {
	    .flush_ms = 10, .retry_min_ms = 5, .retry_max_ms = 40};
	struct fake *f = fake_new(true);
	struct analytics *a = NULL;
	struct analytics_sink sk = fake_sink(f);
	struct analytics_stats st;

	ck_assert_int_eq(analytics_file_sink(path, &conf.sink), 0);
	ck_assert_int_eq(analytics_new(&conf, &a), 0);
	ck_assert_int_eq(analytics_add_sink(a, &sk, NULL), 0);
	ck_assert_uint_eq(analytics_nsinks(a), 2);
	ck_assert_int_eq(analytics_start(a), 0);
	ck_assert_int_eq(analytics_add_sink(a, &sk, NULL), -EBUSY);
	enqueue_n(a, 0, 300);
	WAIT_FOR(sink_stats(a, 0).written == 300);
	WAIT_FOR(sink_stats(a, 1).write_errors >= 2);
	ck_assert_uint_eq(count_lines(path), 300);
	ck_assert_str_eq(sink_stats(a, 1).name, "fake");
	ck_assert(!sink_stats(a, 1).up);
	ck_assert(sink_stats(a, 0).up);
	ck_assert_uint_eq(sink_stats(a, 1).spooled, 300);
	atomic_store(&f->fail, false);
	/* up is set once the batch is counted as written */
	WAIT_FOR(sink_stats(a, 1).written == 300 && sink_stats(a, 1).up);
	ck_assert_int_eq(analytics_stop(a), 0);
	fake_got(f, 0, 300);
	st = stats(a);
	ck_assert_uint_eq(st.enqueued, 300);
	ck_assert_uint_eq(st.written, 600); /* summed over the sinks */
	ck_assert_uint_eq(count_lines(path), 300);
	analytics_free(a);
	free(f);
}
END_TEST

/* A failing sink with a small memory spool: the oldest batches go to
 * disk, and once the sink works everything arrives exactly once and in
 * order (disk first, then memory). */
START_TEST(test_disk_spill_replay_order)
{
	struct analytics_conf conf = {.flush_ms = 10,
				      .batch_max = 4,
				      .spool_cap = 8,
				      .retry_min_ms = 5,
				      .retry_max_ms = 20};
	struct fake *f = fake_new(true);
	struct analytics *a = NULL;
	struct analytics_sink_stats ss;

	conf.sink = fake_sink(f);
	conf.disk = disk_open(1 << 20);
	ck_assert_int_eq(analytics_new(&conf, &a), 0);
	ck_assert_int_eq(analytics_start(a), 0);
	enqueue_n(a, 0, 100);
	/* the memory gauge is set when the lane has taken the queue */
	WAIT_FOR(sink_stats(a, 0).spilled >= 92 &&
		 sink_stats(a, 0).spooled == 8);
	ss = sink_stats(a, 0);
	ck_assert(ss.disk);
	ck_assert_uint_eq(ss.spilled, 92);
	ck_assert_uint_eq(ss.spooled, 8);
	ck_assert_uint_eq(ss.disk_events, 92);
	ck_assert_uint_eq(ss.disk_files, 23);
	ck_assert_uint_eq(ss.written + ss.dropped_spool_full, 0);
	/* more while the sink is still down, then it comes back */
	enqueue_n(a, 100, 20);
	WAIT_FOR(sink_stats(a, 0).spilled >= 112);
	atomic_store(&f->fail, false);
	WAIT_FOR(sink_stats(a, 0).written == 120);
	/* and new events after the backlog */
	enqueue_n(a, 120, 30);
	WAIT_FOR(sink_stats(a, 0).written == 150);
	ck_assert_int_eq(analytics_stop(a), 0);
	fake_got(f, 0, 150);
	ss = sink_stats(a, 0);
	/* all that went to disk came back (new events too, when memory
	 * filled while the backlog was replayed) */
	ck_assert_uint_ge(ss.spilled, 112);
	ck_assert_uint_eq(ss.replayed, ss.spilled);
	ck_assert_uint_eq(ss.disk_files + ss.disk_events + ss.disk_bytes, 0);
	ck_assert_uint_eq(ss.dropped_spool_full + ss.dropped_shutdown, 0);
	analytics_free(a);
	free(f);
}
END_TEST

/* The disk spool's cap reached: the newest events are dropped and
 * counted, what was kept arrives in order, and the sums hold. */
START_TEST(test_disk_cap_drops_counted)
{
	struct analytics_conf conf = {.flush_ms = 10,
				      .batch_max = 4,
				      .spool_cap = 4,
				      .retry_min_ms = 5,
				      .retry_max_ms = 20};
	struct fake *f = fake_new(true);
	struct analytics *a = NULL;
	struct analytics_sink_stats ss;
	struct analytics_event ev[4];
	unsigned char *buf;
	size_t one, kept;
	unsigned i;

	/* room for five files of four events */
	for (i = 0; i < 4; i++)
		fill(&ev[i], "n1000");
	ck_assert_int_eq(analytics_spool_encode(ev, 4, &buf, &one), 0);
	free(buf);
	conf.sink = fake_sink(f);
	conf.disk = disk_open(5 * one + one / 2);
	ck_assert_int_eq(analytics_new(&conf, &a), 0);
	ck_assert_int_eq(analytics_start(a), 0);
	enqueue_n(a, 0, 200);
	WAIT_FOR(sink_stats(a, 0).spooled + sink_stats(a, 0).disk_events +
		     sink_stats(a, 0).dropped_spool_full ==
		 200);
	ss = sink_stats(a, 0);
	ck_assert_uint_eq(ss.disk_files, 5);
	ck_assert_uint_eq(ss.disk_events, 20);
	ck_assert_uint_eq(ss.spooled, 4);
	ck_assert_uint_eq(ss.dropped_spool_full, 176);
	ck_assert_uint_le(ss.disk_bytes, ss.disk_max_bytes);
	kept = ss.disk_events + ss.spooled;
	atomic_store(&f->fail, false);
	WAIT_FOR(sink_stats(a, 0).written == kept);
	ck_assert_int_eq(analytics_stop(a), 0);
	fake_got(f, 0, (unsigned)kept);
	ss = sink_stats(a, 0);
	ck_assert_uint_eq(ss.written + ss.dropped_spool_full, 200);
	analytics_free(a);
	free(f);
}
END_TEST

/* Stopping while the sink fails puts memory on disk; the next writer on
 * that spool replays it first, before its own events. */
START_TEST(test_stop_spills_replayed_at_start)
{
	struct analytics_conf conf = {.flush_ms = 10,
				      .batch_max = 4,
				      .spool_cap = 16,
				      .retry_min_ms = 5,
				      .retry_max_ms = 5000};
	struct fake *f = fake_new(true);
	struct analytics *a = NULL;
	struct analytics_sink_stats ss;
	struct timespec t0, t1;

	conf.sink = fake_sink(f);
	conf.disk = disk_open(1 << 20);
	ck_assert_int_eq(analytics_new(&conf, &a), 0);
	ck_assert_int_eq(analytics_start(a), 0);
	enqueue_n(a, 0, 10);
	WAIT_FOR(sink_stats(a, 0).write_errors >= 1);
	/* no waiting out retry_max_ms: the disk takes it at once */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(analytics_stop(a), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 3);
	ss = sink_stats(a, 0);
	ck_assert_uint_eq(ss.spilled, 10);
	ck_assert_uint_eq(ss.dropped_shutdown, 0);
	ck_assert_uint_eq(ss.disk_events, 10);
	analytics_free(a);

	/* the next start: the sink works */
	atomic_store(&f->fail, false);
	memset(&conf.sink, 0, sizeof(conf.sink));
	conf.sink = fake_sink(f);
	conf.disk = disk_open(1 << 20);
	ck_assert_uint_eq(sink_stats_disk_events_of(conf.disk), 10);
	ck_assert_int_eq(analytics_new(&conf, &a), 0);
	enqueue_n(a, 10, 5);
	ck_assert_int_eq(analytics_start(a), 0);
	WAIT_FOR(sink_stats(a, 0).written == 15);
	ck_assert_int_eq(analytics_stop(a), 0);
	fake_got(f, 0, 15);
	ck_assert_uint_eq(sink_stats(a, 0).replayed, 10);
	analytics_free(a);
	free(f);
}
END_TEST

/* Hostile producers against a small queue and two file sinks: every
 * string field of random bytes (empty, short, filled to its size) and
 * random numbers, outcome and kind included. Each event is offered once:
 * enqueued + dropped_queue_full == offered, each file holds exactly the
 * enqueued events, each line valid JSON and byte for byte the line the
 * event itself formats to (nothing duplicated, lost or corrupted). */
#define FZ_THREADS 4
#define FZ_PER_THREAD 3000

struct fz_producer {
	struct analytics *a;
	unsigned id, seed;
	struct analytics_event *ev; /* [FZ_PER_THREAD] */
	unsigned char *ok;	    /* [FZ_PER_THREAD]: enqueued */
	unsigned nok, nfull;
};

static void fz_event(struct analytics_event *ev, unsigned *seed, uint64_t id)
{
	unsigned f;

	memset(ev, 0, sizeof(*ev));
	/* numbers below 2^63: jansson (like most readers) refuses more */
	ev->time_ns = ((uint64_t)rand_r(seed) << 32) ^ (uint64_t)rand_r(seed);
	ev->duration_ns =
	    ((uint64_t)rand_r(seed) << 32) ^ (uint64_t)rand_r(seed);
	ev->upstream_ns = (uint64_t)rand_r(seed);
	ev->bytes_in = id;
	ev->bytes_out = INT64_MAX - (uint64_t)rand_r(seed);
	ev->truncated = (uint32_t)rand_r(seed) ^ ((uint32_t)rand_r(seed) << 16);
	ev->status = (uint16_t)rand_r(seed);
	ev->kind = (uint8_t)rand_r(seed);
	ev->outcome = (uint8_t)rand_r(seed);
	for (f = 0; f < ANALYTICS_F_MAX; f++) {
		char *dst = (char *)analytics_event_get(ev, f);
		size_t size = analytics_field_size(f), len, i;

		switch (rand_r(seed) % 4) {
		case 0:
			len = 0;
			break;
		case 1:
			len = size - 1; /* the longest a field holds */
			break;
		default:
			len = (size_t)rand_r(seed) % size;
		}
		for (i = 0; i < len; i++)
			dst[i] = (char)(rand_r(seed) % 255 + 1);
		dst[len] = '\0';
	}
}

static void *fz_produce(void *arg)
{
	struct fz_producer *p = arg;
	unsigned i;

	for (i = 0; i < FZ_PER_THREAD; i++) {
		int rc;

		fz_event(&p->ev[i], &p->seed, ((uint64_t)p->id << 32) | i);
		rc = analytics_enqueue(p->a, &p->ev[i]);
		ck_assert(rc == 0 || rc == -ENOBUFS);
		p->ok[i] = rc == 0;
		if (rc == 0)
			p->nok++;
		else
			p->nfull++;
		if (rand_r(&p->seed) % 64 == 0)
			usleep(200);
	}
	return NULL;
}

static void fz_check_file(const char *file, struct fz_producer *p,
			  uint64_t enqueued)
{
	static unsigned char seen[FZ_THREADS][FZ_PER_THREAD];
	FILE *fp = fopen(file, "r");
	char *line = NULL;
	size_t cap = 0, n = 0;
	ssize_t len;

	ck_assert_ptr_nonnull(fp);
	memset(seen, 0, sizeof(seen));
	while ((len = getline(&line, &cap, fp)) >= 0) {
		json_error_t err;
		json_t *j = json_loads(line, JSON_REJECT_DUPLICATES, &err);
		uint64_t id;
		unsigned t, k;
		char *want;
		size_t wlen;

		ck_assert_msg(j != NULL, "%s line %zu: %s", file, n, err.text);
		id = (uint64_t)json_integer_value(
		    json_object_get(j, "bytes_in"));
		json_decref(j);
		t = (unsigned)(id >> 32);
		k = (unsigned)(id & 0xffffffffu);
		ck_assert(t < FZ_THREADS && k < FZ_PER_THREAD);
		ck_assert_msg(p[t].ok[k], "t%u-%u written but dropped", t, k);
		ck_assert_msg(!seen[t][k], "duplicate t%u-%u", t, k);
		seen[t][k] = 1;
		ck_assert_int_eq(
		    analytics_event_json(&p[t].ev[k], &want, &wlen), 0);
		ck_assert_msg((size_t)len == wlen &&
				  memcmp(line, want, wlen) == 0,
			      "t%u-%u corrupted:\n%s%s", t, k, line, want);
		free(want);
		n++;
	}
	free(line);
	fclose(fp);
	ck_assert_uint_eq(n, enqueued);
}

START_TEST(test_fuzz_small_queue_two_files)
{
	static const unsigned caps[] = {16, 23, 64};
	struct analytics_conf conf = {.queue_cap = caps[_i],
				      .batch_max = 4 + 3 * (unsigned)_i,
				      .flush_ms = 5};
	struct analytics *a = NULL;
	struct analytics_sink sk;
	struct fz_producer p[FZ_THREADS];
	pthread_t th[FZ_THREADS];
	struct analytics_stats st;
	char path2[160];
	uint64_t ok = 0, full = 0;
	unsigned k;

	snprintf(path2, sizeof(path2), "%s/second.jsonl", tmpdir);
	ck_assert_int_eq(analytics_file_sink(path, &conf.sink), 0);
	ck_assert_int_eq(analytics_new(&conf, &a), 0);
	ck_assert_int_eq(analytics_file_sink(path2, &sk), 0);
	ck_assert_int_eq(analytics_add_sink(a, &sk, NULL), 0);
	ck_assert_int_eq(analytics_start(a), 0);
	for (k = 0; k < FZ_THREADS; k++) {
		p[k] = (struct fz_producer){
		    .a = a, .id = k, .seed = 1234u * (k + 1) + (unsigned)_i};
		p[k].ev = calloc(FZ_PER_THREAD, sizeof(*p[k].ev));
		p[k].ok = calloc(FZ_PER_THREAD, 1);
		ck_assert(p[k].ev && p[k].ok);
		ck_assert_int_eq(
		    pthread_create(&th[k], NULL, fz_produce, &p[k]), 0);
	}
	for (k = 0; k < FZ_THREADS; k++) {
		pthread_join(th[k], NULL);
		ok += p[k].nok;
		full += p[k].nfull;
	}
	ck_assert_int_eq(analytics_stop(a), 0);
	st = stats(a);
	ck_assert_uint_eq(ok + full, FZ_THREADS * FZ_PER_THREAD);
	ck_assert_uint_eq(st.enqueued, ok);
	ck_assert_uint_eq(st.dropped_queue_full, full);
	ck_assert_uint_eq(st.dropped_spool_full + st.dropped_shutdown, 0);
	ck_assert_uint_eq(sink_stats(a, 0).written, ok);
	ck_assert_uint_eq(sink_stats(a, 1).written, ok);
	ck_assert_uint_gt(ok, 0);
	fz_check_file(path, p, ok);
	fz_check_file(path2, p, ok);
	for (k = 0; k < FZ_THREADS; k++) {
		free(p[k].ev);
		free(p[k].ok);
	}
	analytics_free(a);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("analytics");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_event_fields);
	tcase_add_test(tc, test_event_json_strange);
	tcase_add_test(tc, test_event_json_no_nul);
	tcase_add_test(tc, test_queue_bytes);
	tcase_add_test(tc, test_event_combined);
	tcase_add_test(tc, test_threads_exactly_once);
	tcase_add_test(tc, test_queue_full);
	tcase_add_test(tc, test_stop_flushes);
	tcase_add_test(tc, test_reopen);
	tcase_add_test(tc, test_failure_spooled_then_written);
	tcase_add_test(tc, test_failure_enospc);
	tcase_add_test(tc, test_spool_cap);
	tcase_add_test(tc, test_spool_full_few);
	tcase_add_test(tc, test_stop_gives_up);
	tcase_add_test(tc, test_short_write_completed);
	tcase_add_test(tc, test_cut_line_not_carried_to_new_file);
	tcase_add_test(tc, test_cut_line_finished_after_reopen_same_file);
	tcase_add_test(tc, test_two_sinks_apart);
	tcase_add_test(tc, test_disk_spill_replay_order);
	tcase_add_test(tc, test_disk_cap_drops_counted);
	tcase_add_test(tc, test_stop_spills_replayed_at_start);
	tcase_add_loop_test(tc, test_fuzz_small_queue_two_files, 0, 3);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
