/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pgdb.c - connecting to PostgreSQL with keepalives, the schema's
 * migrations and status, and messages with libpq's text and no password
 * (pgdb.h).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pg_migrations.h"
#include "pgdb.h"

#define PGDB_NMIGRATIONS (sizeof(pg_migrations) / sizeof(pg_migrations[0]))

/* A secret shorter than this is masked only where a pattern shows it
 * (password=, a URI's user information): replacing every "ab" in a
 * message would make it unreadable and hide nothing. */
#define PGDB_SECRET_MIN 4

#define PGDB_STR_(x) #x
#define PGDB_STR(x) PGDB_STR_(x)

/* ---- masking -------------------------------------------------------- */

struct pgdb_out {
	char *s;
	size_t len, n; /* capacity (terminator included), used */
};

static void pgdb_put(struct pgdb_out *o, const char *s, size_t n)
{
	if (o->n + 1 >= o->len)
		return;
	if (n > o->len - 1 - o->n)
		n = o->len - 1 - o->n;
	memcpy(o->s + o->n, s, n);
	o->n += n;
	o->s[o->n] = '\0';
}

static void pgdb_puts(struct pgdb_out *o, const char *s)
{
	pgdb_put(o, s, strlen(s));
}

/* At s: "password" (any case), blanks, '=', blanks; returns where the
 * value starts, or NULL. Also matches inside "sslpassword=". */
static const char *pgdb_password_at(const char *s)
{
	if (strncasecmp(s, "password", 8) != 0)
		return NULL;
	s += 8;
	while (*s == ' ' || *s == '\t')
		s++;
	if (*s != '=')
		return NULL;
	s++;
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* The end of a conninfo value starting at v: a quoted one through its
 * closing quote (backslash escapes), else up to white space. */
static const char *pgdb_value_end(const char *v)
{
	if (*v == '\'') {
		for (v++; *v && *v != '\''; v++)
			if (*v == '\\' && v[1])
				v++;
		return *v ? v + 1 : v;
	}
	while (*v && !isspace((unsigned char)*v))
		v++;
	return v;
}

char *pgdb_mask(const char *in, const char *secret, char *out, size_t len)
{
	struct pgdb_out o = {out, len, 0};
	size_t ns = secret ? strlen(secret) : 0;
	const char *p = in, *v;

	if (!len)
		return out;
	out[0] = '\0';
	if (ns < PGDB_SECRET_MIN)
		ns = 0;
	while (*p) {
		if (ns && strncmp(p, secret, ns) == 0) {
			pgdb_puts(&o, "***");
			p += ns;
		} else if ((v = pgdb_password_at(p))) {
			pgdb_put(&o, p, (size_t)(v - p));
			pgdb_puts(&o, "***");
			p = pgdb_value_end(v);
		} else if (strncmp(p, "://", 3) == 0) {
			/* scheme://[user[:password]@]host...: the password
			 * is in the authority, before its last '@' */
			const char *a = p + 3, *e = a, *at = NULL, *colon;

			for (; *e && !strchr("/?#\"' \t\r\n", *e); e++)
				if (*e == '@')
					at = e;
			colon = at ? memchr(a, ':', (size_t)(at - a)) : NULL;
			if (colon) {
				pgdb_put(&o, p, (size_t)(colon + 1 - p));
				pgdb_puts(&o, "***");
				p = at;
			} else {
				pgdb_put(&o, p, 3);
				p = a;
			}
		} else {
			pgdb_put(&o, p++, 1);
		}
	}
	return out;
}

/* in with the text between each pair of double quotes replaced by "***"
 * (for libpq's complaints about a connection string that holds a
 * password: they quote the token they could not read, which may be part
 * of the password), but a quoted "=". */
static void pgdb_mask_quoted(const char *in, char *out, size_t len)
{
	struct pgdb_out o = {out, len, 0};
	const char *p = in, *q;

	if (!len)
		return;
	out[0] = '\0';
	while (*p) {
		if (*p == '"' && (q = strchr(p + 1, '"'))) {
			/* missing "=" after "...": the "=" may stay */
			if (q == p + 2 && p[1] == '=')
				pgdb_put(&o, p, 3);
			else
				pgdb_puts(&o, "\"***\"");
			p = q + 1;
		} else {
			pgdb_put(&o, p++, 1);
		}
	}
}

/* ---- messages -------------------------------------------------------- */

/* Append text's lines to o, each trimmed, joined with "; ". */
static void pgdb_put_lines(struct pgdb_out *o, const char *text)
{
	bool first = true;
	const char *p = text, *e, *b;

	while (*p) {
		e = strchr(p, '\n');
		if (!e)
			e = p + strlen(p);
		b = p;
		while (b < e && isspace((unsigned char)*b))
			b++;
		while (e > b && isspace((unsigned char)e[-1]))
			e--;
		if (e > b) {
			if (!first)
				pgdb_puts(o, "; ");
			pgdb_put(o, b, (size_t)(e - b));
			first = false;
		}
		p = strchr(p, '\n');
		if (!p)
			break;
		p++;
	}
}

/* msg masked with both secrets (either may be NULL) into err: masked
 * whole before it is cut to the errbuf. */
static void pgdb_err_done(const char *msg, const char *s1, const char *s2,
			  struct errbuf *err)
{
	char once[PGDB_MSG_MAX];

	if (!err)
		return;
	pgdb_mask(msg, s1, once, sizeof(once));
	pgdb_mask(once, s2, err->msg, sizeof(err->msg));
}

/* pgdb_conn_error, also masking secret (may be NULL). */
static void pgdb_vconn_error(PGconn *conn, const char *secret,
			     struct errbuf *err, const char *fmt, va_list ap)
{
	char buf[PGDB_MSG_MAX];
	struct pgdb_out o = {buf, sizeof(buf), 0};
	const char *m = conn ? PQerrorMessage(conn) : "";

	vsnprintf(buf, sizeof(buf), fmt, ap);
	o.n = strlen(buf);
	if (m && *m) {
		pgdb_puts(&o, ": ");
		pgdb_put_lines(&o, m);
	} else if (!conn) {
		pgdb_puts(&o, ": out of memory");
	}
	pgdb_err_done(buf, conn ? PQpass(conn) : NULL, secret, err);
}

static void pgdb_conn_error_secret(PGconn *conn, const char *secret,
				   struct errbuf *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void pgdb_conn_error_secret(PGconn *conn, const char *secret,
				   struct errbuf *err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pgdb_vconn_error(conn, secret, err, fmt, ap);
	va_end(ap);
}

void pgdb_conn_error(PGconn *conn, struct errbuf *err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pgdb_vconn_error(conn, NULL, err, fmt, ap);
	va_end(ap);
}

const char *pgdb_sqlstate(const PGresult *res)
{
	const char *s = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

	return s ? s : "";
}

static void pgdb_vresult_error(const PGresult *res, PGconn *conn,
			       struct errbuf *err, const char *fmt, va_list ap)
{
	const char *prim =
	    res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	const char *detail, *hint;
	char buf[PGDB_MSG_MAX];
	struct pgdb_out o = {buf, sizeof(buf), 0};

	if (!prim) {
		pgdb_vconn_error(conn, NULL, err, fmt, ap);
		return;
	}
	vsnprintf(buf, sizeof(buf), fmt, ap);
	o.n = strlen(buf);
	pgdb_puts(&o, ": ");
	pgdb_put_lines(&o, prim);
	if (*pgdb_sqlstate(res)) {
		pgdb_puts(&o, " (SQLSTATE ");
		pgdb_puts(&o, pgdb_sqlstate(res));
		pgdb_puts(&o, ")");
	}
	detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
	hint = PQresultErrorField(res, PG_DIAG_MESSAGE_HINT);
	if (detail) {
		pgdb_puts(&o, "; ");
		pgdb_put_lines(&o, detail);
	}
	if (hint) {
		pgdb_puts(&o, "; hint: ");
		pgdb_put_lines(&o, hint);
	}
	pgdb_err_done(buf, conn ? PQpass(conn) : NULL, NULL, err);
}

void pgdb_result_error(const PGresult *res, PGconn *conn, struct errbuf *err,
		       const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pgdb_vresult_error(res, conn, err, fmt, ap);
	va_end(ap);
}

char *pgdb_describe(PGconn *conn, char *buf, size_t len)
{
	const char *host = PQhost(conn), *port = PQport(conn);
	const char *db = PQdb(conn), *user = PQuser(conn);
	char raw[PGDB_MSG_MAX];

	snprintf(raw, sizeof(raw), "host %s port %s database %s user %s",
		 host && *host ? host : "(default)",
		 port && *port ? port : "(default)", db && *db ? db : "-",
		 user && *user ? user : "-");
	return pgdb_mask(raw, PQpass(conn), buf, len);
}

/* ---- connecting ----------------------------------------------------- */

static const PQconninfoOption *pgdb_opt(const PQconninfoOption *opts,
					const char *key)
{
	for (; opts && opts->keyword; opts++)
		if (strcmp(opts->keyword, key) == 0)
			return opts;
	return NULL;
}

void pgdb_params_free(struct pgdb_params *p)
{
	if (!p)
		return;
	free(p->keys);
	free(p->vals);
	if (p->opts)
		PQconninfoFree(p->opts);
	memset(p, 0, sizeof(*p));
}

/* Whether the connection string may hold a password (then a parse error
 * hides every token it quotes). */
static bool pgdb_may_hold_password(const char *conninfo)
{
	const char *p;

	for (p = conninfo; *p; p++)
		if (strncasecmp(p, "password", 8) == 0)
			return true;
	p = strstr(conninfo, "://");
	return p && strchr(p, '@');
}

int pgdb_params_init(struct pgdb_params *p, const char *conninfo,
		     const char *app_name, struct errbuf *err)
{
	/* the defaults, each unless the string (or its environment
	 * variable) sets the keyword, and only when this libpq knows it */
	const struct {
		const char *key, *val, *env;
	} defs[] = {
	    {"connect_timeout", PGDB_STR(PGDB_CONNECT_TIMEOUT_S),
	     "PGCONNECT_TIMEOUT"},
	    {"keepalives", "1", NULL},
	    {"keepalives_idle", PGDB_STR(PGDB_KEEPALIVES_IDLE_S), NULL},
	    {"keepalives_interval", PGDB_STR(PGDB_KEEPALIVES_INTERVAL_S), NULL},
	    {"keepalives_count", PGDB_STR(PGDB_KEEPALIVES_COUNT), NULL},
	    {"tcp_user_timeout", PGDB_STR(PGDB_TCP_USER_TIMEOUT_MS), NULL},
	    {"application_name", app_name, "PGAPPNAME"},
	    /* comments are UTF-8 (rules_comment_check) */
	    {"client_encoding", "UTF8", "PGCLIENTENCODING"},
	};
	const size_t ndefs = sizeof(defs) / sizeof(defs[0]);
	const PQconninfoOption *o;
	char *msg = NULL;
	size_t n = 0, i;

	memset(p, 0, sizeof(*p));
	p->opts = PQconninfoParse(conninfo, &msg);
	if (!p->opts) {
		char buf[PGDB_MSG_MAX], safe[PGDB_MSG_MAX];
		struct pgdb_out b = {buf, sizeof(buf), 0};

		if (!msg) {
			errbuf_set(err, "out of memory");
			return -ENOMEM;
		}
		pgdb_puts(&b, "bad connection string: ");
		pgdb_put_lines(&b, msg);
		PQfreemem(msg);
		if (pgdb_may_hold_password(conninfo)) {
			pgdb_mask_quoted(buf, safe, sizeof(safe));
			pgdb_err_done(safe, NULL, NULL, err);
		} else {
			pgdb_err_done(buf, NULL, NULL, err);
		}
		return -EINVAL;
	}
	for (o = p->opts; o->keyword; o++)
		n++;
	p->keys = calloc(n + ndefs + 1, sizeof(*p->keys));
	p->vals = calloc(n + ndefs + 1, sizeof(*p->vals));
	if (!p->keys || !p->vals) {
		pgdb_params_free(p);
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	n = 0;
	for (o = p->opts; o->keyword; o++) {
		if (!o->val)
			continue;
		p->keys[n] = o->keyword;
		p->vals[n++] = o->val;
		if (strcmp(o->keyword, "password") == 0 && o->val[0])
			p->secret = o->val;
	}
	for (i = 0; i < ndefs; i++) {
		const char *env = defs[i].env ? getenv(defs[i].env) : NULL;

		o = pgdb_opt(p->opts, defs[i].key);
		if (!o || o->val || !defs[i].val || (env && *env))
			continue;
		p->keys[n] = defs[i].key;
		p->vals[n++] = defs[i].val;
	}
	return 0;
}

int pgdb_connect(const char *conninfo, const char *app_name, PGconn **out,
		 struct errbuf *err)
{
	struct pgdb_params p;
	PGconn *conn;
	int ret;

	*out = NULL;
	ret = pgdb_params_init(&p, conninfo, app_name, err);
	if (ret)
		return ret;
	conn = PQconnectdbParams(p.keys, p.vals, 0);
	if (!conn) {
		pgdb_params_free(&p);
		errbuf_set(err, "cannot connect to PostgreSQL: out of memory");
		return -ENOMEM;
	}
	if (PQstatus(conn) != CONNECTION_OK) {
		/* masked with the string's password as well as PQpass's
		 * (which may be a password file's) */
		pgdb_conn_error_secret(conn, p.secret, err,
				       "cannot connect to PostgreSQL");
		PQfinish(conn);
		pgdb_params_free(&p);
		return -ECONNREFUSED;
	}
	pgdb_params_free(&p);
	*out = conn;
	return 0;
}

/* ---- statements ----------------------------------------------------- */

int pgdb_exec(PGconn *conn, const char *what, const char *sql, int nparams,
	      const char *const *params, PGresult **out, struct errbuf *err)
{
	PGresult *res;
	ExecStatusType st;

	if (out)
		*out = NULL;
	res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
	st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
		if (out)
			*out = res;
		else
			PQclear(res);
		return 0;
	}
	pgdb_result_error(res, conn, err, "%s", what);
	if (out)
		*out = res;
	else
		PQclear(res);
	return PQstatus(conn) == CONNECTION_BAD ? -ECONNRESET : -EIO;
}

int64_t pgdb_int(const PGresult *res, int row, int col, int64_t dflt)
{
	const char *s;
	char *end;
	long long v;

	if (!res || row >= PQntuples(res) || col >= PQnfields(res) ||
	    PQgetisnull(res, row, col))
		return dflt;
	s = PQgetvalue(res, row, col);
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end)
		return dflt;
	return (int64_t)v;
}

/* ---- the schema ----------------------------------------------------- */

int pgdb_latest(void)
{
	return PG_SCHEMA_VERSION;
}

const char *pgdb_migration_name(int version)
{
	size_t i;

	for (i = 0; i < PGDB_NMIGRATIONS; i++)
		if (pg_migrations[i].version == version)
			return pg_migrations[i].name;
	return NULL;
}

int pgdb_schema_version(PGconn *conn, int *version, struct errbuf *err)
{
	PGresult *res;
	int ret;

	*version = 0;
	ret = pgdb_exec(conn, "cannot read the schema version",
			"SELECT to_regclass('edge_schema') IS NOT NULL", 0,
			NULL, &res, err);
	if (ret) {
		PQclear(res);
		return ret;
	}
	if (strcmp(PQgetvalue(res, 0, 0), "t") != 0) {
		PQclear(res);
		return 0;
	}
	PQclear(res);
	ret = pgdb_exec(conn, "cannot read the schema version",
			"SELECT coalesce(max(version), 0) FROM edge_schema", 0,
			NULL, &res, err);
	if (ret == 0)
		*version = (int)pgdb_int(res, 0, 0, 0);
	PQclear(res);
	return ret;
}

/* err for a schema newer than this build. */
static int pgdb_newer(int version, struct errbuf *err)
{
	errbuf_set(err,
		   "the database's schema is version %d, newer than this "
		   "edge (%d): upgrade edge",
		   version, PG_SCHEMA_VERSION);
	return -EPROTO;
}

int pgdb_schema_check(PGconn *conn, int min, int *version, struct errbuf *err)
{
	int v, ret;

	ret = pgdb_schema_version(conn, &v, err);
	if (version)
		*version = v;
	if (ret)
		return ret;
	if (v > PG_SCHEMA_VERSION)
		return pgdb_newer(v, err);
	if (v == 0) {
		errbuf_set(err, "the database has no edge schema: run "
				"edgectl db migrate");
		return -ENOENT;
	}
	if (v < min) {
		errbuf_set(err,
			   "the database's schema is version %d, older than "
			   "this edge needs (%d): run edgectl db migrate",
			   v, min);
		return -ENOENT;
	}
	return 0;
}

/* The line of sql that holds character pos (1-based, as the server
 * counts: characters, not bytes; the files are UTF-8). */
static int pgdb_line_of(const char *sql, long pos)
{
	long chars = 0;
	int line = 1;
	const char *p;

	for (p = sql; *p; p++) {
		if (((unsigned char)*p & 0xc0) == 0x80)
			continue;
		if (++chars >= pos)
			break;
		if (*p == '\n')
			line++;
	}
	return line;
}

/* Run sql, ignoring its result (ROLLBACK, the unlock on the way out). */
static void pgdb_exec_quiet(PGconn *conn, const char *sql)
{
	PQclear(PQexec(conn, sql));
}

/* Take the migration lock, waiting at most PGDB_LOCK_WAIT_S: a
 * session-level lock taken in a transaction of its own, so that the wait
 * has a lock_timeout (SET LOCAL) without touching the session's. */
static int pgdb_lock(PGconn *conn, struct errbuf *err)
{
	static const char *const key[] = {PGDB_STR(PGDB_LOCK_MIGRATE)};
	PGresult *res;
	int ret;

	ret = pgdb_exec(conn, "cannot begin", "BEGIN", 0, NULL, NULL, err);
	if (ret)
		return ret;
	ret = pgdb_exec(
	    conn, "cannot set lock_timeout",
	    "SET LOCAL lock_timeout = '" PGDB_STR(PGDB_LOCK_WAIT_S) "s'", 0,
	    NULL, NULL, err);
	if (ret == 0) {
		ret = pgdb_exec(conn, "cannot take the migration lock",
				"SELECT pg_advisory_lock($1::bigint)", 1, key,
				&res, err);
		if (ret && strcmp(pgdb_sqlstate(res), "55P03") == 0) {
			errbuf_set(err,
				   "another process has held edge's migration "
				   "lock (pg_advisory_lock(%lld)) for %d s; "
				   "try again once it is done",
				   (long long)PGDB_LOCK_MIGRATE,
				   PGDB_LOCK_WAIT_S);
			ret = -ETIMEDOUT;
		}
		PQclear(res);
	}
	if (ret) {
		pgdb_exec_quiet(conn, "ROLLBACK");
		return ret;
	}
	return pgdb_exec(conn, "cannot commit", "COMMIT", 0, NULL, NULL, err);
}

static void pgdb_unlock(PGconn *conn)
{
	pgdb_exec_quiet(conn, "SELECT pg_advisory_unlock(" PGDB_STR(
				  PGDB_LOCK_MIGRATE) "::bigint)");
}

/* Apply migration m in a transaction of its own, recorded in edge_schema. */
static int pgdb_apply(PGconn *conn, const struct pg_migration *m,
		      const char *applied_by, struct errbuf *err)
{
	char vtext[16];
	const char *params[2] = {vtext, applied_by};
	PGresult *res;
	ExecStatusType st;
	int ret;

	snprintf(vtext, sizeof(vtext), "%d", m->version);
	ret = pgdb_exec(conn, "cannot begin", "BEGIN", 0, NULL, NULL, err);
	if (ret)
		return ret;
	/* PQexec: a migration is several statements (the simple query
	 * protocol), all inside the transaction begun above */
	res = PQexec(conn, m->sql);
	st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		const char *pos =
		    res ? PQresultErrorField(res, PG_DIAG_STATEMENT_POSITION)
			: NULL;

		if (pos)
			pgdb_result_error(res, conn, err,
					  "migration %04d_%s failed at line "
					  "%d of its file",
					  m->version, m->name,
					  pgdb_line_of(m->sql, atol(pos)));
		else
			pgdb_result_error(res, conn, err,
					  "migration %04d_%s failed",
					  m->version, m->name);
		PQclear(res);
		ret = PQstatus(conn) == CONNECTION_BAD ? -ECONNRESET : -EIO;
		goto fail;
	}
	PQclear(res);
	ret = pgdb_exec(conn, "cannot record the migration in edge_schema",
			"INSERT INTO edge_schema (version, applied_by) "
			"VALUES ($1::integer, $2)",
			2, params, NULL, err);
	if (ret)
		goto fail;
	ret = pgdb_exec(conn, "cannot commit the migration", "COMMIT", 0, NULL,
			NULL, err);
	if (ret)
		goto fail;
	return 0;
fail:
	pgdb_exec_quiet(conn, "ROLLBACK");
	return ret;
}

int pgdb_migrate(PGconn *conn, const char *applied_by, pgdb_migrate_fn done,
		 void *arg, int *applied, struct errbuf *err)
{
	size_t i;
	int v, ret;

	if (applied)
		*applied = 0;
	ret = pgdb_lock(conn, err);
	if (ret)
		return ret;
	/* read under the lock: whoever held it before may have migrated */
	ret = pgdb_schema_version(conn, &v, err);
	if (ret)
		goto out;
	if (v > PG_SCHEMA_VERSION) {
		ret = pgdb_newer(v, err);
		goto out;
	}
	for (i = 0; i < PGDB_NMIGRATIONS; i++) {
		const struct pg_migration *m = &pg_migrations[i];

		if (m->version <= v)
			continue;
		ret = pgdb_apply(conn, m, applied_by, err);
		if (ret)
			goto out;
		if (applied)
			(*applied)++;
		if (done)
			done(m->version, m->name, arg);
	}
out:
	pgdb_unlock(conn);
	return ret;
}

int pgdb_status(PGconn *conn, int stale_s, struct pgdb_status *st,
		struct errbuf *err)
{
	char stale[16];
	const char *params[1] = {stale};
	PGresult *res;
	int ret;

	st->version = 0;
	st->latest = PG_SCHEMA_VERSION;
	st->hosts = st->hosts_stale = st->hosts_behind = -1;
	st->change_version = st->change_seq = -1;
	ret = pgdb_schema_version(conn, &st->version, err);
	if (ret || st->version < 1)
		return ret;
	snprintf(stale, sizeof(stale), "%d", stale_s);
	ret = pgdb_exec(
	    conn, "cannot read the database's status",
	    "WITH cv AS (SELECT coalesce(max(version), 0) AS v "
	    "            FROM edge_change_log) "
	    "SELECT (SELECT count(*) FROM edge_hosts), "
	    "       (SELECT count(*) FROM edge_hosts WHERE last_seen IS NULL "
	    "           OR last_seen < now() - $1::integer * interval '1 s'), "
	    "       (SELECT count(*) FROM edge_hosts, cv "
	    "         WHERE coalesce(applied_version, 0) < cv.v), "
	    "       (SELECT v FROM cv), "
	    "       (SELECT CASE WHEN is_called THEN last_value ELSE 0 END "
	    "          FROM edge_change_seq)",
	    1, params, &res, err);
	if (ret == 0) {
		st->hosts = pgdb_int(res, 0, 0, -1);
		st->hosts_stale = pgdb_int(res, 0, 1, -1);
		st->hosts_behind = pgdb_int(res, 0, 2, -1);
		st->change_version = pgdb_int(res, 0, 3, -1);
		st->change_seq = pgdb_int(res, 0, 4, -1);
	}
	PQclear(res);
	return ret;
}
