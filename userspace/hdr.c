/* SPDX-License-Identifier: BSD-2-Clause */
/* hdr.c - hop-by-hop and edge-owned fields, request ids, head builder. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "hdr.h"
#include "trusted.h"

/* What a field name is to the builders, as a set of bits. */
enum hdr_class {
	HDR_C_HOP = 0x1,     /* hop-by-hop */
	HDR_C_EDGE = 0x2,    /* one of edge's own fields */
	HDR_C_REBUILT = 0x4, /* Content-Length or Host: edge writes its own */
	HDR_C_UPGRADE = 0x8, /* Upgrade (hop-by-hop, kept for a tunnel) */
	HDR_C_ADDR = 0x10,   /* another field naming the client's address:
				a request's is kept from a trusted peer only */
	HDR_C_ALIAS = 0x20,  /* read with '_' as '-', an edge or address
				field: never kept in a request */
	HDR_C_TRACE = 0x40,  /* traceparent: a request's is edge's own */
	HDR_C_TRACESTATE = 0x80, /* tracestate: a request's goes on with
				    the client's traceparent only */
};

/* The class of the field name s[0..n) as written: the hop-by-hop fields
 * (Connection, Keep-Alive, Proxy-Connection, TE, Trailer,
 * Transfer-Encoding, Upgrade), edge's own (X-Request-ID, X-Project-ID,
 * X-Environment-ID, X-Deployment-ID, X-Client-IP, X-Forwarded-For,
 * X-Forwarded-Proto, X-Forwarded-Host), the other address fields
 * (Forwarded, X-Real-IP, Client-IP, True-Client-IP,
 * X-Cluster-Client-IP), the trace context (traceparent, tracestate),
 * Content-Length and Host; 0 for any other name.
 * Told apart by length first: most names are compared with one literal
 * at most. */
static unsigned hdr_class_exact(const char *s, size_t n)
{
	switch (n) {
	case 2:
		return h1_eq(s, n, "te") ? HDR_C_HOP : 0;
	case 4:
		return h1_eq(s, n, "host") ? HDR_C_REBUILT : 0;
	case 7:
		if (h1_eq(s, n, "upgrade"))
			return HDR_C_HOP | HDR_C_UPGRADE;
		return h1_eq(s, n, "trailer") ? HDR_C_HOP : 0;
	case 9:
		return h1_eq(s, n, "forwarded") || h1_eq(s, n, "x-real-ip") ||
			       h1_eq(s, n, "client-ip")
			   ? HDR_C_ADDR
			   : 0;
	case 10:
		if (h1_eq(s, n, "tracestate"))
			return HDR_C_TRACESTATE;
		return h1_eq(s, n, "connection") || h1_eq(s, n, "keep-alive")
			   ? HDR_C_HOP
			   : 0;
	case 11:
		if (h1_eq(s, n, "traceparent"))
			return HDR_C_TRACE;
		return h1_eq(s, n, "x-client-ip") ? HDR_C_EDGE : 0;
	case 12:
		return h1_eq(s, n, "x-request-id") ||
			       h1_eq(s, n, "x-project-id")
			   ? HDR_C_EDGE
			   : 0;
	case 14:
		if (h1_eq(s, n, "content-length"))
			return HDR_C_REBUILT;
		return h1_eq(s, n, "true-client-ip") ? HDR_C_ADDR : 0;
	case 15:
		return h1_eq(s, n, "x-deployment-id") ||
			       h1_eq(s, n, "x-forwarded-for")
			   ? HDR_C_EDGE
			   : 0;
	case 16:
		if (h1_eq(s, n, "proxy-connection"))
			return HDR_C_HOP;
		return h1_eq(s, n, "x-environment-id") ||
			       h1_eq(s, n, "x-forwarded-host")
			   ? HDR_C_EDGE
			   : 0;
	case 17:
		if (h1_eq(s, n, "transfer-encoding"))
			return HDR_C_HOP;
		return h1_eq(s, n, "x-forwarded-proto") ? HDR_C_EDGE : 0;
	case 19:
		return h1_eq(s, n, "x-cluster-client-ip") ? HDR_C_ADDR : 0;
	default:
		return 0;
	}
}

/* Longest field name hdr_alias_class looks at (the longest name it may
 * match is X-Cluster-Client-IP). */
#define HDR_ALIAS_MAX 32

/* HDR_C_ALIAS when s[0..n) has an underscore and, each '_' read as '-',
 * names one of edge's own fields or an address field: CGI-style servers
 * (WSGI, PHP, Rack) see X_Forwarded_For and X-Forwarded-For as the same
 * HTTP_X_FORWARDED_FOR. */
static unsigned hdr_alias_class(const char *s, size_t n)
{
	char a[HDR_ALIAS_MAX];
	size_t i;

	if (n > HDR_ALIAS_MAX || !memchr(s, '_', n))
		return 0;
	for (i = 0; i < n; i++)
		a[i] = s[i] == '_' ? '-' : s[i];
	return hdr_class_exact(a, n) & (HDR_C_EDGE | HDR_C_ADDR) ? HDR_C_ALIAS
								 : 0;
}

/* The class of the field name s[0..n): hdr_class_exact's, or
 * hdr_alias_class's for a name with an underscore. */
static unsigned hdr_class(const char *s, size_t n)
{
	unsigned c = hdr_class_exact(s, n);

	return c ? c : hdr_alias_class(s, n);
}

void hdr_buf_init(struct hdr_buf *b, size_t max)
{
	b->p = b->inl;
	b->len = 0;
	b->cap = sizeof(b->inl);
	b->max = max ? max : HDR_BUF_MAX;
	b->err = 0;
}

void hdr_buf_free(struct hdr_buf *b)
{
	if (!b)
		return;
	if (b->p != b->inl)
		free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

/* Grow b so that n more bytes (within b->max) fit. Returns 0 or sets and
 * returns b->err. */
static int hdr_buf_grow(struct hdr_buf *b, size_t n)
{
	size_t cap = b->cap ? b->cap : 512;
	char *p;

	while (cap < b->len + n)
		cap *= 2;
	if (cap > b->max)
		cap = b->max;
	if (b->p == b->inl) {
		p = malloc(cap);
		if (p)
			memcpy(p, b->inl, b->len);
	} else {
		p = realloc(b->p, cap);
	}
	if (!p)
		return b->err = -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

/* Room for n more bytes at the end of b, which the caller fills and
 * counts (b->len += n); NULL once b has failed. */
static inline char *hdr_buf_room(struct hdr_buf *b, size_t n)
{
	if (b->err)
		return NULL;
	if (n > b->max - b->len) {
		b->err = -E2BIG;
		return NULL;
	}
	if (n > b->cap - b->len && hdr_buf_grow(b, n))
		return NULL;
	return b->p + b->len;
}

int hdr_buf_add(struct hdr_buf *b, const char *s, size_t n)
{
	char *p = hdr_buf_room(b, n);

	if (!p)
		return b->err;
	if (n)
		memcpy(p, s, n);
	b->len += n;
	return 0;
}

/* Append the literal lit (its length known at compile time). */
#define HDR_BUF_LIT(b, lit) hdr_buf_add(b, lit, sizeof(lit) - 1)

int hdr_buf_str(struct hdr_buf *b, const char *s)
{
	return s ? hdr_buf_add(b, s, strlen(s)) : b->err;
}

/* Append "name: value\r\n" with one bounds check. */
static int hdr_buf_field_n(struct hdr_buf *b, const char *name, size_t name_len,
			   const char *value, size_t value_len)
{
	size_t n = name_len + 2 + value_len + 2;
	char *p;

	if (n < value_len) /* wrapped */
		return b->err = -E2BIG;
	p = hdr_buf_room(b, n);
	if (!p)
		return b->err;
	if (name_len)
		memcpy(p, name, name_len);
	p += name_len;
	*p++ = ':';
	*p++ = ' ';
	if (value_len)
		memcpy(p, value, value_len);
	p += value_len;
	*p++ = '\r';
	*p = '\n';
	b->len += n;
	return 0;
}

/* hdr_buf_field with a literal name. */
#define HDR_BUF_FIELD_LIT(b, lit, v, vn)                                       \
	hdr_buf_field_n(b, lit, sizeof(lit) - 1, v, vn)

int hdr_buf_field(struct hdr_buf *b, const char *name, const char *value,
		  size_t value_len)
{
	return hdr_buf_field_n(b, name, name ? strlen(name) : 0, value,
			       value_len);
}

size_t hdr_fmt_u64(char out[HDR_U64_MAX], uint64_t v)
{
	char tmp[HDR_U64_MAX];
	size_t n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	return n;
}

bool hdr_trailer_next(const char *p, size_t len, size_t *off, const char **name,
		      size_t *nlen, const char **value, size_t *vlen)
{
	static const char *const banned[] = {"content-length",
					     "content-encoding",
					     "content-type",
					     "content-range",
					     "authorization",
					     "proxy-authorization",
					     "cookie",
					     "set-cookie",
					     "cache-control",
					     "expect",
					     "max-forwards",
					     "pragma",
					     "range",
					     "www-authenticate",
					     "proxy-authenticate",
					     "age",
					     "expires",
					     "date",
					     "location",
					     "retry-after",
					     "vary",
					     "warning",
					     "if-match",
					     "if-none-match",
					     "if-modified-since",
					     "if-unmodified-since",
					     "if-range"};
	const char *line, *nl, *colon, *v, *e;
	size_t i, k;

	while (*off < len) {
		line = p + *off;
		nl = memchr(line, '\n', len - *off);
		e = nl ? nl : p + len;
		*off = (size_t)(e - p) + (nl ? 1 : 0);
		colon = memchr(line, ':', (size_t)(e - line));
		if (!colon || colon == line)
			continue;
		k = (size_t)(colon - line);
		/* nor edge's own fields, nor one naming the client's
		 * address: a backend that merges trailers into its headers
		 * must not take them from the client */
		if (hdr_class(line, k) &
		    (HDR_C_HOP | HDR_C_REBUILT | HDR_C_EDGE | HDR_C_ADDR |
		     HDR_C_ALIAS | HDR_C_TRACE | HDR_C_TRACESTATE))
			continue;
		for (i = 0; i < sizeof(banned) / sizeof(banned[0]); i++)
			if (h1_eq(line, k, banned[i]))
				break;
		if (i < sizeof(banned) / sizeof(banned[0]))
			continue;
		for (v = colon + 1; v < e && (*v == ' ' || *v == '\t'); v++)
			;
		while (e > v &&
		       (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
			e--;
		*name = line;
		*nlen = k;
		*value = v;
		*vlen = (size_t)(e - v);
		return true;
	}
	return false;
}

bool hdr_is_hop_by_hop(const char *name, size_t n)
{
	return hdr_class(name, n) & HDR_C_HOP;
}

bool hdr_is_edge_owned(const char *name, size_t n)
{
	return hdr_class(name, n) & HDR_C_EDGE;
}

bool hdr_is_managed(const char *name, size_t n)
{
	return hdr_class(name, n) != 0;
}

/* Whether the list element e[0..n) names name[0..n). */
static bool elem_names(const char *e, const char *name, size_t n)
{
	size_t k;

	for (k = 0; k < n; k++)
		if ((e[k] | 0x20) != (name[k] | 0x20) ||
		    !h1_tchar((unsigned char)name[k]))
			return false;
	return true;
}

/*
 * Split the list s[0..len) at commas and trim SP and HTAB around each
 * element; calls fn for every non-empty element until it returns true.
 * Returns whether one did.
 */
static bool list_each(const char *s, size_t len,
		      bool (*fn)(const char *e, size_t n, void *arg), void *arg)
{
	size_t i = 0, b, e;

	while (i <= len) {
		b = i;
		while (i < len && s[i] != ',')
			i++;
		e = i;
		while (b < e && (s[b] == ' ' || s[b] == '\t'))
			b++;
		while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t'))
			e--;
		if (e > b && fn(s + b, e - b, arg))
			return true;
		i++;
	}
	return false;
}

struct hdr_name_arg {
	const char *name;
	size_t n;
};

static bool elem_is_name(const char *e, size_t n, void *arg)
{
	const struct hdr_name_arg *a = arg;

	return n == a->n && elem_names(e, a->name, n);
}

bool hdr_named_in_connection(const struct h1_head *h, const char *name,
			     size_t n)
{
	struct hdr_name_arg a = {name, n};
	unsigned i, seen = 0;

	if (!n)
		return false;
	for (i = 0; i < h->nheaders && seen < h->nconnection; i++) {
		const struct h1_header *f = &h->headers[i];

		if (h1_eq(f->name, f->name_len, "connection") && ++seen &&
		    list_each(f->value, f->value_len, elem_is_name, &a))
			return true;
	}
	return false;
}

/* What of class c survives when the classes in keep are kept: the
 * Upgrade of a tunnel, a trusted peer's address fields, a continued
 * trace's tracestate, a response's fields of those names. */
static unsigned hdr_class_dropped(unsigned c, unsigned keep)
{
	if (c & keep & HDR_C_UPGRADE)
		return 0;
	return c & ~(keep & (HDR_C_ADDR | HDR_C_ALIAS | HDR_C_TRACE |
			     HDR_C_TRACESTATE));
}

/* A response keeps these classes of its fields. */
#define HDR_KEEP_RESPONSE                                                      \
	(HDR_C_ADDR | HDR_C_ALIAS | HDR_C_TRACE | HDR_C_TRACESTATE)

bool hdr_drop(const struct h1_head *h, const struct h1_header *f, bool tunnel)
{
	unsigned c = hdr_class(f->name, f->name_len);
	unsigned keep = (tunnel ? HDR_C_UPGRADE : 0) | HDR_KEEP_RESPONSE;

	if (hdr_class_dropped(c, keep))
		return true;
	if (c & keep & HDR_C_UPGRADE)
		return false;
	return hdr_named_in_connection(h, f->name, f->name_len);
}

/* The elements of a head's Connection fields, gathered once per head
 * built rather than once per field; more than HDR_CONN_MAX of them and
 * the builder asks hdr_named_in_connection instead. */
#define HDR_CONN_MAX 8

struct hdr_conn {
	const struct h1_head *h;
	unsigned n; /* elements, HDR_CONN_MAX + 1 when too many */
	struct {
		const char *s;
		size_t n;
	} e[HDR_CONN_MAX];
};

static bool hdr_conn_add(const char *e, size_t n, void *arg)
{
	struct hdr_conn *cn = arg;

	if (cn->n == HDR_CONN_MAX) {
		cn->n = HDR_CONN_MAX + 1;
		return true;
	}
	cn->e[cn->n].s = e;
	cn->e[cn->n].n = n;
	cn->n++;
	return false;
}

static void hdr_conn_init(struct hdr_conn *cn, const struct h1_head *h)
{
	unsigned i, seen = 0;

	cn->h = h;
	cn->n = 0;
	for (i = 0; i < h->nheaders && seen < h->nconnection; i++) {
		const struct h1_header *f = &h->headers[i];

		if (h1_eq(f->name, f->name_len, "connection") && ++seen &&
		    list_each(f->value, f->value_len, hdr_conn_add, cn))
			return;
	}
}

/* Whether f of the head cn was gathered from is dropped, the classes in
 * keep (HDR_C_UPGRADE, HDR_C_ADDR, HDR_C_ALIAS) kept. */
static bool hdr_conn_drop(const struct hdr_conn *cn, const struct h1_header *f,
			  unsigned keep)
{
	unsigned c = hdr_class(f->name, f->name_len), i;

	if (hdr_class_dropped(c, keep))
		return true;
	if (c & keep & HDR_C_UPGRADE)
		return false;
	if (cn->n > HDR_CONN_MAX)
		return hdr_named_in_connection(cn->h, f->name, f->name_len);
	for (i = 0; i < cn->n; i++)
		if (cn->e[i].n == f->name_len &&
		    elem_names(cn->e[i].s, f->name, f->name_len))
			return true;
	return false;
}

bool hdr_request_id_valid(const char *s, size_t n)
{
	size_t i;

	if (!s || n == 0 || n > HDR_REQUEST_ID_MAX)
		return false;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return false;
	}
	return true;
}

const char *hdr_request_id_get(const struct h1_head *h, size_t *n)
{
	const struct h1_header *found = NULL;
	unsigned i;

	for (i = 0; i < h->nheaders; i++) {
		if (!h1_eq(h->headers[i].name, h->headers[i].name_len,
			   "x-request-id"))
			continue;
		if (found)
			return NULL; /* more than one: ambiguous */
		found = &h->headers[i];
	}
	if (!found || !hdr_request_id_valid(found->value, found->value_len))
		return NULL;
	*n = found->value_len;
	return found->value;
}

/* Random bytes for request ids, drawn from OpenSSL's DRBG HDR_ID_BATCH ids
 * at a time per thread: the DRBG's per-call cost (a getpid() for its fork
 * check, locking) is paid once per batch instead of once per request. */
#define HDR_ID_BATCH 32
static _Thread_local unsigned char
    id_pool[HDR_ID_BATCH * HDR_REQUEST_ID_LEN / 2];
static _Thread_local size_t id_pool_left;

/* n random bytes as 2n lowercase hex characters at out (no NUL), from
 * the pool. Returns 0 or -EIO. */
static int hdr_rand_hex(char *out, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *raw;
	size_t i;

	if (id_pool_left < n) {
		if (RAND_bytes(id_pool, sizeof(id_pool)) != 1)
			return -EIO;
		id_pool_left = sizeof(id_pool);
	}
	raw = id_pool + sizeof(id_pool) - id_pool_left;
	id_pool_left -= n;
	for (i = 0; i < n; i++) {
		out[2 * i] = hex[raw[i] >> 4];
		out[2 * i + 1] = hex[raw[i] & 0xf];
	}
	return 0;
}

int hdr_request_id_new(char out[HDR_REQUEST_ID_LEN + 1])
{
	if (hdr_rand_hex(out, HDR_REQUEST_ID_LEN / 2))
		return -EIO;
	out[HDR_REQUEST_ID_LEN] = '\0';
	return 0;
}

/* ---- W3C Trace Context --------------------------------------------------- */

/* Whether s[0..n) is lowercase hex and, when nonzero, not all '0'. */
static bool trace_hex(const char *s, size_t n, bool nonzero)
{
	bool any = false;
	size_t i;

	for (i = 0; i < n; i++) {
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return false;
		any |= s[i] != '0';
	}
	return any || !nonzero;
}

static unsigned trace_hexval(char c)
{
	return (unsigned)(c <= '9' ? c - '0' : c - 'a' + 10);
}

bool hdr_traceparent_parse(const char *s, size_t n,
			   char trace_id[HDR_TRACE_ID_LEN + 1],
			   char parent_id[HDR_SPAN_ID_LEN + 1], uint8_t *flags)
{
	if (!s || n < HDR_TRACEPARENT_LEN || !trace_hex(s, 2, false) ||
	    (s[0] == 'f' && s[1] == 'f'))
		return false;
	/* version 00 is exactly this long; a later one may go on after
	 * a '-' (read as 00, what follows ignored) */
	if (s[0] == '0' && s[1] == '0' ? n != HDR_TRACEPARENT_LEN
	    : n > HDR_TRACEPARENT_LEN  ? s[HDR_TRACEPARENT_LEN] != '-'
				       : false)
		return false;
	if (s[2] != '-' || s[35] != '-' || s[52] != '-' ||
	    !trace_hex(s + 3, HDR_TRACE_ID_LEN, true) ||
	    !trace_hex(s + 36, HDR_SPAN_ID_LEN, true) ||
	    !trace_hex(s + 53, 2, false))
		return false;
	memcpy(trace_id, s + 3, HDR_TRACE_ID_LEN);
	trace_id[HDR_TRACE_ID_LEN] = '\0';
	memcpy(parent_id, s + 36, HDR_SPAN_ID_LEN);
	parent_id[HDR_SPAN_ID_LEN] = '\0';
	*flags = (uint8_t)(trace_hexval(s[53]) << 4 | trace_hexval(s[54]));
	return true;
}

/* t->traceparent from its ids and flags. */
static void trace_write(struct hdr_trace *t)
{
	static const char hex[] = "0123456789abcdef";
	char *out = t->traceparent;

	memcpy(out, "00-", 3);
	memcpy(out + 3, t->trace_id, HDR_TRACE_ID_LEN);
	out[35] = '-';
	memcpy(out + 36, t->span_id, HDR_SPAN_ID_LEN);
	out[52] = '-';
	out[53] = hex[t->flags >> 4];
	out[54] = hex[t->flags & 0xf];
	out[HDR_TRACEPARENT_LEN] = '\0';
}

int hdr_trace_init(const struct h1_head *h, struct hdr_trace *t)
{
	const struct h1_header *found = NULL;
	char parent[HDR_SPAN_ID_LEN + 1];
	uint8_t flags = 0;
	unsigned i;

	memset(t, 0, sizeof(*t));
	for (i = 0; i < h->nheaders; i++) {
		if (!h1_eq(h->headers[i].name, h->headers[i].name_len,
			   "traceparent"))
			continue;
		if (found) { /* more than one: none is taken */
			found = NULL;
			break;
		}
		found = &h->headers[i];
	}
	if (found && hdr_traceparent_parse(found->value, found->value_len,
					   t->trace_id, parent, &flags)) {
		t->continued = true;
		t->flags = flags & HDR_TRACE_FLAGS_KNOWN;
	} else {
		if (hdr_rand_hex(t->trace_id, HDR_TRACE_ID_LEN / 2))
			return -EIO;
		t->trace_id[HDR_TRACE_ID_LEN] = '\0';
		t->flags = HDR_TRACE_SAMPLED;
	}
	if (hdr_rand_hex(t->span_id, HDR_SPAN_ID_LEN / 2))
		return -EIO;
	t->span_id[HDR_SPAN_ID_LEN] = '\0';
	trace_write(t);
	return 0;
}

/* Whether s[0..n) is a port: 1..5 digits, no leading zero, 1..65535. */
static bool xff_port(const char *s, size_t n)
{
	unsigned v = 0;
	size_t i;

	if (n == 0 || n > 5 || s[0] == '0')
		return false;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	return v <= 65535;
}

int hdr_xff_addr(const char *s, size_t n, char out[CIDR_STR_MAX])
{
	char a[CIDR_INPUT_MAX + 1];
	const char *host = s, *colon;
	size_t hn = n;
	bool v6 = false;
	struct cidr c;

	if (n == 0)
		return -EINVAL;
	if (s[0] == '[') {
		/* "[IPV6]" or "[IPV6]:PORT" */
		const char *end = memchr(s, ']', n);

		if (!end)
			return -EINVAL;
		host = s + 1;
		hn = (size_t)(end - host);
		if (end + 1 < s + n &&
		    (end[1] != ':' ||
		     !xff_port(end + 2, (size_t)(s + n - end - 2))))
			return -EINVAL;
		v6 = true;
	} else if ((colon = memchr(s, ':', n)) &&
		   !memchr(colon + 1, ':', (size_t)(s + n - colon - 1))) {
		/* one colon: "A.B.C.D:PORT" */
		hn = (size_t)(colon - s);
		if (!xff_port(colon + 1, n - hn - 1))
			return -EINVAL;
	}
	if (hn == 0 || hn > CIDR_INPUT_MAX)
		return -EINVAL;
	memcpy(a, host, hn);
	a[hn] = '\0';
	if (cidr_parse_addr(a, &c, NULL) < 0)
		return -EINVAL;
	/* a bracketed address must be IPv6 text, though an IPv4-mapped one
	 * reads as IPv4 */
	if (v6 && !memchr(a, ':', hn))
		return -EINVAL;
	cidr_format_addr(&c, out, CIDR_STR_MAX);
	return 0;
}

/* Call fn for each non-empty element of h's X-Forwarded-For fields, in
 * order, with OWS trimmed. */
static void xff_each(const struct h1_head *h,
		     void (*fn)(const char *e, size_t n, void *arg), void *arg)
{
	unsigned i;

	for (i = 0; i < h->nheaders; i++) {
		const struct h1_header *f = &h->headers[i];
		const char *p, *end, *e, *z;

		if (!h1_eq(f->name, f->name_len, "x-forwarded-for"))
			continue;
		p = f->value;
		end = f->value + f->value_len;
		while (p < end) {
			z = memchr(p, ',', (size_t)(end - p));
			if (!z)
				z = end;
			e = z;
			while (p < e && (*p == ' ' || *p == '\t'))
				p++;
			while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
				e--;
			if (e > p)
				fn(p, (size_t)(e - p), arg);
			if (z == end)
				break;
			p = z + 1;
		}
	}
}

/* The walk of h's elements: where the last one that is not an address
 * is, then which to write. */
struct xff_walk {
	struct hdr_buf *b;
	size_t i;   /* the element's index */
	size_t cut; /* elements before it are dropped */
	bool first; /* nothing written yet */
};

static void xff_find_cut(const char *e, size_t n, void *arg)
{
	struct xff_walk *w = arg;
	char a[CIDR_STR_MAX];

	if (hdr_xff_addr(e, n, a) < 0)
		w->cut = w->i + 1;
	w->i++;
}

static void xff_write(const char *e, size_t n, void *arg)
{
	struct xff_walk *w = arg;
	char a[CIDR_STR_MAX];

	/* past the cut, every element is an address */
	if (w->i++ < w->cut || hdr_xff_addr(e, n, a) < 0)
		return;
	if (!w->first)
		HDR_BUF_LIT(w->b, ", ");
	hdr_buf_str(w->b, a);
	w->first = false;
}

/* The last HDR_XFF_CLIENT_MAX elements, as addresses ("" for one that
 * is not), in a ring. */
struct xff_tail {
	char a[HDR_XFF_CLIENT_MAX][CIDR_STR_MAX];
	size_t n; /* elements seen */
};

static void xff_keep(const char *e, size_t n, void *arg)
{
	struct xff_tail *t = arg;
	char *a = t->a[t->n++ % HDR_XFF_CLIENT_MAX];

	if (hdr_xff_addr(e, n, a) < 0)
		a[0] = '\0';
}

int hdr_xff_client(const struct h1_head *h, const struct trusted *t,
		   char out[CIDR_STR_MAX], struct cidr *c)
{
	struct xff_tail tail;
	const char *cand = NULL;
	struct cidr x, cx;
	size_t k;

	tail.n = 0;
	memset(&cx, 0, sizeof(cx));
	xff_each(h, xff_keep, &tail);
	for (k = 0; k < tail.n && k < HDR_XFF_CLIENT_MAX; k++) {
		const char *a = tail.a[(tail.n - 1 - k) % HDR_XFF_CLIENT_MAX];

		if (!a[0] || cidr_parse_addr(a, &x, NULL))
			break;
		cand = a;
		cx = x;
		if (!trusted_has(t, &x))
			break;
	}
	if (!cand)
		return -ENOENT;
	snprintf(out, CIDR_STR_MAX, "%s", cand);
	*c = cx;
	return 0;
}

size_t hdr_xff_append(struct hdr_buf *b, const struct h1_head *h,
		      const char *client_ip)
{
	struct xff_walk w = {.b = b, .first = true};

	HDR_BUF_LIT(b, "X-Forwarded-For: ");
	xff_each(h, xff_find_cut, &w);
	w.i = 0; /* elements [0, cut) are dropped */
	xff_each(h, xff_write, &w);
	if (!w.first)
		HDR_BUF_LIT(b, ", ");
	hdr_buf_str(b, client_ip);
	HDR_BUF_LIT(b, "\r\n");
	return w.cut;
}

int hdr_xff_replace(struct hdr_buf *b, const char *client_ip)
{
	return HDR_BUF_FIELD_LIT(b, "X-Forwarded-For", client_ip,
				 strlen(client_ip));
}

/* Append "name: value\r\n" when value is not NULL. */
#define HDR_OPT_FIELD(b, lit, value)                                           \
	do {                                                                   \
		if (value)                                                     \
			HDR_BUF_FIELD_LIT(b, lit, value, strlen(value));       \
	} while (0)

/* Whether an edit of the chain ed (NULL: none) leaves out a field named
 * name[0..n). */
static bool hdr_edit_drops(const struct hdr_edit *ed, const char *name,
			   size_t n)
{
	for (; ed; ed = ed->next)
		if (ed->drop(ed, name, n))
			return true;
	return false;
}

/* Each edit of the chain ed adds its fields. */
static void hdr_edit_add(const struct hdr_edit *ed, struct hdr_buf *b)
{
	for (; ed; ed = ed->next)
		ed->add(ed, b);
}

/* Whether the header rules of ed (NULL: none) leave out a field named
 * lit. */
#define HDR_EDIT_DROPS(ed, lit) hdr_edit_drops((ed), lit, sizeof(lit) - 1)

/* HDR_OPT_FIELD unless the header rules leave it out. */
#define HDR_EDIT_FIELD(b, ed, lit, value)                                      \
	do {                                                                   \
		if (!HDR_EDIT_DROPS(ed, lit))                                  \
			HDR_OPT_FIELD(b, lit, value);                          \
	} while (0)

static void framing(struct hdr_buf *b, int64_t content_length, bool chunked)
{
	char num[HDR_U64_MAX];

	if (content_length >= 0)
		HDR_BUF_FIELD_LIT(b, "Content-Length", num,
				  hdr_fmt_u64(num, (uint64_t)content_length));
	else if (chunked)
		HDR_BUF_LIT(b, "Transfer-Encoding: chunked\r\n");
}

/* Append the fields of h that are kept, the classes in keep among them
 * ("name: value\r\n" each). */
static void kept_fields(struct hdr_buf *b, const struct h1_head *h,
			unsigned keep, const struct hdr_edit *ed)
{
	struct hdr_conn cn;
	unsigned i;

	hdr_conn_init(&cn, h);
	for (i = 0; i < h->nheaders; i++) {
		const struct h1_header *f = &h->headers[i];

		if (!hdr_conn_drop(&cn, f, keep) &&
		    !hdr_edit_drops(ed, f->name, f->name_len))
			hdr_buf_field_n(b, f->name, f->name_len, f->value,
					f->value_len);
	}
}

/* Append the "Name: value\r\n" lines of extra (NULL: none) that the
 * header rules of ed keep. */
static void extra_lines(struct hdr_buf *b, const char *extra,
			const struct hdr_edit *ed)
{
	const char *p = extra, *eol, *colon;

	if (!ed) {
		hdr_buf_str(b, extra);
		return;
	}
	for (; p && *p; p = eol + 2) {
		eol = strstr(p, "\r\n");
		if (!eol)
			return; /* edge's own lines always end so */
		colon = memchr(p, ':', (size_t)(eol - p));
		if (!colon || !hdr_edit_drops(ed, p, (size_t)(colon - p)))
			hdr_buf_add(b, p, (size_t)(eol - p) + 2);
	}
}

int hdr_build_request(struct hdr_buf *b, const struct h1_request *r,
		      const struct hdr_fwd *f)
{
	const char *path = f->path ? f->path : r->path;
	size_t path_len = f->path ? f->path_len : r->path_len;
	const struct hdr_edit *ed = f->edit;

	hdr_buf_add(b, r->method_str, r->method_len);
	HDR_BUF_LIT(b, " ");
	if (r->form == H1_FORM_ASTERISK) {
		HDR_BUF_LIT(b, "*");
	} else {
		if (path_len == 0 || path[0] != '/')
			HDR_BUF_LIT(b, "/");
		hdr_buf_add(b, path, path_len);
		if (r->query) {
			HDR_BUF_LIT(b, "?");
			hdr_buf_add(b, r->query, r->query_len);
		}
	}
	HDR_BUF_LIT(b, " HTTP/1.1\r\n");
	/* HTTP/1.1 upstreams require a Host; HTTP/1.0 clients may have
	 * sent none: an empty one is what RFC 9112 asks for then */
	if (!HDR_EDIT_DROPS(ed, "Host")) /* else request_set's */
		HDR_BUF_FIELD_LIT(b, "Host", r->host ? r->host : "",
				  r->host_len);
	/* tracestate goes with edge's traceparent only: not when a rule
	 * removes that */
	kept_fields(b, &r->h,
		    (f->tunnel ? HDR_C_UPGRADE : 0) |
			(f->xff_trusted ? HDR_C_ADDR : 0) |
			(f->tracestate && f->traceparent &&
				 !HDR_EDIT_DROPS(ed, "traceparent")
			     ? HDR_C_TRACESTATE
			     : 0),
		    ed);
	if (f->via) {
		HDR_BUF_LIT(b, "Via: ");
		hdr_buf_str(b, f->via_proto ? f->via_proto : "1.1");
		HDR_BUF_LIT(b, " ");
		hdr_buf_str(b, f->via);
		HDR_BUF_LIT(b, "\r\n");
	}
	HDR_OPT_FIELD(b, "X-Request-ID", f->request_id);
	HDR_EDIT_FIELD(b, ed, "traceparent", f->traceparent);
	HDR_EDIT_FIELD(b, ed, "X-Project-ID", f->project_id);
	HDR_EDIT_FIELD(b, ed, "X-Environment-ID", f->environment_id);
	HDR_EDIT_FIELD(b, ed, "X-Deployment-ID", f->deployment_id);
	if (f->client_ip) {
		HDR_EDIT_FIELD(b, ed, "X-Client-IP", f->client_ip);
		if (HDR_EDIT_DROPS(ed, "X-Forwarded-For"))
			; /* the rules' */
		else if (f->xff_trusted)
			(void)hdr_xff_append(
			    b, &r->h, f->peer_ip ? f->peer_ip : f->client_ip);
		else
			hdr_xff_replace(b, f->client_ip);
	}
	HDR_EDIT_FIELD(b, ed, "X-Forwarded-Proto", f->proto);
	if (r->host && !HDR_EDIT_DROPS(ed, "X-Forwarded-Host"))
		HDR_BUF_FIELD_LIT(b, "X-Forwarded-Host", r->host, r->host_len);
	/* a client's own is kept (an earlier hop's early data: RFC 8470
	 * forbids removing it) and not said twice */
	if (f->early_data && !h1_head_field(&r->h, "early-data"))
		HDR_BUF_LIT(b, "Early-Data: 1\r\n");
	hdr_edit_add(ed, b);
	if (f->tunnel)
		HDR_BUF_LIT(b, "Connection: upgrade\r\n");
	framing(b, f->content_length, f->chunked);
	return HDR_BUF_LIT(b, "\r\n");
}

void hdr_extra_append(char *out, size_t cap, size_t *n, const char *name,
		      const char *value)
{
	size_t nn = strlen(name), vn = strlen(value);
	char *p = out + *n;

	if (*n >= cap || nn + vn + 5 > cap - *n) {
		*n = cap;
		return;
	}
	memcpy(p, name, nn);
	p += nn;
	*p++ = ':';
	*p++ = ' ';
	memcpy(p, value, vn);
	p += vn;
	memcpy(p, "\r\n", 3);
	*n += nn + vn + 4;
}

const char *hdr_status_text(int status)
{
	switch (status) {
	case 301:
		return "Moved Permanently";
	case 302:
		return "Found";
	case 303:
		return "See Other";
	case 307:
		return "Temporary Redirect";
	case 308:
		return "Permanent Redirect";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 408:
		return "Request Timeout";
	case 413:
		return "Content Too Large";
	case 414:
		return "URI Too Long";
	case 417:
		return "Expectation Failed";
	case 425:
		return "Too Early";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	case 508:
		return "Loop Detected";
	case 505:
		return "HTTP Version Not Supported";
	default:
		return "Error";
	}
}

/*
 * The one builder of response heads (hdr_build_response for a relayed
 * one, hdr_build_error for edge's own): the status line, the kept fields
 * of h (none when NULL) or the fixed lines pre, X-Request-ID, extra, the
 * header rules' fields (ed: they filter h's fields and extra's lines too),
 * then Connection: upgrade for a 101 or the framing, and Connection: close.
 */
static int hdr_build_head(struct hdr_buf *b, int code, const char *reason,
			  size_t reason_len, const struct h1_head *h,
			  const char *pre, const char *request_id,
			  const char *extra, const struct hdr_edit *ed,
			  int64_t content_length, bool chunked, bool close,
			  bool upgrade)
{
	char line[24];
	int n;

	if (code >= 0 && code <= 999) {
		memcpy(line, "HTTP/1.1 ", 9);
		line[9] = (char)('0' + code / 100);
		line[10] = (char)('0' + code / 10 % 10);
		line[11] = (char)('0' + code % 10);
		line[12] = ' ';
		n = 13;
	} else { /* not from the parser: as "%03d" has it */
		n = snprintf(line, sizeof(line), "HTTP/1.1 %03d ", code);
	}
	hdr_buf_add(b, line, (size_t)n);
	hdr_buf_add(b, reason, reason_len);
	HDR_BUF_LIT(b, "\r\n");
	if (h)
		kept_fields(b, h,
			    (upgrade ? HDR_C_UPGRADE : 0) | HDR_KEEP_RESPONSE,
			    ed);
	hdr_buf_str(b, pre);
	HDR_OPT_FIELD(b, "X-Request-ID", request_id);
	extra_lines(b, extra, ed);
	hdr_edit_add(ed, b);
	if (upgrade)
		HDR_BUF_LIT(b, "Connection: upgrade\r\n");
	else if (code >= 200 && code != 204 && code != 304)
		framing(b, content_length, chunked);
	if (close && !upgrade)
		HDR_BUF_LIT(b, "Connection: close\r\n");
	return HDR_BUF_LIT(b, "\r\n");
}

int hdr_build_response(struct hdr_buf *b, const struct h1_response *p,
		       const char *request_id, const char *extra,
		       const struct hdr_edit *edit, int64_t content_length,
		       bool chunked, bool close)
{
	return hdr_build_head(b, p->code, p->reason, p->reason_len, &p->h, NULL,
			      request_id, extra, edit, content_length, chunked,
			      close, p->upgrade);
}

int hdr_build_error(struct hdr_buf *b, int status, const char *request_id,
		    const char *ctype, const char *extra, size_t body_len,
		    bool close)
{
	const char *reason = hdr_status_text(status);
	char own[192]; /* a ctype of up to 128 bytes */

	/* a redirect may be cached as its status says (a 301 is); an error
	 * never is */
	snprintf(own, sizeof(own), "Content-Type: %s\r\n%s",
		 ctype ? ctype : "application/json",
		 status >= 300 && status < 400 ? ""
					       : "Cache-Control: no-store\r\n");
	return hdr_build_head(b, status, reason, strlen(reason), NULL, own,
			      request_id, extra, NULL, (int64_t)body_len, false,
			      close, false);
}

void hdr_via_init(char *out, size_t len, const char *name)
{
	size_t n = 0;

	for (; *name && n + sizeof(" (edge)") < len; name++)
		out[n++] = h1_tchar((unsigned char)*name) ? *name : '-';
	snprintf(out + n, len - n, " (edge)");
}

bool hdr_via_has(const struct h1_head *h, const char *via)
{
	size_t vn = strlen(via), i, s, e;

	for (i = 0; i < h->nheaders; i++) {
		const struct h1_header *f = &h->headers[i];

		if (!h1_eq(f->name, f->name_len, "via"))
			continue;
		/* each comma-separated member, without its white space */
		for (s = 0; s < f->value_len; s = e + 1) {
			size_t a = s, z;

			for (e = s; e < f->value_len && f->value[e] != ','; e++)
				;
			for (z = e; a < z && (f->value[a] == ' ' ||
					      f->value[a] == '\t');)
				a++;
			while (z > a && (f->value[z - 1] == ' ' ||
					 f->value[z - 1] == '\t'))
				z--;
			/* past the received-protocol and its white space */
			while (a < z && f->value[a] != ' ' &&
			       f->value[a] != '\t')
				a++;
			while (a < z &&
			       (f->value[a] == ' ' || f->value[a] == '\t'))
				a++;
			if (z - a == vn && memcmp(f->value + a, via, vn) == 0)
				return true;
		}
	}
	return false;
}
