/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * upstream_ctl.c - `edgectl upstream list|drain|disable|enable`, the
 * daemon's side: the registry's entries joined with the route table's
 * endpoints (a configured endpoint no worker has used yet is listed too).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "siphash.h"
#include "upstream_ctl.h"

/* The endpoint object for address text in all (created with zeroes for
 * a configured endpoint the registry does not have), its "routes" array
 * ready. NULL when out of memory. */
static json_t *upctl_ep(json_t *all, const char *text)
{
	json_t *o = json_object_get(all, text);

	if (!o) {
		o = json_pack("{s:s,s:s,s:s,s:i,s:i,s:{s:i,s:i,s:i,s:i,s:i},"
			      "s:i,s:i,s:i,s:i,s:i,s:n,s:i,s:n}",
			      "address", text, "admin", "enabled", "health",
			      "healthy", "inflight", 0, "requests", 0,
			      "responses", "1xx", 0, "2xx", 0, "3xx", 0, "4xx",
			      0, "5xx", 0, "connect_errors", 0, "failures", 0,
			      "ejections", 0, "bytes_sent", 0, "bytes_received",
			      0, "last_error", "last_error_at", 0,
			      "last_error_age");
		if (!o || json_object_set_new(all, text, o))
			return NULL;
	}
	if (!json_object_get(o, "routes") &&
	    json_object_set_new(o, "routes", json_array()))
		return NULL;
	return o;
}

/* Add route name to each of r's upstreams in all. */
static int upctl_route(json_t *all, const json_t *r, const char *name)
{
	const json_t *u;
	size_t i;

	json_array_foreach(json_object_get(r, "upstreams"), i, u)
	{
		json_t *o = upctl_ep(all, json_string_value(u));

		if (!o || json_array_append_new(json_object_get(o, "routes"),
						json_string(name)))
			return -ENOMEM;
	}
	return 0;
}

/* every endpoint of t and of the registry: {"ADDR": {...}} */
static json_t *upctl_all(struct upreg *g, const struct route_table *t)
{
	json_t *all = upreg_dump_json(g), *dump = NULL, *r;
	const char *k;
	json_t *v;
	size_t i;
	char name[1024];

	if (!all)
		return NULL;
	dump = t ? route_dump_json(t) : NULL;
	if (t && !dump)
		goto fail;
	json_array_foreach(json_object_get(dump, "routes"), i, r)
	{
		const char *p = json_string_value(json_object_get(r, "prefix"));

		snprintf(name, sizeof(name), "%s%s",
			 json_string_value(json_object_get(r, "domain")),
			 p ? p : "/");
		if (upctl_route(all, r, name))
			goto fail;
	}
	json_array_foreach(json_object_get(dump, "tcp_routes"), i, r)
	{
		const char *sni = json_string_value(json_object_get(r, "sni"));

		snprintf(name, sizeof(name), "tcp %s%s%s",
			 json_string_value(json_object_get(r, "listen")),
			 sni ? " sni " : "", sni ? sni : "");
		if (upctl_route(all, r, name))
			goto fail;
	}
	json_object_foreach(all, k, v)
	{
		if (!upctl_ep(all, k))
			goto fail;
	}
	json_decref(dump);
	return all;
fail:
	json_decref(dump);
	json_decref(all);
	return NULL;
}

static int upctl_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* all's objects as an array sorted by address */
static json_t *upctl_sorted(json_t *all)
{
	size_t n = json_object_size(all), i = 0;
	const char **keys = calloc(n ? n : 1, sizeof(*keys));
	json_t *arr = json_array(), *v;
	const char *k;

	if (!keys || !arr)
		goto fail;
	json_object_foreach(all, k, v)
	{
		keys[i++] = k;
	}
	qsort(keys, n, sizeof(*keys), upctl_cmp);
	for (i = 0; i < n; i++)
		if (json_array_append(arr, json_object_get(all, keys[i])))
			goto fail;
	free(keys);
	return arr;
fail:
	free(keys);
	json_decref(arr);
	return NULL;
}

int upstream_ctl(struct upreg *g, const struct route_table *t,
		 const json_t *req, json_t **result, bool *changed,
		 struct errbuf *err)
{
	const char *action = json_string_value(json_object_get(req, "action"));
	const char *text = json_string_value(json_object_get(req, "endpoint"));
	struct config_addr a;
	struct errbuf perr = {""};
	enum upreg_admin s = UPREG_ENABLED, was;
	json_t *all = NULL, *ep;
	int rc;

	*changed = false;
	*result = NULL;
	if (action && strcmp(action, "list") != 0) {
		if (strcmp(action, "drain") == 0)
			s = UPREG_DRAIN;
		else if (strcmp(action, "disable") == 0)
			s = UPREG_DISABLED;
		else if (strcmp(action, "enable") == 0)
			s = UPREG_ENABLED;
		else {
			errbuf_set(err,
				   "upstream: unknown action '%.32s' (list, "
				   "drain, disable, enable)",
				   action);
			return -EINVAL;
		}
		if (text && strlen(text) >= CONFIG_ADDR_STR_MAX) {
			/* config_addr_parse's message would quote it whole */
			errbuf_set(err,
				   "upstream %s: bad endpoint '%.64s...': "
				   "longer than any endpoint",
				   action, text);
			return -EINVAL;
		}
		if (!text || config_endpoint_parse(text, CONFIG_SCHEMES_ALL, &a,
						   &perr)) {
			errbuf_set(err, "upstream %s: bad endpoint '%.64s': %s",
				   action, text ? text : "",
				   perr.msg[0] ? perr.msg
					       : "expected ADDR:PORT");
			return -EINVAL;
		}
	}
	all = upctl_all(g, t);
	if (!all)
		goto nomem;
	if (!action || strcmp(action, "list") == 0) {
		*result = json_pack("{s:o}", "endpoints", upctl_sorted(all));
		json_decref(all);
		return *result ? 0 : -ENOMEM;
	}
	if (!json_object_get(all, a.text)) {
		errbuf_set(err,
			   "upstream %s: unknown endpoint %s (no route uses "
			   "it; see edgectl upstream list)",
			   action, a.text);
		json_decref(all);
		return -EINVAL;
	}
	rc = upreg_set_admin(g, &a, s, &was);
	if (rc) {
		errbuf_set(err, "upstream %s %s: %s", action, a.text,
			   rc == -ENOSPC ? "too many endpoints"
					 : "out of memory");
		json_decref(all);
		return rc;
	}
	*changed = was != s;
	ep = json_object_get(all, a.text);
	json_object_set_new(ep, "admin", json_string(upreg_admin_name(s)));
	*result = json_pack("{s:O,s:s}", "endpoint", ep, "was",
			    upreg_admin_name(was));
	json_decref(all);
	return *result ? 0 : -ENOMEM;
nomem:
	errbuf_set(err, "out of memory");
	return -ENOMEM;
}

struct upctl_circ {
	const struct circuit_view *const *v;
	const size_t *n;
	unsigned nw;
	uint64_t now_ns;
	json_t *all; /* id -> the deployment's object */
};

static const char *const upctl_states[] = {"closed", "open", "half_open"};

/* One worker's view of deployment key (closed and empty when it has
 * none). */
static json_t *upctl_circ_worker(const struct upctl_circ *x, unsigned i,
				 uint64_t key)
{
	const struct circuit_view *c = NULL;
	enum circuit_state st = CIRCUIT_CLOSED;
	json_t *o;
	size_t j;

	for (j = 0; j < x->n[i] && !c; j++)
		if (x->v[i][j].key == key)
			c = &x->v[i][j];
	if (c)
		st = c->state;
	/* the copy is up to a tick old: open past its end is half-open */
	if (st == CIRCUIT_OPEN && c->until <= x->now_ns)
		st = CIRCUIT_HALF_OPEN;
	o = json_pack("{s:i, s:s, s:I, s:I}", "worker", (int)i, "state",
		      upctl_states[st], "requests",
		      (json_int_t)(c ? c->requests : 0), "failures",
		      (json_int_t)(c ? c->failures : 0));
	if (o && st == CIRCUIT_OPEN &&
	    json_object_set_new(
		o, "half_open_in_s",
		json_integer(
		    (json_int_t)(c->until > x->now_ns
				     ? (c->until - x->now_ns + 999999999ULL) /
					   1000000000ULL
				     : 0)))) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

static int upctl_circ_of(void *arg, const char *id,
			 const struct config_circuit *cc)
{
	struct upctl_circ *x = arg;
	uint64_t key = siphash_key(id, strlen(id));
	json_t *ws = json_array(), *o;
	unsigned i;

	if (!ws)
		return -ENOMEM;
	for (i = 0; i < x->nw; i++)
		if (json_array_append_new(ws, upctl_circ_worker(x, i, key))) {
			json_decref(ws);
			return -ENOMEM;
		}
	o = json_pack("{s:s, s:o, s:o}", "deployment", id, "circuit",
		      config_circuit_to_json(cc), "workers", ws);
	return o && json_object_set_new(x->all, id, o) == 0 ? 0 : -ENOMEM;
}

int upstream_ctl_circuits(const struct route_table *t,
			  const struct circuit_view *const *v, const size_t *n,
			  unsigned nw, uint64_t now_ns, json_t **result)
{
	struct upctl_circ x = {v, n, nw, now_ns, json_object()};
	int rc;

	*result = NULL;
	if (!x.all)
		return -ENOMEM;
	rc = t ? route_table_each_circuit(t, upctl_circ_of, &x) : 0;
	if (rc == 0)
		*result =
		    json_pack("{s:o}", "deployments", upctl_sorted(x.all));
	json_decref(x.all);
	return *result ? 0 : -ENOMEM;
}
