/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * config_value.c - the configuration's typed values: one setting read,
 * checked on its own and turned into a string, boolean, number, size,
 * duration, path, endpoint list or CIDR rule list, every error naming
 * the file, the line and the key (config_value.h).
 *
 * Every getter starts the same way (cfg_member: the setting and its key
 * path; the default when it is absent) and differs only in how it reads
 * and checks the value.
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
#include "duration.h"
#include "edge_maps.h"
#include "policy.h"

#define CFG_WARNINGS_MAX 64
#define CFG_USER_MAX 32

/* ---- errors and key paths ----------------------------------------------- */

void cfg_where(const struct cfg *x, const config_setting_t *s,
	       const char **file, unsigned *line)
{
	/* libconfig read one text (config_file.h): its line numbers are
	 * the text's, which src maps back to a file and a line */
	unsigned l = s ? config_setting_source_line(s) : 0;

	*file = x->file;
	*line = 0;
	if (l && x->src)
		config_file_where(x->src, l, file, line);
	if (!*file)
		*file = x->file;
}

int cfg_fail(struct cfg *x, const config_setting_t *s, const char *key,
	     const char *fmt, ...)
{
	char msg[ERRBUF_LEN];
	const char *file;
	unsigned line;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cfg_where(x, s, &file, &line);
	if (line)
		errbuf_set(x->err, "%s:%u: %s: %s", file, line, key, msg);
	else
		errbuf_set(x->err, "%s: %s: %s", file, key, msg);
	return -EINVAL;
}

int cfg_nomem(struct cfg *x)
{
	errbuf_set(x->err, "%s: out of memory", x->file);
	return -ENOMEM;
}

/* Append a warning in the same form as an error. */
static int cfg_warn(struct cfg *x, const config_setting_t *s, const char *key,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int cfg_warn(struct cfg *x, const config_setting_t *s, const char *key,
		    const char *fmt, ...)
{
	char msg[ERRBUF_LEN], *w;
	const char *file;
	unsigned line;
	char **v;
	va_list ap;
	int n;

	if (x->c->n_warnings >= CFG_WARNINGS_MAX)
		return 0;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cfg_where(x, s, &file, &line);
	n = asprintf(&w, "%s:%u: %s: %s", file, line, key, msg);
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

config_setting_t *cfg_member(const config_setting_t *g, const char *path,
			     const char *name, char *key)
{
	cfg_key(key, path, name);
	return g ? config_setting_get_member(g, name) : NULL;
}

/* ---- scalars ------------------------------------------------------------ */

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

/* "expected WHAT, found TYPE" about setting s. */
static int cfg_expected(struct cfg *x, const config_setting_t *s,
			const char *key, const char *what)
{
	return cfg_fail(x, s, key, "expected %s, found %s", what,
			cfg_type_name(s));
}

static bool cfg_is_int(const config_setting_t *s)
{
	return config_setting_type(s) == CONFIG_TYPE_INT ||
	       config_setting_type(s) == CONFIG_TYPE_INT64;
}

int cfg_str(struct cfg *x, const config_setting_t *g, const char *path,
	    const char *name, const char *def, const char **out,
	    struct cfg_at *at)
{
	config_setting_t *s = cfg_member(g, path, name, at->key);

	at->s = s ? s : g;
	if (!s) {
		*out = def;
		if (!def)
			return cfg_fail(x, g, at->key, "missing (required)");
		return 0;
	}
	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return cfg_expected(x, s, at->key, "a string");
	*out = config_setting_get_string(s);
	return 0;
}

int cfg_text(struct cfg *x, const config_setting_t *g, const char *path,
	     const char *name, const char *def, size_t max, const char **out,
	     struct cfg_at *at)
{
	int rc = cfg_str(x, g, path, name, def, out, at);

	if (rc == 0 && (!**out || strlen(*out) > max))
		return cfg_fail(x, at->s, at->key, "must be 1..%zu bytes", max);
	return rc;
}

bool cfg_is_word(const char *s)
{
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("._-", *s))
			return false;
	return true;
}

int cfg_dup(struct cfg *x, const char *s, char **out)
{
	*out = strdup(s);
	return *out ? 0 : cfg_nomem(x);
}

int cfg_bool(struct cfg *x, const config_setting_t *g, const char *path,
	     const char *name, bool def, bool *out)
{
	char key[CFG_KEY_MAX];
	const config_setting_t *s = cfg_member(g, path, name, key);

	*out = def;
	if (!s)
		return 0;
	if (config_setting_type(s) != CONFIG_TYPE_BOOL)
		return cfg_expected(x, s, key, "true or false");
	*out = config_setting_get_bool(s);
	return 0;
}

/* The integer setting s as written in the file (config_load hung it on
 * s), NULL (with x->err set) when it has none: the value libconfig read
 * may have lost bits, so it is never used. */
static const struct config_file_int *
cfg_int_of(struct cfg *x, const config_setting_t *s, const char *key)
{
	const struct config_file_int *v = config_setting_get_hook(s);

	if (!v)
		cfg_fail(x, s, key,
			 "internal error: integer not found in the "
			 "file's text");
	return v;
}

/* Whether v, a non-negative integer that fits in 64 bits, lies in
 * [min, max]. */
static bool cfg_int_in(const struct config_file_int *v, uint64_t min,
		       uint64_t max)
{
	return !v->big && (!v->neg || v->mag == 0) && v->mag >= min &&
	       v->mag <= max;
}

/* CFG_COUNT: an integer in [min, max]. */
static int cfg_count_of(struct cfg *x, const config_setting_t *s,
			const char *key, uint64_t min, uint64_t max,
			uint64_t *out)
{
	const struct config_file_int *v;

	if (!cfg_is_int(s))
		return cfg_expected(x, s, key, "an integer");
	v = cfg_int_of(x, s, key);
	if (!v)
		return -EINVAL;
	if (!cfg_int_in(v, min, max))
		return cfg_fail(x, s, key, "%s is out of range %llu..%llu",
				v->text, (unsigned long long)min,
				(unsigned long long)max);
	*out = v->mag;
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

/* CFG_BYTES: an integer, or a string with a K/M/G suffix, in [min, max]. */
static int cfg_bytes_of(struct cfg *x, const config_setting_t *s,
			const char *key, uint64_t min, uint64_t max,
			uint64_t *out)
{
	struct errbuf e;
	uint64_t v;

	if (cfg_is_int(s)) {
		const struct config_file_int *i = cfg_int_of(x, s, key);

		if (!i)
			return -EINVAL;
		if (i->neg && (i->mag || i->big))
			return cfg_fail(x, s, key, "negative size %s", i->text);
		if (!cfg_int_in(i, min, max))
			return cfg_fail(x, s, key,
					"%s bytes is out of range %llu..%llu",
					i->text, (unsigned long long)min,
					(unsigned long long)max);
		v = i->mag;
	} else if (config_setting_type(s) == CONFIG_TYPE_STRING) {
		if (cfg_size_parse(config_setting_get_string(s), &v, &e) < 0)
			return cfg_fail(x, s, key, "\"%s\": %s",
					config_setting_get_string(s), e.msg);
	} else {
		return cfg_expected(x, s, key, "a size");
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
	return duration_parse_ms(s, CFG_DURATION_MAX_MS, ms, err);
}

/* CFG_MS: a duration string such as "10s", in ms, within [min, max]. */
static int cfg_ms_of(struct cfg *x, const config_setting_t *s, const char *key,
		     uint64_t min, uint64_t max, uint64_t *out)
{
	struct errbuf e;
	uint64_t v;

	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return cfg_expected(x, s, key,
				    "a duration string such as \"10s\"");
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

int cfg_number(struct cfg *x, const config_setting_t *g, const char *path,
	       const char *name, enum cfg_unit unit, uint64_t def, uint64_t min,
	       uint64_t max, uint64_t *out)
{
	char key[CFG_KEY_MAX];
	const config_setting_t *s = cfg_member(g, path, name, key);

	*out = def;
	if (!s)
		return 0;
	switch (unit) {
	case CFG_COUNT:
		return cfg_count_of(x, s, key, min, max, out);
	case CFG_BYTES:
		return cfg_bytes_of(x, s, key, min, max, out);
	case CFG_MS:
		return cfg_ms_of(x, s, key, min, max, out);
	}
	return cfg_fail(x, s, key, "unknown unit %d", (int)unit);
}

int cfg_seconds(struct cfg *x, const config_setting_t *g, const char *path,
		const char *name, const char *def, uint64_t *out)
{
	struct cfg_at at;
	struct errbuf e;
	const char *v;
	int rc;

	rc = cfg_str(x, g, path, name, def, &v, &at);
	if (rc == 0 && duration_parse(v, out, &e) < 0)
		return cfg_fail(x, at.s, at.key, "%s", e.msg);
	return rc;
}

int cfg_rate(struct cfg *x, const config_setting_t *g, const char *path,
	     const char *name, uint64_t *out)
{
	struct cfg_at at;
	struct errbuf e;
	const char *v;
	int rc;

	*out = 0;
	rc = cfg_str(x, g, path, name, "off", &v, &at);
	if (rc == 0 && strcmp(v, "off") != 0 &&
	    policy_rate_parse(v, out, &e) < 0)
		return cfg_fail(x, at.s, at.key, "%s", e.msg);
	return rc;
}

int cfg_choice(struct cfg *x, const config_setting_t *g, const char *path,
	       const char *name, const char *def, const char *const *names,
	       const char *why, size_t *index)
{
	struct cfg_at at;
	const char *v;
	size_t i;
	int rc;

	rc = cfg_str(x, g, path, name, def, &v, &at);
	if (rc < 0)
		return rc;
	for (i = 0; names[i]; i++)
		if (strcmp(names[i], v) == 0) {
			*index = i;
			return 0;
		}
	return cfg_fail(x, at.s, at.key, "\"%s\": %s", v, why);
}

/* ---- lists and addresses ------------------------------------------------ */

int cfg_list(struct cfg *x, const config_setting_t *g, const char *path,
	     const char *name, char *key, const config_setting_t **out)
{
	char ek[CFG_KEY_MAX];
	config_setting_t *s = cfg_member(g, path, name, key);
	int i, n;

	*out = NULL;
	if (!s)
		return 0;
	if (config_setting_type(s) != CONFIG_TYPE_ARRAY &&
	    config_setting_type(s) != CONFIG_TYPE_LIST)
		return cfg_expected(x, s, key, "a list [ ... ]");
	n = config_setting_length(s);
	for (i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(s, i);

		if (config_setting_type(e) != CONFIG_TYPE_STRING) {
			cfg_key_index(ek, key, (size_t)i);
			return cfg_expected(x, e, ek, "a string");
		}
	}
	*out = s;
	return 0;
}

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
	rc = cfg_list(x, g, path, name, key, &s);
	if (rc < 0)
		return rc;
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
	if (!v)
		return cfg_nomem(x);
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

int cfg_ip_rules(struct cfg *x, const config_setting_t *g, const char *path,
		 const char *name, uint8_t action, struct rules *rules)
{
	char key[CFG_KEY_MAX], ek[CFG_KEY_MAX], a[CIDR_STR_MAX];
	const config_setting_t *s;
	size_t i, n;
	int rc;

	rc = cfg_list(x, g, path, name, key, &s);
	if (rc < 0 || !s)
		return rc;
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
		old = rules_find(rules, &r.cidr);
		if (old)
			return cfg_fail(
			    x, el, ek, "%s is already in ip_%s", a,
			    old->action == EDGE_ACT_ALLOW ? "allow" : "block");
		r.action = action;
		rc = rules_set(rules, &r, NULL, &id);
		if (rc == -ENOSPC)
			return cfg_fail(x, el, ek, "too many rules (%d)",
					EDGE_MAX_RULES);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- names and paths ---------------------------------------------------- */

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
	struct cfg_at at;
	const char *v, *p;
	int rc;

	rc = cfg_text(x, g, path, "name", def, CONFIG_NAME_MAX, &v, &at);
	if (rc < 0)
		return rc;
	for (p = v; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return cfg_fail(x, at.s, at.key, "control character");
	return cfg_dup(x, v, out);
}

int cfg_user(struct cfg *x, const config_setting_t *g, const char *path,
	     const char *name, const char *def, char **out)
{
	struct cfg_at at;
	const char *v;
	int rc;

	rc = cfg_str(x, g, path, name, def, &v, &at);
	if (rc < 0)
		return rc;
	if (!*v || strlen(v) > CFG_USER_MAX || v[0] == '-' || !cfg_is_word(v))
		return cfg_fail(x, at.s, at.key,
				"\"%s\": not a valid user name", v);
	return cfg_dup(x, v, out);
}

/* Indexed by enum config_balance; NULL-terminated for cfg_choice. */
static const char *const cfg_balance_names[] = {"round_robin", "least_inflight",
						"ip_hash", NULL};

#define CFG_BALANCE_N (CFG_NELEM(cfg_balance_names) - 1)

int cfg_balance(struct cfg *x, const config_setting_t *g, const char *path,
		enum config_balance def, enum config_balance *out)
{
	size_t i;
	int rc;

	rc = cfg_choice(x, g, path, "balance", config_balance_name(def),
			cfg_balance_names,
			"expected round_robin, least_inflight or ip_hash", &i);
	if (rc == 0)
		*out = (enum config_balance)i;
	return rc;
}

const char *config_balance_name(enum config_balance b)
{
	return (size_t)b < CFG_BALANCE_N ? cfg_balance_names[b] : "?";
}

int cfg_path(struct cfg *x, const config_setting_t *g, const char *path,
	     const char *name, const char *def, size_t max, bool empty_ok,
	     char **out)
{
	struct cfg_at at;
	const char *v;
	int rc;

	rc = cfg_str(x, g, path, name, def, &v, &at);
	if (rc < 0)
		return rc;
	if (!(empty_ok && !*v)) {
		if (v[0] != '/')
			return cfg_fail(x, at.s, at.key,
					"\"%s\": must be an absolute path", v);
		if (strlen(v) > max)
			return cfg_fail(x, at.s, at.key,
					"longer than %zu bytes", max);
	}
	return cfg_dup(x, v, out);
}

/* Check a route prefix as cfg_prefix says; e says what was wrong. */
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

int cfg_prefix(struct cfg *x, const config_setting_t *g, const char *path,
	       const char *name, char **out)
{
	struct cfg_at at;
	struct errbuf e;
	const char *v;
	int rc;

	rc = cfg_str(x, g, path, name, NULL, &v, &at);
	if (rc < 0)
		return rc;
	if (cfg_prefix_check(v, &e) < 0)
		return cfg_fail(x, at.s, at.key, "%s", e.msg);
	return cfg_dup(x, v, out);
}
