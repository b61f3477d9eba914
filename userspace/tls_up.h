/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tls_up.h - TLS to upstreams (https:// endpoints): one client SSL_CTX
 * per distinct deployment tls group (ca, cert, key, verify; the group
 * absent: the system's store, verified), built when the configuration is
 * loaded (the files are never read on a worker), and the SSL of each new
 * connection: TLS 1.2 at least, ALPN http/1.1, the server name sent
 * (SNI) and verified (the group's server_name, else the request's host),
 * and a session to resume, kept per worker thread by profile, server
 * name and endpoint.
 *
 * Thread-safety: tls_up_load and tls_up_free_all on the control thread;
 * tls_up_ssl from any worker (a lock around the profile lookup);
 * sessions are per thread (tls_up_thread_end frees the caller's).
 */
#ifndef EDGE_TLS_UP_H
#define EDGE_TLS_UP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config_check.h"
#include "log.h"

struct route_src;
struct ssl_st;

/*
 * Build the profiles of every deployment of src (NULL: none) and the
 * default one, and make them the ones tls_up_ssl uses; a deployment with
 * verify = false is logged. On failure nothing changes and err names the
 * deployment and the file. Returns 0, -EINVAL or -ENOMEM.
 */
int tls_up_load(const struct route_src *src, struct errbuf *err);

/*
 * Hold t's profile for a database deployment (pgmodel.h): built (its
 * files read) when no deployment held it, else shared; the default group
 * and a refused one need none (0). Each hold is ended by one
 * tls_up_release of an equal t; a profile held by none stays findable
 * for two minutes (requests routed by an older table), then is freed. A
 * reload (tls_up_load) reads every held profile's files again, one that
 * fails then keeping what it had. Returns 0, or -EINVAL with err naming
 * the file, or -ENOMEM. Any thread.
 */
int tls_up_hold(const struct config_up_tls *t, struct errbuf *err);
void tls_up_release(const struct config_up_tls *t);

/* Whether t's profile can be built (its files read, the key matching
 * the certificate): 0, or -EINVAL with err naming the file. */
int tls_up_check(const struct config_up_tls *t, struct errbuf *err);

/*
 * A new client SSL for a connection to endpoint ep (its canonical text)
 * of a deployment whose group is t (NULL: none), for a request to host
 * (host_len bytes, a port after it ignored; NULL: none): 0 with *out and
 * *tag (what a pooled connection must have been made with to serve this
 * request: profile and server name; out NULL: the tag only), or -ENOMEM,
 * or -ENOENT when t's profile was never loaded, or -EINVAL when t was
 * refused or a request's name to verify is empty or too long (err says
 * so). The name
 * is lowercased, without a trailing dot. With host NULL (a health check)
 * and no server_name, the chain alone is verified.
 */
int tls_up_ssl(const struct config_up_tls *t, const char *host, size_t host_len,
	       const char *ep, struct ssl_st **out, uint64_t *tag,
	       struct errbuf *err);

/* Offer h2 before http/1.1 by ALPN on ssl (an HTTP/2 session's
 * connection; tls_up_ssl's offer http/1.1 alone). 0 or -ENOMEM. */
int tls_up_offer_h2(struct ssl_st *ssl);

/* Whether the server of ssl (tls_up_ssl's) asked for a client
 * certificate that its profile does not have: a connection it closes
 * right after the handshake (TLS 1.3 says so only then) failed for that.
 */
bool tls_up_cert_wanted(const struct ssl_st *ssl);

/* Whether ssl's peer certificate was verified (not a verify = false
 * profile's). */
bool tls_up_verified(const struct ssl_st *ssl);

/* Free the calling thread's saved sessions (a worker's, at its end). */
void tls_up_thread_end(void);

/* Free every profile (at exit). */
void tls_up_free_all(void);

#endif /* EDGE_TLS_UP_H */
