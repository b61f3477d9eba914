/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * trusted.h - the peers edged trusts to speak for their clients (the
 * setting trusted_proxies): a bounded set of IPv4 and IPv6 prefixes, read
 * with cidr.h's strict parser, and the test of a peer against it.
 *
 * A fixed array rather than an allocation, so that a struct copy (the
 * workers' settings) owns its entries and a reload needs no hand-over.
 * Pure functions: no I/O, no global state.
 */
#ifndef EDGE_TRUSTED_H
#define EDGE_TRUSTED_H

#include <stdbool.h>
#include <stddef.h>

#include "cidr.h"
#include "log.h"

/* Most entries a set holds. */
#define TRUSTED_MAX 256

/* The set: v[0..n), each a prefix as cidr_parse gives it (an IPv4-mapped
 * IPv6 prefix of length >= 96 is kept as IPv4), no two the same. Zeroed:
 * empty, trusting no peer. */
struct trusted {
	size_t n;
	struct cidr v[TRUSTED_MAX];
};

/*
 * Add the prefix s ("10.0.0.0/8", "2001:db8::/32", or an address: a /32
 * or /128) to t. Refused, with err saying why: what cidr_parse refuses,
 * a prefix already in t ("10.0.0.0/8 is listed twice"), more than
 * TRUSTED_MAX entries. note (may be NULL; "" when there is nothing to
 * say) tells what is accepted but worth a warning: host bits cleared, an
 * IPv4-mapped prefix taken as IPv4, or a /0 (every peer of a family may
 * then say who its client is). Returns 0 or -EINVAL; t is unchanged on
 * error.
 */
int trusted_add(struct trusted *t, const char *s, struct errbuf *note,
		struct errbuf *err);

/* Whether peer address a (a /32 or /128 from cidr_parse_addr, so an
 * IPv4-mapped peer is IPv4) is inside one of t's prefixes. A zeroed a
 * (family 0: an address that could not be read) is never trusted. */
bool trusted_has(const struct trusted *t, const struct cidr *a);

#endif /* EDGE_TRUSTED_H */
