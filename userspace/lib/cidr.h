/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cidr.h - strict parsing and formatting of IPv4/IPv6 prefixes.
 *
 * Pure functions: no I/O, no global state.
 */
#ifndef EDGE_CIDR_H
#define EDGE_CIDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

/* Longest accepted input, and a buffer that holds any formatted prefix. */
#define CIDR_INPUT_MAX 64
#define CIDR_STR_MAX 64

/* Notes cidr_parse reports about how it normalised its input. */
#define CIDR_NOTE_HOST_BITS 0x1 /* bits after the prefix were cleared */
#define CIDR_NOTE_MAPPED 0x2	/* ::ffff:a.b.c.d became an IPv4 prefix */

/* A prefix: family AF_INET or AF_INET6, the address in network byte order
 * (IPv4 in addr[0..3], the rest zero), prefixlen 0..32 or 0..128. Always
 * normalised: no bit set after prefixlen. */
struct cidr {
	uint8_t family;
	uint8_t prefixlen;
	uint8_t addr[16];
};

/*
 * Parse "ADDR" or "ADDR/LEN" into *out. A bare address is a /32 or /128.
 * Strict: rejects empty input, whitespace, IPv4 with other than four
 * decimal octets 0..255 or with leading zeros, prefix lengths that are not
 * plain decimal (no sign, no leading zero) or too long for the family.
 * Host bits after the prefix are cleared (CIDR_NOTE_HOST_BITS); an
 * IPv4-mapped IPv6 prefix of length >= 96 becomes the IPv4 prefix
 * (CIDR_NOTE_MAPPED). notes may be NULL. Returns 0, or -EINVAL with err
 * saying what was wrong.
 */
int cidr_parse(const char *s, struct cidr *out, unsigned *notes,
	       struct errbuf *err);

/* Parse a bare address (no "/LEN"); IPv4-mapped IPv6 becomes IPv4.
 * Returns 0 or -EINVAL with err set. */
int cidr_parse_addr(const char *s, struct cidr *out, struct errbuf *err);

/* Write "ADDR/LEN" (canonical text; inet_ntop for IPv6) into buf, which
 * should hold CIDR_STR_MAX bytes. Returns buf. */
char *cidr_format(const struct cidr *c, char *buf, size_t len);

/* Write only the address into buf. Returns buf. */
char *cidr_format_addr(const struct cidr *c, char *buf, size_t len);

/* Whether a and b are the same prefix. */
bool cidr_equal(const struct cidr *a, const struct cidr *b);

/* Whether net covers every address of c (same family, net->prefixlen <=
 * c->prefixlen and the first net->prefixlen bits equal). */
bool cidr_contains(const struct cidr *net, const struct cidr *c);

/* Number of address bits of the family: 32 or 128. */
unsigned cidr_family_bits(const struct cidr *c);

#endif /* EDGE_CIDR_H */
