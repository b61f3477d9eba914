/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ip_guard.c - the SSH lockout check (ip_guard.h): whether a change of
 * rules or policy cuts off the SSH session edgectl runs in, judged from
 * SSH_CONNECTION against the rules before and after the change.
 */
#include <errno.h>
#include <stdlib.h>

#include "ctlutil.h"
#include "duration.h"
#include "ip_guard.h"

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
