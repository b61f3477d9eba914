/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * proxyproto.h - the PROXY protocol (HAProxy's proxy-protocol.txt,
 * versions 1 and 2): the header a load balancer puts before a
 * connection's first byte to say whose connection it is, read strictly
 * and bounded, and written for upstreams that want one.
 *
 * Pure functions on caller memory: no I/O, no allocation, no global
 * state, no other edge file (a libFuzzer target builds this file alone).
 *
 * Reading (pp_parse) takes the bytes received so far, from the
 * connection's first; it answers how long the header is once it is
 * whole, that more bytes are needed, or why they are no header. What is
 * refused, by reason:
 *
 *   PP_NOT_PROXY    neither signature: the first bytes are not "PROXY "
 *                   nor v2's 12 bytes
 *   PP_TOO_LONG     v1 without CRLF in 107 bytes; v2 longer than
 *                   PP_V2_MAX
 *   PP_BAD_V1       v1 not exactly "PROXY TCP4|TCP6 SRC DST SPORT
 *                   DPORT\r\n" (single spaces, addresses inet_pton takes
 *                   for the family, ports 0..65535 without leading
 *                   zeros) or "PROXY UNKNOWN...\r\n"
 *   PP_BAD_VERSION  v2 with a version other than 2 or a command other
 *                   than LOCAL and PROXY
 *   PP_BAD_FAMILY   v2 PROXY over UDP, or an unknown family or protocol
 *                   byte
 *   PP_BAD_LENGTH   v2's length shorter than its family's addresses
 *   PP_BAD_TLV      v2's TLVs not exactly filling the rest (a TLV past
 *                   the end)
 *
 * A v2 LOCAL (whatever its family byte) is the peer speaking for itself
 * (a load balancer's health check): pp_info.local. A v1 UNKNOWN and a v2
 * PROXY whose family is UNSPEC or UNIX are a client's connection whose
 * address the sender did not know: pp_info.unknown. An IPv4-mapped IPv6
 * address is given as IPv4. TLVs are checked for framing and otherwise
 * skipped.
 */
#ifndef EDGE_PROXYPROTO_H
#define EDGE_PROXYPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* A v1 header's longest, CRLF included (the specification's 107). */
#define PP_V1_MAX 107
/* A v2 header's longest edge reads: 16 bytes and 4080 of addresses and
 * TLVs (a load balancer's TLVs are tens of bytes; AWS's and Azure's a few
 * hundred). Longer: PP_TOO_LONG. */
#define PP_V2_MAX 4096
/* What pp_write writes at most. */
#define PP_WRITE_MAX 108

enum pp_result {
	PP_NEED_MORE = 0, /* a header's start: more bytes needed */
	PP_NOT_PROXY = -1,
	PP_TOO_LONG = -2,
	PP_BAD_V1 = -3,
	PP_BAD_VERSION = -4,
	PP_BAD_FAMILY = -5,
	PP_BAD_LENGTH = -6,
	PP_BAD_TLV = -7,
};

struct pp_info {
	unsigned version; /* 1 or 2 */
	bool local;	  /* LOCAL: the peer speaks for itself */
	bool unknown;	  /* a client whose address the sender did not know */
	/* the client's (src) and the address it connected to (dst):
	 * sockaddr_in or sockaddr_in6, port in network order; unset when
	 * local or unknown */
	struct sockaddr_storage src, dst;
	socklen_t src_len, dst_len;
};

/*
 * Read a header from buf[0..len) (the connection's first bytes). Returns
 * its length (> 0, at most PP_V2_MAX) with *out filled; PP_NEED_MORE when
 * buf is a header's beginning (len is then below the header's length, at
 * most PP_V2_MAX); or a negative enum pp_result: not one.
 */
int pp_parse(const uint8_t *buf, size_t len, struct pp_info *out);

/* A short, fixed text for result r ("not a PROXY protocol header"). */
const char *pp_reason(int r);

/*
 * Write a header of version (1 or 2) for a connection from src to dst
 * (sockaddr_in or sockaddr_in6; of different families, both written as
 * IPv6, the IPv4 one mapped) into buf, of at least PP_WRITE_MAX bytes;
 * src NULL or of another family (a Unix socket's peer): v1 "PROXY
 * UNKNOWN", v2 PROXY with family UNSPEC. Returns the length written, 0 for a
 * bad version.
 */
size_t pp_write(unsigned version, const struct sockaddr *src,
		const struct sockaddr *dst, uint8_t *buf);

/* Write a header of version for a connection edged makes on its own
 * behalf (a health check): v1 "PROXY UNKNOWN", v2 LOCAL. Returns the
 * length written (at most PP_WRITE_MAX), 0 for a bad version. */
size_t pp_write_local(unsigned version, uint8_t *buf);

#endif /* EDGE_PROXYPROTO_H */
