// SPDX-License-Identifier: BSD-2-Clause
/*
 * pgconn.c - the asynchronous PostgreSQL connection of pgconn.h: libpq's
 * PQconnectPoll and PQsendQueryParams/PQconsumeInput/PQgetResult driven
 * by events on its socket, a timer for the connect deadline, the query
 * timeout and the backoff between attempts.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgconn.h"

/* A connect that has not finished in this long fails (libpq's
 * connect_timeout does not apply to PQconnectPoll). */
#define PGCONN_CONNECT_TIMEOUT_MS 10000
#define PGCONN_KEYS_MAX 64

enum pgconn_state {
	PGCONN_DOWN = 0,   /* waiting out the backoff */
	PGCONN_CONNECTING, /* PQconnectPoll under way */
	PGCONN_UP,
};

struct pgconn {
	struct event_base *base;
	PGconn *pg;
	enum pgconn_state state;
	bool busy;	       /* a query is running */
	bool flushing;	       /* the query is not all sent yet */
	struct event *rd, *wr; /* on the socket (remade per socket) */
	struct event *timer;   /* connect deadline, query timeout, backoff */
	int fd;
	uint64_t backoff_ms;
	uint64_t reconnects;
	unsigned connects; /* attempts that reached UP */
	char last_error[256];
	const char *keys[PGCONN_KEYS_MAX + 1];
	const char *vals[PGCONN_KEYS_MAX + 1];
	PQconninfoOption *opts; /* what keys and vals point into */
	char *extra;		/* the values added here */
	const struct pgconn_ops *ops;
	void *arg;
};

static void pgconn_start(struct pgconn *c);

void pgconn_mask(const char *s, char *out, size_t len)
{
	size_t o = 0;
	const char *p = s;

	if (!len)
		return;
	while (*p && o + 1 < len) {
		if (strncmp(p, "password=", 9) == 0) {
			const char *v = p + 9;
			char q = *v == '\'' ? '\'' : 0;

			o += (size_t)snprintf(out + o, len - o,
					      "password=*****");
			if (q) {
				for (v++; *v && *v != q; v++)
					if (*v == '\\' && v[1])
						v++;
				if (*v)
					v++;
			} else {
				while (*v && *v != ' ' && *v != '\t')
					v++;
			}
			p = v;
			if (o >= len)
				break;
			continue;
		}
		/* postgresql://user:PASSWORD@host */
		if (strncmp(p, "://", 3) == 0) {
			const char *at = strchr(p + 3, '@');
			const char *colon = strchr(p + 3, ':');

			if (at && colon && colon < at) {
				size_t n = (size_t)(colon + 1 - p);

				if (o + n + 6 < len) {
					memcpy(out + o, p, n);
					o += n;
					memcpy(out + o, "*****", 5);
					o += 5;
					p = at;
					continue;
				}
			}
		}
		out[o++] = *p++;
	}
	out[o < len ? o : len - 1] = '\0';
}

static void pgconn_timer(struct pgconn *c, uint64_t ms)
{
	struct timeval tv = {(time_t)(ms / 1000),
			     (suseconds_t)(ms % 1000) * 1000};

	evtimer_add(c->timer, &tv);
}

static void pgconn_unwatch(struct pgconn *c)
{
	if (c->rd) {
		event_free(c->rd);
		c->rd = NULL;
	}
	if (c->wr) {
		event_free(c->wr);
		c->wr = NULL;
	}
	c->fd = -1;
}

/* Give up this connection: say why, and try again after the backoff. */
static void pgconn_fail(struct pgconn *c, const char *why)
{
	char buf[512];
	size_t n;
	bool was_up = c->state == PGCONN_UP;

	pgconn_mask(why && *why ? why : "connection lost", buf, sizeof(buf));
	n = strlen(buf);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	for (char *q = buf; *q; q++)
		if (*q == '\n' || *q == '\t')
			*q = ' ';
	snprintf(c->last_error, sizeof(c->last_error), "%s", buf);
	pgconn_unwatch(c);
	evtimer_del(c->timer);
	if (c->pg)
		PQfinish(c->pg);
	c->pg = NULL;
	c->state = PGCONN_DOWN;
	c->busy = c->flushing = false;
	if (was_up)
		c->reconnects++;
	/* a jittered backoff: 3/4 to 5/4 of it */
	pgconn_timer(c, c->backoff_ms * 3 / 4 +
			    (uint64_t)random() % (c->backoff_ms / 2 + 1));
	c->backoff_ms = c->backoff_ms * 2 > PGCONN_BACKOFF_MAX_MS
			    ? PGCONN_BACKOFF_MAX_MS
			    : c->backoff_ms * 2;
	if (c->ops->lost)
		c->ops->lost(c, c->last_error, c->arg);
}

static void pgconn_io_cb(evutil_socket_t fd, short what, void *arg);

/* Watch the socket for what (EV_READ/EV_WRITE, once) while connecting, or
 * always for reading once up (plus writing while a query is flushed). */
static int pgconn_watch(struct pgconn *c, short what)
{
	int fd = PQsocket(c->pg);

	if (fd < 0)
		return -EBADF;
	if (fd != c->fd) {
		pgconn_unwatch(c);
		c->fd = fd;
		c->rd = event_new(c->base, fd,
				  EV_READ |
				      (c->state == PGCONN_UP ? EV_PERSIST : 0),
				  pgconn_io_cb, c);
		c->wr = event_new(c->base, fd, EV_WRITE, pgconn_io_cb, c);
		if (!c->rd || !c->wr)
			return -ENOMEM;
	}
	if ((what & EV_READ) && event_add(c->rd, NULL))
		return -ENOMEM;
	if ((what & EV_WRITE) && event_add(c->wr, NULL))
		return -ENOMEM;
	return 0;
}

static void pgconn_connected(struct pgconn *c)
{
	evtimer_del(c->timer);
	if (PQsetnonblocking(c->pg, 1)) {
		pgconn_fail(c, PQerrorMessage(c->pg));
		return;
	}
	c->state = PGCONN_UP;
	pgconn_unwatch(c); /* read events persist from now on */
	if (pgconn_watch(c, EV_READ)) {
		pgconn_fail(c, "out of memory");
		return;
	}
	c->backoff_ms = PGCONN_BACKOFF_MIN_MS;
	c->connects++;
	c->last_error[0] = '\0';
	if (c->ops->ready)
		c->ops->ready(c, c->arg);
}

static void pgconn_poll(struct pgconn *c)
{
	switch (PQconnectPoll(c->pg)) {
	case PGRES_POLLING_OK:
		pgconn_connected(c);
		return;
	case PGRES_POLLING_READING:
		if (pgconn_watch(c, EV_READ))
			pgconn_fail(c, "out of memory");
		return;
	case PGRES_POLLING_WRITING:
		if (pgconn_watch(c, EV_WRITE))
			pgconn_fail(c, "out of memory");
		return;
	default:
		pgconn_fail(c, PQerrorMessage(c->pg));
		return;
	}
}

static void pgconn_notifies(struct pgconn *c)
{
	PGnotify *n;

	while (c->pg && (n = PQnotifies(c->pg))) {
		if (c->ops->notify)
			c->ops->notify(c, n->relname, n->extra, c->arg);
		PQfreemem(n);
	}
}

/*
 * Hand over what arrived: notifications, then the running query's
 * results while they are complete, then the notifications parsing those
 * results queued: libpq reads a NOTIFY that came in the same read as a
 * result only while it parses that result, and nothing else would look
 * for it before the server sends another byte (which, on a quiet
 * database, is the next version check, seconds later).
 */
static void pgconn_deliver(struct pgconn *c)
{
	PGresult *res;

	pgconn_notifies(c);
	while (c->pg && c->busy && !c->flushing && !PQisBusy(c->pg)) {
		res = PQgetResult(c->pg);
		if (!res) {
			c->busy = false;
			evtimer_del(c->timer);
			c->ops->result(c, NULL, c->arg);
			break;
		}
		c->ops->result(c, res, c->arg);
	}
	pgconn_notifies(c);
}

static void pgconn_flush(struct pgconn *c)
{
	int rc = PQflush(c->pg);

	if (rc < 0) {
		pgconn_fail(c, PQerrorMessage(c->pg));
		return;
	}
	c->flushing = rc == 1;
	if (c->flushing && pgconn_watch(c, EV_WRITE))
		pgconn_fail(c, "out of memory");
}

static void pgconn_io_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pgconn *c = arg;

	(void)fd;
	if (c->state == PGCONN_CONNECTING) {
		pgconn_poll(c);
		return;
	}
	if (c->state != PGCONN_UP)
		return;
	if (what & EV_READ) {
		if (!PQconsumeInput(c->pg)) {
			pgconn_fail(c, PQerrorMessage(c->pg));
			return;
		}
	}
	if (c->flushing) {
		pgconn_flush(c);
		if (c->state != PGCONN_UP)
			return;
	}
	pgconn_deliver(c);
}

static void pgconn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pgconn *c = arg;

	(void)fd;
	(void)what;
	switch (c->state) {
	case PGCONN_DOWN:
		pgconn_start(c);
		return;
	case PGCONN_CONNECTING:
		pgconn_fail(c, "connect timed out");
		return;
	case PGCONN_UP:
		if (c->busy)
			pgconn_fail(c, "query timed out: the server did not "
				       "answer");
		return;
	}
}

static void pgconn_start(struct pgconn *c)
{
	c->pg = PQconnectStartParams(c->keys, c->vals, 0);
	if (!c->pg) {
		pgconn_fail(c, "out of memory");
		return;
	}
	if (PQstatus(c->pg) == CONNECTION_BAD) {
		pgconn_fail(c, PQerrorMessage(c->pg));
		return;
	}
	c->state = PGCONN_CONNECTING;
	pgconn_timer(c, PGCONN_CONNECT_TIMEOUT_MS);
	if (pgconn_watch(c, EV_WRITE))
		pgconn_fail(c, "out of memory");
}

/* keys/vals from conninfo, with what edge adds unless it is set. */
static int pgconn_params(struct pgconn *c, const char *conninfo,
			 const char *name, char *err, size_t errlen)
{
	static const char *const add[][2] = {
	    {"keepalives", "1"},	   {"keepalives_idle", "10"},
	    {"keepalives_interval", "5"},  {"keepalives_count", "3"},
	    {"tcp_user_timeout", "20000"},
	};
	char *perr = NULL;
	PQconninfoOption *o;
	size_t n = 0, i, j;
	bool have;

	c->opts = PQconninfoParse(conninfo, &perr);
	if (!c->opts) {
		char buf[256];

		pgconn_mask(perr ? perr : "out of memory", buf, sizeof(buf));
		snprintf(err, errlen, "%s", buf);
		for (char *q = err; *q; q++)
			if (*q == '\n')
				*q = *(q + 1) ? ' ' : '\0';
		PQfreemem(perr);
		return perr ? -EINVAL : -ENOMEM;
	}
	for (o = c->opts; o->keyword && n < PGCONN_KEYS_MAX - 8; o++)
		if (o->val && o->val[0]) {
			c->keys[n] = o->keyword;
			c->vals[n++] = o->val;
		}
	for (i = 0; i < sizeof(add) / sizeof(add[0]); i++) {
		for (have = false, j = 0; j < n; j++)
			have |= strcmp(c->keys[j], add[i][0]) == 0;
		if (!have) {
			c->keys[n] = add[i][0];
			c->vals[n++] = add[i][1];
		}
	}
	for (have = false, j = 0; j < n; j++)
		have |= strcmp(c->keys[j], "application_name") == 0;
	if (!have && name) {
		c->extra = strdup(name);
		if (!c->extra)
			return -ENOMEM;
		c->keys[n] = "application_name";
		c->vals[n++] = c->extra;
	}
	c->keys[n] = NULL;
	c->vals[n] = NULL;
	return 0;
}

int pgconn_new(struct event_base *base, const char *conninfo, const char *name,
	       const struct pgconn_ops *ops, void *arg, struct pgconn **out,
	       char *err, size_t errlen)
{
	struct pgconn *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	c->base = base;
	c->ops = ops;
	c->arg = arg;
	c->fd = -1;
	c->backoff_ms = PGCONN_BACKOFF_MIN_MS;
	rc = pgconn_params(c, conninfo, name, err, errlen);
	if (rc == 0) {
		c->timer = evtimer_new(base, pgconn_timer_cb, c);
		if (!c->timer)
			rc = -ENOMEM;
	}
	if (rc) {
		pgconn_free(c);
		return rc;
	}
	pgconn_start(c);
	*out = c;
	return 0;
}

void pgconn_free(struct pgconn *c)
{
	if (!c)
		return;
	pgconn_unwatch(c);
	if (c->timer)
		event_free(c->timer);
	if (c->pg)
		PQfinish(c->pg);
	PQconninfoFree(c->opts);
	free(c->extra);
	free(c);
}

bool pgconn_up(const struct pgconn *c)
{
	return c->state == PGCONN_UP;
}

bool pgconn_busy(const struct pgconn *c)
{
	return c->busy;
}

int pgconn_query(struct pgconn *c, const char *sql, int n,
		 const char *const *params)
{
	if (c->state != PGCONN_UP)
		return -ENOTCONN;
	if (c->busy)
		return -EBUSY;
	/* without parameters: the simple protocol, which takes several
	 * statements (a transaction) in one string */
	if (!(n == 0 ? PQsendQuery(c->pg, sql)
		     : PQsendQueryParams(c->pg, sql, n, NULL, params, NULL,
					 NULL, 0))) {
		pgconn_fail(c, PQerrorMessage(c->pg));
		return -EIO;
	}
	c->busy = true;
	pgconn_timer(c, PGCONN_QUERY_TIMEOUT_MS);
	pgconn_flush(c);
	return c->state == PGCONN_UP ? 0 : -EIO;
}

void pgconn_reset(struct pgconn *c, const char *why)
{
	if (c->state != PGCONN_DOWN)
		pgconn_fail(c, why);
}

PGconn *pgconn_pg(const struct pgconn *c)
{
	return c->state == PGCONN_UP ? c->pg : NULL;
}

uint64_t pgconn_reconnects(const struct pgconn *c)
{
	return c->reconnects;
}

const char *pgconn_last_error(const struct pgconn *c)
{
	return c->last_error;
}
