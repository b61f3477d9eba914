// SPDX-License-Identifier: BSD-2-Clause
/*
 * worker.c - one worker thread: an event loop over its own listeners,
 * connections and upstream pools. The main thread reaches
 * it only through an atomic command and event_active() (libevent's
 * pthreads support makes that safe from another thread).
 */
#include <errno.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

#include "clk.h"
#include "mailbox.h"
#include "log.h"
#include "reqid.h"
#include "splice.h"
#include "tunnel.h"
#include "upstream.h"
#include "sockio.h"
#include "tls_up.h"
#include "worker.h"

/* How often idle pooled upstream connections are expired. */
#define WORKER_TICK_MS 1000
/* callbacks a worker's loop runs before it polls its sockets again */
#define WORKER_MAX_CALLBACKS 64
/* Messages a worker's mailbox holds at most (worker_post). */
#define WORKER_MAILBOX 4096

void worker_maybe_exit(struct worker *w)
{
	const struct worker_service *const *s = w->sh->services;

	if (!w->draining)
		return;
	for (; s && *s; s++)
		if ((*s)->busy && (*s)->busy(w))
			return;
	event_base_loopexit(w->base, NULL);
}

void worker_settings_from(struct worker_settings *s, const struct config *cfg)
{
	memset(s, 0, sizeof(*s));
	s->limits = cfg->limits;
	s->timeouts = cfg->timeouts;
	s->ratelimit = cfg->ratelimit;
	s->http2 = cfg->http2;
	s->upstream = cfg->upstream;
	s->trusted_proxies = cfg->trusted_proxies;
	s->quic_advertise = cfg->tls.quic_advertise;
	s->quic_early_data = cfg->tls.quic_early_data;
	s->chal_keys = cfg->challenge.keys;
	s->chal_file = s->chal_keys.n != 0;
	worker_settings_chal(s);
	h1_limits_default(&s->h1);
	s->h1.line_max = cfg->limits.max_request_line;
	s->h1.head_max = cfg->limits.max_header_bytes;
	s->h1.headers_max = (unsigned)cfg->limits.max_headers;
}

void worker_settings_chal(struct worker_settings *s)
{
	if (s->chal_file)
		return;
	chal_db_keys_get(&s->chal_keys);
	s->chal_random = s->chal_keys.n == 0;
	if (s->chal_random)
		s->chal_keys = *chal_random_keys();
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
	const struct worker_service *const *s;
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
			for (s = w->sh->services; s && *s; s++)
				if ((*s)->drain)
					(*s)->drain(w);
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
	atomic_fetch_add(&t->retries, st.retries - o->retries);
	atomic_fetch_add(&t->retry_refused,
			 st.retry_refused - o->retry_refused);
	atomic_fetch_add(&t->circuit_opens,
			 st.circuit_opens - o->circuit_opens);
	atomic_fetch_add(&t->circuit_refused,
			 st.circuit_refused - o->circuit_refused);
	atomic_fetch_add(&t->hedges, st.hedges - o->hedges);
	atomic_fetch_add(&t->hedge_wins, st.hedge_wins - o->hedge_wins);
	atomic_fetch_add(
	    &t->circuits_open,
	    (unsigned long long)(st.circuits_open - o->circuits_open));
	atomic_fetch_add(&t->ep_full_waits,
			 st.ep_full_waits - o->ep_full_waits);
	atomic_fetch_add(&t->ep_full_refused,
			 st.ep_full_refused - o->ep_full_refused);
	*o = st;
}

/* Whether any of w's services has a connection. */
static bool worker_busy(const struct worker *w)
{
	const struct worker_service *const *s = w->sh->services;

	for (; s && *s; s++)
		if ((*s)->busy && (*s)->busy(w))
			return true;
	return false;
}

/* w's circuits (upstream.h) copied where the control loop reads them. */
static void worker_publish_circuits(struct worker *w)
{
	pthread_mutex_lock(&w->circ_lock);
	w->n_circ = upstream_circuit_view(w->up, clk_now_ns(), w->circ,
					  CIRCUIT_SETS * CIRCUIT_WAYS);
	pthread_mutex_unlock(&w->circ_lock);
}

size_t worker_circuits(struct worker *w, struct circuit_view *out, size_t max)
{
	size_t n;

	pthread_mutex_lock(&w->circ_lock);
	n = w->n_circ < max ? w->n_circ : max;
	memcpy(out, w->circ, n * sizeof(*out));
	pthread_mutex_unlock(&w->circ_lock);
	return n;
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

void worker_add_common(struct worker *w, uint64_t ms)
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

static void worker_lag_idle(struct worker *w);

static void worker_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	const struct worker_service *const *s = w->sh->services;
	bool trim = false;

	(void)fd;
	(void)what;
	upstream_pool_expire(w->up, clk_now_ns());
	worker_publish_upstream(w);
	worker_publish_circuits(w);
	worker_read_nofile(w);
	worker_sync_splice(w);
	worker_lag_idle(w);
	for (; s && *s; s++)
		if ((*s)->tick && (*s)->tick(w))
			trim = true;
	if (trim)
		malloc_trim(0);
	worker_maybe_exit(w);
}

/* Arm the lag probe for its next run (w->lag.due). */
static void worker_probe_arm(struct worker *w)
{
	struct timeval tv = {0, (suseconds_t)(ADMIT_LAG_PROBE_NS / 1000)};

	if (event_add(w->probe, &tv))
		log_warnx("worker %u: the lag probe could not be armed: "
			  "brownout is blind",
			  w->id);
}

/* w's lag where other threads read it (worker_lag_ns): the recent lag at
 * now and when the next probe is due (0: none, paused). */
static void worker_lag_publish(struct worker *w, uint64_t now)
{
	atomic_store_explicit(&w->sh->lag[w->id].recent_ns,
			      admit_lag_recent(&w->lag, now),
			      memory_order_relaxed);
	atomic_store_explicit(&w->sh->lag[w->id].due_ns,
			      admit_lag_paused(&w->lag) ? 0 : w->lag.due,
			      memory_order_relaxed);
}

/* The lag probe: how late it ran is the loop's lag (admit.h). */
static void worker_probe_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	uint64_t now = clk_fresh_ns();

	(void)fd;
	(void)what;
	admit_lag_probe(&w->lag, now, w->set.limits.brownout_lag_ms * 1000000);
	worker_lag_publish(w, now);
	worker_probe_arm(w);
}

/* At each tick: a loop without a connection has nothing to shed for, so
 * the probe pauses (an idle worker sleeps) until worker_lag_wake (its
 * lag until now recorded first); a connection no hook woke it for is
 * seen here. Once a tick: the services' counts may cost a walk. */
static void worker_lag_idle(struct worker *w)
{
	bool busy = worker_busy(w);
	uint64_t now;

	if (busy && admit_lag_paused(&w->lag)) {
		worker_lag_wake(w, -1);
	} else if (!busy && !admit_lag_paused(&w->lag)) {
		now = clk_fresh_ns();
		event_del(w->probe);
		admit_lag_probe(&w->lag, now,
				w->set.limits.brownout_lag_ms * 1000000);
		admit_lag_pause(&w->lag);
		worker_lag_publish(w, now);
	}
}

/* How long the data (or the handshake) of fd's TCP connection has waited
 * for the loop, ns (TCP_INFO's last receipts, in ms); 0 when not known. */
static uint64_t worker_sock_waited_ns(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	uint32_t ms;

	if (fd < 0)
		return 0;
	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return 0;
	ms = ti.tcpi_last_data_recv > ti.tcpi_last_ack_recv
		 ? ti.tcpi_last_data_recv
		 : ti.tcpi_last_ack_recv;
	return (uint64_t)ms * 1000000;
}

void worker_lag_wake(struct worker *w, int fd)
{
	uint64_t now;

	if (!admit_lag_paused(&w->lag))
		return;
	now = clk_fresh_ns();
	admit_lag_resume(&w->lag, now, worker_sock_waited_ns(fd),
			 w->set.limits.brownout_lag_ms * 1000000);
	worker_lag_publish(w, now);
	worker_probe_arm(w);
}

uint64_t worker_lag_ns(const struct worker_shared *sh, unsigned id,
		       uint64_t now_ns)
{
	uint64_t v, due;

	if (id >= CONFIG_WORKERS_MAX)
		return 0;
	v = atomic_load_explicit(&sh->lag[id].recent_ns, memory_order_relaxed);
	due = atomic_load_explicit(&sh->lag[id].due_ns, memory_order_relaxed);
	if (due && now_ns > due && now_ns - due > v)
		v = now_ns - due;
	return v;
}

bool worker_lagging(struct worker *w)
{
	return admit_lag_shed(&w->lag, clk_now_ns(),
			      w->set.limits.brownout_lag_ms * 1000000);
}

/* A message from another thread (or this one): the worker's own, or a
 * service's. */
static bool worker_mail_cb(void *arg, const struct mailbox_msg *m)
{
	struct worker *w = arg;
	const struct worker_service *const *s = w->sh->services;

	if (m->type == WORKER_MSG_UPSTREAM) {
		upstream_pool_expire(w->up, clk_now_ns());
		return true;
	}
	for (; s && *s; s++)
		if ((*s)->mail && (*s)->mail(w, m))
			return true;
	log_warnx("worker %u: a message of type %u no service takes", w->id,
		  (unsigned)m->type);
	return true;
}

/* A message that will never be handled: what it holds is released. */
static void worker_mail_drop(void *arg, const struct mailbox_msg *m)
{
	struct worker *w = arg;
	const struct worker_service *const *s = w->sh->services;

	for (; s && *s; s++)
		if ((*s)->mail_drop && (*s)->mail_drop(w, m))
			return;
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
	const struct worker_service *const *svc;
	struct worker *w;
	int rc = -ENOMEM;

	w = calloc(1, sizeof(*w));
	if (!w)
		goto nomem;
	w->id = id;
	w->sh = sh;
	pthread_mutex_init(&w->circ_lock, NULL);
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
	w->probe = event_new(w->base, -1, 0, worker_probe_cb, w);
	if (!w->notify || !w->tick || !w->probe || event_add(w->notify, NULL) ||
	    event_add(w->tick, &tv) || reqid_table_new(0, 0, &w->ids))
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
	upstream_worker_set_registry(w->up, sh->upreg);
	rc = worker_apply(w);
	if (rc) {
		errbuf_set(err, "ratelimit: %s", strerror(-rc));
		goto fail;
	}
	/* its services, in their order (the listeners bind here, before
	 * privileges are dropped) */
	for (svc = sh->services; svc && *svc; svc++) {
		rc = (*svc)->init ? (*svc)->init(w, err) : 0;
		if (rc)
			goto fail;
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
	/* the probe's clock starts with the loop: the time before (set-up,
	 * the other workers') is no lag */
	admit_lag_init(&w->lag, clk_fresh_ns());
	atomic_store(&w->sh->lag[w->id].due_ns, w->lag.due);
	worker_probe_arm(w);
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
	/* a loop that no longer runs has no probe to be late */
	atomic_store(&w->sh->lag[w->id].due_ns, 0);
	tls_up_thread_end(); /* the TLS sessions it saved for upstreams */
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
	const struct worker_service *const *s;
	size_t n = 0;

	if (!w)
		return;
	worker_quiesce(w);
	/* the services in reverse order (those never set up cope: their
	 * state is NULL) */
	for (s = w->sh->services; s && s[n]; n++)
		;
	while (w->base && n-- > 0)
		if (s[n]->free)
			s[n]->free(w);
	upstream_worker_free(w->up);
	tunnel_set_free(w->tunnels);
	if (w->notify)
		event_free(w->notify);
	if (w->tick)
		event_free(w->tick);
	if (w->probe)
		event_free(w->probe);
	mailbox_free(w->mbox);
	reqid_table_free(w->ids);
	if (w->base)
		event_base_free(w->base);
	if (w->notify_fd >= 0)
		close(w->notify_fd);
	sem_destroy(&w->set_up);
	pthread_mutex_destroy(&w->circ_lock);
	free(w);
}
