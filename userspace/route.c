/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * route.c - route table generations: each project compiled once into a
 * segment of its own, the segments and the domains found through
 * persistent maps (pmap.h) that a new generation shares with the one
 * before but for what a change touched; looked up without locks or
 * allocation, swapped atomically.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "clk.h"
#include "h1.h"
#include "pmap.h"
#include "route.h"
#include "route_tcp.h"

struct route_project {
	const char *id, *name;
	unsigned src; /* enum route_src_id */
	bool enabled;
	bool has_allow;	    /* with the rules in force when compiled */
	int64_t first_exp;  /* the earliest rule expiry, 0: none */
	struct rules rules; /* the source's */
};

struct route_env;

struct route_r {
	const char *prefix; /* NULL: the environment's default route */
	size_t prefix_len;
	bool strip;
	/* whose route this is: its project, ids, deployment and headers
	 * (a claim's: the environment it routes to) */
	const struct route_env *env;
	const struct config_addr *upstreams;
	size_t n_upstreams;
	enum config_balance balance;
	uint64_t max_body_bytes;      /* ROUTE_SRC_INHERIT: the table's */
	uint64_t request_total_ms;    /* 0: the deployment's */
	const struct hrules *headers; /* the route's own, NULL: none */
	const struct auth_gate *auth; /* its credential gate, NULL: none */
	bool no_wake, background;     /* wake = false, activity */
	bool shed;		      /* shed = true (brownout) */
	uint64_t key;
	struct admit_gauge inflight;
	/* requests ended, by status class (1xx..5xx): the route's series */
	_Atomic uint64_t classes[ROUTE_CLASSES];
};

struct route_env {
	const struct route_project *project;
	const char *id, *name, *deployment_id;
	const struct route_src_env *src;
	struct route_r def;
	struct route_r *routes; /* longest prefix first */
	size_t n_routes;
	bool auth_mixed; /* a route's gate is not the environment's */
};

/* A domain + path prefix routed to an environment of this segment. */
struct route_claim {
	const char *domain;
	struct route_r r;
};

/* One project of one source, compiled: immutable but for its gauges,
 * shared by every generation it is unchanged in. */
struct route_seg {
	atomic_uint ref;
	struct route_src_project sp; /* the source's definition, owned */
	struct route_project proj;
	struct route_env *envs;
	size_t n_envs;
	struct route_claim *claims;
	size_t n_claims;
	size_t n_routes;
};

/* What one domain (a key of the exact or the wildcard map) routes to:
 * the environment serving it (NULL: only its claims) and the claims on
 * it, longest prefix first. */
struct route_dom {
	const struct route_env *owner;
	size_t n_claims;
	bool auth_mixed;  /* rt_auth_mixed: its paths lead to several gates */
	const char *name; /* as configured: "a.b" or "*.b" */
	const struct route_r *claims[];
};

struct route_table {
	atomic_uint ref;
	uint64_t generation;
	struct route_defaults def;
	/* the TCP routes (shared with the generations before while they
	 * are the same), and the environment each resolved to in this table
	 * (NULL: in no source), at the build's end */
	struct route_tcp_set *tcp;
	const struct route_env **tcp_env;
	/* id -> segment (the maps' own reference); environment and
	 * deployment ids -> segment; domains -> struct route_dom (exact,
	 * and wildcards by their suffix without "*.") */
	struct pmap_node *projects, *envs, *deps, *exact, *wild;
	size_t n_routes, n_projects;
	struct route_table *reap_next; /* in the reaper's queue */
};

static atomic_ullong route_generations;
static atomic_ullong route_keys;

/* ---- segments ---------------------------------------------------------- */

static void rt_seg_put(void *v)
{
	struct route_seg *s = v;
	size_t i;

	if (!s ||
	    atomic_fetch_sub_explicit(&s->ref, 1, memory_order_acq_rel) != 1)
		return;
	for (i = 0; i < s->n_envs; i++)
		free(s->envs[i].routes);
	free(s->envs);
	free(s->claims);
	route_src_project_clear(&s->sp);
	free(s);
}

static struct route_seg *rt_seg_get(struct route_seg *s)
{
	atomic_fetch_add_explicit(&s->ref, 1, memory_order_relaxed);
	return s;
}

static const struct pmap_ops rt_seg_ops = {rt_seg_put};
static const struct pmap_ops rt_ref_ops = {NULL};
static const struct pmap_ops rt_dom_ops = {free};

/* Whether the rules make the project's list exclusive at now: some
 * unexpired allow rule is not an exception carved out of an unexpired
 * block rule. */
static bool rt_allow_list(const struct rules *r, int64_t now)
{
	size_t i, j;

	for (i = 0; i < r->n; i++) {
		bool inside = false;

		if (r->v[i].action != EDGE_ACT_ALLOW ||
		    (r->v[i].expires_at && r->v[i].expires_at <= now))
			continue;
		for (j = 0; j < r->n && !inside; j++)
			inside =
			    r->v[j].action == EDGE_ACT_BLOCK &&
			    (!r->v[j].expires_at || r->v[j].expires_at > now) &&
			    cidr_contains(&r->v[j].cidr, &r->v[i].cidr);
		if (!inside)
			return true;
	}
	return false;
}

static int rt_cmp_route(const void *a, const void *b)
{
	const struct route_r *x = a, *y = b;

	if (x->prefix_len != y->prefix_len)
		return x->prefix_len > y->prefix_len ? -1 : 1;
	return strcmp(x->prefix, y->prefix);
}

static void rt_route_init(struct route_r *r, const struct route_env *env,
			  const struct config_addr *ups, size_t n_ups,
			  enum config_balance balance, uint64_t max_body,
			  const struct route_defaults *def)
{
	r->env = env;
	r->upstreams = ups;
	r->n_upstreams = n_ups;
	r->balance = balance;
	r->max_body_bytes = max_body;
	r->key = atomic_fetch_add(&route_keys, 1) + 1;
	admit_gauge_init(&r->inflight, (unsigned)def->max_inflight_per_route);
}

/* Compile project p of source src (its contents move into the segment,
 * p is left empty). NULL when out of memory (p freed). */
static struct route_seg *rt_seg_new(struct route_src_project *p, unsigned src,
				    const struct route_defaults *def)
{
	struct route_seg *s = calloc(1, sizeof(*s));
	struct route_project *rp;
	size_t i, j, k = 0, nc = 0;
	int64_t now = (int64_t)(clk_real_ns() / 1000000000ull);

	if (!s) {
		route_src_project_clear(p);
		return NULL;
	}
	atomic_init(&s->ref, 1);
	s->sp = *p;
	memset(p, 0, sizeof(*p));
	rp = &s->proj;
	rp->id = s->sp.id;
	rp->name = s->sp.name ? s->sp.name : s->sp.id;
	rp->src = src;
	rp->enabled = s->sp.enabled;
	rp->rules = s->sp.ip_rules;
	rp->has_allow = rt_allow_list(&rp->rules, now);
	for (i = 0; i < rp->rules.n; i++) {
		int64_t x = rp->rules.v[i].expires_at;

		if (x && (!rp->first_exp || x < rp->first_exp))
			rp->first_exp = x;
	}
	for (i = 0; i < s->sp.n_envs; i++)
		nc += s->sp.envs[i].n_claims;
	s->envs = calloc(s->sp.n_envs + 1, sizeof(*s->envs));
	s->claims = calloc(nc + 1, sizeof(*s->claims));
	if (!s->envs || !s->claims)
		goto fail;
	for (i = 0; i < s->sp.n_envs; i++) {
		const struct route_src_env *ce = &s->sp.envs[i];
		struct route_env *e = &s->envs[i];
		uint64_t env_max = ce->max_body_bytes;

		e->project = rp;
		e->src = ce;
		e->id = ce->id;
		e->name = ce->name ? ce->name : ce->id;
		e->deployment_id = ce->deployment.id ? ce->deployment.id : "";
		rt_route_init(&e->def, e, ce->deployment.upstreams,
			      ce->deployment.n_upstreams,
			      ce->deployment.balance, env_max, def);
		e->def.auth = ce->auth;
		e->def.shed = ce->shed;
		if (ce->n_routes &&
		    !(e->routes = calloc(ce->n_routes, sizeof(*e->routes))))
			goto fail;
		for (j = 0; j < ce->n_routes; j++) {
			const struct route_src_route *cr = &ce->routes[j];
			struct route_r *r = &e->routes[j];

			rt_route_init(
			    r, e,
			    cr->n_upstreams ? cr->upstreams
					    : ce->deployment.upstreams,
			    cr->n_upstreams ? cr->n_upstreams
					    : ce->deployment.n_upstreams,
			    cr->balance,
			    cr->max_body_bytes == ROUTE_SRC_INHERIT
				? env_max
				: cr->max_body_bytes,
			    def);
			r->prefix = cr->prefix;
			r->prefix_len = strlen(cr->prefix);
			r->strip = cr->strip_prefix;
			r->request_total_ms = cr->request_total_ms;
			if (!hrules_empty(&cr->headers))
				r->headers = &cr->headers;
			r->auth = cr->auth ? cr->auth : ce->auth;
			r->no_wake = cr->no_wake;
			r->background = cr->background;
			r->shed = cr->shed;
			e->auth_mixed |= r->auth != e->def.auth;
		}
		e->n_routes = ce->n_routes;
		if (e->n_routes > 1)
			qsort(e->routes, e->n_routes, sizeof(*e->routes),
			      rt_cmp_route);
		for (j = 0; j < ce->n_claims; j++, k++) {
			struct route_claim *c = &s->claims[k];

			c->domain = ce->claims[j].domain;
			c->r = e->def;
			c->r.key = atomic_fetch_add(&route_keys, 1) + 1;
			admit_gauge_init(&c->r.inflight,
					 (unsigned)def->max_inflight_per_route);
			c->r.prefix = ce->claims[j].prefix;
			c->r.prefix_len = strlen(c->r.prefix);
			c->r.strip = ce->claims[j].strip_prefix;
			c->r.request_total_ms = ce->claims[j].request_total_ms;
			c->r.no_wake = ce->claims[j].no_wake;
			c->r.background = ce->claims[j].background;
			c->r.shed = ce->claims[j].shed;
		}
		s->n_routes += 1 + e->n_routes + ce->n_claims;
	}
	s->n_envs = s->sp.n_envs;
	s->n_claims = nc;
	return s;
fail:
	for (i = 0; i < s->sp.n_envs && s->envs; i++)
		free(s->envs[i].routes);
	s->n_envs = 0;
	rt_seg_put(s);
	return NULL;
}

/* "the file source (project p, environment e)", or without the
 * environment when e is NULL. */
static const char *rt_where(const struct route_project *p,
			    const struct route_env *e, char *buf, size_t len)
{
	if (!e)
		snprintf(buf, len, "the %s source", route_src_name(p->src));
	else
		snprintf(buf, len, "the %s source (project %s, environment %s)",
			 route_src_name(p->src), p->id, e->id);
	return buf;
}

/* ---- the table's life -------------------------------------------------- */

static void rt_free(struct route_table *t)
{
	if (!t)
		return;
	pmap_put(t->exact, &rt_dom_ops);
	pmap_put(t->wild, &rt_dom_ops);
	pmap_put(t->envs, &rt_ref_ops);
	pmap_put(t->deps, &rt_ref_ops);
	pmap_put(t->projects, &rt_seg_ops);
	route_tcp_set_put(t->tcp);
	free(t->tcp_env);
	free(t);
}

struct route_table *route_table_get(struct route_table *t)
{
	if (t)
		atomic_fetch_add_explicit(&t->ref, 1, memory_order_relaxed);
	return t;
}

/* The reaper: a thread that frees the generations whose last reference
 * went (route_reaper_start), so that the thread dropping it never waits. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct route_table *head;
	pthread_t thread;
	bool running, stop;
} rt_reaper = {
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, false, false};

static void *rt_reaper_main(void *arg)
{
	struct route_table *t;
	int nice_now;

	(void)arg;
	/* background work: never the CPU of a loop that serves (a thread's
	 * own nice value, Linux's; raising it needs no privilege) */
	errno = 0;
	nice_now = getpriority(PRIO_PROCESS, (id_t)gettid());
	if (errno == 0 && nice_now < ROUTE_REAPER_NICE)
		setpriority(PRIO_PROCESS, (id_t)gettid(), ROUTE_REAPER_NICE);
	pthread_mutex_lock(&rt_reaper.mu);
	for (;;) {
		while (!rt_reaper.head && !rt_reaper.stop)
			pthread_cond_wait(&rt_reaper.cv, &rt_reaper.mu);
		t = rt_reaper.head;
		if (!t)
			break; /* stopped, and nothing is left */
		rt_reaper.head = t->reap_next;
		pthread_mutex_unlock(&rt_reaper.mu);
		rt_free(t);
		pthread_mutex_lock(&rt_reaper.mu);
	}
	pthread_mutex_unlock(&rt_reaper.mu);
	return NULL;
}

int route_reaper_start(void)
{
	int rc = 0;

	pthread_mutex_lock(&rt_reaper.mu);
	if (!rt_reaper.running) {
		rt_reaper.stop = false;
		rc = -pthread_create(&rt_reaper.thread, NULL, rt_reaper_main,
				     NULL);
		rt_reaper.running = rc == 0;
	}
	pthread_mutex_unlock(&rt_reaper.mu);
	return rc;
}

void route_reaper_stop(void)
{
	pthread_mutex_lock(&rt_reaper.mu);
	if (!rt_reaper.running) {
		pthread_mutex_unlock(&rt_reaper.mu);
		return;
	}
	rt_reaper.stop = true;
	pthread_cond_signal(&rt_reaper.cv);
	pthread_mutex_unlock(&rt_reaper.mu);
	pthread_join(rt_reaper.thread, NULL);
	pthread_mutex_lock(&rt_reaper.mu);
	rt_reaper.running = false;
	pthread_mutex_unlock(&rt_reaper.mu);
}

void route_table_put(struct route_table *t)
{
	if (!t ||
	    atomic_fetch_sub_explicit(&t->ref, 1, memory_order_acq_rel) != 1)
		return;
	pthread_mutex_lock(&rt_reaper.mu);
	if (rt_reaper.running && !rt_reaper.stop) {
		t->reap_next = rt_reaper.head;
		rt_reaper.head = t;
		pthread_cond_signal(&rt_reaper.cv);
		t = NULL;
	}
	pthread_mutex_unlock(&rt_reaper.mu);
	rt_free(t); /* no reaper: here */
}

uint64_t route_table_generation(const struct route_table *t)
{
	return t->generation;
}

size_t route_table_nroutes(const struct route_table *t)
{
	return t->n_routes;
}

size_t route_table_nprojects(const struct route_table *t)
{
	return t->n_projects;
}

/* ---- building -------------------------------------------------------------
 */

struct route_build {
	struct route_table *t; /* not published yet: ours */
	uint64_t epoch;
	bool broken;  /* a change half made (out of memory): no end */
	bool new_cap; /* the per-route cap changed: set at the end */
};

static int rt_limit_one(void *arg, const char *key, size_t len, void *val)
{
	const struct route_defaults *def = arg;
	struct route_seg *s = val;
	unsigned lim = (unsigned)def->max_inflight_per_route;
	size_t i, j;

	(void)key;
	(void)len;
	for (i = 0; i < s->n_envs; i++) {
		admit_gauge_set_limit(&s->envs[i].def.inflight, lim);
		for (j = 0; j < s->envs[i].n_routes; j++)
			admit_gauge_set_limit(&s->envs[i].routes[j].inflight,
					      lim);
	}
	for (i = 0; i < s->n_claims; i++)
		admit_gauge_set_limit(&s->claims[i].r.inflight, lim);
	return 0;
}

int route_build_begin(const struct route_table *prev,
		      const struct route_defaults *def,
		      struct route_build **out)
{
	struct route_build *b = calloc(1, sizeof(*b));
	struct route_table *t = calloc(1, sizeof(*t));

	if (!b || !t) {
		free(b);
		free(t);
		return -ENOMEM;
	}
	atomic_init(&t->ref, 1);
	t->def = *def;
	if (prev) {
		t->projects = pmap_ref(prev->projects);
		t->envs = pmap_ref(prev->envs);
		t->deps = pmap_ref(prev->deps);
		t->exact = pmap_ref(prev->exact);
		t->wild = pmap_ref(prev->wild);
		t->n_routes = prev->n_routes;
		t->n_projects = prev->n_projects;
		t->tcp = route_tcp_set_get(prev->tcp);
		b->new_cap = def->max_inflight_per_route !=
			     prev->def.max_inflight_per_route;
	}
	b->t = t;
	b->epoch = pmap_epoch();
	*out = b;
	return 0;
}

void route_build_abort(struct route_build *b)
{
	if (!b)
		return;
	rt_free(b->t);
	free(b);
}

/* Point every TCP route of t at its environment as t holds it. */
static int rt_tcp_resolve(struct route_table *t)
{
	size_t n = route_tcp_set_n(t->tcp), i, j;

	free(t->tcp_env);
	t->tcp_env = NULL;
	if (n && !(t->tcp_env = calloc(n, sizeof(*t->tcp_env))))
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		const char *id = route_tcp_set_at(t->tcp, i)->env_id;
		const struct route_seg *s = pmap_get(t->envs, id, strlen(id));

		for (j = 0; s && j < s->n_envs && !t->tcp_env[i]; j++)
			if (strcmp(s->envs[j].id, id) == 0)
				t->tcp_env[i] = &s->envs[j];
	}
	return 0;
}

int route_build_set_tcp(struct route_build *b, const struct route_tcp *v,
			size_t n, struct errbuf *err)
{
	struct route_tcp_set *set;
	int rc = route_tcp_set_new(v, n, &set, err);

	if (rc)
		return rc;
	route_tcp_set_put(b->t->tcp);
	b->t->tcp = set;
	return 0;
}

size_t route_table_ntcp(const struct route_table *t)
{
	return route_tcp_set_n(t->tcp);
}

const struct route_tcp *route_tcp_at(const struct route_table *t, size_t i)
{
	return route_tcp_set_at(t->tcp, i);
}

int route_tcp_addr(const struct route_table *t, const char *listen,
		   bool *passthrough, size_t *idx)
{
	return route_tcp_set_addr(t->tcp, listen, passthrough, idx);
}

int route_tcp_sni(const struct route_table *t, const char *listen,
		  const char *name, size_t *idx)
{
	return route_tcp_set_sni(t->tcp, listen, name, idx);
}

int route_build_end(struct route_build *b, struct route_table **out)
{
	int rc = b->broken ? -ENOMEM : 0;

	*out = NULL;
	/* the index from each TCP route to its environment: the projects
	 * this build changed may have moved, added or removed it */
	if (rc == 0)
		rc = rt_tcp_resolve(b->t);
	if (rc == 0) {
		/* the gauges are live: a new cap applies to the requests of
		 * every generation at once (the segments compiled in this
		 * build have it already) */
		if (b->new_cap)
			pmap_foreach(b->t->projects, rt_limit_one, &b->t->def);
		b->t->generation = atomic_fetch_add(&route_generations, 1) + 1;
		*out = b->t;
		b->t = NULL;
	}
	route_build_abort(b);
	return rc;
}

/* A domain the change touches: which map, the key there. */
struct rt_key {
	bool wild;
	const char *name; /* as configured */
	const char *key;  /* name, or name + 2 for a wildcard */
	size_t len;
	struct route_dom *next; /* the entry it gets; NULL: none */
};

struct rt_keys {
	struct rt_key *v;
	size_t n, cap;
};

static int rt_key_add(struct rt_keys *k, const char *name)
{
	bool wild = name[0] == '*';
	const char *key = wild ? name + 2 : name;
	size_t len = strlen(key), i;

	for (i = 0; i < k->n; i++)
		if (k->v[i].wild == wild && k->v[i].len == len &&
		    memcmp(k->v[i].key, key, len) == 0)
			return 0;
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 16;
		struct rt_key *v = realloc(k->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		k->v = v;
		k->cap = cap;
	}
	k->v[k->n++] = (struct rt_key){wild, name, key, len, NULL};
	return 0;
}

static int rt_keys_of(struct rt_keys *k, const struct route_seg *s)
{
	size_t i, j;

	for (i = 0; s && i < s->n_envs; i++)
		for (j = 0; j < s->envs[i].src->n_domains; j++)
			if (rt_key_add(k, s->envs[i].src->domains[j]))
				return -ENOMEM;
	for (i = 0; s && i < s->n_claims; i++)
		if (rt_key_add(k, s->claims[i].domain))
			return -ENOMEM;
	return 0;
}

static void rt_keys_free(struct rt_keys *k)
{
	size_t i;

	for (i = 0; i < k->n; i++)
		free(k->v[i].next);
	free(k->v);
}

static int rt_cmp_claim(const void *a, const void *b)
{
	return rt_cmp_route(*(const struct route_r *const *)a,
			    *(const struct route_r *const *)b);
}

/* The environment of s that serves domain name (as configured), NULL if
 * none; *twice the second one, if two do. */
static const struct route_env *rt_seg_owner(const struct route_seg *s,
					    const char *name,
					    const struct route_env **twice)
{
	const struct route_env *found = NULL;
	size_t i, j;

	*twice = NULL;
	for (i = 0; s && i < s->n_envs; i++)
		for (j = 0; j < s->envs[i].src->n_domains; j++)
			if (strcmp(s->envs[i].src->domains[j], name) == 0) {
				if (found && !*twice && found != &s->envs[i])
					*twice = &s->envs[i];
				if (!found)
					found = &s->envs[i];
			}
	return found;
}

/* Whether the paths of d lead to more than one credential gate (its
 * owner's routes, the claims on it): then a path another spelling of
 * which (/%61dmin, //admin, /./admin) would pick another route must be
 * refused, since the upstream may read it as the first. */
static bool rt_auth_mixed(const struct route_dom *d)
{
	const struct auth_gate *g = d->owner	  ? d->owner->def.auth
				    : d->n_claims ? d->claims[0]->auth
						  : NULL;
	size_t i;

	if (d->owner && d->owner->auth_mixed)
		return true;
	for (i = 0; i < d->n_claims; i++)
		if (d->claims[i]->auth != g)
			return true;
	return false;
}

/*
 * What key k routes to once old (the project's segment now, may be NULL)
 * is replaced by s (may be NULL): k->next, or NULL when nothing. -EEXIST
 * with err when two environments would serve the domain or a prefix
 * would be routed twice.
 */
static int rt_key_next(const struct route_table *t, struct rt_key *k,
		       const struct route_seg *old, const struct route_seg *s,
		       struct errbuf *err)
{
	const struct route_dom *cur =
	    pmap_get(k->wild ? t->wild : t->exact, k->key, k->len);
	const struct route_env *owner = NULL, *mine, *twice;
	const struct route_r **cl = NULL;
	size_t n = 0, i, j, nmax = (cur ? cur->n_claims : 0) + 1;
	char a[CONFIG_ID_MAX * 2 + 64], b[CONFIG_ID_MAX * 2 + 64];
	const struct route_project *oldp = old ? &old->proj : NULL;
	struct route_dom *d;
	int rc = 0;

	if (cur && cur->owner && cur->owner->project != oldp)
		owner = cur->owner;
	for (i = 0; s && i < s->n_claims; i++)
		nmax++;
	cl = calloc(nmax, sizeof(*cl));
	if (!cl)
		return -ENOMEM;
	mine = rt_seg_owner(s, k->name, &twice);
	if (mine && (owner || twice)) {
		const struct route_env *first = owner ? owner : mine;
		const struct route_env *second = owner ? mine : twice;

		errbuf_set(
		    err, "domain \"%s\" is claimed twice: by %s and by %s",
		    k->name, rt_where(first->project, first, a, sizeof(a)),
		    rt_where(second->project, second, b, sizeof(b)));
		rc = -EEXIST;
		goto out;
	}
	if (mine)
		owner = mine;
	for (i = 0; cur && i < cur->n_claims; i++)
		if (cur->claims[i]->env->project != oldp)
			cl[n++] = cur->claims[i];
	for (i = 0; s && i < s->n_claims; i++)
		if (strcmp(s->claims[i].domain, k->name) == 0)
			cl[n++] = &s->claims[i].r;
	/* every prefix once: among the claims, and against the routes of
	 * the environment serving the domain */
	for (i = 0; i < n && rc == 0; i++) {
		const struct route_r *x = cl[i], *dup = NULL;

		for (j = i + 1; j < n && !dup; j++)
			if (strcmp(cl[j]->prefix, x->prefix) == 0)
				dup = cl[j];
		for (j = 0; owner && j < owner->n_routes && !dup; j++)
			if (strcmp(owner->routes[j].prefix, x->prefix) == 0)
				dup = &owner->routes[j];
		if (dup) {
			errbuf_set(err,
				   "%s%s is routed twice (to environment %s "
				   "and %s)",
				   k->name, x->prefix, dup->env->id,
				   x->env->id);
			rc = -EEXIST;
		}
	}
	if (rc || (!owner && n == 0))
		goto out;
	if (n > 1)
		qsort(cl, n, sizeof(*cl), rt_cmp_claim);
	d = malloc(sizeof(*d) + n * sizeof(d->claims[0]) + strlen(k->name) + 1);
	if (!d) {
		rc = -ENOMEM;
		goto out;
	}
	d->owner = owner;
	d->n_claims = n;
	memcpy(d->claims, cl, n * sizeof(*cl));
	d->auth_mixed = rt_auth_mixed(d);
	d->name = (const char *)&d->claims[n];
	memcpy((char *)&d->claims[n], k->name, strlen(k->name) + 1);
	k->next = d;
out:
	free(cl);
	return rc;
}

/* Whether an environment or deployment id of s is held by another
 * project than old (or twice in s): -EEXIST with err. */
static int rt_ids_check(const struct route_table *t,
			const struct route_seg *old, const struct route_seg *s,
			struct errbuf *err)
{
	static const char *const what[2] = {"environment id", "deployment id"};
	char a[CONFIG_ID_MAX * 2 + 64], b[CONFIG_ID_MAX * 2 + 64];
	size_t i, j, w;

	for (w = 0; w < 2; w++)
		for (i = 0; s && i < s->n_envs; i++) {
			const struct route_env *e = &s->envs[i], *first = NULL;
			const char *id = w ? e->deployment_id : e->id;
			const struct route_seg *held;

			if (!id[0])
				continue; /* no active deployment */
			held = pmap_get(w ? t->deps : t->envs, id, strlen(id));
			if (held && held != old) {
				for (j = 0; j < held->n_envs && !first; j++)
					if (strcmp(
						w ? held->envs[j].deployment_id
						  : held->envs[j].id,
						id) == 0)
						first = &held->envs[j];
			}
			for (j = 0; j < i && !first; j++)
				if (strcmp(w ? s->envs[j].deployment_id
					     : s->envs[j].id,
					   id) == 0)
					first = &s->envs[j];
			if (first) {
				errbuf_set(
				    err,
				    "%s \"%s\" is used twice: by %s and by %s",
				    what[w], id,
				    rt_where(first->project, first, a,
					     sizeof(a)),
				    rt_where(e->project, e, b, sizeof(b)));
				return -EEXIST;
			}
		}
	return 0;
}

/* Commit: every key's entry, the ids, the project. */
static int rt_commit(struct route_build *b, struct rt_keys *k,
		     const struct route_seg *old, struct route_seg *s,
		     const char *id)
{
	struct route_table *t = b->t;
	size_t i;
	int rc = 0;

	for (i = 0; i < k->n && rc == 0; i++) {
		struct pmap_node **m = k->v[i].wild ? &t->wild : &t->exact;

		if (k->v[i].next) {
			rc = pmap_set(m, k->v[i].key, k->v[i].len, k->v[i].next,
				      b->epoch, &rt_dom_ops);
			if (rc == 0)
				k->v[i].next = NULL; /* the map's */
		} else {
			rc = pmap_del(m, k->v[i].key, k->v[i].len, b->epoch,
				      &rt_dom_ops);
		}
	}
	for (i = 0; old && i < old->n_envs && rc == 0; i++) {
		const struct route_env *e = &old->envs[i];

		rc = pmap_del(&t->envs, e->id, strlen(e->id), b->epoch,
			      &rt_ref_ops);
		if (rc == 0 && e->deployment_id[0])
			rc = pmap_del(&t->deps, e->deployment_id,
				      strlen(e->deployment_id), b->epoch,
				      &rt_ref_ops);
	}
	for (i = 0; s && i < s->n_envs && rc == 0; i++) {
		const struct route_env *e = &s->envs[i];

		rc = pmap_set(&t->envs, e->id, strlen(e->id), s, b->epoch,
			      &rt_ref_ops);
		if (rc == 0 && e->deployment_id[0])
			rc = pmap_set(&t->deps, e->deployment_id,
				      strlen(e->deployment_id), s, b->epoch,
				      &rt_ref_ops);
	}
	if (rc == 0 && s) {
		rc = pmap_set(&t->projects, id, strlen(id), rt_seg_get(s),
			      b->epoch, &rt_seg_ops);
		if (rc)
			rt_seg_put(s);
	} else if (rc == 0) {
		rc = pmap_del(&t->projects, id, strlen(id), b->epoch,
			      &rt_seg_ops);
	}
	return rc;
}

/* Replace project id of source src by s (NULL: delete it). */
static int rt_apply(struct route_build *b, unsigned src, const char *id,
		    struct route_seg *s, struct errbuf *err)
{
	struct route_table *t = b->t;
	const struct route_seg *old = pmap_get(t->projects, id, strlen(id));
	struct rt_keys k = {NULL, 0, 0};
	size_t i, before, after;
	int rc;

	if (b->broken)
		return -ENOMEM;
	if (old && old->proj.src != src) {
		errbuf_set(err,
			   "project id \"%s\" is used twice: by the %s "
			   "source and by the %s source",
			   id, route_src_name(old->proj.src),
			   route_src_name(src));
		return -EEXIST;
	}
	if (!old && !s)
		return 0;
	rc = rt_ids_check(t, old, s, err);
	if (rc == 0)
		rc = rt_keys_of(&k, old);
	if (rc == 0)
		rc = rt_keys_of(&k, s);
	for (i = 0; rc == 0 && i < k.n; i++)
		rc = rt_key_next(t, &k.v[i], old, s, err);
	if (rc == -ENOMEM)
		errbuf_set(err, "route table: out of memory");
	if (rc) {
		rt_keys_free(&k);
		return rc;
	}
	before = old ? old->n_routes : 0;
	after = s ? s->n_routes : 0;
	/* old stays alive until the commit is done: the table's map holds
	 * it, and the previous generation too */
	rc = rt_commit(b, &k, old, s, id);
	rt_keys_free(&k);
	if (rc) {
		b->broken = true;
		errbuf_set(err, "route table: out of memory");
		return rc;
	}
	t->n_routes = t->n_routes - before + after;
	t->n_projects = t->n_projects - (old ? 1 : 0) + (s ? 1 : 0);
	return 0;
}

int route_build_set(struct route_build *b, unsigned src,
		    struct route_src_project *p, struct errbuf *err)
{
	struct route_seg *s;
	int rc;

	if (!p->id) {
		route_src_project_clear(p);
		errbuf_set(err, "route table: a project without an id");
		return -EINVAL;
	}
	s = rt_seg_new(p, src, &b->t->def);
	if (!s) {
		errbuf_set(err, "route table: out of memory");
		return -ENOMEM;
	}
	rc = rt_apply(b, src, s->proj.id, s, err);
	rt_seg_put(s);
	return rc;
}

int route_build_del(struct route_build *b, unsigned src, const char *id,
		    struct errbuf *err)
{
	return rt_apply(b, src, id, NULL, err);
}

struct rt_ids {
	unsigned src;
	char **v;
	size_t n, cap;
};

static int rt_id_of_src(void *arg, const char *key, size_t len, void *val)
{
	struct rt_ids *x = arg;
	const struct route_seg *s = val;

	if (s->proj.src != x->src)
		return 0;
	if (x->n == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 64;
		char **v = realloc(x->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		x->v = v;
		x->cap = cap;
	}
	x->v[x->n] = strndup(key, len);
	return x->v[x->n++] ? 0 : -ENOMEM;
}

int route_table_project_ids(const struct route_table *t, unsigned src,
			    char ***ids, size_t *n)
{
	struct rt_ids x = {src, NULL, 0, 0};
	int rc = t ? pmap_foreach(t->projects, rt_id_of_src, &x) : 0;

	if (rc) {
		route_ids_free(x.v, x.n);
		return -ENOMEM;
	}
	*ids = x.v;
	*n = x.n;
	return 0;
}

void route_ids_free(char **ids, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(ids[i]);
	free(ids);
}

int route_build_drop_source(struct route_build *b, unsigned src,
			    struct errbuf *err)
{
	char **ids;
	size_t n, i;
	int rc = route_table_project_ids(b->t, src, &ids, &n);

	if (rc) {
		errbuf_set(err, "route table: out of memory");
		return rc;
	}
	for (i = 0; i < n && rc == 0; i++)
		rc = rt_apply(b, src, ids[i], NULL, err);
	route_ids_free(ids, n);
	return rc;
}

int route_table_build(const struct route_src *const *src, size_t n_src,
		      const struct route_defaults *def,
		      struct route_table **out, struct errbuf *err)
{
	struct route_build *b;
	struct route_src_project copy;
	size_t s, i;
	int rc = route_build_begin(NULL, def, &b);

	if (rc) {
		errbuf_set(err, "route table: out of memory");
		return rc;
	}
	for (s = 0; s < n_src; s++)
		for (i = 0; src[s] && i < src[s]->n_projects; i++) {
			rc = route_src_project_dup(&src[s]->projects[i], &copy);
			if (rc) {
				errbuf_set(err, "route table: out of memory");
				route_build_abort(b);
				return rc;
			}
			rc = route_build_set(b, (unsigned)s, &copy, err);
			if (rc) {
				route_build_abort(b);
				return rc;
			}
		}
	rc = route_build_end(b, out);
	if (rc)
		errbuf_set(err, "route table: out of memory");
	return rc;
}

/* ---- names, for the writer ------------------------------------------------
 */

int route_table_holder(const struct route_table *t, char kind, const char *name,
		       unsigned *src)
{
	const struct route_seg *s = NULL;
	const struct route_dom *d;

	if (!t || !name || !name[0])
		return -ENOENT;
	switch (kind) {
	case 'p':
		s = pmap_get(t->projects, name, strlen(name));
		break;
	case 'e':
		s = pmap_get(t->envs, name, strlen(name));
		break;
	case 'd':
		s = pmap_get(t->deps, name, strlen(name));
		break;
	case 'h':
		d = name[0] == '*'
			? pmap_get(t->wild, name + 2, strlen(name + 2))
			: pmap_get(t->exact, name, strlen(name));
		if (d && d->owner) {
			*src = d->owner->project->src;
			return 0;
		}
		return -ENOENT;
	default:
		return -EINVAL;
	}
	if (!s)
		return -ENOENT;
	*src = s->proj.src;
	return 0;
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

static const struct route_dom *rt_find_dom(const struct route_table *t,
					   const char *h, size_t n)
{
	const struct route_dom *d = pmap_get(t->exact, h, n);
	const char *dot;

	if (d)
		return d;
	dot = memchr(h, '.', n);
	if (!dot || dot == h)
		return NULL;
	return pmap_get(t->wild, dot + 1, n - (size_t)(dot + 1 - h));
}

static bool rt_prefix_match(const struct route_r *r, const char *path,
			    size_t plen)
{
	return plen >= r->prefix_len &&
	       memcmp(path, r->prefix, r->prefix_len) == 0 &&
	       (plen == r->prefix_len || path[r->prefix_len] == '/');
}

/* The longest prefix of the domain's routes (the serving environment's
 * and the claims on it) that matches; the default route when none does;
 * NULL when the domain has only claims and none matches. */
static const struct route_r *rt_find_route(const struct route_dom *d,
					   const char *path, size_t path_len)
{
	const struct route_r *best = NULL;
	size_t plen = 0, i;

	while (plen < path_len && path[plen] != '?' && path[plen] != '#')
		plen++;
	for (i = 0; d->owner && i < d->owner->n_routes; i++)
		if (rt_prefix_match(&d->owner->routes[i], path, plen)) {
			best = &d->owner->routes[i];
			break;
		}
	for (i = 0; i < d->n_claims; i++)
		if (rt_prefix_match(d->claims[i], path, plen)) {
			if (!best ||
			    d->claims[i]->prefix_len > best->prefix_len)
				best = d->claims[i];
			break;
		}
	if (!best && d->owner)
		best = &d->owner->def;
	return best;
}

bool route_path_normal(const char *path, size_t n)
{
	const char *q = memchr(path, '?', n);
	size_t i, seg = 1, len;

	if (q)
		n = (size_t)(q - path);
	if (n == 0 || path[0] != '/')
		return true; /* not origin-form: no route is picked by it */
	for (i = 1; i <= n; i++) {
		if (i < n && path[i] != '/') {
			int hi, lo, v;

			if (path[i] == '\\')
				return false;
			if (path[i] != '%')
				continue;
			hi = i + 2 < n ? h1_hexval(path[i + 1]) : -1;
			lo = i + 2 < n ? h1_hexval(path[i + 2]) : -1;
			if (hi < 0 || lo < 0)
				return false;
			/* an unreserved character, '/' or '\\' needs no
			 * escape: escaped, it is another spelling */
			v = hi << 4 | lo;
			if ((v >= 'a' && v <= 'z') || (v >= 'A' && v <= 'Z') ||
			    (v >= '0' && v <= '9') || v == '-' || v == '.' ||
			    v == '_' || v == '~' || v == '/' || v == '\\')
				return false;
			i += 2;
			continue;
		}
		/* the segment [seg, i): empty (but a trailing '/'), "." or
		 * ".." are other spellings */
		len = i - seg;
		if ((len == 0 && i < n) || (len == 1 && path[seg] == '.') ||
		    (len == 2 && path[seg] == '.' && path[seg + 1] == '.'))
			return false;
		seg = i + 1;
	}
	return true;
}

enum route_status route_lookup(const struct route_table *t, const char *host,
			       size_t host_len, const char *path,
			       size_t path_len, struct route_match *m)
{
	char buf[CONFIG_HOST_MAX + 1];
	const struct route_dom *d;
	const struct route_env *e;
	const struct route_r *r;
	size_t n;

	memset(m, 0, sizeof(*m));
	n = rt_host_norm(host, host_len, buf);
	d = n ? rt_find_dom(t, buf, n) : NULL;
	r = d ? rt_find_route(d, path, path_len) : NULL;
	if (!r)
		return ROUTE_DOMAIN_NOT_FOUND;
	e = r->env;
	m->strict_path = d->auth_mixed;
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
	m->max_body_bytes = r->max_body_bytes == ROUTE_SRC_INHERIT
				? t->def.max_body_bytes
				: r->max_body_bytes;
	m->security = &e->src->security;
	m->on_demand = e->src->on_demand;
	m->no_wake = r->no_wake;
	m->background = r->background;
	m->shed = r->shed;
	m->up_tls = &e->src->deployment.tls;
	m->retry = &e->src->deployment.retry;
	m->circuit = &e->src->deployment.circuit;
	m->hedge = &e->src->deployment.hedge;
	m->request_total_ms = r->request_total_ms
				  ? r->request_total_ms
				  : e->src->deployment.request_total_ms;
	m->ep_max_inflight = (unsigned)e->src->deployment.max_inflight;
	m->send_proxy = config_send_proxy_version(
	    CONFIG_SEND_PROXY_INHERIT, e->src->deployment.send_proxy);
	if (!hrules_empty(&e->src->headers))
		m->env_headers = &e->src->headers;
	m->route_headers = r->headers;
	if (e->src->redirects.n)
		m->redirects = &e->src->redirects;
	m->unmatched_not_found = e->src->unmatched_not_found;
	m->compression = &e->src->compression;
	if (inject_any(&e->src->inject))
		m->inject = &e->src->inject;
	m->challenge = &e->src->challenge;
	m->auth = r->auth;
	/* the table is immutable but for its gauges */
	m->inflight = (struct admit_gauge *)&r->inflight;
	m->classes = (_Atomic uint64_t *)r->classes;
	m->route_key = r->key;
	m->path = path;
	m->path_len = path_len;
	if (r->prefix && r->strip) {
		m->path = path + r->prefix_len;
		m->path_len = path_len - r->prefix_len;
		m->path_slash = m->path_len == 0 || m->path[0] != '/';
	}
	return ROUTE_OK;
}

enum route_status route_tcp_lookup(const struct route_table *t, size_t idx,
				   struct route_match *m)
{
	const struct route_env *e;

	memset(m, 0, sizeof(m[0]));
	if (idx >= route_tcp_set_n(t->tcp) || !(e = t->tcp_env[idx]))
		return ROUTE_ENV_NOT_FOUND;
	m->project = e->project;
	m->project_id = e->project->id;
	m->project_name = e->project->name;
	m->env_id = e->id;
	m->env_name = e->name;
	m->deployment_id = e->deployment_id;
	if (!e->project->enabled)
		return ROUTE_PROJECT_DISABLED;
	m->upstreams = e->def.upstreams;
	m->n_upstreams = e->def.n_upstreams;
	m->balance = e->def.balance;
	m->route_key = e->def.key;
	m->security = &e->src->security;
	m->on_demand = e->src->on_demand;
	m->up_tls = &e->src->deployment.tls;
	m->retry = &e->src->deployment.retry;
	m->circuit = &e->src->deployment.circuit;
	m->hedge = &e->src->deployment.hedge;
	m->send_proxy =
	    config_send_proxy_version(route_tcp_set_at(t->tcp, idx)->send_proxy,
				      e->src->deployment.send_proxy);
	return ROUTE_OK;
}

bool route_ip_allowed(const struct route_match *m, const struct cidr *a)
{
	const struct route_project *p = m->project;
	const struct rule *r;
	int64_t now;

	if (!p || p->rules.n == 0)
		return true;
	now = (int64_t)(clk_real_ns() / 1000000000ull);
	r = rules_match(&p->rules, a, now);
	if (r)
		return r->action == EDGE_ACT_ALLOW;
	/* a rule has expired since the project was compiled: whether the
	 * allow list still is one, from the rules left */
	if (p->first_exp && now >= p->first_exp)
		return !rt_allow_list(&p->rules, now);
	return !p->has_allow;
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

/* A PROXY protocol version as send_proxy says it ("off", "v1", "v2"). */
static const char *rt_send_proxy_name(unsigned v)
{
	return v == 1 ? "v1" : v == 2 ? "v2" : "off";
}

/* ---- JSON -----------------------------------------------------------------
 */

struct rt_row {
	const char *domain;
	const struct route_r *r;
};

struct rt_rows {
	struct rt_row *v;
	size_t n, cap;
};

static int rt_row_add(struct rt_rows *x, const char *domain,
		      const struct route_r *r)
{
	if (x->n == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 64;
		struct rt_row *v = realloc(x->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		x->v = v;
		x->cap = cap;
	}
	x->v[x->n++] = (struct rt_row){domain, r};
	return 0;
}

static int rt_rows_of(void *arg, const char *key, size_t len, void *val)
{
	const struct route_dom *d = val;
	size_t i;
	int rc = 0;

	(void)key;
	(void)len;
	if (d->owner) {
		rc = rt_row_add(arg, d->name, &d->owner->def);
		for (i = 0; rc == 0 && i < d->owner->n_routes; i++)
			rc = rt_row_add(arg, d->name, &d->owner->routes[i]);
	}
	for (i = 0; rc == 0 && i < d->n_claims; i++)
		rc = rt_row_add(arg, d->name, d->claims[i]);
	return rc;
}

static int rt_row_cmp(const void *a, const void *b)
{
	const struct rt_row *x = a, *y = b;
	int c = strcmp(x->domain, y->domain);

	if (c)
		return c;
	return strcmp(x->r->prefix ? x->r->prefix : "",
		      y->r->prefix ? y->r->prefix : "");
}

static json_t *rt_row_json(const struct route_table *t,
			   const struct rt_row *row)
{
	const struct route_r *r = row->r;
	const struct route_env *e = r->env;
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
	    "{s:s, s:s?, s:b, s:s, s:s, s:s, s:s, s:b, s:s, s:o, s:I, s:i, "
	    "s:s}",
	    "domain", row->domain, "prefix", r->prefix, "strip_prefix",
	    r->strip, "source", route_src_name(e->project->src), "project",
	    e->project->id, "environment", e->id, "deployment",
	    e->deployment_id, "enabled", e->project->enabled, "balance",
	    config_balance_name(r->balance), "upstreams", ups, "max_body_bytes",
	    (json_int_t)(r->max_body_bytes == ROUTE_SRC_INHERIT
			     ? t->def.max_body_bytes
			     : r->max_body_bytes),
	    "inflight",
	    (int)atomic_load_explicit(&((struct route_r *)r)->inflight.n,
				      memory_order_relaxed),
	    "send_proxy",
	    rt_send_proxy_name(config_send_proxy_version(
		CONFIG_SEND_PROXY_INHERIT, e->src->deployment.send_proxy)));
	if (o &&
	    (json_object_set_new(o, "wake", json_boolean(!r->no_wake)) ||
	     json_object_set_new(o, "shed", json_boolean(r->shed)) ||
	     json_object_set_new(
		 o, "activity",
		 json_string(r->background ? "background" : "app")) ||
	     json_object_set_new(o, "headers",
				 hrules_json(&e->src->headers, r->headers)) ||
	     json_object_set_new(o, "redirects",
				 hredirects_json(&e->src->redirects)) ||
	     json_object_set_new(o, "unmatched",
				 json_string(e->src->unmatched_not_found
						 ? "not_found"
						 : "deployment")) ||
	     json_object_set_new(o, "compression",
				 compress_to_json(&e->src->compression)) ||
	     json_object_set_new(o, "inject",
				 inject_summary_json(&e->src->inject)) ||
	     json_object_set_new(
		 o, "challenge",
		 json_pack("{s:s,s:i,s:i,s:b}", "mode",
			   chal_mode_name(e->src->challenge.mode), "difficulty",
			   (int)e->src->challenge.difficulty, "ttl_s",
			   (int)e->src->challenge.ttl_s, "forced",
			   chal_forced(e->id))) ||
	     json_object_set_new(o, "auth", auth_gate_json(r->auth)))) {
		json_decref(o);
		return NULL;
	}
	return o;
fail:
	json_decref(ups);
	return NULL;
}

/* rt_tcp_json's keys but the PROXY protocol's. */
static json_t *rt_tcp_json_of(const struct route_tcp *r,
			      const struct route_env *e)
{
	const struct route_r *d;
	json_t *ups;
	size_t i;

	if (!e)
		return json_pack("{s:s, s:s*, s:i, s:s, s:s, s:b}", "listen",
				 r->listen, "sni", r->sni[0] ? r->sni : NULL,
				 "slot", (int)r->slot, "route_source",
				 route_src_name(r->src), "environment",
				 r->env_id, "found", 0);
	d = &e->def;
	ups = json_array();
	if (!ups)
		return NULL;
	for (i = 0; i < d->n_upstreams; i++)
		if (json_array_append_new(ups,
					  json_string(d->upstreams[i].text))) {
			json_decref(ups);
			return NULL;
		}
	return json_pack(
	    "{s:s, s:s*, s:i, s:s, s:s, s:b, s:s, s:s, s:s, s:b, s:s, s:o}",
	    "listen", r->listen, "sni", r->sni[0] ? r->sni : NULL, "slot",
	    (int)r->slot, "route_source", route_src_name(r->src), "environment",
	    e->id, "found", 1, "source", route_src_name(e->project->src),
	    "project", e->project->id, "deployment", e->deployment_id,
	    "enabled", e->project->enabled, "balance",
	    config_balance_name(d->balance), "upstreams", ups);
}

/* TCP route r as JSON (route_dump_json): env is what it resolved to
 * (NULL: in no source). */
static json_t *rt_tcp_json(const struct route_tcp *r, const struct route_env *e)
{
	json_t *o = rt_tcp_json_of(r, e);

	if (o && (json_object_set_new(o, "proxy_protocol",
				      json_boolean(r->proxy_protocol)) ||
		  json_object_set_new(
		      o, "send_proxy",
		      json_string(rt_send_proxy_name(config_send_proxy_version(
			  r->send_proxy, e ? e->src->deployment.send_proxy
					   : CONFIG_SEND_PROXY_OFF)))))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* rows by route, then domain: each route's first row is its least
 * domain */
static int rt_row_cmp_route(const void *a, const void *b)
{
	const struct rt_row *x = a, *y = b;

	if (x->r != y->r)
		return (uintptr_t)x->r < (uintptr_t)y->r ? -1 : 1;
	return strcmp(x->domain, y->domain);
}

int route_table_each_route(const struct route_table *t, route_each_fn fn,
			   void *arg)
{
	struct rt_rows rows = {NULL, 0, 0};
	size_t i;
	int rc;

	rc = pmap_foreach(t->exact, rt_rows_of, &rows);
	if (rc == 0)
		rc = pmap_foreach(t->wild, rt_rows_of, &rows);
	if (rc == 0 && rows.n > 1)
		qsort(rows.v, rows.n, sizeof(*rows.v), rt_row_cmp_route);
	for (i = 0; rc == 0 && i < rows.n; i++) {
		const struct route_r *r = rows.v[i].r;

		if (i && rows.v[i - 1].r == r)
			continue;
		rc = fn(arg, rows.v[i].domain, r->prefix ? r->prefix : "/",
			r->env->id, r->classes);
	}
	free(rows.v);
	return rc;
}

struct rt_auto {
	route_name_fn fn;
	void *arg;
};

static int rt_auto_of(void *arg, const char *key, size_t len, void *val)
{
	const struct route_dom *d = val;
	const struct rt_auto *a = arg;

	(void)key;
	(void)len;
	/* the environment that owns the domain decides, never one that
	 * only claims a path of it */
	return d->owner && d->owner->src && d->owner->src->tls_auto
		   ? a->fn(a->arg, d->name)
		   : 0;
}

int route_table_each_tls_auto(const struct route_table *t, route_name_fn fn,
			      void *arg)
{
	struct rt_auto a = {fn, arg};

	return pmap_foreach(t->exact, rt_auto_of, &a);
}

struct rt_circ {
	route_circuit_fn fn;
	void *arg;
};

static int rt_circ_of(void *arg, const char *key, size_t len, void *val)
{
	const struct route_seg *s = val;
	const struct rt_circ *c = arg;
	size_t i;
	int rc = 0;

	(void)key;
	(void)len;
	for (i = 0; rc == 0 && i < s->n_envs; i++) {
		const struct route_src_deployment *d =
		    &s->envs[i].src->deployment;

		if (d->id && d->circuit.set)
			rc = c->fn(c->arg, d->id, &d->circuit);
	}
	return rc;
}

int route_table_each_circuit(const struct route_table *t, route_circuit_fn fn,
			     void *arg)
{
	struct rt_circ c = {fn, arg};

	return pmap_foreach(t->projects, rt_circ_of, &c);
}

json_t *route_dump_json(const struct route_table *t)
{
	struct rt_rows rows = {NULL, 0, 0};
	json_t *arr = NULL, *tcp = NULL, *out = NULL;
	size_t i;

	if (pmap_foreach(t->exact, rt_rows_of, &rows) ||
	    pmap_foreach(t->wild, rt_rows_of, &rows))
		goto out;
	if (rows.n > 1)
		qsort(rows.v, rows.n, sizeof(*rows.v), rt_row_cmp);
	arr = json_array();
	if (!arr)
		goto out;
	for (i = 0; i < rows.n; i++)
		if (json_array_append_new(arr, rt_row_json(t, &rows.v[i])) < 0)
			goto out;
	tcp = json_array();
	if (!tcp)
		goto out;
	for (i = 0; i < route_tcp_set_n(t->tcp); i++)
		if (json_array_append_new(
			tcp, rt_tcp_json(route_tcp_set_at(t->tcp, i),
					 t->tcp_env[i])) < 0)
			goto out;
	out = json_pack("{s:I, s:O, s:O}", "generation",
			(json_int_t)t->generation, "routes", arr, "tcp_routes",
			tcp);
out:
	json_decref(tcp);
	json_decref(arr);
	free(rows.v);
	return out;
}
