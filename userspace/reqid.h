/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * reqid.h - ids for a worker's objects (requests, say) that other threads
 * can carry in messages (mailbox.h) without holding a pointer: a 64-bit id
 * whose low 32 bits are a slot of the worker's table and whose high 32
 * bits are that slot's generation. Freeing an id bumps its slot's
 * generation, so an id that outlived its object never finds the object
 * that reused the slot: the lookup returns NULL and the message is
 * dropped.
 *
 * Not the X-Request-ID a request carries in its headers and log lines
 * (struct log_ctx): that one is text for people; this one is a handle
 * for threads.
 *
 * An id is never 0 (generations start at 1), so 0 can mean "none". Slots
 * are reused from a free list (the most recently freed first); the
 * table grows by doubling up to its maximum (REQID_SLOTS_MAX at most). A
 * slot whose generation would wrap is retired, never reused, so a stale
 * id can never match again.
 *
 * Not thread-safe: the table belongs to its worker's loop. Other threads
 * only copy ids.
 */
#ifndef EDGE_REQID_H
#define EDGE_REQID_H

#include <stddef.h>
#include <stdint.h>

struct reqid_table;

/* The most slots a table may have (16M). */
#define REQID_SLOTS_MAX (1u << 24)
/* Slots a table starts with when asked for 0. */
#define REQID_SLOTS_INITIAL 1024

/* The slot and generation of id. */
#define REQID_SLOT(id) ((uint32_t)((id)&0xffffffffu))
#define REQID_GEN(id) ((uint32_t)((id) >> 32))

/* Make a table of initial slots (0: REQID_SLOTS_INITIAL) that may grow to
 * max (0 or more than REQID_SLOTS_MAX: REQID_SLOTS_MAX; raised to initial
 * when below). Returns 0 with *out, or -ENOMEM. */
int reqid_table_new(uint32_t initial, uint32_t max, struct reqid_table **out);

/* Free t. The objects it points at are the caller's. NULL is fine. */
void reqid_table_free(struct reqid_table *t);

/* Give obj (not NULL) an id in *id. Returns 0, -EINVAL (obj NULL),
 * -ENOSPC (max slots in use) or -ENOMEM (growing failed); t is unchanged
 * on failure. */
int reqid_alloc(struct reqid_table *t, void *obj, uint64_t *id);

/* The object of id, or NULL when id was freed (its slot may since hold
 * another object, with another generation) or never handed out. */
void *reqid_lookup(const struct reqid_table *t, uint64_t id);

/* Free id: later lookups of it return NULL. Returns 0, or -ENOENT when id
 * is not live (already freed, stale or never handed out). */
int reqid_release(struct reqid_table *t, uint64_t id);

/* Ids live in t. */
size_t reqid_count(const struct reqid_table *t);

#endif /* EDGE_REQID_H */
