// SPDX-License-Identifier: BSD-2-Clause
/*
 * services.c - the worker services, the listeners' accept functions and
 * the connections' protocol adapter (services.h).
 */
#include <stddef.h>

#include "conn.h"
#include "h2up.h"
#include "http1.h"
#include "http3.h"
#include "l4.h"
#include "listener.h"
#include "proxy.h"
#include "quic.h"
#include "req.h"
#include "services.h"
#include "worker.h"

/* Drained in this order (the listeners stop accepting first), freed in
 * the reverse one. */
static const struct worker_service *const services[] = {
    &listener_service, &quic_service, &h2up_service,  &conn_service,
    &l4_service,       &req_service,  &proxy_service, NULL};

static const struct listener_accepts accepts = {
    .http = conn_accept,
    .https = conn_accept_tls,
    .tcp = l4_accept,
};

void services_install(struct worker_shared *sh)
{
	sh->services = services;
	sh->accepts = &accepts;
	sh->conn_ops = &http1_ops;
	sh->up_ops = &proxy_ops;
	sh->quic_app = &http3_app;
}
