/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * h1.c - strict, bounded, resumable HTTP/1.1 head parser and chunked
 * decoder. Pure: no I/O, no allocation. The rules are in docs/http.md.
 *
 * Heads are parsed one line at a time: a line is only looked at once its
 * CRLF has arrived, and the parser remembers where the next line starts
 * and how far it already searched for its end, so a resumed call never
 * scans a byte twice. The search is bounded by the limits, so a head that
 * grows past them fails at once instead of waiting for a line end.
 */
#include <limits.h>
#include <string.h>

#include "h1.h"

/* Phases of struct h1_state. */
enum { PH_START = 0, PH_FIELDS, PH_DONE };

static const struct {
	const char *name;
	const char *text;
	int status;
} h1_errs[] = {
#define H1_ERR_ROW(n, s, t) {#n, t, s},
    H1_ERRORS(H1_ERR_ROW)
#undef H1_ERR_ROW
};

static const struct {
	const char *s;
	size_t n;
} method_names[] = {
#define H1_METHOD(m, lit) [m] = {lit, sizeof(lit) - 1}
    H1_METHOD(H1_M_GET, "GET"),		H1_METHOD(H1_M_HEAD, "HEAD"),
    H1_METHOD(H1_M_POST, "POST"),	H1_METHOD(H1_M_PUT, "PUT"),
    H1_METHOD(H1_M_DELETE, "DELETE"),	H1_METHOD(H1_M_CONNECT, "CONNECT"),
    H1_METHOD(H1_M_OPTIONS, "OPTIONS"), H1_METHOD(H1_M_TRACE, "TRACE"),
    H1_METHOD(H1_M_PATCH, "PATCH"),
#undef H1_METHOD
};

const char *h1_err_name(enum h1_err e)
{
	return (unsigned)e < H1_E__COUNT ? h1_errs[e].name : "?";
}

const char *h1_err_text(enum h1_err e)
{
	return (unsigned)e < H1_E__COUNT ? h1_errs[e].text : "?";
}

int h1_err_status(enum h1_err e)
{
	return (unsigned)e < H1_E__COUNT ? h1_errs[e].status : 400;
}

const char *h1_method_name(enum h1_method m)
{
	if ((unsigned)m >= sizeof(method_names) / sizeof(method_names[0]))
		return NULL;
	return method_names[m].s;
}

/*
 * Classes of a byte, one bit each, in h1_cls[] (built at compile time from
 * the definitions below, so the table and the rules cannot disagree).
 */
#define H1_C_TCHAR 0x01	 /* tchar (RFC 9110 section 5.6.2) */
#define H1_C_FIELD 0x02	 /* field-vchar, SP or HTAB: no CTL */
#define H1_C_TARGET 0x04 /* a request-target byte besides '%' */

#define H1_ALNUM(c)                                                            \
	(((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z') ||           \
	 ((c) >= '0' && (c) <= '9'))
#define H1_TCHAR(c)                                                            \
	(H1_ALNUM(c) || (c) == '!' || (c) == '#' || (c) == '$' ||              \
	 (c) == '%' || (c) == '&' || (c) == '\'' || (c) == '*' ||              \
	 (c) == '+' || (c) == '-' || (c) == '.' || (c) == '^' || (c) == '_' || \
	 (c) == '`' || (c) == '|' || (c) == '~')
/* obs-text (0x80-0xff) is allowed as RFC 9110 allows it */
#define H1_FIELD(c) ((c) == '\t' || ((c) >= 0x20 && (c) != 0x7f))
/* unreserved, sub-delims, ':', '@', '/', '?' */
#define H1_TARGET(c)                                                           \
	(H1_ALNUM(c) || (c) == '-' || (c) == '.' || (c) == '_' ||              \
	 (c) == '~' || (c) == '!' || (c) == '$' || (c) == '&' ||               \
	 (c) == '\'' || (c) == '(' || (c) == ')' || (c) == '*' ||              \
	 (c) == '+' || (c) == ',' || (c) == ';' || (c) == '=' || (c) == ':' || \
	 (c) == '@' || (c) == '/' || (c) == '?')
#define H1_CLS(c)                                                              \
	((H1_TCHAR(c) ? H1_C_TCHAR : 0) | (H1_FIELD(c) ? H1_C_FIELD : 0) |     \
	 (H1_TARGET(c) ? H1_C_TARGET : 0))
#define H1_CLS4(c) H1_CLS(c), H1_CLS(c + 1), H1_CLS(c + 2), H1_CLS(c + 3)
#define H1_CLS16(c) H1_CLS4(c), H1_CLS4(c + 4), H1_CLS4(c + 8), H1_CLS4(c + 12)
#define H1_CLS64(c)                                                            \
	H1_CLS16(c), H1_CLS16(c + 16), H1_CLS16(c + 32), H1_CLS16(c + 48)

static const unsigned char h1_cls[256] = {
    H1_CLS64(0),
    H1_CLS64(64),
    H1_CLS64(128),
    H1_CLS64(192),
};

static bool is_cls(unsigned char c, unsigned cls)
{
	return (h1_cls[c] & cls) != 0;
}

bool h1_tchar(unsigned char c)
{
	return is_cls(c, H1_C_TCHAR);
}

/*
 * Eight bytes at a time (SWAR). load8 reads p[0..8) unaligned; zero_byte
 * is non-zero iff a byte of v is 0, and its lowest set bit (on a
 * little-endian load: the first byte in memory) marks the first such
 * byte exactly (later bytes may be marked falsely, earlier ones never).
 */
#define H1_ONES 0x0101010101010101ull
#define H1_HIGHS 0x8080808080808080ull

static uint64_t load8(const char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint64_t zero_byte(uint64_t v)
{
	return (v - H1_ONES) & ~v & H1_HIGHS;
}

/* Offset of the first byte that marks m (from zero_byte) holds, 0..7;
 * 0 where the order is unknown (the byte loop then goes on from there). */
static size_t first_marked(uint64_t m)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return (size_t)__builtin_ctzll(m) / 8;
#else
	(void)m;
	return 0;
#endif
}

/* v with the ASCII letters 'A'..'Z' of each byte made lowercase. */
static uint64_t lower8(uint64_t v)
{
	uint64_t h = v & ~H1_HIGHS;
	uint64_t ge_a = h + H1_ONES * (0x80 - 'A'); /* high bit: h >= 'A' */
	uint64_t gt_z = h + H1_ONES * (0x7f - 'Z'); /* high bit: h > 'Z' */

	return v | (((ge_a ^ gt_z) & ~v & H1_HIGHS) >> 2);
}

bool h1_eq_n(const char *s, const char *lit, size_t n)
{
	size_t i;

	for (; n >= 8; n -= 8, s += 8, lit += 8)
		if (lower8(load8(s)) != lower8(load8(lit)))
			return false;
	for (i = 0; i < n; i++)
		if (h1_lower((unsigned char)s[i]) !=
		    h1_lower((unsigned char)lit[i]))
			return false;
	return true;
}

static bool ows(char c)
{
	return c == ' ' || c == '\t';
}

static bool digit(char c)
{
	return c >= '0' && c <= '9';
}

int h1_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* field-vchar, SP or HTAB: no CTL (NUL, DEL, CR, LF ...). obs-text
 * (0x80-0xff) is allowed as RFC 9110 allows it. */
static bool vchar_or_ws(unsigned char c)
{
	return is_cls(c, H1_C_FIELD);
}

/* Offset of the first byte of s[0..n) that is not vchar_or_ws, or n.
 * Eight bytes with no byte below 0x20 and no DEL are all fine. */
static size_t field_value_bad(const char *s, size_t n)
{
	size_t i = 0;
	uint64_t v;

	while (i < n) {
		if (n - i >= 8) {
			v = load8(s + i);
			if (!(((v - H1_ONES * 0x20) & ~v & H1_HIGHS) |
			      zero_byte(v ^ (H1_ONES * 0x7f)))) {
				i += 8;
				continue;
			}
		}
		if (!vchar_or_ws((unsigned char)s[i]))
			return i;
		i++;
	}
	return n;
}

/*
 * Walk the comma-separated list s[0..n): calls fn for each non-empty
 * element with OWS trimmed. Empty elements are reported as (NULL, 0) when
 * want_empty. Returns the first non-zero fn result, else 0.
 */
static int list_walk_sep(const char *s, size_t n, char sep, bool want_empty,
			 h1_elem_fn fn, void *arg)
{
	size_t i = 0, b, e;
	int rc;

	while (i <= n) {
		b = i;
		while (i < n && s[i] != sep)
			i++;
		e = i;
		while (b < e && ows(s[b]))
			b++;
		while (e > b && ows(s[e - 1]))
			e--;
		if (e > b)
			rc = fn(s + b, e - b, arg);
		else
			rc = want_empty ? fn(NULL, 0, arg) : 0;
		if (rc)
			return rc;
		i++;
	}
	return 0;
}

static int list_walk(const char *s, size_t n, bool want_empty, h1_elem_fn fn,
		     void *arg)
{
	return list_walk_sep(s, n, ',', want_empty, fn, arg);
}

int h1_each(const char *s, size_t n, char sep, h1_elem_fn fn, void *arg)
{
	return list_walk_sep(s, n, sep, false, fn, arg);
}

static bool is_token(const char *s, size_t n)
{
	size_t i;

	if (n == 0)
		return false;
	for (i = 0; i < n; i++)
		if (!h1_tchar((unsigned char)s[i]))
			return false;
	return true;
}

struct list_find {
	const char *tok;
	bool found;
};

static int find_elem(const char *e, size_t n, void *arg)
{
	struct list_find *f = arg;

	if (h1_eq(e, n, f->tok))
		f->found = true;
	return 0;
}

bool h1_list_has(const char *s, size_t n, const char *tok)
{
	struct list_find f = {tok, false};

	list_walk(s, n, false, find_elem, &f);
	return f.found;
}

const struct h1_header *h1_head_field(const struct h1_head *h, const char *lit)
{
	size_t n = strlen(lit);
	unsigned i;

	for (i = 0; i < h->nheaders; i++)
		if (h->headers[i].name_len == n &&
		    h1_eq_n(h->headers[i].name, lit, n))
			return &h->headers[i];
	return NULL;
}

bool h1_head_has(const struct h1_head *h, const char *lit, const char *tok)
{
	size_t n = strlen(lit);
	unsigned i;

	for (i = 0; i < h->nheaders; i++)
		if (h->headers[i].name_len == n &&
		    h1_eq_n(h->headers[i].name, lit, n) &&
		    h1_list_has(h->headers[i].value, h->headers[i].value_len,
				tok))
			return true;
	return false;
}

void h1_limits_default(struct h1_limits *lim)
{
	lim->line_max = H1_DEFAULT_LINE_MAX;
	lim->head_max = H1_DEFAULT_HEAD_MAX;
	lim->headers_max = H1_DEFAULT_HEADERS_MAX;
	lim->empty_lines_max = H1_DEFAULT_EMPTY_LINES_MAX;
	lim->chunk_ext_max = H1_DEFAULT_CHUNK_EXT_MAX;
	lim->trailer_max = H1_DEFAULT_TRAILER_MAX;
}

static void limits_get(const struct h1_limits *in, struct h1_limits *out)
{
	h1_limits_default(out);
	if (!in)
		return;
	if (in->line_max)
		out->line_max = in->line_max;
	if (in->head_max)
		out->head_max = in->head_max;
	if (out->head_max > INT_MAX) /* the size of a head is an int */
		out->head_max = INT_MAX;
	if (in->headers_max && in->headers_max < H1_MAX_HEADERS)
		out->headers_max = in->headers_max;
	if (in->empty_lines_max)
		out->empty_lines_max = in->empty_lines_max;
	if (in->chunk_ext_max)
		out->chunk_ext_max = in->chunk_ext_max;
	if (in->trailer_max)
		out->trailer_max = in->trailer_max;
}

void h1_request_init(struct h1_request *r)
{
	h1_zero_around(r, sizeof(*r), r->h.headers, sizeof(r->h.headers));
	r->h.content_length = -1;
}

void h1_response_init(struct h1_response *resp)
{
	h1_zero_around(resp, sizeof(*resp), resp->h.headers,
		       sizeof(resp->h.headers));
	resp->h.content_length = -1;
}

static int fail(struct h1_head *h, enum h1_err e, size_t off, bool resp)
{
	h->err = e;
	h->err_off = off;
	h->status = resp ? 502 : h1_err_status(e);
	h->st.phase = PH_DONE;
	h->st.rc = -1;
	return -1;
}

/* Move a span from the buffer at old to the same offset in buf. */
static void rebase(const char **p, uintptr_t old, const char *buf)
{
	if (*p)
		*p = buf + ((uintptr_t)*p - old);
}

static void rebase_head(struct h1_head *h, const char *buf)
{
	uintptr_t old = h->st.base;
	unsigned i;

	for (i = 0; i < h->nheaders; i++) {
		rebase(&h->headers[i].name, old, buf);
		rebase(&h->headers[i].value, old, buf);
	}
	rebase(&h->upgrade_proto, old, buf);
}

/*
 * Find the end of the line starting at st->pos, searching no further than
 * limit (the line and its CRLF must end before it). Returns 1 with *eol at
 * the CR, 0 when more bytes are needed, -1 on a bare CR or LF or when the
 * line reaches limit (limit_err).
 */
static int next_line(struct h1_head *h, const char *buf, size_t len,
		     size_t limit, enum h1_err limit_err, bool resp,
		     size_t *eol)
{
	struct h1_state *st = &h->st;
	size_t i = st->scan > st->pos ? st->scan : st->pos;
	size_t end = len < limit ? len : limit;
	uint64_t v, m;
	char c;

	while (i < end) {
		if (end - i >= 8) { /* skip to the first CR or LF */
			v = load8(buf + i);
			m = zero_byte(v ^ (H1_ONES * '\r')) |
			    zero_byte(v ^ (H1_ONES * '\n'));
			if (!m) {
				i += 8;
				continue;
			}
			i += first_marked(m);
		}
		c = buf[i];
		if (c == '\n')
			return fail(h, H1_E_BARE_LF, i, resp);
		if (c != '\r') {
			i++;
			continue;
		}
		if (i + 1 >= len)
			break;
		if (buf[i + 1] != '\n')
			return fail(h, H1_E_BARE_CR, i, resp);
		if (i + 1 >= limit)
			return fail(h, limit_err, limit, resp);
		*eol = i;
		st->scan = i + 2;
		return 1;
	}
	if (i >= limit)
		return fail(h, limit_err, limit, resp);
	st->scan = i;
	return 0;
}

/* --- request line ------------------------------------------------------ */

/* Characters of a request-target besides '%': unreserved, sub-delims,
 * ':', '@', '/', '?'. */
static bool target_char(unsigned char c)
{
	return is_cls(c, H1_C_TARGET);
}

/* Validate path-abempty [ "?" query ] at s[0..n); returns the offset of
 * the first bad byte, or n. */
static size_t check_path(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (s[i] == '%') {
			if (i + 2 >= n || h1_hexval(s[i + 1]) < 0 ||
			    h1_hexval(s[i + 2]) < 0)
				return i;
			i += 2;
		} else if (!target_char((unsigned char)s[i])) {
			return i;
		}
	}
	return n;
}

/* Whether s[0..n) is host [ ":" port ] (RFC 3986 IP-literal, IPv4 or
 * reg-name; port up to 5 digits, possibly empty). Empty input is valid
 * only if allow_empty. */
static bool valid_authority(const char *s, size_t n, bool allow_empty)
{
	size_t i = 0, p;

	if (n == 0)
		return allow_empty;
	if (s[0] == '[') {
		for (i = 1; i < n && s[i] != ']'; i++)
			if (h1_hexval(s[i]) < 0 && s[i] != ':' && s[i] != '.')
				return false;
		if (i >= n || i == 1)
			return false;
		i++;
	} else {
		for (; i < n && s[i] != ':'; i++) {
			unsigned char c = (unsigned char)s[i];

			if (c == '%') {
				if (i + 2 >= n || h1_hexval(s[i + 1]) < 0 ||
				    h1_hexval(s[i + 2]) < 0)
					return false;
				i += 2;
			} else if (!target_char(c) || c == '/' || c == '?' ||
				   c == '@') {
				return false;
			}
		}
		if (i == 0)
			return false;
	}
	if (i == n)
		return true;
	if (s[i] != ':' || n - i - 1 > 5)
		return false;
	for (p = i + 1; p < n; p++)
		if (!digit(s[p]))
			return false;
	return true;
}

static enum h1_method method_of(const char *s, size_t n)
{
	unsigned m;

	for (m = 1; m < sizeof(method_names) / sizeof(method_names[0]); m++)
		if (method_names[m].n == n && !memcmp(s, method_names[m].s, n))
			return (enum h1_method)m;
	return H1_M_OTHER;
}

/* "HTTP/x.y" at s[0..n): 0 or 1 for 1.0/1.1, -H1_E_* otherwise. */
static int version_of(const char *s, size_t n)
{
	if (n != 8 || memcmp(s, "HTTP/", 5) || !digit(s[5]) || s[6] != '.' ||
	    !digit(s[7]))
		return -H1_E_VERSION;
	if (s[5] != '1' || (s[7] != '0' && s[7] != '1'))
		return -H1_E_VERSION_UNSUPPORTED;
	return s[7] - '0';
}

/* Split an origin-form or absolute-form path part into path and query. */
static void split_path(struct h1_request *r, const char *s, size_t n)
{
	const char *q = memchr(s, '?', n);

	r->path = s;
	r->path_len = q ? (size_t)(q - s) : n;
	if (q) {
		r->query = q + 1;
		r->query_len = n - r->path_len - 1;
	}
}

static int request_target(struct h1_request *r, const char *buf, size_t t,
			  size_t n)
{
	const char *s = buf + t;
	size_t off, skip, a;

	if (n == 1 && s[0] == '*') {
		if (r->method != H1_M_OPTIONS)
			return fail(&r->h, H1_E_TARGET, t, false);
		r->form = H1_FORM_ASTERISK;
		return 0;
	}
	if (s[0] == '/') {
		off = check_path(s, n);
		if (off != n)
			return fail(&r->h, H1_E_TARGET, t + off, false);
		r->form = H1_FORM_ORIGIN;
		split_path(r, s, n);
		return 0;
	}
	if (n > 7 && h1_eq(s, 7, "http://"))
		skip = 7;
	else if (n > 8 && h1_eq(s, 8, "https://"))
		skip = 8;
	else
		return fail(&r->h, H1_E_TARGET, t, false);
	for (a = skip; a < n && s[a] != '/' && s[a] != '?'; a++)
		;
	if (!valid_authority(s + skip, a - skip, false))
		return fail(&r->h, H1_E_TARGET, t + skip, false);
	off = check_path(s + a, n - a);
	if (off != n - a)
		return fail(&r->h, H1_E_TARGET, t + a + off, false);
	r->form = H1_FORM_ABSOLUTE;
	r->host = s + skip;
	r->host_len = a - skip;
	split_path(r, s + a, n - a);
	return 0;
}

static int request_line(struct h1_request *r, const char *buf, size_t s,
			size_t e)
{
	size_t i = s, t, v;
	int minor;

	while (i < e && h1_tchar((unsigned char)buf[i]))
		i++;
	if (i == e || buf[i] != ' ')
		return fail(&r->h,
			    (i == e || ows(buf[i])) && i > s ? H1_E_REQUEST_LINE
							     : H1_E_METHOD,
			    i, false);
	if (i == s)
		return fail(&r->h, H1_E_REQUEST_LINE, s, false);
	r->method_str = buf + s;
	r->method_len = i - s;
	r->method = method_of(buf + s, i - s);
	t = i + 1;
	for (i = t; i < e && buf[i] != ' '; i++)
		;
	if (i == t || i == e)
		return fail(&r->h, H1_E_REQUEST_LINE, i, false);
	v = i + 1;
	if (memchr(buf + v, ' ', e - v) || memchr(buf + v, '\t', e - v))
		return fail(&r->h, H1_E_REQUEST_LINE, v, false);
	minor = version_of(buf + v, e - v);
	if (minor < 0)
		return fail(&r->h, (enum h1_err) - minor, v, false);
	r->h.minor = minor;
	r->target = buf + t;
	r->target_len = i - t;
	if (r->method == H1_M_CONNECT)
		return fail(&r->h, H1_E_CONNECT, s, false);
	return request_target(r, buf, t, i - t);
}

/* --- field lines ------------------------------------------------------- */

static int parse_cl(const char *s, size_t n, int64_t *out)
{
	int64_t v = 0;
	size_t i;

	if (n == 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (!digit(s[i]))
			return -1;
		if (v > (H1_CL_MAX - (s[i] - '0')) / 10)
			return -1; /* v * 10 + digit would pass H1_CL_MAX */
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

static int te_elem(const char *e, size_t n, void *arg)
{
	struct h1_state *st = arg;

	st->nte++;
	if (!e || !is_token(e, n)) {
		st->te_bad = true;
		return 0;
	}
	if (st->last_chunked)
		st->te_bad = true; /* something follows chunked */
	if (h1_eq(e, n, "chunked")) {
		st->nchunked++;
		st->last_chunked = true;
	} else {
		st->te_other = true;
		st->last_chunked = false;
	}
	return 0;
}

static int conn_elem(const char *e, size_t n, void *arg)
{
	struct h1_head *h = arg;

	if (!is_token(e, n))
		return -1;
	if (h1_eq(e, n, "close"))
		h->conn_close = true;
	else if (h1_eq(e, n, "keep-alive"))
		h->conn_keep_alive = true;
	else if (h1_eq(e, n, "upgrade"))
		h->conn_upgrade = true;
	return 0;
}

/* One field line buf[s..e). r is NULL for a response. */
static int field_line(struct h1_head *h, struct h1_request *r, const char *buf,
		      size_t s, size_t e)
{
	struct h1_state *st = &h->st;
	bool resp = r == NULL;
	struct h1_header *f;
	size_t i = s, v, ve, k;
	int64_t cl;

	if (ows(buf[s]))
		return fail(h, H1_E_OBS_FOLD, s, resp);
	while (i < e && h1_tchar((unsigned char)buf[i]))
		i++;
	if (i < e && ows(buf[i]) && i > s)
		return fail(h, H1_E_SPACE_BEFORE_COLON, i, resp);
	if (i == s || i == e || buf[i] != ':')
		return fail(h, H1_E_FIELD_NAME, i, resp);
	v = i + 1;
	while (v < e && ows(buf[v]))
		v++;
	ve = e;
	while (ve > v && ows(buf[ve - 1]))
		ve--;
	k = v + field_value_bad(buf + v, ve - v);
	if (k < ve)
		return fail(h, H1_E_FIELD_VALUE, k, resp);
	f = &h->headers[h->nheaders++];
	f->name = buf + s;
	f->name_len = i - s;
	f->value = buf + v;
	f->value_len = ve - v;

	if (h1_eq(f->name, f->name_len, "content-length")) {
		if (parse_cl(f->value, f->value_len, &cl))
			return fail(h, H1_E_BAD_CL, v, resp);
		if (h->content_length >= 0 && h->content_length != cl)
			return fail(h, H1_E_DUP_CL, s, resp);
		if (h->content_length < 0)
			st->cl_off = s;
		h->content_length = cl;
	} else if (h1_eq(f->name, f->name_len, "transfer-encoding")) {
		if (!st->nte)
			st->te_off = s;
		list_walk(f->value, f->value_len, true, te_elem, st);
		if (!st->nte) { /* an empty value */
			st->te_bad = true;
			st->nte = 1;
		}
	} else if (h1_eq(f->name, f->name_len, "connection")) {
		h->nconnection++;
		if (list_walk(f->value, f->value_len, false, conn_elem, h))
			return fail(h, H1_E_BAD_CONNECTION, v, resp);
	} else if (h1_eq(f->name, f->name_len, "upgrade")) {
		if (++st->nupgrade > 1)
			return fail(h, H1_E_DUP_UPGRADE, s, resp);
		h->upgrade_proto = f->value;
		h->upgrade_len = f->value_len;
	} else if (r && h1_eq(f->name, f->name_len, "host")) {
		if (++st->nhost > 1)
			return fail(h, H1_E_DUP_HOST, s, resp);
		if (!valid_authority(f->value, f->value_len, true))
			return fail(h, H1_E_BAD_HOST, v, resp);
		if (r->form != H1_FORM_ABSOLUTE) {
			r->host = f->value;
			r->host_len = f->value_len;
		}
	} else if (r && h1_eq(f->name, f->name_len, "te")) {
		if (h1_list_has(f->value, f->value_len, "trailers"))
			r->te_trailers = true;
	} else if (r && h1_eq(f->name, f->name_len, "expect")) {
		if (!h1_eq(f->value, f->value_len, "100-continue"))
			return fail(h, H1_E_EXPECT, v, resp);
		if (h->minor == 1)
			r->expect_continue = true;
	}
	return 0;
}

/* Parse field lines up to the empty line. 1: head complete. */
static int field_lines(struct h1_head *h, struct h1_request *r, const char *buf,
		       size_t len, const struct h1_limits *l)
{
	struct h1_state *st = &h->st;
	bool resp = r == NULL;
	size_t eol;
	int rc;

	for (;;) {
		rc = next_line(h, buf, len, l->head_max, H1_E_HEAD_TOO_LARGE,
			       resp, &eol);
		if (rc <= 0)
			return rc;
		if (eol == st->pos) {
			st->pos = eol + 2;
			return 1;
		}
		if (h->nheaders >= l->headers_max)
			return fail(h, H1_E_TOO_MANY_HEADERS, st->pos, resp);
		if (field_line(h, r, buf, st->pos, eol))
			return -1;
		st->pos = eol + 2;
	}
}

/* Framing and connection rules both heads share. */
static int finish_head(struct h1_head *h, bool resp)
{
	struct h1_state *st = &h->st;

	if (st->nte) {
		if (h->content_length >= 0)
			return fail(h, H1_E_CL_TE, st->te_off, resp);
		if (h->minor == 0 || st->te_bad || st->nchunked > 1 ||
		    (st->nchunked && !st->last_chunked))
			return fail(h, H1_E_BAD_TE, st->te_off, resp);
		if (st->te_other)
			return fail(h, H1_E_TE_UNSUPPORTED, st->te_off, resp);
		h->chunked = true;
	}
	if (h->minor == 1)
		h->keep_alive = !h->conn_close;
	else
		h->keep_alive = h->conn_keep_alive && !h->conn_close;
	return 0;
}

int h1_parse_request(const char *buf, size_t len, const struct h1_limits *lim,
		     struct h1_request *r)
{
	struct h1_head *h = &r->h;
	struct h1_state *st = &h->st;
	struct h1_limits l;
	size_t eol, end;
	enum h1_err le;
	int rc;

	if (len == 0 && st->phase != PH_DONE)
		return 0;
	limits_get(lim, &l);
	/* rebase first, also once done: the contract is that the spans
	 * point into the latest buf */
	if (st->base && st->base != (uintptr_t)buf) {
		rebase_head(h, buf);
		rebase(&r->method_str, st->base, buf);
		rebase(&r->target, st->base, buf);
		rebase(&r->path, st->base, buf);
		rebase(&r->query, st->base, buf);
		rebase(&r->host, st->base, buf);
	}
	st->base = (uintptr_t)buf;
	if (st->phase == PH_DONE)
		return st->rc;
	while (st->phase == PH_START) {
		end = st->pos + l.line_max;
		le = H1_E_LINE_TOO_LONG;
		if (end > l.head_max) {
			end = l.head_max;
			le = H1_E_HEAD_TOO_LARGE;
		}
		rc = next_line(h, buf, len, end, le, false, &eol);
		if (rc <= 0)
			return rc;
		if (eol == st->pos) {
			if (++st->empty > l.empty_lines_max)
				return fail(h, H1_E_EMPTY_LINES, st->pos,
					    false);
			st->pos = eol + 2;
			continue;
		}
		if (request_line(r, buf, st->pos, eol))
			return -1;
		st->pos = eol + 2;
		st->phase = PH_FIELDS;
	}
	rc = field_lines(h, r, buf, len, &l);
	if (rc <= 0)
		return rc;
	if (finish_head(h, false))
		return -1;
	if (h->minor == 1 && st->nhost == 0)
		return fail(h, H1_E_NO_HOST, st->pos - 2, false);
	r->upgrade = h->minor == 1 && h->upgrade_proto && h->conn_upgrade;
	st->phase = PH_DONE;
	st->rc = (int)st->pos;
	return st->rc;
}

/* --- responses --------------------------------------------------------- */

static int status_line(struct h1_response *p, const char *buf, size_t s,
		       size_t e)
{
	struct h1_head *h = &p->h;
	int minor;
	size_t k;

	if (e - s < 12 || buf[s + 8] != ' ')
		return fail(h, H1_E_STATUS_LINE, s, true);
	minor = version_of(buf + s, 8);
	if (minor < 0)
		return fail(h,
			    minor == -H1_E_VERSION ? H1_E_STATUS_LINE
						   : H1_E_VERSION_UNSUPPORTED,
			    s, true);
	h->minor = minor;
	if (!digit(buf[s + 9]) || !digit(buf[s + 10]) || !digit(buf[s + 11]))
		return fail(h, H1_E_STATUS_LINE, s + 9, true);
	p->code = (buf[s + 9] - '0') * 100 + (buf[s + 10] - '0') * 10 +
		  (buf[s + 11] - '0');
	if (p->code < 100 || p->code > 599)
		return fail(h, H1_E_STATUS_LINE, s + 9, true);
	p->reason = buf + s + 12;
	p->reason_len = 0;
	if (s + 12 == e)
		return 0;
	if (buf[s + 12] != ' ')
		return fail(h, H1_E_STATUS_LINE, s + 12, true);
	k = s + 13 + field_value_bad(buf + s + 13, e - s - 13);
	if (k < e)
		return fail(h, H1_E_STATUS_LINE, k, true);
	p->reason = buf + s + 13;
	p->reason_len = e - s - 13;
	return 0;
}

/* Body rules of RFC 9112 section 6.3 for a response, strict for
 * untrusted upstreams. */
static int response_body(struct h1_response *p, enum h1_method req_method,
			 bool upgrade)
{
	struct h1_head *h = &p->h;
	bool te = h->st.nte > 0;

	if (p->code == 101) {
		if (!upgrade || !h->upgrade_proto)
			return fail(h, H1_E_UNSOLICITED_101, 9, true);
		p->upgrade = true;
		p->body = H1_BODY_NONE;
		return 0;
	}
	if (p->code < 200 || p->code == 204) {
		if (te || h->content_length > 0)
			return fail(h, H1_E_BODY_NOT_ALLOWED,
				    te ? h->st.te_off : h->st.cl_off, true);
		p->body = H1_BODY_NONE;
		return 0;
	}
	if (p->code == 304) {
		if (te)
			return fail(h, H1_E_BODY_NOT_ALLOWED, h->st.te_off,
				    true);
		p->no_reuse = h->content_length > 0;
		p->body = H1_BODY_NONE;
		return 0;
	}
	if (req_method == H1_M_HEAD)
		p->body = H1_BODY_NONE;
	else if (h->chunked)
		p->body = H1_BODY_CHUNKED;
	else if (h->content_length >= 0)
		p->body = H1_BODY_LENGTH;
	else {
		p->body = H1_BODY_CLOSE;
		h->keep_alive = false;
	}
	return 0;
}

int h1_parse_response(const char *buf, size_t len, const struct h1_limits *lim,
		      enum h1_method req_method, bool upgrade,
		      struct h1_response *p)
{
	struct h1_head *h = &p->h;
	struct h1_state *st = &h->st;
	struct h1_limits l;
	size_t eol, end;
	enum h1_err le;
	int rc;

	if (len == 0 && st->phase != PH_DONE)
		return 0;
	limits_get(lim, &l);
	if (st->base && st->base != (uintptr_t)buf) {
		rebase_head(h, buf);
		rebase(&p->reason, st->base, buf);
	}
	st->base = (uintptr_t)buf;
	if (st->phase == PH_DONE)
		return st->rc;
	if (st->phase == PH_START) {
		end = l.line_max;
		le = H1_E_LINE_TOO_LONG;
		if (end > l.head_max) {
			end = l.head_max;
			le = H1_E_HEAD_TOO_LARGE;
		}
		rc = next_line(h, buf, len, end, le, true, &eol);
		if (rc <= 0)
			return rc;
		if (status_line(p, buf, 0, eol))
			return -1;
		st->pos = eol + 2;
		st->phase = PH_FIELDS;
	}
	rc = field_lines(h, NULL, buf, len, &l);
	if (rc <= 0)
		return rc;
	if (finish_head(h, true) || response_body(p, req_method, upgrade))
		return -1;
	st->phase = PH_DONE;
	st->rc = (int)st->pos;
	return st->rc;
}

/* --- chunked ----------------------------------------------------------- */

enum {
	CK_SIZE0 = 0, /* first hex digit */
	CK_SIZE,      /* more hex, ';' or CR */
	CK_EXT_NAME0, /* after ';' */
	CK_EXT_NAME,
	CK_EXT_VAL0, /* after '=' */
	CK_EXT_TOK,
	CK_EXT_Q,    /* in a quoted-string */
	CK_EXT_QP,   /* after '\' in it */
	CK_EXT_QEND, /* after the closing quote */
	CK_SIZE_LF,
	CK_DATA,
	CK_DATA_CR,
	CK_DATA_LF,
	CK_TR_START, /* start of a trailer line or the final CRLF */
	CK_TR_NAME,
	CK_TR_VAL,
	CK_TR_LF,
	CK_TR_END_LF,
	CK_DONE,
	CK_ERR,
};

void h1_chunked_init(struct h1_chunked *st, const struct h1_limits *lim)
{
	struct h1_limits l;

	limits_get(lim, &l);
	memset(st, 0, sizeof(*st));
	st->ext_max = l.chunk_ext_max;
	st->trailer_max = l.trailer_max;
}

static int ck_fail(struct h1_chunked *st, enum h1_err e, size_t i,
		   size_t *consumed)
{
	st->err = e;
	st->err_off = st->offset + i;
	st->offset += i;
	st->state = CK_ERR;
	*consumed = i;
	return -1;
}

/* One framing byte c (not chunk data). Returns 0, or an error code. */
static enum h1_err ck_byte(struct h1_chunked *st, unsigned char c)
{
	int x;

	if (st->state >= CK_EXT_NAME0 && st->state <= CK_EXT_QEND &&
	    c != '\r' && ++st->ext_len > st->ext_max)
		return H1_E_CHUNK_EXT;
	if (st->state >= CK_TR_START && st->state <= CK_TR_END_LF &&
	    ++st->trailer_len > st->trailer_max)
		return H1_E_TRAILER_TOO_LARGE;
	switch (st->state) {
	case CK_SIZE0:
	case CK_SIZE:
		x = h1_hexval((char)c);
		if (x >= 0) {
			if (++st->ndigits > H1_CHUNK_DIGITS_MAX)
				return H1_E_CHUNK_SIZE;
			st->size = (st->size << 4) | (unsigned)x;
			st->state = CK_SIZE;
		} else if (st->state == CK_SIZE && c == ';') {
			st->ext_len = 1;
			st->state = CK_EXT_NAME0;
		} else if (st->state == CK_SIZE && c == '\r') {
			st->state = CK_SIZE_LF;
		} else {
			return H1_E_CHUNK_SIZE;
		}
		return H1_E_NONE;
	case CK_EXT_NAME0:
		if (!h1_tchar(c))
			return H1_E_CHUNK_EXT;
		st->state = CK_EXT_NAME;
		return H1_E_NONE;
	case CK_EXT_NAME:
	case CK_EXT_TOK:
		if (h1_tchar(c))
			return H1_E_NONE;
		if (c == '=' && st->state == CK_EXT_NAME)
			st->state = CK_EXT_VAL0;
		else if (c == ';')
			st->state = CK_EXT_NAME0;
		else if (c == '\r')
			st->state = CK_SIZE_LF;
		else
			return H1_E_CHUNK_EXT;
		return H1_E_NONE;
	case CK_EXT_VAL0:
		if (h1_tchar(c))
			st->state = CK_EXT_TOK;
		else if (c == '"')
			st->state = CK_EXT_Q;
		else
			return H1_E_CHUNK_EXT;
		return H1_E_NONE;
	case CK_EXT_Q:
		if (c == '"')
			st->state = CK_EXT_QEND;
		else if (c == '\\')
			st->state = CK_EXT_QP;
		else if (c == '\t' || (c >= 0x20 && c != 0x7f))
			return H1_E_NONE;
		else
			return H1_E_CHUNK_EXT;
		return H1_E_NONE;
	case CK_EXT_QP:
		if (!vchar_or_ws(c))
			return H1_E_CHUNK_EXT;
		st->state = CK_EXT_Q;
		return H1_E_NONE;
	case CK_EXT_QEND:
		if (c == ';')
			st->state = CK_EXT_NAME0;
		else if (c == '\r')
			st->state = CK_SIZE_LF;
		else
			return H1_E_CHUNK_EXT;
		return H1_E_NONE;
	case CK_SIZE_LF:
		if (c != '\n')
			return st->ext_len ? H1_E_CHUNK_EXT : H1_E_CHUNK_SIZE;
		st->remaining = st->size;
		st->state = st->size ? CK_DATA : CK_TR_START;
		st->size = 0;
		st->ndigits = 0;
		st->ext_len = 0;
		return H1_E_NONE;
	case CK_DATA_CR:
		if (c != '\r')
			return H1_E_CHUNK_CRLF;
		st->state = CK_DATA_LF;
		return H1_E_NONE;
	case CK_DATA_LF:
		if (c != '\n')
			return H1_E_CHUNK_CRLF;
		st->state = CK_SIZE0;
		return H1_E_NONE;
	case CK_TR_START:
		if (c == '\r')
			st->state = CK_TR_END_LF;
		else if (h1_tchar(c))
			st->state = CK_TR_NAME;
		else
			return H1_E_TRAILER;
		return H1_E_NONE;
	case CK_TR_NAME:
		if (c == ':')
			st->state = CK_TR_VAL;
		else if (!h1_tchar(c))
			return H1_E_TRAILER;
		return H1_E_NONE;
	case CK_TR_VAL:
		if (c == '\r')
			st->state = CK_TR_LF;
		else if (!vchar_or_ws(c))
			return H1_E_TRAILER;
		return H1_E_NONE;
	case CK_TR_LF:
		if (c != '\n')
			return H1_E_TRAILER;
		st->trailers_dropped++;
		st->state = CK_TR_START;
		return H1_E_NONE;
	case CK_TR_END_LF:
		if (c != '\n')
			return H1_E_TRAILER;
		st->state = CK_DONE;
		return H1_E_NONE;
	default:
		return H1_E_CHUNK_SIZE;
	}
}

int h1_chunk_line_check(const char *in, size_t len, const struct h1_limits *lim,
			enum h1_err *err)
{
	struct h1_chunked st;
	enum h1_err e;
	size_t i;

	h1_chunked_init(&st, lim);
	for (i = 0; i < len; i++) {
		e = ck_byte(&st, (unsigned char)in[i]);
		if (e != H1_E_NONE) {
			*err = e;
			return -1;
		}
		/* past the LF of the chunk-size line */
		if (st.state == CK_DATA || st.state == CK_TR_START)
			return 1;
	}
	return 0;
}

int h1_chunked_feed(struct h1_chunked *st, const char *in, size_t len,
		    size_t *consumed, size_t *data_off, size_t *data_len)
{
	enum h1_err e;
	size_t i = 0, n;

	*consumed = 0;
	*data_off = 0;
	*data_len = 0;
	if (st->state == CK_DONE)
		return H1_CHUNK_DONE;
	if (st->state == CK_ERR)
		return -1;
	while (i < len) {
		if (st->state == CK_DATA) {
			n = len - i;
			if (n > st->remaining)
				n = (size_t)st->remaining;
			*data_off = i;
			*data_len = n;
			st->remaining -= n;
			if (!st->remaining)
				st->state = CK_DATA_CR;
			i += n;
			st->offset += i;
			st->data_total += n;
			*consumed = i;
			return H1_CHUNK_DATA;
		}
		if (st->keep_trailers &&
		    ((st->state > CK_TR_START && st->state < CK_TR_END_LF) ||
		     (st->state == CK_TR_START && in[i] != '\r'))) {
			size_t s = i;

			/* a span of the trailer section's field lines */
			while (i < len &&
			       ((st->state > CK_TR_START &&
				 st->state < CK_TR_END_LF) ||
				(st->state == CK_TR_START && in[i] != '\r'))) {
				e = ck_byte(st, (unsigned char)in[i]);
				if (e != H1_E_NONE)
					return ck_fail(st, e, i, consumed);
				i++;
			}
			st->offset += i;
			*consumed = i;
			*data_off = s;
			*data_len = i - s;
			return H1_CHUNK_TRAILER;
		}
		e = ck_byte(st, (unsigned char)in[i]);
		if (e != H1_E_NONE)
			return ck_fail(st, e, i, consumed);
		i++;
		if (st->state == CK_DONE) {
			st->offset += i;
			*consumed = i;
			return H1_CHUNK_DONE;
		}
	}
	st->offset += i;
	*consumed = i;
	return 0;
}
