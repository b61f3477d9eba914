/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * route_writer.c - the route table's one writer (route_writer.h): each
 * source's list replaced on its own, every list merged, checked for
 * claims made twice, built into the next generation and swapped in, on
 * the control loop only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edge_assert.h"
#include "route_writer.h"

static const char *const route_writer_names[ROUTE_SRC_N] = {
    [ROUTE_SRC_FILE] = "file",
    [ROUTE_SRC_DB] = "database",
};

const char *route_writer_source_name(enum route_src_id id)
{
	return (unsigned)id < ROUTE_SRC_N ? route_writer_names[id] : "?";
}

void route_writer_init(struct route_writer *w, struct route_holder *h,
		       const struct route_defaults *def)
{
	memset(w, 0, sizeof(*w));
	w->holder = h;
	/* the control loop's thread; daemon() keeps it (a forked child's
	 * one thread has its parent's pthread_t) */
	w->owner = pthread_self();
	w->def = *def;
}

const struct route_src *route_writer_source(const struct route_writer *w,
					    enum route_src_id id)
{
	return (unsigned)id < ROUTE_SRC_N ? w->src[id] : NULL;
}

void route_writer_free(struct route_writer *w)
{
	size_t i;

	if (!w)
		return;
	for (i = 0; i < ROUTE_SRC_N; i++) {
		route_src_free(w->src[i]);
		w->src[i] = NULL;
	}
}

/* ---- one claim per id and domain ------------------------------------- */

/* Who claimed a name: what kind of name, which source, project and
 * environment (env SIZE_MAX: the project itself). */
struct rw_claim {
	const char *name; /* NULL: an empty slot */
	char kind;	  /* 'p', 'e', 'd' ids; 'h' a domain */
	unsigned src;
	size_t project, env;
};

struct rw_claims {
	struct rw_claim *v;
	size_t cap; /* a power of two */
	const struct route_src *const *lists;
};

static uint64_t rw_hash(char kind, const char *s)
{
	uint64_t h = 1469598103934665603ULL ^ (unsigned char)kind;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h ^ (h >> 31);
}

/* "the file source (project p, environment e)" into buf. */
static void rw_where(const struct rw_claims *c, const struct rw_claim *x,
		     char *buf, size_t len)
{
	const struct route_src_project *pr =
	    &c->lists[x->src]->projects[x->project];

	if (x->env == SIZE_MAX)
		snprintf(buf, len, "the %s source",
			 route_writer_source_name((enum route_src_id)x->src));
	else
		snprintf(buf, len, "the %s source (project %s, environment %s)",
			 route_writer_source_name((enum route_src_id)x->src),
			 pr->id, pr->envs[x->env].id);
}

/* Claim x->name; a second claim is -EEXIST with err naming both. */
static int rw_claim(struct rw_claims *c, const struct rw_claim *x,
		    struct errbuf *err)
{
	static const struct {
		char kind;
		const char *what, *verb;
	} kinds[] = {
	    {'p', "project id", "used"},
	    {'e', "environment id", "used"},
	    {'d', "deployment id", "used"},
	    {'h', "domain", "claimed"},
	};
	char a[CONFIG_ID_MAX * 2 + 64], b[CONFIG_ID_MAX * 2 + 64];
	size_t i, k;

	for (i = rw_hash(x->kind, x->name) & (c->cap - 1); c->v[i].name;
	     i = (i + 1) & (c->cap - 1))
		if (c->v[i].kind == x->kind &&
		    strcmp(c->v[i].name, x->name) == 0)
			break;
	if (!c->v[i].name) {
		c->v[i] = *x;
		return 0;
	}
	for (k = 0; kinds[k].kind != x->kind; k++)
		;
	rw_where(c, &c->v[i], a, sizeof(a));
	rw_where(c, x, b, sizeof(b));
	errbuf_set(err, "%s \"%s\" is %s twice: by %s and by %s", kinds[k].what,
		   x->name, kinds[k].verb, a, b);
	return -EEXIST;
}

/* Whether the lists merged claim every id and domain once. Returns 0,
 * -EEXIST with err naming the first name claimed twice, or -ENOMEM. */
static int rw_check(const struct route_src *const *lists, struct errbuf *err)
{
	struct rw_claims c = {.lists = lists};
	size_t n = 0, s, i, j, k;
	int rc = 0;

	for (s = 0; s < ROUTE_SRC_N; s++)
		for (i = 0; lists[s] && i < lists[s]->n_projects; i++) {
			n++;
			for (j = 0; j < lists[s]->projects[i].n_envs; j++)
				n +=
				    2 + lists[s]->projects[i].envs[j].n_domains;
		}
	for (c.cap = 16; c.cap < n * 2; c.cap *= 2)
		;
	c.v = calloc(c.cap, sizeof(*c.v));
	if (!c.v) {
		errbuf_set(err, "route table: out of memory");
		return -ENOMEM;
	}
	for (s = 0; rc == 0 && s < ROUTE_SRC_N; s++)
		for (i = 0; rc == 0 && lists[s] && i < lists[s]->n_projects;
		     i++) {
			const struct route_src_project *pr =
			    &lists[s]->projects[i];
			struct rw_claim x = {pr->id, 'p', (unsigned)s, i,
					     SIZE_MAX};

			rc = rw_claim(&c, &x, err);
			for (j = 0; rc == 0 && j < pr->n_envs; j++) {
				const struct route_src_env *e = &pr->envs[j];

				x.env = j;
				x.kind = 'e';
				x.name = e->id;
				rc = rw_claim(&c, &x, err);
				x.kind = 'd';
				x.name = e->deployment.id;
				/* "": no active deployment (the database) */
				if (rc == 0 && x.name[0])
					rc = rw_claim(&c, &x, err);
				x.kind = 'h';
				for (k = 0; rc == 0 && k < e->n_domains; k++) {
					x.name = e->domains[k];
					rc = rw_claim(&c, &x, err);
				}
			}
		}
	free(c.v);
	return rc;
}

/* ---- the write ---------------------------------------------------------- */

int route_writer_update(struct route_writer *w, enum route_src_id id,
			struct route_src *src, const struct route_defaults *def,
			uint64_t *gen, struct errbuf *err)
{
	const struct route_src *lists[ROUTE_SRC_N];
	struct route_defaults nd;
	struct route_table *t = NULL;
	size_t i;
	int rc;

	errbuf_clear(err);
	if (!EDGE_ASSERT_MSG(pthread_equal(pthread_self(), w->owner),
			     "route source %s changed off the control loop",
			     route_writer_source_name(id))) {
		errbuf_set(err, "route table: written from a thread other than "
				"the control loop's; refused");
		rc = -EPERM;
		goto fail;
	}
	if ((unsigned)id >= ROUTE_SRC_N) {
		errbuf_set(err, "route source %d: no such source", (int)id);
		rc = -ERANGE;
		goto fail;
	}
	nd = def ? *def : w->def;
	for (i = 0; i < ROUTE_SRC_N; i++)
		lists[i] = i == (size_t)id ? src : w->src[i];
	rc = rw_check(lists, err);
	if (rc == 0)
		rc = route_table_build(lists, ROUTE_SRC_N, &nd, &t, err);
	if (rc)
		goto fail;
	if (gen)
		*gen = route_table_generation(t);
	route_table_swap(w->holder, t);
	route_src_free(w->src[id]);
	w->src[id] = src;
	w->def = nd;
	return 0;
fail:
	route_src_free(src);
	return rc;
}

/* ---- giving way ----------------------------------------------------------
 */

/* A kind + name claimed by another source (a sorted set of them). */
struct rw_taken {
	char kind;
	const char *name;
};

static int rw_taken_cmp(const void *a, const void *b)
{
	const struct rw_taken *x = a, *y = b;

	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return strcmp(x->name, y->name);
}

static bool rw_taken(const struct rw_taken *v, size_t n, char kind,
		     const char *name)
{
	struct rw_taken k = {kind, name};

	return n && name[0] &&
	       bsearch(&k, v, n, sizeof(*v), rw_taken_cmp) != NULL;
}

size_t route_writer_prune(const struct route_writer *w, enum route_src_id id,
			  struct route_src *src,
			  void (*said)(void *arg, const char *what), void *arg)
{
	struct rw_taken *v = NULL;
	size_t n = 0, cap = 0, s, i, j, k, dropped = 0;
	char what[512];

	for (s = 0; s < ROUTE_SRC_N; s++)
		for (i = 0;
		     s != (size_t)id && w->src[s] && i < w->src[s]->n_projects;
		     i++) {
			cap++;
			for (j = 0; j < w->src[s]->projects[i].n_envs; j++)
				cap += 2 +
				       w->src[s]->projects[i].envs[j].n_domains;
		}
	if (!cap)
		return 0;
	v = calloc(cap, sizeof(*v));
	if (!v)
		return 0; /* the update then says what conflicts */
	for (s = 0; s < ROUTE_SRC_N; s++)
		for (i = 0;
		     s != (size_t)id && w->src[s] && i < w->src[s]->n_projects;
		     i++) {
			const struct route_src_project *p =
			    &w->src[s]->projects[i];

			v[n++] = (struct rw_taken){'p', p->id};
			for (j = 0; j < p->n_envs; j++) {
				v[n++] = (struct rw_taken){'e', p->envs[j].id};
				v[n++] = (struct rw_taken){
				    'd', p->envs[j].deployment.id};
				for (k = 0; k < p->envs[j].n_domains; k++)
					v[n++] = (struct rw_taken){
					    'h', p->envs[j].domains[k]};
			}
		}
	qsort(v, n, sizeof(*v), rw_taken_cmp);
	for (i = 0; i < src->n_projects;) {
		struct route_src_project *p = &src->projects[i];

		if (rw_taken(v, n, 'p', p->id)) {
			snprintf(what, sizeof(what),
				 "project %s is defined by another source",
				 p->id);
			said(arg, what);
			route_src_project_clear(p);
			memmove(p, p + 1,
				(src->n_projects - i - 1) * sizeof(*p));
			src->n_projects--;
			dropped++;
			continue;
		}
		for (j = 0; j < p->n_envs;) {
			struct route_src_env *e = &p->envs[j];

			if (rw_taken(v, n, 'e', e->id) ||
			    rw_taken(v, n, 'd', e->deployment.id)) {
				snprintf(what, sizeof(what),
					 "environment %s (deployment %s) of "
					 "project %s is defined by another "
					 "source",
					 e->id, e->deployment.id, p->id);
				said(arg, what);
				route_src_env_clear(e);
				memmove(e, e + 1,
					(p->n_envs - j - 1) * sizeof(*e));
				p->n_envs--;
				dropped++;
				continue;
			}
			for (k = 0; k < e->n_domains;) {
				if (!rw_taken(v, n, 'h', e->domains[k])) {
					k++;
					continue;
				}
				snprintf(what, sizeof(what),
					 "domain %s of environment %s is "
					 "served by another source",
					 e->domains[k], e->id);
				said(arg, what);
				free(e->domains[k]);
				memmove(&e->domains[k], &e->domains[k + 1],
					(e->n_domains - k - 1) *
					    sizeof(*e->domains));
				e->n_domains--;
				dropped++;
			}
			j++;
		}
		i++;
	}
	free(v);
	return dropped;
}
