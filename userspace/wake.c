// SPDX-License-Identifier: BSD-2-Clause
/*
 * wake.c - Wake (wake.h, docs/wake.md): the on-demand environments'
 * shared state, the wake (one per environment however many requests
 * wait: the command, the readiness probe, the deadline) and the sleep
 * after idle_timeout, on the control loop.
 *
 * Commands run through /bin/sh -c, spawned (posix_spawn: nothing of
 * edged's runs in the child) in a process group of their own, stdin
 * /dev/null, stdout and stderr into a pipe read on the loop (at most
 * wake.output_max bytes logged per command, the rest counted and
 * dropped); the exit is seen through a pidfd on the loop and reaped with
 * waitpid(WNOHANG): nothing ever waits. A wake's command that outlives
 * its wake's deadline is killed (SIGKILL to its group); one that keeps
 * running after the probe answered (it is the backend, say) is left
 * alone and reaped whenever it exits, unless its environment's endpoint
 * then fails its first request: a failed wake, whose command is killed.
 *
 * A failed wake (the command failed, the deadline passed, the woken
 * endpoint failed its first request) leaves the environment WAKE_FAILED
 * for a back-off: requests get 503 wake_failed at once and nothing runs
 * until it is over, so a storm of requests costs one wake.
 */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clk.h"
#include "log.h"
#include "metrics.h"
#include "wake.h"

extern char **environ;

/* How often the control loop looks for idle environments. */
#define WAKE_TICK_MS 200
/* How long one probe connect may take before the next is tried. */
#define WAKE_PROBE_CONNECT_MS 100
/* Bytes read from a command's output at a time. */
#define WAKE_READ_CHUNK 4096
#define NS_PER_MS 1000000ULL

/* A command edged runs: an environment's wake or sleep. */
struct wake_job {
	LIST_ENTRY(wake_job) link;
	struct wake *wk;
	struct wake_env *env;
	bool sleep; /* the sleep command (else the wake's) */
	pid_t pid;  /* its process group too */
	int pidfd;  /* -1 once reaped */
	int out;    /* the read end of its stdout/stderr, -1 at EOF */
	struct event *ev_exit, *ev_out, *ev_kill;
	uint64_t logged, dropped; /* output bytes */
};

struct wake_env {
	char id[CONFIG_ID_MAX + 1];
	char project[CONFIG_ID_MAX + 1];
	unsigned src; /* the route source (enum route_src_id) naming it */
	struct wake *wk;
	/* under wk->lock */
	bool gone; /* no longer on demand in the file */
	enum wake_state state;
	uint64_t idle_ms;
	uint64_t idle_bg_ms; /* idle_timeout_background, 0: idle_ms */
	uint64_t active;  /* app requests entered and not left (tunnels too) */
	uint64_t other;	  /* background and wake = false ones */
	uint64_t tunnels; /* of them, open tunnels */
	uint64_t last_ns, last_real_ns; /* last activity (app, background) */
	uint64_t last_app_ns, last_app_real_ns; /* last app activity, wake */
	uint64_t asleep_refused; /* wake = false requests refused asleep */
	uint64_t running_ns;	 /* monotonic: became running */
	uint64_t wake_t0;	 /* monotonic: this wake began */
	bool start;		 /* a wake for the loop to start */
	bool slot;		 /* holds a wake.max_concurrent slot */
	/* a wake that ended ready awaits its verdict (wake_answered); read
	 * without the lock, written under it */
	atomic_bool verify;
	bool stop;	     /* its endpoint failed: for the loop to stop it */
	bool confirm;	     /* a wake after failed ones served: for the loop
				to tell the database */
	uint64_t failures;   /* failed wakes in a row */
	uint64_t fail_gen;   /* failed wakes (wake_waiter's gen) */
	uint64_t backoff_ms; /* the last back-off (0: none) */
	uint64_t retry_ns;   /* monotonic: WAKE_FAILED until then */
	uint64_t wakes, wakes_ok, wakes_failed, wakes_pending, throttled;
	uint64_t endpoint_failed, backoff_refused;
	uint64_t sleeps;
	int64_t last_wake_ms;
	TAILQ_HEAD(wake_waiters, wake_waiter) waiters;
	size_t nwaiters;
	/* control loop only */
	struct config_addr *ups;
	size_t nups, probe_i;
	int probe_fd;
	struct event *probe_tm, *probe_ev, *deadline;
	struct wake_job *job;	    /* the wake's command, while waking */
	struct wake_job *ready_job; /* the wake's command still running when
				       it ended ready (killed if its
				       endpoint then fails) */
	struct wake_job *sleep_job; /* the sleep command, while it runs */
	uint64_t db_seq;     /* the database's protocol: this wake's number */
	uint64_t db_told_ns; /* the activity last written */
	uint64_t db_told_tunnels; /* and its open tunnels */
	int64_t db_req; /* the wake_requests row this host won (0: none) */
	uint64_t db_sleep_retry_ns; /* a sleep lost to another host's
				     * activity is sent again then (0:
				     * none) */
	uint64_t db_sleep_losses;   /* sleeps lost in a row since it went
				     * to sleep here */
};

struct wake {
	pthread_mutex_t lock;
	struct config_wake set; /* under lock (strings: control loop) */
	wake_notify_fn notify;
	struct wake_env **envs;
	size_t nenvs;
	uint64_t inflight; /* wakes holding a slot */
	uint64_t nbounded; /* bounded waiters waiting (every environment's) */
	size_t nstate[WAKE_NSTATES];
	struct event_base *base;
	struct event *kick, *tick;
	LIST_HEAD(wake_jobs, wake_job) jobs;
	const struct wake_db_ops *db; /* control loop */
	void *db_arg;
	uint64_t db_activity_ns; /* activity last written (monotonic) */
	struct metrics_counter *m_wakes[WAKE_R_FAILED + 2];
	struct metrics_counter *m_throttled, *m_endpoint_failed;
	struct metrics_histogram *m_cold;
	struct metrics_gauge *m_state[WAKE_NSTATES];
};

static const char *const wake_state_names[WAKE_NSTATES] = {
    "sleeping", "waking", "running", "wake_failed"};

const char *wake_state_name(enum wake_state s)
{
	return (unsigned)s < WAKE_NSTATES ? wake_state_names[s] : "?";
}

/* ---- state (under the lock) ---------------------------------------------- */

static void wake_set_state(struct wake *wk, struct wake_env *e,
			   enum wake_state s)
{
	if (!e->gone) {
		wk->nstate[e->state]--;
		wk->nstate[s]++;
		metrics_gauge_add(wk->m_state[e->state], -1);
		metrics_gauge_add(wk->m_state[s], 1);
	}
	e->state = s;
	if (s == WAKE_RUNNING)
		e->running_ns = clk_now_ns();
	else
		atomic_store_explicit(&e->verify, false, memory_order_relaxed);
	if (s != WAKE_SLEEPING) {
		e->db_sleep_retry_ns = 0;
		e->db_sleep_losses = 0;
	}
}

/* How long after t now is (0 when t is later: another thread's clock
 * may be ahead of this one's batched reading). */
static uint64_t wake_since(uint64_t now, uint64_t t)
{
	return now > t ? now - t : 0;
}

/* The seconds left of e's back-off at now, rounded up, at least 1. */
static unsigned wake_left_s(const struct wake_env *e, uint64_t now)
{
	uint64_t ns = e->retry_ns > now ? e->retry_ns - now : 0, s;

	if (ns > e->backoff_ms * NS_PER_MS)
		ns = e->backoff_ms * NS_PER_MS;
	s = (ns + 999999999ULL) / 1000000000ULL;
	return s ? (unsigned)s : 1;
}

/* e's wake failed (now): WAKE_FAILED for ms (0: the next back-off of
 * e's failures in a row, counted). The back-off's length. */
static uint64_t wake_backoff_locked(struct wake *wk, struct wake_env *e,
				    uint64_t ms, uint64_t now)
{
	if (!ms) {
		unsigned sh = e->failures < 20 ? (unsigned)e->failures : 20;

		ms = (uint64_t)WAKE_BACKOFF_MIN_MS << sh;
		if (ms > wk->set.retry_max_ms)
			ms = wk->set.retry_max_ms;
		e->failures++;
	}
	e->fail_gen++;
	e->backoff_ms = ms;
	e->retry_ns = now + ms * NS_PER_MS;
	wake_set_state(wk, e, WAKE_FAILED);
	return ms;
}

/* e is WAKE_FAILED and its back-off is over (now): asleep, its next
 * request wakes it. */
static bool wake_backoff_over_locked(struct wake *wk, struct wake_env *e,
				     uint64_t now)
{
	if (e->state != WAKE_FAILED || now < e->retry_ns)
		return false;
	wake_set_state(wk, e, WAKE_SLEEPING);
	return true;
}

static struct wake_env *wake_find(struct wake *wk, const char *id)
{
	size_t i;

	for (i = 0; i < wk->nenvs; i++)
		if (strcmp(wk->envs[i]->id, id) == 0)
			return wk->envs[i];
	return NULL;
}

/* Begin a wake of e if a slot is free: true when it began (the caller
 * kicks the loop). */
static bool wake_begin_locked(struct wake *wk, struct wake_env *e)
{
	if (wk->inflight >= wk->set.max_concurrent)
		return false;
	wk->inflight++;
	e->slot = true;
	e->start = true;
	e->wake_t0 = clk_now_ns();
	e->wakes++;
	wake_set_state(wk, e, WAKE_WAKING);
	return true;
}

/* Activity of class cls on e now (WAKE_CLS_PASSIVE: none). Under the
 * lock. */
static void wake_touch_locked(struct wake_env *e, unsigned cls)
{
	if (cls == WAKE_CLS_PASSIVE)
		return;
	e->last_ns = clk_now_ns();
	e->last_real_ns = clk_real_ns();
	if (cls == WAKE_CLS_APP) {
		e->last_app_ns = e->last_ns;
		e->last_app_real_ns = e->last_real_ns;
	}
}

/* How long after its last app activity background requests hold e
 * awake at most, ms: idle_timeout_background, never below idle_ms. */
static uint64_t wake_bg_ms(const struct wake_env *e)
{
	return e->idle_bg_ms > e->idle_ms ? e->idle_bg_ms : e->idle_ms;
}

static void wake_kick(struct wake *wk)
{
	if (wk->kick)
		event_active(wk->kick, EV_TIMEOUT, 0);
}

enum wake_enter_rc wake_enter(struct wake *wk, const char *env_id,
			      struct wake_waiter *wt, struct wake_env **env)
{
	enum wake_enter_rc rc = WAKE_GO;
	bool kick = false;
	struct wake_env *e;

	*env = NULL;
	pthread_mutex_lock(&wk->lock);
	e = wake_find(wk, env_id);
	if (!e || e->gone)
		goto out;
	if (wt->cls == WAKE_CLS_PASSIVE && e->state != WAKE_RUNNING) {
		e->asleep_refused++;
		rc = WAKE_ASLEEP;
		goto out;
	}
	if (e->state == WAKE_FAILED) {
		uint64_t now = clk_fresh_ns();

		if (!wake_backoff_over_locked(wk, e, now)) {
			e->backoff_refused++;
			wt->retry_s = wake_left_s(e, now);
			rc = WAKE_BACKOFF;
			goto out;
		}
	}
	if (e->state != WAKE_RUNNING && wt->bounded &&
	    wk->nbounded >= wk->set.max_waiting_connections) {
		e->throttled++;
		metrics_counter_add(wk->m_throttled, 1);
		rc = WAKE_THROTTLED;
		goto out;
	}
	if (e->state == WAKE_SLEEPING) {
		if (!wake_begin_locked(wk, e)) {
			e->throttled++;
			metrics_counter_add(wk->m_throttled, 1);
			rc = WAKE_THROTTLED;
			goto out;
		}
		kick = true;
	}
	if (e->state == WAKE_WAKING) {
		TAILQ_INSERT_TAIL(&e->waiters, wt, link);
		wt->queued = true;
		e->nwaiters++;
		if (wt->bounded)
			wk->nbounded++;
		rc = WAKE_WAIT;
	}
	if (wt->cls == WAKE_CLS_APP)
		e->active++;
	else
		e->other++;
	wake_touch_locked(e, wt->cls);
	wt->gen = e->fail_gen;
	*env = e;
out:
	pthread_mutex_unlock(&wk->lock);
	if (kick)
		wake_kick(wk);
	return rc;
}

void wake_leave(struct wake *wk, struct wake_env *e, struct wake_waiter *wt)
{
	if (!e)
		return;
	pthread_mutex_lock(&wk->lock);
	if (wt->queued) {
		TAILQ_REMOVE(&e->waiters, wt, link);
		wt->queued = false;
		e->nwaiters--;
		if (wt->bounded)
			wk->nbounded--;
	}
	if (wt->cls == WAKE_CLS_APP && e->active)
		e->active--;
	else if (wt->cls != WAKE_CLS_APP && e->other)
		e->other--;
	wake_touch_locked(e, wt->cls);
	pthread_mutex_unlock(&wk->lock);
}

void wake_tunnel(struct wake *wk, struct wake_env *e, int delta, unsigned cls)
{
	if (!e)
		return;
	pthread_mutex_lock(&wk->lock);
	if (delta > 0)
		e->tunnels++;
	else if (e->tunnels)
		e->tunnels--;
	wake_touch_locked(e, cls);
	pthread_mutex_unlock(&wk->lock);
}

/* e's woken endpoint failed its first request: a failed wake (its
 * back-off, the loop told to stop it). Under the lock. */
static void wake_endpoint_failed_locked(struct wake *wk, struct wake_env *e,
					uint64_t now)
{
	e->endpoint_failed++;
	wake_backoff_locked(wk, e, 0, now);
	e->stop = true;
	metrics_counter_add(wk->m_endpoint_failed, 1);
}

/* Whether e's last wake awaits its verdict (and may still have one: less
 * than wake.restart_window since). Under the lock. */
static bool wake_verifying_locked(struct wake *wk, struct wake_env *e,
				  uint64_t now)
{
	if (!atomic_load_explicit(&e->verify, memory_order_relaxed))
		return false;
	if (e->state == WAKE_RUNNING &&
	    wake_since(now, e->running_ns) <
		wk->set.restart_window_ms * NS_PER_MS)
		return true;
	atomic_store_explicit(&e->verify, false, memory_order_relaxed);
	return false;
}

enum wake_refusal wake_refused(struct wake *wk, struct wake_env *e,
			       const struct wake_waiter *wt, bool woken,
			       unsigned *retry_s)
{
	enum wake_refusal rc = WAKE_DOWN;
	bool kick = false;
	uint64_t now;

	*retry_s = WAKE_RETRY_AFTER_S;
	if (!e)
		return WAKE_DOWN;
	pthread_mutex_lock(&wk->lock);
	now = clk_fresh_ns();
	if (!e->gone && wake_verifying_locked(wk, e, now)) {
		wake_endpoint_failed_locked(wk, e, now);
		kick = true;
	}
	if (e->state == WAKE_FAILED && !e->gone &&
	    !wake_backoff_over_locked(wk, e, now)) {
		*retry_s = wake_left_s(e, now);
		rc = WAKE_REFUSED_FAILED;
		goto out;
	}
	if (wt->gen != e->fail_gen) {
		/* it entered before a wake failed (a storm's request sent
		 * to the endpoint before it failed): no new wake for it */
		rc = WAKE_REFUSED_FAILED;
		goto out;
	}
	if (woken || e->state != WAKE_RUNNING ||
	    wake_since(now, e->running_ns) <
		wk->set.restart_window_ms * NS_PER_MS)
		rc = WAKE_RESTARTING;
	if (rc == WAKE_RESTARTING && e->state != WAKE_WAKING && !e->gone) {
		kick = wake_begin_locked(wk, e);
		if (!kick && e->state == WAKE_RUNNING)
			wake_set_state(wk, e, WAKE_SLEEPING);
	}
out:
	pthread_mutex_unlock(&wk->lock);
	if (kick)
		wake_kick(wk);
	return rc;
}

void wake_answered(struct wake *wk, struct wake_env *e, bool ok)
{
	bool kick = false;
	uint64_t now;

	if (!e || !atomic_load_explicit(&e->verify, memory_order_relaxed))
		return;
	pthread_mutex_lock(&wk->lock);
	now = clk_fresh_ns();
	if (!e->gone && wake_verifying_locked(wk, e, now)) {
		atomic_store_explicit(&e->verify, false, memory_order_relaxed);
		if (!ok) {
			wake_endpoint_failed_locked(wk, e, now);
			kick = true;
		} else if (e->failures) {
			e->failures = 0;
			e->confirm = true;
			kick = true;
		}
	}
	pthread_mutex_unlock(&wk->lock);
	if (kick)
		wake_kick(wk);
}

unsigned wake_retry_after(struct wake *wk, struct wake_env *e)
{
	unsigned s = WAKE_RETRY_AFTER_S;
	uint64_t now;

	if (!e)
		return s;
	pthread_mutex_lock(&wk->lock);
	now = clk_fresh_ns();
	if (e->state == WAKE_FAILED && now < e->retry_ns)
		s = wake_left_s(e, now);
	pthread_mutex_unlock(&wk->lock);
	return s;
}

uint64_t wake_timeout_ms(struct wake *wk)
{
	uint64_t ms;

	pthread_mutex_lock(&wk->lock);
	ms = wk->set.timeout_ms;
	pthread_mutex_unlock(&wk->lock);
	return ms;
}

uint64_t wake_retry_max_ms(struct wake *wk)
{
	uint64_t ms;

	pthread_mutex_lock(&wk->lock);
	ms = wk->set.retry_max_ms;
	pthread_mutex_unlock(&wk->lock);
	return ms;
}

/* ---- commands ------------------------------------------------------------ */

/* cmd with every "%s" replaced by id and "%%" by "%" (the configuration
 * allows no other '%'). malloc'd, or NULL. */
static char *wake_expand(const char *cmd, const char *id)
{
	size_t n = 0, idn = strlen(id);
	const char *q;
	char *out, *o;

	for (q = cmd; *q; q++, n++)
		if (q[0] == '%' && q[1] == 's') {
			n += idn - 1;
			q++;
		} else if (q[0] == '%' && q[1] == '%') {
			q++;
		}
	out = malloc(n + 1);
	if (!out)
		return NULL;
	for (q = cmd, o = out; *q; q++) {
		if (q[0] == '%' && q[1] == 's') {
			memcpy(o, id, idn);
			o += idn;
			q++;
			continue;
		}
		if (q[0] == '%' && q[1] == '%')
			q++;
		*o++ = *q;
	}
	*o = '\0';
	return out;
}

static const char *wake_job_what(const struct wake_job *j)
{
	return j->sleep ? "sleep command" : "wake command";
}

static void wake_job_free(struct wake_job *j)
{
	if (!j)
		return;
	LIST_REMOVE(j, link);
	if (j->ev_exit)
		event_free(j->ev_exit);
	if (j->ev_out)
		event_free(j->ev_out);
	if (j->ev_kill)
		event_free(j->ev_kill);
	if (j->pidfd >= 0)
		close(j->pidfd);
	if (j->out >= 0)
		close(j->out);
	if (j->env && j->env->job == j)
		j->env->job = NULL;
	if (j->env && j->env->sleep_job == j)
		j->env->sleep_job = NULL;
	if (j->env && j->env->ready_job == j)
		j->env->ready_job = NULL;
	free(j);
}

static void wake_job_maybe_free(struct wake_job *j)
{
	if (j->pidfd < 0 && j->out < 0)
		wake_job_free(j);
}

static void wake_job_kill(struct wake_job *j)
{
	if (j->pidfd < 0)
		return;
	/* the group: sh -c and whatever it started */
	if (kill(-j->pid, SIGKILL) && errno == ESRCH)
		kill(j->pid, SIGKILL);
}

static void wake_finish(struct wake_env *e, enum wake_result res);
static void wake_sleep_done(struct wake_env *e);

/* The command's output: logged up to wake.output_max bytes, then
 * counted and dropped. */
static void wake_job_out_cb(evutil_socket_t fd, short what, void *arg)
{
	struct wake_job *j = arg;
	char buf[WAKE_READ_CHUNK];
	uint64_t max = j->wk->set.output_max;
	ssize_t n;
	size_t i, s, len;

	(void)what;
	n = read(fd, buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		event_del(j->ev_out);
		close(j->out);
		j->out = -1;
		if (j->dropped)
			log_note("environment %s: %s: %llu more byte(s) of "
				 "output not logged (wake.output_max)",
				 j->env->id, wake_job_what(j),
				 (unsigned long long)j->dropped);
		wake_job_maybe_free(j);
		return;
	}
	len = (size_t)n;
	if (j->logged >= max) {
		j->dropped += len;
		return;
	}
	if (len > max - j->logged) {
		j->dropped += len - (max - j->logged);
		len = (size_t)(max - j->logged);
	}
	j->logged += len;
	for (s = 0, i = 0; i <= len; i++) {
		if (i < len && buf[i] != '\n')
			continue;
		if (i > s)
			log_note("environment %s: %s: %.*s", j->env->id,
				 wake_job_what(j), (int)(i - s), buf + s);
		s = i + 1;
	}
}

/* The command exited: reap it (never blocks: the pidfd said so). */
static void wake_job_exit_cb(evutil_socket_t fd, short what, void *arg)
{
	struct wake_job *j = arg;
	struct wake_env *e = j->env;
	int st = 0;
	pid_t p;

	(void)fd;
	(void)what;
	p = waitpid(j->pid, &st, WNOHANG);
	if (p == 0)
		return; /* not yet */
	event_del(j->ev_exit);
	close(j->pidfd);
	j->pidfd = -1;
	if (j->ev_kill)
		event_del(j->ev_kill);
	if (p < 0)
		log_warn("environment %s: %s: waitpid", e->id,
			 wake_job_what(j));
	else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		log_note("environment %s: %s exited 0", e->id,
			 wake_job_what(j));
	else if (WIFEXITED(st))
		log_warnx("environment %s: %s exited %d", e->id,
			  wake_job_what(j), WEXITSTATUS(st));
	else
		log_warnx("environment %s: %s killed by signal %d", e->id,
			  wake_job_what(j), WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	if (e->job == j) {
		e->job = NULL;
		if (!(p > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0))
			wake_finish(e, WAKE_R_FAILED);
		/* exit 0: the probe goes on until the deadline */
	} else if (e->sleep_job == j) {
		e->sleep_job = NULL;
		wake_sleep_done(e);
	}
	wake_job_maybe_free(j);
}

/* A sleep command past wake.timeout. */
static void wake_job_kill_cb(evutil_socket_t fd, short what, void *arg)
{
	struct wake_job *j = arg;

	(void)fd;
	(void)what;
	log_warnx("environment %s: %s still running after %llu ms: killed",
		  j->env->id, wake_job_what(j),
		  (unsigned long long)j->wk->set.timeout_ms);
	wake_job_kill(j);
}

static void wake_tv(struct timeval *tv, uint64_t ms)
{
	tv->tv_sec = (time_t)(ms / 1000);
	tv->tv_usec = (suseconds_t)(ms % 1000) * 1000;
}

/* Run cmd for e (sleep: the sleep command): 0 with *out, or -errno
 * (logged). */
static int wake_spawn(struct wake *wk, struct wake_env *e, const char *cmd,
		      bool sleep, struct wake_job **out)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, def;
	struct wake_job *j;
	static char sh[] = "/bin/sh", dash_c[] = "-c";
	char *argv[4] = {sh, dash_c, NULL, NULL};
	int pfd[2] = {-1, -1}, rc;
	struct timeval tv;

	*out = NULL;
	j = calloc(1, sizeof(*j));
	argv[2] = wake_expand(cmd, e->id);
	if (!j || !argv[2]) {
		free(j);
		free(argv[2]);
		return -ENOMEM;
	}
	j->wk = wk;
	j->env = e;
	j->sleep = sleep;
	j->pidfd = j->out = -1;
	LIST_INSERT_HEAD(&wk->jobs, j, link);
	if (pipe2(pfd, O_CLOEXEC | O_NONBLOCK)) {
		rc = -errno;
		goto fail;
	}
	/* the child's end blocks, as a terminal would */
	fcntl(pfd[1], F_SETFL, 0);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
	posix_spawnattr_init(&at);
	sigemptyset(&none);
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	sigaddset(&def, SIGHUP);
	sigaddset(&def, SIGTERM);
	sigaddset(&def, SIGINT);
	sigaddset(&def, SIGCHLD);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &def);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP |
					  POSIX_SPAWN_SETSIGMASK |
					  POSIX_SPAWN_SETSIGDEF);
	rc = -posix_spawn(&j->pid, argv[0], &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close(pfd[1]);
	j->out = pfd[0];
	if (rc)
		goto fail;
	j->pidfd = (int)syscall(SYS_pidfd_open, j->pid, 0);
	if (j->pidfd < 0) {
		rc = -errno;
		kill(-j->pid, SIGKILL);
		waitpid(j->pid, NULL, 0); /* killed: returns at once */
		j->pid = 0;
		goto fail;
	}
	j->ev_exit = event_new(wk->base, j->pidfd, EV_READ | EV_PERSIST,
			       wake_job_exit_cb, j);
	j->ev_out = event_new(wk->base, j->out, EV_READ | EV_PERSIST,
			      wake_job_out_cb, j);
	if (sleep)
		j->ev_kill = evtimer_new(wk->base, wake_job_kill_cb, j);
	if (!j->ev_exit || !j->ev_out || (sleep && !j->ev_kill)) {
		rc = -ENOMEM;
		wake_job_kill(j);
		goto fail;
	}
	event_add(j->ev_exit, NULL);
	event_add(j->ev_out, NULL);
	if (sleep) {
		wake_tv(&tv, wk->set.timeout_ms);
		evtimer_add(j->ev_kill, &tv);
	}
	log_note("environment %s: %s started (pid %d): %s", e->id,
		 wake_job_what(j), (int)j->pid, argv[2]);
	free(argv[2]);
	*out = j;
	return 0;
fail:
	log_warnx("environment %s: cannot run the %s: %s", e->id,
		  sleep ? "sleep command" : "wake command", strerror(-rc));
	free(argv[2]);
	if (j->pid > 0 && j->pidfd >= 0) {
		/* killed above (out of memory): SIGKILL cannot be caught,
		 * so this wait is short */
		waitpid(j->pid, NULL, 0);
	}
	wake_job_free(j);
	return rc;
}

/* ---- the probe ----------------------------------------------------------- */

static void wake_probe_stop(struct wake_env *e)
{
	if (e->probe_tm)
		evtimer_del(e->probe_tm);
	if (e->probe_ev) {
		event_free(e->probe_ev);
		e->probe_ev = NULL;
	}
	if (e->probe_fd >= 0) {
		close(e->probe_fd);
		e->probe_fd = -1;
	}
}

static void wake_probe_next(struct wake_env *e)
{
	struct timeval tv;

	wake_tv(&tv, e->wk->set.probe_interval_ms);
	evtimer_add(e->probe_tm, &tv);
}

/* A probe connect in progress finished, or timed out. */
static void wake_probe_conn_cb(evutil_socket_t fd, short what, void *arg)
{
	struct wake_env *e = arg;
	int err = ETIMEDOUT;
	socklen_t len = sizeof(err);

	if ((what & EV_WRITE) &&
	    getsockopt((int)fd, SOL_SOCKET, SO_ERROR, &err, &len))
		err = errno;
	event_free(e->probe_ev);
	e->probe_ev = NULL;
	close(e->probe_fd);
	e->probe_fd = -1;
	if (err == 0) {
		wake_finish(e, WAKE_R_READY);
		return;
	}
	wake_probe_next(e);
}

/* One step of the probe: connect to the next endpoint. */
static void wake_probe_cb(evutil_socket_t fd, short what, void *arg)
{
	struct wake_env *e = arg;
	const struct config_addr *a;
	struct timeval tv;
	int s;

	(void)fd;
	(void)what;
	if (e->nups == 0 || e->probe_fd >= 0)
		return;
	a = &e->ups[e->probe_i++ % e->nups];
	s = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		   0);
	if (s < 0) {
		wake_probe_next(e);
		return;
	}
	if (connect(s, (const struct sockaddr *)&a->ss, a->len) == 0) {
		close(s);
		wake_finish(e, WAKE_R_READY);
		return;
	}
	if (errno != EINPROGRESS) {
		close(s);
		wake_probe_next(e);
		return;
	}
	e->probe_fd = s;
	e->probe_ev =
	    event_new(e->wk->base, s, EV_WRITE, wake_probe_conn_cb, e);
	if (!e->probe_ev) {
		close(s);
		e->probe_fd = -1;
		wake_probe_next(e);
		return;
	}
	wake_tv(&tv, WAKE_PROBE_CONNECT_MS);
	event_add(e->probe_ev, &tv);
}

/* ---- a wake's course ----------------------------------------------------- */

/* How a wake that did not end ready backs off (wake_end). */
#define WAKE_BACKOFF_NEXT 0    /* the next of its failures in a row */
#define WAKE_BACKOFF_NONE (-1) /* none: asleep, the next request tries */

/*
 * The wake of e ended with res: its state, its slot, its waiters told.
 * Not ready: WAKE_FAILED for backoff ms (>0), or for the next back-off
 * of its failures in a row (WAKE_BACKOFF_NEXT), or asleep at once
 * (WAKE_BACKOFF_NONE: no wake could be asked for).
 */
static void wake_end(struct wake_env *e, enum wake_result res, int64_t backoff)
{
	struct wake *wk = e->wk;
	struct wake_waiter *wt;
	uint64_t ns, told = 0, lost = 0, ms = 0, failures;
	struct wake_job *job = e->job;
	int64_t give_up;

	wake_probe_stop(e);
	if (e->deadline)
		evtimer_del(e->deadline);
	if (job && res != WAKE_R_READY)
		wake_job_kill(job);
	e->job = NULL; /* a command still running is reaped on its own */
	pthread_mutex_lock(&wk->lock);
	if (e->state != WAKE_WAKING) {
		pthread_mutex_unlock(&wk->lock);
		return;
	}
	give_up = res != WAKE_R_READY ? e->db_req : 0;
	e->db_req = 0;
	ns = clk_now_ns() - e->wake_t0;
	e->last_wake_ms = (int64_t)(ns / NS_PER_MS);
	if (e->slot) {
		e->slot = false;
		wk->inflight--;
	}
	if (res == WAKE_R_READY) {
		wake_set_state(wk, e, WAKE_RUNNING);
		/* its first request says whether it serves */
		atomic_store_explicit(&e->verify, true, memory_order_relaxed);
		e->ready_job = job;
	} else if (backoff == WAKE_BACKOFF_NONE) {
		e->fail_gen++;
		wake_set_state(wk, e, WAKE_SLEEPING);
	} else {
		ms = wake_backoff_locked(wk, e, (uint64_t)backoff,
					 clk_fresh_ns());
	}
	failures = e->failures;
	if (res == WAKE_R_READY)
		e->wakes_ok++;
	else if (res == WAKE_R_FAILED)
		e->wakes_failed++;
	else
		e->wakes_pending++;
	wake_touch_locked(e, WAKE_CLS_APP);
	while ((wt = TAILQ_FIRST(&e->waiters))) {
		TAILQ_REMOVE(&e->waiters, wt, link);
		wt->queued = false;
		e->nwaiters--;
		if (wt->bounded)
			wk->nbounded--;
		if (wk->notify(wt, res) == 0)
			told++;
		else
			lost++;
	}
	pthread_mutex_unlock(&wk->lock);
	if (give_up > 0 && wk->db)
		wk->db->gave_up(wk->db_arg, e->id, give_up);
	metrics_counter_add(wk->m_wakes[res], 1);
	if (res == WAKE_R_READY)
		metrics_histogram_observe(wk->m_cold, ns);
	if (lost)
		log_warnx("environment %s: %llu waiter(s) not told (mailbox "
			  "full): their own timer ends them",
			  e->id, (unsigned long long)lost);
	if (res == WAKE_R_READY)
		log_note("environment %s: awake in %llu ms (%llu request(s) or "
			 "connection(s) waited)",
			 e->id, (unsigned long long)(ns / NS_PER_MS),
			 (unsigned long long)told);
	else if (ms)
		log_warnx("environment %s: wake %s after %llu ms (%llu "
			  "waiting request(s) or connection(s) refused): "
			  "wake_failed, no wake for %llu ms (%llu failed in a "
			  "row)",
			  e->id, res == WAKE_R_FAILED ? "failed" : "timed out",
			  (unsigned long long)(ns / NS_PER_MS),
			  (unsigned long long)told, (unsigned long long)ms,
			  (unsigned long long)failures);
	else
		log_warnx("environment %s: wake %s after %llu ms (%llu "
			  "waiting request(s) or connection(s) refused)",
			  e->id, res == WAKE_R_FAILED ? "failed" : "timed out",
			  (unsigned long long)(ns / NS_PER_MS),
			  (unsigned long long)told);
}

static void wake_finish(struct wake_env *e, enum wake_result res)
{
	wake_end(e, res, WAKE_BACKOFF_NEXT);
}

static void wake_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct wake_env *e = arg;

	(void)fd;
	(void)what;
	wake_finish(e, WAKE_R_PENDING);
}

/* Whether e wakes and sleeps through the database (else the commands). */
static bool wake_by_db(const struct wake *wk, const struct wake_env *e)
{
	return wk->db && e->src == ROUTE_SRC_DB;
}

/* Start e's wake on the loop: the deadline, the command (or the
 * database's request), the probe. */
static void wake_run(struct wake *wk, struct wake_env *e)
{
	uint64_t spent = (clk_now_ns() - e->wake_t0) / NS_PER_MS, left;
	struct timeval tv;
	struct wake_job *j = NULL;

	left = wk->set.timeout_ms > spent ? wk->set.timeout_ms - spent : 0;
	wake_tv(&tv, left);
	evtimer_add(e->deadline, &tv);
	if (wake_by_db(wk, e)) {
		/* the database's protocol: ask, and probe meanwhile (this
		 * host or another asked; the route brings the endpoints) */
		e->db_req = 0;
		if (wk->db->ask(wk->db_arg, e->id, ++e->db_seq)) {
			log_warnx(
			    "environment %s: the database is unreachable: "
			    "its wake cannot be asked for",
			    e->id);
			wake_end(e, WAKE_R_FAILED, WAKE_BACKOFF_NONE);
			return;
		}
		e->probe_i = 0;
		wake_probe_cb(-1, 0, e);
		return;
	}
	if (wake_spawn(wk, e, wk->set.command, false, &j)) {
		wake_finish(e, WAKE_R_FAILED);
		return;
	}
	e->job = j;
	e->probe_i = 0;
	wake_probe_cb(-1, 0, e);
}

/* e's woken endpoint failed its first request (wake_answered,
 * wake_refused): its command killed if it still runs, and the
 * environment put to sleep as an idle one is (the sleep command, or the
 * database told), so that the next wake starts it afresh. */
static void wake_stop(struct wake *wk, struct wake_env *e)
{
	struct wake_job *j = NULL;
	uint64_t ms, failures;

	pthread_mutex_lock(&wk->lock);
	ms = e->backoff_ms;
	failures = e->failures;
	pthread_mutex_unlock(&wk->lock);
	log_warnx("environment %s: its endpoint failed its first request "
		  "after the wake: wake_failed, no wake for %llu ms (%llu "
		  "failed in a row)",
		  e->id, (unsigned long long)ms, (unsigned long long)failures);
	if (e->ready_job) {
		wake_job_kill(e->ready_job);
		e->ready_job = NULL;
	}
	if (wake_by_db(wk, e)) {
		wk->db->failed(wk->db_arg, e->id, wk->set.retry_max_ms);
		return;
	}
	if (wk->set.sleep_command[0] && !e->sleep_job &&
	    wake_spawn(wk, e, wk->set.sleep_command, true, &j) == 0)
		e->sleep_job = j;
}

/* The workers want wakes started, or failed ones stopped. */
static void wake_kick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct wake *wk = arg;
	struct wake_env **run, **stop, **confirm;
	size_t i, n = 0, ns = 0, nc = 0;

	(void)fd;
	(void)what;
	run = calloc(wk->nenvs ? wk->nenvs : 1, sizeof(*run));
	stop = calloc(wk->nenvs ? wk->nenvs : 1, sizeof(*stop));
	confirm = calloc(wk->nenvs ? wk->nenvs : 1, sizeof(*confirm));
	pthread_mutex_lock(&wk->lock);
	for (i = 0; i < wk->nenvs; i++) {
		struct wake_env *e = wk->envs[i];

		/* no memory: the next kick or tick retries */
		if (e->stop && stop) {
			e->stop = false;
			stop[ns++] = e;
		}
		if (e->confirm && confirm) {
			e->confirm = false;
			confirm[nc++] = e;
		}
		/* a sleep command still running goes first */
		if (!e->start || e->sleep_job || !run)
			continue;
		e->start = false;
		run[n++] = e;
	}
	pthread_mutex_unlock(&wk->lock);
	for (i = 0; i < ns; i++)
		wake_stop(wk, stop[i]);
	for (i = 0; i < nc; i++)
		if (wake_by_db(wk, confirm[i]))
			wk->db->confirmed(wk->db_arg, confirm[i]->id);
	for (i = 0; i < n; i++)
		wake_run(wk, run[i]);
	free(run);
	free(stop);
	free(confirm);
}

/* e's sleep command ended: a wake asked for meanwhile starts now. */
static void wake_sleep_done(struct wake_env *e)
{
	if (e->start)
		wake_kick(e->wk);
}

/* The database environments' activity since it was last written (an
 * environment with a request or tunnel open counts as active now). */
static void wake_db_activity(struct wake *wk, uint64_t now)
{
	struct wake_activity *v;
	struct wake_env **who;
	uint64_t real = clk_real_ns();
	size_t i, n = 0;

	if (!wk->db || now - wk->db_activity_ns < WAKE_ACTIVITY_MS * NS_PER_MS)
		return;
	wk->db_activity_ns = now;
	v = calloc(wk->nenvs + 1, sizeof(*v));
	who = calloc(wk->nenvs + 1, sizeof(*who));
	if (!v || !who)
		goto out;
	pthread_mutex_lock(&wk->lock);
	for (i = 0; i < wk->nenvs; i++) {
		struct wake_env *e = wk->envs[i];
		/* background activity counts until wake_bg_ms past the
		 * last app activity */
		uint64_t cap = e->last_app_real_ns + wake_bg_ms(e) * NS_PER_MS;
		uint64_t last = e->active		 ? real
				: e->other && real < cap ? real
				: e->last_real_ns < cap	 ? e->last_real_ns
							 : cap;

		if (e->gone || !wake_by_db(wk, e) ||
		    (last == e->db_told_ns && e->tunnels == e->db_told_tunnels))
			continue;
		snprintf(v[n].id, sizeof(v[n].id), "%s", e->id);
		v[n].last_real_ns = last;
		v[n].tunnels = e->tunnels;
		who[n++] = e;
	}
	pthread_mutex_unlock(&wk->lock);
	if (n == 0 || wk->db->activity(wk->db_arg, v, n))
		goto out;
	/* taken: news from now on only (the control loop alone writes
	 * these) */
	for (i = 0; i < n; i++) {
		who[i]->db_told_ns = v[i].last_real_ns;
		who[i]->db_told_tunnels = v[i].tunnels;
	}
out:
	free(v);
	free(who);
}

/* Put environments idle past their timeout to sleep; end back-offs. */
static void wake_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct wake *wk = arg;
	uint64_t now = clk_now_ns();
	struct wake_job *j;
	size_t i;

	(void)fd;
	(void)what;
	wake_db_activity(wk, now);
	for (i = 0; i < wk->nenvs; i++) {
		struct wake_env *e = wk->envs[i];
		bool sleep = false, bg = false;
		uint64_t idle = 0;

		pthread_mutex_lock(&wk->lock);
		if (!e->gone && wake_backoff_over_locked(wk, e, now)) {
			pthread_mutex_unlock(&wk->lock);
			log_note(
			    "environment %s: its back-off is over: the next "
			    "request wakes it",
			    e->id);
			continue;
		}
		/* idle: no app request or tunnel open, and nothing else
		 * either for idle_ms, or no app activity for wake_bg_ms
		 * (background and wake = false requests notwithstanding) */
		if (!e->gone && e->state == WAKE_RUNNING && e->active == 0 &&
		    e->idle_ms &&
		    ((e->other == 0 &&
		      now - e->last_ns >= e->idle_ms * NS_PER_MS) ||
		     (bg =
			  now - e->last_app_ns >= wake_bg_ms(e) * NS_PER_MS))) {
			idle = (now - (bg ? e->last_app_ns : e->last_ns)) /
			       NS_PER_MS;
			wake_set_state(wk, e, WAKE_SLEEPING);
			e->sleeps++;
			/* it ran its course: no failed wake in a row */
			e->failures = 0;
			sleep = true;
		} else if (!e->gone && e->state == WAKE_SLEEPING &&
			   e->db_sleep_retry_ns &&
			   now >= e->db_sleep_retry_ns) {
			/* idle here since, and the database still has it
			 * running: the hosts active at the same time may
			 * all have gone idle by now */
			e->db_sleep_retry_ns = 0;
			pthread_mutex_unlock(&wk->lock);
			if (wake_by_db(wk, e))
				wk->db->sleep(wk->db_arg, e->id, e->idle_ms);
			continue;
		}
		pthread_mutex_unlock(&wk->lock);
		if (!sleep)
			continue;
		log_note("environment %s: idle for %llu ms%s: going to sleep",
			 e->id, (unsigned long long)idle,
			 bg ? " (no app activity; background requests count "
			      "no longer)"
			    : "");
		if (wake_by_db(wk, e)) {
			wk->db->sleep(wk->db_arg, e->id, e->idle_ms);
			continue;
		}
		if (wk->set.sleep_command[0] && !e->sleep_job &&
		    wake_spawn(wk, e, wk->set.sleep_command, true, &j) == 0)
			e->sleep_job = j;
	}
}

/* ---- the database's protocol --------------------------------------------- */

void wake_set_db(struct wake *wk, const struct wake_db_ops *ops, void *arg)
{
	wk->db = ops;
	wk->db_arg = arg;
}

/* The environment id names, if on demand and waking (else NULL). */
static struct wake_env *wake_find_waking(struct wake *wk, const char *id)
{
	struct wake_env *e;

	pthread_mutex_lock(&wk->lock);
	e = wake_find(wk, id);
	if (e && (e->gone || e->state != WAKE_WAKING))
		e = NULL;
	pthread_mutex_unlock(&wk->lock);
	return e;
}

void wake_db_asked(struct wake *wk, const char *env_id, uint64_t seq,
		   int64_t req_id, int err, uint64_t retry_ms,
		   uint64_t failures)
{
	struct wake_env *e = wake_find_waking(wk, env_id);

	if (!e || e->db_seq != seq) {
		/* the wake ended before the answer (its deadline): nobody
		 * here waits for the row any more */
		if (err == 0 && req_id > 0 && wk->db) {
			log_warnx("environment %s: wake request %lld came "
				  "after its wake ended: given up",
				  env_id, (long long)req_id);
			wk->db->gave_up(wk->db_arg, env_id, req_id);
		}
		return;
	}
	if (err) {
		log_warnx("environment %s: the wake could not be asked of the "
			  "database: %s",
			  env_id, strerror(-err));
		wake_end(e, WAKE_R_FAILED, WAKE_BACKOFF_NONE);
		return;
	}
	pthread_mutex_lock(&wk->lock);
	e->failures = failures; /* the fleet's: its back-off if it fails */
	pthread_mutex_unlock(&wk->lock);
	if (req_id == 0 && retry_ms > 0) {
		log_note("environment %s: its last wake failed (the database "
			 "says): no wake for %llu ms more",
			 env_id, (unsigned long long)retry_ms);
		wake_end(e, WAKE_R_FAILED, (int64_t)retry_ms);
		return;
	}
	e->db_req = req_id;
	if (req_id > 0)
		log_note("environment %s: wake request %lld sent (NOTIFY "
			 "environment_wake)",
			 env_id, (long long)req_id);
	else
		log_note("environment %s: another host is waking it: waiting "
			 "for its route",
			 env_id);
}

uint64_t wake_db_sleep_lost(struct wake *wk, const char *env_id)
{
	struct wake_env *e;
	uint64_t n = 0;

	pthread_mutex_lock(&wk->lock);
	e = wake_find(wk, env_id);
	if (e && !e->gone && e->state == WAKE_SLEEPING) {
		e->db_sleep_retry_ns =
		    clk_now_ns() + WAKE_SLEEP_RETRY_MS * NS_PER_MS;
		n = ++e->db_sleep_losses;
	}
	pthread_mutex_unlock(&wk->lock);
	return n;
}

void wake_db_changed(struct wake *wk, const char *env_id, int64_t req_id,
		     const char *state)
{
	struct wake_env *e = wake_find_waking(wk, env_id);
	bool failed = strcmp(state, "failed") == 0;

	if (!e || (!failed && strcmp(state, "timeout") != 0))
		return;
	log_warnx("environment %s: wake request %lld %s", env_id,
		  (long long)req_id,
		  failed ? "failed (the orchestrator says)" : "timed out");
	if (e->db_req == req_id)
		e->db_req = 0; /* nothing to give up */
	wake_finish(e, failed ? WAKE_R_FAILED : WAKE_R_PENDING);
}

void wake_db_failed(struct wake *wk, const char *env_id, uint64_t retry_ms)
{
	struct wake_env *e;
	uint64_t now;

	if (!retry_ms)
		return;
	pthread_mutex_lock(&wk->lock);
	e = wake_find(wk, env_id);
	if (!e || e->gone) {
		pthread_mutex_unlock(&wk->lock);
		return;
	}
	log_warnx("environment %s: its woken endpoint failed on another "
		  "host: no wake for %llu ms",
		  env_id, (unsigned long long)retry_ms);
	if (e->state == WAKE_WAKING) {
		pthread_mutex_unlock(&wk->lock);
		wake_end(e, WAKE_R_FAILED, (int64_t)retry_ms);
		return;
	}
	now = clk_fresh_ns();
	if (e->state != WAKE_FAILED || e->retry_ns < now + retry_ms * NS_PER_MS)
		wake_backoff_locked(wk, e, retry_ms, now);
	pthread_mutex_unlock(&wk->lock);
}

/* ---- the registry -------------------------------------------------------- */

static int wake_copy_set(struct config_wake *to, const struct config_wake *c)
{
	char *cmd = strdup(c->command ? c->command : "");
	char *slp = strdup(c->sleep_command ? c->sleep_command : "");

	if (!cmd || !slp) {
		free(cmd);
		free(slp);
		return -ENOMEM;
	}
	free(to->command);
	free(to->sleep_command);
	*to = *c;
	to->command = cmd;
	to->sleep_command = slp;
	return 0;
}

int wake_new(const struct config_wake *c, wake_notify_fn notify,
	     struct wake **out)
{
	struct wake *wk = calloc(1, sizeof(*wk));

	if (!wk)
		return -ENOMEM;
	if (wake_copy_set(&wk->set, c)) {
		free(wk);
		return -ENOMEM;
	}
	pthread_mutex_init(&wk->lock, NULL);
	wk->notify = notify;
	LIST_INIT(&wk->jobs);
	*out = wk;
	return 0;
}

int wake_configure(struct wake *wk, const struct config_wake *c)
{
	uint64_t now, cap;
	size_t i;
	int rc;

	pthread_mutex_lock(&wk->lock);
	rc = wake_copy_set(&wk->set, c);
	/* a back-off longer than the new cap ends by it */
	now = clk_fresh_ns();
	cap = wk->set.retry_max_ms;
	for (i = 0; rc == 0 && i < wk->nenvs; i++) {
		struct wake_env *e = wk->envs[i];

		if (e->state != WAKE_FAILED || e->backoff_ms <= cap)
			continue;
		e->backoff_ms = cap;
		if (e->retry_ns > now + cap * NS_PER_MS)
			e->retry_ns = now + cap * NS_PER_MS;
	}
	pthread_mutex_unlock(&wk->lock);
	return rc;
}

static void wake_env_free(struct wake_env *e)
{
	if (!e)
		return;
	wake_probe_stop(e);
	if (e->probe_tm)
		event_free(e->probe_tm);
	if (e->deadline)
		event_free(e->deadline);
	free(e->ups);
	free(e);
}

void wake_free(struct wake *wk)
{
	size_t i;

	if (!wk)
		return;
	while (!LIST_EMPTY(&wk->jobs)) {
		struct wake_job *j = LIST_FIRST(&wk->jobs);

		j->env = NULL;
		wake_job_free(j);
	}
	for (i = 0; i < wk->nenvs; i++)
		wake_env_free(wk->envs[i]);
	free(wk->envs);
	if (wk->kick)
		event_free(wk->kick);
	if (wk->tick)
		event_free(wk->tick);
	free(wk->set.command);
	free(wk->set.sleep_command);
	pthread_mutex_destroy(&wk->lock);
	free(wk);
}

static int wake_env_events(struct wake *wk, struct wake_env *e)
{
	if (!wk->base || e->probe_tm)
		return 0;
	e->probe_tm = evtimer_new(wk->base, wake_probe_cb, e);
	e->deadline = evtimer_new(wk->base, wake_deadline_cb, e);
	return e->probe_tm && e->deadline ? 0 : -ENOMEM;
}

/* Probe the new environments v[0..n) once, together, within
 * WAKE_START_PROBE_MS: up[i] whether one of v[i]'s endpoints accepted. */
static void wake_probe_once(struct wake_env **v, size_t n, bool *up)
{
	struct pollfd *p;
	size_t *who, np = 0, i, k;
	uint64_t end = clk_now_ns() + WAKE_START_PROBE_MS * NS_PER_MS;

	p = calloc(n * CONFIG_UPSTREAMS_MAX + 1, sizeof(*p));
	who = calloc(n * CONFIG_UPSTREAMS_MAX + 1, sizeof(*who));
	if (!p || !who)
		goto out;
	for (i = 0; i < n; i++)
		for (k = 0; k < v[i]->nups; k++) {
			const struct config_addr *a = &v[i]->ups[k];
			int s = socket(
			    a->ss.ss_family,
			    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

			if (s < 0)
				continue;
			if (connect(s, (const struct sockaddr *)&a->ss,
				    a->len) == 0) {
				up[i] = true;
				close(s);
				continue;
			}
			if (errno != EINPROGRESS) {
				close(s);
				continue;
			}
			p[np].fd = s;
			p[np].events = POLLOUT;
			who[np++] = i;
		}
	while (np) {
		uint64_t now;
		int left, r;
		size_t j;

		now = clk_now_ns();
		left = now >= end ? 0 : (int)((end - now) / NS_PER_MS);
		r = poll(p, np, left);
		if (r <= 0)
			break;
		for (j = 0; j < np;) {
			int err = 0;
			socklen_t len = sizeof(err);

			if (!p[j].revents) {
				j++;
				continue;
			}
			if (getsockopt(p[j].fd, SOL_SOCKET, SO_ERROR, &err,
				       &len) == 0 &&
			    err == 0)
				up[who[j]] = true;
			close(p[j].fd);
			p[j] = p[--np];
			who[j] = who[np];
		}
	}
	for (i = 0; i < np; i++)
		close(p[i].fd);
out:
	free(p);
	free(who);
}

/* One on-demand environment of a source, as wake_sync_defs needs it. */
struct wake_def {
	char id[CONFIG_ID_MAX + 1];
	char project[CONFIG_ID_MAX + 1];
	struct config_addr *ups;
	size_t nups;
	uint64_t idle_ms;
	uint64_t idle_bg_ms;
};

struct wake_defs {
	unsigned src; /* enum route_src_id */
	bool all;     /* every project of src (else: only touched ones) */
	struct wake_def *v;
	size_t n;
	char (*touched)[CONFIG_ID_MAX + 1]; /* projects set or deleted */
	size_t ntouched;
};

void wake_defs_free(struct wake_defs *d)
{
	size_t i;

	if (!d)
		return;
	for (i = 0; i < d->n; i++)
		free(d->v[i].ups);
	free(d->v);
	free(d->touched);
	free(d);
}

struct wake_defs *wake_defs_new(unsigned src, const struct route_src_project *v,
				size_t n, const char *const *del, size_t n_del,
				bool all)
{
	struct wake_defs *d = calloc(1, sizeof(*d));
	size_t i, k, ne = 0;

	if (!d)
		return NULL;
	d->src = src;
	d->all = all;
	for (i = 0; i < n; i++)
		ne += v[i].n_envs;
	d->v = calloc(ne + 1, sizeof(*d->v));
	d->touched = calloc(n + n_del + 1, sizeof(*d->touched));
	if (!d->v || !d->touched)
		goto fail;
	for (i = 0; i < n_del; i++)
		snprintf(d->touched[d->ntouched++], sizeof(d->touched[0]), "%s",
			 del[i]);
	for (i = 0; i < n; i++) {
		snprintf(d->touched[d->ntouched++], sizeof(d->touched[0]), "%s",
			 v[i].id ? v[i].id : "");
		for (k = 0; k < v[i].n_envs; k++) {
			const struct route_src_env *se = &v[i].envs[k];
			struct wake_def *w = &d->v[d->n];

			if (!se->on_demand || !se->id)
				continue;
			w->ups = malloc((se->deployment.n_upstreams + 1) *
					sizeof(*w->ups));
			if (!w->ups)
				goto fail;
			d->n++;
			snprintf(w->id, sizeof(w->id), "%s", se->id);
			snprintf(w->project, sizeof(w->project), "%s",
				 v[i].id ? v[i].id : "");
			memcpy(w->ups, se->deployment.upstreams,
			       se->deployment.n_upstreams * sizeof(*w->ups));
			w->nups = se->deployment.n_upstreams;
			w->idle_ms = se->idle_timeout_ms;
			w->idle_bg_ms = se->idle_timeout_background_ms;
		}
	}
	return d;
fail:
	wake_defs_free(d);
	return NULL;
}

static bool wake_defs_touched(const struct wake_defs *d, const char *project)
{
	size_t i;

	if (d->all)
		return true;
	for (i = 0; i < d->ntouched; i++)
		if (strcmp(d->touched[i], project) == 0)
			return true;
	return false;
}

int wake_sync_defs(struct wake *wk, const struct wake_defs *d)
{
	struct wake_env **fresh = NULL, **grown;
	size_t nfresh = 0, i, k, n = d->n;
	bool *up = NULL;
	int rc = -ENOMEM;

	fresh = calloc(n + 1, sizeof(*fresh));
	up = calloc(n + 1, sizeof(*up));
	grown = realloc(wk->envs, (wk->nenvs + n + 1) * sizeof(*wk->envs));
	if (grown)
		wk->envs = grown;
	if (!fresh || !up || !grown)
		goto out;
	/* which stay, which are new; the others of the source go */
	for (i = 0; i < n; i++) {
		const struct wake_def *se = &d->v[i];
		struct wake_env *e;
		struct config_addr *ups;

		ups = malloc((se->nups + 1) * sizeof(*ups));
		if (!ups)
			goto out;
		memcpy(ups, se->ups, se->nups * sizeof(*ups));
		pthread_mutex_lock(&wk->lock);
		e = wake_find(wk, se->id);
		pthread_mutex_unlock(&wk->lock);
		if (!e) {
			e = calloc(1, sizeof(*e));
			if (!e) {
				free(ups);
				goto out;
			}
			snprintf(e->id, sizeof(e->id), "%s", se->id);
			e->wk = wk;
			e->gone = true; /* counted in when synced */
			e->probe_fd = -1;
			e->last_wake_ms = -1;
			TAILQ_INIT(&e->waiters);
			fresh[nfresh++] = e;
		} else if (e->gone) {
			fresh[nfresh++] = e;
		}
		e->src = d->src;
		snprintf(e->project, sizeof(e->project), "%s", se->project);
		free(e->ups);
		e->ups = ups;
		e->nups = se->nups;
		e->idle_ms = se->idle_ms;
		e->idle_bg_ms = se->idle_bg_ms;
		if (wake_env_events(wk, e))
			goto out;
	}
	wake_probe_once(fresh, nfresh, up);
	pthread_mutex_lock(&wk->lock);
	/* environments of the source's touched projects no longer on
	 * demand go */
	for (i = 0; i < wk->nenvs; i++) {
		struct wake_env *e = wk->envs[i];
		bool keep = false;

		if (e->gone || e->src != d->src ||
		    !wake_defs_touched(d, e->project))
			continue;
		for (k = 0; k < n && !keep; k++)
			keep = strcmp(d->v[k].id, e->id) == 0;
		if (!keep) {
			wk->nstate[e->state]--;
			metrics_gauge_add(wk->m_state[e->state], -1);
			e->gone = true;
		}
	}
	for (k = 0; k < nfresh; k++) {
		struct wake_env *e = fresh[k];
		bool known = false;

		for (i = 0; i < wk->nenvs && !known; i++)
			known = wk->envs[i] == e;
		if (!known)
			wk->envs[wk->nenvs++] = e;
		if (e->state != WAKE_WAKING)
			e->state = up[k] ? WAKE_RUNNING : WAKE_SLEEPING;
		/* back on demand: no lost sleep, failed wake or verdict of
		 * before it went */
		e->db_sleep_retry_ns = 0;
		e->db_sleep_losses = 0;
		e->failures = 0;
		e->backoff_ms = 0;
		e->stop = e->confirm = false;
		atomic_store_explicit(&e->verify, false, memory_order_relaxed);
		if (e->state == WAKE_RUNNING)
			e->running_ns = clk_now_ns() -
					wk->set.restart_window_ms * NS_PER_MS;
		wake_touch_locked(e, WAKE_CLS_APP);
		e->gone = false;
		wk->nstate[e->state]++;
		metrics_gauge_add(wk->m_state[e->state], 1);
		log_note("environment %s: on demand, %s at start (%s)", e->id,
			 wake_state_name(e->state),
			 up[k] ? "an endpoint accepts" : "no endpoint accepts");
	}
	pthread_mutex_unlock(&wk->lock);
	nfresh = 0;
	rc = 0;
out:
	for (i = 0; i < nfresh; i++) {
		bool known = false;

		for (k = 0; k < wk->nenvs && !known; k++)
			known = wk->envs[k] == fresh[i];
		if (!known)
			wake_env_free(fresh[i]);
	}
	free(fresh);
	free(up);
	return rc;
}

int wake_start(struct wake *wk, struct event_base *base)
{
	struct timeval tv;
	size_t i;

	wk->base = base;
	wk->kick = event_new(base, -1, 0, wake_kick_cb, wk);
	wk->tick = event_new(base, -1, EV_PERSIST, wake_tick_cb, wk);
	if (!wk->kick || !wk->tick)
		return -ENOMEM;
	for (i = 0; i < wk->nenvs; i++)
		if (wake_env_events(wk, wk->envs[i]))
			return -ENOMEM;
	wake_tv(&tv, WAKE_TICK_MS);
	event_add(wk->tick, &tv);
	wake_kick(wk); /* wakes asked for before the loop ran */
	return 0;
}

/* ---- what it shows ------------------------------------------------------- */

static int wake_cmp(const void *a, const void *b)
{
	const struct wake_env *const *x = a, *const *y = b;

	return strcmp((*x)->id, (*y)->id);
}

json_t *wake_dump_json(struct wake *wk)
{
	json_t *res = json_object(), *arr = json_array();
	struct wake_env **v = NULL;
	uint64_t now = clk_now_ns();
	size_t i, n = 0;

	if (!res || !arr)
		goto fail;
	pthread_mutex_lock(&wk->lock);
	v = calloc(wk->nenvs + 1, sizeof(*v));
	if (!v) {
		pthread_mutex_unlock(&wk->lock);
		goto fail;
	}
	for (i = 0; i < wk->nenvs; i++)
		if (!wk->envs[i]->gone)
			v[n++] = wk->envs[i];
	qsort(v, n, sizeof(*v), wake_cmp);
	for (i = 0; i < n; i++) {
		const struct wake_env *e = v[i];
		uint64_t left =
		    e->state == WAKE_FAILED && e->retry_ns > now
			? (e->retry_ns - now + NS_PER_MS - 1) / NS_PER_MS
			: 0;
		json_t *o = json_pack(
		    "{s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
		    "s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
		    "id", e->id, "state", wake_state_name(e->state),
		    "on_demand", 1, "active", (json_int_t)e->active, "tunnels",
		    (json_int_t)e->tunnels, "last_activity",
		    (json_int_t)(e->last_real_ns / 1000000000ULL),
		    "idle_seconds",
		    (json_int_t)(e->active
				     ? 0
				     : (now - e->last_ns) / 1000000000ULL),
		    "idle_timeout_ms", (json_int_t)e->idle_ms, "wakes",
		    (json_int_t)e->wakes, "wakes_ok", (json_int_t)e->wakes_ok,
		    "wakes_failed", (json_int_t)e->wakes_failed,
		    "wakes_pending", (json_int_t)e->wakes_pending,
		    "wakes_throttled", (json_int_t)e->throttled,
		    "wakes_endpoint_failed", (json_int_t)e->endpoint_failed,
		    "sleeps", (json_int_t)e->sleeps, "last_wake_ms",
		    (json_int_t)e->last_wake_ms, "waiters",
		    (json_int_t)e->nwaiters, "consecutive_failures",
		    (json_int_t)e->failures, "backoff_ms",
		    (json_int_t)e->backoff_ms, "retry_in_ms", (json_int_t)left,
		    "backoff_refused", (json_int_t)e->backoff_refused);

		if (o &&
		    (json_object_set_new(
			 o, "idle_timeout_background_ms",
			 json_integer((json_int_t)wake_bg_ms(e))) ||
		     json_object_set_new(o, "other_active",
					 json_integer((json_int_t)e->other)) ||
		     json_object_set_new(
			 o, "app_idle_seconds",
			 json_integer(
			     (json_int_t)(e->active ? 0
						    : (now - e->last_app_ns) /
							  1000000000ULL))) ||
		     json_object_set_new(
			 o, "asleep_refused",
			 json_integer((json_int_t)e->asleep_refused)))) {
			json_decref(o);
			o = NULL;
		}
		if (!o || json_array_append_new(arr, o)) {
			pthread_mutex_unlock(&wk->lock);
			goto fail;
		}
	}
	if (json_object_set_new(res, "wakes_in_flight",
				json_integer((json_int_t)wk->inflight)) ||
	    json_object_set_new(res, "waiting_connections",
				json_integer((json_int_t)wk->nbounded)) ||
	    json_object_set_new(
		res, "max_concurrent",
		json_integer((json_int_t)wk->set.max_concurrent)) ||
	    json_object_set_new(
		res, "retry_max_ms",
		json_integer((json_int_t)wk->set.retry_max_ms))) {
		pthread_mutex_unlock(&wk->lock);
		goto fail;
	}
	pthread_mutex_unlock(&wk->lock);
	free(v);
	v = NULL;
	if (json_object_set_new(res, "environments", arr))
		goto fail_res;
	return res;
fail:
	json_decref(arr);
fail_res:
	free(v);
	json_decref(res);
	return NULL;
}

int wake_metrics(struct wake *wk, struct metrics *m)
{
	static const char *const outcome[] = {
	    [WAKE_R_READY] = "ready",
	    [WAKE_R_PENDING] = "timeout",
	    [WAKE_R_FAILED] = "failed",
	};
	static const char wakes[] = "edge_wakes_total";
	static const char wakes_help[] =
	    "Wakes of on-demand environments, by how they ended";
	static const char envs_help[] = "On-demand environments, by state";
	const char *lab[3] = {"outcome", NULL, NULL};
	const char *slab[3] = {"state", NULL, NULL};
	unsigned i;

	for (i = WAKE_R_READY; i <= WAKE_R_FAILED; i++) {
		lab[1] = outcome[i];
		wk->m_wakes[i] = metrics_counter_new(m, wakes, wakes_help, lab);
		if (!wk->m_wakes[i])
			return -ENOMEM;
	}
	lab[1] = "throttled";
	wk->m_throttled = metrics_counter_new(m, wakes, wakes_help, lab);
	lab[1] = "endpoint_failed";
	wk->m_endpoint_failed = metrics_counter_new(m, wakes, wakes_help, lab);
	wk->m_cold = metrics_histogram_new(
	    m, "edge_wake_cold_start_seconds",
	    "Time from a wake's first request to the environment's endpoint "
	    "accepting",
	    NULL, metrics_duration_bounds_ns, metrics_duration_nbounds,
	    1000000000ULL);
	if (!wk->m_throttled || !wk->m_endpoint_failed || !wk->m_cold)
		return -ENOMEM;
	pthread_mutex_lock(&wk->lock);
	for (i = 0; i < WAKE_NSTATES; i++) {
		slab[1] = wake_state_names[i];
		wk->m_state[i] =
		    metrics_gauge_new(m, "edge_environments", envs_help, slab);
		if (!wk->m_state[i]) {
			pthread_mutex_unlock(&wk->lock);
			return -ENOMEM;
		}
		metrics_gauge_set(wk->m_state[i], (int64_t)wk->nstate[i]);
	}
	pthread_mutex_unlock(&wk->lock);
	return 0;
}
