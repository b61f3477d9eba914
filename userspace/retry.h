/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * retry.h - a deployment's retry budget (Envoy's): retries may add at
 * most a share of the deployment's recent requests, so that a failing
 * deployment cannot multiply its own load.
 *
 * Per worker and pure with respect to time (callers pass now_ns,
 * CLOCK_MONOTONIC). A deployment is a 64-bit key (a hash of its id).
 * "Recent" is a sliding window of RETRY_WINDOW_S one-second slots: the
 * requests counted and the retries taken in the last RETRY_WINDOW_S
 * seconds. A retry is allowed while
 *   retries < requests * pct / 100 + RETRY_ALLOWANCE
 * (the allowance lets a quiet deployment retry at all). The table holds
 * RETRY_SETS x RETRY_WAYS deployments; the one used longest ago in a set
 * makes room (its counts start again at zero: a small leniency at worst).
 */
#ifndef EDGE_RETRY_H
#define EDGE_RETRY_H

#include <stdbool.h>
#include <stdint.h>

#include "keyway.h"

#define RETRY_WINDOW_S 10
#define RETRY_ALLOWANCE 3
#define RETRY_SETS 64
#define RETRY_WAYS 4

struct retry_window {
	struct keyway kw;	      /* first: its key and last use */
	uint64_t sec[RETRY_WINDOW_S]; /* the second each slot counts */
	uint32_t requests[RETRY_WINDOW_S];
	uint32_t retries[RETRY_WINDOW_S];
};

struct retry_budgets {
	struct retry_window w[RETRY_SETS * RETRY_WAYS];
};

/* One request of deployment key (its first attempt). */
void retry_budget_request(struct retry_budgets *b, uint64_t key,
			  uint64_t now_ns);

/* Whether deployment key may retry once more under a budget of pct
 * percent of its recent requests; when it may, the retry is counted. */
bool retry_budget_take(struct retry_budgets *b, uint64_t key, unsigned pct,
		       uint64_t now_ns);

/* The window's counts of deployment key (0 when unknown). */
void retry_budget_counts(struct retry_budgets *b, uint64_t key, uint64_t now_ns,
			 uint64_t *requests, uint64_t *retries);

#endif /* EDGE_RETRY_H */
