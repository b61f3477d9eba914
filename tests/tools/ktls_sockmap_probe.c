// SPDX-License-Identifier: BSD-2-Clause
/*
 * ktls_sockmap_probe.c - what the running kernel allows between kTLS and a
 * sockhash on one TCP socket (docs/splice.md, "TLS tunnels"):
 *
 *   ktls_sockmap_probe
 *
 * Needs root (a sockhash; the tls module loads for root). On loopback
 * pairs, in each order: kTLS (the tls ULP, then TLS_TX / TLS_RX with a
 * TLS 1.2 AES-GCM-128 key) then the socket into a sockhash; the socket
 * into a sockhash first, then the ULP and the keys; and a socket with the
 * ULP into a second sockhash. Prints one line per step with 0 or the
 * errno's name. Exits 0 when it could run the steps, 1 otherwise.
 */
#include <bpf/bpf.h>
#include <errno.h>
#include <linux/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef TCP_ULP
#define TCP_ULP 31
#endif
#ifndef SOL_TLS
#define SOL_TLS 282
#endif

static int lfd = -1;

/* A connected loopback pair's client socket (its peer kept open). */
static int pair(void)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int c;

	if (getsockname(lfd, (struct sockaddr *)&sa, &len) < 0)
		return -1;
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&sa, len) < 0 ||
	    accept(lfd, NULL, NULL) < 0)
		return -1;
	return c;
}

static const char *res(int rc)
{
	return rc == 0 ? "0" : strerror(-rc);
}

static int ulp(int fd)
{
	return setsockopt(fd, IPPROTO_TCP, TCP_ULP, "tls", 3) ? -errno : 0;
}

static int key(int fd, int dir)
{
	struct tls12_crypto_info_aes_gcm_128 ci;

	memset(&ci, 0, sizeof(ci));
	ci.info.version = TLS_1_2_VERSION;
	ci.info.cipher_type = TLS_CIPHER_AES_GCM_128;
	return setsockopt(fd, SOL_TLS, dir, &ci, sizeof(ci)) ? -errno : 0;
}

static int add(int map, unsigned long long k, int fd)
{
	unsigned long long v = (unsigned long long)fd;

	return bpf_map_update_elem(map, &k, &v, BPF_ANY) ? -errno : 0;
}

int main(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int m1 = bpf_map_create(BPF_MAP_TYPE_SOCKHASH, NULL, 8, 8, 16, NULL);
	int m2 = bpf_map_create(BPF_MAP_TYPE_SOCKHASH, NULL, 8, 8, 16, NULL);
	int c, r1, r2, r3, r4;

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (m1 < 0 || m2 < 0 || lfd < 0 ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(lfd, 8) < 0) {
		fprintf(stderr, "ktls_sockmap_probe: setting up: %s\n",
			strerror(errno));
		return 1;
	}
	c = pair();
	r1 = ulp(c);
	r2 = key(c, TLS_TX);
	r3 = key(c, TLS_RX);
	r4 = add(m1, 1, c);
	printf("kTLS first: ULP %s, TLS_TX %s, TLS_RX %s; then into a "
	       "sockhash: %s\n",
	       res(r1), res(r2), res(r3), res(r4));
	c = pair();
	r1 = add(m1, 2, c);
	r2 = ulp(c);
	r3 = key(c, TLS_TX);
	r4 = key(c, TLS_RX);
	printf("sockhash first: into it %s; then ULP %s, TLS_TX %s, TLS_RX "
	       "%s\n",
	       res(r1), res(r2), res(r3), res(r4));
	r1 = add(m2, 3, c);
	printf("with the ULP, into a second sockhash: %s\n", res(r1));
	return 0;
}
