/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * config.c - parse edged's configuration with libconfig (the text
 * config_file.c read: the file with its @includes expanded), check every
 * key and value, and build the immutable struct config (the settings)
 * and the file's route source (its projects).
 *
 * The walk mirrors the file: one function per group, each given the
 * group's setting and its path ("projects[0].environments[1]"), so that
 * every error can name the file, the line and the key. Reading and
 * checking single values is config_value.c's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <libconfig.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "analytics.h"
#include "acme_chal.h"
#include "config.h"
#include "config_file.h"
#include "config_value.h"
#include "edge_maps.h"
#include "pgdb.h"
#include "policy.h"
#include "splice.h"

#define CFG_SUN_PATH_MAX 107 /* sizeof(sun_path) - 1 */

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
	const char *file;
	unsigned line;

	if (rc == -EEXIST) {
		cfg_where(x, prev->where, &file, &line);
		return cfg_fail(x, s, key,
				"%s \"%s\" already used by %s (%s:%u)", what,
				name, prev->path, file, line);
	}
	if (rc < 0)
		return cfg_nomem(x);
	return 0;
}

/* ---- groups ------------------------------------------------------------- */

/* The member name of g, a group of only the keys in names (cfg_known);
 * *out is NULL when it is absent. key gets its path. */
static int cfg_group(struct cfg *x, const config_setting_t *g, const char *path,
		     const char *name, const char *const *names, char *key,
		     const config_setting_t **out)
{
	const config_setting_t *s = cfg_member(g, path, name, key);

	*out = s;
	return s ? cfg_known(x, s, key, names) : 0;
}

/* The member name of g, a list of groups "( { ... }, ... )": *out is it
 * (NULL when absent) and *n its length. key gets its path. */
static int cfg_group_list(struct cfg *x, const config_setting_t *g,
			  const char *path, const char *name, char *key,
			  const config_setting_t **out, size_t *n)
{
	const config_setting_t *s = cfg_member(g, path, name, key);

	*out = NULL;
	*n = 0;
	if (!s)
		return 0;
	if (config_setting_type(s) != CONFIG_TYPE_LIST)
		return cfg_fail(x, s, key, "expected a list ( { ... }, ... )");
	*out = s;
	*n = (size_t)config_setting_length(s);
	return 0;
}

/* A number member of a group: how it is written, its default and range
 * (cfg_number), and the uint64_t it fills, at off in the group's struct. */
struct cfg_num {
	const char *name;
	enum cfg_unit unit;
	uint64_t def, min, max;
	size_t off;
};

#define CFG_NUMS_MAX 16

/* The root's group name, made only of the numbers in t[0..n), read in
 * that order into the struct at base. */
static int cfg_nums(struct cfg *x, const config_setting_t *root,
		    const char *name, const struct cfg_num *t, size_t n,
		    void *base)
{
	const char *names[CFG_NUMS_MAX + 1];
	char key[CFG_KEY_MAX];
	const config_setting_t *g;
	size_t i;
	int rc;

	for (i = 0; i < n; i++)
		names[i] = t[i].name;
	names[n] = NULL;
	rc = cfg_group(x, root, "", name, names, key, &g);
	for (i = 0; rc == 0 && i < n; i++)
		rc = cfg_number(x, g, key, t[i].name, t[i].unit, t[i].def,
				t[i].min, t[i].max,
				(uint64_t *)((char *)base + t[i].off));
	return rc;
}

/* ---- names -------------------------------------------------------------- */

/* The member "id": 1..CONFIG_ID_MAX bytes of letters, digits, '.', '_'
 * and '-', claimed as what in namespace ns (cfg_unique). */
static int cfg_id(struct cfg *x, const config_setting_t *g, const char *path,
		  char ns, const char *what, char **out)
{
	struct cfg_at at;
	struct errbuf e;
	const char *v;
	int rc;

	rc = cfg_str(x, g, path, "id", NULL, &v, &at);
	if (rc < 0)
		return rc;
	if (config_id_check(v, &e) < 0)
		return cfg_fail(x, at.s, at.key, "%s", e.msg);
	rc = cfg_unique(x, ns, what, v, at.s, at.key);
	if (rc < 0)
		return rc;
	return cfg_dup(x, v, out);
}

/* ---- top-level groups --------------------------------------------------- */

/* Where a cfg_num goes in struct config_limits / config_timeouts. */
#define CFG_IN_LIMITS(field) offsetof(struct config_limits, field)
#define CFG_IN_TIMEOUTS(field) offsetof(struct config_timeouts, field)

/* The groups limits and timeouts, in the order their keys are read. */
static const struct cfg_num cfg_limits[] = {
    {"max_connections", CFG_COUNT, 10000, 1, 1000000,
     CFG_IN_LIMITS(max_connections)},
    {"max_request_line", CFG_BYTES, 8192, 256, 65536,
     CFG_IN_LIMITS(max_request_line)},
    {"max_header_bytes", CFG_BYTES, 32768, 1024, 1 << 20,
     CFG_IN_LIMITS(max_header_bytes)},
    {"max_headers", CFG_COUNT, 100, 1, 1000, CFG_IN_LIMITS(max_headers)},
    {"max_body_bytes", CFG_BYTES, 10 << 20, 0, CFG_SIZE_MAX,
     CFG_IN_LIMITS(max_body_bytes)},
    {"max_inflight", CFG_COUNT, 16384, 0, 10000000,
     CFG_IN_LIMITS(max_inflight)},
    {"max_inflight_per_route", CFG_COUNT, 4096, 0, 10000000,
     CFG_IN_LIMITS(max_inflight_per_route)},
    {"body_buffer", CFG_BYTES, CONFIG_BODY_BUFFER_DEFAULT, 0,
     CONFIG_BODY_BUFFER_MAX, CFG_IN_LIMITS(body_buffer)},
    {"max_queued", CFG_COUNT, 0, 0, 1000000, CFG_IN_LIMITS(max_queued)},
    {"max_inject_bytes", CFG_BYTES, INJECT_MAX_BYTES_DEFAULT, 1024,
     INJECT_MAX_BYTES_MAX, CFG_IN_LIMITS(max_inject_bytes)},
    {"brownout_lag", CFG_MS, 100, 0, 10000, CFG_IN_LIMITS(brownout_lag_ms)},
};

#define CFG_S 1000ULL
#define CFG_MIN (60 * CFG_S)
#define CFG_H (3600 * CFG_S)

static const struct cfg_num cfg_timeouts[] = {
    {"header", CFG_MS, 10 * CFG_S, 100, 10 * CFG_MIN,
     CFG_IN_TIMEOUTS(header_ms)},
    {"client_header", CFG_MS, 10 * CFG_S, 100, 10 * CFG_MIN,
     CFG_IN_TIMEOUTS(client_header_ms)},
    {"body", CFG_MS, 30 * CFG_S, 100, CFG_H, CFG_IN_TIMEOUTS(body_ms)},
    {"body_min_rate", CFG_COUNT, 1024, 0, 1ULL << 30,
     CFG_IN_TIMEOUTS(body_min_rate)},
    {"idle_keepalive", CFG_MS, 60 * CFG_S, 100, CFG_H,
     CFG_IN_TIMEOUTS(idle_keepalive_ms)},
    {"upstream_connect", CFG_MS, 5 * CFG_S, 10, 5 * CFG_MIN,
     CFG_IN_TIMEOUTS(upstream_connect_ms)},
    {"upstream_response", CFG_MS, 60 * CFG_S, 100, CFG_H,
     CFG_IN_TIMEOUTS(upstream_response_ms)},
    {"tunnel_idle", CFG_MS, 5 * CFG_MIN, CFG_S, CONFIG_DURATION_MAX_MS,
     CFG_IN_TIMEOUTS(tunnel_idle_ms)},
    {"client_hello", CFG_MS, 10 * CFG_S, 100, 10 * CFG_MIN,
     CFG_IN_TIMEOUTS(client_hello_ms)},
    {"tls_handshake", CFG_MS, 10 * CFG_S, 100, 10 * CFG_MIN,
     CFG_IN_TIMEOUTS(tls_handshake_ms)},
    {"drain", CFG_MS, 30 * CFG_S, 100, CFG_H, CFG_IN_TIMEOUTS(drain_ms)},
    {"queue", CFG_MS, CFG_S, 1, 10 * CFG_MIN, CFG_IN_TIMEOUTS(queue_ms)},
    {"tunnel_keepalive", CFG_MS, 60 * CFG_S, 0, 2 * CFG_H,
     CFG_IN_TIMEOUTS(tunnel_keepalive_ms)},
};

#define CFG_IN_UPSTREAM(field) offsetof(struct config_upstream, field)

static const struct cfg_num cfg_upstream_nums[] = {
    {"eject_after", CFG_COUNT, 3, 1, 1000, CFG_IN_UPSTREAM(eject_after)},
    {"eject_base", CFG_MS, 10 * CFG_S, 100, CFG_H,
     CFG_IN_UPSTREAM(eject_base_ms)},
    {"eject_max", CFG_MS, 5 * CFG_MIN, 100, 24 * CFG_H,
     CFG_IN_UPSTREAM(eject_max_ms)},
};

/* upstream: passive health's thresholds; eject_base at most eject_max. */
static int cfg_upstream(struct cfg *x, const config_setting_t *root)
{
	struct config_upstream *u = &x->c->upstream;
	const config_setting_t *g, *m;
	int rc;

	rc = cfg_nums(x, root, "upstream", cfg_upstream_nums,
		      CFG_NELEM(cfg_upstream_nums), u);
	if (rc < 0 || u->eject_base_ms <= u->eject_max_ms)
		return rc;
	g = config_setting_lookup((config_setting_t *)root, "upstream");
	m = g ? config_setting_get_member(g, "eject_base") : NULL;
	return cfg_fail(x, m ? m : g, "upstream.eject_base",
			"%llu ms is longer than eject_max (%llu ms)",
			(unsigned long long)u->eject_base_ms,
			(unsigned long long)u->eject_max_ms);
}

_Static_assert(CFG_NELEM(cfg_limits) <= CFG_NUMS_MAX,
	       "cfg_limits: raise CFG_NUMS_MAX");
_Static_assert(CFG_NELEM(cfg_timeouts) <= CFG_NUMS_MAX,
	       "cfg_timeouts: raise CFG_NUMS_MAX");

static int cfg_ratelimit(struct cfg *x, const config_setting_t *root)
{
	static const char *const keys[] = {"rate", "burst", NULL};
	struct config_ratelimit *r = &x->c->ratelimit;
	char p[CFG_KEY_MAX];
	const config_setting_t *g;
	uint64_t burst;
	int rc;

	rc = cfg_group(x, root, "", "ratelimit", keys, p, &g);
	if (rc == 0)
		rc = cfg_rate(x, g, p, "rate", &r->per_min);
	if (rc == 0)
		rc = cfg_number(x, g, p, "burst", CFG_COUNT, 0, 1,
				EDGE_RL_BURST_MAX, &burst);
	if (rc < 0)
		return rc;
	r->burst = burst ? burst : policy_burst_default(r->per_min);
	return 0;
}

#define CFG_IN_HTTP2(field) offsetof(struct config_http2, field)

static const struct cfg_num cfg_http2_nums[] = {
    {"max_concurrent_streams", CFG_COUNT, CONFIG_H2_STREAMS_DEFAULT, 1,
     CONFIG_H2_STREAMS_MAX, CFG_IN_HTTP2(max_concurrent_streams)},
    {"initial_window_size", CFG_BYTES, CONFIG_H2_WINDOW_DEFAULT,
     CONFIG_H2_WINDOW_MIN, CONFIG_H2_WINDOW_MAX,
     CFG_IN_HTTP2(initial_window_size)},
    {"max_header_list_size", CFG_BYTES, CONFIG_H2_HEADER_LIST_DEFAULT,
     CONFIG_H2_HEADER_LIST_MIN, CONFIG_H2_HEADER_LIST_MAX,
     CFG_IN_HTTP2(max_header_list_size)},
};

/* http2: two switches and the numbers each new session announces. */
static int cfg_http2(struct cfg *x, const config_setting_t *root)
{
	static const char *const keys[] = {"enabled",
					   "cleartext",
					   "max_concurrent_streams",
					   "initial_window_size",
					   "max_header_list_size",
					   NULL};
	struct config_http2 *h = &x->c->http2;
	char p[CFG_KEY_MAX];
	const config_setting_t *g;
	size_t i;
	int rc;

	rc = cfg_group(x, root, "", "http2", keys, p, &g);
	if (rc == 0)
		rc = cfg_bool(x, g, p, "enabled", true, &h->enabled);
	if (rc == 0)
		rc = cfg_bool(x, g, p, "cleartext", true, &h->cleartext);
	for (i = 0; rc == 0 && i < CFG_NELEM(cfg_http2_nums); i++) {
		const struct cfg_num *t = &cfg_http2_nums[i];

		rc = cfg_number(x, g, p, t->name, t->unit, t->def, t->min,
				t->max, (uint64_t *)((char *)h + t->off));
	}
	return rc;
}

/* challenge: the key file, read now (as edged's user on a reload). */
static int cfg_challenge_keys(struct cfg *x, const config_setting_t *root)
{
	static const char *const keys[] = {"key_file", NULL};
	char p[CFG_KEY_MAX], key[CFG_KEY_MAX], err[160];
	const config_setting_t *g;
	struct stat st;
	size_t n;
	char *buf;
	int rc;

	rc = cfg_group(x, root, "", "challenge", keys, p, &g);
	if (rc == 0)
		rc = cfg_path(x, g, p, "key_file", "", CFG_PATH_MAX, true,
			      &x->c->challenge.key_file);
	if (rc < 0 || !x->c->challenge.key_file[0]) {
		if (rc == 0) {
			free(x->c->challenge.key_file);
			x->c->challenge.key_file = NULL;
		}
		return rc;
	}
	rc = cfg_file_read(x, cfg_member(g, p, "key_file", key), key,
			   x->c->challenge.key_file, 1024, &buf, &n);
	if (rc < 0)
		return rc;
	rc = chal_keys_parse(buf, n, &x->c->challenge.keys, err, sizeof(err));
	OPENSSL_cleanse(buf, n);
	free(buf);
	if (rc < 0)
		return cfg_fail(x, cfg_member(g, p, "key_file", key), key,
				"%s: %s", x->c->challenge.key_file, err);
	if (stat(x->c->challenge.key_file, &st) == 0 && (st.st_mode & S_IROTH))
		return cfg_warn(x, cfg_member(g, p, "key_file", key), key,
				"%s is readable by every user: anyone who "
				"reads it can make passes (chmod o-r)",
				x->c->challenge.key_file);
	return 0;
}

/* The first file of tls.certificates in directory dir (the same
 * directory by device and inode, or by name when either is missing). */
static const char *cfg_acme_dir_holds(const struct config *c, const char *dir)
{
	struct stat d, f;
	bool have_d = stat(dir, &d) == 0;
	size_t i, k, n = strlen(dir);
	char path[CFG_PATH_MAX + 1];

	while (n > 1 && dir[n - 1] == '/')
		n--;
	for (i = 0; i < c->tls.n_certs; i++) {
		const char *files[2] = {c->tls.certs[i].cert,
					c->tls.certs[i].key};

		for (k = 0; k < 2; k++) {
			const char *slash =
			    files[k] ? strrchr(files[k], '/') : NULL;
			size_t len = slash ? (size_t)(slash - files[k]) : 0;

			if (!slash || len >= sizeof(path))
				continue;
			memcpy(path, files[k], len ? len : 1);
			path[len ? len : 1] = '\0';
			if (have_d && stat(path, &f) == 0
				? d.st_dev == f.st_dev && d.st_ino == f.st_ino
				: len == n && strncmp(path, dir, n) == 0)
				return files[k];
		}
	}
	return NULL;
}

/* acme: the ACME CA and where its certificates go (docs/acme.md); cfg_pg
 * and cfg_tls have run. */
static int cfg_acme(struct cfg *x, const config_setting_t *root)
{
	static const char *const keys[] = {
	    "directory", "account_key", "contact",   "ca",	  "storage",
	    "dir",	 "retry_min",	"retry_max", "challenge", NULL};
	struct config_acme *a = &x->c->acme;
	char p[CFG_KEY_MAX];
	const config_setting_t *g;
	struct cfg_at at;
	const char *v;
	int rc;

	rc = cfg_group(x, root, "", "acme", keys, p, &g);
	if (rc < 0 || !g)
		return rc;
	a->enabled = true;
	rc = cfg_str(x, g, p, "directory", NULL, &v, &at);
	if (rc < 0)
		return rc;
	if (strncasecmp(v, "https://", 8) != 0 || !v[8])
		return cfg_fail(x, at.s, at.key,
				"an https:// URL (the CA's directory), not "
				"\"%s\"",
				v);
	if (cfg_dup(x, v, &a->directory) < 0)
		return -ENOMEM;
	rc = cfg_path(x, g, p, "account_key", CONFIG_ACME_DIR "/account.key",
		      CFG_PATH_MAX, false, &a->account_key);
	if (rc == 0)
		rc = cfg_path(x, g, p, "ca", "", CFG_PATH_MAX, true, &a->ca);
	if (rc == 0)
		rc = cfg_path(x, g, p, "dir", CONFIG_ACME_DIR, CFG_PATH_MAX,
			      false, &a->dir);
	if (rc == 0)
		rc = cfg_str(x, g, p, "contact", "", &v, &at);
	if (rc < 0)
		return rc;
	if (v[0] && (strncmp(v, "mailto:", 7) != 0 || !v[7] ||
		     strpbrk(v, " \t\r\n,\"")))
		return cfg_fail(x, at.s, at.key,
				"a mailto: URL (mailto:ops@example.com), not "
				"\"%s\"",
				v);
	if (cfg_dup(x, v, &a->contact) < 0)
		return -ENOMEM;
	rc = cfg_str(x, g, p, "storage", x->c->pg ? "database" : "files", &v,
		     &at);
	if (rc < 0)
		return rc;
	a->database = strcmp(v, "database") == 0;
	if (!a->database && strcmp(v, "files") != 0)
		return cfg_fail(x, at.s, at.key,
				"\"database\" or \"files\", not \"%s\"", v);
	if (a->database && !x->c->pg)
		return cfg_fail(x, at.s, at.key,
				"\"database\" needs pg (the certificates go "
				"to its certificates table)");
	rc = cfg_str(x, g, p, "challenge", "http-01", &v, &at);
	if (rc < 0)
		return rc;
	a->challenge = acme_chal_type_parse(v);
	if (a->challenge < 0)
		return cfg_fail(x, at.s, at.key,
				"\"http-01\" or \"tls-alpn-01\", not \"%s\"",
				v);
	rc = cfg_number(x, g, p, "retry_min", CFG_MS, 600000, 1000,
			CONFIG_DURATION_MAX_MS, &a->retry_min_ms);
	if (rc == 0)
		rc = cfg_number(x, g, p, "retry_max", CFG_MS, 86400000, 1000,
				CONFIG_DURATION_MAX_MS, &a->retry_max_ms);
	if (rc < 0)
		return rc;
	if (a->retry_max_ms < a->retry_min_ms)
		return cfg_fail(x, cfg_member(g, p, "retry_max", p), p,
				"less than retry_min");
	if (!x->c->tls.n_listen)
		return cfg_fail(x, g, "acme",
				"needs tls.listen: the certificates it orders "
				"are served there");
	if (!a->database) {
		const char *f = cfg_acme_dir_holds(x->c, a->dir);

		if (f)
			return cfg_fail(
			    x, cfg_member(g, p, "dir", p), p,
			    "%s holds %s of tls.certificates: edged "
			    "writes its certificates there; give it "
			    "a directory of its own",
			    a->dir, f);
	}
	return 0;
}

/* analytics: the file sink, the database sink (when pg is set) and its
 * disk spool; cfg_pg has run. */
static int cfg_analytics(struct cfg *x, const config_setting_t *root)
{
	static const char *const keys[] = {
	    "file",	 "queue",	 "database", "spool",
	    "spool_max", "spool_memory", "format",   NULL};
	enum analytics_format fmt;
	struct config_analytics *an = &x->c->analytics;
	char p[CFG_KEY_MAX];
	const config_setting_t *g;
	struct cfg_at at;
	const char *v;
	int rc;

	rc = cfg_group(x, root, "", "analytics", keys, p, &g);
	if (rc == 0)
		rc = cfg_path(x, g, p, "file", "", CFG_PATH_MAX, true,
			      &an->file);
	if (rc == 0)
		rc = cfg_number(x, g, p, "queue", CFG_COUNT, 65536, 16, 1 << 24,
				&an->queue);
	if (rc == 0)
		rc = cfg_bool(x, g, p, "database", true, &an->database);
	if (rc == 0)
		rc = cfg_number(x, g, p, "spool_max", CFG_BYTES,
				CONFIG_SPOOL_MAX_DEFAULT, CONFIG_SPOOL_MAX_MIN,
				CFG_SIZE_MAX, &an->spool_max);
	if (rc == 0)
		rc = cfg_number(x, g, p, "spool_memory", CFG_COUNT, 16384, 512,
				1 << 20, &an->spool_memory);
	if (rc == 0)
		rc = cfg_str(x, g, p, "format", "json", &v, &at);
	if (rc < 0)
		return rc;
	if (analytics_format_parse(v, &fmt))
		return cfg_fail(x, at.s, at.key,
				"\"%s\" is not an access log format (json or "
				"combined)",
				v);
	an->format = (int)fmt;
	rc = cfg_str(x, g, p, "spool", "", &v, &at);
	if (rc < 0)
		return rc;
	if (v[0] && (!x->c->pg || !an->database))
		return cfg_fail(x, at.s, at.key,
				"a disk spool is for the database sink: it "
				"needs pg set and analytics.database true");
	return cfg_path(x, g, p, "spool", "", CFG_PATH_MAX, true, &an->spool);
}

/* A wake or sleep command: printable text, "%s" (the environment's id)
 * and "%%" its only % sequences. */
static int cfg_wake_command(struct cfg *x, const config_setting_t *g,
			    const char *path, const char *name, char **out)
{
	struct cfg_at at;
	const char *v, *q;
	int rc;

	rc = cfg_str(x, g, path, name, "", &v, &at);
	if (rc < 0)
		return rc;
	if (strlen(v) > CONFIG_WAKE_COMMAND_MAX)
		return cfg_fail(x, at.s, at.key, "longer than %d bytes",
				CONFIG_WAKE_COMMAND_MAX);
	for (q = v; *q; q++) {
		if ((unsigned char)*q < 0x20 || *q == 0x7f)
			return cfg_fail(x, at.s, at.key,
					"a control character at byte %zu",
					(size_t)(q - v));
		if (*q == '%') {
			if (q[1] != 's' && q[1] != '%')
				return cfg_fail(x, at.s, at.key,
						"\"%%%c\" at byte %zu: only "
						"%%s (the environment's id) "
						"and %%%% may follow %%",
						q[1] ? q[1] : ' ',
						(size_t)(q - v));
			q++;
		}
	}
	return cfg_dup(x, v, out);
}

/* wake: the commands, the semaphore, the timeout, the probe's step and
 * the back-off's cap (docs/wake.md). */
static int cfg_wake(struct cfg *x, const config_setting_t *root)
{
	static const char *const keys[] = {
	    "command",	      "sleep_command",
	    "max_concurrent", "timeout",
	    "probe_interval", "output_max",
	    "restart_window", "max_waiting_connections",
	    "retry_max",      NULL};
	struct config_wake *wk = &x->c->wake;
	char p[CFG_KEY_MAX];
	const config_setting_t *g;
	int rc;

	rc = cfg_group(x, root, "", "wake", keys, p, &g);
	if (rc == 0)
		rc = cfg_wake_command(x, g, p, "command", &wk->command);
	if (rc == 0)
		rc = cfg_wake_command(x, g, p, "sleep_command",
				      &wk->sleep_command);
	if (rc == 0)
		rc =
		    cfg_number(x, g, p, "max_concurrent", CFG_COUNT, 8, 1,
			       CONFIG_WAKE_CONCURRENT_MAX, &wk->max_concurrent);
	if (rc == 0)
		rc = cfg_number(x, g, p, "timeout", CFG_MS, 5 * CFG_S, 100,
				10 * CFG_MIN, &wk->timeout_ms);
	if (rc == 0)
		rc = cfg_number(x, g, p, "probe_interval", CFG_MS, 1, 1, CFG_S,
				&wk->probe_interval_ms);
	if (rc == 0)
		rc = cfg_number(x, g, p, "output_max", CFG_BYTES, 4096, 0,
				1 << 20, &wk->output_max);
	if (rc == 0)
		rc = cfg_number(x, g, p, "restart_window", CFG_MS, 10 * CFG_S,
				1, 10 * CFG_MIN, &wk->restart_window_ms);
	if (rc == 0)
		rc = cfg_number(x, g, p, "max_waiting_connections", CFG_COUNT,
				CONFIG_WAKE_WAITING_DEFAULT, 1,
				CONFIG_WAKE_WAITING_MAX,
				&wk->max_waiting_connections);
	if (rc == 0)
		rc = cfg_number(x, g, p, "retry_max", CFG_MS, 60 * CFG_S, CFG_S,
				60 * CFG_MIN, &wk->retry_max_ms);
	return rc;
}

/* ---- projects ----------------------------------------------------------- */

/* A string member of g checked by check (config_check.h), def when
 * absent; *out is a new copy. */
static int cfg_checked(struct cfg *x, const config_setting_t *g,
		       const char *path, const char *name, const char *def,
		       int (*check)(const char *, struct errbuf *), char **out)
{
	struct cfg_at at;
	struct errbuf e;
	const char *v;
	int rc;

	rc = cfg_str(x, g, path, name, def, &v, &at);
	if (rc < 0)
		return rc;
	if (check(v, &e) < 0)
		return cfg_fail(x, at.s, at.key, "%s", e.msg);
	return cfg_dup(x, v, out);
}

static int cfg_security(struct cfg *x, const config_setting_t *env,
			const char *path, struct config_security_headers *sh)
{
	static const char *const keys[] = {
	    "hsts",	     "hsts_max_age",	"hsts_subdomains", "nosniff",
	    "frame_options", "referrer_policy", "https_redirect",  NULL};
	char p[CFG_KEY_MAX];
	const config_setting_t *g;
	int rc;

	rc = cfg_group(x, env, path, "security_headers", keys, p, &g);
	if (rc == 0)
		rc = cfg_bool(x, g, p, "hsts", false, &sh->hsts);
	if (rc == 0)
		rc = cfg_bool(x, g, p, "hsts_subdomains", false,
			      &sh->hsts_subdomains);
	if (rc == 0)
		rc = cfg_bool(x, g, p, "nosniff", true, &sh->nosniff);
	if (rc == 0)
		rc = cfg_bool(x, g, p, "https_redirect", false,
			      &sh->https_redirect);
	if (rc == 0)
		rc = cfg_seconds(x, g, p, "hsts_max_age", "365d",
				 &sh->hsts_max_age_s);
	if (rc == 0)
		rc =
		    cfg_checked(x, g, p, "frame_options", "",
				config_frame_options_check, &sh->frame_options);
	if (rc == 0)
		rc = cfg_checked(x, g, p, "referrer_policy", "",
				 config_referrer_policy_check,
				 &sh->referrer_policy);
	return rc;
}

/* A deployment's or route's timeouts group: request_total (absent: 0,
 * none). */
static int cfg_request_total(struct cfg *x, const config_setting_t *g,
			     const char *path, uint64_t *ms)
{
	static const char *const keys[] = {"request_total", NULL};
	char p[CFG_KEY_MAX];
	const config_setting_t *t;
	int rc;

	*ms = 0;
	rc = cfg_group(x, g, path, "timeouts", keys, p, &t);
	if (rc < 0 || !t)
		return rc;
	return cfg_number(x, t, p, "request_total", CFG_MS, 0, 1,
			  CONFIG_REQUEST_TOTAL_MAX_MS, ms);
}

static int cfg_route(struct cfg *x, const config_setting_t *g, const char *path,
		     const struct route_src_env *env, struct route_src_route *r)
{
	static const char *const keys[] = {
	    "prefix",
	    "strip_prefix",
	    "upstreams",
	    "balance",
	    "max_body_bytes",
	    "headers",
	    "api_keys",
	    "auth_request",
	    "jwt",
	    "wake",
	    "activity",
	    "timeouts",
	    "shed",
	    NULL,
	};
	const char *act;
	struct cfg_at at;
	bool wake = true;
	int rc;

	rc = cfg_known(x, g, path, keys);
	if (rc == 0)
		rc = cfg_prefix(x, g, path, "prefix", &r->prefix);
	if (rc == 0)
		rc = cfg_bool(x, g, path, "strip_prefix", false,
			      &r->strip_prefix);
	if (rc == 0)
		rc = cfg_addrs(x, g, path, "upstreams", CONFIG_UPSTREAMS_MAX,
			       false, CONFIG_SCHEMES_EDGED, &r->upstreams,
			       &r->n_upstreams);
	if (rc == 0)
		rc = cfg_balance(x, g, path, env->deployment.balance,
				 &r->balance);
	if (rc == 0)
		rc = cfg_number(x, g, path, "max_body_bytes", CFG_BYTES,
				env->max_body_bytes, 0, CFG_SIZE_MAX,
				&r->max_body_bytes);
	if (rc == 0)
		rc = cfg_headers(x, g, path, &r->headers);
	if (rc == 0)
		rc = cfg_auth(x, g, path, &r->auth);
	if (rc == 0)
		rc = cfg_bool(x, g, path, "wake", true, &wake);
	r->no_wake = !wake;
	if (rc == 0)
		rc = cfg_str(x, g, path, "activity", "app", &act, &at);
	if (rc == 0 && strcmp(act, "app") != 0 &&
	    strcmp(act, "background") != 0)
		return cfg_fail(x, at.s, at.key,
				"\"%s\": \"app\" or \"background\"", act);
	if (rc == 0)
		r->background = strcmp(act, "background") == 0;
	if (rc == 0)
		rc = cfg_request_total(x, g, path, &r->request_total_ms);
	if (rc == 0)
		rc = cfg_bool(x, g, path, "shed", env->shed, &r->shed);
	return rc;
}

/* A deployment's group NAME read for its checker (config_*_of): *g the
 * group (NULL: absent, nothing read), v[i] and at[i] the values and
 * places of keys[0..n). 0, or -errno (an error already reported). */
static int cfg_group_values(struct cfg *x, const config_setting_t *dep,
			    const char *path, const char *name,
			    const char *const *keys, int n,
			    struct config_value *v, struct cfg_at *at, char *p,
			    const config_setting_t **g)
{
	int rc, i;

	rc = cfg_group(x, dep, path, name, keys, p, g);
	if (rc < 0 || !*g)
		return rc;
	for (i = 0; i < n; i++) {
		rc = cfg_value(x, *g, p, keys[i], &v[i], &at[i]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* A deployment's health_check group (absent: none), its values checked
 * by config_health_check_of: the one check the database's
 * deployments.health_check goes through too. */
static int cfg_health_check(struct cfg *x, const config_setting_t *dep,
			    const char *path, struct config_health_check *hc)
{
	struct config_value v[CONFIG_HC_NKEYS];
	struct cfg_at at[CONFIG_HC_NKEYS];
	char p[CFG_KEY_MAX];
	const config_setting_t *g;
	struct errbuf e;
	int rc, key;

	memset(hc, 0, sizeof(*hc));
	rc = cfg_group_values(x, dep, path, "health_check", config_hc_keys,
			      CONFIG_HC_NKEYS, v, at, p, &g);
	if (rc < 0 || !g)
		return rc;
	errbuf_clear(&e);
	if (config_health_check_of(v, hc, &key, &e) == 0)
		return 0;
	if (key < 0)
		return cfg_fail(x, g, p, "%s", e.msg);
	return cfg_fail(x, at[key].s, at[key].key, "%s", e.msg);
}

/* A deployment's tls group: how edged speaks TLS to its https://
 * endpoints (absent: verified against the system's store, the request's
 * host as the server name), its values checked by config_up_tls_of: the
 * one check the database's deployments.tls goes through too. The files
 * are read when the daemon loads the configuration (tls_up.h). */
static int cfg_up_tls(struct cfg *x, const config_setting_t *dep,
		      const char *path, struct config_up_tls *t)
{
	struct config_value v[CONFIG_UP_TLS_NKEYS];
	struct cfg_at at[CONFIG_UP_TLS_NKEYS];
	char p[CFG_KEY_MAX];
	const config_setting_t *g;
	struct errbuf e;
	int rc, key;

	memset(t, 0, sizeof(*t));
	rc = cfg_group_values(x, dep, path, "tls", config_up_tls_keys,
			      CONFIG_UP_TLS_NKEYS, v, at, p, &g);
	if (rc < 0 || !g)
		return rc;
	errbuf_clear(&e);
	if (config_up_tls_of(v, t, &key, &e) == 0)
		return 0;
	if (key < 0)
		return cfg_fail(x, g, p, "%s", e.msg);
	return cfg_fail(x, at[key].s, at[key].key, "%s", e.msg);
}

/* A deployment's retry group (absent: none; docs/upstream.md,
 * "Retries"), its values checked by config_retry_of: the one check the
 * database's deployments.retry goes through too. */
static int cfg_retry(struct cfg *x, const config_setting_t *dep,
		     const char *path, struct config_retry *rt)
{
	struct config_value v[CONFIG_RETRY_NKEYS];
	struct cfg_at at[CONFIG_RETRY_NKEYS];
	char p[CFG_KEY_MAX], ek[CFG_KEY_MAX];
	const config_setting_t *g;
	struct errbuf e;
	int rc, key, item;

	memset(rt, 0, sizeof(*rt));
	rc = cfg_group_values(x, dep, path, "retry", config_retry_keys,
			      CONFIG_RETRY_NKEYS, v, at, p, &g);
	if (rc < 0 || !g)
		return rc;
	errbuf_clear(&e);
	if (config_retry_of(v, rt, &key, &item, &e) == 0)
		return 0;
	if (item >= 0) {
		cfg_key_index(ek, at[key].key, (size_t)item);
		return cfg_fail(
		    x, config_setting_get_elem(at[key].s, (unsigned)item), ek,
		    "%s", e.msg);
	}
	return cfg_fail(x, at[key].s, at[key].key, "%s", e.msg);
}

/* A deployment's circuit group (absent: none; docs/upstream.md,
 * "Circuit breaking"), its values checked by config_circuit_of: the one
 * check the database's deployments.circuit goes through too. */
static int cfg_circuit(struct cfg *x, const config_setting_t *dep,
		       const char *path, struct config_circuit *cc)
{
	struct config_value v[CONFIG_CIRCUIT_NKEYS];
	struct cfg_at at[CONFIG_CIRCUIT_NKEYS];
	char p[CFG_KEY_MAX];
	const config_setting_t *g;
	struct errbuf e;
	int rc, key;

	memset(cc, 0, sizeof(*cc));
	rc = cfg_group_values(x, dep, path, "circuit", config_circuit_keys,
			      CONFIG_CIRCUIT_NKEYS, v, at, p, &g);
	if (rc < 0 || !g)
		return rc;
	errbuf_clear(&e);
	if (config_circuit_of(v, cc, &key, &e) == 0)
		return 0;
	return cfg_fail(x, at[key].s, at[key].key, "%s", e.msg);
}

/* A deployment's hedge group (absent: none; docs/upstream.md,
 * "Hedging"), its values checked by config_hedge_of: the one check the
 * database's deployments.hedge goes through too. */
static int cfg_hedge(struct cfg *x, const config_setting_t *dep,
		     const char *path, struct config_hedge *h)
{
	struct config_value v[CONFIG_HEDGE_NKEYS];
	struct cfg_at at[CONFIG_HEDGE_NKEYS];
	char p[CFG_KEY_MAX];
	const config_setting_t *g;
	struct errbuf e;
	int rc, key;

	memset(h, 0, sizeof(*h));
	rc = cfg_group_values(x, dep, path, "hedge", config_hedge_keys,
			      CONFIG_HEDGE_NKEYS, v, at, p, &g);
	if (rc < 0 || !g)
		return rc;
	errbuf_clear(&e);
	if (config_hedge_of(v, h, &key, &e) == 0)
		return 0;
	return cfg_fail(x, at[key].s, at[key].key, "%s", e.msg);
}

static int cfg_deployment(struct cfg *x, const config_setting_t *env,
			  const char *path, struct route_src_deployment *d)
{
	static const char *const keys[] = {
	    "id",      "upstreams",  "balance",	     "health_check",
	    "tls",     "send_proxy", "retry",	     "timeouts",
	    "circuit", "hedge",	     "max_inflight", NULL};
	char p[CFG_KEY_MAX];
	const config_setting_t *g;
	int rc;

	rc = cfg_group(x, env, path, "deployment", keys, p, &g);
	if (rc < 0)
		return rc;
	if (!g)
		return cfg_fail(x, env, p, "missing (required)");
	rc = cfg_id(x, g, p, 'd', "deployment id", &d->id);
	if (rc == 0)
		rc = cfg_addrs(x, g, p, "upstreams", CONFIG_UPSTREAMS_MAX, true,
			       CONFIG_SCHEMES_EDGED, &d->upstreams,
			       &d->n_upstreams);
	if (rc == 0)
		rc = cfg_balance(x, g, p, CONFIG_BALANCE_ROUND_ROBIN,
				 &d->balance);
	if (rc == 0)
		rc = cfg_health_check(x, g, p, &d->hc);
	if (rc == 0)
		rc = cfg_up_tls(x, g, p, &d->tls);
	if (rc == 0)
		rc = cfg_send_proxy(x, g, p, CONFIG_SEND_PROXY_OFF,
				    &d->send_proxy);
	if (rc == 0)
		rc = cfg_retry(x, g, p, &d->retry);
	if (rc == 0)
		rc = cfg_circuit(x, g, p, &d->circuit);
	if (rc == 0)
		rc = cfg_hedge(x, g, p, &d->hedge);
	if (rc == 0)
		rc = cfg_request_total(x, g, p, &d->request_total_ms);
	if (rc == 0)
		rc = cfg_number(x, g, p, "max_inflight", CFG_COUNT, 0, 0,
				CONFIG_EP_MAX_INFLIGHT_MAX, &d->max_inflight);
	return rc;
}

/* The environment's domains: at least one, each checked and lowercased
 * (config_domain_check), none claimed twice in the whole file. */
static int cfg_domains(struct cfg *x, const config_setting_t *g,
		       const char *path, struct route_src_env *env)
{
	char key[CFG_KEY_MAX], ek[CFG_KEY_MAX];
	const config_setting_t *s;
	struct errbuf e;
	size_t i, n;
	int rc;

	rc = cfg_list(x, g, path, "domains", key, &s);
	if (rc < 0)
		return rc;
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
	return 0;
}

/* The environment's routes, if any: no prefix routed twice. */
static int cfg_routes(struct cfg *x, const config_setting_t *g,
		      const char *path, struct route_src_env *env)
{
	char key[CFG_KEY_MAX], ek[CFG_KEY_MAX];
	const config_setting_t *s;
	size_t i, j, n;
	int rc;

	rc = cfg_group_list(x, g, path, "routes", key, &s, &n);
	if (rc < 0 || n == 0)
		return rc;
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

/* unmatched: "deployment" (a path no route matches goes to the
 * deployment) or "not_found" (it is a 404). */
static int cfg_unmatched(struct cfg *x, const config_setting_t *g,
			 const char *path, bool *not_found)
{
	struct cfg_at at;
	const char *v;
	int rc;

	rc = cfg_str(x, g, path, "unmatched", "deployment", &v, &at);
	if (rc < 0)
		return rc;
	*not_found = strcmp(v, "not_found") == 0;
	if (!*not_found && strcmp(v, "deployment") != 0)
		return cfg_fail(x, at.s, at.key,
				"\"deployment\" or \"not_found\", not \"%s\"",
				v);
	return 0;
}

/* tls: "auto" (its domains' certificates from the ACME CA of the acme
 * group) or absent. */
static int cfg_env_tls(struct cfg *x, const config_setting_t *g,
		       const char *path, bool *tls_auto)
{
	struct cfg_at at;
	const char *v;
	int rc;

	rc = cfg_str(x, g, path, "tls", "", &v, &at);
	if (rc < 0 || !v[0])
		return rc;
	if (strcmp(v, "auto") != 0)
		return cfg_fail(x, at.s, at.key,
				"\"auto\" or absent, not \"%s\"", v);
	if (!x->c->acme.enabled)
		return cfg_fail(x, at.s, at.key,
				"\"auto\" needs the acme group (the CA to "
				"order its certificates from)");
	*tls_auto = true;
	return 0;
}

static int cfg_environment(struct cfg *x, const config_setting_t *g,
			   const char *path, struct route_src_env *env)
{
	static const char *const keys[] = {"id",
					   "name",
					   "domains",
					   "routes",
					   "deployment",
					   "max_body_bytes",
					   "security_headers",
					   "on_demand",
					   "idle_timeout",
					   "idle_timeout_background",
					   "headers",
					   "redirects",
					   "unmatched",
					   "compression",
					   "inject",
					   "challenge",
					   "api_keys",
					   "jwt",
					   "auth_request",
					   "tls",
					   "shed",
					   NULL};
	char key[CFG_KEY_MAX];
	config_setting_t *it;
	int rc;

	rc = cfg_known(x, g, path, keys);
	if (rc == 0)
		rc = cfg_id(x, g, path, 'e', "environment id", &env->id);
	if (rc == 0)
		rc = cfg_bool(x, g, path, "on_demand", false, &env->on_demand);
	if (rc == 0)
		rc = cfg_number(x, g, path, "idle_timeout", CFG_MS,
				CONFIG_IDLE_TIMEOUT_DEFAULT_MS, CFG_S,
				CONFIG_DURATION_MAX_MS, &env->idle_timeout_ms);
	if (rc == 0)
		rc = cfg_number(x, g, path, "idle_timeout_background", CFG_MS,
				0, CFG_S, CONFIG_DURATION_MAX_MS,
				&env->idle_timeout_background_ms);
	if (rc < 0)
		return rc;
	it = cfg_member(g, path, "idle_timeout", key);
	if (!it)
		it = cfg_member(g, path, "idle_timeout_background", key);
	if (it && !env->on_demand)
		return cfg_fail(x, it, key,
				"only an on-demand environment sleeps: set "
				"on_demand = true");
	if (env->on_demand && !x->c->wake.command[0])
		return cfg_fail(x, cfg_member(g, path, "on_demand", key), key,
				"an on-demand environment needs wake.command");
	if (rc == 0)
		rc = cfg_env_tls(x, g, path, &env->tls_auto);
	if (rc == 0)
		rc = cfg_name(x, g, path, env->id, &env->name);
	if (rc == 0)
		rc = cfg_number(x, g, path, "max_body_bytes", CFG_BYTES,
				ROUTE_SRC_INHERIT, 0, CFG_SIZE_MAX,
				&env->max_body_bytes);
	if (rc == 0)
		rc = cfg_deployment(x, g, path, &env->deployment);
	if (rc == 0)
		rc = cfg_security(x, g, path, &env->security);
	if (rc == 0)
		rc = cfg_headers(x, g, path, &env->headers);
	if (rc == 0)
		rc = cfg_redirects(x, g, path, &env->redirects);
	if (rc == 0)
		rc = cfg_unmatched(x, g, path, &env->unmatched_not_found);
	if (rc == 0)
		rc = cfg_compression(x, g, path, &env->compression);
	if (rc == 0)
		rc = cfg_inject(x, g, path, &env->headers, &env->inject);
	if (rc == 0)
		rc = cfg_challenge(x, g, path, &env->challenge);
	if (rc == 0)
		rc = cfg_auth(x, g, path, &env->auth);
	if (rc == 0)
		rc = cfg_bool(x, g, path, "shed", false, &env->shed);
	if (rc == 0)
		rc = cfg_domains(x, g, path, env);
	if (rc == 0)
		rc = cfg_routes(x, g, path, env);
	return rc;
}

static int cfg_project(struct cfg *x, const config_setting_t *g,
		       const char *path, struct route_src_project *pr)
{
	static const char *const keys[] = {
	    "id",	"name",		"enabled", "ip_allow",
	    "ip_block", "environments", NULL};
	char key[CFG_KEY_MAX], ek[CFG_KEY_MAX];
	const config_setting_t *s;
	size_t i, n;
	int rc;

	rc = cfg_known(x, g, path, keys);
	if (rc == 0)
		rc = cfg_id(x, g, path, 'p', "project id", &pr->id);
	if (rc == 0)
		rc = cfg_name(x, g, path, pr->id, &pr->name);
	if (rc == 0)
		rc = cfg_bool(x, g, path, "enabled", true, &pr->enabled);
	if (rc == 0)
		rc = cfg_ip_rules(x, g, path, "ip_allow", EDGE_ACT_ALLOW,
				  &pr->ip_rules);
	if (rc == 0)
		rc = cfg_ip_rules(x, g, path, "ip_block", EDGE_ACT_BLOCK,
				  &pr->ip_rules);
	if (rc < 0)
		return rc;
	rc = cfg_group_list(x, g, path, "environments", key, &s, &n);
	if (rc < 0)
		return rc;
	if (!s)
		return cfg_fail(x, g, key, "missing (required)");
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
	char key[CFG_KEY_MAX], ek[CFG_KEY_MAX];
	struct route_src *src = x->projects;
	const config_setting_t *s;
	size_t i, n;
	int rc;

	rc = cfg_group_list(x, root, "", "projects", key, &s, &n);
	if (rc < 0 || n == 0)
		return cfg_next(x, rc);
	src->projects = calloc(n, sizeof(*src->projects));
	if (!src->projects)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		cfg_key_index(ek, key, i);
		src->n_projects++;
		rc = cfg_next(
		    x, cfg_project(x, config_setting_get_elem(s, (unsigned)i),
				   ek, &src->projects[i]));
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- TCP routes ---------------------------------------------------------- */

/* Whether listen address a clashes with b (named what, e.g. "listen[0]"):
 * the same address, or one whose socket would take a's connections
 * (config_addr_overlaps). Sets the error and returns -EINVAL, else 0. */
static int cfg_listen_clash(struct cfg *x, const config_setting_t *s,
			    const char *key, const struct config_addr *a,
			    const struct config_addr *b, const char *what)
{
	if (strcmp(a->text, b->text) == 0)
		return cfg_fail(x, s, key, "%s is also %s", a->text, what);
	if (config_addr_overlaps(a, b))
		return cfg_fail(x, s, key,
				"%s takes the port of %s (%s): a wildcard "
				"and a specific address on one port would "
				"share its connections",
				a->text, what, b->text);
	return 0;
}

/* A TCP route's sni: "*" (the default of its listen address) or a
 * domain (config_domain_check, a "*." wildcard allowed), lowercased. */
static int cfg_sni(struct cfg *x, const config_setting_t *g, const char *ek,
		   struct config_tcp_route *t)
{
	struct cfg_at at;
	struct errbuf e;
	const char *v;
	int rc;

	if (!config_setting_get_member(g, "sni"))
		return 0;
	rc = cfg_str(x, g, ek, "sni", NULL, &v, &at);
	if (rc < 0)
		return rc;
	rc = cfg_dup(x, v, &t->sni);
	if (rc < 0)
		return rc;
	if (config_sni_check(t->sni, &e) < 0)
		return cfg_fail(x, at.s, at.key, "%s", e.msg);
	return 0;
}

/* Whether TCP route t's listen address may be route u's too: both TLS
 * passthrough routes (sni), on the very same address, for other names;
 * else 0 (they do not meet, or may) or the clash, reported. */
static int cfg_tcp_clash(struct cfg *x, const config_setting_t *s,
			 const char *key, const struct config_tcp_route *t,
			 const struct config_tcp_route *u, const char *what)
{
	if (strcmp(t->listen.text, u->listen.text) || !t->sni || !u->sni)
		return cfg_listen_clash(x, s, key, &t->listen, &u->listen,
					what);
	if (strcmp(t->sni, u->sni) == 0)
		return cfg_fail(x, s, key, "%s has sni \"%s\" twice (also %s)",
				t->listen.text, t->sni, what);
	return 0;
}

/* tcp_routes: TCP (L4) routes, a listen address each, none of them an
 * HTTP listen address, admin_listen or another TCP route's (cfg_root has
 * read those) but for TLS passthrough routes (sni), which share theirs,
 * a name each. The environment is an id of any route source, looked up
 * when a connection comes. */
static int cfg_tcp_routes(struct cfg *x, const config_setting_t *root)
{
	static const char *const keys[] = {"listen",	 "environment",
					   "sni",	 "proxy_protocol",
					   "send_proxy", NULL};
	char key[CFG_KEY_MAX], ek[CFG_KEY_MAX], what[CFG_KEY_MAX];
	char idx[CFG_KEY_MAX];
	struct config *c = x->c;
	const config_setting_t *s;
	struct cfg_at at;
	struct errbuf e;
	const char *v;
	size_t i, j, n;
	int rc;

	rc = cfg_group_list(x, root, "", "tcp_routes", key, &s, &n);
	if (rc < 0 || n == 0)
		return rc;
	if (n > CONFIG_TCP_ROUTES_MAX)
		return cfg_fail(x, s, key, "at most %d TCP routes, has %zu",
				CONFIG_TCP_ROUTES_MAX, n);
	c->tcp_routes = calloc(n, sizeof(*c->tcp_routes));
	if (!c->tcp_routes)
		return cfg_nomem(x);
	for (i = 0; i < n; i++) {
		const config_setting_t *g =
		    config_setting_get_elem(s, (unsigned)i);
		struct config_tcp_route *t = &c->tcp_routes[i];

		cfg_key_index(ek, key, i);
		c->n_tcp_routes++;
		rc = cfg_known(x, g, ek, keys);
		if (rc == 0)
			rc = cfg_sni(x, g, ek, t);
		if (rc == 0)
			rc = cfg_str(x, g, ek, "listen", NULL, &v, &at);
		if (rc < 0)
			return rc;
		if (config_addr_parse(v, &t->listen, &e) < 0)
			return cfg_fail(x, at.s, at.key, "%s", e.msg);
		rc = cfg_bool(x, g, ek, "proxy_protocol", false,
			      &t->listen.proxy_protocol);
		if (rc == 0)
			rc = cfg_send_proxy(x, g, ek, CONFIG_SEND_PROXY_INHERIT,
					    &t->send_proxy);
		for (j = 0; j < c->n_listen && rc == 0; j++) {
			cfg_key_index(what, "listen", j);
			rc = cfg_listen_clash(x, at.s, at.key, &t->listen,
					      &c->listen[j], what);
		}
		if (rc == 0)
			rc = cfg_listen_clash(x, at.s, at.key, &t->listen,
					      &c->admin_listen, "admin_listen");
		for (j = 0; j < i && rc == 0; j++) {
			cfg_key_index(idx, key, j);
			cfg_key(what, idx, "listen");
			if (!strcmp(t->listen.text,
				    c->tcp_routes[j].listen.text) &&
			    !t->sni != !c->tcp_routes[j].sni)
				rc = cfg_fail(x, at.s, at.key,
					      "%s is also %s, and only TLS "
					      "passthrough routes (sni) share "
					      "a listen address",
					      t->listen.text, what);
			else if (!strcmp(t->listen.text,
					 c->tcp_routes[j].listen.text) &&
				 t->sni && c->tcp_routes[j].sni &&
				 t->listen.proxy_protocol !=
				     c->tcp_routes[j].listen.proxy_protocol)
				rc = cfg_fail(x, g, ek,
					      "proxy_protocol: %s is also %s, "
					      "which says otherwise (the "
					      "routes of an address share its "
					      "connections)",
					      t->listen.text, what);
			else
				rc = cfg_tcp_clash(x, at.s, at.key, t,
						   &c->tcp_routes[j], what);
		}
		if (rc == 0)
			rc = cfg_str(x, g, ek, "environment", NULL, &v, &at);
		if (rc < 0)
			return rc;
		if (config_id_check(v, &e) < 0)
			return cfg_fail(x, at.s, at.key, "%s", e.msg);
		rc = cfg_dup(x, v, &t->environment);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- TLS termination ---------------------------------------------------- */

/* tls.listen: HTTPS addresses, none of them an HTTP listen address,
 * admin_listen or a TCP route's (cfg_root has read those). */
static int cfg_tls_listen(struct cfg *x, const config_setting_t *g,
			  const char *path)
{
	struct config *c = x->c;
	struct config_tls *t = &c->tls;
	char key[CFG_KEY_MAX], ek[CFG_KEY_MAX], what[CFG_KEY_MAX];
	const config_setting_t *s;
	size_t i, j;
	int rc;

	rc = cfg_listen_addrs(x, g, path, "listen", CONFIG_LISTEN_MAX,
			      &t->listen, &t->n_listen);
	if (rc < 0 || !t->listen)
		return rc;
	cfg_key(key, path, "listen");
	s = config_setting_get_member(g, "listen");
	for (i = 0; i < t->n_listen; i++) {
		const config_setting_t *el =
		    config_setting_get_elem(s, (unsigned)i);

		cfg_key_index(ek, key, i);
		for (j = 0; j < c->n_listen && rc == 0; j++) {
			cfg_key_index(what, "listen", j);
			rc = cfg_listen_clash(x, el, ek, &t->listen[i],
					      &c->listen[j], what);
		}
		if (rc == 0)
			rc = cfg_listen_clash(x, el, ek, &t->listen[i],
					      &c->admin_listen, "admin_listen");
		for (j = 0; j < c->n_tcp_routes && rc == 0; j++) {
			char idx[CFG_KEY_MAX];

			cfg_key_index(idx, "tcp_routes", j);
			cfg_key(what, idx, "listen");
			rc = cfg_listen_clash(x, el, ek, &t->listen[i],
					      &c->tcp_routes[j].listen, what);
		}
		for (j = 0; j < i && rc == 0; j++) {
			cfg_key_index(what, key, j);
			if (config_addr_overlaps(&t->listen[i], &t->listen[j]))
				rc = cfg_listen_clash(x, el, ek, &t->listen[i],
						      &t->listen[j], what);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* tls.quic_listen: UDP addresses, so they clash only among themselves
 * (a QUIC address on a TCP listener's port is the usual set-up) */
static int cfg_quic_listen(struct cfg *x, const config_setting_t *g,
			   const char *path)
{
	struct config_tls *t = &x->c->tls;
	char key[CFG_KEY_MAX], ek[CFG_KEY_MAX], what[CFG_KEY_MAX];
	const config_setting_t *s;
	int rc;

	rc = cfg_listen_addrs(x, g, path, "quic_listen", CONFIG_LISTEN_MAX,
			      &t->quic_listen, &t->n_quic_listen);
	if (rc < 0 || !t->quic_listen)
		return rc;
	t->gnutls = true;
	cfg_key(key, path, "quic_listen");
	s = config_setting_get_member(g, "quic_listen");
	for (size_t i = 0; i < t->n_quic_listen; i++) {
		const config_setting_t *el =
		    config_setting_get_elem(s, (unsigned)i);

		cfg_key_index(ek, key, i);
		for (size_t j = 0; j < i && rc == 0; j++) {
			cfg_key_index(what, key, j);
			if (config_addr_overlaps(&t->quic_listen[i],
						 &t->quic_listen[j]))
				rc = cfg_listen_clash(x, el, ek,
						      &t->quic_listen[i],
						      &t->quic_listen[j], what);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* tls: HTTPS listen addresses and the certificates served on them; the
 * files themselves are read by tls.c (edged --check builds the store
 * too), so that a reload can refuse a broken one. */
static int cfg_tls(struct cfg *x, const config_setting_t *root)
{
	static const char *const keys[] = {
	    "listen",	   "certificates",   "session_ticket_rotation",
	    "quic_listen", "quic_advertise", "quic_early_data",
	    NULL};
	static const char *const ckeys[] = {"cert", "key", "ocsp", NULL};
	struct config_tls *t = &x->c->tls;
	char p[CFG_KEY_MAX], key[CFG_KEY_MAX], ek[CFG_KEY_MAX];
	const config_setting_t *g, *s = NULL;
	size_t i, n = 0;
	int rc;

	rc = cfg_group(x, root, "", "tls", keys, p, &g);
	if (rc == 0)
		rc = cfg_number(x, g, p, "session_ticket_rotation", CFG_MS,
				CFG_H, CFG_MIN, 7 * 24 * CFG_H,
				&t->ticket_rotation_ms);
	if (rc < 0 || !g)
		return rc;
	rc = cfg_tls_listen(x, g, p);
	if (rc == 0)
		rc = cfg_quic_listen(x, g, p);
	if (rc == 0)
		rc = cfg_bool(x, g, p, "quic_advertise", true,
			      &t->quic_advertise);
	if (rc == 0)
		rc = cfg_bool(x, g, p, "quic_early_data", false,
			      &t->quic_early_data);
	if (rc == 0 && t->quic_early_data && t->n_quic_listen == 0) {
		cfg_key(key, p, "quic_early_data");
		rc =
		    cfg_fail(x, config_setting_get_member(g, "quic_early_data"),
			     key, "needs quic_listen (0-RTT is HTTP/3's)");
	}
	if (rc == 0)
		rc = cfg_group_list(x, g, p, "certificates", key, &s, &n);
	if (rc < 0)
		return rc;
	if (!t->listen)
		return cfg_fail(x, g, p,
				"listen: missing (the HTTPS addresses, e.g. "
				"[ \"0.0.0.0:443\" ])");
	if (n == 0)
		return cfg_fail(x, s ? s : g, s ? key : p,
				"%s: needs at least one certificate",
				s ? "empty" : "certificates missing");
	if (n > CONFIG_TLS_CERTS_MAX)
		return cfg_fail(x, s, key, "at most %d certificates, has %zu",
				CONFIG_TLS_CERTS_MAX, n);
	t->certs = calloc(n, sizeof(*t->certs));
	if (!t->certs)
		return cfg_nomem(x);
	for (i = 0; i < n; i++) {
		const config_setting_t *e =
		    config_setting_get_elem(s, (unsigned)i);
		struct config_tls_cert *ct = &t->certs[i];

		cfg_key_index(ek, key, i);
		t->n_certs++;
		rc = cfg_known(x, e, ek, ckeys);
		if (rc == 0)
			rc = cfg_path(x, e, ek, "cert", NULL, CFG_PATH_MAX,
				      false, &ct->cert);
		if (rc == 0)
			rc = cfg_path(x, e, ek, "key", NULL, CFG_PATH_MAX,
				      false, &ct->key);
		if (rc == 0)
			rc = cfg_path(x, e, ek, "ocsp", "", CFG_PATH_MAX, true,
				      &ct->ocsp);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- the root ----------------------------------------------------------- */

/* pg: libpq's connection string (turns the control plane on; absent:
 * off; one libpq cannot parse is refused), and host_name: how this edged
 * names itself in edge_hosts (the machine's host name by default). */
static int cfg_pg(struct cfg *x, const config_setting_t *root)
{
	struct config *c = x->c;
	char host[256];
	struct errbuf e;
	struct cfg_at at;
	const char *v;
	int rc;

	rc = cfg_str(x, root, "", "pg", "", &v, &at);
	if (rc < 0)
		return rc;
	if (at.s != root && !v[0])
		return cfg_fail(x, at.s, at.key,
				"empty (leave it out to run without a "
				"database)");
	if (v[0]) {
		/* what libpq cannot parse, edged could only refuse at start
		 * (after --check and a reload had said ok): say it here,
		 * masked (pgdb_params_init) */
		struct pgdb_params pp;

		rc = pgdb_params_init(&pp, v, NULL, &e);
		pgdb_params_free(&pp);
		if (rc == -EINVAL)
			return cfg_fail(x, at.s, at.key, "%s", e.msg);
		if (rc < 0 || cfg_dup(x, v, &c->pg) < 0)
			return -ENOMEM;
	}
	rc = cfg_path(x, root, "", "pg_snapshot", CONFIG_DEFAULT_PG_SNAPSHOT,
		      CFG_PATH_MAX, true, &c->pg_snapshot);
	if (rc < 0)
		return rc;
	if (c->pg_snapshot[0]) {
		struct stat sb;
		const config_setting_t *ps =
		    config_setting_get_member(root, "pg_snapshot");

		/* the snapshot is a file: a directory would fail every save
		 * and every boot from it, long after the load said ok */
		if (stat(c->pg_snapshot, &sb) == 0 && !S_ISREG(sb.st_mode))
			return cfg_fail(x, ps ? ps : root, "pg_snapshot",
					"%s is %s, not a file (name the "
					"snapshot's file, e.g. "
					"%s/db-snapshot.json)",
					c->pg_snapshot,
					S_ISDIR(sb.st_mode)
					    ? "a directory"
					    : "not a regular file",
					c->pg_snapshot);
	}
	if (gethostname(host, sizeof(host)) || !host[0])
		snprintf(host, sizeof(host), "edge");
	host[sizeof(host) - 1] = '\0';
	rc = cfg_str(x, root, "", "host_name", host, &v, &at);
	if (rc < 0)
		return rc;
	if (config_name_check(v, &e))
		return cfg_fail(x, at.s, at.key, "%s", e.msg);
	return cfg_dup(x, v, &c->host_name) < 0 ? -ENOMEM : 0;
}

/* listen: no address whose socket would take another's connections (a
 * wildcard and a specific address of one family on one port; cfg_addrs
 * refused the same address twice). */
static int cfg_listen_own(struct cfg *x, const config_setting_t *root)
{
	const config_setting_t *s = config_setting_get_member(root, "listen");
	char ek[CFG_KEY_MAX], what[CFG_KEY_MAX];
	struct config *c = x->c;
	size_t i, j;
	int rc = 0;

	for (i = 0; s && i < c->n_listen && rc == 0; i++) {
		cfg_key_index(ek, "listen", i);
		for (j = 0; j < i && rc == 0; j++) {
			cfg_key_index(what, "listen", j);
			rc = cfg_listen_clash(
			    x, config_setting_get_elem(s, (unsigned)i), ek,
			    &c->listen[i], &c->listen[j], what);
		}
	}
	return rc;
}

/* admin_listen: an address of its own, not one of listen's nor one that
 * shares a port with them. */
static int cfg_admin(struct cfg *x, const config_setting_t *root)
{
	char what[CFG_KEY_MAX];
	struct config *c = x->c;
	struct cfg_at at;
	struct errbuf e;
	const char *v;
	size_t i;
	int rc;

	rc =
	    cfg_str(x, root, "", "admin_listen", CONFIG_DEFAULT_ADMIN, &v, &at);
	if (rc < 0)
		return rc;
	if (config_addr_parse(v, &c->admin_listen, &e) < 0)
		return cfg_fail(x, at.s, at.key, "%s", e.msg);
	for (i = 0; i < c->n_listen; i++) {
		if (strcmp(c->listen[i].text, c->admin_listen.text) == 0)
			return cfg_fail(x, at.s, at.key, "%s is also in listen",
					v);
		cfg_key_index(what, "listen", i);
		rc = cfg_listen_clash(x, at.s, at.key, &c->admin_listen,
				      &c->listen[i], what);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* log_format and splice: words out of short lists. */
static int cfg_formats(struct cfg *x, const config_setting_t *root)
{
	struct config *c = x->c;
	enum splice_mode mode;
	struct cfg_at at;
	const char *v;
	int rc;

	rc = cfg_str(x, root, "", "log_format", "text", &v, &at);
	if (rc < 0)
		return rc;
	if (log_format_parse(v, &c->log_format))
		return cfg_fail(x, at.s, at.key,
				"\"%s\" is not a log format (text or json)", v);
	rc = cfg_str(x, root, "", "splice", "auto", &v, &at);
	if (rc < 0)
		return rc;
	if (splice_mode_parse(v, &mode))
		return cfg_fail(x, at.s, at.key,
				"\"%s\" is not a splice mode (auto, sockmap or "
				"off)",
				v);
	c->splice = (int)mode;
	return 0;
}

/* A proxy_protocol address with trusted_proxies empty closes every
 * connection: said. */
/* A TCP route to an environment of the file with a gate:
 * warned of, since its connections reach the endpoints unchecked. */
static int cfg_tcp_gated(struct cfg *x, const config_setting_t *root)
{
	const struct config *c = x->c;
	const struct route_src *src = x->projects;
	const config_setting_t *l =
	    config_setting_get_member(root, "tcp_routes");
	char key[CFG_KEY_MAX];
	size_t i, p, e;
	int rc = 0;

	for (i = 0; rc == 0 && i < c->n_tcp_routes; i++)
		for (p = 0; src && p < src->n_projects; p++)
			for (e = 0; e < src->projects[p].n_envs; e++) {
				const struct route_src_env *v =
				    &src->projects[p].envs[e];

				/* a route refused part way has none */
				if (!v->auth || !c->tcp_routes[i].environment ||
				    strcmp(v->id, c->tcp_routes[i].environment))
					continue;
				cfg_key_index(key, "tcp_routes", i);
				rc = cfg_warn(
				    x,
				    l ? config_setting_get_elem(l, (unsigned)i)
				      : root,
				    key,
				    "environment %s has a gate (api_keys, jwt "
				    "or auth_request), which a TCP route's "
				    "connections do not meet",
				    v->id);
			}
	return rc;
}

/* limits.brownout_lag: 0 (off) or CONFIG_BROWNOUT_LAG_MIN_MS or more (a
 * probe's lateness below that is timer noise, not a lagging loop). */
static int cfg_brownout(struct cfg *x, const config_setting_t *root)
{
	uint64_t v = x->c->limits.brownout_lag_ms;
	char key[CFG_KEY_MAX];
	const config_setting_t *g = cfg_member(root, "", "limits", key);

	if (v == 0 || v >= CONFIG_BROWNOUT_LAG_MIN_MS)
		return 0;
	return cfg_fail(x, cfg_member(g, "limits", "brownout_lag", key), key,
			"%llums: \"0\" (off) or at least %ums",
			(unsigned long long)v,
			(unsigned)CONFIG_BROWNOUT_LAG_MIN_MS);
}

static int cfg_pp_untrusted(struct cfg *x, const config_setting_t *root)
{
	const struct config *c = x->c;
	const config_setting_t *tls = config_setting_get_member(root, "tls");
	char key[CFG_KEY_MAX];
	size_t i;
	int rc = 0;

	if (c->trusted_proxies.n)
		return 0;
	for (i = 0; rc == 0 && i < c->n_listen + c->tls.n_listen; i++) {
		bool t = i >= c->n_listen;
		const struct config_addr *a =
		    t ? &c->tls.listen[i - c->n_listen] : &c->listen[i];

		if (!a->proxy_protocol)
			continue;
		cfg_key_index(key, t ? "tls.listen" : "listen",
			      t ? i - c->n_listen : i);
		rc = cfg_warn(x, t && tls ? tls : root, key,
			      "proxy_protocol with trusted_proxies empty: "
			      "every connection to %s is closed (the header "
			      "is taken from trusted peers only)",
			      a->text);
	}
	for (i = 0; rc == 0 && i < c->n_tcp_routes; i++) {
		if (!c->tcp_routes[i].listen.proxy_protocol)
			continue;
		cfg_key_index(key, "tcp_routes", i);
		rc = cfg_warn(x, root, key,
			      "proxy_protocol with trusted_proxies empty: "
			      "every connection to %s is closed (the header "
			      "is taken from trusted peers only)",
			      c->tcp_routes[i].listen.text);
	}
	return rc;
}

static int cfg_root(struct cfg *x, const config_setting_t *root)
{
	static const char *const keys[] = {"listen",	   "trusted_proxies",
					   "workers",	   "user",
					   "admin_listen", "control_socket",
					   "pin_dir",	   "limits",
					   "timeouts",	   "ratelimit",
					   "upstream",	   "analytics",
					   "projects",	   "log_format",
					   "pg",	   "pg_snapshot",
					   "host_name",	   "splice",
					   "tcp_routes",   "tls",
					   "wake",	   "io_uring",
					   "http2",	   "challenge",
					   "acme",	   NULL};
	struct config *c = x->c;
	uint64_t workers;
	long ncpu;
	int rc;

	/* an unknown key is reported, and the rest checked all the same */
	rc = cfg_next(x, cfg_known(x, root, "", keys));
	if (rc == 0)
		rc = cfg_next(x, cfg_listen_addrs(x, root, "", "listen",
						  CONFIG_LISTEN_MAX, &c->listen,
						  &c->n_listen));
	if (rc == 0)
		rc = cfg_next(x, cfg_listen_own(x, root));
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
	workers = 1;
	rc = cfg_next(x, cfg_number(x, root, "", "workers", CFG_COUNT,
				    (uint64_t)ncpu, 1, CONFIG_WORKERS_MAX,
				    &workers));
	c->workers = (unsigned)workers;
	if (rc == 0)
		rc = cfg_next(x, cfg_user(x, root, "", "user",
					  CONFIG_DEFAULT_USER, &c->user));
	if (rc == 0)
		rc = cfg_next(x, cfg_admin(x, root));
	if (rc == 0)
		rc = cfg_next(x, cfg_tcp_routes(x, root));
	if (rc == 0)
		rc = cfg_next(x, cfg_tls(x, root));
	if (rc == 0)
		rc = cfg_next(x, cfg_formats(x, root));
	if (rc == 0)
		rc = cfg_next(
		    x, cfg_bool(x, root, "", "io_uring", true, &c->io_uring));
	if (rc == 0)
		rc = cfg_next(x, cfg_trusted(x, root, "", "trusted_proxies",
					     &c->trusted_proxies));
	if (rc == 0)
		rc = cfg_next(x,
			      cfg_path(x, root, "", "control_socket",
				       CONFIG_DEFAULT_CONTROL, CFG_SUN_PATH_MAX,
				       false, &c->control_socket));
	if (rc == 0)
		rc = cfg_next(x, cfg_path(x, root, "", "pin_dir",
					  EDGE_PIN_DIR_DEFAULT, CFG_PATH_MAX,
					  false, &c->pin_dir));
	if (rc == 0)
		rc = cfg_next(x, cfg_pg(x, root));
	if (rc == 0)
		rc = cfg_next(x, cfg_nums(x, root, "limits", cfg_limits,
					  CFG_NELEM(cfg_limits), &c->limits));
	if (rc == 0)
		rc = cfg_next(x, cfg_brownout(x, root));
	if (rc == 0)
		rc = cfg_next(x,
			      cfg_nums(x, root, "timeouts", cfg_timeouts,
				       CFG_NELEM(cfg_timeouts), &c->timeouts));
	if (rc == 0)
		rc = cfg_next(x, cfg_ratelimit(x, root));
	if (rc == 0)
		rc = cfg_next(x, cfg_http2(x, root));
	if (rc == 0)
		rc = cfg_next(x, cfg_challenge_keys(x, root));
	if (rc == 0)
		rc = cfg_next(x, cfg_upstream(x, root));
	if (rc == 0)
		rc = cfg_next(x, cfg_analytics(x, root));
	if (rc == 0)
		rc = cfg_next(x, cfg_wake(x, root));
	if (rc == 0)
		rc = cfg_next(x, cfg_acme(x, root));
	if (rc == 0)
		rc = cfg_projects(x, root); /* each project its own errors */
	if (rc == 0)
		rc = cfg_pp_untrusted(x, root);
	if (rc == 0)
		rc = cfg_tcp_gated(x, root);
	if (rc == 0 && x->failed)
		rc = -EINVAL;
	return rc;
}

/* ---- integers as written ---------------------------------------------- */

/* The low 32 bits of what libconfig makes of literal v: its 32-bit
 * integers are (int)strtol(), (int)strtoul() for hex, its 64-bit ones
 * strtoll() and strtoull() (each saturating), so these bits agree
 * whichever libconfig read it, and whatever it kept. */
static uint32_t cfg_int_low32(const struct config_file_int *v)
{
	uint64_t u;

	if (v->hex)
		u = v->big ? UINT64_MAX : v->mag;
	else if (v->neg)
		u = v->big || v->mag > (1ULL << 63) ? 1ULL << 63 : 0 - v->mag;
	else
		u = v->big || v->mag > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX
							   : v->mag;
	return (uint32_t)u;
}

/* Hang on every integer setting under s, in the order of the text (the
 * order libconfig built the tree in), its literal src->ints[*k] as the
 * setting's hook (for cfg_number); a literal whose bits do not agree
 * with libconfig's value stops it. Returns 0 or -EINVAL. */
static int cfg_ints_attach(const struct config_file *src, config_setting_t *s,
			   size_t *k)
{
	int i, n;

	if (config_setting_type(s) == CONFIG_TYPE_INT ||
	    config_setting_type(s) == CONFIG_TYPE_INT64) {
		struct config_file_int *v;

		if (*k >= src->n_ints)
			return -EINVAL;
		v = &src->ints[*k];
		if ((uint32_t)config_setting_get_int64(s) != cfg_int_low32(v))
			return -EINVAL;
		config_setting_set_hook(s, v);
		(*k)++;
		return 0;
	}
	if (!config_setting_is_aggregate(s))
		return 0;
	n = config_setting_length(s);
	for (i = 0; i < n; i++)
		if (cfg_ints_attach(src, config_setting_get_elem(s, i), k) < 0)
			return -EINVAL;
	return 0;
}

/* ---- loading ------------------------------------------------------------ */

void config_errs_add(struct config_errs *e, const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return;
	if (e->n >= CONFIG_ERRS_MAX) {
		e->more++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(e->msg[e->n], sizeof(e->msg[e->n]), fmt, ap);
	va_end(ap);
	e->n++;
}

int config_load(const char *path, struct config **out,
		struct route_src **projects, struct errbuf *err)
{
	struct config_errs *errs = calloc(1, sizeof(*errs));
	int rc;

	errbuf_clear(err);
	if (!errs) {
		errbuf_set(err, "%s: out of memory", path);
		return -ENOMEM;
	}
	rc = config_load_all(path, out, projects, errs);
	if (rc && errs->n)
		errbuf_set(err, "%s", errs->msg[0]);
	else if (rc)
		errbuf_set(err, "%s: %s", path, strerror(-rc));
	free(errs);
	return rc;
}

int config_load_all(const char *path, struct config **out,
		    struct route_src **projects, struct config_errs *errs)
{
	struct errbuf ebuf, *err = &ebuf;
	struct config_file src;
	struct cfg x = {.file = path, .src = &src, .err = err, .errs = errs};
	config_setting_t *root;
	config_t lc;
	size_t k = 0;
	int rc;

	errbuf_clear(err);
	memset(&src, 0, sizeof(src));
	config_init(&lc);
	/* the file and its includes, read and checked (config_file.h) */
	rc = config_file_read(path, &src, err);
	if (rc)
		goto out;
	x.c = calloc(1, sizeof(*x.c));
	x.projects = route_src_new();
	if (!x.c || !x.projects || cfg_dup(&x, path, &x.c->path) < 0) {
		rc = -ENOMEM;
		errbuf_set(err, "%s: out of memory", path);
		goto out;
	}
	/* libconfig reads that text and opens nothing: every @include is
	 * expanded already. Were one left, it would name "/dev/null/FILE",
	 * which fails (ENOTDIR) rather than block or exit. */
	config_set_include_dir(&lc, "/dev/null");
	if (config_read_string(&lc, src.text) != CONFIG_TRUE) {
		const char *ef, *et = config_error_text(&lc);
		int el = config_error_line(&lc);
		unsigned line = 0;

		config_file_where(&src, el > 0 ? (unsigned)el : 0, &ef, &line);
		rc = -EINVAL;
		errbuf_set(err, "%s:%u: syntax: %s", ef ? ef : path, line,
			   et ? et : "error");
		goto out;
	}
	root = config_root_setting(&lc);
	if (config_setting_length(root) == 0) {
		/* a truncated file, most likely: not "every default and no
		 * projects", under which every request gets 503 */
		rc = -EINVAL;
		errbuf_set(err, "%s: no settings (empty file?)", path);
		goto out;
	}
	if (cfg_ints_attach(&src, root, &k) < 0 || k != src.n_ints) {
		rc = -EINVAL;
		errbuf_set(err,
			   "%s: internal error: the integers in the text do "
			   "not match libconfig's reading of it",
			   path);
		goto out;
	}
	rc = cfg_root(&x, root);
	if (rc == -ENOMEM && !err->msg[0])
		errbuf_set(err, "%s: out of memory", path);
	/* what cfg_next took is in errs already; what is left in err
	 * (a stop: out of memory) is added below */
	if (rc == 0) {
		*out = x.c;
		x.c = NULL;
		if (projects) {
			*projects = x.projects;
			x.projects = NULL;
		}
	}
out:
	if (err->msg[0])
		config_errs_add(errs, "%s", err->msg);
	cfg_seen_free(&x.seen);
	config_destroy(&lc);
	config_file_free(&src);
	config_free(x.c);
	route_src_free(x.projects);
	return rc;
}

void config_free(struct config *c)
{
	size_t i;

	if (!c)
		return;
	for (i = 0; i < c->n_warnings; i++)
		free(c->warnings[i]);
	free(c->warnings);
	free(c->path);
	free(c->listen);
	for (i = 0; i < c->n_tcp_routes; i++) {
		free(c->tcp_routes[i].environment);
		free(c->tcp_routes[i].sni);
	}
	free(c->tcp_routes);
	for (i = 0; i < c->tls.n_certs; i++) {
		free(c->tls.certs[i].cert);
		free(c->tls.certs[i].key);
		free(c->tls.certs[i].ocsp);
	}
	free(c->tls.certs);
	free(c->tls.listen);
	free(c->tls.quic_listen);
	free(c->user);
	free(c->control_socket);
	free(c->pin_dir);
	free(c->pg);
	free(c->pg_snapshot);
	free(c->host_name);
	free(c->analytics.file);
	free(c->analytics.spool);
	free(c->wake.command);
	free(c->wake.sleep_command);
	free(c->challenge.key_file);
	OPENSSL_cleanse(&c->challenge.keys, sizeof(c->challenge.keys));
	free(c->acme.directory);
	free(c->acme.account_key);
	free(c->acme.contact);
	free(c->acme.ca);
	free(c->acme.dir);
	for (i = 0; i < c->n_reread; i++)
		free(c->reread[i]);
	free(c->reread);
	free(c);
}

bool config_acme_same(const struct config_acme *a, const struct config_acme *b)
{
#define S(f) (strcmp(a->f ? a->f : "", b->f ? b->f : "") == 0)
	return a->enabled == b->enabled && S(directory) && S(account_key) &&
	       S(contact) && S(ca) && a->database == b->database && S(dir) &&
	       a->retry_min_ms == b->retry_min_ms &&
	       a->retry_max_ms == b->retry_max_ms &&
	       a->challenge == b->challenge;
#undef S
}

bool config_analytics_differs(const struct config_analytics *a,
			      const struct config_analytics *b)
{
	return strcmp(a->file ? a->file : "", b->file ? b->file : "") ||
	       a->queue != b->queue || a->database != b->database ||
	       strcmp(a->spool ? a->spool : "", b->spool ? b->spool : "") ||
	       a->spool_max != b->spool_max ||
	       a->spool_memory != b->spool_memory || a->format != b->format;
}

void config_route_defaults(const struct config *c, struct route_defaults *d)
{
	d->max_body_bytes = c->limits.max_body_bytes;
	d->max_inflight_per_route = c->limits.max_inflight_per_route;
}
