// SPDX-License-Identifier: BSD-2-Clause
/*
 * reqid.c - generation-checked ids for a worker's objects (reqid.h): an
 * array of slots, each an object pointer and a generation, and a free
 * list threaded through the free slots.
 */
#include <errno.h>
#include <stdlib.h>

#include "reqid.h"

/* The end of the free list. */
#define REQID_NONE UINT32_MAX

struct reqid_slot {
	void *obj;     /* NULL: free (or retired) */
	uint32_t gen;  /* of the id handed out last or next; 0: retired */
	uint32_t next; /* free list, while free */
};

struct reqid_table {
	struct reqid_slot *slots;
	uint32_t nslots; /* allocated */
	uint32_t used;	 /* slots[0..used) have been handed out at least once */
	uint32_t max;
	uint32_t free_head;
	size_t count;
};

int reqid_table_new(uint32_t initial, uint32_t max, struct reqid_table **out)
{
	struct reqid_table *t;

	*out = NULL;
	if (!max || max > REQID_SLOTS_MAX)
		max = REQID_SLOTS_MAX;
	if (!initial)
		initial = REQID_SLOTS_INITIAL;
	if (initial > max)
		initial = max;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->slots = calloc(initial, sizeof(*t->slots));
	if (!t->slots) {
		free(t);
		return -ENOMEM;
	}
	t->nslots = initial;
	t->max = max;
	t->free_head = REQID_NONE;
	*out = t;
	return 0;
}

void reqid_table_free(struct reqid_table *t)
{
	if (!t)
		return;
	free(t->slots);
	free(t);
}

/* Double t's slots (up to t->max). Returns 0, -ENOSPC or -ENOMEM. */
static int reqid_grow(struct reqid_table *t)
{
	struct reqid_slot *s;
	uint32_t n;

	if (t->nslots >= t->max)
		return -ENOSPC;
	n = t->nslots > t->max / 2 ? t->max : t->nslots * 2;
	s = realloc(t->slots, (size_t)n * sizeof(*s));
	if (!s)
		return -ENOMEM;
	t->slots = s;
	t->nslots = n;
	return 0;
}

int reqid_alloc(struct reqid_table *t, void *obj, uint64_t *id)
{
	struct reqid_slot *s;
	uint32_t i;
	int rc;

	if (!obj)
		return -EINVAL;
	if (t->free_head != REQID_NONE) {
		i = t->free_head;
		s = &t->slots[i];
		t->free_head = s->next;
	} else {
		if (t->used == t->nslots) {
			rc = reqid_grow(t);
			if (rc)
				return rc;
		}
		i = t->used++;
		s = &t->slots[i];
		s->gen = 1;
	}
	s->obj = obj;
	s->next = REQID_NONE;
	t->count++;
	*id = (uint64_t)s->gen << 32 | i;
	return 0;
}

/* The live slot of id, or NULL. */
static struct reqid_slot *reqid_slot(const struct reqid_table *t, uint64_t id)
{
	uint32_t i = REQID_SLOT(id);
	struct reqid_slot *s;

	if (i >= t->used)
		return NULL;
	s = &t->slots[i];
	if (!s->obj || s->gen != REQID_GEN(id))
		return NULL;
	return s;
}

void *reqid_lookup(const struct reqid_table *t, uint64_t id)
{
	struct reqid_slot *s = reqid_slot(t, id);

	return s ? s->obj : NULL;
}

int reqid_release(struct reqid_table *t, uint64_t id)
{
	struct reqid_slot *s = reqid_slot(t, id);

	if (!s)
		return -ENOENT;
	s->obj = NULL;
	t->count--;
	if (++s->gen == 0)
		return 0; /* retired: its every generation was used */
	s->next = t->free_head;
	t->free_head = REQID_SLOT(id);
	return 0;
}

size_t reqid_count(const struct reqid_table *t)
{
	return t->count;
}
