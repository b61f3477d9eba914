/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pgconn.h - one PostgreSQL connection driven by a libevent loop with
 * libpq's asynchronous API: no call on it ever blocks the loop.
 *
 * The connection connects by itself (PQconnectStartParams, the socket
 * watched for what PQconnectPoll asks), with TCP keepalives added to the
 * connection string unless it sets its own; when it fails or drops it
 * says so (lost) and connects again after a backoff (100 ms doubling to
 * PGCONN_BACKOFF_MAX_MS, with jitter). One query at a time: a query is
 * sent whole (flushed as the socket takes it), its results handed over
 * one by one and the end of it said (result NULL); a query that takes
 * longer than PGCONN_QUERY_TIMEOUT_MS drops the connection (a hung
 * server, a network that went silent) and so does any protocol failure.
 * Notifications (LISTEN) are handed over as they come, between results
 * too. Loop thread only.
 */
#ifndef EDGE_PGCONN_H
#define EDGE_PGCONN_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

struct event_base;
struct pgconn;

#define PGCONN_BACKOFF_MIN_MS 100
#define PGCONN_BACKOFF_MAX_MS 5000
#define PGCONN_QUERY_TIMEOUT_MS 15000

struct pgconn_ops {
	/* Connected (again): the caller sends what it needs first. */
	void (*ready)(struct pgconn *c, void *arg);
	/* One result of the running query (the caller's to PQclear), or
	 * NULL once the query has ended. */
	void (*result)(struct pgconn *c, PGresult *res, void *arg);
	/* A NOTIFY on a channel the connection LISTENs to. */
	void (*notify)(struct pgconn *c, const char *channel,
		       const char *payload, void *arg);
	/* The connection failed or dropped (why: libpq's message, the
	 * password masked); a query that was running has ended without
	 * its NULL result. It connects again by itself. */
	void (*lost)(struct pgconn *c, const char *why, void *arg);
};

/* A connection on base to conninfo (libpq's "key=value ..." or URI),
 * connecting from now on. name goes into application_name. Returns 0 and
 * *out, -EINVAL with err for a conninfo libpq cannot parse, or -ENOMEM. */
int pgconn_new(struct event_base *base, const char *conninfo, const char *name,
	       const struct pgconn_ops *ops, void *arg, struct pgconn **out,
	       char *err, size_t errlen);

/* Close and free; no callback runs afterwards. NULL is fine. */
void pgconn_free(struct pgconn *c);

/* Whether the connection is up, and whether a query is running. */
bool pgconn_up(const struct pgconn *c);
bool pgconn_busy(const struct pgconn *c);

/* Send sql (with n params, text format; params may be NULL; with none,
 * sql may hold several statements, each giving its results). 0, -ENOTCONN
 * when not up, -EBUSY when a query is running, -EIO when libpq refused
 * it (the connection is dropped and lost follows). */
int pgconn_query(struct pgconn *c, const char *sql, int n,
		 const char *const *params);

/* Drop the connection now and connect again after the backoff (a
 * caller that found the server's answers wrong). */
void pgconn_reset(struct pgconn *c, const char *why);

/* libpq's connection while up (for PQescapeLiteral and the like; never
 * to send or read on), else NULL. */
PGconn *pgconn_pg(const struct pgconn *c);

/* Reconnects so far, and the message of the last failure ("" if none). */
uint64_t pgconn_reconnects(const struct pgconn *c);
const char *pgconn_last_error(const struct pgconn *c);

/* Copy s into out (len bytes) with the value of every password=... in it
 * replaced by "*****", for messages. */
void pgconn_mask(const char *s, char *out, size_t len);

#endif /* EDGE_PGCONN_H */
