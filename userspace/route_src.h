/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * route_src.h - a source of routes: a list of projects, each with its
 * environments (domains, deployment and upstreams, path-prefix routes,
 * security headers) and IP rules, as one source defines them.
 *
 * Not tied to any one source: the configuration file produces one (the
 * file source, config_load), the PostgreSQL sync (pgmodel.c) another
 * from its rows, each value checked by the same config_check.h functions.
 * The route table is built from the sources' lists (route_table_build),
 * which the control loop holds and replaces one source at a time
 * (route_writer.h). A list is immutable once handed over; the table
 * copies what it needs.
 *
 * What a source leaves to the daemon's settings is not resolved here but
 * when a table is built (struct route_defaults): an environment that sets
 * no body limit has ROUTE_SRC_INHERIT, and gets limits.max_body_bytes of
 * the settings in force, whichever source it came from.
 */
#ifndef EDGE_ROUTE_SRC_H
#define EDGE_ROUTE_SRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config_check.h"
#include "compress.h"
#include "hrule.h"
#include "auth.h"
#include "challenge.h"
#include "inject.h"
#include "rules.h"

/* A max_body_bytes not set: the level above's (for an environment, the
 * settings' limits.max_body_bytes). No real limit is this large. */
#define ROUTE_SRC_INHERIT UINT64_MAX

/* The response headers an environment adds (Respond). */
struct config_security_headers {
	bool hsts;		 /* Strict-Transport-Security, on TLS only */
	uint64_t hsts_max_age_s; /* its max-age, seconds */
	bool hsts_subdomains;	 /* "; includeSubDomains" */
	bool nosniff;		 /* X-Content-Type-Options: nosniff */
	char *frame_options;	 /* X-Frame-Options value, "" for none */
	char *referrer_policy;	 /* Referrer-Policy value, "" for none */
	/* a request over plain HTTP gets 308 to its https:// URL */
	bool https_redirect;
};

/* A path-prefix route inside an environment. */
struct route_src_route {
	char *prefix;	   /* "/fn-name": starts with '/', no trailing '/' */
	bool strip_prefix; /* send the path without the prefix */
	struct config_addr *upstreams; /* NULL/0: the deployment's */
	size_t n_upstreams;
	enum config_balance balance; /* the deployment's unless set */
	/* the environment's unless set (then possibly ROUTE_SRC_INHERIT
	 * too); 0: unlimited */
	uint64_t max_body_bytes;
	struct hrules headers;	   /* its own; a name it names is its alone */
	struct auth_gate *auth;	   /* its own credential gate (a reference),
				      NULL: the environment's */
	uint64_t request_total_ms; /* timeouts.request_total, 0: the
				      deployment's */
	bool no_wake;		   /* wake = false: served only while awake */
	bool background;	   /* activity = "background" (wake.h) */
	bool shed; /* shed = true: refused while the worker lags (brownout);
		      the environment's unless set */
};

/* The environment's active deployment. */
struct route_src_deployment {
	char *id;
	struct config_addr *upstreams; /* 1..CONFIG_UPSTREAMS_MAX */
	size_t n_upstreams;
	enum config_balance balance;
	struct config_health_check hc; /* type CONFIG_HC_NONE: none */
	struct config_up_tls tls;      /* to its https:// endpoints */
	bool tls_held; /* tls_up_hold taken for tls: released with it */
	enum config_send_proxy send_proxy; /* a PROXY header to endpoints */
	struct config_retry retry;	   /* set false: no retry group */
	struct config_circuit circuit;	   /* set false: no circuit */
	struct config_hedge hedge;	   /* set false: no hedging */
	uint64_t request_total_ms;	   /* timeouts.request_total, 0: none */
	/* each endpoint's requests in flight at most, this process's
	 * workers together (its routes' own endpoints too); 0: no cap */
	uint64_t max_inflight;
};

/* A (domain, path prefix) pair that routes to an environment, whichever
 * environment (in whichever project or source) serves the domain itself:
 * the database's domains rows with a path_prefix. The route table puts it
 * among the routes of the domain's environment, or, when no environment
 * serves the domain without a prefix, of a table-made one that serves
 * only its prefixes (any other path: domain_not_found). */
struct route_src_claim {
	char *domain; /* as in domains[] */
	char *prefix; /* as route_src_route.prefix */
	bool strip_prefix;
	uint64_t request_total_ms; /* as route_src_route's */
	bool no_wake, background;
	bool shed; /* as route_src_route's: the environment's unless set */
};

struct route_src_env {
	char *id;
	char *name;
	char **domains; /* lowercased (config_domain_check); "*.x.y" */
	size_t n_domains;
	struct route_src_claim *claims; /* routed here by domain + prefix */
	size_t n_claims;
	struct route_src_route *routes;
	size_t n_routes;
	struct route_src_deployment deployment;
	uint64_t max_body_bytes; /* ROUTE_SRC_INHERIT unless set; 0: none */
	struct config_security_headers security;
	struct hrules headers;	     /* header rules (hrule.h) */
	struct hredirects redirects; /* answered by edge (hrule.h) */
	bool unmatched_not_found;    /* a path no route matches: 404 */
	struct config_compression compression; /* of its responses */
	struct config_inject inject;	       /* snippets (inject.h) */
	struct config_challenge challenge;     /* its gate (challenge.h) */
	struct auth_gate *auth; /* API keys / JWT (auth.h), a reference;
				   NULL: none */
	/* on demand (docs/wake.md): woken by its first request, put to
	 * sleep after idle_timeout_ms without a request or open tunnel */
	bool on_demand;
	uint64_t idle_timeout_ms;
	/* background requests hold it awake this long after its last app
	 * activity at most; 0: idle_timeout_ms */
	uint64_t idle_timeout_background_ms;
	/* tls = "auto": its domains' certificates ordered from the ACME CA
	 * (acme_mgr.h) */
	bool tls_auto;
	/* shed = true: its requests not under a route of its own are
	 * refused while the worker lags (brownout) */
	bool shed;
};

struct route_src_project {
	char *id;
	char *name;
	bool enabled;
	/* ip_allow and ip_block together, as lib/rules.h rules (action
	 * EDGE_ACT_ALLOW / EDGE_ACT_BLOCK, never expiring), added by
	 * config_ip_rule_add */
	struct rules ip_rules;
	struct route_src_env *envs;
	size_t n_envs;
};

/* One source's list of projects. */
struct route_src {
	struct route_src_project *projects;
	size_t n_projects;
};

/* What the daemon's settings give every source's routes when a table is
 * built (config_route_defaults). */
struct route_defaults {
	uint64_t max_body_bytes;	 /* where ROUTE_SRC_INHERIT; 0: none */
	uint64_t max_inflight_per_route; /* each route's cap; 0: none */
};

/* The sources of routes, in the order their projects claim names (the
 * file first: a name it holds, the database's rows give way to). */
enum route_src_id {
	ROUTE_SRC_FILE = 0, /* the configuration file's projects */
	ROUTE_SRC_DB,	    /* the PostgreSQL sync's */
	ROUTE_SRC_N,
};

/* "file", "database": a source's name in messages ("?" for no source). */
const char *route_src_name(unsigned id);

/* A new empty list (no projects), or NULL when out of memory. */
struct route_src *route_src_new(void);

/* Free what one project or environment holds (not itself) and zero it. */
void route_src_project_clear(struct route_src_project *pr);
void route_src_env_clear(struct route_src_env *env);

/* A deep copy of from into *to (zeroed first): 0, or -ENOMEM with *to
 * empty. */
int route_src_project_dup(const struct route_src_project *from,
			  struct route_src_project *to);

/* Free a list and everything it holds. s may be NULL. */
void route_src_free(struct route_src *s);

#endif /* EDGE_ROUTE_SRC_H */
