// SPDX-License-Identifier: BSD-2-Clause
/*
 * circuit.c - a deployment's circuit breaker (circuit.h).
 */
#include <stddef.h>
#include <string.h>

#include "circuit.h"
#include "lib/config_check.h"

#define CIRCUIT_NS_PER_MS 1000000ULL

/* Deployment key's circuit (keyway.h). */
static struct circuit *circuit_find(struct circuits *cs, uint64_t key,
				    uint64_t now_ns, bool make)
{
	return keyway_find(cs->c, sizeof(cs->c[0]), CIRCUIT_SETS, CIRCUIT_WAYS,
			   key, now_ns, make);
}

/* Empty c's window, its slots width ns wide from now on. */
static void circuit_clear(struct circuit *c, uint64_t width)
{
	memset(c->slot, 0, sizeof(c->slot));
	memset(c->requests, 0, sizeof(c->requests));
	memset(c->failures, 0, sizeof(c->failures));
	c->width = width ? width : 1;
}

/* The slot of now (emptied when it counted an older one); a new window
 * width empties them all. */
static size_t circuit_slot(struct circuit *c, uint64_t width, uint64_t now_ns)
{
	uint64_t n;
	size_t i;

	if (c->width != width)
		circuit_clear(c, width);
	n = now_ns / c->width + 1; /* 0: never used */
	i = (size_t)(n % CIRCUIT_SLOTS);
	if (c->slot[i] != n) {
		c->slot[i] = n;
		c->requests[i] = 0;
		c->failures[i] = 0;
	}
	return i;
}

static void circuit_sum(const struct circuit *c, uint64_t now_ns,
			uint64_t *requests, uint64_t *failures)
{
	uint64_t n = now_ns / c->width + 1;
	size_t i;

	*requests = 0;
	*failures = 0;
	for (i = 0; i < CIRCUIT_SLOTS; i++)
		if (c->slot[i] && c->slot[i] + CIRCUIT_SLOTS > n) {
			*requests += c->requests[i];
			*failures += c->failures[i];
		}
}

static uint64_t circuit_width(const struct config_circuit *cfg)
{
	return cfg->window_ms * CIRCUIT_NS_PER_MS / CIRCUIT_SLOTS;
}

static void circuit_open(struct circuit *c, const struct config_circuit *cfg,
			 uint64_t now_ns)
{
	c->state = CIRCUIT_OPEN;
	c->trial = false;
	c->until = now_ns + cfg->open_for_ms * CIRCUIT_NS_PER_MS;
}

bool circuit_admit(struct circuits *cs, uint64_t key, uint64_t now_ns,
		   bool *trial, uint64_t *wait_ms)
{
	struct circuit *c = circuit_find(cs, key, now_ns, true);

	*trial = false;
	*wait_ms = 0;
	if (c->state == CIRCUIT_OPEN) {
		if (now_ns < c->until) {
			*wait_ms = (c->until - now_ns + CIRCUIT_NS_PER_MS - 1) /
				   CIRCUIT_NS_PER_MS;
			return false;
		}
		c->state = CIRCUIT_HALF_OPEN;
		c->trial = false;
	}
	if (c->state == CIRCUIT_HALF_OPEN) {
		if (c->trial)
			return false;
		c->trial = true;
		*trial = true;
	}
	return true;
}

bool circuit_end(struct circuits *cs, uint64_t key,
		 const struct config_circuit *cfg, uint64_t now_ns, bool trial,
		 enum circuit_result res)
{
	struct circuit *c = circuit_find(cs, key, now_ns, false);
	uint64_t req, fail;
	size_t i;

	if (!c)
		return false; /* evicted meanwhile: forgotten */
	if (c->state == CIRCUIT_HALF_OPEN && trial) {
		c->trial = false;
		if (res == CIRCUIT_SUCCESS) {
			c->state = CIRCUIT_CLOSED;
			circuit_clear(c, circuit_width(cfg));
		} else if (res == CIRCUIT_FAILURE) {
			circuit_open(c, cfg, now_ns);
			return true;
		}
		return false;
	}
	/* open or half-open: requests let through before it opened have
	 * no say */
	if (c->state != CIRCUIT_CLOSED || res == CIRCUIT_NONE)
		return false;
	i = circuit_slot(c, circuit_width(cfg), now_ns);
	if (c->requests[i] < UINT32_MAX)
		c->requests[i]++;
	if (res == CIRCUIT_FAILURE && c->failures[i] < UINT32_MAX)
		c->failures[i]++;
	circuit_sum(c, now_ns, &req, &fail);
	if (req < cfg->min_requests || fail * 100 < req * cfg->errors)
		return false;
	circuit_open(c, cfg, now_ns);
	return true;
}

enum circuit_state circuit_state(struct circuits *cs, uint64_t key,
				 uint64_t now_ns, uint64_t *requests,
				 uint64_t *failures)
{
	const struct circuit *c = circuit_find(cs, key, now_ns, false);

	*requests = 0;
	*failures = 0;
	if (!c)
		return CIRCUIT_CLOSED;
	if (c->width)
		circuit_sum(c, now_ns, requests, failures);
	return c->state;
}

size_t circuit_view(const struct circuits *cs, uint64_t now_ns,
		    struct circuit_view *out, size_t max)
{
	size_t i, n = 0;

	for (i = 0; i < CIRCUIT_SETS * CIRCUIT_WAYS && n < max; i++) {
		const struct circuit *c = &cs->c[i];
		struct circuit_view *v = &out[n];
		uint64_t req = 0, fail = 0;

		if (!c->kw.key)
			continue;
		n++;
		v->key = c->kw.key;
		v->state = c->state;
		v->until = c->state == CIRCUIT_OPEN ? c->until : 0;
		if (c->state == CIRCUIT_OPEN && now_ns >= c->until) {
			v->state = CIRCUIT_HALF_OPEN;
			v->until = 0;
		}
		if (c->width)
			circuit_sum(c, now_ns, &req, &fail);
		v->requests = (uint32_t)(req < UINT32_MAX ? req : UINT32_MAX);
		v->failures = (uint32_t)(fail < UINT32_MAX ? fail : UINT32_MAX);
	}
	return n;
}

unsigned circuit_count_open(const struct circuits *cs)
{
	unsigned n = 0;
	size_t i;

	for (i = 0; i < CIRCUIT_SETS * CIRCUIT_WAYS; i++)
		if (cs->c[i].kw.key && cs->c[i].state != CIRCUIT_CLOSED)
			n++;
	return n;
}
