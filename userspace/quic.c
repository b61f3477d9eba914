// SPDX-License-Identifier: BSD-2-Clause
/*
 * quic.c - QUIC connections on the workers' UDP sockets (quic.h).
 */
#include "quic.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>

#include <event2/event.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "clk.h"
#include "log.h"
#include "quicsteer.h"
#include "siphash.h"
#include "sockreg.h"
#include "tls.h"
#include "tls_gnutls.h"
#include "worker.h"

/* QUIC forbids TLS 1.3's middlebox compatibility mode; TLS 1.3 only. */
#define QUIC_PRIORITY                                                          \
	"%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3:"            \
	"-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:"            \
	"-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1"

/* A worker's connections with a handshake under way past which a new
 * client must prove its address first (a Retry) */
#define QUIC_RETRY_HANDSHAKES 64
/* How long a Retry token and a NEW_TOKEN token are good for */
#define QUIC_RETRY_TOKEN_NS (10ULL * NGTCP2_SECONDS)
#define QUIC_REGULAR_TOKEN_NS (3600ULL * NGTCP2_SECONDS)
/* A connection's idle timeout when timeouts.idle_keepalive says none */
#define QUIC_IDLE_MS_DEFAULT 60000
/* 0-RTT's anti-replay window: GnuTLS takes early data on tickets issued
 * since its window last moved (every QUIC_REPLAY_WINDOW_MS at most), and
 * remembers ClientHellos that long; the table's slots (all workers: some
 * 2,000 0-RTT handshakes a second), and how far from its hash a
 * ClientHello's slot may be (none free that near: its early data is
 * refused) */
#define QUIC_REPLAY_WINDOW_MS 60000
#define QUIC_SEEN_SLOTS (1U << 17)
#define QUIC_SEEN_PROBES 64
/* initial flow control: a stream's and the connection's receive window */
#define QUIC_STREAM_WINDOW (256 * 1024)
#define QUIC_CONN_WINDOW (1024 * 1024)
#define QUIC_MAX_STREAM_WINDOW (6 * 1024 * 1024)
#define QUIC_MAX_WINDOW (16 * 1024 * 1024)

/* ---- process-wide ------------------------------------------------------ */

/* tokens and stateless resets: any worker makes and checks them */
static uint8_t quic_secret[32];
static gnutls_datum_t quic_ticket_key;
static pthread_once_t quic_once = PTHREAD_ONCE_INIT;
static int quic_once_rc;

/* 0-RTT: every ClientHello with early data seen within GnuTLS's window
 * (QUIC_REPLAY_WINDOW_MS), by a fingerprint of its PSK binder, so that a
 * replayed one has its early data refused (the handshake goes on, its requests
 * wait for 1-RTT). One table for the process: a replay to another worker is
 * seen too. GnuTLS's key starts with its window's start time, which moves every
 * 10 s and per worker (each has its own anti-replay state, GnuTLS writing it
 * unlocked): a replay just after the move would not match, so the table keys on
 * the binder alone and keeps it 2 s past GnuTLS's expiry (GnuTLS refuses a
 * ClientHello older than its window by its ticket age). Tickets are under a key
 * of this process alone, so another host or a restarted edged cannot take their
 * early data at all. */
struct quic_seen {
	uint8_t fp[16];
	time_t exp; /* 0: never used; <= now: free again */
};
/* GnuTLS's key: the window's start (12 bytes), then the binder */
#define QUIC_SEEN_KEY_SKIP 12
static struct quic_seen *quic_seen;
static pthread_mutex_t quic_seen_lock = PTHREAD_MUTEX_INITIALIZER;
/* the largest initial_max_streams_bidi and HTTP/3 field section size any
 * connection with 0-RTT was given: a ticket promises its connection's
 * limits to 0-RTT, so early data is taken only while the current limits
 * are at least these (a reload that lowers them turns it off until a
 * restart) */
static _Atomic uint64_t quic_streams_promised, quic_fields_promised;
static atomic_bool quic_early_lowered;

/* GnuTLS's anti-replay database: 0, or GNUTLS_E_DB_ENTRY_EXISTS for a
 * ClientHello seen (or no room: refused all the same) */
static int quic_seen_add(void *ptr, time_t exp, const gnutls_datum_t *key,
			 const gnutls_datum_t *data)
{
	const unsigned *worker = ptr; /* its worker's id */
	uint8_t md[32];
	unsigned mdlen = 0, at, i;
	struct quic_seen *free_slot = NULL;
	time_t now = time(NULL);
	int rc = GNUTLS_E_DB_ENTRY_EXISTS;

	(void)data;
	if (key->size <= QUIC_SEEN_KEY_SKIP ||
	    EVP_Digest(key->data + QUIC_SEEN_KEY_SKIP,
		       key->size - QUIC_SEEN_KEY_SKIP, md, &mdlen, EVP_sha256(),
		       NULL) != 1)
		return rc;
	memcpy(&at, md + 16, sizeof(at));
	pthread_mutex_lock(&quic_seen_lock);
	for (i = 0; quic_seen && i < QUIC_SEEN_PROBES; i++) {
		struct quic_seen *e =
		    &quic_seen[(at + i) & (QUIC_SEEN_SLOTS - 1)];

		if (e->exp > now && memcmp(e->fp, md, sizeof(e->fp)) == 0) {
			free_slot = NULL;
			break;
		}
		if (e->exp <= now && !free_slot)
			free_slot = e;
	}
	if (free_slot) {
		memcpy(free_slot->fp, md, sizeof(free_slot->fp));
		free_slot->exp = exp + 2;
		rc = 0;
	}
	pthread_mutex_unlock(&quic_seen_lock);
	if (rc)
		quic_count(worker ? *worker : 0, i < QUIC_SEEN_PROBES
						     ? QUIC_EV_EARLY_REPLAYED
						     : QUIC_EV_EARLY_FULL);
	return rc;
}

static void quic_global_init(void)
{
	if (RAND_bytes(quic_secret, sizeof(quic_secret)) != 1 ||
	    gnutls_session_ticket_key_generate(&quic_ticket_key) < 0) {
		quic_once_rc = -1;
		return;
	}
	/* 3 MiB, lazily: only what 0-RTT's ClientHellos touch is paged in */
	quic_seen = calloc(QUIC_SEEN_SLOTS, sizeof(*quic_seen));
	if (!quic_seen)
		quic_once_rc = -1;
}

/* A limit tickets promise their 0-RTT, raised to want: whether want is
 * at least every promise made. */
static bool quic_promise(_Atomic uint64_t *promised, uint64_t want)
{
	uint64_t seen = atomic_load(promised);

	while (want > seen &&
	       !atomic_compare_exchange_weak(promised, &seen, want))
		;
	return want >= seen;
}

/* Whether a connection of w may take 0-RTT (and its ticket allow it):
 * tls.quic_early_data, and its limits (streams, HTTP/3's field section
 * size) at least what any early-data ticket of this process promised. */
static bool quic_early_ok(const struct worker *w)
{
	bool streams, fields;

	if (!w->set.quic_early_data)
		return false;
	streams = quic_promise(&quic_streams_promised,
			       w->set.http2.max_concurrent_streams);
	fields = quic_promise(&quic_fields_promised,
			      w->set.http2.max_header_list_size);
	if (streams && fields)
		return true;
	if (!atomic_exchange(&quic_early_lowered, true))
		log_warnx("tls.quic_early_data: 0-RTT off until a restart: "
			  "http2.max_concurrent_streams or "
			  "http2.max_header_list_size is lower than earlier "
			  "tickets promised");
	return false;
}

/* every worker's socket of each quic_listen address, for the steering
 * program (worker_new runs on the main thread, in worker order) */
static int quic_group[CONFIG_LISTEN_MAX][CONFIG_WORKERS_MAX];

/* ---- a worker's sockets and connections ------------------------------- */

struct quic_sock {
	struct quic_set *qs;
	int fd;
	struct event *ev;
	struct sockaddr_storage local; /* as bound (the port when wildcard) */
	socklen_t local_len;
	bool wildcard; /* 0.0.0.0 or ::: the local address from IP_PKTINFO */
};

/* a connection ID a connection answers to */
struct quic_cid {
	struct quic_cid *next;	    /* in its bucket */
	struct quic_cid *conn_next; /* the connection's */
	struct quic_conn *qc;
	uint8_t len;
	uint8_t b[NGTCP2_MAX_CIDLEN];
};

TAILQ_HEAD(quic_conn_list, quic_conn);

struct quic_set {
	struct worker *w;
	struct quic_sock *socks;
	size_t n;
	struct quic_cid **buckets;
	size_t nbuckets, ncids;
	struct quic_conn_list conns;
	size_t handshaking;
	gnutls_anti_replay_t replay; /* GnuTLS's window, quic_seen_add's */
	uint8_t buf[65536];
};

enum quic_state { QC_OPEN, QC_CLOSING, QC_DRAINING };

struct quic_conn {
	TAILQ_ENTRY(quic_conn) link;
	struct quic_set *qs;
	struct quic_sock *sock;
	ngtcp2_conn *qc;
	gnutls_session_t tls;
	ngtcp2_crypto_conn_ref ref;
	struct tls_store *store;
	ngtcp2_connection_close_error err;
	enum quic_state state;
	bool handshaking;
	bool started;
	bool dead; /* freed at the end of the loop's turn */
	int depth; /* inside ngtcp2 */
	struct quic_cid *cids;
	struct event *timer, *soon;
	uint8_t *closebuf;
	size_t closelen;
	uint64_t close_rx; /* datagrams received while closing */
	struct sockaddr_storage peer;
	char client_ip[INET6_ADDRSTRLEN];
	struct cidr peer_cidr;
	void *app;
};

static const struct quic_app_ops *quic_app(const struct quic_set *qs)
{
	return qs->w->sh->quic_app;
}

/* ---- accessors ------------------------------------------------------ */

ngtcp2_conn *quic_conn_ngtcp2(const struct quic_conn *qc)
{
	return qc->qc;
}

void *quic_conn_app(const struct quic_conn *qc)
{
	return qc->app;
}

void quic_conn_set_app(struct quic_conn *qc, void *app)
{
	qc->app = app;
}

struct worker *quic_conn_worker(const struct quic_conn *qc)
{
	return qc->qs->w;
}

const char *quic_conn_client_ip(const struct quic_conn *qc)
{
	return qc->client_ip;
}

const struct sockaddr *quic_conn_peer(const struct quic_conn *qc)
{
	return (const struct sockaddr *)&qc->peer;
}

const struct cidr *quic_conn_peer_cidr(const struct quic_conn *qc)
{
	return &qc->peer_cidr;
}

void quic_conn_tls_info(const struct quic_conn *qc, const char **version,
			const char **cipher, bool *resumed)
{
	*version = "TLSv1.3";
	*cipher = gnutls_cipher_get_name(gnutls_cipher_get(qc->tls));
	*resumed = gnutls_session_is_resumed(qc->tls) != 0;
}

void quic_conn_app_error(struct quic_conn *qc, uint64_t code)
{
	ngtcp2_connection_close_error_set_application_error(&qc->err, code,
							    NULL, 0);
}

static void quic_close(struct quic_conn *qc);

void quic_conn_close(struct quic_conn *qc, uint64_t app_err)
{
	if (qc->dead || qc->state != QC_OPEN || qc->depth)
		return;
	quic_conn_app_error(qc, app_err);
	quic_close(qc);
}

void quic_conn_flush_soon(struct quic_conn *qc)
{
	if (!qc->dead)
		event_active(qc->soon, EV_TIMEOUT, 0);
}

/* ---- connection IDs ------------------------------------------------- */

static size_t quic_cid_bucket(const struct quic_set *qs, const uint8_t *b,
			      size_t len)
{
	return (size_t)siphash_key(b, len) & (qs->nbuckets - 1);
}

static struct quic_conn *quic_cid_find(const struct quic_set *qs,
				       const uint8_t *b, size_t len)
{
	struct quic_cid *c;

	if (len > NGTCP2_MAX_CIDLEN)
		return NULL;
	for (c = qs->buckets[quic_cid_bucket(qs, b, len)]; c; c = c->next)
		if (c->len == len && memcmp(c->b, b, len) == 0)
			return c->qc;
	return NULL;
}

/* grow the table to twice its buckets (a failure keeps it as it is) */
static void quic_cid_grow(struct quic_set *qs)
{
	size_t n = qs->nbuckets * 2;
	struct quic_cid **nb = calloc(n, sizeof(*nb)), **old = qs->buckets;

	if (!nb)
		return;
	qs->buckets = nb;
	qs->nbuckets = n;
	for (size_t i = 0; i < n / 2; i++) {
		struct quic_cid *c = old[i], *next;

		for (; c; c = next) {
			size_t k = quic_cid_bucket(qs, c->b, c->len);

			next = c->next;
			c->next = nb[k];
			nb[k] = c;
		}
	}
	free(old);
}

static int quic_cid_add(struct quic_conn *qc, const uint8_t *b, size_t len)
{
	struct quic_set *qs = qc->qs;
	struct quic_cid *c;
	size_t k;

	if (len > NGTCP2_MAX_CIDLEN || quic_cid_find(qs, b, len))
		return -1;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -1;
	c->qc = qc;
	c->len = (uint8_t)len;
	memcpy(c->b, b, len);
	k = quic_cid_bucket(qs, b, len);
	c->next = qs->buckets[k];
	qs->buckets[k] = c;
	c->conn_next = qc->cids;
	qc->cids = c;
	if (++qs->ncids > qs->nbuckets * 2)
		quic_cid_grow(qs);
	return 0;
}

static void quic_cid_unlink(struct quic_set *qs, struct quic_cid *c)
{
	struct quic_cid **p = &qs->buckets[quic_cid_bucket(qs, c->b, c->len)];

	for (; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			qs->ncids--;
			return;
		}
}

static void quic_cid_del(struct quic_conn *qc, const uint8_t *b, size_t len)
{
	struct quic_cid **p;

	for (p = &qc->cids; *p; p = &(*p)->conn_next)
		if ((*p)->len == len && memcmp((*p)->b, b, len) == 0) {
			struct quic_cid *c = *p;

			*p = c->conn_next;
			quic_cid_unlink(qc->qs, c);
			free(c);
			return;
		}
}

/* a new CID naming this worker (quicsteer.h) */
static int quic_cid_new(const struct quic_set *qs, ngtcp2_cid *cid)
{
	uint8_t b[QUIC_SCID_LEN];

	if (quic_cid_make(b, quic_steer_gen(), qs->w->id))
		return -1;
	ngtcp2_cid_init(cid, b, sizeof(b));
	return 0;
}

/* ---- sending --------------------------------------------------------- */

/* one datagram from s to remote, from local (a wildcard socket's
 * address the client sent to) */
static void quic_send(struct quic_sock *s, const ngtcp2_addr *local,
		      const ngtcp2_addr *remote, const uint8_t *p, size_t len)
{
	struct iovec iov = {(void *)p, len};
	union {
		char v4[CMSG_SPACE(sizeof(struct in_pktinfo))];
		char v6[CMSG_SPACE(sizeof(struct in6_pktinfo))];
	} cbuf;
	struct msghdr m = {.msg_name = remote->addr,
			   .msg_namelen = remote->addrlen,
			   .msg_iov = &iov,
			   .msg_iovlen = 1};
	ssize_t n;

	memset(&cbuf, 0, sizeof(cbuf));
	if (s->wildcard && local && local->addr) {
		struct cmsghdr *cm;

		m.msg_control = &cbuf;
		if (local->addr->sa_family == AF_INET) {
			struct in_pktinfo pi = {0};

			m.msg_controllen = CMSG_SPACE(sizeof(pi));
			cm = CMSG_FIRSTHDR(&m);
			cm->cmsg_level = IPPROTO_IP;
			cm->cmsg_type = IP_PKTINFO;
			cm->cmsg_len = CMSG_LEN(sizeof(pi));
			pi.ipi_spec_dst =
			    ((const struct sockaddr_in *)local->addr)->sin_addr;
			memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
		} else {
			struct in6_pktinfo pi = {0};

			m.msg_controllen = CMSG_SPACE(sizeof(pi));
			cm = CMSG_FIRSTHDR(&m);
			cm->cmsg_level = IPPROTO_IPV6;
			cm->cmsg_type = IPV6_PKTINFO;
			cm->cmsg_len = CMSG_LEN(sizeof(pi));
			pi.ipi6_addr =
			    ((const struct sockaddr_in6 *)local->addr)
				->sin6_addr;
			memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
		}
	}
	do
		n = sendmsg(s->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	/* EAGAIN: the datagram is lost, as on the network; QUIC sends it
	 * again */
}

/* ---- a connection's life -------------------------------------------- */

static void quic_arm(struct quic_conn *qc);
static void quic_write(struct quic_conn *qc);
static void quic_idle_close(struct quic_set *qs);

static void quic_conn_free(struct quic_conn *qc)
{
	struct quic_set *qs = qc->qs;
	const struct quic_app_ops *app = quic_app(qs);

	if (qc->app && app && app->free)
		app->free(qc);
	while (qc->cids) {
		struct quic_cid *c = qc->cids;

		qc->cids = c->conn_next;
		quic_cid_unlink(qs, c);
		free(c);
	}
	TAILQ_REMOVE(&qs->conns, qc, link);
	quic_count(qs->w->id, QUIC_EV_CONN_CLOSE);
	if (qc->handshaking) {
		qs->handshaking--;
		quic_count(qs->w->id, QUIC_EV_HANDSHAKE_FAILED);
	}
	atomic_fetch_sub(&qs->w->sh->connections, 1);
	if (qc->timer)
		event_free(qc->timer);
	if (qc->soon)
		event_free(qc->soon);
	if (qc->qc)
		ngtcp2_conn_del(qc->qc);
	if (qc->tls)
		gnutls_deinit(qc->tls);
	tls_store_put(qc->store);
	free(qc->closebuf);
	free(qc);
}

/* free qc from the loop, once nothing up the stack holds it */
static void quic_kill(struct quic_conn *qc)
{
	if (qc->dead)
		return;
	qc->dead = true;
	evtimer_del(qc->timer);
	event_active(qc->soon, EV_TIMEOUT, 0);
}

/* the closing period: CONNECTION_CLOSE with qc->err, sent again to
 * whatever the peer sends, for three PTOs */
static void quic_close(struct quic_conn *qc)
{
	ngtcp2_path_storage ps;
	ngtcp2_pkt_info pi;
	uint8_t buf[QUIC_MAX_UDP_PAYLOAD];
	ngtcp2_ssize n;

	if (qc->state != QC_OPEN)
		return;
	if (ngtcp2_conn_is_in_closing_period(qc->qc) ||
	    ngtcp2_conn_is_in_draining_period(qc->qc)) {
		qc->state = QC_DRAINING;
		quic_arm(qc);
		return;
	}
	qc->state = QC_CLOSING;
	ngtcp2_path_storage_zero(&ps);
	n = ngtcp2_conn_write_connection_close(
	    qc->qc, &ps.path, &pi, buf, sizeof(buf), &qc->err, clk_now_ns());
	if (n > 0 && (qc->closebuf = malloc((size_t)n))) {
		memcpy(qc->closebuf, buf, (size_t)n);
		qc->closelen = (size_t)n;
		quic_send(qc->sock, &ps.path.local, &ps.path.remote, buf,
			  (size_t)n);
	}
	quic_arm(qc);
}

/* an error of ngtcp2's (rv) on qc: close it or let it go */
static void quic_fail(struct quic_conn *qc, int rv)
{
	switch (rv) {
	case NGTCP2_ERR_DRAINING:
		qc->state = QC_DRAINING;
		quic_arm(qc);
		return;
	case NGTCP2_ERR_IDLE_CLOSE:
	case NGTCP2_ERR_DROP_CONN:
	case NGTCP2_ERR_RETRY:
		quic_kill(qc);
		return;
	case NGTCP2_ERR_CRYPTO:
		if (!qc->err.error_code)
			ngtcp2_connection_close_error_set_transport_error_tls_alert(
			    &qc->err, ngtcp2_conn_get_tls_alert(qc->qc), NULL,
			    0);
		break;
	default:
		if (!qc->err.error_code)
			ngtcp2_connection_close_error_set_transport_error_liberr(
			    &qc->err, rv, NULL, 0);
	}
	quic_close(qc);
}

/* the timer at ngtcp2's next expiry, or the end of a closing period */
static void quic_arm(struct quic_conn *qc)
{
	uint64_t now = clk_now_ns(), at, ns;
	struct timeval tv;

	if (qc->dead)
		return;
	if (qc->state != QC_OPEN)
		at = now + 3 * ngtcp2_conn_get_pto(qc->qc);
	else
		at = ngtcp2_conn_get_expiry(qc->qc);
	ns = at > now ? at - now : 0;
	tv.tv_sec = (time_t)(ns / 1000000000ULL);
	tv.tv_usec = (suseconds_t)(ns % 1000000000ULL / 1000);
	evtimer_add(qc->timer, &tv);
}

static void quic_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct quic_conn *qc = arg;
	int rv;

	(void)fd;
	(void)what;
	if (qc->dead)
		return;
	if (qc->state != QC_OPEN) {
		quic_kill(qc);
		return;
	}
	qc->depth++;
	rv = ngtcp2_conn_handle_expiry(qc->qc, clk_now_ns());
	qc->depth--;
	if (rv) {
		quic_fail(qc, rv);
		return;
	}
	quic_write(qc);
}

static void quic_soon_cb(evutil_socket_t fd, short what, void *arg)
{
	struct quic_conn *qc = arg;

	(void)fd;
	(void)what;
	if (qc->dead) {
		struct worker *w = qc->qs->w;

		quic_conn_free(qc);
		worker_maybe_exit(
		    w); /* draining: this may have been the last */
		return;
	}
	quic_write(qc);
}

/* send what ngtcp2 and the application have, paced by ngtcp2 */
static void quic_write(struct quic_conn *qc)
{
	const struct quic_app_ops *app = quic_app(qc->qs);
	uint8_t buf[QUIC_MAX_UDP_PAYLOAD];
	ngtcp2_path_storage ps;
	ngtcp2_pkt_info pi;
	uint64_t ts = clk_now_ns();
	size_t maxudp, maxpkt, pkts = 0;

	if (qc->dead || qc->state != QC_OPEN)
		return;
	maxudp = ngtcp2_conn_get_max_tx_udp_payload_size(qc->qc);
	if (maxudp > sizeof(buf))
		maxudp = sizeof(buf);
	maxpkt = ngtcp2_conn_get_send_quantum(qc->qc) / maxudp;
	if (maxpkt == 0)
		maxpkt = 1;
	ngtcp2_path_storage_zero(&ps);
	if (qc->app && app && app->work) {
		app->work(qc);
		if (qc->dead || qc->state != QC_OPEN)
			return;
	}
	qc->depth++;
	for (;;) {
		ngtcp2_vec vec[16];
		ngtcp2_ssize nw, ndata = -1;
		ssize_t nvec = 0;
		int64_t sid = -1;
		int fin = 0;
		uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE;

		if (qc->app && app && ngtcp2_conn_get_max_data_left(qc->qc)) {
			nvec = app->writev(qc, &sid, &fin, vec, 16);
			if (nvec < 0) {
				qc->depth--;
				quic_close(qc);
				return;
			}
		}
		if (fin)
			flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
		nw = ngtcp2_conn_writev_stream(qc->qc, &ps.path, &pi, buf,
					       maxudp, &ndata, flags, sid, vec,
					       (size_t)nvec, ts);
		if (nw < 0) {
			if (nw == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
				app->blocked(qc, sid);
				continue;
			}
			if (nw == NGTCP2_ERR_STREAM_SHUT_WR) {
				app->shut_write(qc, sid);
				continue;
			}
			if (nw == NGTCP2_ERR_WRITE_MORE) {
				if (app->written(qc, sid, (size_t)ndata)) {
					qc->depth--;
					quic_close(qc);
					return;
				}
				continue;
			}
			qc->depth--;
			quic_fail(qc, (int)nw);
			return;
		}
		if (ndata >= 0 && sid >= 0 &&
		    app->written(qc, sid, (size_t)ndata)) {
			qc->depth--;
			quic_close(qc);
			return;
		}
		if (nw == 0)
			break;
		quic_send(qc->sock, &ps.path.local, &ps.path.remote, buf,
			  (size_t)nw);
		if (++pkts >= maxpkt)
			break;
	}
	ngtcp2_conn_update_pkt_tx_time(qc->qc, ts);
	qc->depth--;
	quic_arm(qc);
}

/* ---- ngtcp2's callbacks ---------------------------------------------- */

static ngtcp2_conn *quic_get_conn(ngtcp2_crypto_conn_ref *ref)
{
	return ((struct quic_conn *)ref->user_data)->qc;
}

static void quic_rand_cb(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
	(void)ctx;
	if (RAND_bytes(dest, (int)len) != 1)
		memset(dest, 0, len); /* not for secrets: padding, probes */
}

static int quic_new_cid_cb(ngtcp2_conn *conn, ngtcp2_cid *cid, uint8_t *token,
			   size_t cidlen, void *user)
{
	struct quic_conn *qc = user;

	(void)conn;
	(void)cidlen; /* QUIC_SCID_LEN: the server's own length */
	if (quic_cid_new(qc->qs, cid) ||
	    ngtcp2_crypto_generate_stateless_reset_token(
		token, quic_secret, sizeof(quic_secret), cid) ||
	    quic_cid_add(qc, cid->data, cid->datalen))
		return NGTCP2_ERR_CALLBACK_FAILURE;
	return 0;
}

static int quic_remove_cid_cb(ngtcp2_conn *conn, const ngtcp2_cid *cid,
			      void *user)
{
	(void)conn;
	quic_cid_del(user, cid->data, cid->datalen);
	return 0;
}

static int quic_handshake_done_cb(ngtcp2_conn *conn, void *user)
{
	struct quic_conn *qc = user;
	uint8_t tok[NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN];
	const ngtcp2_path *path = ngtcp2_conn_get_path(conn);
	ngtcp2_ssize n;

	if (qc->handshaking) {
		qc->handshaking = false;
		qc->qs->handshaking--;
		quic_count(qc->qs->w->id, QUIC_EV_HANDSHAKE_OK);
		if (gnutls_session_get_flags(qc->tls) &
		    GNUTLS_SFLAGS_EARLY_DATA)
			quic_count(qc->qs->w->id, QUIC_EV_EARLY_ACCEPTED);
	}
	/* a ticket to resume with (GnuTLS sends none by itself here) */
	gnutls_session_ticket_send(qc->tls, 1, 0);
	/* a token to skip the Retry on its next connection */
	n = ngtcp2_crypto_generate_regular_token(
	    tok, quic_secret, sizeof(quic_secret), path->remote.addr,
	    path->remote.addrlen, clk_real_ns());
	if (n > 0)
		ngtcp2_conn_submit_new_token(conn, tok, (size_t)n);
	return 0;
}

static int quic_recv_stream_cb(ngtcp2_conn *conn, uint32_t flags, int64_t id,
			       uint64_t offset, const uint8_t *data, size_t len,
			       void *user, void *suser)
{
	struct quic_conn *qc = user;
	ssize_t n;

	(void)offset;
	(void)suser;
	if (!qc->app)
		return 0;
	n = quic_app(qc->qs)->recv(qc, id, data, len,
				   flags & NGTCP2_STREAM_DATA_FLAG_FIN,
				   flags & NGTCP2_STREAM_DATA_FLAG_EARLY);
	if (n < 0)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	ngtcp2_conn_extend_max_stream_offset(conn, id, (uint64_t)n);
	ngtcp2_conn_extend_max_offset(conn, (uint64_t)n);
	return 0;
}

static int quic_acked_cb(ngtcp2_conn *conn, int64_t id, uint64_t offset,
			 uint64_t len, void *user, void *suser)
{
	struct quic_conn *qc = user;

	(void)conn;
	(void)offset;
	(void)suser;
	if (qc->app && quic_app(qc->qs)->acked(qc, id, len))
		return NGTCP2_ERR_CALLBACK_FAILURE;
	return 0;
}

static int quic_stream_close_cb(ngtcp2_conn *conn, uint32_t flags, int64_t id,
				uint64_t app_err, void *user, void *suser)
{
	struct quic_conn *qc = user;

	(void)conn;
	(void)suser;
	if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET))
		app_err = 0;
	if (qc->app && quic_app(qc->qs)->closed(qc, id, app_err))
		return NGTCP2_ERR_CALLBACK_FAILURE;
	return 0;
}

static int quic_stream_reset_cb(ngtcp2_conn *conn, int64_t id,
				uint64_t final_size, uint64_t app_err,
				void *user, void *suser)
{
	struct quic_conn *qc = user;

	(void)conn;
	(void)final_size;
	(void)app_err;
	(void)suser;
	if (qc->app && quic_app(qc->qs)->reset(qc, id, false))
		return NGTCP2_ERR_CALLBACK_FAILURE;
	return 0;
}

static int quic_stop_sending_cb(ngtcp2_conn *conn, int64_t id, uint64_t app_err,
				void *user, void *suser)
{
	struct quic_conn *qc = user;

	(void)conn;
	(void)app_err;
	(void)suser;
	if (qc->app && quic_app(qc->qs)->reset(qc, id, true))
		return NGTCP2_ERR_CALLBACK_FAILURE;
	return 0;
}

static int quic_max_streams_cb(ngtcp2_conn *conn, uint64_t max, void *user)
{
	struct quic_conn *qc = user;

	(void)conn;
	if (qc->app)
		quic_app(qc->qs)->max_streams(qc, max);
	return 0;
}

static int quic_max_stream_data_cb(ngtcp2_conn *conn, int64_t id, uint64_t max,
				   void *user, void *suser)
{
	struct quic_conn *qc = user;

	(void)conn;
	(void)max;
	(void)suser;
	if (qc->app && quic_app(qc->qs)->unblock(qc, id))
		return NGTCP2_ERR_CALLBACK_FAILURE;
	return 0;
}

/* the 1-RTT keys are in, before any request's bytes: the application
 * starts (HTTP/3: its control and QPACK streams) */
static int quic_tx_key_cb(ngtcp2_conn *conn, ngtcp2_crypto_level level,
			  void *user)
{
	struct quic_conn *qc = user;
	const struct quic_app_ops *app = quic_app(qc->qs);

	(void)conn;
	if (level != NGTCP2_CRYPTO_LEVEL_APPLICATION || qc->started || !app)
		return 0;
	qc->started = true;
	return app->start(qc) ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

/* ---- TLS -------------------------------------------------------------- */

/* the ClientHello is in: "h3" or nothing, the certificates of its name */
static int quic_hello_cb(gnutls_session_t s)
{
	ngtcp2_crypto_conn_ref *ref = gnutls_session_get_ptr(s);
	struct quic_conn *qc = ref->user_data;
	gnutls_certificate_credentials_t cred;
	gnutls_datum_t alpn;
	char name[256];
	size_t len = sizeof(name);
	unsigned type;

	if (gnutls_alpn_get_selected_protocol(s, &alpn) < 0 || alpn.size != 2 ||
	    memcmp(alpn.data, "h3", 2) != 0)
		return GNUTLS_E_NO_APPLICATION_PROTOCOL;
	if (gnutls_server_name_get(s, name, &len, &type, 0) < 0 ||
	    type != GNUTLS_NAME_DNS)
		name[0] = '\0';
	cred = tls_store_gnutls(qc->store, name);
	if (!cred)
		return GNUTLS_E_INSUFFICIENT_CREDENTIALS;
	return gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, cred);
}

static int quic_tls_new(struct quic_conn *qc)
{
	gnutls_datum_t alpn = {(unsigned char *)"h3", 2};
	bool early = quic_early_ok(qc->qs->w);

	if (gnutls_init(&qc->tls, GNUTLS_SERVER | GNUTLS_NO_AUTO_SEND_TICKET |
				      GNUTLS_NO_END_OF_EARLY_DATA |
				      (early ? GNUTLS_ENABLE_EARLY_DATA : 0)) <
	    0)
		return -1;
	if (early) {
		/* QUIC's tickets say 0xffffffff (RFC 9001, 4.6.1) */
		gnutls_record_set_max_early_data_size(qc->tls, 0xffffffffU);
		gnutls_anti_replay_enable(qc->tls, qc->qs->replay);
	}
	if (gnutls_priority_set_direct(qc->tls, QUIC_PRIORITY, NULL) < 0 ||
	    gnutls_session_ticket_enable_server(qc->tls, &quic_ticket_key) <
		0 ||
	    ngtcp2_crypto_gnutls_configure_server_session(qc->tls) != 0)
		return -1;
	/* until the ClientHello names one: the default certificate's */
	if (gnutls_credentials_set(qc->tls, GNUTLS_CRD_CERTIFICATE,
				   tls_store_gnutls(qc->store, NULL)) < 0)
		return -1;
	gnutls_handshake_set_post_client_hello_function(qc->tls, quic_hello_cb);
	if (gnutls_alpn_set_protocols(qc->tls, &alpn, 1,
				      GNUTLS_ALPN_MANDATORY |
					  GNUTLS_ALPN_SERVER_PRECEDENCE) < 0)
		return -1;
	qc->ref.get_conn = quic_get_conn;
	qc->ref.user_data = qc;
	gnutls_session_set_ptr(qc->tls, &qc->ref);
	ngtcp2_conn_set_tls_native_handle(qc->qc, qc->tls);
	return 0;
}

/* ---- new connections ------------------------------------------------- */

uint64_t quic_idle_ms(const struct worker *w)
{
	uint64_t ms = w->set.timeouts.idle_keepalive_ms;

	return ms ? ms : QUIC_IDLE_MS_DEFAULT;
}

static struct quic_conn *quic_conn_new(struct quic_sock *s,
				       const ngtcp2_path *path,
				       const ngtcp2_pkt_hd *hd,
				       const ngtcp2_cid *odcid,
				       const ngtcp2_vec *token)
{
	static const ngtcp2_callbacks cb = {
	    .recv_client_initial = ngtcp2_crypto_recv_client_initial_cb,
	    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
	    .handshake_completed = quic_handshake_done_cb,
	    .encrypt = ngtcp2_crypto_encrypt_cb,
	    .decrypt = ngtcp2_crypto_decrypt_cb,
	    .hp_mask = ngtcp2_crypto_hp_mask_cb,
	    .recv_stream_data = quic_recv_stream_cb,
	    .acked_stream_data_offset = quic_acked_cb,
	    .stream_close = quic_stream_close_cb,
	    .rand = quic_rand_cb,
	    .get_new_connection_id = quic_new_cid_cb,
	    .remove_connection_id = quic_remove_cid_cb,
	    .update_key = ngtcp2_crypto_update_key_cb,
	    .stream_reset = quic_stream_reset_cb,
	    .extend_max_remote_streams_bidi = quic_max_streams_cb,
	    .extend_max_stream_data = quic_max_stream_data_cb,
	    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
	    .delete_crypto_cipher_ctx =
		ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
	    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
	    .stream_stop_sending = quic_stop_sending_cb,
	    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
	    .recv_tx_key = quic_tx_key_cb,
	};
	struct quic_set *qs = s->qs;
	struct worker *w = qs->w;
	struct event_base *base = w->base;
	ngtcp2_settings st;
	ngtcp2_transport_params tp;
	ngtcp2_cid scid;
	struct quic_conn *qc;
	const struct sockaddr *sa = path->remote.addr;

	if (quic_cid_new(qs, &scid))
		return NULL;
	qc = calloc(1, sizeof(*qc));
	if (!qc)
		return NULL;
	qc->qs = qs;
	qc->sock = s;
	TAILQ_INSERT_TAIL(&qs->conns, qc, link);
	worker_lag_wake(qs->w, -1);
	atomic_fetch_add(&w->sh->connections, 1);
	quic_count(qs->w->id, QUIC_EV_CONN_OPEN);
	qc->handshaking = true;
	qs->handshaking++;
	ngtcp2_connection_close_error_default(&qc->err);
	memcpy(&qc->peer, sa, path->remote.addrlen);
	if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6,
			  &((const struct sockaddr_in6 *)sa)->sin6_addr,
			  qc->client_ip, sizeof(qc->client_ip));
	else
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr,
			  qc->client_ip, sizeof(qc->client_ip));
	if (cidr_parse_addr(qc->client_ip, &qc->peer_cidr, NULL))
		memset(&qc->peer_cidr, 0, sizeof(qc->peer_cidr));
	qc->timer = evtimer_new(base, quic_timer_cb, qc);
	qc->soon = event_new(base, -1, 0, quic_soon_cb, qc);
	qc->store = tls_holder_get(&w->sh->tls);
	if (!qc->timer || !qc->soon || !qc->store ||
	    !tls_store_gnutls(qc->store, NULL))
		goto fail;
	ngtcp2_settings_default(&st);
	st.initial_ts = clk_now_ns();
	st.token = *token;
	st.max_window = QUIC_MAX_WINDOW;
	st.max_stream_window = QUIC_MAX_STREAM_WINDOW;
	st.max_tx_udp_payload_size = QUIC_MAX_UDP_PAYLOAD;
	ngtcp2_transport_params_default(&tp);
	tp.initial_max_stream_data_bidi_local = QUIC_STREAM_WINDOW;
	tp.initial_max_stream_data_bidi_remote = QUIC_STREAM_WINDOW;
	tp.initial_max_stream_data_uni = QUIC_STREAM_WINDOW;
	tp.initial_max_data = QUIC_CONN_WINDOW;
	tp.initial_max_streams_bidi = w->set.http2.max_concurrent_streams;
	tp.initial_max_streams_uni = 3;
	tp.max_idle_timeout = quic_idle_ms(w) * NGTCP2_MILLISECONDS;
	tp.active_connection_id_limit = 7;
	tp.stateless_reset_token_present = 1;
	if (ngtcp2_crypto_generate_stateless_reset_token(
		tp.stateless_reset_token, quic_secret, sizeof(quic_secret),
		&scid))
		goto fail;
	if (odcid) { /* after a Retry */
		tp.original_dcid = *odcid;
		tp.retry_scid = hd->dcid;
		tp.retry_scid_present = 1;
	} else {
		tp.original_dcid = hd->dcid;
	}
	if (ngtcp2_conn_server_new(&qc->qc, &hd->scid, &scid, path, hd->version,
				   &cb, &st, &tp, NULL, qc) != 0)
		goto fail;
	if (quic_tls_new(qc))
		goto fail;
	if (quic_cid_add(qc, scid.data, scid.datalen) ||
	    quic_cid_add(qc, hd->dcid.data, hd->dcid.datalen))
		goto fail;
	return qc;
fail:
	quic_conn_free(qc);
	return NULL;
}

/* ---- stateless answers ----------------------------------------------- */

static void quic_retry(struct quic_sock *s, const ngtcp2_path *path,
		       const ngtcp2_pkt_hd *hd, size_t pktlen)
{
	uint8_t token[NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN];
	uint8_t buf[QUIC_MAX_UDP_PAYLOAD];
	ngtcp2_cid scid;
	ngtcp2_ssize tl, n;
	size_t max = pktlen * 3 < sizeof(buf) ? pktlen * 3 : sizeof(buf);

	if (quic_cid_new(s->qs, &scid))
		return;
	tl = ngtcp2_crypto_generate_retry_token(
	    token, quic_secret, sizeof(quic_secret), hd->version,
	    path->remote.addr, path->remote.addrlen, &scid, &hd->dcid,
	    clk_real_ns());
	if (tl < 0)
		return;
	n = ngtcp2_crypto_write_retry(buf, max, hd->version, &hd->scid, &scid,
				      &hd->dcid, token, (size_t)tl);
	if (n > 0) {
		quic_send(s, &path->local, &path->remote, buf, (size_t)n);
		quic_count(s->qs->w->id, QUIC_EV_RETRY);
	}
}

static void quic_invalid_token(struct quic_sock *s, const ngtcp2_path *path,
			       const ngtcp2_pkt_hd *hd)
{
	uint8_t buf[QUIC_MAX_UDP_PAYLOAD];
	ngtcp2_ssize n = ngtcp2_crypto_write_connection_close(
	    buf, sizeof(buf), hd->version, &hd->scid, &hd->dcid,
	    NGTCP2_INVALID_TOKEN, NULL, 0);

	if (n > 0)
		quic_send(s, &path->local, &path->remote, buf, (size_t)n);
}

static void quic_version_neg(struct quic_sock *s, const ngtcp2_path *path,
			     const ngtcp2_version_cid *vc)
{
	static const uint32_t sv[] = {NGTCP2_PROTO_VER_V1, 0x1a2a3a4a};
	uint8_t buf[QUIC_MAX_UDP_PAYLOAD], r;
	ngtcp2_ssize n;

	RAND_bytes(&r, 1);
	n = ngtcp2_pkt_write_version_negotiation(buf, sizeof(buf), r, vc->scid,
						 vc->scidlen, vc->dcid,
						 vc->dcidlen, sv, 2);
	if (n > 0) {
		quic_send(s, &path->local, &path->remote, buf, (size_t)n);
		quic_count(s->qs->w->id, QUIC_EV_VERSION_NEG);
	}
}

/* a short packet for a connection this worker does not know (another
 * edged's, one that ended): a stateless reset, smaller than what came */
static void quic_stateless_reset(struct quic_sock *s, const ngtcp2_path *path,
				 const uint8_t *dcid, size_t dcidlen,
				 size_t pktlen)
{
	uint8_t token[NGTCP2_STATELESS_RESET_TOKENLEN], rnd[64], buf[128];
	size_t rl;
	ngtcp2_cid cid;
	ngtcp2_ssize n;

	if (pktlen < 43)
		return; /* no loop of resets between two servers */
	ngtcp2_cid_init(&cid, dcid, dcidlen);
	if (ngtcp2_crypto_generate_stateless_reset_token(
		token, quic_secret, sizeof(quic_secret), &cid))
		return;
	rl = pktlen - 1 - NGTCP2_STATELESS_RESET_TOKENLEN;
	if (rl > sizeof(rnd))
		rl = sizeof(rnd);
	RAND_bytes(rnd, (int)rl);
	n = ngtcp2_pkt_write_stateless_reset(buf, sizeof(buf), token, rnd, rl);
	if (n > 0) {
		quic_send(s, &path->local, &path->remote, buf, (size_t)n);
		quic_count(s->qs->w->id, QUIC_EV_RESET);
	}
}

/* ---- datagrams in ---------------------------------------------------- */

static void quic_datagram(struct quic_sock *s, ngtcp2_path *path, uint8_t *p,
			  size_t len)
{
	struct quic_set *qs = s->qs;
	struct worker *w = qs->w;
	ngtcp2_version_cid vc;
	struct quic_conn *qc;
	ngtcp2_pkt_info pi = {0};
	int rv;

	rv = ngtcp2_pkt_decode_version_cid(&vc, p, len, QUIC_SCID_LEN);
	if (rv == NGTCP2_ERR_VERSION_NEGOTIATION) {
		quic_version_neg(s, path, &vc);
		return;
	}
	if (rv) {
		quic_count_drop(QUIC_DROP_UNDECODABLE);
		return;
	}
	qc = quic_cid_find(qs, vc.dcid, vc.dcidlen);
	if (!qc) {
		ngtcp2_pkt_hd hd;
		ngtcp2_cid odcid, *po = NULL;
		ngtcp2_vec token = {NULL, 0};
		unsigned long cap =
		    (unsigned long)w->set.limits.max_connections;

		rv = ngtcp2_accept(&hd, p, len);
		if (rv == NGTCP2_ERR_RETRY) { /* 0-RTT before its Initial */
			quic_retry(s, path, &hd, len);
			return;
		}
		if (rv) {
			quic_count_drop(QUIC_DROP_UNKNOWN);
			if (vc.version == 0 && vc.dcidlen == QUIC_SCID_LEN)
				quic_stateless_reset(s, path, vc.dcid,
						     vc.dcidlen, len);
			return;
		}
		if (w->draining || atomic_load(&w->sh->connections) >= cap) {
			quic_count_drop(QUIC_DROP_REFUSED);
			quic_invalid_token(s, path, &hd); /* refused, closed */
			return;
		}
		if (hd.token.len &&
		    hd.token.base[0] == NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY) {
			if (ngtcp2_crypto_verify_retry_token(
				&odcid, hd.token.base, hd.token.len,
				quic_secret, sizeof(quic_secret), hd.version,
				path->remote.addr, path->remote.addrlen,
				&hd.dcid, QUIC_RETRY_TOKEN_NS, clk_real_ns())) {
				quic_count_drop(QUIC_DROP_BAD_TOKEN);
				quic_invalid_token(s, path, &hd);
				return;
			}
			po = &odcid;
			token = hd.token;
		} else if (hd.token.len &&
			   hd.token.base[0] ==
			       NGTCP2_CRYPTO_TOKEN_MAGIC_REGULAR &&
			   ngtcp2_crypto_verify_regular_token(
			       hd.token.base, hd.token.len, quic_secret,
			       sizeof(quic_secret), path->remote.addr,
			       path->remote.addrlen, QUIC_REGULAR_TOKEN_NS,
			       clk_real_ns()) == 0) {
			token = hd.token;
		} else if (qs->handshaking >= QUIC_RETRY_HANDSHAKES) {
			quic_retry(s, path, &hd, len);
			return;
		}
		qc = quic_conn_new(s, path, &hd, po, &token);
		if (!qc)
			return;
	}
	if (qc->dead || qc->state == QC_DRAINING)
		return;
	if (qc->state == QC_CLOSING) {
		/* CONNECTION_CLOSE again to the 1st, 2nd, 4th, 8th, ...
		 * datagram: a flood to it reflects next to nothing */
		qc->close_rx++;
		if (qc->closelen && (qc->close_rx & (qc->close_rx - 1)) == 0)
			quic_send(s, &path->local, &path->remote, qc->closebuf,
				  qc->closelen);
		return;
	}
	qc->sock = s;
	qc->depth++;
	rv = ngtcp2_conn_read_pkt(qc->qc, path, &pi, p, len, clk_now_ns());
	qc->depth--;
	if (rv) {
		quic_fail(qc, rv);
		return;
	}
	quic_write(qc);
}

static void quic_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct quic_sock *s = arg;
	struct quic_set *qs = s->qs;

	(void)fd;
	(void)what;
	for (int i = 0; i < QUIC_RECV_BATCH; i++) {
		struct sockaddr_storage from, local = s->local;
		union {
			char v4[CMSG_SPACE(sizeof(struct in_pktinfo))];
			char v6[CMSG_SPACE(sizeof(struct in6_pktinfo))];
		} cbuf;
		struct iovec iov = {qs->buf, sizeof(qs->buf)};
		struct msghdr m = {.msg_name = &from,
				   .msg_namelen = sizeof(from),
				   .msg_iov = &iov,
				   .msg_iovlen = 1,
				   .msg_control = &cbuf,
				   .msg_controllen = sizeof(cbuf)};
		ngtcp2_path path;
		ssize_t n = recvmsg(s->fd, &m, MSG_DONTWAIT);

		if (n < 0)
			return;
		if (n == 0 || (m.msg_flags & MSG_TRUNC))
			continue;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); s->wildcard && cm;
		     cm = CMSG_NXTHDR(&m, cm)) {
			if (cm->cmsg_level == IPPROTO_IP &&
			    cm->cmsg_type == IP_PKTINFO) {
				struct in_pktinfo pi;

				memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
				((struct sockaddr_in *)&local)->sin_addr =
				    pi.ipi_addr;
			} else if (cm->cmsg_level == IPPROTO_IPV6 &&
				   cm->cmsg_type == IPV6_PKTINFO) {
				struct in6_pktinfo pi;

				memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
				((struct sockaddr_in6 *)&local)->sin6_addr =
				    pi.ipi6_addr;
			}
		}
		path.local.addr = (ngtcp2_sockaddr *)&local;
		path.local.addrlen = s->local_len;
		path.remote.addr = (ngtcp2_sockaddr *)&from;
		path.remote.addrlen = m.msg_namelen;
		path.user_data = s;
		quic_datagram(s, &path, qs->buf, (size_t)n);
	}
}

/* ---- the service ------------------------------------------------------ */

static int quic_bind(struct quic_sock *s, const struct config_addr *a,
		     struct errbuf *err)
{
	int one = 1, fam = a->ss.ss_family;

	s->fd = socket(fam, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->fd < 0)
		goto fail;
	if (setsockopt(s->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)))
		goto fail;
	if (fam == AF_INET6 &&
	    setsockopt(s->fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)))
		goto fail;
	if (fam == AF_INET)
		s->wildcard =
		    ((const struct sockaddr_in *)&a->ss)->sin_addr.s_addr ==
		    htonl(INADDR_ANY);
	else
		s->wildcard = IN6_IS_ADDR_UNSPECIFIED(
		    &((const struct sockaddr_in6 *)&a->ss)->sin6_addr);
	if (s->wildcard &&
	    (fam == AF_INET
		 ? setsockopt(s->fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one))
		 : setsockopt(s->fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one,
			      sizeof(one))))
		goto fail;
	if (bind(s->fd, (const struct sockaddr *)&a->ss, a->len))
		goto fail;
	memcpy(&s->local, &a->ss, a->len);
	s->local_len = a->len;
	return 0;
fail:
	errbuf_set(err, "tls.quic_listen %s: %s", a->text, strerror(errno));
	return -errno;
}

/* An upgrade's new edged: its steering, activated once the running
 * edged has retired (quic_take_over). */
static bool quic_defer;
static struct quic_steer *quic_pending[CONFIG_LISTEN_MAX];
static char quic_pending_addr[CONFIG_LISTEN_MAX][128]; /* for messages */

void quic_upgrading(void)
{
	quic_defer = true;
}

void quic_take_over(void)
{
	struct errbuf e;

	for (size_t i = 0; i < CONFIG_LISTEN_MAX; i++) {
		if (!quic_pending[i])
			continue;
		errbuf_clear(&e);
		if (quic_steer_activate(quic_pending[i], &e))
			log_warnx("upgrade: tls.quic_listen %s: new QUIC "
				  "connections stay with the running edged's "
				  "steering (%s)",
				  quic_pending_addr[i], e.msg);
		quic_steer_free(quic_pending[i]);
		quic_pending[i] = NULL;
	}
}

/* Steer the sockets of quic_listen[i] (every worker's bound): on the
 * running edged's maps in an upgrade (its connections stay its own), on
 * new ones otherwise or when those are refused; the maps noted for a
 * successor. Said when there is no steering. An upgrade's new edged
 * changes nothing for the running one until quic_take_over. */
static void quic_steer(const struct worker *w, size_t i)
{
	const struct config_addr *a = &w->sh->cfg->tls.quic_listen[i];
	unsigned gen = quic_steer_gen();
	struct quic_steer *st;
	struct errbuf e;
	uint64_t id = 0;
	int sm = sockreg_take_id(SOCKREG_QUIC_SOCKS, a->text, &id);
	int cm = sockreg_take(SOCKREG_QUIC_CFG, a->text), rc = -1;

	errbuf_clear(&e);
	if (sm >= 0 && cm >= 0) {
		rc = quic_steer_attach(quic_group[i], w->sh->cfg->workers, gen,
				       sm, cm, !quic_defer, &st, &e);
		if (rc == 0)
			log_note("upgrade: tls.quic_listen %s: the running "
				 "edged's QUIC connections stay its own",
				 a->text);
		else
			log_warnx("upgrade: tls.quic_listen %s: the running "
				  "edged's steering cannot be shared (%s): its "
				  "QUIC connections end",
				  a->text, e.msg);
	}
	if (sm >= 0)
		close(sm);
	if (cm >= 0)
		close(cm);
	if (rc) {
		errbuf_clear(&e);
		rc = quic_steer_attach(quic_group[i], w->sh->cfg->workers, gen,
				       -1, -1, !quic_defer, &st, &e);
	}
	if (rc) {
		log_warnx("tls.quic_listen %s: no connection-ID steering (%s): "
			  "datagrams go to workers by the kernel's address "
			  "hash, so a client that changes address may lose "
			  "its connection",
			  a->text, e.msg);
		return;
	}
	quic_steer_maps(st, &sm, &cm);
	if (sockreg_add(SOCKREG_QUIC_SOCKS, a->text, gen, sm) ||
	    sockreg_add(SOCKREG_QUIC_CFG, a->text, 0, cm))
		log_warnx("upgrade: tls.quic_listen %s: its steering cannot "
			  "be noted for a successor: its QUIC connections "
			  "would end at an upgrade",
			  a->text);
	if (quic_defer) {
		quic_pending[i] = st;
		snprintf(quic_pending_addr[i], sizeof(quic_pending_addr[i]),
			 "%s", a->text);
		return;
	}
	quic_steer_free(st);
}

static int quic_init(struct worker *w, struct errbuf *err)
{
	const struct config_tls *t = &w->sh->cfg->tls;
	struct quic_set *qs;
	int rc;

	if (t->n_quic_listen == 0 || !w->sh->quic_app)
		return 0;
	pthread_once(&quic_once, quic_global_init);
	if (quic_once_rc) {
		errbuf_set(err, "quic: no random bytes for its secrets");
		return -EIO;
	}
	qs = calloc(1, sizeof(*qs));
	if (!qs)
		return -ENOMEM;
	w->quic = qs;
	qs->w = w;
	TAILQ_INIT(&qs->conns);
	qs->nbuckets = 64;
	qs->buckets = calloc(qs->nbuckets, sizeof(*qs->buckets));
	qs->socks = calloc(t->n_quic_listen, sizeof(*qs->socks));
	if (gnutls_anti_replay_init(&qs->replay) < 0)
		qs->replay = NULL;
	else {
		gnutls_anti_replay_set_window(qs->replay,
					      QUIC_REPLAY_WINDOW_MS);
		gnutls_anti_replay_set_add_function(qs->replay, quic_seen_add);
		gnutls_anti_replay_set_ptr(qs->replay, &w->id);
	}
	if (!qs->buckets || !qs->socks || !qs->replay)
		return -ENOMEM;
	for (size_t i = 0; i < t->n_quic_listen; i++) {
		struct quic_sock *s = &qs->socks[i];

		s->qs = qs;
		s->fd = -1;
		qs->n++;
		rc = quic_bind(s, &t->quic_listen[i], err);
		if (rc)
			return rc;
		s->ev = event_new(w->base, s->fd, EV_READ | EV_PERSIST,
				  quic_read_cb, s);
		if (!s->ev || event_add(s->ev, NULL))
			return -ENOMEM;
		quic_group[i][w->id] = s->fd;
	}
	/* the last worker: every socket of each address is bound */
	if (w->id + 1 == w->sh->cfg->workers)
		for (size_t i = 0; i < t->n_quic_listen; i++)
			quic_steer(w, i);
	return 0;
}

/* a drain: the application's graceful end on every connection (its
 * first step: the GOAWAY notice; quic_tick goes on); no new connection is
 * taken */
static void quic_drain(struct worker *w)
{
	struct quic_set *qs = w->quic;
	const struct quic_app_ops *app;
	struct quic_conn *qc, *next;

	if (!qs)
		return;
	app = quic_app(qs);
	for (qc = TAILQ_FIRST(&qs->conns); qc; qc = next) {
		next = TAILQ_NEXT(qc, link);
		if (qc->app && app->drain)
			app->drain(qc);
		quic_conn_flush_soon(qc);
	}
}

/* while draining: a connection without a request in flight closes (its
 * GOAWAY sent first), the others when their last request ends */
static void quic_idle_close(struct quic_set *qs)
{
	const struct quic_app_ops *app = quic_app(qs);
	struct quic_conn *qc, *next;

	for (qc = TAILQ_FIRST(&qs->conns); qc; qc = next) {
		next = TAILQ_NEXT(qc, link);
		if (qc->dead || qc->state != QC_OPEN ||
		    (qc->app && app->busy && app->busy(qc)))
			continue;
		quic_write(qc); /* the GOAWAY */
		if (qc->dead || qc->state != QC_OPEN)
			continue;
		quic_conn_app_error(qc, 0x100); /* H3_NO_ERROR */
		quic_close(qc);
	}
}

/* once a second: a draining worker ends its connections' shutdown (the
 * application's second drain step) and closes what has gone idle */
static bool quic_tick(struct worker *w)
{
	const struct quic_app_ops *app;
	struct quic_conn *qc;

	if (!w->quic || !w->draining)
		return false;
	app = quic_app(w->quic);
	TAILQ_FOREACH(qc, &w->quic->conns, link)
	if (!qc->dead && qc->app && app->drain) {
		app->drain(qc);
		quic_conn_flush_soon(qc);
	}
	quic_idle_close(w->quic);
	return false;
}

/* every connection not yet freed: a draining worker's loop runs until
 * each has been closed (quic_tick closes the idle ones) and its closing
 * period is over, so no client is left without its CONNECTION_CLOSE
 * while another worker keeps the process draining */
static size_t quic_busy(const struct worker *w)
{
	const struct quic_set *qs = w->quic;
	const struct quic_conn *qc;
	size_t n = 0;

	if (!qs)
		return 0;
	TAILQ_FOREACH(qc, &qs->conns, link)
	if (!qc->dead)
		n++;
	return n;
}

static void quic_free(struct worker *w)
{
	struct quic_set *qs = w->quic;
	struct quic_conn *qc;

	/* a new edged that stepped back: its steering never activated */
	if (w->id + 1 == w->sh->cfg->workers)
		for (size_t i = 0; i < CONFIG_LISTEN_MAX; i++) {
			quic_steer_free(quic_pending[i]);
			quic_pending[i] = NULL;
		}
	if (!qs)
		return;
	/* a CONNECTION_CLOSE to each, so clients need not wait for their
	 * idle timeout */
	TAILQ_FOREACH(qc, &qs->conns, link)
	if (!qc->dead && qc->state == QC_OPEN && qc->qc) {
		quic_conn_app_error(qc, 0x100);
		quic_close(qc);
	}
	while (!TAILQ_EMPTY(&qs->conns))
		quic_conn_free(TAILQ_FIRST(&qs->conns));
	for (size_t i = 0; i < qs->n; i++) {
		if (qs->socks[i].ev)
			event_free(qs->socks[i].ev);
		if (qs->socks[i].fd >= 0)
			close(qs->socks[i].fd);
	}
	free(qs->socks);
	free(qs->buckets);
	if (qs->replay)
		gnutls_anti_replay_deinit(qs->replay);
	free(qs);
	w->quic = NULL;
}

const struct worker_service quic_service = {
    .name = "quic",
    .init = quic_init,
    .drain = quic_drain,
    .free = quic_free,
    .busy = quic_busy,
    .tick = quic_tick,
};
