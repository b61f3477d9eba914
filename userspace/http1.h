/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * http1.h - the HTTP/1.1 adapter of a client connection (conn.h's struct
 * conn_ops): its state is one struct req at a time (req.h); the
 * connection's events go to the request carried, and through it to the
 * proxy.
 */
#ifndef EDGE_HTTP1_H
#define EDGE_HTTP1_H

#include "conn.h"

extern const struct conn_ops http1_ops;

#endif /* EDGE_HTTP1_H */
