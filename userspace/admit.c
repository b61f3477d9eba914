/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * admit.c - token buckets per client in a fixed, set-associative table;
 * in-flight gauges; body-size checks; the slow-body clock.
 *
 * The bucket is kept as GCRA's theoretical arrival time (tat): a request
 * at now is allowed when max(tat, now) + T - now <= T * burst, T being
 * the interval between tokens; tat then advances by T. One 64-bit number
 * per client, no floating point.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "admit.h"
#include "edge_assert.h"

#define ADMIT_NS_PER_MIN 60000000000ULL
#define ADMIT_NS_PER_S 1000000000ULL

struct admit_slot {
	uint8_t key[17]; /* family, then 4 or 8 address bytes */
	bool used;
	uint64_t tat;  /* theoretical arrival time, ns */
	uint64_t seen; /* last use, ns: eviction order within a set */
};

struct admit_limiter {
	uint64_t interval; /* ns per token */
	uint64_t tau;	   /* interval * burst */
	size_t nsets;
	size_t count;
	struct admit_slot *slots; /* nsets * ADMIT_WAYS */
};

int admit_limiter_new(size_t capacity, uint64_t per_min, uint64_t burst,
		      struct admit_limiter **out)
{
	struct admit_limiter *l;

	if (capacity == 0 || (per_min && burst == 0))
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->nsets = (capacity + ADMIT_WAYS - 1) / ADMIT_WAYS;
	l->slots = calloc(l->nsets * ADMIT_WAYS, sizeof(*l->slots));
	if (!l->slots) {
		free(l);
		return -ENOMEM;
	}
	if (per_min) {
		l->interval = ADMIT_NS_PER_MIN / per_min;
		if (l->interval == 0)
			l->interval = 1;
		l->tau = l->interval * burst;
	}
	*out = l;
	return 0;
}

void admit_limiter_free(struct admit_limiter *l)
{
	if (!l)
		return;
	free(l->slots);
	free(l);
}

size_t admit_limiter_count(const struct admit_limiter *l)
{
	return l->count;
}

static uint64_t admit_hash(const uint8_t *k, size_t n)
{
	uint64_t h = 1469598103934665603ULL;
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ k[i]) * 1099511628211ULL;
	return h ^ (h >> 29);
}

/* The slot for key k: found, a free one, or the set's least recently
 * seen (reset). */
static struct admit_slot *admit_slot_for(struct admit_limiter *l,
					 const uint8_t *k, uint64_t now)
{
	struct admit_slot *set, *victim = NULL;
	size_t i;

	set = &l->slots[(admit_hash(k, 17) % l->nsets) * ADMIT_WAYS];
	for (i = 0; i < ADMIT_WAYS; i++) {
		struct admit_slot *s = &set[i];

		if (s->used && memcmp(s->key, k, 17) == 0)
			return s;
		if (!s->used) {
			if (!victim || victim->used)
				victim = s;
		} else if (!victim ||
			   (victim->used && s->seen < victim->seen)) {
			victim = s;
		}
	}
	if (!victim->used)
		l->count++;
	memcpy(victim->key, k, 17);
	victim->used = true;
	victim->tat = now; /* a full bucket */
	return victim;
}

int admit_take(struct admit_limiter *l, const struct cidr *a, uint64_t now_ns,
	       unsigned *retry_after)
{
	struct admit_slot *s;
	uint8_t key[17];
	uint64_t tat;

	if (!l->interval)
		return 0;
	memset(key, 0, sizeof(key));
	key[0] = a->family;
	memcpy(key + 1, a->addr, a->family == AF_INET6 ? 8 : 4);
	s = admit_slot_for(l, key, now_ns);
	s->seen = now_ns;
	tat = s->tat > now_ns ? s->tat : now_ns;
	if (tat + l->interval - now_ns > l->tau) {
		uint64_t wait = tat + l->interval - l->tau - now_ns;
		uint64_t secs = (wait + ADMIT_NS_PER_S - 1) / ADMIT_NS_PER_S;

		if (retry_after)
			*retry_after = secs ? (unsigned)secs : 1;
		return -EAGAIN;
	}
	s->tat = tat + l->interval;
	return 0;
}

void admit_gauge_init(struct admit_gauge *g, unsigned limit)
{
	atomic_init(&g->n, 0);
	atomic_init(&g->limit, limit);
}

void admit_gauge_set_limit(struct admit_gauge *g, unsigned limit)
{
	atomic_store_explicit(&g->limit, limit, memory_order_relaxed);
}

static bool admit_gauge_enter(struct admit_gauge *g)
{
	unsigned n, limit;

	if (!g)
		return true;
	limit = atomic_load_explicit(&g->limit, memory_order_relaxed);
	n = atomic_fetch_add_explicit(&g->n, 1, memory_order_relaxed) + 1;
	if (limit && n > limit) {
		atomic_fetch_sub_explicit(&g->n, 1, memory_order_relaxed);
		return false;
	}
	return true;
}

static void admit_gauge_leave(struct admit_gauge *g)
{
	if (g)
		EDGE_ASSERT(atomic_fetch_sub_explicit(
				&g->n, 1, memory_order_relaxed) > 0);
}

int admit_inflight_enter(struct admit_gauge *global, struct admit_gauge *route)
{
	if (!admit_gauge_enter(global))
		return -EBUSY;
	if (!admit_gauge_enter(route)) {
		admit_gauge_leave(global);
		return -EBUSY;
	}
	return 0;
}

void admit_inflight_leave(struct admit_gauge *global, struct admit_gauge *route)
{
	admit_gauge_leave(route);
	admit_gauge_leave(global);
}

/* ---- the admission queue ------------------------------------------ */

int admit_queue_init(struct admit_queue *q, struct admit_gauge *global,
		     size_t max, admit_notify_fn notify)
{
	memset(q, 0, sizeof(*q));
	q->global = global;
	q->notify = notify;
	atomic_init(&q->n, 0);
	atomic_init(&q->max, max);
	return -pthread_mutex_init(&q->lock, NULL);
}

void admit_queue_destroy(struct admit_queue *q)
{
	pthread_mutex_destroy(&q->lock);
}

void admit_queue_set_max(struct admit_queue *q, size_t max)
{
	atomic_store(&q->max, max);
}

bool admit_queue_busy(struct admit_queue *q)
{
	return atomic_load_explicit(&q->n, memory_order_relaxed) > 0;
}

size_t admit_queue_length(struct admit_queue *q)
{
	return atomic_load_explicit(&q->n, memory_order_relaxed);
}

int admit_queue_add(struct admit_queue *q, struct admit_waiter *w)
{
	size_t max = atomic_load(&q->max);
	int rc = 0;

	if (!max)
		return -ENOSPC;
	pthread_mutex_lock(&q->lock);
	if (atomic_load(&q->n) >= max) {
		rc = -ENOSPC;
		goto out;
	}
	w->next = NULL;
	w->prev = q->tail;
	if (q->tail)
		q->tail->next = w;
	else
		q->head = w;
	q->tail = w;
	w->queued = true;
	w->notified = false;
	atomic_fetch_add(&q->n, 1);
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

bool admit_queue_remove(struct admit_queue *q, struct admit_waiter *w)
{
	bool was;

	pthread_mutex_lock(&q->lock);
	was = w->queued;
	if (was && EDGE_ASSERT(atomic_load(&q->n) > 0)) {
		if (w->prev)
			w->prev->next = w->next;
		else
			q->head = w->next;
		if (w->next)
			w->next->prev = w->prev;
		else
			q->tail = w->prev;
		w->next = w->prev = NULL;
		w->queued = false;
		atomic_fetch_sub(&q->n, 1);
	}
	pthread_mutex_unlock(&q->lock);
	return was;
}

void admit_queue_retry(struct admit_queue *q, struct admit_waiter *w)
{
	pthread_mutex_lock(&q->lock);
	w->notified = false;
	pthread_mutex_unlock(&q->lock);
}

/* Room left in g (UINT_MAX: no limit). */
static unsigned admit_gauge_room(const struct admit_gauge *g)
{
	unsigned limit, n;

	if (!g)
		return UINT_MAX;
	limit = atomic_load_explicit(&g->limit, memory_order_relaxed);
	n = atomic_load_explicit(&g->n, memory_order_relaxed);
	if (!limit)
		return UINT_MAX;
	return n < limit ? limit - n : 0;
}

void admit_queue_kick(struct admit_queue *q)
{
	struct admit_waiter *w;
	unsigned room, told = 0;

	if (!admit_queue_busy(q))
		return;
	pthread_mutex_lock(&q->lock);
	room = admit_gauge_room(q->global);
	for (w = q->head; w && told < room; w = w->next) {
		if (w->notified) {
			told++; /* it has a slot coming, if any is free */
			continue;
		}
		if (!admit_gauge_room(w->route))
			continue; /* its route is full: the next one may fit */
		if (q->notify(w->owner, w->handle))
			break; /* its mailbox is full: at the next kick */
		w->notified = true;
		told++;
	}
	pthread_mutex_unlock(&q->lock);
}

bool admit_body_declared_ok(uint64_t content_length, uint64_t limit)
{
	return limit == 0 || content_length <= limit;
}

void admit_body_init(struct admit_body *b, uint64_t limit)
{
	b->seen = 0;
	b->limit = limit;
}

int admit_body_add(struct admit_body *b, uint64_t n)
{
	if (n > UINT64_MAX - b->seen)
		b->seen = UINT64_MAX;
	else
		b->seen += n;
	if (b->limit && b->seen > b->limit)
		return -EFBIG;
	return 0;
}

/* a + b, saturating */
static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

void admit_rate_init(struct admit_rate *r, uint64_t grace_ms, uint64_t min_rate,
		     uint64_t now_ns)
{
	memset(r, 0, sizeof(*r));
	r->grace_ns =
	    grace_ms > UINT64_MAX / 1000000 ? UINT64_MAX : grace_ms * 1000000;
	r->min_rate = min_rate;
	r->base = now_ns;
}

/* The running time at now (the time of the pause while paused). */
static uint64_t admit_rate_t(const struct admit_rate *r, uint64_t now_ns)
{
	if (r->paused)
		return r->t_pause;
	return now_ns > r->base ? now_ns - r->base : 0;
}

void admit_rate_seen(struct admit_rate *r, uint64_t total, uint64_t now_ns)
{
	if (total <= r->bytes)
		return;
	r->bytes = total;
	r->last = admit_rate_t(r, now_ns);
}

void admit_rate_pause(struct admit_rate *r, uint64_t now_ns)
{
	if (r->paused)
		return;
	r->t_pause = admit_rate_t(r, now_ns);
	r->paused = true;
}

void admit_rate_resume(struct admit_rate *r, uint64_t now_ns)
{
	if (!r->paused)
		return;
	r->paused = false;
	r->base = now_ns > r->t_pause ? now_ns - r->t_pause : 0;
}

uint64_t admit_rate_deadline(const struct admit_rate *r)
{
	unsigned __int128 earned;
	uint64_t t;

	if (r->paused)
		return UINT64_MAX;
	t = sat_add(r->last, r->grace_ns);
	if (r->min_rate) {
		/* grace + n / min_rate seconds, in ns */
		earned =
		    (unsigned __int128)r->bytes * ADMIT_NS_PER_S / r->min_rate;
		earned += r->grace_ns;
		if (earned < t)
			t = (uint64_t)earned;
	}
	return sat_add(r->base, t);
}

bool admit_rate_expired(const struct admit_rate *r, uint64_t now_ns)
{
	return now_ns >= admit_rate_deadline(r);
}
