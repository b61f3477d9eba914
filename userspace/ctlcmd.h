/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ctlcmd.h - the control room: the control socket (ctl.h) with edged's
 * commands behind it, each answered from the daemon's state (edged.h) on
 * the control loop. Every answer is a new JSON object (docs/edgectl.md);
 * a refusal is -errno with the message the client shows.
 *
 *   status    pid, version, uptime_s, route_generation, workers,
 *             draining, connections, tcp_routes, tcp_connections, and the
 *             objects database (pgplane_status_json; null without pg),
 *             splice (as below), tls (null without HTTPS listeners) and
 *             io_uring (enabled, workers, why)
 *   routes    the live table (route_dump_json), each TCP route with its
 *             connections, listening and listen_error; change_version
 *             with pg
 *   envs      the on-demand environments (wake_dump_json)
 *   stats     the counters (stats_counters_json)
 *   reload    route_generation and message, through ops->reload; a
 *             refusal logged and answered with the configuration error
 *   splice    the splice's status; with "mode" (on, off, auto, sockmap)
 *             the mode set first through ops->splice_mode (a mode other
 *             than off refused while the kernel path is unusable)
 *   upstream  upstream_ctl's answer; a changed admin state logged and
 *             every worker told (WORKER_MSG_UPSTREAM)
 *   handover  this process's listening sockets and lock for a successor
 *             (sockreg_handover), sent with SCM_RIGHTS
 *   retire    the successor serves: ops->retire (drain and exit)
 *
 * The room reads the state and calls no function of edged.c: what changes
 * the daemon (a reload, the splice's mode) is edged.c's, handed in ops.
 */
#ifndef EDGE_CTLCMD_H
#define EDGE_CTLCMD_H

#include <stdint.h>

#include "log.h"
#include "splice.h"

struct edged;
struct event_base;
struct ctlcmd;

/* The daemon's actions a command asks for; both run on the control loop. */
struct ctlcmd_ops {
	/* Load the configuration file again and apply it: 0 with *gen the
	 * new route generation, or -errno with err the reason, the running
	 * configuration untouched. */
	int (*reload)(struct edged *d, uint64_t *gen, struct errbuf *err);
	/* Set the splice's mode (by: who asked, for the log). */
	void (*splice_mode)(struct edged *d, enum splice_mode m,
			    const char *by);
	/* A successor serves on the sockets handed over: drain and exit.
	 * 0, or -errno with err (draining already). */
	int (*retire)(struct edged *d, struct errbuf *err);
};

/*
 * Serve the commands on the unix socket path (ctl_server_start: mode
 * 0600, one daemon per path), on base, answering from d, which must
 * outlive the room (ops is copied). Returns 0 with *out, or -errno with
 * err saying why. lock_fd or listen_fd >= 0: a successor's room on its
 * predecessor's lock and socket (ctl_server_start_successor; both
 * taken), accepting from ctlcmd_commit on. A retire the room answers
 * hands its socket over (ctl_server_hand_over).
 */
int ctlcmd_start(struct event_base *base, const char *path, int lock_fd,
		 int listen_fd, struct edged *d, const struct ctlcmd_ops *ops,
		 struct ctlcmd **out, struct errbuf *err);

/* A successor's room starts accepting (ctl_server_commit). */
int ctlcmd_commit(struct ctlcmd *c, struct errbuf *err);

/* The control socket's lock and listening socket (for a successor:
 * sockreg.h). */
int ctlcmd_lock_fd(const struct ctlcmd *c);
int ctlcmd_listen_fd(const struct ctlcmd *c);

/* Close the control socket (ctl_server_free) and free the room. Call on
 * the loop's thread or with the loop stopped. NULL ok. */
void ctlcmd_free(struct ctlcmd *c);

#endif /* EDGE_CTLCMD_H */
