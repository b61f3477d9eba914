/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * listener.h - Accept: one non-blocking SO_REUSEPORT listening socket per
 * worker per listen address, and the accept loop that hands each new
 * connection to the function the listener was made with (struct
 * listener_accepts: the HTTP, HTTPS and TCP routes' ones, installed by
 * whoever builds the workers). A worker service (listener_service): it
 * binds the HTTP and HTTPS listeners at worker_new, closes them all at
 * a drain; the TCP routes' come and go through the worker's mailbox
 * (listener_post_open, listener_post_close).
 */
#ifndef EDGE_LISTENER_H
#define EDGE_LISTENER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "config.h"
#include "log.h"

struct worker;
struct listener;
struct worker_service;

/* Where a listener hands a new connection: accepted on fd (the
 * function's from now on) by worker w from peer sa, on the listen
 * address text (canonical). */
typedef void listener_accept_fn(struct worker *w, int fd,
				const struct sockaddr *sa, socklen_t len,
				const char *text);

/* The accept functions of the three kinds of listener (in
 * worker_shared's accepts). */
struct listener_accepts {
	listener_accept_fn *http;  /* listen */
	listener_accept_fn *https; /* tls.listen */
	listener_accept_fn *tcp;   /* the TCP routes' addresses */
};

/* How the PROXY protocol header of a connection on a proxy_protocol
 * listen address ended (worker_shared's pp counters, edge_proxy_
 * protocol_total{result}): read and handed on, or closed without a byte
 * for one of the other reasons. */
enum listener_pp_result {
	LISTENER_PP_OK = 0,
	LISTENER_PP_UNTRUSTED, /* the peer is not in trusted_proxies */
	LISTENER_PP_BAD,       /* malformed or too long (proxyproto.h) */
	LISTENER_PP_TIMEOUT,   /* not whole within timeouts.client_header */
	LISTENER_PP_CLOSED,    /* the peer closed or failed before it */
	LISTENER_PP_LOCAL,     /* read, LOCAL: the peer speaks for itself */
	LISTENER_PP_UNKNOWN,   /* UNKNOWN, UNSPEC, UNIX: no client address */
	LISTENER_PP_OVER,      /* limits.max_connections reached, draining */
	LISTENER_PP_N,
};

/* "ok", "untrusted", ...: a result's name in metrics. */
const char *listener_pp_name(enum listener_pp_result r);

/* The worker service of a worker's listeners (worker.h). */
extern const struct worker_service listener_service;

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

/* Mailbox message types (the listener service's). */
#define LISTENER_MSG_OPEN 0x100
#define LISTENER_MSG_CLOSE 0x101
#define LISTENER_MSG_PP 0x103

/*
 * Have w listen on fd (listener_socket's, bound to the TCP routes'
 * address text) as listener id, from any thread: w's loop takes it up (a
 * listener of w on the same address goes first; a draining w closes fd
 * instead); with pp, its connections begin with a PROXY protocol header.
 * 0: fd is w's from now on; or -EAGAIN (the mailbox is full),
 * -ESHUTDOWN (w is going away), -ENOMEM: fd is still the caller's.
 */
int listener_post_open(struct worker *w, int fd, const char *text, uint64_t id,
		       bool pp);

/* Have w's listener id take (pp) or not take a PROXY protocol header on
 * the connections it accepts from now on (any thread). 0 or -EAGAIN /
 * -ESHUTDOWN. */
int listener_post_pp(struct worker *w, uint64_t id, bool pp);

/* Have w close its listener id (from any thread; connections it accepted
 * go on). 0 or -EAGAIN / -ESHUTDOWN. */
int listener_post_close(struct worker *w, uint64_t id);

/* A connection of w closed (a descriptor came free): resume w's
 * listeners paused by a resource error. Cheap when none is paused. */
void listener_resume_all(struct worker *w);

#endif /* EDGE_LISTENER_H */
