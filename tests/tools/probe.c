// SPDX-License-Identifier: BSD-2-Clause
/*
 * probe.c - the client half of the namespace tests, in C so that the many
 * probes of a test start in a millisecond even in a VM under emulation
 * (tests/tools/netprobe.py serves).
 *
 *   probe tcp SRC DST PORT          connect from SRC, send, print the answer
 *   probe udp SRC DST PORT          the same over UDP
 *   probe hold SRC DST PORT FLAG    TCP: one exchange, wait for file FLAG,
 *                                   exchange again; prints "first ok" then
 *                                   "second ok" or "second blocked"
 *
 * Exit 0 when answered, 1 when not (within PROBE_TIMEOUT_MS, default 1000),
 * 2 on bad arguments.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int timeout_ms = 1000;

static int addr_parse(const char *s, int port, struct sockaddr_storage *ss,
		      socklen_t *len)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, s, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		*len = sizeof(*a4);
		return 0;
	}
	if (inet_pton(AF_INET6, s, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*a6);
		return 0;
	}
	return -1;
}

/* Wait for fd to become readable (or writable); 0 when it did. */
static int wait_fd(int fd, short events)
{
	struct pollfd p = {.fd = fd, .events = events};
	int n = poll(&p, 1, timeout_ms);

	return n == 1 ? 0 : -1;
}

static int exchange(int fd, const char *msg, char *buf, size_t len)
{
	ssize_t n;

	if (send(fd, msg, strlen(msg), MSG_NOSIGNAL) < 0)
		return -1;
	if (wait_fd(fd, POLLIN))
		return -1;
	n = recv(fd, buf, len - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

static int sock_open(int type, const char *src, const char *dst, int port)
{
	struct sockaddr_storage s, d;
	socklen_t sl, dl;
	int fd, err = 0;
	socklen_t el = sizeof(err);

	if (addr_parse(src, 0, &s, &sl) || addr_parse(dst, port, &d, &dl) ||
	    s.ss_family != d.ss_family) {
		fprintf(stderr, "probe: bad address pair %s -> %s\n", src, dst);
		exit(2);
	}
	fd = socket(d.ss_family, type | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&s, sl)) {
		perror("probe: socket/bind");
		exit(2);
	}
	if (connect(fd, (struct sockaddr *)&d, dl) && errno != EINPROGRESS)
		goto fail;
	if (type == SOCK_STREAM &&
	    (wait_fd(fd, POLLOUT) ||
	     getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) || err))
		goto fail;
	return fd;
fail:
	close(fd);
	return -1;
}

int main(int argc, char **argv)
{
	char buf[256];
	int fd, port;

	if (getenv("PROBE_TIMEOUT_MS"))
		timeout_ms = atoi(getenv("PROBE_TIMEOUT_MS"));
	if (argc < 5 || (port = atoi(argv[4])) <= 0 || port > 65535) {
		fprintf(stderr,
			"usage: probe tcp|udp|hold SRC DST PORT [FLAG]\n");
		return 2;
	}
	if (strcmp(argv[1], "tcp") == 0 || strcmp(argv[1], "udp") == 0) {
		int type = argv[1][0] == 't' ? SOCK_STREAM : SOCK_DGRAM;

		fd = sock_open(type, argv[2], argv[3], port);
		if (fd < 0 || exchange(fd, "hi\n", buf, sizeof(buf))) {
			printf("fail\n");
			if (fd >= 0)
				close(fd);
			return 1;
		}
		fputs(buf, stdout);
		close(fd);
		return 0;
	}
	if (strcmp(argv[1], "hold") == 0 && argc == 6) {
		struct timespec ts = {0, 50 * 1000 * 1000};
		struct stat sb;
		int waited;

		fd = sock_open(SOCK_STREAM, argv[2], argv[3], port);
		if (fd < 0 || exchange(fd, "one\n", buf, sizeof(buf))) {
			printf("first fail\n");
			return 1;
		}
		printf("first ok\n");
		fflush(stdout);
		for (waited = 0; stat(argv[5], &sb) != 0; waited += 50) {
			if (waited > 30000) {
				printf("flag never came\n");
				return 1;
			}
			nanosleep(&ts, NULL);
		}
		printf(exchange(fd, "two\n", buf, sizeof(buf))
			   ? "second blocked\n"
			   : "second ok\n");
		close(fd);
		return 0;
	}
	fprintf(stderr, "usage: probe tcp|udp|hold SRC DST PORT [FLAG]\n");
	return 2;
}
