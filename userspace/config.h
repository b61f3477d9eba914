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

#include "config_check.h"
#include "log.h"
#include "rules.h"

/* Bounds of lists, so that a configuration cannot ask for unbounded work
 * (those of a project's values are config_check.h's). */
#define CONFIG_LISTEN_MAX 16
#define CONFIG_WORKERS_MAX 256
/* limits.body_buffer: default and largest value, bytes */
#define CONFIG_BODY_BUFFER_DEFAULT (64 * 1024)
#define CONFIG_BODY_BUFFER_MAX (16 * 1024 * 1024)

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

#endif /* EDGE_CONFIG_H */
