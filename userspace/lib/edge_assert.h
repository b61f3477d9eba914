/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * edge_assert.h - assertions that abort in tests and count in production.
 *
 *   EDGE_ASSERT(cond);
 *   EDGE_ASSERT_MSG(cond, "slot %u of %u", i, n);
 *   if (!EDGE_ASSERT(r->conn)) return -EINVAL;   (recover in production)
 *
 * cond is always evaluated, exactly once, in every build (it must not be
 * left out for a production build); each macro is an expression whose
 * value is whether cond held.
 *
 * When cond is false:
 *   abort mode  write "assertion failed: FILE:LINE: FUNC: COND[: MSG]"
 *               to stderr and abort(): a test sees the bug at once.
 *   count mode  add one to a process-wide counter (edge_assert_failures,
 *               metric edge_assertions_failed_total) and log the same
 *               text through the call site's own rate limit (the first
 *               failure at once, then at most one line a minute, saying
 *               how many it held back), then carry on.
 *
 * Which mode is a run-time switch, decided at the first failure:
 * edge_assert_set_abort() when called, else the environment variable
 * EDGE_ASSERT_ABORT ("1": abort, "0": count), else abort in a
 * sanitizer build (-fsanitize=address) and count otherwise. One binary
 * thus serves production (count) and the tests (tests/run exports
 * EDGE_ASSERT_ABORT=1), and no flavour is built only for tests.
 */
#ifndef EDGE_ASSERT_H
#define EDGE_ASSERT_H

#include <stdbool.h>
#include <stdint.h>

#include "log.h"

/* The rate limit of one assertion's log lines in count mode. */
#define EDGE_ASSERT_LOG_BURST 1
#define EDGE_ASSERT_LOG_INTERVAL_MS 60000

#define EDGE_ASSERT_CHECK_(cond, call)                                         \
	({                                                                     \
		bool edge_assert_ok_ = (cond) ? true : false;                  \
		if (__builtin_expect(!edge_assert_ok_, 0)) {                   \
			static struct log_site edge_assert_site_ =             \
			    LOG_SITE_INIT(EDGE_ASSERT_LOG_BURST,               \
					  EDGE_ASSERT_LOG_INTERVAL_MS);        \
			call;                                                  \
		}                                                              \
		edge_assert_ok_;                                               \
	})

#define EDGE_ASSERT(cond)                                                      \
	EDGE_ASSERT_CHECK_(cond,                                               \
			   edge_assert_fail(&edge_assert_site_, __FILE__,      \
					    __LINE__, __func__, #cond))

#define EDGE_ASSERT_MSG(cond, ...)                                             \
	EDGE_ASSERT_CHECK_(                                                    \
	    cond, edge_assert_failf(&edge_assert_site_, __FILE__, __LINE__,    \
				    __func__, #cond, __VA_ARGS__))

/* A failed assertion (called by the macros): abort, or count and log
 * through site (see above). Thread-safe. */
void edge_assert_fail(struct log_site *site, const char *file, int line,
		      const char *func, const char *expr) __attribute__((cold));

/* edge_assert_fail with a message (printf-style). */
void edge_assert_failf(struct log_site *site, const char *file, int line,
		       const char *func, const char *expr, const char *fmt, ...)
    __attribute__((cold, format(printf, 6, 7)));

/* Choose the mode for every later failure: abort (true) or count (false),
 * overriding EDGE_ASSERT_ABORT. Thread-safe. */
void edge_assert_set_abort(bool abort_on_failure);

/* Whether a failure aborts now (deciding the mode if not yet decided). */
bool edge_assert_aborts(void);

/* Assertions failed in this process so far (count mode; in abort mode the
 * one that aborts counts too). Thread-safe. */
uint64_t edge_assert_failures(void);

#endif /* EDGE_ASSERT_H */
