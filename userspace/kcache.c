/* SPDX-License-Identifier: BSD-2-Clause */
/* kcache.c - the per-thread decision cache (kcache.h). */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kcache.h"
#include "siphash.h"

struct kcached {
	uint64_t owner; /* 0: empty */
	uint64_t hash;
	enum kcache_kind kind;
	char *key;
	size_t len;
	double until; /* < 0: none */
	char *val;
	size_t vlen;
};

struct kcache {
	struct kcached e[KCACHE_SETS][KCACHE_WAYS];
	unsigned next[KCACHE_SETS];
};

static pthread_key_t kcache_key;
static pthread_once_t kcache_once = PTHREAD_ONCE_INIT;
static bool kcache_ok;

static void kcached_clear(struct kcached *c)
{
	free(c->key);
	free(c->val);
	memset(c, 0, sizeof(*c));
}

static void kcache_free(void *p)
{
	struct kcache *c = p;
	size_t s, w;

	for (s = 0; c && s < KCACHE_SETS; s++)
		for (w = 0; w < KCACHE_WAYS; w++)
			kcached_clear(&c->e[s][w]);
	free(c);
}

static void kcache_init(void)
{
	kcache_ok = pthread_key_create(&kcache_key, kcache_free) == 0;
}

/* This thread's cache, made at its first use; NULL: none (no memory). */
static struct kcache *kcache(void)
{
	struct kcache *c;

	pthread_once(&kcache_once, kcache_init);
	if (!kcache_ok)
		return NULL;
	c = pthread_getspecific(kcache_key);
	if (!c && (c = calloc(1, sizeof(*c))) &&
	    pthread_setspecific(kcache_key, c)) {
		free(c);
		c = NULL;
	}
	return c;
}

static uint64_t kcache_hash(enum kcache_kind kind, const void *key, size_t n)
{
	return siphash_key(key, n) ^ (uint64_t)kind;
}

enum kcache_found kcache_find(enum kcache_kind kind, uint64_t owner,
			      const void *key, size_t n, double now, char **val,
			      size_t *vlen)
{
	struct kcache *c = n <= KCACHE_KEY_MAX ? kcache() : NULL;
	uint64_t h;
	struct kcached *e;
	size_t w;

	*val = NULL;
	*vlen = 0;
	if (!c)
		return KCACHE_MISS;
	h = kcache_hash(kind, key, n);
	for (w = 0; w < KCACHE_WAYS; w++) {
		e = &c->e[h % KCACHE_SETS][w];
		if (e->owner != owner || e->kind != kind || e->hash != h ||
		    e->len != n || memcmp(e->key, key, n) != 0)
			continue;
		if (e->until >= 0 && now >= e->until) {
			kcached_clear(e);
			return KCACHE_EXPIRED;
		}
		if (e->vlen) {
			*val = malloc(e->vlen + 1);
			if (!*val)
				return KCACHE_MISS; /* decided again */
			memcpy(*val, e->val, e->vlen + 1);
			*vlen = e->vlen;
		}
		return KCACHE_HIT;
	}
	return KCACHE_MISS;
}

void kcache_add(enum kcache_kind kind, uint64_t owner, const void *key,
		size_t n, double until, const char *val, size_t vlen)
{
	struct kcache *c = n <= KCACHE_KEY_MAX ? kcache() : NULL;
	uint64_t h;
	struct kcached *e;
	unsigned s;

	if (!c || !owner)
		return;
	h = kcache_hash(kind, key, n);
	s = (unsigned)(h % KCACHE_SETS);
	e = &c->e[s][c->next[s]++ % KCACHE_WAYS];
	kcached_clear(e);
	e->key = malloc(n ? n : 1);
	e->val = vlen ? malloc(vlen + 1) : NULL;
	if (!e->key || (vlen && !e->val)) {
		kcached_clear(e);
		return;
	}
	memcpy(e->key, key, n);
	if (vlen) {
		memcpy(e->val, val, vlen);
		e->val[vlen] = '\0';
	}
	e->len = n;
	e->vlen = vlen;
	e->until = until;
	e->hash = h;
	e->kind = kind;
	e->owner = owner;
}
