/* SPDX-License-Identifier: BSD-2-Clause */
/* test_upstream.c - Select: round robin, least in-flight, client-IP
 * rendezvous hashing, exclusion, passive health and panic mode on a fake
 * clock; pools of idle fds over socketpairs and loopback TCP. */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "upstream.h"
#include "unit.h"

#define SEC 1000000000ULL
#define T0 (1000 * SEC)

static struct config_addr addr(const char *ip, unsigned port)
{
	struct config_addr a;

	memset(&a, 0, sizeof(a));
	if (strchr(ip, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&a.ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		ck_assert_int_eq(inet_pton(AF_INET6, ip, &s6->sin6_addr), 1);
		a.len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&a.ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		ck_assert_int_eq(inet_pton(AF_INET, ip, &s4->sin_addr), 1);
		a.len = sizeof(*s4);
	}
	snprintf(a.text, sizeof(a.text), "%s:%u", ip, port);
	return a;
}

/* Five backends 10.0.0.1..5:80. */
static void five(struct config_addr eps[5])
{
	char ip[32];
	int i;

	for (i = 0; i < 5; i++) {
		snprintf(ip, sizeof(ip), "10.0.0.%d", i + 1);
		eps[i] = addr(ip, 80);
	}
}

static struct sockaddr_in v4(uint32_t a)
{
	struct sockaddr_in s;

	memset(&s, 0, sizeof(s));
	s.sin_family = AF_INET;
	s.sin_addr.s_addr = htonl(a);
	s.sin_port = htons(40000);
	return s;
}

/* The index in eps of the chosen endpoint. */
static int pick(struct upstream_worker *w, uint64_t gen, unsigned route,
		const struct config_addr *eps, size_t n,
		enum config_balance mode, const struct sockaddr *client,
		uint64_t now, struct upstream_ep *const *ex, size_t nex)
{
	struct upstream_ep *ep = NULL;
	size_t i;

	ck_assert_int_eq(upstream_select(w, gen, route, eps, n, mode, client,
					 now, ex, nex, &ep),
			 0);
	for (i = 0; i < n; i++)
		if (memcmp(&upstream_ep_addr(ep)->ss, &eps[i].ss,
			   sizeof(eps[i].ss)) == 0)
			return (int)i;
	ck_abort_msg("selected endpoint not in the list");
	return -1;
}

static struct upstream_ep *ep_of(struct upstream_worker *w,
				 const struct config_addr *eps, size_t n,
				 size_t i)
{
	struct upstream_ep *ep = NULL;
	int k;

	/* round robin on a private route until eps[i] comes up */
	for (k = 0; k < (int)n * 2; k++) {
		ck_assert_int_eq(upstream_select(w, 0, 9999, eps, n,
						 CONFIG_BALANCE_ROUND_ROBIN,
						 NULL, T0, NULL, 0, &ep),
				 0);
		if (memcmp(&upstream_ep_addr(ep)->ss, &eps[i].ss,
			   sizeof(eps[i].ss)) == 0)
			return ep;
	}
	ck_abort_msg("endpoint not found");
	return NULL;
}

static bool fd_closed(int fd)
{
	return fcntl(fd, F_GETFD) == -1 && errno == EBADF;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

START_TEST(test_rr)
{
	struct upstream_worker *w;
	struct config_addr eps[5];
	int i, count[3] = {0, 0, 0};

	five(eps);
	ck_assert_int_eq(upstream_worker_new(&w), 0);
	for (i = 0; i < 9; i++)
		ck_assert_int_eq(pick(w, 1, 0, eps, 3,
				      CONFIG_BALANCE_ROUND_ROBIN, NULL, T0,
				      NULL, 0),
				 i % 3);
	/* another route has its own position */
	ck_assert_int_eq(pick(w, 1, 1, eps, 3, CONFIG_BALANCE_ROUND_ROBIN, NULL,
			      T0, NULL, 0),
			 0);
	ck_assert_int_eq(pick(w, 1, 0, eps, 3, CONFIG_BALANCE_ROUND_ROBIN, NULL,
			      T0, NULL, 0),
			 0);
	/* fairness */
	for (i = 0; i < 3000; i++)
		count[pick(w, 1, 2, eps, 3, CONFIG_BALANCE_ROUND_ROBIN, NULL,
			   T0, NULL, 0)]++;
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(count[i], 1000);
	/* many routes at once: positions stay bounded but correct for the
	 * recent ones */
	for (i = 0; i < 5000; i++)
		pick(w, 1, 100 + (unsigned)i, eps, 3,
		     CONFIG_BALANCE_ROUND_ROBIN, NULL, T0 + (uint64_t)i, NULL,
		     0);
	upstream_worker_free(w);
	upstream_worker_free(NULL);
}
END_TEST

START_TEST(test_rr_generation)
{
	struct upstream_worker *w;
	struct config_addr eps[5];

	five(eps);
	ck_assert_int_eq(upstream_worker_new(&w), 0);
	ck_assert_int_eq(pick(w, 1, 0, eps, 3, CONFIG_BALANCE_ROUND_ROBIN, NULL,
			      T0, NULL, 0),
			 0);
	ck_assert_int_eq(pick(w, 1, 0, eps, 3, CONFIG_BALANCE_ROUND_ROBIN, NULL,
			      T0, NULL, 0),
			 1);
	/* a new generation starts fresh */
	ck_assert_int_eq(pick(w, 2, 0, eps, 3, CONFIG_BALANCE_ROUND_ROBIN, NULL,
			      T0, NULL, 0),
			 0);
	ck_assert_int_eq(pick(w, 2, 0, eps, 3, CONFIG_BALANCE_ROUND_ROBIN, NULL,
			      T0, NULL, 0),
			 1);
	/* the old one, while it is still in use, keeps its own */
	ck_assert_int_eq(pick(w, 1, 0, eps, 3, CONFIG_BALANCE_ROUND_ROBIN, NULL,
			      T0, NULL, 0),
			 2);
	upstream_worker_free(w);
}
END_TEST

START_TEST(test_shared_endpoint)
{
	struct upstream_worker *w;
	struct config_addr a[2], b[2];
	struct upstream_ep *x, *y;
	struct upstream_stats st;

	a[0] = addr("10.0.0.1", 80);
	a[1] = addr("10.0.0.2", 80);
	b[0] = addr("10.0.0.2", 80); /* same backend, another route */
	b[1] = addr("10.0.0.2", 81); /* another port: another endpoint */
	ck_assert_int_eq(upstream_worker_new(&w), 0);
	x = ep_of(w, a, 2, 1);
	y = ep_of(w, b, 2, 0);
	ck_assert_ptr_eq(x, y);
	ck_assert_ptr_ne(ep_of(w, b, 2, 1), x);
	upstream_stats(w, &st);
	ck_assert_uint_eq(st.endpoints, 3);
	upstream_inflight_add(x, 2);
	ck_assert_uint_eq(upstream_ep_inflight(y), 2);
	upstream_inflight_add(x, -5);
	ck_assert_uint_eq(upstream_ep_inflight(y), 0);
	upstream_worker_free(w);
}
END_TEST

START_TEST(test_least_inflight)
{
	struct upstream_worker *w;
	struct config_addr eps[5];
	struct upstream_ep *e[3];
	int i, seen[3] = {0, 0, 0};

	five(eps);
	ck_assert_int_eq(upstream_worker_new(&w), 0);
	for (i = 0; i < 3; i++)
		e[i] = ep_of(w, eps, 3, (size_t)i);
	upstream_inflight_add(e[0], 2);
	upstream_inflight_add(e[1], 1);
	upstream_inflight_add(e[2], 3);
	ck_assert_int_eq(pick(w, 1, 0, eps, 3, CONFIG_BALANCE_LEAST_INFLIGHT,
			      NULL, T0, NULL, 0),
			 1);
	ck_assert_int_eq(pick(w, 1, 0, eps, 3, CONFIG_BALANCE_LEAST_INFLIGHT,
			      NULL, T0, NULL, 0),
			 1);
	upstream_inflight_add(e[1], 5); /* 2, 6, 3 */
	ck_assert_int_eq(pick(w, 1, 0, eps, 3, CONFIG_BALANCE_LEAST_INFLIGHT,
			      NULL, T0, NULL, 0),
			 0);
	/* ties rotate: all equal, three picks hit three endpoints */
	upstream_inflight_add(e[0], -2);
	upstream_inflight_add(e[1], -6);
	upstream_inflight_add(e[2], -3);
	for (i = 0; i < 3; i++)
		seen[pick(w, 1, 0, eps, 3, CONFIG_BALANCE_LEAST_INFLIGHT, NULL,
			  T0, NULL, 0)]++;
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(seen[i], 1);
	/* ties among the least loaded only */
	upstream_inflight_add(e[1], 4);
	for (i = 0; i < 10; i++)
		ck_assert_int_ne(pick(w, 1, 0, eps, 3,
				      CONFIG_BALANCE_LEAST_INFLIGHT, NULL, T0,
				      NULL, 0),
				 1);
	/* simulated load: requests held open spread evenly */
	upstream_inflight_add(e[1], -4);
	for (i = 0; i < 30; i++) {
		struct upstream_ep *ep;

		ck_assert_int_eq(upstream_select(w, 1, 0, eps, 3,
						 CONFIG_BALANCE_LEAST_INFLIGHT,
						 NULL, T0, NULL, 0, &ep),
				 0);
		upstream_inflight_add(ep, 1);
	}
	for (i = 0; i < 3; i++)
		ck_assert_uint_eq(upstream_ep_inflight(e[i]), 10);
	upstream_worker_free(w);
}
END_TEST

START_TEST(test_hash_stable_spread)
{
	struct upstream_worker *w;
	struct config_addr eps[5];
	struct sockaddr_in c = v4(0xc0000201), c2 = v4(0xc0000201);
	struct sockaddr_in6 s6a, s6b, mapped;
	int i, first, count[5] = {0};
	double chi2 = 0;

	five(eps);
	ck_assert_int_eq(upstream_worker_new(&w), 0);
	first = pick(w, 1, 0, eps, 5, CONFIG_BALANCE_IP_HASH,
		     (struct sockaddr *)&c, T0, NULL, 0);
	c2.sin_port = htons(50000); /* another connection of that client */
	for (i = 0; i < 20; i++) {
		ck_assert_int_eq(pick(w, 1, 0, eps, 5, CONFIG_BALANCE_IP_HASH,
				      (struct sockaddr *)&c, T0, NULL, 0),
				 first);
		ck_assert_int_eq(pick(w, (uint64_t)i, 3, eps, 5,
				      CONFIG_BALANCE_IP_HASH,
				      (struct sockaddr *)&c2, T0, NULL, 0),
				 first);
	}
	/* IPv4-mapped IPv6 is that IPv4 client */
	memset(&mapped, 0, sizeof(mapped));
	mapped.sin6_family = AF_INET6;
	ck_assert_int_eq(
	    inet_pton(AF_INET6, "::ffff:192.0.2.1", &mapped.sin6_addr), 1);
	ck_assert_int_eq(pick(w, 1, 0, eps, 5, CONFIG_BALANCE_IP_HASH,
			      (struct sockaddr *)&mapped, T0, NULL, 0),
			 first);
	/* IPv6: one /64 is one client */
	memset(&s6a, 0, sizeof(s6a));
	s6a.sin6_family = AF_INET6;
	s6b = s6a;
	ck_assert_int_eq(inet_pton(AF_INET6, "2001:db8:1:2::1", &s6a.sin6_addr),
			 1);
	ck_assert_int_eq(
	    inet_pton(AF_INET6, "2001:db8:1:2:ffff::9", &s6b.sin6_addr), 1);
	for (i = 0; i < 5; i++) {
		s6a.sin6_addr.s6_addr[7] = (uint8_t)i;
		s6b.sin6_addr.s6_addr[7] = (uint8_t)i;
		ck_assert_int_eq(pick(w, 1, 0, eps, 5, CONFIG_BALANCE_IP_HASH,
				      (struct sockaddr *)&s6a, T0, NULL, 0),
				 pick(w, 1, 0, eps, 5, CONFIG_BALANCE_IP_HASH,
				      (struct sockaddr *)&s6b, T0, NULL, 0));
	}
	/* 10k sequential clients spread evenly (chi-square, 4 degrees of
	 * freedom: 30 is far beyond p = 0.0001) */
	for (i = 0; i < 10000; i++) {
		struct sockaddr_in ci = v4(0x0a010000u + (uint32_t)i);

		count[pick(w, 1, 0, eps, 5, CONFIG_BALANCE_IP_HASH,
			   (struct sockaddr *)&ci, T0, NULL, 0)]++;
	}
	for (i = 0; i < 5; i++)
		chi2 += (count[i] - 2000.0) * (count[i] - 2000.0) / 2000.0;
	ck_assert_msg(chi2 < 30, "chi2 %.1f", chi2);
	/* no client address: round robin */
	ck_assert_int_eq(
	    pick(w, 7, 7, eps, 5, CONFIG_BALANCE_IP_HASH, NULL, T0, NULL, 0),
	    0);
	ck_assert_int_eq(
	    pick(w, 7, 7, eps, 5, CONFIG_BALANCE_IP_HASH, NULL, T0, NULL, 0),
	    1);
	upstream_worker_free(w);
}
END_TEST

START_TEST(test_hash_minimal_movement)
{
	struct upstream_worker *w;
	struct config_addr eps[5], four[4];
	int i, moved = 0, on_removed = 0;

	five(eps);
	four[0] = eps[0];
	four[1] = eps[1];
	four[2] = eps[3];
	four[3] = eps[4];
	ck_assert_int_eq(upstream_worker_new(&w), 0);
	for (i = 0; i < 10000; i++) {
		struct sockaddr_in ci = v4(0xc6120000u + (uint32_t)i * 7);
		int a = pick(w, 1, 0, eps, 5, CONFIG_BALANCE_IP_HASH,
			     (struct sockaddr *)&ci, T0, NULL, 0);
		int b = pick(w, 2, 0, four, 4, CONFIG_BALANCE_IP_HASH,
			     (struct sockaddr *)&ci, T0, NULL, 0);
		int b5 = b >= 2 ? b + 1 : b; /* as an index in eps */

		if (a == 2)
			on_removed++;
		if (a != b5) {
			moved++;
			/* only the removed endpoint's clients move */
			ck_assert_int_eq(a, 2);
		}
	}
	ck_assert_int_eq(moved, on_removed);
	ck_assert_msg(moved > 1600 && moved < 2400, "moved %d", moved);
	upstream_worker_free(w);
}
END_TEST

START_TEST(test_exclude)
{
	struct upstream_worker *w;
	struct config_addr eps[5], rest[4];
	struct upstream_ep *ex[5], *ep;
	struct sockaddr_in c = v4(0xcb007101);
	int first, second, i, j;

	five(eps);
	ck_assert_int_eq(upstream_worker_new(&w), 0);
	for (i = 0; i < 5; i++)
		ex[i] = ep_of(w, eps, 5, (size_t)i);
	/* round robin skips the excluded */
	ck_assert_int_eq(pick(w, 1, 0, eps, 5, CONFIG_BALANCE_ROUND_ROBIN, NULL,
			      T0, &ex[0], 2),
			 2);
	ck_assert_int_eq(pick(w, 1, 0, eps, 5, CONFIG_BALANCE_ROUND_ROBIN, NULL,
			      T0, &ex[3], 2),
			 0);
	ck_assert_int_eq(pick(w, 1, 0, eps, 5, CONFIG_BALANCE_LEAST_INFLIGHT,
			      NULL, T0, &ex[1], 1),
			 2);
	/* hash: the next choice is deterministic and equals the choice
	 * without the excluded endpoint */
	first = pick(w, 1, 0, eps, 5, CONFIG_BALANCE_IP_HASH,
		     (struct sockaddr *)&c, T0, NULL, 0);
	second = pick(w, 1, 0, eps, 5, CONFIG_BALANCE_IP_HASH,
		      (struct sockaddr *)&c, T0, &ex[first], 1);
	ck_assert_int_ne(first, second);
	ck_assert_int_eq(pick(w, 1, 0, eps, 5, CONFIG_BALANCE_IP_HASH,
			      (struct sockaddr *)&c, T0, &ex[first], 1),
			 second);
	for (i = 0, j = 0; i < 5; i++)
		if (i != first)
			rest[j++] = eps[i];
	j = pick(w, 1, 0, rest, 4, CONFIG_BALANCE_IP_HASH,
		 (struct sockaddr *)&c, T0, NULL, 0);
	ck_assert_int_eq(j >= first ? j + 1 : j, second);
	/* everything excluded, or nothing to choose from */
	ck_assert_int_eq(upstream_select(w, 1, 0, eps, 5,
					 CONFIG_BALANCE_ROUND_ROBIN, NULL, T0,
					 ex, 5, &ep),
			 -EHOSTUNREACH);
	ck_assert_int_eq(upstream_select(w, 1, 0, eps, 5,
					 CONFIG_BALANCE_IP_HASH,
					 (struct sockaddr *)&c, T0, ex, 5, &ep),
			 -EHOSTUNREACH);
	ck_assert_int_eq(upstream_select(w, 1, 0, eps, 0,
					 CONFIG_BALANCE_ROUND_ROBIN, NULL, T0,
					 NULL, 0, &ep),
			 -EHOSTUNREACH);
	upstream_worker_free(w);
}
END_TEST

START_TEST(test_eject)
{
	struct upstream_worker *w;
	struct config_addr eps[5];
	struct upstream_ep *bad, *ep;
	struct upstream_stats st;
	uint64_t t = T0;
	int i;

	five(eps);
	ck_assert_int_eq(upstream_worker_new(&w), 0);
	bad = ep_of(w, eps, 2, 1);
	/* a success resets the count */
	upstream_report(w, bad, false, t);
	upstream_report(w, bad, false, t);
	upstream_report(w, bad, true, t);
	upstream_report(w, bad, false, t);
	upstream_report(w, bad, false, t);
	ck_assert(!upstream_ep_ejected(bad, t));
	/* the third consecutive failure ejects for 10 s */
	upstream_report(w, bad, false, t);
	ck_assert(upstream_ep_ejected(bad, t));
	for (i = 0; i < 10; i++)
		ck_assert_int_eq(pick(w, 1, 0, eps, 2,
				      CONFIG_BALANCE_ROUND_ROBIN, NULL, t, NULL,
				      0),
				 0);
	ck_assert(upstream_ep_ejected(bad, t + 10 * SEC - 1));
	/* late failures while ejected do not extend it */
	upstream_report(w, bad, false, t + 5 * SEC);
	ck_assert(!upstream_ep_ejected(bad, t + 10 * SEC));
	/* half-open at +10 s: exactly one request goes there */
	t += 10 * SEC;
	ck_assert_int_eq(upstream_select(w, 1, 1, eps, 2,
					 CONFIG_BALANCE_LEAST_INFLIGHT, NULL, t,
					 NULL, 0, &ep),
			 0);
	if (ep != bad) /* least in-flight may begin with 0: then bad */
		ck_assert_int_eq(upstream_select(w, 1, 1, eps, 2,
						 CONFIG_BALANCE_LEAST_INFLIGHT,
						 NULL, t, NULL, 0, &ep),
				 0);
	ck_assert_ptr_eq(ep, bad);
	for (i = 0; i < 10; i++)
		ck_assert_int_eq(pick(w, 1, 0, eps, 2,
				      CONFIG_BALANCE_ROUND_ROBIN, NULL, t, NULL,
				      0),
				 0);
	/* the probe fails: ejected for twice as long */
	upstream_report(w, bad, false, t);
	ck_assert(upstream_ep_ejected(bad, t + 20 * SEC - 1));
	ck_assert(!upstream_ep_ejected(bad, t + 20 * SEC));
	t += 20 * SEC;
	/* half-open again; this probe succeeds: healthy */
	ck_assert_int_eq(
	    pick(w, 1, 2, eps, 2, CONFIG_BALANCE_ROUND_ROBIN, NULL, t, NULL, 0),
	    0);
	ck_assert_int_eq(
	    pick(w, 1, 2, eps, 2, CONFIG_BALANCE_ROUND_ROBIN, NULL, t, NULL, 0),
	    1);
	ck_assert_int_eq(
	    pick(w, 1, 2, eps, 2, CONFIG_BALANCE_ROUND_ROBIN, NULL, t, NULL, 0),
	    0);
	upstream_report(w, bad, true, t);
	ck_assert_int_eq(
	    pick(w, 1, 2, eps, 2, CONFIG_BALANCE_ROUND_ROBIN, NULL, t, NULL, 0),
	    1);
	ck_assert_int_eq(
	    pick(w, 1, 2, eps, 2, CONFIG_BALANCE_ROUND_ROBIN, NULL, t, NULL, 0),
	    0);
	/* the back-off was reset: the next ejection is 10 s again */
	for (i = 0; i < 3; i++)
		upstream_report(w, bad, false, t);
	ck_assert(upstream_ep_ejected(bad, t + 10 * SEC - 1));
	ck_assert(!upstream_ep_ejected(bad, t + 10 * SEC));
	/* an abandoned probe stops blocking after a while */
	t += 10 * SEC;
	ck_assert_int_eq(
	    pick(w, 1, 3, eps, 2, CONFIG_BALANCE_ROUND_ROBIN, NULL, t, NULL, 0),
	    0);
	ck_assert_int_eq(
	    pick(w, 1, 3, eps, 2, CONFIG_BALANCE_ROUND_ROBIN, NULL, t, NULL, 0),
	    1);
	ck_assert_int_eq(
	    pick(w, 1, 3, eps, 2, CONFIG_BALANCE_ROUND_ROBIN, NULL, t, NULL, 0),
	    0);
	ck_assert_int_eq(
	    pick(w, 1, 3, eps, 2, CONFIG_BALANCE_ROUND_ROBIN, NULL, t, NULL, 0),
	    0);
	ck_assert_int_eq(pick(w, 1, 3, eps, 2, CONFIG_BALANCE_ROUND_ROBIN, NULL,
			      t + 60 * SEC, NULL, 0),
			 1);
	upstream_stats(w, &st);
	ck_assert_uint_eq(st.ejections, 3);
	upstream_worker_free(w);
}
END_TEST

START_TEST(test_backoff_cap)
{
	struct upstream_worker *w;
	struct config_addr a = addr("10.0.0.1", 80);
	struct upstream_ep *ep;
	uint64_t t = T0, expect[] = {2, 4, 8, 10, 10};
	size_t i;

	ck_assert_int_eq(upstream_worker_new(&w), 0);
	ck_assert_int_eq(
	    upstream_worker_configure(w, 0, 0, 0, 0, 20 * SEC, 10 * SEC),
	    -EINVAL);
	ck_assert_int_eq(
	    upstream_worker_configure(w, 0, 0, 0, 1, 2 * SEC, 10 * SEC), 0);
	ep = ep_of(w, &a, 1, 0);
	for (i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
		upstream_report(w, ep, false, t);
		ck_assert(upstream_ep_ejected(ep, t + expect[i] * SEC - 1));
		ck_assert(!upstream_ep_ejected(ep, t + expect[i] * SEC));
		t += expect[i] * SEC;
	}
	upstream_worker_free(w);
}
END_TEST

START_TEST(test_panic)
{
	struct upstream_worker *w;
	struct config_addr eps[5];
	struct upstream_ep *e[3], *ep;
	struct upstream_stats st;
	int i;

	five(eps);
	ck_assert_int_eq(upstream_worker_new(&w), 0);
	for (i = 0; i < 3; i++)
		e[i] = ep_of(w, eps, 3, (size_t)i);
	/* ejected at T0+1, T0, T0+2: e[1] comes back soonest */
	for (i = 0; i < 3; i++) {
		upstream_report(w, e[0], false, T0 + SEC);
		upstream_report(w, e[1], false, T0);
		upstream_report(w, e[2], false, T0 + 2 * SEC);
	}
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(pick(w, 1, 0, eps, 3, (enum config_balance)i,
				      NULL, T0 + 3 * SEC, NULL, 0),
				 1);
	/* unless it was already tried */
	ck_assert_int_eq(pick(w, 1, 0, eps, 3, CONFIG_BALANCE_ROUND_ROBIN, NULL,
			      T0 + 3 * SEC, &e[1], 1),
			 0);
	ck_assert_int_eq(upstream_select(w, 1, 0, eps, 3,
					 CONFIG_BALANCE_ROUND_ROBIN, NULL,
					 T0 + 3 * SEC, e, 3, &ep),
			 -EHOSTUNREACH);
	upstream_stats(w, &st);
	ck_assert_uint_eq(st.panics, 4);
	upstream_worker_free(w);
}
END_TEST

/* max_inflight: a full endpoint skipped (round robin and ip_hash), all
 * full -EBUSY (not a panic choice), an ejected one under its cap chosen
 * only when none is available; upstream_has_room agrees */
START_TEST(test_cap)
{
	struct upstream_worker *w;
	struct config_addr eps[5];
	struct upstream_ep *e[2], *ep;
	struct sockaddr_in c = v4(0x0a000001);
	int i;

	five(eps);
	ck_assert_int_eq(upstream_worker_new(&w), 0);
	for (i = 0; i < 2; i++)
		e[i] = ep_of(w, eps, 2, (size_t)i);
	/* two slots each: four takes, then none */
	for (i = 0; i < 4; i++) {
		ck_assert_int_eq(upstream_select_cap(w, 1, 0, eps, 2,
						     CONFIG_BALANCE_IP_HASH,
						     (struct sockaddr *)&c, T0,
						     NULL, 0, 2, &ep),
				 0);
		ck_assert(upstream_inflight_take(ep, 2));
	}
	ck_assert_uint_eq(upstream_ep_inflight(e[0]), 2);
	ck_assert_uint_eq(upstream_ep_inflight(e[1]), 2);
	ck_assert(!upstream_inflight_take(e[0], 2));
	ck_assert(!upstream_has_room(w, eps, 2, NULL, 0, 2, T0));
	ck_assert_int_eq(upstream_select_cap(w, 1, 0, eps, 2,
					     CONFIG_BALANCE_ROUND_ROBIN, NULL,
					     T0, NULL, 0, 2, &ep),
			 -EBUSY);
	/* no cap: as upstream_select */
	ck_assert(upstream_has_room(w, eps, 2, NULL, 0, 0, T0));
	ck_assert_int_eq(upstream_select_cap(w, 1, 0, eps, 2,
					     CONFIG_BALANCE_ROUND_ROBIN, NULL,
					     T0, NULL, 0, 0, &ep),
			 0);
	/* a slot freed: that endpoint, whatever round robin's turn */
	upstream_inflight_add(e[1], -1);
	ck_assert(upstream_has_room(w, eps, 2, NULL, 0, 2, T0));
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(upstream_select_cap(w, 1, 0, eps, 2,
						     CONFIG_BALANCE_ROUND_ROBIN,
						     NULL, T0, NULL, 0, 2, &ep),
				 0);
		ck_assert_ptr_eq(ep, e[1]);
	}
	/* ... unless tried */
	ck_assert(!upstream_has_room(w, eps, 2, &e[1], 1, 2, T0));
	/* e[1] ejected: e[0] is full and available, so wait (-EBUSY) */
	for (i = 0; i < 3; i++)
		upstream_report(w, e[1], false, T0);
	ck_assert(!upstream_has_room(w, eps, 2, NULL, 0, 2, T0 + 1));
	ck_assert_int_eq(upstream_select_cap(w, 1, 0, eps, 2,
					     CONFIG_BALANCE_ROUND_ROBIN, NULL,
					     T0 + 1, NULL, 0, 2, &ep),
			 -EBUSY);
	/* both ejected: panic mode takes the one under its cap */
	for (i = 0; i < 3; i++)
		upstream_report(w, e[0], false, T0 + 2);
	ck_assert(upstream_has_room(w, eps, 2, NULL, 0, 2, T0 + 3));
	ck_assert_int_eq(upstream_select_cap(w, 1, 0, eps, 2,
					     CONFIG_BALANCE_ROUND_ROBIN, NULL,
					     T0 + 3, NULL, 0, 2, &ep),
			 0);
	ck_assert_ptr_eq(ep, e[1]);
	upstream_worker_free(w);
}
END_TEST

/* A connected pair: fds[0] pooled side, fds[1] the "backend". */
static void pair(int fds[2])
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
}

/* A release function that records what the pool freed. */
static int released[8];
static size_t n_released;

static void rec_release(void *obj, int fd)
{
	ck_assert_ptr_eq(obj, &released); /* the object given */
	if (n_released < 8)
		released[n_released++] = fd;
	close(fd);
}

START_TEST(test_pool_objects)
{
	struct upstream_worker *w;
	struct config_addr eps[5];
	struct upstream_ep *a;
	struct upstream_stats st;
	void *obj = NULL;
	int p[3][2], i;

	five(eps);
	n_released = 0;
	ck_assert_int_eq(upstream_worker_new(&w), 0);
	upstream_worker_set_release(w, rec_release);
	a = ep_of(w, eps, 1, 0);
	for (i = 0; i < 3; i++)
		pair(p[i]);
	/* an object's entry is trusted without the peek: bytes waiting on
	 * it do not make take close it (its holder watches it) */
	ck_assert_int_eq(write(p[0][1], "x", 1), 1);
	upstream_pool_give_obj(w, a, p[0][0], &released, T0);
	ck_assert_int_eq(upstream_pool_take_obj(w, a, T0 + 1, &obj), p[0][0]);
	ck_assert_ptr_eq(obj, &released);
	ck_assert_uint_eq(n_released, 0);
	/* forget takes one entry out without releasing it */
	upstream_pool_give_obj(w, a, p[0][0], &released, T0 + 2);
	upstream_pool_give_obj(w, a, p[1][0], NULL, T0 + 3);
	ck_assert_int_eq(upstream_pool_forget(a, &released), 0);
	ck_assert_int_eq(upstream_pool_forget(a, &released), -ENOENT);
	ck_assert_uint_eq(n_released, 0);
	ck_assert(!fd_closed(p[0][0]));
	/* a plain fd still comes back with no object */
	ck_assert_int_eq(upstream_pool_take_obj(w, a, T0 + 4, &obj), p[1][0]);
	ck_assert_ptr_null(obj);
	/* bounds, expiry and free go through the release function */
	ck_assert_int_eq(upstream_worker_configure(w, 1, 0, 0, 0, 0, 0), 0);
	upstream_pool_give_obj(w, a, p[0][0], &released, T0 + 5);
	upstream_pool_give_obj(w, a, p[2][0], &released, T0 + 6);
	ck_assert_uint_eq(n_released, 1);
	ck_assert_int_eq(released[0], p[0][0]);
	upstream_stats(w, &st);
	ck_assert_uint_eq(st.idle_fds, 1);
	upstream_worker_free(w);
	ck_assert_uint_eq(n_released, 2);
	ck_assert_int_eq(released[1], p[2][0]);
	close(p[1][0]);
	for (i = 0; i < 3; i++)
		close(p[i][1]);
}
END_TEST

START_TEST(test_pool_lifo_bound)
{
	struct upstream_worker *w;
	struct config_addr eps[5];
	struct upstream_ep *a, *b;
	struct upstream_stats st;
	int p[4][2], q[2][2], i;

	five(eps);
	ck_assert_int_eq(upstream_worker_new(&w), 0);
	a = ep_of(w, eps, 2, 0);
	b = ep_of(w, eps, 2, 1);
	ck_assert_int_eq(upstream_pool_take(w, a, T0), -1);
	for (i = 0; i < 3; i++) {
		pair(p[i]);
		upstream_pool_give(w, a, p[i][0], T0 + (uint64_t)i);
	}
	/* LIFO */
	ck_assert_int_eq(upstream_pool_take(w, b, T0), -1);
	ck_assert_int_eq(upstream_pool_take(w, a, T0 + 5), p[2][0]);
	ck_assert_int_eq(upstream_pool_take(w, a, T0 + 5), p[1][0]);
	upstream_pool_give(w, a, p[2][0], T0 + 6);
	ck_assert_int_eq(upstream_pool_take(w, a, T0 + 7), p[2][0]);
	ck_assert_int_eq(upstream_pool_take(w, a, T0 + 7), p[0][0]);
	ck_assert_int_eq(upstream_pool_take(w, a, T0 + 7), -1);
	/* per-endpoint bound 2: the oldest is closed */
	ck_assert_int_eq(upstream_worker_configure(w, 2, 3, 0, 0, 0, 0), 0);
	upstream_pool_give(w, a, p[0][0], T0 + 10);
	upstream_pool_give(w, a, p[1][0], T0 + 11);
	upstream_pool_give(w, a, p[2][0], T0 + 12);
	ck_assert(fd_closed(p[0][0]));
	ck_assert(!fd_closed(p[1][0]));
	/* per-worker bound 3: a fourth fd is closed at once */
	pair(p[3]);
	upstream_pool_give(w, b, p[3][0], T0 + 13);
	pair(q[0]);
	upstream_pool_give(w, b, q[0][0], T0 + 14);
	ck_assert(fd_closed(q[0][0]));
	upstream_stats(w, &st);
	ck_assert_uint_eq(st.idle_fds, 3);
	ck_assert_uint_eq(st.pool_closed, 2);
	ck_assert_uint_eq(st.pool_hits, 4);
	ck_assert_uint_eq(st.pool_misses, 3);
	upstream_pool_give(w, b, -1, T0); /* ignored */
	upstream_worker_free(w);
	for (i = 1; i < 4; i++)
		ck_assert(fd_closed(p[i][0]));
	for (i = 0; i < 4; i++)
		close(p[i][1]);
	close(q[0][1]);
}
END_TEST

START_TEST(test_pool_stale)
{
	struct upstream_worker *w;
	struct config_addr a = addr("127.0.0.1", 80);
	struct upstream_ep *ep;
	struct upstream_stats st;
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int good[2], data[2], lfd, cfd, sfd;

	ck_assert_int_eq(upstream_worker_new(&w), 0);
	ep = ep_of(w, &a, 1, 0);
	/* loopback TCP whose peer closes */
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(lfd, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ck_assert_int_eq(listen(lfd, 4), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sin, &len), 0);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(cfd, 0);
	ck_assert_int_eq(connect(cfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	sfd = accept(lfd, NULL, NULL);
	ck_assert_int_ge(sfd, 0);
	pair(good);
	pair(data);
	upstream_pool_give(w, ep, good[0], T0);
	upstream_pool_give(w, ep, cfd, T0 + 1);
	upstream_pool_give(w, ep, data[0], T0 + 2);
	close(sfd); /* the backend closed: a FIN waits on cfd */
	ck_assert_int_eq(write(data[1], "HTTP/1.1 200", 12), 12);
	/* both newer fds are discarded, the good one is returned */
	ck_assert_int_eq(upstream_pool_take(w, ep, T0 + 3), good[0]);
	ck_assert(fd_closed(cfd));
	ck_assert(fd_closed(data[0]));
	upstream_stats(w, &st);
	ck_assert_uint_eq(st.pool_stale, 2);
	close(good[0]);
	close(good[1]);
	close(data[1]);
	close(lfd);
	upstream_worker_free(w);
}
END_TEST

START_TEST(test_pool_expire)
{
	struct upstream_worker *w;
	struct config_addr a = addr("10.0.0.1", 80);
	struct upstream_ep *ep;
	int p[3][2], i;

	ck_assert_int_eq(upstream_worker_new(&w), 0);
	ep = ep_of(w, &a, 1, 0);
	for (i = 0; i < 3; i++)
		pair(p[i]);
	upstream_pool_give(w, ep, p[0][0], T0);
	upstream_pool_give(w, ep, p[1][0], T0 + 30 * SEC);
	upstream_pool_give(w, ep, p[2][0], T0 + 50 * SEC);
	upstream_pool_expire(w, T0 + 59 * SEC);
	ck_assert(!fd_closed(p[0][0]));
	upstream_pool_expire(w, T0 + 60 * SEC);
	ck_assert(fd_closed(p[0][0]));
	ck_assert(!fd_closed(p[1][0]));
	ck_assert(!fd_closed(p[2][0]));
	/* take does not return an fd past its timeout either */
	ck_assert_int_eq(upstream_pool_take(w, ep, T0 + 120 * SEC), -1);
	ck_assert(fd_closed(p[1][0]));
	ck_assert(fd_closed(p[2][0]));
	for (i = 0; i < 3; i++)
		close(p[i][1]);
	upstream_worker_free(w);
}
END_TEST

START_TEST(test_free_closes_all)
{
	struct upstream_worker *w;
	struct config_addr eps[5];
	struct upstream_ep *e[5];
	int p[40][2], before, i;

	five(eps);
	before = count_fds();
	ck_assert_int_eq(upstream_worker_new(&w), 0);
	for (i = 0; i < 5; i++)
		e[i] = ep_of(w, eps, 5, (size_t)i);
	for (i = 0; i < 40; i++) {
		pair(p[i]);
		upstream_pool_give(w, e[i % 5], p[i][0], T0);
		close(p[i][1]);
	}
	ck_assert_int_eq(count_fds(), before + 40);
	upstream_worker_free(w);
	ck_assert_int_eq(count_fds(), before);
	for (i = 0; i < 40; i++)
		ck_assert(fd_closed(p[i][0]));
}
END_TEST

START_TEST(test_forget)
{
	struct upstream_worker *w;
	struct config_addr eps[5];
	struct upstream_ep *busy;
	struct upstream_stats st;
	int p[2];

	five(eps);
	ck_assert_int_eq(upstream_worker_new(&w), 0);
	ep_of(w, eps, 3, 0);
	busy = ep_of(w, &eps[3], 2, 0);
	ep_of(w, &eps[4], 1, 0);
	upstream_inflight_add(busy, 1);
	pair(p);
	upstream_worker_configure(w, 0, 0, 3600 * SEC, 0, 0, 0);
	upstream_pool_give(w, ep_of(w, &eps[4], 1, 0), p[0], T0);
	upstream_stats(w, &st);
	ck_assert_uint_eq(st.endpoints, 5);
	upstream_pool_expire(w, T0 + 60 * SEC);
	upstream_stats(w, &st);
	ck_assert_uint_eq(st.endpoints, 5);
	/* long unused: forgotten, except what is in flight or pooled */
	upstream_pool_expire(w, T0 + 3000 * SEC);
	upstream_stats(w, &st);
	ck_assert_uint_eq(st.endpoints, 2);
	ck_assert_uint_eq(upstream_ep_inflight(busy), 1);
	close(p[1]);
	upstream_worker_free(w);
}
END_TEST

static Suite *upstream_suite(void)
{
	Suite *s = suite_create("upstream");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_rr);
	tcase_add_test(tc, test_rr_generation);
	tcase_add_test(tc, test_shared_endpoint);
	tcase_add_test(tc, test_least_inflight);
	tcase_add_test(tc, test_hash_stable_spread);
	tcase_add_test(tc, test_hash_minimal_movement);
	tcase_add_test(tc, test_exclude);
	tcase_add_test(tc, test_eject);
	tcase_add_test(tc, test_backoff_cap);
	tcase_add_test(tc, test_panic);
	tcase_add_test(tc, test_cap);
	tcase_add_test(tc, test_pool_lifo_bound);
	tcase_add_test(tc, test_pool_objects);
	tcase_add_test(tc, test_pool_stale);
	tcase_add_test(tc, test_pool_expire);
	tcase_add_test(tc, test_free_closes_all);
	tcase_add_test(tc, test_forget);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(upstream_suite());
}
