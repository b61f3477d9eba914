/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * circuit.h - a deployment's circuit breaker (docs/upstream.md, "Circuit
 * breaking").
 *
 * Per worker and pure with respect to time (callers pass now_ns,
 * CLOCK_MONOTONIC). A deployment is a 64-bit key (a hash of its id).
 * Closed, the requests that ended with a verdict are counted over a
 * sliding window of CIRCUIT_SLOTS slots of window_ms / CIRCUIT_SLOTS each;
 * once at least min_requests ended there and failures * 100 >=
 * requests * errors, it opens for open_for_ms: every request refused.
 * Then half-open: one trial request at a time; its success closes the
 * circuit (the window starts again empty), its failure opens it again,
 * and a trial without a verdict (the client left) lets the next one try.
 * The table holds CIRCUIT_SETS x CIRCUIT_WAYS deployments; the one used
 * longest ago in a set makes room (its state starts again closed).
 */
#ifndef EDGE_CIRCUIT_H
#define EDGE_CIRCUIT_H

#include <stdbool.h>
#include <stdint.h>

#include "keyway.h"

#define CIRCUIT_SLOTS 10
#define CIRCUIT_SETS 64
#define CIRCUIT_WAYS 4

struct config_circuit;

enum circuit_state {
	CIRCUIT_CLOSED = 0,
	CIRCUIT_OPEN,
	CIRCUIT_HALF_OPEN,
};

/* What a request's end says of its deployment's upstream. */
enum circuit_result {
	CIRCUIT_NONE = 0, /* no verdict (the client left, a bad request) */
	CIRCUIT_SUCCESS,
	CIRCUIT_FAILURE,
};

struct circuit {
	struct keyway kw; /* first: its key and last use */
	enum circuit_state state;
	bool trial;	/* half-open: a trial request is in flight */
	uint64_t until; /* open: ns when it turns half-open */
	uint64_t width; /* ns of one slot (window_ms / CIRCUIT_SLOTS) */
	uint64_t slot[CIRCUIT_SLOTS]; /* the slot number each counts, 0 none */
	uint32_t requests[CIRCUIT_SLOTS];
	uint32_t failures[CIRCUIT_SLOTS];
};

struct circuits {
	struct circuit c[CIRCUIT_SETS * CIRCUIT_WAYS];
};

/* Whether a request of deployment key may go to its upstream.
 * Yes: *trial says whether it is the half-open circuit's trial (its end
 * must be reported with trial true). No: *wait_ms is how long the
 * circuit stays open (0 when half-open with its trial in flight). */
bool circuit_admit(struct circuits *cs, uint64_t key, uint64_t now_ns,
		   bool *trial, uint64_t *wait_ms);

/* The end of a request circuit_admit let through (trial as it said).
 * Returns true when this end opened the circuit. */
bool circuit_end(struct circuits *cs, uint64_t key,
		 const struct config_circuit *cfg, uint64_t now_ns, bool trial,
		 enum circuit_result res);

/* Deployment key's state (closed when unknown); its window's counts. */
enum circuit_state circuit_state(struct circuits *cs, uint64_t key,
				 uint64_t now_ns, uint64_t *requests,
				 uint64_t *failures);

/* A circuit as the operator sees it (edgectl upstream circuits): the
 * state the next request meets (open past its open_for: half-open), the
 * window's counts, and, open, the ns (CLOCK_MONOTONIC) it turns
 * half-open at. */
struct circuit_view {
	uint64_t key;
	enum circuit_state state;
	uint32_t requests, failures;
	uint64_t until;
};

/* The table's circuits in use at now_ns into out[0..max): how many. */
size_t circuit_view(const struct circuits *cs, uint64_t now_ns,
		    struct circuit_view *out, size_t max);

/* How many of the table's circuits are open or half-open. */
unsigned circuit_count_open(const struct circuits *cs);

#endif /* EDGE_CIRCUIT_H */
