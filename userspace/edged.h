/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * edged.h - the daemon's state, struct edged: made and written by edged.c
 * on the main thread (start-up, then the control loop); read by the
 * control room (ctlcmd.c) on that same loop. Only the type: no function
 * of edged.c is declared here (what the control room asks of the daemon,
 * edged.c hands it as struct ctlcmd_ops).
 */
#ifndef EDGE_EDGED_H
#define EDGE_EDGED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "log.h"
#include "route_writer.h"
#include "worker.h"

struct admin;
struct ctlcmd;
struct event;
struct event_base;
struct hcheck;
struct hcheck_target;
struct pgplane;
struct splice;
struct stats;
struct tcproute;
struct tls_db;
struct tls_db_in;
struct acme_mgr;
struct pgacme;
struct chal_key_row;

struct edged {
	char *conf_path; /* absolute (edged_abs_path), malloc'd */
	/* a successor's (edged --upgrade): its predecessor retired once it
	 * serves; the readiness pipe edgectl upgrade waits on (-1: none) */
	bool successor;
	int ready_fd;
	struct config *cfg; /* the settings edged started with */
	/* the route table's one writer: every source's routes, merged */
	struct route_writer routes;
	struct worker_shared sh;
	struct worker **w;
	unsigned nw;
	struct event_base *base; /* the control loop: signals, ctl, admin */
	struct event *sig[4];
	struct event *drain_poll; /* while draining */
	struct event *upreg_tick; /* upreg_log_held, EDGED_UPREG_TICK_MS */
	uint64_t drain_end_ns;	  /* monotonic: stop what is still running */
	/* the descriptor warning last given (connections, limit, cap): a
	 * reload that changes none of them does not repeat it */
	unsigned long long fd_warned[3];
	bool draining;
	uint64_t start_ns; /* monotonic, for uptime */
	struct stats *stats;
	struct ctlcmd *ctl; /* the control socket and its commands */
	struct admin *admin;
	struct pgplane *pg;    /* the database control plane; NULL: none */
	struct splice *splice; /* the kernel's splice; NULL: copy only */
	int splice_conf;       /* the configuration's splice, last read */
	/* the TCP routes of every source and their listeners */
	struct tcproute *tcp;
	/* TLS: the certificate files' watch, the ticket keys' rotation, the
	 * last failed rebuild's message (said once) */
	struct event *tls_watch, *tls_rotate;
	uint64_t tls_rotation_ms;
	char tls_failed[ERRBUF_LEN];
	/* the database's certificates accepted (NULL: no control plane or
	 * no HTTPS), the ticket key's last rotation (monotonic ns) */
	struct tls_db *tls_db;
	uint64_t tls_rotated_ns;
	/* the database's certificate rows as last read (copies: the store
	 * is built of them and ACME's files' rows) */
	struct tls_db_in *pg_certs;
	size_t n_pg_certs;
	/* ACME (acme_mgr.h; NULL without the acme group), its names' look
	 * at the route table (each second: the generation they were read
	 * from) */
	struct acme_mgr *acme;
	struct pgacme *pgacme; /* storage = "database": its store */
	struct event *acme_ev;
	uint64_t acme_gen;
	/* the active health checks: the file's deployments' (hc_file, as
	 * last loaded) and the database's (pgplane_hcheck_targets) merged,
	 * the file's first; the addresses whose database check gave way to
	 * the file's, said once */
	struct hcheck *hc;
	struct hcheck_target *hc_file;
	size_t n_hc_file;
	char (*hc_lost)[CONFIG_ADDR_STR_MAX];
	size_t n_hc_lost;
	/* the database's challenge_keys that check out, the ids signing
	 * and verifying now (0: none), the timer for the next signs_from */
	struct chal_key_row *chal_rows;
	size_t n_chal_rows;
	int64_t chal_signer, chal_other;
	bool chal_said_file;
	struct event *chal_ev;
};

#endif /* EDGE_EDGED_H */
