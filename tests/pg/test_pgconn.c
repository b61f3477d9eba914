// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_pgconn.c - pgconn (userspace/pg/pgconn.h) against a real
 * PostgreSQL: EDGE_PG_CONNINFO names it (tests/pg/test_pgconn.sh starts
 * one and runs this). Every case drives a real libevent loop:
 * notifications that arrive with a query's result, or alone from another
 * session; a session killed by the server and the connection coming back
 * by itself.
 */
#include <check.h>
#include <event2/event.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgconn.h"

struct probe {
	struct event_base *base;
	struct pgconn *c;
	int ready, lost, results, ended;
	char payload[64];
	int notifies;
	const char *want; /* what ends the loop: "ready", "notify", "ended" */
};

static void probe_stop(struct probe *p, const char *what)
{
	if (p->want && strcmp(p->want, what) == 0)
		event_base_loopbreak(p->base);
}

static void on_ready(struct pgconn *c, void *arg)
{
	struct probe *p = arg;

	(void)c;
	p->ready++;
	probe_stop(p, "ready");
}

static void on_result(struct pgconn *c, PGresult *res, void *arg)
{
	struct probe *p = arg;

	(void)c;
	if (res) {
		p->results++;
		PQclear(res);
		return;
	}
	p->ended++;
	probe_stop(p, "ended");
}

static void on_notify(struct pgconn *c, const char *channel,
		      const char *payload, void *arg)
{
	struct probe *p = arg;

	(void)c;
	(void)channel;
	p->notifies++;
	snprintf(p->payload, sizeof(p->payload), "%s", payload);
	probe_stop(p, "notify");
}

static void on_lost(struct pgconn *c, const char *why, void *arg)
{
	struct probe *p = arg;

	(void)c;
	(void)why;
	p->lost++;
}

static const struct pgconn_ops probe_ops = {
    .ready = on_ready,
    .result = on_result,
    .notify = on_notify,
    .lost = on_lost,
};

static const char *conninfo(void)
{
	const char *s = getenv("EDGE_PG_CONNINFO");

	ck_assert_msg(s && *s, "EDGE_PG_CONNINFO is not set "
			       "(tests/pg/test_pgconn.sh sets it)");
	return s;
}

/* Run the loop until what happens (0) or seconds pass (-1). */
static int probe_until(struct probe *p, const char *what, int seconds)
{
	struct timeval tv = {.tv_sec = seconds};

	p->want = what;
	event_base_loopexit(p->base, &tv);
	event_base_dispatch(p->base);
	p->want = NULL;
	return event_base_got_break(p->base) ? 0 : -1;
}

static void probe_open(struct probe *p, const char *name)
{
	char err[256] = "";

	memset(p, 0, sizeof(*p));
	p->base = event_base_new();
	ck_assert_ptr_nonnull(p->base);
	ck_assert_int_eq(pgconn_new(p->base, conninfo(), name, &probe_ops, p,
				    &p->c, err, sizeof(err)),
			 0);
	ck_assert_msg(probe_until(p, "ready", 10) == 0,
		      "not connected in 10 s: %s", pgconn_last_error(p->c));
}

static void probe_query(struct probe *p, const char *sql)
{
	int ended = p->ended;

	ck_assert_int_eq(pgconn_query(p->c, sql, 0, NULL), 0);
	ck_assert_msg(probe_until(p, "ended", 10) == 0 && p->ended == ended + 1,
		      "%s: did not end in 10 s", sql);
}

static void probe_close(struct probe *p)
{
	pgconn_free(p->c);
	event_base_free(p->base);
}

/* A blocking libpq session of the test's own, for the other side. */
static void other_exec(const char *sql)
{
	PGconn *o = PQconnectdb(conninfo());
	PGresult *r;

	ck_assert_msg(PQstatus(o) == CONNECTION_OK, "%s", PQerrorMessage(o));
	r = PQexec(o, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK ||
			  PQresultStatus(r) == PGRES_TUPLES_OK,
		      "%s: %s", sql, PQresultErrorMessage(r));
	PQclear(r);
	PQfinish(o);
}

/*
 * The session's own NOTIFY reaches it at the end of the statement, in the
 * same packet as the results: libpq queues it while the results are
 * parsed, and pgconn must hand it over then, not when the server next
 * sends something (on a quiet connection: never).
 */
START_TEST(notify_with_result)
{
	struct probe p;

	probe_open(&p, "test-pgconn");
	probe_query(&p, "LISTEN edge_test");
	ck_assert_int_eq(pgconn_query(p.c,
				      "NOTIFY edge_test, 'with-result'; "
				      "SELECT 1",
				      0, NULL),
			 0);
	ck_assert_msg(probe_until(&p, "notify", 3) == 0,
		      "a NOTIFY that came with a result was not handed over "
		      "(%d results, %d ended)",
		      p.results, p.ended);
	ck_assert_str_eq(p.payload, "with-result");
	probe_close(&p);
}
END_TEST

START_TEST(notify_from_other_session)
{
	struct probe p;

	probe_open(&p, "test-pgconn");
	probe_query(&p, "LISTEN edge_test");
	other_exec("NOTIFY edge_test, 'from-another'");
	ck_assert_msg(probe_until(&p, "notify", 5) == 0,
		      "a NOTIFY from another session never came");
	ck_assert_str_eq(p.payload, "from-another");
	ck_assert_int_eq(p.notifies, 1);
	probe_close(&p);
}
END_TEST

/* The server ends the session: lost, then connected again by itself, and
 * the connection answers queries again. */
START_TEST(terminated_and_back)
{
	struct probe p;

	probe_open(&p, "test-pgconn-kill");
	other_exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
		   "WHERE application_name = 'test-pgconn-kill'");
	ck_assert_msg(probe_until(&p, "ready", 10) == 0,
		      "not back within 10 s of being terminated");
	ck_assert_int_eq(p.lost, 1);
	ck_assert_int_eq(p.ready, 2);
	ck_assert(pgconn_up(p.c));
	ck_assert_uint_ge(pgconn_reconnects(p.c), 1);
	probe_query(&p, "SELECT 1");
	ck_assert_int_eq(p.results, 1);
	probe_close(&p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pgconn");
	TCase *tc = tcase_create("real server");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, notify_with_result);
	tcase_add_test(tc, notify_from_other_session);
	tcase_add_test(tc, terminated_and_back);
	suite_add_tcase(s, tc);
	/* a line per case (CK_VERBOSE): test_pgconn.sh reports each */
	sr = srunner_create(s);
	srunner_run_all(sr, CK_VERBOSE);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
