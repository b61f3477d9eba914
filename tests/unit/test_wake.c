/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_wake.c - wake.c's state machine (docs/wake.md) through its API,
 * with a real control loop (an event_base this test runs), real commands
 * (/bin/sh -c) and a real TCP listener of this process as the woken
 * environment's endpoint: many requests joining one wake, the semaphore
 * (wake_throttled), the deadline (wake_pending), a failing command
 * (wake_failed), the sleep after idle_timeout with no request and no open
 * tunnel, an open tunnel holding the environment awake, a second wake
 * after a sleep, environment_restarting against 502, and the back-off
 * after a failed wake (no command runs during it; it doubles with each
 * failed wake in a row up to wake.retry_max, starts over once a wake
 * serves; a woken endpoint failing its first request fails its wake).
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config_check.h"
#include "wake.h"
#include "unit.h"

#define WAITERS 64

/* What the notify function was told: result per handle (0: nothing). */
static uint64_t told[WAITERS];
static unsigned ntold;

static int test_notify(const struct wake_waiter *wt, uint64_t result)
{
	uint64_t handle = wt->handle;

	ck_assert_uint_lt(handle, WAITERS);
	ck_assert_uint_eq(told[handle], 0); /* once */
	told[handle] = result;
	ntold++;
	return 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A port of 127.0.0.1 nobody listens on (bound, then closed). */
static unsigned free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_ge(s, 0);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &len), 0);
	close(s);
	return ntohs(a.sin_port);
}

/* Listen on 127.0.0.1:port (the environment is up): the socket. */
static int listen_on(unsigned port)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)port);
	ck_assert_int_ge(s, 0);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(s, 128), 0);
	return s;
}

struct fx {
	struct wake *wk;
	struct event_base *base;
	char dir[64]; /* a temporary directory the commands write to */
};

static void fx_init_cap(struct fx *f, const char *command,
			const char *sleep_cmd, uint64_t max_concurrent,
			uint64_t timeout_ms, uint64_t retry_max_ms)
{
	struct config_wake c = {
	    .command = (char *)command,
	    .sleep_command = (char *)sleep_cmd,
	    .max_concurrent = max_concurrent,
	    .timeout_ms = timeout_ms,
	    .probe_interval_ms = 1,
	    .output_max = 4096,
	    .restart_window_ms = 300,
	    .max_waiting_connections = 2,
	    .retry_max_ms = retry_max_ms,
	};

	memset(told, 0, sizeof(told));
	ntold = 0;
	f->base = event_base_new();
	ck_assert_ptr_nonnull(f->base);
	ck_assert_int_eq(wake_new(&c, test_notify, &f->wk), 0);
	ck_assert_int_eq(wake_start(f->wk, f->base), 0);
}

static void fx_init(struct fx *f, const char *command, const char *sleep_cmd,
		    uint64_t max_concurrent, uint64_t timeout_ms)
{
	fx_init_cap(f, command, sleep_cmd, max_concurrent, timeout_ms, 60000);
}

static void fx_free(struct fx *f)
{
	wake_free(f->wk);
	event_base_free(f->base);
}

/* Make environments ids[0..n) of the file on demand, each with one
 * endpoint 127.0.0.1:ports[i] and idle_ms (probed at once). */
/* the environments' idle_timeout_background (fx_envs), 0: none */
static uint64_t fx_idle_bg_ms;

static void fx_envs(struct fx *f, const char *const *ids, const unsigned *ports,
		    size_t n, uint64_t idle_ms)
{
	struct route_src_project p = {.id = (char *)"p", .enabled = true};
	struct route_src_env env[4];
	struct config_addr a[4];
	struct wake_defs *d;
	struct errbuf err;
	char text[32];
	size_t i;

	ck_assert_uint_le(n, 4);
	memset(env, 0, sizeof(env));
	for (i = 0; i < n; i++) {
		snprintf(text, sizeof(text), "127.0.0.1:%u", ports[i]);
		ck_assert_int_eq(config_addr_parse(text, &a[i], &err), 0);
		env[i].id = (char *)ids[i];
		env[i].on_demand = true;
		env[i].idle_timeout_ms = idle_ms;
		env[i].idle_timeout_background_ms = fx_idle_bg_ms;
		env[i].deployment.upstreams = &a[i];
		env[i].deployment.n_upstreams = 1;
	}
	p.envs = env;
	p.n_envs = n;
	d = wake_defs_new(ROUTE_SRC_FILE, &p, 1, NULL, 0, true);
	ck_assert_ptr_nonnull(d);
	ck_assert_int_eq(wake_sync_defs(f->wk, d), 0);
	wake_defs_free(d);
}

/* Run the control loop until *n reaches want or ms pass: true if it did. */
static bool run_until(struct fx *f, const unsigned *n, unsigned want,
		      uint64_t ms)
{
	uint64_t end = now_ms() + ms;

	while (*n < want && now_ms() < end) {
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
	return *n >= want;
}

/* A count that never moves (run_until for a fixed time). */
static const unsigned never_told;

/* Run the control loop for ms. */
static void run_for(struct fx *f, uint64_t ms)
{
	run_until(f, &never_told, 1, ms);
}

/* One of the environment's fields in wake_dump_json. */
static json_int_t env_int(struct fx *f, const char *id, const char *key)
{
	json_t *d = wake_dump_json(f->wk), *e;
	json_int_t v = -1;
	size_t i;

	ck_assert_ptr_nonnull(d);
	json_array_foreach(json_object_get(d, "environments"), i, e)
	{
		if (strcmp(json_string_value(json_object_get(e, "id")), id))
			continue;
		v = json_integer_value(json_object_get(e, key));
	}
	json_decref(d);
	return v;
}

static const char *env_state(struct fx *f, const char *id)
{
	static char st[16];
	json_t *d = wake_dump_json(f->wk), *e;
	size_t i;

	ck_assert_ptr_nonnull(d);
	st[0] = '\0';
	json_array_foreach(json_object_get(d, "environments"), i, e)
	{
		if (strcmp(json_string_value(json_object_get(e, "id")), id))
			continue;
		snprintf(st, sizeof(st), "%s",
			 json_string_value(json_object_get(e, "state")));
	}
	json_decref(d);
	return st;
}

/* Run the control loop until environment id is in state st, or ms pass
 * (a wake's command and probe on a loaded machine): whether it is. */
static bool run_until_state(struct fx *f, const char *id, const char *st,
			    uint64_t ms)
{
	uint64_t end = now_ms() + ms;

	while (strcmp(env_state(f, id), st) && now_ms() < end) {
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
	return !strcmp(env_state(f, id), st);
}

static json_int_t inflight(struct fx *f)
{
	json_t *d = wake_dump_json(f->wk);
	json_int_t v;

	ck_assert_ptr_nonnull(d);
	v = json_integer_value(json_object_get(d, "wakes_in_flight"));
	json_decref(d);
	return v;
}

/* Whether the file at path exists (a command wrote it). */
static bool exists(const char *path)
{
	return access(path, F_OK) == 0;
}

/* ---- the cases ---------------------------------------------------------- */

/* Many requests, one wake: every one joins it and is told once. */
START_TEST(join)
{
	static const char *const ids[] = {"a"};
	struct wake_waiter wt[WAITERS];
	struct wake_env *env[WAITERS];
	unsigned port = free_port(), i;
	struct fx f;
	int s;

	fx_init(&f, "exit 0", "", 8, 5000);
	fx_envs(&f, ids, &port, 1, 60000);
	ck_assert_str_eq(env_state(&f, "a"), "sleeping");
	memset(wt, 0, sizeof(wt));
	for (i = 0; i < WAITERS; i++) {
		wt[i].handle = i;
		ck_assert_int_eq(wake_enter(f.wk, "a", &wt[i], &env[i]),
				 WAKE_WAIT);
		ck_assert_ptr_nonnull(env[i]);
	}
	ck_assert_str_eq(env_state(&f, "a"), "waking");
	ck_assert_int_eq(inflight(&f), 1);
	ck_assert_int_eq(env_int(&f, "a", "waiters"), WAITERS);
	/* the command exits 0: the probe goes on, nobody is told yet */
	run_for(&f, 150);
	ck_assert_uint_eq(ntold, 0);
	s = listen_on(port);
	ck_assert(run_until(&f, &ntold, WAITERS, 2000));
	for (i = 0; i < WAITERS; i++)
		ck_assert_uint_eq(told[i], WAKE_R_READY);
	ck_assert_str_eq(env_state(&f, "a"), "running");
	ck_assert_int_eq(env_int(&f, "a", "wakes"), 1);
	ck_assert_int_eq(env_int(&f, "a", "wakes_ok"), 1);
	ck_assert_int_eq(env_int(&f, "a", "waiters"), 0);
	ck_assert_int_eq(inflight(&f), 0);
	/* running: a later request goes on at once, no wake */
	wt[0].queued = false;
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[0], &env[0]), WAKE_GO);
	wake_leave(f.wk, env[0], &wt[0]);
	for (i = 0; i < WAITERS; i++)
		wake_leave(f.wk, env[i], &wt[i]);
	ck_assert_int_eq(env_int(&f, "a", "active"), 0);
	/* not on demand: go, and no environment to leave */
	ck_assert_int_eq(wake_enter(f.wk, "other", &wt[1], &env[1]), WAKE_GO);
	ck_assert_ptr_null(env[1]);
	close(s);
	fx_free(&f);
}
END_TEST

/* max_concurrent = 1: a second environment's wake finds no slot. */
START_TEST(throttled)
{
	static const char *const ids[] = {"a", "b"};
	struct wake_waiter wt[3];
	struct wake_env *env[3];
	unsigned ports[2] = {free_port(), free_port()};
	struct fx f;
	int s;

	fx_init(&f, "exit 0", "", 1, 5000);
	fx_envs(&f, ids, ports, 2, 60000);
	memset(wt, 0, sizeof(wt));
	wt[1].handle = 1;
	wt[2].handle = 2;
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[0], &env[0]), WAKE_WAIT);
	ck_assert_int_eq(wake_enter(f.wk, "b", &wt[1], &env[1]),
			 WAKE_THROTTLED);
	ck_assert_ptr_null(env[1]);
	ck_assert_str_eq(env_state(&f, "b"), "sleeping");
	ck_assert_int_eq(env_int(&f, "b", "wakes_throttled"), 1);
	/* a's wake ends: its slot is free again, b wakes */
	s = listen_on(ports[0]);
	ck_assert(run_until(&f, &ntold, 1, 2000));
	ck_assert_uint_eq(told[0], WAKE_R_READY);
	ck_assert_int_eq(wake_enter(f.wk, "b", &wt[2], &env[2]), WAKE_WAIT);
	ck_assert_str_eq(env_state(&f, "b"), "waking");
	wake_leave(f.wk, env[2], &wt[2]); /* its client left */
	ck_assert_int_eq(env_int(&f, "b", "waiters"), 0);
	wake_leave(f.wk, env[0], &wt[0]);
	close(s);
	fx_free(&f);
}
END_TEST

/* Bounded waiters (TCP route connections): wake.max_waiting_connections
 * of them at most, every environment's; requests are not bounded here. */
START_TEST(bounded)
{
	static const char *const ids[] = {"a", "b"};
	struct wake_waiter wt[6];
	struct wake_env *env[6];
	unsigned ports[2] = {free_port(), free_port()}, i;
	struct fx f;
	json_t *d;

	fx_init(&f, "exit 0", "", 8, 5000);
	fx_envs(&f, ids, ports, 2, 60000);
	memset(wt, 0, sizeof(wt));
	for (i = 0; i < 6; i++) {
		wt[i].handle = i;
		wt[i].bounded = i != 3;
	}
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[0], &env[0]), WAKE_WAIT);
	ck_assert_int_eq(wake_enter(f.wk, "b", &wt[1], &env[1]), WAKE_WAIT);
	/* two wait: a third bounded one is refused, on either environment */
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[2], &env[2]),
			 WAKE_THROTTLED);
	ck_assert_ptr_null(env[2]);
	/* a request (unbounded) still joins */
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[3], &env[3]), WAKE_WAIT);
	d = wake_dump_json(f.wk);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(d, "waiting_connections")), 2);
	json_decref(d);
	/* one leaves: another may wait */
	wake_leave(f.wk, env[0], &wt[0]);
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[4], &env[4]), WAKE_WAIT);
	ck_assert_int_eq(wake_enter(f.wk, "b", &wt[5], &env[5]),
			 WAKE_THROTTLED);
	wake_leave(f.wk, env[1], &wt[1]);
	wake_leave(f.wk, env[3], &wt[3]);
	wake_leave(f.wk, env[4], &wt[4]);
	ck_assert_int_eq(inflight(&f), 2); /* both wakes go on */
	fx_free(&f);
}
END_TEST

/* Nobody listens before wake.timeout: wake_pending, the command killed,
 * the environment sleeping; the next request starts a new wake. */
START_TEST(timeout)
{
	static const char *const ids[] = {"a"};
	struct wake_waiter wt[2];
	struct wake_env *env[2];
	unsigned port = free_port();
	uint64_t t0;
	struct fx f;

	fx_init(&f, "exec sleep 30", "", 8, 300);
	fx_envs(&f, ids, &port, 1, 60000);
	memset(wt, 0, sizeof(wt));
	wt[1].handle = 1;
	t0 = now_ms();
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[0], &env[0]), WAKE_WAIT);
	ck_assert(run_until(&f, &ntold, 1, 3000));
	ck_assert_uint_ge(now_ms() - t0, 290);
	ck_assert_uint_eq(told[0], WAKE_R_PENDING);
	ck_assert_str_eq(env_state(&f, "a"), "wake_failed");
	ck_assert_int_eq(env_int(&f, "a", "wakes_pending"), 1);
	ck_assert_int_eq(inflight(&f), 0);
	wake_leave(f.wk, env[0], &wt[0]);
	/* a timed-out wake is a failed one: its back-off, then a new wake */
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[1], &env[1]), WAKE_BACKOFF);
	ck_assert_uint_eq(wt[1].retry_s, 1);
	ck_assert(run_until(&f, &never_told, 1, 1500) == false);
	ck_assert_str_eq(env_state(&f, "a"), "sleeping");
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[1], &env[1]), WAKE_WAIT);
	ck_assert_int_eq(env_int(&f, "a", "wakes"), 2);
	ck_assert(run_until(&f, &ntold, 2, 3000));
	ck_assert_uint_eq(told[1], WAKE_R_PENDING);
	ck_assert_int_eq(env_int(&f, "a", "backoff_ms"), 2000);
	wake_leave(f.wk, env[1], &wt[1]);
	fx_free(&f);
}
END_TEST

/* The command exits non-zero before the probe answers: wake_failed at
 * once (well before wake.timeout). */
START_TEST(failed)
{
	static const char *const ids[] = {"a"};
	struct wake_waiter wt = {0};
	struct wake_env *env;
	unsigned port = free_port();
	uint64_t t0;
	struct fx f;

	fx_init(&f, "echo cannot wake %s; exit 3", "", 8, 5000);
	fx_envs(&f, ids, &port, 1, 60000);
	t0 = now_ms();
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt, &env), WAKE_WAIT);
	ck_assert(run_until(&f, &ntold, 1, 3000));
	ck_assert_uint_lt(now_ms() - t0, 2000);
	ck_assert_uint_eq(told[0], WAKE_R_FAILED);
	ck_assert_str_eq(env_state(&f, "a"), "wake_failed");
	ck_assert_int_eq(env_int(&f, "a", "wakes_failed"), 1);
	ck_assert_int_eq(inflight(&f), 0);
	wake_leave(f.wk, env, &wt);
	fx_free(&f);
}
END_TEST

/*
 * Idle: a running environment with a request under way, then an open
 * tunnel, stays running past its idle_timeout; with neither, the sleep
 * command runs after idle_timeout; the next request wakes it again.
 */
START_TEST(idle_sleep)
{
	static const char *const ids[] = {"a"};
	struct wake_waiter wt[2];
	struct wake_env *env[2];
	unsigned port = free_port(), slept = 0;
	char cmd[128], mark[96];
	struct fx f;
	int s = listen_on(port);

	snprintf(f.dir, sizeof(f.dir), "/tmp/test_wake.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(f.dir));
	snprintf(mark, sizeof(mark), "%s/slept", f.dir);
	snprintf(cmd, sizeof(cmd), "echo %%s >%s/slept", f.dir);
	fx_init(&f, "exit 0", cmd, 8, 2000);
	fx_envs(&f, ids, &port, 1, 300);
	ck_assert_str_eq(env_state(&f, "a"), "running"); /* probed at start */
	memset(wt, 0, sizeof(wt));
	wt[1].handle = 1;
	/* a request under way: awake however long it takes */
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[0], &env[0]), WAKE_GO);
	run_for(&f, 700);
	ck_assert_str_eq(env_state(&f, "a"), "running");
	/* its tunnel open: still awake */
	wake_tunnel(f.wk, env[0], 1, WAKE_CLS_APP);
	ck_assert_int_eq(env_int(&f, "a", "tunnels"), 1);
	run_for(&f, 700);
	ck_assert_str_eq(env_state(&f, "a"), "running");
	ck_assert_int_eq(env_int(&f, "a", "sleeps"), 0);
	ck_assert(!exists(mark));
	/* closed: asleep once idle_timeout has passed, not before */
	wake_tunnel(f.wk, env[0], -1, WAKE_CLS_APP);
	wake_leave(f.wk, env[0], &wt[0]);
	run_for(&f, 150);
	ck_assert_str_eq(env_state(&f, "a"), "running");
	while (!exists(mark) && slept++ < 2000) {
		event_base_loop(f.base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
	ck_assert(exists(mark));
	ck_assert_str_eq(env_state(&f, "a"), "sleeping");
	ck_assert_int_eq(env_int(&f, "a", "sleeps"), 1);
	/* a second wake: the endpoint still listens, ready at once */
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[1], &env[1]), WAKE_WAIT);
	ck_assert(run_until(&f, &ntold, 1, 2000));
	ck_assert_uint_eq(told[1], WAKE_R_READY);
	ck_assert_int_eq(env_int(&f, "a", "wakes"), 1);
	ck_assert_int_eq(env_int(&f, "a", "wakes_ok"), 1);
	ck_assert_str_eq(env_state(&f, "a"), "running");
	wake_leave(f.wk, env[1], &wt[1]);
	close(s);
	unlink(mark);
	rmdir(f.dir);
	fx_free(&f);
}
END_TEST

/* One request of class cls entered and left (wake_enter's answer). */
static int one_request(struct fx *f, struct wake_waiter *wt, unsigned cls)
{
	struct wake_env *env;
	int rc;

	memset(wt, 0, sizeof(*wt));
	wt->cls = (uint8_t)cls;
	rc = wake_enter(f->wk, "a", wt, &env);
	if (rc == WAKE_GO)
		wake_leave(f->wk, env, wt);
	return rc;
}

static const char *env_state(struct fx *f, const char *id);

/* Requests of class cls every 50 ms for ms, or until "a" sleeps (the
 * next one would wake it, but for wake = false). */
static void requests_for(struct fx *f, unsigned cls, uint64_t ms)
{
	struct wake_waiter wt;
	uint64_t end = now_ms() + ms;

	while (now_ms() < end) {
		if (cls != WAKE_CLS_PASSIVE &&
		    strcmp(env_state(f, "a"), "sleeping") == 0)
			return;
		one_request(f, &wt, cls);
		run_for(f, 50);
	}
}

/*
 * Activity classes (docs/wake.md): wake = false requests are served
 * while the environment runs and never keep it awake; asleep, they get
 * WAKE_ASLEEP and wake nothing. Background requests keep it awake past
 * idle_timeout only until idle_timeout_background after the last app
 * activity (300 ms and 1 s here), in flight or one after another; with
 * no idle_timeout_background they count for no longer than idle_timeout.
 */
START_TEST(classes)
{
	static const char *const ids[] = {"a"};
	struct wake_waiter wt, hold;
	struct wake_env *env;
	json_int_t refused;
	unsigned port = free_port();
	struct fx f;
	int s = listen_on(port);

	fx_idle_bg_ms = 1000;
	fx_init(&f, "exit 0", "", 8, 2000);
	fx_envs(&f, ids, &port, 1, 300);
	ck_assert_str_eq(env_state(&f, "a"), "running");
	ck_assert_int_eq(env_int(&f, "a", "idle_timeout_background_ms"), 1000);
	/* wake = false, one every 50 ms: served, asleep anyway by 1 s */
	ck_assert_int_eq(one_request(&f, &wt, WAKE_CLS_PASSIVE), WAKE_GO);
	requests_for(&f, WAKE_CLS_PASSIVE, 900);
	ck_assert_str_eq(env_state(&f, "a"), "sleeping");
	ck_assert_int_eq(env_int(&f, "a", "sleeps"), 1);
	/* asleep: refused (so were the last ones above), nothing woken */
	refused = env_int(&f, "a", "asleep_refused");
	ck_assert_int_gt(refused, 0);
	ck_assert_int_eq(one_request(&f, &wt, WAKE_CLS_PASSIVE), WAKE_ASLEEP);
	run_for(&f, 100);
	ck_assert_str_eq(env_state(&f, "a"), "sleeping");
	ck_assert_int_eq(env_int(&f, "a", "wakes"), 0);
	ck_assert_int_eq(env_int(&f, "a", "asleep_refused"), refused + 1);
	ck_assert_int_eq(env_int(&f, "a", "active"), 0);
	/* background wakes it (its wake is app activity) */
	memset(&wt, 0, sizeof(wt));
	wt.cls = WAKE_CLS_BACKGROUND;
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt, &env), WAKE_WAIT);
	ck_assert(run_until(&f, &ntold, 1, 2000));
	ck_assert_uint_eq(told[0], WAKE_R_READY);
	wake_leave(f.wk, env, &wt);
	/* background every 50 ms: awake past idle_timeout (300 ms) ... */
	requests_for(&f, WAKE_CLS_BACKGROUND, 700);
	ck_assert_str_eq(env_state(&f, "a"), "running");
	/* ... until 1 s after the wake, however it goes on */
	requests_for(&f, WAKE_CLS_BACKGROUND, 800);
	ck_assert_str_eq(env_state(&f, "a"), "sleeping");
	ck_assert_int_eq(env_int(&f, "a", "sleeps"), 2);
	/* woken by an app request; a background one held in flight keeps
	 * it awake past idle_timeout, not past 1 s */
	memset(&wt, 0, sizeof(wt));
	wt.handle = 1;
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt, &env), WAKE_WAIT);
	ck_assert(run_until(&f, &ntold, 2, 2000));
	ck_assert_uint_eq(told[1], WAKE_R_READY);
	memset(&hold, 0, sizeof(hold));
	hold.cls = WAKE_CLS_BACKGROUND;
	ck_assert_int_eq(wake_enter(f.wk, "a", &hold, &env), WAKE_GO);
	wake_leave(f.wk, env, &wt); /* the app request's end */
	run_for(&f, 700);
	ck_assert_str_eq(env_state(&f, "a"), "running");
	ck_assert_int_eq(env_int(&f, "a", "other_active"), 1);
	run_for(&f, 800);
	ck_assert_str_eq(env_state(&f, "a"), "sleeping");
	wake_leave(f.wk, env, &hold);
	fx_free(&f);

	/* no idle_timeout_background: background counts for idle_timeout */
	fx_idle_bg_ms = 0;
	fx_init(&f, "exit 0", "", 8, 2000);
	fx_envs(&f, ids, &port, 1, 300);
	ck_assert_str_eq(env_state(&f, "a"), "running");
	requests_for(&f, WAKE_CLS_BACKGROUND, 800);
	ck_assert_str_eq(env_state(&f, "a"), "sleeping");
	fx_free(&f);
	close(s);
}
END_TEST

/* The database's side as wake sees it: the sleeps sent, the last ask's
 * number (answered db_ask_rc), the failed wakes sent. */
static unsigned db_sleeps, db_fails;
static uint64_t db_seq;
static int db_ask_rc = -ECONNREFUSED;

static int db_ask(void *arg, const char *env_id, uint64_t seq)
{
	(void)arg;
	(void)env_id;
	db_seq = seq;
	return db_ask_rc;
}

static void db_failed(void *arg, const char *env_id, uint64_t retry_max_ms)
{
	(void)arg;
	(void)env_id;
	ck_assert_uint_eq(retry_max_ms, 60000);
	db_fails++;
}

static void db_confirmed(void *arg, const char *env_id)
{
	(void)arg;
	(void)env_id;
}

static void db_gave_up(void *arg, const char *env_id, int64_t req_id)
{
	(void)arg;
	(void)env_id;
	(void)req_id;
}

static void db_sleep(void *arg, const char *env_id, uint64_t idle_ms)
{
	(void)arg;
	(void)env_id;
	(void)idle_ms;
	db_sleeps++;
}

static int db_activity(void *arg, const struct wake_activity *v, size_t n)
{
	(void)arg;
	(void)v;
	(void)n;
	return 0;
}

static const struct wake_db_ops db_ops = {
    .ask = db_ask,
    .gave_up = db_gave_up,
    .failed = db_failed,
    .confirmed = db_confirmed,
    .sleep = db_sleep,
    .activity = db_activity,
};

/* The database's project p: environment "a" on demand at 127.0.0.1:port
 * (with_a), or none (it goes). */
static void fx_db_envs(struct fx *f, unsigned port, bool with_a)
{
	struct route_src_project p = {.id = (char *)"p", .enabled = true};
	struct route_src_env env;
	struct config_addr a;
	struct wake_defs *d;
	struct errbuf err;
	char text[32];

	memset(&env, 0, sizeof(env));
	snprintf(text, sizeof(text), "127.0.0.1:%u", port);
	ck_assert_int_eq(config_addr_parse(text, &a, &err), 0);
	env.id = (char *)"a";
	env.on_demand = true;
	env.idle_timeout_ms = 200;
	env.deployment.upstreams = &a;
	env.deployment.n_upstreams = 1;
	p.envs = &env;
	p.n_envs = with_a ? 1 : 0;
	d = wake_defs_new(ROUTE_SRC_DB, &p, 1, NULL, 0, true);
	ck_assert_ptr_nonnull(d);
	ck_assert_int_eq(wake_sync_defs(f->wk, d), 0);
	wake_defs_free(d);
}

/* A database environment whose sleep lost (its retry pending) leaves on
 * demand and comes back: its losses start again from none (the first
 * loss after it is the first, logged; no retry left over). */
START_TEST(sleep_lost_gone_back)
{
	unsigned port = free_port();
	struct fx f;
	int s = listen_on(port);

	db_sleeps = 0;
	fx_init(&f, "exit 0", NULL, 8, 2000);
	wake_set_db(f.wk, &db_ops, NULL);
	fx_db_envs(&f, port, true);
	ck_assert_str_eq(env_state(&f, "a"), "running");
	ck_assert(run_until(&f, &db_sleeps, 1, 3000));
	ck_assert_str_eq(env_state(&f, "a"), "sleeping");
	ck_assert_uint_eq(wake_db_sleep_lost(f.wk, "a"), 1);
	ck_assert_uint_eq(wake_db_sleep_lost(f.wk, "a"), 2);
	/* on_demand off (gone), on again: running (the endpoint accepts) */
	fx_db_envs(&f, port, false);
	ck_assert_uint_eq(wake_db_sleep_lost(f.wk, "a"), 0);
	fx_db_envs(&f, port, true);
	ck_assert_str_eq(env_state(&f, "a"), "running");
	ck_assert(run_until(&f, &db_sleeps, 2, 3000));
	ck_assert_str_eq(env_state(&f, "a"), "sleeping");
	ck_assert_uint_eq(wake_db_sleep_lost(f.wk, "a"), 1);
	close(s);
	fx_free(&f);
}
END_TEST

/*
 * A database environment: the database unreachable fails a wake with no
 * back-off (the next request asks again); its woken endpoint failing its
 * first request is sent to the database; the fleet's back-off in the
 * ask's answer holds this host too; a wake failed by the orchestrator
 * backs off as the database does, from the fleet's failures in a row.
 */
START_TEST(db_backoff)
{
	struct wake_waiter wt[6];
	struct wake_env *env[6];
	unsigned port = free_port(), i;
	struct fx f;
	int s;

	db_fails = 0;
	db_ask_rc = -ECONNREFUSED;
	fx_init(&f, "exit 0", NULL, 8, 3000);
	wake_set_db(f.wk, &db_ops, NULL);
	fx_db_envs(&f, port, true);
	ck_assert_str_eq(env_state(&f, "a"), "sleeping");
	memset(wt, 0, sizeof(wt));
	for (i = 0; i < 6; i++)
		wt[i].handle = i;
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[0], &env[0]), WAKE_WAIT);
	ck_assert(run_until(&f, &ntold, 1, 3000));
	ck_assert_uint_eq(told[0], WAKE_R_FAILED);
	wake_leave(f.wk, env[0], &wt[0]);
	ck_assert_str_eq(env_state(&f, "a"), "sleeping");
	/* the database answers: the endpoint accepts, its first request
	 * is reset */
	db_ask_rc = 0;
	s = listen_on(port);
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[1], &env[1]), WAKE_WAIT);
	ck_assert(run_until(&f, &ntold, 2, 3000));
	ck_assert_uint_eq(told[1], WAKE_R_READY);
	wake_answered(f.wk, env[1], false);
	ck_assert(run_until(&f, &db_fails, 1, 1000));
	ck_assert_str_eq(env_state(&f, "a"), "wake_failed");
	wake_db_asked(f.wk, "a", db_seq, 5, 0, 0, 0); /* late: given up */
	wake_leave(f.wk, env[1], &wt[1]);
	close(s);
	/* the fleet's back-off, from the ask's answer */
	run_for(&f, 1100);
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[2], &env[2]), WAKE_WAIT);
	run_for(&f, 20);
	wake_db_asked(f.wk, "a", db_seq, 0, 0, 500, 2);
	ck_assert(run_until(&f, &ntold, 3, 1000));
	ck_assert_uint_eq(told[2], WAKE_R_FAILED);
	wake_leave(f.wk, env[2], &wt[2]);
	ck_assert_str_eq(env_state(&f, "a"), "wake_failed");
	ck_assert_int_eq(env_int(&f, "a", "backoff_ms"), 500);
	ck_assert_int_eq(env_int(&f, "a", "consecutive_failures"), 2);
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[3], &env[3]), WAKE_BACKOFF);
	/* the orchestrator fails the next: 2^2 s, as the database's
	 * trigger computes it */
	run_for(&f, 600);
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[4], &env[4]), WAKE_WAIT);
	run_for(&f, 20);
	wake_db_asked(f.wk, "a", db_seq, 0, 0, 0, 2);
	wake_db_changed(f.wk, "a", 9, "failed");
	ck_assert(run_until(&f, &ntold, 4, 1000));
	ck_assert_uint_eq(told[4], WAKE_R_FAILED);
	wake_leave(f.wk, env[4], &wt[4]);
	ck_assert_int_eq(env_int(&f, "a", "backoff_ms"), 4000);
	ck_assert_int_eq(env_int(&f, "a", "consecutive_failures"), 3);
	ck_assert_uint_eq(db_fails, 1);
	/* another host's failed endpoint: a longer back-off is taken, a
	 * shorter one changes nothing */
	wake_db_failed(f.wk, "a", 100);
	ck_assert_int_eq(env_int(&f, "a", "backoff_ms"), 4000);
	wake_db_failed(f.wk, "a", 9000);
	ck_assert_int_eq(env_int(&f, "a", "backoff_ms"), 9000);
	ck_assert_int_gt(env_int(&f, "a", "retry_in_ms"), 8000);
	db_ask_rc = -ECONNREFUSED;
	fx_free(&f);
}
END_TEST

/* An idle_timeout of 0 never sleeps. */
START_TEST(idle_never)
{
	static const char *const ids[] = {"a"};
	unsigned port = free_port();
	struct fx f;
	int s = listen_on(port);

	fx_init(&f, "exit 0", "", 8, 2000);
	fx_envs(&f, ids, &port, 1, 0);
	run_for(&f, 500);
	ck_assert_str_eq(env_state(&f, "a"), "running");
	ck_assert_int_eq(env_int(&f, "a", "sleeps"), 0);
	close(s);
	fx_free(&f);
}
END_TEST

/* Every endpoint refused: environment_restarting just after a wake that
 * served (and a new wake), 502 once past wake.restart_window. */
START_TEST(refused)
{
	static const char *const ids[] = {"a"};
	struct wake_waiter wt = {0};
	struct wake_env *env;
	unsigned port = free_port(), retry;
	struct fx f;
	int s = listen_on(port);

	fx_init(&f, "exit 0", "", 8, 2000);
	fx_envs(&f, ids, &port, 1, 60000);
	/* running since start (counted as past its restart window) */
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt, &env), WAKE_GO);
	ck_assert_int_eq(wake_refused(f.wk, env, &wt, false, &retry),
			 WAKE_DOWN);
	ck_assert_str_eq(env_state(&f, "a"), "running");
	/* the request had waited for a wake: restarting, and a wake */
	ck_assert_int_eq(wake_refused(f.wk, env, &wt, true, &retry),
			 WAKE_RESTARTING);
	ck_assert_uint_eq(retry, 1);
	ck_assert_str_eq(env_state(&f, "a"), "waking");
	wake_leave(f.wk, env, &wt);
	ck_assert(run_until_state(&f, "a", "running", 3000));
	/* its first request served: a refusal within the window is a
	 * restart (and a wake), not a failed wake */
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt, &env), WAKE_GO);
	wake_answered(f.wk, env, true);
	ck_assert_int_eq(wake_refused(f.wk, env, &wt, false, &retry),
			 WAKE_RESTARTING);
	ck_assert(run_until_state(&f, "a", "running", 3000));
	wake_answered(f.wk, env, true);
	run_for(&f, 350);
	ck_assert_int_eq(wake_refused(f.wk, env, &wt, false, &retry),
			 WAKE_DOWN);
	ck_assert_int_eq(env_int(&f, "a", "wakes_endpoint_failed"), 0);
	wake_leave(f.wk, env, &wt);
	close(s);
	fx_free(&f);
}
END_TEST

/* How many lines path holds (a command appends one per run). */
static unsigned lines(const char *path)
{
	FILE *fp = fopen(path, "r");
	unsigned n = 0;
	int ch;

	if (!fp)
		return 0;
	while ((ch = fgetc(fp)) != EOF)
		n += ch == '\n';
	fclose(fp);
	return n;
}

/* A temporary directory for f's commands; *runs its runs' file. */
static void fx_dir(struct fx *f, char *runs, size_t len)
{
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_wake.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(f->dir));
	snprintf(runs, len, "%s/runs", f->dir);
}

static void fx_dir_rm(struct fx *f)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	ck_assert_int_eq(system(cmd), 0);
}

/*
 * A failed wake: wake_failed for a back-off of 1 s during which every
 * request (and a TCP route's connection) gets WAKE_BACKOFF with its
 * seconds left and no command runs; then a new wake, and a second
 * failure doubles it (2 s); a wake that serves its first request starts
 * the count over (1 s again after the next failure).
 */
START_TEST(backoff)
{
	static const char *const ids[] = {"a"};
	struct wake_waiter wt[8];
	struct wake_env *env[8];
	unsigned port = free_port(), i, retry;
	char cmd[256], runs[96], ok[96];
	struct fx f = {0};
	int s;

	fx_dir(&f, runs, sizeof(runs));
	snprintf(ok, sizeof(ok), "%s/ok", f.dir);
	snprintf(cmd, sizeof(cmd), "echo run >>%s; test -e %s || exit 3", runs,
		 ok);
	fx_init(&f, cmd, "", 8, 3000);
	fx_envs(&f, ids, &port, 1, 300);
	memset(wt, 0, sizeof(wt));
	for (i = 0; i < 8; i++)
		wt[i].handle = i;
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[0], &env[0]), WAKE_WAIT);
	ck_assert(run_until(&f, &ntold, 1, 3000));
	ck_assert_uint_eq(told[0], WAKE_R_FAILED);
	wake_leave(f.wk, env[0], &wt[0]);
	ck_assert_str_eq(env_state(&f, "a"), "wake_failed");
	ck_assert_int_eq(env_int(&f, "a", "backoff_ms"), 1000);
	ck_assert_int_eq(env_int(&f, "a", "consecutive_failures"), 1);
	ck_assert_int_gt(env_int(&f, "a", "retry_in_ms"), 0);
	ck_assert_int_le(env_int(&f, "a", "retry_in_ms"), 1000);
	ck_assert_uint_eq(wake_retry_after(f.wk, env[0]), 1);
	/* during it: refused at once, requests and connections, no run */
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[1], &env[1]), WAKE_BACKOFF);
	ck_assert_ptr_null(env[1]);
	ck_assert_uint_eq(wt[1].retry_s, 1);
	wt[2].bounded = true;
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[2], &env[2]), WAKE_BACKOFF);
	ck_assert_int_eq(env_int(&f, "a", "backoff_refused"), 2);
	ck_assert_int_eq(env_int(&f, "a", "wakes"), 1);
	run_for(&f, 300);
	ck_assert_uint_eq(lines(runs), 1);
	/* over: asleep, and the next request wakes it; failing again
	 * doubles the back-off */
	run_for(&f, 1100);
	ck_assert_str_eq(env_state(&f, "a"), "sleeping");
	ck_assert_int_eq(env_int(&f, "a", "retry_in_ms"), 0);
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[3], &env[3]), WAKE_WAIT);
	ck_assert(run_until(&f, &ntold, 2, 3000));
	ck_assert_uint_eq(told[3], WAKE_R_FAILED);
	wake_leave(f.wk, env[3], &wt[3]);
	ck_assert_uint_eq(lines(runs), 2);
	ck_assert_int_eq(env_int(&f, "a", "backoff_ms"), 2000);
	ck_assert_int_eq(env_int(&f, "a", "consecutive_failures"), 2);
	ck_assert_uint_eq(wake_retry_after(f.wk, env[3]), 2);
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[4], &env[4]), WAKE_BACKOFF);
	ck_assert_uint_eq(wt[4].retry_s, 2);
	ck_assert_int_eq(wake_refused(f.wk, env[3], &wt[3], true, &retry),
			 WAKE_REFUSED_FAILED);
	ck_assert_uint_eq(retry, 2);
	/* fixed: the wake after the back-off succeeds and serves */
	ck_assert_int_eq(close(open(ok, O_CREAT | O_WRONLY, 0600)), 0);
	s = listen_on(port);
	run_for(&f, 2400);
	ck_assert_str_eq(env_state(&f, "a"), "sleeping");
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[5], &env[5]), WAKE_WAIT);
	ck_assert(run_until(&f, &ntold, 3, 3000));
	ck_assert_uint_eq(told[5], WAKE_R_READY);
	ck_assert_int_eq(env_int(&f, "a", "consecutive_failures"), 2);
	wake_answered(f.wk, env[5], true);
	ck_assert_int_eq(env_int(&f, "a", "consecutive_failures"), 0);
	wake_leave(f.wk, env[5], &wt[5]);
	/* idle (300 ms): asleep; broken again: the back-off starts over */
	close(s);
	unlink(ok);
	run_for(&f, 700);
	ck_assert_str_eq(env_state(&f, "a"), "sleeping");
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[6], &env[6]), WAKE_WAIT);
	ck_assert(run_until(&f, &ntold, 4, 3000));
	ck_assert_uint_eq(told[6], WAKE_R_FAILED);
	wake_leave(f.wk, env[6], &wt[6]);
	ck_assert_int_eq(env_int(&f, "a", "backoff_ms"), 1000);
	ck_assert_uint_eq(lines(runs), 4);
	fx_free(&f);
	fx_dir_rm(&f);
}
END_TEST

/* wake.retry_max caps the back-off: 1 s, then 1 s again at 1 s. */
START_TEST(backoff_cap)
{
	static const char *const ids[] = {"a"};
	struct wake_waiter wt[2];
	struct wake_env *env[2];
	unsigned port = free_port();
	struct fx f;

	fx_init_cap(&f, "exit 3", "", 8, 3000, 1000);
	fx_envs(&f, ids, &port, 1, 60000);
	memset(wt, 0, sizeof(wt));
	wt[1].handle = 1;
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[0], &env[0]), WAKE_WAIT);
	ck_assert(run_until(&f, &ntold, 1, 3000));
	wake_leave(f.wk, env[0], &wt[0]);
	run_for(&f, 1300);
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[1], &env[1]), WAKE_WAIT);
	ck_assert(run_until(&f, &ntold, 2, 3000));
	wake_leave(f.wk, env[1], &wt[1]);
	ck_assert_str_eq(env_state(&f, "a"), "wake_failed");
	ck_assert_int_eq(env_int(&f, "a", "consecutive_failures"), 2);
	ck_assert_int_eq(env_int(&f, "a", "backoff_ms"), 1000);
	fx_free(&f);
}
END_TEST

/* A reload that lowers wake.retry_max shortens a back-off running longer
 * than the new cap: the operator's lever once the environment is fixed. */
START_TEST(backoff_reload)
{
	static const char *const ids[] = {"a"};
	struct config_wake c = {.command = (char *)"exit 3",
				.sleep_command = (char *)"",
				.max_concurrent = 8,
				.timeout_ms = 3000,
				.probe_interval_ms = 1,
				.output_max = 4096,
				.restart_window_ms = 300,
				.max_waiting_connections = 2,
				.retry_max_ms = 1000};
	struct wake_waiter wt[3];
	struct wake_env *env[3];
	unsigned port = free_port();
	struct fx f;

	fx_init_cap(&f, "exit 3", "", 8, 3000, 60000);
	fx_envs(&f, ids, &port, 1, 60000);
	memset(wt, 0, sizeof(wt));
	wt[1].handle = 1;
	wt[2].handle = 2;
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[0], &env[0]), WAKE_WAIT);
	ck_assert(run_until(&f, &ntold, 1, 3000));
	wake_leave(f.wk, env[0], &wt[0]);
	run_for(&f, 1100);
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[1], &env[1]), WAKE_WAIT);
	ck_assert(run_until(&f, &ntold, 2, 3000));
	wake_leave(f.wk, env[1], &wt[1]);
	ck_assert_int_eq(env_int(&f, "a", "backoff_ms"), 2000);
	ck_assert_int_gt(env_int(&f, "a", "retry_in_ms"), 1000);
	/* retry_max 1 s from now on: 1 s left at most */
	ck_assert_int_eq(wake_configure(f.wk, &c), 0);
	ck_assert_str_eq(env_state(&f, "a"), "wake_failed");
	ck_assert_int_eq(env_int(&f, "a", "backoff_ms"), 1000);
	ck_assert_int_le(env_int(&f, "a", "retry_in_ms"), 1000);
	ck_assert_int_eq(env_int(&f, "a", "consecutive_failures"), 2);
	run_for(&f, 1100);
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[2], &env[2]), WAKE_WAIT);
	ck_assert(run_until(&f, &ntold, 3, 3000));
	wake_leave(f.wk, env[2], &wt[2]);
	ck_assert_int_eq(env_int(&f, "a", "backoff_ms"), 1000);
	fx_free(&f);
}
END_TEST

/*
 * The woken endpoint fails its first request (reset before a response
 * head): the wake failed: wake_failed with its back-off, the wake's
 * command (still running: the backend) killed, the sleep command run;
 * a refusal of a woken request fails its wake the same way, with no new
 * wake, and so does one of a request that entered before the failure,
 * past the back-off. A verdict after the first changes nothing.
 */
START_TEST(endpoint_failed)
{
	static const char *const ids[] = {"a"};
	struct wake_waiter wt[4];
	struct wake_env *env[4];
	unsigned port = free_port(), retry;
	char cmd[512], slp[256], runs[96], pidf[96], slept[96];
	struct fx f = {0};
	FILE *fp;
	int s, pid = 0;

	fx_dir(&f, runs, sizeof(runs));
	snprintf(pidf, sizeof(pidf), "%s/pid", f.dir);
	snprintf(slept, sizeof(slept), "%s/slept", f.dir);
	snprintf(cmd, sizeof(cmd),
		 "echo run >>%s; echo $$ >%s.t; mv %s.t %s; "
		 "exec sleep 30",
		 runs, pidf, pidf, pidf);
	snprintf(slp, sizeof(slp), "echo %%s >>%s", slept);
	fx_init(&f, cmd, slp, 8, 3000);
	fx_envs(&f, ids, &port, 1, 60000);
	memset(wt, 0, sizeof(wt));
	wt[1].handle = 1;
	wt[2].handle = 2;
	wt[3].handle = 3;
	/* asleep (nothing listened when it was probed): wake it; its
	 * endpoint accepts once the command runs */
	s = listen_on(port);
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[0], &env[0]), WAKE_WAIT);
	ck_assert(run_until(&f, &ntold, 1, 3000));
	ck_assert_uint_eq(told[0], WAKE_R_READY);
	for (int i = 0; i < 2000 && !exists(pidf); i++)
		run_for(&f, 1);
	fp = fopen(pidf, "r");
	ck_assert_ptr_nonnull(fp);
	ck_assert_int_eq(fscanf(fp, "%d", &pid), 1);
	fclose(fp);
	ck_assert_int_eq(kill(pid, 0), 0);
	/* its first request is reset */
	wake_answered(f.wk, env[0], false);
	wake_answered(f.wk, env[0], true); /* too late */
	ck_assert_str_eq(env_state(&f, "a"), "wake_failed");
	ck_assert_int_eq(env_int(&f, "a", "wakes_endpoint_failed"), 1);
	ck_assert_int_eq(env_int(&f, "a", "backoff_ms"), 1000);
	ck_assert_int_eq(wake_refused(f.wk, env[0], &wt[0], true, &retry),
			 WAKE_REFUSED_FAILED);
	ck_assert_uint_eq(retry, 1);
	wake_leave(f.wk, env[0], &wt[0]);
	for (int i = 0; i < 2000 && (!exists(slept) || kill(pid, 0) == 0); i++)
		run_for(&f, 1);
	ck_assert(exists(slept));
	ck_assert_int_ne(kill(pid, 0), 0); /* killed */
	ck_assert_int_eq(env_int(&f, "a", "wakes"), 1);
	ck_assert_uint_eq(lines(runs), 1);
	/* after the back-off: a woken request refused fails the wake too,
	 * with no new wake */
	run_for(&f, 1100);
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[1], &env[1]), WAKE_WAIT);
	ck_assert(run_until(&f, &ntold, 2, 3000));
	ck_assert_uint_eq(told[1], WAKE_R_READY);
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[2], &env[2]), WAKE_GO);
	ck_assert_int_eq(wake_refused(f.wk, env[1], &wt[1], true, &retry),
			 WAKE_REFUSED_FAILED);
	ck_assert_uint_eq(retry, 2);
	ck_assert_int_eq(wake_refused(f.wk, env[2], &wt[2], false, &retry),
			 WAKE_REFUSED_FAILED);
	ck_assert_str_eq(env_state(&f, "a"), "wake_failed");
	ck_assert_int_eq(env_int(&f, "a", "wakes"), 2);
	ck_assert_int_eq(env_int(&f, "a", "wakes_endpoint_failed"), 2);
	ck_assert_int_eq(env_int(&f, "a", "backoff_ms"), 2000);
	ck_assert_int_eq(wake_enter(f.wk, "a", &wt[3], &env[3]), WAKE_BACKOFF);
	wake_leave(f.wk, env[1], &wt[1]);
	/* past the back-off, a request that entered before the failure
	 * (sent to the endpoint then) is refused: no new wake for it */
	run_for(&f, 2300);
	ck_assert_str_eq(env_state(&f, "a"), "sleeping");
	ck_assert_int_eq(wake_refused(f.wk, env[2], &wt[2], false, &retry),
			 WAKE_REFUSED_FAILED);
	ck_assert_str_eq(env_state(&f, "a"), "sleeping");
	wake_leave(f.wk, env[2], &wt[2]);
	ck_assert_int_eq(env_int(&f, "a", "wakes"), 2);
	/* (the second command may have been killed before it wrote) */
	ck_assert_uint_le(lines(runs), 2);
	close(s);
	fx_free(&f);
	fx_dir_rm(&f);
}
END_TEST

static Suite *wake_suite(void)
{
	Suite *s = suite_create("wake");
	TCase *tc = tcase_create("state");

	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, join);
	tcase_add_test(tc, sleep_lost_gone_back);
	tcase_add_test(tc, throttled);
	tcase_add_test(tc, bounded);
	tcase_add_test(tc, timeout);
	tcase_add_test(tc, failed);
	tcase_add_test(tc, idle_sleep);
	tcase_add_test(tc, idle_never);
	tcase_add_test(tc, refused);
	tcase_add_test(tc, backoff);
	tcase_add_test(tc, backoff_cap);
	tcase_add_test(tc, backoff_reload);
	tcase_add_test(tc, endpoint_failed);
	tcase_add_test(tc, db_backoff);
	tcase_add_test(tc, classes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(wake_suite());
}
