/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * state.h - what edgectl remembers between runs: rules, policy, guarded
 * ports, rate limits and the interfaces edge is attached to.
 *
 * Kept in $STATE_DIR/state.json (JSON, mode 0600, written atomically).
 * The state is authoritative: at attach the pinned maps are made to match
 * it. Every command that changes anything holds an flock on the state
 * directory for its whole run.
 */
#ifndef EDGE_STATE_H
#define EDGE_STATE_H

#include <limits.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>

#include "log.h"
#include "netns.h"
#include "policy.h"
#include "rules.h"

#define STATE_VERSION 1
#define STATE_FILE "state.json"
#define STATE_DIR_DEFAULT "/var/lib/edge"

/* XDP attach modes as recorded (same values as libxdp's). */
enum state_mode {
	STATE_MODE_NONE = 0,
	STATE_MODE_NATIVE = 1,
	STATE_MODE_SKB = 2,
};

/* An interface edge was attached to, in the network namespace it was
 * attached in: an interface is its name and its namespace. */
struct state_iface {
	char name[IF_NAMESIZE];
	int ifindex; /* in its namespace */
	int mode;    /* enum state_mode */
	uint32_t prog_id;
	int64_t attached_at; /* unix seconds */
	/* the namespace's inode (netns.h); 0 in a file an older edgectl
	 * wrote: the caller says which namespace that is (init) */
	uint64_t netns;
	char netns_name[NETNS_NAME_MAX]; /* its name then, "" for none */
};

struct state {
	struct rules rules;
	uint32_t policy; /* enum edge_policy */
	struct policy_ports ports;
	struct policy_rl syn;
	struct policy_rl pkt;
	struct state_iface *ifaces;
	size_t n_ifaces;
};

/* Fill st with the defaults: no rules, blocklist, ports 80 and 443, no
 * rate limits, no interfaces. */
void state_init(struct state *st);

/* Free what st holds (not st itself). st may be NULL. */
void state_free(struct state *st);

/* Make *to a deep copy of *from (to is overwritten, not freed first).
 * Returns 0, or -ENOMEM with *to holding the defaults. */
int state_copy(struct state *to, const struct state *from);

/* "native" / "skb" / "none". */
const char *state_mode_name(int mode);

/* "blocklist" / "allowlist". */
const char *state_policy_name(uint32_t policy);

/*
 * Load path into st (which is initialised first). Returns 0; -ENOENT when
 * the file does not exist (st holds the defaults); any other -errno when it
 * cannot be read or is not a valid state file, with err naming the file
 * and what was wrong. Never discards a bad file.
 */
int state_load(const char *path, struct state *st, struct errbuf *err);

/*
 * Saving is two steps, so that a caller can make a change elsewhere (the
 * pinned maps) only once the state is known to be writable, and undo it
 * when the state cannot be put in place:
 *
 *   state_prepare  check and encode st, write it to "path.tmp" (mode
 *                  0600) and fsync it. Nothing visible has changed yet.
 *   state_commit   rename the temporary file over path, fsync the
 *                  directory.
 *   state_abort    remove the temporary file instead.
 */
struct state_pending {
	char path[PATH_MAX];
	char tmp[PATH_MAX];
	bool ready; /* tmp written, neither renamed nor removed yet */
};

/*
 * Returns 0 with sp ready for state_commit or state_abort; or -errno with
 * err saying why and nothing left behind: -EINVAL when st holds text the
 * file cannot store (the message names the rule and the byte), -ENOMEM
 * only when memory ran out, another -errno when the temporary file cannot
 * be written.
 */
int state_prepare(struct state_pending *sp, const char *path,
		  const struct state *st, struct errbuf *err);

/*
 * Put the prepared file in place. Returns 0 once path holds the new state
 * (err then holds a warning if the directory could not be synced: the
 * change is made but may not survive a crash), or -errno with err set when
 * the rename failed: path still holds the old state and the temporary file
 * is removed.
 */
int state_commit(struct state_pending *sp, struct errbuf *err);

/* Remove the prepared file. Harmless when sp is NULL, not ready, or
 * already committed or aborted. */
void state_abort(struct state_pending *sp);

/* state_prepare then state_commit: write st to path atomically. Returns
 * 0 (err may hold state_commit's warning) or -errno with err set. */
int state_save(const char *path, const struct state *st, struct errbuf *err);

/* Find interface name of namespace netns (a record with netns 0 counts as
 * being in namespace init); NULL when absent. */
struct state_iface *state_iface_find(const struct state *st, const char *name,
				     uint64_t netns, uint64_t init);

/* Record an interface (replacing the one of the same name and namespace,
 * as state_iface_find finds it with init). 0 or -ENOMEM. */
int state_iface_set(struct state *st, const struct state_iface *ifc,
		    uint64_t init);

/* Forget an interface (as state_iface_find finds it); 0 or -ENOENT. */
int state_iface_del(struct state *st, const char *name, uint64_t netns,
		    uint64_t init);

/*
 * Lock the state directory: create it (mode 0700, parents too) when
 * create is set, open it and flock it (exclusive or shared), waiting for
 * other holders. Returns the lock fd (>= 0), -ENOENT when the directory is
 * missing and create is not set, or another -errno with err set.
 */
int state_lock(const char *dir, bool exclusive, bool create,
	       struct errbuf *err);

/* Release a lock from state_lock. fd < 0 is ignored. */
void state_unlock(int fd);

#endif /* EDGE_STATE_H */
