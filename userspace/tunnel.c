// SPDX-License-Identifier: BSD-2-Clause
/*
 * tunnel.c - the tunnel of tunnel.h: the copy mover (each side's sockio
 * input moved to the other side's output on the worker's loop, with
 * backpressure, half-close forwarded, an idle timer over both) and the
 * sockmap mover on top of it.
 *
 * The sockmap mover is the copy mover until the kernel takes the pair:
 *   COPY     the copy mover runs, the sockets outside the maps. While the
 *            kernel path is wanted, an entry is tried at the end of the
 *            first loop turn and then every few milliseconds: both
 *            outputs flushed, both inputs empty, no EOF either way, and
 *            neither socket with a byte to read (MSG_PEEK); then both
 *            go into the maps already redirecting, the program is made
 *            to look at what reached either receive queue in between
 *            (splice_sock_kick), the sockios leave the loop and a
 *            per-worker epoll watches the sockets for a FIN, a reset or
 *            an error only (a redirected byte wakes nobody).
 *   SPLICED  the kernel moves the bytes while the pair is in the maps.
 *            A FIN from one side is forwarded (the
 *            other's write side shut down) once what the kernel
 *            redirected from it has reached the other's send queue (the
 *            destination's TCP counters against the source's redirected
 *            count), while the other direction flows on; a reset or an
 *            error closes both. A timer checks the counters 5 ms after
 *            the entry and then every second (the watchdog): bytes the
 *            program passed instead of redirecting (the peer left the
 *            map), or redirected bytes that do not reach a send queue
 *            with room, for two checks in a row, are a stall: the
 *            program is kicked once, and a tunnel still stuck at the next
 *            check leaves the kernel; so does one whose reader is slower
 *            than its writer (tunnel_slow_reader), and every one when the
 *            switch says off.
 *   LEAVING  out from under the verdict at the worker's next disarm
 *            pass, under the sockets' locks (splice_sock_disarm; their
 *            bytes wait in their receive queues from then); each
 *            socket stays a redirect target until the kernel holds
 *            nothing for it, then leaves the maps, and the direction
 *            into it, every byte accounted for, is the copy mover's
 *            while the other may still drain in the kernel
 *            (tunnel_leave_dir); both so: COPY. One that cannot leave
 *            whole is closed, counted and logged.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clk.h"
#include "log.h"
#include "sockio.h"
#include "splice.h"
#include "tunnel.h"
#include "worker.h"

/* Timings of the sockmap mover, milliseconds. */
#define ENTER_FIRST_MS 1 /* the first entry try after the start */
#define ENTER_MAX_MS 64	 /* entry retries back off up to this */
#define ENTER_EARLY_MS                                                         \
	10		 /* a drained output brings a try forward, at          \
			    most this often */
#define VERIFY_MS 5	 /* the check after an entry */
#define WATCH_MS 1000	 /* the watchdog's period, once quiet */
#define STALL_CHECKS 2	 /* checks without progress that are a stall */
#define WATCH_BUSY_MS 20 /* the period while the kernel moves bytes */
/* What the kernel may hold for one direction, redirected and not yet in
 * the destination's send queue: the sockmap has no backpressure, so a
 * reader slower than its writer makes its backlog grow without bound
 * (measured here: 350 MB/s). A reader is slower when its send queue is
 * full (the socket's buffer, SO_MEMINFO's, half taken) and the kernel
 * holds more than a copied tunnel would let its writer send beyond that
 * queue before TCP stopped it: the source's receive buffer, as TCP
 * sized it for the stream's rate, and the copy mover's queue
 * (KERNEL_HOLD_MIN at least); then the tunnel leaves the kernel for the
 * copy mover's backpressure. A stream whose reader keeps up stays at
 * any rate. More than KERNEL_HOLD_CAP held, whatever the reader does
 * (the kernel's sender starved of CPU), leaves too: memory is bounded. */
#define KERNEL_HOLD_MIN (1u << 20)
#define KERNEL_HOLD_CAP (64u << 20)
#define FIN_FIRST_MS 1	/* a FIN: first look at the counters */
#define FIN_MAX_MS 50	/* looks back off up to this */
#define LEAVE_POLL_MS 5 /* leaving: how often the kernel's hold is read */
/* leaving: the hold is trusted only this long after the disarm, when a
 * verdict that began before it has most likely counted and queued its
 * redirect (one waiting for a CPU longer is waited for: tunnel_leave_dir;
 * none runs across a disarm under the socket locks, splice.h) */
#define LEAVE_GRACE_MS 10
/* leaving: a hold that shrinks not for this, while its destination's send
 * queue has room (a full one is a reader that stopped: that waits, as a
 * copied tunnel would, until tunnel_idle) */
#define LEAVE_STUCK_MS 2000
/* leaving: the longest a tunnel waits for its set's disarm pass */
#define DISARM_WAIT_MAX_MS 100

/*
 * splice = "auto" (docs/splice.md, bench/splice): the kernel pays for
 * messages (request/response, chat), which it moves at a fraction
 * of the copy's latency and none of edged's CPU (bench/splice: 64 B to
 * 64 KiB request/response); a bulk stream it cannot pace (the sockmap
 * has no backpressure), which the copy mover can. Messages are told from
 * a stream by their runs: the bytes moved one way without a pause of
 * AUTO_PAUSE_MS or a turn of direction. A copied tunnel whose last
 * AUTO_SMALL_RUN moves were in runs of at most AUTO_RUN_MAX bytes, and
 * went both ways among them, carries messages: the kernel takes it at its
 * next pause (a one-way run of small moves is a stream whose writer is
 * slow: an upload from a starved client is not taken). A spliced one for
 * which the kernel holds more than its reader takes (tunnel_slow_reader:
 * a reader slower than its writer, the tunnel turned to bulk) is
 * handed back to the copy mover and stays there for AUTO_BACKOFF_MS,
 * doubled at each such turn up to AUTO_BACKOFF_MAX_MS, so that a tunnel
 * that alternates pays little; one that moved nothing for
 * AUTO_QUIET_LEAVE_MS is handed back too (a quiet spliced tunnel costs a
 * watchdog look a second, a quiet copied one nothing) and is taken again
 * at its next small message.
 */
#define AUTO_RUN_MAX (256u << 10)
#define AUTO_PAUSE_MS 20
#define AUTO_SMALL_RUN 8
#define AUTO_BACKOFF_MS 1000
#define AUTO_BACKOFF_MAX_MS 60000
#define AUTO_QUIET_LEAVE_MS 3000

enum tunnel_phase {
	PH_COPY = 0,
	PH_SPLICED,
	PH_LEAVING, /* disarmed: the kernel sends what it holds, then the
		       copy mover takes over */
};

struct tunnel_half {
	struct tunnel *t;
	struct sockio *io;
	bool eof;  /* read EOF: nothing more comes from this side */
	bool shut; /* asked to shut down for writing (the direction into it
		      is ending) */
	bool down; /* its write side is down: that direction has ended */
	/* the sockmap mover's */
	int fd;		 /* the socket (sockio_fd) */
	uint64_t cookie; /* its key in the maps, 0: not in them */
	bool watched;	 /* in the worker's epoll */
	bool kfin;	 /* spliced: its FIN came (nothing more from it) */
	/* written(this socket) less what the peer had redirected, at the
	 * last entry: written - base is what the kernel delivered into it */
	uint64_t base;
	struct edge_splice_cnt cnt; /* its counts, last read */
	uint64_t redir_lo;	    /* redirected, read before the sockets */
	uint64_t written;	    /* its written count, last read */
	uint64_t received;	    /* its received count, last read */
	uint64_t rbase;		    /* received at the entry: edge's */
	uint64_t queued;	    /* unacknowledged, last read */
	bool exact;		    /* written was read steady (no ACK came) */
	uint64_t sndbuf;	    /* its send buffer (SO_MEMINFO) */
	uint64_t rcvbuf;	    /* its receive buffer, read with sndbuf */
	/* leaving (PH_LEAVING): out of the maps, the kernel holding nothing
	 * more for it, so the direction into it is the copy mover's (its
	 * peer read, it written) while the other may still be the
	 * kernel's */
	bool plain;
	uint64_t leave_held; /* the smallest hold for it seen */
	uint64_t leave_ns;   /* since when that hold has not shrunk */
	uint64_t steady_ns;  /* since when its counts have not held still */
	uint64_t short_ns;   /* since when fewer are accounted for than
				received (a verdict run not counted yet) */
};

struct tunnel {
	struct tunnel_half s[2]; /* indexed by enum tunnel_side */
	struct worker *w;
	struct tunnel_set *set;
	LIST_ENTRY(tunnel) link;
	struct event *idle;
	struct event *tmr; /* the sockmap mover's: entry, checks, leaving */
	uint64_t idle_ns;
	uint64_t last_ns; /* monotonic ns of the last byte moved */
	struct tunnel_stats st;
	enum tunnel_kind kind;
	enum tunnel_phase phase;
	bool no_kernel; /* refused, stalled, lost: copy from now on */
	/* auto: the moves in a row that were messages, the current run
	 * (its direction, bytes and last move), and when a tunnel that
	 * turned to bulk may be taken again */
	unsigned small;
	unsigned small_dirs; /* the directions among them (bit per side) */
	int run_dir;
	uint64_t run_bytes, run_ns;
	uint64_t auto_after_ns;
	unsigned backoff_ms;
	uint64_t moved_ns; /* spliced: when the kernel last moved a byte */

	bool kernel_used;  /* the kernel moved a byte at some time */
	unsigned enter_ms; /* the next entry retry's delay */
	uint64_t tried_ns; /* the last entry try */
	uint64_t quiet_ns; /* the watchdog: since when nothing moved */
	bool kicked;	   /* the watchdog kicked the program */
	unsigned fin_ms;   /* a FIN waits: the next look's delay */
	uint64_t progress; /* the counters' sum at the last check */
	uint64_t idle_sum; /* the kernel's bytes at the last idle look */
	uint64_t busy_sum; /* the kernel's bytes at the last check */
	unsigned watch_ms; /* the watchdog's next period */
	/* what earlier stays in the kernel moved (its counts start over at
	 * each entry) */
	uint64_t kup0, kdown0;
	/* leaving the kernel (PH_LEAVING; per side in tunnel_half) */
	const char *leave_why;
	bool leave_final;   /* never back into the kernel after it */
	uint64_t disarm_ns; /* when both left the verdict's map */
	/* leaving, its sockets not disarmed yet: in its set's waiting list
	 * for the set's next pass */
	bool disarm_wait;
	LIST_ENTRY(tunnel) wait_link;
	tunnel_done_fn done;
	void *arg;
	bool ended;
	/* an error's side (enum tunnel_side), or -1: edged's own (the
	 * watchdog, the kernel path failing) */
	int err_side;
	int err; /* that error's errno (ETIMEDOUT: the peer stopped answering)
		  */
};

#define SET_BATCH 64
#define SET_DISARM 256 /* tunnels disarmed in one pass at most */

struct tunnel_set {
	struct worker *w;
	int epfd;
	struct event *ev;
	LIST_HEAD(tunnel_list, tunnel) all;
	/* the events being handled: a tunnel freed meanwhile clears its
	 * own from here */
	struct epoll_event batch[SET_BATCH];
	int nbatch;
	/* tunnels leaving the kernel whose sockets wait for one disarm pass
	 * (splice_sock_disarm: one pass over every TCP socket, however many
	 * it disarms), run by pass_ev no sooner than 9 times the last pass's
	 * time after it (at most a tenth of the worker's time), at most
	 * DISARM_WAIT_MAX_MS */
	LIST_HEAD(tunnel_wait, tunnel) waiting;
	struct event *pass_ev;
	uint64_t pass_end_ns, pass_ns;
	uint64_t ck[2 * SET_DISARM];
	int fd[2 * SET_DISARM];
	bool locked[2 * SET_DISARM];
};

static struct {
	atomic_ullong spliced, refused, watchdog, halfclosed, lost, handed_back;
	atomic_ullong disarm_passes;
	atomic_ullong kernel_up, kernel_down;
	atomic_llong open_spliced, open_copy;
	atomic_ullong ended[TUNNEL_ENDED_MAX];
	atomic_ullong timed_out;
} tc;

static void tunnel_pump(struct tunnel *t, int i);
static void tunnel_try_enter(struct tunnel *t);
static bool kernel_wanted(const struct tunnel *t);
static void tunnel_kernel_event(struct tunnel_half *h, uint32_t ev);
static bool tunnel_leave(struct tunnel *t, const char *why, bool final);
static void tunnel_set_pass_cb(evutil_socket_t fd, short what, void *arg);

const char *tunnel_mover_name(enum tunnel_mover m)
{
	switch (m) {
	case TUNNEL_MOVER_COPY:
		return "copy";
	case TUNNEL_MOVER_SOCKMAP:
		return "sockmap";
	case TUNNEL_MOVER_AUTO:
		return "auto";
	}
	return "unknown";
}

const char *tunnel_movers(const struct tunnel_stats *st)
{
	uint64_t k = st->kernel_up + st->kernel_down;

	if (!k)
		return "copy";
	return k >= st->bytes_up + st->bytes_down ? "sockmap" : "copy+sockmap";
}

const char *tunnel_kind_name(enum tunnel_kind k)
{
	switch (k) {
	case TUNNEL_KIND_UPGRADE:
		return "upgrade";
	case TUNNEL_KIND_TCP:
		return "tcp";
	case TUNNEL_KIND_PASSTHROUGH:
		return "passthrough";
	case TUNNEL_KIND_UPGRADE_TLS:
		return "upgrade_tls";
	case TUNNEL_KIND_MAX:
		break;
	}
	return "unknown";
}

/*
 * A tunnel on a TLS listener: its bytes are TLS records that edged's
 * OpenSSL session decrypts and encrypts, so the sockmap cannot move them
 * as they are; only kTLS set on the client's socket could (the kernel
 * decrypting into the verdict, encrypting what is redirected to it).
 * That is not built (docs/splice.md, "TLS tunnels": on 6.1 and 6.12 a
 * socket cannot have both kTLS and a psock, in either order, as the
 * start-up probe reports; OpenSSL 3.0 sets kTLS at the handshake or not
 * at all, and gives no record sequence numbers to set it later), so
 * these are copied, and the reason says what the kernel has.
 */
static const char *tls_why(void)
{
	/* status's, on the main thread only (the workers ask for no why) */
	static char tls_why_buf[320];

	if (splice_ktls())
		snprintf(tls_why_buf, sizeof(tls_why_buf),
			 "copied through OpenSSL: %s, but edged does not move "
			 "a TLS session into it yet (docs/splice.md)",
			 splice_ktls_why());
	else
		snprintf(tls_why_buf, sizeof(tls_why_buf),
			 "copied through OpenSSL: %s", splice_ktls_why());
	return tls_why_buf;
}

enum tunnel_mover tunnel_mover_for(enum tunnel_kind k, const char **why)
{
	const char *w;
	enum tunnel_mover m = TUNNEL_MOVER_COPY;

	if (k == TUNNEL_KIND_UPGRADE_TLS) {
		if (why)
			*why = splice_get_mode() == SPLICE_OFF ? "splice is off"
							       : tls_why();
		return TUNNEL_MOVER_COPY;
	}
	switch (splice_get_mode()) {
	case SPLICE_OFF:
		w = "splice is off";
		break;
	case SPLICE_SOCKMAP:
		if (!splice_usable() || !splice_instance()) {
			w = splice_why();
			break;
		}
		m = TUNNEL_MOVER_SOCKMAP;
		w = "splice = sockmap";
		break;
	case SPLICE_AUTO:
	default:
		if (!splice_usable() || !splice_instance()) {
			w = splice_why();
			break;
		}
		(void)k;
		m = TUNNEL_MOVER_AUTO;
		w = "splice = auto: copied, and moved by the kernel while "
		    "a tunnel carries messages rather than a stream";
		break;
	}
	if (why)
		*why = w;
	return m;
}

void tunnel_counts(struct tunnel_counts *o)
{
	long long n;
	int i;

	o->spliced = atomic_load(&tc.spliced);
	o->refused = atomic_load(&tc.refused);
	o->watchdog = atomic_load(&tc.watchdog);
	o->halfclosed = atomic_load(&tc.halfclosed);
	o->lost = atomic_load(&tc.lost);
	o->handed_back = atomic_load(&tc.handed_back);
	o->disarm_passes = atomic_load(&tc.disarm_passes);
	o->kernel_up = atomic_load(&tc.kernel_up);
	o->kernel_down = atomic_load(&tc.kernel_down);
	n = atomic_load(&tc.open_spliced);
	o->open_spliced = n > 0 ? (unsigned long long)n : 0;
	n = atomic_load(&tc.open_copy);
	o->open_copy = n > 0 ? (unsigned long long)n : 0;
	for (i = 0; i < TUNNEL_ENDED_MAX; i++)
		o->ended[i] = atomic_load(&tc.ended[i]);
	o->timed_out = atomic_load(&tc.timed_out);
}

const char *tunnel_ended_name(enum tunnel_ended e)
{
	switch (e) {
	case TUNNEL_ENDED_CLOSED:
		return "closed";
	case TUNNEL_ENDED_IDLE:
		return "idle";
	case TUNNEL_ENDED_CLIENT_ERROR:
		return "client_error";
	case TUNNEL_ENDED_UPSTREAM_ERROR:
		return "upstream_error";
	case TUNNEL_ENDED_EDGE:
		return "edge";
	case TUNNEL_ENDED_MAX:
		break;
	}
	return "unknown";
}

enum tunnel_mover tunnel_mover(const struct tunnel *t)
{
	return t->phase == PH_COPY ? TUNNEL_MOVER_COPY : TUNNEL_MOVER_SOCKMAP;
}

static void tmr_arm(struct event *ev, uint64_t ms)
{
	struct timeval tv = {(time_t)(ms / 1000),
			     (suseconds_t)((ms % 1000) * 1000)};

	evtimer_add(ev, &tv);
}

static void idle_arm(struct tunnel *t, uint64_t ns)
{
	tmr_arm(t->idle, (ns + 999999) / 1000000);
}

static void phase_set(struct tunnel *t, enum tunnel_phase p)
{
	bool was = t->phase != PH_COPY, is = p != PH_COPY;

	t->phase = p;
	if (was == is)
		return;
	atomic_fetch_add(is ? &tc.open_spliced : &tc.open_copy, 1);
	atomic_fetch_sub(is ? &tc.open_copy : &tc.open_spliced, 1);
}

/* ---- the kernel's counters -------------------------------------------- */

/* Read both sockets' counts and TCP state: 0, or -errno (a socket gone). */
static int tunnel_look(struct tunnel *t)
{
	struct splice *sp = splice_instance();
	int i, rc;

	/* the program's counts, the sockets' TCP counts, the program's
	 * again: a count read after the sockets is never below what it was
	 * when they were read, so a backlog from it is never under-, a
	 * delivery never over-estimated; one read before never above (a
	 * worker preempted between the reads while the kernel moved 6 MiB
	 * made a 64 KiB ping-pong look like a reader 6 MiB behind) */
	for (i = 0; i < 2; i++) {
		struct edge_splice_cnt c;

		rc = splice_sock_counts(sp, t->s[i].cookie, &c);
		if (rc)
			return rc;
		t->s[i].redir_lo = c.redir_bytes;
	}
	for (i = 0; i < 2; i++) {
		struct tunnel_half *h = &t->s[i];

		/* unsteady (ACKs coming) it is a lower bound: a backlog
		 * over-, a delivery under-estimated, as below */
		rc = splice_sock_written(h->fd, &h->written, &h->queued,
					 &h->received);
		h->exact = rc == 0;
		if (rc && rc != -EAGAIN)
			return rc;
	}
	for (i = 0; i < 2; i++) {
		rc = splice_sock_counts(sp, t->s[i].cookie, &t->s[i].cnt);
		if (rc)
			return rc;
	}
	t->st.kernel_up = t->kup0 + t->s[TUNNEL_CLIENT].cnt.redir_bytes;
	t->st.kernel_down = t->kdown0 + t->s[TUNNEL_UPSTREAM].cnt.redir_bytes;
	if (t->st.kernel_up || t->st.kernel_down)
		t->kernel_used = true;
	return 0;
}

/* What the kernel redirected from side i and has not yet put into the
 * other side's send queue (from the last look). */
static uint64_t tunnel_backlog(const struct tunnel *t, int i)
{
	const struct tunnel_half *h = &t->s[i], *o = &t->s[1 - i];
	uint64_t delivered = o->written - o->base;

	return h->cnt.redir_bytes > delivered ? h->cnt.redir_bytes - delivered
					      : 0;
}

/* What the kernel surely holds for the other side of i (from the last
 * look): tunnel_backlog with the redirected count read before the
 * sockets, so that bytes redirected and sent while edged looked never
 * count. What a slow reader is judged by. */
static uint64_t tunnel_held(const struct tunnel *t, int i)
{
	const struct tunnel_half *h = &t->s[i], *o = &t->s[1 - i];
	uint64_t delivered = o->written - o->base;

	return h->redir_lo > delivered ? h->redir_lo - delivered : 0;
}

/* What side i has received since the entry that the program has not
 * taken yet (still in its receive queue), a FIN counting one. */
static uint64_t tunnel_untaken(const struct tunnel *t, int i)
{
	const struct tunnel_half *h = &t->s[i];
	uint64_t seen = h->rbase + h->cnt.redir_bytes + h->cnt.pass_bytes;

	return h->received > seen ? h->received - seen : 0;
}

/* Whether the kernel holds bytes for a side whose send queue is full (its
 * reader takes nothing now), from the last look. */
static bool tunnel_reader_full(const struct tunnel *t)
{
	int i;

	for (i = 0; i < 2; i++)
		if (tunnel_backlog(t, 1 - i) > 0 &&
		    t->s[i].queued >= t->s[i].sndbuf / 2)
			return true;
	return false;
}

/* Both sockets' buffers as TCP sizes them now: 0 or -errno. */
static int tunnel_bufs(struct tunnel *t)
{
	int i;

	for (i = 0; i < 2; i++) {
		uint32_t mi[SK_MEMINFO_VARS] = {0};
		socklen_t len = sizeof(mi);

		if (getsockopt(t->s[i].fd, SOL_SOCKET, SO_MEMINFO, mi, &len) <
		    0)
			return -errno;
		t->s[i].rcvbuf = mi[SK_MEMINFO_RCVBUF];
		t->s[i].sndbuf = mi[SK_MEMINFO_SNDBUF];
	}
	return 0;
}

/* What the kernel may hold for the direction from side i before its
 * reader, its send queue full, counts as slower than its writer (from
 * the last tunnel_bufs): KERNEL_HOLD_MIN's comment. */
static uint64_t tunnel_hold_max(const struct tunnel *t, int i)
{
	uint64_t m = t->s[i].rcvbuf + TUNNEL_HIGH_WATER;

	if (m < KERNEL_HOLD_MIN)
		return KERNEL_HOLD_MIN;
	return m > KERNEL_HOLD_CAP ? KERNEL_HOLD_CAP : m;
}

/* Why the direction from side i must leave the kernel (from the last
 * look and tunnel_bufs), or NULL: its reader is slower than its writer,
 * or the kernel holds more than any tunnel may. */
static const char *tunnel_slow_reader(const struct tunnel *t, int i)
{
	const struct tunnel_half *o = &t->s[1 - i];
	uint64_t held = tunnel_held(t, i);

	if (held > tunnel_hold_max(t, i) && o->queued >= o->sndbuf / 2)
		return "it holds too much for a slow reader";
	if (held > KERNEL_HOLD_CAP)
		return "it holds too much, the kernel sending slower than "
		       "its reader reads";
	return NULL;
}

/* ---- the set: the worker's epoll of spliced sockets -------------------- */

static void tunnel_set_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tunnel_set *ts = arg;
	int n, i;

	(void)fd;
	(void)what;
	n = epoll_wait(ts->epfd, ts->batch, SET_BATCH, 0);
	ts->nbatch = n > 0 ? n : 0;
	for (i = 0; i < ts->nbatch; i++)
		if (ts->batch[i].data.ptr)
			tunnel_kernel_event(ts->batch[i].data.ptr,
					    ts->batch[i].events);
	ts->nbatch = 0;
}

int tunnel_set_new(struct worker *w, struct tunnel_set **out)
{
	struct tunnel_set *ts = calloc(1, sizeof(*ts));

	if (!ts)
		return -ENOMEM;
	ts->w = w;
	LIST_INIT(&ts->all);
	ts->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (ts->epfd < 0) {
		free(ts);
		return -errno;
	}
	LIST_INIT(&ts->waiting);
	ts->ev = event_new(w->base, ts->epfd, EV_READ | EV_PERSIST,
			   tunnel_set_cb, ts);
	ts->pass_ev = evtimer_new(w->base, tunnel_set_pass_cb, ts);
	if (!ts->ev || !ts->pass_ev || event_add(ts->ev, NULL)) {
		tunnel_set_free(ts);
		return -ENOMEM;
	}
	*out = ts;
	return 0;
}

void tunnel_set_free(struct tunnel_set *ts)
{
	if (!ts)
		return;
	if (ts->ev)
		event_free(ts->ev);
	if (ts->pass_ev)
		event_free(ts->pass_ev);
	close(ts->epfd);
	free(ts);
}

void tunnel_set_switch(struct tunnel_set *ts)
{
	struct tunnel *t, *next;

	if (!ts)
		return;
	for (t = LIST_FIRST(&ts->all); t; t = next) {
		next = LIST_NEXT(t, link);
		/* off: a spliced tunnel is handed back (auto keeps it while
		 * it carries messages); all of them in one disarm pass */
		if (t->phase == PH_SPLICED &&
		    tunnel_mover_for(t->kind, NULL) == TUNNEL_MOVER_COPY) {
			tunnel_leave(t, "the switch is off", false);
			continue;
		}
		if (t->phase == PH_COPY && kernel_wanted(t)) {
			t->enter_ms = ENTER_FIRST_MS;
			tmr_arm(t->tmr, 0);
		}
	}
}

static void watch(struct tunnel *t, bool on)
{
	int i;

	for (i = 0; i < 2; i++) {
		struct tunnel_half *h = &t->s[i];
		struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLET,
					 .data.ptr = h};

		if (h->watched == on)
			continue;
		if (epoll_ctl(t->set->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL,
			      h->fd, &ev) == 0 ||
		    !on)
			h->watched = on;
	}
}

/* ---- the copy mover --------------------------------------------------- */

/* auto: n bytes moved from side i at now. Messages, AUTO_SMALL_RUN moves
 * of them in a row, make the tunnel one the kernel should take: try at
 * once. */
static void auto_note(struct tunnel *t, int i, size_t n, uint64_t now)
{
	if (i != t->run_dir || now - t->run_ns >= AUTO_PAUSE_MS * 1000000ull) {
		t->run_dir = i;
		t->run_bytes = 0;
	}
	t->run_ns = now;
	t->run_bytes += n;
	if (t->run_bytes > AUTO_RUN_MAX) {
		t->small = 0; /* a stream */
		t->small_dirs = 0;
		return;
	}
	if (t->small < AUTO_SMALL_RUN)
		t->small++;
	t->small_dirs |= 1u << i;
	if (t->small == AUTO_SMALL_RUN && t->small_dirs == 3 &&
	    !evtimer_pending(t->tmr, NULL) && kernel_wanted(t)) {
		t->enter_ms = ENTER_FIRST_MS;
		tmr_arm(t->tmr, ENTER_FIRST_MS);
	}
}

/* The tunnel is over: stop both sides and tell the owner (once). */
static void tunnel_end(struct tunnel *t, enum tunnel_end how)
{
	int i;

	if (t->ended)
		return;
	t->ended = true;
	t->st.end = how;
	if (t->disarm_wait) {
		LIST_REMOVE(t, wait_link);
		t->disarm_wait = false;
	}
	atomic_fetch_add(
	    &tc.ended[how == TUNNEL_END_CLOSED	     ? TUNNEL_ENDED_CLOSED
		      : how == TUNNEL_END_IDLE	     ? TUNNEL_ENDED_IDLE
		      : t->err_side == TUNNEL_CLIENT ? TUNNEL_ENDED_CLIENT_ERROR
		      : t->err_side == TUNNEL_UPSTREAM
			  ? TUNNEL_ENDED_UPSTREAM_ERROR
			  : TUNNEL_ENDED_EDGE],
	    1);
	if (how == TUNNEL_END_ERROR && t->err_side >= 0 &&
	    t->err == ETIMEDOUT) {
		atomic_fetch_add(&tc.timed_out, 1);
		log_note_rl("tunnel: the %s stopped answering (TCP keepalive "
			    "or unacknowledged data past "
			    "timeouts.tunnel_keepalive): closed",
			    t->err_side == TUNNEL_CLIENT ? "client"
							 : "upstream");
	}
	if (t->kernel_used && tunnel_look(t) == 0) /* the final counts */
		log_debug("tunnel: the kernel redirected %llu up, %llu down; "
			  "the sockets took %llu and %llu",
			  (unsigned long long)t->s[0].cnt.redir_bytes,
			  (unsigned long long)t->s[1].cnt.redir_bytes,
			  (unsigned long long)(t->s[1].written - t->s[1].base),
			  (unsigned long long)(t->s[0].written - t->s[0].base));
	t->st.bytes_up += t->st.kernel_up;
	t->st.bytes_down += t->st.kernel_down;
	t->st.mover = t->kernel_used ? TUNNEL_MOVER_SOCKMAP : TUNNEL_MOVER_COPY;
	atomic_fetch_add(&tc.kernel_up, t->st.kernel_up);
	atomic_fetch_add(&tc.kernel_down, t->st.kernel_down);
	for (i = 0; i < 2; i++)
		sockio_disable(t->s[i].io, EV_READ | EV_WRITE);
	watch(t, false);
	evtimer_del(t->idle);
	evtimer_del(t->tmr);
	t->done(t, &t->st, t->arg); /* may free t */
}

/* Whether the copy mover moves the bytes from side i: outside the
 * kernel, and while leaving it once the other side is plain. */
static bool copying(const struct tunnel *t, int i)
{
	return t->phase == PH_COPY ||
	       (t->phase == PH_LEAVING && t->s[1 - i].plain);
}

/* Move what side i has read to the other side's output, as far as the
 * other side's queue allows, and decide whether i is read further. When i
 * has ended and everything from it was handed on, the other side's write
 * side goes down once its output is out. */
static void tunnel_pump(struct tunnel *t, int i)
{
	struct tunnel_half *h = &t->s[i], *o = &t->s[1 - i];
	struct evbuffer *in = sockio_input(h->io);
	struct evbuffer *out = sockio_output(o->io);
	size_t n = evbuffer_get_length(in), q = evbuffer_get_length(out);

	if (t->ended || o->shut || !copying(t, i))
		return;
	if (q < TUNNEL_HIGH_WATER && n > 0) {
		if (n > TUNNEL_HIGH_WATER - q)
			n = TUNNEL_HIGH_WATER - q;
		if (sockio_move(in, out, n))
			n = 0; /* out of memory: tried again next time */
		if (i == TUNNEL_CLIENT)
			t->st.bytes_up += n;
		else
			t->st.bytes_down += n;
		t->last_ns = clk_now_ns();
		auto_note(t, i, n, t->last_ns);
	}
	if (h->eof) {
		if (evbuffer_get_length(in) > 0)
			return; /* the rest waits for o's write callback */
		o->shut = true;
		sockio_shutdown(o->io); /* reported as WRITING|SHUT */
		return;
	}
	if (evbuffer_get_length(out) >= TUNNEL_HIGH_WATER)
		sockio_disable(h->io, EV_READ);
	else
		sockio_enable(h->io, EV_READ);
}

static int side_of(const struct tunnel *t, const struct sockio *io)
{
	return io == t->s[TUNNEL_CLIENT].io ? TUNNEL_CLIENT : TUNNEL_UPSTREAM;
}

static void tunnel_read_cb(struct sockio *io, void *arg)
{
	struct tunnel *t = arg;

	tunnel_pump(t, side_of(t, io));
}

/* Side j's output drained to the low-water mark: resume the side that
 * feeds it. */
static void tunnel_write_cb(struct sockio *io, void *arg)
{
	struct tunnel *t = arg;

	t->last_ns = clk_now_ns();
	tunnel_pump(t, 1 - side_of(t, io));
	/* a pause may be coming: try the kernel path soon rather than at
	 * the end of the back-off */
	if (t->phase == PH_COPY && !t->ended &&
	    evbuffer_get_length(sockio_output(io)) == 0 &&
	    t->enter_ms > ENTER_FIRST_MS &&
	    clk_now_ns() - t->tried_ns >= ENTER_EARLY_MS * 1000000ull &&
	    kernel_wanted(t)) {
		t->enter_ms = ENTER_FIRST_MS;
		tmr_arm(t->tmr, ENTER_FIRST_MS);
	}
}

static void tunnel_event_cb(struct sockio *io, short what, void *arg)
{
	struct tunnel *t = arg;
	int i = side_of(t, io);

	if ((what & SOCKIO_EOF) && (what & SOCKIO_READING)) {
		uint64_t inq = 0;

		/* leaving, a socket the kernel still sends into has the
		 * sockmap's recvmsg, which can report the EOF of a FIN that
		 * came with bytes it had not looked at yet: not the end
		 * while the receive queue holds any */
		if (t->phase == PH_LEAVING && !t->s[i].plain &&
		    splice_sock_inq(t->s[i].fd, &inq) == 0 && inq > 0) {
			sockio_eof_retract(io);
			return;
		}
		t->s[i].eof = true;
		tunnel_pump(t, i);
		return;
	}
	if (what & SOCKIO_SHUT) {
		/* the direction into side i has ended */
		t->s[i].down = true;
		t->last_ns = clk_now_ns();
		if (t->s[1 - i].down)
			tunnel_end(t, TUNNEL_END_CLOSED);
		return;
	}
	t->err = errno;
	log_debug("tunnel: %s side: %s%s%s: %s",
		  i == TUNNEL_CLIENT ? "client" : "upstream",
		  what & SOCKIO_READING ? "reading" : "writing",
		  what & SOCKIO_TIMEOUT ? " timed out" : "",
		  what & SOCKIO_EOF ? " (EOF)" : "", strerror(t->err));
	t->err_side = i;
	tunnel_end(t, TUNNEL_END_ERROR);
}

static void tunnel_idle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tunnel *t = arg;
	uint64_t quiet;

	(void)fd;
	(void)what;
	if (t->phase != PH_COPY && tunnel_look(t) == 0) {
		uint64_t sum = t->st.kernel_up + t->st.kernel_down +
			       t->s[0].written + t->s[1].written;
		bool waiting = false;
		int i;

		/* bytes waiting for the kernel are not idleness (the
		 * watchdog's to judge), unless they wait for a reader that
		 * takes nothing: a copied tunnel's stopped reader is idle
		 * too; a direction the copy mover has (leaving) is its */
		for (i = 0; i < 2; i++)
			if (!copying(t, i) &&
			    (tunnel_untaken(t, i) > t->s[i].kfin ||
			     tunnel_backlog(t, i)))
				waiting = true;
		if (waiting && !tunnel_reader_full(t))
			sum = t->idle_sum + 1;
		if (sum != t->idle_sum) {
			t->idle_sum = sum;
			t->last_ns = clk_now_ns();
		}
	}
	quiet = clk_now_ns() - t->last_ns;
	if (quiet >= t->idle_ns) {
		tunnel_end(t, TUNNEL_END_IDLE);
		return;
	}
	idle_arm(t, t->idle_ns - quiet);
}

/* ---- the sockmap mover ------------------------------------------------ */

/* Whether t should be in the kernel now. */
static bool kernel_wanted(const struct tunnel *t)
{
	int i;

	if (t->no_kernel || t->ended)
		return false;
	switch (tunnel_mover_for(t->kind, NULL)) {
	case TUNNEL_MOVER_SOCKMAP:
		break;
	case TUNNEL_MOVER_AUTO:
		if (t->small < AUTO_SMALL_RUN || t->small_dirs != 3 ||
		    clk_now_ns() < t->auto_after_ns)
			return false;
		break;
	case TUNNEL_MOVER_COPY:
	default:
		return false;
	}
	for (i = 0; i < 2; i++)
		if (t->s[i].eof || t->s[i].shut || t->s[i].down)
			return false; /* ending: the copy mover finishes */
	return true;
}

static void enter_later(struct tunnel *t)
{
	tmr_arm(t->tmr, t->enter_ms);
	if (t->enter_ms < ENTER_MAX_MS)
		t->enter_ms *= 2;
}

/* Both sockets' identities for the maps: 0, or -errno (never spliced). */
static int tunnel_ids(struct tunnel *t)
{
	int i;

	for (i = 0; i < 2; i++) {
		struct tunnel_half *h = &t->s[i];

		if (strcmp(sockio_transport_name(h->io), "tcp") != 0)
			return -EOPNOTSUPP;
		h->fd = sockio_fd(h->io);
		h->cookie = splice_cookie(h->fd);
		if (!h->cookie)
			return -EOPNOTSUPP;
	}
	return tunnel_bufs(t) ? -EOPNOTSUPP : 0;
}

static void tunnel_refused(struct tunnel *t, int rc)
{
	atomic_fetch_add(&tc.refused, 1);
	t->no_kernel = true;
	t->s[0].cookie = t->s[1].cookie = 0;
	log_debug("tunnel: the kernel path refused the sockets (%s): copying",
		  rc == -EBUSY ? "another sk_skb program owns one"
			       : strerror(-rc));
}

/* Hand both directions to the kernel (see the top of the file). */
static void tunnel_try_enter(struct tunnel *t)
{
	struct splice *sp = splice_instance();
	struct edge_splice_cnt cnt = {0};
	uint64_t w[2];
	int i, rc;

	if (t->phase != PH_COPY || !kernel_wanted(t) || !sp)
		return;
	t->tried_ns = clk_now_ns();
	if (!t->s[0].cookie) {
		rc = tunnel_ids(t);
		if (rc) {
			tunnel_refused(t, rc);
			return;
		}
	}
	/* a read or a send waiting in the batch goes at the end of this
	 * turn: look again then, not after the back-off */
	for (i = 0; i < 2; i++) {
		if (sockio_batched(t->s[i].io)) {
			tmr_arm(t->tmr, 0);
			return;
		}
	}
	for (i = 0; i < 2; i++)
		if (evbuffer_get_length(sockio_input(t->s[i].io)) > 0)
			goto later;
	for (i = 0; i < 2; i++) {
		rc = sockio_flush(t->s[i].io);
		if (rc == -EAGAIN)
			goto later;
		if (rc)
			return; /* the copy mover sees the error */
	}
	for (i = 0; i < 2; i++) {
		/* received before the peek found nothing: read by edge */
		if (splice_sock_received(t->s[i].fd, &t->s[i].rbase))
			return;
		rc = splice_sock_peek(t->s[i].fd);
		if (rc == 1)
			goto later; /* the copy mover reads it first */
		if (rc != -EAGAIN)
			return; /* an EOF or an error: the copy mover's */
		rc = splice_sock_written(t->s[i].fd, &w[i], NULL, NULL);
		if (rc == -EAGAIN)
			goto later; /* the base must be exact */
		if (rc)
			return;
	}
	/* what each socket has had written into it so far is edge's; from
	 * here on, what more it gets is the kernel's redirects */
	for (i = 0; i < 2; i++)
		t->s[i].base = w[i];
	/* both in as redirect targets first, then both under the verdict:
	 * a byte never finds its peer missing */
	rc = splice_sock_add(sp, t->s[0].fd, t->s[0].cookie, t->s[1].cookie);
	if (rc == 0) {
		rc = splice_sock_add(sp, t->s[1].fd, t->s[1].cookie,
				     t->s[0].cookie);
		if (rc)
			splice_sock_del(sp, t->s[0].cookie);
	}
	if (rc == 0) {
		rc = splice_sock_arm(sp, t->s[0].fd, t->s[0].cookie);
		if (rc == 0)
			rc = splice_sock_arm(sp, t->s[1].fd, t->s[1].cookie);
		if (rc) {
			/* the client's socket may have been under the verdict
			 * alone for a moment: its bytes went to the upstream,
			 * in order, but edged cannot take the pair back */
			splice_sock_counts(sp, t->s[0].cookie, &cnt);
			splice_sock_del(sp, t->s[0].cookie);
			splice_sock_del(sp, t->s[1].cookie);
			if (cnt.pass_bytes || cnt.redir_bytes) {
				atomic_fetch_add(&tc.lost, 1);
				tunnel_refused(t, rc);
				tunnel_end(t, TUNNEL_END_ERROR);
				return;
			}
		}
	}
	if (rc) {
		tunnel_refused(t, rc);
		return;
	}
	for (i = 0; i < 2; i++)
		sockio_stop(t->s[i].io);
	watch(t, true);
	phase_set(t, PH_SPLICED);
	t->kernel_used = true;
	if (!t->s[0].watched || !t->s[1].watched) {
		/* a FIN would go unseen: end rather than hang */
		log_warn("tunnel: epoll");
		tunnel_end(t, TUNNEL_END_ERROR);
		return;
	}
	/* bytes that came between the peek and the add wait in a receive
	 * queue for the next arrival: have the program take them now */
	for (i = 0; i < 2; i++)
		splice_sock_kick(t->s[i].fd);
	t->quiet_ns = t->moved_ns = clk_now_ns();
	t->watch_ms = WATCH_BUSY_MS;
	t->kicked = false;
	t->progress = 0;
	t->idle_sum = 0;
	t->kernel_used = true;
	atomic_fetch_add(&tc.spliced, 1);
	log_debug("tunnel: spliced by the kernel");
	tmr_arm(t->tmr, VERIFY_MS);
	return;
later:
	enter_later(t);
}

/* Side i's FIN came while spliced: once everything the kernel took
 * from it is in the other side's send queue, shut that side's write
 * side down; both done, the tunnel has closed. Returns true when the
 * tunnel ended (t is freed then). */
static bool tunnel_kernel_fin(struct tunnel *t)
{
	bool waiting = false;
	int i;

	if (tunnel_look(t)) {
		tunnel_end(t, TUNNEL_END_ERROR);
		return true;
	}
	for (i = 0; i < 2; i++) {
		struct tunnel_half *h = &t->s[i], *o = &t->s[1 - i];

		if (!h->kfin || o->down)
			continue;
		/* everything before the FIN taken by the program (the FIN
		 * itself counts one) and in o's send queue */
		if (tunnel_untaken(t, i) > 1 || tunnel_backlog(t, i) > 0) {
			if (tunnel_untaken(t, i) > 1)
				splice_sock_kick(h->fd);
			waiting = true;
			continue;
		}
		if (shutdown(o->fd, SHUT_WR) < 0) {
			t->err_side = 1 - i; /* o went (a reset) */
			tunnel_end(t, TUNNEL_END_ERROR);
			return true;
		}
		o->down = true;
		atomic_fetch_add(&tc.halfclosed, 1);
		t->last_ns = clk_now_ns();
	}
	if (t->s[0].down && t->s[1].down) {
		tunnel_end(t, TUNNEL_END_CLOSED);
		return true;
	}
	if (waiting) {
		tmr_arm(t->tmr, t->fin_ms);
		if (t->fin_ms < FIN_MAX_MS)
			t->fin_ms *= 2;
	} else {
		tmr_arm(t->tmr, WATCH_MS);
	}
	return false;
}

/* The worker's epoll: a FIN, a reset or an error on a spliced socket. */
static void tunnel_kernel_event(struct tunnel_half *h, uint32_t ev)
{
	struct tunnel *t = h->t;
	int err = 0;
	socklen_t len = sizeof(err);

	if (t->phase == PH_COPY || t->ended)
		return;
	/* an error report with no error left on the socket (the peer
	 * closed as the tunnel ended) is taken for its hang-up */
	if (getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err) {
		log_debug("tunnel: %s side failed while spliced: %s",
			  h == &t->s[TUNNEL_CLIENT] ? "client" : "upstream",
			  strerror(err));
		t->err_side =
		    h == &t->s[TUNNEL_CLIENT] ? TUNNEL_CLIENT : TUNNEL_UPSTREAM;
		t->err = err;
		tunnel_end(t, TUNNEL_END_ERROR);
		return;
	}
	/* leaving, a FIN stays in the receive queue for the copy mover */
	if ((ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) && !h->kfin &&
	    t->phase == PH_SPLICED) {
		h->kfin = true;
		t->fin_ms = FIN_FIRST_MS;
		tmr_arm(t->tmr, FIN_FIRST_MS);
	}
}

/* ---- leaving the kernel ----------------------------------------------- */

/* Leaving failed: the tunnel is closed, counted (lost: the counts say a
 * byte went missing) and logged. */
static void tunnel_leave_fail(struct tunnel *t, bool lost, const char *what)
{
	atomic_fetch_add(lost ? &tc.lost : &tc.watchdog, 1);
	log_warnx("tunnel: leaving the kernel (%s): %s: closing it",
		  t->leave_why, what);
	tunnel_end(t, TUNNEL_END_ERROR);
}

/* Left: both sockets out of the maps with every byte accounted for, both
 * directions the copy mover's. */
static void tunnel_left(struct tunnel *t)
{
	struct splice *sp = splice_instance();
	int i;

	t->kup0 = t->st.kernel_up;
	t->kdown0 = t->st.kernel_down;
	for (i = 0; i < 2; i++) {
		splice_sock_forget(sp, t->s[i].cookie);
		t->s[i].plain = false;
	}
	watch(t, false);
	phase_set(t, PH_COPY);
	if (t->leave_final)
		t->no_kernel = true;
	t->last_ns = clk_now_ns();
	t->enter_ms = ENTER_FIRST_MS;
	t->run_dir = -1;
	atomic_fetch_add(&tc.handed_back, 1);
	if (t->leave_final)
		log_warnx("tunnel: handed back to the copy mover (%s), no byte "
			  "lost; %llu up and %llu down moved by the kernel",
			  t->leave_why, (unsigned long long)t->st.kernel_up,
			  (unsigned long long)t->st.kernel_down);
	else
		log_debug("tunnel: handed back to the copy mover (%s)",
			  t->leave_why);
	for (i = 0; i < 2; i++)
		sockio_enable(t->s[i].io, EV_READ | EV_WRITE);
	for (i = 0; i < 2 && !t->ended; i++)
		tunnel_pump(t, i);
}

/*
 * Leaving: the direction from side i into the other side o becomes the
 * copy mover's as soon as the kernel holds nothing more for o (the
 * other direction may still be draining in the kernel: a peer that
 * reads only once its own write is done waits on this one). First every
 * byte of it accounted for: what o's stream took since the entry is
 * what the kernel redirected from i (a FIN edged forwarded one more),
 * and what i received since the entry is what the kernel redirected
 * from it plus what waits in its receive queue (a FIN one more); then o
 * out of both sockhashes (its psock, empty, goes), i read and o written
 * by the copy mover. Returns 1 when done, 0 to look again (*soon: in a
 * millisecond), -1 when the tunnel was closed (t may be gone).
 */
static int tunnel_leave_dir(struct tunnel *t, int i, uint64_t now, bool *soon)
{
	struct tunnel_half *h = &t->s[i], *o = &t->s[1 - i];
	uint64_t held = tunnel_backlog(t, i), received = 0, inq = 0;
	bool fin = false;
	int rc;

	if (held > 0) {
		/* a full send queue is a reader that stopped: that waits,
		 * as a copied tunnel would, for tunnel_idle */
		if (held < o->leave_held || o->queued >= o->sndbuf / 2) {
			o->leave_held = held;
			o->leave_ns = now;
		} else if (now - o->leave_ns >= LEAVE_STUCK_MS * 1000000ull) {
			tunnel_leave_fail(t, false,
					  "the kernel sent none of what it "
					  "holds for 2 s");
			return -1;
		}
		o->steady_ns = 0;
		o->short_ns = 0;
		return 0;
	}
	/* the counts are compared exactly: o's read with no ACK coming,
	 * i's with no byte arriving (nobody reads i: its writer stops once
	 * its window is full, a draining send queue's ACKs end) */
	rc = o->exact ? splice_sock_rx(h->fd, &received, &inq, &fin) : -EAGAIN;
	if (rc == -EAGAIN) {
		if (!o->steady_ns)
			o->steady_ns = now;
		if (now - o->steady_ns < LEAVE_STUCK_MS * 1000000ull) {
			*soon = true;
			return 0;
		}
		tunnel_leave_fail(t, false,
				  "its counts did not hold still for 2 s");
		return -1;
	}
	if (rc) {
		tunnel_leave_fail(t, false, "a socket failed");
		return -1;
	}
	if (o->written - o->base != h->cnt.redir_bytes + o->down ||
	    received != h->rbase + h->cnt.redir_bytes + inq + fin) {
		/* fewer accounted for than i received: a verdict run that
		 * took bytes off the receive queue before the disarm and has
		 * not counted them yet (its softirq, or the socket's backlog
		 * in a task, waiting for a CPU past the grace): look again,
		 * for LEAVE_STUCK_MS at most */
		if (o->written - o->base == h->cnt.redir_bytes + o->down &&
		    received > h->rbase + h->cnt.redir_bytes + inq + fin) {
			if (!o->short_ns)
				o->short_ns = now;
			if (now - o->short_ns < LEAVE_STUCK_MS * 1000000ull) {
				*soon = true;
				return 0;
			}
		}
		log_warnx(
		    "tunnel: leaving: the %s side received %llu since the "
		    "entry, %llu redirected, %llu queued%s; %llu reached "
		    "the other side",
		    i == TUNNEL_CLIENT ? "client" : "upstream",
		    (unsigned long long)(received - h->rbase),
		    (unsigned long long)h->cnt.redir_bytes,
		    (unsigned long long)inq, fin ? ", a FIN" : "",
		    (unsigned long long)(o->written - o->base));
		tunnel_leave_fail(t, true, "bytes unaccounted for");
		return -1;
	}
	splice_sock_unlink(splice_instance(), o->cookie);
	o->plain = true;
	/* a direction whose FIN edged forwarded is over for the copy mover
	 * too (i's sockio reads that FIN again); one not forwarded yet, the
	 * copy mover forwards as it reads it */
	o->shut = o->down;
	sockio_enable(h->io, EV_READ);
	sockio_enable(o->io, EV_WRITE);
	return 1;
}

/* Leaving, step by step (the timer's): each direction handed to the
 * copy mover once the kernel has sent what it holds for it
 * (tunnel_leave_dir), the pair out of the kernel once both are. */
static void tunnel_leave_step(struct tunnel *t)
{
	uint64_t now = clk_now_ns();
	bool soon = false;
	int i, rc;

	if (t->disarm_wait) /* tunnel_disarmed arms the timer */
		return;
	if (tunnel_look(t)) {
		tunnel_leave_fail(t, false, "a socket failed");
		return;
	}
	for (i = 0; i < 2; i++)
		if (t->s[i].cnt.pass_bytes || t->s[i].cnt.redir_fail) {
			tunnel_leave_fail(
			    t, false, "the kernel kept bytes with a socket");
			return;
		}
	/* a verdict run that began before the disarm may not have counted
	 * its redirect yet: no hold is taken for 0 before the grace */
	if (now - t->disarm_ns < LEAVE_GRACE_MS * 1000000ull) {
		tmr_arm(t->tmr, LEAVE_POLL_MS);
		return;
	}
	for (i = 0; i < 2; i++) {
		if (t->s[1 - i].plain)
			continue;
		rc = tunnel_leave_dir(t, i, now, &soon);
		if (rc < 0)
			return; /* t may be gone */
	}
	if (t->s[0].plain && t->s[1].plain) {
		tunnel_left(t);
		return;
	}
	tmr_arm(t->tmr, soon ? 1 : LEAVE_POLL_MS);
}

/* Whether a spliced pair can leave the kernel: not while a socket holds
 * bytes the program passed to it (its own receive path, which these
 * kernels get wrong around a FIN: splice.h). */
static bool tunnel_can_leave(const struct tunnel *t)
{
	int i;

	if (t->phase != PH_SPLICED || t->ended || !splice_instance())
		return false;
	for (i = 0; i < 2; i++)
		if (t->s[i].cnt.pass_bytes || t->s[i].cnt.redir_fail)
			return false;
	return true;
}

/* Leaving, its sockets disarmed (locked: both under their socket locks):
 * tunnel_leave_step from LEAVE_GRACE_MS on. */
static void tunnel_disarmed(struct tunnel *t, bool locked)
{
	int i;

	LIST_REMOVE(t, wait_link);
	t->disarm_wait = false;
	t->disarm_ns = clk_now_ns();
	for (i = 0; i < 2; i++) {
		t->s[i].plain = false;
		t->s[i].leave_held = UINT64_MAX;
		t->s[i].leave_ns = t->disarm_ns;
		t->s[i].steady_ns = 0;
		t->s[i].short_ns = 0;
	}
	log_debug("tunnel: leaving the kernel (%s); held %llu up, %llu down "
		  "(at most %llu, %llu); send queues %llu of %llu, %llu of "
		  "%llu; disarmed %s",
		  t->leave_why, (unsigned long long)tunnel_held(t, 0),
		  (unsigned long long)tunnel_held(t, 1),
		  (unsigned long long)tunnel_hold_max(t, 0),
		  (unsigned long long)tunnel_hold_max(t, 1),
		  (unsigned long long)t->s[1].queued,
		  (unsigned long long)t->s[1].sndbuf,
		  (unsigned long long)t->s[0].queued,
		  (unsigned long long)t->s[0].sndbuf,
		  locked ? "under their socket locks"
			 : "by plain deletes (a loss would be caught)");
	tmr_arm(t->tmr, LEAVE_GRACE_MS);
}

/* The set's disarm pass: the sockets of up to SET_DISARM tunnels waiting
 * for it out from under the verdict at once; the rest at once after. */
static void tunnel_set_pass_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tunnel_set *ts = arg;
	struct tunnel *t;
	int k = 0, i;
	uint64_t t0 = clk_now_ns();

	(void)fd;
	(void)what;
	LIST_FOREACH(t, &ts->waiting, wait_link)
	{
		if (k == 2 * SET_DISARM)
			break;
		ts->fd[k] = t->s[0].fd;
		ts->ck[k++] = t->s[0].cookie;
		ts->fd[k] = t->s[1].fd;
		ts->ck[k++] = t->s[1].cookie;
	}
	if (!k)
		return;
	splice_sock_disarm(splice_instance(), ts->ck, ts->fd, k, ts->locked);
	atomic_fetch_add(&tc.disarm_passes, 1);
	for (i = 0; i < k; i += 2)
		tunnel_disarmed(LIST_FIRST(&ts->waiting),
				ts->locked[i] && ts->locked[i + 1]);
	ts->pass_end_ns = clk_now_ns();
	ts->pass_ns = ts->pass_end_ns - t0;
	if (!LIST_EMPTY(&ts->waiting))
		tmr_arm(ts->pass_ev, 0);
}

/* The set's next disarm pass: 9 times the last one's time after it (a
 * tenth of the worker's time at most), DISARM_WAIT_MAX_MS at most. */
static void tunnel_set_pass_soon(struct tunnel_set *ts)
{
	uint64_t now = clk_now_ns(), at = ts->pass_end_ns + 9 * ts->pass_ns,
		 us = at > now ? (at - now) / 1000 : 0;
	struct timeval tv;

	if (evtimer_pending(ts->pass_ev, NULL))
		return;
	if (us > DISARM_WAIT_MAX_MS * 1000)
		us = DISARM_WAIT_MAX_MS * 1000;
	tv.tv_sec = (time_t)(us / 1000000);
	tv.tv_usec = (suseconds_t)(us % 1000000);
	evtimer_add(ts->pass_ev, &tv);
}

/*
 * Hand a spliced pair back to the copy mover (final: for good), for
 * why: both sockets out from under the verdict at the set's next disarm
 * pass (the kernel moves their bytes until then, and takes no more after
 * it; they wait in the receive queues), then tunnel_leave_step, a
 * direction at a time. A FIN that came stays the socket's (recv() gives
 * it once the copy mover reads it): the copy mover forwards one edged
 * has not. false, nothing changed, when it cannot leave
 * (tunnel_can_leave).
 */
static bool tunnel_leave(struct tunnel *t, const char *why, bool final)
{
	if (!tunnel_can_leave(t))
		return false;
	phase_set(t, PH_LEAVING);
	t->leave_why = why;
	t->leave_final = final;
	t->disarm_wait = true;
	LIST_INSERT_HEAD(&t->set->waiting, t, wait_link);
	evtimer_del(t->tmr);
	tunnel_set_pass_soon(t->set);
	return true;
}

/* auto, spliced: why the tunnel should leave the kernel now (from the
 * last look), or NULL. */
static const char *auto_why_leave(struct tunnel *t)
{
	uint64_t now = clk_now_ns(), sum = t->st.kernel_up + t->st.kernel_down;

	if (sum != t->busy_sum)
		t->moved_ns = now;
	if (tunnel_slow_reader(t, 0) || tunnel_slow_reader(t, 1))
		return "auto: it turned to bulk";
	if (now - t->moved_ns >= AUTO_QUIET_LEAVE_MS * 1000000ull)
		return "auto: it went quiet";
	return NULL;
}

/* auto: hand a spliced tunnel back to the copy mover for why; after a
 * turn to bulk it stays there a while (longer each time). true when it
 * is leaving. */
static bool auto_leave(struct tunnel *t, const char *why)
{
	bool bulk = strstr(why, "bulk") != NULL;

	if (!tunnel_leave(t, why, false))
		return false;
	if (!bulk)
		return true;
	t->small = 0;
	t->small_dirs = 0;
	t->backoff_ms = t->backoff_ms ? t->backoff_ms * 2 : AUTO_BACKOFF_MS;
	if (t->backoff_ms > AUTO_BACKOFF_MAX_MS)
		t->backoff_ms = AUTO_BACKOFF_MAX_MS;
	t->auto_after_ns = clk_now_ns() + t->backoff_ms * 1000000ull;
	return true;
}

/* Spliced: the check after the entry, the watchdog, FINs waiting. */
static void tunnel_check(struct tunnel *t)
{
	bool stuck = false;
	uint64_t sum;
	int i;

	if ((t->s[0].kfin || t->s[1].kfin) && tunnel_kernel_fin(t))
		return; /* t is gone */
	if (tunnel_look(t)) {
		tunnel_end(t, TUNNEL_END_ERROR);
		return;
	}
	/* a hold the buffers may matter to: as TCP sizes them now */
	if ((tunnel_held(t, 0) > KERNEL_HOLD_MIN ||
	     tunnel_held(t, 1) > KERNEL_HOLD_MIN) &&
	    tunnel_bufs(t)) {
		tunnel_end(t, TUNNEL_END_ERROR);
		return;
	}
	if (tunnel_mover_for(t->kind, NULL) == TUNNEL_MOVER_AUTO &&
	    !t->s[0].kfin && !t->s[1].kfin) {
		const char *why = auto_why_leave(t);

		if (why && auto_leave(t, why))
			return;
	}
	for (i = 0; i < 2; i++) {
		struct tunnel_half *h = &t->s[i], *o = &t->s[1 - i];
		uint64_t delivered = o->written - o->base;

		const char *slow = tunnel_slow_reader(t, i);

		/* more held than a tunnel may (a reader slower than its
		 * writer): back to the copy mover and its backpressure */
		if (delivered <= h->cnt.redir_bytes + 1 && slow &&
		    tunnel_leave(t, slow, true))
			return;
		/* more in the destination than the kernel took (a FIN is
		 * one), or more held and no way out: close it */
		if (delivered > h->cnt.redir_bytes + 1 || slow) {
			atomic_fetch_add(&tc.watchdog, 1);
			log_warnx(
			    "tunnel: %s (%llu bytes redirected %s, %llu in "
			    "the send queue): closing it",
			    delivered > h->cnt.redir_bytes + 1
				? "the kernel sent more than it took"
				: slow,
			    (unsigned long long)h->cnt.redir_bytes,
			    i == TUNNEL_CLIENT ? "up" : "down",
			    (unsigned long long)delivered);
			tunnel_end(t, TUNNEL_END_ERROR);
			return;
		}
		/* bytes the program kept with the socket (the peer left the
		 * map: a close race), or redirected bytes that do not reach
		 * a send queue with room */
		if (h->cnt.pass_bytes || h->cnt.redir_fail ||
		    (!h->kfin && tunnel_untaken(t, i) > 0) ||
		    (!o->down && tunnel_backlog(t, i) > 0 &&
		     o->queued < o->sndbuf / 2))
			stuck = true;
	}
	sum = t->st.kernel_up + t->st.kernel_down + t->s[0].written +
	      t->s[1].written;
	if (sum != t->progress || !stuck) {
		t->progress = sum;
		t->quiet_ns = clk_now_ns();
		t->kicked = false;
	} else if (clk_now_ns() - t->quiet_ns >=
		   STALL_CHECKS * WATCH_MS * 1000000ull) {
		if (!t->kicked) {
			t->kicked = true;
			t->quiet_ns = clk_now_ns();
			for (i = 0; i < 2; i++)
				splice_sock_kick(t->s[i].fd);
		} else if (tunnel_leave(t, "the watchdog: it stalled", true)) {
			return;
		} else {
			atomic_fetch_add(&tc.watchdog, 1);
			log_warnx(
			    "tunnel: the kernel moved no byte for %d s with "
			    "bytes waiting (%llu and %llu redirected, not "
			    "sent; %llu and %llu kept): closing it",
			    2 * STALL_CHECKS * WATCH_MS / 1000,
			    (unsigned long long)tunnel_backlog(t, 0),
			    (unsigned long long)tunnel_backlog(t, 1),
			    (unsigned long long)t->s[0].cnt.pass_bytes,
			    (unsigned long long)t->s[1].cnt.pass_bytes);
			tunnel_end(t, TUNNEL_END_ERROR);
			return;
		}
	}
	/* while bytes move, often enough that a slow reader's backlog is
	 * caught soon after it passes its limit; once quiet, twice as
	 * long at each look up to every second (a stream that starts again
	 * after a short pause is looked at soon: the kernel takes what its
	 * writer sends, however much, until edged looks) */
	if (t->st.kernel_up + t->st.kernel_down != t->busy_sum)
		t->watch_ms = WATCH_BUSY_MS;
	else if (t->watch_ms < WATCH_MS)
		t->watch_ms =
		    t->watch_ms * 2 > WATCH_MS ? WATCH_MS : t->watch_ms * 2;
	if (!t->s[0].kfin && !t->s[1].kfin)
		tmr_arm(t->tmr, t->watch_ms);
	t->busy_sum = t->st.kernel_up + t->st.kernel_down;
}

static void tunnel_tmr_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tunnel *t = arg;

	(void)fd;
	(void)what;
	if (t->phase == PH_COPY)
		tunnel_try_enter(t);
	else if (t->phase == PH_LEAVING)
		tunnel_leave_step(t);
	else
		tunnel_check(t);
}

/* ---- start and free --------------------------------------------------- */

/*
 * TCP keepalive on a tunnel's socket fd (timeouts.tunnel_keepalive = ms,
 * 0: none; a socket that is not TCP, a Unix one, is left alone): after
 * ms without a segment from the peer (rounded up to whole seconds), a
 * probe every KEEPALIVE_INTVL (a third of the idle time, 1..10 s), and
 * after KEEPALIVE_PROBES unanswered the kernel fails the socket with
 * ETIMEDOUT. Keepalive sends nothing while data waits for the peer's
 * acknowledgement, so TCP_USER_TIMEOUT bounds that by the same total:
 * a peer that vanished while bytes were on their way to it is noticed
 * as soon, not after the retransmissions' quarter of an hour.
 */
#define KEEPALIVE_PROBES 3
#define KEEPALIVE_INTVL_MAX_S 10

static void tunnel_keepalive(int fd, uint64_t ms)
{
	int on = 1, proto = 0, idle, intvl, cnt = KEEPALIVE_PROBES;
	unsigned user;
	socklen_t len = sizeof(proto);

	if (!ms || fd < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) < 0 ||
	    proto != IPPROTO_TCP)
		return;
	idle = (int)((ms + 999) / 1000);
	intvl = idle / 3;
	if (intvl < 1)
		intvl = 1;
	if (intvl > KEEPALIVE_INTVL_MAX_S)
		intvl = KEEPALIVE_INTVL_MAX_S;
	user = (unsigned)(idle + cnt * intvl) * 1000u;
	if (setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user,
		       sizeof(user)) ||
	    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on)))
		log_warn_rl("tunnel: TCP keepalive");
}

int tunnel_start(struct worker *w, struct sockio *client, struct sockio *up,
		 enum tunnel_kind k, uint64_t idle_ms, tunnel_done_fn done,
		 void *arg, struct tunnel **out)
{
	struct sockio *ios[2] = {client, up};
	struct tunnel *t;
	int i;

	t = calloc(1, sizeof(*t));
	if (t) {
		t->idle = evtimer_new(w->base, tunnel_idle_cb, t);
		t->tmr = evtimer_new(w->base, tunnel_tmr_cb, t);
	}
	if (!t || !t->idle || !t->tmr || !w->tunnels) {
		if (t && t->idle)
			event_free(t->idle);
		if (t && t->tmr)
			event_free(t->tmr);
		free(t);
		sockio_free(client);
		sockio_free(up);
		return -ENOMEM;
	}
	t->w = w;
	t->set = w->tunnels;
	/* the kernel moves bytes of plain TCP only: a TLS stream's records
	 * are its transport's to decrypt, so copied (tls_why); a Unix
	 * socket upstream is copied too */
	t->no_kernel = strcmp(sockio_transport_name(client), "tcp") != 0 ||
		       strcmp(sockio_transport_name(up), "tcp") != 0;
	if (k == TUNNEL_KIND_UPGRADE &&
	    (strcmp(sockio_transport_name(client), "tls") == 0 ||
	     strcmp(sockio_transport_name(up), "tls") == 0))
		k = TUNNEL_KIND_UPGRADE_TLS;
	t->kind = k;
	t->done = done;
	t->arg = arg;
	t->idle_ns = idle_ms * 1000000ull;
	t->last_ns = clk_now_ns();
	t->enter_ms = ENTER_FIRST_MS;
	t->run_dir = -1;
	t->err_side = -1;
	LIST_INSERT_HEAD(&t->set->all, t, link);
	atomic_fetch_add(&tc.open_copy, 1);
	for (i = 0; i < 2; i++) {
		t->s[i].t = t;
		t->s[i].io = ios[i];
		t->s[i].fd = -1;
		sockio_setcb(ios[i], tunnel_read_cb, tunnel_write_cb,
			     tunnel_event_cb, t);
		sockio_set_read_timeout(ios[i], 0);
		sockio_set_watermarks(ios[i], TUNNEL_HIGH_WATER,
				      TUNNEL_LOW_WATER);
		sockio_set_bulk_read(ios[i], TUNNEL_BULK_READ);
	}
	/* bytes read past the heads go first, uncounted: the request has
	 * counted them */
	evbuffer_add_buffer(sockio_output(up), sockio_input(client));
	evbuffer_add_buffer(sockio_output(client), sockio_input(up));
	for (i = 0; i < 2; i++) {
		tunnel_keepalive(sockio_fd(ios[i]),
				 w->set.timeouts.tunnel_keepalive_ms);
		sockio_enable(ios[i], EV_READ | EV_WRITE);
	}
	if (idle_ms)
		idle_arm(t, t->idle_ns);
	*out = t;
	/* a side whose EOF was read before the tunnel (a client that sent
	 * its last bytes and shut down its side before the 101 came) has
	 * ended its direction already, and no event will say so again:
	 * forward it now (sockio_shutdown waits for the output) */
	for (i = 0; i < 2; i++) {
		t->s[i].eof = sockio_eof(ios[i]);
		if (t->s[i].eof)
			tunnel_pump(t, i);
	}
	/* the kernel takes the pair at its first pause: the end of this
	 * loop turn, once the heads are written, for most */
	if (kernel_wanted(t))
		tmr_arm(t->tmr, 0);
	return 0;
}

void tunnel_stats(const struct tunnel *t, struct tunnel_stats *st)
{
	*st = t->st;
	if (t->ended)
		return; /* tunnel_end added them */
	st->bytes_up += st->kernel_up;
	st->bytes_down += st->kernel_down;
}

void tunnel_free(struct tunnel *t)
{
	struct splice *sp = splice_instance();
	int i;

	if (!t)
		return;
	if (!t->ended) /* closed by its owner: a drain, the shutdown */
		atomic_fetch_add(&tc.ended[TUNNEL_ENDED_EDGE], 1);
	LIST_REMOVE(t, link);
	if (t->disarm_wait)
		LIST_REMOVE(t, wait_link);
	for (i = 0; i < t->set->nbatch; i++)
		if (t->set->batch[i].data.ptr == &t->s[0] ||
		    t->set->batch[i].data.ptr == &t->s[1])
			t->set->batch[i].data.ptr = NULL;
	atomic_fetch_sub(t->phase == PH_COPY ? &tc.open_copy : &tc.open_spliced,
			 1);
	watch(t, false);
	for (i = 0; i < 2; i++) {
		if (t->kernel_used && sp)
			splice_sock_del(sp, t->s[i].cookie);
		sockio_free(t->s[i].io);
	}
	event_free(t->idle);
	event_free(t->tmr);
	free(t);
}
