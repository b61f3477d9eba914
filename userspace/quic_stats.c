// SPDX-License-Identifier: BSD-2-Clause
/*
 * quic_stats.c - QUIC's counters (quic.h): the edge_quic_* series and
 * edgectl status's quic counts.
 */
#include <errno.h>

#include "metrics.h"
#include "quic.h"

static const char *const quic_drop_names[QUIC_DROP_MAX] = {
    "undecodable", "unknown_connection", "refused", "bad_token"};

static struct metrics_counter *q_conns, *q_streams, *q_retries, *q_vn,
    *q_resets, *q_hs_ok, *q_hs_failed, *q_early_ok, *q_early_replay,
    *q_early_req;
static struct metrics_counter *q_drop[QUIC_DROP_MAX];
static struct metrics_gauge *q_open;

int quic_metrics(struct metrics *m)
{
	static const char *const ok[] = {"result", "ok", NULL};
	static const char *const failed[] = {"result", "failed", NULL};
	static const char *const accepted[] = {"result", "accepted", NULL};
	static const char *const replayed[] = {"result", "replayed", NULL};

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
	    "seen before whose early data was refused (replayed)",
	    accepted);
	q_early_replay = metrics_counter_new(
	    m, "edge_quic_early_data_total",
	    "0-RTT: handshakes that took early data (accepted), ClientHellos "
	    "seen before whose early data was refused (replayed)",
	    replayed);
	q_early_req = metrics_counter_new(
	    m, "edge_quic_early_requests_total",
	    "requests served from 0-RTT data (GET, HEAD, OPTIONS; the others "
	    "are 425 too_early)",
	    NULL);
	if (!q_conns || !q_open || !q_streams || !q_hs_ok || !q_hs_failed ||
	    !q_retries || !q_vn || !q_resets || !q_early_ok ||
	    !q_early_replay || !q_early_req)
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

json_t *quic_counts_json(void)
{
	json_t *drop = json_object();

	for (unsigned i = 0; drop && i < QUIC_DROP_MAX; i++)
		json_object_set_new(
		    drop, quic_drop_names[i],
		    json_integer((json_int_t)metrics_counter_get(q_drop[i])));
	return json_pack(
	    "{s:I,s:I,s:I,s:{s:I,s:I},s:I,s:I,s:I,s:o*,s:{s:I,s:I,s:I}}",
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
	    (json_int_t)metrics_counter_get(q_early_replay), "requests",
	    (json_int_t)metrics_counter_get(q_early_req));
}

void quic_count(enum quic_event e)
{
	switch (e) {
	case QUIC_EV_CONN_OPEN:
		metrics_counter_add(q_conns, 1);
		metrics_gauge_add(q_open, 1);
		break;
	case QUIC_EV_CONN_CLOSE:
		metrics_gauge_add(q_open, -1);
		break;
	case QUIC_EV_STREAM:
		metrics_counter_add(q_streams, 1);
		break;
	case QUIC_EV_HANDSHAKE_OK:
		metrics_counter_add(q_hs_ok, 1);
		break;
	case QUIC_EV_HANDSHAKE_FAILED:
		metrics_counter_add(q_hs_failed, 1);
		break;
	case QUIC_EV_RETRY:
		metrics_counter_add(q_retries, 1);
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
	case QUIC_EV_EARLY_REQUEST:
		metrics_counter_add(q_early_req, 1);
		break;
	}
}

void quic_count_drop(enum quic_drop d)
{
	metrics_counter_add(q_drop[d], 1);
}
