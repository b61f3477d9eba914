/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cmd_daemon.c - the commands that talk to edged over its control socket
 * (lib/ctlproto.h): routes, reload, and the daemon's part of status and
 * stats.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctlproto.h"
#include "ctlutil.h"
#include "duration.h"
#include "utf8.h"

int ctl_daemon_call(const struct ctl *c, const char *cmd, json_t **result,
		    struct errbuf *err)
{
	return ctl_daemon_call_with(c, cmd, NULL, NULL, result, err);
}

int ctl_daemon_send(const struct ctl *c, json_t *req, json_t **result,
		    struct errbuf *err)
{
	int ret;

	*result = NULL;
	if (!req) {
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	ret = ctlproto_call(c->ctl_sock, req, result, CTLPROTO_TIMEOUT_MS, err);
	json_decref(req);
	return ret;
}

int ctl_daemon_call_with(const struct ctl *c, const char *cmd, const char *key,
			 const char *value, json_t **result, struct errbuf *err)
{
	return ctl_daemon_send(
	    c,
	    key ? json_pack("{s:s,s:s}", "cmd", cmd, key, value)
		: json_pack("{s:s}", "cmd", cmd),
	    result, err);
}

/*
 * The options of the daemon's commands: --help, and --json where json is
 * not NULL; then at most max_args arguments (the first at argv[*first]).
 * Returns -1 to go on, or the exit code (help printed, a usage error).
 */
static int daemon_opts(int argc, char **argv, bool *json, int max_args,
		       int *first)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int o;

	optind = 0;
	while ((o = ctl_getopt(argc, argv, json ? ":jh" : ":h",
			       json ? opts : opts + 1, argv[0])) != -1) {
		if (o == 'h')
			return ctl_usage_print(argv[0]);
		if (o != 'j')
			return CTL_USAGE;
		*json = true;
	}
	*first = optind;
	if (argc - optind > max_args)
		return ctl_usage_error(argv[0], "%s: unexpected argument '%s'",
				       argv[0], argv[optind + max_args]);
	return -1;
}

/* Whether an answer (or its failure) shows a daemon behind the socket. */
static bool ctl_daemon_answered(int ret)
{
	return ret == 0 || ret == -EREMOTEIO || ret == -ETIMEDOUT ||
	       ret == -EBADMSG;
}

json_t *ctl_daemon_status_json(const struct ctl *c, int ret, json_t *result,
			       const struct errbuf *err)
{
	return json_pack("{s:b,s:s,s:o,s:o}", "running",
			 ctl_daemon_answered(ret), "socket", c->ctl_sock,
			 "status", ret == 0 && result ? result : json_null(),
			 "error", ret ? json_string(err->msg) : json_null());
}

/* An integer member of o, or -1. */
static json_int_t ctl_int(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* The daemon's database sync, one line: what its table holds, and while
 * the database is away, that it serves the last table and why. */
static void ctl_daemon_db_print(const json_t *db)
{
	const char *state, *lerr;
	char dur[64];
	json_int_t v, since;

	if (!json_is_object(db))
		return;
	state = json_string_value(json_object_get(db, "state"));
	lerr = json_string_value(json_object_get(db, "last_error"));
	since = ctl_int(db, "state_for_s");
	printf("db sync:    %s", state ? state : "unknown");
	if (since > 0 && state && strcmp(state, "up") != 0)
		printf(" for %s",
		       duration_format((uint64_t)since, dur, sizeof(dur)));
	if ((v = ctl_int(db, "applied_version")) >= 0)
		printf(", change version %lld", (long long)v);
	if ((v = ctl_int(db, "database_version")) >= 0)
		printf(" (database %lld)", (long long)v);
	if ((v = ctl_int(db, "projects")) >= 0)
		printf(", %lld project%s", (long long)v, v == 1 ? "" : "s");
	if ((v = ctl_int(db, "last_apply_us")) > 0)
		printf(", last change in %lld.%03lld ms", (long long)(v / 1000),
		       (long long)(v % 1000));
	if ((v = ctl_int(db, "reconnects")) > 0)
		printf(", %lld reconnect%s", (long long)v, v == 1 ? "" : "s");
	if (json_is_true(json_object_get(db, "xdp_attached")) &&
	    (v = ctl_int(db, "xdp_rules")) >= 0)
		printf(", %lld XDP rule%s", (long long)v, v == 1 ? "" : "s");
	if ((v = ctl_int(db, "rows_skipped")) > 0)
		printf(", %lld bad row%s skipped since start", (long long)v,
		       v == 1 ? "" : "s");
	if ((v = ctl_int(db, "conflicts")) > 0)
		printf(", %lld name%s left to the file", (long long)v,
		       v == 1 ? "" : "s");
	if (state && strcmp(state, "up") != 0 && strcmp(state, "syncing") != 0)
		printf(json_is_true(json_object_get(db, "from_local_snapshot"))
			   ? "; serving the local snapshot"
			   : "; serving the last table");
	if (lerr && lerr[0] && state && strcmp(state, "up") != 0)
		printf("; last error: %s", lerr);
	printf("\n");
}

/* TLS, two lines: the listeners and certificates (files, database, the
 * next to expire), then the ticket key and the handshakes; a line per
 * database row refused now. */
static void ctl_daemon_tls_print(const json_t *t)
{
	const json_t *l = json_object_get(t, "listen"), *c, *r, *v;
	const char *exp, *expn, *lab;
	json_int_t n;
	size_t i;

	if (!json_is_object(t))
		return;
	printf("tls:        ");
	for (i = 0; i < json_array_size(l); i++)
		printf("%s%s", i ? ", " : "",
		       json_string_value(json_array_get(l, i)));
	printf("; %lld certificate file%s, %lld from the database",
	       (long long)ctl_int(t, "certificates_files"),
	       ctl_int(t, "certificates_files") == 1 ? "" : "s",
	       (long long)ctl_int(t, "certificates_db"));
	if ((n = ctl_int(t, "db_refused_now")) > 0)
		printf(" (%lld row%s refused)", (long long)n,
		       n == 1 ? "" : "s");
	printf(", %lld name%s", (long long)ctl_int(t, "names"),
	       ctl_int(t, "names") == 1 ? "" : "s");
	exp = json_string_value(json_object_get(t, "next_expiry"));
	expn = json_string_value(json_object_get(t, "next_expiry_name"));
	if (exp && exp[0])
		printf("; next expiry %s (%s)", exp, expn ? expn : "?");
	printf("\n");
	c = json_object_get(t, "counts");
	printf("tls:        ticket key %llds old (rotated every %llds); "
	       "%lld handshake%s, %lld resumed",
	       (long long)ctl_int(t, "ticket_key_age_s"),
	       (long long)ctl_int(t, "ticket_rotation_s"),
	       (long long)ctl_int(c, "handshakes"),
	       ctl_int(c, "handshakes") == 1 ? "" : "s",
	       (long long)ctl_int(c, "resumptions"));
	json_object_foreach((json_t *)json_object_get(c, "failures"), lab, v)
	{
		if (json_integer_value(v) > 0)
			printf(", %lld failed (%s)",
			       (long long)json_integer_value(v), lab);
	}
	printf("\n");
	r = json_object_get(t, "db_refused");
	for (i = 0; i < json_array_size(r); i++)
		printf("tls:        refused: %s\n",
		       json_string_value(
			   json_object_get(json_array_get(r, i), "error")));
}

/* The splice's lines: the mode and the kernel path, each kind's mover,
 * the tunnels and what the safety net did. */
/* io_uring: whether the workers' sends go through it, and why not. */
static void ctl_daemon_uring_print(const json_t *u, json_int_t workers)
{
	const char *why = json_string_value(json_object_get(u, "why"));
	json_int_t on = ctl_int(u, "workers");

	if (!json_is_object(u))
		return;
	printf("io_uring:   %lld of %lld worker%s (%s)\n",
	       (long long)(on > 0 ? on : 0),
	       (long long)(workers > 0 ? workers : 0), workers == 1 ? "" : "s",
	       why ? why : "?");
}

/* Brownout: its limit, the most lagging worker's loop lag, the requests
 * shed. */
static void ctl_daemon_brownout_print(const json_t *b)
{
	const json_t *lag = json_object_get(b, "lag_ms");
	json_int_t lim = ctl_int(b, "lag_limit_ms"), most = 0, v;
	size_t i, at = 0;

	if (!json_is_object(b))
		return;
	for (i = 0; i < json_array_size(lag); i++) {
		v = json_integer_value(json_array_get(lag, i));
		if (v > most) {
			most = v;
			at = i;
		}
	}
	if (lim > 0)
		printf("brownout:   sheds past %lldms of loop lag; ",
		       (long long)lim);
	else
		printf("brownout:   off (limits.brownout_lag = \"0\"); ");
	printf("loop lag %lldms at most (worker %zu); %lld request%s shed\n",
	       (long long)most, at, (long long)ctl_int(b, "shed"),
	       ctl_int(b, "shed") == 1 ? "" : "s");
}

/* The sum of an object's integer members ({"protocol_error": 3, ...}). */
static json_int_t ctl_sum(const json_t *o)
{
	const char *k;
	json_t *v;
	json_int_t n = 0;

	json_object_foreach((json_t *)o, k, v)
	{
		(void)k;
		n += json_integer_value(v);
	}
	return n;
}

/* HTTP/2: on or off, and what its connections met. */
static void ctl_daemon_http2_print(const json_t *h)
{
	const json_t *c = json_object_get(h, "counts");
	const json_t *rs = json_object_get(c, "resets");
	const json_t *ga = json_object_get(c, "goaways");

	if (!json_is_object(h))
		return;
	if (!json_is_true(json_object_get(h, "enabled"))) {
		printf("http2:      off (http2.enabled = false)\n");
		return;
	}
	printf("http2:      on%s, %lld connection%s (%lld open, %lld idle "
	       "released), %lld stream%s, %lld reset%s sent, %lld GOAWAY%s "
	       "sent\n",
	       json_is_true(json_object_get(h, "cleartext"))
		   ? " (TLS and cleartext)"
		   : " (TLS)",
	       (long long)ctl_int(c, "connections"),
	       ctl_int(c, "connections") == 1 ? "" : "s",
	       (long long)ctl_int(c, "open"), (long long)ctl_int(c, "released"),
	       (long long)ctl_int(c, "streams"),
	       ctl_int(c, "streams") == 1 ? "" : "s",
	       (long long)ctl_sum(json_object_get(rs, "sent")),
	       ctl_sum(json_object_get(rs, "sent")) == 1 ? "" : "s",
	       (long long)ctl_sum(json_object_get(ga, "sent")),
	       ctl_sum(json_object_get(ga, "sent")) == 1 ? "" : "s");
}

/* HTTP/3: where, and what its connections met (absent: no
 * tls.quic_listen). */
static void ctl_daemon_quic_print(const json_t *q)
{
	const json_t *c = json_object_get(q, "counts");
	const json_t *hs = json_object_get(c, "handshakes");
	const json_t *ed = json_object_get(c, "early_data");

	if (!json_is_object(q))
		return;
	printf("http3:      on %zu address%s, %lld connection%s (%lld open), "
	       "%lld handshake%s failed, %lld stream%s, %lld retr%s, %lld "
	       "datagram%s dropped, %lld packet%s lost\n",
	       json_array_size(json_object_get(q, "listen")),
	       json_array_size(json_object_get(q, "listen")) == 1 ? "" : "es",
	       (long long)ctl_int(c, "connections"),
	       ctl_int(c, "connections") == 1 ? "" : "s",
	       (long long)ctl_int(c, "open"), (long long)ctl_int(hs, "failed"),
	       ctl_int(hs, "failed") == 1 ? "" : "s",
	       (long long)ctl_int(c, "streams"),
	       ctl_int(c, "streams") == 1 ? "" : "s",
	       (long long)ctl_int(c, "retries"),
	       ctl_int(c, "retries") == 1 ? "y" : "ies",
	       (long long)ctl_sum(json_object_get(c, "dropped")),
	       ctl_sum(json_object_get(c, "dropped")) == 1 ? "" : "s",
	       (long long)ctl_int(c, "packets_lost"),
	       ctl_int(c, "packets_lost") == 1 ? "" : "s");
	if (json_is_true(json_object_get(q, "early_data")))
		printf(
		    "            0-RTT on: %lld handshake%s took early data, "
		    "%lld request%s served from it, %lld replay%s "
		    "refused\n",
		    (long long)ctl_int(ed, "accepted"),
		    ctl_int(ed, "accepted") == 1 ? "" : "s",
		    (long long)ctl_int(ed, "requests"),
		    ctl_int(ed, "requests") == 1 ? "" : "s",
		    (long long)ctl_int(ed, "replayed"),
		    ctl_int(ed, "replayed") == 1 ? "" : "s");
}

static void ctl_daemon_splice_print(const json_t *sp)
{
	const json_t *kinds = json_object_get(sp, "kinds");
	const json_t *ended;
	const char *mode = json_string_value(json_object_get(sp, "mode"));
	const char *kwhy = json_string_value(json_object_get(sp, "kernel_why"));
	const char *name;
	json_t *k;
	bool first = true;

	if (!json_is_object(sp))
		return;
	printf("splice:     %s; kernel path %s (%s)\n", mode ? mode : "?",
	       json_is_true(json_object_get(sp, "kernel")) ? "usable"
							   : "unusable",
	       kwhy ? kwhy : "?");
	/* kinds with the same mover for the same reason on one line */
	json_object_foreach((json_t *)kinds, name, k)
	{
		const char *m = json_string_value(json_object_get(k, "mover"));
		const char *why = json_string_value(json_object_get(k, "why"));
		const char *name2;
		json_t *k2;
		bool seen = false, more = false;

		json_object_foreach((json_t *)kinds, name2, k2)
		{
			if (k2 == k)
				break;
			seen |= json_equal(json_object_get(k2, "mover"),
					   json_object_get(k, "mover")) &&
				json_equal(json_object_get(k2, "why"),
					   json_object_get(k, "why"));
		}
		if (seen)
			continue;
		printf("%s%s", first ? "movers:     " : "            ", name);
		json_object_foreach((json_t *)kinds, name2, k2)
		{
			if (!more) {
				more = k2 == k;
				continue;
			}
			if (json_equal(json_object_get(k2, "mover"),
				       json_object_get(k, "mover")) &&
			    json_equal(json_object_get(k2, "why"),
				       json_object_get(k, "why")))
				printf(", %s", name2);
		}
		printf(": %s (%s)\n", m ? m : "?", why ? why : "?");
		first = false;
	}
	printf("tunnels:    %lld spliced, %lld copied; since start %lld "
	       "taken by the kernel, %lld handed back, %lld refused, %lld "
	       "closed by the watchdog, %lld lost; kernel moved %lld bytes "
	       "up, %lld down\n",
	       (long long)ctl_int(sp, "open_spliced"),
	       (long long)ctl_int(sp, "open_copy"),
	       (long long)ctl_int(sp, "spliced"),
	       (long long)ctl_int(sp, "handed_back"),
	       (long long)ctl_int(sp, "refused"),
	       (long long)ctl_int(sp, "watchdog"),
	       (long long)ctl_int(sp, "lost"),
	       (long long)ctl_int(sp, "kernel_bytes_up"),
	       (long long)ctl_int(sp, "kernel_bytes_down"));
	ended = json_object_get(sp, "ended");
	if (json_is_object(ended))
		printf("ended:      tunnels since start: %lld closed, %lld "
		       "idle, %lld by a client error, %lld by an upstream "
		       "error, %lld by edged\n",
		       (long long)ctl_int(ended, "closed"),
		       (long long)ctl_int(ended, "idle"),
		       (long long)ctl_int(ended, "client_error"),
		       (long long)ctl_int(ended, "upstream_error"),
		       (long long)ctl_int(ended, "edge"));
}

/* edgectl splice [on|off|auto|sockmap] [--json] */
int cmd_splice(struct ctl *c, int argc, char **argv)
{
	struct errbuf err = {""};
	json_t *result = NULL;
	const char *mode;
	bool json = false;
	int first, ret;

	ret = daemon_opts(argc, argv, &json, 1, &first);
	if (ret >= 0)
		return ret;
	mode = first < argc ? argv[first] : NULL;
	if (mode && strcmp(mode, "on") && strcmp(mode, "off") &&
	    strcmp(mode, "auto") && strcmp(mode, "sockmap"))
		return ctl_usage_error(
		    argv[0], "%s: '%s' is not on, off, auto or sockmap",
		    argv[0], mode);
	ret = ctl_daemon_call_with(c, "splice", mode ? "mode" : NULL, mode,
				   &result, &err);
	if (ret) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	}
	if (json)
		return ctl_json_print(result);
	ctl_daemon_splice_print(result);
	json_decref(result);
	return CTL_OK;
}

void ctl_daemon_status_print(const struct ctl *c, int ret, const json_t *result,
			     const struct errbuf *err)
{
	const char *version;
	char up[64];
	json_int_t v;

	if (ret == -ENOENT || ret == -ECONNREFUSED) {
		printf("daemon:     not running (no control socket at %s)\n",
		       c->ctl_sock);
		return;
	}
	if (ret) {
		printf("daemon:     %s (%s)\n",
		       ctl_daemon_answered(ret)
			   ? "running, but its status failed"
			   : "unknown",
		       err->msg);
		return;
	}
	printf("daemon:     running");
	if ((v = ctl_int(result, "pid")) >= 0)
		printf(", pid %lld", (long long)v);
	version = json_string_value(json_object_get(result, "version"));
	if (version)
		printf(", edged %s", version);
	if ((v = ctl_int(result, "uptime_s")) >= 0)
		printf(", up %s",
		       v ? duration_format((uint64_t)v, up, sizeof(up)) : "0s");
	if ((v = ctl_int(result, "route_generation")) >= 0)
		printf(", route generation %lld", (long long)v);
	if ((v = ctl_int(result, "workers")) >= 0)
		printf(", %lld worker%s", (long long)v, v == 1 ? "" : "s");
	if ((v = ctl_int(result, "tcp_routes")) > 0) {
		json_int_t open = ctl_int(result, "tcp_connections");

		printf(", %lld TCP route%s (%lld connection%s open)",
		       (long long)v, v == 1 ? "" : "s",
		       (long long)(open > 0 ? open : 0), open == 1 ? "" : "s");
	}
	if (json_is_true(json_object_get(result, "draining")))
		printf(", draining");
	printf(" (%s)\n", c->ctl_sock);
	ctl_daemon_db_print(json_object_get(result, "database"));
	ctl_daemon_tls_print(json_object_get(result, "tls"));
	ctl_daemon_splice_print(json_object_get(result, "splice"));
	ctl_daemon_uring_print(json_object_get(result, "io_uring"),
			       ctl_int(result, "workers"));
	ctl_daemon_http2_print(json_object_get(result, "http2"));
	ctl_daemon_quic_print(json_object_get(result, "quic"));
	ctl_daemon_brownout_print(json_object_get(result, "brownout"));
}

void ctl_daemon_stats_print(const json_t *result, const json_t *prev, double dt)
{
	const json_t *counters = json_object_get(result, "counters");
	const json_t *before = json_object_get(prev, "counters");
	const char *name;
	json_t *v, *b;

	if (prev)
		printf("\n%-32s %14s %12s\n", "DAEMON COUNTER", "TOTAL",
		       "PER SEC");
	else
		printf("\n%-32s %14s\n", "DAEMON COUNTER", "TOTAL");
	if (!json_is_object(counters) || json_object_size(counters) == 0) {
		printf("(edged reported no counters)\n");
		return;
	}
	json_object_foreach((json_t *)counters, name, v)
	{
		json_int_t now, then;

		if (!json_is_integer(v))
			continue;
		now = json_integer_value(v);
		printf("%-32s %14lld", name, (long long)now);
		if (prev) {
			b = json_object_get(before, name);
			then = json_is_integer(b) ? json_integer_value(b) : now;
			printf(" %12.1f", dt > 0 && now >= then
					      ? (double)(now - then) / dt
					      : 0.0);
		}
		printf("\n");
	}
}

/* Column widths for the routes table. */
struct routes_cols {
	int domain, prefix, project, env, deploy;
};

static const char *routes_str(const json_t *r, const char *key,
			      const char *dflt)
{
	const char *s = json_string_value(json_object_get(r, key));

	return s && *s ? s : dflt;
}

static int routes_width(int w, const char *s)
{
	int n = (int)strlen(s);

	return n > w ? n : w;
}

/* A route's upstreams, comma-separated ("-" for none). */
static void routes_print_upstreams(const json_t *r)
{
	const json_t *ups = json_object_get(r, "upstreams");
	size_t j;

	if (!json_is_array(ups) || json_array_size(ups) == 0)
		printf("-");
	for (j = 0; json_is_array(ups) && j < json_array_size(ups); j++) {
		const char *u = json_string_value(json_array_get(ups, j));

		printf("%s%s", j ? "," : "", u ? u : "?");
	}
}

/* A TCP route's name in the table: its listen address, and a TLS
 * passthrough route's sni after it. */
static const char *routes_tcp_name(const json_t *r, char *buf, size_t len)
{
	const char *sni = routes_str(r, "sni", NULL);

	if (!sni)
		return routes_str(r, "listen", "-");
	snprintf(buf, len, "%s sni=%s", routes_str(r, "listen", "-"), sni);
	return buf;
}

/* The TCP routes: listen address (and sni), the source that defines the
 * route, where it goes, connections open; notes: an address edged could
 * not listen on and why, an environment in no source, a project
 * disabled, an environment from the database. */
static void routes_print_tcp(const json_t *tcp)
{
	struct routes_cols w = {9, 0, 7, 11, 10};
	char name[512];
	size_t i;
	int from = 4;

	for (i = 0; i < json_array_size(tcp); i++) {
		const json_t *r = json_array_get(tcp, i);

		w.domain = routes_width(w.domain,
					routes_tcp_name(r, name, sizeof(name)));
		from = routes_width(from, routes_str(r, "route_source", "-"));
		w.project =
		    routes_width(w.project, routes_str(r, "project", "-"));
		w.env = routes_width(w.env, routes_str(r, "environment", "-"));
		w.deploy =
		    routes_width(w.deploy, routes_str(r, "deployment", "-"));
	}
	printf("%-*s  %-*s  %-*s  %-*s  %-*s  %5s  %s\n", w.domain, "TCP ROUTE",
	       from, "FROM", w.project, "PROJECT", w.env, "ENVIRONMENT",
	       w.deploy, "DEPLOYMENT", "OPEN", "UPSTREAMS");
	for (i = 0; i < json_array_size(tcp); i++) {
		const json_t *r = json_array_get(tcp, i);
		json_int_t open = ctl_int(r, "connections");
		bool found = json_is_true(json_object_get(r, "found"));

		printf("%-*s  %-*s  %-*s  %-*s  %-*s  %5lld  ", w.domain,
		       routes_tcp_name(r, name, sizeof(name)), from,
		       routes_str(r, "route_source", "-"), w.project,
		       routes_str(r, "project", "-"), w.env,
		       routes_str(r, "environment", "-"), w.deploy,
		       routes_str(r, "deployment", "-"),
		       (long long)(open > 0 ? open : 0));
		if (found)
			routes_print_upstreams(r);
		else
			printf("-");
		if (json_is_false(json_object_get(r, "listening")))
			printf("  (not listening: %s)",
			       routes_str(r, "listen_error", "not tried yet"));
		if (!found) {
			printf("  (environment not found: connections are "
			       "closed)\n");
			continue;
		}
		if (json_is_false(json_object_get(r, "enabled")))
			printf("  (project disabled)");
		if (strcmp(routes_str(r, "source", "file"), "database") == 0)
			printf("  (environment from the database)");
		printf("\n");
	}
}

/* A route's rules, counted: "  (headers: 7 rules, 3 redirects,
 * unmatched paths 404, compression off, inject head_end+body_end,
 * challenge new_ip, api keys (2) or jwt)"; nothing when it has none. */
static void routes_print_rules(const json_t *r)
{
	const json_t *h = json_object_get(r, "headers"), *v;
	size_t red = json_array_size(json_object_get(r, "redirects")), n = 0;
	bool nf =
	    strcmp(routes_str(r, "unmatched", "deployment"), "not_found") == 0;
	bool off = json_is_false(
	    json_object_get(json_object_get(r, "compression"), "enabled"));
	const json_t *inj = json_object_get(r, "inject");
	bool ih = json_object_get(inj, "head_end") != NULL;
	bool ib = json_object_get(inj, "body_end") != NULL;
	const json_t *ch = json_object_get(r, "challenge");
	const char *cm = json_is_true(json_object_get(ch, "forced"))
			     ? "always (edgectl)"
			     : routes_str(ch, "mode", "off");
	bool chal = strcmp(cm, "off") != 0;
	const json_t *au = json_object_get(r, "auth");
	const json_t *ak = json_object_get(au, "api_keys");
	bool keys = json_is_integer(ak);
	bool jwt = json_is_object(json_object_get(au, "jwt"));
	const json_t *fw = json_object_get(au, "auth_request");
	const char *k, *sep = "";

	json_object_foreach((json_t *)h, k, v) n += json_array_size(v);
	if (!n && !red && !nf && !off && !ih && !ib && !chal && !keys && !jwt &&
	    !json_is_object(fw))
		return;
	printf("  (");
	if (n) {
		printf("headers: %zu rule%s", n, n == 1 ? "" : "s");
		sep = ", ";
	}
	if (red) {
		printf("%s%zu redirect%s", sep, red, red == 1 ? "" : "s");
		sep = ", ";
	}
	if (nf) {
		printf("%sunmatched paths 404", sep);
		sep = ", ";
	}
	if (off) {
		printf("%scompression off", sep);
		sep = ", ";
	}
	if (ih || ib) {
		printf("%sinject %s", sep,
		       ih && ib ? "head_end+body_end"
		       : ih	? "head_end"
				: "body_end");
		sep = ", ";
	}
	if (chal) {
		printf("%schallenge %s", sep, cm);
		sep = ", ";
	}
	if (keys)
		printf("%sapi keys (%lld)%s", sep,
		       (long long)json_integer_value(ak), jwt ? " or jwt" : "");
	else if (jwt)
		printf("%sjwt", sep);
	if (keys || jwt)
		sep = ", ";
	if (json_is_object(fw))
		printf("%sauth_request %s", sep, routes_str(fw, "url", "?"));
	printf(")");
}

static void routes_print_table(const json_t *result)
{
	const json_t *routes = json_object_get(result, "routes");
	const json_t *tcp = json_object_get(result, "tcp_routes");
	struct routes_cols w = {6, 6, 7, 11, 10};
	json_int_t gen = ctl_int(result, "generation");
	size_t i;

	json_int_t cv = ctl_int(result, "change_version");

	if (gen >= 0 && cv >= 0)
		printf("route generation %lld, database change version %lld\n",
		       (long long)gen, (long long)cv);
	else if (gen >= 0)
		printf("route generation %lld\n", (long long)gen);
	if (!json_is_array(routes) || json_array_size(routes) == 0) {
		if (json_array_size(tcp) > 0)
			routes_print_tcp(tcp);
		else
			printf("no routes\n");
		return;
	}
	for (i = 0; i < json_array_size(routes); i++) {
		const json_t *r = json_array_get(routes, i);

		w.domain = routes_width(w.domain, routes_str(r, "domain", "-"));
		w.prefix = routes_width(w.prefix, routes_str(r, "prefix", "-"));
		w.project =
		    routes_width(w.project, routes_str(r, "project", "-"));
		w.env = routes_width(w.env, routes_str(r, "environment", "-"));
		w.deploy =
		    routes_width(w.deploy, routes_str(r, "deployment", "-"));
	}
	printf("%-*s  %-*s  %-*s  %-*s  %-*s  %s\n", w.domain, "DOMAIN",
	       w.prefix, "PREFIX", w.project, "PROJECT", w.env, "ENVIRONMENT",
	       w.deploy, "DEPLOYMENT", "UPSTREAMS");
	for (i = 0; i < json_array_size(routes); i++) {
		const json_t *r = json_array_get(routes, i);

		printf("%-*s  %-*s  %-*s  %-*s  %-*s  ", w.domain,
		       routes_str(r, "domain", "-"), w.prefix,
		       routes_str(r, "prefix", "-"), w.project,
		       routes_str(r, "project", "-"), w.env,
		       routes_str(r, "environment", "-"), w.deploy,
		       routes_str(r, "deployment", "-"));
		routes_print_upstreams(r);
		routes_print_rules(r);
		if (json_is_false(json_object_get(r, "enabled")))
			printf("  (project disabled)");
		if (strcmp(routes_str(r, "source", "file"), "database") == 0)
			printf("  (from the database)");
		printf("\n");
	}
	if (json_array_size(tcp) > 0) {
		printf("\n");
		routes_print_tcp(tcp);
	}
}

/* edgectl routes [--json] and edgectl reload. */
static int cmd_daemon(struct ctl *c, int argc, char **argv)
{
	bool routes = strcmp(argv[0], "routes") == 0, json = false;
	struct errbuf err = {""};
	json_t *result = NULL;
	int first, ret;

	ret = daemon_opts(argc, argv, routes ? &json : NULL, 0, &first);
	if (ret >= 0)
		return ret;
	ret = ctl_daemon_call(c, argv[0], &result, &err);
	if (ret) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	}
	if (json)
		return ctl_json_print(result);
	if (routes) {
		routes_print_table(result);
	} else {
		const char *msg =
		    json_string_value(json_object_get(result, "message"));
		json_int_t gen = ctl_int(result, "route_generation");

		if (msg)
			printf("%s\n", msg);
		else if (gen >= 0)
			printf("reloaded: route generation %lld\n",
			       (long long)gen);
		else
			printf("reloaded\n");
	}
	json_decref(result);
	return CTL_OK;
}

int cmd_routes(struct ctl *c, int argc, char **argv)
{
	return cmd_daemon(c, argc, argv);
}

int cmd_reload(struct ctl *c, int argc, char **argv)
{
	return cmd_daemon(c, argc, argv);
}

/* "12 s ago" for a unix time t (0: never). */
static void envs_ago(json_int_t t, char *buf, size_t len)
{
	time_t now = time(NULL);

	if (t <= 0)
		snprintf(buf, len, "never");
	else if ((json_int_t)now <= t)
		snprintf(buf, len, "now");
	else
		snprintf(buf, len, "%llds ago", (long long)(now - t));
}

/* edgectl envs [--json]: each on-demand environment's state (and what
 * is left of the back-off after a failed wake), last activity, requests
 * and open tunnels, wakes and the last one's duration. */
int cmd_envs(struct ctl *c, int argc, char **argv)
{
	struct errbuf err = {""};
	json_t *result = NULL, *envs;
	bool json = false;
	int first, ret;
	size_t i;

	ret = daemon_opts(argc, argv, &json, 0, &first);
	if (ret >= 0)
		return ret;
	ret = ctl_daemon_call(c, "envs", &result, &err);
	if (ret) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	}
	if (json)
		return ctl_json_print(result);
	envs = json_object_get(result, "environments");
	if (json_array_size(envs) == 0) {
		printf("no on-demand environments\n");
		json_decref(result);
		return CTL_OK;
	}
	printf("%-24s  %-11s  %8s  %-14s  %6s  %7s  %5s  %6s  %9s\n",
	       "ENVIRONMENT", "STATE", "RETRY IN", "LAST ACTIVITY", "ACTIVE",
	       "TUNNELS", "WAKES", "FAILED", "LAST WAKE");
	for (i = 0; i < json_array_size(envs); i++) {
		const json_t *e = json_array_get(envs, i);
		char ago[32], last[32], retry[32];
		json_int_t lw = ctl_int(e, "last_wake_ms");
		json_int_t left = ctl_int(e, "retry_in_ms");

		envs_ago(ctl_int(e, "last_activity"), ago, sizeof(ago));
		if (lw < 0)
			snprintf(last, sizeof(last), "-");
		else
			snprintf(last, sizeof(last), "%lldms", (long long)lw);
		if (left <= 0)
			snprintf(retry, sizeof(retry), "-");
		else
			snprintf(retry, sizeof(retry), "%llds",
				 (long long)((left + 999) / 1000));
		printf("%-24s  %-11s  %8s  %-14s  %6lld  %7lld  %5lld  %6lld  "
		       "%9s\n",
		       routes_str(e, "id", "-"), routes_str(e, "state", "-"),
		       retry, ago, (long long)ctl_int(e, "active"),
		       (long long)ctl_int(e, "tunnels"),
		       (long long)ctl_int(e, "wakes"),
		       (long long)(ctl_int(e, "wakes_failed") +
				   ctl_int(e, "wakes_pending") +
				   ctl_int(e, "wakes_endpoint_failed")),
		       last);
	}
	json_decref(result);
	return CTL_OK;
}

/* The last error's text and age: "connect failed: Connection refused
 * (12s ago)", "-" for none. */
static void upstream_last_error(const json_t *e, char *buf, size_t len)
{
	const char *le = json_string_value(json_object_get(e, "last_error"));
	const json_t *age = json_object_get(e, "last_error_age");
	long long a =
	    json_is_integer(age) ? (long long)json_integer_value(age) : -1;

	if (!le)
		snprintf(buf, len, "-");
	else if (a < 0)
		snprintf(buf, len, "%s", le);
	else if (a < 120)
		snprintf(buf, len, "%s (%llds ago)", le, a);
	else if (a < 2 * 3600)
		snprintf(buf, len, "%s (%lldm ago)", le, a / 60);
	else if (a < 2 * 86400)
		snprintf(buf, len, "%s (%lldh ago)", le, a / 3600);
	else
		snprintf(buf, len, "%s (%lldd ago)", le, a / 86400);
}

/* One endpoint's row of edgectl upstream list. */
static void upstream_print_row(const json_t *e, int w)
{
	const json_t *r, *routes = json_object_get(e, "routes");
	char le[192];
	size_t i;

	upstream_last_error(e, le, sizeof(le));
	const char *tls = json_string_value(json_object_get(e, "tls"));
	const char *proto = json_string_value(json_object_get(e, "protocol"));

	printf("%-*s %-8s %-8s %8lld %10lld %7lld  %-5s %-10s %-44s ", w,
	       json_string_value(json_object_get(e, "address")),
	       json_string_value(json_object_get(e, "admin")),
	       json_string_value(json_object_get(e, "health")),
	       (long long)ctl_int(e, "inflight"),
	       (long long)ctl_int(e, "requests"),
	       (long long)ctl_int(e, "failures"), proto ? proto : "-",
	       tls ? tls : "-", le);
	if (!json_array_size(routes))
		fputs("-", stdout);
	json_array_foreach(routes, i, r)
	{
		printf("%s%s", i ? "," : "", json_string_value(r));
	}
	putchar('\n');
}

/* edgectl upstream circuits: one line per deployment and worker. */
static void upstream_print_circuits(const json_t *result)
{
	const json_t *d, *w;
	size_t i, j;

	printf("%-24s %6s %-9s %8s %8s %s\n", "DEPLOYMENT", "WORKER", "STATE",
	       "REQUESTS", "FAILED", "HALF-OPEN IN");
	json_array_foreach(json_object_get(result, "deployments"), i, d)
	{
		json_array_foreach(json_object_get(d, "workers"), j, w)
		{
			const json_t *s = json_object_get(w, "half_open_in_s");
			char in[32] = "-";

			if (s)
				snprintf(in, sizeof(in), "%llds",
					 (long long)json_integer_value(s));
			printf(
			    "%-24s %6lld %-9s %8lld %8lld %s\n",
			    json_string_value(json_object_get(d, "deployment")),
			    (long long)ctl_int(w, "worker"),
			    json_string_value(json_object_get(w, "state")),
			    (long long)ctl_int(w, "requests"),
			    (long long)ctl_int(w, "failures"), in);
		}
	}
}

/* edgectl upstream list|circuits [--json] | drain|disable|enable ENDPOINT
 * [--json] */
int cmd_upstream(struct ctl *c, int argc, char **argv)
{
	static const char *const actions[] = {"list", "drain", "disable",
					      "enable", "circuits"};
	struct errbuf err = {""};
	json_t *req, *result = NULL;
	const json_t *e;
	char name[32];
	bool json = false;
	int first, ret, want;
	size_t i, k;

	if (argc < 2)
		return ctl_usage_error("upstream",
				       "upstream: missing subcommand (list, "
				       "circuits, drain, disable, enable)");
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
		return ctl_usage_print("upstream");
	for (k = 0; k < 5; k++)
		if (strcmp(argv[1], actions[k]) == 0)
			break;
	if (k == 5)
		return ctl_usage_error(
		    "upstream", "upstream: unknown subcommand '%s'", argv[1]);
	snprintf(name, sizeof(name), "upstream %s", actions[k]);
	argv[1] = name; /* for the usage lines */
	want = k && k < 4 ? 1 : 0;
	ret = daemon_opts(argc - 1, argv + 1, &json, want, &first);
	if (ret >= 0)
		return ret;
	first++; /* in argv */
	if (argc - first < want)
		return ctl_usage_error(name, "%s: missing ENDPOINT (ADDR:PORT)",
				       name);
	/* json_pack refuses a string that is not UTF-8: say so, not "out
	 * of memory" */
	if (want && utf8_check_text(argv[first], strlen(argv[first]), &err))
		return ctl_usage_error(name,
				       "%s: bad endpoint: %s (expected "
				       "ADDR:PORT)",
				       name, err.msg);
	req = want ? json_pack("{s:s,s:s,s:s}", "cmd", "upstream", "action",
			       actions[k], "endpoint", argv[first])
	      : k  ? json_pack("{s:s,s:s}", "cmd", "upstream", "action",
			       actions[k])
		   : json_pack("{s:s}", "cmd", "upstream");
	if (ctl_daemon_send(c, req, &result, &err)) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	}
	if (json)
		return ctl_json_print(result);
	if (k == 4) {
		upstream_print_circuits(result);
	} else if (k) {
		e = json_object_get(result, "endpoint");
		printf("%s: %s (was %s)\n",
		       json_string_value(json_object_get(e, "address")),
		       json_string_value(json_object_get(e, "admin")),
		       json_string_value(json_object_get(result, "was")));
	} else {
		/* the ENDPOINT column as wide as its longest address (an
		 * https:// or unix: one can be 128 bytes), 22 at least */
		int w = 22;

		json_array_foreach(json_object_get(result, "endpoints"), i, e)
		{
			const char *a =
			    json_string_value(json_object_get(e, "address"));

			if (a && strlen(a) > (size_t)w)
				w = (int)strlen(a);
		}
		printf("%-*s %-8s %-8s %8s %10s %7s  %-5s %-10s %-44s %s\n", w,
		       "ENDPOINT", "ADMIN", "HEALTH", "INFLIGHT", "REQUESTS",
		       "FAILED", "PROTO", "TLS", "LAST ERROR", "ROUTES");
		json_array_foreach(json_object_get(result, "endpoints"), i, e)
		{
			upstream_print_row(e, w);
		}
	}
	json_decref(result);
	return CTL_OK;
}

/* edgectl challenge [ENV on|off] [--json] */
int cmd_challenge(struct ctl *c, int argc, char **argv)
{
	struct errbuf err = {""};
	json_t *req, *result = NULL;
	const json_t *e;
	bool json = false, on = false;
	int first, ret;
	size_t i;

	ret = daemon_opts(argc, argv, &json, 2, &first);
	if (ret >= 0)
		return ret;
	if (argc - first == 1)
		return ctl_usage_error("challenge",
				       "challenge: %s: missing on or off",
				       argv[first]);
	if (argc - first == 2) {
		if (strcmp(argv[first + 1], "on") == 0)
			on = true;
		else if (strcmp(argv[first + 1], "off") != 0)
			return ctl_usage_error("challenge",
					       "challenge: '%s': on or off",
					       argv[first + 1]);
		if (utf8_check_text(argv[first], strlen(argv[first]), &err))
			return ctl_usage_error("challenge",
					       "challenge: bad environment id: "
					       "%s",
					       err.msg);
		req = json_pack("{s:s,s:s,s:b}", "cmd", "challenge", "env",
				argv[first], "on", on);
	} else
		req = json_pack("{s:s}", "cmd", "challenge");
	if (ctl_daemon_send(c, req, &result, &err)) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	}
	if (json)
		return ctl_json_print(result);
	if (argc - first == 2)
		printf("%s: attack mode %s\n", argv[first], on ? "on" : "off");
	else {
		json_array_foreach(json_object_get(result, "forced"), i, e)
		{
			printf("%s\n", json_string_value(e));
		}
	}
	json_decref(result);
	return 0;
}

/* A unix time as "2026-12-06 22:40:00Z", "-" for 0. */
static void certs_time(json_int_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (t <= 0 || !gmtime_r(&tt, &tm))
		snprintf(buf, len, "-");
	else
		strftime(buf, len, "%Y-%m-%d %H:%M:%SZ", &tm);
}

/* RFC 5280's reason codes edgectl certs revoke takes by name */
static const struct {
	const char *name;
	int code;
} certs_reasons[] = {
    {"unspecified", 0}, {"keyCompromise", 1},	     {"affiliationChanged", 3},
    {"superseded", 4},	{"cessationOfOperation", 5},
};

/* edgectl certs [--json] | certs renew NAME | certs revoke NAME [REASON] */
int cmd_certs(struct ctl *c, int argc, char **argv)
{
	struct errbuf err = {""};
	json_t *req, *result = NULL, *acme;
	const json_t *e;
	bool json = false, revoke;
	int first, ret, reason = 0;
	size_t i, k;

	ret = daemon_opts(argc, argv, &json, 3, &first);
	if (ret >= 0)
		return ret;
	revoke = argc - first >= 1 && strcmp(argv[first], "revoke") == 0;
	if (argc - first >= 1 && !revoke && strcmp(argv[first], "renew") != 0)
		return ctl_usage_error(
		    "certs", "certs: '%s': renew NAME or revoke NAME [REASON]",
		    argv[first]);
	if (argc - first == 1)
		return ctl_usage_error("certs", "certs %s: missing NAME",
				       argv[first]);
	if (argc - first == 3 && !revoke)
		return ctl_usage_error("certs", "certs renew: one NAME");
	if (argc - first == 3) {
		for (k = 0; k < sizeof(certs_reasons) / sizeof(*certs_reasons);
		     k++)
			if (strcmp(argv[first + 2], certs_reasons[k].name) == 0)
				break;
		if (k == sizeof(certs_reasons) / sizeof(*certs_reasons))
			return ctl_usage_error(
			    "certs",
			    "certs revoke: '%s': unspecified, keyCompromise, "
			    "affiliationChanged, superseded or "
			    "cessationOfOperation",
			    argv[first + 2]);
		reason = certs_reasons[k].code;
	}
	if (argc - first >= 2) {
		if (utf8_check_text(argv[first + 1], strlen(argv[first + 1]),
				    &err))
			return ctl_usage_error("certs", "certs: bad name: %s",
					       err.msg);
		req = revoke
			  ? json_pack("{s:s,s:s,s:i}", "cmd", "certs", "revoke",
				      argv[first + 1], "reason", reason)
			  : json_pack("{s:s,s:s}", "cmd", "certs", "renew",
				      argv[first + 1]);
	} else
		req = json_pack("{s:s}", "cmd", "certs");
	if (ctl_daemon_send(c, req, &result, &err)) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	}
	if (json)
		return ctl_json_print(result);
	acme = json_object_get(result, "acme");
	if (argc - first >= 2 && revoke)
		printf("%s: its certificate is being revoked, then a new one "
		       "ordered (edgectl certs shows how it goes)\n",
		       argv[first + 1]);
	else if (argc - first >= 2)
		printf("%s: a new certificate is being ordered (edgectl certs "
		       "shows how it goes)\n",
		       argv[first + 1]);
	else if (!json_is_object(acme))
		printf("no acme group in edged's configuration\n");
	else {
		printf("ACME %s, storage %s, %s\n",
		       routes_str(acme, "directory", "-"),
		       routes_str(acme, "storage", "-"),
		       routes_str(acme, "challenge", "-"));
		printf("%-32s  %-8s  %-20s  %-20s  %-20s  %8s  %s\n", "NAME",
		       "STATE", "NOT AFTER", "RENEW AT", "NEXT TRY", "FAILURES",
		       "LAST ERROR");
		json_array_foreach(json_object_get(acme, "names"), i, e)
		{
			const json_t *le = json_object_get(e, "last_error");
			char na[32], ra[32], nt[32];

			certs_time(ctl_int(e, "not_after"), na, sizeof(na));
			certs_time(ctl_int(e, "renew_at"), ra, sizeof(ra));
			certs_time(ctl_int(e, "next_attempt"), nt, sizeof(nt));
			printf("%-32s  %-8s  %-20s  %-20s  %-20s  %8lld  %s\n",
			       routes_str(e, "name", "-"),
			       routes_str(e, "state", "-"), na, ra, nt,
			       (long long)ctl_int(e, "failures"),
			       json_is_object(le)
				   ? routes_str(le, "message", "-")
				   : "-");
		}
	}
	json_decref(result);
	return 0;
}
