// SPDX-License-Identifier: BSD-2-Clause
/*
 * h3load - an HTTP/3 load generator for bench/http3, on ngtcp2 0.12 (TLS
 * by GnuTLS through ngtcp2_crypto_gnutls) and nghttp3 0.8: Debian 12's
 * h2load and curl have no HTTP/3.
 *
 *   h3load [-c CONNS] [-m STREAMS] [-D SECONDS] [-n REQUESTS]
 *          [--authority HOST] [--handshakes] [--priority STRING]
 *          [--idle SECONDS]
 *          https://ADDR:PORT[/PATH] | ADDR:PORT
 *
 * -c connections (default 1), each keeping -m GET requests in flight
 * (default 1), closed-loop: a request whose response ends is followed by
 * the next. -D: run that many seconds (default 10; a fraction allowed);
 * -n: stop after that many requests have ended (and at -D at the latest).
 * --handshakes: each connection makes one GET, closes (CONNECTION_CLOSE,
 * H3_NO_ERROR) once the response has ended, and a new connection takes
 * its place at once: full handshakes, no resumption. --authority: the
 * :authority and the SNI name (default the address). The certificate is
 * not verified (the bench makes its own); ALPN h3 is required. TLS 1.3
 * only, by default with AES-128-GCM and X25519 alone so that every server
 * negotiates the same (--priority: the GnuTLS priority string after
 * "%DISABLE_TLS13_COMPAT_MODE:" instead). --idle: the connections'
 * max_idle_timeout (default 30 s): a connection the server stops
 * answering is lost after that long.
 *
 * One thread, a ppoll loop over one connected UDP socket per connection
 * and the connections' ngtcp2 timers. Flow control credit goes back as
 * the bytes are read (headers by nghttp3_conn_read_stream's return, body
 * bytes as they arrive). A request counts done when its response ended
 * with a 2xx status, failed when it ended with another status or its
 * stream was reset or its connection lost; requests still in flight at
 * the end count neither. A connection lost (an error, the server's
 * CONNECTION_CLOSE with an error or while requests were in flight, a
 * handshake that did not complete in 5 s) counts in conn_errors and is
 * replaced. One line at the end:
 *
 *   h3load: requests=N failed=N non2xx=N bytes=N handshakes=N
 *           conn_errors=N seconds=F rps=F hps=F conns=N streams=N
 *           mode=load|handshakes tls=NAME cipher=NAME group=NAME
 *           goaway_idle=N
 *
 * (bytes: response body bytes; handshakes: handshakes completed; hps:
 * handshakes per second; goaway_idle: connections that timed out after
 * the server's GOAWAY with nothing in flight, no request lost, not in
 * conn_errors). Exit 0 when at least one request was done and
 * nothing failed, 1 otherwise, 2 on a usage error. H3LOAD_DEBUG set in
 * the environment: ngtcp2's debug log on stderr.
 *
 * ngtcp2 0.12's client (with GnuTLS 3.7) sends its Finished only when its
 * first PTO fires, 10 to 20 ms after the server's flight on loopback,
 * whatever the server (Debian's gtlsclient does the same): a handshake
 * takes that long, so --handshakes needs many connections (-c) to keep a
 * server busy.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include "../common.h"

#define H3L_MAX_CONNS 1000
#define H3L_MAX_STREAMS 1000
#define H3L_CIDLEN 16
#define H3L_VECS 16
#define H3L_RX_BATCH 64
#define H3L_LOGGED_ERRORS 5
/* conn_errors with no handshake ever completed before h3load gives up */
#define H3L_GIVE_UP_ERRORS 20
#define H3L_HANDSHAKE_TIMEOUT (5 * NGTCP2_SECONDS)
#define H3L_IDLE_TIMEOUT_S 30
#define H3L_PRIORITY                                                           \
	"NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:"              \
	"-GROUP-ALL:+GROUP-X25519"

_Static_assert(sizeof(nghttp3_vec) == sizeof(ngtcp2_vec) &&
		   offsetof(nghttp3_vec, base) == offsetof(ngtcp2_vec, base) &&
		   offsetof(nghttp3_vec, len) == offsetof(ngtcp2_vec, len),
	       "nghttp3_vec and ngtcp2_vec differ");

struct h3l_opts {
	struct sockaddr_storage addr;
	socklen_t addrlen;
	const char *authority; /* :authority and SNI */
	const char *path;
	const char *priority;
	uint64_t conns;
	uint64_t streams;
	uint64_t requests; /* 0: no limit */
	double duration;
	double idle; /* seconds */
	bool handshakes;
};

/* One request in flight: its response's status, whether it was counted.
 * Owned by its connection's list; freed when nghttp3 closes the stream or
 * the connection goes. */
struct h3l_stream {
	struct h3l_stream *next, **pprev;
	int64_t id;
	int status;
	bool counted;
};

/* One QUIC connection and its UDP socket (connected to the server). */
struct h3l_conn {
	int fd;
	ngtcp2_conn *qc;
	nghttp3_conn *h3;
	gnutls_session_t tls;
	ngtcp2_crypto_conn_ref ref; /* gnutls_session_get_ptr() points here */
	struct sockaddr_storage local;
	ngtcp2_path path;
	ngtcp2_connection_close_error err; /* what our CONNECTION_CLOSE says */
	struct h3l_stream *streams;
	uint64_t inflight;  /* requests submitted, not yet counted */
	uint64_t submitted; /* requests submitted on this connection */
	bool handshake_done;
	bool goaway;	  /* the server sent GOAWAY: no new requests */
	bool goaway_idle; /* then went silent with nothing in flight */
	bool finished;	  /* closes at the loop's end (and is replaced) */
	bool failed;	  /* finished by an error: counts in conn_errors */
	bool closed;	  /* no CONNECTION_CLOSE of ours to send */
	const char *why;
};

/* The run's state: one per process (one thread). */
static struct {
	struct h3l_opts o;
	gnutls_certificate_credentials_t cred;
	struct h3l_conn *conns[H3L_MAX_CONNS];
	nghttp3_nv nva[5];
	bool running; /* requests are counted and new ones submitted */
	uint64_t submitted, done, failed, non2xx, bytes, handshakes;
	uint64_t conn_errors, logged;
	uint64_t goaway_idle; /* lost after a GOAWAY with nothing in flight */
	char tls[32], cipher[32], group[32];
	char authority[256];
	uint8_t rx[65536], tx[65536];
} L;

static void h3l_debug(void *ud, const char *fmt, ...)
{
	va_list ap;

	(void)ud;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static ngtcp2_tstamp h3l_now(void)
{
	return bench_now_ns();
}

static void h3l_log_error(const struct h3l_conn *c, const char *what)
{
	if (L.logged++ < H3L_LOGGED_ERRORS)
		fprintf(stderr, "h3load: connection error: %s%s%s\n", what,
			c->why ? ": " : "", c->why ? c->why : "");
}

/* ---- requests --------------------------------------------------------- */

static void h3l_count(struct h3l_conn *c, struct h3l_stream *s, bool ok)
{
	if (s->counted)
		return;
	s->counted = true;
	c->inflight--;
	if (!L.running)
		return;
	if (ok) {
		L.done++;
	} else {
		L.failed++;
		if (s->status)
			L.non2xx++;
	}
}

static void h3l_stream_free(struct h3l_stream *s)
{
	if (s->next)
		s->next->pprev = s->pprev;
	*s->pprev = s->next;
	free(s);
}

/* Submit GETs on c while it has room: -m in flight, the server's stream
 * credit, -n, one per connection with --handshakes. 0 or -1 (c failed). */
static int h3l_submit(struct h3l_conn *c)
{
	while (L.running && c->h3 && c->handshake_done && !c->goaway &&
	       !c->finished && c->inflight < L.o.streams &&
	       (!L.o.handshakes || c->submitted == 0) &&
	       (!L.o.requests || L.submitted < L.o.requests)) {
		struct h3l_stream *s;
		int64_t sid;
		int rv;

		rv = ngtcp2_conn_open_bidi_stream(c->qc, &sid, NULL);
		if (rv == NGTCP2_ERR_STREAM_ID_BLOCKED)
			return 0; /* extend_max_local_streams_bidi wakes us */
		if (rv != 0) {
			c->why = ngtcp2_strerror(rv);
			return -1;
		}
		s = calloc(1, sizeof(*s));
		if (!s) {
			c->why = "out of memory";
			return -1;
		}
		s->id = sid;
		s->next = c->streams;
		if (s->next)
			s->next->pprev = &s->next;
		s->pprev = &c->streams;
		c->streams = s;
		rv = nghttp3_conn_submit_request(c->h3, sid, L.nva, 5, NULL, s);
		if (rv != 0) {
			c->why = nghttp3_strerror(rv);
			return -1;
		}
		c->inflight++;
		c->submitted++;
		L.submitted++;
	}
	return 0;
}

/* ---- nghttp3 callbacks ------------------------------------------------ */

/* Give back flow control credit for n bytes of stream id, read. */
static void h3l_consume(struct h3l_conn *c, int64_t id, size_t n)
{
	ngtcp2_conn_extend_max_stream_offset(c->qc, id, n);
	ngtcp2_conn_extend_max_offset(c->qc, n);
}

static int h3l_recv_header(nghttp3_conn *h3, int64_t id, int32_t token,
			   nghttp3_rcbuf *name, nghttp3_rcbuf *value,
			   uint8_t flags, void *ud, void *sud)
{
	struct h3l_stream *s = sud;
	nghttp3_vec v;

	(void)h3, (void)id, (void)name, (void)flags, (void)ud;
	if (!s || token != NGHTTP3_QPACK_TOKEN__STATUS)
		return 0;
	v = nghttp3_rcbuf_get_buf(value);
	if (v.len == 3 && v.base[0] >= '1' && v.base[0] <= '5' &&
	    v.base[1] >= '0' && v.base[1] <= '9' && v.base[2] >= '0' &&
	    v.base[2] <= '9')
		s->status = (v.base[0] - '0') * 100 + (v.base[1] - '0') * 10 +
			    (v.base[2] - '0');
	return 0;
}

static int h3l_recv_data(nghttp3_conn *h3, int64_t id, const uint8_t *data,
			 size_t len, void *ud, void *sud)
{
	(void)h3, (void)data, (void)sud;
	if (L.running)
		L.bytes += len;
	h3l_consume(ud, id, len);
	return 0;
}

static int h3l_deferred_consume(nghttp3_conn *h3, int64_t id, size_t n,
				void *ud, void *sud)
{
	(void)h3, (void)sud;
	h3l_consume(ud, id, n);
	return 0;
}

static int h3l_end_stream(nghttp3_conn *h3, int64_t id, void *ud, void *sud)
{
	struct h3l_conn *c = ud;
	struct h3l_stream *s = sud;

	(void)h3, (void)id;
	if (!s)
		return 0;
	h3l_count(c, s, s->status >= 200 && s->status <= 299);
	if (L.o.handshakes)
		c->finished = true;
	return 0;
}

static int h3l_stream_close(nghttp3_conn *h3, int64_t id, uint64_t app_err,
			    void *ud, void *sud)
{
	struct h3l_stream *s = sud;

	(void)h3, (void)id, (void)app_err;
	if (!s)
		return 0;
	h3l_count(ud, s, false); /* closed before its response ended */
	h3l_stream_free(s);
	return 0;
}

static int h3l_stop_sending(nghttp3_conn *h3, int64_t id, uint64_t app_err,
			    void *ud, void *sud)
{
	struct h3l_conn *c = ud;

	(void)h3, (void)sud;
	ngtcp2_conn_shutdown_stream_read(c->qc, id, app_err);
	return 0;
}

static int h3l_reset_stream(nghttp3_conn *h3, int64_t id, uint64_t app_err,
			    void *ud, void *sud)
{
	struct h3l_conn *c = ud;

	(void)h3, (void)sud;
	ngtcp2_conn_shutdown_stream_write(c->qc, id, app_err);
	return 0;
}

static int h3l_shutdown(nghttp3_conn *h3, int64_t id, void *ud)
{
	struct h3l_conn *c = ud;

	(void)h3, (void)id;
	c->goaway = true;
	return 0;
}

/* nghttp3 for c, its control and QPACK streams: when the 1-RTT keys are
 * in (the server's transport parameters are known by then). */
static int h3l_h3_new(struct h3l_conn *c)
{
	nghttp3_callbacks cb = {
	    .stream_close = h3l_stream_close,
	    .recv_data = h3l_recv_data,
	    .deferred_consume = h3l_deferred_consume,
	    .recv_header = h3l_recv_header,
	    .stop_sending = h3l_stop_sending,
	    .end_stream = h3l_end_stream,
	    .reset_stream = h3l_reset_stream,
	    .shutdown = h3l_shutdown,
	};
	nghttp3_settings settings;
	int64_t ctrl, qenc, qdec;
	int rv;

	if (ngtcp2_conn_get_max_local_streams_uni(c->qc) < 3) {
		c->why =
		    "the server allows fewer than 3 unidirectional streams";
		return -1;
	}
	nghttp3_settings_default(&settings);
	settings.qpack_max_dtable_capacity = 4096;
	settings.qpack_blocked_streams = 100;
	rv = nghttp3_conn_client_new(&c->h3, &cb, &settings,
				     nghttp3_mem_default(), c);
	if (rv != 0) {
		c->why = nghttp3_strerror(rv);
		return -1;
	}
	if (ngtcp2_conn_open_uni_stream(c->qc, &ctrl, NULL) != 0 ||
	    nghttp3_conn_bind_control_stream(c->h3, ctrl) != 0 ||
	    ngtcp2_conn_open_uni_stream(c->qc, &qenc, NULL) != 0 ||
	    ngtcp2_conn_open_uni_stream(c->qc, &qdec, NULL) != 0 ||
	    nghttp3_conn_bind_qpack_streams(c->h3, qenc, qdec) != 0) {
		c->why = "binding the control and QPACK streams failed";
		return -1;
	}
	return 0;
}

/* ---- ngtcp2 callbacks ------------------------------------------------- */

static ngtcp2_conn *h3l_get_conn(ngtcp2_crypto_conn_ref *ref)
{
	return ((struct h3l_conn *)ref->user_data)->qc;
}

static void h3l_rand(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
	(void)ctx;
	gnutls_rnd(GNUTLS_RND_RANDOM, dest, len);
}

static int h3l_new_cid(ngtcp2_conn *qc, ngtcp2_cid *cid, uint8_t *token,
		       size_t cidlen, void *ud)
{
	(void)qc, (void)ud;
	if (gnutls_rnd(GNUTLS_RND_RANDOM, cid->data, cidlen) != 0 ||
	    gnutls_rnd(GNUTLS_RND_RANDOM, token,
		       NGTCP2_STATELESS_RESET_TOKENLEN) != 0)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	cid->datalen = cidlen;
	return 0;
}

static int h3l_recv_rx_key(ngtcp2_conn *qc, ngtcp2_crypto_level level, void *ud)
{
	(void)qc;
	if (level != NGTCP2_CRYPTO_LEVEL_APPLICATION)
		return 0;
	return h3l_h3_new(ud) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int h3l_handshake_completed(ngtcp2_conn *qc, void *ud)
{
	struct h3l_conn *c = ud;
	gnutls_datum_t alpn = {0};
	const char *name;

	(void)qc;
	if (gnutls_alpn_get_selected_protocol(c->tls, &alpn) != 0 ||
	    alpn.size != 2 || memcmp(alpn.data, "h3", 2) != 0) {
		c->why = "ALPN h3 not selected";
		return NGTCP2_ERR_CALLBACK_FAILURE;
	}
	c->handshake_done = true;
	if (L.running)
		L.handshakes++;
	if (!L.tls[0]) {
		snprintf(L.tls, sizeof(L.tls), "%s",
			 gnutls_protocol_get_name(
			     gnutls_protocol_get_version(c->tls)));
		snprintf(L.cipher, sizeof(L.cipher), "%s",
			 gnutls_cipher_get_name(gnutls_cipher_get(c->tls)));
		name = gnutls_group_get_name(gnutls_group_get(c->tls));
		snprintf(L.group, sizeof(L.group), "%s", name ? name : "-");
	}
	return 0;
}

static int h3l_recv_stream_data(ngtcp2_conn *qc, uint32_t flags, int64_t id,
				uint64_t offset, const uint8_t *data,
				size_t len, void *ud, void *sud)
{
	struct h3l_conn *c = ud;
	nghttp3_ssize n;

	(void)qc, (void)offset, (void)sud;
	if (!c->h3)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	n = nghttp3_conn_read_stream(c->h3, id, data, len,
				     flags & NGTCP2_STREAM_DATA_FLAG_FIN);
	if (n < 0) {
		c->why = nghttp3_strerror((int)n);
		ngtcp2_connection_close_error_set_application_error(
		    &c->err, nghttp3_err_infer_quic_app_error_code((int)n),
		    NULL, 0);
		return NGTCP2_ERR_CALLBACK_FAILURE;
	}
	h3l_consume(c, id, (size_t)n);
	return 0;
}

static int h3l_acked_stream_data_offset(ngtcp2_conn *qc, int64_t id,
					uint64_t offset, uint64_t len, void *ud,
					void *sud)
{
	struct h3l_conn *c = ud;

	(void)qc, (void)offset, (void)sud;
	if (c->h3 && nghttp3_conn_add_ack_offset(c->h3, id, len) != 0)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	return 0;
}

static int h3l_quic_stream_close(ngtcp2_conn *qc, uint32_t flags, int64_t id,
				 uint64_t app_err, void *ud, void *sud)
{
	struct h3l_conn *c = ud;
	int rv;

	(void)qc, (void)sud;
	if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET))
		app_err = NGHTTP3_H3_NO_ERROR;
	if (!c->h3)
		return 0;
	rv = nghttp3_conn_close_stream(c->h3, id, app_err);
	if (rv != 0 && rv != NGHTTP3_ERR_STREAM_NOT_FOUND) {
		c->why = nghttp3_strerror(rv);
		ngtcp2_connection_close_error_set_application_error(
		    &c->err, nghttp3_err_infer_quic_app_error_code(rv), NULL,
		    0);
		return NGTCP2_ERR_CALLBACK_FAILURE;
	}
	return 0;
}

static int h3l_stream_reset(ngtcp2_conn *qc, int64_t id, uint64_t final_size,
			    uint64_t app_err, void *ud, void *sud)
{
	struct h3l_conn *c = ud;

	(void)qc, (void)final_size, (void)app_err, (void)sud;
	if (c->h3 && nghttp3_conn_shutdown_stream_read(c->h3, id) != 0)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	return 0;
}

static int h3l_stream_stop_sending(ngtcp2_conn *qc, int64_t id,
				   uint64_t app_err, void *ud, void *sud)
{
	return h3l_stream_reset(qc, id, 0, app_err, ud, sud);
}

static int h3l_extend_max_stream_data(ngtcp2_conn *qc, int64_t id, uint64_t max,
				      void *ud, void *sud)
{
	struct h3l_conn *c = ud;

	(void)qc, (void)max, (void)sud;
	if (c->h3 && nghttp3_conn_unblock_stream(c->h3, id) != 0)
		return NGTCP2_ERR_CALLBACK_FAILURE;
	return 0;
}

/* ---- connections ------------------------------------------------------ */

static void h3l_conn_free(struct h3l_conn *c)
{
	if (!c)
		return;
	while (c->streams)
		h3l_stream_free(c->streams);
	if (c->h3)
		nghttp3_conn_del(c->h3);
	if (c->qc)
		ngtcp2_conn_del(c->qc);
	if (c->tls)
		gnutls_deinit(c->tls);
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

static int h3l_tls_new(struct h3l_conn *c)
{
	gnutls_datum_t alpn = {(unsigned char *)"h3", 2};
	char prio[512];
	const char *host = L.o.authority;
	size_t hostlen = strcspn(host, ":");

	if (host[0] == '[') /* an IPv6 literal: no SNI */
		hostlen = 0;
	snprintf(prio, sizeof(prio), "%%DISABLE_TLS13_COMPAT_MODE:%s",
		 L.o.priority);
	if (gnutls_init(&c->tls, GNUTLS_CLIENT | GNUTLS_NO_END_OF_EARLY_DATA) !=
		0 ||
	    gnutls_priority_set_direct(c->tls, prio, NULL) != 0 ||
	    ngtcp2_crypto_gnutls_configure_client_session(c->tls) != 0 ||
	    gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, L.cred) !=
		0 ||
	    gnutls_alpn_set_protocols(c->tls, &alpn, 1,
				      GNUTLS_ALPN_MANDATORY) != 0 ||
	    (hostlen && gnutls_server_name_set(c->tls, GNUTLS_NAME_DNS, host,
					       hostlen) != 0))
		return -1;
	c->ref.get_conn = h3l_get_conn;
	c->ref.user_data = c;
	gnutls_session_set_ptr(c->tls, &c->ref);
	ngtcp2_conn_set_tls_native_handle(c->qc, c->tls);
	return 0;
}

/* A new connection to the server, its Initial not sent yet: the
 * connection, or NULL (said on stderr). */
static struct h3l_conn *h3l_conn_new(void)
{
	ngtcp2_callbacks cb = {
	    .client_initial = ngtcp2_crypto_client_initial_cb,
	    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
	    .handshake_completed = h3l_handshake_completed,
	    .encrypt = ngtcp2_crypto_encrypt_cb,
	    .decrypt = ngtcp2_crypto_decrypt_cb,
	    .hp_mask = ngtcp2_crypto_hp_mask_cb,
	    .recv_stream_data = h3l_recv_stream_data,
	    .acked_stream_data_offset = h3l_acked_stream_data_offset,
	    .stream_close = h3l_quic_stream_close,
	    .recv_retry = ngtcp2_crypto_recv_retry_cb,
	    .rand = h3l_rand,
	    .get_new_connection_id = h3l_new_cid,
	    .update_key = ngtcp2_crypto_update_key_cb,
	    .stream_reset = h3l_stream_reset,
	    .extend_max_stream_data = h3l_extend_max_stream_data,
	    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
	    .delete_crypto_cipher_ctx =
		ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
	    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
	    .stream_stop_sending = h3l_stream_stop_sending,
	    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
	    .recv_rx_key = h3l_recv_rx_key,
	};
	ngtcp2_settings settings;
	ngtcp2_transport_params params;
	ngtcp2_cid dcid, scid;
	socklen_t len = sizeof(struct sockaddr_storage);
	struct h3l_conn *c;
	int rv;

	c = calloc(1, sizeof(*c));
	if (!c) {
		fprintf(stderr, "h3load: out of memory\n");
		return NULL;
	}
	ngtcp2_connection_close_error_default(&c->err);
	c->fd = socket(L.o.addr.ss_family,
		       SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0 ||
	    connect(c->fd, (struct sockaddr *)&L.o.addr, L.o.addrlen) != 0 ||
	    getsockname(c->fd, (struct sockaddr *)&c->local, &len) != 0) {
		fprintf(stderr, "h3load: socket: %s\n", strerror(errno));
		goto fail;
	}
	c->path.local.addr = (ngtcp2_sockaddr *)&c->local;
	c->path.local.addrlen = len;
	c->path.remote.addr = (ngtcp2_sockaddr *)&L.o.addr;
	c->path.remote.addrlen = L.o.addrlen;

	dcid.datalen = H3L_CIDLEN + 2;
	scid.datalen = H3L_CIDLEN;
	if (gnutls_rnd(GNUTLS_RND_RANDOM, dcid.data, dcid.datalen) != 0 ||
	    gnutls_rnd(GNUTLS_RND_RANDOM, scid.data, scid.datalen) != 0)
		goto fail;

	ngtcp2_settings_default(&settings);
	settings.initial_ts = h3l_now();
	settings.handshake_timeout = H3L_HANDSHAKE_TIMEOUT;
	settings.max_window = 6 * 1024 * 1024;
	settings.max_stream_window = 4 * 1024 * 1024;
	settings.no_pmtud = 1;
	if (getenv("H3LOAD_DEBUG"))
		settings.log_printf = h3l_debug;
	ngtcp2_transport_params_default(&params);
	params.initial_max_stream_data_bidi_local = 256 * 1024;
	params.initial_max_stream_data_uni = 256 * 1024;
	params.initial_max_data = 1024 * 1024;
	params.initial_max_streams_uni = 3;
	params.max_idle_timeout =
	    (ngtcp2_duration)(L.o.idle * (double)NGTCP2_SECONDS);

	rv = ngtcp2_conn_client_new(&c->qc, &dcid, &scid, &c->path,
				    NGTCP2_PROTO_VER_V1, &cb, &settings,
				    &params, NULL, c);
	if (rv != 0) {
		fprintf(stderr, "h3load: ngtcp2_conn_client_new: %s\n",
			ngtcp2_strerror(rv));
		goto fail;
	}
	if (h3l_tls_new(c) != 0) {
		fprintf(stderr, "h3load: GnuTLS session set-up failed (is "
				"--priority right?)\n");
		goto fail;
	}
	return c;
fail:
	h3l_conn_free(c);
	return NULL;
}

/* c ends with the error ngtcp2 reported (rv) unless a callback said
 * more: the CONNECTION_CLOSE of ours says it. */
static void h3l_conn_fail(struct h3l_conn *c, int rv)
{
	c->finished = true;
	c->failed = true;
	if (!c->why)
		c->why = ngtcp2_strerror(rv);
	if (c->err.error_code)
		return;
	if (rv == NGTCP2_ERR_CRYPTO)
		ngtcp2_connection_close_error_set_transport_error_tls_alert(
		    &c->err, ngtcp2_conn_get_tls_alert(c->qc), NULL, 0);
	else
		ngtcp2_connection_close_error_set_transport_error_liberr(
		    &c->err, rv, NULL, 0);
}

/* Send what c has to send: requests, ACKs, retransmissions, up to its
 * send quantum (the rest when its timer says). 0 or -1 (c failed). */
static int h3l_conn_write(struct h3l_conn *c)
{
	ngtcp2_tstamp ts = h3l_now();
	size_t maxudp = ngtcp2_conn_get_max_tx_udp_payload_size(c->qc);
	size_t maxpkt = ngtcp2_conn_get_send_quantum(c->qc) / maxudp;
	ngtcp2_path_storage ps;
	ngtcp2_pkt_info pi;
	size_t npkt = 0;

	if (c->finished)
		return 0;
	if (h3l_submit(c) != 0) {
		h3l_conn_fail(c, NGTCP2_ERR_INTERNAL);
		return -1;
	}
	if (maxudp > sizeof(L.tx))
		maxudp = sizeof(L.tx);
	if (maxpkt == 0)
		maxpkt = 1;
	ngtcp2_path_storage_zero(&ps);
	for (;;) {
		nghttp3_vec vec[H3L_VECS];
		nghttp3_ssize nvec = 0;
		ngtcp2_ssize nwrite, ndatalen = -1;
		uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
		int64_t sid = -1;
		int fin = 0;

		if (c->h3 && ngtcp2_conn_get_max_data_left(c->qc)) {
			nvec = nghttp3_conn_writev_stream(c->h3, &sid, &fin,
							  vec, H3L_VECS);
			if (nvec < 0) {
				c->why = nghttp3_strerror((int)nvec);
				ngtcp2_connection_close_error_set_application_error(
				    &c->err,
				    nghttp3_err_infer_quic_app_error_code(
					(int)nvec),
				    NULL, 0);
				h3l_conn_fail(c, NGTCP2_ERR_INTERNAL);
				return -1;
			}
		}
		if (fin)
			flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
		nwrite = ngtcp2_conn_writev_stream(
		    c->qc, &ps.path, &pi, L.tx, maxudp, &ndatalen, flags, sid,
		    (const ngtcp2_vec *)vec, (size_t)nvec, ts);
		if (nwrite < 0) {
			int rv = 0;

			switch (nwrite) {
			case NGTCP2_ERR_STREAM_DATA_BLOCKED:
				nghttp3_conn_block_stream(c->h3, sid);
				break;
			case NGTCP2_ERR_STREAM_SHUT_WR:
				nghttp3_conn_shutdown_stream_write(c->h3, sid);
				break;
			case NGTCP2_ERR_WRITE_MORE:
				rv = nghttp3_conn_add_write_offset(
				    c->h3, sid, (size_t)ndatalen);
				break;
			default:
				h3l_conn_fail(c, (int)nwrite);
				return -1;
			}
			if (rv != 0) {
				c->why = nghttp3_strerror(rv);
				h3l_conn_fail(c, NGTCP2_ERR_INTERNAL);
				return -1;
			}
			continue;
		}
		if (ndatalen >= 0 && nghttp3_conn_add_write_offset(
					 c->h3, sid, (size_t)ndatalen) != 0) {
			c->why = "nghttp3_conn_add_write_offset failed";
			h3l_conn_fail(c, NGTCP2_ERR_INTERNAL);
			return -1;
		}
		if (nwrite == 0)
			break;
		/* EAGAIN: the datagram is lost, QUIC's recovery resends */
		if (send(c->fd, L.tx, (size_t)nwrite, 0) < 0 &&
		    errno != EAGAIN && errno != EINTR) {
			c->why = strerror(errno);
			h3l_conn_fail(c, NGTCP2_ERR_INTERNAL);
			return -1;
		}
		if (++npkt >= maxpkt)
			break;
	}
	ngtcp2_conn_update_pkt_tx_time(c->qc, ts);
	return 0;
}

/* Read what c's socket holds (a batch at most) into ngtcp2. */
static void h3l_conn_read(struct h3l_conn *c)
{
	for (int i = 0; i < H3L_RX_BATCH && !c->finished; i++) {
		ngtcp2_pkt_info pi = {0};
		ssize_t n;
		int rv;

		n = recv(c->fd, L.rx, sizeof(L.rx), 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			c->why = strerror(errno); /* ECONNREFUSED: no server */
			c->closed = true;
			h3l_conn_fail(c, NGTCP2_ERR_INTERNAL);
			return;
		}
		rv = ngtcp2_conn_read_pkt(c->qc, &c->path, &pi, L.rx, (size_t)n,
					  h3l_now());
		if (rv == 0)
			continue;
		if (rv == NGTCP2_ERR_DRAINING) {
			/* the server closed: an error unless it had said
			 * GOAWAY and nothing was in flight */
			ngtcp2_connection_close_error cc;

			ngtcp2_conn_get_connection_close_error(c->qc, &cc);
			c->finished = true;
			c->closed = true;
			c->failed = cc.error_code != 0 &&
				    cc.error_code != NGHTTP3_H3_NO_ERROR;
			c->failed = c->failed || c->inflight > 0 || !c->goaway;
			c->why = "the server closed the connection";
			return;
		}
		h3l_conn_fail(c, rv);
		return;
	}
}

/* c's timer, when it is due. */
static void h3l_conn_expiry(struct h3l_conn *c, ngtcp2_tstamp now)
{
	int rv;

	if (c->finished || ngtcp2_conn_get_expiry(c->qc) > now)
		return;
	rv = ngtcp2_conn_handle_expiry(c->qc, now);
	if (rv == 0)
		return;
	if (rv == NGTCP2_ERR_IDLE_CLOSE && !c->why)
		c->why = !c->handshake_done ? "ERR_IDLE_CLOSE"
			 : !c->goaway	    ? "ERR_IDLE_CLOSE, no GOAWAY"
			 : c->inflight	    ? "ERR_IDLE_CLOSE after a GOAWAY, "
					      "requests in flight"
					    : "ERR_IDLE_CLOSE after a GOAWAY, "
					      "nothing in flight";
	c->goaway_idle = rv == NGTCP2_ERR_IDLE_CLOSE && c->handshake_done &&
			 c->goaway && !c->inflight;
	h3l_conn_fail(c, rv);
	if (rv == NGTCP2_ERR_IDLE_CLOSE || rv == NGTCP2_ERR_HANDSHAKE_TIMEOUT)
		c->closed = true; /* nothing to say to the server */
}

/* End c: its CONNECTION_CLOSE (H3_NO_ERROR, or the error) sent unless
 * the server's ended it, what it had in flight counted failed, the
 * connection freed. */
static void h3l_conn_end(struct h3l_conn *c)
{
	if (!c->closed && !ngtcp2_conn_is_in_closing_period(c->qc) &&
	    !ngtcp2_conn_is_in_draining_period(c->qc)) {
		ngtcp2_path_storage ps;
		ngtcp2_pkt_info pi;
		ngtcp2_ssize n;

		if (!c->failed && c->h3)
			ngtcp2_connection_close_error_set_application_error(
			    &c->err, NGHTTP3_H3_NO_ERROR, NULL, 0);
		ngtcp2_path_storage_zero(&ps);
		n = ngtcp2_conn_write_connection_close(c->qc, &ps.path, &pi,
						       L.tx, sizeof(L.tx),
						       &c->err, h3l_now());
		if (n > 0 && send(c->fd, L.tx, (size_t)n, 0) < 0) {
			/* the server will time the connection out */
		}
	}
	if (c->failed && L.running && c->goaway_idle) {
		L.goaway_idle++; /* no request lost: the server said goodbye */
	} else if (c->failed && L.running) {
		L.conn_errors++;
		h3l_log_error(c, c->handshake_done ? "after the handshake"
						   : "in the handshake");
	}
	for (struct h3l_stream *s = c->streams; s; s = s->next)
		h3l_count(c, s, false);
	h3l_conn_free(c);
}

/* ---- options and the loop --------------------------------------------- */

static void h3l_usage(void)
{
	fprintf(stderr, "usage: h3load [-c CONNS] [-m STREAMS] [-D SECONDS] "
			"[-n REQUESTS]\n"
			"              [--authority HOST] [--handshakes] "
			"[--priority STRING] [--idle SECONDS]\n"
			"              https://ADDR:PORT[/PATH] | ADDR:PORT\n");
	exit(2);
}

/* ADDR:PORT or [ADDR6]:PORT, after an optional https://, then the path:
 * into L.o. 0 or -1. */
static int h3l_parse_url(const char *url)
{
	struct addrinfo hints = {.ai_socktype = SOCK_DGRAM,
				 .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV},
			*ai;
	char host[256], *port;
	const char *slash;
	size_t len;

	if (strncmp(url, "https://", 8) == 0)
		url += 8;
	slash = strchr(url, '/');
	len = slash ? (size_t)(slash - url) : strlen(url);
	if (len == 0 || len >= sizeof(host))
		return -1;
	memcpy(host, url, len);
	host[len] = '\0';
	if (!L.o.authority) {
		memcpy(L.authority, url, len);
		L.authority[len] = '\0';
		L.o.authority = L.authority;
	}
	L.o.path = slash ? slash : "/";
	port = strrchr(host, ':');
	if (!port || port == host)
		return -1;
	*port++ = '\0';
	if (host[0] == '[') {
		size_t hl = strlen(host);

		if (hl < 3 || host[hl - 1] != ']')
			return -1;
		host[hl - 1] = '\0';
		memmove(host, host + 1, hl - 1);
	}
	if (getaddrinfo(host, port, &hints, &ai) != 0)
		return -1;
	memcpy(&L.o.addr, ai->ai_addr, ai->ai_addrlen);
	L.o.addrlen = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

static void h3l_nv(nghttp3_nv *nv, const char *name, const char *value)
{
	nv->name = (uint8_t *)name;
	nv->namelen = strlen(name);
	nv->value = (uint8_t *)value;
	nv->valuelen = strlen(value);
	nv->flags = NGHTTP3_NV_FLAG_NONE;
}

static void h3l_options(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"authority", required_argument, NULL, 'a'},
	    {"handshakes", no_argument, NULL, 'H'},
	    {"priority", required_argument, NULL, 'P'},
	    {"idle", required_argument, NULL, 'I'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int ch;

	L.o.conns = 1;
	L.o.streams = 1;
	L.o.duration = 10;
	L.o.idle = H3L_IDLE_TIMEOUT_S;
	L.o.priority = H3L_PRIORITY;
	while ((ch = getopt_long(argc, argv, "c:m:D:n:h", lo, NULL)) != -1) {
		switch (ch) {
		case 'c':
			if (bench_parse_u64(optarg, 1, H3L_MAX_CONNS,
					    &L.o.conns) != 0)
				h3l_usage();
			break;
		case 'm':
			if (bench_parse_u64(optarg, 1, H3L_MAX_STREAMS,
					    &L.o.streams) != 0)
				h3l_usage();
			break;
		case 'D':
			if (bench_parse_seconds(optarg, 3600, &L.o.duration) !=
			    0)
				h3l_usage();
			break;
		case 'n':
			if (bench_parse_u64(optarg, 1, UINT64_MAX / 2,
					    &L.o.requests) != 0)
				h3l_usage();
			break;
		case 'a':
			L.o.authority = optarg;
			break;
		case 'H':
			L.o.handshakes = true;
			break;
		case 'P':
			L.o.priority = optarg;
			break;
		case 'I':
			if (bench_parse_seconds(optarg, 600, &L.o.idle) != 0 ||
			    L.o.idle < 0.1)
				h3l_usage();
			break;
		default:
			h3l_usage();
		}
	}
	if (optind != argc - 1 || h3l_parse_url(argv[optind]) != 0)
		h3l_usage();
	h3l_nv(&L.nva[0], ":method", "GET");
	h3l_nv(&L.nva[1], ":scheme", "https");
	h3l_nv(&L.nva[2], ":authority", L.o.authority);
	h3l_nv(&L.nva[3], ":path", L.o.path);
	h3l_nv(&L.nva[4], "user-agent", "h3load");
}

/* Open connection slot i (after the one before it ended): 0 or -1. */
static int h3l_open(size_t i)
{
	L.conns[i] = h3l_conn_new();
	if (!L.conns[i])
		return -1;
	if (h3l_conn_write(L.conns[i]) != 0) {
		h3l_conn_end(L.conns[i]);
		L.conns[i] = NULL;
		return -1;
	}
	return 0;
}

/* Until -D, -n, a signal or a server that never answers: ppoll on the
 * sockets and the earliest timer, then reads, timers, writes, and
 * finished connections replaced. 0, or -1 when a connection could not
 * be made at all. */
static int h3l_run(uint64_t start)
{
	uint64_t deadline =
	    start + (uint64_t)(L.o.duration * (double)BENCH_NSEC_PER_SEC);
	struct pollfd pfd[H3L_MAX_CONNS];
	size_t n = (size_t)L.o.conns;

	for (size_t i = 0; i < n; i++)
		if (h3l_open(i) != 0)
			return -1;
	while (!bench_stop) {
		ngtcp2_tstamp now = h3l_now(), next = deadline;
		struct timespec ts;

		if (now >= deadline ||
		    (L.o.requests && L.done + L.failed >= L.o.requests) ||
		    (L.handshakes == 0 && L.conn_errors >= H3L_GIVE_UP_ERRORS))
			break;
		for (size_t i = 0; i < n; i++) {
			ngtcp2_tstamp e =
			    ngtcp2_conn_get_expiry(L.conns[i]->qc);

			if (e < next)
				next = e;
			pfd[i] = (struct pollfd){.fd = L.conns[i]->fd,
						 .events = POLLIN};
		}
		next = next > now ? next - now : 0;
		ts.tv_sec = (time_t)(next / BENCH_NSEC_PER_SEC);
		ts.tv_nsec = (long)(next % BENCH_NSEC_PER_SEC);
		if (ppoll(pfd, n, &ts, NULL) < 0 && errno != EINTR) {
			fprintf(stderr, "h3load: ppoll: %s\n", strerror(errno));
			return -1;
		}
		now = h3l_now();
		for (size_t i = 0; i < n; i++) {
			struct h3l_conn *c = L.conns[i];

			if (pfd[i].revents & (POLLIN | POLLERR))
				h3l_conn_read(c);
			h3l_conn_expiry(c, now);
			h3l_conn_write(c);
			if (!c->finished)
				continue;
			h3l_conn_end(c);
			L.conns[i] = NULL;
			if (h3l_open(i) != 0)
				return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t start, end;
	double secs;
	int rv;

	h3l_options(argc, argv);
	bench_catch_stop();
	if (gnutls_certificate_allocate_credentials(&L.cred) != 0) {
		fprintf(stderr, "h3load: GnuTLS credentials failed\n");
		return 1;
	}
	start = h3l_now();
	L.running = true;
	rv = h3l_run(start);
	L.running = false;
	end = h3l_now();
	for (size_t i = 0; i < L.o.conns; i++) {
		if (L.conns[i])
			h3l_conn_end(L.conns[i]);
		L.conns[i] = NULL;
	}
	gnutls_certificate_free_credentials(L.cred);
	secs = (double)(end - start) / (double)BENCH_NSEC_PER_SEC;
	printf("h3load: requests=%" PRIu64 " failed=%" PRIu64 " non2xx=%" PRIu64
	       " bytes=%" PRIu64 " handshakes=%" PRIu64 " conn_errors=%" PRIu64
	       " seconds=%.3f rps=%.1f hps=%.1f"
	       " conns=%" PRIu64 " streams=%" PRIu64
	       " mode=%s tls=%s cipher=%s group=%s goaway_idle=%" PRIu64 "\n",
	       L.done, L.failed, L.non2xx, L.bytes, L.handshakes, L.conn_errors,
	       secs, secs > 0 ? (double)L.done / secs : 0.0,
	       secs > 0 ? (double)L.handshakes / secs : 0.0, L.o.conns,
	       L.o.streams, L.o.handshakes ? "handshakes" : "load",
	       L.tls[0] ? L.tls : "-", L.cipher[0] ? L.cipher : "-",
	       L.group[0] ? L.group : "-", L.goaway_idle);
	return rv == 0 && L.done > 0 && L.failed == 0 && L.conn_errors == 0 ? 0
									    : 1;
}
