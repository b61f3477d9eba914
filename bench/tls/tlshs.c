// SPDX-License-Identifier: BSD-2-Clause
/*
 * tlshs - TLS handshakes per second against a server, for bench/tls.
 *
 *   tlshs --port N [--dst ADDR] [--sni NAME] [--duration S] [--conns N]
 *         [--key ecdsa|rsa|any] [--resume] [--once]
 *
 * --conns threads (default 4), each closed-loop for --duration seconds
 * (default 10): connect (TCP_NODELAY), SSL_connect, then the close:
 * close_notify sent and the peer's awaited (SSL_shutdown twice; the
 * NewSessionTicket a TLS 1.3 server sends after the handshake is read on
 * the way), close(2), the next connection at once. No HTTP inside: what is
 * measured is the server's handshake and close, nothing of its proxy.
 *
 * --key forces the server's certificate type by the client's signature
 * algorithms (TLS 1.3 and 1.2 alike): ecdsa offers only
 * ecdsa_secp256r1_sha256, rsa only RSA-PSS and PKCS#1 with SHA-256..512;
 * the peer certificate's key type is checked on every handshake and a
 * mismatch counted as an error. --resume: each thread makes one full
 * handshake first and then resumes with the session (ticket) it got,
 * replacing it with the one each resumed handshake brings; a handshake
 * that was not resumed counts in "full". --once (with --resume): each
 * ticket is offered once, as browsers do (RFC 8446, C.4: clients
 * SHOULD NOT reuse a ticket); a connection that brings no new ticket
 * leaves the next one a full handshake. The certificate is not verified
 * (the bench makes its own).
 *
 * One line at the end:
 *
 *   tlshs: conns=N seconds=F handshakes=N resumed=N full=N errors=N
 *          hps=F p50_us=F p99_us=F proto=TLSv1.3 cipher=NAME
 *
 * (latencies: connect to handshake done, histogram of 10 µs buckets up
 * to 100 ms). Exit 0 when at least one handshake completed and none
 * failed, 1 otherwise, 2 on a usage error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "../common.h"

#define HS_MAX_CONNS 256
#define HS_BUCKET_NS 10000
#define HS_MAX_NS 100000000ULL /* 100 ms */
#define HS_BUCKETS (HS_MAX_NS / HS_BUCKET_NS)

enum hs_key { HS_ANY, HS_ECDSA, HS_RSA };

struct hs_opts {
	struct sockaddr_in addr;
	const char *sni;
	double duration;
	uint64_t conns;
	enum hs_key key;
	bool resume;
	bool once;
};

struct hs_thread {
	pthread_t tid;
	const struct hs_opts *o;
	SSL_CTX *ctx;
	uint64_t deadline;
	uint64_t handshakes, resumed, errors;
	uint64_t *hist; /* HS_BUCKETS counters */
	SSL_SESSION *sess;
	char proto[32], cipher[64], last_err[160];
};

/* The thread a connection's SSL belongs to (ex_data index), for the
 * new-session callback. */
static int hs_ex_index;

static int hs_new_session(SSL *ssl, SSL_SESSION *sess)
{
	struct hs_thread *t = SSL_get_ex_data(ssl, hs_ex_index);

	if (!t || !t->o->resume)
		return 0;
	if (t->sess)
		SSL_SESSION_free(t->sess);
	t->sess = sess;
	return 1; /* we keep the reference */
}

static void hs_error(struct hs_thread *t, const char *what)
{
	unsigned long e = ERR_get_error();
	char buf[120] = "";

	if (e)
		ERR_error_string_n(e, buf, sizeof(buf));
	snprintf(t->last_err, sizeof(t->last_err), "%s%s%s", what,
		 *buf ? ": " : "", buf);
	ERR_clear_error();
	t->errors++;
}

/* The certificate's key type is the one asked for. */
static bool hs_key_ok(struct hs_thread *t, SSL *ssl)
{
	X509 *peer;
	int id;

	if (t->o->key == HS_ANY)
		return true;
	peer = SSL_get1_peer_certificate(ssl);
	if (!peer)
		return false;
	id = EVP_PKEY_get_base_id(X509_get0_pubkey(peer));
	X509_free(peer);
	return t->o->key == HS_ECDSA ? id == EVP_PKEY_EC : id == EVP_PKEY_RSA;
}

/* One connection: connect, handshake, close. */
static void hs_one(struct hs_thread *t)
{
	int fd, one = 1;
	SSL *ssl = NULL;
	uint64_t t0, ns;

	t0 = bench_now_ns();
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		hs_error(t, "socket");
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (const struct sockaddr *)&t->o->addr,
		    sizeof(t->o->addr)) < 0) {
		snprintf(t->last_err, sizeof(t->last_err), "connect: %s",
			 strerror(errno));
		t->errors++;
		close(fd);
		return;
	}
	ssl = SSL_new(t->ctx);
	if (!ssl) {
		hs_error(t, "SSL_new");
		close(fd);
		return;
	}
	SSL_set_ex_data(ssl, hs_ex_index, t);
	SSL_set_fd(ssl, fd);
	if (t->o->sni)
		SSL_set_tlsext_host_name(ssl, t->o->sni);
	if (t->o->resume && t->sess) {
		SSL_set_session(ssl, t->sess);
		if (t->o->once) {
			/* used: only a ticket this connection brings serves
			 * the next one */
			SSL_SESSION_free(t->sess);
			t->sess = NULL;
		}
	}
	if (SSL_connect(ssl) != 1) {
		hs_error(t, "SSL_connect");
		goto out;
	}
	ns = bench_now_ns() - t0;
	t->hist[ns >= HS_MAX_NS ? HS_BUCKETS - 1 : ns / HS_BUCKET_NS]++;
	if (!hs_key_ok(t, ssl)) {
		snprintf(t->last_err, sizeof(t->last_err),
			 "the server's certificate is not of the key type "
			 "asked for");
		t->errors++;
		goto out;
	}
	t->handshakes++;
	if (SSL_session_reused(ssl))
		t->resumed++;
	if (!*t->proto) {
		snprintf(t->proto, sizeof(t->proto), "%s",
			 SSL_get_version(ssl));
		snprintf(t->cipher, sizeof(t->cipher), "%s",
			 SSL_get_cipher_name(ssl));
	}
	/* close_notify, then the peer's (reading the ticket on the way); a
	 * peer that closes without one is fine */
	if (SSL_shutdown(ssl) == 0)
		SSL_shutdown(ssl);
	ERR_clear_error();
out:
	SSL_free(ssl);
	close(fd);
}

static void *hs_run(void *arg)
{
	struct hs_thread *t = arg;

	while (!bench_stop && bench_now_ns() < t->deadline)
		hs_one(t);
	return NULL;
}

static SSL_CTX *hs_ctx(const struct hs_opts *o)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (!ctx)
		return NULL;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	if (o->resume) {
		SSL_CTX_set_session_cache_mode(
		    ctx,
		    SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
		SSL_CTX_sess_set_new_cb(ctx, hs_new_session);
	} else {
		SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
		SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
	}
	if (o->key == HS_ECDSA &&
	    !SSL_CTX_set1_sigalgs_list(ctx, "ecdsa_secp256r1_sha256"))
		goto fail;
	if (o->key == HS_RSA &&
	    !SSL_CTX_set1_sigalgs_list(
		ctx, "rsa_pss_rsae_sha256:rsa_pss_rsae_sha384:"
		     "rsa_pss_rsae_sha512:rsa_pkcs1_sha256:"
		     "rsa_pkcs1_sha384:rsa_pkcs1_sha512"))
		goto fail;
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

static double hs_pct(const uint64_t *hist, uint64_t n, double p)
{
	uint64_t want = (uint64_t)(p * (double)n), seen = 0, i;

	if (!n)
		return 0;
	for (i = 0; i < HS_BUCKETS; i++) {
		seen += hist[i];
		if (seen > want)
			return (double)(i * HS_BUCKET_NS + HS_BUCKET_NS / 2) /
			       1000.0;
	}
	return (double)HS_MAX_NS / 1000.0;
}

static void usage(void)
{
	fprintf(
	    stderr,
	    "usage: tlshs --port N [--dst ADDR] [--sni NAME] [--duration S]\n"
	    "             [--conns N] [--key ecdsa|rsa|any] [--resume] "
	    "[--once]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"dst", required_argument, NULL, 'd'},
	    {"port", required_argument, NULL, 'p'},
	    {"sni", required_argument, NULL, 's'},
	    {"duration", required_argument, NULL, 't'},
	    {"conns", required_argument, NULL, 'c'},
	    {"key", required_argument, NULL, 'k'},
	    {"resume", no_argument, NULL, 'r'},
	    {"once", no_argument, NULL, 'o'},
	    {NULL, 0, NULL, 0},
	};
	struct hs_opts o = {.duration = 10, .conns = 4, .key = HS_ANY};
	struct hs_thread *th;
	uint64_t port = 0, hs = 0, res = 0, err = 0, i, j, t0, t1;
	uint64_t *hist;
	const char *last = "";
	double secs;
	int c;

	o.addr.sin_family = AF_INET;
	o.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (inet_pton(AF_INET, optarg, &o.addr.sin_addr) != 1)
				usage();
			break;
		case 'p':
			if (bench_parse_u64(optarg, 1, 65535, &port))
				usage();
			break;
		case 's':
			o.sni = optarg;
			break;
		case 't':
			if (bench_parse_seconds(optarg, 3600, &o.duration))
				usage();
			break;
		case 'c':
			if (bench_parse_u64(optarg, 1, HS_MAX_CONNS, &o.conns))
				usage();
			break;
		case 'k':
			if (!strcmp(optarg, "ecdsa"))
				o.key = HS_ECDSA;
			else if (!strcmp(optarg, "rsa"))
				o.key = HS_RSA;
			else if (!strcmp(optarg, "any"))
				o.key = HS_ANY;
			else
				usage();
			break;
		case 'r':
			o.resume = true;
			break;
		case 'o':
			o.resume = o.once = true;
			break;
		default:
			usage();
		}
	}
	if (!port || optind != argc)
		usage();
	o.addr.sin_port = htons((uint16_t)port);
	bench_catch_stop();
	hs_ex_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);

	th = calloc(o.conns, sizeof(*th));
	hist = calloc(HS_BUCKETS, sizeof(*hist));
	if (!th || !hist) {
		fprintf(stderr, "tlshs: out of memory\n");
		return 1;
	}
	t0 = bench_now_ns();
	for (i = 0; i < o.conns; i++) {
		th[i].o = &o;
		th[i].ctx = hs_ctx(&o);
		th[i].hist = calloc(HS_BUCKETS, sizeof(uint64_t));
		th[i].deadline = t0 + (uint64_t)(o.duration * 1e9);
		if (!th[i].ctx || !th[i].hist) {
			fprintf(stderr, "tlshs: cannot set up the client\n");
			return 1;
		}
		if (pthread_create(&th[i].tid, NULL, hs_run, &th[i])) {
			fprintf(stderr, "tlshs: cannot start a thread\n");
			return 1;
		}
	}
	for (i = 0; i < o.conns; i++)
		pthread_join(th[i].tid, NULL);
	t1 = bench_now_ns();
	secs = (double)(t1 - t0) / 1e9;
	for (i = 0; i < o.conns; i++) {
		hs += th[i].handshakes;
		res += th[i].resumed;
		err += th[i].errors;
		for (j = 0; j < HS_BUCKETS; j++)
			hist[j] += th[i].hist[j];
		if (*th[i].last_err)
			last = th[i].last_err;
	}
	printf("tlshs: conns=%llu seconds=%.3f handshakes=%llu resumed=%llu "
	       "full=%llu errors=%llu hps=%.1f p50_us=%.0f p99_us=%.0f "
	       "proto=%s cipher=%s\n",
	       (unsigned long long)o.conns, secs, (unsigned long long)hs,
	       (unsigned long long)res, (unsigned long long)(hs - res),
	       (unsigned long long)err, (double)hs / secs,
	       hs_pct(hist, hs + err, 0.5), hs_pct(hist, hs + err, 0.99),
	       *th[0].proto ? th[0].proto : "-",
	       *th[0].cipher ? th[0].cipher : "-");
	if (err)
		fprintf(stderr, "tlshs: %llu error(s), the last: %s\n",
			(unsigned long long)err, last);
	for (i = 0; i < o.conns; i++) {
		if (th[i].sess)
			SSL_SESSION_free(th[i].sess);
		SSL_CTX_free(th[i].ctx);
		free(th[i].hist);
	}
	free(th);
	free(hist);
	return hs > 0 && err == 0 ? 0 : 1;
}
