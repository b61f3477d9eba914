/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * attach.h - edge's XDP program on interfaces, through libxdp: attach it
 * (with its maps pinned in a chosen directory), find it, detach it.
 *
 * libxdp puts edge's program behind its dispatcher, so other XDP programs
 * can share the interface; edge runs at priority 10 and hands on the
 * packets it passes.
 */
#ifndef EDGE_ATTACH_H
#define EDGE_ATTACH_H

#include <stdbool.h>
#include <stdint.h>

#include "log.h"
#include "pins.h"
#include "state.h"

/* What is known about edge on one interface. */
struct attach_info {
	bool attached;		  /* an edge program runs on the interface */
	int mode;		  /* enum state_mode */
	uint32_t prog_id;	  /* edge's program */
	uint32_t counters_map_id; /* id of its counters map, 0 if unknown */
};

/*
 * Look for edge's program (by name, EDGE_XDP_PROG_NAME) on ifindex.
 * Returns 0 with *info filled (info->attached false when absent), or
 * -errno with err set.
 */
int attach_query(int ifindex, struct attach_info *info, struct errbuf *err);

/*
 * Load edge's program (embedded in this binary) with every map pinned in
 * pin_dir (existing pins are reused, missing ones created) and attach it to
 * ifindex. mode STATE_MODE_NATIVE or STATE_MODE_SKB forces that mode;
 * STATE_MODE_NONE tries native and falls back to skb. Fills *info with the
 * mode used and the program id. Returns 0 or -errno with err set.
 */
int attach_iface(const char *pin_dir, int ifindex, int mode,
		 struct attach_info *info, struct errbuf *err);

/*
 * Create edge's maps and pin them in pin_dir without loading or attaching
 * any program (pins that exist are reused), so that they can be filled
 * before the program first runs. Returns 0 or -errno with err set.
 */
int attach_create_maps(const char *pin_dir, struct errbuf *err);

/*
 * Detach every edge program from ifindex (other XDP programs stay).
 * Returns 0, -ENOENT when edge is not attached there, or -errno with err
 * set.
 */
int attach_detach(int ifindex, struct errbuf *err);

/*
 * Whether any loaded BPF program uses the maps open in p (an edge program
 * on some interface, in any network namespace). Returns 0 with *in_use
 * set, or -errno.
 */
int attach_maps_in_use(const struct pins *p, bool *in_use);

/*
 * Close every BPF program fd this process holds. libxdp 1.3 leaks the fd of
 * a program it finds attached without its dispatcher (legacy mode), which
 * keeps a detached program, and the maps it uses, alive until the process
 * exits. Only for processes that hold no program fd of their own at that
 * point (edgectl after a detach); never call it from the daemon.
 */
void attach_close_prog_fds(void);

/* The kernel id of the counters map open in p, 0 if unknown. */
uint32_t attach_map_id(const struct pins *p);

#endif /* EDGE_ATTACH_H */
