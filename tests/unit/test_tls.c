/* SPDX-License-Identifier: BSD-2-Clause */
/* test_tls.c - tls.h's pure parts (the names a certificate may serve,
 * the wildcard that covers a name) and, over a socketpair with an
 * OpenSSL client in a thread, a store built from certificates made here,
 * the server handshake and the transport: ALPN with h2 on and off,
 * records read together up to the buffer, the peer's close_notify kept
 * for the next read, writes of many small iovecs, close_notify on
 * shutdown. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tls.h"
#include "unit.h"

START_TEST(test_names)
{
	static const struct {
		const char *in, *out; /* out NULL: refused */
	} t[] = {
	    {"Example.COM", "example.com"},
	    {"*.apps.example.com", "*.apps.example.com"},
	    {"a_b-c.example", "a_b-c.example"},
	    {"localhost", "localhost"},
	    {"", NULL},
	    {".example.com", NULL},
	    {"example..com", NULL},
	    {"example.com.", NULL},
	    {"*.", NULL},
	    {"a.*.example.com", NULL},
	    {"*example.com", NULL},
	    {"exa mple.com", NULL},
	    {"1.2.3.4:80", NULL},
	};
	char buf[300];
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		snprintf(buf, sizeof(buf), "%s", t[i].in);
		ck_assert_msg(tls_name_ok(buf) == (t[i].out != NULL), "%s",
			      t[i].in);
		if (t[i].out)
			ck_assert_str_eq(buf, t[i].out);
	}
	memset(buf, 'a', 254);
	buf[254] = '\0';
	ck_assert(!tls_name_ok(buf)); /* longer than a name */
	memset(buf, 'a', 64);
	strcpy(buf + 64, ".example");
	ck_assert(!tls_name_ok(buf)); /* a label of 64 */
}
END_TEST

START_TEST(test_wildcard)
{
	char w[32];

	ck_assert(tls_name_wildcard("a.b.example.com", w, sizeof(w)));
	ck_assert_str_eq(w, "*.b.example.com");
	ck_assert(tls_name_wildcard("x.example", w, sizeof(w)));
	ck_assert_str_eq(w, "*.example");
	ck_assert(!tls_name_wildcard("localhost", w, sizeof(w)));
	ck_assert(!tls_name_wildcard("trailing.", w, sizeof(w)));
	ck_assert(!tls_name_wildcard("a.bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", w,
				     sizeof(w)));
}
END_TEST

/* ---- a handshake and the transport ------------------------------------ */

static char dir[64];
static char certf[96], keyf[96];

/* A self-signed P-256 certificate for DNS:unit.test, valid for a day. */
static void make_cert(void)
{
	EVP_PKEY *k = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	FILE *f;

	ck_assert_ptr_nonnull(k);
	ck_assert_ptr_nonnull(x);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 86400);
	X509_set_pubkey(x, k);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
				   (const unsigned char *)"unit.test", -1, -1,
				   0);
	X509_set_issuer_name(x, X509_get_subject_name(x));
	X509V3_set_ctx_nodb(&v3);
	X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name,
				  "DNS:unit.test");
	ck_assert_ptr_nonnull(ext);
	X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	ck_assert(X509_sign(x, k, EVP_sha256()) > 0);
	f = fopen(certf, "w");
	ck_assert_ptr_nonnull(f);
	PEM_write_X509(f, x);
	fclose(f);
	f = fopen(keyf, "w");
	ck_assert_ptr_nonnull(f);
	PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL);
	fclose(f);
	X509_free(x);
	EVP_PKEY_free(k);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/edge-test-tls.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(certf, sizeof(certf), "%s/c.pem", dir);
	snprintf(keyf, sizeof(keyf), "%s/k.pem", dir);
	make_cert();
}

static void teardown(void)
{
	unlink(certf);
	unlink(keyf);
	rmdir(dir);
}

struct client {
	int fd;
	char got[64]; /* what the server wrote */
	int rc;
};

/* The client: handshake, three records, close_notify, then read what
 * the server sends until its close_notify. */
static void *client_main(void *arg)
{
	struct client *cl = arg;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = SSL_new(ctx);
	size_t n, got = 0;

	SSL_set_fd(ssl, cl->fd);
	SSL_set_tlsext_host_name(ssl, "unit.test");
	if (SSL_connect(ssl) != 1 || SSL_write(ssl, "a", 1) != 1 ||
	    SSL_write(ssl, "bb", 2) != 2 || SSL_write(ssl, "ccc", 3) != 3 ||
	    SSL_shutdown(ssl) < 0) {
		cl->rc = -1;
		goto out;
	}
	while (got < sizeof(cl->got) - 1 &&
	       SSL_read_ex(ssl, cl->got + got, sizeof(cl->got) - 1 - got, &n))
		got += n;
	cl->got[got] = '\0';
	cl->rc = SSL_get_error(ssl, 0) == SSL_ERROR_ZERO_RETURN ||
			 SSL_get_shutdown(ssl) & SSL_RECEIVED_SHUTDOWN
		     ? 0
		     : -2;
out:
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	return NULL;
}

struct server {
	struct event_base *base;
	int rc;
	struct transport t;
};

static void hs_done(int rc, struct transport *t, void *arg)
{
	struct server *sv = arg;

	sv->rc = rc;
	if (rc == 0)
		sv->t = *t;
	event_base_loopbreak(sv->base);
}

/* The server's handshake on sp0 (made non-blocking) with st, against
 * client fn(arg) started in thread *th: sv holds the transport it left
 * and its loop. */
static void serve(struct tls_store *st, int sp0, void *(*fn)(void *), void *arg,
		  struct server *sv, pthread_t *th)
{
	struct timeval tv = {5, 0};
	struct tls_hs *hs;

	sv->rc = 1;
	sv->base = event_base_new();
	ck_assert_ptr_nonnull(sv->base);
	ck_assert_int_eq(evutil_make_socket_nonblocking(sp0), 0);
	ck_assert_int_eq(tls_hs_start(sv->base, st, sp0, &tv, hs_done, sv, &hs),
			 0);
	ck_assert_int_eq(pthread_create(th, NULL, fn, arg), 0);
	event_base_dispatch(sv->base);
	ck_assert_int_eq(sv->rc, 0);
}

/* A read of t that waits up to 5 s for something other than -EAGAIN. */
static ssize_t read_wait(struct transport *t, char *buf, size_t len)
{
	ssize_t n = -EAGAIN;
	int i;

	for (i = 0; i < 500 && n == -EAGAIN; i++) {
		n = transport_read(t, buf, len);
		if (n == -EAGAIN)
			usleep(10000);
	}
	return n;
}

START_TEST(test_transport)
{
	struct config_tls_cert cc = {certf, keyf, (char *)""};
	struct config_tls conf = {
	    .certs = &cc, .n_certs = 1, .ticket_rotation_ms = 3600000};
	struct server sv = {.rc = 1};
	struct client cl = {.rc = 1};
	struct tls_store *st;
	struct errbuf err;
	struct iovec iov[40];
	const char *ver, *cipher;
	char buf[64];
	bool resumed;
	pthread_t th;
	ssize_t n;
	int sp[2], i;

	ck_assert_msg(tls_store_new(&conf, &st, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	cl.fd = sp[1];
	serve(st, sp[0], client_main, &cl, &sv, &th);
	ck_assert(tls_transport_info(&sv.t, &ver, &cipher, &resumed));
	ck_assert_str_eq(ver, "TLSv1.3");
	ck_assert(!resumed);
	ck_assert_str_eq(sv.t.ops->name, "tls");

	/* the three records and the close_notify: read together (the
	 * buffer is larger), the end kept for the next read */
	n = read_wait(&sv.t, buf, sizeof(buf));
	ck_assert_int_eq(n, 6);
	ck_assert_int_eq(memcmp(buf, "abbccc", 6), 0);
	ck_assert_uint_gt(transport_pending(&sv.t), 0);
	ck_assert_int_eq(transport_read(&sv.t, buf, sizeof(buf)), 0);

	/* forty small pieces in one write, then close_notify */
	for (i = 0; i < 40; i++) {
		iov[i].iov_base = (char *)"x";
		iov[i].iov_len = 1;
	}
	ck_assert_int_eq(transport_writev(&sv.t, iov, 40), 40);
	ck_assert_int_eq(transport_shutdown(&sv.t), 0);
	pthread_join(th, NULL);
	ck_assert_int_eq(cl.rc, 0);
	ck_assert_uint_eq(strlen(cl.got), 40);
	transport_close(&sv.t);
	close(sp[1]);
	tls_store_put(st);
	event_base_free(sv.base);
}
END_TEST

/* ---- a read that found the socket empty says so ---------------------- */

/* The client: "hello" in one record, then it waits for the server's
 * answer (its connection stays open: the server's read ends at the
 * socket's EAGAIN, not at an end). */
static void *hello_main(void *arg)
{
	struct client *cl = arg;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = SSL_new(ctx);
	size_t n = 0;

	SSL_set_fd(ssl, cl->fd);
	SSL_set_tlsext_host_name(ssl, "unit.test");
	cl->rc = -1;
	if (SSL_connect(ssl) == 1 && SSL_write(ssl, "hello", 5) == 5 &&
	    SSL_read_ex(ssl, cl->got, sizeof(cl->got) - 1, &n)) {
		cl->got[n] = '\0';
		cl->rc = 0;
	}
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	return NULL;
}

START_TEST(test_read_drained)
{
	struct config_tls_cert cc = {certf, keyf, (char *)""};
	struct config_tls conf = {
	    .certs = &cc, .n_certs = 1, .ticket_rotation_ms = 3600000};
	struct server sv = {.rc = 1};
	struct client cl = {.rc = 1};
	struct iovec iov = {(char *)"bye", 3};
	struct tls_store *st;
	struct errbuf err;
	char buf[64];
	pthread_t th;
	ssize_t n;
	int sp[2];

	ck_assert_msg(tls_store_new(&conf, &st, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	cl.fd = sp[1];
	serve(st, sp[0], hello_main, &cl, &sv, &th);
	n = read_wait(&sv.t, buf, sizeof(buf));
	/* the record, and the socket's EAGAIN behind it: drained (sockio
	 * need not read again to find the socket empty), nothing pending */
	ck_assert_int_eq(n, 5);
	ck_assert_int_eq(memcmp(buf, "hello", 5), 0);
	ck_assert_uint_eq(sv.t.drained, 1);
	ck_assert_uint_eq(transport_pending(&sv.t), 0);
	ck_assert_int_eq(transport_writev(&sv.t, &iov, 1), 3);
	pthread_join(th, NULL);
	ck_assert_int_eq(cl.rc, 0);
	ck_assert_str_eq(cl.got, "bye");
	/* the client is gone: the end, never "drained" */
	close(sp[1]);
	n = read_wait(&sv.t, buf, sizeof(buf));
	ck_assert_int_le(n, 0);
	ck_assert_uint_eq(sv.t.drained, 0);
	transport_close(&sv.t);
	tls_store_put(st);
	event_base_free(sv.base);
}
END_TEST

/* ---- ALPN: h2 while HTTP/2 is on ------------------------------------- */

struct aclient {
	int fd;
	const char *alpn; /* the client's list, wire format; NULL: none */
	char got[16];	  /* what the server selected, "" for none */
	int rc;
};

/* The client: offer cl->alpn, keep what was selected. */
static void *aclient_main(void *arg)
{
	struct aclient *cl = arg;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = SSL_new(ctx);
	const unsigned char *p = NULL;
	unsigned int n = 0;

	SSL_set_fd(ssl, cl->fd);
	SSL_set_tlsext_host_name(ssl, "unit.test");
	cl->rc = -1;
	if (cl->alpn &&
	    SSL_set_alpn_protos(ssl, (const unsigned char *)cl->alpn,
				(unsigned)strlen(cl->alpn)) != 0)
		goto out;
	if (SSL_connect(ssl) != 1)
		goto out;
	SSL_get0_alpn_selected(ssl, &p, &n);
	if (n < sizeof(cl->got)) {
		if (n)
			memcpy(cl->got, p, n);
		cl->got[n] = '\0';
		cl->rc = 0;
	}
out:
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	return NULL;
}

static const struct alpn_case {
	bool h2;	   /* tls_set_h2 */
	const char *offer; /* the client's ALPN list; NULL: none */
	const char *want;  /* the protocol selected, "" for none */
} alpn_cases[] = {
    {true, "\x02h2\x08http/1.1", "h2"},
    {true, "\x08http/1.1\x02h2", "h2"}, /* the server's preference */
    {true, "\x02h2", "h2"},
    {true, "\x08http/1.1", "http/1.1"},
    {true, "\x06spdy/3", ""},
    {true, NULL, ""},
    {false, "\x02h2\x08http/1.1", "http/1.1"},
    {false, "\x02h2", ""},
    {false, "\x08http/1.1", "http/1.1"},
    {false, NULL, ""},
};

/* The protocol ALPN selects as tls_set_h2 says, and tls_transport_h2 on
 * the transport the handshake leaves (false on a plain one). */
START_TEST(test_alpn)
{
	const struct alpn_case *t = &alpn_cases[_i];
	struct config_tls_cert cc = {certf, keyf, (char *)""};
	struct config_tls conf = {
	    .certs = &cc, .n_certs = 1, .ticket_rotation_ms = 3600000};
	struct server sv = {.rc = 1};
	struct aclient cl = {.alpn = t->offer};
	struct transport plain;
	struct tls_store *st;
	struct errbuf err;
	pthread_t th;
	int sp[2];

	tls_set_h2(t->h2);
	ck_assert_msg(tls_store_new(&conf, &st, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	cl.fd = sp[1];
	serve(st, sp[0], aclient_main, &cl, &sv, &th);
	pthread_join(th, NULL);
	ck_assert_int_eq(cl.rc, 0);
	ck_assert_str_eq(cl.got, t->want);
	ck_assert(tls_transport_h2(&sv.t) == (strcmp(t->want, "h2") == 0));
	transport_close(&sv.t);
	close(sp[1]);
	tls_store_put(st);
	event_base_free(sv.base);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	transport_tcp(&plain, sp[0]);
	ck_assert(!tls_transport_h2(&plain));
	transport_close(&plain);
	close(sp[1]);
	tls_set_h2(false);
}
END_TEST

/* ---- the ticket held for the next write -------------------------------- */

#define HELD_PAYLOAD (1024 * 1024)

struct hclient {
	int fd, ctl; /* ctl: the filler's length comes on it */
	size_t filler, payload;
	bool filler_ok, payload_ok, closed, ticket;
};

/* A TLS 1.3 client that reads the raw filler the test wrote under the
 * stream, then the stream: the payload, the close_notify, and the ticket
 * on the way. */
static void *hclient_main(void *arg)
{
	struct hclient *cl = arg;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	unsigned char buf[16384];
	SSL_SESSION *sess;
	size_t n, i, f;
	SSL *ssl;

	SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
	ssl = SSL_new(ctx);
	SSL_set_fd(ssl, cl->fd);
	SSL_set_tlsext_host_name(ssl, "unit.test");
	if (SSL_connect(ssl) != 1 ||
	    read(cl->ctl, &cl->filler, sizeof(cl->filler)) !=
		(ssize_t)sizeof(cl->filler))
		goto out;
	cl->filler_ok = true;
	for (f = 0; f < cl->filler; f += n) {
		ssize_t r = recv(cl->fd, buf,
				 cl->filler - f < sizeof(buf) ? cl->filler - f
							      : sizeof(buf),
				 0);

		if (r <= 0) {
			cl->filler_ok = false;
			goto out;
		}
		n = (size_t)r;
		for (i = 0; i < n; i++)
			cl->filler_ok &= buf[i] == 'F';
	}
	cl->payload_ok = true;
	while (SSL_read_ex(ssl, buf, sizeof(buf), &n)) {
		for (i = 0; i < n; i++)
			cl->payload_ok &=
			    buf[i] == (unsigned char)((cl->payload + i) % 251);
		cl->payload += n;
	}
	cl->closed = SSL_get_error(ssl, 0) == SSL_ERROR_ZERO_RETURN;
	sess = SSL_get1_session(ssl);
	cl->ticket = sess && SSL_SESSION_is_resumable(sess) &&
		     SSL_SESSION_has_ticket(sess);
	SSL_SESSION_free(sess);
out:
	shutdown(cl->fd, SHUT_RDWR); /* a failure stops the server's writes */
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	return NULL;
}

/* Wait until fd is writable (at most 5 s). */
static void wait_out(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};

	ck_assert_int_eq(poll(&p, 1, 5000), 1);
}

/* The TLS 1.3 ticket is held after the handshake and goes out before the
 * first bytes written, also when that write finds the socket full: the
 * client, which reads raw bytes written under the stream first, then
 * receives every byte of a 1 MiB payload in order, the close_notify and a
 * ticket (a ticket lost or put after the payload would break its
 * records' order). */
START_TEST(test_ticket_held)
{
	struct config_tls_cert cc = {certf, keyf, (char *)""};
	struct config_tls conf = {
	    .certs = &cc, .n_certs = 1, .ticket_rotation_ms = 3600000};
	struct server sv = {.rc = 1};
	struct hclient cl = {0};
	static unsigned char pay[HELD_PAYLOAD];
	unsigned char fill[4096];
	struct tls_store *st;
	struct errbuf err;
	struct iovec iov;
	size_t off = 0, filler = 0;
	int sp[2], ctl[2], sndbuf = 8192, i, rc;
	pthread_t th;
	ssize_t n;

	for (i = 0; i < HELD_PAYLOAD; i++)
		pay[i] = (unsigned char)(i % 251);
	memset(fill, 'F', sizeof(fill));
	ck_assert_msg(tls_store_new(&conf, &st, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	ck_assert_int_eq(pipe(ctl), 0);
	ck_assert_int_eq(
	    setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)),
	    0);
	cl.fd = sp[1];
	cl.ctl = ctl[0];
	serve(st, sp[0], hclient_main, &cl, &sv, &th);

	/* the socket filled under the stream: the first write finds no
	 * room, the ticket waits with it */
	while ((n = write(sp[0], fill, sizeof(fill))) > 0)
		filler += (size_t)n;
	ck_assert_int_eq(errno, EAGAIN);
	ck_assert_uint_gt(filler, 0);
	iov.iov_base = pay;
	iov.iov_len = sizeof(pay);
	ck_assert_int_eq(transport_writev(&sv.t, &iov, 1), -EAGAIN);
	ck_assert_int_eq(write(ctl[1], &filler, sizeof(filler)),
			 (ssize_t)sizeof(filler));
	while (off < sizeof(pay)) {
		iov.iov_base = pay + off;
		iov.iov_len = sizeof(pay) - off;
		n = transport_writev(&sv.t, &iov, 1);
		if (n == -EAGAIN) {
			wait_out(sp[0]);
			continue;
		}
		ck_assert_int_gt(n, 0);
		off += (size_t)n;
	}
	while ((rc = transport_shutdown(&sv.t)) == -EAGAIN)
		wait_out(sp[0]);
	ck_assert_int_eq(rc, 0);
	pthread_join(th, NULL);
	ck_assert(cl.filler_ok);
	ck_assert(cl.payload_ok);
	ck_assert_uint_eq(cl.payload, sizeof(pay));
	ck_assert(cl.closed);
	ck_assert(cl.ticket);
	transport_close(&sv.t);
	close(sp[1]);
	close(ctl[0]);
	close(ctl[1]);
	tls_store_put(st);
	event_base_free(sv.base);
}
END_TEST

/* ---- tickets ------------------------------------------------------------ */

struct rclient {
	int fd;
	SSL_SESSION *in, *out;
};

/* A TLS 1.2 client (its ticket arrives within the handshake), offering
 * session in when it has one; out: the session it ends with. */
static void *rclient_main(void *arg)
{
	struct rclient *cl = arg;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl;

	SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
	ssl = SSL_new(ctx);
	SSL_set_fd(ssl, cl->fd);
	SSL_set_tlsext_host_name(ssl, "unit.test");
	if (cl->in)
		SSL_set_session(ssl, cl->in);
	if (SSL_connect(ssl) == 1) {
		cl->out = SSL_get1_session(ssl);
		SSL_shutdown(ssl);
	}
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	return NULL;
}

/* One handshake with st, the client offering in: whether the server
 * resumed it; *out the client's session after it (to free). */
static bool handshake(struct tls_store *st, SSL_SESSION *in, SSL_SESSION **out)
{
	struct server sv = {.rc = 1};
	struct rclient cl = {.in = in};
	const char *ver, *cipher;
	bool resumed = false;
	pthread_t th;
	int sp[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	cl.fd = sp[1];
	serve(st, sp[0], rclient_main, &cl, &sv, &th);
	pthread_join(th, NULL);
	ck_assert(tls_transport_info(&sv.t, &ver, &cipher, &resumed));
	ck_assert_str_eq(ver, "TLSv1.2");
	transport_close(&sv.t);
	close(sp[1]);
	event_base_free(sv.base);
	ck_assert_ptr_nonnull(cl.out);
	*out = cl.out;
	return resumed;
}

/* A ticket resumes under the current key and the two before it, not
 * after a third rotation. */
START_TEST(test_tickets)
{
	struct config_tls_cert cc = {certf, keyf, (char *)""};
	struct config_tls conf = {
	    .certs = &cc, .n_certs = 1, .ticket_rotation_ms = 3600000};
	SSL_SESSION *s1, *s;
	struct tls_store *st;
	struct errbuf err;

	ck_assert_msg(tls_store_new(&conf, &st, &err) == 0, "%s", err.msg);
	ck_assert(!handshake(st, NULL, &s1));
	ck_assert(handshake(st, s1, &s));
	SSL_SESSION_free(s);
	ck_assert_int_eq(tls_tickets_rotate(), 0);
	ck_assert(handshake(st, s1, &s)); /* the previous key */
	SSL_SESSION_free(s);
	ck_assert_int_eq(tls_tickets_rotate(), 0);
	ck_assert(handshake(st, s1, &s)); /* the one before */
	SSL_SESSION_free(s);
	ck_assert_int_eq(tls_tickets_rotate(), 0);
	ck_assert(!handshake(st, s1, &s)); /* gone: a full handshake */
	SSL_SESSION_free(s);
	SSL_SESSION_free(s1);
	tls_store_put(st);
}
END_TEST

/* The whole of file path, NUL-terminated (the caller frees it). */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *b = calloc(1, 16384);
	size_t n;

	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(b);
	n = fread(b, 1, 16383, f);
	ck_assert(n > 0 && n < 16383);
	fclose(f);
	return b;
}

/* The certificates table's rows, checked one by one: a good row is
 * accepted, the same rows again change nothing, a row gone bad is
 * refused once per reason while its good version serves on, a bad new
 * row is refused without blocking the good one, a row gone is gone. */
START_TEST(test_db_update)
{
	char *chain = slurp(certf), *key = slurp(keyf), *j;
	struct tls_db_in in[3] = {
	    {"1", "", chain, key, ""},
	    {"2", "unit.test", chain, key, "zz"},
	    {"3", "other.test", chain, key, ""},
	};
	struct tls_db_in bad = {"1", "", chain, "not a key", ""};
	struct config_tls_cert cc = {certf, keyf, (char *)""};
	struct config_tls conf = {
	    .certs = &cc, .n_certs = 1, .ticket_rotation_ms = 3600000};
	struct tls_store *st = NULL;
	struct tls_store_info info;
	size_t served, refused;
	uint64_t refusals;
	struct tls_db *db;
	struct errbuf err;
	json_t *a;

	ck_assert_int_eq(tls_db_new(&db), 0);
	ck_assert_int_eq(tls_db_update(db, in, 1), 1);
	tls_db_counts(db, &served, &refused, &refusals);
	ck_assert_uint_eq(served, 1);
	ck_assert_uint_eq(refused, 0);
	ck_assert_int_eq(tls_db_update(db, in, 1), 0); /* nothing new */

	/* row 1 gone bad: refused, its good version serves on, said once */
	ck_assert_int_eq(tls_db_update(db, &bad, 1), 0);
	ck_assert_int_eq(tls_db_update(db, &bad, 1), 0);
	tls_db_counts(db, &served, &refused, &refusals);
	ck_assert_uint_eq(served, 1);
	ck_assert_uint_eq(refused, 1);
	ck_assert_uint_eq(refusals, 1);
	a = tls_db_refused_json(db);
	j = json_dumps(a, JSON_COMPACT);
	ck_assert_msg(strstr(j, "\"id\":\"1\"") &&
			  strstr(j, "certificates row 1"),
		      "%s", j);
	ck_assert_msg(!strstr(j, "PRIVATE KEY") && !strstr(j, "not a key"),
		      "%s", j);
	free(j);
	json_decref(a);

	/* the good row back, a row with an OCSP response that is not hex
	 * and one naming a name its certificate does not have: the two
	 * refused, the good one served */
	ck_assert_int_eq(tls_db_update(db, in, 3), 0);
	tls_db_counts(db, &served, &refused, &refusals);
	ck_assert_uint_eq(served, 1);
	ck_assert_uint_eq(refused, 2);
	ck_assert_uint_eq(refusals, 3);
	a = tls_db_refused_json(db);
	j = json_dumps(a, JSON_COMPACT);
	ck_assert_msg(strstr(j, "certificates row 2 ocsp: not hex"), "%s", j);
	ck_assert_msg(strstr(j, "\"id\":\"3\"") && strstr(j, "other.test"),
		      "%s", j);
	free(j);
	json_decref(a);
	ck_assert_msg(tls_store_new_db(&conf, db, &st, &err) == 0, "%s",
		      err.msg);
	tls_store_info(st, &info);
	ck_assert_uint_eq(info.file_certs, 1);
	ck_assert_uint_eq(info.db_certs, 1); /* row 1 */
	tls_store_put(st);

	/* the table emptied */
	ck_assert_int_eq(tls_db_update(db, in, 0), 1);
	tls_db_counts(db, &served, &refused, &refusals);
	ck_assert_uint_eq(served, 0);
	ck_assert_uint_eq(refused, 0);
	tls_db_free(db);
	free(chain);
	free(key);
}
END_TEST

/* The leaf and n copies of it after it: a valid chain of any length (the
 * test's certificate is self-signed, so each copy signs the one before),
 * so that only the limit on its length can refuse it. A new string. */
static char *copies(const char *leaf, size_t n)
{
	size_t len = strlen(leaf), i;
	char *b = malloc(len * (n + 1) + 1), *p = b;

	ck_assert_ptr_nonnull(b);
	for (i = 0; i <= n; i++, p += len)
		memcpy(p, leaf, len);
	*p = '\0';
	return b;
}

/* A chain of more than TLS_CHAIN_MAX certificates after the leaf: a
 * database row refused by id with the reason, counted, its previous
 * version serving on; 3,000 copies refused the same way (counted before
 * any is parsed); a certificate file refused, named. One of exactly
 * TLS_CHAIN_MAX is served. */
START_TEST(test_chain_limit)
{
	char *leaf = slurp(certf), *key = slurp(keyf), *ok, *over, *many, *j;
	char longf[112];
	struct tls_db_in in = {"7", "", NULL, key, ""};
	struct config_tls_cert cc = {longf, keyf, (char *)""};
	struct config_tls conf = {
	    .certs = &cc, .n_certs = 1, .ticket_rotation_ms = 3600000};
	struct tls_store *st = NULL;
	size_t served, refused;
	uint64_t refusals;
	struct tls_db *db;
	struct errbuf err;
	json_t *a;
	FILE *f;

	ok = copies(leaf, TLS_CHAIN_MAX);
	over = copies(leaf, TLS_CHAIN_MAX + 1);
	many = copies(leaf, 3000);
	ck_assert_int_eq(tls_db_new(&db), 0);
	in.chain_pem = ok;
	ck_assert_int_eq(tls_db_update(db, &in, 1), 1);
	tls_db_counts(db, &served, &refused, &refusals);
	ck_assert_uint_eq(served, 1);
	ck_assert_uint_eq(refused, 0);
	/* one more: refused by id, the previous version serving on */
	in.chain_pem = over;
	ck_assert_int_eq(tls_db_update(db, &in, 1), 0);
	tls_db_counts(db, &served, &refused, &refusals);
	ck_assert_uint_eq(served, 1);
	ck_assert_uint_eq(refused, 1);
	ck_assert_uint_eq(refusals, 1);
	a = tls_db_refused_json(db);
	j = json_dumps(a, JSON_COMPACT);
	ck_assert_msg(strstr(j, "\"id\":\"7\"") &&
			  strstr(j, "certificates row 7 chain_pem: 12 "
				    "certificates in it: a certificate and at "
				    "most 10 of its chain are served"),
		      "%s", j);
	free(j);
	json_decref(a);
	/* 3,000 copies: the same refusal (a new reason: counted again) */
	in.chain_pem = many;
	ck_assert_int_eq(tls_db_update(db, &in, 1), 0);
	tls_db_counts(db, &served, &refused, &refusals);
	ck_assert_uint_eq(served, 1);
	ck_assert_uint_eq(refusals, 2);
	a = tls_db_refused_json(db);
	j = json_dumps(a, JSON_COMPACT);
	ck_assert_msg(strstr(j, "3001 certificates in it"), "%s", j);
	free(j);
	json_decref(a);
	tls_db_free(db);
	/* a certificate file: refused, named */
	snprintf(longf, sizeof(longf), "%s/long.pem", dir);
	f = fopen(longf, "w");
	ck_assert_ptr_nonnull(f);
	fputs(over, f);
	fclose(f);
	ck_assert_int_ne(tls_store_new(&conf, &st, &err), 0);
	ck_assert_msg(strstr(err.msg, "long.pem: tls.certificates[0]: 12 "
				      "certificates in it"),
		      "%s", err.msg);
	f = fopen(longf, "w");
	ck_assert_ptr_nonnull(f);
	fputs(ok, f);
	fclose(f);
	ck_assert_msg(tls_store_new(&conf, &st, &err) == 0, "%s", err.msg);
	tls_store_put(st);
	unlink(longf);
	free(leaf);
	free(key);
	free(ok);
	free(over);
	free(many);
}
END_TEST

static Suite *tls_suite(void)
{
	Suite *s = suite_create("tls");
	TCase *tc = tcase_create("tls");

	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_wildcard);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_transport);
	tcase_add_test(tc, test_read_drained);
	tcase_add_loop_test(tc, test_alpn, 0,
			    sizeof(alpn_cases) / sizeof(alpn_cases[0]));
	tcase_add_test(tc, test_ticket_held);
	tcase_add_test(tc, test_tickets);
	tcase_add_test(tc, test_db_update);
	tcase_add_test(tc, test_chain_limit);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(tls_suite());
}
