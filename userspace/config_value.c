/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * config_value.c - the configuration's typed values: one setting read,
 * checked on its own and turned into a string, boolean, number, size,
 * duration, path, endpoint list or CIDR rule list, every error naming
 * the file, the line and the key (config_value.h).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cidr.h"
#include "config_value.h"
#include "edge_maps.h"

#define CFG_WARNINGS_MAX 64

/* ---- errors ------------------------------------------------------------ */

const char *cfg_file_of(const struct cfg *x, const config_setting_t *s)
{
	const char *f = s ? config_setting_source_file(s) : NULL;

	return f ? f : x->file;
}

int cfg_fail(struct cfg *x, const config_setting_t *s, const char *key,
	     const char *fmt, ...)
{
	char msg[ERRBUF_LEN];
	unsigned line = s ? config_setting_source_line(s) : 0;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line)
		errbuf_set(x->err, "%s:%u: %s: %s", cfg_file_of(x, s), line,
			   key, msg);
	else
		errbuf_set(x->err, "%s: %s: %s", cfg_file_of(x, s), key, msg);
	return -EINVAL;
}

/* Append a warning in the same form as an error. */
static int cfg_warn(struct cfg *x, const config_setting_t *s, const char *key,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int cfg_warn(struct cfg *x, const config_setting_t *s, const char *key,
		    const char *fmt, ...)
{
	char msg[ERRBUF_LEN], *w;
	char **v;
	va_list ap;
	int n;

	if (x->c->n_warnings >= CFG_WARNINGS_MAX)
		return 0;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	n = asprintf(&w, "%s:%u: %s: %s", cfg_file_of(x, s),
		     s ? config_setting_source_line(s) : 0, key, msg);
	if (n < 0)
		return -ENOMEM;
	v = realloc(x->c->warnings, (x->c->n_warnings + 1) * sizeof(*v));
	if (!v) {
		free(w);
		return -ENOMEM;
	}
	v[x->c->n_warnings++] = w;
	x->c->warnings = v;
	return 0;
}

/* Key paths longer than CFG_KEY_MAX are cut short, ending in "...". */
static void cfg_key_done(char *buf, int n)
{
	if (n >= CFG_KEY_MAX)
		memcpy(buf + CFG_KEY_MAX - 4, "...", 4);
}

void cfg_key(char *buf, const char *path, const char *name)
{
	int n;

	if (path[0])
		n = snprintf(buf, CFG_KEY_MAX, "%s.%s", path, name);
	else
		n = snprintf(buf, CFG_KEY_MAX, "%s", name);
	cfg_key_done(buf, n);
}

void cfg_key_index(char *buf, const char *path, size_t i)
{
	cfg_key_done(buf, snprintf(buf, CFG_KEY_MAX, "%s[%zu]", path, i));
}

static const char *cfg_type_name(const config_setting_t *s)
{
	switch (config_setting_type(s)) {
	case CONFIG_TYPE_GROUP:
		return "a group";
	case CONFIG_TYPE_INT:
	case CONFIG_TYPE_INT64:
		return "an integer";
	case CONFIG_TYPE_FLOAT:
		return "a float";
	case CONFIG_TYPE_STRING:
		return "a string";
	case CONFIG_TYPE_BOOL:
		return "a boolean";
	case CONFIG_TYPE_ARRAY:
	case CONFIG_TYPE_LIST:
		return "a list";
	default:
		return "something else";
	}
}

static bool cfg_is_int(const config_setting_t *s)
{
	return config_setting_type(s) == CONFIG_TYPE_INT ||
	       config_setting_type(s) == CONFIG_TYPE_INT64;
}

/* A string member: *out points into libconfig's tree (def when absent). */
int cfg_str(struct cfg *x, const config_setting_t *g, const char *path,
	    const char *name, const char *def, const char **out,
	    const config_setting_t **where)
{
	char key[CFG_KEY_MAX];
	config_setting_t *s = g ? config_setting_get_member(g, name) : NULL;

	*where = s ? s : g;
	if (!s) {
		*out = def;
		if (!def) {
			cfg_key(key, path, name);
			return cfg_fail(x, g, key, "missing (required)");
		}
		return 0;
	}
	if (config_setting_type(s) != CONFIG_TYPE_STRING) {
		cfg_key(key, path, name);
		return cfg_fail(x, s, key, "expected a string, found %s",
				cfg_type_name(s));
	}
	*out = config_setting_get_string(s);
	return 0;
}

int cfg_dup(struct cfg *x, const char *s, char **out)
{
	*out = strdup(s);
	if (!*out) {
		errbuf_set(x->err, "%s: out of memory", x->file);
		return -ENOMEM;
	}
	return 0;
}

int cfg_bool(struct cfg *x, const config_setting_t *g, const char *path,
	     const char *name, bool def, bool *out)
{
	char key[CFG_KEY_MAX];
	config_setting_t *s = g ? config_setting_get_member(g, name) : NULL;

	*out = def;
	if (!s)
		return 0;
	if (config_setting_type(s) != CONFIG_TYPE_BOOL) {
		cfg_key(key, path, name);
		return cfg_fail(x, s, key, "expected true or false, found %s",
				cfg_type_name(s));
	}
	*out = config_setting_get_bool(s);
	return 0;
}

/* An integer member in [min, max]. */
int cfg_uint(struct cfg *x, const config_setting_t *g, const char *path,
	     const char *name, uint64_t def, uint64_t min, uint64_t max,
	     uint64_t *out)
{
	char key[CFG_KEY_MAX];
	config_setting_t *s = g ? config_setting_get_member(g, name) : NULL;
	long long v;

	*out = def;
	if (!s)
		return 0;
	cfg_key(key, path, name);
	if (!cfg_is_int(s))
		return cfg_fail(x, s, key, "expected an integer, found %s",
				cfg_type_name(s));
	v = config_setting_get_int64(s);
	if (v < 0 || (uint64_t)v < min || (uint64_t)v > max)
		return cfg_fail(x, s, key, "%lld is out of range %llu..%llu", v,
				(unsigned long long)min,
				(unsigned long long)max);
	*out = (uint64_t)v;
	return 0;
}

/* Parse "N", "NK", "NM", "NG" (binary units) into bytes. */
static int cfg_size_parse(const char *s, uint64_t *out, struct errbuf *err)
{
	uint64_t v = 0, mul = 1;
	const char *p = s;

	if (!isdigit((unsigned char)*p)) {
		errbuf_set(err, "expected a size such as \"10M\"");
		return -EINVAL;
	}
	for (; isdigit((unsigned char)*p); p++) {
		if (v > CFG_SIZE_MAX) {
			errbuf_set(err, "size too large");
			return -EINVAL;
		}
		v = v * 10 + (uint64_t)(*p - '0');
	}
	switch (*p) {
	case '\0':
		break;
	case 'k':
	case 'K':
		mul = 1ULL << 10;
		p++;
		break;
	case 'm':
	case 'M':
		mul = 1ULL << 20;
		p++;
		break;
	case 'g':
	case 'G':
		mul = 1ULL << 30;
		p++;
		break;
	default:
		errbuf_set(err, "unknown size unit '%c' (K, M or G)", *p);
		return -EINVAL;
	}
	if (*p) {
		errbuf_set(err, "trailing text after the size");
		return -EINVAL;
	}
	if (v > CFG_SIZE_MAX / mul) {
		errbuf_set(err, "size too large");
		return -EINVAL;
	}
	*out = v * mul;
	return 0;
}

/* A byte size: an integer, or a string with a K/M/G suffix. */
int cfg_size(struct cfg *x, const config_setting_t *g, const char *path,
	     const char *name, uint64_t def, uint64_t min, uint64_t max,
	     uint64_t *out)
{
	char key[CFG_KEY_MAX];
	config_setting_t *s = g ? config_setting_get_member(g, name) : NULL;
	struct errbuf e;
	uint64_t v;

	*out = def;
	if (!s)
		return 0;
	cfg_key(key, path, name);
	if (cfg_is_int(s)) {
		long long i = config_setting_get_int64(s);

		if (i < 0)
			return cfg_fail(x, s, key, "negative size %lld", i);
		v = (uint64_t)i;
	} else if (config_setting_type(s) == CONFIG_TYPE_STRING) {
		if (cfg_size_parse(config_setting_get_string(s), &v, &e) < 0)
			return cfg_fail(x, s, key, "\"%s\": %s",
					config_setting_get_string(s), e.msg);
	} else {
		return cfg_fail(x, s, key, "expected a size, found %s",
				cfg_type_name(s));
	}
	if (v < min || v > max)
		return cfg_fail(x, s, key,
				"%llu bytes is out of range %llu..%llu",
				(unsigned long long)v, (unsigned long long)min,
				(unsigned long long)max);
	*out = v;
	return 0;
}

int config_duration_parse(const char *s, uint64_t *ms, struct errbuf *err)
{
	static const struct {
		const char *unit;
		uint64_t ms;
	} units[] = {{"h", 3600000}, {"ms", 1}, {"m", 60000}, {"s", 1000}};
	/* order in which units may appear: h, m, s, ms */
	static const int rank[] = {0, 3, 1, 2};
	uint64_t total = 0;
	const char *p = s;
	int last = -1;

	if (!s || !*s) {
		errbuf_set(err, "empty duration");
		return -EINVAL;
	}
	while (*p) {
		uint64_t v = 0;
		size_t u;

		if (!isdigit((unsigned char)*p)) {
			errbuf_set(err, "expected a number in \"%s\"", s);
			return -EINVAL;
		}
		for (; isdigit((unsigned char)*p); p++) {
			if (v > CFG_DURATION_MAX_MS) {
				errbuf_set(err, "\"%s\" is too long", s);
				return -EINVAL;
			}
			v = v * 10 + (uint64_t)(*p - '0');
		}
		for (u = 0; u < sizeof(units) / sizeof(units[0]); u++)
			if (strncmp(p, units[u].unit, strlen(units[u].unit)) ==
			    0)
				break;
		if (u == sizeof(units) / sizeof(units[0])) {
			errbuf_set(err,
				   "\"%s\": a number needs a unit: h, m, s or "
				   "ms",
				   s);
			return -EINVAL;
		}
		if (rank[u] <= last) {
			errbuf_set(err,
				   "\"%s\": units must go h, m, s, ms, each "
				   "once",
				   s);
			return -EINVAL;
		}
		last = rank[u];
		p += strlen(units[u].unit);
		if (v > CFG_DURATION_MAX_MS / units[u].ms) {
			errbuf_set(err, "\"%s\" is too long", s);
			return -EINVAL;
		}
		total += v * units[u].ms;
		if (total > CFG_DURATION_MAX_MS) {
			errbuf_set(err, "\"%s\" is too long (7 days at most)",
				   s);
			return -EINVAL;
		}
	}
	if (total == 0) {
		errbuf_set(err, "\"%s\" must be longer than zero", s);
		return -EINVAL;
	}
	*ms = total;
	return 0;
}

/* A duration member (a string such as "10s"), in ms, within [min, max]. */
int cfg_duration(struct cfg *x, const config_setting_t *g, const char *path,
		 const char *name, uint64_t def, uint64_t min, uint64_t max,
		 uint64_t *out)
{
	char key[CFG_KEY_MAX];
	config_setting_t *s = g ? config_setting_get_member(g, name) : NULL;
	struct errbuf e;
	uint64_t v;

	*out = def;
	if (!s)
		return 0;
	cfg_key(key, path, name);
	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return cfg_fail(x, s, key,
				"expected a duration string such as \"10s\", "
				"found %s",
				cfg_type_name(s));
	if (config_duration_parse(config_setting_get_string(s), &v, &e) < 0)
		return cfg_fail(x, s, key, "%s", e.msg);
	if (v < min || v > max)
		return cfg_fail(
		    x, s, key, "\"%s\" is out of range %llums..%llums",
		    config_setting_get_string(s), (unsigned long long)min,
		    (unsigned long long)max);
	*out = v;
	return 0;
}

/* ---- addresses ---------------------------------------------------------- */

static int cfg_port_parse(const char *p, unsigned *port)
{
	unsigned v = 0;

	if (!*p || *p == '0')
		return -EINVAL;
	for (; *p; p++) {
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		v = v * 10 + (unsigned)(*p - '0');
		if (v > 65535)
			return -EINVAL;
	}
	*port = v;
	return 0;
}

int config_addr_parse(const char *s, struct config_addr *out,
		      struct errbuf *err)
{
	char host[INET6_ADDRSTRLEN + 1], buf[INET6_ADDRSTRLEN];
	const char *colon, *ps;
	struct config_addr a;
	unsigned port;
	size_t hl;

	memset(&a, 0, sizeof(a));
	if (!s || !*s) {
		errbuf_set(err, "empty address");
		return -EINVAL;
	}
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close || close[1] != ':') {
			errbuf_set(err, "\"%s\": expected [IPV6]:PORT", s);
			return -EINVAL;
		}
		hl = (size_t)(close - s - 1);
		ps = close + 2;
		if (hl == 0 || hl >= sizeof(host))
			goto bad_ip;
		memcpy(host, s + 1, hl);
		host[hl] = '\0';
		if (strchr(host, '%')) {
			errbuf_set(err, "\"%s\": zone ids are not supported",
				   s);
			return -EINVAL;
		}
		{
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a.ss;

			if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
				goto bad_ip;
			in6->sin6_family = AF_INET6;
			a.len = sizeof(*in6);
		}
	} else {
		struct sockaddr_in *in4 = (struct sockaddr_in *)&a.ss;
		struct cidr c;

		colon = strrchr(s, ':');
		if (!colon) {
			errbuf_set(err, "\"%s\": expected ADDR:PORT", s);
			return -EINVAL;
		}
		if (memchr(s, ':', (size_t)(colon - s))) {
			errbuf_set(err,
				   "\"%s\": an IPv6 address needs brackets: "
				   "[ADDR]:PORT",
				   s);
			return -EINVAL;
		}
		hl = (size_t)(colon - s);
		ps = colon + 1;
		if (hl == 0 || hl >= sizeof(host))
			goto bad_ip;
		memcpy(host, s, hl);
		host[hl] = '\0';
		/* cidr_parse_addr is strict about IPv4 (no leading zeros, four
		 * octets); a host name is refused here, never resolved */
		if (cidr_parse_addr(host, &c, NULL) < 0 || c.family != AF_INET)
			goto bad_ip;
		memcpy(&in4->sin_addr, c.addr, 4);
		in4->sin_family = AF_INET;
		a.len = sizeof(*in4);
	}
	if (cfg_port_parse(ps, &port) < 0) {
		errbuf_set(err, "\"%s\": port must be 1..65535", s);
		return -EINVAL;
	}
	if (a.ss.ss_family == AF_INET) {
		struct sockaddr_in *in4 = (struct sockaddr_in *)&a.ss;

		in4->sin_port = htons((uint16_t)port);
		inet_ntop(AF_INET, &in4->sin_addr, buf, sizeof(buf));
		snprintf(a.text, sizeof(a.text), "%s:%u", buf, port);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a.ss;

		in6->sin6_port = htons((uint16_t)port);
		inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
		snprintf(a.text, sizeof(a.text), "[%s]:%u", buf, port);
	}
	*out = a;
	return 0;
bad_ip:
	errbuf_set(err,
		   "\"%s\": not a numeric IPv4 or IPv6 address (host names "
		   "are not resolved)",
		   s);
	return -EINVAL;
}

/* A list (or array) member of strings; *out is NULL when absent. */
int cfg_list(struct cfg *x, const config_setting_t *g, const char *path,
	     const char *name, const config_setting_t **out)
{
	char key[CFG_KEY_MAX];
	config_setting_t *s = g ? config_setting_get_member(g, name) : NULL;
	int i, n;

	*out = NULL;
	if (!s)
		return 0;
	cfg_key(key, path, name);
	if (config_setting_type(s) != CONFIG_TYPE_ARRAY &&
	    config_setting_type(s) != CONFIG_TYPE_LIST)
		return cfg_fail(x, s, key, "expected a list [ ... ], found %s",
				cfg_type_name(s));
	n = config_setting_length(s);
	for (i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(s, i);

		if (config_setting_type(e) != CONFIG_TYPE_STRING) {
			char ek[CFG_KEY_MAX];

			cfg_key_index(ek, key, (size_t)i);
			return cfg_fail(x, e, ek, "expected a string, found %s",
					cfg_type_name(e));
		}
	}
	*out = s;
	return 0;
}

/* An endpoint list, 1..max entries, no repeats. */
int cfg_addrs(struct cfg *x, const config_setting_t *g, const char *path,
	      const char *name, size_t max, bool required,
	      struct config_addr **out, size_t *nout)
{
	char key[CFG_KEY_MAX], ek[CFG_KEY_MAX];
	const config_setting_t *s;
	struct config_addr *v;
	struct errbuf e;
	size_t i, j, n;
	int rc;

	*out = NULL;
	*nout = 0;
	rc = cfg_list(x, g, path, name, &s);
	if (rc < 0)
		return rc;
	cfg_key(key, path, name);
	if (!s) {
		if (required)
			return cfg_fail(x, g, key, "missing (required)");
		return 0;
	}
	n = (size_t)config_setting_length(s);
	if (n == 0 || n > max)
		return cfg_fail(x, s, key, "needs 1..%zu addresses, has %zu",
				max, n);
	v = calloc(n, sizeof(*v));
	if (!v) {
		errbuf_set(x->err, "%s: out of memory", x->file);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		const config_setting_t *el =
		    config_setting_get_elem(s, (unsigned)i);

		cfg_key_index(ek, key, i);
		if (config_addr_parse(config_setting_get_string(el), &v[i],
				      &e) < 0) {
			rc = cfg_fail(x, el, ek, "%s", e.msg);
			goto fail;
		}
		for (j = 0; j < i; j++)
			if (strcmp(v[j].text, v[i].text) == 0) {
				rc = cfg_fail(x, el, ek, "%s is listed twice",
					      v[i].text);
				goto fail;
			}
	}
	*out = v;
	*nout = n;
	return 0;
fail:
	free(v);
	return rc;
}

/* ---- names -------------------------------------------------------------- */

int config_domain_check(char *s, bool wildcard_ok, struct errbuf *err)
{
	size_t len, label = 0, i;
	char *p;

	if (!s || !*s) {
		errbuf_set(err, "empty domain");
		return -EINVAL;
	}
	len = strlen(s);
	if (len > CONFIG_HOST_MAX) {
		errbuf_set(err, "\"%.40s...\": longer than %d bytes", s,
			   CONFIG_HOST_MAX);
		return -EINVAL;
	}
	p = s;
	if (p[0] == '*') {
		if (!wildcard_ok) {
			errbuf_set(err, "\"%s\": no wildcard allowed here", s);
			return -EINVAL;
		}
		if (p[1] != '.' || p[2] == '\0') {
			errbuf_set(err,
				   "\"%s\": a wildcard must be the whole "
				   "leftmost label, as in *.example.com",
				   s);
			return -EINVAL;
		}
		p += 2;
	}
	if (strchr(p, '.') == NULL && p != s) {
		errbuf_set(err,
			   "\"%s\": a wildcard needs at least two labels "
			   "after it",
			   s);
		return -EINVAL;
	}
	for (i = 0; p[i]; i++) {
		unsigned char ch = (unsigned char)p[i];

		if (ch == '.') {
			if (label == 0) {
				errbuf_set(err, "\"%s\": empty label", s);
				return -EINVAL;
			}
			if (p[i - 1] == '-') {
				errbuf_set(err, "\"%s\": a label ends with '-'",
					   s);
				return -EINVAL;
			}
			label = 0;
			continue;
		}
		if (ch == '*') {
			errbuf_set(err,
				   "\"%s\": '*' is allowed only as the whole "
				   "leftmost label",
				   s);
			return -EINVAL;
		}
		if (ch == ':') {
			errbuf_set(err, "\"%s\": a domain has no port", s);
			return -EINVAL;
		}
		if (!isalnum(ch) && ch != '-') {
			errbuf_set(err, "\"%s\": invalid character '%c'", s,
				   isprint(ch) ? ch : '?');
			return -EINVAL;
		}
		if (ch == '-' && label == 0) {
			errbuf_set(err, "\"%s\": a label starts with '-'", s);
			return -EINVAL;
		}
		if (++label > 63) {
			errbuf_set(err, "\"%s\": a label is longer than 63", s);
			return -EINVAL;
		}
		p[i] = (char)tolower(ch);
	}
	if (label == 0) {
		errbuf_set(err,
			   "\"%s\": empty label (write domains without a "
			   "trailing dot)",
			   s);
		return -EINVAL;
	}
	if (p[i - 1] == '-') {
		errbuf_set(err, "\"%s\": a label ends with '-'", s);
		return -EINVAL;
	}
	return 0;
}

int cfg_name(struct cfg *x, const config_setting_t *g, const char *path,
	     const char *def, char **out)
{
	char key[CFG_KEY_MAX];
	const config_setting_t *w;
	const char *v, *p;
	int rc;

	rc = cfg_str(x, g, path, "name", def, &v, &w);
	if (rc < 0)
		return rc;
	cfg_key(key, path, "name");
	if (!*v || strlen(v) > CONFIG_NAME_MAX)
		return cfg_fail(x, w, key, "must be 1..%d bytes",
				CONFIG_NAME_MAX);
	for (p = v; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return cfg_fail(x, w, key, "control character");
	return cfg_dup(x, v, out);
}

int cfg_balance(struct cfg *x, const config_setting_t *g, const char *path,
		enum config_balance def, enum config_balance *out)
{
	static const char *const names[] = {"round_robin", "least_inflight",
					    "ip_hash"};
	char key[CFG_KEY_MAX];
	const config_setting_t *w;
	const char *v;
	size_t i;
	int rc;

	rc = cfg_str(x, g, path, "balance", config_balance_name(def), &v, &w);
	if (rc < 0)
		return rc;
	for (i = 0; i < 3; i++)
		if (strcmp(v, names[i]) == 0) {
			*out = (enum config_balance)i;
			return 0;
		}
	cfg_key(key, path, "balance");
	return cfg_fail(x, w, key,
			"\"%s\": expected round_robin, least_inflight or "
			"ip_hash",
			v);
}

const char *config_balance_name(enum config_balance b)
{
	switch (b) {
	case CONFIG_BALANCE_ROUND_ROBIN:
		return "round_robin";
	case CONFIG_BALANCE_LEAST_INFLIGHT:
		return "least_inflight";
	case CONFIG_BALANCE_IP_HASH:
		return "ip_hash";
	}
	return "?";
}

/* An absolute path string member ("" allowed when empty_ok). */
int cfg_path(struct cfg *x, const config_setting_t *g, const char *path,
	     const char *name, const char *def, size_t max, bool empty_ok,
	     char **out)
{
	char key[CFG_KEY_MAX];
	const config_setting_t *w;
	const char *v;
	int rc;

	rc = cfg_str(x, g, path, name, def, &v, &w);
	if (rc < 0)
		return rc;
	cfg_key(key, path, name);
	if (!(empty_ok && !*v)) {
		if (v[0] != '/')
			return cfg_fail(x, w, key,
					"\"%s\": must be an absolute path", v);
		if (strlen(v) > max)
			return cfg_fail(x, w, key, "longer than %zu bytes",
					max);
	}
	return cfg_dup(x, v, out);
}

/* Check a route prefix: "/seg[/seg...]" of RFC 3986 pchars, no
 * percent-encoding, no empty, "." or ".." segments, no trailing '/'. */
int cfg_prefix_check(const char *v, struct errbuf *e)
{
	const char *p, *seg;

	if (v[0] != '/') {
		errbuf_set(e, "\"%s\": must start with '/'", v);
		return -EINVAL;
	}
	if (strlen(v) < 2 || strlen(v) > CONFIG_PREFIX_MAX) {
		errbuf_set(e,
			   "\"%s\": must be 2..%d bytes (\"/\" is the "
			   "environment itself)",
			   v, CONFIG_PREFIX_MAX);
		return -EINVAL;
	}
	for (seg = p = v + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			size_t n = (size_t)(p - seg);

			if (n == 0) {
				errbuf_set(e,
					   "\"%s\": empty segment or trailing "
					   "'/'",
					   v);
				return -EINVAL;
			}
			if ((n == 1 && seg[0] == '.') ||
			    (n == 2 && seg[0] == '.' && seg[1] == '.')) {
				errbuf_set(e, "\"%s\": '.' or '..' segment", v);
				return -EINVAL;
			}
			if (*p == '\0')
				break;
			seg = p + 1;
			continue;
		}
		if (!isalnum((unsigned char)*p) &&
		    !strchr("-._~!$&'()*+,;=:@", *p)) {
			errbuf_set(e, "\"%s\": invalid character '%c'", v,
				   isprint((unsigned char)*p) ? *p : '?');
			return -EINVAL;
		}
	}
	return 0;
}

int cfg_ip_rules(struct cfg *x, const config_setting_t *g, const char *path,
		 const char *name, uint8_t action, struct config_project *pr)
{
	char key[CFG_KEY_MAX], ek[CFG_KEY_MAX], a[CIDR_STR_MAX];
	const config_setting_t *s;
	size_t i, n;
	int rc;

	rc = cfg_list(x, g, path, name, &s);
	if (rc < 0 || !s)
		return rc;
	cfg_key(key, path, name);
	n = (size_t)config_setting_length(s);
	for (i = 0; i < n; i++) {
		const config_setting_t *el =
		    config_setting_get_elem(s, (unsigned)i);
		const char *v = config_setting_get_string(el);
		const struct rule *old;
		struct rule r;
		struct errbuf e;
		unsigned notes = 0;
		uint32_t id;

		cfg_key_index(ek, key, i);
		memset(&r, 0, sizeof(r));
		if (cidr_parse(v, &r.cidr, &notes, &e) < 0)
			return cfg_fail(x, el, ek, "%s", e.msg);
		cidr_format(&r.cidr, a, sizeof(a));
		if (notes & CIDR_NOTE_HOST_BITS) {
			rc = cfg_warn(x, el, ek,
				      "\"%s\" has host bits set; using %s", v,
				      a);
			if (rc < 0)
				return rc;
		}
		old = rules_find(&pr->ip_rules, &r.cidr);
		if (old)
			return cfg_fail(
			    x, el, ek, "%s is already in ip_%s", a,
			    old->action == EDGE_ACT_ALLOW ? "allow" : "block");
		r.action = action;
		rc = rules_set(&pr->ip_rules, &r, NULL, &id);
		if (rc == -ENOSPC)
			return cfg_fail(x, el, ek, "too many rules (%d)",
					EDGE_MAX_RULES);
		if (rc < 0)
			return rc;
	}
	return 0;
}
