/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * edge_assert.c - what a failed EDGE_ASSERT does (edge_assert.h): abort
 * in tests, count and log (rate-limited per call site) in production.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edge_assert.h"

/* The mode: EDGE_ASSERT_UNSET until set or first needed. */
enum {
	EDGE_ASSERT_UNSET = 0,
	EDGE_ASSERT_COUNT,
	EDGE_ASSERT_ABORT,
};

#if defined(__SANITIZE_ADDRESS__)
#define EDGE_ASSERT_DEFAULT EDGE_ASSERT_ABORT
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EDGE_ASSERT_DEFAULT EDGE_ASSERT_ABORT
#endif
#endif
#ifndef EDGE_ASSERT_DEFAULT
#define EDGE_ASSERT_DEFAULT EDGE_ASSERT_COUNT
#endif

static _Atomic int edge_assert_mode = EDGE_ASSERT_UNSET;
static _Atomic uint64_t edge_assert_count;

void edge_assert_set_abort(bool abort_on_failure)
{
	atomic_store(&edge_assert_mode,
		     abort_on_failure ? EDGE_ASSERT_ABORT : EDGE_ASSERT_COUNT);
}

bool edge_assert_aborts(void)
{
	int mode = atomic_load(&edge_assert_mode);
	const char *env;

	if (mode == EDGE_ASSERT_UNSET) {
		/* two threads may both decide: they decide the same */
		env = getenv("EDGE_ASSERT_ABORT");
		if (env && !strcmp(env, "1"))
			mode = EDGE_ASSERT_ABORT;
		else if (env && !strcmp(env, "0"))
			mode = EDGE_ASSERT_COUNT;
		else
			mode = EDGE_ASSERT_DEFAULT;
		atomic_store(&edge_assert_mode, mode);
	}
	return mode == EDGE_ASSERT_ABORT;
}

uint64_t edge_assert_failures(void)
{
	return atomic_load_explicit(&edge_assert_count, memory_order_relaxed);
}

/* Count, then abort or log; msg is NULL or the caller's message. */
static void edge_assert_report(struct log_site *site, const char *file,
			       int line, const char *func, const char *expr,
			       const char *msg)
{
	atomic_fetch_add_explicit(&edge_assert_count, 1, memory_order_relaxed);
	if (edge_assert_aborts()) {
		/* straight to stderr, whatever the log format: the last
		 * words of a test binary */
		fprintf(stderr, "assertion failed: %s:%d: %s: %s%s%s\n", file,
			line, func, expr, msg ? ": " : "", msg ? msg : "");
		abort();
	}
	log_site_warnx(site, NULL, "assertion failed: %s:%d: %s: %s%s%s", file,
		       line, func, expr, msg ? ": " : "", msg ? msg : "");
}

void edge_assert_fail(struct log_site *site, const char *file, int line,
		      const char *func, const char *expr)
{
	edge_assert_report(site, file, line, func, expr, NULL);
}

void edge_assert_failf(struct log_site *site, const char *file, int line,
		       const char *func, const char *expr, const char *fmt, ...)
{
	char msg[LOG_MSG_MAX / 2];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	edge_assert_report(site, file, line, func, expr, msg);
}
