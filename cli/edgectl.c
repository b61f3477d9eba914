/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * edgectl.c - the operator's command line: global flags and the dispatch
 * to the commands (cmd_*.c); the steps every command shares are
 * ctlutil.c's, usage and help help.c's.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "ctlutil.h"

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
    {"challenge", cmd_challenge}, {"upgrade", cmd_upgrade},
    {"certs", cmd_certs},
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
