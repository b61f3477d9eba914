/* SPDX-License-Identifier: BSD-2-Clause */
/* test_hcheck.c - active health checks against real sockets on loopback:
 * a refused port is taken out, an endpoint that listens but never answers
 * is taken out by the deadline, hostile answers (garbage, a close in the
 * status line, a 10 MB body, a malformed status) are judged right, and a reload
 * that changes an endpoint's check (not its address) keeps an endpoint that is
 * out, out; the file's targets and the database's merged (hcheck_merge). */
#include <arpa/inet.h>
#include <check.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "hcheck.h"
#include "upreg.h"
#include "unit.h"

/* A loopback port: listening (backlog only, never accepted) or, with
 * listen false, closed (connects are refused). *fd is the socket to
 * close, -1 when closed already. */
static struct config_addr port_addr(bool listening, int *fd)
{
	struct config_addr a;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&a.ss;
	socklen_t len = sizeof(*s4);
	int s = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(s, 0);
	memset(&a, 0, sizeof(a));
	s4->sin_family = AF_INET;
	s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(s, (struct sockaddr *)s4, sizeof(*s4)), 0);
	ck_assert_int_eq(getsockname(s, (struct sockaddr *)s4, &len), 0);
	if (listening) {
		ck_assert_int_eq(listen(s, 16), 0);
		*fd = s;
	} else {
		close(s);
		*fd = -1;
	}
	a.len = sizeof(*s4);
	snprintf(a.text, sizeof(a.text), "127.0.0.1:%u",
		 (unsigned)ntohs(s4->sin_port));
	return a;
}

static struct hcheck_target target(struct config_addr a, unsigned type,
				   uint64_t interval_ms)
{
	struct hcheck_target t;

	memset(&t, 0, sizeof(t));
	t.addr = a;
	t.hc.type = type;
	snprintf(t.hc.path, sizeof(t.hc.path), "/healthz");
	t.hc.interval_ms = interval_ms;
	t.hc.timeout_ms = 50;
	t.hc.expect_status = 200;
	t.hc.rise = 1;
	t.hc.fall = 1;
	return t;
}

/* Run base until e is out (or 5 s pass). */
static bool run_until_down(struct event_base *base, struct upreg_ep *e)
{
	time_t end = time(NULL) + 5;

	while (!atomic_load(&e->active_down) && time(NULL) < end)
		event_base_loop(base, EVLOOP_ONCE);
	return atomic_load(&e->active_down);
}

START_TEST(test_refused_then_check_changed)
{
	struct event_base *base = event_base_new();
	struct upreg *g = upreg_new();
	struct hcheck *h = NULL;
	struct hcheck_target t;
	struct upreg_ep *e;
	int fd;

	ck_assert_ptr_nonnull(base);
	ck_assert_ptr_nonnull(g);
	t = target(port_addr(false, &fd), CONFIG_HC_TCP, 100);
	ck_assert_int_eq(hcheck_new(base, g, &h), 0);
	ck_assert_int_eq(hcheck_set(h, &t, 1), 0);
	e = upreg_get(g, &t.addr);
	ck_assert_ptr_nonnull(e);
	ck_assert(run_until_down(base, e));
	/* a reload changes the check, not the address: still out, until
	 * the new check has passed rise times */
	t.hc.interval_ms = 150;
	ck_assert_int_eq(hcheck_set(h, &t, 1), 0);
	ck_assert_msg(atomic_load(&e->active_down),
		      "a down endpoint came back when its check changed");
	/* no longer checked at all: back in */
	ck_assert_int_eq(hcheck_set(h, NULL, 0), 0);
	ck_assert(!atomic_load(&e->active_down));
	upreg_put(g, e);
	hcheck_free(h);
	upreg_free(g);
	event_base_free(base);
}
END_TEST

START_TEST(test_listen_never_accept)
{
	struct event_base *base = event_base_new();
	struct upreg *g = upreg_new();
	struct hcheck *h = NULL;
	struct hcheck_target t;
	struct upreg_ep *e;
	char buf[UPREG_WHY_STR_MAX];
	int fd;

	t = target(port_addr(true, &fd), CONFIG_HC_HTTP, 100);
	ck_assert_int_eq(hcheck_new(base, g, &h), 0);
	ck_assert_int_eq(hcheck_set(h, &t, 1), 0);
	e = upreg_get(g, &t.addr);
	ck_assert(run_until_down(base, e));
	ck_assert_pstr_eq(upreg_last_error(e, buf, sizeof(buf)),
			  "health check: no status line in time");
	upreg_put(g, e);
	hcheck_free(h);
	upreg_free(g);
	event_base_free(base);
	close(fd);
}
END_TEST

/* A backend that accepts connections, reads the request and answers
 * with head (then body_len bytes of 'x'), then closes. */
struct backend {
	int fd;
	const char *head;
	size_t body_len;
	atomic_uint served;
	atomic_bool stop;
	pthread_t th;
};

static void *backend_main(void *arg)
{
	struct backend *b = arg;
	char buf[4096];

	while (!atomic_load(&b->stop)) {
		int c = accept(b->fd, NULL, NULL);
		size_t left = b->body_len;

		if (c < 0)
			continue;
		(void)!recv(c, buf, sizeof(buf), 0);
		(void)!send(c, b->head, strlen(b->head), MSG_NOSIGNAL);
		memset(buf, 'x', sizeof(buf));
		while (left) {
			ssize_t w = send(
			    c, buf, left < sizeof(buf) ? left : sizeof(buf),
			    MSG_NOSIGNAL);

			if (w <= 0)
				break;
			left -= (size_t)w;
		}
		close(c);
		atomic_fetch_add(&b->served, 1);
	}
	return NULL;
}

/* Check a backend answering head (and body_len bytes) with an http check
 * (fall = rise = 1) until it was served 3 times or is out; returns
 * whether it is out, *why its last error. */
static bool check_backend(const char *head, size_t body_len, const char **why)
{
	struct event_base *base = event_base_new();
	struct upreg *g = upreg_new();
	struct hcheck *h = NULL;
	struct hcheck_target t;
	struct upreg_ep *e;
	struct backend b = {.head = head, .body_len = body_len};
	static char buf[UPREG_WHY_STR_MAX]; /* *why's */
	struct timeval tv = {0, 100000};
	time_t end = time(NULL) + 10;
	bool down;

	t = target(port_addr(true, &b.fd), CONFIG_HC_HTTP, 100);
	t.hc.timeout_ms = 80;
	/* accept() wakes every 100 ms to see stop */
	ck_assert_int_eq(
	    setsockopt(b.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	ck_assert_int_eq(pthread_create(&b.th, NULL, backend_main, &b), 0);
	ck_assert_int_eq(hcheck_new(base, g, &h), 0);
	ck_assert_int_eq(hcheck_set(h, &t, 1), 0);
	e = upreg_get(g, &t.addr);
	while (!atomic_load(&e->active_down) && atomic_load(&b.served) < 3 &&
	       time(NULL) < end)
		event_base_loop(base, EVLOOP_ONCE);
	down = atomic_load(&e->active_down);
	*why = upreg_last_error(e, buf, sizeof(buf));
	ck_assert_msg(down || atomic_load(&b.served) >= 3, "no check ran");
	upreg_put(g, e);
	/* first (the sockets of the checks close as the base runs its
	 * finalizers): a check's socket left open would block a send */
	hcheck_free(h);
	event_base_free(base);
	atomic_store(&b.stop, true);
	pthread_join(b.th, NULL);
	close(b.fd);
	upreg_free(g);
	return down;
}

START_TEST(test_hostile_backends)
{
	static const struct {
		const char *head;
		size_t body;
		bool down;
		const char *why;
	} cases[] = {
	    {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 0, false, NULL},
	    {"HTTP/1.0 200\r\n\r\n", 0, false, NULL},
	    /* a 10 MB body: the status line is enough */
	    {"HTTP/1.1 200 OK\r\n\r\n", 10 << 20, false, NULL},
	    {"SSH-2.0-OpenSSH_9.2\r\n", 0, true,
	     "health check: not an HTTP response"},
	    {"HTTP/1.1 2", 0, true,
	     "health check: closed before a status line"},
	    {"HTTP/1.1 503 Busy\r\n\r\n", 0, true, "health check: status 5xx"},
	    /* a status of more than three digits is not 200 */
	    {"HTTP/1.1 2000 OK\r\n\r\n", 0, true,
	     "health check: not an HTTP response"},
	    {"HTTP/1.1  200 OK\r\n\r\n", 0, true,
	     "health check: not an HTTP response"},
	    {"HTTP/1.1 +20 OK\r\n\r\n", 0, true,
	     "health check: not an HTTP response"},
	};
	const char *why;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bool down = check_backend(cases[i].head, cases[i].body, &why);

		ck_assert_msg(down == cases[i].down, "%zu '%s': down %d (%s)",
			      i, cases[i].head, down, why ? why : "-");
		if (cases[i].why)
			ck_assert_str_eq(why, cases[i].why);
	}
}
END_TEST

/* Stopping (edged's exit) brings back what was out without a line per
 * endpoint: "no longer health-checked, back in" is for a reload. */
START_TEST(test_free_quiet)
{
	struct event_base *base = event_base_new();
	struct upreg *g = upreg_new();
	struct hcheck *h = NULL;
	struct hcheck_target t;
	struct upreg_ep *e;
	char logpath[] = "/tmp/edge-hcheck-log.XXXXXX", buf[4096];
	int fd, lfd, saved;
	ssize_t n;

	t = target(port_addr(false, &fd), CONFIG_HC_TCP, 100);
	ck_assert_int_eq(hcheck_new(base, g, &h), 0);
	ck_assert_int_eq(hcheck_set(h, &t, 1), 0);
	e = upreg_get(g, &t.addr);
	ck_assert(run_until_down(base, e));
	lfd = mkstemp(logpath);
	ck_assert_int_ge(lfd, 0);
	saved = dup(2);
	ck_assert_int_eq(dup2(lfd, 2), 2);
	hcheck_free(h);
	ck_assert_int_eq(dup2(saved, 2), 2);
	close(saved);
	n = pread(lfd, buf, sizeof(buf) - 1, 0);
	close(lfd);
	unlink(logpath);
	ck_assert_int_ge(n, 0);
	buf[n] = '\0';
	ck_assert_msg(!strstr(buf, "no longer health-checked"), "logged: %s",
		      buf);
	ck_assert(!atomic_load(&e->active_down));
	upreg_put(g, e);
	upreg_free(g);
	event_base_free(base);
}
END_TEST

/* A target at 10.0.0.N:80 (config_addr_parse's canonical form) with
 * interval_ms, so that which one won can be seen. */
static struct hcheck_target merge_target(unsigned n, uint64_t interval_ms)
{
	struct hcheck_target t;
	char text[32];

	memset(&t, 0, sizeof(t));
	snprintf(text, sizeof(text), "10.0.0.%u:80", n);
	ck_assert_int_eq(config_addr_parse(text, &t.addr, NULL), 0);
	t.hc.type = CONFIG_HC_TCP;
	t.hc.interval_ms = interval_ms;
	return t;
}

struct merge_lost {
	char won[8][CONFIG_ADDR_STR_MAX];
	uint64_t won_ms[8], lost_ms[8];
	size_t n;
};

static void merge_lost_cb(void *arg, const struct hcheck_target *won,
			  const struct hcheck_target *dropped)
{
	struct merge_lost *l = arg;

	ck_assert_uint_lt(l->n, 8);
	ck_assert_str_eq(won->addr.text, dropped->addr.text);
	snprintf(l->won[l->n], sizeof(l->won[l->n]), "%s", won->addr.text);
	l->won_ms[l->n] = won->hc.interval_ms;
	l->lost_ms[l->n++] = dropped->hc.interval_ms;
}

/* The file's targets and the database's merged: each address once, in
 * order, the first winning; the database's that gave way to the file's
 * told, not those that gave way to another of the database's. */
START_TEST(test_merge)
{
	struct hcheck_target a[3], b[4], *v = NULL;
	struct merge_lost l;
	size_t n = 9;

	memset(&l, 0, sizeof(l));
	a[0] = merge_target(1, 1000);
	a[1] = merge_target(2, 1001);
	a[2] = merge_target(1, 1002); /* the file's own duplicate */
	b[0] = merge_target(3, 2000);
	b[1] = merge_target(2, 2001); /* gives way to the file's */
	b[2] = merge_target(3, 2002); /* to the database's own first */
	b[3] = merge_target(4, 2003);
	ck_assert_int_eq(hcheck_merge(a, 3, b, 4, &v, &n, merge_lost_cb, &l),
			 0);
	ck_assert_uint_eq(n, 4);
	ck_assert_str_eq(v[0].addr.text, "10.0.0.1:80");
	ck_assert_uint_eq(v[0].hc.interval_ms, 1000);
	ck_assert_str_eq(v[1].addr.text, "10.0.0.2:80");
	ck_assert_uint_eq(v[1].hc.interval_ms, 1001);
	ck_assert_str_eq(v[2].addr.text, "10.0.0.3:80");
	ck_assert_uint_eq(v[2].hc.interval_ms, 2000);
	ck_assert_str_eq(v[3].addr.text, "10.0.0.4:80");
	ck_assert_uint_eq(v[3].hc.interval_ms, 2003);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_str_eq(l.won[0], "10.0.0.2:80");
	ck_assert_uint_eq(l.won_ms[0], 1001);
	ck_assert_uint_eq(l.lost_ms[0], 2001);
	free(v);
	/* none: NULL, 0; one side only; no callback */
	v = a;
	ck_assert_int_eq(hcheck_merge(NULL, 0, NULL, 0, &v, &n, NULL, NULL), 0);
	ck_assert_ptr_null(v);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(hcheck_merge(NULL, 0, b, 4, &v, &n, NULL, NULL), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(v[1].hc.interval_ms, 2001);
	free(v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hcheck");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_refused_then_check_changed);
	tcase_add_test(tc, test_listen_never_accept);
	tcase_add_test(tc, test_hostile_backends);
	tcase_add_test(tc, test_free_quiet);
	tcase_add_test(tc, test_merge);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
