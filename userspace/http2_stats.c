// SPDX-License-Identifier: BSD-2-Clause
/*
 * http2_stats.c - the HTTP/2 adapter's counters (http2.h): the edge_http2_*
 * series and edgectl status's http2 counts.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "http2.h"
#include "metrics.h"

static const char *const h2_code_names[HTTP2_CODES] = {
    "no_error",
    "protocol_error",
    "internal_error",
    "flow_control_error",
    "settings_timeout",
    "stream_closed",
    "frame_size_error",
    "refused_stream",
    "cancel",
    "compression_error",
    "connect_error",
    "enhance_your_calm",
    "inadequate_security",
    "http_1_1_required",
};

static const char *const h2_why_names[HTTP2_WHY_MAX] = {
    "invalid_header", "header_list_too_large", "host_mismatch",
    "idle",	      "window_stalled",	       "drain",
    "flood",	      "continuation_flood",    "settings_flood",
    "bad_preface",    "protocol_error",
};

/* [0] sent, [1] received */
static struct metrics_counter *h2_m_rst[2][HTTP2_CODES];
static struct metrics_counter *h2_m_goaway[2][HTTP2_CODES];
static struct metrics_counter *h2_m_why[HTTP2_WHY_MAX];
static struct metrics_counter *h2_m_conns, *h2_m_streams, *h2_m_renewed;
static struct metrics_gauge *h2_m_open, *h2_m_released;

int http2_metrics(struct metrics *m)
{
	static const char *const dir[2] = {"sent", "received"};
	unsigned d, i;

	h2_m_conns = metrics_counter_new(
	    m, "edge_http2_connections_total",
	    "client connections that spoke HTTP/2 (ALPN h2, or the "
	    "preface in cleartext)",
	    NULL);
	h2_m_open =
	    metrics_gauge_new(m, "edge_http2_connections",
			      "HTTP/2 client connections open now", NULL);
	h2_m_released = metrics_gauge_new(
	    m, "edge_http2_connections_released",
	    "idle HTTP/2 client connections holding no nghttp2 session now "
	    "(released once parked, made again at their next byte)",
	    NULL);
	h2_m_renewed = metrics_counter_new(
	    m, "edge_http2_sessions_renewed_total",
	    "released HTTP/2 sessions made again (the connection's next byte, "
	    "its idle deadline or a drain)",
	    NULL);
	h2_m_streams = metrics_counter_new(
	    m, "edge_http2_streams_total",
	    "HTTP/2 streams a client opened (each a request)", NULL);
	if (!h2_m_conns || !h2_m_open || !h2_m_released || !h2_m_renewed ||
	    !h2_m_streams)
		return -ENOMEM;
	for (d = 0; d < 2; d++)
		for (i = 0; i < HTTP2_CODES; i++) {
			const char *lab[] = {"direction", dir[d], "reason",
					     h2_code_names[i], NULL};

			h2_m_rst[d][i] = metrics_counter_new(
			    m, "edge_http2_resets_total",
			    "RST_STREAM frames, by direction and error code "
			    "(sent protocol_error: a request HTTP/2 "
			    "forbids; refused_stream: over "
			    "http2.max_concurrent_streams)",
			    lab);
			h2_m_goaway[d][i] = metrics_counter_new(
			    m, "edge_http2_goaways_total",
			    "GOAWAY frames, by direction and error code "
			    "(sent enhance_your_calm: a flood or rapid "
			    "reset)",
			    lab);
			if (!h2_m_rst[d][i] || !h2_m_goaway[d][i])
				return -ENOMEM;
		}
	for (i = 0; i < HTTP2_WHY_MAX; i++) {
		const char *lab[] = {"reason", h2_why_names[i], NULL};

		h2_m_why[i] = metrics_counter_new(
		    m, "edge_http2_refusals_total",
		    "streams reset and connections ended by edge's own "
		    "checks: invalid_header, header_list_too_large "
		    "(http2.max_header_list_size), host_mismatch, idle "
		    "(GOAWAY), window_stalled (closed), drain (GOAWAY); and "
		    "connections nghttp2 ended: flood (PING or SETTINGS "
		    "acks, or stream resets, piling up), "
		    "continuation_flood, settings_flood, bad_preface, "
		    "protocol_error (any other connection error, whether "
		    "nghttp2 refused the input or sent its own GOAWAY)",
		    lab);
		if (!h2_m_why[i])
			return -ENOMEM;
	}
	return 0;
}

/* Counters by code, summed over the codes, as {"code": n, ...} of those
 * not 0. */
static json_t *h2_codes_json(struct metrics_counter *const *v)
{
	json_t *o = json_object();
	unsigned i;
	uint64_t n;

	for (i = 0; o && i < HTTP2_CODES; i++)
		if ((n = metrics_counter_get(v[i])) != 0)
			json_object_set_new(o, h2_code_names[i],
					    json_integer((json_int_t)n));
	return o;
}

json_t *http2_counts_json(void)
{
	json_t *why = json_object();
	unsigned i;

	for (i = 0; why && i < HTTP2_WHY_MAX; i++)
		json_object_set_new(
		    why, h2_why_names[i],
		    json_integer((json_int_t)metrics_counter_get(h2_m_why[i])));
	return json_pack(
	    "{s:I, s:I, s:I, s:I, s:{s:o*, s:o*}, s:{s:o*, s:o*}, s:o*}",
	    "connections", (json_int_t)metrics_counter_get(h2_m_conns), "open",
	    (json_int_t)metrics_gauge_get(h2_m_open), "released",
	    (json_int_t)metrics_gauge_get(h2_m_released), "streams",
	    (json_int_t)metrics_counter_get(h2_m_streams), "resets", "sent",
	    h2_codes_json(h2_m_rst[0]), "received", h2_codes_json(h2_m_rst[1]),
	    "goaways", "sent", h2_codes_json(h2_m_goaway[0]), "received",
	    h2_codes_json(h2_m_goaway[1]), "refusals", why);
}

void http2_count_frame(bool sent, bool goaway, uint32_t code)
{
	struct metrics_counter *const *v =
	    goaway ? h2_m_goaway[sent ? 0 : 1] : h2_m_rst[sent ? 0 : 1];

	metrics_counter_add(v[code < HTTP2_CODES ? code : 1], 1);
}

void http2_count_why(enum http2_why w)
{
	metrics_counter_add(h2_m_why[w], 1);
}

void http2_count_conn(int delta)
{
	if (delta > 0)
		metrics_counter_add(h2_m_conns, 1);
	metrics_gauge_add(h2_m_open, delta);
}

void http2_count_released(int delta)
{
	metrics_gauge_add(h2_m_released, delta);
}

void http2_count_renewed(void)
{
	metrics_counter_add(h2_m_renewed, 1);
}

void http2_count_stream(void)
{
	metrics_counter_add(h2_m_streams, 1);
}
