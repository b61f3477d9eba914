/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * proxy.h - Select, Forward and Respond: one request's upstream side.
 *
 * The proxy takes a request that passed Resolve and Admit. A body of
 * at most limits.body_buffer bytes is first read whole (PROXY_BUFFERING:
 * Content-Length copied, chunked decoded, counted against the route's
 * limit), so that a body edge rejects never costs an upstream connection
 * or byte; then it chooses an endpoint (upstream.h), connects (or reuses a
 * pooled connection), writes the rebuilt head and the body (a buffered
 * body with one Content-Length; a longer one streamed: Content-Length
 * copied, chunked decoded and re-chunked), parses the response head,
 * rebuilds it for the client and relays the body, with backpressure both
 * ways. A text/html response of an environment with snippets is read
 * whole first, up to limits.max_inject_bytes decoded (inject.h). While a
 * request body is awaited, its clock (admit_rate) bounds gaps and the average
 * rate: 408 body_timeout. It ends the request through req_end() and reaches the
 * client only through req.h.
 */
#ifndef EDGE_PROXY_H
#define EDGE_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "admit.h"
#include "body.h"
#include "compress.h"
#include "h1.h"
#include "upconn.h"

struct req;
struct req_upstream_ops;
struct worker_service;
struct evbuffer;
struct sockio;
struct tunnel;
struct upstream_ep;
struct h2up_stream;
struct proxy_inject;
struct proxy_hedges;

/* Bytes buffered towards one side above which the other side's reading
 * stops, and the level at which it resumes. */
#define PROXY_HIGH_WATER (64 * 1024)
#define PROXY_LOW_WATER (16 * 1024)

enum proxy_state {
	PROXY_IDLE = 0,
	PROXY_BUFFERING,  /* reading a small body whole, no upstream yet */
	PROXY_CONNECTING, /* waiting for connect() */
	PROXY_BACKOFF,	  /* between a failed attempt and its retry (the
			     deployment's retry.backoff), no upstream */
	PROXY_QUEUED,	  /* every endpoint at the deployment's
			     max_inflight: waits for a slot, no upstream */
	PROXY_WAITING,	  /* head sent, waiting for the response head (and
			     a chunked one's first chunk line) */
	PROXY_RELAYING,	  /* response head sent to the client */
	PROXY_TUNNEL,	  /* 101 sent: the pair is a tunnel (tunnel.h) */
};

/* The upstream side of one request (inside struct req). */
struct proxy {
	enum proxy_state state;
	unsigned h2_retries; /* HTTP/2 streams retried */
	unsigned retries;    /* retries under the deployment's retry group */
	bool circuit;	     /* let through by its deployment's circuit: its
				end reported to it once (circuit.h) */
	bool circuit_trial;  /* ... as the half-open circuit's trial */
	/* monotonic ns: timeouts.request_total's end (0: none) */
	uint64_t deadline;
	bool capped;	    /* the request's timer is armed for the deadline */
	struct sockio *uio; /* the upstream connection (HTTP/1.1) */
	struct h2up_stream *h2; /* or the request's HTTP/2 stream (h2up.h) */
	struct upconn u;	/* its attempts (upconn.h) */
	struct body req_body;	/* client -> upstream */
	/* body bytes read before connecting (decoded), NULL when none: the
	 * whole body when buffered, else the first body_buffer + 1 bytes */
	struct evbuffer *held;
	bool buffered;		/* held is the whole body (Content-Length) */
	struct admit_rate rate; /* the request body's clock */
	struct body resp_body;	/* upstream -> client */
	struct h1_response resp;
	size_t resp_seen;  /* response bytes parsed so far */
	bool reusable;	   /* the upstream may be pooled at the end */
	bool up_eof;	   /* the upstream closed its side (END_STREAM) */
	bool up_reset;	   /* its HTTP/2 stream ended before END_STREAM */
	bool grpc;	   /* a gRPC call: never buffered, its body not timed */
	int up_err;	   /* ... with this errno (0: a FIN) */
	bool upgrade;	   /* Upgrade forwarded: a 101 may answer it */
	bool send_stalled; /* the timer waits for the upstream to take
			      request bytes (proxy_send_stalled) */
	bool head_held;	   /* a chunked response's head waits for its
			      first chunk line (proxy_first_chunk) */
	struct tunnel *tun;	    /* PROXY_TUNNEL: the running tunnel */
	struct compress_edit cedit; /* a compressed response's head */
	/* a text/html response read whole for injection (inject.h), NULL:
	 * none; while it is read, state is PROXY_RELAYING with no head
	 * sent */
	struct proxy_inject *inj;
	/* PROXY_QUEUED: its place among the worker's waiters (proxy.c),
	 * and whether the client was read before (it is while waiting, so
	 * that a client who leaves is seen) */
	struct req *wnext, *wprev;
	bool wread;
	/* the request's hedges (docs/upstream.md, "Hedging"), NULL: none
	 * armed */
	struct proxy_hedges *hg;
};

/* The upstream side of the requests (req.h's struct req_upstream_ops):
 * Select, Forward and Respond as above; its state lives in each
 * request's up. Its release gives a clean connection to the pool, closes
 * anything else, reports health, drops the endpoint's in-flight count,
 * frees the held body and stops the body's timer; a tunnel is closed and
 * its byte counts added to the request's. A request body's timer that
 * fires ends the request with body_timeout when its clock has run out
 * (408 when no response head went out yet). */
extern const struct req_upstream_ops proxy_ops;

/* The worker service that has the upstream pools release through the
 * proxy (worker.h). */
extern const struct worker_service proxy_service;

#endif /* EDGE_PROXY_H */
