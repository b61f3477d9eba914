/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * config.c - read edged's configuration with libconfig, check every key
 * and value, and build the immutable struct config.
 *
 * The walk mirrors the file: one function per group, each given the
 * group's setting and its path ("projects[0].environments[1]"), so that
 * every error can name the file, the line and the key.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <libconfig.h>
#include <libgen.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cidr.h"
#include "config.h"
#include "duration.h"
#include "edge_maps.h"
#include "policy.h"

#define CFG_KEY_MAX 256
#define CFG_WARNINGS_MAX 64
#define CFG_SIZE_MAX (1ULL << 40) /* 1 TiB: largest byte size accepted */
#define CFG_DURATION_MAX_MS (7ULL * 24 * 3600 * 1000)
#define CFG_USER_MAX 32
#define CFG_SUN_PATH_MAX 107 /* sizeof(sun_path) - 1 */
#define CFG_PATH_MAX 4095

/* A set of strings already seen (ids, domains), remembering where. */
struct cfg_seen_entry {
	char *key;
	const config_setting_t *where;
	char path[CFG_KEY_MAX];
};

struct cfg_seen {
	struct cfg_seen_entry *v;
	size_t n, cap; /* cap: power of two, or 0 */
};

/* The state of one load. */
struct cfg {
	const char *file;
	struct errbuf *err;
	struct config *c;
	struct cfg_seen seen;
};

/* ---- errors ------------------------------------------------------------ */

static const char *cfg_file_of(const struct cfg *x, const config_setting_t *s)
{
	const char *f = s ? config_setting_source_file(s) : NULL;

	return f ? f : x->file;
}

/* Set the error "FILE:LINE: KEY: message"; returns -EINVAL. */
static int cfg_fail(struct cfg *x, const config_setting_t *s, const char *key,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int cfg_fail(struct cfg *x, const config_setting_t *s, const char *key,
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

static void cfg_key(char *buf, const char *path, const char *name)
{
	int n;

	if (path[0])
		n = snprintf(buf, CFG_KEY_MAX, "%s.%s", path, name);
	else
		n = snprintf(buf, CFG_KEY_MAX, "%s", name);
	cfg_key_done(buf, n);
}

static void cfg_key_index(char *buf, const char *path, size_t i)
{
	cfg_key_done(buf, snprintf(buf, CFG_KEY_MAX, "%s[%zu]", path, i));
}

/* ---- the set of seen names ---------------------------------------------- */

static uint64_t cfg_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static void cfg_seen_free(struct cfg_seen *st)
{
	size_t i;

	for (i = 0; i < st->cap; i++)
		free(st->v[i].key);
	free(st->v);
	st->v = NULL;
	st->n = st->cap = 0;
}

static struct cfg_seen_entry *cfg_seen_slot(struct cfg_seen_entry *v,
					    size_t cap, const char *key)
{
	size_t i = cfg_hash(key) & (cap - 1);

	while (v[i].key && strcmp(v[i].key, key) != 0)
		i = (i + 1) & (cap - 1);
	return &v[i];
}

/* Add ns+name to the set. Returns 0, -EEXIST with *prev set to the first
 * claim, or -ENOMEM. */
static int cfg_seen_add(struct cfg_seen *st, char ns, const char *name,
			const config_setting_t *where, const char *path,
			const struct cfg_seen_entry **prev)
{
	struct cfg_seen_entry *e;
	char *key;

	if (st->n * 2 >= st->cap) {
		size_t ncap = st->cap ? st->cap * 2 : 64, i;
		struct cfg_seen_entry *nv = calloc(ncap, sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		for (i = 0; i < st->cap; i++)
			if (st->v[i].key)
				*cfg_seen_slot(nv, ncap, st->v[i].key) =
				    st->v[i];
		free(st->v);
		st->v = nv;
		st->cap = ncap;
	}
	if (asprintf(&key, "%c%s", ns, name) < 0)
		return -ENOMEM;
	e = cfg_seen_slot(st->v, st->cap, key);
	if (e->key) {
		free(key);
		*prev = e;
		return -EEXIST;
	}
	e->key = key;
	e->where = where;
	snprintf(e->path, sizeof(e->path), "%s", path);
	st->n++;
	return 0;
}

/* Claim a unique name; on a repeat, the error names the first claim. */
static int cfg_unique(struct cfg *x, char ns, const char *what,
		      const char *name, const config_setting_t *s,
		      const char *key)
{
	const struct cfg_seen_entry *prev = NULL;
	int rc = cfg_seen_add(&x->seen, ns, name, s, key, &prev);

	if (rc == -EEXIST)
		return cfg_fail(x, s, key,
				"%s \"%s\" already used by %s (%s:%u)", what,
				name, prev->path, cfg_file_of(x, prev->where),
				config_setting_source_line(prev->where));
	if (rc < 0)
		errbuf_set(x->err, "%s: out of memory", x->file);
	return rc;
}

/* ---- scalar helpers ----------------------------------------------------- */

/* Reject members of group g not in names (NULL-terminated). */
static int cfg_known(struct cfg *x, const config_setting_t *g, const char *path,
		     const char *const *names)
{
	char key[CFG_KEY_MAX];
	int i, n = config_setting_length(g);

	for (i = 0; i < n; i++) {
		const config_setting_t *s = config_setting_get_elem(g, i);
		const char *name = config_setting_name(s);
		const char *const *k;

		for (k = names; *k; k++)
			if (name && strcmp(name, *k) == 0)
				break;
		if (!*k) {
			cfg_key(key, path, name ? name : "?");
			return cfg_fail(x, s, key, "unknown key");
		}
	}
	return 0;
}

/* The group member name of g (NULL when g is NULL or it is absent),
 * checked to be a group when group is true. */
static int cfg_group(struct cfg *x, const config_setting_t *g, const char *path,
		     const char *name, const config_setting_t **out)
{
	char key[CFG_KEY_MAX];
	config_setting_t *s;

	*out = NULL;
	if (!g)
		return 0;
	s = config_setting_get_member(g, name);
	if (!s)
		return 0;
	if (!config_setting_is_group(s)) {
		cfg_key(key, path, name);
		return cfg_fail(x, s, key, "expected a group { ... }");
	}
	*out = s;
	return 0;
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
static int cfg_str(struct cfg *x, const config_setting_t *g, const char *path,
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

static int cfg_dup(struct cfg *x, const char *s, char **out)
{
	*out = strdup(s);
	if (!*out) {
		errbuf_set(x->err, "%s: out of memory", x->file);
		return -ENOMEM;
	}
	return 0;
}

static int cfg_bool(struct cfg *x, const config_setting_t *g, const char *path,
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
static int cfg_uint(struct cfg *x, const config_setting_t *g, const char *path,
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
static int cfg_size(struct cfg *x, const config_setting_t *g, const char *path,
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
static int cfg_duration(struct cfg *x, const config_setting_t *g,
			const char *path, const char *name, uint64_t def,
			uint64_t min, uint64_t max, uint64_t *out)
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
static int cfg_list(struct cfg *x, const config_setting_t *g, const char *path,
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
static int cfg_addrs(struct cfg *x, const config_setting_t *g, const char *path,
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

static int cfg_id(struct cfg *x, const config_setting_t *g, const char *path,
		  char ns, const char *what, char **out)
{
	char key[CFG_KEY_MAX];
	const config_setting_t *w;
	const char *v, *p;
	int rc;

	rc = cfg_str(x, g, path, "id", NULL, &v, &w);
	if (rc < 0)
		return rc;
	cfg_key(key, path, "id");
	if (!*v || strlen(v) > CONFIG_ID_MAX)
		return cfg_fail(x, w, key, "must be 1..%d bytes",
				CONFIG_ID_MAX);
	for (p = v; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
			return cfg_fail(x, w, key,
					"\"%s\": only letters, digits, '.', "
					"'_' and '-' are allowed",
					v);
	rc = cfg_unique(x, ns, what, v, w, key);
	if (rc < 0)
		return rc;
	return cfg_dup(x, v, out);
}

static int cfg_name(struct cfg *x, const config_setting_t *g, const char *path,
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

static int cfg_balance(struct cfg *x, const config_setting_t *g,
		       const char *path, enum config_balance def,
		       enum config_balance *out)
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
static int cfg_path(struct cfg *x, const config_setting_t *g, const char *path,
		    const char *name, const char *def, size_t max,
		    bool empty_ok, char **out)
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

/* ---- top-level groups --------------------------------------------------- */

static int cfg_limits(struct cfg *x, const config_setting_t *root)
{
	static const char *const keys[] = {"max_connections",
					   "max_request_line",
					   "max_header_bytes",
					   "max_headers",
					   "max_body_bytes",
					   "max_inflight",
					   "max_inflight_per_route",
					   "body_buffer",
					   NULL};
	struct config_limits *l = &x->c->limits;
	const config_setting_t *g;
	int rc;

	rc = cfg_group(x, root, "", "limits", &g);
	if (rc == 0 && g)
		rc = cfg_known(x, g, "limits", keys);
	if (rc == 0)
		rc = cfg_uint(x, g, "limits", "max_connections", 10000, 1,
			      1000000, &l->max_connections);
	if (rc == 0)
		rc = cfg_size(x, g, "limits", "max_request_line", 8192, 256,
			      65536, &l->max_request_line);
	if (rc == 0)
		rc = cfg_size(x, g, "limits", "max_header_bytes", 32768, 1024,
			      1 << 20, &l->max_header_bytes);
	if (rc == 0)
		rc = cfg_uint(x, g, "limits", "max_headers", 100, 1, 1000,
			      &l->max_headers);
	if (rc == 0)
		rc = cfg_size(x, g, "limits", "max_body_bytes", 10 << 20, 0,
			      CFG_SIZE_MAX, &l->max_body_bytes);
	if (rc == 0)
		rc = cfg_uint(x, g, "limits", "max_inflight", 16384, 0,
			      10000000, &l->max_inflight);
	if (rc == 0)
		rc = cfg_uint(x, g, "limits", "max_inflight_per_route", 4096, 0,
			      10000000, &l->max_inflight_per_route);
	if (rc == 0)
		rc = cfg_size(x, g, "limits", "body_buffer",
			      CONFIG_BODY_BUFFER_DEFAULT, 0,
			      CONFIG_BODY_BUFFER_MAX, &l->body_buffer);
	return rc;
}

#define CFG_S 1000ULL
#define CFG_MIN (60 * CFG_S)
#define CFG_H (3600 * CFG_S)

static int cfg_timeouts(struct cfg *x, const config_setting_t *root)
{
	static const char *const keys[] = {"header",
					   "body",
					   "body_min_rate",
					   "idle_keepalive",
					   "upstream_connect",
					   "upstream_response",
					   "tunnel_idle",
					   "drain",
					   NULL};
	struct config_timeouts *t = &x->c->timeouts;
	const char *p = "timeouts";
	const config_setting_t *g;
	int rc;

	rc = cfg_group(x, root, "", p, &g);
	if (rc == 0 && g)
		rc = cfg_known(x, g, p, keys);
	if (rc == 0)
		rc = cfg_duration(x, g, p, "header", 10 * CFG_S, 100,
				  10 * CFG_MIN, &t->header_ms);
	if (rc == 0)
		rc = cfg_duration(x, g, p, "body", 30 * CFG_S, 100, CFG_H,
				  &t->body_ms);
	if (rc == 0)
		rc = cfg_uint(x, g, p, "body_min_rate", 1024, 0, 1ULL << 30,
			      &t->body_min_rate);
	if (rc == 0)
		rc = cfg_duration(x, g, p, "idle_keepalive", 60 * CFG_S, 100,
				  CFG_H, &t->idle_keepalive_ms);
	if (rc == 0)
		rc = cfg_duration(x, g, p, "upstream_connect", 5 * CFG_S, 10,
				  5 * CFG_MIN, &t->upstream_connect_ms);
	if (rc == 0)
		rc = cfg_duration(x, g, p, "upstream_response", 60 * CFG_S, 100,
				  CFG_H, &t->upstream_response_ms);
	if (rc == 0)
		rc = cfg_duration(x, g, p, "tunnel_idle", 5 * CFG_MIN, CFG_S,
				  CFG_DURATION_MAX_MS, &t->tunnel_idle_ms);
	if (rc == 0)
		rc = cfg_duration(x, g, p, "drain", 30 * CFG_S, 100, CFG_H,
				  &t->drain_ms);
	return rc;
}

static int cfg_ratelimit(struct cfg *x, const config_setting_t *root)
{
	static const char *const keys[] = {"rate", "burst", NULL};
	struct config_ratelimit *r = &x->c->ratelimit;
	const config_setting_t *g, *w;
	struct errbuf e;
	const char *v;
	uint64_t burst;
	int rc;

	rc = cfg_group(x, root, "", "ratelimit", &g);
	if (rc == 0 && g)
		rc = cfg_known(x, g, "ratelimit", keys);
	if (rc == 0)
		rc = cfg_str(x, g, "ratelimit", "rate", "off", &v, &w);
	if (rc < 0)
		return rc;
	r->per_min = 0;
	if (strcmp(v, "off") != 0 && policy_rate_parse(v, &r->per_min, &e) < 0)
		return cfg_fail(x, w, "ratelimit.rate", "%s", e.msg);
	rc = cfg_uint(x, g, "ratelimit", "burst", 0, 1, EDGE_RL_BURST_MAX,
		      &burst);
	if (rc < 0)
		return rc;
	r->burst = burst ? burst : policy_burst_default(r->per_min);
	return 0;
}

static int cfg_analytics(struct cfg *x, const config_setting_t *root)
{
	static const char *const keys[] = {"file", "queue", NULL};
	const config_setting_t *g;
	int rc;

	rc = cfg_group(x, root, "", "analytics", &g);
	if (rc == 0 && g)
		rc = cfg_known(x, g, "analytics", keys);
	if (rc == 0)
		rc = cfg_path(x, g, "analytics", "file", "", CFG_PATH_MAX, true,
			      &x->c->analytics.file);
	if (rc == 0)
		rc = cfg_uint(x, g, "analytics", "queue", 65536, 16, 1 << 24,
			      &x->c->analytics.queue);
	return rc;
}

/* ---- projects ----------------------------------------------------------- */

static int cfg_security(struct cfg *x, const config_setting_t *env,
			const char *path, struct config_security_headers *sh)
{
	static const char *const keys[] = {
	    "hsts",    "hsts_max_age",	"hsts_subdomains",
	    "nosniff", "frame_options", "referrer_policy",
	    NULL};
	static const char *const frames[] = {"", "DENY", "SAMEORIGIN", NULL};
	static const char *const referrers[] = {
	    "",
	    "no-referrer",
	    "no-referrer-when-downgrade",
	    "origin",
	    "origin-when-cross-origin",
	    "same-origin",
	    "strict-origin",
	    "strict-origin-when-cross-origin",
	    "unsafe-url",
	    NULL};
	char p[CFG_KEY_MAX], key[CFG_KEY_MAX];
	const config_setting_t *g, *w;
	const char *const *k;
	const char *v;
	struct errbuf e;
	uint64_t secs;
	int rc;

	cfg_key(p, path, "security_headers");
	rc = cfg_group(x, env, path, "security_headers", &g);
	if (rc == 0 && g)
		rc = cfg_known(x, g, p, keys);
	if (rc == 0)
		rc = cfg_bool(x, g, p, "hsts", false, &sh->hsts);
	if (rc == 0)
		rc = cfg_bool(x, g, p, "hsts_subdomains", false,
			      &sh->hsts_subdomains);
	if (rc == 0)
		rc = cfg_bool(x, g, p, "nosniff", true, &sh->nosniff);
	if (rc == 0)
		rc = cfg_str(x, g, p, "hsts_max_age", "365d", &v, &w);
	if (rc < 0)
		return rc;
	if (duration_parse(v, &secs, &e) < 0) {
		cfg_key(key, p, "hsts_max_age");
		return cfg_fail(x, w, key, "%s", e.msg);
	}
	sh->hsts_max_age_s = secs;
	rc = cfg_str(x, g, p, "frame_options", "", &v, &w);
	if (rc < 0)
		return rc;
	for (k = frames; *k && strcmp(*k, v) != 0; k++)
		;
	if (!*k) {
		cfg_key(key, p, "frame_options");
		return cfg_fail(x, w, key,
				"\"%s\": expected \"DENY\", \"SAMEORIGIN\" or "
				"\"\"",
				v);
	}
	rc = cfg_dup(x, v, &sh->frame_options);
	if (rc == 0)
		rc = cfg_str(x, g, p, "referrer_policy", "", &v, &w);
	if (rc < 0)
		return rc;
	for (k = referrers; *k && strcmp(*k, v) != 0; k++)
		;
	if (!*k) {
		cfg_key(key, p, "referrer_policy");
		return cfg_fail(x, w, key, "\"%s\": not a Referrer-Policy", v);
	}
	return cfg_dup(x, v, &sh->referrer_policy);
}

/* Check a route prefix: "/seg[/seg...]" of RFC 3986 pchars, no
 * percent-encoding, no empty, "." or ".." segments, no trailing '/'. */
static int cfg_prefix_check(const char *v, struct errbuf *e)
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

static int cfg_route(struct cfg *x, const config_setting_t *g, const char *path,
		     const struct config_environment *env,
		     struct config_route *r)
{
	static const char *const keys[] = {"prefix",	     "strip_prefix",
					   "upstreams",	     "balance",
					   "max_body_bytes", NULL};
	char key[CFG_KEY_MAX];
	const config_setting_t *w;
	const char *v;
	struct errbuf e;
	int rc;

	if (!config_setting_is_group(g))
		return cfg_fail(x, g, path, "expected a group { ... }");
	rc = cfg_known(x, g, path, keys);
	if (rc == 0)
		rc = cfg_str(x, g, path, "prefix", NULL, &v, &w);
	if (rc < 0)
		return rc;
	cfg_key(key, path, "prefix");
	if (cfg_prefix_check(v, &e) < 0)
		return cfg_fail(x, w, key, "%s", e.msg);
	rc = cfg_dup(x, v, &r->prefix);
	if (rc == 0)
		rc = cfg_bool(x, g, path, "strip_prefix", false,
			      &r->strip_prefix);
	if (rc == 0)
		rc = cfg_addrs(x, g, path, "upstreams", CONFIG_UPSTREAMS_MAX,
			       false, &r->upstreams, &r->n_upstreams);
	if (rc == 0)
		rc = cfg_balance(x, g, path, env->deployment.balance,
				 &r->balance);
	if (rc == 0)
		rc = cfg_size(x, g, path, "max_body_bytes", env->max_body_bytes,
			      0, CFG_SIZE_MAX, &r->max_body_bytes);
	return rc;
}

static int cfg_deployment(struct cfg *x, const config_setting_t *env,
			  const char *path, struct config_deployment *d)
{
	static const char *const keys[] = {"id", "upstreams", "balance", NULL};
	char p[CFG_KEY_MAX];
	const config_setting_t *g;
	int rc;

	cfg_key(p, path, "deployment");
	rc = cfg_group(x, env, path, "deployment", &g);
	if (rc < 0)
		return rc;
	if (!g)
		return cfg_fail(x, env, p, "missing (required)");
	rc = cfg_known(x, g, p, keys);
	if (rc == 0)
		rc = cfg_id(x, g, p, 'd', "deployment id", &d->id);
	if (rc == 0)
		rc = cfg_addrs(x, g, p, "upstreams", CONFIG_UPSTREAMS_MAX, true,
			       &d->upstreams, &d->n_upstreams);
	if (rc == 0)
		rc = cfg_balance(x, g, p, CONFIG_BALANCE_ROUND_ROBIN,
				 &d->balance);
	return rc;
}

static int cfg_environment(struct cfg *x, const config_setting_t *g,
			   const char *path, struct config_environment *env)
{
	static const char *const keys[] = {
	    "id",	  "name",	    "domains",		"routes",
	    "deployment", "max_body_bytes", "security_headers", NULL};
	char key[CFG_KEY_MAX], ek[CFG_KEY_MAX];
	const config_setting_t *s;
	struct errbuf e;
	size_t i, j, n;
	int rc;

	if (!config_setting_is_group(g))
		return cfg_fail(x, g, path, "expected a group { ... }");
	rc = cfg_known(x, g, path, keys);
	if (rc == 0)
		rc = cfg_id(x, g, path, 'e', "environment id", &env->id);
	if (rc == 0)
		rc = cfg_name(x, g, path, env->id, &env->name);
	if (rc == 0)
		rc = cfg_size(x, g, path, "max_body_bytes",
			      x->c->limits.max_body_bytes, 0, CFG_SIZE_MAX,
			      &env->max_body_bytes);
	if (rc == 0)
		rc = cfg_deployment(x, g, path, &env->deployment);
	if (rc == 0)
		rc = cfg_security(x, g, path, &env->security);
	if (rc == 0)
		rc = cfg_list(x, g, path, "domains", &s);
	if (rc < 0)
		return rc;
	cfg_key(key, path, "domains");
	if (!s)
		return cfg_fail(x, g, key, "missing (required)");
	n = (size_t)config_setting_length(s);
	if (n == 0)
		return cfg_fail(x, s, key, "needs at least one domain");
	env->domains = calloc(n, sizeof(*env->domains));
	if (!env->domains)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		const config_setting_t *el =
		    config_setting_get_elem(s, (unsigned)i);

		cfg_key_index(ek, key, i);
		rc =
		    cfg_dup(x, config_setting_get_string(el), &env->domains[i]);
		if (rc < 0)
			return rc;
		env->n_domains++;
		if (config_domain_check(env->domains[i], true, &e) < 0)
			return cfg_fail(x, el, ek, "%s", e.msg);
		rc = cfg_unique(x, 'h', "domain", env->domains[i], el, ek);
		if (rc < 0)
			return rc;
	}

	s = config_setting_get_member(g, "routes");
	if (!s)
		return 0;
	cfg_key(key, path, "routes");
	if (config_setting_type(s) != CONFIG_TYPE_LIST)
		return cfg_fail(x, s, key, "expected a list ( { ... }, ... )");
	n = (size_t)config_setting_length(s);
	if (n == 0)
		return 0;
	env->routes = calloc(n, sizeof(*env->routes));
	if (!env->routes)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		const config_setting_t *el =
		    config_setting_get_elem(s, (unsigned)i);

		cfg_key_index(ek, key, i);
		env->n_routes++;
		rc = cfg_route(x, el, ek, env, &env->routes[i]);
		if (rc < 0)
			return rc;
		for (j = 0; j < i; j++)
			if (strcmp(env->routes[j].prefix,
				   env->routes[i].prefix) == 0)
				return cfg_fail(x, el, ek,
						"prefix \"%s\" is already "
						"routed by %s[%zu]",
						env->routes[i].prefix, key, j);
	}
	return 0;
}

static int cfg_ip_rules(struct cfg *x, const config_setting_t *g,
			const char *path, const char *name, uint8_t action,
			struct config_project *pr)
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

/* Whether the project's allow rules make its list exclusive: some allow
 * rule is not an exception carved out of a block rule. */
static bool cfg_allow_exclusive(const struct rules *r)
{
	size_t i, j;

	for (i = 0; i < r->n; i++) {
		bool inside = false;

		if (r->v[i].action != EDGE_ACT_ALLOW)
			continue;
		for (j = 0; j < r->n && !inside; j++)
			inside = r->v[j].action == EDGE_ACT_BLOCK &&
				 cidr_contains(&r->v[j].cidr, &r->v[i].cidr);
		if (!inside)
			return true;
	}
	return false;
}

static int cfg_project(struct cfg *x, const config_setting_t *g,
		       const char *path, struct config_project *pr)
{
	static const char *const keys[] = {
	    "id",	"name",		"enabled", "ip_allow",
	    "ip_block", "environments", NULL};
	char key[CFG_KEY_MAX], ek[CFG_KEY_MAX];
	const config_setting_t *s;
	size_t i, n;
	int rc;

	if (!config_setting_is_group(g))
		return cfg_fail(x, g, path, "expected a group { ... }");
	rc = cfg_known(x, g, path, keys);
	if (rc == 0)
		rc = cfg_id(x, g, path, 'p', "project id", &pr->id);
	if (rc == 0)
		rc = cfg_name(x, g, path, pr->id, &pr->name);
	if (rc == 0)
		rc = cfg_bool(x, g, path, "enabled", true, &pr->enabled);
	if (rc == 0)
		rc = cfg_ip_rules(x, g, path, "ip_allow", EDGE_ACT_ALLOW, pr);
	if (rc == 0)
		rc = cfg_ip_rules(x, g, path, "ip_block", EDGE_ACT_BLOCK, pr);
	if (rc < 0)
		return rc;
	pr->has_allow = cfg_allow_exclusive(&pr->ip_rules);
	cfg_key(key, path, "environments");
	s = config_setting_get_member(g, "environments");
	if (!s)
		return cfg_fail(x, g, key, "missing (required)");
	if (config_setting_type(s) != CONFIG_TYPE_LIST)
		return cfg_fail(x, s, key, "expected a list ( { ... }, ... )");
	n = (size_t)config_setting_length(s);
	if (n == 0)
		return cfg_fail(x, s, key, "needs at least one environment");
	pr->envs = calloc(n, sizeof(*pr->envs));
	if (!pr->envs)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		cfg_key_index(ek, key, i);
		pr->n_envs++;
		rc = cfg_environment(x, config_setting_get_elem(s, (unsigned)i),
				     ek, &pr->envs[i]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int cfg_projects(struct cfg *x, const config_setting_t *root)
{
	char ek[CFG_KEY_MAX];
	config_setting_t *s = config_setting_get_member(root, "projects");
	size_t i, n;
	int rc;

	if (!s)
		return 0;
	if (config_setting_type(s) != CONFIG_TYPE_LIST)
		return cfg_fail(x, s, "projects",
				"expected a list ( { ... }, ... )");
	n = (size_t)config_setting_length(s);
	if (n == 0)
		return 0;
	x->c->projects = calloc(n, sizeof(*x->c->projects));
	if (!x->c->projects)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		cfg_key_index(ek, "projects", i);
		x->c->n_projects++;
		rc = cfg_project(x, config_setting_get_elem(s, (unsigned)i), ek,
				 &x->c->projects[i]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- the root ----------------------------------------------------------- */

static int cfg_user(struct cfg *x, const config_setting_t *root)
{
	const config_setting_t *w;
	const char *v, *p;
	int rc;

	rc = cfg_str(x, root, "", "user", CONFIG_DEFAULT_USER, &v, &w);
	if (rc < 0)
		return rc;
	if (!*v || strlen(v) > CFG_USER_MAX || v[0] == '-')
		return cfg_fail(x, w, "user", "\"%s\": not a valid user name",
				v);
	for (p = v; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
			return cfg_fail(x, w, "user",
					"\"%s\": not a valid user name", v);
	return cfg_dup(x, v, &x->c->user);
}

static int cfg_root(struct cfg *x, const config_setting_t *root)
{
	static const char *const keys[] = {
	    "listen",	      "workers",   "user",     "admin_listen",
	    "control_socket", "pin_dir",   "limits",   "timeouts",
	    "ratelimit",      "analytics", "projects", NULL};
	struct config *c = x->c;
	const config_setting_t *w;
	struct errbuf e;
	const char *v;
	uint64_t workers;
	long ncpu;
	size_t i;
	int rc;

	rc = cfg_known(x, root, "", keys);
	if (rc < 0)
		return rc;
	rc = cfg_addrs(x, root, "", "listen", CONFIG_LISTEN_MAX, false,
		       &c->listen, &c->n_listen);
	if (rc < 0)
		return rc;
	if (!c->listen) {
		c->listen = calloc(1, sizeof(*c->listen));
		if (!c->listen)
			return -ENOMEM;
		c->n_listen = 1;
		config_addr_parse(CONFIG_DEFAULT_LISTEN, c->listen, NULL);
	}
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu < 1)
		ncpu = 1;
	if (ncpu > CONFIG_WORKERS_MAX)
		ncpu = CONFIG_WORKERS_MAX;
	rc = cfg_uint(x, root, "", "workers", (uint64_t)ncpu, 1,
		      CONFIG_WORKERS_MAX, &workers);
	if (rc < 0)
		return rc;
	c->workers = (unsigned)workers;
	rc = cfg_user(x, root);
	if (rc == 0)
		rc = cfg_str(x, root, "", "admin_listen", CONFIG_DEFAULT_ADMIN,
			     &v, &w);
	if (rc < 0)
		return rc;
	if (config_addr_parse(v, &c->admin_listen, &e) < 0)
		return cfg_fail(x, w, "admin_listen", "%s", e.msg);
	for (i = 0; i < c->n_listen; i++)
		if (strcmp(c->listen[i].text, c->admin_listen.text) == 0)
			return cfg_fail(x, w, "admin_listen",
					"%s is also in listen", v);
	rc = cfg_path(x, root, "", "control_socket", CONFIG_DEFAULT_CONTROL,
		      CFG_SUN_PATH_MAX, false, &c->control_socket);
	if (rc == 0)
		rc = cfg_path(x, root, "", "pin_dir", EDGE_PIN_DIR_DEFAULT,
			      CFG_PATH_MAX, false, &c->pin_dir);
	if (rc == 0)
		rc = cfg_limits(x, root);
	if (rc == 0)
		rc = cfg_timeouts(x, root);
	if (rc == 0)
		rc = cfg_ratelimit(x, root);
	if (rc == 0)
		rc = cfg_analytics(x, root);
	if (rc == 0)
		rc = cfg_projects(x, root);
	return rc;
}

int config_load(const char *path, struct config **out, struct errbuf *err)
{
	struct cfg x = {.file = path, .err = err};
	char *dir = NULL;
	config_t lc;
	FILE *f;
	int rc;

	errbuf_clear(err);
	config_init(&lc);
	x.c = calloc(1, sizeof(*x.c));
	f = fopen(path, "r");
	if (!f) {
		rc = -errno;
		errbuf_set(err, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (!x.c || cfg_dup(&x, path, &x.c->path) < 0) {
		rc = -ENOMEM;
		errbuf_set(err, "%s: out of memory", path);
		goto out;
	}
	/* @include "file" is relative to the including file's folder */
	dir = strdup(path);
	if (dir)
		config_set_include_dir(&lc, dirname(dir));
	if (config_read(&lc, f) != CONFIG_TRUE) {
		const char *ef = config_error_file(&lc);

		rc = -EINVAL;
		errbuf_set(err, "%s:%d: syntax: %s", ef ? ef : path,
			   config_error_line(&lc), config_error_text(&lc));
		goto out;
	}
	rc = cfg_root(&x, config_root_setting(&lc));
	if (rc == -ENOMEM && !err->msg[0])
		errbuf_set(err, "%s: out of memory", path);
	if (rc == 0) {
		*out = x.c;
		x.c = NULL;
	}
out:
	if (f)
		fclose(f);
	cfg_seen_free(&x.seen);
	config_destroy(&lc);
	free(dir);
	config_free(x.c);
	return rc;
}

static void cfg_free_env(struct config_environment *env)
{
	size_t i;

	free(env->id);
	free(env->name);
	for (i = 0; i < env->n_domains; i++)
		free(env->domains[i]);
	free(env->domains);
	for (i = 0; i < env->n_routes; i++) {
		free(env->routes[i].prefix);
		free(env->routes[i].upstreams);
	}
	free(env->routes);
	free(env->deployment.id);
	free(env->deployment.upstreams);
	free(env->security.frame_options);
	free(env->security.referrer_policy);
}

void config_free(struct config *c)
{
	size_t i, j;

	if (!c)
		return;
	for (i = 0; i < c->n_projects; i++) {
		struct config_project *pr = &c->projects[i];

		free(pr->id);
		free(pr->name);
		rules_free(&pr->ip_rules);
		for (j = 0; j < pr->n_envs; j++)
			cfg_free_env(&pr->envs[j]);
		free(pr->envs);
	}
	free(c->projects);
	for (i = 0; i < c->n_warnings; i++)
		free(c->warnings[i]);
	free(c->warnings);
	free(c->path);
	free(c->listen);
	free(c->user);
	free(c->control_socket);
	free(c->pin_dir);
	free(c->analytics.file);
	free(c);
}
