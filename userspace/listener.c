// SPDX-License-Identifier: BSD-2-Clause
/*
 * listener.c - Accept: SO_REUSEPORT listening sockets, one per worker per
 * listen address, so the kernel spreads new connections over the workers
 * without a shared accept lock.
 */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "listener.h"
#include "worker.h"

struct listener {
	struct worker *w;
	int fd;
	struct event *ev;
	char text[CONFIG_ADDR_STR_MAX];
};

static void listener_accept_cb(evutil_socket_t fd, short what, void *arg)
{
	struct listener *l = arg;
	unsigned i;

	(void)what;
	for (i = 0; i < LISTENER_ACCEPT_BATCH; i++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int cfd = accept4(fd, (struct sockaddr *)&ss, &len,
				  SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				log_warn("accept on %s", l->text);
			/* EMFILE/ENFILE: the next readiness event retries */
			return;
		}
		conn_accept(l->w, cfd, (struct sockaddr *)&ss, len);
	}
}

int listener_new(struct worker *w, const struct config_addr *a,
		 struct listener **out, struct errbuf *err)
{
	struct listener *l;
	int one = 1, rc;

	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->w = w;
	memcpy(l->text, a->text, sizeof(l->text));
	l->fd = socket(a->ss.ss_family,
		       SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->fd < 0)
		goto fail_errno;
	if (setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    setsockopt(l->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)))
		goto fail_errno;
	if (a->ss.ss_family == AF_INET6 &&
	    setsockopt(l->fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)))
		goto fail_errno;
	if (bind(l->fd, (const struct sockaddr *)&a->ss, a->len) ||
	    listen(l->fd, LISTENER_BACKLOG))
		goto fail_errno;
	l->ev = event_new(w->base, l->fd, EV_READ | EV_PERSIST,
			  listener_accept_cb, l);
	if (!l->ev) {
		rc = -ENOMEM;
		errbuf_set(err, "listen %s: out of memory", a->text);
		goto fail;
	}
	*out = l;
	return 0;
fail_errno:
	rc = -errno;
	errbuf_set(err, "listen %s: %s", a->text, strerror(errno));
fail:
	listener_free(l);
	return rc;
}

int listener_enable(struct listener *l)
{
	return event_add(l->ev, NULL) ? -EINVAL : 0;
}

void listener_close(struct listener *l)
{
	if (!l)
		return;
	if (l->ev)
		event_del(l->ev);
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}

void listener_free(struct listener *l)
{
	if (!l)
		return;
	listener_close(l);
	if (l->ev)
		event_free(l->ev);
	free(l);
}
