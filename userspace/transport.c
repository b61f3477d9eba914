// SPDX-License-Identifier: BSD-2-Clause
/*
 * transport.c - plain TCP under a sockio (transport.h): recv, send or
 * sendmsg, shutdown(SHUT_WR); nothing is ever pending inside it.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport.h"

static ssize_t tcp_read(struct transport *t, void *buf, size_t len)
{
	ssize_t n;

	do
		n = recv(t->fd, buf, len, 0);
	while (n < 0 && errno == EINTR);
	if (n >= 0)
		return n;
	if (errno == EAGAIN || errno == EWOULDBLOCK) {
		t->want = TRANSPORT_WANT_READ;
		return -EAGAIN;
	}
	return -errno;
}

static ssize_t tcp_writev(struct transport *t, const struct iovec *iov, int n)
{
	struct msghdr msg;
	ssize_t w;

	do {
		if (n == 1) {
			w = send(t->fd, iov[0].iov_base, iov[0].iov_len,
				 MSG_NOSIGNAL);
		} else {
			memset(&msg, 0, sizeof(msg));
			msg.msg_iov = (struct iovec *)(uintptr_t)iov;
			msg.msg_iovlen = (size_t)n;
			w = sendmsg(t->fd, &msg, MSG_NOSIGNAL);
		}
	} while (w < 0 && errno == EINTR);
	if (w >= 0)
		return w;
	if (errno == EAGAIN || errno == EWOULDBLOCK) {
		t->want = TRANSPORT_WANT_WRITE;
		return -EAGAIN;
	}
	return -errno;
}

static int tcp_shutdown(struct transport *t)
{
	if (shutdown(t->fd, SHUT_WR) == 0 || errno == ENOTCONN)
		return 0;
	return -errno;
}

static size_t tcp_pending(const struct transport *t)
{
	(void)t;
	return 0;
}

static void tcp_close(struct transport *t)
{
	if (t->fd >= 0)
		close(t->fd);
}

static const struct transport_ops transport_tcp_ops = {
    .name = "tcp",
    .plain = 1,
    .read = tcp_read,
    .writev = tcp_writev,
    .shutdown = tcp_shutdown,
    .pending = tcp_pending,
    .close = tcp_close,
};

/* The same calls on a Unix stream socket: named apart, so that nothing
 * hands it to the sockmap (a TCP socket's, splice.h). */
static const struct transport_ops transport_unix_ops = {
    .name = "unix",
    .plain = 1,
    .read = tcp_read,
    .writev = tcp_writev,
    .shutdown = tcp_shutdown,
    .pending = tcp_pending,
    .close = tcp_close,
};

void transport_tcp(struct transport *t, int fd)
{
	t->ops = &transport_tcp_ops;
	t->ctx = NULL;
	t->fd = fd;
	t->want = 0;
	t->drained = 0;
}

void transport_unix(struct transport *t, int fd)
{
	transport_tcp(t, fd);
	t->ops = &transport_unix_ops;
}

void transport_close(struct transport *t)
{
	if (!t->ops)
		return;
	t->ops->close(t);
	t->ops = NULL;
	t->ctx = NULL;
	t->fd = -1;
	t->want = 0;
	t->drained = 0;
}
