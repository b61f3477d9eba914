/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ip_args.h - the arguments of edgectl ip block|allow|del|list, parsed and
 * checked once for both paths: this host's state file and maps
 * (cmd_ip.c) and, with --pg, the database's ip_rules (cmd_ip_pg.c).
 */
#ifndef EDGECTL_IP_ARGS_H
#define EDGECTL_IP_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#include "cidr.h"

enum ctl_ip_sub {
	CTL_IP_SET,  /* block or allow: action says which */
	CTL_IP_DEL,  /* del */
	CTL_IP_LIST, /* list */
};

struct ctl_ip_args {
	enum ctl_ip_sub sub;
	char cmd[16];	     /* "ip block": for messages and usage lines */
	bool help;	     /* --help: nothing after it was parsed */
	uint8_t action;	     /* set: EDGE_ACT_BLOCK or EDGE_ACT_ALLOW */
	const char *arg;     /* set, del: the CIDR as given */
	struct cidr cidr;    /* set, del: the CIDR, normalised */
	uint64_t ttl;	     /* set: --ttl in seconds, 0 when none */
	const char *comment; /* set: --comment, "" when none */
	const char *project; /* set, del: --project (only with --pg), or NULL */
	bool force;	     /* set, del: --force */
	bool json;	     /* list: --json */
};

/*
 * Parse argv (argv[0] the subcommand: "block", "allow", "del" or "list")
 * into *a. pg says whether --pg is given: without it --project is a usage
 * error ("--project needs --pg"). Notes on how the CIDR was normalised are
 * printed. Returns CTL_OK with *a filled (a->help set and the rest unread
 * when --help came first), or CTL_USAGE after printing the usage error.
 * a's strings point into argv.
 */
int ctl_ip_args_parse(struct ctl_ip_args *a, int argc, char **argv, bool pg);

#endif /* EDGECTL_IP_ARGS_H */
