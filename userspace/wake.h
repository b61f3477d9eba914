/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * wake.h - Wake: on-demand environments (docs/wake.md). An environment
 * marked on_demand sleeps until a request needs it; the first request to
 * a sleeping environment starts one wake (the configured wake.command, a
 * readiness probe of its endpoints at wake.probe_interval) and waits for
 * it, and so does every request that arrives meanwhile, on any worker; an
 * environment with no request and no open tunnel for its idle_timeout is
 * put to sleep (wake.sleep_command).
 *
 * One struct wake holds every on-demand environment's state, shared by
 * the workers under one mutex (a request touches it twice: wake_enter
 * and wake_leave; environments that are not on demand never do). The
 * commands, the probes, the deadlines and the idle check run on the
 * control loop (wake_start's base); workers reach it by activating an
 * event of that loop (its base is thread-safe), and the control loop
 * reaches a waiting request through its worker's mailbox (the notify
 * function), naming it by its generation-checked id, never by pointer.
 *
 * The states: WAKE_SLEEPING (edge put it to sleep, or it did not answer
 * a probe at start, or the back-off after its last failed wake is over),
 * WAKE_WAKING (a wake is under way: requests wait), WAKE_RUNNING (its
 * last wake, or the probe at start, succeeded and no sleep was sent
 * since), WAKE_FAILED (its last wake failed: the command failed, the
 * deadline passed, or the woken endpoint failed its first request; no
 * wake starts before its back-off is over, doubling from
 * WAKE_BACKOFF_MIN_MS up to wake.retry_max with each failed wake in a
 * row, back to the start once a wake serves its first request).
 */
#ifndef EDGE_WAKE_H
#define EDGE_WAKE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "config.h"
#include "route_src.h"

struct event_base;
struct metrics;
struct wake;
struct wake_env;

enum wake_state {
	WAKE_SLEEPING = 0,
	WAKE_WAKING,
	WAKE_RUNNING,
	WAKE_FAILED,
	WAKE_NSTATES,
};

/* The first back-off after a failed wake (it doubles with each failed
 * wake in a row, up to wake.retry_max). */
#define WAKE_BACKOFF_MIN_MS 1000

/* How a wake ended, for its waiters (the notify function's result). */
enum wake_result {
	WAKE_R_READY = 1, /* the probe answered: go on to the upstream */
	WAKE_R_PENDING,	  /* wake.timeout passed: 503 wake_pending */
	WAKE_R_FAILED,	  /* the command failed: 503 wake_failed */
};

/* What wake_enter says a request does. */
enum wake_enter_rc {
	WAKE_GO = 0,	/* the environment runs (or is not on demand) */
	WAKE_WAIT,	/* a wake is under way: wait for the notify */
	WAKE_THROTTLED, /* a wake is needed and no slot is free: 503 */
	WAKE_BACKOFF,	/* its last wake failed and the back-off runs: 503
			   wake_failed, Retry-After the waiter's retry_s */
	/* WAKE_CLS_PASSIVE and the environment is not running: 503
	 * environment_sleeping, nothing woken or counted */
	WAKE_ASLEEP,
};

/* A request's activity class (its route's activity and wake,
 * docs/wake.md, "Activity classes"). */
enum wake_class {
	WAKE_CLS_APP = 0,    /* wakes it; activity */
	WAKE_CLS_BACKGROUND, /* wakes it; activity only until
				idle_timeout_background past the last app
				activity */
	WAKE_CLS_PASSIVE,    /* wake = false: never wakes it, never
				activity; served only while it runs */
};

/* A request's place among a waking environment's waiters (inside struct
 * req; the wake's lock guards it). */
struct wake_waiter {
	TAILQ_ENTRY(wake_waiter) link;
	void *owner;	  /* the request's worker */
	uint64_t handle;  /* its id there */
	uint32_t msg;	  /* the message type its notify posts */
	bool bounded;	  /* counts against wake.max_waiting_connections
			     (a TCP route's connection: no in-flight cap
			     bounds it) */
	bool queued;	  /* in a waking environment's list */
	uint32_t retry_s; /* WAKE_BACKOFF: seconds left of the back-off */
	uint64_t gen;	  /* its environment's failed wakes when it entered */
	uint8_t cls;	  /* enum wake_class, set before wake_enter */
};

/* Tell the waiter wt (its owner, msg and handle) how its wake ended (a
 * enum wake_result): 0, or <0 when its mailbox refused (the waiter's own
 * timer then ends it as wake_pending). Any thread; under the lock. */
typedef int (*wake_notify_fn)(const struct wake_waiter *wt, uint64_t result);

/* Seconds a 503 wake_throttled or environment_restarting asks the
 * client to wait (Retry-After); wake_failed and wake_pending ask for
 * what is left of the back-off (wake_retry_after). */
#define WAKE_RETRY_AFTER_S 1

/* Make the registry with the settings c (copied); notify tells waiters.
 * 0 with *out, or -ENOMEM. */
int wake_new(const struct config_wake *c, wake_notify_fn notify,
	     struct wake **out);

/* Free wk (its loop's events too); commands still running are left to
 * run, their descriptors closed. NULL is fine. */
void wake_free(struct wake *wk);

/* New settings (a reload): later wakes and sleeps use them, and a
 * back-off running longer than the new wake.retry_max ends by it. */
int wake_configure(struct wake *wk, const struct config_wake *c);

/*
 * What wake_sync_defs needs of a route source's change, copied out of it
 * before the change is handed to the route writer (which takes it), so
 * that the registry follows the routes only once they are in: the
 * on-demand environments of projects v[0..n) of source src (enum
 * route_src_id), the projects del[0..n_del) gone; all: v is every
 * project of src (the others go). NULL when out of memory.
 */
struct wake_defs;
struct wake_defs *wake_defs_new(unsigned src, const struct route_src_project *v,
				size_t n, const char *const *del, size_t n_del,
				bool all);
void wake_defs_free(struct wake_defs *d);

/*
 * Apply one source's change d: its on-demand environments are those of d
 * from now on. A new one is probed once (all together, within
 * WAKE_START_PROBE_MS) and taken as running if an endpoint accepts, else
 * as sleeping; one that stays keeps its state, its counters and its idle
 * clock, with d's endpoints and idle timeout; one that went is forgotten
 * by requests (a wake under way finishes). The other sources'
 * environments are untouched. Main thread, after the route update
 * succeeded. 0 or -ENOMEM.
 */
int wake_sync_defs(struct wake *wk, const struct wake_defs *d);

/* The total budget of the probe wake_sync_defs gives new environments. */
#define WAKE_START_PROBE_MS 200

/* Run wk's commands, probes, deadlines and idle checks on base (the
 * control loop), from now on. 0 or -ENOMEM. */
int wake_start(struct wake *wk, struct event_base *base);

/*
 * A request for environment env_id (on demand in its route table) is
 * about to go to the upstream. When the environment runs: WAKE_GO. When
 * a wake is under way, or this request starts one (a slot of
 * wake.max_concurrent free): WAKE_WAIT, with wt (owner and handle set by
 * the caller) among its waiters, told once through the notify function.
 * No slot free for a needed wake, or wt->bounded and
 * wake.max_waiting_connections bounded waiters already wait (every
 * environment's): WAKE_THROTTLED. Its last wake failed and its back-off
 * is not over: WAKE_BACKOFF, wt->retry_s the seconds left (rounded up),
 * no wake started. On WAKE_GO and
 * WAKE_WAIT the request counts as activity of *env (non-NULL; NULL when
 * env_id is not an on-demand environment, then WAKE_GO) until
 * wake_leave. Any thread.
 */
enum wake_enter_rc wake_enter(struct wake *wk, const char *env_id,
			      struct wake_waiter *wt, struct wake_env **env);

/* The request that entered env ends: out of the waiters if still there,
 * no longer counted, the environment's last activity now. Any thread. */
void wake_leave(struct wake *wk, struct wake_env *env, struct wake_waiter *wt);

/* A tunnel of env's opened (+1) or closed (-1): counted for `edgectl
 * envs` (its request keeps the environment awake while it is open). */
void wake_tunnel(struct wake *wk, struct wake_env *env, int delta,
		 unsigned cls);

/* What a request whose endpoints all refused gets (wake_refused). */
enum wake_refusal {
	WAKE_DOWN = 0,	     /* it was running, a backend crashed: 502 */
	WAKE_RESTARTING,     /* 503 environment_restarting, Retry-After 1 */
	WAKE_REFUSED_FAILED, /* 503 wake_failed, Retry-After *retry_s */
};

/*
 * Every endpoint of env refused (or could not be reached) for the
 * request that entered it as wt; woken: it waited for a wake. A wake
 * that has not yet had a verdict (wake_answered) and ended less than
 * wake.restart_window ago has failed: its endpoint failed its first
 * request (WAKE_FAILED, its back-off begins): WAKE_REFUSED_FAILED, as
 * while a back-off runs and for a request that entered before a wake
 * failed (no new wake for it). Else WAKE_RESTARTING when the
 * environment is not running as far as edge knows (the request waited
 * for a wake, the state is not WAKE_RUNNING, or it became running less
 * than wake.restart_window ago), and a wake is started (if none is
 * under way and a slot is free); WAKE_DOWN when it was running.
 * *retry_s: the seconds a 503 asks the client to wait. Any thread.
 */
enum wake_refusal wake_refused(struct wake *wk, struct wake_env *env,
			       const struct wake_waiter *wt, bool woken,
			       unsigned *retry_s);

/*
 * A request of env reached its endpoint: ok, its response head came;
 * !ok, the endpoint reset or closed the connection before one. The first
 * verdict within wake.restart_window of a wake decides it: ok confirms
 * it (the count of failed wakes in a row starts over), !ok fails it (the
 * woken endpoint failed its first request: WAKE_FAILED, its back-off,
 * and its command killed and the environment put to sleep, as a sleep
 * does). Later ones change nothing. Lock-free unless a wake awaits its
 * verdict. Any thread; NULL env is fine.
 */
void wake_answered(struct wake *wk, struct wake_env *env, bool ok);

/* Seconds a 503 of env's wake stage asks the client to wait (its
 * Retry-After): what is left of its back-off rounded up, at least 1. */
unsigned wake_retry_after(struct wake *wk, struct wake_env *env);

/* The wake timeout now (ms): a waiting request's own timer is this plus
 * WAKE_GRACE_MS, in case its notify was lost to a full mailbox. */
uint64_t wake_timeout_ms(struct wake *wk);
#define WAKE_GRACE_MS 1000

/* wake.retry_max now (ms): the longest back-off after failed wakes. */
uint64_t wake_retry_max_ms(struct wake *wk);

/*
 * The database's wake protocol (docs/wake.md, "Database mode"): with
 * these set, an environment of the database source (ROUTE_SRC_DB) wakes
 * through the database instead of wake.command, and sleeps through it
 * instead of wake.sleep_command; the file's environments keep the
 * commands. All on the control loop.
 */
/* One environment's activity on this host. */
struct wake_activity {
	char id[CONFIG_ID_MAX + 1];
	uint64_t last_real_ns; /* CLOCK_REALTIME of its last activity (now
				  while a request or tunnel is open) */
	uint64_t tunnels;      /* open tunnels */
};

/* How often activity is written (at most). */
#define WAKE_ACTIVITY_MS 1000

struct wake_db_ops {
	/* Ask the database for env_id's wake, number seq: 0 when it is on
	 * its way (wake_db_asked follows, once), <0 when it cannot be
	 * asked now (the database is unreachable). */
	int (*ask)(void *arg, const char *env_id, uint64_t seq);
	/* Edge gave up on wake request req_id of env_id (wake.timeout). */
	void (*gave_up)(void *arg, const char *env_id, int64_t req_id);
	/* env_id's woken endpoint failed its first request here: the
	 * fleet's wake failed (its back-off, retry_max_ms at most, for every
	 * host) and the environment is to be stopped. */
	void (*failed)(void *arg, const char *env_id, uint64_t retry_max_ms);
	/* A wake of env_id that followed failed ones served its first
	 * request here: the fleet's count of failed wakes starts over. */
	void (*confirmed)(void *arg, const char *env_id);
	/* env_id went to sleep here (idle): tell the database (it sleeps
	 * there unless another host was active within its idle_ms). */
	void (*sleep)(void *arg, const char *env_id, uint64_t idle_ms);
	/* This host's activity of database environments, for
	 * environment_activity: v[0..n) (batched, at most once per
	 * WAKE_ACTIVITY_MS, only those with news): 0 when taken, <0 when
	 * not (they are offered again with the next batch). */
	int (*activity)(void *arg, const struct wake_activity *v, size_t n);
};

/* Use ops (NULL: none, the commands for every environment). */
void wake_set_db(struct wake *wk, const struct wake_db_ops *ops, void *arg);

/* The answer to ask(env_id, seq): err <0, the database could not be
 * asked (503 wake_failed to the waiters, no back-off); else req_id >0,
 * this host won the state change and inserted wake_requests row req_id
 * (NOTIFY sent), or 0, another host is waking it (the probe and the
 * route decide), or 0 with retry_ms >0, the fleet's back-off after a
 * failed wake runs for that long yet (503 wake_failed, WAKE_FAILED here
 * until then). failures: the fleet's failed wakes in a row before this
 * one (its back-off if it fails). A row won for a wake that has ended
 * meanwhile is given up at once. */
void wake_db_asked(struct wake *wk, const char *env_id, uint64_t seq,
		   int64_t req_id, int err, uint64_t retry_ms,
		   uint64_t failures);

/* A sleep this host sent for env_id lost to another host's activity
 * within the idle timeout while the database has it running: while the
 * environment stays idle here, its sleep is sent again after
 * WAKE_SLEEP_RETRY_MS (the hosts that were active at the same time may
 * all have gone idle by then: each lost to the others, none retried, and
 * the database kept it running for good). Returns how many sleeps of
 * env_id lost in a row since it went to sleep here (1: the first; the
 * caller logs that one only, not every retry), 0 when none is retried
 * (env_id gone or no longer sleeping here). */
#define WAKE_SLEEP_RETRY_MS (3 * WAKE_ACTIVITY_MS)
uint64_t wake_db_sleep_lost(struct wake *wk, const char *env_id);

/* The database says wake request req_id of env_id is now in state
 * (wake_request_change): "failed" ends a wake under way with 503
 * wake_failed, "timeout" with wake_pending; others change nothing. */
void wake_db_changed(struct wake *wk, const char *env_id, int64_t req_id,
		     const char *state);

/* Another host's woken endpoint of env_id failed its first request
 * (NOTIFY environment_wake_failed): no wake of env_id here either for
 * retry_ms: a wake under way ends 503 wake_failed, a running one is
 * WAKE_FAILED (its endpoint fails), a longer back-off is kept. */
void wake_db_failed(struct wake *wk, const char *env_id, uint64_t retry_ms);

/* The environments for `edgectl envs`: {"environments": [{"id",
 * "state", "on_demand", "active", "tunnels", "last_activity" (unix
 * seconds, 0: none), "idle_seconds", "idle_timeout_ms", "wakes",
 * "wakes_ok", "wakes_failed", "wakes_pending", "wakes_throttled",
 * "wakes_endpoint_failed", "sleeps", "last_wake_ms" (-1: none),
 * "waiters", "consecutive_failures", "backoff_ms" (the last back-off, 0:
 * none), "retry_in_ms" (left of it, 0: none), "backoff_refused"}...],
 * "wakes_in_flight", "waiting_connections" (bounded waiters),
 * "max_concurrent", "retry_max_ms"}, sorted by id. NULL when out of
 * memory. */
json_t *wake_dump_json(struct wake *wk);

/* Register wk's metrics in m: edge_wakes_total{outcome} (ready,
 * timeout, failed, throttled, endpoint_failed: of the ready ones, those
 * whose endpoint then failed its first request), the histogram
 * edge_wake_cold_start_seconds, edge_environments{state}. 0 or
 * -ENOMEM. */
int wake_metrics(struct wake *wk, struct metrics *m);

/* A state's name: "sleeping", "waking", "running", "wake_failed". */
const char *wake_state_name(enum wake_state s);

#endif /* EDGE_WAKE_H */
