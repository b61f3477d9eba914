/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * upstream_ctl.h - `edgectl upstream`: the endpoints as the operator sees
 * them (the registry's, upreg.h, joined with the routes that use them,
 * from the live route table) and their admin state set by address.
 * Runs on the control loop; touches no worker's state (the workers read
 * the admin state from the registry at their next selection).
 */
#ifndef EDGE_UPSTREAM_CTL_H
#define EDGE_UPSTREAM_CTL_H

#include <jansson.h>

#include "circuit.h"
#include "log.h"
#include "route.h"
#include "upreg.h"

/*
 * The request {"cmd":"upstream"} lists; {"cmd":"upstream", "action":
 * "drain"|"disable"|"enable", "endpoint":"ADDR:PORT"} sets the admin
 * state of an endpoint of some route of t (or one the registry still
 * has). *result: {"endpoints":[...]} sorted by address, each as
 * upreg_dump_json's with "routes": ["DOMAIN/PREFIX" | "tcp LISTEN"...];
 * for an action, {"endpoint": that one, "was": the previous state}.
 * *changed says whether an action changed a state. Returns 0, or -EINVAL
 * (bad action, bad or unknown endpoint) / -ENOSPC / -ENOMEM with err set.
 */
int upstream_ctl(struct upreg *g, const struct route_table *t,
		 const json_t *req, json_t **result, bool *changed,
		 struct errbuf *err);

/*
 * {"cmd":"upstream", "action":"circuits"}: the circuit of each deployment
 * of t with a circuit group, per worker, from v[i][0..n[i]) (worker i's
 * circuits as its last tick published them, worker_circuits; nw
 * workers) at now_ns. *result: {"deployments": [{"deployment": ID,
 * "circuit": its group (config_circuit_to_json), "workers": [{"worker":
 * i, "state": "closed" | "open" | "half_open", "requests": N,
 * "failures": N, "half_open_in_s": S (open only, rounded up)}]}]},
 * sorted by id; a worker that has no circuit for it yet shows closed,
 * 0, 0. Returns 0 or -ENOMEM.
 */
int upstream_ctl_circuits(const struct route_table *t,
			  const struct circuit_view *const *v, const size_t *n,
			  unsigned nw, uint64_t now_ns, json_t **result);

#endif /* EDGE_UPSTREAM_CTL_H */
