/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tcproute.h - the TCP routes of every source together (plain TCP and
 * TLS passthrough routes): the configuration file's tcp_routes, whose
 * addresses are fixed at start (a reload changes their environments),
 * and the database's tcp_routes rows (pgplane.h, at every change),
 * checked against each other and the settings, each given a slot
 * (route.h), handed to the route writer as one list; and their listen
 * addresses opened and closed on every worker as routes come and go.
 *
 * The database's rows are checked as the file's routes are, across rows
 * too: a row whose address is an HTTP listen address or admin_listen, or
 * takes one's port through a wildcard (config_addr_overlaps), a second
 * route on an address with a plain route, a (listen, sni) twice, an
 * address that overlaps another route's: refused alone (the first row by
 * id keeps what it claims), logged and counted; a row that clashes so
 * with the file's routes gives way to them (logged, counted as a
 * conflict). A database row with sni may join a TLS passthrough address
 * of the file's with a name of its own. At most ROUTE_TCP_MAX routes in
 * all: the file's first, then the database's by id; a row past the limit
 * is refused and counted.
 *
 * Listeners: every address that a route of the list has is listened on
 * by every worker (SO_REUSEPORT). The sockets are made and bound here, on
 * the control loop (as at start, where edged is still root), and handed
 * to the workers through their mailboxes (listener_post_open); an address
 * whose last route went is closed the same way (listener_post_close), its
 * open connections going on. A bind that fails (EACCES for a port below
 * 1024 once edged runs as its user, EADDRINUSE, EADDRNOTAVAIL) leaves the
 * address not listening, logged and counted, and is tried again at the
 * next tcproute_listen (every change applied, every resync); it never
 * stops another address.
 *
 * Control loop only.
 */
#ifndef EDGE_TCPROUTE_H
#define EDGE_TCPROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "log.h"
#include "route.h"

struct metrics;
struct tcproute;
struct worker;
struct worker_shared;

/* A database row as the model read it, its values checked one by one
 * (pgmodel.c): listen parsed and in canonical form, sni checked and
 * lowercased ("" for NULL). */
struct tcproute_row {
	int64_t id;
	char listen[CONFIG_ADDR_STR_MAX];
	char sni[ROUTE_SNI_MAX + 1];
	char env_id[CONFIG_ID_MAX + 1];
	bool proxy_protocol; /* its connections begin with a PROXY header */
	enum config_send_proxy send_proxy; /* INHERIT for NULL */
};

/* What a tcproute_set_db refused: rows that break the rules, and rows
 * that gave way to the file's routes. */
struct tcproute_counts {
	uint64_t refused, conflicts;
};

/* The routes of cfg's tcp_routes (slot i: the i-th), cfg being the
 * settings edged started with (kept: its listen and admin_listen are what
 * the database's rows are checked against); sh's tcp_open tells which
 * slots still count connections (not given out again while they do), its
 * tcp_addrs is kept. 0 and *out, or -ENOMEM. */
int tcproute_new(const struct config *cfg, struct worker_shared *sh,
		 struct tcproute **out);
void tcproute_free(struct tcproute *tr);

/*
 * The database's rows are v[0..n) (sorted by id) from now on: checked,
 * merged after the file's routes. Returns 1 when the list changed (give
 * it to the route writer, then tcproute_applied), 0 when it is the same
 * (rows that did not change: nothing is logged or counted again), or
 * -ENOMEM (nothing changed). *c gets what was refused.
 */
int tcproute_set_db(struct tcproute *tr, const struct tcproute_row *v, size_t n,
		    struct tcproute_counts *c);

/* The list as it is (valid until the next change of tr). */
void tcproute_list(const struct tcproute *tr, struct route_tcp_list *out);

/* Whether the route writer took the list: when not, the next
 * tcproute_set_db says it changed whatever the rows. */
void tcproute_applied(struct tcproute *tr, bool ok);

/*
 * A reload: the file's routes take the environments cfg's routes on the
 * same listen address and sni name (a route cfg no longer has keeps its
 * environment; addresses added or changed wait for the next start:
 * tcproute_file_moved). *undo (malloc'd) gives the old ones back with
 * tcproute_undo when the reload is refused; free it otherwise. 0 or
 * -ENOMEM (nothing changed).
 */
int tcproute_reload(struct tcproute *tr, const struct config *cfg,
		    struct route_tcp **undo);
void tcproute_undo(struct tcproute *tr, struct route_tcp *undo);

/* Whether cfg's tcp_routes have other listen addresses, sni names or
 * proxy_protocol than the ones edged started with (those apply at the
 * next start; their environments and send_proxy at the reload). */
bool tcproute_file_moved(const struct tcproute *tr, const struct config *cfg);

/* The workers that listen (w[0..nw), set once they exist), and the
 * metrics (edge_tcp_*: docs/operations.md). */
void tcproute_workers(struct tcproute *tr, struct worker **w, unsigned nw);
int tcproute_metrics(struct tcproute *tr, struct metrics *m);

/*
 * Listen on every address of the list that is not listened on yet
 * (again for those that failed before), close those the list no longer
 * has. At start (start set: edged still root, before the workers run) a
 * file route's address that cannot be bound is an error (-errno with
 * err, as an HTTP listen address is); any other failure is logged,
 * counted and left for the next call. Returns 0 or that error.
 */
int tcproute_listen(struct tcproute *tr, bool start, struct errbuf *err);

/* Whether listen (canonical text) is listened on; when not, *why says
 * why ("Permission denied"; "" before a first try). */
bool tcproute_listening(const struct tcproute *tr, const char *listen,
			const char **why);

/* Routes of each source in the list, and addresses listening / not. */
void tcproute_stats(const struct tcproute *tr, size_t *file, size_t *db,
		    size_t *listening, size_t *failed);

#endif /* EDGE_TCPROUTE_H */
