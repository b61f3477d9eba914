/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * conn.h - a client connection and the request it carries: Parse,
 * Resolve, Admit, and the one function every request ends in.
 *
 * A connection carries one request at a time: with pipelining, the next
 * head is parsed only once the current response is complete. Input is
 * bounded: before a head completes at most limits.max_header_bytes (+1)
 * are buffered; a body of at most limits.body_buffer bytes is read whole
 * before an upstream is chosen, a longer one only as fast as the upstream
 * takes it.
 */
#ifndef EDGE_CONN_H
#define EDGE_CONN_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "admit.h"
#include "cidr.h"
#include "hdr.h"
#include "outcome.h"
#include "proxy.h"
#include "route.h"

struct sockio;
struct worker;

/* What c->timer means while waiting for a head. */
#define CONN_T_NONE 0
#define CONN_T_IDLE 1	/* between requests: idle keep-alive timeout */
#define CONN_T_HEADER 2 /* bytes of a head arrived: header timeout */

/* How long a closing connection reads and discards (lingering close, so
 * an unread body does not turn our last response into a reset), and how
 * much it discards at most. */
#define CONN_LINGER_MS 2000
#define CONN_LINGER_BYTES (1024 * 1024)

/* How long a connection waits between requests (or for its first byte)
 * with its buffers before it is parked (struct conn_park): a parked
 * connection holds no buffers, no request state and no sockio, only
 * its socket, peer and one read event, until its next byte arrives. */
#define CONN_PARK_MS 100

/* A client's address, as accepted. */
union conn_addr {
	struct sockaddr sa;
	struct sockaddr_in v4;
	struct sockaddr_in6 v6;
};

/* An open client connection with no request in progress and nothing
 * buffered either way: what an idle keep-alive connection costs. */
struct conn_park {
	union {
		TAILQ_ENTRY(conn_park) link; /* in w->parked while in use */
		struct conn_park *next_free; /* in w->park_free when not */
	};
	struct worker *w;
	int fd;
	unsigned nreq;	      /* requests served on the connection so far */
	union conn_addr peer; /* the client */
	socklen_t peer_len;
	/* the read + deadline event (event_assign'ed, libevent's size) */
	_Alignas(max_align_t) unsigned char ev[];
};

enum conn_state {
	CONN_HEAD = 0, /* waiting for (more of) a request head */
	CONN_PROXY,    /* a request is with the proxy */
	CONN_CLOSING,  /* flushing the last response, then closing */
};

/* One request, from its first byte to conn_req_end(). */
struct req {
	bool active;	  /* between conn_req_begin and conn_req_end */
	uint64_t t0;	  /* monotonic ns at the first byte */
	uint64_t t0_real; /* CLOCK_REALTIME ns at the first byte */
	uint64_t t_resp;  /* monotonic ns of the response head, 0: none */
	char id[HDR_REQUEST_ID_MAX + 1];
	struct h1_request h; /* spans point into head */
	char *head;	     /* a copy of the head, head_len bytes */
	size_t head_len;
	struct route_table *rt; /* held until the end */
	struct route_match m;
	bool routed;	   /* m is valid */
	bool inflight;	   /* admit_inflight_enter held */
	bool resp_started; /* a response head went to the client */
	int status;	   /* status sent */
	uint64_t bytes_in, bytes_out;
	struct admit_body limit; /* chunked bodies against the route limit */
	struct proxy p;
};

struct conn {
	TAILQ_ENTRY(conn) link;
	struct worker *w;
	struct sockio *io;    /* the client's socket */
	struct event *timer;  /* header / idle / connect / response deadline */
	struct event *btimer; /* the request body's deadline (proxy.c) */
	union conn_addr peer;
	socklen_t peer_len;
	struct cidr peer_cidr;
	char client_ip[INET6_ADDRSTRLEN];
	enum conn_state state;
	unsigned nreq;	     /* requests begun on this connection */
	unsigned timer_mode; /* CONN_T_*: what the timer means in CONN_HEAD */
	uint64_t idle_since; /* CONN_T_IDLE: monotonic ns it began */
	bool kick;	     /* the timer was armed to parse buffered input */
	bool close_after;    /* close once the current request ends */
	bool client_eof;     /* the client half-closed */
	bool closed;	     /* conn_close ran; memory freed soon */
	uint64_t discarded;  /* bytes thrown away while closing */
	struct req r;
};

/* A new connection accepted on fd by worker w (fd is owned by the
 * connection from now on, even when this fails). Enforces
 * limits.max_connections (503 connection_limit and close); otherwise the
 * connection starts parked until its first byte arrives. */
void conn_accept(struct worker *w, int fd, const struct sockaddr *sa,
		 socklen_t len);

/*
 * End c's current request: the one function every request ends in. Runs
 * its body once per request (later calls do nothing): writes the JSON
 * error body when o owes one and no response head was sent yet, records
 * one analytics event, releases the in-flight gauges, the upstream and
 * the route table reference, then either readies c for the next request
 * (keep-alive) or closes it after the output is flushed.
 * extra is NULL or pre-formatted "Name: value\r\n" lines for the error.
 */
void conn_req_end(struct conn *c, enum outcome o, const char *extra);

/* Close c at once (no flush); its memory is freed from the loop later, so
 * callers may still read c->closed. Idempotent. */
void conn_close(struct conn *c);

/* Write n bytes of response to the client, counted in bytes_out. */
void conn_write(struct conn *c, const void *p, size_t n);

/* Arm c's timer for ms milliseconds. */
void conn_timer(struct conn *c, uint64_t ms);

/* Close every connection of w that is idle between requests (parked or
 * not), and mark the others to close after their current request
 * (draining). */
void conn_drain_all(struct worker *w);

/* Free the memory of w's closed connections (the worker's reap event). */
void conn_reap(struct worker *w);

/* Free every connection of w at once (shutdown), and the memory kept for
 * parking. */
void conn_free_all(struct worker *w);

#endif /* EDGE_CONN_H */
