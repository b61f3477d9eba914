// SPDX-License-Identifier: BSD-2-Clause
/*
 * tcproute.c - the TCP routes of every source merged and checked, given
 * slots, and their listen addresses opened and closed on every worker
 * (tcproute.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "listener.h"
#include "metrics.h"
#include "sockreg.h"
#include "tcproute.h"
#include "worker.h"

/* A listen address of the list, and its listeners. */
struct tcproute_addr {
	struct config_addr a;
	uint64_t id; /* its listeners' on the workers; 0: none open */
	int err;     /* the last try's errno (0: listening or not tried) */
	bool tried;  /* a bind was tried (err says how it went) */
	bool file;   /* a file route's: failing at start is fatal */
	bool want;   /* scratch: a route of the list has it */
	bool pp;     /* its listeners' proxy_protocol (a.proxy_protocol: the
			routes') */
};

struct tcproute {
	const struct config *cfg;
	struct worker_shared *sh;
	/* the list: the file's routes (slot i the i-th), then the
	 * database's by id */
	struct route_tcp *v;
	size_t n, n_file;
	struct config_addr *file_addr; /* the file's routes' addresses */
	struct tcproute_row *db;       /* the rows last set */
	size_t n_db;
	bool dirty; /* the list changed and the route writer has not taken
		       it yet */
	/* listen addresses, sorted by text */
	struct tcproute_addr *addrs;
	size_t n_addrs, cap_addrs;
	uint64_t next_id;
	struct worker **w;
	unsigned nw;
	struct {
		struct metrics_gauge *file, *db, *listening, *failed;
		struct metrics_counter *failures;
	} m;
};

int tcproute_new(const struct config *cfg, struct worker_shared *sh,
		 struct tcproute **out)
{
	struct tcproute *tr = calloc(1, sizeof(*tr));
	size_t i;

	if (!tr)
		return -ENOMEM;
	tr->cfg = cfg;
	tr->sh = sh;
	tr->n_file = tr->n = cfg->n_tcp_routes;
	tr->v = calloc(tr->n + 1, sizeof(*tr->v));
	tr->file_addr = calloc(tr->n + 1, sizeof(*tr->file_addr));
	if (!tr->v || !tr->file_addr) {
		tcproute_free(tr);
		return -ENOMEM;
	}
	for (i = 0; i < tr->n; i++) {
		const struct config_tcp_route *c = &cfg->tcp_routes[i];
		struct route_tcp *r = &tr->v[i];

		snprintf(r->listen, sizeof(r->listen), "%s", c->listen.text);
		snprintf(r->sni, sizeof(r->sni), "%s", c->sni ? c->sni : "");
		snprintf(r->env_id, sizeof(r->env_id), "%s", c->environment);
		r->src = ROUTE_SRC_FILE;
		r->slot = (unsigned)i;
		r->proxy_protocol = c->listen.proxy_protocol;
		r->send_proxy = c->send_proxy;
		tr->file_addr[i] = c->listen;
	}
	tr->dirty = true;
	*out = tr;
	return 0;
}

void tcproute_free(struct tcproute *tr)
{
	if (!tr)
		return;
	free(tr->v);
	free(tr->file_addr);
	free(tr->db);
	free(tr->addrs);
	free(tr);
}

/* ---- the database's rows ------------------------------------------------ */

/* A route already in the merged list, as the checks see it. */
struct tcproute_have {
	const struct config_addr *a;
	const char *sni; /* "" plain */
	char what[96];	 /* "the file's tcp_routes[2]", "tcp_routes row 7" */
};

/*
 * Whether route (a, sni) may live beside route h: the same address, both
 * with sni and for other names; other addresses that do not overlap.
 * 0, or -EEXIST with why.
 */
static int tr_clash(const struct config_addr *a, const char *sni,
		    const struct tcproute_have *h, char *why, size_t len)
{
	if (strcmp(a->text, h->a->text) == 0) {
		if (sni[0] && h->sni[0] && strcmp(sni, h->sni) &&
		    a->proxy_protocol != h->a->proxy_protocol) {
			snprintf(why, len,
				 "%s is also %s, whose proxy_protocol is %s "
				 "(the routes of an address share its "
				 "connections)",
				 a->text, h->what,
				 h->a->proxy_protocol ? "true" : "false");
			return -EEXIST;
		}
		if (sni[0] && h->sni[0] && strcmp(sni, h->sni))
			return 0;
		if (sni[0] && h->sni[0])
			snprintf(why, len, "%s has sni \"%s\" twice (also %s)",
				 a->text, sni, h->what);
		else
			snprintf(why, len,
				 "%s is also %s, and only TLS passthrough "
				 "routes (sni) share a listen address",
				 a->text, h->what);
		return -EEXIST;
	}
	if (!config_addr_overlaps(a, h->a))
		return 0;
	snprintf(why, len,
		 "%s takes the port of %s (%s): a wildcard and a specific "
		 "address on one port would share its connections",
		 a->text, h->what, h->a->text);
	return -EEXIST;
}

/* The settings' listen addresses that a route's must stay away from. */
static int tr_settings_clash(const struct config *cfg,
			     const struct config_addr *a, char *why, size_t len)
{
	struct tcproute_have h = {NULL, "", ""};
	size_t j;

	for (j = 0; j <= cfg->n_listen + cfg->tls.n_listen; j++) {
		if (j < cfg->n_listen) {
			h.a = &cfg->listen[j];
			snprintf(h.what, sizeof(h.what), "listen[%zu]", j);
		} else if (j < cfg->n_listen + cfg->tls.n_listen) {
			h.a = &cfg->tls.listen[j - cfg->n_listen];
			snprintf(h.what, sizeof(h.what), "tls.listen[%zu]",
				 j - cfg->n_listen);
		} else {
			h.a = &cfg->admin_listen;
			snprintf(h.what, sizeof(h.what), "admin_listen");
		}
		if (strcmp(a->text, h.a->text) == 0) {
			snprintf(why, len, "%s is also %s", a->text, h.what);
			return -EEXIST;
		}
		if (tr_clash(a, "", &h, why, len))
			return -EEXIST;
	}
	return 0;
}

/* The slot the database's route (listen, sni) had in the list, or -1. */
static int tr_old_slot(const struct tcproute *tr, const char *listen,
		       const char *sni)
{
	size_t i;

	for (i = tr->n_file; i < tr->n; i++)
		if (strcmp(tr->v[i].listen, listen) == 0 &&
		    strcmp(tr->v[i].sni, sni) == 0)
			return (int)tr->v[i].slot;
	return -1;
}

/* A slot for a new route: none of used's, one that counts no connection
 * (a route gone may still have some open) if there is one. */
static unsigned tr_new_slot(const struct tcproute *tr,
			    const unsigned char *used)
{
	unsigned s, any = ROUTE_TCP_MAX;

	for (s = 0; s < ROUTE_TCP_MAX; s++) {
		if (used[s])
			continue;
		if (!tr->sh || atomic_load(&tr->sh->tcp_open[s]) == 0)
			return s;
		if (any == ROUTE_TCP_MAX)
			any = s;
	}
	return any; /* callers keep the count below ROUTE_TCP_MAX */
}

static void tr_refuse(struct tcproute_counts *c, const struct tcproute_row *r,
		      const char *why)
{
	c->refused++;
	log_warnx_rl("database: tcp_routes row %lld (%s%s%s): %s; refused",
		     (long long)r->id, r->listen, r->sni[0] ? " sni " : "",
		     r->sni, why);
}

int tcproute_set_db(struct tcproute *tr, const struct tcproute_row *v, size_t n,
		    struct tcproute_counts *c)
{
	struct route_tcp *nv = NULL;
	struct config_addr *na = NULL;
	struct tcproute_have *have = NULL;
	struct tcproute_row *db = NULL;
	unsigned char used[ROUTE_TCP_MAX];
	size_t i, j, nn, nh = 0;
	char why[512];
	int rc = -ENOMEM;

	memset(c, 0, sizeof(*c));
	if (!tr->dirty && n == tr->n_db &&
	    (n == 0 || memcmp(v, tr->db, n * sizeof(*v)) == 0))
		return 0;
	nv = calloc(tr->n_file + n + 1, sizeof(*nv));
	na = calloc(n + 1, sizeof(*na));
	have = calloc(tr->n_file + n + 1, sizeof(*have));
	db = n ? malloc(n * sizeof(*db)) : NULL;
	if (!nv || !na || !have || (n && !db))
		goto out;
	if (n)
		memcpy(db, v, n * sizeof(*db));
	memcpy(nv, tr->v, tr->n_file * sizeof(*nv));
	for (i = 0; i < tr->n_file; i++, nh++) {
		have[nh].a = &tr->file_addr[i];
		have[nh].sni = tr->v[i].sni;
		snprintf(have[nh].what, sizeof(have[nh].what),
			 "the file's tcp_routes[%zu]", i);
	}
	nn = tr->n_file;
	for (i = 0; i < n; i++) {
		const struct tcproute_row *r = &v[i];
		struct config_addr *a = &na[nn - tr->n_file];
		struct errbuf e = {""};
		int clash = 0;

		if (config_addr_parse(r->listen, a, &e)) {
			tr_refuse(c, r, e.msg);
			continue;
		}
		a->proxy_protocol = r->proxy_protocol;
		if (tr_settings_clash(tr->cfg, a, why, sizeof(why))) {
			tr_refuse(c, r, why);
			continue;
		}
		for (j = 0; j < nh && !clash; j++)
			clash = tr_clash(a, r->sni, &have[j], why, sizeof(why));
		if (clash && j <= tr->n_file) {
			c->conflicts++;
			log_warnx_rl("database: tcp_routes row %lld (%s%s%s): "
				     "%s: left out of the database's routes "
				     "(the file's route stays)",
				     (long long)r->id, r->listen,
				     r->sni[0] ? " sni " : "", r->sni, why);
			continue;
		}
		if (clash) {
			tr_refuse(c, r, why);
			continue;
		}
		if (nn >= ROUTE_TCP_MAX) {
			snprintf(why, sizeof(why),
				 "more than %d TCP routes in all (the file's "
				 "and the database's)",
				 ROUTE_TCP_MAX);
			tr_refuse(c, r, why);
			continue;
		}
		snprintf(nv[nn].listen, sizeof(nv[nn].listen), "%s", a->text);
		snprintf(nv[nn].sni, sizeof(nv[nn].sni), "%s", r->sni);
		snprintf(nv[nn].env_id, sizeof(nv[nn].env_id), "%s", r->env_id);
		nv[nn].src = ROUTE_SRC_DB;
		nv[nn].proxy_protocol = r->proxy_protocol;
		nv[nn].send_proxy = r->send_proxy;
		have[nh].a = a;
		have[nh].sni = nv[nn].sni;
		snprintf(have[nh].what, sizeof(have[nh].what),
			 "tcp_routes row %lld", (long long)r->id);
		nh++;
		nn++;
	}
	/* slots: the file's are theirs; a database route keeps the one it
	 * had; a new one takes a free one */
	memset(used, 0, sizeof(used));
	for (i = 0; i < tr->n_file; i++)
		used[i] = 1;
	for (i = tr->n_file; i < nn; i++) {
		int s = tr_old_slot(tr, nv[i].listen, nv[i].sni);

		nv[i].slot = s >= 0 ? (unsigned)s : ROUTE_TCP_MAX;
		if (s >= 0)
			used[s] = 1;
	}
	for (i = tr->n_file; i < nn; i++)
		if (nv[i].slot == ROUTE_TCP_MAX) {
			nv[i].slot = tr_new_slot(tr, used);
			used[nv[i].slot] = 1;
		}
	rc = tr->dirty || nn != tr->n ||
	     memcmp(nv, tr->v, nn * sizeof(*nv)) != 0;
	free(tr->v);
	tr->v = nv;
	tr->n = nn;
	nv = NULL;
	free(tr->db);
	tr->db = db;
	tr->n_db = n;
	db = NULL;
	if (rc)
		tr->dirty = true;
out:
	free(nv);
	free(na);
	free(have);
	free(db);
	return rc;
}

void tcproute_list(const struct tcproute *tr, struct route_tcp_list *out)
{
	out->v = tr->v;
	out->n = tr->n;
}

void tcproute_applied(struct tcproute *tr, bool ok)
{
	tr->dirty = !ok;
}

/* ---- the file's routes ------------------------------------------------- */

int tcproute_reload(struct tcproute *tr, const struct config *cfg,
		    struct route_tcp **undo)
{
	size_t i, j;

	*undo = malloc((tr->n_file + 1) * sizeof(**undo));
	if (!*undo)
		return -ENOMEM;
	memcpy(*undo, tr->v, tr->n_file * sizeof(**undo));
	for (i = 0; i < tr->n_file; i++) {
		struct route_tcp *r = &tr->v[i];

		for (j = 0; j < cfg->n_tcp_routes; j++) {
			const struct config_tcp_route *c = &cfg->tcp_routes[j];

			if (strcmp(c->listen.text, r->listen) == 0 &&
			    strcmp(c->sni ? c->sni : "", r->sni) == 0) {
				snprintf(r->env_id, sizeof(r->env_id), "%s",
					 c->environment);
				r->send_proxy = c->send_proxy;
			}
		}
	}
	return 0;
}

void tcproute_undo(struct tcproute *tr, struct route_tcp *undo)
{
	if (!undo)
		return;
	memcpy(tr->v, undo, tr->n_file * sizeof(*undo));
	free(undo);
}

bool tcproute_file_moved(const struct tcproute *tr, const struct config *cfg)
{
	size_t i, j;

	if (cfg->n_tcp_routes != tr->n_file)
		return true;
	for (i = 0; i < cfg->n_tcp_routes; i++) {
		const struct config_tcp_route *c = &cfg->tcp_routes[i];

		for (j = 0; j < tr->n_file; j++)
			if (strcmp(c->listen.text, tr->v[j].listen) == 0 &&
			    strcmp(c->sni ? c->sni : "", tr->v[j].sni) == 0 &&
			    c->listen.proxy_protocol == tr->v[j].proxy_protocol)
				break;
		if (j == tr->n_file)
			return true;
	}
	return false;
}

/* ---- listeners ----------------------------------------------------------- */

void tcproute_workers(struct tcproute *tr, struct worker **w, unsigned nw)
{
	tr->w = w;
	tr->nw = nw;
}

int tcproute_metrics(struct tcproute *tr, struct metrics *m)
{
	static const char *const file[] = {"source", "file", NULL};
	static const char *const db[] = {"source", "database", NULL};
	static const char *const up[] = {"state", "listening", NULL};
	static const char *const down[] = {"state", "failed", NULL};
	static const char routes[] =
	    "TCP and TLS passthrough routes in the route table, by the "
	    "source that defines them.";
	static const char addrs[] =
	    "Listen addresses of the TCP routes: listened on by every "
	    "worker, or not (the bind failed: edgectl routes says why).";

	tr->m.file = metrics_gauge_new(m, "edge_tcp_routes", routes, file);
	tr->m.db = metrics_gauge_new(m, "edge_tcp_routes", routes, db);
	tr->m.listening =
	    metrics_gauge_new(m, "edge_tcp_listen_addresses", addrs, up);
	tr->m.failed =
	    metrics_gauge_new(m, "edge_tcp_listen_addresses", addrs, down);
	tr->m.failures = metrics_counter_new(
	    m, "edge_tcp_listen_failures_total",
	    "Binds of a TCP route's listen address that failed (one per "
	    "address per try: at start, then at each change applied).",
	    NULL);
	return tr->m.file && tr->m.db && tr->m.listening && tr->m.failed &&
		       tr->m.failures
		   ? 0
		   : -ENOMEM;
}

/* The position of listen in tr->addrs, or where it would go. */
static size_t tr_addr_find(const struct tcproute *tr, const char *listen,
			   bool *found)
{
	size_t lo = 0, hi = tr->n_addrs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(tr->addrs[mid].a.text, listen);

		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

/* Mark route r's address wanted, adding it. 0 or -ENOMEM. */
static int tr_addr_want(struct tcproute *tr, const struct route_tcp *r)
{
	struct tcproute_addr *x;
	bool found;
	size_t at = tr_addr_find(tr, r->listen, &found);

	if (!found) {
		if (tr->n_addrs == tr->cap_addrs) {
			size_t cap = tr->cap_addrs ? tr->cap_addrs * 2 : 16;

			x = realloc(tr->addrs, cap * sizeof(*x));
			if (!x)
				return -ENOMEM;
			tr->addrs = x;
			tr->cap_addrs = cap;
		}
		memmove(&tr->addrs[at + 1], &tr->addrs[at],
			(tr->n_addrs - at) * sizeof(*tr->addrs));
		tr->n_addrs++;
		x = &tr->addrs[at];
		memset(x, 0, sizeof(*x));
		if (config_addr_parse(r->listen, &x->a, NULL)) {
			/* cannot be (the list holds canonical text) */
			snprintf(x->a.text, sizeof(x->a.text), "%s", r->listen);
			x->err = EINVAL;
			x->tried = true;
		}
	}
	tr->addrs[at].want = true;
	tr->addrs[at].a.proxy_protocol = r->proxy_protocol;
	if (r->src == ROUTE_SRC_FILE)
		tr->addrs[at].file = true;
	return 0;
}

/* Close x's listeners on every worker (their connections go on). */
static void tr_addr_close(struct tcproute *tr, struct tcproute_addr *x)
{
	unsigned i;
	int rc;

	for (i = 0; x->id && i < tr->nw; i++) {
		rc = listener_post_close(tr->w[i], x->id);
		if (rc)
			log_warnx("tcp routes: worker %u: cannot close its "
				  "listener on %s: %s",
				  i, x->a.text, strerror(-rc));
	}
	if (x->id) {
		sockreg_drop(SOCKREG_TCP, x->id);
		log_note("tcp routes: %s closed (no route has it any more)",
			 x->a.text);
	}
	x->id = 0;
}

/* Bind x once per worker and hand each worker its socket. 0, or -errno
 * (x->err) with nothing left open. */
static int tr_addr_open(struct tcproute *tr, struct tcproute_addr *x,
			struct errbuf *err)
{
	int *fds = calloc(tr->nw + 1, sizeof(*fds));
	unsigned i, k = 0, posted = 0;
	uint64_t id = ++tr->next_id;
	int rc = 0;

	x->tried = true;
	if (!fds) {
		rc = -ENOMEM;
		errbuf_set(err, "listen %s: out of memory", x->a.text);
		goto out;
	}
	/* a predecessor's sockets first (sockreg.h); else a new address
	 * for this process: nothing else may listen there */
	for (k = 0; k < tr->nw; k++)
		if ((fds[k] = sockreg_take(SOCKREG_TCP, x->a.text)) < 0)
			break;
	if (k == 0)
		rc = listener_probe(&x->a, err);
	if (rc)
		goto out;
	for (; k < tr->nw && rc == 0; k++)
		rc = listener_socket(&x->a, &fds[k], err);
	if (rc) {
		k--; /* fds[k] failed */
		goto out;
	}
	for (i = 0; i < tr->nw && rc == 0; i++) {
		rc = sockreg_add(SOCKREG_TCP, x->a.text, id, fds[i]);
		if (rc) {
			sockreg_drop(SOCKREG_TCP, id);
			errbuf_set(err, "listen %s: %s", x->a.text,
				   strerror(-rc));
			goto out;
		}
	}
	for (posted = 0; posted < tr->nw && rc == 0; posted++) {
		rc = listener_post_open(tr->w[posted], fds[posted], x->a.text,
					id, x->a.proxy_protocol);
		if (rc)
			errbuf_set(err, "listen %s: worker %u: %s", x->a.text,
				   posted, strerror(-rc));
	}
	if (rc) {
		posted--; /* that one was not */
		sockreg_drop(SOCKREG_TCP, id);
		for (i = 0; i < posted; i++)
			listener_post_close(tr->w[i], id);
		for (i = posted; i < k; i++)
			close(fds[i]);
		k = 0;
		goto out;
	}
	k = 0; /* the workers' now */
	x->id = id;
	x->pp = x->a.proxy_protocol;
	/* a predecessor with more workers: its extra sockets to the last
	 * worker, so none closes with connections waiting in it */
	while ((fds[0] = sockreg_take(SOCKREG_TCP, x->a.text)) >= 0) {
		int erc = sockreg_add(SOCKREG_TCP, x->a.text, id, fds[0]);

		if (erc == 0)
			erc = listener_post_open(tr->w[tr->nw - 1], fds[0],
						 x->a.text, id,
						 x->a.proxy_protocol);
		if (erc)
			close(fds[0]);
		if (erc)
			log_warnx("listen %s: the running edged's extra "
				  "socket: %s",
				  x->a.text, strerror(-erc));
	}
out:
	for (i = 0; i < k; i++)
		close(fds[i]);
	free(fds);
	x->err = -rc;
	return rc;
}

/* x's routes now say otherwise of proxy_protocol than its listeners:
 * each worker's listener told (a worker that cannot be is tried again at
 * the next tcproute_listen). */
static void tr_addr_pp(struct tcproute *tr, struct tcproute_addr *x)
{
	unsigned i;
	int rc = 0;

	for (i = 0; i < tr->nw; i++)
		if (listener_post_pp(tr->w[i], x->id, x->a.proxy_protocol))
			rc = -1;
	if (rc) {
		log_warnx("tcp routes: %s: cannot tell every worker of "
			  "proxy_protocol %s yet",
			  x->a.text, x->a.proxy_protocol ? "true" : "false");
		return;
	}
	x->pp = x->a.proxy_protocol;
	log_note("tcp routes: %s: proxy_protocol %s from now on", x->a.text,
		 x->pp ? "true" : "false");
}

int tcproute_listen(struct tcproute *tr, bool start, struct errbuf *err)
{
	size_t i, j, up = 0;
	int rc = 0;

	for (i = 0; i < tr->n_addrs; i++)
		tr->addrs[i].want = false;
	for (i = 0; i < tr->n; i++)
		if (tr_addr_want(tr, &tr->v[i]))
			log_warnx("tcp routes: out of memory");
	for (i = j = 0; i < tr->n_addrs; i++) {
		struct tcproute_addr *x = &tr->addrs[i];

		if (!x->want) {
			tr_addr_close(tr, x);
			continue;
		}
		if (!x->id && tr->nw) {
			struct errbuf e = {""};

			if (tr_addr_open(tr, x, &e) == 0 && start) {
				log_debug("tcp routes: listening on %s",
					  x->a.text);
			} else if (x->id) {
				log_note("tcp routes: listening on %s",
					 x->a.text);
			} else {
				metrics_counter_add(tr->m.failures, 1);
				if (start && x->file && rc == 0) {
					rc = -x->err;
					errbuf_set(err, "%s", e.msg);
				} else {
					log_warnx("tcp routes: %s: not "
						  "listening (its routes wait "
						  "for the next change)",
						  e.msg);
				}
			}
		}
		if (x->id && x->pp != x->a.proxy_protocol)
			tr_addr_pp(tr, x);
		if (x->id)
			up++;
		tr->addrs[j++] = *x;
	}
	tr->n_addrs = j;
	if (tr->sh)
		atomic_store(&tr->sh->tcp_addrs, up);
	metrics_gauge_set(tr->m.listening, (int64_t)up);
	metrics_gauge_set(tr->m.failed, (int64_t)(tr->n_addrs - up));
	metrics_gauge_set(tr->m.file, (int64_t)tr->n_file);
	metrics_gauge_set(tr->m.db, (int64_t)(tr->n - tr->n_file));
	return rc;
}

bool tcproute_listening(const struct tcproute *tr, const char *listen,
			const char **why)
{
	bool found;
	size_t at = tr_addr_find(tr, listen, &found);

	*why = "";
	if (!found)
		return false;
	if (tr->addrs[at].id)
		return true;
	if (tr->addrs[at].tried && tr->addrs[at].err)
		*why = strerror(tr->addrs[at].err);
	return false;
}

void tcproute_stats(const struct tcproute *tr, size_t *file, size_t *db,
		    size_t *listening, size_t *failed)
{
	size_t i, up = 0;

	for (i = 0; i < tr->n_addrs; i++)
		up += tr->addrs[i].id != 0;
	*file = tr->n_file;
	*db = tr->n - tr->n_file;
	*listening = up;
	*failed = tr->n_addrs - up;
}
