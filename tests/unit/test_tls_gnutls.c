// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_tls_gnutls.c - the store's GnuTLS copies (tls_gnutls.h): which
 * certificate a server name gets, as for TCP (exact, wildcard, the
 * default), and real handshakes (ECDSA or RSA by what the client takes)
 * of a GnuTLS server whose post-ClientHello function asks the store, against an
 * OpenSSL client over a socketpair, the served leaf checked by its
 * subject. Certificates made here with OpenSSL.
 */
#include <check.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tls.h"
#include "tls_gnutls.h"
#include "unit.h"

static char dir[64];

/* a self-signed certificate, CN cn, SAN san, key RSA or P-256, into
 * dir/NAME.crt and dir/NAME.key */
static void make_cert_v(const char *name, const char *cn, const char *san,
			bool rsa, char *certf, char *keyf, long version)
{
	EVP_PKEY *k = rsa ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	FILE *f;

	ck_assert_ptr_nonnull(k);
	X509_set_version(x, version);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 86400);
	X509_set_pubkey(x, k);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
				   (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, X509_get_subject_name(x));
	X509V3_set_ctx_nodb(&v3);
	X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, san);
	ck_assert_ptr_nonnull(ext);
	X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	ck_assert(X509_sign(x, k, EVP_sha256()) > 0);
	sprintf(certf, "%s/%s.crt", dir, name);
	sprintf(keyf, "%s/%s.key", dir, name);
	f = fopen(certf, "w");
	PEM_write_X509(f, x);
	fclose(f);
	f = fopen(keyf, "w");
	PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL);
	fclose(f);
	X509_free(x);
	EVP_PKEY_free(k);
}

static void make_cert(const char *name, const char *cn, const char *san,
		      bool rsa, char *certf, char *keyf)
{
	make_cert_v(name, cn, san, rsa, certf, keyf, X509_VERSION_3);
}

static char files[4][2][128];
static struct tls_store *st, *st_plain;

/* certificates: "dflt" (ECDSA, the first: the default), "a-ec" and
 * "a-rsa" for a.test, "wild" for *.wild.test */
static void setup(void)
{
	struct config_tls_cert cc[4];
	struct config_tls conf = {0};
	struct errbuf err;

	snprintf(dir, sizeof(dir), "/tmp/edge-test-tlsgt.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	make_cert("dflt", "dflt", "DNS:dflt.test", false, files[0][0],
		  files[0][1]);
	make_cert("a-ec", "a-ec", "DNS:a.test", false, files[1][0],
		  files[1][1]);
	make_cert("a-rsa", "a-rsa", "DNS:a.test", true, files[2][0],
		  files[2][1]);
	make_cert("wild", "wild", "DNS:*.wild.test", false, files[3][0],
		  files[3][1]);
	for (int i = 0; i < 4; i++) {
		cc[i].cert = files[i][0];
		cc[i].key = files[i][1];
		cc[i].ocsp = (char *)"";
	}
	conf.certs = cc;
	conf.n_certs = 4;
	conf.ticket_rotation_ms = 3600000;
	conf.gnutls = true;
	errbuf_clear(&err);
	ck_assert_msg(tls_store_new(&conf, &st, &err) == 0, "%s", err.msg);
	conf.gnutls = false;
	ck_assert_msg(tls_store_new(&conf, &st_plain, &err) == 0, "%s",
		      err.msg);
}

static void teardown(void)
{
	tls_store_put(st);
	tls_store_put(st_plain);
	for (int i = 0; i < 4; i++) {
		unlink(files[i][0]);
		unlink(files[i][1]);
	}
	rmdir(dir);
}

START_TEST(test_pick)
{
	/* one certificate alone: its own credentials; two of one name:
	 * credentials of the pair; the rest the default's */
	gnutls_certificate_credentials_t a = tls_store_gnutls(st, "a.test");
	gnutls_certificate_credentials_t d = tls_store_gnutls(st, NULL);
	gnutls_certificate_credentials_t w =
	    tls_store_gnutls(st, "x.wild.test");

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(d);
	ck_assert_ptr_nonnull(w);
	ck_assert_ptr_ne(a, d);
	ck_assert_ptr_ne(a, w);
	ck_assert_ptr_ne(w, d);
	ck_assert_ptr_eq(tls_store_gnutls(st, "A.Test."), a);
	ck_assert_ptr_eq(tls_store_gnutls(st, "y.x.wild.test"), d);
	ck_assert_ptr_eq(tls_store_gnutls(st, "unknown.test"), d);
	ck_assert_ptr_eq(tls_store_gnutls(st, ""), d);
	ck_assert_ptr_eq(tls_store_gnutls(st, "dflt.test"), d);
	/* a store built without the copies has none */
	ck_assert_ptr_null(tls_store_gnutls(st_plain, "a.test"));
}
END_TEST

/* what a QUIC listener's post-ClientHello function does: the store (in
 * the session's pointer here) chooses the credentials by server name */
static int post_hello(gnutls_session_t s)
{
	char name[256];
	size_t len = sizeof(name);
	unsigned type;

	if (gnutls_server_name_get(s, name, &len, &type, 0) < 0 ||
	    type != GNUTLS_NAME_DNS)
		name[0] = '\0';
	return gnutls_credentials_set(
	    s, GNUTLS_CRD_CERTIFICATE,
	    tls_store_gnutls(gnutls_session_get_ptr(s), name));
}

struct hs {
	int fd;
	const char *sni;
	const char *sigalgs; /* NULL: OpenSSL's */
	int max_version;
	char cn[64];
};

static void *client(void *arg)
{
	struct hs *h = arg;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl;
	X509 *peer;

	if (h->sigalgs)
		SSL_CTX_set1_sigalgs_list(ctx, h->sigalgs);
	SSL_CTX_set_max_proto_version(ctx, h->max_version);
	ssl = SSL_new(ctx);
	SSL_set_fd(ssl, h->fd);
	if (h->sni)
		SSL_set_tlsext_host_name(ssl, h->sni);
	h->cn[0] = '\0';
	if (SSL_connect(ssl) == 1 && (peer = SSL_get1_peer_certificate(ssl))) {
		X509_NAME_get_text_by_NID(X509_get_subject_name(peer),
					  NID_commonName, h->cn, sizeof(h->cn));
		X509_free(peer);
	}
	SSL_shutdown(ssl);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	close(h->fd);
	return NULL;
}

/* a GnuTLS server handshake with st against the OpenSSL client h: the
 * CN the client saw */
static void handshake(struct hs *h)
{
	gnutls_session_t s;
	pthread_t th;
	int sp[2], rc;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	h->fd = sp[1];
	ck_assert_int_eq(gnutls_init(&s, GNUTLS_SERVER), 0);
	ck_assert_int_eq(gnutls_set_default_priority(s), 0);
	/* the default's until the ClientHello names one */
	ck_assert_int_eq(gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE,
						tls_store_gnutls(st, NULL)),
			 0);
	gnutls_handshake_set_post_client_hello_function(s, post_hello);
	gnutls_session_set_ptr(s, st);
	gnutls_transport_set_int(s, sp[0]);
	ck_assert_int_eq(pthread_create(&th, NULL, client, h), 0);
	do
		rc = gnutls_handshake(s);
	while (rc < 0 && !gnutls_error_is_fatal(rc));
	ck_assert_msg(rc == 0, "handshake: %s", gnutls_strerror(rc));
	gnutls_bye(s, GNUTLS_SHUT_WR);
	pthread_join(th, NULL);
	gnutls_deinit(s);
	close(sp[0]);
}

START_TEST(test_handshake)
{
	struct hs h = {.max_version = TLS1_3_VERSION};

	h.sni = "a.test";
	handshake(&h);
	ck_assert_str_eq(h.cn, "a-ec");
	h.sigalgs = "RSA-PSS+SHA256:RSA+SHA256";
	handshake(&h);
	ck_assert_str_eq(h.cn, "a-rsa");
	h.sigalgs = NULL;
	h.sni = "q.wild.test";
	handshake(&h);
	ck_assert_str_eq(h.cn, "wild");
	h.sni = NULL;
	handshake(&h);
	ck_assert_str_eq(h.cn, "dflt");
	h.sni = "a.test"; /* TLS 1.2 as well */
	h.max_version = TLS1_2_VERSION;
	handshake(&h);
	ck_assert_str_eq(h.cn, "a-ec");
}
END_TEST

/* what GnuTLS refuses (a version 1 certificate with extensions, which
 * OpenSSL serves) refuses the store that keeps copies, naming the file
 * and GnuTLS's reason; a store without copies takes it */
START_TEST(test_refused)
{
	char cf[128], kf[128];
	struct config_tls_cert cc;
	struct config_tls conf = {0};
	struct tls_store *s2 = NULL;
	struct errbuf err;

	make_cert_v("v1", "v1", "DNS:v1.test", false, cf, kf, X509_VERSION_1);
	cc.cert = cf;
	cc.key = kf;
	cc.ocsp = (char *)"";
	conf.certs = &cc;
	conf.n_certs = 1;
	conf.ticket_rotation_ms = 3600000;
	conf.gnutls = true;
	errbuf_clear(&err);
	ck_assert_int_eq(tls_store_new(&conf, &s2, &err), -EINVAL);
	ck_assert_ptr_null(s2);
	ck_assert_msg(strstr(err.msg, "v1.crt") &&
			  strstr(err.msg, "GnuTLS (for QUIC) refused") &&
			  strstr(err.msg, "Error in the certificate"),
		      "%s", err.msg);
	conf.gnutls = false;
	ck_assert_msg(tls_store_new(&conf, &s2, &err) == 0, "%s", err.msg);
	tls_store_put(s2);
	unlink(cf);
	unlink(kf);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tls_gnutls");

	signal(SIGPIPE, SIG_IGN);
	TCase *tc = tcase_create("store");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_pick);
	tcase_add_test(tc, test_handshake);
	tcase_add_test(tc, test_refused);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
