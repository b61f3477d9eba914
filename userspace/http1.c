// SPDX-License-Identifier: BSD-2-Clause
/*
 * http1.c - the HTTP/1.1 adapter (http1.h): the connection's hooks, each
 * handed to the request the connection carries (req.h).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include "http1.h"
#include "proxy.h"
#include "req.h"

/* A new (or unparked) connection: its request slot, with what belongs to
 * the connection. */
static void http1_open(struct conn *c)
{
	struct req *r = conn_proto(c);

	r->c = c;
	r->w = c->w;
	r->client_ip = c->client_ip;
	r->peer = &c->peer.sa;
	r->peer_cidr = &c->peer_cidr;
	r->tls = c->tls;
}

static bool http1_active(const struct conn *c)
{
	return ((const struct req *)(const void *)c->proto)->active;
}

static void http1_header_timeout(struct conn *c)
{
	req_end(conn_proto(c), OUTCOME_HEADER_TIMEOUT, NULL);
}

static void http1_readable(struct conn *c)
{
	req_client_readable(conn_proto(c));
}

static void http1_drained(struct conn *c)
{
	req_client_drained(conn_proto(c));
}

static void http1_gone(struct conn *c, bool eof)
{
	req_client_gone(conn_proto(c), eof);
}

static void http1_timeout(struct conn *c)
{
	req_timeout(conn_proto(c));
}

static void http1_btimeout(struct conn *c)
{
	req_body_timeout(conn_proto(c));
}

/* The connection closes: a request under way ends as client_closed. */
static void http1_close(struct conn *c)
{
	struct req *r = conn_proto(c);

	if (!r->active)
		return;
	c->close_after = true;
	c->client_eof = true;
	req_end(r, OUTCOME_CLIENT_CLOSED, NULL);
}

static void http1_closed(struct conn *c)
{
	proxy_release(conn_proto(c), false);
}

static void http1_free(struct conn *c)
{
	struct req *r = conn_proto(c);

	free(r->head);
	r->head = NULL;
}

const struct conn_ops http1_ops = {
    .size = sizeof(struct req),
    .open = http1_open,
    .input = req_parse,
    .active = http1_active,
    .header_timeout = http1_header_timeout,
    .refuse = req_refuse,
    .readable = http1_readable,
    .drained = http1_drained,
    .gone = http1_gone,
    .timeout = http1_timeout,
    .btimeout = http1_btimeout,
    .close = http1_close,
    .closed = http1_closed,
    .free = http1_free,
};
