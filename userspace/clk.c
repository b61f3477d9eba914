// SPDX-License-Identifier: BSD-2-Clause
/*
 * clk.c - the batched clock of clk.h: a per-thread cache of each clock's
 * last reading and a per-thread event that clears it.
 */
#include <errno.h>
#include <event2/event.h>
#include <time.h>

#include "clk.h"

static _Thread_local struct event *clk_ev;	  /* clears the cache */
static _Thread_local uint64_t clk_mono, clk_real; /* 0: not read */

static void clk_forget_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	clk_mono = 0;
	clk_real = 0;
}

static uint64_t clk_read(clockid_t id, uint64_t *cache)
{
	struct timespec ts;
	uint64_t now;

	clock_gettime(id, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (clk_ev) {
		*cache = now;
		event_active(clk_ev, EV_TIMEOUT, 0); /* once queued */
	}
	return now;
}

uint64_t clk_now_ns(void)
{
	return clk_mono ? clk_mono : clk_read(CLOCK_MONOTONIC, &clk_mono);
}

uint64_t clk_fresh_ns(void)
{
	return clk_read(CLOCK_MONOTONIC, &clk_mono);
}

uint64_t clk_real_ns(void)
{
	return clk_real ? clk_real : clk_read(CLOCK_REALTIME, &clk_real);
}

int clk_attach(struct event_base *base)
{
	clk_detach();
	clk_ev = event_new(base, -1, 0, clk_forget_cb, NULL);
	return clk_ev ? 0 : -ENOMEM;
}

void clk_detach(void)
{
	if (clk_ev)
		event_free(clk_ev);
	clk_ev = NULL;
	clk_mono = 0;
	clk_real = 0;
}
