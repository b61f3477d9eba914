/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * policy.h - the settings beside the rules: which ports the allowlist
 * guards, and the per-source rate limits.
 *
 * Pure functions: no I/O.
 */
#ifndef EDGE_POLICY_H
#define EDGE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "edge_maps.h"
#include "log.h"

/* A set of guarded ports, one bit per port number (bit 0 unused). */
#define POLICY_PORTS_BYTES (EDGE_PORTS_MAX / 8)
struct policy_ports {
	uint8_t bits[POLICY_PORTS_BYTES];
};

/* The ports guarded when nothing else was said. */
#define POLICY_PORTS_DEFAULT "80,443"

/* Longest accepted --ports argument. */
#define POLICY_PORTS_INPUT_MAX 4096

/*
 * Parse a port list: comma-separated ports and ranges ("80,443",
 * "8000-8100"), each port 1..65535 in plain decimal without leading zeros,
 * ranges low-high with low <= high. Fills *out (cleared first). Returns 0
 * or -EINVAL with err saying what was wrong.
 */
int policy_ports_parse(const char *s, struct policy_ports *out,
		       struct errbuf *err);

/* Canonical text of a port set ("80,443,8000-8100"), malloc'd; the
 * caller frees it. "" for an empty set. NULL when out of memory. */
char *policy_ports_format(const struct policy_ports *p);

/* Whether port is in the set. */
bool policy_port_guarded(const struct policy_ports *p, unsigned port);

/* Number of ports in the set. */
unsigned policy_ports_count(const struct policy_ports *p);

/* A rate limit: rate tokens per minute (0: off), as the kernel takes it,
 * and burst tokens. */
struct policy_rl {
	uint64_t rate;
	uint64_t burst;
};

/*
 * Parse a rate: "N" or "N/s" (per second) or "N/m" (per minute). Result
 * in tokens per minute, 1..EDGE_RL_RATE_MAX. Returns 0 or -EINVAL with
 * err set.
 */
int policy_rate_parse(const char *s, uint64_t *per_min, struct errbuf *err);

/* Write a per-minute rate for people: "100/s" when it is a whole number
 * per second, else "10/m". */
void policy_rate_format(uint64_t per_min, char *buf, size_t len);

/* Parse a burst: plain decimal 1..EDGE_RL_BURST_MAX. Returns 0 or -EINVAL
 * with err set. */
int policy_burst_parse(const char *s, uint64_t *burst, struct errbuf *err);

/* The burst used when none is given for a per-minute rate: one second's
 * worth of it, rounded up, at least 1 and at most EDGE_RL_BURST_MAX. */
uint64_t policy_burst_default(uint64_t per_min);

/*
 * Fill the kernel's token-bucket settings for rl: rate and burst as given,
 * fill_ns = ceil(burst * EDGE_RL_SCALE / rate); all zero when rate is 0.
 * Returns 0, or -ERANGE when rate or burst is out of range.
 */
int policy_rl_conf(const struct policy_rl *rl, struct edge_rl_conf *out);

#endif /* EDGE_POLICY_H */
