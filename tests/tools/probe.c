// SPDX-License-Identifier: BSD-2-Clause
/*
 * probe.c - the client half of the namespace tests, in C so that the many
 * probes of a test start in a millisecond even in a VM under emulation
 * (tests/tools/netprobe.py serves).
 *
 *   probe tcp SRC DST PORT          connect from SRC, send, print the answer
 *   probe udp SRC DST PORT          the same over UDP
 *   probe quic SRC DST PORT         the same with a datagram that starts
 *                                   a QUIC v1 Initial (1200 bytes)
 *   probe hold SRC DST PORT FLAG    TCP: one exchange, wait for file FLAG,
 *                                   exchange again; prints "first ok" then
 *                                   "second ok" or "second blocked"
 *   probe stream tcp|udp SRC DST PORT MS
 *                                   probe without pause for MS ms and count:
 *                                   tcp, one connection after another (each
 *                                   an exchange, PROBE_TIMEOUT_MS at most),
 *                                   prints "tries=N ok=N fail=N"; udp, one
 *                                   datagram a millisecond and the answers
 *                                   read as they come (and for
 *                                   PROBE_TIMEOUT_MS after the last),
 *                                   prints "sent=N answered=N"
 *
 * Exit 0 when answered, 1 when not (within PROBE_TIMEOUT_MS, default 1000),
 * 2 on bad arguments; stream exits 0 whatever it counted.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
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

static int exchange_n(int fd, const void *msg, size_t mlen, char *buf,
		      size_t len)
{
	ssize_t n;

	if (send(fd, msg, mlen, MSG_NOSIGNAL) < 0)
		return -1;
	if (wait_fd(fd, POLLIN))
		return -1;
	n = recv(fd, buf, len - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

static int exchange(int fd, const char *msg, char *buf, size_t len)
{
	return exchange_n(fd, msg, strlen(msg), buf, len);
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

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int stream_tcp(const char *src, const char *dst, int port, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms, tries = 0, ok = 0;
	char buf[256];
	int fd;

	while (now_ms() < end) {
		tries++;
		fd = sock_open(SOCK_STREAM, src, dst, port);
		if (fd >= 0 && exchange(fd, "hi\n", buf, sizeof(buf)) == 0)
			ok++;
		if (fd >= 0)
			close(fd);
	}
	printf("tries=%llu ok=%llu fail=%llu\n", (unsigned long long)tries,
	       (unsigned long long)ok, (unsigned long long)(tries - ok));
	return 0;
}

static int stream_udp(const char *src, const char *dst, int port, int ms)
{
	uint64_t t = now_ms(), end = t + (uint64_t)ms, next = t;
	uint64_t sent = 0, answered = 0;
	char buf[256];
	int fd = sock_open(SOCK_DGRAM, src, dst, port);

	if (fd < 0) {
		perror("probe: udp");
		return 2;
	}
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int wait;

		t = now_ms();
		if (t >= end + (uint64_t)timeout_ms)
			break;
		if (t < end && t >= next) {
			/* ECONNREFUSED and the like are answers of a kind
			 * too, but none is expected here: count what is sent */
			if (send(fd, "hi\n", 3, MSG_NOSIGNAL) == 3)
				sent++;
			next = t + 1;
		}
		wait = t < end ? (int)(next > t ? next - t : 0)
			       : (int)(end + (uint64_t)timeout_ms - t);
		if (poll(&p, 1, wait) == 1) {
			while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
				answered++;
		}
	}
	close(fd);
	printf("sent=%llu answered=%llu\n", (unsigned long long)sent,
	       (unsigned long long)answered);
	return 0;
}

int main(int argc, char **argv)
{
	char buf[256];
	int fd, port;

	if (getenv("PROBE_TIMEOUT_MS"))
		timeout_ms = atoi(getenv("PROBE_TIMEOUT_MS"));
	if (argc == 7 && strcmp(argv[1], "stream") == 0) {
		int ms = atoi(argv[6]);

		port = atoi(argv[5]);
		if (port <= 0 || port > 65535 || ms <= 0)
			goto usage;
		if (strcmp(argv[2], "tcp") == 0)
			return stream_tcp(argv[3], argv[4], port, ms);
		if (strcmp(argv[2], "udp") == 0)
			return stream_udp(argv[3], argv[4], port, ms);
		goto usage;
	}
	if (argc < 5 || (port = atoi(argv[4])) <= 0 || port > 65535)
		goto usage;
	if (strcmp(argv[1], "tcp") == 0 || strcmp(argv[1], "udp") == 0 ||
	    strcmp(argv[1], "quic") == 0) {
		int type = argv[1][0] == 't' ? SOCK_STREAM : SOCK_DGRAM;
		/* a long header, version 1, type Initial; padded as a
		 * client's must be */
		static unsigned char initial[1200] = {0xc3, 0, 0, 0, 1, 8};

		fd = sock_open(type, argv[2], argv[3], port);
		if (fd < 0 || (argv[1][0] == 'q'
				   ? exchange_n(fd, initial, sizeof(initial),
						buf, sizeof(buf))
				   : exchange(fd, "hi\n", buf, sizeof(buf)))) {
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
usage:
	fprintf(stderr, "usage: probe tcp|udp|quic|hold SRC DST PORT [FLAG]\n"
			"       probe stream tcp|udp SRC DST PORT MS\n");
	return 2;
}
