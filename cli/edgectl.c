/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * edgectl.c - the operator's command line: global flags, dispatch, usage,
 * and the steps every command shares (root check, lock, state, pins).
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "edgectl.h"

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

int ctl_need_root(void)
{
	if (geteuid() == 0)
		return CTL_OK;
	log_warnx("this command needs root (CAP_BPF and CAP_NET_ADMIN)");
	return CTL_FAIL;
}

int ctl_json_print(struct json_t *j)
{
	char *s;

	if (!j) {
		log_warnx("out of memory");
		return CTL_FAIL;
	}
	s = json_dumps(j, JSON_INDENT(2));
	json_decref(j);
	if (!s) {
		log_warnx("out of memory");
		return CTL_FAIL;
	}
	printf("%s\n", s);
	free(s);
	return CTL_OK;
}

static void ctl_clock(struct ctl *c)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	c->now = (int64_t)ts.tv_sec;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	c->boot_now =
	    (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Bring the maps back to c->saved after a failed change. */
static int ctl_maps_restore(struct ctl *c, struct errbuf *err)
{
	return pins_sync(&c->pins, &c->saved, c->now, c->boot_now, NULL, err);
}

int ctl_change(struct ctl *c, ctl_apply_fn apply, const void *arg)
{
	struct errbuf err = {""}, rerr = {""};
	struct state_pending sp;
	struct state copy;
	bool applied = false;
	int ret;

	ret = state_prepare(&sp, c->state_path, &c->st, &err);
	if (ret) {
		log_warnx("%s; nothing was changed", err.msg);
		return CTL_FAIL;
	}
	if (apply && c->attached) {
		applied = true;
		ret = apply(c, arg, &err);
		if (ret) {
			state_abort(&sp);
			goto undo;
		}
	}
	errbuf_clear(&err);
	ret = state_commit(&sp, &err);
	if (ret)
		goto undo;
	if (err.msg[0])
		log_warnx("warning: %s", err.msg);
	/* later changes in this run are undone to this point */
	if (state_copy(&copy, &c->st) == 0) {
		state_free(&c->saved);
		c->saved = copy;
	} else {
		/* c->saved stays one step behind. Only the prune makes a
		 * change before another one, and it removes expired rules,
		 * which pins_sync deletes from the maps anyway: an undo to
		 * the older state gives the same maps. */
		log_debug("out of memory copying the state");
	}
	return CTL_OK;
undo:
	if (applied && ctl_maps_restore(c, &rerr)) {
		log_warnx("%s; the maps could not be brought back either (%s) "
			  "and may hold the change the state file does not: "
			  "'edgectl attach IFACE' on an attached interface "
			  "makes them match the state file",
			  err.msg, rerr.msg);
		return CTL_FAIL;
	}
	log_warnx("%s; nothing was changed", err.msg);
	return CTL_FAIL;
}

/* Delete the map entries of the expired rules in arg (struct rules). */
static int ctl_prune_apply(struct ctl *c, const void *arg, struct errbuf *err)
{
	const struct rules *gone = arg;
	char s[CIDR_STR_MAX];
	size_t i;
	int ret;

	for (i = 0; i < gone->n; i++) {
		ret = pins_rule_del(&c->pins, &gone->v[i].cidr);
		if (ret && ret != -ENOENT) {
			errbuf_set(err,
				   "cannot remove expired rule %s from the "
				   "map: %s",
				   cidr_format(&gone->v[i].cidr, s, sizeof(s)),
				   strerror(-ret));
			return ret;
		}
	}
	return 0;
}

/* Remove expired rules from maps and state. */
static int ctl_prune(struct ctl *c)
{
	struct rules gone = {0};
	char s[CIDR_STR_MAX];
	size_t i;
	int n, ret = CTL_OK;

	n = rules_prune(&c->st.rules, c->now, &gone);
	if (n < 0) {
		log_warnx("out of memory");
		return CTL_FAIL;
	}
	for (i = 0; i < gone.n; i++)
		log_debug("rule %s expired: removing it",
			  cidr_format(&gone.v[i].cidr, s, sizeof(s)));
	if (n > 0)
		ret = ctl_change(c, ctl_prune_apply, &gone);
	rules_free(&gone);
	return ret;
}

int ctl_begin(struct ctl *c, unsigned flags)
{
	struct errbuf err = {""};
	bool write = flags & CTL_WRITE;
	int ret;

	if (ctl_need_root())
		return CTL_FAIL;
	ctl_clock(c);
	if (flags & CTL_BPFFS) {
		if (pins_check_bpffs(c->pin_dir, &err)) {
			log_warnx("%s", err.msg);
			return CTL_FAIL;
		}
	}
	ret = state_lock(c->state_dir, write, write, &err);
	if (ret == -ENOENT && !write) {
		/* nothing saved yet: defaults, nothing to lock */
	} else if (ret < 0) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	} else {
		c->lock_fd = ret;
	}
	ret = state_load(c->state_path, &c->st, &err);
	if (ret && ret != -ENOENT) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	}
	if (write && state_copy(&c->saved, &c->st)) {
		log_warnx("out of memory");
		return CTL_FAIL;
	}
	if (!write) {
		/* readers only need a consistent snapshot */
		state_unlock(c->lock_fd);
		c->lock_fd = -1;
	}
	ret = pins_open(&c->pins, c->pin_dir, &err);
	if (ret == 0) {
		c->attached = true;
	} else if (ret != -ENOENT) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	}
	if (write)
		return ctl_prune(c);
	return CTL_OK;
}

void ctl_end(struct ctl *c)
{
	ctl_db_close(c);
	pins_close(&c->pins);
	c->attached = false;
	state_free(&c->st);
	state_free(&c->saved);
	state_unlock(c->lock_fd);
	c->lock_fd = -1;
}

struct ctl_command {
	const char *name;
	int (*run)(struct ctl *c, int argc, char **argv);
};

static const struct ctl_command ctl_commands[] = {
    {"attach", cmd_attach},	  {"detach", cmd_detach},
    {"status", cmd_status},	  {"ip", cmd_ip},
    {"ratelimit", cmd_ratelimit}, {"stats", cmd_stats},
    {"routes", cmd_routes},	  {"reload", cmd_reload},
    {"splice", cmd_splice},	  {"db", cmd_db},
    {"hosts", cmd_hosts},	  {"help", cmd_help},
    {"envs", cmd_envs},		  {"upstream", cmd_upstream},
};

/* Every command has its help (cli/help.c): checked whenever the general
 * usage is printed, so that a command added to ctl_commands without its
 * lines there is an internal error at `edgectl help`. */
static void ctl_commands_check(void)
{
	size_t i;

	for (i = 0; i < sizeof(ctl_commands) / sizeof(ctl_commands[0]); i++)
		if (!ctl_help_has(ctl_commands[i].name))
			log_warnx("internal error: command '%s' has no help "
				  "(cli/help.c)",
				  ctl_commands[i].name);
}

static bool ctl_env_true(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0") != 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"pin-dir", required_argument, NULL, 'p'},
	    {"state-dir", required_argument, NULL, 's'},
	    {"socket", required_argument, NULL, 'S'},
	    {"pg", required_argument, NULL, 'g'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	struct ctl c;
	bool verbose = ctl_env_true("EDGE_DEBUG");
	const char *env;
	size_t i;
	int o, ret;

	memset(&c, 0, sizeof(c));
	c.lock_fd = -1;
	pins_init(&c.pins);
	env = getenv("EDGE_PIN_DIR");
	c.pin_dir = env && *env ? env : EDGE_PIN_DIR_DEFAULT;
	env = getenv("EDGE_STATE_DIR");
	c.state_dir = env && *env ? env : STATE_DIR_DEFAULT;
	env = getenv("EDGE_CONTROL_SOCKET");
	c.ctl_sock = env && *env ? env : CTL_DAEMON_SOCK;
	env = getenv("EDGE_PG");
	c.pg = env && *env ? env : NULL;
	log_init("edgectl", verbose);

	while ((o = ctl_getopt(argc, argv, "+:vh", opts, NULL)) != -1) {
		switch (o) {
		case 'p':
			c.pin_dir = optarg;
			break;
		case 's':
			c.state_dir = optarg;
			break;
		case 'S':
			c.ctl_sock = optarg;
			break;
		case 'g':
			/* the string may hold a password: never echoed */
			if (!*optarg)
				return ctl_usage_error(
				    NULL, "--pg: empty connection string "
					  "(leave --pg out to work without a "
					  "database)");
			c.pg = optarg;
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
			ctl_commands_check();
			return ctl_usage_print(NULL);
		case 'V':
			printf("edgectl %s\n", EDGECTL_VERSION);
			return CTL_OK;
		default:
			return CTL_USAGE;
		}
	}
	log_init("edgectl", verbose);
	if (optind >= argc)
		return ctl_usage_error(NULL, "no command given");
	if (!*c.pin_dir || c.pin_dir[0] != '/')
		return ctl_usage_error(NULL,
				       "pin directory must be an absolute "
				       "path: '%s'",
				       c.pin_dir);
	if (!*c.state_dir || c.state_dir[0] != '/')
		return ctl_usage_error(NULL,
				       "state directory must be an absolute "
				       "path: '%s'",
				       c.state_dir);
	if (!*c.ctl_sock ||
	    strlen(c.ctl_sock) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return ctl_usage_error(
		    NULL,
		    "control socket path empty or longer "
		    "than %zu bytes: '%s'",
		    sizeof(((struct sockaddr_un *)0)->sun_path) - 1,
		    c.ctl_sock);
	if (snprintf(c.state_path, sizeof(c.state_path), "%s/%s", c.state_dir,
		     STATE_FILE) >= (int)sizeof(c.state_path) ||
	    strlen(c.pin_dir) > PATH_MAX - 32)
		return ctl_usage_error(NULL, "directory path too long");

	if (strcmp(argv[optind], "help") == 0 && optind + 1 == argc)
		ctl_commands_check();
	for (i = 0; i < sizeof(ctl_commands) / sizeof(ctl_commands[0]); i++) {
		if (strcmp(argv[optind], ctl_commands[i].name) != 0)
			continue;
		ret = ctl_commands[i].run(&c, argc - optind, argv + optind);
		ctl_end(&c);
		return ret;
	}
	return ctl_usage_error(NULL, "unknown command '%s'", argv[optind]);
}
