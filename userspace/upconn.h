/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * upconn.h - the stream core's one upstream connect, for both modes: a
 * request's proxy (proxy.c) and a TCP route's connection (l4.c). An
 * attempt picks an endpoint of the route not tried yet (upstream.h's
 * balancing, passive health, panic mode), holds its in-flight count,
 * takes a pooled connection (HTTP only) or makes a socket (out of
 * descriptors: idle pooled connections shed a few at a time first) and
 * connects; a failed attempt is logged (at most once a second per
 * endpoint and reason), reported to passive health, and the next
 * endpoint tried, up to UPCONN_TRIES_MAX. A route whose deployment (or
 * TCP route) has send_proxy gets each new connection begun with a PROXY
 * header naming t->peer (sockio_preamble: before TLS), and its pooled
 * and shared connections tagged by that header: only the same client's
 * requests reuse them.
 *
 * The caller owns the sockio it gets and every timer: upconn holds only
 * the attempt's bookkeeping.
 */
#ifndef EDGE_UPCONN_H
#define EDGE_UPCONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "config.h"
#include "upreg.h"

struct log_ctx;
struct route_match;
struct sockio;
struct upstream_ep;
struct worker;
struct h2up_sess;

/* Endpoints tried for one stream at most. */
#define UPCONN_TRIES_MAX 4
/* Idle pooled connections closed at a time when out of descriptors. */
#define UPCONN_SHED_IDLE 8

/* One stream's attempts (zeroed: none yet). */
struct upconn {
	struct upstream_ep *ep; /* the current attempt's, NULL between */
	bool counted;		/* upstream_inflight_add(+1) held on ep */
	bool reused;		/* the attempt's connection was pooled */
	/* the next attempt makes a new connection, neither pooled nor
	 * shared (set by the caller before upconn_retry, used once) */
	bool fresh;
	struct upstream_ep *tried[UPCONN_TRIES_MAX];
	size_t ntried;
	uint64_t t_connect; /* monotonic ns the attempt began */
	uint64_t tag;	    /* the pool's tag of its connection (0: plain) */
	/* UPCONN_SHARED: the HTTP/2 session to open a stream on; UPCONN_NEW
	 * with h2: the new connection is to be an HTTP/2 session's (h2c://,
	 * or https:// offering h2 by ALPN) */
	struct h2up_sess *sess;
	bool h2;
	char addr[CONFIG_ADDR_STR_MAX]; /* the last endpoint tried, or "" */
};

/* Where an attempt goes: the route's endpoints and balancing, the
 * balancer's position (slot 0 for HTTP, a TCP route's slot + 1, so that
 * each keeps a round-robin position of its own), the client (ip_hash),
 * whether a pooled connection may serve (HTTP only), and whether small
 * writes go at once (TCP_NODELAY: a tunnel's). */
struct upconn_target {
	const struct route_match *m;
	unsigned slot;
	const struct sockaddr *peer;
	bool pool;
	bool nodelay;
	/* the request may go over HTTP/2 (h2c:// and https:// endpoints):
	 * not an Upgrade, which needs an HTTP/1.1 connection */
	bool h2;
	/* the request's host (https:// endpoints: the server name unless the
	 * deployment's tls.server_name); NULL for a TCP route, which speaks
	 * to plain and unix: endpoints only */
	const char *host;
	size_t host_len;
	/* the client's socket: its own address is the destination a PROXY
	 * header names (m->send_proxy), -1 when there is none */
	int client_fd;
};

enum upconn_result {
	UPCONN_NEW,    /* *uio: a new socket's; set its callbacks and
			  timer, then upconn_connect */
	UPCONN_POOLED, /* *uio: a pooled connection, connected */
	UPCONN_SHARED, /* u->sess: an HTTP/2 session with room for it */
	UPCONN_NONE,   /* every endpoint tried or excluded */
	UPCONN_NO_FD,  /* out of descriptors (EMFILE, ENFILE) */
	UPCONN_TLS,    /* an https:// endpoint's TLS cannot be made for
			  this request (no name to verify; logged) */
	UPCONN_FAILED, /* anything else (logged, rate-limited) */
	UPCONN_FULL,   /* every endpoint left is at the deployment's
			  max_inflight (t->m->ep_max_inflight): nothing
			  taken; wait for a slot (upstream_has_room) */
};

/* Begin the next attempt for t on w's loop (the previous one released by
 * upconn_failed or upconn_retry). */
enum upconn_result upconn_open(struct upconn *u, struct worker *w,
			       const struct upconn_target *t,
			       const struct log_ctx *ctx, struct sockio **uio);

/* Connect uio (UPCONN_NEW's) to the attempt's endpoint: 0, or -1 with
 * errno (the caller then calls upconn_failed). */
int upconn_connect(const struct upconn *u, struct sockio *uio);

/* The attempt's new connection is up: its connect time counted. */
void upconn_connected(struct upconn *u, uint64_t now_ns);

/*
 * Say that the attempt's endpoint failed the stream (why, errno err or 0,
 * detail or NULL; where names the stream's route for the log line), at
 * most once a second per endpoint and reason (a line held back is counted
 * by the next one, or by the control loop): upconn_log only says it;
 * upconn_report also reports it to passive health; upconn_failed also
 * ends the attempt (its in-flight count dropped, ep NULL): the caller
 * frees its sockio and opens the next.
 */
void upconn_log(const struct upconn *u, const struct log_ctx *ctx,
		enum upreg_why why, int err, const char *detail,
		const char *where);
void upconn_report(const struct upconn *u, struct worker *w,
		   const struct log_ctx *ctx, enum upreg_why why, int err,
		   const char *detail, const char *where);
void upconn_failed(struct upconn *u, struct worker *w,
		   const struct log_ctx *ctx, enum upreg_why why, int err,
		   const char *detail, const char *where);

/* The attempt ends unblamed (a pooled connection the upstream had
 * closed): the same endpoint may be chosen again. */
void upconn_retry(struct upconn *u);

/* The attempt's in-flight count dropped (once; ep kept for the record). */
void upconn_done(struct upconn *u);

#endif /* EDGE_UPCONN_H */
