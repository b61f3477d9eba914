// SPDX-License-Identifier: BSD-2-Clause
/*
 * worker.c - one worker thread: an event loop over its own listeners,
 * connections and upstream pools. The main thread reaches
 * it only through an atomic command and event_active() (libevent's
 * pthreads support makes that safe from another thread).
 */
#include <errno.h>
#include <malloc.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

#include "clk.h"
#include "conn.h"
#include "listener.h"
#include "mailbox.h"
#include "log.h"
#include "proxy.h"
#include "reqid.h"
#include "splice.h"
#include "tunnel.h"
#include "upstream.h"
#include "sockio.h"
#include "worker.h"

/* How often idle pooled upstream connections are expired. */
#define WORKER_TICK_MS 1000
/* callbacks a worker's loop runs before it polls its sockets again */
#define WORKER_MAX_CALLBACKS 64
/* Messages a worker's mailbox holds at most (worker_post). */
#define WORKER_MAILBOX 4096

void worker_maybe_exit(struct worker *w)
{
	if (w->draining && w->cs.n == 0 && w->l4.n == 0)
		event_base_loopexit(w->base, NULL);
}

static void worker_add_common(struct worker *w, uint64_t ms);

void worker_settings_from(struct worker_settings *s, const struct config *cfg)
{
	memset(s, 0, sizeof(*s));
	s->limits = cfg->limits;
	s->timeouts = cfg->timeouts;
	s->ratelimit = cfg->ratelimit;
	s->upstream = cfg->upstream;
	s->trusted_proxies = cfg->trusted_proxies;
	h1_limits_default(&s->h1);
	s->h1.line_max = cfg->limits.max_request_line;
	s->h1.head_max = cfg->limits.max_header_bytes;
	s->h1.headers_max = (unsigned)cfg->limits.max_headers;
}

/* Put w's settings to work: the common timeouts for its durations, the
 * pool's idle expiry, the per-client bucket's rate (the buckets
 * themselves are sh->limiter's, kept across reloads). Returns 0 or
 * -EINVAL (a rate without a burst; the old rate stays). */
static int worker_apply(struct worker *w)
{
	const struct config_timeouts *t = &w->set.timeouts;
	const struct config_ratelimit *rl = &w->set.ratelimit;
	struct admit_bucket b;
	int rc;

	/* the durations armed for (nearly) every request or connection */
	worker_add_common(w, t->header_ms);
	worker_add_common(w, t->upstream_connect_ms);
	worker_add_common(w, t->upstream_response_ms);
	worker_add_common(w, t->idle_keepalive_ms);
	worker_add_common(w, CONN_PARK_MS);
	worker_add_common(w, CONN_LINGER_MS);
	/* 0 keeps a value: a worker_settings never set (tests) keeps the
	 * defaults */
	upstream_worker_configure(w->up, 0, 0,
				  t->idle_keepalive_ms * 1000000ull,
				  (unsigned)w->set.upstream.eject_after,
				  w->set.upstream.eject_base_ms * 1000000ull,
				  w->set.upstream.eject_max_ms * 1000000ull);
	rc = admit_bucket_set(&b, rl->per_min, rl->burst);
	if (rc == 0)
		w->bucket = b;
	return rc;
}

/* Copy sh->set into w->set if it changed, and apply it. */
void worker_sync_settings(struct worker *w)
{
	struct worker_shared *sh = w->sh;
	unsigned gen = atomic_load(&sh->set_gen);
	int rc;

	if (gen == w->set_gen)
		return;
	pthread_mutex_lock(&sh->set_lock);
	w->set = sh->set;
	w->set_gen = atomic_load(&sh->set_gen);
	pthread_mutex_unlock(&sh->set_lock);
	rc = worker_apply(w);
	if (rc)
		log_warnx("worker %u: ratelimit: %s; the old one stays", w->id,
			  strerror(-rc));
}

/* The splice's run-time switch moved: apply it to this worker's
 * tunnels. */
static void worker_sync_splice(struct worker *w)
{
	unsigned gen = splice_gen();

	if (gen == w->splice_gen)
		return;
	w->splice_gen = gen;
	tunnel_set_switch(w->tunnels);
}

static void worker_notify_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	size_t i;

	uint64_t n;

	(void)what;
	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_warn("worker %u: wake", w->id);
	worker_sync_settings(w);
	worker_sync_splice(w);
	switch (atomic_load(&w->cmd)) {
	case WORKER_STOP:
		event_base_loopbreak(w->base);
		return;
	case WORKER_DRAIN:
		if (!w->draining) {
			w->draining = true;
			for (i = 0; i < w->nls; i++)
				listener_close(w->ls[i]);
			conn_drain_all(w);
			l4_drain_all(w);
		}
		worker_maybe_exit(w);
		return;
	default:
		return;
	}
}

/* Add what changed in w's upstream stats since the last call to sh->up
 * (unsigned arithmetic: a gauge that went down wraps back correctly). */
static void worker_publish_upstream(struct worker *w)
{
	struct worker_upstream_totals *t = &w->sh->up;
	struct upstream_stats st, *o = &w->up_published;

	upstream_stats(w->up, &st);
	atomic_fetch_add(&t->endpoints,
			 (unsigned long long)(st.endpoints - o->endpoints));
	atomic_fetch_add(&t->idle_fds,
			 (unsigned long long)(st.idle_fds - o->idle_fds));
	atomic_fetch_add(&t->pool_hits, st.pool_hits - o->pool_hits);
	atomic_fetch_add(&t->pool_misses, st.pool_misses - o->pool_misses);
	atomic_fetch_add(&t->pool_stale, st.pool_stale - o->pool_stale);
	atomic_fetch_add(&t->pool_closed, st.pool_closed - o->pool_closed);
	atomic_fetch_add(&t->ejections, st.ejections - o->ejections);
	atomic_fetch_add(&t->panics, st.panics - o->panics);
	*o = st;
}

const struct timeval *worker_timeout(const struct worker *w, uint64_t ms,
				     struct timeval *tv)
{
	size_t i;

	for (i = 0; i < w->ncommon; i++)
		if (w->common[i].ms == ms)
			return w->common[i].tv;
	tv->tv_sec = (time_t)(ms / 1000);
	tv->tv_usec = (suseconds_t)((ms % 1000) * 1000);
	return tv;
}

/* Make ms one of w's common timeouts (no-op when full, 0 or known). */
static void worker_add_common(struct worker *w, uint64_t ms)
{
	struct timeval tv;
	size_t i;

	if (!ms || w->ncommon == WORKER_COMMON_TIMEOUTS)
		return;
	for (i = 0; i < w->ncommon; i++)
		if (w->common[i].ms == ms)
			return;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
	w->common[w->ncommon].tv = event_base_init_common_timeout(w->base, &tv);
	if (w->common[w->ncommon].tv)
		w->common[w->ncommon++].ms = ms;
}

void worker_read_nofile(struct worker *w)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	w->nofile =
	    rl.rlim_cur == RLIM_INFINITY ? 0 : (unsigned long)rl.rlim_cur;
	w->fd_reserve = worker_fd_reserve(w->sh);
	atomic_store(&w->sh->fd_conn_cap,
		     w->nofile ? worker_fd_conn_cap(w->sh, w->nofile) : 0);
}

unsigned long worker_fd_reserve(const struct worker_shared *sh)
{
	return WORKER_FD_RESERVE +
	       (unsigned long)sh->cfg->workers *
		   (sh->cfg->n_listen + sh->cfg->tls.n_listen +
		    atomic_load(&sh->tcp_addrs) + 4);
}

unsigned long worker_fd_conn_cap(const struct worker_shared *sh,
				 unsigned long nofile)
{
	unsigned long reserve = worker_fd_reserve(sh);

	return nofile > reserve + 2 ? (nofile - reserve) / 2 : 1;
}

static void worker_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;

	(void)fd;
	(void)what;
	upstream_pool_expire(w->up, clk_now_ns());
	worker_publish_upstream(w);
	worker_read_nofile(w);
	worker_sync_splice(w);
	if (conn_tick_trim(w))
		malloc_trim(0);
	worker_maybe_exit(w);
}

/* Room for one more listener in w->ls. 0 or -ENOMEM. */
static int worker_ls_grow(struct worker *w)
{
	size_t cap = w->cap_ls ? w->cap_ls * 2 : 8;
	struct listener **v;

	if (w->nls < w->cap_ls)
		return 0;
	v = realloc(w->ls, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	w->ls = v;
	w->cap_ls = cap;
	return 0;
}

/* Close and forget listener i of w. */
static void worker_ls_drop(struct worker *w, size_t i)
{
	listener_free(w->ls[i]);
	memmove(&w->ls[i], &w->ls[i + 1], (w->nls - i - 1) * sizeof(*w->ls));
	w->nls--;
}

/* WORKER_MSG_LISTEN: fd (m->arg) listening on address m->ptr becomes
 * listener m->target of w; one of w's on that address goes first. */
static void worker_listen_open(struct worker *w, const struct mailbox_msg *m)
{
	struct listener *l;
	int fd = (int)m->arg, rc;
	size_t i;

	for (i = 0; i < w->nls; i++)
		if (listener_id(w->ls[i]) &&
		    strcmp(listener_text(w->ls[i]), m->ptr) == 0) {
			worker_ls_drop(w, i);
			break;
		}
	if (w->draining) {
		close(fd);
		return;
	}
	rc = worker_ls_grow(w);
	if (rc == 0)
		rc = listener_adopt(w, fd, m->ptr, m->target, &l);
	else
		close(fd);
	if (rc == 0) {
		w->ls[w->nls++] = l;
		rc = listener_enable(l);
	}
	if (rc)
		log_warnx("worker %u: listen %s: %s", w->id,
			  (const char *)m->ptr, strerror(-rc));
}

/* WORKER_MSG_UNLISTEN: w's listener m->target closes. */
static void worker_listen_close(struct worker *w, const struct mailbox_msg *m)
{
	size_t i;

	for (i = 0; i < w->nls; i++)
		if (listener_id(w->ls[i]) == m->target) {
			worker_ls_drop(w, i);
			return;
		}
}

/* A message from another thread (or this one): for a request, or a
 * listener of a TCP route's address to open or close. */
static bool worker_mail_cb(void *arg, const struct mailbox_msg *m)
{
	struct worker *w = arg;

	switch (m->type) {
	case WORKER_MSG_LISTEN:
		worker_listen_open(w, m);
		free(m->ptr);
		return true;
	case WORKER_MSG_UNLISTEN:
		worker_listen_close(w, m);
		return true;
	case WORKER_MSG_UPSTREAM:
		upstream_pool_expire(w->up, clk_now_ns());
		return true;
	case L4_MSG_WAKE:
		l4_message(w, m->target, m->arg);
		return true;
	default:
		req_message(w, m->type, m->target, m->arg);
		return true;
	}
}

/* A message that will never be handled: what it holds is released. */
static void worker_mail_drop(void *arg, const struct mailbox_msg *m)
{
	(void)arg;
	if (m->type == WORKER_MSG_LISTEN) {
		close((int)m->arg);
		free(m->ptr);
	}
}

int worker_listen_add(struct worker *w, int fd, const char *text, uint64_t id)
{
	struct mailbox_msg m = {
	    .type = WORKER_MSG_LISTEN, .target = id, .arg = (uint64_t)fd};
	int rc;

	m.ptr = strdup(text);
	if (!m.ptr)
		return -ENOMEM;
	rc = mailbox_post(w->mbox, &m);
	if (rc)
		free(m.ptr);
	return rc;
}

int worker_listen_del(struct worker *w, uint64_t id)
{
	struct mailbox_msg m = {.type = WORKER_MSG_UNLISTEN, .target = id};

	return mailbox_post(w->mbox, &m);
}

int worker_post(struct worker *w, uint32_t type, uint64_t target)
{
	struct mailbox_msg m = {.type = type, .target = target};

	return mailbox_post(w->mbox, &m);
}

int worker_post_arg(struct worker *w, uint32_t type, uint64_t target,
		    uint64_t arg)
{
	struct mailbox_msg m = {.type = type, .target = target, .arg = arg};

	return mailbox_post(w->mbox, &m);
}

int worker_handle_new(struct worker *w, void *obj, uint64_t *id)
{
	return reqid_alloc(w->ids, obj, id);
}

void *worker_handle_get(struct worker *w, uint64_t id)
{
	return reqid_lookup(w->ids, id);
}

void worker_handle_free(struct worker *w, uint64_t id)
{
	reqid_release(w->ids, id);
}

int worker_new(unsigned id, struct worker_shared *sh, struct worker **out,
	       struct errbuf *err)
{
	const struct config *cfg = sh->cfg;
	struct timeval tv = {WORKER_TICK_MS / 1000, 0};
	struct event_config *ecfg = NULL;
	struct worker *w;
	size_t i;
	int rc = -ENOMEM;

	w = calloc(1, sizeof(*w));
	if (!w)
		goto nomem;
	w->id = id;
	w->sh = sh;
	w->uring_want = cfg->io_uring;
	sem_init(&w->set_up, 0, 0);
	pthread_mutex_lock(&sh->set_lock);
	w->set = sh->set;
	w->set_gen = atomic_load(&sh->set_gen);
	pthread_mutex_unlock(&sh->set_lock);
	w->notify_fd = -1;
	/* only this worker's thread touches its base (the main thread
	 * speaks through w->cmd and the eventfd): no locks */
	ecfg = event_config_new();
	/* sockio.c re-activates a busy socket's event rather than looping:
	 * look at the other sockets (epoll) after this many callbacks.
	 * The changelist applies a loop pass's event changes at once before
	 * epoll_wait: a TLS connection's handover from its handshake event to
	 * its stream's, and a delete before close, cost no epoll_ctl of their
	 * own (bench/tls: 2 instead of 4 per connection). Its hazard is a
	 * socket with a second descriptor (dup(), a child between fork and
	 * exec): a delete applied after close() cannot remove it, and it
	 * stays in the epoll set until its last descriptor goes. Workers dup
	 * no socket; wake commands are spawned with every socket CLOEXEC, so
	 * the most a short-lived copy can cause is a spurious wake-up, which
	 * a non-blocking read answers with EAGAIN. */
	if (!ecfg || event_config_set_flag(ecfg, EVENT_BASE_FLAG_NOLOCK) ||
	    event_config_set_flag(ecfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST) ||
	    event_config_set_max_dispatch_interval(ecfg, NULL,
						   WORKER_MAX_CALLBACKS, 0))
		goto nomem;
	w->base = event_base_new_with_config(ecfg);
	event_config_free(ecfg);
	ecfg = NULL;
	if (!w->base)
		goto nomem;
	w->notify_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->notify_fd < 0)
		goto nomem;
	w->notify = event_new(w->base, w->notify_fd, EV_READ | EV_PERSIST,
			      worker_notify_cb, w);
	w->tick = event_new(w->base, -1, EV_PERSIST, worker_tick_cb, w);
	if (!w->notify || !w->tick || event_add(w->notify, NULL) ||
	    event_add(w->tick, &tv) || conn_set_init(w) || l4_set_init(w) ||
	    reqid_table_new(0, 0, &w->ids))
		goto nomem;
	/* a listener's message holds its socket: dropped, it is closed */
	rc = mailbox_new(w->base, WORKER_MAILBOX, worker_mail_cb,
			 worker_mail_drop, w, &w->mbox);
	if (rc) {
		errbuf_set(err, "worker %u: mailbox: %s", id, strerror(-rc));
		goto fail;
	}
	worker_read_nofile(w);
	w->splice_gen = splice_gen();
	rc = tunnel_set_new(w, &w->tunnels);
	if (rc)
		goto nomem;
	rc = upstream_worker_new(&w->up);
	if (rc)
		goto nomem;
	upstream_worker_set_release(w->up, proxy_pool_release);
	upstream_worker_set_registry(w->up, sh->upreg);
	rc = worker_apply(w);
	if (rc) {
		errbuf_set(err, "ratelimit: %s", strerror(-rc));
		goto fail;
	}
	/* the HTTP listeners (the TCP routes' come through the mailbox:
	 * worker_listen_add) */
	for (i = 0; i < cfg->n_listen + cfg->tls.n_listen; i++) {
		bool tls = i >= cfg->n_listen;

		if (worker_ls_grow(w))
			goto nomem;
		/* the first worker's socket is the process's first on the
		 * address: nothing else may listen there */
		if (id == 0) {
			rc = listener_probe(
			    tls ? &cfg->tls.listen[i - cfg->n_listen]
				: &cfg->listen[i],
			    err);
			if (rc)
				goto fail;
		}
		rc = listener_new(w,
				  tls ? &cfg->tls.listen[i - cfg->n_listen]
				      : &cfg->listen[i],
				  tls, &w->ls[w->nls], err);
		if (rc)
			goto fail;
		w->nls++;
		rc = listener_enable(w->ls[w->nls - 1]);
		if (rc)
			goto nomem;
	}
	*out = w;
	return 0;
nomem:
	if (ecfg)
		event_config_free(ecfg);
	rc = -ENOMEM;
	errbuf_set(err, "worker %u: out of memory", id);
fail:
	worker_free(w);
	return rc;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int rc;

	if (clk_attach(w->base))
		log_warnx("worker %u: out of memory: the clock is read at "
			  "every call",
			  w->id);
	rc = w->uring_want ? sockio_batch_init() : 0;
	if (rc < 0)
		log_warnx("worker %u: io_uring: %s: reads and sends go one "
			  "system call each",
			  w->id, strerror(-rc));
	atomic_store(&w->uring, w->uring_want && rc == 0 ? 1 : rc);
	sem_post(&w->set_up);
	if (w->uring_want && rc == 0) {
		/* one loop turn, then its sends in one batch; a turn that
		 * ran long while the batch waited ends by a loopbreak of
		 * sockio's (only WORKER_STOP's means stop) */
		bool ring_ok = true;

		while (!event_base_got_exit(w->base)) {
			int lr = event_base_loop(w->base, EVLOOP_ONCE), e;

			sockio_batch_flush();
			if (lr != 0 || atomic_load(&w->cmd) == WORKER_STOP)
				break;
			if (ring_ok && (e = sockio_batch_error()) != 0) {
				/* its ring failed (logged): the status says so
				 */
				ring_ok = false;
				atomic_store(&w->uring_broke, true);
				atomic_store(&w->uring, -e);
			}
		}
		sockio_batch_exit();
	} else {
		event_base_dispatch(w->base);
	}
	clk_detach();
	return NULL;
}

int worker_start(struct worker *w)
{
	int rc = pthread_create(&w->thread, NULL, worker_main, w);

	if (rc)
		return -rc;
	w->started = true;
	return 0;
}

void worker_wait_up(struct worker *w)
{
	if (!w->started)
		return;
	while (sem_wait(&w->set_up) != 0 && errno == EINTR)
		;
	sem_post(&w->set_up); /* a second wait returns at once */
}

/* Wake w's loop from another thread (it reads w->cmd). */
static void worker_wake(struct worker *w)
{
	uint64_t one = 1;

	if (write(w->notify_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("worker %u: wake", w->id);
}

void worker_drain(struct worker *w)
{
	int expected = WORKER_RUN;

	atomic_compare_exchange_strong(&w->cmd, &expected, WORKER_DRAIN);
	worker_wake(w);
}

void worker_stop(struct worker *w)
{
	atomic_store(&w->cmd, WORKER_STOP);
	worker_wake(w);
}

void worker_retune(struct worker *w)
{
	worker_wake(w);
}

int worker_join(struct worker *w, const struct timespec *deadline)
{
	int rc;

	if (!w->started)
		return 0;
	rc = pthread_timedjoin_np(w->thread, NULL, deadline);
	if (rc == ETIMEDOUT)
		return -ETIMEDOUT;
	w->started = false;
	return 0;
}

void worker_quiesce(struct worker *w)
{
	if (w && w->mbox)
		mailbox_close(w->mbox);
}

void worker_free(struct worker *w)
{
	size_t i;

	if (!w)
		return;
	worker_quiesce(w);
	if (w->base) {
		conn_free_all(w);
		l4_free_all(w);
	}
	for (i = 0; i < w->nls; i++)
		listener_free(w->ls[i]);
	free(w->ls);
	upstream_worker_free(w->up);
	tunnel_set_free(w->tunnels);
	if (w->notify)
		event_free(w->notify);
	if (w->tick)
		event_free(w->tick);
	mailbox_free(w->mbox);
	reqid_table_free(w->ids);
	if (w->base)
		event_base_free(w->base);
	if (w->notify_fd >= 0)
		close(w->notify_fd);
	sem_destroy(&w->set_up);
	free(w);
}
