// SPDX-License-Identifier: BSD-2-Clause
/*
 * stats.c - edged's metrics registry: request counters and histograms fed
 * by stats_request_done(), scrape-time gauges, and the XDP counters read
 * from the pinned maps when someone scrapes.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clk.h"
#include "edge_assert.h"
#include "metrics.h"
#include "pins.h"
#include "sockio.h"
#include "listener.h"
#include "encoding.h"
#include "auth.h"
#include "fauth.h"
#include "challenge.h"
#include "inject.h"
#include "stats.h"
#include "tunnel.h"
#include "upreg.h"
#include "worker.h"

/* Status classes counted: 1xx .. 5xx. */
#define STATS_CLASSES 5

/* One analytics sink's series (its "sink" label); the disk spool's and
 * the sink's own only when it has them. */
struct stats_sink {
	struct metrics_counter *written, *dropped_spool_full, *dropped_shutdown,
	    *errors, *batches;
	struct metrics_gauge *spooled, *up;
	struct metrics_gauge *disk_spooled, *disk_files, *disk_bytes, *disk_max;
	struct metrics_counter *spilled, *replayed, *disk_corrupt, *disk_errors;
	struct metrics_counter *duplicates, *rejected, *connects;
};

struct stats {
	struct metrics *m;
	struct worker_shared *sh;
	struct metrics_counter *req[OUTCOME_MAX];
	struct metrics_counter *cls[STATS_CLASSES];
	struct metrics_histogram *dur, *up;
	struct metrics_gauge *conns, *parked, *gen;
	struct metrics_counter *an_enqueued, *an_queue_full;
	struct stats_sink an[ANALYTICS_SINKS_MAX];
	unsigned n_an;
	struct metrics_gauge *up_eps, *up_idle;
	struct metrics_counter *up_pool[4], *up_eject, *up_panic;
	struct metrics_counter *up_retries, *up_retry_refused;
	struct metrics_counter *up_circuit_opens, *up_circuit_refused;
	struct metrics_gauge *up_circuits_open;
	struct metrics_counter *up_full_waits, *up_full_refused;
	struct metrics_counter *up_hedges, *up_hedge_wins;
	struct metrics_counter *accept_pauses;
	struct metrics_gauge *conn_cap, *queued;
	struct metrics_counter *asserts;
	struct metrics_gauge *rl_clients, *rl_max;
	struct metrics_counter *rl_evicted, *rl_untracked;
	struct metrics_counter *accepted[CONFIG_WORKERS_MAX];
	struct metrics_counter *shed;
	struct metrics_counter *pp[LISTENER_PP_N];
	unsigned nworkers;
	struct metrics_counter *tun_ended[TUNNEL_ENDED_MAX];
	struct metrics_counter *tun_timed_out;
	char pin_dir[PATH_MAX];
	struct pins pins;
	bool pins_open;
};

static int stats_pins_open(struct stats *s)
{
	struct errbuf err;
	int rc;

	if (s->pins_open)
		return 0;
	if (!s->pin_dir[0] || !pins_exist(s->pin_dir))
		return -ENOENT;
	errbuf_clear(&err);
	rc = pins_open(&s->pins, s->pin_dir, &err);
	if (rc) {
		log_debug("metrics: XDP counters not read: %s",
			  err.msg[0] ? err.msg : strerror(-rc));
		return rc;
	}
	s->pins_open = true;
	return 0;
}

/* A series of one sink: name{sink="NAME"[,result="RESULT"]}. */
static struct metrics_counter *
stats_sink_counter(struct stats *s, const char *name, const char *help,
		   const char *sink, const char *result)
{
	const char *lab[5] = {"sink", sink, result ? "result" : NULL, result,
			      NULL};

	return metrics_counter_new(s->m, name, help, lab);
}

static struct metrics_gauge *stats_sink_gauge(struct stats *s, const char *name,
					      const char *help,
					      const char *sink)
{
	const char *lab[3] = {"sink", sink, NULL};

	return metrics_gauge_new(s->m, name, help, lab);
}

/* The analytics families: the queue's, then each sink's. Returns 0 or
 * -ENOMEM. */
static int stats_analytics_new(struct stats *s)
{
	static const char ev[] = "edge_analytics_events_total";
	static const char ev_help[] =
	    "Analytics events, by result (per sink once enqueued).";
	static const char disk_ev[] = "edge_analytics_disk_spool_events_total";
	static const char disk_ev_help[] =
	    "Analytics events moved into the disk spool (spilled) and "
	    "written from it to the sink (replayed).";
	static const char own[] = "edge_analytics_sink_events_total";
	static const char own_help[] =
	    "Analytics events the sink's destination already held "
	    "(duplicate: a replay, landed once) or refused as invalid "
	    "(rejected: lost).";
	const char *lab[3] = {"result", "enqueued", NULL};
	struct analytics *a = s->sh->analytics;
	struct analytics_sink_stats st;
	unsigned i;

	s->an_enqueued = metrics_counter_new(s->m, ev, ev_help, lab);
	lab[1] = "dropped_queue_full";
	s->an_queue_full = metrics_counter_new(s->m, ev, ev_help, lab);
	if (!s->an_enqueued || !s->an_queue_full)
		return -ENOMEM;
	s->n_an = a ? analytics_nsinks(a) : 0;
	for (i = 0; i < s->n_an; i++) {
		struct stats_sink *k = &s->an[i];
		const char *n;

		analytics_sink_stats(a, i, &st);
		n = st.name;
		k->written = stats_sink_counter(s, ev, ev_help, n, "written");
		k->dropped_spool_full =
		    stats_sink_counter(s, ev, ev_help, n, "dropped_spool_full");
		k->dropped_shutdown =
		    stats_sink_counter(s, ev, ev_help, n, "dropped_shutdown");
		k->errors = stats_sink_counter(
		    s, "edge_analytics_write_errors_total",
		    "Failed analytics batch writes.", n, NULL);
		k->batches =
		    stats_sink_counter(s, "edge_analytics_batches_total",
				       "Analytics batches written.", n, NULL);
		k->spooled = stats_sink_gauge(
		    s, "edge_analytics_spooled",
		    "Analytics events waiting in the sink's memory spool.", n);
		k->up = stats_sink_gauge(
		    s, "edge_analytics_sink_up",
		    "1 while the analytics sink's writes work, 0 while they "
		    "fail.",
		    n);
		if (!k->written || !k->dropped_spool_full ||
		    !k->dropped_shutdown || !k->errors || !k->batches ||
		    !k->spooled || !k->up)
			return -ENOMEM;
		if (st.disk) {
			k->disk_spooled = stats_sink_gauge(
			    s, "edge_analytics_disk_spooled",
			    "Analytics events waiting in the disk spool.", n);
			k->disk_files = stats_sink_gauge(
			    s, "edge_analytics_disk_spool_files",
			    "Files in the analytics disk spool.", n);
			k->disk_bytes = stats_sink_gauge(
			    s, "edge_analytics_disk_spool_bytes",
			    "Bytes of the analytics disk spool's files.", n);
			k->disk_max = stats_sink_gauge(
			    s, "edge_analytics_disk_spool_max_bytes",
			    "The analytics disk spool's cap "
			    "(analytics.spool_max).",
			    n);
			k->spilled = stats_sink_counter(
			    s, disk_ev, disk_ev_help, n, "spilled");
			k->replayed = stats_sink_counter(
			    s, disk_ev, disk_ev_help, n, "replayed");
			k->disk_corrupt = stats_sink_counter(
			    s, "edge_analytics_disk_spool_corrupt_total",
			    "Analytics disk spool files skipped: torn, "
			    "failing their checksums or unreadable.",
			    n, NULL);
			k->disk_errors = stats_sink_counter(
			    s, "edge_analytics_disk_spool_write_errors_total",
			    "Batches the analytics disk spool failed to "
			    "write (I/O errors; a full spool is not one).",
			    n, NULL);
			if (!k->disk_spooled || !k->disk_files ||
			    !k->disk_bytes || !k->disk_max || !k->spilled ||
			    !k->replayed || !k->disk_corrupt || !k->disk_errors)
				return -ENOMEM;
		}
		if (st.has_own) {
			k->duplicates = stats_sink_counter(s, own, own_help, n,
							   "duplicate");
			k->rejected =
			    stats_sink_counter(s, own, own_help, n, "rejected");
			k->connects = stats_sink_counter(
			    s, "edge_analytics_sink_connects_total",
			    "Connections the analytics sink made (the first "
			    "and every reconnect).",
			    n, NULL);
			if (!k->duplicates || !k->rejected || !k->connects)
				return -ENOMEM;
		}
	}
	return 0;
}

/* The rate limit's series and one edge_worker_accepted_total per
 * worker. Returns 0 or -ENOMEM. */
static int stats_workers_new(struct stats *s)
{
	const char *lab[3] = {"worker", NULL, NULL};
	char id[16];
	unsigned i;

	s->rl_clients = metrics_gauge_new(
	    s->m, "edge_ratelimit_clients",
	    "Clients the per-client rate limit remembers (all workers).", NULL);
	s->rl_max = metrics_gauge_new(
	    s->m, "edge_ratelimit_clients_max",
	    "Clients the per-client rate limit can remember.", NULL);
	s->rl_evicted = metrics_counter_new(
	    s->m, "edge_ratelimit_evictions_total",
	    "Clients the per-client rate limit forgot before their bucket "
	    "was full again, to make room for another.",
	    NULL);
	s->rl_untracked = metrics_counter_new(
	    s->m, "edge_ratelimit_untracked_total",
	    "Requests the per-client rate limit let through without a "
	    "bucket (threads racing for one set of its table).",
	    NULL);
	s->shed = metrics_counter_new(
	    s->m, "edge_requests_shed_total",
	    "Requests of routes with shed = true refused 503 overloaded "
	    "because their worker's loop lagged over limits.brownout_lag "
	    "(also counted in edge_requests_total{outcome=\"overloaded\"}).",
	    NULL);
	if (!s->rl_clients || !s->rl_max || !s->rl_evicted ||
	    !s->rl_untracked || !s->shed)
		return -ENOMEM;
	s->nworkers = s->sh->cfg ? s->sh->cfg->workers : 0;
	if (s->nworkers > CONFIG_WORKERS_MAX)
		s->nworkers = CONFIG_WORKERS_MAX;
	for (i = 0; i < s->nworkers; i++) {
		snprintf(id, sizeof(id), "%u", i);
		lab[1] = id;
		s->accepted[i] = metrics_counter_new(
		    s->m, "edge_worker_accepted_total",
		    "Client connections each worker accepted (SO_REUSEPORT "
		    "spreads them).",
		    lab);
		if (!s->accepted[i])
			return -ENOMEM;
	}
	lab[0] = "result";
	for (i = 0; i < LISTENER_PP_N; i++) {
		lab[1] = listener_pp_name(i);
		s->pp[i] = metrics_counter_new(
		    s->m, "edge_proxy_protocol_total",
		    "Connections on proxy_protocol listen addresses by how "
		    "their PROXY header ended: ok (the client it names used), "
		    "local (LOCAL: the peer's address kept); closed without "
		    "a byte: untrusted (a peer outside trusted_proxies), "
		    "unknown (UNKNOWN, UNSPEC or UNIX: no client address), "
		    "malformed, timeout, closed (by the peer first), "
		    "over_limit (limits.max_connections).",
		    lab);
		if (!s->pp[i])
			return -ENOMEM;
	}
	return 0;
}

int stats_new(struct worker_shared *sh, const char *pin_dir, struct stats **out)
{
	static const char *const cls[STATS_CLASSES] = {"1xx", "2xx", "3xx",
						       "4xx", "5xx"};
	struct stats *s;
	const char *lab[3] = {NULL, NULL, NULL};
	int i;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pins_init(&s->pins);
	s->sh = sh;
	snprintf(s->pin_dir, sizeof(s->pin_dir), "%s", pin_dir ? pin_dir : "");
	s->m = metrics_new();
	if (!s->m)
		goto nomem;
	lab[0] = "outcome";
	for (i = 0; i < OUTCOME_MAX; i++) {
		lab[1] = outcome_name((enum outcome)i);
		s->req[i] = metrics_counter_new(
		    s->m, "edge_requests_total",
		    "Requests and tunnels ended, by outcome.", lab);
		if (!s->req[i])
			goto nomem;
	}
	lab[0] = "class";
	for (i = 0; i < STATS_CLASSES; i++) {
		lab[1] = cls[i];
		s->cls[i] = metrics_counter_new(
		    s->m, "edge_responses_total",
		    "Requests ended, by the class of the status recorded.",
		    lab);
		if (!s->cls[i])
			goto nomem;
	}
	s->dur = metrics_histogram_new(
	    s->m, "edge_request_duration_seconds",
	    "First request byte to the end of the response.", NULL,
	    metrics_duration_bounds_ns, metrics_duration_nbounds, 1000000000);
	s->up = metrics_histogram_new(s->m, "edge_upstream_duration_seconds",
				      "Upstream connect to the response head.",
				      NULL, metrics_duration_bounds_ns,
				      metrics_duration_nbounds, 1000000000);
	s->conns = metrics_gauge_new(s->m, "edge_connections",
				     "Client connections open.", NULL);
	s->parked = metrics_gauge_new(
	    s->m, "edge_connections_parked",
	    "Client connections idle without buffers (parked).", NULL);
	s->gen = metrics_gauge_new(s->m, "edge_route_generation",
				   "Generation of the live route table.", NULL);
	if (!s->dur || !s->up || !s->conns || !s->parked || !s->gen)
		goto nomem;
	if (stats_analytics_new(s))
		goto nomem;
	s->up_eps = metrics_gauge_new(
	    s->m, "edge_upstream_endpoints",
	    "Distinct upstream endpoints the workers know (each counted "
	    "once, however many workers and routes use it).",
	    NULL);
	s->up_idle = metrics_gauge_new(
	    s->m, "edge_upstream_pool_idle",
	    "Idle keep-alive upstream connections pooled.", NULL);
	lab[0] = "result";
	for (i = 0; i < 4; i++) {
		static const char *const res[4] = {"hit", "miss", "stale",
						   "closed"};

		lab[1] = res[i];
		s->up_pool[i] = metrics_counter_new(
		    s->m, "edge_upstream_pool_total",
		    "Pool takes (hit, miss), pooled connections found unusable "
		    "(stale) and closed by the pool's bounds or expiry "
		    "(closed).",
		    lab);
		if (!s->up_pool[i])
			goto nomem;
	}
	s->up_eject = metrics_counter_new(s->m, "edge_upstream_ejections_total",
					  "Passive health ejections.", NULL);
	s->up_panic = metrics_counter_new(
	    s->m, "edge_upstream_panics_total",
	    "Selections that had only ejected endpoints left.", NULL);
	s->up_retries = metrics_counter_new(
	    s->m, "edge_upstream_retries_total",
	    "Requests sent again under a deployment's retry group.", NULL);
	s->up_retry_refused = metrics_counter_new(
	    s->m, "edge_upstream_retry_budget_refused_total",
	    "Retries and hedges a deployment's retry budget refused.", NULL);
	s->up_hedges = metrics_counter_new(
	    s->m, "edge_upstream_hedges_total",
	    "Hedges sent: a request's extra attempt to another endpoint "
	    "while the first had not answered (a deployment's hedge group).",
	    NULL);
	s->up_hedge_wins = metrics_counter_new(
	    s->m, "edge_upstream_hedge_wins_total",
	    "Hedges that answered before the request's other attempts.", NULL);
	s->up_circuit_opens = metrics_counter_new(
	    s->m, "edge_upstream_circuit_opens_total",
	    "Times a deployment's circuit opened (per worker).", NULL);
	s->up_circuit_refused = metrics_counter_new(
	    s->m, "edge_upstream_circuit_refused_total",
	    "Requests refused 503 circuit_open by a deployment's circuit.",
	    NULL);
	s->up_circuits_open = metrics_gauge_new(
	    s->m, "edge_upstream_circuits_open",
	    "Deployment circuits open or half-open, summed over the workers.",
	    NULL);
	s->up_full_waits = metrics_counter_new(
	    s->m, "edge_upstream_endpoints_full_waits_total",
	    "Requests that found every endpoint at its deployment's "
	    "max_inflight and waited for a slot.",
	    NULL);
	s->up_full_refused = metrics_counter_new(
	    s->m, "edge_upstream_endpoints_full_refused_total",
	    "Requests refused 503 overloaded with every endpoint at its "
	    "deployment's max_inflight (no room to wait, or waited "
	    "timeouts.queue).",
	    NULL);
	s->accept_pauses = metrics_counter_new(
	    s->m, "edge_accept_pauses_total",
	    "Times a listener paused because accept ran out of descriptors "
	    "or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM).",
	    NULL);
	s->conn_cap = metrics_gauge_new(
	    s->m, "edge_connections_max",
	    "Client connections allowed at once: limits.max_connections, "
	    "lowered by the descriptor limit.",
	    NULL);
	s->asserts = metrics_counter_new(
	    s->m, "edge_assertions_failed_total",
	    "Internal checks (EDGE_ASSERT) that failed; edged logged them "
	    "and carried on.",
	    NULL);
	s->queued = metrics_gauge_new(
	    s->m, "edge_admission_queued",
	    "Requests waiting in the admission queue for an in-flight slot.",
	    NULL);
	if (!s->up_eps || !s->up_idle || !s->up_eject || !s->up_panic ||
	    !s->up_retries || !s->up_retry_refused || !s->up_circuit_opens ||
	    !s->up_circuit_refused || !s->up_circuits_open ||
	    !s->up_full_waits || !s->up_full_refused || !s->up_hedges ||
	    !s->up_hedge_wins || !s->accept_pauses || !s->conn_cap ||
	    !s->asserts || !s->queued)
		goto nomem;
	if (stats_workers_new(s))
		goto nomem;
	lab[0] = "end";
	for (i = 0; i < TUNNEL_ENDED_MAX; i++) {
		lab[1] = tunnel_ended_name((enum tunnel_ended)i);
		s->tun_ended[i] = metrics_counter_new(
		    s->m, "edge_tunnels_ended_total",
		    "Tunnels (upgraded, TCP routes') ended, by how: both "
		    "directions closed, idle, an error (reset) on the client's "
		    "or the upstream's socket, closed by edged itself.",
		    lab);
		if (!s->tun_ended[i])
			goto nomem;
	}
	s->tun_timed_out = metrics_counter_new(
	    s->m, "edge_tunnels_timed_out_total",
	    "Tunnels ended because a side stopped answering its TCP keepalive "
	    "probes or acknowledging data (timeouts.tunnel_keepalive); also "
	    "counted in edge_tunnels_ended_total as that side's error.",
	    NULL);
	if (!s->tun_timed_out)
		goto nomem;
	stats_pins_open(s);
	*out = s;
	return 0;
nomem:
	stats_free(s);
	return -ENOMEM;
}

void stats_free(struct stats *s)
{
	if (!s)
		return;
	pins_close(&s->pins);
	metrics_free(s->m);
	free(s);
}

struct metrics *stats_metrics(struct stats *s)
{
	return s->m;
}

void stats_request_done(void *arg, enum outcome o, int status, uint64_t t0,
			uint64_t t_connect, uint64_t t_resp)
{
	struct stats *s = arg;
	uint64_t now;

	if (!s)
		return;
	now = clk_now_ns();
	if ((unsigned)o < OUTCOME_MAX)
		metrics_counter_add(s->req[o], 1);
	if (status >= 100 && status <= 599)
		metrics_counter_add(s->cls[status / 100 - 1], 1);
	metrics_histogram_observe(s->dur, now > t0 ? now - t0 : 0);
	if (t_connect && t_resp >= t_connect)
		metrics_histogram_observe(s->up, t_resp - t_connect);
}

/* Bring a counter mirrored from a monotonic source up to v. */
static void stats_counter_to(struct metrics_counter *c, uint64_t v)
{
	uint64_t cur = metrics_counter_get(c);

	if (v > cur)
		metrics_counter_add(c, v - cur);
}

/* edge_connections_max: the reloadable limit, or fewer when the
 * descriptor limit allows fewer (sh->fd_conn_cap). */
static void stats_refresh_cap(struct stats *s)
{
	uint64_t cap, fd;

	pthread_mutex_lock(&s->sh->set_lock);
	cap = s->sh->set.limits.max_connections;
	pthread_mutex_unlock(&s->sh->set_lock);
	fd = atomic_load(&s->sh->fd_conn_cap);
	if (fd && fd < cap)
		cap = fd;
	metrics_gauge_set(s->conn_cap, (int64_t)cap);
}

/* The analytics writer's counters and gauges, queue and sinks. */
static void stats_refresh_analytics(struct stats *s)
{
	struct analytics *a = s->sh->analytics;
	struct analytics_sink_stats ss;
	struct analytics_stats st;
	unsigned i;

	if (!a)
		return;
	analytics_stats(a, &st);
	stats_counter_to(s->an_enqueued, st.enqueued);
	stats_counter_to(s->an_queue_full, st.dropped_queue_full);
	for (i = 0; i < s->n_an; i++) {
		struct stats_sink *k = &s->an[i];

		if (analytics_sink_stats(a, i, &ss))
			continue;
		stats_counter_to(k->written, ss.written);
		stats_counter_to(k->dropped_spool_full, ss.dropped_spool_full);
		stats_counter_to(k->dropped_shutdown, ss.dropped_shutdown);
		stats_counter_to(k->errors, ss.write_errors);
		stats_counter_to(k->batches, ss.batches);
		metrics_gauge_set(k->spooled, (int64_t)ss.spooled);
		metrics_gauge_set(k->up, ss.up);
		if (ss.disk) {
			metrics_gauge_set(k->disk_spooled,
					  (int64_t)ss.disk_events);
			metrics_gauge_set(k->disk_files,
					  (int64_t)ss.disk_files);
			metrics_gauge_set(k->disk_bytes,
					  (int64_t)ss.disk_bytes);
			metrics_gauge_set(k->disk_max,
					  (int64_t)ss.disk_max_bytes);
			stats_counter_to(k->spilled, ss.spilled);
			stats_counter_to(k->replayed, ss.replayed);
			stats_counter_to(k->disk_corrupt, ss.disk_corrupt);
			stats_counter_to(k->disk_errors, ss.disk_put_errors);
		}
		if (ss.has_own) {
			stats_counter_to(k->duplicates, ss.own.duplicates);
			stats_counter_to(k->rejected, ss.own.rejected);
			stats_counter_to(k->connects, ss.own.connects);
		}
	}
}

/* The per-client rate limit's table, and each worker's accepts. */
static void stats_refresh_workers(struct stats *s)
{
	struct admit_limiter_stats st;
	unsigned i;

	admit_limiter_stats(s->sh->limiter, &st);
	metrics_gauge_set(s->rl_clients, (int64_t)st.clients);
	metrics_gauge_set(s->rl_max, (int64_t)st.capacity);
	stats_counter_to(s->rl_evicted, st.evicted);
	stats_counter_to(s->rl_untracked, st.untracked);
	for (i = 0; i < s->nworkers; i++)
		stats_counter_to(s->accepted[i],
				 atomic_load_explicit(&s->sh->accepted[i].n,
						      memory_order_relaxed));
	stats_counter_to(
	    s->shed, atomic_load_explicit(&s->sh->shed, memory_order_relaxed));
	for (i = 0; i < LISTENER_PP_N; i++)
		stats_counter_to(
		    s->pp[i],
		    atomic_load_explicit(&s->sh->pp[i], memory_order_relaxed));
}

/* Refresh what is read rather than counted. */
static void stats_refresh(struct stats *s)
{
	struct route_table *t = route_table_current(&s->sh->routes);
	struct tunnel_counts tun;
	int i;

	metrics_gauge_set(s->conns, (int64_t)atomic_load(&s->sh->connections));
	metrics_gauge_set(s->parked, (int64_t)atomic_load(&s->sh->parked));
	metrics_gauge_set(s->gen, t ? (int64_t)route_table_generation(t) : 0);
	route_table_put(t);
	metrics_gauge_set(s->up_eps,
			  s->sh->upreg
			      ? (int64_t)upreg_count(s->sh->upreg)
			      : (int64_t)atomic_load(&s->sh->up.endpoints));
	metrics_gauge_set(s->up_idle,
			  (int64_t)atomic_load(&s->sh->up.idle_fds));
	stats_counter_to(s->up_pool[0], atomic_load(&s->sh->up.pool_hits));
	stats_counter_to(s->up_pool[1], atomic_load(&s->sh->up.pool_misses));
	stats_counter_to(s->up_pool[2], atomic_load(&s->sh->up.pool_stale));
	stats_counter_to(s->up_pool[3], atomic_load(&s->sh->up.pool_closed));
	stats_counter_to(s->up_eject, atomic_load(&s->sh->up.ejections));
	stats_counter_to(s->up_panic, atomic_load(&s->sh->up.panics));
	stats_counter_to(s->up_retries, atomic_load(&s->sh->up.retries));
	stats_counter_to(s->up_retry_refused,
			 atomic_load(&s->sh->up.retry_refused));
	stats_counter_to(s->up_circuit_opens,
			 atomic_load(&s->sh->up.circuit_opens));
	stats_counter_to(s->up_circuit_refused,
			 atomic_load(&s->sh->up.circuit_refused));
	stats_counter_to(s->up_hedges, atomic_load(&s->sh->up.hedges));
	stats_counter_to(s->up_hedge_wins, atomic_load(&s->sh->up.hedge_wins));
	metrics_gauge_set(s->up_circuits_open,
			  (int64_t)atomic_load(&s->sh->up.circuits_open));
	stats_counter_to(s->up_full_waits,
			 atomic_load(&s->sh->up.ep_full_waits));
	stats_counter_to(s->up_full_refused,
			 atomic_load(&s->sh->up.ep_full_refused));
	stats_counter_to(s->accept_pauses, atomic_load(&s->sh->accept_pauses));
	stats_counter_to(s->asserts, edge_assert_failures());
	tunnel_counts(&tun);
	for (i = 0; i < TUNNEL_ENDED_MAX; i++)
		stats_counter_to(s->tun_ended[i], tun.ended[i]);
	stats_counter_to(s->tun_timed_out, tun.timed_out);
	stats_refresh_cap(s);
	metrics_gauge_set(s->queued,
			  (int64_t)admit_queue_length(&s->sh->queue));
	stats_refresh_analytics(s);
	stats_refresh_workers(s);
}

/* Read the XDP counters; false when the maps cannot be read. */
static bool stats_xdp_read(struct stats *s, uint64_t v[EDGE_CTR_MAX])
{
	if (stats_pins_open(s))
		return false;
	if (pins_counters_read(&s->pins, v) == 0)
		return true;
	/* the maps went away (edge detached): look for new ones once */
	pins_close(&s->pins);
	s->pins_open = false;
	return stats_pins_open(s) == 0 && pins_counters_read(&s->pins, v) == 0;
}

int stats_build_info(struct stats *s, const char *version, const char *commit)
{
	const char *lab[] = {"version", version, "commit", commit, NULL};
	struct metrics_gauge *g = metrics_gauge_new(
	    s->m, "edge_build_info",
	    "edged's version and the commit it was built from (always 1).",
	    lab);

	if (!g)
		return -ENOMEM;
	metrics_gauge_set(g, 1);
	return 0;
}

/* edge_route_responses_total: the routes that have counted something,
 * at most STATS_ROUTES_MAX of them; the others' together under
 * route="_other". */
#define STATS_ROUTES_MAX 1000

struct stats_routes {
	struct evbuffer *out;
	size_t n;
	uint64_t other[STATS_CLASSES];
	int rc;
};

static int stats_route_cb(void *arg, const char *domain, const char *prefix,
			  const char *env_id, const _Atomic uint64_t *classes)
{
	static const char *const cls[STATS_CLASSES] = {"1xx", "2xx", "3xx",
						       "4xx", "5xx"};
	struct stats_routes *x = arg;
	uint64_t v[STATS_CLASSES], sum = 0;
	int i;

	for (i = 0; i < STATS_CLASSES; i++) {
		v[i] = atomic_load_explicit(&classes[i], memory_order_relaxed);
		sum += v[i];
	}
	if (!sum)
		return 0;
	if (x->n >= STATS_ROUTES_MAX) {
		for (i = 0; i < STATS_CLASSES; i++)
			x->other[i] += v[i];
		return 0;
	}
	x->n++;
	/* domains, prefixes (config_prefix_check) and ids are checked
	 * names: no quote, backslash or newline to escape */
	for (i = 0; i < STATS_CLASSES; i++)
		if (evbuffer_add_printf(
			x->out,
			"edge_route_responses_total{route=\"%s%s\","
			"environment=\"%s\",class=\"%s\"} %llu\n",
			domain, prefix, env_id, cls[i],
			(unsigned long long)v[i]) < 0)
			return -ENOMEM;
	return 0;
}

static int stats_render_routes(struct stats *s, struct evbuffer *out)
{
	static const char *const cls[STATS_CLASSES] = {"1xx", "2xx", "3xx",
						       "4xx", "5xx"};
	struct route_table *t = route_table_current(&s->sh->routes);
	struct stats_routes x = {.out = out};
	int rc, i;

	if (!t)
		return 0;
	rc = metrics_render_help(
	    out, "edge_route_responses_total",
	    "Requests ended per HTTP route (its least domain and its "
	    "prefix), by status class; routes with none are left out.",
	    "counter");
	if (rc == 0)
		rc = route_table_each_route(t, stats_route_cb, &x);
	route_table_put(t);
	for (i = 0; rc == 0 && x.n >= STATS_ROUTES_MAX && i < STATS_CLASSES;
	     i++)
		if (evbuffer_add_printf(
			out,
			"edge_route_responses_total{route=\"_other\","
			"environment=\"\",class=\"%s\"} %llu\n",
			cls[i], (unsigned long long)x.other[i]) < 0)
			rc = -ENOMEM;
	return rc;
}

/* The workers' sends and reads batched through io_uring, and the
 * io_uring_enter calls that carried them (their ratio: operations per
 * system call). */
static int stats_render_uring(struct evbuffer *out)
{
	static const struct {
		const char *name, *help;
		unsigned long (*get)(void);
	} c[] = {
	    {"edge_io_uring_sends_total",
	     "Sends the workers batched through io_uring.", sockio_batch_sends},
	    {"edge_io_uring_reads_total",
	     "Reads the workers batched through io_uring.", sockio_batch_reads},
	    {"edge_io_uring_enters_total",
	     "io_uring_enter calls that carried the sends and reads.",
	     sockio_batch_enters},
	};
	size_t i;
	int rc = 0;

	for (i = 0; rc == 0 && i < sizeof(c) / sizeof(c[0]); i++) {
		rc = metrics_render_help(out, c[i].name, c[i].help, "counter");
		if (rc == 0 && evbuffer_add_printf(out, "%s %lu\n", c[i].name,
						   c[i].get()) < 0)
			rc = -ENOMEM;
	}
	return rc;
}

/* Each worker's loop lag (worker_lag_ns), seconds. */
static int stats_render_lag(struct stats *s, struct evbuffer *out)
{
	static const char name[] = "edge_worker_loop_lag_seconds";
	uint64_t now = clk_fresh_ns();
	char v[32];
	unsigned i;
	int rc;

	rc = metrics_render_help(
	    out, name,
	    "The longest each worker's event loop ran late over the last 5 "
	    "to 10 s (a probe every 20 ms; a stall under way included): "
	    "brownout sheds while it passes limits.brownout_lag.",
	    "gauge");
	for (i = 0; rc == 0 && i < s->nworkers; i++) {
		metrics_fmt_scaled(v, sizeof(v), worker_lag_ns(s->sh, i, now),
				   1000000000);
		if (evbuffer_add_printf(out, "%s{worker=\"%u\"} %s\n", name, i,
					v) < 0)
			rc = -ENOMEM;
	}
	return rc;
}

/* Response bytes before and after compression, by coding. */
static int stats_render_compression(struct evbuffer *out)
{
	static const char *const name[2] = {"edge_compression_in_bytes_total",
					    "edge_compression_out_bytes_total"};
	static const char *const help[2] = {
	    "Response body bytes given to the encoders (compress.h), by "
	    "coding, counted as each response ends.",
	    "Response body bytes the encoders made of them, by coding."};
	unsigned long long v[2];
	int rc = 0, k, e;

	for (k = 0; rc == 0 && k < 2; k++) {
		rc = metrics_render_help(out, name[k], help[k], "counter");
		for (e = ENC_GZIP; rc == 0 && e < ENC_N; e++) {
			enc_totals((enum enc)e, &v[0], &v[1]);
			if (evbuffer_add_printf(
				out, "%s{algorithm=\"%s\"} %llu\n", name[k],
				enc_name((enum enc)e), v[k]) < 0)
				rc = -ENOMEM;
		}
	}
	return rc;
}

/* text/html responses read for injection, by what became of them. */
static int stats_render_inject(struct evbuffer *out)
{
	static const char name[] = "edge_inject_responses_total";
	int rc, k;

	rc = metrics_render_help(
	    out, name,
	    "text/html responses read whole for script injection "
	    "(inject.h), by result: injected, no_tag, too_large "
	    "(limits.max_inject_bytes, a decompression bomb), undecodable; "
	    "all but injected went on as the upstream sent them.",
	    "counter");
	for (k = 0; rc == 0 && k < INJECT_RESULTS; k++)
		if (evbuffer_add_printf(
			out, "%s{result=\"%s\"} %llu\n", name,
			inject_result_name((enum inject_result)k),
			inject_total((enum inject_result)k)) < 0)
			rc = -ENOMEM;
	return rc;
}

/* The proof-of-work challenge (challenge.h): requests by what became
 * of them, and the failed checks by why. */
static int stats_render_challenge(struct evbuffer *out)
{
	static const char name[] = "edge_challenge_total";
	static const char fname[] = "edge_challenge_failures_total";
	int rc, k;

	rc = metrics_render_help(
	    out, name,
	    "Requests of environments with a challenge (challenge.h), by "
	    "result: issued (a page or a 403 challenge_required), solved (a "
	    "solution exchanged for a pass), passed (admitted by a pass, or "
	    "by a prefix that showed one), failed (a bad solution or pass: "
	    "challenged again).",
	    "counter");
	for (k = 0; rc == 0 && k < CHAL_R_MAX; k++)
		if (evbuffer_add_printf(out, "%s{result=\"%s\"} %llu\n", name,
					chal_result_name((enum chal_result)k),
					(unsigned long long)chal_total(
					    (enum chal_result)k)) < 0)
			rc = -ENOMEM;
	if (rc == 0)
		rc = metrics_render_help(
		    out, fname,
		    "Failed challenge checks by reason: malformed, forged "
		    "(tampered, another client's or environment's, an unknown "
		    "key), expired, unsolved (a wrong solution), replayed.",
		    "counter");
	for (k = CHAL_MALFORMED; rc == 0 && k < CHAL_CHECK_MAX; k++)
		if (evbuffer_add_printf(out, "%s{reason=\"%s\"} %llu\n", fname,
					chal_check_name((enum chal_check)k),
					(unsigned long long)chal_fail_total(
					    (enum chal_check)k)) < 0)
			rc = -ENOMEM;
	return rc;
}

/* The credential gates (auth.h): checks by the credential presented
 * and their result. */
static int stats_render_auth(struct evbuffer *out)
{
	static const char name[] = "edge_auth_total";
	int rc, m, k;

	rc = metrics_render_help(
	    out, name,
	    "Requests checked by a gate (auth.h): by the credential "
	    "presented (none, api_key, jwt) and the result, ok or why it "
	    "was refused 401 unauthorized; and by forward auth (method "
	    "forward): ok, denied, redirected or unavailable.",
	    "counter");
	for (m = 0; rc == 0 && m < AUTH_M__COUNT; m++)
		for (k = 0; rc == 0 && k < AUTH_R__COUNT; k++) {
			uint64_t v = auth_total((enum auth_method)m,
						(enum auth_result)k);

			/* the pairs that can happen, and any counted */
			if (!v && (m == AUTH_M_NONE) != (k == AUTH_R_MISSING))
				continue;
			if (evbuffer_add_printf(
				out, "%s{method=\"%s\",result=\"%s\"} %llu\n",
				name,
				m ? auth_method_name((enum auth_method)m)
				  : "none",
				auth_result_name((enum auth_result)k),
				(unsigned long long)v) < 0)
				rc = -ENOMEM;
		}
	if (rc == 0)
		rc = metrics_render_help(
		    out, "edge_auth_forward_cache_hits_total",
		    "Forward auth admissions taken from a worker's cache "
		    "(the service's Cache-Control, at most cache_ttl) "
		    "instead of a subrequest.",
		    "counter");
	if (rc == 0 && evbuffer_add_printf(
			   out, "edge_auth_forward_cache_hits_total %llu\n",
			   (unsigned long long)fauth_cache_hits()) < 0)
		rc = -ENOMEM;
	return rc;
}

int stats_render(void *ctx, struct evbuffer *out)
{
	struct stats *s = ctx;
	uint64_t v[EDGE_CTR_MAX];
	int rc;

	stats_refresh(s);
	rc = metrics_render(s->m, out);
	if (rc == 0 && s->sh->upreg)
		rc = upreg_render(s->sh->upreg, out);
	if (rc == 0)
		rc = stats_render_routes(s, out);
	if (rc == 0)
		rc = metrics_render_process(out);
	if (rc == 0)
		rc = stats_render_uring(out);
	if (rc == 0)
		rc = stats_render_lag(s, out);
	if (rc == 0)
		rc = stats_render_compression(out);
	if (rc == 0)
		rc = stats_render_inject(out);
	if (rc == 0)
		rc = stats_render_challenge(out);
	if (rc == 0)
		rc = stats_render_auth(out);
	if (rc == 0 && stats_xdp_read(s, v))
		rc = metrics_render_xdp(out, v, EDGE_CTR_MAX);
	return rc;
}

json_t *stats_counters_json(struct stats *s)
{
	json_t *c = json_object(), *res;
	uint64_t total = 0, n;
	char key[64];
	int i;

	if (!c)
		return NULL;
	for (i = 0; i < OUTCOME_MAX; i++)
		total += metrics_counter_get(s->req[i]);
	json_object_set_new(c, "requests_total",
			    json_integer((json_int_t)total));
	for (i = 0; i < OUTCOME_MAX; i++) {
		n = metrics_counter_get(s->req[i]);
		if (!n)
			continue;
		snprintf(key, sizeof(key), "requests_%s",
			 outcome_name((enum outcome)i));
		json_object_set_new(c, key, json_integer((json_int_t)n));
	}
	for (i = 0; i < STATS_CLASSES; i++) {
		n = metrics_counter_get(s->cls[i]);
		if (!n)
			continue;
		snprintf(key, sizeof(key), "responses_%dxx", i + 1);
		json_object_set_new(c, key, json_integer((json_int_t)n));
	}
	json_object_set_new(
	    c, "connections_open",
	    json_integer((json_int_t)atomic_load(&s->sh->connections)));
	res = json_pack("{s:o}", "counters", c);
	return res;
}
