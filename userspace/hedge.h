// SPDX-License-Identifier: BSD-2-Clause
/*
 * hedge.h - a deployment's recent times to a response head, per worker,
 * for hedging by percentile (config.h's struct config_hedge, pct).
 *
 * Pure with respect to time (callers pass now_ns, CLOCK_MONOTONIC). A
 * deployment is a 64-bit key (a hash of its id, keyway.h). Each keeps
 * its last HEDGE_SAMPLES times in a ring; a deployment with no sample
 * for HEDGE_STALE_S seconds starts again from none. A percentile is
 * known once HEDGE_MIN_SAMPLES times are kept: until then, no hedging
 * by percentile. The table holds HEDGE_SETS x HEDGE_WAYS deployments.
 */
#ifndef EDGE_HEDGE_H
#define EDGE_HEDGE_H

#include <stdbool.h>
#include <stdint.h>

#include "keyway.h"

#define HEDGE_SAMPLES 128
#define HEDGE_MIN_SAMPLES 20
#define HEDGE_STALE_S 60
#define HEDGE_SETS 32
#define HEDGE_WAYS 4
/* The budget hedges take from when the deployment has no retry group:
 * percent of its recent requests (retry.h). */
#define HEDGE_BUDGET_DEFAULT_PCT 20

struct hedge_times {
	struct keyway kw; /* first: its key and last use */
	uint64_t last;	  /* ns: the last sample's time */
	uint32_t n;	  /* samples kept, at most HEDGE_SAMPLES */
	uint32_t next;	  /* the ring's next slot */
	uint32_t us[HEDGE_SAMPLES];
};

struct hedge_table {
	struct hedge_times t[HEDGE_SETS * HEDGE_WAYS];
};

/* One response head of deployment key, ns after its attempt began. */
void hedge_sample(struct hedge_table *h, uint64_t key, uint64_t ns,
		  uint64_t now_ns);

/* The pct-th percentile (1..100) of deployment key's kept times into
 * *ns: true, or false while fewer than HEDGE_MIN_SAMPLES are kept. */
bool hedge_percentile(struct hedge_table *h, uint64_t key, unsigned pct,
		      uint64_t now_ns, uint64_t *ns);

#endif
