/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hcheck.c - active health checks on the control loop: per endpoint an
 * interval timer, and at most one check in flight (a bufferevent over a
 * non-blocking socket and a deadline timer). Results move the endpoint's
 * active_down in the registry; the workers read it at each selection.
 * An http check asks in HTTP/1.1, or in HTTP/2 (a client session of
 * nghttp2's over the bufferevent) by prior knowledge for an h2c://
 * endpoint and when an https:// one's ALPN chooses h2 (offered first, as
 * requests offer it).
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/ssl.h>
#include <event2/event.h>
#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hcheck.h"
#include "log.h"
#include "proxyproto.h"
#include "tls_up.h"

/* The longest status line read from a checked endpoint. */
#define HCHECK_LINE_MAX 1024

struct hcheck_ep {
	struct hcheck *h;
	struct hcheck_target t;
	struct upreg_ep *e;	 /* a reference (keeps the entry) */
	struct event *tick;	 /* every interval */
	struct event *deadline;	 /* the check in flight's timeout */
	struct bufferevent *bev; /* the check in flight, or NULL */
	nghttp2_session *ng;	 /* ... its HTTP/2 (hcheck_is_h2), or NULL */
	int status;		 /* ... the :status it got, 0: none yet */
	bool h2_gone;		 /* ... its stream or session ended first */
	bool connected;		 /* of the check in flight */
	bool pp_then_tls;	 /* ... its TCP connect, a PROXY header, then
				    TLS (c->bev plain until then) */
	unsigned ok, bad;	 /* successes, failures in a row */
	bool down;		 /* taken out by its checks */
	bool keep;		 /* hcheck_set: still checked */
};

struct hcheck {
	struct event_base *base;
	struct upreg *g;
	struct hcheck_ep **v;
	size_t n;
	size_t warned; /* the count past HCHECK_MAX last said (0: none) */
};

int hcheck_new(struct event_base *base, struct upreg *g, struct hcheck **out)
{
	struct hcheck *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	h->base = base;
	h->g = g;
	*out = h;
	return 0;
}

/* End the check in flight, if any. */
static void hcheck_stop(struct hcheck_ep *c)
{
	if (c->bev) {
		int fd = (int)bufferevent_getfd(c->bev);

		bufferevent_free(c->bev);
		if (c->pp_then_tls && fd >= 0) /* not closed with it */
			close(fd);
		c->bev = NULL;
	}
	c->pp_then_tls = false;
	if (c->ng) {
		nghttp2_session_del(c->ng);
		c->ng = NULL;
	}
	if (c->deadline)
		evtimer_del(c->deadline);
}

static void hcheck_ep_free(struct hcheck_ep *c)
{
	if (!c)
		return;
	hcheck_stop(c);
	if (c->tick)
		event_free(c->tick);
	if (c->deadline)
		event_free(c->deadline);
	if (c->e) {
		if (c->down) {
			atomic_store(&c->e->active_down, false);
			log_note("upstream %s: no longer health-checked, back "
				 "in",
				 c->t.addr.text);
		}
		upreg_put(c->h->g, c->e);
	}
	free(c);
}

void hcheck_free(struct hcheck *h)
{
	size_t i;

	if (!h)
		return;
	for (i = 0; i < h->n; i++) {
		/* back in, silently: at exit a line per endpoint out is
		 * noise (hcheck_ep_free logs it for a reload) */
		if (h->v[i]->down) {
			atomic_store(&h->v[i]->e->active_down, false);
			h->v[i]->down = false;
		}
		hcheck_ep_free(h->v[i]);
	}
	free(h->v);
	free(h);
}

/* The check in flight ended: ok or not (why, errno err or 0). */
static void hcheck_result(struct hcheck_ep *c, bool ok, enum upreg_why why,
			  int err)
{
	const struct config_health_check *hc = &c->t.hc;
	char text[UPREG_WHY_STR_MAX];

	hcheck_stop(c);
	if (ok) {
		c->bad = 0;
		if (c->ok < hc->rise)
			c->ok++;
		if (c->down && c->ok >= hc->rise) {
			c->down = false;
			atomic_store(&c->e->active_down, false);
			log_note("upstream %s is back: health check passed %u "
				 "time%s in a row",
				 c->t.addr.text, c->ok, c->ok == 1 ? "" : "s");
		}
		return;
	}
	c->ok = 0;
	if (c->bad < hc->fall)
		c->bad++;
	upreg_set_failure(c->e, why, err);
	if (!c->down && c->bad >= hc->fall) {
		c->down = true;
		atomic_store(&c->e->active_down, true);
		atomic_fetch_add(&c->e->ejections, 1);
		log_warnx("upstream %s ejected: health check failed %u time%s "
			  "in a row (last: %s)",
			  c->t.addr.text, c->bad, c->bad == 1 ? "" : "s",
			  upreg_why_format(why, err, text, sizeof(text)));
	}
}

static bool hcheck_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

/* The status line in in, when complete: 1 ok, 0 more needed, -1 bad
 * (*why set). */
static int hcheck_status(struct hcheck_ep *c, struct evbuffer *in,
			 enum upreg_why *why)
{
	struct evbuffer_ptr eol;
	char line[HCHECK_LINE_MAX + 1];
	size_t len;
	unsigned code = 0;

	eol = evbuffer_search(in, "\n", 1, NULL);
	if (eol.pos < 0) {
		if (evbuffer_get_length(in) > HCHECK_LINE_MAX) {
			*why = UPREG_WHY_HC_LINE_TOO_LONG;
			return -1;
		}
		return 0;
	}
	len = (size_t)eol.pos < HCHECK_LINE_MAX ? (size_t)eol.pos
						: HCHECK_LINE_MAX;
	evbuffer_copyout(in, line, len);
	line[len] = '\0';
	/* "HTTP/1.x NNN" and then a space, CR or the end: exactly three
	 * digits (sscanf would take "2000" for 200, " 200" or "+20") */
	if (strncmp(line, "HTTP/1.", 7) != 0 || len < 12 || line[8] != ' ' ||
	    !hcheck_digit(line[9]) || !hcheck_digit(line[10]) ||
	    !hcheck_digit(line[11]) ||
	    (len > 12 && line[12] != ' ' && line[12] != '\r')) {
		*why = UPREG_WHY_HC_NOT_HTTP;
		return -1;
	}
	code = (unsigned)(line[9] - '0') * 100 +
	       (unsigned)(line[10] - '0') * 10 + (unsigned)(line[11] - '0');
	if (code != c->t.hc.expect_status) {
		*why = code >= 500   ? UPREG_WHY_HC_5XX
		       : code >= 400 ? UPREG_WHY_HC_4XX
				     : UPREG_WHY_HC_STATUS;
		return -1;
	}
	return 1;
}

/* The final status code of the check: ok when it is expect_status. */
static void hcheck_code(struct hcheck_ep *c, unsigned code)
{
	if (code == c->t.hc.expect_status)
		hcheck_result(c, true, UPREG_WHY_NONE, 0);
	else
		hcheck_result(c, false,
			      code >= 500   ? UPREG_WHY_HC_5XX
			      : code >= 400 ? UPREG_WHY_HC_4XX
					    : UPREG_WHY_HC_STATUS,
			      0);
}

/* HTTP/2: the response's :status (an interim 1xx's skipped). */
static int hcheck_h2_header(nghttp2_session *ng, const nghttp2_frame *frame,
			    const uint8_t *name, size_t namelen,
			    const uint8_t *value, size_t valuelen,
			    uint8_t flags, void *user)
{
	struct hcheck_ep *c = user;

	(void)ng;
	(void)flags;
	if (frame->hd.type == NGHTTP2_HEADERS && frame->hd.stream_id == 1 &&
	    namelen == 7 && memcmp(name, ":status", 7) == 0 && valuelen == 3 &&
	    hcheck_digit((char)value[0]) && hcheck_digit((char)value[1]) &&
	    hcheck_digit((char)value[2]) && value[0] != '1')
		c->status = (value[0] - '0') * 100 + (value[1] - '0') * 10 +
			    (value[2] - '0');
	return 0;
}

/* HTTP/2: the stream closed, or a GOAWAY came, before its status. */
static int hcheck_h2_close(nghttp2_session *ng, int32_t id, uint32_t code,
			   void *user)
{
	(void)ng;
	(void)code;
	if (id == 1)
		((struct hcheck_ep *)user)->h2_gone = true;
	return 0;
}

static int hcheck_h2_frame(nghttp2_session *ng, const nghttp2_frame *frame,
			   void *user)
{
	(void)ng;
	if (frame->hd.type == NGHTTP2_GOAWAY &&
	    frame->goaway.last_stream_id < 1)
		((struct hcheck_ep *)user)->h2_gone = true;
	return 0;
}

/* Write what the HTTP/2 session has to send: 0, or -1. */
static int hcheck_h2_send(struct hcheck_ep *c)
{
	const uint8_t *p;
	ssize_t n;

	while ((n = nghttp2_session_mem_send(c->ng, &p)) > 0)
		if (bufferevent_write(c->bev, p, (size_t)n))
			return -1;
	return n < 0 ? -1 : 0;
}

/* HTTP/2: the session and its request (GET path; by prior knowledge on
 * h2c://, by ALPN on https://). */
static int hcheck_h2_start(struct hcheck_ep *c, const char *host)
{
	nghttp2_session_callbacks *cb;
	nghttp2_settings_entry nopush = {NGHTTP2_SETTINGS_ENABLE_PUSH, 0};
	const char *path = c->t.hc.path;
	const char *scheme =
	    c->t.addr.scheme == CONFIG_SCHEME_HTTPS ? "https" : "http";
	nghttp2_nv nv[] = {
	    {(uint8_t *)":method", (uint8_t *)"GET", 7, 3, 0},
	    {(uint8_t *)":scheme", (uint8_t *)scheme, 7, strlen(scheme), 0},
	    {(uint8_t *)":authority", (uint8_t *)host, 10, strlen(host), 0},
	    {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
	    {(uint8_t *)"user-agent", (uint8_t *)"edge-health-check", 10, 17,
	     0}};
	int rc;

	if (nghttp2_session_callbacks_new(&cb))
		return -1;
	nghttp2_session_callbacks_set_on_header_callback(cb, hcheck_h2_header);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb,
							       hcheck_h2_close);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb,
							     hcheck_h2_frame);
	rc = nghttp2_session_client_new(&c->ng, cb, c);
	nghttp2_session_callbacks_del(cb);
	c->status = 0;
	c->h2_gone = false;
	if (rc ||
	    nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, &nopush, 1) ||
	    nghttp2_submit_request(c->ng, NULL, nv, sizeof(nv) / sizeof(nv[0]),
				   NULL, NULL) < 0)
		return -1;
	return hcheck_h2_send(c);
}

static void hcheck_read_cb(struct bufferevent *bev, void *arg)
{
	struct hcheck_ep *c = arg;
	enum upreg_why why = UPREG_WHY_NONE;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n;
	int rc;

	if (c->ng) {
		n = evbuffer_get_length(in);
		if (nghttp2_session_mem_recv(
			c->ng, evbuffer_pullup(in, (ssize_t)n), n) < 0) {
			hcheck_result(c, false, UPREG_WHY_HC_NOT_HTTP, 0);
			return;
		}
		evbuffer_drain(in, n);
		if (c->status) {
			hcheck_code(c, (unsigned)c->status);
			return;
		}
		/* reset, refused, or the session over: no answer will come */
		if (c->h2_gone || (!nghttp2_session_want_read(c->ng) &&
				   !nghttp2_session_want_write(c->ng))) {
			hcheck_result(c, false, UPREG_WHY_HC_CLOSED, 0);
			return;
		}
		if (hcheck_h2_send(c))
			hcheck_result(c, false, UPREG_WHY_HC_NOMEM, 0);
		return;
	}
	rc = hcheck_status(c, in, &why);
	if (rc)
		hcheck_result(c, rc > 0, why, 0);
}

/* The check's PROXY header out on its connected socket, whole: v2 LOCAL,
 * v1 naming the check's own socket; 0 or an errno. */
static int hcheck_send_pp(struct hcheck_ep *c)
{
	uint8_t buf[PP_WRITE_MAX];
	struct sockaddr_storage local;
	socklen_t ll = sizeof(local);
	size_t len = pp_write_local(c->t.send_proxy, buf);
	ssize_t n;

	/* v1 has no LOCAL, and its UNKNOWN is refused by a receiver that
	 * wants a client (edged's own proxy_protocol addresses do): the
	 * check names its own socket, to the endpoint */
	if (c->t.send_proxy == 1 && c->t.addr.ss.ss_family != AF_UNIX &&
	    getsockname(bufferevent_getfd(c->bev), (struct sockaddr *)&local,
			&ll) == 0)
		len = pp_write(1, (struct sockaddr *)&local,
			       (const struct sockaddr *)&c->t.addr.ss, buf);

	do
		n = send(bufferevent_getfd(c->bev), buf, len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno;
	return (size_t)n == len ? 0 : EIO;
}

static void hcheck_event_cb(struct bufferevent *bev, short what, void *arg);

/* The check's SSL, as a request's would be made (the deployment's
 * profile; the name checked is its server_name, if it has one), offering
 * h2 then http/1.1 by ALPN as requests do: 0, or -1 (logged). */
static int hcheck_ssl(struct hcheck_ep *c, SSL **out)
{
	struct errbuf err;
	uint64_t tag;

	if (tls_up_ssl(&c->t.tls, NULL, 0, c->t.addr.text, out, &tag, &err)) {
		log_warnx_rl("health check of %s: %s", c->t.addr.text, err.msg);
		return -1;
	}
	if (tls_up_offer_h2(*out)) {
		SSL_free(*out);
		log_warnx_rl("health check of %s: out of memory",
			     c->t.addr.text);
		return -1;
	}
	return 0;
}

/* The check's TLS over socket s (connected; s is the check's from now
 * on, closed with it): 0, or -1 (s closed). */
static int hcheck_tls(struct hcheck_ep *c, int s)
{
	SSL *ssl;

	if (c->bev) {
		bufferevent_free(c->bev); /* made without CLOSE_ON_FREE */
		c->bev = NULL;
	}
	c->pp_then_tls = false;
	if (hcheck_ssl(c, &ssl)) {
		close(s);
		return -1;
	}
	c->bev = bufferevent_openssl_socket_new(c->h->base, s, ssl,
						BUFFEREVENT_SSL_CONNECTING,
						BEV_OPT_CLOSE_ON_FREE);
	if (!c->bev) {
		SSL_free(ssl);
		close(s);
		return -1;
	}
	bufferevent_setcb(c->bev, hcheck_read_cb, NULL, hcheck_event_cb, c);
	return 0;
}

/* Whether the check's connection c->bev speaks HTTP/2: an h2c://
 * endpoint's always, an https:// one's when its ALPN chose h2. */
static bool hcheck_is_h2(const struct hcheck_ep *c, struct bufferevent *bev)
{
	const unsigned char *p = NULL;
	unsigned int len = 0;
	SSL *ssl;

	if (c->t.addr.scheme == CONFIG_SCHEME_H2C)
		return true;
	if (c->t.addr.scheme != CONFIG_SCHEME_HTTPS ||
	    !(ssl = bufferevent_openssl_get_ssl(bev)))
		return false;
	SSL_get0_alpn_selected(ssl, &p, &len);
	return len == 2 && memcmp(p, "h2", 2) == 0;
}

static void hcheck_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct hcheck_ep *c = arg;
	char req[CONFIG_HC_PATH_MAX + CONFIG_ADDR_STR_MAX + 128];
	int n, err = what & BEV_EVENT_ERROR ? EVUTIL_SOCKET_ERROR() : 0;

	if ((what & BEV_EVENT_CONNECTED) && c->t.send_proxy &&
	    (c->pp_then_tls || c->t.addr.scheme != CONFIG_SCHEME_HTTPS ||
	     c->t.hc.type != CONFIG_HC_HTTP)) {
		/* a check is edged's own connection: a LOCAL header (v1:
		 * its own socket named) first, on its empty send buffer */
		int e = hcheck_send_pp(c);

		if (e) {
			hcheck_result(c, false, UPREG_WHY_HC_CONNECT, e);
			return;
		}
		if (c->pp_then_tls) {
			if (hcheck_tls(c, bufferevent_getfd(bev)))
				hcheck_result(c, false, UPREG_WHY_HC_TLS, 0);
			return;
		}
	}
	if (what & BEV_EVENT_CONNECTED) {
		/* the Host an endpoint is asked with: its address and port,
		 * without a scheme; a Unix socket's is localhost */
		const char *host = c->t.addr.text, *sep = strstr(host, "://");

		if (c->t.addr.scheme == CONFIG_SCHEME_UNIX)
			host = "localhost";
		else if (sep)
			host = sep + 3;
		c->connected = true;
		if (c->t.hc.type == CONFIG_HC_TCP) {
			hcheck_result(c, true, UPREG_WHY_NONE, 0);
			return;
		}
		if (hcheck_is_h2(c, bev)) {
			if (hcheck_h2_start(c, host) ||
			    bufferevent_enable(bev, EV_READ))
				hcheck_result(c, false, UPREG_WHY_HC_NOMEM, 0);
			return;
		}
		n = snprintf(req, sizeof(req),
			     "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: "
			     "edge-health-check\r\nConnection: close\r\n\r\n",
			     c->t.hc.path, host);
		if (n < 0 || (size_t)n >= sizeof(req) ||
		    bufferevent_write(bev, req, (size_t)n) ||
		    bufferevent_enable(bev, EV_READ))
			hcheck_result(c, false, UPREG_WHY_HC_NOMEM, 0);
		return;
	}
	if (!c->connected && bufferevent_get_openssl_error(bev)) {
		while (bufferevent_get_openssl_error(bev))
			;
		hcheck_result(c, false, UPREG_WHY_HC_TLS, 0);
		return;
	}
	hcheck_result(c, false,
		      !c->connected	       ? UPREG_WHY_HC_CONNECT
		      : (what & BEV_EVENT_EOF) ? UPREG_WHY_HC_CLOSED
					       : UPREG_WHY_HC_READ,
		      err);
}

static void hcheck_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct hcheck_ep *c = arg;

	(void)fd;
	(void)what;
	hcheck_result(c, false,
		      c->connected ? UPREG_WHY_HC_TIMEOUT
				   : UPREG_WHY_HC_CONNECT_TIMEOUT,
		      0);
}

/* Start a check (unless one is in flight). */
static void hcheck_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct hcheck_ep *c = arg;
	const struct config_addr *a = &c->t.addr;
	struct timeval tv;
	int s;

	(void)fd;
	(void)what;
	if (c->bev)
		return; /* the last one is still running: its deadline ends
			   it */
	s = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		   0);
	if (s < 0) {
		log_warn_rl("health check of %s: socket", a->text);
		return; /* not the endpoint's fault: no verdict */
	}
	if (a->scheme == CONFIG_SCHEME_HTTPS &&
	    c->t.hc.type == CONFIG_HC_HTTP && c->t.send_proxy) {
		/* the header goes before TLS: a plain connect first, its
		 * socket then handed to TLS (hcheck_tls) */
		c->bev = bufferevent_socket_new(c->h->base, s, 0);
		c->pp_then_tls = c->bev != NULL;
	} else if (a->scheme == CONFIG_SCHEME_HTTPS &&
		   c->t.hc.type == CONFIG_HC_HTTP) {
		/* over TLS as the requests go (hcheck_ssl) */
		SSL *ssl;

		if (hcheck_ssl(c, &ssl)) {
			close(s);
			/* a verdict all the same: never a check that stops */
			hcheck_result(c, false, UPREG_WHY_HC_TLS, 0);
			return;
		}
		c->bev = bufferevent_openssl_socket_new(
		    c->h->base, s, ssl, BUFFEREVENT_SSL_CONNECTING,
		    BEV_OPT_CLOSE_ON_FREE);
		if (!c->bev)
			SSL_free(ssl);
	} else {
		c->bev = bufferevent_socket_new(c->h->base, s,
						BEV_OPT_CLOSE_ON_FREE);
	}
	if (!c->bev) {
		close(s);
		return;
	}
	c->connected = false;
	bufferevent_setcb(c->bev, hcheck_read_cb, NULL, hcheck_event_cb, c);
	tv.tv_sec = (time_t)(c->t.hc.timeout_ms / 1000);
	tv.tv_usec = (suseconds_t)(c->t.hc.timeout_ms % 1000 * 1000);
	evtimer_add(c->deadline, &tv);
	if (bufferevent_socket_connect(c->bev, (const struct sockaddr *)&a->ss,
				       (int)a->len) < 0)
		hcheck_result(c, false, UPREG_WHY_HC_CONNECT, errno);
}

static bool hcheck_same(const struct config_health_check *a,
			const struct config_health_check *b)
{
	return a->type == b->type && strcmp(a->path, b->path) == 0 &&
	       a->interval_ms == b->interval_ms &&
	       a->timeout_ms == b->timeout_ms &&
	       a->expect_status == b->expect_status && a->rise == b->rise &&
	       a->fall == b->fall;
}

static struct hcheck_ep *hcheck_ep_new(struct hcheck *h,
				       const struct hcheck_target *t)
{
	struct hcheck_ep *c = calloc(1, sizeof(*c));
	struct timeval tv;

	if (!c)
		return NULL;
	c->h = h;
	c->t = *t;
	c->e = upreg_get(h->g, &t->addr);
	c->tick = event_new(h->base, -1, EV_PERSIST, hcheck_tick_cb, c);
	c->deadline = evtimer_new(h->base, hcheck_deadline_cb, c);
	tv.tv_sec = (time_t)(t->hc.interval_ms / 1000);
	tv.tv_usec = (suseconds_t)(t->hc.interval_ms % 1000 * 1000);
	if (!c->e || !c->tick || !c->deadline || event_add(c->tick, &tv)) {
		hcheck_ep_free(c);
		return NULL;
	}
	event_active(c->tick, EV_TIMEOUT, 0); /* the first check now */
	return c;
}

int hcheck_set(struct hcheck *h, const struct hcheck_target *t, size_t n)
{
	struct hcheck_ep **v;
	size_t i, j, k = 0;

	/* said once per count: the database's changes call this often */
	if (n > HCHECK_MAX && n != h->warned)
		log_warnx("health checks: %zu endpoints, checking the first %d",
			  n, HCHECK_MAX);
	h->warned = n > HCHECK_MAX ? n : 0;
	if (n > HCHECK_MAX)
		n = HCHECK_MAX;
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (i = 0; i < h->n; i++)
		h->v[i]->keep = false;
	for (i = 0; i < n; i++) {
		for (j = 0; j < h->n; j++)
			if (!h->v[j]->keep &&
			    upreg_addr_eq(&h->v[j]->t.addr, &t[i].addr) &&
			    hcheck_same(&h->v[j]->t.hc, &t[i].hc) &&
			    memcmp(&h->v[j]->t.tls, &t[i].tls,
				   sizeof(t[i].tls)) == 0 &&
			    h->v[j]->t.send_proxy == t[i].send_proxy)
				break;
		if (j < h->n) {
			h->v[j]->keep = true;
			v[k++] = h->v[j];
			continue;
		}
		v[k] = hcheck_ep_new(h, &t[i]);
		if (!v[k]) {
			for (j = 0; j < k; j++)
				if (!v[j]->keep)
					hcheck_ep_free(v[j]);
			for (j = 0; j < h->n; j++)
				h->v[j]->keep = false;
			free(v);
			return -ENOMEM;
		}
		k++;
	}
	/* an endpoint out whose check changed (same address) stays out
	 * until the new check has passed rise times */
	for (i = 0; i < h->n; i++) {
		if (h->v[i]->keep || !h->v[i]->down)
			continue;
		for (j = 0; j < k; j++)
			if (!v[j]->keep &&
			    upreg_addr_eq(&v[j]->t.addr, &h->v[i]->t.addr)) {
				v[j]->down = true;
				v[j]->bad = v[j]->t.hc.fall;
				h->v[i]->down = false;
				break;
			}
	}
	for (i = 0; i < h->n; i++)
		if (!h->v[i]->keep)
			hcheck_ep_free(h->v[i]);
	free(h->v);
	h->v = v;
	h->n = k;
	return 0;
}

int hcheck_targets(const struct route_src *src, struct hcheck_target **out,
		   size_t *n)
{
	struct hcheck_target *v = NULL, *nv;
	size_t cap = 0, k = 0, p, e, u, j;

	*out = NULL;
	*n = 0;
	for (p = 0; src && p < src->n_projects; p++) {
		const struct route_src_project *pr = &src->projects[p];

		for (e = 0; e < pr->n_envs; e++) {
			const struct route_src_deployment *d =
			    &pr->envs[e].deployment;

			if (d->hc.type == CONFIG_HC_NONE)
				continue;
			for (u = 0; u < d->n_upstreams; u++) {
				for (j = 0; j < k; j++)
					if (upreg_addr_eq(&v[j].addr,
							  &d->upstreams[u]))
						break;
				if (j < k)
					continue; /* the first check wins */
				if (k == cap) {
					cap = cap ? cap * 2 : 16;
					nv = realloc(v, cap * sizeof(*v));
					if (!nv) {
						free(v);
						return -ENOMEM;
					}
					v = nv;
				}
				v[k].addr = d->upstreams[u];
				v[k].hc = d->hc;
				v[k].tls = d->tls;
				v[k].send_proxy = config_send_proxy_version(
				    CONFIG_SEND_PROXY_INHERIT, d->send_proxy);
				k++;
			}
		}
	}
	*out = v;
	*n = k;
	return 0;
}

/* A target's place in hcheck_merge: its address's canonical text, then
 * its index (so that the first of an address sorts first). */
struct hcheck_ord {
	const struct hcheck_target *t;
	size_t i;
};

static int hcheck_ord_cmp(const void *a, const void *b)
{
	const struct hcheck_ord *x = a, *y = b;
	int c = strcmp(x->t->addr.text, y->t->addr.text);

	if (c)
		return c;
	return x->i < y->i ? -1 : x->i > y->i;
}

int hcheck_merge(const struct hcheck_target *a, size_t na,
		 const struct hcheck_target *b, size_t nb,
		 struct hcheck_target **out, size_t *n,
		 void (*lost)(void *arg, const struct hcheck_target *won,
			      const struct hcheck_target *dropped),
		 void *arg)
{
	struct hcheck_ord *o = NULL;
	struct hcheck_target *v = NULL;
	bool *keep = NULL;
	size_t total = na + nb, i, k = 0, first = 0;

	*out = NULL;
	*n = 0;
	if (!total)
		return 0;
	o = calloc(total, sizeof(*o));
	keep = calloc(total, sizeof(*keep));
	v = calloc(total, sizeof(*v));
	if (!o || !keep || !v) {
		free(o);
		free(keep);
		free(v);
		return -ENOMEM;
	}
	for (i = 0; i < total; i++) {
		o[i].t = i < na ? &a[i] : &b[i - na];
		o[i].i = i;
	}
	/* the canonical text names an address once (config_addr_parse) */
	qsort(o, total, sizeof(*o), hcheck_ord_cmp);
	for (i = 0; i < total; i++) {
		if (i == 0 ||
		    strcmp(o[i].t->addr.text, o[first].t->addr.text) != 0) {
			first = i;
			keep[o[i].i] = true;
			continue;
		}
		if (lost && o[first].i < na && o[i].i >= na)
			lost(arg, o[first].t, o[i].t);
	}
	for (i = 0; i < total; i++)
		if (keep[i])
			v[k++] = i < na ? a[i] : b[i - na];
	free(o);
	free(keep);
	*out = v;
	*n = k;
	return 0;
}
