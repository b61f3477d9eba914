/* SPDX-License-Identifier: BSD-2-Clause */
/* test_route_writer.c - the route table's one writer: each source's list
 * replaced on its own and every list merged into one generation (a second
 * source adds its domains; replacing the file's keeps the other's), a
 * name claimed by two sources refused with the old generation kept, the
 * settings' defaults, the TCP routes' index to their environments, and
 * no writing from another thread (abort in a test build, counted and
 * refused in production). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "edge_assert.h"
#include "pmap.h"
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

/* How many projects source src has in the current generation. */
static size_t projects_of(enum route_src_id src)
{
	struct route_table *t = route_table_current(&holder);
	char **ids;
	size_t n = 0;

	ck_assert_int_eq(route_table_project_ids(t, src, &ids, &n), 0);
	route_ids_free(ids, n);
	route_table_put(t);
	return n;
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

static void count_said(void *arg, const char *what)
{
	(void)what;
	(*(int *)arg)++;
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
	unsigned src = 9;
	struct route_table *t;

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
	ck_assert_uint_eq(projects_of(ROUTE_SRC_DB), 1);
	ck_assert_uint_eq(projects_of(ROUTE_SRC_FILE), 1);
	t = route_table_current(&holder);
	ck_assert_int_eq(route_table_holder(t, 'h', "db.test", &src), 0);
	ck_assert_uint_eq(src, ROUTE_SRC_DB);
	ck_assert_int_eq(route_table_holder(t, 'p', "fp", &src), 0);
	ck_assert_uint_eq(src, ROUTE_SRC_FILE);
	ck_assert_int_eq(route_table_holder(t, 'e', "dbe", &src), 0);
	ck_assert_uint_eq(src, ROUTE_SRC_DB);
	ck_assert_int_eq(route_table_holder(t, 'h', "nope.test", &src),
			 -ENOENT);
	route_table_put(t);
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
	ck_assert_uint_eq(projects_of(ROUTE_SRC_DB), 0);
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
	uint64_t gen = 77;

	update_ok(ROUTE_SRC_FILE, one("fp", "fe", "file.test", NULL), NULL);
	update_ok(ROUTE_SRC_DB, one("dbp", "dbe", "old.test", NULL), NULL);
	before = route_table_current(&holder);
	ck_assert_int_eq(
	    route_writer_update(&rw, ROUTE_SRC_DB, t->make(), NULL, &gen, &err),
	    -EEXIST);
	ck_assert_str_eq(err.msg, t->msg);
	ck_assert_uint_eq(gen, 77);
	ck_assert_ptr_eq(route_table_current(&holder), before);
	route_table_put(before);
	route_table_put(before);
	ck_assert_uint_eq(projects_of(ROUTE_SRC_DB), 1);
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

/* ---- patches: some projects of a source ------------------------------- */

/* The projects of list s moved into v (s freed); how many. */
static size_t take(struct route_src *s, struct route_src_project *v)
{
	size_t n = s->n_projects;

	memcpy(v, s->projects, n * sizeof(*v));
	s->n_projects = 0;
	route_src_free(s);
	return n;
}

struct refusal {
	int n;
	char id[64], why[512];
};

static void on_refused(void *arg, const char *id, const char *why)
{
	struct refusal *r = arg;

	r->n++;
	snprintf(r->id, sizeof(r->id), "%s", id);
	snprintf(r->why, sizeof(r->why), "%s", why);
}

static void patch_ok(struct route_src_project *set, size_t n_set,
		     const char *const *del, size_t n_del)
{
	struct errbuf err = {""};
	struct refusal r = {0, "", ""};

	ck_assert_msg(route_writer_patch(&rw, ROUTE_SRC_DB, set, n_set, del,
					 n_del, NULL, on_refused, &r,
					 &err) == 0,
		      "%s", err.msg);
	ck_assert_msg(r.n == 0, "%s refused: %s", r.id, r.why);
}

/* What host + path resolves to: the match (status returned). */
static enum route_status look_at(const char *host, const char *path,
				 struct route_match *m)
{
	struct route_table *t = route_table_current(&holder);
	enum route_status st =
	    route_lookup(t, host, strlen(host), path, strlen(path), m);

	route_table_put(t); /* the table lives on in the holder */
	return st;
}

/* A patch changes the projects it names; the others keep their compiled
 * routes (the same gauges and keys); a held generation resolves as it
 * did; a claim on another project's domain follows both projects'
 * changes. */
START_TEST(test_patch)
{
	struct route_src_project v[4];
	struct route_src *s = fx_src();
	struct route_match a1, b1, a2, b2, m;
	struct route_table *held;
	const char *gone[] = {"c"};
	uint64_t g1, g2;

	fx_env(fx_project(s, "a"), "a-e", "127.0.0.1:81", "a.test", NULL);
	fx_env(fx_project(s, "b"), "b-e", "127.0.0.1:82", "b.test", NULL);
	fx_env(fx_project(s, "c"), "c-e", "127.0.0.1:83", "c.test", NULL);
	fx_claim(&s->projects[0].envs[0], "b.test", "/fn", false);
	update_ok(ROUTE_SRC_FILE, one("fp", "fe", "file.test", NULL), NULL);
	patch_ok(v, take(s, v), NULL, 0);
	g1 = generation();
	ck_assert_int_eq(look_at("a.test", "/", &a1), ROUTE_OK);
	ck_assert_int_eq(look_at("b.test", "/", &b1), ROUTE_OK);
	ck_assert_int_eq(look_at("b.test", "/fn/x", &m), ROUTE_OK);
	ck_assert_str_eq(m.env_id, "a-e");
	ck_assert_str_eq(env_of("c.test"), "c-e");
	held = route_table_current(&holder);

	/* b changes its endpoint, c goes */
	s = fx_src();
	fx_env(fx_project(s, "b"), "b-e", "127.0.0.1:92", "b.test", NULL);
	patch_ok(v, take(s, v), gone, 1);
	g2 = generation();
	ck_assert_uint_gt(g2, g1);
	ck_assert_ptr_null(env_of("c.test"));
	ck_assert_str_eq(env_of("file.test"), "fe");
	ck_assert_int_eq(look_at("a.test", "/", &a2), ROUTE_OK);
	ck_assert_int_eq(look_at("b.test", "/", &b2), ROUTE_OK);
	ck_assert_str_eq(b2.upstreams[0].text, "127.0.0.1:92");
	/* a was not touched: the very same route */
	ck_assert_ptr_eq(a2.inflight, a1.inflight);
	ck_assert_uint_eq(a2.route_key, a1.route_key);
	ck_assert_ptr_ne(b2.inflight, b1.inflight);
	/* a's claim on b.test survives b's change */
	ck_assert_int_eq(look_at("b.test", "/fn", &m), ROUTE_OK);
	ck_assert_str_eq(m.env_id, "a-e");
	/* the held generation: b's old endpoint, c still there */
	ck_assert_int_eq(route_lookup(held, "b.test", 6, "/", 1, &m), ROUTE_OK);
	ck_assert_str_eq(m.upstreams[0].text, "127.0.0.1:82");
	ck_assert_int_eq(route_lookup(held, "c.test", 6, "/", 1, &m), ROUTE_OK);
	route_table_put(held);

	/* a drops its claim: b.test/fn is b's again */
	s = fx_src();
	fx_env(fx_project(s, "a"), "a-e", "127.0.0.1:81", "a.test", NULL);
	patch_ok(v, take(s, v), NULL, 0);
	ck_assert_int_eq(look_at("b.test", "/fn", &m), ROUTE_OK);
	ck_assert_str_eq(m.env_id, "b-e");
	/* b goes: a claim-free domain gone entirely */
	gone[0] = "b";
	patch_ok(NULL, 0, gone, 1);
	ck_assert_int_eq(look_at("b.test", "/fn", &m), ROUTE_DOMAIN_NOT_FOUND);
	ck_assert_uint_eq(projects_of(ROUTE_SRC_DB), 1);
}
END_TEST

/* What TCP route slot resolves to in the current generation (status
 * returned); *up gets its first upstream ("" when none). */
static enum route_status tcp_at(size_t slot, struct route_match *m, char *up,
				size_t len)
{
	struct route_table *t = route_table_current(&holder);
	enum route_status st = route_tcp_lookup(t, slot, m);

	snprintf(up, len, "%s", m->n_upstreams ? m->upstreams[0].text : "");
	route_table_put(t);
	return st;
}

/* A TCP route of source src in slot (sni NULL: a plain route). */
static struct route_tcp tcp_route(const char *listen, const char *sni,
				  const char *env, unsigned src, unsigned slot)
{
	struct route_tcp r;

	memset(&r, 0, sizeof(r));
	snprintf(r.listen, sizeof(r.listen), "%s", listen);
	snprintf(r.sni, sizeof(r.sni), "%s", sni ? sni : "");
	snprintf(r.env_id, sizeof(r.env_id), "%s", env);
	r.src = src;
	r.slot = slot;
	return r;
}

/* A plain TCP route of the file in slot. */
static struct route_tcp tcp_slot(const char *listen, const char *env,
				 unsigned slot)
{
	return tcp_route(listen, NULL, env, ROUTE_SRC_FILE, slot);
}

/* TCP routes: each slot is resolved to its environment whenever a
 * generation is built, so a file reload or a database patch that adds,
 * changes or removes the environment (or the environment a slot names)
 * reaches the next lookup; a held generation keeps what it had; the file
 * source's update keeps the slots, and a file load sets them with its
 * projects in one generation. */
START_TEST(test_tcp_routes)
{
	struct route_tcp v[3] = {tcp_slot("0.0.0.0:15432", "fe", 0),
				 tcp_slot("0.0.0.0:15433", "dbe", 1),
				 tcp_slot("0.0.0.0:15434", "fe", 2)};
	struct route_tcp big[ROUTE_TCP_MAX + 1];
	struct route_src_project pv[2];
	struct route_src *s;
	struct route_match m;
	struct route_table *held;
	struct errbuf err = {""};
	const char *gone[] = {"dbp"};
	char up[CONFIG_ADDR_STR_MAX];
	uint64_t g;
	json_t *j, *tr;

	s = one("fp", "fe", "file.test", NULL);
	ck_assert_int_eq(route_writer_update_file(&rw, s, NULL, v, 3, &g, &err),
			 0);
	ck_assert_uint_eq(g, generation());
	ck_assert_int_eq(tcp_at(0, &m, up, sizeof(up)), ROUTE_OK);
	ck_assert_str_eq(m.env_id, "fe");
	ck_assert_str_eq(m.project_id, "fp");
	ck_assert_str_eq(m.deployment_id, "fe-d");
	ck_assert_str_eq(up, "127.0.0.1:80");
	ck_assert_uint_ne(m.route_key, 0);
	ck_assert_int_eq(tcp_at(1, &m, up, sizeof(up)), ROUTE_ENV_NOT_FOUND);
	ck_assert_int_eq(tcp_at(2, &m, up, sizeof(up)), ROUTE_OK);
	ck_assert_int_eq(tcp_at(3, &m, up, sizeof(up)), ROUTE_ENV_NOT_FOUND);

	/* the database brings the environment slot 1 names */
	s = fx_src();
	fx_env(fx_project(s, "dbp"), "dbe", "127.0.0.1:81", "db.test", NULL);
	patch_ok(pv, take(s, pv), NULL, 0);
	ck_assert_int_eq(tcp_at(1, &m, up, sizeof(up)), ROUTE_OK);
	ck_assert_str_eq(m.project_id, "dbp");
	ck_assert_str_eq(up, "127.0.0.1:81");
	held = route_table_current(&holder);
	/* ... changes its deployment's endpoint ... */
	s = fx_src();
	fx_env(fx_project(s, "dbp"), "dbe", "127.0.0.1:91", "db.test", NULL);
	patch_ok(pv, take(s, pv), NULL, 0);
	ck_assert_int_eq(tcp_at(1, &m, up, sizeof(up)), ROUTE_OK);
	ck_assert_str_eq(up, "127.0.0.1:91");
	ck_assert_int_eq(route_tcp_lookup(held, 1, &m), ROUTE_OK);
	ck_assert_str_eq(m.upstreams[0].text, "127.0.0.1:81");
	route_table_put(held);
	/* ... is disabled, then goes */
	s = fx_src();
	fx_env(fx_project(s, "dbp"), "dbe", "127.0.0.1:91", "db.test", NULL);
	s->projects[0].enabled = false;
	patch_ok(pv, take(s, pv), NULL, 0);
	ck_assert_int_eq(tcp_at(1, &m, up, sizeof(up)), ROUTE_PROJECT_DISABLED);
	ck_assert_str_eq(m.env_id, "dbe");
	patch_ok(NULL, 0, gone, 1);
	ck_assert_int_eq(tcp_at(1, &m, up, sizeof(up)), ROUTE_ENV_NOT_FOUND);

	/* a file update keeps the slots and reaches them */
	s = fx_src();
	fx_env(fx_project(s, "fp"), "fe", "127.0.0.1:85", "file.test", NULL);
	update_ok(ROUTE_SRC_FILE, s, NULL);
	ck_assert_int_eq(tcp_at(0, &m, up, sizeof(up)), ROUTE_OK);
	ck_assert_str_eq(up, "127.0.0.1:85");
	held = route_table_current(&holder);
	ck_assert_uint_eq(route_table_ntcp(held), 3);
	route_table_put(held);

	/* a file load renaming the environment and pointing slot 0 at the
	 * new name: one generation, never a moment without it */
	s = fx_src();
	fx_env(fx_project(s, "fp"), "fe2", "127.0.0.1:86", "file.test", NULL);
	v[0] = tcp_slot("0.0.0.0:15432", "fe2", 0);
	g = generation();
	ck_assert_int_eq(
	    route_writer_update_file(&rw, s, NULL, v, 3, NULL, &err), 0);
	ck_assert_uint_eq(generation(), g + 1);
	ck_assert_int_eq(tcp_at(0, &m, up, sizeof(up)), ROUTE_OK);
	ck_assert_str_eq(up, "127.0.0.1:86");
	ck_assert_int_eq(tcp_at(2, &m, up, sizeof(up)), ROUTE_ENV_NOT_FOUND);

	/* the dump: slot order, found or not */
	held = route_table_current(&holder);
	j = route_dump_json(held);
	route_table_put(held);
	tr = json_object_get(j, "tcp_routes");
	ck_assert_uint_eq(json_array_size(tr), 3);
	ck_assert_str_eq(
	    json_string_value(json_object_get(json_array_get(tr, 0), "listen")),
	    "0.0.0.0:15432");
	ck_assert(
	    json_is_true(json_object_get(json_array_get(tr, 0), "found")));
	ck_assert_str_eq(
	    json_string_value(json_array_get(
		json_object_get(json_array_get(tr, 0), "upstreams"), 0)),
	    "127.0.0.1:86");
	ck_assert(
	    json_is_false(json_object_get(json_array_get(tr, 2), "found")));
	ck_assert_str_eq(json_string_value(json_object_get(
			     json_array_get(tr, 2), "environment")),
			 "fe");
	json_decref(j);

	/* too many: refused, nothing changed */
	memset(big, 0, sizeof(big));
	g = generation();
	ck_assert_int_eq(route_writer_update_file(&rw, fx_src(), NULL, big,
						  ROUTE_TCP_MAX + 1, NULL,
						  &err),
			 -EINVAL);
	ck_assert_uint_eq(generation(), g);
	ck_assert_str_eq(env_of("file.test"), "fe2");
}
END_TEST

/* The route's index on listen (plain) or that name picks (passthrough),
 * -1 for none, in the current generation. */
static int tcp_pick(const char *listen, const char *name)
{
	struct route_table *t = route_table_current(&holder);
	bool pt = false;
	size_t idx = 0;
	int rc = route_tcp_addr(t, listen, &pt, &idx);

	if (rc == 0 && pt && name)
		rc = route_tcp_sni(t, listen, name, &idx);
	else if (rc == 0 && (pt || name))
		rc = -EINVAL; /* not what the caller expected */
	route_table_put(t);
	return rc ? -1 : (int)idx;
}

/* The database's TCP routes beside the file's: found by address and
 * server name (exact, one-label wildcard, "*"), each with its source and
 * slot; a patch sets them with the projects whose environments they name,
 * in one generation; a list the table cannot hold is refused, nothing
 * changed. */
START_TEST(test_tcp_sources)
{
	struct route_tcp v[6] = {
	    tcp_route("0.0.0.0:15432", NULL, "fe", ROUTE_SRC_FILE, 0),
	    tcp_route("0.0.0.0:8443", "a.pt.test", "fe", ROUTE_SRC_FILE, 1),
	    tcp_route("0.0.0.0:8443", "*.w.pt.test", "dbe", ROUTE_SRC_DB, 7),
	    tcp_route("0.0.0.0:8443", "*", "dbe", ROUTE_SRC_DB, 9),
	    tcp_route("127.0.0.1:5555", NULL, "dbe", ROUTE_SRC_DB, 1023),
	    tcp_route("127.0.0.1:5556", NULL, "dbe", ROUTE_SRC_DB, 4)};
	struct route_tcp_list l = {v, 6};
	struct route_src_project pv[1];
	struct route_src *s;
	struct route_match m;
	struct route_table *t;
	struct errbuf err = {""};
	json_t *j, *r;
	uint64_t g;

	update_ok(ROUTE_SRC_FILE, one("fp", "fe", "file.test", NULL), NULL);
	/* the environment and the routes that name it: one generation */
	s = fx_src();
	fx_env(fx_project(s, "dbp"), "dbe", "127.0.0.1:81", "db.test", NULL);
	g = generation();
	ck_assert_int_eq(route_writer_patch_tcp(&rw, ROUTE_SRC_DB, pv,
						take(s, pv), NULL, 0, &l, NULL,
						NULL, NULL, &err),
			 0);
	ck_assert_uint_eq(generation(), g + 1);
	t = route_table_current(&holder);
	ck_assert_uint_eq(route_table_ntcp(t), 6);
	ck_assert_int_eq(route_tcp_lookup(t, 4, &m), ROUTE_OK);
	ck_assert_str_eq(m.project_id, "dbp");
	ck_assert_uint_eq(route_tcp_at(t, 4)->slot, 1023);
	ck_assert_uint_eq(route_tcp_at(t, 4)->src, ROUTE_SRC_DB);
	ck_assert_ptr_null(route_tcp_at(t, 6));
	j = route_dump_json(t);
	route_table_put(t);
	r = json_array_get(json_object_get(j, "tcp_routes"), 2);
	ck_assert_str_eq(json_string_value(json_object_get(r, "sni")),
			 "*.w.pt.test");
	ck_assert_str_eq(json_string_value(json_object_get(r, "route_source")),
			 "database");
	ck_assert_int_eq(json_integer_value(json_object_get(r, "slot")), 7);
	r = json_array_get(json_object_get(j, "tcp_routes"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(r, "route_source")),
			 "file");
	ck_assert_ptr_null(json_object_get(r, "sni"));
	json_decref(j);

	ck_assert_int_eq(tcp_pick("0.0.0.0:15432", NULL), 0);
	ck_assert_int_eq(tcp_pick("127.0.0.1:5556", NULL), 5);
	ck_assert_int_eq(tcp_pick("127.0.0.1:5557", NULL), -1);
	ck_assert_int_eq(tcp_pick("0.0.0.0:8443", "a.pt.test"), 1);
	ck_assert_int_eq(tcp_pick("0.0.0.0:8443", "x.w.pt.test"), 2);
	/* one label more only; unknown and no name: the default */
	ck_assert_int_eq(tcp_pick("0.0.0.0:8443", "y.x.w.pt.test"), 3);
	ck_assert_int_eq(tcp_pick("0.0.0.0:8443", "w.pt.test"), 3);
	ck_assert_int_eq(tcp_pick("0.0.0.0:8443", "other.test"), 3);
	ck_assert_int_eq(tcp_pick("0.0.0.0:8443", ""), 3);

	/* without a default: unknown names pick nothing */
	l.n = 3;
	ck_assert_int_eq(route_writer_patch_tcp(&rw, ROUTE_SRC_DB, NULL, 0,
						NULL, 0, &l, NULL, NULL, NULL,
						&err),
			 0);
	ck_assert_int_eq(tcp_pick("0.0.0.0:8443", "other.test"), -1);
	ck_assert_int_eq(tcp_pick("0.0.0.0:8443", ""), -1);
	ck_assert_int_eq(tcp_pick("127.0.0.1:5556", NULL), -1);
	/* a patch without a list keeps the routes */
	ck_assert_int_eq(route_writer_patch_tcp(&rw, ROUTE_SRC_DB, NULL, 0,
						NULL, 0, NULL, NULL, NULL, NULL,
						&err),
			 0);
	ck_assert_int_eq(tcp_pick("0.0.0.0:8443", "x.w.pt.test"), 2);

	/* refused, nothing changed: a slot twice, a (listen, sni) twice, a
	 * plain route beside one with sni */
	g = generation();
	l.n = 6;
	v[5].slot = 9;
	ck_assert_int_eq(route_writer_patch_tcp(&rw, ROUTE_SRC_DB, NULL, 0,
						NULL, 0, &l, NULL, NULL, NULL,
						&err),
			 -EINVAL);
	v[5] = tcp_route("0.0.0.0:8443", "a.pt.test", "dbe", ROUTE_SRC_DB, 4);
	ck_assert_int_eq(route_writer_patch_tcp(&rw, ROUTE_SRC_DB, NULL, 0,
						NULL, 0, &l, NULL, NULL, NULL,
						&err),
			 -EINVAL);
	ck_assert_str_eq(err.msg,
			 "route table: TCP route 0.0.0.0:8443 sni a.pt.test "
			 "twice");
	v[5] = tcp_route("0.0.0.0:8443", NULL, "dbe", ROUTE_SRC_DB, 4);
	ck_assert_int_eq(route_writer_patch_tcp(&rw, ROUTE_SRC_DB, NULL, 0,
						NULL, 0, &l, NULL, NULL, NULL,
						&err),
			 -EINVAL);
	v[5] = tcp_route("127.0.0.1:5556", NULL, "dbe", ROUTE_SRC_DB,
			 ROUTE_TCP_MAX);
	ck_assert_int_eq(route_writer_patch_tcp(&rw, ROUTE_SRC_DB, NULL, 0,
						NULL, 0, &l, NULL, NULL, NULL,
						&err),
			 -EINVAL);
	ck_assert_uint_eq(generation(), g);
	ck_assert_int_eq(tcp_pick("0.0.0.0:8443", "x.w.pt.test"), 2);
	ck_assert_int_eq(tcp_pick("0.0.0.0:8443", "other.test"), -1);
}
END_TEST

/* A project that would take a name another holds is refused alone, its
 * previous version kept; the rest of the patch applies. */
START_TEST(test_patch_refuses_one)
{
	struct route_src_project v[3];
	struct route_src *s = fx_src();
	struct errbuf err = {""};
	struct refusal r = {0, "", ""};
	const char *del_file[] = {"fp"};

	update_ok(ROUTE_SRC_FILE, one("fp", "fe", "file.test", NULL), NULL);
	fx_env(fx_project(s, "x"), "x-e", "127.0.0.1:81", "x.test", NULL);
	patch_ok(v, take(s, v), NULL, 0);
	s = fx_src();
	fx_env(fx_project(s, "x"), "x-e", "127.0.0.1:81", "x.test",
	       "file.test");
	fx_env(fx_project(s, "y"), "y-e", "127.0.0.1:82", "y.test", NULL);
	ck_assert_int_eq(route_writer_patch(&rw, ROUTE_SRC_DB, v, take(s, v),
					    NULL, 0, NULL, on_refused, &r,
					    &err),
			 0);
	ck_assert_int_eq(r.n, 1);
	ck_assert_str_eq(r.id, "x");
	ck_assert_str_eq(r.why,
			 "domain \"file.test\" is claimed twice: by the file "
			 "source (project fp, environment fe) and by the "
			 "database source (project x, environment x-e)");
	ck_assert_str_eq(env_of("x.test"), "x-e"); /* as it was */
	ck_assert_str_eq(env_of("y.test"), "y-e");
	ck_assert_str_eq(env_of("file.test"), "fe");
	/* a patch cannot delete another source's project */
	r.n = 0;
	ck_assert_int_eq(route_writer_patch(&rw, ROUTE_SRC_DB, NULL, 0,
					    del_file, 1, NULL, on_refused, &r,
					    &err),
			 0);
	ck_assert_int_eq(r.n, 1);
	ck_assert_str_eq(env_of("file.test"), "fe");
}
END_TEST

/* A patch in steps (route_writer_patch_begin ... route_patch_end): the
 * workers see the old generation until the end, then the whole change in
 * one; another write in between (a reload of the file) makes the end
 * refuse with -ESTALE and install nothing, the other write's table
 * staying. Old generations freed by the reaper's thread once it runs,
 * every one of them by its stop (the ASan build's leak check). */
START_TEST(test_patch_steps)
{
	struct route_src_project v[2];
	struct route_src *s = fx_src();
	struct route_patch *p = NULL;
	struct errbuf err = {""};
	uint64_t g0, gen = 0;
	size_t i, n;

	ck_assert_int_eq(route_reaper_start(), 0);
	update_ok(ROUTE_SRC_FILE, one("fp", "fe", "file.test", NULL), NULL);
	fx_env(fx_project(s, "x"), "x-e", "127.0.0.1:81", "x.test", NULL);
	fx_env(fx_project(s, "y"), "y-e", "127.0.0.1:82", "y.test", NULL);
	n = take(s, v);
	g0 = generation();
	ck_assert_int_eq(route_writer_patch_begin(&rw, ROUTE_SRC_DB, NULL,
						  on_refused, NULL, &p, &err),
			 0);
	ck_assert_int_eq(route_patch_set(p, &v[0]), 0);
	/* between two steps: nothing of the change is seen */
	ck_assert_ptr_null(env_of("x.test"));
	ck_assert_uint_eq(generation(), g0);
	ck_assert_int_eq(route_patch_set(p, &v[1]), 0);
	ck_assert_int_eq(route_patch_end(p, &gen, &err), 0);
	ck_assert_uint_gt(gen, g0);
	ck_assert_str_eq(env_of("x.test"), "x-e");
	ck_assert_str_eq(env_of("y.test"), "y-e");

	/* another write while one is built: the built one is refused */
	s = fx_src();
	fx_env(fx_project(s, "z"), "z-e", "127.0.0.1:83", "z.test", NULL);
	n = take(s, v);
	ck_assert_int_eq(route_writer_patch_begin(&rw, ROUTE_SRC_DB, NULL,
						  on_refused, NULL, &p, &err),
			 0);
	ck_assert_int_eq(route_writer_patch(&rw, ROUTE_SRC_DB, NULL, 0,
					    (const char *[]){"x"}, 1, NULL,
					    NULL, NULL, &err),
			 0);
	g0 = generation();
	for (i = 0; i < n; i++)
		ck_assert_int_eq(route_patch_set(p, &v[i]), 0);
	ck_assert_int_eq(route_patch_end(p, &gen, &err), -ESTALE);
	ck_assert_msg(strstr(err.msg, "changed by another write"), "%s",
		      err.msg);
	ck_assert_uint_eq(generation(), g0);
	ck_assert_ptr_null(env_of("z.test"));
	ck_assert_ptr_null(env_of("x.test")); /* the other write's */
	ck_assert_str_eq(env_of("y.test"), "y-e");
	/* an abandoned patch changes nothing */
	ck_assert_int_eq(route_writer_patch_begin(&rw, ROUTE_SRC_DB, NULL, NULL,
						  NULL, &p, &err),
			 0);
	ck_assert_int_eq(route_patch_del(p, "y"), 0);
	route_patch_abort(p);
	ck_assert_str_eq(env_of("y.test"), "y-e");
	ck_assert_uint_eq(generation(), g0);
	route_holder_clear(&holder);
	route_reaper_stop();
}
END_TEST

/* Giving way: a database project's domain, environment or id the file
 * holds is left out of it, the rest of it applies. */
START_TEST(test_prune_project)
{
	struct route_src_project v[2];
	struct route_src *s = fx_src();
	size_t dropped = 0, n;
	int said = 0;

	update_ok(ROUTE_SRC_FILE, one("fp", "fe", "file.test", NULL), NULL);
	fx_env(fx_project(s, "x"), "x-e", "127.0.0.1:81", "x.test",
	       "file.test");
	fx_env(&s->projects[0], "fe", "127.0.0.1:81", "fe-dup.test", NULL);
	fx_env(fx_project(s, "fp"), "other", "127.0.0.1:81", "o.test", NULL);
	n = take(s, v);
	ck_assert_int_eq(route_writer_prune_project(&rw, ROUTE_SRC_DB, &v[0],
						    count_said, &said,
						    &dropped),
			 0);
	ck_assert_int_eq(route_writer_prune_project(&rw, ROUTE_SRC_DB, &v[1],
						    count_said, &said,
						    &dropped),
			 -EEXIST);
	ck_assert_uint_eq(dropped, 3);
	ck_assert_int_eq(said, 3);
	ck_assert_uint_eq(v[0].n_envs, 1);
	ck_assert_uint_eq(v[0].envs[0].n_domains, 1);
	route_src_project_clear(&v[1]);
	(void)n;
	patch_ok(v, 1, NULL, 0);
	ck_assert_str_eq(env_of("x.test"), "x-e");
	ck_assert_str_eq(env_of("file.test"), "fe");
	ck_assert_ptr_null(env_of("fe-dup.test"));
}
END_TEST

/* The cost of a change is the change: in a table of 10,000 projects, a
 * patch of one makes a few dozen map nodes, not a table's worth. */
START_TEST(test_patch_cost)
{
	enum { N = 10000 };
	struct route_src_project *v = calloc(N, sizeof(*v));
	struct route_src *s;
	char pid[32], eid[32], dom[32];
	uint64_t before, made;
	struct route_match m;
	int i;

	ck_assert_ptr_nonnull(v);
	for (i = 0; i < N; i++) {
		snprintf(pid, sizeof(pid), "p%d", i);
		snprintf(eid, sizeof(eid), "p%d-e", i);
		snprintf(dom, sizeof(dom), "d%d.test", i);
		take(one(pid, eid, dom, NULL), &v[i]);
	}
	patch_ok(v, N, NULL, 0);
	ck_assert_str_eq(env_of("d9999.test"), "p9999-e");
	s = fx_src();
	fx_env(fx_project(s, "p5"), "p5-e", "127.0.0.1:99", "d5.test",
	       "new5.test");
	before = pmap_nodes_made();
	patch_ok(v, take(s, v), NULL, 0);
	made = pmap_nodes_made() - before;
	/* the project, its environment and deployment ids, two domains:
	 * five paths of at most 5 levels (log16 of 10,000) and a leaf */
	ck_assert_msg(made <= 40, "one project's change made %llu nodes",
		      (unsigned long long)made);
	ck_assert_int_eq(look_at("d5.test", "/", &m), ROUTE_OK);
	ck_assert_str_eq(m.upstreams[0].text, "127.0.0.1:99");
	ck_assert_str_eq(env_of("new5.test"), "p5-e");
	ck_assert_str_eq(env_of("d6.test"), "p6-e");
	free(v);
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
	ck_assert_uint_eq(projects_of(ROUTE_SRC_DB), 0);
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
	tcase_add_test(tc, test_patch);
	tcase_add_test(tc, test_patch_refuses_one);
	tcase_add_test(tc, test_patch_steps);
	tcase_add_test(tc, test_tcp_routes);
	tcase_add_test(tc, test_tcp_sources);
	tcase_add_test(tc, test_prune_project);
	tcase_add_test(tc, test_patch_cost);
	tcase_add_test_raise_signal(tc, test_other_thread_aborts, SIGABRT);
	tcase_add_test(tc, test_other_thread_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(route_writer_suite());
}
