/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * kcache.h - a small per-thread cache of decisions: entries keyed by a
 * kind, an owner id (a gate's, never reused) and key bytes, each with a
 * deadline and a value. A worker's thread keeps its own (no locks);
 * lookups hash the key (SipHash) and then compare it whole.
 *
 * KCACHE_SETS x KCACHE_WAYS entries per thread; a key longer than
 * KCACHE_KEY_MAX is never kept. The oldest entry of a set makes room.
 */
#ifndef EDGE_KCACHE_H
#define EDGE_KCACHE_H

#include <stddef.h>
#include <stdint.h>

#define KCACHE_SETS 256
#define KCACHE_WAYS 4
#define KCACHE_KEY_MAX 4096

/* What the entries are (one cache holds both). */
enum kcache_kind {
	KCACHE_JWT = 1,	    /* an admitted token: the fields it adds */
	KCACHE_FORWARD = 2, /* a forward auth's admission: its fields */
};

enum kcache_found {
	KCACHE_MISS = 0,
	KCACHE_HIT = 1,	    /* *val: a malloc'd copy (NUL-terminated) */
	KCACHE_EXPIRED = 2, /* found past its deadline: now forgotten */
};

/*
 * Look key (n bytes) up under kind and owner at time now (seconds, any
 * clock the adder used). HIT gives the value in *val (NULL when vlen is
 * 0) and *vlen; the caller frees *val. Out of memory reads as a miss.
 */
enum kcache_found kcache_find(enum kcache_kind kind, uint64_t owner,
			      const void *key, size_t n, double now, char **val,
			      size_t *vlen);

/* Keep key's value (vlen bytes, copied) until time until (< 0: no
 * deadline). Nothing kept when out of memory or key is too long. */
void kcache_add(enum kcache_kind kind, uint64_t owner, const void *key,
		size_t n, double until, const char *val, size_t vlen);

#endif /* EDGE_KCACHE_H */
