/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * config_host.c - the host checks of edged --check (config_host.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config_host.h"

/* What the checks of one configuration share. */
struct host_chk {
	const struct config *c;
	struct config_errs *errs, *notes;
	const struct passwd *pw; /* NULL: the user does not exist */
	size_t n;		 /* problems added */
};

static void host_fail(struct host_chk *h, const char *key, const char *what,
		      const char *detail)
{
	config_errs_add(h->errs, "%s: %s: %s%s", h->c->path, key, what, detail);
	h->n++;
}

/* The directory part of path into dir ("." when there is none). */
static void host_dirname(const char *path, char *dir, size_t size)
{
	const char *sl = strrchr(path, '/');

	if (!sl)
		snprintf(dir, size, ".");
	else if (sl == path)
		snprintf(dir, size, "/");
	else
		snprintf(dir, size, "%.*s", (int)(sl - path), path);
}

/* What a child of config_host_as_user sends back. */
struct host_answer {
	int rc;
	char msg[ERRBUF_LEN];
};

int config_host_as_user(const struct passwd *pw, config_host_fn fn, void *arg,
			struct errbuf *err)
{
	struct host_answer a;
	size_t got = 0;
	ssize_t n;
	int p[2], st;
	pid_t pid;

	errbuf_clear(err);
	if (geteuid() != 0 || !pw)
		return fn(arg, err);
	if (pipe2(p, O_CLOEXEC))
		goto fail;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		goto fail;
	}
	if (pid == 0) {
		struct errbuf e = {""};

		close(p[0]);
		memset(&a, 0, sizeof(a));
		/* as drop_privileges (edged.c): the primary group only */
		if (setgroups(1, &pw->pw_gid) || setgid(pw->pw_gid) ||
		    setuid(pw->pw_uid)) {
			a.rc = -errno;
			snprintf(a.msg, sizeof(a.msg),
				 "cannot become user \"%s\": %s", pw->pw_name,
				 strerror(errno));
		} else {
			a.rc = fn(arg, &e);
			snprintf(a.msg, sizeof(a.msg), "%s", e.msg);
		}
		if (write(p[1], &a, sizeof(a)) != (ssize_t)sizeof(a))
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	while (got < sizeof(a)) {
		n = read(p[0], (char *)&a + got, sizeof(a) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(p[0]);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			break;
	if (got != sizeof(a)) {
		errbuf_set(err, "the check as user \"%s\" did not finish",
			   pw->pw_name);
		return -EPERM;
	}
	a.msg[sizeof(a.msg) - 1] = '\0';
	errbuf_set(err, "%s", a.msg);
	return a.rc;
fail:
	st = errno;
	errbuf_set(err, "cannot check as user \"%s\": %s", pw->pw_name,
		   strerror(st));
	return -st;
}

struct host_access_arg {
	const char *path;
	int mode;
};

static int host_access_fn(void *arg, struct errbuf *err)
{
	const struct host_access_arg *x = arg;

	(void)err;
	return faccessat(AT_FDCWD, x->path, x->mode, AT_EACCESS) ? -errno : 0;
}

/* Whether pw may access path as mode says (faccessat's W_OK, X_OK):
 * 0, or -errno. As root, in a child that has become the user
 * (config_host_as_user) with AT_EACCESS: access() as root would say yes
 * to everything. */
static int host_access(const struct passwd *pw, const char *path, int mode)
{
	struct host_access_arg x = {path, mode};
	struct errbuf err;

	return config_host_as_user(pw, host_access_fn, &x, &err);
}

/* Whether pw may write (create files in) dir. */
static int host_writable(const struct passwd *pw, const char *dir)
{
	return host_access(pw, dir, W_OK | X_OK);
}

/*
 * Directory dir (for key) must exist and be writable by the user; with
 * root_makes, edged makes it as root when it is missing, so then its
 * parent must exist instead (and the made directory is the user's).
 */
static void host_dir(struct host_chk *h, const char *key, const char *dir,
		     bool root_makes)
{
	char msg[PATH_MAX + 128], parent[PATH_MAX];
	struct stat sb;
	int rc;

	if (stat(dir, &sb)) {
		if (errno == ENOENT && root_makes) {
			host_dirname(dir, parent, sizeof(parent));
			if (stat(parent, &sb) == 0 && S_ISDIR(sb.st_mode))
				return; /* edged makes it, as root */
			snprintf(msg, sizeof(msg),
				 "%s does not exist, nor its parent %s", dir,
				 parent);
			host_fail(h, key, msg, "");
			return;
		}
		snprintf(msg, sizeof(msg), "directory %s: %s", dir,
			 strerror(errno));
		host_fail(h, key, msg,
			  errno == ENOENT ? " (make it, owned by the user)"
					  : "");
		return;
	}
	if (!S_ISDIR(sb.st_mode)) {
		snprintf(msg, sizeof(msg), "%s is not a directory", dir);
		host_fail(h, key, msg, "");
		return;
	}
	if (!h->pw)
		return; /* said already: no such user */
	if (root_makes && strcmp(key, "control_socket") == 0)
		return; /* the socket is made while edged is root */
	rc = host_writable(h->pw, dir);
	if (rc) {
		snprintf(msg, sizeof(msg),
			 "directory %s is not writable by user \"%s\" "
			 "(uid %u): %s",
			 dir, h->pw->pw_name, (unsigned)h->pw->pw_uid,
			 strerror(-rc));
		host_fail(h, key, msg, "");
	}
}

/*
 * analytics.file: its directory must exist. edged opens the file as root
 * at start (made and given to the user when missing) and reopens it as
 * the user (SIGUSR1, rotation): so the user must be able to write the
 * file when it exists, or else the directory (to make it again). A
 * directory the user cannot write, with no file yet, is a note: the
 * first start makes the file, a rotation must make the next one (as
 * logrotate's create does).
 */
static void host_analytics_file(struct host_chk *h, const char *path)
{
	char dir[PATH_MAX], msg[PATH_MAX + 160];
	struct stat sb;
	int rc;

	host_dirname(path, dir, sizeof(dir));
	if (stat(dir, &sb) || !S_ISDIR(sb.st_mode) || !h->pw) {
		host_dir(h, "analytics.file", dir, false);
		return;
	}
	if (host_writable(h->pw, dir) == 0)
		return;
	if (stat(path, &sb) == 0) {
		rc = host_access(h->pw, path, W_OK);
		if (rc) {
			snprintf(msg, sizeof(msg),
				 "%s is not writable by user \"%s\", nor is "
				 "directory %s: reopening it (SIGUSR1, "
				 "rotation) will fail",
				 path, h->pw->pw_name, dir);
			host_fail(h, "analytics.file", msg, "");
		}
		return;
	}
	config_errs_add(h->notes,
			"%s: analytics.file: directory %s is not writable by "
			"user \"%s\": edged makes %s as root at start and "
			"gives it to the user; a rotation must make the next "
			"one (logrotate's create)",
			h->c->path, dir, h->pw->pw_name, path);
}

/* Whether a can be bound now; a problem added when not. */
static void host_bind_type(struct host_chk *h, const char *key,
			   const struct config_addr *a, int type)
{
	char msg[256];
	int fd, one = 1, e = 0;

	fd = socket(a->ss.ss_family, type | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		e = errno;
	} else {
		if (a->ss.ss_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one,
				   sizeof(one));
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (const struct sockaddr *)&a->ss, a->len))
			e = errno;
		close(fd);
	}
	if (!e)
		return;
	if (e == EADDRINUSE)
		snprintf(msg, sizeof(msg),
			 "%s is in use (by another program, or by a running "
			 "edged: one with this configuration holds all its "
			 "addresses)",
			 a->text);
	else if (e == EADDRNOTAVAIL)
		snprintf(msg, sizeof(msg), "%s is not an address of this host",
			 a->text);
	else
		snprintf(msg, sizeof(msg), "%s cannot be bound: %s", a->text,
			 strerror(e));
	host_fail(h, key, msg, "");
}

static void host_bind(struct host_chk *h, const char *key,
		      const struct config_addr *a)
{
	host_bind_type(h, key, a, SOCK_STREAM);
}

size_t config_host_check(const struct config *c, struct config_errs *errs,
			 struct config_errs *notes)
{
	struct host_chk h = {.c = c, .errs = errs, .notes = notes};
	char dir[PATH_MAX], key[64];
	struct passwd *pw;
	size_t i, j;

	errno = 0;
	pw = getpwnam(c->user);
	if (!pw) {
		host_fail(&h, "user",
			  errno ? "cannot look the user up: " : "no user ",
			  errno ? strerror(errno) : c->user);
	} else {
		h.pw = pw;
		if (geteuid() != 0 && geteuid() != pw->pw_uid)
			config_errs_add(notes,
					"%s: user: not root: the directories "
					"were checked as uid %u, not as \"%s\"",
					c->path, (unsigned)geteuid(), c->user);
	}
	if (c->analytics.file && c->analytics.file[0])
		host_analytics_file(&h, c->analytics.file);
	if (c->analytics.spool && c->analytics.spool[0])
		host_dir(&h, "analytics.spool", c->analytics.spool, true);
	if (c->pg && c->pg_snapshot && c->pg_snapshot[0]) {
		host_dirname(c->pg_snapshot, dir, sizeof(dir));
		host_dir(&h, "pg_snapshot", dir, true);
	}
	if (c->control_socket && c->control_socket[0]) {
		host_dirname(c->control_socket, dir, sizeof(dir));
		host_dir(&h, "control_socket", dir, true);
	}
	for (i = 0; i < c->n_listen; i++) {
		snprintf(key, sizeof(key), "listen[%zu]", i);
		host_bind(&h, key, &c->listen[i]);
	}
	for (i = 0; i < c->tls.n_listen; i++) {
		snprintf(key, sizeof(key), "tls.listen[%zu]", i);
		host_bind(&h, key, &c->tls.listen[i]);
	}
	for (i = 0; i < c->tls.n_quic_listen; i++) {
		snprintf(key, sizeof(key), "tls.quic_listen[%zu]", i);
		host_bind_type(&h, key, &c->tls.quic_listen[i], SOCK_DGRAM);
	}
	host_bind(&h, "admin_listen", &c->admin_listen);
	for (i = 0; i < c->n_tcp_routes; i++) {
		/* passthrough routes share an address: bound once */
		for (j = 0; j < i; j++)
			if (strcmp(c->tcp_routes[j].listen.text,
				   c->tcp_routes[i].listen.text) == 0)
				break;
		if (j < i)
			continue;
		snprintf(key, sizeof(key), "tcp_routes[%zu].listen", i);
		host_bind(&h, key, &c->tcp_routes[i].listen);
	}
	return h.n;
}
