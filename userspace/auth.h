/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * auth.h - the credential gate: API keys and JSON Web Tokens, checked
 * before the rate limit and admission (docs/gates.md).
 *
 * The same gate may ask an authorization service too, after admission
 * (auth_request: fauth.h); req.c runs that step.
 *
 * A gate is built once from an environment's or a route's configuration
 * (auth_gate_new, then the auth_gate_* setters) and is immutable after
 * that: workers share it through references (auth_gate_get / _put).
 *
 * The credential: "Authorization: Bearer T", else "X-Api-Key: T" (API
 * keys only). A T of three dot-separated parts is a JWT when the gate
 * takes JWTs; anything else is an API key when it takes keys.
 *
 * API keys are kept as SHA-256 digests with a name (the file's lines
 * "NAME HEX"); a presented key is hashed and looked up. JWTs are checked
 * with OpenSSL: the header's alg must be one the gate allows and match
 * the key's type (an HMAC alg needs a JWKS "oct" key, so a public key is
 * never taken for an HMAC secret; "none" is never allowed; a kid picks
 * the keys of that kid and those without one, AUTH_TRIES_MAX of them at
 * most), the
 * signature, then exp and nbf (with leeway), iss and aud when set.
 */
#ifndef EDGE_AUTH_H
#define EDGE_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "log.h"

struct fauth_conf;
struct h1_head;

#define AUTH_KEYS_MAX 100000	  /* API keys in one file */
#define AUTH_KEY_NAME_MAX 63	  /* an API key's name */
#define AUTH_KEY_TEXT_MAX 512	  /* a presented key's characters */
#define AUTH_TOKEN_MAX 8192	  /* a presented JWT's characters */
#define AUTH_JWKS_MAX 64	  /* keys of one JWKS or PEM file */
#define AUTH_CLAIMS_MAX 16	  /* jwt.copy_claims */
#define AUTH_CLAIM_NAME_MAX 48	  /* a copied claim's name */
#define AUTH_CLAIM_VALUE_MAX 1024 /* a copied claim's value, as sent */
#define AUTH_LEEWAY_MAX_S 600
#define AUTH_TRIES_MAX 4 /* keys a token's signature is checked with */
#define AUTH_CLAIM_PREFIX "X-Jwt-Claim-"
#define AUTH_KEY_NAME_FIELD "X-Api-Key-Name"

/* JWS algorithms (RFC 7518), each a bit of a gate's allowed set. */
#define AUTH_ALGS(X)                                                           \
	X(RS256)                                                               \
	X(RS384)                                                               \
	X(RS512)                                                               \
	X(PS256)                                                               \
	X(PS384)                                                               \
	X(PS512)                                                               \
	X(ES256)                                                               \
	X(ES384)                                                               \
	X(EdDSA)                                                               \
	X(HS256)                                                               \
	X(HS384)                                                               \
	X(HS512)
#define AUTH_ALG_ENUM(a) AUTH_ALG_##a,
enum auth_alg { AUTH_ALGS(AUTH_ALG_ENUM) AUTH_ALG_N };
#define AUTH_ALGS_DEFAULT                                                      \
	(1u << AUTH_ALG_RS256 | 1u << AUTH_ALG_ES256 | 1u << AUTH_ALG_EdDSA)

/* An alg's name, and its number by name (-1: not one edge checks). */
const char *auth_alg_name(enum auth_alg a);
int auth_alg_parse(const char *s, size_t n);

/* How a request was let in (the analytics "auth" field), or why not. */
#define AUTH_METHODS(X)                                                        \
	X(NONE, "") X(API_KEY, "api_key") X(JWT, "jwt") X(FORWARD, "forward")
#define AUTH_METHOD_ENUM(id, name) AUTH_M_##id,
enum auth_method { AUTH_METHODS(AUTH_METHOD_ENUM) AUTH_M__COUNT };
const char *auth_method_name(enum auth_method m);

/* A check's result: ok, or why a request is refused (a metric label). */
#define AUTH_RESULTS(X)                                                        \
	X(OK, "ok")                                                            \
	X(MISSING, "missing")                                                  \
	X(MALFORMED, "malformed")                                              \
	X(UNKNOWN_KEY, "unknown_key")                                          \
	X(ALG_REFUSED, "alg_refused")                                          \
	X(BAD_SIGNATURE, "bad_signature")                                      \
	X(EXPIRED, "expired")                                                  \
	X(NOT_YET_VALID, "not_yet_valid")                                      \
	X(WRONG_ISSUER, "wrong_issuer")                                        \
	X(WRONG_AUDIENCE, "wrong_audience")                                    \
	X(DENIED, "denied")                                                    \
	X(REDIRECTED, "redirected")                                            \
	X(UNAVAILABLE, "unavailable")
#define AUTH_RESULT_ENUM(id, name) AUTH_R_##id,
enum auth_result { AUTH_RESULTS(AUTH_RESULT_ENUM) AUTH_R__COUNT };
const char *auth_result_name(enum auth_result r);

struct auth_gate;

/* An empty gate (it takes nothing: add keys or a JWT check), or NULL. */
struct auth_gate *auth_gate_new(void);
struct auth_gate *auth_gate_get(struct auth_gate *g); /* g may be NULL */
void auth_gate_put(struct auth_gate *g);	      /* g may be NULL */

/* The API keys of file text buf (n bytes): lines "NAME HEX" (HEX the
 * SHA-256 of the key, 64 hex digits), '#' comments and blank lines.
 * 0, or -EINVAL with err naming the line, or -ENOMEM. An empty list is
 * allowed: every key is then refused. */
int auth_gate_api_keys(struct auth_gate *g, const char *buf, size_t n,
		       struct errbuf *err);

/* One API key (the database's rows): name as a file's, hex its SHA-256
 * in 64 hex digits. The gate takes keys from then on. 0, -EINVAL with
 * err (a bad name or digest: only this key left out), or -ENOMEM. Keys
 * added so are looked up once auth_gate_keys_seal has run (before the
 * gate is shared). */
int auth_gate_key_add(struct auth_gate *g, const char *name, const char *hex,
		      struct errbuf *err);
/* Sort the keys added; a digest given twice keeps its first name.
 * Returns how many were dropped as duplicates. */
size_t auth_gate_keys_seal(struct auth_gate *g);

/* The JWT check from a JSON object (the database's environments.jwt):
 * {"keys": a JWKS object or a string of PEM, "issuer", "audience",
 * "algorithms": [...], "leeway": "30s", "copy_claims": [...]}, checked
 * as the file's group. 0, -EINVAL with err, -ENOMEM. */
int auth_gate_jwt_json(struct auth_gate *g, const json_t *o,
		       struct errbuf *err);

/* The JWT check: keys from buf (n bytes, a JWKS document or PEM public
 * keys / certificates), the allowed algs (a mask), issuer and audience
 * (NULL: not checked), leeway in seconds. 0, or -EINVAL with err, or
 * -ENOMEM. An alg none of the keys can check is an error. */
int auth_gate_jwt(struct auth_gate *g, const char *buf, size_t n, unsigned algs,
		  const char *issuer, const char *audience, unsigned leeway_s,
		  struct errbuf *err);

/* A claim to copy into X-Jwt-Claim-NAME for the upstream: a name of
 * letters, digits, '_' and '-' (at most AUTH_CLAIM_NAME_MAX). 0,
 * -EINVAL (bad name, too many) with err, or -ENOMEM. */
int auth_gate_copy_claim(struct auth_gate *g, const char *name,
			 struct errbuf *err);

/* Forward auth (fauth.h) for g's requests, after admission: g owns c
 * from now on (freed with it). */
void auth_gate_forward(struct auth_gate *g, struct fauth_conf *c);
/* g's forward auth, NULL: none. */
const struct fauth_conf *auth_gate_fwd(const struct auth_gate *g);
/* Whether g checks an API key or a JWT (before the rate limit). */
bool auth_gate_checks(const struct auth_gate *g);

/* What g takes, for edgectl routes: JSON null (g NULL), or
 * {"api_keys": N | null, "jwt": {"keys", "algorithms", "issuer",
 * "audience", "leeway_s", "copy_claims"} | null, "auth_request":
 * fauth_conf_json | null}; NULL out of memory. */
json_t *auth_gate_json(const struct auth_gate *g);

/* A check's outcome. fields: header lines for the upstream
 * ("X-Jwt-Claim-sub: u1\r\n", "X-Api-Key-Name: ci\r\n"), malloc'd, or
 * NULL; the caller frees it with free(). */
struct auth_out {
	enum auth_method method; /* what was presented (NONE: nothing) */
	char *fields;
	size_t fields_len;
};

/* Check h's credential against g at unix time now. AUTH_R_OK or why
 * not, with out filled (out->fields only on OK; -ENOMEM there is
 * reported as MALFORMED's neighbour: OK with no fields is never
 * returned for a gate with claims to copy, the request is refused as
 * MALFORMED). */
enum auth_result auth_check(const struct auth_gate *g, const struct h1_head *h,
			    uint64_t now, struct auth_out *out);

/* Whether a request field of that name (n bytes) is one edge sets from
 * a check (X-Jwt-Claim-*, X-Api-Key-Name; case aside, '_' read as '-'):
 * a client's own is dropped. */
bool auth_field_reserved(const char *name, size_t n);

/* The WWW-Authenticate value for a refusal with r (RFC 6750). */
const char *auth_challenge_header(enum auth_result r);

/* Requests the gates checked, by method and result (metrics). */
void auth_count(enum auth_method m, enum auth_result r);
uint64_t auth_total(enum auth_method m, enum auth_result r);

#endif /* EDGE_AUTH_H */
