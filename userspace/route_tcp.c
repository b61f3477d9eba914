// SPDX-License-Identifier: BSD-2-Clause
/*
 * route_tcp.c - a route table's TCP routes (route_tcp.h): the routes in
 * the order their sources gave them, and an index of them sorted by
 * (listen, sni) that the lookups search.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "route_tcp.h"

struct route_tcp_set {
	atomic_uint ref;
	size_t n;
	struct route_tcp *v; /* as given */
	uint32_t *ord;	     /* indices of v by (listen, sni) */
};

static int rtt_cmp_key(const struct route_tcp *r, const char *listen,
		       const char *sni)
{
	int c = strcmp(r->listen, listen);

	return c ? c : strcmp(r->sni, sni);
}

static int rtt_cmp_ord(const void *a, const void *b, void *arg)
{
	const struct route_tcp *v = arg;
	const struct route_tcp *y = &v[*(const uint32_t *)b];

	return rtt_cmp_key(&v[*(const uint32_t *)a], y->listen, y->sni);
}

/* The first position in s->ord whose route is not below (listen, sni). */
static size_t rtt_lower(const struct route_tcp_set *s, const char *listen,
			const char *sni)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (rtt_cmp_key(&s->v[s->ord[mid]], listen, sni) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int rtt_find(const struct route_tcp_set *s, const char *listen,
		    const char *sni, size_t *idx)
{
	size_t p;

	if (!s)
		return -ENOENT;
	p = rtt_lower(s, listen, sni);
	if (p == s->n || rtt_cmp_key(&s->v[s->ord[p]], listen, sni))
		return -ENOENT;
	*idx = s->ord[p];
	return 0;
}

void route_tcp_set_put(struct route_tcp_set *s)
{
	if (!s ||
	    atomic_fetch_sub_explicit(&s->ref, 1, memory_order_acq_rel) != 1)
		return;
	free(s->v);
	free(s->ord);
	free(s);
}

struct route_tcp_set *route_tcp_set_get(struct route_tcp_set *s)
{
	if (s)
		atomic_fetch_add_explicit(&s->ref, 1, memory_order_relaxed);
	return s;
}

/* The index's neighbours checked: no (listen, sni) twice, and an address
 * with a plain route has no other. */
static int rtt_check(const struct route_tcp_set *s, struct errbuf *err)
{
	size_t i;

	for (i = 1; i < s->n; i++) {
		const struct route_tcp *a = &s->v[s->ord[i - 1]];
		const struct route_tcp *b = &s->v[s->ord[i]];

		if (strcmp(a->listen, b->listen))
			continue;
		if (strcmp(a->sni, b->sni) == 0) {
			errbuf_set(err, "route table: TCP route %s%s%s twice",
				   a->listen, a->sni[0] ? " sni " : "", a->sni);
			return -EINVAL;
		}
		if (!a->sni[0]) { /* "" sorts first */
			errbuf_set(err,
				   "route table: TCP route %s has a plain "
				   "route and one with sni %s",
				   a->listen, b->sni);
			return -EINVAL;
		}
	}
	return 0;
}

int route_tcp_set_new(const struct route_tcp *v, size_t n,
		      struct route_tcp_set **out, struct errbuf *err)
{
	struct route_tcp_set *s;
	unsigned char *used = NULL;
	size_t i;
	int rc = -ENOMEM;

	*out = NULL;
	if (n > ROUTE_TCP_MAX) {
		errbuf_set(err, "route table: %zu TCP routes (at most %d)", n,
			   ROUTE_TCP_MAX);
		return -EINVAL;
	}
	if (n == 0)
		return 0;
	s = calloc(1, sizeof(*s));
	used = calloc(ROUTE_TCP_MAX, 1);
	if (!s || !used)
		goto fail;
	atomic_init(&s->ref, 1);
	s->v = malloc(n * sizeof(*s->v));
	s->ord = malloc(n * sizeof(*s->ord));
	if (!s->v || !s->ord)
		goto fail;
	memcpy(s->v, v, n * sizeof(*v));
	s->n = n;
	for (i = 0; i < n; i++) {
		struct route_tcp *r = &s->v[i];

		/* strings from a caller's fixed arrays: terminated here */
		r->listen[sizeof(r->listen) - 1] = '\0';
		r->sni[sizeof(r->sni) - 1] = '\0';
		r->env_id[sizeof(r->env_id) - 1] = '\0';
		rc = -EINVAL;
		if (!r->listen[0] || !r->env_id[0]) {
			errbuf_set(err,
				   "route table: TCP route %zu without "
				   "a listen address or environment",
				   i);
			goto fail;
		}
		if (r->slot >= ROUTE_TCP_MAX || used[r->slot]) {
			errbuf_set(err,
				   "route table: TCP route %s: slot %u out "
				   "of range or taken",
				   r->listen, r->slot);
			goto fail;
		}
		used[r->slot] = 1;
		s->ord[i] = (uint32_t)i;
	}
	qsort_r(s->ord, n, sizeof(*s->ord), rtt_cmp_ord, s->v);
	rc = rtt_check(s, err);
	if (rc)
		goto fail;
	free(used);
	*out = s;
	return 0;
fail:
	if (rc == -ENOMEM)
		errbuf_set(err, "route table: out of memory");
	free(used);
	route_tcp_set_put(s);
	return rc;
}

size_t route_tcp_set_n(const struct route_tcp_set *s)
{
	return s ? s->n : 0;
}

const struct route_tcp *route_tcp_set_at(const struct route_tcp_set *s,
					 size_t i)
{
	return s && i < s->n ? &s->v[i] : NULL;
}

int route_tcp_set_addr(const struct route_tcp_set *s, const char *listen,
		       bool *passthrough, size_t *idx)
{
	size_t p;

	if (!s)
		return -ENOENT;
	p = rtt_lower(s, listen, "");
	if (p == s->n || strcmp(s->v[s->ord[p]].listen, listen))
		return -ENOENT;
	*idx = s->ord[p];
	*passthrough = s->v[*idx].sni[0] != '\0';
	return 0;
}

int route_tcp_set_sni(const struct route_tcp_set *s, const char *listen,
		      const char *name, size_t *idx)
{
	char wild[ROUTE_SNI_MAX + 3];
	const char *dot = strchr(name, '.');

	if (name[0] && rtt_find(s, listen, name, idx) == 0)
		return 0;
	if (dot && dot != name && dot[1] &&
	    (size_t)snprintf(wild, sizeof(wild), "*.%s", dot + 1) <
		sizeof(wild) &&
	    rtt_find(s, listen, wild, idx) == 0)
		return 0;
	return rtt_find(s, listen, "*", idx);
}
