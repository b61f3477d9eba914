/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tls_gnutls.h - the store's certificates for handshakes made by GnuTLS
 * (QUIC: ngtcp2's crypto backend here is GnuTLS, OpenSSL 3.0 has no QUIC
 * API). A store built with config_tls.gnutls keeps, beside each set of
 * certificates' SSL_CTX, GnuTLS credentials made from the same
 * certificates, chains, keys and OCSP responses. Reloads build both at
 * once, so TCP and QUIC always serve the same certificates.
 */
#ifndef EDGE_TLS_GNUTLS_H
#define EDGE_TLS_GNUTLS_H

#include <gnutls/gnutls.h>

struct tls_store;

/*
 * The credentials for a handshake with server name sni (NULL or "":
 * none), chosen as for TCP: exact name, then a one-label wildcard, then
 * the first certificate's names. Of its ECDSA and RSA certificates,
 * GnuTLS serves the one the client's signature algorithms allow. Set
 * them on the session (gnutls_credentials_set) in its post-ClientHello
 * function; they live as long as s. NULL when s keeps no GnuTLS copies.
 */
gnutls_certificate_credentials_t tls_store_gnutls(const struct tls_store *s,
						  const char *sni);

#endif /* EDGE_TLS_GNUTLS_H */
