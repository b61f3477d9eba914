/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * services.h - what every worker runs, wired in one place: the worker
 * services in their order (the listeners, the client connections, the
 * TCP routes' connections, the requests) and the function each kind of
 * listener hands a new connection to, the protocol adapter of the
 * client connections (HTTP/1.1's) and the requests' upstream side (the
 * proxy). The worker, the listener, the
 * connection and the requests know each other only through what is set
 * here.
 */
#ifndef EDGE_SERVICES_H
#define EDGE_SERVICES_H

struct worker_shared;

/* Set sh->services, sh->accepts, sh->conn_ops and sh->up_ops (before
 * the first worker_new). */
void services_install(struct worker_shared *sh);

#endif /* EDGE_SERVICES_H */
