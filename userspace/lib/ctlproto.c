/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ctlproto.c - the control protocol's messages, and the client's call:
 * connect, send one line, read one answer, all within one deadline.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctlproto.h"

bool ctlproto_cmd_changes(const char *cmd)
{
	static const char *const readonly[] = {"routes", "status", "stats",
					       "envs"};
	size_t i;

	for (i = 0; i < sizeof(readonly) / sizeof(readonly[0]); i++)
		if (strcmp(cmd, readonly[i]) == 0)
			return false;
	return true;
}

bool ctlproto_request_changes(const char *cmd, const json_t *req)
{
	const char *action;

	if (strcmp(cmd, "splice") == 0)
		return json_object_get(req, "mode") != NULL;
	if (strcmp(cmd, "challenge") == 0)
		return json_object_get(req, "on") != NULL;
	if (strcmp(cmd, "certs") == 0)
		return json_object_get(req, "renew") != NULL ||
		       json_object_get(req, "revoke") != NULL;
	if (strcmp(cmd, "upstream") == 0) {
		action = json_string_value(json_object_get(req, "action"));
		return action && strcmp(action, "list") != 0;
	}
	return ctlproto_cmd_changes(cmd);
}

int ctlproto_request_parse(const char *buf, size_t len, json_t **req,
			   const char **cmd, struct errbuf *err)
{
	json_error_t jerr;
	json_t *j, *c;

	*req = NULL;
	*cmd = NULL;
	if (len > CTLPROTO_REQUEST_MAX) {
		errbuf_set(err, "request too large (max %d bytes)",
			   CTLPROTO_REQUEST_MAX);
		return -E2BIG;
	}
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		len--;
	j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!j) {
		errbuf_set(err, "bad request: not JSON: %s", jerr.text);
		return -EINVAL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		errbuf_set(err, "bad request: not a JSON object");
		return -EINVAL;
	}
	c = json_object_get(j, "cmd");
	if (!json_is_string(c) || !*json_string_value(c)) {
		json_decref(j);
		errbuf_set(err, "bad request: no \"cmd\" string");
		return -EINVAL;
	}
	*req = j;
	*cmd = json_string_value(c);
	return 0;
}

/* Compact JSON and a newline, malloc'd; consumes j. */
static char *ctlproto_line(json_t *j)
{
	char *s, *line;
	size_t n;

	if (!j)
		return NULL;
	s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(j);
	if (!s)
		return NULL;
	n = strlen(s);
	line = realloc(s, n + 2);
	if (!line) {
		free(s);
		return NULL;
	}
	line[n] = '\n';
	line[n + 1] = '\0';
	return line;
}

char *ctlproto_response_ok(json_t *result)
{
	return ctlproto_line(json_pack("{s:b,s:o}", "ok", 1, "result",
				       result ? result : json_null()));
}

char *ctlproto_response_error(const char *msg)
{
	return ctlproto_line(json_pack("{s:b,s:s}", "ok", 0, "error",
				       msg && *msg ? msg : "failed"));
}

static int64_t ctlproto_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for events on fd until deadline: 0, -ETIMEDOUT or -errno. */
static int ctlproto_wait(int fd, short events, int64_t deadline)
{
	struct pollfd p = {.fd = fd, .events = events};
	int64_t left;
	int n;

	for (;;) {
		left = deadline - ctlproto_now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&p, 1, (int)left);
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

static int ctlproto_connect(int fd, const char *path, int64_t deadline,
			    struct errbuf *err)
{
	struct sockaddr_un sa;
	int ret;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		errbuf_set(err, "control socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	for (;;) {
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return 0;
		ret = -errno;
		if (ret == -EINTR)
			continue;
		if (ret == -EAGAIN && ctlproto_now_ms() < deadline) {
			/* the daemon's backlog is full: try again shortly */
			poll(NULL, 0, 10);
			continue;
		}
		break;
	}
	switch (ret) {
	case -ENOENT:
	case -ECONNREFUSED:
		errbuf_set(err,
			   "edged is not running (no control socket at %s)",
			   path);
		break;
	case -EACCES:
	case -EPERM:
		errbuf_set(err,
			   "permission denied on edged's control socket %s "
			   "(it is for root and edged's user)",
			   path);
		ret = -EACCES;
		break;
	case -EAGAIN:
		errbuf_set(err, "edged is busy (control socket %s)", path);
		ret = -ETIMEDOUT;
		break;
	default:
		errbuf_set(err,
			   "cannot connect to edged's control socket %s: %s",
			   path, strerror(-ret));
	}
	return ret;
}

static int ctlproto_send(int fd, const char *buf, size_t len, int64_t deadline)
{
	ssize_t n;
	int ret;

	while (len) {
		n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN)
			return -errno;
		ret = ctlproto_wait(fd, POLLOUT, deadline);
		if (ret)
			return ret;
	}
	return 0;
}

/* Read until EOF or a newline into *out (NUL-terminated, malloc'd). */
/* The descriptors of one message's SCM_RIGHTS into fds (NULL: closed),
 * at most CTLPROTO_FDS_MAX in all (the rest closed); -ENOMEM when fds
 * cannot grow (that message's closed). */
static int ctlproto_take_fds(struct msghdr *mh, struct ctlproto_fds *fds)
{
	struct cmsghdr *cm;
	int ret = 0;

	for (cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		size_t k, n;
		int v;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (k = 0; k < n; k++) {
			memcpy(&v, CMSG_DATA(cm) + k * sizeof(int), sizeof(v));
			if (fds && fds->n == fds->cap &&
			    fds->cap < CTLPROTO_FDS_MAX) {
				size_t cap = fds->cap ? fds->cap * 2 : 64;
				int *t = realloc(fds->v, cap * sizeof(*t));

				if (t) {
					fds->v = t;
					fds->cap = cap;
				} else {
					ret = -ENOMEM;
				}
			}
			if (fds && fds->n < fds->cap)
				fds->v[fds->n++] = v;
			else
				close(v);
		}
	}
	return ret;
}

static int ctlproto_recv(int fd, char **out, size_t *outlen, int64_t deadline,
			 struct ctlproto_fds *fds)
{
	size_t len = 0, cap = 0;
	char *buf = NULL, *tmp;
	ssize_t n;
	int ret = 0;
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(CTLPROTO_FDS_BATCH * sizeof(int))];
	} cbuf;

	for (;;) {
		if (cap - len < 4096 + 1) {
			cap = cap ? cap * 2 : 8192;
			tmp = realloc(buf, cap);
			if (!tmp) {
				ret = -ENOMEM;
				break;
			}
			buf = tmp;
		}
		struct iovec iov = {buf + len, cap - len - 1};
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = cbuf.b,
				    .msg_controllen = sizeof(cbuf.b)};

		n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n >= 0 && mh.msg_controllen &&
		    ctlproto_take_fds(&mh, fds) && !ret)
			ret = -ENOMEM;
		if (n >= 0 && (mh.msg_flags & MSG_CTRUNC))
			ret = -EMSGSIZE;
		if (ret)
			break;
		if (n > 0) {
			len += (size_t)n;
			if (len > CTLPROTO_RESPONSE_MAX) {
				ret = -EMSGSIZE;
				break;
			}
			if (memchr(buf + len - (size_t)n, '\n', (size_t)n))
				break;
			continue;
		}
		if (n == 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN) {
			ret = -errno;
			break;
		}
		ret = ctlproto_wait(fd, POLLIN, deadline);
		if (ret)
			break;
	}
	if (ret) {
		free(buf);
		return ret;
	}
	buf[len] = '\0';
	*out = buf;
	*outlen = len;
	return 0;
}

/* Check the answer's shape; 0 with *result, or -EBADMSG / -EREMOTEIO. */
static int ctlproto_answer(const char *buf, size_t len, json_t **result,
			   struct errbuf *err)
{
	json_t *j, *ok, *e;
	json_error_t jerr;

	j = json_loadb(buf, len, 0, &jerr);
	if (!j) {
		errbuf_set(err, "bad answer from edged: %s",
			   len ? jerr.text : "connection closed");
		return -EBADMSG;
	}
	ok = json_object_get(j, "ok");
	if (!json_is_boolean(ok)) {
		json_decref(j);
		errbuf_set(err, "bad answer from edged: no \"ok\"");
		return -EBADMSG;
	}
	if (json_is_false(ok)) {
		e = json_object_get(j, "error");
		errbuf_set(err, "%s",
			   json_is_string(e) ? json_string_value(e)
					     : "edged refused the command");
		json_decref(j);
		return -EREMOTEIO;
	}
	*result = json_incref(json_object_get(j, "result"));
	if (!*result)
		*result = json_null();
	json_decref(j);
	return 0;
}

int ctlproto_call(const char *path, const json_t *request, json_t **result,
		  int timeout_ms, struct errbuf *err)
{
	return ctlproto_call_fds(path, request, result, NULL, timeout_ms, err);
}

void ctlproto_fds_close(struct ctlproto_fds *fds)
{
	size_t i;

	if (!fds)
		return;
	for (i = 0; i < fds->n; i++)
		if (fds->v[i] >= 0)
			close(fds->v[i]);
	free(fds->v);
	memset(fds, 0, sizeof(*fds));
}

int ctlproto_call_fds(const char *path, const json_t *request, json_t **result,
		      struct ctlproto_fds *fds, int timeout_ms,
		      struct errbuf *err)
{
	int64_t deadline;
	char *line = NULL, *ans = NULL;
	size_t anslen = 0;
	int fd = -1, ret;
	json_t *copy;

	*result = NULL;
	deadline = ctlproto_now_ms() +
		   (timeout_ms > 0 ? timeout_ms : CTLPROTO_TIMEOUT_MS);
	copy = json_deep_copy(request);
	line = ctlproto_line(copy);
	if (!line) {
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		ret = -errno;
		errbuf_set(err, "socket: %s", strerror(errno));
		goto out;
	}
	ret = ctlproto_connect(fd, path, deadline, err);
	if (ret)
		goto out;
	ret = ctlproto_send(fd, line, strlen(line), deadline);
	/* a server that refuses early (busy, too large) has answered and
	 * closed: read what it said */
	if (ret == 0 || ret == -EPIPE || ret == -ECONNRESET)
		ret = ctlproto_recv(fd, &ans, &anslen, deadline, fds);
	if (ret == -ETIMEDOUT) {
		errbuf_set(err, "edged did not answer within %d ms (%s)",
			   timeout_ms > 0 ? timeout_ms : CTLPROTO_TIMEOUT_MS,
			   path);
		goto out;
	}
	if (ret == -EMSGSIZE) {
		errbuf_set(err, "bad answer from edged: larger than %d bytes",
			   CTLPROTO_RESPONSE_MAX);
		ret = -EBADMSG;
		goto out;
	}
	if (ret) {
		errbuf_set(err, "talking to edged (%s): %s", path,
			   strerror(-ret));
		goto out;
	}
	ret = ctlproto_answer(ans, anslen, result, err);
out:
	if (fd >= 0)
		close(fd);
	free(line);
	free(ans);
	return ret;
}
