// SPDX-License-Identifier: BSD-2-Clause
/*
 * tls_up.c - TLS to upstreams (tls_up.h).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clk.h"
#include "route_src.h"
#include "siphash.h"
#include "tls_up.h"

/* One SSL_CTX of a distinct (verify, ca, cert, key). */
struct tls_up_prof {
	char key[4 * CONFIG_PATH_MAX + 64];
	SSL_CTX *ctx;
	uint64_t id; /* unique for the process's life: sessions and pooled
			connections are matched by it, never by address */
	bool verify;
};

static pthread_mutex_t tls_up_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tls_up_prof *tls_up_v; /* under tls_up_lock */
static size_t tls_up_n;
/* the set before the last load: the routes of an older generation (or
 * of a reload refused after the load) still find theirs */
static struct tls_up_prof *tls_up_prev;
static size_t tls_up_nprev;
/* the database's profiles (tls_up_hold), each held by the deployments
 * that name it; one held no more stays findable for TLS_UP_GRACE_NS (the
 * routes of an older generation), then goes at the next hold or release */
struct tls_up_held {
	struct tls_up_prof p;
	struct config_up_tls t; /* what it was built of (server_name "") */
	unsigned refs;
	uint64_t unheld_ns;
};
#define TLS_UP_GRACE_NS (120 * 1000000000ull)
static struct tls_up_held *tls_up_db; /* under tls_up_lock */
static size_t tls_up_ndb;
static atomic_uint_fast64_t tls_up_ids;
static int tls_up_ex = -1;	 /* the SSL's session slot key, ex_data */
static int tls_up_ex_asked = -1; /* 1: the server asked for a certificate */

/* Saved sessions: per worker thread, direct-mapped by hash. */
#define TLS_UP_SESSIONS 256
struct tls_up_sess {
	uint64_t h;
	SSL_SESSION *s;
};
static __thread struct tls_up_sess tls_up_sessions[TLS_UP_SESSIONS];

/* A group's key: its fields with their lengths, so that no two groups
 * share one whatever their paths hold. */
static void tls_up_key(const struct config_up_tls *t, char *buf, size_t len)
{
	snprintf(buf, len, "%d|%zu:%s|%zu:%s|%zu:%s", !t->no_verify,
		 strlen(t->ca), t->ca, strlen(t->cert), t->cert, strlen(t->key),
		 t->key);
}

/* OpenSSL's new session: saved in the thread's slot the SSL names (the
 * reference is ours: 1). */
static int tls_up_new_session(SSL *ssl, SSL_SESSION *s)
{
	uint64_t h = (uint64_t)(uintptr_t)SSL_get_ex_data(ssl, tls_up_ex);
	struct tls_up_sess *e = &tls_up_sessions[h % TLS_UP_SESSIONS];

	if (!h)
		return 0;
	if (e->s)
		SSL_SESSION_free(e->s);
	e->h = h;
	e->s = s;
	return 1;
}

/* The server asks for a client certificate and the profile has none:
 * noted (it may close after the handshake: tls_up_cert_wanted), none
 * sent. */
static int tls_up_cert_cb(SSL *ssl, X509 **x509, EVP_PKEY **pkey)
{
	(void)x509;
	(void)pkey;
	SSL_set_ex_data(ssl, tls_up_ex_asked, (void *)1);
	return 0;
}

bool tls_up_verified(const SSL *ssl)
{
	return (SSL_get_verify_mode(ssl) & SSL_VERIFY_PEER) &&
	       SSL_get_verify_result(ssl) == X509_V_OK;
}

int tls_up_offer_h2(SSL *ssl)
{
	static const unsigned char alpn[] = "\x02h2\x08http/1.1";

	return SSL_set_alpn_protos(ssl, alpn, sizeof(alpn) - 1) ? -ENOMEM : 0;
}

bool tls_up_cert_wanted(const SSL *ssl)
{
	return tls_up_ex_asked >= 0 &&
	       SSL_get_ex_data(ssl, tls_up_ex_asked) != NULL;
}

/* The reason of the library's last error, for a message. */
static const char *tls_up_err(void)
{
	unsigned long e = ERR_peek_error();
	const char *r;

	/* a file that cannot be opened: the system's reason */
	if (e && ERR_GET_LIB(e) == ERR_LIB_SYS)
		return strerror(ERR_GET_REASON(e));
	r = e ? ERR_reason_error_string(e) : NULL;
	return r ? r : "unknown error";
}

/* Whether path is a regular file edged may read (opened without
 * blocking: a FIFO or a device never holds the control loop), at most
 * TLS_UP_FILE_MAX bytes: 0, or -EINVAL with err saying why, as "WHAT
 * PATH: why". */
#define TLS_UP_FILE_MAX (4u << 20)
static int tls_up_file_ok(const char *what, const char *path,
			  struct errbuf *err)
{
	struct stat st;
	bool ok = false;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	if (fd < 0) {
		errbuf_set(err, "%s %s: %s", what, path, strerror(errno));
		return -EINVAL;
	}
	if (fstat(fd, &st) < 0)
		errbuf_set(err, "%s %s: %s", what, path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		errbuf_set(err, "%s %s: not a regular file", what, path);
	else if ((uint64_t)st.st_size > TLS_UP_FILE_MAX)
		errbuf_set(err, "%s %s: larger than 4 MiB", what, path);
	else
		ok = true;
	close(fd);
	return ok ? 0 : -EINVAL;
}

static int tls_up_build(const struct config_up_tls *t, SSL_CTX **out,
			struct errbuf *err)
{
	static const unsigned char alpn[] = "\x08http/1.1";
	SSL_CTX *ctx;
	int rc = -EINVAL;

	if ((t->ca[0] && tls_up_file_ok("ca", t->ca, err)) ||
	    (t->cert[0] && tls_up_file_ok("cert", t->cert, err)) ||
	    (t->key[0] && tls_up_file_ok("key", t->key, err)))
		return -EINVAL;
	ctx = SSL_CTX_new(TLS_client_method());
	ERR_clear_error();
	if (!ctx) {
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(
	    ctx, t->no_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_session_cache_mode(
	    ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(ctx, tls_up_new_session);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	/* an upstream's FIN without close_notify is the end of the stream,
	 * as for a plain one (HTTP frames its messages; a pooled connection
	 * closed that way is retried, not blamed) */
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	if (SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1)) {
		errbuf_set(err, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	if (t->ca[0] ? SSL_CTX_load_verify_locations(ctx, t->ca, NULL) != 1
		     : SSL_CTX_set_default_verify_paths(ctx) != 1) {
		errbuf_set(err, "ca %s: %s",
			   t->ca[0] ? t->ca : "(the system's)", tls_up_err());
		goto fail;
	}
	if (!t->cert[0])
		SSL_CTX_set_client_cert_cb(ctx, tls_up_cert_cb);
	if (t->cert[0] &&
	    SSL_CTX_use_certificate_chain_file(ctx, t->cert) != 1) {
		errbuf_set(err, "cert %s: %s", t->cert, tls_up_err());
		goto fail;
	}
	if (t->key[0] &&
	    (SSL_CTX_use_PrivateKey_file(ctx, t->key, SSL_FILETYPE_PEM) != 1 ||
	     SSL_CTX_check_private_key(ctx) != 1)) {
		errbuf_set(err, "key %s: %s", t->key, tls_up_err());
		goto fail;
	}
	ERR_clear_error();
	*out = ctx;
	return 0;
fail:
	ERR_clear_error();
	SSL_CTX_free(ctx);
	return rc;
}

int tls_up_check(const struct config_up_tls *t, struct errbuf *err)
{
	SSL_CTX *ctx;
	int rc = tls_up_build(t, &ctx, err);

	if (rc == 0)
		SSL_CTX_free(ctx);
	return rc;
}

static void tls_up_free_v(struct tls_up_prof *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		SSL_CTX_free(v[i].ctx);
	free(v);
}

/* Add t's profile to v (of *n) unless there: 0 or -errno. */
static int tls_up_add(struct tls_up_prof **v, size_t *n,
		      const struct config_up_tls *t, const char *dep,
		      struct errbuf *err)
{
	struct tls_up_prof *p;
	char key[sizeof(p->key)];
	struct errbuf e;
	size_t i;
	int rc;

	tls_up_key(t, key, sizeof(key));
	for (i = 0; i < *n; i++)
		if (strcmp((*v)[i].key, key) == 0)
			return 0;
	p = realloc(*v, (*n + 1) * sizeof(**v));
	if (!p) {
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	*v = p;
	p += *n;
	memset(p, 0, sizeof(*p));
	errbuf_clear(&e);
	rc = tls_up_build(t, &p->ctx, &e);
	if (rc) {
		errbuf_set(err, "deployment %s: tls: %s", dep, e.msg);
		return rc;
	}
	memcpy(p->key, key, sizeof(p->key));
	/* the same group keeps its id: its pooled connections and saved
	 * sessions go on serving across a reload */
	pthread_mutex_lock(&tls_up_lock);
	for (i = 0; i < tls_up_n && !p->id; i++)
		if (strcmp(tls_up_v[i].key, key) == 0)
			p->id = tls_up_v[i].id;
	pthread_mutex_unlock(&tls_up_lock);
	if (!p->id)
		p->id = atomic_fetch_add(&tls_up_ids, 1) + 1;
	p->verify = !t->no_verify;
	(*n)++;
	return 0;
}

static void tls_up_db_reread(void);

int tls_up_load(const struct route_src *src, struct errbuf *err)
{
	static const struct config_up_tls none;
	struct tls_up_prof *v = NULL, *old;
	size_t n = 0, i, j, nold;
	int rc;

	if (tls_up_ex < 0) {
		tls_up_ex = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
		tls_up_ex_asked =
		    SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
		if (tls_up_ex < 0 || tls_up_ex_asked < 0) {
			errbuf_set(err, "tls: out of memory");
			return -ENOMEM;
		}
	}
	rc = tls_up_add(&v, &n, &none, "(none)", err);
	for (i = 0; rc == 0 && src && i < src->n_projects; i++) {
		const struct route_src_project *p = &src->projects[i];

		for (j = 0; rc == 0 && j < p->n_envs; j++) {
			const struct route_src_deployment *d =
			    &p->envs[j].deployment;

			rc = tls_up_add(&v, &n, &d->tls, d->id ? d->id : "-",
					err);
			if (rc == 0 && d->tls.no_verify)
				log_note("deployment %s: the certificates of "
					 "its https:// endpoints are not "
					 "verified (tls.verify = false)",
					 d->id ? d->id : "-");
		}
	}
	if (rc) {
		tls_up_free_v(v, n);
		return rc;
	}
	pthread_mutex_lock(&tls_up_lock);
	old = tls_up_prev;
	nold = tls_up_nprev;
	tls_up_prev = tls_up_v;
	tls_up_nprev = tls_up_n;
	tls_up_v = v;
	tls_up_n = n;
	pthread_mutex_unlock(&tls_up_lock);
	/* an SSL made from an old context holds its own reference */
	tls_up_free_v(old, nold);
	/* the database's files are read again at a reload too */
	tls_up_db_reread();
	return 0;
}

/* The profile of key: the file's, the file's before, the database's
 * (NULL: none). Under tls_up_lock. */
static const struct tls_up_prof *tls_up_find(const char *key)
{
	size_t i;

	for (i = 0; i < tls_up_n; i++)
		if (strcmp(tls_up_v[i].key, key) == 0)
			return &tls_up_v[i];
	for (i = 0; i < tls_up_nprev; i++)
		if (strcmp(tls_up_prev[i].key, key) == 0)
			return &tls_up_prev[i];
	for (i = 0; i < tls_up_ndb; i++)
		if (strcmp(tls_up_db[i].p.key, key) == 0)
			return &tls_up_db[i].p;
	return NULL;
}

/* Whether t is the default group (always loaded: tls_up_load's). */
static bool tls_up_is_none(const struct config_up_tls *t)
{
	return !t->no_verify && !t->ca[0] && !t->cert[0] && !t->key[0];
}

/* The database's entry of key, or NULL. Under tls_up_lock. */
static struct tls_up_held *tls_up_db_find(const char *key)
{
	size_t i;

	for (i = 0; i < tls_up_ndb; i++)
		if (strcmp(tls_up_db[i].p.key, key) == 0)
			return &tls_up_db[i];
	return NULL;
}

/* The database's entries held by none for longer than the grace freed.
 * Under tls_up_lock. */
static void tls_up_db_sweep(uint64_t now)
{
	size_t i = 0;

	while (i < tls_up_ndb) {
		struct tls_up_held *h = &tls_up_db[i];

		/* another thread's clock may be a little behind */
		if (h->refs || now < h->unheld_ns ||
		    now - h->unheld_ns < TLS_UP_GRACE_NS) {
			i++;
			continue;
		}
		SSL_CTX_free(h->p.ctx);
		tls_up_db[i] = tls_up_db[--tls_up_ndb];
	}
}

int tls_up_hold(const struct config_up_tls *t, struct errbuf *err)
{
	struct tls_up_held *h, *v;
	char key[sizeof(h->p.key)];
	SSL_CTX *ctx;
	int rc;

	if (t->refused || tls_up_is_none(t))
		return 0;
	tls_up_key(t, key, sizeof(key));
	pthread_mutex_lock(&tls_up_lock);
	tls_up_db_sweep(clk_fresh_ns());
	h = tls_up_db_find(key);
	if (h)
		h->refs++;
	pthread_mutex_unlock(&tls_up_lock);
	if (h)
		return 0;
	/* the files read outside the lock: workers go on finding theirs */
	rc = tls_up_build(t, &ctx, err);
	if (rc)
		return rc;
	pthread_mutex_lock(&tls_up_lock);
	h = tls_up_db_find(key);
	if (h) { /* held meanwhile by another thread */
		h->refs++;
		pthread_mutex_unlock(&tls_up_lock);
		SSL_CTX_free(ctx);
		return 0;
	}
	v = realloc(tls_up_db, (tls_up_ndb + 1) * sizeof(*v));
	if (!v) {
		pthread_mutex_unlock(&tls_up_lock);
		SSL_CTX_free(ctx);
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	tls_up_db = v;
	h = &v[tls_up_ndb++];
	memset(h, 0, sizeof(*h));
	memcpy(h->p.key, key, sizeof(key));
	h->t = *t;
	h->t.server_name[0] = '\0';
	h->p.ctx = ctx;
	h->p.id = atomic_fetch_add(&tls_up_ids, 1) + 1;
	h->p.verify = !t->no_verify;
	h->refs = 1;
	pthread_mutex_unlock(&tls_up_lock);
	return 0;
}

void tls_up_release(const struct config_up_tls *t)
{
	char key[sizeof(((struct tls_up_prof *)0)->key)];
	struct tls_up_held *h;
	uint64_t now = clk_fresh_ns();

	if (t->refused || tls_up_is_none(t))
		return;
	tls_up_key(t, key, sizeof(key));
	pthread_mutex_lock(&tls_up_lock);
	h = tls_up_db_find(key);
	if (h && h->refs && --h->refs == 0)
		h->unheld_ns = now;
	tls_up_db_sweep(now);
	pthread_mutex_unlock(&tls_up_lock);
}

/* The database's profiles built again from their files (a reload): one
 * that fails keeps its context, logged. Control thread. */
static void tls_up_db_reread(void)
{
	struct config_up_tls *v;
	size_t i, n;

	/* the groups copied first: another thread's release may remove
	 * entries while the files are read */
	pthread_mutex_lock(&tls_up_lock);
	n = tls_up_ndb;
	v = n ? calloc(n, sizeof(*v)) : NULL;
	for (i = 0; v && i < n; i++)
		v[i] = tls_up_db[i].t;
	pthread_mutex_unlock(&tls_up_lock);
	if (!v)
		return;
	for (i = 0; i < n; i++) {
		char key[sizeof(((struct tls_up_prof *)0)->key)];
		struct tls_up_held *h;
		struct errbuf e;
		SSL_CTX *ctx, *old = NULL;

		if (!v[i].ca[0] && !v[i].cert[0])
			continue; /* no file: verify = false alone */
		tls_up_key(&v[i], key, sizeof(key));
		errbuf_clear(&e);
		if (tls_up_build(&v[i], &ctx, &e)) {
			log_warnx("database: deployments.tls: %s; the files "
				  "read before serve on",
				  e.msg);
			continue;
		}
		pthread_mutex_lock(&tls_up_lock);
		h = tls_up_db_find(key);
		if (h) {
			old = h->p.ctx;
			h->p.ctx = ctx;
		} else {
			old = ctx;
		}
		pthread_mutex_unlock(&tls_up_lock);
		SSL_CTX_free(old);
	}
	free(v);
}

/* host's name part (no port, no brackets) into buf. */
static void tls_up_host(const char *host, size_t len, char *buf, size_t cap)
{
	const char *end;
	size_t n;

	if (!host || !len) {
		buf[0] = '\0';
		return;
	}
	if (host[0] == '[') {
		end = memchr(host, ']', len);
		n = end ? (size_t)(end - host - 1) : 0;
		host++;
	} else {
		end = memchr(host, ':', len);
		n = end ? (size_t)(end - host) : len;
	}
	if (n && host[n - 1] == '.')
		n--; /* "up.test." is up.test */
	if (n >= cap)
		n = 0; /* longer than a name: none (refused below) */
	for (size_t i = 0; i < n; i++)
		buf[i] = (char)tolower((unsigned char)host[i]);
	buf[n] = '\0';
}

int tls_up_ssl(const struct config_up_tls *t, const char *host, size_t host_len,
	       const char *ep, SSL **out, uint64_t *tag, struct errbuf *err)
{
	static const struct config_up_tls none;
	char key[sizeof(((struct tls_up_prof *)0)->key)];
	char name[CONFIG_HOST_MAX + 1];
	char k[CONFIG_HOST_MAX + CONFIG_ADDR_STR_MAX + 32];
	unsigned char ip[16];
	int kn;
	const struct tls_up_prof *pr;
	struct tls_up_sess *e;
	SSL_CTX *ctx = NULL;
	uint64_t id = 0, h;
	bool verify = true;
	SSL *ssl;

	if (!t)
		t = &none;
	tls_up_key(t, key, sizeof(key));
	if (t->refused) {
		errbuf_set(err, "the deployment's tls was refused (see the "
				"log): its https:// endpoints are not tried");
		return -EINVAL;
	}
	pthread_mutex_lock(&tls_up_lock);
	pr = tls_up_find(key);
	if (pr) {
		ctx = pr->ctx;
		id = pr->id;
		verify = pr->verify;
	}
	ssl = ctx && out ? SSL_new(ctx) : NULL;
	pthread_mutex_unlock(&tls_up_lock);
	if (!ctx) {
		errbuf_set(err, "no TLS profile loaded for this deployment");
		return -ENOENT;
	}
	if (t->server_name[0])
		snprintf(name, sizeof(name), "%s", t->server_name);
	else
		tls_up_host(host, host_len, name, sizeof(name));
	if (!name[0] && host && verify) {
		SSL_free(ssl);
		errbuf_set(err, "no server name to verify (the request's host "
				"is not a name; set tls.server_name)");
		return -EINVAL;
	}
	/* a pooled connection serves the same profile and name */
	kn = snprintf(k, sizeof(k), "%llu|%s", (unsigned long long)id, name);
	*tag = siphash_key(k, kn > 0 ? (size_t)kn : 0) | 1;
	if (!out)
		return 0;
	if (!ssl)
		goto nomem;
	if (name[0]) {
		bool is_ip = inet_pton(AF_INET, name, ip) == 1 ||
			     inet_pton(AF_INET6, name, ip) == 1;

		/* SNI carries a name, never an address (RFC 6066) */
		if (!is_ip && SSL_set_tlsext_host_name(ssl, name) != 1)
			goto nomem;
		if (verify && (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(
					   SSL_get0_param(ssl), name) != 1
				     : SSL_set1_host(ssl, name) != 1))
			goto nomem;
	}
	/* a session resumes with the same endpoint too */
	kn = snprintf(k, sizeof(k), "%llu|%s|%s", (unsigned long long)id, name,
		      ep);
	h = siphash_key(k, kn > 0 ? (size_t)kn : 0) | 1;
	e = &tls_up_sessions[h % TLS_UP_SESSIONS];
	if (e->s && e->h == h && SSL_set_session(ssl, e->s) != 1)
		ERR_clear_error();
	SSL_set_ex_data(ssl, tls_up_ex, (void *)(uintptr_t)h);
	*out = ssl;
	return 0;
nomem:
	SSL_free(ssl);
	ERR_clear_error();
	errbuf_set(err, "out of memory");
	return -ENOMEM;
}

void tls_up_thread_end(void)
{
	size_t i;

	for (i = 0; i < TLS_UP_SESSIONS; i++) {
		if (tls_up_sessions[i].s)
			SSL_SESSION_free(tls_up_sessions[i].s);
		tls_up_sessions[i].s = NULL;
		tls_up_sessions[i].h = 0;
	}
}

void tls_up_free_all(void)
{
	pthread_mutex_lock(&tls_up_lock);
	tls_up_free_v(tls_up_v, tls_up_n);
	tls_up_free_v(tls_up_prev, tls_up_nprev);
	tls_up_v = tls_up_prev = NULL;
	tls_up_n = tls_up_nprev = 0;
	for (size_t i = 0; i < tls_up_ndb; i++)
		SSL_CTX_free(tls_up_db[i].p.ctx);
	free(tls_up_db);
	tls_up_db = NULL;
	tls_up_ndb = 0;
	pthread_mutex_unlock(&tls_up_lock);
	tls_up_thread_end();
}
