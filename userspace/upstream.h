/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * upstream.h - Select: choosing an upstream endpoint (round robin, least
 * in-flight, client-IP hash), passive health (ejection with exponential
 * back-off, half-open probes) and per-endpoint pools of idle keep-alive
 * connections.
 *
 * Choosing an upstream is kept apart from talking to it: this module never
 * connects, reads or writes a request; it only picks, counts, and keeps
 * idle fds that the caller hands it.
 *
 * A struct upstream_worker belongs to one worker thread and is used
 * without locks (not thread-safe). Endpoints are identified by address
 * (sockaddr + port) within the worker, so a backend used by two routes
 * shares its in-flight count, health and pool. Endpoints unused for a long
 * time (no in-flight request, no pooled fd) may be forgotten, so memory is
 * bounded. Pure with respect to time: callers pass now_ns (CLOCK_MONOTONIC).
 *
 * Panic mode: if every endpoint of a route is ejected (or excluded),
 * upstream_select still returns the ejected, non-excluded endpoint whose
 * ejection ends soonest rather than failing: a chance of success beats a
 * certain 502. It returns -EHOSTUNREACH only when every endpoint is in
 * exclude[] (or n is 0). See docs/upstream.md.
 */
#ifndef EDGE_UPSTREAM_H
#define EDGE_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "circuit.h"
#include "config.h"
#include "upreg.h"

/* Defaults used when upstream_worker_configure is not called. */
#define UPSTREAM_DEFAULT_MAX_IDLE_PER_EP 128
#define UPSTREAM_DEFAULT_MAX_IDLE_TOTAL 4096
#define UPSTREAM_DEFAULT_IDLE_TIMEOUT_NS (60ull * 1000000000ull)
#define UPSTREAM_DEFAULT_EJECT_AFTER 3
#define UPSTREAM_DEFAULT_EJECT_BASE_NS (10ull * 1000000000ull)
#define UPSTREAM_DEFAULT_EJECT_MAX_NS (300ull * 1000000000ull)

struct upreg;
struct upreg_ep;
struct upstream_worker; /* one per worker thread, not thread-safe */
struct upstream_ep;	/* one endpoint as this worker sees it */

/* A new worker state with the defaults above. Returns 0 or -ENOMEM. */
int upstream_worker_new(struct upstream_worker **out);

/* Free a worker state and close every pooled fd; w may be NULL. Any
 * struct upstream_ep pointer obtained from w becomes invalid. */
void upstream_worker_free(struct upstream_worker *w);

/*
 * Share w's endpoints' state through the process-wide registry reg
 * (upreg.h; call before the first select): each endpoint then takes its
 * admin state (drain, disabled: never chosen normally; disabled not even
 * in panic mode; their pooled connections closed) and its active health
 * from there, and counts into it. Without a registry every endpoint is
 * enabled and counted only per worker.
 */
void upstream_worker_set_registry(struct upstream_worker *w, struct upreg *reg);

/* ep's shared entry (upreg.h), NULL without a registry (or a full one). */
struct upreg_ep *upstream_ep_shared(const struct upstream_ep *ep);

/*
 * Change the pool and health parameters; a 0 argument keeps the current
 * value (defaults above). Applies to later calls only (fds already pooled
 * are trimmed at their next give/expire). Returns 0, or -EINVAL if
 * eject_base_ns > eject_max_ns after substitution.
 */
int upstream_worker_configure(struct upstream_worker *w, size_t max_idle_per_ep,
			      size_t max_idle_total, uint64_t idle_timeout_ns,
			      unsigned eject_after_failures,
			      uint64_t eject_base_ns, uint64_t eject_max_ns);

/*
 * Choose an endpoint of a route among eps[0..n): mode round robin / least
 * in-flight / client-IP hash (client may be NULL for the hash mode: it then
 * behaves as round robin), skipping ejected endpoints and those in
 * exclude[] (already tried for this request). Round-robin positions are
 * kept per (generation, route_index), a pair the caller picks (edged
 * passes a route's key, route.h, and 0). A half-open endpoint (ejection time
 * passed) admits one request at a time until it reports. Panic mode: see
 * above. Returns 0 with *out set (valid until upstream_worker_free, or
 * until it may be forgotten: keep it no longer than the request, with its
 * in-flight count held or a report pending), or -EHOSTUNREACH (n 0, every
 * endpoint excluded), or -ENOMEM.
 */
int upstream_select(struct upstream_worker *w, uint64_t generation,
		    unsigned route_index, const struct config_addr *eps,
		    size_t n, enum config_balance mode,
		    const struct sockaddr *client, uint64_t now_ns,
		    struct upstream_ep *const *exclude, size_t n_exclude,
		    struct upstream_ep **out);

/*
 * upstream_select with a cap on each endpoint's requests in flight (0:
 * none; the registry's count, every worker's together, else this
 * worker's): an endpoint at its cap is skipped, in panic mode too.
 * Returns -EBUSY when an endpoint would have been chosen but for the cap
 * (every one left is full), otherwise as upstream_select. The caller then
 * takes the slot with upstream_inflight_take.
 */
int upstream_select_cap(struct upstream_worker *w, uint64_t generation,
			unsigned route_index, const struct config_addr *eps,
			size_t n, enum config_balance mode,
			const struct sockaddr *client, uint64_t now_ns,
			struct upstream_ep *const *exclude, size_t n_exclude,
			unsigned cap, struct upstream_ep **out);

/* Whether upstream_select_cap over eps[0..n) at now_ns would not return
 * -EBUSY: an endpoint it may choose is under cap (always, cap 0). */
bool upstream_has_room(struct upstream_worker *w, const struct config_addr *eps,
		       size_t n, struct upstream_ep *const *exclude,
		       size_t n_exclude, unsigned cap, uint64_t now_ns);

/* The endpoint's address (a copy owned by the endpoint). */
const struct config_addr *upstream_ep_addr(const struct upstream_ep *ep);

/*
 * Passive health: the outcome of one attempt on ep (connect/response ok,
 * or failure). A success resets the failure count and closes a half-open
 * endpoint; eject_after_failures consecutive failures (or one failure while
 * half-open) eject it for eject_base_ns doubled per consecutive ejection,
 * capped at eject_max_ns.
 */
void upstream_report(struct upstream_worker *w, struct upstream_ep *ep, bool ok,
		     uint64_t now_ns);

/* upstream_report with why the attempt failed and its errno (0: none):
 * the endpoint's last failure, logged with its ejection; a connect that
 * failed or timed out counts as a connect error too (upreg.h). */
void upstream_report_why(struct upstream_worker *w, struct upstream_ep *ep,
			 bool ok, uint64_t now_ns, enum upreg_why why, int err);

/* Add delta (+1 on start, -1 on end) to ep's in-flight count (floored at 0). */
void upstream_inflight_add(struct upstream_ep *ep, int delta);

/* Count one request in flight on ep as upstream_inflight_add(ep, 1)
 * does, if ep has fewer than cap (0: no cap) in flight: whether it did.
 * With a registry the cap is on every worker's requests together, taken
 * atomically. */
bool upstream_inflight_take(struct upstream_ep *ep, unsigned cap);

/* ep's current in-flight count. */
unsigned upstream_ep_inflight(const struct upstream_ep *ep);

/* Whether ep is ejected at now_ns (false once half-open). */
bool upstream_ep_ejected(const struct upstream_ep *ep, uint64_t now_ns);

/*
 * Take an idle keep-alive fd to ep: the most recently given one that is
 * still usable (a non-blocking MSG_PEEK sees neither EOF, nor unsolicited
 * bytes, nor an error; those are closed) and not idle past the timeout.
 * The caller owns the fd. Returns the fd or -1 (none).
 */
int upstream_pool_take(struct upstream_worker *w, struct upstream_ep *ep,
		       uint64_t now_ns);

/*
 * Give a reusable connection to ep's pool; ownership of fd passes to the
 * pool in every case. When the per-endpoint bound is reached the oldest
 * idle fd of ep is closed; when the per-worker total is reached fd itself
 * is closed. fd < 0 is ignored.
 */
void upstream_pool_give(struct upstream_worker *w, struct upstream_ep *ep,
			int fd, uint64_t now_ns);

/*
 * Pooling an object around the fd (a sockio kept registered, so a
 * reused connection costs no re-registration): the holder sets a release
 * function, called with (obj, fd) whenever the pool closes such an entry
 * (bounds, expiry, take finding it too old, upstream_worker_free), and
 * watches the fd while pooled, calling upstream_pool_forget when it sees
 * EOF, an error or unsolicited bytes (then frees obj itself). take_obj
 * trusts such an entry without the MSG_PEEK probe. Plain fds (obj NULL)
 * are closed with close(2) and probed as above.
 */
typedef void (*upstream_release_fn)(void *obj, int fd);

void upstream_worker_set_release(struct upstream_worker *w,
				 upstream_release_fn release);

/* upstream_pool_give with the holder's object obj (may be NULL). */
void upstream_pool_give_obj(struct upstream_worker *w, struct upstream_ep *ep,
			    int fd, void *obj, uint64_t now_ns);

/* upstream_pool_take that also returns the entry's object in *obj (NULL
 * for a plain fd, or when none is returned). */
int upstream_pool_take_obj(struct upstream_worker *w, struct upstream_ep *ep,
			   uint64_t now_ns, void **obj);

/* The same with a tag: take returns only an entry given with the same
 * tag (a TLS connection's profile and server name; 0: plain), the most
 * recent one first; the others stay. */
void upstream_pool_give_tag(struct upstream_worker *w, struct upstream_ep *ep,
			    int fd, void *obj, uint64_t tag, uint64_t now_ns);
int upstream_pool_take_tag(struct upstream_worker *w, struct upstream_ep *ep,
			   uint64_t now_ns, uint64_t tag, void **obj);

/* Remove obj from ep's pool without releasing it (counted as stale).
 * Returns 0, or -ENOENT when obj is not pooled at ep. */
int upstream_pool_forget(struct upstream_ep *ep, const void *obj);

/* Close up to n pooled idle connections, oldest of each endpoint first
 * (out of descriptors: they are the cheapest to give back). Returns how
 * many were closed. */
size_t upstream_pool_shed(struct upstream_worker *w, size_t n);

/* Close idle fds past the idle timeout, and forget endpoints long unused. */
void upstream_pool_expire(struct upstream_worker *w, uint64_t now_ns);

/* Stats for metrics. */
struct upstream_stats {
	size_t endpoints;	/* known endpoints */
	size_t idle_fds;	/* pooled fds */
	uint64_t pool_hits;	/* take returned an fd */
	uint64_t pool_misses;	/* take returned -1 */
	uint64_t pool_stale;	/* fds closed by take (EOF/data/error/old) */
	uint64_t pool_closed;	/* fds closed by give (bound) or expire */
	uint64_t ejections;	/* ejections so far */
	uint64_t panics;	/* selects that returned an ejected endpoint */
	uint64_t retries;	/* retries a deployment's budget allowed */
	uint64_t retry_refused; /* ... and refused (retry.h) */
	uint64_t circuit_opens; /* circuits opened (circuit.h) */
	uint64_t circuit_refused; /* requests an open circuit refused */
	size_t circuits_open;	  /* circuits open or half-open now */
	uint64_t ep_full_waits;	  /* requests that found every endpoint
				     at max_inflight and waited */
	uint64_t ep_full_refused; /* ... and were refused 503 overloaded */
	uint64_t hedges;	  /* hedges sent (hedge.h) */
	uint64_t hedge_wins;	  /* ... that answered first */
};

/* A request found every endpoint at its deployment's max_inflight and
 * waits for a slot (refused false), or is refused (true): counted. */
void upstream_count_ep_full(struct upstream_worker *w, bool refused);

/* A deployment's retry budget (retry.h), per worker: one request of
 * deployment key; whether it may retry once more under pct percent of
 * its recent requests (counted in the stats either way). */
void upstream_retry_request(struct upstream_worker *w, uint64_t key,
			    uint64_t now_ns);
bool upstream_retry_take(struct upstream_worker *w, uint64_t key, unsigned pct,
			 uint64_t now_ns);

/* A deployment's hedging (hedge.h), per worker: a response head ns
 * after its attempt began; the pct-th percentile of its recent ones
 * (false: too few yet); whether one more hedge fits the deployment's
 * retry budget of pct percent (retry.h: hedges and retries share it; a
 * hedge counted, a refusal counted as a retry's); a hedge answered
 * first (counted). */
void upstream_hedge_sample(struct upstream_worker *w, uint64_t key, uint64_t ns,
			   uint64_t now_ns);
bool upstream_hedge_percentile(struct upstream_worker *w, uint64_t key,
			       unsigned pct, uint64_t now_ns, uint64_t *ns);
bool upstream_hedge_take(struct upstream_worker *w, uint64_t key, unsigned pct,
			 uint64_t now_ns);
void upstream_hedge_won(struct upstream_worker *w);

/* A deployment's circuit (circuit.h), per worker: whether a request of
 * deployment key may go to its upstream (*trial, *wait_ms as
 * circuit_admit; a refusal counted), and its end's verdict (an opening
 * counted). */
bool upstream_circuit_admit(struct upstream_worker *w, uint64_t key,
			    uint64_t now_ns, bool *trial, uint64_t *wait_ms);
void upstream_circuit_end(struct upstream_worker *w, uint64_t key,
			  const struct config_circuit *cfg, uint64_t now_ns,
			  bool trial, enum circuit_result res);

/* w's circuits in use at now_ns (circuit_view). */
size_t upstream_circuit_view(const struct upstream_worker *w, uint64_t now_ns,
			     struct circuit_view *out, size_t max);

/* Fill *st with w's counters. */
void upstream_stats(const struct upstream_worker *w, struct upstream_stats *st);

#endif /* EDGE_UPSTREAM_H */
