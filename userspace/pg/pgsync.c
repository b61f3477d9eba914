// SPDX-License-Identifier: BSD-2-Clause
/*
 * pgsync.c - the control loop's database sync (pgsync.h): one connection
 * (pgconn.h), one query at a time chosen by what is due — the LISTENs,
 * a snapshot, the projects notifications named, a version check, this
 * host's row — and the model (pgmodel.h) turned into a route source and
 * the global rules after every fetch.
 */
#include <errno.h>
#include <pthread.h>
#include <event2/event.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clk.h"
#include "pgconn.h"
#include "pgsync.h"

/* Where an apply is (pgsync_apply_step). */
enum pgsync_stage {
	PGSYNC_IDLE = 0,
	PGSYNC_MODEL,  /* a fetch's rows into the model */
	PGSYNC_SRC,    /* its projects as route sources */
	PGSYNC_ROUTES, /* into the route table (the owner's job) */
};

/* A fetch (or the model as it is: a republish) on its way into the route
 * table and the XDP maps. */
struct pgsync_apply {
	enum pgsync_stage stage;
	bool fetched; /* from a fetch; else the model as it is */
	bool save;    /* the local snapshot written after it */
	PGresult
	    *set[PGM_NSETS]; /* the fetch's sets, until the model has them */
	char **ids;	     /* the projects it names; NULL: all */
	size_t n;
	bool rules; /* the global rules too */
	uint64_t version, since;
	struct pgm_job *mj;
	int64_t now; /* unix s: what has expired */
	struct route_src_project *src;
	size_t n_src;
	char **del; /* named, and no longer in the model */
	size_t n_del;
	size_t next;  /* the next project to make a route source of */
	void *routes; /* the owner's job (ops->routes_begin) */
};

enum pgsync_query {
	PQ_NONE = 0,
	PQ_LISTEN,
	PQ_FETCH,
	PQ_CHECK,
	PQ_REPORT,
	PQ_ROLLBACK,
	PQ_CERTS,
	PQ_ACME,
};

struct pgsync {
	struct event_base *base;
	struct pgconn *c;
	struct pgm *m;
	const struct pgsync_ops *ops;
	void *arg;
	char *host, *version, *snapshot;
	int64_t started; /* unix s */
	enum pgsync_query q;
	bool listening;	    /* the LISTENs are in place on this connection */
	bool need_snapshot; /* everything, at the next fetch */
	bool rules_dirty;   /* the global rules, at the next fetch */
	bool certs_dirty;   /* the certificates table, next */
	bool certs_failed;  /* its last fetch failed: again at the check */
	int certs_k;	    /* the fetch's statements answered so far */
	/* the highest certificate_change version heard; what it was when
	 * the fetch under way was sent; and when the last one that worked
	 * was: a change heard before that fetch was sent is in it */
	uint64_t certs_heard, certs_sent, certs_have;
	/* acme_challenges (cfg->acme_challenges): read next; the last read
	 * failed (again at the check); the earliest expires_at of the rows
	 * handed over (unix s, 0: none), read again once it passed; the
	 * tokens whose type was refused at the last read (each said once) */
	bool acme, acme_dirty, acme_failed;
	int64_t acme_next_expiry;
	char **acme_bad;
	size_t n_acme_bad;
	char **dirty; /* projects named since the last fetch began */
	size_t n_dirty, cap_dirty;
	uint64_t dirty_since; /* monotonic ns of the oldest of them */
	/* the fetch under way */
	bool f_all, f_rules, f_failed, f_have_version;
	char **f_ids;
	size_t f_n;
	uint64_t f_since, f_version;
	PGresult *f_set[PGM_NSETS];
	int f_k;
	/* the apply under way (one at a time), in slices on the loop; a
	 * republish asked for meanwhile, done after it */
	struct pgsync_apply ap;
	struct event *ap_ev;
	bool republish_due;
	/* the check under way: its statements' results, in order */
	int c_k;
	/* versions at most PGSYNC_LATE_WINDOW below the applied one that
	 * this session has heard of (notified, or found by a check), sorted;
	 * the check looks for the others: a transaction that committed after
	 * one with a higher version, and whose notification was lost too.
	 * Versions at or below late_floor (the last snapshot's) are the
	 * snapshot's. */
	uint64_t *known;
	size_t n_known, cap_known;
	uint64_t late_floor;
	struct event *check_ev, *report_ev, *save_ev;
	bool check_due, report_due, save_due;
	struct pgsync_status st;
	/* the local snapshot's writer thread (pgsync_saver) and what it
	 * shares with the loop, under sv_mu */
	pthread_t sv_thread;
	bool sv_started;
	pthread_mutex_t sv_mu;
	pthread_cond_t sv_cv;
	struct pgm_snap *sv_pending; /* the next to write; newest wins */
	bool sv_stop;
	uint64_t sv_saved;	 /* the version last written */
	char sv_err[ERRBUF_LEN]; /* the last failure, "" once told */
};

static void pgsync_next(struct pgsync *s);
static void pgsync_acme(struct pgsync *s);

const char *pgsync_state_name(enum pgsync_state st)
{
	switch (st) {
	case PGSYNC_CONNECTING:
		return "connecting";
	case PGSYNC_SYNCING:
		return "syncing";
	case PGSYNC_UP:
		return "up";
	case PGSYNC_DOWN:
		return "down";
	}
	return "unknown";
}

static void pgsync_set_state(struct pgsync *s, enum pgsync_state st)
{
	if (s->st.state == st)
		return;
	s->st.state = st;
	s->st.since_ns = clk_now_ns();
}

static void pgsync_arm(struct event *ev, uint64_t ms)
{
	struct timeval tv = {(time_t)(ms / 1000),
			     (suseconds_t)(ms % 1000) * 1000};

	evtimer_add(ev, &tv);
}

/* A change applied: this host's row says so within
 * PGSYNC_REPORT_SOON_MS (coalesced: a burst of changes is one write), so
 * that whoever waits for the fleet to converge need not wait the
 * PGSYNC_REPORT_MS period. */
static void pgsync_report_soon(struct pgsync *s)
{
	struct timeval when, now,
	    soon = {0, (suseconds_t)PGSYNC_REPORT_SOON_MS * 1000};

	if (evtimer_pending(s->report_ev, &when) &&
	    event_base_gettimeofday_cached(s->base, &now) == 0) {
		timeradd(&now, &soon, &soon);
		if (when.tv_sec < soon.tv_sec || (when.tv_sec == soon.tv_sec &&
						  when.tv_usec <= soon.tv_usec))
			return;
	}
	pgsync_arm(s->report_ev, PGSYNC_REPORT_SOON_MS);
}

static void pgsync_error(struct pgsync *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void pgsync_error(struct pgsync *s, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = '\0';
	for (char *p = msg; *p; p++)
		if (*p == '\n')
			*p = ' ';
	s->st.errors++;
	pgconn_mask(msg, s->st.last_error, sizeof(s->st.last_error));
	log_warnx_rl("database: %s", s->st.last_error);
}

/* ---- what is due ---------------------------------------------------------
 */

static int pgsync_dirty_add(struct pgsync *s, const char *id)
{
	size_t i;
	char **v;

	if (s->need_snapshot)
		return 0; /* everything is fetched anyway (and a transaction
			   * of 10,000 projects is 10,000 notifications) */
	for (i = 0; i < s->n_dirty; i++)
		if (strcmp(s->dirty[i], id) == 0)
			return 0;
	if (s->n_dirty >= PGSYNC_FETCH_MAX) {
		s->need_snapshot = true; /* cheaper than many */
		return 0;
	}
	if (s->n_dirty == s->cap_dirty) {
		size_t cap = s->cap_dirty ? s->cap_dirty * 2 : 16;

		v = realloc(s->dirty, cap * sizeof(*v));
		if (!v) {
			s->need_snapshot = true;
			return -ENOMEM;
		}
		s->dirty = v;
		s->cap_dirty = cap;
	}
	s->dirty[s->n_dirty] = strdup(id);
	if (!s->dirty[s->n_dirty]) {
		s->need_snapshot = true;
		return -ENOMEM;
	}
	if (!s->n_dirty++ && !s->dirty_since)
		s->dirty_since = clk_now_ns();
	return 0;
}

static void pgsync_ids_free(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* ---- queries ---------------------------------------------------------- */

static void pgsync_query(struct pgsync *s, enum pgsync_query q, const char *sql,
			 int n, const char *const *params)
{
	if (pgconn_query(s->c, sql, n, params) == 0)
		s->q = q;
}

static void pgsync_fetch(struct pgsync *s)
{
	char *sql;

	s->f_all = s->need_snapshot;
	s->f_rules = s->need_snapshot || s->rules_dirty;
	s->f_ids = s->f_all ? NULL : s->dirty;
	s->f_n = s->f_all ? 0 : s->n_dirty;
	if (s->f_all)
		pgsync_ids_free(s->dirty, s->n_dirty);
	s->dirty = NULL;
	s->n_dirty = s->cap_dirty = 0;
	s->f_since = s->dirty_since;
	s->dirty_since = 0;
	s->need_snapshot = s->rules_dirty = false;
	s->f_failed = s->f_have_version = false;
	s->f_k = 0;
	sql = pgm_fetch_sql(pgconn_pg(s->c), (const char *const *)s->f_ids,
			    s->f_n, s->f_rules);
	if (!sql) {
		pgsync_error(s, "out of memory building a fetch");
		s->need_snapshot = true;
		pgsync_ids_free(s->f_ids, s->f_n);
		s->f_ids = NULL;
		return;
	}
	pgsync_query(s, PQ_FETCH, sql, 0, NULL);
	free(sql);
	if (s->q != PQ_FETCH) { /* not sent: again later */
		if (s->f_all)
			s->need_snapshot = true;
		else
			for (size_t i = 0; i < s->f_n; i++)
				pgsync_dirty_add(s, s->f_ids[i]);
		s->rules_dirty |= s->f_rules;
		pgsync_ids_free(s->f_ids, s->f_n);
		s->f_ids = NULL;
	}
}

/* The lowest version the late check looks at. */
static uint64_t pgsync_late_lo(const struct pgsync *s)
{
	uint64_t lo = s->st.applied_version > PGSYNC_LATE_WINDOW
			  ? s->st.applied_version - PGSYNC_LATE_WINDOW
			  : 0;

	return lo > s->late_floor ? lo : s->late_floor;
}

/* Version v has been heard of (kept only within the window). */
static bool pgsync_known_has(const struct pgsync *s, uint64_t v)
{
	size_t i;

	for (i = 0; i < s->n_known; i++)
		if (s->known[i] == v)
			return true;
	return false;
}

static void pgsync_known_add(struct pgsync *s, uint64_t v)
{
	uint64_t lo = pgsync_late_lo(s);
	size_t i, j, at;

	/* drop what fell out of the window */
	for (i = j = 0; i < s->n_known; i++)
		if (s->known[i] > lo)
			s->known[j++] = s->known[i];
	s->n_known = j;
	if (v <= lo)
		return;
	for (at = 0; at < s->n_known && s->known[at] < v; at++)
		;
	if (at < s->n_known && s->known[at] == v)
		return;
	if (s->n_known == s->cap_known) {
		size_t cap = s->cap_known ? s->cap_known * 2 : 64;
		uint64_t *n;

		/* bounded: a version left out is only fetched once more */
		if (cap > PGSYNC_LATE_WINDOW * 4)
			return;
		n = realloc(s->known, cap * sizeof(*n));
		if (!n)
			return;
		s->known = n;
		s->cap_known = cap;
	}
	memmove(s->known + at + 1, s->known + at,
		(s->n_known - at) * sizeof(*s->known));
	s->known[at] = v;
	s->n_known++;
}

static void pgsync_check(struct pgsync *s)
{
	char sql[512 + PGSYNC_LATE_WINDOW * 4 * 21];
	uint64_t lo = pgsync_late_lo(s);
	size_t i;
	int n;

	s->check_due = false;
	s->c_k = 0;
	/* the newest version; what came after the applied one; and what
	 * came in the window below it that this session never heard of */
	n = snprintf(
	    sql, sizeof(sql),
	    "SELECT COALESCE(max(version), 0) FROM edge_change_log;"
	    "SELECT version, kind, key FROM edge_change_log WHERE version > "
	    "%" PRIu64 " LIMIT %d;"
	    "SELECT version, kind, key FROM edge_change_log WHERE version > "
	    "%" PRIu64 " AND version <= %" PRIu64 " AND version <> ALL "
	    "('{",
	    s->st.applied_version, PGSYNC_FETCH_MAX + 1, lo,
	    s->st.applied_version);
	for (i = 0; i < s->n_known && n > 0 && (size_t)n < sizeof(sql) - 64;
	     i++)
		n += snprintf(sql + n, sizeof(sql) - (size_t)n, "%s%" PRIu64,
			      i ? "," : "", s->known[i]);
	if (n > 0 && (size_t)n < sizeof(sql) - 64)
		snprintf(sql + n, sizeof(sql) - (size_t)n,
			 "}'::bigint[]) LIMIT %d", PGSYNC_FETCH_MAX + 1);
	pgsync_query(s, PQ_CHECK, sql, 0, NULL);
}

/* Every row of the certificates table (a few, and small: read whole),
 * then of challenge_keys. */
static void pgsync_certs(struct pgsync *s)
{
	static const char certs[] =
	    "SELECT id::text, array_to_string(names, ' '), chain_pem, "
	    "key_pem, COALESCE(encode(ocsp, 'hex'), '') FROM certificates "
	    "ORDER BY id";
	static const char both[] =
	    "SELECT id::text, array_to_string(names, ' '), chain_pem, "
	    "key_pem, COALESCE(encode(ocsp, 'hex'), '') FROM certificates "
	    "ORDER BY id; SELECT id::text, key_hex, CASE WHEN "
	    "isfinite(signs_from) AND abs(extract(epoch FROM signs_from)) < "
	    "1e15 THEN floor(extract(epoch FROM signs_from))::bigint::text "
	    "ELSE '' END FROM challenge_keys ORDER BY signs_from DESC, id "
	    "DESC LIMIT 64";

	s->certs_dirty = false;
	s->certs_sent = s->certs_heard;
	s->certs_k = 0;
	pgsync_query(s, PQ_CERTS, s->ops->apply_chal_keys ? both : certs, 0,
		     NULL);
	if (s->q != PQ_CERTS)
		s->certs_dirty = true;
}

static void pgsync_chal_keys_result(struct pgsync *s, PGresult *res)
{
	struct pgsync_chal_key *v;
	int i, n = PQntuples(res);

	if (PQnfields(res) != 3) {
		pgsync_error(s, "challenge_keys: %d columns, not 3",
			     PQnfields(res));
		return;
	}
	v = calloc(n > 0 ? (size_t)n : 1, sizeof(*v));
	if (!v) {
		pgsync_error(s, "challenge_keys: out of memory");
		s->certs_failed = true;
		return;
	}
	for (i = 0; i < n; i++) {
		v[i].id = PQgetvalue(res, i, 0);
		v[i].key_hex = PQgetvalue(res, i, 1);
		v[i].signs_from = PQgetvalue(res, i, 2);
	}
	s->ops->apply_chal_keys(s->arg, v, (size_t)n);
	free(v);
}

static void pgsync_certs_result(struct pgsync *s, PGresult *res)
{
	struct pgsync_cert *v;
	int i, n = PQntuples(res);

	if (PQnfields(res) != 5) {
		pgsync_error(s, "certificates: %d columns, not 5",
			     PQnfields(res));
		return;
	}
	v = calloc(n > 0 ? (size_t)n : 1, sizeof(*v));
	if (!v) {
		pgsync_error(s, "certificates: out of memory");
		s->certs_failed = true;
		return;
	}
	for (i = 0; i < n; i++) {
		v[i].id = PQgetvalue(res, i, 0);
		v[i].names = PQgetvalue(res, i, 1);
		v[i].chain_pem = PQgetvalue(res, i, 2);
		v[i].key_pem = PQgetvalue(res, i, 3);
		v[i].ocsp_hex = PQgetvalue(res, i, 4);
	}
	s->st.cert_fetches++;
	s->certs_have = s->certs_sent;
	s->ops->apply_certs(s->arg, v, (size_t)n);
	free(v);
}

/* The challenges every host answers now (migration 0026), bounded. */
static void pgsync_acme(struct pgsync *s)
{
	char sql[320];

	snprintf(sql, sizeof(sql),
		 "SELECT name, type, token, key_authorization, "
		 "ceil(extract(epoch FROM expires_at))::bigint::text FROM "
		 "acme_challenges WHERE expires_at > now() ORDER BY "
		 "expires_at, token LIMIT %d",
		 ACME_CHAL_MAX);
	s->acme_dirty = false;
	pgsync_query(s, PQ_ACME, sql, 0, NULL);
	if (s->q != PQ_ACME)
		s->acme_dirty = true;
}

static bool pgsync_acme_was_bad(const struct pgsync *s, const char *token)
{
	size_t i;

	for (i = 0; i < s->n_acme_bad; i++)
		if (strcmp(s->acme_bad[i], token) == 0)
			return true;
	return false;
}

/* The rows read, checked, to the owner: a row whose type this edge does
 * not know (the column's CHECK says it cannot be) is left out, logged
 * once per token, and never keeps the others from being answered. */
static void pgsync_acme_result(struct pgsync *s, PGresult *res)
{
	struct acme_chal_row *v;
	char **bad;
	int i, n = PQntuples(res), t;
	size_t k = 0, nb = 0;
	int64_t next = 0, exp;

	if (PQnfields(res) != 5) {
		pgsync_error(s, "acme_challenges: %d columns, not 5",
			     PQnfields(res));
		s->acme_failed = true;
		return;
	}
	v = calloc(n > 0 ? (size_t)n : 1, sizeof(*v));
	bad = calloc(n > 0 ? (size_t)n : 1, sizeof(*bad));
	if (!v || !bad) {
		free(v);
		free(bad);
		pgsync_error(s, "acme_challenges: out of memory");
		s->acme_failed = true;
		return;
	}
	for (i = 0; i < n; i++) {
		const char *type = PQgetvalue(res, i, 1);
		const char *token = PQgetvalue(res, i, 2);

		if (strcmp(type, "http-01") == 0)
			t = ACME_CHAL_HTTP01;
		else if (strcmp(type, "tls-alpn-01") == 0)
			t = ACME_CHAL_TLSALPN01;
		else
			t = -1;
		if (t < 0) {
			if (!pgsync_acme_was_bad(s, token)) {
				s->st.acme_skipped++;
				log_warnx_rl("database: acme_challenges row "
					     "%.80s (%.80s): type \"%.40s\" is "
					     "neither http-01 nor tls-alpn-01: "
					     "skipped",
					     token, PQgetvalue(res, i, 0),
					     type);
			}
			bad[nb] = strdup(token);
			if (bad[nb])
				nb++;
			continue;
		}
		v[k].name = PQgetvalue(res, i, 0);
		v[k].type = (enum acme_chal_type)t;
		v[k].token = token;
		v[k].key_authorization = PQgetvalue(res, i, 3);
		k++;
		exp = strtoll(PQgetvalue(res, i, 4), NULL, 10);
		if (exp > 0 && (!next || exp < next))
			next = exp;
	}
	if (n >= ACME_CHAL_MAX)
		log_warnx_rl("database: acme_challenges: more than %d rows "
			     "not expired: only the %d expiring first are "
			     "answered",
			     ACME_CHAL_MAX, ACME_CHAL_MAX);
	pgsync_ids_free(s->acme_bad, s->n_acme_bad);
	s->acme_bad = bad;
	s->n_acme_bad = nb;
	s->acme_next_expiry = next;
	s->st.acme_fetches++;
	s->st.acme_rows = k;
	s->ops->apply_acme_chals(s->arg, v, k);
	free(v);
}

static void pgsync_report(struct pgsync *s)
{
	static const char sql[] =
	    "INSERT INTO edge_hosts (name, edge_version, started_at, "
	    "last_seen, applied_version, route_generation, database_up, "
	    "xdp_counters, rule_hits) VALUES ($1, $2, to_timestamp($3), "
	    "now(), $4, $5, true, $6::jsonb, $7::jsonb) ON CONFLICT (name) "
	    "DO UPDATE SET edge_version = EXCLUDED.edge_version, "
	    "started_at = EXCLUDED.started_at, last_seen = now(), "
	    "applied_version = EXCLUDED.applied_version, route_generation = "
	    "EXCLUDED.route_generation, database_up = true, xdp_counters = "
	    "EXCLUDED.xdp_counters, rule_hits = EXCLUDED.rule_hits";
	char started[24], applied[24], gen[24], *cj = NULL, *hj = NULL;
	const char *params[7];
	json_t *counters = NULL;
	uint64_t generation = 0;

	s->report_due = false;
	if (s->ops->report)
		s->ops->report(s->arg, &generation, &counters, &hj);
	snprintf(started, sizeof(started), "%lld", (long long)s->started);
	snprintf(applied, sizeof(applied), "%" PRIu64, s->st.applied_version);
	snprintf(gen, sizeof(gen), "%" PRIu64, generation);
	cj = counters ? json_dumps(counters, JSON_COMPACT) : NULL;
	params[0] = s->host;
	params[1] = s->version;
	params[2] = started;
	params[3] = applied;
	params[4] = gen;
	params[5] = cj;
	params[6] = hj;
	pgsync_query(s, PQ_REPORT, sql, 7, params);
	free(cj);
	free(hj);
	json_decref(counters);
}

/* Send the next query that is due, if the connection is free. */
static void pgsync_next(struct pgsync *s)
{
	bool applying;

	if (!pgconn_up(s->c) || pgconn_busy(s->c))
		return;
	if (!s->listening) {
		pgsync_query(s, PQ_LISTEN,
			     s->acme ? "LISTEN project_route_change;"
				       "LISTEN ip_rule_change;"
				       "LISTEN certificate_change;"
				       "LISTEN acme_challenge_change"
				     : "LISTEN project_route_change;"
				       "LISTEN ip_rule_change;"
				       "LISTEN certificate_change",
			     0, NULL);
		return;
	}
	/* first: a CA validates a challenge within seconds, and the read
	 * is a few rows */
	if (s->acme_dirty && s->acme) {
		pgsync_acme(s);
		return;
	}
	/* one apply at a time: the next fetch, and the version check (which
	 * would find the change being applied above the applied version),
	 * wait for it */
	applying = s->ap.stage != PGSYNC_IDLE;
	if (!applying && (s->need_snapshot || s->n_dirty || s->rules_dirty)) {
		pgsync_fetch(s);
		return;
	}
	if (s->certs_dirty && s->ops->apply_certs) {
		pgsync_certs(s);
		return;
	}
	if (s->check_due && !applying) {
		pgsync_check(s);
		return;
	}
	if (s->report_due)
		pgsync_report(s);
}

/* ---- results ---------------------------------------------------------- */

/* The local snapshot's writer: writes the newest snapshot handed over,
 * off the control loop (a 10,000-domain file is a few megabytes and an
 * fsync), until told to stop, the last one written first. */
static void *pgsync_saver(void *arg)
{
	struct pgsync *s = arg;
	struct pgm_snap *x;
	struct errbuf err;
	int rc;

	/* background work: a large table's file (megabytes of JSON) never
	 * takes the CPU from the control loop (a thread's own nice value,
	 * Linux's; raising it needs no privilege) */
	errno = 0;
	rc = getpriority(PRIO_PROCESS, (id_t)gettid());
	if (errno == 0 && rc < PGSYNC_SAVER_NICE)
		setpriority(PRIO_PROCESS, (id_t)gettid(), PGSYNC_SAVER_NICE);
	pthread_mutex_lock(&s->sv_mu);
	for (;;) {
		while (!s->sv_pending && !s->sv_stop)
			pthread_cond_wait(&s->sv_cv, &s->sv_mu);
		if (!s->sv_pending)
			break;
		x = s->sv_pending;
		s->sv_pending = NULL;
		pthread_mutex_unlock(&s->sv_mu);
		errbuf_clear(&err);
		rc = pgm_snap_write(x, s->snapshot, &err);
		pthread_mutex_lock(&s->sv_mu);
		if (rc)
			snprintf(s->sv_err, sizeof(s->sv_err), "%s", err.msg);
		else
			s->sv_saved = pgm_snap_version(x);
		pthread_mutex_unlock(&s->sv_mu);
		pgm_snap_free(x);
		pthread_mutex_lock(&s->sv_mu);
	}
	pthread_mutex_unlock(&s->sv_mu);
	return NULL;
}

/* A failure of the writer's since the last look: logged and counted on
 * the loop. */
static void pgsync_saver_poll(struct pgsync *s)
{
	char msg[ERRBUF_LEN];

	if (!s->sv_started)
		return;
	pthread_mutex_lock(&s->sv_mu);
	snprintf(msg, sizeof(msg), "%s", s->sv_err);
	s->sv_err[0] = '\0';
	pthread_mutex_unlock(&s->sv_mu);
	if (msg[0])
		pgsync_error(s, "local snapshot: %s", msg);
}

static void pgsync_save_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pgsync *s = arg;
	struct pgm_snap *x, *old;
	struct errbuf err = {""};

	(void)fd;
	(void)what;
	if (fd != -1 && s->ap.stage != PGSYNC_IDLE) {
		/* the model may hold more than the applied version: the
		 * file is written once the apply is done */
		pgsync_arm(s->save_ev, PGSYNC_SAVE_MS);
		return;
	}
	s->save_due = false;
	if (!s->snapshot)
		return;
	pgsync_saver_poll(s);
	x = pgm_snap_take(s->m, s->st.applied_version);
	if (!x) {
		pgsync_error(s, "local snapshot: out of memory");
		return;
	}
	if (!s->sv_started) { /* no thread (it could not start): here */
		if (pgm_snap_write(x, s->snapshot, &err))
			pgsync_error(s, "local snapshot: %s", err.msg);
		pgm_snap_free(x);
		return;
	}
	pthread_mutex_lock(&s->sv_mu);
	old = s->sv_pending;
	s->sv_pending = x;
	pthread_cond_signal(&s->sv_cv);
	pthread_mutex_unlock(&s->sv_mu);
	pgm_snap_free(old); /* never written: a newer one is */
}

/* ---- applying, in slices ----------------------------------------------- */

static void pgsync_apply_run(struct pgsync *s);

static void pgsync_apply_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	pgsync_apply_run(arg);
}

/* Drop the apply under way (freeing what it holds); it did not happen. */
static void pgsync_apply_drop(struct pgsync *s)
{
	struct pgsync_apply *a = &s->ap;
	size_t i;

	if (a->routes)
		s->ops->routes_abort(s->arg, a->routes);
	pgm_job_free(a->mj);
	for (i = 0; i < PGM_NSETS; i++)
		PQclear(a->set[i]);
	for (i = 0; i < a->n_src; i++)
		route_src_project_clear(&a->src[i]);
	free(a->src);
	pgsync_ids_free(a->del, a->n_del);
	pgsync_ids_free(a->ids, a->n);
	memset(a, 0, sizeof(*a));
	if (s->ap_ev)
		evtimer_del(s->ap_ev);
}

/* An apply failed: what it asked for is asked for again (the version
 * check's timer retries; everything, for the model as it was). */
static void pgsync_apply_failed(struct pgsync *s)
{
	struct pgsync_apply *a = &s->ap;
	size_t i;

	if (!a->fetched) {
		s->need_snapshot = true; /* out of memory: all of it anew */
	} else {
		if (!a->ids)
			s->need_snapshot = true;
		for (i = 0; a->ids && i < a->n; i++)
			pgsync_dirty_add(s, a->ids[i]);
		s->rules_dirty |= a->rules && a->ids;
	}
	pgsync_apply_drop(s);
}

/* Apply to the route table (and the global rules to the XDP maps when
 * rules is set) from now on: the fetch's sets (taken; NULL: the model as
 * it is) for the projects ids[0..n) (taken; NULL: all of them); save: the
 * local snapshot is written after it. */
static void pgsync_apply_start(struct pgsync *s, PGresult *set[PGM_NSETS],
			       char **ids, size_t n, bool rules,
			       uint64_t version, uint64_t since, bool save)
{
	struct pgsync_apply *a = &s->ap;
	int rc;

	pgsync_apply_drop(s);
	a->ids = ids;
	a->n = n;
	a->rules = rules;
	a->version = version;
	a->since = since;
	a->save = save;
	a->fetched = set != NULL;
	a->stage = PGSYNC_SRC;
	if (set) {
		memcpy(a->set, set, sizeof(a->set));
		rc = pgm_apply_begin(s->m, a->set, (const char *const *)ids, n,
				     rules, &a->mj);
		if (rc) {
			pgsync_error(s,
				     "the database's rows were not the "
				     "shape expected (%s): is the schema "
				     "edge's?",
				     strerror(-rc));
			pgsync_apply_failed(s);
			return;
		}
		a->stage = PGSYNC_MODEL;
	}
}

/* The projects the apply names as route sources, and the ones of them
 * the model no longer has: 1 while work is left, 0 done, -ENOMEM. */
static int pgsync_apply_src(struct pgsync *s, uint64_t deadline_ns)
{
	struct pgsync_apply *a = &s->ap;
	size_t count = a->ids ? a->n : pgm_projects(s->m);
	int rc;

	if (!a->src) {
		a->now = (int64_t)(clk_real_ns() / 1000000000ull);
		a->src = calloc(count + 1, sizeof(*a->src));
		a->del = calloc(count + 1, sizeof(*a->del));
		if (!a->src || !a->del)
			return -ENOMEM;
	}
	for (; a->next < count; a->next++) {
		if (deadline_ns && a->next % 16 == 0 &&
		    clk_fresh_ns() >= deadline_ns)
			return 1;
		rc = a->ids
			 ? pgm_src_of(s->m, a->ids[a->next], a->now,
				      &a->src[a->n_src])
			 : pgm_src_at(s->m, a->next, a->now, &a->src[a->n_src]);
		if (rc == 0) {
			a->n_src++;
		} else if (rc == -ENOENT && a->ids) {
			a->del[a->n_del] = strdup(a->ids[a->next]);
			if (!a->del[a->n_del++])
				return -ENOMEM;
		} else if (rc) {
			return -ENOMEM;
		}
	}
	return 0;
}

/* Hand the route sources to the owner (its job, in slices): 0 or -errno
 * with err. */
static int pgsync_apply_routes_begin(struct pgsync *s, struct errbuf *err)
{
	struct pgsync_apply *a = &s->ap;
	struct tcproute_row *tcp = NULL;
	size_t n_tcp = 0;
	int rc;

	if (pgm_tcp_rows(s->m, &tcp, &n_tcp)) {
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	/* the arrays are the owner's from here, in every case */
	rc = s->ops->routes_begin(s->arg, a->src, a->n_src, a->del, a->n_del,
				  a->ids == NULL, tcp, n_tcp, a->version,
				  &a->routes, err);
	a->src = NULL;
	a->n_src = 0;
	a->del = NULL;
	a->n_del = 0;
	free(tcp);
	return rc;
}

/* The apply is in the route table: the rules, the status, the snapshot's
 * save, this host's row. */
static void pgsync_apply_done(struct pgsync *s)
{
	struct pgsync_apply *a = &s->ap;
	const struct pgm_rule *rv;
	size_t n;

	if (a->fetched) {
		if (!a->ids || a->version > s->st.applied_version)
			s->st.applied_version = a->version;
		if (a->version > s->st.db_version)
			s->st.db_version = a->version;
		s->st.changes++;
		if (!a->ids) {
			s->st.snapshots++;
			s->st.booted_from_snapshot = false;
			/* what committed up to it is the snapshot's */
			s->late_floor = a->version;
			s->n_known = 0;
			pgsync_set_state(s, PGSYNC_UP);
		}
	}
	if (a->rules && s->ops->apply_rules) {
		n = pgm_global_rules(s->m, a->now, &rv);
		s->ops->apply_rules(s->arg, rv, n, s->st.applied_version);
	}
	if (a->since)
		s->st.last_apply_ns = clk_now_ns() - a->since;
	pgm_skipped(s->m, &s->st.skipped);
	s->st.projects = pgm_projects(s->m);
	if (a->save && s->snapshot && !s->save_due) {
		s->save_due = true;
		pgsync_arm(s->save_ev, PGSYNC_SAVE_MS);
	}
	if (a->fetched)
		pgsync_report_soon(s);
	pgsync_apply_drop(s);
}

/* Work on the apply until deadline_ns (0: to its end): 1 while work is
 * left, 0 when it is done or dropped. */
static int pgsync_apply_step(struct pgsync *s, uint64_t deadline_ns)
{
	struct pgsync_apply *a = &s->ap;
	struct errbuf err = {""};
	int rc;

	if (a->stage == PGSYNC_MODEL) {
		rc = pgm_apply_step(a->mj, deadline_ns);
		if (rc > 0)
			return 1;
		if (rc) {
			pgsync_error(s, "the database's rows not applied: %s",
				     strerror(-rc));
			pgsync_apply_failed(s);
			return 0;
		}
		pgm_job_free(a->mj);
		a->mj = NULL;
		for (size_t i = 0; i < PGM_NSETS; i++)
			PQclear(a->set[i]);
		memset(a->set, 0, sizeof(a->set));
		a->stage = PGSYNC_SRC;
	}
	if (a->stage == PGSYNC_SRC) {
		rc = pgsync_apply_src(s, deadline_ns);
		if (rc > 0)
			return 1;
		if (rc == 0)
			rc = pgsync_apply_routes_begin(s, &err);
		if (rc) {
			pgsync_error(s, "routes not applied: %s",
				     err.msg[0] ? err.msg : strerror(-rc));
			pgsync_apply_failed(s);
			return 0;
		}
		a->stage = PGSYNC_ROUTES;
	}
	rc = s->ops->routes_step(s->arg, a->routes, deadline_ns, &err);
	if (rc > 0)
		return 1;
	a->routes = NULL; /* ended: the owner freed it */
	if (rc == -ESTALE) {
		/* the table changed under the build (a reload of the file):
		 * every project goes in again on the new one */
		log_debug("database: %s; applied again", err.msg);
		s->republish_due = true;
	} else if (rc) {
		pgsync_error(s, "routes not applied: %s", err.msg);
	}
	pgsync_apply_done(s);
	return 0;
}

/* A slice of the apply, and the next at the loop's next turn: a change
 * of 100,000 rows never holds the control loop (the admin listener, the
 * control socket) for more than about PGSYNC_SLICE_MS at a time. What
 * is due once it is done follows (a republish, the next query). */
static void pgsync_apply_run(struct pgsync *s)
{
	static const struct timeval now = {0, 0};

	if (s->ap.stage != PGSYNC_IDLE &&
	    pgsync_apply_step(s,
			      clk_fresh_ns() + PGSYNC_SLICE_MS * 1000000ull)) {
		evtimer_add(s->ap_ev, &now);
		return;
	}
	if (s->republish_due) {
		s->republish_due = false;
		pgsync_apply_start(s, NULL, NULL, 0, false, 0, 0, false);
		evtimer_add(s->ap_ev, &now);
		return;
	}
	pgsync_next(s);
}

/* The same at once, to its end (at start: nothing serves yet). */
static void pgsync_apply_now(struct pgsync *s)
{
	while (s->ap.stage != PGSYNC_IDLE)
		pgsync_apply_step(s, 0);
}

void pgsync_republish(struct pgsync *s)
{
	if (s->ap.stage != PGSYNC_IDLE) {
		s->republish_due = true; /* after the apply under way */
		return;
	}
	pgsync_apply_start(s, NULL, NULL, 0, false, 0, 0, false);
	pgsync_apply_run(s);
}

static void pgsync_fetch_done(struct pgsync *s)
{
	int i;

	if (!s->f_failed && s->f_k != PGM_NSETS) {
		pgsync_error(s, "a fetch returned %d of %d row sets", s->f_k,
			     PGM_NSETS);
		s->f_failed = true;
	}
	if (s->f_failed) {
		for (i = 0; i < PGM_NSETS; i++)
			PQclear(s->f_set[i]);
		/* everything asked for is asked for again (the check timer
		 * retries) */
		if (s->f_all)
			s->need_snapshot = true;
		for (i = 0; s->f_ids && (size_t)i < s->f_n; i++)
			pgsync_dirty_add(s, s->f_ids[i]);
		s->rules_dirty |= s->f_rules && !s->f_all;
		pgsync_ids_free(s->f_ids, s->f_n);
	} else {
		/* the sets and ids are the apply's now; it runs in slices
		 * from pgsync_result, once the query has ended */
		pgsync_apply_start(s, s->f_set, s->f_ids, s->f_n, s->f_rules,
				   s->f_version, s->f_since, true);
	}
	memset(s->f_set, 0, sizeof(s->f_set));
	s->f_ids = NULL;
	s->f_n = 0;
}

static void pgsync_result(struct pgconn *c, PGresult *res, void *arg)
{
	struct pgsync *s = arg;
	ExecStatusType st = res ? PQresultStatus(res) : PGRES_EMPTY_QUERY;
	enum pgsync_query q = s->q;

	(void)c;
	if (!res) { /* the query has ended */
		s->q = PQ_NONE;
		if (q == PQ_FETCH)
			pgsync_fetch_done(s);
		if (s->ap.stage != PGSYNC_IDLE &&
		    !evtimer_pending(s->ap_ev, NULL)) {
			static const struct timeval now = {0, 0};

			evtimer_add(s->ap_ev, &now); /* at the next turn */
		}
		if (q == PQ_LISTEN && s->listening)
			s->need_snapshot = true; /* LISTEN first, then this */
		/* a statement failed inside BEGIN ... COMMIT */
		if (pgconn_up(s->c) &&
		    PQtransactionStatus(pgconn_pg(s->c)) == PQTRANS_INERROR) {
			pgsync_query(s, PQ_ROLLBACK, "ROLLBACK", 0, NULL);
			return;
		}
		pgsync_next(s);
		return;
	}
	if (st == PGRES_FATAL_ERROR || st == PGRES_NONFATAL_ERROR) {
		const char *msg = PQresultErrorMessage(res);

		if (st == PGRES_FATAL_ERROR) {
			pgsync_error(s, "%s", msg);
			if (q == PQ_FETCH)
				s->f_failed = true;
			if (q == PQ_LISTEN)
				s->listening = false;
			if (q == PQ_CERTS)
				s->certs_failed = true;
			if (q == PQ_ACME)
				s->acme_failed = true;
		}
		PQclear(res);
		return;
	}
	switch (q) {
	case PQ_LISTEN:
		s->listening = true;
		break;
	case PQ_FETCH:
		if (st != PGRES_TUPLES_OK)
			break;
		if (!s->f_have_version) {
			s->f_have_version = true;
			s->f_version =
			    PQntuples(res) == 1
				? strtoull(PQgetvalue(res, 0, 0), NULL, 10)
				: 0;
			break;
		}
		if (s->f_k < PGM_NSETS) {
			s->f_set[s->f_k++] = res;
			return; /* kept until the fetch is done */
		}
		break;
	case PQ_ACME:
		if (st == PGRES_TUPLES_OK)
			pgsync_acme_result(s, res);
		break;
	case PQ_CERTS:
		if (st == PGRES_TUPLES_OK && s->certs_k++ == 0)
			pgsync_certs_result(s, res);
		else if (st == PGRES_TUPLES_OK)
			pgsync_chal_keys_result(s, res);
		break;
	case PQ_CHECK:
		if (st != PGRES_TUPLES_OK)
			break;
		if (s->c_k++ == 0) {
			uint64_t v =
			    PQntuples(res) == 1
				? strtoull(PQgetvalue(res, 0, 0), NULL, 10)
				: 0;

			if (v > s->st.db_version)
				s->st.db_version = v;
			break;
		}
		if (PQntuples(res) > PGSYNC_FETCH_MAX) {
			s->need_snapshot = true;
			break;
		}
		if (s->c_k == 3 && PQntuples(res) > 0) {
			s->st.late++;
			log_note("database: %d change%s committed after a "
				 "higher version and never notified (version "
				 "%s first): fetched",
				 PQntuples(res), PQntuples(res) == 1 ? "" : "s",
				 PQgetvalue(res, 0, 0));
		}
		for (int i = 0; i < PQntuples(res); i++) {
			const char *kind = PQgetvalue(res, i, 1);
			uint64_t ver =
			    strtoull(PQgetvalue(res, i, 0), NULL, 10);
			bool heard = pgsync_known_has(s, ver);

			pgsync_known_add(s, ver);
			if (strcmp(kind, "project") == 0) {
				pgsync_dirty_add(s, PQgetvalue(res, i, 2));
				continue;
			}
			/* a certificate change heard before the last good
			 * fetch was sent is in it (one heard later set
			 * certs_dirty itself): only the others are news */
			if ((strcmp(kind, "certificate") == 0 ||
			     strcmp(kind, "challenge_key") == 0) &&
			    !(heard && ver <= s->certs_have))
				s->certs_dirty = true;
			/* and the rules' fetch (small) takes the applied
			 * version past it */
			s->rules_dirty = true;
		}
		if (s->n_dirty || s->rules_dirty) {
			if (!s->dirty_since)
				s->dirty_since = clk_now_ns();
		}
		break;
	default:
		break;
	}
	PQclear(res);
}

static void pgsync_notify(struct pgconn *c, const char *channel,
			  const char *payload, void *arg)
{
	struct pgsync *s = arg;
	const char *sp = strchr(payload, ' ');
	uint64_t v;

	(void)c;
	/* a wake-up, its payload a token (no change version) */
	if (strcmp(channel, "acme_challenge_change") == 0) {
		s->acme_dirty = s->acme;
		pgsync_next(s);
		return;
	}
	v = strtoull(payload, NULL, 10);
	if (v > s->st.db_version)
		s->st.db_version = v;
	pgsync_known_add(s, v);
	if (strcmp(channel, "project_route_change") == 0 && sp && sp[1])
		pgsync_dirty_add(s, sp + 1);
	else if (strcmp(channel, "ip_rule_change") == 0)
		s->rules_dirty = true;
	else if (strcmp(channel, "certificate_change") == 0) {
		s->certs_dirty = true;
		if (v > s->certs_heard)
			s->certs_heard = v;
	}
	/* every notification is fetched: a version is no proof that the
	 * change is in the table (transactions commit out of order) */
	if (!s->dirty_since)
		s->dirty_since = clk_now_ns();
	pgsync_next(s);
}

static void pgsync_ready(struct pgconn *c, void *arg)
{
	struct pgsync *s = arg;

	(void)c;
	s->listening = false;
	s->q = PQ_NONE;
	s->certs_dirty = true; /* what changed while away */
	s->acme_dirty = s->acme;
	pgsync_set_state(s, PGSYNC_SYNCING);
	log_note("database: connected; listening and taking a snapshot");
	pgsync_next(s);
}

static void pgsync_lost(struct pgconn *c, const char *why, void *arg)
{
	struct pgsync *s = arg;
	int i;

	(void)c;
	if (s->q == PQ_FETCH) { /* asked for again after the snapshot */
		for (i = 0; i < PGM_NSETS; i++)
			PQclear(s->f_set[i]);
		memset(s->f_set, 0, sizeof(s->f_set));
		pgsync_ids_free(s->f_ids, s->f_n);
		s->f_ids = NULL;
		s->f_n = 0;
	}
	s->q = PQ_NONE;
	s->listening = false;
	s->need_snapshot = true; /* what was missed meanwhile */
	s->st.reconnects = pgconn_reconnects(s->c);
	snprintf(s->st.last_error, sizeof(s->st.last_error), "%s", why);
	if (s->st.state != PGSYNC_DOWN && s->st.state != PGSYNC_CONNECTING)
		log_warnx_rl("database: %s; serving the last table while it "
			     "is away",
			     why);
	pgsync_set_state(s, s->st.state == PGSYNC_CONNECTING ? PGSYNC_CONNECTING
							     : PGSYNC_DOWN);
}

static const struct pgconn_ops pgsync_conn_ops = {
    .ready = pgsync_ready,
    .result = pgsync_result,
    .notify = pgsync_notify,
    .lost = pgsync_lost,
};

static void pgsync_check_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pgsync *s = arg;

	(void)fd;
	(void)what;
	s->check_due = true;
	if (s->certs_failed) {
		s->certs_failed = false;
		s->certs_dirty = true;
	}
	/* a read that failed, or a challenge that expired since (its
	 * holder died before unpublishing it: nobody NOTIFYs) */
	if (s->acme && (s->acme_failed ||
			(s->acme_next_expiry &&
			 s->acme_next_expiry <=
			     (int64_t)(clk_real_ns() / 1000000000ull)))) {
		s->acme_failed = false;
		s->acme_next_expiry = 0;
		s->acme_dirty = true;
	}
	pgsync_saver_poll(s);
	pgsync_arm(s->check_ev, PGSYNC_CHECK_MS);
	pgsync_next(s);
}

static void pgsync_report_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pgsync *s = arg;

	(void)fd;
	(void)what;
	s->report_due = true;
	pgsync_arm(s->report_ev, PGSYNC_REPORT_MS);
	pgsync_next(s);
}

int pgsync_new(struct event_base *base, const struct pgsync_cfg *cfg,
	       const struct pgsync_ops *ops, void *arg, struct pgsync **out,
	       struct errbuf *err)
{
	struct pgsync *s = calloc(1, sizeof(*s));
	struct pgm *initial = cfg->initial;
	struct errbuf lerr = {""};
	uint64_t v = 0;
	char buf[256];
	int rc = -ENOMEM;

	if (!s)
		goto nomem;
	s->base = base;
	s->ops = ops;
	s->arg = arg;
	s->started = (int64_t)(clk_real_ns() / 1000000000ull);
	s->host = strdup(cfg->host_name ? cfg->host_name : "edge");
	s->version = strdup(cfg->version ? cfg->version : "");
	s->snapshot = cfg->snapshot ? strdup(cfg->snapshot) : NULL;
	s->acme = cfg->acme_challenges && ops->apply_acme_chals;
	s->check_ev = evtimer_new(base, pgsync_check_cb, s);
	s->report_ev = evtimer_new(base, pgsync_report_cb, s);
	s->save_ev = evtimer_new(base, pgsync_save_cb, s);
	s->ap_ev = evtimer_new(base, pgsync_apply_cb, s);
	if (!s->host || !s->version || (cfg->snapshot && !s->snapshot) ||
	    !s->check_ev || !s->report_ev || !s->save_ev || !s->ap_ev ||
	    pgm_new(&s->m))
		goto nomem;
	pthread_mutex_init(&s->sv_mu, NULL);
	pthread_cond_init(&s->sv_cv, NULL);
	if (s->snapshot) {
		rc = pthread_create(&s->sv_thread, NULL, pgsync_saver, s);
		if (rc == 0)
			s->sv_started = true;
		else
			log_warnx("database: no thread for the local snapshot "
				  "(%s): it is written on the control loop",
				  strerror(rc));
	}
	s->need_snapshot = true;
	s->st.since_ns = clk_now_ns();
	if (cfg->initial) {
		/* read at start: from the database (the session takes its
		 * own snapshot once it listens; the file is written anew),
		 * or the local snapshot */
		pgm_free(s->m);
		s->m = cfg->initial;
		initial = NULL;
		s->st.applied_version = cfg->initial_version;
		s->st.booted_from_snapshot = cfg->initial_from_snapshot;
		/* at once: nothing serves yet (the file written anew unless
		 * it is what was read) */
		pgsync_apply_start(s, NULL, NULL, 0, true, cfg->initial_version,
				   0, !cfg->initial_from_snapshot);
		pgsync_apply_now(s);
	} else if (s->snapshot) {
		/* the last table first: served until the database answers */
		rc = pgm_load(s->m, s->snapshot, &v, &lerr);
		if (rc == 0) {
			s->st.applied_version = v;
			s->st.booted_from_snapshot = true;
			log_note("database: serving the local snapshot %s "
				 "(change version %" PRIu64 ") until the "
				 "database answers",
				 s->snapshot, v);
			/* nothing new to save */
			pgsync_apply_start(s, NULL, NULL, 0, true, v, 0, false);
			pgsync_apply_now(s);
		} else if (rc != -ENOENT) {
			log_warnx("database: %s", lerr.msg);
		}
	}
	rc = pgconn_new(base, cfg->conninfo, "edged", &pgsync_conn_ops, s,
			&s->c, buf, sizeof(buf));
	if (rc) {
		errbuf_set(err, "pg: %s", buf[0] ? buf : strerror(-rc));
		goto fail;
	}
	pgsync_arm(s->check_ev, PGSYNC_CHECK_MS);
	pgsync_arm(s->report_ev, 500); /* soon after start */
	*out = s;
	return 0;
nomem:
	rc = -ENOMEM;
	errbuf_set(err, "pg: out of memory");
fail:
	pgm_free(initial); /* not taken yet */
	pgsync_free(s);
	return rc;
}

void pgsync_free(struct pgsync *s)
{
	int i;

	if (!s)
		return;
	if (s->save_due)
		pgsync_save_cb(-1, 0, s);
	if (s->sv_started) { /* what is pending is written first */
		pthread_mutex_lock(&s->sv_mu);
		s->sv_stop = true;
		pthread_cond_signal(&s->sv_cv);
		pthread_mutex_unlock(&s->sv_mu);
		pthread_join(s->sv_thread, NULL);
		pgsync_saver_poll(s);
	}
	pgm_snap_free(s->sv_pending);
	pgsync_apply_drop(s);
	if (s->ap_ev)
		event_free(s->ap_ev);
	pgconn_free(s->c);
	for (i = 0; i < PGM_NSETS; i++)
		PQclear(s->f_set[i]);
	pgsync_ids_free(s->f_ids, s->f_n);
	pgsync_ids_free(s->dirty, s->n_dirty);
	pgsync_ids_free(s->acme_bad, s->n_acme_bad);
	if (s->check_ev)
		event_free(s->check_ev);
	if (s->report_ev)
		event_free(s->report_ev);
	if (s->save_ev)
		event_free(s->save_ev);
	pgm_free(s->m);
	free(s->known);
	free(s->host);
	free(s->version);
	free(s->snapshot);
	free(s);
}

void pgsync_status(const struct pgsync *s, struct pgsync_status *st)
{
	*st = s->st;
	st->reconnects = pgconn_reconnects(s->c);
}

int pgsync_peer(const struct pgsync *s, struct cidr *out)
{
	PGconn *pg = pgconn_up(s->c) ? pgconn_pg(s->c) : NULL;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int fd = pg ? PQsocket(pg) : -1;

	if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &len))
		return -ENOTCONN;
	memset(out, 0, sizeof(*out));
	if (ss.ss_family == AF_INET) {
		out->family = AF_INET;
		out->prefixlen = 32;
		memcpy(out->addr, &((struct sockaddr_in *)&ss)->sin_addr, 4);
		return 0;
	}
	if (ss.ss_family != AF_INET6)
		return -EAFNOSUPPORT;
	{
		const struct in6_addr *a =
		    &((struct sockaddr_in6 *)&ss)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(a)) {
			out->family = AF_INET;
			out->prefixlen = 32;
			memcpy(out->addr, a->s6_addr + 12, 4);
		} else {
			out->family = AF_INET6;
			out->prefixlen = 128;
			memcpy(out->addr, a->s6_addr, 16);
		}
	}
	return 0;
}
