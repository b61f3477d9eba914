/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * route_writer.h - the one writer of the route table: every change of
 * routes, from any source, goes through the route writer on the control
 * loop.
 *
 * The table holds every source's projects (route_src.h: the
 * configuration file's, from SIGHUP and `edgectl reload`, and the
 * PostgreSQL sync's), each project a segment of its own (route.h). A
 * change replaces a source's projects, all of them (route_writer_update:
 * a reload of the file) or some (route_writer_patch: the projects a
 * database change touched), and builds the next generation from the
 * current one, sharing what the change did not touch; then swaps it into
 * the holder the workers read. So a file reload keeps the database's
 * routes, a database change keeps the file's, neither can overwrite the
 * other's generation, and a database change costs the projects it names.
 *
 * The table must hold what a single file must: every project,
 * environment and deployment id and every domain once. A whole-source
 * update that would make two sources claim one (a domain in both the file
 * and the database, say) is refused, naming both claims: the source keeps
 * what it had, and the previous generation keeps serving. A patch refuses
 * only the projects that would, and applies the others. Refusing rather
 * than letting one source win means a typo or a stale row never silently
 * takes a domain from another project; route_writer_prune first makes a
 * source give way, name by name, to what the other sources hold.
 *
 * One writer: the writes run on the thread that called route_writer_init
 * (the control loop's), which EDGE_ASSERT enforces: in a test build
 * another thread's call aborts; in production it is counted, logged and
 * refused (-EPERM), never raced.
 */
#ifndef EDGE_ROUTE_WRITER_H
#define EDGE_ROUTE_WRITER_H

#include <pthread.h>
#include <stdint.h>

#include "log.h"
#include "route.h"
#include "route_src.h"

struct route_writer {
	struct route_holder *holder; /* where the workers read the table */
	pthread_t owner;	     /* the only thread that may write */
	struct route_defaults def;   /* the settings' defaults */
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
 * Replace every project of source id with src's (NULL: the source has
 * none) and, when def is not NULL, the settings' defaults with *def; then
 * build the next generation and swap it in. src is taken in every case.
 * Returns 0 with *gen (may be NULL) the new generation; or -EEXIST when a
 * name would be claimed twice, -ENOMEM, -EPERM when called from another
 * thread than the writer's, -ERANGE for an id that is no source: with err
 * saying why, nothing changed and the previous generation still
 * installed.
 */
int route_writer_update(struct route_writer *w, enum route_src_id id,
			struct route_src *src, const struct route_defaults *def,
			uint64_t *gen, struct errbuf *err);

/*
 * Change some of source id's projects: delete the projects del[0..n_del)
 * and set set[0..n_set) (replacing the projects of their ids; their
 * contents are taken in every case), in that order, then build the next
 * generation and swap it in. A project that would claim a name another
 * holds is left as it was and refused(arg, its id, why) is told; the
 * others apply. Returns 0 with *gen, or -ENOMEM / -EPERM / -ERANGE with
 * err (nothing changed).
 */
int route_writer_patch(struct route_writer *w, enum route_src_id id,
		       struct route_src_project *set, size_t n_set,
		       const char *const *del, size_t n_del, uint64_t *gen,
		       void (*refused)(void *arg, const char *project,
				       const char *why),
		       void *arg, struct errbuf *err);

/*
 * route_writer_patch, and the TCP routes (route.h: every source's,
 * merged by tcproute.h) replaced by tcp's in the same generation when tcp
 * is not NULL (NULL: they stay). A list the table refuses (-EINVAL: see
 * route_build_set_tcp) or -ENOMEM changes nothing, with err.
 */
int route_writer_patch_tcp(struct route_writer *w, enum route_src_id id,
			   struct route_src_project *set, size_t n_set,
			   const char *const *del, size_t n_del,
			   const struct route_tcp_list *tcp, uint64_t *gen,
			   void (*refused)(void *arg, const char *project,
					   const char *why),
			   void *arg, struct errbuf *err);

/*
 * route_writer_patch_tcp in steps, so that a change of thousands of
 * projects need not hold the control loop for its whole build: begin
 * takes the current generation as its base (and sets the TCP routes when
 * tcp is not NULL: an error there, -EINVAL or -ENOMEM with err, and
 * nothing begins); each route_patch_set (the project's contents taken in
 * every case) or route_patch_del changes the build, refused(arg, id, why)
 * told of a project that would claim a name another holds, as for
 * route_writer_patch; the control loop may run between them. end installs
 * the build and frees the patch: 0 with *gen; -ESTALE when another write
 * installed a generation since begin (the patch was built on a table
 * that is gone: nothing is installed, the caller builds it again);
 * -ENOMEM / -EPERM with err. abort drops a patch (NULL is fine). set and
 * del return 0, or -ENOMEM once the patch is broken (end then refuses).
 * Control loop only, like every write.
 */
struct route_patch;
int route_writer_patch_begin(struct route_writer *w, enum route_src_id id,
			     const struct route_tcp_list *tcp,
			     void (*refused)(void *arg, const char *project,
					     const char *why),
			     void *arg, struct route_patch **out,
			     struct errbuf *err);
int route_patch_set(struct route_patch *p, struct route_src_project *proj);
int route_patch_del(struct route_patch *p, const char *project);
int route_patch_end(struct route_patch *p, uint64_t *gen, struct errbuf *err);
void route_patch_abort(struct route_patch *p);

/*
 * The file's load and reload: route_writer_update of the file source
 * with src and the settings' defaults def (NULL: as they are), and the
 * TCP routes (route.h; every source's, tcproute.h) replaced by v[0..n),
 * all in one generation; later generations keep the TCP routes (every
 * build resolves them anew, so another source's change reaches them
 * too). Returns as route_writer_update, and -EINVAL for a list
 * route_build_set_tcp refuses; on failure nothing changed.
 */
int route_writer_update_file(struct route_writer *w, struct route_src *src,
			     const struct route_defaults *def,
			     const struct route_tcp *v, size_t n, uint64_t *gen,
			     struct errbuf *err);

/*
 * Make source id's project p give way to what the other sources hold in
 * the current generation, so that a name one source holds never refuses
 * another source's project: an environment (or its deployment) whose id
 * is taken elsewhere is left out of p, and so is a domain taken
 * elsewhere; said(arg, what) is told of each (to log and count it), and
 * *dropped counts them. The ones who were first keep their names. Returns
 * -EEXIST when p's own id is taken (the whole project gives way: do not
 * set it), else 0.
 */
int route_writer_prune_project(const struct route_writer *w,
			       enum route_src_id id,
			       struct route_src_project *p,
			       void (*said)(void *arg, const char *what),
			       void *arg, size_t *dropped);

/* The same for every project of a list: a project whose id is taken is
 * taken out of src. Returns how many names were left out. */
size_t route_writer_prune(const struct route_writer *w, enum route_src_id id,
			  struct route_src *src,
			  void (*said)(void *arg, const char *what), void *arg);

/* Nothing to free any more but for symmetry (the table is the holder's:
 * route_holder_clear). w may be NULL. */
void route_writer_free(struct route_writer *w);

#endif /* EDGE_ROUTE_WRITER_H */
