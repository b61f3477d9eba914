/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * conn.h - Accept: a client connection, from accept to close: counted
 * against limits.max_connections, parked while idle, lingering at its
 * close; and the request it carries (req.h), one at a time.
 *
 * With pipelining, the next head is parsed only once the current response
 * is complete. Input is bounded: before a head completes at most
 * limits.max_header_bytes (+1) are buffered; a body of at most
 * limits.body_buffer bytes is read whole before an upstream is chosen, a
 * longer one only as fast as the upstream takes it.
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
#include "req.h"
#include "transport.h"

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
 * its transport, peer and one read event, until its next byte arrives. */
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
	/* the read + deadline event (event_assign'ed, libevent's size) */
	_Alignas(max_align_t) unsigned char ev[];
};

enum conn_state {
	CONN_HEAD = 0, /* waiting for (more of) a request head */
	CONN_REQ,      /* a request past its head: queued or proxied */
	CONN_CLOSING,  /* flushing the last response, then closing */
};

struct conn {
	TAILQ_ENTRY(conn) link;
	struct worker *w;
	struct sockio *io;    /* the client's socket; NULL once a tunnel has
				 taken it */
	struct event *timer;  /* header / idle / linger deadline, and the
				 request's phase timer (req_timer) */
	struct event *btimer; /* the request body's deadline (req.h) */
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
	/* what it negotiated (OpenSSL's static names), NULL without TLS */
	const char *tls_version, *tls_cipher;
	uint64_t discarded; /* bytes thrown away while closing */
	struct req r;
};

TAILQ_HEAD(conn_list, conn);
TAILQ_HEAD(conn_park_list, conn_park);
struct conn_hs;
TAILQ_HEAD(conn_hs_list, conn_hs);
struct conn_park_slab;

/* A worker's client connections (conn.c's alone; inside struct worker). */
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

/* Set up w's (empty) connection set on w's loop. 0 or -ENOMEM. */
int conn_set_init(struct worker *w);

/* A new connection accepted on fd by worker w (fd is owned by the
 * connection from now on, even when this fails). Enforces
 * limits.max_connections (503 connection_limit, written and closed at
 * once); otherwise the connection starts parked until its first byte
 * arrives. */
void conn_accept(struct worker *w, int fd, const struct sockaddr *sa,
		 socklen_t len);

/* A new connection accepted on fd by worker w on an HTTPS listener:
 * counted as conn_accept's (over limits.max_connections, or draining,
 * it is closed, counted in the request_done hook as connection_limit or
 * shutting_down: no HTTP can be said before the handshake), then the TLS
 * handshake (tls.h) under timeouts.tls_handshake with the store of the
 * moment; done, the connection goes on as conn_accept's, its transport
 * TLS. Without a store (none configured) fd is closed. */
void conn_accept_tls(struct worker *w, int fd, const struct sockaddr *sa,
		     socklen_t len);

/* c's request has ended (req_end): wait for the next head on c
 * (keep-alive), or flush what is queued for the client and close when
 * close is set. */
void conn_next(struct conn *c, bool close);

/* Close c at once (no flush); its memory is freed from the loop later, so
 * callers may still read c->closed. Idempotent. */
void conn_close(struct conn *c);

/* Arm c's timer for ms milliseconds. */
void conn_timer(struct conn *c, uint64_t ms);

/* Whether the worker's once-a-second tick should hand freed memory back
 * (malloc_trim): after a burst of parks has gone quiet. Resets the count
 * of parks for the next tick. */
bool conn_tick_trim(struct worker *w);

/* Close every connection of w that is idle between requests (parked or
 * not), and mark the others to close after their current request
 * (draining). */
void conn_drain_all(struct worker *w);

/* Free every connection of w at once (shutdown), and the memory kept for
 * parking. */
void conn_free_all(struct worker *w);

#endif /* EDGE_CONN_H */
