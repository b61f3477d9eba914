/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * upreg.h - the process-wide endpoint registry: one entry per upstream
 * endpoint (address and port) however many workers and routes use it,
 * holding what the operator sees and sets: the admin state (enabled,
 * drain, disabled), the health as a whole (ejected by any worker's
 * passive health, or failing its active check), the in-flight count,
 * the endpoint's counters and time histograms, its last failure, and the
 * log limit of its failures (one line a second per reason).
 *
 * Each worker's struct upstream_ep (upstream.h) holds a reference to its
 * endpoint's entry, taken when the worker first meets the endpoint and
 * put when it forgets it: the table and its mutex are touched only then,
 * and by the control thread (edgectl, a scrape). Everything a request
 * touches is a relaxed atomic of the entry: no lock per request.
 *
 * Bounded: at most UPREG_MAX entries; past it, upreg_get returns NULL and
 * the endpoint works without shared state (counted in upreg_full()). An
 * entry is freed when its last reference goes, unless it holds an admin
 * state other than enabled (an operator's drain outlives a reload that
 * re-creates the workers' endpoints, and only `enable` forgets it).
 */
#ifndef EDGE_UPREG_H
#define EDGE_UPREG_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "log.h"
#include "metrics.h"

/* Most endpoints the registry holds at once. */
#define UPREG_MAX 4096
/* Status classes counted per endpoint: 1xx .. 5xx. */
#define UPREG_CLASSES 5
/* Buckets of the per-endpoint time histograms (metrics_duration_bounds_ns). */
#define UPREG_BUCKETS 13

enum upreg_admin {
	UPREG_ENABLED = 0, /* chosen as usual */
	UPREG_DRAIN,	   /* no new requests nor connections; in-flight
			      ones finish; chosen only in panic mode */
	UPREG_DISABLED,	   /* as drain, and never chosen, not even in
			      panic mode */
};

/*
 * Why an endpoint failed a request, as logs and edgectl say it (with the
 * errno's text after it where there is one: "connect failed: Connection
 * refused"). The requests' reasons come first, each logged at most once a
 * second per endpoint (upreg_log_allow): an attempt's (passive health
 * counts them: upstream_report_why), then a response's body (after its
 * head: not the attempt's failure, but the endpoint's last failure all
 * the same). Then the active health check's (hcheck.c), which log only
 * when they eject.
 */
#define UPREG_WHYS(X)                                                          \
	X(CONNECT, "connect failed")                                           \
	X(CONNECT_TIMEOUT, "connect timed out")                                \
	X(RESPONSE_TIMEOUT, "no response head in time")                        \
	X(CLOSED, "closed without a response head")                            \
	X(BAD_RESPONSE, "bad response head")                                   \
	X(BAD_UPGRADE, "101 to a protocol not asked for")                      \
	X(BAD_CHUNK, "bad first chunk line")                                   \
	X(BODY_TIMEOUT, "response body timed out")                             \
	X(BODY_CLOSED, "closed before the end of the response body")           \
	X(TLS, "TLS failed")                                                   \
	X(BAD_BODY, "bad response body")                                       \
	X(HC_CONNECT, "health check: connect failed")                          \
	X(HC_CONNECT_TIMEOUT, "health check: connect timed out")               \
	X(HC_TLS, "health check: TLS failed")                                  \
	X(HC_TIMEOUT, "health check: no status line in time")                  \
	X(HC_CLOSED, "health check: closed before a status line")              \
	X(HC_READ, "health check: read error")                                 \
	X(HC_LINE_TOO_LONG, "health check: status line too long")              \
	X(HC_NOT_HTTP, "health check: not an HTTP response")                   \
	X(HC_5XX, "health check: status 5xx")                                  \
	X(HC_4XX, "health check: status 4xx")                                  \
	X(HC_STATUS, "health check: unexpected status")                        \
	X(HC_NOMEM, "health check: out of memory")

enum upreg_why {
	UPREG_WHY_NONE = 0, /* no failure yet */
#define UPREG_WHY_ENUM(id, text) UPREG_WHY_##id,
	UPREG_WHYS(UPREG_WHY_ENUM)
#undef UPREG_WHY_ENUM
	    UPREG_WHY_MAX,
};

/* The requests' reasons (each limited per endpoint): below this. */
#define UPREG_WHY_LOGGED (UPREG_WHY_BAD_BODY + 1)

/* "connect failed" ... ("failed" for NONE or out of range). */
const char *upreg_why_text(enum upreg_why why);

/* The reason's text, then ": " and strerror(err) when err is not 0, in
 * buf (always terminated, cut to len). Returns buf. */
const char *upreg_why_format(enum upreg_why why, int err, char *buf,
			     size_t len);

/* The longest upreg_why_format text. */
#define UPREG_WHY_STR_MAX 128

struct upreg;

struct upreg_ep {
	/* table: under the registry's lock */
	struct upreg_ep *next;
	uint64_t hash;
	unsigned refs;
	struct config_addr addr;
	/* read on every select */
	atomic_int admin;	 /* enum upreg_admin */
	atomic_uint ejected_by;	 /* workers that have it ejected now */
	atomic_bool active_down; /* failing its active health check */
	atomic_uint inflight;	 /* summed over workers */
	/* counters */
	atomic_ullong requests; /* attempts sent to it (selections) */
	atomic_ullong responses[UPREG_CLASSES]; /* response heads, by class */
	atomic_ullong connect_errors; /* connects failed or timed out */
	atomic_ullong failures;	      /* reported failures (passive health) */
	atomic_ullong ejections;      /* 0 -> 1 transitions of ejected_by */
	atomic_ullong bytes_sent, bytes_received;
	_Atomic uint64_t connect_ns[UPREG_BUCKETS + 1], connect_sum;
	_Atomic uint64_t response_ns[UPREG_BUCKETS + 1], response_sum;
	/* the last failure, one word: its wall-clock time (s) << 32 | why
	 * << 16 | its errno (upreg_last_failure reads it) */
	_Atomic uint64_t last_failure;
	/* the log limit of each request reason (upreg_log_allow) */
	struct log_site log[UPREG_WHY_LOGGED];
	atomic_int tls;	  /* enum upreg_tls: its last TLS connection's */
	atomic_int proto; /* the HTTP version of its last response: 1 or 2,
			     0 none yet */
};

/* An endpoint as bytes: scheme (1), family (1), then port (2) and
 * address (4 or 16), or a Unix socket's path; the length. Equality and
 * hash of that key: what identifies an endpoint here and in upstream.c
 * (the same address under two schemes is two endpoints). */
#define UPREG_KEY_MAX (2 + 108)
size_t upreg_addr_key(const struct config_addr *a, uint8_t k[UPREG_KEY_MAX]);
bool upreg_addr_eq(const struct config_addr *a, const struct config_addr *b);
uint64_t upreg_addr_hash(const struct config_addr *a);

/* A new empty registry, or NULL when out of memory. */
struct upreg *upreg_new(void);

/* Free it and every entry (none may still be referenced). NULL ok. */
void upreg_free(struct upreg *g);

/* The entry of address a with a reference taken (created enabled and
 * healthy if new), or NULL when the registry is full or out of memory. */
struct upreg_ep *upreg_get(struct upreg *g, const struct config_addr *a);

/* Put a reference from upreg_get; e may be NULL. */
void upreg_put(struct upreg *g, struct upreg_ep *e);

/*
 * Set the admin state of the endpoint a ("ADDR:PORT" as config_addr_parse
 * reads it) and return the previous one in *old (may be NULL). An entry is
 * created for an endpoint no worker has met yet. Returns 0, -ENOSPC (full)
 * or -ENOMEM.
 */
int upreg_set_admin(struct upreg *g, const struct config_addr *a,
		    enum upreg_admin s, enum upreg_admin *old);

/* Whether the registry has an entry for a (a worker has met it, or it has
 * an admin state). */
bool upreg_known(struct upreg *g, const struct config_addr *a);

/* Entries now; upreg_get calls refused because the registry was full. */
size_t upreg_count(struct upreg *g);
uint64_t upreg_full(struct upreg *g);

/* The fast path: relaxed atomics only, e may be NULL (then nothing). */
static inline enum upreg_admin upreg_admin_of(const struct upreg_ep *e)
{
	return e ? (enum upreg_admin)atomic_load_explicit(&e->admin,
							  memory_order_relaxed)
		 : UPREG_ENABLED;
}

/* Whether a normal selection may choose e: enabled and not failing its
 * active check (passive health is per worker: upstream.c). */
bool upreg_selectable(const struct upreg_ep *e);

void upreg_count_request(struct upreg_ep *e);
void upreg_count_inflight(struct upreg_ep *e, int delta);
/* Count one request in flight on e if fewer than cap are (every worker's
 * together): whether it was counted. */
bool upreg_inflight_take(struct upreg_ep *e, unsigned cap);
/* e's requests in flight, every worker's together. */
unsigned upreg_inflight(const struct upreg_ep *e);
void upreg_count_connect(struct upreg_ep *e, uint64_t ns);
void upreg_count_response(struct upreg_ep *e, int status, uint64_t ns);
void upreg_count_bytes(struct upreg_ep *e, uint64_t sent, uint64_t received);
/* A failed attempt (why, and its errno or 0): counted, and kept as e's
 * last failure; a connect that failed or timed out counts as a connect
 * error too. */
void upreg_count_failure(struct upreg_ep *e, enum upreg_why why, int err);

/* Set e's last failure (why, err, now) without counting it (the active
 * health check's). */
void upreg_set_failure(struct upreg_ep *e, enum upreg_why why, int err);

/* What an https:// endpoint's last TLS connection was (edgectl upstream
 * list's TLS column). */
enum upreg_tls {
	UPREG_TLS_NONE = 0,   /* none yet ("none") */
	UPREG_TLS_VERIFIED,   /* its certificate verified */
	UPREG_TLS_UNVERIFIED, /* taken unverified (tls.verify = false) */
	UPREG_TLS_FAILED,     /* the handshake or the verification failed */
};

/* Note e's last TLS connection's state (e may be NULL). */
void upreg_set_tls(struct upreg_ep *e, enum upreg_tls s);

/* The HTTP version e's last response came in (1 or 2): the protocol
 * column ("h1", "h2"; before any response, h2 for h2c://, else h1). */
void upreg_set_proto(struct upreg_ep *e, int version);

/* e's last failure: false when it has none; else its reason, errno and
 * wall-clock time (unix seconds). */
bool upreg_last_failure(const struct upreg_ep *e, enum upreg_why *why, int *err,
			uint64_t *at);

/* e's last failure as text (upreg_why_format) in buf, or NULL when it
 * has none. */
const char *upreg_last_error(const struct upreg_ep *e, char *buf, size_t len);

/*
 * The log limit of failures: whether a line about a failure of e for why
 * (< UPREG_WHY_LOGGED) may be written now, at most one per endpoint and
 * reason a second, whichever worker asks. If so, *held is the number
 * held back since the previous line (the caller writes it with its line:
 * log_warnx_held); if not, the failure is counted as held back and
 * upreg_log_held says the count once the second is over, unless a line
 * let through meanwhile did. e NULL (a full registry): one limit for all
 * such endpoints, of LOG_RL_BURST lines at once. Thread-safe, lock-free.
 */
bool upreg_log_allow(struct upreg_ep *e, enum upreg_why why, uint64_t *held);

/*
 * For every endpoint and reason whose held-back failures no line has
 * counted yet and whose second is over, write "upstream ADDR: WHY, and
 * more held back (N suppressed)". Run by the control loop a few times a
 * second: a held-back count is said within about a second, whether or
 * not another failure comes. Counts left when an entry is freed, and at
 * upreg_free, are said then. Returns the lines written.
 */
size_t upreg_log_held(struct upreg *g);

/*
 * Passive health, once per endpoint rather than per worker: a worker
 * ejecting e calls upreg_ejected (the first worker to do so logs
 * "upstream ADDR ejected: WHY", and counts an ejection), a worker ending
 * its ejection (a success) calls upreg_returned (the last one logs
 * "upstream ADDR is back"). Returns whether this call logged.
 */
bool upreg_ejected(struct upreg_ep *e, unsigned failures, enum upreg_why why,
		   int err, uint64_t for_ns);
bool upreg_returned(struct upreg_ep *e);

/* The operator's view of e's health: "healthy", "ejected" (by passive
 * health, in some worker) or "down" (its active check fails). */
const char *upreg_health(const struct upreg_ep *e);

/* "enabled", "drain", "disabled"; and back (0 or -EINVAL). */
const char *upreg_admin_name(enum upreg_admin s);
int upreg_admin_parse(const char *s, enum upreg_admin *out);

/* Every entry as a JSON object {"address", "admin", "health", "inflight",
 * "requests", "responses": {"2xx":..}, "connect_errors", "failures",
 * "ejections", "bytes_sent", "bytes_received", "last_error" (null or
 * upreg_why_format's text), "last_error_at" (unix seconds, 0: none),
 * "last_error_age" (seconds ago, null: none)} in an object keyed by
 * address; NULL when out of memory. */
json_t *upreg_dump_json(struct upreg *g);

/* The per-endpoint series (docs/operations.md), each family once, every
 * series labelled endpoint="ADDR:PORT". Returns 0 or -ENOMEM. */
int upreg_render(struct upreg *g, struct evbuffer *out);

#endif /* EDGE_UPREG_H */
