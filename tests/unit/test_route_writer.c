/* SPDX-License-Identifier: BSD-2-Clause */
/* test_route_writer.c - the route table's one writer: each source's list
 * replaced on its own and every list merged into one generation (a second
 * source adds its domains; replacing the file's keeps the other's), a
 * name claimed by two sources refused with the old generation kept, the
 * settings' defaults, and no writing from another thread (abort in a test
 * build, counted and refused in production). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "edge_assert.h"
#include "route_src_fixture.h"
#include "route_writer.h"
#include "unit.h"

static struct route_holder holder;
static struct route_writer rw;
static const struct route_defaults defs = {10 << 20, 0};

static void setup(void)
{
	memset(&holder, 0, sizeof(holder));
	route_writer_init(&rw, &holder, &defs);
}

static void teardown(void)
{
	route_holder_clear(&holder);
	route_writer_free(&rw);
}

/* The environment host resolves to in the current generation, NULL when
 * none. */
static const char *env_of(const char *host)
{
	static char env[64];
	struct route_table *t = route_table_current(&holder);
	struct route_match m;
	const char *r = NULL;

	if (t && route_lookup(t, host, strlen(host), "/", 1, &m) == ROUTE_OK) {
		snprintf(env, sizeof(env), "%s", m.env_id);
		r = env;
	}
	route_table_put(t);
	return r;
}

static uint64_t generation(void)
{
	struct route_table *t = route_table_current(&holder);
	uint64_t g = t ? route_table_generation(t) : 0;

	route_table_put(t);
	return g;
}

/* A source of one project pid with one environment eid answering the
 * domains d1 (and d2, if not NULL). */
static struct route_src *one(const char *pid, const char *eid, const char *d1,
			     const char *d2)
{
	struct route_src *s = fx_src();

	fx_env(fx_project(s, pid), eid, "127.0.0.1:80", d1, d2);
	return s;
}

static void update_ok(enum route_src_id id, struct route_src *s, uint64_t *gen)
{
	struct errbuf err = {""};

	ck_assert_msg(route_writer_update(&rw, id, s, NULL, gen, &err) == 0,
		      "%s", err.msg);
}

/* The file first, then the database's list: the table routes both. */
START_TEST(test_second_source_adds)
{
	uint64_t g1 = 0, g2 = 0;
	struct route_src *db = one("dbp", "dbe", "db.test", NULL);

	ck_assert_uint_eq(generation(), 0);
	update_ok(ROUTE_SRC_FILE, one("fp", "fe", "file.test", NULL), &g1);
	ck_assert_uint_eq(g1, generation());
	ck_assert_str_eq(env_of("file.test"), "fe");
	ck_assert_ptr_null(env_of("db.test"));
	update_ok(ROUTE_SRC_DB, db, &g2);
	ck_assert_uint_gt(g2, g1);
	ck_assert_uint_eq(g2, generation());
	ck_assert_str_eq(env_of("file.test"), "fe");
	ck_assert_str_eq(env_of("db.test"), "dbe");
	ck_assert_ptr_eq(route_writer_source(&rw, ROUTE_SRC_DB), db);
	ck_assert_ptr_null(route_writer_source(&rw, ROUTE_SRC_N));
	ck_assert_str_eq(route_writer_source_name(ROUTE_SRC_FILE), "file");
	ck_assert_str_eq(route_writer_source_name(ROUTE_SRC_DB), "database");
}
END_TEST

/* A reload replaces the file's list only: the database's routes stay, a
 * domain the file no longer has goes, a new one comes; and a request
 * that holds the old generation keeps what it resolved. */
START_TEST(test_replace_file_keeps_other)
{
	struct route_table *held;
	struct route_match m;

	update_ok(ROUTE_SRC_FILE, one("fp", "fe", "file.test", NULL), NULL);
	update_ok(ROUTE_SRC_DB, one("dbp", "dbe", "db.test", NULL), NULL);
	held = route_table_current(&holder);
	update_ok(ROUTE_SRC_FILE, one("fp", "fe2", "new.test", NULL), NULL);
	ck_assert_str_eq(env_of("db.test"), "dbe");
	ck_assert_str_eq(env_of("new.test"), "fe2");
	ck_assert_ptr_null(env_of("file.test"));
	ck_assert_int_eq(route_lookup(held, "file.test", 9, "/", 1, &m),
			 ROUTE_OK);
	ck_assert_str_eq(m.env_id, "fe");
	route_table_put(held);
	/* and the other way round: the database's change keeps the file's */
	update_ok(ROUTE_SRC_DB, one("dbp", "dbe", "db2.test", NULL), NULL);
	ck_assert_str_eq(env_of("new.test"), "fe2");
	ck_assert_str_eq(env_of("db2.test"), "dbe");
	ck_assert_ptr_null(env_of("db.test"));
	/* a source with nothing any more */
	update_ok(ROUTE_SRC_DB, NULL, NULL);
	ck_assert_ptr_null(env_of("db2.test"));
	ck_assert_str_eq(env_of("new.test"), "fe2");
	ck_assert_ptr_null(route_writer_source(&rw, ROUTE_SRC_DB));
}
END_TEST

struct conflict {
	struct route_src *(*make)(void);
	const char *msg;
};

static struct route_src *c_domain(void)
{
	return one("dbp", "dbe", "db.test", "file.test");
}

static struct route_src *c_project(void)
{
	return one("fp", "dbe", "db.test", NULL);
}

static struct route_src *c_env(void)
{
	return one("dbp", "fe", "db.test", NULL);
}

static struct route_src *c_deployment(void)
{
	struct route_src *s = one("dbp", "dbe", "db.test", NULL);

	free(s->projects[0].envs[0].deployment.id);
	s->projects[0].envs[0].deployment.id = fx_dup("fe-d");
	return s;
}

static struct route_src *c_inside(void)
{
	struct route_src *s = one("dbp", "dbe", "db.test", NULL);

	fx_env(&s->projects[0], "dbe2", "127.0.0.1:81", "db.test", NULL);
	return s;
}

static const struct conflict conflicts[] = {
    {c_domain,
     "domain \"file.test\" is claimed twice: by the file source (project fp, "
     "environment fe) and by the database source (project dbp, environment "
     "dbe)"},
    {c_project, "project id \"fp\" is used twice: by the file source and by "
		"the database source"},
    {c_env, "environment id \"fe\" is used twice: by the file source "
	    "(project fp, environment fe) and by the database source (project "
	    "dbp, environment fe)"},
    /* fe-d: the fixture's deployment id of environment fe */
    {c_deployment,
     "deployment id \"fe-d\" is used twice: by the file source (project fp, "
     "environment fe) and by the database source (project dbp, environment "
     "dbe)"},
    {c_inside, "domain \"db.test\" is claimed twice: by the database source "
	       "(project dbp, environment dbe) and by the database source "
	       "(project dbp, environment dbe2)"},
};

/* A name two sources claim is refused, naming both: the source keeps its
 * previous list and the previous generation keeps serving. */
START_TEST(test_conflict_refused)
{
	const struct conflict *t = &conflicts[_i];
	struct errbuf err = {""};
	struct route_table *before;
	const struct route_src *db;
	uint64_t gen = 77;

	update_ok(ROUTE_SRC_FILE, one("fp", "fe", "file.test", NULL), NULL);
	update_ok(ROUTE_SRC_DB, one("dbp", "dbe", "old.test", NULL), NULL);
	before = route_table_current(&holder);
	db = route_writer_source(&rw, ROUTE_SRC_DB);
	ck_assert_int_eq(
	    route_writer_update(&rw, ROUTE_SRC_DB, t->make(), NULL, &gen, &err),
	    -EEXIST);
	ck_assert_str_eq(err.msg, t->msg);
	ck_assert_uint_eq(gen, 77);
	ck_assert_ptr_eq(route_table_current(&holder), before);
	route_table_put(before);
	route_table_put(before);
	ck_assert_ptr_eq(route_writer_source(&rw, ROUTE_SRC_DB), db);
	ck_assert_str_eq(env_of("file.test"), "fe");
	ck_assert_str_eq(env_of("old.test"), "dbe");
	ck_assert_ptr_null(env_of("db.test"));
}
END_TEST

/* A reload of the file that claims the database's domain is refused the
 * same way: the running file routes stay. */
START_TEST(test_conflict_from_file)
{
	struct errbuf err = {""};
	uint64_t g = generation();

	update_ok(ROUTE_SRC_FILE, one("fp", "fe", "file.test", NULL), NULL);
	update_ok(ROUTE_SRC_DB, one("dbp", "dbe", "db.test", NULL), NULL);
	g = generation();
	ck_assert_int_eq(
	    route_writer_update(&rw, ROUTE_SRC_FILE,
				one("fp", "fe", "file.test", "db.test"), &defs,
				NULL, &err),
	    -EEXIST);
	ck_assert_ptr_nonnull(strstr(err.msg, "domain \"db.test\""));
	ck_assert_uint_eq(generation(), g);
	ck_assert_str_eq(env_of("file.test"), "fe");
	ck_assert_str_eq(env_of("db.test"), "dbe");
}
END_TEST

/* The settings' defaults: new ones with a reload apply to every source's
 * routes; a change without them keeps those in force; a refused change
 * keeps the old ones too. */
START_TEST(test_defaults)
{
	struct errbuf err = {""};
	struct route_defaults d2 = {5, 0};
	struct route_table *t;
	struct route_match m;

	update_ok(ROUTE_SRC_DB, one("dbp", "dbe", "db.test", NULL), NULL);
	t = route_table_current(&holder);
	ck_assert_int_eq(route_lookup(t, "db.test", 7, "/", 1, &m), ROUTE_OK);
	ck_assert_uint_eq(m.max_body_bytes, 10 << 20);
	route_table_put(t);
	ck_assert_int_eq(route_writer_update(&rw, ROUTE_SRC_FILE,
					     one("fp", "fe", "f.test", NULL),
					     &d2, NULL, &err),
			 0);
	t = route_table_current(&holder);
	ck_assert_int_eq(route_lookup(t, "db.test", 7, "/", 1, &m), ROUTE_OK);
	ck_assert_uint_eq(m.max_body_bytes, 5);
	route_table_put(t);
	update_ok(ROUTE_SRC_DB, one("dbp", "dbe", "db.test", NULL), NULL);
	t = route_table_current(&holder);
	ck_assert_int_eq(route_lookup(t, "db.test", 7, "/", 1, &m), ROUTE_OK);
	ck_assert_uint_eq(m.max_body_bytes, 5);
	route_table_put(t);
	ck_assert_int_eq(route_writer_update(&rw, ROUTE_SRC_FILE,
					     one("dbp", "fe", "f.test", NULL),
					     &defs, NULL, &err),
			 -EEXIST);
	ck_assert_uint_eq(rw.def.max_body_bytes, 5);
	ck_assert_int_eq(route_writer_update(&rw, (enum route_src_id)7,
					     one("x", "y", "z.test", NULL),
					     NULL, NULL, &err),
			 -ERANGE);
}
END_TEST

/* ---- one writer ---------------------------------------------------------- */

struct off_thread {
	int rc;
	struct errbuf err;
};

static void *write_from_thread(void *arg)
{
	struct off_thread *o = arg;

	o->rc = route_writer_update(&rw, ROUTE_SRC_DB,
				    one("dbp", "dbe", "db.test", NULL), NULL,
				    NULL, &o->err);
	return NULL;
}

static void quiet(void)
{
	int fd = open("/dev/null", O_WRONLY);

	ck_assert_int_ge(fd, 0);
	dup2(fd, STDERR_FILENO);
	close(fd);
}

/* Another thread than the control loop's: abort in a test build. */
START_TEST(test_other_thread_aborts)
{
	struct off_thread o = {0, {""}};
	pthread_t th;

	quiet();
	edge_assert_set_abort(true);
	update_ok(ROUTE_SRC_FILE, one("fp", "fe", "file.test", NULL), NULL);
	ck_assert_int_eq(pthread_create(&th, NULL, write_from_thread, &o), 0);
	pthread_join(th, NULL);
	/* not reached: SIGABRT */
}
END_TEST

/* In production (count mode): counted, refused, nothing changed, the
 * list handed over freed (ASan tells if not). */
START_TEST(test_other_thread_refused)
{
	struct off_thread o = {0, {""}};
	pthread_t th;
	uint64_t g;

	quiet();
	edge_assert_set_abort(false);
	update_ok(ROUTE_SRC_FILE, one("fp", "fe", "file.test", NULL), NULL);
	g = generation();
	ck_assert_int_eq(pthread_create(&th, NULL, write_from_thread, &o), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_eq(o.rc, -EPERM);
	ck_assert_ptr_nonnull(strstr(o.err.msg, "control loop"));
	ck_assert_uint_eq(edge_assert_failures(), 1);
	ck_assert_uint_eq(generation(), g);
	ck_assert_ptr_null(env_of("db.test"));
	ck_assert_ptr_null(route_writer_source(&rw, ROUTE_SRC_DB));
}
END_TEST

static Suite *route_writer_suite(void)
{
	Suite *s = suite_create("route_writer");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_second_source_adds);
	tcase_add_test(tc, test_replace_file_keeps_other);
	tcase_add_loop_test(tc, test_conflict_refused, 0,
			    sizeof(conflicts) / sizeof(conflicts[0]));
	tcase_add_test(tc, test_conflict_from_file);
	tcase_add_test(tc, test_defaults);
	tcase_add_test_raise_signal(tc, test_other_thread_aborts, SIGABRT);
	tcase_add_test(tc, test_other_thread_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(route_writer_suite());
}
