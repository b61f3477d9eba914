/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * route_writer.c - the route table's one writer (route_writer.h): each
 * source's list replaced on its own, every list merged, checked for
 * claims made twice, built into the next generation and swapped in, on
 * the control loop only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edge_assert.h"
#include "route_writer.h"

const char *route_writer_source_name(enum route_src_id id)
{
	return route_src_name((unsigned)id);
}

void route_writer_init(struct route_writer *w, struct route_holder *h,
		       const struct route_defaults *def)
{
	memset(w, 0, sizeof(*w));
	w->holder = h;
	/* the control loop's thread; daemon() keeps it (a forked child's
	 * one thread has its parent's pthread_t) */
	w->owner = pthread_self();
	w->def = *def;
}

void route_writer_free(struct route_writer *w)
{
	(void)w; /* the table is the holder's (route_holder_clear) */
}

/* Whether the caller is the writer's thread (EDGE_ASSERT: a test build
 * aborts, production counts and refuses). */
static bool rw_owner(const struct route_writer *w)
{
	return EDGE_ASSERT_MSG(pthread_equal(pthread_self(), w->owner),
			       "route table written off the control loop");
}

/* Whether the caller may write: the control loop's thread, a source. */
static int rw_may(struct route_writer *w, enum route_src_id id,
		  struct errbuf *err)
{
	if (!EDGE_ASSERT_MSG(pthread_equal(pthread_self(), w->owner),
			     "route source %s changed off the control loop",
			     route_writer_source_name(id))) {
		errbuf_set(err, "route table: written from a thread other than "
				"the control loop's; refused");
		return -EPERM;
	}
	if ((unsigned)id >= ROUTE_SRC_N) {
		errbuf_set(err, "route source %d: no such source", (int)id);
		return -ERANGE;
	}
	return 0;
}

/* End build b and install its generation. */
static int rw_install(struct route_writer *w, struct route_build *b,
		      uint64_t *gen, struct errbuf *err)
{
	struct route_table *t;
	int rc = route_build_end(b, &t);

	if (rc) {
		errbuf_set(err, "route table: out of memory");
		return rc;
	}
	if (gen)
		*gen = route_table_generation(t);
	route_table_swap(w->holder, t);
	return 0;
}

/* ---- the write ---------------------------------------------------------- */

/* route_writer_update, and with tcp the TCP routes tcp[0..n_tcp) too. */
static int rw_update(struct route_writer *w, enum route_src_id id,
		     struct route_src *src, const struct route_defaults *def,
		     bool tcp_set, const struct route_tcp *tcp, size_t n_tcp,
		     uint64_t *gen, struct errbuf *err)
{
	struct route_defaults nd;
	struct route_table *cur = NULL;
	struct route_build *b = NULL;
	size_t i;
	int rc;

	errbuf_clear(err);
	rc = rw_may(w, id, err);
	if (rc)
		goto out;
	nd = def ? *def : w->def;
	cur = route_table_current(w->holder);
	rc = route_build_begin(cur, &nd, &b);
	if (rc) {
		errbuf_set(err, "route table: out of memory");
		goto out;
	}
	rc = tcp_set ? route_build_set_tcp(b, tcp, n_tcp, err) : 0;
	if (rc == 0)
		rc = route_build_drop_source(b, id, err);
	for (i = 0; rc == 0 && src && i < src->n_projects; i++)
		rc = route_build_set(b, id, &src->projects[i], err);
	if (rc) {
		route_build_abort(b);
		goto out;
	}
	rc = rw_install(w, b, gen, err);
	if (rc == 0)
		w->def = nd;
out:
	route_table_put(cur);
	route_src_free(src);
	return rc;
}

int route_writer_update(struct route_writer *w, enum route_src_id id,
			struct route_src *src, const struct route_defaults *def,
			uint64_t *gen, struct errbuf *err)
{
	return rw_update(w, id, src, def, false, NULL, 0, gen, err);
}

int route_writer_update_file(struct route_writer *w, struct route_src *src,
			     const struct route_defaults *def,
			     const struct route_tcp *v, size_t n, uint64_t *gen,
			     struct errbuf *err)
{
	return rw_update(w, ROUTE_SRC_FILE, src, def, true, v, n, gen, err);
}

int route_writer_patch(struct route_writer *w, enum route_src_id id,
		       struct route_src_project *set, size_t n_set,
		       const char *const *del, size_t n_del, uint64_t *gen,
		       void (*refused)(void *arg, const char *project,
				       const char *why),
		       void *arg, struct errbuf *err)
{
	return route_writer_patch_tcp(w, id, set, n_set, del, n_del, NULL, gen,
				      refused, arg, err);
}

int route_writer_patch_tcp(struct route_writer *w, enum route_src_id id,
			   struct route_src_project *set, size_t n_set,
			   const char *const *del, size_t n_del,
			   const struct route_tcp_list *tcp, uint64_t *gen,
			   void (*refused)(void *arg, const char *project,
					   const char *why),
			   void *arg, struct errbuf *err)
{
	struct route_patch *p = NULL;
	size_t i;
	int rc;

	rc = route_writer_patch_begin(w, id, tcp, refused, arg, &p, err);
	for (i = 0; rc == 0 && i < n_del; i++)
		rc = route_patch_del(p, del[i]);
	for (i = 0; rc == 0 && i < n_set; i++)
		rc = route_patch_set(p, &set[i]);
	if (rc == 0)
		rc = route_patch_end(p, gen, err);
	else
		route_patch_abort(p);
	if (rc == -ENOMEM && !err->msg[0])
		errbuf_set(err, "route table: out of memory");
	for (i = 0; set && i < n_set; i++)
		route_src_project_clear(&set[i]);
	return rc;
}

/* ---- a patch in steps ------------------------------------------------ */

struct route_patch {
	struct route_writer *w;
	enum route_src_id id;
	struct route_table *base; /* the generation it began from (held) */
	struct route_build *b;
	void (*refused)(void *arg, const char *project, const char *why);
	void *arg;
	bool broken; /* out of memory: end refuses */
};

int route_writer_patch_begin(struct route_writer *w, enum route_src_id id,
			     const struct route_tcp_list *tcp,
			     void (*refused)(void *arg, const char *project,
					     const char *why),
			     void *arg, struct route_patch **out,
			     struct errbuf *err)
{
	struct route_patch *p;
	int rc;

	*out = NULL;
	errbuf_clear(err);
	rc = rw_may(w, id, err);
	if (rc)
		return rc;
	p = calloc(1, sizeof(*p));
	if (!p) {
		errbuf_set(err, "route table: out of memory");
		return -ENOMEM;
	}
	p->w = w;
	p->id = id;
	p->refused = refused;
	p->arg = arg;
	p->base = route_table_current(w->holder);
	rc = route_build_begin(p->base, &w->def, &p->b);
	if (rc) {
		errbuf_set(err, "route table: out of memory");
		route_patch_abort(p);
		return rc;
	}
	if (tcp) {
		rc = route_build_set_tcp(p->b, tcp->v, tcp->n, err);
		if (rc) {
			route_patch_abort(p);
			return rc;
		}
	}
	*out = p;
	return 0;
}

/* The result of a set or del of project pid: refused is told of a name
 * claimed twice; out of memory breaks the patch. */
static int rw_patch_rc(struct route_patch *p, const char *pid, int rc,
		       const struct errbuf *why)
{
	if (rc == -ENOMEM) {
		p->broken = true;
		return rc;
	}
	if (rc && p->refused)
		p->refused(p->arg, pid, why->msg);
	return 0;
}

int route_patch_set(struct route_patch *p, struct route_src_project *proj)
{
	char pid[CONFIG_ID_MAX + 1];
	struct errbuf why = {""};
	int rc;

	if (p->broken || !rw_owner(p->w)) {
		route_src_project_clear(proj);
		p->broken = true;
		return -ENOMEM;
	}
	snprintf(pid, sizeof(pid), "%s", proj->id ? proj->id : "");
	rc = route_build_set(p->b, p->id, proj, &why);
	return rw_patch_rc(p, pid, rc, &why);
}

int route_patch_del(struct route_patch *p, const char *project)
{
	struct errbuf why = {""};
	int rc;

	if (p->broken || !rw_owner(p->w)) {
		p->broken = true;
		return -ENOMEM;
	}
	rc = route_build_del(p->b, p->id, project, &why);
	return rw_patch_rc(p, project, rc, &why);
}

int route_patch_end(struct route_patch *p, uint64_t *gen, struct errbuf *err)
{
	struct route_table *cur;
	int rc;

	errbuf_clear(err);
	rc = rw_may(p->w, p->id, err);
	if (rc == 0 && p->broken) {
		errbuf_set(err, "route table: out of memory");
		rc = -ENOMEM;
	}
	if (rc == 0) {
		/* another write since begin: this one was built on a table
		 * that is no longer the current one */
		cur = route_table_current(p->w->holder);
		if (cur != p->base) {
			errbuf_set(err, "route table: changed by another "
					"write while this one was built; not "
					"applied");
			rc = -ESTALE;
		}
		route_table_put(cur);
	}
	if (rc == 0) {
		rc = rw_install(p->w, p->b, gen, err);
		p->b = NULL; /* ended */
	}
	route_patch_abort(p);
	return rc;
}

void route_patch_abort(struct route_patch *p)
{
	if (!p)
		return;
	route_build_abort(p->b);
	route_table_put(p->base);
	free(p);
}

/* ---- giving way ----------------------------------------------------------
 */

/* Whether a source other than id holds kind + name in t. */
static bool rw_taken(const struct route_table *t, enum route_src_id id,
		     char kind, const char *name)
{
	unsigned holder;

	return name && name[0] &&
	       route_table_holder(t, kind, name, &holder) == 0 &&
	       holder != (unsigned)id;
}

static int rw_prune_one(const struct route_table *t, enum route_src_id id,
			struct route_src_project *p,
			void (*said)(void *arg, const char *what), void *arg,
			size_t *dropped)
{
	char what[512];
	size_t j, k;

	if (rw_taken(t, id, 'p', p->id)) {
		snprintf(what, sizeof(what),
			 "project %s is defined by another source", p->id);
		said(arg, what);
		(*dropped)++;
		return -EEXIST;
	}
	for (j = 0; j < p->n_envs;) {
		struct route_src_env *e = &p->envs[j];

		if (rw_taken(t, id, 'e', e->id) ||
		    rw_taken(t, id, 'd', e->deployment.id)) {
			snprintf(what, sizeof(what),
				 "environment %s (deployment %s) of project %s "
				 "is defined by another source",
				 e->id,
				 e->deployment.id ? e->deployment.id : "",
				 p->id);
			said(arg, what);
			route_src_env_clear(e);
			memmove(e, e + 1, (p->n_envs - j - 1) * sizeof(*e));
			p->n_envs--;
			(*dropped)++;
			continue;
		}
		for (k = 0; k < e->n_domains;) {
			if (!rw_taken(t, id, 'h', e->domains[k])) {
				k++;
				continue;
			}
			snprintf(what, sizeof(what),
				 "domain %s of environment %s is served by "
				 "another source",
				 e->domains[k], e->id);
			said(arg, what);
			free(e->domains[k]);
			memmove(&e->domains[k], &e->domains[k + 1],
				(e->n_domains - k - 1) * sizeof(*e->domains));
			e->n_domains--;
			(*dropped)++;
		}
		j++;
	}
	return 0;
}

int route_writer_prune_project(const struct route_writer *w,
			       enum route_src_id id,
			       struct route_src_project *p,
			       void (*said)(void *arg, const char *what),
			       void *arg, size_t *dropped)
{
	struct route_table *t = route_table_current(w->holder);
	int rc = rw_prune_one(t, id, p, said, arg, dropped);

	route_table_put(t);
	return rc;
}

size_t route_writer_prune(const struct route_writer *w, enum route_src_id id,
			  struct route_src *src,
			  void (*said)(void *arg, const char *what), void *arg)
{
	struct route_table *t = route_table_current(w->holder);
	size_t dropped = 0, i;

	for (i = 0; src && i < src->n_projects;) {
		if (rw_prune_one(t, id, &src->projects[i], said, arg,
				 &dropped) == 0) {
			i++;
			continue;
		}
		route_src_project_clear(&src->projects[i]);
		memmove(&src->projects[i], &src->projects[i + 1],
			(src->n_projects - i - 1) * sizeof(src->projects[0]));
		src->n_projects--;
	}
	route_table_put(t);
	return dropped;
}
