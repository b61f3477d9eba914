/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * config.h - edged's configuration file (libconfig syntax), parsed and
 * validated into one immutable struct config.
 *
 * Every key has a default (docs/configuration.md lists them); unknown keys
 * are errors. Every error reads "FILE:LINE: KEY: what was wrong", KEY being
 * the setting's path ("projects[1].environments[0].domains[2]"), so that
 * `edged --check`, SIGHUP and `edgectl reload` show the same text.
 *
 * Pure apart from reading the file (config_file.h): no global state, no
 * logging (warnings are kept in the struct for the caller to print).
 */
#ifndef EDGE_CONFIG_H
#define EDGE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "log.h"
#include "rules.h"

/* Bounds of lists, so that a configuration cannot ask for unbounded work. */
#define CONFIG_LISTEN_MAX 16
#define CONFIG_UPSTREAMS_MAX 64
#define CONFIG_WORKERS_MAX 256
#define CONFIG_ID_MAX 64      /* bytes of a project/environment/deployment id */
#define CONFIG_NAME_MAX 128   /* bytes of a display name */
#define CONFIG_PREFIX_MAX 256 /* bytes of a route's path prefix */
#define CONFIG_HOST_MAX 253
/* limits.body_buffer: default and largest value, bytes */
#define CONFIG_BODY_BUFFER_DEFAULT (64 * 1024)
#define CONFIG_BODY_BUFFER_MAX (16 * 1024 * 1024)

/* Text of an "ADDR:PORT" / "[V6]:PORT" endpoint, canonical form. */
#define CONFIG_ADDR_STR_MAX 56

/* A numeric socket address (no DNS, ever: workers must not block). */
struct config_addr {
	struct sockaddr_storage ss; /* sockaddr_in or sockaddr_in6 */
	socklen_t len;
	char text[CONFIG_ADDR_STR_MAX]; /* "10.0.0.1:80", "[::1]:80" */
};

/* How a deployment's endpoints are chosen (Select). */
enum config_balance {
	CONFIG_BALANCE_ROUND_ROBIN = 0,
	CONFIG_BALANCE_LEAST_INFLIGHT,
	CONFIG_BALANCE_IP_HASH,
};

/* The response headers an environment adds (Respond). */
struct config_security_headers {
	bool hsts;		 /* Strict-Transport-Security, on TLS only */
	uint64_t hsts_max_age_s; /* its max-age, seconds */
	bool hsts_subdomains;	 /* "; includeSubDomains" */
	bool nosniff;		 /* X-Content-Type-Options: nosniff */
	char *frame_options;	 /* X-Frame-Options value, "" for none */
	char *referrer_policy;	 /* Referrer-Policy value, "" for none */
};

/* A path-prefix route inside an environment. */
struct config_route {
	char *prefix;	   /* "/fn-name": starts with '/', no trailing '/' */
	bool strip_prefix; /* send the path without the prefix */
	struct config_addr *upstreams; /* NULL/0: the deployment's */
	size_t n_upstreams;
	enum config_balance balance; /* the deployment's unless set */
	uint64_t max_body_bytes;     /* the environment's unless set */
};

struct config_deployment {
	char *id;
	struct config_addr *upstreams;
	size_t n_upstreams;
	enum config_balance balance;
};

struct config_environment {
	char *id;
	char *name;
	char **domains; /* lowercased; "*.x.y" for a wildcard */
	size_t n_domains;
	struct config_route *routes;
	size_t n_routes;
	struct config_deployment deployment;
	uint64_t max_body_bytes; /* limits.max_body_bytes unless set */
	struct config_security_headers security;
};

struct config_project {
	char *id;
	char *name;
	bool enabled;
	/* ip_allow and ip_block together, as lib/rules.h rules (action
	 * EDGE_ACT_ALLOW / EDGE_ACT_BLOCK, never expiring) */
	struct rules ip_rules;
	/* some allow rule lies outside every block rule: then addresses no
	 * rule matches are denied (an allow list); allow rules inside a block
	 * rule are only exceptions to it */
	bool has_allow;
	struct config_environment *envs;
	size_t n_envs;
};

struct config_limits {
	uint64_t max_connections;
	uint64_t max_request_line;
	uint64_t max_header_bytes;
	uint64_t max_headers;
	uint64_t max_body_bytes;	 /* 0: unlimited */
	uint64_t max_inflight;		 /* 0: unlimited */
	uint64_t max_inflight_per_route; /* 0: unlimited */
	/* a request body of at most this many bytes is read whole before
	 * the upstream is chosen; 0: always stream */
	uint64_t body_buffer;
	/* requests that may wait for an in-flight slot (the admission
	 * queue); 0: none wait, a request over a cap gets 503 at once */
	uint64_t max_queued;
};

/* All in milliseconds, except body_min_rate (bytes per second, 0: off). */
struct config_timeouts {
	uint64_t header_ms;
	uint64_t body_ms;
	uint64_t body_min_rate;
	uint64_t idle_keepalive_ms;
	uint64_t upstream_connect_ms;
	uint64_t upstream_response_ms;
	uint64_t tunnel_idle_ms;
	uint64_t drain_ms;
	uint64_t queue_ms; /* longest wait in the admission queue */
};

struct config_ratelimit {
	uint64_t per_min; /* tokens per minute per client, 0: off */
	uint64_t burst;
};

struct config_analytics {
	char *file; /* JSON-lines path, "" when off */
	uint64_t queue;
};

struct config {
	enum log_format log_format; /* log_format: text or json lines */
	char *path;		    /* the file it was read from */
	struct config_addr *listen;
	size_t n_listen;
	unsigned workers;
	char *user;
	struct config_addr admin_listen;
	char *control_socket;
	char *pin_dir;
	struct config_limits limits;
	struct config_timeouts timeouts;
	struct config_ratelimit ratelimit;
	struct config_analytics analytics;
	struct config_project *projects;
	size_t n_projects;
	/* "FILE:LINE: KEY: ..." notes that are not errors (e.g. a CIDR's
	 * host bits cleared), for the caller to print */
	char **warnings;
	size_t n_warnings;
};

/* Defaults that are not plain numbers. */
#define CONFIG_DEFAULT_LISTEN "0.0.0.0:8080"
#define CONFIG_DEFAULT_ADMIN "127.0.0.1:9090"
#define CONFIG_DEFAULT_CONTROL "/run/edge/edged.sock"
#define CONFIG_DEFAULT_USER "nobody"

/*
 * Read and validate the configuration file at path into a new *out. The
 * file and what it @includes are read first by config_file.c (regular
 * files only, opened without blocking, at most CONFIG_FILE_MAX bytes, no
 * NUL byte), then parsed by libconfig; a file with no settings is an
 * error; integers are taken as written, never as libconfig truncated
 * them. Returns 0; or -EINVAL (not a regular file, no settings, syntax or
 * validation error), -EFBIG (too large), -ENOENT/-EACCES/... (a file not
 * readable) or -ENOMEM, with err holding "FILE:LINE: KEY: what was
 * wrong" ("FILE: ..." when there is no line), and *out untouched. Never
 * blocks on a FIFO and never exits.
 */
int config_load(const char *path, struct config **out, struct errbuf *err);

/* Free a configuration. c may be NULL. */
void config_free(struct config *c);

/*
 * Parse a numeric endpoint "A.B.C.D:PORT" or "[IPV6]:PORT", port 1..65535,
 * into *out (canonical text included). No DNS. Returns 0 or -EINVAL with
 * err saying what was wrong (without file or key).
 */
int config_addr_parse(const char *s, struct config_addr *out,
		      struct errbuf *err);

/*
 * Parse a duration setting kept in milliseconds ("10s", "500ms", "1m30s",
 * "1d"): edge's one duration grammar (lib/duration.h: units d, h, m, s,
 * ms in that order, each at most once; every number needs a unit), 1 ms
 * .. 7 days. Returns 0 or -EINVAL with err set.
 */
int config_duration_parse(const char *s, uint64_t *ms, struct errbuf *err);

/*
 * Check and normalise a domain for the route table: lowercased in place,
 * labels of 1..63 letters, digits and '-' (not at either end), total
 * <= 253 bytes, no port, no trailing dot; "*." allowed only as the whole
 * leftmost label when wildcard_ok. Returns 0 or -EINVAL with err set.
 */
int config_domain_check(char *s, bool wildcard_ok, struct errbuf *err);

/* "round_robin", "least_inflight", "ip_hash". */
const char *config_balance_name(enum config_balance b);

#endif /* EDGE_CONFIG_H */
