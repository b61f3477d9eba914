/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * trusted.c - the set of trusted proxies: strict parsing through cidr.h,
 * and a linear membership test (a few entries to a few hundred, each a
 * memcmp of at most 16 bytes).
 */
#include <errno.h>
#include <sys/socket.h>

#include "trusted.h"

int trusted_add(struct trusted *t, const char *s, struct errbuf *note,
		struct errbuf *err)
{
	char a[CIDR_STR_MAX];
	unsigned notes = 0;
	struct cidr c;
	size_t i;

	errbuf_clear(note);
	if (cidr_parse(s, &c, &notes, err) < 0)
		return -EINVAL;
	cidr_format(&c, a, sizeof(a));
	for (i = 0; i < t->n; i++)
		if (cidr_equal(&t->v[i], &c)) {
			errbuf_set(err, "%s is listed twice", a);
			return -EINVAL;
		}
	if (t->n >= TRUSTED_MAX) {
		errbuf_set(err, "more than %d entries", TRUSTED_MAX);
		return -EINVAL;
	}
	t->v[t->n++] = c;
	if (c.prefixlen == 0)
		errbuf_set(note,
			   "%s trusts every %s peer: any such client can say "
			   "who it is",
			   a, c.family == AF_INET ? "IPv4" : "IPv6");
	else if (notes & CIDR_NOTE_HOST_BITS)
		errbuf_set(note, "\"%s\" has host bits set; using %s", s, a);
	else if (notes & CIDR_NOTE_MAPPED)
		errbuf_set(note, "\"%s\" is IPv4-mapped; using %s", s, a);
	return 0;
}

bool trusted_has(const struct trusted *t, const struct cidr *a)
{
	size_t i;

	if (a->family != AF_INET && a->family != AF_INET6)
		return false;
	for (i = 0; i < t->n; i++)
		if (cidr_contains(&t->v[i], a))
			return true;
	return false;
}
