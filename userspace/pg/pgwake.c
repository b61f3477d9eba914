// SPDX-License-Identifier: BSD-2-Clause
/*
 * pgwake.c - the database's side of the wake protocol (pgwake.h,
 * docs/wake.md "Database mode"): its own connection, so that a wake
 * never waits behind a snapshot of the routes, with a queue of the
 * statements wake asks for, each one statement (one transaction).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "log.h"
#include "pgconn.h"
#include "pgwake.h"
#include "wake.h"

/*
 * The conditional state change, the row and the NOTIFY in one statement
 * (one transaction), and one row back: the row's id (NULL when another
 * host has the environment waking, or it is not sleeping, or the
 * fleet's back-off after a failed wake runs: its wake_retry_at still
 * ahead, migration 0013), the NOTIFY, the stale
 * rows closed, the milliseconds left of the back-off that kept this
 * host from winning (NULL: none), and the environment's failed wakes in
 * a row. The row carries this host's wake.retry_max ($4), which the
 * trigger caps the back-off with if the wake fails. A wake another host asked
 * for and never finished (it died: its open row is older than $3 ms,
 * wake.timeout plus PGWAKE_STALE_MARGIN_MS, and the environment still
 * waking) is taken over: its row closed as 'stale' (migration 0011; the
 * trigger leaves the environment waking and tells the hosts nothing
 * they act on), and the environment's wake asked for anew by this host.
 * Of several hosts taking it over at once exactly one wins: the others'
 * update of the old row waits for its lock and finds it no longer open,
 * so their environment update does not match.
 */
static const char pgwake_ask_sql[] =
    "WITH stale AS (UPDATE wake_requests SET state = 'stale', "
    "finished_at = now(), error = 'its host stopped answering: taken "
    "over by ' || $2 "
    "WHERE environment_id = $1 AND state IN ('pending', 'started') "
    "AND requested_at < now() - $3::float8 * interval '1 millisecond' "
    "AND EXISTS (SELECT 1 FROM environments e WHERE e.id = $1 "
    "AND e.state = 'waking') RETURNING id), "
    "won AS (UPDATE environments SET state = 'waking' "
    "WHERE id = $1 AND ((state = 'sleeping' AND (wake_retry_at IS NULL OR "
    "wake_retry_at <= now())) OR "
    "(state = 'waking' AND EXISTS (SELECT 1 FROM stale))) RETURNING id), "
    "req AS (INSERT INTO wake_requests (environment_id, requested_by, "
    "retry_max_ms) SELECT id, $2, $4::bigint FROM won "
    "RETURNING id, environment_id) "
    "SELECT (SELECT id FROM req), "
    "(SELECT pg_notify('environment_wake', environment_id || ' ' || id) "
    "FROM req), (SELECT string_agg(id::text, ',') FROM stale), "
    "(SELECT ceil(extract(epoch FROM e.wake_retry_at - now()) * 1000) "
    "FROM environments e WHERE e.id = $1 AND e.state = 'sleeping' "
    "AND e.wake_retry_at > now() AND NOT EXISTS (SELECT 1 FROM won)), "
    "(SELECT e.wake_failures FROM environments e WHERE e.id = $1)";
/*
 * The woken endpoint failed its first request on this host: the fleet's
 * wake failed. Running (the orchestrator said so): sleeping with its
 * back-off (wake_retry_at, capped by this host's wake.retry_max, $2),
 * and the other hosts told to back off too (NOTIFY
 * environment_wake_failed, 'ENV_ID RETRY_MS HOST': $3, this host, which
 * ignores its own). Still waking (the port opened before the
 * orchestrator's answer): its open row failed, which migration 0013's
 * trigger turns into the same and a wake_request_change 'failed' for
 * every host. Either way the orchestrator is told to stop what it
 * started (NOTIFY environment_sleep), so that the next wake starts it
 * afresh. Nothing when another host's verdict came first (neither
 * running nor waking).
 */
static const char pgwake_failed_sql[] =
    "WITH r AS (UPDATE wake_requests SET state = 'failed', "
    "finished_at = now(), error = 'its endpoint failed its first request "
    "on ' || $3 WHERE environment_id = $1 AND state IN ('pending', "
    "'started') AND EXISTS (SELECT 1 FROM environments e WHERE e.id = $1 "
    "AND e.state = 'waking') RETURNING id), "
    "f AS (UPDATE environments SET state = 'sleeping', "
    "wake_failures = wake_failures + 1, wake_retry_at = now() + "
    "least(1000 * power(2, least(wake_failures, 20)), $2::float8) * "
    "interval '1 millisecond' WHERE id = $1 AND state = 'running' "
    "RETURNING id, wake_retry_at) "
    "SELECT pg_notify('environment_sleep', $1), "
    "(SELECT pg_notify('environment_wake_failed', id || ' ' || "
    "ceil(extract(epoch FROM wake_retry_at - now()) * 1000)::bigint || "
    "' ' || $3) FROM f) "
    "WHERE EXISTS (SELECT 1 FROM r) OR EXISTS (SELECT 1 FROM f)";
/* A wake that followed failed ones served its first request: the count
 * starts over. */
static const char pgwake_confirmed_sql[] =
    "UPDATE environments SET wake_failures = 0 "
    "WHERE id = $1 AND wake_failures <> 0";
/* An open row edge gave up on (its trigger puts the environment back to
 * sleeping and tells every host). */
static const char pgwake_gave_up_sql[] =
    "UPDATE wake_requests SET state = 'timeout', finished_at = now(), "
    "error = 'edge gave up waiting (wake.timeout)' "
    "WHERE id = $1 AND state IN ('pending', 'started')";
/* The host whose update wins sends the sleep, when no other host had
 * the environment active within its idle timeout (plus the batching's
 * slack, PGWAKE_ACTIVITY_SLACK_MS). One row: won (the sleep sent), and
 * whether the environment was running (lost to another host's activity:
 * this host tries again later; not running: nothing to do). */
static const char pgwake_sleep_sql[] =
    "WITH s AS (UPDATE environments SET state = 'sleeping', "
    "wake_failures = 0 WHERE id = $1 AND state = 'running' AND NOT EXISTS ("
    "SELECT 1 FROM environment_activity a WHERE a.environment_id = $1 "
    "AND a.edge_host <> $2 AND (a.open_tunnels > 0 OR a.last_activity > "
    "now() - $3::float8 * interval '1 millisecond')) RETURNING id), "
    "n AS (SELECT pg_notify('environment_sleep', id) FROM s) "
    "SELECT (SELECT count(*) FROM n) > 0, EXISTS (SELECT 1 FROM "
    "environments WHERE id = $1 AND state = 'running')";
/* This host's activity rows, batched (an environment deleted meanwhile
 * is left out rather than failing the batch). */
static const char pgwake_activity_sql[] =
    "INSERT INTO environment_activity (environment_id, edge_host, "
    "last_activity, open_tunnels) "
    "SELECT u.id, $4, to_timestamp(u.ts), u.tun "
    "FROM unnest($1::text[], $2::float8[], $3::int[]) AS u(id, ts, tun) "
    "JOIN environments e ON e.id = u.id "
    "ON CONFLICT (environment_id, edge_host) DO UPDATE SET "
    "last_activity = EXCLUDED.last_activity, "
    "open_tunnels = EXCLUDED.open_tunnels";
/* An open wake_requests row older than wake.timeout plus this is a dead
 * host's: every live host gives its row up at its own wake.timeout. */
#define PGWAKE_STALE_MARGIN_MS 2000
/* Another host's activity is written at most every WAKE_ACTIVITY_MS:
 * it counts for that much longer, twice over. */
#define PGWAKE_ACTIVITY_SLACK_MS (2 * WAKE_ACTIVITY_MS)

enum pgwake_kind {
	PGWAKE_LISTEN,
	PGWAKE_ASK,
	PGWAKE_GAVE_UP,
	PGWAKE_SLEEP,
	PGWAKE_ACTIVITY,
	PGWAKE_FAILED,
	PGWAKE_CONFIRMED,
};

struct pgwake_op {
	TAILQ_ENTRY(pgwake_op) link;
	enum pgwake_kind kind;
	char env[CONFIG_ID_MAX + 1];
	uint64_t seq;	       /* ASK */
	int64_t req;	       /* GAVE_UP: the row; ASK: the answer */
	uint64_t retry_ms;     /* ASK: the fleet's back-off left */
	uint64_t failures;     /* ASK: the fleet's failed wakes in a row */
	uint64_t retry_max_ms; /* FAILED */
	bool failed;	       /* the statement failed */
	bool answered;	       /* a row came back */
	bool lost;	       /* a sleep lost to another host's activity */
	uint64_t idle_ms;      /* SLEEP */
	char *arr[3]; /* ACTIVITY: ids, times, tunnels (array literals) */
};

TAILQ_HEAD(pgwake_ops, pgwake_op);

struct pgwake {
	struct pgconn *c;
	struct wake *wk;
	char host[256];
	struct pgwake_ops q;
	struct pgwake_op *cur; /* running */
	bool listening;
};

int pgwake_parse_change(const char *payload, char *env, size_t envlen,
			int64_t *req, char *state, size_t statelen)
{
	const char *a, *b;
	char *end;
	long long v;

	if (!payload || !(a = strchr(payload, ' ')) || a == payload ||
	    (size_t)(a - payload) >= envlen)
		return -EINVAL;
	errno = 0;
	if (a[1] < '1' || a[1] > '9')
		return -EINVAL;
	v = strtoll(a + 1, &end, 10);
	if (errno || end == a + 1 || *end != ' ' || v <= 0)
		return -EINVAL;
	b = end + 1;
	if (!*b || strchr(b, ' ') || strlen(b) >= statelen)
		return -EINVAL;
	memcpy(env, payload, (size_t)(a - payload));
	env[a - payload] = '\0';
	*req = v;
	snprintf(state, statelen, "%s", b);
	return 0;
}

int pgwake_parse_failed(const char *payload, char *env, size_t envlen,
			uint64_t *retry_ms, char *host, size_t hostlen)
{
	const char *a, *b;
	char *end;
	unsigned long long v;

	if (!payload || !(a = strchr(payload, ' ')) || a == payload ||
	    (size_t)(a - payload) >= envlen || a[1] < '0' || a[1] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(a + 1, &end, 10);
	if (errno || *end != ' ' || v > PGWAKE_RETRY_MS_MAX)
		return -EINVAL;
	b = end + 1;
	if (!*b || strlen(b) >= hostlen)
		return -EINVAL;
	memcpy(env, payload, (size_t)(a - payload));
	env[a - payload] = '\0';
	*retry_ms = v;
	snprintf(host, hostlen, "%s", b);
	return 0;
}

static void pgwake_next(struct pgwake *pw)
{
	struct pgwake_op *op;
	char req[24], cap[24];
	const char *params[4];
	const char *sql;
	int n, rc;

	if (pw->cur || !pgconn_up(pw->c) || pgconn_busy(pw->c))
		return;
	op = TAILQ_FIRST(&pw->q);
	if (!op)
		return;
	switch (op->kind) {
	case PGWAKE_LISTEN:
		sql = "LISTEN wake_request_change; "
		      "LISTEN environment_wake_failed";
		n = 0;
		break;
	case PGWAKE_ASK:
		snprintf(req, sizeof(req), "%llu",
			 (unsigned long long)(wake_timeout_ms(pw->wk) +
					      PGWAKE_STALE_MARGIN_MS));
		snprintf(cap, sizeof(cap), "%llu",
			 (unsigned long long)wake_retry_max_ms(pw->wk));
		sql = pgwake_ask_sql;
		params[0] = op->env;
		params[1] = pw->host;
		params[2] = req;
		params[3] = cap;
		n = 4;
		break;
	case PGWAKE_FAILED:
		snprintf(cap, sizeof(cap), "%llu",
			 (unsigned long long)op->retry_max_ms);
		sql = pgwake_failed_sql;
		params[0] = op->env;
		params[1] = cap;
		params[2] = pw->host;
		n = 3;
		break;
	case PGWAKE_CONFIRMED:
		sql = pgwake_confirmed_sql;
		params[0] = op->env;
		n = 1;
		break;
	case PGWAKE_GAVE_UP:
		snprintf(req, sizeof(req), "%lld", (long long)op->req);
		sql = pgwake_gave_up_sql;
		params[0] = req;
		n = 1;
		break;
	case PGWAKE_SLEEP:
		snprintf(req, sizeof(req), "%llu",
			 (unsigned long long)(op->idle_ms +
					      PGWAKE_ACTIVITY_SLACK_MS));
		sql = pgwake_sleep_sql;
		params[0] = op->env;
		params[1] = pw->host;
		params[2] = req;
		n = 3;
		break;
	default:
		sql = pgwake_activity_sql;
		params[0] = op->arr[0];
		params[1] = op->arr[1];
		params[2] = op->arr[2];
		params[3] = pw->host;
		n = 4;
		break;
	}
	rc = pgconn_query(pw->c, sql, n, n ? params : NULL);
	if (rc == 0) {
		TAILQ_REMOVE(&pw->q, op, link);
		pw->cur = op;
	}
	/* else: lost follows (or the next ready sends it) */
}

static struct pgwake_op *pgwake_op_new(struct pgwake *pw, enum pgwake_kind k,
				       const char *env)
{
	struct pgwake_op *op = calloc(1, sizeof(*op));

	if (!op)
		return NULL;
	op->kind = k;
	snprintf(op->env, sizeof(op->env), "%s", env ? env : "");
	(void)pw;
	return op;
}

/* ---- what wake asks ------------------------------------------------------ */

static int pgwake_ask(void *arg, const char *env_id, uint64_t seq)
{
	struct pgwake *pw = arg;
	struct pgwake_op *op;

	if (!pgconn_up(pw->c))
		return -ENOTCONN;
	op = pgwake_op_new(pw, PGWAKE_ASK, env_id);
	if (!op)
		return -ENOMEM;
	op->seq = seq;
	TAILQ_INSERT_TAIL(&pw->q, op, link);
	pgwake_next(pw);
	return 0;
}

static void pgwake_gave_up(void *arg, const char *env_id, int64_t req_id)
{
	struct pgwake *pw = arg;
	struct pgwake_op *op = pgwake_op_new(pw, PGWAKE_GAVE_UP, env_id);

	if (!op) {
		log_warnx("environment %s: wake request %lld not marked "
			  "timeout: out of memory",
			  env_id, (long long)req_id);
		return;
	}
	op->req = req_id;
	TAILQ_INSERT_TAIL(&pw->q, op, link);
	pgwake_next(pw);
}

static void pgwake_failed(void *arg, const char *env_id, uint64_t retry_max_ms)
{
	struct pgwake *pw = arg;
	struct pgwake_op *op = pgwake_op_new(pw, PGWAKE_FAILED, env_id);

	if (!op) {
		log_warnx("environment %s: its failed wake not sent: out of "
			  "memory",
			  env_id);
		return;
	}
	op->retry_max_ms = retry_max_ms;
	TAILQ_INSERT_TAIL(&pw->q, op, link);
	pgwake_next(pw);
}

static void pgwake_confirmed(void *arg, const char *env_id)
{
	struct pgwake *pw = arg;
	struct pgwake_op *op = pgwake_op_new(pw, PGWAKE_CONFIRMED, env_id);

	if (!op)
		return; /* the fleet's count stays: a longer back-off at worst
			 */
	TAILQ_INSERT_TAIL(&pw->q, op, link);
	pgwake_next(pw);
}

static void pgwake_sleep(void *arg, const char *env_id, uint64_t idle_ms)
{
	struct pgwake *pw = arg;
	struct pgwake_op *op = pgwake_op_new(pw, PGWAKE_SLEEP, env_id);

	if (!op) {
		log_warnx("environment %s: its sleep not sent: out of memory",
			  env_id);
		return;
	}
	op->idle_ms = idle_ms;
	TAILQ_INSERT_TAIL(&pw->q, op, link);
	pgwake_next(pw);
}

static void pgwake_op_free(struct pgwake_op *op)
{
	if (!op)
		return;
	free(op->arr[0]);
	free(op->arr[1]);
	free(op->arr[2]);
	free(op);
}

/* v[0..n) as three PostgreSQL array literals (ids are letters, digits,
 * '.', '_', '-': nothing to quote). */
static int pgwake_arrays(const struct wake_activity *v, size_t n, char **arr)
{
	size_t i,
	    cap[3] = {n * (CONFIG_ID_MAX + 1) + 3, n * 24 + 3, n * 21 + 3};
	size_t len[3] = {0, 0, 0};
	int k;

	for (k = 0; k < 3; k++) {
		arr[k] = malloc(cap[k]);
		if (!arr[k])
			return -ENOMEM;
		arr[k][len[k]++] = '{';
	}
	for (i = 0; i < n; i++) {
		const char *sep = i ? "," : "";

		len[0] += (size_t)snprintf(arr[0] + len[0], cap[0] - len[0],
					   "%s%s", sep, v[i].id);
		len[1] += (size_t)snprintf(
		    arr[1] + len[1], cap[1] - len[1], "%s%llu.%03llu", sep,
		    (unsigned long long)(v[i].last_real_ns / 1000000000ULL),
		    (unsigned long long)(v[i].last_real_ns / 1000000ULL %
					 1000));
		len[2] += (size_t)snprintf(
		    arr[2] + len[2], cap[2] - len[2], "%s%llu", sep,
		    (unsigned long long)(v[i].tunnels > INT32_MAX
					     ? INT32_MAX
					     : v[i].tunnels));
	}
	for (k = 0; k < 3; k++)
		snprintf(arr[k] + len[k], cap[k] - len[k], "}");
	return 0;
}

static int pgwake_activity(void *arg, const struct wake_activity *v, size_t n)
{
	struct pgwake *pw = arg;
	struct pgwake_op *op, *o;

	/* not connected, or a batch still queued: refused, offered again
	 * with the next (news since included) */
	if (!pgconn_up(pw->c))
		return -ENOTCONN;
	TAILQ_FOREACH(o, &pw->q, link)
	if (o->kind == PGWAKE_ACTIVITY)
		return -EBUSY;
	op = pgwake_op_new(pw, PGWAKE_ACTIVITY, NULL);
	if (!op || pgwake_arrays(v, n, op->arr)) {
		pgwake_op_free(op);
		log_warnx_rl("database: environment_activity not written: out "
			     "of memory");
		return -ENOMEM;
	}
	TAILQ_INSERT_TAIL(&pw->q, op, link);
	pgwake_next(pw);
	return 0;
}

static const struct wake_db_ops pgwake_wake_ops = {
    .ask = pgwake_ask,
    .gave_up = pgwake_gave_up,
    .failed = pgwake_failed,
    .confirmed = pgwake_confirmed,
    .sleep = pgwake_sleep,
    .activity = pgwake_activity,
};

/* ---- the connection ------------------------------------------------------ */

/* op ended (answered, failed or lost: err): tell wake, free it. */
static void pgwake_done(struct pgwake *pw, struct pgwake_op *op, int err)
{
	switch (op->kind) {
	case PGWAKE_LISTEN:
		if (!err)
			pw->listening = true;
		break;
	case PGWAKE_ASK:
		wake_db_asked(pw->wk, op->env, op->seq, err ? 0 : op->req, err,
			      op->retry_ms, op->failures);
		break;
	case PGWAKE_FAILED:
		if (err)
			log_warnx("environment %s: its failed wake not sent to "
				  "the database: %s",
				  op->env, strerror(-err));
		else if (op->answered)
			log_note("environment %s: its wake failed in the "
				 "database: asleep there, backing off (NOTIFY "
				 "environment_sleep)",
				 op->env);
		break;
	case PGWAKE_CONFIRMED:
		if (err)
			log_warnx("environment %s: its served wake not sent to "
				  "the database: %s",
				  op->env, strerror(-err));
		break;
	case PGWAKE_GAVE_UP:
		if (err)
			log_warnx("environment %s: wake request %lld not "
				  "marked timeout: %s",
				  op->env, (long long)op->req, strerror(-err));
		break;
	case PGWAKE_SLEEP:
		if (err)
			log_warnx("environment %s: its sleep not sent to the "
				  "database: %s",
				  op->env, strerror(-err));
		else if (op->answered)
			log_note("environment %s: asleep in the database "
				 "(NOTIFY environment_sleep)",
				 op->env);
		else if (op->lost) {
			/* once, not every WAKE_SLEEP_RETRY_MS for as long
			 * as another host keeps it busy */
			uint64_t n = wake_db_sleep_lost(pw->wk, op->env);

			if (n == 1)
				log_note("environment %s: left running in the "
					 "database (another host was active "
					 "within its idle timeout): trying "
					 "again every %d ms while idle here",
					 op->env, WAKE_SLEEP_RETRY_MS);
			else
				log_debug("environment %s: left running in "
					  "the database: sleep %llu lost",
					  op->env, (unsigned long long)n);
		} else
			log_note("environment %s: not running in the "
				 "database: no sleep to send",
				 op->env);
		break;
	case PGWAKE_ACTIVITY:
		if (err)
			log_warnx_rl("database: environment_activity not "
				     "written: %s",
				     strerror(-err));
		break;
	}
	pgwake_op_free(op);
}

/* Column col of res's first row as a count (NULL, negative or not a
 * number: 0). */
static uint64_t pgwake_u64(PGresult *res, int col)
{
	const char *v = PQgetvalue(res, 0, col);
	char *end;
	double d;

	if (PQgetisnull(res, 0, col))
		return 0;
	d = strtod(v, &end);
	if (end == v || !(d > 0) || d > 1e15)
		return 0;
	return (uint64_t)d;
}

static void pgwake_result(struct pgconn *c, PGresult *res, void *arg)
{
	struct pgwake *pw = arg;
	struct pgwake_op *op = pw->cur;

	(void)c;
	if (!op) {
		PQclear(res);
		return;
	}
	if (!res) {
		pw->cur = NULL;
		pgwake_done(pw, op, op->failed ? -EIO : 0);
		pgwake_next(pw);
		return;
	}
	switch (PQresultStatus(res)) {
	case PGRES_TUPLES_OK:
		if (PQntuples(res) >= 1) {
			op->answered = true;
			if (op->kind == PGWAKE_SLEEP) {
				/* (won, was running) */
				op->answered = PQgetvalue(res, 0, 0)[0] == 't';
				op->lost = !op->answered &&
					   PQnfields(res) > 1 &&
					   PQgetvalue(res, 0, 1)[0] == 't';
			}
			if (op->kind == PGWAKE_ASK) {
				/* NULL: not won (0) */
				op->req =
				    strtoll(PQgetvalue(res, 0, 0), NULL, 10);
				if (PQnfields(res) > 4) {
					op->retry_ms = pgwake_u64(res, 3);
					op->failures = pgwake_u64(res, 4);
				}
				if (PQnfields(res) > 2 &&
				    !PQgetisnull(res, 0, 2))
					log_warnx("environment %s: wake "
						  "request %s of a host that "
						  "stopped answering closed "
						  "as stale: its wake taken "
						  "over",
						  op->env,
						  PQgetvalue(res, 0, 2));
			}
		}
		break;
	case PGRES_COMMAND_OK:
		break;
	default:
		if (!op->failed)
			log_warnx("database: wake protocol: %s",
				  PQresultErrorMessage(res));
		op->failed = true;
		break;
	}
	PQclear(res);
}

static void pgwake_notify(struct pgconn *c, const char *channel,
			  const char *payload, void *arg)
{
	struct pgwake *pw = arg;
	char env[CONFIG_ID_MAX + 1], state[32];
	int64_t req;

	(void)c;
	if (strcmp(channel, "environment_wake_failed") == 0) {
		char host[sizeof(pw->host)];
		uint64_t ms;

		if (pgwake_parse_failed(payload, env, sizeof(env), &ms, host,
					sizeof(host))) {
			log_warnx_rl("database: environment_wake_failed "
				     "payload \"%.80s\" is not \"ENV_ID "
				     "RETRY_MS HOST\": ignored",
				     payload);
			return;
		}
		if (strcmp(host, pw->host) != 0) /* not its own */
			wake_db_failed(pw->wk, env, ms);
		return;
	}
	if (strcmp(channel, "wake_request_change") != 0)
		return;
	if (pgwake_parse_change(payload, env, sizeof(env), &req, state,
				sizeof(state))) {
		log_warnx_rl("database: wake_request_change payload \"%.80s\" "
			     "is not \"ENV_ID REQUEST_ID STATE\": ignored",
			     payload);
		return;
	}
	wake_db_changed(pw->wk, env, req, state);
}

static void pgwake_ready(struct pgconn *c, void *arg)
{
	struct pgwake *pw = arg;
	struct pgwake_op *op = pgwake_op_new(pw, PGWAKE_LISTEN, NULL);

	(void)c;
	pw->listening = false;
	if (op)
		TAILQ_INSERT_HEAD(&pw->q, op, link);
	pgwake_next(pw);
}

static void pgwake_lost(struct pgconn *c, const char *why, void *arg)
{
	struct pgwake *pw = arg;
	struct pgwake_op *op;
	struct pgwake_ops keep = TAILQ_HEAD_INITIALIZER(keep);
	struct pgwake_ops fail = TAILQ_HEAD_INITIALIZER(fail);

	(void)c;
	if (pw->listening)
		log_warnx_rl("database: wake connection lost: %s", why);
	pw->listening = false;
	/* the statement running may or may not have committed: an ask is
	 * answered failed (a row it won times out with its wake: the
	 * orchestrator may still start the environment, and the probe
	 * would see it, but nobody here knows its id), a give-up or a
	 * sleep is sent again (they are idempotent) */
	if (pw->cur) {
		TAILQ_INSERT_HEAD(&pw->q, pw->cur, link);
		pw->cur = NULL;
	}
	while ((op = TAILQ_FIRST(&pw->q))) {
		TAILQ_REMOVE(&pw->q, op, link);
		if (op->kind == PGWAKE_ASK)
			TAILQ_INSERT_TAIL(&fail, op, link);
		else if (op->kind == PGWAKE_LISTEN ||
			 op->kind == PGWAKE_ACTIVITY)
			pgwake_op_free(op); /* the next batch says it */
		else
			TAILQ_INSERT_TAIL(&keep, op, link);
	}
	TAILQ_CONCAT(&pw->q, &keep, link);
	while ((op = TAILQ_FIRST(&fail))) {
		TAILQ_REMOVE(&fail, op, link);
		pgwake_done(pw, op, -ECONNRESET);
	}
}

static const struct pgconn_ops pgwake_conn_ops = {
    .ready = pgwake_ready,
    .result = pgwake_result,
    .notify = pgwake_notify,
    .lost = pgwake_lost,
};

int pgwake_new(struct event_base *base, const char *conninfo,
	       const char *host_name, struct wake *wk, struct pgwake **out,
	       char *err, size_t errlen)
{
	struct pgwake *pw = calloc(1, sizeof(*pw));
	int rc;

	if (!pw)
		return -ENOMEM;
	pw->wk = wk;
	snprintf(pw->host, sizeof(pw->host), "%s", host_name ? host_name : "");
	TAILQ_INIT(&pw->q);
	rc = pgconn_new(base, conninfo, "edged wake", &pgwake_conn_ops, pw,
			&pw->c, err, errlen);
	if (rc) {
		free(pw);
		return rc;
	}
	wake_set_db(wk, &pgwake_wake_ops, pw);
	*out = pw;
	return 0;
}

bool pgwake_up(const struct pgwake *pw)
{
	return pw && pw->listening;
}

void pgwake_free(struct pgwake *pw)
{
	struct pgwake_op *op;

	if (!pw)
		return;
	pgconn_free(pw->c);
	pgwake_op_free(pw->cur);
	while ((op = TAILQ_FIRST(&pw->q))) {
		TAILQ_REMOVE(&pw->q, op, link);
		pgwake_op_free(op);
	}
	free(pw);
}
