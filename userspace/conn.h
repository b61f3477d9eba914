/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * conn.h - Accept: a client connection, from accept to close: counted
 * against limits.max_connections, its TLS handshake, parked while idle,
 * lingering at its close. What it carries is its protocol's (struct
 * conn_ops: an adapter, HTTP/1.1's today): the connection calls the
 * adapter's hooks on its events and knows nothing else of requests.
 *
 * While it waits for the next unit (CONN_HEAD: a request head) it reads
 * at most limits.max_header_bytes (+1), arms the idle keep-alive or
 * header timeout, parks when nothing is buffered, and hands input to the
 * adapter's input hook; with pipelining, the next head is parsed only
 * once the current response is complete (the output below
 * CONN_HIGH_WATER).
 */
#ifndef EDGE_CONN_H
#define EDGE_CONN_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "cidr.h"
#include "outcome.h"
#include "transport.h"

struct sockio;
struct worker;
struct worker_service;

/* What c->timer means while waiting for a head. */
#define CONN_T_NONE 0
#define CONN_T_IDLE 1	/* between requests: idle keep-alive timeout */
#define CONN_T_HEADER 2 /* bytes of a head arrived: header timeout */

/* Bytes queued for the client above which a waiting connection does not
 * parse its next head (pipelining), and its output low watermark. */
#define CONN_HIGH_WATER (64 * 1024)
#define CONN_LOW_WATER (16 * 1024)

/* How long a closing connection reads and discards (lingering close, so
 * an unread body does not turn our last response into a reset), and how
 * much it discards at most. */
#define CONN_LINGER_MS 2000
#define CONN_LINGER_BYTES (1024 * 1024)

/* How long a connection waits between requests (or for its first byte)
 * with its buffers before it is parked (struct conn_park): a parked
 * connection holds no buffers, no request state and no sockio, only
 * its transport, peer and one read event (and what its adapter keeps
 * over the park: an HTTP/2 session), until its next byte arrives. */
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
		TAILQ_ENTRY(conn_park) link; /* in the parked list while used */
		struct conn_park *next_free; /* in the free list when not */
	};
	struct worker *w;
	struct transport t;   /* the stream, as its sockio left it */
	union conn_addr peer; /* the client */
	unsigned nreq;	      /* requests served on the connection so far */
	uint64_t ms;	      /* how long it was parked for at most */
	/* the adapter that keeps state over the park (conn_park_keep) and
	 * that state; NULL: nothing kept (the listener's adapter) */
	const struct conn_ops *ops;
	void *keep;
	/* the read + deadline event (event_assign'ed, libevent's size) */
	_Alignas(max_align_t) unsigned char ev[];
};

enum conn_state {
	CONN_HEAD = 0, /* waiting for (more of) a request head */
	CONN_BUSY,     /* the adapter's: a request past its head */
	CONN_CLOSING,  /* flushing the last response, then closing */
};

struct conn;

/*
 * A protocol adapter: what the connection calls, on its loop. Its state
 * is ops->size bytes after struct conn (conn_proto), zeroed, made by
 * open (a new connection, or one unparked) and given back by free (once
 * the connection's memory goes). While CONN_HEAD:
 *   input    bytes arrived (or the client's EOF, c->client_eof) and the
 *            output is below CONN_HIGH_WATER: parse them; a complete
 *            unit moves the connection to CONN_BUSY;
 *   active   whether a unit has begun (bytes of it arrived): the
 *            connection neither parks nor drains it;
 *   header_timeout  a begun unit did not complete within
 *            timeouts.header: answer and end it (the connection closes
 *            after);
 *   refuse   the connection was refused at accept (over the cap,
 *            draining) with o: say so if the protocol can.
 * While CONN_BUSY: readable, drained (output below the low watermark),
 * gone (EOF while reading, or an error), timeout (c->timer), btimeout
 * (c->btimer). drain: the worker drains (close c when it is idle, let
 * what is under way finish). At conn_close: close ends what is under way
 * (it may close c itself), closed releases what is left once c is
 * closed.
 *
 * An adapter that parks its connections while keeping state over the
 * park (conn_park_keep) has two more: unpark gets that state back on a
 * new c (instead of open; c is made with this adapter, and the adapter
 * puts it in CONN_BUSY, or closes it when it cannot go on), keep_free
 * frees it when the parked connection ends without coming back
 * (shutdown; the connection closes the transport).
 */
struct conn_ops {
	size_t size;
	void (*open)(struct conn *c);
	void (*input)(struct conn *c);
	bool (*active)(const struct conn *c);
	void (*header_timeout)(struct conn *c);
	void (*refuse)(struct conn *c, enum outcome o);
	void (*readable)(struct conn *c);
	void (*drained)(struct conn *c);
	void (*gone)(struct conn *c, bool eof);
	void (*timeout)(struct conn *c);
	void (*btimeout)(struct conn *c);
	void (*drain)(struct conn *c);
	void (*close)(struct conn *c);
	void (*closed)(struct conn *c);
	void (*free)(struct conn *c);
	void (*unpark)(struct conn *c, void *keep);
	void (*keep_free)(void *keep);
};

struct conn {
	TAILQ_ENTRY(conn) link;
	struct worker *w;
	struct sockio *io; /* the client's socket; NULL once a tunnel has
			      taken it */
	const struct conn_ops *ops; /* its protocol's adapter */
	struct event *timer;	    /* header / idle / linger deadline, and the
				       adapter's while CONN_BUSY */
	struct event *btimer;	    /* the adapter's second timer */
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
	bool tls;	     /* the stream is TLS (an HTTPS listener's) */
	bool tls_resumed;    /* its session was resumed (a ticket) */
	bool h2;	     /* ALPN chose HTTP/2 */
	/* what it negotiated (OpenSSL's static names), NULL without TLS */
	const char *tls_version, *tls_cipher;
	uint64_t discarded; /* bytes thrown away while closing */
	/* the adapter's state, ops->size bytes */
	_Alignas(max_align_t) unsigned char proto[];
};

/* c's adapter state (ops->size bytes). */
static inline void *conn_proto(struct conn *c)
{
	return c->proto;
}

TAILQ_HEAD(conn_list, conn);
TAILQ_HEAD(conn_park_list, conn_park);
struct conn_hs;
TAILQ_HEAD(conn_hs_list, conn_hs);
struct conn_park_slab;

/* A worker's client connections (conn.c's alone; w->cs). */
struct conn_set {
	struct conn_list open;		   /* open client connections */
	struct conn_park_list parked;	   /* idle ones without buffers */
	struct conn_hs_list hs;		   /* TLS handshakes under way */
	struct conn_park *park_free;	   /* unused entries of the slabs */
	struct conn_park_slab *park_slabs; /* parked entries come from here */
	size_t n;			   /* both lists */
	unsigned parks;			   /* connections parked this tick */
	unsigned parks_untrimmed;	   /* before it, since the last trim */
	struct conn_list dead;		   /* closed, memory freed by reap */
	struct event *reap;		   /* frees the dead ones */
};

/* The worker service of a worker's client connections (worker.h): its
 * drain closes those idle between requests (parked or not) and marks the
 * others to close after their current request; its free closes every
 * one at once. */
extern const struct worker_service conn_service;

/* A new connection accepted on fd by worker w (fd is owned by the
 * connection from now on, even when this fails). Enforces
 * limits.max_connections (503 connection_limit, written and closed at
 * once); otherwise the connection starts parked until its first byte
 * arrives. */
void conn_accept(struct worker *w, int fd, const struct sockaddr *sa,
		 socklen_t len, const char *listen);

/* A new connection accepted on fd by worker w on an HTTPS listener:
 * counted as conn_accept's (over limits.max_connections, or draining,
 * it is closed, counted in the request_done hook as connection_limit or
 * shutting_down: no HTTP can be said before the handshake), then the TLS
 * handshake (tls.h) under timeouts.tls_handshake with the store of the
 * moment; done, the connection goes on as conn_accept's, its transport
 * TLS. Without a store (none configured) fd is closed. */
void conn_accept_tls(struct worker *w, int fd, const struct sockaddr *sa,
		     socklen_t len, const char *listen);

/* c's unit (request) has ended: wait for the next head on c
 * (keep-alive), or flush what is queued for the client and close when
 * close is set. */
void conn_next(struct conn *c, bool close);

/* Close c at once (no flush); its memory is freed from the loop later, so
 * callers may still read c->closed. Idempotent. */
void conn_close(struct conn *c);

/* Arm c's timer for ms milliseconds. */
void conn_timer(struct conn *c, uint64_t ms);

/* Arm c's second timer (the adapter's btimeout) for ms milliseconds. */
void conn_btimer(struct conn *c, uint64_t ms);

/* Whether c could be parked now as far as the connection goes: open,
 * nothing buffered either way (the transport's own bytes too), no EOF
 * from the client, not to close after its unit, its worker not
 * draining. What is under way in the adapter is the adapter's to say. */
bool conn_parkable(const struct conn *c);

/* Park c (conn_parkable, CONN_BUSY) for at most ms, keeping keep, its
 * adapter's state, over the park: the caller has taken keep out of c
 * first, since c is closed here (its close, closed and free hooks run).
 * The connection's next byte, its EOF, its deadline or a drain makes a
 * new struct conn with c's adapter and hands keep to its unpark hook;
 * then, at the deadline, its timeout hook runs, at a drain its drain
 * hook. Returns 0 when c is parked and closed (or, if the loop would
 * not watch the socket, closed with keep freed by keep_free), or
 * -ENOMEM with nothing changed (keep is still the caller's). */
int conn_park_keep(struct conn *c, void *keep, uint64_t ms);

#endif /* EDGE_CONN_H */
