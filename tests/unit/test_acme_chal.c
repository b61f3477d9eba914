/* SPDX-License-Identifier: BSD-2-Clause */
/* test_acme_chal.c - the ACME challenges edged answers
 * (userspace/acme_chal.c): http-01 by token and the request's host (a
 * port, a trailing dot and case ignored, another name or an IPv6
 * literal not answered), refusals of bad entries, the database's set
 * replacing only its own entries, the table's bound, ALPN lists offering
 * "acme-tls/1", and a tls-alpn-01 entry's context serving a certificate
 * for its name with the acmeIdentifier extension. The answers over the
 * wire are tests/integration/test_edged_acme.sh's. */
#include <check.h>
#include <errno.h>
#include <openssl/x509v3.h>
#include <string.h>

#include "acme_chal.h"
#include "unit.h"

#define TOK "Tok-en_0123456789abcdefABCDEF"
#define KA TOK ".thumbPRINT-_0123456789"

static void teardown(void)
{
	acme_chal_clear();
}

static struct acme_chal_row row(const char *name, enum acme_chal_type t,
				const char *token, const char *ka)
{
	struct acme_chal_row r = {name, t, token, ka};

	return r;
}

START_TEST(test_http)
{
	struct acme_chal_row r =
	    row("a.example.com", ACME_CHAL_HTTP01, TOK, KA);
	char buf[512];
	size_t l, d;

	ck_assert_int_eq(acme_chal_add(ACME_CHAL_LOCAL, &r), 0);
#define ASK(host, tok)                                                         \
	acme_chal_http(host, strlen(host), tok, strlen(tok), buf, sizeof(buf))
	ck_assert_int_eq(ASK("a.example.com", TOK), (ssize_t)strlen(KA));
	ck_assert_str_eq(buf, KA);
	ck_assert_int_eq(ASK("A.Example.COM:8080", TOK), (ssize_t)strlen(KA));
	ck_assert_int_eq(ASK("a.example.com.", TOK), (ssize_t)strlen(KA));
	ck_assert_int_eq(ASK("b.example.com", TOK), -ENOENT);
	ck_assert_int_eq(ASK("a.example.co", TOK), -ENOENT);
	ck_assert_int_eq(ASK("[::1]:80", TOK), -ENOENT);
	ck_assert_int_eq(ASK("a.example.com", TOK "x"), -ENOENT);
	ck_assert_int_eq(ASK("a.example.com", "Tok"), -ENOENT);
	/* too small a buffer: not answered, never cut */
	ck_assert_int_eq(
	    acme_chal_http("a.example.com", 13, TOK, strlen(TOK), buf, 8),
	    -ENOENT);
	/* a tls-alpn-01 entry is no http-01 answer */
	r = row("c.example.com", ACME_CHAL_TLSALPN01, "T2", "T2.x");
	ck_assert_int_eq(acme_chal_add(ACME_CHAL_LOCAL, &r), 0);
	ck_assert_int_eq(ASK("c.example.com", "T2"), -ENOENT);
	acme_chal_counts(&l, &d);
	ck_assert_uint_eq(l, 2);
	ck_assert_uint_eq(d, 0);
	acme_chal_remove(ACME_CHAL_LOCAL, TOK);
	ck_assert_int_eq(ASK("a.example.com", TOK), -ENOENT);
	acme_chal_remove(ACME_CHAL_DB, "T2"); /* another origin's: kept */
	acme_chal_counts(&l, &d);
	ck_assert_uint_eq(l, 1);
#undef ASK
}
END_TEST

START_TEST(test_refused)
{
	static const struct {
		const char *name, *token, *ka;
	} bad[] = {
	    {"*.example.com", TOK, KA},	       /* a wildcard */
	    {"Upper.example", TOK, KA},	       /* not lowercase */
	    {"a.example.com", "", ""},	       /* no token */
	    {"a.example.com", "a/b", "a/b.x"}, /* not base64url */
	    {"a.example.com", TOK, "other.x"}, /* not TOKEN.X */
	    {"a.example.com", TOK, TOK "."},   /* no thumbprint */
	    {"a.example.com", TOK, TOK ".a b"}, {NULL, TOK, KA},
	};
	struct acme_chal_row r;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = row(bad[i].name, ACME_CHAL_HTTP01, bad[i].token, bad[i].ka);
		ck_assert_msg(acme_chal_add(ACME_CHAL_LOCAL, &r) == -EINVAL,
			      "case %zu", i);
	}
	r = row("a.example.com", (enum acme_chal_type)7, TOK, KA);
	ck_assert_int_eq(acme_chal_add(ACME_CHAL_LOCAL, &r), -EINVAL);
	ck_assert_int_eq(acme_chal_type_parse("http-01"), ACME_CHAL_HTTP01);
	ck_assert_int_eq(acme_chal_type_parse("tls-alpn-01"),
			 ACME_CHAL_TLSALPN01);
	ck_assert_int_eq(acme_chal_type_parse("dns-01"), -1);
	ck_assert_int_eq(acme_chal_type_parse(NULL), -1);
}
END_TEST

START_TEST(test_db_set)
{
	struct acme_chal_row
	    local = row("l.example", ACME_CHAL_HTTP01, "L", "L.k"),
	    v[3] = {row("d1.example", ACME_CHAL_HTTP01, "D1", "D1.k"),
		    row("bad name", ACME_CHAL_HTTP01, "D2", "D2.k"),
		    row("d3.example", ACME_CHAL_HTTP01, "D3", "D3.k")};
	char buf[64];
	size_t skipped = 99, l, d;

	/* an empty table and an empty (or all refused) set: no error */
	ck_assert_int_eq(acme_chal_set_db(NULL, 0, &skipped), 0);
	ck_assert_uint_eq(skipped, 0);
	ck_assert_int_eq(acme_chal_set_db(v + 1, 1, &skipped), 0);
	ck_assert_uint_eq(skipped, 1);
	ck_assert_int_eq(acme_chal_add(ACME_CHAL_LOCAL, &local), 0);
	ck_assert_int_eq(acme_chal_set_db(v, 3, &skipped), 0);
	ck_assert_uint_eq(skipped, 1); /* the bad one alone */
	acme_chal_counts(&l, &d);
	ck_assert_uint_eq(l, 1);
	ck_assert_uint_eq(d, 2);
	ck_assert_int_eq(
	    acme_chal_http("d3.example", 10, "D3", 2, buf, sizeof(buf)), 4);
	/* the next set replaces the database's, never the local ones */
	ck_assert_int_eq(acme_chal_set_db(v, 1, &skipped), 0);
	ck_assert_uint_eq(skipped, 0);
	ck_assert_int_eq(
	    acme_chal_http("d3.example", 10, "D3", 2, buf, sizeof(buf)),
	    -ENOENT);
	ck_assert_int_eq(
	    acme_chal_http("l.example", 9, "L", 1, buf, sizeof(buf)), 3);
	ck_assert_int_eq(acme_chal_set_db(NULL, 0, NULL), 0);
	acme_chal_counts(&l, &d);
	ck_assert_uint_eq(l, 1);
	ck_assert_uint_eq(d, 0);
}
END_TEST

START_TEST(test_bound)
{
	char tok[32], ka[40];
	struct acme_chal_row r;
	size_t i;

	for (i = 0; i < ACME_CHAL_MAX; i++) {
		snprintf(tok, sizeof(tok), "t%zu", i);
		snprintf(ka, sizeof(ka), "t%zu.k", i);
		r = row("a.example", ACME_CHAL_HTTP01, tok, ka);
		ck_assert_int_eq(acme_chal_add(ACME_CHAL_LOCAL, &r), 0);
	}
	r = row("a.example", ACME_CHAL_HTTP01, "over", "over.k");
	ck_assert_int_eq(acme_chal_add(ACME_CHAL_LOCAL, &r), -ENOSPC);
	/* the same token again replaces, needs no room */
	r = row("a.example", ACME_CHAL_HTTP01, "t0", "t0.new");
	ck_assert_int_eq(acme_chal_add(ACME_CHAL_LOCAL, &r), 0);
}
END_TEST

START_TEST(test_alpn_list)
{
	static const unsigned char only[] = "\x00\x0b\x0a"
					    "acme-tls/1",
				   both[] = "\x00\x0e\x02h2\x0a"
					    "acme-tls/1",
				   none[] = "\x00\x0c\x02h2\x08http/1.1",
				   cut[] = "\x00\x0b\x0a"
					   "acme-tls/",
				   lenbad[] = "\x00\x0c\x0a"
					      "acme-tls/1",
				   zero[] = "\x00\x01\x00";

	ck_assert(acme_chal_alpn_offered(only, sizeof(only) - 1));
	ck_assert(acme_chal_alpn_offered(both, sizeof(both) - 1));
	ck_assert(!acme_chal_alpn_offered(none, sizeof(none) - 1));
	ck_assert(!acme_chal_alpn_offered(cut, sizeof(cut) - 1));
	ck_assert(!acme_chal_alpn_offered(lenbad, sizeof(lenbad) - 1));
	ck_assert(!acme_chal_alpn_offered(zero, sizeof(zero) - 1));
	ck_assert(!acme_chal_alpn_offered(only, 1));
}
END_TEST

START_TEST(test_alpn_ctx)
{
	struct acme_chal_row r =
	    row("t.example.com", ACME_CHAL_TLSALPN01, TOK, KA);
	ASN1_OBJECT *oid = OBJ_txt2obj("1.3.6.1.5.5.7.1.31", 1);
	SSL_CTX *ctx;
	X509 *x;

	ck_assert_int_eq(acme_chal_add(ACME_CHAL_DB, &r), 0);
	ck_assert_ptr_null(acme_chal_alpn_ctx("u.example.com", 13));
	ctx = acme_chal_alpn_ctx("T.example.COM.", 14);
	ck_assert_ptr_nonnull(ctx);
	x = SSL_CTX_get0_certificate(ctx);
	ck_assert_ptr_nonnull(x);
	ck_assert_int_eq(X509_check_host(x, "t.example.com", 0, 0, NULL), 1);
	ck_assert_int_ge(X509_get_ext_by_OBJ(x, oid, -1), 0);
	/* the reference outlives the entry */
	acme_chal_clear();
	ck_assert_ptr_nonnull(SSL_CTX_get0_certificate(ctx));
	SSL_CTX_free(ctx);
	ASN1_OBJECT_free(oid);
}
END_TEST

static Suite *acme_chal_suite(void)
{
	Suite *s = suite_create("acme_chal");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, test_http);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_db_set);
	tcase_add_test(tc, test_bound);
	tcase_add_test(tc, test_alpn_list);
	tcase_add_test(tc, test_alpn_ctx);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(acme_chal_suite());
}
