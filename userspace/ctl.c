/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ctl.c - edged's control socket: accept, read one request line, check
 * the peer, call the command's handler, answer, close.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "ctl.h"

/* How long the listener rests after accept() fails (EMFILE...). */
#define CTL_ACCEPT_PAUSE_MS 100
#define CTL_BACKLOG 64

struct ctl_client {
	struct ctl_server *s;
	struct bufferevent *bev;
	struct event *timer; /* the whole connection's deadline */
	uid_t uid;
	pid_t pid; /* the peer's, 0: unknown */
	bool peer_known;
	bool answered;
	struct ctl_client *prev, *next; /* the server's clients */
};

struct ctl_server {
	struct event_base *base;
	struct evconnlistener *lev;
	struct event *pause; /* re-enables the listener after an error */
	struct ctl_handlers h;
	void *ctx;
	char *path;
	bool accepting; /* false: a successor's before ctl_server_commit, or
			   handed over */
	bool own_path;	/* path is ours to remove at the end */
	dev_t dev;
	ino_t ino;
	int lock_fd;
	unsigned timeout_ms;
	unsigned nclients;
	struct ctl_client *clients;
};

static void ctl_client_free(struct ctl_client *c)
{
	if (!c)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		c->s->clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->s->nclients--;
	if (c->timer)
		event_free(c->timer);
	if (c->bev)
		bufferevent_free(c->bev);
	free(c);
}

static void ctl_client_written(struct bufferevent *bev, void *arg)
{
	struct ctl_client *c = arg;

	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		ctl_client_free(c);
}

/* Queue the answer (consumed) and close once it is sent. */
static void ctl_client_answer(struct ctl_client *c, char *line)
{
	static const char oom[] =
	    "{\"ok\":false,\"error\":\"out of memory\"}\n";

	c->answered = true;
	bufferevent_disable(c->bev, EV_READ);
	bufferevent_setcb(c->bev, NULL, ctl_client_written, NULL, c);
	/* the read callback may still run: forget what is buffered */
	evbuffer_drain(bufferevent_get_input(c->bev),
		       evbuffer_get_length(bufferevent_get_input(c->bev)));
	if (!line || bufferevent_write(c->bev, line, strlen(line)) != 0) {
		if (bufferevent_write(c->bev, oom, sizeof(oom) - 1) != 0) {
			free(line);
			ctl_client_free(c);
			return;
		}
	}
	free(line);
}

static void ctl_client_error(struct ctl_client *c, const char *msg)
{
	ctl_client_answer(c, ctlproto_response_error(msg));
}

static ctl_handler_fn ctl_handler(const struct ctl_server *s, const char *cmd,
				  bool *known)
{
	*known = true;
	if (strcmp(cmd, "routes") == 0)
		return s->h.routes;
	if (strcmp(cmd, "reload") == 0)
		return s->h.reload;
	if (strcmp(cmd, "status") == 0)
		return s->h.status;
	if (strcmp(cmd, "stats") == 0)
		return s->h.stats;
	if (strcmp(cmd, "envs") == 0)
		return s->h.envs;
	if (strcmp(cmd, "splice") == 0 || strcmp(cmd, "upstream") == 0 ||
	    strcmp(cmd, "challenge") == 0 || strcmp(cmd, "handover") == 0 ||
	    strcmp(cmd, "certs") == 0 || strcmp(cmd, "retire") == 0)
		return NULL; /* ctl_client_request calls s->h.splice/upstream/
				challenge/handover/retire */
	*known = false;
	return NULL;
}

/* Send fds (n) on the client's socket fd, CTLPROTO_FDS_BATCH at a time,
 * each batch with one byte of whitespace (before the answer, which is
 * not queued yet): 0, or -errno with err set. Waits at most a second for
 * room (the control loop stalls meanwhile: an upgrade's moment). */
static int ctl_send_fds(int fd, const int *fds, size_t n, struct errbuf *err)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(CTLPROTO_FDS_BATCH * sizeof(int))];
	} cbuf;
	size_t off = 0, k;
	int waited = 0;

	while (off < n) {
		char sp = ' ';
		struct iovec iov = {&sp, 1};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
		struct cmsghdr *cm;
		struct pollfd p = {.fd = fd, .events = POLLOUT};

		k = n - off < CTLPROTO_FDS_BATCH ? n - off : CTLPROTO_FDS_BATCH;
		memset(&cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf.b;
		mh.msg_controllen = CMSG_SPACE(k * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(k * sizeof(int));
		memcpy(CMSG_DATA(cm), fds + off, k * sizeof(int));
		if (sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) == 1) {
			off += k;
			continue;
		}
		if ((errno != EAGAIN && errno != EINTR) || waited >= 1000) {
			errbuf_set(err, "handover: sending %zu sockets: %s", n,
				   errno == EAGAIN ? "the successor does not "
						     "read"
						   : strerror(errno));
			return -EIO;
		}
		if (poll(&p, 1, 100) == 0)
			waited += 100;
	}
	return 0;
}

/* One complete request: len bytes at buf. */
static void ctl_client_request(struct ctl_client *c, const char *buf,
			       size_t len)
{
	struct errbuf err = {""};
	json_t *req = NULL, *result = NULL;
	const char *cmd;
	ctl_handler_fn fn;
	bool known;
	char msg[ERRBUF_LEN + 64];
	int ret;

	if (ctlproto_request_parse(buf, len, &req, &cmd, &err)) {
		ctl_client_error(c, err.msg);
		return;
	}
	fn = ctl_handler(c->s, cmd, &known);
	if (!known) {
		snprintf(msg, sizeof(msg),
			 "unknown command '%.64s' (routes, reload, status, "
			 "stats, splice, envs, upstream, challenge, certs)",
			 cmd);
		ctl_client_error(c, msg);
		goto out;
	}
	/* splice without a mode, upstream without an action (or list) only
	 * read */
	if (ctlproto_request_changes(cmd, req) &&
	    !(c->peer_known && (c->uid == 0 || c->uid == geteuid()))) {
		snprintf(msg, sizeof(msg),
			 "permission denied: %s needs root or edged's user",
			 cmd);
		ctl_client_error(c, msg);
		goto out;
	}
	if (strcmp(cmd, "splice") == 0 && c->s->h.splice) {
		ret = c->s->h.splice(c->s->ctx, req, &result, &err);
		goto answer;
	}
	if (strcmp(cmd, "upstream") == 0 && c->s->h.upstream) {
		ret = c->s->h.upstream(c->s->ctx, req, &result, &err);
		goto answer;
	}
	if (strcmp(cmd, "challenge") == 0 && c->s->h.challenge) {
		ret = c->s->h.challenge(c->s->ctx, req, &result, &err);
		goto answer;
	}
	if (strcmp(cmd, "certs") == 0 && c->s->h.certs) {
		ret = c->s->h.certs(c->s->ctx, req, &result, &err);
		goto answer;
	}
	if (strcmp(cmd, "handover") == 0 && c->s->h.handover) {
		const int *fds = NULL;
		size_t nfds = 0;

		/* a successor asks as root, before its privilege drop: the
		 * listening sockets are for no one else */
		if (c->uid != 0) {
			ctl_client_error(c, "permission denied: handover needs "
					    "root");
			goto out;
		}

		ret = c->s->h.handover(c->s->ctx, c->pid, &fds, &nfds, &result,
				       &err);
		if (ret == 0)
			ret = ctl_send_fds(bufferevent_getfd(c->bev), fds, nfds,
					   &err);
		goto answer;
	}
	if (strcmp(cmd, "retire") == 0 && c->s->h.retire) {
		char b;

		/* read late (this daemon was stopped or busy): an asker that
		 * has gone gave up and steps back; retiring now would leave
		 * nobody serving */
		if (recv(bufferevent_getfd(c->bev), &b, 1,
			 MSG_PEEK | MSG_DONTWAIT) == 0) {
			log_warnx("control socket: a retire whose asker (pid "
				  "%ld) stopped waiting: ignored",
				  (long)c->pid);
			c->answered =
			    true; /* nobody to answer: its EOF frees */
			goto out;
		}
		ret = c->s->h.retire(c->s->ctx, c->pid, &result, &err);
		goto answer;
	}
	if (!fn) {
		snprintf(msg, sizeof(msg), "%s is not supported by this edged",
			 cmd);
		ctl_client_error(c, msg);
		goto out;
	}
	ret = fn(c->s->ctx, &result, &err);
answer:
	if (ret < 0) {
		json_decref(result);
		if (!err.msg[0])
			errbuf_set(&err, "%s failed: %s", cmd, strerror(-ret));
		ctl_client_error(c, err.msg);
		goto out;
	}
	ctl_client_answer(c, ctlproto_response_ok(result));
out:
	json_decref(req);
}

static void ctl_client_read(struct bufferevent *bev, void *arg)
{
	struct ctl_client *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_ptr eol;
	size_t eol_len = 0, len;
	unsigned char *line;

	if (c->answered)
		return;
	eol = evbuffer_search_eol(in, NULL, &eol_len, EVBUFFER_EOL_LF);
	if (eol.pos < 0) {
		if (evbuffer_get_length(in) >= CTLPROTO_REQUEST_MAX)
			goto too_large;
		return; /* more to come */
	}
	len = (size_t)eol.pos;
	if (len + eol_len > CTLPROTO_REQUEST_MAX)
		goto too_large;
	line = evbuffer_pullup(in, (ev_ssize_t)len);
	if (!line && len) {
		ctl_client_error(c, "out of memory");
		return;
	}
	ctl_client_request(c, (const char *)line, len);
	return;
too_large : {
	char msg[64];

	snprintf(msg, sizeof(msg), "request too large (max %d bytes)",
		 CTLPROTO_REQUEST_MAX);
	ctl_client_error(c, msg);
}
}

static void ctl_client_event(struct bufferevent *bev, short what, void *arg)
{
	struct ctl_client *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in);

	if ((what & BEV_EVENT_EOF) && !c->answered && len &&
	    !(what & BEV_EVENT_ERROR)) {
		/* a last line without its newline is still a request */
		unsigned char *line = evbuffer_pullup(in, (ev_ssize_t)len);

		if (line) {
			ctl_client_request(c, (const char *)line, len);
			return;
		}
	}
	ctl_client_free(c);
}

static void ctl_client_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct ctl_client *c = arg;

	(void)fd;
	(void)what;
	ctl_client_free(c);
}

static void ctl_busy(evutil_socket_t fd)
{
	static const char busy[] =
	    "{\"ok\":false,\"error\":\"edged is busy: too many control "
	    "clients\"}\n";
	ssize_t n =
	    send(fd, busy, sizeof(busy) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);

	(void)n;
	close(fd);
}

static void ctl_accept(struct evconnlistener *lev, evutil_socket_t fd,
		       struct sockaddr *sa, int salen, void *arg)
{
	struct ctl_server *s = arg;
	struct ctl_client *c;
	struct ucred cred;
	socklen_t credlen = sizeof(cred);
	struct timeval tv;

	(void)lev;
	(void)sa;
	(void)salen;
	if (s->nclients >= CTL_CLIENTS_MAX) {
		ctl_busy(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->s = s;
	c->next = s->clients;
	if (c->next)
		c->next->prev = c;
	s->clients = c;
	s->nclients++;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &credlen) == 0 &&
	    credlen == sizeof(cred)) {
		c->uid = cred.uid;
		c->pid = cred.pid;
		c->peer_known = true;
	}
	c->bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!c->bev) {
		close(fd);
		ctl_client_free(c);
		return;
	}
	c->timer = evtimer_new(s->base, ctl_client_timeout, c);
	tv.tv_sec = s->timeout_ms / 1000;
	tv.tv_usec = (suseconds_t)(s->timeout_ms % 1000) * 1000;
	if (!c->timer || evtimer_add(c->timer, &tv)) {
		ctl_client_free(c);
		return;
	}
	/* stop reading past the limit: the read callback then refuses */
	bufferevent_setwatermark(c->bev, EV_READ, 0, CTLPROTO_REQUEST_MAX);
	bufferevent_setcb(c->bev, ctl_client_read, NULL, ctl_client_event, c);
	if (bufferevent_enable(c->bev, EV_READ))
		ctl_client_free(c);
}

static void ctl_accept_resume(evutil_socket_t fd, short what, void *arg)
{
	struct ctl_server *s = arg;

	(void)fd;
	(void)what;
	if (s->accepting)
		evconnlistener_enable(s->lev);
}

static void ctl_accept_error(struct evconnlistener *lev, void *arg)
{
	struct ctl_server *s = arg;
	struct timeval tv = {0, CTL_ACCEPT_PAUSE_MS * 1000};

	log_warn("control socket %s: accept", s->path);
	/* EMFILE and friends: rest instead of spinning on a ready socket */
	evconnlistener_disable(lev);
	evtimer_add(s->pause, &tv);
}

/* Create the socket's directory (0700) when it is missing. */
static int ctl_mkdir_parent(const char *path, struct errbuf *err)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, 0700) == 0 || errno == EEXIST)
		return 0;
	errbuf_set(err, "cannot create %s: %s", dir, strerror(errno));
	return -errno;
}

/* Take PATH.lock; -EADDRINUSE while another daemon holds it. */
static int ctl_lock(struct ctl_server *s, struct errbuf *err)
{
	char lock[sizeof(((struct sockaddr_un *)0)->sun_path) + 8];
	int ret;

	snprintf(lock, sizeof(lock), "%s.lock", s->path);
	/* never through a symlink: the directory may be the unprivileged
	 * user's, and the lock is handed to that user (edged.c) */
	s->lock_fd =
	    open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (s->lock_fd < 0) {
		ret = -errno;
		if (ret == -ELOOP)
			errbuf_set(err,
				   "%s is a symbolic link: not following it",
				   lock);
		else
			errbuf_set(err, "cannot open %s: %s", lock,
				   strerror(errno));
		return ret;
	}
	if (flock(s->lock_fd, LOCK_EX | LOCK_NB) == 0)
		return 0;
	ret = -errno;
	if (ret == -EWOULDBLOCK) {
		errbuf_set(err,
			   "another edged is running (%s is locked; control "
			   "socket %s)",
			   lock, s->path);
		return -EADDRINUSE;
	}
	errbuf_set(err, "cannot lock %s: %s", lock, strerror(-ret));
	return ret;
}

/* Deal with what is already at the path: nothing, a stale socket (removed),
 * a live one or something else (refused). */
static int ctl_clear_path(const struct ctl_server *s,
			  const struct sockaddr_un *sa, struct errbuf *err)
{
	struct stat st;
	int fd, ret;

	if (lstat(s->path, &st) != 0) {
		if (errno == ENOENT)
			return 0;
		ret = -errno;
		errbuf_set(err, "%s: %s", s->path, strerror(errno));
		return ret;
	}
	if (!S_ISSOCK(st.st_mode)) {
		errbuf_set(err,
			   "%s exists and is not a socket; not replacing it",
			   s->path);
		return -EEXIST;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ret = -errno;
		errbuf_set(err, "socket: %s", strerror(errno));
		return ret;
	}
	ret =
	    connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) ? -errno : 0;
	close(fd);
	if (ret == 0) {
		errbuf_set(err,
			   "another edged is running (control socket %s "
			   "answers)",
			   s->path);
		return -EADDRINUSE;
	}
	if (ret != -ECONNREFUSED) {
		errbuf_set(err, "control socket %s: %s", s->path,
			   strerror(-ret));
		return ret;
	}
	if (unlink(s->path) != 0 && errno != ENOENT) {
		ret = -errno;
		errbuf_set(err, "cannot remove stale control socket %s: %s",
			   s->path, strerror(errno));
		return ret;
	}
	log_note("removed a stale control socket %s (its daemon is gone)",
		 s->path);
	return 0;
}

static int ctl_server_open(struct event_base *base, const char *path,
			   int lock_fd, int listen_fd,
			   const struct ctl_handlers *h, void *ctx,
			   struct ctl_server **out, struct errbuf *err);

int ctl_server_start(struct event_base *base, const char *path,
		     const struct ctl_handlers *h, void *ctx,
		     struct ctl_server **out, struct errbuf *err)
{
	return ctl_server_open(base, path, -1, -1, h, ctx, out, err);
}

/* 0 when fd is a socket listening at path. */
static int ctl_check_inherited(int fd, const char *path, struct errbuf *err)
{
	struct sockaddr_un sa;
	socklen_t len = sizeof(sa);
	int on = 0;
	socklen_t olen = sizeof(on);

	memset(&sa, 0, sizeof(sa));
	if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0 ||
	    sa.sun_family != AF_UNIX ||
	    len <= offsetof(struct sockaddr_un, sun_path) ||
	    strncmp(sa.sun_path, path, sizeof(sa.sun_path)) != 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &olen) != 0 || !on) {
		errbuf_set(err,
			   "control socket %s: the socket handed over is not "
			   "one listening there",
			   path);
		return -EINVAL;
	}
	return 0;
}

int ctl_server_start_successor(struct event_base *base, const char *path,
			       int lock_fd, int listen_fd,
			       const struct ctl_handlers *h, void *ctx,
			       struct ctl_server **out, struct errbuf *err)
{
	if (lock_fd < 0 || listen_fd < 0) {
		errbuf_set(err, "control socket %s: no %s handed over", path,
			   lock_fd < 0 ? "lock" : "listening socket");
		if (lock_fd >= 0)
			close(lock_fd);
		if (listen_fd >= 0)
			close(listen_fd);
		return -EINVAL;
	}
	return ctl_server_open(base, path, lock_fd, listen_fd, h, ctx, out,
			       err);
}

int ctl_server_commit(struct ctl_server *s, struct errbuf *err)
{
	if (s->accepting)
		return 0;
	if (evconnlistener_enable(s->lev) != 0) {
		errbuf_set(err, "control socket %s: cannot accept", s->path);
		return -EIO;
	}
	s->accepting = true;
	s->own_path = true;
	return 0;
}

void ctl_server_hand_over(struct ctl_server *s)
{
	if (!s)
		return;
	s->accepting = false;
	s->own_path = false;
	evconnlistener_disable(s->lev);
	event_del(s->pause);
}

int ctl_server_listen_fd(const struct ctl_server *s)
{
	return s && s->lev ? evconnlistener_get_fd(s->lev) : -1;
}

/* The server at path; a successor's (lock_fd and listen_fd >= 0, both
 * taken) on its predecessor's lock and socket, accepting from
 * ctl_server_commit on. */
static int ctl_server_open(struct event_base *base, const char *path,
			   int lock_fd, int listen_fd,
			   const struct ctl_handlers *h, void *ctx,
			   struct ctl_server **out, struct errbuf *err)
{
	bool successor = listen_fd >= 0;
	struct ctl_server *s;
	struct sockaddr_un sa;
	struct stat st;
	int fd = listen_fd, ret;

	*out = NULL;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (!path || !*path || strlen(path) >= sizeof(sa.sun_path)) {
		errbuf_set(err,
			   "bad control socket path '%s' (empty or longer "
			   "than %zu bytes)",
			   path ? path : "", sizeof(sa.sun_path) - 1);
		ret = -ENAMETOOLONG;
		goto fail_fds;
	}
	s = calloc(1, sizeof(*s));
	if (!s || !(s->path = strdup(path))) {
		free(s);
		errbuf_set(err, "out of memory");
		ret = -ENOMEM;
		goto fail_fds;
	}
	s->base = base;
	s->lock_fd = lock_fd;
	s->ctx = ctx;
	s->timeout_ms = CTL_CLIENT_TIMEOUT_MS;
	s->accepting = !successor;
	if (h)
		s->h = *h;
	memcpy(sa.sun_path, path, strlen(path) + 1);

	if (successor) {
		ret = ctl_check_inherited(fd, path, err);
		if (ret == 0 && (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 ||
				 evutil_make_socket_nonblocking(fd) != 0)) {
			ret = -errno;
			errbuf_set(err, "control socket %s: %s", path,
				   strerror(errno));
		}
		if (ret)
			goto fail;
		/* the same socket file: removed at the end once it is ours */
		if (stat(path, &st) == 0) {
			s->dev = st.st_dev;
			s->ino = st.st_ino;
		}
		goto listener;
	}
	ret = ctl_mkdir_parent(path, err);
	if (ret == 0)
		ret = ctl_lock(s, err);
	if (ret == 0)
		ret = ctl_clear_path(s, &sa, err);
	if (ret)
		goto fail;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		ret = -errno;
		errbuf_set(err, "socket: %s", strerror(errno));
		goto fail;
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		ret = -errno;
		errbuf_set(err, "cannot bind control socket %s: %s", path,
			   strerror(errno));
		goto fail;
	}
	/* before listen(): nobody can connect while the mode is wider */
	if (chmod(path, 0600) != 0 || stat(path, &st) != 0) {
		ret = -errno;
		errbuf_set(err, "control socket %s: %s", path, strerror(errno));
		unlink(path);
		goto fail;
	}
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	s->own_path = true;
	if (listen(fd, CTL_BACKLOG) != 0) {
		ret = -errno;
		errbuf_set(err, "listen on %s: %s", path, strerror(errno));
		unlink(path);
		goto fail;
	}
listener:
	s->pause = evtimer_new(base, ctl_accept_resume, s);
	s->lev = s->pause ? evconnlistener_new(
				base, ctl_accept, s,
				LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC |
				    (successor ? LEV_OPT_DISABLED : 0),
				-1, fd)
			  : NULL;
	if (!s->lev) {
		ret = -ENOMEM;
		errbuf_set(err, "out of memory");
		if (!successor)
			unlink(path);
		goto fail;
	}
	evconnlistener_set_error_cb(s->lev, ctl_accept_error);
	*out = s;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	if (s->pause)
		event_free(s->pause);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	free(s->path);
	free(s);
	return ret;
fail_fds:
	if (lock_fd >= 0)
		close(lock_fd);
	if (listen_fd >= 0)
		close(listen_fd);
	return ret;
}

int ctl_server_lock_fd(const struct ctl_server *s)
{
	return s ? s->lock_fd : -1;
}

void ctl_server_set_timeout(struct ctl_server *s, unsigned ms)
{
	if (s && ms)
		s->timeout_ms = ms;
}

void ctl_server_free(struct ctl_server *s)
{
	struct stat st;

	if (!s)
		return;
	while (s->clients)
		ctl_client_free(s->clients);
	if (s->lev)
		evconnlistener_free(s->lev);
	if (s->pause)
		event_free(s->pause);
	/* only our own socket, never one handed over: a successor serves on
	 * it, or another daemon may have replaced it */
	if (s->own_path && stat(s->path, &st) == 0 && st.st_dev == s->dev &&
	    st.st_ino == s->ino)
		unlink(s->path);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	free(s->path);
	free(s);
}
