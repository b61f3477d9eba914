/* SPDX-License-Identifier: BSD-2-Clause */
/* test_stats.c - the daemon's registry (userspace/stats.c):
 * edge_assertions_failed_total mirrors the process-wide count of failed
 * EDGE_ASSERTs at every scrape. */
#include <check.h>
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

int main(void)
{
	Suite *s = suite_create("stats");
	TCase *tc = tcase_create("stats");

	tcase_add_test(tc, test_assertions_metric);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
