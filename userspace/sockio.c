// SPDX-License-Identifier: BSD-2-Clause
/*
 * sockio.c - the socket I/O of sockio.h: one persistent edge-triggered
 * event per socket, readiness remembered in can_read / can_write, and
 * work the loop must come back for (more to read, output to write)
 * scheduled with event_active() rather than by changing the epoll set.
 */
#include <errno.h>
#include <liburing.h>
#include <stdatomic.h>
#include <stddef.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "clk.h"
#include "log.h"
#include "sockio.h"
#include "transport.h"

_Static_assert(sizeof(struct evbuffer_iovec) == sizeof(struct iovec) &&
		   offsetof(struct evbuffer_iovec, iov_base) ==
		       offsetof(struct iovec, iov_base) &&
		   offsetof(struct evbuffer_iovec, iov_len) ==
		       offsetof(struct iovec, iov_len),
	       "libevent's iovec is the system's (evbuffer_peek into iov)");

/* iovecs one send takes from the output. */
#define SOCKIO_IOV 16
/* Dispatch rounds (write, read, callbacks) one event runs before it
 * yields to the loop's other events. */
#define SOCKIO_ROUNDS 4

struct sockio {
	struct event_base *base;
	struct evbuffer *in, *out;
	struct evbuffer_cb_entry *in_cb, *out_cb;
	sockio_data_cb readcb, writecb;
	sockio_event_cb eventcb;
	void *arg;
	struct event *tmo;  /* the read timeout, made on first use */
	uint64_t rto_ns;    /* read timeout, 0: none */
	uint64_t last_read; /* monotonic ns of the last read (rto_ns only) */
	size_t rhigh, wlow;
	size_t bulk_max;    /* a streaming read's size (SOCKIO_READ_MAX) */
	struct transport t; /* the stream (ops NULL once released) */
	short enabled;	    /* EV_READ | EV_WRITE */
	bool registered;    /* ev is added to the loop */
	bool can_read;	    /* the socket may have bytes (or EOF) */
	bool can_write;	    /* the socket may take bytes */
	bool rdhup;	    /* the peer shut down its side: read to EOF */
	bool read_all;	    /* a short read is not the end: read to EAGAIN */
	bool eof;	    /* the peer's EOF was read (and reported) */
	bool connecting;    /* a connect (and its handshake) is in progress */
	bool handshaking;   /* ... connected: the transport's handshake runs */
	bool scheduled;	    /* ev is active (sockio_soon) */
	struct sockio_soon soon;
	bool paused;	  /* reading stopped at the read watermark */
	bool bulk;	  /* the last read filled its buffer */
	bool rd_on_write; /* the transport reads once the socket is writable */
	bool wr_on_read;  /* the transport writes once the socket is readable */
	bool shut;	  /* shut the write side down once the output is out */
	bool in_dispatch; /* inside sockio_cb */
	bool queued;	  /* its send waits in the thread's batch */
	bool rqueued;	  /* its read waits in the thread's batch */
	TAILQ_ENTRY(sockio) qlink; /* in the batch's sends (queued) */
	TAILQ_ENTRY(sockio) rlink; /* in the batch's reads (rqueued) */
	struct sockio_slot *slot;  /* its send in flight (batch flush) */
	struct sockio_slot *rslot; /* its read in flight (batch flush) */
	bool dead; /* freed inside sockio_cb: free when it returns */
	/* bytes sent first once connected, before the handshake (a PROXY
	 * header; pre[0] their count), NULL: none */
	uint8_t *pre;
	/* the event (event_assign'ed, libevent's size) */
	_Alignas(max_align_t) unsigned char ev[];
};

/* Where a read goes when it is not streaming (sockio_read). */
static __thread char sockio_scratch[SOCKIO_READ_MAX];

/* Sends and reads one io_uring_enter carries at most
 * (sockio_batch_flush). */
#define SOCKIO_BATCH 256
/* Dispatches a loop turn runs while the batch waits before it ends the
 * turn (event_base_loopbreak) so that the batch goes: a sockio that
 * reads or writes directly without end (a TLS stream from a fast peer)
 * keeps the turn going, and the batch would wait for it. */
#define SOCKIO_BATCH_WAIT 64

/* One send or read of a batch: a send's message, taken from the output
 * when the batch goes; a read's size; the sockio it is for (NULL once
 * that is gone) and the result. A read's bytes land in the batch's
 * buffer of the slot (rbuf). */
struct sockio_slot {
	struct msghdr msg;
	struct iovec iov[SOCKIO_IOV];
	struct sockio *s;
	size_t want;
	int res;
	bool read;
};

/* A thread's batch: the sockios whose output, or whose next read, waits
 * for the end of the loop turn, in the order they queued, all done by
 * one io_uring_enter (sockio_batch_flush) rather than a system call
 * each. */
struct sockio_batch {
	struct io_uring ring;
	struct sockio_slot slot[SOCKIO_BATCH];
	TAILQ_HEAD(sockio_queue, sockio) q, rq;
	TAILQ_HEAD(sockio_soon_q, sockio_soon) soon;
	char *rbuf;  /* SOCKIO_BATCH reads' buffers of SOCKIO_READ_MAX, touched
			only as far as a batch has used them */
	bool broken; /* io_uring_enter failed: read and send directly */
	bool flushing; /* in sockio_batch_flush: sockio_soon queues */
	struct sockio_soon *running; /* the sockio_soon callback running */
	unsigned soon_ran;	     /* sockio_soon callbacks this flush ran */
	int err;		     /* the errno it failed with */
	unsigned waited; /* dispatches this turn ran while the batch waited */
};
static __thread struct sockio_batch *sockio_b;
static void sockio_soon_drop(struct sockio_batch *b, bool run);
/* sockio_soon work a flush runs: callbacks in all (the loop's own
 * limit per pass, worker.c), in rounds (each followed by the batch its
 * callbacks queued); the rest from the loop. */
#define SOCKIO_SOON_MAX 64
#define SOCKIO_SOON_ROUNDS 4
/* Sends, reads and io_uring_enter calls all threads' batches made. */
static atomic_ulong sockio_nsends, sockio_nreads, sockio_nenters;

static struct event *sockio_ev(struct sockio *s)
{
	return (struct event *)(void *)s->ev;
}

/* Whether s is reading (its read timeout runs). */
static bool sockio_read_on(const struct sockio *s)
{
	return (s->enabled & EV_READ) && !s->paused && !s->connecting;
}

/* Whether s reads when the socket has bytes (and is not waiting for the
 * read it queued). */
static bool sockio_reading(const struct sockio *s)
{
	return sockio_read_on(s) && !s->rqueued;
}

static bool sockio_writing(const struct sockio *s)
{
	return (s->enabled & EV_WRITE) && !s->connecting && !s->queued &&
	       (evbuffer_get_length(s->out) > 0 || s->shut);
}

/* Come back to s from the loop (its event runs again this turn). */
static void sockio_schedule(struct sockio *s)
{
	if (s->scheduled || s->in_dispatch || s->dead || !s->registered)
		return;
	s->scheduled = true;
	sockio_soon(&s->soon, sockio_ev(s));
}

static void sockio_cb(evutil_socket_t fd, short what, void *arg);

/* Add the event to the loop once. Its first report gives the socket's
 * current readiness (epoll reports a ready socket when it is added). */
static void sockio_register(struct sockio *s)
{
	if (s->registered || s->connecting || !transport_open(&s->t))
		return;
	if (event_add(sockio_ev(s), NULL) == 0)
		s->registered = true;
}

static void sockio_arm_timeout(struct sockio *s, uint64_t ns)
{
	struct timeval tv = {(time_t)(ns / 1000000000ull),
			     (suseconds_t)(ns % 1000000000ull / 1000)};

	if (s->tmo)
		evtimer_add(s->tmo, &tv);
}

/* Reading (re)starts: so does its timeout. */
static void sockio_read_restart(struct sockio *s)
{
	if (!s->rto_ns || !sockio_read_on(s))
		return;
	s->last_read = clk_now_ns();
	if (!evtimer_pending(s->tmo, NULL))
		sockio_arm_timeout(s, s->rto_ns);
}

/* The input may have dropped below the read watermark. */
static void sockio_unpause(struct sockio *s)
{
	if (!s->paused || (s->rhigh && evbuffer_get_length(s->in) >= s->rhigh))
		return;
	s->paused = false;
	evbuffer_cb_set_flags(s->in, s->in_cb, 0);
	sockio_read_restart(s);
	if (s->can_read && sockio_reading(s))
		sockio_schedule(s);
}

static void sockio_in_changed(struct evbuffer *b,
			      const struct evbuffer_cb_info *info, void *arg)
{
	(void)b;
	if (info->n_deleted)
		sockio_unpause(arg);
}

static void sockio_out_changed(struct evbuffer *b,
			       const struct evbuffer_cb_info *info, void *arg)
{
	struct sockio *s = arg;

	(void)b;
	if (info->n_added && s->can_write && sockio_writing(s))
		sockio_schedule(s);
}

static void sockio_timeout_cb(evutil_socket_t fd, short what, void *arg);
static void sockio_report(struct sockio *s, short what);
static void sockio_write(struct sockio *s);

struct sockio *sockio_new(struct event_base *base, const struct transport *t)
{
	struct sockio *s;

	s = calloc(1, sizeof(*s) + event_get_struct_event_size());
	if (!s)
		return NULL;
	s->base = base;
	s->t = *t;
	s->in = evbuffer_new();
	s->out = evbuffer_new();
	if (!s->in || !s->out)
		goto fail;
	s->in_cb = evbuffer_add_cb(s->in, sockio_in_changed, s);
	s->out_cb = evbuffer_add_cb(s->out, sockio_out_changed, s);
	if (!s->in_cb || !s->out_cb)
		goto fail;
	evbuffer_cb_set_flags(s->in, s->in_cb, 0); /* on while paused */
	if (event_assign(sockio_ev(s), base, t->fd,
			 EV_READ | EV_WRITE | EV_CLOSED | EV_ET | EV_PERSIST,
			 sockio_cb, s))
		goto fail;
	s->can_write = true;
	/* bytes the transport holds already (TLS records read with the
	 * handshake): readable before the socket says so */
	s->can_read = transport_open(t) && transport_pending(t) > 0;
	return s;
fail:
	if (s->in)
		evbuffer_free(s->in);
	if (s->out)
		evbuffer_free(s->out);
	free(s);
	return NULL;
}

int sockio_preamble(struct sockio *s, const void *p, size_t len)
{
	if (len == 0 || len > UINT8_MAX || s->pre)
		return -EINVAL;
	s->pre = malloc(len + 1);
	if (!s->pre)
		return -ENOMEM;
	s->pre[0] = (uint8_t)len;
	memcpy(s->pre + 1, p, len);
	return 0;
}

/* The preamble out on the new connection, whole: 0, or an errno. A
 * connected socket's empty send buffer takes a few hundred bytes at
 * once; a short send is an error, not a wait. */
static int sockio_send_preamble(struct sockio *s)
{
	size_t len = s->pre[0];
	ssize_t n;

	do
		n = send(s->t.fd, s->pre + 1, len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	free(s->pre);
	s->pre = NULL;
	if (n < 0)
		return errno;
	return (size_t)n == len ? 0 : EIO;
}

int sockio_connect(struct sockio *s, const struct sockaddr *sa, socklen_t len)
{
	if (connect(s->t.fd, sa, len) < 0 && errno != EINPROGRESS)
		return -1;
	/* registered after connect(): an unconnected socket reads as hung
	 * up; the first write edge (or error) reports the outcome */
	s->can_write = false;
	s->can_read = false;
	sockio_register(s);
	s->connecting = true;
	return s->registered ? 0 : -1;
}

/* s's send no longer waits in the batch (nor is its result wanted: a
 * result already taken into s keeps only its callback from running). */
static void sockio_unqueue_send(struct sockio *s)
{
	if (s->queued && !s->slot)
		TAILQ_REMOVE(&sockio_b->q, s, qlink);
	if (s->slot)
		s->slot->s = NULL;
	s->slot = NULL;
	s->queued = false;
}

/* The same for its read. */
static void sockio_unqueue_read(struct sockio *s)
{
	if (s->rqueued && !s->rslot)
		TAILQ_REMOVE(&sockio_b->rq, s, rlink);
	if (s->rslot)
		s->rslot->s = NULL;
	s->rslot = NULL;
	s->rqueued = false;
}

static void sockio_unqueue(struct sockio *s)
{
	sockio_unqueue_send(s);
	sockio_unqueue_read(s);
	sockio_soon_cancel(&s->soon);
}

static void sockio_destroy(struct sockio *s)
{
	free(s->pre);
	evbuffer_free(s->in);
	evbuffer_free(s->out);
	free(s);
}

/* Take s off the loop and detach its transport. */
static struct transport sockio_detach(struct sockio *s)
{
	struct transport t = s->t;

	sockio_unqueue(s);
	if (s->registered || s->scheduled)
		event_del(sockio_ev(s));
	if (s->tmo)
		event_free(s->tmo);
	s->tmo = NULL;
	s->registered = s->scheduled = false;
	s->t.ops = NULL;
	s->t.fd = -1;
	return t;
}

void sockio_free(struct sockio *s)
{
	struct transport t;

	if (!s || s->dead)
		return;
	t = sockio_detach(s);
	transport_close(&t);
	if (s->in_dispatch)
		s->dead = true;
	else
		sockio_destroy(s);
}

void sockio_release(struct sockio *s, struct transport *out)
{
	*out = sockio_detach(s);
	if (s->in_dispatch)
		s->dead = true;
	else
		sockio_destroy(s);
}

void sockio_setcb(struct sockio *s, sockio_data_cb readcb,
		  sockio_data_cb writecb, sockio_event_cb eventcb, void *arg)
{
	s->readcb = readcb;
	s->writecb = writecb;
	s->eventcb = eventcb;
	s->arg = arg;
}

void sockio_enable(struct sockio *s, short what)
{
	what &= EV_READ | EV_WRITE;
	s->enabled |= what;
	sockio_register(s);
	if (what & EV_READ) {
		sockio_read_restart(s);
		if (s->can_read && sockio_reading(s))
			sockio_schedule(s);
	}
	if ((what & EV_WRITE) && s->can_write && sockio_writing(s))
		sockio_schedule(s);
}

void sockio_disable(struct sockio *s, short what)
{
	s->enabled &= (short)~what;
	if ((what & EV_READ) && s->tmo)
		evtimer_del(s->tmo);
}

short sockio_enabled(const struct sockio *s)
{
	return s->enabled;
}

void sockio_stop(struct sockio *s)
{
	sockio_unqueue(s);
	sockio_disable(s, EV_READ | EV_WRITE);
	if (s->registered || s->scheduled)
		event_del(sockio_ev(s));
	s->registered = s->scheduled = false;
	/* the next registration reports the socket's readiness afresh */
	s->can_read = s->can_write = false;
}

void sockio_set_watermarks(struct sockio *s, size_t read_high, size_t write_low)
{
	s->rhigh = read_high;
	s->wlow = write_low;
	sockio_unpause(s);
}

void sockio_set_read_all(struct sockio *s, bool on)
{
	s->read_all = on;
}

void sockio_set_bulk_read(struct sockio *s, size_t max)
{
	s->bulk_max = max;
}

void sockio_set_read_timeout(struct sockio *s, uint64_t ms)
{
	s->rto_ns = ms * 1000000ull;
	if (!ms) {
		if (s->tmo)
			evtimer_del(s->tmo);
		return;
	}
	if (!s->tmo)
		s->tmo = evtimer_new(s->base, sockio_timeout_cb, s);
	if (!s->tmo) {
		s->rto_ns = 0; /* out of memory: no timeout */
		return;
	}
	evtimer_del(s->tmo);
	sockio_read_restart(s);
}

struct evbuffer *sockio_input(const struct sockio *s)
{
	return s->in;
}

struct evbuffer *sockio_output(const struct sockio *s)
{
	return s->out;
}

int sockio_move(struct evbuffer *from, struct evbuffer *to, size_t n)
{
	unsigned char *p;

	if (n > evbuffer_get_length(from))
		n = evbuffer_get_length(from);
	if (n >= SOCKIO_MOVE_COPY)
		return evbuffer_remove_buffer(from, to, n) == (int)n ? 0 : -1;
	if (!n)
		return 0;
	p = evbuffer_pullup(from, (ssize_t)n);
	if (!p || evbuffer_add(to, p, n))
		return -1;
	return evbuffer_drain(from, n);
}

bool sockio_eof(const struct sockio *s)
{
	return s->eof;
}

void sockio_eof_retract(struct sockio *s)
{
	s->eof = false;
	s->can_read = true;
	if ((s->enabled & EV_READ) && sockio_reading(s))
		sockio_schedule(s);
}

int sockio_fd(const struct sockio *s)
{
	return s->t.fd;
}

const char *sockio_transport_name(const struct sockio *s)
{
	return s->t.ops ? s->t.ops->name : "closed";
}

const struct transport *sockio_transport(const struct sockio *s)
{
	return &s->t;
}

size_t sockio_pending(const struct sockio *s)
{
	return s->t.ops ? transport_pending(&s->t) : 0;
}

/* The write side goes down now that the output is out (s->shut). */
static void sockio_shut_now(struct sockio *s)
{
	int rc = transport_shutdown(&s->t);

	if (rc == -EAGAIN) {
		if (s->t.want & TRANSPORT_WANT_READ)
			s->wr_on_read = true;
		s->can_write = false;
		return;
	}
	s->shut = false;
	if (rc < 0) {
		errno = -rc;
		sockio_report(s, SOCKIO_WRITING | SOCKIO_ERROR);
		return;
	}
	sockio_report(s, SOCKIO_WRITING | SOCKIO_SHUT);
}

void sockio_shutdown(struct sockio *s)
{
	s->shut = true;
	s->enabled |= EV_WRITE;
	sockio_register(s);
	if (s->can_write)
		sockio_schedule(s);
}

int sockio_flush(struct sockio *s)
{
	struct iovec iov[SOCKIO_IOV];
	ssize_t n;
	int nv;

	sockio_unqueue_send(s);
	while (evbuffer_get_length(s->out) > 0 && !s->connecting) {
		nv = evbuffer_peek(s->out, -1, NULL,
				   (struct evbuffer_iovec *)iov, SOCKIO_IOV);
		if (nv > SOCKIO_IOV)
			nv = SOCKIO_IOV;
		n = transport_writev(&s->t, iov, nv);
		if (n < 0)
			return (int)n;
		evbuffer_drain(s->out, (size_t)n);
	}
	return evbuffer_get_length(s->out) ? -EAGAIN : 0;
}

size_t sockio_discard(struct sockio *s, size_t max)
{
	char buf[4096];
	size_t done = evbuffer_get_length(s->in);
	ssize_t n;

	sockio_unqueue_read(s); /* read here instead */
	evbuffer_drain(s->in, done);
	while (done < max && (n = transport_read(&s->t, buf, sizeof(buf))) > 0)
		done += (size_t)n;
	return done;
}

/* Report what to the event callback (reading or writing stopped). */
static void sockio_report(struct sockio *s, short what)
{
	int err = errno;

	if (what & SOCKIO_READING) {
		s->enabled &= (short)~EV_READ;
		if (s->tmo)
			evtimer_del(s->tmo);
	}
	if (what & SOCKIO_WRITING)
		s->enabled &= (short)~EV_WRITE;
	if (s->eventcb) {
		errno = err;
		s->eventcb(s, what, s->arg);
	}
}

/* Write what the output holds until it is empty or the socket full;
 * then a pending shutdown. The write callback runs when the output has
 * drained to its low watermark. */
static void sockio_write(struct sockio *s)
{
	struct iovec iov[SOCKIO_IOV];
	size_t want, i;
	ssize_t n;
	int nv;

	while (s->can_write && sockio_writing(s)) {
		if (evbuffer_get_length(s->out) == 0) {
			sockio_shut_now(
			    s); /* s->shut: nothing left before it */
			return;
		}
		if (sockio_b && !sockio_b->broken && s->t.ops->plain) {
			/* sent with the thread's other sends at the end of
			 * the loop turn (sockio_batch_flush) */
			s->queued = true;
			TAILQ_INSERT_TAIL(&sockio_b->q, s, qlink);
			return;
		}
		nv = evbuffer_peek(s->out, -1, NULL,
				   (struct evbuffer_iovec *)iov, SOCKIO_IOV);
		if (nv > SOCKIO_IOV)
			nv = SOCKIO_IOV;
		for (want = 0, i = 0; i < (size_t)nv; i++)
			want += iov[i].iov_len;
		n = transport_writev(&s->t, iov, nv);
		if (n == -EAGAIN) {
			s->can_write = false;
			if (s->t.want & TRANSPORT_WANT_READ)
				s->wr_on_read = true;
			return;
		}
		if (n < 0) {
			errno = (int)-n;
			sockio_report(s, SOCKIO_WRITING | SOCKIO_ERROR);
			return;
		}
		evbuffer_drain(s->out, (size_t)n);
		if ((size_t)n < want)
			s->can_write = false; /* the next edge says when */
		if (evbuffer_get_length(s->out) <= s->wlow && s->writecb &&
		    !s->shut) {
			s->writecb(s, s->arg);
			return; /* the caller looks again */
		}
	}
}

/* How much s's next read may take (0: none, the input is at the read
 * watermark: s pauses). */
static size_t sockio_read_want(struct sockio *s)
{
	size_t len = evbuffer_get_length(s->in), want = SOCKIO_READ_MAX;

	if (s->bulk && s->bulk_max > want)
		want = s->bulk_max;
	if (s->rhigh) {
		if (len >= s->rhigh) {
			s->paused = true;
			evbuffer_cb_set_flags(s->in, s->in_cb,
					      EVBUFFER_CB_ENABLED);
			if (s->tmo)
				evtimer_del(s->tmo);
			return 0;
		}
		if (want > s->rhigh - len)
			want = s->rhigh - len;
	}
	return want;
}

/* What a read of up to want bytes gave (n: bytes, 0 at EOF, -errno),
 * taken into s without a callback: the bytes, when not read straight into
 * the input (from), go into it; the flags. Returns what to report: n, or
 * -ENOMEM when the bytes could not be kept. */
static ssize_t sockio_read_take(struct sockio *s, ssize_t n, size_t want,
				const char *from)
{
	if (n == -EAGAIN || n == -EWOULDBLOCK) {
		s->can_read = false;
		if (s->t.want & TRANSPORT_WANT_WRITE)
			s->rd_on_write = true;
		return n;
	}
	if (n < 0)
		return n;
	if (n == 0) {
		s->can_read = false;
		s->eof = true;
		return 0;
	}
	if (from && evbuffer_add(s->in, from, (size_t)n))
		return -ENOMEM; /* the bytes are lost: the stream is broken */
	s->bulk = (size_t)n == want;
	/* a short read drained the socket: the next byte is a new edge,
	 * and so is a FIN after them unless it came already (rdhup) —
	 * unless the transport holds more than the socket (TLS records), or
	 * the owner reads to EAGAIN (read_all) and the transport did not
	 * read to it already (drained) */
	if ((size_t)n < want && !s->rdhup && (!s->read_all || s->t.drained) &&
	    !transport_pending(&s->t))
		s->can_read = false;
	if (s->rto_ns)
		s->last_read = clk_now_ns();
	return n;
}

/* Then its callback: the read callback for bytes (while reading is
 * enabled: else they wait in the input as a paused read's do), the event
 * callback for the EOF or an error. */
static void sockio_read_report(struct sockio *s, ssize_t n)
{
	if (n == -EAGAIN || n == -EWOULDBLOCK)
		return;
	if (n < 0) {
		errno = (int)-n;
		sockio_report(s, SOCKIO_READING | SOCKIO_ERROR);
	} else if (n == 0) {
		sockio_report(s, SOCKIO_READING | SOCKIO_EOF);
	} else if (s->readcb && (s->enabled & EV_READ)) {
		s->readcb(s, s->arg);
	}
}

static void sockio_read_done(struct sockio *s, ssize_t n, size_t want,
			     const char *from)
{
	sockio_read_report(s, sockio_read_take(s, n, want, from));
}

/* One read into the input, then the read callback. */
static void sockio_read(struct sockio *s)
{
	struct evbuffer_iovec v;
	size_t want = sockio_read_want(s);
	ssize_t n;

	if (!want)
		return;
	/* streaming (the last read filled its buffer): straight into the
	 * input; else into the thread's scratch buffer, then copied, so a
	 * request's few hundred bytes take a small chain, not a 16 KiB one
	 * — and in a worker, with the loop turn's other reads in one
	 * io_uring_enter (sockio_batch_flush) */
	if (!s->bulk && sockio_b && !sockio_b->broken && s->t.ops->plain) {
		s->rqueued = true;
		TAILQ_INSERT_TAIL(&sockio_b->rq, s, rlink);
		return;
	}
	if (!s->bulk) {
		n = transport_read(&s->t, sockio_scratch, want);
		sockio_read_done(s, n, want, sockio_scratch);
		return;
	}
	if (evbuffer_reserve_space(s->in, (ssize_t)want, &v, 1) < 1) {
		errno = ENOMEM;
		sockio_report(s, SOCKIO_READING | SOCKIO_ERROR);
		return;
	}
	n = transport_read(&s->t, v.iov_base, want);
	if (n > 0) {
		v.iov_len = (size_t)n;
		evbuffer_commit_space(s->in, &v, 1);
	}
	sockio_read_done(s, n, want, NULL);
}

/* The transport's handshake (a TLS client's) goes one step: CONNECTED
 * once it is done, ERROR when it failed; else it waits for the socket's
 * next edge. */
static void sockio_handshake(struct sockio *s)
{
	int rc = s->t.ops->handshake(&s->t);

	if (rc == -EAGAIN)
		return;
	s->handshaking = false;
	s->connecting = false;
	if (rc < 0) {
		errno = -rc;
		sockio_report(s, SOCKIO_ERROR);
		return;
	}
	/* the records after the handshake's (a session ticket) may wait in
	 * the socket, their edge consumed by it */
	s->can_write = true;
	s->can_read = true;
	if (s->eventcb)
		s->eventcb(s, SOCKIO_CONNECTED, s->arg);
}

/* Finish a connect: CONNECTED (after the transport's handshake, when it
 * has one), or ERROR with the socket's error. */
static void sockio_connected(struct sockio *s)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (s->handshaking) {
		sockio_handshake(s);
		return;
	}
	if (getsockopt(s->t.fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (!err && s->pre)
		err = sockio_send_preamble(s);
	if (err) {
		s->connecting = false;
		errno = err;
		sockio_report(s, SOCKIO_ERROR);
		return;
	}
	if (s->t.ops->handshake) {
		s->handshaking = true;
		sockio_handshake(s);
		return;
	}
	s->connecting = false;
	s->can_write = true;
	if (s->eventcb)
		s->eventcb(s, SOCKIO_CONNECTED, s->arg);
}

/* One more dispatch of this turn: when the batch has waited for
 * SOCKIO_BATCH_WAIT of them, the turn ends after this one (the worker's
 * loop flushes the batch and goes on with what is still active). */
static void sockio_batch_tick(struct sockio *s)
{
	struct sockio_batch *b = sockio_b;

	/* (a sockio_soon callback in the flush is not the loop's turn) */
	if (!b || b->broken || b->flushing ||
	    (TAILQ_EMPTY(&b->q) && TAILQ_EMPTY(&b->rq)))
		return;
	if (++b->waited >= SOCKIO_BATCH_WAIT)
		event_base_loopbreak(s->base);
}

/* The end of s's dispatch (sockio_cb, or a batched read or send applied):
 * free s if a callback did, else come back for what is left (its reads
 * once a send of it in the batch has gone: the flush comes back then). */
static void sockio_dispatch_end(struct sockio *s)
{
	s->in_dispatch = false;
	if (s->dead) {
		sockio_destroy(s);
		return;
	}
	if ((s->can_write && sockio_writing(s)) ||
	    (s->can_read && sockio_reading(s) && !s->queued))
		sockio_schedule(s);
}

static void sockio_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sockio *s = arg;
	int round;

	(void)fd;
	sockio_batch_tick(s);
	s->scheduled = false;
	if (what & EV_CLOSED)
		s->rdhup = true;
	if (what & (EV_READ | EV_CLOSED)) {
		s->can_read = true;
		if (s->wr_on_read) {
			s->wr_on_read = false;
			s->can_write = true;
		}
	}
	if (what & EV_WRITE) {
		s->can_write = true;
		if (s->rd_on_write) {
			s->rd_on_write = false;
			s->can_read = true;
		}
	}
	s->in_dispatch = true;
	if (s->connecting) {
		if (!(what & (EV_READ | EV_WRITE | EV_CLOSED)))
			goto out;
		sockio_connected(s);
	}
	for (round = 0; round < SOCKIO_ROUNDS && !s->dead; round++) {
		if (s->can_write && sockio_writing(s))
			sockio_write(s);
		else if (s->can_read && sockio_reading(s) && !s->queued)
			sockio_read(s);
		else
			break; /* (a send in the batch goes before more reads,
				  as a direct one would) */
	}
out:
	sockio_dispatch_end(s);
}

static void sockio_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sockio *s = arg;
	uint64_t idle;

	(void)fd;
	(void)what;
	if (!s->rto_ns || !sockio_read_on(s))
		return; /* re-armed when reading restarts */
	idle = clk_now_ns() - s->last_read;
	if (idle < s->rto_ns) {
		sockio_arm_timeout(s, s->rto_ns - idle);
		return;
	}
	s->in_dispatch = true;
	errno = ETIMEDOUT;
	sockio_report(s, SOCKIO_READING | SOCKIO_TIMEOUT);
	s->in_dispatch = false;
	if (s->dead)
		sockio_destroy(s);
	else if (s->can_write && sockio_writing(s))
		sockio_schedule(s); /* what the callback queued */
}

/* ---- sends batched through io_uring ---------------------------------------
 */

int sockio_batch_init(void)
{
	struct io_uring_params p;
	struct sockio_batch *b;
	int rc;

	if (sockio_b)
		return 0;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->rbuf = malloc((size_t)SOCKIO_BATCH * SOCKIO_READ_MAX);
	if (!b->rbuf) {
		free(b);
		return -ENOMEM;
	}
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN;
	rc = io_uring_queue_init_params(SOCKIO_BATCH, &b->ring, &p);
	if (rc == -EINVAL) { /* a kernel before 6.0 */
		memset(&p, 0, sizeof(p));
		rc = io_uring_queue_init_params(SOCKIO_BATCH, &b->ring, &p);
	}
	if (rc < 0) {
		free(b->rbuf);
		free(b);
		return rc;
	}
	TAILQ_INIT(&b->q);
	TAILQ_INIT(&b->rq);
	TAILQ_INIT(&b->soon);
	sockio_b = b;
	return 0;
}

void sockio_batch_exit(void)
{
	struct sockio_batch *b = sockio_b;
	struct sockio *s;

	if (!b)
		return;
	while ((s = TAILQ_FIRST(&b->q)))
		sockio_unqueue(s);
	while ((s = TAILQ_FIRST(&b->rq)))
		sockio_unqueue(s);
	sockio_soon_drop(b, false);
	io_uring_queue_exit(&b->ring);
	free(b->rbuf);
	free(b);
	sockio_b = NULL;
}

/* What a batched send of s did (res: bytes or -errno), taken into s
 * without a callback: the bytes the kernel took leave the output. */
static void sockio_sent_take(struct sockio *s, int res, size_t want)
{
	if (res == -EAGAIN || res == -EWOULDBLOCK) {
		s->can_write = false; /* the next write edge says when */
	} else if (res >= 0) {
		evbuffer_drain(s->out, (size_t)res);
		if ((size_t)res < want)
			s->can_write = false;
	}
}

/* Then its callback, as sockio_write would have gone on: the error, or
 * the write callback at the low watermark. */
static void sockio_sent_report(struct sockio *s, int res)
{
	if (res == -EAGAIN || res == -EWOULDBLOCK)
		return;
	if (res < 0) {
		errno = -res;
		sockio_report(s, SOCKIO_WRITING | SOCKIO_ERROR);
	} else if (evbuffer_get_length(s->out) <= s->wlow && s->writecb &&
		   !s->shut) {
		s->writecb(s, s->arg);
	}
}

/* Put s's send into slot k of the batch (sqe). */
static void sockio_prep_send(struct sockio_batch *b, struct io_uring_sqe *sqe,
			     unsigned k, struct sockio *s)
{
	struct sockio_slot *sl = &b->slot[k];
	int nv, i;

	nv = evbuffer_peek(s->out, -1, NULL, (struct evbuffer_iovec *)sl->iov,
			   SOCKIO_IOV);
	if (nv > SOCKIO_IOV)
		nv = SOCKIO_IOV;
	memset(&sl->msg, 0, sizeof(sl->msg));
	sl->msg.msg_iov = sl->iov;
	sl->msg.msg_iovlen = (size_t)nv;
	for (sl->want = 0, i = 0; i < nv; i++)
		sl->want += sl->iov[i].iov_len;
	sl->s = s;
	sl->read = false;
	sl->res = -ECANCELED;
	s->slot = sl;
	io_uring_prep_sendmsg(sqe, s->t.fd, &sl->msg,
			      MSG_NOSIGNAL | MSG_DONTWAIT);
	io_uring_sqe_set_data64(sqe, k);
}

/* Submit the k prepared operations and wait for all their results (each
 * completes inside the call: MSG_DONTWAIT answers EAGAIN rather than
 * waiting); then apply them in order. */
static void sockio_batch_run(struct sockio_batch *b, unsigned k)
{
	struct io_uring_cqe *cqe;
	struct sockio_slot *sl;
	struct sockio *s;
	unsigned i, head, seen = 0, n, tries;
	int rc;

	for (i = 0, n = 0; i < k; i++)
		n += b->slot[i].read;
	atomic_fetch_add_explicit(&sockio_nsends, k - n, memory_order_relaxed);
	atomic_fetch_add_explicit(&sockio_nreads, n, memory_order_relaxed);
	atomic_fetch_add_explicit(&sockio_nenters, 1, memory_order_relaxed);
	/* EINTR, or EAGAIN for want of kernel memory: the entries are
	 * still in the queue, so try again (a few times: then every
	 * operation of the batch fails, its stream with it) */
	for (tries = 0; tries < 100; tries++) {
		rc = io_uring_submit_and_wait(&b->ring, k);
		if (rc != -EINTR && rc != -EAGAIN)
			break;
	}
	if (rc < 0 && !b->broken) {
		/* what is left in the ring must not go with a later batch */
		b->broken = true;
		b->err = -rc;
		log_warnx("io_uring_enter: %s: this worker reads and sends "
			  "one system call each from now on",
			  strerror(-rc));
	}
	while (rc >= 0 && seen < k) {
		rc = io_uring_wait_cqe(&b->ring, &cqe);
		if (rc == -EINTR) {
			rc = 0;
			continue;
		}
		if (rc < 0)
			break;
		n = 0;
		io_uring_for_each_cqe(&b->ring, head, cqe)
		{
			if (cqe->user_data < k)
				b->slot[cqe->user_data].res = cqe->res;
			n++;
		}
		io_uring_cq_advance(&b->ring, n);
		seen += n;
	}
	/* first what the kernel did, into every sockio of the batch (the
	 * bytes sent leave the outputs, the bytes read join the inputs):
	 * a callback of one then sees the others as they are, and one
	 * that stops, releases or flushes another loses nothing */
	for (i = 0; i < k; i++) {
		sl = &b->slot[i];
		if (!sl->s)
			continue;
		if (sl->read)
			sl->res = (int)sockio_read_take(
			    sl->s, sl->res, sl->want,
			    b->rbuf + (size_t)i * SOCKIO_READ_MAX);
		else
			sockio_sent_take(sl->s, sl->res, sl->want);
	}
	/* then the callbacks, in order; one may free any sockio (its slot
	 * is forgotten) */
	for (i = 0; i < k; i++) {
		sl = &b->slot[i];
		s = sl->s;
		if (!s)
			continue;
		sl->s = NULL;
		if (sl->read) {
			s->rslot = NULL;
			s->rqueued = false;
		} else {
			s->slot = NULL;
			s->queued = false;
		}
		s->in_dispatch = true;
		if (sl->read)
			sockio_read_report(s, sl->res);
		else
			sockio_sent_report(s, sl->res);
		sockio_dispatch_end(s);
	}
}

void sockio_soon(struct sockio_soon *so, struct event *ev)
{
	struct sockio_batch *b = sockio_b;

	if (!b || b->broken || !b->flushing || so == b->running) {
		/* from the loop: in this pass of its active events */
		event_active(ev, EV_TIMEOUT, 0);
		return;
	}
	so->ev = ev;
	if (so->queued)
		return;
	so->queued = true;
	TAILQ_INSERT_TAIL(&b->soon, so, link);
}

void sockio_soon_cancel(struct sockio_soon *so)
{
	if (so->queued && sockio_b)
		TAILQ_REMOVE(&sockio_b->soon, so, link);
	so->queued = false;
}

/* Run the queued sockio_soon work, SOCKIO_SOON_MAX callbacks a flush at
 * most (what they make due included); one that makes itself due again
 * (a sockio with more to do) goes to the loop, behind the others. */
static void sockio_soon_run(struct sockio_batch *b)
{
	struct sockio_soon *so;
	event_callback_fn fn;

	while (b->soon_ran < SOCKIO_SOON_MAX && (so = TAILQ_FIRST(&b->soon))) {
		TAILQ_REMOVE(&b->soon, so, link);
		so->queued = false;
		b->soon_ran++;
		fn = event_get_callback(so->ev);
		b->running = so;
		fn(-1, EV_TIMEOUT, event_get_callback_arg(so->ev));
		b->running = NULL;
	}
}

/* What is still queued leaves the list: made active for the loop (run),
 * or only forgotten (at exit). */
static void sockio_soon_drop(struct sockio_batch *b, bool run)
{
	struct sockio_soon *so;

	while ((so = TAILQ_FIRST(&b->soon))) {
		TAILQ_REMOVE(&b->soon, so, link);
		so->queued = false;
		if (run)
			event_active(so->ev, EV_TIMEOUT, 0);
	}
}

/* What the sockios queued, in rounds of at most SOCKIO_BATCH, until
 * their callbacks queue nothing more (or the ring broke). */
static void sockio_batch_rounds(struct sockio_batch *b)
{
	struct io_uring_sqe *sqe;
	struct sockio_slot *sl;
	struct sockio *s;
	unsigned k;
	size_t want;

	while (!b->broken && (!TAILQ_EMPTY(&b->q) || !TAILQ_EMPTY(&b->rq))) {
		k = 0;
		/* the reads, then the sends (a round takes 256 at most; what
		 * its callbacks queue, the next round) */
		while (k < SOCKIO_BATCH && io_uring_sq_space_left(&b->ring) &&
		       (s = TAILQ_FIRST(&b->rq))) {
			TAILQ_REMOVE(&b->rq, s, rlink);
			s->rqueued = false;
			if (!s->can_read || !sockio_reading(s))
				continue;
			want = sockio_read_want(s); /* 0: paused */
			if (!want)
				continue;
			sqe = io_uring_get_sqe(&b->ring);
			if (!sqe) { /* not while the queue has space */
				s->rqueued = true;
				TAILQ_INSERT_HEAD(&b->rq, s, rlink);
				break;
			}
			if (want > SOCKIO_READ_MAX)
				want = SOCKIO_READ_MAX;
			sl = &b->slot[k];
			sl->s = s;
			sl->read = true;
			sl->want = want;
			sl->res = -ECANCELED;
			s->rqueued = true;
			s->rslot = sl;
			io_uring_prep_recv(
			    sqe, s->t.fd, b->rbuf + (size_t)k * SOCKIO_READ_MAX,
			    want, MSG_DONTWAIT);
			io_uring_sqe_set_data64(sqe, k);
			k++;
		}
		while (k < SOCKIO_BATCH && io_uring_sq_space_left(&b->ring) &&
		       (s = TAILQ_FIRST(&b->q))) {
			TAILQ_REMOVE(&b->q, s, qlink);
			s->queued = false;
			if (!s->can_write || !sockio_writing(s) ||
			    evbuffer_get_length(s->out) == 0) {
				/* stopped, or emptied since (a shutdown
				 * then goes from the loop) */
				if (s->can_write && sockio_writing(s))
					sockio_schedule(s);
				continue;
			}
			sqe = io_uring_get_sqe(&b->ring);
			if (!sqe) { /* not while the queue has space */
				s->queued = true;
				TAILQ_INSERT_HEAD(&b->q, s, qlink);
				break;
			}
			s->queued = true;
			sockio_prep_send(b, sqe, k++, s);
		}
		if (k == 0)
			break;
		sockio_batch_run(b, k);
	}
}

void sockio_batch_flush(void)
{
	struct sockio_batch *b = sockio_b;
	struct sockio *s;
	unsigned round;

	if (!b)
		return;
	b->waited = 0;
	b->soon_ran = 0;
	b->flushing = true;
	for (round = 0; round < SOCKIO_SOON_ROUNDS; round++) {
		sockio_soon_run(b);
		sockio_batch_rounds(b);
		if (TAILQ_EMPTY(&b->soon) || b->broken)
			break;
	}
	b->flushing = false;
	sockio_soon_drop(b, true); /* the rest from the loop */
	/* broken: what waits goes directly, from the loop */
	while (b->broken && (s = TAILQ_FIRST(&b->q))) {
		sockio_unqueue(s);
		sockio_schedule(s);
	}
	while (b->broken && (s = TAILQ_FIRST(&b->rq))) {
		sockio_unqueue(s);
		sockio_schedule(s);
	}
}

bool sockio_batched(const struct sockio *s)
{
	return s->queued || s->rqueued;
}

int sockio_batch_error(void)
{
	return sockio_b && sockio_b->broken ? sockio_b->err : 0;
}

int sockio_batch_fd(void)
{
	return sockio_b ? sockio_b->ring.ring_fd : -1;
}

unsigned long sockio_batch_sends(void)
{
	return atomic_load_explicit(&sockio_nsends, memory_order_relaxed);
}

unsigned long sockio_batch_reads(void)
{
	return atomic_load_explicit(&sockio_nreads, memory_order_relaxed);
}

unsigned long sockio_batch_enters(void)
{
	return atomic_load_explicit(&sockio_nenters, memory_order_relaxed);
}
