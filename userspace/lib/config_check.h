/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * config_check.h - the checks of one value of a project, an environment,
 * a deployment or a route that need no configuration file: domains,
 * endpoints, path prefixes, ids, display names, IP rules, balancing modes,
 * security header values and durations.
 *
 * Pure functions over strings (and, for a health_check, a JSON object),
 * with no libconfig (neither this header nor config_check.c includes
 * libconfig.h): the file loader (config_value.c)
 * calls them for every value it reads, and any other source of projects
 * (the PostgreSQL loader) calls the same ones on its rows, so that a value
 * is accepted from the database exactly when it would be from the file.
 * Each returns 0, or -EINVAL with err saying what was wrong, without file
 * or key (the caller knows where the value came from and prefixes it).
 */
#ifndef EDGE_CONFIG_CHECK_H
#define EDGE_CONFIG_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include <stdint.h>
#include <sys/socket.h>

#include "log.h"
#include "rules.h"

/* Bounds, so that no source can ask for unbounded work. */
#define CONFIG_UPSTREAMS_MAX 64
#define CONFIG_ID_MAX 64      /* bytes of a project/environment/deployment id */
#define CONFIG_NAME_MAX 128   /* bytes of a display name */
#define CONFIG_PREFIX_MAX 256 /* bytes of a route's path prefix */
#define CONFIG_HOST_MAX 253
/* the longest duration in milliseconds (the timeouts) */
#define CONFIG_DURATION_MAX_MS (7ULL * 24 * 3600 * 1000)

/* Text of an endpoint, canonical form: "ADDR:PORT", "[V6]:PORT",
 * "https://ADDR:PORT", "unix:/PATH" (the longest Unix socket path). */
#define CONFIG_ADDR_STR_MAX 128

/* What an upstream endpoint speaks: the scheme of its address
 * (config_endpoint_parse). The transport is the endpoint's, chosen after
 * the balancer picked it. */
enum config_scheme {
	CONFIG_SCHEME_HTTP = 0, /* "ADDR:PORT", "http://ADDR:PORT": HTTP/1.1 */
	CONFIG_SCHEME_HTTPS, /* "https://ADDR:PORT": TLS, ALPN h2, http/1.1 */
	CONFIG_SCHEME_H2C,   /* "h2c://ADDR:PORT": HTTP/2, prior knowledge */
	CONFIG_SCHEME_UNIX,  /* "unix:/PATH": HTTP/1.1 over a Unix socket */
	CONFIG_SCHEME_N,
};

/* A mask of schemes (1u << enum config_scheme). */
#define CONFIG_SCHEMES_ALL ((1u << CONFIG_SCHEME_N) - 1)
/* The schemes edged's upstream connections speak (file and database). */
#define CONFIG_SCHEMES_EDGED                                                   \
	((1u << CONFIG_SCHEME_HTTP) | (1u << CONFIG_SCHEME_HTTPS) |            \
	 (1u << CONFIG_SCHEME_H2C) | (1u << CONFIG_SCHEME_UNIX))

/* A file path in the configuration (CA, certificate, key): longest. */
#define CONFIG_PATH_MAX 256

/* A deployment's TLS to its https:// endpoints (its tls group). Plain
 * data: copied with the deployment; all zero: verified against the
 * system's store, the request's host as the server name. */
struct config_up_tls {
	bool no_verify;			       /* verify = false was said */
	char server_name[CONFIG_HOST_MAX + 1]; /* "": the request's host */
	char ca[CONFIG_PATH_MAX];	       /* "": the system's store */
	char cert[CONFIG_PATH_MAX];	       /* mTLS: both or neither */
	char key[CONFIG_PATH_MAX];
	/* a database row's group that was refused (a bad value, a file
	 * that cannot be read): its https:// endpoints are never tried
	 * (502 upstream_tls_failed), never tried without it */
	bool refused;
};

/* A numeric socket address (no DNS, ever: workers must not block). */
struct config_addr {
	struct sockaddr_storage ss; /* sockaddr_in, _in6 or _un */
	socklen_t len;
	enum config_scheme scheme; /* an endpoint's; listen addresses: HTTP */
	char text[CONFIG_ADDR_STR_MAX]; /* "10.0.0.1:80", "[::1]:80" */
	/* a listen address's connections begin with a PROXY protocol
	 * header (proxyproto.h) */
	bool proxy_protocol;
};

/* A deployment's active health check (health_check; docs/upstream.md):
 * none, a TCP connect, or an HTTP GET of path expecting expect_status. */
enum config_hc_type {
	CONFIG_HC_NONE = 0,
	CONFIG_HC_TCP,
	CONFIG_HC_HTTP,
};

/* health_check.path: longest, bytes */
#define CONFIG_HC_PATH_MAX 256

struct config_health_check {
	enum config_hc_type type;
	char path[CONFIG_HC_PATH_MAX]; /* http: "/..." */
	uint64_t interval_ms;	       /* between the starts of two checks */
	uint64_t timeout_ms;	       /* one check, connect to status line */
	unsigned expect_status;	       /* http */
	unsigned rise;		       /* successes that bring it back */
	unsigned fall;		       /* failures that take it out */
};

/* health_check's keys, in the order they are checked. */
enum config_hc_key {
	CONFIG_HC_KEY_TYPE = 0,
	CONFIG_HC_KEY_PATH,
	CONFIG_HC_KEY_INTERVAL,
	CONFIG_HC_KEY_TIMEOUT,
	CONFIG_HC_KEY_EXPECT_STATUS,
	CONFIG_HC_KEY_RISE,
	CONFIG_HC_KEY_FALL,
	CONFIG_HC_NKEYS,
};

/* Their names ("type", "path", ...), NULL-terminated. */
extern const char *const config_hc_keys[CONFIG_HC_NKEYS + 1];

/* What a source holds under one key, as it read it (the file's libconfig
 * setting, the database's JSON member), before any check. */
enum config_value_kind {
	CONFIG_VALUE_ABSENT = 0,
	CONFIG_VALUE_STRING,
	CONFIG_VALUE_INT,
	CONFIG_VALUE_BOOL,  /* b; text "a boolean" */
	CONFIG_VALUE_OTHER, /* any other type: text says which */
};

#define CONFIG_VALUE_ITEMS_MAX 16

struct config_value {
	enum config_value_kind kind;
	const char *str; /* CONFIG_VALUE_STRING */
	/* CONFIG_VALUE_INT as written: its magnitude (when not big), its
	 * sign, and whether it needs more than 64 bits */
	uint64_t mag;
	bool neg, big;
	bool b; /* CONFIG_VALUE_BOOL */
	/* CONFIG_VALUE_INT: the integer as written; CONFIG_VALUE_OTHER and
	 * CONFIG_VALUE_BOOL: what it is ("a float", "a list") */
	const char *text;
	/* CONFIG_VALUE_OTHER that is a list: its first n_items items (a
	 * string each, NULL for any other type), more_items when it has
	 * more than CONFIG_VALUE_ITEMS_MAX */
	bool list, more_items;
	const char *items[CONFIG_VALUE_ITEMS_MAX];
	size_t n_items;
};

/*
 * A health_check from the values of its keys (v[CONFIG_HC_KEY_*]): the
 * one check of the file's group and the database's deployments column,
 * so that both accept the same values with the same defaults. type is
 * required ("http" or "tcp"); path "/" (http only: a string starting
 * with '/', no spaces or control characters, < CONFIG_HC_PATH_MAX
 * bytes); interval "2s" (100ms..1h); timeout "1s" (10ms..1m, at most
 * interval); expect_status 200 (100..599); rise 2 and fall 3 (1..100).
 * Durations are strings (config_duration_parse), the others integers.
 * Returns 0 with *hc, or -EINVAL with err (the message without the key)
 * and *key the index of the key at fault, or -1 when the fault is the
 * group's (timeout longer than interval).
 */
int config_health_check_of(const struct config_value v[CONFIG_HC_NKEYS],
			   struct config_health_check *hc, int *key,
			   struct errbuf *err);

/*
 * A health_check given as a JSON object (the database's
 * deployments.health_check, the local snapshot's copy): the same keys,
 * values and defaults as the file's group (config_health_check_of). Not
 * an object, or an unknown key, is refused too. Returns 0 with *hc, or
 * -EINVAL with err ("interval: ...", "foo: unknown key", "expected a JSON
 * object, found an array").
 */
int config_health_check_json(const json_t *o, struct config_health_check *hc,
			     struct errbuf *err);

/* hc (not CONFIG_HC_NONE) as the JSON object config_health_check_json
 * reads back to the same hc: a new reference, NULL when out of memory. */
json_t *config_health_check_to_json(const struct config_health_check *hc);

/* A deployment's tls group's keys, in the order they are checked. */
enum config_up_tls_key {
	CONFIG_UP_TLS_KEY_VERIFY = 0,
	CONFIG_UP_TLS_KEY_SERVER_NAME,
	CONFIG_UP_TLS_KEY_CA,
	CONFIG_UP_TLS_KEY_CERT,
	CONFIG_UP_TLS_KEY_KEY,
	CONFIG_UP_TLS_NKEYS,
};

/* Their names ("verify", "server_name", ...), NULL-terminated. */
extern const char *const config_up_tls_keys[CONFIG_UP_TLS_NKEYS + 1];

/*
 * A deployment's tls group from the values of its keys
 * (v[CONFIG_UP_TLS_KEY_*]): the one check of the file's group and the
 * database's deployments.tls. verify a boolean (default true);
 * server_name a host name as a domain is written or a numeric address
 * (default: the request's host); ca, cert, key absolute paths shorter
 * than CONFIG_PATH_MAX (default: the system's store, no client
 * certificate), cert and key both or neither. The files are not read
 * here (tls_up.h). Returns 0 with *t, or -EINVAL with err and *key the
 * index of the key at fault, or -1 when the fault is the group's.
 */
int config_up_tls_of(const struct config_value v[CONFIG_UP_TLS_NKEYS],
		     struct config_up_tls *t, int *key, struct errbuf *err);

/* The same group as a JSON object (the database's deployments.tls, the
 * local snapshot's copy): not an object, or an unknown key, is refused
 * too. 0 with *t, or -EINVAL with err ("ca: ..."). */
int config_up_tls_json(const json_t *o, struct config_up_tls *t,
		       struct errbuf *err);

/* t as the JSON object config_up_tls_json reads back to the same t (the
 * keys set only): a new reference, NULL when out of memory. */
json_t *config_up_tls_to_json(const struct config_up_tls *t);

/* How a deployment's endpoints are chosen (Select). */
enum config_balance {
	CONFIG_BALANCE_ROUND_ROBIN = 0,
	CONFIG_BALANCE_LEAST_INFLIGHT,
	CONFIG_BALANCE_IP_HASH,
};

/* send_proxy: the PROXY protocol header (proxyproto.h) edged writes
 * first on each new connection to an upstream. A deployment's is "off"
 * (the default), "v1" or "v2"; a TCP route's the same or unset (its
 * deployment's). */
enum config_send_proxy {
	CONFIG_SEND_PROXY_INHERIT = 0, /* unset: the deployment's (or off) */
	CONFIG_SEND_PROXY_OFF,
	CONFIG_SEND_PROXY_V1,
	CONFIG_SEND_PROXY_V2,
};

/*
 * Parse a numeric endpoint "A.B.C.D:PORT" or "[IPV6]:PORT", port 1..65535,
 * into *out (canonical text included). IPv4 is strict (four decimal
 * octets, no leading zeros); IPv6 zone ids are refused; a host name is
 * refused, never resolved. Returns 0 or -EINVAL with err set.
 */
int config_addr_parse(const char *s, struct config_addr *out,
		      struct errbuf *err);

/*
 * Parse an upstream endpoint: config_addr_parse's forms, each optionally
 * after "http://" (the same endpoint: its canonical text drops it),
 * "https://" or "h2c://", or "unix:/PATH" (an absolute path, shorter than
 * a sockaddr_un's, of printable ASCII without spaces, quotes or
 * backslashes; the canonical text keeps it as written). A
 * scheme outside the mask schemes (1u << CONFIG_SCHEME_*) is refused,
 * naming it. Returns 0 or -EINVAL with err set.
 */
int config_endpoint_parse(const char *s, unsigned schemes,
			  struct config_addr *out, struct errbuf *err);

/* The scheme's name as written before "://" ("http", "https", "h2c") or
 * "unix". */
const char *config_scheme_name(enum config_scheme s);

/*
 * Whether listening sockets on a and b would take each other's
 * connections: the same family and port, and the same address or either
 * one the unspecified address ("0.0.0.0", "[::]"). With SO_REUSEPORT the
 * kernel lets such sockets bind side by side and hands a connection to
 * the more specific one, so two such listen addresses must not both be
 * configured. (IPv6 sockets are IPV6_V6ONLY: "[::]" and "0.0.0.0" do not
 * overlap.)
 */
bool config_addr_overlaps(const struct config_addr *a,
			  const struct config_addr *b);

/*
 * Check and normalise a domain for the route table: lowercased in place,
 * labels of 1..63 letters, digits and '-' (not at either end), total
 * <= 253 bytes, no port, no trailing dot; "*." allowed only as the whole
 * leftmost label, with two labels after it, when wildcard_ok. Returns 0
 * or -EINVAL with err set.
 */
int config_domain_check(char *s, bool wildcard_ok, struct errbuf *err);

/*
 * Check and normalise a TLS passthrough route's sni: "*" (its listen
 * address's default), or a domain as config_domain_check takes it with a
 * "*." wildcard allowed (lowercased in place), which must not be an IPv4
 * address (no ClientHello names one: RFC 6066). Returns 0 or -EINVAL with
 * err set.
 */
int config_sni_check(char *s, struct errbuf *err);

/*
 * Check a route's path prefix: "/seg[/seg...]" of RFC 3986 pchars,
 * 2..CONFIG_PREFIX_MAX bytes, no percent-encoding, no empty, "." or ".."
 * segments, no trailing '/'. Returns 0 or -EINVAL with err set.
 */
int config_prefix_check(const char *s, struct errbuf *err);

/* Check a project, environment or deployment id: 1..CONFIG_ID_MAX bytes
 * of letters, digits, '.', '_' and '-'. Returns 0 or -EINVAL. */
int config_id_check(const char *s, struct errbuf *err);

/* Check a display name: 1..CONFIG_NAME_MAX bytes, no control
 * characters. Returns 0 or -EINVAL. */
int config_name_check(const char *s, struct errbuf *err);

/* Whether s holds only letters, digits, '.', '_' and '-'. */
bool config_is_word(const char *s);

/*
 * Add the CIDR s ("10.0.0.0/8", "2001:db8::/32", or an address: /32,
 * /128) to a project's rules with action EDGE_ACT_ALLOW or
 * EDGE_ACT_BLOCK, never expiring. A prefix already in rules (under either
 * action) is refused ("10.0.0.0/8 is already in ip_allow"). Host bits
 * after the prefix are cleared, and note (may be NULL) then says so
 * ("\"10.1.2.3/8\" has host bits set; using 10.0.0.0/8"; note->msg is ""
 * otherwise): a warning, not an error. Returns 0, -EINVAL with err set
 * (also for more than EDGE_MAX_RULES rules), or -ENOMEM.
 */
int config_ip_rule_add(struct rules *rules, uint8_t action, const char *s,
		       struct errbuf *note, struct errbuf *err);

/* Parse a balancing mode: config_balance_name() of one. Returns 0 or
 * -EINVAL with err set. */
int config_balance_parse(const char *s, enum config_balance *out,
			 struct errbuf *err);

/* "round_robin", "least_inflight", "ip_hash"; "?" for anything else. */
const char *config_balance_name(enum config_balance b);

/* Parse a send_proxy value: "off", "v1" or "v2". Returns 0 or -EINVAL
 * with err set. */
int config_send_proxy_parse(const char *s, enum config_send_proxy *out,
			    struct errbuf *err);

/* "off", "v1", "v2"; "" for CONFIG_SEND_PROXY_INHERIT. */
const char *config_send_proxy_name(enum config_send_proxy v);

/* The PROXY protocol version a connection gets (0: none): route's when
 * set, else dep's. */
unsigned config_send_proxy_version(enum config_send_proxy route,
				   enum config_send_proxy dep);

/* Check an X-Frame-Options value: "DENY", "SAMEORIGIN", or "" for none.
 * Returns 0 or -EINVAL with err set. */
int config_frame_options_check(const char *s, struct errbuf *err);

/* Check a Referrer-Policy value: one of the standard ones, or "" for
 * none. Returns 0 or -EINVAL with err set. */
int config_referrer_policy_check(const char *s, struct errbuf *err);

/*
 * Parse a duration kept in milliseconds ("10s", "500ms", "1m30s", "1d"):
 * edge's one duration grammar (lib/duration.h: units d, h, m, s, ms in
 * that order, each at most once; every number needs a unit), 1 ms ..
 * CONFIG_DURATION_MAX_MS. Returns 0 or -EINVAL with err set.
 */
int config_duration_parse(const char *s, uint64_t *ms, struct errbuf *err);

/* A deployment's retry group (docs/upstream.md, "Retries"): which
 * failures go again (a CONFIG_RETRY_ON_ bit each), at most max retries,
 * while the deployment's retries stay under budget percent of its recent
 * requests, the n-th after backoff_ms << (n - 1). set false: no group,
 * edge's behaviour without one (a failed connect tries the next
 * endpoint, unbudgeted). Plain data. */
#define CONFIG_RETRY_ON_CONNECT (1u << 0) /* "connect" */
#define CONFIG_RETRY_ON_RESET (1u << 1)	  /* "reset" */
#define CONFIG_RETRY_ON_502 (1u << 2)	  /* "502" */
#define CONFIG_RETRY_ON_503 (1u << 3)	  /* "503" */
#define CONFIG_RETRY_ON_504 (1u << 4)	  /* "504" */
#define CONFIG_RETRY_MAX 3 /* retries: UPCONN_TRIES_MAX attempts in all */
#define CONFIG_RETRY_BACKOFF_MAX_MS 10000
/* timeouts.request_total (a deployment's, a route's) at most: a day */
#define CONFIG_REQUEST_TOTAL_MAX_MS (24ULL * 3600 * 1000)

/* A deployment's max_inflight (each endpoint's cap): at most this. */
#define CONFIG_EP_MAX_INFLIGHT_MAX 1000000

struct config_retry {
	bool set;
	unsigned on;	     /* CONFIG_RETRY_ON_ bits */
	unsigned max;	     /* 0..CONFIG_RETRY_MAX */
	unsigned budget;     /* percent, 0..100 */
	uint64_t backoff_ms; /* 1..CONFIG_RETRY_BACKOFF_MAX_MS */
};

/* A deployment's circuit group (docs/upstream.md, "Circuit breaking";
 * circuit.h): it opens when, over the last window_ms, at least
 * min_requests requests ended and errors percent of them or more failed,
 * and stays open open_for_ms before its half-open trial. set false: no
 * circuit. Plain data. */
#define CONFIG_CIRCUIT_WINDOW_MIN_MS 1000
#define CONFIG_CIRCUIT_WINDOW_MAX_MS (3600 * 1000)
#define CONFIG_CIRCUIT_OPEN_FOR_MIN_MS 100
#define CONFIG_CIRCUIT_OPEN_FOR_MAX_MS (3600 * 1000)
#define CONFIG_CIRCUIT_MIN_REQUESTS_MAX 1000000

struct config_circuit {
	bool set;
	unsigned errors;       /* percent, 1..100 */
	uint64_t window_ms;    /* CONFIG_CIRCUIT_WINDOW_MIN_MS..MAX */
	uint64_t min_requests; /* 1..CONFIG_CIRCUIT_MIN_REQUESTS_MAX */
	uint64_t open_for_ms;  /* CONFIG_CIRCUIT_OPEN_FOR_MIN_MS..MAX */
};

/* A deployment's hedge group (docs/upstream.md, "Hedging"; hedge.h): an
 * idempotent request whose attempt has not answered after after_ms (or,
 * pct non-zero, the pct-th percentile of the deployment's recent times to
 * a response head) goes also to another endpoint, at most max times;
 * the first answer wins. set false: no hedging. Plain data. */
#define CONFIG_HEDGE_MAX 3
#define CONFIG_HEDGE_AFTER_MIN_MS 1
#define CONFIG_HEDGE_AFTER_MAX_MS 60000
#define CONFIG_HEDGE_PCT_MIN 50
#define CONFIG_HEDGE_PCT_MAX 99

struct config_hedge {
	bool set;
	unsigned pct;	   /* CONFIG_HEDGE_PCT_MIN..MAX, 0: after_ms */
	uint64_t after_ms; /* CONFIG_HEDGE_AFTER_MIN_MS..MAX (pct 0) */
	unsigned max;	   /* hedges per request, 1..CONFIG_HEDGE_MAX */
};

/* hedge.after: "pNN" (a percentile, CONFIG_HEDGE_PCT_MIN..MAX) or a
 * duration within CONFIG_HEDGE_AFTER_MIN_MS..MAX, into h's pct and
 * after_ms. Returns 0 or -EINVAL with err set. */
int config_hedge_after_parse(const char *s, struct config_hedge *h,
			     struct errbuf *err);

/* retry's and circuit's keys, in the order they are checked. */
enum config_retry_key {
	CONFIG_RETRY_KEY_ON = 0,
	CONFIG_RETRY_KEY_MAX,
	CONFIG_RETRY_KEY_BUDGET,
	CONFIG_RETRY_KEY_BACKOFF,
	CONFIG_RETRY_NKEYS,
};
enum config_circuit_key {
	CONFIG_CIRCUIT_KEY_ERRORS = 0,
	CONFIG_CIRCUIT_KEY_WINDOW,
	CONFIG_CIRCUIT_KEY_MIN_REQUESTS,
	CONFIG_CIRCUIT_KEY_OPEN_FOR,
	CONFIG_CIRCUIT_NKEYS,
};
enum config_hedge_key {
	CONFIG_HEDGE_KEY_AFTER = 0,
	CONFIG_HEDGE_KEY_MAX,
	CONFIG_HEDGE_NKEYS,
};
/* Their names ("on", "max", ...; "errors", "window", ...; "after",
 * "max"), NULL-terminated. */
extern const char *const config_retry_keys[CONFIG_RETRY_NKEYS + 1];
extern const char *const config_circuit_keys[CONFIG_CIRCUIT_NKEYS + 1];
extern const char *const config_hedge_keys[CONFIG_HEDGE_NKEYS + 1];

/*
 * A retry group from the values of its keys (v[CONFIG_RETRY_KEY_*]): the
 * one check of the file's group and the database's deployments.retry.
 * on a list of "connect", "reset", "502", "503", "504" (default all);
 * max an integer 0..CONFIG_RETRY_MAX (default 2); budget "N%" (default
 * "20%"); backoff a duration 1ms..10s (default "25ms"). Returns 0 with
 * *rt (set), or -EINVAL with err (the message without the key), *key the
 * index of the key at fault and *item the index of on's item at fault
 * (-1: the key's value as a whole).
 */
int config_retry_of(const struct config_value v[CONFIG_RETRY_NKEYS],
		    struct config_retry *rt, int *key, int *item,
		    struct errbuf *err);

/* A circuit group from the values of its keys (v[CONFIG_CIRCUIT_KEY_*]),
 * the one check of the file's and the database's: errors "N%" 1%..100%
 * (default "50%"); window a duration 1s..1h (default "10s");
 * min_requests an integer 1..CONFIG_CIRCUIT_MIN_REQUESTS_MAX (default
 * 20); open_for a duration 100ms..1h (default "5s"). 0 with *cc (set),
 * or -EINVAL with err and *key. */
int config_circuit_of(const struct config_value v[CONFIG_CIRCUIT_NKEYS],
		      struct config_circuit *cc, int *key, struct errbuf *err);

/* A hedge group from the values of its keys (v[CONFIG_HEDGE_KEY_*]),
 * the one check of the file's and the database's: after "pNN" or a
 * duration (config_hedge_after_parse; default "p95"); max an integer
 * 1..CONFIG_HEDGE_MAX (default 1). 0 with *h (set), or -EINVAL with err
 * and *key. */
int config_hedge_of(const struct config_value v[CONFIG_HEDGE_NKEYS],
		    struct config_hedge *h, int *key, struct errbuf *err);

/* The same groups as JSON objects (the database's deployments.retry,
 * circuit and hedge, the local snapshot's copies): not an object, or an
 * unknown key, is refused too. 0 with the group set, or -EINVAL with err
 * ("max: ...", "on[1]: ...") and the group zeroed (none). */
int config_retry_json(const json_t *o, struct config_retry *rt,
		      struct errbuf *err);
int config_circuit_json(const json_t *o, struct config_circuit *cc,
			struct errbuf *err);
int config_hedge_json(const json_t *o, struct config_hedge *h,
		      struct errbuf *err);

/* A set group as the JSON object the function above reads back to the
 * same group: a new reference, NULL when out of memory. */
json_t *config_retry_to_json(const struct config_retry *rt);
json_t *config_circuit_to_json(const struct config_circuit *cc);
json_t *config_hedge_to_json(const struct config_hedge *h);

/* The bit of a retry.on entry ("connect", "reset", "502", "503",
 * "504"). Returns 0 or -EINVAL with err set. */
int config_retry_on_parse(const char *s, unsigned *bit, struct errbuf *err);

/* A percentage "N%" (N an integer 0..100). Returns 0 or -EINVAL with err
 * set. */
int config_percent_parse(const char *s, unsigned *pct, struct errbuf *err);

#endif /* EDGE_CONFIG_CHECK_H */
