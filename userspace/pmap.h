/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pmap.h - a persistent map from strings to pointers: a hash trie (16
 * children per node, 4 bits of a keyed SipHash per level) whose versions
 * share every node a change did not touch.
 *
 * A change (pmap_set, pmap_del) never modifies a node an earlier version
 * can see: it copies the nodes on the path to the key, so it costs the
 * depth of the trie (log16 of the entries: 4 levels for 10,000, 5 for a
 * million), not the size of the map, and every version taken before it
 * reads on unchanged, from any thread, without locks. Nodes are
 * reference-counted (atomically: the last reader of an old version frees
 * what only it held, on whichever thread that is).
 *
 * Changes are made in batches: a batch has an epoch number (pmap_epoch),
 * and a node made in the current batch, which no published version can
 * see yet, is changed in place instead of copied again; a batch ends when
 * its root is published (handed to readers), and the next batch takes a
 * new epoch. So a batch that sets n keys makes about n leaves and the
 * inner nodes on their paths once.
 *
 * A map's values are the caller's; ops->free_val (may be NULL) is called
 * for a value when the last leaf holding it goes (the value replaced, the
 * key deleted, the last version holding it put). Two keys whose hashes
 * collide in all 64 bits share a collision leaf list; any keys work.
 * Writers: one thread at a time per map. Readers: any.
 */
#ifndef EDGE_PMAP_H
#define EDGE_PMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pmap_node;

struct pmap_ops {
	void (*free_val)(void *val); /* NULL: values are not the map's */
};

/* A new epoch: nodes made from now on may be changed in place until the
 * next call. Call before each batch (the writer's thread). */
uint64_t pmap_epoch(void);

/* The value under key (len bytes), NULL when absent. root may be NULL
 * (the empty map). */
void *pmap_get(const struct pmap_node *root, const char *key, size_t len);

/* Set key to val in the version *root (NULL: empty) under epoch; *root
 * becomes the new version. The caller's reference to the old *root moves
 * to the new one (take pmap_ref first to keep the old version too).
 * Returns 0, or -ENOMEM with *root unchanged. val must not be NULL. */
int pmap_set(struct pmap_node **root, const char *key, size_t len, void *val,
	     uint64_t epoch, const struct pmap_ops *ops);

/* Delete key from *root the same way; 0 (also when it was absent) or
 * -ENOMEM with *root unchanged. */
int pmap_del(struct pmap_node **root, const char *key, size_t len,
	     uint64_t epoch, const struct pmap_ops *ops);

/* Another reference to a version (root may be NULL); returns root. */
struct pmap_node *pmap_ref(struct pmap_node *root);

/* Drop a reference to a version; what only it held is freed (values
 * through ops->free_val). root may be NULL. */
void pmap_put(struct pmap_node *root, const struct pmap_ops *ops);

/* Call fn for every key and value, in no particular order; stops at the
 * first nonzero return, which it returns. */
int pmap_foreach(const struct pmap_node *root,
		 int (*fn)(void *arg, const char *key, size_t len, void *val),
		 void *arg);

/* Entries in a version (counted on the way: O(size)). */
size_t pmap_count(const struct pmap_node *root);

/* Nodes made so far by this process (inner nodes and leaves): how a test
 * tells that a change cost its path, not the map. */
uint64_t pmap_nodes_made(void);

/* Tests only: hash keys with fn instead (NULL: SipHash again), to make
 * keys collide at will. Call while no map exists. */
void pmap_test_hash(uint64_t (*fn)(const void *data, size_t len));

#endif /* EDGE_PMAP_H */
