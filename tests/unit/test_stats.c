/* SPDX-License-Identifier: BSD-2-Clause */
/* test_stats.c - the daemon's registry (userspace/stats.c):
 * edge_assertions_failed_total mirrors the process-wide count of failed
 * EDGE_ASSERTs at every scrape; the rate limit's table and each worker's
 * accepted connections are read at every scrape. */
#include <check.h>
#include <errno.h>
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

#include "edge_assert.h"
#include "stats.h"
#include "unit.h"
#include "worker.h"

/* The /metrics text (the caller frees it). */
static char *scrape(struct stats *s)
{
	struct evbuffer *out = evbuffer_new();
	size_t len;
	char *text;

	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(stats_render(s, out), 0);
	len = evbuffer_get_length(out);
	text = malloc(len + 1);
	ck_assert_ptr_nonnull(text);
	evbuffer_remove(out, text, len);
	text[len] = '\0';
	evbuffer_free(out);
	return text;
}

static void failing(int v)
{
	EDGE_ASSERT(v == 0);
}

START_TEST(test_assertions_metric)
{
	struct worker_shared sh;
	struct stats *s;
	char *text;
	int i;

	memset(&sh, 0, sizeof(sh));
	pthread_mutex_init(&sh.set_lock, NULL);
	route_holder_init(&sh.routes, NULL);
	ck_assert_int_eq(stats_new(&sh, NULL, &s), 0);
	text = scrape(s);
	ck_assert_ptr_nonnull(
	    strstr(text, "# TYPE edge_assertions_failed_total counter\n"
			 "edge_assertions_failed_total 0\n"));
	free(text);
	edge_assert_set_abort(false);
	log_init("test_stats", false);
	for (i = 0; i < 3; i++)
		failing(1);
	text = scrape(s);
	ck_assert_ptr_nonnull(
	    strstr(text, "\nedge_assertions_failed_total 3\n"));
	free(text);
	stats_free(s);
	pthread_mutex_destroy(&sh.set_lock);
}
END_TEST

START_TEST(test_ratelimit_metrics)
{
	static struct worker_shared sh; /* large: its accepted counters */
	struct config cfg;
	struct admit_bucket b;
	struct cidr a;
	struct stats *s;
	char *text;
	unsigned ra;

	memset(&sh, 0, sizeof(sh));
	memset(&cfg, 0, sizeof(cfg));
	cfg.workers = 2;
	sh.cfg = &cfg;
	pthread_mutex_init(&sh.set_lock, NULL);
	route_holder_init(&sh.routes, NULL);
	ck_assert_int_eq(admit_limiter_new(16, &sh.limiter), 0);
	ck_assert_int_eq(admit_bucket_set(&b, 1, 1), 0);
	ck_assert_int_eq(cidr_parse_addr("2001:db8::1", &a, NULL), 0);
	ck_assert_int_eq(admit_take(sh.limiter, &b, &a, 1000, &ra), 0);
	ck_assert_int_eq(admit_take(sh.limiter, &b, &a, 1000, &ra), -EAGAIN);
	atomic_store(&sh.accepted[1].n, 7);
	ck_assert_int_eq(stats_new(&sh, NULL, &s), 0);
	text = scrape(s);
	ck_assert_ptr_nonnull(strstr(text, "\nedge_ratelimit_clients 1\n"));
	ck_assert_ptr_nonnull(
	    strstr(text, "\nedge_ratelimit_clients_max 16\n"));
	ck_assert_ptr_nonnull(
	    strstr(text, "\nedge_ratelimit_evictions_total 0\n"));
	ck_assert_ptr_nonnull(
	    strstr(text, "\nedge_worker_accepted_total{worker=\"0\"} 0\n"));
	ck_assert_ptr_nonnull(
	    strstr(text, "\nedge_worker_accepted_total{worker=\"1\"} 7\n"));
	ck_assert_ptr_null(strstr(text, "worker=\"2\""));
	free(text);
	stats_free(s);
	admit_limiter_free(sh.limiter);
	pthread_mutex_destroy(&sh.set_lock);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stats");
	TCase *tc = tcase_create("stats");

	tcase_add_test(tc, test_assertions_metric);
	tcase_add_test(tc, test_ratelimit_metrics);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
