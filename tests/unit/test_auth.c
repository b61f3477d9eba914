/* SPDX-License-Identifier: BSD-2-Clause */
/* test_auth.c - the credential gate's pieces (userspace/auth.c,
 * userspace/b64url.c): base64url both ways and its refusals, API key
 * files (and every way a line is refused), keys found by hash from either
 * field, JWTs checked with an RSA, an EC P-256 and an Ed25519 key made
 * here and an HMAC key of a JWKS (every claim check, alg none, a public
 * key used as an HMAC secret, kid), copied claims and what is left out,
 * the reserved request fields. */
#include <check.h>
#include <arpa/inet.h>
#include <errno.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth.h"
#include "b64url.h"
#include "fauth.h"
#include "h1.h"
#include "kcache.h"
#include "unit.h"

START_TEST(test_b64url)
{
	uint8_t in[64], dec[64];
	char enc[100];
	size_t n, i;

	for (i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)(i * 37 + 11);
	for (n = 0; n <= sizeof(in); n++) {
		b64url_encode(in, n, enc);
		ck_assert_uint_eq(strlen(enc), B64URL_LEN(n));
		ck_assert_int_eq(b64url_decode(enc, strlen(enc), dec), (long)n);
		ck_assert_mem_eq(dec, in, n);
	}
	ck_assert_int_eq(b64url_decode("AQAB", 4, dec), 3);
	ck_assert_int_eq(b64url_decode("AQ==", 4, dec), -1);  /* padding */
	ck_assert_int_eq(b64url_decode("A+/B", 4, dec), -1);  /* base64 */
	ck_assert_int_eq(b64url_decode("AQABA", 5, dec), -1); /* n % 4 */
	ck_assert_int_eq(b64url_decode("AR", 2, dec), -1);    /* stray bits */
	ck_assert_int_eq(b64url_decode("AQ", 2, dec), 1);
}
END_TEST

/* ---- helpers --------------------------------------------------------------
 */

static struct h1_head head;

static void head_set(const char *n1, const char *v1, const char *n2,
		     const char *v2)
{
	memset(&head, 0, sizeof(head));
	if (n1) {
		head.headers[head.nheaders].name = n1;
		head.headers[head.nheaders].name_len = strlen(n1);
		head.headers[head.nheaders].value = v1;
		head.headers[head.nheaders++].value_len = strlen(v1);
	}
	if (n2) {
		head.headers[head.nheaders].name = n2;
		head.headers[head.nheaders].name_len = strlen(n2);
		head.headers[head.nheaders].value = v2;
		head.headers[head.nheaders++].value_len = strlen(v2);
	}
}

static char bearer_buf[AUTH_TOKEN_MAX + 64];

static enum auth_result check_bearer(const struct auth_gate *g, const char *t,
				     struct auth_out *out)
{
	snprintf(bearer_buf, sizeof(bearer_buf), "Bearer %s", t);
	head_set("Authorization", bearer_buf, NULL, NULL);
	return auth_check(g, &head, (uint64_t)time(NULL), out);
}

static enum auth_result check_t(const struct auth_gate *g, const char *t)
{
	struct auth_out out;
	enum auth_result r = check_bearer(g, t, &out);

	free(out.fields);
	return r;
}

static const char *sha_hex(const char *key)
{
	static char hex[65];
	uint8_t md[32];
	int i;

	SHA256((const uint8_t *)key, strlen(key), md);
	for (i = 0; i < 32; i++)
		sprintf(hex + 2 * i, "%02x", md[i]);
	return hex;
}

/* What auth_gate_json says g takes: its API keys and its JWT keys, -1
 * where it takes none. */
static long gate_count(const struct auth_gate *g, bool jwt)
{
	json_t *j = auth_gate_json(g);
	const json_t *v =
	    jwt ? json_object_get(json_object_get(j, "jwt"), "keys")
		: json_object_get(j, "api_keys");
	long n = json_is_integer(v) ? (long)json_integer_value(v) : -1;

	json_decref(j);
	return n;
}

/* ---- API keys -------------------------------------------------------------
 */

START_TEST(test_api_keys)
{
	struct auth_gate *g = auth_gate_new();
	struct auth_out out;
	struct errbuf e;
	char file[512];
	static const struct {
		const char *text, *why;
	} bad[] = {
	    {"ci\n", "64 hex"},
	    {"ci zz\n", "64 hex"},
	    {"c/i "
	     "0000000000000000000000000000000000000000000000000000000000000000",
	     "a name of"},
	    {"ci "
	     "000000000000000000000000000000000000000000000000000000000000000g",
	     "hex digits"},
	    {"a "
	     "0000000000000000000000000000000000000000000000000000000000000000"
	     "\n"
	     "b "
	     "0000000000000000000000000000000000000000000000000000000000000000",
	     "same hash"},
	    {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	     " "
	     "0000000000000000000000000000000000000000000000000000000000000000",
	     "at most 63"},
	};
	size_t i;

	ck_assert_ptr_nonnull(g);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(
		    auth_gate_api_keys(g, bad[i].text, strlen(bad[i].text), &e),
		    -EINVAL);
		ck_assert_msg(strstr(e.msg, bad[i].why), "%s: %s", bad[i].text,
			      e.msg);
	}
	ck_assert_int_eq(gate_count(g, false), -1);
	snprintf(file, sizeof(file), "# keys\r\n\r\n  ci %s \r\n",
		 sha_hex("secret-ci"));
	snprintf(file + strlen(file), sizeof(file) - strlen(file),
		 "deploy.bot@x\t%s", sha_hex("secret-deploy"));
	ck_assert_int_eq(auth_gate_api_keys(g, file, strlen(file), &e), 0);
	ck_assert_int_eq(gate_count(g, false), 2);

	head_set("X-Api-Key", "secret-ci", NULL, NULL);
	ck_assert_int_eq(auth_check(g, &head, 0, &out), AUTH_R_OK);
	ck_assert_int_eq(out.method, AUTH_M_API_KEY);
	ck_assert_str_eq(out.fields, "X-Api-Key-Name: ci\r\n");
	free(out.fields);
	ck_assert_int_eq(check_bearer(g, "secret-deploy", &out), AUTH_R_OK);
	ck_assert_str_eq(out.fields, "X-Api-Key-Name: deploy.bot@x\r\n");
	free(out.fields);
	ck_assert_int_eq(check_t(g, "secret-cj"), AUTH_R_UNKNOWN_KEY);
	ck_assert_int_eq(check_t(g, sha_hex("secret-ci")), AUTH_R_UNKNOWN_KEY);
	ck_assert_int_eq(check_t(g, "a.b.c"), AUTH_R_UNKNOWN_KEY);
	head_set(NULL, NULL, NULL, NULL);
	ck_assert_int_eq(auth_check(g, &head, 0, &out), AUTH_R_MISSING);
	ck_assert_int_eq(out.method, AUTH_M_NONE);
	ck_assert_ptr_null(out.fields);
	head_set("X-Api-Key", "secret-ci", "x-api-key", "secret-ci");
	ck_assert_int_eq(auth_check(g, &head, 0, &out), AUTH_R_MALFORMED);
	head_set("Authorization", "Basic Y2k6eA==", NULL, NULL);
	ck_assert_int_eq(auth_check(g, &head, 0, &out), AUTH_R_MALFORMED);
	head_set("X-Api-Key", "secret ci", NULL, NULL);
	ck_assert_int_eq(auth_check(g, &head, 0, &out), AUTH_R_MALFORMED);
	/* an empty list refuses every key */
	ck_assert_int_eq(auth_gate_api_keys(g, "# none\n", 7, &e), 0);
	ck_assert_int_eq(check_t(g, "secret-ci"), AUTH_R_UNKNOWN_KEY);
	auth_gate_put(g);

	ck_assert(auth_field_reserved("x-jwt-claim-sub", 15));
	ck_assert(auth_field_reserved("X-API-KEY-NAME", 14));
	ck_assert(!auth_field_reserved("X-Api-Key", 9));
	ck_assert(!auth_field_reserved("X-Jwt-Clai", 10));
	ck_assert(auth_field_reserved("X_Jwt_Claim_sub", 15));
	ck_assert(auth_field_reserved("x_api-key_name", 14));
}
END_TEST

/* ---- JWTs -----------------------------------------------------------------
 */

/* header.payload signed with k by alg (NULL k: HMAC with secret). */
static char *jwt_make(const char *hdr, const char *payload, EVP_PKEY *k,
		      const char *alg, const uint8_t *secret, size_t slen)
{
	static char t[4096];
	uint8_t sig[1024], raw[132];
	size_t sl = sizeof(sig), n;
	char *p;

	b64url_encode((const uint8_t *)hdr, strlen(hdr), t);
	n = strlen(t);
	t[n++] = '.';
	b64url_encode((const uint8_t *)payload, strlen(payload), t + n);
	n = strlen(t);
	if (!k && secret) {
		unsigned ml = 0;

		HMAC(EVP_sha256(), secret, (int)slen, (const uint8_t *)t, n,
		     sig, &ml);
		sl = ml;
	} else if (k) {
		EVP_MD_CTX *c = EVP_MD_CTX_new();
		const EVP_MD *md =
		    strcmp(alg, "EdDSA") == 0 ? NULL : EVP_sha256();

		ck_assert_int_eq(EVP_DigestSignInit(c, NULL, md, NULL, k), 1);
		ck_assert_int_eq(EVP_DigestSign(c, sig, &sl, (uint8_t *)t, n),
				 1);
		EVP_MD_CTX_free(c);
		if (strcmp(alg, "ES256") == 0) { /* DER to r || s */
			const uint8_t *d = sig;
			ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &d, (long)sl);
			const BIGNUM *r, *s;

			ECDSA_SIG_get0(es, &r, &s);
			BN_bn2binpad(r, raw, 32);
			BN_bn2binpad(s, raw + 32, 32);
			ECDSA_SIG_free(es);
			memcpy(sig, raw, 64);
			sl = 64;
		}
	} else {
		sl = 0;
	}
	t[n++] = '.';
	b64url_encode(sig, sl, t + n);
	p = t;
	return p;
}

static char *pubpem(EVP_PKEY *k, size_t *len)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *d, *out;
	long n;

	ck_assert_int_eq(PEM_write_bio_PUBKEY(b, k), 1);
	n = BIO_get_mem_data(b, &d);
	out = malloc((size_t)n + 1);
	memcpy(out, d, (size_t)n);
	out[n] = '\0';
	*len = (size_t)n;
	BIO_free(b);
	return out;
}

static char claims[1024];

static const char *cl(long exp_off, const char *extra)
{
	long now = (long)time(NULL);

	snprintf(claims, sizeof(claims),
		 "{\"iss\":\"https://idp\",\"aud\":[\"x\",\"api\"],"
		 "\"sub\":\"u1\",\"exp\":%ld%s}",
		 now + exp_off, extra ? extra : "");
	return claims;
}

START_TEST(test_jwt)
{
	EVP_PKEY *rsa = EVP_RSA_gen(2048), *ec = EVP_EC_gen("P-256");
	EVP_PKEY *ed = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	EVP_PKEY *other = EVP_EC_gen("P-256");
	struct auth_gate *g = auth_gate_new();
	struct auth_out out;
	struct errbuf e;
	const char *pem;
	char *all, *t;
	size_t n1, n2, n3;
	char *p1 = pubpem(rsa, &n1), *p2 = pubpem(ec, &n2),
	     *p3 = pubpem(ed, &n3);
	unsigned algs = AUTH_ALGS_DEFAULT;
	long now = (long)time(NULL);
	char hs[256];

	all = malloc(n1 + n2 + n3 + 1);
	memcpy(all, p1, n1);
	memcpy(all + n1, p2, n2);
	memcpy(all + n1 + n2, p3, n3 + 1);
	ck_assert_int_eq(auth_gate_jwt(g, all, strlen(all),
				       algs | 1u << AUTH_ALG_HS256,
				       "https://idp", "api", 10, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "HMAC needs a JWKS"), "%s", e.msg);
	ck_assert_int_eq(auth_gate_jwt(g, all, strlen(all), algs, "https://idp",
				       "api", 10, &e),
			 0);
	ck_assert_int_eq(gate_count(g, true), 3);
	ck_assert_int_eq(auth_gate_copy_claim(g, "sub", &e), 0);
	ck_assert_int_eq(auth_gate_copy_claim(g, "roles", &e), 0);
	ck_assert_int_eq(auth_gate_copy_claim(g, "note", &e), 0);
	ck_assert_int_eq(auth_gate_copy_claim(g, "SUB", &e), -EINVAL);
	ck_assert_int_eq(auth_gate_copy_claim(g, "a.b", &e), -EINVAL);
	ck_assert_int_eq(auth_gate_copy_claim(g, "", &e), -EINVAL);

	t = jwt_make("{\"alg\":\"RS256\"}", cl(60, ",\"roles\":[1,\"a\"]"), rsa,
		     "RS256", NULL, 0);
	ck_assert_int_eq(check_bearer(g, t, &out), AUTH_R_OK);
	ck_assert_int_eq(out.method, AUTH_M_JWT);
	ck_assert_str_eq(out.fields, "X-Jwt-Claim-sub: u1\r\n"
				     "X-Jwt-Claim-roles: [1,\"a\"]\r\n");
	free(out.fields);
	/* again: from this thread's cache, the same fields; past exp (60
	 * s, leeway 10): expired, whether cached or checked anew */
	ck_assert_int_eq(check_bearer(g, t, &out), AUTH_R_OK);
	ck_assert_str_eq(out.fields, "X-Jwt-Claim-sub: u1\r\n"
				     "X-Jwt-Claim-roles: [1,\"a\"]\r\n");
	free(out.fields);
	ck_assert_int_eq(auth_check(g, &head, (uint64_t)now + 71, &out),
			 AUTH_R_EXPIRED);
	ck_assert_int_eq(auth_check(g, &head, (uint64_t)now + 71, &out),
			 AUTH_R_EXPIRED);
	ck_assert_int_eq(auth_check(g, &head, (uint64_t)now, &out), AUTH_R_OK);
	free(out.fields);
	t = jwt_make("{\"alg\":\"ES256\"}", cl(60, ",\"note\":\"a\\r\\nb\""),
		     ec, "ES256", NULL, 0);
	ck_assert_int_eq(check_bearer(g, t, &out), AUTH_R_OK);
	ck_assert_str_eq(out.fields, "X-Jwt-Claim-sub: u1\r\n"); /* CRLF out */
	free(out.fields);
	t = jwt_make("{\"alg\":\"EdDSA\"}", cl(60, NULL), ed, "EdDSA", NULL, 0);
	ck_assert_int_eq(check_t(g, t), AUTH_R_OK);
	/* the claims */
	t = jwt_make("{\"alg\":\"ES256\"}", cl(-11, NULL), ec, "ES256", NULL,
		     0);
	ck_assert_int_eq(check_t(g, t), AUTH_R_EXPIRED);
	t = jwt_make("{\"alg\":\"ES256\"}", cl(-9, NULL), ec, "ES256", NULL, 0);
	ck_assert_int_eq(check_t(g, t), AUTH_R_OK); /* the leeway */
	snprintf(hs, sizeof(hs), ",\"nbf\":%ld", now + 30);
	t = jwt_make("{\"alg\":\"ES256\"}", cl(60, hs), ec, "ES256", NULL, 0);
	ck_assert_int_eq(check_t(g, t), AUTH_R_NOT_YET_VALID);
	t = jwt_make("{\"alg\":\"ES256\"}",
		     "{\"iss\":\"https://idp\",\"aud\":\"api\"}", ec, "ES256",
		     NULL, 0);
	ck_assert_int_eq(check_t(g, t), AUTH_R_OK); /* no exp: no limit */
	t = jwt_make("{\"alg\":\"ES256\"}",
		     "{\"iss\":\"https://idq\",\"aud\":\"api\"}", ec, "ES256",
		     NULL, 0);
	ck_assert_int_eq(check_t(g, t), AUTH_R_WRONG_ISSUER);
	t = jwt_make("{\"alg\":\"ES256\"}",
		     "{\"iss\":\"https://idp\",\"aud\":[\"apix\"]}", ec,
		     "ES256", NULL, 0);
	ck_assert_int_eq(check_t(g, t), AUTH_R_WRONG_AUDIENCE);
	t = jwt_make("{\"alg\":\"ES256\"}",
		     "{\"iss\":\"https://idp\",\"aud\":\"api\",\"exp\":\"1\"}",
		     ec, "ES256", NULL, 0);
	ck_assert_int_eq(check_t(g, t), AUTH_R_MALFORMED);
	t = jwt_make("{\"alg\":\"ES256\"}", "[1]", ec, "ES256", NULL, 0);
	ck_assert_int_eq(check_t(g, t), AUTH_R_MALFORMED);
	/* the signature */
	t = jwt_make("{\"alg\":\"ES256\"}", cl(60, NULL), other, "ES256", NULL,
		     0);
	ck_assert_int_eq(check_t(g, t), AUTH_R_BAD_SIGNATURE);
	t = jwt_make("{\"alg\":\"RS256\"}", cl(60, NULL), ec, "ES256", NULL, 0);
	ck_assert_int_eq(check_t(g, t), AUTH_R_BAD_SIGNATURE);
	t = jwt_make("{\"alg\":\"none\"}", cl(60, NULL), NULL, "none", NULL, 0);
	ck_assert_int_eq(check_t(g, t), AUTH_R_ALG_REFUSED);
	t = jwt_make("{\"alg\":\"HS256\"}", cl(60, NULL), NULL, "HS256",
		     (const uint8_t *)p1, n1);
	ck_assert_int_eq(check_t(g, t), AUTH_R_ALG_REFUSED);
	t = jwt_make("{\"alg\":\"RS384\"}", cl(60, NULL), rsa, "RS256", NULL,
		     0);
	ck_assert_int_eq(check_t(g, t), AUTH_R_ALG_REFUSED);
	t = jwt_make("{\"alg\":\"ES256\",\"kid\":\"k9\"}", cl(60, NULL), ec,
		     "ES256", NULL, 0);
	ck_assert_int_eq(check_t(g, t),
			 AUTH_R_OK); /* PEM keys have no kid: tried */
	t = jwt_make("{\"alg\":\"ES256\",\"crit\":[\"x\"]}", cl(60, NULL), ec,
		     "ES256", NULL, 0);
	ck_assert_int_eq(check_t(g, t), AUTH_R_MALFORMED);
	t = jwt_make("{\"alg\":\"ES256\",\"alg\":\"none\"}", cl(60, NULL), ec,
		     "ES256", NULL, 0);
	ck_assert_int_eq(check_t(g, t), AUTH_R_MALFORMED); /* duplicate */
	ck_assert_int_eq(check_t(g, "a.b"), AUTH_R_MALFORMED);
	ck_assert_int_eq(check_t(g, "..."), AUTH_R_MALFORMED);
	ck_assert_int_eq(check_t(g, "e30.e30."), AUTH_R_MALFORMED);
	ck_assert_int_eq(check_t(g, "not-a-jwt"), AUTH_R_MALFORMED);
	auth_gate_put(g);

	/* keys that are refused */
	g = auth_gate_new();
	pem = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
	ck_assert_int_eq(
	    auth_gate_jwt(g, pem, strlen(pem), algs, NULL, NULL, 0, &e),
	    -EINVAL);
	ck_assert_msg(strstr(e.msg, "private key"), "%s", e.msg);
	ck_assert_int_eq(auth_gate_jwt(g, "junk", 4, algs, NULL, NULL, 0, &e),
			 -EINVAL);
	ck_assert_int_eq(auth_gate_jwt(g, p1, n1, 1u << AUTH_ALG_RS256, NULL,
				       NULL, AUTH_LEEWAY_MAX_S + 1, &e),
			 -EINVAL);
	ck_assert_int_eq(gate_count(g, true), -1);
	auth_gate_put(g);
	free(p1);
	free(p2);
	free(p3);
	free(all);
	EVP_PKEY_free(rsa);
	EVP_PKEY_free(ec);
	EVP_PKEY_free(ed);
	EVP_PKEY_free(other);
}
END_TEST

START_TEST(test_jwks)
{
	static const uint8_t secret[32] = "0123456789abcdef0123456789abcdef";
	struct auth_gate *g = auth_gate_new();
	struct errbuf e;
	char doc[512], k64[64], *t;
	static const char *const bad[] = {
	    "{\"keys\":{}}",
	    "{\"keys\":[{\"kid\":\"x\"}]}",
	    "{\"keys\":[{\"kty\":\"oct\",\"k\":\"AQAB\"}]}",
	    "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"AQAB\","
	    "\"y\":\"AQAB\"}]}",
	    "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"AQAB\",\"e\":\"AQAB\"}]}",
	    "{\"keys\":[]}",
	    "{\"keys\":[{\"kty\":\"XYZ\"}]}",
	    "{\"keys\":[{\"kty\":\"RSA\",\"use\":\"enc\"}]}",
	    "{\"keys\":[",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(auth_gate_jwt(g, bad[i], strlen(bad[i]),
					    1u << AUTH_ALG_HS256, NULL, NULL, 0,
					    &e) == -EINVAL,
			      "%s", bad[i]);
	/* Ed25519 keys of small order or not canonical: anyone could sign */
	{
		static const char *const weak[] = {
		    /* 0 (order 4), 1 (the neutral), p - 1 (order 2), p + 1 */
		    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		    "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		    "7P_______________________________________38",
		    "7v_______________________________________38",
		};
		EVP_PKEY *ed = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
		uint8_t raw[32];
		size_t rl = sizeof(raw);

		for (i = 0; i < sizeof(weak) / sizeof(weak[0]); i++) {
			snprintf(doc, sizeof(doc),
				 "{\"keys\":[{\"kty\":\"OKP\",\"crv\":"
				 "\"Ed25519\",\"x\":\"%s\"}]}",
				 weak[i]);
			ck_assert_int_eq(auth_gate_jwt(g, doc, strlen(doc),
						       1u << AUTH_ALG_EdDSA,
						       NULL, NULL, 0, &e),
					 -EINVAL);
			ck_assert_msg(strstr(e.msg, "small order"), "%s: %s",
				      weak[i], e.msg);
		}
		ck_assert_int_eq(EVP_PKEY_get_raw_public_key(ed, raw, &rl), 1);
		b64url_encode(raw, rl, k64);
		snprintf(doc, sizeof(doc),
			 "{\"keys\":[{\"kty\":\"OKP\",\"crv\":"
			 "\"Ed25519\",\"x\":\"%s\"}]}",
			 k64);
		ck_assert_int_eq(auth_gate_jwt(g, doc, strlen(doc),
					       1u << AUTH_ALG_EdDSA, NULL, NULL,
					       0, &e),
				 0);
		EVP_PKEY_free(ed);
		auth_gate_put(g);
		g = auth_gate_new();
	}
	b64url_encode(secret, sizeof(secret), k64);
	snprintf(doc, sizeof(doc),
		 " {\"keys\":[{\"kty\":\"oct\",\"kid\":\"h1\",\"alg\":"
		 "\"HS256\",\"k\":\"%s\"},{\"kty\":\"future\"}]}",
		 k64);
	ck_assert_int_eq(auth_gate_jwt(g, doc, strlen(doc),
				       1u << AUTH_ALG_HS256, NULL, NULL, 0, &e),
			 0);
	ck_assert_int_eq(gate_count(g, true), 1);
	t = jwt_make("{\"alg\":\"HS256\",\"kid\":\"h1\"}", "{}", NULL, "HS256",
		     secret, sizeof(secret));
	ck_assert_int_eq(check_t(g, t), AUTH_R_OK);
	t = jwt_make("{\"alg\":\"HS256\"}", "{}", NULL, "HS256", secret,
		     sizeof(secret) - 1);
	ck_assert_int_eq(check_t(g, t), AUTH_R_BAD_SIGNATURE);
	t = jwt_make("{\"alg\":\"HS256\",\"kid\":\"h2\"}", "{}", NULL, "HS256",
		     secret, sizeof(secret));
	ck_assert_int_eq(check_t(g, t), AUTH_R_UNKNOWN_KEY);
	auth_gate_put(g);
}
END_TEST

/* The database's forms: keys row by row, the jwt column's JSON. */
START_TEST(test_db_forms)
{
	struct auth_gate *g = auth_gate_new();
	char name[16];
	struct errbuf e;
	json_t *o;
	int i;

	ck_assert_int_eq(auth_gate_api_keys(g, "", 0, &e), 0);
	ck_assert_int_eq(gate_count(g, false), 0);
	ck_assert_int_eq(check_t(g, "k1"), AUTH_R_UNKNOWN_KEY);
	for (i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "k%d", i);
		ck_assert_int_eq(auth_gate_key_add(g, name, sha_hex(name), &e),
				 0);
	}
	ck_assert_int_eq(auth_gate_key_add(g, "dup", sha_hex("k7"), &e), 0);
	ck_assert_int_eq(auth_gate_key_add(g, "bad", "xyz", &e), -EINVAL);
	ck_assert_int_eq(auth_gate_key_add(g, "a b", sha_hex("q"), &e),
			 -EINVAL);
	ck_assert_uint_eq(auth_gate_keys_seal(g), 1);
	ck_assert_int_eq(gate_count(g, false), 40);
	for (i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "k%d", i);
		ck_assert_int_eq(check_t(g, name), AUTH_R_OK);
	}
	ck_assert_int_eq(check_t(g, "k40"), AUTH_R_UNKNOWN_KEY);
	auth_gate_put(g);

	g = auth_gate_new();
	o = json_pack("{s:{s:[{s:s,s:s,s:s}]},s:s,s:[s],s:s,s:[s]}", "keys",
		      "keys", "kty", "oct", "alg", "HS256", "k",
		      "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY", "audience",
		      "api", "algorithms", "HS256", "leeway", "30s",
		      "copy_claims", "sub");
	ck_assert_int_eq(auth_gate_jwt_json(g, o, &e), 0);
	ck_assert_int_eq(gate_count(g, true), 1);
	json_decref(o);
	o = json_pack("{s:s,s:i}", "keys", "x", "leeway", 5);
	ck_assert_int_eq(auth_gate_jwt_json(g, o, &e), -EINVAL);
	json_decref(o);
	o = json_pack("{s:s,s:s}", "keys", "x", "leeway", "1h");
	ck_assert_int_eq(auth_gate_jwt_json(g, o, &e), -EINVAL);
	json_decref(o);
	o = json_pack("{s:s,s:[s]}", "keys", "x", "algorithms", "none");
	ck_assert_int_eq(auth_gate_jwt_json(g, o, &e), -EINVAL);
	json_decref(o);
	o = json_pack("{s:s,s:s}", "keys", "x", "kid", "y");
	ck_assert_int_eq(auth_gate_jwt_json(g, o, &e), -EINVAL);
	ck_assert_msg(strstr(e.msg, "unknown key"), "%s", e.msg);
	json_decref(o);
	auth_gate_put(g);
}
END_TEST

START_TEST(test_names)
{
	ck_assert_int_eq(auth_alg_parse("EdDSA", 5), AUTH_ALG_EdDSA);
	ck_assert_int_eq(auth_alg_parse("none", 4), -1);
	ck_assert_int_eq(auth_alg_parse("rs256", 5), -1);
	ck_assert_str_eq(auth_alg_name(AUTH_ALG_PS384), "PS384");
	ck_assert_str_eq(auth_method_name(AUTH_M_API_KEY), "api_key");
	ck_assert_str_eq(auth_result_name(AUTH_R_WRONG_AUDIENCE),
			 "wrong_audience");
	auth_count(AUTH_M_JWT, AUTH_R_EXPIRED);
	auth_count(AUTH_M_JWT, AUTH_R_EXPIRED);
	ck_assert_uint_eq(auth_total(AUTH_M_JWT, AUTH_R_EXPIRED), 2);
	ck_assert_str_eq(auth_challenge_header(AUTH_R_MISSING),
			 "Bearer realm=\"edge\"");
	ck_assert(
	    strstr(auth_challenge_header(AUTH_R_EXPIRED), "invalid_token"));
}
END_TEST

/* forward auth's group (fauth.h): the URL's forms and refusals */
START_TEST(test_fauth_conf)
{
	struct fauth_conf *c;
	struct errbuf e;
	json_t *j;

	ck_assert_int_eq(fauth_conf_new("http://127.0.0.1/", 1000, 60, &c, &e),
			 0);
	ck_assert_str_eq(c->authority, "127.0.0.1");
	ck_assert_str_eq(c->path, "/");
	ck_assert_uint_eq(ntohs(((struct sockaddr_in *)&c->addr)->sin_port),
			  80);
	fauth_conf_free(c);
	ck_assert_int_eq(
	    fauth_conf_new("http://[::1]:9000/a/check?x=1", 500, 0, &c, &e), 0);
	ck_assert_str_eq(c->authority, "[::1]:9000");
	ck_assert_str_eq(c->path, "/a/check?x=1");
	ck_assert_int_eq(c->addr.ss_family, AF_INET6);
	ck_assert_int_eq(fauth_conf_copy(c, "X-User", &e), 0);
	ck_assert(fauth_field_copied(c, "x-user", 6));
	ck_assert(fauth_field_copied(c, "X-USER", 6));
	ck_assert(!fauth_field_copied(c, "x-use", 5));
	ck_assert_int_eq(fauth_conf_copy(c, "Transfer-Encoding", &e), -EINVAL);
	ck_assert_int_eq(fauth_conf_copy(c, "Host", &e), -EINVAL);
	ck_assert_int_eq(fauth_conf_copy(c, "a b", &e), -EINVAL);
	ck_assert_int_eq(fauth_conf_copy(c, "", &e), -EINVAL);
	j = fauth_conf_json(c);
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(json_string_value(json_object_get(j, "url")),
			 "http://[::1]:9000/a/check?x=1");
	ck_assert_int_eq(json_array_size(json_object_get(j, "copy_headers")),
			 1);
	json_decref(j);
	fauth_conf_free(c);
	ck_assert_int_eq(fauth_conf_new("https://127.0.0.1/", 1, 0, &c, &e),
			 -EINVAL);
	ck_assert(strstr(e.msg, "https:// is not supported"));
	ck_assert_int_eq(fauth_conf_new("http://auth.local/", 1, 0, &c, &e),
			 -EINVAL);
	ck_assert_int_eq(fauth_conf_new("http:///x", 1, 0, &c, &e), -EINVAL);
	ck_assert_int_eq(fauth_conf_new("http://127.0.0.1/a#b", 1, 0, &c, &e),
			 -EINVAL);
	ck_assert_int_eq(fauth_conf_new("http://127.0.0.1/\x01", 1, 0, &c, &e),
			 -EINVAL);
	ck_assert_int_eq(fauth_conf_new("127.0.0.1:80", 1, 0, &c, &e), -EINVAL);
}
END_TEST

/* the per-thread decision cache (kcache.h) */
START_TEST(test_kcache)
{
	char *v;
	size_t n;

	kcache_add(KCACHE_FORWARD, 7, "key", 3, 100.0, "X-U: a\r\n", 8);
	ck_assert_int_eq(kcache_find(KCACHE_FORWARD, 7, "key", 3, 50.0, &v, &n),
			 KCACHE_HIT);
	ck_assert_uint_eq(n, 8);
	ck_assert_str_eq(v, "X-U: a\r\n");
	free(v);
	/* another kind, owner or key: not it */
	ck_assert_int_eq(kcache_find(KCACHE_JWT, 7, "key", 3, 50.0, &v, &n),
			 KCACHE_MISS);
	ck_assert_int_eq(kcache_find(KCACHE_FORWARD, 8, "key", 3, 50.0, &v, &n),
			 KCACHE_MISS);
	ck_assert_int_eq(kcache_find(KCACHE_FORWARD, 7, "kez", 3, 50.0, &v, &n),
			 KCACHE_MISS);
	/* past its deadline: expired once, then forgotten */
	ck_assert_int_eq(
	    kcache_find(KCACHE_FORWARD, 7, "key", 3, 100.0, &v, &n),
	    KCACHE_EXPIRED);
	ck_assert_int_eq(kcache_find(KCACHE_FORWARD, 7, "key", 3, 1.0, &v, &n),
			 KCACHE_MISS);
	/* no value, no deadline */
	kcache_add(KCACHE_JWT, 9, "", 0, -1, NULL, 0);
	ck_assert_int_eq(kcache_find(KCACHE_JWT, 9, "", 0, 1e12, &v, &n),
			 KCACHE_HIT);
	ck_assert_ptr_null(v);
	ck_assert_uint_eq(n, 0);
}
END_TEST

static Suite *auth_suite(void)
{
	Suite *s = suite_create("auth");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_b64url);
	tcase_add_test(tc, test_api_keys);
	tcase_add_test(tc, test_jwt);
	tcase_add_test(tc, test_jwks);
	tcase_add_test(tc, test_db_forms);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_fauth_conf);
	tcase_add_test(tc, test_kcache);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(auth_suite());
}
