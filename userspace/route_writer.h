/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * route_writer.h - the one writer of the route table: every change of
 * routes, from any source, goes through route_writer_update on the
 * control loop.
 *
 * The writer holds each source's current list of projects (route_src.h):
 * the configuration file's (SIGHUP, `edgectl reload`) and, later, the
 * PostgreSQL sync's. A change replaces one source's list; the writer
 * merges every source's list in the order of enum route_src_id (the file
 * first), builds the next table generation from them with the settings'
 * defaults, and swaps it into the holder the workers read. So a file
 * reload keeps the database's routes, a database change keeps the
 * file's, and neither can overwrite the other's generation.
 *
 * The merged lists must hold what a single file must: every project,
 * environment and deployment id and every domain once. A change that
 * would make two sources claim one (a domain in both the file and the
 * database, say) is refused, naming both claims; that source keeps its
 * previous list, and the previous generation keeps serving. Refusing
 * rather than letting one source win means a typo or a stale row never
 * silently takes a domain from another project.
 *
 * One writer: route_writer_update runs on the thread that called
 * route_writer_init (the control loop's), which EDGE_ASSERT enforces: in
 * a test build another thread's call aborts; in production it is
 * counted, logged and refused (-EPERM), never raced.
 */
#ifndef EDGE_ROUTE_WRITER_H
#define EDGE_ROUTE_WRITER_H

#include <pthread.h>
#include <stdint.h>

#include "log.h"
#include "route.h"
#include "route_src.h"

/* The sources, in the order their lists are merged. */
enum route_src_id {
	ROUTE_SRC_FILE = 0, /* the configuration file's projects */
	ROUTE_SRC_DB,	    /* the PostgreSQL sync's (a later stage) */
	ROUTE_SRC_N,
};

struct route_writer {
	struct route_holder *holder; /* where the workers read the table */
	pthread_t owner;	     /* the only thread that may write */
	struct route_src *src[ROUTE_SRC_N]; /* each source's list, or NULL */
	struct route_defaults def;	    /* the settings' defaults */
};

/* "file", "database": a source's name in messages. */
const char *route_writer_source_name(enum route_src_id id);

/*
 * Start a writer for h (zero-initialised or route_holder_init'ed; the
 * writer installs every table from now on) with the settings' defaults
 * def, no source having a list yet. The calling thread becomes the only
 * one that may call route_writer_update.
 */
void route_writer_init(struct route_writer *w, struct route_holder *h,
		       const struct route_defaults *def);

/*
 * Replace source id's list with src (NULL: the source has none) and, when
 * def is not NULL, the settings' defaults with *def; then build the
 * generation of every source's list merged and swap it in. src is taken
 * in every case: kept on success, freed on failure. Returns 0 with *gen
 * (may be NULL) the new generation; or -EEXIST when the merge would claim
 * an id or a domain twice, -EINVAL/-ENOMEM when the table cannot be
 * built, -EPERM when called from another thread than the writer's, -ERANGE
 * for an id that is no source: with err saying why, the source's previous
 * list and defaults kept and the previous generation still installed.
 */
int route_writer_update(struct route_writer *w, enum route_src_id id,
			struct route_src *src, const struct route_defaults *def,
			uint64_t *gen, struct errbuf *err);

/* Source id's current list (NULL when it has none). */
const struct route_src *route_writer_source(const struct route_writer *w,
					    enum route_src_id id);

/* Free every source's list (the holder's table is the holder's: see
 * route_holder_clear). w may be NULL. */
/*
 * Make source id's new list src give way to what the other sources
 * already claim, so that a name one source holds never refuses another
 * source's whole list: a project, or an environment (or its deployment),
 * whose id is taken elsewhere is left out of src, and so is a domain
 * taken elsewhere; said(arg, what) is told of each (to log and count
 * it). The ones who were first keep their names. Returns how many were
 * left out.
 */
size_t route_writer_prune(const struct route_writer *w, enum route_src_id id,
			  struct route_src *src,
			  void (*said)(void *arg, const char *what), void *arg);

void route_writer_free(struct route_writer *w);

#endif /* EDGE_ROUTE_WRITER_H */
