// SPDX-License-Identifier: BSD-2-Clause
/*
 * hedge.c - a deployment's recent times to a response head (hedge.h).
 */
#include <stdlib.h>
#include <string.h>

#include "hedge.h"

#define HEDGE_NS_PER_S 1000000000ULL

/* Deployment key's times (keyway.h), emptied when stale. */
static struct hedge_times *hedge_find(struct hedge_table *h, uint64_t key,
				      uint64_t now_ns, bool make)
{
	struct hedge_times *t = keyway_find(h->t, sizeof(h->t[0]), HEDGE_SETS,
					    HEDGE_WAYS, key, now_ns, make);

	if (t && t->n && now_ns > t->last + HEDGE_STALE_S * HEDGE_NS_PER_S) {
		t->n = 0;
		t->next = 0;
	}
	return t;
}

void hedge_sample(struct hedge_table *h, uint64_t key, uint64_t ns,
		  uint64_t now_ns)
{
	struct hedge_times *t = hedge_find(h, key, now_ns, true);
	uint64_t us = ns / 1000;

	t->us[t->next] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
	t->next = (t->next + 1) % HEDGE_SAMPLES;
	if (t->n < HEDGE_SAMPLES)
		t->n++;
	t->last = now_ns;
}

static int hedge_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

bool hedge_percentile(struct hedge_table *h, uint64_t key, unsigned pct,
		      uint64_t now_ns, uint64_t *ns)
{
	struct hedge_times *t = hedge_find(h, key, now_ns, false);
	uint32_t v[HEDGE_SAMPLES];
	size_t i;

	if (!t || t->n < HEDGE_MIN_SAMPLES || pct == 0 || pct > 100)
		return false;
	memcpy(v, t->us, t->n * sizeof(v[0]));
	qsort(v, t->n, sizeof(v[0]), hedge_cmp);
	/* nearest rank: the smallest time at least pct percent are within */
	i = ((size_t)t->n * pct + 99) / 100;
	*ns = (uint64_t)v[i ? i - 1 : 0] * 1000;
	return true;
}
