/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pgmodel_int.h - what pgmodel.c (the model) and pgmodel_snap.c (its
 * local snapshot) share, private to the two.
 */
#ifndef EDGE_PGMODEL_INT_H
#define EDGE_PGMODEL_INT_H

#include <stdatomic.h>

#include "config_check.h"
#include "auth.h"
#include "compress.h"
#include "hrule.h"
#include "inject.h"
#include "pgmodel.h"

struct pgm_dom {
	char *domain; /* lowercased */
	char *prefix; /* "" or a checked prefix */
	bool strip;
	/* a prefix row's wake = false, activity = 'background' and
	 * request_total (0: the deployment's), checked (0028) */
	bool no_wake, background;
	uint64_t request_total_ms;
	/* a prefix row's shed (0029): shed_set false (NULL), the
	 * environment's */
	bool shed_set, shed;
};

/* An api_keys row, checked. */
struct pgm_key {
	char *name;
	char hex[65];
};

struct pgm_env {
	char *id, *name;
	char *dep; /* the active deployment's id, NULL: none */
	/* its health_check (docs/upstream.md; type CONFIG_HC_NONE: none),
	 * and why the column's value was refused (NULL: it was not) */
	struct config_health_check hc;
	char *hc_err;
	/* its tls (deployments.tls, docs/upstream.md): tls.refused when
	 * the value was refused; else its profile held (tls_up_hold) while
	 * this env lives, or its files failed (tried again by every route
	 * source made of it); tls_err says why either failed */
	struct config_up_tls tls;
	bool tls_held, tls_files_failed;
	char *tls_err;
	enum config_send_proxy send_proxy; /* deployments.send_proxy */
	/* deployments.retry, circuit and request_total (0028), checked:
	 * not set (0) when NULL or refused; up_err says why one was
	 * refused ("retry: max: ..."), NULL: none was */
	struct config_retry retry;
	struct config_circuit circuit;
	uint64_t request_total_ms;
	/* deployments.hedge and max_inflight (0029), the same way */
	struct config_hedge hedge;
	uint64_t max_inflight;
	char *up_err;
	/* "ID: why" when the active deployment's send_proxy was refused
	 * (the deployment left out), NULL: it was not */
	char *sp_err;
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
	uint64_t idle_bg_ms;	   /* idle_timeout_background, 0: idle_ms */
	bool shed;		   /* environments.shed (0029) */
	bool https_redirect, hsts; /* environments' columns (0007) */
	bool tls_auto;		   /* environments.tls = 'auto' (0026) */
	/* environments.headers, redirects and unmatched (0016), checked */
	struct hrules headers;
	struct hredirects redirects;
	bool unmatched_not_found;
	struct config_compression compression; /* (0017), checked */
	struct config_inject inject;	       /* (0018), checked */
	struct config_challenge challenge;     /* (0019), checked */
	/* environments.api_keys and jwt (0022): the gate (a reference,
	 * NULL: none), the jwt column's text and the api_keys rows as
	 * read (for the local snapshot) */
	struct auth_gate *auth;
	bool api_keys;
	char *jwt;
	char *auth_request; /* the column's text (0024), NULL: none */
	struct pgm_key *keys;
	size_t n_keys;
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
	size_t live_cap;
	struct pgm_skipped sk;
};

/* Another reference to p (any thread). */
struct pgm_project *pgm_project_get(struct pgm_project *p);
/* Drop a reference; the last one frees p (NULL is fine). */
void pgm_project_free(struct pgm_project *p);
/* Every project and global rule of m dropped (m itself kept). */
void pgm_clear(struct pgm *m);
/* Grow *v (of *n elements of sz, grown only here) by one zeroed element,
 * its room doubling; NULL when out of memory. */
void *pgm_grow(void **v, size_t *n, size_t sz);
/* strdup of s, "" for NULL. */
char *pgm_dup(const char *s);
/* A tcp_routes row's values into *x, checked as the file's are: 0 or
 * -EINVAL with err (which may be NULL). */
int pgm_tcp_row(struct tcproute_row *x, int64_t id, const char *listen,
		const char *sni, const char *env, bool pp,
		const char *send_proxy, struct errbuf *err);
/* e's tls group held (tls_up_hold; released when the env is freed), or,
 * when its files cannot be read, tls_files_failed with e->tls_err;
 * nothing before pgm_tls_start. 0 or -ENOMEM. */
int pgm_tls_hold(struct pgm_env *e);
/* qsort's order of projects: by id. */
int pgm_cmp_project(const void *a, const void *b);

#endif /* EDGE_PGMODEL_INT_H */
