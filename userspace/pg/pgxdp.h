/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pgxdp.h - the database's global IP rules in this host's pinned XDP
 * maps, beside the host's own (edgectl's state file).
 *
 * The database's rules take rule ids from EDGE_LOCAL_RULES_MAX up (one
 * per database rule, kept while the rule lives, so its hit counter
 * does), the host's own stay below: each writer removes only entries of
 * its own range, and a prefix that has a rule of the host's own keeps it
 * (the host's rule wins on its host; the database's comes back when the
 * host's goes, at the next pgxdp_check). Rows on one prefix (the schema allows
 * a block and an allow for the same cidr) put one rule in the maps: a
 * block before an allow, then the lowest id, whatever order the rows
 * come in. A block that would drop the database's own packets here (its
 * prefix holds the address edged reaches the database at, and no longer
 * allow of the database's covers that address) is left out, logged and
 * counted: a rule that cuts a host off from its database could never be
 * taken back through the database. A new set is written over the live
 * one first and what it no longer holds removed after, and no prefix is
 * written twice, so no moment lets a source through that both sets
 * block. Expiry is the kernel's, as for the host's rules. The maps are
 * opened when edge is attached, before privileges drop, and looked for
 * again (and written) by pgxdp_check while they are missing or after
 * edge was attached anew: opening them again needs the rights on the pin
 * directory that edged's user may not have.
 */
#ifndef EDGE_PGXDP_H
#define EDGE_PGXDP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "pgmodel.h"

struct pgxdp;

/* What becomes of each of the database's rules (pgxdp_plan). */
enum pgxdp_verdict {
	PGXDP_WRITE = 0, /* into the maps (unless the host's own holds it) */
	PGXDP_DUPLICATE, /* another row on its prefix goes in instead */
	PGXDP_REFUSED,	 /* a block that would drop a keep address */
	PGXDP_OVER,	 /* no slot left for it (pgxdp_apply, not plan) */
};

/* Addresses pgxdp_keep holds at most. */
#define PGXDP_KEEP_MAX 8

/* The verdict for each rule v[i] in out[i], and how many are PGXDP_WRITE
 * in *written: one rule per prefix, then, for each address keep[0..nk),
 * every block that would be the longest match of the rest for it
 * refused. Pure: no maps, no clock. 0 or -ENOMEM. */
int pgxdp_plan(const struct pgm_rule *v, size_t n, const struct cidr *keep,
	       size_t nk, uint8_t *out, size_t *written);

/* What apply did, for logs and metrics. */
struct pgxdp_stats {
	uint64_t applies;  /* sets applied to the maps */
	size_t rules;	   /* the database's rules in the maps now */
	size_t shadowed;   /* prefixes a rule of the host's own holds */
	size_t duplicates; /* rows left out for another on their prefix */
	size_t refused;	   /* blocks left out: they cut off the database */
	size_t over;	   /* rules left out: no slot left (logged) */
	uint64_t errors;   /* map writes that failed */
	uint64_t reopens;  /* maps found replaced (edge attached again) */
	bool attached;	   /* the maps were there at the last apply */
};

/* 0 and *out (the maps opened now when they exist), or -ENOMEM. */
int pgxdp_new(const char *pin_dir, struct pgxdp **out);

/* From now on a set is written in slices of a few milliseconds on base's
 * loop (the control loop), the loop running between them, rather than at
 * once: 90,000 rules cost tens of thousands of map operations. Until the
 * write is done the stats are the last write's and pgxdp_check waits; a
 * newer set applied meanwhile starts over from what the maps hold then.
 * 0 or -ENOMEM. */
struct event_base;
int pgxdp_start(struct pgxdp *x, struct event_base *base);
void pgxdp_free(struct pgxdp *x);

/* The addresses a rule of the database's may not block here: the
 * database server's (those of `pg`'s host= and hostaddr= that are
 * addresses, and the peer of the connection), at most PGXDP_KEEP_MAX
 * (the rest are ignored). Used from the next apply on. Returns whether
 * they changed. */
bool pgxdp_keep(struct pgxdp *x, const struct cidr *a, size_t n);

/* Make the maps hold the database's rules v[0..n) (copied): at once, or
 * in slices once started (pgxdp_start); while the maps are missing, once
 * they are there (pgxdp_check). The maps hold EDGE_MAX_RULES -
 * EDGE_LOCAL_RULES_MAX of the database's rules: a rule in them keeps its
 * place, the others take the free ones in the order of their ids, and
 * the rest are left out, counted (stats: over) and logged when their
 * number changes. */
void pgxdp_apply(struct pgxdp *x, const struct pgm_rule *v, size_t n);

/* Keep the maps holding the last set applied, every second or so: the
 * maps found (edge attached after edged started) or replaced (detached
 * and attached again: the maps edged holds are no longer edge's) get the
 * set written into them; so does an entry of the set found gone before
 * it expired (a host's rule that held its prefix deleted: the
 * database's rule comes back within seconds, not at the database's next
 * change), and a change of the keep addresses. A host's rule found on a
 * prefix of the set is counted as shadowing it. */
void pgxdp_check(struct pgxdp *x);

/* The XDP counters ({"passed": N, ...}): a new reference, or NULL (maps
 * not there). The database's rules' hits as the text of a JSON object
 * ({"RULE_ID": N, ...}: every rule in the maps, 8192 at most, in one
 * read of the maps and written without a JSON tree), malloc'd, or NULL
 * (maps not there, out of memory). */
json_t *pgxdp_counters(struct pgxdp *x);
char *pgxdp_hits(struct pgxdp *x);

void pgxdp_stats(const struct pgxdp *x, struct pgxdp_stats *st);

#endif /* EDGE_PGXDP_H */
