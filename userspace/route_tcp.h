/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * route_tcp.h - the TCP routes a route table carries (route.h: struct
 * route_tcp), as one immutable, reference-counted set that every
 * generation shares until the TCP routes themselves change (a project's
 * change builds a new generation, not a new set), with an index by
 * listen address and sni so that a connection finds its route in
 * O(log n) without allocating. route.c's; l4.c goes through route.h.
 */
#ifndef EDGE_ROUTE_TCP_H
#define EDGE_ROUTE_TCP_H

#include <stdbool.h>
#include <stddef.h>

#include "log.h"
#include "route.h"

struct route_tcp_set;

/*
 * A set of v[0..n) (copied; the order kept: route_tcp_set_at(i) is v[i]).
 * Refused with -EINVAL and err: more than ROUTE_TCP_MAX, a slot at or
 * above ROUTE_TCP_MAX or given twice, a (listen, sni) twice, an address
 * with a plain route (sni "") and any other route, an empty listen or
 * env_id. 0 with *out (one reference; NULL when n is 0), or -ENOMEM.
 */
int route_tcp_set_new(const struct route_tcp *v, size_t n,
		      struct route_tcp_set **out, struct errbuf *err);

/* Another reference (s may be NULL; returns s); drop one (the last frees
 * s; NULL is fine). */
struct route_tcp_set *route_tcp_set_get(struct route_tcp_set *s);
void route_tcp_set_put(struct route_tcp_set *s);

/* The number of routes (0 for NULL), and route i (NULL out of range). */
size_t route_tcp_set_n(const struct route_tcp_set *s);
const struct route_tcp *route_tcp_set_at(const struct route_tcp_set *s,
					 size_t i);

/* The routes on listen address listen (canonical text): 0 with *idx the
 * plain route's index, or with *passthrough set the index of one of its
 * TLS passthrough routes; -ENOENT when it has none. */
int route_tcp_set_addr(const struct route_tcp_set *s, const char *listen,
		       bool *passthrough, size_t *idx);

/* The TLS passthrough route on listen that server name (lowercase, ""
 * for none) picks: the one with that very sni, else the "*.SUFFIX" one
 * when name has exactly one label more than SUFFIX, else the "*" one.
 * 0 with *idx, or -ENOENT. */
int route_tcp_set_sni(const struct route_tcp_set *s, const char *listen,
		      const char *name, size_t *idx);

#endif /* EDGE_ROUTE_TCP_H */
