/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pgdb.h - edge's PostgreSQL basics, shared by edged and edgectl: the
 * connection's parameters (the operator's connection string with TCP
 * keepalives, a connect timeout and an application name added unless it
 * sets them), a synchronous connect, the schema's migrations (embedded from
 * userspace/pg/migrations by scripts/sql2c, applied under an advisory
 * lock), the schema's status, and error messages that carry libpq's text
 * (the primary message and SQLSTATE) but never a password.
 *
 * Everything here but the masking and pgdb_params is synchronous libpq:
 * for edgectl, and for edged at start before it serves. Never on a thread
 * that serves requests. An asynchronous connection (edged's LISTEN) takes
 * the same parameters: pgdb_params_init, then PQconnectStartParams(keys,
 * vals, 0).
 *
 * The schema lives in the connection's current schema (search_path:
 * "public" unless the connection string says otherwise, e.g.
 * options='-c search_path=edge').
 */
#ifndef EDGE_PGDB_H
#define EDGE_PGDB_H

#include <libpq-fe.h>
#include <stdint.h>

#include "log.h"

/* What pgdb_params adds when the connection string (or, for the first
 * two, libpq's environment: PGCONNECT_TIMEOUT, PGAPPNAME) leaves it out.
 * With these, a peer that vanishes (a cut link, a host that died) is
 * noticed within about idle + interval * count seconds on an idle
 * connection, and within PGDB_TCP_USER_TIMEOUT_MS when data sent is not
 * acknowledged, instead of the kernel's two hours or fifteen minutes. */
#define PGDB_CONNECT_TIMEOUT_S 10
#define PGDB_KEEPALIVES_IDLE_S 10
#define PGDB_KEEPALIVES_INTERVAL_S 5
#define PGDB_KEEPALIVES_COUNT 3
#define PGDB_TCP_USER_TIMEOUT_MS 30000

/* The advisory lock (pg_advisory_lock's bigint key space) every edge
 * process takes while migrating: 0x6564676500000001, "edge" in ASCII then
 * 1, written in decimal because it also goes into SQL as it is. */
#define PGDB_LOCK_MIGRATE 7306078178991144961
/* How long pgdb_migrate waits for another process's migration. */
#define PGDB_LOCK_WAIT_S 120

/* The longest text pgdb's messages are built in before they are cut to
 * an errbuf (masking happens first, so a cut never splits a password
 * from its mask). */
#define PGDB_MSG_MAX 2048

/*
 * The parameters for PQconnectdbParams / PQconnectStartParams (with
 * expand_dbname 0): the connection string's own settings (key=value or
 * postgresql:// URI, parsed by libpq) and the defaults above. keys and
 * vals end with NULL. secret is the password the string holds (NULL when
 * none), for pgdb_mask.
 */
struct pgdb_params {
	const char **keys;
	const char **vals;
	const char *secret;
	PQconninfoOption *opts; /* owns the strings */
};

/*
 * Parse conninfo and fill p. app_name (may be NULL) becomes
 * application_name unless the string or PGAPPNAME sets one. Returns 0;
 * -EINVAL when libpq cannot parse the string, with err saying why
 * (masked); -ENOMEM.
 */
int pgdb_params_init(struct pgdb_params *p, const char *conninfo,
		     const char *app_name, struct errbuf *err);

/* Free what p holds. p may be NULL or zeroed; freeing twice is harmless. */
void pgdb_params_free(struct pgdb_params *p);

/*
 * Connect synchronously with pgdb_params (waits at most the connect
 * timeout per host). Returns 0 with *out (PQfinish it), or -EINVAL (bad
 * string), -ECONNREFUSED (libpq could not connect: err is "cannot connect
 * to PostgreSQL: " and libpq's message, masked), -ENOMEM.
 */
int pgdb_connect(const char *conninfo, const char *app_name, PGconn **out,
		 struct errbuf *err);

/*
 * Copy in to out (at most len bytes, always terminated) with passwords
 * masked as "***": the value after "password=" (any case, quoted or not,
 * up to white space), the password in a URI's user information
 * ("postgresql://user:***@host"), and every occurrence of secret (when it
 * is at least 4 bytes long; may be NULL). Returns out.
 */
char *pgdb_mask(const char *in, const char *secret, char *out, size_t len);

/* A one-line description of where conn is connected, without the
 * password: "host H port P database D user U". Returns buf. */
char *pgdb_describe(PGconn *conn, char *buf, size_t len);

/* err = printf(fmt) ": " libpq's last message on conn (its lines joined
 * with "; "), masked with conn's password. */
void pgdb_conn_error(PGconn *conn, struct errbuf *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * err = printf(fmt) ": " the result's primary message " (SQLSTATE
 * XXXXX)", then "; " its detail and hint when it has them; libpq's message
 * on conn when res has none (a lost connection). Masked with conn's
 * password. res may be NULL.
 */
void pgdb_result_error(const PGresult *res, PGconn *conn, struct errbuf *err,
		       const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The result's SQLSTATE, "" when it has none. res may be NULL. */
const char *pgdb_sqlstate(const PGresult *res);

/*
 * Run one statement (PQexecParams: text parameters, text results).
 * Returns 0 when it succeeded (PGRES_COMMAND_OK or PGRES_TUPLES_OK);
 * -EIO when the server refused it, or -ECONNRESET when the connection is
 * gone, with err = what ": " pgdb_result_error's text. *out (may be NULL)
 * receives the result, also on -EIO so that the caller can read its
 * SQLSTATE; the caller PQclears it. NULL otherwise.
 */
int pgdb_exec(PGconn *conn, const char *what, const char *sql, int nparams,
	      const char *const *params, PGresult **out, struct errbuf *err);

/* Field (row, col) of res as an integer; dflt when it is NULL or not
 * a whole number. */
int64_t pgdb_int(const PGresult *res, int row, int col, int64_t dflt);

/* The schema version this build knows (PG_SCHEMA_VERSION): its last
 * migration. */
int pgdb_latest(void);

/* The name of migration version ("control_plane" for 1), NULL when this
 * build has none of that version. */
const char *pgdb_migration_name(int version);

/* The database's schema version: the highest in edge_schema, 0 when there
 * is no edge_schema table. Returns 0 or -errno with err set. */
int pgdb_schema_version(PGconn *conn, int *version, struct errbuf *err);

/*
 * Whether this build can use the database's schema: its version (in
 * *version, may be NULL) is at least min and at most pgdb_latest().
 * Returns 0; -ENOENT when it is older than min (0: no schema), err saying
 * "edgectl db migrate" brings it up; -EPROTO when it is newer, err saying
 * "the database's schema is version N, newer than this edge (M): upgrade
 * edge"; another -errno when the query failed.
 */
int pgdb_schema_check(PGconn *conn, int min, int *version, struct errbuf *err);

/* Called by pgdb_migrate after each migration it committed. */
typedef void (*pgdb_migrate_fn)(int version, const char *name, void *arg);

/*
 * Bring the database's schema up to this build's: under the advisory lock
 * PGDB_LOCK_MIGRATE (waiting at most PGDB_LOCK_WAIT_S for another
 * process's migration), apply each migration above the database's
 * version, in order, each in a transaction of its own that also records
 * it in edge_schema (version, applied_by). Several processes may migrate
 * at once: the first applies, the others find nothing to do. done (may be
 * NULL) is called after each commit. *applied (may be NULL) counts them.
 * Returns 0; -EPROTO when the database's schema is newer than this build
 * (nothing done; err says "the database's schema is version N, newer than
 * this edge (M): upgrade edge"); -ETIMEDOUT when the lock was not had in
 * time; -EIO when a migration failed (rolled back whole; err names it,
 * the line of its file and the server's message); -ECONNRESET.
 */
int pgdb_migrate(PGconn *conn, const char *applied_by, pgdb_migrate_fn done,
		 void *arg, int *applied, struct errbuf *err);

/* The database at a glance. Counts are -1 without a schema. */
struct pgdb_status {
	int version;		/* the database's schema version; 0: none */
	int latest;		/* this build's, pgdb_latest() */
	int64_t hosts;		/* rows of edge_hosts */
	int64_t hosts_stale;	/* not seen for stale_s (or never) */
	int64_t hosts_behind;	/* applied_version (NULL: 0) below
				   change_version */
	int64_t change_version; /* max(edge_change_log.version); 0: none */
	int64_t change_seq;	/* edge_change_seq's last value; 0: none */
};

/* Fill st. The host counts need the schema at version 1 or later (they
 * stay -1 otherwise). Returns 0 or -errno with err set. */
int pgdb_status(PGconn *conn, int stale_s, struct pgdb_status *st,
		struct errbuf *err);

#endif /* EDGE_PGDB_H */
