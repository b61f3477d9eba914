/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * duration.h - the one duration grammar of edge, "30s", "250ms", "1h30m",
 * "2d", for every setting and option that takes a duration (edged's
 * timeouts and hsts_max_age, edgectl's --ttl), and its formatting.
 *
 * The grammar: one or more NUMBER UNIT groups, units d, h, m, s, ms in
 * that order, each at most once ("1d12h", "1m30s500ms"); NUMBER is
 * decimal digits (no sign, space, fraction or exponent); the total is
 * longer than zero. What differs between settings is not the grammar but
 * the setting's resolution and range:
 *
 * - a setting kept in milliseconds (duration_parse_ms) needs a unit on
 *   every number: is "10" ten seconds or ten milliseconds?
 * - a setting kept in whole seconds (duration_parse_secs) also reads a
 *   bare number as seconds ("90"), and refuses a total that is not whole
 *   seconds ("1500ms"; "2000ms" is 2 s): rounding would silently change
 *   what was written.
 */
#ifndef EDGE_DURATION_H
#define EDGE_DURATION_H

#include <stddef.h>
#include <stdint.h>

#include "log.h"

/* Longest duration duration_parse accepts: 365 days. */
#define DURATION_MAX_SECS (365ULL * 24 * 3600)

/* Buffer size that holds any formatted duration. */
#define DURATION_STR_MAX 32

/*
 * Parse s in the grammar above for a setting kept in milliseconds: every
 * number needs a unit. Longer than zero and at most max_ms. Returns 0
 * with *ms set, or -EINVAL with err saying what was wrong (*ms untouched).
 */
int duration_parse_ms(const char *s, uint64_t max_ms, uint64_t *ms,
		      struct errbuf *err);

/*
 * Parse s in the grammar above for a setting kept in whole seconds: a
 * bare number is seconds ("90"), and the total must be whole seconds.
 * Longer than zero and at most max_secs. Returns 0 with *secs set, or
 * -EINVAL with err saying what was wrong (*secs untouched).
 */
int duration_parse_secs(const char *s, uint64_t max_secs, uint64_t *secs,
			struct errbuf *err);

/* duration_parse_secs up to DURATION_MAX_SECS (edgectl's --ttl). */
int duration_parse(const char *s, uint64_t *secs, struct errbuf *err);

/* Format secs the way duration_parse reads it, largest units first and
 * zero units left out ("9m58s", "1d2h", "0s"). Returns buf. */
char *duration_format(uint64_t secs, char *buf, size_t len);

#endif /* EDGE_DURATION_H */
