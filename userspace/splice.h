/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * splice.h - the kernel's part of a spliced tunnel: edge_splice.bpf.c's
 * sockhash and sk_skb verdict program, loaded once per edged (before
 * privileges drop; map fds keep working after), checked at start by a
 * self-test on loopback, and the per-socket operations the tunnel's
 * sockmap mover (tunnel.c) uses.
 *
 * A socket in the maps is keyed by its cookie. It goes in already in
 * REDIRECT state, once edged holds none of its bytes and has none to
 * read, and stays until the tunnel closes or leaves the kernel: bytes
 * that reached its receive queue in between are handed to the program by
 * splice_sock_kick. A pair leaves by splice_sock_disarm (the verdict
 * stops for it; its bytes wait in its receive queue), then, once the
 * kernel holds nothing for it, splice_sock_unlink (tunnel.c). (PASS, the
 * socket's bytes left to its own reader in the sockmap's receive path,
 * is not used to hand a pair back to userspace: on the kernels here that
 * path reports an EOF before bytes it still holds after a FIN, and fails
 * reads after shutdown(SHUT_WR).)
 * What the kernel has redirected towards a socket is known from its
 * counters; what has reached the destination's send queue, from the
 * destination's TCP state (splice_sock_written): their difference is
 * what is still inside the kernel, which the tunnel waits for before it
 * writes to that socket itself.
 *
 * The modes and the run-time switch are process-wide (atomics): any
 * thread reads them, the main thread writes them.
 */
#ifndef EDGE_SPLICE_H
#define EDGE_SPLICE_H

#include <stdbool.h>
#include <stdint.h>

#include "edge_maps.h"
#include "log.h"

struct splice;

/* The configuration's `splice`. */
enum splice_mode {
	SPLICE_AUTO = 0, /* the mover the benchmarks show best per tunnel */
	SPLICE_SOCKMAP,	 /* the kernel path for every tunnel */
	SPLICE_OFF,	 /* copy in userspace */
};

/* "auto", "sockmap", "off" -> mode: 0, or -1 for another word. */
int splice_mode_parse(const char *s, enum splice_mode *out);
const char *splice_mode_name(enum splice_mode m);

/*
 * Load and attach the verdict program and make its maps, then run the
 * self-test: two loopback TCP connections spliced end to end, 256 KiB
 * each way checked byte for byte and against the program's counters, then
 * the pair handed back to userspace and checked again. Returns 0 and *out;
 * or -errno with err saying why (the kernel has no sockmap, refused the
 * program, the self-test lost or changed a byte or stalled): edged then
 * copies in userspace and says so. Never blocks longer than about 2 s.
 */
int splice_open(struct splice **out, struct errbuf *err);

/* The instance tunnels use (NULL: none loaded), set by the main thread
 * before the workers start. */
void splice_install(struct splice *s);
struct splice *splice_instance(void);

/* The sockhash's map id (for bpftool), 0 when none is loaded. */
unsigned splice_sockhash_id(const struct splice *s);

/* Detach and free; NULL is fine. */
void splice_close(struct splice *s);

/* The socket's cookie (SO_COOKIE), or 0 when it has none. */
uint64_t splice_cookie(int fd);

/* Add fd (a connected TCP socket) to the maps as its peer's redirect
 * target, its own bytes still in its receive queue: 0; -EBUSY when
 * another sk_skb program owns it (never spliced then), another -errno
 * (map full, not a TCP socket...); nothing is left in the maps on
 * failure. */
int splice_sock_add(struct splice *s, int fd, uint64_t cookie, uint64_t peer);

/* Then, both sockets of a pair added, put fd under the verdict: its bytes
 * go to its peer's egress from now on. 0 or -errno. */
int splice_sock_arm(struct splice *s, int fd, uint64_t cookie);

/* Have the program look at fd's receive queue now (bytes that arrived
 * before the socket entered the map wait there for the next arrival
 * otherwise): 0 or -errno. */
int splice_sock_kick(int fd);

/* Take the socket out of the maps (its sockhash entry too). */
void splice_sock_del(struct splice *s, uint64_t cookie);

/* A pair leaving: after splice_sock_disarm (the kernel stops taking a
 * socket's bytes, which stay in its receive queue from now on; still a
 * redirect target, so what of its peer's bytes the kernel holds for its
 * send queue still goes there), unlink: out of both sockhashes (its
 * psock, and whatever it still held, gone); forget: its ctl and counts
 * gone. */
void splice_sock_unlink(struct splice *s, uint64_t cookie);
void splice_sock_forget(struct splice *s, uint64_t cookie);

/* Disarm the n sockets of cookies (their descriptors fds, or NULL):
 * each out of the verdict's sockhash (still a redirect target:
 * splice_sock_unlink's comment) under its socket lock (edge_splice_unarm,
 * one pass over the TCP sockets of edged's network namespace), so that no
 * verdict runs meanwhile, which would find no program and drop the bytes
 * it holds (the kernel's sk_psock_verdict_recv). A socket the pass does
 * not find is closed (out of the TCP hash); with fds, its state is read
 * first, which takes its lock, held by the segment that closed it until
 * its verdict was over: TCP_CLOSE there makes its delete as safe. Any
 * other by a plain delete (also every open one when the kernel has no TCP
 * iterator: splice_unarm_why). locked (n, or NULL) says which went
 * safely; returns how many. A pass costs about 0.5 us per TCP socket:
 * callers batch. */
int splice_sock_disarm(struct splice *s, const uint64_t *cookies,
		       const int *fds, int n, bool *locked);

/* Why sockets are disarmed by plain deletes (the kernel refused the TCP
 * iterator), or NULL when under their locks. */
const char *splice_unarm_why(const struct splice *s);

/* The program's counts for the socket. 0 or -errno. */
int splice_sock_counts(struct splice *s, uint64_t cookie,
		       struct edge_splice_cnt *out);

/* Bytes written into fd's TCP stream so far (acknowledged plus still in
 * its send queue), *queued the part not yet acknowledged and *received
 * what splice_sock_received gives, from one look at the socket (queued
 * and received may be NULL): 0, exact; -EAGAIN when acknowledgements kept
 * coming while it looked (the values are set all the same, *written a
 * lower bound); another -errno. */
int splice_sock_written(int fd, uint64_t *written, uint64_t *queued,
			uint64_t *received);

/* Sequence space fd has received so far (its data, and one for a FIN):
 * 0 or -errno. */
int splice_sock_received(int fd, uint64_t *received);

/* The bytes waiting in fd's receive queue, read by nobody: 0 or -errno.
 * Also of a socket a sockhash still holds (with no program of its own),
 * whose SIOCINQ the sockmap answers from its own queue (0, on 6.18). */
int splice_sock_inq(int fd, uint64_t *n);

/* Of a socket no verdict reads: the sequence space it has received
 * (as splice_sock_received), the bytes in its receive queue
 * (splice_sock_inq) and whether its peer's FIN came (which the former
 * counts as one), read so that no byte arrived in between: 0, -EAGAIN
 * (bytes kept arriving), or another -errno. */
int splice_sock_rx(int fd, uint64_t *received, uint64_t *inq, bool *fin);

/* Whether fd has bytes (1), its peer's EOF (0) or nothing (-EAGAIN) to
 * read now, or failed (another -errno); reads nothing. */
int splice_sock_peek(int fd);

/* The run-time switch (edgectl splice on|off, a reload's `splice`): the
 * mode tunnels follow from now on. */
void splice_set_mode(enum splice_mode m);
enum splice_mode splice_get_mode(void);
/* Bumped by every splice_set_mode: workers apply the switch to their
 * live tunnels when it moves (worker_sync_splice). */
unsigned splice_gen(void);
/* Whether the kernel path may be used at all (the self-test passed). */
bool splice_usable(void);
void splice_set_usable(bool ok, const char *why);
/* Why the kernel path is or is not used ("self-test passed", the
 * self-test's failure, ...), for status and logs. */
const char *splice_why(void);

/* kTLS: whether the kernel has the tls ULP (setsockopt TCP_ULP "tls",
 * TLS_TX and TLS_RX with AES-GCM-128 on a loopback pair; as root, the
 * first one loads the module), probed once at start before the workers
 * run; and what was found ("kernel has no kTLS (...)", ...), for status
 * and logs (docs/splice.md, "TLS tunnels"). */
void splice_ktls_probe(void);
bool splice_ktls(void);
const char *splice_ktls_why(void);

#endif /* EDGE_SPLICE_H */
