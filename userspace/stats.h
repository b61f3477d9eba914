/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stats.h - edged's own metrics: the registry (metrics.h) the daemon
 * fills, the one hook every ended request calls, and what is read only
 * when someone asks (connections, route generation, analytics, the XDP
 * counters of the pinned maps).
 *
 * The names are the contract in docs/operations.md ("Metrics"). Requests
 * are counted by stats_request_done(), called once from req_end() (the
 * workers' request_done hook);
 * the rest is read at scrape time (stats_render) or for `edgectl stats`
 * (stats_counters_json) on the daemon's control loop.
 */
#ifndef EDGE_STATS_H
#define EDGE_STATS_H

#include <jansson.h>
#include <stdint.h>

#include "outcome.h"

struct evbuffer;
struct metrics;
struct stats;
struct worker_shared;

/*
 * Create the daemon's registry and register every series. sh (the
 * connection count, the route holder, the analytics writer) must outlive
 * the result. pin_dir is where the XDP maps are pinned: when they exist
 * now they are opened now (before the privilege drop, which may take
 * the right to open them away) and read at every scrape; when they do not,
 * they are looked for again at each scrape. Returns 0 with *out, or
 * -ENOMEM.
 */
int stats_new(struct worker_shared *sh, const char *pin_dir,
	      struct stats **out);

/* Free s. NULL ok. The workers must have stopped counting into it. */
void stats_free(struct stats *s);

/* The registry, for admin_start(). */
struct metrics *stats_metrics(struct stats *s);

/*
 * Count one ended request (any worker thread, lock-free): its outcome,
 * the status recorded (0 when none; 1xx..5xx counted by class), and its
 * times, monotonic ns as clk_now_ns(): t0 its first byte (the duration
 * runs from there to now), t_connect when its upstream connect began and
 * t_resp when the upstream's response head came (either 0: no upstream
 * time observed). arg is the struct stats. Called exactly once per
 * request, from req_end(), through worker_shared's request_done hook.
 */
void stats_request_done(void *arg, enum outcome o, int status, uint64_t t0,
			uint64_t t_connect, uint64_t t_resp);

/* edge_build_info{version, commit} 1 (registered once; edged's
 * --version says the same). 0 or -ENOMEM. */
int stats_build_info(struct stats *s, const char *version, const char *commit);

/*
 * The whole /metrics text (an admin_render_fn: ctx is the struct stats):
 * refreshes the scrape-time gauges and counters, renders the registry,
 * then the XDP counters when the pinned maps can be read (omitted, with
 * no error, when they cannot). Control loop only. Returns 0 or -ENOMEM.
 */
int stats_render(void *ctx, struct evbuffer *out);

/*
 * The `stats` control command's result: {"counters": {"requests_total",
 * "requests_<outcome>" for each outcome seen since start,
 * "responses_<N>xx" for each status class seen, "connections_open"}}.
 * A new reference, or NULL when out of memory. Control loop only.
 */
json_t *stats_counters_json(struct stats *s);

#endif /* EDGE_STATS_H */
