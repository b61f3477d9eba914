/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sockio.h - buffered, non-blocking I/O on one TCP socket, for the
 * client and upstream sides of a proxied request.
 *
 * The subset of libevent's socket bufferevent that edged uses, with the
 * same callbacks and flags, at fewer system calls per request:
 *   - one edge-triggered event per socket (read, write and peer close),
 *     registered once: enabling or disabling a direction, or stopping at
 *     a watermark, changes a flag, never the epoll set;
 *   - a read is one recv() of up to SOCKIO_READ_MAX bytes, no
 *     ioctl(FIONREAD) first; a read that comes back short means the socket
 *     is drained (a later byte, or the peer's FIN, is a new edge);
 *   - output is written at the end of the loop turn that queued it (all a
 *     callback queued goes in one send), straight from the callback when
 *     the socket is the one being served, with no write event added;
 *   - the read timeout is re-armed only when it fires, not on every read.
 *
 * Callbacks run only from the event loop, never from inside a sockio_*
 * call, and a callback may free its own sockio (or any other).
 */
#ifndef EDGE_SOCKIO_H
#define EDGE_SOCKIO_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "transport.h"

struct evbuffer;
struct sockio;

/* Largest single read: a 16 KiB buffer less libevent's chain header. */
#define SOCKIO_READ_MAX (16384 - 128)

/* What an event callback reports (the values of libevent's BEV_EVENT_*):
 * READING or WRITING, with EOF, ERROR (errno as the call left it),
 * TIMEOUT or SHUT; or CONNECTED alone. */
#define SOCKIO_READING 0x01
#define SOCKIO_WRITING 0x02
#define SOCKIO_EOF 0x10
#define SOCKIO_ERROR 0x20
#define SOCKIO_TIMEOUT 0x40
#define SOCKIO_CONNECTED 0x80
/* With WRITING: the write side went down as sockio_shutdown asked. */
#define SOCKIO_SHUT 0x100

/* Bytes were read (read callback) or the output drained to its low
 * watermark after a write (write callback). */
typedef void (*sockio_data_cb)(struct sockio *s, void *arg);
/* Reading stopped at EOF, an error or a timeout (reading is disabled
 * then), a write failed (writing disabled), or a connect finished. */
typedef void (*sockio_event_cb)(struct sockio *s, short what, void *arg);

/* A sockio on transport t (a copy is kept: from now on the sockio owns
 * the stream), connected or about to be (sockio_connect); reading and
 * writing disabled, no watermarks, no timeout. NULL when out of memory
 * (t left open, the caller's). */
struct sockio *sockio_new(struct event_base *base, const struct transport *t);

/* Have s send p[0..len) (copied; 1..255 bytes, once) first when its
 * connect is done, before the transport's handshake and anything
 * written: a PROXY protocol header. A send that fails or falls short
 * reports ERROR as a failed connect would. 0, -EINVAL or -ENOMEM. */
int sockio_preamble(struct sockio *s, const void *p, size_t len);

/* Start a non-blocking connect of s's (unconnected) socket to sa; the
 * event callback reports CONNECTED or ERROR. Returns 0, or -1 with errno
 * when connect() failed at once. */
int sockio_connect(struct sockio *s, const struct sockaddr *sa, socklen_t len);

/* Close the transport and free s (callbacks never run again). NULL is
 * fine. */
void sockio_free(struct sockio *s);

/* Free s but keep its stream: *out gets the transport, no longer watched
 * by the loop (a TLS session goes with it). What the buffers held is
 * lost: release only with both empty. */
void sockio_release(struct sockio *s, struct transport *out);

void sockio_setcb(struct sockio *s, sockio_data_cb readcb,
		  sockio_data_cb writecb, sockio_event_cb eventcb, void *arg);

/* Enable or disable EV_READ and/or EV_WRITE. Enabling reading restarts
 * the read timeout. */
void sockio_enable(struct sockio *s, short what);
void sockio_disable(struct sockio *s, short what);
short sockio_enabled(const struct sockio *s);

/* Disable both directions and take the socket off the loop (another
 * owner watches it for now); sockio_enable puts it back. */
void sockio_stop(struct sockio *s);

/* Stop reading while the input holds read_high bytes or more (0: no
 * limit); call the write callback when the output drains to write_low
 * bytes or fewer. */
void sockio_set_watermarks(struct sockio *s, size_t read_high,
			   size_t write_low);

/* Read until the socket says EAGAIN rather than to the first short read
 * (on), at one more read per read event: a reset that comes with the
 * last bytes is then seen at once. Without it, such a reset (epoll's
 * EPOLLHUP and EPOLLERR, which libevent reports as a read and write edge
 * alike, without EV_CLOSED) is seen only at the next write, for the
 * short read is taken for a drained socket and no edge follows; for a
 * connection that may sit with nothing to write (HTTP/2). */
void sockio_set_read_all(struct sockio *s, bool on);

/* While s streams (its last read filled the buffer), read up to max
 * bytes at once, straight into the input, rather than SOCKIO_READ_MAX
 * (still bounded by the read watermark): fewer system calls for a bulk
 * stream. 0 or less than SOCKIO_READ_MAX: SOCKIO_READ_MAX. */
void sockio_set_bulk_read(struct sockio *s, size_t max);

/* Report READING|TIMEOUT when reading is enabled and nothing arrives for
 * ms milliseconds (0: never). */
void sockio_set_read_timeout(struct sockio *s, uint64_t ms);

struct evbuffer *sockio_input(const struct sockio *s);
/* Queue output by adding to this buffer: it goes out at the end of the
 * loop turn. */
struct evbuffer *sockio_output(const struct sockio *s);

/* Bytes under which sockio_move copies rather than hands chains over. */
#define SOCKIO_MOVE_COPY 4096
/* Move n bytes (at most what it holds) from the front of from to the end
 * of to: copied into to's last chain when fewer than SOCKIO_MOVE_COPY,
 * else its chains handed over. A read's chain is a KiB or more however
 * few bytes it holds: moved, a peer's trickle queued for a slow reader
 * would take a chain a byte. 0 or -1 (out of memory: nothing moved). */
int sockio_move(struct evbuffer *from, struct evbuffer *to, size_t n);

/* End the write side once the output has gone out (TCP: FIN; TLS:
 * close_notify): writing stays enabled until then, and no write callback
 * runs after this call. Done, the event callback gets WRITING|SHUT; a
 * failure, WRITING|ERROR. */
void sockio_shutdown(struct sockio *s);

/* Write what the output holds now, from outside the loop's dispatch
 * (no callback runs): 0 when all of it went, -EAGAIN when some is left,
 * another -errno when the stream failed. */
int sockio_flush(struct sockio *s);

/* Whether the peer's EOF has been read (SOCKIO_READING|SOCKIO_EOF was
 * reported): nothing more will come from it, and no further event says
 * so. A new owner of the sockio (a tunnel) asks, since the report went to
 * the old one. */
bool sockio_eof(const struct sockio *s);

/* The EOF just reported was not one (the owner found bytes still in the
 * socket's receive queue: a socket with a sockmap psock can report its
 * peer's FIN before bytes that came with it): forget it and read on. */
void sockio_eof_retract(struct sockio *s);

/* Throw away what the input holds and what the transport has to read
 * now, up to max bytes in all (so that closing sends no reset for unread
 * bytes); returns the bytes discarded. */
size_t sockio_discard(struct sockio *s, size_t max);

/* The socket's descriptor, as an identity only (the upstream pool's key,
 * logs): nothing outside sockio reads or writes it. */
int sockio_fd(const struct sockio *s);

/* The transport's name ("tcp", "tls"), for logs and analytics. */
const char *sockio_transport_name(const struct sockio *s);

/* s's transport, to ask what it negotiated (tls_transport_info); not
 * to read or write it. */
const struct transport *sockio_transport(const struct sockio *s);

/* Bytes the transport holds that a read returns without the socket
 * being readable (transport_pending): a connection is parked (watching
 * only the socket) only when there are none. */
size_t sockio_pending(const struct sockio *s);

/* Send the output, and read the input, of this thread's sockios on plain
 * TCP through io_uring: all a loop turn queued in one io_uring_enter,
 * rather than a system call each (reads that stream, filling their
 * buffer, still go one by one, straight into the input). From now on
 * sockio_batch_flush must run at the end of every turn of this thread's
 * loop, and a turn may end by event_base_loopbreak (one that ran long
 * while the batch waited): the loop then goes on. 0, or -errno when io_uring
 * cannot be set up (sends and reads then go one by one as before). */
int sockio_batch_init(void);
/* Run the turn's sockio_soon work, do what this thread's sockios queued,
 * then run what follows from it (read and write callbacks, error and EOF
 * reports), as sockio_cb would (in calls of at most 256 operations);
 * what those callbacks queue goes in the same flush, a few rounds at
 * most (the rest from the loop's next turn). */
void sockio_batch_flush(void);
/* Stop batching (what is queued is dropped: call after the loop). */
void sockio_batch_exit(void);

/*
 * Run the callback of an owner's event ev once more this loop turn
 * (EV_TIMEOUT, descriptor -1). From the loop's callbacks, ev is made
 * active (libevent runs it in the same pass); from sockio_batch_flush's
 * (the batch's reads and sends reported), it runs in the same flush, and
 * what it writes goes in its batch, rather than by an active event that
 * makes the loop poll again only for it. Queued twice before it ran:
 * once. The owner cancels it before freeing ev or so; both belong to the
 * thread. so starts zeroed.
 */
struct sockio_soon {
	TAILQ_ENTRY(sockio_soon) link;
	struct event *ev;
	bool queued;
};
void sockio_soon(struct sockio_soon *so, struct event *ev);
void sockio_soon_cancel(struct sockio_soon *so);
/* Sends and reads, and the io_uring_enter calls carrying them, every
 * thread's batches made since the process started. */
unsigned long sockio_batch_sends(void);
unsigned long sockio_batch_reads(void);
unsigned long sockio_batch_enters(void);
/* Whether a read or a send of s waits in the batch (it goes at the end
 * of this loop turn). */
bool sockio_batched(const struct sockio *s);
/* The errno this thread's ring failed with at run time (its reads and
 * sends go one system call each since), or 0. */
int sockio_batch_error(void);
/* This thread's ring's descriptor (tests break it), -1 without a batch. */
int sockio_batch_fd(void);

#endif /* EDGE_SOCKIO_H */
