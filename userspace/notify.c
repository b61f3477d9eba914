/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * notify.c - sd_notify's datagrams to $NOTIFY_SOCKET (notify.h), written
 * here rather than linked from libsystemd: one socket, one send.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "notify.h"

static int notify_fd = -1;

int notify_init(void)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa;
	socklen_t len;
	size_t n;
	int fd, rc;

	if (!path || !path[0])
		return 0;
	n = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || n >= sizeof(sa.sun_path)) {
		unsetenv("NOTIFY_SOCKET");
		return -EINVAL;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, n);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
			  (path[0] == '/'));
	unsetenv("NOTIFY_SOCKET");
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, len)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	notify_close();
	notify_fd = fd;
	return 0;
}

int notify_send(const char *state)
{
	ssize_t n;

	if (notify_fd < 0)
		return 0;
	n = send(notify_fd, state, strlen(state), MSG_NOSIGNAL);
	if (n < 0)
		return -errno;
	return 0;
}

void notify_close(void)
{
	if (notify_fd >= 0)
		close(notify_fd);
	notify_fd = -1;
}
