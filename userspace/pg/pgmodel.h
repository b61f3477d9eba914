/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pgmodel.h - what edged holds of the database's routing rows: projects
 * with their environments (the active deployment, its endpoints, the
 * domains and path prefixes), the projects' IP rules, and the global IP
 * rules (every host's XDP maps), as the rows were read.
 *
 * Rows come in as result sets (a snapshot of everything, or the rows of
 * a few projects that changed) and replace what the model held of those
 * projects: the cost of a change is the rows of the projects it touched.
 * The model turns into a route source (pgm_route_src), a global rule
 * list (pgm_global_rules) and the TCP routes' rows (pgm_tcp_rows,
 * tcproute.h), checking every value with config_check.h: a
 * row that does not parse (a domain, prefix, address or CIDR) is logged
 * with its table and key, counted and skipped, and the rest apply; a
 * deployment's health_check, retry, circuit, request_total, hedge or
 * max_inflight that does not (config_health_check_json,
 * config_retry_json, config_hedge_json, ...) is logged with
 * the deployment's id and counted, once per reason, and the deployment
 * kept without it. It
 * saves itself to a JSON file and loads from one (the local snapshot a
 * host boots from while the database is away). Not thread-safe.
 */
#ifndef EDGE_PGMODEL_H
#define EDGE_PGMODEL_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "route_src.h"
#include "rules.h"
#include "tcproute.h"

struct pgm;

/* The result sets of a fetch, in this order (each a PGresult of the
 * columns pgm_fetch_sql's statements select). */
enum pgm_set {
	PGM_PROJECTS = 0, /* id, name, enabled */
	PGM_ENVS,	  /* id, project_id, name, on_demand, state,
			   * idle_timeout (seconds, text), ... */
	PGM_DEPLOYMENTS,  /* id, environment_id, health_check (jsonb as
			   * text; active ones), ... */
	PGM_ENDPOINTS,	  /* deployment_id, address (active ones') */
	PGM_DOMAINS,	  /* domain, path_prefix, strip_prefix, env id,
			   * wake, activity, request_total (s, text),
			   * shed (NULL: the environment's) */
	PGM_RULES,	  /* id, cidr, action, project_id, expires (unix s) */
	PGM_TCP,	  /* id, listen, sni, environment_id (tcp_routes) */
	PGM_KEYS,	  /* environment_id, name, key_sha256 (api_keys) */
	PGM_NSETS,
};

/* environments.state: what the fleet (the orchestrator, docs/wake.md)
 * says of an environment. */
enum pgm_env_state {
	PGM_ENV_RUNNING = 0,
	PGM_ENV_SLEEPING,
	PGM_ENV_WAKING,
	PGM_ENV_NSTATES,
};
extern const char *const pgm_env_states[PGM_ENV_NSTATES];
/* s's enum pgm_env_state, or -1 when it is none. */
int pgm_env_state_parse(const char *s);

/* Rows skipped because a value did not parse, per table; and
 * health_checks: deployments served without their health_check, refused
 * (counted once per deployment and reason). */
struct pgm_skipped {
	uint64_t endpoints, domains, ip_rules, ids, tcp_routes;
	uint64_t health_checks, tls;
	uint64_t send_proxy; /* deployments whose send_proxy was refused */
	/* environments whose headers, redirects, unmatched, compression,
	 * inject, challenge or jwt were refused */
	uint64_t env_rules;
	uint64_t api_keys; /* api_keys rows refused (the key left out) */
	/* deployments whose retry, circuit, request_total, hedge or
	 * max_inflight was refused (served without it; counted once per
	 * deployment and reason) */
	uint64_t upstream;
};

/* A global IP rule (project_id NULL) as read. */
struct pgm_rule {
	int64_t id;
	struct cidr cidr;
	uint8_t action;	    /* EDGE_ACT_* */
	int64_t expires_at; /* unix seconds, 0: never (< 0: long past) */
};

int pgm_new(struct pgm **out);

/* From now on the deployments' tls files may be read (edged runs as its
 * user): every group of m (may be NULL) held, a group whose files fail
 * logged and counted. Control thread, once. 0 or -ENOMEM. */
int pgm_tls_start(struct pgm *m);
void pgm_free(struct pgm *m);

/* The statements that fetch the rows of projects ids[0..n) (all of them
 * when ids is NULL), and the global rules too when all or rules is set,
 * in one REPEATABLE READ transaction: BEGIN; the change version (max of
 * edge_change_log); one SELECT per enum pgm_set; COMMIT. A malloc'd
 * string (ids escaped with conn), or NULL when out of memory. */
char *pgm_fetch_sql(PGconn *conn, const char *const *ids, size_t n, bool rules);

/* Apply a fetch's result sets (set[i] for enum pgm_set i): the projects
 * ids[0..n) (NULL: all, a snapshot) are replaced by what the sets hold
 * (a project missing from them was deleted); the global rules are
 * replaced when rules is set (or on a snapshot). Returns 0 or -ENOMEM /
 * -EPROTO (a set of the wrong shape: the model is unchanged). */
int pgm_apply(struct pgm *m, PGresult *const set[PGM_NSETS],
	      const char *const *ids, size_t n, bool rules);

/*
 * pgm_apply in steps, so that a fetch of 100,000 rows need not hold the
 * control loop: begin checks the sets' shapes (-EPROTO, -ENOMEM: no job);
 * each pgm_apply_step works until deadline_ns (monotonic, clk.h; 0: to
 * the end) and returns 1 while work is left, 0 once the model holds the
 * change (and the projects it replaced are freed), or -ENOMEM (the model
 * unchanged; every later step says the same). set, ids and m stay the
 * caller's and must live, unchanged, until pgm_job_free, and nothing else
 * may change m meanwhile (reading it is fine: the model changes in the
 * one step that swaps the projects in). pgm_job_free drops a job, done or
 * not (NULL is fine).
 */
struct pgm_job;
int pgm_apply_begin(struct pgm *m, PGresult *const set[PGM_NSETS],
		    const char *const *ids, size_t n, bool rules,
		    struct pgm_job **out);
int pgm_apply_step(struct pgm_job *j, uint64_t deadline_ns);
void pgm_job_free(struct pgm_job *j);

/*
 * A project of the model as a route source project in *out (zeroed
 * first; the caller's to clear with route_src_project_clear): the i-th in
 * id order (i < pgm_projects), or the one of id. A project rule that has
 * expired at now (unix seconds) is left out; the others carry their
 * expiry, which the route table enforces. 0; -ENOENT when the model has
 * no such project; -ENOMEM (*out empty).
 */
int pgm_src_at(const struct pgm *m, size_t i, int64_t now,
	       struct route_src_project *out);
int pgm_src_of(const struct pgm *m, const char *id, int64_t now,
	       struct route_src_project *out);

/* The global rules (valid ones; unexpired at now) in *out (the model's:
 * valid until the next pgm_apply), and their number. */
size_t pgm_global_rules(struct pgm *m, int64_t now,
			const struct pgm_rule **out);

/* The tcp_routes rows of every project in the model (their values
 * checked one by one; whether they fit together is tcproute.h's), sorted
 * by id: a malloc'd array of *n (NULL when none; each row zero-padded,
 * so that two reads of the same rows compare equal with memcmp). 0 or
 * -ENOMEM. */
int pgm_tcp_rows(const struct pgm *m, struct tcproute_row **out, size_t *n);

/* Skipped rows so far, projects and rows in the model. */
void pgm_skipped(const struct pgm *m, struct pgm_skipped *out);
size_t pgm_projects(const struct pgm *m);

/* Save the model (with version) to path atomically (temporary file,
 * fsync, rename), or load one saved (replacing the model; *version set).
 * 0 or -errno with err set. */
int pgm_save(const struct pgm *m, uint64_t version, const char *path,
	     struct errbuf *err);
int pgm_load(struct pgm *m, const char *path, uint64_t *version,
	     struct errbuf *err);

/*
 * What pgm_save writes, taken apart from writing it: pgm_snap_take (the
 * model's thread) holds the model's projects as they are (a reference to
 * each, which a later pgm_apply does not change: it replaces projects,
 * never edits one) and a copy of the global rules; pgm_snap_write writes
 * it as pgm_save does, from any thread; pgm_snap_free drops it (any
 * thread). So the file is written off the control loop, and the loop
 * spends a pointer per project on it.
 */
struct pgm_snap;
struct pgm_snap *pgm_snap_take(const struct pgm *m, uint64_t version);
uint64_t pgm_snap_version(const struct pgm_snap *x);
int pgm_snap_write(const struct pgm_snap *x, const char *path,
		   struct errbuf *err);
void pgm_snap_free(struct pgm_snap *x);

#endif /* EDGE_PGMODEL_H */
