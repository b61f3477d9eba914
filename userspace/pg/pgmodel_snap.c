// SPDX-License-Identifier: BSD-2-Clause
/*
 * pgmodel_snap.c - the model's local snapshot (pgmodel.h: pgm_snap_*,
 * pgm_save, pgm_load): the projects and rules as JSON, written whole to a
 * temporary file, fsync'd and renamed, and read back with every value
 * checked again.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "edge_maps.h"
#include "fauth.h"
#include "pgmodel_int.h"

static json_t *pgm_rule_json(const struct pgm_rule *x)
{
	char c[CIDR_STR_MAX];

	return json_pack("[I, s, s, I]", (json_int_t)x->id,
			 cidr_format(&x->cidr, c, sizeof(c)),
			 x->action == EDGE_ACT_ALLOW ? "allow" : "block",
			 (json_int_t)x->expires_at);
}

/* An environment's credential gate as the columns had it:
 * {"api_keys": bool, "jwt": the column's object or null, "keys":
 * [[name, hex], ...], "auth_request": the column's object (0024, absent:
 * none)}; NULL out of memory. */
static json_t *pgm_auth_json(const struct pgm_env *e)
{
	json_t *keys = json_array(), *jwt = NULL, *fwd = NULL;
	size_t i;

	if (!keys)
		return NULL;
	for (i = 0; i < e->n_keys; i++)
		if (json_array_append_new(
			keys,
			json_pack("[s, s]", e->keys[i].name, e->keys[i].hex))) {
			json_decref(keys);
			return NULL;
		}
	if (e->jwt && !(jwt = json_loads(e->jwt, 0, NULL))) {
		json_decref(keys);
		return NULL;
	}
	if (e->auth_request && !(fwd = json_loads(e->auth_request, 0, NULL))) {
		json_decref(keys);
		json_decref(jwt);
		return NULL;
	}
	return json_pack("{s:b, s:o*, s:o, s:o*}", "api_keys", e->api_keys,
			 "jwt", jwt, "keys", keys, "auth_request", fwd);
}

/* The gate of a snapshot's "auth" (absent from one an edge before 0022
 * wrote: none), checked as the columns are. */
static int pgm_auth_unjson(const json_t *a, struct pgm_env *e)
{
	const json_t *jwt = NULL, *keys = NULL, *fwd = NULL, *x;
	struct fauth_conf *c;
	int on = 0, rc = 0;
	size_t i;

	if (!a)
		return 0;
	if (json_unpack((json_t *)a, "{s:b, s?:o, s:o, s?:o}", "api_keys", &on,
			"jwt", &jwt, "keys", &keys, "auth_request", &fwd) ||
	    !json_is_array(keys))
		return -EINVAL;
	e->api_keys = on;
	e->auth = auth_gate_new();
	if (!e->auth || (on && auth_gate_api_keys(e->auth, "", 0, NULL)))
		return -ENOMEM;
	if (jwt && !json_is_null(jwt)) {
		rc = auth_gate_jwt_json(e->auth, jwt, NULL);
		if (rc == 0 && !(e->jwt = json_dumps(jwt, JSON_COMPACT)))
			rc = -ENOMEM;
	}
	if (rc == 0 && fwd && !json_is_null(fwd)) {
		rc = fauth_conf_from_json(fwd, &c, NULL);
		if (rc == 0)
			auth_gate_forward(e->auth, c);
		if (rc == 0 &&
		    !(e->auth_request = json_dumps(fwd, JSON_COMPACT)))
			rc = -ENOMEM;
	}
	json_array_foreach(keys, i, x)
	{
		const char *name = NULL, *hex = NULL;
		struct pgm_key *k;

		if (rc || !on)
			break;
		if (json_unpack((json_t *)x, "[s, s]", &name, &hex))
			return -EINVAL;
		rc = auth_gate_key_add(e->auth, name, hex, NULL);
		if (rc)
			break;
		k = pgm_grow((void **)&e->keys, &e->n_keys, sizeof(*k));
		if (!k)
			return -ENOMEM;
		snprintf(k->hex, sizeof(k->hex), "%s", hex);
		if (!(k->name = pgm_dup(name)))
			return -ENOMEM;
	}
	if (rc == 0)
		auth_gate_keys_seal(e->auth);
	return rc;
}

/* A domain as [domain, prefix, strip], with a fourth item, an object of
 * its route keys (0028; shed, 0029, only when set), when one is not the
 * default. */
static json_t *pgm_dom_json(const struct pgm_dom *d)
{
	json_t *o;

	if (!d->no_wake && !d->background && !d->request_total_ms &&
	    !d->shed_set)
		return json_pack("[s, s, b]", d->domain, d->prefix, d->strip);
	o = json_pack("[s, s, b, {s:b, s:s, s:I}]", d->domain, d->prefix,
		      d->strip, "wake", !d->no_wake, "activity",
		      d->background ? "background" : "app", "request_total_ms",
		      (json_int_t)d->request_total_ms);
	if (o && d->shed_set &&
	    json_object_set_new(json_array_get(o, 3), "shed",
				json_boolean(d->shed))) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

/* The deployment's retry, circuit and request_total and the
 * environment's idle_timeout_background (0028) into o, each when set
 * (a refused value is saved as none: it is served without). 0 or
 * -ENOMEM. */
static int pgm_env_json_0028(const struct pgm_env *e, json_t *o)
{
	if (e->retry.set &&
	    json_object_set_new(o, "retry", config_retry_to_json(&e->retry)))
		return -ENOMEM;
	if (e->circuit.set &&
	    json_object_set_new(o, "circuit",
				config_circuit_to_json(&e->circuit)))
		return -ENOMEM;
	if (e->request_total_ms &&
	    json_object_set_new(o, "request_total_ms",
				json_integer((json_int_t)e->request_total_ms)))
		return -ENOMEM;
	if (e->idle_bg_ms &&
	    json_object_set_new(o, "idle_timeout_background_ms",
				json_integer((json_int_t)e->idle_bg_ms)))
		return -ENOMEM;
	return 0;
}

/* The deployment's hedge and max_inflight and the environment's shed
 * (0029) into o, each when set. 0 or -ENOMEM. */
static int pgm_env_json_0029(const struct pgm_env *e, json_t *o)
{
	if (e->hedge.set &&
	    json_object_set_new(o, "hedge", config_hedge_to_json(&e->hedge)))
		return -ENOMEM;
	if (e->max_inflight &&
	    json_object_set_new(o, "max_inflight",
				json_integer((json_int_t)e->max_inflight)))
		return -ENOMEM;
	if (e->shed && json_object_set_new(o, "shed", json_true()))
		return -ENOMEM;
	return 0;
}

/* pgm_env_json_0029's keys from o into e: absent from a snapshot an edge
 * before 0029 wrote (none). 0 or -EINVAL. */
static int pgm_env_unjson_0029(json_t *o, struct pgm_env *e)
{
	json_t *hd = json_object_get(o, "hedge");
	json_t *mi = json_object_get(o, "max_inflight");
	json_t *sh = json_object_get(o, "shed");

	/* the same checks as the columns' */
	if (hd && config_hedge_json(hd, &e->hedge, NULL))
		return -EINVAL;
	if (mi && (!json_is_integer(mi) || json_integer_value(mi) < 0 ||
		   json_integer_value(mi) > CONFIG_EP_MAX_INFLIGHT_MAX))
		return -EINVAL;
	if (sh && !json_is_boolean(sh))
		return -EINVAL;
	e->max_inflight = mi ? (uint64_t)json_integer_value(mi) : 0;
	e->shed = sh && json_is_true(sh);
	return 0;
}

/* pgm_env_json_0028's keys from o into e: absent from a snapshot an edge
 * before 0028 wrote (none). 0 or -EINVAL. */
static int pgm_env_unjson_0028(json_t *o, struct pgm_env *e)
{
	json_t *rt = json_object_get(o, "retry");
	json_t *cc = json_object_get(o, "circuit");
	json_t *tot = json_object_get(o, "request_total_ms");
	json_t *bg = json_object_get(o, "idle_timeout_background_ms");

	/* the same checks as the columns' */
	if (rt && config_retry_json(rt, &e->retry, NULL))
		return -EINVAL;
	if (cc && config_circuit_json(cc, &e->circuit, NULL))
		return -EINVAL;
	if (tot &&
	    (!json_is_integer(tot) || json_integer_value(tot) < 1 ||
	     (uint64_t)json_integer_value(tot) > CONFIG_REQUEST_TOTAL_MAX_MS))
		return -EINVAL;
	if (bg && (!json_is_integer(bg) || json_integer_value(bg) < 1000 ||
		   (uint64_t)json_integer_value(bg) > CONFIG_DURATION_MAX_MS))
		return -EINVAL;
	e->request_total_ms = tot ? (uint64_t)json_integer_value(tot) : 0;
	e->idle_bg_ms = bg ? (uint64_t)json_integer_value(bg) : 0;
	return 0;
}

static json_t *pgm_env_json(const struct pgm_env *e)
{
	json_t *eps = json_array(), *doms = json_array(), *o = NULL;
	json_t *tcp = json_array(), *hc = NULL, *tls = NULL;
	json_t *hdrs = NULL, *reds = NULL, *comp = NULL, *inj = NULL;
	size_t i;

	if (!eps || !doms || !tcp)
		goto out;
	for (i = 0; i < e->n_eps; i++)
		if (json_array_append_new(eps, json_string(e->eps[i].text)))
			goto out;
	for (i = 0; i < e->n_doms; i++)
		if (json_array_append_new(doms, pgm_dom_json(&e->doms[i])))
			goto out;
	for (i = 0; i < e->n_tcp; i++)
		if (json_array_append_new(
			tcp,
			json_pack(
			    "[I, s, s?, b, s?]", (json_int_t)e->tcp[i].id,
			    e->tcp[i].listen,
			    e->tcp[i].sni[0] ? e->tcp[i].sni : NULL,
			    e->tcp[i].proxy_protocol,
			    e->tcp[i].send_proxy
				? config_send_proxy_name(e->tcp[i].send_proxy)
				: NULL)))
			goto out;
	if (e->hc.type != CONFIG_HC_NONE) {
		hc = config_health_check_to_json(&e->hc);
		if (!hc)
			goto out;
	}
	/* a refused value stays refused: its reason instead; a group whose
	 * files failed is kept (tried again when the snapshot is loaded) */
	if (!e->tls.refused) {
		tls = config_up_tls_to_json(&e->tls);
		if (!tls)
			goto out;
		if (json_object_size(tls) == 0) {
			json_decref(tls);
			tls = NULL;
		}
	}
	if (!hrules_empty(&e->headers) &&
	    !(hdrs = hrules_json(&e->headers, NULL)))
		goto out;
	if (e->redirects.n && !(reds = hredirects_json(&e->redirects)))
		goto out;
	if (!(comp = compress_to_json(&e->compression)))
		goto out;
	if (inject_any(&e->inject) && !(inj = inject_to_json(&e->inject)))
		goto out;
	o = json_pack(
	    "{s:s, s:s, s:s?, s:O, s:O, s:O, s:b, s:s, s:I, s:b, "
	    "s:b, s:O*, s:O*, s:s*, s:s, s:O*, s:O*, s:b, s:O, s:O*, "
	    "s:{s:s, s:i, s:I}, s:b}",
	    "id", e->id, "name", e->name, "deployment", e->dep, "endpoints",
	    eps, "domains", doms, "tcp_routes", tcp, "on_demand", e->on_demand,
	    "state", pgm_env_states[e->state], "idle_timeout_ms",
	    (json_int_t)e->idle_ms, "https_redirect", e->https_redirect, "hsts",
	    e->hsts, "health_check", hc, "tls", tls, "tls_refused",
	    e->tls.refused ? (e->tls_err ? e->tls_err : "refused") : NULL,
	    "send_proxy",
	    config_send_proxy_name(e->send_proxy ? e->send_proxy
						 : CONFIG_SEND_PROXY_OFF),
	    "headers", hdrs, "redirects", reds, "unmatched_not_found",
	    e->unmatched_not_found, "compression", comp, "inject", inj,
	    "challenge", "mode", chal_mode_name(e->challenge.mode),
	    "difficulty", (int)e->challenge.difficulty, "ttl_s",
	    (json_int_t)e->challenge.ttl_s, "tls_auto", e->tls_auto);
	if (o &&
	    ((e->auth && json_object_set_new(o, "auth", pgm_auth_json(e))) ||
	     pgm_env_json_0028(e, o) || pgm_env_json_0029(e, o))) {
		json_decref(o);
		o = NULL;
	}
out:
	json_decref(hdrs);
	json_decref(reds);
	json_decref(comp);
	json_decref(inj);
	json_decref(tls);
	json_decref(hc);
	json_decref(eps);
	json_decref(doms);
	json_decref(tcp);
	return o;
}

struct pgm_snap {
	uint64_t version;
	struct pgm_project **p; /* references */
	size_t n;
	struct pgm_rule *global;
	size_t n_global;
};

struct pgm_snap *pgm_snap_take(const struct pgm *m, uint64_t version)
{
	struct pgm_snap *x = calloc(1, sizeof(*x));
	size_t i;

	if (!x)
		return NULL;
	x->version = version;
	x->p = calloc(m->n + 1, sizeof(*x->p));
	x->global = calloc(m->n_global + 1, sizeof(*x->global));
	if (!x->p || !x->global) {
		pgm_snap_free(x);
		return NULL;
	}
	for (i = 0; i < m->n; i++)
		x->p[x->n++] = pgm_project_get(m->p[i]);
	if (m->n_global)
		memcpy(x->global, m->global, m->n_global * sizeof(*x->global));
	x->n_global = m->n_global;
	return x;
}

uint64_t pgm_snap_version(const struct pgm_snap *x)
{
	return x->version;
}

void pgm_snap_free(struct pgm_snap *x)
{
	size_t i;

	if (!x)
		return;
	for (i = 0; i < x->n; i++)
		pgm_project_free(x->p[i]);
	free(x->p);
	free(x->global);
	free(x);
}

/* All of buf to fd; 0 or -errno. */
static int pgm_write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int pgm_snap_write(const struct pgm_snap *x, const char *path,
		   struct errbuf *err)
{
	json_t *root = NULL, *projects = json_array(), *rules = json_array();
	char tmp[4096], *text = NULL;
	size_t i, j;
	int fd = -1, rc = -ENOMEM;

	if (!projects || !rules)
		goto out;
	for (i = 0; i < x->n; i++) {
		const struct pgm_project *p = x->p[i];
		json_t *envs = json_array(), *prules = json_array(), *o;

		for (j = 0; envs && j < p->n_envs; j++)
			if (json_array_append_new(envs,
						  pgm_env_json(&p->envs[j])))
				break;
		for (j = 0; prules && j < p->n_rules; j++)
			if (json_array_append_new(prules,
						  pgm_rule_json(&p->rules[j])))
				break;
		o = envs && prules
			? json_pack("{s:s, s:s, s:b, s:O, s:O}", "id", p->id,
				    "name", p->name, "enabled", p->enabled,
				    "envs", envs, "rules", prules)
			: NULL;
		json_decref(envs);
		json_decref(prules);
		if (json_array_append_new(projects, o))
			goto out;
	}
	for (i = 0; i < x->n_global; i++)
		if (json_array_append_new(rules, pgm_rule_json(&x->global[i])))
			goto out;
	root = json_pack("{s:i, s:I, s:O, s:O}", "format", 1, "version",
			 (json_int_t)x->version, "projects", projects, "rules",
			 rules);
	/* one string, one write: json_dumpfd writes token by token */
	text = root ? json_dumps(root, JSON_COMPACT) : NULL;
	if (!text)
		goto out;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
		rc = -ENAMETOOLONG;
		errbuf_set(err, "%s: path too long", path);
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0 || pgm_write_all(fd, text, strlen(text)) ||
	    pgm_write_all(fd, "\n", 1) || fsync(fd)) {
		rc = -errno;
		errbuf_set(err, "cannot write %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (close(fd)) {
		fd = -1;
		rc = -errno;
		errbuf_set(err, "cannot write %s: %s", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, path)) {
		rc = -errno;
		errbuf_set(err, "cannot replace %s: %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (rc == -ENOMEM && !err->msg[0])
		errbuf_set(err, "%s: out of memory", path);
	if (fd >= 0) {
		close(fd);
		unlink(tmp);
	}
	free(text);
	json_decref(root);
	json_decref(projects);
	json_decref(rules);
	return rc;
}

int pgm_save(const struct pgm *m, uint64_t version, const char *path,
	     struct errbuf *err)
{
	struct pgm_snap *x = pgm_snap_take(m, version);
	int rc;

	if (!x) {
		errbuf_set(err, "%s: out of memory", path);
		return -ENOMEM;
	}
	rc = pgm_snap_write(x, path, err);
	pgm_snap_free(x);
	return rc;
}

/* One saved rule back; -EINVAL when it does not read. */
static int pgm_rule_unjson(json_t *a, struct pgm_rule *x)
{
	json_int_t id = 0, exp = 0;
	const char *cidr = NULL, *act = NULL;

	memset(x, 0, sizeof(*x));
	if (json_unpack(a, "[I, s, s, I]", &id, &cidr, &act, &exp) ||
	    cidr_parse(cidr, &x->cidr, NULL, NULL))
		return -EINVAL;
	x->id = id;
	x->expires_at = exp;
	x->action = strcmp(act, "allow") == 0 ? EDGE_ACT_ALLOW : EDGE_ACT_BLOCK;
	return 0;
}

static int pgm_env_unjson(json_t *o, struct pgm_env *e)
{
	json_t *eps = NULL, *doms = NULL, *tcp = NULL, *hc = NULL, *x;
	json_t *tls = NULL, *hdrs = NULL, *reds = NULL, *comp = NULL;
	json_t *inj = NULL, *chal = NULL, *auth = NULL, *depj = NULL;
	const char *id = NULL, *name = NULL, *dep = NULL, *st = NULL;
	const char *tls_refused = NULL, *sp = NULL;
	json_int_t idle = (json_int_t)CONFIG_IDLE_TIMEOUT_DEFAULT_MS;
	int od = 0, stv, redirect = 0, hsts = 0, nf = 0, tls_auto = 0, rc;
	size_t i;

	/* tcp_routes, on_demand, state, idle_timeout_ms, https_redirect,
	 * hsts, health_check, tls, tls_auto: absent from a snapshot an edge
	 * before them wrote (and health_check, tls when the deployment has
	 * none) */
	if (json_unpack(o,
			"{s:s, s:s, s?:o, s:o, s:o, s?:o, s?:b, s?:s, s?:I, "
			"s?:b, s?:b, s?:o, s?:o, s?:s, s?:s, s?:o, s?:o, "
			"s?:b, s?:o, s?:o, s?:o, s?:o, s?:b}",
			"id", &id, "name", &name, "deployment", &depj,
			"endpoints", &eps, "domains", &doms, "tcp_routes", &tcp,
			"on_demand", &od, "state", &st, "idle_timeout_ms",
			&idle, "https_redirect", &redirect, "hsts", &hsts,
			"health_check", &hc, "tls", &tls, "tls_refused",
			&tls_refused, "send_proxy", &sp, "headers", &hdrs,
			"redirects", &reds, "unmatched_not_found", &nf,
			"compression", &comp, "inject", &inj, "challenge",
			&chal, "auth", &auth, "tls_auto", &tls_auto) ||
	    !json_is_array(eps) || !json_is_array(doms) ||
	    (tcp && !json_is_array(tcp)) ||
	    (depj && !json_is_null(depj) && !json_is_string(depj)))
		return -EINVAL;
	/* null (written for an environment without an active deployment)
	 * as absent: json_unpack's "s?:s" refuses a null */
	dep = json_is_string(depj) ? json_string_value(depj) : NULL;
	/* the same check as the column's: one the file could not hold is
	 * not this edge's snapshot */
	if (hc && !json_is_null(hc) &&
	    config_health_check_json(hc, &e->hc, NULL))
		return -EINVAL;
	if (tls && !json_is_null(tls) && config_up_tls_json(tls, &e->tls, NULL))
		return -EINVAL;
	if (tls_refused) {
		memset(&e->tls, 0, sizeof(e->tls));
		e->tls.refused = true;
		if (!(e->tls_err = pgm_dup(tls_refused)))
			return -ENOMEM;
	}
	e->send_proxy = CONFIG_SEND_PROXY_OFF;
	if (sp && config_send_proxy_parse(sp, &e->send_proxy, NULL))
		return -EINVAL;
	/* checked as the columns are (an edge before 0016 wrote none) */
	rc = hrules_from_json(hdrs, &e->headers, NULL);
	if (rc == 0)
		rc = hredirects_from_json(reds, &e->redirects, NULL);
	if (rc)
		return rc;
	e->unmatched_not_found = nf;
	rc = compress_from_json(comp, &e->compression, NULL);
	/* absent from a snapshot an edge before 0018 wrote: none */
	if (rc == 0)
		rc = inject_from_json(inj, &e->inject, NULL);
	if (rc)
		return rc;
	/* absent from a snapshot an edge before 0019 wrote: off */
	e->challenge.mode = CHAL_OFF;
	e->challenge.difficulty = CHAL_DIFFICULTY_DEFAULT;
	e->challenge.ttl_s = CHAL_TTL_DEFAULT_S;
	if (chal) {
		const char *m = NULL;
		json_int_t d = 0, t = 0;

		if (json_unpack(chal, "{s:s, s:I, s:I}", "mode", &m,
				"difficulty", &d, "ttl_s", &t) ||
		    chal_mode_parse(m, &e->challenge.mode) || d < 1 ||
		    d > CHAL_DIFFICULTY_MAX || t < CHAL_TTL_MIN_S ||
		    t > CHAL_TTL_MAX_S)
			return -EINVAL;
		e->challenge.difficulty = (unsigned)d;
		e->challenge.ttl_s = (uint32_t)t;
	}
	rc = pgm_auth_unjson(auth, e);
	if (rc == 0)
		rc = pgm_env_unjson_0028(o, e);
	if (rc == 0)
		rc = pgm_env_unjson_0029(o, e);
	if (rc)
		return rc;
	stv = st ? pgm_env_state_parse(st) : PGM_ENV_RUNNING;
	if (stv < 0 || idle < 0 || (uint64_t)idle > CONFIG_DURATION_MAX_MS)
		return -EINVAL;
	e->on_demand = od;
	e->state = (unsigned)stv;
	e->idle_ms = (uint64_t)idle;
	e->id = pgm_dup(id);
	e->name = pgm_dup(name);
	e->dep = dep ? pgm_dup(dep) : NULL;
	e->https_redirect = redirect;
	e->hsts = hsts;
	e->tls_auto = tls_auto; /* absent before 0026: false */
	if (!e->id || !e->name || (dep && !e->dep))
		return -ENOMEM;
	json_array_foreach(eps, i, x)
	{
		struct config_addr *a;

		if (!json_is_string(x))
			return -EINVAL;
		a = pgm_grow((void **)&e->eps, &e->n_eps, sizeof(*a));
		if (!a)
			return -ENOMEM;
		if (config_endpoint_parse(json_string_value(x),
					  CONFIG_SCHEMES_EDGED, a, NULL))
			return -EINVAL;
	}
	json_array_foreach(doms, i, x)
	{
		const char *d = NULL, *p = NULL;
		int strip = 0;
		struct pgm_dom *dm;

		json_t *keys, *shed;
		const char *act = "app";
		int wake = 1;
		json_int_t tot = 0;

		if (json_unpack(x, "[s, s, b]", &d, &p, &strip))
			return -EINVAL;
		/* its route keys (0028): absent before them, and for a row
		 * with the defaults */
		keys = json_array_get(x, 3);
		if (keys &&
		    (json_unpack(keys, "{s:b, s:s, s:I}", "wake", &wake,
				 "activity", &act, "request_total_ms", &tot) ||
		     (strcmp(act, "app") != 0 &&
		      strcmp(act, "background") != 0) ||
		     tot < 0 || (uint64_t)tot > CONFIG_REQUEST_TOTAL_MAX_MS ||
		     (!p[0] && (!wake || tot || strcmp(act, "app") != 0))))
			return -EINVAL;
		/* its shed (0029): absent, the environment's */
		shed = keys ? json_object_get(keys, "shed") : NULL;
		if (shed && (!json_is_boolean(shed) || !p[0]))
			return -EINVAL;
		dm = pgm_grow((void **)&e->doms, &e->n_doms, sizeof(*dm));
		if (!dm)
			return -ENOMEM;
		dm->domain = pgm_dup(d);
		dm->prefix = pgm_dup(p);
		dm->strip = strip;
		dm->no_wake = !wake;
		dm->background = strcmp(act, "background") == 0;
		dm->request_total_ms = (uint64_t)tot;
		dm->shed_set = shed != NULL;
		dm->shed = shed && json_is_true(shed);
		if (!dm->domain || !dm->prefix)
			return -ENOMEM;
		if (config_domain_check(dm->domain, true, NULL) ||
		    (p[0] && config_prefix_check(p, NULL)))
			return -EINVAL;
	}
	json_array_foreach(tcp, i, x)
	{
		json_int_t rid = 0;
		const char *listen = NULL, *sni = NULL, *spv = NULL;
		json_t *sv = NULL, *pv = NULL, *sn = NULL;
		struct tcproute_row *r;

		/* [id, listen, sni or null, proxy_protocol, send_proxy or
		 * null]; an edge before 0015 wrote the first three, a later
		 * one may write more */
		if (json_unpack(x, "[I, s, o]", &rid, &listen, &sv) ||
		    (!json_is_null(sv) && !json_is_string(sv)))
			return -EINVAL;
		if (json_array_size(x) > 3 &&
		    (json_unpack(x, "[I, s, o, o, o]", &rid, &listen, &sv, &pv,
				 &sn) ||
		     !json_is_boolean(pv) ||
		     (!json_is_null(sn) && !json_is_string(sn))))
			return -EINVAL;
		sni = json_string_value(sv);
		spv = sn ? json_string_value(sn) : NULL;
		r = pgm_grow((void **)&e->tcp, &e->n_tcp, sizeof(*r));
		if (!r)
			return -ENOMEM;
		if (pgm_tcp_row(r, rid, listen, sni, e->id,
				pv && json_is_true(pv), spv, NULL))
			return -EINVAL;
	}
	return 0;
}

int pgm_load(struct pgm *m, const char *path, uint64_t *version,
	     struct errbuf *err)
{
	json_error_t je;
	json_t *root, *projects = NULL, *rules = NULL, *po, *x;
	json_int_t v = 0;
	struct pgm fresh;
	size_t i, j;
	int fmt = 0, rc = -EINVAL;

	memset(&fresh, 0, sizeof(fresh));
	root = json_load_file(path, 0, &je);
	if (!root) {
		rc = access(path, F_OK) ? -ENOENT : -EINVAL;
		errbuf_set(err, "%s: %s", path,
			   rc == -ENOENT ? "no such file" : je.text);
		return rc;
	}
	if (json_unpack(root, "{s:i, s:I, s:o, s:o}", "format", &fmt, "version",
			&v, "projects", &projects, "rules", &rules) ||
	    fmt != 1 || !json_is_array(projects) || !json_is_array(rules))
		goto bad;
	fresh.p = calloc(json_array_size(projects) + 1, sizeof(*fresh.p));
	if (!fresh.p)
		goto nomem;
	json_array_foreach(projects, i, po)
	{
		const char *id = NULL, *name = NULL;
		json_t *envs = NULL, *prules = NULL;
		int enabled = 0;
		struct pgm_project *p;

		if (json_unpack(po, "{s:s, s:s, s:b, s:o, s:o}", "id", &id,
				"name", &name, "enabled", &enabled, "envs",
				&envs, "rules", &prules) ||
		    !json_is_array(envs) || !json_is_array(prules) ||
		    config_id_check(id, NULL))
			goto bad;
		p = calloc(1, sizeof(*p));
		if (p)
			atomic_init(&p->ref, 1);
		if (!p)
			goto nomem;
		fresh.p[fresh.n++] = p;
		p->id = pgm_dup(id);
		p->name = pgm_dup(name);
		p->enabled = enabled;
		if (!p->id || !p->name)
			goto nomem;
		p->envs = calloc(json_array_size(envs) + 1, sizeof(*p->envs));
		p->rules =
		    calloc(json_array_size(prules) + 1, sizeof(*p->rules));
		if (!p->envs || !p->rules)
			goto nomem;
		json_array_foreach(envs, j, x)
		{
			rc = pgm_env_unjson(x, &p->envs[p->n_envs++]);
			if (rc)
				goto fail;
		}
		json_array_foreach(prules, j, x)
		{
			if (pgm_rule_unjson(x, &p->rules[p->n_rules++]))
				goto bad;
		}
	}
	qsort(fresh.p, fresh.n, sizeof(*fresh.p), pgm_cmp_project);
	fresh.cap = fresh.n;
	fresh.global =
	    calloc(json_array_size(rules) + 1, sizeof(*fresh.global));
	if (!fresh.global)
		goto nomem;
	json_array_foreach(rules, i, x)
	{
		if (pgm_rule_unjson(x, &fresh.global[fresh.n_global++]))
			goto bad;
	}
	json_decref(root);
	pgm_clear(m);
	free(m->p);
	m->p = fresh.p;
	m->n = fresh.n;
	m->cap = fresh.cap;
	m->global = fresh.global;
	m->n_global = fresh.n_global;
	*version = (uint64_t)v;
	return 0;
nomem:
	rc = -ENOMEM;
	goto fail;
bad:
	rc = -EINVAL;
fail:
	errbuf_set(err, "%s: %s", path,
		   rc == -ENOMEM ? "out of memory"
				 : "not a snapshot of this edge's (refused)");
	json_decref(root);
	pgm_clear(&fresh);
	free(fresh.p);
	return rc;
}
