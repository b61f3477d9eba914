/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * policy.c - guarded ports and rate limits: parsing, formatting and the
 * numbers the kernel program needs.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

bool policy_port_guarded(const struct policy_ports *p, unsigned port)
{
	if (port == 0 || port >= EDGE_PORTS_MAX)
		return false;
	return p->bits[port / 8] & (1u << (port % 8));
}

static void policy_port_set(struct policy_ports *p, unsigned port)
{
	p->bits[port / 8] |= (uint8_t)(1u << (port % 8));
}

unsigned policy_ports_count(const struct policy_ports *p)
{
	unsigned n = 0, port;

	for (port = 1; port < EDGE_PORTS_MAX; port++)
		n += policy_port_guarded(p, port);
	return n;
}

/* Parse one port number from [s, s+n). */
static int policy_port_parse_one(const char *whole, const char *s, size_t n,
				 unsigned *out, struct errbuf *err)
{
	unsigned v = 0;
	size_t i;

	if (n == 0) {
		errbuf_set(err, "ports '%s': empty port number", whole);
		return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i])) {
			errbuf_set(err,
				   "ports '%s': '%.*s' is not a port number",
				   whole, (int)n, s);
			return -EINVAL;
		}
	}
	if (n > 1 && s[0] == '0') {
		errbuf_set(err, "ports '%s': port '%.*s' has a leading zero",
			   whole, (int)n, s);
		return -EINVAL;
	}
	if (n > 5) {
		errbuf_set(err,
			   "ports '%s': port '%.*s' out of range (1-65535)",
			   whole, (int)n, s);
		return -EINVAL;
	}
	for (i = 0; i < n; i++)
		v = v * 10 + (unsigned)(s[i] - '0');
	if (v < 1 || v > 65535) {
		errbuf_set(err, "ports '%s': port %u out of range (1-65535)",
			   whole, v);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

int policy_ports_parse(const char *s, struct policy_ports *out,
		       struct errbuf *err)
{
	const char *p;
	int ret;

	memset(out, 0, sizeof(*out));
	if (!s || !*s) {
		errbuf_set(err, "empty port list");
		return -EINVAL;
	}
	if (strlen(s) > POLICY_PORTS_INPUT_MAX) {
		errbuf_set(err, "port list too long (max %d characters)",
			   POLICY_PORTS_INPUT_MAX);
		return -EINVAL;
	}
	p = s;
	for (;;) {
		const char *end = strchr(p, ',');
		const char *dash;
		size_t n = end ? (size_t)(end - p) : strlen(p);
		unsigned lo, hi, port;

		if (n == 0) {
			errbuf_set(err, "ports '%s': empty item in the list",
				   s);
			return -EINVAL;
		}
		dash = memchr(p, '-', n);
		if (dash) {
			ret = policy_port_parse_one(s, p, (size_t)(dash - p),
						    &lo, err);
			if (ret)
				return ret;
			ret = policy_port_parse_one(
			    s, dash + 1, n - (size_t)(dash - p) - 1, &hi, err);
			if (ret)
				return ret;
			if (lo > hi) {
				errbuf_set(err,
					   "ports '%s': range %u-%u is "
					   "backwards",
					   s, lo, hi);
				return -EINVAL;
			}
		} else {
			ret = policy_port_parse_one(s, p, n, &lo, err);
			if (ret)
				return ret;
			hi = lo;
		}
		for (port = lo; port <= hi; port++)
			policy_port_set(out, port);
		if (!end)
			break;
		p = end + 1;
	}
	return 0;
}

char *policy_ports_format(const struct policy_ports *p)
{
	size_t cap = 64, len = 0;
	char *buf = malloc(cap);
	unsigned port = 1;

	if (!buf)
		return NULL;
	buf[0] = '\0';
	while (port < EDGE_PORTS_MAX) {
		unsigned lo, hi;
		char item[16];
		int w;

		if (!policy_port_guarded(p, port)) {
			port++;
			continue;
		}
		lo = port;
		while (port + 1 < EDGE_PORTS_MAX &&
		       policy_port_guarded(p, port + 1))
			port++;
		hi = port++;
		if (lo == hi)
			w = snprintf(item, sizeof(item), "%s%u", len ? "," : "",
				     lo);
		else
			w = snprintf(item, sizeof(item), "%s%u-%u",
				     len ? "," : "", lo, hi);
		if (len + (size_t)w + 1 > cap) {
			char *nb;

			cap *= 2;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
		}
		memcpy(buf + len, item, (size_t)w + 1);
		len += (size_t)w;
	}
	return buf;
}

/* Parse plain decimal digits in [s, s+n) into *out, at most max. */
static int policy_parse_u64(const char *s, size_t n, uint64_t max,
			    uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (n == 0 || n > 20)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -EINVAL;
		if (v > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int policy_rate_parse(const char *s, uint64_t *per_min, struct errbuf *err)
{
	const char *slash;
	uint64_t v, mult = 60;
	size_t n;
	int ret;

	if (!s || !*s) {
		errbuf_set(err, "empty rate");
		return -EINVAL;
	}
	slash = strchr(s, '/');
	n = slash ? (size_t)(slash - s) : strlen(s);
	if (slash) {
		if (strcmp(slash + 1, "s") == 0)
			mult = 60;
		else if (strcmp(slash + 1, "m") == 0)
			mult = 1;
		else {
			errbuf_set(err,
				   "rate '%s': unknown period '/%s' (use /s "
				   "or /m)",
				   s, slash + 1);
			return -EINVAL;
		}
	}
	ret = policy_parse_u64(s, n, EDGE_RL_RATE_MAX / mult, &v);
	if (ret == -ERANGE) {
		errbuf_set(err, "rate '%s' is too high (max %llu/s)", s,
			   (unsigned long long)(EDGE_RL_RATE_MAX / 60));
		return -EINVAL;
	}
	if (ret) {
		errbuf_set(err,
			   "rate '%s' is not a number (examples: 100, 100/s, "
			   "6000/m)",
			   s);
		return -EINVAL;
	}
	if (v == 0) {
		errbuf_set(err,
			   "rate '%s' must be at least 1 (to turn the limit "
			   "off use 'ratelimit off')",
			   s);
		return -EINVAL;
	}
	*per_min = v * mult;
	return 0;
}

void policy_rate_format(uint64_t per_min, char *buf, size_t len)
{
	if (per_min % 60 == 0)
		snprintf(buf, len, "%llu/s",
			 (unsigned long long)(per_min / 60));
	else
		snprintf(buf, len, "%llu/m", (unsigned long long)per_min);
}

int policy_burst_parse(const char *s, uint64_t *burst, struct errbuf *err)
{
	uint64_t v;
	int ret;

	if (!s || !*s) {
		errbuf_set(err, "empty burst");
		return -EINVAL;
	}
	ret = policy_parse_u64(s, strlen(s), EDGE_RL_BURST_MAX, &v);
	if (ret == -ERANGE) {
		errbuf_set(err, "burst '%s' is too large (max %llu)", s,
			   (unsigned long long)EDGE_RL_BURST_MAX);
		return -EINVAL;
	}
	if (ret) {
		errbuf_set(err, "burst '%s' is not a number", s);
		return -EINVAL;
	}
	if (v == 0) {
		errbuf_set(err, "burst must be at least 1");
		return -EINVAL;
	}
	*burst = v;
	return 0;
}

uint64_t policy_burst_default(uint64_t per_min)
{
	uint64_t b = (per_min + 59) / 60;

	if (b < 1)
		return 1;
	if (b > EDGE_RL_BURST_MAX)
		return EDGE_RL_BURST_MAX;
	return b;
}

int policy_rl_conf(const struct policy_rl *rl, struct edge_rl_conf *out)
{
	unsigned __int128 fill;

	memset(out, 0, sizeof(*out));
	if (rl->rate == 0)
		return 0;
	if (rl->rate > EDGE_RL_RATE_MAX || rl->burst < 1 ||
	    rl->burst > EDGE_RL_BURST_MAX)
		return -ERANGE;
	fill = (unsigned __int128)rl->burst * EDGE_RL_SCALE;
	fill = (fill + rl->rate - 1) / rl->rate;
	if (fill > UINT64_MAX)
		return -ERANGE;
	out->rate = rl->rate;
	out->burst = rl->burst;
	out->fill_ns = (uint64_t)fill;
	return 0;
}
