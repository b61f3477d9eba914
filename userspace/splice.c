// SPDX-License-Identifier: BSD-2-Clause
/*
 * splice.c - splice.h: edge_splice.bpf.c loaded from its skeleton, the
 * per-socket map operations, and the start-up self-test.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <linux/tls.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <stdbool.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "edge_splice.skel.h"
#include "splice.h"

#ifndef SO_COOKIE
#define SO_COOKIE 57
#endif

struct splice {
	struct edge_splice *skel;
	int sk_fd, dst_fd, ctl_fd, cnt_fd, prog_fd;
	int disarm_fd;	/* edge_splice_disarm */
	int iter_fd;	/* edge_splice_unarm's link, -1: none (plain deletes) */
	unsigned sk_id; /* the sockhash's id */
	bool attached;
	char unarm_why[160]; /* why iter_fd is -1 */
};

static struct splice *splice_installed;
static _Atomic int splice_mode_now = SPLICE_AUTO;
static atomic_bool splice_ok;
/* why: written by the main thread before the workers read it, then only
 * by splice_set_usable (the main thread), as a whole pointer */
static char splice_why_buf[2][256];
static _Atomic(const char *) splice_why_now = "not loaded";
/* kTLS, probed once at start by the main thread before the workers run */
static atomic_bool splice_ktls_ok;
static char splice_ktls_buf[256] = "not probed";

int splice_mode_parse(const char *s, enum splice_mode *out)
{
	if (strcmp(s, "auto") == 0)
		*out = SPLICE_AUTO;
	else if (strcmp(s, "sockmap") == 0)
		*out = SPLICE_SOCKMAP;
	else if (strcmp(s, "off") == 0)
		*out = SPLICE_OFF;
	else
		return -1;
	return 0;
}

const char *splice_mode_name(enum splice_mode m)
{
	switch (m) {
	case SPLICE_AUTO:
		return "auto";
	case SPLICE_SOCKMAP:
		return "sockmap";
	case SPLICE_OFF:
		return "off";
	}
	return "unknown";
}

static atomic_uint splice_gen_now;

void splice_set_mode(enum splice_mode m)
{
	atomic_store(&splice_mode_now, (int)m);
	atomic_fetch_add(&splice_gen_now, 1);
}

unsigned splice_gen(void)
{
	return atomic_load(&splice_gen_now);
}

enum splice_mode splice_get_mode(void)
{
	return (enum splice_mode)atomic_load(&splice_mode_now);
}

bool splice_usable(void)
{
	return atomic_load(&splice_ok);
}

void splice_set_usable(bool ok, const char *why)
{
	static unsigned n;
	char *b = splice_why_buf[++n & 1];

	snprintf(b, sizeof(splice_why_buf[0]), "%s", why);
	atomic_store(&splice_why_now, b);
	atomic_store(&splice_ok, ok);
}

const char *splice_why(void)
{
	return atomic_load(&splice_why_now);
}

void splice_install(struct splice *s)
{
	splice_installed = s;
}

struct splice *splice_instance(void)
{
	return splice_installed;
}

uint64_t splice_cookie(int fd)
{
	uint64_t c = 0;
	socklen_t len = sizeof(c);

	if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &c, &len) < 0)
		return 0;
	return c;
}

int splice_sock_add(struct splice *s, int fd, uint64_t cookie, uint64_t peer)
{
	struct edge_splice_ctl c = {.peer = peer,
				    .state = EDGE_SPLICE_REDIRECT};
	struct edge_splice_cnt n = {0};
	uint64_t v = (uint64_t)fd;
	int rc;

	if (!cookie)
		return -EINVAL;
	if (bpf_map_update_elem(s->cnt_fd, &cookie, &n, BPF_ANY) ||
	    bpf_map_update_elem(s->ctl_fd, &cookie, &c, BPF_ANY) ||
	    bpf_map_update_elem(s->dst_fd, &cookie, &v, BPF_NOEXIST)) {
		rc = -errno;
		splice_sock_del(s, cookie);
		return rc;
	}
	return 0;
}

int splice_sock_arm(struct splice *s, int fd, uint64_t cookie)
{
	uint64_t v = (uint64_t)fd;

	if (bpf_map_update_elem(s->sk_fd, &cookie, &v, BPF_NOEXIST))
		return -errno;
	return 0;
}

/* One pass of edge_splice_unarm over the TCP sockets: 0 or -errno. */
static int splice_unarm_pass(struct splice *s)
{
	char buf[256];
	ssize_t r;
	int it = bpf_iter_create(s->iter_fd), rc = 0;

	if (it < 0)
		return -errno;
	/* the program writes nothing: a read runs the pass to its end (or
	 * a million sockets, then -EAGAIN: read on) */
	for (;;) {
		r = read(it, buf, sizeof(buf));
		if (r == 0)
			break;
		if (r < 0 && errno != EINTR && errno != EAGAIN) {
			rc = -errno;
			break;
		}
	}
	close(it);
	return rc;
}

/* the kernel's TCP_CLOSE (include/net/tcp_states.h; linux/tcp.h has no
 * states) */
#define SPLICE_TCP_CLOSE 7

/* Whether fd's socket is closed (TCP_CLOSE: both FINs exchanged, or
 * reset), which takes it out of the TCP hash the pass walks, its last
 * segment's verdict over and none to come: TCP_INFO reads the state and
 * then takes the socket's lock, which the segment that closed it holds
 * from before the state change until after its verdict (tcp_fin comes
 * before tcp_data_ready), and nothing arrives on a closed socket. */
static bool splice_sock_closed(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	return fd >= 0 &&
	       getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
	       ti.tcpi_state == SPLICE_TCP_CLOSE;
}

int splice_sock_disarm(struct splice *s, const uint64_t *cookies,
		       const int *fds, int n, bool *locked)
{
	/* a minute between warnings (a descriptor limit reached would say
	 * it at every hand-back) */
	static struct log_site failed = LOG_SITE_INIT(1, 60000);
	uint64_t zero = 0, v;
	int i, rc, nlocked = 0;
	bool pass = false;

	if (s->iter_fd >= 0) {
		for (i = 0; i < n; i++)
			if (bpf_map_update_elem(s->disarm_fd, &cookies[i],
						&zero, BPF_ANY) == 0)
				pass = true;
		if (pass && (rc = splice_unarm_pass(s)) != 0)
			log_site_warnx(
			    &failed, NULL,
			    "splice: the TCP socket iterator failed "
			    "(%s): sockets disarmed by plain deletes",
			    strerror(-rc));
	}
	for (i = 0; i < n; i++) {
		v = 0;
		if (pass &&
		    bpf_map_lookup_elem(s->disarm_fd, &cookies[i], &v) == 0 &&
		    v == 1) {
			nlocked++;
		} else {
			/* not in the TCP hash any more (closed), or no
			 * iterator: a closed socket's delete races no
			 * verdict once its lock was taken after the close */
			if (fds && splice_sock_closed(fds[i])) {
				v = 1;
				nlocked++;
			}
			bpf_map_delete_elem(s->sk_fd, &cookies[i]);
		}
		if (locked)
			locked[i] = v == 1;
		if (pass)
			bpf_map_delete_elem(s->disarm_fd, &cookies[i]);
	}
	return nlocked;
}

const char *splice_unarm_why(const struct splice *s)
{
	return s->iter_fd >= 0 ? NULL : s->unarm_why;
}

void splice_sock_unlink(struct splice *s, uint64_t cookie)
{
	bpf_map_delete_elem(s->sk_fd, &cookie);
	bpf_map_delete_elem(s->dst_fd, &cookie);
}

void splice_sock_forget(struct splice *s, uint64_t cookie)
{
	bpf_map_delete_elem(s->ctl_fd, &cookie);
	bpf_map_delete_elem(s->cnt_fd, &cookie);
}

void splice_sock_del(struct splice *s, uint64_t cookie)
{
	splice_sock_unlink(s, cookie);
	splice_sock_forget(s, cookie);
}

int splice_sock_counts(struct splice *s, uint64_t cookie,
		       struct edge_splice_cnt *out)
{
	if (bpf_map_lookup_elem(s->cnt_fd, &cookie, out))
		return -errno;
	return 0;
}

int splice_sock_written(int fd, uint64_t *written, uint64_t *queued,
			uint64_t *received)
{
	struct tcp_info ti[2];
	socklen_t len = sizeof(ti[0]);
	int outq = 0, i, rc = -EAGAIN;

	/* bytes acknowledged, the send queue, bytes acknowledged again: the
	 * same count twice means no ACK came in between, so the queue read
	 * between them adds up with it exactly (an ACK between two reads
	 * would make a base low and every delivery after it look too big) */
	for (i = 0; i < 8 && rc == -EAGAIN; i++) {
		memset(ti, 0, sizeof(ti));
		len = sizeof(ti[0]);
		if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti[0], &len) < 0 ||
		    ioctl(fd, SIOCOUTQ, &outq) < 0 ||
		    getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti[1], &len) < 0)
			return -errno;
		if (len < offsetof(struct tcp_info, tcpi_bytes_received) +
			      sizeof(ti[0].tcpi_bytes_received))
			return -EOPNOTSUPP;
		if (ti[0].tcpi_bytes_acked == ti[1].tcpi_bytes_acked)
			rc = 0;
	}
	/* unsteady: the first count and the queue after it, a lower bound */
	*written = ti[0].tcpi_bytes_acked + (uint64_t)outq;
	if (queued)
		*queued = (uint64_t)outq;
	if (received)
		*received = ti[1].tcpi_bytes_received;
	return rc;
}

int splice_sock_received(int fd, uint64_t *received)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return -errno;
	if (len < offsetof(struct tcp_info, tcpi_bytes_received) +
		      sizeof(ti.tcpi_bytes_received))
		return -EOPNOTSUPP;
	*received = ti.tcpi_bytes_received;
	return 0;
}

int splice_sock_inq(int fd, uint64_t *n)
{
	/* a peek that copies nothing (MSG_TRUNC; no buffer, so that a
	 * path that would copy fails rather than write) of everything */
	ssize_t r =
	    recv(fd, NULL, INT_MAX, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);

	if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
		return -errno;
	*n = r > 0 ? (uint64_t)r : 0;
	return 0;
}

int splice_sock_rx(int fd, uint64_t *received, uint64_t *inq, bool *fin)
{
	struct tcp_info ti;
	socklen_t len;
	uint64_t q1 = 0, q2 = 0;
	int i, rc;

	/* the queue's length before and after the counts, until equal: no
	 * byte arrived in between (nobody else reads this socket) */
	for (i = 0; i < 8; i++) {
		memset(&ti, 0, sizeof(ti));
		len = sizeof(ti);
		rc = splice_sock_inq(fd, &q1);
		if (rc)
			return rc;
		if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
			return -errno;
		rc = splice_sock_inq(fd, &q2);
		if (rc)
			return rc;
		if (len < offsetof(struct tcp_info, tcpi_bytes_received) +
			      sizeof(ti.tcpi_bytes_received))
			return -EOPNOTSUPP;
		if (q1 == q2)
			break;
	}
	if (q1 != q2)
		return -EAGAIN;
	*received = ti.tcpi_bytes_received;
	*inq = q1;
	/* the states after the peer's FIN came; CLOSE too when edged had
	 * shut its side down first (the socket left TIME_WAIT to a
	 * timewait sock) and no error says it was a reset (POLLERR, which
	 * leaves the error for the socket's next reader, as SO_ERROR would
	 * not) */
	if (ti.tcpi_state == BPF_TCP_CLOSE) {
		struct pollfd pf = {.fd = fd, .events = POLLRDHUP};

		*fin = poll(&pf, 1, 0) >= 0 && !(pf.revents & POLLERR);
		return 0;
	}
	*fin = ti.tcpi_state == BPF_TCP_CLOSE_WAIT ||
	       ti.tcpi_state == BPF_TCP_LAST_ACK ||
	       ti.tcpi_state == BPF_TCP_CLOSING ||
	       ti.tcpi_state == BPF_TCP_TIME_WAIT;
	return 0;
}

int splice_sock_kick(int fd)
{
	int one = 1;

	/* setting the low-water mark runs the socket's data_ready, which
	 * the sockmap replaced by its verdict */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one)) < 0)
		return -errno;
	return 0;
}

int splice_sock_peek(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);

	if (n > 0)
		return 1;
	if (n == 0)
		return 0;
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		return -EAGAIN;
	return -errno;
}

/* ---- the self-test ---------------------------------------------------- */

#define ST_BYTES (256 * 1024)
#define ST_EARLY 4096 /* sent before the socket enters the map */
#define ST_DEADLINE_MS 2000

static uint64_t st_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A connected loopback pair (non-blocking) through listener l. */
static int st_pair(int l, int *cfd, int *afd)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);

	*cfd = *afd = -1;
	if (getsockname(l, (struct sockaddr *)&sa, &len) < 0)
		return -errno;
	*cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*cfd < 0 || connect(*cfd, (struct sockaddr *)&sa, len) < 0)
		return -errno;
	*afd = accept4(l, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (*afd < 0)
		return -errno;
	if (fcntl(*cfd, F_SETFL, fcntl(*cfd, F_GETFL) | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* The self-test's exact written count of fd, waiting up to 100 ms for
 * acknowledgements in flight to settle. */
static int st_written(int fd, uint64_t *w)
{
	int i, rc = -EAGAIN;

	for (i = 0; i < 100 && rc == -EAGAIN; i++) {
		rc = splice_sock_written(fd, w, NULL, NULL);
		if (rc == -EAGAIN)
			usleep(1000);
	}
	return rc;
}

/* Send n bytes of src into wfd while reading n bytes from rfd into dst,
 * by the deadline: 0, -ETIMEDOUT, or -errno. */
static int st_move(int wfd, int rfd, const unsigned char *src,
		   unsigned char *dst, size_t n, uint64_t deadline)
{
	size_t sent = 0, got = 0;
	ssize_t r;

	while (got < n) {
		struct pollfd p[2] = {{.fd = rfd, .events = POLLIN},
				      {.fd = wfd, .events = POLLOUT}};
		uint64_t now = st_now_ms();

		if (now >= deadline)
			return -ETIMEDOUT;
		if (wfd < 0)
			sent = n; /* only reading */
		if (poll(p, sent < n ? 2 : 1, (int)(deadline - now)) < 0 &&
		    errno != EINTR)
			return -errno;
		if (sent < n) {
			r = send(wfd, src + sent, n - sent,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
			if (r > 0)
				sent += (size_t)r;
			else if (r < 0 && errno != EAGAIN)
				return -errno;
		}
		r = recv(rfd, dst + got, n - got, MSG_DONTWAIT);
		if (r > 0)
			got += (size_t)r;
		else if (r == 0)
			return -ECONNRESET;
		else if (errno != EAGAIN)
			return -errno;
	}
	return 0;
}

/* Both directions through the splice of b (a's peer) and c (d's peer):
 * a -> b => c -> d and d -> c => b -> a, the first bytes sent before b
 * entered the map (handed to the program by the kick). */
static int splice_selftest(struct splice *s, struct errbuf *err)
{
	int l = -1, a = -1, b = -1, c = -1, d = -1, rc;
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	unsigned char *src = malloc(ST_EARLY + ST_BYTES),
		      *dst = malloc(ST_BYTES);
	uint64_t kb = 0, kc = 0, wb0, wc0, wb, wc;
	struct edge_splice_cnt nb, nc;
	uint64_t deadline = st_now_ms() + ST_DEADLINE_MS;
	const char *what = "setting up";
	bool added = false;

	rc = -ENOMEM;
	if (!src || !dst)
		goto out;
	if (RAND_bytes(src, ST_EARLY + ST_BYTES) != 1)
		memset(src, 0x5a, ST_EARLY + ST_BYTES);
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(l, 4) < 0) {
		rc = -errno;
		goto out;
	}
	rc = st_pair(l, &a, &b);
	if (rc == 0)
		rc = st_pair(l, &d, &c);
	if (rc)
		goto out;
	kb = splice_cookie(b);
	kc = splice_cookie(c);
	what = "reading TCP counters";
	rc = st_written(b, &wb0);
	if (rc == 0)
		rc = st_written(c, &wc0);
	if (rc)
		goto out;
	what = "sending before the splice";
	if (send(a, src, ST_EARLY, MSG_NOSIGNAL) != ST_EARLY) {
		rc = errno ? -errno : -EIO;
		goto out;
	}
	usleep(2000);
	what = "adding sockets to the sockhash";
	rc = splice_sock_add(s, b, kb, kc);
	if (rc == 0)
		rc = splice_sock_add(s, c, kc, kb);
	added = true;
	if (rc == 0)
		rc = splice_sock_arm(s, b, kb);
	if (rc == 0)
		rc = splice_sock_arm(s, c, kc);
	if (rc)
		goto out;
	what = "handing the bytes already queued to the program";
	rc = splice_sock_kick(b);
	if (rc == 0)
		rc = st_move(-1, d, NULL, dst, ST_EARLY, deadline);
	if (rc == 0 && memcmp(src, dst, ST_EARLY))
		rc = -EILSEQ;
	if (rc)
		goto out;
	what = "splicing 256 KiB one way";
	rc = st_move(a, d, src + ST_EARLY, dst, ST_BYTES, deadline);
	if (rc == 0 && memcmp(src + ST_EARLY, dst, ST_BYTES))
		rc = -EILSEQ;
	if (rc)
		goto out;
	what = "splicing 256 KiB the other way";
	memset(dst, 0, ST_BYTES);
	rc = st_move(d, a, src, dst, ST_BYTES, deadline);
	if (rc == 0 && memcmp(src, dst, ST_BYTES))
		rc = -EILSEQ;
	if (rc)
		goto out;
	what = "comparing the program's counters";
	rc = splice_sock_counts(s, kb, &nb);
	if (rc == 0)
		rc = splice_sock_counts(s, kc, &nc);
	if (rc == 0)
		rc = st_written(b, &wb);
	if (rc == 0)
		rc = st_written(c, &wc);
	if (rc)
		goto out;
	if (nb.redir_bytes != ST_EARLY + ST_BYTES ||
	    nc.redir_bytes != ST_BYTES || nb.pass_bytes || nc.pass_bytes ||
	    wc - wc0 != ST_EARLY + ST_BYTES || wb - wb0 != ST_BYTES) {
		rc = -EPROTO;
		goto out;
	}
	/* handed back: out from under the verdict (under their socket locks
	 * when the kernel has the iterator, which must find both), then
	 * a's next bytes wait in b's receive queue for b's own reader */
	what = "taking the sockets out from under the verdict";
	{
		uint64_t ck[2] = {kb, kc};

		/* a pass can miss a socket (the iterator's batches): a
		 * second look before doing without it */
		if (splice_sock_disarm(s, ck, NULL, 2, NULL) != 2 &&
		    s->iter_fd >= 0 &&
		    splice_sock_disarm(s, ck, NULL, 2, NULL) != 2) {
			snprintf(s->unarm_why, sizeof(s->unarm_why),
				 "the TCP socket iterator did not find the "
				 "self-test's sockets");
			s->iter_fd = -1;
		}
	}
	what = "reading 256 KiB handed back";
	memset(dst, 0, ST_BYTES);
	rc = st_move(a, b, src, dst, ST_BYTES, deadline);
	if (rc == 0 && memcmp(src, dst, ST_BYTES))
		rc = -EILSEQ;
	if (rc == 0 && (splice_sock_counts(s, kb, &nb) ||
			nb.redir_bytes != ST_EARLY + ST_BYTES))
		rc = -EPROTO;
out:
	if (rc)
		errbuf_set(err, "sockmap self-test failed %s: %s", what,
			   rc == -EILSEQ   ? "bytes changed on the way"
			   : rc == -EPROTO ? "the counters do not match"
					   : strerror(-rc));
	if (added) {
		splice_sock_del(s, kb);
		splice_sock_del(s, kc);
	}
	if (l >= 0)
		close(l);
	if (a >= 0)
		close(a);
	if (b >= 0)
		close(b);
	if (c >= 0)
		close(c);
	if (d >= 0)
		close(d);
	free(src);
	free(dst);
	return rc;
}

/* ---- kTLS ------------------------------------------------------------- */

#ifndef TCP_ULP
#define TCP_ULP 31
#endif
#ifndef SOL_TLS
#define SOL_TLS 282
#endif

/* Set kTLS of version v (AES-GCM-128, a zero key) in direction opt (TLS_TX
 * or TLS_RX) on fd, which has the tls ULP: 0 or -errno. */
static int ktls_set(int fd, int opt, unsigned short v)
{
	struct tls12_crypto_info_aes_gcm_128 ci;

	memset(&ci, 0, sizeof(ci));
	ci.info.version = v;
	ci.info.cipher_type = TLS_CIPHER_AES_GCM_128;
	if (setsockopt(fd, SOL_TLS, opt, &ci, sizeof(ci)) < 0)
		return -errno;
	return 0;
}

/* One loopback pair with the tls ULP on its client socket, and version v
 * set both ways on it: 0, or -errno and *what the step that failed. */
static int ktls_try(int l, unsigned short v, const char **what)
{
	int c = -1, a = -1, rc;

	*what = "making a loopback pair";
	rc = st_pair(l, &c, &a);
	if (rc == 0) {
		*what = "setsockopt(TCP_ULP, \"tls\")";
		if (setsockopt(c, IPPROTO_TCP, TCP_ULP, "tls", 3) < 0)
			rc = -errno;
	}
	if (rc == 0) {
		*what = "setsockopt(TLS_TX)";
		rc = ktls_set(c, TLS_TX, v);
	}
	if (rc == 0) {
		*what = "setsockopt(TLS_RX)";
		rc = ktls_set(c, TLS_RX, v);
	}
	if (c >= 0)
		close(c);
	if (a >= 0)
		close(a);
	return rc;
}

/* Whether kTLS can be set on a socket already in a sockhash (a kTLS
 * socket cannot enter one: the kernel refuses a socket with a ULP): 0,
 * or -errno and *what the step that failed. */
static int ktls_in_sockhash(int l, const char **what)
{
	int m, c = -1, a = -1, rc;
	unsigned long long k = 1, v;

	*what = "making a sockhash";
	m = bpf_map_create(BPF_MAP_TYPE_SOCKHASH, NULL, 8, 8, 1, NULL);
	if (m < 0)
		return -errno;
	rc = st_pair(l, &c, &a);
	if (rc == 0) {
		*what = "adding a socket to a sockhash";
		v = (unsigned long long)c;
		if (bpf_map_update_elem(m, &k, &v, BPF_ANY))
			rc = -errno;
	}
	if (rc == 0) {
		*what = "setsockopt(TCP_ULP, \"tls\") on a socket in a "
			"sockhash";
		if (setsockopt(c, IPPROTO_TCP, TCP_ULP, "tls", 3) < 0)
			rc = -errno;
	}
	if (rc == 0) {
		*what = "setsockopt(TLS_TX) on a socket in a sockhash";
		rc = ktls_set(c, TLS_TX, TLS_1_2_VERSION);
	}
	if (c >= 0)
		close(c);
	if (a >= 0)
		close(a);
	close(m);
	return rc;
}

void splice_ktls_probe(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	const char *what = "making a listener";
	int l, rc;

	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(l, 4) < 0)
		rc = -errno;
	else
		rc = ktls_try(l, TLS_1_2_VERSION, &what);
	if (rc == -ENOENT && strstr(what, "ULP"))
		snprintf(splice_ktls_buf, sizeof(splice_ktls_buf),
			 "kernel has no kTLS (no tls module: %s: %s)", what,
			 strerror(-rc));
	else if (rc)
		snprintf(splice_ktls_buf, sizeof(splice_ktls_buf),
			 "kernel has no usable kTLS (TLS 1.2 AES-GCM: %s: %s)",
			 what, strerror(-rc));
	else if ((rc = ktls_try(l, TLS_1_3_VERSION, &what)) != 0)
		snprintf(splice_ktls_buf, sizeof(splice_ktls_buf),
			 "kernel has kTLS for TLS 1.2, not 1.3 (%s: %s)", what,
			 strerror(-rc));
	else {
		const char *w2;
		int r2 = ktls_in_sockhash(l, &w2);

		if (r2)
			snprintf(splice_ktls_buf, sizeof(splice_ktls_buf),
				 "kernel has kTLS (TLS 1.2 and 1.3, AES-GCM, "
				 "both ways), not with the sockmap (%s: %s)",
				 w2, strerror(-r2));
		else
			snprintf(splice_ktls_buf, sizeof(splice_ktls_buf),
				 "kernel has kTLS (TLS 1.2 and 1.3, AES-GCM, "
				 "both ways), also on a socket in a sockhash");
	}
	if (l >= 0)
		close(l);
	atomic_store(&splice_ktls_ok,
		     rc == 0 || strstr(splice_ktls_buf, "1.2, not") != NULL);
}

bool splice_ktls(void)
{
	return atomic_load(&splice_ktls_ok);
}

const char *splice_ktls_why(void)
{
	return splice_ktls_buf;
}

/* ---- load ------------------------------------------------------------- */

static int splice_silent(enum libbpf_print_level level, const char *fmt,
			 va_list ap)
{
	(void)level;
	(void)fmt;
	(void)ap;
	return 0;
}

/* Open and load the skeleton into s->skel, with edge_splice_unarm when
 * iter (then attached: s->iter_fd), else without: 0 or -errno (s->skel
 * NULL). */
static int splice_load(struct splice *s, bool iter)
{
	struct bpf_link *l;
	int rc;

	s->skel = edge_splice__open();
	if (!s->skel)
		return errno ? -errno : -EINVAL;
	if (!iter)
		bpf_program__set_autoload(s->skel->progs.edge_splice_unarm,
					  false);
	if (edge_splice__load(s->skel))
		goto fail;
	if (!iter)
		return 0;
	l = bpf_program__attach_iter(s->skel->progs.edge_splice_unarm, NULL);
	if (!l)
		goto fail;
	s->skel->links.edge_splice_unarm = l; /* destroyed with it */
	s->iter_fd = bpf_link__fd(l);
	return 0;
fail:
	rc = errno ? -errno : -EINVAL;
	edge_splice__destroy(s->skel);
	s->skel = NULL;
	return rc;
}

int splice_open(struct splice **out, struct errbuf *err)
{
	struct splice *s = calloc(1, sizeof(*s));
	libbpf_print_fn_t old;
	int rc;

	if (!s)
		return -ENOMEM;
	s->iter_fd = -1;
	old = libbpf_set_print(splice_silent);
	rc = splice_load(s, true);
	if (rc) {
		/* a kernel without the TCP iterator or BTF: the verdict
		 * alone, its sockets disarmed by plain deletes */
		snprintf(s->unarm_why, sizeof(s->unarm_why),
			 "the kernel refused the TCP socket iterator: %s",
			 strerror(-rc));
		rc = splice_load(s, false);
	}
	libbpf_set_print(old);
	if (rc) {
		errbuf_set(err,
			   "the kernel refused the sockmap program or its "
			   "maps: %s",
			   strerror(-rc));
		free(s);
		return rc;
	}
	s->sk_fd = bpf_map__fd(s->skel->maps.edge_splice_sk);
	s->dst_fd = bpf_map__fd(s->skel->maps.edge_splice_dst);
	s->ctl_fd = bpf_map__fd(s->skel->maps.edge_splice_ctl);
	s->cnt_fd = bpf_map__fd(s->skel->maps.edge_splice_cnt);
	s->disarm_fd = bpf_map__fd(s->skel->maps.edge_splice_disarm);
	s->prog_fd = bpf_program__fd(s->skel->progs.edge_splice);
	if (bpf_prog_attach(s->prog_fd, s->sk_fd, BPF_SK_SKB_STREAM_VERDICT,
			    0)) {
		rc = -errno;
		errbuf_set(err,
			   "the kernel refused to attach the sk_skb verdict: "
			   "%s",
			   strerror(-rc));
		splice_close(s);
		return rc;
	}
	s->attached = true;
	{
		struct bpf_map_info info;
		__u32 len = sizeof(info);

		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(s->sk_fd, &info, &len) == 0)
			s->sk_id = info.id;
	}
	rc = splice_selftest(s, err);
	if (rc) {
		splice_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

unsigned splice_sockhash_id(const struct splice *s)
{
	return s ? s->sk_id : 0;
}

void splice_close(struct splice *s)
{
	if (!s)
		return;
	if (s->attached)
		bpf_prog_detach2(s->prog_fd, s->sk_fd,
				 BPF_SK_SKB_STREAM_VERDICT);
	edge_splice__destroy(s->skel);
	free(s);
}
