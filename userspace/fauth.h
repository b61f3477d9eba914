/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fauth.h - forward auth (docs/gates.md): before a request of a gate
 * with auth_request goes upstream, edge asks an authorization service
 * with a subrequest and does as it answers.
 *
 * The subrequest: the request's method and header fields (less those
 * edge manages, hdr_is_managed, Expect, those Connection names and the
 * client's own X-Forwarded-* and X-Original-*, in any '_' spelling), no
 * body, to the service's URL (http://, a numeric address), Host its
 * authority, with X-Forwarded-Method, -Proto, -Host, -Uri, -For,
 * X-Original-Method, X-Original-URI, X-Request-Id and edge's Via (a loop
 * back to edge is refused as any is) set by edge, Connection: close.
 * Interim (1xx) answers are skipped. The answer:
 *   2xx             admitted: the fields named in copy_headers go
 *                   upstream (a client's own of those names, in any
 *                   '_' spelling, never do);
 *   401, 403        refused: the status, body and fields relayed
 *                   (Cache-Control: no-store);
 *   301-303, 307, 308   redirected (a login page): the same;
 *   anything else, a malformed answer, a closed connection, a body over
 *   FAUTH_BODY_MAX: unavailable (503 auth_unavailable); so is the
 *   caller's timeout.
 * An admission of a request with a Cookie or Authorization, whose
 * Cache-Control (s-maxage, else max-age; no no-store, no-cache, Vary
 * other than Cookie and Authorization) allows it, is remembered by the
 * worker for at most cache_ttl, keyed by those fields.
 *
 * A call runs on the caller's event loop; its callback runs once, from
 * that loop, never from fauth_start, and the call is gone by then.
 */
#ifndef EDGE_FAUTH_H
#define EDGE_FAUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <jansson.h>

#include "log.h"

struct event_base;
struct h1_head;
struct h1_request;

#define FAUTH_URL_MAX 1024
#define FAUTH_COPY_MAX 16
#define FAUTH_BODY_MAX 65536  /* a refusal's body relayed */
#define FAUTH_FIELDS_MAX 8192 /* fields relayed or copied */
#define FAUTH_CTYPE_MAX 127   /* a refusal's Content-Type relayed */
#define FAUTH_TIMEOUT_DEFAULT_MS 1000
#define FAUTH_TIMEOUT_MAX_MS 60000
#define FAUTH_CACHE_TTL_MAX_S 3600

/* The auth_request group, immutable once built. */
struct fauth_conf {
	uint64_t id; /* never reused (the cache's owner) */
	struct sockaddr_storage addr;
	socklen_t addr_len;
	char *url;	 /* as configured */
	char *authority; /* the Host sent: "127.0.0.1:9000" */
	char *path;	 /* the URL's path and query, "/" at least */
	uint64_t timeout_ms;
	unsigned cache_ttl_s;	    /* 0: nothing cached */
	char *copy[FAUTH_COPY_MAX]; /* as written */
	char *low[FAUTH_COPY_MAX];  /* lowercase, '-' for '_' */
	size_t ncopy;
};

/* A group from url ("http://ADDR[:PORT][/PATH]", ADDR numeric), the
 * timeout and the cache's bound. 0, -EINVAL with err, -ENOMEM. */
int fauth_conf_new(const char *url, uint64_t timeout_ms, unsigned cache_ttl_s,
		   struct fauth_conf **out, struct errbuf *err);
/* One name of copy_headers (a field name token; fields edge manages or
 * sets, Content-Type, Expect and Via refused). 0, -EINVAL with err,
 * -ENOMEM. */
int fauth_conf_copy(struct fauth_conf *c, const char *name, struct errbuf *err);
void fauth_conf_free(struct fauth_conf *c);
/* The same group as a JSON object (the database's
 * environments.auth_request): {"url", "timeout": "1s", "copy_headers":
 * [...], "cache_ttl": "1m"}, each checked as the file's. 0 with *out,
 * -EINVAL with err ("auth_request: ..."), -ENOMEM. */
int fauth_conf_from_json(const json_t *o, struct fauth_conf **out,
			 struct errbuf *err);
/* {"url", "timeout_ms", "cache_ttl_s", "copy_headers"}; NULL: no memory. */
json_t *fauth_conf_json(const struct fauth_conf *c);
/* Whether a request field of that name is one of c's copy_headers,
 * '_' read as '-' (a client's own is dropped). */
bool fauth_field_copied(const struct fauth_conf *c, const char *name, size_t n);

enum fauth_verdict {
	FAUTH_ALLOW = 0,
	FAUTH_DENY,	   /* 401, 403 */
	FAUTH_REDIRECT,	   /* 3xx */
	FAUTH_UNAVAILABLE, /* why says why */
};

/* A call's answer. fields: ALLOW, the lines for the upstream; DENY and
 * REDIRECT, the lines for the client ("Name: value\r\n" each, malloc'd
 * or NULL). body (malloc'd or NULL) and ctype ("" none): DENY and
 * REDIRECT's. The receiver frees fields and body. */
struct fauth_result {
	enum fauth_verdict v;
	int status;
	char *fields;
	size_t fields_len;
	char *body;
	size_t body_len;
	char ctype[FAUTH_CTYPE_MAX + 1];
	const char *why; /* UNAVAILABLE: a static text for the log */
	bool cached;	 /* ALLOW from the worker's cache */
};

/* What the subrequest is made of. */
struct fauth_req {
	const struct h1_request *h;
	const char *client_ip;
	const char *request_id;
	const char *via; /* edge's Via member (hdr_via_init), NULL: none */
	bool tls;
	/* edge's traceparent (NULL: none) and whether the client's
	 * tracestate goes with it (hdr.h's hdr_trace) */
	const char *traceparent;
	bool tracestate;
};

/* The worker's cached admission of h under c: true with *res (ALLOW,
 * cached) filled. */
bool fauth_cached(const struct fauth_conf *c, const struct h1_request *h,
		  struct fauth_result *res);

typedef void (*fauth_done_fn)(void *arg, struct fauth_result *res);
struct fauth_call;

/* Start q's subrequest on base; done(arg, res) once it is answered or
 * fails. NULL when it could not start (no memory, no socket): the
 * caller treats it as UNAVAILABLE. */
struct fauth_call *fauth_start(struct event_base *base,
			       const struct fauth_conf *c,
			       const struct fauth_req *q, fauth_done_fn done,
			       void *arg);
/* Drop a call in flight (its callback never runs). */
void fauth_cancel(struct fauth_call *call);

/* Admissions taken from the workers' caches, for metrics. */
uint64_t fauth_cache_hits(void);

#endif /* EDGE_FAUTH_H */
