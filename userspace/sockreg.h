/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sockreg.h - the sockets a successor edged takes over (docs/operations.md,
 * "Upgrades"), in two lists:
 *
 *   this process's   every listening socket as it is made: a duplicate,
 *                    named by kind, address and id (a TCP route's, 0 for
 *                    the others), so that the list can be handed over
 *                    whatever the workers do with their copies; dropped
 *                    with its TCP route, all closed at the drain
 *   a predecessor's  what sockreg_inherit received over the running
 *                    daemon's control socket ({"cmd":"handover"}), taken
 *                    by kind and address as the listeners are made; what
 *                    is not taken is closed by sockreg_inherit_done
 *
 * The control socket's listening socket and its lock (PATH.lock, an
 * flock) go with the list as kinds SOCKREG_CTL and SOCKREG_LOCK, each
 * QUIC listen address's steering maps (BPF map descriptors) as
 * SOCKREG_QUIC_SOCKS and SOCKREG_QUIC_CFG. A mutex guards both lists.
 */
#ifndef EDGE_SOCKREG_H
#define EDGE_SOCKREG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

enum sockreg_kind {
	SOCKREG_HTTP = 0,   /* listen */
	SOCKREG_HTTPS,	    /* tls.listen */
	SOCKREG_TCP,	    /* a TCP route's address */
	SOCKREG_ADMIN,	    /* admin_listen */
	SOCKREG_LOCK,	    /* the control socket's lock file */
	SOCKREG_CTL,	    /* the control socket */
	SOCKREG_QUIC_SOCKS, /* a tls.quic_listen's steering socket array
			       (quicsteer.h; a BPF map); id: the
			       generation */
	SOCKREG_QUIC_CFG,   /* and its edge_quic_cfg */
	SOCKREG_KINDS,
};

/* "http", "https", "tcp", "admin", "lock", "control", "quic-socks",
 * "quic-cfg". */
const char *sockreg_kind_name(enum sockreg_kind k);

/* Note fd (duplicated; the caller keeps its own) as this process's
 * socket of kind k at addr. 0 or -errno. */
int sockreg_add(enum sockreg_kind k, const char *addr, uint64_t id, int fd);

/* Close this process's sockets of kind k and id (a TCP route's). */
void sockreg_drop(enum sockreg_kind k, uint64_t id);

/* Close every socket of this process's list: nothing to hand over. */
void sockreg_close_all(void);

/* The list for a successor: *fds (*n; valid until the next call of a
 * function of this process's list) and *desc, an array of {"kind",
 * "addr"} in the same order (a new reference). 0 or -ENOMEM. */
int sockreg_handover(const int **fds, size_t *n, json_t **desc);

/* Ask the daemon at ctl_path for its list ({"cmd":"handover"}): 0 with
 * the sockets kept for sockreg_take, or -errno with err saying why (none
 * kept). */
int sockreg_inherit(const char *ctl_path, struct errbuf *err);

/* A predecessor's socket of kind k at addr, now the caller's; -1 when
 * none is left. sockreg_take_id also gives the id it was noted with. */
int sockreg_take(enum sockreg_kind k, const char *addr);
int sockreg_take_id(enum sockreg_kind k, const char *addr, uint64_t *id);

/* Whether the predecessor handed over a socket of kind k; *id: the
 * first one's id. */
bool sockreg_inherited(enum sockreg_kind k, uint64_t *id);

/* Close the predecessor's sockets not taken (of kind k, or every kind
 * when k is SOCKREG_KINDS), each logged. */
void sockreg_inherit_done(enum sockreg_kind k);

#endif /* EDGE_SOCKREG_H */
