// SPDX-License-Identifier: BSD-2-Clause
/*
 * mailbox.c - a worker's bounded multi-producer, single-consumer message
 * queue (mailbox.h): a ring under a mutex and an eventfd.
 *
 * Wake-ups: a poster writes the eventfd only when it finds the mailbox
 * idle (pending false) and makes it pending; the consumer clears pending
 * only when it finds the ring empty, under the same lock. So a message is
 * never queued without a wake-up to come, and a burst costs one write.
 */
#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"
#include "mailbox.h"

struct mailbox {
	pthread_mutex_t lock;
	struct mailbox_msg *ring;
	size_t cap, head, count; /* under lock */
	bool pending;		 /* under lock: a wake-up is on its way */
	bool closed;		 /* under lock */
	struct mailbox_stats st; /* under lock (st.queued unused) */
	int fd;			 /* the eventfd */
	struct event *ev;	 /* its read event on the owner's loop */
	mailbox_handle_fn handle;
	mailbox_drop_fn drop;
	void *arg;
};

/* Take the oldest message into *m; false when empty. With drop, counted
 * as dropped (else the caller counts). When empty and not closing, the
 * mailbox goes idle (the next post wakes it). */
static bool mailbox_pop(struct mailbox *mb, struct mailbox_msg *m, bool drop)
{
	bool got = false;

	pthread_mutex_lock(&mb->lock);
	if (mb->count) {
		*m = mb->ring[mb->head];
		mb->head = (mb->head + 1) % mb->cap;
		mb->count--;
		if (drop)
			mb->st.dropped++;
		got = true;
	} else {
		mb->pending = false;
	}
	pthread_mutex_unlock(&mb->lock);
	return got;
}

static void mailbox_count(struct mailbox *mb, bool handled)
{
	pthread_mutex_lock(&mb->lock);
	if (handled)
		mb->st.handled++;
	else
		mb->st.dropped++;
	pthread_mutex_unlock(&mb->lock);
}

/* Make the owner's loop see the eventfd readable. The counter cannot
 * overflow (one write per wake-up), so this fails only on a bug; then the
 * mailbox goes idle so that the next post tries again. */
static void mailbox_wake(struct mailbox *mb)
{
	uint64_t one = 1;

	if (write(mb->fd, &one, sizeof(one)) >= 0)
		return;
	log_warn_rl("mailbox: eventfd write");
	pthread_mutex_lock(&mb->lock);
	mb->pending = false;
	pthread_mutex_unlock(&mb->lock);
}

static void mailbox_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mailbox *mb = arg;
	struct mailbox_msg m;
	uint64_t n;
	bool ok;
	int i;

	(void)what;
	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_warn_rl("mailbox: eventfd read");
	for (i = 0; i < MAILBOX_BATCH; i++) {
		if (!mailbox_pop(mb, &m, false))
			return;
		ok = mb->handle(mb->arg, &m);
		if (!ok && mb->drop)
			mb->drop(mb->arg, &m);
		mailbox_count(mb, ok);
	}
	/* more may wait: come back after the loop has polled its sockets
	 * again (event_active would run us again in the same pass). Still
	 * pending, so posters do not write meanwhile. */
	mailbox_wake(mb);
}

int mailbox_new(struct event_base *base, size_t capacity,
		mailbox_handle_fn handle, mailbox_drop_fn drop, void *arg,
		struct mailbox **out)
{
	struct mailbox *mb;
	int rc = -ENOMEM;

	*out = NULL;
	if (!base || !handle || !capacity || capacity > MAILBOX_CAPACITY_MAX)
		return -EINVAL;
	mb = calloc(1, sizeof(*mb));
	if (!mb)
		return -ENOMEM;
	mb->fd = -1;
	mb->cap = capacity;
	mb->handle = handle;
	mb->drop = drop;
	mb->arg = arg;
	rc = -pthread_mutex_init(&mb->lock, NULL);
	if (rc) {
		free(mb);
		return rc;
	}
	rc = -ENOMEM;
	mb->ring = calloc(capacity, sizeof(*mb->ring));
	if (!mb->ring)
		goto fail;
	mb->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (mb->fd < 0) {
		rc = -errno;
		goto fail;
	}
	mb->ev =
	    event_new(base, mb->fd, EV_READ | EV_PERSIST, mailbox_read_cb, mb);
	if (!mb->ev || event_add(mb->ev, NULL))
		goto fail;
	*out = mb;
	return 0;
fail:
	mailbox_free(mb);
	return rc;
}

int mailbox_post(struct mailbox *mb, const struct mailbox_msg *m)
{
	bool wake = false;

	pthread_mutex_lock(&mb->lock);
	if (mb->closed) {
		pthread_mutex_unlock(&mb->lock);
		return -ESHUTDOWN;
	}
	if (mb->count == mb->cap) {
		mb->st.full++;
		pthread_mutex_unlock(&mb->lock);
		return -EAGAIN;
	}
	mb->ring[(mb->head + mb->count) % mb->cap] = *m;
	mb->count++;
	mb->st.posted++;
	if (!mb->pending) {
		mb->pending = true;
		wake = true;
	}
	pthread_mutex_unlock(&mb->lock);
	/* queued: m is no longer the caller's, even if the wake fails */
	if (wake)
		mailbox_wake(mb);
	return 0;
}

void mailbox_close(struct mailbox *mb)
{
	struct mailbox_msg m;

	pthread_mutex_lock(&mb->lock);
	mb->closed = true;
	pthread_mutex_unlock(&mb->lock);
	/* one at a time, outside the lock: drop may do anything but post
	 * here (refused) */
	while (mailbox_pop(mb, &m, true))
		if (mb->drop)
			mb->drop(mb->arg, &m);
}

void mailbox_free(struct mailbox *mb)
{
	if (!mb)
		return;
	if (mb->ring)
		mailbox_close(mb);
	if (mb->ev)
		event_free(mb->ev);
	if (mb->fd >= 0)
		close(mb->fd);
	free(mb->ring);
	pthread_mutex_destroy(&mb->lock);
	free(mb);
}

void mailbox_stats(struct mailbox *mb, struct mailbox_stats *st)
{
	pthread_mutex_lock(&mb->lock);
	*st = mb->st;
	st->queued = mb->count;
	pthread_mutex_unlock(&mb->lock);
}
