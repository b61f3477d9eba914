/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tls_int.h - what tls.c (the store), tls_db.c (the database's
 * certificates) and tls_io.c (the transport and the handshake) share,
 * private to the three.
 */
#ifndef EDGE_TLS_INT_H
#define EDGE_TLS_INT_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tls.h"

/* A row of the certificates table as accepted (tls_db). */
struct tls_dbrow {
	char *id;
	char *label; /* "certificates row ID" */
	char *names; /* space-separated, "" for the subjectAltName's */
	char *chain_pem;
	char *key_pem;
	unsigned char *ocsp;
	size_t ocsp_len;
};

/* A row refused now, and why. */
struct tls_dbrej {
	char *id;
	char *msg;
};

struct tls_db {
	struct tls_dbrow *rows; /* accepted, in the table's order */
	size_t n;
	struct tls_dbrej *rej;
	size_t n_rej;
	uint64_t refusals;
};

/* Free what r holds and zero it (its key's PEM cleansed first). */
void tls_dbrow_clear(struct tls_dbrow *r);
/* Clear and free an array of n rows. */
void tls_dbrows_free(struct tls_dbrow *v, size_t n);
/* *d = a copy of r. 0 or -ENOMEM (d cleared). */
int tls_dbrow_copy(struct tls_dbrow *d, const struct tls_dbrow *r);
/* The same row (id, names, chain, key, OCSP response). */
bool tls_dbrow_same(const struct tls_dbrow *a, const struct tls_dbrow *b);

/* Check row r alone, as a store of its own would serve it (tls.c): 0, or
 * -EINVAL / -ENOMEM with err saying why. */
int tls_dbrow_check(const struct tls_dbrow *r, struct errbuf *err);

/* The edge_tls_db_* gauges and counter (tls.c's metrics). */
void tls_count_db(size_t served, size_t refused);
void tls_count_db_refusal(void);

/* A new SSL on s's default context (the servername callback moves it to
 * its name's), or NULL. */
SSL *tls_store_ssl(struct tls_store *s);

/* The handshake of ssl has seen a ClientHello (tls.c's callback). */
void tls_hs_hello_seen(SSL *ssl);

/* Count a completed handshake (resumed or not), or a failure. */
void tls_count_handshake(bool resumed);
void tls_count_failure(enum tls_failure f);

/* GnuTLS credentials (tls_gnutls.c) for stores built with
 * config_tls.gnutls: new ones (API v2: adding returns an index), 0 or
 * -ENOMEM; a certificate added from the same objects the SSL_CTX has
 * (chain, key, OCSP response): 0, or -ENOMEM / -EINVAL with *why what
 * GnuTLS said. */
struct gnutls_certificate_credentials_st;
int tls_gt_cred(struct gnutls_certificate_credentials_st **out);
int tls_gt_add(struct gnutls_certificate_credentials_st *cred, X509 *leaf,
	       STACK_OF(X509) * chain, EVP_PKEY *key, const unsigned char *ocsp,
	       size_t ocsp_len, const char **why);

#endif /* EDGE_TLS_INT_H */
