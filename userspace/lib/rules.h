/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rules.h - edge's source-address rules in userspace: the list, rule ids,
 * expiry, and the verdict the XDP program reaches for an address (so that
 * edgectl can tell whether a change would cut off the operator's own SSH
 * session before making it).
 *
 * Pure functions over memory: no I/O, no clock (callers pass "now").
 */
#ifndef EDGE_RULES_H
#define EDGE_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cidr.h"
#include "edge_maps.h"
#include "log.h"
#include "policy.h"

/* Longest comment, in bytes. */
#define RULE_COMMENT_MAX 128

/* One rule. expires_at is wall-clock unix seconds, 0 when it never
 * expires. id indexes edge_rule_hits, < EDGE_MAX_RULES. */
struct rule {
	struct cidr cidr;
	uint32_t id;
	uint8_t action; /* enum edge_action */
	int64_t expires_at;
	char comment[RULE_COMMENT_MAX + 1];
};

/* A list of rules, at most one per prefix, in no particular order. */
struct rules {
	struct rule *v;
	size_t n;
	size_t cap;
};

/* Free the list's memory and empty it. r may be NULL. */
void rules_free(struct rules *r);

/* "block" / "allow" for an enum edge_action, "?" otherwise. */
const char *rules_action_name(uint8_t action);

/* Parse "block" / "allow". Returns 0 or -EINVAL. */
int rules_action_parse(const char *s, uint8_t *action);

/* Check a comment: at most RULE_COMMENT_MAX bytes of well-formed UTF-8
 * without control characters (utf8_check_text), so that the state file
 * can hold it and a terminal shows it as it is. Returns 0 or -EINVAL with
 * err saying what is wrong and at which byte. */
int rules_comment_check(const char *s, struct errbuf *err);

/* The rule for exactly this prefix, or NULL. */
struct rule *rules_find(const struct rules *r, const struct cidr *c);

/* Whether rule x has expired at wall-clock time now. */
bool rules_expired(const struct rule *x, int64_t now);

/*
 * Add rule x, or replace the rule with the same prefix (keeping its id;
 * action, expiry and comment are replaced). A new rule gets the smallest
 * id not in use, written into *id. *created says which happened (may be
 * NULL). Returns 0, -ENOSPC when all EDGE_MAX_RULES ids are in use, or
 * -ENOMEM.
 */
int rules_set(struct rules *r, const struct rule *x, bool *created,
	      uint32_t *id);

/*
 * Append x exactly as given (id included), for loading saved state;
 * rules_validate must follow. Returns 0, -ERANGE for an id out of range,
 * -ENOSPC past EDGE_MAX_RULES, -ENOMEM.
 */
int rules_add_loaded(struct rules *r, const struct rule *x);

/* Check that no two rules share a prefix or an id (sorting the list as
 * rules_sort does). Returns 0 or -EEXIST. */
int rules_validate(struct rules *r);

/* The rule for prefix c in a list sorted by rules_sort, or NULL. */
const struct rule *rules_find_sorted(const struct rules *r,
				     const struct cidr *c);

/* Remove the rule for prefix c, copying it to *removed if not NULL.
 * Returns 0 or -ENOENT. */
int rules_del(struct rules *r, const struct cidr *c, struct rule *removed);

/* Remove every rule expired at now; appends the removed rules to
 * *removed when it is not NULL. Returns how many were removed, or
 * -ENOMEM (nothing removed). */
int rules_prune(struct rules *r, int64_t now, struct rules *removed);

/* Sort the list for display: IPv4 before IPv6, then by address, then by
 * prefix length. */
void rules_sort(struct rules *r);

/* The unexpired rule with the longest prefix covering address a (a full
 * /32 or /128), or NULL: what the LPM trie lookup yields in the kernel. */
const struct rule *rules_match(const struct rules *r, const struct cidr *a,
			       int64_t now);

enum rules_verdict {
	RULES_PASS = 0,
	RULES_DROP_RULE,   /* a block rule matches */
	RULES_DROP_POLICY, /* allowlist, guarded port, no allow rule */
};

/*
 * The verdict for traffic from address a to TCP/UDP port dport: the
 * longest unexpired matching prefix decides; a block rule drops
 * everything; under the allowlist policy a guarded port needs an allow
 * rule. *by receives the deciding rule (or NULL); may be NULL.
 */
enum rules_verdict rules_verdict(const struct rules *r, uint32_t policy,
				 const struct policy_ports *ports,
				 const struct cidr *a, unsigned dport,
				 int64_t now, const struct rule **by);

/* The caller's SSH session, from SSH_CONNECTION. */
struct rules_ssh {
	struct cidr client; /* full-length address */
	unsigned server_port;
};

/*
 * Parse SSH_CONNECTION ("client_ip client_port server_ip server_port").
 * Returns 0, -ENOENT when s is NULL or empty, -EINVAL when malformed.
 */
int rules_ssh_parse(const char *s, struct rules_ssh *out);

/*
 * Whether the SSH client would be cut off under rules r, policy and
 * ports: its traffic to the server port would be dropped. When it would,
 * why says so in words (may be NULL).
 */
bool rules_ssh_cut_off(const struct rules *r, uint32_t policy,
		       const struct policy_ports *ports,
		       const struct rules_ssh *ssh, int64_t now,
		       struct errbuf *why);

#endif /* EDGE_RULES_H */
