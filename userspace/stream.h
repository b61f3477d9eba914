/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stream.h - the stages both modes of the stream core share. An HTTP
 * request of any protocol (req.c) and a TCP route's connection (l4.c)
 * are admitted by stream_admit and woken through their struct
 * stream_wake by the same code; each then goes to the one upstream
 * connect (upconn.h) and ends in the one record (record.h). What differs
 * is only how a refusal reaches the client: an HTTP answer, or a close.
 */
#ifndef EDGE_STREAM_H
#define EDGE_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "outcome.h"
#include "wake.h"

struct cidr;
struct route_match;
struct worker;

/*
 * Admit: the route's project's IP rules, then the per-client rate limit
 * (XDP has applied its rules already). OUTCOME_OK, OUTCOME_IP_DENIED, or
 * OUTCOME_RATE_LIMITED with *retry_s the seconds its bucket needs.
 */
enum outcome stream_admit(struct worker *w, const struct route_match *m,
			  const struct cidr *peer, unsigned *retry_s);

/*
 * Brownout: whether a new request of route m is to be refused 503
 * overloaded before any work, because m is marked shed and w's loop
 * lags over limits.brownout_lag (worker_lagging). Counts what it sheds
 * (sh->shed). On w's thread.
 */
bool stream_shed(struct worker *w, const struct route_match *m);

/* A stream's part in its on-demand environment's wake (zeroed: none). */
struct stream_wake {
	struct wake_env *env;	 /* entered, NULL: not entered */
	struct wake_waiter wait; /* its place among the wake's waiters */
	uint64_t t_enter;	 /* monotonic ns: it entered */
	uint64_t cold_ms;	 /* woken: how long it waited */
	bool woken;		 /* it waited for a wake that succeeded */
	bool tunnel;		 /* counted as an open tunnel of env */
	uint8_t cls; /* enum wake_class: set before stream_wake_enter */
};

/*
 * Wake: enter environment env_id's wake, the stream named on w by handle
 * for msg (its mailbox message; the notify's result is its argument);
 * bounded: it counts against wake.max_waiting_connections. WAKE_GO: go
 * on (the handle is no longer needed); WAKE_WAIT: wait for msg, the
 * caller's timer at stream_wake_wait_ms (its notify may be lost);
 * WAKE_THROTTLED; WAKE_BACKOFF, sw->wait.retry_s seconds of back-off
 * left.
 */
enum wake_enter_rc stream_wake_enter(struct stream_wake *sw, struct worker *w,
				     const char *env_id, uint64_t handle,
				     uint32_t msg, bool bounded);

/* How long a waiting stream waits for its wake's result at most. */
uint64_t stream_wake_wait_ms(const struct worker *w);

/* msg came with res (enum wake_result): WAKE_R_READY marks sw woken
 * (cold_ms). Returns res. */
uint64_t stream_wake_result(struct stream_wake *sw, uint64_t res);

/* Every endpoint failed: whether that is a wake's business (wake.h's
 * wake_refused; WAKE_DOWN when sw entered no wake). */
enum wake_refusal stream_wake_refused(struct stream_wake *sw, struct worker *w,
				      unsigned *retry_s);

/* The stream became a tunnel: counted as its environment's activity
 * until stream_wake_leave (once; nothing when it entered no wake). */
void stream_wake_tunnel(struct stream_wake *sw, struct worker *w);

/* The stream's end: out of the wake (its tunnel uncounted). */
void stream_wake_leave(struct stream_wake *sw, struct worker *w);

#endif /* EDGE_STREAM_H */
