// SPDX-License-Identifier: BSD-2-Clause
/*
 * pingpong - small-message request/response through a TCP proxy, for
 * bench/splice.
 *
 *   pingpong serve --bind ADDR --port N [--duration S]
 *   pingpong client --dst ADDR --port N [--duration S] [--conns N]
 *                   [--size N] [--pause-ms N]
 *
 * The server echoes whatever each connection sends (epoll, any number of
 * connections; a short send parks the connection until it is flushed).
 * The client opens --conns connections (default 1, TCP_NODELAY), makes one
 * exchange on each, then leaves them all quiet for --pause-ms (default
 * 200): a proxy that hands a connection pair to the kernel at its first
 * pause (edged's sockmap mover) takes them then, so that what is measured
 * is the mover under test and not the hand-over. Then, for --duration
 * seconds (default 10), each connection runs closed-loop: a --size byte
 * request (default 64), the whole echo back, the next request at once.
 * One line at the end:
 *
 *   pingpong: conns=N size=N seconds=F transactions=N errors=N tps=F
 *             p50_us=F p90_us=F p99_us=F max_us=F
 *
 * (one line).
 *
 *   pingpong stream --dst ADDR --port N --rate BITS [--duration S]
 *                   [--pause-ms N]
 *
 * One connection to an echo server (pingpong serve): sixteen 64-byte
 * exchanges (messages: a splicing proxy that watches the traffic takes
 * the pair), --pause-ms quiet, then for --duration seconds a stream of
 * 64 KiB writes paced at --rate bits per second (BITS: a number with K,
 * M or G), the echo read as it comes. One line at the end:
 *
 *   pingpong: stream rate=N seconds=F sent=N received=N up_gbps=F
 *             down_gbps=F late_ms=N errors=N
 *
 * late_ms: the milliseconds the writer was behind its pace by more than
 * one write (the proxy's or the echo's backpressure held it back).
 *
 * Latencies go into a histogram of PP_BUCKET_NS buckets up to
 * PP_MAX_NS (a longer one counts in the last bucket; max_us is exact).
 * An error (a connection reset, closed or failing) ends that connection
 * and is counted; the others go on. Exit 0 when at least one transaction
 * completed and no connection failed, 1 otherwise, 2 on a usage error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common.h"

#define PP_MAX_SECONDS 3600
#define PP_MAX_CONNS 1024
#define PP_MAX_SIZE 65536
#define PP_BUCKET_NS 100
#define PP_MAX_NS 100000000ULL /* 100 ms */
#define PP_BUCKETS (PP_MAX_NS / PP_BUCKET_NS)
#define PP_EVENTS 64

struct pp_opts {
	struct sockaddr_in addr; /* serve: bind; client: destination */
	bool have_addr;
	double duration;
	uint64_t conns;
	uint64_t size;
	uint64_t pause_ms;
	uint64_t rate; /* stream: bits per second */
};

/* One client connection: how much of the current request went out and
 * how much of its echo came back, and when it was sent. */
struct pp_conn {
	int fd;
	size_t sent, got;
	uint64_t t0;
};

/* One server connection: bytes read and not yet echoed. */
struct pp_echo {
	int fd;
	size_t len, off;
	char buf[PP_MAX_SIZE];
};

static void pp_usage(FILE *f)
{
	fprintf(f,
		"usage: pingpong serve --bind ADDR --port N [--duration S]\n"
		"       pingpong client --dst ADDR --port N [--duration S] "
		"[--conns N]\n"
		"                       [--size N] [--pause-ms N]\n"
		"       pingpong stream --dst ADDR --port N --rate BITS "
		"[--duration S]\n"
		"                       [--pause-ms N]\n"
		"  --duration <= %d s (default 10), --conns <= %d, "
		"--size <= %d\n",
		PP_MAX_SECONDS, PP_MAX_CONNS, PP_MAX_SIZE);
}

/* BITS: a number of bits per second, with K, M or G (10^3, 10^6, 10^9),
 * from 1K to 400G: 0 or -EINVAL. */
static int pp_parse_rate(const char *s, uint64_t *out)
{
	char num[32];
	size_t n = strlen(s);
	uint64_t v, mult = 1;

	if (n == 0 || n >= sizeof(num))
		return -EINVAL;
	memcpy(num, s, n + 1);
	switch (num[n - 1]) {
	case 'K':
		mult = 1000;
		break;
	case 'M':
		mult = 1000000;
		break;
	case 'G':
		mult = 1000000000;
		break;
	default:
		break;
	}
	if (mult > 1)
		num[n - 1] = 0;
	if (bench_parse_u64(num, 1, 400000000000ULL / mult, &v) ||
	    v * mult < 1000)
		return -EINVAL;
	*out = v * mult;
	return 0;
}

static int pp_parse_args(struct pp_opts *o, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"bind", required_argument, NULL, 'a'},
	    {"dst", required_argument, NULL, 'a'},
	    {"port", required_argument, NULL, 'p'},
	    {"duration", required_argument, NULL, 't'},
	    {"conns", required_argument, NULL, 'c'},
	    {"size", required_argument, NULL, 'z'},
	    {"pause-ms", required_argument, NULL, 'w'},
	    {"rate", required_argument, NULL, 'r'},
	    {NULL, 0, NULL, 0},
	};
	uint64_t port = 0;
	int c, idx = 0;

	o->addr.sin_family = AF_INET;
	o->duration = 10;
	o->conns = 1;
	o->size = 64;
	o->pause_ms = 200;
	while ((c = getopt_long(argc, argv, "", opts, &idx)) != -1) {
		switch (c) {
		case 'a':
			if (inet_pton(AF_INET, optarg, &o->addr.sin_addr) != 1)
				goto bad;
			o->have_addr = true;
			break;
		case 'p':
			if (bench_parse_u64(optarg, 1, 65535, &port))
				goto bad;
			o->addr.sin_port = htons((uint16_t)port);
			break;
		case 't':
			if (bench_parse_seconds(optarg, PP_MAX_SECONDS,
						&o->duration))
				goto bad;
			break;
		case 'c':
			if (bench_parse_u64(optarg, 1, PP_MAX_CONNS, &o->conns))
				goto bad;
			break;
		case 'z':
			if (bench_parse_u64(optarg, 1, PP_MAX_SIZE, &o->size))
				goto bad;
			break;
		case 'w':
			if (bench_parse_u64(optarg, 0, 10000, &o->pause_ms))
				goto bad;
			break;
		case 'r':
			if (pp_parse_rate(optarg, &o->rate))
				goto bad;
			break;
		default:
			pp_usage(stderr);
			return -EINVAL;
		}
	}
	if (optind != argc || !o->have_addr || !port) {
		pp_usage(stderr);
		return -EINVAL;
	}
	return 0;
bad:
	fprintf(stderr, "pingpong: bad value for --%s: '%s'\n", opts[idx].name,
		optarg);
	return -EINVAL;
}

static uint64_t pp_deadline(double seconds)
{
	return bench_now_ns() +
	       (uint64_t)(seconds * (double)BENCH_NSEC_PER_SEC);
}

/* ---- server -------------------------------------------------------- */

/* Echo what e holds and then what it reads, until its socket would
 * block: 0, or -1 when the connection is done (EOF, error). *want_out
 * says whether the socket must be watched for room to write. */
static int pp_echo_run(struct pp_echo *e, bool *want_out)
{
	ssize_t r;

	for (;;) {
		while (e->off < e->len) {
			r = send(e->fd, e->buf + e->off, e->len - e->off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
			if (r < 0 && errno == EAGAIN) {
				*want_out = true;
				return 0;
			}
			if (r <= 0)
				return -1;
			e->off += (size_t)r;
		}
		e->off = e->len = 0;
		*want_out = false;
		r = recv(e->fd, e->buf, sizeof(e->buf), MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (r <= 0)
			return -1;
		e->len = (size_t)r;
	}
}

static int pp_serve(const struct pp_opts *o)
{
	struct epoll_event ev, evs[PP_EVENTS];
	uint64_t deadline = pp_deadline(o->duration);
	int one = 1, lfd, ep, n, i, fd, ret = 0;

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ep = epoll_create1(0);
	if (lfd < 0 || ep < 0) {
		ret = -errno;
		goto out;
	}
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (const struct sockaddr *)&o->addr, sizeof(o->addr)) < 0 ||
	    listen(lfd, 1024) < 0) {
		ret = -errno;
		fprintf(stderr, "pingpong: listen: %s\n", strerror(errno));
		goto out;
	}
	ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = NULL};
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	printf("pingpong: ready\n");
	fflush(stdout);
	while (!bench_stop && bench_now_ns() < deadline) {
		n = epoll_wait(ep, evs, PP_EVENTS, 100);
		for (i = 0; i < n; i++) {
			struct pp_echo *e = evs[i].data.ptr;
			bool want_out = false;

			if (!e) {
				while ((fd = accept4(lfd, NULL, NULL,
						     SOCK_NONBLOCK)) >= 0) {
					e = calloc(1, sizeof(*e));
					if (!e) {
						close(fd);
						continue;
					}
					e->fd = fd;
					setsockopt(fd, IPPROTO_TCP, TCP_NODELAY,
						   &one, sizeof(one));
					ev = (struct epoll_event){
					    .events = EPOLLIN, .data.ptr = e};
					epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
				}
				continue;
			}
			if (pp_echo_run(e, &want_out) < 0) {
				close(e->fd); /* leaves the epoll set */
				free(e);
				continue;
			}
			ev = (struct epoll_event){.events = want_out ? EPOLLOUT
								     : EPOLLIN,
						  .data.ptr = e};
			epoll_ctl(ep, EPOLL_CTL_MOD, e->fd, &ev);
		}
	}
	/* the connections still open are the process's to close at exit */
out:
	if (lfd >= 0)
		close(lfd);
	if (ep >= 0)
		close(ep);
	return ret;
}

/* ---- client -------------------------------------------------------- */

static int pp_connect(const struct pp_opts *o)
{
	int one = 1, fd;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (const struct sockaddr *)&o->addr, sizeof(o->addr)) <
	    0) {
		close(fd);
		return -errno;
	}
	return fd;
}

/* One blocking exchange of size bytes on fd (the warm-up): 0 or -errno. */
static int pp_exchange_once(int fd, const char *req, char *resp, size_t size)
{
	size_t done = 0;
	ssize_t r;

	while (done < size) {
		r = send(fd, req + done, size - done, MSG_NOSIGNAL);
		if (r <= 0)
			return r < 0 ? -errno : -EPIPE;
		done += (size_t)r;
	}
	for (done = 0; done < size; done += (size_t)r) {
		r = recv(fd, resp + done, size - done, 0);
		if (r <= 0)
			return r < 0 ? -errno : -ECONNRESET;
	}
	return 0;
}

/* Send what is left of c's request: 0, or -1 on a broken connection. */
static int pp_send(struct pp_conn *c, const char *req, size_t size)
{
	ssize_t r;

	while (c->sent < size) {
		r = send(c->fd, req + c->sent, size - c->sent,
			 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r < 0 && errno == EAGAIN)
			return 0;
		if (r <= 0)
			return -1;
		c->sent += (size_t)r;
	}
	return 0;
}

/* The latency at fraction p of the histogram h (n samples), in µs. */
static double pp_pct_us(const uint32_t *h, uint64_t n, double p)
{
	uint64_t want = (uint64_t)(p * (double)n), seen = 0;
	size_t i;

	for (i = 0; i < PP_BUCKETS; i++) {
		seen += h[i];
		if (seen > want)
			return (double)(i * PP_BUCKET_NS + PP_BUCKET_NS / 2) /
			       1000.0;
	}
	return (double)PP_MAX_NS / 1000.0;
}

static int pp_client(const struct pp_opts *o)
{
	static char req[PP_MAX_SIZE], resp[PP_MAX_SIZE];
	struct epoll_event ev, evs[PP_EVENTS];
	uint64_t start, end, now, lat, max = 0, tx = 0, errors = 0;
	struct pp_conn *conns;
	uint32_t *hist;
	size_t size = o->size, k;
	int ep, n, i, r, ret = 0, live = 0;

	conns = calloc(o->conns, sizeof(*conns));
	hist = calloc(PP_BUCKETS, sizeof(*hist));
	ep = epoll_create1(0);
	if (!conns || !hist || ep < 0) {
		ret = -ENOMEM;
		goto out;
	}
	memset(req, 'q', sizeof(req));
	for (k = 0; k < o->conns; k++) {
		conns[k].fd = r = pp_connect(o);
		if (r >= 0)
			r = pp_exchange_once(conns[k].fd, req, resp, size);
		if (r < 0) {
			fprintf(stderr, "pingpong: connection %zu: %s\n", k,
				strerror(-r));
			ret = -EIO;
			goto out;
		}
		live++;
	}
	/* quiet, so that a splicing proxy takes every pair now */
	bench_sleep_until(bench_now_ns() + o->pause_ms * 1000000ULL);

	start = bench_now_ns();
	end = start + (uint64_t)(o->duration * (double)BENCH_NSEC_PER_SEC);
	for (k = 0; k < o->conns; k++) {
		struct pp_conn *c = &conns[k];

		ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = c};
		epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
		c->t0 = bench_now_ns();
		if (pp_send(c, req, size) < 0) {
			errors++;
			close(c->fd);
			c->fd = -1;
			live--;
		}
	}
	while (!bench_stop && live > 0 && (now = bench_now_ns()) < end) {
		n = epoll_wait(ep, evs, PP_EVENTS, 100);
		for (i = 0; i < n; i++) {
			struct pp_conn *c = evs[i].data.ptr;

			if (c->sent < size && pp_send(c, req, size) < 0)
				goto broken;
			for (;;) {
				r = (int)recv(c->fd, resp, sizeof(resp),
					      MSG_DONTWAIT);
				if (r < 0 && errno == EAGAIN)
					break;
				if (r <= 0)
					goto broken;
				c->got += (size_t)r;
			}
			if (c->got > size)
				goto broken; /* more than was sent: wrong */
			if (c->got < size)
				continue;
			now = bench_now_ns();
			lat = now - c->t0;
			hist[lat / PP_BUCKET_NS < PP_BUCKETS
				 ? lat / PP_BUCKET_NS
				 : PP_BUCKETS - 1]++;
			if (lat > max)
				max = lat;
			tx++;
			c->sent = c->got = 0;
			c->t0 = now;
			if (now < end && pp_send(c, req, size) < 0)
				goto broken;
			continue;
		broken:
			errors++;
			close(c->fd);
			c->fd = -1;
			live--;
		}
	}
	now = bench_now_ns();
	printf("pingpong: conns=%llu size=%zu seconds=%.3f transactions=%llu "
	       "errors=%llu tps=%.0f p50_us=%.1f p90_us=%.1f p99_us=%.1f "
	       "max_us=%.1f\n",
	       (unsigned long long)o->conns, size, (double)(now - start) / 1e9,
	       (unsigned long long)tx, (unsigned long long)errors,
	       (double)tx / ((double)(now - start) / 1e9),
	       pp_pct_us(hist, tx, 0.50), pp_pct_us(hist, tx, 0.90),
	       pp_pct_us(hist, tx, 0.99), (double)max / 1000.0);
	if (!tx || errors)
		ret = -EIO;
out:
	if (conns)
		for (k = 0; k < o->conns; k++)
			if (conns[k].fd > 0) /* 0: never opened */
				close(conns[k].fd);
	free(conns);
	free(hist);
	if (ep >= 0)
		close(ep);
	return ret;
}

/* ---- stream ------------------------------------------------------- */

static int pp_stream(const struct pp_opts *o)
{
	static char buf[PP_MAX_SIZE], in[1 << 18];
	uint64_t start, end, now, due, sent = 0, got = 0, late_ns = 0;
	uint64_t late_since = 0, errors = 0;
	struct epoll_event ev, evs[4];
	int fd, ep = -1, k, r, ret = 0;
	size_t off = 0;
	ssize_t w;

	memset(buf, 's', sizeof(buf));
	fd = pp_connect(o);
	for (k = 0; fd >= 0 && k < 16; k++) {
		r = pp_exchange_once(fd, buf, in, 64);
		if (r < 0) {
			close(fd);
			fd = r;
		}
	}
	if (fd < 0) {
		fprintf(stderr, "pingpong: stream: %s\n", strerror(-fd));
		return -EIO;
	}
	bench_sleep_until(bench_now_ns() + o->pause_ms * 1000000ULL);
	ep = epoll_create1(0);
	ev = (struct epoll_event){.events = EPOLLIN | EPOLLOUT | EPOLLET};
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		ret = -errno;
		goto out;
	}
	start = bench_now_ns();
	end = start + (uint64_t)(o->duration * (double)BENCH_NSEC_PER_SEC);
	while (!bench_stop && (now = bench_now_ns()) < end) {
		/* bytes due by now at the pace, whole writes */
		due = (uint64_t)((double)(now - start) * (double)o->rate / 8e9);
		while (sent + (sizeof(buf) - off) <= due + sizeof(buf)) {
			w = send(fd, buf + off, sizeof(buf) - off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
			if (w < 0 && errno == EAGAIN)
				break;
			if (w <= 0) {
				errors++;
				goto out;
			}
			sent += (uint64_t)w;
			off = (off + (size_t)w) % sizeof(buf);
		}
		if (sent + sizeof(buf) < due) {
			if (!late_since)
				late_since = now;
		} else if (late_since) {
			late_ns += now - late_since;
			late_since = 0;
		}
		for (;;) {
			w = recv(fd, in, sizeof(in), MSG_DONTWAIT);
			if (w < 0 && errno == EAGAIN)
				break;
			if (w <= 0) {
				errors++;
				goto out;
			}
			got += (uint64_t)w;
		}
		/* the next write is due in (64 KiB at the rate), at most
		 * 1 ms: wait for that, or for the echo or room */
		epoll_wait(ep, evs, 4, 1);
	}
	if (late_since)
		late_ns += bench_now_ns() - late_since;
	now = bench_now_ns();
	printf("pingpong: stream rate=%llu seconds=%.3f sent=%llu "
	       "received=%llu up_gbps=%.3f down_gbps=%.3f late_ms=%llu "
	       "errors=%llu\n",
	       (unsigned long long)o->rate, (double)(now - start) / 1e9,
	       (unsigned long long)sent, (unsigned long long)got,
	       (double)sent * 8 / (double)(now - start),
	       (double)got * 8 / (double)(now - start),
	       (unsigned long long)(late_ns / 1000000),
	       (unsigned long long)errors);
out:
	if (errors)
		ret = -EIO;
	close(fd);
	if (ep >= 0)
		close(ep);
	return ret;
}

int main(int argc, char **argv)
{
	struct pp_opts o = {0};
	int rc;

	if (argc < 2 ||
	    (strcmp(argv[1], "serve") && strcmp(argv[1], "client") &&
	     strcmp(argv[1], "stream"))) {
		pp_usage(stderr);
		return 2;
	}
	if (pp_parse_args(&o, argc - 1, argv + 1))
		return 2;
	if (!strcmp(argv[1], "stream") && !o.rate) {
		fprintf(stderr, "pingpong: stream needs --rate\n");
		return 2;
	}
	bench_catch_stop();
	if (!strcmp(argv[1], "serve"))
		rc = pp_serve(&o);
	else if (!strcmp(argv[1], "client"))
		rc = pp_client(&o);
	else
		rc = pp_stream(&o);
	return rc ? 1 : 0;
}
