/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * route_src.c - a source's list of projects (route_src.h): its memory.
 */
#include <stdlib.h>
#include <string.h>

#include "route_src.h"

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
	}
	free(env->routes);
	free(env->deployment.id);
	free(env->deployment.upstreams);
	free(env->security.frame_options);
	free(env->security.referrer_policy);
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
