/* SPDX-License-Identifier: BSD-2-Clause */
/* test_metrics.c - the registry, Prometheus text and the XDP counters. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "edge_maps.h"
#include "metrics.h"
#include "unit.h"

/* The rendered text, NUL-terminated; free() it. */
static char *render(struct metrics *m)
{
	struct evbuffer *b = evbuffer_new();
	size_t n;
	char *s;

	ck_assert_ptr_nonnull(b);
	ck_assert_int_eq(metrics_render(m, b), 0);
	n = evbuffer_get_length(b);
	s = malloc(n + 1);
	ck_assert_ptr_nonnull(s);
	evbuffer_remove(b, s, n);
	s[n] = '\0';
	evbuffer_free(b);
	return s;
}

START_TEST(test_render_exact)
{
	struct metrics *m = metrics_new();
	static const uint64_t b[] = {5000000, 100000000, 1000000000};
	struct metrics_counter *ok, *bad, *again;
	struct metrics_gauge *g;
	struct metrics_histogram *h;
	char *s;

	ok = metrics_counter_new(m, "edge_requests_total", "Requests.",
				 (const char *[]){"outcome", "ok", NULL});
	bad = metrics_counter_new(
	    m, "edge_requests_total", NULL,
	    (const char *[]){"outcome", "bad_request", NULL});
	again = metrics_counter_new(m, "edge_requests_total", NULL,
				    (const char *[]){"outcome", "ok", NULL});
	ck_assert_ptr_eq(ok, again);
	g = metrics_gauge_new(m, "edge_connections", "Open connections.", NULL);
	h = metrics_histogram_new(m, "edge_request_duration_seconds",
				  "Request duration.", NULL, b, 3, 1000000000);
	ck_assert_ptr_nonnull(ok);
	ck_assert_ptr_nonnull(bad);
	ck_assert_ptr_nonnull(g);
	ck_assert_ptr_nonnull(h);
	metrics_counter_add(ok, 3);
	metrics_counter_add(bad, 1);
	metrics_gauge_set(g, 10);
	metrics_gauge_add(g, -12);
	metrics_histogram_observe(h, 1000000);	  /* 1 ms */
	metrics_histogram_observe(h, 5000000);	  /* 5 ms: le is inclusive */
	metrics_histogram_observe(h, 250000000);  /* 250 ms */
	metrics_histogram_observe(h, 3000000000); /* 3 s: +Inf */
	s = render(m);
	ck_assert_str_eq(s, "# HELP edge_requests_total Requests.\n"
			    "# TYPE edge_requests_total counter\n"
			    "edge_requests_total{outcome=\"ok\"} 3\n"
			    "edge_requests_total{outcome=\"bad_request\"} 1\n"
			    "# HELP edge_connections Open connections.\n"
			    "# TYPE edge_connections gauge\n"
			    "edge_connections -2\n"
			    "# HELP edge_request_duration_seconds Request "
			    "duration.\n"
			    "# TYPE edge_request_duration_seconds histogram\n"
			    "edge_request_duration_seconds_bucket{le=\"0.005\"}"
			    " 2\n"
			    "edge_request_duration_seconds_bucket{le=\"0.1\"} "
			    "2\n"
			    "edge_request_duration_seconds_bucket{le=\"1\"} 3\n"
			    "edge_request_duration_seconds_bucket{le=\"+Inf\"} "
			    "4\n"
			    "edge_request_duration_seconds_sum 3.256\n"
			    "edge_request_duration_seconds_count 4\n");
	free(s);
	ck_assert_uint_eq(metrics_counter_get(ok), 3);
	ck_assert_int_eq(metrics_gauge_get(g), -2);
	metrics_free(m);
	metrics_free(NULL);
}
END_TEST

START_TEST(test_labels_and_names)
{
	struct metrics *m = metrics_new();
	struct metrics_histogram *h;
	static const uint64_t b[] = {1, 10};
	static const uint64_t unsorted[] = {10, 1};
	char *s;

	ck_assert_ptr_nonnull(metrics_counter_new(
	    m, "edge_x_total", "Help with \\ and\nnewline.",
	    (const char *[]){"host", "a\"b\\c\nd", "k2", "v", NULL}));
	h = metrics_histogram_new(m, "edge_sizes", "Sizes.",
				  (const char *[]){"route", "r\"1", NULL}, b, 2,
				  1);
	ck_assert_ptr_nonnull(h);
	metrics_histogram_observe(h, 0);
	metrics_histogram_observe(h, 10);
	metrics_histogram_observe(h, 11);
	s = render(m);
	ck_assert_str_eq(s,
			 "# HELP edge_x_total Help with \\\\ and\\nnewline.\n"
			 "# TYPE edge_x_total counter\n"
			 "edge_x_total{host=\"a\\\"b\\\\c\\nd\",k2=\"v\"} 0\n"
			 "# HELP edge_sizes Sizes.\n"
			 "# TYPE edge_sizes histogram\n"
			 "edge_sizes_bucket{route=\"r\\\"1\",le=\"1\"} 1\n"
			 "edge_sizes_bucket{route=\"r\\\"1\",le=\"10\"} 2\n"
			 "edge_sizes_bucket{route=\"r\\\"1\",le=\"+Inf\"} 3\n"
			 "edge_sizes_sum{route=\"r\\\"1\"} 21\n"
			 "edge_sizes_count{route=\"r\\\"1\"} 3\n");
	free(s);
	/* refused: bad names, type clash, le label, bad buckets or unit */
	ck_assert_ptr_null(metrics_counter_new(m, "requests_total", "", NULL));
	ck_assert_ptr_null(metrics_counter_new(m, "edge_a-b", "", NULL));
	ck_assert_ptr_null(metrics_gauge_new(m, "edge_x_total", "", NULL));
	ck_assert_ptr_null(metrics_counter_new(
	    m, "edge_y", "", (const char *[]){"bad-label", "v", NULL}));
	ck_assert_ptr_null(metrics_counter_new(
	    m, "edge_y", "", (const char *[]){"__reserved", "v", NULL}));
	ck_assert_ptr_null(metrics_histogram_new(
	    m, "edge_h", "", (const char *[]){"le", "1", NULL}, b, 2, 1));
	ck_assert_ptr_null(
	    metrics_histogram_new(m, "edge_h", "", NULL, unsorted, 2, 1));
	ck_assert_ptr_null(
	    metrics_histogram_new(m, "edge_h", "", NULL, b, 2, 3));
	ck_assert_ptr_null(metrics_histogram_new(
	    m, "edge_sizes", "", (const char *[]){"route", "r\"1", NULL},
	    unsorted + 1, 1, 1));
	ck_assert_ptr_eq(metrics_histogram_new(
			     m, "edge_sizes", "",
			     (const char *[]){"route", "r\"1", NULL}, b, 2, 1),
			 h);
	metrics_free(m);
}
END_TEST

START_TEST(test_bucket_math)
{
	struct metrics *m = metrics_new();
	struct metrics_histogram *h;
	char *s;
	uint64_t v;

	h = metrics_histogram_new(m, "edge_d_seconds", "D.", NULL,
				  metrics_duration_bounds_ns,
				  metrics_duration_nbounds, 1000000000);
	ck_assert_ptr_nonnull(h);
	/* one value at each bound and one just above it */
	for (v = 0; v < metrics_duration_nbounds; v++) {
		metrics_histogram_observe(h, metrics_duration_bounds_ns[v]);
		metrics_histogram_observe(h, metrics_duration_bounds_ns[v] + 1);
	}
	s = render(m);
	/* le=0.001 holds the 1 ms value; each later bucket two more */
	ck_assert_ptr_nonnull(strstr(s, "{le=\"0.001\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(s, "{le=\"0.0025\"} 3\n"));
	ck_assert_ptr_nonnull(strstr(s, "{le=\"1\"} 19\n"));
	ck_assert_ptr_nonnull(strstr(s, "{le=\"10\"} 25\n"));
	ck_assert_ptr_nonnull(strstr(s, "{le=\"+Inf\"} 26\n"));
	ck_assert_ptr_nonnull(strstr(s, "edge_d_seconds_count 26\n"));
	/* sum: twice the bounds plus 13 ns */
	ck_assert_ptr_nonnull(strstr(s, "edge_d_seconds_sum 38.887000013\n"));
	free(s);
	metrics_free(m);
}
END_TEST

#define THREADS 8
#define PER_THREAD 100000

struct worker {
	struct metrics_counter *c;
	struct metrics_gauge *g;
	struct metrics_histogram *h;
};

static void *bump(void *arg)
{
	struct worker *w = arg;
	int i;

	for (i = 0; i < PER_THREAD; i++) {
		metrics_counter_add(w->c, 1);
		metrics_gauge_add(w->g, i % 2 ? 1 : -1);
		metrics_histogram_observe(w->h, (uint64_t)i % 3);
	}
	return NULL;
}

START_TEST(test_concurrent)
{
	struct metrics *m = metrics_new();
	static const uint64_t b[] = {0, 1};
	struct worker w;
	pthread_t th[THREADS];
	char *s, want[128];
	int i;

	w.c = metrics_counter_new(m, "edge_n_total", "N.", NULL);
	w.g = metrics_gauge_new(m, "edge_g", "G.", NULL);
	w.h = metrics_histogram_new(m, "edge_h", "H.", NULL, b, 2, 1);
	for (i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, bump, &w), 0);
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	ck_assert_uint_eq(metrics_counter_get(w.c),
			  (uint64_t)THREADS * PER_THREAD);
	ck_assert_int_eq(metrics_gauge_get(w.g), 0);
	s = render(m);
	snprintf(want, sizeof(want), "edge_h_count %d\n", THREADS * PER_THREAD);
	ck_assert_ptr_nonnull(strstr(s, want));
	free(s);
	metrics_free(m);
}
END_TEST

START_TEST(test_xdp)
{
	uint64_t v[EDGE_CTR_MAX];
	struct evbuffer *b = evbuffer_new();
	char *s;
	size_t n, i;

	for (i = 0; i < EDGE_CTR_MAX; i++)
		v[i] = 100 + i;
	ck_assert_int_eq(metrics_render_xdp(b, v, EDGE_CTR_MAX - 1), 0);
	n = evbuffer_get_length(b);
	s = malloc(n + 1);
	evbuffer_remove(b, s, n);
	s[n] = '\0';
	ck_assert_ptr_nonnull(strstr(s, "# TYPE edge_xdp_packets_total "
					"counter\n"));
	ck_assert_ptr_nonnull(
	    strstr(s, "edge_xdp_packets_total{verdict=\"passed\"} 100\n"));
	ck_assert_ptr_nonnull(strstr(
	    s, "edge_xdp_packets_total{verdict=\"dropped_rule\"} 101\n"));
	ck_assert_ptr_nonnull(
	    strstr(s, "edge_xdp_events_total{event=\"malformed\"} 105\n"));
	ck_assert_ptr_nonnull(
	    strstr(s, "edge_xdp_events_total{event=\"ratelimit_pkt\"} 110\n"));
	/* the last counter was not passed in: 0 */
	ck_assert_ptr_nonnull(
	    strstr(s, "edge_xdp_events_total{event=\"ratelimit_quic\"} 0\n"));
	ck_assert_ptr_null(strstr(s, "verdict=\"malformed\""));
	free(s);
	evbuffer_free(b);
}
END_TEST

/* The process_* series, against what this process knows of itself. */
START_TEST(test_process)
{
	struct evbuffer *b = evbuffer_new();
	char *s, *p, want[64];
	size_t n;
	long long fds = -1, threads = -1;
	double start = 0;

	ck_assert_int_eq(metrics_render_process(b), 0);
	n = evbuffer_get_length(b);
	s = malloc(n + 1);
	evbuffer_remove(b, s, n);
	s[n] = '\0';
	ck_assert_ptr_nonnull(
	    strstr(s, "# TYPE process_cpu_seconds_total counter\n"));
	ck_assert_ptr_nonnull(
	    strstr(s, "# TYPE process_resident_memory_bytes gauge\n"));
	p = strstr(s, "\nprocess_open_fds ");
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(sscanf(p, "\nprocess_open_fds %lld", &fds), 1);
	ck_assert(fds >= 3); /* stdin, stdout, stderr at least */
	p = strstr(s, "\nprocess_threads ");
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(sscanf(p, "\nprocess_threads %lld", &threads), 1);
	ck_assert_int_ge(threads, 1);
	p = strstr(s, "\nprocess_start_time_seconds ");
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(sscanf(p, "\nprocess_start_time_seconds %lf", &start),
			 1);
	ck_assert(start <= (double)time(NULL) + 1 &&
		  start > (double)time(NULL) - 3600);
	snprintf(want, sizeof(want), "\nprocess_max_fds ");
	ck_assert_ptr_nonnull(strstr(s, want));
	free(s);
	evbuffer_free(b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_render_exact);
	tcase_add_test(tc, test_labels_and_names);
	tcase_add_test(tc, test_bucket_math);
	tcase_add_test(tc, test_concurrent);
	tcase_add_test(tc, test_xdp);
	tcase_add_test(tc, test_process);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
