/* SPDX-License-Identifier: BSD-2-Clause */
/* test_h2fields.c - HTTP/2 fields and edge's HTTP/1.1 text both ways
 * (userspace/h2fields.c): a request's header block made the head the
 * strict parser reads (cookies joined, Host from :authority, each
 * refusal), edge's response and request heads made field lists (the
 * connection-specific fields left out, te, :authority), trailers
 * submitted on a real nghttp2 session and read back by its peer. */
#include <check.h>
#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>

#include "h2fields.h"
#include "unit.h"

static void field(struct h2f_req *q, const char *n, const char *v, int want)
{
	ck_assert_int_eq(h2f_req_field(q, (const uint8_t *)n, strlen(n),
				       (const uint8_t *)v, strlen(v)),
			 want);
}

/* q's head as a string (or NULL), and its result in *rc. */
static char *head_of(struct h2f_req *q, bool chunked, int *rc)
{
	static char buf[2048];
	char *p;
	size_t len;

	*rc = h2f_req_head(q, chunked, &p, &len);
	if (*rc)
		return NULL;
	ck_assert_uint_lt(len, sizeof(buf));
	memcpy(buf, p, len);
	buf[len] = '\0';
	free(p);
	return buf;
}

START_TEST(test_req_head)
{
	struct h2f_req q;
	int rc;

	ck_assert_int_eq(h2f_req_init(&q), 0);
	field(&q, ":method", "POST", 0);
	field(&q, ":scheme", "https", 0);
	field(&q, ":authority", "a.test", 0);
	field(&q, ":path", "/x?y=1", 0);
	field(&q, "cookie", "a=1", 0);
	field(&q, "accept", "*/*", 0);
	field(&q, "cookie", "b=2", 0);
	field(&q, "content-length", "5", 0);
	ck_assert(q.has_cl);
	ck_assert_str_eq(head_of(&q, false, &rc),
			 "POST /x?y=1 HTTP/1.1\r\nHost: a.test\r\n"
			 "Cookie: a=1; b=2\r\naccept: */*\r\n"
			 "content-length: 5\r\n\r\n");
	/* moved, not copied: q holds no field line after */
	ck_assert_uint_eq(evbuffer_get_length(q.hdr), 0);
	ck_assert_uint_eq(evbuffer_get_length(q.cookie), 0);
	h2f_req_free(&q);

	/* Host alone; a body of unknown length framed chunked */
	ck_assert_int_eq(h2f_req_init(&q), 0);
	field(&q, ":method", "PUT", 0);
	field(&q, ":path", "/", 0);
	field(&q, "host", "b.test", 0);
	ck_assert(!q.has_cl);
	ck_assert_str_eq(head_of(&q, true, &rc),
			 "PUT / HTTP/1.1\r\nHost: b.test\r\n"
			 "Transfer-Encoding: chunked\r\n\r\n");
	h2f_req_free(&q);
	h2f_req_free(&q); /* twice: harmless */

	/* a second Host; Host and :authority that differ */
	ck_assert_int_eq(h2f_req_init(&q), 0);
	field(&q, ":method", "GET", 0);
	field(&q, ":path", "/", 0);
	field(&q, "host", "b.test", 0);
	field(&q, "host", "b.test", 1);
	field(&q, ":authority", "c.test", 0);
	ck_assert_ptr_null(head_of(&q, false, &rc));
	ck_assert_int_eq(rc, H2F_HOST_MISMATCH);
	h2f_req_free(&q);

	/* neither: no Host line (the parser refuses it) */
	ck_assert_int_eq(h2f_req_init(&q), 0);
	field(&q, ":method", "GET", 0);
	field(&q, ":path", "/", 0);
	ck_assert_str_eq(head_of(&q, false, &rc), "GET / HTTP/1.1\r\n\r\n");
	h2f_req_free(&q);

	/* the first of repeated pseudo-headers counts (nghttp2 refuses
	 * repeats before they come here) */
	ck_assert_int_eq(h2f_req_init(&q), 0);
	field(&q, ":method", "CONNECT", 0);
	field(&q, ":authority", "d.test:443", 0);
	ck_assert_ptr_null(head_of(&q, false, &rc));
	ck_assert_int_eq(rc, H2F_CONNECT);
	h2f_req_free(&q);

	ck_assert_int_eq(h2f_req_init(&q), 0);
	field(&q, ":path", "/", 0);
	ck_assert_ptr_null(head_of(&q, false, &rc));
	ck_assert_int_eq(rc, H2F_NO_PSEUDO);
	field(&q, ":method", "GET", 0);
	field(&q, ":method", "DELETE", 0);
	ck_assert_str_eq(head_of(&q, false, &rc), "GET / HTTP/1.1\r\n\r\n");
	h2f_req_free(&q);
}
END_TEST

/* nv[i] as "name=value". */
static const char *nv_str(const nghttp2_nv *nv)
{
	static char buf[256];

	snprintf(buf, sizeof(buf), "%.*s=%.*s", (int)nv->namelen,
		 (const char *)nv->name, (int)nv->valuelen,
		 (const char *)nv->value);
	return buf;
}

START_TEST(test_response_nv)
{
	char head[] = "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n"
		      "Connection: keep-alive\r\nKeep-Alive: timeout=5\r\n"
		      "Transfer-Encoding: chunked\r\nX-Request-ID: abc\r\n"
		      "Empty:\r\nSet-Cookie:  a=1\r\n\r\n";
	char bad[] = "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n";
	nghttp2_nv nv[8];
	int n = h2f_response_nv(head, strlen(head), nv, 8);

	ck_assert_int_eq(n, 5);
	ck_assert_str_eq(nv_str(&nv[0]), ":status=404");
	ck_assert_str_eq(nv_str(&nv[1]), "content-type=text/plain");
	ck_assert_str_eq(nv_str(&nv[2]), "x-request-id=abc");
	ck_assert_uint_eq(nv[2].flags, NGHTTP2_NV_FLAG_NO_INDEX);
	ck_assert_str_eq(nv_str(&nv[3]), "empty=");
	ck_assert_str_eq(nv_str(&nv[4]), "set-cookie=a=1");
	ck_assert_int_eq(h2f_response_nv(head, strlen(head), nv, 3), -1);
	ck_assert_int_eq(h2f_response_nv(bad, strlen(bad), nv, 8), -1);
	ck_assert_int_eq(h2f_response_nv(bad, 5, nv, 8), -1);
}
END_TEST

START_TEST(test_request_nv)
{
	char head[] = "GET /p?q HTTP/1.1\r\nHost: up.test\r\nTE: gzip\r\n"
		      "Connection: close\r\nUpgrade: websocket\r\n"
		      "HTTP2-Settings: AAA\r\nAccept: */*\r\n\r\n";
	char te[] = "POST / HTTP/1.1\r\nte: Trailers\r\n\r\n";
	char bad[] = "GET\r\n\r\n";
	nghttp2_nv nv[16];
	int n =
	    h2f_request_nv(head, strlen(head), true, "10.0.0.1:443", nv, 16);

	ck_assert_int_eq(n, 6);
	ck_assert_str_eq(nv_str(&nv[0]), ":method=GET");
	ck_assert_str_eq(nv_str(&nv[1]), ":scheme=https");
	ck_assert_str_eq(nv_str(&nv[2]), ":path=/p?q");
	ck_assert_str_eq(nv_str(&nv[3]), ":authority=up.test");
	ck_assert_str_eq(nv_str(&nv[4]), "accept=*/*");
	ck_assert_str_eq(nv_str(&nv[5]), "te=trailers");

	/* no Host: the endpoint; the client's own te: trailers kept once */
	n = h2f_request_nv(te, strlen(te), false, "10.0.0.1:80", nv, 16);
	ck_assert_int_eq(n, 5);
	ck_assert_str_eq(nv_str(&nv[1]), ":scheme=http");
	ck_assert_str_eq(nv_str(&nv[3]), ":authority=10.0.0.1:80");
	ck_assert_str_eq(nv_str(&nv[4]), "te=Trailers");
	ck_assert_int_eq(h2f_request_nv(te, strlen(te), false, "x", nv, 4), -1);
	/* a head that fills nv: te: trailers left out, not refused */
	n = h2f_request_nv(head, strlen(head), true, "x", nv, 5);
	ck_assert_int_eq(n, 5);
	ck_assert_str_eq(nv_str(&nv[4]), "accept=*/*");
	ck_assert_int_eq(h2f_request_nv(bad, strlen(bad), false, "x", nv, 16),
			 -1);
}
END_TEST

/* The trailers a client session submits, as its server peer reads them.
 */
static char got[512];

static int on_header(nghttp2_session *ng, const nghttp2_frame *f,
		     const uint8_t *n, size_t nl, const uint8_t *v, size_t vl,
		     uint8_t flags, void *user)
{
	(void)ng;
	(void)flags;
	(void)user;
	if (f->hd.type == NGHTTP2_HEADERS &&
	    f->headers.cat == NGHTTP2_HCAT_HEADERS)
		snprintf(got + strlen(got), sizeof(got) - strlen(got),
			 "%.*s=%.*s;", (int)nl, (const char *)n, (int)vl,
			 (const char *)v);
	return 0;
}

static ssize_t no_body(nghttp2_session *ng, int32_t id, uint8_t *buf,
		       size_t len, uint32_t *flags, nghttp2_data_source *src,
		       void *user)
{
	struct evbuffer *tr = src->ptr;

	(void)buf;
	(void)len;
	(void)user;
	*flags |= NGHTTP2_DATA_FLAG_EOF;
	if (h2f_submit_trailers(ng, id, tr) == 0)
		*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
	return 0;
}

START_TEST(test_trailers)
{
	static const char lines[] =
	    "Grpc-Status: 0\r\nContent-Length: 9\r\nX-Sum: abc\r\n";
	nghttp2_session_callbacks *cb;
	nghttp2_session *cl, *sv;
	struct evbuffer *tr = evbuffer_new(), *none = evbuffer_new();
	nghttp2_nv nv[] = {{(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
			   {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
			   {(uint8_t *)":authority", (uint8_t *)"a", 10, 1, 0},
			   {(uint8_t *)":path", (uint8_t *)"/", 5, 1, 0}};
	nghttp2_data_provider dp = {.source.ptr = tr, .read_callback = no_body};
	const uint8_t *p;
	ssize_t n;

	ck_assert_ptr_nonnull(tr);
	evbuffer_add(tr, lines, sizeof(lines) - 1);
	ck_assert_int_eq(nghttp2_session_callbacks_new(&cb), 0);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	ck_assert_int_eq(nghttp2_session_client_new(&cl, cb, NULL), 0);
	ck_assert_int_eq(nghttp2_session_server_new(&sv, cb, NULL), 0);
	/* a client's first frame is its SETTINGS */
	ck_assert_int_eq(
	    nghttp2_submit_settings(cl, NGHTTP2_FLAG_NONE, NULL, 0), 0);
	ck_assert_int_gt(nghttp2_submit_request(cl, NULL, nv, 4, &dp, NULL), 0);
	got[0] = '\0';
	while ((n = nghttp2_session_mem_send(cl, &p)) > 0)
		ck_assert_int_eq(nghttp2_session_mem_recv(sv, p, (size_t)n), n);
	ck_assert_int_eq(n, 0);
	/* framing fields are never trailers: content-length left out */
	ck_assert_str_eq(got, "grpc-status=0;x-sum=abc;");
	/* nothing that may be a trailer: -1, nothing submitted */
	evbuffer_add(none, "Content-Length: 1\r\n", 19);
	ck_assert_int_eq(h2f_submit_trailers(cl, 1, none), -1);
	evbuffer_drain(none, 19);
	ck_assert_int_eq(h2f_submit_trailers(cl, 1, none), -1);
	nghttp2_session_del(cl);
	nghttp2_session_del(sv);
	nghttp2_session_callbacks_del(cb);
	evbuffer_free(tr);
	evbuffer_free(none);
}
END_TEST

static Suite *h2fields_suite(void)
{
	Suite *s = suite_create("h2fields");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_req_head);
	tcase_add_test(tc, test_response_nv);
	tcase_add_test(tc, test_request_nv);
	tcase_add_test(tc, test_trailers);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(h2fields_suite());
}
