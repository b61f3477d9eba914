/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cmd_upgrade.c - edgectl upgrade: a new edged (the running one's binary
 * path, or --binary) started with --upgrade beside the running one,
 * which hands it its sockets and drains once it serves
 * (docs/operations.md, "Upgrades"). The new one says "ready" on a pipe;
 * anything else (it exits, or takes longer than --timeout) is a failed
 * upgrade that leaves the running edged serving. --if-changed: only when
 * the running binary was replaced on disk (its path "(deleted)"), else a
 * reload (systemd's ExecReload).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctlutil.h"

#define UPGRADE_TIMEOUT_S 60

static long long upgrade_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Exec binary as the successor of the edged configured by conf, its
 * readiness on the descriptor ready (kept across the exec); stdin is
 * /dev/null, stdout and stderr edgectl's. Never returns. */
static void upgrade_child(const char *binary, const char *conf, int ready)
{
	char fdarg[16];
	int fd, null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	setsid();
	if (null >= 0) {
		dup2(null, 0);
		close(null);
	}
	fd = fcntl(ready, F_DUPFD, 3); /* without FD_CLOEXEC */
	if (fd < 0)
		_exit(127);
	snprintf(fdarg, sizeof(fdarg), "%d", fd);
	execl(binary, binary, "-f", "-c", conf, "--upgrade", "--ready-fd",
	      fdarg, (char *)NULL);
	fprintf(stderr, "edgectl: upgrade: cannot run %s: %s\n", binary,
		strerror(errno));
	_exit(127);
}

/* Read the pipe until "ready", its end, or the deadline: 1 ready, 0 the
 * new edged went without saying it, -ETIMEDOUT. */
static int upgrade_wait(int fd, long long deadline)
{
	char buf[64];
	size_t len = 0;
	ssize_t n;

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		long long left = deadline - upgrade_now_ms();

		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&p, 1, (int)(left > 1000 ? 1000 : left)) <= 0)
			continue;
		n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0;
		len += (size_t)n;
		buf[len] = '\0';
		if (strstr(buf, "ready"))
			return 1;
		if (len == sizeof(buf) - 1)
			return 0;
	}
}

/* --if-changed with the running binary still in place: a reload. */
static int upgrade_reload(struct ctl *c, long long pid)
{
	struct errbuf err = {""};
	json_t *r = NULL;
	int ret = ctl_daemon_call(c, "reload", &r, &err);

	if (ret) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	}
	printf("edged %lld runs the binary in place: reloaded its "
	       "configuration (route generation %lld)\n",
	       pid,
	       (long long)json_integer_value(
		   json_object_get(r, "route_generation")));
	json_decref(r);
	return CTL_OK;
}

int cmd_upgrade(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"binary", required_argument, NULL, 'b'},
	    {"timeout", required_argument, NULL, 't'},
	    {"if-changed", no_argument, NULL, 'i'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct errbuf err = {""};
	json_t *st = NULL;
	const char *binary = NULL, *conf;
	char exe[PATH_MAX], *end;
	long timeout = UPGRADE_TIMEOUT_S;
	bool if_changed = false, deleted = false;
	long long old_pid;
	int o, ret, p[2], status, rc = CTL_FAIL;
	pid_t pid;

	optind = 0;
	while ((o = ctl_getopt(argc, argv, ":b:t:ih", opts, argv[0])) != -1) {
		switch (o) {
		case 'i':
			if_changed = true;
			break;
		case 'b':
			binary = optarg;
			break;
		case 't':
			errno = 0;
			timeout = strtol(optarg, &end, 10);
			if (errno || *end || timeout < 1 || timeout > 3600)
				return ctl_usage_error(argv[0],
						       "upgrade: --timeout %s: "
						       "whole seconds, 1 to "
						       "3600",
						       optarg);
			break;
		case 'h':
			return ctl_usage_print(argv[0]);
		default:
			return CTL_USAGE;
		}
	}
	if (optind < argc)
		return ctl_usage_error(argv[0],
				       "upgrade: unexpected argument "
				       "'%s'",
				       argv[optind]);
	ret = ctl_daemon_call(c, "status", &st, &err);
	if (ret) {
		log_warnx("upgrade: %s", err.msg);
		return CTL_FAIL;
	}
	old_pid = json_integer_value(json_object_get(st, "pid"));
	conf = json_string_value(json_object_get(st, "conf_path"));
	if (!conf) {
		log_warnx("upgrade: the running edged (pid %lld) does not say "
			  "its configuration file: it is older than edgectl "
			  "upgrade; restart it once",
			  old_pid);
		goto out;
	}
	if (!binary) {
		const char *e = json_string_value(json_object_get(st, "exe"));
		size_t n;

		if (!e) {
			log_warnx("upgrade: the running edged does not say its "
				  "binary: give --binary");
			goto out;
		}
		/* replaced by a package upgrade: the path is the new one */
		snprintf(exe, sizeof(exe), "%s", e);
		n = strlen(exe);
		deleted = n > 10 && strcmp(exe + n - 10, " (deleted)") == 0;
		if (deleted)
			exe[n - 10] = '\0';
		binary = exe;
		if (if_changed && !deleted) {
			rc = upgrade_reload(c, old_pid);
			goto out;
		}
	}
	if (access(binary, X_OK) != 0) {
		log_warnx("upgrade: %s: %s", binary, strerror(errno));
		goto out;
	}
	if (pipe2(p, O_CLOEXEC) != 0) {
		log_warn("upgrade: pipe");
		goto out;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		log_warn("upgrade: fork");
		close(p[0]);
		close(p[1]);
		goto out;
	}
	if (pid == 0) {
		close(p[0]);
		upgrade_child(binary, conf, p[1]);
	}
	close(p[1]);
	ret = upgrade_wait(p[0], upgrade_now_ms() + timeout * 1000);
	close(p[0]);
	if (ret == 1) {
		printf("upgraded: edged %lld serves (%s); edged %lld drains "
		       "and exits\n",
		       (long long)pid, binary, old_pid);
		rc = CTL_OK;
		goto out;
	}
	if (ret == -ETIMEDOUT) {
		kill(pid, SIGTERM);
		log_warnx("upgrade: the new edged (%s, pid %lld) did not serve "
			  "within %ld s: stopped; edged %lld serves on",
			  binary, (long long)pid, timeout, old_pid);
		goto out;
	}
	if (waitpid(pid, &status, 0) == pid && WIFEXITED(status))
		log_warnx("upgrade: the new edged (%s) exited with status %d "
			  "before serving (its messages are above); edged %lld "
			  "serves on",
			  binary, WEXITSTATUS(status), old_pid);
	else
		log_warnx("upgrade: the new edged (%s) stopped before serving; "
			  "edged %lld serves on",
			  binary, old_pid);
out:
	json_decref(st);
	return rc;
}
