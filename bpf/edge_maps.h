/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * edge_maps.h - the contract between edge's BPF programs and userspace.
 *
 * Every map key and value that both sides read or write is defined here,
 * once, with fixed-width types, explicit padding and a size assertion. The
 * counter ids are an append-only ABI: a pinned counters map outlives the
 * programs that filled it, so never renumber or reuse an id.
 *
 * This header includes only <linux/types.h> so that it compiles both for the
 * BPF target and for userspace.
 */
#ifndef EDGE_MAPS_H
#define EDGE_MAPS_H

#include <linux/types.h>

/* ---- pins ---------------------------------------------------------- */

/* Default directory (on bpffs) holding edge's pinned maps. Overridden by
 * EDGE_PIN_DIR or edgectl --pin-dir. */
#define EDGE_PIN_DIR_DEFAULT "/sys/fs/bpf/edge"

/* Map names; pins use the same names inside the pin directory. BPF object
 * names are limited to 15 characters. */
#define EDGE_MAP_RULES_V4 "edge_rules_v4"
#define EDGE_MAP_RULES_V6 "edge_rules_v6"
#define EDGE_MAP_RULE_HITS "edge_rule_hits"
#define EDGE_MAP_CONFIG "edge_config"
#define EDGE_MAP_PORTS "edge_ports"
#define EDGE_MAP_RATELIMIT "edge_ratelimit"
#define EDGE_MAP_COUNTERS "edge_counters"

/* Name of the XDP program (the function in edge_xdp.bpf.c). */
#define EDGE_XDP_PROG_NAME "edge_xdp"

/* ---- default map sizes --------------------------------------------- */

#define EDGE_MAX_RULES 16384 /* v4 and v6 rules together: rule ids */
/* Rule ids below this are the host's own rules (edgectl's state file);
 * from it up, the rules edged brings from the database. Each writer
 * removes only entries of its own range; a prefix both have is the
 * host's own rule. */
#define EDGE_LOCAL_RULES_MAX 8192
#define EDGE_RULES_V4_MAX EDGE_MAX_RULES
#define EDGE_RULES_V6_MAX EDGE_MAX_RULES
#define EDGE_PORTS_MAX 65536
#define EDGE_RATELIMIT_MAX 131072 /* tracked sources (LRU) */

/* ---- IP rules: LPM trie keys and values ---------------------------- */

/* Key of edge_rules_v4: prefixlen in bits, then the address in network
 * byte order. */
struct edge_lpm_v4 {
	__u32 prefixlen;
	__u8 addr[4];
};
_Static_assert(sizeof(struct edge_lpm_v4) == 8, "edge_lpm_v4 size");

/* Key of edge_rules_v6. */
struct edge_lpm_v6 {
	__u32 prefixlen;
	__u8 addr[16];
};
_Static_assert(sizeof(struct edge_lpm_v6) == 20, "edge_lpm_v6 size");

enum edge_action {
	EDGE_ACT_BLOCK = 1,
	EDGE_ACT_ALLOW = 2,
};

/* Value of both LPM tries. expires_ns is CLOCK_BOOTTIME nanoseconds
 * (bpf_ktime_get_boot_ns), 0 for a rule that never expires. An expired rule
 * is ignored by the program, which then falls back to the next shorter
 * matching prefix; userspace removes expired rules when it next runs.
 * prefixlen repeats the key's so that fallback can start below it. id
 * indexes edge_rule_hits. */
struct edge_rule {
	__u64 expires_ns;
	__u32 id;
	__u8 action;	/* enum edge_action */
	__u8 prefixlen; /* 0..128 */
	__u8 pad[2];
};
_Static_assert(sizeof(struct edge_rule) == 16, "edge_rule size");

/* ---- configuration ------------------------------------------------- */

enum edge_policy {
	EDGE_POLICY_BLOCKLIST = 0, /* pass unless a block rule matches */
	EDGE_POLICY_ALLOWLIST = 1, /* guarded ports need an allow rule */
};

/* One token bucket's settings. rate is tokens per MINUTE (0: off), so
 * that both 1/m and 100/s are exact; burst is the bucket's size in tokens.
 * The program keeps tokens scaled by EDGE_RL_SCALE (nanoseconds per
 * minute) so that refill needs no division: one packet costs
 * EDGE_RL_SCALE, one nanosecond refills `rate`. fill_ns is the time an
 * empty bucket takes to fill (burst * EDGE_RL_SCALE / rate, rounded up),
 * computed by userspace. burst * EDGE_RL_SCALE stays below 2^63. */
#define EDGE_RL_SCALE 60000000000ULL
#define EDGE_RL_RATE_MAX 6000000000ULL /* per minute: 1e8 per second */
#define EDGE_RL_BURST_MAX 100000000ULL

struct edge_rl_conf {
	__u64 rate;
	__u64 burst;
	__u64 fill_ns;
};
_Static_assert(sizeof(struct edge_rl_conf) == 24, "edge_rl_conf size");

/* The single entry (key 0) of edge_config. */
struct edge_config {
	__u32 policy;		 /* enum edge_policy */
	__u32 flags;		 /* reserved, 0 */
	struct edge_rl_conf syn; /* new TCP connections (SYN without ACK) */
	struct edge_rl_conf pkt; /* every IP packet */
};
_Static_assert(sizeof(struct edge_config) == 56, "edge_config size");

/* edge_ports: array indexed by destination port; value 1 when the port is
 * guarded by the allowlist policy (TCP and UDP). */
struct edge_port {
	__u8 guarded;
};
_Static_assert(sizeof(struct edge_port) == 1, "edge_port size");

/* ---- rate limiting ------------------------------------------------- */

/* Key of edge_ratelimit: the source address. IPv4 sources are stored as
 * IPv4-mapped IPv6 (::ffff:a.b.c.d); IPv6 sources by their /64 (the low
 * eight bytes zero). */
struct edge_rl_key {
	__u8 addr[16];
};
_Static_assert(sizeof(struct edge_rl_key) == 16, "edge_rl_key size");

struct edge_rl_state {
	__u64 syn_tokens; /* scaled by EDGE_RL_SCALE */
	__u64 syn_ts;	  /* CLOCK_BOOTTIME ns of the last refill */
	__u64 pkt_tokens;
	__u64 pkt_ts;
};
_Static_assert(sizeof(struct edge_rl_state) == 32, "edge_rl_state size");

/* ---- counters ------------------------------------------------------ */

/*
 * X(ID, name, help): ID is appended to EDGE_CTR_, name is the stable
 * machine name (JSON key, metric label), help the operator's text.
 * Exactly one of the verdict counters (passed, dropped_*) counts each
 * packet; the others describe packets further. Append only.
 */
#define EDGE_COUNTERS(X)                                                       \
	X(PASSED, "passed", "packets passed")                                  \
	X(DROPPED_RULE, "dropped_rule", "packets dropped by a block rule")     \
	X(DROPPED_POLICY, "dropped_policy",                                    \
	  "packets dropped by the allowlist policy")                           \
	X(DROPPED_RATELIMIT, "dropped_ratelimit",                              \
	  "packets dropped by the rate limit")                                 \
	X(DROPPED_MALFORMED, "dropped_malformed",                              \
	  "malformed packets dropped (allowlist policy)")                      \
	X(MALFORMED, "malformed", "malformed packets seen")                    \
	X(NON_IP, "non_ip", "non-IP frames passed untouched")                  \
	X(FRAGMENTS, "fragments", "IP fragments seen")                         \
	X(RULE_EXPIRED, "rule_expired",                                        \
	  "lookups that skipped an expired rule")                              \
	X(RATELIMIT_SYN, "ratelimit_syn", "SYNs over the SYN rate limit")      \
	X(RATELIMIT_PKT, "ratelimit_pkt",                                      \
	  "packets over the packet rate limit")                                \
	X(RATELIMIT_QUIC, "ratelimit_quic",                                    \
	  "QUIC Initials (to a guarded port) over the SYN rate limit")

enum edge_counter {
#define EDGE_CTR_ENUM(id, name, help) EDGE_CTR_##id,
	EDGE_COUNTERS(EDGE_CTR_ENUM)
#undef EDGE_CTR_ENUM
	    EDGE_CTR_MAX
};

/* edge_counters: per-CPU array of __u64 indexed by enum edge_counter.
 * Sized larger than EDGE_CTR_MAX so that appending counters does not
 * change the pinned map's definition. */
#define EDGE_COUNTERS_SLOTS 64
_Static_assert(EDGE_CTR_MAX <= EDGE_COUNTERS_SLOTS, "too many counters");

/* edge_rule_hits: per-CPU array of __u64 indexed by edge_rule.id. */

/* ---- sockmap splice ------------------------------------------------- */

/* edged's own maps for the sk_skb program (edge_splice.bpf.c), loaded by
 * edged at start and never pinned: a spliced pair lives as long as the
 * edged that made it. Every socket in them is keyed by its socket cookie
 * (getsockopt SO_COOKIE; bpf_get_socket_cookie in the program). */
#define EDGE_MAP_SPLICE_SOCKS "edge_splice_sk" /* SOCKHASH cookie -> socket */
/* the same sockets as redirect targets, in a sockhash with no program:
 * a socket goes in here first, so that its peer's bytes find it from
 * the moment the peer enters edge_splice_sk */
#define EDGE_MAP_SPLICE_DST "edge_splice_dst"
#define EDGE_MAP_SPLICE_CTL "edge_splice_ctl" /* HASH cookie -> ctl */
#define EDGE_MAP_SPLICE_CNT "edge_splice_cnt" /* HASH cookie -> counts */
#define EDGE_SPLICE_PROG_NAME "edge_splice"
/* Sockets spliced at once (two per tunnel). */
#define EDGE_SPLICE_MAX 65536

enum edge_splice_state {
	/* bytes stay with the socket: userspace reads them (copy mover) */
	EDGE_SPLICE_PASS = 0,
	/* bytes go to the peer's egress, once count.pass_bytes == ctl.want */
	EDGE_SPLICE_REDIRECT = 1,
};

/* Value of edge_splice_ctl, written by userspace only. The program
 * redirects a socket's bytes only while state is REDIRECT and the bytes
 * it has passed so far equal want. edged adds sockets in REDIRECT with
 * want 0 and hands a pair back by taking it out of the maps, never by
 * PASS (docs/splice.md), so PASS and want are unused. */
struct edge_splice_ctl {
	__u64 peer; /* the peer socket's cookie, its key in edge_splice_sk */
	__u64 want;
	__u32 state; /* enum edge_splice_state */
	__u32 pad;
};
_Static_assert(sizeof(struct edge_splice_ctl) == 24, "edge_splice_ctl size");

/* Value of edge_splice_cnt: created zero by userspace with the socket,
 * then only added to by the program. */
struct edge_splice_cnt {
	__u64 redir_bytes; /* redirected to the peer's egress */
	__u64 pass_bytes;  /* left to this socket's own reader */
	__u64 redir_fail; /* redirects the kernel refused (peer gone): passed */
	__u64 last_ns;	  /* bpf_ktime_get_ns() of the last redirect */
};
_Static_assert(sizeof(struct edge_splice_cnt) == 32, "edge_splice_cnt size");

/* ---- QUIC: steering datagrams to the worker of their connection ---- */

/* edge_quic.bpf.c, an sk_reuseport program, one instance per QUIC
 * listen address, loaded by edged and never pinned. A connection ID
 * edged issues is EDGE_QUIC_CID_LEN bytes: byte 0 random, byte 1 the
 * issuing edged's generation (0 to 255: an upgrade's new edged takes the
 * one after the running edged's), byte 2 the issuing worker's index,
 * the rest random (QUIC-LB's plaintext form: an observer learns the
 * worker and the generation, nothing else). Bytes 1-2, big-endian, are
 * the CID's slot in the socket array: worker i's UDP socket of
 * generation g at g << 8 | i, so every edged still draining keeps its
 * sockets there (until 256 upgrades later). A
 * datagram whose destination CID names a slot with a socket goes to
 * that socket, so a client that changes address (migration, NAT
 * rebinding) stays with its connection, and an old edged's connections
 * with it. A client's first Initial or 0-RTT (a DCID the client chose)
 * goes to a worker of the generation edge_quic_cfg names, by the
 * 4-tuple's hash. Anything else (an unknown version, garbage, a slot with
 * no socket) is left to the kernel's 4-tuple hash: edged's worker drops
 * what it cannot use. The program never drops a datagram. */
#define EDGE_MAP_QUIC_SOCKS "edge_quic_socks" /* REUSEPORT_SOCKARRAY */
#define EDGE_MAP_QUIC_CNT "edge_quic_cnt"     /* PERCPU_ARRAY of __u64 */
#define EDGE_MAP_QUIC_CFG "edge_quic_cfg"     /* ARRAY of edge_quic_cfg */
#define EDGE_QUIC_PROG_NAME "edge_quic_steer"
#define EDGE_QUIC_CID_LEN 16
#define EDGE_QUIC_CID_WORKER_OFF 1 /* the slot: generation, worker */
#define EDGE_QUIC_WORKERS_MAX 256  /* CONFIG_WORKERS_MAX */
#define EDGE_QUIC_GENS 256
#define EDGE_QUIC_SLOTS (EDGE_QUIC_GENS * EDGE_QUIC_WORKERS_MAX)

/* edge_quic_cfg's one entry: where new connections go */
struct edge_quic_cfg {
	__u32 gen;     /* the serving edged's generation */
	__u32 workers; /* its sockets: slots gen << 8 | 0 .. workers - 1 */
};
_Static_assert(sizeof(struct edge_quic_cfg) == 8, "edge_quic_cfg size");

/* edge_quic_cnt's slots: what the program did with a datagram (exactly
 * one each). Append only. */
enum edge_quic_verdict {
	EDGE_QUIC_STEERED = 0,	   /* to the worker its DCID names */
	EDGE_QUIC_HASH_NEW = 1,	   /* Initial/0-RTT with the client's DCID
				      (to the serving generation) */
	EDGE_QUIC_HASH_OTHER = 2,  /* not ours: short, unknown version, ... */
	EDGE_QUIC_HASH_NOSOCK = 3, /* a worker index with no socket */
	EDGE_QUIC_CNT_SLOTS = 8,
};

#endif /* EDGE_MAPS_H */
