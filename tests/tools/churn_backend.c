// SPDX-License-Identifier: BSD-2-Clause
/*
 * churn_backend.c - the backend of the churn tests and measurements
 * (tests/tools/churn_client.c, tests/integration/test_edged_churn.sh): one
 * epoll loop, no python in the path.
 *
 *   churn_backend [--upgrade PORT] [--echo PORT] [--backlog N]
 *                 [--accept-rate N] [--reset]
 *
 * Listens on 127.0.0.1 (SO_REUSEADDR, a listen backlog of N, default 4096:
 * the kernel caps it at net.core.somaxconn). On the --upgrade port each
 * connection sends an HTTP/1.1 request head (at most 8 KiB): one with
 * "Upgrade: raw-test" is answered "101 Switching Protocols" and every
 * byte after its head is echoed; any other gets a 400 and is closed once
 * its head is read. On the --echo port every byte is echoed from the
 * first. A peer's EOF is answered, once the echo is out, by closing the
 * socket (its receive queue is empty then: no reset). Reading stops while
 * 256 KiB wait to be echoed. --accept-rate N accepts at most N
 * connections a second (a backend slower than its callers: the rest wait
 * in the listen backlog, and past it the kernel drops their SYNs or
 * answers them with SYN cookies). --reset resets every connection (a
 * close with SO_LINGER 0) as soon as it has read its first bytes past
 * the head (the --upgrade port's 101 is sent first): a backend that
 * fails mid-stream.
 *
 * Raises RLIMIT_NOFILE to its hard limit. On SIGTERM or SIGINT prints one
 * JSON line of counts and exits 0: accepted, upgraded, bad_head, closed
 * (after the peer's EOF), reset (ECONNRESET/EPIPE seen: the peer reset),
 * other_error, bytes (echoed), open (still open at exit), accept_errors,
 * reset_sent (--reset).
 * SIGUSR1 prints the same line and goes on. Exit 2 on bad arguments, 1
 * when it cannot listen.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../bench/common.h"

#define HEAD_MAX 8192
#define HOLD_MAX (256 * 1024)
#define READ_CHUNK 65536

static const char RESP_101[] = "HTTP/1.1 101 Switching Protocols\r\n"
			       "Connection: Upgrade\r\n"
			       "Upgrade: raw-test\r\n\r\n";
static const char RESP_400[] = "HTTP/1.1 400 Bad Request\r\n"
			       "Content-Length: 0\r\nConnection: close\r\n\r\n";

enum bconn_state { B_HEAD, B_ECHO, B_BAD };

struct bconn {
	int fd;
	enum bconn_state st;
	bool eof;     /* the peer's EOF read */
	bool reading; /* EPOLLIN wanted */
	bool writing; /* EPOLLOUT wanted */
	char *buf;    /* bytes to send back: [off, len) */
	size_t off, len, cap;
	char head[HEAD_MAX];
	size_t hlen;
};

static struct {
	unsigned long long accepted, upgraded, bad_head, closed, reset,
	    other_error, bytes, open, accept_errors, reset_sent;
} cnt;
static bool reset_mode; /* --reset */

static volatile sig_atomic_t want_report;
static int epfd;
/* --accept-rate: the listeners, and whether each is watched */
static uint64_t accept_rate, t0_ns, accept_base; /* tokens taken */
static int lfds[2];
static bool lupgrade[2], lon[2];
static int nlis;

static void on_usr1(int sig)
{
	(void)sig;
	want_report = 1;
}

static void report(void)
{
	printf("{\"accepted\":%llu,\"upgraded\":%llu,\"bad_head\":%llu,"
	       "\"closed\":%llu,\"reset\":%llu,\"other_error\":%llu,"
	       "\"bytes\":%llu,\"open\":%llu,\"accept_errors\":%llu,"
	       "\"reset_sent\":%llu}\n",
	       cnt.accepted, cnt.upgraded, cnt.bad_head, cnt.closed, cnt.reset,
	       cnt.other_error, cnt.bytes, cnt.open, cnt.accept_errors,
	       cnt.reset_sent);
	fflush(stdout);
}

static void usage(void)
{
	fprintf(stderr, "usage: churn_backend [--upgrade PORT] [--echo PORT] "
			"[--backlog N] [--accept-rate N] [--reset]\n");
	exit(2);
}

static int listen_on(uint16_t port, int backlog, bool upgrade)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct epoll_event ev = {.events = EPOLLIN};
	int one = 1, fd;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, backlog)) {
		fprintf(stderr, "churn_backend: listen 127.0.0.1:%u: %s\n",
			port, strerror(errno));
		exit(1);
	}
	/* a listener's data is a tagged small integer, a connection's a
	 * pointer (aligned: bit 0 clear) */
	ev.data.u64 = ((uint64_t)fd << 2) | (upgrade ? 3 : 1);
	lfds[nlis] = fd;
	lupgrade[nlis] = upgrade;
	lon[nlis++] = true;
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)) {
		perror("churn_backend: epoll_ctl");
		exit(1);
	}
	return fd;
}

static void bconn_close(struct bconn *c)
{
	epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->buf);
	free(c);
	cnt.open--;
}

static void bconn_events(struct bconn *c)
{
	struct epoll_event ev = {.data.ptr = c};
	bool r = !c->eof && c->len - c->off < HOLD_MAX;
	bool w = c->off < c->len;

	if (r == c->reading && w == c->writing)
		return;
	c->reading = r;
	c->writing = w;
	ev.events = (r ? EPOLLIN : 0) | (w ? EPOLLOUT : 0);
	epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Queue n bytes to send back; 0, or -1 out of memory. */
static int bconn_queue(struct bconn *c, const void *p, size_t n)
{
	if (c->off == c->len)
		c->off = c->len = 0;
	if (c->len + n > c->cap) {
		size_t cap = c->cap ? c->cap : 16384;
		char *nb;

		while (cap < c->len + n)
			cap *= 2;
		nb = realloc(c->buf, cap);
		if (!nb)
			return -1;
		c->buf = nb;
		c->cap = cap;
	}
	memcpy(c->buf + c->len, p, n);
	c->len += n;
	return 0;
}

/* --reset: send what is queued (the 101), then reset c. */
static void bconn_reset(struct bconn *c)
{
	struct linger lg = {.l_onoff = 1, .l_linger = 0};

	if (c->off < c->len)
		(void)!send(c->fd, c->buf + c->off, c->len - c->off,
			    MSG_NOSIGNAL);
	setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	cnt.reset_sent++;
	bconn_close(c);
}

static void bconn_error(struct bconn *c, int e)
{
	if (e == ECONNRESET || e == EPIPE)
		cnt.reset++;
	else
		cnt.other_error++;
	bconn_close(c);
}

/* Send what is queued; then, EOF read and all sent, close. Returns false
 * when c was closed. */
static bool bconn_flush(struct bconn *c)
{
	while (c->off < c->len) {
		ssize_t n =
		    send(c->fd, c->buf + c->off, c->len - c->off, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			bconn_error(c, errno);
			return false;
		}
		c->off += (size_t)n;
	}
	if (c->off == c->len && (c->eof || c->st == B_BAD)) {
		if (c->st == B_BAD)
			cnt.bad_head++;
		else
			cnt.closed++;
		bconn_close(c);
		return false;
	}
	bconn_events(c);
	return true;
}

/* A request head is whole in c->head[0..end): answer it. */
static void bconn_head(struct bconn *c, size_t end)
{
	const char *p = c->head, *stop = c->head + end;
	bool up = false;

	while (p < stop) {
		const char *nl = memchr(p, '\n', (size_t)(stop - p));
		size_t l;

		if (!nl)
			break;
		l = (size_t)(nl - p);
		if (l >= 8 && strncasecmp(p, "upgrade:", 8) == 0) {
			const char *v = p + 8;

			while (v < nl && (*v == ' ' || *v == '\t'))
				v++;
			if ((size_t)(nl - v) >= 8 &&
			    strncasecmp(v, "raw-test", 8) == 0)
				up = true;
		}
		p = nl + 1;
	}
	if (!up) {
		c->st = B_BAD;
		bconn_queue(c, RESP_400, sizeof(RESP_400) - 1);
		return;
	}
	c->st = B_ECHO;
	cnt.upgraded++;
	bconn_queue(c, RESP_101, sizeof(RESP_101) - 1);
	if (c->hlen > end) {
		bconn_queue(c, c->head + end, c->hlen - end);
		cnt.bytes += c->hlen - end;
	}
}

static void bconn_read(struct bconn *c)
{
	static char buf[READ_CHUNK];

	while (!c->eof && c->len - c->off < HOLD_MAX) {
		ssize_t n;

		if (c->st == B_HEAD) {
			char *e;

			n = recv(c->fd, c->head + c->hlen, HEAD_MAX - c->hlen,
				 0);
			if (n > 0) {
				c->hlen += (size_t)n;
				e = memmem(c->head, c->hlen, "\r\n\r\n", 4);
				if (e)
					bconn_head(c,
						   (size_t)(e + 4 - c->head));
				if (e && reset_mode && c->st == B_ECHO &&
				    c->hlen > (size_t)(e + 4 - c->head)) {
					bconn_reset(c);
					return;
				} else if (c->hlen == HEAD_MAX) {
					c->st = B_BAD;
					bconn_queue(c, RESP_400,
						    sizeof(RESP_400) - 1);
				}
				if (c->st == B_BAD)
					break;
				continue;
			}
		} else if (c->st == B_ECHO) {
			n = recv(c->fd, buf, sizeof(buf), 0);
			if (n > 0 && reset_mode) {
				bconn_reset(c);
				return;
			}
			if (n > 0) {
				if (bconn_queue(c, buf, (size_t)n)) {
					bconn_error(c, ENOMEM);
					return;
				}
				cnt.bytes += (size_t)n;
				continue;
			}
		} else
			break;
		if (n == 0) {
			c->eof = true;
			break;
		}
		if (errno == EAGAIN || errno == EINTR)
			break;
		bconn_error(c, errno);
		return;
	}
	bconn_flush(c);
}

/* With --accept-rate: how many may be accepted now (a token bucket of
 * a tenth of a second's worth, at least 1, so an idle start is no
 * burst). */
static uint64_t accept_budget(void)
{
	uint64_t burst = accept_rate / 10 + 1, due, floor;

	if (!accept_rate)
		return UINT64_MAX;
	due = (bench_now_ns() - t0_ns) * accept_rate / BENCH_NSEC_PER_SEC + 1;
	floor = due > burst ? due - burst : 0;
	if (accept_base < floor)
		accept_base = floor; /* tokens not taken in time are lost */
	return due > accept_base ? due - accept_base : 0;
}

/* Watch listener i (or stop): a listener out of budget is not watched
 * until the next token. */
static void listener_watch(int i, bool on)
{
	struct epoll_event ev = {.events = on ? EPOLLIN : 0,
				 .data.u64 = ((uint64_t)lfds[i] << 2) |
					     (lupgrade[i] ? 3 : 1)};

	if (lon[i] == on)
		return;
	lon[i] = on;
	epoll_ctl(epfd, EPOLL_CTL_MOD, lfds[i], &ev);
}

static void do_accept(int lfd, bool upgrade)
{
	uint64_t budget = accept_budget();
	int i;

	for (i = 0; i < 64 && budget; i++, budget--) {
		struct epoll_event ev;
		struct bconn *c;
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR &&
			    errno != ECONNABORTED)
				cnt.accept_errors++;
			return;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			cnt.accept_errors++;
			continue;
		}
		c->fd = fd;
		c->st = upgrade ? B_HEAD : B_ECHO;
		c->reading = true;
		ev.events = EPOLLIN;
		ev.data.ptr = c;
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)) {
			close(fd);
			free(c);
			cnt.accept_errors++;
			continue;
		}
		cnt.accepted++;
		cnt.open++;
		accept_base++;
	}
}

int main(int argc, char **argv)
{
	uint64_t up_port = 0, echo_port = 0, backlog = 4096;
	struct sigaction sa = {.sa_handler = on_usr1};
	struct epoll_event evs[256];
	struct rlimit rl;
	int i;

	for (i = 1; i < argc; i++) {
		uint64_t *dst;

		if (strcmp(argv[i], "--reset") == 0) {
			reset_mode = true;
			continue;
		}
		if (strcmp(argv[i], "--upgrade") == 0)
			dst = &up_port;
		else if (strcmp(argv[i], "--echo") == 0)
			dst = &echo_port;
		else if (strcmp(argv[i], "--backlog") == 0)
			dst = &backlog;
		else if (strcmp(argv[i], "--accept-rate") == 0)
			dst = &accept_rate;
		else
			usage();
		if (i + 1 >= argc ||
		    bench_parse_u64(argv[++i], 1,
				    dst == &backlog || dst == &accept_rate
					? 1000000
					: 65535,
				    dst))
			usage();
	}
	if (!up_port && !echo_port)
		usage();
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	bench_catch_stop();
	sigaction(SIGUSR1, &sa, NULL);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0) {
		perror("churn_backend: epoll_create1");
		return 1;
	}
	if (up_port)
		listen_on((uint16_t)up_port, (int)backlog, true);
	if (echo_port)
		listen_on((uint16_t)echo_port, (int)backlog, false);
	t0_ns = bench_now_ns();
	while (!bench_stop) {
		int k, wait_ms = -1, n;

		if (accept_rate) {
			bool budget = accept_budget() > 0;

			for (k = 0; k < nlis; k++)
				listener_watch(k, budget);
			if (!budget)
				wait_ms = (int)(1000 / accept_rate) + 1;
		}
		n = epoll_wait(epfd, evs, 256, wait_ms);

		if (want_report) {
			want_report = 0;
			report();
		}
		for (i = 0; i < n; i++) {
			uint64_t d = evs[i].data.u64;
			struct bconn *c;

			if (d & 1) {
				do_accept((int)(d >> 2), (d & 2) != 0);
				continue;
			}
			c = evs[i].data.ptr;
			if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
				bconn_read(c); /* reads, then flushes */
				continue;
			}
			if (evs[i].events & EPOLLOUT)
				bconn_flush(c);
		}
	}
	report();
	return 0;
}
