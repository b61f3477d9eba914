/* SPDX-License-Identifier: BSD-2-Clause */
/* test_hdr.c - hop-by-hop and edge fields, request ids, rebuilt heads. */
#include <check.h>
#include <sys/socket.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hdr.h"
#include "trusted.h"
#include "unit.h"

#define S(lit) lit, sizeof(lit) - 1

static struct h1_request *parse(const char *in, size_t len)
{
	struct h1_request *r = malloc(sizeof(*r));

	ck_assert_ptr_nonnull(r);
	h1_request_init(r);
	ck_assert_int_eq(h1_parse_request(in, len, NULL, r), (int)len);
	return r;
}

/* The built head as a NUL-terminated string (leaks into b's buffer). */
static const char *built(struct hdr_buf *b)
{
	ck_assert_int_eq(hdr_buf_add(b, "", 1), 0);
	return b->p;
}

START_TEST(test_sets)
{
	ck_assert(hdr_is_hop_by_hop(S("Connection")));
	ck_assert(hdr_is_hop_by_hop(S("keep-alive")));
	ck_assert(hdr_is_hop_by_hop(S("Proxy-Connection")));
	ck_assert(hdr_is_hop_by_hop(S("TE")));
	ck_assert(hdr_is_hop_by_hop(S("Trailer")));
	ck_assert(hdr_is_hop_by_hop(S("transfer-encoding")));
	ck_assert(hdr_is_hop_by_hop(S("Upgrade")));
	ck_assert(!hdr_is_hop_by_hop(S("Content-Type")));
	ck_assert(!hdr_is_hop_by_hop(S("Connectio")));
	ck_assert(hdr_is_edge_owned(S("X-Forwarded-For")));
	ck_assert(hdr_is_edge_owned(S("x-project-id")));
	ck_assert(hdr_is_edge_owned(S("X-Client-IP")));
	ck_assert(hdr_is_edge_owned(S("X-Request-ID")));
	ck_assert(!hdr_is_edge_owned(S("X-Forwarded")));
}
END_TEST

START_TEST(test_request_id)
{
	char id[HDR_REQUEST_ID_LEN + 1], id2[HDR_REQUEST_ID_LEN + 1];
	char big[HDR_REQUEST_ID_MAX + 1];
	size_t i;

	ck_assert(hdr_request_id_valid(S("abc-DEF_1.2")));
	ck_assert(!hdr_request_id_valid(S("")));
	ck_assert(!hdr_request_id_valid(S("a b")));
	ck_assert(!hdr_request_id_valid(S("a/b")));
	ck_assert(!hdr_request_id_valid(S("caf\xc3\xa9")));
	memset(big, 'a', sizeof(big));
	ck_assert(hdr_request_id_valid(big, HDR_REQUEST_ID_MAX));
	ck_assert(!hdr_request_id_valid(big, HDR_REQUEST_ID_MAX + 1));
	ck_assert_int_eq(hdr_request_id_new(id), 0);
	ck_assert_int_eq(hdr_request_id_new(id2), 0);
	ck_assert_uint_eq(strlen(id), HDR_REQUEST_ID_LEN);
	for (i = 0; i < HDR_REQUEST_ID_LEN; i++)
		ck_assert(strchr("0123456789abcdef", id[i]));
	ck_assert_str_ne(id, id2);
	ck_assert(hdr_request_id_valid(id, strlen(id)));
}
END_TEST

START_TEST(test_request_id_get)
{
	struct h1_request *r;
	const char *v;
	size_t n = 0;

	r = parse(S("GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id: ab-1\r\n\r\n"));
	v = hdr_request_id_get(&r->h, &n);
	ck_assert(v && n == 4 && !memcmp(v, "ab-1", 4));
	free(r);
	r = parse(S("GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id: a b\r\n\r\n"));
	ck_assert_ptr_null(hdr_request_id_get(&r->h, &n));
	free(r);
	r = parse(S("GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id: a\r\n"
		    "X-Request-Id: b\r\n\r\n"));
	ck_assert_ptr_null(hdr_request_id_get(&r->h, &n));
	free(r);
}
END_TEST

#define TP_OK "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

START_TEST(test_traceparent_parse)
{
	char t[HDR_TRACE_ID_LEN + 1], p[HDR_SPAN_ID_LEN + 1];
	uint8_t fl = 0xee;

	ck_assert(hdr_traceparent_parse(S(TP_OK), t, p, &fl));
	ck_assert_str_eq(t, "4bf92f3577b34da6a3ce929d0e0e4736");
	ck_assert_str_eq(p, "00f067aa0ba902b7");
	ck_assert_uint_eq(fl, 1);
	ck_assert(hdr_traceparent_parse(
	    S("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff"), t, p,
	    &fl));
	ck_assert_uint_eq(fl, 0xff);
	/* version 00: exactly 55 characters */
	ck_assert(!hdr_traceparent_parse(S(TP_OK "-x"), t, p, &fl));
	ck_assert(!hdr_traceparent_parse(S(TP_OK " "), t, p, &fl));
	ck_assert(!hdr_traceparent_parse(TP_OK, 54, t, p, &fl));
	/* a later version: read as 00, more after a '-' ignored */
	ck_assert(hdr_traceparent_parse(
	    S("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what"),
	    t, p, &fl));
	ck_assert_str_eq(t, "4bf92f3577b34da6a3ce929d0e0e4736");
	ck_assert(hdr_traceparent_parse(
	    S("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), t, p,
	    &fl));
	ck_assert(!hdr_traceparent_parse(
	    S("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x"), t, p,
	    &fl));
	/* version ff, uppercase, zero ids, separators, non-hex */
	ck_assert(!hdr_traceparent_parse(
	    S("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), t, p,
	    &fl));
	ck_assert(!hdr_traceparent_parse(
	    S("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"), t, p,
	    &fl));
	ck_assert(!hdr_traceparent_parse(
	    S("00-00000000000000000000000000000000-00f067aa0ba902b7-01"), t, p,
	    &fl));
	ck_assert(!hdr_traceparent_parse(
	    S("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"), t, p,
	    &fl));
	ck_assert(!hdr_traceparent_parse(
	    S("00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), t, p,
	    &fl));
	ck_assert(!hdr_traceparent_parse(
	    S("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g"), t, p,
	    &fl));
	ck_assert(!hdr_traceparent_parse(
	    S("0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), t, p,
	    &fl));
	ck_assert(!hdr_traceparent_parse(NULL, 0, t, p, &fl));
}
END_TEST

START_TEST(test_trace_init)
{
	struct h1_request *r;
	struct hdr_trace tr, tr2;
	char par[HDR_SPAN_ID_LEN + 1];

	/* continued: the trace id and sampled kept, a span of edge's */
	r = parse(S("GET / HTTP/1.1\r\nHost: a\r\ntraceparent: " TP_OK
		    "\r\ntracestate: k=v\r\n\r\n"));
	ck_assert_int_eq(hdr_trace_init(&r->h, &tr), 0);
	ck_assert(tr.continued);
	ck_assert_str_eq(tr.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
	ck_assert_uint_eq(strlen(tr.span_id), HDR_SPAN_ID_LEN);
	ck_assert_str_ne(tr.span_id, "00f067aa0ba902b7");
	ck_assert_uint_eq(strlen(tr.traceparent), HDR_TRACEPARENT_LEN);
	ck_assert(!strncmp(tr.traceparent,
			   "00-4bf92f3577b34da6a3ce929d0e0e4736-", 36));
	ck_assert(!strncmp(tr.traceparent + 36, tr.span_id, 16));
	ck_assert_str_eq(tr.traceparent + 52, "-01");
	ck_assert(hdr_traceparent_parse(tr.traceparent, HDR_TRACEPARENT_LEN,
					tr2.trace_id, par, &tr2.flags));
	free(r);
	/* unknown flags are not passed on; random (0x02) is */
	r = parse(S("GET / HTTP/1.1\r\nHost: a\r\ntraceparent: "
		    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-"
		    "fe\r\n\r\n"));
	ck_assert_int_eq(hdr_trace_init(&r->h, &tr), 0);
	ck_assert_uint_eq(tr.flags, 0x02);
	ck_assert_str_eq(tr.traceparent + 52, "-02");
	free(r);
	/* none: a new trace, sampled; two: none taken; a bad one too */
	r = parse(S("GET / HTTP/1.1\r\nHost: a\r\n\r\n"));
	ck_assert_int_eq(hdr_trace_init(&r->h, &tr), 0);
	ck_assert_int_eq(hdr_trace_init(&r->h, &tr2), 0);
	ck_assert(!tr.continued);
	ck_assert_uint_eq(tr.flags, HDR_TRACE_SAMPLED);
	ck_assert_str_ne(tr.trace_id, tr2.trace_id);
	ck_assert_str_ne(tr.span_id, tr2.span_id);
	ck_assert(hdr_traceparent_parse(tr.traceparent, HDR_TRACEPARENT_LEN,
					tr2.trace_id, par, &tr2.flags));
	ck_assert_str_eq(tr2.trace_id, tr.trace_id);
	ck_assert_str_eq(par, tr.span_id);
	free(r);
	r = parse(S("GET / HTTP/1.1\r\nHost: a\r\ntraceparent: " TP_OK
		    "\r\nTraceParent: " TP_OK "\r\n\r\n"));
	ck_assert_int_eq(hdr_trace_init(&r->h, &tr), 0);
	ck_assert(!tr.continued);
	ck_assert_str_ne(tr.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
	free(r);
	r = parse(S("GET / HTTP/1.1\r\nHost: a\r\ntraceparent: "
		    "00-00000000000000000000000000000000-00f067aa0ba902b7-01"
		    "\r\n\r\n"));
	ck_assert_int_eq(hdr_trace_init(&r->h, &tr), 0);
	ck_assert(!tr.continued);
	ck_assert_uint_eq(strlen(tr.trace_id), HDR_TRACE_ID_LEN);
	free(r);
}
END_TEST

static bool drop_tp_fn(const struct hdr_edit *e, const char *name, size_t n)
{
	(void)e;
	return n == 11 && strncasecmp(name, "traceparent", 11) == 0;
}

static void add_none_fn(const struct hdr_edit *e, struct hdr_buf *b)
{
	(void)e;
	(void)b;
}

static const struct hdr_edit drop_tp = {.drop = drop_tp_fn, .add = add_none_fn};

START_TEST(test_build_request_trace)
{
	static const char in[] = "GET /t HTTP/1.1\r\n"
				 "Host: a.example\r\n"
				 "traceparent: " TP_OK "\r\n"
				 "tracestate: vendor=1\r\n"
				 "Accept: */*\r\n\r\n";
	static const char tp[] =
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01";
	struct h1_request *r = parse(in, sizeof(in) - 1);
	struct hdr_fwd f = {.request_id = "id",
			    .traceparent = tp,
			    .tracestate = true,
			    .content_length = -1};
	struct hdr_buf b;
	const char *out;

	/* the client's traceparent replaced by edge's; tracestate kept */
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_build_request(&b, r, &f), 0);
	out = built(&b);
	ck_assert_ptr_null(strstr(out, TP_OK));
	ck_assert_ptr_nonnull(strstr(
	    out,
	    "\r\ntraceparent: "
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01\r\n"));
	ck_assert_ptr_nonnull(strstr(out, "\r\ntracestate: vendor=1\r\n"));
	ck_assert_ptr_null(
	    strstr(strstr(out, "traceparent") + 1, "traceparent"));
	hdr_buf_free(&b);
	/* a trace started anew: the client's tracestate dropped */
	f.tracestate = false;
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_build_request(&b, r, &f), 0);
	out = built(&b);
	ck_assert_ptr_null(strstr(out, "tracestate"));
	ck_assert_ptr_nonnull(strstr(out, "\r\ntraceparent: "));
	hdr_buf_free(&b);
	/* a header rule removes traceparent: tracestate goes with it */
	f.tracestate = true;
	f.edit = &drop_tp;
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_build_request(&b, r, &f), 0);
	out = built(&b);
	ck_assert_ptr_null(strstr(out, "traceparent"));
	ck_assert_ptr_null(strstr(out, "tracestate"));
	hdr_buf_free(&b);
	f.edit = NULL;
	/* none to send: none at all */
	f.traceparent = NULL;
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_build_request(&b, r, &f), 0);
	ck_assert_ptr_null(strstr(built(&b), "traceparent"));
	hdr_buf_free(&b);
	free(r);
}
END_TEST

START_TEST(test_buf_cap)
{
	struct hdr_buf b;

	hdr_buf_init(&b, 8);
	ck_assert_int_eq(hdr_buf_add(&b, S("12345")), 0);
	ck_assert_int_eq(hdr_buf_add(&b, S("6789")), -E2BIG);
	ck_assert_uint_eq(b.len, 5);
	/* sticky */
	ck_assert_int_eq(hdr_buf_add(&b, S("6")), -E2BIG);
	ck_assert_int_eq(hdr_buf_str(&b, NULL), -E2BIG);
	hdr_buf_free(&b);
	hdr_buf_free(NULL);
	hdr_buf_init(&b, 0);
	ck_assert_uint_eq(b.max, HDR_BUF_MAX);
	ck_assert_int_eq(hdr_buf_field(&b, "A", S("b")), 0);
	ck_assert_str_eq(built(&b), "A: b\r\n");
	hdr_buf_free(&b);
}
END_TEST

START_TEST(test_build_request)
{
	static const char in[] = "POST http://app.example/p?q=1 HTTP/1.1\r\n"
				 "Host: spoofed.example\r\n"
				 "Connection: keep-alive, X-Secret\r\n"
				 "X-Secret: s\r\n"
				 "Keep-Alive: timeout=5\r\n"
				 "TE: trailers\r\n"
				 "Proxy-Connection: keep-alive\r\n"
				 "X-Forwarded-For: 10.0.0.1\r\n"
				 "X-Forwarded-For: 10.0.0.2\r\n"
				 "X-Project-ID: evil\r\n"
				 "X-Client-IP: 1.1.1.1\r\n"
				 "X-Request-ID: client-id\r\n"
				 "Content-Type: text/plain\r\n"
				 "Transfer-Encoding: chunked\r\n"
				 "Accept: */*\r\n\r\n";
	struct h1_request *r = parse(in, sizeof(in) - 1);
	struct hdr_fwd f = {.request_id = "client-id",
			    .project_id = "p1",
			    .environment_id = "e1",
			    .deployment_id = "d1",
			    .client_ip = "192.0.2.7",
			    .proto = "https",
			    .content_length = -1,
			    .chunked = true};
	struct hdr_buf b;

	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_build_request(&b, r, &f), 0);
	ck_assert_str_eq(built(&b), "POST /p?q=1 HTTP/1.1\r\n"
				    "Host: app.example\r\n"
				    "Content-Type: text/plain\r\n"
				    "Accept: */*\r\n"
				    "X-Request-ID: client-id\r\n"
				    "X-Project-ID: p1\r\n"
				    "X-Environment-ID: e1\r\n"
				    "X-Deployment-ID: d1\r\n"
				    "X-Client-IP: 192.0.2.7\r\n"
				    "X-Forwarded-For: 192.0.2.7\r\n"
				    "X-Forwarded-Proto: https\r\n"
				    "X-Forwarded-Host: app.example\r\n"
				    "Transfer-Encoding: chunked\r\n\r\n");
	hdr_buf_free(&b);

	/* a trusted peer: its X-Forwarded-For is appended to; a length */
	f.xff_trusted = true;
	f.chunked = false;
	f.content_length = 42;
	f.project_id = f.environment_id = f.deployment_id = NULL;
	f.path = "/q";
	f.path_len = 2;
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_build_request(&b, r, &f), 0);
	ck_assert_ptr_nonnull(strstr(built(&b),
				     "\r\nX-Forwarded-For: 10.0.0.1, 10.0.0.2, "
				     "192.0.2.7\r\n"));
	ck_assert_ptr_nonnull(strstr(b.p, "POST /q?q=1 HTTP/1.1\r\n"));
	ck_assert_ptr_nonnull(strstr(b.p, "\r\nContent-Length: 42\r\n\r\n"));
	ck_assert_ptr_null(strstr(b.p, "Transfer-Encoding"));
	hdr_buf_free(&b);

	/* the cap */
	hdr_buf_init(&b, 64);
	ck_assert_int_eq(hdr_build_request(&b, r, &f), -E2BIG);
	hdr_buf_free(&b);
	free(r);
}
END_TEST

/* The fields other than X-Forwarded-For that backends read their client's
 * address from (Forwarded, X-Real-IP, True-Client-IP, Client-IP,
 * X-Cluster-Client-IP) go on from a trusted peer only; a name that a
 * CGI-style server reads as one of those or as one of edge's own
 * (X_Forwarded_For is its HTTP_X_FORWARDED_FOR) never does. */
START_TEST(test_build_request_addr_fields)
{
	static const char in[] = "GET / HTTP/1.1\r\n"
				 "Host: a\r\n"
				 "Forwarded: for=6.6.6.1;proto=https\r\n"
				 "X-Real-IP: 6.6.6.2\r\n"
				 "x-real-ip: 6.6.6.3\r\n"
				 "True-Client-IP: 6.6.6.4\r\n"
				 "Client-IP: 6.6.6.5\r\n"
				 "X-Cluster-Client-IP: 6.6.6.6\r\n"
				 "X_Forwarded_For: 6.6.6.7\r\n"
				 "x_client_ip: 6.6.6.8\r\n"
				 "X_Real_IP: 6.6.6.9\r\n"
				 "X-Forwarded_Host: evil.example\r\n"
				 "X_Request_ID: evil\r\n"
				 "Forwarded_For: kept\r\n"
				 "X_Other: kept\r\n"
				 "X-Forwarded-Port: 443\r\n"
				 "Accept: */*\r\n\r\n";
	struct h1_request *r = parse(in, sizeof(in) - 1);
	struct hdr_fwd f = {.client_ip = "192.0.2.7", .content_length = -1};
	struct hdr_buf b;

	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_build_request(&b, r, &f), 0);
	ck_assert_str_eq(built(&b), "GET / HTTP/1.1\r\n"
				    "Host: a\r\n"
				    "Forwarded_For: kept\r\n"
				    "X_Other: kept\r\n"
				    "X-Forwarded-Port: 443\r\n"
				    "Accept: */*\r\n"
				    "X-Client-IP: 192.0.2.7\r\n"
				    "X-Forwarded-For: 192.0.2.7\r\n"
				    "X-Forwarded-Host: a\r\n\r\n");
	hdr_buf_free(&b);

	f.xff_trusted = true;
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_build_request(&b, r, &f), 0);
	ck_assert_str_eq(built(&b), "GET / HTTP/1.1\r\n"
				    "Host: a\r\n"
				    "Forwarded: for=6.6.6.1;proto=https\r\n"
				    "X-Real-IP: 6.6.6.2\r\n"
				    "x-real-ip: 6.6.6.3\r\n"
				    "True-Client-IP: 6.6.6.4\r\n"
				    "Client-IP: 6.6.6.5\r\n"
				    "X-Cluster-Client-IP: 6.6.6.6\r\n"
				    "Forwarded_For: kept\r\n"
				    "X_Other: kept\r\n"
				    "X-Forwarded-Port: 443\r\n"
				    "Accept: */*\r\n"
				    "X-Client-IP: 192.0.2.7\r\n"
				    "X-Forwarded-For: 192.0.2.7\r\n"
				    "X-Forwarded-Host: a\r\n\r\n");
	hdr_buf_free(&b);
	free(r);
}
END_TEST

/* A request from 0-RTT goes with Early-Data: 1 (RFC 8470), once: an
 * earlier hop's is kept as it came. */
START_TEST(test_build_request_early_data)
{
	static const char plain[] = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
	static const char hop[] = "GET / HTTP/1.1\r\nHost: a\r\n"
				  "early-data: 1\r\n\r\n";
	struct h1_request *r = parse(plain, sizeof(plain) - 1);
	struct hdr_fwd f = {.content_length = -1, .early_data = true};
	struct hdr_buf b;

	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_build_request(&b, r, &f), 0);
	ck_assert_str_eq(built(&b), "GET / HTTP/1.1\r\nHost: a\r\n"
				    "X-Forwarded-Host: a\r\n"
				    "Early-Data: 1\r\n\r\n");
	hdr_buf_free(&b);
	free(r);
	r = parse(hop, sizeof(hop) - 1);
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_build_request(&b, r, &f), 0);
	ck_assert_str_eq(built(&b), "GET / HTTP/1.1\r\nHost: a\r\n"
				    "early-data: 1\r\n"
				    "X-Forwarded-Host: a\r\n\r\n");
	hdr_buf_free(&b);
	f.early_data =
	    false; /* the hop's, from a request after the handshake */
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_build_request(&b, r, &f), 0);
	ck_assert_str_eq(built(&b), "GET / HTTP/1.1\r\nHost: a\r\n"
				    "early-data: 1\r\n"
				    "X-Forwarded-Host: a\r\n\r\n");
	hdr_buf_free(&b);
	free(r);
}
END_TEST

/* A response's fields of those names go to the client as they are. */
START_TEST(test_build_response_addr_fields)
{
	static const char in[] = "HTTP/1.1 204 No Content\r\n"
				 "X-Real-IP: 192.0.2.1\r\n"
				 "Forwarded: for=192.0.2.1\r\n"
				 "X_Client_IP: 192.0.2.1\r\n\r\n";
	struct h1_response *p = malloc(sizeof(*p));
	struct hdr_buf b;

	ck_assert_ptr_nonnull(p);
	h1_response_init(p);
	ck_assert_int_eq(
	    h1_parse_response(in, sizeof(in) - 1, NULL, H1_M_GET, false, p),
	    (int)sizeof(in) - 1);
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(
	    hdr_build_response(&b, p, NULL, NULL, NULL, -1, false, false), 0);
	ck_assert_str_eq(built(&b), "HTTP/1.1 204 No Content\r\n"
				    "X-Real-IP: 192.0.2.1\r\n"
				    "Forwarded: for=192.0.2.1\r\n"
				    "X_Client_IP: 192.0.2.1\r\n\r\n");
	hdr_buf_free(&b);
	free(p);
}
END_TEST

/* One X-Forwarded-For element: an address, alone or with a port, in
 * canonical form; anything else refused. */
static const struct {
	const char *in, *out; /* out NULL: refused */
} xff_addrs[] = {
    {"192.0.2.1", "192.0.2.1"},
    {"192.0.2.1:4711", "192.0.2.1"},
    {"2001:db8::1", "2001:db8::1"},
    {"2001:DB8:0::1", "2001:db8::1"},
    {"[2001:db8::1]", "2001:db8::1"},
    {"[2001:db8::1]:443", "2001:db8::1"},
    {"::ffff:192.0.2.9", "192.0.2.9"},
    {"[::ffff:192.0.2.9]:80", "192.0.2.9"},
    {"unknown", NULL},
    {"_hidden", NULL},
    {"proxy.example", NULL},
    {"192.0.2.1:", NULL},
    {"192.0.2.1:0", NULL},
    {"192.0.2.1:65536", NULL},
    {"192.0.2.1:080", NULL},
    {"192.0.2.1:80:80", NULL},
    {"192.0.2.01", NULL},
    {"192.0.2", NULL},
    {"192.0.2.1/24", NULL},
    {"[192.0.2.1]", NULL},
    {"[2001:db8::1", NULL},
    {"[2001:db8::1]x", NULL},
    {"[2001:db8::1]:", NULL},
    {"fe80::1%eth0", NULL},
    {"1.2.3.4 5.6.7.8", NULL},
    {"<script>", NULL},
    {"", NULL},
};

START_TEST(test_xff_addr)
{
	char out[CIDR_STR_MAX];
	const char *in = xff_addrs[_i].in;
	int rc = hdr_xff_addr(in, strlen(in), out);

	if (xff_addrs[_i].out) {
		ck_assert_msg(rc == 0, "%s refused", in);
		ck_assert_str_eq(out, xff_addrs[_i].out);
	} else {
		ck_assert_msg(rc == -EINVAL, "%s accepted", in);
	}
}
END_TEST

/* A trusted peer's X-Forwarded-For: kept from the right up to the first
 * element that is not an address, written canonically, then the peer. */
static const struct {
	const char *fields; /* the request's X-Forwarded-For lines */
	const char *want;   /* the value sent on */
	size_t dropped;
} xff_lists[] = {
    {"", "192.0.2.7", 0},
    {"X-Forwarded-For: 203.0.113.5\r\n", "203.0.113.5, 192.0.2.7", 0},
    {"X-Forwarded-For: 10.0.0.1\r\nX-Forwarded-For: 10.0.0.2\r\n",
     "10.0.0.1, 10.0.0.2, 192.0.2.7", 0},
    {"X-Forwarded-For: 10.0.0.1,10.0.0.2 ,\t[2001:DB8::5]:80\r\n",
     "10.0.0.1, 10.0.0.2, 2001:db8::5, 192.0.2.7", 0},
    /* empty elements are no elements */
    {"X-Forwarded-For: , 10.0.0.1,, \r\nX-Forwarded-For:\r\n",
     "10.0.0.1, 192.0.2.7", 0},
    /* garbage on the left (a client's): cut there, the right end kept */
    {"X-Forwarded-For: 6.6.6.6, evil, 203.0.113.5\r\n",
     "203.0.113.5, 192.0.2.7", 2},
    {"X-Forwarded-For: <script>\r\nX-Forwarded-For: 203.0.113.5:1\r\n",
     "203.0.113.5, 192.0.2.7", 1},
    /* the last element bad: nothing of the list is believed */
    {"X-Forwarded-For: 203.0.113.5, unknown\r\n", "192.0.2.7", 2},
    {"X-Forwarded-For: 1.2.3.4 5.6.7.8\r\n", "192.0.2.7", 1},
};

START_TEST(test_xff_append)
{
	char in[512], want[256];
	struct h1_request *r;
	struct hdr_buf b;
	int n;

	n = snprintf(in, sizeof(in), "GET / HTTP/1.1\r\nHost: a\r\n%s\r\n",
		     xff_lists[_i].fields);
	r = parse(in, (size_t)n);
	hdr_buf_init(&b, 0);
	ck_assert_uint_eq(hdr_xff_append(&b, &r->h, "192.0.2.7"),
			  xff_lists[_i].dropped);
	snprintf(want, sizeof(want), "X-Forwarded-For: %s\r\n",
		 xff_lists[_i].want);
	ck_assert_str_eq(built(&b), want);
	hdr_buf_free(&b);

	/* an untrusted peer's is replaced, whatever it says */
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_xff_replace(&b, "192.0.2.7"), 0);
	ck_assert_str_eq(built(&b), "X-Forwarded-For: 192.0.2.7\r\n");
	hdr_buf_free(&b);
	free(r);
}
END_TEST

/* The client a trusted peer's list names (trusted: 10.0.0.0/8 and
 * 2001:db8:1::/48): the rightmost address outside them; all inside: the
 * leftmost of the run; none when the last element is not an address. */
static const struct {
	const char *fields;
	const char *want; /* NULL: -ENOENT */
} xff_clients[] = {
    {"", NULL},
    {"X-Forwarded-For: 203.0.113.5\r\n", "203.0.113.5"},
    {"X-Forwarded-For: 203.0.113.5, 10.0.0.1\r\n", "203.0.113.5"},
    {"X-Forwarded-For: 198.51.100.1, 203.0.113.5, 10.0.0.1, 10.0.0.2\r\n",
     "203.0.113.5"},
    {"X-Forwarded-For: 203.0.113.5\r\nX-Forwarded-For: 10.0.0.1\r\n",
     "203.0.113.5"},
    {"X-Forwarded-For: 10.0.0.7, 10.0.0.1\r\n", "10.0.0.7"},
    {"X-Forwarded-For: evil, 10.0.0.7, 10.0.0.1\r\n", "10.0.0.7"},
    {"X-Forwarded-For: 203.0.113.5, unknown\r\n", NULL},
    {"X-Forwarded-For: [2001:DB8:1::9]:443, [2001:db8:2::1]:80\r\n",
     "2001:db8:2::1"},
    {"X-Forwarded-For: ::ffff:203.0.113.9\r\n", "203.0.113.9"},
};

START_TEST(test_xff_client)
{
	struct trusted t;
	char in[512], out[CIDR_STR_MAX];
	struct h1_request *r;
	struct cidr c;
	int n, rc;

	memset(&t, 0, sizeof(t));
	ck_assert_int_eq(trusted_add(&t, "10.0.0.0/8", NULL, NULL), 0);
	ck_assert_int_eq(trusted_add(&t, "2001:db8:1::/48", NULL, NULL), 0);
	n = snprintf(in, sizeof(in), "GET / HTTP/1.1\r\nHost: a\r\n%s\r\n",
		     xff_clients[_i].fields);
	r = parse(in, (size_t)n);
	rc = hdr_xff_client(&r->h, &t, out, &c);
	if (!xff_clients[_i].want) {
		ck_assert_int_eq(rc, -ENOENT);
	} else {
		ck_assert_int_eq(rc, 0);
		ck_assert_str_eq(out, xff_clients[_i].want);
		ck_assert_uint_eq(c.family,
				  strchr(out, ':') ? AF_INET6 : AF_INET);
	}
	free(r);
}
END_TEST

START_TEST(test_build_upgrade)
{
	struct h1_request *r =
	    parse(S("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\n"
		    "Upgrade: websocket\r\nSec-WebSocket-Key: k\r\n\r\n"));
	struct hdr_fwd f = {.content_length = -1, .tunnel = true};
	struct hdr_buf b;

	ck_assert(r->upgrade);
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_build_request(&b, r, &f), 0);
	ck_assert_str_eq(built(&b), "GET /ws HTTP/1.1\r\nHost: a\r\n"
				    "Upgrade: websocket\r\n"
				    "Sec-WebSocket-Key: k\r\n"
				    "X-Forwarded-Host: a\r\n"
				    "Connection: upgrade\r\n\r\n");
	hdr_buf_free(&b);
	f.tunnel = false;
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_build_request(&b, r, &f), 0);
	ck_assert_ptr_null(strstr(built(&b), "pgrade"));
	hdr_buf_free(&b);
	free(r);

	r = parse(S("GET / HTTP/1.0\r\n\r\n"));
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_build_request(&b, r, &f), 0);
	ck_assert_str_eq(built(&b), "GET / HTTP/1.1\r\nHost: \r\n\r\n");
	hdr_buf_free(&b);
	free(r);
}
END_TEST

START_TEST(test_build_response)
{
	static const char in[] = "HTTP/1.1 200 OK\r\n"
				 "Connection: keep-alive, X-Hop\r\n"
				 "X-Hop: 1\r\n"
				 "Transfer-Encoding: chunked\r\n"
				 "X-Request-ID: upstream\r\n"
				 "traceparent: " TP_OK "\r\n"
				 "tracestate: up=1\r\n"
				 "Content-Type: text/html\r\n\r\n";
	struct h1_response *p = malloc(sizeof(*p));
	struct hdr_buf b;

	ck_assert_ptr_nonnull(p);
	h1_response_init(p);
	ck_assert_int_eq(
	    h1_parse_response(in, sizeof(in) - 1, NULL, H1_M_GET, false, p),
	    (int)sizeof(in) - 1);
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(
	    hdr_build_response(&b, p, "rid",
			       "X-Content-Type-Options: nosniff\r\n", NULL, -1,
			       true, false),
	    0);
	/* a response's trace context is the upstream's to send */
	ck_assert_str_eq(built(&b), "HTTP/1.1 200 OK\r\n"
				    "traceparent: " TP_OK "\r\n"
				    "tracestate: up=1\r\n"
				    "Content-Type: text/html\r\n"
				    "X-Request-ID: rid\r\n"
				    "X-Content-Type-Options: nosniff\r\n"
				    "Transfer-Encoding: chunked\r\n\r\n");
	hdr_buf_free(&b);
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(
	    hdr_build_response(&b, p, NULL, NULL, NULL, -1, false, true), 0);
	ck_assert_str_eq(built(&b), "HTTP/1.1 200 OK\r\n"
				    "traceparent: " TP_OK "\r\n"
				    "tracestate: up=1\r\n"
				    "Content-Type: text/html\r\n"
				    "Connection: close\r\n\r\n");
	hdr_buf_free(&b);
	free(p);
}
END_TEST

START_TEST(test_fmt_u64)
{
	static const uint64_t v[] = {0,
				     1,
				     9,
				     10,
				     99,
				     100,
				     615,
				     4294967295ull,
				     4294967296ull,
				     999999999999999999ull,
				     1000000000000000000ull,
				     (uint64_t)INT64_MAX,
				     UINT64_MAX};
	char out[HDR_U64_MAX + 1], want[32];
	size_t i, n;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		memset(out, 'x', sizeof(out));
		n = hdr_fmt_u64(out, v[i]);
		snprintf(want, sizeof(want), "%" PRIu64, v[i]);
		ck_assert_uint_eq(n, strlen(want));
		ck_assert_int_eq(out[n], 'x'); /* nothing written past it */
		out[n] = '\0';
		ck_assert_str_eq(out, want);
	}
}
END_TEST

/* Fields named in Connection go, also past the elements the builder
 * gathers up front (more than 8 of them) and names like "close". */
START_TEST(test_build_connection_names)
{
	static const char in[] = "HTTP/1.1 200 OK\r\n"
				 "Connection: a1, a2, a3, a4, a5, close\r\n"
				 "Close: x\r\n"
				 "A1: x\r\n"
				 "Keep: y\r\n"
				 "Connection: b1,b2 , b3,\t b4\r\n"
				 "B4: x\r\n"
				 "B5: y\r\n"
				 "Content-Length: 615\r\n\r\n";
	struct h1_response *p = malloc(sizeof(*p));
	struct hdr_buf b;

	ck_assert_ptr_nonnull(p);
	h1_response_init(p);
	ck_assert_int_eq(
	    h1_parse_response(in, sizeof(in) - 1, NULL, H1_M_GET, false, p),
	    (int)sizeof(in) - 1);
	ck_assert(hdr_named_in_connection(&p->h, S("CLOSE")));
	ck_assert(hdr_named_in_connection(&p->h, S("b4")));
	ck_assert(!hdr_named_in_connection(&p->h, S("b5")));
	ck_assert(!hdr_named_in_connection(&p->h, "", 0));
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_build_response(&b, p, "rid", NULL, NULL,
					    p->h.content_length, false, false),
			 0);
	ck_assert_str_eq(built(&b), "HTTP/1.1 200 OK\r\n"
				    "Keep: y\r\n"
				    "B5: y\r\n"
				    "X-Request-ID: rid\r\n"
				    "Content-Length: 615\r\n\r\n");
	hdr_buf_free(&b);
	free(p);
}
END_TEST

START_TEST(test_via)
{
	static const char in[] =
	    "GET / HTTP/1.1\r\n"
	    "Host: a.example\r\n"
	    "via: 1.0 fred, 1.1 p.example\r\n"
	    "Via:1.1 other (edge) ,\t2 edge-a.b_c (edge) \r\n"
	    "\r\n";
	struct h1_request *r = parse(in, sizeof(in) - 1);
	struct hdr_fwd f = {.via = "me (edge)", .content_length = -1};
	struct hdr_buf b;
	char via[HDR_VIA_MAX];

	/* a member is matched whatever its received-protocol: a request
	 * that came back over HTTP/1.1 after edge took it over HTTP/2 */
	hdr_via_init(via, sizeof(via), "edge-a.b_c");
	ck_assert_str_eq(via, "edge-a.b_c (edge)");
	ck_assert(hdr_via_has(&r->h, via));
	ck_assert(hdr_via_has(&r->h, "fred"));
	ck_assert(hdr_via_has(&r->h, "p.example"));
	ck_assert(!hdr_via_has(&r->h, "1.0 fred"));
	ck_assert(!hdr_via_has(&r->h, "other"));
	hdr_via_init(via, sizeof(via), "edge a,b");
	ck_assert_str_eq(via, "edge-a-b (edge)");
	ck_assert(!hdr_via_has(&r->h, via));
	hdr_via_init(via, 16, "a-long-host-name");
	ck_assert_str_eq(via, "a-long-h (edge)");
	/* the client's Via fields are kept, edge's member follows them,
	 * its received-protocol the client's version (1.1 when unsaid) */
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_build_request(&b, r, &f), 0);
	ck_assert_ptr_nonnull(strstr(built(&b),
				     "Via: 1.1 other (edge) ,\t2 "
				     "edge-a.b_c (edge)\r\nVia: 1.1 me "
				     "(edge)\r\n"));
	hdr_buf_free(&b);
	f.via_proto = "2";
	hdr_buf_init(&b, 0);
	ck_assert_int_eq(hdr_build_request(&b, r, &f), 0);
	ck_assert_ptr_nonnull(strstr(built(&b), "\r\nVia: 2 me (edge)\r\n"));
	hdr_buf_free(&b);
	free(r);
}
END_TEST

START_TEST(test_extra_append)
{
	char buf[64];
	size_t n = 0;

	hdr_extra_append(buf, sizeof(buf), &n, "X-A", "b");
	hdr_extra_append(buf, sizeof(buf), &n, "Referrer-Policy",
			 "no-referrer");
	ck_assert_str_eq(buf, "X-A: b\r\nReferrer-Policy: no-referrer\r\n");
	ck_assert_uint_eq(n, strlen(buf));
	/* "X-A: b\r\n" and its NUL fill 9 bytes exactly */
	n = 0;
	hdr_extra_append(buf, 9, &n, "X-A", "b");
	ck_assert_uint_eq(n, 8);
	ck_assert_str_eq(buf, "X-A: b\r\n");
	n = 0;
	hdr_extra_append(buf, 8, &n, "X-A", "b");
	ck_assert_uint_eq(n, 8); /* did not fit: n == cap */
	hdr_extra_append(buf, 8, &n, "X", "");
	ck_assert_uint_eq(n, 8);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hdr");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_sets);
	tcase_add_test(tc, test_request_id);
	tcase_add_test(tc, test_request_id_get);
	tcase_add_test(tc, test_traceparent_parse);
	tcase_add_test(tc, test_trace_init);
	tcase_add_test(tc, test_build_request_trace);
	tcase_add_test(tc, test_buf_cap);
	tcase_add_test(tc, test_build_request);
	tcase_add_test(tc, test_build_request_addr_fields);
	tcase_add_test(tc, test_build_request_early_data);
	tcase_add_test(tc, test_build_response_addr_fields);
	tcase_add_test(tc, test_build_upgrade);
	tcase_add_loop_test(tc, test_xff_addr, 0,
			    sizeof(xff_addrs) / sizeof(xff_addrs[0]));
	tcase_add_loop_test(
	    tc, test_xff_client, 0,
	    (int)(sizeof(xff_clients) / sizeof(xff_clients[0])));
	tcase_add_loop_test(tc, test_xff_append, 0,
			    sizeof(xff_lists) / sizeof(xff_lists[0]));
	tcase_add_test(tc, test_build_response);
	tcase_add_test(tc, test_fmt_u64);
	tcase_add_test(tc, test_extra_append);
	tcase_add_test(tc, test_via);
	tcase_add_test(tc, test_build_connection_names);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
