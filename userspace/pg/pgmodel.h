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
 * The model turns into a route source (pgm_route_src) and a global rule
 * list (pgm_global_rules), checking every value with config_check.h: a
 * row that does not parse (a domain, prefix, address or CIDR) is logged
 * with its table and key, counted and skipped, and the rest apply. It
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

struct pgm;

/* The result sets of a fetch, in this order (each a PGresult of the
 * columns pgm_fetch_sql's statements select). */
enum pgm_set {
	PGM_PROJECTS = 0, /* id, name, enabled */
	PGM_ENVS,	  /* id, project_id, name */
	PGM_DEPLOYMENTS,  /* id, environment_id (active ones) */
	PGM_ENDPOINTS,	  /* deployment_id, address (active ones') */
	PGM_DOMAINS,	  /* domain, path_prefix, strip_prefix, env id */
	PGM_RULES,	  /* id, cidr, action, project_id, expires (unix s) */
	PGM_NSETS,
};

/* Rows skipped because a value did not parse, per table. */
struct pgm_skipped {
	uint64_t endpoints, domains, ip_rules, ids;
};

/* A global IP rule (project_id NULL) as read. */
struct pgm_rule {
	int64_t id;
	struct cidr cidr;
	uint8_t action;	    /* EDGE_ACT_* */
	int64_t expires_at; /* unix seconds, 0: never */
};

int pgm_new(struct pgm **out);
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

/* A new route source of every project in the model (the caller's to
 * free), or NULL when out of memory. Rows that do not parse are counted
 * into the model's skipped counts and logged (rate-limited). now is unix
 * seconds (a project rule that has expired is left out). */
struct route_src *pgm_route_src(struct pgm *m, int64_t now);

/* The global rules (valid ones; unexpired at now) in *out (the model's:
 * valid until the next pgm_apply), and their number. */
size_t pgm_global_rules(struct pgm *m, int64_t now,
			const struct pgm_rule **out);

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

#endif /* EDGE_PGMODEL_H */
