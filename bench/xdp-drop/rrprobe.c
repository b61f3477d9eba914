// SPDX-License-Identifier: BSD-2-Clause
/*
 * rrprobe - TCP request/response latency, for bench/xdp-drop.
 *
 *   rrprobe serve --bind ADDR --port N [--duration S]
 *   rrprobe client --src ADDR --dst ADDR --port N [--duration S]
 *                  [--interval-us N] [--size N] [--timeout-ms N]
 *
 * The server echoes whatever each connection sends (up to 64 connections,
 * one poll(2) loop). The client keeps one TCP connection (TCP_NODELAY),
 * sends a --size byte request every --interval-us (default 1000) and times
 * until the whole echo is back. A request that gets no full answer within
 * --timeout-ms (default 1000) counts as a timeout and the connection is
 * replaced. Both modes end by themselves after --duration seconds (default
 * 10, at most RR_MAX_SECONDS). The client prints one line:
 *
 *   rrprobe: requests=N timeouts=N errors=N p50_us=F p90_us=F p99_us=F max_us=F
 *
 * Exit 0 when the client completed at least one request, 1 otherwise, 2 on
 * a usage error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../common.h"

#define RR_MAX_SECONDS 120
#define RR_MAX_CONNS 64
#define RR_MAX_SIZE 65536
#define RR_MAX_SAMPLES 2000000

struct rr_opts {
	struct sockaddr_in src;
	struct sockaddr_in dst; /* serve: the bind address */
	bool have_src, have_dst;
	double duration;
	uint64_t interval_us;
	uint64_t size;
	uint64_t timeout_ms;
};

static void rr_usage(FILE *f)
{
	fprintf(f,
		"usage: rrprobe serve --bind ADDR --port N [--duration S]\n"
		"       rrprobe client --src ADDR --dst ADDR --port N "
		"[--duration S]\n"
		"                      [--interval-us N] [--size N] "
		"[--timeout-ms N]\n"
		"  --duration <= %d s (default 10)\n",
		RR_MAX_SECONDS);
}

static int rr_parse_args(struct rr_opts *o, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"bind", required_argument, NULL, 'd'},
	    {"src", required_argument, NULL, 's'},
	    {"dst", required_argument, NULL, 'd'},
	    {"port", required_argument, NULL, 'p'},
	    {"duration", required_argument, NULL, 't'},
	    {"interval-us", required_argument, NULL, 'i'},
	    {"size", required_argument, NULL, 'z'},
	    {"timeout-ms", required_argument, NULL, 'T'},
	    {NULL, 0, NULL, 0},
	};
	uint64_t port = 0;
	int c, idx = 0;

	o->src.sin_family = o->dst.sin_family = AF_INET;
	o->duration = 10;
	o->interval_us = 1000;
	o->size = 64;
	o->timeout_ms = 1000;
	while ((c = getopt_long(argc, argv, "", opts, &idx)) != -1) {
		switch (c) {
		case 's':
			if (inet_pton(AF_INET, optarg, &o->src.sin_addr) != 1)
				goto bad;
			o->have_src = true;
			break;
		case 'd':
			if (inet_pton(AF_INET, optarg, &o->dst.sin_addr) != 1)
				goto bad;
			o->have_dst = true;
			break;
		case 'p':
			if (bench_parse_u64(optarg, 1, 65535, &port))
				goto bad;
			o->dst.sin_port = htons((uint16_t)port);
			break;
		case 't':
			if (bench_parse_seconds(optarg, RR_MAX_SECONDS,
						&o->duration))
				goto bad;
			break;
		case 'i':
			if (bench_parse_u64(optarg, 0, 10000000,
					    &o->interval_us))
				goto bad;
			break;
		case 'z':
			if (bench_parse_u64(optarg, 1, RR_MAX_SIZE, &o->size))
				goto bad;
			break;
		case 'T':
			if (bench_parse_u64(optarg, 1, 60000, &o->timeout_ms))
				goto bad;
			break;
		default:
			rr_usage(stderr);
			return -EINVAL;
		}
	}
	if (optind != argc || !o->have_dst || !port) {
		rr_usage(stderr);
		return -EINVAL;
	}
	return 0;
bad:
	fprintf(stderr, "rrprobe: bad value for --%s: '%s'\n", opts[idx].name,
		optarg);
	return -EINVAL;
}

/* ---- server -------------------------------------------------------- */

static int rr_serve(const struct rr_opts *o)
{
	struct pollfd pfd[RR_MAX_CONNS + 1];
	char buf[RR_MAX_SIZE];
	uint64_t deadline =
	    bench_now_ns() +
	    (uint64_t)(o->duration * (double)BENCH_NSEC_PER_SEC);
	int one = 1, n = 1, i, fd;
	ssize_t r;

	pfd[0].fd = socket(AF_INET, SOCK_STREAM, 0);
	if (pfd[0].fd < 0)
		return -errno;
	setsockopt(pfd[0].fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(pfd[0].fd, (const struct sockaddr *)&o->dst, sizeof(o->dst)) <
		0 ||
	    listen(pfd[0].fd, 128) < 0) {
		fprintf(stderr, "rrprobe: listen: %s\n", strerror(errno));
		close(pfd[0].fd);
		return -errno;
	}
	pfd[0].events = POLLIN;
	printf("rrprobe: ready\n");
	fflush(stdout);
	while (!bench_stop && bench_now_ns() < deadline) {
		if (poll(pfd, (nfds_t)n, 100) <= 0)
			continue;
		if ((pfd[0].revents & POLLIN) && n <= RR_MAX_CONNS) {
			fd = accept(pfd[0].fd, NULL, NULL);
			if (fd >= 0) {
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
					   sizeof(one));
				pfd[n].fd = fd;
				pfd[n].events = POLLIN;
				pfd[n].revents = 0;
				n++;
			}
		}
		for (i = 1; i < n; i++) {
			if (!pfd[i].revents)
				continue;
			r = recv(pfd[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (r > 0 &&
			    send(pfd[i].fd, buf, (size_t)r, MSG_NOSIGNAL) == r)
				continue;
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			close(pfd[i].fd); /* EOF, error or short send */
			pfd[i--] = pfd[--n];
		}
	}
	for (i = 0; i < n; i++)
		close(pfd[i].fd);
	return 0;
}

/* ---- client -------------------------------------------------------- */

static int rr_connect(const struct rr_opts *o)
{
	int one = 1, fd;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if ((o->have_src &&
	     bind(fd, (const struct sockaddr *)&o->src, sizeof(o->src)) < 0) ||
	    (connect(fd, (const struct sockaddr *)&o->dst, sizeof(o->dst)) <
		 0 &&
	     errno != EINPROGRESS)) {
		close(fd);
		return -errno;
	}
	return fd;
}

/* Wait until fd is ready for events or the absolute deadline passes;
 * 1 ready, 0 timed out, -errno. */
static int rr_wait(int fd, short events, uint64_t until)
{
	struct pollfd p = {.fd = fd, .events = events};
	uint64_t now = bench_now_ns();
	int r;

	if (now >= until)
		return 0;
	r = poll(&p, 1, (int)((until - now + 999999) / 1000000));
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	if (r && (p.revents & (POLLERR | POLLHUP)) && !(p.revents & events))
		return -ECONNRESET;
	return r;
}

/* One request: 1 done, 0 timed out, -errno on a broken connection. */
static int rr_exchange(int fd, const char *req, char *resp, size_t size,
		       uint64_t until)
{
	size_t sent = 0, got = 0;
	ssize_t r;
	int w;

	while (sent < size) {
		r = send(fd, req + sent, size - sent, MSG_NOSIGNAL);
		if (r > 0) {
			sent += (size_t)r;
			continue;
		}
		if (r < 0 && errno != EAGAIN && errno != ENOTCONN)
			return -errno;
		w = rr_wait(fd, POLLOUT, until);
		if (w <= 0)
			return w;
	}
	while (got < size) {
		r = recv(fd, resp + got, size - got, 0);
		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		if (r == 0)
			return -ECONNRESET;
		if (errno != EAGAIN)
			return -errno;
		w = rr_wait(fd, POLLIN, until);
		if (w <= 0)
			return w;
	}
	return 1;
}

static int rr_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double rr_pct_us(const uint64_t *s, size_t n, double p)
{
	size_t i;

	if (!n)
		return 0;
	i = (size_t)(p * (double)(n - 1) + 0.5);
	return (double)s[i] / 1000.0;
}

static int rr_client(const struct rr_opts *o)
{
	static char req[RR_MAX_SIZE], resp[RR_MAX_SIZE];
	uint64_t start = bench_now_ns(), now, t0, next;
	uint64_t deadline =
	    start + (uint64_t)(o->duration * (double)BENCH_NSEC_PER_SEC);
	uint64_t timeouts = 0, errors = 0, *samples;
	size_t n = 0;
	int fd = -1, r;

	samples = calloc(RR_MAX_SAMPLES, sizeof(*samples));
	if (!samples)
		return -ENOMEM;
	memset(req, 'q', sizeof(req));
	next = start;
	while (!bench_stop && (now = bench_now_ns()) < deadline &&
	       n < RR_MAX_SAMPLES) {
		if (now < next) {
			bench_sleep_until(next);
			continue;
		}
		next = now + o->interval_us * 1000;
		if (fd < 0) {
			fd = rr_connect(o);
			if (fd < 0) {
				errors++;
				next =
				    now + 10 * 1000000ULL; /* retry in 10 ms */
				continue;
			}
		}
		t0 = bench_now_ns();
		r = rr_exchange(fd, req, resp, o->size,
				t0 + o->timeout_ms * 1000000);
		if (r == 1) {
			samples[n++] = bench_now_ns() - t0;
			continue;
		}
		if (r == 0)
			timeouts++;
		else
			errors++;
		close(fd);
		fd = -1;
	}
	if (fd >= 0)
		close(fd);
	qsort(samples, n, sizeof(*samples), rr_cmp_u64);
	printf("rrprobe: requests=%zu timeouts=%llu errors=%llu p50_us=%.1f "
	       "p90_us=%.1f "
	       "p99_us=%.1f max_us=%.1f\n",
	       n, (unsigned long long)timeouts, (unsigned long long)errors,
	       rr_pct_us(samples, n, 0.50), rr_pct_us(samples, n, 0.90),
	       rr_pct_us(samples, n, 0.99),
	       n ? (double)samples[n - 1] / 1000.0 : 0.0);
	free(samples);
	return n ? 0 : -EIO;
}

int main(int argc, char **argv)
{
	struct rr_opts o = {0};
	bool serve;

	if (argc < 2 ||
	    (strcmp(argv[1], "serve") && strcmp(argv[1], "client"))) {
		rr_usage(stderr);
		return 2;
	}
	serve = !strcmp(argv[1], "serve");
	if (rr_parse_args(&o, argc - 1, argv + 1))
		return 2;
	bench_catch_stop();
	return (serve ? rr_serve(&o) : rr_client(&o)) ? 1 : 0;
}
