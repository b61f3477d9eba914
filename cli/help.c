/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * help.c - edgectl's usage and help: one table with every command's
 * synopsis, what it does and each of its options. edgectl --help,
 * edgectl help [COMMAND], COMMAND --help and the usage line after a usage
 * error are all printed from it; ctl_getopt (here: every command's
 * option parser) checks at every --help that each option a command
 * accepts has its line here (ctl_help_check), and edgectl help that
 * every command of edgectl.c's dispatch table has its entry
 * (ctl_help_has). A new command is one
 * entry below (and its completion, dist/bash-completion/edgectl, and its
 * section in docs/edgectl.md: tests/cli/test_cli_help.sh checks all
 * three).
 */
#include <ctype.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ctlutil.h"

/* One option: how it is written ("--ttl DURATION", "-v, --verbose") and
 * one line about it. */
struct ctl_help_opt {
	const char *flag;
	const char *text;
};

/* One command: its name ("ip block"), its usage line without "edgectl "
 * (starting with the name), one line about it and its options (NULL or
 * ended by {NULL, NULL}; --help is every command's and not listed). */
struct ctl_help {
	const char *cmd;
	const char *line;
	const char *summary;
	const struct ctl_help_opt *opts;
};

#define OPTS(...) ((const struct ctl_help_opt[]){__VA_ARGS__, {NULL, NULL}})
#define O_JSON                                                                 \
	{                                                                      \
		"--json", "print JSON, for scripts"                            \
	}

static const struct ctl_help ctl_helps[] = {
    {"attach", "attach IFACE [--mode native|skb]",
     "load edge's XDP program, fill its maps from the saved state and "
     "attach it to IFACE",
     OPTS({"--mode native|skb",
	   "this XDP mode only (default: native, else skb when the driver "
	   "has no native XDP)"})},
    {"detach", "detach IFACE | --all",
     "take edge's XDP program off IFACE of this network namespace (the "
     "rules stay saved; the maps are unpinned when no interface is left)",
     OPTS({"--all", "off every interface the state records, each in its "
		    "own network namespace, and every one here"})},
    {"status", "status [--json]",
     "edgectl's version, the maps, the interfaces, the policy, the rules, "
     "the daemon and, with --pg, the database",
     OPTS(O_JSON)},
    {"ip block",
     "ip block CIDR [--ttl DURATION] [--comment TEXT] [--force] "
     "[--project ID]",
     "drop traffic from the source prefix CIDR (saved; with --pg: in the "
     "database, for every host)",
     OPTS({"--ttl DURATION", "the rule expires after DURATION"},
	  {"--comment TEXT", "a note shown by ip list (128 bytes of UTF-8)"},
	  {"--force", "block even when it would cut off your SSH client"},
	  {"--project ID", "with --pg: a rule of project ID's routes only"})},
    {"ip allow",
     "ip allow CIDR [--ttl DURATION] [--comment TEXT] [--project ID]",
     "let the source prefix CIDR through the allowlist policy and shorter "
     "block rules",
     OPTS({"--ttl DURATION", "the rule expires after DURATION"},
	  {"--comment TEXT", "a note shown by ip list (128 bytes of UTF-8)"},
	  {"--force", "accepted as for ip block; no check refuses an allow"},
	  {"--project ID", "with --pg: a rule of project ID's routes only"})},
    {"ip del", "ip del CIDR [--force] [--project ID]",
     "delete the rule for exactly the prefix CIDR",
     OPTS(
	 {"--force", "delete even when it would cut off your SSH client"},
	 {"--project ID", "with --pg: project ID's rule, not the global one"})},
    {"ip list", "ip list [--json]",
     "the rules: action, prefix, time left, hits, comment (with --pg: the "
     "database's)",
     OPTS(O_JSON)},
    {"ip policy",
     "ip policy [blocklist | allowlist [--ports LIST] [--force]] [--json]",
     "show the policy, or set it: blocklist passes all but blocked "
     "sources, allowlist guards LIST for allowed sources only",
     OPTS({"--ports LIST", "the ports allowlist guards (default 80,443)"},
	  {"--force", "switch even when it would cut off your SSH client"},
	  O_JSON)},
    {"ratelimit set", "ratelimit set RATE [--burst N] [--packets]",
     "limit each source to RATE new connections (TCP SYN, QUIC Initial), "
     "or packets",
     OPTS({"--burst N", "the bucket's size (default: one second of RATE)"},
	  {"--packets", "limit every packet, not new connections"})},
    {"ratelimit off", "ratelimit off [--syn | --packets]",
     "turn the rate limits off (both without an option)",
     OPTS({"--syn", "only the limit of new connections"},
	  {"--packets", "only the limit of packets"})},
    {"stats", "stats [--json] [--watch [--interval SECONDS] [--count N]]",
     "the XDP program's counters and each rule's hits, and edged's "
     "counters when it answers",
     OPTS(O_JSON, {"--watch", "refresh with per-second rates until ^C"},
	  {"--interval SECONDS", "--watch's period (default 1, 0.1 to 3600)"},
	  {"--count N", "stop --watch after N refreshes"})},
    {"routes", "routes [--json]", "edged's live route table", OPTS(O_JSON)},
    {"envs", "envs [--json]",
     "edged's on-demand environments: state (and back-off), activity, "
     "wakes",
     OPTS(O_JSON)},
    {"certs", "certs [--json] | certs renew NAME | certs revoke NAME [REASON]",
     "edged's ACME certificates: each name's state, expiry, renewal, "
     "failures and the CA's last problem; renew orders one now; revoke "
     "revokes the one served at the CA (REASON: unspecified, "
     "keyCompromise, affiliationChanged, superseded, "
     "cessationOfOperation), then orders one",
     OPTS(O_JSON)},
    {"reload", "reload",
     "ask edged to reload its configuration (as SIGHUP does) and print "
     "its answer",
     NULL},
    {"upgrade",
     "upgrade [--binary PATH] [--config FILE] [--timeout SECONDS] "
     "[--if-changed]",
     "replace the running edged by a new one without dropping a "
     "connection: the new one takes over its sockets, the old one drains",
     OPTS({"--binary PATH", "the new edged (default: the running one's "
			    "path, where a package upgrade puts it)"},
	  {"--timeout SECONDS", "how long the new one may take to serve "
				"(default 60; then it is stopped)"},
	  {"--config FILE", "the new one's configuration (default: the "
			    "running one's)"},
	  {"--if-changed", "only if the running binary was replaced on disk; "
			   "else reload the configuration"})},
    {"splice", "splice [on | off | auto | sockmap] [--json]",
     "show edged's splice mode and counters, or set the mode new tunnels "
     "follow",
     OPTS(O_JSON)},
    {"upstream list", "upstream list [--json]",
     "edged's upstream endpoints: admin state, health, in-flight, "
     "requests, failures, the last failure's reason and age, the routes "
     "using each",
     OPTS(O_JSON)},
    {"upstream circuits", "upstream circuits [--json]",
     "each deployment's circuit (circuit = { ... }) in each worker: "
     "closed, open or half_open, the window's requests and failures, the "
     "seconds until an open one turns half-open; as of each worker's last "
     "tick (at most a second old)",
     OPTS(O_JSON)},
    {"upstream drain", "upstream drain ENDPOINT [--json]",
     "no new requests to ENDPOINT (in-flight ones finish; its idle pooled "
     "connections are closed); still picked when every endpoint of a route "
     "is out",
     OPTS(O_JSON)},
    {"upstream disable", "upstream disable ENDPOINT [--json]",
     "as drain, and never picked, even when every endpoint of a route is "
     "out",
     OPTS(O_JSON)},
    {"upstream enable", "upstream enable ENDPOINT [--json]",
     "undo drain or disable", OPTS(O_JSON)},
    {"challenge", "challenge [ENV on|off] [--json]",
     "put environment ENV in attack mode (every request without a pass is "
     "challenged, whatever its challenge mode) or take it out; kept across "
     "reloads, not restarts; without ENV, list those in it",
     OPTS(O_JSON)},
    {"db migrate", "db migrate",
     "with --pg: bring the database's schema up to this edgectl's", NULL},
    {"db status", "db status [--json]",
     "with --pg: the schema's version, pending migrations, hosts, change "
     "version",
     OPTS(O_JSON)},
    {"hosts", "hosts [--json] [--stale DURATION]",
     "with --pg: the fleet's hosts and how far each has applied the "
     "database's changes",
     OPTS(O_JSON, {"--stale DURATION",
		   "a host not seen for DURATION is stale (default 30s)"})},
    {"help", "help [COMMAND]",
     "this list, or a command's options (as COMMAND --help)", NULL},
};

#define CTL_NHELP (sizeof(ctl_helps) / sizeof(ctl_helps[0]))

/* The global options, "global" in ctl_getopt's check. */
static const struct ctl_help_opt ctl_global_opts[] = {
    {"--pin-dir DIR",
     "pinned maps (env EDGE_PIN_DIR, default " EDGE_PIN_DIR_DEFAULT ")"},
    {"--state-dir DIR",
     "saved rules (env EDGE_STATE_DIR, default " STATE_DIR_DEFAULT ")"},
    {"--socket PATH", "edged's control socket (env EDGE_CONTROL_SOCKET, "
		      "default " CTL_DAEMON_SOCK ")"},
    {"--pg CONNINFO", "the fleet's PostgreSQL, libpq's string (env "
		      "EDGE_PG): for db, hosts and ip block|allow|del|list"},
    {"-v, --verbose", "debug output, libbpf and libxdp included (env "
		      "EDGE_DEBUG=1)"},
    {"-h, --help", "this text"},
    {"--version", "edgectl's version"},
    {NULL, NULL},
};

static const char ctl_usage_head[] =
    "usage: edgectl [--pin-dir DIR] [--state-dir DIR] [--socket PATH] "
    "[--pg CONNINFO] [-v] COMMAND [ARGS]\n";

static const char ctl_syntax[] =
    "  CIDR      203.0.113.0/24, 2001:db8::/32, or one address\n"
    "  DURATION  30s, 10m, 2h, 1d, 1h30m (max 365d)\n"
    "  LIST      ports and ranges: 80,443,8000-8100\n"
    "  RATE      per source: 100, 100/s, 6000/m\n"
    "  ENDPOINT  an upstream's ADDR:PORT, as edgectl upstream list shows it\n";

static const char ctl_usage_tail[] =
    "\n"
    "exit status: 0 done, 1 failed, 2 usage error.\n"
    "edgectl help COMMAND (or edgectl COMMAND --help): a command's "
    "options.\n"
    "See edgectl(8) and docs/edgectl.md for details.\n";

/* Whether entry h is command cmd (exactly) or, with group, one of the
 * commands of the group cmd ("ip": "ip block", ...). */
static bool ctl_help_is(const struct ctl_help *h, const char *cmd, bool group)
{
	size_t n = strlen(cmd);

	if (strcmp(h->cmd, cmd) == 0)
		return true;
	return group && strncmp(h->cmd, cmd, n) == 0 && h->cmd[n] == ' ';
}

static const struct ctl_help *ctl_help_find(const char *cmd)
{
	size_t i;

	for (i = 0; i < CTL_NHELP; i++)
		if (ctl_help_is(&ctl_helps[i], cmd, false))
			return &ctl_helps[i];
	return NULL;
}

static void ctl_opts_print(const struct ctl_help_opt *o, bool help)
{
	static const struct ctl_help_opt h = {"-h, --help", "this text"};
	const struct ctl_help_opt *p;
	int w = (int)strlen(h.flag);

	for (p = o; p && p->flag; p++)
		if ((int)strlen(p->flag) > w)
			w = (int)strlen(p->flag);
	for (p = o; p && p->flag; p++)
		printf("  %-*s  %s\n", w, p->flag, p->text);
	if (help)
		printf("  %-*s  %s\n", w, h.flag, h.text);
}

/* A command's whole help: usage line, what it does, its options. */
static void ctl_help_print(const struct ctl_help *h)
{
	printf("usage: edgectl %s\n\n%c%s.\n\noptions:\n", h->line,
	       toupper((unsigned char)h->summary[0]), h->summary + 1);
	ctl_opts_print(h->opts, true);
	printf("\nCIDR, DURATION, LIST, RATE and the global options: edgectl "
	       "--help; details: edgectl(8).\n");
}

int ctl_usage_print(const char *cmd)
{
	const struct ctl_help *h;
	size_t i;

	if (cmd) {
		h = ctl_help_find(cmd);
		if (h) {
			ctl_help_print(h);
			return CTL_OK;
		}
		/* a group: each of its commands' usage and what it does */
		for (i = 0; i < CTL_NHELP; i++)
			if (ctl_help_is(&ctl_helps[i], cmd, true))
				printf("usage: edgectl %s\n  %s\n",
				       ctl_helps[i].line, ctl_helps[i].summary);
		printf("edgectl %s SUBCOMMAND --help: its options.\n", cmd);
		return CTL_OK;
	}
	fputs(ctl_usage_head, stdout);
	fputs("\ncommands:\n", stdout);
	for (i = 0; i < CTL_NHELP; i++)
		printf("  edgectl %s\n", ctl_helps[i].line);
	fputs("\n", stdout);
	fputs(ctl_syntax, stdout);
	fputs("\nglobal options:\n", stdout);
	ctl_opts_print(ctl_global_opts, false);
	fputs(ctl_usage_tail, stdout);
	return CTL_OK;
}

int ctl_usage_error(const char *cmd, const char *fmt, ...)
{
	char buf[1024];
	bool any = false;
	va_list ap;
	size_t i;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	log_warnx("%s", buf);
	if (cmd) {
		for (i = 0; i < CTL_NHELP; i++) {
			if (!ctl_help_is(&ctl_helps[i], cmd, true))
				continue;
			fprintf(stderr, "%s edgectl %s\n",
				any ? "      " : "usage:", ctl_helps[i].line);
			any = true;
		}
	}
	if (!any)
		fputs("usage: edgectl [GLOBAL OPTIONS] COMMAND [ARGS] "
		      "(edgectl help for more)\n",
		      stderr);
	return CTL_USAGE;
}

/* Whether the option list o has a line for the long option name. */
static bool ctl_opts_have(const struct ctl_help_opt *o, const char *name)
{
	size_t n = strlen(name);
	const char *s;

	for (; o && o->flag; o++) {
		for (s = strstr(o->flag, "--"); s; s = strstr(s + 2, "--"))
			if (strncmp(s + 2, name, n) == 0 &&
			    (s[2 + n] == '\0' || s[2 + n] == ' ' ||
			     s[2 + n] == ','))
				return true;
	}
	return false;
}

bool ctl_help_has(const char *cmd)
{
	size_t i;

	for (i = 0; i < CTL_NHELP; i++)
		if (ctl_help_is(&ctl_helps[i], cmd, true))
			return true;
	return false;
}

int ctl_help_check(const struct option *longopts, const char *cmd)
{
	const struct ctl_help_opt *have = ctl_global_opts;
	const struct ctl_help *h = NULL;
	int missing = 0;

	if (cmd) {
		h = ctl_help_find(cmd);
		if (!h) {
			log_warnx("internal error: command '%s' has no help "
				  "(cli/help.c)",
				  cmd);
			return -1;
		}
		have = h->opts;
	}
	for (; longopts && longopts->name; longopts++) {
		if (strcmp(longopts->name, "help") == 0 ||
		    ctl_opts_have(have, longopts->name))
			continue;
		log_warnx("internal error: option --%s of '%s' has no help "
			  "line (cli/help.c)",
			  longopts->name, cmd ? cmd : "edgectl");
		missing++;
	}
	return missing ? -1 : 0;
}

int cmd_help(struct ctl *c, int argc, char **argv)
{
	char cmd[64] = "";
	size_t i;
	int a;

	(void)c;
	if (argc < 2)
		return ctl_usage_print(NULL);
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
		return ctl_usage_print("help");
	for (a = 1; a < argc; a++) {
		if (strlen(cmd) + strlen(argv[a]) + 2 > sizeof(cmd))
			return ctl_usage_error("help", "help: no command '%s'",
					       argv[a]);
		if (a > 1)
			strcat(cmd, " ");
		strcat(cmd, argv[a]);
	}
	for (i = 0; i < CTL_NHELP; i++)
		if (ctl_help_is(&ctl_helps[i], cmd, true))
			return ctl_usage_print(cmd);
	return ctl_usage_error("help", "help: no command '%s'", cmd);
}

int ctl_getopt(int argc, char **argv, const char *shortopts,
	       const struct option *longopts, const char *cmd)
{
	/* the prefix "edgectl: " comes from log_warnx; commands add their
	 * own name, the global options none */
	const char *name = cmd ? cmd : "", *sep = cmd ? ": " : "";
	int o;

	opterr = 0;
	o = getopt_long(argc, argv, shortopts, longopts, NULL);
	if (o == '?') {
		const char *tok = argv[optind - 1];

		if (optopt && strncmp(tok, "--", 2) != 0)
			ctl_usage_error(cmd, "%s%sunknown option '-%c'", name,
					sep, optopt);
		else
			ctl_usage_error(cmd, "%s%sunknown option '%s'", name,
					sep, tok);
		return '?';
	}
	if (o == ':') {
		ctl_usage_error(cmd, "%s%soption '%s' needs a value", name, sep,
				argv[optind - 1]);
		return '?';
	}
	if (o == 'h')
		ctl_help_check(longopts, cmd);
	return o;
}
