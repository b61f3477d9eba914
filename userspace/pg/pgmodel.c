// SPDX-License-Identifier: BSD-2-Clause
/*
 * pgmodel.c - the database's routing rows as edged holds them
 * (pgmodel.h): checked as they arrive, kept per project in an array
 * sorted by id, turned into a route source, saved to and loaded from a
 * JSON file.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_check.h"
#include "edge_maps.h"
#include "pgmodel.h"

struct pgm_dom {
	char *domain; /* lowercased */
	char *prefix; /* "" or a checked prefix */
	bool strip;
};

struct pgm_env {
	char *id, *name;
	char *dep; /* the active deployment's id, NULL: none */
	/* its health_check (docs/upstream.md; type CONFIG_HC_NONE: none),
	 * and why the column's value was refused (NULL: it was not) */
	struct config_health_check hc;
	char *hc_err;
	struct config_addr *eps;
	size_t n_eps;
	struct pgm_dom *doms;
	size_t n_doms;
	struct tcproute_row *tcp; /* its tcp_routes rows */
	size_t n_tcp;
	/* on demand (docs/wake.md): environments.on_demand, state and
	 * idle_timeout, checked */
	bool on_demand;
	unsigned state; /* enum pgm_env_state */
	uint64_t idle_ms;
	bool https_redirect, hsts; /* environments' columns (0007) */
};

struct pgm_project {
	/* immutable once in the model; shared with a local snapshot being
	 * written (pgm_snap) until it is done */
	atomic_uint ref;
	char *id, *name;
	bool enabled;
	struct pgm_env *envs;
	size_t n_envs;
	struct pgm_rule *rules; /* the project's (routes) */
	size_t n_rules;
};

struct pgm {
	struct pgm_project **p; /* sorted by id */
	size_t n, cap;
	struct pgm_rule *global;
	size_t n_global;
	struct pgm_rule *live; /* pgm_global_rules' unexpired copy */
	struct pgm_skipped sk;
};

/* Columns of each set (enum pgm_set). */
static const int pgm_cols[PGM_NSETS] = {3, 8, 3, 2, 4, 5, 4};

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

static void pgm_project_free(struct pgm_project *p);

static struct pgm_project *pgm_project_get(struct pgm_project *p)
{
	atomic_fetch_add_explicit(&p->ref, 1, memory_order_relaxed);
	return p;
}

static void pgm_project_free(struct pgm_project *p)
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

static void pgm_clear(struct pgm *m)
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
		    "e.https_redirect, e.hsts FROM environments e WHERE %s;"
		    "SELECT d.id, d.environment_id, d.health_check::text FROM "
		    "deployments d JOIN "
		    "environments e ON e.id = d.environment_id WHERE d.active "
		    "AND %s;"
		    "SELECT n.deployment_id, n.address FROM endpoints n JOIN "
		    "deployments d ON d.id = n.deployment_id JOIN environments "
		    "e ON e.id = d.environment_id WHERE d.active AND %s "
		    "ORDER BY n.deployment_id, n.address;"
		    "SELECT m.domain, m.path_prefix, m.strip_prefix, "
		    "m.environment_id FROM domains m JOIN environments e ON "
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
		    "FROM ip_rules r WHERE %s;"
		    "SELECT t.id, t.listen, t.sni, t.environment_id FROM "
		    "tcp_routes t JOIN environments e ON e.id = "
		    "t.environment_id WHERE %s ORDER BY t.id;"
		    "COMMIT",
		    cp, ce, ce, ce, ce, cr, ce);
	free(cp);
	free(ce);
	free(cr);
	return rc < 0 ? NULL : sql;
}

/* ---- applying result sets ---------------------------------------------- */

static int pgm_cmp_project(const void *a, const void *b)
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

/* Grow *v (of *n elements of sz) by one zeroed element; NULL: no memory. */
static void *pgm_grow(void **v, size_t *n, size_t sz)
{
	char *nv = realloc(*v, (*n + 1) * sz);

	if (!nv)
		return NULL;
	memset(nv + *n * sz, 0, sz);
	*v = nv;
	return nv + (*n)++ * sz;
}

static char *pgm_dup(const char *s)
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
 * a plain route, else config_sni_check's). 0 or -EINVAL with err. */
static int pgm_tcp_row(struct tcproute_row *x, int64_t id, const char *listen,
		       const char *sni, const char *env, struct errbuf *err)
{
	struct config_addr a;

	memset(x, 0, sizeof(*x));
	x->id = id;
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

/* The health checks of the projects v[0..n) that were refused: logged and
 * counted, but for one the model already held with the same reason (the
 * same deployment read again: said once). */
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

			if (!e->hc_err)
				continue;
			for (o = 0; old && o < old->n_envs; o++)
				if (strcmp(old->envs[o].id, e->id) == 0)
					oe = &old->envs[o];
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

/* The fetched projects from the sets, each value checked. */
static int pgm_build(struct pgm *m, PGresult *const set[PGM_NSETS],
		     struct pgm_project ***out, size_t *nout,
		     struct pgm_rule **global, size_t *nglobal)
{
	struct pgm_project **v = NULL;
	struct pgm_ref *envs = NULL, *deps = NULL;
	size_t n = 0, ne = 0, nd = 0, k;
	struct errbuf e;
	bool found;
	uint64_t idle;
	int i, rows, st, rc = -ENOMEM;

	rows = PQntuples(set[PGM_PROJECTS]);
	v = calloc((size_t)rows + 1, sizeof(*v));
	if (!v)
		goto out;
	for (i = 0; i < rows; i++) {
		PGresult *r = set[PGM_PROJECTS];
		struct pgm_project *p;

		errbuf_clear(&e);
		if (config_id_check(PQgetvalue(r, i, 0), &e)) {
			pgm_bad(&m->sk.ids, "projects", PQgetvalue(r, i, 0),
				e.msg);
			continue;
		}
		p = calloc(1, sizeof(*p));
		if (p)
			atomic_init(&p->ref, 1);
		if (!p)
			goto out;
		v[n++] = p;
		p->id = pgm_dup(PQgetvalue(r, i, 0));
		p->name = pgm_dup(PQgetisnull(r, i, 1) ? PQgetvalue(r, i, 0)
						       : PQgetvalue(r, i, 1));
		p->enabled = pgm_bool(PQgetvalue(r, i, 2));
		if (!p->id || !p->name)
			goto out;
		if (config_name_check(p->name, &e)) {
			free(p->name);
			p->name = pgm_dup(p->id);
			if (!p->name)
				goto out;
		}
	}
	qsort(v, n, sizeof(*v), pgm_cmp_project);
	/* environments, into their projects; an index of them by id */
	rows = PQntuples(set[PGM_ENVS]);
	envs = calloc((size_t)rows + 1, sizeof(*envs));
	if (!envs)
		goto out;
	for (i = 0; i < rows; i++) {
		PGresult *r = set[PGM_ENVS];
		struct pgm_env *env;
		size_t at;

		at = pgm_find(v, n, PQgetvalue(r, i, 1), &found);
		if (!found)
			continue; /* its project was skipped */
		errbuf_clear(&e);
		if (config_id_check(PQgetvalue(r, i, 0), &e)) {
			pgm_bad(&m->sk.ids, "environments", PQgetvalue(r, i, 0),
				e.msg);
			continue;
		}
		if (pgm_env_wake(r, i, &st, &idle, &e)) {
			pgm_bad(&m->sk.ids, "environments", PQgetvalue(r, i, 0),
				e.msg);
			continue;
		}
		env = pgm_grow((void **)&v[at]->envs, &v[at]->n_envs,
			       sizeof(*env));
		if (!env)
			goto out;
		env->on_demand = pgm_bool(PQgetvalue(r, i, 3));
		env->state = (unsigned)st;
		env->idle_ms = idle;
		env->id = pgm_dup(PQgetvalue(r, i, 0));
		env->name = pgm_dup(PQgetisnull(r, i, 2) ? PQgetvalue(r, i, 0)
							 : PQgetvalue(r, i, 2));
		env->https_redirect =
		    PQnfields(r) > 6 && strcmp(PQgetvalue(r, i, 6), "t") == 0;
		env->hsts =
		    PQnfields(r) > 7 && strcmp(PQgetvalue(r, i, 7), "t") == 0;
		if (!env->id || !env->name)
			goto out;
		if (config_name_check(env->name, &e)) {
			free(env->name);
			if (!(env->name = pgm_dup(env->id)))
				goto out;
		}
		envs[ne].key = env->id;
		envs[ne++].env = NULL; /* filled below: realloc moves envs */
	}
	/* the env pointers, now that every project's array is final */
	for (k = 0, ne = 0; k < n; k++) {
		size_t j;

		for (j = 0; j < v[k]->n_envs; j++) {
			envs[ne].key = v[k]->envs[j].id;
			envs[ne++].env = &v[k]->envs[j];
		}
	}
	qsort(envs, ne, sizeof(*envs), pgm_cmp_ref);
	/* active deployments */
	rows = PQntuples(set[PGM_DEPLOYMENTS]);
	deps = calloc((size_t)rows + 1, sizeof(*deps));
	if (!deps)
		goto out;
	for (i = 0; i < rows; i++) {
		PGresult *r = set[PGM_DEPLOYMENTS];
		struct pgm_env *env =
		    pgm_ref_find(envs, ne, PQgetvalue(r, i, 1));

		if (!env)
			continue;
		errbuf_clear(&e);
		if (config_id_check(PQgetvalue(r, i, 0), &e)) {
			pgm_bad(&m->sk.ids, "deployments", PQgetvalue(r, i, 0),
				e.msg);
			continue;
		}
		free(env->dep);
		if (!(env->dep = pgm_dup(PQgetvalue(r, i, 0))))
			goto out;
		free(env->hc_err);
		env->hc_err = NULL;
		memset(&env->hc, 0, sizeof(env->hc));
		if (!PQgetisnull(r, i, 2) &&
		    pgm_health_check(PQgetvalue(r, i, 2), &env->hc, &e)) {
			if (!(env->hc_err = pgm_dup(e.msg)))
				goto out;
		}
		deps[nd].key = env->dep;
		deps[nd++].env = env;
	}
	qsort(deps, nd, sizeof(*deps), pgm_cmp_ref);
	/* their endpoints */
	rows = PQntuples(set[PGM_ENDPOINTS]);
	for (i = 0; i < rows; i++) {
		PGresult *r = set[PGM_ENDPOINTS];
		struct pgm_env *env =
		    pgm_ref_find(deps, nd, PQgetvalue(r, i, 0));
		struct config_addr a, *slot;
		char key[160];

		if (!env)
			continue;
		snprintf(key, sizeof(key), "(deployment %s, address %.64s)",
			 PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
		errbuf_clear(&e);
		if (config_addr_parse(PQgetvalue(r, i, 1), &a, &e)) {
			pgm_bad(&m->sk.endpoints, "endpoints", key, e.msg);
			continue;
		}
		if (env->n_eps >= CONFIG_UPSTREAMS_MAX) {
			pgm_bad(&m->sk.endpoints, "endpoints", key,
				"more endpoints than a deployment may have");
			continue;
		}
		slot = pgm_grow((void **)&env->eps, &env->n_eps, sizeof(*slot));
		if (!slot)
			goto out;
		*slot = a;
	}
	/* domains and prefixes */
	rows = PQntuples(set[PGM_DOMAINS]);
	for (i = 0; i < rows; i++) {
		PGresult *r = set[PGM_DOMAINS];
		struct pgm_env *env =
		    pgm_ref_find(envs, ne, PQgetvalue(r, i, 3));
		const char *pre = PQgetvalue(r, i, 1);
		struct pgm_dom *d;
		char key[400], *dom;

		if (!env)
			continue;
		snprintf(key, sizeof(key), "(domain %.253s, path_prefix %.64s)",
			 PQgetvalue(r, i, 0), pre);
		dom = pgm_dup(PQgetvalue(r, i, 0));
		if (!dom)
			goto out;
		errbuf_clear(&e);
		if (config_domain_check(dom, true, &e) ||
		    (pre[0] && config_prefix_check(pre, &e))) {
			free(dom);
			pgm_bad(&m->sk.domains, "domains", key, e.msg);
			continue;
		}
		d = pgm_grow((void **)&env->doms, &env->n_doms, sizeof(*d));
		if (!d) {
			free(dom);
			goto out;
		}
		d->domain = dom;
		d->prefix = pgm_dup(pre);
		d->strip = pgm_bool(PQgetvalue(r, i, 2));
		if (!d->prefix)
			goto out;
	}
	/* TCP routes, into their environments */
	rows = PQntuples(set[PGM_TCP]);
	for (i = 0; i < rows; i++) {
		PGresult *r = set[PGM_TCP];
		struct pgm_env *env =
		    pgm_ref_find(envs, ne, PQgetvalue(r, i, 3));
		struct tcproute_row x, *slot;
		char key[200];

		if (!env)
			continue;
		snprintf(key, sizeof(key), "(id %s, listen %.64s%s%.64s)",
			 PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
			 PQgetisnull(r, i, 2) ? "" : ", sni ",
			 PQgetvalue(r, i, 2));
		errbuf_clear(&e);
		if (pgm_tcp_row(&x, strtoll(PQgetvalue(r, i, 0), NULL, 10),
				PQgetvalue(r, i, 1),
				PQgetisnull(r, i, 2) ? NULL
						     : PQgetvalue(r, i, 2),
				env->id, &e)) {
			pgm_bad(&m->sk.tcp_routes, "tcp_routes", key, e.msg);
			continue;
		}
		slot = pgm_grow((void **)&env->tcp, &env->n_tcp, sizeof(x));
		if (!slot)
			goto out;
		*slot = x;
	}
	/* rules: a project's into it, the global ones apart */
	rows = PQntuples(set[PGM_RULES]);
	for (i = 0; i < rows; i++) {
		PGresult *r = set[PGM_RULES];
		struct pgm_rule x, *slot;

		if (pgm_rule_parse(m, r, i, &x))
			continue;
		if (PQgetisnull(r, i, 3)) {
			slot = pgm_grow((void **)global, nglobal, sizeof(x));
		} else {
			size_t at = pgm_find(v, n, PQgetvalue(r, i, 3), &found);

			if (!found)
				continue;
			slot = pgm_grow((void **)&v[at]->rules, &v[at]->n_rules,
					sizeof(x));
		}
		if (!slot)
			goto out;
		*slot = x;
	}
	pgm_hc_said(m, v, n);
	*out = v;
	*nout = n;
	v = NULL;
	rc = 0;
out:
	if (v) {
		for (k = 0; k < n; k++)
			pgm_project_free(v[k]);
		free(v);
	}
	free(envs);
	free(deps);
	return rc;
}

int pgm_apply(struct pgm *m, PGresult *const set[PGM_NSETS],
	      const char *const *ids, size_t n, bool rules)
{
	struct pgm_project **v = NULL, **nv;
	struct pgm_rule *global = NULL;
	size_t nn = 0, ng = 0, i, at;
	bool found;
	int rc;

	for (i = 0; i < PGM_NSETS; i++)
		if (!set[i] || PQresultStatus(set[i]) != PGRES_TUPLES_OK ||
		    PQnfields(set[i]) != pgm_cols[i])
			return -EPROTO;
	rc = pgm_build(m, set, &v, &nn, &global, &ng);
	if (rc)
		return rc;
	if (!ids) { /* a snapshot: everything anew */
		pgm_clear(m);
		free(m->p);
		m->p = v;
		m->n = m->cap = nn;
		m->global = global;
		m->n_global = ng;
		return 0;
	}
	if (rules) {
		free(m->global);
		m->global = global;
		m->n_global = ng;
		global = NULL;
	}
	free(global);
	/* the projects asked for: out, then what the sets hold of them in */
	for (i = 0; i < n; i++) {
		at = pgm_find(m->p, m->n, ids[i], &found);
		if (!found)
			continue;
		pgm_project_free(m->p[at]);
		memmove(&m->p[at], &m->p[at + 1],
			(m->n - at - 1) * sizeof(*m->p));
		m->n--;
	}
	if (m->n + nn > m->cap) {
		size_t cap = (m->n + nn) * 2;

		nv = realloc(m->p, cap * sizeof(*nv));
		if (!nv) {
			for (i = 0; i < nn; i++)
				pgm_project_free(v[i]);
			free(v);
			return -ENOMEM;
		}
		m->p = nv;
		m->cap = cap;
	}
	for (i = 0; i < nn; i++) {
		at = pgm_find(m->p, m->n, v[i]->id, &found);
		if (found) { /* cannot be: it was taken out above */
			pgm_project_free(m->p[at]);
			m->p[at] = v[i];
			continue;
		}
		memmove(&m->p[at + 1], &m->p[at], (m->n - at) * sizeof(*m->p));
		m->p[at] = v[i];
		m->n++;
	}
	free(v);
	return 0;
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
	e->max_body_bytes = ROUTE_SRC_INHERIT;
	e->on_demand = pe->on_demand;
	e->idle_timeout_ms = pe->idle_ms;
	e->security.nosniff = true;
	e->security.hsts_max_age_s = 365 * 86400;
	e->security.frame_options = pgm_dup("");
	e->security.referrer_policy = pgm_dup("");
	e->security.https_redirect = pe->https_redirect;
	e->security.hsts = pe->hsts;
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
		e->claims[e->n_claims].domain = pgm_dup(d->domain);
		e->claims[e->n_claims++].prefix = pgm_dup(d->prefix);
		if (!e->claims[e->n_claims - 1].domain ||
		    !e->claims[e->n_claims - 1].prefix)
			return -ENOMEM;
	}
	return 0;
}

/* Project pp as a route source project into *pr (zeroed). */
static int pgm_src_project(const struct pgm_project *pp, int64_t now,
			   struct route_src_project *pr)
{
	struct errbuf e;
	size_t j;
	char c[CIDR_STR_MAX];

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
	for (j = 0; j < pp->n_rules; j++) {
		const struct pgm_rule *x = &pp->rules[j];

		if (x->expires_at && x->expires_at <= now)
			continue;
		errbuf_clear(&e);
		cidr_format(&x->cidr, c, sizeof(c));
		if (config_ip_rule_add(&pr->ip_rules, x->action, c, NULL, &e) ==
		    -ENOMEM)
			return -ENOMEM;
		/* added last: it expires when the row says (route.c checks) */
		if (pr->ip_rules.n &&
		    cidr_equal(&pr->ip_rules.v[pr->ip_rules.n - 1].cidr,
			       &x->cidr))
			pr->ip_rules.v[pr->ip_rules.n - 1].expires_at =
			    x->expires_at;
	}
	return 0;
}

int pgm_src_projects(struct pgm *m, const char *const *ids, size_t n,
		     int64_t now, struct route_src_project **set, size_t *n_set,
		     char ***del, size_t *n_del)
{
	size_t cnt = ids ? n : m->n, i, ns = 0, nd = 0;
	struct route_src_project *sv = calloc(cnt + 1, sizeof(*sv));
	char **dv = calloc(cnt + 1, sizeof(*dv));
	bool found;

	if (!sv || !dv)
		goto fail;
	for (i = 0; i < cnt; i++) {
		const struct pgm_project *pp = NULL;
		size_t at;

		if (!ids) {
			pp = m->p[i];
		} else {
			at = pgm_find(m->p, m->n, ids[i], &found);
			if (found)
				pp = m->p[at];
		}
		if (!pp) {
			if (!(dv[nd++] = pgm_dup(ids[i])))
				goto fail;
			continue;
		}
		if (pgm_src_project(pp, now, &sv[ns++]))
			goto fail;
	}
	*set = sv;
	*n_set = ns;
	*del = dv;
	*n_del = nd;
	return 0;
fail:
	for (i = 0; sv && i < ns; i++)
		route_src_project_clear(&sv[i]);
	free(sv);
	for (i = 0; dv && i < nd; i++)
		free(dv[i]);
	free(dv);
	return -ENOMEM;
}

size_t pgm_global_rules(struct pgm *m, int64_t now, const struct pgm_rule **out)
{
	size_t i, n = 0;
	struct pgm_rule *v;

	v = realloc(m->live, (m->n_global + 1) * sizeof(*v));
	if (!v) {
		*out = m->global; /* out of memory: the expired ones too */
		return m->n_global;
	}
	m->live = v;
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

/* ---- the local snapshot -------------------------------------------------- */

static json_t *pgm_rule_json(const struct pgm_rule *x)
{
	char c[CIDR_STR_MAX];

	return json_pack("[I, s, s, I]", (json_int_t)x->id,
			 cidr_format(&x->cidr, c, sizeof(c)),
			 x->action == EDGE_ACT_ALLOW ? "allow" : "block",
			 (json_int_t)x->expires_at);
}

static json_t *pgm_env_json(const struct pgm_env *e)
{
	json_t *eps = json_array(), *doms = json_array(), *o = NULL;
	json_t *tcp = json_array(), *hc = NULL;
	size_t i;

	if (!eps || !doms || !tcp)
		goto out;
	for (i = 0; i < e->n_eps; i++)
		if (json_array_append_new(eps, json_string(e->eps[i].text)))
			goto out;
	for (i = 0; i < e->n_doms; i++)
		if (json_array_append_new(
			doms, json_pack("[s, s, b]", e->doms[i].domain,
					e->doms[i].prefix, e->doms[i].strip)))
			goto out;
	for (i = 0; i < e->n_tcp; i++)
		if (json_array_append_new(
			tcp,
			json_pack("[I, s, s?]", (json_int_t)e->tcp[i].id,
				  e->tcp[i].listen,
				  e->tcp[i].sni[0] ? e->tcp[i].sni : NULL)))
			goto out;
	if (e->hc.type != CONFIG_HC_NONE) {
		hc = config_health_check_to_json(&e->hc);
		if (!hc)
			goto out;
	}
	o = json_pack(
	    "{s:s, s:s, s:s?, s:O, s:O, s:O, s:b, s:s, s:I, s:b, s:b, s:O*}",
	    "id", e->id, "name", e->name, "deployment", e->dep, "endpoints",
	    eps, "domains", doms, "tcp_routes", tcp, "on_demand", e->on_demand,
	    "state", pgm_env_states[e->state], "idle_timeout_ms",
	    (json_int_t)e->idle_ms, "https_redirect", e->https_redirect, "hsts",
	    e->hsts, "health_check", hc);
out:
	json_decref(hc);
	json_decref(eps);
	json_decref(doms);
	json_decref(tcp);
	return o;
}

struct pgm_snap {
	uint64_t version;
	struct pgm_project **p; /* references */
	size_t n;
	struct pgm_rule *global;
	size_t n_global;
};

struct pgm_snap *pgm_snap_take(const struct pgm *m, uint64_t version)
{
	struct pgm_snap *x = calloc(1, sizeof(*x));
	size_t i;

	if (!x)
		return NULL;
	x->version = version;
	x->p = calloc(m->n + 1, sizeof(*x->p));
	x->global = calloc(m->n_global + 1, sizeof(*x->global));
	if (!x->p || !x->global) {
		pgm_snap_free(x);
		return NULL;
	}
	for (i = 0; i < m->n; i++)
		x->p[x->n++] = pgm_project_get(m->p[i]);
	if (m->n_global)
		memcpy(x->global, m->global, m->n_global * sizeof(*x->global));
	x->n_global = m->n_global;
	return x;
}

uint64_t pgm_snap_version(const struct pgm_snap *x)
{
	return x->version;
}

void pgm_snap_free(struct pgm_snap *x)
{
	size_t i;

	if (!x)
		return;
	for (i = 0; i < x->n; i++)
		pgm_project_free(x->p[i]);
	free(x->p);
	free(x->global);
	free(x);
}

/* All of buf to fd; 0 or -errno. */
static int pgm_write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int pgm_snap_write(const struct pgm_snap *x, const char *path,
		   struct errbuf *err)
{
	json_t *root = NULL, *projects = json_array(), *rules = json_array();
	char tmp[4096], *text = NULL;
	size_t i, j;
	int fd = -1, rc = -ENOMEM;

	if (!projects || !rules)
		goto out;
	for (i = 0; i < x->n; i++) {
		const struct pgm_project *p = x->p[i];
		json_t *envs = json_array(), *prules = json_array(), *o;

		for (j = 0; envs && j < p->n_envs; j++)
			if (json_array_append_new(envs,
						  pgm_env_json(&p->envs[j])))
				break;
		for (j = 0; prules && j < p->n_rules; j++)
			if (json_array_append_new(prules,
						  pgm_rule_json(&p->rules[j])))
				break;
		o = envs && prules
			? json_pack("{s:s, s:s, s:b, s:O, s:O}", "id", p->id,
				    "name", p->name, "enabled", p->enabled,
				    "envs", envs, "rules", prules)
			: NULL;
		json_decref(envs);
		json_decref(prules);
		if (json_array_append_new(projects, o))
			goto out;
	}
	for (i = 0; i < x->n_global; i++)
		if (json_array_append_new(rules, pgm_rule_json(&x->global[i])))
			goto out;
	root = json_pack("{s:i, s:I, s:O, s:O}", "format", 1, "version",
			 (json_int_t)x->version, "projects", projects, "rules",
			 rules);
	/* one string, one write: json_dumpfd writes token by token */
	text = root ? json_dumps(root, JSON_COMPACT) : NULL;
	if (!text)
		goto out;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
		rc = -ENAMETOOLONG;
		errbuf_set(err, "%s: path too long", path);
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0 || pgm_write_all(fd, text, strlen(text)) ||
	    pgm_write_all(fd, "\n", 1) || fsync(fd)) {
		rc = -errno;
		errbuf_set(err, "cannot write %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (close(fd)) {
		fd = -1;
		rc = -errno;
		errbuf_set(err, "cannot write %s: %s", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, path)) {
		rc = -errno;
		errbuf_set(err, "cannot replace %s: %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (rc == -ENOMEM && !err->msg[0])
		errbuf_set(err, "%s: out of memory", path);
	if (fd >= 0) {
		close(fd);
		unlink(tmp);
	}
	free(text);
	json_decref(root);
	json_decref(projects);
	json_decref(rules);
	return rc;
}

int pgm_save(const struct pgm *m, uint64_t version, const char *path,
	     struct errbuf *err)
{
	struct pgm_snap *x = pgm_snap_take(m, version);
	int rc;

	if (!x) {
		errbuf_set(err, "%s: out of memory", path);
		return -ENOMEM;
	}
	rc = pgm_snap_write(x, path, err);
	pgm_snap_free(x);
	return rc;
}

/* One saved rule back; -EINVAL when it does not read. */
static int pgm_rule_unjson(json_t *a, struct pgm_rule *x)
{
	json_int_t id = 0, exp = 0;
	const char *cidr = NULL, *act = NULL;

	memset(x, 0, sizeof(*x));
	if (json_unpack(a, "[I, s, s, I]", &id, &cidr, &act, &exp) ||
	    cidr_parse(cidr, &x->cidr, NULL, NULL))
		return -EINVAL;
	x->id = id;
	x->expires_at = exp;
	x->action = strcmp(act, "allow") == 0 ? EDGE_ACT_ALLOW : EDGE_ACT_BLOCK;
	return 0;
}

static int pgm_env_unjson(json_t *o, struct pgm_env *e)
{
	json_t *eps = NULL, *doms = NULL, *tcp = NULL, *hc = NULL, *x;
	const char *id = NULL, *name = NULL, *dep = NULL, *st = NULL;
	json_int_t idle = (json_int_t)CONFIG_IDLE_TIMEOUT_DEFAULT_MS;
	int od = 0, stv, redirect = 0, hsts = 0;
	size_t i;

	/* tcp_routes, on_demand, state, idle_timeout_ms, https_redirect,
	 * hsts, health_check: absent from a snapshot an edge before them
	 * wrote (and health_check when the deployment has none) */
	if (json_unpack(o,
			"{s:s, s:s, s?:s, s:o, s:o, s?:o, s?:b, s?:s, s?:I, "
			"s?:b, s?:b, s?:o}",
			"id", &id, "name", &name, "deployment", &dep,
			"endpoints", &eps, "domains", &doms, "tcp_routes", &tcp,
			"on_demand", &od, "state", &st, "idle_timeout_ms",
			&idle, "https_redirect", &redirect, "hsts", &hsts,
			"health_check", &hc) ||
	    !json_is_array(eps) || !json_is_array(doms) ||
	    (tcp && !json_is_array(tcp)))
		return -EINVAL;
	/* the same check as the column's: one the file could not hold is
	 * not this edge's snapshot */
	if (hc && !json_is_null(hc) &&
	    config_health_check_json(hc, &e->hc, NULL))
		return -EINVAL;
	stv = st ? pgm_env_state_parse(st) : PGM_ENV_RUNNING;
	if (stv < 0 || idle < 0 || (uint64_t)idle > CONFIG_DURATION_MAX_MS)
		return -EINVAL;
	e->on_demand = od;
	e->state = (unsigned)stv;
	e->idle_ms = (uint64_t)idle;
	e->id = pgm_dup(id);
	e->name = pgm_dup(name);
	e->dep = dep ? pgm_dup(dep) : NULL;
	e->https_redirect = redirect;
	e->hsts = hsts;
	if (!e->id || !e->name || (dep && !e->dep))
		return -ENOMEM;
	json_array_foreach(eps, i, x)
	{
		struct config_addr *a;

		if (!json_is_string(x))
			return -EINVAL;
		a = pgm_grow((void **)&e->eps, &e->n_eps, sizeof(*a));
		if (!a)
			return -ENOMEM;
		if (config_addr_parse(json_string_value(x), a, NULL))
			return -EINVAL;
	}
	json_array_foreach(doms, i, x)
	{
		const char *d = NULL, *p = NULL;
		int strip = 0;
		struct pgm_dom *dm;

		if (json_unpack(x, "[s, s, b]", &d, &p, &strip))
			return -EINVAL;
		dm = pgm_grow((void **)&e->doms, &e->n_doms, sizeof(*dm));
		if (!dm)
			return -ENOMEM;
		dm->domain = pgm_dup(d);
		dm->prefix = pgm_dup(p);
		dm->strip = strip;
		if (!dm->domain || !dm->prefix)
			return -ENOMEM;
		if (config_domain_check(dm->domain, true, NULL) ||
		    (p[0] && config_prefix_check(p, NULL)))
			return -EINVAL;
	}
	json_array_foreach(tcp, i, x)
	{
		json_int_t rid = 0;
		const char *listen = NULL, *sni = NULL;
		json_t *sv = NULL;
		struct tcproute_row *r;

		/* [id, listen, sni or null] */
		if (json_unpack(x, "[I, s, o]", &rid, &listen, &sv) ||
		    (!json_is_null(sv) && !json_is_string(sv)))
			return -EINVAL;
		sni = json_string_value(sv);
		r = pgm_grow((void **)&e->tcp, &e->n_tcp, sizeof(*r));
		if (!r)
			return -ENOMEM;
		if (pgm_tcp_row(r, rid, listen, sni, e->id, NULL))
			return -EINVAL;
	}
	return 0;
}

int pgm_load(struct pgm *m, const char *path, uint64_t *version,
	     struct errbuf *err)
{
	json_error_t je;
	json_t *root, *projects = NULL, *rules = NULL, *po, *x;
	json_int_t v = 0;
	struct pgm fresh;
	size_t i, j;
	int fmt = 0, rc = -EINVAL;

	memset(&fresh, 0, sizeof(fresh));
	root = json_load_file(path, 0, &je);
	if (!root) {
		rc = access(path, F_OK) ? -ENOENT : -EINVAL;
		errbuf_set(err, "%s: %s", path,
			   rc == -ENOENT ? "no such file" : je.text);
		return rc;
	}
	if (json_unpack(root, "{s:i, s:I, s:o, s:o}", "format", &fmt, "version",
			&v, "projects", &projects, "rules", &rules) ||
	    fmt != 1 || !json_is_array(projects) || !json_is_array(rules))
		goto bad;
	fresh.p = calloc(json_array_size(projects) + 1, sizeof(*fresh.p));
	if (!fresh.p)
		goto nomem;
	json_array_foreach(projects, i, po)
	{
		const char *id = NULL, *name = NULL;
		json_t *envs = NULL, *prules = NULL;
		int enabled = 0;
		struct pgm_project *p;

		if (json_unpack(po, "{s:s, s:s, s:b, s:o, s:o}", "id", &id,
				"name", &name, "enabled", &enabled, "envs",
				&envs, "rules", &prules) ||
		    !json_is_array(envs) || !json_is_array(prules) ||
		    config_id_check(id, NULL))
			goto bad;
		p = calloc(1, sizeof(*p));
		if (p)
			atomic_init(&p->ref, 1);
		if (!p)
			goto nomem;
		fresh.p[fresh.n++] = p;
		p->id = pgm_dup(id);
		p->name = pgm_dup(name);
		p->enabled = enabled;
		if (!p->id || !p->name)
			goto nomem;
		p->envs = calloc(json_array_size(envs) + 1, sizeof(*p->envs));
		p->rules =
		    calloc(json_array_size(prules) + 1, sizeof(*p->rules));
		if (!p->envs || !p->rules)
			goto nomem;
		json_array_foreach(envs, j, x)
		{
			rc = pgm_env_unjson(x, &p->envs[p->n_envs++]);
			if (rc)
				goto fail;
		}
		json_array_foreach(prules, j, x)
		{
			if (pgm_rule_unjson(x, &p->rules[p->n_rules++]))
				goto bad;
		}
	}
	qsort(fresh.p, fresh.n, sizeof(*fresh.p), pgm_cmp_project);
	fresh.cap = fresh.n;
	fresh.global =
	    calloc(json_array_size(rules) + 1, sizeof(*fresh.global));
	if (!fresh.global)
		goto nomem;
	json_array_foreach(rules, i, x)
	{
		if (pgm_rule_unjson(x, &fresh.global[fresh.n_global++]))
			goto bad;
	}
	json_decref(root);
	pgm_clear(m);
	free(m->p);
	m->p = fresh.p;
	m->n = fresh.n;
	m->cap = fresh.cap;
	m->global = fresh.global;
	m->n_global = fresh.n_global;
	*version = (uint64_t)v;
	return 0;
nomem:
	rc = -ENOMEM;
	goto fail;
bad:
	rc = -EINVAL;
fail:
	errbuf_set(err, "%s: %s", path,
		   rc == -ENOMEM ? "out of memory"
				 : "not a snapshot of this edge's (refused)");
	json_decref(root);
	pgm_clear(&fresh);
	free(fresh.p);
	return rc;
}
