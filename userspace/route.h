/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * route.h - Resolve: Host and path -> project -> environment -> deployment
 * -> upstream endpoints, over an immutable, reference-counted route table
 * generation.
 *
 * A table is built from the route sources' lists of projects (route_src.h:
 * the configuration file's and PostgreSQL's) and never changes
 * afterwards, except for the per-route in-flight gauges it carries
 * (atomics, see admit.h). Workers read it without locks; the control
 * thread's route writer (route_writer.h, the only writer) swaps a new
 * generation into a route_holder with one atomic exchange, and the old
 * one is freed when the last request that holds it puts it.
 *
 * Matching rules:
 * - the host is lowercased, a ":PORT" and one trailing dot are dropped,
 *   and "[v6]" literals are taken whole (they match no domain);
 * - an exact domain wins; else a wildcard "*.SUFFIX" matches a host of
 *   exactly one more label than SUFFIX (like a TLS certificate):
 *   "*.preview.example.com" matches "a.preview.example.com", but neither
 *   "a.b.preview.example.com" nor "preview.example.com". So the only
 *   candidate is the host's immediate parent: one hash probe;
 * - within the environment, the longest route prefix that matches the
 *   path on a segment boundary wins ("/fn" matches "/fn", "/fn/x" and
 *   "/fn?q", not "/fnx"); no match is the environment's default route.
 */
#ifndef EDGE_ROUTE_H
#define EDGE_ROUTE_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "admit.h"
#include "cidr.h"
#include "log.h"
#include "route_src.h"

struct route_table;
struct route_project;

enum route_status {
	ROUTE_OK = 0,
	ROUTE_DOMAIN_NOT_FOUND, /* 503 domain_not_found */
	ROUTE_PROJECT_DISABLED, /* 403 project_disabled */
	ROUTE_ENV_NOT_FOUND,	/* a TCP route's environment: in no source */
};

/*
 * What a lookup found. Every pointer points into the table, so it stays
 * valid only while the caller holds its reference to the table.
 *
 * The request target to send upstream is ("/" if path_slash) followed by
 * the path_len bytes at path: without strip_prefix that is the original
 * target; with it, the target after the prefix ("/fn/x?q" -> "/x?q",
 * "/fn?q" -> "/" "?q").
 */
struct route_match {
	const char *project_id, *project_name;
	const char *env_id, *env_name;
	const char *deployment_id;
	const char *prefix; /* the matched route prefix, NULL: default */
	const struct config_addr *upstreams;
	size_t n_upstreams;
	enum config_balance balance;
	uint64_t max_body_bytes; /* 0: unlimited */
	const struct config_security_headers *security;
	/* header rules of the environment and of the route (NULL: none),
	 * the environment's redirects (NULL: none), and whether a path no
	 * route matches (prefix NULL) is a 404 */
	const struct hrules *env_headers, *route_headers;
	const struct hredirects *redirects;
	bool unmatched_not_found;
	const struct config_compression *compression; /* NULL: defaults */
	const struct config_inject *inject;	      /* NULL: none */
	const struct config_challenge *challenge;     /* never NULL */
	const struct auth_gate *auth; /* API keys / JWT (auth.h), NULL: none */
	/* the host's paths lead to more than one gate: a path not in
	 * normal form (route_path_normal) is refused */
	bool strict_path;
	struct admit_gauge *inflight; /* this route's in-flight gauge */
	/* this route's requests by status class (ROUTE_CLASSES: 1xx..5xx),
	 * counted by req_end with relaxed atomics */
	_Atomic uint64_t *classes;
	/* this route's own number, the same in every generation the route
	 * is unchanged in (its project not changed): what per-route state
	 * elsewhere (round robin positions) is keyed by */
	uint64_t route_key;
	const char *path;
	size_t path_len;
	bool path_slash;
	const struct route_project *project; /* for route_ip_allowed */
	bool on_demand;	 /* the environment wakes on demand (wake.h) */
	bool no_wake;	 /* the route's wake = false */
	bool background; /* the route's activity = "background" */
	bool shed;	 /* the route's shed = true (brownout) */
	/* the deployment's TLS to its https:// endpoints */
	const struct config_up_tls *up_tls;
	/* the PROXY protocol version its new upstream connections begin
	 * with (0: none): the TCP route's send_proxy, else the
	 * deployment's */
	unsigned send_proxy;
	/* the deployment's retry group (retry.set false: none) */
	const struct config_retry *retry;
	/* the deployment's circuit group (circuit.set false: none) */
	const struct config_circuit *circuit;
	/* the deployment's hedge group (hedge.set false: none) */
	const struct config_hedge *hedge;
	/* timeouts.request_total: the route's, else the deployment's; 0:
	 * none */
	uint64_t request_total_ms;
	/* the deployment's max_inflight: each endpoint's requests in flight
	 * at most (0: no cap; a TCP route's connections are not capped) */
	unsigned ep_max_inflight;
};

/*
 * Build a table generation from the lists src[0..n_src) (a NULL entry is
 * a source with nothing yet; src[i] is source i of enum route_src_id), in
 * that order, with def for what they leave to the settings: an
 * environment's body limit where it has ROUTE_SRC_INHERIT, each route's
 * in-flight cap. The lists may be freed afterwards: the table copies what
 * it needs. Returns 0 with *out holding one reference, -EEXIST when a
 * name (project, environment or deployment id, domain, domain + prefix)
 * is claimed twice, naming both, or -ENOMEM; err says what went wrong.
 */
int route_table_build(const struct route_src *const *src, size_t n_src,
		      const struct route_defaults *def,
		      struct route_table **out, struct errbuf *err);

/*
 * The next generation, built from the one before by replacing projects
 * one at a time: a table is made of one compiled segment per project and
 * of persistent maps (pmap.h) from ids and domains to them, which the new
 * generation shares with prev but for what its changes touch. So a change
 * costs the projects it replaces (their environments, domains and
 * claims), not the table: a project of 10 domains changes in microseconds
 * in a table of 100,000. Control loop only (one builder at a time).
 *
 *   route_build_begin(prev, def, &b)   prev may be NULL (empty); def the
 *                                      settings (a new per-route cap
 *                                      applies to prev's gauges too)
 *   route_build_set(b, src, p, err)    project p->id of source src is p
 *                                      from now on (p's contents move
 *                                      into the table, p is left empty,
 *                                      in every case)
 *   route_build_del(b, src, id, err)   project id of src is gone
 *   route_build_drop_source(b, src)    every project of src is gone
 *   route_build_end(b, &t)             the generation (one reference)
 *   route_build_abort(b)               nothing happened
 *
 * A set or del that would claim a name twice (-EEXIST, err naming both;
 * a project id of another source is one) changes nothing and the build
 * goes on without it: one bad project never blocks the others. -ENOMEM in
 * the middle of a change leaves the build unusable: end returns -ENOMEM.
 */
struct route_build;
int route_build_begin(const struct route_table *prev,
		      const struct route_defaults *def,
		      struct route_build **out);
int route_build_set(struct route_build *b, unsigned src,
		    struct route_src_project *p, struct errbuf *err);
int route_build_del(struct route_build *b, unsigned src, const char *id,
		    struct errbuf *err);
int route_build_drop_source(struct route_build *b, unsigned src,
			    struct errbuf *err);
int route_build_end(struct route_build *b, struct route_table **out);
void route_build_abort(struct route_build *b);

/* Longest sni of a TLS passthrough route (a domain: 253). */
#define ROUTE_SNI_MAX 253

/*
 * Plain TCP (L4) routes and TLS passthrough routes. A table carries,
 * beside the sources' projects, the TCP routes of every source (the
 * file's tcp_routes and the database's rows, merged and checked together
 * by tcproute.h): each a listen address (and, for TLS passthrough, the
 * server name that picks it among the routes on that address), the
 * environment it goes to by id, the source that defines it, and a slot:
 * a number below ROUTE_TCP_MAX that the route keeps for as long as it
 * lives, by which its counters (the connections open on it, the round
 * robin over its endpoints) are kept. Each route is resolved to its
 * environment whenever a generation is built, so that a change of the
 * environment's deployment from any source (a file reload, a database
 * change) or of the environment a route names applies to the next
 * connection, and an environment that comes (or goes) later is found (or
 * missed) then. The routes themselves are one immutable set that the
 * generations share until the TCP routes change (route_tcp.h).
 */
struct route_tcp {
	char listen[CONFIG_ADDR_STR_MAX]; /* canonical (config_addr_parse) */
	char sni[ROUTE_SNI_MAX + 1];	  /* a TLS passthrough route's; "" */
	char env_id[CONFIG_ID_MAX + 1];	  /* the environment it goes to */
	unsigned src;  /* the enum route_src_id defining it */
	unsigned slot; /* < ROUTE_TCP_MAX, one per route */
	/* its connections begin with a PROXY header (the same for every
	 * route of its address) */
	bool proxy_protocol;
	/* the PROXY header to its upstreams; INHERIT: the deployment's */
	enum config_send_proxy send_proxy;
};

/* Most TCP routes a table carries, every source's together (the file
 * alone: config.h's CONFIG_TCP_ROUTES_MAX, the same number). Each costs
 * a listening socket per worker per address and a counter. */
#define ROUTE_TCP_MAX 1024

/* TCP routes handed to the route writer: v[0..n). */
struct route_tcp_list {
	const struct route_tcp *v;
	size_t n;
};

/* The build's TCP routes are v[0..n) from now on (copied, in that order).
 * A build begins with prev's. 0, or -EINVAL (more than ROUTE_TCP_MAX, a
 * slot out of range or twice, a (listen, sni) twice, an address with a
 * plain route and another) / -ENOMEM with err set (the build goes on with
 * the routes it had). */
int route_build_set_tcp(struct route_build *b, const struct route_tcp *v,
			size_t n, struct errbuf *err);

/* The number of TCP routes in t, and route i (in the order they were
 * set; NULL out of range). */
size_t route_table_ntcp(const struct route_table *t);
const struct route_tcp *route_tcp_at(const struct route_table *t, size_t i);

/* What t routes on listen address listen (its canonical text): 0 with
 * *idx its plain route, or with *passthrough set (TLS passthrough routes:
 * route_tcp_sni picks one); -ENOENT when no route has the address (it
 * went: its listener closes soon). Never allocates; any thread while the
 * caller holds t. */
int route_tcp_addr(const struct route_table *t, const char *listen,
		   bool *passthrough, size_t *idx);

/* The TLS passthrough route on listen that server name (lowercase, ""
 * for none) picks: the route with that very sni, else the "*.SUFFIX" one
 * when name has exactly one label more than SUFFIX (as HTTP domains and
 * certificates match), else the address's "*" route. 0 with *idx, or
 * -ENOENT. Never allocates. */
int route_tcp_sni(const struct route_table *t, const char *listen,
		  const char *name, size_t *idx);

/*
 * Resolve TCP route idx into *m: its environment's project, ids,
 * deployment, upstreams, balance and on_demand (route_key the
 * environment's default route's; no path, body limit, headers or
 * in-flight gauge). Returns
 * ROUTE_OK; ROUTE_ENV_NOT_FOUND when no source holds the environment (or
 * idx is out of range); or ROUTE_PROJECT_DISABLED (ids set). Never
 * allocates; any thread while the caller holds t.
 */
enum route_status route_tcp_lookup(const struct route_table *t, size_t idx,
				   struct route_match *m);

/* The ids of source src's projects in t (t may be NULL): a malloc'd
 * array of malloc'd strings, for route_ids_free. 0 or -ENOMEM. */
int route_table_project_ids(const struct route_table *t, unsigned src,
			    char ***ids, size_t *n);
void route_ids_free(char **ids, size_t n);

/* Which source holds a name in t: kind 'p' a project id, 'e' an
 * environment id, 'd' a deployment id, 'h' a domain served (as
 * configured, "*.x" for a wildcard; claims do not count). 0 with *src,
 * or -ENOENT. */
int route_table_holder(const struct route_table *t, char kind, const char *name,
		       unsigned *src);

/* Whether path (the request target's path, n bytes; a query after '?'
 * ignored) is in normal form: no empty, "." or ".." segment, no '\\',
 * no escape of an unreserved character or of '/', no bad escape; one
 * trailing '/' allowed. */
bool route_path_normal(const char *path, size_t n);

/* Number of projects. */
size_t route_table_nprojects(const struct route_table *t);

/* Take another reference to t (t may be NULL). Returns t. */
struct route_table *route_table_get(struct route_table *t);

/* Drop a reference; the last one frees the table. t may be NULL. */
void route_table_put(struct route_table *t);

/*
 * Freeing a generation costs what only it holds (a change that deleted
 * 10,000 projects: all of them), where its last reference goes: the
 * control loop, or a worker that finished the last request on it. Once
 * route_reaper_start has run (0, or -errno: none, frees stay where they
 * are), each one is freed on a thread of the reaper's own instead, at
 * nice ROUTE_REAPER_NICE, and nobody waits for it. route_reaper_stop
 * frees what is queued, ends the thread, and frees are done in place
 * again (at exit, before the leak check). Either may be called from any
 * thread, not both at once.
 */
#define ROUTE_REAPER_NICE 10
int route_reaper_start(void);
void route_reaper_stop(void);

/* The generation number: increases with every table built. */
uint64_t route_table_generation(const struct route_table *t);

/* Number of routes (environment defaults, prefix routes and claims). */
size_t route_table_nroutes(const struct route_table *t);

/*
 * Resolve host (the Host header or SNI, host_len bytes) and path (the
 * origin-form request target, query included, path_len bytes) into *m.
 * Returns ROUTE_OK, ROUTE_DOMAIN_NOT_FOUND or ROUTE_PROJECT_DISABLED (with
 * the project's and environment's ids set in *m). Never allocates; safe
 * from any thread while the caller holds t.
 */
enum route_status route_lookup(const struct route_table *t, const char *host,
			       size_t host_len, const char *path,
			       size_t path_len, struct route_match *m);

/*
 * Whether the matched project admits client address a (a full-length
 * cidr as cidr_parse_addr gives): the longest matching ip_allow/ip_block
 * prefix decides (as in the XDP tries); with no match, the address is
 * allowed unless the project has an allow list, which then admits only
 * its prefixes. Allow rules that lie inside a block rule are exceptions to
 * it and do not make an allow list (ip_block 203.0.113.0/24 with ip_allow
 * 203.0.113.7 still admits everyone else). false means 403 ip_denied.
 */
bool route_ip_allowed(const struct route_match *m, const struct cidr *a);

/*
 * The table as JSON for `edgectl routes`: {"generation": N, "routes":
 * [{"domain", "prefix", "strip_prefix", "project", "environment",
 * "deployment", "enabled", "balance", "upstreams": [..],
 * "max_body_bytes", "inflight"}...], "tcp_routes": [{"listen", "sni"
 * (absent for a plain route), "slot", "route_source" (the source that
 * defines the route), "environment", "found", and when found "source"
 * (the environment's), "project", "deployment", "enabled", "balance",
 * "upstreams"}...]} with the routes sorted by domain then prefix and the
 * TCP routes in the order they were set. Returns a new reference, or
 * NULL when out of memory.
 */
json_t *route_dump_json(const struct route_table *t);

/* Status classes counted per route (1xx .. 5xx). */
#define ROUTE_CLASSES 5

/*
 * Call fn once per HTTP route of t (an environment's default route, each
 * of its prefix routes, each claim): its least domain, its prefix ("/" for
 * a default route), its environment's id and its status-class counters
 * (ROUTE_CLASSES of them; they start at 0 with the generation that built
 * the route's project). Stops at fn's first non-zero return, which it
 * returns; or -ENOMEM.
 */
typedef int (*route_each_fn)(void *arg, const char *domain, const char *prefix,
			     const char *env_id,
			     const _Atomic uint64_t *classes);
int route_table_each_route(const struct route_table *t, route_each_fn fn,
			   void *arg);

/* Call fn once per exact domain (no wildcard) of t whose environment (the
 * one that owns it, not one that claims a path of it) has tls = "auto".
 * Stops at fn's first non-zero return, which it returns. */
typedef int (*route_name_fn)(void *arg, const char *domain);
int route_table_each_tls_auto(const struct route_table *t, route_name_fn fn,
			      void *arg);

/* Call fn once per deployment of t with a circuit group: its id and the
 * group. Stops at fn's first non-zero return, which it returns. */
typedef int (*route_circuit_fn)(void *arg, const char *deployment_id,
				const struct config_circuit *cc);
int route_table_each_circuit(const struct route_table *t, route_circuit_fn fn,
			     void *arg);

/* Where the current generation lives; zero-initialise, or route_holder_init. */
struct route_holder {
	_Atomic(struct route_table *) cur;
	atomic_uint readers; /* route_table_current()s in progress */
};

/* Start with t (its reference moves into the holder; may be NULL). */
void route_holder_init(struct route_holder *h, struct route_table *t);

/*
 * Install t (its reference moves into the holder) and drop the holder's
 * reference to the previous table, which lives on until the requests that
 * hold it put it. One atomic exchange; then waits (spins briefly) until no
 * route_table_current() that may have read the old pointer is still
 * taking its reference. One writer only: the route writer, on the control
 * loop (route_writer.h), and route_holder_clear at shutdown.
 */
void route_table_swap(struct route_holder *h, struct route_table *t);

/*
 * The current table with a reference taken for the caller (who puts it),
 * or NULL when none is installed. Lock-free: two atomic increments and
 * one decrement.
 */
struct route_table *route_table_current(struct route_holder *h);

/* Drop the holder's table (at shutdown). */
void route_holder_clear(struct route_holder *h);

#endif /* EDGE_ROUTE_H */
