/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * quicsteer.h - the connection IDs edged issues for QUIC, and the kernel
 * program that keeps a connection's datagrams on the worker that issued
 * them (bpf/edge_quic.bpf.c; the layout and the maps: edge_maps.h).
 *
 * One steering group per QUIC listen address: every worker's UDP socket
 * bound to it with SO_REUSEPORT, worker i's at index i. Loaded before
 * privileges drop; the group keeps the program after the loader's fds
 * close (the kernel holds it), and quic_steer_free detaches nothing:
 * closing the sockets does.
 */
#ifndef EDGE_QUICSTEER_H
#define EDGE_QUICSTEER_H

#include <stddef.h>
#include <stdint.h>

#include "edge_maps.h"
#include "log.h"

struct quic_steer;

/* Fill cid (EDGE_QUIC_CID_LEN bytes) with a new connection ID naming
 * worker (< EDGE_QUIC_WORKERS_MAX): random but for its worker bytes.
 * 0, or -1 when the random generator failed (cid unusable). */
int quic_cid_make(uint8_t *cid, unsigned worker);

/* The worker a connection ID names, or -1 when it is not one of edged's
 * (another length). */
int quic_cid_worker(const uint8_t *cid, size_t len);

/* Load the program and attach it to the reuseport group of fds[0..n):
 * fds[i] is worker i's UDP socket, each bound with SO_REUSEPORT to the
 * same address. 0 with *out set, or -errno with err saying what the
 * kernel refused (the caller falls back to the kernel's hash, and says
 * so). */
int quic_steer_attach(const int *fds, unsigned n, struct quic_steer **out,
		      struct errbuf *err);

/* What the program did, summed over CPUs: counts[EDGE_QUIC_CNT_SLOTS]
 * indexed by enum edge_quic_verdict. 0 or -errno. */
int quic_steer_counts(const struct quic_steer *qs,
		      uint64_t counts[EDGE_QUIC_CNT_SLOTS]);

/* Close the loader's fds. The group keeps its program until its sockets
 * close. NULL is a no-op. */
void quic_steer_free(struct quic_steer *qs);

#endif /* EDGE_QUICSTEER_H */
