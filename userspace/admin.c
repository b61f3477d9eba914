/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * admin.c - the admin listener: /metrics and /healthz over evhttp.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>

#include "admin.h"
#include "log.h"
#include "metrics.h"

#define ADMIN_BACKLOG 64
#define ADMIN_HEADERS_MAX 8192
#define ADMIN_BODY_MAX 4096
#define ADMIN_METHODS_ALL 0x1ff /* every EVHTTP_REQ_*: we answer 405 */
#define ADMIN_CT_METRICS "text/plain; version=0.0.4; charset=utf-8"
#define ADMIN_CT_TEXT "text/plain; charset=utf-8"
/* How long the listener rests after accept() fails (EMFILE...). */
#define ADMIN_ACCEPT_PAUSE_MS 100

struct admin {
	struct evhttp *http;
	struct evhttp_bound_socket *bound;
	struct metrics *m;
	admin_healthy_fn healthy;
	void *ctx;
	admin_render_fn render; /* NULL: metrics_render(m) */
	void *render_ctx;
};

static void admin_reply(struct evhttp_request *req, int code,
			const char *reason, const char *ctype,
			struct evbuffer *body)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	evhttp_add_header(h, "Content-Type", ctype);
	evhttp_add_header(h, "Cache-Control", "no-store");
	/* evhttp would send a body even to HEAD */
	if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD)
		body = NULL;
	evhttp_send_reply(req, code, reason, body);
}

static void admin_text(struct evhttp_request *req, int code, const char *reason,
		       const char *text)
{
	struct evbuffer *b = evbuffer_new();

	if (b)
		evbuffer_add_printf(b, "%s\n", text);
	admin_reply(req, code, reason, ADMIN_CT_TEXT, b);
	if (b)
		evbuffer_free(b);
}

static void admin_metrics(struct admin *a, struct evhttp_request *req)
{
	struct evbuffer *b = evbuffer_new();

	if (!b || (a->render ? a->render(a->render_ctx, b)
			     : metrics_render(a->m, b)) != 0) {
		if (b)
			evbuffer_free(b);
		admin_text(req, 500, "Internal Server Error", "out of memory");
		return;
	}
	admin_reply(req, 200, "OK", ADMIN_CT_METRICS, b);
	evbuffer_free(b);
}

static void admin_request(struct evhttp_request *req, void *arg)
{
	struct admin *a = arg;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;

	if (!path)
		path = "";
	if (strcmp(path, "/metrics") != 0 && strcmp(path, "/healthz") != 0) {
		admin_text(req, 404, "Not Found", "not found");
		return;
	}
	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
				  "Allow", "GET, HEAD");
		admin_text(req, 405, "Method Not Allowed",
			   "method not allowed");
		return;
	}
	if (strcmp(path, "/metrics") == 0) {
		admin_metrics(a, req);
		return;
	}
	if (!a->healthy || a->healthy(a->ctx))
		admin_text(req, 200, "OK", "ok");
	else
		admin_text(req, 503, "Service Unavailable", "draining");
}

static void admin_addr_text(const struct sockaddr *addr, socklen_t len,
			    char *buf, size_t size)
{
	char host[NI_MAXHOST], serv[NI_MAXSERV];

	if (getnameinfo(addr, len, host, sizeof(host), serv, sizeof(serv),
			NI_NUMERICHOST | NI_NUMERICSERV) != 0)
		snprintf(buf, size, "(unknown address)");
	else if (addr->sa_family == AF_INET6)
		snprintf(buf, size, "[%s]:%s", host, serv);
	else
		snprintf(buf, size, "%s:%s", host, serv);
}

static void admin_accept_resume(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	evconnlistener_enable(arg);
}

/* accept() failed for want of a descriptor (or memory): the listening
 * socket stays readable, so rest rather than be called again at once
 * (evhttp alone would spin on the control loop, logging every time).
 * arg is evhttp's, not ours: the rest is a one-shot event on the
 * listener (freed with the loop if it is still pending then). */
static void admin_accept_error(struct evconnlistener *lev, void *arg)
{
	struct timeval tv = {0, ADMIN_ACCEPT_PAUSE_MS * 1000};

	(void)arg;
	log_warn_rl("admin listener: accept");
	if (event_base_once(evconnlistener_get_base(lev), -1, EV_TIMEOUT,
			    admin_accept_resume, lev, &tv) == 0)
		evconnlistener_disable(lev);
}

int admin_start(struct event_base *base, const struct sockaddr *addr,
		socklen_t len, int fd_given, struct metrics *m,
		admin_healthy_fn healthy, void *ctx, struct admin **out,
		struct errbuf *err)
{
	char where[NI_MAXHOST + NI_MAXSERV + 4];
	struct admin *a;
	int fd = -1, one = 1, ret;

	*out = NULL;
	admin_addr_text(addr, len, where, sizeof(where));
	a = calloc(1, sizeof(*a));
	if (!a) {
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	a->m = m;
	a->healthy = healthy;
	a->ctx = ctx;
	if (fd_given >= 0) {
		fd = fd_given;
		goto bound;
	}
	fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    0);
	if (fd < 0) {
		ret = -errno;
		errbuf_set(err, "admin listener %s: socket: %s", where,
			   strerror(errno));
		goto fail;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, addr, len) != 0 || listen(fd, ADMIN_BACKLOG) != 0) {
		ret = -errno;
		errbuf_set(err, "admin listener %s: %s", where,
			   strerror(errno));
		goto fail;
	}
bound:
	a->http = evhttp_new(base);
	if (!a->http) {
		ret = -ENOMEM;
		errbuf_set(err, "out of memory");
		goto fail;
	}
	evhttp_set_allowed_methods(a->http, ADMIN_METHODS_ALL);
	evhttp_set_max_headers_size(a->http, ADMIN_HEADERS_MAX);
	evhttp_set_max_body_size(a->http, ADMIN_BODY_MAX);
	evhttp_set_timeout(a->http, ADMIN_TIMEOUT_S);
	evhttp_set_gencb(a->http, admin_request, a);
	/* from here the listener owns fd and closes it */
	a->bound = evhttp_accept_socket_with_handle(a->http, fd);
	if (!a->bound) {
		ret = -ENOMEM;
		errbuf_set(err, "admin listener %s: cannot serve", where);
		goto fail;
	}
	evconnlistener_set_error_cb(evhttp_bound_socket_get_listener(a->bound),
				    admin_accept_error);
	*out = a;
	return 0;
fail:
	if (a->http)
		evhttp_free(a->http);
	if (fd >= 0 && !a->bound)
		close(fd);
	free(a);
	return ret;
}

void admin_set_render(struct admin *a, admin_render_fn fn, void *ctx)
{
	a->render = fn;
	a->render_ctx = ctx;
}

int admin_local_addr(const struct admin *a, struct sockaddr_storage *ss,
		     socklen_t *len)
{
	*len = sizeof(*ss);
	if (!a->bound)
		return -ENOTCONN;
	if (getsockname(evhttp_bound_socket_get_fd(a->bound),
			(struct sockaddr *)ss, len) != 0)
		return -errno;
	return 0;
}

int admin_fd(const struct admin *a)
{
	return a && a->bound ? evhttp_bound_socket_get_fd(a->bound) : -1;
}

void admin_stop_listening(struct admin *a)
{
	if (!a || !a->bound)
		return;
	evhttp_del_accept_socket(a->http, a->bound);
	a->bound = NULL;
}

void admin_free(struct admin *a)
{
	if (!a)
		return;
	evhttp_free(a->http);
	free(a);
}
