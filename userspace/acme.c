// SPDX-License-Identifier: BSD-2-Clause
/*
 * acme.c - the ACME client's orders (acme.h). One request at a time per
 * order, each on a connection of its own (evhttp over
 * bufferevent_openssl, "Connection: close"), and the order's steps as a
 * chain of handlers: every handler ends in exactly one of acme_send,
 * acme_post, acme_poll, acme_fail or acme_succeed, and touches the
 * order no more after it. Handlers run from the order's own timer event,
 * never from evhttp's callbacks, so that a connection can be freed and
 * the caller's callbacks can free the order.
 */
#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "acme.h"
#include "edge_assert.h"
#include "version.h"

#define ACME_NONCE_MAX 256
#define ACME_TOKEN_MAX 256
#define ACME_URL_MAX 2048
#define ACME_MSG_MAX 1024
#define ACME_DETAIL_SHOWN 300 /* of a problem's detail, in message */
#define ACME_POLL_FIRST_MS 200
#define ACME_POLL_MAX_MS 4000
#define ACME_CHAIN_MAX 10 /* certificates in the chain the CA sends */
#define ACME_USER_AGENT "edge-acme/" EDGE_VERSION

#define ACME_PROBLEM_NS "urn:ietf:params:acme:error:"

struct acme_client {
	struct event_base *base;
	struct evdns_base *dns;
	SSL_CTX *ssl;
	EVP_PKEY *key;
	char thumbprint[ACME_THUMBPRINT_LEN + 1];
	char *dir_url;
	char *contact;
	char *account_url;
	unsigned request_ms, order_ms;
	enum acme_chal_type chal; /* the challenge answered */
	unsigned orders;	  /* live */
};

/* A response, as much of it as the order reads. */
struct acme_resp {
	int status; /* 0: none (a transport failure) */
	char *body; /* NUL-terminated */
	size_t len;
	char *ctype;
	char *location;
	long retry_after; /* seconds; -1: none */
};

struct acme_order;
typedef void (*acme_step_fn)(struct acme_order *o);

struct acme_order {
	struct acme_client *c;
	const struct acme_ops *ops;
	void *arg;
	char **names;
	size_t n_names;

	/* the directory's URLs, the order's */
	char *new_nonce, *new_account, *new_order;
	char *order_url, *finalize_url, *cert_url;
	char **authz;
	size_t n_authz, i_authz;
	bool answered;	 /* authz[i_authz]'s challenge was answered */
	bool publishing; /* publish said it will tell (acme_order_published) */
	/* a revocation (acme_revoke_start) instead of an order: the leaf's
	 * DER in base64url, the reason code, the directory's revokeCert */
	char *revoke_b64, *revoke_url;
	int revoke_reason;
	char *chal_url;			/* the challenge being published */
	char nonce[ACME_NONCE_MAX + 1]; /* "": none held */
	char **tokens;			/* published */
	size_t n_tokens;
	EVP_PKEY *cert_key;
	unsigned poll_ms;
	const char *waiting; /* what a poll waits for (NULL: o->what) */

	/* the request in flight */
	struct evhttp_connection *evcon;
	struct bufferevent *bev;
	char what[ACME_URL_MAX + 64]; /* "newOrder POST https://..." */
	int http_err;		      /* enum evhttp_request_error + 1 */
	long verify_err;
	int sock_err;
	acme_step_fn then;
	struct acme_resp resp;

	/* the POST in flight, signed again after badNonce */
	char *post_url, *post_payload, *post_label;
	bool post_jwk; /* newAccount: the key, not the kid */
	acme_step_fn post_then;
	unsigned post_tries;

	struct event *step_ev;	   /* runs step: a handler, a poll */
	struct event *req_timer;   /* the request's time */
	struct event *order_timer; /* the order's */
	acme_step_fn step;

	/* the end */
	int in_cb;
	bool cancelled, ending;
	struct acme_result res;
	char msg[ACME_MSG_MAX];
	char *ptype, *pdetail, *cert_pem, *key_pem, *account_url;
};

static void acme_post_send(struct acme_order *o);
static void acme_authz_next(struct acme_order *o);
static void acme_on_answer(struct acme_order *o);

/* ---- the client ---------------------------------------------------- */

/* Keep the first verification error of a handshake for the message. */
static int acme_verify_cb(int ok, X509_STORE_CTX *ctx)
{
	SSL *ssl = X509_STORE_CTX_get_ex_data(
	    ctx, SSL_get_ex_data_X509_STORE_CTX_idx());
	struct acme_order *o = ssl ? SSL_get_app_data(ssl) : NULL;

	if (!ok && o && !o->verify_err)
		o->verify_err = X509_STORE_CTX_get_error(ctx);
	return ok;
}

/* A handshake step that failed for the socket (a refused connect, a
 * reset): keep errno, which libevent's TLS layer does not. */
static void acme_info_cb(const SSL *ssl, int where, int ret)
{
	struct acme_order *o = SSL_get_app_data(ssl);
	int e = errno;

	if (o && (where & SSL_CB_EXIT) && ret < 0 && e != EAGAIN &&
	    e != EWOULDBLOCK && e != EINPROGRESS && e != 0 && !o->sock_err)
		o->sock_err = e;
	errno = e;
}

int acme_client_new(struct event_base *base, const struct acme_config *cfg,
		    struct acme_client **out, struct errbuf *err)
{
	struct acme_client *c;
	int r;

	if (!cfg->directory_url ||
	    strncasecmp(cfg->directory_url, "https://", 8) != 0) {
		errbuf_set(err, "directory URL %s: not https://",
			   cfg->directory_url ? cfg->directory_url : "(none)");
		return -EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->base = base;
	c->dns = cfg->dns;
	c->chal = cfg->challenge;
	c->request_ms = cfg->request_timeout_ms ? cfg->request_timeout_ms
						: ACME_REQUEST_TIMEOUT_MS;
	c->order_ms = cfg->order_timeout_ms ? cfg->order_timeout_ms
					    : ACME_ORDER_TIMEOUT_MS;
	c->dir_url = strdup(cfg->directory_url);
	c->contact = cfg->contact ? strdup(cfg->contact) : NULL;
	if (!c->dir_url || (cfg->contact && !c->contact)) {
		r = -ENOMEM;
		goto fail;
	}
	r = acme_key_load_or_create(cfg->account_key_file, &c->key, err);
	if (r < 0)
		goto fail;
	if (acme_jwk_thumbprint(c->key, c->thumbprint) < 0) {
		r = -EIO;
		errbuf_set(err, "%s: no JWK thumbprint", cfg->account_key_file);
		goto fail;
	}
	c->ssl = SSL_CTX_new(TLS_client_method());
	if (!c->ssl || !SSL_CTX_set_min_proto_version(c->ssl, TLS1_2_VERSION)) {
		r = -ENOMEM;
		goto fail;
	}
	SSL_CTX_set_verify(c->ssl, SSL_VERIFY_PEER, acme_verify_cb);
	if (cfg->ca_file ? SSL_CTX_load_verify_file(c->ssl, cfg->ca_file) != 1
			 : SSL_CTX_set_default_verify_paths(c->ssl) != 1) {
		r = -EINVAL;
		errbuf_set(err, "CA file %s: no certificate read",
			   cfg->ca_file ? cfg->ca_file : "(default)");
		goto fail;
	}
	ERR_clear_error();
	*out = c;
	return 0;
fail:
	ERR_clear_error();
	acme_client_free(c);
	return r;
}

void acme_client_free(struct acme_client *c)
{
	if (!c)
		return;
	EDGE_ASSERT_MSG(c->orders == 0, "%u orders live", c->orders);
	SSL_CTX_free(c->ssl);
	EVP_PKEY_free(c->key);
	free(c->dir_url);
	free(c->contact);
	free(c->account_url);
	free(c);
}

const char *acme_client_account_url(const struct acme_client *c)
{
	return c->account_url;
}

/* ---- the order's end ----------------------------------------------- */

static void acme_resp_clear(struct acme_resp *r)
{
	free(r->body);
	free(r->ctype);
	free(r->location);
	memset(r, 0, sizeof(*r));
	r->retry_after = -1;
}

/* Drop the connection of the request in flight, or of the last one
 * (never from within evhttp's callbacks). */
static void acme_conn_drop(struct acme_order *o)
{
	if (o->evcon)
		evhttp_connection_free(o->evcon); /* frees bev, the SSL */
	o->evcon = NULL;
	o->bev = NULL;
	if (o->req_timer)
		evtimer_del(o->req_timer);
}

static void acme_strv_free(char **v, size_t n)
{
	size_t i;

	for (i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

static void acme_order_free(struct acme_order *o)
{
	acme_conn_drop(o);
	if (o->step_ev)
		event_free(o->step_ev);
	if (o->req_timer)
		event_free(o->req_timer);
	if (o->order_timer)
		event_free(o->order_timer);
	acme_resp_clear(&o->resp);
	acme_strv_free(o->names, o->n_names);
	acme_strv_free(o->authz, o->n_authz);
	acme_strv_free(o->tokens, o->n_tokens);
	free(o->new_nonce);
	free(o->new_account);
	free(o->new_order);
	free(o->order_url);
	free(o->finalize_url);
	free(o->cert_url);
	free(o->chal_url);
	free(o->revoke_b64);
	free(o->revoke_url);
	free(o->post_url);
	free(o->post_payload);
	free(o->post_label);
	free(o->ptype);
	free(o->pdetail);
	free(o->account_url);
	if (o->key_pem)
		OPENSSL_cleanse(o->key_pem, strlen(o->key_pem));
	free(o->key_pem);
	free(o->cert_pem);
	EVP_PKEY_free(o->cert_key);
	free(o);
}

/* Stop everything and unpublish each token: the first half of both
 * ends (done or cancelled). */
static void acme_wind_down(struct acme_order *o)
{
	size_t i;

	o->ending = true;
	acme_conn_drop(o);
	evtimer_del(o->step_ev);
	evtimer_del(o->order_timer);
	o->c->orders--;
	for (i = 0; i < o->n_tokens; i++)
		if (o->ops->unpublish)
			o->ops->unpublish(o->arg, o->tokens[i]);
}

/* The order's end: unpublish, done, free. */
static void acme_end(struct acme_order *o)
{
	o->res.message = o->msg;
	o->res.problem_type = o->ptype;
	o->res.problem_detail = o->pdetail;
	/* the order's copy: done may free the client */
	free(o->account_url);
	o->account_url = o->c->account_url ? strdup(o->c->account_url) : NULL;
	o->res.account_url = o->account_url;
	o->res.cert_pem = o->res.error ? NULL : o->cert_pem;
	o->res.key_pem = o->res.error ? NULL : o->key_pem;
	o->res.http_status = o->resp.status;
	acme_wind_down(o);
	o->ops->done(o->arg, &o->res);
	acme_order_free(o);
}

static void acme_fail(struct acme_order *o, int error, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* End o with error (a negative errno) and the message fmt. */
static void acme_fail(struct acme_order *o, int error, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(o->msg, sizeof(o->msg), fmt, ap);
	va_end(ap);
	o->res.error = error < 0 ? error : -EIO;
	acme_end(o);
}

static void acme_succeed(struct acme_order *o)
{
	o->msg[0] = '\0';
	o->res.error = 0;
	acme_end(o);
}

void acme_order_cancel(struct acme_order *o)
{
	if (!o || o->ending)
		return;
	if (o->in_cb) { /* inside publish: when it returns */
		o->cancelled = true;
		return;
	}
	acme_wind_down(o);
	acme_order_free(o);
}

/* ---- steps and timers ---------------------------------------------- */

static void acme_step_cb(evutil_socket_t fd, short what, void *arg)
{
	struct acme_order *o = arg;

	(void)fd;
	(void)what;
	o->step(o);
}

/* Run fn from the loop after ms milliseconds. */
static void acme_later(struct acme_order *o, unsigned ms, acme_step_fn fn)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

	o->step = fn;
	evtimer_add(o->step_ev, &tv);
}

static void acme_req_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct acme_order *o = arg;

	(void)fd;
	(void)what;
	acme_conn_drop(o);
	acme_fail(o, -ETIMEDOUT, "%s: no answer within %u ms", o->what,
		  o->c->request_ms);
}

static void acme_order_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct acme_order *o = arg;

	(void)fd;
	(void)what;
	acme_fail(o, -ETIMEDOUT, "the order did not end within %u ms (%s)",
		  o->c->order_ms, o->waiting ? o->waiting : o->what);
}

/* ---- HTTPS --------------------------------------------------------- */

/* Whether s has only printable ASCII (no space, no control): safe in a
 * request line and a JSON string. */
static bool acme_printable(const char *s, size_t max)
{
	size_t i;

	for (i = 0; s[i]; i++)
		if (i >= max || (unsigned char)s[i] <= 0x20 ||
		    (unsigned char)s[i] >= 0x7f)
			return false;
	return i > 0;
}

static bool acme_b64url_chars(const char *s, size_t max)
{
	size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuv"
			     "wxyz0123456789-_");

	return n > 0 && n <= max && s[n] == '\0';
}

static char *acme_header_dup(struct evkeyvalq *h, const char *name)
{
	const char *v = evhttp_find_header(h, name);

	return v ? strdup(v) : NULL;
}

/* Retry-After: delay-seconds or an HTTP-date; -1 when absent or bad. */
static long acme_retry_after(const char *v)
{
	struct tm tm;
	char *end;
	long s;
	time_t t;

	if (!v)
		return -1;
	if (isdigit((unsigned char)*v)) {
		errno = 0;
		s = strtol(v, &end, 10);
		return (errno || *end || s > 86400) ? -1 : s;
	}
	memset(&tm, 0, sizeof(tm));
	end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (!end || *end)
		return -1;
	t = timegm(&tm) - time(NULL);
	return t < 0 ? 0 : (t > 86400 ? -1 : (long)t);
}

/* evhttp's callback: keep the answer; the step runs from the loop. */
static void acme_on_response(struct evhttp_request *req, void *arg)
{
	struct acme_order *o = arg;
	struct evkeyvalq *h;
	struct evbuffer *in;
	const char *nonce;

	evtimer_del(o->req_timer);
	acme_resp_clear(&o->resp);
	if (!req || evhttp_request_get_response_code(req) <= 0) {
		if (!o->sock_err)
			o->sock_err = EVUTIL_SOCKET_ERROR();
		acme_later(o, 0, acme_on_answer);
		return;
	}
	o->resp.status = evhttp_request_get_response_code(req);
	h = evhttp_request_get_input_headers(req);
	nonce = evhttp_find_header(h, "Replay-Nonce");
	if (nonce && acme_b64url_chars(nonce, ACME_NONCE_MAX))
		snprintf(o->nonce, sizeof(o->nonce), "%s", nonce);
	o->resp.ctype = acme_header_dup(h, "Content-Type");
	o->resp.location = acme_header_dup(h, "Location");
	o->resp.retry_after =
	    acme_retry_after(evhttp_find_header(h, "Retry-After"));
	in = evhttp_request_get_input_buffer(req);
	o->resp.len = evbuffer_get_length(in);
	o->resp.body = malloc(o->resp.len + 1);
	if (o->resp.body) {
		evbuffer_remove(in, o->resp.body, o->resp.len);
		o->resp.body[o->resp.len] = '\0';
	} else {
		o->resp.status = 0;
		o->sock_err = ENOMEM;
	}
	acme_later(o, 0, acme_on_answer);
}

static void acme_on_http_error(enum evhttp_request_error e, void *arg)
{
	struct acme_order *o = arg;

	o->http_err = (int)e + 1;
}

/* Whether the response's Content-Type is type (parameters aside). */
static bool acme_ctype_is(const struct acme_resp *r, const char *type)
{
	size_t n = strlen(type);

	return r->ctype && strncasecmp(r->ctype, type, n) == 0 &&
	       (r->ctype[n] == '\0' || r->ctype[n] == ';' ||
		r->ctype[n] == ' ');
}

/* Whether a socket error is the connection's own (not one left in
 * errno by something else). */
static bool acme_sock_error(int e)
{
	return e == ECONNREFUSED || e == ECONNRESET || e == EHOSTUNREACH ||
	       e == ENETUNREACH || e == ETIMEDOUT || e == EPIPE ||
	       e == ECONNABORTED || e == EADDRNOTAVAIL;
}

/* Fail for a request that got no answer, saying why. */
static void acme_fail_transport(struct acme_order *o)
{
	unsigned long e = o->bev ? bufferevent_get_openssl_error(o->bev) : 0;
	int dns = o->bev ? bufferevent_socket_get_dns_error(o->bev) : 0;
	char tls[256];

	/* libevent queues SSL_get_error()'s codes (library 0) too */
	if (e && ERR_GET_LIB(e) == 0)
		e = 0;
	if (o->verify_err)
		acme_fail(o, -EPROTO, "%s: the server's certificate: %s",
			  o->what,
			  X509_verify_cert_error_string(o->verify_err));
	else if (dns)
		acme_fail(o, -EHOSTUNREACH, "%s: resolving the host: %s",
			  o->what, evutil_gai_strerror(dns));
	else if (acme_sock_error(o->sock_err))
		acme_fail(o, -o->sock_err, "%s: %s", o->what,
			  strerror(o->sock_err));
	else if (e) {
		ERR_error_string_n(e, tls, sizeof(tls));
		acme_fail(o, -EPROTO, "%s: TLS: %s", o->what, tls);
	} else if (o->http_err == EVREQ_HTTP_DATA_TOO_LONG + 1)
		acme_fail(o, -EPROTO,
			  "%s: the answer is too large (over %d bytes of body "
			  "or %d of header fields)",
			  o->what, ACME_BODY_MAX, ACME_HEADERS_MAX);
	else if (o->http_err == EVREQ_HTTP_INVALID_HEADER + 1)
		/* evhttp says so of a head over ACME_HEADERS_MAX too */
		acme_fail(o, -EPROTO,
			  "%s: a malformed HTTP head, or one over %d bytes",
			  o->what, ACME_HEADERS_MAX);
	else if (o->http_err == EVREQ_HTTP_TIMEOUT + 1)
		acme_fail(o, -ETIMEDOUT, "%s: timed out", o->what);
	else if (o->sock_err == ENOMEM)
		acme_fail(o, -ENOMEM, "%s: out of memory", o->what);
	else
		acme_fail(o, -EPROTO,
			  "%s: the connection ended without an HTTP answer",
			  o->what);
}

/* The problem document in the response: kept, then the order fails. */
static void acme_fail_problem(struct acme_order *o, json_t *doc)
{
	const char *type = json_string_value(json_object_get(doc, "type"));
	const char *detail = json_string_value(json_object_get(doc, "detail"));
	json_t *st = json_object_get(doc, "status");

	free(o->ptype);
	free(o->pdetail);
	/* an account the CA forgot: the next order registers again */
	if (type && strcmp(type, ACME_PROBLEM_NS "accountDoesNotExist") == 0) {
		free(o->c->account_url);
		o->c->account_url = NULL;
	}
	o->ptype = type ? strdup(type) : NULL;
	o->pdetail = detail ? strdup(detail) : NULL;
	o->res.problem_status =
	    json_is_integer(st) ? (int)json_integer_value(st) : o->resp.status;
	acme_fail(o, -EREMOTEIO, "%s: %s: %.*s (status %d)", o->what,
		  type ? type : "(a problem without a type)", ACME_DETAIL_SHOWN,
		  detail ? detail : "(no detail)", o->res.problem_status);
}

/* Every response's first step: the connection freed, a transport
 * failure, a problem document (badNonce: the POST sent again), a
 * redirect or an error status end the order; else o->then. */
static void acme_on_answer(struct acme_order *o)
{
	json_t *doc;
	const char *type;

	if (o->resp.status == 0) {
		acme_fail_transport(o); /* reads the connection's errors */
		return;
	}
	acme_conn_drop(o);
	if (acme_ctype_is(&o->resp, "application/problem+json")) {
		doc = json_loadb(o->resp.body, o->resp.len, 0, NULL);
		type = json_string_value(json_object_get(doc, "type"));
		if (!json_is_object(doc)) {
			json_decref(doc);
			return acme_fail(o, -EPROTO,
					 "%s: HTTP %d with a problem document "
					 "that is not a JSON object",
					 o->what, o->resp.status);
		}
		if (type && strcmp(type, ACME_PROBLEM_NS "badNonce") == 0 &&
		    o->post_then && o->then == o->post_then &&
		    o->post_tries < ACME_BADNONCE_RETRIES) {
			json_decref(doc);
			o->post_tries++;
			o->res.nonce_retries++;
			return acme_post_send(o);
		}
		acme_fail_problem(o, doc);
		json_decref(doc);
		return;
	}
	if (o->resp.status >= 300 && o->resp.status < 400)
		return acme_fail(o, -EPROTO,
				 "%s: HTTP %d, a redirect (not followed)",
				 o->what, o->resp.status);
	if (o->resp.status >= 400 || o->resp.status < 200)
		return acme_fail(o, -EREMOTEIO, "%s: HTTP %d", o->what,
				 o->resp.status);
	o->then(o);
}

/* Send a request: url (https://, from the caller or the CA), body (NULL:
 * none), then run then with o->resp once answered (2xx). label names
 * the step in messages. */
static void acme_send(struct acme_order *o, enum evhttp_cmd_type cmd,
		      const char *label, const char *url, const char *body,
		      acme_step_fn then)
{
	const char *method = cmd == EVHTTP_REQ_GET    ? "GET"
			     : cmd == EVHTTP_REQ_HEAD ? "HEAD"
						      : "POST";
	struct evhttp_uri *uri = NULL;
	struct evhttp_request *req = NULL;
	struct evkeyvalq *h;
	const char *host, *path, *query;
	char addr[256], hosthdr[300], target[ACME_URL_MAX + 2];
	struct timeval tv;
	SSL *ssl = NULL;
	size_t hlen;
	bool is_ip;
	int port;

	snprintf(o->what, sizeof(o->what), "%s %s %.*s", label, method,
		 ACME_URL_MAX, url ? url : "(none)");
	acme_resp_clear(&o->resp);
	o->waiting = NULL;
	o->http_err = 0;
	o->verify_err = 0;
	o->sock_err = 0;
	if (!url || !acme_printable(url, ACME_URL_MAX) ||
	    strncasecmp(url, "https://", 8) != 0 ||
	    !(uri = evhttp_uri_parse(url)) ||
	    !(host = evhttp_uri_get_host(uri)) || !*host)
		goto bad_url;
	hlen = strlen(host);
	if (host[0] == '[') { /* an IPv6 literal */
		if (hlen < 3 || hlen - 2 >= sizeof(addr) ||
		    host[hlen - 1] != ']')
			goto bad_url;
		snprintf(addr, sizeof(addr), "%.*s", (int)(hlen - 2), host + 1);
	} else if (hlen < sizeof(addr)) {
		snprintf(addr, sizeof(addr), "%s", host);
	} else {
		goto bad_url;
	}
	port = evhttp_uri_get_port(uri);
	if (port == 0 || port > 65535)
		goto bad_url;
	if (port < 0)
		port = 443;
	path = evhttp_uri_get_path(uri);
	query = evhttp_uri_get_query(uri);
	snprintf(target, sizeof(target), "%s%s%s", path && *path ? path : "/",
		 query ? "?" : "", query ? query : "");
	if (port == 443)
		snprintf(hosthdr, sizeof(hosthdr), "%s", host);
	else
		snprintf(hosthdr, sizeof(hosthdr), "%s:%d", host, port);

	ssl = SSL_new(o->c->ssl);
	if (!ssl)
		goto nomem;
	SSL_set_app_data(ssl, o);
	SSL_set_info_callback(ssl, acme_info_cb);
	is_ip =
	    strchr(addr, ':') || strspn(addr, "0123456789.") == strlen(addr);
	if (is_ip
		? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), addr) != 1
		: (SSL_set_tlsext_host_name(ssl, addr) != 1 ||
		   SSL_set1_host(ssl, addr) != 1))
		goto bad_url;
	o->bev = bufferevent_openssl_socket_new(
	    o->c->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
	    BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	ssl = NULL; /* the bufferevent's, even when it failed */
	if (!o->bev)
		goto nomem;
	o->evcon = evhttp_connection_base_bufferevent_new(
	    o->c->base, o->c->dns, o->bev, addr, (unsigned short)port);
	if (!o->evcon) {
		bufferevent_free(o->bev);
		o->bev = NULL;
		goto nomem;
	}
	evhttp_connection_set_max_body_size(o->evcon, ACME_BODY_MAX);
	evhttp_connection_set_max_headers_size(o->evcon, ACME_HEADERS_MAX);
	/* evhttp's own timeouts only back up the request's timer */
	tv.tv_sec = o->c->request_ms / 1000 + 1;
	tv.tv_usec = (o->c->request_ms % 1000) * 1000;
	evhttp_connection_set_timeout_tv(o->evcon, &tv);
	req = evhttp_request_new(acme_on_response, o);
	if (!req)
		goto nomem;
	evhttp_request_set_error_cb(req, acme_on_http_error);
	h = evhttp_request_get_output_headers(req);
	if (evhttp_add_header(h, "Host", hosthdr) ||
	    evhttp_add_header(h, "User-Agent", ACME_USER_AGENT) ||
	    evhttp_add_header(h, "Connection", "close") ||
	    (body &&
	     (evhttp_add_header(h, "Content-Type", "application/jose+json") ||
	      evbuffer_add(evhttp_request_get_output_buffer(req), body,
			   strlen(body)))))
		goto nomem;
	evhttp_uri_free(uri);
	o->then = then;
	tv.tv_sec = o->c->request_ms / 1000;
	tv.tv_usec = (o->c->request_ms % 1000) * 1000;
	evtimer_add(o->req_timer, &tv);
	/* may call acme_on_response at once (a refused connect): it only
	 * schedules the step */
	if (evhttp_make_request(o->evcon, req, cmd, target) < 0)
		acme_later(o, 0, acme_on_answer); /* no answer */
	return;
bad_url:
	SSL_free(ssl);
	evhttp_uri_free(uri);
	acme_conn_drop(o);
	return acme_fail(o, -EPROTO, "%s: not a usable https:// URL", o->what);
nomem:
	if (req)
		evhttp_request_free(req);
	SSL_free(ssl);
	evhttp_uri_free(uri);
	acme_conn_drop(o);
	return acme_fail(o, -ENOMEM, "%s: out of memory", o->what);
}

/* The response's body as a JSON object (the caller's reference), or
 * NULL when the order failed for it. */
static json_t *acme_json(struct acme_order *o)
{
	json_error_t jerr;
	json_t *j;

	if (!acme_ctype_is(&o->resp, "application/json")) {
		acme_fail(o, -EPROTO,
			  "%s: HTTP %d of type %.100s, not application/json",
			  o->what, o->resp.status,
			  o->resp.ctype ? o->resp.ctype : "(none)");
		return NULL;
	}
	j = json_loadb(o->resp.body, o->resp.len, JSON_REJECT_DUPLICATES,
		       &jerr);
	if (!json_is_object(j)) {
		acme_fail(o, -EPROTO, "%s: not a JSON object: %.100s", o->what,
			  j ? "another JSON value" : jerr.text);
		json_decref(j);
		return NULL;
	}
	return j;
}

/* key's string member of j, or NULL when it has none. */
static const char *acme_str(json_t *j, const char *key)
{
	return json_string_value(json_object_get(j, key));
}

/* POST payload (NULL: POST-as-GET) to url, signed with the kid (or the
 * key for newAccount), then then(o) once answered. badNonce sends it
 * again (acme_on_answer). */
static void acme_post(struct acme_order *o, const char *label, const char *url,
		      const char *payload, acme_step_fn then)
{
	free(o->post_url);
	free(o->post_payload);
	free(o->post_label);
	o->post_url = url ? strdup(url) : NULL;
	o->post_payload = payload ? strdup(payload) : NULL;
	o->post_label = strdup(label);
	o->post_then = then;
	o->post_tries = 0;
	if (!url)
		return acme_fail(o, -EPROTO, "%s: no URL", label);
	if (!o->post_url || (payload && !o->post_payload) || !o->post_label)
		return acme_fail(o, -ENOMEM, "%s: out of memory", label);
	acme_post_send(o);
}

static void acme_on_nonce(struct acme_order *o)
{
	if (!o->nonce[0])
		return acme_fail(o, -EPROTO, "%s: no Replay-Nonce", o->what);
	acme_post_send(o);
}

/* Sign and send the POST held in o, a nonce fetched first if none. */
static void acme_post_send(struct acme_order *o)
{
	char *jws;

	if (!o->nonce[0])
		return acme_send(o, EVHTTP_REQ_HEAD, "newNonce", o->new_nonce,
				 NULL, acme_on_nonce);
	jws = acme_jws(o->c->key, o->post_jwk ? NULL : o->c->account_url,
		       o->nonce, o->post_url, o->post_payload);
	o->nonce[0] = '\0'; /* used */
	if (!jws)
		return acme_fail(o, -EIO, "%s: cannot sign the request",
				 o->post_label);
	acme_send(o, EVHTTP_REQ_POST, o->post_label, o->post_url, jws,
		  o->post_then);
	free(jws);
}

/* Run fn after Retry-After, else the next back-off delay; waiting says
 * what for, should the order's time run out meanwhile. */
static void acme_poll(struct acme_order *o, acme_step_fn fn,
		      const char *waiting)
{
	unsigned ms = o->poll_ms;

	o->waiting = waiting;
	if (o->resp.retry_after >= 0)
		ms = o->resp.retry_after * 1000 > ACME_POLL_FIRST_MS
			 ? (unsigned)o->resp.retry_after * 1000
			 : ACME_POLL_FIRST_MS;
	else
		o->poll_ms = o->poll_ms * 2 > ACME_POLL_MAX_MS
				 ? ACME_POLL_MAX_MS
				 : o->poll_ms * 2;
	acme_later(o, ms, fn);
}

/* ---- the order's steps --------------------------------------------- */

/* Fail for an object (an authorization, a challenge, an order) that
 * became invalid: what says which, err is its problem document. */
static void acme_fail_obj_error(struct acme_order *o, json_t *err,
				const char *what)
{
	if (json_is_object(err)) {
		if (what != o->what)
			snprintf(o->what, sizeof(o->what), "%s", what);
		return acme_fail_problem(o, err);
	}
	acme_fail(o, -EREMOTEIO, "%s (no error given)", what);
}

/* The chain: PEM certificates, the leaf first, for the order's key and
 * every name. */
static void acme_on_cert(struct acme_order *o)
{
	BIO *bio = NULL, *kb = NULL;
	X509 *x, *leaf = NULL;
	const char *why = NULL, *name = "";
	char *pem;
	long len;
	int n = 0;
	size_t i;

	if (!acme_ctype_is(&o->resp, "application/pem-certificate-chain")) {
		acme_fail(o, -EPROTO, "%s: type %.100s, not a PEM chain",
			  o->what, o->resp.ctype ? o->resp.ctype : "(none)");
		return;
	}
	bio = BIO_new_mem_buf(o->resp.body, (int)o->resp.len);
	while (bio && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
		if (n++ == 0)
			leaf = x;
		else
			X509_free(x);
	}
	ERR_clear_error();
	if (!leaf)
		why = "no PEM certificate";
	else if (n > ACME_CHAIN_MAX + 1)
		why = "more certificates than a chain has";
	else if (X509_check_private_key(leaf, o->cert_key) != 1)
		why = "the certificate is not for the order's key";
	for (i = 0; !why && i < o->n_names; i++) {
		if (X509_check_host(leaf, o->names[i], 0,
				    X509_CHECK_FLAG_NO_WILDCARDS |
					X509_CHECK_FLAG_NEVER_CHECK_SUBJECT,
				    NULL) != 1) {
			why = "the certificate does not name ";
			name = o->names[i];
		}
	}
	if (!why) {
		kb = BIO_new(BIO_s_mem());
		if (!kb ||
		    !PEM_write_bio_PrivateKey(kb, o->cert_key, NULL, NULL, 0,
					      NULL, NULL) ||
		    (len = BIO_get_mem_data(kb, &pem)) <= 0 ||
		    !(o->key_pem = strndup(pem, (size_t)len)) ||
		    !(o->cert_pem = strdup(o->resp.body)))
			why = "out of memory";
	}
	ERR_clear_error();
	X509_free(leaf);
	BIO_free(bio);
	BIO_free(kb);
	if (why)
		return acme_fail(o, -EPROTO, "%s: %s%s", o->what, why, name);
	acme_succeed(o);
}

static void acme_order_poll(struct acme_order *o);

/* The order after finalize, or polled: valid, processing or invalid. */
static void acme_on_finalized(struct acme_order *o)
{
	json_t *j = acme_json(o);
	const char *st, *cert;
	char what[ACME_URL_MAX + 64];

	if (!j)
		return;
	st = acme_str(j, "status");
	cert = acme_str(j, "certificate");
	if (st && strcmp(st, "valid") == 0 && cert) {
		o->cert_url = strdup(cert);
		json_decref(j);
		if (!o->cert_url)
			return acme_fail(o, -ENOMEM, "out of memory");
		return acme_post(o, "certificate", o->cert_url, NULL,
				 acme_on_cert);
	}
	if (st && strcmp(st, "valid") == 0) {
		json_decref(j);
		return acme_fail(o, -EPROTO,
				 "%s: a valid order without a "
				 "certificate URL",
				 o->what);
	}
	if (st && (strcmp(st, "processing") == 0 || strcmp(st, "ready") == 0)) {
		json_decref(j);
		return acme_poll(o, acme_order_poll,
				 "waiting for the order to be valid");
	}
	snprintf(what, sizeof(what), "the order %.*s is %.20s", ACME_URL_MAX,
		 o->order_url, st ? st : "(no status)");
	acme_fail_obj_error(o, json_object_get(j, "error"), what);
	json_decref(j);
}

static void acme_order_poll(struct acme_order *o)
{
	acme_post(o, "order", o->order_url, NULL, acme_on_finalized);
}

/* Every authorization valid: a new key, its CSR, finalize. */
static void acme_finalize(struct acme_order *o)
{
	unsigned char *der = NULL;
	size_t len = 0;
	char *b64 = NULL, *payload = NULL;
	json_t *j = NULL;

	o->cert_key = acme_key_new();
	if (!o->cert_key ||
	    acme_csr_der(o->cert_key, (const char *const *)o->names, o->n_names,
			 &der, &len) < 0)
		return acme_fail(o, -EIO, "cannot make the key and its CSR");
	b64 = malloc(B64URL_LEN(len) + 1);
	if (b64) {
		b64url_encode(der, len, b64);
		j = json_pack("{s:s}", "csr", b64);
		payload = j ? json_dumps(j, JSON_COMPACT) : NULL;
	}
	OPENSSL_free(der);
	free(b64);
	json_decref(j);
	if (!payload)
		return acme_fail(o, -ENOMEM, "out of memory");
	o->poll_ms = ACME_POLL_FIRST_MS;
	acme_post(o, "finalize", o->finalize_url, payload, acme_on_finalized);
	free(payload);
}

static void acme_on_challenge(struct acme_order *o)
{
	json_t *j = acme_json(o);
	const char *st;

	if (!j)
		return;
	st = acme_str(j, "status");
	if (st && strcmp(st, "invalid") == 0) {
		snprintf(o->what, sizeof(o->what),
			 "the %s challenge of %.*s is invalid",
			 acme_chal_type_name(o->c->chal), ACME_URL_MAX,
			 o->authz[o->i_authz]);
		acme_fail_obj_error(o, json_object_get(j, "error"), o->what);
		json_decref(j);
		return;
	}
	json_decref(j);
	o->answered = true;
	acme_poll(o, acme_authz_next,
		  "waiting for an authorization to be valid");
}

/* The token published: answer its challenge. */
static void acme_published(struct acme_order *o)
{
	char *url = o->chal_url;

	o->chal_url = NULL;
	o->poll_ms = ACME_POLL_FIRST_MS;
	acme_post(o, "challenge", url, "{}", acme_on_challenge);
	free(url);
}

/* Publish authz's challenge (chal, of the client's type, for name) and
 * answer it, now or when publish says it is done. */
static void acme_answer(struct acme_order *o, json_t *chal, const char *name)
{
	const char *token = acme_str(chal, "token"),
		   *url = acme_str(chal, "url");
	char ka[ACME_TOKEN_MAX + ACME_THUMBPRINT_LEN + 2];
	struct acme_chal_row row;
	char **v;
	int r;

	if (!token || !url || !acme_b64url_chars(token, ACME_TOKEN_MAX))
		return acme_fail(o, -EPROTO, "%s: the %s challenge has %s",
				 o->what, acme_chal_type_name(o->c->chal),
				 !url ? "no url" : "no usable token");
	snprintf(ka, sizeof(ka), "%s.%s", token, o->c->thumbprint);
	v = realloc(o->tokens, (o->n_tokens + 1) * sizeof(*v));
	if (!v)
		return acme_fail(o, -ENOMEM, "out of memory");
	o->tokens = v;
	if (!(v[o->n_tokens] = strdup(token)))
		return acme_fail(o, -ENOMEM, "out of memory");
	free(o->chal_url);
	if (!(o->chal_url = strdup(url))) {
		free(o->tokens[--o->n_tokens]);
		return acme_fail(o, -ENOMEM, "out of memory");
	}
	o->n_tokens++;
	row.name = name;
	row.type = o->c->chal;
	row.token = token;
	row.key_authorization = ka;
	o->in_cb++;
	r = o->ops->publish ? o->ops->publish(o->arg, &row) : -ENOSYS;
	o->in_cb--;
	if (r < 0) { /* not published: not unpublished either */
		free(o->tokens[--o->n_tokens]);
		if (o->cancelled)
			return acme_order_cancel(o);
		return acme_fail(o, r, "publishing the token for %s: %s",
				 o->what, strerror(-r));
	}
	if (o->cancelled) {
		o->cancelled = false;
		return acme_order_cancel(o);
	}
	if (r > 0) { /* acme_order_published will say */
		o->publishing = true;
		return;
	}
	acme_published(o);
}

void acme_order_published(struct acme_order *o, int rc)
{
	if (!o || !o->publishing || o->ending)
		return;
	o->publishing = false;
	if (rc < 0)
		return acme_fail(o, rc, "publishing the token for %s: %s",
				 o->what, strerror(-rc));
	acme_published(o);
}

/* An authorization's answer: valid (the next one), pending (answer its
 * challenge, or poll), else the order fails. */
static void acme_on_authz(struct acme_order *o)
{
	json_t *j = acme_json(o), *chals, *ch, *found = NULL;
	const char *st, *type, *ident;
	char what[ACME_URL_MAX + 64];
	size_t i;

	if (!j)
		return;
	st = acme_str(j, "status");
	if (st && strcmp(st, "valid") == 0) {
		json_decref(j);
		o->i_authz++;
		o->answered = false;
		return acme_authz_next(o);
	}
	chals = json_object_get(j, "challenges");
	json_array_foreach(chals, i, ch)
	{
		type = acme_str(ch, "type");
		if (type &&
		    strcmp(type, acme_chal_type_name(o->c->chal)) == 0) {
			found = ch;
			break;
		}
	}
	if (st && strcmp(st, "pending") == 0 && o->answered) {
		json_decref(j);
		return acme_poll(o, acme_authz_next,
				 "waiting for an authorization to be valid");
	}
	if (st && strcmp(st, "pending") == 0) {
		if (!found) {
			json_decref(j);
			return acme_fail(o, -EREMOTEIO,
					 "%s: no %s challenge offered", o->what,
					 acme_chal_type_name(o->c->chal));
		}
		ident = acme_str(json_object_get(j, "identifier"), "value");
		for (i = 0; ident && i < o->n_names; i++)
			if (strcmp(ident, o->names[i]) == 0)
				break;
		if (!ident || i == o->n_names) {
			json_decref(j);
			return acme_fail(o, -EPROTO,
					 "%s: its identifier is none of the "
					 "order's names",
					 o->what);
		}
		acme_answer(o, found, o->names[i]);
		json_decref(j);
		return;
	}
	/* invalid (the challenge's error says why), expired, ... */
	ident = acme_str(json_object_get(j, "identifier"), "value");
	if (!ident || !acme_printable(ident, ACME_NAME_MAX))
		ident = o->authz[o->i_authz];
	snprintf(what, sizeof(what), "the authorization for %.*s is %.20s",
		 ACME_URL_MAX, ident, st ? st : "(no status)");
	acme_fail_obj_error(o, found ? json_object_get(found, "error") : NULL,
			    what);
	json_decref(j);
}

/* Fetch the current authorization (again, when polled), or finalize
 * once all are valid. */
static void acme_authz_next(struct acme_order *o)
{
	if (o->i_authz == o->n_authz)
		return acme_finalize(o);
	acme_post(o, "authorization", o->authz[o->i_authz], NULL,
		  acme_on_authz);
}

static void acme_on_order(struct acme_order *o)
{
	json_t *j = acme_json(o), *az, *v;
	const char *fin, *st;
	size_t i, n;

	if (!j)
		return;
	st = acme_str(j, "status");
	fin = acme_str(j, "finalize");
	az = json_object_get(j, "authorizations");
	n = json_array_size(az);
	if (!o->resp.location || !fin || !st || n == 0 || n > ACME_NAMES_MAX) {
		json_decref(j);
		return acme_fail(o, -EPROTO, "%s: the order lacks %s", o->what,
				 !o->resp.location ? "a Location"
				 : !fin		   ? "finalize"
				 : !st		   ? "a status"
						   : "usable authorizations");
	}
	if (strcmp(st, "pending") != 0 && strcmp(st, "ready") != 0) {
		json_decref(j);
		return acme_fail(o, -EREMOTEIO, "%s: a new order is %.20s",
				 o->what, st);
	}
	o->order_url = strdup(o->resp.location);
	o->finalize_url = strdup(fin);
	o->authz = calloc(n, sizeof(*o->authz));
	if (!o->order_url || !o->finalize_url || !o->authz) {
		json_decref(j);
		return acme_fail(o, -ENOMEM, "out of memory");
	}
	json_array_foreach(az, i, v)
	{
		if (!json_is_string(v) ||
		    !(o->authz[o->n_authz++] = strdup(json_string_value(v)))) {
			json_decref(j);
			return acme_fail(o, -EPROTO, "%s: a bad authorization",
					 o->what);
		}
	}
	json_decref(j);
	o->i_authz = 0;
	acme_authz_next(o);
}

static void acme_new_order(struct acme_order *o)
{
	json_t *ids = json_array(), *j = NULL;
	char *payload = NULL;
	size_t i;

	for (i = 0; ids && i < o->n_names; i++)
		if (json_array_append_new(ids,
					  json_pack("{s:s, s:s}", "type", "dns",
						    "value", o->names[i])) < 0)
			break;
	if (ids && i == o->n_names)
		j = json_pack("{s:O}", "identifiers", ids);
	if (j)
		payload = json_dumps(j, JSON_COMPACT);
	json_decref(ids);
	json_decref(j);
	if (!payload)
		return acme_fail(o, -ENOMEM, "out of memory");
	o->post_jwk = false;
	acme_post(o, "newOrder", o->new_order, payload, acme_on_order);
	free(payload);
}

static void acme_on_revoked(struct acme_order *o)
{
	acme_succeed(o);
}

/* POST revokeCert {certificate, reason} under the account's key. */
static void acme_revoke(struct acme_order *o)
{
	json_t *j = json_pack("{s:s, s:i}", "certificate", o->revoke_b64,
			      "reason", o->revoke_reason);
	char *payload = j ? json_dumps(j, JSON_COMPACT) : NULL;

	json_decref(j);
	if (!payload)
		return acme_fail(o, -ENOMEM, "out of memory");
	o->post_jwk = false;
	acme_post(o, "revokeCert", o->revoke_url, payload, acme_on_revoked);
	free(payload);
}

/* The account is known: the order, or the revocation. */
static void acme_account_known(struct acme_order *o)
{
	if (o->revoke_b64)
		return acme_revoke(o);
	acme_new_order(o);
}

static void acme_on_account(struct acme_order *o)
{
	json_t *j = acme_json(o);
	const char *st;
	char *loc;

	if (!j)
		return;
	st = acme_str(j, "status");
	if (st && strcmp(st, "valid") != 0) {
		json_decref(j);
		return acme_fail(o, -EREMOTEIO, "%s: the account is %.20s",
				 o->what, st);
	}
	json_decref(j);
	loc = o->resp.location;
	if (!loc || !acme_printable(loc, ACME_URL_MAX) ||
	    strncasecmp(loc, "https://", 8) != 0)
		return acme_fail(o, -EPROTO, "%s: no https:// Location",
				 o->what);
	free(o->c->account_url);
	o->c->account_url = strdup(loc);
	if (!o->c->account_url)
		return acme_fail(o, -ENOMEM, "out of memory");
	acme_account_known(o);
}

static void acme_new_account(struct acme_order *o)
{
	json_t *j = json_pack("{s:b}", "termsOfServiceAgreed", 1);
	char *payload = NULL;

	if (j && o->c->contact &&
	    json_object_set_new(j, "contact", json_pack("[s]", o->c->contact)) <
		0) {
		json_decref(j);
		j = NULL;
	}
	if (j)
		payload = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (!payload)
		return acme_fail(o, -ENOMEM, "out of memory");
	o->post_jwk = true;
	acme_post(o, "newAccount", o->new_account, payload, acme_on_account);
	free(payload);
}

/* A directory member: an https:// URL string, copied. */
static int acme_dir_url(json_t *dir, const char *key, char **out)
{
	const char *s = acme_str(dir, key);

	if (!s || !acme_printable(s, ACME_URL_MAX) ||
	    strncasecmp(s, "https://", 8) != 0)
		return -EPROTO;
	*out = strdup(s);
	return *out ? 0 : -ENOMEM;
}

static void acme_on_directory(struct acme_order *o)
{
	json_t *j = acme_json(o);
	const char *bad = NULL;

	if (!j)
		return;
	if (acme_dir_url(j, "newNonce", &o->new_nonce) < 0)
		bad = "newNonce";
	else if (acme_dir_url(j, "newAccount", &o->new_account) < 0)
		bad = "newAccount";
	else if (acme_dir_url(j, "newOrder", &o->new_order) < 0)
		bad = "newOrder";
	else if (o->revoke_b64 &&
		 acme_dir_url(j, "revokeCert", &o->revoke_url) < 0)
		bad = "revokeCert";
	json_decref(j);
	if (bad)
		return acme_fail(o, -EPROTO,
				 "%s: the directory has no https:// %s URL",
				 o->what, bad);
	if (o->c->account_url)
		return acme_account_known(o);
	acme_new_account(o);
}

static void acme_start(struct acme_order *o)
{
	acme_send(o, EVHTTP_REQ_GET, "directory", o->c->dir_url, NULL,
		  acme_on_directory);
}

int acme_revoke_start(struct acme_client *c, const char *cert_pem, int reason,
		      const struct acme_ops *ops, void *arg,
		      struct acme_order **out, struct errbuf *err)
{
	BIO *b = cert_pem ? BIO_new_mem_buf(cert_pem, -1) : NULL;
	X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
	unsigned char *der = NULL;
	char *b64 = NULL;
	int len = x ? i2d_X509(x, &der) : -1, rc;
	const char *name = "revoked.invalid";

	X509_free(x);
	BIO_free(b);
	if (len > 0 && (b64 = malloc(B64URL_LEN((size_t)len) + 1)))
		b64url_encode(der, (size_t)len, b64);
	OPENSSL_free(der);
	if (len <= 0 || reason < 0 || reason > 10 || reason == 7) {
		free(b64);
		errbuf_set(err, len <= 0 ? "no PEM certificate to revoke"
					 : "reason: a code of RFC 5280 5.3.1");
		return -EINVAL;
	}
	if (!b64)
		return -ENOMEM;
	rc = acme_order_start(c, &name, 1, ops, arg, out, err);
	if (rc < 0) {
		free(b64);
		return rc;
	}
	(*out)->revoke_b64 = b64;
	(*out)->revoke_reason = reason;
	return 0;
}

int acme_order_start(struct acme_client *c, const char *const *names, size_t n,
		     const struct acme_ops *ops, void *arg,
		     struct acme_order **out, struct errbuf *err)
{
	struct acme_order *o;
	struct timeval tv;
	size_t i, k;

	if (n == 0 || n > ACME_NAMES_MAX) {
		errbuf_set(err, "an order names 1 to %d DNS names",
			   ACME_NAMES_MAX);
		return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		if (!acme_name_ok(names[i])) {
			errbuf_set(err, "%.*s: not a DNS name an order takes",
				   ACME_NAME_MAX + 1, names[i] ? names[i] : "");
			return -EINVAL;
		}
		for (k = 0; k < i; k++)
			if (strcmp(names[k], names[i]) == 0) {
				errbuf_set(err, "%s: named twice", names[i]);
				return -EINVAL;
			}
	}
	if (!ops || !ops->done) {
		errbuf_set(err, "an order needs a done callback");
		return -EINVAL;
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->c = c;
	o->ops = ops;
	o->arg = arg;
	o->resp.retry_after = -1;
	o->poll_ms = ACME_POLL_FIRST_MS;
	o->names = calloc(n, sizeof(*o->names));
	o->step_ev = evtimer_new(c->base, acme_step_cb, o);
	o->req_timer = evtimer_new(c->base, acme_req_timeout_cb, o);
	o->order_timer = evtimer_new(c->base, acme_order_timeout_cb, o);
	if (!o->names || !o->step_ev || !o->req_timer || !o->order_timer)
		goto nomem;
	for (i = 0; i < n; i++) {
		if (!(o->names[i] = strdup(names[i])))
			goto nomem;
		o->n_names++;
	}
	snprintf(o->what, sizeof(o->what), "starting");
	tv.tv_sec = c->order_ms / 1000;
	tv.tv_usec = (c->order_ms % 1000) * 1000;
	evtimer_add(o->order_timer, &tv);
	acme_later(o, 0, acme_start);
	c->orders++;
	*out = o;
	return 0;
nomem:
	acme_order_free(o);
	return -ENOMEM;
}
