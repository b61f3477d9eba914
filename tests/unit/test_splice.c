// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_splice.c - splice.c against the running kernel (root: loading the
 * sk_skb program needs CAP_BPF; exit 77 otherwise): the sockets of a
 * splice leave the verdict under their socket locks (the TCP iterator),
 * also after edged's privilege drop; and a socket taken out from under
 * the verdict and put back under it again and again while its peer
 * streams into it loses no byte: every byte sent reaches the spliced
 * destination or the socket's own reader.
 * (Taken out by a plain delete, a verdict running meanwhile on another
 * CPU finds no program and drops what it holds: sk_psock_verdict_recv.)
 */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <linux/sock_diag.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "splice.h"
#include "unit.h"

/* disarm/re-arm cycles under a stream, within CYCLES_MS (a VM under TCG
 * runs fewer): plain deletes lost bytes in every run of them here (a few
 * hundred kB each in 3,000) */
#define CYCLES 2000
#define CYCLES_MS 6000

static struct splice *sp;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A connected loopback pair through listener l: *c the connecting end,
 * *s the accepted one. */
static void pair(int l, int *c, int *s)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);

	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&sa, &len), 0);
	*c = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(*c, 0);
	ck_assert_int_eq(connect(*c, (struct sockaddr *)&sa, sizeof(sa)), 0);
	*s = accept(l, NULL, NULL);
	ck_assert_int_ge(*s, 0);
}

static int listener(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int l = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(l, 4), 0);
	return l;
}

static uint32_t drops(int fd)
{
	uint32_t mi[SK_MEMINFO_VARS] = {0};
	socklen_t len = sizeof(mi);

	ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mi, &len), 0);
	return mi[SK_MEMINFO_DROPS];
}

struct stream {
	int fd;
	atomic_bool stop;
	atomic_ullong bytes;
};

/* Send into fd until stop, as fast as it takes. */
static void *sender(void *arg)
{
	struct stream *st = arg;
	static char buf[65536];
	struct pollfd p = {.fd = st->fd, .events = POLLOUT};
	ssize_t r;

	memset(buf, 'x', sizeof(buf));
	while (!atomic_load(&st->stop)) {
		r = send(st->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r > 0)
			atomic_fetch_add(&st->bytes, (unsigned long long)r);
		else if (r < 0 && errno != EAGAIN)
			break;
		else
			poll(&p, 1, 10);
	}
	return NULL;
}

/* Read fd until stop and nothing is left. */
static void *reader(void *arg)
{
	struct stream *st = arg;
	static char buf[262144];
	struct pollfd p = {.fd = st->fd, .events = POLLIN};
	ssize_t r;

	for (;;) {
		r = recv(st->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r > 0) {
			atomic_fetch_add(&st->bytes, (unsigned long long)r);
			continue;
		}
		if (r == 0 || (errno != EAGAIN && errno != EINTR))
			break;
		if (atomic_load(&st->stop))
			break;
		poll(&p, 1, 10);
	}
	return NULL;
}

/* Read what waits in fd now: the bytes. */
static uint64_t drain(int fd)
{
	static char buf[262144];
	uint64_t n = 0;
	ssize_t r;

	while ((r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		n += (uint64_t)r;
	return n;
}

START_TEST(test_unarm_under_lock)
{
	int l = listener(), a, b, d, c, status;
	uint64_t ck[2];
	pid_t pid;

	ck_assert_msg(splice_unarm_why(sp) == NULL, "%s",
		      splice_unarm_why(sp) ? splice_unarm_why(sp) : "");
	pair(l, &a, &b);
	pair(l, &d, &c);
	ck[0] = splice_cookie(b);
	ck[1] = splice_cookie(c);
	ck_assert_int_eq(splice_sock_add(sp, b, ck[0], ck[1]), 0);
	ck_assert_int_eq(splice_sock_add(sp, c, ck[1], ck[0]), 0);
	ck_assert_int_eq(splice_sock_arm(sp, b, ck[0]), 0);
	ck_assert_int_eq(splice_sock_arm(sp, c, ck[1]), 0);
	/* as edged does after its privilege drop */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(2);
		_exit(splice_sock_disarm(sp, ck, 2) == 2 ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "an unprivileged process disarmed fewer than 2 sockets "
		      "under their locks (status %d)",
		      status);
	/* disarmed: a's bytes wait in b's receive queue */
	ck_assert_int_eq(send(a, "hand", 4, 0), 4);
	usleep(20000);
	ck_assert_uint_eq(drain(b), 4);
	splice_sock_del(sp, ck[0]);
	splice_sock_del(sp, ck[1]);
	close(a);
	close(b);
	close(c);
	close(d);
	close(l);
}
END_TEST

START_TEST(test_rearm_under_stream)
{
	int l = listener(), a, b, d, c, i, locked = 0;
	struct stream up = {0}, down = {0};
	pthread_t ts, tr;
	uint64_t kb, kc, own = 0, deadline;
	unsigned long long sent, got;
	uint32_t dropped;

	pair(l, &a, &b);
	pair(l, &d, &c);
	kb = splice_cookie(b);
	kc = splice_cookie(c);
	ck_assert_int_eq(splice_sock_add(sp, b, kb, kc), 0);
	ck_assert_int_eq(splice_sock_add(sp, c, kc, kb), 0);
	ck_assert_int_eq(splice_sock_arm(sp, c, kc), 0);
	up.fd = a;
	down.fd = d;
	ck_assert_int_eq(pthread_create(&ts, NULL, sender, &up), 0);
	ck_assert_int_eq(pthread_create(&tr, NULL, reader, &down), 0);
	srand(1);
	deadline = now_ms() + CYCLES_MS;
	for (i = 0; i < CYCLES && now_ms() < deadline; i++) {
		ck_assert_int_eq(splice_sock_arm(sp, b, kb), 0);
		ck_assert_int_eq(splice_sock_kick(b), 0);
		usleep((useconds_t)(rand() % 500));
		locked += splice_sock_disarm(sp, &kb, 1);
		own += drain(b);
	}
	dropped = drops(b);
	/* the rest through the kernel to d */
	ck_assert_int_eq(splice_sock_arm(sp, b, kb), 0);
	atomic_store(&up.stop, true);
	pthread_join(ts, NULL);
	ck_assert_int_eq(splice_sock_kick(b), 0);
	sent = atomic_load(&up.bytes);
	deadline = now_ms() + 10000;
	while (atomic_load(&down.bytes) + own < sent && now_ms() < deadline)
		usleep(10000);
	atomic_store(&down.stop, true);
	pthread_join(tr, NULL);
	got = atomic_load(&down.bytes);
	ck_assert_msg(got + own == sent,
		      "%d cycles (%d disarmed under the socket lock): sent "
		      "%llu, %llu spliced and %llu read from the socket: %lld "
		      "lost (the socket counts %u drops)",
		      i, locked, sent, got, (unsigned long long)own,
		      (long long)(sent - got - own), dropped);
	ck_assert_int_eq(locked, i);
	printf("test_splice: %d cycles, %llu bytes, none lost\n", i, sent);
	splice_sock_del(sp, kb);
	splice_sock_del(sp, kc);
	close(a);
	close(b);
	close(c);
	close(d);
	close(l);
}
END_TEST

int main(void)
{
	struct errbuf err;
	Suite *s;
	TCase *tc;

	if (geteuid() != 0) {
		printf("skip - test_splice: not root (the sk_skb program "
		       "needs CAP_BPF)\n");
		return 77;
	}
	errbuf_clear(&err);
	if (splice_open(&sp, &err)) {
		printf("not ok - test_splice: splice_open: %s\n", err.msg);
		return EXIT_FAILURE;
	}
	s = suite_create("splice");
	tc = tcase_create("unarm");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_unarm_under_lock);
	tcase_add_test(tc, test_rearm_under_stream);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
