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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctlutil.h"

#define UPGRADE_TIMEOUT_S 60
/* how long the new edged may take to have the running one retire, from
 * its "retiring" on (it waits EDGED_RETIRE_WAIT_MS for the answer) */
#define UPGRADE_RETIRE_S 45

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

/* Read the pipe until "ready\n" or another line (the new edged gives up:
 * "failed: WHY", into msg), its end, or the deadline: 1 ready, 2 failed,
 * 0 the new edged went without a word, -ETIMEDOUT. "retiring\n" (it asks
 * the running edged to retire: killing it now could leave neither
 * serving) moves the deadline UPGRADE_RETIRE_S further, once. */
static int upgrade_wait(int fd, long long deadline, char *msg, size_t mlen)
{
	char buf[1024], *nl;
	size_t len = 0;
	bool retiring = false;
	ssize_t n;

	buf[0] = '\0';
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		long long left;

		nl = strchr(buf, '\n');
		if (nl || len == sizeof(buf) - 1) {
			if (nl)
				*nl = '\0';
			if (nl && strcmp(buf, "retiring") == 0 && !retiring) {
				retiring = true;
				deadline =
				    upgrade_now_ms() + UPGRADE_RETIRE_S * 1000;
				len -= (size_t)(nl + 1 - buf);
				memmove(buf, nl + 1, len + 1);
				continue;
			}
			if (strcmp(buf, "ready") == 0)
				return 1;
			snprintf(msg, mlen, "%s", buf);
			return 2;
		}
		left = deadline - upgrade_now_ms();
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
	}
}

/* Whether path, named by the daemon, may be run or read by root: a
 * regular file root owns that neither its group nor others may write;
 * else why in why. */
static bool upgrade_trusted(const char *path, char *why, size_t len)
{
	struct stat sb;

	if (stat(path, &sb) != 0) {
		snprintf(why, len, "%s: %s", path, strerror(errno));
		return false;
	}
	if (!S_ISREG(sb.st_mode) || sb.st_uid != 0 || (sb.st_mode & 022)) {
		snprintf(why, len,
			 "%s, which the running edged names, is not a file "
			 "only root may change",
			 path);
		return false;
	}
	return true;
}

/* The systemd unit of process pid ("" when none), from its cgroup. */
static void upgrade_unit(long long pid, char *out, size_t len)
{
	char path[64], line[512], *u, *end;
	FILE *f;

	out[0] = '\0';
	if (pid > 0)
		snprintf(path, sizeof(path), "/proc/%lld/cgroup", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/cgroup");
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		u = strstr(line, ".service");
		if (!u)
			continue;
		end = u + strlen(".service");
		while (u > line && u[-1] != '/')
			u--;
		snprintf(out, len, "%.*s", (int)(end - u), u);
		break;
	}
	fclose(f);
}

/* An edged a systemd unit runs is upgraded from inside that unit
 * (systemctl reload: ExecReload), where the new one may become its main
 * process; from elsewhere it would run outside the unit. */
static bool upgrade_same_unit(long long pid, char *why, size_t len)
{
	char theirs[128], ours[128];

	upgrade_unit(pid, theirs, sizeof(theirs));
	upgrade_unit(0, ours, sizeof(ours));
	if (!theirs[0] || strcmp(theirs, ours) == 0)
		return true;
	snprintf(why, len,
		 "edged %lld runs in %s: use systemctl reload %s (its "
		 "ExecReload upgrades when the binary was replaced)",
		 pid, theirs, theirs);
	return false;
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
	    {"config", required_argument, NULL, 'c'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct errbuf err = {""};
	json_t *st = NULL;
	const char *binary = NULL, *conf;
	char exe[PATH_MAX], *end;
	long timeout = UPGRADE_TIMEOUT_S;
	bool if_changed = false, deleted = false, binary_given = false;
	const char *conf_given = NULL;
	char why[PATH_MAX + 128];
	long long old_pid;
	int o, ret, p[2], status, rc = CTL_FAIL;
	pid_t pid;

	optind = 0;
	while ((o = ctl_getopt(argc, argv, ":b:t:c:ih", opts, argv[0])) != -1) {
		switch (o) {
		case 'c':
			conf_given = optarg;
			break;
		case 'i':
			if_changed = true;
			break;
		case 'b':
			binary = optarg;
			binary_given = true;
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
	conf = conf_given ? conf_given
			  : json_string_value(json_object_get(st, "conf_path"));
	if (!conf) {
		log_warnx("upgrade: the running edged (pid %lld) does not say "
			  "its configuration file: it is older than edgectl "
			  "upgrade; restart it once",
			  old_pid);
		goto out;
	}
	{
		const char *e = json_string_value(json_object_get(st, "exe"));
		size_t n;

		if (!e && (!binary || if_changed)) {
			log_warnx("upgrade: the running edged does not say its "
				  "binary: give --binary, without "
				  "--if-changed");
			goto out;
		}
		/* replaced by a package upgrade: the path is the new one */
		snprintf(exe, sizeof(exe), "%s", e ? e : "");
		n = strlen(exe);
		deleted = n > 10 && strcmp(exe + n - 10, " (deleted)") == 0;
		if (deleted)
			exe[n - 10] = '\0';
		if (!binary)
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
	/* what the daemon said (it runs unprivileged) is run as root only
	 * if root owns it and no one else may change it */
	if (geteuid() == 0 &&
	    ((!binary_given && !upgrade_trusted(binary, why, sizeof(why))) ||
	     (!conf_given && !upgrade_trusted(conf, why, sizeof(why))))) {
		log_warnx("upgrade: %s: give --binary and --config to use it",
			  why);
		goto out;
	}
	if (!upgrade_same_unit(old_pid, why, sizeof(why))) {
		log_warnx("upgrade: %s", why);
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
	ret = upgrade_wait(p[0], upgrade_now_ms() + timeout * 1000, why,
			   sizeof(why));
	close(p[0]);
	if (ret == 2) {
		/* it drains what it took and exits by itself */
		log_warnx("upgrade: the new edged (%s, pid %lld) gave up: %s; "
			  "edged %lld serves on",
			  binary, (long long)pid, why, old_pid);
		goto out;
	}
	if (ret == 1) {
		printf("upgraded: edged %lld serves (%s); edged %lld drains "
		       "and exits\n",
		       (long long)pid, binary, old_pid);
		rc = CTL_OK;
		goto out;
	}
	if (ret == -ETIMEDOUT) {
		/* not SIGTERM: one the new edged only reads once it serves
		 * would come after it retired the old one */
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		log_warnx("upgrade: the new edged (%s, pid %lld) did not serve "
			  "within %ld s: killed; edged %lld serves on",
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
