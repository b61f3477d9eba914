/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pgwake.h - the database's side of the wake protocol (docs/wake.md,
 * "Database mode"): a connection of its own (pgconn.h) on the control
 * loop that asks the database for wakes, one host per fleet (a
 * conditional update of environments.state decides which), gives up
 * the rows of wakes that timed out, tells the database of sleeps and of
 * woken endpoints that failed, and LISTENs to wake_request_change
 * (migration 0009) for the orchestrator's answers, which it hands to
 * wake (wake_db_changed), and to environment_wake_failed (migration
 * 0013) for the other hosts' failed endpoints (wake_db_failed). Never blocks
 * the loop: the queries run one at a time, queued.
 */
#ifndef EDGE_PGWAKE_H
#define EDGE_PGWAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct pgwake;
struct wake;

/* A connection on base to conninfo for wk, this host named host_name
 * (wake_requests.requested_by), set as wk's database protocol
 * (wake_set_db). 0 with *out, -EINVAL with err (a conninfo libpq
 * refuses), or -ENOMEM. */
int pgwake_new(struct event_base *base, const char *conninfo,
	       const char *host_name, struct wake *wk, struct pgwake **out,
	       char *err, size_t errlen);

/* Close (after the loop stopped: wk keeps its pointer and must not
 * wake or sleep a database environment afterwards). NULL is fine. */
void pgwake_free(struct pgwake *pw);

/* Whether the connection is up and listening. */
bool pgwake_up(const struct pgwake *pw);

/*
 * A wake_request_change payload "ENV_ID REQUEST_ID STATE" into env
 * (envlen bytes), *req and state (statelen bytes): 0, or -EINVAL when it
 * is not that shape (an id that does not fit, a request id that is not
 * a positive number, a state that is not one word).
 */
int pgwake_parse_change(const char *payload, char *env, size_t envlen,
			int64_t *req, char *state, size_t statelen);

/*
 * An environment_wake_failed payload "ENV_ID RETRY_MS HOST" (the host
 * whose woken endpoint failed, the fleet's back-off in ms, at most
 * PGWAKE_RETRY_MS_MAX) into env (envlen bytes), *retry_ms and host
 * (hostlen bytes): 0, or -EINVAL when it is not that shape.
 */
#define PGWAKE_RETRY_MS_MAX (24ULL * 3600 * 1000)
int pgwake_parse_failed(const char *payload, char *env, size_t envlen,
			uint64_t *retry_ms, char *host, size_t hostlen);

#endif /* EDGE_PGWAKE_H */
