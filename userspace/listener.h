/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * listener.h - Accept: one non-blocking SO_REUSEPORT listening socket per
 * worker per listen address, and the accept loop that hands new
 * connections to conn_accept().
 */
#ifndef EDGE_LISTENER_H
#define EDGE_LISTENER_H

#include <stdbool.h>

#include "config.h"
#include "log.h"

struct worker;
struct listener;

/* Backlog of every listening socket (the kernel caps it at
 * net.core.somaxconn). Past it the kernel drops new clients' SYNs, which
 * they send again a second later: a burst is served late, never reset
 * (docs/operations.md, "Connection churn"). */
#define LISTENER_BACKLOG 4096
/* Connections accepted per readiness event, so one busy listener cannot
 * starve the loop. */
#define LISTENER_ACCEPT_BATCH 64
/* When accept fails for want of descriptors or memory (EMFILE, ENFILE,
 * ENOBUFS, ENOMEM), the listener stops for this long, or until one of
 * its worker's connections closes (as nginx and HAProxy do), instead of
 * being called again at once; one log line per interval at most. */
#define LISTENER_PAUSE_MS 100
#define LISTENER_LOG_INTERVAL_MS 10000
/* Descriptors kept free for the upstreams of the connections accepted:
 * a listener also pauses once accepting left fewer than this (or an
 * eighth of RLIMIT_NOFILE, if more) free. */
#define LISTENER_FD_SPARE 16

/*
 * A listening TCP socket on a (SO_REUSEADDR, SO_REUSEPORT, IPV6_V6ONLY
 * for IPv6 so "0.0.0.0" and "[::]" may both be listed, non-blocking,
 * close-on-exec, bound, listening with LISTENER_BACKLOG): 0 and *fd, or
 * -errno with err ("listen ADDR: why"). Any thread: it touches no loop.
 */
int listener_socket(const struct config_addr *a, int *fd, struct errbuf *err);

/*
 * Whether a is free for this process to take: a socket bound to it without
 * SO_REUSEPORT (and closed again) fails while anything listens there, an
 * edged of the same user whose SO_REUSEPORT sockets would otherwise share
 * the port and take part of its connections included. Called before the
 * first listener_socket of an address the process does not hold yet.
 * 0, or -errno with err ("listen ADDR: ...").
 */
int listener_probe(const struct config_addr *a, struct errbuf *err);

/*
 * An HTTP listener (conn_accept), or with tls an HTTPS one
 * (conn_accept_tls), for worker w on a (listener_socket); its accept
 * event is created on w's loop but not added. Returns 0 and *out, or
 * -errno with err set.
 */
int listener_new(struct worker *w, const struct config_addr *a, bool tls,
		 struct listener **out, struct errbuf *err);

/*
 * A listener for worker w of TCP routes' address text (l4_accept), on
 * fd, a socket listener_socket made (taken in every case: closed on
 * failure); id names it (tcproute.h: the address's listeners on every
 * worker share it). On w's thread, or before it runs. Returns 0 and *out,
 * or -ENOMEM.
 */
int listener_adopt(struct worker *w, int fd, const char *text, uint64_t id,
		   struct listener **out);

/* The id listener_adopt gave l (0 for an HTTP listener), and the address
 * it listens on (canonical text). */
uint64_t listener_id(const struct listener *l);
const char *listener_text(const struct listener *l);

/* Start accepting (add the event). Returns 0 or -errno. */
int listener_enable(struct listener *l);

/* Stop accepting and close the socket (draining); idempotent. */
void listener_close(struct listener *l);

/* A connection of w closed (a descriptor came free): resume w's
 * listeners paused by a resource error. Cheap when none is paused. */
void listener_resume_all(struct worker *w);

/* Close and free; NULL is fine. */
void listener_free(struct listener *l);

#endif /* EDGE_LISTENER_H */
