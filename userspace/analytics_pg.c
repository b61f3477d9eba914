/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * analytics_pg.c - Record: the PostgreSQL sink (analytics_pg.h).
 *
 * The connection is libpq's, non-blocking, waited on with poll(2) and a
 * deadline, so that no call can hang the writer thread: connect
 * (PQconnectStartParams/PQconnectPoll), then one session set-up
 * (statement_timeout, the temporary table), then per batch one query
 * string "COPY ... FROM STDIN; INSERT ... SELECT ... ON CONFLICT DO
 * NOTHING", the rows sent as COPY data in between. A query string of
 * several statements runs as one implicit transaction, so the COPY and
 * the INSERT commit together or not at all, and the temporary table is
 * empty again after either (ON COMMIT DELETE ROWS, or the rollback).
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "analytics_pg.h"
#include "log.h"

/* The temporary table's columns, which are also the COPY's, and what
 * each becomes in request_events. edge_host is the sink's, not a row's. */
#define PG_COLUMNS                                                             \
	"request_id, time, kind, project_id, environment_id, deployment_id, "  \
	"host, method, path, status, bytes_in, bytes_out, duration_us, "       \
	"upstream_us, client_ip, user_agent, referrer, tls_version, outcome, " \
	"mover, tls_cipher, tls_resumed, cold_start_ms, upstream_addr, "       \
	"upstream_status, http_version, challenge, auth, trace_id, span_id, "  \
	"attempts"

#define PG_SETUP                                                               \
	"SET statement_timeout = %d; "                                         \
	"CREATE TEMPORARY TABLE edge_analytics_in ("                           \
	"request_id text, time timestamptz, kind text, project_id text, "      \
	"environment_id text, deployment_id text, host text, method text, "    \
	"path text, status integer, bytes_in bigint, bytes_out bigint, "       \
	"duration_us bigint, upstream_us bigint, client_ip text, "             \
	"user_agent text, referrer text, tls_version text, outcome text, "     \
	"mover text, tls_cipher text, tls_resumed boolean, "                   \
	"cold_start_ms integer, upstream_addr text, upstream_status integer, " \
	"http_version text, challenge text, auth text, trace_id text, "        \
	"span_id text, attempts smallint) "                                    \
	"ON COMMIT DELETE ROWS"

#define PG_BATCH                                                               \
	"COPY edge_analytics_in (" PG_COLUMNS ") FROM STDIN; "                 \
	"INSERT INTO request_events (edge_host, " PG_COLUMNS ") "              \
	"SELECT %s, " PG_COLUMNS " FROM edge_analytics_in "                    \
	"ON CONFLICT (request_id) DO NOTHING"

/* COPY data is handed to libpq in pieces of this size. */
#define PG_COPY_CHUNK 65536

struct pg_sink {
	char *conninfo;
	char *edge_host;
	char *batch_sql; /* PG_BATCH with edge_host quoted: per connection */
	PGconn *conn;
	char *buf;
	size_t cap;
	_Atomic uint64_t duplicates, rejected, connects;
};

/* ---- COPY text ---------------------------------------------------------- */

size_t analytics_pg_copy_text(const char *s, bool null_if_empty, char *out)
{
	size_t n = strlen(s), i = 0, o = 0, k;

	if (n == 0) {
		if (!null_if_empty)
			return 0;
		memcpy(out, "\\N", 2);
		return 2;
	}
	while (i < n) {
		k = analytics_utf8_seq(s + i, n - i);
		if (k == 0) {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
			continue;
		}
		if (k == 1) {
			char c = s[i], e = 0;

			switch (c) {
			case '\\':
				e = '\\';
				break;
			case '\n':
				e = 'n';
				break;
			case '\r':
				e = 'r';
				break;
			case '\t':
				e = 't';
				break;
			default:
				break;
			}
			if (e) {
				out[o++] = '\\';
				out[o++] = e;
			} else {
				out[o++] = c;
			}
			i++;
			continue;
		}
		memcpy(out + o, s + i, k);
		o += k;
		i += k;
	}
	return o;
}

/* Every string field at its largest, each byte 3: what the row needs at
 * most, besides the numbers (7 of at most 20 digits), the time (32), the
 * kind and the outcome (64), the tabs and the newline (64). */
#define PG_FIELD_BYTES(id, member, size) +((size)-1)
#define PG_ROW_STRINGS (3 * (0 ANALYTICS_STRINGS(PG_FIELD_BYTES)))
_Static_assert(PG_ROW_STRINGS + 7 * 21 + 32 + 64 + 64 < ANALYTICS_PG_ROW_MAX,
	       "ANALYTICS_PG_ROW_MAX too small for a row");

/* An unsigned value as a bigint (clamped: a column is signed). */
static size_t pg_bigint(char *out, uint64_t v)
{
	if (v > (uint64_t)INT64_MAX)
		v = (uint64_t)INT64_MAX;
	return (size_t)sprintf(out, "%llu", (unsigned long long)v);
}

/* Unix nanoseconds as timestamptz text in UTC, to the microsecond. */
static size_t pg_time(char *out, uint64_t ns)
{
	time_t sec = (time_t)(ns / 1000000000ULL);
	struct tm tm;
	size_t n;

	if (!gmtime_r(&sec, &tm))
		return (size_t)sprintf(out, "\\N");
	n = strftime(out, 32, "%Y-%m-%d %H:%M:%S", &tm);
	return n + (size_t)sprintf(out + n, ".%06u+00",
				   (unsigned)(ns % 1000000000ULL / 1000));
}

size_t analytics_pg_row(const struct analytics_event *ev, char *out)
{
	const char *kind =
	    ev->kind == ANALYTICS_KIND_TUNNEL ? "tunnel" : "request";
	const char *outcome = outcome_name((enum outcome)ev->outcome);
	size_t o = 0;

#define PG_TEXT(f, null)                                                       \
	do {                                                                   \
		o += analytics_pg_copy_text(                                   \
		    analytics_event_get(ev, ANALYTICS_F_##f), (null),          \
		    out + o);                                                  \
		out[o++] = '\t';                                               \
	} while (0)
	/* request_id is NOT NULL: an empty one is written as '' */
	PG_TEXT(REQUEST_ID, false);
	o += pg_time(out + o, ev->time_ns);
	out[o++] = '\t';
	o += analytics_pg_copy_text(kind, false, out + o);
	out[o++] = '\t';
	PG_TEXT(PROJECT_ID, true);
	PG_TEXT(ENVIRONMENT_ID, true);
	PG_TEXT(DEPLOYMENT_ID, true);
	PG_TEXT(HOST, true);
	PG_TEXT(METHOD, true);
	PG_TEXT(PATH, true);
	/* status is a smallint; edge's never leave 100..599 */
	if (ev->status <= 32767)
		o += (size_t)sprintf(out + o, "%u\t", (unsigned)ev->status);
	else
		o += (size_t)sprintf(out + o, "\\N\t");
	o += pg_bigint(out + o, ev->bytes_in);
	out[o++] = '\t';
	o += pg_bigint(out + o, ev->bytes_out);
	out[o++] = '\t';
	o += pg_bigint(out + o, ev->duration_ns / 1000);
	out[o++] = '\t';
	o += pg_bigint(out + o, ev->upstream_ns / 1000);
	out[o++] = '\t';
	PG_TEXT(CLIENT_IP, true);
	PG_TEXT(USER_AGENT, true);
	PG_TEXT(REFERRER, true);
	PG_TEXT(TLS_VERSION, true);
	o += analytics_pg_copy_text(outcome ? outcome : "unknown", false,
				    out + o);
	out[o++] = '\t';
	PG_TEXT(MOVER, true);
	PG_TEXT(TLS_CIPHER, true);
	PG_TEXT(TLS_RESUMED, true);   /* "true" / "false": a boolean */
	PG_TEXT(COLD_START_MS, true); /* digits: an integer, or NULL */
	PG_TEXT(UPSTREAM_ADDR, true);
	PG_TEXT(UPSTREAM_STATUS, true); /* digits: an integer, or NULL */
	PG_TEXT(HTTP_VERSION, true);
	PG_TEXT(CHALLENGE, true);
	PG_TEXT(AUTH, true);
	PG_TEXT(TRACE_ID, true);
	PG_TEXT(SPAN_ID, true);
	PG_TEXT(ATTEMPTS, true); /* digits: an integer, or NULL */
#undef PG_TEXT
	out[o - 1] = '\n'; /* the last column's tab */
	return o;
}

/* ---- waiting on libpq --------------------------------------------------- */

static uint64_t pg_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Wait until the connection's socket is ready for events, or the
 * deadline (monotonic ms). Returns 0, -ETIMEDOUT or -errno. */
static int pg_wait(PGconn *c, short events, uint64_t deadline)
{
	struct pollfd p = {.fd = PQsocket(c), .events = events};
	uint64_t now;
	int r;

	if (p.fd < 0)
		return -ECONNRESET;
	for (;;) {
		now = pg_now_ms();
		if (now >= deadline)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)(deadline - now));
		if (r > 0)
			return 0;
		if (r == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* Send what libpq holds, reading meanwhile (the server may answer
 * before it has read everything). */
static int pg_flush(PGconn *c, uint64_t deadline)
{
	int r, rc;

	while ((r = PQflush(c)) == 1) {
		rc = pg_wait(c, POLLIN | POLLOUT, deadline);
		if (rc)
			return rc;
		if (!PQconsumeInput(c))
			return -ECONNRESET;
	}
	return r < 0 ? -ECONNRESET : 0;
}

/* The next result (NULL at the end of the query's), once libpq has it. */
static int pg_result(PGconn *c, uint64_t deadline, PGresult **res)
{
	int rc;

	*res = NULL;
	rc = pg_flush(c, deadline);
	while (rc == 0 && PQisBusy(c)) {
		rc = pg_wait(c, POLLIN, deadline);
		if (rc == 0 && !PQconsumeInput(c))
			rc = -ECONNRESET;
	}
	if (rc == 0)
		*res = PQgetResult(c);
	return rc;
}

/* Hand COPY data to libpq, then end the COPY. */
static int pg_copy_send(PGconn *c, const char *data, size_t len,
			uint64_t deadline)
{
	size_t off = 0;
	int r, rc;

	while (off < len) {
		size_t k =
		    len - off < PG_COPY_CHUNK ? len - off : PG_COPY_CHUNK;

		r = PQputCopyData(c, data + off, (int)k);
		if (r < 0)
			return -ECONNRESET;
		if (r == 1) {
			off += k;
			continue;
		}
		/* libpq's buffer is full: let the socket drain it */
		rc = pg_wait(c, POLLIN | POLLOUT, deadline);
		if (rc)
			return rc;
		if (!PQconsumeInput(c) || PQflush(c) < 0)
			return -ECONNRESET;
	}
	while ((r = PQputCopyEnd(c, NULL)) == 0) {
		rc = pg_wait(c, POLLOUT, deadline);
		if (rc)
			return rc;
	}
	return r < 0 ? -ECONNRESET : pg_flush(c, deadline);
}

/* A libpq message on one line: its line breaks and indents (a message
 * of several lines, a DETAIL) become one space each. */
static void pg_msg(const char *m, char *out, size_t len)
{
	size_t o = 0;
	bool space = false;

	if (!m || !m[0])
		m = "unknown error";
	for (; *m && o + 1 < len; m++) {
		if (*m == '\n' || *m == '\r' || *m == '\t') {
			space = o > 0;
			continue;
		}
		if (space && o + 2 < len)
			out[o++] = ' ';
		space = false;
		out[o++] = *m;
	}
	out[o] = '\0';
}

/* ---- the connection ------------------------------------------------------ */

static void pg_drop(struct pg_sink *ps)
{
	PQfinish(ps->conn);
	ps->conn = NULL;
	free(ps->batch_sql);
	ps->batch_sql = NULL;
}

/*
 * Run sql (no COPY, no rows wanted) to its end. Returns 0, -EBADMSG when
 * the server refused the data (SQLSTATE class 22, 23 or 54), -EIO for any
 * other error it reported, or -ETIMEDOUT / -ECONNRESET (then the
 * connection is gone). With copy, the COPY in sql gets copy[0..copy_len)
 * and *inserted the INSERT's row count.
 */
static int pg_run(struct pg_sink *ps, const char *sql, const char *copy,
		  size_t copy_len, uint64_t *inserted)
{
	uint64_t deadline = pg_now_ms() + ANALYTICS_PG_BATCH_MS;
	PGconn *c = ps->conn;
	char msg[512], state[6] = "";
	PGresult *res;
	int rc = 0, err = 0;

	msg[0] = '\0';

	if (!PQsendQuery(c, sql)) {
		pg_msg(PQerrorMessage(c), msg, sizeof(msg));
		log_warnx_rl("analytics: PostgreSQL: %s", msg);
		pg_drop(ps);
		return -ECONNRESET;
	}
	for (;;) {
		rc = pg_result(c, deadline, &res);
		if (rc || !res)
			break;
		switch (PQresultStatus(res)) {
		case PGRES_COPY_IN:
			rc = pg_copy_send(c, copy ? copy : "", copy_len,
					  deadline);
			break;
		case PGRES_COMMAND_OK:
			if (inserted &&
			    strncmp(PQcmdStatus(res), "INSERT", 6) == 0)
				*inserted =
				    strtoull(PQcmdTuples(res), NULL, 10);
			break;
		case PGRES_FATAL_ERROR:
		case PGRES_NONFATAL_ERROR:
		case PGRES_BAD_RESPONSE:
			if (!err) {
				const char *st =
				    PQresultErrorField(res, PG_DIAG_SQLSTATE);

				snprintf(state, sizeof(state), "%s",
					 st ? st : "");
				pg_msg(PQresultErrorMessage(res), msg,
				       sizeof(msg));
				err = 1;
			}
			break;
		default:
			break;
		}
		PQclear(res);
		if (rc)
			break;
	}
	if (rc == 0 && PQstatus(c) != CONNECTION_OK)
		rc = -ECONNRESET;
	if (rc) {
		if (rc == -ETIMEDOUT)
			log_warnx_rl(
			    "analytics: PostgreSQL: no answer in %d ms, "
			    "dropping the connection",
			    ANALYTICS_PG_BATCH_MS);
		else {
			if (!err)
				pg_msg(PQerrorMessage(c), msg, sizeof(msg));
			log_warnx_rl("analytics: PostgreSQL: connection lost: "
				     "%s",
				     msg);
		}
		pg_drop(ps);
		return rc;
	}
	if (!err)
		return 0;
	if (strncmp(state, "22", 2) == 0 || strncmp(state, "23", 2) == 0 ||
	    strncmp(state, "54", 2) == 0)
		return -EBADMSG;
	log_warnx_rl("analytics: PostgreSQL: %s%s%s", state[0] ? state : "",
		     state[0] ? ": " : "", msg);
	return -EIO;
}

/* Connect (bounded by ANALYTICS_PG_CONNECT_MS) and set the session up. */
static int pg_connect(struct pg_sink *ps)
{
	/* ours before the conninfo (it may change them), then what must be
	 * ours whatever it says */
	static const char *const kw[] = {
	    "connect_timeout",	"keepalives",
	    "keepalives_idle",	"keepalives_interval",
	    "keepalives_count", "tcp_user_timeout",
	    "dbname",		"application_name",
	    "client_encoding",	NULL};
	const char *val[] = {
	    "5",    "1",     "30",	   "10",
	    "3",    "30000", ps->conninfo, ANALYTICS_PG_APPLICATION,
	    "UTF8", NULL};
	uint64_t deadline = pg_now_ms() + ANALYTICS_PG_CONNECT_MS;
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;
	char sql[sizeof(PG_SETUP) + 32], msg[512], *host;
	int rc = 0;

	ps->conn = PQconnectStartParams(kw, val, 1);
	if (!ps->conn)
		return -ENOMEM;
	if (PQstatus(ps->conn) == CONNECTION_BAD)
		st = PGRES_POLLING_FAILED;
	while (st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
		rc = pg_wait(ps->conn,
			     st == PGRES_POLLING_READING ? POLLIN : POLLOUT,
			     deadline);
		if (rc)
			break;
		st = PQconnectPoll(ps->conn);
	}
	if (rc == 0 && st == PGRES_POLLING_FAILED)
		rc = -ECONNREFUSED;
	if (rc == 0 && PQsetnonblocking(ps->conn, 1))
		rc = -EIO;
	if (rc) {
		pg_msg(rc == -ETIMEDOUT ? "timed out"
					: PQerrorMessage(ps->conn),
		       msg, sizeof(msg));
		log_warnx_rl("analytics: PostgreSQL: cannot connect: %s", msg);
		pg_drop(ps);
		return rc;
	}
	atomic_fetch_add(&ps->connects, 1);
	host = PQescapeLiteral(ps->conn, ps->edge_host, strlen(ps->edge_host));
	if (!host) {
		pg_drop(ps);
		return -ENOMEM;
	}
	if (asprintf(&ps->batch_sql, PG_BATCH, host) < 0)
		ps->batch_sql = NULL;
	PQfreemem(host);
	if (!ps->batch_sql) {
		pg_drop(ps);
		return -ENOMEM;
	}
	snprintf(sql, sizeof(sql), PG_SETUP, ANALYTICS_PG_STATEMENT_MS);
	rc = pg_run(ps, sql, NULL, 0, NULL);
	if (rc) {
		if (ps->conn)
			pg_drop(ps);
		return rc == -EBADMSG ? -EIO : rc;
	}
	return 0;
}

/* ---- the sink ------------------------------------------------------------ */

static int pg_grow(struct pg_sink *ps, size_t need)
{
	size_t cap = ps->cap ? ps->cap : 65536;
	char *p;

	if (need <= ps->cap)
		return 0;
	while (cap < need)
		cap *= 2;
	p = realloc(ps->buf, cap);
	if (!p)
		return -ENOMEM;
	ps->buf = p;
	ps->cap = cap;
	return 0;
}

/* COPY ev[0..n) and INSERT them. */
static int pg_batch(struct pg_sink *ps, const struct analytics_event *ev,
		    size_t n)
{
	uint64_t inserted = 0;
	size_t i, len = 0;
	int rc;

	rc = pg_grow(ps, n * ANALYTICS_PG_ROW_MAX);
	if (rc)
		return rc;
	for (i = 0; i < n; i++)
		len += analytics_pg_row(&ev[i], ps->buf + len);
	rc = pg_run(ps, ps->batch_sql, ps->buf, len, &inserted);
	if (rc == 0 && inserted < n)
		atomic_fetch_add(&ps->duplicates, n - inserted);
	return rc;
}

static int pg_write_batch(void *ctx, const struct analytics_event *ev, size_t n,
			  size_t *done)
{
	struct pg_sink *ps = ctx;
	size_t i;
	int rc;

	*done = 0;
	if (!ps->conn) {
		rc = pg_connect(ps);
		if (rc)
			return rc;
	}
	rc = pg_batch(ps, ev, n);
	if (rc != -EBADMSG) {
		if (rc == 0)
			*done = n;
		return rc;
	}
	/* the data was refused: one event at a time, so that only the bad
	 * ones are lost */
	for (i = 0; i < n; i++) {
		rc = pg_batch(ps, &ev[i], 1);
		if (rc == -EBADMSG) {
			atomic_fetch_add(&ps->rejected, 1);
			log_warnx_rl("analytics: PostgreSQL refused the event "
				     "of request %s: dropped",
				     ev[i].request_id);
			rc = 0;
		}
		if (rc)
			return rc;
		*done = i + 1;
	}
	return 0;
}

static int pg_reopen(void *ctx)
{
	(void)ctx; /* the connection is made again when it breaks */
	return 0;
}

static void pg_close(void *ctx)
{
	struct pg_sink *ps = ctx;

	if (!ps)
		return;
	pg_drop(ps);
	free(ps->conninfo);
	free(ps->edge_host);
	free(ps->buf);
	free(ps);
}

static void pg_counters(void *ctx, struct analytics_sink_counters *c)
{
	struct pg_sink *ps = ctx;

	c->duplicates = atomic_load(&ps->duplicates);
	c->rejected = atomic_load(&ps->rejected);
	c->connects = atomic_load(&ps->connects);
}

static const struct analytics_sink_ops pg_sink_ops = {
    .name = "pg",
    .write_batch = pg_write_batch,
    .reopen = pg_reopen,
    .close = pg_close,
    .counters = pg_counters,
};

int analytics_pg_sink(const char *conninfo, const char *edge_host,
		      struct analytics_sink *sink)
{
	struct pg_sink *ps = calloc(1, sizeof(*ps));

	if (!ps)
		return -ENOMEM;
	ps->conninfo = strdup(conninfo);
	ps->edge_host = strdup(edge_host ? edge_host : "");
	if (!ps->conninfo || !ps->edge_host) {
		pg_close(ps);
		return -ENOMEM;
	}
	sink->ops = &pg_sink_ops;
	sink->ctx = ps;
	return 0;
}
