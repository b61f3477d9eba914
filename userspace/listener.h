/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * listener.h - Accept: one non-blocking SO_REUSEPORT listening socket per
 * worker per listen address, and the accept loop that hands new
 * connections to conn_accept().
 */
#ifndef EDGE_LISTENER_H
#define EDGE_LISTENER_H

#include "config.h"
#include "log.h"

struct worker;
struct listener;

/* Backlog of every listening socket. */
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

/* What a listener's connections are: HTTP (conn_accept), or those of TCP
 * route slot N >= 0 (l4_accept). */
#define LISTENER_HTTP (-1)

/*
 * Open a listening TCP socket on a (SO_REUSEADDR, SO_REUSEPORT, IPV6_V6ONLY
 * for IPv6 so "0.0.0.0" and "[::]" may both be listed, non-blocking,
 * close-on-exec) for worker w, for HTTP (tcp_slot LISTENER_HTTP) or for
 * TCP route slot tcp_slot; its accept event is created on w's loop but
 * not added. Returns 0 and *out, or -errno with err set.
 */
int listener_new(struct worker *w, const struct config_addr *a, int tcp_slot,
		 struct listener **out, struct errbuf *err);

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
