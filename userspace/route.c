/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * route.c - route table generations: built once from the route sources'
 * lists of projects into one arena, looked up without locks or
 * allocation, swapped atomically.
 */
#include <errno.h>
#include <sched.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "route.h"

#define ROUTE_ARENA_BLOCK 16384

struct route_project {
	const char *id, *name;
	bool enabled;
	bool has_allow;
	struct rules rules; /* v points into the arena */
};

struct route_env;

struct route_r {
	const char *prefix; /* NULL: the environment's default route */
	/* a claim's route: everything but the prefix and the gauge is this
	 * environment's (its project, ids, deployment, security); NULL: the
	 * route's own environment */
	const struct route_env *target;
	size_t prefix_len;
	bool strip;
	const struct config_addr *upstreams;
	size_t n_upstreams;
	enum config_balance balance;
	uint64_t max_body_bytes;
	unsigned index;
	struct admit_gauge inflight;
};

struct route_env {
	const struct route_project *project;
	const char *id, *name, *deployment_id;
	const char **domains;
	size_t n_domains;
	struct config_security_headers security;
	struct route_r def;
	struct route_r *routes; /* longest prefix first */
	size_t n_routes;
	bool no_default;  /* made for claims only: no route but theirs */
	size_t n_claimed; /* claims routed through it (building) */
};

/* A slot of a domain hash table (open addressing, linear probing). */
struct route_dom {
	const char *name; /* NULL: empty slot; wildcards without "*." */
	size_t len;
	const struct route_env *env;
};

struct route_blk {
	struct route_blk *next;
	size_t used, cap;
	alignas(16) unsigned char data[];
};

struct route_table {
	atomic_uint ref;
	uint64_t generation;
	struct route_blk *arena;
	struct route_env *envs;
	size_t n_envs, cap_envs;
	struct route_r **routes; /* by index */
	size_t n_routes;
	struct route_dom *exact, *wild;
	size_t exact_cap, wild_cap; /* powers of two */
};

static atomic_ullong route_generations;

/* ---- arena ---------------------------------------------------------- */

static void *rt_alloc(struct route_table *t, size_t n)
{
	struct route_blk *b = t->arena;
	void *p;

	n = (n + 15) & ~(size_t)15;
	if (!b || b->cap - b->used < n) {
		size_t cap = n > ROUTE_ARENA_BLOCK ? n : ROUTE_ARENA_BLOCK;

		b = calloc(1, sizeof(*b) + cap);
		if (!b)
			return NULL;
		b->cap = cap;
		b->next = t->arena;
		t->arena = b;
	}
	p = b->data + b->used;
	b->used += n;
	return p;
}

static char *rt_strdup(struct route_table *t, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = rt_alloc(t, n);

	if (p)
		memcpy(p, s, n);
	return p;
}

static void *rt_memdup(struct route_table *t, const void *s, size_t n)
{
	void *p;

	if (n == 0)
		return NULL;
	p = rt_alloc(t, n);
	if (p)
		memcpy(p, s, n);
	return p;
}

/* ---- domain hash tables ----------------------------------------------- */

static uint64_t rt_hash(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ULL;
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h ^ (h >> 31);
}

static const struct route_dom *rt_find(const struct route_dom *tab, size_t cap,
				       const char *name, size_t len)
{
	size_t i;

	if (!cap)
		return NULL;
	for (i = rt_hash(name, len) & (cap - 1); tab[i].name;
	     i = (i + 1) & (cap - 1))
		if (tab[i].len == len && memcmp(tab[i].name, name, len) == 0)
			return &tab[i];
	return NULL;
}

static int rt_insert(struct route_dom *tab, size_t cap, const char *name,
		     const struct route_env *env)
{
	size_t len = strlen(name), i;

	for (i = rt_hash(name, len) & (cap - 1); tab[i].name;
	     i = (i + 1) & (cap - 1))
		if (tab[i].len == len && memcmp(tab[i].name, name, len) == 0)
			return -EEXIST;
	tab[i].name = name;
	tab[i].len = len;
	tab[i].env = env;
	return 0;
}

static size_t rt_cap_for(size_t n)
{
	size_t cap = 16;

	while (cap < n * 2)
		cap *= 2;
	return cap;
}

/* ---- building --------------------------------------------------------- */

static int rt_cmp_prefix_len(const void *a, const void *b)
{
	const struct route_r *x = a, *y = b;

	if (x->prefix_len != y->prefix_len)
		return x->prefix_len > y->prefix_len ? -1 : 1;
	return strcmp(x->prefix, y->prefix);
}

static void rt_route_init(struct route_r *r, const struct config_addr *ups,
			  size_t n_ups, enum config_balance balance,
			  uint64_t max_body, unsigned limit)
{
	r->upstreams = ups;
	r->n_upstreams = n_ups;
	r->balance = balance;
	r->max_body_bytes = max_body;
	admit_gauge_init(&r->inflight, limit);
}

static int rt_build_env(struct route_table *t, const struct route_defaults *def,
			const struct route_src_env *ce,
			const struct route_project *rp, struct route_env *e)
{
	unsigned limit = (unsigned)def->max_inflight_per_route;
	uint64_t env_max = ce->max_body_bytes == ROUTE_SRC_INHERIT
			       ? def->max_body_bytes
			       : ce->max_body_bytes;
	const struct config_addr *ups;
	size_t i;

	e->project = rp;
	e->id = rt_strdup(t, ce->id);
	e->name = rt_strdup(t, ce->name);
	e->deployment_id = rt_strdup(t, ce->deployment.id);
	e->security = ce->security;
	e->security.frame_options = rt_strdup(t, ce->security.frame_options);
	e->security.referrer_policy =
	    rt_strdup(t, ce->security.referrer_policy);
	ups = rt_memdup(t, ce->deployment.upstreams,
			ce->deployment.n_upstreams * sizeof(*ups));
	e->domains = rt_alloc(t, (ce->n_domains + 1) * sizeof(*e->domains));
	if (!e->id || !e->name || !e->deployment_id ||
	    !e->security.frame_options || !e->security.referrer_policy ||
	    (ce->deployment.n_upstreams && !ups) || !e->domains)
		return -ENOMEM;
	for (i = 0; i < ce->n_domains; i++) {
		e->domains[i] = rt_strdup(t, ce->domains[i]);
		if (!e->domains[i])
			return -ENOMEM;
	}
	e->n_domains = ce->n_domains;
	rt_route_init(&e->def, ups, ce->deployment.n_upstreams,
		      ce->deployment.balance, env_max, limit);
	if (ce->n_routes) {
		e->routes = rt_alloc(t, ce->n_routes * sizeof(*e->routes));
		if (!e->routes)
			return -ENOMEM;
	}
	for (i = 0; i < ce->n_routes; i++) {
		const struct route_src_route *cr = &ce->routes[i];
		struct route_r *r = &e->routes[i];
		const struct config_addr *rups = ups;
		size_t n = ce->deployment.n_upstreams;

		if (cr->n_upstreams) {
			rups = rt_memdup(t, cr->upstreams,
					 cr->n_upstreams * sizeof(*rups));
			n = cr->n_upstreams;
			if (!rups)
				return -ENOMEM;
		}
		r->prefix = rt_strdup(t, cr->prefix);
		if (!r->prefix)
			return -ENOMEM;
		r->prefix_len = strlen(cr->prefix);
		r->strip = cr->strip_prefix;
		rt_route_init(r, rups, n, cr->balance,
			      cr->max_body_bytes == ROUTE_SRC_INHERIT
				  ? env_max
				  : cr->max_body_bytes,
			      limit);
	}
	e->n_routes = ce->n_routes;
	return 0;
}

/* Index every environment's domains; the tables have room for
 * extra_exact and extra_wild more (environments made for claims). */
static int rt_index_domains(struct route_table *t, size_t extra_exact,
			    size_t extra_wild, struct errbuf *err)
{
	size_t i, j, n_exact = extra_exact, n_wild = extra_wild;

	for (i = 0; i < t->n_envs; i++)
		for (j = 0; j < t->envs[i].n_domains; j++) {
			if (t->envs[i].domains[j][0] == '*')
				n_wild++;
			else
				n_exact++;
		}
	t->exact_cap = rt_cap_for(n_exact);
	t->wild_cap = rt_cap_for(n_wild);
	t->exact = rt_alloc(t, t->exact_cap * sizeof(*t->exact));
	t->wild = rt_alloc(t, t->wild_cap * sizeof(*t->wild));
	if (!t->exact || !t->wild)
		return -ENOMEM;
	memset(t->exact, 0, t->exact_cap * sizeof(*t->exact));
	memset(t->wild, 0, t->wild_cap * sizeof(*t->wild));
	for (i = 0; i < t->n_envs; i++)
		for (j = 0; j < t->envs[i].n_domains; j++) {
			const char *d = t->envs[i].domains[j];
			int rc = d[0] == '*' ? rt_insert(t->wild, t->wild_cap,
							 d + 2, &t->envs[i])
					     : rt_insert(t->exact, t->exact_cap,
							 d, &t->envs[i]);

			if (rc < 0) {
				errbuf_set(err,
					   "domain %s is claimed by two "
					   "environments",
					   d);
				return rc;
			}
		}
	return 0;
}

static void rt_free(struct route_table *t)
{
	struct route_blk *b, *next;

	if (!t)
		return;
	for (b = t->arena; b; b = next) {
		next = b->next;
		free(b);
	}
	free(t);
}

/* Whether a project's allow rules make its list exclusive: some allow
 * rule is not an exception carved out of a block rule. */
static bool rt_allow_list(const struct rules *r)
{
	size_t i, j;

	for (i = 0; i < r->n; i++) {
		bool inside = false;

		if (r->v[i].action != EDGE_ACT_ALLOW)
			continue;
		for (j = 0; j < r->n && !inside; j++)
			inside = r->v[j].action == EDGE_ACT_BLOCK &&
				 cidr_contains(&r->v[j].cidr, &r->v[i].cidr);
		if (!inside)
			return true;
	}
	return false;
}

/* Add the project cp and its environments to t (sized for them). */
static int rt_build_project(struct route_table *t,
			    const struct route_defaults *def,
			    const struct route_src_project *cp)
{
	struct route_project *rp = rt_alloc(t, sizeof(*rp));
	size_t j;
	int rc;

	if (!rp)
		return -ENOMEM;
	memset(rp, 0, sizeof(*rp));
	rp->id = rt_strdup(t, cp->id);
	rp->name = rt_strdup(t, cp->name);
	rp->enabled = cp->enabled;
	rp->has_allow = rt_allow_list(&cp->ip_rules);
	rp->rules.n = rp->rules.cap = cp->ip_rules.n;
	rp->rules.v =
	    rt_memdup(t, cp->ip_rules.v, cp->ip_rules.n * sizeof(*rp->rules.v));
	if (!rp->id || !rp->name || (cp->ip_rules.n && !rp->rules.v))
		return -ENOMEM;
	for (j = 0; j < cp->n_envs; j++) {
		struct route_env *e = &t->envs[t->n_envs++];

		rc = rt_build_env(t, def, &cp->envs[j], rp, e);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The environment a claim's domain is served by: its own (exact or
 * wildcard) if one serves it, else one made for claims on it. */
static struct route_env *rt_claim_owner(struct route_table *t,
					const char *domain, struct errbuf *err)
{
	bool wild = domain[0] == '*';
	const char *key = wild ? domain + 2 : domain;
	struct route_dom *tab = wild ? t->wild : t->exact;
	size_t cap = wild ? t->wild_cap : t->exact_cap;
	const struct route_dom *d = rt_find(tab, cap, key, strlen(key));
	struct route_env *e;

	if (d)
		return (struct route_env *)d->env;
	if (t->n_envs >= t->cap_envs) {
		errbuf_set(err, "route table: claims overflow");
		return NULL;
	}
	e = &t->envs[t->n_envs++];
	memset(e, 0, sizeof(*e));
	e->no_default = true;
	e->id = e->name = e->deployment_id = "";
	e->domains = rt_alloc(t, 2 * sizeof(*e->domains));
	e->security.frame_options = rt_strdup(t, "");
	e->security.referrer_policy = e->security.frame_options;
	if (!e->domains || !(e->domains[0] = rt_strdup(t, domain)) ||
	    !e->security.frame_options)
		return NULL;
	e->n_domains = 1;
	key = wild ? e->domains[0] + 2 : e->domains[0];
	if (rt_insert(tab, cap, key, e) < 0)
		return NULL;
	return e;
}

/*
 * Put every claim (domain + prefix -> environment) among the routes of
 * the environment serving its domain: two passes, counting then filling,
 * so that each owner's routes are one array. A (domain, prefix) claimed
 * twice, or a prefix an owner already routes, is refused.
 */
static int rt_attach_claims(struct route_table *t, size_t n_real,
			    const struct route_src_env *const *cenv,
			    const struct route_env **owner_of,
			    size_t n_claims_all, struct errbuf *err)
{
	size_t i, j, k = 0, m;

	(void)n_claims_all;
	for (i = 0; i < n_real; i++)
		for (j = 0; j < cenv[i]->n_claims; j++, k++) {
			struct route_env *o =
			    rt_claim_owner(t, cenv[i]->claims[j].domain, err);

			if (!o)
				return err->msg[0] ? -EINVAL : -ENOMEM;
			owner_of[k] = o;
			o->n_claimed++;
		}
	for (i = 0; i < t->n_envs; i++) {
		struct route_env *o = &t->envs[i];
		struct route_r *v;

		if (!o->n_claimed)
			continue;
		v = rt_alloc(t, (o->n_routes + o->n_claimed) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		if (o->n_routes)
			memcpy(v, o->routes, o->n_routes * sizeof(*v));
		o->routes = v;
	}
	for (i = 0, k = 0; i < n_real; i++) {
		const struct route_env *target = &t->envs[i];

		for (j = 0; j < cenv[i]->n_claims; j++, k++) {
			const struct route_src_claim *cl = &cenv[i]->claims[j];
			struct route_env *o = (struct route_env *)owner_of[k];
			struct route_r *r = &o->routes[o->n_routes];

			for (m = 0; m < o->n_routes; m++)
				if (strcmp(o->routes[m].prefix, cl->prefix) ==
				    0) {
					errbuf_set(err,
						   "%s%s is routed twice (to "
						   "environment %s and %s)",
						   cl->domain, cl->prefix,
						   target->id,
						   o->routes[m].target
						       ? o->routes[m].target->id
						       : o->id);
					return -EEXIST;
				}
			memset(r, 0, sizeof(*r));
			r->upstreams = target->def.upstreams;
			r->n_upstreams = target->def.n_upstreams;
			r->balance = target->def.balance;
			r->max_body_bytes = target->def.max_body_bytes;
			r->target = target;
			r->prefix = rt_strdup(t, cl->prefix);
			if (!r->prefix)
				return -ENOMEM;
			r->prefix_len = strlen(cl->prefix);
			r->strip = cl->strip_prefix;
			admit_gauge_init(
			    &r->inflight,
			    atomic_load(&target->def.inflight.limit));
			o->n_routes++;
		}
	}
	return 0;
}

/* Number every route, each environment's default first, and sort each
 * environment's prefixes longest first. */
static void rt_index_routes(struct route_table *t)
{
	size_t i, k;

	t->n_routes = 0;
	for (i = 0; i < t->n_envs; i++) {
		struct route_env *e = &t->envs[i];

		if (e->n_routes > 1)
			qsort(e->routes, e->n_routes, sizeof(*e->routes),
			      rt_cmp_prefix_len);
		if (!e->no_default) {
			e->def.index = (unsigned)t->n_routes;
			t->routes[t->n_routes++] = &e->def;
		}
		for (k = 0; k < e->n_routes; k++) {
			e->routes[k].index = (unsigned)t->n_routes;
			t->routes[t->n_routes++] = &e->routes[k];
		}
	}
}

int route_table_build(const struct route_src *const *src, size_t n_src,
		      const struct route_defaults *def,
		      struct route_table **out, struct errbuf *err)
{
	const struct route_src_env **cenv = NULL;
	const struct route_env **owner_of = NULL;
	struct route_table *t;
	size_t s, i, j, n_envs = 0, n_routes = 0, n_claims = 0, k = 0;
	size_t n_exact_claims = 0, n_wild_claims = 0;
	int rc = -ENOMEM;

	t = calloc(1, sizeof(*t));
	if (!t)
		goto fail;
	atomic_init(&t->ref, 1);
	for (s = 0; s < n_src; s++)
		for (i = 0; src[s] && i < src[s]->n_projects; i++)
			for (j = 0; j < src[s]->projects[i].n_envs; j++) {
				const struct route_src_env *ce =
				    &src[s]->projects[i].envs[j];

				n_envs++;
				n_routes += 1 + ce->n_routes + ce->n_claims;
				n_claims += ce->n_claims;
			}
	/* room for an environment made per claim, at most */
	t->cap_envs = n_envs + n_claims;
	if (t->cap_envs) {
		t->envs = rt_alloc(t, t->cap_envs * sizeof(*t->envs));
		t->routes = rt_alloc(t, n_routes * sizeof(*t->routes));
		cenv = calloc(n_envs, sizeof(*cenv));
		owner_of = calloc(n_claims + 1, sizeof(*owner_of));
		if (!t->envs || !t->routes || !cenv || !owner_of)
			goto fail;
		memset(t->envs, 0, t->cap_envs * sizeof(*t->envs));
	}
	for (s = 0; s < n_src; s++)
		for (i = 0; src[s] && i < src[s]->n_projects; i++) {
			rc = rt_build_project(t, def, &src[s]->projects[i]);
			if (rc < 0)
				goto fail;
			for (j = 0; j < src[s]->projects[i].n_envs; j++)
				cenv[k++] = &src[s]->projects[i].envs[j];
		}
	for (i = 0; i < n_envs; i++)
		for (j = 0; j < cenv[i]->n_claims; j++) {
			if (cenv[i]->claims[j].domain[0] == '*')
				n_wild_claims++;
			else
				n_exact_claims++;
		}
	rc = rt_index_domains(t, n_exact_claims, n_wild_claims, err);
	if (rc == 0 && n_claims)
		rc = rt_attach_claims(t, n_envs, cenv, owner_of, n_claims, err);
	if (rc < 0)
		goto fail;
	rt_index_routes(t);
	free(cenv);
	free(owner_of);
	t->generation = atomic_fetch_add(&route_generations, 1) + 1;
	*out = t;
	return 0;
fail:
	if (rc == -ENOMEM)
		errbuf_set(err, "route table: out of memory");
	free(cenv);
	free(owner_of);
	rt_free(t);
	return rc;
}

struct route_table *route_table_get(struct route_table *t)
{
	if (t)
		atomic_fetch_add_explicit(&t->ref, 1, memory_order_relaxed);
	return t;
}

void route_table_put(struct route_table *t)
{
	if (t &&
	    atomic_fetch_sub_explicit(&t->ref, 1, memory_order_acq_rel) == 1)
		rt_free(t);
}

uint64_t route_table_generation(const struct route_table *t)
{
	return t->generation;
}

size_t route_table_nroutes(const struct route_table *t)
{
	return t->n_routes;
}

/* ---- lookup ---------------------------------------------------------------
 */

/* Normalise host into buf (CONFIG_HOST_MAX + 1 bytes): lowercase, no port,
 * no trailing dot. Returns its length, or 0 when it can match no domain
 * (empty, too long, an IP literal's brackets). */
static size_t rt_host_norm(const char *host, size_t n, char *buf)
{
	const char *colon;
	size_t i;

	if (n && host[0] == '[')
		return 0; /* an IPv6 literal: never a configured domain */
	colon = memchr(host, ':', n);
	if (colon)
		n = (size_t)(colon - host);
	if (n && host[n - 1] == '.')
		n--;
	if (n == 0 || n > CONFIG_HOST_MAX)
		return 0;
	for (i = 0; i < n; i++) {
		char ch = host[i];

		buf[i] = (ch >= 'A' && ch <= 'Z') ? (char)(ch - 'A' + 'a') : ch;
	}
	buf[n] = '\0';
	return n;
}

static const struct route_env *rt_find_env(const struct route_table *t,
					   const char *h, size_t n)
{
	const struct route_dom *d;
	const char *dot;

	d = rt_find(t->exact, t->exact_cap, h, n);
	if (d)
		return d->env;
	dot = memchr(h, '.', n);
	if (!dot || dot == h)
		return NULL;
	d = rt_find(t->wild, t->wild_cap, dot + 1, n - (size_t)(dot + 1 - h));
	return d ? d->env : NULL;
}

static const struct route_r *rt_find_route(const struct route_env *e,
					   const char *path, size_t path_len)
{
	size_t plen = 0, i;

	while (plen < path_len && path[plen] != '?' && path[plen] != '#')
		plen++;
	for (i = 0; i < e->n_routes; i++) {
		const struct route_r *r = &e->routes[i];

		if (plen >= r->prefix_len &&
		    memcmp(path, r->prefix, r->prefix_len) == 0 &&
		    (plen == r->prefix_len || path[r->prefix_len] == '/'))
			return r;
	}
	return &e->def;
}

enum route_status route_lookup(const struct route_table *t, const char *host,
			       size_t host_len, const char *path,
			       size_t path_len, struct route_match *m)
{
	char buf[CONFIG_HOST_MAX + 1];
	const struct route_env *e;
	const struct route_r *r;
	size_t n;

	memset(m, 0, sizeof(*m));
	n = rt_host_norm(host, host_len, buf);
	e = n ? rt_find_env(t, buf, n) : NULL;
	if (!e)
		return ROUTE_DOMAIN_NOT_FOUND;
	r = rt_find_route(e, path, path_len);
	if (r == &e->def && e->no_default)
		return ROUTE_DOMAIN_NOT_FOUND; /* only claimed prefixes */
	if (r->target)
		e = r->target; /* a claim: the target's all but the prefix */
	m->project = e->project;
	m->project_id = e->project->id;
	m->project_name = e->project->name;
	m->env_id = e->id;
	m->env_name = e->name;
	m->deployment_id = e->deployment_id;
	if (!e->project->enabled)
		return ROUTE_PROJECT_DISABLED;
	m->prefix = r->prefix;
	m->upstreams = r->upstreams;
	m->n_upstreams = r->n_upstreams;
	m->balance = r->balance;
	m->max_body_bytes = r->max_body_bytes;
	m->security = &e->security;
	/* the table is immutable but for its gauges */
	m->inflight = (struct admit_gauge *)&r->inflight;
	m->route_index = r->index;
	m->path = path;
	m->path_len = path_len;
	if (r->prefix && r->strip) {
		m->path = path + r->prefix_len;
		m->path_len = path_len - r->prefix_len;
		m->path_slash = m->path_len == 0 || m->path[0] != '/';
	}
	return ROUTE_OK;
}

bool route_ip_allowed(const struct route_match *m, const struct cidr *a)
{
	const struct rule *r;

	if (!m->project || m->project->rules.n == 0)
		return true;
	r = rules_match(&m->project->rules, a, 0);
	if (r)
		return r->action == EDGE_ACT_ALLOW;
	return !m->project->has_allow;
}

/* ---- the holder -----------------------------------------------------------
 */

void route_holder_init(struct route_holder *h, struct route_table *t)
{
	atomic_init(&h->cur, t);
	atomic_init(&h->readers, 0);
}

struct route_table *route_table_current(struct route_holder *h)
{
	struct route_table *t;

	/* Announce the read before loading the pointer: a swapper that
	 * replaced the pointer after our load then sees readers != 0 and
	 * keeps the old table alive until we hold our own reference. */
	atomic_fetch_add(&h->readers, 1);
	t = route_table_get(atomic_load(&h->cur));
	atomic_fetch_sub(&h->readers, 1);
	return t;
}

void route_table_swap(struct route_holder *h, struct route_table *t)
{
	struct route_table *old = atomic_exchange(&h->cur, t);

	while (atomic_load(&h->readers) != 0)
		sched_yield();
	route_table_put(old);
}

void route_holder_clear(struct route_holder *h)
{
	route_table_swap(h, NULL);
}

/* ---- JSON -----------------------------------------------------------------
 */

struct rt_row {
	const char *domain;
	const struct route_env *env;
	const struct route_r *r;
};

static int rt_row_cmp(const void *a, const void *b)
{
	const struct rt_row *x = a, *y = b;
	int c = strcmp(x->domain, y->domain);

	if (c)
		return c;
	return strcmp(x->r->prefix ? x->r->prefix : "",
		      y->r->prefix ? y->r->prefix : "");
}

static json_t *rt_row_json(const struct rt_row *row)
{
	const struct route_r *r = row->r;
	const struct route_env *e = row->env;
	json_t *o, *ups;
	size_t i;

	ups = json_array();
	if (!ups)
		return NULL;
	for (i = 0; i < r->n_upstreams; i++)
		if (json_array_append_new(ups,
					  json_string(r->upstreams[i].text)))
			goto fail;
	o = json_pack(
	    "{s:s, s:s?, s:b, s:s, s:s, s:s, s:b, s:s, s:o, s:I, s:i}",
	    "domain", row->domain, "prefix", r->prefix, "strip_prefix",
	    r->strip, "project", e->project->id, "environment", e->id,
	    "deployment", e->deployment_id, "enabled", e->project->enabled,
	    "balance", config_balance_name(r->balance), "upstreams", ups,
	    "max_body_bytes", (json_int_t)r->max_body_bytes, "inflight",
	    (int)atomic_load_explicit(&((struct route_r *)r)->inflight.n,
				      memory_order_relaxed));
	return o;
fail:
	json_decref(ups);
	return NULL;
}

json_t *route_dump_json(const struct route_table *t)
{
	struct rt_row *rows = NULL;
	size_t n = 0, cap = 0, i, j, k;
	json_t *arr = NULL, *out = NULL;

	for (i = 0; i < t->n_envs; i++)
		cap += t->envs[i].n_domains * (1 + t->envs[i].n_routes);
	if (cap) {
		rows = calloc(cap, sizeof(*rows));
		if (!rows)
			goto out;
	}
	for (i = 0; i < t->n_envs; i++) {
		const struct route_env *e = &t->envs[i];

		for (j = 0; j < e->n_domains; j++) {
			if (!e->no_default)
				rows[n++] =
				    (struct rt_row){e->domains[j], e, &e->def};
			for (k = 0; k < e->n_routes; k++)
				rows[n++] = (struct rt_row){
				    e->domains[j],
				    e->routes[k].target ? e->routes[k].target
							: e,
				    &e->routes[k]};
		}
	}
	if (n > 1)
		qsort(rows, n, sizeof(*rows), rt_row_cmp);
	arr = json_array();
	if (!arr)
		goto out;
	for (i = 0; i < n; i++)
		if (json_array_append_new(arr, rt_row_json(&rows[i])) < 0)
			goto out;
	out = json_pack("{s:I, s:O}", "generation", (json_int_t)t->generation,
			"routes", arr);
out:
	json_decref(arr);
	free(rows);
	return out;
}
