/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tls.h - TLS termination (stage 2): the certificate store built from
 * the configuration's tls group, the session ticket keys every worker
 * shares, the TLS transport under sockio (transport.h) and the
 * non-blocking server handshake that makes one.
 *
 * The store is immutable once built: its certificates checked (readable,
 * the key matching, valid now, each certificate of a chain signed by the
 * next), one SSL_CTX per set of certificates that serve a name (an RSA
 * and an ECDSA certificate for the same names share one, and OpenSSL
 * picks the one the client's signature algorithms and ciphers allow).
 * A handshake starts on the store's default context and moves to the
 * context of its server name (exact, then a one-label "*." wildcard,
 * then the first certificate's). A reload builds a new store and swaps
 * it into the holder; handshakes under way keep the store they began
 * with, established connections keep their SSL (and its context).
 *
 * TLS 1.2 and 1.3 only, Mozilla's "intermediate" cipher suites, ALPN
 * h2 (while tls_set_h2 says so) then http/1.1, session tickets (no server-side
 * cache) under keys shared by the whole process and rotated by
 * tls_tickets_rotate, OCSP stapling from a response file.
 */
#ifndef EDGE_TLS_H
#define EDGE_TLS_H

#include <event2/event.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "log.h"
#include "transport.h"

struct metrics;
struct tls_store;
struct tls_hs;
struct tls_db;

/* Most bytes of a certificate, key or OCSP file read. */
#define TLS_FILE_MAX (1024 * 1024)
/* Most certificates of a chain after the leaf: a certificate file (or a
 * database row's chain_pem) holding more PEM certificates than the leaf
 * and these is refused, counted before any is parsed (real chains have
 * one to three; thousands would be parsed and verified on the control
 * loop at every look). */
#define TLS_CHAIN_MAX 10
/* Ticket keys kept: the current one and the previous ones, which still
 * decrypt (a ticket so decrypted is renewed under the current key). */
#define TLS_TICKET_KEYS 3
/* How often the certificate files are looked at for a change (stat:
 * device, inode, size, mtime), milliseconds. */
#define TLS_WATCH_MS 2000
/* A changed file is read only once it has not changed for this long (a
 * writer still writing it keeps moving its mtime: a certificate whose
 * chain is not written yet is a valid leaf alone), milliseconds.
 * Replacing a file by rename is atomic and still waits this long. */
#define TLS_WATCH_SETTLE_MS 1000

/* Why a handshake failed: X(ID, label). Append only (metric labels). */
#define TLS_FAILURES(X)                                                        \
	X(TIMEOUT, "timeout")                                                  \
	X(NOT_TLS, "not_tls")                                                  \
	X(PROTOCOL, "protocol")                                                \
	X(CLOSED, "closed")                                                    \
	X(OTHER, "other")

enum tls_failure {
#define TLS_FAILURE_ENUM(id, label) TLS_FAIL_##id,
	TLS_FAILURES(TLS_FAILURE_ENUM)
#undef TLS_FAILURE_ENUM
	    TLS_FAIL_MAX
};

/* ---- pure parts (unit tested) ----------------------------------------- */

/*
 * The wildcard that may cover host name (lowercase, no trailing dot):
 * "*." and name without its first label, into buf (len bytes). Returns
 * false when name has no second label ("localhost") or buf is short.
 */
bool tls_name_wildcard(const char *name, char *buf, size_t len);

/*
 * Whether s is a DNS name a certificate may serve: 1..253 bytes of
 * labels (letters, digits, '-', '_'), or "*." and such a name (a
 * one-label wildcard). Lowercases s in place when it is.
 */
bool tls_name_ok(char *s);

/* ---- the store -------------------------------------------------------- */

/*
 * Build a store from c's certificates: read each file (at most
 * TLS_FILE_MAX bytes), check it (a PEM certificate and its chain, each
 * signed by the next; an unencrypted RSA or EC key that matches; valid
 * now; DNS names in subjectAltName; an OCSP response that parses) and
 * make the contexts. Returns 0 and *out (one reference), or -errno with
 * err naming the file and what was wrong ("FILE: tls.certificates[I]:
 * ..."). Reads files: the control thread only. The store remembers the
 * files' identities (tls_store_changed).
 */
int tls_store_new(const struct config_tls *c, struct tls_store **out,
		  struct errbuf *err);

/* As tls_store_new, with the database's certificates db accepted
 * (tls_db_update; NULL: none) after the files': for a name both serve
 * with a key of one type, the file's certificate serves (warned). A row
 * that no longer loads (expired since) is left out, logged; the files
 * alone decide whether the store is refused. */
int tls_store_new_db(const struct config_tls *c, const struct tls_db *db,
		     struct tls_store **out, struct errbuf *err);

/* A store of s's files and db's rows (the database changed). */
int tls_store_with_db(const struct tls_store *s, const struct tls_db *db,
		      struct tls_store **out, struct errbuf *err);

/* Build a store again from the same configuration and database rows as
 * s (its files changed): as tls_store_new_db. */
int tls_store_rebuild(const struct tls_store *s, struct tls_store **out,
		      struct errbuf *err);

/* Whether a file s was built from has changed (or gone) since, and
 * every changed file has stayed as it is for TLS_WATCH_SETTLE_MS (a file
 * changed more recently: false, until a later look). */
bool tls_store_changed(const struct tls_store *s);

/* The number of names and of contexts s serves (logs). */
void tls_store_counts(const struct tls_store *s, size_t *names,
		      size_t *contexts);

/* What s serves, for edgectl status. */
struct tls_store_info {
	size_t names, contexts;
	size_t file_certs, db_certs;
	int64_t next_expiry; /* unix s of the soonest notAfter */
	char next_expiry_name[CONFIG_HOST_MAX + 1]; /* its first name */
};
void tls_store_info(const struct tls_store *s, struct tls_store_info *info);

/* The certificate s serves for name exactly (a lowercase DNS name; not a
 * wildcard's, not the default): of its certificates (one per key type)
 * the one ending last, its notBefore and notAfter (unix s). 0, or
 * -ENOENT. */
int tls_store_name_times(const struct tls_store *s, const char *name,
			 int64_t *not_before, int64_t *not_after);

/* The PEM of that same certificate's leaf (a new string), or NULL. */
char *tls_store_name_pem(const struct tls_store *s, const char *name);

/* ---- the database's certificates -------------------------------------- */

/* A row of the certificates table (docs/tls.md): names its DNS names
 * separated by spaces ("": the subjectAltName's), ocsp_hex the DER OCSP
 * response in hex ("": none). */
struct tls_db_in {
	const char *id;
	const char *names;
	const char *chain_pem;
	const char *key_pem;
	const char *ocsp_hex;
};

/* The rows accepted from the certificates table (the control thread's). */
int tls_db_new(struct tls_db **out);
void tls_db_free(struct tls_db *db);

/*
 * The table is now in[0..n): each new or changed row is checked alone as
 * a file would be (tls_store_new's checks, the names each in the
 * subjectAltName); a row refused is logged (its id and why, once per
 * reason, never its key) and, when an earlier version of it was
 * accepted, that version stays accepted. Returns 1 when what is accepted
 * changed (build a store: tls_store_new_db), 0 when not, -ENOMEM (db
 * unchanged).
 */
int tls_db_update(struct tls_db *db, const struct tls_db_in *in, size_t n);

/* Rows accepted, rows refused now, refusals logged since start. */
void tls_db_counts(const struct tls_db *db, size_t *served, size_t *refused,
		   uint64_t *refusals);

/* [{"id", "error"}] of the rows refused now (a new reference). */
json_t *tls_db_refused_json(const struct tls_db *db);

/* Another reference to s / drop one (the last frees it). NULL is fine. */
struct tls_store *tls_store_ref(struct tls_store *s);
void tls_store_put(struct tls_store *s);

/* The store the handshakes use now: set by the control thread, taken by
 * the workers at each accept. */
struct tls_holder {
	pthread_mutex_t lock;
	struct tls_store *cur; /* NULL: no TLS */
};

void tls_holder_init(struct tls_holder *h);
/* Install s (the holder takes the reference), dropping the previous. */
void tls_holder_set(struct tls_holder *h, struct tls_store *s);
/* A reference to the current store, or NULL. Any thread. */
struct tls_store *tls_holder_get(struct tls_holder *h);
void tls_holder_clear(struct tls_holder *h);

/* ---- ticket keys and counters ----------------------------------------- */

/* Make a fresh current ticket key, keeping TLS_TICKET_KEYS - 1 previous
 * ones for decryption. Any thread (a write lock). 0 or -EIO. */
int tls_tickets_rotate(void);

/* Register the edge_tls_* metrics in m (start-up): handshakes, failures
 * by reason, resumptions, reloads. */
int tls_metrics(struct metrics *m);

/* {"handshakes", "resumptions", "failures": {REASON: N}, "reloads_applied",
 * "reloads_refused"} (a new reference, NULL when out of memory). */
json_t *tls_counts_json(void);

/* A reload of the store was applied (ok) or refused (counted). */
void tls_count_reload(bool ok);

/* Whether ALPN offers h2 (before http/1.1) to the handshakes that start
 * from now on (http2.enabled, at start and at each reload); off until
 * set. Any thread. */
void tls_set_h2(bool on);

/* ---- the transport and the handshake ----------------------------------- */

/*
 * What a TLS transport negotiated, for the request (X-Forwarded-Proto,
 * HSTS) and its analytics record: false when t is not TLS; else true
 * with the protocol version ("TLSv1.3"), the cipher suite's name and
 * whether the session was resumed. Pointers stay valid while t is open.
 */
bool tls_transport_info(const struct transport *t, const char **version,
			const char **cipher, bool *resumed);

/* Whether t is a TLS transport whose handshake selected "h2" by ALPN
 * (false for any other transport, another protocol or none). */
bool tls_transport_h2(const struct transport *t);

/* Whether t is a TLS transport whose handshake selected "acme-tls/1" (an
 * ACME tls-alpn-01 validation: closed once the handshake is done). */
bool tls_transport_acme(const struct transport *t);

struct ssl_st;

/* A client TLS transport in *t over ssl (an SSL made for an upstream,
 * tls_up.h) on connecting, non-blocking socket fd: both taken, on
 * failure too. The handshake is done by the first write (SSL_write's
 * want-read / want-write, as any TLS transport's). 0 or -ENOMEM. */
int tls_transport_client(struct transport *t, struct ssl_st *ssl, int fd);

/* t's SSL when t is a TLS transport, else NULL. */
struct ssl_st *tls_transport_ssl(const struct transport *t);

/* Whether t (a TLS transport) failed at the TLS layer: its certificate
 * not verified, a handshake the peer refused or cut, an alert; then true
 * with the reason in buf (len bytes, always terminated). False for a
 * plain end of the stream, a socket error, or another transport. */
bool tls_transport_failure(const struct transport *t, char *buf, size_t len);

/* Called once when a handshake ends (its tls_hs freed by then): rc 0
 * with *t the TLS transport (the caller's from now on), or rc < 0 (the
 * socket closed, the failure counted). */
typedef void (*tls_hs_done_fn)(int rc, struct transport *t, void *arg);

/*
 * Start the server handshake on accepted, non-blocking socket fd (taken:
 * closed on failure) with store s (a reference is taken), on base,
 * driven by fd's readiness and ending by timeout (a timeval for base,
 * e.g. worker_timeout's). done runs from the loop, never from this
 * call. Returns 0 and *out, or -ENOMEM (fd closed, counted).
 */
int tls_hs_start(struct event_base *base, struct tls_store *s, int fd,
		 const struct timeval *timeout, tls_hs_done_fn done, void *arg,
		 struct tls_hs **out);

/* Abandon a handshake (draining, shutdown): close its socket, free it;
 * done is not called. NULL is fine. */
void tls_hs_abort(struct tls_hs *hs);

#endif /* EDGE_TLS_H */
