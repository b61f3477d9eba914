/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ip_args.c - edgectl ip block|allow|del|list's options and arguments
 * (ip_args.h): one parser for the local rules and the database's, so that
 * both accept the same command lines with the same messages.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "config_check.h"
#include "ctlutil.h"
#include "duration.h"
#include "ip_args.h"
#include "rules.h"

/* The usage error of --project without --pg. */
#define IP_ARGS_PROJECT_NEEDS_PG                                               \
	"--project needs --pg (project rules are kept in the database)"

/* Parse a CIDR argument of command cmd, printing notes about how it was
 * normalised; a usage error (CTL_USAGE) when it does not parse. */
static int ip_args_cidr(const char *cmd, const char *arg, struct cidr *out)
{
	struct errbuf err = {""};
	char s[CIDR_STR_MAX];
	unsigned notes;

	if (cidr_parse(arg, out, &notes, &err))
		return ctl_usage_error(cmd, "bad CIDR: %s", err.msg);
	cidr_format(out, s, sizeof(s));
	if (notes & CIDR_NOTE_MAPPED)
		log_note("%s is an IPv4-mapped IPv6 prefix; using the IPv4 "
			 "rule %s",
			 arg, s);
	if (notes & CIDR_NOTE_HOST_BITS)
		log_note("%s has host bits set; using %s", arg, s);
	return CTL_OK;
}

int ctl_ip_args_parse(struct ctl_ip_args *a, int argc, char **argv, bool pg)
{
	static const struct option set_opts[] = {
	    {"ttl", required_argument, NULL, 't'},
	    {"comment", required_argument, NULL, 'c'},
	    {"force", no_argument, NULL, 'f'},
	    {"project", required_argument, NULL, 'P'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	static const struct option del_opts[] = {
	    {"force", no_argument, NULL, 'f'},
	    {"project", required_argument, NULL, 'P'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	static const struct option list_opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const struct option *opts;
	const char *ttl_arg = NULL;
	struct errbuf err = {""};
	int o, ret;

	memset(a, 0, sizeof(*a));
	a->comment = "";
	snprintf(a->cmd, sizeof(a->cmd), "ip %s", argv[0]);
	if (strcmp(argv[0], "del") == 0) {
		a->sub = CTL_IP_DEL;
		opts = del_opts;
	} else if (strcmp(argv[0], "list") == 0) {
		a->sub = CTL_IP_LIST;
		opts = list_opts;
	} else {
		a->sub = CTL_IP_SET;
		opts = set_opts;
		rules_action_parse(argv[0], &a->action);
	}
	optind = 0;
	while ((o = ctl_getopt(argc, argv, ":h", opts, a->cmd)) != -1) {
		switch (o) {
		case 't':
			ttl_arg = optarg;
			break;
		case 'c':
			a->comment = optarg;
			break;
		case 'f':
			a->force = true;
			break;
		case 'P':
			if (!pg)
				return ctl_usage_error(
				    a->cmd, "%s: %s", a->cmd,
				    IP_ARGS_PROJECT_NEEDS_PG);
			a->project = optarg;
			break;
		case 'j':
			a->json = true;
			break;
		case 'h':
			a->help = true;
			return CTL_OK;
		default:
			return CTL_USAGE;
		}
	}
	if (a->sub == CTL_IP_LIST) {
		if (optind < argc)
			return ctl_usage_error(a->cmd,
					       "%s: unexpected argument '%s'",
					       a->cmd, argv[optind]);
		return CTL_OK;
	}
	if (optind >= argc)
		return ctl_usage_error(a->cmd, "%s: missing CIDR", a->cmd);
	if (optind + 1 < argc)
		return ctl_usage_error(a->cmd, "%s: unexpected argument '%s'",
				       a->cmd, argv[optind + 1]);
	a->arg = argv[optind];
	ret = ip_args_cidr(a->cmd, a->arg, &a->cidr);
	if (ret)
		return ret;
	if (ttl_arg && duration_parse(ttl_arg, &a->ttl, &err))
		return ctl_usage_error(a->cmd, "bad --ttl: %s", err.msg);
	if (rules_comment_check(a->comment, &err))
		return ctl_usage_error(a->cmd, "bad --comment: %s", err.msg);
	if (a->project && config_id_check(a->project, &err))
		return ctl_usage_error(a->cmd, "bad --project: %s", err.msg);
	return CTL_OK;
}
