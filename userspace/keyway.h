// SPDX-License-Identifier: BSD-2-Clause
/*
 * keyway.h - a worker's small table of entries keyed by a 64-bit hash (a
 * deployment's): set-associative, the least recently used entry of a full
 * set taken over. The retry budgets, the circuits and the hedges' times
 * keep one each.
 */
#ifndef EDGE_KEYWAY_H
#define EDGE_KEYWAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The head of every entry (its first member). */
struct keyway {
	uint64_t key;  /* 0: unused */
	uint64_t seen; /* ns: last use, the eviction order in its set */
};

/*
 * The entry of key (0 is taken as 1) in table, sets * ways entries of
 * size bytes each beginning with its struct keyway, its seen set to
 * now_ns. Unknown: when make, the set's first unused or least recently
 * used entry, zeroed and given key; else NULL.
 */
void *keyway_find(void *table, size_t size, size_t sets, size_t ways,
		  uint64_t key, uint64_t now_ns, bool make);

#endif
