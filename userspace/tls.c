// SPDX-License-Identifier: BSD-2-Clause
/*
 * tls.c - the certificate store (tls.h): files read and checked, one
 * SSL_CTX per set of certificates serving a name, the server name's
 * context chosen in the servername callback; the session ticket keys the
 * whole process shares; ALPN and OCSP stapling; the edge_tls_* counters.
 * The transport and the handshake are tls_io.c's.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/ocsp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "acme_chal.h"
#include "metrics.h"
#include "tls.h"
#include "tls_int.h"
#include "tls_gnutls.h"

/* Mozilla's "intermediate" configuration (version 5.7): TLS 1.2 suites
 * with forward secrecy and AEAD only (no DHE: it needs parameters and
 * no current client lacks ECDHE); TLS 1.3's are OpenSSL's defaults. */
#define TLS_CIPHERS_12                                                         \
	"ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"           \
	"ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"           \
	"ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
#define TLS_CIPHERS_13                                                         \
	"TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"                       \
	"TLS_CHACHA20_POLY1305_SHA256"
#define TLS_GROUPS "X25519:prime256v1:secp384r1"
/* The protocols ALPN may select, in the server's order of preference
 * (wire format): h2 first while HTTP/2 is on (tls_set_h2), else
 * http/1.1 alone. */
static const unsigned char tls_alpn_protos_h2[] = "\x02h2\x08http/1.1";
static const unsigned char tls_alpn_protos[] = "\x08http/1.1";
/* http2.enabled, for handshakes that start after it is set */
static atomic_bool tls_h2;
/* Sessions resumed by ticket stay valid this many rotations. */
#define TLS_TICKET_LIFETIME_ROTATIONS 2
#define TLS_SID_CTX "edge"
#define TLS_KIND_RSA 0
#define TLS_KIND_EC 1
#define TLS_KINDS 2

/* ---- names ----------------------------------------------------------------
 */

bool tls_name_ok(char *s)
{
	size_t n = strlen(s), label = 0, i = 0;

	if (n == 0 || n > CONFIG_HOST_MAX)
		return false;
	if (n > 2 && s[0] == '*' && s[1] == '.')
		i = 2;
	for (; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '.') {
			if (label == 0)
				return false;
			label = 0;
			continue;
		}
		if (!isalnum(ch) && ch != '-' && ch != '_')
			return false;
		if (++label > 63)
			return false;
	}
	if (label == 0)
		return false;
	for (i = 0; i < n; i++)
		s[i] = (char)tolower((unsigned char)s[i]);
	return true;
}

bool tls_name_wildcard(const char *name, char *buf, size_t len)
{
	const char *dot = strchr(name, '.');

	if (!dot || !dot[1] || strlen(dot) + 2 > len)
		return false;
	snprintf(buf, len, "*%s", dot);
	return true;
}

/* ---- counters -------------------------------------------------------------
 */

static struct metrics_counter *tls_m_handshakes, *tls_m_resumed;
static struct metrics_counter *tls_m_fail[TLS_FAIL_MAX];
static struct metrics_counter *tls_m_reload[2];
static struct metrics_gauge *tls_m_db[2]; /* served, refused */
static struct metrics_counter *tls_m_db_refusals;

static const char *const tls_fail_labels[TLS_FAIL_MAX] = {
#define TLS_FAILURE_LABEL(id, label) [TLS_FAIL_##id] = label,
    TLS_FAILURES(TLS_FAILURE_LABEL)
#undef TLS_FAILURE_LABEL
};

int tls_metrics(struct metrics *m)
{
	static const char fail[] = "edge_tls_handshake_failures_total";
	static const char reload[] = "edge_tls_reloads_total";
	unsigned i;

	tls_m_handshakes = metrics_counter_new(
	    m, "edge_tls_handshakes_total",
	    "TLS handshakes completed on the HTTPS listeners", NULL);
	tls_m_resumed = metrics_counter_new(
	    m, "edge_tls_resumptions_total",
	    "of the handshakes completed, those that resumed a session "
	    "(a ticket)",
	    NULL);
	if (!tls_m_handshakes || !tls_m_resumed)
		return -ENOMEM;
	for (i = 0; i < TLS_FAIL_MAX; i++) {
		const char *lab[] = {"reason", tls_fail_labels[i], NULL};

		tls_m_fail[i] = metrics_counter_new(
		    m, fail,
		    "TLS handshakes that failed, by reason: timeout (none "
		    "completed in timeouts.tls_handshake), not_tls (no "
		    "ClientHello: garbage), protocol (no shared version, "
		    "cipher or signature algorithm), closed (the client went "
		    "away), other",
		    lab);
		if (!tls_m_fail[i])
			return -ENOMEM;
	}
	for (i = 0; i < 2; i++) {
		const char *lab[] = {"result", i ? "applied" : "refused", NULL};

		tls_m_reload[i] = metrics_counter_new(
		    m, reload,
		    "certificate store rebuilds (SIGHUP, edgectl reload, a "
		    "certificate file changed): applied, or refused (the "
		    "previous store kept serving)",
		    lab);
		if (!tls_m_reload[i])
			return -ENOMEM;
	}
	for (i = 0; i < 2; i++) {
		const char *lab[] = {"state", i ? "refused" : "served", NULL};

		tls_m_db[i] = metrics_gauge_new(
		    m, "edge_tls_db_certificates",
		    "rows of the database's certificates table: served (an "
		    "earlier version of a row refused now included), or "
		    "refused now (edgectl status names them)",
		    lab);
		if (!tls_m_db[i])
			return -ENOMEM;
	}
	tls_m_db_refusals = metrics_counter_new(
	    m, "edge_tls_db_refusals_total",
	    "versions of rows of the certificates table refused (a key that "
	    "does not match, expired, not PEM, ...)",
	    NULL);
	return tls_m_db_refusals ? 0 : -ENOMEM;
}

json_t *tls_counts_json(void)
{
	json_t *f = json_object();
	unsigned i;

	for (i = 0; f && i < TLS_FAIL_MAX; i++)
		json_object_set_new(
		    f, tls_fail_labels[i],
		    json_integer(
			(json_int_t)metrics_counter_get(tls_m_fail[i])));
	return json_pack(
	    "{s:I, s:I, s:o*, s:I, s:I}", "handshakes",
	    (json_int_t)metrics_counter_get(tls_m_handshakes), "resumptions",
	    (json_int_t)metrics_counter_get(tls_m_resumed), "failures", f,
	    "reloads_applied", (json_int_t)metrics_counter_get(tls_m_reload[1]),
	    "reloads_refused",
	    (json_int_t)metrics_counter_get(tls_m_reload[0]));
}

void tls_count_reload(bool ok)
{
	metrics_counter_add(tls_m_reload[ok ? 1 : 0], 1);
}

void tls_count_handshake(bool resumed)
{
	metrics_counter_add(tls_m_handshakes, 1);
	if (resumed)
		metrics_counter_add(tls_m_resumed, 1);
}

void tls_count_db(size_t served, size_t refused)
{
	metrics_gauge_set(tls_m_db[0], (int64_t)served);
	metrics_gauge_set(tls_m_db[1], (int64_t)refused);
}

void tls_count_db_refusal(void)
{
	metrics_counter_add(tls_m_db_refusals, 1);
}

void tls_count_failure(enum tls_failure f)
{
	if ((unsigned)f < TLS_FAIL_MAX)
		metrics_counter_add(tls_m_fail[f], 1);
}

/* ---- ticket keys ----------------------------------------------------------
 */

struct tls_tkey {
	unsigned char name[16];
	unsigned char aes[32];
	unsigned char hmac[32];
};

static struct {
	pthread_rwlock_t lock;
	struct tls_tkey k[TLS_TICKET_KEYS]; /* k[0] the current one */
	unsigned n;
} tls_tk = {.lock = PTHREAD_RWLOCK_INITIALIZER};

int tls_tickets_rotate(void)
{
	struct tls_tkey k;

	if (RAND_bytes((unsigned char *)&k, sizeof(k)) != 1)
		return -EIO;
	pthread_rwlock_wrlock(&tls_tk.lock);
	memmove(&tls_tk.k[1], &tls_tk.k[0],
		sizeof(tls_tk.k[0]) * (TLS_TICKET_KEYS - 1));
	tls_tk.k[0] = k;
	if (tls_tk.n < TLS_TICKET_KEYS)
		tls_tk.n++;
	pthread_rwlock_unlock(&tls_tk.lock);
	OPENSSL_cleanse(&k, sizeof(k));
	return 0;
}

/* The ticket key named name (enc: the current one): its index (0 is the
 * current one) and a copy in *out, or -1. */
static int tls_tickets_find(const unsigned char *name, bool enc,
			    struct tls_tkey *out)
{
	unsigned i;
	int idx = -1;

	pthread_rwlock_rdlock(&tls_tk.lock);
	for (i = 0; i < tls_tk.n; i++)
		if (enc || memcmp(tls_tk.k[i].name, name, 16) == 0) {
			*out = tls_tk.k[i];
			idx = (int)i;
			break;
		}
	pthread_rwlock_unlock(&tls_tk.lock);
	return idx;
}

/* OpenSSL's ticket key callback: encrypt under the current key; decrypt
 * under the key the ticket names; an unknown key means a full handshake.
 * The ticket is renewed (2: a new ticket is sent) when its key is not the
 * current one, and always in TLS 1.3: TLS 1.3 clients use a ticket once
 * (RFC 8446, C.4; OpenSSL, BoringSSL and browsers do), and with a callback
 * OpenSSL sends a new ticket on a resumed TLS 1.3 handshake only when told
 * to, so returning 1 there would make every other connection of a client
 * a full handshake. (The version is chosen before the ClientHello's
 * pre_shared_key is parsed.) */
static int tls_ticket_cb(SSL *s, unsigned char name[16], unsigned char *iv,
			 EVP_CIPHER_CTX *ectx, EVP_MAC_CTX *hctx, int enc)
{
	OSSL_PARAM params[2];
	struct tls_tkey k;
	int idx, ok;

	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
						     (char *)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	idx = tls_tickets_find(name, enc, &k);
	if (idx < 0)
		return enc ? -1 : 0;
	if (enc) {
		memcpy(name, k.name, 16);
		ok = RAND_bytes(iv, EVP_CIPHER_get_iv_length(
					EVP_aes_256_cbc())) == 1 &&
		     EVP_EncryptInit_ex(ectx, EVP_aes_256_cbc(), NULL, k.aes,
					iv) == 1;
	} else {
		ok = EVP_DecryptInit_ex(ectx, EVP_aes_256_cbc(), NULL, k.aes,
					iv) == 1;
	}
	ok = ok && EVP_MAC_init(hctx, k.hmac, sizeof(k.hmac), params) == 1;
	OPENSSL_cleanse(&k, sizeof(k));
	if (!ok)
		return -1;
	if (enc || (idx == 0 && SSL_version(s) < TLS1_3_VERSION))
		return 1;
	return 2;
}

/* ---- the store ------------------------------------------------------------
 */

/* A file the store was built from, as it was then. */
struct tls_file {
	char *path;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
};

/* A certificate entry, checked. */
struct tls_cert {
	X509 *leaf;
	STACK_OF(X509) * chain; /* the certificates after the leaf */
	EVP_PKEY *key;
	int kind; /* TLS_KIND_* */
	unsigned char *ocsp;
	size_t ocsp_len;
	char **names;
	size_t n_names;
	const char *label; /* its file, or "certificates row ID" */
	bool from_db;
	/* conf.gnutls: GnuTLS credentials of this certificate alone */
	gnutls_certificate_credentials_t gt;
};

/* A set of certificates serving a name (at most one per kind), and its
 * context. */
struct tls_set {
	int cert[TLS_KINDS]; /* index in certs, or -1 */
	SSL_CTX *ctx;
	/* conf.gnutls: the credentials of the set's certificates (its one
	 * certificate's own, or gt_own with both) */
	gnutls_certificate_credentials_t gt, gt_own;
	struct tls_store *st;
};

struct tls_name {
	const char *name; /* a tls_cert's */
	struct tls_set *set;
};

struct tls_store {
	atomic_uint refs;
	struct config_tls conf; /* a copy: the paths, to rebuild from */
	struct tls_cert *certs;
	size_t n_certs;
	struct tls_set *sets;
	size_t n_sets;
	struct tls_name *names; /* sorted by name */
	size_t n_names;
	struct tls_set *def; /* the first certificate's */
	struct tls_file *files;
	size_t n_files;
	struct tls_dbrow *db; /* the database's rows (copies), to rebuild */
	size_t n_db;
};

/* Which tls.certificates index stands for a database row in errors. */
#define TLS_DB_ENTRY ((size_t)-1)

static int tls_errf(struct errbuf *err, const char *file, size_t i,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* err = "FILE: tls.certificates[I]: message" (OpenSSL's error queue
 * cleared); returns -EINVAL. */
static int tls_errf(struct errbuf *err, const char *file, size_t i,
		    const char *fmt, ...)
{
	char msg[ERRBUF_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ERR_clear_error();
	if (i == TLS_DB_ENTRY)
		errbuf_set(err, "%s: %s", file, msg);
	else
		errbuf_set(err, "%s: tls.certificates[%zu]: %s", file, i, msg);
	return -EINVAL;
}

/* Read path whole (a regular file, at most TLS_FILE_MAX bytes) into a
 * new *buf, its identity into *f. 0 or -errno with err set. */
static int tls_read_file(const char *path, size_t i, unsigned char **buf,
			 size_t *len, struct tls_file *f, struct errbuf *err)
{
	struct stat sb;
	ssize_t n;
	size_t got = 0;
	int fd, rc;

	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		rc = -errno;
		tls_errf(err, path, i, "cannot read: %s%s", strerror(errno),
			 errno == EACCES ? " (key and certificate files must "
					   "be readable by edged's user)"
					 : "");
		return rc;
	}
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
		close(fd);
		return tls_errf(err, path, i, "not a regular file");
	}
	if (sb.st_size > TLS_FILE_MAX) {
		close(fd);
		return tls_errf(err, path, i, "larger than %d bytes",
				TLS_FILE_MAX);
	}
	*buf = malloc((size_t)sb.st_size + 1);
	if (!*buf) {
		close(fd);
		errbuf_set(err, "%s: out of memory", path);
		return -ENOMEM;
	}
	while (got < (size_t)sb.st_size) {
		n = read(fd, *buf + got, (size_t)sb.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	(*buf)[got] = '\0';
	*len = got;
	if (f) {
		f->dev = sb.st_dev;
		f->ino = sb.st_ino;
		f->size = sb.st_size;
		f->mtime = sb.st_mtim;
	}
	return 0;
}

/* Never ask for a passphrase (a terminal prompt would hang edged). */
static int tls_no_pass(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

static void tls_subject(X509 *x, char *buf, size_t len)
{
	X509_NAME_oneline(X509_get_subject_name(x), buf, (int)len);
}

static void tls_time(const ASN1_TIME *t, char *buf, size_t len)
{
	struct tm tm;

	if (ASN1_TIME_to_tm(t, &tm) != 1 ||
	    !strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, len, "?");
}

/* Whether certificate x (the j-th of the file) is valid now. */
static int tls_check_time(X509 *x, const char *file, size_t i, size_t j,
			  struct errbuf *err)
{
	char when[64], who[256];

	tls_subject(x, who, sizeof(who));
	if (X509_cmp_current_time(X509_get0_notAfter(x)) < 0) {
		tls_time(X509_get0_notAfter(x), when, sizeof(when));
		return tls_errf(err, file, i,
				"certificate %zu (%s) expired at %s", j, who,
				when);
	}
	if (X509_cmp_current_time(X509_get0_notBefore(x)) > 0) {
		tls_time(X509_get0_notBefore(x), when, sizeof(when));
		return tls_errf(err, file, i,
				"certificate %zu (%s) is not valid before %s",
				j, who, when);
	}
	return 0;
}

/* How many PEM certificates buf[0..len) holds: its "-----BEGIN
 * CERTIFICATE-----" lines (and the X509 and TRUSTED ones OpenSSL reads as
 * certificates too), counted without parsing one. */
static size_t tls_pem_certs(const unsigned char *buf, size_t len)
{
	static const char *const labels[] = {"CERTIFICATE-----",
					     "X509 CERTIFICATE-----",
					     "TRUSTED CERTIFICATE-----"};
	static const char begin[] = "-----BEGIN ";
	const unsigned char *p = buf, *end = buf + len, *q;
	size_t n = 0, k, rest;

	while ((q = memmem(p, (size_t)(end - p), begin, sizeof(begin) - 1))) {
		q += sizeof(begin) - 1;
		rest = (size_t)(end - q);
		for (k = 0; k < sizeof(labels) / sizeof(labels[0]); k++)
			if (rest >= strlen(labels[k]) &&
			    memcmp(q, labels[k], strlen(labels[k])) == 0) {
				n++;
				break;
			}
		p = q;
	}
	return n;
}

/* The PEM certificates of file: the leaf, then its chain (at most
 * TLS_CHAIN_MAX), each signed by the next, all valid now. */
static int tls_load_certs(struct tls_cert *c, const char *file, size_t i,
			  const unsigned char *buf, size_t len,
			  struct errbuf *err)
{
	size_t certs = tls_pem_certs(buf, len);
	BIO *b;
	X509 *x, *prev;
	size_t j, n;
	int rc;

	/* before any is parsed: a row of 3,000 copies took seconds */
	if (certs > 1 + TLS_CHAIN_MAX)
		return tls_errf(err, file, i,
				"%zu certificates in it: a certificate and at "
				"most %d of its chain are served",
				certs, TLS_CHAIN_MAX);
	b = BIO_new_mem_buf(buf, (int)len);
	if (!b)
		return -ENOMEM;
	c->chain = sk_X509_new_null();
	if (!c->chain) {
		BIO_free(b);
		return -ENOMEM;
	}
	ERR_clear_error();
	while ((x = PEM_read_bio_X509(b, NULL, tls_no_pass, NULL))) {
		if (!c->leaf)
			c->leaf = x;
		else if (!sk_X509_push(c->chain, x)) {
			X509_free(x);
			BIO_free(b);
			return -ENOMEM;
		}
	}
	BIO_free(b);
	if (!c->leaf)
		return tls_errf(err, file, i, "no PEM certificate in it");
	if (ERR_GET_REASON(ERR_peek_last_error()) != PEM_R_NO_START_LINE)
		return tls_errf(err, file, i,
				"what follows certificate %d is not a valid "
				"PEM certificate",
				sk_X509_num(c->chain));
	ERR_clear_error();
	n = (size_t)sk_X509_num(c->chain) + 1;
	prev = c->leaf;
	for (j = 0; j < n; j++) {
		x = j ? sk_X509_value(c->chain, (int)j - 1) : c->leaf;
		rc = tls_check_time(x, file, i, j, err);
		if (rc)
			return rc;
		if (j > 0) {
			char a[256], s[256];
			EVP_PKEY *pk = X509_get0_pubkey(x);

			if (X509_check_issued(x, prev) != X509_V_OK || !pk ||
			    X509_verify(prev, pk) != 1) {
				tls_subject(prev, a, sizeof(a));
				tls_subject(x, s, sizeof(s));
				return tls_errf(
				    err, file, i,
				    "the chain does not lead to its issuer: "
				    "certificate %zu (%s) is not signed by "
				    "certificate %zu (%s) after it",
				    j - 1, a, j, s);
			}
		}
		prev = x;
	}
	return 0;
}

/* The DNS names of c's subjectAltName, lowercased. */
static int tls_load_names(struct tls_cert *c, const char *file, size_t i,
			  struct errbuf *err)
{
	GENERAL_NAMES *gens =
	    X509_get_ext_d2i(c->leaf, NID_subject_alt_name, NULL, NULL);
	int k, n = gens ? sk_GENERAL_NAME_num(gens) : 0;

	c->names = calloc(n > 0 ? (size_t)n : 1, sizeof(*c->names));
	if (!c->names) {
		GENERAL_NAMES_free(gens);
		return -ENOMEM;
	}
	for (k = 0; k < n; k++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, k);
		const unsigned char *d;
		char *s;
		int len;

		if (g->type != GEN_DNS)
			continue;
		d = ASN1_STRING_get0_data(g->d.dNSName);
		len = ASN1_STRING_length(g->d.dNSName);
		if (len <= 0 || len > CONFIG_HOST_MAX ||
		    memchr(d, '\0', (size_t)len))
			continue;
		s = strndup((const char *)d, (size_t)len);
		if (!s) {
			GENERAL_NAMES_free(gens);
			return -ENOMEM;
		}
		if (!tls_name_ok(s)) {
			free(s);
			continue;
		}
		c->names[c->n_names++] = s;
	}
	GENERAL_NAMES_free(gens);
	if (c->n_names == 0)
		return tls_errf(err, file, i,
				"no DNS name in the certificate's "
				"subjectAltName (a certificate serves the "
				"names there)");
	return 0;
}

/* Remember file f (path) among the store's. */
static int tls_file_add(struct tls_store *st, const char *path,
			const struct tls_file *f)
{
	struct tls_file *v = &st->files[st->n_files];

	*v = *f;
	v->path = strdup(path);
	if (!v->path)
		return -ENOMEM;
	st->n_files++;
	return 0;
}

/* The PEM private key in buf for c (keyname and certname for errors):
 * unencrypted, RSA or EC, the leaf's. */
static int tls_load_key(struct tls_cert *c, const char *keyname,
			const char *certname, size_t i,
			const unsigned char *buf, size_t len,
			struct errbuf *err)
{
	BIO *b = BIO_new_mem_buf(buf, (int)len);
	int id;

	ERR_clear_error();
	c->key = b ? PEM_read_bio_PrivateKey(b, NULL, tls_no_pass, NULL) : NULL;
	BIO_free(b);
	if (!c->key)
		return tls_errf(err, keyname, i,
				"not a PEM private key (or an encrypted one: "
				"edged cannot ask for a passphrase)");
	id = EVP_PKEY_get_base_id(c->key);
	if (id == EVP_PKEY_RSA)
		c->kind = TLS_KIND_RSA;
	else if (id == EVP_PKEY_EC)
		c->kind = TLS_KIND_EC;
	else
		return tls_errf(
		    err, keyname, i,
		    "a key of type %s: only RSA and EC (ECDSA) keys are "
		    "served",
		    OBJ_nid2sn(id));
	if (X509_check_private_key(c->leaf, c->key) != 1)
		return tls_errf(err, keyname, i,
				"the key does not match the certificate %s",
				certname);
	return 0;
}

/* c->ocsp (name for errors) checked: a DER OCSP response whose status is
 * successful, with a single response for c's leaf as issued by the
 * chain's next certificate, saying good. A response past its
 * nextUpdate is not stapled (warned, the certificate served): a stale
 * response must not stop a renewed certificate from loading. */
static int tls_check_ocsp(struct tls_cert *c, const char *name, size_t i,
			  struct errbuf *err)
{
	const unsigned char *p = c->ocsp;
	OCSP_RESPONSE *r = d2i_OCSP_RESPONSE(NULL, &p, (long)c->ocsp_len);
	OCSP_BASICRESP *br = NULL;
	OCSP_CERTID *cid = NULL;
	ASN1_GENERALIZEDTIME *thisupd = NULL, *nextupd = NULL, *rev = NULL;
	int status, cs = -1, reason = 0, rc = 0;
	X509 *issuer;

	if (!r)
		return tls_errf(err, name, i, "not a DER OCSP response");
	status = OCSP_response_status(r);
	if (status != OCSP_RESPONSE_STATUS_SUCCESSFUL) {
		OCSP_RESPONSE_free(r);
		return tls_errf(err, name, i,
				"the OCSP response's status is %s, "
				"not successful",
				OCSP_response_status_str(status));
	}
	issuer = sk_X509_num(c->chain) > 0 ? sk_X509_value(c->chain, 0) : NULL;
	if (!issuer) {
		rc = tls_errf(err, name, i,
			      "an OCSP response cannot be checked without "
			      "the issuer's certificate after the leaf");
		goto out;
	}
	br = OCSP_response_get1_basic(r);
	cid = OCSP_cert_to_id(NULL, c->leaf, issuer);
	if (!br || !cid) {
		rc = tls_errf(err, name, i, "not a basic OCSP response");
		goto out;
	}
	if (OCSP_resp_find_status(br, cid, &cs, &reason, &rev, &thisupd,
				  &nextupd) != 1) {
		char who[256];

		tls_subject(c->leaf, who, sizeof(who));
		rc = tls_errf(err, name, i,
			      "the OCSP response is not for the certificate "
			      "(%s, as issued by the certificate after it)",
			      who);
		goto out;
	}
	if (cs != V_OCSP_CERTSTATUS_GOOD) {
		rc = tls_errf(err, name, i,
			      "the OCSP response says the certificate is %s",
			      OCSP_cert_status_str(cs));
		goto out;
	}
	if (OCSP_check_validity(thisupd, nextupd, 300, -1) != 1) {
		char when[64] = "?";

		if (nextupd)
			tls_time(nextupd, when, sizeof(when));
		ERR_clear_error();
		log_warnx("%s: the OCSP response is out of date (next update "
			  "%s): the certificate is served without stapling",
			  name, when);
		free(c->ocsp);
		c->ocsp = NULL;
		c->ocsp_len = 0;
	}
out:
	OCSP_CERTID_free(cid);
	OCSP_BASICRESP_free(br);
	OCSP_RESPONSE_free(r);
	return rc;
}

/* Load and check configured certificate i into st->certs[i]. */
static int tls_load_cert(struct tls_store *st, size_t i, struct errbuf *err)
{
	const struct config_tls_cert *cc = &st->conf.certs[i];
	struct tls_cert *c = &st->certs[i];
	unsigned char *buf = NULL;
	struct tls_file f;
	size_t len;
	int rc;

	c->label = cc->cert;
	/* the certificate and its chain */
	rc = tls_read_file(cc->cert, i, &buf, &len, &f, err);
	if (rc)
		return rc;
	rc = tls_file_add(st, cc->cert, &f);
	if (rc == 0)
		rc = tls_load_certs(c, cc->cert, i, buf, len, err);
	free(buf);
	buf = NULL;
	if (rc == 0)
		rc = tls_load_names(c, cc->cert, i, err);
	if (rc)
		return rc;
	/* the key */
	rc = tls_read_file(cc->key, i, &buf, &len, &f, err);
	if (rc)
		return rc;
	rc = tls_file_add(st, cc->key, &f);
	if (rc == 0)
		rc = tls_load_key(c, cc->key, cc->cert, i, buf, len, err);
	OPENSSL_cleanse(buf, len);
	free(buf);
	if (rc)
		return rc;
	/* the OCSP response to staple */
	if (!cc->ocsp[0])
		return 0;
	rc = tls_read_file(cc->ocsp, i, &c->ocsp, &c->ocsp_len, &f, err);
	if (rc)
		return rc;
	rc = tls_file_add(st, cc->ocsp, &f);
	if (rc)
		return rc;
	return tls_check_ocsp(c, cc->ocsp, i, err);
}

/* Keep of c's names those of the row's list (names, space-separated;
 * "": all of them), each of which must be one of the subjectAltName's. */
static int tls_db_names(struct tls_cert *c, const char *label,
			const char *names, struct errbuf *err)
{
	char **v, *copy, *tok, *save = NULL;
	size_t n = 0, cap = 4, j;
	int rc = 0;

	if (!names[0])
		return 0;
	copy = strdup(names);
	v = calloc(cap, sizeof(*v));
	if (!copy || !v) {
		free(copy);
		free(v);
		return -ENOMEM;
	}
	for (tok = strtok_r(copy, " ", &save); tok;
	     tok = strtok_r(NULL, " ", &save)) {
		bool found = false;

		if (!tls_name_ok(tok)) {
			rc =
			    tls_errf(err, label, TLS_DB_ENTRY,
				     "names: \"%.64s\" is not a DNS name", tok);
			break;
		}
		for (j = 0; j < c->n_names && !found; j++)
			found = strcmp(c->names[j], tok) == 0;
		if (!found) {
			rc = tls_errf(err, label, TLS_DB_ENTRY,
				      "names: %s is not in the certificate's "
				      "subjectAltName",
				      tok);
			break;
		}
		for (j = 0; j < n && strcmp(v[j], tok); j++)
			;
		if (j < n)
			continue;
		if (n == cap) {
			char **nv = realloc(v, cap * 2 * sizeof(*v));

			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
			cap *= 2;
		}
		v[n] = strdup(tok);
		if (!v[n]) {
			rc = -ENOMEM;
			break;
		}
		n++;
	}
	free(copy);
	if (rc || n == 0) {
		for (j = 0; j < n; j++)
			free(v[j]);
		free(v);
		return rc;
	}
	for (j = 0; j < c->n_names; j++)
		free(c->names[j]);
	free(c->names);
	c->names = v;
	c->n_names = n;
	return 0;
}

/* Load and check database row r into c. */
static int tls_load_db(struct tls_cert *c, const struct tls_dbrow *r,
		       struct errbuf *err)
{
	char what[128];
	int rc;

	c->label = r->label;
	c->from_db = true;
	snprintf(what, sizeof(what), "%s chain_pem", r->label);
	rc = tls_load_certs(c, what, TLS_DB_ENTRY,
			    (const unsigned char *)r->chain_pem,
			    strlen(r->chain_pem), err);
	if (rc == 0)
		rc = tls_load_names(c, what, TLS_DB_ENTRY, err);
	if (rc == 0)
		rc = tls_db_names(c, r->label, r->names, err);
	if (rc)
		return rc;
	snprintf(what, sizeof(what), "%s key_pem", r->label);
	rc = tls_load_key(c, what, "of chain_pem", TLS_DB_ENTRY,
			  (const unsigned char *)r->key_pem, strlen(r->key_pem),
			  err);
	if (rc || !r->ocsp_len)
		return rc;
	c->ocsp = malloc(r->ocsp_len);
	if (!c->ocsp)
		return -ENOMEM;
	memcpy(c->ocsp, r->ocsp, r->ocsp_len);
	c->ocsp_len = r->ocsp_len;
	snprintf(what, sizeof(what), "%s ocsp", r->label);
	return tls_check_ocsp(c, what, TLS_DB_ENTRY, err);
}

static int tls_name_cmp(const void *a, const void *b)
{
	const struct tls_name *x = a, *y = b;

	return strcmp(x->name, y->name);
}

/* The set serving name exactly, or NULL. */
static struct tls_set *tls_store_exact(const struct tls_store *st,
				       const char *name)
{
	struct tls_name key = {name, NULL}, *f;

	f = bsearch(&key, st->names, st->n_names, sizeof(*st->names),
		    tls_name_cmp);
	return f ? f->set : NULL;
}

/* The set for a ClientHello's server name (NULL or "": none). */
static struct tls_set *tls_store_find(const struct tls_store *st,
				      const char *sni)
{
	char name[CONFIG_HOST_MAX + 2], wild[CONFIG_HOST_MAX + 3];
	struct tls_set *set;
	size_t n, i;

	if (!sni || !sni[0])
		return st->def;
	n = strlen(sni);
	if (n > CONFIG_HOST_MAX + 1)
		return st->def;
	for (i = 0; i < n; i++)
		name[i] = (char)tolower((unsigned char)sni[i]);
	if (n > 1 && name[n - 1] == '.')
		n--;
	name[n] = '\0';
	set = tls_store_exact(st, name);
	if (!set && tls_name_wildcard(name, wild, sizeof(wild)))
		set = tls_store_exact(st, wild);
	return set ? set : st->def;
}

gnutls_certificate_credentials_t tls_store_gnutls(const struct tls_store *s,
						  const char *sni)
{
	return s->conf.gnutls ? tls_store_find(s, sni)->gt : NULL;
}

/* ---- callbacks ------------------------------------------------------------
 */

static int tls_sni_cb(SSL *ssl, int *al, void *arg)
{
	struct tls_store *st = arg;
	struct tls_set *set;

	(void)al;
	set = tls_store_find(
	    st, SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name));
	if (set->ctx != SSL_get_SSL_CTX(ssl) && !SSL_set_SSL_CTX(ssl, set->ctx))
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	return SSL_TLSEXT_ERR_OK;
}

static int tls_alpn_cb(SSL *ssl, const unsigned char **out,
		       unsigned char *outlen, const unsigned char *in,
		       unsigned int inlen, void *arg)
{
	bool h2 = atomic_load_explicit(&tls_h2, memory_order_relaxed);
	unsigned char *o;

	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto(&o, outlen,
				  h2 ? tls_alpn_protos_h2 : tls_alpn_protos,
				  h2 ? sizeof(tls_alpn_protos_h2) - 1
				     : sizeof(tls_alpn_protos) - 1,
				  in, inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK; /* HTTP/1.1 without ALPN */
	*out = o;
	return SSL_TLSEXT_ERR_OK;
}

void tls_set_h2(bool on)
{
	atomic_store_explicit(&tls_h2, on, memory_order_relaxed);
}

/* The client asked for a stapled OCSP response: the one of the
 * certificate chosen, if it has one. */
static int tls_ocsp_cb(SSL *ssl, void *arg)
{
	struct tls_set *set = arg;
	X509 *x = SSL_get_certificate(ssl);
	unsigned char *copy;
	int k;

	for (k = 0; k < TLS_KINDS; k++) {
		const struct tls_cert *c;

		if (set->cert[k] < 0)
			continue;
		c = &set->st->certs[set->cert[k]];
		if (c->leaf != x || !c->ocsp)
			continue;
		copy = OPENSSL_memdup(c->ocsp, c->ocsp_len);
		if (!copy)
			return SSL_TLSEXT_ERR_NOACK;
		if (SSL_set_tlsext_status_ocsp_resp(ssl, copy,
						    (long)c->ocsp_len) != 1) {
			OPENSSL_free(copy);
			return SSL_TLSEXT_ERR_NOACK;
		}
		return SSL_TLSEXT_ERR_OK;
	}
	return SSL_TLSEXT_ERR_NOACK;
}

/* The server name of the ClientHello (RFC 6066: a 2-byte list length,
 * then entries of a type byte and a 2-byte length; the host_name one)
 * into buf, or false. */
static bool tls_hello_name(SSL *ssl, char *buf, size_t len)
{
	const unsigned char *p;
	size_t n, i, l;

	if (!SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p, &n) ||
	    n < 2 || ((size_t)p[0] << 8 | p[1]) != n - 2)
		return false;
	for (i = 2; i + 3 <= n; i += 3 + l) {
		l = (size_t)p[i + 1] << 8 | p[i + 2];
		if (i + 3 + l > n)
			return false;
		if (p[i] != TLSEXT_NAMETYPE_host_name)
			continue;
		if (l == 0 || l >= len || memchr(p + i + 3, 0, l))
			return false;
		memcpy(buf, p + i + 3, l);
		buf[l] = '\0';
		return true;
	}
	return false;
}

/* A ClientHello offering ALPN "acme-tls/1" (RFC 8737) for a name whose
 * tls-alpn-01 challenge this edged answers now (acme_chal.h): the
 * handshake goes on with the challenge's context (its certificate, its
 * ALPN), whose own servername callback keeps it. Any other: as before. */
static void tls_hello_acme(SSL *ssl)
{
	const unsigned char *p;
	char name[256];
	SSL_CTX *ctx;
	size_t n;

	if (!SSL_client_hello_get0_ext(
		ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &p,
		&n) ||
	    !acme_chal_alpn_offered(p, n) ||
	    !tls_hello_name(ssl, name, sizeof(name)))
		return;
	ctx = acme_chal_alpn_ctx(name, strlen(name));
	if (!ctx)
		return;
	SSL_set_SSL_CTX(ssl, ctx);
	SSL_CTX_free(ctx); /* the SSL holds its own reference */
}

/* A ClientHello arrived (whatever follows): a failure after it is the
 * protocol's, not garbage. */
static int tls_hello_cb(SSL *ssl, int *al, void *arg)
{
	(void)al;
	(void)arg;
	tls_hs_hello_seen(ssl);
	tls_hello_acme(ssl);
	return SSL_CLIENT_HELLO_SUCCESS;
}

/* ---- contexts -------------------------------------------------------------
 */

/* The context of set (its certificates, the common settings). */
/* err = "FILE: tls.certificates[I]: what refused by OpenSSL: why" for
 * certificate i, which OpenSSL would not serve (a key too small or a
 * signature digest too weak for its security level, ...); -EINVAL. */
static int tls_refused(struct errbuf *err, const struct tls_store *st, size_t i,
		       const char *what)
{
	char e[256];

	ERR_error_string_n(ERR_get_error(), e, sizeof(e));
	return tls_errf(err, st->certs[i].label,
			st->certs[i].from_db ? TLS_DB_ENTRY : i,
			"%s refused by OpenSSL (its default security level "
			"wants RSA keys of 2048 bits or more and signatures "
			"stronger than SHA-1): %s",
			what, e);
}

/* set's GnuTLS credentials: its one certificate's, or both of its
 * certificates' in credentials of its own (each was taken alone) */
static int tls_set_gt(struct tls_store *st, struct tls_set *set,
		      struct errbuf *err)
{
	const char *why = "out of memory";

	if (set->cert[0] < 0 || set->cert[1] < 0) {
		set->gt = st->certs[set->cert[set->cert[0] < 0]].gt;
		return 0;
	}
	if (tls_gt_cred(&set->gt_own))
		goto fail;
	/* ECDSA first: GnuTLS serves the first one the client takes */
	for (int k = TLS_KINDS - 1; k >= 0; k--) {
		const struct tls_cert *c = &st->certs[set->cert[k]];

		if (tls_gt_add(set->gt_own, c->leaf, c->chain, c->key, c->ocsp,
			       c->ocsp_len, &why))
			goto fail;
	}
	set->gt = set->gt_own;
	return 0;
fail:
	errbuf_set(err, "tls: GnuTLS (for QUIC): %s", why);
	return -ENOMEM;
}

static int tls_set_ctx(struct tls_store *st, struct tls_set *set,
		       struct errbuf *err)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	long lifetime = (long)(st->conf.ticket_rotation_ms / 1000 *
			       TLS_TICKET_LIFETIME_ROTATIONS);
	int k, j;

	if (!ctx)
		goto fail;
	set->ctx = ctx;
	set->st = st;
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
	    SSL_CTX_set_cipher_list(ctx, TLS_CIPHERS_12) != 1 ||
	    SSL_CTX_set_ciphersuites(ctx, TLS_CIPHERS_13) != 1 ||
	    SSL_CTX_set1_groups_list(ctx, TLS_GROUPS) != 1 ||
	    SSL_CTX_set_session_id_context(ctx,
					   (const unsigned char *)TLS_SID_CTX,
					   sizeof(TLS_SID_CTX) - 1) != 1)
		goto fail;
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
				     SSL_OP_IGNORE_UNEXPECTED_EOF |
				     SSL_OP_NO_COMPRESSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
				  SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
				  SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_read_ahead(ctx, 1);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_num_tickets(ctx, 1);
	SSL_CTX_set_timeout(ctx, lifetime > 0 ? lifetime : 1);
	SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, tls_ticket_cb);
	SSL_CTX_set_alpn_select_cb(ctx, tls_alpn_cb, NULL);
	SSL_CTX_set_tlsext_servername_callback(ctx, tls_sni_cb);
	SSL_CTX_set_tlsext_servername_arg(ctx, st);
	SSL_CTX_set_tlsext_status_cb(ctx, tls_ocsp_cb);
	SSL_CTX_set_tlsext_status_arg(ctx, set);
	SSL_CTX_set_client_hello_cb(ctx, tls_hello_cb, NULL);
	for (k = 0; k < TLS_KINDS; k++) {
		const struct tls_cert *c;

		if (set->cert[k] < 0)
			continue;
		c = &st->certs[set->cert[k]];
		if (SSL_CTX_use_certificate(ctx, c->leaf) != 1 ||
		    SSL_CTX_use_PrivateKey(ctx, c->key) != 1)
			return tls_refused(err, st, (size_t)set->cert[k],
					   "the certificate or its key");
		for (j = 0; j < sk_X509_num(c->chain); j++)
			if (SSL_CTX_add1_chain_cert(
				ctx, sk_X509_value(c->chain, j)) != 1)
				return tls_refused(
				    err, st, (size_t)set->cert[k],
				    "a certificate of its chain");
	}
	return st->conf.gnutls ? tls_set_gt(st, set, err) : 0;
fail : {
	char e[256];

	ERR_error_string_n(ERR_get_error(), e, sizeof(e));
	ERR_clear_error();
	errbuf_set(err, "tls: cannot set up a context: %s", e);
	return -EINVAL;
}
}

/* The pair of certificates serving name: the first of each kind. */
static void tls_pair_of(const struct tls_store *st, const char *name,
			int pair[TLS_KINDS])
{
	size_t i, j;

	pair[0] = pair[1] = -1;
	for (i = 0; i < st->n_certs; i++)
		for (j = 0; j < st->certs[i].n_names; j++)
			if (strcmp(st->certs[i].names[j], name) == 0 &&
			    pair[st->certs[i].kind] < 0)
				pair[st->certs[i].kind] = (int)i;
}

/* Names with two certificates of one kind warned about per store
 * built, one line each (then one line for the rest). */
#define TLS_WARN_MAX 8

static const char *tls_kind_name(int kind)
{
	return kind == TLS_KIND_EC ? "ECDSA" : "RSA";
}

/* Warn when another certificate of the kind of pair's serves name too:
 * the first (a file's before the database's) serves it, the other not
 * for that name. */
static void tls_warn_shadowed(const struct tls_store *st, const char *name,
			      const int pair[TLS_KINDS], size_t *warned)
{
	size_t i, j;

	for (i = 0; i < st->n_certs; i++) {
		const struct tls_cert *c = &st->certs[i];

		if (pair[c->kind] < 0 || (size_t)pair[c->kind] == i)
			continue;
		for (j = 0; j < c->n_names; j++)
			if (strcmp(c->names[j], name) == 0)
				break;
		if (j == c->n_names)
			continue;
		if (++*warned <= TLS_WARN_MAX)
			log_warnx("tls: %s has two %s certificates: %s serves "
				  "it, not %s (the configuration file's come "
				  "first, in their order, then the database's "
				  "by id)",
				  name, tls_kind_name(c->kind),
				  st->certs[pair[c->kind]].label, c->label);
	}
}

/* The name index and one set per distinct pair of certificates. */
static int tls_index(struct tls_store *st, struct errbuf *err)
{
	size_t i, j, k, total = 0, warned = 0;
	int rc;

	for (i = 0; i < st->n_certs; i++)
		total += st->certs[i].n_names;
	st->names = calloc(total, sizeof(*st->names));
	st->sets = calloc(total, sizeof(*st->sets));
	if (!st->names || !st->sets)
		return -ENOMEM;
	for (i = 0; i < st->n_certs; i++)
		for (j = 0; j < st->certs[i].n_names; j++)
			st->names[st->n_names++].name = st->certs[i].names[j];
	qsort(st->names, st->n_names, sizeof(*st->names), tls_name_cmp);
	/* one entry per name */
	for (i = 0, k = 0; i < st->n_names; i++)
		if (k == 0 || strcmp(st->names[k - 1].name, st->names[i].name))
			st->names[k++] = st->names[i];
	st->n_names = k;
	for (i = 0; i < st->n_names; i++) {
		int pair[TLS_KINDS];

		tls_pair_of(st, st->names[i].name, pair);
		tls_warn_shadowed(st, st->names[i].name, pair, &warned);
		for (k = 0; k < st->n_sets; k++)
			if (st->sets[k].cert[0] == pair[0] &&
			    st->sets[k].cert[1] == pair[1])
				break;
		if (k == st->n_sets) {
			st->sets[k].cert[0] = pair[0];
			st->sets[k].cert[1] = pair[1];
			st->n_sets++;
			rc = tls_set_ctx(st, &st->sets[k], err);
			if (rc)
				return rc;
		}
		st->names[i].set = &st->sets[k];
	}
	if (warned > TLS_WARN_MAX)
		log_warnx("tls: %zu more names with two certificates of one "
			  "key type",
			  warned - TLS_WARN_MAX);
	st->def = tls_store_exact(st, st->certs[0].names[0]);
	return 0;
}

static void tls_cert_clear(struct tls_cert *c)
{
	size_t j;

	X509_free(c->leaf);
	sk_X509_pop_free(c->chain, X509_free);
	EVP_PKEY_free(c->key);
	if (c->gt)
		gnutls_certificate_free_credentials(c->gt);
	free(c->ocsp);
	for (j = 0; j < c->n_names; j++)
		free(c->names[j]);
	free(c->names);
	memset(c, 0, sizeof(*c));
}

static void tls_store_free(struct tls_store *st)
{
	size_t i;

	if (!st)
		return;
	for (i = 0; i < st->n_sets; i++) {
		SSL_CTX_free(st->sets[i].ctx);
		if (st->sets[i].gt_own)
			gnutls_certificate_free_credentials(st->sets[i].gt_own);
	}
	free(st->sets);
	free(st->names);
	for (i = 0; i < st->n_certs; i++)
		tls_cert_clear(&st->certs[i]);
	free(st->certs);
	for (i = 0; i < st->n_files; i++)
		free(st->files[i].path);
	free(st->files);
	for (i = 0; i < st->conf.n_certs; i++) {
		free(st->conf.certs[i].cert);
		free(st->conf.certs[i].key);
		free(st->conf.certs[i].ocsp);
	}
	free(st->conf.certs);
	tls_dbrows_free(st->db, st->n_db);
	free(st);
}

/* c's GnuTLS copy, when st keeps them (i: its tls.certificates index,
 * or TLS_DB_ENTRY): 0 or -errno with err saying what GnuTLS refused */
static int tls_load_gt(const struct tls_store *st, struct tls_cert *c, size_t i,
		       struct errbuf *err)
{
	const char *why;
	int rc;

	if (!st->conf.gnutls)
		return 0;
	rc = tls_gt_cred(&c->gt);
	if (rc == 0)
		rc = tls_gt_add(c->gt, c->leaf, c->chain, c->key, c->ocsp,
				c->ocsp_len, &why);
	else
		why = "out of memory";
	if (rc)
		tls_errf(err, c->label, i,
			 "GnuTLS (for QUIC) refused the certificate, its "
			 "chain or its key: %s",
			 why);
	return rc;
}

/* A store from c's files and the database's rows db[0..n_db) (copied):
 * a broken file refuses the store, a broken row is left out (logged:
 * tls_db_update has checked it, so only time can have broken it). */
static int tls_store_build(const struct config_tls *c,
			   const struct tls_dbrow *db, size_t n_db,
			   struct tls_store **out, struct errbuf *err)
{
	struct tls_store *st;
	size_t i;
	int rc = -ENOMEM;

	errbuf_clear(err);
	if (c->n_certs + n_db == 0) {
		errbuf_set(err, "tls: no certificates");
		return -EINVAL;
	}
	pthread_rwlock_rdlock(&tls_tk.lock);
	i = tls_tk.n;
	pthread_rwlock_unlock(&tls_tk.lock);
	if (i == 0 && tls_tickets_rotate()) {
		errbuf_set(err, "tls: no random bytes for the ticket keys");
		return -EIO;
	}
	st = calloc(1, sizeof(*st));
	if (!st)
		goto nomem;
	atomic_init(&st->refs, 1);
	st->conf.ticket_rotation_ms = c->ticket_rotation_ms;
	st->conf.gnutls = c->gnutls;
	st->conf.certs = calloc(c->n_certs + 1, sizeof(*st->conf.certs));
	st->certs = calloc(c->n_certs + n_db, sizeof(*st->certs));
	st->files = calloc(c->n_certs * 3 + 1, sizeof(*st->files));
	st->db = calloc(n_db + 1, sizeof(*st->db));
	if (!st->conf.certs || !st->certs || !st->files || !st->db)
		goto nomem;
	for (i = 0; i < c->n_certs; i++) {
		struct config_tls_cert *d = &st->conf.certs[i];

		st->conf.n_certs++;
		d->cert = strdup(c->certs[i].cert);
		d->key = strdup(c->certs[i].key);
		d->ocsp = strdup(c->certs[i].ocsp ? c->certs[i].ocsp : "");
		if (!d->cert || !d->key || !d->ocsp)
			goto nomem;
	}
	for (i = 0; i < n_db; i++) {
		if (tls_dbrow_copy(&st->db[i], &db[i]))
			goto nomem;
		st->n_db++;
	}
	for (i = 0; i < c->n_certs; i++) {
		st->n_certs++;
		st->certs[i].kind = TLS_KIND_RSA;
		rc = tls_load_cert(st, i, err);
		if (rc == 0)
			rc = tls_load_gt(st, &st->certs[i], i, err);
		if (rc)
			goto fail;
	}
	for (i = 0; i < st->n_db; i++) {
		struct tls_cert *ct = &st->certs[st->n_certs];

		rc = tls_load_db(ct, &st->db[i], err);
		if (rc == 0)
			rc = tls_load_gt(st, ct, TLS_DB_ENTRY, err);
		if (rc == -ENOMEM)
			goto fail;
		if (rc) {
			log_warnx("tls: %s left out: %s", st->db[i].label,
				  err->msg);
			errbuf_clear(err);
			tls_cert_clear(ct);
			continue;
		}
		st->n_certs++;
	}
	if (st->n_certs == 0) {
		errbuf_set(err, "tls: no certificates");
		rc = -EINVAL;
		goto fail;
	}
	rc = tls_index(st, err);
	if (rc)
		goto fail;
	*out = st;
	return 0;
nomem:
	rc = -ENOMEM;
fail:
	if (rc == -ENOMEM && !err->msg[0])
		errbuf_set(err, "tls: out of memory");
	ERR_clear_error();
	tls_store_free(st);
	return rc;
}

int tls_store_new(const struct config_tls *c, struct tls_store **out,
		  struct errbuf *err)
{
	return tls_store_new_db(c, NULL, out, err);
}

int tls_store_new_db(const struct config_tls *c, const struct tls_db *db,
		     struct tls_store **out, struct errbuf *err)
{
	if (c->n_certs == 0) {
		errbuf_set(err, "tls: no certificates");
		return -EINVAL;
	}
	return tls_store_build(c, db ? db->rows : NULL, db ? db->n : 0, out,
			       err);
}

int tls_store_with_db(const struct tls_store *s, const struct tls_db *db,
		      struct tls_store **out, struct errbuf *err)
{
	return tls_store_build(&s->conf, db->rows, db->n, out, err);
}

int tls_store_rebuild(const struct tls_store *s, struct tls_store **out,
		      struct errbuf *err)
{
	return tls_store_build(&s->conf, s->db, s->n_db, out, err);
}

bool tls_store_changed(const struct tls_store *s)
{
	struct stat sb;
	struct timespec now;
	int64_t age_ms;
	bool changed = false;
	size_t i;

	clock_gettime(CLOCK_REALTIME, &now);
	for (i = 0; i < s->n_files; i++) {
		const struct tls_file *f = &s->files[i];

		if (stat(f->path, &sb))
			return true; /* gone: the rebuild says so */
		if (sb.st_dev == f->dev && sb.st_ino == f->ino &&
		    sb.st_size == f->size &&
		    sb.st_mtim.tv_sec == f->mtime.tv_sec &&
		    sb.st_mtim.tv_nsec == f->mtime.tv_nsec)
			continue;
		age_ms =
		    ((int64_t)now.tv_sec - (int64_t)sb.st_mtim.tv_sec) * 1000 +
		    ((int64_t)now.tv_nsec - (int64_t)sb.st_mtim.tv_nsec) /
			1000000;
		if (age_ms >= 0 && age_ms < TLS_WATCH_SETTLE_MS)
			return false; /* still being written, maybe */
		changed = true;
	}
	return changed;
}

void tls_store_counts(const struct tls_store *s, size_t *names,
		      size_t *contexts)
{
	*names = s->n_names;
	*contexts = s->n_sets;
}

void tls_store_info(const struct tls_store *s, struct tls_store_info *info)
{
	size_t i;

	memset(info, 0, sizeof(*info));
	info->names = s->n_names;
	info->contexts = s->n_sets;
	for (i = 0; i < s->n_certs; i++) {
		const struct tls_cert *c = &s->certs[i];
		struct tm tm;
		int64_t t;

		if (c->from_db)
			info->db_certs++;
		else
			info->file_certs++;
		if (ASN1_TIME_to_tm(X509_get0_notAfter(c->leaf), &tm) != 1)
			continue;
		t = (int64_t)timegm(&tm);
		if (info->next_expiry && t >= info->next_expiry)
			continue;
		info->next_expiry = t;
		snprintf(info->next_expiry_name, sizeof(info->next_expiry_name),
			 "%s", c->names[0]);
	}
}

static int64_t tls_asn1_unix(const ASN1_TIME *t)
{
	struct tm tm;

	if (ASN1_TIME_to_tm(t, &tm) != 1)
		return 0;
	return (int64_t)timegm(&tm);
}

/* Of the certificates serving name exactly (one per key type), the one
 * ending last, or NULL. */
static const struct tls_cert *tls_name_best(const struct tls_store *s,
					    const char *name)
{
	const struct tls_set *set = tls_store_exact(s, name);
	const struct tls_cert *best = NULL;
	int64_t na = 0, t;
	int k;

	for (k = 0; set && k < TLS_KINDS; k++) {
		const struct tls_cert *c;

		if (set->cert[k] < 0)
			continue;
		c = &s->certs[set->cert[k]];
		t = tls_asn1_unix(X509_get0_notAfter(c->leaf));
		if (!best || t > na) {
			best = c;
			na = t;
		}
	}
	return best;
}

int tls_store_name_times(const struct tls_store *s, const char *name,
			 int64_t *not_before, int64_t *not_after)
{
	const struct tls_cert *best = tls_name_best(s, name);

	if (!best)
		return -ENOENT;
	*not_after = tls_asn1_unix(X509_get0_notAfter(best->leaf));
	*not_before = tls_asn1_unix(X509_get0_notBefore(best->leaf));
	return 0;
}

char *tls_store_name_pem(const struct tls_store *s, const char *name)
{
	const struct tls_cert *best = tls_name_best(s, name);
	char *out = NULL, *p;
	BIO *b;
	long n;

	if (!best || !(b = BIO_new(BIO_s_mem())))
		return NULL;
	if (PEM_write_bio_X509(b, best->leaf) == 1 &&
	    (n = BIO_get_mem_data(b, &p)) > 0 &&
	    (out = malloc((size_t)n + 1))) {
		memcpy(out, p, (size_t)n);
		out[n] = '\0';
	}
	BIO_free(b);
	return out;
}

/* ---- a database row, checked alone ---------------------------------------
 */

int tls_dbrow_check(const struct tls_dbrow *r, struct errbuf *err)
{
	struct config_tls none = {0};
	struct tls_store *st = NULL;
	struct tls_cert c = {0};
	int rc;

	errbuf_clear(err);
	rc = tls_load_db(&c, r, err);
	tls_cert_clear(&c);
	if (rc) {
		if (rc == -ENOMEM && !err->msg[0])
			errbuf_set(err, "out of memory");
		return rc;
	}
	none.ticket_rotation_ms = 3600000;
	rc = tls_store_build(&none, r, 1, &st, err);
	tls_store_put(st);
	return rc;
}

struct tls_store *tls_store_ref(struct tls_store *s)
{
	if (s)
		atomic_fetch_add(&s->refs, 1);
	return s;
}

void tls_store_put(struct tls_store *s)
{
	if (s && atomic_fetch_sub(&s->refs, 1) == 1)
		tls_store_free(s);
}

SSL *tls_store_ssl(struct tls_store *s)
{
	return SSL_new(s->def->ctx);
}

/* ---- the holder -----------------------------------------------------------
 */

void tls_holder_init(struct tls_holder *h)
{
	pthread_mutex_init(&h->lock, NULL);
	h->cur = NULL;
}

void tls_holder_set(struct tls_holder *h, struct tls_store *s)
{
	struct tls_store *old;

	pthread_mutex_lock(&h->lock);
	old = h->cur;
	h->cur = s;
	pthread_mutex_unlock(&h->lock);
	tls_store_put(old);
}

struct tls_store *tls_holder_get(struct tls_holder *h)
{
	struct tls_store *s;

	pthread_mutex_lock(&h->lock);
	s = tls_store_ref(h->cur);
	pthread_mutex_unlock(&h->lock);
	return s;
}

void tls_holder_clear(struct tls_holder *h)
{
	tls_holder_set(h, NULL);
	pthread_mutex_destroy(&h->lock);
}
