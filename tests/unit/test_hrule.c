/* SPDX-License-Identifier: BSD-2-Clause */
/* test_hrule.c - header rules and redirects (userspace/hrule.c): each
 * refusal of hrules_add and hredirects_add, the rules applied by the head
 * builders (a route's group over its environment's by name, variables,
 * edge's own fields and extra lines filtered, X-Request-ID kept), copies,
 * and redirects found (exact over prefix, longest prefix, segment
 * boundary) with their Location. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "h1.h"
#include "hdr.h"
#include "hrule.h"
#include "unit.h"

static int add(struct hrules *h, enum hrule_list l, const char *t,
	       const char *want_msg)
{
	struct errbuf e;
	int rc;

	errbuf_clear(&e);
	rc = hrules_add(h, l, t, &e);
	if (want_msg)
		ck_assert_msg(strstr(e.msg, want_msg), "%s: got \"%s\"", t,
			      e.msg);
	return rc;
}

START_TEST(test_refusals)
{
	struct hrules h = {0};
	char big[HRULE_VALUE_MAX + 16];

	ck_assert_int_eq(add(&h, HRULE_REQUEST_SET, "X-A: 1", NULL), 0);
	ck_assert_int_eq(add(&h, HRULE_REQUEST_SET, "X-A 1", "Name: value"),
			 -EINVAL);
	ck_assert_int_eq(
	    add(&h, HRULE_REQUEST_SET, "Transfer-Encoding: x", "hop-by-hop"),
	    -EINVAL);
	ck_assert_int_eq(
	    add(&h, HRULE_RESPONSE_SET, "content-length: 5", "framing"),
	    -EINVAL);
	ck_assert_int_eq(
	    add(&h, HRULE_RESPONSE_REMOVE, "x-request-id", "edge's own"),
	    -EINVAL);
	ck_assert_int_eq(add(&h, HRULE_REQUEST_SET, "Via: x", "loop"), -EINVAL);
	ck_assert_int_eq(add(&h, HRULE_RESPONSE_SET, "Via: 1.1 cdn", NULL), 0);
	ck_assert_int_eq(add(&h, HRULE_REQUEST_REMOVE, "Host", "not removed"),
			 -EINVAL);
	ck_assert_int_eq(add(&h, HRULE_REQUEST_SET, "Host: b.test", NULL), 0);
	ck_assert_int_eq(add(&h, HRULE_RESPONSE_SET, "X B: 1", "token"),
			 -EINVAL);
	ck_assert_int_eq(add(&h, HRULE_RESPONSE_SET, ": 1", "1 to"), -EINVAL);
	ck_assert_int_eq(add(&h, HRULE_RESPONSE_SET, "X-C: a\rb", "0x0d"),
			 -EINVAL);
	ck_assert_int_eq(
	    add(&h, HRULE_RESPONSE_SET, "X-C: caf\xc3\xa9", "0xc3"), -EINVAL);
	ck_assert_int_eq(add(&h, HRULE_RESPONSE_SET, "X-C: $hots", "$hots"),
			 -EINVAL);
	ck_assert_int_eq(add(&h, HRULE_RESPONSE_SET, "X-C: $path", "$path"),
			 -EINVAL); /* a redirect's, not a header's */
	ck_assert_int_eq(add(&h, HRULE_RESPONSE_SET, "X-C: 5$", "unknown"),
			 -EINVAL);
	ck_assert_int_eq(add(&h, HRULE_RESPONSE_SET, "X-C: $$ $host", NULL), 0);
	/* a name twice, set and removed, set and added */
	ck_assert_int_eq(add(&h, HRULE_RESPONSE_SET, "x-c: 2", "already"),
			 -EINVAL);
	ck_assert_int_eq(add(&h, HRULE_RESPONSE_REMOVE, "X-C", "already"),
			 -EINVAL);
	ck_assert_int_eq(add(&h, HRULE_RESPONSE_ADD, "X-C: 3", "already"),
			 -EINVAL);
	ck_assert_int_eq(add(&h, HRULE_REQUEST_REMOVE, "x-a", "already"),
			 -EINVAL);
	/* a remove and adds of one name: the upstream's replaced by many */
	ck_assert_int_eq(add(&h, HRULE_RESPONSE_REMOVE, "Link", NULL), 0);
	ck_assert_int_eq(add(&h, HRULE_RESPONSE_ADD, "Link: <a>", NULL), 0);
	ck_assert_int_eq(add(&h, HRULE_RESPONSE_ADD, "Link: <b>", NULL), 0);
	/* the other direction is another list */
	ck_assert_int_eq(add(&h, HRULE_RESPONSE_SET, "X-A: r", NULL), 0);
	memset(big, 'v', sizeof(big));
	memcpy(big, "X-Big: ", 7);
	big[sizeof(big) - 1] = '\0';
	ck_assert_int_eq(add(&h, HRULE_RESPONSE_SET, big, "at most"), -EINVAL);
	/* a CGI-style server reads X_Foo as X-Foo: so do rules */
	ck_assert_int_eq(
	    add(&h, HRULE_RESPONSE_SET, "Transfer_Encoding: x", "hop-by-hop"),
	    -EINVAL);
	ck_assert_int_eq(
	    add(&h, HRULE_REQUEST_REMOVE, "X_Request_ID", "edge's own"),
	    -EINVAL);
	ck_assert_int_eq(add(&h, HRULE_RESPONSE_REMOVE, "x_a", "already"),
			 -EINVAL);
	/* an empty Host is no Host */
	ck_assert_int_eq(add(&h, HRULE_REQUEST_SET, "host:  ", "is a removal"),
			 -EINVAL);
	ck_assert_int_eq(add(&h, HRULE_RESPONSE_SET, "X-D: $Host", "\"$Host\""),
			 -EINVAL);
	ck_assert_uint_eq(h.n[HRULE_REQUEST_SET], 2);
	ck_assert_uint_eq(h.n[HRULE_RESPONSE_SET], 3);
	ck_assert_uint_eq(h.n[HRULE_RESPONSE_ADD], 2);
	ck_assert_str_eq(h.f[HRULE_RESPONSE_SET][1].value, "$$ $host");
	ck_assert(h.f[HRULE_RESPONSE_SET][1].vars);
	ck_assert(!hrules_empty(&h));
	hrules_free(&h);
	ck_assert(hrules_empty(&h));
}
END_TEST

/* A group's fields, variables at their longest, stay within
 * HRULE_GROUP_BYTES_MAX: a head never outgrows its 64 KiB by rules. */
START_TEST(test_bytes)
{
	struct hrules h = {0}, g = {0};
	char t[HRULE_VALUE_MAX + 32];
	size_t k;
	int i, rc = 0;

	/* $host is 262 bytes at its longest: 3 of them a value */
	for (i = 0; i < HRULE_MAX && rc == 0; i++) {
		k = (size_t)snprintf(t, sizeof(t), "X-%d: ", i);
		memcpy(t + k, "$host$host$host", 16);
		rc = add(&h, HRULE_RESPONSE_ADD, t, NULL);
	}
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_int_lt(i, HRULE_MAX);
	rc = add(&h, HRULE_RESPONSE_ADD, "X-last: $host$host$host",
		 "more than 16384 bytes");
	ck_assert_int_eq(rc, -EINVAL);
	/* plain values of 1000 bytes: 16 fit, not 17 */
	memset(t, 'v', sizeof(t));
	for (i = 0; i < 17; i++) {
		k = (size_t)snprintf(t, sizeof(t), "Y-%02d: ", i);
		t[k] = 'v';
		t[1000] = '\0';
		rc = add(&g, HRULE_RESPONSE_SET, t, NULL);
		if (rc)
			break;
	}
	ck_assert_int_eq(i, 16);
	hrules_free(&h);
	hrules_free(&g);
}
END_TEST

START_TEST(test_max)
{
	struct hrules h = {0};
	char t[64];
	int i;

	for (i = 0; i < HRULE_MAX; i++) {
		snprintf(t, sizeof(t), "X-%d", i);
		ck_assert_int_eq(add(&h, HRULE_RESPONSE_REMOVE, t, NULL), 0);
	}
	ck_assert_int_eq(add(&h, HRULE_RESPONSE_REMOVE, "X-last", "at most"),
			 -EINVAL);
	hrules_free(&h);
}
END_TEST

static const struct hrule_vars vars = {
    .request_id = "rid1",
    .client_ip = "192.0.2.7",
    .host = "a.test:8080 and more", /* a span: 11 bytes */
    .host_len = 11,
    .project_id = "p1",
    .environment_id = "e1",
    .trace_id = "4bf92f3577b34da6a3ce929d0e0e4736",
};

static const char *built(struct hdr_buf *b)
{
	ck_assert_int_eq(hdr_buf_add(b, "", 1), 0);
	return b->p;
}

START_TEST(test_request_applied)
{
	static const char in[] = "GET /x HTTP/1.1\r\nHost: a.test:8080\r\n"
				 "X-Debug: 1\r\nX-Env: client\r\n"
				 "X_Debug: 2\r\nx_env: c2\r\n"
				 "Accept: */*\r\n\r\n";
	struct hrules env = {0}, route = {0}, copy;
	struct h1_request *r = malloc(sizeof(*r));
	struct hrule_edit ed;
	struct hdr_fwd f;
	struct hdr_buf b;

	ck_assert_ptr_nonnull(r);
	h1_request_init(r);
	ck_assert_int_eq(h1_parse_request(in, sizeof(in) - 1, NULL, r),
			 (int)sizeof(in) - 1);
	ck_assert_int_eq(add(&env, HRULE_REQUEST_SET, "X-Env: prod", NULL), 0);
	ck_assert_int_eq(add(&env, HRULE_REQUEST_SET,
			     "X-Who: $client_ip|$host|$project_id|"
			     "$environment_id|$request_id|$trace_id|$$",
			     NULL),
			 0);
	ck_assert_int_eq(add(&env, HRULE_REQUEST_REMOVE, "X-Debug", NULL), 0);
	ck_assert_int_eq(add(&env, HRULE_REQUEST_REMOVE, "X-Project-ID", NULL),
			 0);
	ck_assert_int_eq(
	    add(&env, HRULE_REQUEST_SET, "X-Forwarded-Proto: h3", NULL), 0);
	ck_assert_int_eq(add(&env, HRULE_RESPONSE_SET, "X-R: 1", NULL), 0);
	/* the route's X-Env, and its remove of X-Forwarded-Proto, win */
	ck_assert_int_eq(add(&route, HRULE_REQUEST_SET, "x-env: api", NULL), 0);
	ck_assert_int_eq(
	    add(&route, HRULE_REQUEST_REMOVE, "X-Forwarded-Proto", NULL), 0);
	ck_assert_int_eq(hrules_dup(&env, &copy), 0);
	hrules_free(&env);

	memset(&f, 0, sizeof(f));
	f.request_id = "rid1";
	f.project_id = "p1";
	f.environment_id = "e1";
	f.client_ip = "192.0.2.7";
	f.proto = "http";
	f.content_length = -1;
	f.edit = hrule_edit_init(&ed, &copy, &route, &vars, false);
	ck_assert_ptr_nonnull(f.edit);
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_build_request(&b, r, &f), 0);
	ck_assert_str_eq(built(&b), "GET /x HTTP/1.1\r\n"
				    "Host: a.test:8080\r\n"
				    "Accept: */*\r\n"
				    "X-Request-ID: rid1\r\n"
				    "X-Environment-ID: e1\r\n"
				    "X-Client-IP: 192.0.2.7\r\n"
				    "X-Forwarded-For: 192.0.2.7\r\n"
				    "X-Forwarded-Host: a.test:8080\r\n"
				    "X-Who: 192.0.2.7|a.test:8080|p1|e1|rid1|"
				    "4bf92f3577b34da6a3ce929d0e0e4736|$\r\n"
				    "x-env: api\r\n\r\n");
	hdr_buf_free(&b);

	/* no rule of a direction: no edit at all */
	hrules_free(&route);
	ck_assert_ptr_null(hrule_edit_init(&ed, NULL, &route, &vars, true));
	hrules_free(&copy);
	ck_assert_ptr_null(hrule_edit_init(&ed, &copy, NULL, &vars, false));
	free(r);
}
END_TEST

START_TEST(test_response_applied)
{
	static const char in[] = "HTTP/1.1 200 OK\r\nServer: up\r\n"
				 "Cache-Control: max-age=9\r\n"
				 "Link: <u>\r\nX-Request-ID: up-id\r\n"
				 "Content-Length: 2\r\n\r\n";
	struct h1_response *p = malloc(sizeof(*p));
	struct hrules env = {0};
	struct hrule_edit ed;
	struct hdr_buf b;

	ck_assert_ptr_nonnull(p);
	h1_response_init(p);
	ck_assert_int_eq(
	    h1_parse_response(in, sizeof(in) - 1, NULL, H1_M_GET, false, p),
	    (int)sizeof(in) - 1);
	ck_assert_int_eq(add(&env, HRULE_RESPONSE_REMOVE, "server", NULL), 0);
	ck_assert_int_eq(
	    add(&env, HRULE_RESPONSE_SET, "Cache-Control: no-store", NULL), 0);
	ck_assert_int_eq(
	    add(&env, HRULE_RESPONSE_SET, "X-Frame-Options: DENY", NULL), 0);
	ck_assert_int_eq(
	    add(&env, HRULE_RESPONSE_REMOVE, "X-Content-Type-Options", NULL),
	    0);
	ck_assert_int_eq(add(&env, HRULE_RESPONSE_ADD, "Link: <e>", NULL), 0);
	ck_assert_int_eq(add(&env, HRULE_RESPONSE_ADD, "X-Host: $host", NULL),
			 0);
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(
	    hdr_build_response(&b, p, "rid1",
			       "X-Content-Type-Options: nosniff\r\n"
			       "X-Frame-Options: SAMEORIGIN\r\n"
			       "Referrer-Policy: no-referrer\r\n",
			       hrule_edit_init(&ed, &env, NULL, &vars, true), 2,
			       false, false),
	    0);
	ck_assert_str_eq(built(&b), "HTTP/1.1 200 OK\r\n"
				    "Link: <u>\r\n"
				    "X-Request-ID: rid1\r\n"
				    "Referrer-Policy: no-referrer\r\n"
				    "Cache-Control: no-store\r\n"
				    "X-Frame-Options: DENY\r\n"
				    "Link: <e>\r\n"
				    "X-Host: a.test:8080\r\n"
				    "Content-Length: 2\r\n\r\n");
	hdr_buf_free(&b);
	/* edge's own errors are not the upstream's responses: no rules */
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_build_error(&b, 502, "rid1", NULL, NULL, 0, false),
			 0);
	ck_assert_ptr_null(strstr(built(&b), "X-Host"));
	hdr_buf_free(&b);
	hrules_free(&env);
	free(p);
}
END_TEST

static int radd(struct hredirects *r, const char *from, const char *to,
		unsigned status, const char *want_msg)
{
	struct errbuf e;
	int rc;

	errbuf_clear(&e);
	rc = hredirects_add(r, from, to, status, &e);
	if (want_msg)
		ck_assert_msg(strstr(e.msg, want_msg), "%s -> %s: got \"%s\"",
			      from, to, e.msg);
	return rc;
}

static const char *loc(const struct hredirects *r, const char *path,
		       const char *q, unsigned *status)
{
	static char out[512];
	const struct hredirect *d = hredirects_find(r, path, strlen(path));
	struct hdr_buf b;

	if (!d)
		return NULL;
	*status = d->status;
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(
	    hredirect_location(d, path, strlen(path), q, q ? strlen(q) : 0, &b),
	    0);
	ck_assert_uint_lt(b.len, sizeof(out));
	memcpy(out, b.p, b.len);
	out[b.len] = '\0';
	hdr_buf_free(&b);
	return out;
}

START_TEST(test_redirects)
{
	struct hredirects r = {0}, copy;
	unsigned st = 0;

	ck_assert_int_eq(
	    radd(&r, "/old/*", "https://n.test/new$path$query", 0, NULL), 0);
	ck_assert_int_eq(radd(&r, "/old/a/*", "/a$path", 308, NULL), 0);
	ck_assert_int_eq(radd(&r, "/old/x", "/x-exact", 302, NULL), 0);
	ck_assert_int_eq(radd(&r, "/docs", "/manual$query$$", 307, NULL), 0);
	ck_assert_int_eq(radd(&r, "/old/*", "/y", 301, "already"), -EINVAL);
	ck_assert_int_eq(radd(&r, "/a", "/b", 303, "not 303"), -EINVAL);
	ck_assert_int_eq(radd(&r, "old", "/b", 0, "starting with /"), -EINVAL);
	ck_assert_int_eq(radd(&r, "/a*", "/b", 0, "byte 0x2a"), -EINVAL);
	ck_assert_int_eq(radd(&r, "/a b", "/b", 0, "byte 0x20"), -EINVAL);
	ck_assert_int_eq(radd(&r, "/a", "//evil.test", 0, "one /"), -EINVAL);
	ck_assert_int_eq(radd(&r, "/a", "javascript:x", 0, "http://"), -EINVAL);
	ck_assert_int_eq(radd(&r, "/a", "https://", 0, "http://"), -EINVAL);
	ck_assert_int_eq(radd(&r, "/a", "/b\r\nX: y", 0, "byte 0x0d"), -EINVAL);
	ck_assert_int_eq(radd(&r, "/a", "/b<script>", 0, "byte 0x3c"), -EINVAL);
	ck_assert_int_eq(radd(&r, "/a", "/x$host", 0, "unknown variable"),
			 -EINVAL);
	/* the host is the rule's: no variable first in a URL's host or
	 * right after a path's first / */
	ck_assert_int_eq(radd(&r, "/a", "/$path", 0, "the host must be"),
			 -EINVAL);
	ck_assert_int_eq(radd(&r, "/a", "/$query", 0, "the host must be"),
			 -EINVAL);
	ck_assert_int_eq(radd(&r, "/a", "http://$path", 0, "the host must be"),
			 -EINVAL);
	ck_assert_int_eq(
	    radd(&r, "/a", "HTTPS://$path/x", 0, "the host must be"), -EINVAL);
	ck_assert_int_eq(radd(&r, "/a", "/%zz", 0, NULL), 0);
	ck_assert_int_eq(radd(&r, "/%zz", "/b", 0, "two hex digits"), -EINVAL);
	ck_assert_int_eq(radd(&r, "/%2", "/b", 0, "two hex digits"), -EINVAL);
	ck_assert_int_eq(radd(&r, "/b%2F", "/c", 0, NULL), 0);
	ck_assert_int_eq(radd(&r, "/c", "/$$path", 0, NULL), 0);
	ck_assert_int_eq(radd(&r, "/d/*", "HTTPS://n.test$path", 0, NULL), 0);
	ck_assert_uint_eq(r.n, 8);
	ck_assert_int_eq(hredirects_dup(&r, &copy), 0);
	hredirects_free(&r);

	ck_assert_str_eq(loc(&copy, "/old/b/c", "q=1", &st),
			 "Location: https://n.test/new/b/c?q=1\r\n");
	ck_assert_uint_eq(st, 301);
	ck_assert_str_eq(loc(&copy, "/old", NULL, &st),
			 "Location: https://n.test/new\r\n");
	ck_assert_str_eq(loc(&copy, "/old/", NULL, &st),
			 "Location: https://n.test/new/\r\n");
	/* the longest prefix, then an exact path over both */
	ck_assert_str_eq(loc(&copy, "/old/a/z", "k", &st),
			 "Location: /a/z\r\n");
	ck_assert_uint_eq(st, 308);
	ck_assert_str_eq(loc(&copy, "/old/x", "k", &st),
			 "Location: /x-exact\r\n");
	ck_assert_uint_eq(st, 302);
	ck_assert_str_eq(loc(&copy, "/old/x/y", NULL, &st),
			 "Location: https://n.test/new/x/y\r\n");
	ck_assert_str_eq(loc(&copy, "/docs", "a=1&b", &st),
			 "Location: /manual?a=1&b$\r\n");
	ck_assert_str_eq(loc(&copy, "/c", NULL, &st), "Location: /$path\r\n");
	ck_assert_str_eq(loc(&copy, "/d/e", NULL, &st),
			 "Location: HTTPS://n.test/e\r\n");
	/* a segment boundary; an exact path is exact */
	ck_assert_ptr_null(loc(&copy, "/oldx", NULL, &st));
	ck_assert_ptr_null(loc(&copy, "/docs/", NULL, &st));
	ck_assert_ptr_null(loc(&copy, "/", NULL, &st));
	ck_assert_ptr_null(hredirects_find(NULL, "/old", 4));
	hredirects_free(&copy);

	/* from "/" and a star: everything */
	ck_assert_int_eq(radd(&r, "/*", "https://b.test$path$query", 308, NULL),
			 0);
	ck_assert_str_eq(loc(&r, "/", "x", &st),
			 "Location: https://b.test/?x\r\n");
	ck_assert_str_eq(loc(&r, "/p/q", NULL, &st),
			 "Location: https://b.test/p/q\r\n");
	hredirects_free(&r);
}
END_TEST

/* The database's JSON: read as the file's text, refusals naming the
 * entry, and what hrules_json/hredirects_json write read back the same. */
START_TEST(test_json)
{
	static const struct {
		const char *headers, *redirects, *msg; /* msg NULL: good */
	} c[] = {
	    {"{\"request_set\": [\"X-A: 1\"], \"response_remove\": "
	     "[\"Server\"]}",
	     "[{\"from\": \"/a/*\", \"to\": \"/b$path\", \"status\": 302}, "
	     "{\"from\": \"/c\", \"to\": \"https://d.test/\"}]",
	     NULL},
	    {"null", "null", NULL},
	    {"[]", NULL, "headers: an object is needed"},
	    {"{\"request_add\": []}", NULL, "unknown key \"request_add\""},
	    {"{\"request_set\": \"X-A: 1\"}", NULL,
	     "headers.request_set: a list of strings"},
	    {"{\"request_set\": [1]}", NULL, "request_set[0]: a string"},
	    {"{\"request_set\": [\"X-A: \\u0000\"]}", NULL,
	     "request_set[0]: a string"},
	    {"{\"response_set\": [\"X: 1\", \"TE: x\"]}", NULL,
	     "response_set[1]: TE is hop-by-hop"},
	    {NULL, "{}", "redirects: a list of objects"},
	    {NULL, "[{\"from\": \"/a\"}]", "redirects[0]: {\"from\""},
	    {NULL, "[{\"from\": \"/a\", \"to\": \"/b\", \"x\": 1}]",
	     "redirects[0]:"},
	    {NULL, "[{\"from\": \"/a\", \"to\": \"/b\", \"status\": 200}]",
	     "status: 301, 302, 307 or 308"},
	    {NULL,
	     "[{\"from\": \"/a\", \"to\": \"/b\"}, {\"from\": \"/a\", \"to\": "
	     "\"/c\"}]",
	     "redirects[1]: from: \"/a\" is redirected already"},
	};
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct hrules h, h2;
		struct hredirects r, r2;
		struct errbuf e;
		json_t *o, *back;
		int rc = 0;

		errbuf_clear(&e);
		if (c[i].headers) {
			o = json_loads(c[i].headers,
				       JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
			ck_assert_ptr_nonnull(o);
			rc = hrules_from_json(o, &h, &e);
			json_decref(o);
			if (rc == 0) {
				back = hrules_json(&h, NULL);
				ck_assert_int_eq(
				    hrules_from_json(back, &h2, NULL), 0);
				ck_assert_uint_eq(h2.n[HRULE_REQUEST_SET],
						  h.n[HRULE_REQUEST_SET]);
				ck_assert_uint_eq(h2.n[HRULE_RESPONSE_REMOVE],
						  h.n[HRULE_RESPONSE_REMOVE]);
				json_decref(back);
				hrules_free(&h2);
				hrules_free(&h);
			}
		}
		if (rc == 0 && c[i].redirects) {
			o = json_loads(c[i].redirects, JSON_DECODE_ANY, NULL);
			ck_assert_ptr_nonnull(o);
			rc = hredirects_from_json(o, &r, &e);
			json_decref(o);
			if (rc == 0) {
				back = hredirects_json(&r);
				ck_assert_int_eq(
				    hredirects_from_json(back, &r2, NULL), 0);
				ck_assert_uint_eq(r2.n, r.n);
				if (r.n) {
					ck_assert(r2.v[0].prefix);
					ck_assert_uint_eq(r2.v[0].status, 302);
					ck_assert_uint_eq(r2.v[1].status, 301);
				}
				json_decref(back);
				hredirects_free(&r2);
				hredirects_free(&r);
			}
		}
		if (!c[i].msg) {
			ck_assert_msg(rc == 0, "case %zu: %s", i, e.msg);
		} else {
			ck_assert_int_eq(rc, -EINVAL);
			ck_assert_msg(strstr(e.msg, c[i].msg),
				      "case %zu: got \"%s\"", i, e.msg);
		}
	}
}
END_TEST

static Suite *hrule_suite(void)
{
	Suite *s = suite_create("hrule");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_max);
	tcase_add_test(tc, test_bytes);
	tcase_add_test(tc, test_request_applied);
	tcase_add_test(tc, test_response_applied);
	tcase_add_test(tc, test_redirects);
	tcase_add_test(tc, test_json);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(hrule_suite());
}
