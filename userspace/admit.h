/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * admit.h - Admit: per-client token buckets (429), in-flight caps (503
 * overloaded), body-size limits (413) and the slow-body clock (408
 * body_timeout).
 *
 * One rate-limit table serves every worker (a client's connections may
 * land on any of them: its bucket is the same), updated with atomics and
 * no lock; in-flight gauges are atomics shared by all workers too. Pure:
 * no I/O, no clock (callers pass now).
 */
#ifndef EDGE_ADMIT_H
#define EDGE_ADMIT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cidr.h"

/* Buckets are kept in sets of this many; eviction picks within a set. */
#define ADMIT_WAYS 8

/* A bucket's parameters: ns between tokens (0: no limit) and the
 * bucket's depth in time, interval * burst (capped at ADMIT_TAU_MAX). */
struct admit_bucket {
	uint64_t interval;
	uint64_t tau;
};

#define ADMIT_TAU_MAX (1ULL << 62) /* about 146 years */

/* b for per_min tokens a minute in bursts of burst; per_min 0 turns
 * limiting off. Returns 0, or -EINVAL (burst 0 with per_min set). */
int admit_bucket_set(struct admit_bucket *b, uint64_t per_min, uint64_t burst);

struct admit_limiter;

/*
 * A new table for at most capacity clients (rounded up to a multiple of
 * ADMIT_WAYS; 16 bytes each, allocated once and never grown), to be
 * shared by any number of threads. Returns 0 or -ENOMEM / -EINVAL
 * (capacity 0).
 */
int admit_limiter_new(size_t capacity, struct admit_limiter **out);

/* Free a table no thread uses any more; l may be NULL. */
void admit_limiter_free(struct admit_limiter *l);

/*
 * Take one token of bucket b for client a (IPv4 clients by address, IPv6
 * clients by /64) at monotonic time now_ns; thread-safe, without locks.
 * Returns 0 when allowed, or -EAGAIN when over the limit, with
 * *retry_after the whole seconds (>= 1) until a token is due (the
 * Retry-After of the 429). l NULL or b off: always 0.
 *
 * A client's state is its bucket only, so threads with different b (a
 * reload on its way to the workers) share it: a client owing more than
 * b's depth is brought back to owing that depth (empty), never handed a
 * fresh bucket. A client not in the table starts with a full bucket; to
 * make room in its full set, the client forgotten is one whose bucket is
 * full again, else one not seen lately owing least, else the one owing
 * least (admit.c), and counted as evicted when it owed anything. No
 * client is refused for want of room: a request that cannot be placed
 * after a bounded number of tries (threads racing for one set) is
 * allowed and counted as untracked.
 */
int admit_take(struct admit_limiter *l, const struct admit_bucket *b,
	       const struct cidr *a, uint64_t now_ns, unsigned *retry_after);

/* What a table holds now (read without stopping its users). */
struct admit_limiter_stats {
	size_t capacity;    /* clients it can hold */
	size_t clients;	    /* clients it holds */
	uint64_t evicted;   /* clients forgotten before their bucket was
			       full again, ever */
	uint64_t untracked; /* requests allowed without a bucket, ever */
};

/* Fill st from l (a scan of the whole table). */
void admit_limiter_stats(const struct admit_limiter *l,
			 struct admit_limiter_stats *st);

/* An in-flight gauge: a count and its cap (0: no cap). */
struct admit_gauge {
	atomic_uint n;
	atomic_uint limit; /* 0: none; admit_gauge_set_limit may change it */
};

/* Set g to zero requests and the given cap. */
void admit_gauge_init(struct admit_gauge *g, unsigned limit);

/* Change g's cap (thread-safe; requests already counted stay counted). */
void admit_gauge_set_limit(struct admit_gauge *g, unsigned limit);

/*
 * Count one request into the global gauge and the route's (either may be
 * NULL). Returns 0, or -EBUSY when either is at its cap (503 overloaded);
 * on failure nothing stays counted.
 */
int admit_inflight_enter(struct admit_gauge *global, struct admit_gauge *route);

/* Undo a successful admit_inflight_enter with the same gauges. */
void admit_inflight_leave(struct admit_gauge *global,
			  struct admit_gauge *route);

/* Whether a declared Content-Length fits the limit (0: unlimited). false
 * means 413 before any body byte is read. */
bool admit_body_declared_ok(uint64_t content_length, uint64_t limit);

/* A streaming body's count against its limit (chunked bodies). */
struct admit_body {
	uint64_t seen;
	uint64_t limit; /* 0: unlimited */
};

/* Start counting a body against limit (0: unlimited). */
void admit_body_init(struct admit_body *b, uint64_t limit);

/* Count n more body bytes. Returns 0, or -EFBIG once the total exceeds
 * the limit (413; the bytes must not be forwarded). */
int admit_body_add(struct admit_body *b, uint64_t n);

/*
 * The admission queue (HAProxy's maxconn + timeout queue): requests that
 * found an in-flight cap full (the global one, or their route's) wait in
 * one FIFO shared by the workers, at most max of them (0: no queue, a
 * request over a cap is refused at once). Whenever a request leaves the
 * gauges, admit_queue_kick() tells the first waiters that now fit (both
 * their route's gauge and the global one have room) through notify(owner,
 * handle), each once: the owner then tries admit_inflight_enter() on its
 * own thread; on success it takes the waiter out (admit_queue_remove), on
 * failure (another request took the slot first) it calls
 * admit_queue_retry() and waits for the next kick. Thread-safe (one
 * mutex); the notify function is called with the queue locked and must
 * not call back into it. A waiter lives in its request; its owner removes
 * it before the request's memory goes.
 */
struct admit_waiter {
	struct admit_waiter *next, *prev;
	void *owner;		   /* the worker serving the request */
	uint64_t handle;	   /* the request's id on that worker */
	struct admit_gauge *route; /* its route's gauge, NULL: none */
	bool queued;		   /* in the queue */
	bool notified;		   /* told, not answered yet */
};

/* Tell owner that a slot may be free for handle: 0, or -errno when it
 * could not be told (it stays untold, for the next kick). */
typedef int (*admit_notify_fn)(void *owner, uint64_t handle);

struct admit_queue {
	pthread_mutex_t lock;
	struct admit_waiter *head, *tail;
	atomic_size_t n;   /* waiters (read without the lock as a hint) */
	atomic_size_t max; /* limits.max_queued; 0: no queue */
	struct admit_gauge *global;
	admit_notify_fn notify;
};

/* An empty queue over the global gauge, for at most max waiters. */
int admit_queue_init(struct admit_queue *q, struct admit_gauge *global,
		     size_t max, admit_notify_fn notify);
void admit_queue_destroy(struct admit_queue *q);

/* Change the bound (a reload); waiters over it stay until they leave. */
void admit_queue_set_max(struct admit_queue *q, size_t max);

/* Whether anyone waits (a hint: a request that finds a waiter queues
 * behind it rather than take a slot first). */
bool admit_queue_busy(struct admit_queue *q);

/* Put w (owner, handle and route set) at the tail. 0, or -ENOSPC when the
 * queue is full or off. */
int admit_queue_add(struct admit_queue *q, struct admit_waiter *w);

/* Take w out, wherever it is. Returns whether it was queued. */
bool admit_queue_remove(struct admit_queue *q, struct admit_waiter *w);

/* w was told but could not enter: it waits for the next kick. */
void admit_queue_retry(struct admit_queue *q, struct admit_waiter *w);

/* Tell the first waiters that fit now (each once). Cheap when no one
 * waits. */
void admit_queue_kick(struct admit_queue *q);

/* Waiters now. */
size_t admit_queue_length(struct admit_queue *q);

/*
 * A worker loop's lag, for brownout (limits.brownout_lag): the loop runs
 * a probe every ADMIT_LAG_PROBE_NS; a probe's lag is how late it ran
 * (now - when it was due), so a turn of long work, a worker starved of
 * CPU and a stopped process all show, to within one probe period. The
 * worker sheds (admit_lag_shed) while a probe of the last
 * ADMIT_LAG_HOLD_NS ran later than the limit, or while the next probe is
 * overdue by more than the limit now (a loop still stalled, or the turn
 * right after a stall, whose reads come before the probe runs). Owned by
 * one thread; pure: callers pass monotonic ns.
 */
#define ADMIT_LAG_PROBE_NS (20 * 1000000ULL)
#define ADMIT_LAG_HOLD_NS 1000000000ULL
/* the recent lag (admit_lag_recent) spans one to two of these */
#define ADMIT_LAG_WINDOW_NS (5 * 1000000000ULL)

struct admit_lag {
	uint64_t due;	  /* when the next probe is due; UINT64_MAX: paused */
	uint64_t over_at; /* the last probe later than its limit */
	bool over;	  /* over_at is set */
	uint64_t peak[2]; /* longest lag of this window, of the last */
	uint64_t window;  /* peak[0]'s window: now / ADMIT_LAG_WINDOW_NS */
};

/* No lag seen; the first probe due at now + ADMIT_LAG_PROBE_NS. */
void admit_lag_init(struct admit_lag *l, uint64_t now_ns);

/* The probe ran at now_ns: records its lag (returned) against limit_ns
 * (0: brownout off) and makes the next one due ADMIT_LAG_PROBE_NS
 * later. */
uint64_t admit_lag_probe(struct admit_lag *l, uint64_t now_ns,
			 uint64_t limit_ns);

/* No probe while the loop has nothing to shed for (no connection): none
 * is due (nothing overdue) until admit_lag_resume, which records
 * waited_ns (how long what woke the loop waited for it) as a probe's lag
 * against limit_ns and makes the next probe due ADMIT_LAG_PROBE_NS after
 * now_ns; a lag already recorded stays. */
void admit_lag_pause(struct admit_lag *l);
void admit_lag_resume(struct admit_lag *l, uint64_t now_ns, uint64_t waited_ns,
		      uint64_t limit_ns);
bool admit_lag_paused(const struct admit_lag *l);

/* How long the next probe is overdue at now_ns (0: not yet due). */
uint64_t admit_lag_overdue(const struct admit_lag *l, uint64_t now_ns);

/* Whether the loop lags at now_ns: limit_ns set, and a probe of the last
 * ADMIT_LAG_HOLD_NS ran over its limit or the next is overdue by more
 * than limit_ns. */
bool admit_lag_shed(const struct admit_lag *l, uint64_t now_ns,
		    uint64_t limit_ns);

/* The longest lag of the last one to two ADMIT_LAG_WINDOW_NS, the
 * overdue probe's included. */
uint64_t admit_lag_recent(const struct admit_lag *l, uint64_t now_ns);

/*
 * A request body's clock: timeouts.body (the grace) and
 * timeouts.body_min_rate, in the manner of Apache's mod_reqtimeout. The
 * clock runs only while edge is reading the body; paused time (edge not
 * reading because the upstream has not taken what it was given) does not
 * count. With t the running time since the body began, last the running
 * time of the latest body byte (of the start before the first), and n the
 * body bytes received so far, the body has timed out once
 *
 *   t >= last + grace                 (a gap: no byte for grace), or
 *   t >= grace + n / min_rate         (too slow; only when min_rate > 0)
 *
 * So a body of n bytes has at most grace + n / min_rate of running time,
 * and after the first grace the client must keep its average rate at or
 * above min_rate (grace being its head start). Times are monotonic ns.
 */
struct admit_rate {
	uint64_t grace_ns;
	uint64_t min_rate; /* bytes per second, 0: no rate rule */
	uint64_t base;	   /* while running, t = now - base */
	uint64_t t_pause;  /* t when paused */
	uint64_t last;	   /* t of the latest byte */
	uint64_t bytes;	   /* body bytes received so far */
	bool paused;
};

/* Start a running clock at now_ns, no byte received. */
void admit_rate_init(struct admit_rate *r, uint64_t grace_ms, uint64_t min_rate,
		     uint64_t now_ns);

/* total body bytes have been received by now_ns (a count that does not
 * grow changes nothing; a smaller one is ignored). */
void admit_rate_seen(struct admit_rate *r, uint64_t total, uint64_t now_ns);

/* Stop / restart the clock at now_ns; each is a no-op when the clock is
 * already stopped / running. */
void admit_rate_pause(struct admit_rate *r, uint64_t now_ns);
void admit_rate_resume(struct admit_rate *r, uint64_t now_ns);

/* The monotonic ns at which the body times out if nothing changes
 * (saturating), or UINT64_MAX while the clock is paused. */
uint64_t admit_rate_deadline(const struct admit_rate *r);

/* Whether the body has timed out at now_ns (never while paused). */
bool admit_rate_expired(const struct admit_rate *r, uint64_t now_ns);

#endif /* EDGE_ADMIT_H */
