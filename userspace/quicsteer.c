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
	struct edge_quic_cfg cfg; /* what quic_steer_activate writes */
	int fd;			  /* the socket it attaches the program to */
	bool active;
};

static _Atomic unsigned steer_gen;

void quic_steer_set_gen(unsigned gen)
{
	steer_gen = gen % EDGE_QUIC_GENS;
}

unsigned quic_steer_gen(void)
{
	return steer_gen;
}

int quic_cid_make(uint8_t *cid, unsigned gen, unsigned worker)
{
	if (worker >= EDGE_QUIC_WORKERS_MAX || gen >= EDGE_QUIC_GENS ||
	    RAND_bytes(cid, EDGE_QUIC_CID_LEN) != 1)
		return -1;
	cid[EDGE_QUIC_CID_WORKER_OFF] = (uint8_t)gen;
	cid[EDGE_QUIC_CID_WORKER_OFF + 1] = (uint8_t)worker;
	return 0;
}

int quic_cid_worker(const uint8_t *cid, size_t len)
{
	if (len != EDGE_QUIC_CID_LEN)
		return -1;
	return cid[EDGE_QUIC_CID_WORKER_OFF + 1];
}

int quic_cid_gen(const uint8_t *cid, size_t len)
{
	if (len != EDGE_QUIC_CID_LEN)
		return -1;
	return cid[EDGE_QUIC_CID_WORKER_OFF];
}

/* fd into the socket array at slot */
static int steer_put(int map, uint32_t slot, int fd, struct errbuf *err)
{
	uint64_t v = (uint64_t)fd;

	if (bpf_map_update_elem(map, &slot, &v, BPF_ANY)) {
		errbuf_set(err, "slot %u (generation %u, worker %u) of %s: %s",
			   slot, slot >> 8, slot & 0xff, EDGE_MAP_QUIC_SOCKS,
			   strerror(errno));
		return -errno;
	}
	return 0;
}

/* The skeleton loaded, on the running edged's maps when socks_map >= 0
 * (then cfg_map too). 0 or -errno. */
static int steer_load(struct quic_steer *qs, int socks_map, int cfg_map)
{
	int rc;

	qs->skel = edge_quic__open();
	if (!qs->skel)
		return errno ? -errno : -EINVAL;
	if (socks_map >= 0 &&
	    ((rc = bpf_map__reuse_fd(qs->skel->maps.edge_quic_socks,
				     socks_map)) ||
	     (rc = bpf_map__reuse_fd(qs->skel->maps.edge_quic_cfg, cfg_map))))
		return rc < 0 ? rc : -EINVAL;
	rc = edge_quic__load(qs->skel);
	return rc < 0 ? rc : rc ? -EINVAL : 0;
}

int quic_steer_activate(struct quic_steer *qs, struct errbuf *err)
{
	int prog = bpf_program__fd(qs->skel->progs.edge_quic_steer);
	uint32_t zero = 0;

	if (qs->active)
		return 0;
	/* new connections come here from now on, whichever program runs */
	if (bpf_map_update_elem(bpf_map__fd(qs->skel->maps.edge_quic_cfg),
				&zero, &qs->cfg, BPF_ANY)) {
		errbuf_set(err, "%s: %s", EDGE_MAP_QUIC_CFG, strerror(errno));
		return -errno;
	}
	if (setsockopt(qs->fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_EBPF, &prog,
		       sizeof(prog))) {
		errbuf_set(err, "SO_ATTACH_REUSEPORT_EBPF: %s",
			   strerror(errno));
		return -errno;
	}
	qs->active = true;
	return 0;
}

int quic_steer_attach(const int *fds, unsigned n, unsigned gen, int socks_map,
		      int cfg_map, bool activate, struct quic_steer **out,
		      struct errbuf *err)
{
	struct quic_steer *qs;
	int rc, map;

	*out = NULL;
	if (n == 0 || n > EDGE_QUIC_WORKERS_MAX || gen >= EDGE_QUIC_GENS ||
	    (socks_map >= 0) != (cfg_map >= 0)) {
		errbuf_set(err,
			   "%u sockets of generation %u: 1 to %d, 0 to %d "
			   "(and both maps or none)",
			   n, gen, EDGE_QUIC_WORKERS_MAX, EDGE_QUIC_GENS - 1);
		return -EINVAL;
	}
	qs = calloc(1, sizeof(*qs));
	if (!qs) {
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	rc = steer_load(qs, socks_map, cfg_map);
	if (rc) {
		errbuf_set(err, "loading %s%s: %s", EDGE_QUIC_PROG_NAME,
			   socks_map >= 0 ? " on the running edged's maps" : "",
			   strerror(-rc));
		goto fail;
	}
	qs->cfg.gen = gen;
	qs->cfg.workers = n;
	qs->fd = fds[0];
	map = bpf_map__fd(qs->skel->maps.edge_quic_socks);
	for (unsigned i = 0; i < n; i++)
		if ((rc = steer_put(map, gen << 8 | i, fds[i], err)))
			goto fail;
	if (activate && (rc = quic_steer_activate(qs, err)))
		goto fail;
	*out = qs;
	return 0;
fail:
	quic_steer_free(qs);
	return rc;
}

void quic_steer_maps(const struct quic_steer *qs, int *socks_map, int *cfg_map)
{
	*socks_map = bpf_map__fd(qs->skel->maps.edge_quic_socks);
	*cfg_map = bpf_map__fd(qs->skel->maps.edge_quic_cfg);
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
