// SPDX-License-Identifier: BSD-2-Clause
/*
 * edged.c - the daemon's main thread: options, configuration, the route
 * table, analytics, listeners and workers, privileges, and signals
 * (SIGHUP reloads, SIGTERM/SIGINT drain and exit).
 */
#include <errno.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "analytics.h"
#include "config.h"
#include "log.h"
#include "route.h"
#include "worker.h"

#ifndef EDGE_VERSION
#define EDGE_VERSION "0.1.0"
#endif

struct edged {
	const char *conf_path;
	struct config *cfg;
	struct worker_shared sh;
	struct worker **w;
	unsigned nw;
	struct event_base *base;
	struct event *sig[3];
};

static void usage(FILE *f)
{
	fprintf(f, "usage: edged -c FILE [-f] [-v]\n"
		   "       edged -c FILE --check\n"
		   "       edged --version\n"
		   "  -c, --config FILE   configuration file\n"
		   "      --check         validate the configuration and exit\n"
		   "  -f, --foreground    do not detach; log to stderr\n"
		   "  -v, --verbose       debug messages\n");
}

static void print_warnings(const struct config *cfg)
{
	size_t i;

	for (i = 0; i < cfg->n_warnings; i++)
		log_warnx("%s", cfg->warnings[i]);
}

/* Build a route table from cfg and install it. */
static int edged_routes(struct edged *d, const struct config *cfg, bool first)
{
	struct route_table *t = NULL;
	struct errbuf err;
	int rc;

	errbuf_clear(&err);
	rc = route_table_build(cfg, &t, &err);
	if (rc) {
		log_warnx("%s", err.msg[0] ? err.msg : strerror(-rc));
		return rc;
	}
	if (first)
		route_holder_init(&d->sh.routes, t);
	else
		route_table_swap(&d->sh.routes, t);
	return 0;
}

static void edged_reload(struct edged *d)
{
	struct config *cfg = NULL;
	struct errbuf err;
	struct route_table *t;
	int rc;

	errbuf_clear(&err);
	rc = config_load(d->conf_path, &cfg, &err);
	if (rc) {
		log_warnx("reload refused, keeping the running configuration: "
			  "%s",
			  err.msg[0] ? err.msg : strerror(-rc));
		return;
	}
	print_warnings(cfg);
	if (edged_routes(d, cfg, false) == 0) {
		t = route_table_current(&d->sh.routes);
		log_note("reloaded %s: route table generation %llu",
			 d->conf_path,
			 (unsigned long long)route_table_generation(t));
		route_table_put(t);
	}
	/* listeners, workers, limits and timeouts apply at the next start */
	config_free(cfg);
	if (d->sh.analytics)
		analytics_reopen(d->sh.analytics);
}

static void edged_signal_cb(evutil_socket_t sig, short what, void *arg)
{
	struct edged *d = arg;
	unsigned i;

	(void)what;
	if (sig == SIGHUP) {
		edged_reload(d);
		return;
	}
	log_note("signal %d: draining (up to %llu ms)", (int)sig,
		 (unsigned long long)d->cfg->timeouts.drain_ms);
	for (i = 0; i < d->nw; i++)
		worker_drain(d->w[i]);
	event_base_loopexit(d->base, NULL);
}

/* Switch to cfg->user after everything privileged is open. */
static int drop_privileges(const struct config *cfg)
{
	struct passwd *pw;

	if (geteuid() != 0) {
		log_note("not running as root: staying uid %u (user \"%s\" "
			 "ignored)",
			 (unsigned)geteuid(), cfg->user);
		return 0;
	}
	pw = getpwnam(cfg->user);
	if (!pw) {
		log_warnx("user \"%s\": no such user", cfg->user);
		return -ENOENT;
	}
	if (pw->pw_uid == 0)
		log_warnx("user \"%s\" is root: privileges are kept",
			  cfg->user);
	if (setgroups(1, &pw->pw_gid) || setgid(pw->pw_gid) ||
	    setuid(pw->pw_uid)) {
		log_warn("switching to user \"%s\"", cfg->user);
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

static int edged_analytics(struct edged *d)
{
	struct analytics_conf ac;
	int rc;

	if (!d->cfg->analytics.file || !d->cfg->analytics.file[0])
		return 0;
	memset(&ac, 0, sizeof(ac));
	rc = analytics_file_sink(d->cfg->analytics.file, &ac.sink);
	if (rc)
		return rc;
	ac.queue_cap = d->cfg->analytics.queue;
	return analytics_new(&ac, &d->sh.analytics);
}

static void edged_shutdown(struct edged *d)
{
	struct timespec deadline;
	uint64_t ms = d->cfg->timeouts.drain_ms;
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

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"check", no_argument, NULL, 'C'},
	    {"foreground", no_argument, NULL, 'f'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	static const int sigs[3] = {SIGTERM, SIGINT, SIGHUP};
	struct edged d;
	struct errbuf err;
	bool check = false, foreground = false, verbose = false;
	unsigned i;
	int ch, rc, status = 1;

	memset(&d, 0, sizeof(d));
	while ((ch = getopt_long(argc, argv, "c:fvh", opts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			d.conf_path = optarg;
			break;
		case 'C':
			check = true;
			break;
		case 'f':
			foreground = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 'V':
			printf("edged %s\n", EDGE_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!d.conf_path || optind != argc) {
		usage(stderr);
		return 2;
	}
	log_init("edged", verbose);
	errbuf_clear(&err);
	rc = config_load(d.conf_path, &d.cfg, &err);
	if (rc) {
		log_warnx("%s", err.msg[0] ? err.msg : strerror(-rc));
		return 1;
	}
	print_warnings(d.cfg);
	if (check) {
		printf("%s: ok\n", d.conf_path);
		config_free(d.cfg);
		return 0;
	}

	signal(SIGPIPE, SIG_IGN);
	if (evthread_use_pthreads()) {
		log_warnx("libevent: no pthreads support");
		goto out;
	}
	d.sh.cfg = d.cfg;
	h1_limits_default(&d.sh.h1);
	d.sh.h1.line_max = d.cfg->limits.max_request_line;
	d.sh.h1.head_max = d.cfg->limits.max_header_bytes;
	d.sh.h1.headers_max = (unsigned)d.cfg->limits.max_headers;
	admit_gauge_init(&d.sh.inflight, (unsigned)d.cfg->limits.max_inflight);
	if (edged_routes(&d, d.cfg, true))
		goto out;
	rc = edged_analytics(&d);
	if (rc) {
		log_warnx("analytics: %s", strerror(-rc));
		goto out;
	}
	d.w = calloc(d.cfg->workers, sizeof(*d.w));
	if (!d.w)
		goto out;
	for (i = 0; i < d.cfg->workers; i++) {
		errbuf_clear(&err);
		rc = worker_new(i, &d.sh, &d.w[i], &err);
		if (rc) {
			log_warnx("%s", err.msg[0] ? err.msg : strerror(-rc));
			goto out;
		}
		d.nw++;
	}
	d.base = event_base_new();
	if (!d.base)
		goto out;
	for (i = 0; i < 3; i++) {
		d.sig[i] = evsignal_new(d.base, sigs[i], edged_signal_cb, &d);
		if (!d.sig[i] || evsignal_add(d.sig[i], NULL))
			goto out;
	}
	if (drop_privileges(d.cfg))
		goto out;
	if (!foreground && daemon(0, 0)) {
		log_warn("daemon");
		goto out;
	}
	/* threads start after daemon(): fork keeps only the calling one */
	if (event_reinit(d.base))
		goto out;
	for (i = 0; i < d.nw; i++)
		if (event_reinit(d.w[i]->base))
			goto out;
	if (d.sh.analytics && analytics_start(d.sh.analytics))
		goto out;
	for (i = 0; i < d.nw; i++) {
		rc = worker_start(d.w[i]);
		if (rc) {
			log_warnx("worker %u: %s", i, strerror(-rc));
			for (i = 0; i < d.nw; i++)
				worker_stop(d.w[i]);
			edged_shutdown(&d);
			goto out;
		}
	}
	log_note("serving on %zu address(es) with %u worker(s)",
		 d.cfg->n_listen, d.nw);
	event_base_dispatch(d.base);
	edged_shutdown(&d);
	log_note("stopped");
	status = 0;
out:
	for (i = 0; i < d.nw; i++)
		worker_free(d.w[i]);
	free(d.w);
	for (i = 0; i < 3; i++)
		if (d.sig[i])
			event_free(d.sig[i]);
	if (d.base)
		event_base_free(d.base);
	analytics_free(d.sh.analytics);
	route_holder_clear(&d.sh.routes);
	config_free(d.cfg);
	return status;
}
