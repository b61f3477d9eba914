// SPDX-License-Identifier: BSD-2-Clause
/*
 * pgxdp.c - the database's global IP rules in the pinned XDP maps
 * (pgxdp.h): one rule id per database rule from EDGE_LOCAL_RULES_MAX up,
 * the set written over the live one, then what it dropped removed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "clk.h"
#include "edge_maps.h"
#include "pgxdp.h"
#include "pins.h"

#define PGXDP_SLOTS (EDGE_MAX_RULES - EDGE_LOCAL_RULES_MAX)
/* entries pgxdp_check looks up per call: all of a thousand rules every
 * second, all 8192 in eight */
#define PGXDP_CHECK_SLOTS 1024

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
	int cursor;		  /* where pgxdp_verify goes on */
	int hi;			  /* slots in use are below it */
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
};

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

void pgxdp_free(struct pgxdp *x)
{
	if (!x)
		return;
	pins_close(&x->pins);
	free(x->set);
	free(x->refused);
	free(x->pin_dir);
	free(x);
}

/* The order pgxdp_plan groups rules in: by prefix, then the one that goes
 * in first (a block before an allow, then the lowest id). */
static int pgxdp_cmp(const void *a, const void *b, void *arg)
{
	const struct pgm_rule *v = arg;
	const struct pgm_rule *x = &v[*(const size_t *)a];
	const struct pgm_rule *y = &v[*(const size_t *)b];
	int c;

	if (x->cidr.family != y->cidr.family)
		return x->cidr.family < y->cidr.family ? -1 : 1;
	if (x->cidr.prefixlen != y->cidr.prefixlen)
		return x->cidr.prefixlen < y->cidr.prefixlen ? -1 : 1;
	c = memcmp(x->cidr.addr, y->cidr.addr, sizeof(x->cidr.addr));
	if (c)
		return c;
	if (x->action != y->action)
		return x->action == EDGE_ACT_BLOCK ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

int pgxdp_plan(const struct pgm_rule *v, size_t n, const struct cidr *keep,
	       size_t nk, uint8_t *out, size_t *written)
{
	size_t *ix, i, k;

	*written = 0;
	if (!n)
		return 0;
	ix = malloc(n * sizeof(*ix));
	if (!ix)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		ix[i] = i;
		out[i] = PGXDP_WRITE;
	}
	qsort_r(ix, n, sizeof(*ix), pgxdp_cmp, (void *)v);
	for (i = 1; i < n; i++)
		if (cidr_equal(&v[ix[i]].cidr, &v[ix[i - 1]].cidr))
			out[ix[i]] = PGXDP_DUPLICATE;
	free(ix);
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

/* The slot of database rule id: the one it had, else a free one (its hit
 * counter zeroed); -1 when none is left. */
static int pgxdp_slot(struct pgxdp *x, const struct pgm_rule *r)
{
	int i, free_slot = -1;

	for (i = 0; i < PGXDP_SLOTS; i++) {
		if (x->db[i] == r->id)
			return i;
		if (!x->db[i] && free_slot < 0)
			free_slot = i;
	}
	if (free_slot >= 0) {
		x->db[free_slot] = r->id;
		pins_hits_zero(&x->pins,
			       (uint32_t)(EDGE_LOCAL_RULES_MAX + free_slot));
	}
	return free_slot;
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

/* Write the set x holds into the maps. */
static void pgxdp_write(struct pgxdp *x)
{
	const struct pgm_rule *v = x->set;
	size_t n = x->n_set, i;
	struct timespec ts;
	uint64_t boot;
	int64_t wall = (int64_t)(clk_real_ns() / 1000000000ull);
	uint8_t *verdict;
	int slot;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	boot = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	verdict = malloc(n + 1);
	if (!verdict || pgxdp_plan(v, n, x->keep, x->n_keep, verdict, &i)) {
		x->st.errors++; /* out of memory: the maps keep the last set */
		free(verdict);
		return;
	}
	x->st.duplicates = x->st.refused = 0;
	for (size_t k = 0; k < n; k++) {
		x->st.duplicates += verdict[k] == PGXDP_DUPLICATE;
		x->st.refused += verdict[k] == PGXDP_REFUSED;
	}
	pgxdp_refused_log(x, v, n, verdict);
	memset(x->seen, 0, sizeof(x->seen));
	memset(x->shadow, 0, sizeof(x->shadow));
	x->st.rules = x->st.shadowed = 0;
	for (i = 0; i < n; i++) {
		struct edge_rule cur;
		struct rule r;

		if (verdict[i] != PGXDP_WRITE)
			continue;
		slot = pgxdp_slot(x, &v[i]);
		if (slot < 0) {
			x->st.over++;
			continue;
		}
		x->seen[slot] = true;
		x->cidr[slot] = v[i].cidr;
		x->exp[slot] = v[i].expires_at;
		if (pins_rule_get(&x->pins, &v[i].cidr, &cur) == 0 &&
		    cur.id < EDGE_LOCAL_RULES_MAX) {
			x->st.shadowed++; /* the host's own rule wins here */
			x->shadow[slot] = true;
			continue;
		}
		memset(&r, 0, sizeof(r));
		r.cidr = v[i].cidr;
		r.action = v[i].action;
		r.id = (uint32_t)(EDGE_LOCAL_RULES_MAX + slot);
		r.expires_at = v[i].expires_at;
		if (pins_rule_put(&x->pins, &r, wall, boot))
			x->st.errors++;
		else
			x->st.rules++;
	}
	/* what the set dropped: out of the maps, then out of the slots */
	if (pins_rules_each(&x->pins, pgxdp_sweep, x))
		x->st.errors++;
	x->hi = 0;
	for (i = 0; i < PGXDP_SLOTS; i++) {
		if (!x->seen[i])
			x->db[i] = 0;
		else
			x->hi = (int)i + 1;
	}
	x->st.applies++;
	x->dirty = false;
	free(verdict);
}

void pgxdp_apply(struct pgxdp *x, const struct pgm_rule *v, size_t n)
{
	struct pgm_rule *set = realloc(x->set, (n + 1) * sizeof(*set));

	if (!set) {
		x->st.errors++; /* out of memory: the maps keep the last set */
		return;
	}
	if (n)
		memcpy(set, v, n * sizeof(*v));
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

json_t *pgxdp_hits(struct pgxdp *x)
{
	json_t *o;
	char key[24];
	uint64_t h;
	int i;

	if (!pgxdp_open(x))
		return NULL;
	o = json_object();
	for (i = 0; o && i < PGXDP_SLOTS; i++) {
		if (!x->db[i] ||
		    pins_hits_read(&x->pins,
				   (uint32_t)(EDGE_LOCAL_RULES_MAX + i), &h))
			continue;
		snprintf(key, sizeof(key), "%lld", (long long)x->db[i]);
		json_object_set_new(o, key, json_integer((json_int_t)h));
	}
	return o;
}

void pgxdp_stats(const struct pgxdp *x, struct pgxdp_stats *st)
{
	*st = x->st;
}
