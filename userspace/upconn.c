// SPDX-License-Identifier: BSD-2-Clause
/*
 * upconn.c - the stream core's one upstream connect (upconn.h).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <unistd.h>

#include "clk.h"
#include "h2up.h"
#include "log.h"
#include "proxyproto.h"
#include "route.h"
#include "siphash.h"
#include "sockio.h"
#include "tls.h"
#include "tls_up.h"
#include "upconn.h"
#include "upstream.h"
#include "worker.h"

/* The PROXY header of t's new connections (m->send_proxy's version):
 * from the client (t->peer) to the address it reached (the client
 * socket's own). Its length, at most PP_WRITE_MAX. */
static size_t upconn_pp(const struct upconn_target *t, uint8_t *buf)
{
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);

	if (t->client_fd < 0 ||
	    getsockname(t->client_fd, (struct sockaddr *)&local, &len) < 0)
		local.ss_family = AF_UNSPEC; /* then "unknown": never a lie */
	return pp_write(t->m->send_proxy, t->peer, (struct sockaddr *)&local,
			buf);
}

enum upconn_result upconn_open(struct upconn *u, struct worker *w,
			       const struct upconn_target *t,
			       const struct log_ctx *ctx, struct sockio **uio)
{
	uint8_t pp[PP_WRITE_MAX];
	size_t pp_len = 0;
	const struct config_addr *a;
	struct upstream_ep *ep;
	struct transport tr;
	uint64_t now = clk_now_ns();
	void *pooled = NULL;
	int fd, e, rc, one = 1;
	unsigned races = 0;
	bool fresh = u->fresh;

	*uio = NULL;
	u->fresh = false;
again:
	if (u->ntried >= UPCONN_TRIES_MAX)
		return UPCONN_NONE;
	/* round robin per route: its key is the same in every generation
	 * its project is unchanged in */
	rc = upstream_select_cap(w->up, t->m->route_key, t->slot,
				 t->m->upstreams, t->m->n_upstreams,
				 t->m->balance, t->peer, now, u->tried,
				 u->ntried, t->m->ep_max_inflight, &ep);
	if (rc == -EBUSY)
		return UPCONN_FULL;
	if (rc)
		return UPCONN_NONE;
	/* the cap is every worker's: another may have taken the last slot
	 * since the select saw it */
	if (!upstream_inflight_take(ep, t->m->ep_max_inflight)) {
		if (++races < UPCONN_TRIES_MAX)
			goto again;
		return UPCONN_FULL;
	}
	u->tried[u->ntried++] = ep;
	u->ep = ep;
	memcpy(u->addr, upstream_ep_addr(ep)->text, sizeof(u->addr));
	upreg_count_request(upstream_ep_shared(ep));
	u->counted = true;
	u->t_connect = now;
	u->reused = false;
	u->tag = 0;
	u->sess = NULL;
	u->h2 = false;
	a = upstream_ep_addr(ep);
	if (a->scheme == CONFIG_SCHEME_HTTPS && !t->host) {
		/* a TCP route forwards bytes: its environment's https://
		 * endpoints are not its; the next one is tried */
		log_warnx_ctx_rl(ctx,
				 "upstream %s: a TCP route forwards bytes: "
				 "it does not use https:// endpoints",
				 a->text);
		upconn_done(u);
		u->ep = NULL;
		goto again;
	}
	if (a->scheme == CONFIG_SCHEME_HTTPS) {
		struct errbuf eb;

		/* the pool's tag: the deployment's profile and the name */
		rc = tls_up_ssl(t->m->up_tls, t->host, t->host_len, a->text,
				NULL, &u->tag, &eb);
		if (rc) {
			log_warnx_ctx_rl(ctx, "upstream %s: %s", a->text,
					 eb.msg);
			/* no name to verify, or no profile: not the
			 * endpoint's fault, but no TLS to it either */
			return rc == -ENOMEM ? UPCONN_FAILED : UPCONN_TLS;
		}
	}
	if (t->m->send_proxy) {
		/* a connection that began with one client's header is that
		 * client's: pooled and shared (HTTP/2) under a tag of it */
		uint8_t k[sizeof(u->tag) + PP_WRITE_MAX];

		pp_len = upconn_pp(t, pp);
		memcpy(k, &u->tag, sizeof(u->tag));
		memcpy(k + sizeof(u->tag), pp, pp_len);
		u->tag = siphash_key(k, sizeof(u->tag) + pp_len) | 1;
	}
	/* HTTP/2: a session with room, or a new connection to be one; an
	 * https:// endpoint that chose http/1.1 lately, or has idle
	 * HTTP/1.1 connections pooled, is not asked again */
	if (t->h2 && (a->scheme == CONFIG_SCHEME_H2C ||
		      (a->scheme == CONFIG_SCHEME_HTTPS &&
		       !h2up_known_h1(w, a, u->tag, now)))) {
		u->sess = fresh ? NULL : h2up_find(w, a, u->tag);
		if (u->sess) {
			u->reused = true;
			return UPCONN_SHARED;
		}
		u->h2 = true;
	}
	fd = t->pool && !fresh && (!u->h2 || a->scheme == CONFIG_SCHEME_HTTPS)
		 ? upstream_pool_take_tag(w->up, ep, now, u->tag, &pooled)
		 : -1;
	if (fd >= 0)
		u->h2 = false;
	if (fd >= 0 && pooled) {
		u->reused = true;
		*uio = pooled;
		return UPCONN_POOLED;
	}
	if (fd < 0) {
		fd = socket(a->ss.ss_family,
			    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		/* out of descriptors: idle pooled connections are the
		 * cheapest to give back, a few at a time while the pool has
		 * them */
		while (fd < 0 && (errno == EMFILE || errno == ENFILE) &&
		       upstream_pool_shed(w->up, UPCONN_SHED_IDLE))
			fd = socket(a->ss.ss_family,
				    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
				    0);
		if (fd < 0) {
			e = errno;
			if (e == EMFILE || e == ENFILE)
				return UPCONN_NO_FD;
			log_warnx_ctx_rl(ctx, "cannot make a socket: %s",
					 strerror(e));
			return UPCONN_FAILED;
		}
		if (t->nodelay && a->ss.ss_family != AF_UNIX)
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
				   sizeof(one));
	} else {
		u->reused = true; /* a pooled descriptor without its sockio */
	}
	if (a->scheme == CONFIG_SCHEME_HTTPS) {
		struct ssl_st *ssl;
		struct errbuf eb;
		uint64_t tag;

		if (tls_up_ssl(t->m->up_tls, t->host, t->host_len, a->text,
			       &ssl, &tag, &eb)) {
			close(fd);
			log_warnx_ctx_rl(ctx, "upstream %s: %s", a->text,
					 eb.msg);
			return UPCONN_FAILED;
		}
		if (u->h2 && tls_up_offer_h2(ssl))
			u->h2 = false; /* out of memory: HTTP/1.1 then */
		if (tls_transport_client(&tr, ssl, fd)) {
			log_warnx_ctx_rl(ctx, "upstream %s: out of memory",
					 a->text);
			return UPCONN_FAILED;
		}
	} else if (a->ss.ss_family == AF_UNIX) {
		transport_unix(&tr, fd);
	} else {
		transport_tcp(&tr, fd);
	}
	*uio = sockio_new(w->base, &tr);
	if (!*uio) {
		transport_close(&tr);
		log_warnx_ctx_rl(ctx, "upstream %s: out of memory", u->addr);
		return UPCONN_FAILED;
	}
	/* a new connection's first bytes, before TLS (a pooled one had
	 * them) */
	if (pp_len && !u->reused && sockio_preamble(*uio, pp, pp_len)) {
		sockio_free(*uio);
		*uio = NULL;
		log_warnx_ctx_rl(ctx, "upstream %s: out of memory", u->addr);
		return UPCONN_FAILED;
	}
	return u->reused ? UPCONN_POOLED : UPCONN_NEW;
}

int upconn_connect(const struct upconn *u, struct sockio *uio)
{
	const struct config_addr *a = upstream_ep_addr(u->ep);

	return sockio_connect(uio, (const struct sockaddr *)&a->ss, a->len);
}

void upconn_connected(struct upconn *u, uint64_t now_ns)
{
	if (!u->reused)
		upreg_count_connect(
		    upstream_ep_shared(u->ep),
		    now_ns > u->t_connect ? now_ns - u->t_connect : 0);
}

void upconn_log(const struct upconn *u, const struct log_ctx *ctx,
		enum upreg_why why, int err, const char *detail,
		const char *where)
{
	char text[UPREG_WHY_STR_MAX];
	uint64_t held;

	if (!u->ep || !upreg_log_allow(upstream_ep_shared(u->ep), why, &held))
		return;
	log_warnx_held(ctx, held, "upstream %s: %s%s%s (%s)",
		       upstream_ep_addr(u->ep)->text,
		       upreg_why_format(why, err, text, sizeof(text)),
		       detail ? ": " : "", detail ? detail : "", where);
}

void upconn_report(const struct upconn *u, struct worker *w,
		   const struct log_ctx *ctx, enum upreg_why why, int err,
		   const char *detail, const char *where)
{
	upconn_log(u, ctx, why, err, detail, where);
	if (u->ep)
		upstream_report_why(w->up, u->ep, false, clk_now_ns(), why,
				    err);
}

void upconn_failed(struct upconn *u, struct worker *w,
		   const struct log_ctx *ctx, enum upreg_why why, int err,
		   const char *detail, const char *where)
{
	upconn_report(u, w, ctx, why, err, detail, where);
	upconn_done(u);
	u->ep = NULL;
}

void upconn_retry(struct upconn *u)
{
	upconn_done(u);
	if (u->ntried > 0)
		u->ntried--;
	u->ep = NULL;
}

void upconn_done(struct upconn *u)
{
	if (u->counted)
		upstream_inflight_add(u->ep, -1);
	u->counted = false;
}
