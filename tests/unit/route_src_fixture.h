/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tests/unit/route_src_fixture.h - route sources (route_src.h) built by
 * hand, as a source other than the file (the database) builds them:
 * every string a copy, so that route_src_free frees it all.
 */
#ifndef EDGE_TEST_ROUTE_SRC_FIXTURE_H
#define EDGE_TEST_ROUTE_SRC_FIXTURE_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "route_src.h"

static inline char *fx_dup(const char *s)
{
	char *d = strdup(s);

	ck_assert_ptr_nonnull(d);
	return d;
}

/* Grow the array *v of *n elements of size sz by one zeroed element;
 * returns it. */
static inline void *fx_grow(void *v, size_t *n, size_t sz, void **out)
{
	char *nv = realloc(v, (*n + 1) * sz);

	ck_assert_ptr_nonnull(nv);
	memset(nv + *n * sz, 0, sz);
	*out = nv + *n * sz;
	(*n)++;
	return nv;
}

/* A new project id (enabled, named as its id) at the end of s. */
static inline struct route_src_project *fx_project(struct route_src *s,
						   const char *id)
{
	void *p;

	s->projects =
	    fx_grow(s->projects, &s->n_projects, sizeof(*s->projects), &p);
	s->projects[s->n_projects - 1].id = fx_dup(id);
	s->projects[s->n_projects - 1].name = fx_dup(id);
	s->projects[s->n_projects - 1].enabled = true;
	return p;
}

/*
 * A new environment id in pr: deployment "<id>-d" with the one endpoint
 * upstream, no body limit of its own (ROUTE_SRC_INHERIT), the default
 * security headers, answering domain d1 and, unless NULL, d2.
 */
static inline struct route_src_env *fx_env(struct route_src_project *pr,
					   const char *id, const char *upstream,
					   const char *d1, const char *d2)
{
	const char *const d[2] = {d1, d2};
	struct route_src_env *e;
	struct errbuf err = {""};
	char dep[128];
	size_t i;
	void *p;

	pr->envs = fx_grow(pr->envs, &pr->n_envs, sizeof(*pr->envs), &p);
	e = p;
	e->id = fx_dup(id);
	e->name = fx_dup(id);
	snprintf(dep, sizeof(dep), "%s-d", id);
	e->deployment.id = fx_dup(dep);
	e->deployment.upstreams = calloc(1, sizeof(struct config_addr));
	ck_assert_ptr_nonnull(e->deployment.upstreams);
	ck_assert_int_eq(
	    config_addr_parse(upstream, e->deployment.upstreams, &err), 0);
	e->deployment.n_upstreams = 1;
	e->max_body_bytes = ROUTE_SRC_INHERIT;
	e->security.nosniff = true;
	e->security.frame_options = fx_dup("");
	e->security.referrer_policy = fx_dup("");
	for (i = 0; i < 2 && d[i]; i++) {
		e->domains =
		    fx_grow(e->domains, &e->n_domains, sizeof(char *), &p);
		*(char **)p = fx_dup(d[i]);
	}
	return e;
}

/* A new prefix route in e, with the deployment's endpoints and body
 * limit max_body (ROUTE_SRC_INHERIT: the environment's). */
static inline struct route_src_route *
fx_route(struct route_src_env *e, const char *prefix, uint64_t max_body)
{
	void *p;

	e->routes = fx_grow(e->routes, &e->n_routes, sizeof(*e->routes), &p);
	e->routes[e->n_routes - 1].prefix = fx_dup(prefix);
	e->routes[e->n_routes - 1].max_body_bytes = max_body;
	return p;
}

/* A claim in e: domain + prefix routed to e, stripped or not. */
static inline void fx_claim(struct route_src_env *e, const char *domain,
			    const char *prefix, bool strip)
{
	void *p;

	e->claims = fx_grow(e->claims, &e->n_claims, sizeof(*e->claims), &p);
	e->claims[e->n_claims - 1].domain = fx_dup(domain);
	e->claims[e->n_claims - 1].prefix = fx_dup(prefix);
	e->claims[e->n_claims - 1].strip_prefix = strip;
}

/* A new empty source. */
static inline struct route_src *fx_src(void)
{
	struct route_src *s = route_src_new();

	ck_assert_ptr_nonnull(s);
	return s;
}

#endif /* EDGE_TEST_ROUTE_SRC_FIXTURE_H */
