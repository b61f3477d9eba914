/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * config_value.c - the configuration's typed values: one setting read,
 * checked on its own and turned into a string, boolean, number, size,
 * duration, path, endpoint list or CIDR rule list, every error naming
 * the file, the line and the key (config_value.h).
 *
 * Every getter starts the same way (cfg_member: the setting and its key
 * path; the default when it is absent) and differs only in how it reads
 * and checks the value. The checks of a project's values themselves are
 * config_check.c's, shared with every other source of projects; here
 * they get the file, line and key.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_value.h"
#include "duration.h"
#include "fauth.h"
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

int cfg_next(struct cfg *x, int rc)
{
	if (rc == 0 || rc == -ENOMEM)
		return rc;
	x->failed = true;
	config_errs_add(x->errs, "%s",
			x->err->msg[0] ? x->err->msg : strerror(-rc));
	errbuf_clear(x->err);
	return 0;
}

int cfg_nomem(struct cfg *x)
{
	errbuf_set(x->err, "%s: out of memory", x->file);
	return -ENOMEM;
}

int cfg_warn(struct cfg *x, const config_setting_t *s, const char *key,
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

int cfg_value(struct cfg *x, const config_setting_t *g, const char *path,
	      const char *name, struct config_value *out, struct cfg_at *at)
{
	config_setting_t *s = cfg_member(g, path, name, at->key);
	const struct config_file_int *v;

	memset(out, 0, sizeof(*out));
	at->s = s ? s : g;
	if (!s)
		return 0;
	if (config_setting_type(s) == CONFIG_TYPE_STRING) {
		out->kind = CONFIG_VALUE_STRING;
		out->str = config_setting_get_string(s);
		return 0;
	}
	if (config_setting_type(s) == CONFIG_TYPE_BOOL) {
		out->kind = CONFIG_VALUE_BOOL;
		out->b = config_setting_get_bool(s) != 0;
		out->text = "a boolean";
		return 0;
	}
	if (!cfg_is_int(s)) {
		int i, n = config_setting_length(s);

		out->kind = CONFIG_VALUE_OTHER;
		out->text = cfg_type_name(s);
		out->list = config_setting_type(s) == CONFIG_TYPE_ARRAY ||
			    config_setting_type(s) == CONFIG_TYPE_LIST;
		out->more_items = out->list && n > CONFIG_VALUE_ITEMS_MAX;
		for (i = 0; out->list && i < n && i < CONFIG_VALUE_ITEMS_MAX;
		     i++)
			/* NULL for an item that is not a string */
			out->items[out->n_items++] = config_setting_get_string(
			    config_setting_get_elem(s, (unsigned)i));
		return 0;
	}
	v = cfg_int_of(x, s, at->key);
	if (!v)
		return -EINVAL;
	out->kind = CONFIG_VALUE_INT;
	out->mag = v->mag;
	out->neg = v->neg;
	out->big = v->big;
	out->text = v->text;
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

/* CFG_MS: a duration string such as "10s", in ms, within [min, max]
 * ("0" and "0s" too when min is 0). */
static int cfg_ms_of(struct cfg *x, const config_setting_t *s, const char *key,
		     uint64_t min, uint64_t max, uint64_t *out)
{
	struct errbuf e;
	uint64_t v;

	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return cfg_expected(x, s, key,
				    "a duration string such as \"10s\"");
	/* a key whose range starts at 0 takes "0" (or "0s"): off */
	if (min == 0 && (strcmp(config_setting_get_string(s), "0") == 0 ||
			 strcmp(config_setting_get_string(s), "0s") == 0)) {
		*out = 0;
		return 0;
	}
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

/* ---- lists and addresses ------------------------------------------------ */

/* Check that g is a group whose members are all in names
 * (NULL-terminated): "expected a group { ... }" or "unknown key". */
int cfg_known(struct cfg *x, const config_setting_t *g, const char *path,
	      const char *const *names)
{
	char key[CFG_KEY_MAX];
	int i, n;

	if (!config_setting_is_group(g))
		return cfg_fail(x, g, path, "expected a group { ... }");
	n = config_setting_length(g);
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

/* v[i] refused when one of v[0..i) is the same address. */
static int cfg_addr_twice(struct cfg *x, const struct config_addr *v, size_t i,
			  const config_setting_t *el, const char *ek)
{
	size_t j;

	for (j = 0; j < i; j++)
		if (strcmp(v[j].text, v[i].text) == 0)
			return cfg_fail(x, el, ek, "%s is listed twice",
					v[i].text);
	return 0;
}

int cfg_addrs(struct cfg *x, const config_setting_t *g, const char *path,
	      const char *name, size_t max, bool required, unsigned schemes,
	      struct config_addr **out, size_t *nout)
{
	char key[CFG_KEY_MAX], ek[CFG_KEY_MAX];
	const config_setting_t *s;
	struct config_addr *v;
	struct errbuf e;
	size_t i, n;
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
		const char *str = config_setting_get_string(el);

		if ((schemes ? config_endpoint_parse(str, schemes, &v[i], &e)
			     : config_addr_parse(str, &v[i], &e)) < 0) {
			rc = cfg_fail(x, el, ek, "%s", e.msg);
			goto fail;
		}
		rc = cfg_addr_twice(x, v, i, el, ek);
		if (rc)
			goto fail;
	}
	*out = v;
	*nout = n;
	return 0;
fail:
	free(v);
	return rc;
}

int cfg_listen_addrs(struct cfg *x, const config_setting_t *g, const char *path,
		     const char *name, size_t max, struct config_addr **out,
		     size_t *nout)
{
	static const char *const keys[] = {"address", "proxy_protocol", NULL};
	char key[CFG_KEY_MAX], ek[CFG_KEY_MAX];
	config_setting_t *s;
	struct config_addr *v;
	struct errbuf e;
	size_t i, n;
	int rc = 0;

	*out = NULL;
	*nout = 0;
	s = cfg_member(g, path, name, key);
	if (!s)
		return 0;
	if (config_setting_type(s) != CONFIG_TYPE_ARRAY &&
	    config_setting_type(s) != CONFIG_TYPE_LIST)
		return cfg_expected(x, s, key, "a list [ ... ] or ( ... )");
	n = (size_t)config_setting_length(s);
	if (n == 0 || n > max)
		return cfg_fail(x, s, key, "needs 1..%zu addresses, has %zu",
				max, n);
	v = calloc(n, sizeof(*v));
	if (!v)
		return cfg_nomem(x);
	for (i = 0; i < n && rc == 0; i++) {
		const config_setting_t *el =
		    config_setting_get_elem(s, (unsigned)i);
		const char *str = NULL;
		bool pp = false;

		cfg_key_index(ek, key, i);
		if (config_setting_type(el) == CONFIG_TYPE_STRING) {
			str = config_setting_get_string(el);
		} else if (config_setting_type(el) == CONFIG_TYPE_GROUP) {
			/* { address = "ADDR:PORT"; proxy_protocol = true; } */
			int k, nk = config_setting_length(el);

			for (k = 0; k < nk && rc == 0; k++) {
				const config_setting_t *m =
				    config_setting_get_elem(el, (unsigned)k);
				const char *mn = config_setting_name(m);
				char mk[CFG_KEY_MAX];

				if (mn && (strcmp(mn, keys[0]) == 0 ||
					   strcmp(mn, keys[1]) == 0))
					continue;
				cfg_key(mk, ek, mn ? mn : "?");
				rc = cfg_fail(x, m, mk, "unknown key");
			}
			if (rc == 0)
				rc = cfg_str(x, el, ek, "address", NULL, &str,
					     &(struct cfg_at){0});
			if (rc == 0)
				rc = cfg_bool(x, el, ek, "proxy_protocol",
					      false, &pp);
			if (rc)
				break;
		} else {
			rc = cfg_expected(x, el, ek,
					  "an address string or a group { "
					  "address = ...; proxy_protocol = "
					  "...; }");
			break;
		}
		if (config_addr_parse(str, &v[i], &e) < 0) {
			rc = cfg_fail(x, el, ek, "%s", e.msg);
			break;
		}
		v[i].proxy_protocol = pp;
		rc = cfg_addr_twice(x, v, i, el, ek);
	}
	if (rc) {
		free(v);
		return rc;
	}
	*out = v;
	*nout = n;
	return 0;
}

/* Each string of list name given to add(ctx, s, note, e), which returns 0,
 * -EINVAL with e set or -ENOMEM: an error names its element, a note
 * becomes a warning. Absent: add never called. */
static int cfg_each_string(struct cfg *x, const config_setting_t *g,
			   const char *path, const char *name,
			   int (*add)(void *ctx, const char *s,
				      struct errbuf *note, struct errbuf *e),
			   void *ctx)
{
	char key[CFG_KEY_MAX], ek[CFG_KEY_MAX];
	const config_setting_t *s;
	struct errbuf e, note;
	size_t i, n;
	int rc;

	rc = cfg_list(x, g, path, name, key, &s);
	if (rc < 0 || !s)
		return rc;
	n = (size_t)config_setting_length(s);
	for (i = 0; i < n; i++) {
		const config_setting_t *el =
		    config_setting_get_elem(s, (unsigned)i);

		cfg_key_index(ek, key, i);
		errbuf_clear(&note);
		rc = add(ctx, config_setting_get_string(el), &note, &e);
		if (rc == -ENOMEM)
			return cfg_nomem(x);
		if (rc < 0)
			return cfg_fail(x, el, ek, "%s", e.msg);
		if (note.msg[0]) {
			rc = cfg_warn(x, el, ek, "%s", note.msg);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

struct cfg_rule_ctx {
	struct rules *rules;
	uint8_t action;
};

static int cfg_rule_add(void *ctx, const char *s, struct errbuf *note,
			struct errbuf *e)
{
	struct cfg_rule_ctx *r = ctx;

	return config_ip_rule_add(r->rules, r->action, s, note, e);
}

int cfg_ip_rules(struct cfg *x, const config_setting_t *g, const char *path,
		 const char *name, uint8_t action, struct rules *rules)
{
	struct cfg_rule_ctx r = {rules, action};

	return cfg_each_string(x, g, path, name, cfg_rule_add, &r);
}

static int cfg_trusted_add(void *ctx, const char *s, struct errbuf *note,
			   struct errbuf *e)
{
	return trusted_add(ctx, s, note, e);
}

int cfg_trusted(struct cfg *x, const config_setting_t *g, const char *path,
		const char *name, struct trusted *t)
{
	return cfg_each_string(x, g, path, name, cfg_trusted_add, t);
}

/* ---- names and paths ---------------------------------------------------- */

int cfg_name(struct cfg *x, const config_setting_t *g, const char *path,
	     const char *def, char **out)
{
	struct cfg_at at;
	struct errbuf e;
	const char *v;
	int rc;

	rc = cfg_str(x, g, path, "name", def, &v, &at);
	if (rc < 0)
		return rc;
	if (config_name_check(v, &e) < 0)
		return cfg_fail(x, at.s, at.key, "%s", e.msg);
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
	if (!*v || strlen(v) > CFG_USER_MAX || v[0] == '-' ||
	    !config_is_word(v))
		return cfg_fail(x, at.s, at.key,
				"\"%s\": not a valid user name", v);
	return cfg_dup(x, v, out);
}

int cfg_send_proxy(struct cfg *x, const config_setting_t *g, const char *path,
		   enum config_send_proxy def, enum config_send_proxy *out)
{
	struct cfg_at at;
	struct errbuf e;
	const char *v;
	int rc;

	*out = def;
	if (!config_setting_get_member(g, "send_proxy"))
		return 0;
	rc = cfg_str(x, g, path, "send_proxy", NULL, &v, &at);
	if (rc == 0 && config_send_proxy_parse(v, out, &e) < 0)
		return cfg_fail(x, at.s, at.key, "%s", e.msg);
	return rc;
}

int cfg_balance(struct cfg *x, const config_setting_t *g, const char *path,
		enum config_balance def, enum config_balance *out)
{
	struct cfg_at at;
	struct errbuf e;
	const char *v;
	int rc;

	rc = cfg_str(x, g, path, "balance", config_balance_name(def), &v, &at);
	if (rc == 0 && config_balance_parse(v, out, &e) < 0)
		return cfg_fail(x, at.s, at.key, "%s", e.msg);
	return rc;
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
	if (config_prefix_check(v, &e) < 0)
		return cfg_fail(x, at.s, at.key, "%s", e.msg);
	return cfg_dup(x, v, out);
}

int cfg_headers(struct cfg *x, const config_setting_t *g, const char *path,
		struct hrules *out)
{
	static const char *const keys[] = {"request_set",     "request_remove",
					   "response_set",    "response_add",
					   "response_remove", NULL};
	char p[CFG_KEY_MAX], key[CFG_KEY_MAX], ek[CFG_KEY_MAX];
	config_setting_t *h = cfg_member(g, path, "headers", p);
	const config_setting_t *s;
	struct errbuf e;
	int l, i, n, rc;

	if (!h)
		return 0;
	rc = cfg_known(x, h, p, keys);
	for (l = 0; rc == 0 && l < HRULE_LISTS; l++) {
		rc = cfg_list(x, h, p, hrule_list_name[l], key, &s);
		if (rc < 0 || !s)
			continue;
		n = config_setting_length(s);
		for (i = 0; i < n && rc == 0; i++) {
			const config_setting_t *el =
			    config_setting_get_elem(s, (unsigned)i);

			errbuf_clear(&e);
			rc = hrules_add(out, (enum hrule_list)l,
					config_setting_get_string(el), &e);
			if (rc == -EINVAL) {
				cfg_key_index(ek, key, (size_t)i);
				rc = cfg_fail(x, el, ek, "%s", e.msg);
			} else if (rc < 0) {
				rc = cfg_nomem(x);
			}
		}
	}
	return rc;
}

int cfg_redirects(struct cfg *x, const config_setting_t *g, const char *path,
		  struct hredirects *out)
{
	static const char *const keys[] = {"from", "to", "status", NULL};
	char key[CFG_KEY_MAX], ek[CFG_KEY_MAX];
	config_setting_t *s = cfg_member(g, path, "redirects", key);
	const char *from, *to;
	struct cfg_at at;
	struct errbuf e;
	uint64_t status;
	size_t i, n;
	int rc = 0;

	if (!s)
		return 0;
	if (config_setting_type(s) != CONFIG_TYPE_LIST)
		return cfg_expected(x, s, key, "a list ( { ... }, ... )");
	n = (size_t)config_setting_length(s);
	for (i = 0; i < n && rc == 0; i++) {
		const config_setting_t *el =
		    config_setting_get_elem(s, (unsigned)i);

		cfg_key_index(ek, key, i);
		rc = cfg_known(x, el, ek, keys);
		if (rc == 0)
			rc = cfg_str(x, el, ek, "from", NULL, &from, &at);
		if (rc == 0)
			rc = cfg_str(x, el, ek, "to", NULL, &to, &at);
		if (rc == 0)
			rc = cfg_number(x, el, ek, "status", CFG_COUNT, 301,
					300, 399, &status);
		if (rc < 0)
			break;
		errbuf_clear(&e);
		rc = hredirects_add(out, from, to, (unsigned)status, &e);
		if (rc == -EINVAL)
			rc = cfg_fail(x, el, ek, "%s", e.msg);
		else if (rc < 0)
			rc = cfg_nomem(x);
	}
	return rc;
}

int cfg_compression(struct cfg *x, const config_setting_t *g, const char *path,
		    struct config_compression *out)
{
	static const char *const keys[] = {"enabled", "algorithms", "min_bytes",
					   "types",   "level",	    NULL};
	static const char *const lkeys[] = {"gzip", "br", "zstd", NULL};
	char p[CFG_KEY_MAX], key[CFG_KEY_MAX], ek[CFG_KEY_MAX];
	config_setting_t *c = cfg_member(g, path, "compression", p);
	const config_setting_t *s, *lv;
	uint64_t v;
	int rc, i, n, e, j;

	compress_defaults(out);
	if (!c)
		return 0;
	rc = cfg_known(x, c, p, keys);
	if (rc == 0)
		rc = cfg_bool(x, c, p, "enabled", true, &out->enabled);
	if (rc == 0)
		rc = cfg_number(x, c, p, "min_bytes", CFG_BYTES,
				COMPRESS_MIN_BYTES_DEFAULT, 0, CFG_SIZE_MAX,
				&out->min_bytes);
	if (rc == 0)
		rc = cfg_list(x, c, p, "algorithms", key, &s);
	if (rc == 0 && s) {
		n = config_setting_length(s);
		if (n == 0 || n > ENC_N - 1)
			return cfg_fail(x, s, key,
					"1 to 3 of \"zstd\", \"br\", \"gzip\"");
		out->n_algos = 0;
		for (i = 0; i < n; i++) {
			const char *a = config_setting_get_string_elem(s, i);

			e = enc_parse(a, strlen(a));
			cfg_key_index(ek, key, (size_t)i);
			if (e <= ENC_IDENTITY)
				return cfg_fail(
				    x, config_setting_get_elem(s, i), ek,
				    "\"zstd\", \"br\" or \"gzip\", not "
				    "\"%s\"",
				    a);
			for (j = 0; j < i; j++)
				if (out->algos[j] == (enum enc)e)
					return cfg_fail(
					    x, config_setting_get_elem(s, i),
					    ek, "\"%s\" is listed already", a);
			out->algos[out->n_algos++] = (enum enc)e;
		}
	}
	if (rc == 0)
		rc = cfg_list(x, c, p, "types", key, &s);
	if (rc == 0 && s) {
		n = config_setting_length(s);
		if (n > COMPRESS_TYPES_MAX)
			return cfg_fail(x, s, key, "at most %d types",
					COMPRESS_TYPES_MAX);
		out->types = calloc((size_t)n + 1, sizeof(*out->types));
		if (!out->types)
			return cfg_nomem(x);
		for (i = 0; i < n; i++) {
			const char *t = config_setting_get_string_elem(s, i);

			cfg_key_index(ek, key, (size_t)i);
			if (!enc_type_valid(t))
				return cfg_fail(
				    x, config_setting_get_elem(s, i), ek,
				    "\"%s\" is not a media type "
				    "(\"type/subtype\" or "
				    "\"type/\" and a star)",
				    t);
			if (!(out->types[i] = strdup(t)))
				return cfg_nomem(x);
			out->n_types++;
		}
	}
	if (rc == 0) {
		lv = cfg_member(c, p, "level", key);
		if (lv)
			rc = cfg_known(x, lv, key, lkeys);
		for (e = ENC_GZIP; rc == 0 && lv && e < ENC_N; e++) {
			rc = cfg_number(
			    x, lv, key, enc_name((enum enc)e), CFG_COUNT,
			    (uint64_t)enc_level_default((enum enc)e), 1,
			    (uint64_t)enc_level_max((enum enc)e), &v);
			out->level[e] = (int)v;
		}
	}
	return rc;
}

/* f among the files the configuration reads at every load (once). */
static int cfg_reread(struct cfg *x, const char *f)
{
	struct config *c = x->c;
	char **nv;
	size_t i;

	for (i = 0; i < c->n_reread; i++)
		if (strcmp(c->reread[i], f) == 0)
			return 0;
	nv = realloc(c->reread, (c->n_reread + 1) * sizeof(*nv));
	if (!nv)
		return cfg_nomem(x);
	c->reread = nv;
	if (!(nv[c->n_reread] = strdup(f)))
		return cfg_nomem(x);
	c->n_reread++;
	return 0;
}

int cfg_file_read(struct cfg *x, const config_setting_t *s, const char *key,
		  const char *f, size_t max, char **out, size_t *len)
{
	char *buf = malloc(max + 1);
	struct stat st;
	size_t n = 0;
	ssize_t k;
	int fd, rc;

	*out = NULL;
	if (!buf)
		return cfg_nomem(x);
	/* non-blocking: a FIFO named here must not hang a reload */
	fd = open(f, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode))) {
		close(fd);
		free(buf);
		return cfg_fail(x, s, key, "%s: not a regular file", f);
	}
	if (fd < 0) {
		rc = cfg_fail(x, s, key,
			      "%s: %s (edged reads it at start and "
			      "on every reload, as its user)",
			      f, strerror(errno));
		free(buf);
		return rc;
	}
	while (n <= max && (k = read(fd, buf + n, max + 1 - n)) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			rc = cfg_fail(x, s, key, "%s: %s", f, strerror(errno));
			close(fd);
			free(buf);
			return rc;
		}
		n += (size_t)k;
	}
	close(fd);
	if (n > max) {
		free(buf);
		return cfg_fail(x, s, key, "%s: over %zu bytes", f, max);
	}
	buf[n] = '\0';
	rc = cfg_reread(x, f);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	*out = buf;
	*len = n;
	return 0;
}

/* Read snippet at of out from the file f (at most INJECT_SNIPPET_MAX
 * bytes). */
static int cfg_snippet_file(struct cfg *x, const config_setting_t *s,
			    const char *key, const char *f, enum inject_at at,
			    struct config_inject *out)
{
	struct errbuf e;
	size_t n;
	char *buf;
	int rc;

	rc = cfg_file_read(x, s, key, f, INJECT_SNIPPET_MAX, &buf, &n);
	if (rc < 0)
		return rc;
	rc = inject_set(out, at, buf, n, f, &e);
	free(buf);
	if (rc == -EINVAL)
		return cfg_fail(x, s, key, "%s: %s", f, e.msg);
	return rc < 0 ? cfg_nomem(x) : 0;
}

int cfg_challenge(struct cfg *x, const config_setting_t *g, const char *path,
		  struct config_challenge *out)
{
	static const char *const keys[] = {"mode", "difficulty", "ttl", NULL};
	char p[CFG_KEY_MAX], key[CFG_KEY_MAX];
	config_setting_t *c = cfg_member(g, path, "challenge", p);
	struct cfg_at at;
	const char *v;
	uint64_t n;
	int rc;

	out->mode = CHAL_OFF;
	out->difficulty = CHAL_DIFFICULTY_DEFAULT;
	out->ttl_s = CHAL_TTL_DEFAULT_S;
	if (!c)
		return 0;
	if (!config_setting_is_group(c))
		return cfg_fail(x, c, p, "a group { mode = ...; }");
	rc = cfg_known(x, c, p, keys);
	if (rc == 0)
		rc = cfg_str(x, c, p, "mode", "off", &v, &at);
	if (rc == 0 && chal_mode_parse(v, &out->mode))
		return cfg_fail(x, at.s, at.key,
				"\"off\", \"new_ip\", \"on_rate_limit\" or "
				"\"always\", not \"%s\"",
				v);
	if (rc == 0)
		rc = cfg_number(x, c, p, "difficulty", CFG_COUNT,
				CHAL_DIFFICULTY_DEFAULT, 1, CHAL_DIFFICULTY_MAX,
				&n);
	if (rc == 0)
		out->difficulty = (unsigned)n;
	/* up to 30 days: past config_duration_parse's 7 */
	if (rc == 0 && cfg_member(c, p, "ttl", key)) {
		struct errbuf e;

		rc = cfg_str(x, c, p, "ttl", NULL, &v, &at);
		if (rc == 0 &&
		    duration_parse_ms(v, CHAL_TTL_MAX_S * 1000ULL, &n, &e))
			return cfg_fail(x, at.s, at.key, "%s (at most 30d)",
					e.msg);
		if (rc == 0 && n < CHAL_TTL_MIN_S * 1000ULL)
			return cfg_fail(x, at.s, at.key, "\"%s\": at least 1m",
					v);
		if (rc == 0)
			out->ttl_s = (uint32_t)(n / 1000);
	}
	if (rc == 0 && out->mode != CHAL_OFF && !x->c->challenge.key_file &&
	    !x->chal_keyless) {
		x->chal_keyless = true;
		rc = cfg_warn(x, c, p,
			      "no challenge.key_file: passes are signed with "
			      "a key made at start, so they end when edged "
			      "does and no other host accepts them");
	}
	return rc;
}

/* Whether header rule name n[0..len) is Content-Security-Policy ('_'
 * read as '-'). */
static bool cfg_is_csp(const char *n, size_t len)
{
	static const char csp[] = "content-security-policy";
	size_t i;

	if (len != sizeof(csp) - 1)
		return false;
	for (i = 0; i < len; i++)
		if ((n[i] == '_' ? '-' : (char)h1_lower((unsigned char)n[i])) !=
		    csp[i])
			return false;
	return true;
}

int cfg_inject(struct cfg *x, const config_setting_t *g, const char *path,
	       const struct hrules *headers, struct config_inject *out)
{
	static const char *const keys[] = {"head_end", "body_end", NULL};
	static const char *const fkeys[] = {"file", NULL};
	static const enum hrule_list lists[] = {HRULE_RESPONSE_SET,
						HRULE_RESPONSE_ADD};
	char p[CFG_KEY_MAX], key[CFG_KEY_MAX];
	config_setting_t *c = cfg_member(g, path, "inject", p);
	config_setting_t *s;
	const struct hrule_field *f;
	const char *dir;
	struct errbuf e;
	size_t dlen, i, l;
	char *file;
	int rc, at;

	memset(out, 0, sizeof(*out));
	if (!c)
		return 0;
	if (!config_setting_is_group(c))
		return cfg_expected(x, c, p, "a group { head_end = \"...\"; }");
	rc = cfg_known(x, c, p, keys);
	for (at = 0; rc == 0 && at < INJECT_AT_N; at++) {
		s = cfg_member(c, p, inject_at_name[at], key);
		if (!s)
			continue;
		if (config_setting_type(s) == CONFIG_TYPE_STRING) {
			const char *v = config_setting_get_string(s);

			rc = inject_set(out, (enum inject_at)at, v, strlen(v),
					NULL, &e);
			if (rc == -EINVAL)
				rc = cfg_fail(x, s, key, "%s", e.msg);
			else if (rc < 0)
				rc = cfg_nomem(x);
		} else if (config_setting_is_group(s)) {
			rc = cfg_known(x, s, key, fkeys);
			if (rc == 0)
				rc = cfg_path(x, s, key, "file", NULL, PATH_MAX,
					      false, &file);
			if (rc == 0) {
				rc = cfg_snippet_file(x, s, key, file,
						      (enum inject_at)at, out);
				free(file);
			}
		} else {
			rc = cfg_expected(x, s, key,
					  "a string, or { file = \"/path\"; }");
		}
		/* an inline script the environment's own CSP stops */
		for (l = 0; rc == 0 && out->text[at] && l < 2; l++)
			for (i = 0;
			     rc == 0 && headers && i < headers->n[lists[l]];
			     i++) {
				f = &headers->f[lists[l]][i];
				if (f->value && cfg_is_csp(f->name, f->nlen) &&
				    inject_csp_blocks(f->value, f->vlen,
						      out->text[at], &dir,
						      &dlen))
					rc = cfg_warn(
					    x, s, key,
					    "an inline <script> that this "
					    "environment's "
					    "Content-Security-Policy "
					    "(headers.%s, \"%.*s\") blocks: "
					    "allow it there ('unsafe-inline' "
					    "without nonces or hashes, or its "
					    "hash) or load it with src",
					    hrule_list_name[lists[l]],
					    (int)dlen, dir);
			}
	}
	return rc;
}

/* api_keys = { file }: the key file's lines into g. */
static int cfg_api_keys(struct cfg *x, const config_setting_t *c, const char *p,
			struct auth_gate *g)
{
	static const char *const keys[] = {"file", NULL};
	struct cfg_at at;
	struct errbuf e;
	const char *f;
	char *buf;
	size_t n;
	int rc;

	if (!config_setting_is_group(c))
		return cfg_fail(x, c, p, "a group { file = \"...\"; }");
	rc = cfg_known(x, c, p, keys);
	if (rc == 0)
		rc = cfg_str(x, c, p, "file", NULL, &f, &at);
	if (rc == 0)
		rc = cfg_file_read(x, at.s, at.key, f, AUTH_KEYS_MAX * 130,
				   &buf, &n);
	if (rc < 0)
		return rc;
	rc = auth_gate_api_keys(g, buf, n, &e);
	free(buf);
	if (rc == -EINVAL)
		return cfg_fail(x, at.s, at.key, "%s: %s", f, e.msg);
	return rc < 0 ? cfg_nomem(x) : 0;
}

/* jwt = { keys; issuer; audience; algorithms; leeway; copy_claims }. */
static int cfg_jwt(struct cfg *x, const config_setting_t *c, const char *p,
		   struct auth_gate *g)
{
	static const char *const keys[] = {
	    "keys",   "issuer",	     "audience", "algorithms",
	    "leeway", "copy_claims", NULL};
	const char *f, *iss, *aud, *lw;
	struct cfg_at at, lat;
	char key[CFG_KEY_MAX], ek[CFG_KEY_MAX];
	const config_setting_t *l;
	unsigned algs = 0;
	uint64_t leeway = 0;
	struct errbuf e;
	char *buf;
	size_t n;
	int rc, i;

	if (!config_setting_is_group(c))
		return cfg_fail(x, c, p, "a group { keys = \"...\"; }");
	rc = cfg_known(x, c, p, keys);
	if (rc == 0)
		rc = cfg_str(x, c, p, "keys", NULL, &f, &at);
	if (rc == 0)
		rc = cfg_str(x, c, p, "issuer", "", &iss, &lat);
	if (rc == 0 && !iss[0] && cfg_member(c, p, "issuer", key))
		return cfg_fail(x, lat.s, lat.key,
				"empty: leave it out not to check the issuer");
	if (rc == 0)
		rc = cfg_str(x, c, p, "audience", "", &aud, &lat);
	if (rc == 0 && !aud[0] && cfg_member(c, p, "audience", key))
		return cfg_fail(
		    x, lat.s, lat.key,
		    "empty: leave it out not to check the audience");
	if (rc == 0 && !aud[0])
		rc = cfg_warn(x, c, p,
			      "no audience: a token the keys signed for any "
			      "other application is admitted too");
	if (rc == 0)
		rc = cfg_str(x, c, p, "leeway", "0s", &lw, &lat);
	/* "0s" is none; duration_parse_ms takes only longer ones */
	if (rc == 0 && strcmp(lw, "0s") != 0 && strcmp(lw, "0") != 0 &&
	    duration_parse_ms(lw, AUTH_LEEWAY_MAX_S * 1000ULL, &leeway, &e))
		return cfg_fail(x, lat.s, lat.key, "%s (at most 10m)", e.msg);
	if (rc == 0)
		rc = cfg_list(x, c, p, "algorithms", key, &l);
	for (i = 0; rc == 0 && l && i < config_setting_length(l); i++) {
		const char *a = config_setting_get_string_elem(l, i);
		int v = auth_alg_parse(a, strlen(a));

		if (v < 0) {
			cfg_key_index(ek, key, (size_t)i);
			return cfg_fail(x, config_setting_get_elem(l, i), ek,
					"\"%s\": RS256, RS384, RS512, PS256, "
					"PS384, PS512, ES256, ES384, EdDSA, "
					"HS256, HS384 or HS512",
					a);
		}
		algs |= 1u << v;
	}
	if (rc == 0 && l && !algs)
		return cfg_fail(x, l, key, "needs at least one algorithm");
	if (rc == 0 && !algs)
		algs = AUTH_ALGS_DEFAULT;
	if (rc == 0)
		rc = cfg_file_read(x, at.s, at.key, f, 1 << 20, &buf, &n);
	if (rc < 0)
		return rc;
	rc = auth_gate_jwt(g, buf, n, algs, iss[0] ? iss : NULL,
			   aud[0] ? aud : NULL, (unsigned)(leeway / 1000), &e);
	free(buf);
	if (rc == -EINVAL)
		return cfg_fail(x, at.s, at.key, "%s: %s", f, e.msg);
	if (rc < 0)
		return cfg_nomem(x);
	rc = cfg_list(x, c, p, "copy_claims", key, &l);
	for (i = 0; rc == 0 && l && i < config_setting_length(l); i++) {
		rc = auth_gate_copy_claim(
		    g, config_setting_get_string_elem(l, i), &e);
		cfg_key_index(ek, key, (size_t)i);
		if (rc == -EINVAL)
			return cfg_fail(x, config_setting_get_elem(l, i), ek,
					"%s", e.msg);
		if (rc < 0)
			return cfg_nomem(x);
	}
	return rc;
}

/* auth_request = { url; timeout; copy_headers; cache_ttl }. */
static int cfg_fwd(struct cfg *x, const config_setting_t *c, const char *p,
		   struct auth_gate *g)
{
	static const char *const keys[] = {"url", "timeout", "copy_headers",
					   "cache_ttl", NULL};
	char key[CFG_KEY_MAX], ek[CFG_KEY_MAX];
	const config_setting_t *l;
	const char *url, *to, *ttl;
	struct cfg_at at, tat, cat;
	uint64_t to_ms = 0, ttl_s = 0;
	struct fauth_conf *f = NULL;
	struct errbuf e;
	int rc, i;

	if (!config_setting_is_group(c))
		return cfg_fail(x, c, p, "a group { url = \"http://...\"; }");
	rc = cfg_known(x, c, p, keys);
	if (rc == 0)
		rc = cfg_str(x, c, p, "url", NULL, &url, &at);
	if (rc == 0)
		rc = cfg_str(x, c, p, "timeout", "1s", &to, &tat);
	if (rc == 0 && duration_parse_ms(to, FAUTH_TIMEOUT_MAX_MS, &to_ms, &e))
		return cfg_fail(x, tat.s, tat.key, "%s (at most 1m)", e.msg);
	if (rc == 0)
		rc = cfg_str(x, c, p, "cache_ttl", "1m", &ttl, &cat);
	/* "0s" caches nothing; duration_parse_ms takes only longer ones */
	if (rc == 0 && strcmp(ttl, "0s") != 0 && strcmp(ttl, "0") != 0 &&
	    duration_parse_secs(ttl, FAUTH_CACHE_TTL_MAX_S, &ttl_s, &e))
		return cfg_fail(x, cat.s, cat.key, "%s (at most 1h)", e.msg);
	if (rc < 0)
		return rc;
	rc = fauth_conf_new(url, to_ms, (unsigned)ttl_s, &f, &e);
	if (rc == -EINVAL)
		return cfg_fail(x, at.s, at.key, "%s", e.msg);
	if (rc < 0)
		return cfg_nomem(x);
	auth_gate_forward(g, f);
	rc = cfg_list(x, c, p, "copy_headers", key, &l);
	for (i = 0; rc == 0 && l && i < config_setting_length(l); i++) {
		rc = fauth_conf_copy(f, config_setting_get_string_elem(l, i),
				     &e);
		cfg_key_index(ek, key, (size_t)i);
		if (rc == -EINVAL)
			return cfg_fail(x, config_setting_get_elem(l, i), ek,
					"%s", e.msg);
		if (rc < 0)
			return cfg_nomem(x);
	}
	return rc;
}

int cfg_auth(struct cfg *x, const config_setting_t *g, const char *path,
	     struct auth_gate **out)
{
	char pk[CFG_KEY_MAX], pj[CFG_KEY_MAX], pf[CFG_KEY_MAX];
	config_setting_t *k = cfg_member(g, path, "api_keys", pk);
	config_setting_t *j = cfg_member(g, path, "jwt", pj);
	config_setting_t *f = cfg_member(g, path, "auth_request", pf);
	struct auth_gate *a;
	int rc = 0;

	*out = NULL;
	if (!k && !j && !f)
		return 0;
	a = auth_gate_new();
	if (!a)
		return cfg_nomem(x);
	if (k)
		rc = cfg_api_keys(x, k, pk, a);
	if (rc == 0 && j)
		rc = cfg_jwt(x, j, pj, a);
	if (rc == 0 && f)
		rc = cfg_fwd(x, f, pf, a);
	if (rc < 0) {
		auth_gate_put(a);
		return rc;
	}
	*out = a;
	return 0;
}
