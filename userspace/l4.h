/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * l4.h - plain TCP (L4) routes and TLS passthrough routes: a connection
 * accepted on a TCP routes' listener (one per worker per listen address
 * of the route table's TCP routes: the file's tcp_routes and the
 * database's rows, tcproute.h) goes, as a byte tunnel, to an endpoint of
 * the environment its route names.
 *
 * Its life, each step as an HTTP request's (req.h, proxy.h) but without
 * HTTP: the stream core's TCP mode, admitted and woken by the same
 * stream.h, connected by the same upconn.h and recorded by the same
 * record.h as a request:
 *   Accept   counted against limits.max_connections (over it, or
 *            draining: closed at once, connection_limit / shutting_down);
 *   Resolve  the address's route in the current route table
 *            (route_tcp_addr; a TLS passthrough address's: the one its
 *            ClientHello's server name picks, route_tcp_sni, in the
 *            table as it is once the hello is whole), then its
 *            environment (route_tcp_lookup): in no source (or the
 *            address no longer routed), environment_not_found; its
 *            project disabled, project_disabled;
 *   Admit    the project's IP rules (ip_denied) and the per-client rate
 *            limit (rate_limited); XDP has already applied its rules;
 *   Wake     an on-demand environment that is not running (wake.h,
 *            docs/wake.md "TCP routes"): the connection joins its wake
 *            and waits (L4_WAKING, the client's socket unread) for
 *            L4_MSG_WAKE; closed as wake_pending, wake_failed or
 *            wake_throttled (wake.max_waiting_connections) when it is
 *            not woken for it; counted as the environment's activity
 *            (its tunnel in its open tunnels) until the end;
 *   Select   an endpoint of the environment's deployment (upconn.h,
 *            upstream.h: the same connect, balancing, passive health and
 *            panic mode as HTTP),
 *            connected within timeouts.upstream_connect; a failed or
 *            timed-out connect is reported and the next endpoint tried
 *            (no byte of the client's has been read yet), up to
 *            UPCONN_TRIES_MAX; none: upstream_unavailable (an on-demand
 *            environment not running as far as edge knows:
 *            environment_restarting, and a wake);
 *   Tunnel   both sockets handed to tunnel_start() (tunnel.h) until both
 *            directions end, an error or timeouts.tunnel_idle: tunnel;
 *   Record   in l4_end(), the one ending, run once per connection:
 *            record_end() (one analytics event of kind tunnel, status 0:
 *            no HTTP; the workers' request_done hook,
 *            edge_requests_total by outcome), everything released.
 * Until the upstream is connected the client's socket is not read: what
 * it sends (its EOF too) waits in the kernel and goes first once the
 * tunnel starts (a client that leaves meanwhile is noticed then, and the
 * tunnel ends at once). Refused connections are closed without a byte:
 * a TCP route has no way to say why; what the client had sent is read
 * and dropped first (L4_REFUSE_DRAIN), so that it sees the end of the
 * stream rather than a reset.
 */
#ifndef EDGE_L4_H
#define EDGE_L4_H

#include <stddef.h>
#include <sys/queue.h>
#include <sys/socket.h>

struct l4_conn;
struct worker;
struct worker_service;

/* What a refused connection's client had sent is read and thrown away,
 * up to this many bytes, before it is closed: a FIN, not a reset. */
#define L4_REFUSE_DRAIN 65536

TAILQ_HEAD(l4_list, l4_conn);

/* A worker's TCP route connections (l4.c's alone; w->l4). */
struct l4_set {
	struct l4_list open;
	size_t n;
};

/* The worker service of a worker's TCP route connections (worker.h):
 * its drain closes those still waiting for a TLS ClientHello
 * (shutting_down), as idle HTTP connections are, the others go on until
 * they end or the drain does; its free ends every one at once, each
 * recorded as it stood (tunnel, or shutting_down); it takes the
 * L4_MSG_WAKE messages. */
extern const struct worker_service l4_service;

/* A connection accepted on fd by worker w's listener of the TCP routes'
 * address listen (canonical text; fd is the connection's from now on,
 * even when it is refused). */
void l4_accept(struct worker *w, int fd, const struct sockaddr *sa,
	       socklen_t len, const char *listen);

/* The mailbox message of a wake's end for a TCP route's connection
 * (wake.h's notify; apart from the REQ_MSG_*, LISTENER_MSG_* and WORKER_MSG_*
 * types): arg is the enum wake_result. */
#define L4_MSG_WAKE 0x200

#endif /* EDGE_L4_H */
