/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * acme_chal.c - the ACME challenges this edged answers (acme_chal.h): a
 * small array under a read-write lock; lookups are linear (a handful of
 * entries live at a time, each for the minutes of an order).
 */
#include "acme_chal.h"

#include <errno.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "acme.h"

struct acme_chal {
	enum acme_chal_origin origin;
	enum acme_chal_type type;
	char name[ACME_NAME_MAX + 1];
	char token[ACME_CHAL_TOKEN_MAX + 1];
	char ka[ACME_CHAL_KEYAUTH_MAX + 1];
	SSL_CTX *ctx; /* tls-alpn-01's */
};

static pthread_rwlock_t chal_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct acme_chal *chal_v;
static size_t chal_n, chal_cap;

static const unsigned char chal_alpn[] = "\x0a"
					 "acme-tls/1";

const char *acme_chal_type_name(enum acme_chal_type t)
{
	return t == ACME_CHAL_TLSALPN01 ? "tls-alpn-01" : "http-01";
}

int acme_chal_type_parse(const char *s)
{
	if (s && strcmp(s, "http-01") == 0)
		return ACME_CHAL_HTTP01;
	if (s && strcmp(s, "tls-alpn-01") == 0)
		return ACME_CHAL_TLSALPN01;
	return -1;
}

static bool chal_token_ok(const char *t)
{
	size_t n = strlen(t), i;

	if (n == 0 || n > ACME_CHAL_TOKEN_MAX)
		return false;
	for (i = 0; i < n; i++) {
		char c = t[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (c >= '0' && c <= '9') || c == '-' || c == '_'))
			return false;
	}
	return true;
}

/* The key authorization: TOKEN "." THUMBPRINT, base64url both. */
static bool chal_ka_ok(const char *ka, const char *token)
{
	size_t tn = strlen(token), n = strlen(ka), i;

	if (n > ACME_CHAL_KEYAUTH_MAX || n <= tn + 1 ||
	    strncmp(ka, token, tn) != 0 || ka[tn] != '.')
		return false;
	for (i = tn + 1; i < n; i++) {
		char c = ka[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (c >= '0' && c <= '9') || c == '-' || c == '_'))
			return false;
	}
	return true;
}

static int chal_alpn_cb(SSL *ssl, const unsigned char **out,
			unsigned char *outlen, const unsigned char *in,
			unsigned int inlen, void *arg)
{
	unsigned char *o;

	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto(&o, outlen, chal_alpn, sizeof(chal_alpn) - 1,
				  in, inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	*out = o;
	return SSL_TLSEXT_ERR_OK;
}

static int chal_sni_cb(SSL *ssl, int *al, void *arg)
{
	(void)ssl;
	(void)al;
	(void)arg;
	return SSL_TLSEXT_ERR_OK;
}

/* The context serving name's tls-alpn-01 certificate for ka. */
static SSL_CTX *chal_ctx_new(const char *name, const char *ka)
{
	EVP_PKEY *key = acme_key_new();
	X509 *x = key ? acme_tls_alpn_cert(key, name, ka) : NULL;
	SSL_CTX *ctx = x ? SSL_CTX_new(TLS_server_method()) : NULL;

	if (ctx && (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
		    SSL_CTX_use_certificate(ctx, x) != 1 ||
		    SSL_CTX_use_PrivateKey(ctx, key) != 1)) {
		SSL_CTX_free(ctx);
		ctx = NULL;
	}
	if (ctx) {
		/* the store's servername callback is not asked: the
		 * handshake stays on this context */
		SSL_CTX_set_tlsext_servername_callback(ctx, chal_sni_cb);
		SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
		SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
		SSL_CTX_set_alpn_select_cb(ctx, chal_alpn_cb, NULL);
	}
	X509_free(x);
	EVP_PKEY_free(key);
	return ctx;
}

static void chal_clear_one(struct acme_chal *c)
{
	SSL_CTX_free(c->ctx);
	c->ctx = NULL;
}

/* Fill c from r (not yet in the table). */
static int chal_make(struct acme_chal *c, enum acme_chal_origin origin,
		     const struct acme_chal_row *r)
{
	memset(c, 0, sizeof(*c));
	if (!r->name || !r->token || !r->key_authorization ||
	    !acme_name_ok(r->name) || !chal_token_ok(r->token) ||
	    !chal_ka_ok(r->key_authorization, r->token) ||
	    (r->type != ACME_CHAL_HTTP01 && r->type != ACME_CHAL_TLSALPN01))
		return -EINVAL;
	c->origin = origin;
	c->type = r->type;
	snprintf(c->name, sizeof(c->name), "%s", r->name);
	snprintf(c->token, sizeof(c->token), "%s", r->token);
	snprintf(c->ka, sizeof(c->ka), "%s", r->key_authorization);
	if (c->type == ACME_CHAL_TLSALPN01 &&
	    !(c->ctx = chal_ctx_new(c->name, c->ka)))
		return -EIO;
	return 0;
}

static struct acme_chal *chal_find(enum acme_chal_origin origin,
				   const char *token)
{
	size_t i;

	for (i = 0; i < chal_n; i++)
		if (chal_v[i].origin == origin &&
		    strcmp(chal_v[i].token, token) == 0)
			return &chal_v[i];
	return NULL;
}

/* Room for one more entry (the write lock held). */
static int chal_room(void)
{
	struct acme_chal *v;
	size_t cap;

	if (chal_n < chal_cap)
		return 0;
	if (chal_n >= ACME_CHAL_MAX)
		return -ENOSPC;
	cap = chal_cap ? chal_cap * 2 : 8;
	if (cap > ACME_CHAL_MAX)
		cap = ACME_CHAL_MAX;
	v = realloc(chal_v, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	chal_v = v;
	chal_cap = cap;
	return 0;
}

int acme_chal_add(enum acme_chal_origin origin, const struct acme_chal_row *r)
{
	struct acme_chal c, *old;
	int rc;

	rc = chal_make(&c, origin, r);
	if (rc < 0)
		return rc;
	pthread_rwlock_wrlock(&chal_lock);
	old = chal_find(origin, c.token);
	if (old) {
		chal_clear_one(old);
		*old = c;
	} else if ((rc = chal_room()) == 0)
		chal_v[chal_n++] = c;
	pthread_rwlock_unlock(&chal_lock);
	if (rc < 0)
		chal_clear_one(&c);
	return rc;
}

/* Remove entry i (the write lock held). */
static void chal_del_at(size_t i)
{
	chal_clear_one(&chal_v[i]);
	chal_v[i] = chal_v[--chal_n];
}

void acme_chal_remove(enum acme_chal_origin origin, const char *token)
{
	size_t i;

	if (!token)
		return;
	pthread_rwlock_wrlock(&chal_lock);
	for (i = 0; i < chal_n; i++)
		if (chal_v[i].origin == origin &&
		    strcmp(chal_v[i].token, token) == 0) {
			chal_del_at(i);
			break;
		}
	pthread_rwlock_unlock(&chal_lock);
}

int acme_chal_set_db(const struct acme_chal_row *rows, size_t n,
		     size_t *skipped)
{
	struct acme_chal *made;
	size_t i, k = 0, bad = 0, local = 0;
	struct acme_chal *v;
	bool ok = true;

	if (n > ACME_CHAL_MAX) {
		bad += n - ACME_CHAL_MAX;
		n = ACME_CHAL_MAX;
	}
	made = calloc(n ? n : 1, sizeof(*made));
	if (!made)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		if (chal_make(&made[k], ACME_CHAL_DB, &rows[i]) == 0)
			k++;
		else
			bad++;
	pthread_rwlock_wrlock(&chal_lock);
	for (i = 0; i < chal_n;)
		if (chal_v[i].origin == ACME_CHAL_DB)
			chal_del_at(i);
		else
			i++;
	local = chal_n;
	if (local + k > chal_cap) {
		v = realloc(chal_v, (local + k) * sizeof(*v));
		if (v) {
			chal_v = v;
			chal_cap = local + k;
		} else
			ok = false;
	}
	if (ok && k) {
		memcpy(chal_v + chal_n, made, k * sizeof(*made));
		chal_n += k;
	}
	pthread_rwlock_unlock(&chal_lock);
	if (!ok) {
		for (i = 0; i < k; i++)
			chal_clear_one(&made[i]);
		free(made);
		return -ENOMEM;
	}
	free(made);
	if (skipped)
		*skipped = bad;
	return 0;
}

/* host[0..n) without its port and trailing dot is name, any case. */
static bool chal_host_is(const char *host, size_t n, const char *name)
{
	size_t i;

	if (n && host[0] == '[')
		return false; /* an IPv6 literal: never a DNS name */
	for (i = 0; i < n; i++)
		if (host[i] == ':') {
			n = i;
			break;
		}
	if (n && host[n - 1] == '.')
		n--;
	return n == strlen(name) && strncasecmp(host, name, n) == 0;
}

ssize_t acme_chal_http(const char *host, size_t host_len, const char *token,
		       size_t token_len, char *out, size_t len)
{
	ssize_t rc = -ENOENT;
	size_t i, n;

	if (!host || !token || !token_len || token_len > ACME_CHAL_TOKEN_MAX)
		return -ENOENT;
	pthread_rwlock_rdlock(&chal_lock);
	for (i = 0; i < chal_n; i++) {
		const struct acme_chal *c = &chal_v[i];

		if (c->type != ACME_CHAL_HTTP01 ||
		    strlen(c->token) != token_len ||
		    memcmp(c->token, token, token_len) != 0 ||
		    !chal_host_is(host, host_len, c->name))
			continue;
		n = strlen(c->ka);
		if (n < len) {
			memcpy(out, c->ka, n + 1);
			rc = (ssize_t)n;
		}
		break;
	}
	pthread_rwlock_unlock(&chal_lock);
	return rc;
}

SSL_CTX *acme_chal_alpn_ctx(const char *name, size_t len)
{
	SSL_CTX *ctx = NULL;
	size_t i;

	if (!name || !len)
		return NULL;
	if (name[len - 1] == '.')
		len--;
	pthread_rwlock_rdlock(&chal_lock);
	for (i = 0; i < chal_n; i++) {
		const struct acme_chal *c = &chal_v[i];

		if (c->type == ACME_CHAL_TLSALPN01 && c->ctx &&
		    strlen(c->name) == len &&
		    strncasecmp(c->name, name, len) == 0) {
			if (SSL_CTX_up_ref(c->ctx))
				ctx = c->ctx;
			break;
		}
	}
	pthread_rwlock_unlock(&chal_lock);
	return ctx;
}

bool acme_chal_alpn_offered(const unsigned char *ext, size_t len)
{
	size_t n, i;

	if (len < 2)
		return false;
	n = (size_t)ext[0] << 8 | ext[1];
	if (n != len - 2)
		return false;
	for (i = 2; i < len;) {
		size_t l = ext[i];

		if (l == 0 || i + 1 + l > len)
			return false;
		if (l == sizeof(chal_alpn) - 2 &&
		    memcmp(ext + i + 1, chal_alpn + 1, l) == 0)
			return true;
		i += 1 + l;
	}
	return false;
}

void acme_chal_counts(size_t *local, size_t *db)
{
	size_t i, l = 0, d = 0;

	pthread_rwlock_rdlock(&chal_lock);
	for (i = 0; i < chal_n; i++)
		if (chal_v[i].origin == ACME_CHAL_DB)
			d++;
		else
			l++;
	pthread_rwlock_unlock(&chal_lock);
	if (local)
		*local = l;
	if (db)
		*db = d;
}

void acme_chal_clear(void)
{
	size_t i;

	pthread_rwlock_wrlock(&chal_lock);
	for (i = 0; i < chal_n; i++)
		chal_clear_one(&chal_v[i]);
	free(chal_v);
	chal_v = NULL;
	chal_n = chal_cap = 0;
	pthread_rwlock_unlock(&chal_lock);
}
