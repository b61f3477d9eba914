// SPDX-License-Identifier: BSD-2-Clause
/*
 * pgplane.c - the database control plane wired into edged (pgplane.h):
 * the sync's lists into the route writer's database source, its global
 * rules into the XDP maps, its state into metrics every second.
 */
#include <errno.h>
#include <event2/event.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "challenge.h"
#include "clk.h"
#include "hcheck.h"
#include "log.h"
#include "metrics.h"
#include "pgdb.h"
#include "pgplane.h"
#include "wake.h"
#include "pgsync.h"
#include "pgwake.h"
#include "pgxdp.h"
#include "tcproute.h"
#include "version.h"

/* The health checks of one of the database's projects as the route table
 * holds it (hcheck_targets of the project). */
struct pgplane_hc {
	char *project;
	struct hcheck_target *t;
	size_t n;
};

struct pgplane {
	const struct config *cfg;
	struct route_writer *w;
	struct wake *wake;   /* the on-demand environments (NULL: none) */
	struct tcproute *tr; /* the TCP routes of every source */
	struct pgsync *sync;
	struct pgwake *wakeq; /* the wake protocol's connection */
	struct pgxdp *xdp;
	pgplane_certs_fn certs;
	void *certs_arg;
	pgplane_chal_keys_fn chal;
	void *chal_arg;
	pgplane_acme_chal_fn acme; /* acme_challenges' rows (NULL: not read) */
	void *acme_arg;
	uint64_t chal_skipped; /* challenge_keys rows refused */
	int64_t *chal_bad;     /* the ids refused at the last fetch, */
	size_t n_chal_bad;     /* each said and counted once */
	/* the health checks: each project's that has any, sorted by
	 * project id; who is told of a change */
	struct pgplane_hc *hc;
	size_t n_hc;
	pgplane_hcheck_fn hc_fn;
	void *hc_arg;
	/* during a route job: the projects the writer refused (their
	 * health checks stay as they were), and whether one was lost */
	char **refused_ids;
	size_t n_refused_ids;
	bool refused_lost;
	struct event *tick;
	/* the model read at start (the database's, or the local
	 * snapshot's), until the sync takes it */
	struct pgm *initial;
	uint64_t initial_version;
	bool initial_from_snapshot;
	uint64_t given_way;   /* names the database's list left to the
				 file's (TCP routes too) */
	uint64_t refused;     /* lists the writer refused all the same */
	uint64_t tcp_refused; /* tcp_routes rows tcproute refused */
	/* the database server's addresses no rule may block here: those of
	 * the conninfo (n_conf), then the connection's peer */
	struct cidr keep[PGXDP_KEEP_MAX];
	size_t n_conf, n_keep;
	struct {
		struct metrics_gauge *up, *state, *applied, *db, *projects;
		struct metrics_gauge *rules, *duplicates, *xdp_refused, *lag_ms;
		struct metrics_gauge *xdp_over;
		struct metrics_counter *changes, *snapshots, *reconnects;
		struct metrics_counter *errors, *given_way, *skipped[12];
	} m;
};

static void pgplane_gave_way(void *arg, const char *what)
{
	struct pgplane *p = arg;

	p->given_way++;
	log_warnx_rl("database: %s: left out of the database's routes", what);
}

static void pgplane_refused(void *arg, const char *project, const char *why)
{
	struct pgplane *p = arg;
	char **v;

	p->refused++;
	log_warnx_rl("database: project %s not applied: %s", project, why);
	v = realloc(p->refused_ids, (p->n_refused_ids + 1) * sizeof(*v));
	if (v)
		p->refused_ids = v;
	if (!v || !(v[p->n_refused_ids] = strdup(project)))
		p->refused_lost = true;
	else
		p->n_refused_ids++;
}

static void pgplane_hc_clear(struct pgplane_hc *h)
{
	free(h->project);
	free(h->t);
	memset(h, 0, sizeof(*h));
}

static int pgplane_hc_cmp(const void *key, const void *elem)
{
	return strcmp(key, ((const struct pgplane_hc *)elem)->project);
}

/* The index of project id in p->hc, or where it would go (*found). */
static size_t pgplane_hc_find(const struct pgplane *p, const char *id,
			      bool *found)
{
	size_t lo = 0, hi = p->n_hc;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = pgplane_hc_cmp(id, &p->hc[mid]);

		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	*found = false;
	return lo;
}

/* The health checks of project pr (before the writer takes it) into *h:
 * 0, or -ENOMEM (*h empty). */
static int pgplane_hc_one(const struct route_src_project *pr,
			  struct pgplane_hc *h)
{
	struct route_src one = {(struct route_src_project *)pr, 1};

	memset(h, 0, sizeof(*h));
	h->project = strdup(pr->id ? pr->id : "");
	if (!h->project || hcheck_targets(&one, &h->t, &h->n)) {
		pgplane_hc_clear(h);
		return -ENOMEM;
	}
	return 0;
}

static int pgplane_hc_cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct pgplane_hc *)a)->project,
		      ((const struct pgplane_hc *)b)->project);
}

/* The route table took a change: deleted del[0..n_del), set nh[0..n)
 * (taken), but the projects refused; tell the owner when a project with
 * health checks was touched. One merge of the sorted lists, whatever the
 * number of projects (a snapshot deletes or sets them all). Out of
 * memory: the old checks stay, logged. */
static void pgplane_hc_apply(struct pgplane *p, const char *const *del,
			     size_t n_del, struct pgplane_hc *nh, size_t n)
{
	struct pgplane_hc *add = NULL, *v = NULL;
	size_t i, j, at, k, n_add = 0;
	bool changed = false, found, *gone;

	gone = calloc(p->n_hc + 1, sizeof(*gone));
	add = calloc(n + 1, sizeof(*add));
	v = malloc((p->n_hc + n + 1) * sizeof(*v));
	if (!gone || !add || !v) {
		log_warnx("database: health checks: out of memory; the old "
			  "ones stay");
		for (i = 0; i < n; i++)
			pgplane_hc_clear(&nh[i]);
		goto out;
	}
	for (i = 0; i < n_del; i++) {
		at = pgplane_hc_find(p, del[i], &found);
		if (found && !gone[at])
			changed = gone[at] = true;
	}
	for (i = 0; i < n; i++) {
		for (j = 0; j < p->n_refused_ids; j++)
			if (strcmp(p->refused_ids[j], nh[i].project) == 0)
				break;
		if (j < p->n_refused_ids || p->refused_lost) {
			/* left as it was (or, out of memory, not known
			 * whether: the old checks stay) */
			pgplane_hc_clear(&nh[i]);
			continue;
		}
		at = pgplane_hc_find(p, nh[i].project, &found);
		if (found && !gone[at])
			changed = gone[at] = true; /* its old ones go */
		if (!nh[i].n) {
			pgplane_hc_clear(&nh[i]);
			continue;
		}
		add[n_add++] = nh[i];
		memset(&nh[i], 0, sizeof(nh[i]));
		changed = true;
	}
	qsort(add, n_add, sizeof(*add), pgplane_hc_cmp_entry);
	for (i = j = k = 0; i < p->n_hc || j < n_add;) {
		if (i < p->n_hc && gone[i]) {
			pgplane_hc_clear(&p->hc[i++]);
		} else if (j == n_add ||
			   (i < p->n_hc &&
			    strcmp(p->hc[i].project, add[j].project) < 0)) {
			v[k++] = p->hc[i++];
		} else {
			v[k++] = add[j++];
		}
	}
	free(p->hc);
	p->hc = v;
	p->n_hc = k;
	v = NULL;
	n_add = 0; /* all in p->hc */
out:
	for (i = 0; i < n_add; i++)
		pgplane_hc_clear(&add[i]);
	free(add);
	free(gone);
	free(v);
	if (changed && p->hc_fn)
		p->hc_fn(p->hc_arg);
}

static void pgplane_refused_clear(struct pgplane *p)
{
	size_t i;

	for (i = 0; i < p->n_refused_ids; i++)
		free(p->refused_ids[i]);
	free(p->refused_ids);
	p->refused_ids = NULL;
	p->n_refused_ids = 0;
	p->refused_lost = false;
}

void pgplane_set_hcheck(struct pgplane *p, pgplane_hcheck_fn fn, void *arg)
{
	p->hc_fn = fn;
	p->hc_arg = arg;
}

int pgplane_hcheck_targets(const struct pgplane *p, struct hcheck_target **out,
			   size_t *n)
{
	struct hcheck_target *v;
	size_t i, k = 0, total = 0;

	*out = NULL;
	*n = 0;
	for (i = 0; p && i < p->n_hc; i++)
		total += p->hc[i].n;
	if (!total)
		return 0;
	v = malloc(total * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (i = 0; i < p->n_hc; i++) {
		memcpy(&v[k], p->hc[i].t, p->hc[i].n * sizeof(*v));
		k += p->hc[i].n;
	}
	*out = v;
	*n = total;
	return 0;
}

static int pgplane_cmp_set(const void *key, const void *elem)
{
	const struct route_src_project *p = elem;

	return strcmp(key, p->id);
}

/* The database's tcp_routes rows into the TCP routes of every source:
 * whether the list changed (-ENOMEM: taken as not). */
static bool pgplane_tcp(struct pgplane *p, const struct tcproute_row *tcp,
			size_t n_tcp)
{
	struct tcproute_counts c;
	int rc;

	if (!p->tr)
		return false;
	rc = tcproute_set_db(p->tr, tcp, n_tcp, &c);
	p->tcp_refused += c.refused;
	p->given_way += c.conflicts;
	if (rc < 0)
		log_warnx("database: tcp_routes: %s; the TCP routes stay as "
			  "they were",
			  strerror(-rc));
	return rc > 0;
}

/* Where a change of the database's routes is (pgplane_routes_step). */
enum pgplane_stage {
	PGPLANE_BEGIN = 0, /* the TCP routes; the build begun on the table */
	PGPLANE_PRUNE,	   /* each project gives way to the file's names */
	PGPLANE_BUILD,	   /* the projects gone, then each one set */
	PGPLANE_END,	   /* the build swapped in, the rest told */
};

/* A change of the database's routes on its way into the route table, in
 * slices (pgsync.h's routes_begin and routes_step). */
struct pgplane_job {
	enum pgplane_stage stage;
	struct route_src_project *set; /* taken; pruned in place */
	size_t n_set, n_kept, next;
	char **del; /* taken */
	size_t n_del;
	char **old; /* a snapshot: the database's projects of the table */
	size_t n_old;
	const char **dv; /* what goes: del, then old that set lacks */
	size_t nd;
	bool all;
	struct tcproute_row *tcp; /* copied */
	size_t n_tcp;
	bool tcp_changed;
	uint64_t version;
	struct route_patch *patch;
	struct pgplane_hc *nh; /* each set project's health checks */
	bool nh_lost;	       /* one could not be had: the old ones stay */
	struct wake_defs *wd;
	size_t dropped;
};

static void pgplane_job_free(struct pgplane_job *j)
{
	size_t i;

	if (!j)
		return;
	route_patch_abort(j->patch);
	for (i = 0; i < j->n_set; i++)
		route_src_project_clear(&j->set[i]);
	free(j->set);
	route_ids_free(j->del, j->n_del);
	route_ids_free(j->old, j->n_old);
	free(j->dv);
	free(j->tcp);
	for (i = 0; j->nh && i < j->n_set; i++)
		pgplane_hc_clear(&j->nh[i]);
	free(j->nh);
	wake_defs_free(j->wd);
	free(j);
}

static int pgplane_routes_begin(void *arg, struct route_src_project *set,
				size_t n_set, char **del, size_t n_del,
				bool all, const struct tcproute_row *tcp,
				size_t n_tcp, uint64_t version, void **job,
				struct errbuf *err)
{
	struct pgplane_job *j = calloc(1, sizeof(*j));

	(void)arg;
	*job = NULL;
	if (!j || (n_tcp && !(j->tcp = malloc(n_tcp * sizeof(*tcp))))) {
		size_t i;

		for (i = 0; i < n_set; i++)
			route_src_project_clear(&set[i]);
		free(set);
		route_ids_free(del, n_del);
		free(j);
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	j->set = set;
	j->n_set = n_set;
	j->del = del;
	j->n_del = n_del;
	j->all = all;
	if (n_tcp)
		memcpy(j->tcp, tcp, n_tcp * sizeof(*tcp));
	j->n_tcp = n_tcp;
	j->version = version;
	*job = j;
	return 0;
}

/* The build begun on the current table, with the TCP routes (in the same
 * generation as the projects whose environments they name) and, for a
 * snapshot, the database's projects the table holds that set lacks. */
static int pgplane_job_begin(struct pgplane *p, struct pgplane_job *j,
			     struct errbuf *err)
{
	struct route_tcp_list tl;
	size_t i;
	int rc;

	if (j->all) {
		/* a snapshot: the database's projects it does not hold go
		 * (set is every project, sorted by id: pgmodel's order) */
		struct route_table *t = route_table_current(p->w->holder);

		rc = route_table_project_ids(t, ROUTE_SRC_DB, &j->old,
					     &j->n_old);
		route_table_put(t);
		if (rc) {
			errbuf_set(err, "out of memory");
			return rc;
		}
	}
	j->dv = calloc(j->n_del + j->n_old + 1, sizeof(*j->dv));
	j->nh = calloc(j->n_set + 1, sizeof(*j->nh));
	if (!j->dv || !j->nh) {
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	for (i = 0; i < j->n_del; i++)
		j->dv[j->nd++] = j->del[i];
	for (i = 0; i < j->n_old; i++)
		if (!bsearch(j->old[i], j->set, j->n_set, sizeof(*j->set),
			     pgplane_cmp_set))
			j->dv[j->nd++] = j->old[i];
	j->tcp_changed = pgplane_tcp(p, j->tcp, j->n_tcp);
	if (j->tcp_changed)
		tcproute_list(p->tr, &tl);
	pgplane_refused_clear(p);
	rc = route_writer_patch_begin(p->w, ROUTE_SRC_DB,
				      j->tcp_changed ? &tl : NULL,
				      pgplane_refused, p, &j->patch, err);
	if (rc && j->tcp_changed) {
		tcproute_applied(p->tr, false);
		j->tcp_changed = false;
	}
	return rc;
}

/* Whether a slice is used up (checked every few items). */
static bool pgplane_late(uint64_t deadline_ns, size_t k)
{
	return deadline_ns && k % 16 == 0 && clk_fresh_ns() >= deadline_ns;
}

/* The end: the build swapped in (when the table is still the one it was
 * built on), and the health checks, the TCP routes' listeners and the
 * on-demand environments told. 0, or -ESTALE / -ENOMEM with err. */
static int pgplane_job_end(struct pgplane *p, struct pgplane_job *j,
			   struct errbuf *err)
{
	uint64_t gen = 0;
	size_t i;
	int rc;

	rc = route_patch_end(j->patch, &gen, err);
	j->patch = NULL;
	if (rc == 0 && !j->nh_lost) {
		pgplane_hc_apply(p, j->dv, j->nd, j->nh, j->n_kept);
	} else if (j->nh_lost) {
		log_warnx("database: health checks: out of memory; the old "
			  "ones stay");
	}
	for (i = 0; i < j->n_kept; i++)
		pgplane_hc_clear(&j->nh[i]);
	pgplane_refused_clear(p);
	if (j->tcp_changed)
		tcproute_applied(p->tr, rc == 0);
	if (rc == 0 && j->wd && wake_sync_defs(p->wake, j->wd))
		log_warnx("database: on-demand environments: out of memory");
	if (rc)
		return rc;
	/* new addresses listened on, gone ones closed, failed ones tried
	 * again */
	if (p->tr)
		tcproute_listen(p->tr, false, NULL);
	log_debug("database: change version %llu: route generation %llu",
		  (unsigned long long)j->version, (unsigned long long)gen);
	return 0;
}

static int pgplane_routes_step(void *arg, void *job, uint64_t deadline_ns,
			       struct errbuf *err)
{
	struct pgplane *p = arg;
	struct pgplane_job *j = job;
	size_t k = 0;
	int rc = 0;

	errbuf_clear(err);
	if (j->stage == PGPLANE_BEGIN) {
		rc = pgplane_job_begin(p, j, err);
		if (rc)
			goto done;
		j->stage = PGPLANE_PRUNE;
	}
	/* a project whose id the file holds gives way whole (left out), a
	 * name the file holds is left out of the project */
	for (; j->stage == PGPLANE_PRUNE && j->next < j->n_set; j->next++) {
		struct route_src_project *pr = &j->set[j->next];

		if (pgplane_late(deadline_ns, ++k))
			return 1;
		if (route_writer_prune_project(p->w, ROUTE_SRC_DB, pr,
					       pgplane_gave_way, p,
					       &j->dropped)) {
			route_src_project_clear(pr);
			continue;
		}
		if (j->next != j->n_kept) {
			j->set[j->n_kept] = *pr;
			memset(pr, 0, sizeof(*pr));
		}
		j->n_kept++;
	}
	if (j->stage == PGPLANE_PRUNE) {
		/* what the wake registry needs of the change, before the
		 * build takes set; applied once the routes are in */
		if (p->wake) {
			j->wd = wake_defs_new(ROUTE_SRC_DB, j->set, j->n_kept,
					      j->dv, j->nd, j->all);
			if (!j->wd)
				log_warnx("database: on-demand environments: "
					  "out of memory");
		}
		j->stage = PGPLANE_BUILD;
		j->next = 0;
	}
	/* the projects gone, then each one set (with what its health
	 * checks are, hcheck.h, before the build takes it) */
	for (; j->stage == PGPLANE_BUILD && j->next < j->nd + j->n_kept;
	     j->next++) {
		if (pgplane_late(deadline_ns, ++k))
			return 1;
		if (j->next < j->nd) {
			rc = route_patch_del(j->patch, j->dv[j->next]);
		} else {
			size_t i = j->next - j->nd;

			if (!j->nh_lost &&
			    pgplane_hc_one(&j->set[i], &j->nh[i]))
				j->nh_lost = true;
			rc = route_patch_set(j->patch, &j->set[i]);
		}
		if (rc) {
			errbuf_set(err, "route table: out of memory");
			goto done;
		}
	}
	j->stage = PGPLANE_END;
	rc = pgplane_job_end(p, j, err);
done:
	pgplane_job_free(j);
	return rc;
}

static void pgplane_routes_abort(void *arg, void *job)
{
	struct pgplane_job *j = job;

	if (j && j->tcp_changed)
		tcproute_applied(((struct pgplane *)arg)->tr, false);
	pgplane_refused_clear(arg);
	pgplane_job_free(j);
}

/* The connection's peer into the keep list (once connected: a host name
 * resolves to it), and the list to pgxdp; whether it changed. */
static bool pgplane_keep(struct pgplane *p)
{
	struct cidr peer;
	size_t i;

	if (p->sync && pgsync_peer(p->sync, &peer) == 0) {
		for (i = 0; i < p->n_conf; i++)
			if (cidr_equal(&p->keep[i], &peer))
				break;
		if (i == p->n_conf && p->n_conf < PGXDP_KEEP_MAX) {
			p->keep[p->n_conf] = peer;
			p->n_keep = p->n_conf + 1;
		}
	}
	return pgxdp_keep(p->xdp, p->keep, p->n_keep);
}

static void pgplane_rules(void *arg, const struct pgm_rule *v, size_t n,
			  uint64_t version)
{
	struct pgplane *p = arg;

	(void)version;
	pgplane_keep(p);
	pgxdp_apply(p->xdp, v, n);
}

static void pgplane_report(void *arg, uint64_t *generation, json_t **counters,
			   char **hits)
{
	struct pgplane *p = arg;
	struct route_table *t = route_table_current(p->w->holder);

	*generation = t ? route_table_generation(t) : 0;
	route_table_put(t);
	*counters = pgxdp_counters(p->xdp);
	*hits = pgxdp_hits(p->xdp);
}

static void pgplane_certs(void *arg, const struct pgsync_cert *v, size_t n)
{
	struct pgplane *p = arg;

	if (p->certs)
		p->certs(p->certs_arg, v, n);
}

/* The challenge_keys rows, checked (the table's CHECKs say the same:
 * a row that passes them and not this is a schema changed by hand). */
static void pgplane_chal_keys(void *arg, const struct pgsync_chal_key *v,
			      size_t n)
{
	struct pgplane *p = arg;
	struct chal_key_row *rows = calloc(n ? n : 1, sizeof(*rows));
	int64_t *bad = calloc(n ? n : 1, sizeof(*bad));
	struct chal_keys one;
	size_t i, j, k = 0, nb = 0;
	char err[128], *end;

	if (!rows || !bad) {
		free(rows);
		free(bad);
		log_warnx("database: challenge_keys: out of memory");
		return;
	}
	for (i = 0; i < n; i++) {
		const char *why = NULL;

		errno = 0;
		rows[k].id = strtoll(v[i].id, &end, 10);
		rows[k].signs_from = strtoll(v[i].signs_from, &end, 10);
		if (errno || *end || end == v[i].signs_from)
			why = "signs_from is not a finite time";
		else if (strlen(v[i].key_hex) != 2 * CHAL_KEY_LEN ||
			 chal_keys_parse(v[i].key_hex, 2 * CHAL_KEY_LEN, &one,
					 err, sizeof(err)))
			why = strlen(v[i].key_hex) == 2 * CHAL_KEY_LEN
				  ? err
				  : "key_hex is not 64 hex digits";
		if (why) {
			for (j = 0; j < p->n_chal_bad; j++)
				if (p->chal_bad[j] == rows[k].id)
					break;
			if (j == p->n_chal_bad) {
				log_warnx("database: challenge_keys row %s: "
					  "%s: skipped",
					  v[i].id, why);
				p->chal_skipped++;
			}
			bad[nb++] = rows[k].id;
			continue;
		}
		memcpy(rows[k].k, one.k[0], CHAL_KEY_LEN);
		k++;
	}
	OPENSSL_cleanse(&one, sizeof(one));
	free(p->chal_bad);
	p->chal_bad = bad;
	p->n_chal_bad = nb;
	if (p->chal)
		p->chal(p->chal_arg, rows, k);
	OPENSSL_cleanse(rows, (n ? n : 1) * sizeof(*rows));
	free(rows);
}

void pgplane_set_chal_keys(struct pgplane *p, pgplane_chal_keys_fn fn,
			   void *arg)
{
	p->chal = fn;
	p->chal_arg = arg;
}

static void pgplane_acme_chals(void *arg, const struct acme_chal_row *v,
			       size_t n)
{
	struct pgplane *p = arg;

	if (p->acme)
		p->acme(p->acme_arg, v, n);
}

void pgplane_set_acme_challenges(struct pgplane *p, pgplane_acme_chal_fn fn,
				 void *arg)
{
	p->acme = fn;
	p->acme_arg = arg;
}

static const struct pgsync_ops pgplane_ops = {
    .routes_begin = pgplane_routes_begin,
    .routes_step = pgplane_routes_step,
    .routes_abort = pgplane_routes_abort,
    .apply_rules = pgplane_rules,
    .apply_certs = pgplane_certs,
    .apply_chal_keys = pgplane_chal_keys,
    .apply_acme_chals = pgplane_acme_chals,
    .report = pgplane_report,
};

void pgplane_set_certs(struct pgplane *p, pgplane_certs_fn fn, void *arg)
{
	p->certs = fn;
	p->certs_arg = arg;
}

/* mkdir -p of path's directory, the last one 0700 and the user's when
 * it is made here. A directory that exists stays whose it is (the path
 * may name /var/lib or /tmp), and the snapshot file is given to the user
 * only inside the user's own directory, never through a symlink. */
static int pgplane_snapshot_dir(const char *path, const struct passwd *pw,
				struct errbuf *err)
{
	char buf[4096], *dir, *p;
	struct stat st;
	bool made;

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf)) {
		errbuf_set(err, "pg_snapshot: path too long");
		return -ENAMETOOLONG;
	}
	dir = dirname(buf);
	for (p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0755) && errno != EEXIST) {
			errbuf_set(err, "pg_snapshot: cannot create %s: %s",
				   dir, strerror(errno));
			return -errno;
		}
		*p = '/';
	}
	made = mkdir(dir, 0700) == 0;
	if (!made && errno != EEXIST) {
		errbuf_set(err, "pg_snapshot: cannot create %s: %s", dir,
			   strerror(errno));
		return -errno;
	}
	if (!pw)
		return 0;
	if (made && lchown(dir, pw->pw_uid, pw->pw_gid)) {
		errbuf_set(err, "pg_snapshot: cannot give %s to %s: %s", dir,
			   pw->pw_name, strerror(errno));
		return -errno;
	}
	if (lstat(dir, &st)) {
		errbuf_set(err, "pg_snapshot: %s: %s", dir, strerror(errno));
		return -errno;
	}
	if (st.st_uid != pw->pw_uid) {
		log_warnx("pg_snapshot: %s is not %s's: left as it is (the "
			  "snapshot is saved only if %s may write there)",
			  dir, pw->pw_name, pw->pw_name);
		return 0;
	}
	/* a file left by a run as another user */
	if (lchown(path, pw->pw_uid, pw->pw_gid) && errno != ENOENT) {
		errbuf_set(err, "pg_snapshot: cannot give %s to %s: %s", path,
			   pw->pw_name, strerror(errno));
		return -errno;
	}
	return 0;
}

static void pgplane_migrated(int version, const char *name, void *arg)
{
	(void)arg;
	log_note("database: schema migration %04d_%s applied", version, name);
}

/* Bring the database's schema up to this build's at start, under the
 * advisory lock (several hosts may start at once: one migrates, the
 * others wait for it and find nothing to do). A database that cannot be
 * reached now is not an error: edged serves from its local snapshot and
 * the sync connects when it can (the next start, or `edgectl db
 * migrate`, migrates). A schema newer than this build is: its rows may
 * mean what this edge cannot know, so edged refuses to start. */
static int pgplane_migrate(const struct config *cfg, PGconn **out,
			   struct errbuf *err)
{
	struct errbuf e = {""};
	PGconn *conn = NULL;
	char by[320];
	int rc, applied = 0;

	*out = NULL;
	rc = pgdb_connect(cfg->pg, "edged", &conn, &e);
	if (rc == -ECONNREFUSED) {
		log_warnx("database: not migrated at start (%s); the sync "
			  "connects when it can",
			  e.msg);
		return 0;
	}
	if (rc) {
		errbuf_set(err, "pg: %s", e.msg);
		return rc;
	}
	snprintf(by, sizeof(by), "%s edged %s", cfg->host_name, EDGE_VERSION);
	rc = pgdb_migrate(conn, by, pgplane_migrated, NULL, &applied, &e);
	if (rc == -EPROTO || rc == -EIO) {
		PQfinish(conn);
		errbuf_set(err, "pg: %s", e.msg);
		return rc;
	}
	if (rc) {
		/* the lock not had in time, the connection lost: the sync
		 * goes on without (and says what it finds) */
		PQfinish(conn);
		log_warnx("database: not migrated at start: %s", e.msg);
		return 0;
	}
	if (!applied)
		log_debug("database: schema up to date (version %d)",
			  pgdb_latest());
	*out = conn;
	return 0;
}

/* Every routing row of the database on conn (synchronous: at start,
 * before edged serves), as pgsync's snapshot reads them: 0 with *out and
 * *version, or -errno with err. */
static int pgplane_fetch(PGconn *conn, struct pgm **out, uint64_t *version,
			 struct errbuf *err)
{
	PGresult *set[PGM_NSETS] = {NULL}, *res;
	char *sql = pgm_fetch_sql(conn, NULL, 0, true);
	bool have_version = false, failed = false;
	struct pgm *m = NULL;
	int k = 0, rc = -EIO;

	*out = NULL;
	if (!sql || !PQsendQuery(conn, sql)) {
		errbuf_set(err, "%s",
			   sql ? PQerrorMessage(conn) : "out of memory");
		free(sql);
		return sql ? -EIO : -ENOMEM;
	}
	free(sql);
	while ((res = PQgetResult(conn))) {
		ExecStatusType st = PQresultStatus(res);

		if (st == PGRES_FATAL_ERROR) {
			if (!failed)
				errbuf_set(err, "%s",
					   PQresultErrorMessage(res));
			failed = true;
		} else if (st == PGRES_TUPLES_OK && !have_version) {
			have_version = true;
			*version =
			    PQntuples(res) == 1
				? strtoull(PQgetvalue(res, 0, 0), NULL, 10)
				: 0;
		} else if (st == PGRES_TUPLES_OK && k < PGM_NSETS) {
			set[k++] = res;
			continue; /* kept */
		}
		PQclear(res);
	}
	if (!failed && k == PGM_NSETS) {
		rc = pgm_new(&m);
		if (rc == 0)
			rc = pgm_apply(m, set, NULL, 0, true);
		if (rc)
			errbuf_set(err,
				   "the rows were not the shape "
				   "expected (%s)",
				   strerror(-rc));
	} else if (!failed) {
		errbuf_set(err, "%d of %d row sets", k, PGM_NSETS);
	}
	for (k = 0; k < PGM_NSETS; k++)
		PQclear(set[k]);
	if (rc) {
		pgm_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

/* What edged starts from, read while it is root so that the TCP routes'
 * addresses are bound then: the database's rows when it answered (on
 * conn, which this closes), else the local snapshot's; the TCP routes
 * into p->tr. */
static void pgplane_initial(struct pgplane *p, PGconn *conn)
{
	const struct config *cfg = p->cfg;
	struct errbuf e = {""};
	struct tcproute_row *rows = NULL;
	size_t n = 0;
	int rc = -ENOENT;

	if (conn) {
		rc = pgplane_fetch(conn, &p->initial, &p->initial_version, &e);
		PQfinish(conn);
		if (rc)
			log_warnx("database: its rows not read at start (%s); "
				  "the sync reads them when it can",
				  e.msg);
	}
	if (rc && cfg->pg_snapshot[0]) {
		errbuf_clear(&e);
		if (pgm_new(&p->initial) == 0 &&
		    (rc = pgm_load(p->initial, cfg->pg_snapshot,
				   &p->initial_version, &e)) == 0) {
			p->initial_from_snapshot = true;
			log_note("database: serving the local snapshot %s "
				 "(change version %llu) until the database "
				 "answers",
				 cfg->pg_snapshot,
				 (unsigned long long)p->initial_version);
		} else if (rc != -ENOENT) {
			log_warnx("database: %s", e.msg);
		}
	}
	if (rc) {
		pgm_free(p->initial);
		p->initial = NULL;
		return;
	}
	if (pgm_tcp_rows(p->initial, &rows, &n) == 0)
		pgplane_tcp(p, rows, n);
	free(rows);
}

/* The addresses among the conninfo's host= and hostaddr= values (comma
 * lists; names and socket directories are not addresses). */
static void pgplane_conf_addrs(struct pgplane *p, const char *conninfo)
{
	PQconninfoOption *opts = PQconninfoParse(conninfo, NULL), *o;
	char *buf, *tok, *save;

	for (o = opts; o && o->keyword; o++) {
		if (!o->val || (strcmp(o->keyword, "host") != 0 &&
				strcmp(o->keyword, "hostaddr") != 0))
			continue;
		buf = strdup(o->val);
		for (tok = buf ? strtok_r(buf, ",", &save) : NULL; tok;
		     tok = strtok_r(NULL, ",", &save)) {
			struct cidr c;
			size_t i;

			if (cidr_parse_addr(tok, &c, NULL))
				continue;
			for (i = 0; i < p->n_conf; i++)
				if (cidr_equal(&p->keep[i], &c))
					break;
			if (i == p->n_conf && p->n_conf < PGXDP_KEEP_MAX)
				p->keep[p->n_conf++] = c;
		}
		free(buf);
	}
	PQconninfoFree(opts);
	p->n_keep = p->n_conf;
}

int pgplane_prepare(const struct config *cfg, const struct passwd *pw,
		    struct tcproute *tr, struct pgplane **out,
		    struct errbuf *err)
{
	struct pgplane *p = calloc(1, sizeof(*p));
	PGconn *conn = NULL;
	int rc;

	if (!p) {
		errbuf_set(err, "pg: out of memory");
		return -ENOMEM;
	}
	p->cfg = cfg;
	p->tr = tr;
	pgplane_conf_addrs(p, cfg->pg);
	rc = pgplane_migrate(cfg, &conn, err);
	if (rc == 0)
		pgplane_initial(p, conn);
	if (rc == 0)
		rc = pgxdp_new(cfg->pin_dir, &p->xdp);
	if (rc == 0 && cfg->pg_snapshot[0])
		rc = pgplane_snapshot_dir(cfg->pg_snapshot, pw, err);
	if (rc) {
		if (!err->msg[0])
			errbuf_set(err, "pg: %s", strerror(-rc));
		pgplane_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

static void pgplane_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pgplane *p = arg;
	struct pgsync_status st;
	struct pgxdp_stats xs;

	(void)fd;
	(void)what;
	/* the maps edge has pinned hold the database's rules */
	pgplane_keep(p);
	pgxdp_check(p->xdp);
	pgsync_status(p->sync, &st);
	pgxdp_stats(p->xdp, &xs);
	metrics_gauge_set(p->m.up, st.state == PGSYNC_UP);
	metrics_gauge_set(p->m.state, (int64_t)st.state);
	metrics_gauge_set(p->m.applied, (int64_t)st.applied_version);
	metrics_gauge_set(p->m.db, (int64_t)st.db_version);
	metrics_gauge_set(p->m.projects, (int64_t)st.projects);
	metrics_gauge_set(p->m.rules, (int64_t)xs.rules);
	metrics_gauge_set(p->m.duplicates, (int64_t)xs.duplicates);
	metrics_gauge_set(p->m.xdp_refused, (int64_t)xs.refused);
	metrics_gauge_set(p->m.xdp_over, (int64_t)xs.over);
	metrics_gauge_set(p->m.lag_ms, (int64_t)(st.last_apply_ns / 1000000));
#define PGPLANE_TO(c, v)                                                       \
	do {                                                                   \
		uint64_t cur_ = metrics_counter_get(c);                        \
		if ((v) > cur_)                                                \
			metrics_counter_add(c, (v)-cur_);                      \
	} while (0)
	PGPLANE_TO(p->m.changes, st.changes);
	PGPLANE_TO(p->m.snapshots, st.snapshots);
	PGPLANE_TO(p->m.reconnects, st.reconnects);
	PGPLANE_TO(p->m.errors, st.errors + p->refused);
	PGPLANE_TO(p->m.given_way, p->given_way);
	PGPLANE_TO(p->m.skipped[0], st.skipped.endpoints);
	PGPLANE_TO(p->m.skipped[1], st.skipped.domains);
	PGPLANE_TO(p->m.skipped[2], st.skipped.ip_rules);
	PGPLANE_TO(p->m.skipped[3], st.skipped.ids);
	PGPLANE_TO(p->m.skipped[4], st.skipped.tcp_routes + p->tcp_refused);
	PGPLANE_TO(p->m.skipped[5], st.skipped.health_checks);
	PGPLANE_TO(p->m.skipped[6], st.skipped.tls);
	PGPLANE_TO(p->m.skipped[7], st.skipped.send_proxy);
	PGPLANE_TO(p->m.skipped[8], st.skipped.env_rules);
	PGPLANE_TO(p->m.skipped[9], st.skipped.api_keys);
	PGPLANE_TO(p->m.skipped[10], p->chal_skipped);
	PGPLANE_TO(p->m.skipped[11], st.skipped.upstream);
#undef PGPLANE_TO
}

static int pgplane_metrics(struct pgplane *p, struct metrics *m)
{
	/* deployments.health_check: the deployment is served, without
	 * the check; deployments.tls: its https:// endpoints are not
	 * tried (pgmodel.h) */
	static const char *const tables[12] = {
	    "endpoints",	  "domains",
	    "ip_rules",		  "ids",
	    "tcp_routes",	  "deployments.health_check",
	    "deployments.tls",	  "deployments.send_proxy",
	    "environments.rules", "api_keys",
	    "challenge_keys",	  "deployments.upstream"};
	const char *lab[3] = {"table", NULL, NULL};
	int i;

	p->m.up = metrics_gauge_new(
	    m, "edge_db_up",
	    "1 while the database connection is up and in step.", NULL);
	p->m.state = metrics_gauge_new(
	    m, "edge_db_state",
	    "The sync's state: 0 connecting, 1 syncing, 2 up, 3 down "
	    "(serving the last table).",
	    NULL);
	p->m.applied = metrics_gauge_new(
	    m, "edge_db_applied_version",
	    "The database change version the route table holds.", NULL);
	p->m.db = metrics_gauge_new(
	    m, "edge_db_version",
	    "The newest change version the database has shown.", NULL);
	p->m.projects = metrics_gauge_new(m, "edge_db_projects",
					  "Projects from the database.", NULL);
	p->m.rules = metrics_gauge_new(
	    m, "edge_db_xdp_rules",
	    "The database's IP rules in this host's XDP maps.", NULL);
	p->m.duplicates = metrics_gauge_new(
	    m, "edge_db_xdp_duplicates",
	    "The database's IP rules left out of the XDP maps because "
	    "another row has their prefix (a block before an allow, then "
	    "the lowest id).",
	    NULL);
	p->m.xdp_refused = metrics_gauge_new(
	    m, "edge_db_xdp_refused",
	    "The database's block rules left out of the XDP maps because "
	    "they would drop this host's packets from the database.",
	    NULL);
	p->m.xdp_over = metrics_gauge_new(
	    m, "edge_db_xdp_over",
	    "The database's IP rules left out of the XDP maps because the "
	    "maps have no room left for them (logged).",
	    NULL);
	p->m.lag_ms = metrics_gauge_new(
	    m, "edge_db_apply_ms",
	    "Milliseconds from the latest change's notification to its "
	    "route table.",
	    NULL);
	p->m.changes = metrics_counter_new(
	    m, "edge_db_changes_total",
	    "Fetches from the database applied, snapshots included.", NULL);
	p->m.snapshots =
	    metrics_counter_new(m, "edge_db_snapshots_total",
				"Snapshots of every row applied.", NULL);
	p->m.reconnects = metrics_counter_new(
	    m, "edge_db_reconnects_total", "Database connections lost.", NULL);
	p->m.errors = metrics_counter_new(
	    m, "edge_db_errors_total",
	    "Queries that failed and changes the route writer refused.", NULL);
	p->m.given_way = metrics_counter_new(
	    m, "edge_db_conflicts_total",
	    "Names from the database left out because the configuration "
	    "file claims them.",
	    NULL);
	for (i = 0; i < 12; i++) {
		lab[1] = tables[i];
		p->m.skipped[i] = metrics_counter_new(
		    m, "edge_db_rows_skipped_total",
		    "Database rows skipped because a value did not parse "
		    "(deployments.health_check: deployments served without "
		    "their refused health check; deployments.tls: their "
		    "https:// endpoints not tried; deployments.send_proxy: "
		    "the deployment skipped; environments.rules: an "
		    "environment whose headers, redirects, unmatched, "
		    "compression, inject, challenge or jwt did not parse, "
		    "skipped; api_keys: that key left out; "
		    "deployments.upstream: deployments served without their "
		    "refused retry, circuit, request_total, hedge or "
		    "max_inflight).",
		    lab);
		if (!p->m.skipped[i])
			return -ENOMEM;
	}
	return p->m.up && p->m.state && p->m.applied && p->m.db &&
		       p->m.projects && p->m.rules && p->m.duplicates &&
		       p->m.xdp_refused && p->m.xdp_over && p->m.lag_ms &&
		       p->m.changes && p->m.snapshots && p->m.reconnects &&
		       p->m.errors && p->m.given_way
		   ? 0
		   : -ENOMEM;
}

int pgplane_start(struct pgplane *p, struct event_base *base,
		  struct route_writer *w, struct tcproute *tr,
		  struct wake *wake, struct metrics *m, struct errbuf *err)
{
	struct pgsync_cfg sc = {
	    .conninfo = p->cfg->pg,
	    .host_name = p->cfg->host_name,
	    .version = EDGE_VERSION,
	    .snapshot = p->cfg->pg_snapshot[0] ? p->cfg->pg_snapshot : NULL,
	    .initial = p->initial,
	    .initial_version = p->initial_version,
	    .initial_from_snapshot = p->initial_from_snapshot,
	    .acme_challenges = p->acme != NULL,
	};
	struct timeval tv = {1, 0};
	int rc;

	p->w = w;
	p->wake = wake;
	p->tr = tr;
	/* edged runs as its user now: the rows' tls files may be read */
	if (pgm_tls_start(p->initial)) {
		errbuf_set(err, "pg: out of memory");
		return -ENOMEM;
	}
	p->initial = NULL; /* the sync's */
	if (m && pgplane_metrics(p, m)) {
		errbuf_set(err, "pg: out of memory");
		return -ENOMEM;
	}
	rc = pgsync_new(base, &sc, &pgplane_ops, p, &p->sync, err);
	if (rc)
		return rc;
	/* the rows read at start went in at once; from now on the rules are
	 * written in slices on the loop */
	if (pgxdp_start(p->xdp, base)) {
		errbuf_set(err, "pg: out of memory");
		return -ENOMEM;
	}
	if (wake) {
		char e[256] = "";

		rc = pgwake_new(base, p->cfg->pg, p->cfg->host_name, wake,
				&p->wakeq, e, sizeof(e));
		if (rc) {
			errbuf_set(err, "pg: %s", e[0] ? e : strerror(-rc));
			return rc;
		}
	}
	p->tick = event_new(base, -1, EV_PERSIST, pgplane_tick_cb, p);
	if (!p->tick || event_add(p->tick, &tv)) {
		errbuf_set(err, "pg: out of memory");
		return -ENOMEM;
	}
	pgplane_tick_cb(-1, 0, p);
	return 0;
}

void pgplane_file_changed(struct pgplane *p)
{
	if (p && p->sync)
		pgsync_republish(p->sync);
}

uint64_t pgplane_applied_version(const struct pgplane *p)
{
	struct pgsync_status st;

	if (!p || !p->sync)
		return 0;
	pgsync_status(p->sync, &st);
	return st.applied_version;
}

json_t *pgplane_status_json(const struct pgplane *p)
{
	struct pgsync_status st;
	struct pgxdp_stats xs;

	if (!p->sync)
		return json_pack("{s:s}", "state", "starting");
	pgsync_status(p->sync, &st);
	pgxdp_stats(p->xdp, &xs);
	return json_pack(
	    "{s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:I, "
	    "s:I, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
	    "s:I}",
	    "state", pgsync_state_name(st.state), "from_local_snapshot",
	    st.booted_from_snapshot, "applied_version",
	    (json_int_t)st.applied_version, "database_version",
	    (json_int_t)st.db_version, "changes", (json_int_t)st.changes,
	    "reconnects", (json_int_t)st.reconnects, "projects",
	    (json_int_t)st.projects, "state_for_s",
	    (json_int_t)((clk_now_ns() - st.since_ns) / 1000000000ull),
	    "last_apply_ms", (json_int_t)(st.last_apply_ns / 1000000),
	    "last_apply_us", (json_int_t)(st.last_apply_ns / 1000),
	    "last_error", st.last_error, "rows_skipped",
	    (json_int_t)(st.skipped.endpoints + st.skipped.domains +
			 st.skipped.ip_rules + st.skipped.ids +
			 st.skipped.tcp_routes + p->tcp_refused +
			 st.skipped.health_checks + st.skipped.tls +
			 st.skipped.send_proxy + st.skipped.env_rules +
			 st.skipped.api_keys + p->chal_skipped +
			 st.skipped.upstream),
	    "conflicts", (json_int_t)p->given_way, "xdp_attached", xs.attached,
	    "xdp_rules", (json_int_t)xs.rules, "xdp_shadowed",
	    (json_int_t)xs.shadowed, "late_changes", (json_int_t)st.late,
	    "xdp_duplicates", (json_int_t)xs.duplicates, "xdp_refused",
	    (json_int_t)xs.refused, "xdp_over", (json_int_t)xs.over,
	    "xdp_reopens", (json_int_t)xs.reopens, "certificate_fetches",
	    (json_int_t)st.cert_fetches, "acme_challenge_fetches",
	    (json_int_t)st.acme_fetches, "acme_challenges",
	    (json_int_t)st.acme_rows, "acme_challenges_skipped",
	    (json_int_t)st.acme_skipped);
}

void pgplane_free(struct pgplane *p)
{
	size_t i;

	if (!p)
		return;
	if (p->tick)
		event_free(p->tick);
	pgm_free(p->initial);
	pgsync_free(p->sync);
	free(p->chal_bad);
	for (i = 0; i < p->n_hc; i++)
		pgplane_hc_clear(&p->hc[i]);
	free(p->hc);
	pgplane_refused_clear(p);
	pgwake_free(p->wakeq);
	pgxdp_free(p->xdp);
	free(p);
}
