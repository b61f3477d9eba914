// SPDX-License-Identifier: BSD-2-Clause
/*
 * ctlcmd.c - the control room: edged's control commands and the JSON they
 * answer with (the contract is in ctlcmd.h).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clk.h"
#include "ctl.h"
#include "acme_mgr.h"
#include "ctlcmd.h"
#include "http2.h"
#include "quic.h"
#include "edged.h"
#include "notify.h"
#include "pgplane.h"
#include "route.h"
#include "splice.h"
#include "stats.h"
#include "tcproute.h"
#include "tls.h"
#include "tunnel.h"
#include "upstream_ctl.h"
#include "sockreg.h"
#include "version.h"
#include "wake.h"
#include "worker.h"

struct ctlcmd {
	struct edged *d;
	struct ctlcmd_ops ops;
	struct ctl_server *srv;
	pid_t successor;     /* the process handed the sockets last, 0: none */
	int successor_pidfd; /* that process (pidfd_open), -1: none */
	bool retired;	     /* it asked to retire and this one did */
};

/* The live route table's generation. */
static uint64_t ctlcmd_generation(struct edged *d)
{
	struct route_table *t = route_table_current(&d->sh.routes);
	uint64_t gen = t ? route_table_generation(t) : 0;

	route_table_put(t);
	return gen;
}

/* edgectl certs: ACME's names (acme_mgr_json), {"acme": null} without the
 * acme group; "renew": NAME orders one now. */
static int ctlcmd_certs(void *ctx, const json_t *req, json_t **result,
			struct errbuf *err)
{
	struct ctlcmd *c = ctx;
	struct edged *d = c->d;
	const char *name = json_string_value(json_object_get(req, "renew"));
	const char *rname = json_string_value(json_object_get(req, "revoke"));
	const json_t *reason = json_object_get(req, "reason");

	if ((json_object_get(req, "renew") && !name) ||
	    (json_object_get(req, "revoke") && !rname)) {
		errbuf_set(err, "renew, revoke: a name");
		return -EINVAL;
	}
	if (reason && !json_is_integer(reason)) {
		errbuf_set(err, "reason: an RFC 5280 reason code");
		return -EINVAL;
	}
	if (rname) {
		struct tls_store *st;
		char *pem;
		int rc;

		if (!d->acme) {
			errbuf_set(err, "no acme group in the configuration");
			return -ENOENT;
		}
		st = tls_holder_get(&d->sh.tls);
		pem = st ? tls_store_name_pem(st, rname) : NULL;
		tls_store_put(st);
		if (!pem) {
			errbuf_set(err, "no certificate serves %.253s", rname);
			return -ENOENT;
		}
		rc = acme_mgr_revoke(
		    d->acme, rname, pem,
		    reason ? (int)json_integer_value(reason) : 0, err);
		free(pem);
		if (rc < 0)
			return rc;
	}
	if (name) {
		if (!d->acme) {
			errbuf_set(err, "no acme group in the configuration");
			return -ENOENT;
		}
		int rc = acme_mgr_renew(d->acme, name);

		if (rc < 0) {
			errbuf_set(err,
				   "%.253s is no name of an environment with "
				   "tls = \"auto\"",
				   name);
			return -ENOENT;
		}
		log_note("acme: %s: %s by edgectl", name,
			 rc ? "being ordered already: its order's certificate "
			      "is the new one"
			    : "a new certificate ordered");
	}
	*result = json_pack("{s:o}", "acme",
			    d->acme ? acme_mgr_json(d->acme) : json_null());
	if (!*result) {
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

/* edgectl envs: the on-demand environments (wake_dump_json). */
static int ctlcmd_envs(void *ctx, json_t **result, struct errbuf *err)
{
	struct ctlcmd *c = ctx;
	struct edged *d = c->d;

	*result = wake_dump_json(d->sh.wake);
	if (!*result) {
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

/* edgectl routes: the live table, with the TCP routes' live facts. */
static int ctlcmd_routes(void *ctx, json_t **result, struct errbuf *err)
{
	struct ctlcmd *c = ctx;
	struct edged *d = c->d;
	struct route_table *t = route_table_current(&d->sh.routes);
	json_t *tcp, *r;
	size_t i;

	*result = t ? route_dump_json(t) : NULL;
	route_table_put(t);
	if (!*result) {
		errbuf_set(err, t ? "out of memory" : "no route table");
		return -ENOMEM;
	}
	/* the connections open on each TCP route now, and whether its
	 * address is listened on */
	tcp = json_object_get(*result, "tcp_routes");
	json_array_foreach(tcp, i, r)
	{
		json_int_t slot =
		    json_integer_value(json_object_get(r, "slot"));
		const char *listen =
		    json_string_value(json_object_get(r, "listen"));
		const char *why = "";
		bool up = listen && tcproute_listening(d->tcp, listen, &why);

		if (slot >= 0 && slot < ROUTE_TCP_MAX)
			json_object_set_new(
			    r, "connections",
			    json_integer((json_int_t)atomic_load(
				&d->sh.tcp_open[slot])));
		json_object_set_new(r, "listening", json_boolean(up));
		if (!up && why[0])
			json_object_set_new(r, "listen_error",
					    json_string(why));
	}
	/* the database's change version the table holds */
	if (d->pg)
		json_object_set_new(
		    *result, "change_version",
		    json_integer((json_int_t)pgplane_applied_version(d->pg)));
	return 0;
}

/* edgectl reload: the daemon's reload (ops.reload), told to the service
 * manager as SIGHUP's is. */
static int ctlcmd_reload(void *ctx, json_t **result, struct errbuf *err)
{
	struct ctlcmd *c = ctx;
	struct edged *d = c->d;
	char msg[PATH_MAX + 64];
	uint64_t gen;
	int rc;

	notify_send("RELOADING=1");
	rc = c->ops.reload(d, &gen, err);
	notify_send("READY=1");
	if (rc) {
		log_warnx("reload refused, keeping the running configuration: "
			  "%s",
			  err->msg);
		return rc;
	}
	snprintf(msg, sizeof(msg), "reloaded %s: route generation %llu",
		 d->conf_path, (unsigned long long)gen);
	*result = json_pack("{s:I,s:s}", "route_generation", (json_int_t)gen,
			    "message", msg);
	return 0;
}

/* The splice's part of status: the mode, whether the kernel path may be
 * used and why, each kind's mover and why, the movers' tunnels and
 * events. */
static json_t *ctlcmd_splice_json(void)
{
	json_t *j, *kinds = json_object(), *ended = json_object();
	struct tunnel_counts n;
	int k;

	tunnel_counts(&n);
	for (k = 0; ended && k < TUNNEL_ENDED_MAX; k++)
		json_object_set_new(ended,
				    tunnel_ended_name((enum tunnel_ended)k),
				    json_integer((json_int_t)n.ended[k]));
	for (k = 0; kinds && k < TUNNEL_KIND_MAX; k++) {
		const char *why;
		enum tunnel_mover m =
		    tunnel_mover_for((enum tunnel_kind)k, &why);

		json_object_set_new(
		    kinds, tunnel_kind_name((enum tunnel_kind)k),
		    json_pack("{s:s,s:s}", "mover", tunnel_mover_name(m), "why",
			      why));
	}
	j = json_pack(
	    "{s:s,s:b,s:s,s:b,s:s,s:o*,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
	    "s:I,s:I,s:I,s:o*}",
	    "mode", splice_mode_name(splice_get_mode()), "kernel",
	    splice_usable(), "kernel_why", splice_why(), "ktls", splice_ktls(),
	    "ktls_why", splice_ktls_why(), "kinds", kinds, "open_spliced",
	    (json_int_t)n.open_spliced, "open_copy", (json_int_t)n.open_copy,
	    "spliced", (json_int_t)n.spliced, "refused", (json_int_t)n.refused,
	    "handed_back", (json_int_t)n.handed_back, "disarm_passes",
	    (json_int_t)n.disarm_passes, "watchdog", (json_int_t)n.watchdog,
	    "halfclosed", (json_int_t)n.halfclosed, "lost", (json_int_t)n.lost,
	    "kernel_bytes_up", (json_int_t)n.kernel_up, "kernel_bytes_down",
	    (json_int_t)n.kernel_down, "sockhash_id",
	    (json_int_t)splice_sockhash_id(splice_instance()), "ended", ended);
	if (j)
		json_object_set_new(j, "timed_out",
				    json_integer((json_int_t)n.timed_out));
	return j;
}

/* The status's "tls": null without HTTPS listeners. */
static json_t *ctlcmd_tls_json(struct edged *d)
{
	struct tls_store *st;
	struct tls_store_info in;
	size_t served = 0, refused = 0, i;
	uint64_t refusals = 0;
	json_t *listen, *j;
	char when[32] = "";

	if (!d->cfg->tls.n_listen)
		return NULL;
	st = tls_holder_get(&d->sh.tls);
	if (!st)
		return NULL;
	tls_store_info(st, &in);
	tls_store_put(st);
	tls_db_counts(d->tls_db, &served, &refused, &refusals);
	listen = json_array();
	for (i = 0; listen && i < d->cfg->tls.n_listen; i++)
		json_array_append_new(listen,
				      json_string(d->cfg->tls.listen[i].text));
	if (in.next_expiry) {
		time_t t = (time_t)in.next_expiry;
		struct tm tm;

		if (gmtime_r(&t, &tm))
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	}
	j = json_pack(
	    "{s:o*, s:I, s:I, s:I, s:I, s:I, s:o*, s:I, s:s, s:s, s:I, s:I, "
	    "s:o*}",
	    "listen", listen, "names", (json_int_t)in.names, "contexts",
	    (json_int_t)in.contexts, "certificates_files",
	    (json_int_t)in.file_certs, "certificates_db",
	    (json_int_t)in.db_certs, "db_refused_now", (json_int_t)refused,
	    "db_refused", d->tls_db ? tls_db_refused_json(d->tls_db) : NULL,
	    "db_refusals", (json_int_t)refusals, "next_expiry", when,
	    "next_expiry_name", in.next_expiry_name, "ticket_key_age_s",
	    (json_int_t)((clk_now_ns() - d->tls_rotated_ns) / 1000000000ull),
	    "ticket_rotation_s", (json_int_t)(d->tls_rotation_ms / 1000),
	    "counts", tls_counts_json());
	return j;
}

/* Whether the workers send through io_uring: "on" in all, "off" by the
 * configuration, or the error their set-up met (asked only once each has
 * set up: worker_wait_up comes before the main loop runs). */
static json_t *ctlcmd_uring_json(const struct edged *d)
{
	static char broke[160]; /* the main thread's */
	unsigned on = 0, i;
	int err = 0, u;
	bool at_run = false;
	const char *why;

	for (i = 0; i < d->nw; i++) {
		u = atomic_load(&d->w[i]->uring);
		if (u == 1)
			on++;
		else if (u < 0 && !err) {
			err = -u;
			at_run = atomic_load(&d->w[i]->uring_broke);
		}
	}
	if (!d->cfg->io_uring)
		why = "off (io_uring = false)";
	else if (err && at_run) {
		snprintf(broke, sizeof(broke),
			 "a worker's ring failed at run time: %s; it reads "
			 "and sends one system call each since (logged)",
			 strerror(err));
		why = broke;
	} else if (err)
		why = strerror(err);
	else
		why = "on: a loop turn's reads and sends in one io_uring_enter";
	return json_pack("{s:b,s:I,s:s}", "enabled", d->cfg->io_uring,
			 "workers", (json_int_t)on, "why", why);
}

/* edgectl status's http2 object: the settings new connections get, and
 * the counts. */
static json_t *ctlcmd_http2_json(const struct edged *d)
{
	const struct config_http2 *h =
	    &d->sh.set.http2; /* the main thread writes it */

	return json_pack(
	    "{s:b,s:b,s:I,s:I,s:I,s:o*}", "enabled", h->enabled, "cleartext",
	    h->cleartext, "max_concurrent_streams",
	    (json_int_t)h->max_concurrent_streams, "initial_window_size",
	    (json_int_t)h->initial_window_size, "max_header_list_size",
	    (json_int_t)h->max_header_list_size, "counts", http2_counts_json());
}

/* edgectl status's quic object: the addresses, whether 0-RTT is on, and
 * the counts (null without tls.quic_listen). */
static json_t *ctlcmd_quic_json(const struct edged *d)
{
	const struct config_tls *t = &d->cfg->tls;
	json_t *a;

	if (t->n_quic_listen == 0)
		return NULL;
	a = json_array();
	for (size_t i = 0; a && i < t->n_quic_listen; i++)
		json_array_append_new(a, json_string(t->quic_listen[i].text));
	return json_pack("{s:o*,s:b,s:o*}", "listen", a, "early_data",
			 d->sh.set.quic_early_data, /* the main thread's */
			 "counts", quic_counts_json());
}

/* edgectl status's brownout object: limits.brownout_lag (0: off), each
 * worker's recent loop lag (worker_lag_ns), ms, and the requests shed. */
static json_t *ctlcmd_brownout_json(const struct edged *d)
{
	uint64_t now = clk_fresh_ns();
	json_t *lag = json_array();
	size_t i;

	for (i = 0; lag && i < d->nw; i++)
		json_array_append_new(
		    lag,
		    json_integer(
			(json_int_t)(worker_lag_ns(&d->sh, (unsigned)i, now) /
				     1000000)));
	return json_pack("{s:I,s:o*,s:I}", "lag_limit_ms",
			 (json_int_t)d->sh.set.limits.brownout_lag_ms, "lag_ms",
			 lag, "shed", (json_int_t)atomic_load(&d->sh.shed));
}

/* edgectl status. */
static int ctlcmd_status(void *ctx, json_t **result, struct errbuf *err)
{
	struct ctlcmd *c = ctx;
	struct edged *d = c->d;
	unsigned long long tcp_open = 0;
	struct route_table *t = route_table_current(&d->sh.routes);
	size_t i, n_tcp = t ? route_table_ntcp(t) : 0;
	/* now: a binary replaced on disk reads "PATH (deleted)" */
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	(void)err;
	exe[n > 0 ? n : 0] = '\0';
	route_table_put(t);
	for (i = 0; i < ROUTE_TCP_MAX; i++)
		tcp_open += atomic_load(&d->sh.tcp_open[i]);
	*result = json_pack(
	    "{s:I,s:s,s:s?,s:s?,s:I,s:I,s:I,s:b,s:I,s:I,s:I,s:o*,s:o*,s:o*,"
	    "s:o*,s:o*,s:o*,s:o*}",
	    "pid", (json_int_t)getpid(), "version", EDGE_VERSION, "conf_path",
	    d->conf_path, "exe", n > 0 ? exe : NULL, "uptime_s",
	    (json_int_t)((clk_now_ns() - d->start_ns) / 1000000000ull),
	    "route_generation", (json_int_t)ctlcmd_generation(d), "workers",
	    (json_int_t)d->nw, "draining", d->draining, "connections",
	    (json_int_t)atomic_load(&d->sh.connections), "tcp_routes",
	    (json_int_t)n_tcp, "tcp_connections", (json_int_t)tcp_open,
	    "database", d->pg ? pgplane_status_json(d->pg) : NULL, "splice",
	    ctlcmd_splice_json(), "tls", ctlcmd_tls_json(d), "io_uring",
	    ctlcmd_uring_json(d), "http2", ctlcmd_http2_json(d), "quic",
	    ctlcmd_quic_json(d), "brownout", ctlcmd_brownout_json(d));
	return 0;
}

/* Whether c's successor still runs: its pidfd is not readable (it has
 * not exited, so a later process given its pid is never taken for it). */
static bool ctlcmd_successor_runs(const struct ctlcmd *c)
{
	struct pollfd p = {.fd = c->successor_pidfd, .events = POLLIN};
	int n;

	if (c->successor_pidfd < 0)
		return false;
	do
		n = poll(&p, 1, 0);
	while (n < 0 && errno == EINTR);
	return n == 0; /* an error: taken as gone (no retire) */
}

/* A successor's {"cmd":"handover"}: this process's sockets (sockreg.h). */
static int ctlcmd_handover(void *ctx, pid_t peer, const int **fds, size_t *nfds,
			   json_t **result, struct errbuf *err)
{
	struct ctlcmd *c = ctx;
	int rc, pidfd;

	if (c->d->draining) {
		errbuf_set(err, "edged is draining: nothing to hand over");
		return -EALREADY;
	}
	/* one upgrade at a time: its successor starting still */
	if (c->successor && c->successor != peer && ctlcmd_successor_runs(c)) {
		errbuf_set(err,
			   "another upgrade is under way (edged %ld took the "
			   "sockets)",
			   (long)c->successor);
		return -EBUSY;
	}
	if (peer <= 0) {
		errbuf_set(err, "handover: the successor's process is unknown");
		return -EPERM;
	}
	/* the peer waits for this answer: its pid is its own still */
	pidfd = (int)syscall(SYS_pidfd_open, peer, 0);
	if (pidfd < 0) {
		rc = -errno;
		errbuf_set(err,
			   "handover: the successor cannot be watched "
			   "(pidfd_open: %s)",
			   strerror(-rc));
		return rc;
	}
	rc = sockreg_handover(fds, nfds, result);
	if (rc) {
		close(pidfd);
		errbuf_set(err, "handover: %s", strerror(-rc));
		return rc;
	}
	c->successor = peer;
	if (c->successor_pidfd >= 0)
		close(c->successor_pidfd);
	c->successor_pidfd = pidfd;
	log_note("upgrade: %zu sockets handed to edged %ld", *nfds, (long)peer);
	return 0;
}

/* The successor serves: {"cmd":"retire"}, from it alone. */
static int ctlcmd_retire(void *ctx, pid_t peer, json_t **result,
			 struct errbuf *err)
{
	struct ctlcmd *c = ctx;
	int rc;

	/* the pid alone could be another process's now (the successor
	 * gone, its pid reused): the successor itself must run */
	if (!c->successor || peer != c->successor ||
	    !ctlcmd_successor_runs(c)) {
		errbuf_set(err, "retire: only the edged that took the sockets "
				"(handover) may ask");
		return -EPERM;
	}
	if (c->retired) /* asked again: its first answer went astray */
		goto done;
	rc = c->ops.retire(c->d, err);
	if (rc)
		return rc;
	/* the successor accepts on it from now on */
	ctl_server_hand_over(c->srv);
	c->retired = true;
done:
	*result = json_pack("{s:I}", "pid", (json_int_t)getpid());
	return 0;
}

/* edgectl splice [on|off|auto|sockmap]: on is sockmap. */
static int ctlcmd_splice(void *ctx, const json_t *req, json_t **result,
			 struct errbuf *err)
{
	struct ctlcmd *c = ctx;
	struct edged *d = c->d;
	const json_t *mv = json_object_get(req, "mode");
	const char *m = json_string_value(mv);
	enum splice_mode mode;

	if (mv) {
		if (m && strcmp(m, "on") == 0)
			m = "sockmap";
		if (!m || splice_mode_parse(m, &mode)) {
			errbuf_set(err, "splice: mode must be on, off, auto or "
					"sockmap");
			return -EINVAL;
		}
		if (mode != SPLICE_OFF && !d->splice) {
			errbuf_set(err,
				   "splice: the kernel path is unusable: %s",
				   splice_why());
			return -EOPNOTSUPP;
		}
		c->ops.splice_mode(d, mode, "edgectl");
	}
	*result = ctlcmd_splice_json();
	return *result ? 0 : -ENOMEM;
}

/* edgectl upstream circuits: each worker's circuits as its last tick
 * published them (worker_circuits: a copy, never its live table). */
static int ctlcmd_circuits(struct edged *d, const struct route_table *t,
			   json_t **result)
{
	const size_t max = CIRCUIT_SETS * CIRCUIT_WAYS;
	struct circuit_view **v = calloc(d->nw + 1, sizeof(*v));
	size_t *n = calloc(d->nw + 1, sizeof(*n));
	unsigned i;
	int rc = -ENOMEM;

	if (!v || !n)
		goto out;
	for (i = 0; i < d->nw; i++) {
		if (!(v[i] = calloc(max, sizeof(*v[i]))))
			goto out;
		if (d->w[i])
			n[i] = worker_circuits(d->w[i], v[i], max);
	}
	rc = upstream_ctl_circuits(t, (const struct circuit_view *const *)v, n,
				   d->nw, clk_now_ns(), result);
out:
	for (i = 0; v && i < d->nw; i++)
		free(v[i]);
	free(v);
	free(n);
	return rc;
}

/* edgectl upstream [list | drain|disable|enable ENDPOINT]: the workers
 * read the admin state at their next selection; each is also told to
 * close the endpoint's idle pooled connections now. */
static int ctlcmd_upstream(void *ctx, const json_t *req, json_t **result,
			   struct errbuf *err)
{
	struct ctlcmd *c = ctx;
	struct edged *d = c->d;
	struct route_table *t = route_table_current(&d->sh.routes);
	const char *action = json_string_value(json_object_get(req, "action"));
	const json_t *ep;
	bool changed;
	unsigned i;
	int rc;

	if (action && strcmp(action, "circuits") == 0) {
		rc = ctlcmd_circuits(d, t, result);
		route_table_put(t);
		if (rc)
			errbuf_set(err, "out of memory");
		return rc;
	}
	rc = upstream_ctl(d->sh.upreg, t, req, result, &changed, err);
	route_table_put(t);
	if (rc || !changed)
		return rc;
	ep = json_object_get(*result, "endpoint");
	log_note("upstream %s: %s (was %s; by edgectl)",
		 json_string_value(json_object_get(ep, "address")),
		 json_string_value(json_object_get(ep, "admin")),
		 json_string_value(json_object_get(*result, "was")));
	for (i = 0; i < d->nw; i++)
		if (d->w[i])
			worker_post(d->w[i], WORKER_MSG_UPSTREAM, 0);
	return 0;
}

static void ctlcmd_forced_add(void *arg, const char *env)
{
	json_array_append_new(arg, json_string(env));
}

/* edgectl challenge [ENV on|off]: an environment's attack mode (mode
 * always whatever its configuration says) on or off, kept across
 * reloads; without one, the environments in it. */
static int ctlcmd_challenge(void *ctx, const json_t *req, json_t **result,
			    struct errbuf *err)
{
	struct ctlcmd *c = ctx;
	struct edged *d = c->d;
	const json_t *onv = json_object_get(req, "on");
	const char *env = json_string_value(json_object_get(req, "env"));
	json_t *list;
	unsigned src;
	int rc;

	if (onv) {
		struct route_table *t = route_table_current(&d->sh.routes);
		bool known = route_table_holder(t, 'e', env, &src) == 0;

		route_table_put(t);
		if (!env || !json_is_boolean(onv)) {
			errbuf_set(err, "challenge: needs an environment id "
					"and on or off");
			return -EINVAL;
		}
		if (json_is_true(onv) && !known) {
			errbuf_set(err,
				   "challenge: no environment '%.64s' "
				   "(edgectl routes lists them)",
				   env);
			return -ENOENT;
		}
		rc = chal_force(env, json_is_true(onv));
		if (rc == -ENOSPC)
			errbuf_set(err,
				   "challenge: %d environments are in "
				   "attack mode already, the most",
				   CHAL_FORCED_MAX);
		else if (rc == -EINVAL)
			errbuf_set(err, "challenge: bad environment id");
		if (rc)
			return rc;
		log_note("challenge: environment %s %s attack mode (by "
			 "edgectl)",
			 env, json_is_true(onv) ? "in" : "out of");
	}
	list = json_array();
	*result = json_object();
	if (!list || !*result) {
		json_decref(list);
		json_decref(*result);
		*result = NULL;
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	chal_forced_each(ctlcmd_forced_add, list);
	json_object_set_new(*result, "forced", list);
	return 0;
}

/* edgectl stats: the counters. */
static int ctlcmd_stats(void *ctx, json_t **result, struct errbuf *err)
{
	struct ctlcmd *c = ctx;
	struct edged *d = c->d;

	*result = stats_counters_json(d->stats);
	if (!*result) {
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

int ctlcmd_start(struct event_base *base, const char *path, int lock_fd,
		 int listen_fd, struct edged *d, const struct ctlcmd_ops *ops,
		 struct ctlcmd **out, struct errbuf *err)
{
	static const struct ctl_handlers h = {
	    .routes = ctlcmd_routes,
	    .reload = ctlcmd_reload,
	    .status = ctlcmd_status,
	    .stats = ctlcmd_stats,
	    .splice = ctlcmd_splice,
	    .envs = ctlcmd_envs,
	    .upstream = ctlcmd_upstream,
	    .challenge = ctlcmd_challenge,
	    .certs = ctlcmd_certs,
	    .handover = ctlcmd_handover,
	    .retire = ctlcmd_retire,
	};
	struct ctlcmd *c;
	int rc;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c) {
		errbuf_set(err, "%s: out of memory", path);
		return -ENOMEM;
	}
	c->d = d;
	c->ops = *ops;
	c->successor_pidfd = -1;
	rc = lock_fd >= 0 || listen_fd >= 0
		 ? ctl_server_start_successor(base, path, lock_fd, listen_fd,
					      &h, c, &c->srv, err)
		 : ctl_server_start(base, path, &h, c, &c->srv, err);
	if (rc) {
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

int ctlcmd_commit(struct ctlcmd *c, struct errbuf *err)
{
	return ctl_server_commit(c->srv, err);
}

int ctlcmd_lock_fd(const struct ctlcmd *c)
{
	return ctl_server_lock_fd(c->srv);
}

int ctlcmd_listen_fd(const struct ctlcmd *c)
{
	return ctl_server_listen_fd(c->srv);
}

void ctlcmd_free(struct ctlcmd *c)
{
	if (!c)
		return;
	ctl_server_free(c->srv);
	if (c->successor_pidfd >= 0)
		close(c->successor_pidfd);
	free(c);
}
