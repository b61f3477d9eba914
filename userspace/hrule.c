// SPDX-License-Identifier: BSD-2-Clause
/*
 * hrule.c - header rules and redirects (hrule.h): checked when read,
 * applied through hdr.h's struct hdr_edit, matched by a scan (a few
 * dozen entries at most).
 */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "h1.h"
#include "hdr.h"
#include "hrule.h"

const char *const hrule_list_name[HRULE_LISTS] = {
    [HRULE_REQUEST_SET] = "request_set",
    [HRULE_REQUEST_REMOVE] = "request_remove",
    [HRULE_RESPONSE_SET] = "response_set",
    [HRULE_RESPONSE_ADD] = "response_add",
    [HRULE_RESPONSE_REMOVE] = "response_remove",
};

static bool hrule_is_response(enum hrule_list l)
{
	return l >= HRULE_RESPONSE_SET;
}

static bool hrule_has_value(enum hrule_list l)
{
	return l == HRULE_REQUEST_SET || l == HRULE_RESPONSE_SET ||
	       l == HRULE_RESPONSE_ADD;
}

bool hrules_empty(const struct hrules *h)
{
	int l;

	for (l = 0; h && l < HRULE_LISTS; l++)
		if (h->n[l])
			return false;
	return true;
}

/* ---- variables ---------------------------------------------------------- */

enum hrule_var {
	HV_REQUEST_ID,
	HV_CLIENT_IP,
	HV_HOST,
	HV_PROJECT_ID,
	HV_ENVIRONMENT_ID,
	HV_TRACE_ID,
	HV_PATH,
	HV_QUERY,
	HV_N,
};

static const char *const hv_name[HV_N] = {
    "request_id",     "client_ip", "host", "project_id",
    "environment_id", "trace_id",  "path", "query",
};

static bool hv_char(char c)
{
	return (c >= 'a' && c <= 'z') || c == '_';
}

/* The variable at s[0..n) (s[0] is '$', s[1] is not): its index among
 * the first nv of hv_name and *len its length with the '$'; -1 when it is
 * none of them. */
static int hv_at(const char *s, size_t n, int first, int nv, size_t *len)
{
	size_t k = 1;
	int i;

	while (k < n && hv_char(s[k]))
		k++;
	*len = k;
	for (i = first; i < first + nv; i++)
		if (strlen(hv_name[i]) == k - 1 &&
		    memcmp(hv_name[i], s + 1, k - 1) == 0)
			return i;
	/* what it is not, named whole ("$Host", "$path2") */
	while (k < n && (hv_char(s[k]) || (s[k] >= 'A' && s[k] <= 'Z') ||
			 (s[k] >= '0' && s[k] <= '9')))
		k++;
	*len = k;
	return -1;
}

/* Check the $ of s[0..n): every one "$$" or a variable among
 * [first, first + nv). *vars: whether there is a $. */
static int hv_check(const char *s, size_t n, int first, int nv, bool *vars,
		    struct errbuf *err)
{
	size_t i, len;

	*vars = false;
	for (i = 0; i < n; i++) {
		if (s[i] != '$')
			continue;
		*vars = true;
		if (i + 1 < n && s[i + 1] == '$') {
			i++;
			continue;
		}
		if (hv_at(s + i, n - i, first, nv, &len) < 0) {
			char known[128] = "";
			int k;

			for (k = first; k < first + nv; k++)
				snprintf(known + strlen(known),
					 sizeof(known) - strlen(known), "%s$%s",
					 k > first ? ", " : "", hv_name[k]);
			errbuf_set(err,
				   "unknown variable \"%.*s\" (known: %s; $$ "
				   "for a dollar)",
				   (int)(len > 40 ? 40 : len), s + i, known);
			return -EINVAL;
		}
		i += len - 1;
	}
	return 0;
}

/* Append s[0..n) to b with its variables' values (vals[i], lens[i]). */
static void hv_expand(struct hdr_buf *b, const char *s, size_t n,
		      const char *const *vals, const size_t *lens)
{
	size_t i = 0, j, len;
	int v;

	while (i < n) {
		const char *d = memchr(s + i, '$', n - i);

		j = d ? (size_t)(d - s) : n;
		hdr_buf_add(b, s + i, j - i);
		if (j == n)
			return;
		if (j + 1 < n && s[j + 1] == '$') {
			hdr_buf_add(b, "$", 1);
			i = j + 2;
			continue;
		}
		v = hv_at(s + j, n - j, 0, HV_N, &len);
		if (v >= 0 && vals[v])
			hdr_buf_add(b, vals[v], lens[v]);
		i = j + len;
	}
}

/* ---- header rules ------------------------------------------------------- */

/* A name's byte as rules compare it: lowercase, '_' read as '-' (CGI-style
 * servers give X_Foo and X-Foo the one variable HTTP_X_FOO, so a rule
 * about one is about both). */
static unsigned char hrule_fold(unsigned char c)
{
	if (c == '_')
		return '-';
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

static bool hrule_names(const struct hrule_field *f, const char *name, size_t n)
{
	size_t i;

	if (f->nlen != n)
		return false;
	for (i = 0; i < n; i++)
		if (hrule_fold((unsigned char)f->name[i]) !=
		    hrule_fold((unsigned char)name[i]))
			return false;
	return true;
}

static const struct hrule_field *
hrule_in(const struct hrules *h, enum hrule_list l, const char *name, size_t n)
{
	size_t i;

	for (i = 0; i < h->n[l]; i++)
		if (hrule_names(&h->f[l][i], name, n))
			return &h->f[l][i];
	return NULL;
}

/* Whether a name may be in list l (else why not, in err). */
static int hrule_name_ok(enum hrule_list l, const char *name, size_t n,
			 struct errbuf *err)
{
	char folded[HRULE_NAME_MAX];
	size_t i;

	if (n == 0 || n > HRULE_NAME_MAX) {
		errbuf_set(err, "a header name of 1 to %d bytes is needed",
			   HRULE_NAME_MAX);
		return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		if (!h1_tchar((unsigned char)name[i])) {
			errbuf_set(err,
				   "\"%.*s\" is not a header name (a token: "
				   "letters, digits and !#$%%&'*+-.^_`|~)",
				   (int)(n > 64 ? 64 : n), name);
			return -EINVAL;
		}
		folded[i] = (char)hrule_fold((unsigned char)name[i]);
	}
	/* the checks on the name folded: X_Request_ID is X-Request-ID to a
	 * CGI-style server */
	if (hdr_is_hop_by_hop(folded, n) ||
	    h1_eq(folded, n, "content-length")) {
		errbuf_set(err,
			   "%.*s is hop-by-hop or framing: edge writes it "
			   "itself",
			   (int)n, name);
		return -EINVAL;
	}
	if (h1_eq(folded, n, "x-request-id")) {
		errbuf_set(err, "X-Request-ID is edge's own: it cannot be set "
				"or removed");
		return -EINVAL;
	}
	if (!hrule_is_response(l) && h1_eq(folded, n, "via")) {
		errbuf_set(err, "a request's Via is edge's loop detection: it "
				"cannot be set or removed");
		return -EINVAL;
	}
	if (l == HRULE_REQUEST_REMOVE && h1_eq(folded, n, "host")) {
		errbuf_set(err, "an HTTP/1.1 request needs its Host: it can be "
				"set, not removed");
		return -EINVAL;
	}
	return 0;
}

/* Whether value[0..n) may be a field value: printable ASCII, spaces and
 * tabs, not at its ends. */
static int hrule_value_ok(const char *v, size_t n, struct errbuf *err)
{
	size_t i;

	if (n > HRULE_VALUE_MAX) {
		errbuf_set(err, "a header value of at most %d bytes",
			   HRULE_VALUE_MAX);
		return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)v[i];

		if ((c < 0x20 && c != '\t') || c >= 0x7f) {
			errbuf_set(
			    err,
			    "the value has byte 0x%02x: printable ASCII, "
			    "spaces and tabs only",
			    c);
			return -EINVAL;
		}
	}
	return 0;
}

/* The list of the other direction's entries that may not name a name of
 * list l: the same direction's set and remove lists (and add against
 * set). Returns the list a conflicting entry is in, or -1. */
static int hrule_conflict(const struct hrules *h, enum hrule_list l,
			  const char *name, size_t n)
{
	static const enum hrule_list against[HRULE_LISTS][3] = {
	    [HRULE_REQUEST_SET] = {HRULE_REQUEST_SET, HRULE_REQUEST_REMOVE,
				   HRULE_LISTS},
	    [HRULE_REQUEST_REMOVE] = {HRULE_REQUEST_SET, HRULE_REQUEST_REMOVE,
				      HRULE_LISTS},
	    [HRULE_RESPONSE_SET] = {HRULE_RESPONSE_SET, HRULE_RESPONSE_REMOVE,
				    HRULE_RESPONSE_ADD},
	    [HRULE_RESPONSE_ADD] = {HRULE_RESPONSE_SET, HRULE_LISTS,
				    HRULE_LISTS},
	    [HRULE_RESPONSE_REMOVE] = {HRULE_RESPONSE_SET,
				       HRULE_RESPONSE_REMOVE, HRULE_LISTS},
	};
	int i;

	for (i = 0; i < 3; i++)
		if (against[l][i] != HRULE_LISTS &&
		    hrule_in(h, against[l][i], name, n))
			return (int)against[l][i];
	return -1;
}

/* The longest value[0..n) may become, its variables at their longest
 * (a request id's 128 bytes, a host's 255 and a port, an id's 64, a
 * trace id's 32). */
static size_t hv_longest(const char *v, size_t n)
{
	static const size_t longest[HV_N] = {128, 45, 262, 64, 64, 32, 0, 0};
	size_t i, len, out = 0;
	int k;

	for (i = 0; i < n; i++) {
		if (v[i] != '$') {
			out++;
			continue;
		}
		if (i + 1 < n && v[i + 1] == '$') {
			out++;
			i++;
			continue;
		}
		k = hv_at(v + i, n - i, 0, HV_N, &len);
		out += k >= 0 ? longest[k] : len;
		i += len - 1;
	}
	return out;
}

/* What h's fields come to, each at its longest ("Name: value\r\n"). */
static size_t hrules_bytes(const struct hrules *h)
{
	const struct hrule_field *f;
	size_t i, out = 0;
	int l;

	for (l = 0; l < HRULE_LISTS; l++)
		for (i = 0; i < h->n[l]; i++) {
			f = &h->f[l][i];
			out += f->nlen + 4 +
			       (f->value ? hv_longest(f->value, f->vlen) : 0);
		}
	return out;
}

int hrules_add(struct hrules *h, enum hrule_list l, const char *text,
	       struct errbuf *err)
{
	const char *colon = NULL, *v = NULL;
	size_t n, vn = 0;
	struct hrule_field f, *grown;
	bool vars = false;
	int c;

	if ((unsigned)l >= HRULE_LISTS)
		return -EINVAL;
	if (h->n[l] >= HRULE_MAX) {
		errbuf_set(err, "at most %d entries", HRULE_MAX);
		return -EINVAL;
	}
	n = strlen(text);
	if (hrule_has_value(l)) {
		colon = strchr(text, ':');
		if (!colon) {
			errbuf_set(err, "\"Name: value\" is needed");
			return -EINVAL;
		}
		v = colon + 1;
		vn = n - (size_t)(v - text);
		n = (size_t)(colon - text);
		while (vn && (*v == ' ' || *v == '\t'))
			v++, vn--;
		while (vn && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
			vn--;
	}
	if (hrule_name_ok(l, text, n, err) < 0)
		return -EINVAL;
	if (v && vn == 0 && l == HRULE_REQUEST_SET && n == 4 &&
	    h1_eq_n(text, "host", 4)) {
		errbuf_set(err,
			   "an HTTP/1.1 request needs a Host: an empty one "
			   "is a removal");
		return -EINVAL;
	}
	if (v && (hrule_value_ok(v, vn, err) < 0 ||
		  hv_check(v, vn, HV_REQUEST_ID, HV_PATH, &vars, err) < 0))
		return -EINVAL;
	if (hrules_bytes(h) + n + 4 + (v ? hv_longest(v, vn) : 0) >
	    HRULE_GROUP_BYTES_MAX) {
		errbuf_set(
		    err,
		    "the group's fields would come to more than %d bytes "
		    "(variables at their longest)",
		    HRULE_GROUP_BYTES_MAX);
		return -EINVAL;
	}
	c = hrule_conflict(h, l, text, n);
	if (c >= 0) {
		errbuf_set(err, "%.*s is in %s already", (int)n, text,
			   hrule_list_name[c]);
		return -EINVAL;
	}
	memset(&f, 0, sizeof(f));
	f.nlen = n;
	f.vlen = vn;
	f.vars = vars;
	f.name = strndup(text, n);
	f.value = v ? strndup(v, vn) : NULL;
	grown = realloc(h->f[l], (h->n[l] + 1) * sizeof(*grown));
	if (!f.name || (v && !f.value) || !grown) {
		free(f.name);
		free(f.value);
		if (grown)
			h->f[l] = grown;
		return -ENOMEM;
	}
	h->f[l] = grown;
	h->f[l][h->n[l]++] = f;
	return 0;
}

void hrules_free(struct hrules *h)
{
	size_t i;
	int l;

	for (l = 0; h && l < HRULE_LISTS; l++) {
		for (i = 0; i < h->n[l]; i++) {
			free(h->f[l][i].name);
			free(h->f[l][i].value);
		}
		free(h->f[l]);
		h->f[l] = NULL;
		h->n[l] = 0;
	}
}

int hrules_dup(const struct hrules *from, struct hrules *to)
{
	size_t i;
	int l;

	memset(to, 0, sizeof(*to));
	for (l = 0; l < HRULE_LISTS; l++) {
		if (!from->n[l])
			continue;
		to->f[l] = calloc(from->n[l], sizeof(*to->f[l]));
		if (!to->f[l])
			goto fail;
		for (i = 0; i < from->n[l]; i++, to->n[l]++) {
			const struct hrule_field *f = &from->f[l][i];
			struct hrule_field *t = &to->f[l][i];

			*t = *f;
			t->name = strndup(f->name, f->nlen);
			t->value = f->value ? strndup(f->value, f->vlen) : NULL;
			if (!t->name || (f->value && !t->value)) {
				to->n[l]++;
				goto fail;
			}
		}
	}
	return 0;
fail:
	hrules_free(to);
	return -ENOMEM;
}

/* ---- applied ------------------------------------------------------------ */

/* Whether h names name in one of the direction's lists. */
static bool hrule_mentions(const struct hrules *h, bool response,
			   const char *name, size_t n)
{
	int l, first = response ? HRULE_RESPONSE_SET : HRULE_REQUEST_SET,
	       last = response ? HRULE_LISTS : HRULE_RESPONSE_SET;

	for (l = first; h && l < last; l++)
		if (hrule_in(h, (enum hrule_list)l, name, n))
			return true;
	return false;
}

static bool hrule_drop(const struct hdr_edit *ed, const char *name, size_t n)
{
	const struct hrule_edit *e = (const struct hrule_edit *)ed;
	const struct hrules *g =
	    hrule_mentions(e->route, e->response, name, n) ? e->route : e->env;
	enum hrule_list set =
	    e->response ? HRULE_RESPONSE_SET : HRULE_REQUEST_SET;
	enum hrule_list rm =
	    e->response ? HRULE_RESPONSE_REMOVE : HRULE_REQUEST_REMOVE;

	return g && (hrule_in(g, set, name, n) || hrule_in(g, rm, name, n));
}

/* Write g's fields of list l, those of names other (NULL: none) names in
 * the direction left out. */
static void hrule_write(const struct hrule_edit *e, const struct hrules *g,
			enum hrule_list l, const struct hrules *other,
			struct hdr_buf *b)
{
	const struct hrule_vars *v = e->v;
	const char *vals[HV_N] = {v->request_id,     v->client_ip,
				  v->host,	     v->project_id,
				  v->environment_id, v->trace_id};
	size_t lens[HV_N] = {0}, i;
	int k;

	for (k = 0; k < HV_N; k++) /* (the host is the head's span) */
		lens[k] = k == HV_HOST ? (v->host ? v->host_len : 0)
			  : vals[k]    ? strlen(vals[k])
				       : 0;
	for (i = 0; g && i < g->n[l]; i++) {
		const struct hrule_field *f = &g->f[l][i];

		if (other &&
		    hrule_mentions(other, e->response, f->name, f->nlen))
			continue;
		hdr_buf_add(b, f->name, f->nlen);
		hdr_buf_add(b, ": ", 2);
		if (f->vars)
			hv_expand(b, f->value, f->vlen, vals, lens);
		else
			hdr_buf_add(b, f->value, f->vlen);
		hdr_buf_add(b, "\r\n", 2);
	}
}

static void hrule_add_fields(const struct hdr_edit *ed, struct hdr_buf *b)
{
	const struct hrule_edit *e = (const struct hrule_edit *)ed;

	if (e->response) {
		hrule_write(e, e->env, HRULE_RESPONSE_SET, e->route, b);
		hrule_write(e, e->env, HRULE_RESPONSE_ADD, e->route, b);
		hrule_write(e, e->route, HRULE_RESPONSE_SET, NULL, b);
		hrule_write(e, e->route, HRULE_RESPONSE_ADD, NULL, b);
	} else {
		hrule_write(e, e->env, HRULE_REQUEST_SET, e->route, b);
		hrule_write(e, e->route, HRULE_REQUEST_SET, NULL, b);
	}
}

static bool hrule_any(const struct hrules *h, bool response)
{
	int l, first = response ? HRULE_RESPONSE_SET : HRULE_REQUEST_SET,
	       last = response ? HRULE_LISTS : HRULE_RESPONSE_SET;

	for (l = first; h && l < last; l++)
		if (h->n[l])
			return true;
	return false;
}

const struct hdr_edit *hrule_edit_init(struct hrule_edit *e,
				       const struct hrules *env,
				       const struct hrules *route,
				       const struct hrule_vars *v,
				       bool response)
{
	if (!hrule_any(env, response) && !hrule_any(route, response))
		return NULL;
	e->base.drop = hrule_drop;
	e->base.add = hrule_add_fields;
	e->base.next = NULL;
	e->env = env;
	e->route = route;
	e->v = v;
	e->response = response;
	return &e->base;
}

/* ---- redirects ---------------------------------------------------------- */

/* RFC 3986 pchar and '/' (a raw path's bytes, '%' as it comes). */
static bool hr_path_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || strchr("-._~!$&'()*+,;=:@/%", c);
}

/* A URL's bytes as a Location carries them: visible ASCII but for the
 * characters RFC 3986 never leaves unencoded. */
static bool hr_url_char(unsigned char c)
{
	return c > 0x20 && c < 0x7f && !strchr("\"<>\\^`{|}", c);
}

static int hr_from_ok(const char *from, size_t n, bool *prefix,
		      struct errbuf *err)
{
	size_t i;

	if (n == 0 || n > HREDIRECT_FROM_MAX || from[0] != '/') {
		errbuf_set(err,
			   "from: a path starting with / of at most %d "
			   "bytes is needed",
			   HREDIRECT_FROM_MAX);
		return -EINVAL;
	}
	*prefix = n >= 2 && from[n - 2] == '/' && from[n - 1] == '*';
	for (i = 0; i < n - (*prefix ? 2 : 0); i++) {
		if (from[i] == '%' &&
		    !(i + 2 < n && isxdigit((unsigned char)from[i + 1]) &&
		      isxdigit((unsigned char)from[i + 2]))) {
			errbuf_set(err, "from: a %% not followed by two hex "
					"digits matches no path");
			return -EINVAL;
		}
		if (!hr_path_char((unsigned char)from[i]) || from[i] == '*') {
			errbuf_set(err,
				   "from: \"%.*s\" has byte 0x%02x: a path "
				   "(RFC 3986), a prefix ending in /*",
				   (int)(n > 64 ? 64 : n), from,
				   (unsigned char)from[i]);
			return -EINVAL;
		}
	}
	return 0;
}

/* Where to's authority begins (after "scheme://"), 0 for a path. */
static size_t hr_authority_start(const char *to, size_t n)
{
	if (n > 8 && strncasecmp(to, "https://", 8) == 0)
		return 8;
	if (n > 7 && strncasecmp(to, "http://", 7) == 0)
		return 7;
	return 0;
}

static int hr_to_ok(const char *to, size_t n, struct errbuf *err)
{
	size_t i, start;
	bool vars;

	if (n == 0 || n > HREDIRECT_TO_MAX ||
	    !(strncasecmp(to, "https://", 8) == 0 ? n > 8
	      : strncasecmp(to, "http://", 7) == 0
		  ? n > 7
		  : to[0] == '/' && (n == 1 || to[1] != '/'))) {
		errbuf_set(err,
			   "to: an http:// or https:// URL, or a path starting "
			   "with one /, of at most %d bytes is needed",
			   HREDIRECT_TO_MAX);
		return -EINVAL;
	}
	for (i = 0; i < n; i++)
		if (!hr_url_char((unsigned char)to[i])) {
			errbuf_set(err,
				   "to: byte 0x%02x: a URL's characters only "
				   "(percent-encode the others)",
				   (unsigned char)to[i]);
			return -EINVAL;
		}
	/* the host a client is sent to is the rule's, never the request's.
	 * $path and $query begin with "/" or "?" (or are empty), so after a
	 * host they end it; first in a URL's authority or right after a
	 * path's first "/" they would make it: "/$path" of "/old//evil.test"
	 * is "//evil.test", "http://$path" of "/old/evil.test"
	 * "http:///evil.test", both another host to a browser */
	start = hr_authority_start(to, n);
	if (!start)
		start = 1;
	if (start < n && to[start] == '$' &&
	    !(start + 1 < n && to[start + 1] == '$')) {
		errbuf_set(err, "to: the host must be the rule's: no variable "
				"first in a URL's host or right after a path's "
				"first /");
		return -EINVAL;
	}
	return hv_check(to, n, HV_PATH, 2, &vars, err);
}

int hredirects_add(struct hredirects *r, const char *from, const char *to,
		   unsigned status, struct errbuf *err)
{
	struct hredirect d, *grown;
	size_t fn = from ? strlen(from) : 0, tn = to ? strlen(to) : 0, i;

	memset(&d, 0, sizeof(d));
	if (r->n >= HREDIRECT_MAX) {
		errbuf_set(err, "at most %d redirects", HREDIRECT_MAX);
		return -EINVAL;
	}
	if (!status)
		status = 301;
	if (status != 301 && status != 302 && status != 307 && status != 308) {
		errbuf_set(err, "status: 301, 302, 307 or 308, not %u", status);
		return -EINVAL;
	}
	if (hr_from_ok(from, fn, &d.prefix, err) < 0 ||
	    hr_to_ok(to, tn, err) < 0)
		return -EINVAL;
	d.flen = d.prefix ? fn - 2 : fn;
	for (i = 0; i < r->n; i++)
		if (r->v[i].prefix == d.prefix && r->v[i].flen == d.flen &&
		    memcmp(r->v[i].from, from, d.flen) == 0) {
			errbuf_set(err, "from: \"%s\" is redirected already",
				   from);
			return -EINVAL;
		}
	d.status = status;
	d.tlen = tn;
	d.from = strndup(from, d.flen);
	d.to = strdup(to);
	grown = realloc(r->v, (r->n + 1) * sizeof(*grown));
	if (!d.from || !d.to || !grown) {
		free(d.from);
		free(d.to);
		if (grown)
			r->v = grown;
		return -ENOMEM;
	}
	r->v = grown;
	r->v[r->n++] = d;
	return 0;
}

void hredirects_free(struct hredirects *r)
{
	size_t i;

	if (!r)
		return;
	for (i = 0; i < r->n; i++) {
		free(r->v[i].from);
		free(r->v[i].to);
	}
	free(r->v);
	r->v = NULL;
	r->n = 0;
}

int hredirects_dup(const struct hredirects *from, struct hredirects *to)
{
	size_t i;

	memset(to, 0, sizeof(*to));
	if (!from->n)
		return 0;
	to->v = calloc(from->n, sizeof(*to->v));
	if (!to->v)
		return -ENOMEM;
	for (i = 0; i < from->n; i++, to->n++) {
		to->v[i] = from->v[i];
		to->v[i].from = strndup(from->v[i].from, from->v[i].flen);
		to->v[i].to = strdup(from->v[i].to);
		if (!to->v[i].from || !to->v[i].to) {
			to->n++;
			hredirects_free(to);
			return -ENOMEM;
		}
	}
	return 0;
}

const struct hredirect *hredirects_find(const struct hredirects *r,
					const char *path, size_t len)
{
	const struct hredirect *best = NULL;
	size_t i;

	for (i = 0; r && i < r->n; i++) {
		const struct hredirect *d = &r->v[i];

		if (!d->prefix) {
			if (d->flen == len && memcmp(d->from, path, len) == 0)
				return d; /* exact wins */
			continue;
		}
		if (len < d->flen || memcmp(d->from, path, d->flen) != 0 ||
		    (len > d->flen && path[d->flen] != '/'))
			continue;
		if (!best || d->flen > best->flen)
			best = d;
	}
	return best;
}

int hredirect_location(const struct hredirect *d, const char *path, size_t len,
		       const char *q, size_t qlen, struct hdr_buf *b)
{
	const char *vals[HV_N] = {0};
	size_t lens[HV_N] = {0};
	struct hdr_buf qb;

	vals[HV_PATH] = d->prefix ? path + d->flen : "";
	lens[HV_PATH] = d->prefix ? len - d->flen : 0;
	hdr_buf_init(&qb, HDR_BUF_MAX);
	if (q) {
		hdr_buf_add(&qb, "?", 1);
		hdr_buf_add(&qb, q, qlen);
	}
	vals[HV_QUERY] = qb.p;
	lens[HV_QUERY] = qb.len;
	hdr_buf_add(b, "Location: ", 10);
	hv_expand(b, d->to, d->tlen, vals, lens);
	hdr_buf_add(b, "\r\n", 2);
	hdr_buf_free(&qb);
	return qb.err ? qb.err : b->err;
}

/* ---- shown ------------------------------------------------------------- */

/* Append list l's entries of g as text to a, those of names other
 * names in the direction left out. -1 when out of memory. */
static int hrule_json_list(json_t *a, const struct hrules *g, enum hrule_list l,
			   const struct hrules *other)
{
	char buf[HRULE_NAME_MAX + HRULE_VALUE_MAX + 3];
	size_t i;

	for (i = 0; g && i < g->n[l]; i++) {
		const struct hrule_field *f = &g->f[l][i];

		if (other && hrule_mentions(other, hrule_is_response(l),
					    f->name, f->nlen))
			continue;
		if (f->value)
			snprintf(buf, sizeof(buf), "%s: %s", f->name, f->value);
		else
			snprintf(buf, sizeof(buf), "%s", f->name);
		if (json_array_append_new(a, json_string(buf)))
			return -1;
	}
	return 0;
}

json_t *hrules_json(const struct hrules *env, const struct hrules *route)
{
	json_t *o = json_object(), *a;
	int l;

	for (l = 0; o && l < HRULE_LISTS; l++) {
		a = json_array();
		if (!a || hrule_json_list(a, route, (enum hrule_list)l, NULL) ||
		    hrule_json_list(a, env, (enum hrule_list)l, route)) {
			json_decref(a);
			json_decref(o);
			return NULL;
		}
		if (json_array_size(a) == 0)
			json_decref(a);
		else if (json_object_set_new(o, hrule_list_name[l], a)) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

json_t *hredirects_json(const struct hredirects *r)
{
	char from[HREDIRECT_FROM_MAX + 3];
	json_t *a = json_array();
	size_t i;

	for (i = 0; a && r && i < r->n; i++) {
		const struct hredirect *d = &r->v[i];

		snprintf(from, sizeof(from), "%s%s", d->from,
			 d->prefix ? "/*" : "");
		if (json_array_append_new(
			a, json_pack("{s:s, s:s, s:i}", "from", from, "to",
				     d->to, "status", (int)d->status))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* ---- read from JSON (the database's columns) ---------------------------- */

int hrules_from_json(const json_t *o, struct hrules *out, struct errbuf *err)
{
	const char *k;
	json_t *v, *el;
	size_t i;
	int l, rc;

	memset(out, 0, sizeof(*out));
	if (!o || json_is_null(o))
		return 0;
	if (!json_is_object(o)) {
		errbuf_set(err, "headers: an object is needed");
		return -EINVAL;
	}
	json_object_foreach((json_t *)o, k, v)
	{
		for (l = 0; l < HRULE_LISTS; l++)
			if (strcmp(k, hrule_list_name[l]) == 0)
				break;
		if (l == HRULE_LISTS) {
			errbuf_set(
			    err,
			    "headers: unknown key \"%.40s\" (request_set, "
			    "request_remove, response_set, response_add, "
			    "response_remove)",
			    k);
			goto fail;
		}
		if (!json_is_array(v)) {
			errbuf_set(
			    err, "headers.%s: a list of strings is needed", k);
			goto fail;
		}
		json_array_foreach(v, i, el)
		{
			struct errbuf e;

			errbuf_clear(&e);
			if (!json_is_string(el) ||
			    strlen(json_string_value(el)) !=
				json_string_length(el)) {
				errbuf_set(
				    err, "headers.%s[%zu]: a string is needed",
				    k, i);
				goto fail;
			}
			rc = hrules_add(out, (enum hrule_list)l,
					json_string_value(el), &e);
			if (rc == -ENOMEM) {
				hrules_free(out);
				return rc;
			}
			if (rc) {
				errbuf_set(err, "headers.%s[%zu]: %s", k, i,
					   e.msg);
				goto fail;
			}
		}
	}
	return 0;
fail:
	hrules_free(out);
	return -EINVAL;
}

int hredirects_from_json(const json_t *a, struct hredirects *out,
			 struct errbuf *err)
{
	const char *from, *to;
	json_int_t status;
	json_error_t je;
	json_t *el;
	size_t i;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!a || json_is_null(a))
		return 0;
	if (!json_is_array(a)) {
		errbuf_set(err, "redirects: a list of objects is needed");
		return -EINVAL;
	}
	json_array_foreach(a, i, el)
	{
		struct errbuf e;

		status = 301;
		if (json_unpack_ex(el, &je, JSON_STRICT, "{s:s, s:s, s?:I}",
				   "from", &from, "to", &to, "status",
				   &status)) {
			errbuf_set(err,
				   "redirects[%zu]: {\"from\", \"to\", "
				   "\"status\"} is needed: %s",
				   i, je.text);
			goto fail;
		}
		if (status < 300 || status > 399) {
			errbuf_set(
			    err, "redirects[%zu]: status: 301, 302, 307 or 308",
			    i);
			goto fail;
		}
		errbuf_clear(&e);
		rc = hredirects_add(out, from, to, (unsigned)status, &e);
		if (rc == -ENOMEM) {
			hredirects_free(out);
			return rc;
		}
		if (rc) {
			errbuf_set(err, "redirects[%zu]: %s", i, e.msg);
			goto fail;
		}
	}
	return 0;
fail:
	hredirects_free(out);
	return -EINVAL;
}
