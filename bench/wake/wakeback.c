// SPDX-License-Identifier: BSD-2-Clause
/*
 * wakeback - the backend bench/wake's wake command starts.
 *
 *   wakeback PORT STAMPFILE
 *
 * Right after listen() on 127.0.0.1:PORT (backlog 4096) it appends
 * "listen NS" (CLOCK_REALTIME nanoseconds) to STAMPFILE, and at the
 * first request "first_request NS", so that the bench can tell the time
 * from the port opening to the first request reaching the backend (the
 * proxy's part: noticing the port, forwarding) from the time to the
 * response at the client. HTTP/1.1 keep-alive, one thread, epoll: every
 * request (a head ending in an empty line; bodies are not expected) gets
 * 200 "ok\n"; "Connection: close" in a request closes after the answer.
 * Runs until killed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../common.h"

#define WB_BUF 8192
#define WB_EVENTS 256

static const char wb_resp[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
			      "Content-Length: 3\r\n\r\nok\n";

struct wb_conn {
	int fd;
	size_t len;
	char buf[WB_BUF];
};

static const char *wb_stamp_path;

static void wb_stamp(const char *what)
{
	struct timespec ts;
	FILE *f;

	clock_gettime(CLOCK_REALTIME, &ts);
	f = fopen(wb_stamp_path, "a");
	if (!f)
		return;
	fprintf(f, "%s %llu\n", what,
		(unsigned long long)ts.tv_sec * BENCH_NSEC_PER_SEC +
		    (unsigned long long)ts.tv_nsec);
	fclose(f);
}

static void wb_close(struct wb_conn *c)
{
	close(c->fd);
	free(c);
}

/* Answer every complete request in c's buffer: 0, or -1 to close. */
static int wb_serve(struct wb_conn *c)
{
	static bool first = true;
	char *end;

	while ((end = memmem(c->buf, c->len, "\r\n\r\n", 4))) {
		size_t head = (size_t)(end - c->buf) + 4;
		bool close_it;

		if (first) {
			first = false;
			wb_stamp("first_request");
		}
		c->buf[head - 1] = '\0';
		close_it = strcasestr(c->buf, "\r\nconnection: close") != NULL;
		/* a small answer to a socket that reads: a short write is
		 * an error here */
		if (write(c->fd, wb_resp, sizeof(wb_resp) - 1) !=
			(ssize_t)(sizeof(wb_resp) - 1) ||
		    close_it)
			return -1;
		memmove(c->buf, c->buf + head, c->len - head);
		c->len -= head;
	}
	return c->len == sizeof(c->buf) ? -1 : 0;
}

int main(int argc, char **argv)
{
	struct epoll_event ev, evs[WB_EVENTS];
	struct sockaddr_in a = {.sin_family = AF_INET};
	uint64_t port;
	int lfd, ep, one = 1, n, i;

	if (argc != 3 || bench_parse_u64(argv[1], 1, 65535, &port)) {
		fprintf(stderr, "usage: wakeback PORT STAMPFILE\n");
		return 2;
	}
	wb_stamp_path = argv[2];
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ep = epoll_create1(EPOLL_CLOEXEC);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ep < 0 || lfd < 0 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("wakeback");
		return 1;
	}
	ev.events = EPOLLIN;
	ev.data.ptr = NULL;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0 ||
	    listen(lfd, 4096) < 0) {
		perror("wakeback");
		return 1;
	}
	wb_stamp("listen");
	for (;;) {
		n = epoll_wait(ep, evs, WB_EVENTS, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			perror("wakeback: epoll_wait");
			return 1;
		}
		for (i = 0; i < n; i++) {
			struct wb_conn *c = evs[i].data.ptr;
			ssize_t got;

			if (!c) {
				int fd;

				while ((fd = accept4(lfd, NULL, NULL,
						     SOCK_NONBLOCK |
							 SOCK_CLOEXEC)) >= 0) {
					c = calloc(1, sizeof(*c));
					if (!c) {
						close(fd);
						continue;
					}
					c->fd = fd;
					ev.events = EPOLLIN;
					ev.data.ptr = c;
					if (epoll_ctl(ep, EPOLL_CTL_ADD, fd,
						      &ev) < 0)
						wb_close(c);
				}
				continue;
			}
			got = read(c->fd, c->buf + c->len,
				   sizeof(c->buf) - c->len);
			if (got < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (got <= 0) {
				wb_close(c);
				continue;
			}
			c->len += (size_t)got;
			if (wb_serve(c) < 0)
				wb_close(c);
		}
	}
}
