/* SPDX-License-Identifier: BSD-2-Clause */
/* test_notify.c - sd_notify's sender (notify.c) against real unix
 * datagram sockets: a path and an abstract ("@") address receive exactly
 * what is sent, NOTIFY_SOCKET is unset once read, no variable means no-op,
 * and a relative, too long or unanswered address is refused with the
 * variable gone and later sends still no-ops. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "notify.h"
#include "unit.h"

/* A datagram socket bound at name ("@..." abstract), or -1. */
static int listener(const char *name)
{
	struct sockaddr_un sa;
	socklen_t len;
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", name);
	len =
	    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name));
	if (name[0] == '@')
		sa.sun_path[0] = '\0';
	else
		len++;
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, len)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static void expect_msg(int fd, const char *want)
{
	char buf[256];
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);

	ck_assert_int_ge(n, 0);
	buf[n] = '\0';
	ck_assert_str_eq(buf, want);
}

START_TEST(test_no_variable)
{
	unsetenv("NOTIFY_SOCKET");
	ck_assert_int_eq(notify_init(), 0);
	ck_assert_int_eq(notify_send("READY=1"), 0);
	notify_close();
}
END_TEST

START_TEST(test_path)
{
	char dir[] = "/tmp/edge-notify.XXXXXX", path[64];
	int fd;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/n.sock", dir);
	fd = listener(path);
	ck_assert_int_ge(fd, 0);
	setenv("NOTIFY_SOCKET", path, 1);
	ck_assert_int_eq(notify_init(), 0);
	ck_assert_ptr_null(getenv("NOTIFY_SOCKET"));
	ck_assert_int_eq(notify_send("READY=1"), 0);
	expect_msg(fd, "READY=1");
	ck_assert_int_eq(notify_send("RELOADING=1"), 0);
	expect_msg(fd, "RELOADING=1");
	ck_assert_int_eq(notify_send("READY=1\nMAINPID=7"), 0);
	expect_msg(fd, "READY=1\nMAINPID=7");
	notify_close();
	ck_assert_int_eq(notify_send("STOPPING=1"), 0); /* no-op now */
	ck_assert_int_eq(recv(fd, path, sizeof(path), MSG_DONTWAIT), -1);
	close(fd);
	snprintf(path, sizeof(path), "%s/n.sock", dir);
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(test_abstract)
{
	char name[64];
	int fd;

	snprintf(name, sizeof(name), "@edge-notify-test-%d", (int)getpid());
	fd = listener(name);
	ck_assert_int_ge(fd, 0);
	setenv("NOTIFY_SOCKET", name, 1);
	ck_assert_int_eq(notify_init(), 0);
	ck_assert_int_eq(notify_send("STOPPING=1"), 0);
	expect_msg(fd, "STOPPING=1");
	notify_close();
	close(fd);
}
END_TEST

static const char *const bad[] = {
    "relative/n.sock",
    "/tmp/edge-notify-nobody-listens-here.sock",
    "/tmp/"
    "an-address-longer-than-sun-path-can-hold-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
};

START_TEST(test_bad)
{
	setenv("NOTIFY_SOCKET", bad[_i], 1);
	ck_assert_int_lt(notify_init(), 0);
	ck_assert_ptr_null(getenv("NOTIFY_SOCKET"));
	ck_assert_int_eq(notify_send("READY=1"), 0);
	notify_close();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("notify");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_no_variable);
	tcase_add_test(tc, test_path);
	tcase_add_test(tc, test_abstract);
	tcase_add_loop_test(tc, test_bad, 0, sizeof(bad) / sizeof(bad[0]));
	suite_add_tcase(s, tc);
	return unit_run(s);
}
