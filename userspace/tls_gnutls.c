// SPDX-License-Identifier: BSD-2-Clause
/*
 * tls_gnutls.c - a certificate of the store added to GnuTLS credentials
 * (tls_int.h's tls_gt_add; the lookup, tls_store_gnutls, is tls.c's).
 */
#include <errno.h>
#include <string.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "tls_int.h"

/* b's bytes as a datum (valid while b lives) */
static void tls_gt_datum(BIO *b, gnutls_datum_t *d)
{
	char *p;
	long n = BIO_get_mem_data(b, &p);

	d->data = (unsigned char *)p;
	d->size = n > 0 ? (unsigned)n : 0;
}

/* whether GnuTLS takes x (its DER): 0 or GnuTLS's error. Checked apart
 * first: gnutls_certificate_set_x509_key_mem2 leaks what it had parsed
 * when a certificate is refused (GnuTLS 3.7.9). */
static int tls_gt_check(X509 *x)
{
	unsigned char *der = NULL;
	int len = i2d_X509(x, &der), rc;
	gnutls_x509_crt_t crt;
	gnutls_datum_t d;

	if (len <= 0)
		return GNUTLS_E_MEMORY_ERROR;
	d.data = der;
	d.size = (unsigned)len;
	rc = gnutls_x509_crt_init(&crt);
	if (rc == 0) {
		rc = gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_DER);
		gnutls_x509_crt_deinit(crt);
	}
	OPENSSL_free(der);
	return rc < 0 ? rc : 0;
}

int tls_gt_add(gnutls_certificate_credentials_t cred, X509 *leaf,
	       STACK_OF(X509) * chain, EVP_PKEY *key, const unsigned char *ocsp,
	       size_t ocsp_len, const char **why)
{
	BIO *cb = BIO_new(BIO_s_mem()), *kb = BIO_new(BIO_s_secmem());
	gnutls_datum_t cd, kd;
	int rc = GNUTLS_E_MEMORY_ERROR, idx;

	rc = tls_gt_check(leaf);
	for (int i = 0; rc == 0 && chain && i < sk_X509_num(chain); i++)
		rc = tls_gt_check(sk_X509_value(chain, i));
	if (rc)
		goto out;
	rc = GNUTLS_E_MEMORY_ERROR;
	if (!cb || !kb || PEM_write_bio_X509(cb, leaf) != 1 ||
	    PEM_write_bio_PKCS8PrivateKey(kb, key, NULL, NULL, 0, NULL, NULL) !=
		1)
		goto out;
	for (int i = 0; chain && i < sk_X509_num(chain); i++)
		if (PEM_write_bio_X509(cb, sk_X509_value(chain, i)) != 1)
			goto out;
	tls_gt_datum(cb, &cd);
	tls_gt_datum(kb, &kd);
	/* with GNUTLS_CERTIFICATE_API_V2 set on cred: the index, >= 0 */
	idx = gnutls_certificate_set_x509_key_mem2(
	    cred, &cd, &kd, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN);
	if (idx < 0) {
		rc = idx;
		goto out;
	}
	rc = 0;
	if (ocsp && ocsp_len) {
		gnutls_datum_t od = {(unsigned char *)ocsp, (unsigned)ocsp_len};

		rc = gnutls_certificate_set_ocsp_status_request_mem(
		    cred, &od, (unsigned)idx, GNUTLS_X509_FMT_DER);
	}
out:
	BIO_free(cb);
	BIO_free(kb); /* secure memory: cleansed */
	*why = rc < 0 ? gnutls_strerror(rc) : NULL;
	if (rc == 0)
		return 0;
	return rc == GNUTLS_E_MEMORY_ERROR ? -ENOMEM : -EINVAL;
}

int tls_gt_cred(gnutls_certificate_credentials_t *out)
{
	if (gnutls_certificate_allocate_credentials(out) < 0)
		return -ENOMEM;
	gnutls_certificate_set_flags(*out, GNUTLS_CERTIFICATE_API_V2);
	return 0;
}
