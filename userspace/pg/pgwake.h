/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pgwake.h - the database's side of the wake protocol (docs/wake.md,
 * "Database mode"): a connection of its own (pgconn.h) on the control
 * loop that asks the database for wakes, one host per fleet (a
 * conditional update of environments.state decides which), gives up
 * the rows of wakes that timed out, tells the database of sleeps, and
 * LISTENs to wake_request_change (migration 0009) for the orchestrator's
 * answers, which it hands to wake (wake_db_changed). Never blocks the
 * loop: the queries run one at a time, queued.
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

#endif /* EDGE_PGWAKE_H */
