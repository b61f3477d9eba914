/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pktbuild.h - build Ethernet frames for BPF_PROG_TEST_RUN, with knobs for
 * every malformation the XDP parser must survive. Test-only, header-only.
 */
#ifndef EDGE_PKTBUILD_H
#define EDGE_PKTBUILD_H

#include <arpa/inet.h>
#include <linux/icmp.h>
#include <linux/icmpv6.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <stdint.h>
#include <string.h>

#define PKT_MAX 2048

enum pkt_frag {
	FRAG_NONE = 0,
	FRAG_FIRST, /* offset 0, more fragments */
	FRAG_LATER, /* offset > 0 */
};

/* Which IPv6 extension headers to chain before L4, in order. */
enum pkt_ext {
	EXT_END = 0,
	EXT_HOP = 1,
	EXT_DEST,
	EXT_ROUTING,
	EXT_FRAG_FIRST,
	EXT_FRAG_LATER,
	EXT_AUTH,
};

struct frame {
	uint16_t vlan[3];   /* TPIDs of tags, outermost first; 0 ends */
	uint16_t ethertype; /* 0: from family; set for ARP etc. */
	int family;	    /* 4 or 6 (0 with ethertype set: non-IP) */
	const char *src, *dst;
	int proto; /* IPPROTO_*; 0: TCP */
	uint16_t sport, dport;
	uint8_t tcp_flags; /* TH_* style bits: 0x02 SYN, 0x10 ACK */
	uint8_t icmp_type, icmp_code;
	int ihl;     /* IPv4 header words; 0: 5 */
	int version; /* 0: matches family */
	enum pkt_frag frag;
	uint8_t ext[12];     /* enum pkt_ext list, EXT_END-terminated */
	int doff;	     /* TCP data offset; 0: 5 */
	int ip_len_delta;    /* added to IPv4 tot_len / IPv6 payload_len */
	int truncate;	     /* > 0: cut the frame to this many bytes */
	int l4_cut;	     /* > 0: L4 header is only this many bytes */
	int payload;	     /* bytes of payload after L4 */
	const uint8_t *head; /* the payload's first head_len bytes (the
				rest 0x5a) */
	int head_len;
};

#define TCPF_SYN 0x02
#define TCPF_ACK 0x10

static inline uint16_t pkt_csum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint32_t s = 0;
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		s += (uint32_t)(b[i] << 8 | b[i + 1]);
	if (len & 1)
		s += (uint32_t)b[len - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return htons((uint16_t)~s);
}

/* Build f into out (PKT_MAX bytes); returns the frame length, or -1 on a
 * bad spec. Headers are written in a scratch buffer placed so that the IP
 * header (after 14 bytes of Ethernet) is 4-byte aligned. */
static inline int pkt_build_aligned(const struct frame *f, uint8_t *buf);

static inline int pkt_build(const struct frame *f, uint8_t *out)
{
	static union {
		uint64_t align;
		uint8_t b[PKT_MAX + 8];
	} scratch;
	int len = pkt_build_aligned(f, scratch.b + 2);

	if (len > 0)
		memcpy(out, scratch.b + 2, (size_t)len);
	return len;
}

static inline int pkt_build_aligned(const struct frame *f, uint8_t *buf)
{
	struct ethhdr *eth = (struct ethhdr *)buf;
	size_t off = sizeof(*eth), ip_off, l4_off, l4_len, end;
	int proto = f->proto ? f->proto : IPPROTO_TCP;
	uint8_t l4proto = (uint8_t)proto;
	int i;

	memset(buf, 0, PKT_MAX);
	memcpy(eth->h_dest, "\x02\x00\x00\x00\x00\x01", 6);
	memcpy(eth->h_source, "\x02\x00\x00\x00\x00\x02", 6);

	uint16_t inner = f->ethertype	  ? f->ethertype
			 : f->family == 6 ? ETH_P_IPV6
					  : ETH_P_IP;
	size_t type_off = 12; /* where the next EtherType goes */
	for (i = 0; i < 3 && f->vlan[i]; i++) {
		buf[type_off] = (uint8_t)(f->vlan[i] >> 8);
		buf[type_off + 1] = (uint8_t)f->vlan[i];
		buf[off] = 0;
		buf[off + 1] = (uint8_t)(10 + i); /* VID */
		type_off = off + 2;
		off += 4;
	}
	buf[type_off] = (uint8_t)(inner >> 8);
	buf[type_off + 1] = (uint8_t)inner;
	if (!f->family) {
		/* non-IP: an ARP-sized body */
		memset(buf + off, 0xab, 28);
		end = off + 28;
		goto out;
	}

	ip_off = off;
	if (f->family == 4) {
		struct iphdr *ip = (struct iphdr *)(buf + ip_off);
		int ihl = f->ihl ? f->ihl : 5;

		ip->version = f->version ? f->version : 4;
		ip->ihl = ihl & 0xf;
		ip->ttl = 64;
		ip->protocol = l4proto;
		if (inet_pton(AF_INET, f->src, &ip->saddr) != 1 ||
		    inet_pton(AF_INET, f->dst ? f->dst : "192.0.2.1",
			      &ip->daddr) != 1)
			return -1;
		if (f->frag == FRAG_FIRST)
			ip->frag_off = htons(0x2000);
		else if (f->frag == FRAG_LATER)
			ip->frag_off = htons(185); /* offset 1480 */
		l4_off = ip_off + (size_t)(ihl > 5 ? ihl : 5) * 4;
		/* options: NOPs then EOL */
		for (size_t o = ip_off + 20; o < l4_off; o++)
			buf[o] = 1;
	} else {
		struct ipv6hdr *ip6 = (struct ipv6hdr *)(buf + ip_off);
		uint8_t *nh = &ip6->nexthdr;

		ip6->version = f->version ? f->version : 6;
		ip6->hop_limit = 64;
		if (inet_pton(AF_INET6, f->src, &ip6->saddr) != 1 ||
		    inet_pton(AF_INET6, f->dst ? f->dst : "2001:db8::1",
			      &ip6->daddr) != 1)
			return -1;
		l4_off = ip_off + sizeof(*ip6);
		for (i = 0; i < 12 && f->ext[i]; i++) {
			uint8_t *h = buf + l4_off;

			switch (f->ext[i]) {
			case EXT_HOP:
				*nh = 0;
				h[1] = 0; /* 8 bytes: PadN */
				h[2] = 1;
				h[3] = 4;
				l4_off += 8;
				break;
			case EXT_DEST:
				*nh = 60;
				h[1] = 1; /* 16 bytes */
				h[2] = 1;
				h[3] = 12;
				l4_off += 16;
				break;
			case EXT_ROUTING:
				*nh = 43;
				h[1] = 2; /* 24 bytes, type 0 segs 0 */
				l4_off += 24;
				break;
			case EXT_FRAG_FIRST:
				*nh = 44;
				h[3] = 1; /* offset 0, M=1 */
				l4_off += 8;
				break;
			case EXT_FRAG_LATER:
				*nh = 44;
				h[2] = 0x05; /* offset 0x5c8 >> 3 */
				h[3] = 0xc8;
				l4_off += 8;
				break;
			case EXT_AUTH:
				*nh = 51;
				h[1] = 4; /* (4 + 2) * 4 = 24 bytes */
				l4_off += 24;
				break;
			default:
				return -1;
			}
			nh = h;
		}
		*nh = l4proto;
	}

	l4_len = 0;
	if (proto == IPPROTO_TCP) {
		struct tcphdr *th = (struct tcphdr *)(buf + l4_off);

		th->source = htons(f->sport ? f->sport : 40000);
		th->dest = htons(f->dport);
		th->doff = (uint16_t)(f->doff ? f->doff : 5);
		th->syn = !!(f->tcp_flags & TCPF_SYN);
		th->ack = !!(f->tcp_flags & TCPF_ACK);
		th->window = htons(65535);
		l4_len = sizeof(*th);
	} else if (proto == IPPROTO_UDP) {
		struct udphdr *uh = (struct udphdr *)(buf + l4_off);

		uh->source = htons(f->sport ? f->sport : 40000);
		uh->dest = htons(f->dport);
		uh->len = htons((uint16_t)(sizeof(*uh) + (size_t)f->payload));
		l4_len = sizeof(*uh);
	} else if (proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6) {
		buf[l4_off] = f->icmp_type;
		buf[l4_off + 1] = f->icmp_code;
		l4_len = 8;
	}
	if (f->frag == FRAG_LATER ||
	    (f->ext[0] && memchr(f->ext, EXT_FRAG_LATER, sizeof(f->ext))))
		l4_len = 0; /* a later fragment carries payload only */
	if (f->l4_cut > 0)
		l4_len = (size_t)f->l4_cut;
	end = l4_off + l4_len + (size_t)f->payload;
	memset(buf + l4_off + l4_len, 0x5a, (size_t)f->payload);
	if (f->head)
		memcpy(buf + l4_off + l4_len, f->head,
		       (size_t)(f->head_len < f->payload ? f->head_len
							 : f->payload));

	if (f->family == 4) {
		struct iphdr *ip = (struct iphdr *)(buf + ip_off);

		ip->tot_len =
		    htons((uint16_t)(end - ip_off + (size_t)f->ip_len_delta));
		ip->check = 0;
		ip->check =
		    pkt_csum(ip, (size_t)(ip->ihl < 5 ? 20 : ip->ihl * 4));
	} else {
		struct ipv6hdr *ip6 = (struct ipv6hdr *)(buf + ip_off);

		ip6->payload_len =
		    htons((uint16_t)(end - ip_off - sizeof(*ip6) +
				     (size_t)f->ip_len_delta));
	}
out:
	/* Ethernet pads to 60 bytes: the parser must trust IP lengths */
	if (end < 60)
		end = 60;
	if (f->truncate > 0 && (size_t)f->truncate < end)
		end = (size_t)f->truncate;
	return (int)end;
}

#endif /* EDGE_PKTBUILD_H */
