// SPDX-License-Identifier: BSD-2-Clause
/*
 * inject.c - script and pixel injection: the snippets, where they go in
 * a page, when a response is read for it, and the CSP check at load
 * (inject.h).
 */
#include <errno.h>
#include <event2/buffer.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inject.h"

const char *const inject_at_name[INJECT_AT_N] = {"head_end", "body_end"};

static const char *const inject_result_names[INJECT_RESULTS] = {
    "injected", "no_tag", "too_large", "undecodable"};

static atomic_ullong inject_totals[INJECT_RESULTS];

const char *inject_result_name(enum inject_result r)
{
	return (unsigned)r < INJECT_RESULTS ? inject_result_names[r] : "?";
}

void inject_count(enum inject_result r)
{
	if ((unsigned)r < INJECT_RESULTS)
		atomic_fetch_add_explicit(&inject_totals[r], 1,
					  memory_order_relaxed);
}

unsigned long long inject_total(enum inject_result r)
{
	return (unsigned)r < INJECT_RESULTS
		   ? atomic_load_explicit(&inject_totals[r],
					  memory_order_relaxed)
		   : 0;
}

bool inject_any(const struct config_inject *c)
{
	return c && (c->text[INJECT_HEAD_END] || c->text[INJECT_BODY_END]);
}

void inject_free(struct config_inject *c)
{
	int i;

	for (i = 0; i < INJECT_AT_N; i++) {
		free(c->text[i]);
		free(c->file[i]);
	}
	memset(c, 0, sizeof(*c));
}

int inject_set(struct config_inject *c, enum inject_at at, const char *s,
	       size_t n, const char *file, struct errbuf *err)
{
	char *t, *f = NULL;

	if (n > INJECT_SNIPPET_MAX) {
		errbuf_set(err, "%zu bytes; at most %d", n, INJECT_SNIPPET_MAX);
		return -EINVAL;
	}
	if (memchr(s, '\0', n)) {
		errbuf_set(err, "a NUL byte");
		return -EINVAL;
	}
	if (!(t = malloc(n + 1)) || (file && !(f = strdup(file)))) {
		free(t);
		return -ENOMEM;
	}
	memcpy(t, s, n);
	t[n] = '\0';
	free(c->text[at]);
	free(c->file[at]);
	/* an empty snippet is none */
	c->text[at] = n ? t : NULL;
	c->len[at] = n;
	c->file[at] = n ? f : NULL;
	if (!n) {
		free(t);
		free(f);
	}
	return 0;
}

int inject_dup(const struct config_inject *from, struct config_inject *to)
{
	int i;

	memset(to, 0, sizeof(*to));
	for (i = 0; i < INJECT_AT_N; i++)
		if (from->text[i] &&
		    inject_set(to, (enum inject_at)i, from->text[i],
			       from->len[i], from->file[i], NULL)) {
			inject_free(to);
			return -ENOMEM;
		}
	return 0;
}

int inject_from_json(const json_t *o, struct config_inject *out,
		     struct errbuf *err)
{
	const char *k;
	json_t *v;
	int at, rc;

	memset(out, 0, sizeof(*out));
	if (!o || json_is_null(o))
		return 0;
	if (!json_is_object(o)) {
		errbuf_set(err, "inject: an object is needed");
		return -EINVAL;
	}
	json_object_foreach((json_t *)o, k, v)
	{
		for (at = 0; at < INJECT_AT_N; at++)
			if (strcmp(k, inject_at_name[at]) == 0)
				break;
		if (at == INJECT_AT_N) {
			errbuf_set(err,
				   "inject: \"%s\" is not a key (head_end, "
				   "body_end)",
				   k);
			goto fail;
		}
		if (json_is_null(v))
			continue;
		if (!json_is_string(v)) {
			errbuf_set(err,
				   "inject.%s: a string (a database row "
				   "names no file)",
				   k);
			goto fail;
		}
		rc = inject_set(out, (enum inject_at)at, json_string_value(v),
				json_string_length(v), NULL, err);
		if (rc == -ENOMEM) {
			inject_free(out);
			return rc;
		}
		if (rc) {
			if (err) {
				char m[ERRBUF_LEN];

				snprintf(m, sizeof(m), "%s", err->msg);
				errbuf_set(err, "inject.%s: %s", k, m);
			}
			goto fail;
		}
	}
	return 0;
fail:
	inject_free(out);
	return -EINVAL;
}

json_t *inject_to_json(const struct config_inject *c)
{
	json_t *o;
	int i;

	if (!inject_any(c))
		return NULL;
	if (!(o = json_object()))
		return NULL;
	for (i = 0; i < INJECT_AT_N; i++)
		if (c->text[i] &&
		    json_object_set_new(o, inject_at_name[i],
					json_stringn(c->text[i], c->len[i]))) {
			json_decref(o);
			return NULL;
		}
	return o;
}

json_t *inject_summary_json(const struct config_inject *c)
{
	json_t *o, *s;
	int i;

	if (!inject_any(c))
		return json_null();
	if (!(o = json_object()))
		return NULL;
	for (i = 0; i < INJECT_AT_N; i++) {
		if (!c->text[i])
			continue;
		s = json_pack("{s:I,s:s?}", "bytes", (json_int_t)c->len[i],
			      "file", c->file[i]);
		if (!s || json_object_set_new(o, inject_at_name[i], s)) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* How many fields of h are named lit (lowercase); *first the first. */
static unsigned inject_fields(const struct h1_head *h, const char *lit,
			      const struct h1_header **first)
{
	unsigned i, n = 0;

	*first = NULL;
	for (i = 0; i < h->nheaders; i++)
		if (h1_eq(h->headers[i].name, h->headers[i].name_len, lit) &&
		    !n++)
			*first = &h->headers[i];
	return n;
}

bool inject_applies(const struct config_inject *c, const struct h1_request *rq,
		    const struct h1_response *rs, int *coding)
{
	const struct h1_header *ce, *ct;
	unsigned n;
	int e;

	*coding = ENC_IDENTITY;
	if (!inject_any(c) || rq->method == H1_M_HEAD || rs->upgrade ||
	    rs->code < 200 || rs->code == 204 || rs->code == 206 ||
	    rs->code == 304 || rs->body == H1_BODY_NONE)
		return false;
	if (h1_head_field(&rq->h, "range") ||
	    h1_head_has(&rs->h, "cache-control", "no-transform"))
		return false;
	/* one Content-Type: with two, which one a browser believes is not
	 * edge's to guess */
	if (inject_fields(&rs->h, "content-type", &ct) != 1 ||
	    !enc_type_listed(ct->value, ct->value_len,
			     (const char *const[]){"text/html"}, 1))
		return false;
	/* one Content-Encoding, of a coding edge reads */
	n = inject_fields(&rs->h, "content-encoding", &ce);
	if (n) {
		e = enc_parse(ce->value, ce->value_len);
		*coding = n == 1 && e >= 0 ? e : -1;
	}
	return true;
}

/* Whether p[i..n) starts "</" name, white space, '>'; *end past it. */
static bool inject_tag_at(const char *p, size_t n, size_t i, const char *name,
			  size_t nl)
{
	size_t j;

	if (n - i < nl + 3 || p[i] != '<' || p[i + 1] != '/' ||
	    !h1_eq_n(p + i + 2, name, nl))
		return false;
	for (j = i + 2 + nl; j < n; j++) {
		if (p[j] == '>')
			return true;
		if (p[j] != ' ' && p[j] != '\t' && p[j] != '\n' &&
		    p[j] != '\r' && p[j] != '\f')
			return false;
	}
	return false;
}

long inject_find(enum inject_at at, const char *p, size_t n)
{
	const char *name = at == INJECT_HEAD_END ? "head" : "body";
	const char *q;
	size_t i;
	long found = -1;

	for (i = 0; i < n; i = (size_t)(q - p) + 1) {
		q = memchr(p + i, '<', n - i);
		if (!q)
			break;
		if (!inject_tag_at(p, n, (size_t)(q - p), name, 4))
			continue;
		found = q - p;
		if (at == INJECT_HEAD_END)
			break;
	}
	return found;
}

bool inject_apply(const struct config_inject *c, const char *p, size_t n,
		  struct evbuffer *out)
{
	long at[INJECT_AT_N];
	int first, i;
	size_t done = 0;

	for (i = 0; i < INJECT_AT_N; i++)
		at[i] = c->text[i] ? inject_find((enum inject_at)i, p, n) : -1;
	if (at[INJECT_HEAD_END] < 0 && at[INJECT_BODY_END] < 0)
		return false;
	/* in the page's order (a </body> before the </head> is odd, not
	 * refused) */
	first = at[INJECT_BODY_END] >= 0 &&
			(at[INJECT_HEAD_END] < 0 ||
			 at[INJECT_BODY_END] < at[INJECT_HEAD_END])
		    ? INJECT_BODY_END
		    : INJECT_HEAD_END;
	for (i = 0; i < INJECT_AT_N; i++) {
		int k = i == 0 ? first : 1 - first;

		if (at[k] < 0)
			continue;
		evbuffer_add(out, p + done, (size_t)at[k] - done);
		evbuffer_add(out, c->text[k], c->len[k]);
		done = (size_t)at[k];
	}
	evbuffer_add(out, p + done, n - done);
	return true;
}

/* ---- a streamed page ------------------------------------------------- */

/* The longest tag kept whole across pieces: "</body", white space, '>'. */
#define INJECT_CARRY_MAX 64

struct inject_stream {
	const struct config_inject *c;
	bool head_done; /* head_end in (or none) */
	bool body_done; /* body_end in (or none) */
	bool holding;	/* held starts with a "</body>" */
	bool injected;
	struct evbuffer *held;
	char carry[INJECT_CARRY_MAX]; /* a tag's start, cut by a piece */
	size_t ncarry;
};

struct inject_stream *inject_stream_new(const struct config_inject *c)
{
	struct inject_stream *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	if (!(s->held = evbuffer_new())) {
		free(s);
		return NULL;
	}
	s->c = c;
	s->head_done = !c->text[INJECT_HEAD_END];
	s->body_done = !c->text[INJECT_BODY_END];
	return s;
}

void inject_stream_free(struct inject_stream *s)
{
	if (!s)
		return;
	evbuffer_free(s->held);
	free(s);
}

bool inject_stream_injected(const struct inject_stream *s)
{
	return s->injected;
}

/* Whether p[i..n) may be the start of "</head>" or "</body>" cut short
 * (and not a whole tag, nor anything else). */
static bool inject_partial(const char *p, size_t n, size_t i)
{
	static const char *const names[] = {"head", "body"};
	size_t k = n - i, j, m, t;

	if (p[i] != '<')
		return false;
	if (k == 1)
		return true;
	if (p[i + 1] != '/')
		return false;
	for (t = 0; t < 2; t++) {
		m = k - 2 < 4 ? k - 2 : 4;
		if (!h1_eq_n(p + i + 2, names[t], m))
			continue;
		if (m < 4)
			return true;
		for (j = i + 6; j < n; j++)
			if (p[j] != ' ' && p[j] != '\t' && p[j] != '\n' &&
			    p[j] != '\r' && p[j] != '\f')
				break;
		return j == n;
	}
	return false;
}

/* Write p[0..n) where it goes: held, or out. */
static int inject_put(struct inject_stream *s, struct evbuffer *out,
		      const char *p, size_t n)
{
	if (!n)
		return 0;
	return evbuffer_add(s->holding ? s->held : out, p, n);
}

/* body_end before what is held, all of it to out. */
static int inject_release(struct inject_stream *s, struct evbuffer *out)
{
	const struct config_inject *c = s->c;

	s->holding = false;
	s->body_done = true;
	s->injected = true;
	if (evbuffer_add(out, c->text[INJECT_BODY_END],
			 c->len[INJECT_BODY_END]))
		return -1;
	return evbuffer_add_buffer(out, s->held);
}

static int inject_scan(struct inject_stream *s, const char *w, size_t n,
		       struct evbuffer *out)
{
	const struct config_inject *c = s->c;
	size_t safe = n, last = 0, j;
	const char *q;

	/* a tag cut at the end waits for the next piece */
	for (j = n > INJECT_CARRY_MAX ? n - INJECT_CARRY_MAX : 0; j < n; j++)
		if (w[j] == '<' && inject_partial(w, n, j)) {
			safe = j;
			break;
		}
	for (j = 0; j < safe; j = (size_t)(q - w) + 1) {
		q = memchr(w + j, '<', safe - j);
		if (!q)
			break;
		if (!s->head_done &&
		    inject_tag_at(w, n, (size_t)(q - w), "head", 4)) {
			if (inject_put(s, out, w + last,
				       (size_t)(q - w) - last) ||
			    inject_put(s, out, c->text[INJECT_HEAD_END],
				       c->len[INJECT_HEAD_END]))
				return -1;
			last = (size_t)(q - w);
			s->head_done = s->injected = true;
		}
		if (!s->body_done &&
		    inject_tag_at(w, n, (size_t)(q - w), "body", 4)) {
			if (inject_put(s, out, w + last,
				       (size_t)(q - w) - last))
				return -1;
			/* a later one: what was held goes on as it is */
			if (s->holding && evbuffer_add_buffer(out, s->held))
				return -1;
			s->holding = true;
			last = (size_t)(q - w);
		}
	}
	if (inject_put(s, out, w + last, safe - last))
		return -1;
	memcpy(s->carry, w + safe, n - safe);
	s->ncarry = n - safe;
	if (s->holding && evbuffer_get_length(s->held) > INJECT_HOLD_MAX)
		return inject_release(s, out);
	return 0;
}

int inject_stream_write(struct inject_stream *s, const char *p, size_t n,
			struct evbuffer *out)
{
	char w[INJECT_CARRY_MAX * 2];
	size_t k, m;

	while (n) {
		if (s->head_done && s->body_done && !s->ncarry)
			return evbuffer_add(out, p, n);
		if (!s->ncarry)
			return inject_scan(s, p, n, out);
		/* the carried tag start with the bytes after it: a tag is
		 * never cut at the seam */
		k = n < INJECT_CARRY_MAX ? n : INJECT_CARRY_MAX;
		memcpy(w, s->carry, s->ncarry);
		memcpy(w + s->ncarry, p, k);
		m = s->ncarry + k;
		s->ncarry = 0;
		if (inject_scan(s, w, m, out))
			return -1;
		p += k;
		n -= k;
	}
	return 0;
}

int inject_stream_finish(struct inject_stream *s, struct evbuffer *out)
{
	if (inject_put(s, out, s->carry, s->ncarry))
		return -1;
	s->ncarry = 0;
	return s->holding ? inject_release(s, out) : 0;
}

/* ---- the CSP check at load ------------------------------------------- */

/* Whether snippet s has a <script> element without a src attribute. */
static bool inject_inline_script(const char *s)
{
	const char *p = s, *end;
	size_t n = strlen(s), i;

	while ((p = memchr(p, '<', n - (size_t)(p - s)))) {
		if ((size_t)(s + n - p) > 7 && h1_eq_n(p + 1, "script", 6) &&
		    (p[7] == '>' || p[7] == ' ' || p[7] == '\t' ||
		     p[7] == '\n' || p[7] == '\r' || p[7] == '/')) {
			end = memchr(p, '>', n - (size_t)(p - s));
			if (!end)
				return true;
			for (i = 7; p + i + 4 <= end; i++)
				if (h1_eq_n(p + i, "src", 3) &&
				    (p[i - 1] == ' ' || p[i - 1] == '\t' ||
				     p[i - 1] == '\n' || p[i - 1] == '\r') &&
				    (p[i + 3] == '=' || p[i + 3] == ' '))
					break;
			if (p + i + 4 > end)
				return true;
		}
		p++;
	}
	return false;
}

/* The directive named lit of policy csp[0..len): its sources in
 * *v[0..*vl), the whole directive in *d[0..*dl). */
static bool inject_csp_dir(const char *csp, size_t len, const char *lit,
			   const char **v, size_t *vl, const char **d,
			   size_t *dl)
{
	size_t i = 0, j, k, ll = strlen(lit);

	while (i < len) {
		for (j = i; j < len && csp[j] != ';'; j++)
			;
		k = i;
		while (k < j && (csp[k] == ' ' || csp[k] == '\t'))
			k++;
		if (j - k >= ll && h1_eq_n(csp + k, lit, ll) &&
		    (j - k == ll || csp[k + ll] == ' ' ||
		     csp[k + ll] == '\t')) {
			*d = csp + k;
			*dl = j - k;
			while (*dl &&
			       ((*d)[*dl - 1] == ' ' || (*d)[*dl - 1] == '\t'))
				(*dl)--;
			*v = csp + k + ll;
			*vl = j - k - ll;
			return true;
		}
		i = j + 1;
	}
	return false;
}

/* Whether the source list v[0..n) has a source starting with lit. */
static bool inject_csp_src(const char *v, size_t n, const char *lit)
{
	size_t i = 0, j, ll = strlen(lit);

	while (i < n) {
		while (i < n && (v[i] == ' ' || v[i] == '\t'))
			i++;
		for (j = i; j < n && v[j] != ' ' && v[j] != '\t'; j++)
			;
		if (j - i >= ll && h1_eq_n(v + i, lit, ll))
			return true;
		i = j;
	}
	return false;
}

bool inject_csp_blocks(const char *csp, size_t len, const char *s,
		       const char **dir, size_t *dlen)
{
	const char *v;
	size_t vl;

	if (!s || !inject_inline_script(s))
		return false;
	if (!inject_csp_dir(csp, len, "script-src", &v, &vl, dir, dlen) &&
	    !inject_csp_dir(csp, len, "default-src", &v, &vl, dir, dlen))
		return false;
	return !inject_csp_src(v, vl, "'unsafe-inline'") ||
	       inject_csp_src(v, vl, "'nonce-") ||
	       inject_csp_src(v, vl, "'sha256-") ||
	       inject_csp_src(v, vl, "'sha384-") ||
	       inject_csp_src(v, vl, "'sha512-") ||
	       inject_csp_src(v, vl, "'strict-dynamic'");
}
