/* SPDX-License-Identifier: BSD-2-Clause */
/* hdr.c - hop-by-hop and edge-owned fields, request ids, head builder. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "hdr.h"

/* A field name and its length (names are compared by length first). */
struct hdr_name {
	const char *s;
	size_t n;
};
#define HDR_NAME(lit)                                                          \
	{                                                                      \
		lit, sizeof(lit) - 1                                           \
	}

static const struct hdr_name hop_by_hop[] = {
    HDR_NAME("connection"),	  HDR_NAME("keep-alive"),
    HDR_NAME("proxy-connection"), HDR_NAME("te"),
    HDR_NAME("trailer"),	  HDR_NAME("transfer-encoding"),
    HDR_NAME("upgrade"),
};

static const struct hdr_name edge_owned[] = {
    HDR_NAME("x-request-id"),	   HDR_NAME("x-project-id"),
    HDR_NAME("x-environment-id"),  HDR_NAME("x-deployment-id"),
    HDR_NAME("x-client-ip"),	   HDR_NAME("x-forwarded-for"),
    HDR_NAME("x-forwarded-proto"), HDR_NAME("x-forwarded-host"),
};

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

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

int hdr_buf_add(struct hdr_buf *b, const char *s, size_t n)
{
	size_t cap;
	char *p;

	if (b->err)
		return b->err;
	if (n > b->max - b->len)
		return b->err = -E2BIG;
	if (b->len + n > b->cap) {
		cap = b->cap ? b->cap : 512;
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
	}
	if (n)
		memcpy(b->p + b->len, s, n);
	b->len += n;
	return 0;
}

int hdr_buf_str(struct hdr_buf *b, const char *s)
{
	return s ? hdr_buf_add(b, s, strlen(s)) : b->err;
}

int hdr_buf_field(struct hdr_buf *b, const char *name, const char *value,
		  size_t value_len)
{
	hdr_buf_str(b, name);
	hdr_buf_add(b, ": ", 2);
	hdr_buf_add(b, value, value_len);
	return hdr_buf_add(b, "\r\n", 2);
}

static bool in_set(const struct hdr_name *set, size_t nset, const char *name,
		   size_t n)
{
	size_t i;

	for (i = 0; i < nset; i++)
		if (set[i].n == n && h1_eq_n(name, set[i].s, n))
			return true;
	return false;
}

bool hdr_is_hop_by_hop(const char *name, size_t n)
{
	return in_set(hop_by_hop, NELEMS(hop_by_hop), name, n);
}

bool hdr_is_edge_owned(const char *name, size_t n)
{
	return in_set(edge_owned, NELEMS(edge_owned), name, n);
}

/* Whether the list s[0..len) names name[0..n) (case-insensitive). */
static bool list_names(const char *s, size_t len, const char *name, size_t n)
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
		if (e - b == n && n) {
			size_t k;

			for (k = 0; k < n; k++)
				if ((s[b + k] | 0x20) != (name[k] | 0x20) ||
				    !h1_tchar((unsigned char)name[k]))
					break;
			if (k == n)
				return true;
		}
		i++;
	}
	return false;
}

bool hdr_named_in_connection(const struct h1_head *h, const char *name,
			     size_t n)
{
	unsigned i, seen = 0;

	for (i = 0; i < h->nheaders && seen < h->nconnection; i++) {
		const struct h1_header *f = &h->headers[i];

		if (h1_eq(f->name, f->name_len, "connection") && ++seen &&
		    list_names(f->value, f->value_len, name, n))
			return true;
	}
	return false;
}

bool hdr_drop(const struct h1_head *h, const struct h1_header *f, bool tunnel)
{
	if (tunnel && h1_eq(f->name, f->name_len, "upgrade"))
		return false;
	return hdr_is_hop_by_hop(f->name, f->name_len) ||
	       hdr_is_edge_owned(f->name, f->name_len) ||
	       h1_eq(f->name, f->name_len, "content-length") ||
	       h1_eq(f->name, f->name_len, "host") ||
	       hdr_named_in_connection(h, f->name, f->name_len);
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

int hdr_request_id_new(char out[HDR_REQUEST_ID_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	const size_t n = HDR_REQUEST_ID_LEN / 2;
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
	out[HDR_REQUEST_ID_LEN] = '\0';
	return 0;
}

int hdr_xff_append(struct hdr_buf *b, const struct h1_head *h,
		   const char *client_ip)
{
	bool first = true;
	unsigned i;

	hdr_buf_str(b, "X-Forwarded-For: ");
	for (i = 0; i < h->nheaders; i++) {
		const struct h1_header *f = &h->headers[i];

		if (!h1_eq(f->name, f->name_len, "x-forwarded-for") ||
		    !f->value_len)
			continue;
		if (!first)
			hdr_buf_add(b, ", ", 2);
		hdr_buf_add(b, f->value, f->value_len);
		first = false;
	}
	if (!first)
		hdr_buf_add(b, ", ", 2);
	hdr_buf_str(b, client_ip);
	return hdr_buf_add(b, "\r\n", 2);
}

int hdr_xff_replace(struct hdr_buf *b, const char *client_ip)
{
	return hdr_buf_field(b, "X-Forwarded-For", client_ip,
			     strlen(client_ip));
}

static void opt_field(struct hdr_buf *b, const char *name, const char *value)
{
	if (value)
		hdr_buf_field(b, name, value, strlen(value));
}

static void framing(struct hdr_buf *b, int64_t content_length, bool chunked)
{
	char num[24];
	int n;

	if (content_length >= 0) {
		n = snprintf(num, sizeof(num), "%" PRId64, content_length);
		hdr_buf_field(b, "Content-Length", num, (size_t)n);
	} else if (chunked) {
		hdr_buf_str(b, "Transfer-Encoding: chunked\r\n");
	}
}

int hdr_build_request(struct hdr_buf *b, const struct h1_request *r,
		      const struct hdr_fwd *f)
{
	const char *path = f->path ? f->path : r->path;
	size_t path_len = f->path ? f->path_len : r->path_len;
	unsigned i;

	hdr_buf_add(b, r->method_str, r->method_len);
	hdr_buf_add(b, " ", 1);
	if (r->form == H1_FORM_ASTERISK) {
		hdr_buf_add(b, "*", 1);
	} else {
		if (path_len == 0 || path[0] != '/')
			hdr_buf_add(b, "/", 1);
		hdr_buf_add(b, path, path_len);
		if (r->query) {
			hdr_buf_add(b, "?", 1);
			hdr_buf_add(b, r->query, r->query_len);
		}
	}
	hdr_buf_str(b, " HTTP/1.1\r\n");
	/* HTTP/1.1 upstreams require a Host; HTTP/1.0 clients may have
	 * sent none: an empty one is what RFC 9112 asks for then */
	hdr_buf_field(b, "Host", r->host ? r->host : "", r->host_len);
	for (i = 0; i < r->h.nheaders; i++) {
		const struct h1_header *h = &r->h.headers[i];

		if (hdr_drop(&r->h, h, f->tunnel))
			continue;
		hdr_buf_add(b, h->name, h->name_len);
		hdr_buf_add(b, ": ", 2);
		hdr_buf_add(b, h->value, h->value_len);
		hdr_buf_add(b, "\r\n", 2);
	}
	opt_field(b, "X-Request-ID", f->request_id);
	opt_field(b, "X-Project-ID", f->project_id);
	opt_field(b, "X-Environment-ID", f->environment_id);
	opt_field(b, "X-Deployment-ID", f->deployment_id);
	if (f->client_ip) {
		hdr_buf_field(b, "X-Client-IP", f->client_ip,
			      strlen(f->client_ip));
		if (f->xff_trusted)
			hdr_xff_append(b, &r->h, f->client_ip);
		else
			hdr_xff_replace(b, f->client_ip);
	}
	opt_field(b, "X-Forwarded-Proto", f->proto);
	if (r->host)
		hdr_buf_field(b, "X-Forwarded-Host", r->host, r->host_len);
	if (f->tunnel)
		hdr_buf_str(b, "Connection: upgrade\r\n");
	framing(b, f->content_length, f->chunked);
	return hdr_buf_add(b, "\r\n", 2);
}

int hdr_build_response(struct hdr_buf *b, const struct h1_response *p,
		       const char *request_id, const char *extra,
		       int64_t content_length, bool chunked, bool close)
{
	char line[16];
	unsigned i;
	int n;

	n = snprintf(line, sizeof(line), "HTTP/1.1 %03d ", p->code);
	hdr_buf_add(b, line, (size_t)n);
	hdr_buf_add(b, p->reason, p->reason_len);
	hdr_buf_add(b, "\r\n", 2);
	for (i = 0; i < p->h.nheaders; i++) {
		const struct h1_header *h = &p->h.headers[i];

		if (hdr_drop(&p->h, h, p->upgrade))
			continue;
		hdr_buf_add(b, h->name, h->name_len);
		hdr_buf_add(b, ": ", 2);
		hdr_buf_add(b, h->value, h->value_len);
		hdr_buf_add(b, "\r\n", 2);
	}
	opt_field(b, "X-Request-ID", request_id);
	hdr_buf_str(b, extra);
	if (p->upgrade)
		hdr_buf_str(b, "Connection: upgrade\r\n");
	else if (p->code >= 200 && p->code != 204 && p->code != 304)
		framing(b, content_length, chunked);
	if (close && !p->upgrade)
		hdr_buf_str(b, "Connection: close\r\n");
	return hdr_buf_add(b, "\r\n", 2);
}
