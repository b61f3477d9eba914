/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cmd_ip_pg.c - edgectl --pg ip block|allow|del|list: the fleet's rules,
 * kept in the database's ip_rules table. A global rule (no --project)
 * goes into every host's XDP maps, a project's rule into that project's
 * routes; edged on each host applies the change (LISTEN/NOTIFY).
 *
 * The arguments are parsed and checked by the local commands' parser
 * (ip_args.c) before the database is touched. Each command is one transaction,
 * so one change version: the rules it reads for the SSH lockout check and the
 * statement that changes them. Time is the database's (now()), so that a TTL
 * means the same on every host whatever this machine's clock says.
 */
#include <errno.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ctlutil.h"
#include "duration.h"
#include "ip_args.h"
#include "ip_guard.h"
#include "pgdb.h"

/* ---- the transaction ---------------------------------------------------- */

/* Begin the command's transaction and read the database's clock into
 * c->now. */
static int ippg_begin(struct ctl *c)
{
	struct errbuf err = {""};
	PGresult *res;

	if (pgdb_exec(c->db, "cannot begin", "BEGIN", 0, NULL, NULL, &err) ||
	    pgdb_exec(c->db, "cannot read the database's clock",
		      "SELECT floor(extract(epoch FROM now()))::bigint", 0,
		      NULL, &res, &err)) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	}
	c->now = pgdb_int(res, 0, 0, c->now);
	PQclear(res);
	return CTL_OK;
}

static void ippg_rollback(struct ctl *c)
{
	PQclear(PQexec(c->db, "ROLLBACK"));
}

static int ippg_commit(struct ctl *c)
{
	struct errbuf err = {""};

	if (pgdb_exec(c->db, "cannot commit; nothing was changed", "COMMIT", 0,
		      NULL, NULL, &err)) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	}
	return CTL_OK;
}

/* ---- the SSH lockout check ---------------------------------------------- */

/* rules r with x in it: replacing the rule for x's prefix, else added. */
static int ippg_rules_put(struct rules *r, const struct rule *x)
{
	struct rule *y = rules_find(r, &x->cidr), *v;

	if (y) {
		*y = *x;
		return 0;
	}
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 16;

		v = realloc(r->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n++] = *x;
	return 0;
}

/*
 * What decides the caller's SSH session on this host: the database's
 * global rules with the state file's over them (a local rule for the same
 * prefix wins on this host), and the local policy and ports.
 */
struct ippg_guard {
	bool needed;	  /* SSH_CONNECTION parses: there is a session */
	struct rules db;  /* the global rules, as the database has them */
	struct state st;  /* the local state, or the defaults */
	struct rules cur; /* db with st's rules over it */
};

static void ippg_guard_free(struct ippg_guard *g)
{
	rules_free(&g->db);
	rules_free(&g->cur);
	state_free(&g->st);
}

/* g->cur = db with the local rules that have not expired over it. */
static int ippg_guard_merge(struct ippg_guard *g, const struct rules *db,
			    int64_t now)
{
	size_t i;

	rules_free(&g->cur);
	for (i = 0; i < db->n; i++)
		if (ippg_rules_put(&g->cur, &db->v[i]))
			return -ENOMEM;
	for (i = 0; i < g->st.rules.n; i++)
		if (!rules_expired(&g->st.rules.v[i], now) &&
		    ippg_rules_put(&g->cur, &g->st.rules.v[i]))
			return -ENOMEM;
	return 0;
}

/* Fill g: the global rules (in the transaction) and the local state,
 * only when there is an SSH session to protect. */
static int ippg_guard_load(struct ctl *c, struct ippg_guard *g)
{
	struct errbuf err = {""};
	struct rules_ssh ssh;
	PGresult *res;
	int i, ret;

	memset(g, 0, sizeof(*g));
	state_init(&g->st);
	g->needed = rules_ssh_parse(getenv("SSH_CONNECTION"), &ssh) == 0;
	if (!g->needed)
		return CTL_OK; /* ctl_ip_ssh_guard says what it needs to */
	ret = state_load(c->state_path, &g->st, &err);
	if (ret && ret != -ENOENT)
		log_note("%s: checking your SSH session against the database's "
			 "rules and the default policy only",
			 err.msg);
	if (pgdb_exec(c->db, "cannot read ip_rules",
		      "SELECT cidr::text, action, "
		      "       floor(extract(epoch FROM expires_at))::bigint "
		      "  FROM ip_rules WHERE project_id IS NULL",
		      0, NULL, &res, &err)) {
		log_warnx("%s", err.msg);
		PQclear(res);
		return CTL_FAIL;
	}
	for (i = 0; i < PQntuples(res); i++) {
		struct rule x;
		int64_t exp = pgdb_int(res, i, 2, 0);

		memset(&x, 0, sizeof(x));
		if (cidr_parse(PQgetvalue(res, i, 0), &x.cidr, NULL, NULL) ||
		    rules_action_parse(PQgetvalue(res, i, 1), &x.action))
			continue; /* edged skips it too */
		/* 0 means "never" in a struct rule */
		x.expires_at = PQgetisnull(res, i, 2) ? 0 : (exp > 0 ? exp : 1);
		if (ippg_rules_put(&g->db, &x)) {
			PQclear(res);
			log_warnx("out of memory");
			return CTL_FAIL;
		}
	}
	PQclear(res);
	if (ippg_guard_merge(g, &g->db, c->now)) {
		log_warnx("out of memory");
		return CTL_FAIL;
	}
	return CTL_OK;
}

/*
 * The lockout check for a change of the global rules: rule x put (a block
 * rule) or the rule for prefix gone deleted. before is g->cur; after is
 * the database's rules changed, with the local ones over them again.
 */
static int ippg_guard_change(struct ctl *c, struct ippg_guard *g,
			     const struct rule *x, const struct cidr *gone,
			     bool force, const char *what)
{
	struct rules before = g->cur;
	struct ctl_ip_view vb = {&before, g->st.policy, &g->st.ports};
	struct ctl_ip_view va = {&g->cur, g->st.policy, &g->st.ports};
	int ret;

	g->cur = (struct rules){0};
	if (gone)
		rules_del(&g->db, gone, NULL);
	if ((x && ippg_rules_put(&g->db, x)) ||
	    ippg_guard_merge(g, &g->db, c->now)) {
		rules_free(&before);
		log_warnx("out of memory");
		return CTL_FAIL;
	}
	if (x)
		ret = ctl_ip_guard_block(c, &vb, &va, &x->cidr, force, what);
	else
		ret = ctl_ip_ssh_guard(c, &vb, &va, false, force, what);
	rules_free(&before);
	return ret;
}

/* ---- block, allow ------------------------------------------------------ */

static void ippg_describe(const struct ctl *c, const char *action,
			  const char *cidr, int64_t expires_at,
			  const char *comment, char *buf, size_t len)
{
	char d[DURATION_STR_MAX];
	int n;

	n = snprintf(buf, len, "%s %s", action, cidr);
	if (n < 0 || (size_t)n >= len)
		return;
	if (expires_at > 0)
		n += snprintf(
		    buf + n, len - (size_t)n, " (expires in %s)",
		    duration_format(expires_at > c->now
					? (uint64_t)(expires_at - c->now)
					: 0,
				    d, sizeof(d)));
	if (n >= 0 && (size_t)n < len && comment && *comment)
		snprintf(buf + n, len - (size_t)n, " \"%s\"", comment);
}

static const char ippg_upsert_global[] =
    "INSERT INTO ip_rules (cidr, action, project_id, expires_at, comment) "
    "VALUES ($1::cidr, $2, NULL, now() + $3::bigint * interval '1 s', $4) "
    "ON CONFLICT (cidr) WHERE project_id IS NULL DO UPDATE SET "
    "  action = EXCLUDED.action, expires_at = EXCLUDED.expires_at, "
    "  comment = EXCLUDED.comment "
    "RETURNING id, xmax = 0, floor(extract(epoch FROM expires_at))::bigint";

static const char ippg_upsert_project[] =
    "INSERT INTO ip_rules (cidr, action, project_id, expires_at, comment) "
    "VALUES ($1::cidr, $2, $5, now() + $3::bigint * interval '1 s', $4) "
    "ON CONFLICT (project_id, cidr) WHERE project_id IS NOT NULL "
    "DO UPDATE SET "
    "  action = EXCLUDED.action, expires_at = EXCLUDED.expires_at, "
    "  comment = EXCLUDED.comment "
    "RETURNING id, xmax = 0, floor(extract(epoch FROM expires_at))::bigint";

/* Refuse a new global rule past what the XDP maps hold. */
static int ippg_room(struct ctl *c, const char *cidr)
{
	struct errbuf err = {""};
	const char *params[1] = {cidr};
	PGresult *res;
	int64_t n;

	if (pgdb_exec(c->db, "cannot count ip_rules",
		      "SELECT count(*) FROM ip_rules WHERE project_id IS NULL "
		      "AND (expires_at IS NULL OR expires_at > now()) "
		      "AND cidr <> $1::cidr",
		      1, params, &res, &err)) {
		log_warnx("%s", err.msg);
		PQclear(res);
		return CTL_FAIL;
	}
	n = pgdb_int(res, 0, 0, 0);
	PQclear(res);
	/* the maps' ids above the host's own are the database's */
	if (n >= EDGE_MAX_RULES - EDGE_LOCAL_RULES_MAX) {
		log_warnx("rule table full: the database holds %lld global "
			  "rules, as many as the XDP maps hold (%d)",
			  (long long)n, EDGE_MAX_RULES - EDGE_LOCAL_RULES_MAX);
		return CTL_FAIL;
	}
	return CTL_OK;
}

static int ippg_set(struct ctl *c, const struct ctl_ip_args *a)
{
	char cidr[CIDR_STR_MAX], ttl_text[24], desc[512], where[96];
	const char *comment = a->comment, *project = a->project;
	const char *params[5];
	struct errbuf err = {""};
	struct ippg_guard g;
	struct rule x;
	PGresult *res = NULL;
	uint64_t ttl = a->ttl;
	bool created;
	int ret;

	memset(&x, 0, sizeof(x));
	x.action = a->action;
	x.cidr = a->cidr;
	cidr_format(&x.cidr, cidr, sizeof(cidr));
	snprintf(ttl_text, sizeof(ttl_text), "%llu", (unsigned long long)ttl);

	ret = ctl_db_open(c, pgdb_latest());
	if (ret)
		return ret;
	ret = ippg_begin(c);
	if (ret)
		return ret;
	if (!project) {
		x.expires_at = ttl ? c->now + (int64_t)ttl : 0;
		snprintf(where, sizeof(where), "block %s", a->arg);
		ret = ippg_guard_load(c, &g);
		if (ret == CTL_OK && x.action == EDGE_ACT_BLOCK)
			ret =
			    ippg_guard_change(c, &g, &x, NULL, a->force, where);
		ippg_guard_free(&g);
		if (ret == CTL_OK)
			ret = ippg_room(c, cidr);
		if (ret) {
			ippg_rollback(c);
			return ret;
		}
	}
	params[0] = cidr;
	params[1] = rules_action_name(x.action);
	params[2] = ttl ? ttl_text : NULL;
	params[3] = *comment ? comment : NULL;
	params[4] = project;
	if (pgdb_exec(c->db, "cannot save the rule",
		      project ? ippg_upsert_project : ippg_upsert_global,
		      project ? 5 : 4, params, &res, &err)) {
		if (project && strcmp(pgdb_sqlstate(res), "23503") == 0)
			log_warnx("no project '%s' in the database; nothing "
				  "was changed",
				  project);
		else
			log_warnx("%s; nothing was changed", err.msg);
		PQclear(res);
		ippg_rollback(c);
		return CTL_FAIL;
	}
	created = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
	ippg_describe(c, rules_action_name(x.action), cidr,
		      pgdb_int(res, 0, 2, 0), comment, desc, sizeof(desc));
	printf("%s: %s; rule %s in the database, for ",
	       created ? "added" : "updated", desc, PQgetvalue(res, 0, 0));
	if (project)
		printf("project %s\n", project);
	else
		printf("every host\n");
	PQclear(res);
	return ippg_commit(c);
}

/* ---- del ---------------------------------------------------------------- */

static int ippg_del(struct ctl *c, const struct ctl_ip_args *a)
{
	char cidr[CIDR_STR_MAX], desc[512], where[96];
	const char *project = a->project, *params[2];
	struct errbuf err = {""};
	struct ippg_guard g;
	PGresult *res = NULL;
	int ret;

	cidr_format(&a->cidr, cidr, sizeof(cidr));

	ret = ctl_db_open(c, pgdb_latest());
	if (ret)
		return ret;
	ret = ippg_begin(c);
	if (ret)
		return ret;
	if (!project) {
		snprintf(where, sizeof(where), "delete the rule for %s", cidr);
		ret = ippg_guard_load(c, &g);
		if (ret == CTL_OK)
			ret = ippg_guard_change(c, &g, NULL, &a->cidr, a->force,
						where);
		ippg_guard_free(&g);
		if (ret) {
			ippg_rollback(c);
			return ret;
		}
	}
	params[0] = cidr;
	params[1] = project;
	if (pgdb_exec(c->db, "cannot delete the rule",
		      project ? "DELETE FROM ip_rules WHERE cidr = $1::cidr "
				"AND project_id = $2 "
				"RETURNING id, action, floor(extract(epoch "
				"FROM expires_at))::bigint, comment"
			      : "DELETE FROM ip_rules WHERE cidr = $1::cidr "
				"AND project_id IS NULL "
				"RETURNING id, action, floor(extract(epoch "
				"FROM expires_at))::bigint, comment",
		      project ? 2 : 1, params, &res, &err)) {
		log_warnx("%s; nothing was changed", err.msg);
		PQclear(res);
		ippg_rollback(c);
		return CTL_FAIL;
	}
	if (PQntuples(res) == 0) {
		if (project)
			log_warnx("no rule for %s in project %s", cidr,
				  project);
		else
			log_warnx("no rule for %s (a global rule; --project "
				  "for a project's)",
				  cidr);
		PQclear(res);
		ippg_rollback(c);
		return CTL_FAIL;
	}
	ippg_describe(c, PQgetvalue(res, 0, 1), cidr, pgdb_int(res, 0, 2, 0),
		      PQgetisnull(res, 0, 3) ? "" : PQgetvalue(res, 0, 3), desc,
		      sizeof(desc));
	printf("deleted: %s; rule %s in the database, for ", desc,
	       PQgetvalue(res, 0, 0));
	if (project)
		printf("project %s\n", project);
	else
		printf("every host\n");
	PQclear(res);
	return ippg_commit(c);
}

/* ---- list --------------------------------------------------------------- */

enum {
	L_ID,
	L_CIDR,
	L_FAMILY,
	L_ACTION,
	L_PROJECT,
	L_EXPIRES,
	L_TTL,
	L_COMMENT,
	L_HITS,
};

/* Every unexpired rule: the global ones first, then by project; by
 * family, address and prefix length within each. Hits: the sum of what
 * the hosts report for the rule's id in edge_hosts.rule_hits (NULL when
 * none does). */
static const char ippg_list_sql[] =
    "SELECT r.id, r.cidr::text, family(r.cidr), r.action, r.project_id, "
    "       floor(extract(epoch FROM r.expires_at))::bigint, "
    "       ceil(extract(epoch FROM r.expires_at - now()))::bigint, "
    "       r.comment, "
    "       (SELECT CASE WHEN count(*) > 0 THEN "
    "                 least(sum((h.rule_hits ->> r.id::text)::numeric), "
    "                       9223372036854775807)::bigint END "
    "          FROM edge_hosts h "
    "         WHERE jsonb_typeof(h.rule_hits -> r.id::text) = 'number') "
    "  FROM ip_rules r "
    " WHERE r.expires_at IS NULL OR r.expires_at > now() "
    " ORDER BY r.project_id NULLS FIRST, family(r.cidr), r.cidr";

static const char *ippg_str(const PGresult *res, int i, int col,
			    const char *dflt)
{
	return PQgetisnull(res, i, col) ? dflt : PQgetvalue(res, i, col);
}

static int ippg_list(struct ctl *c, const struct ctl_ip_args *a)
{
	struct errbuf err = {""};
	PGresult *res = NULL;
	json_t *arr = NULL;
	bool json = a->json;
	int i, n, ret, wc = 4, wp = 7;

	ret = ctl_db_open(c, 1);
	if (ret)
		return ret;
	if (pgdb_exec(c->db, "cannot read ip_rules", ippg_list_sql, 0, NULL,
		      &res, &err)) {
		log_warnx("%s", err.msg);
		PQclear(res);
		return CTL_FAIL;
	}
	n = PQntuples(res);
	if (json)
		arr = json_array();
	for (i = 0; i < n; i++) {
		int l = (int)strlen(PQgetvalue(res, i, L_CIDR));
		int p = (int)strlen(ippg_str(res, i, L_PROJECT, "-"));

		wc = l > wc ? l : wc;
		wp = p > wp ? p : wp;
	}
	for (i = 0; i < n; i++) {
		int64_t ttl = pgdb_int(res, i, L_TTL, -1);
		int64_t hits = pgdb_int(res, i, L_HITS, -1);
		bool has_exp = !PQgetisnull(res, i, L_EXPIRES);
		const char *comment = ippg_str(res, i, L_COMMENT, "");
		char d[DURATION_STR_MAX], h[32];

		if (json) {
			json_t *x = json_pack(
			    "{s:I,s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:s}", "id",
			    (json_int_t)pgdb_int(res, i, L_ID, 0), "cidr",
			    PQgetvalue(res, i, L_CIDR), "family",
			    pgdb_int(res, i, L_FAMILY, 4) == 4 ? "ipv4"
							       : "ipv6",
			    "action", PQgetvalue(res, i, L_ACTION), "project",
			    PQgetisnull(res, i, L_PROJECT)
				? json_null()
				: json_string(PQgetvalue(res, i, L_PROJECT)),
			    "expires_at",
			    has_exp ? json_integer((json_int_t)pgdb_int(
					  res, i, L_EXPIRES, 0))
				    : json_null(),
			    "ttl_remaining",
			    has_exp ? json_integer((json_int_t)ttl)
				    : json_null(),
			    "hits",
			    hits < 0 ? json_null()
				     : json_integer((json_int_t)hits),
			    "comment", comment);

			if (!x || json_array_append_new(arr, x)) {
				json_decref(arr);
				PQclear(res);
				log_warnx("out of memory");
				return CTL_FAIL;
			}
			continue;
		}
		if (i == 0)
			printf("%-6s  %-6s  %-*s  %-*s  %-10s  %12s  %s\n",
			       "ID", "ACTION", wc, "CIDR", wp, "PROJECT", "TTL",
			       "HITS", "COMMENT");
		if (hits < 0)
			snprintf(h, sizeof(h), "-");
		else
			snprintf(h, sizeof(h), "%lld", (long long)hits);
		printf("%-6s  %-6s  %-*s  %-*s  %-10s  %12s%s%s\n",
		       PQgetvalue(res, i, L_ID), PQgetvalue(res, i, L_ACTION),
		       wc, PQgetvalue(res, i, L_CIDR), wp,
		       ippg_str(res, i, L_PROJECT, "-"),
		       has_exp ? duration_format(ttl > 0 ? (uint64_t)ttl : 0, d,
						 sizeof(d))
			       : "-",
		       h, *comment ? "  " : "", comment);
	}
	PQclear(res);
	if (json)
		return ctl_json_print(arr);
	if (n == 0)
		printf("no rules in the database\n");
	return CTL_OK;
}

int ctl_ip_pg(struct ctl *c, const struct ctl_ip_args *a)
{
	if (a->sub == CTL_IP_SET)
		return ippg_set(c, a);
	if (a->sub == CTL_IP_DEL)
		return ippg_del(c, a);
	return ippg_list(c, a);
}
