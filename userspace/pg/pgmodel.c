// SPDX-License-Identifier: BSD-2-Clause
/*
 * pgmodel.c - the database's routing rows as edged holds them
 * (pgmodel.h): checked as they arrive, kept per project in an array
 * sorted by id, applied in slices, turned into a route source (the file
 * they are saved to and loaded from: pgmodel_snap.c).
 */
#include <errno.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clk.h"
#include "config_check.h"
#include "edge_maps.h"
#include "fauth.h"
#include "pgmodel.h"
#include "pgmodel_int.h"
#include "tls_up.h"

/* Columns of each set (enum pgm_set). */
static const int pgm_cols[PGM_NSETS] = {3, 22, 10, 2, 8, 5, 6, 3};

const char *const pgm_env_states[PGM_ENV_NSTATES] = {"running", "sleeping",
						     "waking"};

int pgm_env_state_parse(const char *s)
{
	int i;

	for (i = 0; i < PGM_ENV_NSTATES; i++)
		if (strcmp(s, pgm_env_states[i]) == 0)
			return i;
	return -1;
}

int pgm_new(struct pgm **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

struct pgm_project *pgm_project_get(struct pgm_project *p)
{
	atomic_fetch_add_explicit(&p->ref, 1, memory_order_relaxed);
	return p;
}

void pgm_project_free(struct pgm_project *p)
{
	size_t i, j;

	if (!p ||
	    atomic_fetch_sub_explicit(&p->ref, 1, memory_order_acq_rel) != 1)
		return;
	for (i = 0; i < p->n_envs; i++) {
		struct pgm_env *e = &p->envs[i];

		free(e->id);
		free(e->name);
		free(e->dep);
		free(e->hc_err);
		if (e->tls_held)
			tls_up_release(&e->tls);
		free(e->tls_err);
		free(e->sp_err);
		free(e->up_err);
		hrules_free(&e->headers);
		hredirects_free(&e->redirects);
		compress_free(&e->compression);
		inject_free(&e->inject);
		auth_gate_put(e->auth);
		free(e->jwt);
		free(e->auth_request);
		for (j = 0; j < e->n_keys; j++)
			free(e->keys[j].name);
		free(e->keys);
		free(e->eps);
		for (j = 0; j < e->n_doms; j++) {
			free(e->doms[j].domain);
			free(e->doms[j].prefix);
		}
		free(e->doms);
		free(e->tcp);
	}
	free(p->envs);
	free(p->rules);
	free(p->id);
	free(p->name);
	free(p);
}

void pgm_clear(struct pgm *m)
{
	size_t i;

	for (i = 0; i < m->n; i++)
		pgm_project_free(m->p[i]);
	m->n = 0;
	free(m->global);
	m->global = NULL;
	m->n_global = 0;
}

void pgm_free(struct pgm *m)
{
	if (!m)
		return;
	pgm_clear(m);
	free(m->p);
	free(m->live);
	free(m);
}

/* ---- the statements -------------------------------------------------- */

char *pgm_fetch_sql(PGconn *conn, const char *const *ids, size_t n, bool rules)
{
	char *arr = NULL, *lit = NULL, *sql = NULL, *cp = NULL, *ce = NULL;
	char *cr = NULL;
	size_t i, len = 3, k;
	int rc = -1;

	if (ids) {
		/* '{"id","id"}' with quotes and backslashes escaped */
		for (i = 0; i < n; i++)
			len += 2 * strlen(ids[i]) + 3;
		arr = malloc(len);
		if (!arr)
			return NULL;
		k = 0;
		arr[k++] = '{';
		for (i = 0; i < n; i++) {
			const char *s;

			if (i)
				arr[k++] = ',';
			arr[k++] = '"';
			for (s = ids[i]; *s; s++) {
				if (*s == '"' || *s == '\\')
					arr[k++] = '\\';
				arr[k++] = *s;
			}
			arr[k++] = '"';
		}
		arr[k++] = '}';
		arr[k] = '\0';
		lit = PQescapeLiteral(conn, arr, k);
		free(arr);
		if (!lit)
			return NULL;
		if (asprintf(&cp, "p.id = ANY(%s::text[])", lit) < 0)
			cp = NULL;
		if (asprintf(&ce, "e.project_id = ANY(%s::text[])", lit) < 0)
			ce = NULL;
		if (asprintf(&cr, "r.project_id = ANY(%s::text[])%s", lit,
			     rules ? " OR r.project_id IS NULL" : "") < 0)
			cr = NULL;
		PQfreemem(lit);
	} else {
		cp = strdup("true");
		ce = strdup("true");
		cr = strdup("true");
	}
	if (cp && ce && cr)
		rc = asprintf(
		    &sql,
		    "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;"
		    "SELECT COALESCE(max(version), 0) FROM edge_change_log;"
		    "SELECT p.id, p.name, p.enabled FROM projects p WHERE %s;"
		    /* idle_timeout in seconds (numeric, as text): checked
		     * here, not cast, so that a bad one skips its row
		     * rather than failing the fetch */
		    "SELECT e.id, e.project_id, e.name, e.on_demand, e.state, "
		    "extract(epoch FROM e.idle_timeout)::text, "
		    "e.https_redirect, e.hsts, e.headers::text, "
		    "e.redirects::text, e.unmatched, e.compression::text, "
		    "e.inject::text, e.challenge_mode, "
		    "e.challenge_difficulty::text, "
		    "extract(epoch FROM e.challenge_ttl)::text, "
		    "e.api_keys, e.jwt::text, e.auth_request::text, e.tls, "
		    "extract(epoch FROM e.idle_timeout_background)::text, "
		    "e.shed FROM environments e "
		    "WHERE %s;"
		    "SELECT d.id, d.environment_id, d.health_check::text, "
		    "d.tls::text, d.send_proxy, d.retry::text, "
		    "d.circuit::text, "
		    "extract(epoch FROM d.request_total)::text, "
		    "d.hedge::text, d.max_inflight::text FROM "
		    "deployments d JOIN "
		    "environments e ON e.id = d.environment_id WHERE d.active "
		    "AND %s;"
		    "SELECT n.deployment_id, n.address FROM endpoints n JOIN "
		    "deployments d ON d.id = n.deployment_id JOIN environments "
		    "e ON e.id = d.environment_id WHERE d.active AND %s "
		    "ORDER BY n.deployment_id, n.address;"
		    "SELECT m.domain, m.path_prefix, m.strip_prefix, "
		    "m.environment_id, m.wake, m.activity, "
		    "extract(epoch FROM m.request_total)::text, m.shed "
		    "FROM domains m JOIN environments e ON "
		    "e.id = m.environment_id WHERE %s;"
		    /* expires_at in whole seconds, rounded up: NULL and
		     * 'infinity' never (0; extract gives Infinity, which
		     * no bigint holds: the whole fetch would fail), every
		     * time until the epoch's first second -1 (long past:
		     * 0 would say never) */
		    "SELECT r.id, r.cidr, r.action, r.project_id, "
		    "CASE WHEN r.expires_at IS NULL OR "
		    "r.expires_at = 'infinity' THEN 0 "
		    "WHEN r.expires_at < 'epoch'::timestamptz + "
		    "interval '1 second' THEN -1 "
		    "ELSE ceil(extract(epoch FROM r.expires_at))::bigint END "
		    "FROM ip_rules r WHERE %s ORDER BY r.id;"
		    "SELECT t.id, t.listen, t.sni, t.environment_id, "
		    "t.proxy_protocol, t.send_proxy FROM "
		    "tcp_routes t JOIN environments e ON e.id = "
		    "t.environment_id WHERE %s ORDER BY t.id;"
		    "SELECT k.environment_id, k.name, k.key_sha256 FROM "
		    "api_keys k JOIN environments e ON e.id = "
		    "k.environment_id WHERE %s;"
		    "COMMIT",
		    cp, ce, ce, ce, ce, cr, ce, ce);
	free(cp);
	free(ce);
	free(cr);
	return rc < 0 ? NULL : sql;
}

/* ---- applying result sets ---------------------------------------------- */

int pgm_cmp_project(const void *a, const void *b)
{
	const struct pgm_project *const *x = a, *const *y = b;

	return strcmp((*x)->id, (*y)->id);
}

/* The index of project id in the sorted array v[0..n), or where it would
 * go (*found says which). */
static size_t pgm_find(struct pgm_project *const *v, size_t n, const char *id,
		       bool *found)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(v[mid]->id, id);

		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

/* An env of the fetched projects, by id (a sorted index). */
struct pgm_ref {
	const char *key;
	struct pgm_env *env;
};

static int pgm_cmp_ref(const void *a, const void *b)
{
	return strcmp(((const struct pgm_ref *)a)->key,
		      ((const struct pgm_ref *)b)->key);
}

static struct pgm_env *pgm_ref_find(const struct pgm_ref *v, size_t n,
				    const char *key)
{
	struct pgm_ref k = {key, NULL}, *r;

	r = n ? bsearch(&k, v, n, sizeof(*v), pgm_cmp_ref) : NULL;
	return r ? r->env : NULL;
}

/* Grow *v (of *n elements of sz) by one zeroed element; NULL: no memory.
 * The room doubles (it is the power of two at or above *n, so it needs no
 * field of its own): an array grown only here costs O(n) copies, where
 * one realloc per element was quadratic (90,000 global rules: minutes
 * under ASan, whose realloc always copies). */
void *pgm_grow(void **v, size_t *n, size_t sz)
{
	char *nv = *v;

	if ((*n & (*n - 1)) == 0) { /* 0 or a power of two: full */
		size_t room = *n ? *n * 2 : 1;

		if (room > SIZE_MAX / sz)
			return NULL;
		nv = realloc(*v, room * sz);
		if (!nv)
			return NULL;
		*v = nv;
	}
	memset(nv + *n * sz, 0, sz);
	return nv + (*n)++ * sz;
}

char *pgm_dup(const char *s)
{
	return strdup(s ? s : "");
}

/* A row that does not parse: said and counted, then skipped. */
static void pgm_bad(uint64_t *count, const char *table, const char *key,
		    const char *why)
{
	(*count)++;
	log_warnx_rl("database: %s row %s: %s; skipped", table, key, why);
}

static bool pgm_bool(const char *s)
{
	return s && (s[0] == 't' || s[0] == '1');
}

static int pgm_rule_parse(struct pgm *m, PGresult *res, int i,
			  struct pgm_rule *out)
{
	struct errbuf e = {""};
	const char *cidr = PQgetvalue(res, i, 1), *act = PQgetvalue(res, i, 2);
	char key[64];

	snprintf(key, sizeof(key), "id %s", PQgetvalue(res, i, 0));
	memset(out, 0, sizeof(*out));
	out->id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
	out->expires_at = strtoll(PQgetvalue(res, i, 4), NULL, 10);
	if (strcmp(act, "block") == 0)
		out->action = EDGE_ACT_BLOCK;
	else if (strcmp(act, "allow") == 0)
		out->action = EDGE_ACT_ALLOW;
	else {
		pgm_bad(&m->sk.ip_rules, "ip_rules", key,
			"action is neither "
			"block nor allow");
		return -EINVAL;
	}
	if (cidr_parse(cidr, &out->cidr, NULL, &e)) {
		pgm_bad(&m->sk.ip_rules, "ip_rules", key, e.msg);
		return -EINVAL;
	}
	return 0;
}

/* A tcp_routes row into *x (zeroed first), its values checked as the
 * file's are (the listen address parsed, in canonical form; sni NULL for
 * a plain route, else config_sni_check's; send_proxy NULL for the
 * deployment's, else config_send_proxy_parse's). 0 or -EINVAL with err. */
int pgm_tcp_row(struct tcproute_row *x, int64_t id, const char *listen,
		const char *sni, const char *env, bool pp,
		const char *send_proxy, struct errbuf *err)
{
	struct config_addr a;

	memset(x, 0, sizeof(*x));
	x->id = id;
	x->proxy_protocol = pp;
	if (send_proxy &&
	    config_send_proxy_parse(send_proxy, &x->send_proxy, err))
		return -EINVAL;
	if (config_addr_parse(listen, &a, err))
		return -EINVAL;
	snprintf(x->listen, sizeof(x->listen), "%s", a.text);
	if (sni) {
		if (strlen(sni) > ROUTE_SNI_MAX) {
			errbuf_set(err, "sni: longer than %d bytes",
				   ROUTE_SNI_MAX);
			return -EINVAL;
		}
		snprintf(x->sni, sizeof(x->sni), "%s", sni);
		if (config_sni_check(x->sni, err))
			return -EINVAL;
	}
	snprintf(x->env_id, sizeof(x->env_id), "%s", env);
	return 0;
}

/* An interval column's value in seconds (text) as milliseconds within
 * [min_ms, max_ms]: 0, or -EINVAL with err ("NAME 5.5 s: not between
 * ..."). */
static int pgm_interval_ms(const char *name, const char *text, uint64_t min_ms,
			   uint64_t max_ms, uint64_t *ms, struct errbuf *err)
{
	char *end = NULL;
	double sec;

	errno = 0;
	sec = strtod(text, &end);
	if (errno || end == text || *end || !(sec * 1000.0 >= (double)min_ms) ||
	    sec * 1000.0 > (double)max_ms) {
		errbuf_set(err, "%s %.32s s: not between %g and %g s", name,
			   text, (double)min_ms / 1000.0,
			   (double)max_ms / 1000.0);
		return -EINVAL;
	}
	*ms = (uint64_t)(sec * 1000.0 + 0.5);
	return 0;
}

/* Row i of an environments set's wake columns (on_demand, state,
 * idle_timeout in seconds as text, NULL: the default): 0 with *state and
 * *idle_ms, or -EINVAL with err. */
static int pgm_env_wake(PGresult *r, int i, int *state, uint64_t *idle_ms,
			struct errbuf *err)
{
	const char *st = PQgetvalue(r, i, 4), *it = PQgetvalue(r, i, 5);
	char *end = NULL;
	double sec;

	errbuf_clear(err);
	*state =
	    PQgetisnull(r, i, 4) ? PGM_ENV_RUNNING : pgm_env_state_parse(st);
	if (*state < 0) {
		errbuf_set(err,
			   "state \"%.32s\": not running, sleeping or waking",
			   st);
		return -EINVAL;
	}
	*idle_ms = CONFIG_IDLE_TIMEOUT_DEFAULT_MS;
	if (PQgetisnull(r, i, 5))
		return 0;
	errno = 0;
	sec = strtod(it, &end);
	if (errno || end == it || *end || !(sec >= 0) ||
	    sec * 1000.0 > (double)CONFIG_DURATION_MAX_MS) {
		errbuf_set(err,
			   "idle_timeout %.32s s: not between 0 and %llu s", it,
			   (unsigned long long)(CONFIG_DURATION_MAX_MS / 1000));
		return -EINVAL;
	}
	*idle_ms = (uint64_t)(sec * 1000.0 + 0.5);
	return 0;
}

/* A deployments.health_check value (jsonb as text) into *hc: 0, or
 * -EINVAL with err and *hc none (never a part of a check). */
static int pgm_health_check(const char *text, struct config_health_check *hc,
			    struct errbuf *err)
{
	json_error_t je;
	json_t *o;
	int rc;

	errbuf_clear(err);
	memset(hc, 0, sizeof(*hc));
	o = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	if (!o) {
		errbuf_set(err, "cannot read the JSON: %s", je.text);
		return -EINVAL;
	}
	rc = config_health_check_json(o, hc, err);
	json_decref(o);
	return rc;
}

/* A deployments.tls value (jsonb as text) into *t: 0, or -EINVAL with
 * err and *t refused. */
static int pgm_up_tls(const char *text, struct config_up_tls *t,
		      struct errbuf *err)
{
	json_error_t je;
	json_t *o;
	int rc;

	errbuf_clear(err);
	o = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	if (!o) {
		errbuf_set(err, "cannot read the JSON: %s", je.text);
		rc = -EINVAL;
	} else {
		rc = config_up_tls_json(o, t, err);
		json_decref(o);
	}
	if (rc) {
		memset(t, 0, sizeof(*t));
		t->refused = true;
	}
	return rc;
}

/* Whether tls groups may be held (their files read): once edged has
 * dropped its privileges (pgm_tls_start). Control thread. */
static bool pgm_tls_ready;

int pgm_tls_hold(struct pgm_env *e)
{
	struct errbuf err;
	int rc;

	errbuf_clear(&err);
	if (!pgm_tls_ready || e->tls.refused || e->tls_held)
		return 0;
	rc = tls_up_hold(&e->tls, &err);
	if (rc == 0) {
		e->tls_held = true;
		e->tls_files_failed = false;
		free(e->tls_err);
		e->tls_err = NULL;
		return 0;
	}
	if (rc == -ENOMEM)
		return rc;
	/* the group stays: every publish tries its files again */
	e->tls_files_failed = true;
	free(e->tls_err);
	e->tls_err = pgm_dup(err.msg);
	return e->tls_err ? 0 : -ENOMEM;
}

int pgm_tls_start(struct pgm *m)
{
	size_t i, j;

	pgm_tls_ready = true;
	for (i = 0; m && i < m->n; i++)
		for (j = 0; j < m->p[i]->n_envs; j++) {
			struct pgm_env *e = &m->p[i]->envs[j];

			if (e->tls.refused || !e->dep)
				continue;
			if (pgm_tls_hold(e))
				return -ENOMEM;
			if (e->tls_files_failed) {
				m->sk.tls++;
				log_warnx("database: deployment '%s': tls: %s; "
					  "its https:// endpoints answer 502 "
					  "upstream_tls_failed",
					  e->dep, e->tls_err);
			}
		}
	return 0;
}

/* Whether e's tls is what oe's was (the same deployment read again). */
static bool pgm_tls_same(const struct pgm_env *e, const struct pgm_env *oe)
{
	return oe && oe->dep && e->dep && strcmp(oe->dep, e->dep) == 0 &&
	       memcmp(&oe->tls, &e->tls, sizeof(e->tls)) == 0 &&
	       !oe->tls_err == !e->tls_err &&
	       (!e->tls_err || strcmp(oe->tls_err, e->tls_err) == 0);
}

/* The health checks, tls groups and send_proxy values of the projects
 * v[0..n) that were refused: logged and counted, and verify = false
 * said, but for one the model already held the same (the same
 * deployment read again: said once). */
static void pgm_hc_said(struct pgm *m, struct pgm_project *const *v, size_t n)
{
	size_t k, j, at, o;
	bool found;

	for (k = 0; k < n; k++) {
		const struct pgm_project *old;

		at = pgm_find(m->p, m->n, v[k]->id, &found);
		old = found ? m->p[at] : NULL;
		for (j = 0; j < v[k]->n_envs; j++) {
			const struct pgm_env *e = &v[k]->envs[j];
			const struct pgm_env *oe = NULL;

			for (o = 0; old && o < old->n_envs; o++)
				if (strcmp(old->envs[o].id, e->id) == 0)
					oe = &old->envs[o];
			if (e->dep && (e->tls_err || e->tls.no_verify) &&
			    !pgm_tls_same(e, oe)) {
				if (e->tls_err) {
					m->sk.tls++;
					log_warnx_rl(
					    "database: deployment '%s': tls: "
					    "%s; its https:// endpoints "
					    "answer 502 upstream_tls_failed",
					    e->dep, e->tls_err);
				} else {
					log_note("deployment %s: the "
						 "certificates of its https:// "
						 "endpoints are not verified "
						 "(tls.verify = false)",
						 e->dep);
				}
			}
			if (e->sp_err &&
			    !(oe && oe->sp_err &&
			      strcmp(oe->sp_err, e->sp_err) == 0)) {
				m->sk.send_proxy++;
				log_warnx_rl("database: deployments row %s; "
					     "skipped",
					     e->sp_err);
			}
			if (e->up_err &&
			    !(oe && oe->dep && oe->up_err &&
			      strcmp(oe->dep, e->dep) == 0 &&
			      strcmp(oe->up_err, e->up_err) == 0)) {
				m->sk.upstream++;
				log_warnx_rl("database: deployment '%s': %s",
					     e->dep, e->up_err);
			}
			if (!e->hc_err)
				continue;
			if (oe && oe->dep && oe->hc_err &&
			    strcmp(oe->dep, e->dep) == 0 &&
			    strcmp(oe->hc_err, e->hc_err) == 0)
				continue;
			m->sk.health_checks++;
			log_warnx_rl("database: deployment '%s': health_check: "
				     "%s; served without a health check",
				     e->dep, e->hc_err);
		}
	}
}

/* ---- applying in steps ----------------------------------------------------
 */

/* Where a job is: each set's rows in the order pgm_build once read them,
 * then the model changed, then the projects it replaced freed. */
enum pgm_phase {
	PGM_P_PROJECTS = 0,
	PGM_P_ENVS,
	PGM_P_DEPLOYMENTS,
	PGM_P_ENDPOINTS,
	PGM_P_DOMAINS,
	PGM_P_TCP,
	PGM_P_RULES,
	PGM_P_KEYS,
	PGM_P_SPLICE,
	PGM_P_FREE,
	PGM_P_DONE,
};

struct pgm_job {
	struct pgm *m;
	PGresult *const *set;
	const char *const *ids;
	size_t n_ids;
	bool rules;
	enum pgm_phase phase;
	int row; /* the next row of the phase's set */
	int rc;	 /* a failure: the job stops, the model unchanged */
	/* what is built: the fetched projects (sorted by id once the
	 * projects' rows are read), an index of their environments and of
	 * the active deployments by id, the global rules */
	struct pgm_project **v;
	size_t n;
	struct pgm_ref *envs, *deps;
	size_t ne, nd;
	struct pgm_rule *global;
	size_t n_global;
	/* the projects the change replaced, freed after it (PGM_P_FREE) */
	struct pgm_project **old;
	size_t n_old, freed;
};

/* Rows checked between two looks at the clock. */
#define PGM_ROWS_PER_LOOK 64

/* Whether deadline_ns (monotonic; 0: none) has passed. */
static bool pgm_past(uint64_t deadline_ns)
{
	return deadline_ns && clk_fresh_ns() >= deadline_ns;
}

/* pgm_past, looked at once every PGM_ROWS_PER_LOOK calls (*k counts). */
static bool pgm_late(uint64_t deadline_ns, unsigned *k)
{
	return ++*k % PGM_ROWS_PER_LOOK == 0 && pgm_past(deadline_ns);
}

static int pgm_row_project(struct pgm_job *j, PGresult *r, int i)
{
	struct pgm_project *p;
	struct errbuf e;

	errbuf_clear(&e);
	if (config_id_check(PQgetvalue(r, i, 0), &e)) {
		pgm_bad(&j->m->sk.ids, "projects", PQgetvalue(r, i, 0), e.msg);
		return 0;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	atomic_init(&p->ref, 1);
	j->v[j->n++] = p;
	p->id = pgm_dup(PQgetvalue(r, i, 0));
	p->name = pgm_dup(PQgetisnull(r, i, 1) ? PQgetvalue(r, i, 0)
					       : PQgetvalue(r, i, 1));
	p->enabled = pgm_bool(PQgetvalue(r, i, 2));
	if (!p->id || !p->name)
		return -ENOMEM;
	if (config_name_check(p->name, &e)) {
		free(p->name);
		p->name = pgm_dup(p->id);
		if (!p->name)
			return -ENOMEM;
	}
	return 0;
}

/* An environments row's challenge_mode, challenge_difficulty and
 * challenge_ttl (columns 13 to 15, as text; seconds) into *c: 0, or
 * -EINVAL with err. */
static int pgm_env_challenge(PGresult *res, int i, struct config_challenge *c,
			     struct errbuf *err)
{
	const char *m = PQgetvalue(res, i, 13), *d = PQgetvalue(res, i, 14);
	const char *t = PQgetvalue(res, i, 15);
	char *end;
	double sec;
	long v;

	if (chal_mode_parse(m, &c->mode)) {
		errbuf_set(err,
			   "challenge_mode: \"off\", \"new_ip\", "
			   "\"on_rate_limit\" or \"always\", not \"%.40s\"",
			   m);
		return -EINVAL;
	}
	errno = 0;
	v = strtol(d, &end, 10);
	if (errno || end == d || *end || v < 1 || v > CHAL_DIFFICULTY_MAX) {
		errbuf_set(err,
			   "challenge_difficulty %.24s: not between 1 and %u",
			   d, CHAL_DIFFICULTY_MAX);
		return -EINVAL;
	}
	c->difficulty = (unsigned)v;
	sec = strtod(t, &end);
	if (end == t || *end || !(sec >= CHAL_TTL_MIN_S) ||
	    !(sec <= CHAL_TTL_MAX_S)) {
		errbuf_set(err,
			   "challenge_ttl %.32s s: not between %u and %u s", t,
			   CHAL_TTL_MIN_S, CHAL_TTL_MAX_S);
		return -EINVAL;
	}
	c->ttl_s = (uint32_t)sec;
	return 0;
}

/* An environments row's api_keys, jwt and auth_request (columns 16 to
 * 18) into r's
 * auth (a gate when either is set; the keys come with the api_keys
 * rows), api_keys and jwt: 0, -EINVAL with err, -ENOMEM. */
static int pgm_env_auth(PGresult *res, int i, struct pgm_env *r,
			struct errbuf *err)
{
	json_error_t je;
	json_t *o;
	int rc;

	r->api_keys = pgm_bool(PQgetvalue(res, i, 16));
	if (!r->api_keys && PQgetisnull(res, i, 17) && PQgetisnull(res, i, 18))
		return 0;
	r->auth = auth_gate_new();
	if (!r->auth)
		return -ENOMEM;
	/* keys on, none yet: every key refused until rows come */
	if (r->api_keys && auth_gate_api_keys(r->auth, "", 0, err))
		return -ENOMEM;
	if (!PQgetisnull(res, i, 17)) {
		o = json_loads(PQgetvalue(res, i, 17), JSON_REJECT_DUPLICATES,
			       &je);
		if (!o) {
			errbuf_set(err, "jwt: cannot read the JSON: %s",
				   je.text);
			return -EINVAL;
		}
		rc = auth_gate_jwt_json(r->auth, o, err);
		json_decref(o);
		if (rc == 0 && !(r->jwt = pgm_dup(PQgetvalue(res, i, 17))))
			rc = -ENOMEM;
		if (rc)
			return rc;
	}
	if (!PQgetisnull(res, i, 18)) {
		struct fauth_conf *c;

		o = json_loads(PQgetvalue(res, i, 18), JSON_REJECT_DUPLICATES,
			       &je);
		if (!o) {
			errbuf_set(err,
				   "auth_request: cannot read the JSON: %s",
				   je.text);
			return -EINVAL;
		}
		rc = fauth_conf_from_json(o, &c, err);
		json_decref(o);
		if (rc)
			return rc;
		auth_gate_forward(r->auth, c);
		if (!(r->auth_request = pgm_dup(PQgetvalue(res, i, 18))))
			return -ENOMEM;
	}
	return 0;
}

/* An environments row's headers, redirects, unmatched, compression and
 * inject (columns 8 to 12, as text), its challenge (13 to 15), auth (16
 * to 18) and tls (19) into r's fields: 0, -EINVAL with err (nothing kept),
 * -ENOMEM. */
static int pgm_env_rules(PGresult *res, int i, struct pgm_env *r,
			 struct errbuf *err)
{
	json_error_t je;
	json_t *o;
	int rc = 0, k;

	memset(r, 0, sizeof(*r));
	for (k = 8; k <= 9 && rc == 0; k++) {
		if (PQgetisnull(res, i, k))
			continue;
		/* any value: a JSON null is none, as SQL's NULL */
		o = json_loads(PQgetvalue(res, i, k),
			       JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
		if (!o) {
			errbuf_set(err, "%s: cannot read the JSON: %s",
				   k == 8 ? "headers" : "redirects", je.text);
			rc = -EINVAL;
			break;
		}
		rc = k == 8 ? hrules_from_json(o, &r->headers, err)
			    : hredirects_from_json(o, &r->redirects, err);
		json_decref(o);
	}
	if (rc == 0) {
		const char *u = PQgetvalue(res, i, 10);

		r->unmatched_not_found = strcmp(u, "not_found") == 0;
		if (!r->unmatched_not_found && strcmp(u, "deployment") != 0) {
			errbuf_set(
			    err,
			    "unmatched: \"deployment\" or \"not_found\", "
			    "not \"%.40s\"",
			    u);
			rc = -EINVAL;
		}
	}
	compress_defaults(&r->compression);
	if (rc == 0 && !PQgetisnull(res, i, 11)) {
		o = json_loads(PQgetvalue(res, i, 11),
			       JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
		if (!o) {
			errbuf_set(err, "compression: cannot read the JSON: %s",
				   je.text);
			rc = -EINVAL;
		} else {
			rc = compress_from_json(o, &r->compression, err);
			json_decref(o);
		}
	}
	if (rc == 0 && !PQgetisnull(res, i, 12)) {
		o = json_loads(PQgetvalue(res, i, 12),
			       JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
		if (!o) {
			errbuf_set(err, "inject: cannot read the JSON: %s",
				   je.text);
			rc = -EINVAL;
		} else {
			rc = inject_from_json(o, &r->inject, err);
			json_decref(o);
		}
	}
	if (rc == 0 && PQnfields(res) > 19 && !PQgetisnull(res, i, 19)) {
		/* tls (0026): NULL or 'auto' (the column's CHECK) */
		const char *t = PQgetvalue(res, i, 19);

		r->tls_auto = strcmp(t, "auto") == 0;
		if (!r->tls_auto) {
			errbuf_set(err, "tls: NULL or \"auto\", not \"%.40s\"",
				   t);
			rc = -EINVAL;
		}
	}
	if (rc == 0)
		rc = pgm_env_challenge(res, i, &r->challenge, err);
	if (rc == 0)
		rc = pgm_env_auth(res, i, r, err);
	if (rc) {
		hrules_free(&r->headers);
		hredirects_free(&r->redirects);
		compress_free(&r->compression);
		inject_free(&r->inject);
		auth_gate_put(r->auth);
		free(r->jwt);
		free(r->auth_request);
	}
	return rc;
}

static int pgm_row_env(struct pgm_job *j, PGresult *r, int i)
{
	struct pgm_env *env, rules;
	struct errbuf e;
	uint64_t idle, idle_bg = 0;
	bool found;
	size_t at;
	int st, rc;

	at = pgm_find(j->v, j->n, PQgetvalue(r, i, 1), &found);
	if (!found)
		return 0; /* its project was skipped */
	errbuf_clear(&e);
	if (config_id_check(PQgetvalue(r, i, 0), &e)) {
		pgm_bad(&j->m->sk.ids, "environments", PQgetvalue(r, i, 0),
			e.msg);
		return 0;
	}
	if (pgm_env_wake(r, i, &st, &idle, &e) ||
	    (!PQgetisnull(r, i, 20) &&
	     pgm_interval_ms("idle_timeout_background", PQgetvalue(r, i, 20),
			     1000, CONFIG_DURATION_MAX_MS, &idle_bg, &e))) {
		pgm_bad(&j->m->sk.ids, "environments", PQgetvalue(r, i, 0),
			e.msg);
		return 0;
	}
	rc = pgm_env_rules(r, i, &rules, &e);
	if (rc == -ENOMEM)
		return rc;
	if (rc) {
		pgm_bad(&j->m->sk.env_rules, "environments",
			PQgetvalue(r, i, 0), e.msg);
		return 0;
	}
	env =
	    pgm_grow((void **)&j->v[at]->envs, &j->v[at]->n_envs, sizeof(*env));
	if (!env) {
		hrules_free(&rules.headers);
		hredirects_free(&rules.redirects);
		compress_free(&rules.compression);
		inject_free(&rules.inject);
		auth_gate_put(rules.auth);
		free(rules.jwt);
		free(rules.auth_request);
		return -ENOMEM;
	}
	env->headers = rules.headers;
	env->redirects = rules.redirects;
	env->unmatched_not_found = rules.unmatched_not_found;
	env->compression = rules.compression;
	env->inject = rules.inject;
	env->challenge = rules.challenge;
	env->auth = rules.auth;
	env->api_keys = rules.api_keys;
	env->jwt = rules.jwt;
	env->auth_request = rules.auth_request;
	env->tls_auto = rules.tls_auto;
	env->on_demand = pgm_bool(PQgetvalue(r, i, 3));
	env->state = (unsigned)st;
	env->idle_ms = idle;
	env->idle_bg_ms = idle_bg;
	env->shed = pgm_bool(PQgetvalue(r, i, 21));
	env->id = pgm_dup(PQgetvalue(r, i, 0));
	env->name = pgm_dup(PQgetisnull(r, i, 2) ? PQgetvalue(r, i, 0)
						 : PQgetvalue(r, i, 2));
	env->https_redirect =
	    PQnfields(r) > 6 && strcmp(PQgetvalue(r, i, 6), "t") == 0;
	env->hsts = PQnfields(r) > 7 && strcmp(PQgetvalue(r, i, 7), "t") == 0;
	if (!env->id || !env->name)
		return -ENOMEM;
	if (config_name_check(env->name, &e)) {
		free(env->name);
		if (!(env->name = pgm_dup(env->id)))
			return -ENOMEM;
	}
	return 0;
}

/* The index of the fetched environments by id, once every project's
 * array of them is final (pgm_grow moves them while it grows). */
static int pgm_envs_index(struct pgm_job *j)
{
	size_t k, e, total = 0;

	for (k = 0; k < j->n; k++)
		total += j->v[k]->n_envs;
	j->envs = calloc(total + 1, sizeof(*j->envs));
	if (!j->envs)
		return -ENOMEM;
	for (k = 0; k < j->n; k++)
		for (e = 0; e < j->v[k]->n_envs; e++) {
			j->envs[j->ne].key = j->v[k]->envs[e].id;
			j->envs[j->ne++].env = &j->v[k]->envs[e];
		}
	qsort(j->envs, j->ne, sizeof(*j->envs), pgm_cmp_ref);
	return 0;
}

/* A jsonb column's text as a JSON object (NULL with err when it is not
 * JSON). */
static json_t *pgm_json(const char *text, struct errbuf *err)
{
	json_error_t je;
	json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &je);

	if (!o)
		errbuf_set(err, "cannot read the JSON: %s", je.text);
	return o;
}

/* A deployments row's max_inflight (integer text) within
 * 0..CONFIG_EP_MAX_INFLIGHT_MAX: 0 with *n, or -EINVAL with err. */
static int pgm_max_inflight(const char *text, uint64_t *n, struct errbuf *err)
{
	char *end = NULL;
	long long v;

	errno = 0;
	v = strtoll(text, &end, 10);
	if (errno || end == text || *end || v < 0 ||
	    v > CONFIG_EP_MAX_INFLIGHT_MAX) {
		errbuf_set(err, "%.32s is out of range 0..%d", text,
			   CONFIG_EP_MAX_INFLIGHT_MAX);
		return -EINVAL;
	}
	*n = (uint64_t)v;
	return 0;
}

/* Row i of a deployments set's retry, circuit, request_total, hedge and
 * max_inflight into env's: each refused one left unset, with env->up_err
 * saying why (the first). 0, -EINVAL (one was refused) or -ENOMEM. */
static int pgm_dep_upstream(PGresult *r, int i, struct pgm_env *env)
{
	struct errbuf e, why;
	json_t *o;
	int bad = 0;

	free(env->up_err);
	env->up_err = NULL;
	memset(&env->retry, 0, sizeof(env->retry));
	memset(&env->circuit, 0, sizeof(env->circuit));
	env->request_total_ms = 0;
	memset(&env->hedge, 0, sizeof(env->hedge));
	env->max_inflight = 0;
	errbuf_clear(&e);
	errbuf_clear(&why);
	if (!PQgetisnull(r, i, 5)) {
		o = pgm_json(PQgetvalue(r, i, 5), &e);
		if (!o || config_retry_json(o, &env->retry, &e)) {
			if (!bad++)
				errbuf_set(&why,
					   "retry: %s; served without "
					   "a retry group",
					   e.msg);
		}
		json_decref(o);
	}
	if (!PQgetisnull(r, i, 6)) {
		o = pgm_json(PQgetvalue(r, i, 6), &e);
		if (!o || config_circuit_json(o, &env->circuit, &e)) {
			if (!bad++)
				errbuf_set(&why,
					   "circuit: %s; served without "
					   "a circuit",
					   e.msg);
		}
		json_decref(o);
	}
	if (!PQgetisnull(r, i, 7) &&
	    pgm_interval_ms("request_total", PQgetvalue(r, i, 7), 1,
			    CONFIG_REQUEST_TOTAL_MAX_MS, &env->request_total_ms,
			    &e)) {
		env->request_total_ms = 0;
		if (!bad++)
			errbuf_set(&why,
				   "timeouts: %s; served without a "
				   "deadline",
				   e.msg);
	}
	if (!PQgetisnull(r, i, 8)) {
		o = pgm_json(PQgetvalue(r, i, 8), &e);
		if (!o || config_hedge_json(o, &env->hedge, &e)) {
			if (!bad++)
				errbuf_set(&why,
					   "hedge: %s; served without "
					   "hedging",
					   e.msg);
		}
		json_decref(o);
	}
	if (!PQgetisnull(r, i, 9) &&
	    pgm_max_inflight(PQgetvalue(r, i, 9), &env->max_inflight, &e)) {
		env->max_inflight = 0;
		if (!bad++)
			errbuf_set(&why,
				   "max_inflight: %s; served without a "
				   "cap",
				   e.msg);
	}
	if (!bad)
		return 0;
	return (env->up_err = pgm_dup(why.msg)) ? -EINVAL : -ENOMEM;
}

static int pgm_row_deployment(struct pgm_job *j, PGresult *r, int i)
{
	struct pgm_env *env = pgm_ref_find(j->envs, j->ne, PQgetvalue(r, i, 1));
	enum config_send_proxy sp;
	struct errbuf e;

	if (!env)
		return 0;
	errbuf_clear(&e);
	if (config_id_check(PQgetvalue(r, i, 0), &e)) {
		pgm_bad(&j->m->sk.ids, "deployments", PQgetvalue(r, i, 0),
			e.msg);
		return 0;
	}
	/* a header its endpoints do not expect, or none where they do,
	 * breaks every connection: the row is not served on a guess */
	if (config_send_proxy_parse(PQgetvalue(r, i, 4), &sp, &e)) {
		/* said and counted once (pgm_hc_said) */
		free(env->sp_err);
		if (asprintf(&env->sp_err, "%s: send_proxy %s",
			     PQgetvalue(r, i, 0), e.msg) < 0) {
			env->sp_err = NULL;
			return -ENOMEM;
		}
		return 0;
	}
	env->send_proxy = sp;
	free(env->dep);
	if (!(env->dep = pgm_dup(PQgetvalue(r, i, 0))))
		return -ENOMEM;
	free(env->hc_err);
	env->hc_err = NULL;
	memset(&env->hc, 0, sizeof(env->hc));
	if (!PQgetisnull(r, i, 2) &&
	    pgm_health_check(PQgetvalue(r, i, 2), &env->hc, &e)) {
		if (!(env->hc_err = pgm_dup(e.msg)))
			return -ENOMEM;
	}
	if (env->tls_held)
		tls_up_release(&env->tls);
	env->tls_held = env->tls_files_failed = false;
	free(env->tls_err);
	env->tls_err = NULL;
	memset(&env->tls, 0, sizeof(env->tls));
	if (!PQgetisnull(r, i, 3) &&
	    pgm_up_tls(PQgetvalue(r, i, 3), &env->tls, &e)) {
		if (!(env->tls_err = pgm_dup(e.msg)))
			return -ENOMEM;
	} else if (pgm_tls_hold(env)) {
		return -ENOMEM;
	}
	if (pgm_dep_upstream(r, i, env) == -ENOMEM)
		return -ENOMEM;
	j->deps[j->nd].key = env->dep;
	j->deps[j->nd++].env = env;
	return 0;
}

static int pgm_row_endpoint(struct pgm_job *j, PGresult *r, int i)
{
	struct pgm_env *env = pgm_ref_find(j->deps, j->nd, PQgetvalue(r, i, 0));
	struct config_addr a, *slot;
	struct errbuf e;
	char key[160];

	if (!env)
		return 0;
	snprintf(key, sizeof(key), "(deployment %s, address %.64s)",
		 PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
	errbuf_clear(&e);
	if (config_endpoint_parse(PQgetvalue(r, i, 1), CONFIG_SCHEMES_EDGED, &a,
				  &e)) {
		pgm_bad(&j->m->sk.endpoints, "endpoints", key, e.msg);
		return 0;
	}
	if (env->n_eps >= CONFIG_UPSTREAMS_MAX) {
		pgm_bad(&j->m->sk.endpoints, "endpoints", key,
			"more endpoints than a deployment may have");
		return 0;
	}
	slot = pgm_grow((void **)&env->eps, &env->n_eps, sizeof(*slot));
	if (!slot)
		return -ENOMEM;
	*slot = a;
	return 0;
}

/* A domains row's wake (t or f) and activity ("app" or "background"):
 * 0 with *bg, or -EINVAL with err. */
static int pgm_dom_class(const char *wake, const char *act, bool *bg,
			 struct errbuf *err)
{
	if (strcmp(wake, "t") != 0 && strcmp(wake, "f") != 0) {
		errbuf_set(err, "wake \"%.16s\": not a boolean", wake);
		return -EINVAL;
	}
	if (strcmp(act, "app") != 0 && strcmp(act, "background") != 0) {
		errbuf_set(err, "activity \"%.32s\": \"app\" or \"background\"",
			   act);
		return -EINVAL;
	}
	*bg = strcmp(act, "background") == 0;
	return 0;
}

static int pgm_row_domain(struct pgm_job *j, PGresult *r, int i)
{
	struct pgm_env *env = pgm_ref_find(j->envs, j->ne, PQgetvalue(r, i, 3));
	const char *pre = PQgetvalue(r, i, 1);
	struct pgm_dom *d;
	struct errbuf e;
	char key[400], *dom;
	uint64_t total = 0;
	bool bg = false, shed_set = !PQgetisnull(r, i, 7);

	if (!env)
		return 0;
	snprintf(key, sizeof(key), "(domain %.253s, path_prefix %.64s)",
		 PQgetvalue(r, i, 0), pre);
	dom = pgm_dup(PQgetvalue(r, i, 0));
	if (!dom)
		return -ENOMEM;
	errbuf_clear(&e);
	if (config_domain_check(dom, true, &e) ||
	    (pre[0] && config_prefix_check(pre, &e)) ||
	    (!PQgetisnull(r, i, 6) &&
	     pgm_interval_ms("request_total", PQgetvalue(r, i, 6), 1,
			     CONFIG_REQUEST_TOTAL_MAX_MS, &total, &e)) ||
	    pgm_dom_class(PQgetvalue(r, i, 4), PQgetvalue(r, i, 5), &bg, &e)) {
		free(dom);
		pgm_bad(&j->m->sk.domains, "domains", key, e.msg);
		return 0;
	}
	/* 0028's constraint: a prefix-less row's paths are its
	 * environment's own */
	if (!pre[0] && (total || bg || !pgm_bool(PQgetvalue(r, i, 4)))) {
		free(dom);
		pgm_bad(&j->m->sk.domains, "domains", key,
			"wake, activity and request_total are a path_prefix "
			"row's");
		return 0;
	}
	/* 0029's: so is shed */
	if (!pre[0] && shed_set) {
		free(dom);
		pgm_bad(&j->m->sk.domains, "domains", key,
			"shed is a path_prefix row's");
		return 0;
	}
	d = pgm_grow((void **)&env->doms, &env->n_doms, sizeof(*d));
	if (!d) {
		free(dom);
		return -ENOMEM;
	}
	d->domain = dom;
	d->prefix = pgm_dup(pre);
	d->strip = pgm_bool(PQgetvalue(r, i, 2));
	d->no_wake = !pgm_bool(PQgetvalue(r, i, 4));
	d->background = bg;
	d->request_total_ms = total;
	d->shed_set = shed_set;
	d->shed = shed_set && pgm_bool(PQgetvalue(r, i, 7));
	return d->prefix ? 0 : -ENOMEM;
}

static int pgm_row_tcp(struct pgm_job *j, PGresult *r, int i)
{
	struct pgm_env *env = pgm_ref_find(j->envs, j->ne, PQgetvalue(r, i, 3));
	struct tcproute_row x, *slot;
	struct errbuf e;
	char key[200];

	if (!env)
		return 0;
	snprintf(key, sizeof(key), "(id %s, listen %.64s%s%.64s)",
		 PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
		 PQgetisnull(r, i, 2) ? "" : ", sni ", PQgetvalue(r, i, 2));
	errbuf_clear(&e);
	if (pgm_tcp_row(
		&x, strtoll(PQgetvalue(r, i, 0), NULL, 10), PQgetvalue(r, i, 1),
		PQgetisnull(r, i, 2) ? NULL : PQgetvalue(r, i, 2), env->id,
		pgm_bool(PQgetvalue(r, i, 4)),
		PQgetisnull(r, i, 5) ? NULL : PQgetvalue(r, i, 5), &e)) {
		pgm_bad(&j->m->sk.tcp_routes, "tcp_routes", key, e.msg);
		return 0;
	}
	slot = pgm_grow((void **)&env->tcp, &env->n_tcp, sizeof(x));
	if (!slot)
		return -ENOMEM;
	*slot = x;
	return 0;
}

/* An api_keys row into its environment (one whose api_keys is set):
 * the gate's, and kept for the snapshot. */
static int pgm_row_key(struct pgm_job *j, PGresult *r, int i)
{
	struct pgm_env *env = pgm_ref_find(j->envs, j->ne, PQgetvalue(r, i, 0));
	const char *name = PQgetvalue(r, i, 1), *hex = PQgetvalue(r, i, 2);
	struct pgm_key *k;
	struct errbuf e;
	char key[400];
	int rc;

	if (!env)
		return 0;
	snprintf(key, sizeof(key), "(environment %.128s, name %.64s)",
		 PQgetvalue(r, i, 0), name);
	if (!env->api_keys) {
		/* the owner may think the environment gated: said */
		pgm_bad(&j->m->sk.api_keys, "api_keys", key,
			"its environment's api_keys is false: no key is "
			"asked for");
		return 0;
	}
	errbuf_clear(&e);
	rc = auth_gate_key_add(env->auth, name, hex, &e);
	if (rc == -ENOMEM)
		return rc;
	if (rc) {
		pgm_bad(&j->m->sk.api_keys, "api_keys", key, e.msg);
		return 0;
	}
	k = pgm_grow((void **)&env->keys, &env->n_keys, sizeof(*k));
	if (!k)
		return -ENOMEM;
	snprintf(k->hex, sizeof(k->hex), "%s", hex);
	k->name = pgm_dup(name);
	return k->name ? 0 : -ENOMEM;
}

/* Every fetched gate's keys sorted, once all are in. */
static void pgm_keys_seal(struct pgm_job *j)
{
	size_t i;

	for (i = 0; i < j->ne; i++)
		if (j->envs[i].env->auth)
			auth_gate_keys_seal(j->envs[i].env->auth);
}

/* A rule: a project's into it, a global one apart. */
static int pgm_row_rule(struct pgm_job *j, PGresult *r, int i)
{
	struct pgm_rule x, *slot;
	bool found;
	size_t at;

	if (pgm_rule_parse(j->m, r, i, &x))
		return 0;
	if (PQgetisnull(r, i, 3)) {
		slot = pgm_grow((void **)&j->global, &j->n_global, sizeof(x));
	} else {
		at = pgm_find(j->v, j->n, PQgetvalue(r, i, 3), &found);
		if (!found)
			return 0;
		slot = pgm_grow((void **)&j->v[at]->rules, &j->v[at]->n_rules,
				sizeof(x));
	}
	if (!slot)
		return -ENOMEM;
	*slot = x;
	return 0;
}

/* The fetched projects into the model (they replace the projects asked
 * for; a snapshot replaces every one), the global rules too when asked;
 * the projects replaced go to j->old, to be freed after. */
static int pgm_splice(struct pgm_job *j)
{
	struct pgm *m = j->m;
	struct pgm_project **nv;
	size_t i, at, k, room;
	bool found, *gone;

	pgm_hc_said(m, j->v, j->n);
	if (!j->ids) { /* a snapshot: everything anew */
		j->old = m->p;
		j->n_old = m->n;
		m->p = j->v;
		m->n = m->cap = j->n;
		j->v = NULL;
		j->n = 0;
		free(m->global);
		m->global = j->global;
		m->n_global = j->n_global;
		j->global = NULL;
		return 0;
	}
	room = m->n + j->n + 1;
	gone = calloc(m->n + 1, sizeof(*gone));
	j->old = calloc(j->n_ids + 1, sizeof(*j->old));
	nv = malloc(room * sizeof(*nv));
	if (!gone || !j->old || !nv) {
		free(gone);
		free(nv);
		return -ENOMEM;
	}
	if (j->rules) {
		free(m->global);
		m->global = j->global;
		m->n_global = j->n_global;
		j->global = NULL;
	}
	/* the projects asked for go, what the sets hold of them comes in:
	 * both sorted by id, merged */
	for (i = 0; i < j->n_ids; i++) {
		at = pgm_find(m->p, m->n, j->ids[i], &found);
		if (found && !gone[at]) {
			gone[at] = true;
			j->old[j->n_old++] = m->p[at];
		}
	}
	for (i = k = at = 0; i < m->n || at < j->n;) {
		int c = i == m->n    ? 1
			: at == j->n ? -1
				     : strcmp(m->p[i]->id, j->v[at]->id);

		if (i < m->n && (gone[i] || c == 0)) {
			if (!gone[i]) /* cannot be: it was asked for */
				pgm_project_free(m->p[i]);
			i++;
		} else if (c < 0) {
			nv[k++] = m->p[i++];
		} else {
			nv[k++] = j->v[at++];
		}
	}
	free(gone);
	free(m->p);
	m->p = nv;
	m->n = k;
	m->cap = room;
	free(j->v);
	j->v = NULL;
	j->n = 0;
	return 0;
}

int pgm_apply_begin(struct pgm *m, PGresult *const set[PGM_NSETS],
		    const char *const *ids, size_t n, bool rules,
		    struct pgm_job **out)
{
	struct pgm_job *j;
	size_t i;

	*out = NULL;
	for (i = 0; i < PGM_NSETS; i++)
		if (!set[i] || PQresultStatus(set[i]) != PGRES_TUPLES_OK ||
		    PQnfields(set[i]) != pgm_cols[i])
			return -EPROTO;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->m = m;
	j->set = set;
	j->ids = ids;
	j->n_ids = n;
	j->rules = rules || !ids;
	j->v = calloc((size_t)PQntuples(set[PGM_PROJECTS]) + 1, sizeof(*j->v));
	j->deps = calloc((size_t)PQntuples(set[PGM_DEPLOYMENTS]) + 1,
			 sizeof(*j->deps));
	if (!j->v || !j->deps) {
		pgm_job_free(j);
		return -ENOMEM;
	}
	*out = j;
	return 0;
}

/* The rows of the job's phase, each by fn, until the set or the slice
 * ends: 1 when rows are left, 0 when the set is done, or -ENOMEM. */
static int pgm_rows(struct pgm_job *j, enum pgm_set set,
		    int (*fn)(struct pgm_job *, PGresult *, int),
		    uint64_t deadline_ns, unsigned *k)
{
	PGresult *r = j->set[set];
	int rows = PQntuples(r), rc;

	for (; j->row < rows; j->row++) {
		if (pgm_late(deadline_ns, k))
			return 1;
		rc = fn(j, r, j->row);
		if (rc)
			return rc;
	}
	j->row = 0;
	return 0;
}

int pgm_apply_step(struct pgm_job *j, uint64_t deadline_ns)
{
	static int (*const row[PGM_P_SPLICE])(struct pgm_job *, PGresult *,
					      int) = {
	    pgm_row_project, pgm_row_env, pgm_row_deployment, pgm_row_endpoint,
	    pgm_row_domain,  pgm_row_tcp, pgm_row_rule,	      pgm_row_key,
	};
	/* the set each phase reads */
	static const enum pgm_set of[PGM_P_SPLICE] = {
	    PGM_PROJECTS, PGM_ENVS, PGM_DEPLOYMENTS, PGM_ENDPOINTS,
	    PGM_DOMAINS,  PGM_TCP,  PGM_RULES,	     PGM_KEYS,
	};
	unsigned k = 0;
	int rc;

	if (j->rc)
		return j->rc;
	while (j->phase < PGM_P_SPLICE) {
		rc = pgm_rows(j, of[j->phase], row[j->phase], deadline_ns, &k);
		if (rc > 0)
			return 1;
		if (rc == 0 && j->phase == PGM_P_PROJECTS)
			qsort(j->v, j->n, sizeof(*j->v), pgm_cmp_project);
		if (rc == 0 && j->phase == PGM_P_ENVS)
			rc = pgm_envs_index(j);
		if (rc == 0 && j->phase == PGM_P_DEPLOYMENTS)
			qsort(j->deps, j->nd, sizeof(*j->deps), pgm_cmp_ref);
		if (rc == 0 && j->phase == PGM_P_KEYS)
			pgm_keys_seal(j);
		if (rc)
			return j->rc = rc;
		j->phase++;
		if (pgm_past(deadline_ns))
			return 1;
	}
	if (j->phase == PGM_P_SPLICE) {
		rc = pgm_splice(j);
		if (rc)
			return j->rc = rc;
		j->phase = PGM_P_FREE;
	}
	/* the projects replaced (a snapshot: every one) freed in slices */
	while (j->phase == PGM_P_FREE && j->freed < j->n_old) {
		if (pgm_late(deadline_ns, &k))
			return 1;
		pgm_project_free(j->old[j->freed++]);
	}
	j->phase = PGM_P_DONE;
	return 0;
}

void pgm_job_free(struct pgm_job *j)
{
	size_t i;

	if (!j)
		return;
	for (i = 0; i < j->n; i++)
		pgm_project_free(j->v[i]);
	free(j->v);
	for (; j->freed < j->n_old; j->freed++)
		pgm_project_free(j->old[j->freed]);
	free(j->old);
	free(j->envs);
	free(j->deps);
	free(j->global);
	free(j);
}

int pgm_apply(struct pgm *m, PGresult *const set[PGM_NSETS],
	      const char *const *ids, size_t n, bool rules)
{
	struct pgm_job *j;
	int rc = pgm_apply_begin(m, set, ids, n, rules, &j);

	if (rc == 0)
		rc = pgm_apply_step(j, 0);
	pgm_job_free(j);
	return rc;
}

/* ---- the route source ---------------------------------------------------- */

static int pgm_src_env(const struct pgm_env *pe, struct route_src_env *e)
{
	size_t j, nd = 0, nc = 0;

	e->id = pgm_dup(pe->id);
	e->name = pgm_dup(pe->name);
	/* no active deployment: its routes answer 502 upstream_unavailable */
	e->deployment.id = pgm_dup(pe->dep);
	e->deployment.hc = pe->hc;
	e->deployment.tls = pe->tls;
	e->deployment.send_proxy = pe->send_proxy;
	e->deployment.retry = pe->retry;
	e->deployment.circuit = pe->circuit;
	e->deployment.request_total_ms = pe->request_total_ms;
	e->deployment.hedge = pe->hedge;
	e->deployment.max_inflight = pe->max_inflight;
	/* the route holds its own profile, as long as a table serves it;
	 * files that failed are tried again at every publish (a reload) */
	if (!pe->tls.refused && pgm_tls_ready) {
		struct errbuf err;
		int rc = tls_up_hold(&e->deployment.tls, &err);

		if (rc == -ENOMEM)
			return rc;
		e->deployment.tls_held = rc == 0;
		e->deployment.tls.refused = rc != 0;
	} else if (!pe->tls.refused) {
		/* never before edged's privileges are dropped */
		e->deployment.tls.refused = true;
	}
	e->max_body_bytes = ROUTE_SRC_INHERIT;
	e->auth = auth_gate_get(pe->auth);
	e->on_demand = pe->on_demand;
	e->idle_timeout_ms = pe->idle_ms;
	e->idle_timeout_background_ms = pe->idle_bg_ms;
	e->shed = pe->shed;
	e->tls_auto = pe->tls_auto;
	e->security.nosniff = true;
	e->security.hsts_max_age_s = 365 * 86400;
	e->security.frame_options = pgm_dup("");
	e->security.referrer_policy = pgm_dup("");
	e->security.https_redirect = pe->https_redirect;
	e->security.hsts = pe->hsts;
	e->unmatched_not_found = pe->unmatched_not_found;
	e->challenge = pe->challenge;
	if (compress_dup(&pe->compression, &e->compression) ||
	    inject_dup(&pe->inject, &e->inject))
		return -ENOMEM;
	if (hrules_dup(&pe->headers, &e->headers) ||
	    hredirects_dup(&pe->redirects, &e->redirects))
		return -ENOMEM;
	if (!e->id || !e->name || !e->deployment.id ||
	    !e->security.frame_options || !e->security.referrer_policy)
		return -ENOMEM;
	if (pe->n_eps) {
		e->deployment.upstreams =
		    malloc(pe->n_eps * sizeof(*e->deployment.upstreams));
		if (!e->deployment.upstreams)
			return -ENOMEM;
		memcpy(e->deployment.upstreams, pe->eps,
		       pe->n_eps * sizeof(*pe->eps));
		e->deployment.n_upstreams = pe->n_eps;
	}
	for (j = 0; j < pe->n_doms; j++)
		pe->doms[j].prefix[0] ? nc++ : nd++;
	e->domains = calloc(nd + 1, sizeof(*e->domains));
	e->claims = calloc(nc + 1, sizeof(*e->claims));
	if (!e->domains || !e->claims)
		return -ENOMEM;
	for (j = 0; j < pe->n_doms; j++) {
		const struct pgm_dom *d = &pe->doms[j];

		if (!d->prefix[0]) {
			if (!(e->domains[e->n_domains++] = pgm_dup(d->domain)))
				return -ENOMEM;
			continue;
		}
		e->claims[e->n_claims].strip_prefix = d->strip;
		e->claims[e->n_claims].no_wake = d->no_wake;
		e->claims[e->n_claims].background = d->background;
		e->claims[e->n_claims].request_total_ms = d->request_total_ms;
		/* as the file's routes: NULL takes the environment's */
		e->claims[e->n_claims].shed = d->shed_set ? d->shed : pe->shed;
		e->claims[e->n_claims].domain = pgm_dup(d->domain);
		e->claims[e->n_claims++].prefix = pgm_dup(d->prefix);
		if (!e->claims[e->n_claims - 1].domain ||
		    !e->claims[e->n_claims - 1].prefix)
			return -ENOMEM;
	}
	return 0;
}

/* Two rules by prefix, then by id; or by id alone. */
static int pgm_cmp_rule_cidr(const void *a, const void *b)
{
	const struct pgm_rule *x = a, *y = b;
	int c;

	if (x->cidr.family != y->cidr.family)
		return x->cidr.family < y->cidr.family ? -1 : 1;
	if (x->cidr.prefixlen != y->cidr.prefixlen)
		return x->cidr.prefixlen < y->cidr.prefixlen ? -1 : 1;
	c = memcmp(x->cidr.addr, y->cidr.addr, sizeof(x->cidr.addr));
	if (c)
		return c;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int pgm_cmp_rule_id(const void *a, const void *b)
{
	const struct pgm_rule *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* Project pp's rules unexpired at now as its routes' list (*out, zeroed
 * first): one per prefix (0002's index makes it so; without it the
 * lowest id), ids 0.., at most EDGE_LOCAL_RULES_MAX, the lowest ids (the
 * rest left out, logged); each keeps its expiry, which the route table
 * enforces. Sorted, not added one by one (that was quadratic in a
 * project's rules). 0 or -ENOMEM. */
static int pgm_src_rules(const struct pgm_project *pp, int64_t now,
			 struct rules *out)
{
	struct pgm_rule *v;
	size_t n = 0, i, k = 0;

	memset(out, 0, sizeof(*out));
	if (!pp->n_rules)
		return 0;
	v = malloc(pp->n_rules * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (i = 0; i < pp->n_rules; i++)
		if (!pp->rules[i].expires_at || pp->rules[i].expires_at > now)
			v[n++] = pp->rules[i];
	qsort(v, n, sizeof(*v), pgm_cmp_rule_cidr);
	for (i = 0; i < n; i++)
		if (!k || !cidr_equal(&v[i].cidr, &v[k - 1].cidr))
			v[k++] = v[i];
	qsort(v, k, sizeof(*v), pgm_cmp_rule_id);
	if (k > EDGE_LOCAL_RULES_MAX) {
		log_warnx_rl("database: project %s: %zu of its IP rules left "
			     "out: a project's routes hold %d",
			     pp->id, k - EDGE_LOCAL_RULES_MAX,
			     EDGE_LOCAL_RULES_MAX);
		k = EDGE_LOCAL_RULES_MAX;
	}
	out->v = calloc(k + 1, sizeof(*out->v));
	if (!out->v) {
		free(v);
		return -ENOMEM;
	}
	out->cap = k + 1;
	for (i = 0; i < k; i++) {
		struct rule *r = &out->v[out->n];

		r->cidr = v[i].cidr;
		r->action = v[i].action;
		r->expires_at = v[i].expires_at;
		r->id = (uint32_t)out->n++;
	}
	free(v);
	return 0;
}

/* Project pp as a route source project into *pr (zeroed). */
static int pgm_src_project(const struct pgm_project *pp, int64_t now,
			   struct route_src_project *pr)
{
	size_t j;

	memset(pr, 0, sizeof(*pr));
	pr->id = pgm_dup(pp->id);
	pr->name = pgm_dup(pp->name);
	pr->enabled = pp->enabled;
	pr->envs = calloc(pp->n_envs + 1, sizeof(*pr->envs));
	if (!pr->id || !pr->name || !pr->envs)
		return -ENOMEM;
	for (j = 0; j < pp->n_envs; j++)
		if (pgm_src_env(&pp->envs[j], &pr->envs[pr->n_envs++]))
			return -ENOMEM;
	return pgm_src_rules(pp, now, &pr->ip_rules);
}

int pgm_src_at(const struct pgm *m, size_t i, int64_t now,
	       struct route_src_project *out)
{
	int rc;

	memset(out, 0, sizeof(*out));
	if (i >= m->n)
		return -ENOENT;
	rc = pgm_src_project(m->p[i], now, out);
	if (rc)
		route_src_project_clear(out);
	return rc;
}

int pgm_src_of(const struct pgm *m, const char *id, int64_t now,
	       struct route_src_project *out)
{
	bool found;
	size_t at = pgm_find(m->p, m->n, id, &found);

	if (!found) {
		memset(out, 0, sizeof(*out));
		return -ENOENT;
	}
	return pgm_src_at(m, at, now, out);
}

size_t pgm_global_rules(struct pgm *m, int64_t now, const struct pgm_rule **out)
{
	size_t i, n = 0;
	struct pgm_rule *v;

	if (m->n_global + 1 > m->live_cap) { /* grown, never shrunk */
		v = realloc(m->live, (m->n_global + 1) * sizeof(*v));
		if (!v) {
			*out = m->global; /* out of memory: the expired too */
			return m->n_global;
		}
		m->live = v;
		m->live_cap = m->n_global + 1;
	}
	v = m->live;
	for (i = 0; i < m->n_global; i++)
		if (!m->global[i].expires_at || m->global[i].expires_at > now)
			v[n++] = m->global[i];
	*out = v;
	return n;
}

static int pgm_cmp_tcp(const void *a, const void *b)
{
	const struct tcproute_row *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

int pgm_tcp_rows(const struct pgm *m, struct tcproute_row **out, size_t *n)
{
	struct tcproute_row *v = NULL;
	size_t i, j, k = 0, total = 0;

	*out = NULL;
	*n = 0;
	for (i = 0; i < m->n; i++)
		for (j = 0; j < m->p[i]->n_envs; j++)
			total += m->p[i]->envs[j].n_tcp;
	if (!total)
		return 0;
	v = malloc(total * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (i = 0; i < m->n; i++)
		for (j = 0; j < m->p[i]->n_envs; j++) {
			const struct pgm_env *e = &m->p[i]->envs[j];

			if (!e->n_tcp)
				continue; /* e->tcp is NULL */
			memcpy(&v[k], e->tcp, e->n_tcp * sizeof(*v));
			k += e->n_tcp;
		}
	qsort(v, total, sizeof(*v), pgm_cmp_tcp);
	*out = v;
	*n = total;
	return 0;
}

void pgm_skipped(const struct pgm *m, struct pgm_skipped *out)
{
	*out = m->sk;
}

size_t pgm_projects(const struct pgm *m)
{
	return m->n;
}
