/* SPDX-License-Identifier: BSD-2-Clause */
/* test_sockio.c - sockio on real loopback TCP sockets and a real libevent
 * loop: echo, data and FIN arriving together (the short-read rule must
 * not lose the EOF), data and a reset arriving together (read to EAGAIN,
 * the reset is not lost), the read watermark pausing and resuming, the
 * read timeout, connect success and refusal, large writes against a peer
 * that reads late, a large stream read in full and short reads, freeing a
 * sockio from its own callback, and release. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sockio.h"
#include "unit.h"

/* How long a case waits for something to happen before it fails. */
#define WAIT_MS 3000

/* The case runs with its sends batched through io_uring (sockio_batch_*):
 * those that send check that they went that way. */
static bool batched;

struct pair {
	struct event_base *base;
	struct sockio *s; /* the accepted side, under test */
	int peer;	  /* the connecting side, plain blocking socket */
	int lfd;
	struct sockaddr_in addr;
	/* what the callbacks saw */
	int reads, writes, events;
	short last_what;
	bool free_in_read; /* sockio_free from the read callback */
	bool echo;	   /* the read callback echoes and drains */
	bool drain;	   /* the read callback drains */
	size_t got;	   /* bytes drained by the read callback */
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int listener(struct sockaddr_in *a)
{
	socklen_t len = sizeof(*a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)a, sizeof(*a)), 0);
	ck_assert_int_eq(listen(fd, 8), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)a, &len), 0);
	return fd;
}

static void read_cb(struct sockio *s, void *arg)
{
	struct pair *t = arg;
	struct evbuffer *in = sockio_input(s);

	t->reads++;
	if (t->free_in_read) {
		sockio_free(s);
		t->s = NULL;
		return;
	}
	if (t->echo)
		evbuffer_add_buffer(sockio_output(s), in);
	if (t->drain) {
		t->got += evbuffer_get_length(in);
		evbuffer_drain(in, evbuffer_get_length(in));
	}
}

static void write_cb(struct sockio *s, void *arg)
{
	struct pair *t = arg;

	(void)s;
	t->writes++;
}

static void event_cb(struct sockio *s, short what, void *arg)
{
	struct pair *t = arg;

	(void)s;
	t->events++;
	t->last_what = what;
}

/* A sockio on plain TCP fd. */
static struct sockio *sio_new(struct event_base *base, int fd)
{
	struct transport tr;

	transport_tcp(&tr, fd);
	return sockio_new(base, &tr);
}

/* A new connection to t's listener: t->peer, and t->s on t->base. */
static void pair_connect(struct pair *t)
{
	int fd;

	t->peer = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(t->peer, 0);
	ck_assert_int_eq(
	    connect(t->peer, (struct sockaddr *)&t->addr, sizeof(t->addr)), 0);
	fd = accept4(t->lfd, NULL, NULL, SOCK_NONBLOCK);
	ck_assert_int_ge(fd, 0);
	t->s = sio_new(t->base, fd);
	ck_assert_ptr_nonnull(t->s);
	sockio_setcb(t->s, read_cb, write_cb, event_cb, t);
}

/* A pair on base (the caller's: a second sockio on one loop). */
static void pair_open_on(struct pair *t, struct event_base *base)
{
	memset(t, 0, sizeof(*t));
	t->base = base;
	t->lfd = listener(&t->addr);
	pair_connect(t);
}

static void pair_open(struct pair *t)
{
	struct event_base *base = event_base_new();

	ck_assert_ptr_nonnull(base);
	pair_open_on(t, base);
}

static void pair_close(struct pair *t)
{
	sockio_free(t->s);
	close(t->peer);
	close(t->lfd);
	event_base_free(t->base);
}

/* One turn of the loop, then the batch's sends (a worker's loop does
 * both; without a batch the flush does nothing). */
static void loop_once(struct event_base *base)
{
	event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	sockio_batch_flush();
}

/* Run the loop until *flag is non-zero (or fail after WAIT_MS). */
static void run_until(struct pair *t, const int *flag)
{
	uint64_t end = now_ms() + WAIT_MS;

	while (!*flag) {
		ck_assert_msg(now_ms() < end, "nothing happened in %d ms",
			      WAIT_MS);
		loop_once(t->base);
		usleep(1000);
	}
}

/* Run the loop for ms milliseconds. */
static void run_for(struct pair *t, uint64_t ms)
{
	uint64_t end = now_ms() + ms;

	while (now_ms() < end) {
		loop_once(t->base);
		usleep(1000);
	}
}

/* Two buffers of n bytes: *buf filled with a pattern of mul and div,
 * *back for what comes back. */
static void pattern(size_t n, unsigned mul, unsigned div, unsigned char **buf,
		    unsigned char **back)
{
	size_t i;

	*buf = malloc(n);
	*back = malloc(n);
	ck_assert_ptr_nonnull(*buf);
	ck_assert_ptr_nonnull(*back);
	for (i = 0; i < n; i++)
		(*buf)[i] = (unsigned char)(i * mul + i / div);
}

/* Read exactly n bytes from fd (blocking), or fail. */
static void peer_read(int fd, char *buf, size_t n)
{
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		struct pollfd p = {.fd = fd, .events = POLLIN};

		ck_assert_int_eq(poll(&p, 1, WAIT_MS), 1);
		r = read(fd, buf + got, n - got);
		ck_assert_int_gt(r, 0);
		got += (size_t)r;
	}
}

START_TEST(test_echo)
{
	struct pair t;
	char buf[6] = {0};

	pair_open(&t);
	t.echo = true;
	sockio_enable(t.s, EV_READ | EV_WRITE);
	ck_assert_int_eq(write(t.peer, "hello", 5), 5);
	run_until(&t, &t.writes);
	peer_read(t.peer, buf, 5);
	ck_assert_str_eq(buf, "hello");
	ck_assert_int_eq(t.reads, 1);
	ck_assert_int_eq(t.events, 0);
	/* again on the same connection: the next bytes are a new edge */
	ck_assert_int_eq(write(t.peer, "again", 5), 5);
	t.writes = 0;
	run_until(&t, &t.writes);
	peer_read(t.peer, buf, 5);
	ck_assert_str_eq(buf, "again");
	if (batched) {
		ck_assert_uint_eq(sockio_batch_sends(), 2);
		ck_assert_uint_eq(sockio_batch_reads(), 2);
	}
	pair_close(&t);
}
END_TEST

START_TEST(test_data_then_fin)
{
	struct pair t;

	pair_open(&t);
	t.drain = true;
	/* the bytes and the FIN are both there before the first poll: the
	 * short read must not be taken for "nothing more" */
	ck_assert_int_eq(write(t.peer, "abc", 3), 3);
	ck_assert_int_eq(shutdown(t.peer, SHUT_WR), 0);
	usleep(20000);
	sockio_enable(t.s, EV_READ);
	run_until(&t, &t.events);
	ck_assert_uint_eq(t.got, 3);
	ck_assert_int_eq(t.last_what, SOCKIO_READING | SOCKIO_EOF);
	ck_assert_int_eq(sockio_enabled(t.s) & EV_READ, 0);
	pair_close(&t);
}
END_TEST

START_TEST(test_data_then_reset)
{
	struct pair t;
	struct linger lg = {.l_onoff = 1, .l_linger = 0};

	pair_open(&t);
	t.drain = true;
	/* the bytes and a reset before the first poll: epoll says EPOLLHUP
	 * and EPOLLERR, which libevent gives as EV_READ | EV_WRITE without
	 * EV_CLOSED, and no edge comes after it: reading to EAGAIN, the
	 * short read of the bytes is not taken for "nothing more" */
	ck_assert_int_eq(write(t.peer, "abc", 3), 3);
	usleep(20000);
	ck_assert_int_eq(
	    setsockopt(t.peer, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	close(t.peer);
	t.peer = -1;
	usleep(20000);
	sockio_set_read_all(t.s, true);
	sockio_enable(t.s, EV_READ | EV_WRITE);
	run_until(&t, &t.events);
	ck_assert_uint_eq(t.got, 3);
	ck_assert(t.last_what & SOCKIO_READING);
	ck_assert(t.last_what & (SOCKIO_ERROR | SOCKIO_EOF));
	pair_close(&t);
}
END_TEST

START_TEST(test_watermark)
{
	struct pair t;
	struct evbuffer *in;

	pair_open(&t);
	sockio_set_watermarks(t.s, 4, 0);
	sockio_enable(t.s, EV_READ);
	in = sockio_input(t.s);
	ck_assert_int_eq(write(t.peer, "0123456789", 10), 10);
	run_until(&t, &t.reads);
	run_for(&t, 50);
	/* stopped at the watermark: nothing drained, nothing more read */
	ck_assert_uint_eq(evbuffer_get_length(in), 4);
	ck_assert_int_eq(t.reads, 1);
	/* draining below it resumes reading */
	t.reads = 0;
	evbuffer_drain(in, 4);
	run_until(&t, &t.reads);
	run_for(&t, 20);
	ck_assert_uint_eq(evbuffer_get_length(in), 4);
	evbuffer_drain(in, 4);
	t.reads = 0;
	run_until(&t, &t.reads);
	ck_assert_uint_eq(evbuffer_get_length(in), 2);
	ck_assert_int_eq(t.events, 0);
	pair_close(&t);
}
END_TEST

START_TEST(test_read_timeout)
{
	struct pair t;
	uint64_t t0;
	int i;

	pair_open(&t);
	t.drain = true;
	sockio_enable(t.s, EV_READ);
	t0 = now_ms();
	sockio_set_read_timeout(t.s, 150);
	/* bytes every 50 ms keep it alive */
	for (i = 0; i < 5; i++) {
		ck_assert_int_eq(write(t.peer, "x", 1), 1);
		run_for(&t, 50);
	}
	ck_assert_int_eq(t.events, 0);
	ck_assert_uint_eq(t.got, 5);
	/* then silence: it fires 150 ms after the last byte */
	run_until(&t, &t.events);
	ck_assert_int_eq(t.last_what, SOCKIO_READING | SOCKIO_TIMEOUT);
	ck_assert_uint_ge(now_ms() - t0, 200 + 140); /* last byte at 200 */
	ck_assert_int_eq(sockio_enabled(t.s) & EV_READ, 0);
	pair_close(&t);
}
END_TEST

START_TEST(test_timeout_paused)
{
	struct pair t;

	pair_open(&t);
	sockio_enable(t.s, EV_READ);
	sockio_set_read_timeout(t.s, 50);
	/* not reading: no timeout */
	sockio_disable(t.s, EV_READ);
	run_for(&t, 150);
	ck_assert_int_eq(t.events, 0);
	sockio_enable(t.s, EV_READ);
	run_until(&t, &t.events);
	ck_assert_int_eq(t.last_what, SOCKIO_READING | SOCKIO_TIMEOUT);
	pair_close(&t);
}
END_TEST

START_TEST(test_connect)
{
	struct pair t;
	struct sockaddr_in dead;
	struct sockio *c;
	int fd, lfd2;

	pair_open(&t);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	c = sio_new(t.base, fd);
	ck_assert_ptr_nonnull(c);
	sockio_setcb(c, NULL, NULL, event_cb, &t);
	ck_assert_int_eq(
	    sockio_connect(c, (struct sockaddr *)&t.addr, sizeof(t.addr)), 0);
	run_until(&t, &t.events);
	ck_assert_int_eq(t.last_what, SOCKIO_CONNECTED);
	sockio_free(c);

	/* a port nobody listens on (bound, then closed) */
	lfd2 = listener(&dead);
	close(lfd2);
	t.events = 0;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	c = sio_new(t.base, fd);
	sockio_setcb(c, NULL, NULL, event_cb, &t);
	if (sockio_connect(c, (struct sockaddr *)&dead, sizeof(dead)) == 0) {
		run_until(&t, &t.events);
		ck_assert_int_eq(t.last_what, SOCKIO_ERROR);
		ck_assert_int_eq(errno, ECONNREFUSED);
	} else {
		ck_assert_int_eq(errno, ECONNREFUSED);
	}
	sockio_free(c);
	pair_close(&t);
}
END_TEST

START_TEST(test_big_write)
{
	enum { BIG = 8 << 20 };
	struct pair t;
	unsigned char *buf, *back;
	size_t got = 0;
	ssize_t r;

	pattern(BIG, 7, 4096, &buf, &back);
	pair_open(&t);
	sockio_set_watermarks(t.s, 0, 1024);
	sockio_enable(t.s, EV_WRITE);
	evbuffer_add(sockio_output(t.s), buf, BIG);
	/* the peer does not read yet: the socket fills, the rest waits */
	run_for(&t, 50);
	ck_assert_uint_gt(evbuffer_get_length(sockio_output(t.s)), 0);
	ck_assert_int_eq(t.writes, 0);
	fcntl(t.peer, F_SETFL, O_NONBLOCK);
	while (got < BIG) {
		r = read(t.peer, back + got, BIG - got);
		if (r > 0)
			got += (size_t)r;
		else
			loop_once(t.base);
	}
	ck_assert(memcmp(buf, back, BIG) == 0);
	run_until(&t, &t.writes);
	/* a send the full socket took in part, the rest after its edge */
	if (batched)
		ck_assert_uint_ge(sockio_batch_sends(), 2);
	ck_assert_uint_eq(evbuffer_get_length(sockio_output(t.s)), 0);
	ck_assert_int_eq(t.events, 0);
	free(buf);
	free(back);
	pair_close(&t);
}
END_TEST

/* A stream of reads that fill the buffer (straight into the input) and
 * short ones (through the scratch buffer) keep every byte in order. */
START_TEST(test_big_read)
{
	enum { BIG = 4 << 20 };
	struct pair t;
	unsigned char *buf, *back;
	struct evbuffer *in;
	size_t sent = 0, got = 0, n;
	ssize_t r;

	pattern(BIG, 13, 1000, &buf, &back);
	pair_open(&t);
	sockio_enable(t.s, EV_READ);
	in = sockio_input(t.s);
	fcntl(t.peer, F_SETFL, O_NONBLOCK);
	while (got < BIG) {
		/* odd-sized writes, so reads come both full and short */
		n = sent < BIG / 2 ? 100000 : 777;
		if (n > BIG - sent)
			n = BIG - sent;
		r = n ? write(t.peer, buf + sent, n) : 0;
		if (r > 0)
			sent += (size_t)r;
		loop_once(t.base);
		n = evbuffer_get_length(in);
		ck_assert_uint_le(got + n, BIG);
		evbuffer_remove(in, back + got, n);
		got += n;
	}
	ck_assert(memcmp(buf, back, BIG) == 0);
	ck_assert_int_eq(t.events, 0);
	free(buf);
	free(back);
	pair_close(&t);
}
END_TEST

START_TEST(test_free_in_callback)
{
	struct pair t;

	pair_open(&t);
	t.free_in_read = true;
	sockio_enable(t.s, EV_READ | EV_WRITE);
	evbuffer_add(sockio_output(t.s), "pending", 7);
	ck_assert_int_eq(write(t.peer, "bye", 3), 3);
	run_until(&t, &t.reads);
	ck_assert_ptr_null(t.s);
	run_for(&t, 30);
	ck_assert_int_eq(t.reads, 1);
	ck_assert_int_eq(t.events, 0);
	pair_close(&t);
}
END_TEST

START_TEST(test_release)
{
	struct pair t;
	struct transport tr;
	char buf[4] = {0};
	int fd;

	pair_open(&t);
	sockio_enable(t.s, EV_READ);
	sockio_release(t.s, &tr);
	t.s = NULL;
	fd = tr.fd;
	ck_assert_str_eq(tr.ops->name, "tcp");
	ck_assert_int_ge(fd, 0);
	/* still open, no longer watched */
	ck_assert_int_eq(write(t.peer, "abc", 3), 3);
	run_for(&t, 30);
	ck_assert_int_eq(t.reads, 0);
	ck_assert_int_eq(write(fd, "xyz", 3), 3);
	peer_read(t.peer, buf, 3);
	ck_assert_str_eq(buf, "xyz");
	transport_close(&tr);
	ck_assert(!transport_open(&tr));
	pair_close(&t);
}
END_TEST

/* sockio_shutdown: what was queued goes out, then the FIN; the event
 * callback hears WRITING|SHUT and no write callback follows. */
START_TEST(test_shutdown)
{
	struct pair t;
	char buf[8] = {0};

	pair_open(&t);
	sockio_enable(t.s, EV_WRITE);
	evbuffer_add(sockio_output(t.s), "bye", 3);
	sockio_shutdown(t.s);
	run_until(&t, &t.events);
	ck_assert_int_eq(t.last_what, SOCKIO_WRITING | SOCKIO_SHUT);
	ck_assert_int_eq(t.writes, 0);
	peer_read(t.peer, buf, 3);
	ck_assert_str_eq(buf, "bye");
	ck_assert_int_eq(read(t.peer, buf, sizeof(buf)), 0); /* the FIN */
	pair_close(&t);
}
END_TEST

/* sockio_discard reads and throws away what came; sockio_flush writes
 * at once, outside the loop, with no callback. */
START_TEST(test_flush_discard)
{
	struct pair t;
	char junk[1000], buf[8] = {0};
	size_t n;

	pair_open(&t);
	memset(junk, 'j', sizeof(junk));
	ck_assert_int_eq(write(t.peer, junk, sizeof(junk)), sizeof(junk));
	usleep(20000);
	n = sockio_discard(t.s, 1 << 20);
	ck_assert_uint_eq(n, sizeof(junk));
	evbuffer_add(sockio_output(t.s), "hello", 5);
	ck_assert_int_eq(sockio_flush(t.s), 0);
	ck_assert_uint_eq(evbuffer_get_length(sockio_output(t.s)), 0);
	ck_assert_int_eq(t.writes + t.reads + t.events, 0);
	peer_read(t.peer, buf, 5);
	ck_assert_str_eq(buf, "hello");
	pair_close(&t);
}
END_TEST

/* A transport that holds what it read (as TLS holds decrypted records)
 * and hands it out 7 bytes at a time: a short read is not "drained"
 * while it has bytes pending, or they would wait for an edge that never
 * comes. */
struct trickle {
	char buf[65536];
	size_t off, len;
};

static ssize_t trickle_read(struct transport *tr, void *out, size_t len)
{
	struct trickle *k = tr->ctx;
	ssize_t n;

	if (k->off == k->len) {
		n = recv(tr->fd, k->buf, sizeof(k->buf), 0);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			tr->want = TRANSPORT_WANT_READ;
			return -EAGAIN;
		}
		if (n <= 0)
			return n < 0 ? -errno : 0;
		k->off = 0;
		k->len = (size_t)n;
	}
	n = (ssize_t)(k->len - k->off < 7 ? k->len - k->off : 7);
	if ((size_t)n > len)
		n = (ssize_t)len;
	memcpy(out, k->buf + k->off, (size_t)n);
	k->off += (size_t)n;
	return n;
}

static size_t trickle_pending(const struct transport *tr)
{
	const struct trickle *k = tr->ctx;

	return k->len - k->off;
}

static ssize_t trickle_writev(struct transport *tr, const struct iovec *iov,
			      int n)
{
	(void)tr;
	(void)iov;
	(void)n;
	return -EPIPE;
}

static int trickle_shutdown(struct transport *tr)
{
	(void)tr;
	return 0;
}

static void trickle_close(struct transport *tr)
{
	close(tr->fd);
}

static const struct transport_ops trickle_ops = {
    "trickle",
    trickle_read,
    trickle_writev,
    trickle_shutdown,
    trickle_pending,
    trickle_close,
    0,
    NULL,
};

START_TEST(test_pending_transport)
{
	static struct trickle k;
	struct transport tr;
	struct pair t;
	char data[5000];
	int fd;

	pair_open(&t);
	/* the same socket under the trickle transport */
	sockio_release(t.s, &tr);
	fd = tr.fd;
	memset(&k, 0, sizeof(k));
	tr.ops = &trickle_ops;
	tr.ctx = &k;
	t.s = sockio_new(t.base, &tr);
	ck_assert_ptr_nonnull(t.s);
	ck_assert_int_eq(sockio_fd(t.s), fd);
	sockio_setcb(t.s, read_cb, write_cb, event_cb, &t);
	t.drain = true;
	memset(data, 'p', sizeof(data));
	ck_assert_int_eq(write(t.peer, data, sizeof(data)), sizeof(data));
	sockio_enable(t.s, EV_READ);
	run_for(&t, 200);
	ck_assert_uint_eq(t.got, sizeof(data));
	ck_assert_int_eq(t.events, 0);
	pair_close(&t);
}
END_TEST

/* More sockios than one io_uring_enter carries (SOCKIO_BATCH, 256)
 * queue output in one loop turn: each peer gets its own bytes, and a
 * write callback runs for each. */
START_TEST(test_many)
{
	enum { N = 300 };
	struct event_base *base = event_base_new();
	struct sockaddr_in a;
	struct pair t[N];
	int lfd = listener(&a), i, fd, done = 0;
	char want[32], buf[32];
	uint64_t end = now_ms() + WAIT_MS;

	ck_assert_ptr_nonnull(base);
	for (i = 0; i < N; i++) {
		memset(&t[i], 0, sizeof(t[i]));
		t[i].peer = socket(AF_INET, SOCK_STREAM, 0);
		ck_assert_int_ge(t[i].peer, 0);
		ck_assert_int_eq(
		    connect(t[i].peer, (struct sockaddr *)&a, sizeof(a)), 0);
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
		ck_assert_int_ge(fd, 0);
		t[i].s = sio_new(base, fd);
		ck_assert_ptr_nonnull(t[i].s);
		sockio_setcb(t[i].s, read_cb, write_cb, event_cb, &t[i]);
		sockio_enable(t[i].s, EV_READ | EV_WRITE);
	}
	loop_once(base); /* the first reports: writable */
	for (i = 0; i < N; i++)
		evbuffer_add_printf(sockio_output(t[i].s), "message %03d.", i);
	while (done < N) {
		ck_assert_msg(now_ms() < end, "%d of %d written", done, N);
		loop_once(base);
		for (done = 0, i = 0; i < N; i++)
			done += t[i].writes > 0;
	}
	for (i = 0; i < N; i++) {
		snprintf(want, sizeof(want), "message %03d.", i);
		memset(buf, 0, sizeof(buf));
		peer_read(t[i].peer, buf, strlen(want));
		ck_assert_str_eq(buf, want);
		ck_assert_int_eq(t[i].events, 0);
		ck_assert_uint_eq(evbuffer_get_length(sockio_output(t[i].s)),
				  0);
		sockio_free(t[i].s);
		close(t[i].peer);
	}
	if (batched)
		ck_assert_uint_gt(sockio_batch_sends(), 0);
	close(lfd);
	event_base_free(base);
}
END_TEST

/* Two sockios send in the same turn and the first one's write callback
 * frees the second, whose send went in the same batch: nothing touches
 * the freed sockio (ASan), its callbacks never run, and its bytes, sent
 * before it was freed, arrive. */
static struct pair *free_other;

static void write_cb_free_other(struct sockio *s, void *arg)
{
	struct pair *t = arg;

	(void)s;
	t->writes++;
	if (free_other && free_other->s) {
		sockio_free(free_other->s);
		free_other->s = NULL;
	}
}

START_TEST(test_free_other_in_callback)
{
	struct pair a, b;
	char buf[8] = {0};

	pair_open(&a);
	pair_open_on(&b, a.base); /* b's sockio on a's loop */
	sockio_setcb(a.s, read_cb, write_cb_free_other, event_cb, &a);
	free_other = &b;
	sockio_enable(a.s, EV_WRITE);
	sockio_enable(b.s, EV_WRITE);
	loop_once(a.base);
	evbuffer_add(sockio_output(a.s), "aaa", 3);
	evbuffer_add(sockio_output(b.s), "bbb", 3);
	run_until(&a, &a.writes);
	ck_assert_ptr_null(b.s);
	run_for(&a, 30);
	ck_assert_int_eq(b.writes + b.events + b.reads, 0);
	peer_read(a.peer, buf, 3);
	ck_assert_str_eq(buf, "aaa");
	if (batched)
		ck_assert_uint_gt(sockio_batch_sends(), 0);
	free_other = NULL;
	close(b.peer);
	close(b.lfd);
	pair_close(&a);
}
END_TEST

/* Two sockios read in the same turn and each one's read callback frees
 * the other: the first to run frees the second, whose read went in the
 * same batch; the second's callbacks never run, nothing touches it once
 * freed (ASan). */
static struct pair *mutual[2];

static void read_cb_free_other(struct sockio *s, void *arg)
{
	struct pair *t = arg, *o = mutual[t == mutual[0]];

	(void)s;
	t->reads++;
	if (o->s) {
		sockio_free(o->s);
		o->s = NULL;
	}
}

START_TEST(test_free_other_reading)
{
	struct pair a, b;

	pair_open(&a);
	pair_open_on(&b, a.base);
	mutual[0] = &a;
	mutual[1] = &b;
	sockio_setcb(a.s, read_cb_free_other, write_cb, event_cb, &a);
	sockio_setcb(b.s, read_cb_free_other, write_cb, event_cb, &b);
	sockio_enable(a.s, EV_READ);
	sockio_enable(b.s, EV_READ);
	loop_once(a.base);
	ck_assert_int_eq(write(a.peer, "to a", 4), 4);
	ck_assert_int_eq(write(b.peer, "to b", 4), 4);
	usleep(20000); /* both readable in the next turn */
	loop_once(a.base);
	run_for(&a, 30);
	ck_assert_int_eq(a.reads + b.reads, 1);
	ck_assert((a.s == NULL) != (b.s == NULL));
	ck_assert_int_eq(a.events + b.events, 0);
	if (batched)
		ck_assert_uint_eq(sockio_batch_reads(), 2);
	close(b.peer);
	close(b.lfd);
	b.peer = b.lfd = -1;
	sockio_free(b.s);
	pair_close(&a);
}
END_TEST

/* The ring stops working (its descriptor replaced by /dev/null): the
 * batch in hand fails (its stream with it), and the thread reads and
 * sends directly from then on: a new connection echoes. */
START_TEST(test_ring_broken)
{
	struct pair t, u;
	char buf[6] = {0};
	int null;

	if (!batched)
		return;
	pair_open(&t);
	t.echo = true;
	sockio_enable(t.s, EV_READ | EV_WRITE);
	loop_once(t.base);
	null = open("/dev/null", O_RDWR);
	ck_assert_int_ge(null, 0);
	ck_assert_int_ge(dup2(null, sockio_batch_fd()), 0);
	close(null);
	ck_assert_int_eq(write(t.peer, "hello", 5), 5);
	ck_assert_int_eq(sockio_batch_error(), 0);
	run_until(&t, &t.events); /* the read in the broken batch failed */
	ck_assert_int_eq(t.last_what, SOCKIO_READING | SOCKIO_ERROR);
	ck_assert_int_gt(sockio_batch_error(), 0); /* for the status */
	/* a new connection on the same loop: direct, and it works */
	u = t;
	u.s = NULL;
	u.events = u.reads = u.writes = 0;
	pair_connect(&u);
	sockio_setcb(u.s, read_cb, write_cb, event_cb, &u);
	u.echo = true;
	sockio_enable(u.s, EV_READ | EV_WRITE);
	ck_assert_int_eq(write(u.peer, "again", 5), 5);
	run_until(&u, &u.writes);
	peer_read(u.peer, buf, 5);
	ck_assert_str_eq(buf, "again");
	ck_assert_int_eq(u.events, 0);
	sockio_free(u.s);
	close(u.peer);
	pair_close(&t);
}
END_TEST

/* A send to a peer that reset the connection fails: the event callback
 * hears WRITING|ERROR with the socket's error, and no write callback. */
START_TEST(test_write_error)
{
	struct pair t;
	struct linger lg = {1, 0};
	int i;

	pair_open(&t);
	sockio_enable(t.s, EV_READ | EV_WRITE);
	ck_assert_int_eq(
	    setsockopt(t.peer, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	close(t.peer); /* RST */
	t.peer = -1;
	usleep(20000);
	sockio_disable(t.s, EV_READ); /* the write finds the reset */
	for (i = 0; i < 3 && !t.events; i++) {
		evbuffer_add(sockio_output(t.s), "lost", 4);
		run_for(&t, 30);
	}
	ck_assert_int_eq(t.events, 1);
	ck_assert_int_eq(t.last_what, SOCKIO_WRITING | SOCKIO_ERROR);
	ck_assert_int_eq(t.writes, 0);
	pair_close(&t);
}
END_TEST

/* sockio_flush sends at once: a read that waits in the batch for the
 * end of the turn (the socket had bytes when its event ran) still runs,
 * and the read callback hears the bytes (a tunnel flushes both sides
 * from its timer before it hands them to the kernel). */
START_TEST(test_flush_keeps_read)
{
	struct pair t;
	char buf[8] = {0};

	pair_open(&t);
	t.drain = true;
	sockio_enable(t.s, EV_READ | EV_WRITE);
	loop_once(t.base);
	ck_assert_int_eq(write(t.peer, "hello", 5), 5);
	usleep(20000);
	/* the read's turn, then a flush (of nothing: a tunnel at a pause)
	 * before the batch goes */
	event_base_loop(t.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	ck_assert_int_eq(sockio_flush(t.s), 0);
	sockio_batch_flush();
	run_until(&t, &t.reads);
	ck_assert_uint_eq(t.got, 5);
	/* and a flush that sends */
	evbuffer_add(sockio_output(t.s), "out", 3);
	ck_assert_int_eq(sockio_flush(t.s), 0);
	peer_read(t.peer, buf, 3);
	ck_assert_str_eq(buf, "out");
	pair_close(&t);
}
END_TEST

/* A transport that always has bytes (as a TLS stream from a fast peer):
 * it reads endlessly, straight from the loop, until its budget is out. */
struct endless {
	size_t left, got;
	struct pair *plain; /* whose peer is watched for its bytes */
	size_t seen_at;	    /* bytes read when they arrived (0: not yet) */
};

static ssize_t endless_read(struct transport *tr, void *out, size_t len)
{
	struct endless *e = tr->ctx;

	if (!e->left) {
		tr->want = TRANSPORT_WANT_READ;
		return -EAGAIN;
	}
	if (len > e->left)
		len = e->left;
	memset(out, 'e', len);
	e->left -= len;
	return (ssize_t)len;
}

static size_t endless_pending(const struct transport *tr)
{
	const struct endless *e = tr->ctx;

	return e->left;
}

static const struct transport_ops endless_ops = {
    "endless",
    endless_read,
    trickle_writev,
    trickle_shutdown,
    endless_pending,
    trickle_close,
    0,
    NULL,
};

static void read_cb_endless(struct sockio *s, void *arg)
{
	struct endless *e = arg;
	struct evbuffer *in = sockio_input(s);
	char c;

	e->got += evbuffer_get_length(in);
	evbuffer_drain(in, evbuffer_get_length(in));
	if (!e->seen_at &&
	    recv(e->plain->peer, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 1)
		e->seen_at = e->got;
}

/* A sockio that reads without end from the loop (a TLS download from a
 * fast upstream: never batched) keeps the loop's turn going: a plain
 * sockio's send waiting in the batch still goes out long before that
 * reader is done, not after it (a worker's other clients would wait for
 * the whole stream). */
START_TEST(test_batch_not_starved)
{
	enum { BUDGET = 16 << 20 };
	static struct endless e;
	struct transport tr;
	struct sockio *r;
	struct pair t;
	int sv[2], i;

	if (!batched)
		return;
	pair_open(&t);
	sockio_enable(t.s, EV_READ | EV_WRITE);
	loop_once(t.base);
	ck_assert_int_eq(
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	memset(&e, 0, sizeof(e));
	e.left = BUDGET;
	e.plain = &t;
	memset(&tr, 0, sizeof(tr));
	tr.fd = sv[0];
	tr.ops = &endless_ops;
	tr.ctx = &e;
	r = sockio_new(t.base, &tr);
	ck_assert_ptr_nonnull(r);
	sockio_setcb(r, read_cb_endless, NULL, NULL, &e);
	evbuffer_add(sockio_output(t.s), "hello", 5);
	sockio_enable(r, EV_READ);
	/* a worker's loop: a turn, then the batch */
	for (i = 0; i < 1000 && e.got < BUDGET; i++) {
		event_base_loop(t.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		sockio_batch_flush();
	}
	ck_assert_uint_eq(e.got, BUDGET);
	ck_assert_msg(e.seen_at > 0 && e.seen_at < BUDGET / 2,
		      "the plain send went out after %zu of %d bytes read",
		      e.seen_at, BUDGET);
	sockio_free(r);
	close(sv[1]);
	pair_close(&t);
}
END_TEST

/* The relay's read callback: what t read goes out on the other sockio. */
static struct sockio *relay_to;

static void relay_cb(struct sockio *s, void *arg)
{
	struct pair *t = arg;
	struct evbuffer *in = sockio_input(s);

	t->reads++;
	evbuffer_add_buffer(sockio_output(relay_to), in);
}

START_TEST(test_relay_same_turn)
{
	struct pair t, u;
	char buf[8];
	struct pollfd p;

	pair_open(&t);
	pair_open_on(&u, t.base);
	/* u's first readiness (writable) seen, nothing to send yet */
	sockio_enable(u.s, EV_READ | EV_WRITE);
	run_for(&u, 20);
	relay_to = u.s;
	sockio_setcb(t.s, relay_cb, write_cb, event_cb, &t);
	sockio_enable(t.s, EV_READ);
	ck_assert_int_eq(write(t.peer, "ping", 4), 4);
	/* the read's callback writes to u: u's send goes in the same turn —
	 * with the batch, in the same flush that reported the read, not at
	 * the loop's next turn (a turn more per relayed response) */
	run_until(&t, &t.reads);
	p = (struct pollfd){.fd = u.peer, .events = POLLIN};
	ck_assert_int_eq(poll(&p, 1, 0), 1);
	ck_assert_int_eq(read(u.peer, buf, sizeof(buf)), 4);
	ck_assert_int_eq(memcmp(buf, "ping", 4), 0);
	if (batched)
		ck_assert_uint_gt(sockio_batch_sends(), 0);
	sockio_free(u.s);
	u.s = NULL;
	close(u.peer);
	close(u.lfd);
	pair_close(&t);
}
END_TEST

/* The endless reader (endless_ops) enabled from a batched read's
 * callback: what a flush may spend on it. */
static unsigned endless_cbs;
static struct sockio *endless_s;

static void endless_cb(struct sockio *s, void *arg)
{
	struct evbuffer *in = sockio_input(s);

	(void)arg;
	endless_cbs++;
	evbuffer_drain(in, evbuffer_get_length(in));
}

static void enable_endless_cb(struct sockio *s, void *arg)
{
	(void)arg;
	evbuffer_drain(sockio_input(s), evbuffer_get_length(sockio_input(s)));
	sockio_enable(endless_s, EV_READ);
}

START_TEST(test_soon_bounded)
{
	struct endless e = {.left = (size_t)1 << 40};
	struct event_base *base;
	struct transport tp, tr;
	struct sockio *p;
	int a[2], b[2];

	if (!batched) /* the loop's own limit serves there (worker.c) */
		return;
	base = event_base_new();
	ck_assert_ptr_nonnull(base);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, a),
			 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, b),
			 0);
	transport_unix(&tp, a[0]);
	p = sockio_new(base, &tp);
	ck_assert_ptr_nonnull(p);
	sockio_setcb(p, enable_endless_cb, NULL, NULL, NULL);
	sockio_enable(p, EV_READ);
	memset(&tr, 0, sizeof(tr));
	tr.ops = &endless_ops;
	tr.ctx = &e;
	tr.fd = b[0];
	endless_s = sockio_new(base, &tr);
	ck_assert_ptr_nonnull(endless_s);
	sockio_setcb(endless_s, endless_cb, NULL, NULL, &e);
	ck_assert_int_eq(write(a[1], "x", 1), 1);
	/* p's read (batched: reported in the flush) enables the endless
	 * reader: the flush runs it a few times at most, then the loop
	 * goes on (its other sockets, its timers) */
	event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	sockio_batch_flush();
	ck_assert_msg(endless_cbs > 0 && endless_cbs <= 64,
		      "%u reads of the endless reader in one flush",
		      endless_cbs);
	/* ... and the loop serves it after (to its end, here) */
	endless_cbs = 0;
	e.left = 1 << 20;
	event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	sockio_batch_flush();
	ck_assert_uint_gt(endless_cbs, 0);
	sockio_free(endless_s);
	sockio_free(p);
	close(a[1]);
	close(b[1]);
	event_base_free(base);
}
END_TEST

static void batch_on(void)
{
	ck_assert_int_eq(sockio_batch_init(), 0);
	batched = true;
}

static void batch_off(void)
{
	sockio_batch_exit();
}

static void add_cases(TCase *tc)
{
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, test_echo);
	tcase_add_test(tc, test_data_then_fin);
	tcase_add_test(tc, test_data_then_reset);
	tcase_add_test(tc, test_watermark);
	tcase_add_test(tc, test_read_timeout);
	tcase_add_test(tc, test_timeout_paused);
	tcase_add_test(tc, test_connect);
	tcase_add_test(tc, test_big_write);
	tcase_add_test(tc, test_big_read);
	tcase_add_test(tc, test_free_in_callback);
	tcase_add_test(tc, test_release);
	tcase_add_test(tc, test_shutdown);
	tcase_add_test(tc, test_flush_discard);
	tcase_add_test(tc, test_flush_keeps_read);
	tcase_add_test(tc, test_pending_transport);
	tcase_add_test(tc, test_many);
	tcase_add_test(tc, test_free_other_in_callback);
	tcase_add_test(tc, test_free_other_reading);
	tcase_add_test(tc, test_ring_broken);
	tcase_add_test(tc, test_write_error);
	tcase_add_test(tc, test_batch_not_starved);
	tcase_add_test(tc, test_relay_same_turn);
	tcase_add_test(tc, test_soon_bounded);
}

static Suite *sockio_suite(void)
{
	Suite *s = suite_create("sockio");
	TCase *tc = tcase_create("core");
	TCase *tb = tcase_create("batched");

	add_cases(tc);
	suite_add_tcase(s, tc);
	/* the same, with the sends batched through io_uring as a worker
	 * does; each case checks that its sends went that way */
	add_cases(tb);
	tcase_add_checked_fixture(tb, batch_on, batch_off);
	suite_add_tcase(s, tb);
	return s;
}

int main(void)
{
	return unit_run(sockio_suite());
}
