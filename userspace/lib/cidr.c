/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cidr.c - strict IPv4/IPv6 prefix parsing.
 *
 * IPv4 is parsed by hand so that each mistake gets its own message; IPv6
 * goes through inet_pton, which is strict already, with a few checks in
 * front so that the message still says what looked wrong.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "cidr.h"

static const uint8_t cidr_mapped_prefix[12] = {0, 0, 0, 0, 0,	 0,
					       0, 0, 0, 0, 0xff, 0xff};

unsigned cidr_family_bits(const struct cidr *c)
{
	return c->family == AF_INET ? 32 : 128;
}

/* Clear the bits after prefixlen; returns whether any was set. */
static bool cidr_mask(uint8_t *addr, unsigned bits, unsigned prefixlen)
{
	bool changed = false;
	unsigned i;

	for (i = 0; i < bits / 8; i++) {
		unsigned keep = 0;
		uint8_t mask;

		if (prefixlen >= (i + 1) * 8)
			keep = 8;
		else if (prefixlen > i * 8)
			keep = prefixlen - i * 8;
		mask = keep ? (uint8_t)(0xff << (8 - keep)) : 0;
		if (addr[i] & ~mask)
			changed = true;
		addr[i] &= mask;
	}
	return changed;
}

static int cidr_parse_v4(const char *s, uint8_t addr[4], struct errbuf *err)
{
	const char *p = s;
	int octet;

	for (octet = 0; octet < 4; octet++) {
		unsigned v = 0;
		const char *start = p;

		if (octet > 0) {
			if (*p != '.') {
				errbuf_set(err,
					   "'%s': an IPv4 address needs 4 "
					   "octets separated by dots",
					   s);
				return -EINVAL;
			}
			start = ++p;
		}
		if (!isdigit((unsigned char)*p)) {
			if (octet == 0)
				errbuf_set(err,
					   "'%s': not an IPv4 or IPv6 address",
					   s);
			else if (*p == '\0' || *p == '.')
				errbuf_set(err,
					   "'%s': an IPv4 address needs 4 "
					   "octets separated by dots",
					   s);
			else
				errbuf_set(err,
					   "'%s': unexpected character '%c' "
					   "in IPv4 address",
					   s, *p);
			return -EINVAL;
		}
		while (isdigit((unsigned char)*p)) {
			v = v * 10 + (unsigned)(*p - '0');
			p++;
			if (p - start > 3) {
				errbuf_set(err,
					   "'%s': octet '%.*s...' out of "
					   "range (0-255)",
					   s, 4, start);
				return -EINVAL;
			}
		}
		if (p - start > 1 && *start == '0') {
			errbuf_set(err,
				   "'%s': octet '%.*s' has a leading zero "
				   "(ambiguous: octal or decimal?)",
				   s, (int)(p - start), start);
			return -EINVAL;
		}
		if (v > 255) {
			errbuf_set(err, "'%s': octet %u out of range (0-255)",
				   s, v);
			return -EINVAL;
		}
		addr[octet] = (uint8_t)v;
	}
	if (*p == '.') {
		errbuf_set(err, "'%s': an IPv4 address has only 4 octets", s);
		return -EINVAL;
	}
	if (*p != '\0') {
		errbuf_set(err,
			   "'%s': unexpected character '%c' in IPv4 "
			   "address",
			   s, *p);
		return -EINVAL;
	}
	return 0;
}

static int cidr_parse_v6(const char *s, uint8_t addr[16], struct errbuf *err)
{
	const char *p;

	for (p = s; *p; p++) {
		if (*p == '%') {
			errbuf_set(err,
				   "'%s': zone ids ('%%...') are not allowed "
				   "in rules",
				   s);
			return -EINVAL;
		}
		if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.') {
			errbuf_set(err,
				   "'%s': unexpected character '%c' in IPv6 "
				   "address",
				   s, *p);
			return -EINVAL;
		}
	}
	if (inet_pton(AF_INET6, s, addr) != 1) {
		errbuf_set(err, "'%s': not a valid IPv6 address", s);
		return -EINVAL;
	}
	return 0;
}

static int cidr_parse_prefixlen(const char *whole, const char *p, unsigned max,
				unsigned *out, struct errbuf *err)
{
	size_t n = strlen(p);
	unsigned v = 0;
	size_t i;

	if (n == 0) {
		errbuf_set(err, "'%s': missing prefix length after '/'", whole);
		return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		if (!isdigit((unsigned char)p[i])) {
			errbuf_set(err,
				   "'%s': prefix length '%s' is not a "
				   "decimal number",
				   whole, p);
			return -EINVAL;
		}
	}
	if (n > 1 && p[0] == '0') {
		errbuf_set(err, "'%s': prefix length '%s' has a leading zero",
			   whole, p);
		return -EINVAL;
	}
	if (n > 3) {
		errbuf_set(err,
			   "'%s': prefix length %s too long (max %u for "
			   "IPv%d)",
			   whole, p, max, max == 32 ? 4 : 6);
		return -EINVAL;
	}
	for (i = 0; i < n; i++)
		v = v * 10 + (unsigned)(p[i] - '0');
	if (v > max) {
		errbuf_set(err,
			   "'%s': prefix length %u too long (max %u for IPv%d)",
			   whole, v, max, max == 32 ? 4 : 6);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

int cidr_parse(const char *s, struct cidr *out, unsigned *notes,
	       struct errbuf *err)
{
	char buf[CIDR_INPUT_MAX + 1];
	unsigned prefixlen, max, nt = 0;
	struct cidr c;
	char *slash;
	size_t n, i;
	int ret;

	if (notes)
		*notes = 0;
	if (!s || !*s) {
		errbuf_set(err, "empty address");
		return -EINVAL;
	}
	n = strlen(s);
	if (n > CIDR_INPUT_MAX) {
		errbuf_set(err, "'%.20s...': too long for an address", s);
		return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		if (isspace((unsigned char)s[i])) {
			errbuf_set(err, "'%s': contains whitespace", s);
			return -EINVAL;
		}
		if (!isprint((unsigned char)s[i])) {
			errbuf_set(err, "address contains a control or "
					"non-ASCII character");
			return -EINVAL;
		}
	}
	memcpy(buf, s, n + 1);
	slash = strchr(buf, '/');
	if (slash) {
		*slash = '\0';
		if (strchr(slash + 1, '/')) {
			errbuf_set(err, "'%s': more than one '/'", s);
			return -EINVAL;
		}
	}
	if (buf[0] == '\0') {
		errbuf_set(err, "'%s': missing address before '/'", s);
		return -EINVAL;
	}

	memset(&c, 0, sizeof(c));
	if (strchr(buf, ':')) {
		c.family = AF_INET6;
		max = 128;
		ret = cidr_parse_v6(buf, c.addr, err);
	} else {
		c.family = AF_INET;
		max = 32;
		ret = cidr_parse_v4(buf, c.addr, err);
	}
	if (ret)
		return ret;

	prefixlen = max;
	if (slash) {
		ret = cidr_parse_prefixlen(s, slash + 1, max, &prefixlen, err);
		if (ret)
			return ret;
	}
	c.prefixlen = (uint8_t)prefixlen;

	if (c.family == AF_INET6 && c.prefixlen >= 96 &&
	    memcmp(c.addr, cidr_mapped_prefix, 12) == 0) {
		uint8_t v4[4];

		memcpy(v4, c.addr + 12, 4);
		memset(c.addr, 0, sizeof(c.addr));
		memcpy(c.addr, v4, 4);
		c.family = AF_INET;
		c.prefixlen = (uint8_t)(c.prefixlen - 96);
		nt |= CIDR_NOTE_MAPPED;
	}
	if (cidr_mask(c.addr, cidr_family_bits(&c), c.prefixlen))
		nt |= CIDR_NOTE_HOST_BITS;

	*out = c;
	if (notes)
		*notes = nt;
	return 0;
}

int cidr_parse_addr(const char *s, struct cidr *out, struct errbuf *err)
{
	if (s && strchr(s, '/')) {
		errbuf_set(err, "'%s': expected an address, not a prefix", s);
		return -EINVAL;
	}
	return cidr_parse(s, out, NULL, err);
}

char *cidr_format_addr(const struct cidr *c, char *buf, size_t len)
{
	if (!inet_ntop(c->family == AF_INET ? AF_INET : AF_INET6, c->addr, buf,
		       (socklen_t)len))
		snprintf(buf, len, "?");
	return buf;
}

char *cidr_format(const struct cidr *c, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN];

	cidr_format_addr(c, a, sizeof(a));
	snprintf(buf, len, "%s/%u", a, c->prefixlen);
	return buf;
}

bool cidr_equal(const struct cidr *a, const struct cidr *b)
{
	return a->family == b->family && a->prefixlen == b->prefixlen &&
	       memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

bool cidr_contains(const struct cidr *net, const struct cidr *c)
{
	unsigned full, rest;

	if (net->family != c->family || net->prefixlen > c->prefixlen)
		return false;
	full = net->prefixlen / 8;
	rest = net->prefixlen % 8;
	if (memcmp(net->addr, c->addr, full) != 0)
		return false;
	if (rest) {
		uint8_t mask = (uint8_t)(0xff << (8 - rest));

		if ((net->addr[full] & mask) != (c->addr[full] & mask))
			return false;
	}
	return true;
}
