/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tls_int.h - what tls.c (the store) and tls_io.c (the transport and the
 * handshake) share, private to the two.
 */
#ifndef EDGE_TLS_INT_H
#define EDGE_TLS_INT_H

#include <openssl/ssl.h>
#include <stdbool.h>

#include "tls.h"

/* A new SSL on s's default context (the servername callback moves it to
 * its name's), or NULL. */
SSL *tls_store_ssl(struct tls_store *s);

/* The handshake of ssl has seen a ClientHello (tls.c's callback). */
void tls_hs_hello_seen(SSL *ssl);

/* Count a completed handshake (resumed or not), or a failure. */
void tls_count_handshake(bool resumed);
void tls_count_failure(enum tls_failure f);

#endif /* EDGE_TLS_INT_H */
