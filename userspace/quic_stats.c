// SPDX-License-Identifier: BSD-2-Clause
/*
 * quic_stats.c - QUIC's counters (quic.h): the edge_quic_* series and
 * edgectl status's quic counts.
 */
#include <errno.h>

#include <stdio.h>

#include "config.h"
#include "metrics.h"
#include "quic.h"

static const char *const quic_drop_names[QUIC_DROP_MAX] = {
    "undecodable", "unknown_connection", "refused", "bad_token"};

static struct metrics_counter *q_conns, *q_streams, *q_retries, *q_vn,
    *q_resets, *q_hs_ok, *q_hs_failed, *q_early_ok, *q_early_replay,
    *q_early_full, *q_early_req;
static struct metrics_counter *q_drop[QUIC_DROP_MAX];
static struct metrics_gauge *q_open;
static struct metrics_counter *q_lost;

/* by worker: connections, streams, handshakes, Retry, losses */
enum { QW_CONNS, QW_STREAMS, QW_HANDSHAKES, QW_RETRIES, QW_LOST, QW_MAX };
static const char *const qw_names[QW_MAX] = {
    "connections", "streams", "handshakes", "retries", "packets_lost"};
static struct metrics_counter *q_w[QW_MAX][CONFIG_WORKERS_MAX];
static struct metrics_gauge *q_w_open[CONFIG_WORKERS_MAX];
static unsigned q_nworkers;

static int quic_metrics_workers(struct metrics *m, unsigned nworkers)
{
	static const char *const help[QW_MAX] = {
	    "QUIC connections each worker accepted (the steering program "
	    "keeps a connection on its worker)",
	    "HTTP/3 request streams on each worker",
	    "QUIC handshakes each worker completed",
	    "Retry packets each worker sent (64 handshakes under way on it)",
	    "packets carrying a stream's data each worker declared lost "
	    "(counted at the stream's close)"};
	char names[QW_MAX][64], id[16];
	const char *lab[3] = {"worker", id, NULL};

	if (nworkers > CONFIG_WORKERS_MAX)
		nworkers = CONFIG_WORKERS_MAX;
	for (unsigned k = 0; k < QW_MAX; k++)
		snprintf(names[k], sizeof(names[k]),
			 "edge_quic_worker_%s_total", qw_names[k]);
	for (unsigned i = 0; i < nworkers; i++) {
		snprintf(id, sizeof(id), "%u", i);
		for (unsigned k = 0; k < QW_MAX; k++) {
			q_w[k][i] =
			    metrics_counter_new(m, names[k], help[k], lab);
			if (!q_w[k][i])
				return -ENOMEM;
		}
		q_w_open[i] = metrics_gauge_new(
		    m, "edge_quic_worker_connections",
		    "QUIC connections open on each worker", lab);
		if (!q_w_open[i])
			return -ENOMEM;
	}
	q_nworkers = nworkers;
	return 0;
}

int quic_metrics(struct metrics *m, unsigned nworkers)
{
	static const char *const ok[] = {"result", "ok", NULL};
	static const char *const failed[] = {"result", "failed", NULL};
	static const char *const accepted[] = {"result", "accepted", NULL};
	static const char *const replayed[] = {"result", "replayed", NULL};
	static const char *const full[] = {"result", "table_full", NULL};

	q_conns = metrics_counter_new(m, "edge_quic_connections_total",
				      "QUIC connections accepted (an Initial "
				      "that made one)",
				      NULL);
	q_open = metrics_gauge_new(m, "edge_quic_connections",
				   "QUIC connections open now", NULL);
	q_streams = metrics_counter_new(
	    m, "edge_quic_streams_total",
	    "HTTP/3 request streams a client opened (each a request)", NULL);
	q_hs_ok = metrics_counter_new(m, "edge_quic_handshakes_total",
				      "QUIC handshakes, by result", ok);
	q_hs_failed = metrics_counter_new(m, "edge_quic_handshakes_total",
					  "QUIC handshakes, by result", failed);
	q_retries = metrics_counter_new(
	    m, "edge_quic_retries_total",
	    "Retry packets sent: a new client proves its address first "
	    "(a worker under handshake load, or 0-RTT before an Initial)",
	    NULL);
	q_vn = metrics_counter_new(
	    m, "edge_quic_version_negotiations_total",
	    "version negotiation packets sent (a client's unknown version)",
	    NULL);
	q_resets = metrics_counter_new(
	    m, "edge_quic_stateless_resets_total",
	    "stateless resets sent (a short packet for a connection this "
	    "edged does not know)",
	    NULL);
	q_early_ok = metrics_counter_new(
	    m, "edge_quic_early_data_total",
	    "0-RTT: handshakes that took early data (accepted), ClientHellos "
	    "seen before whose early data was refused (replayed), and those "
	    "refused for want of room to remember them (table_full)",
	    accepted);
	q_early_replay = metrics_counter_new(
	    m, "edge_quic_early_data_total",
	    "0-RTT: handshakes that took early data (accepted), ClientHellos "
	    "seen before whose early data was refused (replayed), and those "
	    "refused for want of room to remember them (table_full)",
	    replayed);
	q_early_full = metrics_counter_new(
	    m, "edge_quic_early_data_total",
	    "0-RTT: handshakes that took early data (accepted), ClientHellos "
	    "seen before whose early data was refused (replayed), and those "
	    "refused for want of room to remember them (table_full)",
	    full);
	q_early_req = metrics_counter_new(
	    m, "edge_quic_early_requests_total",
	    "requests served from 0-RTT data (GET, HEAD, OPTIONS; the others "
	    "are 425 too_early)",
	    NULL);
	q_lost = metrics_counter_new(
	    m, "edge_quic_packets_lost_total",
	    "packets carrying a stream's data declared lost (counted at the "
	    "stream's close; each was sent again)",
	    NULL);
	if (!q_lost || quic_metrics_workers(m, nworkers))
		return -ENOMEM;
	if (!q_conns || !q_open || !q_streams || !q_hs_ok || !q_hs_failed ||
	    !q_retries || !q_vn || !q_resets || !q_early_ok ||
	    !q_early_replay || !q_early_full || !q_early_req)
		return -ENOMEM;
	for (unsigned i = 0; i < QUIC_DROP_MAX; i++) {
		const char *lab[] = {"reason", quic_drop_names[i], NULL};

		q_drop[i] = metrics_counter_new(
		    m, "edge_quic_datagrams_dropped_total",
		    "datagrams dropped without a connection: undecodable "
		    "(garbage, a truncated header), unknown_connection (not "
		    "an Initial, for no connection here), refused "
		    "(limits.max_connections or a drain), bad_token (a Retry "
		    "token that did not verify: closed with INVALID_TOKEN)",
		    lab);
		if (!q_drop[i])
			return -ENOMEM;
	}
	return 0;
}

/* per worker: [{"connections", "open", "streams", "handshakes",
 * "retries", "packets_lost"}] */
static json_t *quic_workers_json(void)
{
	json_t *a = json_array();

	for (unsigned i = 0; a && i < q_nworkers; i++) {
		json_t *o = json_object();

		for (unsigned k = 0; o && k < QW_MAX; k++)
			json_object_set_new(
			    o, qw_names[k],
			    json_integer(
				(json_int_t)metrics_counter_get(q_w[k][i])));
		json_object_set_new(
		    o, "open",
		    json_integer((json_int_t)metrics_gauge_get(q_w_open[i])));
		json_array_append_new(a, o);
	}
	return a;
}

json_t *quic_counts_json(void)
{
	json_t *drop = json_object();

	for (unsigned i = 0; drop && i < QUIC_DROP_MAX; i++)
		json_object_set_new(
		    drop, quic_drop_names[i],
		    json_integer((json_int_t)metrics_counter_get(q_drop[i])));
	return json_pack(
	    "{s:I,s:I,s:I,s:{s:I,s:I},s:I,s:I,s:I,s:o*,s:{s:I,s:I,s:I,s:I},s:I,"
	    "s:o*}",
	    "connections", (json_int_t)metrics_counter_get(q_conns), "open",
	    (json_int_t)metrics_gauge_get(q_open), "streams",
	    (json_int_t)metrics_counter_get(q_streams), "handshakes", "ok",
	    (json_int_t)metrics_counter_get(q_hs_ok), "failed",
	    (json_int_t)metrics_counter_get(q_hs_failed), "retries",
	    (json_int_t)metrics_counter_get(q_retries), "version_negotiations",
	    (json_int_t)metrics_counter_get(q_vn), "stateless_resets",
	    (json_int_t)metrics_counter_get(q_resets), "dropped", drop,
	    "early_data", "accepted",
	    (json_int_t)metrics_counter_get(q_early_ok), "replayed",
	    (json_int_t)metrics_counter_get(q_early_replay), "table_full",
	    (json_int_t)metrics_counter_get(q_early_full), "requests",
	    (json_int_t)metrics_counter_get(q_early_req), "packets_lost",
	    (json_int_t)metrics_counter_get(q_lost), "workers",
	    quic_workers_json());
}

void quic_count(unsigned worker, enum quic_event e)
{
	bool w = worker < q_nworkers;

	switch (e) {
	case QUIC_EV_CONN_OPEN:
		metrics_counter_add(q_conns, 1);
		metrics_gauge_add(q_open, 1);
		if (w) {
			metrics_counter_add(q_w[QW_CONNS][worker], 1);
			metrics_gauge_add(q_w_open[worker], 1);
		}
		break;
	case QUIC_EV_CONN_CLOSE:
		metrics_gauge_add(q_open, -1);
		if (w)
			metrics_gauge_add(q_w_open[worker], -1);
		break;
	case QUIC_EV_STREAM:
		metrics_counter_add(q_streams, 1);
		if (w)
			metrics_counter_add(q_w[QW_STREAMS][worker], 1);
		break;
	case QUIC_EV_HANDSHAKE_OK:
		metrics_counter_add(q_hs_ok, 1);
		if (w)
			metrics_counter_add(q_w[QW_HANDSHAKES][worker], 1);
		break;
	case QUIC_EV_HANDSHAKE_FAILED:
		metrics_counter_add(q_hs_failed, 1);
		break;
	case QUIC_EV_RETRY:
		metrics_counter_add(q_retries, 1);
		if (w)
			metrics_counter_add(q_w[QW_RETRIES][worker], 1);
		break;
	case QUIC_EV_VERSION_NEG:
		metrics_counter_add(q_vn, 1);
		break;
	case QUIC_EV_RESET:
		metrics_counter_add(q_resets, 1);
		break;
	case QUIC_EV_EARLY_ACCEPTED:
		metrics_counter_add(q_early_ok, 1);
		break;
	case QUIC_EV_EARLY_REPLAYED:
		metrics_counter_add(q_early_replay, 1);
		break;
	case QUIC_EV_EARLY_FULL:
		metrics_counter_add(q_early_full, 1);
		break;
	case QUIC_EV_EARLY_REQUEST:
		metrics_counter_add(q_early_req, 1);
		break;
	}
}

void quic_count_lost(unsigned worker, uint64_t n)
{
	if (n == 0)
		return;
	metrics_counter_add(q_lost, n);
	if (worker < q_nworkers)
		metrics_counter_add(q_w[QW_LOST][worker], n);
}

void quic_count_drop(enum quic_drop d)
{
	metrics_counter_add(q_drop[d], 1);
}
