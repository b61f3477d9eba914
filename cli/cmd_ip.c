/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cmd_ip.c - edgectl ip block|allow|del|list|policy: source-address rules
 * and the policy that decides what happens without one.
 *
 * Every change is checked against the caller's own SSH session (from
 * SSH_CONNECTION) first: a change that would cut it off is refused unless
 * --force is given.
 *
 * With --pg, block, allow, del and list act on the database's ip_rules
 * instead (cmd_ip_pg.c), through the same checks.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"
#include "edgectl.h"

int ctl_ip_parse_cidr(const char *cmd, const char *arg, struct cidr *out)
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

/* A copy of a rule list (for "what if" checks). */
static int ip_rules_copy(const struct rules *from, struct rules *to)
{
	memset(to, 0, sizeof(*to));
	if (!from->n)
		return 0;
	to->v = malloc(from->n * sizeof(*to->v));
	if (!to->v)
		return -ENOMEM;
	memcpy(to->v, from->v, from->n * sizeof(*to->v));
	to->n = to->cap = from->n;
	return 0;
}

int ctl_ip_ssh_guard(const struct ctl *c, const struct ctl_ip_view *before,
		     const struct ctl_ip_view *after, bool absolute, bool force,
		     const char *what)
{
	const char *env = getenv("SSH_CONNECTION");
	struct errbuf why = {""};
	struct rules_ssh ssh;
	const struct rule *by;
	char a[CIDR_STR_MAX], b[CIDR_STR_MAX], d[DURATION_STR_MAX];
	int ret;

	ret = rules_ssh_parse(env, &ssh);
	if (ret == -ENOENT)
		return CTL_OK;
	if (ret) {
		log_note("SSH_CONNECTION is malformed ('%s'); cannot check "
			 "whether this cuts off your SSH session",
			 env);
		return CTL_OK;
	}
	if (!rules_ssh_cut_off(after->rules, after->policy, after->ports, &ssh,
			       c->now, &why)) {
		/* still reachable: warn when only a rule with a TTL keeps
		 * it so under the allowlist */
		if (after->policy == EDGE_POLICY_ALLOWLIST &&
		    policy_port_guarded(after->ports, ssh.server_port) &&
		    (by = rules_match(after->rules, &ssh.client, c->now)) &&
		    by->expires_at)
			log_note(
			    "your SSH client %s is allowed by %s, which "
			    "expires in %s",
			    cidr_format_addr(&ssh.client, a, sizeof(a)),
			    cidr_format(&by->cidr, b, sizeof(b)),
			    duration_format((uint64_t)(by->expires_at - c->now),
					    d, sizeof(d)));
		return CTL_OK;
	}
	if (!absolute && rules_ssh_cut_off(before->rules, before->policy,
					   before->ports, &ssh, c->now, NULL))
		return CTL_OK; /* this change is not what cuts it off */
	if (force) {
		log_warnx("warning: %s: %s (--force given)", what, why.msg);
		return CTL_OK;
	}
	log_warnx("refusing to %s: %s (from SSH_CONNECTION); allow it first "
		  "(edgectl ip allow %s) or use --force",
		  what, why.msg, cidr_format_addr(&ssh.client, a, sizeof(a)));
	return CTL_FAIL;
}

int ctl_ip_guard_block(const struct ctl *c, const struct ctl_ip_view *before,
		       const struct ctl_ip_view *after,
		       const struct cidr *prefix, bool force, const char *what)
{
	const char *env = getenv("SSH_CONNECTION");
	struct rules_ssh ssh;
	const struct rule *by;
	int ret;

	ret = ctl_ip_ssh_guard(c, before, after, false, force, what);
	if (ret != CTL_OK || force)
		return ret;
	/* blocking the client's own prefix is refused even when something
	 * else already drops it */
	if (rules_ssh_parse(env, &ssh) == 0 &&
	    (by = rules_match(after->rules, &ssh.client, c->now)) &&
	    cidr_equal(&by->cidr, prefix))
		return ctl_ip_ssh_guard(c, before, after, true, force, what);
	return CTL_OK;
}

static void ip_describe(const struct ctl *c, const struct rule *x, char *buf,
			size_t len)
{
	char s[CIDR_STR_MAX], d[DURATION_STR_MAX];
	int n;

	n = snprintf(buf, len, "%s %s", rules_action_name(x->action),
		     cidr_format(&x->cidr, s, sizeof(s)));
	if (n < 0 || (size_t)n >= len)
		return;
	if (x->expires_at)
		n +=
		    snprintf(buf + n, len - (size_t)n, " (expires in %s)",
			     duration_format((uint64_t)(x->expires_at - c->now),
					     d, sizeof(d)));
	if (n >= 0 && (size_t)n < len && x->comment[0])
		snprintf(buf + n, len - (size_t)n, " \"%s\"", x->comment);
}

/* What ip_set changes in the maps. */
struct ip_put {
	const struct rule *x;
	bool created;
};

static int ip_put_apply(struct ctl *c, const void *arg, struct errbuf *err)
{
	const struct ip_put *put = arg;
	int ret = 0;

	/* a new rule's id may have counted hits for a rule deleted before */
	if (put->created)
		ret = pins_hits_zero(&c->pins, put->x->id);
	if (!ret)
		ret = pins_rule_put(&c->pins, put->x, c->now, c->boot_now);
	if (ret)
		errbuf_set(err, "cannot write the rule to %s: %s", c->pin_dir,
			   strerror(-ret));
	return ret;
}

static int ip_set(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"ttl", required_argument, NULL, 't'},
	    {"comment", required_argument, NULL, 'c'},
	    {"force", no_argument, NULL, 'f'},
	    {"project", required_argument, NULL, 'P'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	char cmd[16], desc[512], where[64];
	const char *ttl_arg = NULL, *comment = "";
	struct errbuf err = {""};
	struct rules after = {0};
	struct rule x;
	uint64_t ttl = 0;
	bool force = false, created;
	uint32_t id;
	int o, ret;

	memset(&x, 0, sizeof(x));
	snprintf(cmd, sizeof(cmd), "ip %s", argv[0]);
	rules_action_parse(argv[0], &x.action);
	optind = 0;
	while ((o = ctl_getopt(argc, argv, ":h", opts, cmd)) != -1) {
		switch (o) {
		case 't':
			ttl_arg = optarg;
			break;
		case 'c':
			comment = optarg;
			break;
		case 'f':
			force = true;
			break;
		case 'P':
			return ctl_usage_error(cmd, "%s: %s", cmd,
					       CTL_PROJECT_NEEDS_PG);
		case 'h':
			return ctl_usage_print(cmd);
		default:
			return CTL_USAGE;
		}
	}
	if (optind >= argc)
		return ctl_usage_error(cmd, "%s: missing CIDR", cmd);
	if (optind + 1 < argc)
		return ctl_usage_error(cmd, "%s: unexpected argument '%s'", cmd,
				       argv[optind + 1]);
	ret = ctl_ip_parse_cidr(cmd, argv[optind], &x.cidr);
	if (ret)
		return ret;
	if (ttl_arg && duration_parse(ttl_arg, &ttl, &err))
		return ctl_usage_error(cmd, "bad --ttl: %s", err.msg);
	if (rules_comment_check(comment, &err))
		return ctl_usage_error(cmd, "bad --comment: %s", err.msg);
	snprintf(x.comment, sizeof(x.comment), "%s", comment);

	ret = ctl_begin(c, CTL_WRITE | CTL_BPFFS);
	if (ret)
		return ret;
	if (ttl)
		x.expires_at = c->now + (int64_t)ttl;

	if (x.action == EDGE_ACT_BLOCK) {
		struct ctl_ip_view before = {&c->st.rules, c->st.policy,
					     &c->st.ports};
		struct ctl_ip_view aft = {&after, c->st.policy, &c->st.ports};

		if (ip_rules_copy(&c->st.rules, &after) ||
		    rules_set(&after, &x, NULL, NULL) == -ENOMEM) {
			rules_free(&after);
			log_warnx("out of memory");
			return CTL_FAIL;
		}
		snprintf(where, sizeof(where), "block %s", argv[optind]);
		ret =
		    ctl_ip_guard_block(c, &before, &aft, &x.cidr, force, where);
		rules_free(&after);
		if (ret)
			return ret;
	}

	ret = rules_set(&c->st.rules, &x, &created, &id);
	if (ret == -ENOSPC) {
		log_warnx("rule table full (%d rules)", EDGE_LOCAL_RULES_MAX);
		return CTL_FAIL;
	}
	if (ret) {
		log_warnx("out of memory");
		return CTL_FAIL;
	}
	x.id = id;
	{
		struct ip_put put = {&x, created};

		ret = ctl_change(c, ip_put_apply, &put);
	}
	if (ret)
		return ret;
	ip_describe(c, &x, desc, sizeof(desc));
	printf("%s: %s\n", created ? "added" : "updated", desc);
	if (!c->attached)
		log_note("edge is not attached; rule saved and applied at "
			 "attach");
	return CTL_OK;
}

static int ip_del_apply(struct ctl *c, const void *arg, struct errbuf *err)
{
	int ret = pins_rule_del(&c->pins, arg);

	if (ret && ret != -ENOENT) {
		errbuf_set(err, "cannot remove the rule from %s: %s",
			   c->pin_dir, strerror(-ret));
		return ret;
	}
	return 0;
}

static int ip_del(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"force", no_argument, NULL, 'f'},
	    {"project", required_argument, NULL, 'P'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct rules after = {0};
	struct cidr cidr;
	struct rule gone;
	char s[CIDR_STR_MAX], desc[512], where[80];
	bool force = false;
	int o, ret;

	optind = 0;
	while ((o = ctl_getopt(argc, argv, ":h", opts, "ip del")) != -1) {
		if (o == 'f')
			force = true;
		else if (o == 'P')
			return ctl_usage_error("ip del", "ip del: %s",
					       CTL_PROJECT_NEEDS_PG);
		else if (o == 'h')
			return ctl_usage_print("ip del");
		else
			return CTL_USAGE;
	}
	if (optind >= argc)
		return ctl_usage_error("ip del", "ip del: missing CIDR");
	if (optind + 1 < argc)
		return ctl_usage_error("ip del",
				       "ip del: unexpected argument '%s'",
				       argv[optind + 1]);
	ret = ctl_ip_parse_cidr("ip del", argv[optind], &cidr);
	if (ret)
		return ret;
	ret = ctl_begin(c, CTL_WRITE | CTL_BPFFS);
	if (ret)
		return ret;
	if (!rules_find(&c->st.rules, &cidr)) {
		log_warnx("no rule for %s", cidr_format(&cidr, s, sizeof(s)));
		return CTL_FAIL;
	}
	if (ip_rules_copy(&c->st.rules, &after)) {
		log_warnx("out of memory");
		return CTL_FAIL;
	}
	rules_del(&after, &cidr, NULL);
	{
		struct ctl_ip_view before = {&c->st.rules, c->st.policy,
					     &c->st.ports};
		struct ctl_ip_view aft = {&after, c->st.policy, &c->st.ports};

		snprintf(where, sizeof(where), "delete the rule for %s",
			 cidr_format(&cidr, s, sizeof(s)));
		ret = ctl_ip_ssh_guard(c, &before, &aft, false, force, where);
	}
	rules_free(&after);
	if (ret)
		return ret;
	rules_del(&c->st.rules, &cidr, &gone);
	ret = ctl_change(c, ip_del_apply, &cidr);
	if (ret)
		return ret;
	/* only now: undoing the deletion would have brought the rule back
	 * with its hits */
	if (c->attached)
		pins_hits_zero(&c->pins, gone.id);
	ip_describe(c, &gone, desc, sizeof(desc));
	printf("deleted: %s\n", desc);
	return CTL_OK;
}

static int ip_list(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	char s[CIDR_STR_MAX], d[DURATION_STR_MAX];
	bool json = false;
	json_t *arr = NULL;
	size_t i, shown = 0, w = 4;
	int o, ret;

	optind = 0;
	while ((o = ctl_getopt(argc, argv, ":h", opts, "ip list")) != -1) {
		if (o == 'j')
			json = true;
		else if (o == 'h')
			return ctl_usage_print("ip list");
		else
			return CTL_USAGE;
	}
	if (optind < argc)
		return ctl_usage_error("ip list",
				       "ip list: unexpected argument '%s'",
				       argv[optind]);
	ret = ctl_begin(c, CTL_READ);
	if (ret)
		return ret;
	rules_sort(&c->st.rules);
	if (json)
		arr = json_array();
	for (i = 0; i < c->st.rules.n; i++) {
		size_t l =
		    strlen(cidr_format(&c->st.rules.v[i].cidr, s, sizeof(s)));
		w = l > w ? l : w;
	}
	for (i = 0; i < c->st.rules.n; i++) {
		const struct rule *x = &c->st.rules.v[i];
		uint64_t hits = 0;

		if (rules_expired(x, c->now))
			continue;
		if (c->attached)
			pins_hits_read(&c->pins, x->id, &hits);
		cidr_format(&x->cidr, s, sizeof(s));
		if (json) {
			json_t *o_ = json_pack(
			    "{s:s,s:s,s:s,s:o,s:o,s:I,s:s,s:I}", "cidr", s,
			    "family",
			    x->cidr.family == AF_INET ? "ipv4" : "ipv6",
			    "action", rules_action_name(x->action),
			    "expires_at",
			    x->expires_at ? json_integer(x->expires_at)
					  : json_null(),
			    "ttl_remaining",
			    x->expires_at ? json_integer(x->expires_at - c->now)
					  : json_null(),
			    "hits", (json_int_t)hits, "comment", x->comment,
			    "id", (json_int_t)x->id);

			if (!o_ || json_array_append_new(arr, o_)) {
				json_decref(arr);
				log_warnx("out of memory");
				return CTL_FAIL;
			}
			continue;
		}
		if (shown == 0)
			printf("%-6s  %-*s  %-10s  %12s  %s\n", "ACTION",
			       (int)w, "CIDR", "TTL", "HITS", "COMMENT");
		printf("%-6s  %-*s  %-10s  %12llu%s%s\n",
		       rules_action_name(x->action), (int)w, s,
		       x->expires_at
			   ? duration_format((uint64_t)(x->expires_at - c->now),
					     d, sizeof(d))
			   : "-",
		       (unsigned long long)hits, x->comment[0] ? "  " : "",
		       x->comment);
		shown++;
	}
	if (json)
		return ctl_json_print(arr);
	if (shown == 0)
		printf("no rules\n");
	return CTL_OK;
}

static int ip_policy_show(struct ctl *c, bool json)
{
	char *ports;
	int ret;

	ret = ctl_begin(c, CTL_READ);
	if (ret)
		return ret;
	ports = policy_ports_format(&c->st.ports);
	if (!ports) {
		log_warnx("out of memory");
		return CTL_FAIL;
	}
	if (json) {
		ret = ctl_json_print(json_pack("{s:s,s:s}", "policy",
					       state_policy_name(c->st.policy),
					       "ports", ports));
		free(ports);
		return ret;
	}
	printf("policy: %s\n", state_policy_name(c->st.policy));
	printf("guarded ports: %s%s\n", ports,
	       c->st.policy == EDGE_POLICY_ALLOWLIST
		   ? ""
		   : " (guarded only under allowlist)");
	free(ports);
	return CTL_OK;
}

static int ip_policy_apply(struct ctl *c, const void *arg, struct errbuf *err)
{
	int ret = pins_config_write(&c->pins, &c->st);

	(void)arg;
	if (ret)
		errbuf_set(err, "cannot write the policy to %s: %s", c->pin_dir,
			   strerror(-ret));
	return ret;
}

static int ip_policy(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"ports", required_argument, NULL, 'p'},
	    {"force", no_argument, NULL, 'f'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct errbuf err = {""};
	struct policy_ports ports;
	const char *ports_arg = NULL;
	bool force = false, json = false;
	uint32_t policy;
	char *text;
	int o, ret;

	optind = 0;
	while ((o = ctl_getopt(argc, argv, ":h", opts, "ip policy")) != -1) {
		switch (o) {
		case 'p':
			ports_arg = optarg;
			break;
		case 'f':
			force = true;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			return ctl_usage_print("ip policy");
		default:
			return CTL_USAGE;
		}
	}
	if (optind >= argc) {
		if (ports_arg || force)
			return ctl_usage_error("ip policy",
					       "ip policy: --ports and --force "
					       "need a policy");
		return ip_policy_show(c, json);
	}
	if (optind + 1 < argc)
		return ctl_usage_error("ip policy",
				       "ip policy: unexpected argument '%s'",
				       argv[optind + 1]);
	if (strcmp(argv[optind], "blocklist") == 0)
		policy = EDGE_POLICY_BLOCKLIST;
	else if (strcmp(argv[optind], "allowlist") == 0)
		policy = EDGE_POLICY_ALLOWLIST;
	else
		return ctl_usage_error("ip policy",
				       "ip policy: unknown policy '%s' (use "
				       "blocklist or allowlist)",
				       argv[optind]);
	if (json)
		return ctl_usage_error("ip policy",
				       "ip policy: --json only shows the "
				       "policy");
	if (ports_arg && policy_ports_parse(ports_arg, &ports, &err))
		return ctl_usage_error("ip policy", "bad --ports: %s", err.msg);

	ret = ctl_begin(c, CTL_WRITE | CTL_BPFFS);
	if (ret)
		return ret;
	if (!ports_arg)
		ports = c->st.ports;
	if (policy == EDGE_POLICY_ALLOWLIST) {
		struct ctl_ip_view before = {&c->st.rules, c->st.policy,
					     &c->st.ports};
		struct ctl_ip_view after = {&c->st.rules, policy, &ports};

		ret = ctl_ip_ssh_guard(c, &before, &after, true, force,
				       "switch to allowlist");
		if (ret)
			return ret;
	}
	c->st.policy = policy;
	c->st.ports = ports;
	ret = ctl_change(c, ip_policy_apply, NULL);
	if (ret)
		return ret;
	text = policy_ports_format(&c->st.ports);
	printf("policy: %s (guarded ports: %s)\n", state_policy_name(policy),
	       text ? text : "?");
	free(text);
	if (!c->attached)
		log_note("edge is not attached; policy saved and applied at "
			 "attach");
	return CTL_OK;
}

int cmd_ip(struct ctl *c, int argc, char **argv)
{
	const char *sub;

	if (argc < 2)
		return ctl_usage_error("ip", "ip: missing subcommand (block, "
					     "allow, del, list, policy)");
	sub = argv[1];
	/* with a database the rules are the fleet's (cmd_ip_pg.c); the
	 * policy stays each host's own */
	if (c->pg && (strcmp(sub, "block") == 0 || strcmp(sub, "allow") == 0 ||
		      strcmp(sub, "del") == 0 || strcmp(sub, "list") == 0))
		return ctl_ip_pg(c, argc - 1, argv + 1);
	if (c->pg && strcmp(sub, "policy") == 0)
		log_note("--pg does not apply to ip policy: the policy is "
			 "each host's own, kept in %s",
			 c->state_path);
	if (strcmp(sub, "block") == 0 || strcmp(sub, "allow") == 0)
		return ip_set(c, argc - 1, argv + 1);
	if (strcmp(sub, "del") == 0)
		return ip_del(c, argc - 1, argv + 1);
	if (strcmp(sub, "list") == 0)
		return ip_list(c, argc - 1, argv + 1);
	if (strcmp(sub, "policy") == 0)
		return ip_policy(c, argc - 1, argv + 1);
	if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 ||
	    strcmp(sub, "help") == 0)
		return ctl_usage_print("ip");
	return ctl_usage_error("ip", "ip: unknown subcommand '%s'", sub);
}
