// SPDX-License-Identifier: BSD-2-Clause
/*
 * keyway.c - a set-associative table keyed by a hash (keyway.h).
 */
#include <string.h>

#include "keyway.h"

void *keyway_find(void *table, size_t size, size_t sets, size_t ways,
		  uint64_t key, uint64_t now_ns, bool make)
{
	char *set;
	struct keyway *e, *old;
	size_t i;

	if (key == 0)
		key = 1; /* 0 marks an unused entry */
	set = (char *)table + (key % sets) * ways * size;
	old = (struct keyway *)set;
	for (i = 0; i < ways; i++) {
		e = (struct keyway *)(set + i * size);
		if (e->key == key) {
			e->seen = now_ns;
			return e;
		}
		if (e->key == 0 || e->seen < old->seen)
			old = e;
		if (e->key == 0)
			break;
	}
	if (!make)
		return NULL;
	memset(old, 0, size);
	old->key = key;
	old->seen = now_ns;
	return old;
}
