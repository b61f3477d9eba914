/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * upreg.c - the process-wide endpoint registry: a hash table by address
 * under one mutex (taken when a worker meets or forgets an endpoint, and
 * by the control thread), entries whose state and counters are relaxed
 * atomics (updated by the workers without the lock).
 */
#include <errno.h>
#include <event2/buffer.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <time.h>

#include "log.h"
#include "siphash.h"
#include "upreg.h"

#define UPREG_BUCKETS_N 256 /* hash buckets (a power of two) */

_Static_assert(UPREG_BUCKETS == 13, "upreg: the duration buckets changed");

struct upreg {
	pthread_mutex_t lock;
	struct upreg_ep *b[UPREG_BUCKETS_N];
	size_t n;
	atomic_ullong full; /* upreg_get refused: the registry was full */
};

#define RLX memory_order_relaxed

static const char *const upreg_why_texts[UPREG_WHY_MAX] = {
    [UPREG_WHY_NONE] = "failed",
#define UPREG_WHY_TEXT(id, text) [UPREG_WHY_##id] = text,
    UPREG_WHYS(UPREG_WHY_TEXT)
#undef UPREG_WHY_TEXT
};

const char *upreg_why_text(enum upreg_why why)
{
	return (unsigned)why < UPREG_WHY_MAX ? upreg_why_texts[why] : "failed";
}

const char *upreg_why_format(enum upreg_why why, int err, char *buf, size_t len)
{
	char ebuf[96];

	if (err)
		snprintf(buf, len, "%s: %s", upreg_why_text(why),
			 strerror_r(err, ebuf, sizeof(ebuf)));
	else
		snprintf(buf, len, "%s", upreg_why_text(why));
	return buf;
}

/* One line a second per endpoint and reason. */
#define UPREG_LOG_INTERVAL_MS 1000

size_t upreg_addr_key(const struct config_addr *a, uint8_t k[UPREG_KEY_MAX])
{
	k[0] = (uint8_t)a->scheme;
	if (a->ss.ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const void *)&a->ss;

		k[1] = 4;
		memcpy(k + 2, &s4->sin_port, 2);
		memcpy(k + 4, &s4->sin_addr, 4);
		return 8;
	}
	if (a->ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)&a->ss;

		k[1] = 6;
		memcpy(k + 2, &s6->sin6_port, 2);
		memcpy(k + 4, &s6->sin6_addr, 16);
		return 20;
	}
	if (a->ss.ss_family == AF_UNIX) {
		const struct sockaddr_un *un = (const void *)&a->ss;
		size_t n = strnlen(un->sun_path, sizeof(un->sun_path));

		_Static_assert(sizeof(un->sun_path) + 2 <= UPREG_KEY_MAX,
			       "a Unix path fits the key");
		k[1] = 1;
		memcpy(k + 2, un->sun_path, n);
		return 2 + n;
	}
	k[1] = 0;
	return 2;
}

bool upreg_addr_eq(const struct config_addr *a, const struct config_addr *b)
{
	uint8_t ka[UPREG_KEY_MAX], kb[UPREG_KEY_MAX];
	size_t na = upreg_addr_key(a, ka), nb = upreg_addr_key(b, kb);

	return na == nb && memcmp(ka, kb, na) == 0;
}

uint64_t upreg_addr_hash(const struct config_addr *a)
{
	uint8_t k[UPREG_KEY_MAX];
	size_t n = upreg_addr_key(a, k);

	return siphash_key(k, n);
}

struct upreg *upreg_new(void)
{
	struct upreg *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	pthread_mutex_init(&g->lock, NULL);
	return g;
}

/* Say what e held back for why: n failures no line has counted. */
static void upreg_say_held(const struct upreg_ep *e, unsigned why, uint64_t n)
{
	log_warnx_held(NULL, n, "upstream %s: %s, and more held back",
		       e->addr.text, upreg_why_text((enum upreg_why)why));
}

/* Say every count e holds back now, whatever its limit (e goes away). */
static void upreg_say_all_held(struct upreg_ep *e)
{
	unsigned i;
	uint64_t n;

	for (i = 0; i < UPREG_WHY_LOGGED; i++) {
		n = atomic_exchange_explicit(&e->log[i].suppressed, 0, RLX);
		if (n)
			upreg_say_held(e, i, n);
	}
}

void upreg_free(struct upreg *g)
{
	size_t i;

	if (!g)
		return;
	for (i = 0; i < UPREG_BUCKETS_N; i++) {
		struct upreg_ep *e = g->b[i], *next;

		for (; e; e = next) {
			next = e->next;
			upreg_say_all_held(e);
			free(e);
		}
	}
	pthread_mutex_destroy(&g->lock);
	free(g);
}

/* The entry for a (lock held), created if new and create; NULL if none
 * (or full: *full set, or no memory). */
static struct upreg_ep *upreg_find(struct upreg *g, const struct config_addr *a,
				   bool create, bool *full)
{
	uint64_t h = upreg_addr_hash(a);
	struct upreg_ep *e, **head = &g->b[h & (UPREG_BUCKETS_N - 1)];
	unsigned i;

	*full = false;
	for (e = *head; e; e = e->next)
		if (e->hash == h && upreg_addr_eq(&e->addr, a))
			return e;
	if (!create)
		return NULL;
	if (g->n >= UPREG_MAX) {
		*full = true;
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	for (i = 0; i < UPREG_WHY_LOGGED; i++)
		e->log[i].interval_ns = UPREG_LOG_INTERVAL_MS * 1000000ull;
	/* burst 0 counts as 1: one line, then one a second */
	e->hash = h;
	e->addr = *a;
	e->next = *head;
	*head = e;
	g->n++;
	return e;
}

/* Free e (lock held) when nothing keeps it: no reference, enabled. */
static void upreg_maybe_free(struct upreg *g, struct upreg_ep *e)
{
	struct upreg_ep **pp = &g->b[e->hash & (UPREG_BUCKETS_N - 1)];

	if (e->refs || atomic_load(&e->admin) != UPREG_ENABLED)
		return;
	for (; *pp; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			g->n--;
			upreg_say_all_held(e);
			free(e);
			return;
		}
}

struct upreg_ep *upreg_get(struct upreg *g, const struct config_addr *a)
{
	struct upreg_ep *e;
	bool full;

	pthread_mutex_lock(&g->lock);
	e = upreg_find(g, a, true, &full);
	if (e)
		e->refs++;
	else if (full)
		atomic_fetch_add(&g->full, 1);
	pthread_mutex_unlock(&g->lock);
	return e;
}

void upreg_put(struct upreg *g, struct upreg_ep *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&g->lock);
	if (e->refs)
		e->refs--;
	upreg_maybe_free(g, e);
	pthread_mutex_unlock(&g->lock);
}

int upreg_set_admin(struct upreg *g, const struct config_addr *a,
		    enum upreg_admin s, enum upreg_admin *old)
{
	struct upreg_ep *e;
	enum upreg_admin was = UPREG_ENABLED;
	bool full;
	int rc = 0;

	pthread_mutex_lock(&g->lock);
	e = upreg_find(g, a, s != UPREG_ENABLED, &full);
	if (e) {
		was = (enum upreg_admin)atomic_exchange(&e->admin, (int)s);
		upreg_maybe_free(g, e);
	} else if (s != UPREG_ENABLED) {
		rc = full ? -ENOSPC : -ENOMEM;
	}
	pthread_mutex_unlock(&g->lock);
	if (old)
		*old = was;
	return rc;
}

bool upreg_known(struct upreg *g, const struct config_addr *a)
{
	bool full, known;

	pthread_mutex_lock(&g->lock);
	known = upreg_find(g, a, false, &full) != NULL;
	pthread_mutex_unlock(&g->lock);
	return known;
}

size_t upreg_count(struct upreg *g)
{
	size_t n;

	pthread_mutex_lock(&g->lock);
	n = g->n;
	pthread_mutex_unlock(&g->lock);
	return n;
}

uint64_t upreg_full(struct upreg *g)
{
	return atomic_load(&g->full);
}

/* ---- the fast path ------------------------------------------------------ */

bool upreg_selectable(const struct upreg_ep *e)
{
	return !e || (atomic_load_explicit(&e->admin, RLX) == UPREG_ENABLED &&
		      !atomic_load_explicit(&e->active_down, RLX));
}

void upreg_count_request(struct upreg_ep *e)
{
	if (e)
		atomic_fetch_add_explicit(&e->requests, 1, RLX);
}

void upreg_count_inflight(struct upreg_ep *e, int delta)
{
	if (!e || !delta)
		return;
	if (delta > 0)
		atomic_fetch_add_explicit(&e->inflight, (unsigned)delta, RLX);
	else
		atomic_fetch_sub_explicit(&e->inflight, (unsigned)-delta, RLX);
}

bool upreg_inflight_take(struct upreg_ep *e, unsigned cap)
{
	unsigned n = atomic_load_explicit(&e->inflight, RLX);

	do {
		if (n >= cap)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&e->inflight, &n, n + 1,
							RLX, RLX));
	return true;
}

unsigned upreg_inflight(const struct upreg_ep *e)
{
	return atomic_load_explicit(&e->inflight, RLX);
}

void upreg_count_connect(struct upreg_ep *e, uint64_t ns)
{
	if (e)
		metrics_buckets_observe(metrics_duration_bounds_ns,
					UPREG_BUCKETS, e->connect_ns,
					&e->connect_sum, ns);
}

void upreg_count_response(struct upreg_ep *e, int status, uint64_t ns)
{
	if (!e)
		return;
	if (status >= 100 && status <= 599)
		atomic_fetch_add_explicit(&e->responses[status / 100 - 1], 1,
					  RLX);
	metrics_buckets_observe(metrics_duration_bounds_ns, UPREG_BUCKETS,
				e->response_ns, &e->response_sum, ns);
}

void upreg_count_bytes(struct upreg_ep *e, uint64_t sent, uint64_t received)
{
	if (!e)
		return;
	atomic_fetch_add_explicit(&e->bytes_sent, sent, RLX);
	atomic_fetch_add_explicit(&e->bytes_received, received, RLX);
}

void upreg_set_proto(struct upreg_ep *e, int version)
{
	if (e && atomic_load_explicit(&e->proto, RLX) != version)
		atomic_store_explicit(&e->proto, version, RLX);
}

static const char *upreg_proto_name(const struct upreg_ep *e)
{
	int v = atomic_load_explicit(&e->proto, RLX);

	if (v == 0)
		v = e->addr.scheme == CONFIG_SCHEME_H2C ? 2 : 1;
	return v == 2 ? "h2" : "h1";
}

void upreg_set_tls(struct upreg_ep *e, enum upreg_tls s)
{
	if (e && atomic_load_explicit(&e->tls, RLX) != (int)s)
		atomic_store_explicit(&e->tls, (int)s, RLX);
}

/* The TLS column: "-" for an endpoint without TLS. */
static const char *upreg_tls_name(const struct upreg_ep *e)
{
	static const char *const n[] = {"none", "verified", "unverified",
					"failed"};
	int s = atomic_load_explicit(&e->tls, RLX);

	if (e->addr.scheme != CONFIG_SCHEME_HTTPS)
		return "-";
	return s >= 0 && s < 4 ? n[s] : "?";
}

void upreg_set_failure(struct upreg_ep *e, enum upreg_why why, int err)
{
	uint64_t at = (uint64_t)time(NULL) & 0xffffffffu;

	if (!e)
		return;
	if ((unsigned)why >= UPREG_WHY_MAX)
		why = UPREG_WHY_NONE;
	if (err < 0 || err > 0xffff)
		err = 0;
	/* never 0 (none): time() is not */
	atomic_store_explicit(&e->last_failure,
			      at << 32 | (uint64_t)why << 16 | (uint64_t)err,
			      RLX);
}

bool upreg_last_failure(const struct upreg_ep *e, enum upreg_why *why, int *err,
			uint64_t *at)
{
	uint64_t v = atomic_load_explicit(&e->last_failure, RLX);
	unsigned w = (unsigned)(v >> 16 & 0xffff);

	if (!v)
		return false;
	*why = w < UPREG_WHY_MAX ? (enum upreg_why)w : UPREG_WHY_NONE;
	*err = (int)(v & 0xffff);
	*at = v >> 32;
	return true;
}

const char *upreg_last_error(const struct upreg_ep *e, char *buf, size_t len)
{
	enum upreg_why why;
	uint64_t at;
	int err;

	if (!upreg_last_failure(e, &why, &err, &at))
		return NULL;
	return upreg_why_format(why, err, buf, len);
}

void upreg_count_failure(struct upreg_ep *e, enum upreg_why why, int err)
{
	if (!e)
		return;
	atomic_fetch_add_explicit(&e->failures, 1, RLX);
	if (why == UPREG_WHY_CONNECT || why == UPREG_WHY_CONNECT_TIMEOUT)
		atomic_fetch_add_explicit(&e->connect_errors, 1, RLX);
	upreg_set_failure(e, why, err);
}

bool upreg_log_allow(struct upreg_ep *e, enum upreg_why why, uint64_t *held)
{
	static struct log_site nobody =
	    LOG_SITE_INIT(LOG_RL_BURST, LOG_RL_INTERVAL_MS);
	struct log_site *site;

	*held = 0;
	if (!e || (unsigned)why >= UPREG_WHY_LOGGED)
		return log_site_allow(&nobody, log_clock_ns(), held);
	site = &e->log[why];
	return log_site_allow(site, log_clock_ns(), held);
}

size_t upreg_log_held(struct upreg *g)
{
	uint64_t now = log_clock_ns(), n;
	size_t i, lines = 0;
	unsigned k;

	/* at most UPREG_MAX * UPREG_WHY_LOGGED relaxed loads */
	pthread_mutex_lock(&g->lock);
	for (i = 0; i < UPREG_BUCKETS_N; i++) {
		struct upreg_ep *e;

		for (e = g->b[i]; e; e = e->next)
			for (k = 0; k < UPREG_WHY_LOGGED; k++)
				if (log_site_take_held(&e->log[k], now, &n)) {
					upreg_say_held(e, k, n);
					lines++;
				}
	}
	pthread_mutex_unlock(&g->lock);
	return lines;
}

bool upreg_ejected(struct upreg_ep *e, unsigned failures, enum upreg_why why,
		   int err, uint64_t for_ns)
{
	char text[UPREG_WHY_STR_MAX];

	if (!e || atomic_fetch_add(&e->ejected_by, 1) != 0)
		return false;
	atomic_fetch_add_explicit(&e->ejections, 1, RLX);
	log_warnx("upstream %s ejected: %u consecutive failure%s (last: %s); "
		  "next try in %llu ms",
		  e->addr.text, failures, failures == 1 ? "" : "s",
		  upreg_why_format(why, err, text, sizeof(text)),
		  (unsigned long long)(for_ns / 1000000));
	return true;
}

bool upreg_returned(struct upreg_ep *e)
{
	unsigned n;

	if (!e)
		return false;
	n = atomic_load(&e->ejected_by);
	do {
		if (n == 0)
			return false;
	} while (!atomic_compare_exchange_weak(&e->ejected_by, &n, n - 1));
	if (n != 1)
		return false;
	log_note("upstream %s is back: a request succeeded", e->addr.text);
	return true;
}

const char *upreg_health(const struct upreg_ep *e)
{
	if (atomic_load_explicit(&e->active_down, RLX))
		return "down";
	if (atomic_load_explicit(&e->ejected_by, RLX))
		return "ejected";
	return "healthy";
}

static const char *const upreg_admin_names[] = {"enabled", "drain", "disabled"};

const char *upreg_admin_name(enum upreg_admin s)
{
	return (unsigned)s < 3 ? upreg_admin_names[s] : "?";
}

int upreg_admin_parse(const char *s, enum upreg_admin *out)
{
	unsigned i;

	for (i = 0; s && i < 3; i++)
		if (strcmp(s, upreg_admin_names[i]) == 0) {
			*out = (enum upreg_admin)i;
			return 0;
		}
	return -EINVAL;
}

/* ---- the control thread's views ----------------------------------------- */

static json_t *upreg_ep_json(const struct upreg_ep *e)
{
	static const char *const cls[UPREG_CLASSES] = {"1xx", "2xx", "3xx",
						       "4xx", "5xx"};
	json_t *o, *r = json_object();
	char text[UPREG_WHY_STR_MAX];
	enum upreg_why why;
	uint64_t at = 0, now = (uint64_t)time(NULL);
	int err;
	bool failed = upreg_last_failure(e, &why, &err, &at);
	unsigned i;

	if (!r)
		return NULL;
	for (i = 0; i < UPREG_CLASSES; i++)
		json_object_set_new(
		    r, cls[i],
		    json_integer((json_int_t)atomic_load_explicit(
			&e->responses[i], RLX)));
	o = json_pack(
	    "{s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:o,s:I,s:I,s:I,s:I,s:I,s:o,s:I,"
	    "s:o}",
	    "address", e->addr.text, "scheme",
	    config_scheme_name(e->addr.scheme), "protocol", upreg_proto_name(e),
	    "tls", upreg_tls_name(e), "admin",
	    upreg_admin_name(upreg_admin_of(e)), "health", upreg_health(e),
	    "inflight", (json_int_t)atomic_load_explicit(&e->inflight, RLX),
	    "requests", (json_int_t)atomic_load_explicit(&e->requests, RLX),
	    "responses", r, "connect_errors",
	    (json_int_t)atomic_load_explicit(&e->connect_errors, RLX),
	    "failures", (json_int_t)atomic_load_explicit(&e->failures, RLX),
	    "ejections", (json_int_t)atomic_load_explicit(&e->ejections, RLX),
	    "bytes_sent", (json_int_t)atomic_load_explicit(&e->bytes_sent, RLX),
	    "bytes_received",
	    (json_int_t)atomic_load_explicit(&e->bytes_received, RLX),
	    "last_error",
	    failed ? json_string(upreg_why_format(why, err, text, sizeof(text)))
		   : json_null(),
	    "last_error_at", (json_int_t)at, "last_error_age",
	    failed ? json_integer((json_int_t)(now > at ? now - at : 0))
		   : json_null());
	return o;
}

json_t *upreg_dump_json(struct upreg *g)
{
	json_t *all = json_object();
	size_t i;

	if (!all)
		return NULL;
	pthread_mutex_lock(&g->lock);
	for (i = 0; i < UPREG_BUCKETS_N; i++) {
		const struct upreg_ep *e;

		for (e = g->b[i]; e; e = e->next) {
			json_t *o = upreg_ep_json(e);

			if (!o || json_object_set_new(all, e->addr.text, o)) {
				json_decref(all);
				all = NULL;
				goto out;
			}
		}
	}
out:
	pthread_mutex_unlock(&g->lock);
	return all;
}

/* One family over every entry (lock held). */
enum upreg_fam {
	UPREG_F_HEALTHY,
	UPREG_F_ADMIN,
	UPREG_F_INFLIGHT,
	UPREG_F_REQUESTS,
	UPREG_F_RESPONSES,
	UPREG_F_CONNECT_ERRORS,
	UPREG_F_FAILURES,
	UPREG_F_EJECTIONS,
	UPREG_F_BYTES,
	UPREG_F_CONNECT_TIME,
	UPREG_F_RESPONSE_TIME,
	UPREG_F_MAX,
};

static const struct {
	const char *name, *help, *type;
} upreg_fams[UPREG_F_MAX] = {
    [UPREG_F_HEALTHY] = {"edge_upstream_endpoint_healthy",
			 "1 while the endpoint is healthy, 0 while some "
			 "worker's passive health has it ejected or its "
			 "active check fails.",
			 "gauge"},
    [UPREG_F_ADMIN] = {"edge_upstream_endpoint_admin_state",
		       "The endpoint's admin state (edgectl upstream): 1 "
		       "for the current one.",
		       "gauge"},
    [UPREG_F_INFLIGHT] = {"edge_upstream_endpoint_inflight",
			  "Requests and TCP connections in flight to the "
			  "endpoint (every worker).",
			  "gauge"},
    [UPREG_F_REQUESTS] = {"edge_upstream_endpoint_requests_total",
			  "Attempts sent to the endpoint (a retry on "
			  "another endpoint counts there).",
			  "counter"},
    [UPREG_F_RESPONSES] = {"edge_upstream_endpoint_responses_total",
			   "Response heads from the endpoint, by status "
			   "class.",
			   "counter"},
    [UPREG_F_CONNECT_ERRORS] = {"edge_upstream_endpoint_connect_errors_"
				"total",
				"Connects to the endpoint that failed or "
				"timed out.",
				"counter"},
    [UPREG_F_FAILURES] = {"edge_upstream_endpoint_failures_total",
			  "Attempts the endpoint failed (what passive "
			  "health counts).",
			  "counter"},
    [UPREG_F_EJECTIONS] = {"edge_upstream_endpoint_ejections_total",
			   "Times the endpoint went from healthy to ejected "
			   "(counted once, whichever workers eject it).",
			   "counter"},
    [UPREG_F_BYTES] = {"edge_upstream_endpoint_bytes_total",
		       "Bytes of the requests the endpoint served: sent "
		       "(from the client towards it) and received (from it "
		       "towards the client).",
		       "counter"},
    [UPREG_F_CONNECT_TIME] = {"edge_upstream_endpoint_connect_seconds",
			      "Time to connect to the endpoint (new "
			      "connections only).",
			      "histogram"},
    [UPREG_F_RESPONSE_TIME] = {"edge_upstream_endpoint_response_seconds",
			       "Attempt start (connect or pooled "
			       "connection) to the response head.",
			       "histogram"},
};

static int upreg_render_ep(struct evbuffer *out, enum upreg_fam f,
			   const struct upreg_ep *e)
{
	static const char *const cls[UPREG_CLASSES] = {"1xx", "2xx", "3xx",
						       "4xx", "5xx"};
	const char *n = upreg_fams[f].name, *a = e->addr.text;
	char lab[CONFIG_ADDR_STR_MAX + 16];
	unsigned i;
	int rc = 0;

#define U(x) ((unsigned long long)atomic_load_explicit(&(x), RLX))
#define P(...)                                                                 \
	do {                                                                   \
		if (evbuffer_add_printf(out, __VA_ARGS__) < 0)                 \
			rc = -ENOMEM;                                          \
	} while (0)
	switch (f) {
	case UPREG_F_HEALTHY:
		P("%s{endpoint=\"%s\"} %d\n", n, a,
		  strcmp(upreg_health(e), "healthy") == 0);
		break;
	case UPREG_F_ADMIN:
		for (i = 0; i < 3; i++)
			P("%s{endpoint=\"%s\",state=\"%s\"} %d\n", n, a,
			  upreg_admin_names[i], upreg_admin_of(e) == i);
		break;
	case UPREG_F_INFLIGHT:
		P("%s{endpoint=\"%s\"} %llu\n", n, a, U(e->inflight));
		break;
	case UPREG_F_REQUESTS:
		P("%s{endpoint=\"%s\"} %llu\n", n, a, U(e->requests));
		break;
	case UPREG_F_RESPONSES:
		for (i = 0; i < UPREG_CLASSES; i++)
			P("%s{endpoint=\"%s\",class=\"%s\"} %llu\n", n, a,
			  cls[i], U(e->responses[i]));
		break;
	case UPREG_F_CONNECT_ERRORS:
		P("%s{endpoint=\"%s\"} %llu\n", n, a, U(e->connect_errors));
		break;
	case UPREG_F_FAILURES:
		P("%s{endpoint=\"%s\"} %llu\n", n, a, U(e->failures));
		break;
	case UPREG_F_EJECTIONS:
		P("%s{endpoint=\"%s\"} %llu\n", n, a, U(e->ejections));
		break;
	case UPREG_F_BYTES:
		P("%s{endpoint=\"%s\",direction=\"sent\"} %llu\n", n, a,
		  U(e->bytes_sent));
		P("%s{endpoint=\"%s\",direction=\"received\"} %llu\n", n, a,
		  U(e->bytes_received));
		break;
	case UPREG_F_CONNECT_TIME:
	case UPREG_F_RESPONSE_TIME:
		snprintf(lab, sizeof(lab), "endpoint=\"%s\"", a);
		if (f == UPREG_F_CONNECT_TIME)
			rc = metrics_render_buckets(
			    out, n, lab, metrics_duration_bounds_ns,
			    UPREG_BUCKETS, e->connect_ns, &e->connect_sum,
			    1000000000);
		else
			rc = metrics_render_buckets(
			    out, n, lab, metrics_duration_bounds_ns,
			    UPREG_BUCKETS, e->response_ns, &e->response_sum,
			    1000000000);
		break;
	default:
		break;
	}
#undef P
#undef U
	return rc;
}

int upreg_render(struct upreg *g, struct evbuffer *out)
{
	unsigned f;
	size_t i;
	int rc = 0;

	pthread_mutex_lock(&g->lock);
	for (f = 0; f < UPREG_F_MAX && rc == 0 && g->n; f++) {
		rc =
		    metrics_render_help(out, upreg_fams[f].name,
					upreg_fams[f].help, upreg_fams[f].type);
		for (i = 0; i < UPREG_BUCKETS_N && rc == 0; i++) {
			const struct upreg_ep *e;

			for (e = g->b[i]; e && rc == 0; e = e->next)
				rc = upreg_render_ep(out, (enum upreg_fam)f, e);
		}
	}
	pthread_mutex_unlock(&g->lock);
	return rc;
}
