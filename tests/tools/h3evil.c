// SPDX-License-Identifier: BSD-2-Clause
/*
 * h3evil.c - an HTTP/3 client that misbehaves on purpose, for edged's
 * defences against clients that hold a connection's resources
 * (tests/integration/test_edged_http3_hostile.sh, docs/testing.md). One
 * connection; ngtcp2 0.12 with GnuTLS, nghttp3 0.8 (Debian 12's).
 *
 *   h3evil --port PORT [--host 127.0.0.1] [--sni NAME] [--path PATH]
 *          [-n K] [--hold SECONDS] [--timeout SECONDS] MODE
 *
 * MODE, none: K GETs of PATH (default 1), each answered and read whole.
 *   --no-ack-after BYTES   one GET; once BYTES of its body are in, the
 *                          client acknowledges nothing more: datagrams
 *                          longer than 256 bytes (those with stream data)
 *                          are counted and dropped unread, shorter ones
 *                          (ACKs, a CONNECTION_CLOSE) still read; PINGs
 *                          every 500 ms keep the connection from its
 *                          idle timeout. With --delay MS, every datagram
 *                          is read MS after it came (a round trip of MS:
 *                          the server's congestion window grows wide)
 *   --reset-stream N       K GETs (-n); stream number N (0 the first) is
 *                          reset (RESET_STREAM and STOP_SENDING,
 *                          H3_REQUEST_CANCELLED) --reset-after MS (200)
 *                          after its request was sent, its path
 *                          --reset-path (PATH); the others read whole
 *   --partial-headers      a HEADERS frame announcing 100 bytes of which
 *                          5 are sent (raw bytes on a request stream)
 *   --qpack-blocked        a whole HEADERS frame, with FIN, whose field
 *                          line names a dynamic table entry the encoder
 *                          stream never inserts
 *   --slow-body LEN        a POST with content-length LEN of which
 *                          --body-sent BYTES (1000) are sent
 * --no-ack-after, --partial-headers, --qpack-blocked and --slow-body
 * hold: until the server closes the connection (its streams answered or
 * reset, the connection still held: an idle one must be closed too), or
 * --hold SECONDS (10) from the start of the misdeed, answering all else
 * as a client does and sending PINGs every 500 ms. --timeout (30) bounds
 * the whole run. No certificate is checked.
 *
 * Prints one line each: "handshake ok", "cert_sha256=HEX" (the server's
 * certificate's, DER), "status=200 stream=0",
 * "done stream=0 body_bytes=N", "reset stream=4" (the client's),
 * "stream_reset stream=0 code=0x10c after=2.1s" (the server's
 * RESET_STREAM), "withholding body_bytes=N", "closed_by_peer after=2.5s
 * error=0x100 how=close|stateless_reset" or "still_open after=10.0s";
 * then "summary streams=K ok=N body_bytes=N withheld_bytes=N
 * withheld_pkts=N closed_by_peer=0|1". "after" counts from the misdeed's
 * start. Exit 0; 1 on a failure to connect or a transport error; 2 on a
 * usage error; 3 when --timeout ended it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#define EVIL_MAX_STREAMS 64
/* withholding acknowledgements: datagrams up to this long still reach
 * ngtcp2 (ACK-only packets, PINGs, a CONNECTION_CLOSE); longer ones carry
 * stream data and are dropped unread */
#define EVIL_SMALL_PKT 256
#define EVIL_KEEPALIVE_NS (500ULL * NGTCP2_MILLISECONDS)
#define EVIL_H3_NO_ERROR 0x100
#define EVIL_H3_CANCELLED 0x10c
#define EVIL_BODY_MAX 65536

/* a datagram held back for --delay */
struct evil_pkt {
	struct evil_pkt *next;
	uint64_t due; /* ns */
	size_t len;
	uint8_t data[];
};

enum evil_mode {
	EVIL_GET,
	EVIL_NOACK,
	EVIL_RESET,
	EVIL_PARTIAL,
	EVIL_QPACK,
	EVIL_SLOWBODY,
};

struct evil_stream {
	int64_t id;
	int status;
	uint64_t body;
	bool raw, raw_fin, raw_blocked, done, reset_by_us, reset_by_peer;
	const uint8_t *raw_data;
	size_t raw_len, raw_off;
	uint64_t reset_at; /* ns: when the client resets it, 0 never */
	bool body_given;
};

struct evil {
	enum evil_mode mode;
	const char *host, *port, *sni, *path, *reset_path;
	unsigned nreq, reset_idx;
	uint64_t noack_after, reset_after_ms, slow_len, slow_sent, delay_ns;
	double hold, timeout;

	int fd;
	struct sockaddr_storage local, remote;
	socklen_t locallen, remotelen;
	ngtcp2_conn *qc;
	nghttp3_conn *h3;
	gnutls_session_t tls;
	gnutls_certificate_credentials_t cred;
	ngtcp2_crypto_conn_ref ref;

	struct evil_stream st[EVIL_MAX_STREAMS];
	unsigned nst;
	bool started, closed_by_peer, stateless_reset, idle_ignored;
	bool withholding;
	uint64_t body_total, withheld_bytes, withheld_pkts;
	uint64_t t0, t_evil; /* ns: start; the misdeed's start (0: not yet) */
	struct evil_pkt *q, *q_tail; /* datagrams held back for --delay */
};

static struct evil E;
static uint8_t evil_body[EVIL_BODY_MAX];

static uint64_t evil_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NGTCP2_SECONDS + (uint64_t)ts.tv_nsec;
}

/* seconds since the misdeed began (since the start when it has not) */
static double evil_after(void)
{
	uint64_t from = E.t_evil ? E.t_evil : E.t0;

	return (double)(evil_now() - from) / 1e9;
}

static void evil_misdeed(void)
{
	if (!E.t_evil)
		E.t_evil = evil_now();
}

static bool evil_holding(void)
{
	return E.mode == EVIL_NOACK || E.mode == EVIL_PARTIAL ||
	       E.mode == EVIL_QPACK || E.mode == EVIL_SLOWBODY;
}

static struct evil_stream *evil_find(int64_t id)
{
	for (unsigned i = 0; i < E.nst; i++)
		if (E.st[i].id == id)
			return &E.st[i];
	return NULL;
}

static void evil_consume(int64_t id, size_t n)
{
	ngtcp2_conn_extend_max_stream_offset(E.qc, id, n);
	ngtcp2_conn_extend_max_offset(E.qc, n);
}

/* ---- nghttp3 ---------------------------------------------------------- */

static int evil_h3_recv_header(nghttp3_conn *conn, int64_t id, int32_t token,
			       nghttp3_rcbuf *name, nghttp3_rcbuf *value,
			       uint8_t flags, void *user, void *suser)
{
	struct evil_stream *s = suser;
	nghttp3_vec v = nghttp3_rcbuf_get_buf(value);
	char b[8];

	(void)conn;
	(void)name;
	(void)flags;
	(void)user;
	if (!s || token != NGHTTP3_QPACK_TOKEN__STATUS || v.len >= sizeof(b))
		return 0;
	memcpy(b, v.base, v.len);
	b[v.len] = '\0';
	s->status = atoi(b);
	printf("status=%d stream=%" PRId64 "\n", s->status, id);
	return 0;
}

static int evil_h3_recv_data(nghttp3_conn *conn, int64_t id,
			     const uint8_t *data, size_t len, void *user,
			     void *suser)
{
	struct evil_stream *s = suser;

	(void)conn;
	(void)data;
	(void)user;
	evil_consume(id, len);
	if (!s)
		return 0;
	s->body += len;
	E.body_total += len;
	if (E.mode == EVIL_NOACK && !E.withholding &&
	    E.body_total >= E.noack_after) {
		E.withholding = true;
		evil_misdeed();
		printf("withholding body_bytes=%" PRIu64 "\n", E.body_total);
	}
	return 0;
}

static int evil_h3_deferred_consume(nghttp3_conn *conn, int64_t id,
				    size_t consumed, void *user, void *suser)
{
	(void)conn;
	(void)user;
	(void)suser;
	evil_consume(id, consumed);
	return 0;
}

static int evil_h3_end_stream(nghttp3_conn *conn, int64_t id, void *user,
			      void *suser)
{
	struct evil_stream *s = suser;

	(void)conn;
	(void)user;
	if (!s || s->done)
		return 0;
	s->done = true;
	printf("done stream=%" PRId64 " body_bytes=%" PRIu64 "\n", id, s->body);
	return 0;
}

static int evil_h3_stop_sending(nghttp3_conn *conn, int64_t id,
				uint64_t app_err, void *user, void *suser)
{
	(void)conn;
	(void)user;
	(void)suser;
	ngtcp2_conn_shutdown_stream_read(E.qc, id, app_err);
	return 0;
}

static int evil_h3_reset_stream(nghttp3_conn *conn, int64_t id,
				uint64_t app_err, void *user, void *suser)
{
	(void)conn;
	(void)user;
	(void)suser;
	ngtcp2_conn_shutdown_stream_write(E.qc, id, app_err);
	return 0;
}

/* the slow body: --body-sent bytes once, then never more */
static nghttp3_ssize evil_h3_read_body(nghttp3_conn *conn, int64_t id,
				       nghttp3_vec *vec, size_t veccnt,
				       uint32_t *flags, void *user, void *suser)
{
	struct evil_stream *s = suser;

	(void)conn;
	(void)id;
	(void)flags;
	(void)user;
	if (!s || veccnt == 0 || s->body_given)
		return NGHTTP3_ERR_WOULDBLOCK;
	s->body_given = true;
	vec[0].base = evil_body;
	vec[0].len = (size_t)E.slow_sent;
	evil_misdeed();
	return 1;
}

static int evil_h3_start(void)
{
	static const nghttp3_callbacks cb = {
	    .recv_data = evil_h3_recv_data,
	    .deferred_consume = evil_h3_deferred_consume,
	    .recv_header = evil_h3_recv_header,
	    .stop_sending = evil_h3_stop_sending,
	    .end_stream = evil_h3_end_stream,
	    .reset_stream = evil_h3_reset_stream,
	};
	nghttp3_settings st;
	int64_t ctrl, enc, dec;

	nghttp3_settings_default(&st);
	if (nghttp3_conn_client_new(&E.h3, &cb, &st, NULL, &E))
		return -1;
	if (ngtcp2_conn_open_uni_stream(E.qc, &ctrl, NULL) ||
	    nghttp3_conn_bind_control_stream(E.h3, ctrl) ||
	    ngtcp2_conn_open_uni_stream(E.qc, &enc, NULL) ||
	    ngtcp2_conn_open_uni_stream(E.qc, &dec, NULL) ||
	    nghttp3_conn_bind_qpack_streams(E.h3, enc, dec))
		return -1;
	return 0;
}

/* ---- ngtcp2 ------------------------------------------------------------ */

static ngtcp2_conn *evil_get_conn(ngtcp2_crypto_conn_ref *ref)
{
	(void)ref;
	return E.qc;
}

static void evil_rand(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
	(void)ctx;
	gnutls_rnd(GNUTLS_RND_RANDOM, dest, len);
}

static int evil_new_cid(ngtcp2_conn *conn, ngtcp2_cid *cid, uint8_t *token,
			size_t cidlen, void *user)
{
	(void)conn;
	(void)user;
	if (gnutls_rnd(GNUTLS_RND_RANDOM, cid->data, cidlen) ||
	    gnutls_rnd(GNUTLS_RND_RANDOM, token,
		       NGTCP2_STATELESS_RESET_TOKENLEN))
		return NGTCP2_ERR_CALLBACK_FAILURE;
	cid->datalen = cidlen;
	return 0;
}

/* "cert_sha256=HEX": the SHA-256 of the server's certificate (DER) */
static void evil_print_cert(void)
{
	unsigned n = 0;
	const gnutls_datum_t *c = gnutls_certificate_get_peers(E.tls, &n);
	unsigned char md[32];

	if (!c || n == 0 ||
	    gnutls_hash_fast(GNUTLS_DIG_SHA256, c[0].data, c[0].size, md) < 0)
		return;
	printf("cert_sha256=");
	for (size_t i = 0; i < sizeof(md); i++)
		printf("%02x", md[i]);
	printf("\n");
}

static int evil_handshake_completed(ngtcp2_conn *conn, void *user)
{
	(void)user;
	printf("handshake ok after=%.3fs\n", (double)(evil_now() - E.t0) / 1e9);
	evil_print_cert();
	if (evil_holding())
		ngtcp2_conn_set_keep_alive_timeout(conn, EVIL_KEEPALIVE_NS);
	return evil_h3_start() ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int evil_recv_stream_data(ngtcp2_conn *conn, uint32_t flags, int64_t id,
				 uint64_t offset, const uint8_t *data,
				 size_t len, void *user, void *suser)
{
	struct evil_stream *s = evil_find(id);
	nghttp3_ssize n;

	(void)conn;
	(void)offset;
	(void)user;
	(void)suser;
	if (s && s->raw) { /* not nghttp3's: an answer to raw bytes */
		if (len)
			printf("raw_answer stream=%" PRId64 " bytes=%zu\n", id,
			       len);
		evil_consume(id, len);
		return 0;
	}
	if (!E.h3)
		return 0;
	n = nghttp3_conn_read_stream(E.h3, id, data, len,
				     flags & NGTCP2_STREAM_DATA_FLAG_FIN);
	if (n < 0) {
		fprintf(stderr, "h3evil: nghttp3_conn_read_stream: %s\n",
			nghttp3_strerror((int)n));
		return NGTCP2_ERR_CALLBACK_FAILURE;
	}
	evil_consume(id, (size_t)n);
	return 0;
}

static int evil_acked(ngtcp2_conn *conn, int64_t id, uint64_t offset,
		      uint64_t len, void *user, void *suser)
{
	struct evil_stream *s = evil_find(id);

	(void)conn;
	(void)offset;
	(void)user;
	(void)suser;
	if ((s && s->raw) || !E.h3)
		return 0;
	return nghttp3_conn_add_ack_offset(E.h3, id, len)
		   ? NGTCP2_ERR_CALLBACK_FAILURE
		   : 0;
}

static int evil_stream_close(ngtcp2_conn *conn, uint32_t flags, int64_t id,
			     uint64_t app_err, void *user, void *suser)
{
	struct evil_stream *s = evil_find(id);
	int rv;

	(void)conn;
	(void)user;
	(void)suser;
	if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET))
		app_err = EVIL_H3_NO_ERROR;
	if (s && !s->done && !s->reset_by_us && !s->reset_by_peer) {
		s->reset_by_peer = true;
		printf("stream_closed stream=%" PRId64 " code=0x%" PRIx64
		       " after=%.1fs\n",
		       id, app_err, evil_after());
	}
	if ((s && s->raw) || !E.h3)
		return 0;
	rv = nghttp3_conn_close_stream(E.h3, id, app_err);
	if (rv && rv != NGHTTP3_ERR_STREAM_NOT_FOUND)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	return 0;
}

static int evil_stream_reset(ngtcp2_conn *conn, int64_t id, uint64_t final_size,
			     uint64_t app_err, void *user, void *suser)
{
	struct evil_stream *s = evil_find(id);

	(void)conn;
	(void)final_size;
	(void)user;
	(void)suser;
	if (s && !s->reset_by_us && !s->reset_by_peer) {
		s->reset_by_peer = true;
		printf("stream_reset stream=%" PRId64 " code=0x%" PRIx64
		       " after=%.1fs\n",
		       id, app_err, evil_after());
	}
	if ((s && s->raw) || !E.h3)
		return 0;
	return nghttp3_conn_shutdown_stream_read(E.h3, id)
		   ? NGTCP2_ERR_CALLBACK_FAILURE
		   : 0;
}

static int evil_stop_sending(ngtcp2_conn *conn, int64_t id, uint64_t app_err,
			     void *user, void *suser)
{
	struct evil_stream *s = evil_find(id);

	(void)conn;
	(void)user;
	(void)suser;
	if (s && !s->reset_by_us)
		printf("stop_sending stream=%" PRId64 " code=0x%" PRIx64
		       " after=%.1fs\n",
		       id, app_err, evil_after());
	if ((s && s->raw) || !E.h3)
		return 0;
	return nghttp3_conn_shutdown_stream_read(E.h3, id)
		   ? NGTCP2_ERR_CALLBACK_FAILURE
		   : 0;
}

static int evil_extend_max_stream_data(ngtcp2_conn *conn, int64_t id,
				       uint64_t max, void *user, void *suser)
{
	struct evil_stream *s = evil_find(id);

	(void)conn;
	(void)max;
	(void)user;
	(void)suser;
	if (s && s->raw) {
		s->raw_blocked = false;
		return 0;
	}
	if (E.h3 && nghttp3_conn_unblock_stream(E.h3, id))
		return NGTCP2_ERR_CALLBACK_FAILURE;
	return 0;
}

static int evil_recv_stateless_reset(ngtcp2_conn *conn,
				     const ngtcp2_pkt_stateless_reset *sr,
				     void *user)
{
	(void)conn;
	(void)sr;
	(void)user;
	E.stateless_reset = true;
	return 0;
}

/* ---- setup -------------------------------------------------------------- */

static int evil_socket(void)
{
	struct addrinfo hints = {.ai_socktype = SOCK_DGRAM}, *ai;
	int rc, rcvbuf = 16 * 1024 * 1024;

	rc = getaddrinfo(E.host, E.port, &hints, &ai);
	if (rc) {
		fprintf(stderr, "h3evil: %s: %s\n", E.host, gai_strerror(rc));
		return -1;
	}
	E.fd = socket(ai->ai_family, SOCK_DGRAM, 0);
	if (E.fd < 0 || connect(E.fd, ai->ai_addr, ai->ai_addrlen)) {
		perror("h3evil: connect");
		freeaddrinfo(ai);
		return -1;
	}
	/* room for a window of datagrams: a drop would be a loss, and a
	 * loss would shrink the server's congestion window (as root: past
	 * net.core.rmem_max) */
	if (setsockopt(E.fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf,
		       sizeof(rcvbuf)))
		setsockopt(E.fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
			   sizeof(rcvbuf));
	memcpy(&E.remote, ai->ai_addr, ai->ai_addrlen);
	E.remotelen = ai->ai_addrlen;
	freeaddrinfo(ai);
	E.locallen = sizeof(E.local);
	if (getsockname(E.fd, (struct sockaddr *)&E.local, &E.locallen)) {
		perror("h3evil: getsockname");
		return -1;
	}
	return 0;
}

static void evil_path(ngtcp2_path *p)
{
	p->local.addr = (ngtcp2_sockaddr *)&E.local;
	p->local.addrlen = E.locallen;
	p->remote.addr = (ngtcp2_sockaddr *)&E.remote;
	p->remote.addrlen = E.remotelen;
	p->user_data = NULL;
}

static int evil_tls(void)
{
	gnutls_datum_t alpn = {(unsigned char *)"h3", 2};

	if (gnutls_certificate_allocate_credentials(&E.cred) ||
	    gnutls_init(&E.tls, GNUTLS_CLIENT | GNUTLS_ENABLE_EARLY_DATA |
				    GNUTLS_NO_END_OF_EARLY_DATA) ||
	    gnutls_priority_set_direct(
		E.tls,
		"%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3",
		NULL) ||
	    ngtcp2_crypto_gnutls_configure_client_session(E.tls) ||
	    gnutls_credentials_set(E.tls, GNUTLS_CRD_CERTIFICATE, E.cred) ||
	    gnutls_alpn_set_protocols(E.tls, &alpn, 1, 0) ||
	    gnutls_server_name_set(E.tls, GNUTLS_NAME_DNS, E.sni,
				   strlen(E.sni)))
		return -1;
	E.ref.get_conn = evil_get_conn;
	E.ref.user_data = &E;
	gnutls_session_set_ptr(E.tls, &E.ref);
	return 0;
}

static int evil_conn(void)
{
	static const ngtcp2_callbacks cb = {
	    .client_initial = ngtcp2_crypto_client_initial_cb,
	    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
	    .handshake_completed = evil_handshake_completed,
	    .encrypt = ngtcp2_crypto_encrypt_cb,
	    .decrypt = ngtcp2_crypto_decrypt_cb,
	    .hp_mask = ngtcp2_crypto_hp_mask_cb,
	    .recv_stream_data = evil_recv_stream_data,
	    .acked_stream_data_offset = evil_acked,
	    .stream_close = evil_stream_close,
	    .recv_stateless_reset = evil_recv_stateless_reset,
	    .recv_retry = ngtcp2_crypto_recv_retry_cb,
	    .rand = evil_rand,
	    .get_new_connection_id = evil_new_cid,
	    .update_key = ngtcp2_crypto_update_key_cb,
	    .stream_reset = evil_stream_reset,
	    .extend_max_stream_data = evil_extend_max_stream_data,
	    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
	    .delete_crypto_cipher_ctx =
		ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
	    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
	    .stream_stop_sending = evil_stop_sending,
	    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
	};
	ngtcp2_settings st;
	ngtcp2_transport_params tp;
	ngtcp2_cid dcid, scid;
	ngtcp2_path path;

	dcid.datalen = 18;
	scid.datalen = 16;
	if (gnutls_rnd(GNUTLS_RND_RANDOM, dcid.data, dcid.datalen) ||
	    gnutls_rnd(GNUTLS_RND_RANDOM, scid.data, scid.datalen))
		return -1;
	ngtcp2_settings_default(&st);
	st.initial_ts = evil_now();
	/* windows wide enough that the server is never held by flow
	 * control: what holds it is the acknowledgements */
	st.max_window = 64 * 1024 * 1024;
	st.max_stream_window = 32 * 1024 * 1024;
	ngtcp2_transport_params_default(&tp);
	tp.initial_max_stream_data_bidi_local = 16 * 1024 * 1024;
	tp.initial_max_stream_data_bidi_remote = 256 * 1024;
	tp.initial_max_stream_data_uni = 256 * 1024;
	tp.initial_max_data = 32 * 1024 * 1024;
	tp.initial_max_streams_bidi = 0;
	tp.initial_max_streams_uni = 3;
	tp.max_idle_timeout = 60 * NGTCP2_SECONDS;
	tp.active_connection_id_limit = 7;
	evil_path(&path);
	if (ngtcp2_conn_client_new(&E.qc, &dcid, &scid, &path,
				   NGTCP2_PROTO_VER_V1, &cb, &st, &tp, NULL,
				   &E))
		return -1;
	ngtcp2_conn_set_tls_native_handle(E.qc, E.tls);
	return 0;
}

/* ---- the requests -------------------------------------------------------- */

static struct evil_stream *evil_open(void)
{
	struct evil_stream *s;
	int64_t id;

	if (E.nst == EVIL_MAX_STREAMS ||
	    ngtcp2_conn_open_bidi_stream(E.qc, &id, NULL))
		return NULL;
	s = &E.st[E.nst++];
	memset(s, 0, sizeof(*s));
	s->id = id;
	return s;
}

#define EVIL_NV(N, V)                                                          \
	{                                                                      \
		(uint8_t *)(N), (uint8_t *)(V), sizeof(N) - 1, strlen(V),      \
		    NGHTTP3_NV_FLAG_NONE                                       \
	}

static int evil_request(const char *method, const char *path, int64_t cl)
{
	nghttp3_data_reader dr = {.read_data = evil_h3_read_body};
	char authority[300], clen[24];
	struct evil_stream *s = evil_open();

	if (!s)
		return -1;
	snprintf(authority, sizeof(authority), "%s:%s", E.sni, E.port);
	snprintf(clen, sizeof(clen), "%" PRId64, cl);
	{
		nghttp3_nv nv[] = {
		    EVIL_NV(":method", method),
		    EVIL_NV(":scheme", "https"),
		    EVIL_NV(":authority", authority),
		    EVIL_NV(":path", path),
		    EVIL_NV("user-agent", "h3evil"),
		    EVIL_NV("content-length", clen),
		};

		return nghttp3_conn_submit_request(E.h3, s->id, nv,
						   cl >= 0 ? 6 : 5,
						   cl >= 0 ? &dr : NULL, s)
			   ? -1
			   : 0;
	}
}

/* a HEADERS frame (type 0x01) that announces 100 bytes; 5 follow: the
 * field section prefix (no dynamic table) and :method GET, :scheme https
 * (static table 17 and 23) */
static const uint8_t evil_partial[] = {0x01, 0x40, 0x64, 0x00,
				       0x00, 0xd1, 0xd7};
/* a whole HEADERS frame: Required Insert Count 1 (encoded 2: the
 * server's table of 4096 bytes holds 128 entries), delta base 0, then an
 * indexed field line naming dynamic entry 0, which never comes */
static const uint8_t evil_blocked[] = {0x01, 0x03, 0x02, 0x00, 0x80};

static int evil_raw(const uint8_t *data, size_t len, bool fin)
{
	struct evil_stream *s = evil_open();

	if (!s)
		return -1;
	s->raw = true;
	s->raw_data = data;
	s->raw_len = len;
	s->raw_fin = fin;
	return 0;
}

static int evil_start(void)
{
	unsigned i;

	switch (E.mode) {
	case EVIL_GET:
	case EVIL_NOACK:
	case EVIL_RESET:
		for (i = 0; i < E.nreq; i++) {
			bool r = E.mode == EVIL_RESET && i == E.reset_idx;

			if (evil_request("GET", r ? E.reset_path : E.path, -1))
				return -1;
			if (r)
				E.st[E.nst - 1].reset_at =
				    evil_now() +
				    E.reset_after_ms * NGTCP2_MILLISECONDS;
		}
		return 0;
	case EVIL_PARTIAL:
		return evil_raw(evil_partial, sizeof(evil_partial), false);
	case EVIL_QPACK:
		return evil_raw(evil_blocked, sizeof(evil_blocked), true);
	case EVIL_SLOWBODY:
		return evil_request("POST", E.path, (int64_t)E.slow_len);
	}
	return -1;
}

/* ---- the loop ------------------------------------------------------------ */

static struct evil_stream *evil_raw_pending(void)
{
	for (unsigned i = 0; i < E.nst; i++) {
		struct evil_stream *s = &E.st[i];

		if (s->raw && !s->raw_blocked && !s->reset_by_peer &&
		    s->raw_off < s->raw_len)
			return s;
	}
	return NULL;
}

static void evil_raw_written(struct evil_stream *s, ngtcp2_ssize n)
{
	s->raw_off += (size_t)n;
	if (s->raw_off == s->raw_len)
		evil_misdeed();
}

static int evil_write(void)
{
	uint8_t buf[NGTCP2_MAX_UDP_PAYLOAD_SIZE];
	ngtcp2_path_storage ps;
	ngtcp2_pkt_info pi;

	ngtcp2_path_storage_zero(&ps);
	for (;;) {
		struct evil_stream *raw = evil_raw_pending();
		uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
		nghttp3_vec vec[16];
		ngtcp2_vec rv;
		const ngtcp2_vec *v = NULL;
		size_t vcnt = 0;
		int64_t sid = -1;
		int fin = 0;
		ngtcp2_ssize n, ndatalen = -1;

		if (raw) {
			sid = raw->id;
			rv.base = (uint8_t *)raw->raw_data + raw->raw_off;
			rv.len = raw->raw_len - raw->raw_off;
			v = &rv;
			vcnt = 1;
			if (raw->raw_fin)
				flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
		} else if (E.h3 && ngtcp2_conn_get_max_data_left(E.qc)) {
			nghttp3_ssize k = nghttp3_conn_writev_stream(
			    E.h3, &sid, &fin, vec, sizeof(vec) / sizeof(*vec));

			if (k < 0) {
				fprintf(stderr, "h3evil: writev: %s\n",
					nghttp3_strerror((int)k));
				return -1;
			}
			if (fin)
				flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
			v = (const ngtcp2_vec *)vec;
			vcnt = (size_t)k;
		}
		n = ngtcp2_conn_writev_stream(E.qc, &ps.path, &pi, buf,
					      sizeof(buf), &ndatalen, flags,
					      sid, v, vcnt, evil_now());
		if (n < 0) {
			switch (n) {
			case NGTCP2_ERR_STREAM_DATA_BLOCKED:
				if (raw)
					raw->raw_blocked = true;
				else
					nghttp3_conn_block_stream(E.h3, sid);
				continue;
			case NGTCP2_ERR_STREAM_SHUT_WR:
				if (raw)
					raw->raw_off = raw->raw_len;
				else
					nghttp3_conn_shutdown_stream_write(E.h3,
									   sid);
				continue;
			case NGTCP2_ERR_WRITE_MORE:
				if (raw)
					evil_raw_written(raw, ndatalen);
				else if (nghttp3_conn_add_write_offset(
					     E.h3, sid, (size_t)ndatalen))
					return -1;
				continue;
			default:
				fprintf(stderr, "h3evil: write: %s\n",
					ngtcp2_strerror((int)n));
				return -1;
			}
		}
		if (ndatalen >= 0) {
			if (raw)
				evil_raw_written(raw, ndatalen);
			else if (nghttp3_conn_add_write_offset(
				     E.h3, sid, (size_t)ndatalen))
				return -1;
		}
		if (n == 0) {
			ngtcp2_conn_update_pkt_tx_time(E.qc, evil_now());
			return 0;
		}
		if (send(E.fd, buf, (size_t)n, 0) < 0 && errno != EAGAIN &&
		    errno != ECONNREFUSED)
			perror("h3evil: send");
	}
}

/* hand one datagram to ngtcp2 (or drop it, withholding): 1 the peer
 * closed the connection, 0 or -1 */
static int evil_feed(const uint8_t *buf, size_t n)
{
	ngtcp2_connection_close_error cc;
	ngtcp2_pkt_info pi = {0};
	ngtcp2_path path;
	int rv;

	if (E.closed_by_peer)
		return 1;
	if (E.withholding && n > EVIL_SMALL_PKT) {
		E.withheld_bytes += n;
		E.withheld_pkts++;
		return 0;
	}
	evil_path(&path);
	rv = ngtcp2_conn_read_pkt(E.qc, &path, &pi, buf, n, evil_now());
	if (rv == NGTCP2_ERR_DRAINING || rv == NGTCP2_ERR_CLOSING) {
		ngtcp2_conn_get_connection_close_error(E.qc, &cc);
		E.closed_by_peer = true;
		printf("closed_by_peer after=%.1fs error=0x%" PRIx64
		       " how=%s\n",
		       evil_after(), cc.error_code,
		       E.stateless_reset ? "stateless_reset" : "close");
		return 1;
	}
	if (rv) {
		fprintf(stderr, "h3evil: read: %s\n", ngtcp2_strerror(rv));
		return -1;
	}
	return 0;
}

/* the datagrams held back whose time has come: as evil_feed */
static int evil_feed_due(uint64_t now)
{
	struct evil_pkt *p;
	int rv = 0;

	while (rv == 0 && (p = E.q) && p->due <= now) {
		E.q = p->next;
		if (!E.q)
			E.q_tail = NULL;
		rv = evil_feed(p->data, p->len);
		free(p);
	}
	return rv;
}

/* 1: the peer closed the connection; 0: read all there was; -1: error */
static int evil_read(void)
{
	static uint8_t buf[65536];
	struct evil_pkt *p;
	ssize_t n;
	int rv;

	for (;;) {
		n = recv(E.fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0)
			break;
		if (!E.delay_ns) {
			rv = evil_feed(buf, (size_t)n);
			if (rv)
				return rv;
			continue;
		}
		p = malloc(sizeof(*p) + (size_t)n);
		if (!p)
			return -1;
		p->next = NULL;
		p->due = evil_now() + E.delay_ns;
		p->len = (size_t)n;
		memcpy(p->data, buf, (size_t)n);
		if (E.q_tail)
			E.q_tail->next = p;
		else
			E.q = p;
		E.q_tail = p;
	}
	if (errno != EAGAIN && errno != EINTR && errno != ECONNREFUSED)
		return -1;
	return evil_feed_due(evil_now());
}

/* the client's resets, when due */
static void evil_resets(uint64_t now)
{
	for (unsigned i = 0; i < E.nst; i++) {
		struct evil_stream *s = &E.st[i];

		if (!s->reset_at || s->reset_by_us || s->done ||
		    now < s->reset_at)
			continue;
		s->reset_by_us = true;
		ngtcp2_conn_shutdown_stream(E.qc, s->id, EVIL_H3_CANCELLED);
		nghttp3_conn_shutdown_stream_read(E.h3, s->id);
		printf("reset stream=%" PRId64 "\n", s->id);
	}
}

/* every stream answered, reset, or given up on by the server */
static bool evil_all_done(void)
{
	if (!E.started)
		return false;
	for (unsigned i = 0; i < E.nst; i++)
		if (!E.st[i].done && !E.st[i].reset_by_us &&
		    !E.st[i].reset_by_peer)
			return false;
	return true;
}

static void evil_close(void)
{
	uint8_t buf[NGTCP2_MAX_UDP_PAYLOAD_SIZE];
	ngtcp2_connection_close_error cc;
	ngtcp2_path_storage ps;
	ngtcp2_pkt_info pi;
	ngtcp2_ssize n;

	if (E.closed_by_peer || !E.qc)
		return;
	ngtcp2_path_storage_zero(&ps);
	ngtcp2_connection_close_error_set_application_error(
	    &cc, EVIL_H3_NO_ERROR, NULL, 0);
	n = ngtcp2_conn_write_connection_close(E.qc, &ps.path, &pi, buf,
					       sizeof(buf), &cc, evil_now());
	if (n > 0 && send(E.fd, buf, (size_t)n, 0) < 0)
		perror("h3evil: send");
}

static int evil_loop(void)
{
	uint64_t deadline = E.t0 + (uint64_t)(E.timeout * 1e9);
	struct pollfd pfd = {.fd = E.fd, .events = POLLIN};

	if (evil_write())
		return 1;
	for (;;) {
		uint64_t now = evil_now(), exp = ngtcp2_conn_get_expiry(E.qc);
		int ms = exp <= now ? 0 : (int)((exp - now) / 1000000) + 1;
		int rv;

		if (now >= deadline) {
			printf("timeout after=%.1fs\n", evil_after());
			return 3;
		}
		if (ms > 100)
			ms = 100;
		if (E.idle_ignored && ms < 20)
			ms = 20;
		if (E.q && ms > 0) {
			uint64_t d = E.q->due > now ? E.q->due - now : 0;

			if ((uint64_t)ms > d / 1000000 + 1)
				ms = (int)(d / 1000000) + 1;
		}
		if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
			return 1;
		rv = evil_read();
		if (rv > 0)
			return 0;
		if (rv < 0)
			return 1;
		now = evil_now();
		if (ngtcp2_conn_get_expiry(E.qc) <= now) {
			rv = ngtcp2_conn_handle_expiry(E.qc, now);
			/* withholding, nothing of the server's is read for a
			 * while: its own idle timer is not the client's
			 * business */
			if (rv == NGTCP2_ERR_IDLE_CLOSE && evil_holding())
				E.idle_ignored = true;
			else if (rv) {
				fprintf(stderr, "h3evil: expiry: %s\n",
					ngtcp2_strerror(rv));
				return 1;
			}
		}
		if (E.h3 && !E.started) {
			if (evil_start()) {
				fprintf(stderr, "h3evil: cannot start\n");
				return 1;
			}
			E.started = true;
		}
		evil_resets(now);
		if (!evil_holding() && evil_all_done())
			return 0;
		if (evil_holding() && E.t_evil &&
		    now - E.t_evil >= (uint64_t)(E.hold * 1e9)) {
			printf("still_open after=%.1fs\n", evil_after());
			return 0;
		}
		if (evil_write())
			return 1;
	}
}

static void evil_usage(void)
{
	fprintf(stderr,
		"usage: h3evil --port PORT [--host H] [--sni NAME] "
		"[--path P] [-n K] [--hold S] [--timeout S] [--delay MS]\n"
		"              [--no-ack-after BYTES | --reset-stream N "
		"[--reset-path P] [--reset-after MS] |\n"
		"               --partial-headers | --qpack-blocked | "
		"--slow-body LEN [--body-sent N]]\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"host", required_argument, NULL, 'H'},
	    {"port", required_argument, NULL, 'p'},
	    {"sni", required_argument, NULL, 's'},
	    {"path", required_argument, NULL, 'P'},
	    {"hold", required_argument, NULL, 'h'},
	    {"timeout", required_argument, NULL, 't'},
	    {"no-ack-after", required_argument, NULL, 'a'},
	    {"reset-stream", required_argument, NULL, 'r'},
	    {"reset-path", required_argument, NULL, 'R'},
	    {"reset-after", required_argument, NULL, 'A'},
	    {"partial-headers", no_argument, NULL, 'x'},
	    {"qpack-blocked", no_argument, NULL, 'q'},
	    {"slow-body", required_argument, NULL, 'b'},
	    {"body-sent", required_argument, NULL, 'B'},
	    {"delay", required_argument, NULL, 'D'},
	    {NULL, 0, NULL, 0},
	};
	unsigned ok = 0, i;
	int c, rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	E.host = "127.0.0.1";
	E.sni = "localhost";
	E.path = "/";
	E.nreq = 1;
	E.hold = 10;
	E.timeout = 30;
	E.reset_after_ms = 200;
	E.slow_sent = 1000;
	while ((c = getopt_long(argc, argv, "n:", opts, NULL)) != -1) {
		switch (c) {
		case 'H':
			E.host = optarg;
			break;
		case 'p':
			E.port = optarg;
			break;
		case 's':
			E.sni = optarg;
			break;
		case 'P':
			E.path = optarg;
			break;
		case 'n':
			E.nreq = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'h':
			E.hold = strtod(optarg, NULL);
			break;
		case 't':
			E.timeout = strtod(optarg, NULL);
			break;
		case 'a':
			E.mode = EVIL_NOACK;
			E.noack_after = strtoull(optarg, NULL, 10);
			break;
		case 'r':
			E.mode = EVIL_RESET;
			E.reset_idx = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'R':
			E.reset_path = optarg;
			break;
		case 'A':
			E.reset_after_ms = strtoull(optarg, NULL, 10);
			break;
		case 'x':
			E.mode = EVIL_PARTIAL;
			break;
		case 'q':
			E.mode = EVIL_QPACK;
			break;
		case 'b':
			E.mode = EVIL_SLOWBODY;
			E.slow_len = strtoull(optarg, NULL, 10);
			break;
		case 'B':
			E.slow_sent = strtoull(optarg, NULL, 10);
			break;
		case 'D':
			E.delay_ns =
			    strtoull(optarg, NULL, 10) * NGTCP2_MILLISECONDS;
			break;
		default:
			evil_usage();
			return 2;
		}
	}
	if (E.mode == EVIL_NOACK)
		E.nreq = 1;
	if (!E.reset_path)
		E.reset_path = E.path;
	if (!E.port || optind != argc || E.nreq == 0 ||
	    E.nreq > EVIL_MAX_STREAMS ||
	    (E.mode == EVIL_RESET && E.reset_idx >= E.nreq) ||
	    E.slow_sent > EVIL_BODY_MAX ||
	    (E.mode == EVIL_SLOWBODY && E.slow_sent >= E.slow_len)) {
		evil_usage();
		return 2;
	}
	memset(evil_body, 'x', sizeof(evil_body));
	E.t0 = evil_now();
	if (evil_socket() || evil_tls() || evil_conn()) {
		fprintf(stderr, "h3evil: cannot set up the connection\n");
		return 1;
	}
	rc = evil_loop();
	evil_close();
	for (i = 0; i < E.nst; i++)
		if (E.st[i].done && !E.st[i].reset_by_us &&
		    E.st[i].status >= 200 && E.st[i].status < 300)
			ok++;
	printf("summary streams=%u ok=%u body_bytes=%" PRIu64
	       " withheld_bytes=%" PRIu64 " withheld_pkts=%" PRIu64
	       " closed_by_peer=%d\n",
	       E.nst, ok, E.body_total, E.withheld_bytes, E.withheld_pkts,
	       E.closed_by_peer ? 1 : 0);
	if (E.h3)
		nghttp3_conn_del(E.h3);
	if (E.qc)
		ngtcp2_conn_del(E.qc);
	if (E.tls)
		gnutls_deinit(E.tls);
	if (E.cred)
		gnutls_certificate_free_credentials(E.cred);
	while (E.q) {
		struct evil_pkt *p = E.q;

		E.q = p->next;
		free(p);
	}
	close(E.fd);
	return rc;
}
