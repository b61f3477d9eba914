/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hcheck.h - active health checks: each endpoint of a deployment with a
 * health_check (config_check.h) is checked from one place, the control
 * loop, not once per worker: every interval a non-blocking connect (tcp)
 * or a GET of the path whose status line must carry expect_status (http),
 * bounded by timeout. fall failures in a row take the endpoint out (its
 * registry entry's active_down, upreg.h: no worker chooses it but in panic
 * mode), rise successes in a row bring it back; both logged once.
 *
 * An endpoint starts healthy. One check per endpoint: when several
 * deployments check the same address, the first one's check is used (the
 * file's before the database's: hcheck_merge).
 * At most HCHECK_MAX endpoints are checked.
 */
#ifndef EDGE_HCHECK_H
#define EDGE_HCHECK_H

#include <stddef.h>

#include "config_check.h"
#include "route_src.h"
#include "upreg.h"

struct event_base;
struct hcheck;

/* Most endpoints checked at once. */
#define HCHECK_MAX 1024

/* One endpoint to check and how. */
struct hcheck_target {
	struct config_addr addr;
	struct config_health_check hc;
	struct config_up_tls tls; /* an https:// endpoint's: its deployment's */
	/* its deployment's send_proxy version (0: none): a check begins
	 * with a LOCAL header (v1: TCP4/TCP6 naming the check's socket) */
	unsigned send_proxy;
};

/* A checker on base (the control loop), marking endpoints in g. Returns
 * 0 with *out, or -ENOMEM. */
int hcheck_new(struct event_base *base, struct upreg *g, struct hcheck **out);

/* Stop every check, bring back the endpoints it had taken out (without a
 * log line each: this is edged's exit), free. NULL ok. */
void hcheck_free(struct hcheck *h);

/*
 * The targets of src's deployments (each address once, the first check
 * wins), into a new array *out of *n (NULL, 0 when none). Returns 0 or
 * -ENOMEM.
 */
int hcheck_targets(const struct route_src *src, struct hcheck_target **out,
		   size_t *n);

/*
 * Every source's targets together: a[0..na) then b[0..nb) (the file's,
 * then the database's), each address once, into a new array *out of *n
 * (NULL, 0 when none), in that order. The first target of an address
 * wins; lost(arg, won, dropped), when not NULL, is told of each target of
 * b dropped for one of a (a source giving way to the file). Returns 0 or
 * -ENOMEM.
 */
int hcheck_merge(const struct hcheck_target *a, size_t na,
		 const struct hcheck_target *b, size_t nb,
		 struct hcheck_target **out, size_t *n,
		 void (*lost)(void *arg, const struct hcheck_target *won,
			      const struct hcheck_target *dropped),
		 void *arg);

/*
 * Check t[0..n) from now on (at start and after each reload): an endpoint
 * checked before with the same check keeps its state and its schedule; one
 * whose check changed starts a new schedule but stays out if it was out
 * (until the new check passes rise times); one no longer checked is
 * brought back (if it was out) and forgotten; past
 * HCHECK_MAX the rest are ignored (logged once per count). Returns 0 or -ENOMEM
 * (the old set then stays).
 */
int hcheck_set(struct hcheck *h, const struct hcheck_target *t, size_t n);

#endif /* EDGE_HCHECK_H */
