/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * acme_chal.h - the ACME challenges this edged answers now (docs/acme.md):
 * http-01 on the plain listeners (req.c), tls-alpn-01 on the TLS ones
 * (tls.c). One process-wide table: the control thread writes it (this
 * edged's own orders, and the database's acme_challenges rows, which
 * other hosts' orders wrote), any thread reads it under a read lock.
 *
 * An entry is (name, type, token, key authorization). A tls-alpn-01
 * entry also holds the SSL_CTX that serves its certificate
 * (acme_tls_alpn_cert, a key of its own) for ALPN "acme-tls/1", made
 * when the entry is added.
 */
#ifndef EDGE_ACME_CHAL_H
#define EDGE_ACME_CHAL_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Most entries at once: an add over it is refused (-ENOSPC). */
#define ACME_CHAL_MAX 4096
/* The longest token kept (base64url characters) */
#define ACME_CHAL_TOKEN_MAX 256
/* The longest key authorization: TOKEN "." THUMBPRINT */
#define ACME_CHAL_KEYAUTH_MAX (ACME_CHAL_TOKEN_MAX + 64)
/* The http-01 path's prefix (RFC 8555 8.3) */
#define ACME_CHAL_HTTP_PREFIX "/.well-known/acme-challenge/"

enum acme_chal_type {
	ACME_CHAL_HTTP01,
	ACME_CHAL_TLSALPN01,
};

/* "http-01" / "tls-alpn-01"; and back (-1: neither). */
const char *acme_chal_type_name(enum acme_chal_type t);
int acme_chal_type_parse(const char *s);

/* Where an entry came from: this edged's order, or the database. */
enum acme_chal_origin {
	ACME_CHAL_LOCAL,
	ACME_CHAL_DB,
};

/* A row of the database's acme_challenges (or of this edged's orders). */
struct acme_chal_row {
	const char *name; /* a DNS name, lowercase */
	enum acme_chal_type type;
	const char *token;
	const char *key_authorization;
};

/*
 * Add r (copied) as origin's; an entry of the same token and origin is
 * replaced. Control thread. Returns 0, or -EINVAL (a name, token or key
 * authorization that is not one), -ENOSPC (ACME_CHAL_MAX), -ENOMEM,
 * -EIO (the tls-alpn-01 certificate could not be made).
 */
int acme_chal_add(enum acme_chal_origin origin, const struct acme_chal_row *r);

/* Remove origin's entry for token (none: nothing). Control thread. */
void acme_chal_remove(enum acme_chal_origin origin, const char *token);

/*
 * The database's entries are now rows[0..n): the others of ACME_CHAL_DB
 * go, the local ones stay. A row that is refused (as acme_chal_add
 * would) is skipped; the number skipped goes in *skipped. Control
 * thread. Returns 0 or -ENOMEM (the table unchanged).
 */
int acme_chal_set_db(const struct acme_chal_row *rows, size_t n,
		     size_t *skipped);

/*
 * http-01: the key authorization of token for the request's host
 * (host[0..host_len), a port and a trailing dot ignored, any case) into
 * out (len bytes, terminated). Any thread. Returns its length, or
 * -ENOENT when no http-01 entry has that token and name.
 */
ssize_t acme_chal_http(const char *host, size_t host_len, const char *token,
		       size_t token_len, char *out, size_t len);

/*
 * tls-alpn-01: a new reference to the context serving name's challenge
 * certificate (name[0..len), any case), or NULL. Any thread.
 */
SSL_CTX *acme_chal_alpn_ctx(const char *name, size_t len);

/* Whether an ALPN list (the ClientHello's extension body: a 2-byte
 * length, then length-prefixed names) offers "acme-tls/1". Pure. */
bool acme_chal_alpn_offered(const unsigned char *ext, size_t len);

/* Entries now, by origin. Any thread. */
void acme_chal_counts(size_t *local, size_t *db);

/* Drop every entry (exit). */
void acme_chal_clear(void);

#endif /* EDGE_ACME_CHAL_H */
