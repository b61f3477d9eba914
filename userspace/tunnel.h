/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tunnel.h - a connection pair that needs no more HTTP (an HTTP/1.1 101,
 * a TCP route's connection): bytes moved both ways between two sockets
 * until both directions have ended.
 *
 * tunnel_start() takes the two sockios with the bytes edge already holds
 * for each side, and reports once, through its done callback, how the
 * pair ended and how many bytes went each way. The copy mover moves the
 * bytes through edge on the worker's loop; the sockmap mover hands the
 * pair to the kernel at its first pause (tunnel.c, docs/splice.md).
 *
 * Behaviour, whatever the implementation:
 *   - the pending bytes are written first, then what is read from the
 *     other side, in order: nothing lost, duplicated or reordered;
 *   - backpressure: a side is read only while the other side has less
 *     than TUNNEL_HIGH_WATER bytes queued (bounded memory per tunnel;
 *     the sockmap mover has none: the kernel's backlog is bounded by
 *     handing a tunnel that makes it hold 16 MiB back to the copy
 *     mover, tunnel.c);
 *   - half-close: EOF from one side becomes shutdown(SHUT_WR) on the other
 *     once everything before it was written, and the other direction goes
 *     on until it ends too;
 *   - the pair closes when both directions have ended, on an error on
 *     either side, or when no byte moved either way for idle_ms.
 */
#ifndef EDGE_TUNNEL_H
#define EDGE_TUNNEL_H

#include <stdint.h>

struct sockio;
struct tunnel;
struct worker;

/* Bytes queued towards one side above which the other side is no longer
 * read, and the level at which reading resumes; and the size of one read
 * while a side streams: a 64 KiB buffer less libevent's chain header (a
 * read of a round 64 KiB takes a 128 KiB chain, past malloc's mmap
 * threshold: a mapping per read, which cost 1,000 tunnels their pace and
 * request/response messages of 64 KiB two thirds of their rate). Against
 * 16 KiB reads into a 64 KiB queue, a bulk stream costs less CPU per GB
 * (bench/splice, docs/benchmarks.md); the memory is taken only while
 * bytes wait, so an idle or small-message tunnel holds none of it. */
#define TUNNEL_HIGH_WATER (256 * 1024)
#define TUNNEL_LOW_WATER (64 * 1024)
#define TUNNEL_BULK_READ (64 * 1024 - 128)

/* Which socket of the pair. */
enum tunnel_side {
	TUNNEL_CLIENT = 0,
	TUNNEL_UPSTREAM = 1,
};

/* How a tunnel ended. */
enum tunnel_end {
	TUNNEL_END_CLOSED = 0, /* both directions ended (EOF both ways) */
	TUNNEL_END_IDLE,       /* no byte either way for idle_ms */
	TUNNEL_END_ERROR,      /* a socket error (reset, ...) on either side */
};

/* How a tunnel's bytes move. */
enum tunnel_mover {
	TUNNEL_MOVER_COPY = 0, /* read into edge, write out, on the loop */
	TUNNEL_MOVER_SOCKMAP,  /* the kernel's sockmap (splice.h) */
	/* tunnel_mover_for only (splice = "auto"): the copy mover, and the
	 * kernel's while the tunnel carries small messages (tunnel.c) */
	TUNNEL_MOVER_AUTO,
};

/* What a tunnel moved. Bytes count what was read from a side and queued
 * for the other, pending bytes given to tunnel_start() excluded. */
struct tunnel_stats {
	uint64_t bytes_up;   /* client -> upstream */
	uint64_t bytes_down; /* upstream -> client */
	/* of them, what the kernel moved (the sockmap program's counters) */
	uint64_t kernel_up, kernel_down;
	enum tunnel_end end;
	enum tunnel_mover mover; /* the kernel's if it ever moved a byte */
};

/* Called once when the tunnel has ended; both sockets are already shut
 * down for writing or closed. The callback may (and should) call
 * tunnel_free() on t; the tunnel does not touch itself after calling it. */
typedef void (*tunnel_done_fn)(struct tunnel *t, const struct tunnel_stats *st,
			       void *arg);

/* How a tunnel came to be (its traffic, for the auto mover). */
enum tunnel_kind {
	TUNNEL_KIND_UPGRADE = 0, /* an HTTP/1.1 Upgrade answered by a 101 */
	TUNNEL_KIND_TCP,	 /* a plain TCP route */
	TUNNEL_KIND_PASSTHROUGH, /* a TLS passthrough route (by SNI) */
	/* an Upgrade answered 101 on a TLS listener: edged holds the TLS
	 * session (tunnel_start finds it from the client's transport) */
	TUNNEL_KIND_UPGRADE_TLS,
	TUNNEL_KIND_MAX
};

/* The mover's name ("copy", "sockmap", "auto"), for logs, analytics and
 * tests. */
const char *tunnel_mover_name(enum tunnel_mover m);
/* What moved the bytes of a tunnel that moved st: "copy", "sockmap", or
 * "copy+sockmap" when the kernel moved part of them (auto, a hand-back). */
const char *tunnel_movers(const struct tunnel_stats *st);
/* "upgrade", "tcp", "passthrough", "upgrade_tls" */
const char *tunnel_kind_name(enum tunnel_kind k);

/* The mover a new tunnel of kind k gets now (the splice mode, whether
 * the kernel path passed its self-test, bench/splice's figures) and, in
 * *why, the reason, for status. */
enum tunnel_mover tunnel_mover_for(enum tunnel_kind k, const char **why);

/* How tunnels ended, as counted (tunnel_counts, edge_tunnels_ended_total,
 * edgectl status): both directions closed, idle, an error (a reset, ...)
 * on the client's or the upstream's socket (edged then closes the other,
 * which sees a reset if it had sent bytes edged had not read), or closed
 * by edged itself (the sockmap mover's watchdog or a failed hand-over,
 * a drain past timeouts.drain, the shutdown). */
enum tunnel_ended {
	TUNNEL_ENDED_CLOSED = 0,
	TUNNEL_ENDED_IDLE,
	TUNNEL_ENDED_CLIENT_ERROR,
	TUNNEL_ENDED_UPSTREAM_ERROR,
	TUNNEL_ENDED_EDGE,
	TUNNEL_ENDED_MAX
};

/* "closed", "idle", "client_error", "upstream_error", "edge" */
const char *tunnel_ended_name(enum tunnel_ended e);

/* The splice's events, summed over every worker (counters). */
struct tunnel_counts {
	unsigned long long spliced;	  /* tunnels the kernel took */
	unsigned long long refused;	  /* pairs the sockhash refused */
	unsigned long long watchdog;	  /* closed by the watchdog: stalled */
	unsigned long long halfclosed;	  /* FINs forwarded while spliced */
	unsigned long long lost;	  /* bytes lost at an entry: failed */
	unsigned long long handed_back;	  /* back to the copy mover, whole */
	unsigned long long disarm_passes; /* TCP iterator passes for them */
	unsigned long long kernel_up, kernel_down;  /* bytes the kernel moved */
	unsigned long long open_spliced, open_copy; /* gauges */
	unsigned long long ended[TUNNEL_ENDED_MAX]; /* by enum tunnel_ended */
	/* of the errors, ETIMEDOUT: a side stopped answering its keepalive
	 * probes or acknowledging data (timeouts.tunnel_keepalive) */
	unsigned long long timed_out;
};
void tunnel_counts(struct tunnel_counts *out);

/*
 * Start a tunnel of kind k on w's loop between the sockios client and up,
 * both owned by the tunnel from now on (freed by tunnel_free, and on
 * failure; their callbacks are the tunnel's), with the mover
 * tunnel_mover_for(k) gives. What their outputs hold is written first,
 * and what their inputs hold (bytes read past the heads) is moved to the
 * other side first, in order; neither is counted in the stats. The kernel
 * mover takes the pair only once both are flushed, and gives it back to
 * the copy mover (without losing a byte) at an end, on a stall, or when
 * the switch says off. idle_ms > 0 is the idle timeout. Returns 0 and
 * *out, or -ENOMEM (both sockios freed).
 */
int tunnel_start(struct worker *w, struct sockio *client, struct sockio *up,
		 enum tunnel_kind k, uint64_t idle_ms, tunnel_done_fn done,
		 void *arg, struct tunnel **out);

/* The mover t uses now. */
enum tunnel_mover tunnel_mover(const struct tunnel *t);

/* The worker's tunnels: made by worker_new, freed by worker_free (after
 * its tunnels); tunnel_set_switch applies the run-time switch to each
 * (splice_get_mode: off takes spliced ones back, on splices the rest). */
struct tunnel_set;
int tunnel_set_new(struct worker *w, struct tunnel_set **out);
void tunnel_set_free(struct tunnel_set *ts);
void tunnel_set_switch(struct tunnel_set *ts);

/* A snapshot of what t has moved so far. */
void tunnel_stats(const struct tunnel *t, struct tunnel_stats *st);

/* Close both sides and free t, ended or not (the done callback is not
 * called). NULL is fine. May be called from the done callback. */
void tunnel_free(struct tunnel *t);

#endif /* EDGE_TUNNEL_H */
