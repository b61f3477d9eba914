/* SPDX-License-Identifier: BSD-2-Clause */
/* test_acme.c - the ACME client's pieces (userspace/acme_jws.c,
 * userspace/acme.c) that need no CA: the account key file (created 0600,
 * read back, every refusal), the JWK and its RFC 7638 thumbprint against
 * a value computed apart (and a key whose x starts with a zero byte),
 * JWS read back and verified with its r||s signature made DER again, the
 * CSR parsed back, DNS names, TLS-ALPN-01's certificate parsed back, and
 * orders that end without a CA: refused names, a refused connection
 * reported once through done, a cancel before anything ran. The flow
 * against a real CA is tests/integration/test_acme_client.sh's. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "acme.h"
#include "b64url.h"
#include "unit.h"

/* a P-256 key and its thumbprint, computed with Python's cryptography
 * (json.dumps(sort_keys=True, separators=(",", ":")), hashlib) */
static const char fixed_key[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgmOtDWF3aA3Lp2Ovo\n"
    "n5dzSxP5gYP+W0V+HWgC+OJ551ChRANCAAS/7BP/CPIrLDgeJNqAil86VGexUJLr\n"
    "a4EZamQQcFwu/aKgWbRuLJ3la8HKbh4wCDeOviGgRw/yKHn78Kliinus\n"
    "-----END PRIVATE KEY-----\n";
static const char fixed_jwk[] =
    "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"v-wT_wjyKyw4HiTagIpfOlRnsVCS62u"
    "BGWpkEHBcLv0\",\"y\":\"oqBZtG4sneVrwcpuHjAIN46-IaBHD_IoefvwqWKKe6w\"}";
static const char fixed_thumb[] = "Tny07HAc7AgFUn1eUu5uIzhsLN5OcCDx9oU6fPtNft8";

static char tmpdir[64];

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/edge-acme-unit.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static EVP_PKEY *key_from_pem(const char *pem)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	EVP_PKEY *k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);

	BIO_free(b);
	ck_assert_ptr_nonnull(k);
	return k;
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static void write_key(const char *path, EVP_PKEY *k, const EVP_CIPHER *enc)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(PEM_write_PrivateKey(
			     f, k, enc, (unsigned char *)"pass", 4, NULL, NULL),
			 1);
	fclose(f);
}

START_TEST(test_key_file)
{
	char path[512], t1[ACME_THUMBPRINT_LEN + 1],
	    t2[ACME_THUMBPRINT_LEN + 1];
	struct errbuf err = {{0}};
	EVP_PKEY *k1 = NULL, *k2 = NULL, *other;
	struct stat st;

	/* created 0600, then read back as the same key */
	snprintf(path, sizeof(path), "%s/account.key", tmpdir);
	ck_assert_int_eq(acme_key_load_or_create(path, &k1, &err), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(acme_key_load_or_create(path, &k2, &err), 0);
	ck_assert_int_eq(acme_jwk_thumbprint(k1, t1), 0);
	ck_assert_int_eq(acme_jwk_thumbprint(k2, t2), 0);
	ck_assert_str_eq(t1, t2);
	EVP_PKEY_free(k1);
	EVP_PKEY_free(k2);
	k1 = k2 = NULL;
	/* no temporary file left beside it */
	snprintf(path, sizeof(path), "ls %s | grep -v '^account.key$'", tmpdir);
	ck_assert_int_ne(system(path), 0);

	/* a key file someone else wrote (PEM PKCS#8) is read as it is */
	snprintf(path, sizeof(path), "%s/fixed.key", tmpdir);
	write_text(path, fixed_key);
	ck_assert_int_eq(acme_key_load_or_create(path, &k1, &err), 0);
	ck_assert_int_eq(acme_jwk_thumbprint(k1, t1), 0);
	ck_assert_str_eq(t1, fixed_thumb);
	EVP_PKEY_free(k1);
	k1 = NULL;

	/* refusals: another curve, RSA, encrypted, garbage, empty, a
	 * directory, a missing directory */
	other = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-384");
	snprintf(path, sizeof(path), "%s/p384.key", tmpdir);
	write_key(path, other, NULL);
	ck_assert_int_eq(acme_key_load_or_create(path, &k1, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "not an EC P-256 key"));
	EVP_PKEY_free(other);
	other = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
	snprintf(path, sizeof(path), "%s/rsa.key", tmpdir);
	write_key(path, other, NULL);
	ck_assert_int_eq(acme_key_load_or_create(path, &k1, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "not an EC P-256 key"));
	EVP_PKEY_free(other);
	other = acme_key_new();
	snprintf(path, sizeof(path), "%s/enc.key", tmpdir);
	write_key(path, other, EVP_aes_128_cbc());
	ck_assert_int_eq(acme_key_load_or_create(path, &k1, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "not a PEM private key"));
	EVP_PKEY_free(other);
	snprintf(path, sizeof(path), "%s/garbage.key", tmpdir);
	write_text(path, "-----BEGIN PRIVATE KEY-----\n!!!\n-----END PRIVATE "
			 "KEY-----\n");
	ck_assert_int_eq(acme_key_load_or_create(path, &k1, &err), -EINVAL);
	snprintf(path, sizeof(path), "%s/empty.key", tmpdir);
	write_text(path, "");
	ck_assert_int_eq(acme_key_load_or_create(path, &k1, &err), -EINVAL);
	ck_assert_int_eq(acme_key_load_or_create(tmpdir, &k1, &err), -EISDIR);
	snprintf(path, sizeof(path), "%s/no/such/dir/a.key", tmpdir);
	ck_assert_int_eq(acme_key_load_or_create(path, &k1, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "no/such/dir"));
	ck_assert_int_eq(acme_key_load_or_create("", &k1, &err), -EINVAL);
	ck_assert_ptr_null(k1);
}
END_TEST

/* The 32-byte x of k from its encoded (uncompressed) public point: apart
 * from acme_jwk_json's way. */
static void point_x(EVP_PKEY *k, unsigned char x[32])
{
	unsigned char pt[65];
	size_t len = 0;

	ck_assert_int_eq(EVP_PKEY_get_octet_string_param(
			     k, OSSL_PKEY_PARAM_PUB_KEY, pt, sizeof(pt), &len),
			 1);
	ck_assert_uint_eq(len, 65);
	ck_assert_uint_eq(pt[0], 4);
	memcpy(x, pt + 1, 32);
}

START_TEST(test_jwk)
{
	EVP_PKEY *k = key_from_pem(fixed_key);
	char *jwk = acme_jwk_json(k), thumb[ACME_THUMBPRINT_LEN + 1];
	char want[B64URL_LEN(32) + 1];
	unsigned char x[32];
	json_t *j;
	int i;

	ck_assert_str_eq(jwk, fixed_jwk);
	ck_assert_int_eq(acme_jwk_thumbprint(k, thumb), 0);
	ck_assert_str_eq(thumb, fixed_thumb);
	free(jwk);
	EVP_PKEY_free(k);

	/* a coordinate with a leading zero byte keeps its 32 bytes */
	for (i = 0; i < 100000; i++) {
		k = acme_key_new();
		point_x(k, x);
		if (x[0] == 0)
			break;
		EVP_PKEY_free(k);
		k = NULL;
	}
	ck_assert_ptr_nonnull(k);
	jwk = acme_jwk_json(k);
	j = json_loads(jwk, 0, NULL);
	b64url_encode(x, sizeof(x), want);
	ck_assert_str_eq(json_string_value(json_object_get(j, "x")), want);
	ck_assert_uint_eq(strlen(want), 43);
	json_decref(j);
	free(jwk);
	EVP_PKEY_free(k);

	/* not P-256: no JWK */
	k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-384");
	ck_assert_ptr_null(acme_jwk_json(k));
	ck_assert_int_eq(acme_jwk_thumbprint(k, thumb), -EIO);
	EVP_PKEY_free(k);
}
END_TEST

/* b64url field key of j decoded into a new NUL-terminated buffer. */
static char *b64_field(json_t *j, const char *key, size_t *n)
{
	const char *s = json_string_value(json_object_get(j, key));
	char *out;
	long len;

	ck_assert_ptr_nonnull(s);
	out = malloc(strlen(s) + 1);
	len = b64url_decode(s, strlen(s), (uint8_t *)out);
	ck_assert_int_ge(len, 0);
	out[len] = '\0';
	if (n)
		*n = (size_t)len;
	return out;
}

/* Verify jws's ES256 signature (r||s made DER again) with k. */
static void verify_jws(json_t *jws, EVP_PKEY *k)
{
	const char *p = json_string_value(json_object_get(jws, "protected"));
	const char *y = json_string_value(json_object_get(jws, "payload"));
	char *input, *sig;
	unsigned char *der = NULL;
	size_t n;
	int dlen;
	ECDSA_SIG *es = ECDSA_SIG_new();
	EVP_MD_CTX *md = EVP_MD_CTX_new();

	sig = b64_field(jws, "signature", &n);
	ck_assert_uint_eq(n, 64);
	ck_assert_int_eq(
	    ECDSA_SIG_set0(es, BN_bin2bn((unsigned char *)sig, 32, NULL),
			   BN_bin2bn((unsigned char *)sig + 32, 32, NULL)),
	    1);
	dlen = i2d_ECDSA_SIG(es, &der);
	ck_assert_int_gt(dlen, 0);
	ck_assert_int_ge(asprintf(&input, "%s.%s", p, y), 0);
	ck_assert_int_eq(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, k),
			 1);
	ck_assert_int_eq(EVP_DigestVerify(md, der, (size_t)dlen,
					  (unsigned char *)input,
					  strlen(input)),
			 1);
	/* one bit changed: refused */
	input[0] ^= 1;
	ck_assert_int_eq(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, k),
			 1);
	ck_assert_int_ne(EVP_DigestVerify(md, der, (size_t)dlen,
					  (unsigned char *)input,
					  strlen(input)),
			 1);
	free(input);
	free(sig);
	OPENSSL_free(der);
	ECDSA_SIG_free(es);
	EVP_MD_CTX_free(md);
}

START_TEST(test_jws)
{
	EVP_PKEY *k = key_from_pem(fixed_key);
	char *s, *hdr_s, *pay;
	json_t *jws, *hdr;
	int i;

	/* newAccount: the JWK, no kid */
	s = acme_jws(k, NULL, "bm9uY2U", "https://ca.test/new-acct",
		     "{\"termsOfServiceAgreed\":true}");
	ck_assert_ptr_nonnull(s);
	jws = json_loads(s, 0, NULL);
	ck_assert_uint_eq(json_object_size(jws), 3);
	hdr_s = b64_field(jws, "protected", NULL);
	hdr = json_loads(hdr_s, 0, NULL);
	ck_assert_str_eq(json_string_value(json_object_get(hdr, "alg")),
			 "ES256");
	ck_assert_str_eq(json_string_value(json_object_get(hdr, "nonce")),
			 "bm9uY2U");
	ck_assert_str_eq(json_string_value(json_object_get(hdr, "url")),
			 "https://ca.test/new-acct");
	ck_assert_ptr_null(json_object_get(hdr, "kid"));
	free(s);
	s = json_dumps(json_object_get(hdr, "jwk"),
		       JSON_COMPACT | JSON_SORT_KEYS);
	ck_assert_str_eq(s, fixed_jwk);
	pay = b64_field(jws, "payload", NULL);
	ck_assert_str_eq(pay, "{\"termsOfServiceAgreed\":true}");
	verify_jws(jws, k);
	free(s);
	free(pay);
	free(hdr_s);
	json_decref(hdr);
	json_decref(jws);

	/* POST-as-GET with the kid: an empty payload, no JWK; signatures
	 * differ every time (random k) and all verify */
	for (i = 0; i < 20; i++) {
		s = acme_jws(k, "https://ca.test/acct/1", "bm9uY2U",
			     "https://ca.test/authz/1", NULL);
		jws = json_loads(s, 0, NULL);
		ck_assert_str_eq(
		    json_string_value(json_object_get(jws, "payload")), "");
		hdr_s = b64_field(jws, "protected", NULL);
		hdr = json_loads(hdr_s, 0, NULL);
		ck_assert_str_eq(json_string_value(json_object_get(hdr, "kid")),
				 "https://ca.test/acct/1");
		ck_assert_ptr_null(json_object_get(hdr, "jwk"));
		verify_jws(jws, k);
		free(hdr_s);
		json_decref(hdr);
		json_decref(jws);
		free(s);
	}
	EVP_PKEY_free(k);
}
END_TEST

/* The dNSNames of a SAN stack, joined by ',' into out. */
static void sans_str(GENERAL_NAMES *gens, char *out, size_t size)
{
	int i;

	out[0] = '\0';
	for (i = 0; i < sk_GENERAL_NAME_num(gens); i++) {
		GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, i);

		ck_assert_int_eq(g->type, GEN_DNS);
		snprintf(out + strlen(out), size - strlen(out), "%s%s",
			 i ? "," : "",
			 (const char *)ASN1_STRING_get0_data(g->d.dNSName));
	}
}

START_TEST(test_csr)
{
	static const char *names[] = {"a.example.test", "b.example.test"};
	char longname[80], got[512], cn[128];
	const char *lnames[2];
	EVP_PKEY *k = acme_key_new();
	unsigned char *der;
	const unsigned char *p;
	size_t len;
	X509_REQ *req;
	STACK_OF(X509_EXTENSION) * exts;
	GENERAL_NAMES *gens;
	EVP_PKEY *pub;

	ck_assert_int_eq(acme_csr_der(k, names, 2, &der, &len), 0);
	p = der;
	req = d2i_X509_REQ(NULL, &p, (long)len);
	ck_assert_ptr_nonnull(req);
	ck_assert_ptr_eq(p, der + len);
	pub = X509_REQ_get_pubkey(req);
	ck_assert_int_eq(EVP_PKEY_eq(pub, k), 1);
	ck_assert_int_eq(X509_REQ_verify(req, pub), 1);
	ck_assert_int_gt(
	    X509_NAME_get_text_by_NID(X509_REQ_get_subject_name(req),
				      NID_commonName, cn, sizeof(cn)),
	    0);
	ck_assert_str_eq(cn, "a.example.test");
	exts = X509_REQ_get_extensions(req);
	gens = X509V3_get_d2i(exts, NID_subject_alt_name, NULL, NULL);
	sans_str(gens, got, sizeof(got));
	ck_assert_str_eq(got, "a.example.test,b.example.test");
	GENERAL_NAMES_free(gens);
	sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
	EVP_PKEY_free(pub);
	X509_REQ_free(req);
	OPENSSL_free(der);

	/* a first name past CN's 64 characters: no CN, every SAN */
	memset(longname, 'x', 70);
	strcpy(longname + 70, ".test");
	lnames[0] = longname;
	lnames[1] = "b.example.test";
	ck_assert_int_eq(acme_csr_der(k, lnames, 2, &der, &len), 0);
	p = der;
	req = d2i_X509_REQ(NULL, &p, (long)len);
	ck_assert_ptr_nonnull(req);
	ck_assert_int_eq(X509_NAME_entry_count(X509_REQ_get_subject_name(req)),
			 0);
	exts = X509_REQ_get_extensions(req);
	gens = X509V3_get_d2i(exts, NID_subject_alt_name, NULL, NULL);
	sans_str(gens, got, sizeof(got));
	ck_assert_str_eq(got, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
			      "xxxxxxxxxxxxxxxxxxxxxxx.test,b.example.test");
	GENERAL_NAMES_free(gens);
	sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
	X509_REQ_free(req);
	OPENSSL_free(der);
	EVP_PKEY_free(k);
}
END_TEST

START_TEST(test_names)
{
	static const char *good[] = {"a.b",	   "example.test",
				     "a-b.c-d.e",  "xn--bcher-kva.example",
				     "1a.example", "a.b2"};
	static const char *bad[] = {
	    "",	     "localhost", "A.example", "*.example", "a..b",
	    ".a.b",  "a.b.",	  "-a.b",      "a-.b",	    "a.-b",
	    "a_b.c", "1.2.3.4",	  "a b.c",     "a.b\n",	    "a.123"};
	char name[300];
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ck_assert_msg(acme_name_ok(good[i]), "%s", good[i]);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!acme_name_ok(bad[i]), "%s", bad[i]);
	ck_assert(!acme_name_ok(NULL));
	/* a label of 63 characters, not 64 */
	memset(name, 'a', 63);
	strcpy(name + 63, ".test");
	ck_assert(acme_name_ok(name));
	memset(name, 'a', 64);
	strcpy(name + 64, ".test");
	ck_assert(!acme_name_ok(name));
	/* 253 characters in all, not 254 */
	for (i = 0; i < 252; i++)
		name[i] = (i % 2) ? '.' : 'a';
	name[252] = 'b';
	name[253] = '\0';
	ck_assert(acme_name_ok(name));
	name[253] = 'c';
	name[254] = '\0';
	ck_assert(!acme_name_ok(name));
}
END_TEST

START_TEST(test_tls_alpn)
{
	static const char ka[] = "dG9rZW4.Tny07HAc7AgFUn1eUu5uIzhsLN5OcCDx9oU6"
				 "fPtNft8";
	EVP_PKEY *k = acme_key_new();
	X509 *x = acme_tls_alpn_cert(k, "a.example.test", ka);
	unsigned char md[32], *der = NULL;
	const unsigned char *p;
	ASN1_OBJECT *oid = OBJ_txt2obj(ACME_TLS_ALPN_OID, 1);
	X509_EXTENSION *ext;
	ASN1_OCTET_STRING *data, *inner;
	GENERAL_NAMES *gens;
	char got[300];
	int idx, len;
	X509 *back;

	ck_assert_ptr_nonnull(x);
	/* through DER and back, as a TLS peer sees it */
	len = i2d_X509(x, &der);
	ck_assert_int_gt(len, 0);
	p = der;
	back = d2i_X509(NULL, &p, len);
	ck_assert_ptr_nonnull(back);
	ck_assert_int_eq(X509_verify(back, k), 1); /* self-signed */
	ck_assert_int_eq(X509_check_private_key(back, k), 1);
	ck_assert_int_eq(X509_check_host(back, "a.example.test", 0, 0, NULL),
			 1);
	gens = X509_get_ext_d2i(back, NID_subject_alt_name, NULL, NULL);
	sans_str(gens, got, sizeof(got));
	ck_assert_str_eq(got, "a.example.test");
	GENERAL_NAMES_free(gens);

	idx = X509_get_ext_by_OBJ(back, oid, -1);
	ck_assert_int_ge(idx, 0);
	ck_assert_int_lt(X509_get_ext_by_OBJ(back, oid, idx), 0); /* once */
	ext = X509_get_ext(back, idx);
	ck_assert_int_eq(X509_EXTENSION_get_critical(ext), 1);
	data = X509_EXTENSION_get_data(ext);
	/* the value: DER OCTET STRING (04 20) of SHA-256(ka) */
	ck_assert_int_eq(ASN1_STRING_length(data), 34);
	ck_assert_uint_eq(ASN1_STRING_get0_data(data)[0], 0x04);
	ck_assert_uint_eq(ASN1_STRING_get0_data(data)[1], 0x20);
	p = ASN1_STRING_get0_data(data);
	inner = d2i_ASN1_OCTET_STRING(NULL, &p, ASN1_STRING_length(data));
	ck_assert_ptr_nonnull(inner);
	SHA256((const unsigned char *)ka, strlen(ka), md);
	ck_assert_int_eq(ASN1_STRING_length(inner), 32);
	ck_assert_mem_eq(ASN1_STRING_get0_data(inner), md, 32);
	/* the certificate's validity covers now */
	ck_assert_int_lt(X509_cmp_current_time(X509_get0_notBefore(back)), 0);
	ck_assert_int_gt(X509_cmp_current_time(X509_get0_notAfter(back)), 0);

	ASN1_OCTET_STRING_free(inner);
	X509_free(back);
	OPENSSL_free(der);
	X509_free(x);
	/* refused: a bad name, no key authorization */
	ck_assert_ptr_null(acme_tls_alpn_cert(k, "Bad Name", ka));
	ck_assert_ptr_null(acme_tls_alpn_cert(k, "a.example.test", NULL));
	ASN1_OBJECT_free(oid);
	EVP_PKEY_free(k);
}
END_TEST

static int n_done, n_publish;
static struct acme_result last;
static char last_msg[1024];

static int t_publish(void *arg, const struct acme_chal_row *row)
{
	(void)arg;
	(void)row;
	n_publish++;
	return 0;
}

static void t_unpublish(void *arg, const char *token)
{
	(void)arg;
	(void)token;
}

/* arg: the loop, ended */
static void t_done(void *arg, const struct acme_result *r)
{
	n_done++;
	last = *r;
	snprintf(last_msg, sizeof(last_msg), "%s", r->message);
	last.message = last_msg;
	event_base_loopexit(arg, NULL);
}

START_TEST(test_orders)
{
	static const struct acme_ops ops = {t_publish, t_unpublish, t_done};
	static const char *twice[] = {"a.example.test", "a.example.test"};
	static const char *badname[] = {"a.example.test", "Bad"};
	static const char *one[] = {"a.example.test"};
	struct event_base *base = event_base_new();
	struct acme_config cfg = {0};
	struct acme_client *c = NULL;
	struct acme_order *o = NULL;
	struct errbuf err = {{0}};
	char key[512];
	struct timeval tv = {0, 200000};

	snprintf(key, sizeof(key), "%s/account.key", tmpdir);
	cfg.account_key_file = key;
	/* client refusals */
	cfg.directory_url = "http://127.0.0.1:1/dir";
	ck_assert_int_eq(acme_client_new(base, &cfg, &c, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "not https://"));
	cfg.directory_url = "https://127.0.0.1:1/dir";
	cfg.ca_file = "/nonexistent/ca.pem";
	ck_assert_int_eq(acme_client_new(base, &cfg, &c, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/ca.pem"));
	cfg.ca_file = NULL;
	cfg.request_timeout_ms = 2000;
	ck_assert_int_eq(acme_client_new(base, &cfg, &c, &err), 0);
	ck_assert_ptr_null(acme_client_account_url(c));

	/* order refusals: no callback, no order */
	ck_assert_int_eq(acme_order_start(c, twice, 2, &ops, base, &o, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "named twice"));
	ck_assert_int_eq(acme_order_start(c, badname, 2, &ops, base, &o, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "Bad"));
	ck_assert_int_eq(acme_order_start(c, one, 0, &ops, base, &o, &err),
			 -EINVAL);

	/* nothing listens on port 1: done once, -ECONNREFUSED, never from
	 * acme_order_start itself */
	ck_assert_int_eq(acme_order_start(c, one, 1, &ops, base, &o, &err), 0);
	ck_assert_int_eq(n_done, 0);
	event_base_dispatch(base);
	ck_assert_int_eq(n_done, 1);
	ck_assert_int_eq(last.error, -ECONNREFUSED);
	ck_assert_ptr_nonnull(strstr(last_msg, "directory GET "
					       "https://127.0.0.1:1/dir"));
	ck_assert_ptr_null(last.cert_pem);
	ck_assert_ptr_null(last.problem_type);
	ck_assert_int_eq(n_publish, 0);

	/* cancelled before its first step: no callback at all */
	ck_assert_int_eq(acme_order_start(c, one, 1, &ops, base, &o, &err), 0);
	acme_order_cancel(o);
	acme_order_cancel(NULL);
	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
	ck_assert_int_eq(n_done, 1);

	acme_client_free(c);
	acme_client_free(NULL);
	event_base_free(base);
}
END_TEST

static Suite *acme_suite(void)
{
	Suite *s = suite_create("acme");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_key_file);
	tcase_add_test(tc, test_jwk);
	tcase_add_test(tc, test_jws);
	tcase_add_test(tc, test_csr);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_tls_alpn);
	tcase_add_test(tc, test_orders);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(acme_suite());
}
