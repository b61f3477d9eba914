/* SPDX-License-Identifier: BSD-2-Clause */
/* test_mailbox.c - a worker's mailbox (userspace/mailbox.c): order of
 * delivery, the bound (-EAGAIN), four posting threads with every message
 * delivered exactly once, messages to request ids freed meanwhile
 * dropped (with their cleanup), the drop of what is queued at free, and
 * posts refused after close. */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mailbox.h"
#include "reqid.h"
#include "unit.h"

/* What the owner saw. */
struct owner {
	struct event_base *base;
	struct reqid_table *ids; /* NULL: every message is handled */
	struct mailbox_msg got[64];
	unsigned ngot;	   /* handled */
	unsigned ndropped; /* dropped */
	unsigned freed;	   /* ptr payloads freed by drop */
	uint64_t dropped_args[64];
	unsigned stop_at; /* loopbreak when ngot + ndropped reaches it */
};

static void owner_check_stop(struct owner *o)
{
	if (o->stop_at && o->ngot + o->ndropped >= o->stop_at)
		event_base_loopbreak(o->base);
}

static bool owner_handle(void *arg, const struct mailbox_msg *m)
{
	struct owner *o = arg;

	if (o->ids && !reqid_lookup(o->ids, m->target)) {
		owner_check_stop(o);
		return false; /* the request is gone: drop */
	}
	if (o->ngot < 64)
		o->got[o->ngot] = *m;
	o->ngot++;
	free(m->ptr); /* handled: the payload is ours now */
	owner_check_stop(o);
	return true;
}

static void owner_drop(void *arg, const struct mailbox_msg *m)
{
	struct owner *o = arg;

	if (o->ndropped < 64)
		o->dropped_args[o->ndropped] = m->arg;
	o->ndropped++;
	if (m->ptr) {
		free(m->ptr);
		o->freed++;
	}
	if (o->base)
		owner_check_stop(o);
}

static struct mailbox_msg msg(uint32_t type, uint64_t target, uint64_t arg,
			      void *ptr)
{
	struct mailbox_msg m = {
	    .type = type, .target = target, .arg = arg, .ptr = ptr};

	return m;
}

/* Run o's loop until o->stop_at messages were seen (a 5 s guard). */
static void owner_run(struct owner *o, unsigned stop_at)
{
	struct timeval guard = {5, 0};

	o->stop_at = stop_at;
	event_base_loopexit(o->base, &guard);
	event_base_dispatch(o->base);
	ck_assert_uint_ge(o->ngot + o->ndropped, stop_at);
}

START_TEST(test_order)
{
	struct owner o = {0};
	struct mailbox *mb;
	struct mailbox_msg m;
	struct mailbox_stats st;
	unsigned i;

	o.base = event_base_new();
	ck_assert_ptr_nonnull(o.base);
	ck_assert_int_eq(
	    mailbox_new(o.base, 16, owner_handle, owner_drop, &o, &mb), 0);
	for (i = 0; i < 10; i++) {
		m = msg(7, 0, i, NULL);
		m.flags = i * 3;
		ck_assert_int_eq(mailbox_post(mb, &m), 0);
	}
	/* nothing runs before the loop does */
	ck_assert_uint_eq(o.ngot, 0);
	owner_run(&o, 10);
	ck_assert_uint_eq(o.ngot, 10);
	for (i = 0; i < 10; i++) {
		ck_assert_uint_eq(o.got[i].type, 7);
		ck_assert_uint_eq(o.got[i].arg, i);
		ck_assert_uint_eq(o.got[i].flags, i * 3);
	}
	mailbox_stats(mb, &st);
	ck_assert_uint_eq(st.posted, 10);
	ck_assert_uint_eq(st.handled, 10);
	ck_assert_uint_eq(st.dropped, 0);
	ck_assert_uint_eq(st.queued, 0);
	/* and again, once idle: the next post wakes the loop again */
	m = msg(8, 0, 99, NULL);
	ck_assert_int_eq(mailbox_post(mb, &m), 0);
	owner_run(&o, 11);
	ck_assert_uint_eq(o.got[10].arg, 99);
	mailbox_free(mb);
	event_base_free(o.base);
}
END_TEST

START_TEST(test_full)
{
	struct owner o = {0};
	struct mailbox *mb;
	struct mailbox_msg m;
	struct mailbox_stats st;
	unsigned i;

	o.base = event_base_new();
	ck_assert_int_eq(
	    mailbox_new(o.base, 4, owner_handle, owner_drop, &o, &mb), 0);
	for (i = 0; i < 4; i++) {
		m = msg(1, 0, i, NULL);
		ck_assert_int_eq(mailbox_post(mb, &m), 0);
	}
	m = msg(1, 0, 4, NULL);
	ck_assert_int_eq(mailbox_post(mb, &m), -EAGAIN);
	ck_assert_int_eq(mailbox_post(mb, &m), -EAGAIN);
	mailbox_stats(mb, &st);
	ck_assert_uint_eq(st.full, 2);
	ck_assert_uint_eq(st.queued, 4);
	/* drained, there is room again */
	owner_run(&o, 4);
	ck_assert_int_eq(mailbox_post(mb, &m), 0);
	owner_run(&o, 5);
	ck_assert_uint_eq(o.got[4].arg, 4);
	mailbox_free(mb);
	event_base_free(o.base);
	/* bad arguments */
	ck_assert_int_eq(mailbox_new(NULL, 4, owner_handle, NULL, NULL, &mb),
			 -EINVAL);
	ck_assert_ptr_null(mb);
	o.base = event_base_new();
	ck_assert_int_eq(mailbox_new(o.base, 0, owner_handle, NULL, NULL, &mb),
			 -EINVAL);
	ck_assert_int_eq(mailbox_new(o.base, MAILBOX_CAPACITY_MAX + 1,
				     owner_handle, NULL, NULL, &mb),
			 -EINVAL);
	ck_assert_int_eq(mailbox_new(o.base, 4, NULL, NULL, NULL, &mb),
			 -EINVAL);
	event_base_free(o.base);
	mailbox_free(NULL);
}
END_TEST

/* Four threads post PER_THREAD messages each (retrying on -EAGAIN) into
 * a small queue while the loop drains it. */
#define THREADS 4
#define PER_THREAD 50000

struct poster {
	struct mailbox *mb;
	unsigned id;
	atomic_uint *go;
	unsigned long retries;
};

static void *poster_main(void *arg)
{
	struct poster *p = arg;
	struct mailbox_msg m;
	unsigned i;
	int rc;

	while (!atomic_load(p->go))
		sched_yield();
	for (i = 0; i < PER_THREAD; i++) {
		m = msg(p->id, p->id, i, NULL);
		m.flags = p->id ^ i;
		while ((rc = mailbox_post(p->mb, &m)) == -EAGAIN) {
			p->retries++;
			sched_yield();
		}
		ck_assert_int_eq(rc, 0);
	}
	return NULL;
}

struct tally {
	struct event_base *base;
	unsigned next[THREADS]; /* the next arg expected from each */
	unsigned total;
	unsigned bad;
};

static bool tally_handle(void *arg, const struct mailbox_msg *m)
{
	struct tally *t = arg;

	/* each thread's messages arrive once each and in its order, so
	 * arg must be exactly the next one expected */
	if (m->target >= THREADS || m->type != m->target ||
	    m->arg != t->next[m->target] ||
	    m->flags != (uint32_t)(m->target ^ m->arg))
		t->bad++;
	else
		t->next[m->target]++;
	if (++t->total == THREADS * PER_THREAD)
		event_base_loopbreak(t->base);
	return true;
}

START_TEST(test_threads)
{
	struct tally t = {0};
	struct poster p[THREADS];
	pthread_t th[THREADS];
	struct timeval guard = {30, 0};
	struct mailbox_stats st;
	struct mailbox *mb;
	atomic_uint go = 0;
	unsigned i;

	t.base = event_base_new();
	ck_assert_int_eq(mailbox_new(t.base, 256, tally_handle, NULL, &t, &mb),
			 0);
	for (i = 0; i < THREADS; i++) {
		p[i] = (struct poster){.mb = mb, .id = i, .go = &go};
		ck_assert_int_eq(
		    pthread_create(&th[i], NULL, poster_main, &p[i]), 0);
	}
	atomic_store(&go, 1);
	event_base_loopexit(t.base, &guard);
	event_base_dispatch(t.base);
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	ck_assert_uint_eq(t.bad, 0);
	ck_assert_uint_eq(t.total, THREADS * PER_THREAD);
	for (i = 0; i < THREADS; i++)
		ck_assert_uint_eq(t.next[i], PER_THREAD);
	mailbox_stats(mb, &st);
	ck_assert_uint_eq(st.posted, THREADS * PER_THREAD);
	ck_assert_uint_eq(st.handled, THREADS * PER_THREAD);
	ck_assert_uint_eq(st.queued, 0);
	mailbox_free(mb);
	event_base_free(t.base);
}
END_TEST

/* A message for a request that ended before it arrived finds no object
 * (the id's generation moved on, even though the slot was reused), is
 * dropped, and its drop frees what it carried. */
START_TEST(test_stale_target_dropped)
{
	struct owner o = {0};
	struct mailbox *mb;
	struct mailbox_msg m;
	int req_a, req_b;
	uint64_t ia, ib;

	o.base = event_base_new();
	ck_assert_int_eq(reqid_table_new(0, 0, &o.ids), 0);
	ck_assert_int_eq(
	    mailbox_new(o.base, 8, owner_handle, owner_drop, &o, &mb), 0);
	ck_assert_int_eq(reqid_alloc(o.ids, &req_a, &ia), 0);
	/* another thread posts to request a, with memory attached */
	m = msg(1, ia, 100, malloc(32));
	ck_assert_int_eq(mailbox_post(mb, &m), 0);
	/* before it is handled, a ends and b takes its slot */
	ck_assert_int_eq(reqid_release(o.ids, ia), 0);
	ck_assert_int_eq(reqid_alloc(o.ids, &req_b, &ib), 0);
	ck_assert_uint_eq(REQID_SLOT(ib), REQID_SLOT(ia));
	m = msg(1, ib, 200, malloc(32));
	ck_assert_int_eq(mailbox_post(mb, &m), 0);
	owner_run(&o, 2);
	/* a's message dropped (its memory freed by drop), b's handled */
	ck_assert_uint_eq(o.ndropped, 1);
	ck_assert_uint_eq(o.dropped_args[0], 100);
	ck_assert_uint_eq(o.freed, 1);
	ck_assert_uint_eq(o.ngot, 1);
	ck_assert_uint_eq(o.got[0].arg, 200);
	ck_assert_uint_eq(o.got[0].target, ib);
	mailbox_free(mb);
	reqid_table_free(o.ids);
	event_base_free(o.base);
}
END_TEST

/* Freeing with messages queued drops each (their memory freed: ASan
 * would report a leak otherwise); posts after close are refused. */
START_TEST(test_free_drops_queued)
{
	struct owner o = {0};
	struct mailbox *mb;
	struct mailbox_msg m;
	struct mailbox_stats st;
	unsigned i;

	o.base = event_base_new();
	ck_assert_int_eq(
	    mailbox_new(o.base, 8, owner_handle, owner_drop, &o, &mb), 0);
	for (i = 0; i < 5; i++) {
		m = msg(1, 0, i, malloc(16));
		ck_assert_int_eq(mailbox_post(mb, &m), 0);
	}
	mailbox_close(mb);
	ck_assert_uint_eq(o.ndropped, 5);
	ck_assert_uint_eq(o.freed, 5);
	for (i = 0; i < 5; i++)
		ck_assert_uint_eq(o.dropped_args[i], i);
	m = msg(1, 0, 9, NULL);
	ck_assert_int_eq(mailbox_post(mb, &m), -ESHUTDOWN);
	mailbox_stats(mb, &st);
	ck_assert_uint_eq(st.dropped, 5);
	ck_assert_uint_eq(st.posted, 5);
	mailbox_close(mb); /* idempotent */
	ck_assert_uint_eq(o.ndropped, 5);
	/* the loop has nothing left to deliver */
	event_base_loop(o.base, EVLOOP_NONBLOCK);
	ck_assert_uint_eq(o.ngot, 0);
	mailbox_free(mb);
	ck_assert_uint_eq(o.ndropped, 5);

	/* and straight mailbox_free with messages queued */
	o.ndropped = o.freed = 0;
	ck_assert_int_eq(
	    mailbox_new(o.base, 8, owner_handle, owner_drop, &o, &mb), 0);
	for (i = 0; i < 3; i++) {
		m = msg(1, 0, i, malloc(16));
		ck_assert_int_eq(mailbox_post(mb, &m), 0);
	}
	mailbox_free(mb);
	ck_assert_uint_eq(o.ndropped, 3);
	ck_assert_uint_eq(o.freed, 3);
	event_base_free(o.base);
}
END_TEST

/* A handler that posts to its own mailbox is served in batches: the loop
 * gets its other events in between. */
struct echo {
	struct mailbox *mb;
	struct event_base *base;
	unsigned handled, ticks, ticks_at_end;
};

static bool echo_handle(void *arg, const struct mailbox_msg *m)
{
	struct echo *e = arg;
	struct mailbox_msg next = *m;

	e->handled++;
	if (m->arg < 10 * MAILBOX_BATCH) {
		next.arg++;
		ck_assert_int_eq(mailbox_post(e->mb, &next), 0);
	} else {
		e->ticks_at_end = e->ticks;
		event_base_loopbreak(e->base);
	}
	return true;
}

static void echo_tick(evutil_socket_t fd, short what, void *arg)
{
	struct echo *e = arg;

	(void)fd;
	(void)what;
	e->ticks++;
}

START_TEST(test_batches)
{
	struct echo e = {0};
	struct event *tick;
	struct mailbox_msg m = msg(1, 0, 0, NULL);
	struct timeval guard = {5, 0};
	int fds[2];

	e.base = event_base_new();
	ck_assert_int_eq(mailbox_new(e.base, 4, echo_handle, NULL, &e, &e.mb),
			 0);
	/* a socket that is always readable (never read): its event runs
	 * whenever the loop polls */
	ck_assert_int_eq(pipe(fds), 0);
	ck_assert_int_eq(write(fds[1], "x", 1), 1);
	tick = event_new(e.base, fds[0], EV_READ | EV_PERSIST, echo_tick, &e);
	ck_assert_int_eq(event_add(tick, NULL), 0);
	ck_assert_int_eq(mailbox_post(e.mb, &m), 0);
	event_base_loopexit(e.base, &guard);
	event_base_dispatch(e.base);
	ck_assert_uint_eq(e.handled, 10 * MAILBOX_BATCH + 1);
	/* the other event ran between batches */
	ck_assert_uint_ge(e.ticks_at_end, 9);
	event_free(tick);
	close(fds[0]);
	close(fds[1]);
	mailbox_free(e.mb);
	event_base_free(e.base);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("mailbox");
	TCase *tc = tcase_create("mailbox");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_order);
	tcase_add_test(tc, test_full);
	tcase_add_test(tc, test_threads);
	tcase_add_test(tc, test_stale_target_dropped);
	tcase_add_test(tc, test_free_drops_queued);
	tcase_add_test(tc, test_batches);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
