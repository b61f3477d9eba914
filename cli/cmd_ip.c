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
 * instead (cmd_ip_pg.c), with the same arguments (ip_args.c) and the same
 * checks (ip_guard.c).
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctlutil.h"
#include "duration.h"
#include "ip_args.h"
#include "ip_guard.h"

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

static int ip_set(struct ctl *c, const struct ctl_ip_args *a)
{
	char desc[512], where[64];
	struct rules after = {0};
	struct rule x;
	bool created;
	uint32_t id;
	int ret;

	memset(&x, 0, sizeof(x));
	x.action = a->action;
	x.cidr = a->cidr;
	snprintf(x.comment, sizeof(x.comment), "%s", a->comment);

	ret = ctl_begin(c, CTL_WRITE | CTL_BPFFS);
	if (ret)
		return ret;
	if (a->ttl)
		x.expires_at = c->now + (int64_t)a->ttl;

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
		snprintf(where, sizeof(where), "block %s", a->arg);
		ret = ctl_ip_guard_block(c, &before, &aft, &x.cidr, a->force,
					 where);
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

static int ip_del(struct ctl *c, const struct ctl_ip_args *a)
{
	const struct cidr cidr = a->cidr;
	struct rules after = {0};
	struct rule gone;
	char s[CIDR_STR_MAX], desc[512], where[80];
	int ret;

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
		ret =
		    ctl_ip_ssh_guard(c, &before, &aft, false, a->force, where);
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

static int ip_list(struct ctl *c, const struct ctl_ip_args *a)
{
	char s[CIDR_STR_MAX], d[DURATION_STR_MAX];
	bool json = a->json;
	json_t *arr = NULL;
	size_t i, shown = 0, w = 4;
	int ret;

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
		   : " (guarded only under allowlist; their QUIC Initials "
		     "count as new connections for the rate limit)");
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

/* ip block|allow|del|list: the arguments parsed once (ip_args.c), then
 * this host's rules or, with --pg, the database's (cmd_ip_pg.c). */
static int ip_rules_cmd(struct ctl *c, int argc, char **argv)
{
	struct ctl_ip_args a;
	int ret;

	ret = ctl_ip_args_parse(&a, argc, argv, c->pg != NULL);
	if (ret)
		return ret;
	if (a.help)
		return ctl_usage_print(a.cmd);
	/* with a database the rules are the fleet's; the policy stays each
	 * host's own */
	if (c->pg)
		return ctl_ip_pg(c, &a);
	if (a.sub == CTL_IP_SET)
		return ip_set(c, &a);
	if (a.sub == CTL_IP_DEL)
		return ip_del(c, &a);
	return ip_list(c, &a);
}

int cmd_ip(struct ctl *c, int argc, char **argv)
{
	const char *sub;

	if (argc < 2)
		return ctl_usage_error("ip", "ip: missing subcommand (block, "
					     "allow, del, list, policy)");
	sub = argv[1];
	if (strcmp(sub, "block") == 0 || strcmp(sub, "allow") == 0 ||
	    strcmp(sub, "del") == 0 || strcmp(sub, "list") == 0)
		return ip_rules_cmd(c, argc - 1, argv + 1);
	if (strcmp(sub, "policy") == 0) {
		if (c->pg)
			log_note("--pg does not apply to ip policy: the policy "
				 "is each host's own, kept in %s",
				 c->state_path);
		return ip_policy(c, argc - 1, argv + 1);
	}
	if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 ||
	    strcmp(sub, "help") == 0)
		return ctl_usage_print("ip");
	return ctl_usage_error("ip", "ip: unknown subcommand '%s'", sub);
}
