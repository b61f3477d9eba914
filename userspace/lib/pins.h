/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pins.h - edge's pinned maps: finding them, checking they are the maps
 * this build expects, writing rules and settings into them, and reading
 * counters and per-rule hits back.
 *
 * The pin directory (default EDGE_PIN_DIR_DEFAULT) holds one pin per map,
 * named as in edge_maps.h. It exists while edge is attached to at least
 * one interface.
 */
#ifndef EDGE_PINS_H
#define EDGE_PINS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "edge_maps.h"
#include "log.h"
#include "rules.h"
#include "state.h"

enum pins_map {
	PINS_RULES_V4,
	PINS_RULES_V6,
	PINS_RULE_HITS,
	PINS_CONFIG,
	PINS_PORTS,
	PINS_RATELIMIT,
	PINS_COUNTERS,
	PINS_NMAPS
};

/* Open pinned maps. fd[i] is -1 when closed. */
struct pins {
	int fd[PINS_NMAPS];
	uint32_t id[PINS_NMAPS]; /* each map's kernel id, as opened */
	ino_t ino[PINS_NMAPS];	 /* each pin's inode, as opened (0: unknown) */
	char dir[PATH_MAX];
	int ncpus;
};

/* The map (and pin) name of m. */
const char *pins_map_name(enum pins_map m);

/*
 * Check that dir can hold pins: the directory itself if it exists, else
 * its nearest existing parent, must be on a bpffs. Returns 0, or -ENODEV
 * with err explaining how to mount one, or another -errno.
 */
int pins_check_bpffs(const char *dir, struct errbuf *err);

/* Whether any of edge's pins exists in dir. */
bool pins_exist(const char *dir);

/* Write "dir/name" for map m into buf. 0 or -ENAMETOOLONG. */
int pins_path(const char *dir, enum pins_map m, char *buf, size_t len);

/*
 * Open every pinned map in dir and check each is what this build expects
 * (type, key and value size, entries). Returns 0; -ENOENT when there are no
 * pins; -EPROTO when a pin is missing or a map differs (left by another
 * version of edge), with err saying which and what to do; another -errno
 * with err set.
 */
int pins_open(struct pins *p, const char *dir, struct errbuf *err);

/* Whether the maps p holds are no longer the ones pinned in p->dir: a
 * pin is gone (the last detach), or pins another map (edge attached
 * again since). False when it cannot tell (a pin it may not open). The
 * maps p holds stay valid, but nothing reads or writes them any more. */
bool pins_replaced(const struct pins *p);

/* Close the maps. p may be NULL; closing twice is harmless. */
void pins_close(struct pins *p);

/* Mark every fd closed without closing (for a zeroed struct). */
void pins_init(struct pins *p);

/*
 * The kernel's expiry (CLOCK_BOOTTIME ns, edge_rule.expires_ns) of a rule
 * that expires at expires_at (unix s, later than wall_now), boot_now being
 * CLOCK_BOOTTIME ns at wall_now. An expiry further ahead than 64-bit
 * nanoseconds of boot time reach (about 584 years) is UINT64_MAX: it
 * expires, in name, but never wraps around to a near time.
 */
uint64_t pins_expiry_ns(int64_t expires_at, int64_t wall_now,
			uint64_t boot_now);

/*
 * Write rule x into its LPM trie. wall_now (unix s) and boot_now
 * (CLOCK_BOOTTIME ns) convert its wall-clock expiry to the kernel's clock
 * (pins_expiry_ns). An already expired rule is deleted instead. Returns 0
 * or -errno.
 */
int pins_rule_put(struct pins *p, const struct rule *x, int64_t wall_now,
		  uint64_t boot_now);

/* The map entry for prefix c into *out. Returns 0, -ENOENT, or -errno. */
int pins_rule_get(struct pins *p, const struct cidr *c, struct edge_rule *out);

/* Call fn for every entry of both rule maps (the keys are read first, so
 * fn may change the maps); stops at fn's first non-zero return, which it
 * returns. 0, that, or -ENOMEM. */
int pins_rules_each(struct pins *p,
		    int (*fn)(void *arg, const struct cidr *c,
			      const struct edge_rule *v),
		    void *arg);

/* Delete the map entry for prefix c. Returns 0, -ENOENT, or -errno. */
int pins_rule_del(struct pins *p, const struct cidr *c);

/* Zero rule id's hit counter on every CPU. Returns 0 or -errno. */
int pins_hits_zero(struct pins *p, uint32_t id);

/* Sum of rule id's hit counter over CPUs into *sum. 0 or -errno. */
int pins_hits_read(struct pins *p, uint32_t id, uint64_t *sum);

/* The same for rule ids first..first+n-1 into sums[0..n), in one batch
 * (one by one where the kernel has no batches for arrays). 0 or -errno
 * (-ERANGE: past EDGE_MAX_RULES). */
int pins_hits_read_range(struct pins *p, uint32_t first, uint32_t n,
			 uint64_t *sums);

/* Sum over CPUs of every counter into out[0..EDGE_CTR_MAX). 0 or -errno. */
int pins_counters_read(struct pins *p, uint64_t out[EDGE_CTR_MAX]);

/* Write policy, rate limits and guarded ports from st. 0 or -errno. */
int pins_config_write(struct pins *p, const struct state *st);

/* What pins_sync found wrong in the rule maps, and fixed. */
struct pins_sync_stats {
	size_t removed;	  /* entries whose prefix has no rule in the state */
	size_t restored;  /* unexpired rules that had no entry */
	size_t corrected; /* entries that differed from their rule (id,
			     action, prefix length, or expiring or not) */
};

/*
 * Make the maps match st: write every rule and the configuration, then
 * delete map entries whose prefix has no rule in st and whose id is of
 * the host's own range (below EDGE_LOCAL_RULES_MAX: the database's rules
 * are edged's), zeroing their hit counters unless a rule of st uses the
 * id. Writing first: a prefix that stays blocked is never unblocked. Counts
 * what it fixed into *stats (may be NULL; zeroed first). Returns 0 or -errno
 * with err set.
 */
int pins_sync(struct pins *p, const struct state *st, int64_t wall_now,
	      uint64_t boot_now, struct pins_sync_stats *stats,
	      struct errbuf *err);

/* Remove every edge pin in dir, then dir itself if it is empty. Returns 0
 * or -errno (missing pins are not an error). */
int pins_unpin(const char *dir);

#endif /* EDGE_PINS_H */
