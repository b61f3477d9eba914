/* SPDX-License-Identifier: BSD-2-Clause */
/* test_admit.c - Admit: token buckets on a fake clock, Retry-After,
 * the table's fixed size, in-flight caps, body limits. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "unit.h"

#define SEC 1000000000ULL

static struct cidr ip(const char *s)
{
	struct cidr c;

	ck_assert_int_eq(cidr_parse_addr(s, &c, NULL), 0);
	return c;
}

START_TEST(test_bucket)
{
	struct admit_limiter *l;
	struct cidr a = ip("192.0.2.1"), b = ip("192.0.2.2");
	uint64_t now = 1000 * SEC;
	unsigned ra = 0;
	int i;

	/* 1 per second, bursts of 3 */
	ck_assert_int_eq(admit_limiter_new(64, 60, 3, &l), 0);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(admit_take(l, &a, now, &ra), 0);
	ck_assert_int_eq(admit_take(l, &a, now, &ra), -EAGAIN);
	ck_assert_uint_eq(ra, 1);
	/* another client has its own bucket */
	ck_assert_int_eq(admit_take(l, &b, now, &ra), 0);
	/* half a second later: still nothing */
	ck_assert_int_eq(admit_take(l, &a, now + SEC / 2, &ra), -EAGAIN);
	ck_assert_uint_eq(ra, 1);
	/* one second later: exactly one token */
	ck_assert_int_eq(admit_take(l, &a, now + SEC, &ra), 0);
	ck_assert_int_eq(admit_take(l, &a, now + SEC, &ra), -EAGAIN);
	/* long idle: refilled to the burst, not beyond */
	now += 100 * SEC;
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(admit_take(l, &a, now, &ra), 0);
	ck_assert_int_eq(admit_take(l, &a, now, &ra), -EAGAIN);
	admit_limiter_free(l);
	admit_limiter_free(NULL);
}
END_TEST

START_TEST(test_retry_after)
{
	struct admit_limiter *l;
	struct cidr a = ip("2001:db8::1");
	unsigned ra = 0;

	/* 1 per minute, burst 1: the next token is 60 s away */
	ck_assert_int_eq(admit_limiter_new(8, 1, 1, &l), 0);
	ck_assert_int_eq(admit_take(l, &a, SEC, &ra), 0);
	ck_assert_int_eq(admit_take(l, &a, SEC, &ra), -EAGAIN);
	ck_assert_uint_eq(ra, 60);
	ck_assert_int_eq(admit_take(l, &a, 21 * SEC + 1, &ra), -EAGAIN);
	ck_assert_uint_eq(ra, 40);
	ck_assert_int_eq(admit_take(l, &a, 61 * SEC, &ra), 0);
	admit_limiter_free(l);
}
END_TEST

START_TEST(test_ipv6_slash64)
{
	struct admit_limiter *l;
	struct cidr a = ip("2001:db8:1:2::1"), b = ip("2001:db8:1:2:ffff::9"),
		    c = ip("2001:db8:1:3::1");
	unsigned ra;

	ck_assert_int_eq(admit_limiter_new(64, 60, 1, &l), 0);
	ck_assert_int_eq(admit_take(l, &a, SEC, &ra), 0);
	ck_assert_int_eq(admit_take(l, &b, SEC, &ra), -EAGAIN); /* same /64 */
	ck_assert_int_eq(admit_take(l, &c, SEC, &ra), 0);
	ck_assert_uint_eq(admit_limiter_count(l), 2);
	admit_limiter_free(l);
}
END_TEST

START_TEST(test_eviction_bound)
{
	struct admit_limiter *l;
	struct cidr a;
	char buf[32];
	unsigned ra, i;

	ck_assert_int_eq(admit_limiter_new(64, 60, 1, &l), 0);
	for (i = 0; i < 10000; i++) {
		snprintf(buf, sizeof(buf), "10.%u.%u.%u", i >> 16,
			 (i >> 8) & 255, i & 255);
		a = ip(buf);
		ck_assert_int_eq(admit_take(l, &a, SEC + i, &ra), 0);
		ck_assert_uint_le(admit_limiter_count(l), 64);
	}
	ck_assert_uint_eq(admit_limiter_count(l), 64);
	/* the most recent client is still remembered */
	ck_assert_int_eq(admit_take(l, &a, SEC + i, &ra), -EAGAIN);
	admit_limiter_free(l);
}
END_TEST

START_TEST(test_off_and_args)
{
	struct admit_limiter *l;
	struct cidr a = ip("192.0.2.1");
	unsigned ra;
	int i;

	ck_assert_int_eq(admit_limiter_new(0, 60, 1, &l), -EINVAL);
	ck_assert_int_eq(admit_limiter_new(8, 60, 0, &l), -EINVAL);
	ck_assert_int_eq(admit_limiter_new(8, 0, 0, &l), 0);
	for (i = 0; i < 1000; i++)
		ck_assert_int_eq(admit_take(l, &a, SEC, &ra), 0);
	admit_limiter_free(l);
}
END_TEST

START_TEST(test_inflight)
{
	struct admit_gauge g, r;

	admit_gauge_init(&g, 3);
	admit_gauge_init(&r, 2);
	ck_assert_int_eq(admit_inflight_enter(&g, &r), 0);
	ck_assert_int_eq(admit_inflight_enter(&g, &r), 0);
	/* route full: nothing stays counted */
	ck_assert_int_eq(admit_inflight_enter(&g, &r), -EBUSY);
	ck_assert_uint_eq(atomic_load(&g.n), 2);
	ck_assert_uint_eq(atomic_load(&r.n), 2);
	ck_assert_int_eq(admit_inflight_enter(&g, NULL), 0);
	/* global full */
	ck_assert_int_eq(admit_inflight_enter(&g, NULL), -EBUSY);
	admit_inflight_leave(&g, &r);
	ck_assert_int_eq(admit_inflight_enter(&g, &r), 0);
	admit_inflight_leave(&g, &r);
	admit_inflight_leave(&g, &r);
	admit_inflight_leave(&g, NULL);
	ck_assert_uint_eq(atomic_load(&g.n), 0);
	ck_assert_uint_eq(atomic_load(&r.n), 0);
	/* 0: no cap */
	admit_gauge_init(&g, 0);
	for (int i = 0; i < 100000; i++)
		ck_assert_int_eq(admit_inflight_enter(&g, NULL), 0);
}
END_TEST

START_TEST(test_body)
{
	struct admit_body b;

	ck_assert(admit_body_declared_ok(10, 10));
	ck_assert(!admit_body_declared_ok(11, 10));
	ck_assert(admit_body_declared_ok(UINT64_MAX, 0));
	admit_body_init(&b, 10);
	ck_assert_int_eq(admit_body_add(&b, 4), 0);
	ck_assert_int_eq(admit_body_add(&b, 6), 0);
	ck_assert_int_eq(admit_body_add(&b, 1), -EFBIG);
	admit_body_init(&b, 10);
	ck_assert_int_eq(admit_body_add(&b, UINT64_MAX), -EFBIG);
	ck_assert_int_eq(admit_body_add(&b, UINT64_MAX), -EFBIG);
	admit_body_init(&b, 0);
	ck_assert_int_eq(admit_body_add(&b, UINT64_MAX), 0);
}
END_TEST

#define MS 1000000ULL
#define S 1000000000ULL

/* The gap rule alone (min_rate 0): grace after the latest byte. */
START_TEST(test_rate_gap)
{
	struct admit_rate r;

	admit_rate_init(&r, 1000, 0, 5 * S);
	ck_assert_uint_eq(admit_rate_deadline(&r), 6 * S);
	ck_assert(!admit_rate_expired(&r, 6 * S - 1));
	ck_assert(admit_rate_expired(&r, 6 * S));
	admit_rate_seen(&r, 10, 5 * S + 500 * MS);
	ck_assert_uint_eq(admit_rate_deadline(&r), 6 * S + 500 * MS);
	/* no new byte: nothing moves; a smaller count is ignored */
	admit_rate_seen(&r, 10, 5 * S + 900 * MS);
	admit_rate_seen(&r, 3, 5 * S + 900 * MS);
	ck_assert_uint_eq(admit_rate_deadline(&r), 6 * S + 500 * MS);
	/* without a rate rule a slow trickle lasts forever */
	for (uint64_t i = 1; i <= 100; i++)
		admit_rate_seen(&r, 10 + i, 5 * S + i * 900 * MS);
	ck_assert(!admit_rate_expired(&r, 5 * S + 100 * 900 * MS + 999 * MS));
	ck_assert(admit_rate_expired(&r, 5 * S + 100 * 900 * MS + S));
}
END_TEST

/* The rate rule: grace + n / min_rate of running time for n bytes. */
START_TEST(test_rate_min)
{
	struct admit_rate r;
	uint64_t t = 0, n = 0;

	admit_rate_init(&r, 1000, 2000, 0);
	ck_assert_uint_eq(admit_rate_deadline(&r), S);
	/* 1000 bytes at once: 0.5 s earned; the gap rule still binds */
	admit_rate_seen(&r, 1000, 100 * MS);
	ck_assert_uint_eq(admit_rate_deadline(&r), 1100 * MS);
	/* 100 bytes every 0.5 s (200 B/s): never a gap, but the average
	 * falls behind and the deadline comes at grace + n / 2000 */
	admit_rate_init(&r, 1000, 2000, 0);
	while (!admit_rate_expired(&r, t + 500 * MS)) {
		t += 500 * MS;
		n += 100;
		admit_rate_seen(&r, n, t);
		ck_assert_uint_eq(admit_rate_deadline(&r), S + n * S / 2000);
		ck_assert_uint_lt(t, 10 * S);
	}
	ck_assert_uint_eq(t, S); /* at 1 s: 200 bytes earned 0.1 s */
	/* fast enough (4000 B/s): the gap rule is what binds */
	admit_rate_init(&r, 1000, 2000, 0);
	for (t = 100 * MS, n = 400; t <= 60 * S; t += 100 * MS, n += 400) {
		ck_assert(!admit_rate_expired(&r, t));
		admit_rate_seen(&r, n, t);
		ck_assert_uint_eq(admit_rate_deadline(&r), t + S);
	}
}
END_TEST

/* Paused time does not count. */
START_TEST(test_rate_pause)
{
	struct admit_rate r;

	admit_rate_init(&r, 1000, 1000, 0);
	admit_rate_seen(&r, 100, 500 * MS); /* gap: 1.5 s; rate: 1.1 s */
	ck_assert_uint_eq(admit_rate_deadline(&r), 1100 * MS);
	admit_rate_pause(&r, 800 * MS);
	admit_rate_pause(&r, 900 * MS); /* no-op */
	ck_assert_uint_eq(admit_rate_deadline(&r), UINT64_MAX);
	ck_assert(!admit_rate_expired(&r, 100 * S));
	/* a byte counted while paused is at the time of the pause */
	admit_rate_seen(&r, 200, 50 * S);
	admit_rate_resume(&r, 100 * S);
	admit_rate_resume(&r, 101 * S); /* no-op */
	/* 99.2 s later: rate 1.2 s of running time, gap 1.8 s */
	ck_assert_uint_eq(admit_rate_deadline(&r), 100 * S + 400 * MS);
	ck_assert(!admit_rate_expired(&r, 100 * S + 399 * MS));
	ck_assert(admit_rate_expired(&r, 100 * S + 400 * MS));
}
END_TEST

/* Extreme values saturate instead of wrapping. */
START_TEST(test_rate_extremes)
{
	struct admit_rate r;

	admit_rate_init(&r, UINT64_MAX, 1, UINT64_MAX - 5);
	ck_assert_uint_eq(admit_rate_deadline(&r), UINT64_MAX);
	admit_rate_init(&r, 1000, 1, 0);
	admit_rate_seen(&r, UINT64_MAX, 10);
	ck_assert_uint_eq(admit_rate_deadline(&r), 10 + S);
	admit_rate_init(&r, 1000, UINT64_MAX, 0);
	admit_rate_seen(&r, UINT64_MAX, 0);
	ck_assert_uint_eq(admit_rate_deadline(&r), S);
	/* a clock read before its start does not underflow */
	admit_rate_init(&r, 1000, 0, 10 * S);
	admit_rate_seen(&r, 1, 5 * S);
	ck_assert_uint_eq(admit_rate_deadline(&r), 11 * S);
	admit_rate_pause(&r, S);
	admit_rate_resume(&r, 0);
	ck_assert_uint_eq(admit_rate_deadline(&r), S);
}
END_TEST

/* The admission queue: what notify was told, in order. */
static uint64_t told[16];
static unsigned ntold;
static int notify_fail; /* notify refuses (a full mailbox) */

static int record_notify(void *owner, uint64_t handle)
{
	(void)owner;
	if (notify_fail)
		return -EAGAIN;
	if (ntold < 16)
		told[ntold++] = handle;
	return 0;
}

static void waiter_init(struct admit_waiter *w, uint64_t handle,
			struct admit_gauge *route)
{
	memset(w, 0, sizeof(*w));
	w->handle = handle;
	w->route = route;
}

START_TEST(test_queue_fifo)
{
	struct admit_gauge g;
	struct admit_queue q;
	struct admit_waiter w[4];
	unsigned i;

	ntold = 0;
	notify_fail = 0;
	admit_gauge_init(&g, 1);
	ck_assert_int_eq(admit_queue_init(&q, &g, 3, record_notify), 0);
	ck_assert(!admit_queue_busy(&q));
	for (i = 0; i < 4; i++)
		waiter_init(&w[i], 10 + i, NULL);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(admit_queue_add(&q, &w[i]), 0);
	ck_assert_int_eq(admit_queue_add(&q, &w[3]), -ENOSPC); /* bound */
	ck_assert_uint_eq(admit_queue_length(&q), 3);
	ck_assert(admit_queue_busy(&q));
	/* the slot is taken: nobody is told */
	ck_assert_int_eq(admit_inflight_enter(&g, NULL), 0);
	admit_queue_kick(&q);
	ck_assert_uint_eq(ntold, 0);
	/* it frees: the first waiter, once, however often it is kicked */
	admit_inflight_leave(&g, NULL);
	admit_queue_kick(&q);
	admit_queue_kick(&q);
	ck_assert_uint_eq(ntold, 1);
	ck_assert_uint_eq(told[0], 10);
	/* it enters and leaves the queue; the next kick tells the second */
	ck_assert_int_eq(admit_inflight_enter(&g, NULL), 0);
	ck_assert(admit_queue_remove(&q, &w[0]));
	ck_assert(!admit_queue_remove(&q, &w[0]));
	admit_inflight_leave(&g, NULL);
	admit_queue_kick(&q);
	ck_assert_uint_eq(ntold, 2);
	ck_assert_uint_eq(told[1], 11);
	/* one taken from the middle: the order of the rest holds */
	ck_assert(admit_queue_remove(&q, &w[1]));
	admit_queue_kick(&q);
	ck_assert_uint_eq(ntold, 3);
	ck_assert_uint_eq(told[2], 12);
	ck_assert(admit_queue_remove(&q, &w[2]));
	ck_assert(!admit_queue_busy(&q));
	admit_queue_destroy(&q);
}
END_TEST

START_TEST(test_queue_routes_and_retry)
{
	struct admit_gauge g, full, free_route;
	struct admit_queue q;
	struct admit_waiter a, b;

	ntold = 0;
	notify_fail = 0;
	admit_gauge_init(&g, 10);
	admit_gauge_init(&full, 1);
	admit_gauge_init(&free_route, 1);
	ck_assert_int_eq(admit_inflight_enter(&g, &full), 0);
	ck_assert_int_eq(admit_queue_init(&q, &g, 8, record_notify), 0);
	waiter_init(&a, 1, &full);
	waiter_init(&b, 2, &free_route);
	ck_assert_int_eq(admit_queue_add(&q, &a), 0);
	ck_assert_int_eq(admit_queue_add(&q, &b), 0);
	/* a's route is full: b, behind it, is told first */
	admit_queue_kick(&q);
	ck_assert_uint_eq(ntold, 1);
	ck_assert_uint_eq(told[0], 2);
	/* b lost the race for the slot: told again at the next kick */
	admit_queue_retry(&q, &b);
	admit_queue_kick(&q);
	ck_assert_uint_eq(ntold, 2);
	ck_assert_uint_eq(told[1], 2);
	admit_queue_remove(&q, &b);
	/* a notify that cannot be delivered leaves the waiter untold */
	admit_inflight_leave(&g, &full);
	notify_fail = 1;
	admit_queue_kick(&q);
	ck_assert_uint_eq(ntold, 2);
	notify_fail = 0;
	admit_queue_kick(&q);
	ck_assert_uint_eq(ntold, 3);
	ck_assert_uint_eq(told[2], 1);
	admit_queue_remove(&q, &a);
	/* off: nothing queues */
	admit_queue_set_max(&q, 0);
	ck_assert_int_eq(admit_queue_add(&q, &a), -ENOSPC);
	admit_queue_destroy(&q);
}
END_TEST

static Suite *admit_suite(void)
{
	Suite *s = suite_create("admit");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_bucket);
	tcase_add_test(tc, test_retry_after);
	tcase_add_test(tc, test_ipv6_slash64);
	tcase_add_test(tc, test_eviction_bound);
	tcase_add_test(tc, test_off_and_args);
	tcase_add_test(tc, test_inflight);
	tcase_add_test(tc, test_queue_fifo);
	tcase_add_test(tc, test_queue_routes_and_retry);
	tcase_add_test(tc, test_body);
	tcase_add_test(tc, test_rate_gap);
	tcase_add_test(tc, test_rate_min);
	tcase_add_test(tc, test_rate_pause);
	tcase_add_test(tc, test_rate_extremes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(admit_suite());
}
