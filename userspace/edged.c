// SPDX-License-Identifier: BSD-2-Clause
/*
 * edged.c - the daemon's main thread: options, configuration, the route
 * table, analytics, listeners and workers, privileges, signals (SIGHUP
 * reloads, SIGTERM/SIGINT drain and exit), and the control loop that
 * serves the control socket (its commands: ctlcmd.c) and the admin
 * listener (admin.c). The daemon's state, struct edged, is in edged.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <event2/event.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <event2/thread.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clk.h"
#include "acme_mgr.h"
#include "admin.h"
#include "analytics.h"
#include "analytics_setup.h"
#include "config.h"
#include "config_host.h"
#include "ctlcmd.h"
#include "edged.h"
#include "log.h"
#include "req.h"
#include "route.h"
#include "route_writer.h"
#include "http2.h"
#include "quic.h"
#include "services.h"
#include "splice.h"
#include "hcheck.h"
#include "upreg.h"
#include "stats.h"
#include "tcproute.h"
#include "tls.h"
#include "tls_up.h"
#include "edge_commit.h" /* build/: EDGE_COMMIT */
#include "notify.h"
#include "version.h"
#include "wake.h"
#include "worker.h"
#include "ctlproto.h"
#include "quicsteer.h"
#include "sockreg.h"
#include "pgacme.h"
#include "pgplane.h"
#include "pgsync.h"

/* How often a draining daemon looks whether its workers have finished. */
#define EDGED_DRAIN_POLL_MS 50
/* A successor keeps the predecessor's TCP route sockets no route took
 * this long (the database's routes come after the start). */
#define EDGED_INHERIT_TCP_S 30
/* How long a successor waits for the running edged's answer to retire
 * (one request: once read, a second would find the old one retired and
 * its control socket no longer accepting; edgectl upgrade waits 45 s). */
#define EDGED_RETIRE_WAIT_MS 30000
/* Clients the per-client rate limit remembers, all workers together
 * (16 bytes each: 4 MiB). */
#define EDGED_RATELIMIT_CLIENTS (1u << 18)
/* Free memory an arena keeps on top before free() gives it back. */
#define EDGED_TRIM_THRESHOLD (16 << 20)

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: edged -c FILE [-f] [-v] [--upgrade [--ready-fd N]]\n"
	    "       edged -c FILE --check | --check-file\n"
	    "       edged -V | --version\n"
	    "  -c, --config FILE   configuration file\n"
	    "      --check         check the configuration and the host "
	    "(user,\n"
	    "                      directories, free listen addresses), print\n"
	    "                      every error, and exit\n"
	    "      --check-file    the file and its certificates only (what a\n"
	    "                      reload checks: for a running edged)\n"
	    "  -f, --foreground    do not detach; log to stderr (detached,\n"
	    "                      edged logs to syslog, facility daemon)\n"
	    "  -v, --verbose       debug messages\n"
	    "      --upgrade       take over the running edged's sockets\n"
	    "                      (its control socket) and retire it once\n"
	    "                      serving (edgectl upgrade runs this)\n"
	    "      --ready-fd N    write \"ready\" to descriptor N once "
	    "serving\n"
	    "  -V, --version       the version, the commit built and the\n"
	    "                      libraries' versions\n"
	    "  -h, --help          this text\n"
	    "signals: HUP reload, TERM/INT drain and exit, USR1 reopen the\n"
	    "analytics file. See edged(8) and edge.conf(5).\n");
}

static void print_warnings(const struct config *cfg)
{
	size_t i;

	for (i = 0; i < cfg->n_warnings; i++)
		log_warnx("%s", cfg->warnings[i]);
}

/* Whether two optional strings differ. */
static bool str_differs(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") != 0;
}

/* Name, in out, the settings of next that differ from the running cur
 * but apply only at the next start ("" when none). */
static void edged_start_only_changes(const struct edged *d,
				     const struct config *next, char *out,
				     size_t len)
{
	const struct config *cur = d->cfg;
	bool listen = cur->n_listen != next->n_listen;
	size_t i, n = 0;

	out[0] = '\0';
	for (i = 0; !listen && i < cur->n_listen; i++)
		listen =
		    strcmp(cur->listen[i].text, next->listen[i].text) != 0 ||
		    cur->listen[i].proxy_protocol !=
			next->listen[i].proxy_protocol;
#define EDGED_NOTE(changed, name)                                              \
	do {                                                                   \
		if ((changed) && n < len)                                      \
			n += (size_t)snprintf(out + n, len - n, "%s%s",        \
					      n ? ", " : "", (name));          \
	} while (0)
	EDGED_NOTE(listen, "listen");
	EDGED_NOTE(tcproute_file_moved(d->tcp, next),
		   "the listen addresses, sni or proxy_protocol of tcp_routes");
	EDGED_NOTE(cur->workers != next->workers, "workers");
	EDGED_NOTE(cur->io_uring != next->io_uring, "io_uring");
	EDGED_NOTE(str_differs(cur->user, next->user), "user");
	EDGED_NOTE(strcmp(cur->admin_listen.text, next->admin_listen.text),
		   "admin_listen");
	EDGED_NOTE(str_differs(cur->control_socket, next->control_socket),
		   "control_socket");
	EDGED_NOTE(str_differs(cur->pin_dir, next->pin_dir), "pin_dir");
	EDGED_NOTE(config_analytics_differs(&cur->analytics, &next->analytics),
		   "analytics");
	EDGED_NOTE(str_differs(cur->pg, next->pg), "pg");
	EDGED_NOTE(str_differs(cur->pg_snapshot, next->pg_snapshot),
		   "pg_snapshot");
	EDGED_NOTE(str_differs(cur->host_name, next->host_name), "host_name");
	EDGED_NOTE(!config_acme_same(&cur->acme, &next->acme),
		   "acme (edgectl upgrade applies it without a dropped "
		   "connection)");
	{
		bool tls = cur->tls.n_listen != next->tls.n_listen;

		for (i = 0; !tls && i < cur->tls.n_listen; i++)
			tls = strcmp(cur->tls.listen[i].text,
				     next->tls.listen[i].text) != 0 ||
			      cur->tls.listen[i].proxy_protocol !=
				  next->tls.listen[i].proxy_protocol;
		EDGED_NOTE(tls, "tls.listen");
		tls = cur->tls.n_quic_listen != next->tls.n_quic_listen;
		for (i = 0; !tls && i < cur->tls.n_quic_listen; i++)
			tls = strcmp(cur->tls.quic_listen[i].text,
				     next->tls.quic_listen[i].text) != 0;
		EDGED_NOTE(tls, "tls.quic_listen");
	}
#undef EDGED_NOTE
}

/*
 * Make room for cfg's limits.max_connections: raise RLIMIT_NOFILE to
 * what they need (two descriptors each, after the reserve) — the hard
 * limit too while edged is root, else the soft one up to the hard — and
 * say when the limit still allows fewer: the workers then stop accepting
 * at that many (worker_fd_conn_cap), so that every connection accepted
 * can reach its upstream. At start, and at every reload (which may raise
 * max_connections; the listeners and workers are the start's).
 */
static void edged_fd_limit(struct edged *d, const struct config *cfg)
{
	unsigned long long want;
	unsigned long cap;
	struct rlimit rl, up;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	want = worker_fd_reserve(&d->sh) + 2 * cfg->limits.max_connections;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
		up = rl;
		up.rlim_cur = (rlim_t)want;
		if (up.rlim_max != RLIM_INFINITY && up.rlim_max < up.rlim_cur)
			up.rlim_max = up.rlim_cur; /* root only */
		if (setrlimit(RLIMIT_NOFILE, &up)) {
			up = rl;
			up.rlim_cur = rl.rlim_max; /* as far as the hard one */
			if (setrlimit(RLIMIT_NOFILE, &up))
				up = rl;
		}
		rl = up;
	}
	if (rl.rlim_cur == RLIM_INFINITY)
		return;
	cap = worker_fd_conn_cap(&d->sh, (unsigned long)rl.rlim_cur);
	atomic_store(&d->sh.fd_conn_cap, cap);
	if (cap >= cfg->limits.max_connections) {
		memset(d->fd_warned, 0, sizeof(d->fd_warned));
		return;
	}
	if (d->fd_warned[0] == cfg->limits.max_connections &&
	    d->fd_warned[1] == (unsigned long long)rl.rlim_cur &&
	    d->fd_warned[2] == cap) {
		log_debug("limits.max_connections %llu: still at most %lu at "
			  "once (RLIMIT_NOFILE %llu)",
			  (unsigned long long)cfg->limits.max_connections, cap,
			  (unsigned long long)rl.rlim_cur);
		return;
	}
	d->fd_warned[0] = cfg->limits.max_connections;
	d->fd_warned[1] = (unsigned long long)rl.rlim_cur;
	d->fd_warned[2] = cap;
	log_warnx("limits.max_connections is %llu but the descriptor limit "
		  "(RLIMIT_NOFILE) is %llu: at most %lu connections at once "
		  "while all are busy (two descriptors each), more while some "
		  "are idle keep-alive ones (one each); the rest wait in the "
		  "listen backlog; raise the limit (ulimit -n, LimitNOFILE=) "
		  "for more",
		  (unsigned long long)cfg->limits.max_connections,
		  (unsigned long long)rl.rlim_cur, cap);
}

/* Hand the workers cfg's limits, timeouts and rate limit. */
static void edged_settings(struct edged *d, const struct config *cfg)
{
	unsigned i;

	edged_fd_limit(d, cfg);
	pthread_mutex_lock(&d->sh.set_lock);
	worker_settings_from(&d->sh.set, cfg);
	atomic_fetch_add(&d->sh.set_gen, 1);
	pthread_mutex_unlock(&d->sh.set_lock);
	admit_gauge_set_limit(&d->sh.inflight,
			      (unsigned)cfg->limits.max_inflight);
	admit_queue_set_max(&d->sh.queue, (size_t)cfg->limits.max_queued);
	/* a raised cap has room for waiters now: tell them, rather than
	 * leave them until a request ends or their timeouts.queue runs out */
	admit_queue_kick(&d->sh.queue);
	log_set_format(cfg->log_format);
	for (i = 0; i < d->nw; i++)
		if (d->w[i])
			worker_retune(d->w[i]);
}

/* Tunnels follow mode from now on, live ones too (the workers move them
 * at their next wake). */
static void edged_splice_mode(struct edged *d, enum splice_mode m,
			      const char *by)
{
	unsigned i;

	if (m == splice_get_mode())
		return;
	splice_set_mode(m);
	for (i = 0; i < d->nw; i++)
		worker_retune(d->w[i]);
	log_note("splice: %s (set by %s)%s", splice_mode_name(m), by,
		 m != SPLICE_OFF && !d->splice
		     ? "; the kernel path is unusable, tunnels stay copied"
		     : "");
}

/* Load the kernel's splice (while edged is root) and run its self-test;
 * any failure leaves tunnels to the copy mover, with the reason. */
static void edged_splice_start(struct edged *d)
{
	struct errbuf err;
	int rc;

	d->splice_conf = d->cfg->splice;
	splice_set_mode((enum splice_mode)d->cfg->splice);
	/* kTLS for tunnels on TLS listeners: what the kernel has, for
	 * status (probed as root: the probe loads the tls module) */
	splice_ktls_probe();
	log_note("splice: %s", splice_ktls_why());
	errbuf_clear(&err);
	rc = splice_open(&d->splice, &err);
	if (rc) {
		splice_set_usable(false, err.msg);
		log_warnx("splice: %s; tunnels are copied in userspace",
			  err.msg);
		return;
	}
	splice_install(d->splice);
	splice_set_usable(true, "the self-test passed");
	log_note("splice: sockmap self-test passed; splice = %s",
		 splice_mode_name(splice_get_mode()));
	if (splice_unarm_why(d->splice))
		log_warnx("splice: %s: sockets leave the verdict by plain "
			  "deletes, and a tunnel leaving the kernel can lose "
			  "bytes arriving as it leaves (then closed, counted "
			  "lost)",
			  splice_unarm_why(d->splice));
}

/* A database health check that gave way to the file's (hcheck_merge):
 * collected in *arg, said by edged_hcheck when new. */
struct edged_lost {
	char (*v)[CONFIG_ADDR_STR_MAX];
	size_t n;
	bool nomem;
};

static void edged_hcheck_lost(void *arg, const struct hcheck_target *won,
			      const struct hcheck_target *dropped)
{
	struct edged_lost *l = arg;
	char(*v)[CONFIG_ADDR_STR_MAX];

	(void)won;
	v = realloc(l->v, (l->n + 1) * sizeof(*v));
	if (!v) {
		l->nomem = true;
		return;
	}
	l->v = v;
	snprintf(v[l->n++], sizeof(*v), "%s", dropped->addr.text);
}

/* Check what the file's deployments (d->hc_file) and the database's ask,
 * the file's check winning for an address both check (logged once). */
static void edged_hcheck(struct edged *d)
{
	struct hcheck_target *db = NULL, *all = NULL;
	struct edged_lost l = {NULL, 0, false};
	size_t ndb = 0, n = 0, i, j;

	if (!d->hc)
		return;
	if (pgplane_hcheck_targets(d->pg, &db, &ndb) ||
	    hcheck_merge(d->hc_file, d->n_hc_file, db, ndb, &all, &n,
			 edged_hcheck_lost, &l) ||
	    hcheck_set(d->hc, all, n)) {
		log_warnx("health checks: out of memory; the old ones stay");
		goto out;
	}
	for (i = 0; i < l.n; i++) {
		for (j = 0; j < d->n_hc_lost; j++)
			if (strcmp(d->hc_lost[j], l.v[i]) == 0)
				break;
		if (j == d->n_hc_lost)
			log_warnx("upstream %s: the configuration file's "
				  "health check is used, the database's "
				  "deployments.health_check for it is not",
				  l.v[i]);
	}
	if (!l.nomem) {
		free(d->hc_lost);
		d->hc_lost = l.v;
		d->n_hc_lost = l.n;
		l.v = NULL;
	}
out:
	free(l.v);
	free(db);
	free(all);
}

static void edged_hcheck_cb(void *arg)
{
	edged_hcheck(arg);
}

/*
 * Load the configuration file again and install its routes and settings:
 * what SIGHUP and `edgectl reload` both do. The file's projects replace
 * the file source's list only (route_writer_update keeps every other
 * source's), with the new settings' defaults. Returns 0 with *gen the new
 * route table generation, or -errno with err holding the reason
 * (FILE:LINE: KEY: ...) and the running configuration untouched.
 */
static int edged_reload(struct edged *d, uint64_t *gen, struct errbuf *err)
{
	struct config *cfg = NULL;
	struct route_src *src = NULL;
	struct route_defaults def;
	struct route_tcp *undo = NULL;
	struct route_tcp_list tcp;
	struct tls_store *tls = NULL;
	struct wake_defs *wdefs;
	struct hcheck_target *hct = NULL;
	size_t nhct = 0;
	bool hc_ok = false;
	int rc;

	errbuf_clear(err);
	rc = config_load(d->conf_path, &cfg, &src, err);
	if (rc) {
		if (!err->msg[0])
			errbuf_set(err, "%s: %s", d->conf_path, strerror(-rc));
		return rc;
	}
	print_warnings(cfg);
	/* the upstreams' TLS files, read again (as edged's user): one that
	 * fails refuses the reload, the running profiles serving on */
	rc = tls_up_load(src, err);
	if (rc) {
		config_free(cfg);
		route_src_free(src);
		return rc;
	}
	/* the certificates, read again (as edged's user): a broken one
	 * refuses the whole reload, the running store serving on */
	if (d->cfg->tls.n_listen && cfg->tls.n_certs) {
		/* the QUIC sockets are the start-up configuration's, kept
		 * until a restart: their handshakes need GnuTLS copies even
		 * when the new file drops tls.quic_listen */
		if (d->sh.cfg->tls.n_quic_listen)
			cfg->tls.gnutls = true;
		rc = tls_store_new_db(&cfg->tls, d->tls_db, &tls, err);
		if (rc) {
			tls_count_reload(false);
			config_free(cfg);
			route_src_free(src);
			return rc;
		}
	}
	config_route_defaults(cfg, &def);
	if (tcproute_reload(d->tcp, cfg, &undo)) {
		tls_store_put(tls);
		config_free(cfg);
		route_src_free(src);
		errbuf_set(err, "%s: out of memory", d->conf_path);
		return -ENOMEM;
	}
	/* the file's projects and the environments of its TCP routes (with
	 * the database's TCP routes as they are), in one generation */
	tcproute_list(d->tcp, &tcp);
	/* the on-demand environments follow the routes once they are in (a
	 * refused update leaves both as they were): what the wake registry
	 * needs of src is copied first, the writer taking src */
	wdefs = wake_defs_new(ROUTE_SRC_FILE, src ? src->projects : NULL,
			      src ? src->n_projects : 0, NULL, 0, true);
	if (hcheck_targets(src, &hct, &nhct))
		log_warnx("%s: health checks: out of memory; the old ones "
			  "stay",
			  d->conf_path);
	else
		hc_ok = true;
	rc = route_writer_update_file(&d->routes, src, &def, tcp.v, tcp.n, gen,
				      err);
	if (rc == 0 && hc_ok) {
		free(d->hc_file);
		d->hc_file = hct;
		d->n_hc_file = nhct;
		hct = NULL;
		edged_hcheck(d);
	}
	free(hct);
	if (rc == 0 && (!wdefs || wake_configure(d->sh.wake, &cfg->wake) ||
			wake_sync_defs(d->sh.wake, wdefs)))
		log_warnx("%s: on-demand environments: out of memory",
			  d->conf_path);
	wake_defs_free(wdefs);
	if (rc && !err->msg[0])
		errbuf_set(err, "%s: %s", d->conf_path, strerror(-rc));
	if (rc)
		tcproute_undo(d->tcp, undo);
	else
		free(undo);
	if (rc == 0) {
		struct errbuf lerr;

		/* an address whose bind failed is tried again */
		tcproute_listen(d->tcp, false, &lerr);
		edged_settings(d, cfg);
		/* ALPN for the handshakes that start from now on */
		tls_set_h2(cfg->http2.enabled);
		if (tls) {
			size_t nn, nc;

			tls_store_counts(tls, &nn, &nc);
			tls_holder_set(&d->sh.tls, tls);
			tls = NULL;
			tls_count_reload(true);
			d->tls_failed[0] = '\0';
			d->tls_rotation_ms = cfg->tls.ticket_rotation_ms;
			log_note("tls: %zu certificate file(s) loaded: %zu "
				 "name(s), %zu context(s)",
				 cfg->tls.n_certs, nn, nc);
		}
		if (cfg->splice != d->splice_conf) {
			d->splice_conf = cfg->splice;
			edged_splice_mode(d, (enum splice_mode)cfg->splice,
					  "the configuration");
		}
	}
	/* listeners, workers, the user and the analytics file apply at the
	 * next start: say so rather than let an operator believe they took
	 * effect */
	if (rc == 0) {
		char changed[256];

		edged_start_only_changes(d, cfg, changed, sizeof(changed));
		if (changed[0])
			log_warnx("%s: changed %s: these apply at the next "
				  "start, the running values stay",
				  d->conf_path, changed);
	}
	config_free(cfg);
	tls_store_put(tls); /* a refused reload's */
	if (rc)
		return rc;
	if (d->sh.analytics)
		analytics_reopen(d->sh.analytics);
	pgplane_file_changed(d->pg);
	log_note("reloaded %s: route table generation %llu", d->conf_path,
		 (unsigned long long)*gen);
	return 0;
}

/* How often the control loop says the upstream failures whose lines were
 * held back (upreg_log_held): within about a second of their second. */
#define EDGED_UPREG_TICK_MS 250

static void edged_upreg_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct edged *d = arg;

	(void)fd;
	(void)what;
	upreg_log_held(d->sh.upreg);
}

/* Look whether every worker has finished draining; past the deadline,
 * stop those that have not. Then leave the control loop. */
static void edged_drain_poll_cb(evutil_socket_t fd, short what, void *arg)
{
	struct edged *d = arg;
	struct timespec now;
	bool running = false, late = clk_now_ns() >= d->drain_end_ns;
	unsigned i;

	(void)fd;
	(void)what;
	clock_gettime(CLOCK_REALTIME, &now);
	for (i = 0; i < d->nw; i++) {
		if (worker_join(d->w[i], &now) == 0)
			continue;
		running = true;
		if (late)
			worker_stop(d->w[i]);
	}
	if (late && running)
		log_warnx("drain timeout: closing the connections left");
	if (!running || late)
		event_base_loopexit(d->base, NULL);
}

/* SIGTERM/SIGINT (sig 0: retired by a successor; -1: a successor whose
 * predecessor did not retire): stop accepting, let
 * the requests in flight finish (timeouts.drain at most) while the
 * control socket and the admin listener keep answering (/healthz says
 * 503; a retired edged's control socket and admin listener are its
 * successor's). A second
 * signal stops at once. */
static void edged_drain(struct edged *d, int sig)
{
	struct timeval tv = {0, EDGED_DRAIN_POLL_MS * 1000};
	unsigned i;

	/* nothing more for a successor: this process's sockets close */
	sockreg_close_all();
	if (d->draining) {
		log_note("signal %d again: stopping now", sig);
		for (i = 0; i < d->nw; i++)
			worker_stop(d->w[i]);
		d->drain_end_ns = 0;
		return;
	}
	/* a retired edged is no longer the service's main process: its
	 * successor is; one stepping back never was */
	if (sig > 0) {
		notify_send("STOPPING=1");
		log_note("signal %d: draining (up to %llu ms)", sig,
			 (unsigned long long)d->sh.set.timeouts.drain_ms);
	} else {
		log_note("upgrade: %s: draining (up to %llu ms)",
			 sig ? "stepping back" : "a successor serves",
			 (unsigned long long)d->sh.set.timeouts.drain_ms);
	}
	d->draining = true;
	/* a draining edged orders no certificate: its orders cancelled
	 * (their tokens unpublished), its leases given back for its
	 * successor or another host */
	acme_mgr_stop(d->acme);
	d->drain_end_ns =
	    clk_now_ns() + d->sh.set.timeouts.drain_ms * 1000000ull;
	for (i = 0; i < d->nw; i++)
		worker_drain(d->w[i]);
	d->drain_poll =
	    event_new(d->base, -1, EV_PERSIST, edged_drain_poll_cb, d);
	if (!d->drain_poll || event_add(d->drain_poll, &tv))
		event_base_loopexit(d->base, NULL); /* shutdown joins */
}

static void edged_signal_cb(evutil_socket_t sig, short what, void *arg)
{
	struct edged *d = arg;
	struct errbuf err;
	uint64_t gen;

	(void)what;
	if (sig == SIGHUP) {
		/* the service manager's reload lasts until READY=1 again,
		 * refused or not */
		notify_send("RELOADING=1");
		if (edged_reload(d, &gen, &err))
			log_warnx("reload refused, keeping the running "
				  "configuration: %s",
				  err.msg);
		notify_send("READY=1");
		return;
	}
	if (sig == SIGUSR1) {
		/* log rotation: the analytics file only, whatever the
		 * configuration file now says */
		if (d->sh.analytics) {
			analytics_reopen(d->sh.analytics);
			log_note("signal %d: reopening the analytics file",
				 (int)sig);
		}
		return;
	}
	edged_drain(d, (int)sig);
}

/* Every TLS_WATCH_MS: a certificate, key or OCSP file changed (or
 * went): build the store again, the running one serving on if the new
 * files are broken (said once per failure). */
static void edged_tls_watch_cb(evutil_socket_t fd, short what, void *arg)
{
	struct edged *d = arg;
	struct tls_store *cur = tls_holder_get(&d->sh.tls), *st;
	struct errbuf err;
	size_t nn, nc;

	(void)fd;
	(void)what;
	if (!cur || !tls_store_changed(cur)) {
		tls_store_put(cur);
		return;
	}
	if (tls_store_rebuild(cur, &st, &err)) {
		tls_store_put(cur);
		if (strcmp(err.msg, d->tls_failed) == 0)
			return;
		snprintf(d->tls_failed, sizeof(d->tls_failed), "%s", err.msg);
		tls_count_reload(false);
		log_warnx("tls: a certificate file changed, but the new files "
			  "are refused, the previous certificates serve on: %s",
			  err.msg);
		return;
	}
	tls_store_put(cur);
	tls_store_counts(st, &nn, &nc);
	tls_holder_set(&d->sh.tls, st);
	tls_count_reload(true);
	d->tls_failed[0] = '\0';
	log_note("tls: a certificate file changed: reloaded, %zu name(s), "
		 "%zu context(s)",
		 nn, nc);
}

/* The ticket keys' rotation (tls.session_ticket_rotation, re-read at
 * each turn so that a reload's value applies from the next). */
static void edged_tls_rotate_cb(evutil_socket_t fd, short what, void *arg)
{
	struct edged *d = arg;
	struct timeval tv = {(time_t)(d->tls_rotation_ms / 1000),
			     (suseconds_t)(d->tls_rotation_ms % 1000 * 1000)};

	(void)fd;
	(void)what;
	if (tls_tickets_rotate())
		log_warnx("tls: the session ticket key could not be rotated "
			  "(no random bytes): the current one stays");
	else
		d->tls_rotated_ns = clk_now_ns();
	evtimer_add(d->tls_rotate, &tv);
}

/* The database's certificates table as it is now (pgplane): the rows
 * checked (tls_db_update), and when what is accepted changed, a store of
 * the running store's files and those rows; if the files are broken
 * now, the running store serves on (the file watch says why). */
/* The database's challenge keys at this second: into the workers'
 * settings (a key file's win), the change said, the timer set for the
 * next key to start signing. */
static void edged_chal_apply(struct edged *d)
{
	int64_t now = (int64_t)time(NULL), signer, other, next;
	struct timeval tv = {0, 0};
	struct chal_keys keys;

	bool file;

	chal_keys_pick(d->chal_rows, d->n_chal_rows, now, &keys, &signer,
		       &other, &next);
	chal_db_keys_set(&keys);
	OPENSSL_cleanse(&keys, sizeof(keys));
	pthread_mutex_lock(&d->sh.set_lock);
	worker_settings_chal(&d->sh.set);
	file = d->sh.set.chal_file; /* the configuration now (reloads) */
	atomic_fetch_add(&d->sh.set_gen, 1);
	pthread_mutex_unlock(&d->sh.set_lock);
	if (file && d->n_chal_rows) {
		if (!d->chal_said_file)
			log_note("challenge: challenge.key_file's keys sign; "
				 "the database's challenge_keys are not used "
				 "on this host");
		d->chal_said_file = true;
	} else if (signer != d->chal_signer || other != d->chal_other) {
		if (signer && other)
			log_note("challenge: challenge_keys id %lld signs, id "
				 "%lld verifies too",
				 (long long)signer, (long long)other);
		else if (signer)
			log_note("challenge: challenge_keys id %lld signs",
				 (long long)signer);
		else
			log_note(
			    "challenge: no challenge_keys row signs (yet): "
			    "a key made at start signs, which no other "
			    "host accepts");
	}
	d->chal_signer = signer;
	d->chal_other = other;
	if (next && d->chal_ev) {
		tv.tv_sec = next - now;
		evtimer_add(d->chal_ev, &tv);
	}
}

static void edged_chal_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	edged_chal_apply(arg);
}

static void edged_chal_db_cb(void *arg, const struct chal_key_row *v, size_t n)
{
	struct edged *d = arg;
	struct chal_key_row *rows = calloc(n ? n : 1, sizeof(*rows));

	if (!rows) {
		log_warnx("challenge: challenge_keys: out of memory");
		return;
	}
	memcpy(rows, v, n * sizeof(*rows));
	if (d->chal_rows)
		OPENSSL_cleanse(d->chal_rows,
				d->n_chal_rows * sizeof(*d->chal_rows));
	free(d->chal_rows);
	d->chal_rows = rows;
	d->n_chal_rows = n;
	edged_chal_apply(d);
}

/* The store's rows are now the database's (d->pg_certs) and ACME's files'
 * (acme_mgr_rows), each checked alone (tls_db_update); when what is
 * accepted changed, a store of the running store's files and those rows;
 * if the files are broken now, the running store serves on (the file
 * watch says why). */
static void edged_tls_rows(struct edged *d, const char *what)
{
	const struct tls_db_in *acme = NULL;
	size_t na = acme_mgr_rows(d->acme, &acme), n = d->n_pg_certs + na;
	struct tls_db_in *in;
	struct tls_store *cur, *st;
	struct errbuf err;
	size_t nn, nc, served, refused;
	uint64_t refusals;
	int rc;

	if (!d->tls_db)
		return;
	in = calloc(n + 1, sizeof(*in));
	if (!in) {
		log_warnx("tls: %s: out of memory", what);
		return;
	}
	if (d->n_pg_certs)
		memcpy(in, d->pg_certs, d->n_pg_certs * sizeof(*in));
	if (na)
		memcpy(in + d->n_pg_certs, acme, na * sizeof(*in));
	rc = tls_db_update(d->tls_db, in, n);
	free(in);
	if (rc <= 0) {
		if (rc < 0)
			log_warnx("tls: %s: out of memory", what);
		return;
	}
	cur = tls_holder_get(&d->sh.tls);
	if (!cur)
		return;
	rc = tls_store_with_db(cur, d->tls_db, &st, &err);
	tls_store_put(cur);
	if (rc) {
		tls_count_reload(false);
		log_warnx("tls: %s changed, but the store could not be built, "
			  "the previous certificates serve on: %s",
			  what, err.msg);
		return;
	}
	tls_store_counts(st, &nn, &nc);
	tls_holder_set(&d->sh.tls, st);
	tls_count_reload(true);
	tls_db_counts(d->tls_db, &served, &refused, &refusals);
	log_note("tls: %s applied: %zu served, %zu refused; %zu name(s), %zu "
		 "context(s)",
		 what, served, refused, nn, nc);
	acme_mgr_served_changed(d->acme);
}

static void edged_pg_certs_free(struct edged *d)
{
	size_t i;

	for (i = 0; i < d->n_pg_certs; i++) {
		struct tls_db_in *r = &d->pg_certs[i];

		free((char *)r->id);
		free((char *)r->names);
		free((char *)r->chain_pem);
		if (r->key_pem)
			OPENSSL_cleanse((char *)r->key_pem, strlen(r->key_pem));
		free((char *)r->key_pem);
		free((char *)r->ocsp_hex);
	}
	free(d->pg_certs);
	d->pg_certs = NULL;
	d->n_pg_certs = 0;
}

static void edged_tls_db_cb(void *arg, const struct pgsync_cert *v, size_t n)
{
	struct edged *d = arg;
	struct tls_db_in *in;
	size_t i;
	bool bad = false;

	if (!d->tls_db)
		return;
	in = calloc(n + 1, sizeof(*in));
	if (!in) {
		log_warnx("tls: database certificates: out of memory");
		return;
	}
	for (i = 0; i < n; i++) {
		in[i].id = strdup(v[i].id);
		in[i].names = strdup(v[i].names);
		in[i].chain_pem = strdup(v[i].chain_pem);
		in[i].key_pem = strdup(v[i].key_pem);
		in[i].ocsp_hex = strdup(v[i].ocsp_hex);
		bad = bad || !in[i].id || !in[i].names || !in[i].chain_pem ||
		      !in[i].key_pem || !in[i].ocsp_hex;
	}
	edged_pg_certs_free(d);
	d->pg_certs = in;
	d->n_pg_certs = n;
	if (bad) {
		edged_pg_certs_free(d);
		log_warnx("tls: database certificates: out of memory");
		return;
	}
	edged_tls_rows(d, "the database's certificates");
	acme_mgr_ready(d->acme);
}

/* ---- ACME ---------------------------------------------------------------
 */

/* acme_served_fn: what the running store serves for name. */
static int edged_acme_served(void *arg, const char *name, int64_t *nb,
			     int64_t *na)
{
	struct edged *d = arg;
	struct tls_store *st = tls_holder_get(&d->sh.tls);
	int rc = st ? tls_store_name_times(st, name, nb, na) : -ENOENT;

	tls_store_put(st);
	return rc;
}

static void edged_acme_changed(void *arg)
{
	edged_tls_rows(arg, "ACME's certificates");
}

struct edged_names {
	char **v;
	size_t n;
};

static int edged_acme_name(void *arg, const char *domain)
{
	struct edged_names *nm = arg;
	char **v = realloc(nm->v, (nm->n + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	nm->v = v;
	if (!(v[nm->n] = strdup(domain)))
		return -ENOMEM;
	nm->n++;
	return 0;
}

/* The names of the environments with tls = "auto" to the manager, when
 * the route table changed since it was last told. */
static void edged_acme_names(struct edged *d)
{
	struct route_table *t = route_table_current(&d->sh.routes);
	struct edged_names nm = {NULL, 0};
	size_t i;

	if (!t || route_table_generation(t) == d->acme_gen) {
		route_table_put(t);
		return;
	}
	if (route_table_each_tls_auto(t, edged_acme_name, &nm) < 0)
		log_warnx("acme: out of memory reading the names");
	else {
		d->acme_gen = route_table_generation(t);
		acme_mgr_set_names(d->acme, (const char *const *)nm.v, nm.n);
	}
	route_table_put(t);
	for (i = 0; i < nm.n; i++)
		free(nm.v[i]);
	free(nm.v);
}

static void edged_acme_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	edged_acme_names(arg);
}

/* The database's acme_challenges rows (other hosts' orders, and this
 * one's): the challenge table's database part. */
static void edged_acme_chal_cb(void *arg, const struct acme_chal_row *v,
			       size_t n)
{
	size_t skipped = 0;

	(void)arg;
	if (acme_chal_set_db(v, n, &skipped) < 0)
		log_warnx("acme: the database's challenges: out of memory");
	else if (skipped)
		log_warnx("acme: %zu of the database's %zu challenge(s) "
			  "refused (a name, token or key authorization that "
			  "is not one)",
			  skipped, n);
}

/* ACME at start (with the acme group), after the store: the manager (its
 * account key read or created, as edged's user), its names. */
static int edged_acme_start(struct edged *d)
{
	struct timeval tv = {1, 0};
	char holder[300];
	unsigned rnd = 0;
	struct errbuf err;

	if (!d->cfg->acme.enabled)
		return 0;
	/* a random part too: two containers of one host_name are both
	 * pid 1 */
	if (RAND_bytes((unsigned char *)&rnd, sizeof(rnd)) != 1)
		rnd = (unsigned)clk_now_ns();
	snprintf(holder, sizeof(holder), "%s/%ld/%08x",
		 d->cfg->host_name ? d->cfg->host_name : "edged",
		 (long)getpid(), rnd);
	if (d->cfg->acme.database &&
	    pgacme_new(d->base, d->cfg->pg, &d->pgacme, &err) < 0) {
		log_warnx("acme: %s", err.msg);
		return -1;
	}
	if (acme_mgr_new(d->base, &d->cfg->acme, holder,
			 d->pgacme ? &pgacme_ops : NULL, d->pgacme,
			 edged_acme_served, d, edged_acme_changed, d, &d->acme,
			 &err) < 0) {
		log_warnx("%s", err.msg);
		return -1;
	}
	d->acme_ev = event_new(d->base, -1, EV_PERSIST, edged_acme_cb, d);
	if (!d->acme_ev || event_add(d->acme_ev, &tv) < 0)
		return -1;
	edged_acme_names(d);
	log_note("acme: certificates from %s for the environments with tls = "
		 "\"auto\", stored in %s",
		 d->cfg->acme.directory,
		 d->cfg->acme.database ? "the database" : d->cfg->acme.dir);
	return 0;
}

/* TLS at start, as edged's user (so that a reload, which reads the files
 * as that user too, sees what the start saw): ALPN's h2, the store, the
 * files' watch, the ticket keys' rotation. */
static int edged_tls_start(struct edged *d)
{
	struct timeval w = {TLS_WATCH_MS / 1000, TLS_WATCH_MS % 1000 * 1000};
	struct tls_store *st;
	struct errbuf err;
	size_t nn, nc;

	tls_set_h2(d->cfg->http2.enabled);
	if (!d->cfg->tls.n_listen)
		return 0;
	if ((d->pg || d->cfg->acme.enabled) && tls_db_new(&d->tls_db))
		return -1;
	d->tls_rotated_ns = clk_now_ns();
	if (tls_store_new_db(&d->cfg->tls, d->tls_db, &st, &err)) {
		log_warnx("%s", err.msg);
		return -1;
	}
	tls_store_counts(st, &nn, &nc);
	tls_holder_set(&d->sh.tls, st);
	log_note("tls: %zu certificate(s) loaded: %zu name(s), %zu context(s); "
		 "HTTPS on %zu address(es)",
		 d->cfg->tls.n_certs, nn, nc, d->cfg->tls.n_listen);
	d->tls_rotation_ms = d->cfg->tls.ticket_rotation_ms;
	d->tls_watch =
	    event_new(d->base, -1, EV_PERSIST, edged_tls_watch_cb, d);
	d->tls_rotate = evtimer_new(d->base, edged_tls_rotate_cb, d);
	if (!d->tls_watch || !d->tls_rotate || event_add(d->tls_watch, &w))
		return -1;
	{
		struct timeval tv = {
		    (time_t)(d->tls_rotation_ms / 1000),
		    (suseconds_t)(d->tls_rotation_ms % 1000 * 1000)};

		evtimer_add(d->tls_rotate, &tv);
	}
	return edged_acme_start(d);
}

/*
 * Find cfg->user. Returns 0 with *user: pw, filled, when started as root
 * (the user to switch to), else NULL (nothing to switch); or -ENOENT.
 */
static int edged_user(const struct config *cfg, struct passwd *pw,
		      const struct passwd **user)
{
	struct passwd *p;

	*user = NULL;
	if (geteuid() != 0) {
		log_note("not running as root: staying uid %u (user \"%s\" "
			 "ignored)",
			 (unsigned)geteuid(), cfg->user);
		return 0;
	}
	p = getpwnam(cfg->user);
	if (!p) {
		log_warnx("user \"%s\": no such user", cfg->user);
		return -ENOENT;
	}
	if (p->pw_uid == 0)
		log_warnx("user \"%s\" is root: privileges are kept",
			  cfg->user);
	*pw = *p;
	*user = pw;
	return 0;
}

/* Switch to pw (NULL: stay) after everything privileged is open. */
/* As root, before the privileges drop: path's directory (the directory
 * itself when dir) made for user pw (0700) when it is missing, so that
 * edged, as its user, can write the ACME account key and certificates
 * there (its parent must exist: /var/lib/edge is the service's). An
 * existing directory is left as it is. */
static int edged_acme_dir(const char *path, bool dir, const struct passwd *pw)
{
	char buf[PATH_MAX];
	char *slash;

	snprintf(buf, sizeof(buf), "%s", path);
	if (!dir) {
		slash = strrchr(buf, '/');
		if (!slash || slash == buf)
			return 0;
		*slash = '\0';
	}
	if (mkdir(buf, 0700) < 0) {
		if (errno == EEXIST)
			return 0;
		log_warn("acme: making %s", buf);
		return -1;
	}
	if (pw && chown(buf, pw->pw_uid, pw->pw_gid) < 0) {
		log_warn("acme: handing %s to %s", buf, pw->pw_name);
		return -1;
	}
	return 0;
}

static int edged_acme_dirs(const struct edged *d, const struct passwd *pw)
{
	const struct config_acme *a = &d->cfg->acme;

	if (!a->enabled)
		return 0;
	if (edged_acme_dir(a->account_key, false, pw))
		return -1;
	return a->database ? 0 : edged_acme_dir(a->dir, true, pw);
}

static int edged_drop_privileges(const struct passwd *pw)
{
	if (!pw)
		return 0;
	if (setgroups(1, &pw->pw_gid) || setgid(pw->pw_gid) ||
	    setuid(pw->pw_uid)) {
		log_warn("switching to user \"%s\"", pw->pw_name);
		return -errno;
	}
	if (pw->pw_uid != 0 && setuid(0) == 0) {
		log_warnx("could regain root after dropping privileges");
		return -EPERM;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		log_warn("PR_SET_NO_NEW_PRIVS");
	return 0;
}

static bool edged_healthy(void *ctx)
{
	const struct edged *d = ctx;

	return !d->draining;
}

/* Create the control socket's directory (0700) when it is missing; *made
 * says whether we created it (then edged_ctl_chown gives it away). */
static int edged_ctl_dir(const char *sock, bool *made, struct errbuf *err)
{
	char dir[PATH_MAX];
	char *slash;

	*made = false;
	snprintf(dir, sizeof(dir), "%s", sock);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, 0700) == 0) {
		*made = true;
		return 0;
	}
	if (errno == EEXIST)
		return 0;
	errbuf_set(err, "cannot create %s: %s", dir, strerror(errno));
	return -errno;
}

/* Hand the control socket, its lock, and its directory when we made it,
 * to the user edged is about to become; never through a symlink (the
 * directory may be that user's already). */
static void edged_ctl_chown(const char *sock, bool dir_made,
			    const struct passwd *pw)
{
	char path[PATH_MAX];
	char *slash;

	if (lchown(sock, pw->pw_uid, pw->pw_gid))
		log_warn("chown %s", sock);
	snprintf(path, sizeof(path), "%s.lock", sock);
	if (lchown(path, pw->pw_uid, pw->pw_gid))
		log_warn("chown %s", path);
	if (!dir_made)
		return;
	snprintf(path, sizeof(path), "%s", sock);
	slash = strrchr(path, '/');
	if (slash && slash != path) {
		*slash = '\0';
		if (lchown(path, pw->pw_uid, pw->pw_gid))
			log_warn("chown %s", path);
	}
}

/* A successor serves (ctlcmd's retire): its admin listener is ours no
 * more; drain. */
static int edged_retire(struct edged *d, struct errbuf *err)
{
	if (d->draining) {
		errbuf_set(err, "edged is draining already");
		return -EALREADY;
	}
	admin_stop_listening(d->admin);
	edged_drain(d, 0);
	return 0;
}

/* The control socket and the admin listener, on the control loop (a
 * successor's: the predecessor's lock, control and admin sockets, the
 * control socket accepting from edged_take_over on), each noted for a
 * successor of its own. */
static int edged_control(struct edged *d, const struct passwd *pw)
{
	static const struct ctlcmd_ops ops = {
	    .reload = edged_reload,
	    .splice_mode = edged_splice_mode,
	    .retire = edged_retire,
	};
	const struct config_addr *a = &d->cfg->admin_listen;
	const char *path = d->cfg->control_socket;
	struct errbuf err;
	bool made = false;
	int rc, lock = -1, cfd = -1, afd = -1;

	errbuf_clear(&err);
	if (d->successor) {
		lock = sockreg_take(SOCKREG_LOCK, path);
		cfd = sockreg_take(SOCKREG_CTL, path);
		afd = sockreg_take(SOCKREG_ADMIN, a->text);
		if (lock < 0 || cfd < 0) {
			log_warnx("upgrade: the running edged handed over no "
				  "%s for %s (another control socket, or an "
				  "older edged: restart it instead)",
				  lock < 0 ? "lock" : "control socket", path);
			if (lock >= 0)
				close(lock);
			if (cfd >= 0)
				close(cfd);
			if (afd >= 0)
				close(afd);
			return -EINVAL;
		}
		rc = 0;
	} else {
		rc = edged_ctl_dir(path, &made, &err);
	}
	if (rc == 0)
		rc = ctlcmd_start(d->base, path, lock, cfd, d, &ops, &d->ctl,
				  &err);
	if (rc) {
		log_warnx("control socket: %s", err.msg);
		if (afd >= 0)
			close(afd);
		return rc;
	}
	/* a successor's are its predecessor's, handed to the user already */
	if (pw && pw->pw_uid != 0 && !d->successor)
		edged_ctl_chown(path, made, pw);
	errbuf_clear(&err);
	rc = admin_start(d->base, (const struct sockaddr *)&a->ss, a->len, afd,
			 stats_metrics(d->stats), edged_healthy, d, &d->admin,
			 &err);
	if (rc) {
		log_warnx("%s", err.msg);
		return rc;
	}
	admin_set_render(d->admin, stats_render, d->stats);
	if (sockreg_add(SOCKREG_LOCK, path, 0, ctlcmd_lock_fd(d->ctl)) ||
	    sockreg_add(SOCKREG_CTL, path, 0, ctlcmd_listen_fd(d->ctl)) ||
	    sockreg_add(SOCKREG_ADMIN, a->text, 0, admin_fd(d->admin)))
		log_warnx("upgrade: the control socket, its lock or the admin "
			  "listener cannot be noted for a successor: an "
			  "upgrade would fail");
	return 0;
}

/* The analytics writer (analytics_setup.h): its file, spool directory
 * and their owner made before privileges drop. */
static int edged_analytics(struct edged *d, const struct passwd *pw)
{
	struct errbuf err;
	int rc;

	rc = analytics_setup(d->cfg, pw, &d->sh.analytics, &err);
	if (rc)
		log_warnx("%s", err.msg);
	return rc;
}

static void edged_shutdown(struct edged *d)
{
	struct timespec deadline;
	uint64_t ms = d->sh.set.timeouts.drain_ms;
	unsigned i;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += (time_t)(ms / 1000);
	deadline.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	for (i = 0; i < d->nw; i++) {
		if (worker_join(d->w[i], &deadline) == -ETIMEDOUT) {
			log_warnx("worker %u: drain timeout, closing its "
				  "connections",
				  i);
			worker_stop(d->w[i]);
			deadline.tv_sec += 3600;
			worker_join(d->w[i], &deadline);
		}
	}
}

/* Print the errors in errs, one a line, and what was left out. */
static void edged_errs_print(const struct config_errs *errs)
{
	size_t i;

	for (i = 0; i < errs->n; i++)
		log_warnx("%s", errs->msg[i]);
	if (errs->more)
		log_warnx("... and %zu more error(s) not shown", errs->more);
}

/* Load the configuration at path, every error in it logged, one a
 * line (config_load_all). Returns 0 or -errno. */
static int edged_load(const char *path, struct config **cfg,
		      struct route_src **src)
{
	struct config_errs *errs = calloc(1, sizeof(*errs));
	int rc;

	if (!errs) {
		log_warnx("%s: out of memory", path);
		return -ENOMEM;
	}
	rc = config_load_all(path, cfg, src, errs);
	if (rc && !errs->n)
		config_errs_add(errs, "%s: %s", path, strerror(-rc));
	if (rc)
		edged_errs_print(errs);
	free(errs);
	return rc;
}

/*
 * The configuration's path as an absolute one in *out (malloc'd), for
 * every later reload: a detached edged runs in "/". The path is kept as
 * written, joined to the working directory, and never resolved, so that
 * a reload reads what the name then holds (a file renamed into place, a
 * symbolic link moved). Returns 0 or -errno with the reason logged.
 */
static int edged_abs_path(const char *path, char **out)
{
	char *cwd;

	*out = NULL;
	if (path[0] == '/') {
		*out = strdup(path);
		if (!*out)
			goto nomem;
		return 0;
	}
	while (path[0] == '.' && path[1] == '/')
		path += 2 + strspn(path + 2, "/");
	cwd = getcwd(NULL, 0);
	if (!cwd) {
		int rc = -errno;

		log_warnx("%s: the working directory, to which the "
			  "configuration's path is relative, cannot be "
			  "named: %s",
			  path, strerror(-rc));
		return rc;
	}
	if (asprintf(out, "%s%s%s", cwd, strcmp(cwd, "/") ? "/" : "", path) < 0)
		*out = NULL;
	free(cwd);
	if (*out)
		return 0;
nomem:
	log_warnx("%s: out of memory", path);
	return -ENOMEM;
}

static int edged_check_tls_fn(void *arg, struct errbuf *err)
{
	struct tls_store *st;
	int rc;

	rc = tls_store_new(arg, &st, err);
	if (rc == 0)
		tls_store_put(st);
	return rc;
}

/*
 * The certificates of cfg as edged reads them: as its user, once it has
 * dropped to it (config_host_as_user), when the check runs as root and
 * the user exists; else as the caller. A file only root can read is
 * reported as such, naming the user. Adds what failed to errs.
 */
static void edged_check_tls(const struct config *cfg, struct config_errs *errs)
{
	struct passwd *pw = geteuid() == 0 ? getpwnam(cfg->user) : NULL;
	struct errbuf err, rerr;

	if (pw && pw->pw_uid == 0)
		pw = NULL;
	if (!config_host_as_user(pw, edged_check_tls_fn, (void *)&cfg->tls,
				 &err))
		return;
	/* what root could read: say it is the user's access */
	if (pw && edged_check_tls_fn((void *)&cfg->tls, &rerr) == 0)
		config_errs_add(errs,
				"%s [checked as user \"%s\", as edged reads "
				"it; root can]",
				err.msg, cfg->user);
	else
		config_errs_add(errs, "%s", pw ? rerr.msg : err.msg);
}

/* config_host_as_user's function: every deployment's tls group of the
 * route_src arg built once (its files read, the key checked); the first
 * failure in err. */
static int edged_up_tls_fn(void *arg, struct errbuf *err)
{
	const struct route_src *src = arg;
	struct errbuf e;
	size_t i, j;

	for (i = 0; src && i < src->n_projects; i++)
		for (j = 0; j < src->projects[i].n_envs; j++) {
			const struct route_src_deployment *d =
			    &src->projects[i].envs[j].deployment;

			if (!d->tls.ca[0] && !d->tls.cert[0])
				continue;
			errbuf_clear(&e);
			if (tls_up_check(&d->tls, &e)) {
				errbuf_set(err, "deployment %s: tls: %s",
					   d->id ? d->id : "-", e.msg);
				return -EINVAL;
			}
		}
	return 0;
}

/* config_host_as_user's function: the file arg opens. */
static int edged_reread_fn(void *arg, struct errbuf *err)
{
	int fd = open(arg, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0) {
		int e = errno;

		errbuf_set(err, "%s: %s", (const char *)arg, strerror(e));
		return -e;
	}
	close(fd);
	return 0;
}

/* The files the configuration reads at every load (config.h's reread:
 * challenge keys, API key and JWT key files, inject snippets) as edged
 * reads them on a reload: as its user (config_host_as_user) when started
 * as root. 0, or -errno with err naming the first that fails. */
static int edged_reread_as_user(const struct config *cfg, struct errbuf *err)
{
	struct passwd *pw = geteuid() == 0 ? getpwnam(cfg->user) : NULL;
	char msg[sizeof(err->msg) + 128];
	size_t i;
	int rc = 0;

	if (pw && pw->pw_uid == 0)
		pw = NULL;
	for (i = 0; i < cfg->n_reread && rc == 0; i++)
		rc = config_host_as_user(pw, edged_reread_fn, cfg->reread[i],
					 err);
	if (rc && pw) {
		snprintf(msg, sizeof(msg),
			 "%s [read as user \"%s\", as edged reads it on a "
			 "reload]",
			 err->msg, cfg->user);
		errbuf_set(err, "%s", msg);
	}
	return rc;
}

/* The deployments' TLS files as edged reads them on a reload: as its
 * user (config_host_as_user) when started as root. 0, or -errno with
 * err saying which file (and "[read as user ...]"). */
static int edged_up_tls_as_user(const struct config *cfg,
				const struct route_src *src, struct errbuf *err)
{
	struct passwd *pw = geteuid() == 0 ? getpwnam(cfg->user) : NULL;
	char msg[sizeof(err->msg) + 128];
	int rc;

	if (pw && pw->pw_uid == 0)
		pw = NULL;
	rc = config_host_as_user(pw, edged_up_tls_fn, (void *)src, err);
	if (rc && pw) {
		snprintf(msg, sizeof(msg),
			 "%s [read as user \"%s\", as edged reads it on a "
			 "reload]",
			 err->msg, cfg->user);
		errbuf_set(err, "%s", msg);
	}
	return rc;
}

/* The deployments' tls groups, each built once as edged's user: what
 * fails added to errs. */
static void edged_check_up_tls(const struct config *cfg,
			       const struct route_src *src,
			       struct config_errs *errs)
{
	struct errbuf err;

	if (edged_up_tls_as_user(cfg, src, &err))
		config_errs_add(errs, "%s", err.msg);
	if (edged_reread_as_user(cfg, &err))
		config_errs_add(errs, "%s: %s", cfg->path, err.msg);
}

/*
 * edged --check: every error of the file (config_load_all), then, when
 * it loads, the certificates (as edged's user: edged_check_tls) and the host
 * (config_host_check, unless host is false, as for --check-file: the
 * user, the directories, the listen addresses),
 * each error on a line of its own, then a count. Returns the exit code:
 * 0 when nothing was wrong, else 1.
 */
static int edged_check(const char *path, bool host)
{
	struct config_errs *errs = calloc(1, sizeof(*errs));
	struct config_errs *notes = calloc(1, sizeof(*notes));
	struct route_src *src = NULL;
	struct config *cfg = NULL;
	size_t i, n;
	int rc;

	if (!errs || !notes) {
		free(errs);
		free(notes);
		log_warnx("%s: out of memory", path);
		return 1;
	}
	rc = config_load_all(path, &cfg, &src, errs);
	if (rc && !errs->n)
		config_errs_add(errs, "%s: %s", path, strerror(-rc));
	if (rc == 0) {
		print_warnings(cfg);
		if (cfg->tls.n_listen)
			edged_check_tls(cfg, errs);
		edged_check_up_tls(cfg, src, errs);
		if (host)
			config_host_check(cfg, errs, notes);
	}
	edged_errs_print(errs);
	for (i = 0; i < notes->n; i++)
		log_note("%s", notes->msg[i]);
	n = errs->n + errs->more;
	if (n)
		log_warnx("%s: %zu error(s)", path, n);
	else
		printf("%s: ok\n", path);
	config_free(cfg);
	route_src_free(src);
	free(errs);
	free(notes);
	return n ? 1 : 0;
}

/* What the command line asks (edged_args). */
struct edged_opts {
	const char *conf_path; /* as written */
	bool check, check_host, foreground, verbose;
	bool upgrade; /* take over from the running edged */
	int ready_fd; /* "ready" written there once serving; -1: none */
};

/* The options into *o. Returns -1 to go on, else the exit code: 0 after
 * --version or --help, 2 after a usage error (the usage printed). */
static int edged_args(int argc, char **argv, struct edged_opts *o)
{
	static const struct option opts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"check", no_argument, NULL, 'C'},
	    {"check-file", no_argument, NULL, 'F'},
	    {"foreground", no_argument, NULL, 'f'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {"upgrade", no_argument, NULL, 'U'},
	    {"ready-fd", required_argument, NULL, 'R'},
	    {NULL, 0, NULL, 0},
	};
	char *end;
	long v;
	int ch;

	memset(o, 0, sizeof(*o));
	o->check_host = true;
	o->ready_fd = -1;
	while ((ch = getopt_long(argc, argv, "c:fvVh", opts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			o->conf_path = optarg;
			break;
		case 'C':
			o->check = true;
			break;
		case 'F':
			o->check = true;
			o->check_host = false;
			break;
		case 'f':
			o->foreground = true;
			break;
		case 'U':
			o->upgrade = true;
			break;
		case 'R':
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || *end || v < 3 || v > INT_MAX ||
			    fcntl((int)v, F_GETFD) < 0) {
				fprintf(stderr,
					"edged: --ready-fd %s: not an open "
					"descriptor above 2\n",
					optarg);
				return 2;
			}
			o->ready_fd = (int)v;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'V':
			printf("edged %s (commit %s)\n", EDGE_VERSION,
			       EDGE_COMMIT);
			version_print_libs(stdout);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!o->conf_path || optind != argc) {
		usage(stderr);
		return 2;
	}
	/* the process that takes the sockets is the one that retires the
	 * old edged (its pid is checked): no detaching in between */
	if (o->upgrade && !o->foreground) {
		fprintf(stderr, "edged: --upgrade needs -f (edgectl upgrade "
				"runs it so)\n");
		return 2;
	}
	return -1;
}

/* The configuration at path (made absolute: edged_abs_path) into d, its
 * routes into *src, its log format applied and its warnings logged. */
static int edged_config(struct edged *d, const char *path,
			struct route_src **src)
{
	struct errbuf err;

	if (edged_abs_path(path, &d->conf_path) ||
	    edged_load(d->conf_path, &d->cfg, src))
		return -1;
	log_set_format(d->cfg->log_format);
	print_warnings(d->cfg);
	/* TLS to the file's https:// endpoints: CA, client certificates,
	 * readable by the user too (a reload reads them as it) */
	if (edged_up_tls_as_user(d->cfg, *src, &err) ||
	    edged_reread_as_user(d->cfg, &err) || tls_up_load(*src, &err)) {
		log_warnx("%s: %s", d->conf_path, err.msg);
		return -1;
	}
	/* the database's environments may turn a challenge on any time */
	if (d->cfg->pg && !d->cfg->challenge.key_file)
		log_note("challenge: no challenge.key_file: challenges sign "
			 "with the database's challenge_keys, and with a key "
			 "made at start (which no other host accepts) until "
			 "there is one");
	return 0;
}

/* Whether edged's messages will reach someone: detached, stderr is
 * /dev/null, so syslog or nothing. */
static int edged_log_reachable(bool foreground)
{
	if (foreground || log_syslog_available())
		return 0;
	log_warnx("no syslog at /dev/log: a detached edged would have "
		  "nowhere to write its messages; run it in the "
		  "foreground (-f) under a supervisor (systemd: the "
		  "journal) or start a syslog daemon");
	return -1;
}

/* The process: SIGPIPE ignored, the service manager's socket (Type=notify:
 * connected while root, notify.h), libevent's locks. */
static int edged_process(void)
{
	int rc;

	signal(SIGPIPE, SIG_IGN);
	/* glibc gives an arena's free top back to the kernel as soon as it
	 * passes 128 KiB: a worker whose responses each take a few hundred
	 * KiB for a while (zlib's deflate state, bodies) then faults the
	 * same pages in again, response after response (docs/benchmarks.md,
	 * "A compressed 64 KiB JSON response"). Up to EDGED_TRIM_THRESHOLD
	 * stays; the workers' tick gives back the rest (malloc_trim). */
	if (!mallopt(M_TRIM_THRESHOLD, EDGED_TRIM_THRESHOLD))
		log_warnx("mallopt(M_TRIM_THRESHOLD): refused");
	rc = notify_init();
	if (rc)
		log_warnx("NOTIFY_SOCKET: %s: readiness will not be reported",
			  strerror(-rc));
	if (evthread_use_pthreads()) {
		log_warnx("libevent: no pthreads support");
		return -1;
	}
	return 0;
}

/* What the workers share (worker_shared: settings, admission, the
 * per-client buckets, the descriptor limit) and the route table's writer;
 * the clock of uptime starts. */
static int edged_shared(struct edged *d)
{
	struct route_defaults def;

	d->sh.cfg = d->cfg;
	tls_holder_init(&d->sh.tls);
	pthread_mutex_init(&d->sh.set_lock, NULL);
	worker_settings_from(&d->sh.set, d->cfg);
	admit_gauge_init(&d->sh.inflight,
			 (unsigned)d->cfg->limits.max_inflight);
	if (admit_queue_init(&d->sh.queue, &d->sh.inflight,
			     (size_t)d->cfg->limits.max_queued,
			     req_queue_notify))
		return -1;
	/* the per-client buckets, whether ratelimit is on or not: a reload
	 * may turn it on (a table not used costs no resident memory) */
	if (admit_limiter_new(EDGED_RATELIMIT_CLIENTS, &d->sh.limiter)) {
		log_warnx("ratelimit: %s", strerror(ENOMEM));
		return -1;
	}
	edged_fd_limit(d, d->cfg);
	d->start_ns = clk_now_ns();
	config_route_defaults(d->cfg, &def);
	route_writer_init(&d->routes, &d->sh.routes, &def);
	return 0;
}

/* The control plane, with pg: the migrations, the database's rows (or
 * the local snapshot's), the maps opened for writing and the snapshot's
 * directory made while edged is still root. */
static int edged_pg_prepare(struct edged *d, const struct passwd *user)
{
	struct errbuf err;

	if (!d->cfg->pg)
		return 0;
	errbuf_clear(&err);
	if (pgplane_prepare(d->cfg, user, d->tcp, &d->pg, &err)) {
		log_warnx("%s", err.msg);
		return -1;
	}
	return 0;
}

/* Route table generation 1: the file's projects (*src, the writer's from
 * here: *src becomes NULL) and the TCP routes of every source; then the
 * on-demand environments, each probed once (running if an endpoint
 * accepts, else sleeping), once the routes naming them are in, as at a
 * reload; the health checks' targets kept for edged_loop. */
static int edged_routes(struct edged *d, struct route_src **src)
{
	struct route_src *s = *src;
	struct route_tcp_list tcp;
	struct wake_defs *wdefs;
	struct errbuf err;
	int rc;

	tcproute_list(d->tcp, &tcp);
	if (wake_new(&d->cfg->wake, req_wake_notify, &d->sh.wake))
		return -1;
	wdefs = wake_defs_new(ROUTE_SRC_FILE, s ? s->projects : NULL,
			      s ? s->n_projects : 0, NULL, 0, true);
	if (!wdefs)
		return -1;
	/* the health checks' endpoints, taken before the writer takes src
	 * (they start once the control loop exists) */
	if (hcheck_targets(s, &d->hc_file, &d->n_hc_file)) {
		wake_defs_free(wdefs);
		return -1;
	}
	errbuf_clear(&err);
	rc = route_writer_update_file(&d->routes, s, NULL, tcp.v, tcp.n, NULL,
				      &err);
	*src = NULL; /* the writer's */
	tcproute_applied(d->tcp, rc == 0);
	if (rc) {
		wake_defs_free(wdefs);
		log_warnx("%s", err.msg[0] ? err.msg : strerror(-rc));
		return -1;
	}
	rc = wake_sync_defs(d->sh.wake, wdefs);
	wake_defs_free(wdefs);
	return rc;
}

/* The upstream registry and the workers (each binds its HTTP listening
 * sockets), told of the TCP routes. */
static int edged_workers(struct edged *d)
{
	struct errbuf err;
	unsigned i;
	int rc;

	d->sh.upreg = upreg_new();
	d->w = calloc(d->cfg->workers, sizeof(*d->w));
	if (!d->w || !d->sh.upreg)
		return -1;
	services_install(&d->sh);
	for (i = 0; i < d->cfg->workers; i++) {
		errbuf_clear(&err);
		rc = worker_new(i, &d->sh, &d->w[i], &err);
		if (rc) {
			log_warnx("%s", err.msg[0] ? err.msg : strerror(-rc));
			return -1;
		}
		d->nw++;
	}
	tcproute_workers(d->tcp, d->w, d->nw);
	return 0;
}

/* The control loop and what it runs from the start: the health checks,
 * the registry's held lines, the signals. */
static int edged_loop(struct edged *d)
{
	static const int sigs[4] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1};
	struct timeval tv = {0, EDGED_UPREG_TICK_MS * 1000};
	unsigned i;

	d->base = event_base_new();
	if (!d->base || hcheck_new(d->base, d->sh.upreg, &d->hc))
		return -1;
	d->upreg_tick =
	    event_new(d->base, -1, EV_PERSIST, edged_upreg_tick_cb, d);
	if (!d->upreg_tick || event_add(d->upreg_tick, &tv))
		return -1;
	if (hcheck_set(d->hc, d->hc_file, d->n_hc_file))
		return -1;
	for (i = 0; i < 4; i++) {
		d->sig[i] = evsignal_new(d->base, sigs[i], edged_signal_cb, d);
		if (!d->sig[i] || evsignal_add(d->sig[i], NULL))
			return -1;
	}
	return 0;
}

/* The metrics registry and what it renders besides stats.c's own. */
static int edged_stats(struct edged *d)
{
	if (stats_new(&d->sh, d->cfg->pin_dir, &d->stats) ||
	    stats_build_info(d->stats, EDGE_VERSION, EDGE_COMMIT) ||
	    tcproute_metrics(d->tcp, stats_metrics(d->stats)) ||
	    tls_metrics(stats_metrics(d->stats)) ||
	    http2_metrics(stats_metrics(d->stats)) ||
	    quic_metrics(stats_metrics(d->stats), d->cfg->workers) ||
	    wake_metrics(d->sh.wake, stats_metrics(d->stats)))
		return -1;
	return 0;
}

/* Every TCP route's address, bound once per worker while edged is root:
 * a file route's that cannot be is an error, as an HTTP listen address
 * is; a database route's is logged and left for the next change. Then
 * the descriptor limit again, with the listeners just made. */
static int edged_tcp_listen(struct edged *d)
{
	struct errbuf err;

	errbuf_clear(&err);
	if (tcproute_listen(d->tcp, true, &err)) {
		log_warnx("%s", err.msg);
		return -1;
	}
	edged_fd_limit(d, d->cfg);
	return 0;
}

/* Unless foreground, detach: from here on every message goes to syslog
 * (LOG_DAEMON). */
static int edged_detach(bool foreground)
{
	if (foreground)
		return 0;
	if (log_use_syslog()) {
		log_warnx("syslog at /dev/log is gone: not detaching");
		return -1;
	}
	if (daemon(0, 0)) {
		log_warn("daemon");
		return -1;
	}
	return 0;
}

/* What runs threads or needs the final process, after daemon() (fork
 * keeps only the calling thread): the loops made anew, the analytics
 * writer's threads, the route reaper, the Via name, the wakes, the
 * request hook. */
static int edged_after_detach(struct edged *d)
{
	unsigned i;
	int rc;

	if (event_reinit(d->base))
		return -1;
	for (i = 0; i < d->nw; i++)
		if (event_reinit(d->w[i]->base))
			return -1;
	if (d->sh.analytics && analytics_start(d->sh.analytics))
		return -1;
	/* an old generation is freed off the loops (a big change's is) */
	rc = route_reaper_start();
	if (rc)
		log_warnx("route table: no thread to free old generations "
			  "(%s): they are freed where they are dropped",
			  strerror(-rc));
	hdr_via_init(d->sh.via, sizeof(d->sh.via), d->cfg->host_name);
	if (wake_start(d->sh.wake, d->base))
		return -1;
	d->sh.request_done = stats_request_done;
	d->sh.request_done_arg = d->stats;
	return 0;
}

/* The control plane on the control loop from here: the local snapshot
 * now, then the database. */
static int edged_pg_start(struct edged *d)
{
	struct errbuf err;

	if (!d->pg)
		return 0;
	errbuf_clear(&err);
	if (d->tls_db)
		pgplane_set_certs(d->pg, edged_tls_db_cb, d);
	/* every host answers the challenges of the database (another
	 * host's orders), with or without an acme group of its own */
	pgplane_set_acme_challenges(d->pg, edged_acme_chal_cb, d);
	pgplane_set_hcheck(d->pg, edged_hcheck_cb, d);
	d->chal_ev = evtimer_new(d->base, edged_chal_timer_cb, d);
	if (!d->chal_ev) {
		log_warnx("challenge: out of memory");
		return -1;
	}
	pgplane_set_chal_keys(d->pg, edged_chal_db_cb, d);
	if (pgplane_start(d->pg, d->base, &d->routes, d->tcp, d->sh.wake,
			  stats_metrics(d->stats), &err)) {
		log_warnx("%s", err.msg);
		return -1;
	}
	return 0;
}

/* The workers' threads; one that cannot start stops them all. */
static int edged_workers_start(struct edged *d)
{
	unsigned i;
	int rc;

	for (i = 0; i < d->nw; i++) {
		rc = worker_start(d->w[i]);
		if (rc) {
			log_warnx("worker %u: %s", i, strerror(-rc));
			for (i = 0; i < d->nw; i++)
				worker_stop(d->w[i]);
			edged_shutdown(d);
			return -1;
		}
	}
	return 0;
}

/* "serving on" and READY=1 once every worker has made its io_uring ring
 * or said why not: a status asked after them says how each reads and
 * sends, never "starting". */
/* The predecessor's TCP route sockets no route of this process took:
 * the database's routes had their time to come (EDGED_INHERIT_TCP_S). */
static void edged_inherit_tcp_done_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	sockreg_inherit_done(SOCKREG_TCP);
}

/* A successor serves: the predecessor retires (drains and exits), the
 * control socket accepts here, the sockets nobody took close. */
static bool edged_take_over(struct edged *d)
{
	struct timeval tv = {EDGED_INHERIT_TCP_S, 0};
	json_t *req = json_pack("{s:s}", "cmd", "retire"), *res = NULL;
	struct errbuf err;
	int rc = -ENOMEM;

	/* edgectl must not kill this one while it asks */
	if (d->ready_fd >= 0 && write(d->ready_fd, "retiring\n", 9) != 9)
		log_warn("upgrade: ready fd");
	errbuf_clear(&err);
	if (req)
		rc = ctlproto_call(d->cfg->control_socket, req, &res,
				   EDGED_RETIRE_WAIT_MS, &err);
	json_decref(req);
	if (rc) {
		/* both would serve, the old one out of reach: step back */
		log_warnx("upgrade: the running edged did not retire (%s): "
			  "this one drains and exits",
			  rc == -ENOMEM ? "out of memory" : err.msg);
		if (d->ready_fd >= 0)
			dprintf(d->ready_fd,
				"failed: the running edged did not retire: "
				"%s\n",
				rc == -ENOMEM ? "out of memory" : err.msg);
		json_decref(res);
		sockreg_inherit_done(SOCKREG_KINDS);
		edged_drain(d, -1);
		return false;
	}
	log_note("upgrade: took over from edged %lld",
		 (long long)json_integer_value(json_object_get(res, "pid")));
	json_decref(res);
	errbuf_clear(&err);
	if (ctlcmd_commit(d->ctl, &err))
		log_warnx("upgrade: %s", err.msg);
	quic_take_over();
	sockreg_inherit_done(SOCKREG_HTTP);
	sockreg_inherit_done(SOCKREG_HTTPS);
	sockreg_inherit_done(SOCKREG_ADMIN);
	sockreg_inherit_done(SOCKREG_LOCK);
	sockreg_inherit_done(SOCKREG_CTL);
	sockreg_inherit_done(SOCKREG_QUIC_SOCKS);
	sockreg_inherit_done(SOCKREG_QUIC_CFG);
	if (event_base_once(d->base, -1, EV_TIMEOUT, edged_inherit_tcp_done_cb,
			    NULL, &tv))
		sockreg_inherit_done(SOCKREG_TCP);
	return true;
}

static void edged_ready(struct edged *d, bool foreground)
{
	size_t nf, ndb, up, down;
	char ready[64];
	unsigned i;

	for (i = 0; i < d->nw; i++)
		worker_wait_up(d->w[i]);
	tcproute_stats(d->tcp, &nf, &ndb, &up, &down);
	log_note("serving on %zu address(es) and %zu TCP route(s) (%zu from "
		 "the file, %zu from the database; %zu address(es) not "
		 "listening) with %u worker(s)",
		 d->cfg->n_listen, nf + ndb, nf, ndb, down, d->nw);
	if (d->successor && !edged_take_over(d))
		return;
	if (d->ready_fd >= 0) {
		ssize_t n = write(d->ready_fd, "ready\n", 6);

		(void)n;
		close(d->ready_fd);
		d->ready_fd = -1;
	}
	/* listeners bound, privileges dropped, workers running */
	if (foreground && !d->successor) {
		notify_send("READY=1");
		return;
	}
	snprintf(ready, sizeof(ready), "READY=1\nMAINPID=%ld", (long)getpid());
	notify_send(ready);
}

/* The control loop until a drain ends it (edged_drain), then the
 * workers joined. */
static void edged_serve(struct edged *d)
{
	event_base_dispatch(d->base);
	edged_shutdown(d);
	log_note("stopped");
}

/* Everything d holds, however far the start went, and src (the file's
 * routes when the route writer never took them). */
static void edged_free(struct edged *d, struct route_src *src)
{
	unsigned i;

	/* the workers' loops have stopped: first no more messages between
	 * them, then free them (closing one's connections may kick the
	 * admission queue towards another) */
	for (i = 0; i < d->nw; i++)
		worker_quiesce(d->w[i]);
	for (i = 0; i < d->nw; i++)
		worker_free(d->w[i]);
	free(d->w);
	hcheck_free(d->hc); /* before the registry its entries are in */
	free(d->hc_file);
	if (d->chal_ev)
		event_free(d->chal_ev);
	if (d->chal_rows)
		OPENSSL_cleanse(d->chal_rows,
				d->n_chal_rows * sizeof(*d->chal_rows));
	free(d->chal_rows);
	free(d->hc_lost);
	upreg_free(d->sh.upreg);
	wake_free(d->sh.wake);
	for (i = 0; i < 4; i++)
		if (d->sig[i])
			event_free(d->sig[i]);
	if (d->drain_poll)
		event_free(d->drain_poll);
	if (d->upreg_tick)
		event_free(d->upreg_tick);
	if (d->tls_watch)
		event_free(d->tls_watch);
	if (d->tls_rotate)
		event_free(d->tls_rotate);
	if (d->acme_ev)
		event_free(d->acme_ev);
	acme_mgr_free(d->acme);
	pgacme_free(d->pgacme);
	acme_chal_clear();
	pgplane_free(d->pg);
	tls_db_free(d->tls_db);
	edged_pg_certs_free(d);
	tls_up_free_all();
	ctlcmd_free(d->ctl);
	admin_free(d->admin);
	stats_free(d->stats);
	if (d->base)
		event_base_free(d->base);
	analytics_free(d->sh.analytics);
	route_holder_clear(&d->sh.routes);
	route_reaper_stop(); /* what it holds freed: nothing leaks */
	if (d->sh.cfg)
		tls_holder_clear(&d->sh.tls);
	route_writer_free(&d->routes);
	admit_queue_destroy(&d->sh.queue);
	admit_limiter_free(d->sh.limiter);
	splice_install(NULL);
	splice_close(d->splice);
	config_free(d->cfg);
	route_src_free(src);
	tcproute_free(d->tcp);
	notify_close();
	free(d->conf_path);
	sockreg_inherit_done(SOCKREG_KINDS);
	sockreg_close_all();
	if (d->ready_fd >= 0)
		close(d->ready_fd);
}

/* edged --upgrade: the running edged's sockets (sockreg_inherit). */
static int edged_inherit(struct edged *d)
{
	struct errbuf err;
	uint64_t gen;

	errbuf_clear(&err);
	if (sockreg_inherit(d->cfg->control_socket, &err)) {
		log_warnx("upgrade: cannot take over from the running edged: "
			  "%s",
			  err.msg);
		return -1;
	}
	/* QUIC connection IDs of the generation after the running edged's:
	 * its connections stay its own (quicsteer.h) */
	if (sockreg_inherited(SOCKREG_QUIC_SOCKS, &gen))
		quic_steer_set_gen((unsigned)(gen + 1) % EDGE_QUIC_GENS);
	quic_upgrading();
	log_note("upgrade: taking over from the running edged (control "
		 "socket %s)",
		 d->cfg->control_socket);
	return 0;
}

/*
 * The start-up steps in order, each saying why it failed: as root, the
 * configuration, the shared state, the routes, the analytics writer, the
 * workers and every socket; then the switch to the user, TLS, the
 * detach and the threads; then serve until drained.
 */
int main(int argc, char **argv)
{
	struct edged_opts o;
	struct edged d;
	struct route_src *src = NULL; /* the file's, until the writer's */
	struct passwd pw;
	const struct passwd *user = NULL; /* to become; NULL: stay */
	int rc;

	rc = edged_args(argc, argv, &o);
	if (rc >= 0)
		return rc;
	log_init("edged", o.verbose);
	if (o.check)
		return edged_check(o.conf_path, o.check_host);
	memset(&d, 0, sizeof(d));
	rc = 1;
	d.ready_fd = o.ready_fd;
	d.successor = o.upgrade;
	if (edged_config(&d, o.conf_path, &src))
		goto out;
	if (edged_log_reachable(o.foreground))
		goto out;
	if (edged_process())
		goto out;
	if (d.successor && edged_inherit(&d))
		goto out;
	if (edged_shared(&d))
		goto out;
	/* the TCP routes: the file's, then the database's (edged_pg_prepare),
	 * whose addresses edged_tcp_listen binds while edged is root */
	if (tcproute_new(d.cfg, &d.sh, &d.tcp))
		goto out;
	if (edged_user(d.cfg, &pw, &user))
		goto out;
	if (edged_pg_prepare(&d, user))
		goto out;
	if (edged_routes(&d, &src))
		goto out;
	if (edged_analytics(&d, user))
		goto out;
	if (edged_workers(&d))
		goto out;
	if (edged_loop(&d))
		goto out;
	if (edged_stats(&d))
		goto out;
	if (edged_tcp_listen(&d))
		goto out;
	/* before the switch: /run/edge is root's */
	if (edged_control(&d, user))
		goto out;
	edged_splice_start(&d);
	if (edged_acme_dirs(&d, user))
		goto out;
	if (edged_drop_privileges(user))
		goto out;
	if (edged_tls_start(&d))
		goto out;
	if (edged_detach(o.foreground))
		goto out;
	if (edged_after_detach(&d))
		goto out;
	if (edged_pg_start(&d))
		goto out;
	if (edged_workers_start(&d))
		goto out;
	edged_ready(&d, o.foreground);
	edged_serve(&d);
	rc = 0;
out:
	edged_free(&d, src);
	return rc;
}
