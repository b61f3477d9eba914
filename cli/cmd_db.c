/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cmd_db.c - edgectl's commands on the fleet's PostgreSQL (--pg): db
 * migrate, db status, hosts, and the database's line of status.
 *
 * Every message that may carry the connection string's text goes through
 * lib/pgdb's masking: no password is ever printed.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctlutil.h"
#include "duration.h"
#include "pgdb.h"

/* A host not seen for this long is "stale" (hosts report every few
 * seconds); hosts --stale changes it. */
#define CTL_HOST_STALE_S 30

/* usage error unless --pg was given. */
static int ctl_db_needed(const struct ctl *c, const char *cmd)
{
	if (c->pg)
		return CTL_OK;
	return ctl_usage_error(cmd,
			       "%s: needs a database: --pg CONNINFO or "
			       "EDGE_PG",
			       cmd);
}

/* ---- db migrate --------------------------------------------------------- */

static void db_migrated(int version, const char *name, void *arg)
{
	(void)arg;
	printf("applied: %04d_%s\n", version, name);
	fflush(stdout);
}

static int db_migrate(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct errbuf err = {""};
	char host[256], by[512], where[512];
	int o, ret, applied = 0, v = 0;

	optind = 0;
	while ((o = ctl_getopt(argc, argv, ":h", opts, "db migrate")) != -1) {
		if (o == 'h')
			return ctl_usage_print("db migrate");
		return CTL_USAGE;
	}
	if (optind < argc)
		return ctl_usage_error("db migrate",
				       "db migrate: unexpected argument '%s'",
				       argv[optind]);
	ret = ctl_db_needed(c, "db migrate");
	if (ret)
		return ret;
	if (ctl_db_connect(c, &err)) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	}
	if (gethostname(host, sizeof(host)) || !host[0])
		snprintf(host, sizeof(host), "unknown");
	host[sizeof(host) - 1] = '\0';
	snprintf(by, sizeof(by), "%s edgectl %s", host, EDGECTL_VERSION);
	ret = pgdb_migrate(c->db, by, db_migrated, NULL, &applied, &err);
	if (ret) {
		log_warnx("%s", err.msg);
		if (applied)
			log_note("%d migration%s applied before that one",
				 applied, applied == 1 ? " was" : "s were");
		return CTL_FAIL;
	}
	if (pgdb_schema_version(c->db, &v, &err)) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	}
	printf("schema: version %d, up to date%s (%s)\n", v,
	       applied ? "" : "; nothing to apply",
	       pgdb_describe(c->db, where, sizeof(where)));
	return CTL_OK;
}

/* ---- db status -------------------------------------------------------- */

/* The migrations edge_schema records, as a JSON array. */
static json_t *db_applied_json(struct ctl *c, struct errbuf *err)
{
	PGresult *res;
	json_t *arr;
	int i;

	if (pgdb_exec(c->db, "cannot read edge_schema",
		      "SELECT version, floor(extract(epoch FROM applied_at)), "
		      "applied_by FROM edge_schema ORDER BY version",
		      0, NULL, &res, err)) {
		PQclear(res);
		return NULL;
	}
	arr = json_array();
	for (i = 0; arr && i < PQntuples(res); i++) {
		int v = (int)pgdb_int(res, i, 0, 0);
		const char *name = pgdb_migration_name(v);

		json_array_append_new(
		    arr,
		    json_pack("{s:i,s:o,s:I,s:o}", "version", v, "name",
			      name ? json_string(name) : json_null(),
			      "applied_at", (json_int_t)pgdb_int(res, i, 1, 0),
			      "applied_by",
			      PQgetisnull(res, i, 2)
				  ? json_null()
				  : json_string(PQgetvalue(res, i, 2))));
	}
	PQclear(res);
	if (!arr)
		errbuf_set(err, "out of memory");
	return arr;
}

/* "current", "pending", "newer" or "none" for a schema version. */
static const char *db_state(int version)
{
	if (version == 0)
		return "none";
	if (version > pgdb_latest())
		return "newer";
	return version < pgdb_latest() ? "pending" : "current";
}

static json_t *db_count_json(int64_t v)
{
	return v < 0 ? json_null() : json_integer((json_int_t)v);
}

static int db_status(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct errbuf err = {""};
	struct pgdb_status st;
	char where[512];
	bool json = false;
	int o, ret, v;

	optind = 0;
	while ((o = ctl_getopt(argc, argv, ":h", opts, "db status")) != -1) {
		if (o == 'j')
			json = true;
		else if (o == 'h')
			return ctl_usage_print("db status");
		else
			return CTL_USAGE;
	}
	if (optind < argc)
		return ctl_usage_error("db status",
				       "db status: unexpected argument '%s'",
				       argv[optind]);
	ret = ctl_db_needed(c, "db status");
	if (ret)
		return ret;
	if (ctl_db_connect(c, &err) ||
	    pgdb_status(c->db, CTL_HOST_STALE_S, &st, &err)) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	}
	pgdb_describe(c->db, where, sizeof(where));
	if (json) {
		json_t *pending = json_array(), *applied = NULL, *root;

		for (v = st.version + 1; pending && v <= st.latest; v++)
			if (pgdb_migration_name(v)) /* numbers may skip */
				json_array_append_new(
				    pending,
				    json_pack("{s:i,s:s}", "version", v, "name",
					      pgdb_migration_name(v)));
		if (st.version > 0 && !(applied = db_applied_json(c, &err))) {
			json_decref(pending);
			log_warnx("%s", err.msg);
			return CTL_FAIL;
		}
		root = json_pack(
		    "{s:s,s:i,s:i,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
		    "database", where, "schema_version", st.version,
		    "edge_schema_version", st.latest, "state",
		    db_state(st.version), "pending",
		    pending ? pending : json_null(), "applied",
		    applied ? applied : json_array(), "hosts",
		    db_count_json(st.hosts), "hosts_stale",
		    db_count_json(st.hosts_stale), "hosts_behind",
		    db_count_json(st.hosts_behind), "change_version",
		    db_count_json(st.change_version), "change_seq",
		    db_count_json(st.change_seq), "stale_after_s",
		    json_integer(CTL_HOST_STALE_S));
		return ctl_json_print(root);
	}
	printf("database:       %s\n", where);
	if (st.version == 0)
		printf("schema:         none (edge's schema is not installed; "
		       "this edge knows version %d)\n",
		       st.latest);
	else if (st.version > st.latest)
		printf("schema:         version %d, newer than this edge (%d): "
		       "upgrade edge\n",
		       st.version, st.latest);
	else
		printf("schema:         version %d (this edge knows %d%s)\n",
		       st.version, st.latest,
		       st.version == st.latest ? ": up to date" : "");
	if (st.version < st.latest) {
		const char *sep = "";

		printf("pending:        ");
		for (v = st.version + 1; v <= st.latest; v++) {
			if (!pgdb_migration_name(v))
				continue; /* numbers may skip */
			printf("%s%04d_%s", sep, v, pgdb_migration_name(v));
			sep = ", ";
		}
		printf(" (edgectl db migrate)\n");
	} else {
		printf("pending:        none\n");
	}
	if (st.hosts < 0)
		return CTL_OK;
	printf("hosts:          %lld (%lld not seen for %d s, %lld behind "
	       "the change version)\n",
	       (long long)st.hosts, (long long)st.hosts_stale, CTL_HOST_STALE_S,
	       (long long)st.hosts_behind);
	printf("change version: %lld", (long long)st.change_version);
	if (st.change_seq > st.change_version)
		printf(" (sequence at %lld: later versions belong to "
		       "transactions rolled back or not yet committed)",
		       (long long)st.change_seq);
	printf("\n");
	return CTL_OK;
}

int cmd_db(struct ctl *c, int argc, char **argv)
{
	const char *sub;

	if (argc < 2)
		return ctl_usage_error(
		    "db", "db: missing subcommand (migrate, status)");
	sub = argv[1];
	if (strcmp(sub, "migrate") == 0)
		return db_migrate(c, argc - 1, argv + 1);
	if (strcmp(sub, "status") == 0)
		return db_status(c, argc - 1, argv + 1);
	if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 ||
	    strcmp(sub, "help") == 0)
		return ctl_usage_print("db");
	return ctl_usage_error("db", "db: unknown subcommand '%s'", sub);
}

/* ---- status's line ------------------------------------------------------ */

/* The status, or -errno with err set. */
static int db_status_read(struct ctl *c, struct pgdb_status *st,
			  struct errbuf *err)
{
	int ret = ctl_db_connect(c, err);

	return ret ? ret : pgdb_status(c->db, CTL_HOST_STALE_S, st, err);
}

json_t *ctl_db_status_json(struct ctl *c)
{
	struct errbuf err = {""};
	struct pgdb_status st;
	char where[512] = "";

	if (db_status_read(c, &st, &err))
		return json_pack("{s:b,s:s}", "reachable", 0, "error", err.msg);
	pgdb_describe(c->db, where, sizeof(where));
	return json_pack("{s:b,s:s,s:i,s:i,s:s,s:o,s:o,s:o,s:o}", "reachable",
			 1, "database", where, "schema_version", st.version,
			 "edge_schema_version", st.latest, "state",
			 db_state(st.version), "hosts", db_count_json(st.hosts),
			 "hosts_stale", db_count_json(st.hosts_stale),
			 "hosts_behind", db_count_json(st.hosts_behind),
			 "change_version", db_count_json(st.change_version));
}

void ctl_db_status_print(struct ctl *c)
{
	struct errbuf err = {""};
	struct pgdb_status st;
	char where[512];

	if (db_status_read(c, &st, &err)) {
		printf("database:   unreachable (%s)\n", err.msg);
		return;
	}
	pgdb_describe(c->db, where, sizeof(where));
	if (st.version == 0) {
		printf("database:   no edge schema (edgectl db migrate) (%s)\n",
		       where);
		return;
	}
	printf("database:   schema %d (%s), change version %lld, %lld host%s "
	       "(%lld stale, %lld behind) (%s)\n",
	       st.version,
	       st.version > st.latest	? "newer than this edge"
	       : st.version < st.latest ? "migrations pending"
					: "up to date",
	       (long long)st.change_version, (long long)st.hosts,
	       st.hosts == 1 ? "" : "s", (long long)st.hosts_stale,
	       (long long)st.hosts_behind, where);
}

/* ---- hosts ------------------------------------------------------------- */

/* The sum of every "dropped_*" counter of a host's xdp_counters (a JSON
 * object), -1 when it has none. */
static json_int_t hosts_dropped(const json_t *ctr)
{
	const char *name;
	json_t *v;
	json_int_t sum = 0;
	bool any = false;

	if (!json_is_object(ctr))
		return -1;
	json_object_foreach((json_t *)ctr, name, v)
	{
		if (strncmp(name, "dropped_", 8) == 0 && json_is_integer(v)) {
			sum += json_integer_value(v);
			any = true;
		}
	}
	return any ? sum : -1;
}

/* Columns of the hosts query. */
enum {
	H_NAME,
	H_VERSION,
	H_STARTED,
	H_STARTED_TEXT,
	H_SEEN,
	H_AGE,
	H_APPLIED,
	H_GENERATION,
	H_DBUP,
	H_COUNTERS,
	H_CHANGE,
};

static const char hosts_sql[] =
    "WITH cv AS (SELECT coalesce(max(version), 0) AS v FROM edge_change_log) "
    "SELECT h.name, h.edge_version, "
    "       floor(extract(epoch FROM h.started_at))::bigint, "
    "       to_char(h.started_at AT TIME ZONE 'UTC', "
    "               'YYYY-MM-DD HH24:MI:SS\"Z\"'), "
    "       floor(extract(epoch FROM h.last_seen))::bigint, "
    "       CASE WHEN h.last_seen IS NOT NULL THEN floor(greatest(0, "
    "           extract(epoch FROM now() - h.last_seen)))::bigint END, "
    "       h.applied_version, h.route_generation, h.database_up, "
    "       h.xdp_counters::text, cv.v "
    "  FROM edge_hosts h, cv ORDER BY h.name";

static const char *hosts_str(const PGresult *res, int i, int col,
			     const char *dflt)
{
	return PQgetisnull(res, i, col) ? dflt : PQgetvalue(res, i, col);
}

int cmd_hosts(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"stale", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct errbuf err = {""};
	uint64_t stale_s = CTL_HOST_STALE_S;
	int64_t change = 0;
	size_t nstale = 0, nbehind = 0;
	json_t *arr = NULL;
	PGresult *res = NULL;
	bool json = false;
	int o, i, n, w = 4, ret;

	optind = 0;
	while ((o = ctl_getopt(argc, argv, ":h", opts, "hosts")) != -1) {
		switch (o) {
		case 'j':
			json = true;
			break;
		case 's':
			if (duration_parse(optarg, &stale_s, &err))
				return ctl_usage_error(
				    "hosts", "hosts: bad --stale: %s", err.msg);
			break;
		case 'h':
			return ctl_usage_print("hosts");
		default:
			return CTL_USAGE;
		}
	}
	if (optind < argc)
		return ctl_usage_error(
		    "hosts", "hosts: unexpected argument '%s'", argv[optind]);
	ret = ctl_db_needed(c, "hosts");
	if (ret)
		return ret;
	ret = ctl_db_open(c, 1);
	if (ret)
		return ret;
	if (pgdb_exec(c->db, "cannot read edge_hosts", hosts_sql, 0, NULL, &res,
		      &err)) {
		log_warnx("%s", err.msg);
		PQclear(res);
		return CTL_FAIL;
	}
	n = PQntuples(res);
	change = n ? pgdb_int(res, 0, H_CHANGE, 0) : 0;
	if (!n) {
		/* the change version still counts */
		PGresult *cv = NULL;

		if (pgdb_exec(c->db, "cannot read edge_change_log",
			      "SELECT coalesce(max(version), 0) "
			      "FROM edge_change_log",
			      0, NULL, &cv, &err) == 0)
			change = pgdb_int(cv, 0, 0, 0);
		PQclear(cv);
	}
	if (json)
		arr = json_array();
	for (i = 0; i < n; i++) {
		int l = (int)strlen(PQgetvalue(res, i, H_NAME));

		w = l > w ? l : w;
	}
	for (i = 0; i < n; i++) {
		int64_t age = pgdb_int(res, i, H_AGE, -1);
		int64_t applied = pgdb_int(res, i, H_APPLIED, -1);
		int64_t gen = pgdb_int(res, i, H_GENERATION, -1);
		bool stale = age < 0 || (uint64_t)age > stale_s;
		/* never applied counts as 0: behind once there is a change */
		bool behind = (applied < 0 ? 0 : applied) < change;
		const char *dbup = hosts_str(res, i, H_DBUP, NULL);
		json_t *ctr = NULL;
		json_int_t dropped;
		char seen[64], appl[64], d[DURATION_STR_MAX], drops[32];

		if (!PQgetisnull(res, i, H_COUNTERS))
			ctr =
			    json_loads(PQgetvalue(res, i, H_COUNTERS), 0, NULL);
		dropped = hosts_dropped(ctr);
		nstale += stale;
		nbehind += behind;
		if (json) {
			json_t *h = json_pack(
			    "{s:s,s:o,s:o,s:o,s:o,s:b,s:o,s:b,s:o,s:o,s:o,"
			    "s:o}",
			    "name", PQgetvalue(res, i, H_NAME), "edge_version",
			    PQgetisnull(res, i, H_VERSION)
				? json_null()
				: json_string(PQgetvalue(res, i, H_VERSION)),
			    "started_at",
			    PQgetisnull(res, i, H_STARTED)
				? json_null()
				: json_integer((json_int_t)pgdb_int(
				      res, i, H_STARTED, 0)),
			    "last_seen",
			    PQgetisnull(res, i, H_SEEN)
				? json_null()
				: json_integer(
				      (json_int_t)pgdb_int(res, i, H_SEEN, 0)),
			    "last_seen_age_s",
			    age < 0 ? json_null() : json_integer(age), "stale",
			    stale, "applied_version",
			    applied < 0 ? json_null() : json_integer(applied),
			    "behind", behind, "route_generation",
			    gen < 0 ? json_null() : json_integer(gen),
			    "database_up",
			    dbup ? json_boolean(strcmp(dbup, "t") == 0)
				 : json_null(),
			    "xdp_counters",
			    ctr ? json_incref(ctr) : json_null(), "xdp_dropped",
			    dropped < 0 ? json_null() : json_integer(dropped));

			json_decref(ctr);
			if (!h || json_array_append_new(arr, h)) {
				json_decref(arr);
				PQclear(res);
				log_warnx("out of memory");
				return CTL_FAIL;
			}
			continue;
		}
		json_decref(ctr);
		if (i == 0)
			printf("%-*s  %-10s  %-20s  %-18s  %-12s  %-8s  %10s  "
			       "%12s\n",
			       w, "HOST", "VERSION", "STARTED", "LAST SEEN",
			       "APPLIED", "DATABASE", "GENERATION",
			       "XDP DROPS");
		if (age < 0)
			snprintf(seen, sizeof(seen), "never");
		else
			snprintf(seen, sizeof(seen), "%s ago%s",
				 duration_format((uint64_t)age, d, sizeof(d)),
				 stale ? ", stale" : "");
		if (applied < 0)
			snprintf(appl, sizeof(appl), "-%s",
				 behind ? ", behind" : "");
		else
			snprintf(appl, sizeof(appl), "%lld%s",
				 (long long)applied, behind ? ", behind" : "");
		if (dropped < 0)
			snprintf(drops, sizeof(drops), "-");
		else
			snprintf(drops, sizeof(drops), "%lld",
				 (long long)dropped);
		printf("%-*s  %-10s  %-20s  %-18s  %-12s  %-8s  %10s  %12s\n",
		       w, PQgetvalue(res, i, H_NAME),
		       hosts_str(res, i, H_VERSION, "-"),
		       hosts_str(res, i, H_STARTED_TEXT, "-"), seen, appl,
		       dbup ? (strcmp(dbup, "t") == 0 ? "up" : "down") : "-",
		       hosts_str(res, i, H_GENERATION, "-"), drops);
	}
	PQclear(res);
	if (json) {
		json_t *root =
		    arr ? json_pack("{s:I,s:I,s:o}", "change_version",
				    (json_int_t)change, "stale_after_s",
				    (json_int_t)stale_s, "hosts", arr)
			: NULL;

		return ctl_json_print(root);
	}
	if (n == 0)
		printf("no hosts (change version %lld)\n", (long long)change);
	else
		printf("change version %lld: %d host%s, %zu stale (not seen "
		       "for %llu s), %zu behind\n",
		       (long long)change, n, n == 1 ? "" : "s", nstale,
		       (unsigned long long)stale_s, nbehind);
	return CTL_OK;
}
