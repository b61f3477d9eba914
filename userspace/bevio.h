/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bevio.h - write what a handler queued on a socket bufferevent at once.
 *
 * A socket bufferevent writes only from its write event: queuing output
 * adds the event (an epoll_ctl), the loop waits for writability, writes,
 * and deletes the event again (another epoll_ctl) - two system calls and
 * one loop turn for every response on a keep-alive connection. Between
 * bevio_cork() and bevio_uncork() output only accumulates; uncork writes it
 * to the socket directly and hands only what the socket did not take to
 * libevent. Corking happens only when nothing is queued and writing is
 * enabled, so the write event is not pending and no state is hidden from
 * libevent; whatever re-enables writing in between (a close flushing its
 * last bytes, say) takes precedence, and uncork then leaves it alone.
 *
 * Reading bufferevent.enabled needs bufferevent_struct.h: libevent 2.1
 * has no call that restores the flag without adding the event.
 */
#ifndef EDGE_BEVIO_H
#define EDGE_BEVIO_H

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_struct.h>
#include <stdbool.h>
#include <stddef.h>

/* Cork bev if nothing is queued on it and writing is enabled. Returns
 * whether it did (pass that to bevio_uncork). */
static inline bool bevio_cork(struct bufferevent *bev)
{
	if (!(bev->enabled & EV_WRITE) ||
	    evbuffer_get_length(bufferevent_get_output(bev)) > 0)
		return false;
	bufferevent_disable(bev, EV_WRITE); /* the event is not pending */
	return true;
}

/*
 * Undo bevio_cork (corked: its return value): write the queued output to
 * the socket now, give libevent what is left (it writes the rest and calls
 * the write callback as usual) or, when all was written, enable writing
 * again without adding the event. Returns true when the caller must run
 * the write callback itself: bytes were written and none are left, which
 * is when libevent would have run it. Does nothing (returns false) when
 * not corked or when writing was re-enabled in between.
 */
static inline bool bevio_uncork(struct bufferevent *bev, bool corked)
{
	struct evbuffer *out;
	size_t n;

	if (!corked || (bev->enabled & EV_WRITE))
		return false;
	out = bufferevent_get_output(bev);
	n = evbuffer_get_length(out);
	if (n > 0) {
		/* a socket bufferevent freezes its output's start but for the
		 * moment it writes (a connected one leaves it unfrozen): write
		 * as it does */
		evbuffer_unfreeze(out, 1);
		evbuffer_write(out, bufferevent_getfd(bev)); /* errors: below */
		evbuffer_freeze(out, 1);
	}
	if (evbuffer_get_length(out) > 0) {
		/* a short write or an error: libevent retries and reports */
		bufferevent_enable(bev, EV_WRITE);
		return false;
	}
	bev->enabled |= EV_WRITE; /* as libevent leaves it once drained */
	return n > 0;
}

#endif /* EDGE_BEVIO_H */
