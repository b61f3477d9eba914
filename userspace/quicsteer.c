// SPDX-License-Identifier: BSD-2-Clause
/*
 * quicsteer.c - QUIC connection IDs and their steering program
 * (quicsteer.h).
 */
#include "quicsteer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <openssl/rand.h>

#include "edge_quic.skel.h"

#ifndef SO_ATTACH_REUSEPORT_EBPF
#define SO_ATTACH_REUSEPORT_EBPF 52
#endif

struct quic_steer {
	struct edge_quic *skel;
};

int quic_cid_make(uint8_t *cid, unsigned worker)
{
	if (worker >= EDGE_QUIC_WORKERS_MAX ||
	    RAND_bytes(cid, EDGE_QUIC_CID_LEN) != 1)
		return -1;
	cid[EDGE_QUIC_CID_WORKER_OFF] = (uint8_t)(worker >> 8);
	cid[EDGE_QUIC_CID_WORKER_OFF + 1] = (uint8_t)worker;
	return 0;
}

int quic_cid_worker(const uint8_t *cid, size_t len)
{
	if (len != EDGE_QUIC_CID_LEN)
		return -1;
	return (int)((unsigned)cid[EDGE_QUIC_CID_WORKER_OFF] << 8 |
		     cid[EDGE_QUIC_CID_WORKER_OFF + 1]);
}

int quic_steer_attach(const int *fds, unsigned n, struct quic_steer **out,
		      struct errbuf *err)
{
	struct quic_steer *qs;
	int rc, map, prog;

	*out = NULL;
	if (n == 0 || n > EDGE_QUIC_WORKERS_MAX) {
		errbuf_set(err, "%u sockets: 1 to %d", n,
			   EDGE_QUIC_WORKERS_MAX);
		return -EINVAL;
	}
	qs = calloc(1, sizeof(*qs));
	if (!qs) {
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	qs->skel = edge_quic__open_and_load();
	if (!qs->skel) {
		rc = errno ? -errno : -EINVAL;
		errbuf_set(err, "loading %s: %s", EDGE_QUIC_PROG_NAME,
			   strerror(-rc));
		goto fail;
	}
	map = bpf_map__fd(qs->skel->maps.edge_quic_socks);
	prog = bpf_program__fd(qs->skel->progs.edge_quic_steer);
	for (unsigned i = 0; i < n; i++) {
		uint32_t key = i;
		uint64_t fd = (uint64_t)fds[i];

		if (bpf_map_update_elem(map, &key, &fd, BPF_ANY)) {
			rc = -errno;
			errbuf_set(err, "worker %u's socket into %s: %s", i,
				   EDGE_MAP_QUIC_SOCKS, strerror(errno));
			goto fail;
		}
	}
	if (setsockopt(fds[0], SOL_SOCKET, SO_ATTACH_REUSEPORT_EBPF, &prog,
		       sizeof(prog))) {
		rc = -errno;
		errbuf_set(err, "SO_ATTACH_REUSEPORT_EBPF: %s",
			   strerror(errno));
		goto fail;
	}
	*out = qs;
	return 0;
fail:
	quic_steer_free(qs);
	return rc;
}

int quic_steer_counts(const struct quic_steer *qs,
		      uint64_t counts[EDGE_QUIC_CNT_SLOTS])
{
	int ncpu = libbpf_num_possible_cpus();
	int map = bpf_map__fd(qs->skel->maps.edge_quic_cnt);
	uint64_t *v;

	if (ncpu <= 0)
		return ncpu < 0 ? ncpu : -EINVAL;
	v = calloc((size_t)ncpu, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (uint32_t k = 0; k < EDGE_QUIC_CNT_SLOTS; k++) {
		counts[k] = 0;
		if (bpf_map_lookup_elem(map, &k, v)) {
			int rc = -errno;

			free(v);
			return rc;
		}
		for (int c = 0; c < ncpu; c++)
			counts[k] += v[c];
	}
	free(v);
	return 0;
}

void quic_steer_free(struct quic_steer *qs)
{
	if (!qs)
		return;
	edge_quic__destroy(qs->skel);
	free(qs);
}
