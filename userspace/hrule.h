/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hrule.h - an environment's and a route's header rules (the `headers`
 * group) and an environment's redirect rules (`redirects`): read from
 * their text forms and checked once, when a source is loaded (the file's
 * and the database's alike); applied to every request without
 * allocation. docs/configuration.md, "headers" and "redirects", has the
 * rules.
 *
 * Header rules, per direction:
 *   request_set, response_set  "Name: value": every field of that name
 *                              (the client's or upstream's, or one edge
 *                              adds) replaced by this one;
 *   response_add               "Name: value": added, what is there kept;
 *   request_remove,
 *   response_remove            "Name": every field of that name dropped.
 * A value may hold $request_id, $client_ip, $host, $project_id,
 * $environment_id and $trace_id (the W3C trace id), and $$ for a dollar.
 * Refused: a name that is no token, a value with a control byte or a byte past
 * ASCII, an unknown variable, a hop-by-hop name, Content-Length, X-Request-ID
 * (edge's own, never removed or replaced), and in requests Via (loop detection)
 * and the removal of Host; a name twice in a group's set lists, or both set and
 * removed.
 *
 * Names compare case-insensitively with '_' read as '-' (a CGI-style
 * server's one variable for both), in the checks and when applied.
 *
 * A route's group and its environment's both apply, by name: a name the
 * route's group names in a direction's lists is the route's alone.
 *
 * Redirects: "from" an exact path ("/old") or a prefix, written with
 * "/" and "*" after it (for "/old": "/old" and everything under
 * "/old/"); "to" an http(s) URL or an
 * absolute path, where $path is the rest of the path after the prefix
 * ("" for an exact one), $query the request's query with its "?" ("" for
 * none), $$ a dollar; status 301, 302, 307 or 308. An exact "from" wins
 * over the prefixes, the longest prefix over shorter ones. The host a
 * "to" sends a client to is never the request's: no variable first in a
 * URL's host or right after a path's first "/".
 */
#ifndef EDGE_HRULE_H
#define EDGE_HRULE_H

#include <stdbool.h>
#include <jansson.h>
#include <stddef.h>

#include "hdr.h"
#include "log.h"

/* Entries of one list; bytes of a name, of a value (as written). */
#define HRULE_MAX 32
#define HRULE_NAME_MAX 128
#define HRULE_VALUE_MAX 1024
/* Fields the rules of one request may add in one direction (an
 * environment's and a route's set and add lists): what a head's field
 * arrays (HTTP/2's) leave room for beside the message's own. */
#define HRULE_FIELDS_MAX (4 * HRULE_MAX)
/* Bytes a group's entries may come to, their variables at their
 * longest (hrules_add refuses more): the two groups of a request stay
 * well inside a head's 64 KiB. */
#define HRULE_GROUP_BYTES_MAX 16384
/* Redirects of an environment; bytes of a from and of a to. */
#define HREDIRECT_MAX 256
#define HREDIRECT_FROM_MAX 256
#define HREDIRECT_TO_MAX 1024

enum hrule_list {
	HRULE_REQUEST_SET = 0,
	HRULE_REQUEST_REMOVE,
	HRULE_RESPONSE_SET,
	HRULE_RESPONSE_ADD,
	HRULE_RESPONSE_REMOVE,
	HRULE_LISTS,
};

/* "request_set", ...: the lists' keys. */
extern const char *const hrule_list_name[HRULE_LISTS];

struct hrule_field {
	char *name; /* as written */
	size_t nlen;
	char *value; /* the value as written (variables unexpanded); NULL in
			a remove list */
	size_t vlen;
	bool vars; /* the value has a $ */
};

/* A headers group: zeroed is empty. */
struct hrules {
	struct hrule_field *f[HRULE_LISTS];
	size_t n[HRULE_LISTS];
};

/* Whether h has no rule. NULL: true. */
bool hrules_empty(const struct hrules *h);

/* Add one entry of list l, its text as the configuration writes it
 * ("Name: value" for a set or add list, "Name" for a remove list),
 * checked against the others of h. 0; -EINVAL with err saying why (h
 * unchanged); -ENOMEM. */
int hrules_add(struct hrules *h, enum hrule_list l, const char *text,
	       struct errbuf *err);

/* A deep copy of from into *to (zeroed first): 0 or -ENOMEM (*to
 * empty). */
int hrules_dup(const struct hrules *from, struct hrules *to);
void hrules_free(struct hrules *h);

/* What a value's variables stand for in one request. */
struct hrule_vars {
	const char *request_id;
	const char *client_ip;
	const char *host; /* as the client sent it */
	size_t host_len;
	const char *project_id;
	const char *environment_id;
	const char *trace_id; /* NULL or "": none */
};

/*
 * One request's rules in one direction, as hdr.h's hooks: the head
 * builder asks drop() of every field it would write (but X-Request-ID)
 * and calls add() before the framing. env and route may be NULL; v must
 * outlive the edit.
 */
struct hrule_edit {
	struct hdr_edit base;
	const struct hrules *env, *route;
	const struct hrule_vars *v;
	bool response;
};

/* Set e up; returns &e->base, or NULL when neither group has a rule for
 * that direction (nothing to do). */
const struct hdr_edit *hrule_edit_init(struct hrule_edit *e,
				       const struct hrules *env,
				       const struct hrules *route,
				       const struct hrule_vars *v,
				       bool response);

/* ---- redirects ------------------------------------------------------ */

struct hredirect {
	char *from; /* as written, a prefix without its slash and star */
	size_t flen;
	bool prefix;
	char *to;
	size_t tlen;
	unsigned status;
};

/* An environment's redirects: zeroed is none. */
struct hredirects {
	struct hredirect *v;
	size_t n;
};

/* Add one redirect (status 0: 301), checked against the others. 0;
 * -EINVAL with err saying why (r unchanged); -ENOMEM. */
int hredirects_add(struct hredirects *r, const char *from, const char *to,
		   unsigned status, struct errbuf *err);
int hredirects_dup(const struct hredirects *from, struct hredirects *to);
void hredirects_free(struct hredirects *r);

/* The redirect for path[0..len) (no query), or NULL. r may be NULL. */
const struct hredirect *hredirects_find(const struct hredirects *r,
					const char *path, size_t len);

/* Append d's Location for path[0..len) (it matched) and the query
 * q[0..qlen) (NULL: none) to b: "Location: URL\r\n". 0 or b->err. */
int hredirect_location(const struct hredirect *d, const char *path, size_t len,
		       const char *q, size_t qlen, struct hdr_buf *b);

/* What applies to a route, for edgectl routes: {"request_set": ["Name:
 * value", ...], ...} with the route's entries and the environment's it
 * does not override (lists without one left out); the redirects as
 * [{"from", "to", "status"}]. NULL when out of memory. */
json_t *hrules_json(const struct hrules *env, const struct hrules *route);
json_t *hredirects_json(const struct hredirects *r);

/* The same read from the database's JSON (environments.headers: an
 * object of those lists; environments.redirects: a list of {"from",
 * "to", "status"}), each entry checked as the file's: 0 (NULL or JSON
 * null: none), -EINVAL with err naming the entry (*out empty), -ENOMEM.
 * hrules_json(h, NULL) and hredirects_json write what these read. */
int hrules_from_json(const json_t *o, struct hrules *out, struct errbuf *err);
int hredirects_from_json(const json_t *a, struct hredirects *out,
			 struct errbuf *err);

#endif /* EDGE_HRULE_H */
