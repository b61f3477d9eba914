/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mailbox.h - work for a worker from other threads: a bounded
 * multi-producer, single-consumer queue of fixed-size messages, owned by
 * one worker's event loop.
 *
 * Any thread posts (mailbox_post: never blocks, never allocates); the
 * owner's loop is woken through an eventfd and calls the owner's handler
 * once per message, in the order the messages were posted (messages from
 * one thread in that thread's order; from several, in the order they took
 * the queue's lock). A full queue refuses with -EAGAIN: its bound is the
 * backpressure, and the poster decides (retry later, answer 503, drop).
 *
 * A message names its target by id, not by pointer (usually a request id,
 * reqid.h), because the target may end before the message arrives: the
 * handler looks the id up and returns false when it is gone; the mailbox
 * then calls the drop function, which releases whatever the message
 * carries (a slot it holds, memory behind ptr). Messages still queued
 * when the mailbox is closed or freed are dropped the same way, so every
 * posted message is handled or dropped exactly once.
 *
 * One loop turn handles at most MAILBOX_BATCH messages and then lets the
 * loop's other events run before the rest, so a flood of messages (or a
 * handler that posts to its own mailbox) cannot starve the sockets.
 *
 * The consumer side (the handler, mailbox_close, mailbox_free) runs on
 * the owner's loop thread only, or after that loop has stopped.
 */
#ifndef EDGE_MAILBOX_H
#define EDGE_MAILBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct mailbox;

/* One message, copied into the queue. The meaning of every field but
 * target is the owner's, per type. */
struct mailbox_msg {
	uint32_t type;	 /* what to do */
	uint32_t flags;	 /* how */
	uint64_t target; /* whom: a reqid.h id, or 0 */
	uint64_t arg;	 /* a value */
	void *ptr;	 /* what it carries: the drop function releases it */
};

_Static_assert(sizeof(struct mailbox_msg) <= 32, "mailbox_msg grew");

/* Handle m on the owner's loop. Returns true when handled (the handler
 * took what m carries), false to have m dropped (its target is gone). It
 * may post (to this mailbox too) and close the mailbox, not free it. */
typedef bool (*mailbox_handle_fn)(void *arg, const struct mailbox_msg *m);

/* Release what m carries: it will never be handled. Runs on the owner's
 * thread (or the one that frees the mailbox); must not post to this
 * mailbox (that is refused anyway). */
typedef void (*mailbox_drop_fn)(void *arg, const struct mailbox_msg *m);

/* The largest queue, in messages. */
#define MAILBOX_CAPACITY_MAX (1u << 20)
/* Messages handled per loop turn, at most. */
#define MAILBOX_BATCH 64

/* Counts since mailbox_new, read under the queue's lock. */
struct mailbox_stats {
	uint64_t posted;  /* accepted by mailbox_post */
	uint64_t handled; /* the handler returned true */
	uint64_t dropped; /* given to the drop function */
	uint64_t full;	  /* refused with -EAGAIN */
	size_t queued;	  /* waiting now */
};

/*
 * Make a mailbox of capacity messages (1 .. MAILBOX_CAPACITY_MAX) on base,
 * which must be the owner's loop (its read event is added there now).
 * handle is required; drop may be NULL (messages carry nothing to
 * release); arg is passed to both. Returns 0 with *out, -EINVAL or
 * -ENOMEM, or -errno from eventfd(2) (-EMFILE, say).
 */
int mailbox_new(struct event_base *base, size_t capacity,
		mailbox_handle_fn handle, mailbox_drop_fn drop, void *arg,
		struct mailbox **out);

/*
 * Queue a copy of m and wake the owner's loop. Any thread, never blocks
 * (a short mutex, an eventfd write when the queue was idle). Returns 0
 * (m will be handled or dropped, exactly once), -EAGAIN when the queue is
 * full or -ESHUTDOWN once the mailbox is closed: then m was not queued
 * and what it carries is still the caller's.
 */
int mailbox_post(struct mailbox *mb, const struct mailbox_msg *m);

/* Refuse every later post (-ESHUTDOWN) and drop what is queued. Owner's
 * thread, or once its loop has stopped; idempotent. */
void mailbox_close(struct mailbox *mb);

/* mailbox_close, then free mb and its event and eventfd. No other thread
 * may still use mb when this returns (stop the posters first: a post
 * racing the close is refused, one after the free is a use after free).
 * NULL is fine. */
void mailbox_free(struct mailbox *mb);

/* mb's counts. Any thread. */
void mailbox_stats(struct mailbox *mb, struct mailbox_stats *st);

#endif /* EDGE_MAILBOX_H */
