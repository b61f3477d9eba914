/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ctl.h - edged's control socket: the server side of lib/ctlproto.h.
 *
 * Runs on the daemon's control event_base (never a worker's): every client
 * is a bufferevent with a bounded input, a timeout and a bounded number of
 * clients at once. Each request calls one handler synchronously on that
 * loop; a handler fills *result (a new reference, JSON null if left NULL)
 * and returns 0, or returns <0 with err holding the message the client
 * shows (for reload: the configuration error, FILE:LINE and all).
 */
#ifndef EDGE_CTL_H
#define EDGE_CTL_H

#include <jansson.h>

#include "ctlproto.h"
#include "log.h"

struct event_base;
struct ctl_server;

/* Most clients served at once; more are answered "busy" and closed. */
#define CTL_CLIENTS_MAX 32
/* Default bound on one client's connection, accept to last byte sent. */
#define CTL_CLIENT_TIMEOUT_MS 5000

/* One callback per command; NULL means "not supported". */
typedef int (*ctl_handler_fn)(void *ctx, json_t **result, struct errbuf *err);

/* A command that takes arguments: the whole request object too. */
typedef int (*ctl_req_handler_fn)(void *ctx, const json_t *req, json_t **result,
				  struct errbuf *err);

struct ctl_handlers {
	ctl_handler_fn routes; /* route_dump_json() of the live table */
	ctl_handler_fn reload; /* changes: uid 0 or edged's uid only */
	ctl_handler_fn status; /* see docs/edgectl.md "edgectl status" */
	ctl_handler_fn stats;  /* see docs/edgectl.md "edgectl stats" */
	/* {"cmd":"splice","mode":"on"|"off"|"auto"|"sockmap"} (changes) or
	 * without mode (the splice's status) */
	ctl_req_handler_fn splice;
	ctl_handler_fn envs; /* wake_dump_json(): docs/edgectl.md */
	/* {"cmd":"upstream"} lists the endpoints; with "action" drain,
	 * disable or enable and "endpoint" it changes one (upstream_ctl.h) */
	ctl_req_handler_fn upstream;
	/* {"cmd":"challenge"} lists the environments edgectl put in attack
	 * mode; with "env" and "on" (a boolean) it puts one in or out */
	ctl_req_handler_fn challenge;
	/* {"cmd":"certs"}: ACME's names and their certificates
	 * (acme_mgr_json); with "renew": NAME, that name ordered now */
	ctl_req_handler_fn certs;
	/* {"cmd":"handover"}: the listening sockets for a successor edged
	 * (docs/operations.md, "Upgrades"): *fds (nfds of them, still the
	 * handler's) go with SCM_RIGHTS before the answer, *result says
	 * what each is, in order */
	int (*handover)(void *ctx, pid_t peer, const int **fds, size_t *nfds,
			json_t **result, struct errbuf *err);
	/* {"cmd":"retire"}: the successor (peer) serves: drain and exit,
	 * leaving it the sockets */
	int (*retire)(void *ctx, pid_t peer, json_t **result,
		      struct errbuf *err);
};

/*
 * Listen on the unix socket path (mode 0600; its directory is created mode
 * 0700 when missing). A lock file "PATH.lock" held for the server's life
 * and a connect() probe make a second daemon refuse (-EADDRINUSE) while
 * the first runs; a socket file left by a dead daemon is replaced; a path
 * that exists and is not a socket is refused (-EEXIST). h is copied; ctx
 * goes to every handler. Returns 0 with *out, or -errno with err saying
 * what went wrong.
 */
int ctl_server_start(struct event_base *base, const char *path,
		     const struct ctl_handlers *h, void *ctx,
		     struct ctl_server **out, struct errbuf *err);

/* A successor's server (docs/operations.md, "Upgrades"): the running
 * daemon's lock file descriptor (an flock is the open file's, so the
 * successor holds it once the daemon exits) and its listening socket,
 * both taken (closed on failure), instead of locking and binding: nothing
 * at path changes, so a successor that has dropped its privileges needs
 * no right on the directory. It accepts nothing until
 * ctl_server_commit. listen_fd must be a listening socket bound at path
 * (-EINVAL otherwise). Same returns. */
int ctl_server_start_successor(struct event_base *base, const char *path,
			       int lock_fd, int listen_fd,
			       const struct ctl_handlers *h, void *ctx,
			       struct ctl_server **out, struct errbuf *err);

/* A successor's server starts accepting (its predecessor has stopped:
 * ctl_server_hand_over; a client meanwhile waits in the backlog). 0, or
 * -errno with err set. */
int ctl_server_commit(struct ctl_server *s, struct errbuf *err);

/* The listening socket is a successor's now: accept no more, and never
 * remove path (ctl_server_free). */
void ctl_server_hand_over(struct ctl_server *s);

/* The listening socket's descriptor (for a successor), -1 when none. */
int ctl_server_listen_fd(const struct ctl_server *s);

/* The lock file's descriptor (still the server's), -1 without. */
int ctl_server_lock_fd(const struct ctl_server *s);

/* Change the per-client timeout (tests; default CTL_CLIENT_TIMEOUT_MS). */
void ctl_server_set_timeout(struct ctl_server *s, unsigned ms);

/* Close every client and the listener, remove the socket file (when it is
 * still ours) and release the lock (the lock file stays: removing it would
 * let two daemons lock two different files). Call on the loop's thread
 * or with the loop stopped. NULL ok. */
void ctl_server_free(struct ctl_server *s);

#endif /* EDGE_CTL_H */
