// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * netem.bpf.c - packet loss and random delay for the tests, where the
 * kernel has neither sch_netem nor sch_fq (tests/integration/
 * test_edged_http3_netns.sh).
 *
 * A tc (clsact) classifier in direct-action mode for UDP over IPv4 and
 * IPv6; everything else passes untouched. Of the UDP packets it drops
 * loss_ppm per million at random (bpf_get_prandom_u32) and gives each of
 * the rest a random delay of 0..delay_max_us: its departure time, now plus
 * the delay. A kernel with sch_fq would honour that as skb->tstamp (EDT)
 * on egress; this one has no qdisc that does, so the delay travels in
 * skb->mark (EDGE_NETEM_MARK | microseconds) and the program runs on the
 * ingress of the receiving interface, before netfilter: an iptables
 * NFQUEUE rule on that mark hands the packet to tests/tools/nfq_delay.py,
 * which lets it through when its delay is up, in departure order. Random
 * delays reorder packets: a packet whose departure comes before that of
 * one seen earlier is counted as reordered.
 *
 * Both maps are pinned by the test (bpftool prog load ... pinmaps DIR);
 * edge_netem_cfg is written with bpftool before traffic flows (zeros:
 * nothing dropped, nothing delayed), edge_netem_stats read after.
 *
 * Only UAPI headers, as for bpf/.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* the mark's top byte says "delay me"; its low 24 bits the microseconds */
#define EDGE_NETEM_MARK 0xed000000u
#define EDGE_NETEM_DELAY_MAX_US 0x00ffffffu

/* Value of edge_netem_cfg's only entry (key 0), written by the test with
 * bpftool as 8 bytes in host order. */
struct edge_netem_cfg {
	__u32 loss_ppm;	    /* packets dropped per million */
	__u32 delay_max_us; /* delays drawn from 0..this (at most 2^24-1) */
};
_Static_assert(sizeof(struct edge_netem_cfg) == 8, "edge_netem_cfg size");

/* Value of edge_netem_stats's only entry (key 0). */
struct edge_netem_stats {
	__u64 seen;	      /* UDP packets looked at */
	__u64 dropped;	      /* of which dropped */
	__u64 delayed;	      /* of which given a delay above 0 */
	__u64 reordered;      /* of which due out before an earlier one */
	__u64 last_departure; /* latest departure time so far (ns) */
};
_Static_assert(sizeof(struct edge_netem_stats) == 40, "edge_netem_stats size");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct edge_netem_cfg);
} edge_netem_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct edge_netem_stats);
} edge_netem_stats SEC(".maps");

/* is_udp: the frame (at its Ethernet header) carries UDP */
static __always_inline int is_udp(struct __sk_buff *skb)
{
	__u8 proto;

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		if (bpf_skb_load_bytes(skb, ETH_HLEN + 9, &proto, 1))
			return 0;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		if (bpf_skb_load_bytes(skb, ETH_HLEN + 6, &proto, 1))
			return 0;
	} else {
		return 0;
	}
	return proto == IPPROTO_UDP;
}

SEC("tc")
int edge_netem(struct __sk_buff *skb)
{
	struct edge_netem_stats *st;
	struct edge_netem_cfg *cfg;
	__u32 key = 0, delay_us;
	__u64 departure;

	if (!is_udp(skb))
		return TC_ACT_OK;
	cfg = bpf_map_lookup_elem(&edge_netem_cfg, &key);
	st = bpf_map_lookup_elem(&edge_netem_stats, &key);
	if (!cfg || !st)
		return TC_ACT_OK;
	__sync_fetch_and_add(&st->seen, 1);
	if (cfg->loss_ppm && bpf_get_prandom_u32() % 1000000 < cfg->loss_ppm) {
		__sync_fetch_and_add(&st->dropped, 1);
		return TC_ACT_SHOT;
	}
	delay_us = cfg->delay_max_us & EDGE_NETEM_DELAY_MAX_US;
	if (delay_us)
		delay_us = bpf_get_prandom_u32() % (delay_us + 1);
	departure = bpf_ktime_get_ns() + (__u64)delay_us * 1000;
	/* racy across CPUs, as evidence needs no more */
	if (departure < st->last_departure)
		__sync_fetch_and_add(&st->reordered, 1);
	else
		st->last_departure = departure;
	if (delay_us) {
		__sync_fetch_and_add(&st->delayed, 1);
		skb->mark = EDGE_NETEM_MARK | delay_us;
	}
	return TC_ACT_OK;
}
