/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * duration.c - strict parsing and formatting of human durations.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "duration.h"

struct duration_unit {
	char name;
	uint64_t secs;
};

static const struct duration_unit duration_units[] = {
    {'d', 86400},
    {'h', 3600},
    {'m', 60},
    {'s', 1},
};

#define DURATION_NUNITS (sizeof(duration_units) / sizeof(duration_units[0]))
#define DURATION_INPUT_MAX 32

static int duration_unit_index(char c)
{
	size_t i;

	for (i = 0; i < DURATION_NUNITS; i++)
		if (duration_units[i].name == c)
			return (int)i;
	return -1;
}

int duration_parse(const char *s, uint64_t *secs, struct errbuf *err)
{
	uint64_t total = 0;
	int last_unit = -1;
	const char *p;

	if (!s || !*s) {
		errbuf_set(err, "empty duration");
		return -EINVAL;
	}
	if (strlen(s) > DURATION_INPUT_MAX) {
		errbuf_set(err, "duration '%.20s...' is too long", s);
		return -EINVAL;
	}
	if (*s == '-') {
		errbuf_set(err, "duration '%s' is negative", s);
		return -EINVAL;
	}
	p = s;
	while (*p) {
		uint64_t v = 0;
		const char *start = p;
		int unit;

		if (!isdigit((unsigned char)*p)) {
			errbuf_set(err,
				   "duration '%s': expected a number at '%s' "
				   "(examples: 30s, 10m, 2h, 1d, 1h30m)",
				   s, p);
			return -EINVAL;
		}
		while (isdigit((unsigned char)*p)) {
			v = v * 10 + (uint64_t)(*p - '0');
			if (v > DURATION_MAX_SECS) {
				errbuf_set(err,
					   "duration '%s' is too long (max "
					   "365d)",
					   s);
				return -EINVAL;
			}
			p++;
		}
		if (*p == '\0') {
			if (start == s) {
				total = v; /* bare number: seconds */
				break;
			}
			errbuf_set(err,
				   "duration '%s': number '%s' has no unit "
				   "(d, h, m or s)",
				   s, start);
			return -EINVAL;
		}
		unit = duration_unit_index(*p);
		if (unit < 0) {
			errbuf_set(err,
				   "duration '%s': unknown unit '%c' (use d, "
				   "h, m or s)",
				   s, *p);
			return -EINVAL;
		}
		if (unit <= last_unit) {
			errbuf_set(err,
				   "duration '%s': units must go from largest "
				   "to smallest, each once (d, h, m, s)",
				   s);
			return -EINVAL;
		}
		last_unit = unit;
		/* v <= DURATION_MAX_SECS and secs <= 86400: no overflow */
		total += v * duration_units[unit].secs;
		if (total > DURATION_MAX_SECS) {
			errbuf_set(err, "duration '%s' is too long (max 365d)",
				   s);
			return -EINVAL;
		}
		p++;
	}
	if (total > DURATION_MAX_SECS) {
		errbuf_set(err, "duration '%s' is too long (max 365d)", s);
		return -EINVAL;
	}
	if (total == 0) {
		errbuf_set(err, "duration '%s' must be longer than zero", s);
		return -EINVAL;
	}
	*secs = total;
	return 0;
}

char *duration_format(uint64_t secs, char *buf, size_t len)
{
	size_t off = 0, i;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	if (secs == 0) {
		snprintf(buf, len, "0s");
		return buf;
	}
	for (i = 0; i < DURATION_NUNITS; i++) {
		uint64_t n = secs / duration_units[i].secs;
		int w;

		if (n == 0)
			continue;
		secs -= n * duration_units[i].secs;
		w = snprintf(buf + off, len - off, "%llu%c",
			     (unsigned long long)n, duration_units[i].name);
		if (w < 0 || (size_t)w >= len - off)
			break;
		off += (size_t)w;
	}
	return buf;
}
