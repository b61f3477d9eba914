/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * acme.h - an ACME (RFC 8555) client on a libevent loop (docs/acme.md):
 * one order for a set of DNS names, proven with http-01, ends in a
 * certificate chain and its new private key, or in one message.
 *
 * A client (acme_client_new) holds the account key and the TLS context
 * that checks the CA; it is made where blocking is allowed (start-up,
 * reload): it reads, or creates, the account key file. An order
 * (acme_order_start) then runs on the client's loop and never blocks:
 * every request is bounded (ACME_REQUEST_TIMEOUT_MS by default, the
 * body ACME_BODY_MAX, its header fields ACME_HEADERS_MAX), redirects are
 * not followed, and polling stops at the order's deadline. Its callbacks
 * (struct acme_ops) run from the loop, never from acme_order_start.
 *
 * The crypto helpers below (the account key, the JWK thumbprint, the
 * JWS, the CSR, TLS-ALPN-01's certificate) are pure and blocking-free but
 * for acme_key_load_or_create.
 */
#ifndef EDGE_ACME_H
#define EDGE_ACME_H

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <stdbool.h>
#include <stddef.h>

#include "acme_chal.h"
#include "b64url.h"
#include "log.h"

struct event_base;
struct evdns_base;
struct acme_client;
struct acme_order;

#define ACME_BODY_MAX (1 << 20)	      /* a response's body, bytes */
#define ACME_HEADERS_MAX (64 << 10)   /* a response's header fields */
#define ACME_REQUEST_TIMEOUT_MS 10000 /* one request, connect to body */
#define ACME_ORDER_TIMEOUT_MS 120000  /* one order, start to done */
#define ACME_BADNONCE_RETRIES 10      /* a POST sent again after badNonce */
#define ACME_NAMES_MAX 100	      /* names in one order */
#define ACME_NAME_MAX 253	      /* one DNS name */
/* base64url of a SHA-256: a JWK thumbprint */
#define ACME_THUMBPRINT_LEN B64URL_LEN(32)

/* What a client needs; copied by acme_client_new. */
struct acme_config {
	const char *directory_url; /* https:// only */
	/* PEM CA certificates the CA's server certificate must chain to
	 * (with its host name checked); NULL: OpenSSL's default paths */
	const char *ca_file;
	const char *account_key_file; /* created (0600) when absent */
	const char *contact;	      /* "mailto:...", or NULL */
	/* resolves the CA's host name without blocking; NULL: a name is
	 * resolved by getaddrinfo(3), which blocks (a numeric address
	 * never is) */
	struct evdns_base *dns;
	/* the challenge answered: http-01 (0, the default) or tls-alpn-01 */
	enum acme_chal_type challenge;
	unsigned request_timeout_ms; /* 0: ACME_REQUEST_TIMEOUT_MS */
	unsigned order_timeout_ms;   /* 0: ACME_ORDER_TIMEOUT_MS */
};

/*
 * How an order ended, for its done callback; valid only during it (the
 * caller copies what it keeps).
 *
 * error is 0 when the certificate was issued: cert_pem is the chain the
 * CA sent (the leaf first, checked to hold every name and to match
 * key_pem), key_pem the certificate's new P-256 key (PKCS#8 PEM). Else
 * error is a negative errno: -ETIMEDOUT (a request's or the order's
 * time ran out), -ECONNREFUSED and other socket errors, -EPROTO (the
 * CA's answer was not what ACME says: a TLS failure, bad JSON, a missing
 * field, a wrong content type, a body over ACME_BODY_MAX, bad base64 or
 * PEM), -EREMOTEIO (the CA refused: a problem document, an invalid
 * authorization or order), -ENOMEM, -EIO (a local failure: crypto);
 * cert_pem and key_pem are NULL.
 *
 * message is one line saying what failed (and the CA's problem when it
 * sent one); "" on success. problem_type, problem_detail and
 * problem_status are the CA's problem document's type, detail and
 * status, verbatim (the status is the HTTP response's when the document
 * has none); NULL, NULL, 0 when the failure had no problem document.
 * http_status is the last response's (0: none).
 */
struct acme_result {
	int error;
	const char *message;
	const char *problem_type;
	const char *problem_detail;
	int problem_status;
	int http_status;
	const char *account_url; /* the account's (kid); NULL if not known */
	const char *cert_pem;
	const char *key_pem;
	unsigned nonce_retries; /* POSTs sent again after badNonce */
};

/*
 * The caller's side of an order. Each runs from the client's loop.
 *
 * publish(arg, row): answer row's challenge (its name, the client's type,
 * its token, base64url of at most 256 characters, and key authorization)
 * until unpublish for that token: http-01 serves the key authorization
 * at http://NAME/.well-known/acme-challenge/TOKEN, tls-alpn-01 serves
 * acme_tls_alpn_cert for NAME to ALPN "acme-tls/1". 0: answered now;
 * 1: being made known (to other hosts), acme_order_published will say;
 * or a negative errno that ends the order.
 *
 * unpublish(arg, token): stop serving it. Called once for each token
 * published, before done (on success and failure alike), or from
 * acme_order_cancel.
 *
 * done(arg, result): the order's end, exactly once (unless cancelled).
 * The order is freed when done returns; acme_order_cancel from done (or
 * from an unpublish before it) does nothing.
 */
struct acme_ops {
	int (*publish)(void *arg, const struct acme_chal_row *row);
	void (*unpublish)(void *arg, const char *token);
	void (*done)(void *arg, const struct acme_result *result);
};

/*
 * A client on base for cfg (copied): its account key read from
 * cfg->account_key_file, or created there (acme_key_load_or_create), and
 * the TLS context trusting cfg->ca_file. Blocks on those files. Returns
 * 0 with *out, or a negative errno with err's message.
 */
int acme_client_new(struct event_base *base, const struct acme_config *cfg,
		    struct acme_client **out, struct errbuf *err);

/* Free c; its orders must have ended or been cancelled. NULL ok. */
void acme_client_free(struct acme_client *c);

/* The account's URL learnt by an order (the JWS kid), NULL until then;
 * later orders of c use it without asking the CA. */
const char *acme_client_account_url(const struct acme_client *c);

/*
 * Start an order for names[0..n) (DNS names, 1 to ACME_NAMES_MAX,
 * lowercase letters, digits, '-' and '.', no wildcard; the first becomes
 * the certificate's subject CN, all of them its subjectAltNames): GET the
 * directory, a nonce, the account (newAccount, terms agreed, cfg's
 * contact), newOrder, each authorization's http-01 challenge published
 * and answered, the authorizations polled (Retry-After honoured), a new
 * key and its CSR finalized, the order polled, the certificate fetched.
 * ops and arg are the caller's (ops must outlive the order). Returns 0
 * with *out (the order, until done or acme_order_cancel), or -EINVAL
 * (err says which name), -ENOMEM; no callback runs then.
 */
int acme_order_start(struct acme_client *c, const char *const *names, size_t n,
		     const struct acme_ops *ops, void *arg,
		     struct acme_order **out, struct errbuf *err);

/*
 * Revoke the certificate whose PEM (its first certificate, the leaf) is
 * cert_pem, with RFC 5280 reason code reason (0 unspecified, 1
 * keyCompromise, 4 superseded, ...), signed by the account's key: the
 * directory, a nonce, the account (registered if not known yet), POST
 * revokeCert. Ends in ops->done as an order does (error 0: revoked;
 * cert_pem NULL); publish is never called. -EINVAL (no certificate, a
 * bad reason) or -ENOMEM, no callback then.
 */
int acme_revoke_start(struct acme_client *c, const char *cert_pem, int reason,
		      const struct acme_ops *ops, void *arg,
		      struct acme_order **out, struct errbuf *err);

/* The challenge publish returned 1 for is answered (rc 0: the order goes
 * on) or could not be (rc < 0: the order fails with it). From the loop,
 * not from inside a callback of o. */
void acme_order_published(struct acme_order *o, int rc);

/*
 * Stop o: its request dropped, unpublish called now for each token it
 * published, everything freed; no callback after this returns. From
 * within one of o's callbacks it takes effect when that callback
 * returns (done not called); from done, nothing. NULL ok.
 */
void acme_order_cancel(struct acme_order *o);

/* ---- crypto helpers (acme_jws.c) ---------------------------------- */

/*
 * The EC P-256 private key in the PEM file path into *out; when path
 * does not exist, a new one written there (PKCS#8, mode 0600, through a
 * temporary file linked into place: a concurrent creator's key wins and
 * is read). A key of another type or curve is refused. Returns 0 or a
 * negative errno with err's message.
 */
int acme_key_load_or_create(const char *path, EVP_PKEY **out,
			    struct errbuf *err);

/* A new EC P-256 key, or NULL. */
EVP_PKEY *acme_key_new(void);

/* key's public JWK (RFC 7517), {"crv","kty","x","y"} in that order and
 * without whitespace, as RFC 7638 hashes it, into a new string; NULL on
 * failure. */
char *acme_jwk_json(EVP_PKEY *key);

/* The RFC 7638 SHA-256 thumbprint of key's JWK, base64url, into out
 * (ACME_THUMBPRINT_LEN + 1 bytes). Returns 0 or -EIO. */
int acme_jwk_thumbprint(EVP_PKEY *key, char *out);

/*
 * A JWS in the flattened JSON serialization (RFC 8555 section 6.2):
 * protected header {"alg":"ES256","jwk":JWK or "kid":kid,"nonce","url"},
 * payload base64url of payload (NULL: the empty payload of a
 * POST-as-GET), signature ES256 as r||s (64 bytes). kid NULL: the jwk.
 * Returns a new string, or NULL.
 */
char *acme_jws(EVP_PKEY *key, const char *kid, const char *nonce,
	       const char *url, const char *payload);

/* ES256 of data[0..n) with key, as the 64 bytes r||s into sig. Returns 0
 * or -EIO. */
int acme_es256_sign(EVP_PKEY *key, const void *data, size_t n,
		    unsigned char sig[64]);

/* A CSR (DER, into a new *der of *len bytes) for names[0..n), subject CN
 * names[0], subjectAltName each as a dNSName, signed by key (SHA-256).
 * Returns 0 or -ENOMEM/-EIO. */
int acme_csr_der(EVP_PKEY *key, const char *const *names, size_t n,
		 unsigned char **der, size_t *len);

/* Whether name is one acme_order_start takes. */
bool acme_name_ok(const char *name);

/*
 * TLS-ALPN-01 (RFC 8737): a self-signed certificate for name, signed by
 * key, valid from an hour ago for 7 days, its subjectAltName name alone
 * and the critical id-pe-acmeIdentifier extension (1.3.6.1.5.5.7.1.31)
 * holding the SHA-256 of key_authorization as an ASN.1 OCTET STRING. It
 * is served for ALPN "acme-tls/1" by the caller. Returns a new X509, or
 * NULL.
 */
X509 *acme_tls_alpn_cert(EVP_PKEY *key, const char *name,
			 const char *key_authorization);

/* The acmeIdentifier OID, dotted. */
#define ACME_TLS_ALPN_OID "1.3.6.1.5.5.7.1.31"

#endif /* EDGE_ACME_H */
