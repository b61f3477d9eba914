/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * acme_mgr.h - certificates that issue themselves (docs/acme.md): for each
 * DNS name of the environments marked tls = "auto", an ACME order when no
 * certificate serves it, and again at two thirds of the served one's
 * lifetime; a failed order tried again after a back-off (retry_min,
 * doubling, at most retry_max, each with up to 10 % of jitter) while the
 * certificate served keeps serving. On the control loop.
 *
 * Where certificates and challenges go beyond this process is a store's
 * (struct acme_store_ops): the files of acme.dir (acme_mgr's own, below)
 * or the database (pg/pgacme.c: the certificates table, a lease per name
 * so that one host of a fleet orders it, challenges every host answers).
 */
#ifndef EDGE_ACME_MGR_H
#define EDGE_ACME_MGR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "acme_chal.h"
#include "config.h"
#include "log.h"

struct event_base;
struct evdns_base;
struct acme_mgr;
struct tls_db_in;

/* How long a lease is taken for: an order's time and some */
#define ACME_LEASE_S 300
/* Orders running at once (the others wait their turn) */
#define ACME_ORDERS_MAX 4

/*
 * A store's hooks, each called on the control loop. A done callback runs
 * later from the loop, exactly once, never from inside the hook, unless
 * forget() dropped it first.
 *
 * lease(name, holder, ttl_s): take name's lease for holder for ttl_s
 * seconds (held by holder already: renewed). done(ctx, 1, 0): granted;
 * done(ctx, 0, until): another holder has it until unix time until;
 * done(ctx, -errno, 0): could not be asked (the order waits as for a
 * failure). NULL: every lease is granted (one host).
 *
 * release(name, holder): give the lease back (fire and forget). NULL ok.
 *
 * publish(row, holder, ttl_s): make the challenge known to the other
 * hosts; done(ctx, 0) once they can answer it, done(ctx, -errno) when
 * not (the order fails). NULL: only this edged answers.
 *
 * unpublish(token): the challenge is over (fire and forget). NULL ok.
 *
 * save(name, chain_pem, key_pem): keep name's new certificate where every
 * host serves it; done(ctx, 0, NULL) when it is, done(ctx, -errno, why)
 * when not. NULL: the files store's (acme.dir).
 *
 * forget(): no done callback of a pending call may run any more (the
 * manager is being freed).
 *
 * lease, publish and save return 0 when their done will run (never
 * before they return), or -errno when the call could not even be made
 * (out of memory): done will not run.
 */
struct acme_store_ops {
	int (*lease)(void *arg, const char *name, const char *holder,
		     unsigned ttl_s,
		     void (*done)(void *ctx, int rc, int64_t until), void *ctx);
	void (*release)(void *arg, const char *name, const char *holder);
	int (*publish)(void *arg, const struct acme_chal_row *r,
		       const char *holder, unsigned ttl_s,
		       void (*done)(void *ctx, int rc), void *ctx);
	void (*unpublish)(void *arg, const char *token);
	int (*save)(void *arg, const char *name, const char *chain_pem,
		    const char *key_pem,
		    void (*done)(void *ctx, int rc, const char *why),
		    void *ctx);
	void (*forget)(void *arg);
};

/*
 * What the TLS store serves for name exactly (not a wildcard's, not the
 * default): the leaf's notBefore and notAfter (unix s) of its latest
 * certificate. 0, or -ENOENT when none serves it.
 */
typedef int (*acme_served_fn)(void *arg, const char *name, int64_t *not_before,
			      int64_t *not_after);

/*
 * A manager on base for cfg (copied): the ACME client made (the account
 * key read or created: blocks), the files store's certificates read
 * (storage = "files"). holder names this edged in leases. ops and
 * ops_arg: the store (NULL ops: the files store alone). served tells what
 * the TLS store serves; changed(changed_arg) is called when the files
 * store's certificates changed (acme_mgr_rows). Returns 0 with *out, or
 * a negative errno with err.
 */
int acme_mgr_new(struct event_base *base, const struct config_acme *cfg,
		 const char *holder, const struct acme_store_ops *ops,
		 void *ops_arg, acme_served_fn served, void *served_arg,
		 void (*changed)(void *arg), void *changed_arg,
		 struct acme_mgr **out, struct errbuf *err);

/* The names wanted now (copied; duplicates and names an ACME order
 * cannot hold are left out, said once each). Orders for names no longer
 * wanted are cancelled. */
void acme_mgr_set_names(struct acme_mgr *m, const char *const *names, size_t n);

/* No more orders (the edged drains): those under way cancelled, their
 * tokens unpublished and leases given back; its certificates (the files
 * store's rows) kept. NULL ok. */
void acme_mgr_stop(struct acme_mgr *m);

/* The store's certificates have been read once (the database's table):
 * orders may start. A manager whose store saves elsewhere (ops->save)
 * orders nothing before this, lest a restart order again what the
 * database already holds; with the files store it is ready at once. */
void acme_mgr_ready(struct acme_mgr *m);

/* The served certificates may have changed (a store was swapped in):
 * each name's schedule looked at again. */
void acme_mgr_served_changed(struct acme_mgr *m);

/* The files store's certificates, as rows for the TLS store (ids
 * "acme:NAME"); valid until the next call into m. */
size_t acme_mgr_rows(const struct acme_mgr *m, const struct tls_db_in **rows);

/* Revoke cert_pem (the certificate served for name) at the CA with RFC
 * 5280 reason code reason, then order a new one (edgectl certs revoke
 * NAME). 0, or -ENOENT (not a name of m), -EBUSY (an order of it runs),
 * -EINVAL (no certificate, a bad reason), with err. */
int acme_mgr_revoke(struct acme_mgr *m, const char *name, const char *cert_pem,
		    int reason, struct errbuf *err);

/* Order name now (edgectl certs renew NAME). 0; 1 when an order of it
 * runs already (its certificate is the new one); -ENOENT (not a name of
 * m). */
int acme_mgr_renew(struct acme_mgr *m, const char *name);

/* {"directory", "storage", "account", "names": [{"name", "state",
 * "not_before", "not_after", "renew_at", "next_attempt", "failures",
 * "last_error": {"message", "type", "detail", "status"} | null,
 * "orders", "issued"}...]} (a new reference, NULL when out of memory). */
json_t *acme_mgr_json(const struct acme_mgr *m);

/* Cancel every order (their tokens unpublished), free. NULL ok. */
void acme_mgr_free(struct acme_mgr *m);

#endif /* EDGE_ACME_MGR_H */
