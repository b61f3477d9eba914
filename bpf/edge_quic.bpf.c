// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * edge_quic.bpf.c - steers each QUIC datagram arriving on a QUIC listen
 * address to the worker that owns its connection (edge_maps.h: the
 * connection ID's layout, the maps, the counters).
 *
 * Attached with SO_ATTACH_REUSEPORT_EBPF to the reuseport group of the
 * workers' UDP sockets. ctx->data is the UDP header; the QUIC packet
 * follows it. Only the first bytes are read (bpf_skb_load_bytes: the
 * datagram need not be linear). A datagram is steered when its
 * destination CID has edged's length and names a slot (generation,
 * worker) whose socket is in edge_quic_socks; a client's first Initial
 * or 0-RTT goes to one of the serving generation's sockets (edge_quic_cfg)
 * by the 4-tuple's hash; otherwise the program selects nothing and the
 * kernel picks a socket by that hash, as without the program. SK_PASS
 * always: the program never drops.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "edge_maps.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_REUSEPORT_SOCKARRAY);
	__uint(max_entries, EDGE_QUIC_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} edge_quic_socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct edge_quic_cfg);
} edge_quic_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, EDGE_QUIC_CNT_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} edge_quic_cnt SEC(".maps");

#define UDP_HLEN 8
/* long header: flags, version (4), DCID length, DCID */
#define LONG_DCID_OFF (UDP_HLEN + 6)
/* short header: flags, DCID */
#define SHORT_DCID_OFF (UDP_HLEN + 1)

static __always_inline int count(__u32 slot)
{
	__u64 *c = bpf_map_lookup_elem(&edge_quic_cnt, &slot);

	if (c)
		*c += 1;
	return SK_PASS;
}

/* a new connection: a socket of the serving generation, by the hash */
static __always_inline int steer_new(struct sk_reuseport_md *ctx)
{
	__u32 zero = 0, slot;
	struct edge_quic_cfg *cfg = bpf_map_lookup_elem(&edge_quic_cfg, &zero);

	if (cfg && cfg->workers && cfg->workers <= EDGE_QUIC_WORKERS_MAX &&
	    cfg->gen < EDGE_QUIC_GENS) {
		slot = cfg->gen << 8 | (ctx->hash % cfg->workers);
		bpf_sk_select_reuseport(ctx, &edge_quic_socks, &slot, 0);
	}
	return count(EDGE_QUIC_HASH_NEW);
}

SEC("sk_reuseport")
int edge_quic_steer(struct sk_reuseport_md *ctx)
{
	__u8 hd[6];
	__u8 w[2];
	__u32 off, worker;

	if (bpf_skb_load_bytes(ctx, UDP_HLEN, hd, sizeof(hd)) < 0)
		return count(EDGE_QUIC_HASH_OTHER);
	if (hd[0] & 0x80) {
		/* long header: version 1 or 2 (RFC 9369), whose Initial and
		 * 0-RTT carry the client's own DCID until it learns ours */
		__u32 version = (__u32)hd[1] << 24 | (__u32)hd[2] << 16 |
				(__u32)hd[3] << 8 | hd[4];
		__u8 type = (hd[0] >> 4) & 3;

		if (version == 0x00000001) {
			if (type == 0 || type == 1) /* Initial, 0-RTT */
				if (hd[5] != EDGE_QUIC_CID_LEN)
					return steer_new(ctx);
		} else if (version == 0x6b3343cf) {
			if (type == 1 || type == 2) /* Initial, 0-RTT */
				if (hd[5] != EDGE_QUIC_CID_LEN)
					return steer_new(ctx);
		} else {
			return count(EDGE_QUIC_HASH_OTHER);
		}
		if (hd[5] != EDGE_QUIC_CID_LEN)
			return count(EDGE_QUIC_HASH_OTHER);
		off = LONG_DCID_OFF;
	} else {
		/* a short header, whatever its fixed bit: a client may clear
		 * it (RFC 9287) once the server has allowed that */
		off = SHORT_DCID_OFF;
	}
	if (bpf_skb_load_bytes(ctx, off + EDGE_QUIC_CID_WORKER_OFF, w,
			       sizeof(w)) < 0)
		return count(EDGE_QUIC_HASH_OTHER);
	worker = (__u32)w[0] << 8 | w[1];
	if (worker >= EDGE_QUIC_SLOTS)
		return count(EDGE_QUIC_HASH_OTHER);
	if (bpf_sk_select_reuseport(ctx, &edge_quic_socks, &worker, 0) < 0)
		return count(EDGE_QUIC_HASH_NOSOCK);
	return count(EDGE_QUIC_STEERED);
}
