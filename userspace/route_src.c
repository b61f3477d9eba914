/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * route_src.c - a source's list of projects (route_src.h): its memory.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "route_src.h"
#include "tls_up.h"

static const char *const route_src_names[ROUTE_SRC_N] = {
    [ROUTE_SRC_FILE] = "file",
    [ROUTE_SRC_DB] = "database",
};

const char *route_src_name(unsigned id)
{
	return id < ROUTE_SRC_N ? route_src_names[id] : "?";
}

struct route_src *route_src_new(void)
{
	return calloc(1, sizeof(struct route_src));
}

void route_src_env_clear(struct route_src_env *env)
{
	size_t i;

	free(env->id);
	free(env->name);
	for (i = 0; i < env->n_domains; i++)
		free(env->domains[i]);
	free(env->domains);
	for (i = 0; i < env->n_claims; i++) {
		free(env->claims[i].domain);
		free(env->claims[i].prefix);
	}
	free(env->claims);
	for (i = 0; i < env->n_routes; i++) {
		free(env->routes[i].prefix);
		free(env->routes[i].upstreams);
		hrules_free(&env->routes[i].headers);
		auth_gate_put(env->routes[i].auth);
	}
	free(env->routes);
	free(env->deployment.id);
	free(env->deployment.upstreams);
	if (env->deployment.tls_held)
		tls_up_release(&env->deployment.tls);
	free(env->security.frame_options);
	free(env->security.referrer_policy);
	hrules_free(&env->headers);
	hredirects_free(&env->redirects);
	compress_free(&env->compression);
	inject_free(&env->inject);
	auth_gate_put(env->auth);
	env->auth = NULL;
}

void route_src_project_clear(struct route_src_project *pr)
{
	size_t j;

	free(pr->id);
	free(pr->name);
	rules_free(&pr->ip_rules);
	for (j = 0; j < pr->n_envs; j++)
		route_src_env_clear(&pr->envs[j]);
	free(pr->envs);
	memset(pr, 0, sizeof(*pr));
}

void route_src_free(struct route_src *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->n_projects; i++)
		route_src_project_clear(&s->projects[i]);
	free(s->projects);
	free(s);
}

/* ---- copies ---------------------------------------------------------- */

/* *to = a copy of s (NULL stays NULL); false when out of memory. */
static bool rs_str(char **to, const char *s)
{
	*to = s ? strdup(s) : NULL;
	return !s || *to;
}

/* *to = a copy of n elements of size sz at from; false when out of
 * memory. */
static bool rs_mem(void *to, const void *from, size_t n, size_t sz)
{
	void **t = to;

	*t = NULL;
	if (!n || !from)
		return true;
	*t = malloc(n * sz);
	if (!*t)
		return false;
	memcpy(*t, from, n * sz);
	return true;
}

static int rs_env_dup(const struct route_src_env *f, struct route_src_env *t)
{
	size_t i;

	memset(t, 0, sizeof(*t));
	t->max_body_bytes = f->max_body_bytes;
	t->on_demand = f->on_demand;
	t->idle_timeout_ms = f->idle_timeout_ms;
	t->idle_timeout_background_ms = f->idle_timeout_background_ms;
	t->security = f->security;
	t->security.frame_options = t->security.referrer_policy = NULL;
	t->unmatched_not_found = f->unmatched_not_found;
	t->shed = f->shed;
	t->challenge = f->challenge;
	t->auth = auth_gate_get(f->auth);
	if (hrules_dup(&f->headers, &t->headers) ||
	    hredirects_dup(&f->redirects, &t->redirects) ||
	    compress_dup(&f->compression, &t->compression) ||
	    inject_dup(&f->inject, &t->inject))
		return -ENOMEM;
	t->deployment.balance = f->deployment.balance;
	t->deployment.hc = f->deployment.hc;
	t->deployment.retry = f->deployment.retry;
	t->deployment.circuit = f->deployment.circuit;
	t->deployment.hedge = f->deployment.hedge;
	t->deployment.request_total_ms = f->deployment.request_total_ms;
	t->deployment.max_inflight = f->deployment.max_inflight;
	t->deployment.tls = f->deployment.tls;
	if (f->deployment.tls_held) {
		struct errbuf err;

		/* held: shared, nothing read */
		t->deployment.tls_held =
		    tls_up_hold(&t->deployment.tls, &err) == 0;
		t->deployment.tls.refused = !t->deployment.tls_held;
	}
	if (!rs_str(&t->id, f->id) || !rs_str(&t->name, f->name) ||
	    !rs_str(&t->deployment.id, f->deployment.id) ||
	    !rs_str(&t->security.frame_options, f->security.frame_options) ||
	    !rs_str(&t->security.referrer_policy,
		    f->security.referrer_policy) ||
	    !rs_mem(&t->deployment.upstreams, f->deployment.upstreams,
		    f->deployment.n_upstreams,
		    sizeof(*f->deployment.upstreams)))
		return -ENOMEM;
	t->deployment.n_upstreams = f->deployment.n_upstreams;
	if (f->n_domains &&
	    !(t->domains = calloc(f->n_domains, sizeof(*t->domains))))
		return -ENOMEM;
	for (i = 0; i < f->n_domains; i++, t->n_domains++)
		if (!rs_str(&t->domains[i], f->domains[i]))
			return -ENOMEM;
	if (f->n_claims &&
	    !(t->claims = calloc(f->n_claims, sizeof(*t->claims))))
		return -ENOMEM;
	for (i = 0; i < f->n_claims; i++, t->n_claims++) {
		t->claims[i].strip_prefix = f->claims[i].strip_prefix;
		t->claims[i].request_total_ms = f->claims[i].request_total_ms;
		t->claims[i].no_wake = f->claims[i].no_wake;
		t->claims[i].background = f->claims[i].background;
		t->claims[i].shed = f->claims[i].shed;
		if (!rs_str(&t->claims[i].domain, f->claims[i].domain) ||
		    !rs_str(&t->claims[i].prefix, f->claims[i].prefix))
			return -ENOMEM;
	}
	if (f->n_routes &&
	    !(t->routes = calloc(f->n_routes, sizeof(*t->routes))))
		return -ENOMEM;
	for (i = 0; i < f->n_routes; i++, t->n_routes++) {
		const struct route_src_route *fr = &f->routes[i];
		struct route_src_route *tr = &t->routes[i];

		*tr = *fr;
		tr->prefix = NULL;
		tr->upstreams = NULL;
		memset(&tr->headers, 0, sizeof(tr->headers));
		tr->auth = auth_gate_get(fr->auth);
		if (hrules_dup(&fr->headers, &tr->headers) ||
		    !rs_str(&tr->prefix, fr->prefix) ||
		    !rs_mem(&tr->upstreams, fr->upstreams, fr->n_upstreams,
			    sizeof(*fr->upstreams)))
			return -ENOMEM;
	}
	return 0;
}

int route_src_project_dup(const struct route_src_project *from,
			  struct route_src_project *to)
{
	size_t j;

	memset(to, 0, sizeof(*to));
	to->enabled = from->enabled;
	if (!rs_str(&to->id, from->id) || !rs_str(&to->name, from->name) ||
	    !rs_mem(&to->ip_rules.v, from->ip_rules.v, from->ip_rules.n,
		    sizeof(*from->ip_rules.v)))
		goto fail;
	to->ip_rules.n = to->ip_rules.cap = from->ip_rules.n;
	if (from->n_envs &&
	    !(to->envs = calloc(from->n_envs, sizeof(*to->envs))))
		goto fail;
	for (j = 0; j < from->n_envs; j++) {
		to->n_envs++;
		if (rs_env_dup(&from->envs[j], &to->envs[j]))
			goto fail;
	}
	return 0;
fail:
	route_src_project_clear(to);
	return -ENOMEM;
}
