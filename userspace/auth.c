/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * auth.c - the credential gate: API keys and JWTs.
 */
#include "auth.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include "b64url.h"
#include "duration.h"
#include "fauth.h"
#include "h1.h"
#include "kcache.h"

/* ---- names --------------------------------------------------------------- */

#define AUTH_ALG_STR(a) #a,
static const char *const alg_names[] = {AUTH_ALGS(AUTH_ALG_STR)};

const char *auth_alg_name(enum auth_alg a)
{
	return (unsigned)a < AUTH_ALG_N ? alg_names[a] : "?";
}

int auth_alg_parse(const char *s, size_t n)
{
	int i;

	for (i = 0; i < AUTH_ALG_N; i++)
		if (strlen(alg_names[i]) == n &&
		    memcmp(alg_names[i], s, n) == 0)
			return i;
	return -1;
}

#define AUTH_NAME_STR(id, name) name,
static const char *const method_names[] = {AUTH_METHODS(AUTH_NAME_STR)};
static const char *const result_names[] = {AUTH_RESULTS(AUTH_NAME_STR)};

const char *auth_method_name(enum auth_method m)
{
	return (unsigned)m < AUTH_M__COUNT ? method_names[m] : "?";
}

const char *auth_result_name(enum auth_result r)
{
	return (unsigned)r < AUTH_R__COUNT ? result_names[r] : "?";
}

static _Atomic uint64_t auth_counts[AUTH_M__COUNT][AUTH_R__COUNT];

void auth_count(enum auth_method m, enum auth_result r)
{
	if ((unsigned)m < AUTH_M__COUNT && (unsigned)r < AUTH_R__COUNT)
		atomic_fetch_add_explicit(&auth_counts[m][r], 1,
					  memory_order_relaxed);
}

uint64_t auth_total(enum auth_method m, enum auth_result r)
{
	if ((unsigned)m >= AUTH_M__COUNT || (unsigned)r >= AUTH_R__COUNT)
		return 0;
	return atomic_load_explicit(&auth_counts[m][r], memory_order_relaxed);
}

/* ---- the gate ------------------------------------------------------------ */

struct auth_key {
	uint8_t sha[SHA256_DIGEST_LENGTH];
	char name[AUTH_KEY_NAME_MAX + 1];
};

enum jwk_kind { JWK_RSA, JWK_P256, JWK_P384, JWK_ED, JWK_OCT };

struct auth_jwk {
	enum jwk_kind kind;
	EVP_PKEY *pkey;	 /* all but JWK_OCT */
	uint8_t *secret; /* JWK_OCT */
	size_t secret_len;
	char *kid;     /* NULL: none */
	unsigned algs; /* its "alg" (one bit), else all its kind's */
};

struct auth_gate {
	_Atomic unsigned refs;
	uint64_t id; /* never reused (the token cache's key) */
	bool api_keys;
	struct auth_key *keys; /* sorted by sha (once sealed) */
	size_t n_keys, keys_cap;
	bool jwt;
	struct auth_jwk *jwks;
	size_t n_jwks;
	unsigned algs;
	char *issuer, *audience;
	unsigned leeway_s;
	char *claims[AUTH_CLAIMS_MAX];
	size_t n_claims;
	struct fauth_conf *fwd; /* auth_request, NULL: none */
};

struct auth_gate *auth_gate_new(void)
{
	struct auth_gate *g = calloc(1, sizeof(*g));

	static _Atomic uint64_t ids;

	if (g) {
		atomic_init(&g->refs, 1);
		g->id = atomic_fetch_add(&ids, 1) + 1;
	}
	return g;
}

struct auth_gate *auth_gate_get(struct auth_gate *g)
{
	if (g)
		atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
	return g;
}

static void jwk_clear(struct auth_jwk *k)
{
	EVP_PKEY_free(k->pkey);
	if (k->secret) {
		OPENSSL_cleanse(k->secret, k->secret_len);
		free(k->secret);
	}
	free(k->kid);
	memset(k, 0, sizeof(*k));
}

static void jwks_free(struct auth_jwk *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		jwk_clear(&v[i]);
	free(v);
}

void auth_gate_put(struct auth_gate *g)
{
	size_t i;

	if (!g ||
	    atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1)
		return;
	free(g->keys);
	jwks_free(g->jwks, g->n_jwks);
	free(g->issuer);
	free(g->audience);
	for (i = 0; i < g->n_claims; i++)
		free(g->claims[i]);
	fauth_conf_free(g->fwd);
	free(g);
}

void auth_gate_forward(struct auth_gate *g, struct fauth_conf *c)
{
	fauth_conf_free(g->fwd);
	g->fwd = c;
}

const struct fauth_conf *auth_gate_fwd(const struct auth_gate *g)
{
	return g ? g->fwd : NULL;
}

bool auth_gate_checks(const struct auth_gate *g)
{
	return g && (g->api_keys || g->jwt);
}

json_t *auth_gate_json(const struct auth_gate *g)
{
	json_t *o, *algs, *claims, *jwt = NULL, *fwd;
	size_t i;
	int a;

	if (!g)
		return json_null();
	if (g->jwt) {
		algs = json_array();
		claims = json_array();
		for (a = 0; algs && a < AUTH_ALG_N; a++)
			if (g->algs & 1u << a &&
			    json_array_append_new(algs,
						  json_string(alg_names[a])))
				break;
		for (i = 0; claims && i < g->n_claims; i++)
			if (json_array_append_new(claims,
						  json_string(g->claims[i])))
				break;
		jwt = json_pack("{s:i,s:o*,s:s?,s:s?,s:i,s:o*}", "keys",
				(json_int_t)g->n_jwks, "algorithms", algs,
				"issuer", g->issuer, "audience", g->audience,
				"leeway_s", (json_int_t)g->leeway_s,
				"copy_claims", claims);
		if (!jwt)
			return NULL;
	}
	fwd = g->fwd ? fauth_conf_json(g->fwd) : json_null();
	o = json_pack("{s:o,s:o,s:o*}", "api_keys",
		      g->api_keys ? json_integer((json_int_t)g->n_keys)
				  : json_null(),
		      "jwt", jwt ? jwt : json_null(), "auth_request", fwd);
	return o;
}

/* ---- API keys ------------------------------------------------------------ */

/* Room for one more key at g->keys[g->n_keys] (not counted yet). */
static struct auth_key *keys_room(struct auth_gate *g)
{
	struct auth_key *nv;

	if (g->n_keys == g->keys_cap) {
		if (g->n_keys >= AUTH_KEYS_MAX)
			return NULL;
		nv = realloc(g->keys,
			     (g->keys_cap ? g->keys_cap * 2 : 8) * sizeof(*nv));
		if (!nv)
			return NULL;
		g->keys = nv;
		g->keys_cap = g->keys_cap ? g->keys_cap * 2 : 8;
	}
	return &g->keys[g->n_keys];
}

static int key_cmp(const void *a, const void *b)
{
	return memcmp(((const struct auth_key *)a)->sha,
		      ((const struct auth_key *)b)->sha, SHA256_DIGEST_LENGTH);
}

static bool key_name_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
	       c == '@';
}

/* One line "NAME HEX" (trimmed, not empty, not a comment) into k. */
static int key_line(const char *s, size_t n, struct auth_key *k,
		    const char **why)
{
	size_t i = 0, nl, h;

	while (i < n && key_name_char((unsigned char)s[i]))
		i++;
	nl = i;
	if (nl == 0 || (i < n && s[i] != ' ' && s[i] != '\t')) {
		*why = "a name of letters, digits and -_.@ first";
		return -EINVAL;
	}
	if (nl > AUTH_KEY_NAME_MAX) {
		*why = "a name of at most 63 characters";
		return -EINVAL;
	}
	memcpy(k->name, s, nl);
	k->name[nl] = '\0';
	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (n - i != 2 * SHA256_DIGEST_LENGTH) {
		*why = "NAME and the key's SHA-256 in 64 hex digits "
		       "(printf %s KEY | sha256sum)";
		return -EINVAL;
	}
	for (h = 0; h < SHA256_DIGEST_LENGTH; h++) {
		int hi = h1_hexval(s[i + 2 * h]),
		    lo = h1_hexval(s[i + 2 * h + 1]);

		if (hi < 0 || lo < 0) {
			*why = "the SHA-256 in hex digits";
			return -EINVAL;
		}
		k->sha[h] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

int auth_gate_api_keys(struct auth_gate *g, const char *buf, size_t n,
		       struct errbuf *err)
{
	struct auth_key *v = NULL;
	size_t nv = 0, cap = 0, pos = 0, line = 0, i;

	while (pos < n) {
		const char *s = buf + pos, *e = memchr(s, '\n', n - pos);
		size_t len = e ? (size_t)(e - s) : n - pos;
		const char *why;

		pos += len + (e ? 1 : 0);
		line++;
		while (len && (s[len - 1] == '\r' || s[len - 1] == ' ' ||
			       s[len - 1] == '\t'))
			len--;
		while (len && (*s == ' ' || *s == '\t')) {
			s++;
			len--;
		}
		if (len == 0 || *s == '#')
			continue;
		if (nv == AUTH_KEYS_MAX) {
			errbuf_set(err, "line %zu: more than %d keys", line,
				   AUTH_KEYS_MAX);
			free(v);
			return -EINVAL;
		}
		if (nv == cap) {
			struct auth_key *nvp;

			cap = cap ? cap * 2 : 16;
			nvp = realloc(v, cap * sizeof(*v));
			if (!nvp) {
				free(v);
				return -ENOMEM;
			}
			v = nvp;
		}
		if (key_line(s, len, &v[nv], &why)) {
			errbuf_set(err, "line %zu: %s", line, why);
			free(v);
			return -EINVAL;
		}
		nv++;
	}
	if (nv)
		qsort(v, nv, sizeof(*v), key_cmp);
	for (i = 1; i < nv; i++)
		if (key_cmp(&v[i - 1], &v[i]) == 0) {
			errbuf_set(err, "keys '%s' and '%s' have the same hash",
				   v[i - 1].name, v[i].name);
			free(v);
			return -EINVAL;
		}
	free(g->keys);
	g->keys = v;
	g->n_keys = g->keys_cap = nv;
	g->api_keys = true;
	return 0;
}

int auth_gate_key_add(struct auth_gate *g, const char *name, const char *hex,
		      struct errbuf *err)
{
	char line[AUTH_KEY_NAME_MAX + 2 * SHA256_DIGEST_LENGTH + 8];
	struct auth_key *k;
	const char *why;
	int n;

	if (g->n_keys >= AUTH_KEYS_MAX) {
		errbuf_set(err, "more than %d keys", AUTH_KEYS_MAX);
		return -EINVAL;
	}
	n = snprintf(line, sizeof(line), "%s %s", name, hex);
	if (n < 0 || (size_t)n >= sizeof(line)) {
		errbuf_set(err, "a name of at most 63 characters and a "
				"SHA-256 of 64 hex digits");
		return -EINVAL;
	}
	k = keys_room(g);
	if (!k)
		return -ENOMEM;
	if (key_line(line, (size_t)n, k, &why)) {
		errbuf_set(err, "%s", why);
		return -EINVAL;
	}
	g->n_keys++;
	g->api_keys = true;
	return 0;
}

size_t auth_gate_keys_seal(struct auth_gate *g)
{
	size_t i, o = 0;

	if (g->n_keys < 2)
		return 0;
	qsort(g->keys, g->n_keys, sizeof(*g->keys), key_cmp);
	for (i = 0; i < g->n_keys; i++)
		if (o == 0 || key_cmp(&g->keys[o - 1], &g->keys[i]) != 0)
			g->keys[o++] = g->keys[i];
	i = g->n_keys - o;
	g->n_keys = o;
	return i;
}

static const struct auth_key *key_find(const struct auth_gate *g,
				       const char *key, size_t n)
{
	struct auth_key want;

	SHA256((const unsigned char *)key, n, want.sha);
	return g->n_keys
		   ? bsearch(&want, g->keys, g->n_keys, sizeof(want), key_cmp)
		   : NULL;
}

/* ---- JWT keys ------------------------------------------------------------ */

#define A(x) (1u << AUTH_ALG_##x)
static const unsigned kind_algs[] = {
    [JWK_RSA] = A(RS256) | A(RS384) | A(RS512) | A(PS256) | A(PS384) | A(PS512),
    [JWK_P256] = A(ES256),
    [JWK_P384] = A(ES384),
    [JWK_ED] = A(EdDSA),
    [JWK_OCT] = A(HS256) | A(HS384) | A(HS512),
};

/* The kind of a public key, or -1 (with why). */
/* Whether OpenSSL's public key check passes (an EC point on its curve
 * and of the group's order; an RSA modulus odd, e odd and over 1). */
static bool pkey_public_ok(EVP_PKEY *p)
{
	EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(NULL, p, NULL);
	bool ok = c && EVP_PKEY_public_check(c) == 1;

	EVP_PKEY_CTX_free(c);
	ERR_clear_error();
	return ok;
}

/* An RSA key edge checks tokens with: 2048 to 8192 bits, e odd, from 3
 * to 2^32 (e = 1 makes the "signature" the padded hash itself). */
static bool rsa_ok(EVP_PKEY *p, const char **why)
{
	BIGNUM *e = NULL;
	bool ok;

	if (EVP_PKEY_get_bits(p) < 2048 || EVP_PKEY_get_bits(p) > 8192) {
		*why = "an RSA key of fewer than 2048 or more than 8192 bits";
		return false;
	}
	ok = EVP_PKEY_get_bn_param(p, OSSL_PKEY_PARAM_RSA_E, &e) == 1 &&
	     BN_is_odd(e) && BN_num_bits(e) >= 2 && BN_num_bits(e) <= 32 &&
	     pkey_public_ok(p);
	BN_free(e);
	if (!ok)
		*why = "an RSA key whose exponent is not odd, from 3 to 2^32 "
		       "(or that fails OpenSSL's check)";
	return ok;
}

/* Whether Ed25519 public key a (32 bytes) is no point, not canonical, or
 * of small order (with such a key anyone makes signatures that verify):
 * decoded (RFC 8032 5.1.3) and doubled three times, a small-order point
 * (its order divides the cofactor 8) becomes the neutral (0, 1). */
static bool ed25519_weak(const uint8_t *a)
{
	BN_CTX *bc = BN_CTX_new();
	BIGNUM *p, *d, *y, *x, *u, *v, *t, *x2, *y2, *xy;
	uint8_t le[32];
	bool weak = true;
	int i;

	if (!bc)
		return true;
	BN_CTX_start(bc);
	p = BN_CTX_get(bc);
	d = BN_CTX_get(bc);
	y = BN_CTX_get(bc);
	x = BN_CTX_get(bc);
	u = BN_CTX_get(bc);
	v = BN_CTX_get(bc);
	t = BN_CTX_get(bc);
	x2 = BN_CTX_get(bc);
	y2 = BN_CTX_get(bc);
	xy = BN_CTX_get(bc);
	memcpy(le, a, 32);
	le[31] &= 0x7f; /* the sign of x: negating keeps the order */
	if (!xy || !BN_set_word(p, 1) || !BN_lshift(p, p, 255) ||
	    !BN_sub_word(p, 19) || !BN_lebin2bn(le, 32, y) || BN_cmp(y, p) >= 0)
		goto out;
	/* d = -121665 / 121666 */
	if (!BN_set_word(t, 121666) || !BN_mod_inverse(t, t, p, bc) ||
	    !BN_set_word(d, 121665) || !BN_mod_mul(d, d, t, p, bc) ||
	    !BN_mod_sub(d, p, d, p, bc))
		goto out;
	/* x^2 = (y^2 - 1) / (d y^2 + 1) */
	if (!BN_mod_sqr(y2, y, p, bc) || !BN_copy(u, y2) ||
	    !BN_mod_sub(u, u, BN_value_one(), p, bc) ||
	    !BN_mod_mul(v, d, y2, p, bc) ||
	    !BN_mod_add(v, v, BN_value_one(), p, bc) ||
	    !BN_mod_inverse(v, v, p, bc) || !BN_mod_mul(x2, u, v, p, bc))
		goto out;
	if (BN_is_zero(x2))
		BN_zero(x);
	else if (!BN_mod_sqrt(x, x2, p, bc))
		goto out; /* not on the curve */
	for (i = 0; i < 3; i++) {
		/* (x, y) doubled, a = -1: x' = 2xy / (y^2 - x^2),
		 * y' = (y^2 + x^2) / (2 - y^2 + x^2); never 0 on the curve */
		if (!BN_mod_sqr(x2, x, p, bc) || !BN_mod_sqr(y2, y, p, bc) ||
		    !BN_mod_mul(xy, x, y, p, bc) ||
		    !BN_mod_add(xy, xy, xy, p, bc) ||
		    !BN_mod_sub(u, y2, x2, p, bc) ||
		    !BN_mod_inverse(u, u, p, bc) ||
		    !BN_mod_mul(x, xy, u, p, bc) ||
		    !BN_mod_add(t, y2, x2, p, bc) || !BN_set_word(v, 2) ||
		    !BN_mod_sub(v, v, y2, p, bc) ||
		    !BN_mod_add(v, v, x2, p, bc) ||
		    !BN_mod_inverse(v, v, p, bc) || !BN_mod_mul(y, t, v, p, bc))
			goto out;
	}
	weak = BN_is_zero(x) && BN_is_one(y);
out:
	ERR_clear_error();
	BN_CTX_end(bc);
	BN_CTX_free(bc);
	return weak;
}

/* Whether Ed448 public key a (57 bytes) is not canonical or of small
 * order: the cofactor is 4, its points of small order (0, 1), (0, -1)
 * and (+-1, 0), so y 0, 1 or p - 1. */
static bool ed448_weak(const uint8_t *a)
{
	BIGNUM *p = BN_new(), *y = NULL, *t = BN_new();
	bool weak = true;

	if ((a[56] & 0x7f) == 0 && p && t && (y = BN_lebin2bn(a, 56, NULL)) &&
	    BN_set_word(p, 1) && BN_lshift(p, p, 448) && BN_set_word(t, 1) &&
	    BN_lshift(t, t, 224) && BN_sub(p, p, t) && BN_sub_word(p, 1) &&
	    BN_cmp(y, p) < 0 && BN_sub(t, p, BN_value_one()))
		weak = BN_is_zero(y) || BN_is_one(y) || BN_cmp(y, t) == 0;
	BN_free(p);
	BN_free(y);
	BN_free(t);
	return weak;
}

static bool ed_ok(EVP_PKEY *p, const char **why)
{
	uint8_t a[57];
	size_t n = sizeof(a);

	if (EVP_PKEY_get_raw_public_key(p, a, &n) != 1 ||
	    (n == 32 ? ed25519_weak(a) : n != 57 || ed448_weak(a))) {
		ERR_clear_error();
		*why = "an Ed25519 or Ed448 key that is not a valid point of "
		       "full order (one of small order lets anyone sign)";
		return false;
	}
	return true;
}

/* The kind of a public key after its checks, or -1 (with why). */
static int pkey_kind(EVP_PKEY *p, const char **why)
{
	char grp[64];
	size_t gl = 0;
	int kind = -1;

	if (EVP_PKEY_is_a(p, "RSA"))
		return rsa_ok(p, why) ? JWK_RSA : -1;
	if (EVP_PKEY_is_a(p, "ED25519") || EVP_PKEY_is_a(p, "ED448"))
		return ed_ok(p, why) ? JWK_ED : -1;
	if (EVP_PKEY_is_a(p, "EC") &&
	    EVP_PKEY_get_utf8_string_param(p, OSSL_PKEY_PARAM_GROUP_NAME, grp,
					   sizeof(grp), &gl) == 1) {
		if (strcmp(grp, "prime256v1") == 0 || strcmp(grp, "P-256") == 0)
			kind = JWK_P256;
		if (strcmp(grp, "secp384r1") == 0 || strcmp(grp, "P-384") == 0)
			kind = JWK_P384;
	}
	if (kind >= 0 && !pkey_public_ok(p)) {
		*why = "an EC key whose point fails OpenSSL's check";
		return -1;
	}
	if (kind < 0)
		*why = "a key that is not RSA, EC P-256/P-384, Ed25519 or "
		       "Ed448";
	return kind;
}

static int jwks_add(struct auth_jwk **v, size_t *n, struct auth_jwk *k,
		    struct errbuf *err)
{
	struct auth_jwk *nv;

	if (*n == AUTH_JWKS_MAX) {
		errbuf_set(err, "more than %d keys", AUTH_JWKS_MAX);
		jwk_clear(k);
		return -EINVAL;
	}
	nv = realloc(*v, (*n + 1) * sizeof(**v));
	if (!nv) {
		jwk_clear(k);
		return -ENOMEM;
	}
	*v = nv;
	nv[(*n)++] = *k;
	return 0;
}

/* PEM: public keys and certificates, in order; a private key refused. */
static int keys_pem(const char *buf, size_t n, struct auth_jwk **v, size_t *nv,
		    struct errbuf *err)
{
	BIO *b = BIO_new_mem_buf(buf, (int)n);
	int rc = 0, idx = 0;

	if (!b)
		return -ENOMEM;
	for (;;) {
		char *name = NULL, *hdr = NULL;
		unsigned char *data = NULL;
		const unsigned char *p;
		long len = 0;
		struct auth_jwk k = {0};
		const char *why = NULL;
		int kind;

		if (PEM_read_bio(b, &name, &hdr, &data, &len) != 1) {
			ERR_clear_error();
			break;
		}
		idx++;
		p = data;
		if (strcmp(name, "PUBLIC KEY") == 0) {
			k.pkey = d2i_PUBKEY(NULL, &p, len);
		} else if (strcmp(name, "CERTIFICATE") == 0) {
			X509 *x = d2i_X509(NULL, &p, len);

			k.pkey = x ? X509_get_pubkey(x) : NULL;
			X509_free(x);
		} else if (strstr(name, "PRIVATE KEY")) {
			why = "a private key: give the public key "
			      "(openssl pkey -pubout)";
		} else {
			why = "neither PUBLIC KEY nor CERTIFICATE";
		}
		OPENSSL_free(name);
		OPENSSL_free(hdr);
		OPENSSL_free(data);
		if (!why && !k.pkey)
			why = "not a key OpenSSL reads";
		if (!why && (kind = pkey_kind(k.pkey, &why)) >= 0) {
			k.kind = (enum jwk_kind)kind;
			k.algs = kind_algs[kind];
		}
		if (why) {
			ERR_clear_error();
			jwk_clear(&k);
			errbuf_set(err, "PEM block %d: %s", idx, why);
			rc = -EINVAL;
			break;
		}
		rc = jwks_add(v, nv, &k, err);
		if (rc)
			break;
	}
	BIO_free(b);
	if (rc == 0 && *nv == 0) {
		errbuf_set(err, "no PUBLIC KEY or CERTIFICATE block");
		rc = -EINVAL;
	}
	return rc;
}

/* A base64url member of o, decoded into a malloc'd *out. */
static int jwk_bytes(const json_t *o, const char *m, size_t max, uint8_t **out,
		     size_t *len)
{
	const json_t *s = json_object_get(o, m);
	const char *t;
	size_t n;
	long d;

	if (!json_is_string(s))
		return -EINVAL;
	t = json_string_value(s);
	n = json_string_length(s);
	if (n == 0 || n > max * 4 / 3 + 4)
		return -EINVAL;
	*out = malloc(n * 3 / 4 + 1);
	if (!*out)
		return -ENOMEM;
	d = b64url_decode(t, n, *out);
	if (d <= 0) {
		free(*out);
		*out = NULL;
		return -EINVAL;
	}
	*len = (size_t)d;
	return 0;
}

static EVP_PKEY *pkey_fromdata(const char *type, OSSL_PARAM_BLD *bld)
{
	OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
	EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
	EVP_PKEY *p = NULL;

	if (params && c && EVP_PKEY_fromdata_init(c) == 1 &&
	    EVP_PKEY_fromdata(c, &p, EVP_PKEY_PUBLIC_KEY, params) != 1)
		p = NULL;
	EVP_PKEY_CTX_free(c);
	OSSL_PARAM_free(params);
	return p;
}

static EVP_PKEY *jwk_rsa(const json_t *o)
{
	uint8_t *n = NULL, *e = NULL;
	size_t nl = 0, el = 0;
	BIGNUM *bn = NULL, *be = NULL;
	OSSL_PARAM_BLD *bld = NULL;
	EVP_PKEY *p = NULL;

	if (jwk_bytes(o, "n", 2048, &n, &nl) || jwk_bytes(o, "e", 16, &e, &el))
		goto out;
	bn = BN_bin2bn(n, (int)nl, NULL);
	be = BN_bin2bn(e, (int)el, NULL);
	bld = OSSL_PARAM_BLD_new();
	if (bn && be && bld &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) == 1 &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be) == 1)
		p = pkey_fromdata("RSA", bld);
out:
	OSSL_PARAM_BLD_free(bld);
	BN_free(bn);
	BN_free(be);
	free(n);
	free(e);
	return p;
}

static EVP_PKEY *jwk_ec(const json_t *o, const char *group, size_t clen)
{
	uint8_t *x = NULL, *y = NULL, pub[1 + 2 * 66];
	size_t xl = 0, yl = 0;
	OSSL_PARAM_BLD *bld = NULL;
	EVP_PKEY *p = NULL;

	if (jwk_bytes(o, "x", clen, &x, &xl) ||
	    jwk_bytes(o, "y", clen, &y, &yl) || xl != clen || yl != clen)
		goto out;
	pub[0] = 0x04;
	memcpy(pub + 1, x, clen);
	memcpy(pub + 1 + clen, y, clen);
	bld = OSSL_PARAM_BLD_new();
	if (bld &&
	    OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME,
					    group, 0) == 1 &&
	    OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pub,
					     1 + 2 * clen) == 1)
		p = pkey_fromdata("EC", bld);
out:
	OSSL_PARAM_BLD_free(bld);
	free(x);
	free(y);
	return p;
}

/* One JWKS member into k: 1 when it is one edge checks, 0 when it is
 * to be passed over (another use, another type), -EINVAL / -ENOMEM. */
static int jwk_one(const json_t *o, struct auth_jwk *k, const char **why)
{
	const char *kty = json_string_value(json_object_get(o, "kty"));
	const char *use = json_string_value(json_object_get(o, "use"));
	const char *crv = json_string_value(json_object_get(o, "crv"));
	const json_t *kid = json_object_get(o, "kid");
	const json_t *alg = json_object_get(o, "alg");
	int kind = -1;

	if (!json_is_object(o) || !kty) {
		*why = "a key without \"kty\"";
		return -EINVAL;
	}
	if (use && strcmp(use, "sig") != 0)
		return 0;
	if (strcmp(kty, "RSA") == 0) {
		k->pkey = jwk_rsa(o);
		kind = JWK_RSA;
	} else if (strcmp(kty, "EC") == 0 && crv && strcmp(crv, "P-256") == 0) {
		k->pkey = jwk_ec(o, "prime256v1", 32);
		kind = JWK_P256;
	} else if (strcmp(kty, "EC") == 0 && crv && strcmp(crv, "P-384") == 0) {
		k->pkey = jwk_ec(o, "secp384r1", 48);
		kind = JWK_P384;
	} else if (strcmp(kty, "OKP") == 0 && crv &&
		   (strcmp(crv, "Ed25519") == 0 || strcmp(crv, "Ed448") == 0)) {
		bool ed448 = strcmp(crv, "Ed448") == 0;
		uint8_t *x = NULL;
		size_t xl = 0;

		if (jwk_bytes(o, "x", 57, &x, &xl) == 0 &&
		    xl == (ed448 ? 57u : 32u))
			k->pkey = EVP_PKEY_new_raw_public_key(
			    ed448 ? EVP_PKEY_ED448 : EVP_PKEY_ED25519, NULL, x,
			    xl);
		free(x);
		kind = JWK_ED;
	} else if (strcmp(kty, "oct") == 0) {
		kind = JWK_OCT;
		if (jwk_bytes(o, "k", 1024, &k->secret, &k->secret_len) ||
		    k->secret_len < 32) {
			*why =
			    "an \"oct\" key needs \"k\" of at least 32 bytes";
			return -EINVAL;
		}
	} else {
		return 0; /* a type or curve edge does not check */
	}
	ERR_clear_error();
	if (kind != JWK_OCT && !k->pkey) {
		*why = "a key whose parameters are not a valid key";
		return -EINVAL;
	}
	if (kind != JWK_OCT && pkey_kind(k->pkey, why) != kind)
		return -EINVAL;
	k->kind = (enum jwk_kind)kind;
	k->algs = kind_algs[kind];
	if (alg) {
		int a = json_is_string(alg)
			    ? auth_alg_parse(json_string_value(alg),
					     json_string_length(alg))
			    : -1;

		if (a < 0 || !(kind_algs[kind] & 1u << a)) {
			*why = "an \"alg\" that is not one for the key's type";
			return -EINVAL;
		}
		k->algs = 1u << a;
	}
	if (kid && (!json_is_string(kid) || json_string_length(kid) > 256)) {
		*why = "a \"kid\" that is not a string (of at most 256)";
		return -EINVAL;
	}
	if (kid && !(k->kid = strdup(json_string_value(kid))))
		return -ENOMEM;
	return 1;
}

static int keys_jwks(const char *buf, size_t n, struct auth_jwk **v, size_t *nv,
		     struct errbuf *err)
{
	json_error_t je;
	json_t *doc = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &je);
	const json_t *keys = json_object_get(doc, "keys");
	size_t i;
	int rc = 0;

	if (!doc) {
		errbuf_set(err, "JWKS: line %d: %s", je.line, je.text);
		return -EINVAL;
	}
	if (!json_is_array(keys)) {
		json_decref(doc);
		errbuf_set(err, "JWKS: no \"keys\" array");
		return -EINVAL;
	}
	for (i = 0; i < json_array_size(keys) && rc == 0; i++) {
		struct auth_jwk k = {0};
		const char *why = "out of memory";

		rc = jwk_one(json_array_get(keys, i), &k, &why);
		if (rc == 1)
			rc = jwks_add(v, nv, &k, err);
		else if (rc < 0) {
			jwk_clear(&k);
			if (rc == -EINVAL)
				errbuf_set(err, "JWKS: keys[%zu]: %s", i, why);
		}
		if (rc == 1)
			rc = 0;
	}
	json_decref(doc);
	if (rc == 0 && *nv == 0) {
		errbuf_set(err, "JWKS: no signing key edge checks (RSA, EC "
				"P-256/P-384, OKP Ed25519/Ed448, oct)");
		rc = -EINVAL;
	}
	return rc;
}

int auth_gate_jwt(struct auth_gate *g, const char *buf, size_t n, unsigned algs,
		  const char *issuer, const char *audience, unsigned leeway_s,
		  struct errbuf *err)
{
	struct auth_jwk *v = NULL;
	size_t nv = 0, i;
	unsigned have = 0;
	int rc, a;

	while (n &&
	       (*buf == ' ' || *buf == '\t' || *buf == '\n' || *buf == '\r')) {
		buf++;
		n--;
	}
	rc = n && *buf == '{' ? keys_jwks(buf, n, &v, &nv, err)
			      : keys_pem(buf, n, &v, &nv, err);
	if (rc) {
		jwks_free(v, nv);
		return rc;
	}
	if (!algs || leeway_s > AUTH_LEEWAY_MAX_S) {
		jwks_free(v, nv);
		errbuf_set(err, "no algorithm allowed, or leeway over %ds",
			   AUTH_LEEWAY_MAX_S);
		return -EINVAL;
	}
	for (i = 0; i < nv; i++)
		have |= v[i].algs;
	for (a = 0; a < AUTH_ALG_N; a++)
		if (algs & 1u << a && !(have & 1u << a)) {
			jwks_free(v, nv);
			errbuf_set(err,
				   "algorithm %s: none of the %zu keys is "
				   "for it%s",
				   alg_names[a], nv,
				   a >= AUTH_ALG_HS256
				       ? " (HMAC needs a JWKS \"oct\" key)"
				       : "");
			return -EINVAL;
		}
	jwks_free(g->jwks, g->n_jwks);
	free(g->issuer);
	free(g->audience);
	g->jwks = v;
	g->n_jwks = nv;
	g->algs = algs;
	g->leeway_s = leeway_s;
	g->issuer = issuer ? strdup(issuer) : NULL;
	g->audience = audience ? strdup(audience) : NULL;
	if ((issuer && !g->issuer) || (audience && !g->audience))
		return -ENOMEM;
	g->jwt = true;
	return 0;
}

int auth_gate_jwt_json(struct auth_gate *g, const json_t *o, struct errbuf *err)
{
	static const char *const known[] = {
	    "keys",   "issuer",	     "audience", "algorithms",
	    "leeway", "copy_claims", NULL};
	const json_t *keys = json_object_get(o, "keys");
	const json_t *iss = json_object_get(o, "issuer");
	const json_t *aud = json_object_get(o, "audience");
	const json_t *al = json_object_get(o, "algorithms");
	const json_t *lw = json_object_get(o, "leeway");
	const json_t *cc = json_object_get(o, "copy_claims"), *v;
	const char *k, *const *kn;
	unsigned algs = 0;
	uint64_t ms = 0;
	char *text = NULL;
	size_t i;
	int rc, a;

	if (!json_is_object(o)) {
		errbuf_set(err, "jwt: a JSON object");
		return -EINVAL;
	}
	json_object_foreach((json_t *)o, k, v)
	{
		for (kn = known; *kn && strcmp(*kn, k) != 0; kn++)
			;
		if (!*kn) {
			errbuf_set(err, "jwt: unknown key \"%.40s\"", k);
			return -EINVAL;
		}
	}
	if ((iss && (!json_is_string(iss) || !json_string_length(iss))) ||
	    (aud && (!json_is_string(aud) || !json_string_length(aud))) ||
	    (lw && !json_is_string(lw)) || (al && !json_is_array(al)) ||
	    (cc && !json_is_array(cc)) ||
	    !(json_is_object(keys) || json_is_string(keys))) {
		errbuf_set(err,
			   "jwt: keys (a JWKS object or PEM text) is "
			   "required; issuer, audience (not empty) and "
			   "leeway are strings, algorithms and copy_claims "
			   "lists");
		return -EINVAL;
	}
	json_array_foreach(al, i, v)
	{
		a = json_is_string(v) ? auth_alg_parse(json_string_value(v),
						       json_string_length(v))
				      : -1;
		if (a < 0) {
			errbuf_set(err,
				   "jwt: algorithms[%zu]: not one of "
				   "RS256 ... HS512",
				   i);
			return -EINVAL;
		}
		algs |= 1u << a;
	}
	if (al && !algs) {
		errbuf_set(err, "jwt: algorithms: at least one");
		return -EINVAL;
	}
	if (lw) {
		const char *s = json_string_value(lw);

		if (strcmp(s, "0s") != 0 && strcmp(s, "0") != 0 &&
		    duration_parse_ms(s, AUTH_LEEWAY_MAX_S * 1000ULL, &ms,
				      err)) {
			return -EINVAL;
		}
	}
	if (json_is_object(keys)) {
		text = json_dumps(keys, JSON_COMPACT);
		if (!text)
			return -ENOMEM;
	}
	rc = auth_gate_jwt(
	    g, text ? text : json_string_value(keys),
	    text ? strlen(text) : json_string_length(keys),
	    algs ? algs : AUTH_ALGS_DEFAULT,
	    iss && json_string_length(iss) ? json_string_value(iss) : NULL,
	    aud && json_string_length(aud) ? json_string_value(aud) : NULL,
	    (unsigned)(ms / 1000), err);
	free(text);
	json_array_foreach(cc, i, v)
	{
		if (rc)
			break;
		if (!json_is_string(v)) {
			errbuf_set(err, "jwt: copy_claims[%zu]: a string", i);
			return -EINVAL;
		}
		rc = auth_gate_copy_claim(g, json_string_value(v), err);
	}
	return rc;
}

int auth_gate_copy_claim(struct auth_gate *g, const char *name,
			 struct errbuf *err)
{
	size_t i, n = strlen(name);

	for (i = 0; i < n; i++)
		if (!key_name_char((unsigned char)name[i]) || name[i] == '.' ||
		    name[i] == '@')
			break;
	if (n == 0 || n > AUTH_CLAIM_NAME_MAX || i < n) {
		errbuf_set(err,
			   "claim \"%.64s\": letters, digits, '_' and '-', "
			   "at most %d",
			   name, AUTH_CLAIM_NAME_MAX);
		return -EINVAL;
	}
	for (i = 0; i < g->n_claims; i++)
		if (strcasecmp(g->claims[i], name) == 0) {
			errbuf_set(err, "claim \"%s\" named twice", name);
			return -EINVAL;
		}
	if (g->n_claims == AUTH_CLAIMS_MAX) {
		errbuf_set(err, "more than %d claims", AUTH_CLAIMS_MAX);
		return -EINVAL;
	}
	if (!(g->claims[g->n_claims] = strdup(name)))
		return -ENOMEM;
	g->n_claims++;
	return 0;
}

/* ---- checking a JWT ------------------------------------------------------ */

static const EVP_MD *alg_md(enum auth_alg a)
{
	switch (a) {
	case AUTH_ALG_RS256:
	case AUTH_ALG_PS256:
	case AUTH_ALG_ES256:
	case AUTH_ALG_HS256:
		return EVP_sha256();
	case AUTH_ALG_RS384:
	case AUTH_ALG_PS384:
	case AUTH_ALG_ES384:
	case AUTH_ALG_HS384:
		return EVP_sha384();
	case AUTH_ALG_RS512:
	case AUTH_ALG_PS512:
	case AUTH_ALG_HS512:
		return EVP_sha512();
	default:
		return NULL; /* EdDSA: the key's own */
	}
}

/* ECDSA's JWS form (r || s, each clen bytes) as DER into *der. */
static int ecdsa_der(const uint8_t *sig, size_t n, size_t clen, uint8_t **der)
{
	ECDSA_SIG *s;
	BIGNUM *r, *ss;
	int len;

	if (n != 2 * clen)
		return -1;
	s = ECDSA_SIG_new();
	r = BN_bin2bn(sig, (int)clen, NULL);
	ss = BN_bin2bn(sig + clen, (int)clen, NULL);
	if (!s || !r || !ss || ECDSA_SIG_set0(s, r, ss) != 1) {
		ECDSA_SIG_free(s);
		BN_free(r);
		BN_free(ss);
		return -1;
	}
	*der = NULL;
	len = i2d_ECDSA_SIG(s, der);
	ECDSA_SIG_free(s);
	return len;
}

static bool jwk_verify(const struct auth_jwk *k, enum auth_alg a,
		       const uint8_t *data, size_t dn, const uint8_t *sig,
		       size_t sn)
{
	const EVP_MD *md = alg_md(a);
	EVP_MD_CTX *c;
	EVP_PKEY_CTX *pc = NULL;
	uint8_t *der = NULL;
	bool ok = false;

	if (k->kind == JWK_OCT) {
		uint8_t mac[EVP_MAX_MD_SIZE];
		unsigned ml = 0;

		return HMAC(md, k->secret, (int)k->secret_len, data, dn, mac,
			    &ml) &&
		       ml == sn && CRYPTO_memcmp(mac, sig, sn) == 0;
	}
	if (k->kind == JWK_P256 || k->kind == JWK_P384) {
		int len =
		    ecdsa_der(sig, sn, k->kind == JWK_P256 ? 32 : 48, &der);

		if (len <= 0)
			return false;
		sig = der;
		sn = (size_t)len;
	}
	c = EVP_MD_CTX_new();
	if (c && EVP_DigestVerifyInit(c, &pc, md, NULL, k->pkey) == 1 &&
	    (a < AUTH_ALG_PS256 || a > AUTH_ALG_PS512 ||
	     (EVP_PKEY_CTX_set_rsa_padding(pc, RSA_PKCS1_PSS_PADDING) == 1 &&
	      EVP_PKEY_CTX_set_rsa_pss_saltlen(pc, RSA_PSS_SALTLEN_DIGEST) ==
		  1)))
		ok = EVP_DigestVerify(c, sig, sn, data, dn) == 1;
	EVP_MD_CTX_free(c);
	OPENSSL_free(der);
	ERR_clear_error();
	return ok;
}

/* A base64url part (n characters) decoded and parsed as a JSON object. */
static json_t *jwt_json(const char *s, size_t n)
{
	uint8_t *d = malloc(n * 3 / 4 + 1);
	json_t *j = NULL;
	long dl;

	if (!d)
		return NULL;
	dl = b64url_decode(s, n, d);
	if (dl > 0)
		j = json_loadb((const char *)d, (size_t)dl,
			       JSON_REJECT_DUPLICATES, NULL);
	free(d);
	if (j && !json_is_object(j)) {
		json_decref(j);
		j = NULL;
	}
	return j;
}

/* A NumericDate claim: 0 absent, 1 read into *v, -1 not a number. */
static int jwt_time(const json_t *claims, const char *name, double *v)
{
	const json_t *t = json_object_get(claims, name);

	if (!t)
		return 0;
	if (!json_is_number(t))
		return -1;
	*v = json_number_value(t);
	return 1;
}

static bool jwt_aud_has(const json_t *aud, const char *want)
{
	size_t i;
	const json_t *e;

	if (json_is_string(aud))
		return strcmp(json_string_value(aud), want) == 0;
	json_array_foreach(aud, i, e)
	{
		if (json_is_string(e) &&
		    strcmp(json_string_value(e), want) == 0)
			return true;
	}
	return false;
}

/* Append "X-Jwt-Claim-NAME: VALUE\r\n" for each claim present whose
 * value is a header field's (visible ASCII and spaces, at most
 * AUTH_CLAIM_VALUE_MAX); others are left out. -ENOMEM or 0. */
static int jwt_fields(const struct auth_gate *g, const json_t *claims,
		      struct auth_out *out)
{
	size_t i, cap = 0, len = 0;
	char *buf = NULL;

	for (i = 0; i < g->n_claims; i++) {
		const json_t *c = json_object_get(claims, g->claims[i]);
		char *dump = NULL, *nb;
		const char *v;
		size_t vl, j, need;
		bool ok = true;

		if (!c || json_is_null(c))
			continue;
		if (json_is_string(c)) {
			v = json_string_value(c);
			vl = json_string_length(c);
		} else {
			dump = json_dumps(c, JSON_COMPACT | JSON_ENCODE_ANY);
			if (!dump) {
				free(buf);
				return -ENOMEM;
			}
			v = dump;
			vl = strlen(dump);
		}
		for (j = 0; j < vl && ok; j++)
			ok = (unsigned char)v[j] >= 0x20 &&
			     (unsigned char)v[j] < 0x7f;
		if (ok && vl && (v[0] == ' ' || v[vl - 1] == ' '))
			ok = false;
		if (!ok || vl > AUTH_CLAIM_VALUE_MAX) {
			free(dump);
			continue;
		}
		need = len + sizeof(AUTH_CLAIM_PREFIX) + strlen(g->claims[i]) +
		       2 + vl + 3;
		if (need > cap) {
			cap = need * 2;
			nb = realloc(buf, cap);
			if (!nb) {
				free(dump);
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
		}
		len += (size_t)snprintf(buf + len, cap - len, "%s%s: %.*s\r\n",
					AUTH_CLAIM_PREFIX, g->claims[i],
					(int)vl, v);
		free(dump);
	}
	out->fields = buf;
	out->fields_len = len;
	return 0;
}

/* ---- the tokens checked lately ------------------------------------------- */

/*
 * Each worker thread keeps the tokens it admitted lately (a signature
 * check costs more than the rest of a request): found by the gate's id
 * and a SipHash of the token, then compared whole, so only the very
 * token is taken again, and only until its exp. A gate's id is never
 * reused, so a token admitted under a gate since replaced is checked
 * anew.
 */

/* A token of gate g admitted lately (kcache.h, its deadline the exp
 * plus leeway): OK with out's fields copied, or EXPIRED (then
 * forgotten); -1 when not cached. */
static int jwt_cache_find(const struct auth_gate *g, const char *t, size_t n,
			  uint64_t now, struct auth_out *out)
{
	switch (kcache_find(KCACHE_JWT, g->id, t, n, (double)now, &out->fields,
			    &out->fields_len)) {
	case KCACHE_HIT:
		return AUTH_R_OK;
	case KCACHE_EXPIRED:
		return AUTH_R_EXPIRED;
	default:
		return -1;
	}
}

static enum auth_result jwt_check(const struct auth_gate *g, const char *t,
				  size_t n, uint64_t now, struct auth_out *out)
{
	double exp = -1;
	int hit = jwt_cache_find(g, t, n, now, out);

	if (hit >= 0)
		return (enum auth_result)hit;
	const char *d1 = memchr(t, '.', n), *d2;
	json_t *hdr = NULL, *claims = NULL;
	enum auth_result r = AUTH_R_MALFORMED;
	const json_t *ja, *jk;
	uint8_t *sig = NULL;
	long sl;
	size_t i;
	int a, tr;
	double v;
	bool tried = false, ok = false;
	unsigned tries = 0;

	d2 = d1 ? memchr(d1 + 1, '.', (size_t)(t + n - d1 - 1)) : NULL;
	if (!d2 || d1 == t || d2 == d1 + 1)
		return AUTH_R_MALFORMED;
	hdr = jwt_json(t, (size_t)(d1 - t));
	if (!hdr)
		goto out;
	ja = json_object_get(hdr, "alg");
	jk = json_object_get(hdr, "kid");
	if (!json_is_string(ja) || (jk && !json_is_string(jk)) ||
	    json_object_get(hdr, "crit"))
		goto out;
	a = auth_alg_parse(json_string_value(ja), json_string_length(ja));
	if (a < 0 || !(g->algs & 1u << a)) {
		r = AUTH_R_ALG_REFUSED; /* "none" among them */
		goto out;
	}
	sig = malloc((size_t)(t + n - d2 - 1) * 3 / 4 + 1);
	if (!sig)
		goto out;
	sl = b64url_decode(d2 + 1, (size_t)(t + n - d2 - 1), sig);
	if (sl <= 0)
		goto out;
	for (i = 0; i < g->n_jwks && !ok && tries < AUTH_TRIES_MAX; i++) {
		const struct auth_jwk *k = &g->jwks[i];

		/* a kid picks its key; a key without one (PEM) is tried */
		if (!(k->algs & 1u << a) ||
		    (jk && k->kid && strcmp(k->kid, json_string_value(jk))))
			continue;
		tried = true;
		tries++;
		ok = jwk_verify(k, (enum auth_alg)a, (const uint8_t *)t,
				(size_t)(d2 - t), sig, (size_t)sl);
	}
	if (!ok) {
		r = tried ? AUTH_R_BAD_SIGNATURE : AUTH_R_UNKNOWN_KEY;
		goto out;
	}
	claims = jwt_json(d1 + 1, (size_t)(d2 - d1 - 1));
	if (!claims)
		goto out;
	if ((tr = jwt_time(claims, "exp", &v)) < 0)
		goto out;
	if (tr)
		exp = v < 0 ? 0 : v;
	if (tr && (double)now >= v + g->leeway_s) {
		r = AUTH_R_EXPIRED;
		goto out;
	}
	if ((tr = jwt_time(claims, "nbf", &v)) < 0)
		goto out;
	if (tr && (double)now + g->leeway_s < v) {
		r = AUTH_R_NOT_YET_VALID;
		goto out;
	}
	if (g->issuer) {
		const char *iss =
		    json_string_value(json_object_get(claims, "iss"));

		if (!iss || strcmp(iss, g->issuer) != 0) {
			r = AUTH_R_WRONG_ISSUER;
			goto out;
		}
	}
	if (g->audience &&
	    !jwt_aud_has(json_object_get(claims, "aud"), g->audience)) {
		r = AUTH_R_WRONG_AUDIENCE;
		goto out;
	}
	r = jwt_fields(g, claims, out) ? AUTH_R_MALFORMED : AUTH_R_OK;
	if (r == AUTH_R_OK)
		kcache_add(KCACHE_JWT, g->id, t, n,
			   exp < 0 ? -1 : exp + g->leeway_s, out->fields,
			   out->fields_len);
out:
	free(sig);
	json_decref(hdr);
	json_decref(claims);
	return r;
}

/* ---- the check ------------------------------------------------------------
 */

static bool token_char(unsigned char c)
{
	return c > 0x20 && c < 0x7f;
}

/* The single field named lit: its value, or NULL (absent); *dup is set
 * when it comes more than once. */
static const struct h1_header *one_field(const struct h1_head *h,
					 const char *lit, bool *dup)
{
	const struct h1_header *f = NULL;
	size_t n = strlen(lit);
	unsigned i;

	for (i = 0; i < h->nheaders; i++)
		if (h->headers[i].name_len == n &&
		    h1_eq_n(h->headers[i].name, lit, n)) {
			if (f)
				*dup = true;
			f = &h->headers[i];
		}
	return f;
}

enum auth_result auth_check(const struct auth_gate *g, const struct h1_head *h,
			    uint64_t now, struct auth_out *out)
{
	const struct h1_header *az, *xk;
	const char *t = NULL;
	size_t n = 0, i, dots = 0;
	bool dup = false;
	const struct auth_key *k;

	out->method = AUTH_M_NONE;
	out->fields = NULL;
	out->fields_len = 0;
	az = one_field(h, "authorization", &dup);
	xk = g->api_keys ? one_field(h, "x-api-key", &dup) : NULL;
	if (dup)
		return AUTH_R_MALFORMED;
	if (az) {
		if (az->value_len < 7 || !h1_eq_n(az->value, "bearer ", 7))
			return az->value_len ? AUTH_R_MALFORMED
					     : AUTH_R_MISSING;
		t = az->value + 7;
		n = az->value_len - 7;
		while (n && *t == ' ') {
			t++;
			n--;
		}
	} else if (xk) {
		t = xk->value;
		n = xk->value_len;
	}
	if (!t)
		return AUTH_R_MISSING;
	for (i = 0; i < n; i++) {
		if (!token_char((unsigned char)t[i]))
			return AUTH_R_MALFORMED;
		dots += t[i] == '.';
	}
	if (g->jwt && dots == 2 && (az || !g->api_keys)) {
		out->method = AUTH_M_JWT;
		if (n > AUTH_TOKEN_MAX)
			return AUTH_R_MALFORMED;
		return jwt_check(g, t, n, now, out);
	}
	if (!g->api_keys) {
		out->method = AUTH_M_JWT;
		return n ? AUTH_R_MALFORMED : AUTH_R_MISSING;
	}
	out->method = AUTH_M_API_KEY;
	if (n == 0 || n > AUTH_KEY_TEXT_MAX)
		return n ? AUTH_R_MALFORMED : AUTH_R_MISSING;
	k = key_find(g, t, n);
	if (!k)
		return AUTH_R_UNKNOWN_KEY;
	n = sizeof(AUTH_KEY_NAME_FIELD) + 2 + strlen(k->name) + 3;
	out->fields = malloc(n);
	if (!out->fields)
		return AUTH_R_MALFORMED;
	out->fields_len = (size_t)snprintf(out->fields, n, "%s: %s\r\n",
					   AUTH_KEY_NAME_FIELD, k->name);
	return AUTH_R_OK;
}

/* name's first n bytes are lit's, case aside and '_' read as '-' (CGI
 * servers make HTTP_X_JWT_CLAIM_SUB of both spellings). */
static bool field_eq_n(const char *name, const char *lit, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char a = h1_lower((unsigned char)name[i]);
		unsigned char b = h1_lower((unsigned char)lit[i]);

		if ((a == '_' ? '-' : a) != (b == '_' ? '-' : b))
			return false;
	}
	return true;
}

bool auth_field_reserved(const char *name, size_t n)
{
	static const size_t pl = sizeof(AUTH_CLAIM_PREFIX) - 1;

	return (n >= pl && field_eq_n(name, AUTH_CLAIM_PREFIX, pl)) ||
	       (n == sizeof(AUTH_KEY_NAME_FIELD) - 1 &&
		field_eq_n(name, AUTH_KEY_NAME_FIELD, n));
}

const char *auth_challenge_header(enum auth_result r)
{
	switch (r) {
	case AUTH_R_MISSING:
		return "Bearer realm=\"edge\"";
	case AUTH_R_MALFORMED:
		return "Bearer realm=\"edge\", error=\"invalid_request\"";
	default:
		return "Bearer realm=\"edge\", error=\"invalid_token\"";
	}
}
