// SPDX-License-Identifier: BSD-2-Clause
/*
 * stream.c - the stages both modes of the stream core share (stream.h).
 */
#include <errno.h>

#include "admit.h"
#include "clk.h"
#include "edge_assert.h"
#include "route.h"
#include "stream.h"
#include "worker.h"

enum outcome stream_admit(struct worker *w, const struct route_match *m,
			  const struct cidr *peer, unsigned *retry_s)
{
	*retry_s = 0;
	if (!route_ip_allowed(m, peer))
		return OUTCOME_IP_DENIED;
	if (admit_take(w->sh->limiter, &w->bucket, peer, clk_now_ns(),
		       retry_s) == -EAGAIN)
		return OUTCOME_RATE_LIMITED;
	return OUTCOME_OK;
}

bool stream_shed(struct worker *w, const struct route_match *m)
{
	if (!m->shed || !worker_lagging(w))
		return false;
	atomic_fetch_add_explicit(&w->sh->shed, 1, memory_order_relaxed);
	return true;
}

enum wake_enter_rc stream_wake_enter(struct stream_wake *sw, struct worker *w,
				     const char *env_id, uint64_t handle,
				     uint32_t msg, bool bounded)
{
	sw->wait.owner = w;
	sw->wait.handle = handle;
	sw->wait.msg = msg;
	sw->wait.bounded = bounded;
	sw->wait.cls = sw->cls;
	sw->t_enter = clk_now_ns();
	return wake_enter(w->sh->wake, env_id, &sw->wait, &sw->env);
}

uint64_t stream_wake_wait_ms(const struct worker *w)
{
	return wake_timeout_ms(w->sh->wake) + WAKE_GRACE_MS;
}

uint64_t stream_wake_result(struct stream_wake *sw, uint64_t res)
{
	if (res == WAKE_R_READY) {
		sw->woken = true;
		sw->cold_ms = (clk_now_ns() - sw->t_enter) / 1000000ULL;
	}
	return res;
}

enum wake_refusal stream_wake_refused(struct stream_wake *sw, struct worker *w,
				      unsigned *retry_s)
{
	*retry_s = 0;
	if (!sw->env)
		return WAKE_DOWN;
	return wake_refused(w->sh->wake, sw->env, &sw->wait, sw->woken,
			    retry_s);
}

void stream_wake_tunnel(struct stream_wake *sw, struct worker *w)
{
	if (!sw->env || sw->tunnel)
		return;
	sw->tunnel = true;
	wake_tunnel(w->sh->wake, sw->env, 1, sw->wait.cls);
}

void stream_wake_leave(struct stream_wake *sw, struct worker *w)
{
	if (sw->env) {
		if (sw->tunnel)
			wake_tunnel(w->sh->wake, sw->env, -1, sw->wait.cls);
		wake_leave(w->sh->wake, sw->env, &sw->wait);
		sw->env = NULL;
	}
	sw->tunnel = false;
	EDGE_ASSERT(!sw->wait.queued);
}
