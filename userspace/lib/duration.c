/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * duration.c - the one duration grammar (duration.h): strict parsing in
 * milliseconds or whole seconds, and formatting.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "duration.h"

struct duration_unit {
	const char *name;
	uint64_t ms;
};

/* In the order the units must be written. */
static const struct duration_unit duration_units[] = {
    {"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1},
};

#define DURATION_NUNITS (sizeof(duration_units) / sizeof(duration_units[0]))
#define DURATION_UNITS_TEXT "d, h, m, s or ms"

/* The unit written at p (the longest name that matches: "ms" before
 * "m"), or -1. */
static int duration_unit_at(const char *p)
{
	size_t i, best_len = 0;
	int best = -1;

	for (i = 0; i < DURATION_NUNITS; i++) {
		size_t n = strlen(duration_units[i].name);

		if (n > best_len &&
		    strncmp(p, duration_units[i].name, n) == 0) {
			best = (int)i;
			best_len = n;
		}
	}
	return best;
}

/* The limit max_ms as written in messages: "365d", "7d", "1500ms". */
static const char *duration_max_text(uint64_t max_ms, char *buf, size_t len)
{
	if (max_ms % 1000 == 0)
		return duration_format(max_ms / 1000, buf, len);
	snprintf(buf, len, "%llums", (unsigned long long)max_ms);
	return buf;
}

static int duration_too_long(const char *s, uint64_t max_ms, struct errbuf *err)
{
	char m[DURATION_STR_MAX];

	errbuf_set(err, "duration '%s' is too long (max %s)", s,
		   duration_max_text(max_ms, m, sizeof(m)));
	return -EINVAL;
}

/*
 * The grammar, for both resolutions: s into *ms (at most max_ms); a bare
 * number is seconds only when bare_secs.
 */
static int duration_scan(const char *s, uint64_t max_ms, bool bare_secs,
			 uint64_t *ms, struct errbuf *err)
{
	uint64_t total = 0;
	int last_unit = -1;
	const char *p;

	if (!s || !*s) {
		errbuf_set(err, "empty duration");
		return -EINVAL;
	}
	if (*s == '-') {
		errbuf_set(err, "duration '%s' is negative", s);
		return -EINVAL;
	}
	p = s;
	while (*p) {
		const char *start = p;
		uint64_t v = 0;
		int unit;

		if (!isdigit((unsigned char)*p)) {
			errbuf_set(err,
				   "duration '%s': expected a number at '%s' "
				   "(examples: 30s, 250ms, 10m, 2h, 1d, 1h30m)",
				   s, p);
			return -EINVAL;
		}
		for (; isdigit((unsigned char)*p); p++) {
			/* v <= max_ms before the step: v * 10 + 9 fits */
			v = v * 10 + (uint64_t)(*p - '0');
			if (v > max_ms)
				return duration_too_long(s, max_ms, err);
		}
		if (*p == '\0' && start == s && bare_secs) {
			/* a bare number: seconds */
			if (v > max_ms / 1000)
				return duration_too_long(s, max_ms, err);
			total = v * 1000;
			break;
		}
		if (*p == '\0') {
			if (start == s)
				errbuf_set(err,
					   "duration '%s': a number needs a "
					   "unit (" DURATION_UNITS_TEXT ")",
					   s);
			else
				errbuf_set(err,
					   "duration '%s': number '%s' has no "
					   "unit (" DURATION_UNITS_TEXT ")",
					   s, start);
			return -EINVAL;
		}
		unit = duration_unit_at(p);
		if (unit < 0) {
			errbuf_set(err,
				   "duration '%s': unknown unit '%c' (use "
				   "" DURATION_UNITS_TEXT ")",
				   s, isprint((unsigned char)*p) ? *p : '?');
			return -EINVAL;
		}
		if (unit <= last_unit) {
			errbuf_set(err,
				   "duration '%s': units must go from largest "
				   "to smallest, each once (d, h, m, s, ms)",
				   s);
			return -EINVAL;
		}
		last_unit = unit;
		p += strlen(duration_units[unit].name);
		if (v > max_ms / duration_units[unit].ms)
			return duration_too_long(s, max_ms, err);
		/* both terms <= max_ms: no overflow */
		total += v * duration_units[unit].ms;
		if (total > max_ms)
			return duration_too_long(s, max_ms, err);
	}
	if (total == 0) {
		errbuf_set(err, "duration '%s' must be longer than zero", s);
		return -EINVAL;
	}
	*ms = total;
	return 0;
}

int duration_parse_ms(const char *s, uint64_t max_ms, uint64_t *ms,
		      struct errbuf *err)
{
	return duration_scan(s, max_ms, false, ms, err);
}

int duration_parse_secs(const char *s, uint64_t max_secs, uint64_t *secs,
			struct errbuf *err)
{
	uint64_t ms;
	int rc;

	rc = duration_scan(s, max_secs * 1000, true, &ms, err);
	if (rc)
		return rc;
	if (ms % 1000) {
		errbuf_set(err,
			   "duration '%s' is not whole seconds (this setting "
			   "counts seconds)",
			   s);
		return -EINVAL;
	}
	*secs = ms / 1000;
	return 0;
}

int duration_parse(const char *s, uint64_t *secs, struct errbuf *err)
{
	return duration_parse_secs(s, DURATION_MAX_SECS, secs, err);
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
	/* whole seconds: every unit but ms */
	for (i = 0; i < DURATION_NUNITS && duration_units[i].ms >= 1000; i++) {
		uint64_t unit_s = duration_units[i].ms / 1000;
		uint64_t n = secs / unit_s;
		int w;

		if (n == 0)
			continue;
		secs -= n * unit_s;
		w = snprintf(buf + off, len - off, "%llu%s",
			     (unsigned long long)n, duration_units[i].name);
		if (w < 0 || (size_t)w >= len - off)
			break;
		off += (size_t)w;
	}
	return buf;
}
