/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * analytics_file.c - Record: the JSON-lines file sink (analytics.h), the
 * embedded mode's destination, and beside the database a local copy.
 *
 * One write(2) per batch of lines formatted straight into one buffer by
 * analytics_event_json_into() (or analytics_event_combined()); a
 * line cut by a short write is completed on the next call, never written
 * twice. The file is opened lazily (or before privileges drop, by
 * analytics_file_sink_open) and reopened after any error and on
 * analytics_reopen(), so a path that comes back is picked up.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analytics.h"
#include "log.h"

/* ---- the JSON-lines file sink ----------------------------------------- */

struct file_sink {
	char *path;
	int fd;
	size_t partial; /* bytes of the next event's line already written */
	dev_t dev;	/* the file they were written to */
	ino_t ino;
	char *buf;
	size_t cap;
	size_t *ends; /* end offset of each line in buf */
	size_t ends_cap;
	enum analytics_format fmt;
	/* JSON: "\"edge_host\":\"NAME\"," put after each line's '{', or
	 * NULL */
	char *host_json;
	size_t host_json_len;
};

static int file_sink_grow(struct file_sink *fs, size_t need)
{
	size_t cap = fs->cap ? fs->cap : 65536;
	char *p;

	if (need <= fs->cap)
		return 0;
	while (cap < need)
		cap *= 2;
	p = realloc(fs->buf, cap);
	if (!p)
		return -ENOMEM;
	fs->buf = p;
	fs->cap = cap;
	return 0;
}

static int file_sink_write_batch(void *ctx, const struct analytics_event *ev,
				 size_t n, size_t *done)
{
	struct file_sink *fs = ctx;
	size_t i, len = 0, pos;
	struct stat st;
	int rc = 0;

	*done = 0;
	if (n > fs->ends_cap) {
		size_t *e = realloc(fs->ends, n * sizeof(*e));

		if (!e)
			return -ENOMEM;
		fs->ends = e;
		fs->ends_cap = n;
	}
	for (i = 0; i < n; i++) {
		if (fs->fmt == ANALYTICS_FORMAT_COMBINED) {
			/* straight into the buffer: no allocation */
			rc = file_sink_grow(fs, len + ANALYTICS_COMBINED_MAX);
			if (rc < 0)
				return rc;
			len += analytics_event_combined(&ev[i], fs->buf + len);
			fs->ends[i] = len;
			continue;
		}
		/* JSON straight into the buffer too */
		rc = file_sink_grow(fs, len + ANALYTICS_JSON_MAX);
		if (rc < 0)
			return rc;
		len += analytics_event_json_into(
		    &ev[i], fs->buf + len, fs->host_json, fs->host_json_len);
		fs->ends[i] = len;
	}
	if (fs->fd < 0) {
		fs->fd =
		    open(fs->path,
			 O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK,
			 0640);
		if (fs->fd < 0)
			return -errno;
		/* a line cut in a file that has been moved away (rotated,
		 * removed) or truncated is not finished at the start of the
		 * new one */
		if (fstat(fs->fd, &st) == 0) {
			if (fs->partial &&
			    (st.st_dev != fs->dev || st.st_ino != fs->ino ||
			     (S_ISREG(st.st_mode) &&
			      (size_t)st.st_size < fs->partial)))
				fs->partial = 0;
			fs->dev = st.st_dev;
			fs->ino = st.st_ino;
		}
	}
	pos = fs->partial < fs->ends[0] ? fs->partial : 0;
	while (pos < len) {
		ssize_t w = write(fs->fd, fs->buf + pos, len - pos);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = w < 0 ? -errno : -EIO;
			break;
		}
		pos += (size_t)w;
	}
	for (i = 0; i < n && fs->ends[i] <= pos; i++)
		;
	*done = i;
	fs->partial = pos - (i ? fs->ends[i - 1] : 0);
	if (rc < 0) {
		/* reopen on the next try: the path may come back */
		close(fs->fd);
		fs->fd = -1;
	}
	return rc;
}

static int file_sink_reopen(void *ctx)
{
	struct file_sink *fs = ctx;

	if (fs->fd >= 0)
		close(fs->fd);
	fs->fd = -1;
	/* a line cut in the old file: finished if the path still names
	 * that file, else written whole to the new one (write_batch) */
	return 0;
}

static void file_sink_close(void *ctx)
{
	struct file_sink *fs = ctx;

	if (!fs)
		return;
	if (fs->fd >= 0)
		close(fs->fd);
	free(fs->path);
	free(fs->host_json);
	free(fs->buf);
	free(fs->ends);
	free(fs);
}

static const struct analytics_sink_ops file_sink_ops = {
    .name = "file",
    .write_batch = file_sink_write_batch,
    .reopen = file_sink_reopen,
    .close = file_sink_close,
};

int analytics_file_sink(const char *path, struct analytics_sink *sink)
{
	struct file_sink *fs = calloc(1, sizeof(*fs));

	if (!fs)
		return -ENOMEM;
	fs->fd = -1;
	fs->path = strdup(path);
	if (!fs->path) {
		free(fs);
		return -ENOMEM;
	}
	sink->ops = &file_sink_ops;
	sink->ctx = fs;
	return 0;
}

int analytics_file_sink_set(struct analytics_sink *sink,
			    enum analytics_format fmt, const char *edge_host)
{
	static const char key[] = "\"edge_host\":";
	struct file_sink *fs = sink->ctx;
	size_t n, o;

	fs->fmt = fmt;
	free(fs->host_json);
	fs->host_json = NULL;
	fs->host_json_len = 0;
	if (!edge_host || !edge_host[0])
		return 0;
	/* quoted once, as JSON wants it (the name is the config's); a name
	 * longer than the member's room (168 bytes, far above a host
	 * name's 64) is cut */
	n = strlen(edge_host);
	if (6 * n + sizeof(key) + 3 > ANALYTICS_JSON_MEMBER_MAX)
		n = (ANALYTICS_JSON_MEMBER_MAX - sizeof(key) - 3) / 6;
	fs->host_json = malloc(ANALYTICS_JSON_MEMBER_MAX);
	if (!fs->host_json)
		return -ENOMEM;
	memcpy(fs->host_json, key, sizeof(key) - 1);
	o = sizeof(key) - 1;
	o += analytics_json_string(fs->host_json + o, edge_host, n);
	fs->host_json[o++] = ',';
	fs->host_json_len = o;
	return 0;
}

/* Whether pw may write a file of st (owner, group or other bits). */
static bool file_writable_by(const struct stat *st, const struct passwd *pw)
{
	if (pw->pw_uid == 0)
		return true;
	if (st->st_uid == pw->pw_uid)
		return st->st_mode & S_IWUSR;
	if (st->st_gid == pw->pw_gid)
		return st->st_mode & S_IWGRP;
	return st->st_mode & S_IWOTH;
}

int analytics_file_sink_open(const char *path, const struct passwd *pw,
			     struct analytics_sink *sink, struct errbuf *err)
{
	/* as root about to become pw: never through a symlink, which pw
	 * may have left in a directory of its own (reopening, as pw, may) */
	const int fl = O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK |
		       (pw ? O_NOFOLLOW : 0);
	struct file_sink *fs;
	bool made = false;
	struct stat st;
	int fd, rc;

	fd = open(path, fl);
	if (fd < 0 && errno == ENOENT) {
		fd = open(path, fl | O_CREAT | O_EXCL, 0640);
		made = fd >= 0;
		if (fd < 0 && errno == EEXIST)
			fd = open(path, fl);
	}
	if (fd < 0) {
		rc = -errno;
		if (rc == -ELOOP && pw)
			errbuf_set(err,
				   "analytics.file: %s is a symbolic link: not "
				   "following it as root",
				   path);
		else
			errbuf_set(err, "analytics.file: cannot open %s: %s",
				   path, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) == 0 && pw) {
		if (made && fchown(fd, pw->pw_uid, pw->pw_gid))
			log_warn("analytics.file: chown %s", path);
		else if (!made && !file_writable_by(&st, pw))
			log_warnx("analytics.file: %s is not writable by user "
				  "\"%s\": edged writes through the descriptor "
				  "it opened now, but reopening it (SIGHUP, "
				  "log rotation) will fail",
				  path, pw->pw_name);
	}
	rc = analytics_file_sink(path, sink);
	if (rc) {
		close(fd);
		errbuf_set(err, "analytics.file: out of memory");
		return rc;
	}
	fs = sink->ctx;
	fs->fd = fd;
	return 0;
}
