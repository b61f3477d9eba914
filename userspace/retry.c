// SPDX-License-Identifier: BSD-2-Clause
/*
 * retry.c - a deployment's retry budget (retry.h).
 */
#include <stddef.h>
#include <string.h>

#include "retry.h"

#define RETRY_NS_PER_S 1000000000ULL

/* Deployment key's window (keyway.h). */
static struct retry_window *retry_find(struct retry_budgets *b, uint64_t key,
				       uint64_t now_ns, bool make)
{
	return keyway_find(b->w, sizeof(b->w[0]), RETRY_SETS, RETRY_WAYS, key,
			   now_ns, make);
}

/* The slot of the current second (emptied when it counted an older
 * one). */
static size_t retry_slot(struct retry_window *w, uint64_t now_ns)
{
	uint64_t sec = now_ns / RETRY_NS_PER_S + 1; /* 0: never used */
	size_t i = (size_t)(sec % RETRY_WINDOW_S);

	if (w->sec[i] != sec) {
		w->sec[i] = sec;
		w->requests[i] = 0;
		w->retries[i] = 0;
	}
	return i;
}

static void retry_sum(const struct retry_window *w, uint64_t now_ns,
		      uint64_t *requests, uint64_t *retries)
{
	uint64_t sec = now_ns / RETRY_NS_PER_S + 1;
	size_t i;

	*requests = 0;
	*retries = 0;
	for (i = 0; i < RETRY_WINDOW_S; i++)
		if (w->sec[i] && w->sec[i] + RETRY_WINDOW_S > sec) {
			*requests += w->requests[i];
			*retries += w->retries[i];
		}
}

void retry_budget_request(struct retry_budgets *b, uint64_t key,
			  uint64_t now_ns)
{
	struct retry_window *w = retry_find(b, key, now_ns, true);
	size_t i = retry_slot(w, now_ns);

	if (w->requests[i] < UINT32_MAX)
		w->requests[i]++;
}

bool retry_budget_take(struct retry_budgets *b, uint64_t key, unsigned pct,
		       uint64_t now_ns)
{
	struct retry_window *w = retry_find(b, key, now_ns, true);
	size_t i = retry_slot(w, now_ns);
	uint64_t req, ret;

	retry_sum(w, now_ns, &req, &ret);
	/* ret < req * pct / 100 + allowance, without the division */
	if (ret * 100 >= req * pct + 100ULL * RETRY_ALLOWANCE)
		return false;
	if (w->retries[i] < UINT32_MAX)
		w->retries[i]++;
	return true;
}

void retry_budget_counts(struct retry_budgets *b, uint64_t key, uint64_t now_ns,
			 uint64_t *requests, uint64_t *retries)
{
	const struct retry_window *w = retry_find(b, key, now_ns, false);

	*requests = 0;
	*retries = 0;
	if (w)
		retry_sum(w, now_ns, requests, retries);
}
