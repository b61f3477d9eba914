// SPDX-License-Identifier: BSD-2-Clause
/*
 * tunnel.c - the tunnel of tunnel.h and its copy mover: each side's sockio
 * input moved to the other side's output on the worker's loop, with
 * backpressure, half-close forwarded, an idle timer over both.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdlib.h>

#include "clk.h"
#include "sockio.h"
#include "tunnel.h"
#include "worker.h"

struct tunnel_half {
	struct sockio *io;
	bool eof;  /* read EOF: nothing more comes from this side */
	bool shut; /* asked to shut down for writing (the direction into it
		      is ending) */
	bool down; /* its write side is down: that direction has ended */
};

struct tunnel {
	struct tunnel_half s[2]; /* indexed by enum tunnel_side */
	struct event *idle;
	uint64_t idle_ns;
	uint64_t last_ns; /* monotonic ns of the last byte moved */
	struct tunnel_stats st;
	enum tunnel_mover mover;
	tunnel_done_fn done;
	void *arg;
	bool ended;
};

const char *tunnel_mover_name(enum tunnel_mover m)
{
	switch (m) {
	case TUNNEL_MOVER_COPY:
		return "copy";
	}
	return "unknown";
}

static void idle_arm(struct tunnel *t, uint64_t ns)
{
	uint64_t ms = (ns + 999999) / 1000000;
	struct timeval tv = {(time_t)(ms / 1000),
			     (suseconds_t)((ms % 1000) * 1000)};

	evtimer_add(t->idle, &tv);
}

/* The tunnel is over: stop both sides and tell the owner (once). */
static void tunnel_end(struct tunnel *t, enum tunnel_end how)
{
	int i;

	if (t->ended)
		return;
	t->ended = true;
	t->st.end = how;
	for (i = 0; i < 2; i++)
		sockio_disable(t->s[i].io, EV_READ | EV_WRITE);
	evtimer_del(t->idle);
	t->done(t, &t->st, t->arg); /* may free t */
}

/* Move what side i has read to the other side's output, as far as the
 * other side's queue allows, and decide whether i is read further. When i
 * has ended and everything from it was handed on, the other side's write
 * side goes down once its output is out. */
static void tunnel_pump(struct tunnel *t, int i)
{
	struct tunnel_half *h = &t->s[i], *o = &t->s[1 - i];
	struct evbuffer *in = sockio_input(h->io);
	struct evbuffer *out = sockio_output(o->io);
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
		t->last_ns = clk_now_ns();
	}
	if (h->eof) {
		if (evbuffer_get_length(in) > 0)
			return; /* the rest waits for o's write callback */
		o->shut = true;
		sockio_shutdown(o->io); /* reported as WRITING|SHUT */
		return;
	}
	if (evbuffer_get_length(out) >= TUNNEL_HIGH_WATER)
		sockio_disable(h->io, EV_READ);
	else
		sockio_enable(h->io, EV_READ);
}

static int side_of(const struct tunnel *t, const struct sockio *io)
{
	return io == t->s[TUNNEL_CLIENT].io ? TUNNEL_CLIENT : TUNNEL_UPSTREAM;
}

static void tunnel_read_cb(struct sockio *io, void *arg)
{
	struct tunnel *t = arg;

	tunnel_pump(t, side_of(t, io));
}

/* Side j's output drained to the low-water mark: resume the side that
 * feeds it. */
static void tunnel_write_cb(struct sockio *io, void *arg)
{
	struct tunnel *t = arg;

	t->last_ns = clk_now_ns();
	tunnel_pump(t, 1 - side_of(t, io));
}

static void tunnel_event_cb(struct sockio *io, short what, void *arg)
{
	struct tunnel *t = arg;
	int i = side_of(t, io);

	if ((what & SOCKIO_EOF) && (what & SOCKIO_READING)) {
		t->s[i].eof = true;
		tunnel_pump(t, i);
		return;
	}
	if (what & SOCKIO_SHUT) {
		/* the direction into side i has ended */
		t->s[i].down = true;
		t->last_ns = clk_now_ns();
		if (t->s[1 - i].down)
			tunnel_end(t, TUNNEL_END_CLOSED);
		return;
	}
	tunnel_end(t, TUNNEL_END_ERROR);
}

static void tunnel_idle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tunnel *t = arg;
	uint64_t quiet = clk_now_ns() - t->last_ns;

	(void)fd;
	(void)what;
	if (quiet >= t->idle_ns) {
		tunnel_end(t, TUNNEL_END_IDLE);
		return;
	}
	idle_arm(t, t->idle_ns - quiet);
}

int tunnel_start(struct worker *w, struct sockio *client, struct sockio *up,
		 enum tunnel_mover mover, uint64_t idle_ms, tunnel_done_fn done,
		 void *arg, struct tunnel **out)
{
	struct sockio *ios[2] = {client, up};
	struct tunnel *t;
	int i;

	if (mover != TUNNEL_MOVER_COPY) {
		sockio_free(client);
		sockio_free(up);
		return -EINVAL;
	}
	t = calloc(1, sizeof(*t));
	if (t)
		t->idle = evtimer_new(w->base, tunnel_idle_cb, t);
	if (!t || !t->idle) {
		if (t)
			free(t);
		sockio_free(client);
		sockio_free(up);
		return -ENOMEM;
	}
	t->mover = mover;
	t->done = done;
	t->arg = arg;
	t->idle_ns = idle_ms * 1000000ull;
	t->last_ns = clk_now_ns();
	for (i = 0; i < 2; i++) {
		t->s[i].io = ios[i];
		sockio_setcb(ios[i], tunnel_read_cb, tunnel_write_cb,
			     tunnel_event_cb, t);
		sockio_set_read_timeout(ios[i], 0);
		sockio_set_watermarks(ios[i], TUNNEL_HIGH_WATER,
				      TUNNEL_LOW_WATER);
	}
	/* bytes read past the heads go first, uncounted: the request has
	 * counted them */
	evbuffer_add_buffer(sockio_output(up), sockio_input(client));
	evbuffer_add_buffer(sockio_output(client), sockio_input(up));
	for (i = 0; i < 2; i++)
		sockio_enable(ios[i], EV_READ | EV_WRITE);
	if (idle_ms)
		idle_arm(t, t->idle_ns);
	*out = t;
	/* a side whose EOF was read before the tunnel (a client that sent
	 * its last bytes and shut down its side before the 101 came) has
	 * ended its direction already, and no event will say so again:
	 * forward it now (sockio_shutdown waits for the output) */
	for (i = 0; i < 2; i++) {
		t->s[i].eof = sockio_eof(ios[i]);
		if (t->s[i].eof)
			tunnel_pump(t, i);
	}
	return 0;
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
		sockio_free(t->s[i].io);
	if (t->idle)
		event_free(t->idle);
	free(t);
}
