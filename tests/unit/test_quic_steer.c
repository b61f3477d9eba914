// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_quic_steer.c - edge_quic.bpf.c on real UDP sockets: a reuseport
 * group of "worker" sockets on loopback (IPv4 and IPv6), datagrams from
 * many client ports, and which socket each one reaches. Steered when the
 * destination CID names a worker with a socket, by any source port (a
 * NAT rebinding); the kernel's hash otherwise, never dropped. Needs root
 * (loading BPF); skips otherwise. Runs in the VMs too (tests/run --vm).
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "quicsteer.h"
#include "unit.h"

#define NW 4	/* worker sockets */
#define NCLI 16 /* client sockets (source ports) */

struct group {
	int fam;
	int nw; /* worker sockets in w: NW, 2 * NW after group_grow */
	int w[2 * NW];
	int cli[NCLI];
	struct sockaddr_storage addr;
	socklen_t alen;
	struct quic_steer *qs;
};

static void loopback(int fam, struct sockaddr_storage *ss, socklen_t *len,
		     uint16_t port)
{
	memset(ss, 0, sizeof(*ss));
	if (fam == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;

		a->sin_family = AF_INET;
		a->sin_port = htons(port);
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		*len = sizeof(*a);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons(port);
		a->sin6_addr = in6addr_loopback;
		*len = sizeof(*a);
	}
}

/* worker sockets bound to one free port with SO_REUSEPORT, clients on
 * ephemeral ports; the program attached when attach */
static void group_open(struct group *g, int fam, int attach)
{
	int one = 1;

	memset(g, 0, sizeof(*g));
	g->fam = fam;
	g->nw = NW;
	loopback(fam, &g->addr, &g->alen, 0);
	for (int i = 0; i < NW; i++) {
		g->w[i] = socket(fam, SOCK_DGRAM | SOCK_NONBLOCK, 0);
		ck_assert_int_ge(g->w[i], 0);
		ck_assert_int_eq(setsockopt(g->w[i], SOL_SOCKET, SO_REUSEPORT,
					    &one, sizeof(one)),
				 0);
		ck_assert_msg(
		    bind(g->w[i], (struct sockaddr *)&g->addr, g->alen) == 0,
		    "bind: %s", strerror(errno));
		if (i == 0) /* the port the kernel chose, for the others */
			ck_assert_int_eq(
			    getsockname(g->w[0], (struct sockaddr *)&g->addr,
					&g->alen),
			    0);
	}
	for (int i = 0; i < NCLI; i++) {
		g->cli[i] = socket(fam, SOCK_DGRAM, 0);
		ck_assert_int_ge(g->cli[i], 0);
	}
	if (attach) {
		struct errbuf err;

		errbuf_clear(&err);
		ck_assert_msg(quic_steer_attach(g->w, NW, 0, -1, -1, true,
						&g->qs, &err) == 0,
			      "quic_steer_attach: %s", err.msg);
	}
}

static void group_close(struct group *g)
{
	quic_steer_free(g->qs);
	for (int i = 0; i < g->nw; i++)
		if (g->w[i] >= 0)
			close(g->w[i]);
	for (int i = 0; i < NCLI; i++)
		close(g->cli[i]);
}

/* send pkt from client c; the index of the worker socket it reached (it
 * must reach exactly one within a second), its payload checked */
static int deliver(struct group *g, int c, const uint8_t *pkt, size_t len)
{
	struct pollfd p[2 * NW];
	uint8_t buf[2048];
	int got = -1;

	ck_assert_int_eq(sendto(g->cli[c], pkt, len, 0,
				(struct sockaddr *)&g->addr, g->alen),
			 (ssize_t)len);
	for (int i = 0; i < g->nw; i++) {
		p[i].fd = g->w[i];
		p[i].events = POLLIN;
	}
	ck_assert_msg(poll(p, (nfds_t)g->nw, 1000) > 0,
		      "datagram %zu bytes lost", len);
	for (int i = 0; i < g->nw; i++) {
		ssize_t n;

		if (g->w[i] < 0 || !(p[i].revents & POLLIN))
			continue;
		n = recv(g->w[i], buf, sizeof(buf), 0);
		ck_assert_int_eq(n, (ssize_t)len);
		ck_assert(memcmp(buf, pkt, len) == 0);
		ck_assert_msg(got < 0, "one datagram reached two sockets");
		got = i;
	}
	return got;
}

/* a 1-RTT packet (short header) to cid, with a few bytes of "payload" */
static size_t short_pkt(uint8_t *pkt, const uint8_t *cid)
{
	pkt[0] = 0x40 | 0x01;
	memcpy(pkt + 1, cid, EDGE_QUIC_CID_LEN);
	memset(pkt + 1 + EDGE_QUIC_CID_LEN, 0xab, 24);
	return 1 + EDGE_QUIC_CID_LEN + 24;
}

/* a long-header packet: version, type bits, DCID of dlen bytes */
static size_t long_pkt(uint8_t *pkt, uint32_t version, unsigned type,
		       const uint8_t *dcid, unsigned dlen)
{
	size_t n = 0;

	pkt[n++] = (uint8_t)(0xc0 | (type << 4));
	pkt[n++] = (uint8_t)(version >> 24);
	pkt[n++] = (uint8_t)(version >> 16);
	pkt[n++] = (uint8_t)(version >> 8);
	pkt[n++] = (uint8_t)version;
	pkt[n++] = (uint8_t)dlen;
	memcpy(pkt + n, dcid, dlen);
	n += dlen;
	pkt[n++] = 8; /* SCID */
	memset(pkt + n, 0x5a, 8 + 40);
	return n + 8 + 40;
}

static void counts(struct group *g, uint64_t c[EDGE_QUIC_CNT_SLOTS])
{
	ck_assert_int_eq(quic_steer_counts(g->qs, c), 0);
}

START_TEST(test_cid)
{
	uint8_t a[EDGE_QUIC_CID_LEN], b[EDGE_QUIC_CID_LEN];

	ck_assert_int_eq(quic_cid_make(a, 0, 0), 0);
	ck_assert_int_eq(quic_cid_worker(a, sizeof(a)), 0);
	ck_assert_int_eq(quic_cid_make(a, 0, 255), 0);
	ck_assert_int_eq(quic_cid_worker(a, sizeof(a)), 255);
	ck_assert_int_eq(quic_cid_make(b, 0, 255), 0);
	ck_assert(memcmp(a, b, sizeof(a)) != 0); /* random */
	ck_assert_int_eq(quic_cid_make(a, 0, EDGE_QUIC_WORKERS_MAX), -1);
	ck_assert_int_eq(quic_cid_make(a, EDGE_QUIC_GENS, 0), -1);
	ck_assert_int_eq(quic_cid_make(a, 1, 7), 0);
	ck_assert_int_eq(quic_cid_worker(a, sizeof(a)), 7);
	ck_assert_int_eq(quic_cid_gen(a, sizeof(a)), 1);
	ck_assert_int_eq(quic_cid_make(a, 0, 7), 0);
	ck_assert_int_eq(quic_cid_gen(a, sizeof(a)), 0);
	ck_assert_int_eq(quic_cid_worker(a, 8), -1);
	ck_assert_int_eq(quic_cid_worker(a, 20), -1);
}
END_TEST

/* every worker's CIDs reach it, from every client port, in 1-RTT and
 * Handshake packets, in versions 1 and 2 */
static void steer_family(int fam)
{
	struct group g;
	uint8_t cid[EDGE_QUIC_CID_LEN], pkt[256];
	uint64_t c0[EDGE_QUIC_CNT_SLOTS], c1[EDGE_QUIC_CNT_SLOTS];
	unsigned sent = 0;

	group_open(&g, fam, 1);
	counts(&g, c0);
	for (int w = 0; w < NW; w++) {
		ck_assert_int_eq(quic_cid_make(cid, 0, (unsigned)w), 0);
		for (int c = 0; c < NCLI; c++) {
			ck_assert_int_eq(
			    deliver(&g, c, pkt, short_pkt(pkt, cid)), w);
			sent++;
		}
		/* Handshake (v1 type 2; v2 type 3), Initial and 0-RTT
		 * that already carry edged's CID (v1 0 and 1) */
		ck_assert_int_eq(
		    deliver(&g, w, pkt,
			    long_pkt(pkt, 1, 2, cid, EDGE_QUIC_CID_LEN)),
		    w);
		ck_assert_int_eq(deliver(&g, w, pkt,
					 long_pkt(pkt, 0x6b3343cf, 3, cid,
						  EDGE_QUIC_CID_LEN)),
				 w);
		ck_assert_int_eq(
		    deliver(&g, w, pkt,
			    long_pkt(pkt, 1, 0, cid, EDGE_QUIC_CID_LEN)),
		    w);
		ck_assert_int_eq(
		    deliver(&g, w, pkt,
			    long_pkt(pkt, 1, 1, cid, EDGE_QUIC_CID_LEN)),
		    w);
		sent += 4;
	}
	counts(&g, c1);
	ck_assert_uint_eq(c1[EDGE_QUIC_STEERED] - c0[EDGE_QUIC_STEERED], sent);
	group_close(&g);
}

START_TEST(test_steer_v4)
{
	steer_family(AF_INET);
}
END_TEST

START_TEST(test_steer_v6)
{
	steer_family(AF_INET6);
}
END_TEST

/* the test above can fail: without the program the kernel's hash
 * scatters one CID's datagrams over the workers by source port */
START_TEST(test_unsteered_scatters)
{
	struct group g;
	uint8_t cid[EDGE_QUIC_CID_LEN], pkt[256];
	int seen[NW] = {0}, sockets = 0;

	group_open(&g, AF_INET, 0);
	ck_assert_int_eq(quic_cid_make(cid, 0, 2), 0);
	for (int c = 0; c < NCLI; c++)
		seen[deliver(&g, c, pkt, short_pkt(pkt, cid))]++;
	for (int i = 0; i < NW; i++)
		sockets += seen[i] > 0;
	ck_assert_int_gt(sockets, 1);
	group_close(&g);
}
END_TEST

/* what edged did not issue is left to the hash and never dropped: a
 * client's first Initial and its 0-RTT (its own DCID), an unknown
 * version, garbage, an empty datagram, a CID of a worker without a
 * socket; the same 4-tuple reaches the same socket every time */
START_TEST(test_fallback)
{
	struct group g;
	uint8_t cid[EDGE_QUIC_CID_LEN], pkt[256], dcid[8] = "clientid";
	uint64_t c0[EDGE_QUIC_CNT_SLOTS], c1[EDGE_QUIC_CNT_SLOTS];
	int first[NCLI];

	group_open(&g, AF_INET, 1);
	counts(&g, c0);
	for (int c = 0; c < NCLI; c++) {
		first[c] = deliver(&g, c, pkt, long_pkt(pkt, 1, 0, dcid, 8));
		ck_assert_int_eq(
		    deliver(&g, c, pkt, long_pkt(pkt, 1, 1, dcid, 8)),
		    first[c]);
		ck_assert_int_eq(
		    deliver(&g, c, pkt, long_pkt(pkt, 0x6b3343cf, 1, dcid, 8)),
		    first[c]);
	}
	counts(&g, c1);
	ck_assert_uint_eq(c1[EDGE_QUIC_HASH_NEW] - c0[EDGE_QUIC_HASH_NEW],
			  3 * NCLI);

	memcpy(c0, c1, sizeof(c0));
	ck_assert_int_eq(quic_cid_make(cid, 0, 1), 0);
	deliver(&g, 0, pkt, long_pkt(pkt, 0x1a2a3a4a, 0, cid, 16)); /* VN */
	deliver(&g, 0, pkt, long_pkt(pkt, 1, 2, dcid, 8)); /* short DCID */
	pkt[0] = 0xc0;
	deliver(&g, 0, pkt, 1); /* truncated */
	deliver(&g, 0, pkt, 0); /* empty */
	ck_assert_int_eq(deliver(&g, 0, pkt, short_pkt(pkt, cid)), 1);
	/* the fixed bit cleared (greased, RFC 9287): steered all the same */
	short_pkt(pkt, cid);
	pkt[0] = 0x01;
	ck_assert_int_eq(deliver(&g, 0, pkt, 1 + EDGE_QUIC_CID_LEN + 24), 1);
	counts(&g, c1);
	ck_assert_uint_eq(c1[EDGE_QUIC_HASH_OTHER] - c0[EDGE_QUIC_HASH_OTHER],
			  4);
	ck_assert_uint_eq(c1[EDGE_QUIC_STEERED] - c0[EDGE_QUIC_STEERED], 2);

	/* worker 3's socket closes: its CIDs go to the hash (the kernel
	 * takes a closed socket out of the array) */
	memcpy(c0, c1, sizeof(c0));
	close(g.w[3]);
	g.w[3] = -1;
	ck_assert_int_eq(quic_cid_make(cid, 0, 3), 0);
	for (int c = 0; c < 4; c++) {
		int to = deliver(&g, c, pkt, short_pkt(pkt, cid));

		ck_assert(to >= 0 && to < 3);
	}
	ck_assert_int_eq(quic_cid_make(cid, 0, 9), 0); /* never had one */
	deliver(&g, 0, pkt, short_pkt(pkt, cid));
	counts(&g, c1);
	ck_assert_uint_eq(c1[EDGE_QUIC_HASH_NOSOCK] - c0[EDGE_QUIC_HASH_NOSOCK],
			  5);
	group_close(&g);
}
END_TEST

/* worker sockets NW..2NW-1 of generation gen, bound into g's group (an
 * upgrade's new edged), the program loaded on the maps of *old, the
 * running edged's (w[0..NW), of the generation before), not activated */
static void group_grow(struct group *g, unsigned gen, struct quic_steer **old)
{
	struct errbuf err;
	int one = 1, sm, cm;

	for (int i = NW; i < 2 * NW; i++) {
		g->w[i] = socket(g->fam, SOCK_DGRAM | SOCK_NONBLOCK, 0);
		ck_assert_int_ge(g->w[i], 0);
		ck_assert_int_eq(setsockopt(g->w[i], SOL_SOCKET, SO_REUSEPORT,
					    &one, sizeof(one)),
				 0);
		ck_assert_int_eq(
		    bind(g->w[i], (struct sockaddr *)&g->addr, g->alen), 0);
	}
	g->nw = 2 * NW;
	*old = g->qs;
	quic_steer_maps(*old, &sm, &cm);
	errbuf_clear(&err);
	ck_assert_msg(quic_steer_attach(g->w + NW, NW, gen, sm, cm, false,
					&g->qs, &err) == 0,
		      "quic_steer_attach: %s", err.msg);
}

/* an upgrade: each edged's CIDs reach its own sockets, from any client
 * port; every new connection goes to the new edged; once the old
 * edged's sockets close, its CIDs fall to the hash, never dropped */
START_TEST(test_generations)
{
	struct group g;
	uint8_t cid[EDGE_QUIC_CID_LEN], pkt[256], dcid[8] = "clientid";
	uint64_t c0[EDGE_QUIC_CNT_SLOTS], c1[EDGE_QUIC_CNT_SLOTS];
	/* the new edged's generation, and the running one's before it */
	unsigned gen = (unsigned)_i,
		 prev = (gen + EDGE_QUIC_GENS - 1) % EDGE_QUIC_GENS;
	struct quic_steer *old;
	struct errbuf err;

	group_open(&g, AF_INET, 0);
	/* the running edged, generation prev */
	errbuf_clear(&err);
	ck_assert(quic_steer_attach(g.w, NW, prev, -1, -1, true, &g.qs, &err) ==
		  0);
	group_grow(&g, gen, &old);
	/* before the new edged activates: new connections still go to the
	 * running one */
	for (int c = 0; c < NCLI; c++)
		ck_assert_msg(
		    deliver(&g, c, pkt, long_pkt(pkt, 1, 0, dcid, 8)) < NW,
		    "a new connection to the new edged too early");
	ck_assert_int_eq(quic_steer_activate(g.qs, &err), 0);
	ck_assert_int_eq(quic_steer_activate(g.qs, &err), 0); /* once */
	/* the loader of the running edged's program is gone (its maps are
	 * the new program's) */
	quic_steer_free(old);
	counts(&g, c0);
	for (unsigned w = 0; w < NW; w++) {
		ck_assert_int_eq(quic_cid_make(cid, prev, w), 0);
		for (int c = 0; c < NCLI; c++)
			ck_assert_int_eq(
			    deliver(&g, c, pkt, short_pkt(pkt, cid)), (int)w);
		ck_assert_int_eq(quic_cid_make(cid, gen, w), 0);
		for (int c = 0; c < NCLI; c++)
			ck_assert_int_eq(
			    deliver(&g, c, pkt, short_pkt(pkt, cid)),
			    NW + (int)w);
	}
	for (int c = 0; c < NCLI; c++) {
		int to = deliver(&g, c, pkt, long_pkt(pkt, 1, 0, dcid, 8));

		ck_assert_msg(to >= NW, "a new connection to the old edged");
		ck_assert_int_eq(
		    deliver(&g, c, pkt, long_pkt(pkt, 1, 1, dcid, 8)), to);
	}
	counts(&g, c1);
	ck_assert_uint_eq(c1[EDGE_QUIC_STEERED] - c0[EDGE_QUIC_STEERED],
			  2 * NW * NCLI);
	ck_assert_uint_eq(c1[EDGE_QUIC_HASH_NEW] - c0[EDGE_QUIC_HASH_NEW],
			  2 * NCLI);

	/* the old edged exits: its CIDs reach a new socket by the hash */
	memcpy(c0, c1, sizeof(c0));
	for (int i = 0; i < NW; i++) {
		close(g.w[i]);
		g.w[i] = -1;
	}
	ck_assert_int_eq(quic_cid_make(cid, prev, 2), 0);
	for (int c = 0; c < 4; c++)
		ck_assert_int_ge(deliver(&g, c, pkt, short_pkt(pkt, cid)), NW);
	counts(&g, c1);
	ck_assert_uint_eq(c1[EDGE_QUIC_HASH_NOSOCK] - c0[EDGE_QUIC_HASH_NOSOCK],
			  4);
	group_close(&g);
}
END_TEST

/* attach refuses what it cannot do, with a message */
START_TEST(test_attach_refusals)
{
	struct quic_steer *qs = (struct quic_steer *)1;
	struct errbuf err;
	int fds[1], u;

	errbuf_clear(&err);
	ck_assert_int_eq(quic_steer_attach(fds, 0, 0, -1, -1, true, &qs, &err),
			 -EINVAL);
	ck_assert_ptr_null(qs);
	ck_assert(strstr(err.msg, "sockets") != NULL);
	/* one map without the other */
	errbuf_clear(&err);
	ck_assert_int_eq(quic_steer_attach(fds, 1, 0, 3, -1, true, &qs, &err),
			 -EINVAL);
	ck_assert(strstr(err.msg, "maps") != NULL);
	/* a socket that is not in a reuseport group */
	u = socket(AF_INET, SOCK_DGRAM, 0);
	fds[0] = u;
	errbuf_clear(&err);
	ck_assert_int_lt(quic_steer_attach(fds, 1, 0, -1, -1, true, &qs, &err),
			 0);
	ck_assert_ptr_null(qs);
	ck_assert(err.msg[0] != '\0');
	close(u);
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;

	if (geteuid() != 0) {
		printf("skip - test_quic_steer: not root (loading BPF)\n");
		return 77;
	}
	s = suite_create("quic_steer");
	tc = tcase_create("steer");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_cid);
	tcase_add_test(tc, test_steer_v4);
	tcase_add_test(tc, test_steer_v6);
	tcase_add_test(tc, test_unsteered_scatters);
	tcase_add_test(tc, test_fallback);
	tcase_add_loop_test(tc, test_generations, 0, 2);
	tcase_add_test(tc, test_attach_refusals);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
