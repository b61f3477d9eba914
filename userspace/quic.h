/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * quic.h - QUIC on tls.quic_listen (docs/http3.md): per worker, one UDP
 * socket per address (SO_REUSEPORT; the group steered by connection ID,
 * quicsteer.h), its datagrams, its connections (ngtcp2 0.12, TLS by
 * GnuTLS with the certificate store's credentials, tls_gnutls.h), their
 * timers, Retry, version negotiation, stateless resets, and the
 * connection's end. What rides on a connection's streams is its
 * application's (struct quic_app_ops: HTTP/3, http3.c), installed by
 * whoever builds the workers: the transport knows nothing of HTTP.
 *
 * Thread-safety: a connection lives on its worker's thread only.
 */
#ifndef EDGE_QUIC_H
#define EDGE_QUIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <jansson.h>
#include <ngtcp2/ngtcp2.h>

#include "cidr.h"
#include "log.h"

struct worker;
struct worker_service;
struct quic_conn;

/*
 * A connection's application, called by the transport on the worker's
 * thread (from inside ngtcp2's callbacks unless said otherwise; none may
 * free the connection): start once the 1-RTT keys are in (open its own
 * streams); recv a stream's bytes, early when they came in 0-RTT packets
 * (returns how many it consumed for flow control, or -1 with the
 * connection's error set by quic_conn_app_error);
 * acked bytes of a stream; a stream closed (app_err: the peer's code, or
 * 0); the peer reset its sending side of a stream (RESET_STREAM) or asked
 * edged to stop sending on it (STOP_SENDING: stop_sending); a stream's send
 * window grew; the peer may open up to max bidirectional streams; work
 * (not from a callback: before each write) what its streams have to do;
 * writev
 * the next stream data to send (*id -1: none; returns the vectors' count
 * or -1), then blocked / shut_write / written for what ngtcp2 did with
 * it; drain (not from a callback): a graceful end was asked (GOAWAY);
 * busy: whether requests are in flight; free when the connection goes.
 */
struct quic_app_ops {
	int (*start)(struct quic_conn *qc);
	ssize_t (*recv)(struct quic_conn *qc, int64_t id, const uint8_t *data,
			size_t len, bool fin, bool early);
	int (*acked)(struct quic_conn *qc, int64_t id, uint64_t len);
	int (*closed)(struct quic_conn *qc, int64_t id, uint64_t app_err);
	int (*reset)(struct quic_conn *qc, int64_t id, bool stop_sending);
	int (*unblock)(struct quic_conn *qc, int64_t id);
	void (*max_streams)(struct quic_conn *qc, uint64_t max);
	void (*work)(struct quic_conn *qc);
	ssize_t (*writev)(struct quic_conn *qc, int64_t *id, int *fin,
			  ngtcp2_vec *vec, size_t n);
	void (*blocked)(struct quic_conn *qc, int64_t id);
	void (*shut_write)(struct quic_conn *qc, int64_t id);
	int (*written)(struct quic_conn *qc, int64_t id, size_t n);
	void (*drain)(struct quic_conn *qc);
	bool (*busy)(const struct quic_conn *qc);
	void (*free)(struct quic_conn *qc);
};

/* The worker service of a worker's QUIC sockets and connections. */
extern const struct worker_service quic_service;

/* The connection ID length edged issues (edge_maps.h). */
#define QUIC_SCID_LEN 16
/* Datagrams read per readiness event, at most. */
#define QUIC_RECV_BATCH 32
/* The largest UDP payload edged sends (ngtcp2 probes for more up to
 * this; 1452 fits an Ethernet MTU over IPv6 with room). */
#define QUIC_MAX_UDP_PAYLOAD 1452

/* ---- counters (quic_stats.c) ---------------------------------------- */

struct metrics;
/* An upgrade's new edged (before its workers): its QUIC steering waits
 * for quic_take_over, called once the running edged has retired. */
void quic_upgrading(void);
void quic_take_over(void);

/* Register the edge_quic_* series in m (start-up), the per-worker ones
 * for workers 0..nworkers-1. */
int quic_metrics(struct metrics *m, unsigned nworkers);
/* edgectl status's counts (a new reference, NULL out of memory). */
json_t *quic_counts_json(void);

enum quic_event {
	QUIC_EV_CONN_OPEN,
	QUIC_EV_CONN_CLOSE,
	QUIC_EV_STREAM,
	QUIC_EV_HANDSHAKE_OK,
	QUIC_EV_HANDSHAKE_FAILED,
	QUIC_EV_RETRY,
	QUIC_EV_VERSION_NEG,
	QUIC_EV_RESET,
	QUIC_EV_EARLY_ACCEPTED, /* a handshake took 0-RTT data */
	QUIC_EV_EARLY_REPLAYED, /* a ClientHello seen before: refused */
	QUIC_EV_EARLY_FULL,	/* no room to remember one: refused */
	QUIC_EV_EARLY_REQUEST,	/* a request served from 0-RTT data */
};
/* Count e on worker (a worker past quic_metrics' nworkers: the totals
 * only). */
void quic_count(unsigned worker, enum quic_event e);
/* n packets carrying a stream's data declared lost (at its close). */
void quic_count_lost(unsigned worker, uint64_t n);

/* Why a datagram was dropped without a connection. Append only. */
enum quic_drop {
	QUIC_DROP_UNDECODABLE = 0,
	QUIC_DROP_UNKNOWN,
	QUIC_DROP_REFUSED,
	QUIC_DROP_BAD_TOKEN,
	QUIC_DROP_MAX
};
void quic_count_drop(enum quic_drop d);

/* ---- for the application ------------------------------------------- */

/* The connection's ngtcp2 state. */
ngtcp2_conn *quic_conn_ngtcp2(const struct quic_conn *qc);
/* The application's pointer (NULL until set). */
void *quic_conn_app(const struct quic_conn *qc);
void quic_conn_set_app(struct quic_conn *qc, void *app);
struct worker *quic_conn_worker(const struct quic_conn *qc);
/* A connection's idle timeout on w, ms: timeouts.idle_keepalive, else
 * 60 s. */
uint64_t quic_idle_ms(const struct worker *w);
/* The client: address as text, as accepted, as a /32 or /128. Stable for
 * the connection's life (its first path's; a migration keeps them). */
const char *quic_conn_client_ip(const struct quic_conn *qc);
const struct sockaddr *quic_conn_peer(const struct quic_conn *qc);
const struct cidr *quic_conn_peer_cidr(const struct quic_conn *qc);
/* What TLS negotiated ("TLSv1.3", the cipher's name), and resumption. */
void quic_conn_tls_info(const struct quic_conn *qc, const char **version,
			const char **cipher, bool *resumed);
/* Set the connection's closing error to an application error (the
 * CONNECTION_CLOSE sent when a callback fails). */
void quic_conn_app_error(struct quic_conn *qc, uint64_t code);
/* Close the connection now with an application error (not from inside a
 * callback: then nothing happens). Its application's free follows. */
void quic_conn_close(struct quic_conn *qc, uint64_t app_err);
/* Send what is due now, from the loop soon (never inside a callback). */
void quic_conn_flush_soon(struct quic_conn *qc);

#endif /* EDGE_QUIC_H */
