// SPDX-License-Identifier: BSD-2-Clause
/*
 * pgxdp.c - the database's global IP rules in the pinned XDP maps
 * (pgxdp.h): one rule id per database rule from EDGE_LOCAL_RULES_MAX up,
 * the set written over the live one, then what it dropped removed.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "clk.h"
#include "edge_maps.h"
#include "pgxdp.h"
#include "pins.h"
#include "siphash.h"

#define PGXDP_SLOTS (EDGE_MAX_RULES - EDGE_LOCAL_RULES_MAX)
/* entries pgxdp_check looks up per call: all of a thousand rules every
 * second, all 8192 in eight */
#define PGXDP_CHECK_SLOTS 1024
/* how long a write of the set holds the control loop before it lets the
 * loop run (and goes on at its next turn) */
#define PGXDP_SLICE_MS 10

/* Where the write of a set is (pgxdp_write_step). */
enum pgxdp_stage {
	PGXDP_IDLE = 0,
	PGXDP_PLAN,  /* which rules go in (pgxdp_plan), the slots */
	PGXDP_PUT,   /* the set over the live one, rule by rule */
	PGXDP_SWEEP, /* what it no longer holds out of the maps */
	PGXDP_LATE,  /* the rules that found no slot, into the freed ones */
};

/* An entry this process put in the maps that the set no longer holds:
 * its prefix and its slot. */
struct pgxdp_stale {
	struct cidr cidr;
	int slot;
};

/* A slot's rule id (pgxdp_write's index of the slots in use). */
struct pgxdp_ix {
	int64_t id;
	int slot;
};

/* The slots of one write: the ones in use by rule id, and the free ones
 * lowest first, so that finding a rule's slot costs a search, not a walk
 * of every slot (a walk per rule was 8192 * the set: seconds for 90,000
 * rules). */
struct pgxdp_slots {
	struct pgxdp_ix ix[PGXDP_SLOTS];
	size_t n_ix;
	int free[PGXDP_SLOTS];
	size_t n_free, next_free;
};

struct pgxdp {
	char *pin_dir;
	struct pins pins;
	bool open;
	/* slot i (rule id EDGE_LOCAL_RULES_MAX + i): the database rule's id
	 * and prefix it holds, db 0: free */
	int64_t db[PGXDP_SLOTS];
	struct cidr cidr[PGXDP_SLOTS];
	bool seen[PGXDP_SLOTS];	  /* in the set being applied */
	bool shadow[PGXDP_SLOTS]; /* a rule of the host's own holds it */
	int64_t exp[PGXDP_SLOTS]; /* the rule's expires_at */
	/* the entry this process put in the maps for slot i, if any (so
	 * that what a set drops is found without walking the maps, which
	 * is done once after they were opened: walk) */
	bool inmap[PGXDP_SLOTS];
	struct cidr mcidr[PGXDP_SLOTS];
	struct pgxdp_stale *stale; /* to take out, at the next sweep */
	size_t n_stale, cap_stale, next_stale;
	bool walk;  /* the maps are new to us: whatever is ours goes */
	int cursor; /* where pgxdp_verify goes on */
	int hi;	    /* slots in use are below it */
	/* the last set applied, written again when the maps come back or
	 * are replaced, when a host's rule that held one of its prefixes
	 * goes and when the keep addresses change (dirty) */
	struct pgm_rule *set;
	size_t n_set;
	bool have_set, dirty;
	bool told_perm; /* the maps could not be opened for want of rights */
	bool was_open;	/* the maps were open once */
	struct cidr keep[PGXDP_KEEP_MAX];
	size_t n_keep;
	int64_t *refused; /* the ids refused at the last apply */
	size_t n_refused;
	struct pgxdp_stats st;
	/* the write under way, in slices on base's loop (none: at once) */
	struct event *ev;
	enum pgxdp_stage stage;
	uint8_t *verdict; /* pgxdp_plan's, PGXDP_OVER for no slot */
	struct pgxdp_slots *sl;
	size_t next;		/* the next rule of the set */
	size_t over;		/* rules that found no slot yet */
	size_t rules, shadowed; /* what the write put in, and did not */
	int64_t wall;		/* the clocks of the write's start */
	uint64_t boot;
};

static void pgxdp_write_run(struct pgxdp *x);
static void pgxdp_write_cb(evutil_socket_t fd, short what, void *arg);
static void pgxdp_write_drop(struct pgxdp *x);

static const char *const pgxdp_ctr_names[EDGE_CTR_MAX] = {
#define PGXDP_CTR_NAME(id, name, help) name,
    EDGE_COUNTERS(PGXDP_CTR_NAME)
#undef PGXDP_CTR_NAME
};

static bool pgxdp_open(struct pgxdp *x)
{
	struct errbuf err;

	if (x->open)
		return true;
	int rc = pins_open(&x->pins, x->pin_dir, &err);

	/* a pin directory this user may not search looks empty: the maps
	 * went from under a host that had them (a detach) */
	if (rc == -ENOENT && x->was_open && access(x->pin_dir, X_OK) != 0 &&
	    errno == EACCES)
		rc = -EACCES;

	if (rc == 0) {
		x->open = x->was_open = true;
		x->walk = true; /* what an edged before left in them */
		memset(x->inmap, 0, sizeof(x->inmap));
		x->n_stale = x->next_stale = 0;
		x->dirty = true; /* maps new to us: the set goes in */
		x->told_perm = false;
	} else if ((rc == -EPERM || rc == -EACCES) && !x->told_perm) {
		/* attached after an unprivileged edged started: say so once
		 * rather than leave the maps without the database's rules
		 * in silence */
		x->told_perm = true;
		log_warnx("database: cannot open the XDP maps in %s (%s): "
			  "edged no longer has the rights; restart it to put "
			  "the database's IP rules into them",
			  x->pin_dir, strerror(-rc));
	}
	return x->open;
}

int pgxdp_new(const char *pin_dir, struct pgxdp **out)
{
	struct pgxdp *x = calloc(1, sizeof(*x));

	if (!x)
		return -ENOMEM;
	pins_init(&x->pins);
	x->pin_dir = strdup(pin_dir);
	if (!x->pin_dir) {
		free(x);
		return -ENOMEM;
	}
	pgxdp_open(x);
	*out = x;
	return 0;
}

int pgxdp_start(struct pgxdp *x, struct event_base *base)
{
	if (x->ev)
		return 0;
	x->ev = evtimer_new(base, pgxdp_write_cb, x);
	return x->ev ? 0 : -ENOMEM;
}

void pgxdp_free(struct pgxdp *x)
{
	if (!x)
		return;
	pgxdp_write_drop(x);
	if (x->ev)
		event_free(x->ev);
	free(x->stale);
	pins_close(&x->pins);
	free(x->set);
	free(x->refused);
	free(x->pin_dir);
	free(x);
}

/* Whether x goes in rather than y, both on one prefix: a block before an
 * allow, then the lowest id. */
static bool pgxdp_first(const struct pgm_rule *x, const struct pgm_rule *y)
{
	if (x->action != y->action)
		return x->action == EDGE_ACT_BLOCK;
	return x->id < y->id;
}

int pgxdp_plan(const struct pgm_rule *v, size_t n, const struct cidr *keep,
	       size_t nk, uint8_t *out, size_t *written)
{
	size_t *tab, cap, i, k, h, j;

	*written = 0;
	if (!n)
		return 0;
	/* one rule per prefix: a table of the prefixes (open addressing,
	 * at most half full), linear in the rules where a sort was not */
	for (cap = 16; cap < 2 * n; cap *= 2)
		;
	tab = malloc(cap * sizeof(*tab));
	if (!tab)
		return -ENOMEM;
	for (h = 0; h < cap; h++)
		tab[h] = SIZE_MAX;
	for (i = 0; i < n; i++) {
		out[i] = PGXDP_WRITE;
		h = (size_t)siphash_key(&v[i].cidr, sizeof(v[i].cidr)) &
		    (cap - 1);
		for (; (j = tab[h]) != SIZE_MAX; h = (h + 1) & (cap - 1))
			if (cidr_equal(&v[j].cidr, &v[i].cidr))
				break;
		if (j == SIZE_MAX) {
			tab[h] = i;
		} else if (pgxdp_first(&v[i], &v[j])) {
			out[j] = PGXDP_DUPLICATE;
			tab[h] = i;
		} else {
			out[i] = PGXDP_DUPLICATE;
		}
	}
	free(tab);
	/* the longest match for each keep address must not be a block */
	for (k = 0; k < nk; k++) {
		for (;;) {
			size_t best = n;

			for (i = 0; i < n; i++)
				if (out[i] == PGXDP_WRITE &&
				    cidr_contains(&v[i].cidr, &keep[k]) &&
				    (best == n || v[i].cidr.prefixlen >
						      v[best].cidr.prefixlen))
					best = i;
			if (best == n || v[best].action != EDGE_ACT_BLOCK)
				break;
			out[best] = PGXDP_REFUSED;
		}
	}
	for (i = 0; i < n; i++)
		*written += out[i] == PGXDP_WRITE;
	return 0;
}

bool pgxdp_keep(struct pgxdp *x, const struct cidr *a, size_t n)
{
	if (n > PGXDP_KEEP_MAX)
		n = PGXDP_KEEP_MAX;
	if (n == x->n_keep && (!n || !memcmp(x->keep, a, n * sizeof(*a))))
		return false;
	if (n)
		memcpy(x->keep, a, n * sizeof(*a));
	x->n_keep = n;
	x->dirty = true;
	return true;
}

/* Say each refused rule once (until it is no longer refused), and keep
 * the list for next time. */
static void pgxdp_refused_log(struct pgxdp *x, const struct pgm_rule *v,
			      size_t n, const uint8_t *verdict)
{
	char c[CIDR_STR_MAX], a[CIDR_STR_MAX];
	int64_t *ids = malloc((n + 1) * sizeof(*ids));
	size_t i, j, k = 0;

	for (i = 0; i < n; i++) {
		bool known = false;

		if (verdict[i] != PGXDP_REFUSED)
			continue;
		if (ids)
			ids[k++] = v[i].id;
		for (j = 0; j < x->n_refused && !known; j++)
			known = x->refused[j] == v[i].id;
		if (known)
			continue;
		for (j = 0; j < x->n_keep; j++)
			if (cidr_contains(&v[i].cidr, &x->keep[j]))
				break;
		log_warnx_rl(
		    "database: ip_rules row id %lld (block %s): left "
		    "out of the XDP maps: it would drop the "
		    "database's packets (%s) on this host, and a rule "
		    "that cuts the database off could not be taken "
		    "back through it",
		    (long long)v[i].id, cidr_format(&v[i].cidr, c, sizeof(c)),
		    j < x->n_keep ? cidr_format_addr(&x->keep[j], a, sizeof(a))
				  : "?");
	}
	free(x->refused);
	x->refused = ids;
	x->n_refused = ids ? k : 0;
}

static int pgxdp_ix_cmp(const void *a, const void *b)
{
	const struct pgxdp_ix *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static void pgxdp_slots_init(const struct pgxdp *x, struct pgxdp_slots *sl)
{
	int i;

	sl->n_ix = sl->n_free = sl->next_free = 0;
	for (i = 0; i < PGXDP_SLOTS; i++) {
		if (x->db[i])
			sl->ix[sl->n_ix++] = (struct pgxdp_ix){x->db[i], i};
		else
			sl->free[sl->n_free++] = i;
	}
	qsort(sl->ix, sl->n_ix, sizeof(sl->ix[0]), pgxdp_ix_cmp);
}

/* The slot of database rule r: the one it had, else a free one (its hit
 * counter zeroed); -1 when none is left. */
static int pgxdp_slot(struct pgxdp *x, struct pgxdp_slots *sl,
		      const struct pgm_rule *r)
{
	struct pgxdp_ix key = {r->id, 0}, *hit;
	int slot;

	hit = sl->n_ix ? bsearch(&key, sl->ix, sl->n_ix, sizeof(sl->ix[0]),
				 pgxdp_ix_cmp)
		       : NULL;
	if (hit)
		return hit->slot;
	if (sl->next_free == sl->n_free)
		return -1;
	slot = sl->free[sl->next_free++];
	x->db[slot] = r->id;
	pins_hits_zero(&x->pins, (uint32_t)(EDGE_LOCAL_RULES_MAX + slot));
	return slot;
}

/* Remove the database's entries the set no longer holds. */
static int pgxdp_sweep(void *arg, const struct cidr *c,
		       const struct edge_rule *v)
{
	struct pgxdp *x = arg;
	int slot;

	if (v->id < EDGE_LOCAL_RULES_MAX || v->id >= EDGE_MAX_RULES)
		return 0; /* the host's own */
	slot = (int)(v->id - EDGE_LOCAL_RULES_MAX);
	if (x->db[slot] && x->seen[slot] && cidr_equal(&x->cidr[slot], c))
		return 0;
	slot = pins_rule_del(&x->pins, c);
	if (slot && slot != -ENOENT)
		x->st.errors++;
	return 0;
}

/* The entry of slot on prefix c is to go (at the next sweep). Out of
 * memory: the maps are walked at the next sweep instead. */
static void pgxdp_stale_add(struct pgxdp *x, const struct cidr *c, int slot)
{
	if (x->n_stale == x->cap_stale) {
		size_t cap = x->cap_stale ? x->cap_stale * 2 : 64;
		struct pgxdp_stale *v = realloc(x->stale, cap * sizeof(*v));

		if (!v) {
			x->walk = true;
			return;
		}
		x->stale = v;
		x->cap_stale = cap;
	}
	x->stale[x->n_stale].cidr = *c;
	x->stale[x->n_stale++].slot = slot;
}

/* Rule r into the maps in slot (unless a rule of the host's own holds its
 * prefix). */
static void pgxdp_put(struct pgxdp *x, const struct pgm_rule *r, int slot,
		      int64_t wall, uint64_t boot)
{
	struct edge_rule cur;
	struct rule e;

	x->seen[slot] = true;
	x->cidr[slot] = r->cidr;
	x->exp[slot] = r->expires_at;
	/* the slot's entry on another prefix (the rule's cidr changed)
	 * goes at the sweep */
	if (x->inmap[slot] && !cidr_equal(&x->mcidr[slot], &r->cidr)) {
		pgxdp_stale_add(x, &x->mcidr[slot], slot);
		x->inmap[slot] = false;
	}
	if (pins_rule_get(&x->pins, &r->cidr, &cur) == 0 &&
	    cur.id < EDGE_LOCAL_RULES_MAX) {
		x->shadowed++; /* the host's own rule wins here */
		x->shadow[slot] = true;
		x->inmap[slot] = false;
		return;
	}
	memset(&e, 0, sizeof(e));
	e.cidr = r->cidr;
	e.action = r->action;
	e.id = (uint32_t)(EDGE_LOCAL_RULES_MAX + slot);
	e.expires_at = r->expires_at;
	if (pins_rule_put(&x->pins, &e, wall, boot)) {
		x->st.errors++;
	} else {
		x->rules++;
		x->inmap[slot] = true;
		x->mcidr[slot] = r->cidr;
	}
}

/* The rules left out for want of a slot: said when their number changes. */
static void pgxdp_over_log(struct pgxdp *x, size_t over)
{
	if (over && over != x->st.over)
		log_warnx("database: %zu of the database's IP rules left out "
			  "of the XDP maps: they hold %d of the database's "
			  "rules (rules in them keep their place, the others "
			  "take the free ones by id); counted as xdp_over "
			  "until rules are deleted",
			  over, PGXDP_SLOTS);
	else if (!over && x->st.over)
		log_note("database: every one of the database's IP rules is "
			 "in the XDP maps again");
	x->st.over = over;
}

/* The write under way dropped (a newer set replaces it, or x goes). */
static void pgxdp_write_drop(struct pgxdp *x)
{
	free(x->verdict);
	x->verdict = NULL;
	free(x->sl);
	x->sl = NULL;
	x->stage = PGXDP_IDLE;
	if (x->ev)
		evtimer_del(x->ev);
}

/* Begin writing the set x holds into the maps. */
static void pgxdp_write_begin(struct pgxdp *x)
{
	pgxdp_write_drop(x);
	x->stage = PGXDP_PLAN;
}

/* The plan and the slots. */
static void pgxdp_write_plan(struct pgxdp *x)
{
	const struct pgm_rule *v = x->set;
	size_t n = x->n_set, k, written;
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	x->boot = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	x->wall = (int64_t)(clk_real_ns() / 1000000000ull);
	x->verdict = malloc(n + 1);
	x->sl = malloc(sizeof(*x->sl));
	if (!x->sl || !x->verdict ||
	    pgxdp_plan(v, n, x->keep, x->n_keep, x->verdict, &written)) {
		x->st.errors++; /* out of memory: the maps keep the last set */
		pgxdp_write_drop(x); /* idle */
		return;
	}
	x->st.duplicates = x->st.refused = 0;
	for (k = 0; k < n; k++) {
		x->st.duplicates += x->verdict[k] == PGXDP_DUPLICATE;
		x->st.refused += x->verdict[k] == PGXDP_REFUSED;
	}
	pgxdp_refused_log(x, v, n, x->verdict);
	memset(x->seen, 0, sizeof(x->seen));
	memset(x->shadow, 0, sizeof(x->shadow));
	x->rules = x->shadowed = x->over = 0;
	/* the set is in id order (pgxdp_apply): a rule that has a slot
	 * keeps it, the others take the free ones by id */
	pgxdp_slots_init(x, x->sl);
	x->next = 0;
	x->stage = PGXDP_PUT;
}

/* Go on with the write until deadline_ns (0: to the end): 1 while work is
 * left, 0 once done. */
static int pgxdp_write_step(struct pgxdp *x, uint64_t deadline_ns)
{
	const struct pgm_rule *v = x->set;
	size_t n = x->n_set, i;
	int slot;

	if (x->stage == PGXDP_PLAN) {
		pgxdp_write_plan(x);
		if (x->stage == PGXDP_IDLE)
			return 0;
		if (deadline_ns && clk_fresh_ns() >= deadline_ns)
			return 1;
	}
	for (; x->stage == PGXDP_PUT && x->next < n; x->next++) {
		if (deadline_ns && x->next % 64 == 0 &&
		    clk_fresh_ns() >= deadline_ns)
			return 1;
		if (x->verdict[x->next] != PGXDP_WRITE)
			continue;
		slot = pgxdp_slot(x, x->sl, &v[x->next]);
		if (slot < 0) {
			x->verdict[x->next] = PGXDP_OVER;
			x->over++;
			continue;
		}
		pgxdp_put(x, &v[x->next], slot, x->wall, x->boot);
	}
	if (x->stage == PGXDP_PUT) {
		x->stage = PGXDP_SWEEP;
		if (deadline_ns && clk_fresh_ns() >= deadline_ns)
			return 1;
	}
	if (x->stage == PGXDP_SWEEP && x->next_stale == 0) {
		/* what the set dropped: the entries of the slots it no
		 * longer uses go, then the slots, which the rules that found
		 * none may take */
		for (i = 0; i < PGXDP_SLOTS; i++) {
			if (x->inmap[i] && !x->seen[i]) {
				pgxdp_stale_add(x, &x->mcidr[i], (int)i);
				x->inmap[i] = false;
			}
		}
		/* maps new to us: anything of the database's range that is
		 * not the set's (one walk of them, this once) */
		if (x->walk) {
			if (pins_rules_each(&x->pins, pgxdp_sweep, x))
				x->st.errors++;
			x->walk = false;
		}
	}
	for (; x->stage == PGXDP_SWEEP && x->next_stale < x->n_stale;
	     x->next_stale++) {
		const struct pgxdp_stale *st = &x->stale[x->next_stale];
		struct edge_rule cur;
		int rc;

		if (deadline_ns && x->next_stale % 64 == 0 &&
		    clk_fresh_ns() >= deadline_ns)
			return 1;
		/* unless another slot's entry (or the host's) holds the
		 * prefix now */
		if (pins_rule_get(&x->pins, &st->cidr, &cur) != 0 ||
		    cur.id != (uint32_t)(EDGE_LOCAL_RULES_MAX + st->slot))
			continue;
		rc = pins_rule_del(&x->pins, &st->cidr);
		if (rc && rc != -ENOENT)
			x->st.errors++;
	}
	if (x->stage == PGXDP_SWEEP) {
		x->n_stale = x->next_stale = 0;
		for (i = 0; i < PGXDP_SLOTS; i++)
			if (!x->seen[i])
				x->db[i] = 0;
		pgxdp_slots_init(x, x->sl);
		x->next = 0;
		x->stage = PGXDP_LATE;
	}
	for (; x->over && x->next < n; x->next++) {
		if (deadline_ns && x->next % 64 == 0 &&
		    clk_fresh_ns() >= deadline_ns)
			return 1;
		if (x->verdict[x->next] != PGXDP_OVER)
			continue;
		slot = pgxdp_slot(x, x->sl, &v[x->next]);
		if (slot < 0)
			break;
		pgxdp_put(x, &v[x->next], slot, x->wall, x->boot);
		x->over--;
	}
	pgxdp_over_log(x, x->over);
	x->st.rules = x->rules;
	x->st.shadowed = x->shadowed;
	x->hi = 0;
	for (i = 0; i < PGXDP_SLOTS; i++)
		if (x->seen[i])
			x->hi = (int)i + 1;
	x->st.applies++;
	x->dirty = false;
	pgxdp_write_drop(x);
	return 0;
}

static void pgxdp_write_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	pgxdp_write_run(arg);
}

/* Write the set x holds into the maps: at once without a loop, else a
 * slice now and the rest at the loop's next turns. */
static void pgxdp_write(struct pgxdp *x)
{
	pgxdp_write_begin(x);
	pgxdp_write_run(x);
}

static void pgxdp_write_run(struct pgxdp *x)
{
	static const struct timeval now = {0, 0};

	if (x->stage == PGXDP_IDLE)
		return;
	if (!x->ev) {
		pgxdp_write_step(x, 0);
		return;
	}
	if (pgxdp_write_step(x, clk_fresh_ns() + PGXDP_SLICE_MS * 1000000ull) >
	    0)
		evtimer_add(x->ev, &now);
}

static int pgxdp_rule_cmp(const void *a, const void *b)
{
	const struct pgm_rule *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

void pgxdp_apply(struct pgxdp *x, const struct pgm_rule *v, size_t n)
{
	size_t i;
	struct pgm_rule *set = realloc(x->set, (n + 1) * sizeof(*set));

	if (!set) {
		x->st.errors++; /* out of memory: the maps keep the last set */
		return;
	}
	if (n)
		memcpy(set, v, n * sizeof(*v));
	for (i = 1; i < n && set[i - 1].id < set[i].id; i++)
		;
	if (i < n) /* the model's come sorted by id: no sort then */
		qsort(set, n, sizeof(*set), pgxdp_rule_cmp);
	x->set = set;
	x->n_set = n;
	x->have_set = true;
	x->st.attached = pgxdp_open(x);
	if (x->st.attached)
		pgxdp_write(x);
	else
		x->dirty = true; /* written once the maps are there */
}

/* Look at up to PGXDP_CHECK_SLOTS of the set's entries (on from where
 * the last call stopped): a host's rule that now holds one of their
 * prefixes is counted as shadowing it; an entry gone that has not
 * expired (the host's rule that held its prefix deleted, or the entry
 * removed behind edged's back) needs the set written again (true). */
static bool pgxdp_verify(struct pgxdp *x)
{
	int64_t wall = (int64_t)(clk_real_ns() / 1000000000ull);
	struct edge_rule cur;
	int k, i;

	for (k = 0; k < PGXDP_CHECK_SLOTS && k < x->hi; k++) {
		i = x->cursor < x->hi ? x->cursor : 0;
		x->cursor = i + 1;
		if (!x->seen[i] || !x->db[i])
			continue;
		if (pins_rule_get(&x->pins, &x->cidr[i], &cur) != 0) {
			if (!x->exp[i] || x->exp[i] > wall)
				return true;
		} else if (cur.id < EDGE_LOCAL_RULES_MAX && !x->shadow[i]) {
			x->shadow[i] = true; /* edgectl took the prefix */
			x->st.shadowed++;
			if (x->st.rules)
				x->st.rules--;
		} else if (cur.id >= EDGE_LOCAL_RULES_MAX &&
			   cur.id != (uint32_t)(EDGE_LOCAL_RULES_MAX + i)) {
			return true;
		}
	}
	return false;
}

void pgxdp_check(struct pgxdp *x)
{
	if (x->stage != PGXDP_IDLE)
		return; /* a write under way: looked at once it is done */
	if (x->open && pins_replaced(&x->pins)) {
		log_note("database: the XDP maps in %s are not the ones edge "
			 "has pinned any more (detached, or attached again): "
			 "the database's rules go into the new ones",
			 x->pin_dir);
		pins_close(&x->pins);
		x->open = false;
		x->st.reopens++;
	}
	x->st.attached = pgxdp_open(x);
	if (!x->st.attached || !x->have_set)
		return;
	if (x->dirty || pgxdp_verify(x))
		pgxdp_write(x);
}

json_t *pgxdp_counters(struct pgxdp *x)
{
	uint64_t v[EDGE_CTR_MAX];
	json_t *o;
	int i;

	if (!pgxdp_open(x) || pins_counters_read(&x->pins, v))
		return NULL;
	o = json_object();
	for (i = 0; o && i < EDGE_CTR_MAX; i++)
		json_object_set_new(o, pgxdp_ctr_names[i],
				    json_integer((json_int_t)v[i]));
	return o;
}

char *pgxdp_hits(struct pgxdp *x)
{
	uint64_t *h = NULL;
	char *out = NULL;
	size_t len = 2, k = 0;
	int i, w;

	if (!pgxdp_open(x))
		return NULL;
	/* the slots in use, in one read of the maps (8192 lookups and as
	 * many JSON nodes were a quarter of a second of the control loop
	 * under load) */
	if (x->hi && (!(h = calloc((size_t)x->hi, sizeof(*h))) ||
		      pins_hits_read_range(&x->pins, EDGE_LOCAL_RULES_MAX,
					   (uint32_t)x->hi, h)))
		goto out;
	for (i = 0; i < x->hi; i++)
		len += x->db[i] ? 44 : 0; /* "ID":N, at most */
	out = malloc(len + 1);
	if (!out)
		goto out;
	out[k++] = '{';
	for (i = 0; i < x->hi; i++) {
		if (!x->db[i])
			continue;
		w = snprintf(out + k, len + 1 - k, "%s\"%lld\":%llu",
			     k > 1 ? "," : "", (long long)x->db[i],
			     (unsigned long long)h[i]);
		if (w < 0 || (size_t)w >= len + 1 - k) {
			free(out);
			out = NULL;
			goto out;
		}
		k += (size_t)w;
	}
	out[k++] = '}';
	out[k] = '\0';
out:
	free(h);
	return out;
}

void pgxdp_stats(const struct pgxdp *x, struct pgxdp_stats *st)
{
	*st = x->st;
}
