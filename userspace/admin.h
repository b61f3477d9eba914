/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * admin.h - edged's admin listener (default 127.0.0.1:9090): HTTP for
 * monitoring, on the daemon's control event_base (libevent's evhttp).
 *
 *   GET /metrics  200, the metrics registry in Prometheus text 0.0.4
 *   GET /healthz  200 "ok" while serving, 503 "draining" when the daemon
 *                 says it is not healthy (draining, shutting down)
 *   other paths   404; methods other than GET and HEAD: 405 with Allow
 *
 * Query strings are ignored. Requests are bounded (headers, body, a
 * timeout); nothing here blocks.
 */
#ifndef EDGE_ADMIN_H
#define EDGE_ADMIN_H

#include <stdbool.h>
#include <sys/socket.h>

#include "log.h"

struct event_base;
struct evbuffer;
struct metrics;
struct admin;

/* The default admin address. */
#define ADMIN_ADDR_DEFAULT "127.0.0.1"
#define ADMIN_PORT_DEFAULT 9090
/* Bound on one admin connection's idle time, seconds. */
#define ADMIN_TIMEOUT_S 10

/* Whether the daemon is serving (true) or draining (false). */
typedef bool (*admin_healthy_fn)(void *ctx);

/*
 * Listen on addr (len bytes; port 0 picks a free one, see admin_local_addr),
 * or serve on fd (>= 0: a listening socket bound to addr, taken), and
 * serve the paths above on base. m is rendered on every scrape and
 * must outlive the admin listener; healthy (NULL: always healthy) is
 * called with ctx for every /healthz on base's thread. Returns 0 with
 * *out, or -errno with err naming the address and the reason.
 */
int admin_start(struct event_base *base, const struct sockaddr *addr,
		socklen_t len, int fd, struct metrics *m,
		admin_healthy_fn healthy, void *ctx, struct admin **out,
		struct errbuf *err);

/* The listening socket (-1: none). */
int admin_fd(const struct admin *a);

/* Close the listening socket (a successor serves it); the connections
 * open go on. NULL ok. */
void admin_stop_listening(struct admin *a);

/* What renders /metrics: fn(ctx, out) appends the whole text and returns
 * 0 or -ENOMEM, called on base's thread for every scrape (the daemon
 * refreshes its scrape-time gauges and appends the XDP counters). NULL
 * fn: metrics_render() of the registry given to admin_start(). */
typedef int (*admin_render_fn)(void *ctx, struct evbuffer *out);
void admin_set_render(struct admin *a, admin_render_fn fn, void *ctx);

/* The address actually bound (for port 0). Returns 0 or -errno. */
int admin_local_addr(const struct admin *a, struct sockaddr_storage *ss,
		     socklen_t *len);

/* Close the listener and every admin connection. Call on base's thread or
 * with the loop stopped. NULL ok. */
void admin_free(struct admin *a);

#endif /* EDGE_ADMIN_H */
