// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * edge_splice.bpf.c - the sockmap splice: an sk_skb stream verdict
 * program on edged's sockhash that sends each spliced socket's incoming
 * bytes to its peer's egress, counting them, so that a tunnel's bytes
 * never enter userspace.
 *
 * The program reads no byte of the payload (only skb->len), so it pulls
 * none. A socket without a ctl entry, one in PASS state, or one whose
 * count of passed bytes is not the ctl's want keeps its bytes (SK_PASS:
 * edged reads them as a copy mover would). A redirect the kernel refuses
 * (the peer left the map: a close race) keeps them too, counted in
 * redir_fail, for edged's watchdog to find: never SK_DROP. An empty skb
 * (a FIN) is never redirected: edged sees the FIN and forwards it.
 *
 * edge_splice_unarm, an iterator over the TCP sockets, takes the sockets
 * edge_splice_disarm names out of edge_splice_sk, each under its socket
 * lock: a delete from userspace takes no lock, and a verdict that runs on
 * another CPU meanwhile finds no program and drops the socket's bytes
 * (sk_psock_verdict_recv), where under the lock none runs, and the
 * socket's next bytes stay in its receive queue.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "edge_maps.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, EDGE_SPLICE_MAX);
	__type(key, __u64);
	__type(value, __u64);
} edge_splice_sk SEC(".maps");

/* the redirect targets (no program attached: a socket in it alone keeps
 * its bytes in its own receive queue) */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, EDGE_SPLICE_MAX);
	__type(key, __u64);
	__type(value, __u64);
} edge_splice_dst SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, EDGE_SPLICE_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* a few MiB otherwise */
	__type(key, __u64);
	__type(value, struct edge_splice_ctl);
} edge_splice_ctl SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, EDGE_SPLICE_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct edge_splice_cnt);
} edge_splice_cnt SEC(".maps");

/* cookies to take out from under the verdict: 0, asked; 1, done by
 * edge_splice_unarm */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, EDGE_SPLICE_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, __u64);
} edge_splice_disarm SEC(".maps");

/* the kernel's context of a TCP socket iterator (relocated against the
 * running kernel's BTF) */
struct bpf_iter_meta;
struct sock_common;
struct bpf_iter__tcp {
	struct bpf_iter_meta *meta;
	struct sock_common *sk_common;
	__u32 uid;
} __attribute__((preserve_access_index));

SEC("sk_skb/stream_verdict")
int edge_splice(struct __sk_buff *skb)
{
	__u64 me = bpf_get_socket_cookie(skb);
	struct edge_splice_ctl *c = bpf_map_lookup_elem(&edge_splice_ctl, &me);
	struct edge_splice_cnt *n = bpf_map_lookup_elem(&edge_splice_cnt, &me);
	__u64 len = skb->len, peer;

	if (!c || !n)
		return SK_PASS;
	/* a FIN comes as an empty skb: redirected, or passed behind bytes
	 * the kernel still holds for this socket (queued after them), the
	 * backlog would send nothing, which it takes for a broken pipe
	 * (and stops). The FIN is the socket's state already (recv() and
	 * EPOLLRDHUP say so); edged forwards it itself: the marker goes. */
	if (len == 0)
		return SK_DROP;
	if (c->state == EDGE_SPLICE_REDIRECT && n->pass_bytes == c->want) {
		peer = c->peer;
		/* counted first: edged compares what the peer has sent
		 * with this, and may never see more sent than counted */
		__sync_fetch_and_add(&n->redir_bytes, len);
		if (bpf_sk_redirect_hash(skb, &edge_splice_dst, &peer, 0) ==
		    SK_PASS) {
			n->last_ns = bpf_ktime_get_ns();
			return SK_PASS;
		}
		__sync_fetch_and_add(&n->redir_bytes, -len);
		__sync_fetch_and_add(&n->redir_fail, 1);
	}
	__sync_fetch_and_add(&n->pass_bytes, len);
	return SK_PASS;
}

/* Called for each TCP socket of edged's network namespace with the socket
 * locked (bpf_iter_tcp_seq_show): one edge_splice_disarm asks for leaves
 * edge_splice_sk. */
SEC("iter/tcp")
int edge_splice_unarm(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct tcp_sock *tp;
	__u64 me, one = 1, *v;

	if (!skc)
		return 0;
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp)
		return 0;
	me = bpf_get_socket_cookie(tp);
	v = bpf_map_lookup_elem(&edge_splice_disarm, &me);
	if (!v || *v)
		return 0;
	bpf_map_delete_elem(&edge_splice_sk, &me);
	/* by key, not through v: an element another pass's asker removed
	 * meanwhile may be reused for another cookie */
	bpf_map_update_elem(&edge_splice_disarm, &me, &one, BPF_EXIST);
	return 0;
}
