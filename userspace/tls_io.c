// SPDX-License-Identifier: BSD-2-Clause
/*
 * tls_io.c - TLS on one connection: the server handshake driven by the
 * socket's readiness on a worker's loop, bounded by a timeout, and the
 * transport (transport.h) over the SSL it leaves: SSL_read / SSL_write
 * with want-read / want-write, pending records, close_notify on
 * shutdown. Under the SSL, edged's socket BIO (tls_sock), which holds a
 * TLS 1.3 ticket for the next send.
 *
 * A read goes on until the buffer is full or OpenSSL needs the socket
 * (WANT_READ: the socket is drained), so that sockio's rule "a short
 * read drained the socket" (edge-triggered events) holds for TLS too: a
 * single SSL_read returns one record, and more records may wait in the
 * socket. What ends a read after some bytes (the peer's close_notify, an
 * error, a want-write) is kept for the next call, and pending says so.
 */
#include <errno.h>
#include <event2/event.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tls.h"
#include "tls_int.h"

/* Bytes gathered from small iovecs into one SSL_write: one full record. */
#define TLS_WRITE_CHUNK 16384

/* A TLS stream's state (the transport's ctx). */
struct tls_conn {
	SSL *ssl;
	ssize_t deferred;  /* a read's ending kept for the next call: 0 none,
			    * 1 the end of the stream, else -errno */
	bool retry;	   /* a read stopped on want-write after some bytes */
	bool fatal;	   /* no SSL_shutdown after an error */
	bool shut;	   /* close_notify sent */
	unsigned long err; /* the library's error that made it fatal, or 0 */
};

#define TLS_DEFERRED_EOF 1

/* ---- the socket under the SSL ---------------------------------------------
 *
 * OpenSSL's own socket BIO, but for one thing: the NewSessionTicket a TLS
 * 1.3 server writes once the client's Finished is in is held and goes out
 * with the next bytes written (a response, the close_notify), in one send
 * and one TCP segment, instead of a send and a segment of its own; or
 * alone, TLS_TICKET_HOLD_MS after the handshake, when nothing was written
 * by then (a preconnected socket, a slow upstream: the client may open
 * its next connection before the first answer, and should resume it).
 * OpenSSL flushes after the ticket: the flush leaves it held.
 */

#define TLS_TICKET_HOLD_MS 100

struct tls_sock {
	int fd;
	bool eof;
	bool empty;	/* the last recv found the socket empty (EAGAIN) */
	const SSL *ssl; /* whose state says when a ticket is written */
	unsigned char *held;
	size_t held_len, held_off;
	struct event *hold; /* sends what is held at TLS_TICKET_HOLD_MS */
};

static BIO_METHOD *tls_sock_method;
static int tls_sock_type;

/* Whether what ssl writes now is a TLS 1.3 NewSessionTicket after the
 * handshake. */
static bool tls_sock_holding(const struct tls_sock *ts)
{
	return ts->ssl && SSL_version(ts->ssl) == TLS1_3_VERSION &&
	       SSL_get_state(ts->ssl) == TLS_ST_SW_SESSION_TICKET;
}

static int tls_sock_hold(struct tls_sock *ts, const char *buf, size_t len)
{
	size_t n = ts->held_len + len;
	unsigned char *p;

	if (n > 64 * 1024)
		return -1; /* a ticket is a few hundred bytes */
	p = realloc(ts->held, n);
	if (!p)
		return -1;
	memcpy(p + ts->held_len, buf, len);
	ts->held = p;
	ts->held_len = n;
	return 0;
}

static void tls_sock_unhold(struct tls_sock *ts)
{
	free(ts->held);
	ts->held = NULL;
	ts->held_len = ts->held_off = 0;
	if (ts->hold) {
		event_free(ts->hold);
		ts->hold = NULL;
	}
}

/* Nothing was written TLS_TICKET_HOLD_MS after the handshake: what is
 * held goes alone (a socket too full to take it: with the next write). */
static void tls_sock_hold_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tls_sock *ts = arg;
	size_t left = ts->held_len - ts->held_off;
	ssize_t n;

	(void)fd;
	(void)what;
	do
		n = send(ts->fd, ts->held + ts->held_off, left,
			 MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n > 0 && (size_t)n == left)
		tls_sock_unhold(ts);
	else if (n > 0)
		ts->held_off += (size_t)n;
}

/* The handshake is done: a ticket held waits TLS_TICKET_HOLD_MS at most
 * for bytes to go with (on base, ssl's loop). */
static void tls_sock_hold_arm(SSL *ssl, struct event_base *base)
{
	BIO *b = SSL_get_wbio(ssl);
	struct timeval tv = {0, TLS_TICKET_HOLD_MS * 1000};
	struct tls_sock *ts;

	if (!b || BIO_method_type(b) != tls_sock_type)
		return;
	ts = BIO_get_data(b);
	if (!ts || ts->held_off == ts->held_len || ts->hold)
		return;
	ts->hold = evtimer_new(base, tls_sock_hold_cb, ts);
	if (!ts->hold || evtimer_add(ts->hold, &tv))
		tls_sock_hold_cb(-1, 0, ts); /* no timer: at once */
}

static int tls_sock_write(BIO *b, const char *buf, size_t len, size_t *done)
{
	struct tls_sock *ts = BIO_get_data(b);
	struct iovec iov[2];
	struct msghdr mh = {.msg_iov = iov};
	size_t held = ts->held_len - ts->held_off;
	ssize_t n;

	BIO_clear_retry_flags(b);
	if (tls_sock_holding(ts) && tls_sock_hold(ts, buf, len) == 0) {
		*done = len;
		return 1;
	}
	if (held) {
		iov[0].iov_base = ts->held + ts->held_off;
		iov[0].iov_len = held;
	}
	iov[held ? 1 : 0].iov_base = (void *)buf;
	iov[held ? 1 : 0].iov_len = len;
	mh.msg_iovlen = held ? 2 : 1;
	do
		n = sendmsg(ts->fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			BIO_set_retry_write(b);
		return 0;
	}
	if ((size_t)n < held) {
		/* the socket is full: the rest of the ticket first, later */
		ts->held_off += (size_t)n;
		BIO_set_retry_write(b);
		errno = EAGAIN;
		return 0;
	}
	if (held)
		tls_sock_unhold(ts);
	n -= (ssize_t)held;
	if (n == 0 && len) {
		BIO_set_retry_write(b); /* short: the socket is full */
		errno = EAGAIN;
		return 0;
	}
	*done = (size_t)n;
	return 1;
}

static int tls_sock_read(BIO *b, char *buf, size_t len, size_t *done)
{
	struct tls_sock *ts = BIO_get_data(b);
	ssize_t n;

	BIO_clear_retry_flags(b);
	do
		n = recv(ts->fd, buf, len, 0);
	while (n < 0 && errno == EINTR);
	ts->empty = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
	if (n > 0) {
		*done = (size_t)n;
		return 1;
	}
	if (n == 0) {
		ts->eof = true;
	} else if (ts->empty) {
		BIO_set_retry_read(b);
	}
	*done = 0;
	return 0;
}

static long tls_sock_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	struct tls_sock *ts = BIO_get_data(b);

	(void)num;
	switch (cmd) {
	case BIO_C_GET_FD:
		if (ptr)
			*(int *)ptr = ts->fd;
		return ts->fd;
	case BIO_CTRL_EOF:
		return ts->eof;
	case BIO_CTRL_FLUSH:
	case BIO_CTRL_DUP:
		return 1;
	default:
		return 0;
	}
}

static int tls_sock_create(BIO *b)
{
	struct tls_sock *ts = calloc(1, sizeof(*ts));

	if (!ts)
		return 0;
	ts->fd = -1;
	BIO_set_data(b, ts);
	BIO_set_init(b, 1);
	return 1;
}

static int tls_sock_destroy(BIO *b)
{
	struct tls_sock *ts = BIO_get_data(b);

	if (ts) {
		tls_sock_unhold(ts);
		free(ts);
	}
	BIO_set_data(b, NULL);
	return 1;
}

static void tls_sock_method_make(void)
{
	int type =
	    BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR;
	BIO_METHOD *m = BIO_meth_new(type, "edge socket");

	if (m && BIO_meth_set_write_ex(m, tls_sock_write) == 1 &&
	    BIO_meth_set_read_ex(m, tls_sock_read) == 1 &&
	    BIO_meth_set_ctrl(m, tls_sock_ctrl) == 1 &&
	    BIO_meth_set_create(m, tls_sock_create) == 1 &&
	    BIO_meth_set_destroy(m, tls_sock_destroy) == 1) {
		tls_sock_type = type;
		tls_sock_method = m;
		return;
	}
	BIO_meth_free(m);
}

/* Whether ssl's last read of its socket found it empty (a tls_sock's;
 * OpenSSL's own socket BIO does not say: false). */
static bool tls_sock_empty(SSL *ssl)
{
	BIO *b = SSL_get_rbio(ssl);
	const struct tls_sock *ts;

	if (!b || BIO_method_type(b) != tls_sock_type)
		return false;
	ts = BIO_get_data(b);
	return ts && ts->empty;
}

/* ssl reads and writes fd through a tls_sock (or, without one, OpenSSL's
 * socket BIO): 0, or -1 (nothing set). */
static int tls_sock_attach(SSL *ssl, int fd)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct tls_sock *ts;
	BIO *b;

	pthread_once(&once, tls_sock_method_make);
	b = tls_sock_method ? BIO_new(tls_sock_method) : NULL;
	if (!b)
		return SSL_set_fd(ssl, fd) == 1 ? 0 : -1;
	ts = BIO_get_data(b);
	ts->fd = fd;
	ts->ssl = ssl;
	SSL_set_bio(ssl, b, b);
	return 0;
}

static __thread unsigned char tls_wbuf[TLS_WRITE_CHUNK];

/* What an SSL call's failure e means for the stream: 0 the end of the
 * stream, -EAGAIN with t->want, or -errno (fatal). */
static ssize_t tls_failed(struct transport *t, struct tls_conn *tc, int rc)
{
	int e = SSL_get_error(tc->ssl, rc);

	switch (e) {
	case SSL_ERROR_WANT_READ:
		t->want = TRANSPORT_WANT_READ;
		return -EAGAIN;
	case SSL_ERROR_WANT_WRITE:
		t->want = TRANSPORT_WANT_WRITE;
		return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		tc->fatal = true;
		if (ERR_peek_error() == 0 && errno == 0)
			return 0; /* the peer's FIN without close_notify */
		tc->err = ERR_peek_error();
		ERR_clear_error();
		return errno ? -errno : -EPROTO;
	default:
		tc->fatal = true;
		tc->err = ERR_peek_error();
		ERR_clear_error();
		return -EPROTO;
	}
}

static ssize_t tls_read(struct transport *t, void *buf, size_t len)
{
	struct tls_conn *tc = t->ctx;
	size_t got = 0, n;
	ssize_t rc;
	int r;

	if (tc->deferred) {
		rc = tc->deferred;
		tc->deferred = 0;
		return rc == TLS_DEFERRED_EOF ? 0 : rc;
	}
	tc->retry = false;
	t->drained = 0;
	while (got < len) {
		ERR_clear_error();
		errno = 0;
		r = SSL_read_ex(tc->ssl, (char *)buf + got, len - got, &n);
		if (r == 1) {
			got += n;
			continue;
		}
		rc = tls_failed(t, tc, r);
		if (!got)
			return rc;
		if (rc == -EAGAIN) {
			/* want-read: the socket is drained; want-write:
			 * come back (pending says so) */
			tc->retry = t->want == TRANSPORT_WANT_WRITE;
			t->drained = t->want == TRANSPORT_WANT_READ &&
				     tls_sock_empty(tc->ssl);
		} else {
			tc->deferred = rc == 0 ? TLS_DEFERRED_EOF : rc;
		}
		break;
	}
	return (ssize_t)got;
}

static ssize_t tls_write_some(struct transport *t, struct tls_conn *tc,
			      const void *p, size_t len)
{
	size_t n;
	ssize_t rc;
	int r;

	ERR_clear_error();
	errno = 0;

	r = SSL_write_ex(tc->ssl, p, len, &n);
	if (r == 1)
		return (ssize_t)n;
	rc = tls_failed(t, tc, r);
	return rc == 0 ? -EPIPE : rc; /* no writing after close_notify */
}

static ssize_t tls_writev(struct transport *t, const struct iovec *iov, int n)
{
	struct tls_conn *tc = t->ctx;
	size_t done = 0, off = 0, len, fill;
	const void *p;
	ssize_t w;
	int i = 0, j;

	while (i < n) {
		if (off == iov[i].iov_len) {
			i++;
			off = 0;
			continue;
		}
		len = iov[i].iov_len - off;
		if (len >= TLS_WRITE_CHUNK) {
			p = (const char *)iov[i].iov_base + off;
		} else {
			/* small pieces (a head, chunk framing) go out in
			 * one record; a retry after want-write gathers the
			 * same bytes again, or more */
			size_t o = off;

			fill = 0;
			for (j = i; j < n && fill < TLS_WRITE_CHUNK; j++) {
				size_t k = iov[j].iov_len - o;

				if (k > TLS_WRITE_CHUNK - fill)
					k = TLS_WRITE_CHUNK - fill;
				memcpy(tls_wbuf + fill,
				       (const char *)iov[j].iov_base + o, k);
				fill += k;
				o = 0;
			}
			p = tls_wbuf;
			len = fill;
		}
		w = tls_write_some(t, tc, p, len);
		if (w < 0)
			return done ? (ssize_t)done : w;
		done += (size_t)w;
		/* advance over w bytes */
		while (w > 0 && i < n) {
			size_t k = iov[i].iov_len - off;

			if ((size_t)w < k) {
				off += (size_t)w;
				w = 0;
			} else {
				w -= (ssize_t)k;
				i++;
				off = 0;
			}
		}
	}
	return (ssize_t)done;
}

static int tls_shutdown(struct transport *t)
{
	struct tls_conn *tc = t->ctx;
	int r;

	if (!tc->fatal && !tc->shut) {
		ERR_clear_error();
		errno = 0;
		r = SSL_shutdown(tc->ssl);
		if (r < 0) {
			ssize_t rc = tls_failed(t, tc, r);

			if (rc == -EAGAIN)
				return -EAGAIN;
		}
		tc->shut = true;
	}
	if (shutdown(t->fd, SHUT_WR) == 0 || errno == ENOTCONN)
		return 0;
	return -errno;
}

static size_t tls_pending(const struct transport *t)
{
	const struct tls_conn *tc = t->ctx;
	size_t n = (size_t)SSL_pending(tc->ssl);

	if (tc->deferred || tc->retry || SSL_has_pending(tc->ssl))
		n++;
	return n;
}

static void tls_close(struct transport *t)
{
	struct tls_conn *tc = t->ctx;

	if (tc) {
		/* a close_notify if it can go at once (never waits) */
		if (!tc->fatal && !tc->shut && SSL_is_init_finished(tc->ssl)) {
			ERR_clear_error();
			SSL_shutdown(tc->ssl);
			ERR_clear_error();
		}
		SSL_free(tc->ssl);
		free(tc);
	}
	if (t->fd >= 0)
		close(t->fd);
}

/* A client's handshake (tls_transport_client's): the server's end of
 * the stream in the middle of it is a failure. */
static int tls_handshake(struct transport *t)
{
	struct tls_conn *tc = t->ctx;
	ssize_t rc;
	int r;

	if (SSL_is_init_finished(tc->ssl))
		return 0;
	ERR_clear_error();
	errno = 0;
	r = SSL_do_handshake(tc->ssl);
	if (r == 1)
		return 0;
	rc = tls_failed(t, tc, r);
	if (rc == 0) {
		tc->fatal = true;
		return -ECONNRESET;
	}
	return (int)rc;
}

/* One table for both ends: only a client's connect runs the handshake
 * op (a server's handshake is done before its transport is made). */
static const struct transport_ops transport_tls_ops = {
    .name = "tls",
    .read = tls_read,
    .writev = tls_writev,
    .shutdown = tls_shutdown,
    .pending = tls_pending,
    .close = tls_close,
    .handshake = tls_handshake,
};

static bool tls_ops_is(const struct transport *t)
{
	return t->ops == &transport_tls_ops;
}

bool tls_transport_info(const struct transport *t, const char **version,
			const char **cipher, bool *resumed)
{
	const struct tls_conn *tc;

	if (!tls_ops_is(t))
		return false;
	tc = t->ctx;
	*version = SSL_get_version(tc->ssl);
	*cipher = SSL_get_cipher_name(tc->ssl);
	*resumed = SSL_session_reused(tc->ssl) == 1;
	return true;
}

int tls_transport_client(struct transport *t, SSL *ssl, int fd)
{
	struct tls_conn *tc = calloc(1, sizeof(*tc));

	if (!tc || tls_sock_attach(ssl, fd)) {
		free(tc);
		SSL_free(ssl);
		ERR_clear_error();
		close(fd);
		return -ENOMEM;
	}
	SSL_set_connect_state(ssl);
	tc->ssl = ssl;
	t->ops = &transport_tls_ops;
	t->ctx = tc;
	t->fd = fd;
	t->want = 0;
	t->drained = 0;
	return 0;
}

SSL *tls_transport_ssl(const struct transport *t)
{
	return tls_ops_is(t) ? ((struct tls_conn *)t->ctx)->ssl : NULL;
}

bool tls_transport_failure(const struct transport *t, char *buf, size_t len)
{
	const struct tls_conn *tc;
	long v;

	if (!tls_ops_is(t))
		return false;
	tc = t->ctx;
	/* a verification fails the handshake, and only where it is asked */
	v = (SSL_get_verify_mode(tc->ssl) & SSL_VERIFY_PEER) &&
		    !SSL_is_init_finished(tc->ssl) &&
		    (tc->err || SSL_get0_peer_certificate(tc->ssl))
		? SSL_get_verify_result(tc->ssl)
		: X509_V_OK;
	if (v != X509_V_OK) {
		snprintf(buf, len, "certificate verify failed: %s",
			 X509_verify_cert_error_string(v));
		return true;
	}
	if (tc->err) {
		char e[160];

		ERR_error_string_n(tc->err, e, sizeof(e));
		snprintf(buf, len, "%s%s",
			 SSL_is_init_finished(tc->ssl) ? "" : "handshake: ",
			 ERR_reason_error_string(tc->err)
			     ? ERR_reason_error_string(tc->err)
			     : e);
		return true;
	}
	if (!SSL_is_init_finished(tc->ssl) && tc->fatal) {
		snprintf(buf, len, "handshake: the connection ended");
		return true;
	}
	return false;
}

bool tls_transport_h2(const struct transport *t)
{
	const struct tls_conn *tc;
	const unsigned char *p;
	unsigned int n;

	if (!tls_ops_is(t))
		return false;
	tc = t->ctx;
	SSL_get0_alpn_selected(tc->ssl, &p, &n);
	return n == 2 && memcmp(p, "h2", 2) == 0;
}

bool tls_transport_acme(const struct transport *t)
{
	const unsigned char *p;
	struct tls_conn *tc;
	unsigned n;

	if (!tls_ops_is(t))
		return false;
	tc = t->ctx;
	SSL_get0_alpn_selected(tc->ssl, &p, &n);
	return n == 10 && memcmp(p, "acme-tls/1", 10) == 0;
}

/* ---- the handshake --------------------------------------------------------
 */

struct tls_hs {
	struct event_base *base;
	struct event *io, *tmo;
	short what; /* the readiness io waits for */
	SSL *ssl;
	int fd;
	struct tls_store *st;
	bool hello; /* a ClientHello was parsed */
	tls_hs_done_fn done;
	void *arg;
};

void tls_hs_hello_seen(SSL *ssl)
{
	struct tls_hs *hs = SSL_get_app_data(ssl);

	if (hs)
		hs->hello = true;
}

static void tls_hs_release(struct tls_hs *hs)
{
	if (hs->io)
		event_free(hs->io);
	if (hs->tmo)
		event_free(hs->tmo);
	tls_store_put(hs->st);
	free(hs);
}

/* The handshake failed for reason f: close, count, tell. */
static void tls_hs_fail(struct tls_hs *hs, enum tls_failure f)
{
	tls_hs_done_fn done = hs->done;
	void *arg = hs->arg;

	SSL_free(hs->ssl);
	ERR_clear_error();
	close(hs->fd);
	tls_count_failure(f);
	tls_hs_release(hs);
	done(-EPROTO, NULL, arg);
}

/* Why a handshake whose SSL call failed with e failed. */
static enum tls_failure tls_hs_reason(const struct tls_hs *hs, int e)
{
	unsigned long err = ERR_peek_error();
	int reason = ERR_GET_REASON(err);

	if (e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN) {
		return TLS_FAIL_CLOSED;
	}
	if (!hs->hello)
		return TLS_FAIL_NOT_TLS;
	switch (reason) {
	case SSL_R_NO_SHARED_CIPHER:
	case SSL_R_UNSUPPORTED_PROTOCOL:
	case SSL_R_VERSION_TOO_LOW:
	case SSL_R_NO_PROTOCOLS_AVAILABLE:
	case SSL_R_NO_SHARED_SIGNATURE_ALGORITHMS:
	case SSL_R_NO_SUITABLE_SIGNATURE_ALGORITHM:
	case SSL_R_NO_SHARED_GROUPS:
	case SSL_R_WRONG_VERSION_NUMBER:
		return TLS_FAIL_PROTOCOL;
	default:
		return TLS_FAIL_OTHER;
	}
}

static void tls_hs_io_cb(evutil_socket_t fd, short what, void *arg);

static void tls_hs_step(struct tls_hs *hs)
{
	struct transport t;
	struct tls_conn *tc;
	tls_hs_done_fn done;
	void *arg;
	short want;
	int r, e;

	ERR_clear_error();
	errno = 0;
	r = SSL_do_handshake(hs->ssl);
	if (r != 1) {
		e = SSL_get_error(hs->ssl, r);
		if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
			tls_hs_fail(hs, tls_hs_reason(hs, e));
			return;
		}
		want = e == SSL_ERROR_WANT_READ ? EV_READ : EV_WRITE;
		if (want != hs->what) {
			event_del(hs->io);
			event_assign(hs->io, hs->base, hs->fd,
				     (short)(want | EV_PERSIST), tls_hs_io_cb,
				     hs);
			hs->what = want;
			if (event_add(hs->io, NULL))
				tls_hs_fail(hs, TLS_FAIL_OTHER);
		}
		return;
	}
	tc = calloc(1, sizeof(*tc));
	if (!tc) {
		tls_hs_fail(hs, TLS_FAIL_OTHER);
		return;
	}
	tc->ssl = hs->ssl;
	SSL_set_app_data(hs->ssl, NULL);
	tls_sock_hold_arm(hs->ssl, hs->base);
	tls_count_handshake(SSL_session_reused(hs->ssl) == 1);
	t.ops = &transport_tls_ops;
	t.ctx = tc;
	t.fd = hs->fd;
	t.want = 0;
	t.drained = 0;
	done = hs->done;
	arg = hs->arg;
	tls_hs_release(hs);
	done(0, &t, arg);
}

static void tls_hs_io_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	tls_hs_step(arg);
}

static void tls_hs_tmo_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	tls_hs_fail(arg, TLS_FAIL_TIMEOUT);
}

int tls_hs_start(struct event_base *base, struct tls_store *s, int fd,
		 const struct timeval *timeout, tls_hs_done_fn done, void *arg,
		 struct tls_hs **out)
{
	struct tls_hs *hs = calloc(1, sizeof(*hs));

	if (!hs)
		goto fail;
	hs->base = base;
	hs->fd = fd;
	hs->done = done;
	hs->arg = arg;
	hs->what = EV_READ;
	hs->st = tls_store_ref(s);
	hs->ssl = tls_store_ssl(s);
	hs->io = event_new(base, fd, EV_READ | EV_PERSIST, tls_hs_io_cb, hs);
	hs->tmo = evtimer_new(base, tls_hs_tmo_cb, hs);
	if (!hs->ssl || !hs->io || !hs->tmo || tls_sock_attach(hs->ssl, fd))
		goto fail;
	SSL_set_app_data(hs->ssl, hs);
	SSL_set_accept_state(hs->ssl);
	if (event_add(hs->io, NULL) || evtimer_add(hs->tmo, timeout))
		goto fail;
	*out = hs;
	return 0;
fail:
	if (hs) {
		SSL_free(hs->ssl);
		tls_hs_release(hs);
	}
	ERR_clear_error();
	close(fd);
	tls_count_failure(TLS_FAIL_OTHER);
	return -ENOMEM;
}

void tls_hs_abort(struct tls_hs *hs)
{
	if (!hs)
		return;
	SSL_free(hs->ssl);
	ERR_clear_error();
	close(hs->fd);
	tls_hs_release(hs);
}
