/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ip_guard.h - the SSH lockout check of edgectl's rule and policy changes,
 * the same for this host's rules (cmd_ip.c) and the database's global
 * ones (cmd_ip_pg.c).
 */
#ifndef EDGECTL_IP_GUARD_H
#define EDGECTL_IP_GUARD_H

#include <stdbool.h>
#include <stdint.h>

#include "cidr.h"
#include "policy.h"
#include "rules.h"

struct ctl;

/* What decides a source's fate on this host: rules, policy, ports. */
struct ctl_ip_view {
	const struct rules *rules;
	uint32_t policy;
	const struct policy_ports *ports;
};

/*
 * The SSH lockout check. before/after are the rules, policies and ports
 * before and after the change. Refuses (CTL_FAIL, saying why) when the
 * change cuts the caller's SSH client (SSH_CONNECTION) off: after it the
 * client's traffic to the SSH port is dropped, and either absolute is set
 * (the policy switch: being cut off afterwards is enough) or before the
 * change it was not. With force the change goes ahead with a warning.
 * what names the change ("block 10.0.0.0/8"). CTL_OK without
 * SSH_CONNECTION (a note when it is malformed).
 */
int ctl_ip_ssh_guard(const struct ctl *c, const struct ctl_ip_view *before,
		     const struct ctl_ip_view *after, bool absolute, bool force,
		     const char *what);

/* The check for a new block rule for prefix: ctl_ip_ssh_guard, and unless
 * force, also refused when the new rule is the one that would match the
 * client (blocking one's own prefix), even if something else already
 * drops it. */
int ctl_ip_guard_block(const struct ctl *c, const struct ctl_ip_view *before,
		       const struct ctl_ip_view *after,
		       const struct cidr *prefix, bool force, const char *what);

#endif /* EDGECTL_IP_GUARD_H */
