/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * config.h - edged's configuration file (libconfig syntax), parsed and
 * validated into the daemon's settings (an immutable struct config) and
 * the file's projects (a route source, route_src.h).
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

#include "challenge.h"
#include "config_check.h"
#include "log.h"
#include "trusted.h"

/* pg_snapshot's default: a directory of edged's own under the state dir */
#define CONFIG_DEFAULT_PG_SNAPSHOT "/var/lib/edge/edged/db-snapshot.json"
#include "route_src.h"

/* Bounds of lists, so that a configuration cannot ask for unbounded work
 * (those of a project's values are config_check.h's). */
#define CONFIG_LISTEN_MAX 16
/* tcp_routes: each address is a listening socket per worker; the file's
 * and the database's together are at most route.h's ROUTE_TCP_MAX (the
 * same number: the file's count first) */
#define CONFIG_TCP_ROUTES_MAX 1024
#define CONFIG_WORKERS_MAX 256
/* limits.body_buffer: default and largest value, bytes */
#define CONFIG_BODY_BUFFER_DEFAULT (64 * 1024)
#define CONFIG_BODY_BUFFER_MAX (16 * 1024 * 1024)

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
	/* a text/html response read for injection (inject.h): decoded
	 * bytes, at most */
	uint64_t max_inject_bytes;
	/* brownout: while a worker's loop lags more than this, new requests
	 * of routes with shed = true get 503 overloaded (admit.h's
	 * admit_lag); 0: off, else CONFIG_BROWNOUT_LAG_MIN_MS or more */
	uint64_t brownout_lag_ms;
};

/* limits.brownout_lag: the least value besides 0 (off), ms */
#define CONFIG_BROWNOUT_LAG_MIN_MS 10

/* All in milliseconds, except body_min_rate (bytes per second, 0: off). */
struct config_timeouts {
	uint64_t header_ms;
	uint64_t client_header_ms; /* a PROXY protocol header's */
	uint64_t body_ms;
	uint64_t body_min_rate;
	uint64_t idle_keepalive_ms;
	uint64_t upstream_connect_ms;
	uint64_t upstream_response_ms;
	uint64_t tunnel_idle_ms;
	uint64_t client_hello_ms;  /* a TLS passthrough route's ClientHello */
	uint64_t tls_handshake_ms; /* an HTTPS listener's TLS handshake */
	uint64_t drain_ms;
	uint64_t queue_ms; /* longest wait in the admission queue */
	/* a tunnel's sockets' TCP keepalive idle time (tunnel.c), 0: off */
	uint64_t tunnel_keepalive_ms;
};

/* The group upstream: passive health (docs/upstream.md). */
struct config_upstream {
	uint64_t eject_after;	/* consecutive failures that eject */
	uint64_t eject_base_ms; /* the first ejection's length */
	uint64_t eject_max_ms;	/* the longest (doubling per ejection) */
};

struct config_ratelimit {
	uint64_t per_min; /* tokens per minute per client, 0: off */
	uint64_t burst;
};

/* The group http2: HTTP/2 downstream, over TLS by ALPN and in cleartext
 * by prior knowledge; what each new connection's session announces. */
struct config_http2 {
	bool enabled;	/* ALPN offers h2 (before http/1.1) */
	bool cleartext; /* the connection preface on the plain listeners */
	uint64_t max_concurrent_streams;
	uint64_t initial_window_size;  /* bytes, a stream's receive window */
	uint64_t max_header_list_size; /* bytes of a decoded header list */
};

/* http2's bounds (max_concurrent_streams; the sizes in bytes) */
#define CONFIG_H2_STREAMS_DEFAULT 128
#define CONFIG_H2_STREAMS_MAX 4096
#define CONFIG_H2_WINDOW_DEFAULT 65535
#define CONFIG_H2_WINDOW_MIN 1024
#define CONFIG_H2_WINDOW_MAX (16 * 1024 * 1024)
#define CONFIG_H2_HEADER_LIST_DEFAULT (64 * 1024)
#define CONFIG_H2_HEADER_LIST_MIN 1024
#define CONFIG_H2_HEADER_LIST_MAX (1024 * 1024)

/* analytics.spool_max: default and smallest value, bytes */
#define CONFIG_SPOOL_MAX_DEFAULT (256ULL << 20)
#define CONFIG_SPOOL_MAX_MIN (64ULL << 10)

struct config_analytics {
	char *file; /* JSON-lines path, "" when off */
	uint64_t queue;
	bool database;	       /* events into request_events (when pg is set) */
	char *spool;	       /* the database sink's disk spool, "" when off */
	uint64_t spool_max;    /* bytes of files in spool at most */
	uint64_t spool_memory; /* events per sink kept in memory while it
				* fails */
	int format; /* the file's lines: enum analytics_format (json) */
};

/* The wake stage's settings (the group wake; docs/wake.md): the commands
 * that wake and put to sleep an on-demand environment ("%s" stands for
 * its id), how many wakes may run at once, how long one may take, the
 * step of the readiness probe and the back-off after a failed wake. */
struct config_wake {
	char *command;	     /* "" : no wake command (on-demand refused) */
	char *sleep_command; /* "" : a sleeping environment is only marked */
	uint64_t max_concurrent;
	uint64_t timeout_ms;
	uint64_t probe_interval_ms;
	uint64_t output_max; /* bytes of a command's output logged */
	/* a refusal this soon after a wake is a restart, not a crash */
	uint64_t restart_window_ms;
	/* TCP route connections waiting for wakes at once (all) */
	uint64_t max_waiting_connections;
	/* the longest back-off after failed wakes (it doubles from 1 s) */
	uint64_t retry_max_ms;
};

/* wake.max_concurrent at most; an environment's idle_timeout default */
#define CONFIG_WAKE_CONCURRENT_MAX 1024
/* wake.max_waiting_connections: at most, and its default */
#define CONFIG_WAKE_WAITING_MAX 65536
#define CONFIG_WAKE_WAITING_DEFAULT 1024
#define CONFIG_IDLE_TIMEOUT_DEFAULT_MS (10ULL * 60 * 1000)

/* Longest wake or sleep command, bytes (after "%s" is replaced: an id
 * adds at most CONFIG_ID_MAX per "%s"). */
#define CONFIG_WAKE_COMMAND_MAX 4096

/* A TCP (L4) route (tcp_routes): the connections accepted on listen go,
 * as a byte tunnel, to the endpoints of the environment of that id (of
 * whichever route source, resolved when a connection comes). With sni,
 * a TLS passthrough route: routes with sni share their listen address,
 * and each connection goes to the one its ClientHello's server name
 * picks (the exact name, then a "*." wildcard, then "*", the default),
 * the TLS untouched. */
struct config_tcp_route {
	struct config_addr listen;
	char *environment;
	char *sni; /* NULL: a plain TCP route; a domain, "*.domain" or "*" */
	/* the PROXY header to its upstreams (unset: the deployment's);
	 * listen.proxy_protocol: its connections begin with one */
	enum config_send_proxy send_proxy;
};

/* tls.certificates: at most this many entries */
#define CONFIG_TLS_CERTS_MAX 1024

/* A certificate of the HTTPS listeners (tls.certificates): PEM files,
 * absolute paths, read and checked by tls.c when the store is built. */
struct config_tls_cert {
	char *cert; /* the certificate, then its chain towards its issuer */
	char *key;  /* its private key (RSA or EC), unencrypted */
	char *ocsp; /* a DER OCSP response to staple; "" for none */
};

/* TLS termination (the group tls): HTTPS listen addresses and the
 * certificates served on them (tls.h). No listen address: no TLS. */
struct config_tls {
	struct config_addr *listen; /* 0..CONFIG_LISTEN_MAX */
	size_t n_listen;
	struct config_tls_cert *certs; /* 1..CONFIG_TLS_CERTS_MAX with listen */
	size_t n_certs;
	uint64_t ticket_rotation_ms; /* session_ticket_rotation */
	/* HTTP/3: the UDP addresses (0..CONFIG_LISTEN_MAX), and Alt-Svc on
	 * the responses over TLS on TCP */
	struct config_addr *quic_listen;
	size_t n_quic_listen;
	bool quic_advertise;
	bool quic_early_data; /* 0-RTT requests of safe methods served */
	/* not a key: stores keep GnuTLS copies of their certificates
	 * (tls_gnutls.h), for the QUIC listeners: n_quic_listen > 0 */
	bool gnutls;
};

/* ACME (the group acme, docs/acme.md): certificates ordered for the
 * domains of environments with tls = "auto" (acme_mgr.h). */
struct config_acme {
	bool enabled; /* the group is present */
	char *directory;
	char *account_key;
	char *contact; /* "" none */
	char *ca;      /* "" OpenSSL's default paths */
	bool database; /* storage = "database" (else "files") */
	char *dir;     /* storage = "files": NAME.crt, NAME.key */
	uint64_t retry_min_ms, retry_max_ms;
	int challenge; /* enum acme_chal_type: http-01 or tls-alpn-01 */
};

/* Whether a and b are the same settings (a reload that changes none of
 * them leaves the manager as it is). */
bool config_acme_same(const struct config_acme *a, const struct config_acme *b);

/*
 * The daemon's settings: everything in the file but its projects, which
 * are a route source of their own (route_src.h), so that a reload is new
 * settings plus a new file source, and another source's change (the
 * database's) touches no setting.
 */
struct config {
	enum log_format log_format; /* log_format: text or json lines */
	char *path;		    /* the file it was read from */
	struct config_addr *listen;
	size_t n_listen;
	struct config_tcp_route *tcp_routes; /* 0..CONFIG_TCP_ROUTES_MAX */
	size_t n_tcp_routes;
	unsigned workers;
	char *user;
	struct config_addr admin_listen;
	char *control_socket;
	char *pin_dir;
	char *pg;	   /* libpq conninfo; NULL: no control plane */
	char *pg_snapshot; /* the database's last rows, "" for none */
	char *host_name;   /* this edged in edge_hosts */
	int splice;	   /* enum splice_mode (splice.h): tunnels' mover */
	bool io_uring;	   /* workers send plain TCP through io_uring */
	/* peers whose X-Forwarded-For is kept and appended to */
	struct trusted trusted_proxies;
	struct config_limits limits;
	struct config_timeouts timeouts;
	struct config_ratelimit ratelimit;
	struct config_http2 http2;
	struct config_upstream upstream;
	struct config_analytics analytics;
	struct config_tls tls;
	struct config_wake wake;
	struct config_acme acme;
	/* challenge: the key file (NULL: none) and its keys (challenge.h),
	 * read at every load; none from it or the database: a random key
	 * made at start */
	struct {
		char *key_file;
		struct chal_keys keys;
	} challenge;
	/* the files the configuration names and reads whole at every load
	 * (challenge keys, API key and JWT key files, inject snippets),
	 * each once: read as edged's user on a reload */
	char **reread;
	size_t n_reread;
	/* "FILE:LINE: KEY: ..." notes that are not errors (e.g. a CIDR's
	 * host bits cleared, in the projects too), for the caller to print */
	char **warnings;
	size_t n_warnings;
};

/* Defaults that are not plain numbers. */
#define CONFIG_DEFAULT_LISTEN "0.0.0.0:8080"
#define CONFIG_DEFAULT_ADMIN "127.0.0.1:9090"
#define CONFIG_DEFAULT_CONTROL "/run/edge/edged.sock"
#define CONFIG_DEFAULT_USER "nobody"
#define CONFIG_ACME_DIR "/var/lib/edge/acme"

/*
 * Read and validate the configuration file at path: its settings into a
 * new *out, its projects into a new *projects (the file source; NULL
 * when projects is NULL: they are checked all the same, then dropped).
 * The file and what it @includes are read first by config_file.c
 * (regular files only, opened without blocking, at most CONFIG_FILE_MAX
 * bytes, no NUL byte), then parsed by libconfig; a file with no settings
 * is an error; integers are taken as written, never as libconfig
 * truncated them. Returns 0; or -EINVAL (not a regular file, no
 * settings, syntax or validation error), -EFBIG (too large),
 * -ENOENT/-EACCES/... (a file not readable) or -ENOMEM, with err holding
 * "FILE:LINE: KEY: what was wrong" ("FILE: ..." when there is no line),
 * and *out and *projects untouched. Never blocks on a FIFO and never
 * exits.
 */
int config_load(const char *path, struct config **out,
		struct route_src **projects, struct errbuf *err);

/* Most errors a struct config_errs keeps; more are only counted. */
#define CONFIG_ERRS_MAX 32

/* Every error found in one configuration, each a line of its own
 * ("FILE:LINE: KEY: what was wrong", or "FILE: KEY: ..."). */
struct config_errs {
	size_t n;    /* messages in msg[0..n) */
	size_t more; /* errors past CONFIG_ERRS_MAX, not kept */
	char msg[CONFIG_ERRS_MAX][ERRBUF_LEN];
};

/* Add one error (printf-style) to e. */
void config_errs_add(struct config_errs *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * config_load, but the check goes on past an error: each top-level
 * group, and each project, is checked even when one before it failed,
 * and every error is added to errs (which the caller zeroes). A failed
 * group can hide errors that depend on it (a key of analytics that
 * needs pg, say). Returns what config_load returns; errs->msg[0] is the
 * message config_load would give.
 */
int config_load_all(const char *path, struct config **out,
		    struct route_src **projects, struct config_errs *errs);

/* Whether two analytics groups differ (they apply at the next start). */
bool config_analytics_differs(const struct config_analytics *a,
			      const struct config_analytics *b);

/* Free a configuration. c may be NULL. */
void config_free(struct config *c);

/* What c gives every route source's routes (route_src.h): the body limit
 * of an environment that sets none, each route's in-flight cap. */
void config_route_defaults(const struct config *c, struct route_defaults *d);

#endif /* EDGE_CONFIG_H */
