// SPDX-License-Identifier: BSD-2-Clause
/*
 * pgacme.c - the ACME manager's database store (pgacme.h): leases,
 * challenges and certificates (migration 0026) over a connection of its
 * own, a queue of one statement per call, done callbacks always from a
 * loop turn of their own.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include <openssl/crypto.h>

#include "log.h"
#include "pgacme.h"
#include "pgconn.h"

/*
 * Take name's lease for $2 for $3 seconds: a row inserted, or taken over
 * when it expired or is $2's already (renewed). One row back: whether it
 * was granted, and when the row as it was before the statement expires
 * (unix s, rounded up: the other holder's until; NULL when another host
 * inserted it meanwhile, unseen by this statement's snapshot).
 */
static const char pgacme_lease_sql[] =
    "WITH up AS (INSERT INTO acme_leases (name, holder, expires_at) "
    "VALUES ($1, $2, now() + $3::float8 * interval '1 second') "
    "ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, "
    "expires_at = EXCLUDED.expires_at WHERE acme_leases.expires_at < now() "
    "OR acme_leases.holder = EXCLUDED.holder RETURNING holder) "
    "SELECT (SELECT count(*) FROM up), "
    "(SELECT ceil(extract(epoch FROM expires_at))::bigint FROM acme_leases "
    "WHERE name = $1)";
static const char pgacme_release_sql[] =
    "DELETE FROM acme_leases WHERE name = $1 AND holder = $2";
static const char pgacme_publish_sql[] =
    "INSERT INTO acme_challenges (token, name, type, key_authorization, "
    "holder, expires_at) VALUES ($1, $2, $3, $4, $5, now() + $6::float8 * "
    "interval '1 second') ON CONFLICT (token) DO UPDATE SET name = "
    "EXCLUDED.name, type = EXCLUDED.type, key_authorization = "
    "EXCLUDED.key_authorization, holder = EXCLUDED.holder, expires_at = "
    "EXCLUDED.expires_at";
/* the token's row, and any whose time passed (a host that died before
 * it unpublished) */
static const char pgacme_unpublish_sql[] =
    "DELETE FROM acme_challenges WHERE token = $1 OR expires_at < now()";
/* one row per name (acme_name); an OCSP response of the certificate it
 * replaces is not this one's */
static const char pgacme_save_sql[] =
    "INSERT INTO certificates (names, chain_pem, key_pem, comment, "
    "updated_at, acme_name) VALUES (ARRAY[$1], $2, $3, 'acme', now(), $1) "
    "ON CONFLICT (acme_name) DO UPDATE SET names = EXCLUDED.names, "
    "chain_pem = EXCLUDED.chain_pem, key_pem = EXCLUDED.key_pem, ocsp = "
    "NULL, comment = EXCLUDED.comment, updated_at = now()";

enum pgacme_kind {
	PGACME_LEASE,
	PGACME_RELEASE,
	PGACME_PUBLISH,
	PGACME_UNPUBLISH,
	PGACME_SAVE,
};

#define PGACME_PARAMS 6

struct pgacme_op {
	TAILQ_ENTRY(pgacme_op) link;
	enum pgacme_kind kind;
	char *p[PGACME_PARAMS]; /* the statement's parameters */
	int n;
	unsigned ttl_s;
	/* the caller's done (NULL: none, or forgotten) */
	void (*lease_done)(void *ctx, int rc, int64_t until);
	void (*publish_done)(void *ctx, int rc);
	void (*save_done)(void *ctx, int rc, const char *why);
	void *ctx;
	/* the outcome */
	int rc;
	bool granted, failed;
	int64_t until;
	char why[256];
};

TAILQ_HEAD(pgacme_ops_q, pgacme_op);

struct pgacme {
	struct event_base *base;
	struct pgconn *c;
	struct pgacme_ops_q q;	 /* waiting to be sent */
	struct pgacme_ops_q fin; /* ended, their done due */
	size_t n_q;
	struct pgacme_op *cur; /* the statement running */
	struct event *fin_ev;
	bool down; /* a connect failed or the connection dropped, and it
		      has not come back yet */
};

static void pgacme_next(struct pgacme *a);

static void pgacme_op_free(struct pgacme_op *op)
{
	int i;

	if (!op)
		return;
	for (i = 0; i < op->n; i++) {
		if (op->p[i])
			OPENSSL_cleanse(op->p[i], strlen(op->p[i]));
		free(op->p[i]);
	}
	free(op);
}

static const char *const pgacme_kind_names[] = {
    [PGACME_LEASE] = "a lease",
    [PGACME_RELEASE] = "a lease's release",
    [PGACME_PUBLISH] = "a challenge's publication",
    [PGACME_UNPUBLISH] = "a challenge's removal",
    [PGACME_SAVE] = "a certificate's save",
};

static bool pgacme_has_done(const struct pgacme_op *op)
{
	return op->lease_done || op->publish_done || op->save_done;
}

/* op ended with rc: its done runs from the loop's next turn. */
static void pgacme_finish(struct pgacme *a, struct pgacme_op *op, int rc)
{
	static const struct timeval now = {0, 0};

	op->rc = rc;
	if (!pgacme_has_done(op)) {
		if (rc && rc != -EAGAIN)
			log_warnx_rl("acme: database: %s not done: %s",
				     pgacme_kind_names[op->kind],
				     op->why[0] ? op->why : strerror(-rc));
		pgacme_op_free(op);
		return;
	}
	TAILQ_INSERT_TAIL(&a->fin, op, link);
	evtimer_add(a->fin_ev, &now);
}

/* The done callbacks due, each once. One may call the store again (a
 * call that ends at once waits for the next turn) or forget (the ones
 * after it are dropped). */
static void pgacme_fin_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pgacme *a = arg;
	struct pgacme_op *op;
	size_t n = 0;

	(void)fd;
	(void)what;
	TAILQ_FOREACH(op, &a->fin, link)
	{
		n++;
	}
	while (n-- && (op = TAILQ_FIRST(&a->fin))) {
		TAILQ_REMOVE(&a->fin, op, link);
		if (op->lease_done)
			op->lease_done(
			    op->ctx, op->rc < 0 ? op->rc : op->granted,
			    op->rc < 0 || op->granted ? 0 : op->until);
		else if (op->publish_done)
			op->publish_done(op->ctx, op->rc);
		else if (op->save_done)
			op->save_done(
			    op->ctx, op->rc,
			    op->rc ? (op->why[0] ? op->why : strerror(-op->rc))
				   : NULL);
		pgacme_op_free(op);
	}
}

/* A call: queued, or ended at once (-EAGAIN over the bound, -ENOTCONN
 * while the database is away; a fire-and-forget call waits for it,
 * within the bound). params are copied. */
static void pgacme_add(struct pgacme *a, struct pgacme_op *op,
		       const char *const *params, int n)
{
	int i;

	op->n = n;
	for (i = 0; i < n; i++)
		if (!(op->p[i] = strdup(params[i] ? params[i] : ""))) {
			pgacme_finish(a, op, -ENOMEM);
			return;
		}
	if (a->n_q >= PGACME_QUEUE_MAX) {
		log_warnx_rl("acme: database: %d calls waiting already: "
			     "refused",
			     PGACME_QUEUE_MAX);
		pgacme_finish(a, op, -EAGAIN);
		return;
	}
	if (a->down && pgacme_has_done(op)) {
		snprintf(op->why, sizeof(op->why), "the database is away: %s",
			 pgconn_last_error(a->c));
		pgacme_finish(a, op, -ENOTCONN);
		return;
	}
	TAILQ_INSERT_TAIL(&a->q, op, link);
	a->n_q++;
	pgacme_next(a);
}

static const char *pgacme_sql(enum pgacme_kind k)
{
	switch (k) {
	case PGACME_LEASE:
		return pgacme_lease_sql;
	case PGACME_RELEASE:
		return pgacme_release_sql;
	case PGACME_PUBLISH:
		return pgacme_publish_sql;
	case PGACME_UNPUBLISH:
		return pgacme_unpublish_sql;
	case PGACME_SAVE:
		return pgacme_save_sql;
	}
	return "";
}

/* Send the first call waiting, if the connection is free. */
static void pgacme_next(struct pgacme *a)
{
	struct pgacme_op *op;

	if (a->cur || !pgconn_up(a->c) || pgconn_busy(a->c))
		return;
	op = TAILQ_FIRST(&a->q);
	if (!op)
		return;
	TAILQ_REMOVE(&a->q, op, link);
	a->n_q--;
	a->cur = op;
	if (pgconn_query(a->c, pgacme_sql(op->kind), op->n,
			 (const char *const *)op->p) &&
	    a->cur == op) {
		/* not sent, and not lost (lost took it otherwise) */
		a->cur = NULL;
		TAILQ_INSERT_HEAD(&a->q, op, link);
		a->n_q++;
	}
}

/* ---- the hooks ------------------------------------------------------------
 */

static struct pgacme_op *pgacme_op_new(enum pgacme_kind k)
{
	struct pgacme_op *op = calloc(1, sizeof(*op));

	if (op)
		op->kind = k;
	return op;
}

static int pgacme_lease(void *arg, const char *name, const char *holder,
			unsigned ttl_s,
			void (*done)(void *ctx, int rc, int64_t until),
			void *ctx)
{
	struct pgacme *a = arg;
	struct pgacme_op *op = pgacme_op_new(PGACME_LEASE);
	char ttl[16];
	const char *params[3] = {name, holder, ttl};

	if (!op) {
		log_warnx("acme: database: out of memory: lease of %s not "
			  "asked",
			  name);
		return -ENOMEM;
	}
	op->lease_done = done;
	op->ctx = ctx;
	op->ttl_s = ttl_s;
	snprintf(ttl, sizeof(ttl), "%u", ttl_s);
	pgacme_add(a, op, params, 3);
	return 0;
}

static void pgacme_release(void *arg, const char *name, const char *holder)
{
	struct pgacme *a = arg;
	struct pgacme_op *op = pgacme_op_new(PGACME_RELEASE);
	const char *params[2] = {name, holder};

	if (!op)
		return; /* the lease expires by itself */
	pgacme_add(a, op, params, 2);
}

static int pgacme_publish(void *arg, const struct acme_chal_row *r,
			  const char *holder, unsigned ttl_s,
			  void (*done)(void *ctx, int rc), void *ctx)
{
	struct pgacme *a = arg;
	struct pgacme_op *op = pgacme_op_new(PGACME_PUBLISH);
	char ttl[16];
	const char *params[6] = {r->token,
				 r->name,
				 r->type == ACME_CHAL_TLSALPN01 ? "tls-alpn-01"
								: "http-01",
				 r->key_authorization,
				 holder,
				 ttl};

	if (!op) {
		log_warnx("acme: database: out of memory: challenge for %s "
			  "not published",
			  r->name);
		return -ENOMEM;
	}
	op->publish_done = done;
	op->ctx = ctx;
	op->ttl_s = ttl_s;
	snprintf(ttl, sizeof(ttl), "%u", ttl_s);
	pgacme_add(a, op, params, 6);
	return 0;
}

static void pgacme_unpublish(void *arg, const char *token)
{
	struct pgacme *a = arg;
	struct pgacme_op *op = pgacme_op_new(PGACME_UNPUBLISH);
	const char *params[1] = {token};

	if (!op)
		return; /* the row expires by itself */
	pgacme_add(a, op, params, 1);
}

static int pgacme_save(void *arg, const char *name, const char *chain_pem,
		       const char *key_pem,
		       void (*done)(void *ctx, int rc, const char *why),
		       void *ctx)
{
	struct pgacme *a = arg;
	struct pgacme_op *op = pgacme_op_new(PGACME_SAVE);
	const char *params[3] = {name, chain_pem, key_pem};

	if (!op) {
		log_warnx("acme: database: out of memory: certificate of %s "
			  "not saved",
			  name);
		return -ENOMEM;
	}
	op->save_done = done;
	op->ctx = ctx;
	pgacme_add(a, op, params, 3);
	return 0;
}

static void pgacme_forget_op(struct pgacme_op *op)
{
	op->lease_done = NULL;
	op->publish_done = NULL;
	op->save_done = NULL;
	op->ctx = NULL;
}

static void pgacme_forget(void *arg)
{
	struct pgacme *a = arg;
	struct pgacme_op *op;

	for (op = TAILQ_FIRST(&a->q); op; op = TAILQ_NEXT(op, link))
		pgacme_forget_op(op);
	for (op = TAILQ_FIRST(&a->fin); op; op = TAILQ_NEXT(op, link))
		pgacme_forget_op(op);
	if (a->cur)
		pgacme_forget_op(a->cur);
}

const struct acme_store_ops pgacme_ops = {
    .lease = pgacme_lease,
    .release = pgacme_release,
    .publish = pgacme_publish,
    .unpublish = pgacme_unpublish,
    .save = pgacme_save,
    .forget = pgacme_forget,
};

/* ---- the connection ------------------------------------------------------
 */

static void pgacme_result(struct pgconn *c, PGresult *res, void *arg)
{
	struct pgacme *a = arg;
	struct pgacme_op *op = a->cur;
	const char *msg;

	(void)c;
	if (!op) {
		PQclear(res);
		return;
	}
	if (!res) { /* the statement ended (committed, or not) */
		a->cur = NULL;
		pgacme_finish(a, op, op->failed ? -EIO : 0);
		pgacme_next(a);
		return;
	}
	switch (PQresultStatus(res)) {
	case PGRES_TUPLES_OK:
		if (op->kind == PGACME_LEASE && PQntuples(res) == 1 &&
		    PQnfields(res) == 2) {
			op->granted =
			    strtoll(PQgetvalue(res, 0, 0), NULL, 10) > 0;
			/* NULL: another host's row, inserted meanwhile: it
			 * has it for about as long as this one asked */
			op->until =
			    PQgetisnull(res, 0, 1)
				? (int64_t)time(NULL) + op->ttl_s
				: strtoll(PQgetvalue(res, 0, 1), NULL, 10);
		} else if (op->kind == PGACME_LEASE && !op->failed) {
			op->failed = true;
			snprintf(op->why, sizeof(op->why),
				 "the lease's answer is %d rows of %d columns",
				 PQntuples(res), PQnfields(res));
		}
		break;
	case PGRES_COMMAND_OK:
		break;
	default:
		/* the primary message only: a detail may show the row
		 * ("Failing row contains ..."), a key among it */
		msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
		if (!op->failed) {
			op->failed = true;
			snprintf(op->why, sizeof(op->why), "%s",
				 msg ? msg : "the statement failed");
			if (op->kind == PGACME_SAVE)
				log_warnx("acme: database: the certificate of "
					  "%s not saved: %s",
					  op->p[0], op->why);
			else
				log_warnx_rl("acme: database: %s", op->why);
		}
		break;
	}
	PQclear(res);
}

static void pgacme_notify(struct pgconn *c, const char *channel,
			  const char *payload, void *arg)
{
	(void)c;
	(void)channel;
	(void)payload;
	(void)arg;
}

static void pgacme_ready(struct pgconn *c, void *arg)
{
	struct pgacme *a = arg;

	(void)c;
	if (a->down)
		log_note("acme: database: connected again");
	a->down = false;
	pgacme_next(a);
}

/* The statement running may or may not have committed: it ends
 * -ECONNRESET, and so do the calls waiting with a done (the manager
 * tries again); a release or an unpublish waits for the reconnect (each
 * idempotent). */
static void pgacme_lost(struct pgconn *c, const char *why, void *arg)
{
	struct pgacme *a = arg;
	struct pgacme_ops_q keep = TAILQ_HEAD_INITIALIZER(keep);
	struct pgacme_ops_q fail = TAILQ_HEAD_INITIALIZER(fail);
	struct pgacme_op *op;

	(void)c;
	if (!a->down)
		log_warnx_rl("acme: database: %s", why);
	a->down = true;
	if (a->cur) {
		TAILQ_INSERT_HEAD(&a->q, a->cur, link);
		a->n_q++;
		a->cur = NULL;
	}
	while ((op = TAILQ_FIRST(&a->q))) {
		TAILQ_REMOVE(&a->q, op, link);
		a->n_q--;
		if (pgacme_has_done(op))
			TAILQ_INSERT_TAIL(&fail, op, link);
		else if (op->kind == PGACME_RELEASE ||
			 op->kind == PGACME_UNPUBLISH)
			TAILQ_INSERT_TAIL(&keep, op, link);
		else
			pgacme_op_free(op); /* forgotten */
	}
	TAILQ_FOREACH(op, &keep, link)
	{
		a->n_q++;
	}
	TAILQ_CONCAT(&a->q, &keep, link);
	while ((op = TAILQ_FIRST(&fail))) {
		TAILQ_REMOVE(&fail, op, link);
		snprintf(op->why, sizeof(op->why),
			 "the database connection "
			 "was lost");
		pgacme_finish(a, op, -ECONNRESET);
	}
}

static const struct pgconn_ops pgacme_conn_ops = {
    .ready = pgacme_ready,
    .result = pgacme_result,
    .notify = pgacme_notify,
    .lost = pgacme_lost,
};

int pgacme_new(struct event_base *base, const char *conninfo,
	       struct pgacme **out, struct errbuf *err)
{
	struct pgacme *a = calloc(1, sizeof(*a));
	char buf[256] = "";
	int rc;

	if (!a) {
		errbuf_set(err, "acme: out of memory");
		return -ENOMEM;
	}
	a->base = base;
	TAILQ_INIT(&a->q);
	TAILQ_INIT(&a->fin);
	a->fin_ev = evtimer_new(base, pgacme_fin_cb, a);
	if (!a->fin_ev) {
		free(a);
		errbuf_set(err, "acme: out of memory");
		return -ENOMEM;
	}
	rc = pgconn_new(base, conninfo, "edged acme", &pgacme_conn_ops, a,
			&a->c, buf, sizeof(buf));
	if (rc) {
		errbuf_set(err, "pg: %s", buf[0] ? buf : strerror(-rc));
		event_free(a->fin_ev);
		free(a);
		return rc;
	}
	*out = a;
	return 0;
}

bool pgacme_up(const struct pgacme *a)
{
	return a && pgconn_up(a->c);
}

void pgacme_free(struct pgacme *a)
{
	struct pgacme_op *op;

	if (!a)
		return;
	pgconn_free(a->c);
	pgacme_op_free(a->cur);
	while ((op = TAILQ_FIRST(&a->q))) {
		TAILQ_REMOVE(&a->q, op, link);
		pgacme_op_free(op);
	}
	while ((op = TAILQ_FIRST(&a->fin))) {
		TAILQ_REMOVE(&a->fin, op, link);
		pgacme_op_free(op);
	}
	event_free(a->fin_ev);
	free(a);
}
