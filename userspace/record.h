/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * record.h - the stream core's one record builder. Whatever its mode (an
 * HTTP request of any protocol, req.c; a TCP route's connection, l4.c),
 * a stream's one ending is told once, by record_end(): one analytics
 * event (analytics.h; the writer thread does the I/O) and one call of
 * the workers' request_done hook (edge_requests_total and the latency
 * series, stats.h).
 */
#ifndef EDGE_RECORD_H
#define EDGE_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "outcome.h"

struct h1_request;
struct worker_shared;

/* What a stream's record says; a string NULL (or "") when unknown. */
struct record {
	bool tcp; /* a TCP route's connection: kind tunnel, no HTTP */
	enum outcome outcome;
	int status; /* the HTTP status sent, 0: none */
	/* monotonic ns: begun; its last upstream attempt began; the
	 * upstream answered (a response head; a TCP route's: connected);
	 * 0 when never */
	uint64_t t0, t_connect, t_up;
	uint64_t t0_real; /* begun, real ns */
	uint64_t bytes_in, bytes_out;
	const char *id, *client_ip, *mover;
	const char *up_addr; /* the last endpoint tried */
	int up_status;	     /* the upstream's status, 0: none */
	unsigned attempts;   /* upstream attempts, 0: none */
	bool woken;	     /* it waited for a wake that succeeded */
	uint64_t cold_ms;    /* ... this long */
	bool tls, tls_resumed;
	const char *tls_version, *tls_cipher;
	/* its route's ids, NULL when not routed */
	const char *project_id, *env_id, *deployment_id;
	/* the Host, or a TLS passthrough route's server name */
	const char *host;
	size_t host_len; /* SIZE_MAX: NUL-terminated */
	/* an HTTP request's head (method, path, user agent, referrer),
	 * NULL when none was whole; its protocol's name, NULL: the head's
	 * HTTP/1.x */
	const struct h1_request *http;
	const char *http_version;
	/* the challenge's part in it (challenge.h's chal_result names:
	 * issued, solved, passed, failed), NULL: none */
	const char *challenge;
	/* the credential that let it in or was refused (auth.h's method
	 * names: api_key, jwt), NULL: none checked or none presented */
	const char *auth;
	/* its W3C trace id and edge's span id (hdr.h's hdr_trace), NULL:
	 * none (no head, a TCP route) */
	const char *trace_id, *span_id;
};

/* Tell rec's stream's ending (rec->t0 read against a fresh clock). */
void record_end(struct worker_shared *sh, const struct record *rec);

#endif /* EDGE_RECORD_H */
