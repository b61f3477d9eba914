/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pgplane.h - edged's PostgreSQL control plane (the `pg` setting): the
 * database sync (pgsync.h) feeding the route writer's database source
 * and this host's XDP maps (pgxdp.h), its state in /metrics and in
 * `edgectl status`.
 *
 * pgplane_prepare runs before privileges drop (it opens the pinned maps
 * for writing and makes the local snapshot's directory the user's);
 * pgplane_start runs on the control loop once it can run (after the
 * fork of daemon()), loading the local snapshot at once and connecting.
 * A list from the database gives way to the configuration file's names
 * (route_writer_prune): a domain or id the file claims is left out of
 * the database's list, logged and counted, and the rest applies.
 */
#ifndef EDGE_PGPLANE_H
#define EDGE_PGPLANE_H

#include <jansson.h>
#include <pwd.h>

#include "acme_chal.h"
#include "challenge.h"
#include "config.h"
#include "log.h"
#include "route_writer.h"

struct event_base;
struct metrics;
struct pgplane;
struct wake;
struct tcproute;

/* The control plane for cfg (cfg->pg set): the migrations, then every
 * routing row read (one REPEATABLE READ fetch, synchronous: edged is not
 * serving yet), or the local snapshot's when the database does not
 * answer, their TCP routes handed to tr (tcproute.h) so that edged binds
 * their addresses while it is root; the maps in cfg->pin_dir opened if
 * edge is attached, the snapshot's directory made (0700) and given to
 * pw's user when pw is not NULL. 0 and *out, or -errno with err. */
int pgplane_prepare(const struct config *cfg, const struct passwd *pw,
		    struct tcproute *tr, struct pgplane **out,
		    struct errbuf *err);

/* Start on base with the route writer w (the control loop's) and the TCP
 * routes tr, series in metrics m: the rows read at start applied at
 * once, then the sync; the database's on-demand environments
 * (environments.on_demand) follow each applied change into wake (NULL:
 * none). 0, or -errno with err (a conninfo libpq
 * refuses). */
int pgplane_start(struct pgplane *p, struct event_base *base,
		  struct route_writer *w, struct tcproute *tr,
		  struct wake *wake, struct metrics *m, struct errbuf *err);

/* The database's certificates table, every row (pgsync.h's struct
 * pgsync_cert), handed to the owner on the control loop. */
struct pgsync_cert;
typedef void (*pgplane_certs_fn)(void *arg, const struct pgsync_cert *v,
				 size_t n);

/* Who takes the certificates (before pgplane_start; none: not fetched). */
void pgplane_set_certs(struct pgplane *p, pgplane_certs_fn fn, void *arg);

/* Who is handed the challenge_keys rows that check out (each fetch of
 * the certificates), the others logged and counted. */
typedef void (*pgplane_chal_keys_fn)(void *arg, const struct chal_key_row *v,
				     size_t n);
void pgplane_set_chal_keys(struct pgplane *p, pgplane_chal_keys_fn fn,
			   void *arg);

/* Who is handed the acme_challenges rows not expired (migration 0026:
 * the challenges any host's ACME order published), on the control loop,
 * at every connect, after every acme_challenge_change notification and
 * once the earliest expired: the whole set each time (rows valid for the
 * call only; a type unknown skipped and logged). Before pgplane_start;
 * none: the table is neither LISTENed to nor read. */
typedef void (*pgplane_acme_chal_fn)(void *arg, const struct acme_chal_row *v,
				     size_t n);
void pgplane_set_acme_challenges(struct pgplane *p, pgplane_acme_chal_fn fn,
				 void *arg);

/* The database's health checks (deployments.health_check, hcheck.h)
 * changed: fn(arg) is called on the control loop once the route table
 * holds the change (before pgplane_start; none: not told). */
typedef void (*pgplane_hcheck_fn)(void *arg);
void pgplane_set_hcheck(struct pgplane *p, pgplane_hcheck_fn fn, void *arg);

/* The health checks of the database's deployments the route table holds
 * (hcheck_targets of each of its projects, in project id order; an
 * address may come twice, from two projects: hcheck_merge keeps the
 * first): a new array *out of *n (NULL, 0 when none; p may be NULL). 0 or
 * -ENOMEM. */
struct hcheck_target;
int pgplane_hcheck_targets(const struct pgplane *p, struct hcheck_target **out,
			   size_t *n);

/* The configuration file's routes changed (a reload): the database's
 * projects are applied again, giving way to the file's names anew. */
void pgplane_file_changed(struct pgplane *p);

/* The database's change version the route table holds (0: none yet). */
uint64_t pgplane_applied_version(const struct pgplane *p);

/* {"state", "applied_version", "database_version", "changes", ...} for
 * `edgectl status`, a new reference (NULL when out of memory). */
json_t *pgplane_status_json(const struct pgplane *p);

void pgplane_free(struct pgplane *p);

#endif /* EDGE_PGPLANE_H */
