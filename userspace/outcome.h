/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * outcome.h - how a request or tunnel ended: the one table of outcomes.
 *
 * Every request ends in one function that records exactly one outcome.
 * Each outcome has a stable machine name (the JSON error's "error", the
 * analytics "outcome" and a metric label), the HTTP status edge answers
 * with, and the operator-facing reason string. The reason strings live
 * here and nowhere else.
 *
 * The statuses are errors (4xx, 5xx) but for acme_challenge (200, the key
 * authorization as text/plain), https_redirect (308, with
 * a Location), redirect (a Location, and the rule's status: 301 here,
 * 302, 307 or 308 by req's own_status), challenge_passed (303, a
 * Location and the pass cookie) and auth_redirect (the authorization
 * service's 3xx, relayed). auth_denied relays that service's 401 or 403. Status
 * 0 means edge writes no status of its own: the upstream's status is relayed
 * (ok), or no response is written at all (client_closed; tunnel's 101 came from
 * the upstream). outcome_status() says so; only outcomes with
 * outcome_sends_error() true owe the client a JSON error body.
 *
 * Names are recorded in analytics and exported as metric labels: append
 * new outcomes, never rename one.
 */
#ifndef EDGE_OUTCOME_H
#define EDGE_OUTCOME_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* X(ID, name, status, reason) */
#define EDGE_OUTCOMES(X)                                                       \
	X(OK, "ok", 0, "response relayed from the upstream")                   \
	X(DOMAIN_NOT_FOUND, "domain_not_found", 503,                           \
	  "no project serves this host name")                                  \
	X(PROJECT_DISABLED, "project_disabled", 403,                           \
	  "this project is disabled")                                          \
	X(IP_DENIED, "ip_denied", 403,                                         \
	  "your address is not allowed to reach this project")                 \
	X(RATE_LIMITED, "rate_limited", 429,                                   \
	  "too many requests from your address, retry later")                  \
	X(BODY_TOO_LARGE, "body_too_large", 413,                               \
	  "the request body is larger than this route allows")                 \
	X(HEADER_TIMEOUT, "header_timeout", 408,                               \
	  "the request head did not arrive in time")                           \
	X(BAD_REQUEST, "bad_request", 400, "the request is malformed")         \
	X(URI_TOO_LONG, "uri_too_long", 414, "the request line is too long")   \
	X(HEADERS_TOO_LARGE, "headers_too_large", 431,                         \
	  "the request headers are too large or too many")                     \
	X(NOT_IMPLEMENTED, "not_implemented", 501,                             \
	  "the request uses a feature edge does not implement")                \
	X(VERSION_NOT_SUPPORTED, "version_not_supported", 505,                 \
	  "only HTTP/1.0 and HTTP/1.1 are supported")                          \
	X(EXPECTATION_FAILED, "expectation_failed", 417,                       \
	  "the Expect header's expectation cannot be met")                     \
	X(OVERLOADED, "overloaded", 503,                                       \
	  "too many requests in flight, retry later")                          \
	X(WAKE_THROTTLED, "wake_throttled", 503,                               \
	  "too many environments are waking, retry later")                     \
	X(WAKE_PENDING, "wake_pending", 503,                                   \
	  "the environment is still waking up, retry shortly")                 \
	X(UPSTREAM_UNAVAILABLE, "upstream_unavailable", 502,                   \
	  "no upstream endpoint could be reached")                             \
	X(UPSTREAM_TIMEOUT, "upstream_timeout", 504,                           \
	  "the upstream did not answer in time")                               \
	X(UPSTREAM_BAD_RESPONSE, "upstream_bad_response", 502,                 \
	  "the upstream answered with nothing or with an invalid response")    \
	X(CLIENT_CLOSED, "client_closed", 0,                                   \
	  "the client closed the connection before the response")              \
	X(TUNNEL, "tunnel", 0,                                                 \
	  "the tunnel (an upgraded connection, or a TCP route's) was closed")  \
	X(SHUTTING_DOWN, "shutting_down", 503, "edge is shutting down")        \
	X(CONNECTION_LIMIT, "connection_limit", 503,                           \
	  "too many open connections, retry later")                            \
	X(INTERNAL_ERROR, "internal_error", 500, "edge failed internally")     \
	X(BODY_TIMEOUT, "body_timeout", 408,                                   \
	  "the request body did not arrive in time or arrived too slowly")     \
	X(UPSTREAM_CLOSED, "upstream_closed", 502,                             \
	  "the upstream closed a reused connection after the request was "     \
	  "sent, before answering")                                            \
	X(FD_EXHAUSTED, "fd_exhausted", 503,                                   \
	  "edge has run out of file descriptors, retry later")                 \
	X(LOOP_DETECTED, "loop_detected", 508,                                 \
	  "the request came back to edge: its upstream leads to edge itself")  \
	X(ENVIRONMENT_NOT_FOUND, "environment_not_found", 0,                   \
	  "the TCP route's environment is in no route source: the "            \
	  "connection was closed")                                             \
	X(CLIENT_HELLO_TIMEOUT, "client_hello_timeout", 0,                     \
	  "no TLS ClientHello arrived in time on a TLS passthrough route: "    \
	  "the connection was closed")                                         \
	X(CLIENT_HELLO_INVALID, "client_hello_invalid", 0,                     \
	  "what arrived on a TLS passthrough route is not a valid TLS "        \
	  "ClientHello: the connection was closed")                            \
	X(SNI_UNKNOWN, "sni_unknown", 0,                                       \
	  "no TLS passthrough route on the address has the ClientHello's "     \
	  "server name, and none is its default: the connection was closed")   \
	X(SNI_MISSING, "sni_missing", 0,                                       \
	  "the ClientHello names no server, and no TLS passthrough route on "  \
	  "the address is its default: the connection was closed")             \
	X(HTTPS_REDIRECT, "https_redirect", 308,                               \
	  "this site is served over HTTPS: follow the Location")               \
	X(WAKE_FAILED, "wake_failed", 503,                                     \
	  "the environment could not be woken up, retry later")                \
	X(ENVIRONMENT_RESTARTING, "environment_restarting", 503,               \
	  "the environment is restarting, retry shortly")                      \
	X(METHOD_NOT_ALLOWED, "method_not_allowed", 405,                       \
	  "this method is not allowed here (CONNECT over HTTP/2)")             \
	X(UPSTREAM_TLS_FAILED, "upstream_tls_failed", 502,                     \
	  "the upstream's TLS handshake or certificate failed")                \
	X(REDIRECT, "redirect", 301,                                           \
	  "this address has moved: follow the Location")                       \
	X(ROUTE_NOT_FOUND, "route_not_found", 404,                             \
	  "no route of this site serves this path")                            \
	X(CHALLENGE_REQUIRED, "challenge_required", 403,                       \
	  "this site asks for a proof-of-work challenge first: open it in a "  \
	  "browser, or present a pass")                                        \
	X(CHALLENGE_PASSED, "challenge_passed", 303,                           \
	  "the challenge is solved: follow the Location")                      \
	X(UNAUTHORIZED, "unauthorized", 401,                                   \
	  "this site needs a valid API key or bearer token")                   \
	X(AUTH_DENIED, "auth_denied", 401,                                     \
	  "the site's authorization service refused this request")             \
	X(AUTH_REDIRECT, "auth_redirect", 302,                                 \
	  "sign in first: follow the Location")                                \
	X(AUTH_UNAVAILABLE, "auth_unavailable", 503,                           \
	  "the site's authorization service did not answer, retry later")      \
	X(TOO_EARLY, "too_early", 425,                                         \
	  "this request came in TLS early data (0-RTT) and may change "        \
	  "something: send it again once the handshake is done")               \
	X(ACME_CHALLENGE, "acme_challenge", 200,                               \
	  "an ACME http-01 challenge answered by edge")                        \
	X(ENVIRONMENT_SLEEPING, "environment_sleeping", 503,                   \
	  "the environment is asleep and this path does not wake it")          \
	X(DEADLINE_EXCEEDED, "deadline_exceeded", 504,                         \
	  "the upstream did not answer within the request's deadline")         \
	X(CIRCUIT_OPEN, "circuit_open", 503,                                   \
	  "the deployment's upstream is failing and its circuit is open, "     \
	  "retry later")

enum outcome {
#define OUTCOME_ENUM(id, name, status, reason) OUTCOME_##id,
	EDGE_OUTCOMES(OUTCOME_ENUM)
#undef OUTCOME_ENUM
	    OUTCOME_MAX
};

/* The HTTP status recorded for a tunnel (the upstream's 101). */
#define OUTCOME_TUNNEL_STATUS 101
/* The status recorded (never sent) when the client went away first. */
#define OUTCOME_CLIENT_CLOSED_STATUS 499

/* The outcome's machine name ("domain_not_found"); "unknown" for a value
 * outside the table. Never NULL. */
const char *outcome_name(enum outcome o);

/* The status edge answers with (100..599), or 0 when edge writes no
 * status of its own (ok, client_closed, tunnel) or o is out of range. */
int outcome_status(enum outcome o);

/* The reason string for people; "unknown outcome" out of range. Never
 * NULL. */
const char *outcome_reason(enum outcome o);

/* Whether ending a request with o owes the client an error response
 * (status and JSON body): true exactly when outcome_status(o) != 0. */
bool outcome_sends_error(enum outcome o);

/* Look an outcome up by machine name. Returns 0 and sets *o, or -ENOENT. */
int outcome_from_name(const char *name, enum outcome *o);

/*
 * Write the JSON error body for o into buf (len bytes, NUL-terminated):
 *   {"error":"<name>","message":"<reason>","request_id":"<id>"}
 * request_id may be NULL or empty (then it is ""), and is escaped: '"',
 * '\\' and control characters as JSON escapes, and bytes outside printable
 * ASCII as \ufffd, so the body is valid JSON whatever the id holds. Never
 * allocates. Returns the body's length (without the NUL), or -ENOSPC when
 * it does not fit (buf then holds an empty string if len > 0).
 */
ssize_t outcome_error_body(enum outcome o, const char *request_id, char *buf,
			   size_t len);

/* The outcome of a request head the HTTP/1.1 parser refused with
 * status (h1.h's: 400, 414, 417, 431, 501, 505). */
enum outcome outcome_of_parse(int status);

#endif /* EDGE_OUTCOME_H */
