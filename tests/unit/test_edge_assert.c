/* SPDX-License-Identifier: BSD-2-Clause */
/* test_edge_assert.c - EDGE_ASSERT (userspace/lib/edge_assert.c): aborts
 * in abort mode (what it prints first), counts and logs rate-limited in
 * count mode and carries on, evaluates its condition once, and takes its
 * mode from edge_assert_set_abort, EDGE_ASSERT_ABORT or the build. Each
 * test runs in its own process (Check's fork mode), so the mode and the
 * count start afresh. */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "edge_assert.h"
#include "log.h"
#include "unit.h"

/* stderr to /dev/null: a test that aborts on purpose says nothing */
static void quiet(void)
{
	int fd = open("/dev/null", O_WRONLY);

	ck_assert_int_ge(fd, 0);
	dup2(fd, STDERR_FILENO);
	close(fd);
}

START_TEST(test_abort_mode_aborts)
{
	int zero = 0;

	quiet();
	edge_assert_set_abort(true);
	EDGE_ASSERT(zero == 1);
	/* not reached: SIGABRT */
}
END_TEST

START_TEST(test_env_abort_aborts)
{
	int zero = 0;

	quiet();
	setenv("EDGE_ASSERT_ABORT", "1", 1);
	EDGE_ASSERT_MSG(zero == 1, "zero is %d", zero);
}
END_TEST

/* The assertion that aborts. */
static void abort_site(int slot)
{
	EDGE_ASSERT_MSG(slot < 4, "slot %d", slot);
}

/* What abort mode prints before it aborts: run in a child of our own,
 * stderr into a pipe. */
START_TEST(test_abort_mode_message)
{
	char buf[1024], rest[256];
	size_t len = 0;
	ssize_t n;
	int p[2], status, line = 0;
	pid_t pid;

	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(p[1], STDERR_FILENO);
		edge_assert_set_abort(true);
		abort_site(7);
		_exit(0);
	}
	close(p[1]);
	while ((n = read(p[0], buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	close(p[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status));
	ck_assert_int_eq(WTERMSIG(status), SIGABRT);
	ck_assert_msg(sscanf(buf,
			     "assertion failed: tests/unit/test_edge_assert.c:"
			     "%d: %255[^\n]",
			     &line, rest) == 2,
		      "%s", buf);
	ck_assert_int_gt(line, 0);
	ck_assert_str_eq(rest, "abort_site: slot < 4: slot 7");
	ck_assert_uint_eq(strlen(buf), (size_t)(strchr(buf, '\n') - buf) + 1);
}
END_TEST

/* One call site, failing or not as told. */
static bool site(int v)
{
	return EDGE_ASSERT(v > 0);
}

START_TEST(test_count_mode)
{
	char buf[4096];
	size_t len = 0;
	ssize_t n;
	int p[2], saved, calls = 0;
	unsigned i;

	edge_assert_set_abort(false);
	ck_assert(!edge_assert_aborts());
	log_init("edged", false);
	ck_assert_int_eq(pipe2(p, O_NONBLOCK), 0);
	saved = dup(STDERR_FILENO);
	dup2(p[1], STDERR_FILENO);
	close(p[1]);
	ck_assert_uint_eq(edge_assert_failures(), 0);
	/* holding: true, not counted */
	ck_assert(site(1));
	ck_assert(EDGE_ASSERT(++calls == 1));
	ck_assert_int_eq(calls, 1);
	ck_assert_uint_eq(edge_assert_failures(), 0);
	/* failing: false, counted, the caller carries on */
	for (i = 0; i < 1000; i++)
		ck_assert(!site(0));
	ck_assert(!EDGE_ASSERT(++calls == 1));
	ck_assert_int_eq(calls, 2); /* evaluated once */
	ck_assert(!EDGE_ASSERT_MSG(calls == 0, "calls %d", calls));
	/* as a statement */
	EDGE_ASSERT(calls == 0);
	ck_assert_uint_eq(edge_assert_failures(), 1003);
	dup2(saved, STDERR_FILENO);
	close(saved);
	while ((n = read(p[0], buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	close(p[0]);
	/* one line per call site (rate-limited), with where and what */
	ck_assert_msg(strstr(buf, "edged: assertion failed: "
				  "tests/unit/test_edge_assert.c:") == buf,
		      "%s", buf);
	ck_assert_ptr_nonnull(strstr(buf, ": site: v > 0\n"));
	ck_assert_ptr_nonnull(
	    strstr(buf, ": test_count_mode_fn: ++calls == 1\n"));
	ck_assert_ptr_nonnull(
	    strstr(buf, ": test_count_mode_fn: calls == 0: calls 2\n"));
	ck_assert_ptr_nonnull(
	    strstr(buf, ": test_count_mode_fn: calls == 0\n"));
	{
		unsigned lines = 0;
		char *q;

		for (q = buf; *q; q++)
			lines += *q == '\n';
		ck_assert_uint_eq(lines, 4);
	}
}
END_TEST

START_TEST(test_mode_sources)
{
	/* the environment decides when nothing was set */
	setenv("EDGE_ASSERT_ABORT", "0", 1);
	ck_assert(!edge_assert_aborts());
	/* set wins over the environment */
	edge_assert_set_abort(true);
	ck_assert(edge_assert_aborts());
	edge_assert_set_abort(false);
	ck_assert(!edge_assert_aborts());
}
END_TEST

START_TEST(test_mode_default)
{
	bool sanitized = false;

	unsetenv("EDGE_ASSERT_ABORT");
#if defined(__SANITIZE_ADDRESS__)
	sanitized = true;
#endif
	/* a sanitizer build aborts, a normal one counts */
	ck_assert_int_eq(edge_assert_aborts(), sanitized);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("edge_assert");
	TCase *tc = tcase_create("edge_assert");

	tcase_add_test_raise_signal(tc, test_abort_mode_aborts, SIGABRT);
	tcase_add_test_raise_signal(tc, test_env_abort_aborts, SIGABRT);
	tcase_add_test(tc, test_abort_mode_message);
	tcase_add_test(tc, test_count_mode);
	tcase_add_test(tc, test_mode_sources);
	tcase_add_test(tc, test_mode_default);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
