// SPDX-License-Identifier: BSD-2-Clause
/*
 * record.c - the stream core's one record builder (record.h).
 */
#include <stdio.h>
#include <string.h>

#include "analytics.h"
#include "clk.h"
#include "h1.h"
#include "record.h"
#include "worker.h"

/* First value of header name in h, or NULL. */
static const struct h1_header *record_header(const struct h1_head *h,
					     const char *name)
{
	unsigned i;

	for (i = 0; i < h->nheaders; i++)
		if (h1_eq(h->headers[i].name, h->headers[i].name_len, name))
			return &h->headers[i];
	return NULL;
}

/* rec's HTTP fields into ev. */
static void record_http(struct analytics_event *ev, const struct record *rec)
{
	const struct h1_request *h = rec->http;
	const struct h1_header *f;

	analytics_event_set(ev, ANALYTICS_F_METHOD, h->method_str,
			    h->method_len);
	analytics_event_set(ev, ANALYTICS_F_PATH, h->target, h->target_len);
	analytics_event_set(ev, ANALYTICS_F_HTTP_VERSION,
			    rec->http_version ? rec->http_version
			    : h->h.minor      ? "HTTP/1.1"
					      : "HTTP/1.0",
			    SIZE_MAX);
	f = record_header(&h->h, "user-agent");
	if (f)
		analytics_event_set(ev, ANALYTICS_F_USER_AGENT, f->value,
				    f->value_len);
	f = record_header(&h->h, "referer");
	if (f)
		analytics_event_set(ev, ANALYTICS_F_REFERRER, f->value,
				    f->value_len);
}

/* One analytics event. */
static void record_event(struct analytics *a, const struct record *rec)
{
	struct analytics_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.time_ns = rec->t0_real;
	/* read now: an answer edge wrote in the batch its request came in
	 * (or a connection refused in the batch it was accepted in) would
	 * last 0 by the batch's clock */
	ev.duration_ns = clk_fresh_ns() - rec->t0;
	if (rec->t_up && rec->t_connect)
		ev.upstream_ns = rec->t_up - rec->t_connect;
	ev.bytes_in = rec->bytes_in;
	ev.bytes_out = rec->bytes_out;
	ev.status = (uint16_t)rec->status;
	ev.kind = rec->tcp || rec->outcome == OUTCOME_TUNNEL
		      ? ANALYTICS_KIND_TUNNEL
		      : ANALYTICS_KIND_REQUEST;
	ev.outcome = (uint8_t)rec->outcome;
	analytics_event_set(&ev, ANALYTICS_F_REQUEST_ID, rec->id, SIZE_MAX);
	analytics_event_set(&ev, ANALYTICS_F_CLIENT_IP, rec->client_ip,
			    SIZE_MAX);
	if (rec->host && rec->host_len)
		analytics_event_set(&ev, ANALYTICS_F_HOST, rec->host,
				    rec->host_len);
	analytics_event_set(&ev, ANALYTICS_F_MOVER, rec->mover, SIZE_MAX);
	if (rec->up_addr && rec->up_addr[0])
		analytics_event_set(&ev, ANALYTICS_F_UPSTREAM_ADDR,
				    rec->up_addr, SIZE_MAX);
	if (rec->up_status > 0 && rec->up_status < 1000) {
		char st[4];

		st[0] = (char)('0' + rec->up_status / 100);
		st[1] = (char)('0' + rec->up_status / 10 % 10);
		st[2] = (char)('0' + rec->up_status % 10);
		st[3] = '\0';
		analytics_event_set(&ev, ANALYTICS_F_UPSTREAM_STATUS, st, 3);
	}
	if (rec->attempts) {
		char n[12];

		snprintf(n, sizeof(n), "%u",
			 rec->attempts > 999 ? 999 : rec->attempts);
		analytics_event_set(&ev, ANALYTICS_F_ATTEMPTS, n, SIZE_MAX);
	}
	if (rec->woken) {
		char cold[24];

		snprintf(cold, sizeof(cold), "%llu",
			 (unsigned long long)(rec->cold_ms > 2147483647ULL
						  ? 2147483647ULL
						  : rec->cold_ms));
		analytics_event_set(&ev, ANALYTICS_F_COLD_START_MS, cold,
				    SIZE_MAX);
	}
	if (rec->tls) {
		analytics_event_set(&ev, ANALYTICS_F_TLS_VERSION,
				    rec->tls_version, SIZE_MAX);
		analytics_event_set(&ev, ANALYTICS_F_TLS_CIPHER,
				    rec->tls_cipher, SIZE_MAX);
		analytics_event_set(&ev, ANALYTICS_F_TLS_RESUMED,
				    rec->tls_resumed ? "true" : "false",
				    SIZE_MAX);
	}
	if (rec->project_id) {
		analytics_event_set(&ev, ANALYTICS_F_PROJECT_ID,
				    rec->project_id, SIZE_MAX);
		analytics_event_set(&ev, ANALYTICS_F_ENVIRONMENT_ID,
				    rec->env_id, SIZE_MAX);
		analytics_event_set(&ev, ANALYTICS_F_DEPLOYMENT_ID,
				    rec->deployment_id, SIZE_MAX);
	}
	if (rec->challenge)
		analytics_event_set(&ev, ANALYTICS_F_CHALLENGE, rec->challenge,
				    SIZE_MAX);
	if (rec->auth)
		analytics_event_set(&ev, ANALYTICS_F_AUTH, rec->auth, SIZE_MAX);
	if (rec->trace_id)
		analytics_event_set(&ev, ANALYTICS_F_TRACE_ID, rec->trace_id,
				    SIZE_MAX);
	if (rec->span_id)
		analytics_event_set(&ev, ANALYTICS_F_SPAN_ID, rec->span_id,
				    SIZE_MAX);
	if (rec->http)
		record_http(&ev, rec);
	analytics_enqueue(a, &ev);
}

void record_end(struct worker_shared *sh, const struct record *rec)
{
	if (sh->analytics)
		record_event(sh->analytics, rec);
	/* the hook's upstream time is an HTTP response head's */
	if (sh->request_done)
		sh->request_done(sh->request_done_arg, rec->outcome,
				 rec->status, rec->t0, rec->t_connect,
				 rec->tcp ? 0 : rec->t_up);
}
