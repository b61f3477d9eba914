// SPDX-License-Identifier: BSD-2-Clause
/*
 * churn_client.c - many short tunnels through edged, one after another,
 * each classified by how it ended (tests/integration/test_edged_churn.sh,
 * docs/testing.md, "Churn"); tests/tools/churn_backend.c is its backend.
 *
 *   churn_client --port PORT [--mode upgrade|tcp] [--host HOST]
 *                [--rate N | --inflight K] [--seconds S] [--count N]
 *                [--bytes N] [--timeout-ms MS] [--close shut|close]
 *                [--sources N] [--failures FILE]
 *
 * Each tunnel connects to 127.0.0.1:PORT (non-blocking, one epoll loop);
 * --mode upgrade (the default) sends "GET /churn HTTP/1.1" with Host HOST
 * (churn.test), "Connection: Upgrade" and "Upgrade: raw-test" and waits
 * for the 101; --mode tcp (a TCP route) starts at once. Then it sends
 * --bytes (default 4096, at most 65536) bytes of a pattern of its own and
 * reads the echo, every byte checked; then, --close shut (the default),
 * it shuts its write side down and reads to the EOF, or, --close close,
 * it closes as soon as the whole echo is in.
 *
 * --rate N opens N tunnels a second (open loop; at most --inflight, default
 * 8192, in flight at once: past that the starts fall behind and the
 * achieved rate says so); without --rate, --inflight K (default 64) are
 * kept in flight (closed loop: as fast as edged goes). Tunnels are started
 * for --seconds (default 5) or until --count have started; then the ones
 * in flight are waited for, each for at most --timeout-ms (default 10000)
 * from its start.
 *
 * Prints one JSON line: mode, target_rate (0: closed loop), started,
 * seconds (of starting), rate (started a second), ok, failed, outcomes
 * (every outcome seen, by name: below), http (each answer that was not a
 * 101, "STATUS REASON" with the JSON error's "error", e.g. "503
 * connection_limit"), slow_connects (connects that took 900 ms or more:
 * a SYN the kernel dropped is sent again after 1 s), ms_p50, ms_p99,
 * ms_max (of the ok tunnels, start to end) and first (the first few
 * failures, with their tunnel number and errno). Outcomes:
 *   ok                        every byte back, in order, then the EOF
 *   connect_refused           ECONNREFUSED
 *   connect_reset             ECONNRESET while connecting
 *   connect_addrnotavail      EADDRNOTAVAIL (no local port free)
 *   connect_error             another connect error
 *   socket_error              socket() failed (EMFILE ...)
 *   http                      an answer other than the 101 (see "http")
 *   reset_before_101, eof_before_101, bad_head
 *   reset_before_first_byte   after the 101 (tcp: after the connect)
 *   eof_before_first_byte     (tcp: a TCP route's refusal, documented as
 *                             closed without a byte)
 *   reset_after_first_byte, eof_early
 *   bad_bytes, extra_bytes    a byte that differs; more than was sent
 *   io_error                  a read or send failed otherwise
 *   timeout_connect, timeout_head, timeout_data
 * --sources N connects from N source addresses, 127.0.0.2 up, in turn
 * (each has the whole ephemeral port range towards edged: edged's own
 * connects to its upstream, from one address, run out of ports first).
 * --failures FILE writes a line per tunnel that was not ok: its number,
 * outcome, local port (to find it in a capture), start (ms after the
 * first), duration, bytes sent and echoed back, HTTP status, errno.
 * Exit 0 when every tunnel was ok, 1 when any was not, 2 on bad
 * arguments.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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

#define X_OUTCOMES(X)                                                          \
	X(OK, "ok")                                                            \
	X(CONNECT_REFUSED, "connect_refused")                                  \
	X(CONNECT_RESET, "connect_reset")                                      \
	X(CONNECT_ADDRNOTAVAIL, "connect_addrnotavail")                        \
	X(CONNECT_ERROR, "connect_error")                                      \
	X(SOCKET_ERROR, "socket_error")                                        \
	X(HTTP, "http")                                                        \
	X(RESET_BEFORE_101, "reset_before_101")                                \
	X(EOF_BEFORE_101, "eof_before_101")                                    \
	X(BAD_HEAD, "bad_head")                                                \
	X(RESET_BEFORE_FIRST, "reset_before_first_byte")                       \
	X(EOF_BEFORE_FIRST, "eof_before_first_byte")                           \
	X(RESET_AFTER_FIRST, "reset_after_first_byte")                         \
	X(EOF_EARLY, "eof_early")                                              \
	X(BAD_BYTES, "bad_bytes")                                              \
	X(EXTRA_BYTES, "extra_bytes")                                          \
	X(IO_ERROR, "io_error")                                                \
	X(TIMEOUT_CONNECT, "timeout_connect")                                  \
	X(TIMEOUT_HEAD, "timeout_head")                                        \
	X(TIMEOUT_DATA, "timeout_data")

enum outcome {
#define X_ENUM(id, name) O_##id,
	X_OUTCOMES(X_ENUM)
#undef X_ENUM
	    O_MAX
};

static const char *const outcome_names[O_MAX] = {
#define X_NAME(id, name) [O_##id] = name,
    X_OUTCOMES(X_NAME)
#undef X_NAME
};

enum phase { P_CONNECT, P_HEAD, P_BODY, P_DATA };

#define HEAD_MAX 4096
#define PATTERN_LEN (128 * 1024)
#define BYTES_MAX 65536
#define FIRST_MAX 8
#define HTTP_KINDS 32
#define SLOW_CONNECT_NS (900 * 1000000ull)

struct tun {
	struct tun *prev, *next; /* in order of start: deadlines in order */
	uint64_t id, start_ns;
	int fd;
	enum phase ph;
	bool shut;	       /* our write side shut down */
	bool want_out;	       /* EPOLLOUT in the interest set */
	size_t sent, got, pat; /* data sent, echo checked, pattern offset */
	int status;	       /* a non-101 answer's */
	size_t body_len, hlen, body_want;
	char head[HEAD_MAX];
};

static struct {
	uint16_t port;
	bool tcp;
	const char *host;
	uint64_t rate, inflight, count, bytes, timeout_ms, sources;
	double seconds;
	bool close_early;
} opt = {.host = "churn.test",
	 .inflight = 0,
	 .bytes = 4096,
	 .timeout_ms = 10000,
	 .seconds = 5};

static unsigned char pattern[PATTERN_LEN];
static char request[512];
static size_t request_len;
static int epfd;
static struct tun *oldest, *newest;
static uint64_t open_now, started, finished, slow_connects;
static uint64_t counts[O_MAX];
static struct {
	char what[64];
	uint64_t n;
} http[HTTP_KINDS];
static char first[FIRST_MAX][160];
static unsigned nfirst;
static uint32_t *lat_us;
static FILE *failures; /* --failures */
static uint64_t t0_ns;
static size_t nlat, caplat;

static void usage(void)
{
	fprintf(stderr,
		"usage: churn_client --port PORT [--mode upgrade|tcp] "
		"[--host HOST] [--rate N | --inflight K] [--seconds S] "
		"[--count N] [--bytes N] [--timeout-ms MS] "
		"[--close shut|close] [--sources N] [--failures FILE]\n");
	exit(2);
}

static void set_out(struct tun *t, bool on)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = t};

	if (t->want_out == on)
		return;
	t->want_out = on;
	if (on)
		ev.events |= EPOLLOUT;
	epoll_ctl(epfd, EPOLL_CTL_MOD, t->fd, &ev);
}

static void http_count(const char *what)
{
	int i;

	for (i = 0; i < HTTP_KINDS; i++) {
		if (!http[i].n) {
			snprintf(http[i].what, sizeof(http[i].what), "%s",
				 what);
			http[i].n = 1;
			return;
		}
		if (strcmp(http[i].what, what) == 0) {
			http[i].n++;
			return;
		}
	}
}

/* One line in --failures: the tunnel, its outcome, its local port (to
 * find it in a capture), when, what had moved, the errno. */
static void tun_log_failure(struct tun *t, enum outcome o, int e, uint64_t now)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	unsigned port = 0;

	if (t->fd >= 0 && getsockname(t->fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	fprintf(failures,
		"#%llu %s port=%u start_ms=%llu ms=%llu sent=%zu back=%zu "
		"status=%d errno=%d\n",
		(unsigned long long)t->id, outcome_names[o], port,
		(unsigned long long)((t->start_ns - t0_ns) / 1000000),
		(unsigned long long)((now - t->start_ns) / 1000000), t->sent,
		t->got, t->status, e);
}

/* End t with outcome o (e: the errno that said so, or 0). */
static void tun_end(struct tun *t, enum outcome o, int e)
{
	uint64_t now = bench_now_ns();

	counts[o]++;
	if (o == O_OK) {
		if (nlat == caplat) {
			size_t c = caplat ? caplat * 2 : 4096;
			uint32_t *n = realloc(lat_us, c * sizeof(*n));

			if (n) {
				lat_us = n;
				caplat = c;
			}
		}
		if (nlat < caplat)
			lat_us[nlat++] = (uint32_t)((now - t->start_ns) / 1000);
	} else {
		if (nfirst < FIRST_MAX)
			snprintf(
			    first[nfirst++], sizeof(first[0]),
			    "#%llu %s after %llu ms, %zu sent, %zu "
			    "back%s%s",
			    (unsigned long long)t->id, outcome_names[o],
			    (unsigned long long)((now - t->start_ns) / 1000000),
			    t->sent, t->got, e ? ": " : "",
			    e ? strerror(e) : "");
		if (failures)
			tun_log_failure(t, o, e, now);
	}
	if (t->fd >= 0) {
		epoll_ctl(epfd, EPOLL_CTL_DEL, t->fd, NULL);
		close(t->fd);
	}
	if (t->prev)
		t->prev->next = t->next;
	else
		oldest = t->next;
	if (t->next)
		t->next->prev = t->prev;
	else
		newest = t->prev;
	free(t);
	open_now--;
	finished++;
}

static bool is_reset(int e)
{
	return e == ECONNRESET || e == EPIPE || e == ECONNABORTED;
}

/* A read or send on t failed with e (0: EOF): end it by its phase. */
static void tun_fail(struct tun *t, int e)
{
	enum outcome o;

	if (e && !is_reset(e))
		o = O_IO_ERROR;
	else if (t->ph == P_HEAD || t->ph == P_BODY)
		o = e ? O_RESET_BEFORE_101 : O_EOF_BEFORE_101;
	else if (!t->got)
		o = e ? O_RESET_BEFORE_FIRST : O_EOF_BEFORE_FIRST;
	else
		o = e ? O_RESET_AFTER_FIRST : O_EOF_EARLY;
	tun_end(t, o, e);
}

/* Send what is due: the request head's rest is sent whole at connect;
 * data, then the shutdown. false when t ended. */
static bool tun_send(struct tun *t)
{
	while (t->ph == P_DATA && t->sent < opt.bytes) {
		ssize_t n = send(t->fd, pattern + t->pat + t->sent,
				 opt.bytes - t->sent, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR) {
				set_out(t, true);
				return true;
			}
			tun_fail(t, errno);
			return false;
		}
		t->sent += (size_t)n;
	}
	if (t->ph == P_DATA && !opt.close_early && !t->shut) {
		if (shutdown(t->fd, SHUT_WR) < 0) {
			tun_fail(t, errno);
			return false;
		}
		t->shut = true;
	}
	set_out(t, false);
	return true;
}

/* Check n echoed bytes at p. false when t ended. */
static bool tun_echo(struct tun *t, const unsigned char *p, size_t n)
{
	if (t->got + n > opt.bytes) {
		tun_end(t, O_EXTRA_BYTES, 0);
		return false;
	}
	if (memcmp(p, pattern + t->pat + t->got, n) != 0) {
		tun_end(t, O_BAD_BYTES, 0);
		return false;
	}
	t->got += n;
	if (t->got == opt.bytes && opt.close_early) {
		tun_end(t, O_OK, 0);
		return false;
	}
	return true;
}

/* The non-101 answer is whole (or ended): count it. */
static void tun_http_done(struct tun *t)
{
	char what[64], reason[40] = "";
	const char *b = memmem(t->head, t->hlen, "\r\n\r\n", 4);
	const char *k;

	if (b) {
		b += 4;
		k = memmem(b, t->hlen - (size_t)(b - t->head), "\"error\":\"",
			   9);
		if (k) {
			size_t i = 0;

			k += 9;
			while (k + i < t->head + t->hlen && k[i] != '"' &&
			       i < sizeof(reason) - 1) {
				reason[i] = k[i];
				i++;
			}
			reason[i] = 0;
		}
	}
	snprintf(what, sizeof(what), "%d%s%s", t->status, *reason ? " " : "",
		 reason);
	http_count(what);
	tun_end(t, O_HTTP, 0);
}

/* The response head is whole at t->head[0..end). false when t ended. */
static bool tun_head(struct tun *t, size_t end)
{
	const char *p = t->head, *stop = t->head + end;
	int st;

	if (end < 12 || strncmp(t->head, "HTTP/1.", 7) != 0 ||
	    sscanf(t->head + 9, "%3d", &st) != 1) {
		tun_end(t, O_BAD_HEAD, 0);
		return false;
	}
	if (st == 101) {
		size_t rest = t->hlen - end;

		t->ph = P_DATA;
		if (rest && !tun_echo(t, (unsigned char *)t->head + end, rest))
			return false;
		return tun_send(t);
	}
	t->status = st;
	t->ph = P_BODY;
	t->body_want = 0;
	while (p < stop) {
		const char *nl = memchr(p, '\n', (size_t)(stop - p));

		if (!nl)
			break;
		if ((size_t)(nl - p) > 15 &&
		    strncasecmp(p, "content-length:", 15) == 0)
			t->body_want = strtoul(p + 15, NULL, 10);
		p = nl + 1;
	}
	t->body_len = end;
	if (t->hlen - end >= t->body_want) {
		tun_http_done(t);
		return false;
	}
	return true;
}

static void tun_read(struct tun *t)
{
	unsigned char buf[65536];

	for (;;) {
		ssize_t n;

		if (t->ph == P_HEAD || t->ph == P_BODY) {
			char *e;

			if (t->hlen == HEAD_MAX) {
				tun_end(t, O_BAD_HEAD, 0);
				return;
			}
			n = recv(t->fd, t->head + t->hlen, HEAD_MAX - t->hlen,
				 0);
			if (n <= 0)
				goto fail;
			t->hlen += (size_t)n;
			if (t->ph == P_BODY) {
				if (t->hlen - t->body_len >= t->body_want) {
					tun_http_done(t);
					return;
				}
				continue;
			}
			e = memmem(t->head, t->hlen, "\r\n\r\n", 4);
			if (e && !tun_head(t, (size_t)(e + 4 - t->head)))
				return;
			continue;
		}
		n = recv(t->fd, buf, sizeof(buf), 0);
		if (n <= 0)
			goto fail;
		if (!tun_echo(t, buf, (size_t)n))
			return;
		continue;
	fail:
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n == 0 && t->ph == P_BODY) {
			tun_http_done(t); /* closed after its answer */
			return;
		}
		if (n == 0 && t->ph == P_DATA && t->got == opt.bytes) {
			tun_end(t, O_OK, 0);
			return;
		}
		tun_fail(t, n < 0 ? errno : 0);
		return;
	}
}

static void tun_connected(struct tun *t)
{
	int e = 0;
	socklen_t len = sizeof(e);

	if (getsockopt(t->fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
		e = errno;
	if (e) {
		tun_end(t,
			e == ECONNREFUSED    ? O_CONNECT_REFUSED
			: e == ECONNRESET    ? O_CONNECT_RESET
			: e == EADDRNOTAVAIL ? O_CONNECT_ADDRNOTAVAIL
					     : O_CONNECT_ERROR,
			e);
		return;
	}
	if (bench_now_ns() - t->start_ns >= SLOW_CONNECT_NS)
		slow_connects++;
	if (opt.tcp) {
		t->ph = P_DATA;
		tun_send(t);
		return;
	}
	t->ph = P_HEAD;
	/* a head this small always fits an empty socket's buffer */
	if (send(t->fd, request, request_len, MSG_NOSIGNAL) !=
	    (ssize_t)request_len) {
		tun_fail(t, errno);
		return;
	}
	set_out(t, false);
}

static void tun_start(void)
{
	static const struct sockaddr_in a0 = {.sin_family = AF_INET,
					      .sin_addr.s_addr = 0};
	struct sockaddr_in a = a0;
	struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP};
	struct tun *t = calloc(1, sizeof(*t));
	int e;

	if (!t) {
		perror("churn_client: calloc");
		exit(1);
	}
	t->id = started++;
	t->start_ns = bench_now_ns();
	t->pat = (size_t)((t->id * 4099) % (PATTERN_LEN - BYTES_MAX));
	t->want_out = true;
	t->prev = newest;
	if (newest)
		newest->next = t;
	else
		oldest = t;
	newest = t;
	open_now++;
	t->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (t->fd < 0) {
		tun_end(t, O_SOCKET_ERROR, errno);
		return;
	}
	if (opt.sources) {
		/* from 127.0.0.2 up: each source address has the whole
		 * ephemeral range to itself towards edged */
		struct sockaddr_in src = {
		    .sin_family = AF_INET,
		    .sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1 +
					     (uint32_t)(t->id % opt.sources))};
		int one = 1;

		setsockopt(t->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one,
			   sizeof(one));
		if (bind(t->fd, (struct sockaddr *)&src, sizeof(src)) < 0) {
			tun_end(t, O_SOCKET_ERROR, errno);
			return;
		}
	}
	a.sin_port = htons(opt.port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ev.data.ptr = t;
	if (connect(t->fd, (struct sockaddr *)&a, sizeof(a)) < 0 &&
	    errno != EINPROGRESS) {
		e = errno;
		tun_end(t,
			e == ECONNREFUSED    ? O_CONNECT_REFUSED
			: e == EADDRNOTAVAIL ? O_CONNECT_ADDRNOTAVAIL
					     : O_CONNECT_ERROR,
			e);
		return;
	}
	epoll_ctl(epfd, EPOLL_CTL_ADD, t->fd, &ev);
}

static void on_event(struct tun *t, uint32_t evs)
{
	if (t->ph == P_CONNECT) {
		if (!(evs & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			return;
		tun_connected(t);
		return; /* level-triggered: what else is due comes again */
	}
	if (evs & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
		tun_read(t);
		return;
	}
	if (evs & EPOLLOUT)
		tun_send(t);
}

static void expire(uint64_t now)
{
	uint64_t to = opt.timeout_ms * 1000000ull;

	while (oldest && now - oldest->start_ns >= to) {
		struct tun *t = oldest;

		tun_end(t,
			t->ph == P_CONNECT ? O_TIMEOUT_CONNECT
			: t->ph == P_DATA  ? O_TIMEOUT_DATA
					   : O_TIMEOUT_HEAD,
			0);
	}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void print_json(double secs)
{
	uint64_t failed = finished - counts[O_OK];
	double p50 = 0, p99 = 0, mx = 0;
	unsigned i;
	int k;

	if (nlat) {
		qsort(lat_us, nlat, sizeof(*lat_us), cmp_u32);
		p50 = lat_us[nlat / 2] / 1000.0;
		p99 = lat_us[(nlat * 99) / 100] / 1000.0;
		mx = lat_us[nlat - 1] / 1000.0;
	}
	printf("{\"mode\":\"%s\",\"target_rate\":%llu,\"started\":%llu,"
	       "\"seconds\":%.3f,\"rate\":%.1f,\"ok\":%llu,\"failed\":%llu,"
	       "\"outcomes\":{",
	       opt.tcp ? "tcp" : "upgrade", (unsigned long long)opt.rate,
	       (unsigned long long)started, secs,
	       secs > 0 ? (double)started / secs : 0.0,
	       (unsigned long long)counts[O_OK], (unsigned long long)failed);
	for (k = 0, i = 0; i < O_MAX; i++)
		if (counts[i])
			printf("%s\"%s\":%llu", k++ ? "," : "",
			       outcome_names[i], (unsigned long long)counts[i]);
	printf("},\"http\":{");
	for (i = 0; i < HTTP_KINDS && http[i].n; i++)
		printf("%s\"%s\":%llu", i ? "," : "", http[i].what,
		       (unsigned long long)http[i].n);
	printf("},\"slow_connects\":%llu,\"ms_p50\":%.2f,\"ms_p99\":%.2f,"
	       "\"ms_max\":%.2f,\"first\":[",
	       (unsigned long long)slow_connects, p50, p99, mx);
	for (i = 0; i < nfirst; i++)
		printf("%s\"%s\"", i ? "," : "", first[i]);
	printf("]}\n");
}

static void parse_args(int argc, char **argv)
{
	uint64_t port = 0;
	int i;

	for (i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int rc = 0;

		if (!v)
			usage();
		i++;
		if (strcmp(o, "--port") == 0)
			rc = bench_parse_u64(v, 1, 65535, &port);
		else if (strcmp(o, "--mode") == 0) {
			if (strcmp(v, "tcp") == 0)
				opt.tcp = true;
			else if (strcmp(v, "upgrade") != 0)
				rc = -EINVAL;
		} else if (strcmp(o, "--host") == 0) {
			if (strlen(v) > 255 || strpbrk(v, "\r\n"))
				rc = -EINVAL;
			opt.host = v;
		} else if (strcmp(o, "--rate") == 0)
			rc = bench_parse_u64(v, 1, 1000000, &opt.rate);
		else if (strcmp(o, "--inflight") == 0)
			rc = bench_parse_u64(v, 1, 1000000, &opt.inflight);
		else if (strcmp(o, "--sources") == 0)
			rc = bench_parse_u64(v, 1, 250, &opt.sources);
		else if (strcmp(o, "--count") == 0)
			rc = bench_parse_u64(v, 1, UINT64_MAX, &opt.count);
		else if (strcmp(o, "--bytes") == 0)
			rc = bench_parse_u64(v, 1, BYTES_MAX, &opt.bytes);
		else if (strcmp(o, "--timeout-ms") == 0)
			rc = bench_parse_u64(v, 1, 3600000, &opt.timeout_ms);
		else if (strcmp(o, "--seconds") == 0)
			rc = bench_parse_seconds(v, 86400, &opt.seconds);
		else if (strcmp(o, "--failures") == 0) {
			failures = fopen(v, "w");
			if (!failures) {
				fprintf(stderr, "churn_client: %s: %s\n", v,
					strerror(errno));
				exit(2);
			}
		} else if (strcmp(o, "--close") == 0) {
			if (strcmp(v, "close") == 0)
				opt.close_early = true;
			else if (strcmp(v, "shut") != 0)
				rc = -EINVAL;
		} else
			usage();
		if (rc) {
			fprintf(stderr, "churn_client: bad %s: %s\n", o, v);
			exit(2);
		}
	}
	if (!port)
		usage();
	opt.port = (uint16_t)port;
	if (!opt.inflight)
		opt.inflight = opt.rate ? 8192 : 64;
}

int main(int argc, char **argv)
{
	struct epoll_event evs[256];
	uint64_t t0, end_ns, stop_ns = 0, seed = 0x9e3779b97f4a7c15ull;
	struct rlimit rl;
	double secs;
	size_t i;

	parse_args(argc, argv);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
	    opt.inflight + 64 > rl.rlim_cur)
		opt.inflight = rl.rlim_cur > 128 ? rl.rlim_cur - 64 : 64;
	for (i = 0; i < PATTERN_LEN; i++) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		pattern[i] = (unsigned char)(seed >> 24);
	}
	request_len = (size_t)snprintf(request, sizeof(request),
				       "GET /churn HTTP/1.1\r\nHost: %s\r\n"
				       "Connection: Upgrade\r\n"
				       "Upgrade: raw-test\r\n\r\n",
				       opt.host);
	bench_catch_stop();
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0) {
		perror("churn_client: epoll_create1");
		return 1;
	}
	t0 = t0_ns = bench_now_ns();
	end_ns = t0 + (uint64_t)(opt.seconds * 1e9);
	for (;;) {
		uint64_t now = bench_now_ns();
		bool starting = !bench_stop && now < end_ns &&
				(!opt.count || started < opt.count);
		int wait_ms = 100, n, k;

		if (!starting && !stop_ns)
			stop_ns = now;
		if (starting) {
			uint64_t due =
			    opt.rate
				? (now - t0) * opt.rate / BENCH_NSEC_PER_SEC + 1
				: UINT64_MAX;
			unsigned burst = 0;

			if (opt.count && due > opt.count)
				due = opt.count;
			while (started < due && open_now < opt.inflight &&
			       burst++ < 256)
				tun_start();
			if (opt.rate && started >= due) {
				uint64_t next = t0 + started *
							 BENCH_NSEC_PER_SEC /
							 opt.rate;

				wait_ms = next > now
					      ? (int)((next - now) / 1000000)
					      : 0;
			} else
				wait_ms = open_now < opt.inflight ? 0 : 100;
		} else {
			if (!open_now)
				break;
			if (now >=
			    end_ns + (opt.timeout_ms + 1000) * 1000000ull)
				break; /* cannot happen: expire() ends them */
		}
		if (oldest) {
			uint64_t dl =
			    oldest->start_ns + opt.timeout_ms * 1000000ull;
			int ms = dl > now ? (int)((dl - now) / 1000000) + 1 : 0;

			if (ms < wait_ms)
				wait_ms = ms;
		}
		n = epoll_wait(epfd, evs, 256, wait_ms);
		for (k = 0; k < n; k++)
			on_event(evs[k].data.ptr, evs[k].events);
		expire(bench_now_ns());
	}
	secs = (double)(stop_ns - t0) / 1e9;
	print_json(secs);
	if (failures)
		fclose(failures);
	return counts[O_OK] == finished ? 0 : 1;
}
