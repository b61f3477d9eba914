// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * redirect.bpf.c - the router hop of bench/xdp-drop's "frames" delivery.
 *
 * Attached in native mode to the router's veth that faces the flooder, it
 * sends every IPv4 frame on to the veth that faces the receiving host, with
 * bpf_redirect(). A redirected frame leaves through that veth's
 * ndo_xdp_xmit and reaches its peer, the receiver's interface, as an
 * xdp_frame in the peer's NAPI ring: the receiver's native XDP program then
 * runs on the raw buffer before any skb exists, and without one the
 * receiver builds its skb from the buffer, as a NIC driver does. The
 * Ethernet addresses are rewritten as a router would (destination: the
 * receiver's interface, source: the router's egress veth); the TTL is left
 * alone, the route is one hop on a bench.
 *
 * Everything else (ARP, IPv6) and every frame before the script has filled
 * edge_redir_cfg goes to the router's stack (XDP_PASS).
 *
 * Only UAPI headers, as for bpf/: the object loads on any kernel from 6.1.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Value of edge_redir_cfg's only entry (key 0), written by
 * bench/xdp-drop/run with bpftool as 16 bytes in host order. */
struct edge_redir_cfg {
	__u32 ifindex;		/* egress veth; 0: not configured yet */
	__u8 dst_mac[ETH_ALEN]; /* the receiver's interface */
	__u8 src_mac[ETH_ALEN]; /* the egress veth */
};
_Static_assert(sizeof(struct edge_redir_cfg) == 16, "edge_redir_cfg size");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct edge_redir_cfg);
} edge_redir_cfg SEC(".maps");

SEC("xdp")
int edge_redirect(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct edge_redir_cfg *cfg;
	__u32 key = 0;

	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	cfg = bpf_map_lookup_elem(&edge_redir_cfg, &key);
	if (!cfg || !cfg->ifindex)
		return XDP_PASS;
	__builtin_memcpy(eth->h_dest, cfg->dst_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, cfg->src_mac, ETH_ALEN);
	return (int)bpf_redirect(cfg->ifindex, 0);
}
