/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pgsync.h - the database's routes and IP rules kept in step on the
 * control loop: LISTEN, a snapshot, and every change as it is notified.
 *
 * On every (re)connect: LISTEN project_route_change and ip_rule_change
 * (and certificate_change, acme_challenge_change) first, then a
 * snapshot of every routing row in one REPEATABLE READ transaction, so
 * that nothing committed in between is missed. Each
 * notification names a project (or rule); the rows of the projects
 * named while a fetch runs are fetched together next, and only those
 * replace what the model held (pgmodel.h). After every fetch the owner
 * gets a new route source (routes_begin and routes_step, on this loop:
 * the route writer's thread) and, when they changed, the global IP rules
 * (apply_rules). A fetch is applied in slices of about PGSYNC_SLICE_MS,
 * the loop running between them, so that a change of 100,000 rows never
 * holds the loop for long; one apply at a time (the next fetch and the
 * version check wait for it), and what a slice leaves is never seen: the
 * model changes in one slice and the route table in one swap.
 * Every PGSYNC_CHECK_MS the change log is read past the version applied,
 * so that a notification lost anyway is caught up; every
 * PGSYNC_REPORT_MS, and within PGSYNC_REPORT_SOON_MS of a change
 * applied, this host's row in edge_hosts is written (version,
 * applied change version, route generation, XDP counters and rule hits:
 * the owner's report callback). The model is saved to a local file after
 * each change (at most once per PGSYNC_SAVE_MS) and loaded at start, so a
 * host that boots while the database is away serves its last table.
 * While the database is away the last table keeps serving; pgsync_status
 * says so. Loop thread only.
 */
#ifndef EDGE_PGSYNC_H
#define EDGE_PGSYNC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "acme_chal.h"
#include "log.h"
#include "pgmodel.h"
#include "route_src.h"

struct event_base;
struct pgsync;

#define PGSYNC_CHECK_MS 2000
#define PGSYNC_REPORT_MS 5000
#define PGSYNC_SAVE_MS 1000
/* after a change applied, the host's row is written within this */
#define PGSYNC_REPORT_SOON_MS 200
/* how far below the applied version the check looks for changes that
 * committed late and were never notified */
#define PGSYNC_LATE_WINDOW 256
/* projects named by notifications past which a snapshot is cheaper */
#define PGSYNC_FETCH_MAX 1000
/* how long a slice of an apply holds the control loop, at most about */
#define PGSYNC_SLICE_MS 10
/* the local snapshot's writer thread's nice value (at least) */
#define PGSYNC_SAVER_NICE 10

/* A row of the certificates table as fetched (valid for the call only):
 * names its DNS names separated by spaces ("" for none), ocsp_hex the
 * OCSP response in hex ("" for none). */
struct pgsync_cert {
	const char *id;
	const char *names;
	const char *chain_pem;
	const char *key_pem;
	const char *ocsp_hex;
};

/* A row of challenge_keys (migration 0023), as text. */
struct pgsync_chal_key {
	const char *id;
	const char *key_hex;
	const char *signs_from; /* unix seconds */
};

struct pgsync_ops {
	/* The database's projects changed at change version: set[0..n_set)
	 * are what the named projects are now, the projects del[0..n_del)
	 * are gone (both malloc'd arrays, taken in every case: the callee
	 * clears and frees them); all: every project the database has is
	 * in set (a snapshot: any other is gone too); tcp[0..n_tcp) are
	 * every tcp_routes row of the model (valid for the call only).
	 * routes_begin makes the job (*job), routes_step works on it until
	 * deadline_ns (monotonic; 0: to the end), the loop running between
	 * steps: 1 while work is left; 0 once the route table holds the
	 * change; -ESTALE when the table changed under the job (nothing was
	 * applied: the sync applies every project again); another -errno
	 * with err (logged; the next change tries again). A step that
	 * returns 1 keeps the job, any other return frees it;
	 * routes_abort drops one. begin: 0, or -errno with err (no job). */
	int (*routes_begin)(void *arg, struct route_src_project *set,
			    size_t n_set, char **del, size_t n_del, bool all,
			    const struct tcproute_row *tcp, size_t n_tcp,
			    uint64_t version, void **job, struct errbuf *err);
	int (*routes_step)(void *arg, void *job, uint64_t deadline_ns,
			   struct errbuf *err);
	void (*routes_abort)(void *arg, void *job);
	/* The global IP rules (valid for the call only). */
	void (*apply_rules)(void *arg, const struct pgm_rule *v, size_t n,
			    uint64_t version);
	/* Every row of the certificates table, as it is now (fetched at
	 * each connect, after a certificate_change notification and when
	 * the version check finds a certificate change). NULL: not
	 * fetched. */
	void (*apply_certs)(void *arg, const struct pgsync_cert *v, size_t n);
	/* Every row of challenge_keys, read with the certificates (same
	 * times). NULL: not fetched. */
	void (*apply_chal_keys)(void *arg, const struct pgsync_chal_key *v,
				size_t n);
	/* The acme_challenges rows not expired (migration 0026), at most
	 * ACME_CHAL_MAX, each checked (a type that is neither http-01 nor
	 * tls-alpn-01 skipped, logged once): read at every connect, after
	 * every acme_challenge_change notification and once the earliest
	 * of them expired. Valid for the call only. Only when
	 * cfg->acme_challenges (else not LISTENed nor read). */
	void (*apply_acme_chals)(void *arg, const struct acme_chal_row *v,
				 size_t n);
	/* For this host's edge_hosts row: the route generation, the XDP
	 * counters (a new reference) and rule hits (a JSON object's text,
	 * malloc'd), each NULL for none. */
	void (*report)(void *arg, uint64_t *generation, json_t **counters,
		       char **hits);
};

struct pgsync_cfg {
	const char *conninfo;
	const char *host_name;
	const char *version;  /* edge's, for edge_hosts */
	const char *snapshot; /* the local snapshot file; NULL: none */
	/* the model to start from (taken), as read at start while edged was
	 * root (pgplane.h): from the database at initial_version, or from
	 * the local snapshot (initial_from_snapshot); NULL: the sync loads
	 * the local snapshot itself */
	struct pgm *initial;
	uint64_t initial_version;
	bool initial_from_snapshot;
	/* LISTEN acme_challenge_change and read acme_challenges
	 * (ops->apply_acme_chals) */
	bool acme_challenges;
};

enum pgsync_state {
	PGSYNC_CONNECTING = 0, /* not up yet, or again */
	PGSYNC_SYNCING,	       /* up, the snapshot under way */
	PGSYNC_UP,	       /* up and in step */
	PGSYNC_DOWN,	       /* lost: serving the last table */
};

struct pgsync_status {
	enum pgsync_state state;
	bool booted_from_snapshot; /* the table came from the local file */
	uint64_t applied_version;  /* the change version of the table (set
				    * once an apply is done) */
	uint64_t db_version;	   /* the newest the database showed */
	uint64_t changes;	   /* fetches applied (snapshot included) */
	uint64_t snapshots;	   /* of them, snapshots */
	uint64_t reconnects;
	uint64_t errors;	/* queries that failed, applies refused */
	uint64_t late;		/* checks that found changes committed
				 * after a higher version, never notified */
	uint64_t last_apply_ns; /* notification to the table swapped */
	uint64_t since_ns;	/* monotonic ns of the state's start */
	struct pgm_skipped skipped;
	size_t projects;
	uint64_t cert_fetches; /* fetches of the certificates table */
	uint64_t acme_fetches; /* reads of acme_challenges */
	uint64_t acme_skipped; /* its rows skipped (a type unknown) */
	size_t acme_rows;      /* handed over at the last read */
	char last_error[256];
};

/* Start syncing on base (the control loop): the initial model, else the
 * local snapshot if there is one (applied before this returns), and
 * connect. 0 and *out, or -errno with err (a conninfo libpq refuses);
 * cfg->initial is taken in every case. */
int pgsync_new(struct event_base *base, const struct pgsync_cfg *cfg,
	       const struct pgsync_ops *ops, void *arg, struct pgsync **out,
	       struct errbuf *err);

/* Stop (the host's row says database_up false if there is time) and
 * free. NULL is fine. */
void pgsync_free(struct pgsync *s);

void pgsync_status(const struct pgsync *s, struct pgsync_status *st);

/* Hand every project the model holds to the owner again (routes_begin
 * with all set), with no query: after the configuration file changed,
 * so that a name the file no longer claims goes back to the database's
 * project that had given way to it. In slices like any apply; after the
 * one under way, if there is one. */
void pgsync_republish(struct pgsync *s);

/* The address of the database server while connected over TCP (an
 * IPv4-mapped IPv6 peer as IPv4), a /32 or /128 in *out: 0, -ENOTCONN
 * while not connected, -EAFNOSUPPORT over a unix socket. */
int pgsync_peer(const struct pgsync *s, struct cidr *out);

/* "connecting", "syncing", "up", "down". */
const char *pgsync_state_name(enum pgsync_state st);

#endif /* EDGE_PGSYNC_H */
