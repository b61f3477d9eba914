/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench/common.h - what the bench/ tools (bench/xdp-drop/flood.c,
 * bench/xdp-drop/rrprobe.c, bench/splice/pingpong.c, ...) share: a
 * CLOCK_MONOTONIC clock in
 * nanoseconds and absolute sleeps on it, a stop flag that SIGINT and
 * SIGTERM set, and strict parsing of their numeric options.
 *
 * Header-only, every function static inline: each tool is one .c file
 * built into one binary on its own (the Makefile's $(B)/tools rules), so
 * there is no library to link. CPU pinning is left to the run scripts
 * (taskset), not done here.
 */
#ifndef EDGE_BENCH_COMMON_H
#define EDGE_BENCH_COMMON_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define BENCH_NSEC_PER_SEC 1000000000ULL

/* Set to 1 by SIGINT or SIGTERM once bench_catch_stop() has run; a tool's
 * loops test it and end early. One per tool: each tool is one file. */
static volatile sig_atomic_t bench_stop;

/* The handler bench_catch_stop() installs: only sets bench_stop. */
static inline void bench_on_signal(int sig)
{
	(void)sig;
	bench_stop = 1;
}

/* Make SIGINT and SIGTERM set bench_stop instead of killing the tool, so
 * that it still prints what it measured so far. No SA_RESTART: a blocking
 * call returns EINTR and the loop around it sees bench_stop. */
static inline void bench_catch_stop(void)
{
	struct sigaction sa = {.sa_handler = bench_on_signal};

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* Now on CLOCK_MONOTONIC, in nanoseconds. */
static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * BENCH_NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* Sleep until bench_now_ns() reaches ns (at once when it has); a signal
 * cuts the sleep short only when it set bench_stop. */
static inline void bench_sleep_until(uint64_t ns)
{
	struct timespec ts = {
	    .tv_sec = (time_t)(ns / BENCH_NSEC_PER_SEC),
	    .tv_nsec = (long)(ns % BENCH_NSEC_PER_SEC),
	};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
		   EINTR &&
	       !bench_stop)
		;
}

/* Parse s as an unsigned decimal in [min, max] into *out: 0, or -EINVAL
 * (empty, a sign, trailing characters, out of range; *out untouched). */
static inline int bench_parse_u64(const char *s, uint64_t min, uint64_t max,
				  uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Parse s as a duration in seconds, more than 0 and at most max (a
 * fraction allowed) into *out: 0, or -EINVAL (*out untouched). */
static inline int bench_parse_seconds(const char *s, double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || end == s || !(v > 0) || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

#endif /* EDGE_BENCH_COMMON_H */
