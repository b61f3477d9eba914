// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * edge_xdp.bpf.c - IP access control on the NIC.
 *
 * For every frame: find the source address (through VLAN tags, IPv4
 * options and fragments, IPv6 extension headers), look it up in the LPM
 * trie of its family where the longest unexpired prefix decides, then apply
 * the policy for the ports edge serves and the per-source rate limits.
 * Exactly one verdict counter counts each frame.
 *
 * Order of decisions, first match wins:
 *   1. non-IP frame                      -> pass (non_ip)
 *   2. block rule for the source         -> drop (dropped_rule)
 *   3. malformed frame, allowlist policy -> drop (dropped_malformed)
 *   4. allowlist policy, TCP/UDP to a guarded port, no allow rule
 *                                        -> drop (dropped_policy)
 *   5. over a rate limit                 -> drop (dropped_ratelimit)
 *      (a new connection's first packet: a TCP SYN to any port, or a
 *      QUIC v1/v2 Initial datagram, or a UDP datagram's first fragment,
 *      to a guarded port, takes a SYN token)
 *   6. otherwise                         -> pass (passed)
 *
 * Only UAPI headers: the object loads on any kernel from 6.1 on.
 */
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <xdp/xdp_helpers.h>

#include "edge_maps.h"

#define ETH_P_8021AD_ 0x88A8
#define ETH_P_8021Q_ 0x8100
#define IPV4_MF 0x2000
#define IPV4_OFFSET 0x1fff
#define IPV6_OFFSET_MASK 0xfff8
#define NEXTHDR_HOP 0
#define NEXTHDR_ROUTING 43
#define NEXTHDR_FRAGMENT 44
#define NEXTHDR_AUTH 51
#define NEXTHDR_DEST 60
#define MAX_VLAN_TAGS 2
#define MAX_EXT_HDRS 8

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* libxdp: run early in the dispatcher; let the next program see what we
 * pass. */
struct {
	__uint(priority, 10);
	__uint(XDP_PASS, 1);
} XDP_RUN_CONFIG(edge_xdp);

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, EDGE_RULES_V4_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct edge_lpm_v4);
	__type(value, struct edge_rule);
} edge_rules_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, EDGE_RULES_V6_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct edge_lpm_v6);
	__type(value, struct edge_rule);
} edge_rules_v6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, EDGE_MAX_RULES);
	__type(key, __u32);
	__type(value, __u64);
} edge_rule_hits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct edge_config);
} edge_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, EDGE_PORTS_MAX);
	__type(key, __u32);
	__type(value, struct edge_port);
} edge_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, EDGE_RATELIMIT_MAX);
	__type(key, struct edge_rl_key);
	__type(value, struct edge_rl_state);
} edge_ratelimit SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, EDGE_COUNTERS_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} edge_counters SEC(".maps");

struct vlan_hdr_ {
	__be16 tci;
	__be16 proto;
};

/* What the parser learnt about one frame. */
struct pkt {
	__u8 family;	 /* 0 (not IP), 4 or 6 */
	__u8 have_saddr; /* saddr is valid */
	__u8 malformed;
	__u8 fragment;	 /* any IP fragment */
	__u8 have_ports; /* dport is valid (TCP/UDP, first fragment) */
	__u8 syn;	 /* TCP SYN without ACK */
	__u8 l4proto;
	__u8 quic_initial; /* UDP whose payload starts a QUIC Initial */
	__u16 dport;	   /* host byte order */
	__u8 saddr[16];
};

/* A byte swap loses a register's bounds in the verifier of 6.1 and 6.12,
 * and the compiler drops a mask it can prove redundant: hide the value
 * from the compiler, then bound it, before it meets a packet pointer. */
static __always_inline __u32 bound16(__u32 v)
{
	asm volatile("" : "+r"(v));
	return v & 0xffff;
}

static __always_inline void count(__u32 id)
{
	__u64 *c = bpf_map_lookup_elem(&edge_counters, &id);

	if (c)
		*c += 1;
}

/* Parse TCP or UDP at l4 (within the IP packet ending at ip_end). */
static __always_inline void parse_l4(struct pkt *p, void *l4, void *ip_end,
				     void *data_end)
{
	if (p->l4proto == IPPROTO_TCP) {
		struct tcphdr *th = l4;

		if ((void *)(th + 1) > data_end || (void *)(th + 1) > ip_end ||
		    th->doff < 5) {
			p->malformed = 1;
			return;
		}
		p->dport = bpf_ntohs(th->dest);
		p->have_ports = 1;
		p->syn = th->syn && !th->ack;
	} else if (p->l4proto == IPPROTO_UDP) {
		struct udphdr *uh = l4;

		if ((void *)(uh + 1) > data_end || (void *)(uh + 1) > ip_end) {
			p->malformed = 1;
			return;
		}
		__u8 *q = (void *)(uh + 1);

		p->dport = bpf_ntohs(uh->dest);
		p->have_ports = 1;
		/* a long header, version 1 with type 0 or version 2
		 * (RFC 9369) with type 1: an Initial */
		if ((void *)(q + 5) <= data_end && (void *)(q + 5) <= ip_end &&
		    (q[0] & 0x80)) {
			__u32 ver = ((__u32)q[1] << 24) | ((__u32)q[2] << 16) |
				    ((__u32)q[3] << 8) | q[4];
			__u8 type = (q[0] >> 4) & 3;

			p->quic_initial = (ver == 1 && type == 0) ||
					  (ver == 0x6b3343cf && type == 1);
		}
	}
}

static __always_inline void parse_ipv4(struct pkt *p, void *data, __u32 off,
				       void *data_end)
{
	struct iphdr *iph = data + off;
	__u32 hlen, tot_len;
	__u16 frag;

	p->family = 4;
	if ((void *)(iph + 1) > data_end) {
		p->malformed = 1;
		return;
	}
	__builtin_memcpy(p->saddr, &iph->saddr, 4);
	p->have_saddr = 1;
	hlen = iph->ihl * 4;
	tot_len = bound16(bpf_ntohs(iph->tot_len));
	if (iph->version != 4 || hlen < sizeof(*iph) || tot_len < hlen ||
	    (void *)iph + tot_len > data_end) {
		p->malformed = 1;
		return;
	}
	frag = bpf_ntohs(iph->frag_off);
	if (frag & (IPV4_MF | IPV4_OFFSET))
		p->fragment = 1;
	p->l4proto = iph->protocol;
	/* A later fragment carries no L4 header: its source alone decides. */
	if (frag & IPV4_OFFSET)
		return;
	/* hlen <= 60: the verifier sees a bounded offset. */
	parse_l4(p, (void *)iph + (hlen & 0x3c), (void *)iph + tot_len,
		 data_end);
}

static __always_inline void parse_ipv6(struct pkt *p, void *data, __u32 off,
				       void *data_end)
{
	struct ipv6hdr *ip6 = data + off;
	__u32 cur, ip_end;
	__u8 nexthdr;
	int i;

	p->family = 6;
	if ((void *)(ip6 + 1) > data_end) {
		p->malformed = 1;
		return;
	}
	__builtin_memcpy(p->saddr, &ip6->saddr, 16);
	p->have_saddr = 1;
	ip_end = off + sizeof(*ip6) + bound16(bpf_ntohs(ip6->payload_len));
	if (ip6->version != 6 || data + ip_end > data_end) {
		p->malformed = 1;
		return;
	}
	nexthdr = ip6->nexthdr;
	cur = off + sizeof(*ip6);

	for (i = 0; i < MAX_EXT_HDRS; i++) {
		struct ipv6_opt_hdr *oh;
		__u32 len;

		if (nexthdr != NEXTHDR_HOP && nexthdr != NEXTHDR_ROUTING &&
		    nexthdr != NEXTHDR_DEST && nexthdr != NEXTHDR_FRAGMENT &&
		    nexthdr != NEXTHDR_AUTH)
			break;
		cur &= 0x3fff; /* bounded for the verifier; frames are < 16K */
		oh = data + cur;
		if ((void *)oh + 8 > data_end || cur + 8 > ip_end) {
			p->malformed = 1;
			return;
		}
		if (nexthdr == NEXTHDR_FRAGMENT) {
			__u16 fo = bpf_ntohs(*(__be16 *)((void *)oh + 2));

			p->fragment = 1;
			if (fo & IPV6_OFFSET_MASK) {
				/* later fragment: no L4 header here */
				p->l4proto = oh->nexthdr;
				return;
			}
			len = 8;
		} else if (nexthdr == NEXTHDR_AUTH) {
			len = ((__u32)oh->hdrlen + 2) * 4;
		} else {
			len = ((__u32)oh->hdrlen + 1) * 8;
		}
		nexthdr = oh->nexthdr;
		cur += len;
	}
	if (i == MAX_EXT_HDRS) {
		/* a chain this long hides the L4 header: cannot decide */
		p->malformed = 1;
		return;
	}
	p->l4proto = nexthdr;
	cur &= 0x3fff;
	if (cur > ip_end) {
		p->malformed = 1;
		return;
	}
	parse_l4(p, data + cur, data + ip_end, data_end);
}

static __always_inline void parse(struct xdp_md *ctx, struct pkt *p)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 off = sizeof(*eth);
	__u16 proto;
	int i;

	if ((void *)(eth + 1) > data_end) {
		p->malformed = 1;
		return;
	}
	proto = bpf_ntohs(eth->h_proto);
	for (i = 0; i < MAX_VLAN_TAGS; i++) {
		struct vlan_hdr_ *vh = data + off;

		if (proto != ETH_P_8021Q_ && proto != ETH_P_8021AD_)
			break;
		if ((void *)(vh + 1) > data_end) {
			p->malformed = 1;
			return;
		}
		proto = bpf_ntohs(vh->proto);
		off += sizeof(*vh);
	}
	if (proto == ETH_P_IP)
		parse_ipv4(p, data, off, data_end);
	else if (proto == ETH_P_IPV6)
		parse_ipv6(p, data, off, data_end);
	else if (proto == ETH_P_8021Q_ || proto == ETH_P_8021AD_)
		p->malformed = 1; /* more tags than we look through */
}

/* Longest unexpired prefix: a lookup with key.prefixlen = N finds the
 * longest rule of length <= N, so after an expired rule of length L the
 * search continues at L - 1. The loop runs at most once per prefix
 * length. */
static __always_inline struct edge_rule *lookup_v4(const __u8 *addr, __u64 now)
{
	struct edge_lpm_v4 key = {.prefixlen = 32};
	int i;

	__builtin_memcpy(key.addr, addr, 4);
	for (i = 0; i <= 32; i++) {
		struct edge_rule *r = bpf_map_lookup_elem(&edge_rules_v4, &key);

		if (!r)
			return NULL;
		if (!r->expires_ns || r->expires_ns > now)
			return r;
		count(EDGE_CTR_RULE_EXPIRED);
		if (r->prefixlen == 0 || r->prefixlen > key.prefixlen)
			return NULL;
		key.prefixlen = r->prefixlen - 1;
	}
	return NULL;
}

static __always_inline struct edge_rule *lookup_v6(const __u8 *addr, __u64 now)
{
	struct edge_lpm_v6 key = {.prefixlen = 128};
	int i;

	__builtin_memcpy(key.addr, addr, 16);
	for (i = 0; i <= 128; i++) {
		struct edge_rule *r = bpf_map_lookup_elem(&edge_rules_v6, &key);

		if (!r)
			return NULL;
		if (!r->expires_ns || r->expires_ns > now)
			return r;
		count(EDGE_CTR_RULE_EXPIRED);
		if (r->prefixlen == 0 || r->prefixlen > key.prefixlen)
			return NULL;
		key.prefixlen = r->prefixlen - 1;
	}
	return NULL;
}

/* Take one token from a bucket; false when it is empty. */
static __always_inline bool rl_take(__u64 *tokens, __u64 *ts,
				    const struct edge_rl_conf *c, __u64 now)
{
	__u64 cap = c->burst * EDGE_RL_SCALE;
	__u64 el = now > *ts ? now - *ts : 0;
	__u64 t = *tokens;

	if (el >= c->fill_ns) {
		t = cap;
	} else {
		__u64 nt = t + el * c->rate;

		t = (nt < t || nt > cap) ? cap : nt;
	}
	*ts = now;
	if (t < EDGE_RL_SCALE) {
		*tokens = t;
		return false;
	}
	*tokens = t - EDGE_RL_SCALE;
	return true;
}

/* Returns the counter id of the limit exceeded, or -1 within limits.
 * newconn: the packet opens a connection (a SYN token). */
static __always_inline int ratelimit(const struct pkt *p,
				     const struct edge_config *cfg, __u64 now,
				     bool newconn)
{
	struct edge_rl_key key = {};
	struct edge_rl_state fresh, *st;
	int over = -1;

	if (!cfg->syn.rate && !cfg->pkt.rate)
		return -1;
	if (!cfg->pkt.rate && !newconn)
		return -1;
	if (p->family == 4) {
		key.addr[10] = 0xff;
		key.addr[11] = 0xff;
		__builtin_memcpy(&key.addr[12], p->saddr, 4);
	} else {
		__builtin_memcpy(key.addr, p->saddr, 8); /* the /64 */
	}
	st = bpf_map_lookup_elem(&edge_ratelimit, &key);
	if (!st) {
		fresh.syn_tokens = cfg->syn.burst * EDGE_RL_SCALE;
		fresh.pkt_tokens = cfg->pkt.burst * EDGE_RL_SCALE;
		fresh.syn_ts = now;
		fresh.pkt_ts = now;
		st = &fresh;
	}
	if (cfg->pkt.rate &&
	    !rl_take(&st->pkt_tokens, &st->pkt_ts, &cfg->pkt, now))
		over = EDGE_CTR_RATELIMIT_PKT;
	else if (cfg->syn.rate && newconn &&
		 !rl_take(&st->syn_tokens, &st->syn_ts, &cfg->syn, now))
		over =
		    p->syn ? EDGE_CTR_RATELIMIT_SYN : EDGE_CTR_RATELIMIT_QUIC;
	if (st == &fresh)
		bpf_map_update_elem(&edge_ratelimit, &key, &fresh, BPF_ANY);
	return over;
}

static __always_inline bool port_guarded(__u16 port)
{
	__u32 k = port;
	struct edge_port *g = bpf_map_lookup_elem(&edge_ports, &k);

	return g && g->guarded;
}

static __always_inline int drop(__u32 ctr)
{
	count(ctr);
	return XDP_DROP;
}

SEC("xdp")
int edge_xdp(struct xdp_md *ctx)
{
	struct edge_config defaults = {}, *cfg;
	struct edge_rule *rule = NULL;
	struct pkt p = {};
	__u32 zero = 0;
	bool allowed = false;
	__u64 now;
	int over;

	parse(ctx, &p);
	cfg = bpf_map_lookup_elem(&edge_config, &zero);
	if (!cfg)
		cfg = &defaults;

	if (p.malformed)
		count(EDGE_CTR_MALFORMED);
	if (p.fragment)
		count(EDGE_CTR_FRAGMENTS);
	if (!p.family && !p.malformed) {
		count(EDGE_CTR_NON_IP);
		count(EDGE_CTR_PASSED);
		return XDP_PASS;
	}

	now = bpf_ktime_get_boot_ns();
	if (p.have_saddr) {
		if (p.family == 4)
			rule = lookup_v4(p.saddr, now);
		else
			rule = lookup_v6(p.saddr, now);
	}
	if (rule) {
		__u32 id = rule->id;
		__u64 *hits = bpf_map_lookup_elem(&edge_rule_hits, &id);

		if (hits)
			*hits += 1;
		if (rule->action == EDGE_ACT_BLOCK)
			return drop(EDGE_CTR_DROPPED_RULE);
		allowed = rule->action == EDGE_ACT_ALLOW;
	}

	if (cfg->policy == EDGE_POLICY_ALLOWLIST) {
		if (p.malformed)
			return drop(EDGE_CTR_DROPPED_MALFORMED);
		if (!allowed && p.have_ports &&
		    (p.l4proto == IPPROTO_TCP || p.l4proto == IPPROTO_UDP) &&
		    port_guarded(p.dport))
			return drop(EDGE_CTR_DROPPED_POLICY);
	}

	if (p.have_saddr) {
		/* QUIC never fragments (RFC 9000, 14): a first fragment of
		 * UDP to a guarded port may hide an Initial, and counts as
		 * one */
		over = ratelimit(
		    &p, cfg, now,
		    p.syn || ((p.quic_initial ||
			       (p.fragment && p.l4proto == IPPROTO_UDP)) &&
			      p.have_ports && cfg->syn.rate &&
			      port_guarded(p.dport)));
		if (over >= 0) {
			count(over);
			return drop(EDGE_CTR_DROPPED_RATELIMIT);
		}
	}

	count(EDGE_CTR_PASSED);
	return XDP_PASS;
}
