/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * acme_mgr.c - certificates that issue themselves (acme_mgr.h): one entry
 * per wanted name, looked at by a one-second timer on the control loop.
 *
 * An entry's life: idle until due (no certificate served, or two thirds
 * of the served one's lifetime gone, or its back-off over), then leasing
 * (the store's lease), ordering (acme.c; its challenge published in the
 * challenge table and the store), saving (the store, or acme.dir's
 * files), idle again. An entry whose name is no longer wanted is freed
 * once no store call of it is pending.
 */
#include "acme_mgr.h"

#include <errno.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <fcntl.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "acme.h"
#include "tls.h"

enum an_state {
	AN_IDLE,
	AN_LEASING,
	AN_ORDERING,
	AN_SAVING,
	AN_REVOKING,
};

static const char *const an_state_names[] = {"idle", "leasing", "ordering",
					     "saving", "revoking"};

struct acme_name {
	struct acme_mgr *m;
	char name[ACME_NAME_MAX + 1];
	enum an_state state;
	bool wanted, force, leased;
	unsigned pending;     /* store calls whose done has not run */
	int64_t retry_at;     /* unix s; 0: none (after a failure, a lease) */
	int64_t own_renew_at; /* of the certificate it last issued */
	int64_t min_next;     /* no order of it before (unix s) */
	int64_t not_before, not_after; /* served; 0: none */
	unsigned failures;
	uint64_t orders, issued; /* orders: also the current order's number */
	uint64_t bad_nonces;	 /* POSTs sent again after the CA's badNonce */
	char *err_msg, *err_type, *err_detail;
	int err_status;
	char *chain_pem, *key_pem; /* the result being saved */
	struct acme_order *order;
	char token[ACME_CHAL_TOKEN_MAX + 1]; /* the one published, "" */
	bool gone; /* out of m's list, on m->gone until its last done */
	LIST_ENTRY(acme_name) gone_link;
};

/* A publish in the store: the order that asked (its number), so that a
 * late answer never reaches a later order of the name. */
struct an_pub {
	struct acme_name *a;
	uint64_t order;
	LIST_ENTRY(an_pub) link; /* on m->pubs until its done */
};

struct acme_mgr {
	struct event_base *base;
	struct evdns_base *dns;
	struct config_acme cfg;
	char *holder;
	const struct acme_store_ops *ops;
	void *ops_arg;
	acme_served_fn served;
	void *served_arg;
	void (*changed)(void *arg);
	void *changed_arg;
	struct acme_client *client;
	struct event *tick;
	struct acme_name **v;
	size_t n;
	unsigned running;
	/* what the store's pending calls point at: freed with m when the
	 * store forgets them */
	LIST_HEAD(acme_gone_list, acme_name) gone;
	LIST_HEAD(an_pub_list, an_pub) pubs;
	bool ready;   /* the store's certificates known: orders may start */
	bool stopped; /* draining: no more orders (acme_mgr_stop) */
	/* the files store's certificates, as rows (acme_mgr_rows) */
	struct tls_db_in *rows;
	char **row_bufs; /* each row's id, names, chain, key: 4 per row */
	size_t n_rows;
};

static void an_free(struct acme_name *a)
{
	if (a->gone)
		LIST_REMOVE(a, gone_link);
	free(a->err_msg);
	free(a->err_type);
	free(a->err_detail);
	free(a->chain_pem);
	if (a->key_pem)
		OPENSSL_cleanse(a->key_pem, strlen(a->key_pem));
	free(a->key_pem);
	free(a);
}

static int64_t mgr_now(void)
{
	return (int64_t)time(NULL);
}

/* Two thirds of the way from nb to na: when a certificate is renewed. */
static int64_t mgr_renew_point(int64_t nb, int64_t na)
{
	return nb + (na - nb) * 2 / 3;
}

static char *mgr_dup(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void mgr_cfg_free(struct config_acme *c)
{
	free(c->directory);
	free(c->account_key);
	free(c->contact);
	free(c->ca);
	free(c->dir);
	memset(c, 0, sizeof(*c));
}

static int mgr_cfg_copy(struct config_acme *d, const struct config_acme *s)
{
	*d = *s;
	d->directory = mgr_dup(s->directory);
	d->account_key = mgr_dup(s->account_key);
	d->contact = mgr_dup(s->contact ? s->contact : "");
	d->ca = mgr_dup(s->ca ? s->ca : "");
	d->dir = mgr_dup(s->dir ? s->dir : "");
	if (!d->directory || !d->account_key || !d->contact || !d->ca ||
	    !d->dir) {
		mgr_cfg_free(d);
		return -ENOMEM;
	}
	return 0;
}

/* ---- the files store ------------------------------------------------- */

static void mgr_rows_clear(struct acme_mgr *m)
{
	size_t i;

	for (i = 0; i < m->n_rows * 4; i++) {
		if (i % 4 == 3 && m->row_bufs[i])
			OPENSSL_cleanse(m->row_bufs[i], strlen(m->row_bufs[i]));
		free(m->row_bufs[i]);
	}
	free(m->row_bufs);
	free(m->rows);
	m->row_bufs = NULL;
	m->rows = NULL;
	m->n_rows = 0;
}

/* A whole small regular file into a new string, or NULL: opened without
 * blocking (a FIFO put there never stalls the control loop), at most
 * TLS_FILE_MAX bytes. */
static char *mgr_read(const char *path)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
	char *buf = NULL;
	struct stat st;
	ssize_t n = -1;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
	    st.st_size <= TLS_FILE_MAX &&
	    (buf = malloc((size_t)st.st_size + 1)))
		n = read(fd, buf, (size_t)st.st_size);
	close(fd);
	if (buf && n != (ssize_t)st.st_size) {
		free(buf);
		return NULL;
	}
	if (buf)
		buf[n] = '\0';
	return buf;
}

/* Read acme.dir's NAME.crt and NAME.key for every wanted name into the
 * rows (their names: the wanted name). */
static int64_t mgr_pem_renew_at(const char *pem, int64_t *min_next);

static int mgr_rows_load(struct acme_mgr *m)
{
	char path[4096];
	size_t i;

	mgr_rows_clear(m);
	if (m->cfg.database || !m->n)
		return 0;
	m->rows = calloc(m->n, sizeof(*m->rows));
	m->row_bufs = calloc(m->n * 4, sizeof(*m->row_bufs));
	if (!m->rows || !m->row_bufs) {
		mgr_rows_clear(m);
		return -ENOMEM;
	}
	for (i = 0; i < m->n; i++) {
		struct acme_name *a = m->v[i];
		char **b = &m->row_bufs[m->n_rows * 4];
		int64_t ignored;
		struct tls_db_in *r = &m->rows[m->n_rows];

		if (!a->wanted)
			continue;
		snprintf(path, sizeof(path), "%s/%s.crt", m->cfg.dir, a->name);
		b[2] = mgr_read(path);
		snprintf(path, sizeof(path), "%s/%s.key", m->cfg.dir, a->name);
		b[3] = b[2] ? mgr_read(path) : NULL;
		if (!b[2] || !b[3]) {
			free(b[2]);
			free(b[3]);
			b[2] = b[3] = NULL;
			continue;
		}
		if (!a->own_renew_at) /* its own, from before a restart */
			a->own_renew_at = mgr_pem_renew_at(b[2], &ignored);
		if (asprintf(&b[0], "acme:%s", a->name) < 0)
			b[0] = NULL;
		b[1] = strdup(a->name);
		if (!b[0] || !b[1])
			return -ENOMEM; /* the partial row is freed by clear */
		r->id = b[0];
		r->names = b[1];
		r->chain_pem = b[2];
		r->key_pem = b[3];
		r->ocsp_hex = "";
		m->n_rows++;
	}
	return 0;
}

size_t acme_mgr_rows(const struct acme_mgr *m, const struct tls_db_in **rows)
{
	*rows = m ? m->rows : NULL;
	return m ? m->n_rows : 0;
}

/* Write s to the temporary file tmp (made anew, mode). */
static int mgr_write_tmp(const char *tmp, const char *s, mode_t mode)
{
	size_t n = strlen(s);
	int fd, rc = 0;

	unlink(tmp); /* a leftover keeps no mode of its own */
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
		  mode);
	if (fd < 0)
		return -errno;
	if (write(fd, s, n) != (ssize_t)n || fsync(fd) < 0)
		rc = errno ? -errno : -EIO;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

/* dir/NAME.key and dir/NAME.crt: both written to temporary files, then
 * renamed into place, the key first (a failure before the renames leaves
 * the old pair whole). */
static int mgr_write_pair(const struct acme_mgr *m, const char *name,
			  const char *key_pem, const char *chain_pem)
{
	char key[4096], crt[4096], tk[4200], tc[4200];
	int rc;

	snprintf(key, sizeof(key), "%s/%s.key", m->cfg.dir, name);
	snprintf(crt, sizeof(crt), "%s/%s.crt", m->cfg.dir, name);
	snprintf(tk, sizeof(tk), "%s.tmp-%d", key, (int)getpid());
	snprintf(tc, sizeof(tc), "%s.tmp-%d", crt, (int)getpid());
	rc = mgr_write_tmp(tk, key_pem, 0600);
	if (rc == 0)
		rc = mgr_write_tmp(tc, chain_pem, 0644);
	if (rc == 0 && rename(tk, key) < 0)
		rc = -errno;
	if (rc == 0 && rename(tc, crt) < 0)
		rc = -errno;
	if (rc < 0) {
		unlink(tk);
		unlink(tc);
	}
	return rc;
}

/* ---- an entry's steps -------------------------------------------------- */

static void an_set_error(struct acme_name *a, const char *msg, const char *type,
			 const char *detail, int status)
{
	free(a->err_msg);
	free(a->err_type);
	free(a->err_detail);
	a->err_msg = mgr_dup(msg);
	a->err_type = mgr_dup(type);
	a->err_detail = mgr_dup(detail);
	a->err_status = status;
}

/* retry_min doubling per failure, at most retry_max, less up to 10 %. */
static int64_t an_backoff_ms(const struct acme_mgr *m, unsigned failures)
{
	uint64_t ms = m->cfg.retry_min_ms, cap = m->cfg.retry_max_ms;
	unsigned i, r = 0;

	for (i = 1; i < failures && ms < cap; i++)
		ms *= 2;
	if (ms > cap)
		ms = cap;
	if (RAND_bytes((unsigned char *)&r, sizeof(r)) == 1)
		ms -= ms / 10 * (r % 1001) / 1000;
	return (int64_t)ms;
}

static void an_release(struct acme_name *a)
{
	struct acme_mgr *m = a->m;

	if (a->leased && m->ops && m->ops->release)
		m->ops->release(m->ops_arg, a->name, m->holder);
	a->leased = false;
}

/* The order (or a step around it) failed: said, backed off. */
static void an_failed(struct acme_name *a, const char *msg, const char *type,
		      const char *detail, int status)
{
	struct acme_mgr *m = a->m;
	int64_t ms;

	a->failures++;
	ms = an_backoff_ms(m, a->failures);
	a->retry_at = mgr_now() + (ms + 999) / 1000;
	an_set_error(a, msg, type, detail, status);
	log_warnx("acme: %s: the order failed (%u in a row), the certificate "
		  "served now keeps serving; next try in %lld s: %s%s%s%s%s",
		  a->name, a->failures, (long long)((ms + 999) / 1000), msg,
		  type ? " (" : "", type ? type : "", detail ? ": " : "",
		  detail ? detail : "");
	a->state = AN_IDLE;
	an_release(a);
}

/* The renewal point of the PEM chain's leaf, or 0; *min_next: the
 * earliest another order of the name may start (a tenth of the lifetime
 * from now, at least 10 s: a clock far ahead, which makes every new
 * certificate look due at once, never orders in a loop). */
static int64_t mgr_pem_renew_at(const char *pem, int64_t *min_next)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
	int64_t nb = 0, na = 0;
	struct tm tm;

	if (x && ASN1_TIME_to_tm(X509_get0_notBefore(x), &tm) == 1)
		nb = (int64_t)timegm(&tm);
	if (x && ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) == 1)
		na = (int64_t)timegm(&tm);
	X509_free(x);
	BIO_free(b);
	*min_next =
	    mgr_now() + (na > nb && (na - nb) / 10 > 10 ? (na - nb) / 10 : 10);
	return na > nb ? mgr_renew_point(nb, na) : 0;
}

static void an_saved(struct acme_name *a, int rc, const char *why)
{
	struct acme_mgr *m = a->m;

	if (rc < 0) {
		char msg[512];

		snprintf(msg, sizeof(msg),
			 "the certificate was issued but could not be kept: %s",
			 why ? why : strerror(-rc));
		an_failed(a, msg, NULL, NULL, 0);
		return;
	}
	a->own_renew_at = mgr_pem_renew_at(a->chain_pem, &a->min_next);
	a->failures = 0;
	a->retry_at = 0;
	a->issued++;
	an_set_error(a, NULL, NULL, NULL, 0);
	a->state = AN_IDLE;
	an_release(a);
	log_note("acme: %s: certificate issued and stored (%s)", a->name,
		 m->cfg.database ? "the database's certificates table"
				 : m->cfg.dir);
	if (!m->cfg.database) {
		if (mgr_rows_load(m) < 0)
			log_warnx("acme: out of memory reading %s", m->cfg.dir);
		if (m->changed)
			m->changed(m->changed_arg);
	}
}

static void an_save_done(void *ctx, int rc, const char *why)
{
	struct acme_name *a = ctx;

	a->pending--;
	if (!a->wanted && !a->pending) {
		an_free(a); /* already out of m's list */
		return;
	}
	an_saved(a, rc, why);
	if (rc < 0)
		return; /* kept: the next try saves it again, no new order */
	free(a->chain_pem);
	if (a->key_pem)
		OPENSSL_cleanse(a->key_pem, strlen(a->key_pem));
	free(a->key_pem);
	a->chain_pem = a->key_pem = NULL;
}

static void an_save(struct acme_name *a)
{
	struct acme_mgr *m = a->m;
	int rc;

	a->state = AN_SAVING;
	if (m->ops && m->ops->save) {
		a->pending++;
		rc = m->ops->save(m->ops_arg, a->name, a->chain_pem, a->key_pem,
				  an_save_done, a);
		if (rc < 0)
			an_save_done(a, rc, NULL);
		return;
	}
	rc = mgr_write_pair(m, a->name, a->key_pem, a->chain_pem);
	a->pending++;
	an_save_done(a, rc, NULL);
}

/* acme_ops */

static void an_pub_done(void *ctx, int rc)
{
	struct an_pub *p = ctx;
	struct acme_name *a = p->a;
	uint64_t order = p->order;

	LIST_REMOVE(p, link);
	free(p);
	a->pending--;
	if (!a->wanted && !a->pending) {
		an_free(a);
		return;
	}
	if (a->order && order == a->orders)
		acme_order_published(a->order, rc);
}

static int an_publish(void *arg, const struct acme_chal_row *row)
{
	struct acme_name *a = arg;
	struct acme_mgr *m = a->m;
	struct an_pub *p;
	int rc = acme_chal_add(ACME_CHAL_LOCAL, row);

	if (rc < 0)
		return rc;
	snprintf(a->token, sizeof(a->token), "%s", row->token);
	if (!m->ops || !m->ops->publish)
		return 0;
	if (!(p = malloc(sizeof(*p)))) { /* not published: none of it */
		acme_chal_remove(ACME_CHAL_LOCAL, row->token);
		a->token[0] = '\0';
		return -ENOMEM;
	}
	p->a = a;
	p->order = a->orders;
	LIST_INSERT_HEAD(&m->pubs, p, link);
	a->pending++;
	rc = m->ops->publish(m->ops_arg, row, m->holder, ACME_LEASE_S,
			     an_pub_done, p);
	if (rc < 0) {
		a->pending--;
		LIST_REMOVE(p, link);
		free(p);
		acme_chal_remove(ACME_CHAL_LOCAL, row->token);
		a->token[0] = '\0';
		return rc;
	}
	return 1;
}

static void an_unpublish(void *arg, const char *token)
{
	struct acme_name *a = arg;
	struct acme_mgr *m = a->m;

	acme_chal_remove(ACME_CHAL_LOCAL, token);
	if (m->ops && m->ops->unpublish)
		m->ops->unpublish(m->ops_arg, token);
	a->token[0] = '\0';
}

static void an_done(void *arg, const struct acme_result *res)
{
	struct acme_name *a = arg;
	struct acme_mgr *m = a->m;

	a->order = NULL;
	m->running--;
	a->bad_nonces += res->nonce_retries;
	if (res->error) {
		an_failed(a, res->message, res->problem_type,
			  res->problem_detail, res->problem_status);
		return;
	}
	a->chain_pem = strdup(res->cert_pem);
	a->key_pem = strdup(res->key_pem);
	if (!a->chain_pem || !a->key_pem) {
		an_failed(a, "out of memory", NULL, NULL, 0);
		return;
	}
	an_save(a);
}

static const struct acme_ops an_ops = {an_publish, an_unpublish, an_done};

/* The revocation's end: a new certificate ordered now either way (the
 * one served may be compromised). */
static void an_revoke_done(void *arg, const struct acme_result *res)
{
	struct acme_name *a = arg;
	struct acme_mgr *m = a->m;

	a->order = NULL;
	m->running--;
	a->state = AN_IDLE;
	a->force = true;
	a->retry_at = 0;
	if (res->error) {
		an_set_error(a, res->message, res->problem_type,
			     res->problem_detail, res->problem_status);
		log_warnx("acme: %s: the revocation failed, a new certificate "
			  "is ordered all the same: %s",
			  a->name, res->message);
		return;
	}
	log_note("acme: %s: its certificate revoked at the CA; a new one is "
		 "ordered",
		 a->name);
}

static const struct acme_ops an_revoke_ops = {NULL, NULL, an_revoke_done};

static void an_order(struct acme_name *a)
{
	struct acme_mgr *m = a->m;
	const char *names[1] = {a->name};
	struct errbuf err = {""};

	a->state = AN_ORDERING;
	a->orders++;
	log_note("acme: %s: ordering a certificate (%s)", a->name,
		 m->cfg.directory);
	if (acme_order_start(m->client, names, 1, &an_ops, a, &a->order, &err) <
	    0) {
		m->running--;
		an_failed(a, err.msg, NULL, NULL, 0);
	}
}

static void an_lease_done(void *ctx, int rc, int64_t until)
{
	struct acme_name *a = ctx;
	struct acme_mgr *m = a->m;

	a->pending--;
	if (!a->wanted) {
		if (rc == 1 && m->ops && m->ops->release)
			m->ops->release(m->ops_arg, a->name, m->holder);
		if (!a->pending)
			an_free(a);
		return;
	}
	if (m->stopped) { /* acme_mgr_stop counted it out */
		if (rc == 1 && m->ops && m->ops->release)
			m->ops->release(m->ops_arg, a->name, m->holder);
		a->state = AN_IDLE;
		return;
	}
	if (rc == 1) {
		a->leased = true;
		an_order(a);
		return;
	}
	m->running--;
	a->state = AN_IDLE;
	if (rc == 0) {
		/* another host orders it: look again after its lease (its
		 * certificate will have come by the database by then) */
		a->retry_at = (until > mgr_now() ? until : mgr_now()) + 1 +
			      (int64_t)(rand() % 5);
		log_note("acme: %s: another host holds its lease; looking "
			 "again in %lld s",
			 a->name, (long long)(a->retry_at - mgr_now()));
		return;
	}
	an_failed(a, "the lease could not be taken from the database", NULL,
		  strerror(-rc), 0);
}

/* When a is due: now when no certificate serves it or it was forced,
 * else at two thirds of the served (or its own last) certificate's
 * lifetime; not before its back-off or another's lease ends. */
static int64_t an_due(struct acme_name *a)
{
	struct acme_mgr *m = a->m;
	int64_t nb = 0, na = 0, due = 0;

	if (m->served && m->served(m->served_arg, a->name, &nb, &na) == 0 &&
	    na > nb) {
		a->not_before = nb;
		a->not_after = na;
		due = mgr_renew_point(nb, na);
	} else
		a->not_before = a->not_after = 0;
	if (a->own_renew_at > due)
		due = a->own_renew_at;
	if (a->min_next > due)
		due = a->min_next;
	if (a->force || a->chain_pem)
		due = 0;
	if (a->retry_at > due)
		due = a->retry_at;
	return due;
}

static void an_start(struct acme_name *a)
{
	struct acme_mgr *m = a->m;
	int rc;

	a->force = false;
	if (a->chain_pem) { /* issued, not kept yet: saved again alone */
		log_note("acme: %s: storing the certificate issued earlier "
			 "again",
			 a->name);
		an_save(a);
		return;
	}
	m->running++;
	if (!m->ops || !m->ops->lease) {
		a->leased = true;
		an_order(a);
		return;
	}
	a->state = AN_LEASING;
	a->pending++;
	rc = m->ops->lease(m->ops_arg, a->name, m->holder, ACME_LEASE_S,
			   an_lease_done, a);
	if (rc < 0)
		an_lease_done(a, rc, 0);
}

static void mgr_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct acme_mgr *m = arg;
	int64_t now = mgr_now();
	size_t i;

	(void)fd;
	(void)what;
	for (i = 0; m->ready && !m->stopped && i < m->n &&
		    m->running < ACME_ORDERS_MAX;
	     i++) {
		struct acme_name *a = m->v[i];

		if (a->state == AN_IDLE && an_due(a) <= now)
			an_start(a);
	}
}

/* ---- the manager ----------------------------------------------------- */

int acme_mgr_new(struct event_base *base, const struct config_acme *cfg,
		 const char *holder, const struct acme_store_ops *ops,
		 void *ops_arg, acme_served_fn served, void *served_arg,
		 void (*changed)(void *arg), void *changed_arg,
		 struct acme_mgr **out, struct errbuf *err)
{
	struct timeval tv = {1, 0};
	struct acme_config ac;
	struct acme_mgr *m = calloc(1, sizeof(*m));
	int rc;

	if (!m || mgr_cfg_copy(&m->cfg, cfg) < 0 ||
	    !(m->holder = strdup(holder))) {
		if (m)
			mgr_cfg_free(&m->cfg);
		free(m);
		errbuf_set(err, "acme: out of memory");
		return -ENOMEM;
	}
	m->base = base;
	m->ops = ops;
	m->ops_arg = ops_arg;
	m->served = served;
	m->served_arg = served_arg;
	m->changed = changed;
	m->changed_arg = changed_arg;
	m->ready = !ops || !ops->save;
	/* the CA's name resolved without blocking the loop */
	m->dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
	memset(&ac, 0, sizeof(ac));
	ac.directory_url = m->cfg.directory;
	ac.ca_file = m->cfg.ca[0] ? m->cfg.ca : NULL;
	ac.account_key_file = m->cfg.account_key;
	ac.contact = m->cfg.contact[0] ? m->cfg.contact : NULL;
	ac.dns = m->dns;
	ac.challenge = (enum acme_chal_type)m->cfg.challenge;
	rc = 0;
	if (!m->cfg.database && access(m->cfg.dir, W_OK | X_OK) < 0) {
		rc = -errno;
		errbuf_set(err,
			   "acme: dir %s: %s: edged's user must be able to "
			   "write its certificates there",
			   m->cfg.dir, strerror(errno));
	}
	if (rc == 0)
		rc = acme_client_new(base, &ac, &m->client, err);
	if (rc == 0) {
		m->tick = event_new(base, -1, EV_PERSIST, mgr_tick_cb, m);
		if (!m->tick || event_add(m->tick, &tv) < 0) {
			errbuf_set(err, "acme: out of memory");
			rc = -ENOMEM;
		}
	}
	if (rc < 0) {
		acme_mgr_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

/* Take entry i out of m's list (freed now, or by its last done). */
static void mgr_drop(struct acme_mgr *m, size_t i)
{
	struct acme_name *a = m->v[i];

	a->wanted = false;
	if (a->order) {
		acme_order_cancel(a->order); /* unpublishes */
		a->order = NULL;
		m->running--;
	} else if (a->state == AN_LEASING)
		m->running--;
	an_release(a);
	m->v[i] = m->v[--m->n];
	if (!a->pending)
		an_free(a);
	else {
		a->gone = true;
		LIST_INSERT_HEAD(&m->gone, a, gone_link);
	}
}

void acme_mgr_set_names(struct acme_mgr *m, const char *const *names, size_t n)
{
	struct acme_name **v;
	size_t i, k;
	bool rows = false;

	/* drop what is no longer wanted */
	for (i = 0; i < m->n;) {
		for (k = 0; k < n; k++)
			if (names[k] && strcmp(names[k], m->v[i]->name) == 0)
				break;
		if (k == n) {
			log_note("acme: %s: no longer tls = \"auto\": its "
				 "certificate is not renewed",
				 m->v[i]->name);
			mgr_drop(m, i);
			rows = true;
		} else
			i++;
	}
	for (k = 0; k < n; k++) {
		struct acme_name *a;

		if (!names[k])
			continue;
		for (i = 0; i < m->n; i++)
			if (strcmp(names[k], m->v[i]->name) == 0)
				break;
		if (i < m->n)
			continue;
		if (!acme_name_ok(names[k])) {
			log_warnx("acme: %s: not a name an ACME certificate "
				  "can hold (lowercase letters, digits, '-' "
				  "and '.'): left out",
				  names[k]);
			continue;
		}
		v = realloc(m->v, (m->n + 1) * sizeof(*v));
		a = v ? calloc(1, sizeof(*a)) : NULL;
		if (v)
			m->v = v;
		if (!a) {
			log_warnx("acme: out of memory: %s left out", names[k]);
			continue;
		}
		a->m = m;
		a->wanted = true;
		snprintf(a->name, sizeof(a->name), "%s", names[k]);
		m->v[m->n++] = a;
		rows = true;
	}
	if (rows && !m->cfg.database) {
		if (mgr_rows_load(m) < 0)
			log_warnx("acme: out of memory reading %s", m->cfg.dir);
		if (m->changed)
			m->changed(m->changed_arg);
	}
}

void acme_mgr_stop(struct acme_mgr *m)
{
	size_t i;

	if (!m || m->stopped)
		return;
	m->stopped = true;
	for (i = 0; i < m->n; i++) {
		struct acme_name *a = m->v[i];

		if (a->order) {
			acme_order_cancel(a->order); /* unpublishes */
			a->order = NULL;
			m->running--;
			a->state = AN_IDLE;
		} else if (a->state == AN_LEASING)
			m->running--; /* its lease's answer releases it */
		if (a->state == AN_IDLE)
			an_release(a);
	}
	log_note("acme: draining: no more orders from this edged");
}

void acme_mgr_ready(struct acme_mgr *m)
{
	if (m && !m->ready) {
		m->ready = true;
		log_note("acme: the database's certificates read: orders may "
			 "start");
	}
}

void acme_mgr_served_changed(struct acme_mgr *m)
{
	size_t i;

	for (i = 0; m && i < m->n; i++)
		(void)an_due(m->v[i]);
}

int acme_mgr_revoke(struct acme_mgr *m, const char *name, const char *cert_pem,
		    int reason, struct errbuf *err)
{
	struct acme_name *a = NULL;
	size_t i;
	int rc;

	for (i = 0; m && i < m->n; i++)
		if (strcmp(m->v[i]->name, name) == 0)
			a = m->v[i];
	if (!a) {
		errbuf_set(err,
			   "%.253s is no name of an environment with tls "
			   "= \"auto\"",
			   name);
		return -ENOENT;
	}
	if (a->state != AN_IDLE || m->stopped) {
		errbuf_set(err, "%s is %s: try again when it is idle", name,
			   m->stopped ? "draining" : an_state_names[a->state]);
		return -EBUSY;
	}
	rc = acme_revoke_start(m->client, cert_pem, reason, &an_revoke_ops, a,
			       &a->order, err);
	if (rc < 0)
		return rc;
	a->state = AN_REVOKING;
	m->running++;
	log_note("acme: %s: revoking its certificate (reason %d)", name,
		 reason);
	return 0;
}

int acme_mgr_renew(struct acme_mgr *m, const char *name)
{
	size_t i;

	for (i = 0; m && i < m->n; i++)
		if (strcmp(m->v[i]->name, name) == 0) {
			if (m->v[i]->state == AN_LEASING ||
			    m->v[i]->state == AN_ORDERING ||
			    m->v[i]->state == AN_SAVING)
				return 1; /* what it makes is the new one */
			m->v[i]->force = true;
			m->v[i]->retry_at = 0;
			m->v[i]->min_next = 0;
			return 0;
		}
	return -ENOENT;
}

static json_t *an_json(struct acme_name *a)
{
	json_t *err = json_null();
	int64_t due = an_due(a);

	if (a->err_msg)
		err = json_pack("{s:s, s:s?, s:s?, s:i}", "message", a->err_msg,
				"type", a->err_type, "detail", a->err_detail,
				"status", a->err_status);
	return json_pack(
	    "{s:s, s:s, s:I, s:I, s:I, s:I, s:i, s:o, s:I, s:I, s:I}", "name",
	    a->name, "state", an_state_names[a->state], "not_before",
	    (json_int_t)a->not_before, "not_after", (json_int_t)a->not_after,
	    "renew_at",
	    (json_int_t)(a->not_after
			     ? mgr_renew_point(a->not_before, a->not_after)
			     : 0),
	    "next_attempt", (json_int_t)(a->state == AN_IDLE ? due : 0),
	    "failures", (int)a->failures, "last_error", err ? err : json_null(),
	    "orders", (json_int_t)a->orders, "issued", (json_int_t)a->issued,
	    "bad_nonces", (json_int_t)a->bad_nonces);
}

json_t *acme_mgr_json(const struct acme_mgr *m)
{
	const char *acct = acme_client_account_url(m->client);
	json_t *names = json_array(), *j;
	size_t i;

	if (!names)
		return NULL;
	for (i = 0; i < m->n; i++)
		if (json_array_append_new(names, an_json(m->v[i])) < 0) {
			json_decref(names);
			return NULL;
		}
	j = json_pack(
	    "{s:s, s:s, s:s?, s:s, s:s, s:o}", "directory", m->cfg.directory,
	    "storage", m->cfg.database ? "database" : "files", "account", acct,
	    "challenge",
	    acme_chal_type_name((enum acme_chal_type)m->cfg.challenge),
	    "holder", m->holder, "names", names);
	return j;
}

void acme_mgr_free(struct acme_mgr *m)
{
	size_t i;

	if (!m)
		return;
	if (m->ops && m->ops->forget)
		m->ops->forget(m->ops_arg);
	for (i = 0; i < m->n; i++) {
		struct acme_name *a = m->v[i];

		if (a->order)
			acme_order_cancel(a->order);
		a->order = NULL;
		an_release(a);
		an_free(a);
	}
	while (!LIST_EMPTY(&m->gone)) /* their store calls forgotten */
		an_free(LIST_FIRST(&m->gone));
	while (!LIST_EMPTY(&m->pubs)) {
		struct an_pub *p = LIST_FIRST(&m->pubs);

		LIST_REMOVE(p, link);
		free(p);
	}
	free(m->v);
	mgr_rows_clear(m);
	if (m->tick)
		event_free(m->tick);
	acme_client_free(m->client);
	if (m->dns)
		evdns_base_free(m->dns, 0);
	mgr_cfg_free(&m->cfg);
	free(m->holder);
	free(m);
}
