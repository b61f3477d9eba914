/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * transport.h - the byte stream under a sockio: how one connection's bytes
 * are read, written and shut down. Plain TCP is the first implementation
 * (transport_tcp); TLS goes in beside it (its records decrypted and
 * encrypted here), so that sockio, the request and the proxy never know
 * which one they have.
 *
 * A transport is a small value (operations, the implementation's state and
 * the socket), kept inside its sockio or a parked connection and handed
 * from one to the other whole: a TLS session survives parking. Nothing
 * outside sockio.c and conn.c's parking reads or writes a transport's
 * socket; they go through these calls.
 *
 * Every call is non-blocking. A call that cannot progress returns -EAGAIN
 * and says in t->want which readiness of the socket lets it progress
 * (TRANSPORT_WANT_READ or TRANSPORT_WANT_WRITE): TLS may need to write in
 * order to read, and the other way round. transport_pending() says how
 * many bytes a read returns without the socket being readable (TLS:
 * decrypted bytes held by the library), so that a short read is taken for
 * "drained" only when nothing is pending.
 */
#ifndef EDGE_TRANSPORT_H
#define EDGE_TRANSPORT_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#define TRANSPORT_WANT_READ 0x1
#define TRANSPORT_WANT_WRITE 0x2

struct transport;

struct transport_ops {
	const char *name; /* "tcp", "unix", "tls" */
	/* Read up to len bytes into buf: >0 bytes read, 0 at the end of the
	 * stream (the peer's FIN, or TLS close_notify), -EAGAIN with
	 * t->want set, another -errno when the stream failed. */
	ssize_t (*read)(struct transport *t, void *buf, size_t len);
	/* Write from n iovecs: >0 bytes taken (maybe fewer than offered),
	 * -EAGAIN with t->want set, another -errno. Never raises SIGPIPE. */
	ssize_t (*writev)(struct transport *t, const struct iovec *iov, int n);
	/* End the write side once what was written has gone (TCP: FIN;
	 * TLS: close_notify, then FIN): 0 done, -EAGAIN (call again when
	 * t->want allows), another -errno. */
	int (*shutdown)(struct transport *t);
	/* Bytes a read returns at once, without the socket being readable. */
	size_t (*pending)(const struct transport *t);
	/* Release the implementation's state and close the socket. */
	void (*close)(struct transport *t);
	/* writev is a plain sendmsg(MSG_NOSIGNAL) on fd and nothing else:
	 * sockio may send for it through io_uring (sockio_batch_*) */
	int plain;
	/* A client's handshake, run by sockio once its connect is done and
	 * before it reports it (NULL: none, plain): 0 done, -EAGAIN with
	 * t->want, another -errno when it failed. */
	int (*handshake)(struct transport *t);
};

struct transport {
	const struct transport_ops *ops; /* NULL: no transport (closed) */
	void *ctx;			 /* the implementation's state */
	int fd;				 /* the socket, for the event loop */
	unsigned want;			 /* after -EAGAIN: TRANSPORT_WANT_* */
	/* after a read that returned bytes: it went on to the socket's
	 * EAGAIN, so the socket was found empty (TLS, which reads to it;
	 * 0 when not known) */
	unsigned char drained;
};

/* A plain TCP transport on connected (or connecting), non-blocking fd,
 * which it owns from now on. Allocates nothing. */
void transport_tcp(struct transport *t, int fd);

/* A plain transport on a Unix stream socket fd (transport_tcp's calls,
 * named "unix": never moved by the kernel's sockmap). */
void transport_unix(struct transport *t, int fd);

/* Whether t holds a stream (not closed). */
static inline int transport_open(const struct transport *t)
{
	return t->ops != NULL;
}

static inline ssize_t transport_read(struct transport *t, void *buf, size_t len)
{
	return t->ops->read(t, buf, len);
}

static inline ssize_t transport_writev(struct transport *t,
				       const struct iovec *iov, int n)
{
	return t->ops->writev(t, iov, n);
}

static inline int transport_shutdown(struct transport *t)
{
	return t->ops->shutdown(t);
}

static inline size_t transport_pending(const struct transport *t)
{
	return t->ops->pending(t);
}

/* Close t (releasing its state and its socket) and mark it closed.
 * Closing a closed transport does nothing. */
void transport_close(struct transport *t);

#endif /* EDGE_TRANSPORT_H */
