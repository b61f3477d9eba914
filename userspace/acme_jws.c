// SPDX-License-Identifier: BSD-2-Clause
/*
 * acme_jws.c - ACME's crypto (acme.h): the account key file, the JWK and
 * its thumbprint, ES256 JWS, the CSR and TLS-ALPN-01's certificate. Only
 * OpenSSL 3.0's EVP and X509 APIs; ECDSA_SIG turns DER signatures into
 * JWS's r||s.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "acme.h"

/* A key file's size we read at most. */
#define ACME_KEY_FILE_MAX 16384
/* The longest common name X.509 allows (ub-common-name). */
#define ACME_CN_MAX 64

EVP_PKEY *acme_key_new(void)
{
	return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
}

/* Never prompt for a passphrase: an encrypted key file is refused. */
static int acme_no_pass(char *buf, int size, int rw, void *u)
{
	(void)buf;
	(void)size;
	(void)rw;
	(void)u;
	return -1;
}

static bool acme_key_is_p256(EVP_PKEY *key)
{
	char group[64];

	return EVP_PKEY_is_a(key, "EC") &&
	       EVP_PKEY_get_group_name(key, group, sizeof(group), NULL) &&
	       (strcmp(group, "prime256v1") == 0 ||
		strcmp(group, "P-256") == 0);
}

/* The key in path: 0, -ENOENT when there is no such file, or another
 * negative errno with err's message. */
static int acme_key_read(const char *path, EVP_PKEY **out, struct errbuf *err)
{
	char *buf = NULL;
	BIO *bio = NULL;
	EVP_PKEY *key = NULL;
	ssize_t got;
	size_t len = 0;
	int fd, r = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		r = -errno;
		if (r != -ENOENT)
			errbuf_set(err, "%s: %s", path, strerror(-r));
		return r;
	}
	buf = malloc(ACME_KEY_FILE_MAX);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	while (len < ACME_KEY_FILE_MAX) {
		got = read(fd, buf + len, ACME_KEY_FILE_MAX - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			r = -errno;
			errbuf_set(err, "%s: %s", path, strerror(errno));
			goto out;
		}
		if (got == 0)
			break;
		len += (size_t)got;
	}
	if (len == ACME_KEY_FILE_MAX) {
		r = -EFBIG;
		errbuf_set(err, "%s: larger than %d bytes: not a key", path,
			   ACME_KEY_FILE_MAX);
		goto out;
	}
	bio = BIO_new_mem_buf(buf, (int)len);
	if (!bio) {
		r = -ENOMEM;
		goto out;
	}
	key = PEM_read_bio_PrivateKey(bio, NULL, acme_no_pass, NULL);
	if (!key) {
		r = -EINVAL;
		errbuf_set(err, "%s: not a PEM private key (unencrypted)",
			   path);
		goto out;
	}
	if (!acme_key_is_p256(key)) {
		r = -EINVAL;
		errbuf_set(err, "%s: not an EC P-256 key", path);
		goto out;
	}
	*out = key;
	key = NULL;
out:
	ERR_clear_error();
	EVP_PKEY_free(key);
	BIO_free(bio);
	if (buf)
		OPENSSL_cleanse(buf, len);
	free(buf);
	close(fd);
	return r;
}

/* Write buf[0..n) to fd, all of it. 0 or -errno. */
static int acme_write_all(int fd, const char *buf, size_t n)
{
	ssize_t w;

	while (n > 0) {
		w = write(fd, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The directory of path, fsync'd so that a link in it lasts. */
static void acme_sync_dir(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int fd;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

/* A new key into path (absent): written to a temporary file of mode
 * 0600 beside it, then linked to path, which fails when path appeared
 * meanwhile (-EEXIST: the caller reads that one). */
static int acme_key_create(const char *path, EVP_PKEY **out, struct errbuf *err)
{
	char tmp[PATH_MAX];
	EVP_PKEY *key = NULL;
	BIO *mem = NULL;
	char *pem;
	long len;
	int fd = -1, r;

	if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp)) {
		errbuf_set(err, "%s: path too long", path);
		return -ENAMETOOLONG;
	}
	key = acme_key_new();
	mem = BIO_new(BIO_s_mem());
	if (!key || !mem ||
	    !PEM_write_bio_PrivateKey(mem, key, NULL, NULL, 0, NULL, NULL) ||
	    (len = BIO_get_mem_data(mem, &pem)) <= 0) {
		r = -EIO;
		errbuf_set(err, "%s: cannot make a P-256 key", path);
		goto out;
	}
	fd = mkostemp(tmp, O_CLOEXEC); /* mode 0600 */
	if (fd < 0) {
		r = -errno;
		errbuf_set(err, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	r = fchmod(fd, 0600) < 0 ? -errno : 0;
	if (r == 0)
		r = acme_write_all(fd, pem, (size_t)len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r < 0) {
		errbuf_set(err, "%s: %s", tmp, strerror(-r));
		goto out_unlink;
	}
	if (close(fd) < 0) {
		fd = -1;
		r = -errno;
		errbuf_set(err, "%s: %s", tmp, strerror(errno));
		goto out_unlink;
	}
	fd = -1;
	if (link(tmp, path) < 0) {
		r = -errno;
		if (r != -EEXIST)
			errbuf_set(err, "%s: %s", path, strerror(errno));
		goto out_unlink;
	}
	acme_sync_dir(path);
	*out = key;
	key = NULL;
	r = 0;
out_unlink:
	unlink(tmp);
out:
	if (fd >= 0)
		close(fd);
	BIO_free(mem);
	EVP_PKEY_free(key);
	ERR_clear_error();
	return r;
}

int acme_key_load_or_create(const char *path, EVP_PKEY **out,
			    struct errbuf *err)
{
	int r;

	if (!path || !*path) {
		errbuf_set(err, "no account key file");
		return -EINVAL;
	}
	r = acme_key_read(path, out, err);
	if (r != -ENOENT)
		return r;
	r = acme_key_create(path, out, err);
	if (r == -EEXIST) /* another process made it first: theirs */
		r = acme_key_read(path, out, err);
	return r;
}

/* A 32-byte coordinate of key's public point (name: OSSL_PKEY_PARAM_EC_PUB_X
 * or _Y), base64url, into out (B64URL_LEN(32) + 1). */
static int acme_coord(EVP_PKEY *key, const char *name, char *out)
{
	unsigned char bin[32];
	BIGNUM *bn = NULL;
	int ok;

	ok = EVP_PKEY_get_bn_param(key, name, &bn) &&
	     BN_bn2binpad(bn, bin, sizeof(bin)) == (int)sizeof(bin);
	BN_free(bn);
	if (!ok)
		return -EIO;
	b64url_encode(bin, sizeof(bin), out);
	return 0;
}

char *acme_jwk_json(EVP_PKEY *key)
{
	char x[B64URL_LEN(32) + 1], y[B64URL_LEN(32) + 1];
	char *s = NULL;

	if (!acme_key_is_p256(key) ||
	    acme_coord(key, OSSL_PKEY_PARAM_EC_PUB_X, x) < 0 ||
	    acme_coord(key, OSSL_PKEY_PARAM_EC_PUB_Y, y) < 0)
		return NULL;
	/* RFC 7638: the required members in lexicographic order, no
	 * whitespace */
	if (asprintf(&s,
		     "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"%s\","
		     "\"y\":\"%s\"}",
		     x, y) < 0)
		return NULL;
	return s;
}

int acme_jwk_thumbprint(EVP_PKEY *key, char *out)
{
	unsigned char md[32];
	char *jwk = acme_jwk_json(key);

	if (!jwk)
		return -EIO;
	SHA256((const unsigned char *)jwk, strlen(jwk), md);
	free(jwk);
	b64url_encode(md, sizeof(md), out);
	return 0;
}

int acme_es256_sign(EVP_PKEY *key, const void *data, size_t n,
		    unsigned char sig[64])
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char der[128];
	const unsigned char *p = der;
	size_t len = sizeof(der);
	ECDSA_SIG *es = NULL;
	const BIGNUM *r, *s;
	int ret = -EIO;

	if (!md || EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) != 1 ||
	    EVP_DigestSign(md, der, &len, data, n) != 1)
		goto out;
	es = d2i_ECDSA_SIG(NULL, &p, (long)len);
	if (!es)
		goto out;
	ECDSA_SIG_get0(es, &r, &s);
	if (BN_bn2binpad(r, sig, 32) != 32 ||
	    BN_bn2binpad(s, sig + 32, 32) != 32)
		goto out;
	ret = 0;
out:
	ECDSA_SIG_free(es);
	EVP_MD_CTX_free(md);
	ERR_clear_error();
	return ret;
}

/* s[0..n) base64url, into a new string. */
static char *acme_b64_new(const void *s, size_t n)
{
	char *out = malloc(B64URL_LEN(n) + 1);

	if (out)
		b64url_encode(s, n, out);
	return out;
}

char *acme_jws(EVP_PKEY *key, const char *kid, const char *nonce,
	       const char *url, const char *payload)
{
	json_t *hdr = NULL, *jwk = NULL, *jws = NULL;
	char *hdr_s = NULL, *hdr_b = NULL, *pay_b = NULL, *input = NULL;
	char *out = NULL, *jwk_s = NULL;
	char sig_b[B64URL_LEN(64) + 1];
	unsigned char sig[64];

	if (kid) {
		hdr = json_pack("{s:s, s:s, s:s, s:s}", "alg", "ES256", "kid",
				kid, "nonce", nonce, "url", url);
	} else {
		jwk_s = acme_jwk_json(key);
		jwk = jwk_s ? json_loads(jwk_s, 0, NULL) : NULL;
		if (!jwk)
			goto out;
		hdr = json_pack("{s:s, s:O, s:s, s:s}", "alg", "ES256", "jwk",
				jwk, "nonce", nonce, "url", url);
	}
	if (!hdr)
		goto out;
	hdr_s = json_dumps(hdr, JSON_COMPACT);
	if (!hdr_s)
		goto out;
	hdr_b = acme_b64_new(hdr_s, strlen(hdr_s));
	pay_b =
	    acme_b64_new(payload ? payload : "", payload ? strlen(payload) : 0);
	if (!hdr_b || !pay_b || asprintf(&input, "%s.%s", hdr_b, pay_b) < 0) {
		input = NULL;
		goto out;
	}
	if (acme_es256_sign(key, input, strlen(input), sig) < 0)
		goto out;
	b64url_encode(sig, sizeof(sig), sig_b);
	jws = json_pack("{s:s, s:s, s:s}", "protected", hdr_b, "payload", pay_b,
			"signature", sig_b);
	if (jws)
		out = json_dumps(jws, JSON_COMPACT);
out:
	json_decref(jws);
	json_decref(hdr);
	json_decref(jwk);
	free(jwk_s);
	free(hdr_s);
	free(hdr_b);
	free(pay_b);
	free(input);
	return out;
}

bool acme_name_ok(const char *name)
{
	size_t len = name ? strlen(name) : 0, label = 0, i;
	char ch;

	if (len == 0 || len > ACME_NAME_MAX || name[0] == '.' ||
	    name[len - 1] == '.' || !strchr(name, '.'))
		return false;
	for (i = 0; i < len; i++) {
		ch = name[i];
		if (ch == '.') {
			if (label == 0 || name[i - 1] == '-')
				return false;
			label = 0;
			continue;
		}
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
		      ch == '-'))
			return false;
		if (ch == '-' && label == 0)
			return false;
		if (++label > 63)
			return false;
	}
	/* the last label is not all digits: not an IPv4 address */
	if (name[len - 1] == '-' ||
	    strspn(name + len - label, "0123456789") == label)
		return false;
	return true;
}

/* The subjectAltName dNSNames names[0..n), or NULL. */
static GENERAL_NAMES *acme_sans(const char *const *names, size_t n)
{
	GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
	GENERAL_NAME *g;
	ASN1_IA5STRING *s;
	size_t i;

	if (!gens)
		return NULL;
	for (i = 0; i < n; i++) {
		g = GENERAL_NAME_new();
		s = ASN1_IA5STRING_new();
		if (!g || !s || !ASN1_STRING_set(s, names[i], -1)) {
			GENERAL_NAME_free(g);
			ASN1_IA5STRING_free(s);
			goto fail;
		}
		GENERAL_NAME_set0_value(g, GEN_DNS, s);
		if (!sk_GENERAL_NAME_push(gens, g)) {
			GENERAL_NAME_free(g);
			goto fail;
		}
	}
	return gens;
fail:
	GENERAL_NAMES_free(gens);
	return NULL;
}

/* CN=name in nm when it fits (longer names are in the SANs alone). */
static bool acme_cn(X509_NAME *nm, const char *name)
{
	if (strlen(name) > ACME_CN_MAX)
		return true;
	return X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC,
					  (const unsigned char *)name, -1, -1,
					  0) == 1;
}

int acme_csr_der(EVP_PKEY *key, const char *const *names, size_t n,
		 unsigned char **der, size_t *len)
{
	X509_REQ *req = X509_REQ_new();
	GENERAL_NAMES *gens = NULL;
	STACK_OF(X509_EXTENSION) *exts = NULL;
	X509_EXTENSION *ext = NULL;
	unsigned char *buf = NULL;
	int r = -EIO, dlen;

	if (!req || n == 0)
		goto out;
	gens = acme_sans(names, n);
	exts = sk_X509_EXTENSION_new_null();
	if (!gens || !exts)
		goto out;
	ext = X509V3_EXT_i2d(NID_subject_alt_name, 0, gens);
	if (!ext || !sk_X509_EXTENSION_push(exts, ext))
		goto out;
	ext = NULL; /* exts has it */
	if (!X509_REQ_set_version(req, 0) ||
	    !acme_cn(X509_REQ_get_subject_name(req), names[0]) ||
	    !X509_REQ_add_extensions(req, exts) ||
	    !X509_REQ_set_pubkey(req, key) ||
	    X509_REQ_sign(req, key, EVP_sha256()) <= 0)
		goto out;
	dlen = i2d_X509_REQ(req, &buf);
	if (dlen <= 0)
		goto out;
	*der = buf;
	*len = (size_t)dlen;
	r = 0;
out:
	X509_EXTENSION_free(ext);
	sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
	GENERAL_NAMES_free(gens);
	X509_REQ_free(req);
	ERR_clear_error();
	return r;
}

/* The critical acmeIdentifier extension: an OCTET STRING holding the
 * SHA-256 of key_authorization, DER, as the extension's value. */
static X509_EXTENSION *acme_ident_ext(const char *key_authorization)
{
	unsigned char md[32], *inner = NULL;
	ASN1_OCTET_STRING *digest = ASN1_OCTET_STRING_new();
	ASN1_OCTET_STRING *value = ASN1_OCTET_STRING_new();
	ASN1_OBJECT *obj = OBJ_txt2obj(ACME_TLS_ALPN_OID, 1);
	X509_EXTENSION *ext = NULL;
	int len;

	SHA256((const unsigned char *)key_authorization,
	       strlen(key_authorization), md);
	if (!digest || !value || !obj ||
	    !ASN1_OCTET_STRING_set(digest, md, sizeof(md)))
		goto out;
	len = i2d_ASN1_OCTET_STRING(digest, &inner);
	if (len <= 0 || !ASN1_OCTET_STRING_set(value, inner, len))
		goto out;
	ext = X509_EXTENSION_create_by_OBJ(NULL, obj, 1, value);
out:
	OPENSSL_free(inner);
	ASN1_OBJECT_free(obj);
	ASN1_OCTET_STRING_free(digest);
	ASN1_OCTET_STRING_free(value);
	return ext;
}

X509 *acme_tls_alpn_cert(EVP_PKEY *key, const char *name,
			 const char *key_authorization)
{
	X509 *x = X509_new();
	X509_EXTENSION *ext = NULL;
	GENERAL_NAMES *gens = NULL;
	unsigned char serial[16];
	BIGNUM *bn = NULL;
	bool ok = false;

	if (!x || !acme_name_ok(name) || !key_authorization)
		goto out;
	gens = acme_sans(&name, 1);
	ext = acme_ident_ext(key_authorization);
	if (!gens || !ext || RAND_bytes(serial, sizeof(serial)) != 1)
		goto out;
	serial[0] &= 0x7f; /* positive */
	bn = BN_bin2bn(serial, sizeof(serial), NULL);
	ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) &&
	     X509_set_version(x, X509_VERSION_3) &&
	     X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
	     X509_gmtime_adj(X509_getm_notAfter(x), 7 * 86400L) &&
	     acme_cn(X509_get_subject_name(x), name) &&
	     X509_set_issuer_name(x, X509_get_subject_name(x)) &&
	     X509_set_pubkey(x, key) &&
	     X509_add1_ext_i2d(x, NID_subject_alt_name, gens, 0,
			       X509V3_ADD_DEFAULT) == 1 &&
	     X509_add_ext(x, ext, -1) && X509_sign(x, key, EVP_sha256()) > 0;
out:
	BN_free(bn);
	GENERAL_NAMES_free(gens);
	X509_EXTENSION_free(ext);
	ERR_clear_error();
	if (!ok) {
		X509_free(x);
		return NULL;
	}
	return x;
}
