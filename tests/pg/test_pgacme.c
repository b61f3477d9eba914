// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_pgacme.c - the ACME manager's database store (pg/pgacme.h) and the
 * sync's read of acme_challenges (pgsync.h, migration 0026) against a
 * real PostgreSQL: EDGE_PG_CONNINFO names it, migrated; EDGE_PG_STOP and
 * EDGE_PG_START are shell commands that stop and start it
 * (tests/pg/test_pgacme.sh sets them and runs this). Every case drives a
 * real libevent loop.
 */
#include <check.h>
#include <event2/event.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pgacme.h"
#include "pgsync.h"

static const char *conninfo(void)
{
	const char *s = getenv("EDGE_PG_CONNINFO");

	ck_assert_msg(s && *s, "EDGE_PG_CONNINFO is not set "
			       "(tests/pg/test_pgacme.sh sets it)");
	return s;
}

/* ---- the loop ------------------------------------------------------------
 */

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

/* Run base until *flag reaches want or ms pass: whether it did. */
static bool run_until(struct event_base *base, const int *flag, int want,
		      int ms)
{
	struct event *tick = event_new(base, -1, EV_PERSIST, tick_cb, NULL);
	struct timeval tv = {0, 20000};
	struct timespec t0, t;

	event_add(tick, &tv);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (*flag >= want)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 +
			(t.tv_nsec - t0.tv_nsec) / 1000000 >
		    ms)
			break;
		event_base_loop(base, EVLOOP_ONCE);
	}
	event_free(tick);
	return *flag >= want;
}

/* Run base for ms whatever happens. */
static void run_for(struct event_base *base, int ms)
{
	static const int never = 0;

	run_until(base, &never, 1, ms);
}

/* ---- a blocking session of the test's own --------------------------------
 */

static PGconn *other(void)
{
	PGconn *o = PQconnectdb(conninfo());

	ck_assert_msg(PQstatus(o) == CONNECTION_OK, "%s", PQerrorMessage(o));
	return o;
}

static void other_exec(const char *sql)
{
	PGconn *o = other();
	PGresult *r = PQexec(o, sql);

	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK ||
			  PQresultStatus(r) == PGRES_TUPLES_OK,
		      "%s: %s", sql, PQresultErrorMessage(r));
	PQclear(r);
	PQfinish(o);
}

/* One value of sql, into out ("" for NULL or no row). */
static const char *other_val(const char *sql, char *out, size_t len)
{
	PGconn *o = other();
	PGresult *r = PQexec(o, sql);

	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql,
		      PQresultErrorMessage(r));
	snprintf(out, len, "%s", PQntuples(r) ? PQgetvalue(r, 0, 0) : "");
	PQclear(r);
	PQfinish(o);
	return out;
}

static void shell(const char *var)
{
	const char *cmd = getenv(var);

	ck_assert_msg(cmd && *cmd, "%s is not set", var);
	ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
}

/* ---- the store's callbacks -----------------------------------------------
 */

struct calls {
	int lease, publish, save;
	int lease_rc, publish_rc, save_rc;
	int64_t until;
	char why[256];
	int lease_err, any; /* leases that ended < 0; all dones */
};

static void lease_done(void *ctx, int rc, int64_t until)
{
	struct calls *c = ctx;

	c->lease++;
	c->any++;
	c->lease_rc = rc;
	c->until = until;
	if (rc < 0)
		c->lease_err++;
}

static void publish_done(void *ctx, int rc)
{
	struct calls *c = ctx;

	c->publish++;
	c->any++;
	c->publish_rc = rc;
}

static void save_done(void *ctx, int rc, const char *why)
{
	struct calls *c = ctx;

	c->save++;
	c->any++;
	c->save_rc = rc;
	snprintf(c->why, sizeof(c->why), "%s", why ? why : "");
}

struct store {
	struct event_base *base;
	struct pgacme *a;
};

static void store_open(struct store *s)
{
	struct errbuf err = {""};

	s->base = event_base_new();
	ck_assert_ptr_nonnull(s->base);
	ck_assert_int_eq(pgacme_new(s->base, conninfo(), &s->a, &err), 0);
}

static void store_close(struct store *s)
{
	pgacme_free(s->a);
	event_base_free(s->base);
}

/* lease name for holder (ttl_s), waited for: the rc */
static int lease(struct store *s, struct calls *c, const char *name,
		 const char *holder, unsigned ttl_s)
{
	int n = c->lease;

	pgacme_ops.lease(s->a, name, holder, ttl_s, lease_done, c);
	ck_assert_int_eq(c->lease, n); /* never from inside the call */
	ck_assert_msg(run_until(s->base, &c->lease, n + 1, 10000),
		      "lease of %s for %s: no answer in 10 s", name, holder);
	return c->lease_rc;
}

/* ---- leases ---------------------------------------------------------------
 */

START_TEST(lease_one_holder_at_a_time)
{
	struct store s;
	struct calls c = {0};
	char v[64];
	int64_t now;

	store_open(&s);
	ck_assert_int_eq(lease(&s, &c, "l.example.com", "host-a", 2), 1);
	now = (int64_t)time(NULL);
	ck_assert_int_eq(lease(&s, &c, "l.example.com", "host-b", 2), 0);
	ck_assert_msg(c.until >= now + 1 && c.until <= now + 3,
		      "B refused until %lld, A took it at %lld for 2 s",
		      (long long)c.until, (long long)now);
	/* renewed by its holder */
	ck_assert_int_eq(lease(&s, &c, "l.example.com", "host-a", 2), 1);
	ck_assert_str_eq(other_val("SELECT holder FROM acme_leases WHERE "
				   "name = 'l.example.com'",
				   v, sizeof(v)),
			 "host-a");
	/* expired: B's */
	usleep(2600 * 1000);
	ck_assert_int_eq(lease(&s, &c, "l.example.com", "host-b", 2), 1);
	ck_assert_int_eq(lease(&s, &c, "l.example.com", "host-a", 2), 0);
	/* released by B (a release of A's does nothing): A's */
	pgacme_ops.release(s.a, "l.example.com", "host-a");
	ck_assert_int_eq(lease(&s, &c, "l.example.com", "host-a", 60), 0);
	pgacme_ops.release(s.a, "l.example.com", "host-b");
	ck_assert_int_eq(lease(&s, &c, "l.example.com", "host-a", 60), 1);
	ck_assert_str_eq(other_val("SELECT holder FROM acme_leases WHERE "
				   "name = 'l.example.com'",
				   v, sizeof(v)),
			 "host-a");
	store_close(&s);
}
END_TEST

/* ---- challenges, through the sync ------------------------------------------
 */

struct sync_probe {
	int calls;
	size_t n;
	char rows[8][400]; /* "name type token keyauth", sorted by expiry */
};

static void probe_acme(void *arg, const struct acme_chal_row *v, size_t n)
{
	struct sync_probe *p = arg;
	size_t i;

	p->calls++;
	p->n = n;
	for (i = 0; i < n && i < 8; i++)
		snprintf(p->rows[i], sizeof(p->rows[i]), "%s %s %s %s",
			 v[i].name,
			 v[i].type == ACME_CHAL_TLSALPN01 ? "tls-alpn-01"
							  : "http-01",
			 v[i].token, v[i].key_authorization);
}

/* What the last routes_begin held: "ENV=0|1 " per environment, sorted
 * by project; and how many came. */
static char stub_envs[256];
static int stub_begins;

static int stub_begin(void *arg, struct route_src_project *set, size_t n_set,
		      char **del, size_t n_del, bool all,
		      const struct tcproute_row *tcp, size_t n_tcp,
		      uint64_t version, void **job, struct errbuf *err)
{
	size_t i, j, o = 0;

	stub_envs[0] = '\0';
	for (i = 0; i < n_set; i++)
		for (j = 0; j < set[i].n_envs && o < sizeof(stub_envs) - 64;
		     j++)
			o += (size_t)snprintf(
			    stub_envs + o, sizeof(stub_envs) - o, "%s=%d ",
			    set[i].envs[j].id, set[i].envs[j].tls_auto);
	stub_begins++;
	(void)arg;
	(void)all;
	(void)tcp;
	(void)n_tcp;
	(void)version;
	(void)err;
	for (i = 0; i < n_set; i++)
		route_src_project_clear(&set[i]);
	free(set);
	for (i = 0; i < n_del; i++)
		free(del[i]);
	free(del);
	*job = (void *)1;
	return 0;
}

static int stub_step(void *arg, void *job, uint64_t deadline_ns,
		     struct errbuf *err)
{
	(void)arg;
	(void)job;
	(void)deadline_ns;
	(void)err;
	return 0;
}

static void stub_abort(void *arg, void *job)
{
	(void)arg;
	(void)job;
}

static const struct pgsync_ops probe_sync_ops = {
    .routes_begin = stub_begin,
    .routes_step = stub_step,
    .routes_abort = stub_abort,
    .apply_acme_chals = probe_acme,
};

START_TEST(challenges_published_read_unpublished)
{
	struct store s;
	struct calls c = {0};
	struct sync_probe p = {0};
	struct pgsync *sync;
	struct pgsync_status st;
	struct pgsync_cfg cfg = {
	    .conninfo = conninfo(),
	    .host_name = "test",
	    .acme_challenges = true,
	};
	struct errbuf err = {""};
	const struct acme_chal_row r1 = {"c.example.com", ACME_CHAL_HTTP01,
					 "tok-one", "tok-one.thumb"};
	const struct acme_chal_row r2 = {"d.example.com", ACME_CHAL_TLSALPN01,
					 "tok-two", "tok-two.thumb"};
	int want;

	store_open(&s);
	ck_assert_int_eq(
	    pgsync_new(s.base, &cfg, &probe_sync_ops, &p, &sync, &err), 0);
	/* read at connect: none */
	ck_assert_msg(run_until(s.base, &p.calls, 1, 10000),
		      "acme_challenges not read at connect");
	ck_assert_uint_eq(p.n, 0);
	/* published (done after the commit), then read by the sync */
	pgacme_ops.publish(s.a, &r1, "host-a", 60, publish_done, &c);
	ck_assert_int_eq(c.publish, 0);
	ck_assert(run_until(s.base, &c.publish, 1, 10000));
	ck_assert_int_eq(c.publish_rc, 0);
	/* the read may come before the done (deferred to the next turn):
	 * wait for what it holds, not for a count */
	for (int i = 0; i < 5 && p.n != 1; i++)
		run_until(s.base, &p.calls, p.calls + 1, 1000);
	ck_assert_msg(p.n == 1, "no read after the publish's NOTIFY");
	ck_assert_str_eq(p.rows[0],
			 "c.example.com http-01 tok-one tok-one.thumb");
	pgacme_ops.publish(s.a, &r2, "host-a", 120, publish_done, &c);
	ck_assert(run_until(s.base, &c.publish, 2, 10000));
	ck_assert_int_eq(c.publish_rc, 0);
	/* the read may have come between: wait for the one with both */
	for (int i = 0; i < 5 && p.n != 2; i++)
		run_until(s.base, &p.calls, p.calls + 1, 2000);
	ck_assert_uint_eq(p.n, 2);
	ck_assert_str_eq(p.rows[1],
			 "d.example.com tls-alpn-01 tok-two tok-two.thumb");
	/* a type this edge does not know (the CHECK dropped by hand):
	 * skipped, the others answered */
	other_exec("ALTER TABLE acme_challenges DROP CONSTRAINT "
		   "acme_challenges_type_check;"
		   "INSERT INTO acme_challenges VALUES ('tok-bad', "
		   "'e.example.com', 'dns-01', 'x.y', 'host-z', now() + "
		   "interval '1 minute')");
	want = p.calls + 1;
	ck_assert(run_until(s.base, &p.calls, want, 5000));
	ck_assert_uint_eq(p.n, 2);
	pgsync_status(sync, &st);
	ck_assert_uint_eq(st.acme_skipped, 1);
	other_exec("DELETE FROM acme_challenges WHERE token = 'tok-bad';"
		   "ALTER TABLE acme_challenges ADD CONSTRAINT "
		   "acme_challenges_type_check CHECK (type IN ('http-01', "
		   "'tls-alpn-01'))");
	/* unpublished: gone from every host */
	pgacme_ops.unpublish(s.a, "tok-one");
	for (int i = 0; i < 5 && p.n != 1; i++)
		run_until(s.base, &p.calls, p.calls + 1, 2000);
	ck_assert_uint_eq(p.n, 1);
	ck_assert_str_eq(p.rows[0],
			 "d.example.com tls-alpn-01 tok-two tok-two.thumb");
	/* one that expires (its host died: nobody unpublishes it) is read
	 * again without it once its time passed */
	pgacme_ops.publish(s.a, &r1, "host-dead", 1, publish_done, &c);
	ck_assert(run_until(s.base, &c.publish, 3, 10000));
	for (int i = 0; i < 5 && p.n != 2; i++)
		run_until(s.base, &p.calls, p.calls + 1, 2000);
	ck_assert_uint_eq(p.n, 2);
	for (int i = 0; i < 8 && p.n != 1; i++)
		run_until(s.base, &p.calls, p.calls + 1, 1000);
	ck_assert_msg(p.n == 1, "an expired challenge still handed over");
	ck_assert_str_eq(p.rows[0],
			 "d.example.com tls-alpn-01 tok-two tok-two.thumb");
	/* and the next unpublish deletes the expired row too */
	pgacme_ops.unpublish(s.a, "tok-two");
	for (int i = 0; i < 5 && p.n != 0; i++)
		run_until(s.base, &p.calls, p.calls + 1, 2000);
	ck_assert_uint_eq(p.n, 0);
	run_for(s.base, 200);
	{
		char v[32];

		ck_assert_str_eq(other_val("SELECT count(*) FROM "
					   "acme_challenges",
					   v, sizeof(v)),
				 "0");
	}
	pgsync_free(sync);
	store_close(&s);
}
END_TEST

/* ---- environments.tls -----------------------------------------------------
 */

/* The text of file path with every `,"tls_auto":…` removed: a snapshot
 * an edge before 0026 wrote. */
static void strip_tls_auto(const char *path)
{
	static char buf[1 << 16];
	FILE *f = fopen(path, "r");
	size_t n;
	char *p;

	ck_assert_ptr_nonnull(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	ck_assert_ptr_nonnull(strstr(buf, "\"tls_auto\":true"));
	while ((p = strstr(buf, ",\"tls_auto\":"))) {
		char *v = p + strlen(",\"tls_auto\":");
		size_t skip = strncmp(v, "true", 4) == 0 ? 4 : 5;

		memmove(p, v + skip, strlen(v + skip) + 1);
	}
	ck_assert_ptr_null(strstr(buf, "tls_auto"));
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(buf, f);
	fclose(f);
}

/* Sync on base from cfg until a routes_begin holds want. */
static void sync_until(struct event_base *base, const struct pgsync_cfg *cfg,
		       const char *want)
{
	struct sync_probe p = {0};
	struct pgsync *sync;
	struct errbuf err = {""};

	stub_begins = 0;
	stub_envs[0] = '\0';
	ck_assert_int_eq(
	    pgsync_new(base, cfg, &probe_sync_ops, &p, &sync, &err), 0);
	for (int i = 0; i < 100 && strcmp(stub_envs, want) != 0; i++)
		run_until(base, &stub_begins, stub_begins + 1, 100);
	ck_assert_str_eq(stub_envs, want);
	pgsync_free(sync); /* the local snapshot written */
}

START_TEST(environments_tls_auto)
{
	struct event_base *base = event_base_new();
	char snap[] = "/tmp/test-pgacme-snap.XXXXXX";
	int fd = mkstemp(snap);
	struct pgsync_cfg cfg = {
	    .conninfo = conninfo(),
	    .host_name = "test",
	    .snapshot = snap,
	};

	ck_assert_int_ge(fd, 0);
	close(fd);
	unlink(snap);
	other_exec("INSERT INTO projects (id) VALUES ('tp');"
		   "INSERT INTO environments (id, project_id, tls) VALUES "
		   "('t-auto', 'tp', 'auto'), ('t-none', 'tp', NULL)");
	/* from the database */
	sync_until(base, &cfg, "t-auto=1 t-none=0 ");
	/* from the local snapshot (the database unreachable) */
	cfg.conninfo = "host=127.0.0.1 port=1 connect_timeout=1";
	sync_until(base, &cfg, "t-auto=1 t-none=0 ");
	/* a snapshot an edge before 0026 wrote: false */
	strip_tls_auto(snap);
	sync_until(base, &cfg, "t-auto=0 t-none=0 ");
	/* a value but NULL or 'auto' (the CHECK dropped): the environment
	 * skipped, the others applied */
	other_exec(
	    "ALTER TABLE environments DROP CONSTRAINT "
	    "environments_tls_check;"
	    "UPDATE environments SET tls = 'manual' WHERE id = 't-auto'");
	cfg.conninfo = conninfo();
	sync_until(base, &cfg, "t-none=0 ");
	other_exec(
	    "DELETE FROM projects WHERE id = 'tp';"
	    "ALTER TABLE environments ADD CONSTRAINT "
	    "environments_tls_check CHECK (tls IS NULL OR tls = 'auto')");
	unlink(snap);
	event_base_free(base);
}
END_TEST

/* ---- certificates ---------------------------------------------------------
 */

/* Whether a certificate_change notification reached o within ms. */
static bool other_notified(PGconn *o, int ms)
{
	PGnotify *n;

	for (int i = 0; i < ms / 20; i++) {
		PQconsumeInput(o);
		if ((n = PQnotifies(o))) {
			bool ok = strcmp(n->relname, "certificate_change") == 0;

			PQfreemem(n);
			return ok;
		}
		usleep(20000);
	}
	return false;
}

START_TEST(save_upserts_one_row)
{
	struct store s;
	struct calls c = {0};
	PGconn *l = other();
	PGresult *r;
	char v[256];

	r = PQexec(l, "LISTEN certificate_change");
	ck_assert_int_eq(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	store_open(&s);
	pgacme_ops.save(s.a, "s.example.com", "CHAIN-1", "KEY-1", save_done,
			&c);
	ck_assert_int_eq(c.save, 0);
	ck_assert(run_until(s.base, &c.save, 1, 10000));
	ck_assert_int_eq(c.save_rc, 0);
	ck_assert_str_eq(c.why, "");
	ck_assert_msg(other_notified(l, 3000), "no certificate_change");
	ck_assert_str_eq(
	    other_val("SELECT count(*) || ' ' || array_to_string(names, ',') "
		      "|| ' ' || chain_pem || ' ' || key_pem || ' ' || comment "
		      "FROM certificates WHERE acme_name = 's.example.com' "
		      "GROUP BY names, chain_pem, key_pem, comment",
		      v, sizeof(v)),
	    "1 s.example.com CHAIN-1 KEY-1 acme");
	pgacme_ops.save(s.a, "s.example.com", "CHAIN-2", "KEY-2", save_done,
			&c);
	ck_assert(run_until(s.base, &c.save, 2, 10000));
	ck_assert_int_eq(c.save_rc, 0);
	ck_assert_msg(other_notified(l, 3000), "no certificate_change");
	ck_assert_str_eq(other_val("SELECT count(*) FROM certificates WHERE "
				   "acme_name = 's.example.com'",
				   v, sizeof(v)),
			 "1");
	ck_assert_str_eq(other_val("SELECT chain_pem || ' ' || key_pem FROM "
				   "certificates WHERE acme_name = "
				   "'s.example.com'",
				   v, sizeof(v)),
			 "CHAIN-2 KEY-2");
	/* refused by the database: its message, never the key (the shell
	 * script checks the log holds no SECRET-KEY-MATERIAL either) */
	other_exec("ALTER TABLE certificates ADD CONSTRAINT test_no_bad "
		   "CHECK (chain_pem <> 'BAD-CHAIN')");
	pgacme_ops.save(s.a, "s.example.com", "BAD-CHAIN",
			"SECRET-KEY-MATERIAL", save_done, &c);
	ck_assert(run_until(s.base, &c.save, 3, 10000));
	ck_assert_int_lt(c.save_rc, 0);
	ck_assert_msg(strstr(c.why, "test_no_bad") != NULL, "why: %s", c.why);
	ck_assert_msg(strstr(c.why, "SECRET") == NULL, "why: %s", c.why);
	other_exec("ALTER TABLE certificates DROP CONSTRAINT test_no_bad");
	ck_assert_str_eq(other_val("SELECT chain_pem FROM certificates WHERE "
				   "acme_name = 's.example.com'",
				   v, sizeof(v)),
			 "CHAIN-2");
	PQfinish(l);
	store_close(&s);
}
END_TEST

/* ---- the database away, forget, the bound ----------------------------------
 */

START_TEST(database_stopped_and_back)
{
	struct store s;
	struct calls c = {0};
	const struct acme_chal_row r = {"x.example.com", ACME_CHAL_HTTP01,
					"tok-x", "tok-x.thumb"};

	store_open(&s);
	ck_assert_int_eq(lease(&s, &c, "x.example.com", "host-a", 60), 1);
	shell("EDGE_PG_STOP");
	/* pending when the connection goes: each ends with an error */
	pgacme_ops.lease(s.a, "x.example.com", "host-a", 60, lease_done, &c);
	pgacme_ops.publish(s.a, &r, "host-a", 60, publish_done, &c);
	pgacme_ops.save(s.a, "x.example.com", "C", "K", save_done, &c);
	ck_assert_int_eq(c.any, 1);
	ck_assert_msg(run_until(s.base, &c.any, 4, 15000),
		      "%d of 3 pending calls ended", c.any - 1);
	ck_assert_int_lt(c.lease_rc, 0);
	ck_assert_int_lt(c.publish_rc, 0);
	ck_assert_int_lt(c.save_rc, 0);
	/* while it is away: at once (from the loop), an error */
	run_for(s.base, 300);
	ck_assert(!pgacme_up(s.a));
	pgacme_ops.lease(s.a, "x.example.com", "host-a", 60, lease_done, &c);
	ck_assert_int_eq(c.lease, 2);
	ck_assert(run_until(s.base, &c.lease, 3, 2000));
	ck_assert_int_lt(c.lease_rc, 0);
	shell("EDGE_PG_START");
	for (int i = 0; i < 150 && !pgacme_up(s.a); i++)
		run_for(s.base, 100);
	ck_assert_msg(pgacme_up(s.a), "not connected again in 15 s");
	ck_assert_int_eq(lease(&s, &c, "x.example.com", "host-a", 60), 1);
	pgacme_ops.save(s.a, "x.example.com", "C", "K", save_done, &c);
	ck_assert(run_until(s.base, &c.save, 2, 10000));
	ck_assert_int_eq(c.save_rc, 0);
	store_close(&s);
}
END_TEST

START_TEST(forget_drops_every_done)
{
	struct store s;
	struct calls c = {0};
	const struct acme_chal_row r = {"f.example.com", ACME_CHAL_HTTP01,
					"tok-f", "tok-f.thumb"};
	char v[32];

	store_open(&s);
	ck_assert_int_eq(lease(&s, &c, "warm.example.com", "host-a", 60), 1);
	c.any = 0;
	pgacme_ops.lease(s.a, "f.example.com", "host-a", 60, lease_done, &c);
	pgacme_ops.publish(s.a, &r, "host-a", 60, publish_done, &c);
	pgacme_ops.save(s.a, "f.example.com", "C", "K", save_done, &c);
	/* one the bound refuses (ended at once, its done not run yet) */
	for (int i = 0; i < PGACME_QUEUE_MAX + 2; i++)
		pgacme_ops.lease(s.a, "g.example.com", "host-a", 60, lease_done,
				 &c);
	ck_assert_int_eq(c.any, 0);
	pgacme_ops.forget(s.a);
	run_for(s.base, 1500);
	ck_assert_int_eq(c.any, 0);
	/* the queued statements ran all the same */
	ck_assert_str_eq(other_val("SELECT count(*) FROM acme_challenges "
				   "WHERE token = 'tok-f'",
				   v, sizeof(v)),
			 "1");
	pgacme_ops.unpublish(s.a, "tok-f");
	/* the store still works for calls after */
	ck_assert_int_eq(lease(&s, &c, "f.example.com", "host-a", 60), 1);
	store_close(&s);
}
END_TEST

START_TEST(queue_bounded)
{
	struct store s;
	struct calls c = {0};
	int n = PGACME_QUEUE_MAX + 20;

	store_open(&s);
	/* before the connection is up: they wait, the bound refuses the
	 * rest */
	for (int i = 0; i < n; i++)
		pgacme_ops.lease(s.a, "q.example.com", "host-a", 60, lease_done,
				 &c);
	ck_assert_int_eq(c.any, 0);
	ck_assert(run_until(s.base, &c.lease, n, 20000));
	ck_assert_int_eq(c.lease_err, n - PGACME_QUEUE_MAX);
	store_close(&s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pgacme");
	TCase *tc = tcase_create("real server");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, lease_one_holder_at_a_time);
	tcase_add_test(tc, challenges_published_read_unpublished);
	tcase_add_test(tc, save_upserts_one_row);
	tcase_add_test(tc, environments_tls_auto);
	tcase_add_test(tc, forget_drops_every_done);
	tcase_add_test(tc, queue_bounded);
	tcase_add_test(tc, database_stopped_and_back);
	suite_add_tcase(s, tc);
	/* a line per case (CK_VERBOSE): test_pgacme.sh reports each */
	sr = srunner_create(s);
	srunner_run_all(sr, CK_VERBOSE);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
