/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * challenge.h - the proof-of-work challenge: an environment's gate that
 * admits a client holding a pass (a cookie edge signed) and challenges one
 * without.
 *
 * Stateless across a fleet: a challenge is a token edge signs (HMAC-SHA-256
 * over environment, client prefix, expiry, difficulty and 16 random bytes);
 * its solution is a decimal n such that SHA-256("TOKEN.n") has at least
 * the token's difficulty leading zero bits; a solved token is exchanged
 * at CHAL_PATH for a pass, the cookie CHAL_COOKIE = "1.EXPIRY.MAC" (MAC
 * over environment, client prefix and expiry). Any host holding one of
 * the keys verifies any other's tokens and passes. The client prefix is
 * the client's /24 (IPv4) or /64 (IPv6).
 *
 * Keys: up to two (chal_keys); the first signs, both verify (rotation).
 * One host's own memory: the solutions already exchanged (a replay is
 * refused until the token expires) and, per environment, the prefixes
 * that showed a pass (mode new_ip: admitted without a cookie for the
 * pass's life) or went over the rate limit (mode on_rate_limit:
 * challenged for CHAL_FLAG_S). Each is a bounded table (chal_table): a
 * new_ip prefix forgotten early is challenged again; a flag forgotten
 * early (a flood of flagged prefixes) lets its prefix in under the limit.
 */
#ifndef EDGE_CHALLENGE_H
#define EDGE_CHALLENGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cidr.h"

struct h1_head;

enum chal_mode {
	CHAL_OFF = 0,	    /* no challenge */
	CHAL_NEW_IP,	    /* a client prefix without a pass */
	CHAL_ON_RATE_LIMIT, /* a prefix that went over the rate limit */
	CHAL_ALWAYS,	    /* every request without a pass */
};

#define CHAL_DIFFICULTY_DEFAULT 18u
#define CHAL_DIFFICULTY_MAX 28u
#define CHAL_TTL_DEFAULT_S 86400u
#define CHAL_TTL_MIN_S 60u
#define CHAL_TTL_MAX_S (30u * 86400u)
#define CHAL_TOKEN_TTL_S 600u /* a page's token is good this long */
#define CHAL_FLAG_S 600u      /* on_rate_limit: challenged this long */
#define CHAL_KEY_LEN 32
#define CHAL_TOKEN_MAX 96 /* with its NUL */
#define CHAL_PASS_MAX 48  /* with its NUL */
#define CHAL_PATH "/_edge/challenge"
#define CHAL_COOKIE "edge_pass"		   /* over plain HTTP */
#define CHAL_COOKIE_TLS "__Host-edge_pass" /* over HTTPS */

/* An environment's challenge settings (config `challenge`, the database's
 * environments.challenge_*). */
struct config_challenge {
	enum chal_mode mode;
	unsigned difficulty; /* leading zero bits, 1..CHAL_DIFFICULTY_MAX */
	uint32_t ttl_s;	     /* a pass's life */
};

struct chal_keys {
	unsigned n; /* 0..2; 0: none */
	uint8_t k[2][CHAL_KEY_LEN];
};

/* How a token, a solution or a pass checked out. */
enum chal_check {
	CHAL_GOOD = 0,
	CHAL_ABSENT,	/* no pass cookie */
	CHAL_MALFORMED, /* not a token or pass edge makes */
	CHAL_FORGED,	/* signed by no key for this environment and client
			   prefix: tampered, another client's or another
			   environment's */
	CHAL_EXPIRED,	/* a token or pass past its time */
	CHAL_UNSOLVED,	/* the solution's hash is short of zero bits */
	CHAL_REPLAYED,	/* a solution exchanged before */
	CHAL_CHECK_MAX
};

const char *chal_mode_name(enum chal_mode m);
/* "off", "new_ip", "on_rate_limit", "always": 0, or -EINVAL. */
int chal_mode_parse(const char *s, enum chal_mode *m);
/* The metric label of a failed check ("forged", "expired", ...). */
const char *chal_check_name(enum chal_check c);

/* The prefix a pass is bound to: peer's /24 or /64. */
void chal_prefix(const struct cidr *peer, struct cidr *out);

/* Parse a key file's text: one or two lines, each 64 hex digits (32
 * bytes); the first signs. 0, or -EINVAL with err (len bytes) set. */
int chal_keys_parse(const char *text, size_t len, struct chal_keys *out,
		    char *err, size_t errlen);

/* One key of the database's challenge_keys (migration 0023). */
struct chal_key_row {
	int64_t id;
	uint8_t k[CHAL_KEY_LEN];
	int64_t signs_from; /* unix s */
};

/*
 * The keys of rows v[0..n) at unix time now: the newest row whose
 * signs_from has come signs (k[0]); the next to start signing, else the
 * one that signed before it, verifies too (k[1]). *signer and *other are
 * their ids (0: none); *next is the next signs_from after now (0: none),
 * when the choice changes. out->n is 0 when no row signs yet.
 */
void chal_keys_pick(const struct chal_key_row *v, size_t n, int64_t now,
		    struct chal_keys *out, int64_t *signer, int64_t *other,
		    int64_t *next);

/* The database's keys for the workers (worker_settings_from takes them
 * when there is no key file): set by the control loop, read under a
 * lock. keys->n 0: none. */
void chal_db_keys_set(const struct chal_keys *keys);
void chal_db_keys_get(struct chal_keys *out);

/* A token for env and prefix, expiring at now + CHAL_TOKEN_TTL_S, signed
 * with keys->k[0] (keys->n >= 1): into out (CHAL_TOKEN_MAX). Returns its
 * length, or 0 when randomness failed. */
size_t chal_token_make(const struct chal_keys *keys, const char *env,
		       const struct cidr *prefix, unsigned difficulty,
		       uint64_t now, char *out);

/* Check a solution: token (tlen bytes) and the decimal n (nlen). GOOD,
 * MALFORMED, FORGED, EXPIRED or UNSOLVED; on GOOD *tag identifies the
 * token for the replay table and *until is its expiry. */
enum chal_check chal_solution_check(const struct chal_keys *keys,
				    const char *env, const struct cidr *prefix,
				    const char *token, size_t tlen,
				    const char *n, size_t nlen, uint64_t now,
				    uint64_t *tag, uint64_t *until);

/* A pass for env and prefix expiring at exp: into out (CHAL_PASS_MAX).
 * Returns its length. */
size_t chal_pass_make(const struct chal_keys *keys, const char *env,
		      const struct cidr *prefix, uint64_t exp, char *out);

/* The pass cookies among h's Cookie fields, CHAL_COOKIE_TLS's (no other
 * site can set one) and CHAL_COOKIE's, the first CHAL_PASSES_TRIED of
 * each name: GOOD when one is valid for env and
 * prefix at now (*exp its expiry), else the first failure (FORGED,
 * EXPIRED, MALFORMED), or ABSENT. */
#define CHAL_PASSES_TRIED 4
enum chal_check chal_pass_find(const struct chal_keys *keys, const char *env,
			       const struct cidr *prefix,
			       const struct h1_head *h, uint64_t now,
			       uint64_t *exp);

/* The value of query parameter name in q (qlen bytes, without the '?'):
 * *v and *vlen, undecoded. Returns whether it is there. */
bool chal_query_param(const char *q, size_t qlen, const char *name,
		      const char **v, size_t *vlen);

/* Percent-decode the return path r (rlen bytes) into out (len bytes,
 * NUL-terminated). It must decode to a local path: '/' first, not "//"
 * or "/\\", printable ASCII only. Returns 0, or -EINVAL ("/" written). */
int chal_return_path(const char *r, size_t rlen, char *out, size_t len);

/* The challenge page (malloc'd, *len bytes and a NUL): the HTML template with
 * the token, the difficulty and the return path (JSON-escaped) filled in. NULL
 * when out of memory. */
char *chal_page(const char *token, unsigned difficulty, const char *ret,
		size_t *len);

/* The Content-Security-Policy the page is served with. */
extern const char chal_page_csp[];

/* ---- one host's memory ------------------------------------------------- */

/* A bounded set of 64-bit keys, each with an expiry (seconds); 8-way sets
 * of slots, a full set forgetting the key nearest its expiry. Thread-safe. */
struct chal_table;

struct chal_table *chal_table_new(size_t slots);
void chal_table_free(struct chal_table *t);
/* Whether key is in t and not expired at now. */
bool chal_table_has(struct chal_table *t, uint64_t key, uint64_t now);
/* Put key in until `until`. Returns false when it was there already and
 * not expired (the expiry then kept). */
bool chal_table_add(struct chal_table *t, uint64_t key, uint64_t until,
		    uint64_t now);
/* Keys there, not expired at now. */
size_t chal_table_count(struct chal_table *t, uint64_t now);

/* The key of (env, prefix) in a table, tagged by what it records. */
uint64_t chal_table_key(char what, const char *env, const struct cidr *prefix);

/* ---- this process's own (every worker's) ----------------------------- */

/* What became of challenged requests: the metric
 * edge_challenge_total{result}. */
enum chal_result {
	CHAL_R_ISSUED = 0, /* a page or a 403 challenge_required */
	CHAL_R_SOLVED,	   /* a solution exchanged for a pass */
	CHAL_R_PASSED,	   /* a request admitted by its pass (or prefix) */
	CHAL_R_FAILED,	   /* a bad solution or pass: challenged again */
	CHAL_R_MAX
};

const char *chal_result_name(enum chal_result r);
void chal_count(enum chal_result r);
uint64_t chal_total(enum chal_result r);
/* A failed check, by why: edge_challenge_failures_total{reason}. */
void chal_fail_count(enum chal_check c);
uint64_t chal_fail_total(enum chal_check c);

/* The key made at the first call, for a host with no key file: passes
 * end when edged does. */
const struct chal_keys *chal_random_keys(void);

/* This process's tables, each of 65,536 slots, made at the first call. */
enum chal_mem {
	CHAL_USED,  /* the solutions exchanged (a replay refused) */
	CHAL_SEEN,  /* the client prefixes that showed a pass (new_ip) */
	CHAL_FLAGS, /* those flagged by the rate limit (on_rate_limit) */
	CHAL_MEMS
};

/* Table m; NULL when out of memory. */
struct chal_table *chal_mem(enum chal_mem m);

/* edgectl challenge ENV on|off: the environment's mode is always while
 * on, whatever its configuration says; kept across reloads. */
#define CHAL_FORCED_MAX 4096
int chal_force(const char *env, bool on); /* 0, -ENOSPC, -EINVAL */
bool chal_forced(const char *env);
/* The environments forced on, each into fn. */
void chal_forced_each(void (*fn)(void *arg, const char *env), void *arg);

#endif /* EDGE_CHALLENGE_H */
