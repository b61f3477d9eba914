/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * admit.c - the per-client token buckets, one table shared by every
 * worker and updated with atomics; in-flight gauges; body-size checks;
 * the slow-body clock.
 *
 * A bucket is GCRA's theoretical arrival time (tat): a request at now is
 * allowed when max(tat, now) + T - now <= tau, T being the interval
 * between tokens and tau = T * burst; tat then advances by T. The rate is
 * the caller's (struct admit_bucket), not the table's: a slot holds only
 * its client and its tat, so a reload that changes the rate needs no new
 * table; a tat further ahead than the new tau is brought back to now +
 * tau (the bucket empty, refilling at the new rate).
 *
 * The table: sets of ADMIT_WAYS slots; a client's set and its 55-bit tag
 * come from SipHash under the process's secret key (siphash.h), so
 * nobody can aim addresses at one set. A slot is two 64-bit words:
 *
 *   key    tag(55) | used(1) | version(6) | flags(2)  FREE, BUSY or LIVE
 *   state  tat (monotonic ns)
 *
 * A take reads state, checks that key still names the client LIVE, and
 * moves state with one compare-and-swap; a refusal writes nothing (but
 * the used bit, once). A client not found claims a slot: key to BUSY
 * with the version bumped (one CAS: one claimer wins a slot), state to a
 * full bucket (a CAS from whatever it held, so that a late take of the
 * slot's previous client fails and looks again), then a look through the
 * set for another claim of the same client: a LIVE one wins (this claim
 * is given back), of two BUSY ones the lower-numbered (a BUSY claim has
 * no takes yet: removing it loses nothing); then key to LIVE. The claim
 * and the look being sequentially consistent, of two concurrent claims
 * at least one sees the other, so a client is LIVE in one slot at most
 * and every take meets the same state: a burst is exact whichever
 * workers the requests land on, as long as the client keeps its slot (a
 * claim that judged a bucket full again while another worker was taking
 * from it forgets a client with takes: counted as evicted, that client
 * gets at most one burst more; rare, seen under two racing threads in a
 * set with no slot to spare). No thread waits on another for long: a
 * claimer that finds its client BUSY elsewhere waits a few turns, then
 * removes that claim; after ADMIT_TRIES rounds without a verdict a
 * request is allowed and counted (untracked), never refused.
 *
 * Which client a full set forgets (the CLOCK algorithm, ordered by what
 * forgetting costs): one whose bucket is full again (that loses
 * nothing); else, of those not used since the set last ran out of
 * unused ones, the one owing least; else every used bit is cleared and
 * the one owing least goes. A client that keeps sending (refused or not)
 * keeps its bit, so a spray of new addresses, which forget each other
 * first, does not reset its bucket.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "admit.h"
#include "edge_assert.h"
#include "siphash.h"

#define ADMIT_NS_PER_MIN 60000000000ULL
#define ADMIT_NS_PER_S 1000000000ULL

/* a slot's key word */
#define ADMIT_K_FREE 0ULL
#define ADMIT_K_BUSY 1ULL
#define ADMIT_K_LIVE 2ULL
#define ADMIT_K_FLAGS 3ULL
#define ADMIT_K_VER (63ULL << 2)
#define ADMIT_K_USED (1ULL << 8)
#define ADMIT_K_TAG (~0x1ffULL)
/* rounds of look-up and claim before a request goes through untracked */
#define ADMIT_TRIES 64
/* rounds a thread leaves another's claim of its client alone */
#define ADMIT_PATIENCE 8
/* admit_take's "look again" (never returned to callers) */
#define ADMIT_AGAIN 1

/* One set: its keys in one cache line, their states in the next. */
struct admit_set {
	_Alignas(64) _Atomic uint64_t key[ADMIT_WAYS];
	_Atomic uint64_t state[ADMIT_WAYS];
};

struct admit_limiter {
	size_t nsets;
	struct admit_set *sets; /* nsets, 64-byte aligned inside mem */
	void *mem;
	atomic_ullong evicted;
	atomic_ullong untracked;
};

int admit_bucket_set(struct admit_bucket *b, uint64_t per_min, uint64_t burst)
{
	memset(b, 0, sizeof(*b));
	if (!per_min)
		return 0;
	if (!burst)
		return -EINVAL;
	b->interval = ADMIT_NS_PER_MIN / per_min;
	if (b->interval == 0)
		b->interval = 1;
	b->tau = burst > ADMIT_TAU_MAX / b->interval ? ADMIT_TAU_MAX
						     : b->interval * burst;
	return 0;
}

int admit_limiter_new(size_t capacity, struct admit_limiter **out)
{
	struct admit_limiter *l;
	size_t nsets;

	if (capacity == 0)
		return -EINVAL;
	nsets = capacity / ADMIT_WAYS + (capacity % ADMIT_WAYS != 0);
	if (nsets > UINT32_MAX ||
	    nsets > (SIZE_MAX - 64) / sizeof(struct admit_set))
		return -ENOMEM;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	/* calloc: a large table is mapped zero pages, resident once used */
	l->mem = calloc(1, nsets * sizeof(struct admit_set) + 64);
	if (!l->mem) {
		free(l);
		return -ENOMEM;
	}
	l->sets =
	    (struct admit_set *)(((uintptr_t)l->mem + 63) & ~(uintptr_t)63);
	l->nsets = nsets;
	atomic_init(&l->evicted, 0);
	atomic_init(&l->untracked, 0);
	*out = l;
	return 0;
}

void admit_limiter_free(struct admit_limiter *l)
{
	if (!l)
		return;
	free(l->mem);
	free(l);
}

void admit_limiter_stats(const struct admit_limiter *l,
			 struct admit_limiter_stats *st)
{
	size_t i, j;

	memset(st, 0, sizeof(*st));
	if (!l)
		return;
	st->capacity = l->nsets * ADMIT_WAYS;
	for (i = 0; i < l->nsets; i++)
		for (j = 0; j < ADMIT_WAYS; j++)
			if ((atomic_load_explicit(&l->sets[i].key[j],
						  memory_order_relaxed) &
			     ADMIT_K_FLAGS) == ADMIT_K_LIVE)
				st->clients++;
	st->evicted = atomic_load(&l->evicted);
	st->untracked = atomic_load(&l->untracked);
}

static void admit_pause(void)
{
	int i;

	for (i = 0; i < 16; i++) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#elif defined(__aarch64__)
		__asm__ __volatile__("yield");
#else
		atomic_signal_fence(memory_order_seq_cst);
#endif
	}
}

/* A's set and tag: SipHash of its family and address (an IPv6 one's
 * first 64 bits). */
static struct admit_set *admit_set_of(const struct admit_limiter *l,
				      const struct cidr *a, uint64_t *tag)
{
	uint8_t k[9];
	uint64_t h;

	memset(k, 0, sizeof(k));
	k[0] = a->family;
	memcpy(k + 1, a->addr, a->family == AF_INET6 ? 8 : 4);
	h = siphash_key(k, sizeof(k));
	*tag = h & ADMIT_K_TAG;
	return &l->sets[(uint32_t)h % l->nsets];
}

/* Whether key word k is LIVE for tag. */
static bool admit_live(uint64_t k, uint64_t tag)
{
	return (k & ADMIT_K_TAG) == tag && (k & ADMIT_K_FLAGS) == ADMIT_K_LIVE;
}

/* Take a token from slot i, found LIVE with key word kw: 0, -EAGAIN, or
 * ADMIT_AGAIN when the slot is no longer kw's. */
static int admit_slot_take(struct admit_set *s, int i, uint64_t kw,
			   const struct admit_bucket *b, uint64_t now,
			   unsigned *retry_after)
{
	uint64_t st = atomic_load(&s->state[i]), k, tat, next, wait;
	bool ok;

	for (;;) {
		/* after st: a claim changes the key before the state */
		k = atomic_load(&s->key[i]);
		if ((k | ADMIT_K_USED) != (kw | ADMIT_K_USED))
			return ADMIT_AGAIN;
		tat = st > now ? st : now;
		if (tat - now > b->tau)
			tat = now + b->tau; /* owes more than b allows */
		ok = tat - now + b->interval <= b->tau;
		next = ok ? tat + b->interval : tat;
		if (next == st ||
		    atomic_compare_exchange_weak(&s->state[i], &st, next))
			break;
	}
	if (!(k & ADMIT_K_USED))
		atomic_compare_exchange_strong(&s->key[i], &k,
					       k | ADMIT_K_USED);
	if (ok)
		return 0;
	wait = tat - now + b->interval - b->tau;
	wait = wait / ADMIT_NS_PER_S + (wait % ADMIT_NS_PER_S != 0);
	if (retry_after)
		*retry_after = wait == 0	 ? 1
			       : wait > UINT_MAX ? UINT_MAX
						 : (unsigned)wait;
	return -EAGAIN;
}

/* Give back slot i, claimed as mine (it may have been taken away). */
static void admit_release(struct admit_set *s, int i, uint64_t mine)
{
	atomic_compare_exchange_strong(&s->key[i], &mine, mine & ADMIT_K_VER);
}

/* The slot of s to claim, with *old its key word: a FREE one, else the
 * LIVE one that costs least to forget (this file's header); -1 when all
 * are BUSY or one is BUSY for tag (claimed since admit_find looked). A
 * LIVE one of tag's (placed since then) is returned as it is. */
static int admit_victim(struct admit_set *s, uint64_t tag, uint64_t now,
			uint64_t *old)
{
	uint64_t k[ADMIT_WAYS], st[ADMIT_WAYS];
	int i, v = -1, pass;

	for (i = 0; i < ADMIT_WAYS; i++) {
		k[i] = atomic_load(&s->key[i]);
		if ((k[i] & ADMIT_K_FLAGS) == ADMIT_K_FREE ||
		    admit_live(k[i], tag)) {
			*old = k[i];
			return i;
		}
		if ((k[i] & ADMIT_K_FLAGS) != ADMIT_K_LIVE) {
			if ((k[i] & ADMIT_K_TAG) == tag)
				return -1;
			continue;
		}
		st[i] = atomic_load(&s->state[i]);
		if (st[i] <= now) { /* full again */
			*old = k[i];
			return i;
		}
	}
	/* pass 0: the unused ones; pass 1: all, used bits cleared */
	for (pass = 0; pass < 2 && v < 0; pass++)
		for (i = 0; i < ADMIT_WAYS; i++) {
			if ((k[i] & ADMIT_K_FLAGS) != ADMIT_K_LIVE)
				continue;
			if (pass == 0 && (k[i] & ADMIT_K_USED))
				continue;
			if (pass == 1 && (k[i] & ADMIT_K_USED)) {
				if (!atomic_compare_exchange_strong(
					&s->key[i], &k[i],
					k[i] & ~ADMIT_K_USED))
					continue; /* changed: not a candidate */
				k[i] &= ~ADMIT_K_USED;
			}
			if (v < 0 || st[i] < st[v])
				v = i;
		}
	if (v >= 0)
		*old = k[v];
	return v;
}

/*
 * Claim a slot of s for tag (this file's header): returns the slot to
 * take from with *kw its key word (mine, now LIVE, or a LIVE one of the
 * same client's), or -1 to look again. impatient: remove another BUSY
 * claim of the client whatever its place.
 */
static int admit_claim(struct admit_limiter *l, struct admit_set *s,
		       uint64_t tag, uint64_t now, bool impatient, uint64_t *kw)
{
	uint64_t k, old, mine, st, fresh;
	int i, v;

	v = admit_victim(s, tag, now, &old);
	if (v < 0)
		return -1; /* all claimed this instant */
	if (admit_live(old, tag)) {
		*kw = old;
		return v;
	}
	mine = tag | ((old + 4) & ADMIT_K_VER) | ADMIT_K_BUSY;
	if (!atomic_compare_exchange_strong(&s->key[v], &old, mine))
		return -1;
	/* a full bucket at any worker's clock (theirs may lag this one's),
	 * unlike what a late take of the slot's last client may compare */
	st = atomic_load(&s->state[v]);
	do
		fresh = st == 1 ? 2 : 1;
	while (!atomic_compare_exchange_weak(&s->state[v], &st, fresh));
	if ((old & ADMIT_K_FLAGS) == ADMIT_K_LIVE && st > now)
		atomic_fetch_add_explicit(&l->evicted, 1, memory_order_relaxed);
	/* another claim of the same client */
	for (i = 0; i < ADMIT_WAYS; i++) {
		if (i == v)
			continue;
		k = atomic_load(&s->key[i]);
		if ((k & ADMIT_K_TAG) != tag ||
		    (k & ADMIT_K_FLAGS) == ADMIT_K_FREE)
			continue;
		if ((k & ADMIT_K_FLAGS) == ADMIT_K_BUSY &&
		    (i > v || impatient) &&
		    atomic_compare_exchange_strong(&s->key[i], &k,
						   k & ADMIT_K_VER))
			continue; /* removed: it had no takes yet */
		/* LIVE, a BUSY one before mine, or one that just changed */
		admit_release(s, v, mine);
		if (admit_live(k, tag)) {
			*kw = k;
			return i;
		}
		return -1;
	}
	*kw = (mine & ~ADMIT_K_FLAGS) | ADMIT_K_LIVE | ADMIT_K_USED;
	if (!atomic_compare_exchange_strong(&s->key[v], &mine, *kw))
		return -1; /* removed by another claimer */
	return v;
}

/* Slot of s LIVE for tag (*kw its key word), or -1; *busy: a BUSY claim
 * of tag was seen. */
static int admit_find(struct admit_set *s, uint64_t tag, uint64_t *kw,
		      bool *busy)
{
	uint64_t k;
	int i;

	*busy = false;
	for (i = 0; i < ADMIT_WAYS; i++) {
		k = atomic_load(&s->key[i]);
		if ((k & ADMIT_K_TAG) != tag)
			continue;
		if ((k & ADMIT_K_FLAGS) == ADMIT_K_LIVE) {
			*kw = k;
			return i;
		}
		if ((k & ADMIT_K_FLAGS) == ADMIT_K_BUSY)
			*busy = true;
	}
	return -1;
}

int admit_take(struct admit_limiter *l, const struct admit_bucket *b,
	       const struct cidr *a, uint64_t now_ns, unsigned *retry_after)
{
	struct admit_set *s;
	uint64_t tag, kw;
	unsigned tries;
	bool busy;
	int i, rc;

	if (!l || !b || !b->interval)
		return 0;
	s = admit_set_of(l, a, &tag);
	for (tries = 0; tries < ADMIT_TRIES; tries++) {
		i = admit_find(s, tag, &kw, &busy);
		if (i < 0 && busy && tries < ADMIT_PATIENCE) {
			admit_pause(); /* its claimer is a few steps away */
			continue;
		}
		if (i < 0)
			i = admit_claim(l, s, tag, now_ns,
					tries >= ADMIT_PATIENCE, &kw);
		if (i < 0)
			continue;
		rc = admit_slot_take(s, i, kw, b, now_ns, retry_after);
		if (rc != ADMIT_AGAIN)
			return rc;
	}
	atomic_fetch_add_explicit(&l->untracked, 1, memory_order_relaxed);
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

/* ---- the loop's lag ------------------------------------------------ */

void admit_lag_init(struct admit_lag *l, uint64_t now_ns)
{
	memset(l, 0, sizeof(*l));
	l->due = now_ns + ADMIT_LAG_PROBE_NS;
	l->window = now_ns / ADMIT_LAG_WINDOW_NS;
}

/* Move l's windows on to now's. */
static void admit_lag_roll(struct admit_lag *l, uint64_t now_ns)
{
	uint64_t win = now_ns / ADMIT_LAG_WINDOW_NS;

	if (win == l->window)
		return;
	l->peak[1] = win == l->window + 1 ? l->peak[0] : 0;
	l->peak[0] = 0;
	l->window = win;
}

void admit_lag_pause(struct admit_lag *l)
{
	l->due = UINT64_MAX;
}

void admit_lag_resume(struct admit_lag *l, uint64_t now_ns, uint64_t waited_ns,
		      uint64_t limit_ns)
{
	l->due = now_ns > waited_ns ? now_ns - waited_ns : 0;
	admit_lag_probe(l, now_ns, limit_ns);
}

bool admit_lag_paused(const struct admit_lag *l)
{
	return l->due == UINT64_MAX;
}

uint64_t admit_lag_overdue(const struct admit_lag *l, uint64_t now_ns)
{
	return now_ns > l->due ? now_ns - l->due : 0;
}

uint64_t admit_lag_probe(struct admit_lag *l, uint64_t now_ns,
			 uint64_t limit_ns)
{
	uint64_t lag = admit_lag_overdue(l, now_ns);

	admit_lag_roll(l, now_ns);
	if (lag > l->peak[0])
		l->peak[0] = lag;
	if (limit_ns && lag > limit_ns) {
		l->over = true;
		l->over_at = now_ns;
	}
	l->due = now_ns + ADMIT_LAG_PROBE_NS;
	return lag;
}

bool admit_lag_shed(const struct admit_lag *l, uint64_t now_ns,
		    uint64_t limit_ns)
{
	if (!limit_ns)
		return false;
	if (l->over && now_ns >= l->over_at &&
	    now_ns - l->over_at < ADMIT_LAG_HOLD_NS)
		return true;
	return admit_lag_overdue(l, now_ns) > limit_ns;
}

uint64_t admit_lag_recent(const struct admit_lag *l, uint64_t now_ns)
{
	uint64_t win = now_ns / ADMIT_LAG_WINDOW_NS, v = 0, o;

	if (win == l->window)
		v = l->peak[0] > l->peak[1] ? l->peak[0] : l->peak[1];
	else if (win == l->window + 1)
		v = l->peak[0];
	o = admit_lag_overdue(l, now_ns);
	return o > v ? o : v;
}
