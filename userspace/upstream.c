/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * upstream.c - Select: endpoints by address in a per-worker hash table,
 * round-robin positions per (generation, route) in a small set-associative
 * table, rendezvous hashing of client addresses with SipHash-2-4 under a
 * per-process random key, passive health, and LIFO pools of idle fds.
 *
 * Health of one endpoint is a small state machine:
 *   healthy --(eject_after consecutive failures)--> ejected until T
 *   ejected --(now >= T)--> half-open: one request (a probe) at a time
 *   half-open --success--> healthy (failures and back-off reset)
 *   half-open --failure--> ejected for twice as long (capped)
 * A success reported at any time resets the endpoint to healthy: it proves
 * the backend answers. Failures reported while ejected (from requests sent
 * before the ejection, or in panic mode) do not extend the ejection.
 */
#include <endian.h>
#include <errno.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <netinet/in.h>
#include <unistd.h>

#include "circuit.h"
#include "hedge.h"
#include "retry.h"
#include "siphash.h"
#include "upreg.h"
#include "upstream.h"

/* Round-robin positions: UPSTREAM_RR_SETS sets of UPSTREAM_RR_WAYS. */
#define UPSTREAM_RR_SETS 128
#define UPSTREAM_RR_WAYS 4
/* An endpoint with nothing in flight, nothing pooled and no selection for
 * this long is forgotten by upstream_pool_expire. */
#define UPSTREAM_FORGET_NS (600ull * 1000000000ull)
/* A half-open probe that has not reported after this long (the request
 * was abandoned without a report) no longer blocks another probe. */
#define UPSTREAM_PROBE_STALE_NS (30ull * 1000000000ull)
/* The endpoint table's initial number of buckets (a power of two). */
#define UPSTREAM_EP_BUCKETS 64

struct upstream_idle {
	int fd;
	void *obj;	/* the holder's object around fd, or NULL */
	uint64_t since; /* idle since, ns */
	uint64_t tag;	/* what a taker must ask for (0: plain) */
};

struct upstream_ep {
	struct upstream_ep *next; /* hash chain */
	struct upstream_worker *w;
	struct upreg_ep *g; /* the shared entry (upreg.h), or NULL */
	uint64_t hash;	    /* of the address */
	struct config_addr addr;
	unsigned inflight;
	unsigned failures;    /* consecutive failures */
	unsigned ejections;   /* consecutive ejections (back-off exponent) */
	bool ejected;	      /* until eject_until; half-open after it */
	bool probing;	      /* a half-open probe is out */
	uint64_t eject_until; /* ns */
	uint64_t probe_since; /* ns */
	uint64_t last_used;   /* ns, last selection among candidates */
	struct upstream_idle *idle; /* oldest first */
	size_t n_idle;
	size_t cap_idle;
};

struct upstream_rr {
	uint64_t generation;
	unsigned route_index;
	bool used;
	size_t pos;    /* the next candidate index to try */
	uint64_t seen; /* ns: eviction order within a set */
};

struct upstream_worker {
	struct upstream_ep **buckets;
	size_t n_buckets; /* a power of two */
	size_t n_eps;
	size_t n_idle;		      /* pooled fds over all endpoints */
	upstream_release_fn release;  /* frees a pooled object; NULL: none */
	struct upreg *reg;	      /* the shared registry, or NULL */
	struct upstream_ep **scratch; /* candidates of one select */
	size_t cap_scratch;
	struct upstream_rr rr[UPSTREAM_RR_SETS * UPSTREAM_RR_WAYS];
	size_t max_idle_per_ep;
	size_t max_idle_total;
	uint64_t idle_timeout_ns;
	unsigned eject_after;
	uint64_t eject_base_ns;
	uint64_t eject_max_ns;
	struct upstream_stats st;
	struct retry_budgets budgets; /* the deployments' retry budgets */
	struct circuits circuits;     /* the deployments' circuits */
	struct hedge_table hedges;    /* the deployments' response times */
};

/* ---- worker ------------------------------------------------------------- */

int upstream_worker_new(struct upstream_worker **out)
{
	struct upstream_worker *w;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->n_buckets = UPSTREAM_EP_BUCKETS;
	w->buckets = calloc(w->n_buckets, sizeof(*w->buckets));
	if (!w->buckets) {
		free(w);
		return -ENOMEM;
	}
	w->max_idle_per_ep = UPSTREAM_DEFAULT_MAX_IDLE_PER_EP;
	w->max_idle_total = UPSTREAM_DEFAULT_MAX_IDLE_TOTAL;
	w->idle_timeout_ns = UPSTREAM_DEFAULT_IDLE_TIMEOUT_NS;
	w->eject_after = UPSTREAM_DEFAULT_EJECT_AFTER;
	w->eject_base_ns = UPSTREAM_DEFAULT_EJECT_BASE_NS;
	w->eject_max_ns = UPSTREAM_DEFAULT_EJECT_MAX_NS;
	*out = w;
	return 0;
}

/* Close one pooled connection: its holder's object, or its bare fd. */
static void upstream_idle_close(const struct upstream_worker *w,
				const struct upstream_idle *it)
{
	if (it->obj && w->release)
		w->release(it->obj, it->fd);
	else
		close(it->fd);
}

void upstream_worker_set_release(struct upstream_worker *w,
				 upstream_release_fn release)
{
	w->release = release;
}

void upstream_worker_set_registry(struct upstream_worker *w, struct upreg *reg)
{
	w->reg = reg;
}

static void upstream_ep_free(struct upstream_worker *w, struct upstream_ep *ep)
{
	size_t i;

	for (i = 0; i < ep->n_idle; i++)
		upstream_idle_close(w, &ep->idle[i]);
	w->n_idle -= ep->n_idle;
	if (ep->g) {
		/* forgotten (its ejection over) or the worker ends: no
		 * longer one of the workers ejecting it, silently */
		if (ep->ejected)
			atomic_fetch_sub(&ep->g->ejected_by, 1);
		upstream_inflight_add(ep, -(int)ep->inflight);
		upreg_put(w->reg, ep->g);
	}
	free(ep->idle);
	free(ep);
}

void upstream_worker_free(struct upstream_worker *w)
{
	size_t i;

	if (!w)
		return;
	for (i = 0; i < w->n_buckets; i++) {
		struct upstream_ep *ep = w->buckets[i], *next;

		for (; ep; ep = next) {
			next = ep->next;
			upstream_ep_free(w, ep);
		}
	}
	free(w->buckets);
	free(w->scratch);
	free(w);
}

int upstream_worker_configure(struct upstream_worker *w, size_t max_idle_per_ep,
			      size_t max_idle_total, uint64_t idle_timeout_ns,
			      unsigned eject_after_failures,
			      uint64_t eject_base_ns, uint64_t eject_max_ns)
{
	uint64_t base = eject_base_ns ? eject_base_ns : w->eject_base_ns;
	uint64_t max = eject_max_ns ? eject_max_ns : w->eject_max_ns;

	if (base > max)
		return -EINVAL;
	if (max_idle_per_ep)
		w->max_idle_per_ep = max_idle_per_ep;
	if (max_idle_total)
		w->max_idle_total = max_idle_total;
	if (idle_timeout_ns)
		w->idle_timeout_ns = idle_timeout_ns;
	if (eject_after_failures)
		w->eject_after = eject_after_failures;
	w->eject_base_ns = base;
	w->eject_max_ns = max;
	return 0;
}

void upstream_stats(const struct upstream_worker *w, struct upstream_stats *st)
{
	*st = w->st;
	st->endpoints = w->n_eps;
	st->idle_fds = w->n_idle;
	st->circuits_open = circuit_count_open(&w->circuits);
}

size_t upstream_circuit_view(const struct upstream_worker *w, uint64_t now_ns,
			     struct circuit_view *out, size_t max)
{
	return circuit_view(&w->circuits, now_ns, out, max);
}

void upstream_retry_request(struct upstream_worker *w, uint64_t key,
			    uint64_t now_ns)
{
	retry_budget_request(&w->budgets, key, now_ns);
}

void upstream_count_ep_full(struct upstream_worker *w, bool refused)
{
	if (refused)
		w->st.ep_full_refused++;
	else
		w->st.ep_full_waits++;
}

bool upstream_circuit_admit(struct upstream_worker *w, uint64_t key,
			    uint64_t now_ns, bool *trial, uint64_t *wait_ms)
{
	bool ok = circuit_admit(&w->circuits, key, now_ns, trial, wait_ms);

	if (!ok)
		w->st.circuit_refused++;
	return ok;
}

void upstream_circuit_end(struct upstream_worker *w, uint64_t key,
			  const struct config_circuit *cfg, uint64_t now_ns,
			  bool trial, enum circuit_result res)
{
	if (circuit_end(&w->circuits, key, cfg, now_ns, trial, res))
		w->st.circuit_opens++;
}

bool upstream_retry_take(struct upstream_worker *w, uint64_t key, unsigned pct,
			 uint64_t now_ns)
{
	bool ok = retry_budget_take(&w->budgets, key, pct, now_ns);

	if (ok)
		w->st.retries++;
	else
		w->st.retry_refused++;
	return ok;
}

void upstream_hedge_sample(struct upstream_worker *w, uint64_t key, uint64_t ns,
			   uint64_t now_ns)
{
	hedge_sample(&w->hedges, key, ns, now_ns);
}

bool upstream_hedge_percentile(struct upstream_worker *w, uint64_t key,
			       unsigned pct, uint64_t now_ns, uint64_t *ns)
{
	return hedge_percentile(&w->hedges, key, pct, now_ns, ns);
}

bool upstream_hedge_take(struct upstream_worker *w, uint64_t key, unsigned pct,
			 uint64_t now_ns)
{
	bool ok = retry_budget_take(&w->budgets, key, pct, now_ns);

	if (ok)
		w->st.hedges++;
	else
		w->st.retry_refused++;
	return ok;
}

void upstream_hedge_won(struct upstream_worker *w)
{
	w->st.hedge_wins++;
}

/* ---- endpoint table ----------------------------------------------------- */

static void upstream_grow(struct upstream_worker *w)
{
	size_t n = w->n_buckets * 2, i;
	struct upstream_ep **b = calloc(n, sizeof(*b));

	if (!b)
		return; /* longer chains, still correct */
	for (i = 0; i < w->n_buckets; i++) {
		struct upstream_ep *ep = w->buckets[i], *next;

		for (; ep; ep = next) {
			next = ep->next;
			ep->next = b[ep->hash & (n - 1)];
			b[ep->hash & (n - 1)] = ep;
		}
	}
	free(w->buckets);
	w->buckets = b;
	w->n_buckets = n;
}

/* The endpoint for address a, created if new; NULL on -ENOMEM. */
static struct upstream_ep *upstream_ep_get(struct upstream_worker *w,
					   const struct config_addr *a)
{
	uint64_t h = upreg_addr_hash(a);
	struct upstream_ep *ep;

	for (ep = w->buckets[h & (w->n_buckets - 1)]; ep; ep = ep->next)
		if (ep->hash == h && upreg_addr_eq(&ep->addr, a))
			return ep;
	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return NULL;
	ep->hash = h;
	ep->w = w;
	ep->addr = *a;
	if (w->reg)
		ep->g = upreg_get(w->reg, a); /* NULL (full): no shared state */
	ep->next = w->buckets[h & (w->n_buckets - 1)];
	w->buckets[h & (w->n_buckets - 1)] = ep;
	if (++w->n_eps > w->n_buckets)
		upstream_grow(w);
	return ep;
}

const struct config_addr *upstream_ep_addr(const struct upstream_ep *ep)
{
	return &ep->addr;
}

unsigned upstream_ep_inflight(const struct upstream_ep *ep)
{
	return ep->inflight;
}

struct upreg_ep *upstream_ep_shared(const struct upstream_ep *ep)
{
	return ep->g;
}

void upstream_inflight_add(struct upstream_ep *ep, int delta)
{
	if (delta < 0 && (unsigned)-(int64_t)delta > ep->inflight)
		delta = -(int)ep->inflight;
	ep->inflight += (unsigned)delta;
	upreg_count_inflight(ep->g, delta);
}

/* ---- health ------------------------------------------------------------- */

/* now - t, or 0 if the clock passed in went backwards. */
static uint64_t upstream_age(uint64_t now, uint64_t t)
{
	return now > t ? now - t : 0;
}

bool upstream_ep_ejected(const struct upstream_ep *ep, uint64_t now_ns)
{
	return ep->ejected && now_ns < ep->eject_until;
}

/* Whether a normal (non-panic) select may choose ep at now. */
static bool upstream_ep_available(const struct upstream_ep *ep, uint64_t now)
{
	if (!upreg_selectable(ep->g))
		return false; /* drained, disabled, failing its active check */
	if (!ep->ejected)
		return true;
	if (now < ep->eject_until)
		return false;
	/* half-open: one probe at a time */
	return !ep->probing ||
	       upstream_age(now, ep->probe_since) >= UPSTREAM_PROBE_STALE_NS;
}

static void upstream_eject(struct upstream_worker *w, struct upstream_ep *ep,
			   uint64_t now, enum upreg_why why, int err)
{
	uint64_t d = w->eject_base_ns;
	unsigned i, failures = ep->failures ? ep->failures : 1;
	bool was = ep->ejected;

	for (i = 0; i < ep->ejections && d < w->eject_max_ns; i++)
		d = d > w->eject_max_ns / 2 ? w->eject_max_ns : d * 2;
	if (d > w->eject_max_ns)
		d = w->eject_max_ns;
	ep->ejections++;
	ep->ejected = true;
	ep->probing = false;
	ep->failures = 0;
	ep->eject_until = now + d;
	w->st.ejections++;
	if (!was) /* half-open failing again is still the same ejection */
		upreg_ejected(ep->g, failures, why, err, d);
}

void upstream_report(struct upstream_worker *w, struct upstream_ep *ep, bool ok,
		     uint64_t now_ns)
{
	upstream_report_why(w, ep, ok, now_ns, UPREG_WHY_NONE, 0);
}

void upstream_report_why(struct upstream_worker *w, struct upstream_ep *ep,
			 bool ok, uint64_t now_ns, enum upreg_why why, int err)
{
	if (ok) {
		if (ep->ejected)
			upreg_returned(ep->g);
		ep->failures = 0;
		ep->ejections = 0;
		ep->ejected = false;
		ep->probing = false;
		return;
	}
	upreg_count_failure(ep->g, why, err);
	if (ep->ejected) {
		/* half-open: the probe (or any request after the
		 * ejection ended) failed; while ejected: ignored */
		if (now_ns >= ep->eject_until)
			upstream_eject(w, ep, now_ns, why, err);
		return;
	}
	if (++ep->failures >= w->eject_after)
		upstream_eject(w, ep, now_ns, why, err);
}

/* ---- select ------------------------------------------------------------- */

static struct upstream_rr *upstream_rr_for(struct upstream_worker *w,
					   uint64_t generation, unsigned route,
					   uint64_t now)
{
	uint64_t k[2] = {generation, route};
	struct upstream_rr *set, *victim = NULL;
	size_t i;

	set = &w->rr[(siphash_key(k, sizeof(k)) % UPSTREAM_RR_SETS) *
		     UPSTREAM_RR_WAYS];
	for (i = 0; i < UPSTREAM_RR_WAYS; i++) {
		struct upstream_rr *r = &set[i];

		if (r->used && r->generation == generation &&
		    r->route_index == route) {
			r->seen = now;
			return r;
		}
		if (!victim ||
		    (victim->used && (!r->used || r->seen < victim->seen)))
			victim = r;
	}
	victim->used = true;
	victim->generation = generation;
	victim->route_index = route;
	victim->pos = 0;
	victim->seen = now;
	return victim;
}

static bool upstream_excluded(const struct upstream_ep *ep,
			      struct upstream_ep *const *exclude, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (exclude[i] == ep)
			return true;
	return false;
}

/* The client's hash input: IPv4 (also IPv4-mapped IPv6) or the IPv6 /64.
 * Returns the length, 0 when there is no usable address. */
static size_t upstream_client_key(const struct sockaddr *sa, uint8_t k[9])
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0,    0,
					   0, 0, 0, 0, 0xff, 0xff};

	if (!sa)
		return 0;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const void *)sa;

		k[0] = 4;
		memcpy(k + 1, &s4->sin_addr, 4);
		return 5;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)sa;
		const uint8_t *a = s6->sin6_addr.s6_addr;

		if (memcmp(a, mapped, sizeof(mapped)) == 0) {
			k[0] = 4;
			memcpy(k + 1, a + 12, 4);
			return 5;
		}
		k[0] = 6;
		memcpy(k + 1, a, 8);
		return 9;
	}
	return 0;
}

/* Rendezvous score of endpoint ep for client key ck. */
static uint64_t upstream_hrw(const uint8_t *ck, size_t n,
			     const struct upstream_ep *ep)
{
	uint8_t b[9 + 8];

	memcpy(b, ck, n);
	memcpy(b + n, &ep->hash, 8);
	return siphash_key(b, n + 8);
}

/* ep's requests in flight: every worker's (the registry's count), else
 * this worker's. */
static unsigned upstream_load(const struct upstream_ep *ep)
{
	return ep->g ? upreg_inflight(ep->g) : ep->inflight;
}

/* Whether ep is at cap (0: none). */
static bool upstream_full(const struct upstream_ep *ep, unsigned cap)
{
	return cap && upstream_load(ep) >= cap;
}

bool upstream_has_room(struct upstream_worker *w, const struct config_addr *eps,
		       size_t n, struct upstream_ep *const *exclude,
		       size_t n_exclude, unsigned cap, uint64_t now_ns)
{
	bool avail = false, panic = false;
	size_t i;

	if (!cap)
		return true;
	for (i = 0; i < n; i++) {
		struct upstream_ep *ep = upstream_ep_get(w, &eps[i]);

		if (!ep)
			return true; /* the select says -ENOMEM */
		if (upstream_excluded(ep, exclude, n_exclude) ||
		    upreg_admin_of(ep->g) == UPREG_DISABLED)
			continue;
		if (upstream_ep_available(ep, now_ns)) {
			if (!upstream_full(ep, cap))
				return true;
			avail = true;
		} else if (!upstream_full(ep, cap)) {
			panic = true;
		}
	}
	/* as the select: an available endpoint at its cap is waited for,
	 * an ejected one chosen only when none is available */
	return !avail && panic;
}

bool upstream_inflight_take(struct upstream_ep *ep, unsigned cap)
{
	if (!cap) {
		upstream_inflight_add(ep, 1);
		return true;
	}
	if (ep->g) {
		if (!upreg_inflight_take(ep->g, cap))
			return false;
	} else if (ep->inflight >= cap) {
		return false;
	}
	ep->inflight++;
	return true;
}

int upstream_select(struct upstream_worker *w, uint64_t generation,
		    unsigned route_index, const struct config_addr *eps,
		    size_t n, enum config_balance mode,
		    const struct sockaddr *client, uint64_t now_ns,
		    struct upstream_ep *const *exclude, size_t n_exclude,
		    struct upstream_ep **out)
{
	return upstream_select_cap(w, generation, route_index, eps, n, mode,
				   client, now_ns, exclude, n_exclude, 0, out);
}

int upstream_select_cap(struct upstream_worker *w, uint64_t generation,
			unsigned route_index, const struct config_addr *eps,
			size_t n, enum config_balance mode,
			const struct sockaddr *client, uint64_t now_ns,
			struct upstream_ep *const *exclude, size_t n_exclude,
			unsigned cap, struct upstream_ep **out)
{
	struct upstream_ep **c, *best = NULL;
	struct upstream_rr *rr = NULL;
	uint8_t ck[9];
	size_t ckn = 0, i, bi = 0;
	bool full = false; /* an endpoint skipped only for its cap */

	if (n == 0)
		return -EHOSTUNREACH;
	if (n > w->cap_scratch) {
		c = realloc(w->scratch, n * sizeof(*c));
		if (!c)
			return -ENOMEM;
		w->scratch = c;
		w->cap_scratch = n;
	}
	c = w->scratch;
	for (i = 0; i < n; i++) {
		c[i] = upstream_ep_get(w, &eps[i]);
		if (!c[i])
			return -ENOMEM;
		c[i]->last_used = now_ns;
	}
	if (mode == CONFIG_BALANCE_IP_HASH)
		ckn = upstream_client_key(client, ck);
	if (ckn) {
		uint64_t top = 0;

		for (i = 0; i < n; i++) {
			uint64_t s;

			if (!upstream_ep_available(c[i], now_ns) ||
			    upstream_excluded(c[i], exclude, n_exclude))
				continue;
			if (upstream_full(c[i], cap)) {
				full = true;
				continue;
			}
			s = upstream_hrw(ck, ckn, c[i]);
			if (!best || s > top) {
				best = c[i];
				top = s;
			}
		}
	} else {
		/* round robin, or least in-flight with ties round robin */
		rr = upstream_rr_for(w, generation, route_index, now_ns);
		for (i = 0; i < n; i++) {
			size_t j = (rr->pos + i) % n;

			if (!upstream_ep_available(c[j], now_ns) ||
			    upstream_excluded(c[j], exclude, n_exclude))
				continue;
			if (upstream_full(c[j], cap)) {
				full = true;
				continue;
			}
			if (!best || c[j]->inflight < best->inflight) {
				best = c[j];
				bi = j;
			}
			if (mode != CONFIG_BALANCE_LEAST_INFLIGHT ||
			    best->inflight == 0)
				break;
		}
	}
	if (best) {
		if (rr)
			rr->pos = (bi + 1) % n;
		if (best->ejected) { /* half-open: this is the probe */
			best->probing = true;
			best->probe_since = now_ns;
		}
		*out = best;
		return 0;
	}
	/* every available endpoint at its cap: wait for one rather than
	 * choose an ejected one */
	if (full)
		return -EBUSY;
	/* panic: all ejected, drained or excluded; the soonest back, if
	 * any (never a disabled one, nor one at its cap) */
	for (i = 0; i < n; i++) {
		if (upstream_excluded(c[i], exclude, n_exclude) ||
		    upreg_admin_of(c[i]->g) == UPREG_DISABLED)
			continue;
		if (upstream_full(c[i], cap)) {
			full = true;
			continue;
		}
		if (!best || c[i]->eject_until < best->eject_until)
			best = c[i];
	}
	if (!best)
		return full ? -EBUSY : -EHOSTUNREACH;
	w->st.panics++;
	*out = best;
	return 0;
}

/* ---- pool --------------------------------------------------------------- */

/* Close ep's k oldest idle fds. */
static void upstream_drop_oldest(struct upstream_worker *w,
				 struct upstream_ep *ep, size_t k)
{
	size_t i;

	for (i = 0; i < k; i++)
		upstream_idle_close(w, &ep->idle[i]);
	memmove(ep->idle, ep->idle + k, (ep->n_idle - k) * sizeof(*ep->idle));
	ep->n_idle -= k;
	w->n_idle -= k;
	w->st.pool_closed += k;
}

/* Whether an idle fd is still usable: nothing to read, no EOF, no error. */
static bool upstream_fd_usable(int fd)
{
	char b;
	ssize_t r;

	do
		r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

int upstream_pool_take_obj(struct upstream_worker *w, struct upstream_ep *ep,
			   uint64_t now_ns, void **obj)
{
	return upstream_pool_take_tag(w, ep, now_ns, 0, obj);
}

/* Remove ep's idle entry i, keeping the order. */
static struct upstream_idle upstream_idle_remove(struct upstream_worker *w,
						 struct upstream_ep *ep,
						 size_t i)
{
	struct upstream_idle it = ep->idle[i];

	memmove(ep->idle + i, ep->idle + i + 1,
		(ep->n_idle - i - 1) * sizeof(*ep->idle));
	ep->n_idle--;
	w->n_idle--;
	return it;
}

int upstream_pool_take_tag(struct upstream_worker *w, struct upstream_ep *ep,
			   uint64_t now_ns, uint64_t tag, void **obj)
{
	size_t i;

	*obj = NULL;
	if (ep->n_idle && upreg_admin_of(ep->g) != UPREG_ENABLED)
		upstream_drop_oldest(w, ep, ep->n_idle); /* drained */
	for (i = ep->n_idle; i-- > 0;) {
		struct upstream_idle it;

		if (ep->idle[i].tag != tag)
			continue; /* another profile's or name's */
		it = upstream_idle_remove(w, ep, i);
		/* a holder's object is watched while pooled (it forgets
		 * itself on EOF or data): no need to peek */
		if (upstream_age(now_ns, it.since) < w->idle_timeout_ns &&
		    (it.obj || upstream_fd_usable(it.fd))) {
			w->st.pool_hits++;
			*obj = it.obj;
			return it.fd;
		}
		upstream_idle_close(w, &it);
		w->st.pool_stale++;
	}
	w->st.pool_misses++;
	return -1;
}

int upstream_pool_take(struct upstream_worker *w, struct upstream_ep *ep,
		       uint64_t now_ns)
{
	void *obj;

	return upstream_pool_take_obj(w, ep, now_ns, &obj);
}

int upstream_pool_forget(struct upstream_ep *ep, const void *obj)
{
	struct upstream_worker *w = ep->w;
	size_t i;

	for (i = 0; i < ep->n_idle; i++) {
		if (ep->idle[i].obj != obj)
			continue;
		memmove(ep->idle + i, ep->idle + i + 1,
			(ep->n_idle - i - 1) * sizeof(*ep->idle));
		ep->n_idle--;
		w->n_idle--;
		w->st.pool_stale++;
		return 0;
	}
	return -ENOENT;
}

void upstream_pool_give(struct upstream_worker *w, struct upstream_ep *ep,
			int fd, uint64_t now_ns)
{
	upstream_pool_give_obj(w, ep, fd, NULL, now_ns);
}

void upstream_pool_give_obj(struct upstream_worker *w, struct upstream_ep *ep,
			    int fd, void *obj, uint64_t now_ns)
{
	upstream_pool_give_tag(w, ep, fd, obj, 0, now_ns);
}

void upstream_pool_give_tag(struct upstream_worker *w, struct upstream_ep *ep,
			    int fd, void *obj, uint64_t tag, uint64_t now_ns)
{
	struct upstream_idle it = {fd, obj, now_ns, tag};

	if (fd < 0)
		return;
	if (upreg_admin_of(ep->g) != UPREG_ENABLED)
		goto drop; /* drained: its connections end with their requests
			    */
	if (ep->n_idle >= w->max_idle_per_ep) /* make room: oldest first */
		upstream_drop_oldest(w, ep,
				     ep->n_idle - w->max_idle_per_ep + 1);
	if (w->n_idle >= w->max_idle_total)
		goto drop;
	if (ep->n_idle == ep->cap_idle) {
		size_t cap = ep->cap_idle ? ep->cap_idle * 2 : 4;
		struct upstream_idle *idle;

		if (cap > w->max_idle_per_ep)
			cap = w->max_idle_per_ep;
		idle = realloc(ep->idle, cap * sizeof(*idle));
		if (!idle)
			goto drop;
		ep->idle = idle;
		ep->cap_idle = cap;
	}
	ep->idle[ep->n_idle] = it;
	ep->n_idle++;
	w->n_idle++;
	return;
drop:
	upstream_idle_close(w, &it);
	w->st.pool_closed++;
}

/* Whether ep may be forgotten at now. */
static bool upstream_ep_idle(const struct upstream_ep *ep, uint64_t now)
{
	return ep->inflight == 0 && ep->n_idle == 0 && !ep->probing &&
	       upstream_age(now, ep->last_used) >= UPSTREAM_FORGET_NS &&
	       (!ep->ejected || now >= ep->eject_until);
}

size_t upstream_pool_shed(struct upstream_worker *w, size_t n)
{
	size_t i, done = 0;

	for (i = 0; i < w->n_buckets && done < n; i++) {
		struct upstream_ep *ep;

		for (ep = w->buckets[i]; ep && done < n; ep = ep->next) {
			size_t k =
			    ep->n_idle < n - done ? ep->n_idle : n - done;

			if (k) {
				upstream_drop_oldest(w, ep, k);
				done += k;
			}
		}
	}
	return done;
}

void upstream_pool_expire(struct upstream_worker *w, uint64_t now_ns)
{
	size_t i;

	for (i = 0; i < w->n_buckets; i++) {
		struct upstream_ep **pp = &w->buckets[i], *ep;

		while ((ep = *pp)) {
			size_t k = 0;

			while (k < ep->n_idle &&
			       upstream_age(now_ns, ep->idle[k].since) >=
				   w->idle_timeout_ns)
				k++;
			if (ep->n_idle - k > w->max_idle_per_ep)
				k = ep->n_idle - w->max_idle_per_ep;
			if (upreg_admin_of(ep->g) != UPREG_ENABLED)
				k = ep->n_idle; /* drained or disabled */
			if (k)
				upstream_drop_oldest(w, ep, k);
			if (upstream_ep_idle(ep, now_ns)) {
				*pp = ep->next;
				w->n_eps--;
				upstream_ep_free(w, ep);
				continue;
			}
			pp = &ep->next;
		}
	}
}
