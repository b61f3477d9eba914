/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * worker.h - edged's worker threads: each owns one libevent loop, its
 * SO_REUSEPORT listening sockets, its client connections and its
 * upstream pools. What all workers share (the route holder, the analytics
 * writer, the global gauges, the per-client rate limit's buckets) is in
 * struct worker_shared, owned by the main thread.
 *
 * The main thread talks to a worker only through worker_drain(),
 * worker_stop() and worker_retune(), which are thread-safe (an atomic
 * command or settings generation, and a write to the worker's eventfd).
 */
#ifndef EDGE_WORKER_H
#define EDGE_WORKER_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "admit.h"
#include "analytics.h"
#include "config.h"
#include "h1.h"
#include "hdr.h"
#include "outcome.h"
#include "route.h"
#include "tls.h"
#include "upstream.h"

struct conn_ops;
struct h2up_set;
struct req_upstream_ops;
struct conn_set;
struct worker;
struct l4_set;
struct quic_app_ops;
struct quic_set;
struct listener_accepts;
struct listener_set;
struct mailbox;
struct mailbox_msg;
struct reqid_table;
struct tunnel_set;
struct proxy_set;
struct wake;

/*
 * A part of edged that lives in every worker: its listeners, its client
 * connections, its TCP routes' connections. The worker knows nothing of
 * them but these hooks, which it calls on its own thread: init in
 * worker_new (in the order of the list; a failure frees what the
 * services made), drain when asked to drain (in order), free in
 * worker_free (in reverse order; also after a failed init, so free
 * copes with what init did not make), busy to know when a draining
 * worker may exit, tick once a second (true: memory may be handed back,
 * malloc_trim), mail for a mailbox message (true: it was the service's),
 * mail_drop for one that will never be handled (true: the service's).
 * Any hook may be NULL.
 */
struct worker_service {
	const char *name;
	int (*init)(struct worker *w, struct errbuf *err);
	void (*drain)(struct worker *w);
	void (*free)(struct worker *w);
	size_t (*busy)(const struct worker *w);
	bool (*tick)(struct worker *w);
	bool (*mail)(struct worker *w, const struct mailbox_msg *m);
	bool (*mail_drop)(struct worker *w, const struct mailbox_msg *m);
};

/* Read by every worker; written only by the main thread before the
 * workers start, except routes (swapped atomically) and the atomics. */
/* The workers' upstream pools and health, summed: each worker adds what
 * changed in its own upstream_stats at every tick (1 s), so the control
 * thread reads them without touching a worker's state. */
struct worker_upstream_totals {
	atomic_ullong endpoints, idle_fds;		  /* gauges */
	atomic_ullong pool_hits, pool_misses, pool_stale; /* counters */
	atomic_ullong pool_closed, ejections, panics;	  /* counters */
	atomic_ullong retries, retry_refused;	      /* counters (retry.h) */
	atomic_ullong circuit_opens, circuit_refused; /* counters (circuit.h) */
	atomic_ullong circuits_open;		      /* gauge */
	/* requests that found every endpoint at max_inflight: waited,
	 * refused (counters) */
	atomic_ullong ep_full_waits, ep_full_refused;
	atomic_ullong hedges, hedge_wins; /* counters (hedge.h) */
};

/* What a reload changes in running workers besides the route table:
 * limits, timeouts, the per-client rate limit, HTTP/2's settings and the
 * trusted proxies. */
struct worker_settings {
	struct config_limits limits;
	struct config_timeouts timeouts;
	struct config_ratelimit ratelimit;
	struct config_http2 http2;	 /* for connections accepted after */
	struct config_upstream upstream; /* passive health's thresholds */
	struct h1_limits h1;		 /* the parser's bounds, from limits */
	struct trusted trusted_proxies;	 /* trusted_proxies */
	bool quic_advertise;  /* tls.quic_advertise (QUIC's sockets: the
				 start-up configuration's) */
	bool quic_early_data; /* tls.quic_early_data, for connections
				 accepted after */
	/* the challenge's keys: the key file's (chal_file), else the
	 * database's (chal_db_keys_get), else chal_random_keys()
	 * (chal_random) */
	struct chal_keys chal_keys;
	bool chal_file, chal_random;
};

/* s from cfg's limits, timeouts, ratelimit, http2, upstream and
 * trusted_proxies, and the challenge's keys. */
void worker_settings_from(struct worker_settings *s, const struct config *cfg);
/* s's challenge keys again, unless they are a key file's: the
 * database's now, else the random ones. */
void worker_settings_chal(struct worker_settings *s);

struct worker_shared {
	const struct config *cfg; /* the start-up configuration */
	/* what runs in each worker, NULL-terminated (set before the
	 * workers are made; NULL: nothing but the loop) */
	const struct worker_service *const *services;
	/* where the listeners hand new connections (listener.h) */
	const struct listener_accepts *accepts;
	/* the client connections' protocol adapter (conn.h) */
	const struct conn_ops *conn_ops;
	/* the requests' upstream side (req.h) */
	const struct req_upstream_ops *up_ops;
	/* what QUIC connections carry (quic.h: HTTP/3); NULL: no QUIC */
	const struct quic_app_ops *quic_app;
	struct route_holder routes;  /* the current route table */
	struct tls_holder tls;	     /* the certificate store; cur NULL:
					no HTTPS listener */
	struct analytics *analytics; /* NULL: recording off */
	struct admit_gauge inflight; /* limits.max_inflight */
	atomic_ulong connections;    /* open client connections */
	atomic_ulong parked;	     /* of them, parked (conn.h) */
	atomic_ulong parked_idle;    /* of those, after a request */
	/* the current settings: the main thread writes them under
	 * set_lock and then bumps set_gen; each worker copies them into
	 * its own w->set when it sees set_gen change (worker_retune) */
	pthread_mutex_t set_lock;
	struct worker_settings set;
	atomic_uint set_gen;
	struct worker_upstream_totals up;
	/* every worker's endpoints, shared (upreg.h): admin and health
	 * state, per-endpoint counters; NULL: none (tests) */
	struct upreg *upreg;
	atomic_ullong accept_pauses; /* listener_pause, every worker */
	/* busy connections the descriptor limit allows (worker_fd_conn_cap
	 * of RLIMIT_NOFILE, read every tick); 0: no limit */
	atomic_ulong fd_conn_cap;
	/* requests waiting for an in-flight slot (limits.max_queued) */
	struct admit_queue queue;
	/* called once per ended request from req_end (the metrics:
	 * stats_request_done), set before the workers start; NULL: none */
	void (*request_done)(void *arg, enum outcome o, int status, uint64_t t0,
			     uint64_t t_connect, uint64_t t_resp);
	void *request_done_arg;
	/* the Via member this edge adds upstream (hdr_via_init of
	 * host_name); a request that carries it is a loop */
	char via[HDR_VIA_MAX];
	/* connections open per TCP route slot (route.h, l4.h), every
	 * worker */
	atomic_ulong tcp_open[ROUTE_TCP_MAX];
	/* the on-demand environments (wake.h); NULL: none configured */
	struct wake *wake;
	/* the TCP routes' listen addresses each worker listens on now
	 * (tcproute.h sets it): descriptors worker_fd_reserve keeps */
	atomic_ulong tcp_addrs;
	/* the per-client rate limit's buckets, one table for all workers
	 * (each takes with its own w->bucket); NULL: no limiting */
	struct admit_limiter *limiter;
	/* client connections each worker accepted (its id's slot; a line
	 * each, so that workers do not share one) */
	struct {
		_Alignas(64) atomic_ullong n;
	} accepted[CONFIG_WORKERS_MAX];
	/* each worker's loop lag (admit.h's struct admit_lag), published at
	 * every probe: its recent lag and when its next probe is due
	 * (monotonic ns), so a reader adds a stall under way */
	struct {
		_Alignas(64) atomic_ullong recent_ns;
		atomic_ullong due_ns;
	} lag[CONFIG_WORKERS_MAX];
	/* requests refused 503 overloaded by brownout, every worker */
	atomic_ullong shed;
	/* connections on proxy_protocol listeners, by how their header
	 * ended (enum listener_pp_result, listener.h) */
	atomic_ullong pp[8];
};

enum worker_cmd {
	WORKER_RUN = 0,
	WORKER_DRAIN, /* stop accepting, finish requests in flight, exit */
	WORKER_STOP,  /* exit now, closing every connection */
};

/* Durations a worker keeps as libevent common timeouts, at most. */
#define WORKER_COMMON_TIMEOUTS 8

struct worker {
	unsigned id;
	struct worker_shared *sh;
	struct worker_settings set; /* this worker's copy of sh->set */
	unsigned set_gen;	    /* the sh->set_gen it was copied at */
	struct event_base *base;
	pthread_t thread;
	bool started;
	bool uring_want;  /* io_uring = true at its start */
	atomic_int uring; /* 1: its sends go through io_uring; else
			     0 or the -errno its set-up, or its ring
			     at run time (uring_broke), failed with */
	atomic_bool uring_broke;
	sem_t set_up;	      /* posted once its thread has set up (its ring) */
	atomic_int cmd;	      /* enum worker_cmd */
	int notify_fd;	      /* eventfd the main thread writes to */
	struct event *notify; /* reads notify_fd: w->cmd changed */
	struct event *tick;   /* periodic pool expiry */
	struct event *probe;  /* the loop's lag probe (admit_lag) */
	struct admit_lag lag; /* its loop's lag, brownout's measure */
	/* the services' state (each service's own; NULL until its init) */
	struct listener_set *ls; /* its listening sockets (listener.c) */
	struct conn_set *cs;	 /* its client connections (conn.c) */
	struct l4_set *l4;	 /* its TCP routes' connections (l4.c) */
	struct quic_set *quic;	 /* its QUIC sockets and connections */
	struct mailbox *mbox;	 /* messages from any thread (worker_post) */
	struct reqid_table *ids; /* requests messages may name */
	bool draining;
	unsigned long nofile;	  /* RLIMIT_NOFILE, read every tick; 0: none */
	unsigned long fd_reserve; /* worker_fd_reserve() */
	struct upstream_worker *up;
	struct h2up_set *h2up;	    /* its HTTP/2 upstream sessions */
	struct tunnel_set *tunnels; /* its tunnels (tunnel.h) */
	struct proxy_set *px;	    /* its requests waiting for an endpoint */
	unsigned splice_gen;	    /* splice_gen() it last applied */
	struct upstream_stats up_published; /* added to sh->up so far */
	/* its circuits as of its last tick (worker_circuits), under
	 * circ_lock: the control loop's copy, never the live table */
	pthread_mutex_t circ_lock;
	struct circuit_view circ[CIRCUIT_SETS * CIRCUIT_WAYS];
	size_t n_circ;
	struct admit_bucket bucket; /* per-client rate (interval 0: off) */
	/* libevent common timeouts for the durations used per request: a
	 * timer of one of these goes into an O(1) queue, not the heap */
	struct {
		uint64_t ms;
		const struct timeval *tv;
	} common[WORKER_COMMON_TIMEOUTS];
	size_t ncommon;
};

/* w's circuits as its last tick published them (at most a second old)
 * into out[0..max): how many. Any thread. */
size_t worker_circuits(struct worker *w, struct circuit_view *out, size_t max);

/*
 * Create worker id over sh: its event_base, its upstream state, and its
 * services (sh->services: the listeners bind theirs now, so that binding
 * happens before privileges are dropped). Does not start the thread.
 * Returns 0 and *out, or -errno with err saying what failed.
 */
int worker_new(unsigned id, struct worker_shared *sh, struct worker **out,
	       struct errbuf *err);

/* Start the worker's thread. Returns 0 or -errno from pthread_create. */
int worker_start(struct worker *w);
/* Wait until w's thread (started) has set itself up: its io_uring ring
 * made or refused, and w->uring saying which. */
void worker_wait_up(struct worker *w);

/* Ask the worker to drain (thread-safe, idempotent): close its listening
 * sockets and idle connections, finish requests in flight, then exit its
 * loop once no connection is left. */
void worker_drain(struct worker *w);

/* Ask the worker to exit its loop now (thread-safe). */
void worker_stop(struct worker *w);

/* Have the worker take up sh->set (thread-safe; call after bumping
 * sh->set_gen): later connections and requests use the new limits and
 * timeouts, a changed rate limit starts with fresh buckets, timers
 * already armed run their course. */
void worker_retune(struct worker *w);

/* On the worker's own thread: take up sh->set if sh->set_gen moved (one
 * atomic load when it has not). At its wake and before each accept
 * batch, so that a connection accepted after a reload published its
 * settings has them, whichever of the two events the loop sees first. */
void worker_sync_settings(struct worker *w);

/* Wait for the thread until deadline (CLOCK_REALTIME). Returns 0 when it
 * ended, -ETIMEDOUT when it still runs. */
int worker_join(struct worker *w, const struct timespec *deadline);

/* Refuse further messages to w (worker_post: -ESHUTDOWN) and drop those
 * queued; its loop must have stopped. Before freeing any of the workers,
 * quiesce them all. NULL is fine. */
void worker_quiesce(struct worker *w);

/* Free a worker whose thread has ended (or never started): closes every
 * connection and socket it still has. NULL is fine. */
void worker_free(struct worker *w);

/* Descriptors edged keeps for itself beyond its connections: the loops'
 * epoll and eventfds, the admin and control sockets, the analytics file,
 * the pinned maps, libc; plus, per worker, its listeners and a few. */
#define WORKER_FD_RESERVE 64

/* The descriptors edged keeps for itself: WORKER_FD_RESERVE and, per
 * worker, its listeners (sh->cfg's listen and tls.listen,
 * sh->tcp_addrs) and a few. */
unsigned long worker_fd_reserve(const struct worker_shared *sh);

/* How many busy client connections a descriptor limit of nofile allows:
 * one with a request holds two (the client's and its upstream's), after
 * the reserve; an idle keep-alive one (parked) holds one, so more fit
 * while some are idle. The listeners stop accepting when one more
 * connection with a request would pass the limit (listener.c); the rest
 * wait in the kernel's listen backlog. At least 1. */
unsigned long worker_fd_conn_cap(const struct worker_shared *sh,
				 unsigned long nofile);

/* Read the descriptor limit as it is now (prlimit(1) may change it from
 * outside) into w->nofile and w->fd_reserve, and publish the busy cap in
 * sh->fd_conn_cap. Every tick, and when accept runs out. */
void worker_read_nofile(struct worker *w);

/* On w's thread: whether its loop lags over limits.brownout_lag now
 * (admit_lag_shed; false when brownout is off). */
bool worker_lagging(struct worker *w);

/* On w's thread: a connection (TCP socket fd, or -1) came or has a
 * request: the lag probe, paused while w had none (an idle worker
 * sleeps), runs again; how long fd's bytes waited for the loop counts as
 * that probe's lag (a loop stalled while idle is late for them). Cheap
 * when the probe runs. */
void worker_lag_wake(struct worker *w, int fd);

/* Any thread: worker id's recent loop lag at monotonic now_ns, ns (the
 * longest of its last 5 to 10 s, a probe overdue now included:
 * admit_lag_recent as it last published it). */
uint64_t worker_lag_ns(const struct worker_shared *sh, unsigned id,
		       uint64_t now_ns);

/* Post a message (a REQ_MSG_*) for the request named target to w's
 * mailbox, from any thread: w's loop hands it to req_message(). 0, or
 * -EAGAIN when the mailbox is full, -EPIPE when w is going away. */
int worker_post(struct worker *w, uint32_t type, uint64_t target);
/* The same with a value for the request (REQ_MSG_WAKE's result). */
int worker_post_arg(struct worker *w, uint32_t type, uint64_t target,
		    uint64_t arg);

/* Mailbox message types: the worker's own (0x102); its services' (the
 * listeners' 0x100, 0x101 and 0x103, a request's REQ_MSG_*, a TCP route
 * connection's L4_MSG_WAKE) go to the service that takes them.
 * WORKER_MSG_UPSTREAM: an endpoint's admin state changed (edgectl
 * upstream): close the idle pooled connections of those no longer
 * enabled now, not at the next tick. */
#define WORKER_MSG_UPSTREAM 0x102

/* A name for obj that messages to w can carry (worker thread only): 0 and
 * *id, or -ENOMEM / -ENOSPC. worker_handle_get gives obj back while the
 * name is held, NULL once worker_handle_free has given it up (a message
 * for a request that ended meanwhile finds nothing). */
int worker_handle_new(struct worker *w, void *obj, uint64_t *id);
void *worker_handle_get(struct worker *w, uint64_t id);
void worker_handle_free(struct worker *w, uint64_t id);

/* Exit the loop if draining and no connection (HTTP or TCP route) is
 * left (worker thread). */
void worker_maybe_exit(struct worker *w);

/* Make ms one of w's common timeouts (worker thread, or before it runs;
 * no-op when WORKER_COMMON_TIMEOUTS are made, for 0 or one known):
 * durations armed for nearly every request or connection. */
void worker_add_common(struct worker *w, uint64_t ms);

/* The timeval for ms milliseconds on w's loop: w's common timeout for
 * that duration when it has one, else *tv filled in. Either way, pass the
 * result to event_add on w->base only. */
const struct timeval *worker_timeout(const struct worker *w, uint64_t ms,
				     struct timeval *tv);

#endif /* EDGE_WORKER_H */
