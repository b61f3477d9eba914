/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * h2fields.c - HTTP/2 field lists and edge's HTTP/1.1 text, both ways
 * (h2fields.h).
 */
#include <errno.h>
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "h2fields.h"
#include "hdr.h"

#define NV(n, nl, v, vl, f)                                                    \
	((nghttp2_nv){(uint8_t *)(n), (uint8_t *)(v), (nl), (vl), (f)})

static bool name_is(const void *n, size_t k, const char *lit)
{
	return strlen(lit) == k && memcmp(n, lit, k) == 0;
}

/* ---- in ------------------------------------------------------------------
 */

int h2f_req_init(struct h2f_req *q)
{
	memset(q, 0, sizeof(*q));
	q->cookie = evbuffer_new();
	q->hdr = evbuffer_new();
	return q->cookie && q->hdr ? 0 : -ENOMEM;
}

void h2f_req_free(struct h2f_req *q)
{
	if (q->cookie)
		evbuffer_free(q->cookie);
	if (q->hdr)
		evbuffer_free(q->hdr);
	free(q->method);
	free(q->path);
	free(q->authority);
	free(q->host);
	memset(q, 0, sizeof(*q));
}

static char *dup_of(const uint8_t *p, size_t n)
{
	char *d = malloc(n + 1);

	if (d) {
		memcpy(d, p, n);
		d[n] = '\0';
	}
	return d;
}

int h2f_req_field(struct h2f_req *q, const uint8_t *name, size_t namelen,
		  const uint8_t *value, size_t valuelen)
{
	char **slot = NULL;

	if (namelen > 0 && name[0] == ':') {
		if (name_is(name, namelen, ":method"))
			slot = &q->method;
		else if (name_is(name, namelen, ":path"))
			slot = &q->path;
		else if (name_is(name, namelen, ":authority"))
			slot = &q->authority;
		if (slot && !*slot && !(*slot = dup_of(value, valuelen)))
			return -ENOMEM;
		return 0; /* :scheme: X-Forwarded-Proto is edge's */
	}
	if (name_is(name, namelen, "host")) {
		if (q->host) /* two Host fields */
			return 1;
		q->host = dup_of(value, valuelen);
		return q->host ? 0 : -ENOMEM;
	}
	if (name_is(name, namelen, "cookie")) {
		if ((evbuffer_get_length(q->cookie) &&
		     evbuffer_add(q->cookie, "; ", 2)) ||
		    evbuffer_add(q->cookie, value, valuelen))
			return -ENOMEM;
		return 0;
	}
	if (name_is(name, namelen, "content-length"))
		q->has_cl = true;
	if (evbuffer_add(q->hdr, name, namelen) ||
	    evbuffer_add(q->hdr, ": ", 2) ||
	    evbuffer_add(q->hdr, value, valuelen) ||
	    evbuffer_add(q->hdr, "\r\n", 2))
		return -ENOMEM;
	return 0;
}

int h2f_req_head(struct h2f_req *q, bool chunked, char **out, size_t *len)
{
	const char *host = q->authority ? q->authority : q->host;
	struct evbuffer *b;
	int rc = -ENOMEM;

	*out = NULL;
	*len = 0;
	if (q->authority && q->host && strcmp(q->authority, q->host) != 0)
		return H2F_HOST_MISMATCH;
	if (q->method && strcmp(q->method, "CONNECT") == 0)
		return H2F_CONNECT; /* (which has no :path) */
	if (!q->method || !q->path)
		return H2F_NO_PSEUDO;
	b = evbuffer_new();
	if (!b)
		return -ENOMEM;
	/* the cookie and field lines move into the head (no copy) */
	if (evbuffer_add_printf(b, "%s %s HTTP/1.1\r\n", q->method, q->path) <
		0 ||
	    (host && evbuffer_add_printf(b, "Host: %s\r\n", host) < 0) ||
	    (evbuffer_get_length(q->cookie) &&
	     (evbuffer_add(b, "Cookie: ", 8) ||
	      evbuffer_add_buffer(b, q->cookie) ||
	      evbuffer_add(b, "\r\n", 2))) ||
	    evbuffer_add_buffer(b, q->hdr) ||
	    (chunked &&
	     evbuffer_add(b, "Transfer-Encoding: chunked\r\n", 28)) ||
	    evbuffer_add(b, "\r\n", 2))
		goto out;
	*len = evbuffer_get_length(b);
	*out = malloc(*len);
	if (!*out)
		goto out;
	evbuffer_remove(b, *out, *len);
	rc = 0;
out:
	evbuffer_free(b);
	if (rc)
		*len = 0;
	return rc;
}

/* ---- out -----------------------------------------------------------------
 */

int h2f_line_next(char **pos, char *end, char **name, size_t *namelen,
		  char **value, size_t *valuelen)
{
	char *line = *pos, *nl, *colon, *v;
	size_t i, k;

	if (line >= end)
		return 0;
	nl = memchr(line, '\n', (size_t)(end - line));
	if (!nl || nl - line < 2)
		return 0; /* the blank line */
	colon = memchr(line, ':', (size_t)(nl - line));
	if (!colon)
		return -1;
	k = (size_t)(colon - line);
	for (i = 0; i < k; i++)
		if (line[i] >= 'A' && line[i] <= 'Z')
			line[i] = (char)(line[i] - 'A' + 'a');
	for (v = colon + 1; v < nl && (*v == ' ' || *v == '\t'); v++)
		;
	*name = line;
	*namelen = k;
	*value = v;
	*valuelen = v < nl ? (size_t)(nl - 1 - v) : 0;
	*pos = nl + 1;
	return 1;
}

/* Connection-specific fields: no place in HTTP/2 (RFC 9113 section
 * 8.2.2). */
static bool field_hop(const char *n, size_t k)
{
	return name_is(n, k, "connection") || name_is(n, k, "keep-alive") ||
	       name_is(n, k, "proxy-connection") ||
	       name_is(n, k, "transfer-encoding") || name_is(n, k, "upgrade");
}

int h2f_response_nv(char *p, size_t len, nghttp2_nv *nv, size_t max)
{
	char *pos, *name, *value;
	size_t n = 0, k, vl;
	int rc;

	pos = memchr(p, '\n', len);
	if (!pos || len < 12 || max < 1)
		return -1;
	pos++;
	nv[n++] = NV(":status", 7, p + 9, 3, NGHTTP2_NV_FLAG_NO_COPY_NAME);
	while ((rc = h2f_line_next(&pos, p + len, &name, &k, &value, &vl)) >
	       0) {
		if (field_hop(name, k))
			continue;
		if (n == max)
			return -1;
		/* a value unique to the response: not worth a table entry */
		nv[n++] = NV(name, k, value, vl,
			     name_is(name, k, "x-request-id")
				 ? NGHTTP2_NV_FLAG_NO_INDEX
				 : NGHTTP2_NV_FLAG_NONE);
	}
	return rc < 0 ? -1 : (int)n;
}

int h2f_request_nv(char *p, size_t len, bool tls, const char *authority,
		   nghttp2_nv *nv, size_t max)
{
	char *pos, *sp1, *sp2, *name, *value;
	const char *auth = NULL;
	size_t n = 4, k, vl, alen = 0;
	bool te = false;
	int rc;

	pos = memchr(p, '\n', len);
	sp1 = pos ? memchr(p, ' ', (size_t)(pos - p)) : NULL;
	sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(pos - sp1 - 1)) : NULL;
	if (!sp2 || max < 5)
		return -1;
	pos++;
	while ((rc = h2f_line_next(&pos, p + len, &name, &k, &value, &vl)) >
	       0) {
		if (name_is(name, k, "host")) {
			auth = value;
			alen = vl;
			continue;
		}
		if (name_is(name, k, "te")) {
			if (vl != 8 || strncasecmp(value, "trailers", 8) != 0)
				continue;
			te = true;
		}
		if (field_hop(name, k) || name_is(name, k, "http2-settings"))
			continue;
		if (n == max)
			return -1;
		nv[n++] = NV(name, k, value, vl, NGHTTP2_NV_FLAG_NONE);
	}
	if (rc < 0)
		return -1;
	if (!te && n < max) /* (a head that fills nv goes without it) */
		nv[n++] = NV("te", 2, "trailers", 8, NGHTTP2_NV_FLAG_NONE);
	nv[0] = NV(":method", 7, p, (size_t)(sp1 - p), NGHTTP2_NV_FLAG_NONE);
	nv[1] = NV(":scheme", 7, tls ? "https" : "http", tls ? 5u : 4u,
		   NGHTTP2_NV_FLAG_NONE);
	nv[2] = NV(":path", 5, sp1 + 1, (size_t)(sp2 - sp1 - 1),
		   NGHTTP2_NV_FLAG_NONE);
	if (auth && alen)
		nv[3] = NV(":authority", 10, auth, alen, NGHTTP2_NV_FLAG_NONE);
	else
		nv[3] = NV(":authority", 10, authority, strlen(authority),
			   NGHTTP2_NV_FLAG_NONE);
	return (int)n;
}

size_t h2f_trailers_nv(struct evbuffer *tr, nghttp2_nv *nv, size_t max)
{
	size_t len = evbuffer_get_length(tr), off = 0, n = 0, nl, vl;
	char *p = len ? (char *)evbuffer_pullup(tr, (ssize_t)len) : NULL;
	const char *name, *value;

	while (p && n < max &&
	       hdr_trailer_next(p, len, &off, &name, &nl, &value, &vl)) {
		char *lc = p + (name - p);

		for (size_t i = 0; i < nl; i++)
			if (lc[i] >= 'A' && lc[i] <= 'Z')
				lc[i] = (char)(lc[i] - 'A' + 'a');
		nv[n++] = NV(lc, nl, value, vl, NGHTTP2_NV_FLAG_NONE);
	}
	return n;
}

int h2f_submit_trailers(nghttp2_session *ng, int32_t id, struct evbuffer *tr)
{
	nghttp2_nv nv[H2F_TRAILERS_MAX];
	size_t n = h2f_trailers_nv(tr, nv, H2F_TRAILERS_MAX);

	if (n == 0 || nghttp2_submit_trailer(ng, id, nv, n) != 0)
		return -1;
	return 0;
}
