/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pgacme.h - the database store of the ACME manager (acme_mgr.h's struct
 * acme_store_ops; migration 0026): a lease per name in acme_leases (one
 * host of a fleet orders it), challenges in acme_challenges (every host
 * answers them: pgplane_set_acme_challenges), certificates upserted into
 * certificates by acme_name (every host serves them: the certificates'
 * own path, NOTIFY certificate_change).
 *
 * A connection of its own (pgconn.h, application_name "edged acme") on
 * the control loop: the calls are queued (at most PGACME_QUEUE_MAX
 * waiting, else done(-EAGAIN)) and sent one at a time, each one
 * statement (one transaction). Every done callback runs later from the
 * loop, exactly once, never inside the call that took it; forget()
 * drops those pending. The connection lost: the call running and those
 * waiting end -ECONNRESET (release and unpublish, idempotent and without
 * a done, wait and are sent after the reconnect), calls made while it is
 * down end -ENOTCONN (before the first connect has been tried to its
 * end they wait). It connects again by itself (pgconn's back-off). A
 * failing statement ends -EIO with the database's primary message
 * (never its detail, which may hold a row: key_pem is never logged).
 * Loop thread only.
 */
#ifndef EDGE_PGACME_H
#define EDGE_PGACME_H

#include "acme_mgr.h"
#include "log.h"

struct event_base;
struct pgacme;

/* Calls waiting for the connection, at most */
#define PGACME_QUEUE_MAX 256

/* A store on base connecting to conninfo. 0 with *out, or -EINVAL with
 * err (a conninfo libpq refuses), -ENOMEM. */
int pgacme_new(struct event_base *base, const char *conninfo,
	       struct pgacme **out, struct errbuf *err);

/* Close and free: no done callback runs any more (the manager is freed
 * first). NULL ok. */
void pgacme_free(struct pgacme *a);

/* Whether the connection is up now. */
bool pgacme_up(const struct pgacme *a);

/* The store's hooks; their arg is the struct pgacme *. */
extern const struct acme_store_ops pgacme_ops;

#endif /* EDGE_PGACME_H */
