/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * duration.h - "30s", "10m", "2h", "1d", "1h30m" <-> seconds.
 */
#ifndef EDGE_DURATION_H
#define EDGE_DURATION_H

#include <stddef.h>
#include <stdint.h>

#include "log.h"

/* Longest accepted duration: 365 days. */
#define DURATION_MAX_SECS (365ULL * 24 * 3600)

/* Buffer size that holds any formatted duration. */
#define DURATION_STR_MAX 32

/*
 * Parse a duration: one or more NUMBER UNIT groups with units d, h, m, s
 * in that order, each at most once ("1h30m", "2d", "45s"), or a bare
 * number of seconds ("90"). Rejects empty input, signs, whitespace, zero,
 * unknown units, overflow and anything over DURATION_MAX_SECS. Returns 0
 * with *secs set, or -EINVAL with err saying what was wrong.
 */
int duration_parse(const char *s, uint64_t *secs, struct errbuf *err);

/* Format secs the way duration_parse reads it, largest units first and
 * zero units left out ("9m58s", "1d2h", "0s"). Returns buf. */
char *duration_format(uint64_t secs, char *buf, size_t len);

#endif /* EDGE_DURATION_H */
