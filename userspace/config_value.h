/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * config_value.h - the configuration loader's typed values: reading one
 * setting (a string, boolean, integer, size, duration, path, address
 * list, CIDR list ...), checking it on its own and reporting what was
 * wrong as "FILE:LINE: KEY: message".
 *
 * Private to the loader: only config.c and config_value.c include it.
 * config.c walks the file's structure and checks what spans several keys;
 * config_value.c holds what one key's value needs. The cfg_ prefix keeps
 * these apart from libconfig's own config_ names.
 *
 * Conventions of every getter below: g is the group holding the member
 * (NULL stands for an absent group: every member is then absent), path is
 * g's key path ("" for the root) and name the member's name. A getter
 * returns 0, or -EINVAL with x->err set ("FILE:LINE: KEY: message"), or
 * -ENOMEM; after an error *out is not to be used (the load is abandoned
 * and config_free frees whatever it holds).
 */
#ifndef EDGE_CONFIG_VALUE_H
#define EDGE_CONFIG_VALUE_H

#include <libconfig.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "config_file.h"
#include "compress.h"
#include "hrule.h"
#include "auth.h"
#include "challenge.h"
#include "inject.h"

#define CFG_KEY_MAX 256		  /* bytes of a key path, with its NUL */
#define CFG_SIZE_MAX (1ULL << 40) /* 1 TiB: largest byte size accepted */
#define CFG_PATH_MAX 4095
#define CFG_NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* A set of strings already seen (ids, domains), remembering where. */
struct cfg_seen_entry {
	char *key;
	const config_setting_t *where;
	char path[CFG_KEY_MAX];
};

struct cfg_seen {
	struct cfg_seen_entry *v;
	size_t n, cap; /* cap: power of two, or 0 */
};

/* The state of one load. */
struct cfg {
	const char *file;	       /* the main file's path */
	const struct config_file *src; /* its text: where a line comes from */
	struct errbuf *err;
	struct config *c;	    /* the settings */
	struct route_src *projects; /* the projects: the file source */
	struct cfg_seen seen;
	struct config_errs *errs; /* every error (config_load_all) */
	bool failed;		  /* an error went into errs */
	bool chal_keyless;	  /* said: a challenge without a key file */
};

/* After a group (or a project) was checked with result rc: an error
 * goes into x->errs, x->err is cleared and the check goes on (returns
 * 0); only -ENOMEM stops it (returned). */
int cfg_next(struct cfg *x, int rc);

/* How a number member is written. */
enum cfg_unit {
	CFG_COUNT, /* an integer */
	CFG_BYTES, /* an integer, or a string "N", "NK", "NM", "NG" (binary
		    * units, at most CFG_SIZE_MAX) */
	CFG_MS,	   /* a duration string such as "10s" or "250ms"
		    * (config_duration_parse), in milliseconds */
};

/* Where a member's value was read: what errors about it point at. */
struct cfg_at {
	const config_setting_t *s; /* the setting, or its group when absent */
	char key[CFG_KEY_MAX];	   /* its key path */
};

/* ---- errors and key paths ----------------------------------------------- */

/* Where setting s was read: *file (an @include'd one, say) and *line in
 * it; x->file and line 0 when s is NULL or has no line. */
void cfg_where(const struct cfg *x, const config_setting_t *s,
	       const char **file, unsigned *line);

/* Set x->err to "FILE:LINE: KEY: message" (s gives the file and line;
 * "FILE: KEY: message" when it has none). Returns -EINVAL. */
int cfg_fail(struct cfg *x, const config_setting_t *s, const char *key,
	     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Append a warning in the same form as an error ("FILE:LINE: KEY:
 * message"). Returns 0 or -ENOMEM. */
int cfg_warn(struct cfg *x, const config_setting_t *s, const char *key,
	     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Set x->err to "FILE: out of memory". Returns -ENOMEM. */
int cfg_nomem(struct cfg *x);

/* Key path "path.name" (just "name" when path is "") into buf, of
 * CFG_KEY_MAX bytes; a longer one is cut short, ending in "...". */
void cfg_key(char *buf, const char *path, const char *name);

/* Key path "path[i]" into buf, of CFG_KEY_MAX bytes, cut as cfg_key. */
void cfg_key_index(char *buf, const char *path, size_t i);

/* The member name of g, NULL when g is NULL or has none; key (of
 * CFG_KEY_MAX bytes) gets its path either way. Sets no error. */
config_setting_t *cfg_member(const config_setting_t *g, const char *path,
			     const char *name, char *key);

/* ---- scalars ------------------------------------------------------------ */

/* A string member: *out points into libconfig's tree, or is def when the
 * member is absent (absent with def NULL: "missing (required)"). *at
 * says where it was, for later errors about the value. */
int cfg_str(struct cfg *x, const config_setting_t *g, const char *path,
	    const char *name, const char *def, const char **out,
	    struct cfg_at *at);

/* A member as it is written, unchecked (config_check.h's struct
 * config_value: absent, a string, an integer as written in the file, or
 * what else it is), for a check shared with another source
 * (config_health_check_of). *at says where it was. Returns 0, or -EINVAL
 * for an integer whose text was not found. */
int cfg_value(struct cfg *x, const config_setting_t *g, const char *path,
	      const char *name, struct config_value *out, struct cfg_at *at);

/* A copy of s into *out; on failure x->err says "FILE: out of memory".
 * Returns 0 or -ENOMEM. */
int cfg_dup(struct cfg *x, const char *s, char **out);

/* A boolean member, def when absent. */
int cfg_bool(struct cfg *x, const config_setting_t *g, const char *path,
	     const char *name, bool def, bool *out);

/* A number member written as unit says, within [min, max] (in bytes or
 * milliseconds for CFG_BYTES and CFG_MS), def when absent. An integer is
 * taken as written in the file (its struct config_file_int, which
 * config_load hangs on the setting as its hook), not as libconfig read
 * it, and is reported as written when out of range. */
int cfg_number(struct cfg *x, const config_setting_t *g, const char *path,
	       const char *name, enum cfg_unit unit, uint64_t def, uint64_t min,
	       uint64_t max, uint64_t *out);

/* A duration member kept in whole seconds ("365d", "1h30m", a bare
 * "90"; duration_parse: the one grammar, at most 365 days), def when
 * absent. */
int cfg_seconds(struct cfg *x, const config_setting_t *g, const char *path,
		const char *name, const char *def, uint64_t *out);

/* A rate member "N/s", "N/m" (lib/policy.h), in tokens per minute; "off"
 * (also the default) is 0. */
int cfg_rate(struct cfg *x, const config_setting_t *g, const char *path,
	     const char *name, uint64_t *out);

/* ---- lists and addresses ------------------------------------------------ */

/* Check that g is a group whose members are all in names
 * (NULL-terminated): "expected a group { ... }" or "unknown key". */
int cfg_known(struct cfg *x, const config_setting_t *g, const char *path,
	      const char *const *names);

/* A list or array member whose elements are all strings; *out is the
 * setting, NULL when absent. key (of CFG_KEY_MAX bytes) gets its path. */
int cfg_list(struct cfg *x, const config_setting_t *g, const char *path,
	     const char *name, char *key, const config_setting_t **out);

/* A list of CIDRs added to *t (trusted_add; each error names its
 * element, each note becomes a warning). Absent: t untouched. */
int cfg_trusted(struct cfg *x, const config_setting_t *g, const char *path,
		const char *name, struct trusted *t);

/* A list of addresses, 1..max of them, none twice, into a new array *out
 * of *nout: listen addresses (config_addr_parse) when schemes is 0, else
 * upstream endpoints with the schemes of that mask (config_endpoint_parse).
 * Absent: "missing (required)" when required, else *out NULL and *nout 0. */
int cfg_addrs(struct cfg *x, const config_setting_t *g, const char *path,
	      const char *name, size_t max, bool required, unsigned schemes,
	      struct config_addr **out, size_t *nout);

/* An environment's or a route's headers group (hrule.h), absent: none;
 * each entry checked by hrules_add, an error naming its line. */
int cfg_headers(struct cfg *x, const config_setting_t *g, const char *path,
		struct hrules *out);

/* An environment's compression group (compress.h), absent: the
 * defaults (compress_defaults). */
int cfg_compression(struct cfg *x, const config_setting_t *g, const char *path,
		    struct config_compression *out);
/* Read the regular file f whole (at most max bytes; a FIFO or a larger
 * file refused, named at key): *out (malloc'd, NUL-terminated) and *len. */
int cfg_file_read(struct cfg *x, const config_setting_t *s, const char *key,
		  const char *f, size_t max, char **out, size_t *len);

/* An environment's challenge group (challenge.h): mode, difficulty, ttl;
 * absent: off. */
/* api_keys and jwt of group g (an environment or a route): a new gate
 * (auth.h) in *out, or NULL when g names neither. */
int cfg_auth(struct cfg *x, const config_setting_t *g, const char *path,
	     struct auth_gate **out);

int cfg_challenge(struct cfg *x, const config_setting_t *g, const char *path,
		  struct config_challenge *out);

/* An environment's inject group (inject.h): head_end and body_end, each
 * a string or { file = "..."; } read now; absent: none. An inline
 * <script> that a Content-Security-Policy of the environment's header
 * rules (headers) would stop is a warning. */
int cfg_inject(struct cfg *x, const config_setting_t *g, const char *path,
	       const struct hrules *headers, struct config_inject *out);

/* An environment's redirects, a list of groups { from; to; status; }
 * (hredirects_add), absent: none. */
int cfg_redirects(struct cfg *x, const config_setting_t *g, const char *path,
		  struct hredirects *out);

/* A list of listen addresses (listen, tls.listen): each a string
 * "ADDR:PORT", or a group { address = "ADDR:PORT"; proxy_protocol =
 * true; } (the connections on it begin with a PROXY protocol header),
 * none twice, 1..max of them; absent: *out NULL. */
int cfg_listen_addrs(struct cfg *x, const config_setting_t *g, const char *path,
		     const char *name, size_t max, struct config_addr **out,
		     size_t *nout);

/* A list member of CIDR strings added to rules with action
 * (config_ip_rule_add): a prefix already there (from either ip_allow or
 * ip_block) is refused, host bits set become a warning. Absent: nothing
 * added. */
int cfg_ip_rules(struct cfg *x, const config_setting_t *g, const char *path,
		 const char *name, uint8_t action, struct rules *rules);

/* ---- names and paths ---------------------------------------------------- */

/* The member "name" (config_name_check): 1..CONFIG_NAME_MAX bytes, no
 * control characters; def when absent. *out is a new copy. */
int cfg_name(struct cfg *x, const config_setting_t *g, const char *path,
	     const char *def, char **out);

/* A user name member: 1..32 letters, digits, '.', '_' or '-', not
 * starting with '-'; def when absent. *out is a new copy. */
int cfg_user(struct cfg *x, const config_setting_t *g, const char *path,
	     const char *name, const char *def, char **out);

/* The member "send_proxy" (config_send_proxy_parse), def when absent. */
int cfg_send_proxy(struct cfg *x, const config_setting_t *g, const char *path,
		   enum config_send_proxy def, enum config_send_proxy *out);

/* The member "balance" (config_balance_parse), def when absent. */
int cfg_balance(struct cfg *x, const config_setting_t *g, const char *path,
		enum config_balance def, enum config_balance *out);

/* An absolute path string member of at most max bytes ("" also allowed
 * when empty_ok), def when absent. *out is a new copy. */
int cfg_path(struct cfg *x, const config_setting_t *g, const char *path,
	     const char *name, const char *def, size_t max, bool empty_ok,
	     char **out);

/* A route prefix member, required (config_prefix_check: "/seg[/seg...]"
 * of RFC 3986 pchars, 2..CONFIG_PREFIX_MAX bytes, no percent-encoding, no
 * empty, "." or ".." segments, no trailing '/'). *out is a new copy. */
int cfg_prefix(struct cfg *x, const config_setting_t *g, const char *path,
	       const char *name, char **out);

#endif /* EDGE_CONFIG_VALUE_H */
