// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_xdp_prog.c - edge_xdp through BPF_PROG_TEST_RUN.
 *
 * Table-driven: each row sets up rules, policy and rate limits, builds a
 * frame (tests/bpf/pktbuild.h), runs the program on it `repeat` times and
 * asserts the verdicts, the verdict counter, one extra counter and the hit
 * count of one rule. Needs root (loading BPF); skips otherwise.
 */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include "edge_maps.h"
#include "edge_xdp.skel.h"
#include "pktbuild.h"

/* The table names only the fields a case needs, and V4()/V6() defaults
 * may be overridden by a case. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Woverride-init"

#define MAX_SETUP_RULES 6
#define NONE (-1)
#define TTL_EXPIRED (-1)
#define TTL_FUTURE 1

struct rule_spec {
	const char *cidr; /* NULL ends the list */
	int action;	  /* EDGE_ACT_* */
	int ttl;	  /* 0 never, TTL_EXPIRED, TTL_FUTURE */
};

struct setup {
	int policy;
	const uint16_t *ports; /* 0-terminated; NULL: 80, 443 */
	uint64_t syn_rate, syn_burst, pkt_rate, pkt_burst; /* per minute */
	struct rule_spec rules[MAX_SETUP_RULES];
};

struct xdp_case {
	const char *name;
	struct setup s;
	struct frame f;
	int verdict;	/* XDP_PASS / XDP_DROP for every run ... */
	int ctr;	/* ... counted by this verdict counter */
	int extra_ctr;	/* another counter expected to move, or NONE */
	int hit_rule;	/* index into s.rules expected to be hit, or NONE */
	int repeat;	/* runs; 0 means 1 */
	int pass_first; /* with repeat: the first N pass, the rest drop */
};

static struct edge_xdp *skel;
static int prog_fd;

#define V4(src_, ...)                                                          \
	{                                                                      \
		.family = 4, .src = src_, .dport = 443, __VA_ARGS__            \
	}
#define V6(src_, ...)                                                          \
	{                                                                      \
		.family = 6, .src = src_, .dport = 443, __VA_ARGS__            \
	}
#define ALLOWLIST .policy = EDGE_POLICY_ALLOWLIST
#define BLOCK(c)                                                               \
	{                                                                      \
		c, EDGE_ACT_BLOCK, 0                                           \
	}
#define ALLOW(c)                                                               \
	{                                                                      \
		c, EDGE_ACT_ALLOW, 0                                           \
	}

/* QUIC packets' first bytes: a v1 Initial, a v2 Initial (type 1), a v1
 * Handshake (type 2), a short header */
static const uint8_t quic_v1_initial[] = {0xc3, 0, 0, 0, 1, 8};
static const uint8_t quic_v2_initial[] = {0xd3, 0x6b, 0x33, 0x43, 0xcf, 8};
static const uint8_t quic_v1_handshake[] = {0xe3, 0, 0, 0, 1, 8};
static const uint8_t quic_short[] = {0x43, 1, 2, 3, 4, 5};
#define QUIC(h) .proto = IPPROTO_UDP, .payload = 1200, .head = h, .head_len = 6

static const struct xdp_case cases[] = {
    /* ---- parsing ---- */
    {"arp passes untouched",
     {},
     {.ethertype = ETH_P_ARP},
     XDP_PASS,
     EDGE_CTR_PASSED,
     EDGE_CTR_NON_IP,
     NONE},
    {"ipv4 tcp unmatched passes",
     {},
     V4("198.51.100.7"),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     NONE},
    {"ipv6 tcp unmatched passes",
     {},
     V6("2001:db8:1::7"),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     NONE},
    {"802.1Q tagged source is blocked",
     {.rules = {BLOCK("198.51.100.0/24")}},
     V4("198.51.100.7", .vlan = {0x8100}),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     NONE,
     0},
    {"802.1ad+802.1Q tagged source is blocked",
     {.rules = {BLOCK("198.51.100.0/24")}},
     V4("198.51.100.7", .vlan = {0x88a8, 0x8100}),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     NONE,
     0},
    {"802.1ad tagged ipv6 source is blocked",
     {.rules = {BLOCK("2001:db8:1::/48")}},
     V6("2001:db8:1::7", .vlan = {0x88a8, 0x8100}),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     NONE,
     0},
    {"three vlan tags are malformed, passed under blocklist",
     {},
     V4("198.51.100.7", .vlan = {0x88a8, 0x8100, 0x8100}),
     XDP_PASS,
     EDGE_CTR_PASSED,
     EDGE_CTR_MALFORMED,
     NONE},
    {"three vlan tags are dropped under allowlist",
     {ALLOWLIST},
     V4("198.51.100.7", .vlan = {0x88a8, 0x8100, 0x8100}),
     XDP_DROP,
     EDGE_CTR_DROPPED_MALFORMED,
     EDGE_CTR_MALFORMED,
     NONE},
    {"truncated vlan tag is malformed",
     {ALLOWLIST},
     V4("198.51.100.7", .vlan = {0x8100}, .truncate = 16),
     XDP_DROP,
     EDGE_CTR_DROPPED_MALFORMED,
     EDGE_CTR_MALFORMED,
     NONE},
    {"ipv4 options: blocked source still blocked",
     {.rules = {BLOCK("198.51.100.7")}},
     V4("198.51.100.7", .ihl = 9),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     NONE,
     0},
    {"ipv4 options: port found behind them (allowlist)",
     {ALLOWLIST},
     V4("198.51.100.7", .ihl = 15, .dport = 80),
     XDP_DROP,
     EDGE_CTR_DROPPED_POLICY,
     NONE,
     NONE},
    {"ipv4 ihl 4 is malformed, passed under blocklist",
     {},
     V4("198.51.100.7", .ihl = 4),
     XDP_PASS,
     EDGE_CTR_PASSED,
     EDGE_CTR_MALFORMED,
     NONE},
    {"ipv4 ihl 4 is dropped under allowlist",
     {ALLOWLIST},
     V4("198.51.100.7", .ihl = 4),
     XDP_DROP,
     EDGE_CTR_DROPPED_MALFORMED,
     EDGE_CTR_MALFORMED,
     NONE},
    {"ipv4 ihl 4 from a blocked source is blocked",
     {.rules = {BLOCK("198.51.100.7")}},
     V4("198.51.100.7", .ihl = 4),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     EDGE_CTR_MALFORMED,
     0},
    {"ipv4 header truncated",
     {ALLOWLIST},
     V4("198.51.100.7", .truncate = 24),
     XDP_DROP,
     EDGE_CTR_DROPPED_MALFORMED,
     EDGE_CTR_MALFORMED,
     NONE},
    {"ipv4 version 6 in an ipv4 ethertype",
     {ALLOWLIST},
     V4("198.51.100.7", .version = 6),
     XDP_DROP,
     EDGE_CTR_DROPPED_MALFORMED,
     EDGE_CTR_MALFORMED,
     NONE},
    {"ipv4 total length beyond the frame",
     {ALLOWLIST},
     V4("198.51.100.7", .ip_len_delta = 200),
     XDP_DROP,
     EDGE_CTR_DROPPED_MALFORMED,
     EDGE_CTR_MALFORMED,
     NONE},
    {"ipv4 total length below the header",
     {ALLOWLIST},
     V4("198.51.100.7", .ip_len_delta = -30),
     XDP_DROP,
     EDGE_CTR_DROPPED_MALFORMED,
     EDGE_CTR_MALFORMED,
     NONE},
    {"ipv4 first fragment from a blocked source",
     {.rules = {BLOCK("198.51.100.0/24")}},
     V4("198.51.100.7", .frag = FRAG_FIRST, .payload = 64),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     EDGE_CTR_FRAGMENTS,
     0},
    {"ipv4 later fragment from a blocked source",
     {.rules = {BLOCK("198.51.100.0/24")}},
     V4("198.51.100.7", .frag = FRAG_LATER, .payload = 64),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     EDGE_CTR_FRAGMENTS,
     0},
    {"ipv4 first fragment to a guarded port (allowlist)",
     {ALLOWLIST},
     V4("198.51.100.7", .frag = FRAG_FIRST, .payload = 64),
     XDP_DROP,
     EDGE_CTR_DROPPED_POLICY,
     EDGE_CTR_FRAGMENTS,
     NONE},
    {"ipv4 later fragment passes (allowlist; its first was judged)",
     {ALLOWLIST},
     V4("198.51.100.7", .frag = FRAG_LATER, .payload = 64),
     XDP_PASS,
     EDGE_CTR_PASSED,
     EDGE_CTR_FRAGMENTS,
     NONE},
    {"ipv4 tiny first fragment hiding the tcp header",
     {ALLOWLIST},
     V4("198.51.100.7", .frag = FRAG_FIRST, .l4_cut = 8),
     XDP_DROP,
     EDGE_CTR_DROPPED_MALFORMED,
     EDGE_CTR_MALFORMED,
     NONE},
    {"tcp data offset under 5",
     {ALLOWLIST},
     V4("198.51.100.7", .doff = 4),
     XDP_DROP,
     EDGE_CTR_DROPPED_MALFORMED,
     EDGE_CTR_MALFORMED,
     NONE},
    {"udp header truncated",
     {ALLOWLIST},
     V4("198.51.100.7", .proto = IPPROTO_UDP, .l4_cut = 4),
     XDP_DROP,
     EDGE_CTR_DROPPED_MALFORMED,
     EDGE_CTR_MALFORMED,
     NONE},
    {"ipv6 fixed header truncated",
     {ALLOWLIST},
     V6("2001:db8:1::7", .truncate = 40),
     XDP_DROP,
     EDGE_CTR_DROPPED_MALFORMED,
     EDGE_CTR_MALFORMED,
     NONE},
    {"ipv6 version 4 in an ipv6 ethertype",
     {ALLOWLIST},
     V6("2001:db8:1::7", .version = 4),
     XDP_DROP,
     EDGE_CTR_DROPPED_MALFORMED,
     EDGE_CTR_MALFORMED,
     NONE},
    {"ipv6 payload length beyond the frame",
     {ALLOWLIST},
     V6("2001:db8:1::7", .ip_len_delta = 100),
     XDP_DROP,
     EDGE_CTR_DROPPED_MALFORMED,
     EDGE_CTR_MALFORMED,
     NONE},
    {"ipv6 hop-by-hop + dest opts: port found behind them",
     {ALLOWLIST},
     V6("2001:db8:1::7", .ext = {EXT_HOP, EXT_DEST}),
     XDP_DROP,
     EDGE_CTR_DROPPED_POLICY,
     NONE,
     NONE},
    {"ipv6 routing + auth headers: port found behind them",
     {ALLOWLIST},
     V6("2001:db8:1::7", .ext = {EXT_ROUTING, EXT_AUTH}),
     XDP_DROP,
     EDGE_CTR_DROPPED_POLICY,
     NONE,
     NONE},
    {"ipv6 extension headers: allowed source passes",
     {ALLOWLIST, .rules = {ALLOW("2001:db8:1::/64")}},
     V6("2001:db8:1::7", .ext = {EXT_HOP, EXT_ROUTING, EXT_DEST}),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     0},
    {"ipv6 routing header from a blocked source",
     {.rules = {BLOCK("2001:db8:1::7")}},
     V6("2001:db8:1::7", .ext = {EXT_ROUTING}),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     NONE,
     0},
    {"ipv6 first fragment to a guarded port (allowlist)",
     {ALLOWLIST},
     V6("2001:db8:1::7", .ext = {EXT_FRAG_FIRST}, .payload = 64),
     XDP_DROP,
     EDGE_CTR_DROPPED_POLICY,
     EDGE_CTR_FRAGMENTS,
     NONE},
    {"ipv6 later fragment passes (allowlist)",
     {ALLOWLIST},
     V6("2001:db8:1::7", .ext = {EXT_FRAG_LATER}, .payload = 64),
     XDP_PASS,
     EDGE_CTR_PASSED,
     EDGE_CTR_FRAGMENTS,
     NONE},
    {"ipv6 later fragment from a blocked source",
     {.rules = {BLOCK("2001:db8:1::/64")}},
     V6("2001:db8:1::7", .ext = {EXT_HOP, EXT_FRAG_LATER}, .payload = 64),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     EDGE_CTR_FRAGMENTS,
     0},
    {"ipv6 nine extension headers are malformed",
     {ALLOWLIST},
     V6("2001:db8:1::7",
	.ext = {EXT_HOP, EXT_DEST, EXT_DEST, EXT_DEST, EXT_DEST, EXT_DEST,
		EXT_DEST, EXT_DEST, EXT_DEST}),
     XDP_DROP,
     EDGE_CTR_DROPPED_MALFORMED,
     EDGE_CTR_MALFORMED,
     NONE},
    {"ipv6 nine extension headers, blocked source",
     {.rules = {BLOCK("2001:db8:1::7")}},
     V6("2001:db8:1::7",
	.ext = {EXT_HOP, EXT_DEST, EXT_DEST, EXT_DEST, EXT_DEST, EXT_DEST,
		EXT_DEST, EXT_DEST, EXT_DEST}),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     EDGE_CTR_MALFORMED,
     0},
    {"ipv6 extension header truncated",
     {ALLOWLIST},
     V6("2001:db8:1::7", .ext = {EXT_HOP, EXT_DEST}, .truncate = 14 + 40 + 12),
     XDP_DROP,
     EDGE_CTR_DROPPED_MALFORMED,
     EDGE_CTR_MALFORMED,
     NONE},
    {"ipv6 extension header beyond the payload length",
     {ALLOWLIST},
     V6("2001:db8:1::7", .ext = {EXT_HOP, EXT_DEST}, .ip_len_delta = -28),
     XDP_DROP,
     EDGE_CTR_DROPPED_MALFORMED,
     EDGE_CTR_MALFORMED,
     NONE},

    /* ---- longest prefix across allow and block ---- */
    {"block /32",
     {.rules = {BLOCK("203.0.113.9/32")}},
     V4("203.0.113.9"),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     NONE,
     0},
    {"block /8, allow /32 inside: the /32 passes",
     {.rules = {BLOCK("10.0.0.0/8"), ALLOW("10.1.2.3/32")}},
     V4("10.1.2.3"),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     1},
    {"block /8, allow /32 inside: its neighbour is blocked",
     {.rules = {BLOCK("10.0.0.0/8"), ALLOW("10.1.2.3/32")}},
     V4("10.1.2.4"),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     NONE,
     0},
    {"allow /8, block /24 inside: the /24 is blocked",
     {ALLOWLIST, .rules = {ALLOW("10.0.0.0/8"), BLOCK("10.9.9.0/24")}},
     V4("10.9.9.1"),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     NONE,
     1},
    {"allow /8, block /24 inside: rest of /8 allowed",
     {ALLOWLIST, .rules = {ALLOW("10.0.0.0/8"), BLOCK("10.9.9.0/24")}},
     V4("10.9.8.1"),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     0},
    {"block 0.0.0.0/0 blocks everyone",
     {.rules = {BLOCK("0.0.0.0/0"), ALLOW("192.0.2.0/24")}},
     V4("198.51.100.1"),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     NONE,
     0},
    {"ipv6 block /32, allow /128 inside",
     {.rules = {BLOCK("2001:db8::/32"), ALLOW("2001:db8:5::5")}},
     V6("2001:db8:5::5"),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     1},
    {"ipv6 block /32, neighbour of the /128 blocked",
     {.rules = {BLOCK("2001:db8::/32"), ALLOW("2001:db8:5::5")}},
     V6("2001:db8:5::6"),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     NONE,
     0},
    {"ipv4 rule does not match ipv6 traffic",
     {.rules = {BLOCK("0.0.0.0/0")}},
     V6("2001:db8:5::6"),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     NONE},

    /* ---- policies ---- */
    {"blocklist: unmatched tcp 443 passes",
     {},
     V4("198.51.100.1"),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     NONE},
    {"allowlist: tcp 443 from unmatched source dropped",
     {ALLOWLIST},
     V4("198.51.100.1"),
     XDP_DROP,
     EDGE_CTR_DROPPED_POLICY,
     NONE,
     NONE},
    {"allowlist: udp 443 from unmatched source dropped",
     {ALLOWLIST},
     V4("198.51.100.1", .proto = IPPROTO_UDP),
     XDP_DROP,
     EDGE_CTR_DROPPED_POLICY,
     NONE,
     NONE},
    {"allowlist: ipv6 tcp 80 from unmatched source dropped",
     {ALLOWLIST},
     V6("2001:db8:9::1", .dport = 80),
     XDP_DROP,
     EDGE_CTR_DROPPED_POLICY,
     NONE,
     NONE},
    {"allowlist: tcp 443 from allowed source passes",
     {ALLOWLIST, .rules = {ALLOW("198.51.100.0/24")}},
     V4("198.51.100.1"),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     0},
    {"allowlist: custom ports guard 8080 only",
     {ALLOWLIST, .ports = (const uint16_t[]){8080, 0}},
     V4("198.51.100.1", .dport = 8080),
     XDP_DROP,
     EDGE_CTR_DROPPED_POLICY,
     NONE,
     NONE},
    {"allowlist: custom ports leave 443 open",
     {ALLOWLIST, .ports = (const uint16_t[]){8080, 0}},
     V4("198.51.100.1"),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     NONE},
    {"allowlist: ssh (tcp 22) is the host's own",
     {ALLOWLIST},
     V4("198.51.100.1", .dport = 22, .tcp_flags = TCPF_SYN),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     NONE},
    {"allowlist: dns reply to an ephemeral port",
     {ALLOWLIST},
     V4("198.51.100.53", .proto = IPPROTO_UDP, .sport = 53, .dport = 53124),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     NONE},
    {"allowlist: dhcp reply",
     {ALLOWLIST},
     V4("192.0.2.254", .proto = IPPROTO_UDP, .sport = 67, .dport = 68),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     NONE},
    {"allowlist: arp",
     {ALLOWLIST},
     {.ethertype = ETH_P_ARP},
     XDP_PASS,
     EDGE_CTR_PASSED,
     EDGE_CTR_NON_IP,
     NONE},
    {"allowlist: icmpv6 neighbour solicitation",
     {ALLOWLIST},
     V6("fe80::1", .proto = IPPROTO_ICMPV6, .icmp_type = 135),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     NONE},
    {"allowlist: icmp fragmentation needed",
     {ALLOWLIST},
     V4("198.51.100.1", .proto = IPPROTO_ICMP, .icmp_type = 3, .icmp_code = 4),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     NONE},
    {"allowlist: icmpv6 packet too big",
     {ALLOWLIST},
     V6("2001:db8:9::1", .proto = IPPROTO_ICMPV6, .icmp_type = 2),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     NONE},
    {"allowlist: a block rule stops ssh too",
     {ALLOWLIST, .rules = {BLOCK("198.51.100.1")}},
     V4("198.51.100.1", .dport = 22),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     NONE,
     0},

    /* ---- TTL ---- */
    {"expired block rule no longer applies",
     {.rules = {{"198.51.100.1", EDGE_ACT_BLOCK, TTL_EXPIRED}}},
     V4("198.51.100.1"),
     XDP_PASS,
     EDGE_CTR_PASSED,
     EDGE_CTR_RULE_EXPIRED,
     NONE},
    {"unexpired block rule applies",
     {.rules = {{"198.51.100.1", EDGE_ACT_BLOCK, TTL_FUTURE}}},
     V4("198.51.100.1"),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     NONE,
     0},
    {"expired allow /32 falls back to block /8",
     {.rules = {BLOCK("10.0.0.0/8"),
		{"10.1.2.3", EDGE_ACT_ALLOW, TTL_EXPIRED}}},
     V4("10.1.2.3"),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     EDGE_CTR_RULE_EXPIRED,
     0},
    {"three expired layers fall back to block /8",
     {.rules = {BLOCK("10.0.0.0/8"),
		{"10.1.0.0/16", EDGE_ACT_ALLOW, TTL_EXPIRED},
		{"10.1.2.0/24", EDGE_ACT_ALLOW, TTL_EXPIRED},
		{"10.1.2.3/32", EDGE_ACT_ALLOW, TTL_EXPIRED}}},
     V4("10.1.2.3"),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     EDGE_CTR_RULE_EXPIRED,
     0},
    {"expired ipv6 block /128 falls back to allow /64 (allowlist)",
     {ALLOWLIST, .rules = {ALLOW("2001:db8:7::/64"),
			   {"2001:db8:7::9", EDGE_ACT_BLOCK, TTL_EXPIRED}}},
     V6("2001:db8:7::9"),
     XDP_PASS,
     EDGE_CTR_PASSED,
     EDGE_CTR_RULE_EXPIRED,
     0},
    {"expired /0 rule leaves no rule",
     {.rules = {{"0.0.0.0/0", EDGE_ACT_BLOCK, TTL_EXPIRED}}},
     V4("198.51.100.1"),
     XDP_PASS,
     EDGE_CTR_PASSED,
     EDGE_CTR_RULE_EXPIRED,
     NONE},

    /* ---- rate limits ---- */
    {"syn rate limit: burst 3 passes, 4th syn dropped",
     {.syn_rate = 1, .syn_burst = 3},
     V4("198.51.100.1", .tcp_flags = TCPF_SYN),
     XDP_DROP,
     EDGE_CTR_DROPPED_RATELIMIT,
     EDGE_CTR_RATELIMIT_SYN,
     NONE,
     5,
     3},
    {"syn rate limit does not count non-syn packets",
     {.syn_rate = 1, .syn_burst = 1},
     V4("198.51.100.1", .tcp_flags = TCPF_ACK),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     NONE,
     10,
     10},
    {"syn rate limit does not count syn-ack",
     {.syn_rate = 1, .syn_burst = 1},
     V4("198.51.100.1", .tcp_flags = TCPF_SYN | TCPF_ACK),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     NONE,
     10,
     10},
    {"quic: an Initial to a guarded port takes a SYN token",
     {.syn_rate = 1, .syn_burst = 2},
     V4("198.51.100.1", QUIC(quic_v1_initial)),
     XDP_DROP,
     EDGE_CTR_DROPPED_RATELIMIT,
     EDGE_CTR_RATELIMIT_QUIC,
     NONE,
     4,
     2},
    {"quic: a version 2 Initial too, over IPv6",
     {.syn_rate = 1, .syn_burst = 1},
     V6("2001:db8:5::1", QUIC(quic_v2_initial)),
     XDP_DROP,
     EDGE_CTR_DROPPED_RATELIMIT,
     EDGE_CTR_RATELIMIT_QUIC,
     NONE,
     3,
     1},
    {"quic: an Initial to an unguarded port is not a connection here",
     {.syn_rate = 1, .syn_burst = 1},
     V4("198.51.100.1", QUIC(quic_v1_initial), .dport = 4433),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     NONE,
     5,
     5},
    {"quic: Handshake packets do not count",
     {.syn_rate = 1, .syn_burst = 1},
     V4("198.51.100.1", QUIC(quic_v1_handshake)),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     NONE,
     5,
     5},
    {"quic: short-header packets do not count",
     {.syn_rate = 1, .syn_burst = 1},
     V4("198.51.100.1", QUIC(quic_short)),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     NONE,
     5,
     5},
    {"quic: a UDP first fragment to a guarded port counts (QUIC never "
     "fragments; an Initial may hide in it)",
     {.syn_rate = 1, .syn_burst = 1},
     V4("198.51.100.1", .proto = IPPROTO_UDP, .frag = FRAG_FIRST, .payload = 2),
     XDP_DROP,
     EDGE_CTR_DROPPED_RATELIMIT,
     EDGE_CTR_RATELIMIT_QUIC,
     NONE,
     3,
     1},
    {"quic: an IPv6 UDP first fragment too",
     {.syn_rate = 1, .syn_burst = 1},
     V6("2001:db8:5::1", .proto = IPPROTO_UDP, .ext = {EXT_FRAG_FIRST},
	.payload = 2),
     XDP_DROP,
     EDGE_CTR_DROPPED_RATELIMIT,
     EDGE_CTR_RATELIMIT_QUIC,
     NONE,
     3,
     1},
    {"quic: a UDP first fragment to an unguarded port does not",
     {.syn_rate = 1, .syn_burst = 1},
     V4("198.51.100.1", .proto = IPPROTO_UDP, .frag = FRAG_FIRST, .payload = 2,
	.dport = 53),
     XDP_PASS,
     EDGE_CTR_PASSED,
     EDGE_CTR_FRAGMENTS,
     NONE,
     3,
     3},
    {"quic: a datagram too short for a version passes",
     {.syn_rate = 1, .syn_burst = 1},
     V4("198.51.100.1", .proto = IPPROTO_UDP, .payload = 3,
	.head = quic_v1_initial, .head_len = 3),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     NONE,
     5,
     5},
    {"packet rate limit: burst 5 passes, then dropped",
     {.pkt_rate = 1, .pkt_burst = 5},
     V6("2001:db8:3::1", .proto = IPPROTO_UDP, .dport = 53),
     XDP_DROP,
     EDGE_CTR_DROPPED_RATELIMIT,
     EDGE_CTR_RATELIMIT_PKT,
     NONE,
     8,
     5},
    {"rate limit under the limit: all pass",
     {.pkt_rate = 1000, .pkt_burst = 100},
     V4("198.51.100.1", .proto = IPPROTO_UDP, .dport = 53),
     XDP_PASS,
     EDGE_CTR_PASSED,
     NONE,
     NONE,
     50,
     50},
    {"blocked source is not charged to the rate limit",
     {.pkt_rate = 1, .pkt_burst = 1, .rules = {BLOCK("198.51.100.1")}},
     V4("198.51.100.1"),
     XDP_DROP,
     EDGE_CTR_DROPPED_RULE,
     NONE,
     0,
     3,
     0},
};

/* ---- map helpers ---- */

static void clear_map(int fd, size_t key_size)
{
	unsigned char key[64], next[64];

	ck_assert_uint_le(key_size, sizeof(key));
	while (bpf_map_get_next_key(fd, NULL, next) == 0) {
		memcpy(key, next, key_size);
		if (bpf_map_delete_elem(fd, key) != 0)
			break;
	}
}

static uint64_t percpu_sum(int fd, __u32 idx)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *vals, sum = 0;
	int i;

	ck_assert_int_gt(ncpu, 0);
	vals = calloc((size_t)ncpu, sizeof(*vals));
	ck_assert_ptr_nonnull(vals);
	ck_assert_int_eq(bpf_map_lookup_elem(fd, &idx, vals), 0);
	for (i = 0; i < ncpu; i++)
		sum += vals[i];
	free(vals);
	return sum;
}

static void percpu_zero(int fd, __u32 idx)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *vals = calloc((size_t)ncpu, sizeof(*vals));

	ck_assert_ptr_nonnull(vals);
	ck_assert_int_eq(bpf_map_update_elem(fd, &idx, vals, BPF_ANY), 0);
	free(vals);
}

static uint64_t boot_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void add_rule(const struct rule_spec *rs, __u32 id)
{
	char buf[64], *slash;
	struct edge_rule val = {.id = id, .action = (__u8)rs->action};
	int plen, fd;

	snprintf(buf, sizeof(buf), "%s", rs->cidr);
	slash = strchr(buf, '/');
	if (slash)
		*slash = '\0';
	if (rs->ttl == TTL_EXPIRED)
		val.expires_ns = boot_ns() - 1000000000ULL;
	else if (rs->ttl == TTL_FUTURE)
		val.expires_ns = boot_ns() + 3600ULL * 1000000000ULL;

	if (strchr(buf, ':')) {
		struct edge_lpm_v6 k = {0};

		plen = slash ? atoi(slash + 1) : 128;
		ck_assert_int_eq(inet_pton(AF_INET6, buf, k.addr), 1);
		k.prefixlen = (__u32)plen;
		val.prefixlen = (__u8)plen;
		fd = bpf_map__fd(skel->maps.edge_rules_v6);
		ck_assert_int_eq(bpf_map_update_elem(fd, &k, &val, BPF_ANY), 0);
	} else {
		struct edge_lpm_v4 k = {0};

		plen = slash ? atoi(slash + 1) : 32;
		ck_assert_int_eq(inet_pton(AF_INET, buf, k.addr), 1);
		k.prefixlen = (__u32)plen;
		val.prefixlen = (__u8)plen;
		fd = bpf_map__fd(skel->maps.edge_rules_v4);
		ck_assert_int_eq(bpf_map_update_elem(fd, &k, &val, BPF_ANY), 0);
	}
}

static void rl_conf(struct edge_rl_conf *c, uint64_t rate, uint64_t burst)
{
	c->rate = rate;
	c->burst = burst;
	c->fill_ns = rate ? (burst * EDGE_RL_SCALE + rate - 1) / rate : 0;
}

static void apply_setup(const struct setup *s)
{
	static const uint16_t default_ports[] = {80, 443, 0};
	struct edge_config cfg = {.policy = (__u32)s->policy};
	const uint16_t *p;
	__u32 zero = 0, i;

	clear_map(bpf_map__fd(skel->maps.edge_rules_v4),
		  sizeof(struct edge_lpm_v4));
	clear_map(bpf_map__fd(skel->maps.edge_rules_v6),
		  sizeof(struct edge_lpm_v6));
	clear_map(bpf_map__fd(skel->maps.edge_ratelimit),
		  sizeof(struct edge_rl_key));
	for (i = 0; i < MAX_SETUP_RULES; i++)
		percpu_zero(bpf_map__fd(skel->maps.edge_rule_hits), i);
	for (i = 0; i < 65536; i++) {
		struct edge_port none = {0};

		bpf_map_update_elem(bpf_map__fd(skel->maps.edge_ports), &i,
				    &none, BPF_ANY);
	}
	for (p = s->ports ? s->ports : default_ports; *p; p++) {
		struct edge_port g = {.guarded = 1};
		__u32 k = *p;

		ck_assert_int_eq(
		    bpf_map_update_elem(bpf_map__fd(skel->maps.edge_ports), &k,
					&g, BPF_ANY),
		    0);
	}
	rl_conf(&cfg.syn, s->syn_rate, s->syn_burst);
	rl_conf(&cfg.pkt, s->pkt_rate, s->pkt_burst);
	ck_assert_int_eq(
	    bpf_map_update_elem(bpf_map__fd(skel->maps.edge_config), &zero,
				&cfg, BPF_ANY),
	    0);
	for (i = 0; i < MAX_SETUP_RULES && s->rules[i].cidr; i++)
		add_rule(&s->rules[i], i);
}

static int run_frame(const uint8_t *pkt, int len)
{
	uint8_t out[PKT_MAX];
	struct bpf_test_run_opts opts = {
	    .sz = sizeof(opts),
	    .data_in = pkt,
	    .data_size_in = (__u32)len,
	    .data_out = out,
	    .data_size_out = sizeof(out),
	    .repeat = 1,
	};

	ck_assert_int_eq(bpf_prog_test_run_opts(prog_fd, &opts), 0);
	return (int)opts.retval;
}

/* ---- the table ---- */

START_TEST(test_case)
{
	const struct xdp_case *c = &cases[_i];
	int ctr_fd = bpf_map__fd(skel->maps.edge_counters);
	int hits_fd = bpf_map__fd(skel->maps.edge_rule_hits);
	uint64_t before[EDGE_COUNTERS_SLOTS], after;
	uint8_t pkt[PKT_MAX];
	int len, runs = c->repeat ? c->repeat : 1, i, drops_expected = 0;
	__u32 k;

	apply_setup(&c->s);
	len = pkt_build(&c->f, pkt);
	ck_assert_msg(len >= 14, "%s: bad frame spec", c->name);
	for (k = 0; k < EDGE_CTR_MAX; k++)
		before[k] = percpu_sum(ctr_fd, k);

	for (i = 0; i < runs; i++) {
		int want = c->verdict;

		if (c->repeat)
			want = i < c->pass_first ? XDP_PASS : c->verdict;
		if (want == XDP_DROP)
			drops_expected++;
		ck_assert_msg(run_frame(pkt, len) == want,
			      "%s: run %d: verdict %s expected", c->name, i,
			      want == XDP_PASS ? "PASS" : "DROP");
	}

	/* The verdict counter moved by the runs with that verdict, every
	 * other verdict counter by the rest. */
	after = percpu_sum(ctr_fd, (__u32)c->ctr) - before[c->ctr];
	if (c->repeat && c->verdict == XDP_DROP)
		ck_assert_msg(after == (uint64_t)drops_expected,
			      "%s: counter %d moved by %llu, expected %d",
			      c->name, c->ctr, (unsigned long long)after,
			      drops_expected);
	else
		ck_assert_msg(after == (uint64_t)runs,
			      "%s: counter %d moved by %llu, expected %d",
			      c->name, c->ctr, (unsigned long long)after, runs);
	{
		uint64_t total = 0;
		static const int verdicts[] = {
		    EDGE_CTR_PASSED, EDGE_CTR_DROPPED_RULE,
		    EDGE_CTR_DROPPED_POLICY, EDGE_CTR_DROPPED_RATELIMIT,
		    EDGE_CTR_DROPPED_MALFORMED};

		for (k = 0; k < sizeof(verdicts) / sizeof(verdicts[0]); k++)
			total += percpu_sum(ctr_fd, (__u32)verdicts[k]) -
				 before[verdicts[k]];
		ck_assert_msg(
		    total == (uint64_t)runs,
		    "%s: verdict counters moved by %llu for %d frames", c->name,
		    (unsigned long long)total, runs);
	}
	if (c->extra_ctr != NONE)
		ck_assert_msg(percpu_sum(ctr_fd, (__u32)c->extra_ctr) >
				  before[c->extra_ctr],
			      "%s: counter %d did not move", c->name,
			      c->extra_ctr);
	if (c->extra_ctr != EDGE_CTR_MALFORMED)
		ck_assert_msg(percpu_sum(ctr_fd, EDGE_CTR_MALFORMED) ==
				  before[EDGE_CTR_MALFORMED],
			      "%s: counted as malformed", c->name);
	for (k = 0; k < MAX_SETUP_RULES && c->s.rules[k].cidr; k++) {
		uint64_t h = percpu_sum(hits_fd, k);

		if ((int)k == c->hit_rule)
			ck_assert_msg(h == (uint64_t)runs,
				      "%s: rule %u hits %llu, expected %d",
				      c->name, k, (unsigned long long)h, runs);
		else
			ck_assert_msg(h == 0, "%s: rule %u hit unexpectedly",
				      c->name, k);
	}
}
END_TEST

/* A drained bucket refills with time: 60/m is one token a second, so move
 * its timestamp 1.5 s back (not further: a fresh VM's boot clock may be
 * only seconds old, and the program reads a timestamp ahead of it as no
 * time elapsed). */
START_TEST(test_ratelimit_refill)
{
	struct setup s = {.syn_rate = 60, .syn_burst = 1};
	struct frame f = V4("198.51.100.1", .tcp_flags = TCPF_SYN);
	struct edge_rl_key key = {0};
	struct edge_rl_state st;
	uint8_t pkt[PKT_MAX];
	int len, fd;

	apply_setup(&s);
	len = pkt_build(&f, pkt);
	ck_assert_int_eq(run_frame(pkt, len), XDP_PASS);
	ck_assert_int_eq(run_frame(pkt, len), XDP_DROP);
	key.addr[10] = key.addr[11] = 0xff;
	inet_pton(AF_INET, "198.51.100.1", &key.addr[12]);
	fd = bpf_map__fd(skel->maps.edge_ratelimit);
	ck_assert_int_eq(bpf_map_lookup_elem(fd, &key, &st), 0);
	ck_assert_uint_gt(st.syn_ts, 1500000000ULL);
	st.syn_ts -= 1500000000ULL;
	ck_assert_int_eq(bpf_map_update_elem(fd, &key, &st, BPF_EXIST), 0);
	ck_assert_int_eq(run_frame(pkt, len), XDP_PASS);
	ck_assert_int_eq(run_frame(pkt, len), XDP_DROP);
}
END_TEST

/* IPv6 sources share a bucket per /64; another /64 has its own. */
START_TEST(test_ratelimit_ipv6_per_64)
{
	struct setup s = {.pkt_rate = 1, .pkt_burst = 2};
	struct frame a = V6("2001:db8:4::1"), b = V6("2001:db8:4::ffff:2"),
		     c = V6("2001:db8:4:1::1");
	uint8_t pa[PKT_MAX], pb[PKT_MAX], pc[PKT_MAX];
	int la, lb, lc;

	apply_setup(&s);
	la = pkt_build(&a, pa);
	lb = pkt_build(&b, pb);
	lc = pkt_build(&c, pc);
	ck_assert_int_eq(run_frame(pa, la), XDP_PASS);
	ck_assert_int_eq(run_frame(pb, lb), XDP_PASS);
	ck_assert_int_eq(run_frame(pa, la), XDP_DROP);
	ck_assert_int_eq(run_frame(pb, lb), XDP_DROP);
	ck_assert_int_eq(run_frame(pc, lc), XDP_PASS);
}
END_TEST

/* Every frame length from 14 to a full TCP SYN, under both policies: the
 * program never fails and counts every frame once. */
START_TEST(test_every_truncation)
{
	static const struct frame frames[] = {
	    V4("198.51.100.1", .ihl = 7, .vlan = {0x8100}),
	    V6("2001:db8::1", .ext = {EXT_HOP, EXT_ROUTING, EXT_FRAG_FIRST},
	       .vlan = {0x88a8, 0x8100}),
	};
	int ctr_fd = bpf_map__fd(skel->maps.edge_counters);
	uint8_t pkt[PKT_MAX];
	unsigned int fi;
	int policy;

	for (policy = 0; policy <= 1; policy++) {
		struct setup s = {.policy = policy};

		apply_setup(&s);
		for (fi = 0; fi < sizeof(frames) / sizeof(frames[0]); fi++) {
			int full = pkt_build(&frames[fi], pkt), len;

			for (len = 14; len < full; len++) {
				uint64_t b =
				    percpu_sum(ctr_fd, EDGE_CTR_MALFORMED);
				int v = run_frame(pkt, len);

				ck_assert_int_eq(
				    percpu_sum(ctr_fd, EDGE_CTR_MALFORMED),
				    b + 1);
				ck_assert_int_eq(v,
						 policy ? XDP_DROP : XDP_PASS);
			}
		}
	}
}
END_TEST

static Suite *xdp_suite(void)
{
	Suite *s = suite_create("xdp_prog");
	TCase *tc = tcase_create("table");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_case, 0,
			    (int)(sizeof(cases) / sizeof(cases[0])));
	tcase_add_test(tc, test_ratelimit_refill);
	tcase_add_test(tc, test_ratelimit_ipv6_per_64);
	tcase_add_test(tc, test_every_truncation);
	suite_add_tcase(s, tc);
	return s;
}

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_WARN && getenv("EDGE_DEBUG"))
		return vfprintf(stderr, fmt, ap);
	return 0;
}

int main(void)
{
	SRunner *sr;
	int failed;

	if (geteuid() != 0) {
		printf("skip - test_xdp_prog: needs root to load BPF\n");
		return 77;
	}
	libbpf_set_print(quiet);
	skel = edge_xdp__open_and_load();
	if (!skel) {
		fprintf(stderr, "test_xdp_prog: cannot load edge_xdp: %s\n",
			strerror(errno));
		return 1;
	}
	prog_fd = bpf_program__fd(skel->progs.edge_xdp);

	sr = srunner_create(xdp_suite());
	/* one process: the loaded program is shared by all cases */
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	edge_xdp__destroy(skel);
	return failed ? 1 : 0;
}
