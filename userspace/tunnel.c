// SPDX-License-Identifier: BSD-2-Clause
/*
 * tunnel.c - the userspace copier behind tunnel.h: two bufferevents on the
 * worker's loop, each side's input moved to the other side's output with
 * backpressure, half-close forwarded, an idle timer over both.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tunnel.h"

struct tunnel_half {
	struct bufferevent *bev;
	bool eof;  /* read EOF: nothing more comes from this side */
	bool shut; /* shutdown(SHUT_WR) done: the direction into it ended */
};

struct tunnel {
	struct tunnel_half s[2]; /* indexed by enum tunnel_side */
	struct event *idle;
	uint64_t idle_ms;
	uint64_t last_ms; /* monotonic ms of the last byte moved */
	struct tunnel_stats st;
	tunnel_done_fn done;
	void *arg;
	bool ended;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void idle_arm(struct tunnel *t, uint64_t ms)
{
	struct timeval tv = {(time_t)(ms / 1000),
			     (suseconds_t)((ms % 1000) * 1000)};

	evtimer_add(t->idle, &tv);
}

/* The tunnel is over: stop both sides and tell the owner (once). */
static void tunnel_end(struct tunnel *t, enum tunnel_end how)
{
	if (t->ended)
		return;
	t->ended = true;
	t->st.end = how;
	bufferevent_disable(t->s[TUNNEL_CLIENT].bev, EV_READ | EV_WRITE);
	bufferevent_disable(t->s[TUNNEL_UPSTREAM].bev, EV_READ | EV_WRITE);
	evtimer_del(t->idle);
	t->done(t, &t->st, t->arg); /* may free t */
}

/* Shut down side j for writing: the direction into it has ended. Ends the
 * tunnel when the other direction has ended too. Returns true when the
 * tunnel ended (t may be gone). */
static bool tunnel_shut(struct tunnel *t, int j)
{
	struct tunnel_half *h = &t->s[j];

	if (h->shut)
		return false;
	h->shut = true;
	if (shutdown(bufferevent_getfd(h->bev), SHUT_WR) < 0 &&
	    errno != ENOTCONN) {
		tunnel_end(t, TUNNEL_END_ERROR);
		return true;
	}
	if (t->s[1 - j].shut) {
		tunnel_end(t, TUNNEL_END_CLOSED);
		return true;
	}
	return false;
}

/* Move what side i has read to the other side's output, as far as the
 * other side's queue allows, and decide whether i is read further. When i
 * has ended and everything from it was written, shut the other side. */
static void tunnel_pump(struct tunnel *t, int i)
{
	struct tunnel_half *h = &t->s[i], *o = &t->s[1 - i];
	struct evbuffer *in = bufferevent_get_input(h->bev);
	struct evbuffer *out = bufferevent_get_output(o->bev);
	size_t n = evbuffer_get_length(in), q = evbuffer_get_length(out);

	if (t->ended || o->shut)
		return;
	if (q < TUNNEL_HIGH_WATER && n > 0) {
		if (n > TUNNEL_HIGH_WATER - q)
			n = TUNNEL_HIGH_WATER - q;
		evbuffer_remove_buffer(in, out, n);
		if (i == TUNNEL_CLIENT)
			t->st.bytes_up += n;
		else
			t->st.bytes_down += n;
		t->last_ms = now_ms();
	}
	if (h->eof) {
		if (evbuffer_get_length(in) > 0)
			return; /* the rest waits for o's write callback */
		/* from now on o's write callback fires when its output is
		 * empty, which is when o can be shut down */
		bufferevent_setwatermark(o->bev, EV_WRITE, 0, 0);
		if (evbuffer_get_length(out) == 0)
			tunnel_shut(t, 1 - i);
		return;
	}
	if (evbuffer_get_length(out) >= TUNNEL_HIGH_WATER)
		bufferevent_disable(h->bev, EV_READ);
	else
		bufferevent_enable(h->bev, EV_READ);
}

static int side_of(const struct tunnel *t, const struct bufferevent *bev)
{
	return bev == t->s[TUNNEL_CLIENT].bev ? TUNNEL_CLIENT : TUNNEL_UPSTREAM;
}

static void tunnel_read_cb(struct bufferevent *bev, void *arg)
{
	struct tunnel *t = arg;

	tunnel_pump(t, side_of(t, bev));
}

/* Side j's output drained (below the low-water mark, or empty once the
 * direction into it is ending): resume the side that feeds it. */
static void tunnel_write_cb(struct bufferevent *bev, void *arg)
{
	struct tunnel *t = arg;

	t->last_ms = now_ms();
	tunnel_pump(t, 1 - side_of(t, bev));
}

static void tunnel_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct tunnel *t = arg;
	int i = side_of(t, bev);

	if ((what & BEV_EVENT_EOF) && (what & BEV_EVENT_READING)) {
		t->s[i].eof = true;
		tunnel_pump(t, i);
		return;
	}
	tunnel_end(t, TUNNEL_END_ERROR);
}

static void tunnel_idle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tunnel *t = arg;
	uint64_t quiet = now_ms() - t->last_ms;

	(void)fd;
	(void)what;
	if (quiet >= t->idle_ms) {
		tunnel_end(t, TUNNEL_END_IDLE);
		return;
	}
	idle_arm(t, t->idle_ms - quiet);
}

int tunnel_start(struct event_base *base, int cfd, int ufd,
		 struct evbuffer *to_up, struct evbuffer *to_client,
		 uint64_t idle_ms, tunnel_done_fn done, void *arg,
		 struct tunnel **out)
{
	struct tunnel *t;
	int fds[2] = {cfd, ufd}, i;

	t = calloc(1, sizeof(*t));
	if (!t)
		goto fail;
	t->done = done;
	t->arg = arg;
	t->idle_ms = idle_ms;
	t->last_ms = now_ms();
	t->idle = evtimer_new(base, tunnel_idle_cb, t);
	if (!t->idle)
		goto fail;
	for (i = 0; i < 2; i++) {
		t->s[i].bev =
		    bufferevent_socket_new(base, fds[i], BEV_OPT_CLOSE_ON_FREE);
		if (!t->s[i].bev)
			goto fail;
		fds[i] = -1; /* the bufferevent owns it */
		bufferevent_setcb(t->s[i].bev, tunnel_read_cb, tunnel_write_cb,
				  tunnel_event_cb, t);
		bufferevent_setwatermark(t->s[i].bev, EV_READ, 0,
					 TUNNEL_HIGH_WATER);
		bufferevent_setwatermark(t->s[i].bev, EV_WRITE,
					 TUNNEL_LOW_WATER, 0);
	}
	if (to_up)
		evbuffer_add_buffer(
		    bufferevent_get_output(t->s[TUNNEL_UPSTREAM].bev), to_up);
	if (to_client)
		evbuffer_add_buffer(
		    bufferevent_get_output(t->s[TUNNEL_CLIENT].bev), to_client);
	bufferevent_enable(t->s[TUNNEL_CLIENT].bev, EV_WRITE);
	bufferevent_enable(t->s[TUNNEL_UPSTREAM].bev, EV_WRITE);
	tunnel_pump(t, TUNNEL_CLIENT);
	tunnel_pump(t, TUNNEL_UPSTREAM);
	if (idle_ms)
		idle_arm(t, idle_ms);
	*out = t;
	return 0;
fail:
	for (i = 0; i < 2; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	tunnel_free(t);
	return -ENOMEM;
}

void tunnel_stats(const struct tunnel *t, struct tunnel_stats *st)
{
	*st = t->st;
}

void tunnel_free(struct tunnel *t)
{
	int i;

	if (!t)
		return;
	for (i = 0; i < 2; i++)
		if (t->s[i].bev)
			bufferevent_free(t->s[i].bev);
	if (t->idle)
		event_free(t->idle);
	free(t);
}
