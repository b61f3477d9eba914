/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pmap.c - the persistent hash trie of pmap.h: inner nodes of 16
 * children, leaves holding one key, and collision nodes holding the
 * leaves of keys whose hashes are equal in all 64 bits. A change copies
 * the inner nodes on its path (unless the current batch made them) and
 * leaves the rest shared.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "pmap.h"
#include "siphash.h"

#define PM_BITS 4
#define PM_FAN (1u << PM_BITS)
#define PM_LEVELS (64 / PM_BITS)

enum pm_kind { PM_INNER, PM_LEAF, PM_COLL };

struct pmap_node {
	atomic_uint ref;
	uint8_t kind;
	uint64_t epoch; /* the batch that made it */
};

struct pm_inner {
	struct pmap_node h;
	struct pmap_node *kid[PM_FAN];
};

struct pm_leaf {
	struct pmap_node h;
	uint64_t hash;
	void *val;
	size_t len;
	char key[];
};

struct pm_coll {
	struct pmap_node h;
	uint64_t hash;
	size_t n;
	struct pm_leaf *v[];
};

static uint64_t pm_epoch_now; /* the writer's */
static atomic_ullong pm_made; /* nodes made */
static uint64_t (*pm_hash)(const void *, size_t) = siphash_key;

void pmap_test_hash(uint64_t (*fn)(const void *data, size_t len))
{
	pm_hash = fn ? fn : siphash_key;
}

uint64_t pmap_epoch(void)
{
	return ++pm_epoch_now;
}

uint64_t pmap_nodes_made(void)
{
	return atomic_load_explicit(&pm_made, memory_order_relaxed);
}

static unsigned pm_idx(uint64_t hash, unsigned depth)
{
	return (unsigned)(hash >> (depth * PM_BITS)) & (PM_FAN - 1);
}

static void *pm_alloc(size_t size, enum pm_kind kind, uint64_t epoch)
{
	struct pmap_node *n = calloc(1, size);

	if (!n)
		return NULL;
	atomic_init(&n->ref, 1);
	n->kind = (uint8_t)kind;
	n->epoch = epoch;
	atomic_fetch_add_explicit(&pm_made, 1, memory_order_relaxed);
	return n;
}

struct pmap_node *pmap_ref(struct pmap_node *n)
{
	if (n)
		atomic_fetch_add_explicit(&n->ref, 1, memory_order_relaxed);
	return n;
}

void pmap_put(struct pmap_node *n, const struct pmap_ops *ops)
{
	unsigned i;

	if (!n ||
	    atomic_fetch_sub_explicit(&n->ref, 1, memory_order_acq_rel) != 1)
		return;
	switch (n->kind) {
	case PM_INNER:
		for (i = 0; i < PM_FAN; i++)
			pmap_put(((struct pm_inner *)n)->kid[i], ops);
		break;
	case PM_LEAF:
		if (ops && ops->free_val)
			ops->free_val(((struct pm_leaf *)n)->val);
		break;
	case PM_COLL:
		for (i = 0; i < ((struct pm_coll *)n)->n; i++)
			pmap_put(&((struct pm_coll *)n)->v[i]->h, ops);
		break;
	}
	free(n);
}

static bool pm_leaf_is(const struct pm_leaf *l, const char *key, size_t len)
{
	return l->len == len && memcmp(l->key, key, len) == 0;
}

void *pmap_get(const struct pmap_node *n, const char *key, size_t len)
{
	uint64_t hash = pm_hash(key, len);
	unsigned depth = 0, i;

	while (n) {
		switch (n->kind) {
		case PM_INNER:
			n = ((const struct pm_inner *)n)
				->kid[pm_idx(hash, depth++)];
			continue;
		case PM_LEAF: {
			const struct pm_leaf *l = (const void *)n;

			return l->hash == hash && pm_leaf_is(l, key, len)
				   ? l->val
				   : NULL;
		}
		default: {
			const struct pm_coll *c = (const void *)n;

			if (c->hash != hash)
				return NULL;
			for (i = 0; i < c->n; i++)
				if (pm_leaf_is(c->v[i], key, len))
					return c->v[i]->val;
			return NULL;
		}
		}
	}
	return NULL;
}

static uint64_t pm_hash_of(const struct pmap_node *n)
{
	return n->kind == PM_LEAF ? ((const struct pm_leaf *)n)->hash
				  : ((const struct pm_coll *)n)->hash;
}

/* A copy of inner node n made in epoch (its children shared). */
static struct pm_inner *pm_copy(const struct pm_inner *n, uint64_t epoch)
{
	struct pm_inner *c = pm_alloc(sizeof(*c), PM_INNER, epoch);
	unsigned i;

	if (!c)
		return NULL;
	for (i = 0; i < PM_FAN; i++)
		c->kid[i] = pmap_ref(n->kid[i]);
	return c;
}

/* A collision node of c's leaves, but the one of key (if any), plus add
 * (if not NULL). */
static struct pm_coll *pm_coll_with(const struct pm_coll *c, uint64_t hash,
				    const char *key, size_t len,
				    struct pm_leaf *add, uint64_t epoch)
{
	size_t n = (c ? c->n : 0) + 1, i;
	struct pm_coll *x =
	    pm_alloc(sizeof(*x) + n * sizeof(x->v[0]), PM_COLL, epoch);

	if (!x)
		return NULL;
	x->hash = hash;
	for (i = 0; c && i < c->n; i++)
		if (!pm_leaf_is(c->v[i], key, len))
			x->v[x->n++] = (struct pm_leaf *)pmap_ref(&c->v[i]->h);
	if (add)
		x->v[x->n++] = add;
	return x;
}

/*
 * Put leaf l into slot, which holds old (a leaf or a collision node of
 * another hash, whose reference the slot keeps giving): inner nodes down
 * to the first depth at which the two hashes part, old and l there.
 */
static int pm_split(struct pmap_node **slot, struct pmap_node *old,
		    struct pm_leaf *l, unsigned depth, uint64_t epoch)
{
	uint64_t ho = pm_hash_of(old);
	struct pm_inner *chain[PM_LEVELS];
	unsigned d = depth, k, n;

	while (d < PM_LEVELS - 1 && pm_idx(ho, d) == pm_idx(l->hash, d))
		d++;
	n = d - depth + 1;
	for (k = 0; k < n; k++) {
		chain[k] = pm_alloc(sizeof(*chain[k]), PM_INNER, epoch);
		if (!chain[k]) {
			while (k--)
				free(chain[k]);
			return -ENOMEM;
		}
	}
	for (k = 0; k + 1 < n; k++)
		chain[k]->kid[pm_idx(l->hash, depth + k)] = &chain[k + 1]->h;
	chain[n - 1]->kid[pm_idx(ho, d)] = old;
	chain[n - 1]->kid[pm_idx(l->hash, d)] = &l->h;
	*slot = &chain[0]->h;
	return 0;
}

static int pm_set_at(struct pmap_node **slot, struct pm_leaf *l, unsigned depth,
		     uint64_t epoch, const struct pmap_ops *ops)
{
	struct pmap_node *n = *slot;
	int rc;

	if (!n) {
		*slot = &l->h;
		return 0;
	}
	if (n->kind == PM_INNER) {
		struct pm_inner *c = (struct pm_inner *)n;

		if (n->epoch != epoch && !(c = pm_copy(c, epoch)))
			return -ENOMEM;
		rc = pm_set_at(&c->kid[pm_idx(l->hash, depth)], l, depth + 1,
			       epoch, ops);
		if (rc) {
			if (&c->h != n)
				pmap_put(&c->h, ops);
			return rc;
		}
		if (&c->h != n) {
			*slot = &c->h;
			pmap_put(n, ops);
		}
		return 0;
	}
	if (pm_hash_of(n) != l->hash)
		return pm_split(slot, n, l, depth, epoch);
	if (n->kind == PM_LEAF &&
	    pm_leaf_is((struct pm_leaf *)n, l->key, l->len)) {
		*slot = &l->h; /* the value replaced */
		pmap_put(n, ops);
		return 0;
	}
	/* the same 64 bits, another key: a collision node (a new one of
	 * two leaves, or the old one's plus this) */
	{
		struct pm_coll *x;

		if (n->kind == PM_COLL) {
			x = pm_coll_with((const struct pm_coll *)n, l->hash,
					 l->key, l->len, l, epoch);
		} else {
			x = pm_alloc(sizeof(*x) + 2 * sizeof(x->v[0]), PM_COLL,
				     epoch);
			if (x) {
				x->hash = l->hash;
				x->v[x->n++] = (struct pm_leaf *)pmap_ref(n);
				x->v[x->n++] = l;
			}
		}
		if (!x)
			return -ENOMEM;
		*slot = &x->h;
		pmap_put(n, ops);
		return 0;
	}
}

int pmap_set(struct pmap_node **root, const char *key, size_t len, void *val,
	     uint64_t epoch, const struct pmap_ops *ops)
{
	struct pm_leaf *l = pm_alloc(sizeof(*l) + len + 1, PM_LEAF, epoch);
	int rc;

	if (!l)
		return -ENOMEM;
	l->hash = pm_hash(key, len);
	l->val = val;
	l->len = len;
	memcpy(l->key, key, len);
	l->key[len] = '\0';
	rc = pm_set_at(root, l, 0, epoch, ops);
	if (rc)
		free(l); /* never linked: its value stays the caller's */
	return rc;
}

/* The only child of inner node n when it is a leaf or a collision node
 * and n has no other, else NULL: what n can be replaced by. */
static struct pmap_node *pm_lone(const struct pm_inner *n)
{
	struct pmap_node *one = NULL;
	unsigned i;

	for (i = 0; i < PM_FAN; i++) {
		if (!n->kid[i])
			continue;
		if (one || n->kid[i]->kind == PM_INNER)
			return NULL;
		one = n->kid[i];
	}
	return one;
}

static bool pm_empty(const struct pm_inner *n)
{
	unsigned i;

	for (i = 0; i < PM_FAN; i++)
		if (n->kid[i])
			return false;
	return true;
}

/* Delete key (present: pmap_del checked) under slot. */
static int pm_del_at(struct pmap_node **slot, uint64_t hash, const char *key,
		     size_t len, unsigned depth, uint64_t epoch,
		     const struct pmap_ops *ops)
{
	struct pmap_node *n = *slot, *lone;
	int rc;

	if (n->kind == PM_LEAF) {
		*slot = NULL;
		pmap_put(n, ops);
		return 0;
	}
	if (n->kind == PM_COLL) {
		const struct pm_coll *c = (const struct pm_coll *)n;
		struct pm_coll *x;

		if (c->n == 2) { /* the other leaf alone */
			*slot = pmap_ref(
			    &c->v[pm_leaf_is(c->v[0], key, len) ? 1 : 0]->h);
			pmap_put(n, ops);
			return 0;
		}
		x = pm_coll_with(c, hash, key, len, NULL, epoch);
		if (!x)
			return -ENOMEM;
		*slot = &x->h;
		pmap_put(n, ops);
		return 0;
	}
	{
		struct pm_inner *c = (struct pm_inner *)n;

		if (n->epoch != epoch && !(c = pm_copy(c, epoch)))
			return -ENOMEM;
		rc = pm_del_at(&c->kid[pm_idx(hash, depth)], hash, key, len,
			       depth + 1, epoch, ops);
		if (rc) {
			if (&c->h != n)
				pmap_put(&c->h, ops);
			return rc;
		}
		/* keep the trie as shallow as its keys need */
		lone = pm_lone(c);
		if (pm_empty(c) || lone) {
			*slot = pmap_ref(lone);
			pmap_put(&c->h, ops);
			if (&c->h != n)
				pmap_put(n, ops);
			return 0;
		}
		if (&c->h != n) {
			*slot = &c->h;
			pmap_put(n, ops);
		}
		return 0;
	}
}

int pmap_del(struct pmap_node **root, const char *key, size_t len,
	     uint64_t epoch, const struct pmap_ops *ops)
{
	if (!pmap_get(*root, key, len))
		return 0;
	return pm_del_at(root, pm_hash(key, len), key, len, 0, epoch, ops);
}

int pmap_foreach(const struct pmap_node *n,
		 int (*fn)(void *arg, const char *key, size_t len, void *val),
		 void *arg)
{
	unsigned i;
	int rc;

	if (!n)
		return 0;
	switch (n->kind) {
	case PM_INNER:
		for (i = 0; i < PM_FAN; i++) {
			rc = pmap_foreach(((const struct pm_inner *)n)->kid[i],
					  fn, arg);
			if (rc)
				return rc;
		}
		return 0;
	case PM_LEAF: {
		const struct pm_leaf *l = (const void *)n;

		return fn(arg, l->key, l->len, l->val);
	}
	default: {
		const struct pm_coll *c = (const void *)n;

		for (i = 0; i < c->n; i++) {
			rc = fn(arg, c->v[i]->key, c->v[i]->len, c->v[i]->val);
			if (rc)
				return rc;
		}
		return 0;
	}
	}
}

static int pm_count_one(void *arg, const char *key, size_t len, void *val)
{
	(void)key;
	(void)len;
	(void)val;
	(*(size_t *)arg)++;
	return 0;
}

size_t pmap_count(const struct pmap_node *root)
{
	size_t n = 0;

	pmap_foreach(root, pm_count_one, &n);
	return n;
}
