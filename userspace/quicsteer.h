/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * quicsteer.h - the connection IDs edged issues for QUIC, and the kernel
 * program that keeps a connection's datagrams on the worker that issued
 * them (bpf/edge_quic.bpf.c; the layout and the maps: edge_maps.h).
 *
 * One steering group per QUIC listen address: every worker's UDP socket
 * bound to it with SO_REUSEPORT, worker i's of generation g at slot
 * g << 8 | i (edge_maps.h). An upgrade's new edged joins the running
 * one's group with the next generation and attaches its own program on
 * the running one's maps (handed over: a socket is in one socket array
 * at most), its sockets added: each edged's connections stay its own,
 * new ones come to the new edged. Loaded
 * before privileges drop; the group keeps the program after the loader's
 * fds close (the kernel holds it), and quic_steer_free detaches nothing:
 * closing the sockets does.
 */
#ifndef EDGE_QUICSTEER_H
#define EDGE_QUICSTEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "edge_maps.h"
#include "log.h"

struct quic_steer;

/* This process's generation (< EDGE_QUIC_GENS; 0 until set): an
 * upgrade's new edged takes the one after the running edged's, before
 * its workers make a connection ID. */
void quic_steer_set_gen(unsigned gen);
unsigned quic_steer_gen(void);

/* Fill cid (EDGE_QUIC_CID_LEN bytes) with a new connection ID naming
 * generation gen (< EDGE_QUIC_GENS) and worker (<
 * EDGE_QUIC_WORKERS_MAX): random but for those bytes. 0, or -1 when the
 * random generator failed or an argument is out of range (cid
 * unusable). */
int quic_cid_make(uint8_t *cid, unsigned gen, unsigned worker);

/* The worker, and the generation, a connection ID names, or -1 when it
 * is not one of edged's (another length). */
int quic_cid_worker(const uint8_t *cid, size_t len);
int quic_cid_gen(const uint8_t *cid, size_t len);

/* Load the program for the reuseport group of fds[0..n): fds[i] is
 * worker i's UDP socket of generation gen, each bound with SO_REUSEPORT
 * to the same address, put in the socket array. socks_map and cfg_map
 * >= 0: the running edged's maps of that group (its sockets stay in it at
 * their slots, reachable by their connections' IDs), else new ones. With
 * activate, quic_steer_activate too. 0 with *out set, or -errno with err
 * saying what the kernel refused (the caller falls back to the kernel's
 * hash, or to new maps, and says so). */
int quic_steer_attach(const int *fds, unsigned n, unsigned gen, int socks_map,
		      int cfg_map, bool activate, struct quic_steer **out,
		      struct errbuf *err);

/* New connections go to this process's sockets (edge_quic_cfg) and the
 * program is attached to the group: at once for an edged that starts,
 * once the running edged has retired for an upgrade's new one (until
 * then nothing changes for the running one). 0 (also when done before)
 * or -errno with err set. */
int quic_steer_activate(struct quic_steer *qs, struct errbuf *err);

/* The maps' descriptors (valid until quic_steer_free), for a
 * successor. */
void quic_steer_maps(const struct quic_steer *qs, int *socks_map, int *cfg_map);

/* What the program did, summed over CPUs: counts[EDGE_QUIC_CNT_SLOTS]
 * indexed by enum edge_quic_verdict. 0 or -errno. */
int quic_steer_counts(const struct quic_steer *qs,
		      uint64_t counts[EDGE_QUIC_CNT_SLOTS]);

/* Close the loader's fds. The group keeps its program until its sockets
 * close. NULL is a no-op. */
void quic_steer_free(struct quic_steer *qs);

#endif /* EDGE_QUICSTEER_H */
