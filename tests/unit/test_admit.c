/* SPDX-License-Identifier: BSD-2-Clause */
/* test_admit.c - Admit: token buckets on a fake clock, Retry-After, the
 * shared table (fixed size, which client it forgets, a rate changed under
 * it, threads taking from one bucket at once), in-flight caps, body
 * limits. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "unit.h"

#define SEC 1000000000ULL

/* ck_assert_int_eq without Check's bookkeeping on success (a write to
 * the parent process per call: slow in long loops on a busy machine) */
#define EXPECT_EQ(x, want)                                                     \
	do {                                                                   \
		long long x_ = (long long)(x), w_ = (long long)(want);         \
		if (x_ != w_)                                                  \
			ck_abort_msg("%s is %lld, wanted %lld", #x, x_, w_);   \
	} while (0)

static struct cidr ip(const char *s)
{
	struct cidr c;

	if (cidr_parse_addr(s, &c, NULL))
		ck_abort_msg("%s: not an address", s);
	return c;
}

/* A table of capacity clients and a bucket of per_min, burst. */
static struct admit_limiter *table(size_t capacity, uint64_t per_min,
				   uint64_t burst, struct admit_bucket *b)
{
	struct admit_limiter *l;

	ck_assert_int_eq(admit_limiter_new(capacity, &l), 0);
	ck_assert_int_eq(admit_bucket_set(b, per_min, burst), 0);
	return l;
}

static size_t clients(const struct admit_limiter *l)
{
	struct admit_limiter_stats st;

	admit_limiter_stats(l, &st);
	return st.clients;
}

START_TEST(test_bucket)
{
	struct admit_bucket b;
	struct admit_limiter *l = table(64, 60, 3, &b); /* 1/s, burst 3 */
	struct cidr a = ip("192.0.2.1"), c = ip("192.0.2.2");
	uint64_t now = 1000 * SEC;
	unsigned ra = 0;
	int i;

	for (i = 0; i < 3; i++)
		ck_assert_int_eq(admit_take(l, &b, &a, now, &ra), 0);
	ck_assert_int_eq(admit_take(l, &b, &a, now, &ra), -EAGAIN);
	ck_assert_uint_eq(ra, 1);
	/* another client has its own bucket */
	ck_assert_int_eq(admit_take(l, &b, &c, now, &ra), 0);
	/* half a second later: still nothing */
	ck_assert_int_eq(admit_take(l, &b, &a, now + SEC / 2, &ra), -EAGAIN);
	ck_assert_uint_eq(ra, 1);
	/* one second later: exactly one token */
	ck_assert_int_eq(admit_take(l, &b, &a, now + SEC, &ra), 0);
	ck_assert_int_eq(admit_take(l, &b, &a, now + SEC, &ra), -EAGAIN);
	/* long idle: refilled to the burst, not beyond */
	now += 100 * SEC;
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(admit_take(l, &b, &a, now, &ra), 0);
	ck_assert_int_eq(admit_take(l, &b, &a, now, &ra), -EAGAIN);
	admit_limiter_free(l);
	admit_limiter_free(NULL);
}
END_TEST

START_TEST(test_retry_after)
{
	struct admit_bucket b;
	struct admit_limiter *l = table(8, 1, 1, &b); /* 1/min, burst 1 */
	struct cidr a = ip("2001:db8::1");
	unsigned ra = 0;

	ck_assert_int_eq(admit_take(l, &b, &a, SEC, &ra), 0);
	ck_assert_int_eq(admit_take(l, &b, &a, SEC, &ra), -EAGAIN);
	ck_assert_uint_eq(ra, 60);
	ck_assert_int_eq(admit_take(l, &b, &a, 21 * SEC + 1, &ra), -EAGAIN);
	ck_assert_uint_eq(ra, 40);
	ck_assert_int_eq(admit_take(l, &b, &a, 61 * SEC, &ra), 0);
	admit_limiter_free(l);
}
END_TEST

START_TEST(test_ipv6_slash64)
{
	struct admit_bucket b;
	struct admit_limiter *l = table(64, 60, 1, &b);
	struct cidr a = ip("2001:db8:1:2::1"), c = ip("2001:db8:1:2:ffff::9"),
		    d = ip("2001:db8:1:3::1"), e = ip("0.0.0.0");
	unsigned ra;

	ck_assert_int_eq(admit_take(l, &b, &a, SEC, &ra), 0);
	ck_assert_int_eq(admit_take(l, &b, &c, SEC, &ra),
			 -EAGAIN); /* same /64 */
	ck_assert_int_eq(admit_take(l, &b, &d, SEC, &ra), 0);
	/* an IPv4 client whose bytes are an IPv6 one's start is another */
	ck_assert_int_eq(admit_take(l, &b, &e, SEC, &ra), 0);
	ck_assert_uint_eq(clients(l), 3);
	admit_limiter_free(l);
}
END_TEST

/* 10.x.y.z for i */
static struct cidr ip_nth(unsigned i)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "10.%u.%u.%u", (i >> 16) & 255,
		 (i >> 8) & 255, i & 255);
	return ip(buf);
}

START_TEST(test_eviction_bound)
{
	struct admit_bucket b;
	struct admit_limiter *l = table(64, 60, 1, &b);
	struct admit_limiter_stats st;
	struct cidr a;
	unsigned ra, i;

	for (i = 0; i < 10000; i++) {
		a = ip_nth(i);
		EXPECT_EQ(admit_take(l, &b, &a, SEC + i, &ra), 0);
		EXPECT_EQ(clients(l) <= 64, 1);
	}
	admit_limiter_stats(l, &st);
	ck_assert_uint_eq(st.capacity, 64);
	ck_assert_uint_eq(st.clients, 64);
	/* each of the others was forgotten owing its one token */
	ck_assert_uint_eq(st.evicted, 10000 - 64);
	ck_assert_uint_eq(st.untracked, 0);
	/* the most recent client is still remembered */
	ck_assert_int_eq(admit_take(l, &b, &a, SEC + i, &ra), -EAGAIN);
	admit_limiter_free(l);
}
END_TEST

/* Which client a full set forgets: a full bucket first, then, of those
 * not used lately, the one owing least. A client that spent its burst and
 * keeps sending outlives a spray of addresses that made a request each;
 * idle, it goes once the spray has passed through its set; a set of
 * spent buckets still takes a new client. */
START_TEST(test_eviction_order)
{
	struct admit_bucket b;
	struct admit_limiter *l = table(8, 1, 5, &b); /* one set; 1/min */
	struct admit_limiter_stats st;
	struct cidr x = ip("192.0.2.99"), a;
	uint64_t now = 1000 * SEC;
	unsigned ra, i;

	for (i = 0; i < 5; i++)
		ck_assert_int_eq(admit_take(l, &b, &x, now, &ra), 0);
	ck_assert_int_eq(admit_take(l, &b, &x, now, &ra), -EAGAIN);
	for (i = 0; i < 10000; i++) {
		a = ip_nth(i);
		EXPECT_EQ(admit_take(l, &b, &a, now + i, &ra), 0);
		if (i % 4 == 0) /* x keeps trying */
			EXPECT_EQ(admit_take(l, &b, &x, now + i, &ra), -EAGAIN);
	}
	ck_assert_uint_eq(ra, 60);
	admit_limiter_stats(l, &st);
	ck_assert_uint_eq(st.evicted, 10000 - 7);
	/* x idle: forgotten after the others of its set */
	for (i = 0; i < 7; i++) {
		a = ip_nth(20000 + i);
		ck_assert_int_eq(admit_take(l, &b, &a, now + 20000, &ra), 0);
	}
	ck_assert_int_eq(admit_take(l, &b, &x, now + 20000, &ra), -EAGAIN);
	for (i = 0; i < 16; i++) {
		a = ip_nth(30000 + i);
		ck_assert_int_eq(admit_take(l, &b, &a, now + 30000, &ra), 0);
	}
	ck_assert_int_eq(admit_take(l, &b, &x, now + 30000, &ra), 0);
	/* every slot spent to the bottom: a new client is still taken */
	for (i = 0; i < 8; i++) {
		a = ip_nth(100000 + i);
		while (admit_take(l, &b, &a, now + 30000, &ra) == 0)
			;
	}
	a = ip("198.51.100.1");
	ck_assert_int_eq(admit_take(l, &b, &a, now + 30000, &ra), 0);
	admit_limiter_stats(l, &st);
	ck_assert_uint_eq(st.clients, 8);
	ck_assert_uint_eq(st.untracked, 0);
	admit_limiter_free(l);
	/* a bucket full again is forgotten without counting */
	l = table(8, 1, 5, &b);
	for (i = 0; i < 8; i++) {
		a = ip_nth(i);
		ck_assert_int_eq(admit_take(l, &b, &a, now, &ra), 0);
	}
	for (i = 8; i < 100; i++) {
		a = ip_nth(i);
		EXPECT_EQ(admit_take(l, &b, &a, now + 3600 * SEC, &ra), 0);
	}
	admit_limiter_stats(l, &st);
	ck_assert_uint_eq(st.evicted, 100 - 8 - 8);
	admit_limiter_free(l);
}
END_TEST

/* A reload changes the rate: a client's bucket carries over, no deeper
 * than the new burst, and refills at the new rate. */
START_TEST(test_rate_change)
{
	struct admit_bucket slow, fast;
	struct admit_limiter *l = table(64, 1, 100, &slow); /* 1/min, 100 */
	struct cidr a = ip("192.0.2.1"), c = ip("2001:db8::7");
	uint64_t now = 1000 * SEC;
	unsigned ra, i;

	ck_assert_int_eq(admit_bucket_set(&fast, 600, 10), 0); /* 10/s */
	for (i = 0; i < 100; i++)
		ck_assert_int_eq(admit_take(l, &slow, &a, now, &ra), 0);
	ck_assert_int_eq(admit_take(l, &slow, &a, now, &ra), -EAGAIN);
	ck_assert_uint_eq(ra, 60);
	/* 100 minutes owed at the old rate: empty at the new one, not for
	 * 100 minutes */
	ck_assert_int_eq(admit_take(l, &fast, &a, now, &ra), -EAGAIN);
	ck_assert_uint_eq(ra, 1);
	ck_assert_int_eq(admit_take(l, &fast, &a, now + SEC / 10, &ra), 0);
	ck_assert_int_eq(admit_take(l, &fast, &a, now + SEC / 10, &ra),
			 -EAGAIN);
	/* a second on: the new burst, not the old one */
	for (i = 0; i < 10; i++)
		ck_assert_int_eq(admit_take(l, &fast, &a, now + 2 * SEC, &ra),
				 0);
	ck_assert_int_eq(admit_take(l, &fast, &a, now + 2 * SEC, &ra), -EAGAIN);
	/* the other way: a spent 10/s bucket under 1/min, burst 1 */
	ck_assert_int_eq(admit_bucket_set(&slow, 1, 1), 0);
	for (i = 0; i < 10; i++)
		ck_assert_int_eq(admit_take(l, &fast, &c, now, &ra), 0);
	ck_assert_int_eq(admit_take(l, &slow, &c, now, &ra), -EAGAIN);
	ck_assert_uint_eq(ra, 1);
	ck_assert_int_eq(admit_take(l, &slow, &c, now + SEC, &ra), 0);
	ck_assert_int_eq(admit_take(l, &slow, &c, now + SEC, &ra), -EAGAIN);
	ck_assert_uint_eq(ra, 60);
	admit_limiter_free(l);
}
END_TEST

START_TEST(test_off_and_args)
{
	struct admit_bucket b;
	struct admit_limiter *l;
	struct cidr a = ip("192.0.2.1");
	unsigned ra;
	int i;

	ck_assert_int_eq(admit_limiter_new(0, &l), -EINVAL);
	ck_assert_int_eq(admit_bucket_set(&b, 60, 0), -EINVAL);
	ck_assert_int_eq(admit_bucket_set(&b, 0, 0), 0);
	ck_assert_uint_eq(b.interval, 0);
	ck_assert_int_eq(admit_limiter_new(8, &l), 0);
	for (i = 0; i < 1000; i++)
		EXPECT_EQ(admit_take(l, &b, &a, SEC, &ra), 0);
	ck_assert_uint_eq(clients(l), 0);
	/* no table: nothing limited */
	ck_assert_int_eq(admit_bucket_set(&b, 1, 1), 0);
	for (i = 0; i < 10; i++)
		ck_assert_int_eq(admit_take(NULL, &b, &a, SEC, &ra), 0);
	/* the largest bucket: 1e8 at 1/min, capped, no overflow */
	ck_assert_int_eq(admit_bucket_set(&b, 1, 100000000), 0);
	ck_assert_uint_eq(b.tau, ADMIT_TAU_MAX);
	for (i = 0; i < 1000; i++)
		EXPECT_EQ(admit_take(l, &b, &a, SEC, &ra), 0);
	/* the fastest: 1e8/s */
	a = ip("192.0.2.2");
	ck_assert_int_eq(admit_bucket_set(&b, 6000000000ULL, 1), 0);
	ck_assert_uint_eq(b.interval, 10);
	ck_assert_int_eq(admit_take(l, &b, &a, 100 * SEC, &ra), 0);
	ck_assert_int_eq(admit_take(l, &b, &a, 100 * SEC, &ra), -EAGAIN);
	ck_assert_uint_eq(ra, 1);
	ck_assert_int_eq(admit_take(l, &b, &a, 100 * SEC + 10, &ra), 0);
	admit_limiter_free(l);
}
END_TEST

/* ---- threads taking from one table at once -------------------------- */

#define HOT_THREADS 4
#define HOT_BURST 100000
#define RACE_THREADS 2
#define RACE_ROUNDS 2000
#define RACE_KEYS 8

/* Threads taking from one client's bucket: HOT_THREADS take HOT_BURST
 * each at one instant; together they get exactly the burst. */
struct hot {
	struct admit_limiter *l;
	struct admit_bucket b;
	struct cidr c;
	pthread_barrier_t bar;
	atomic_uint got;
};

static void *hot_run(void *arg)
{
	struct hot *h = arg;
	unsigned i, n = 0, ra;

	pthread_barrier_wait(&h->bar);
	for (i = 0; i < HOT_BURST; i++)
		if (admit_take(h->l, &h->b, &h->c, 7 * SEC, &ra) == 0)
			n++;
	atomic_fetch_add(&h->got, n);
	return NULL;
}

START_TEST(test_threads_one_client)
{
	static const char *const who[2] = {"192.0.2.77", "2001:db8:77::1"};
	pthread_t th[HOT_THREADS];
	struct admit_limiter_stats st;
	struct hot h;
	unsigned i, w;

	for (w = 0; w < 2; w++) {
		memset(&h, 0, sizeof(h));
		h.l = table(1024, 1, HOT_BURST, &h.b);
		h.c = ip(who[w]);
		atomic_init(&h.got, 0);
		ck_assert_int_eq(
		    pthread_barrier_init(&h.bar, NULL, HOT_THREADS), 0);
		for (i = 0; i < HOT_THREADS; i++)
			ck_assert_int_eq(
			    pthread_create(&th[i], NULL, hot_run, &h), 0);
		for (i = 0; i < HOT_THREADS; i++)
			pthread_join(th[i], NULL);
		pthread_barrier_destroy(&h.bar);
		admit_limiter_stats(h.l, &st);
		/* the tracked takes get exactly the burst; one that met the
		 * client's claim paused by the scheduler went untracked */
		ck_assert_uint_le(st.untracked, HOT_THREADS);
		ck_assert_uint_eq(atomic_load(&h.got),
				  HOT_BURST + st.untracked);
		ck_assert_uint_eq(st.clients, 1);
		admit_limiter_free(h.l);
	}
}
END_TEST

/* Threads racing to place new clients: round after round, RACE_THREADS
 * threads start at once (a spinning barrier) on nkeys clients none has
 * seen, in one set of the table; each client gets exactly its burst. */
struct race {
	struct admit_limiter *l;
	struct admit_bucket b;
	unsigned nkeys;
	atomic_uint arrived;
	_Atomic unsigned *got; /* [round * RACE_KEYS + key] */
};

/* The round's clients, IPv4 and IPv6 in turn. */
static struct cidr race_client(unsigned round, unsigned key)
{
	char buf[64];

	if ((round + key) % 2)
		snprintf(buf, sizeof(buf), "2001:db8:%x:%x::1", round, key);
	else
		snprintf(buf, sizeof(buf), "10.%u.%u.%u", round >> 8,
			 round & 255, key);
	return ip(buf);
}

static void *race_run(void *arg)
{
	struct race *h = arg;
	unsigned r, i, k, ra, takes = (unsigned)(h->b.tau / h->b.interval) * 2;

	for (r = 0; r < RACE_ROUNDS; r++) {
		struct cidr c[RACE_KEYS];
		/* later than the last round's buckets are full again */
		uint64_t now = (r + 1) * 3600 * SEC;

		for (k = 0; k < h->nkeys; k++)
			c[k] = race_client(r, k);
		atomic_fetch_add(&h->arrived, 1);
		for (i = 0; atomic_load(&h->arrived) < (r + 1) * RACE_THREADS;
		     i++)
			if (i % 64 == 63)
				sched_yield(); /* the other is not running */
		for (i = 0; i < takes * h->nkeys; i++) {
			k = i % h->nkeys;
			if (admit_take(h->l, &h->b, &c[k], now, &ra) == 0)
				atomic_fetch_add(&h->got[r * RACE_KEYS + k], 1);
		}
	}
	return NULL;
}

static void race(unsigned nkeys, uint64_t burst)
{
	static _Atomic unsigned got[RACE_ROUNDS * RACE_KEYS];
	pthread_t th[RACE_THREADS];
	struct admit_limiter_stats st;
	struct race h;
	unsigned i, r, k;
	uint64_t extra = 0;

	memset(&h, 0, sizeof(h));
	for (i = 0; i < RACE_ROUNDS * RACE_KEYS; i++)
		atomic_init(&got[i], 0);
	/* one set: every client of a round races for the same 8 slots */
	h.l = table(ADMIT_WAYS, 1, burst, &h.b);
	h.nkeys = nkeys;
	h.got = got;
	atomic_init(&h.arrived, 0);
	for (i = 0; i < RACE_THREADS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, race_run, &h), 0);
	for (i = 0; i < RACE_THREADS; i++)
		pthread_join(th[i], NULL);
	admit_limiter_stats(h.l, &st);
	/* A take that met a claim whose thread the scheduler paused goes
	 * through untracked (admit.h): each such take is one more admitted
	 * than the burst. A claim that judged a slot's bucket full while
	 * the other thread was taking from it evicts a client with takes
	 * (counted evicted; the two threads' claims of one client can hold
	 * two of the set's slots for a moment): that client starts a full
	 * bucket again, at most one burst more. The rest give exactly the
	 * burst; both are rare. */
	ck_assert_uint_le(st.untracked, RACE_ROUNDS * nkeys / 20);
	ck_assert_uint_le(st.evicted, RACE_ROUNDS * nkeys / 20);
	for (r = 0; r < RACE_ROUNDS; r++)
		for (k = 0; k < nkeys; k++) {
			unsigned n = atomic_load(&got[r * RACE_KEYS + k]);

			if (n < burst ||
			    n - burst > st.untracked + burst * st.evicted)
				ck_abort_msg("round %u client %u: %u admitted, "
					     "burst %llu, %llu untracked, "
					     "%llu evicted",
					     r, k, n, (unsigned long long)burst,
					     (unsigned long long)st.untracked,
					     (unsigned long long)st.evicted);
			extra += n - burst;
		}
	ck_assert_uint_le(extra, st.untracked + burst * st.evicted);
	ck_assert_uint_ge(extra, st.untracked);
	admit_limiter_free(h.l);
}

START_TEST(test_threads_new_clients)
{
	race(1, 1);
	race(RACE_KEYS, 4);
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
		EXPECT_EQ(admit_inflight_enter(&g, NULL), 0);
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
/* The loop's lag: a probe on time is no lag; a late one is its lateness,
 * sheds for ADMIT_LAG_HOLD_NS when over the limit, and an overdue probe
 * sheds before it runs. */
START_TEST(test_lag)
{
	struct admit_lag l;
	uint64_t t = 1000 * MS, t0, lim = 100 * MS;

	admit_lag_init(&l, t);
	ck_assert(!admit_lag_shed(&l, t, lim));
	t += ADMIT_LAG_PROBE_NS;
	ck_assert_uint_eq(admit_lag_probe(&l, t, lim), 0);
	ck_assert(!admit_lag_shed(&l, t, lim));
	/* a 50 ms lag: under the limit */
	t += ADMIT_LAG_PROBE_NS + 50 * MS;
	ck_assert_uint_eq(admit_lag_overdue(&l, t), 50 * MS);
	ck_assert(!admit_lag_shed(&l, t, lim));
	ck_assert_uint_eq(admit_lag_probe(&l, t, lim), 50 * MS);
	ck_assert(!admit_lag_shed(&l, t, lim));
	ck_assert_uint_eq(admit_lag_recent(&l, t), 50 * MS);
	/* a stall of 400 ms: overdue sheds before the probe runs */
	t += ADMIT_LAG_PROBE_NS + 400 * MS;
	ck_assert(admit_lag_shed(&l, t, lim));
	ck_assert(!admit_lag_shed(&l, t, 0)); /* off */
	ck_assert(!admit_lag_shed(&l, t, 500 * MS));
	ck_assert_uint_eq(admit_lag_recent(&l, t), 400 * MS);
	ck_assert_uint_eq(admit_lag_probe(&l, t, lim), 400 * MS);
	/* the probe ran: held for ADMIT_LAG_HOLD_NS though on time again */
	t0 = t;
	while (t + ADMIT_LAG_PROBE_NS < t0 + ADMIT_LAG_HOLD_NS) {
		t += ADMIT_LAG_PROBE_NS;
		ck_assert_uint_eq(admit_lag_probe(&l, t, lim), 0);
		ck_assert(admit_lag_shed(&l, t, lim));
	}
	ck_assert(admit_lag_shed(&l, t0 + ADMIT_LAG_HOLD_NS - 1, lim));
	t = t0 + ADMIT_LAG_HOLD_NS;
	ck_assert(!admit_lag_shed(&l, t, lim));
	/* the recent lag stays one to two windows, then goes */
	ck_assert_uint_eq(admit_lag_recent(&l, t), 400 * MS);
	for (t0 = t; t < t0 + 2 * ADMIT_LAG_WINDOW_NS;) {
		t += ADMIT_LAG_PROBE_NS;
		admit_lag_probe(&l, t, lim);
	}
	ck_assert_uint_eq(admit_lag_recent(&l, t), 0);
	/* a probe never earlier than due counts no lag */
	admit_lag_init(&l, t);
	ck_assert_uint_eq(admit_lag_probe(&l, t + 1, lim), 0);
	/* paused (an idle loop): nothing overdue however long, until
	 * resumed; then due a period on, and late from there */
	t += 1;
	admit_lag_pause(&l);
	ck_assert(admit_lag_paused(&l));
	t += 10 * ADMIT_LAG_HOLD_NS;
	ck_assert_uint_eq(admit_lag_overdue(&l, t), 0);
	ck_assert(!admit_lag_shed(&l, t, lim));
	ck_assert_uint_eq(admit_lag_recent(&l, t), 0);
	admit_lag_resume(&l, t, 0, lim);
	ck_assert(!admit_lag_paused(&l));
	ck_assert(!admit_lag_shed(&l, t, lim));
	ck_assert_uint_eq(admit_lag_overdue(&l, t + ADMIT_LAG_PROBE_NS), 0);
	t += ADMIT_LAG_PROBE_NS + 300 * MS;
	ck_assert(admit_lag_shed(&l, t, lim));
	ck_assert_uint_eq(admit_lag_probe(&l, t, lim), 300 * MS);
	/* a lag recorded before a pause still holds */
	admit_lag_pause(&l);
	ck_assert(admit_lag_shed(&l, t + 1, lim));
	/* woken by bytes that waited 400 ms (a loop stalled while idle):
	 * that lag, shed for ADMIT_LAG_HOLD_NS; 50 ms: none */
	t += 2 * ADMIT_LAG_HOLD_NS;
	ck_assert(!admit_lag_shed(&l, t, lim));
	admit_lag_resume(&l, t, 400 * MS, lim);
	ck_assert(admit_lag_shed(&l, t, lim));
	ck_assert(admit_lag_shed(&l, t + ADMIT_LAG_HOLD_NS - 1, lim));
	ck_assert_uint_eq(admit_lag_overdue(&l, t + ADMIT_LAG_PROBE_NS), 0);
	admit_lag_pause(&l);
	t += 2 * ADMIT_LAG_HOLD_NS;
	admit_lag_resume(&l, t, 50 * MS, lim);
	ck_assert(!admit_lag_shed(&l, t, lim));
}
END_TEST

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
	tcase_add_test(tc, test_eviction_order);
	tcase_add_test(tc, test_rate_change);
	tcase_add_test(tc, test_off_and_args);
	tcase_add_test(tc, test_inflight);
	tcase_add_test(tc, test_queue_fifo);
	tcase_add_test(tc, test_queue_routes_and_retry);
	tcase_add_test(tc, test_body);
	tcase_add_test(tc, test_rate_gap);
	tcase_add_test(tc, test_rate_min);
	tcase_add_test(tc, test_rate_pause);
	tcase_add_test(tc, test_rate_extremes);
	tcase_add_test(tc, test_lag);
	suite_add_tcase(s, tc);
	/* rounds of threads meeting at a barrier: slow on a busy machine */
	tc = tcase_create("threads");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_threads_one_client);
	tcase_add_test(tc, test_threads_new_clients);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(admit_suite());
}
