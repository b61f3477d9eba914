/* SPDX-License-Identifier: BSD-2-Clause */
/* fauth.c - forward auth's subrequest, its answer and its cache
 * (fauth.h). */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "auth.h"
#include "config_check.h"
#include "duration.h"
#include "fauth.h"
#include "h1.h"
#include "hdr.h"
#include "kcache.h"

static _Atomic uint64_t fauth_hits;

uint64_t fauth_cache_hits(void)
{
	return atomic_load_explicit(&fauth_hits, memory_order_relaxed);
}

/* ---- the group ------------------------------------------------------------
 */

int fauth_conf_new(const char *url, uint64_t timeout_ms, unsigned cache_ttl_s,
		   struct fauth_conf **out, struct errbuf *err)
{
	static _Atomic uint64_t ids;
	struct config_addr a;
	const char *auth, *slash, *p;
	char hostport[CONFIG_ADDR_STR_MAX + 8];
	struct fauth_conf *c;
	size_t an;

	*out = NULL;
	if (strncmp(url, "https://", 8) == 0) {
		errbuf_set(err, "https:// is not supported: an auth service "
				"reached over http:// (on this host or a "
				"private network)");
		return -EINVAL;
	}
	if (strncmp(url, "http://", 7) != 0) {
		errbuf_set(err, "\"%s\": an http:// URL", url);
		return -EINVAL;
	}
	if (strlen(url) > FAUTH_URL_MAX) {
		errbuf_set(err, "longer than %d bytes", FAUTH_URL_MAX);
		return -EINVAL;
	}
	auth = url + 7;
	slash = strchr(auth, '/');
	an = slash ? (size_t)(slash - auth) : strlen(auth);
	if (!an || an >= CONFIG_ADDR_STR_MAX) {
		errbuf_set(err, "\"%s\": no address after http://", url);
		return -EINVAL;
	}
	/* a port left out is 80 */
	if ((auth[an - 1] == ']' && auth[0] == '[') ||
	    (auth[0] != '[' && !memchr(auth, ':', an)))
		snprintf(hostport, sizeof(hostport), "%.*s:80", (int)an, auth);
	else
		snprintf(hostport, sizeof(hostport), "%.*s", (int)an, auth);
	if (config_addr_parse(hostport, &a, err) < 0)
		return -EINVAL;
	for (p = slash; p && *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f ||
		    *p == '#') {
			errbuf_set(err,
				   "\"%s\": the path holds a space, a control "
				   "character, '#' or a byte over 0x7e",
				   url);
			return -EINVAL;
		}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->url = strdup(url);
	c->authority = strndup(auth, an);
	c->path = strdup(slash ? slash : "/");
	if (!c->url || !c->authority || !c->path) {
		fauth_conf_free(c);
		return -ENOMEM;
	}
	memcpy(&c->addr, &a.ss, a.len);
	c->addr_len = a.len;
	c->timeout_ms = timeout_ms;
	c->cache_ttl_s = cache_ttl_s;
	c->id = atomic_fetch_add(&ids, 1) + 1;
	*out = c;
	return 0;
}

/* Fields that are the connection's or the message's framing: never
 * passed either way by the subrequest. */
static bool fauth_hop(const char *n, size_t l)
{
	return hdr_is_hop_by_hop(n, l) || h1_eq(n, l, "content-length") ||
	       h1_eq(n, l, "http2-settings");
}

/* s[0..n) against the lowercase lit[0..n), case aside and '_' read as
 * '-' (CGI-style servers read X_Auth_User as X-Auth-User). */
static bool fauth_alias_eq_n(const char *s, const char *lit, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = h1_lower((unsigned char)s[i]);

		if (c != (unsigned char)lit[i] && !(c == '_' && lit[i] == '-'))
			return false;
	}
	return true;
}

/* Whether s[0..n) is an X-Forwarded-* or X-Original-* field, in any
 * spelling. */
static bool fauth_forwarded(const char *s, size_t n)
{
	return (n > 12 && fauth_alias_eq_n(s, "x-forwarded-", 12)) ||
	       (n > 11 && fauth_alias_eq_n(s, "x-original-", 11));
}

int fauth_conf_copy(struct fauth_conf *c, const char *name, struct errbuf *err)
{
	char low[65];
	size_t n = strlen(name), i;

	for (i = 0; i < n; i++)
		if (!h1_tchar((unsigned char)name[i]))
			break;
	if (!n || i < n || n > 64) {
		errbuf_set(err, "\"%s\": a field name (a token, at most 64)",
			   name);
		return -EINVAL;
	}
	/* X-Forwarded-User, Authorization (oauth2-proxy's) may be */
	if (fauth_hop(name, n) || hdr_is_managed(name, n) ||
	    auth_field_reserved(name, n) || h1_eq(name, n, "content-type") ||
	    h1_eq(name, n, "expect") || h1_eq(name, n, "via")) {
		errbuf_set(err,
			   "\"%s\": a field of the connection or the "
			   "message, or one edge sets or checks: not copied",
			   name);
		return -EINVAL;
	}
	if (c->ncopy == FAUTH_COPY_MAX) {
		errbuf_set(err, "more than %d fields", FAUTH_COPY_MAX);
		return -EINVAL;
	}
	if (fauth_field_copied(c, name, n)) {
		errbuf_set(err, "\"%s\": named twice", name);
		return -EINVAL;
	}
	/* kept lowercase with '-' for '_': either spelling matches */
	for (i = 0; i <= n; i++)
		low[i] = name[i] == '_'
			     ? '-'
			     : (char)h1_lower((unsigned char)name[i]);
	c->copy[c->ncopy] = strdup(name);
	c->low[c->ncopy] = strdup(low);
	if (!c->copy[c->ncopy] || !c->low[c->ncopy]) {
		free(c->copy[c->ncopy]);
		free(c->low[c->ncopy]);
		return -ENOMEM;
	}
	c->ncopy++;
	return 0;
}

void fauth_conf_free(struct fauth_conf *c)
{
	size_t i;

	if (!c)
		return;
	for (i = 0; i < c->ncopy; i++) {
		free(c->copy[i]);
		free(c->low[i]);
	}
	free(c->url);
	free(c->authority);
	free(c->path);
	free(c);
}

int fauth_conf_from_json(const json_t *o, struct fauth_conf **out,
			 struct errbuf *err)
{
	static const char *const known[] = {"url", "timeout", "copy_headers",
					    "cache_ttl", NULL};
	const json_t *url = json_object_get(o, "url");
	const json_t *to = json_object_get(o, "timeout");
	const json_t *cc = json_object_get(o, "copy_headers");
	const json_t *ttl = json_object_get(o, "cache_ttl"), *v;
	uint64_t to_ms = FAUTH_TIMEOUT_DEFAULT_MS, ttl_s = 60;
	const char *k, *const *kn;
	struct fauth_conf *c;
	struct errbuf e;
	size_t i;
	int rc;

	*out = NULL;
	if (!json_is_object(o)) {
		errbuf_set(err, "auth_request: a JSON object");
		return -EINVAL;
	}
	json_object_foreach((json_t *)o, k, v)
	{
		for (kn = known; *kn && strcmp(*kn, k) != 0; kn++)
			;
		if (!*kn) {
			errbuf_set(err, "auth_request: unknown key \"%.40s\"",
				   k);
			return -EINVAL;
		}
	}
	if (!json_is_string(url) || (to && !json_is_string(to)) ||
	    (ttl && !json_is_string(ttl)) || (cc && !json_is_array(cc))) {
		errbuf_set(err, "auth_request: url (a string) is required; "
				"timeout and cache_ttl are strings, "
				"copy_headers a list");
		return -EINVAL;
	}
	if (to && duration_parse_ms(json_string_value(to), FAUTH_TIMEOUT_MAX_MS,
				    &to_ms, &e)) {
		errbuf_set(err, "auth_request: timeout: %s (at most 1m)",
			   e.msg);
		return -EINVAL;
	}
	if (ttl && (strcmp(json_string_value(ttl), "0s") == 0 ||
		    strcmp(json_string_value(ttl), "0") == 0))
		ttl_s = 0;
	else if (ttl &&
		 duration_parse_secs(json_string_value(ttl),
				     FAUTH_CACHE_TTL_MAX_S, &ttl_s, &e)) {
		errbuf_set(err, "auth_request: cache_ttl: %s (at most 1h)",
			   e.msg);
		return -EINVAL;
	}
	rc = fauth_conf_new(json_string_value(url), to_ms, (unsigned)ttl_s, &c,
			    &e);
	if (rc == -EINVAL)
		errbuf_set(err, "auth_request: url: %s", e.msg);
	if (rc)
		return rc;
	json_array_foreach(cc, i, v)
	{
		rc = json_is_string(v)
			 ? fauth_conf_copy(c, json_string_value(v), &e)
			 : (errbuf_set(&e, "not a string"), -EINVAL);
		if (rc == -EINVAL)
			errbuf_set(err, "auth_request: copy_headers[%zu]: %s",
				   i, e.msg);
		if (rc) {
			fauth_conf_free(c);
			return rc;
		}
	}
	*out = c;
	return 0;
}

json_t *fauth_conf_json(const struct fauth_conf *c)
{
	json_t *o = json_object(), *l = json_array();
	size_t i;
	bool bad = !o || !l;

	for (i = 0; !bad && i < c->ncopy; i++)
		bad = json_array_append_new(l, json_string(c->copy[i])) != 0;
	if (bad || json_object_set_new(o, "url", json_string(c->url)) ||
	    json_object_set_new(o, "timeout_ms",
				json_integer((json_int_t)c->timeout_ms)) ||
	    json_object_set_new(o, "cache_ttl_s",
				json_integer((json_int_t)c->cache_ttl_s)) ||
	    json_object_set_new(o, "copy_headers", l)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

bool fauth_field_copied(const struct fauth_conf *c, const char *name, size_t n)
{
	size_t i;

	for (i = 0; i < c->ncopy; i++)
		if (strlen(c->low[i]) == n &&
		    fauth_alias_eq_n(name, c->low[i], n))
			return true;
	return false;
}

/* ---- the cache --------------------------------------------------------------
 */

static double fauth_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The cache key of h: its Cookie fields, then its Authorization ones,
 * each value after a separator byte no value holds. malloc'd, NULL:
 * too long or no memory (not cached). */
static char *fauth_key(const struct h1_head *h, size_t *len)
{
	static const char *const names[] = {"cookie", "authorization"};
	size_t n = 0, i, k, at = 0;
	char *key;

	for (k = 0; k < 2; k++)
		for (i = 0; i < h->nheaders; i++)
			if (h1_eq(h->headers[i].name, h->headers[i].name_len,
				  names[k]))
				n += h->headers[i].value_len + 1;
	/* an anonymous request is never taken from the cache: what the
	 * service lets anyone do may depend on the path */
	if (!n || n + 2 > KCACHE_KEY_MAX)
		return NULL;
	key = malloc(n + 2);
	if (!key)
		return NULL;
	for (k = 0; k < 2; k++) {
		key[at++] = k ? '\n' : '\r'; /* which list follows */
		for (i = 0; i < h->nheaders; i++) {
			const struct h1_header *f = &h->headers[i];

			if (!h1_eq(f->name, f->name_len, names[k]))
				continue;
			memcpy(key + at, f->value, f->value_len);
			at += f->value_len;
			key[at++] = '\0';
		}
	}
	*len = at;
	return key;
}

bool fauth_cached(const struct fauth_conf *c, const struct h1_request *h,
		  struct fauth_result *res)
{
	size_t n;
	char *key;
	enum kcache_found f;

	memset(res, 0, sizeof(*res));
	if (!c->cache_ttl_s || !(key = fauth_key(&h->h, &n)))
		return false;
	f = kcache_find(KCACHE_FORWARD, c->id, key, n, fauth_now(),
			&res->fields, &res->fields_len);
	free(key);
	if (f != KCACHE_HIT)
		return false;
	res->v = FAUTH_ALLOW;
	res->status = 200;
	res->cached = true;
	atomic_fetch_add_explicit(&fauth_hits, 1, memory_order_relaxed);
	return true;
}

struct fauth_cc {
	long max_age, s_maxage; /* -1: none */
	bool no;		/* no-store, no-cache */
};

static long fauth_seconds(const char *v, size_t n)
{
	long s = 0;
	size_t i;

	if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
		v++;
		n -= 2;
	}
	if (!n || n > 9)
		return -1;
	for (i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		s = s * 10 + (v[i] - '0');
	}
	return s;
}

static int fauth_cc_elem(const char *e, size_t n, void *arg)
{
	struct fauth_cc *cc = arg;
	const char *eq = memchr(e, '=', n);
	size_t k = eq ? (size_t)(eq - e) : n;
	long v = eq ? fauth_seconds(eq + 1, n - k - 1) : -1;

	if (h1_eq(e, k, "no-store") || h1_eq(e, k, "no-cache"))
		cc->no = true;
	else if (h1_eq(e, k, "max-age"))
		cc->no |= (cc->max_age = v) < 0;
	else if (h1_eq(e, k, "s-maxage"))
		cc->no |= (cc->s_maxage = v) < 0;
	return 0;
}

static int fauth_vary_elem(const char *e, size_t n, void *arg)
{
	(void)arg;
	return !(h1_eq(e, n, "cookie") || h1_eq(e, n, "authorization"));
}

/* How long the answer h may be remembered, at most max seconds. */
static unsigned fauth_ttl(const struct h1_head *h, unsigned max)
{
	struct fauth_cc cc = {-1, -1, false};
	long t;
	size_t i;

	for (i = 0; i < h->nheaders; i++) {
		const struct h1_header *f = &h->headers[i];

		if (h1_eq(f->name, f->name_len, "cache-control"))
			h1_each(f->value, f->value_len, ',', fauth_cc_elem,
				&cc);
		else if (h1_eq(f->name, f->name_len, "vary") &&
			 h1_each(f->value, f->value_len, ',', fauth_vary_elem,
				 NULL))
			cc.no = true;
	}
	t = cc.s_maxage >= 0 ? cc.s_maxage : cc.max_age;
	if (cc.no || t <= 0)
		return 0;
	return t < (long)max ? (unsigned)t : max;
}

/* ---- the call ---------------------------------------------------------------
 */

/* Interim (1xx) answers skipped before the final one, at most. */
#define FAUTH_INTERIM_MAX 8

struct fauth_call {
	struct bufferevent *bev;
	const struct fauth_conf *c;
	fauth_done_fn done;
	void *arg;
	enum h1_method method;
	char *key; /* the cache's, NULL: not cached */
	size_t key_len;
	size_t head_len;  /* 0: the head is not read yet */
	unsigned interim; /* 1xx answers skipped */
	struct h1_response resp;
};

static void fauth_call_free(struct fauth_call *k)
{
	if (k->bev)
		bufferevent_free(k->bev);
	free(k->key);
	free(k);
}

void fauth_cancel(struct fauth_call *k)
{
	if (k)
		fauth_call_free(k);
}

/* End k with res: k is gone when its callback runs. */
static void fauth_finish(struct fauth_call *k, struct fauth_result *res)
{
	fauth_done_fn done = k->done;
	void *arg = k->arg;

	fauth_call_free(k);
	done(arg, res);
}

static void fauth_fail(struct fauth_call *k, const char *why)
{
	struct fauth_result res = {.v = FAUTH_UNAVAILABLE, .why = why};

	fauth_finish(k, &res);
}

/* Append "Name: value\r\n" of f to *buf (its length *len, at most
 * FAUTH_FIELDS_MAX). -1: over the bound, or no memory. */
static int fauth_field_add(char **buf, size_t *len, const struct h1_header *f)
{
	size_t add = f->name_len + f->value_len + 4;
	char *p;

	if (*len + add > FAUTH_FIELDS_MAX)
		return -1;
	p = realloc(*buf, *len + add + 1);
	if (!p)
		return -1;
	*buf = p;
	memcpy(p + *len, f->name, f->name_len);
	memcpy(p + *len + f->name_len, ": ", 2);
	memcpy(p + *len + f->name_len + 2, f->value, f->value_len);
	memcpy(p + *len + add - 2, "\r\n", 2);
	*len += add;
	p[*len] = '\0';
	return 0;
}

/* 2xx: the copied fields, remembered when the answer allows. */
static void fauth_allow(struct fauth_call *k)
{
	const struct h1_head *h = &k->resp.h;
	struct fauth_result res = {.v = FAUTH_ALLOW, .status = k->resp.code};
	unsigned ttl;
	size_t i;

	for (i = 0; i < h->nheaders; i++)
		if (fauth_field_copied(k->c, h->headers[i].name,
				       h->headers[i].name_len) &&
		    fauth_field_add(&res.fields, &res.fields_len,
				    &h->headers[i])) {
			free(res.fields);
			fauth_fail(k, "its admission's fields are too large");
			return;
		}
	ttl = k->key ? fauth_ttl(h, k->c->cache_ttl_s) : 0;
	if (ttl)
		kcache_add(KCACHE_FORWARD, k->c->id, k->key, k->key_len,
			   fauth_now() + ttl, res.fields, res.fields_len);
	fauth_finish(k, &res);
}

/* 401, 403, 3xx: relayed with body (n bytes). */
static void fauth_refuse(struct fauth_call *k, const char *body, size_t n)
{
	const struct h1_head *h = &k->resp.h;
	int code = k->resp.code;
	struct fauth_result res = {
	    .v = code >= 400 ? FAUTH_DENY : FAUTH_REDIRECT, .status = code};
	size_t i;

	for (i = 0; i < h->nheaders; i++) {
		const struct h1_header *f = &h->headers[i];
		const char *nm = f->name;
		size_t l = f->name_len;

		if (h1_eq(nm, l, "content-type")) {
			if (f->value_len <= FAUTH_CTYPE_MAX)
				snprintf(res.ctype, sizeof(res.ctype), "%.*s",
					 (int)f->value_len, f->value);
			continue;
		}
		if (fauth_hop(nm, l) || h1_eq(nm, l, "date") ||
		    h1_eq(nm, l, "server") || h1_eq(nm, l, "x-request-id") ||
		    h1_eq(nm, l, "cache-control") ||
		    hdr_named_in_connection(h, nm, l))
			continue;
		if (fauth_field_add(&res.fields, &res.fields_len, f)) {
			free(res.fields);
			fauth_fail(k, "its refusal's fields are too large");
			return;
		}
	}
	/* edge's answer to an error says no-store itself; a login
	 * redirect must not be kept either */
	if (code < 400 &&
	    fauth_field_add(&res.fields, &res.fields_len,
			    &(const struct h1_header){"Cache-Control", 13,
						      "no-store", 8})) {
		free(res.fields);
		fauth_fail(k, "its refusal's fields are too large");
		return;
	}
	if (n) {
		res.body = malloc(n);
		if (!res.body) {
			free(res.fields);
			fauth_fail(k, "out of memory");
			return;
		}
		memcpy(res.body, body, n);
		res.body_len = n;
	}
	fauth_finish(k, &res);
}

/* A chunked body of the bytes after the head: decoded whole into out
 * (at most FAUTH_BODY_MAX). 1 done, 0 more to come, -1 bad. */
static int fauth_unchunk(const char *p, size_t n, char *out, size_t *olen)
{
	struct h1_chunked st;
	size_t used, off, dl;
	int rc;

	h1_chunked_init(&st, NULL);
	*olen = 0;
	for (;;) {
		rc = h1_chunked_feed(&st, p, n, &used, &off, &dl);
		if (rc < 0)
			return -1;
		if (rc == H1_CHUNK_DONE)
			return 1;
		if (rc == H1_CHUNK_DATA) {
			if (*olen + dl > FAUTH_BODY_MAX)
				return -1;
			memcpy(out + *olen, p + off, dl);
			*olen += dl;
		}
		p += used;
		n -= used;
		if (rc == 0 || (!n && rc != H1_CHUNK_TRAILER))
			return 0;
	}
}

/* What has arrived: decide when enough has. eof: the service closed. */
static void fauth_input(struct fauth_call *k, bool eof)
{
	struct evbuffer *in = bufferevent_get_input(k->bev);
	size_t len = evbuffer_get_length(in), blen;
	const char *p;
	char *body;
	int rc, code;

	if (len > FAUTH_BODY_MAX + 2 * H1_DEFAULT_HEAD_MAX) {
		fauth_fail(k, "its answer is too large");
		return;
	}
again:
	/* parsed again each time: the spans follow the buffer's bytes */
	p = (const char *)evbuffer_pullup(in, -1);
	rc = len ? h1_parse_response(p, len, NULL, k->method, false, &k->resp)
		 : 0;
	if (rc < 0) {
		fauth_fail(k, "its answer is malformed");
		return;
	}
	if (rc == 0) {
		if (eof)
			fauth_fail(k, "it closed before answering");
		return;
	}
	k->head_len = (size_t)rc;
	code = k->resp.code;
	/* an interim answer (100, 103): the final one follows */
	if (code < 200 && k->interim++ < FAUTH_INTERIM_MAX) {
		evbuffer_drain(in, k->head_len);
		len -= k->head_len;
		k->head_len = 0;
		h1_response_init(&k->resp);
		goto again;
	}
	if (code >= 200 && code <= 299) {
		fauth_allow(k);
		return;
	}
	if (code != 401 && code != 403 && code != 301 && code != 302 &&
	    code != 303 && code != 307 && code != 308) {
		fauth_fail(k, code >= 500  ? "it answered 5xx"
			      : code < 200 ? "it answered too many 1xx"
					   : "it answered a status edge does "
					     "not relay");
		return;
	}
	p += k->head_len;
	blen = len - k->head_len;
	switch (k->resp.body) {
	case H1_BODY_NONE:
		fauth_refuse(k, NULL, 0);
		return;
	case H1_BODY_LENGTH:
		if (k->resp.h.content_length > FAUTH_BODY_MAX)
			fauth_fail(k, "its refusal's body is too large");
		else if (blen >= (size_t)k->resp.h.content_length)
			fauth_refuse(k, p, (size_t)k->resp.h.content_length);
		else if (eof)
			fauth_fail(k, "it closed in the middle of its answer");
		return;
	case H1_BODY_CHUNKED:
		body = malloc(FAUTH_BODY_MAX);
		if (!body) {
			fauth_fail(k, "out of memory");
			return;
		}
		rc = fauth_unchunk(p, blen, body, &blen);
		if (rc > 0)
			fauth_refuse(k, body, blen);
		else if (rc < 0)
			fauth_fail(k, "its refusal's chunked body is bad or "
				      "too large");
		else if (eof)
			fauth_fail(k, "it closed in the middle of its answer");
		free(body);
		return;
	case H1_BODY_CLOSE:
		if (blen > FAUTH_BODY_MAX)
			fauth_fail(k, "its refusal's body is too large");
		else if (eof)
			fauth_refuse(k, p, blen);
		return;
	}
}

static void fauth_read_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	fauth_input(arg, false);
}

static void fauth_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct fauth_call *k = arg;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED)
		return;
	if (what & BEV_EVENT_EOF) {
		fauth_input(k, true);
		return;
	}
	fauth_fail(k, k->head_len ||
			      evbuffer_get_length(bufferevent_get_input(k->bev))
			  ? "its connection failed mid-answer"
			  : "it cannot be reached");
}

/* Whether request field f stays out of the subrequest q: one edge
 * manages (hdr_is_managed; but a continued trace's tracestate), Expect,
 * the client's X-Forwarded-* and X-Original-*, one the Connection field
 * names. */
static bool fauth_req_drop(const struct fauth_req *q, const struct h1_head *h,
			   const struct h1_header *f)
{
	const char *n = f->name;
	size_t l = f->name_len;

	if (q->tracestate && h1_eq(n, l, "tracestate"))
		return hdr_named_in_connection(h, n, l);
	return fauth_hop(n, l) || hdr_is_managed(n, l) ||
	       h1_eq(n, l, "expect") || fauth_forwarded(n, l) ||
	       hdr_named_in_connection(h, n, l);
}

/* The subrequest's head into out. */
static int fauth_request(struct evbuffer *out, const struct fauth_conf *c,
			 const struct fauth_req *q)
{
	const struct h1_request *h = q->h;
	const struct h1_head *hd = &h->h;
	const char *uri = h->path;
	size_t un = h->query ? (size_t)(h->query + h->query_len - h->path)
			     : h->path_len;
	int m = (int)h->method_len, rc;
	size_t i;

	if (h->form == H1_FORM_ASTERISK) {
		uri = "*";
		un = 1;
	} else if (!un) {
		uri = "/";
		un = 1;
	}
	rc = evbuffer_add_printf(out, "%.*s %s HTTP/1.1\r\nHost: %s\r\n", m,
				 h->method_str, c->path, c->authority);
	for (i = 0; rc >= 0 && i < hd->nheaders; i++) {
		const struct h1_header *f = &hd->headers[i];

		if (fauth_req_drop(q, hd, f))
			continue;
		rc =
		    evbuffer_add_printf(out, "%.*s: %.*s\r\n", (int)f->name_len,
					f->name, (int)f->value_len, f->value);
	}
	if (rc >= 0)
		rc = evbuffer_add_printf(
		    out,
		    "X-Forwarded-Method: %.*s\r\nX-Forwarded-Proto: %s\r\n"
		    "X-Forwarded-Host: %.*s\r\nX-Forwarded-Uri: %.*s\r\n"
		    "X-Forwarded-For: %s\r\nX-Original-Method: %.*s\r\n"
		    "X-Original-URI: %.*s\r\nX-Request-Id: %s\r\n%s%s%s%s"
		    "%s%s%sConnection: close\r\n\r\n",
		    m, h->method_str, q->tls ? "https" : "http",
		    (int)h->host_len, h->host ? h->host : "", (int)un, uri,
		    q->client_ip, m, h->method_str, (int)un, uri, q->request_id,
		    h->method == H1_M_GET || h->method == H1_M_HEAD
			? ""
			: "Content-Length: 0\r\n",
		    q->via ? "Via: 1.1 " : "", q->via ? q->via : "",
		    q->via ? "\r\n" : "", q->traceparent ? "traceparent: " : "",
		    q->traceparent ? q->traceparent : "",
		    q->traceparent ? "\r\n" : "");
	return rc < 0 ? -1 : 0;
}

struct fauth_call *fauth_start(struct event_base *base,
			       const struct fauth_conf *c,
			       const struct fauth_req *q, fauth_done_fn done,
			       void *arg)
{
	struct fauth_call *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	k->c = c;
	k->done = done;
	k->arg = arg;
	k->method = q->h->method;
	h1_response_init(&k->resp);
	if (c->cache_ttl_s)
		k->key = fauth_key(&q->h->h, &k->key_len);
	k->bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (!k->bev ||
	    fauth_request(bufferevent_get_output(k->bev), c, q) < 0) {
		fauth_call_free(k);
		return NULL;
	}
	bufferevent_setcb(k->bev, fauth_read_cb, NULL, fauth_event_cb, k);
	/* a refused connect is reported by the event callback, later */
	if (bufferevent_socket_connect(k->bev,
				       (const struct sockaddr *)&c->addr,
				       (int)c->addr_len) < 0 ||
	    bufferevent_enable(k->bev, EV_READ | EV_WRITE) < 0) {
		fauth_call_free(k);
		return NULL;
	}
	return k;
}
