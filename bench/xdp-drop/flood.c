// SPDX-License-Identifier: BSD-2-Clause
/*
 * flood - a paced UDP flood from one fixed source address, for
 * bench/xdp-drop.
 *
 *   flood --src ADDR --dst ADDR [--port N] [--sport N] [--rate PPS]
 *         [--duration S] [--size BYTES] [--batch N]
 *         [--ifname IF --dst-mac MAC]
 *
 * Without --ifname it sends through a connected UDP socket with
 * sendmmsg(2). With --ifname it builds the Ethernet/IPv4/UDP frame itself
 * and sends it on an AF_PACKET socket with PACKET_QDISC_BYPASS, which skips
 * the sender's UDP/IP stack and qdisc and so reaches a higher rate.
 *
 * --rate 0 sends as fast as it can; otherwise batches are paced against
 * CLOCK_MONOTONIC so that the packets offered by time t are rate * t. A
 * packet the local stack refuses (a full veth ring, ENOBUFS) is counted as
 * refused and not retried: a flood gets no backpressure from its victim,
 * so the offered rate stays the offered rate. --size is
 * the Ethernet frame length without FCS (default 64, the classic
 * minimum-size flood). The run always ends: --duration defaults to 10 s and
 * may not exceed FLOOD_MAX_SECONDS; SIGINT/SIGTERM end it early. At the end
 * it prints one line of key=value pairs:
 *
 *   flood: offered=N sent=N refused=N seconds=S pps=N sent_pps=N
 *
 * pps is offered packets per second, sent_pps those the stack took.
 *
 * Exit 0 when the run completed, 1 on a setup error, 2 on a usage error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../common.h"

#define FLOOD_MAX_SECONDS 120
#define FLOOD_MAX_BATCH 256
#define FLOOD_MIN_FRAME 42   /* Ethernet 14 + IPv4 20 + UDP 8 */
#define FLOOD_MAX_FRAME 1514 /* Ethernet 14 + a 1500-byte MTU */
#define FLOOD_HDRS 42

struct flood {
	struct sockaddr_in src;
	struct sockaddr_in dst;
	const char *ifname; /* AF_PACKET when set */
	uint8_t dst_mac[ETH_ALEN];
	bool have_dst_mac;
	uint64_t rate; /* packets per second, 0: unpaced */
	double duration;
	unsigned int size; /* frame length without FCS */
	unsigned int batch;
	int fd;
	uint8_t frame[FLOOD_MAX_FRAME];
	size_t len; /* bytes handed to send: whole frame or UDP payload */
};

static void flood_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: flood --src ADDR --dst ADDR [--port N] [--sport N] [--rate "
	    "PPS]\n"
	    "             [--duration S] [--size BYTES] [--batch N]\n"
	    "             [--ifname IF --dst-mac MAC]\n"
	    "  --rate 0 (default) sends as fast as possible; --duration <= %d "
	    "s\n"
	    "  (default 10); --size is the Ethernet frame length without FCS\n"
	    "  (%d..%d, default 64); --ifname sends raw frames on an "
	    "AF_PACKET\n"
	    "  socket with PACKET_QDISC_BYPASS (needs --dst-mac)\n",
	    FLOOD_MAX_SECONDS, FLOOD_MIN_FRAME, FLOOD_MAX_FRAME);
}

static int flood_parse_mac(const char *s, uint8_t mac[ETH_ALEN])
{
	unsigned int b[ETH_ALEN];
	char tail;
	int i;

	if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3],
		   &b[4], &b[5], &tail) != ETH_ALEN)
		return -EINVAL;
	for (i = 0; i < ETH_ALEN; i++)
		mac[i] = (uint8_t)b[i];
	return 0;
}

static int flood_parse_args(struct flood *f, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"src", required_argument, NULL, 's'},
	    {"dst", required_argument, NULL, 'd'},
	    {"port", required_argument, NULL, 'p'},
	    {"sport", required_argument, NULL, 'P'},
	    {"rate", required_argument, NULL, 'r'},
	    {"duration", required_argument, NULL, 't'},
	    {"size", required_argument, NULL, 'z'},
	    {"batch", required_argument, NULL, 'b'},
	    {"ifname", required_argument, NULL, 'i'},
	    {"dst-mac", required_argument, NULL, 'm'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	bool have_src = false, have_dst = false;
	uint64_t v;
	int c, idx = 0;

	f->src.sin_family = AF_INET;
	f->dst.sin_family = AF_INET;
	f->dst.sin_port = htons(9);
	f->src.sin_port = htons(40000);
	f->duration = 10;
	f->size = 64;
	f->batch = 64;
	while ((c = getopt_long(argc, argv, "", opts, &idx)) != -1) {
		switch (c) {
		case 's':
			if (inet_pton(AF_INET, optarg, &f->src.sin_addr) != 1)
				goto bad;
			have_src = true;
			break;
		case 'd':
			if (inet_pton(AF_INET, optarg, &f->dst.sin_addr) != 1)
				goto bad;
			have_dst = true;
			break;
		case 'p':
		case 'P':
			if (bench_parse_u64(optarg, 1, 65535, &v))
				goto bad;
			if (c == 'p')
				f->dst.sin_port = htons((uint16_t)v);
			else
				f->src.sin_port = htons((uint16_t)v);
			break;
		case 'r':
			if (bench_parse_u64(optarg, 0, 100000000, &v))
				goto bad;
			f->rate = v;
			break;
		case 't':
			if (bench_parse_seconds(optarg, FLOOD_MAX_SECONDS,
						&f->duration))
				goto bad;
			break;
		case 'z':
			if (bench_parse_u64(optarg, FLOOD_MIN_FRAME,
					    FLOOD_MAX_FRAME, &v))
				goto bad;
			f->size = (unsigned int)v;
			break;
		case 'b':
			if (bench_parse_u64(optarg, 1, FLOOD_MAX_BATCH, &v))
				goto bad;
			f->batch = (unsigned int)v;
			break;
		case 'i':
			f->ifname = optarg;
			break;
		case 'm':
			if (flood_parse_mac(optarg, f->dst_mac))
				goto bad;
			f->have_dst_mac = true;
			break;
		case 'h':
			flood_usage(stdout);
			exit(0);
		default:
			flood_usage(stderr);
			return -EINVAL;
		}
	}
	if (optind != argc || !have_src || !have_dst) {
		fprintf(stderr, "flood: --src and --dst are required\n");
		flood_usage(stderr);
		return -EINVAL;
	}
	if (f->ifname && !f->have_dst_mac) {
		fprintf(stderr, "flood: --ifname needs --dst-mac\n");
		return -EINVAL;
	}
	return 0;
bad:
	fprintf(stderr, "flood: bad value for --%s: '%s'\n", opts[idx].name,
		optarg);
	flood_usage(stderr);
	return -EINVAL;
}

static uint16_t flood_csum(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t sum = 0;
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (len & 1)
		sum += (uint32_t)(p[len - 1] << 8);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return htons((uint16_t)~sum);
}

/* Build the whole frame for AF_PACKET: Ethernet, IPv4 (DF, TTL 64), UDP
 * with checksum 0 (none, allowed for IPv4), zero payload. */
static int flood_build_frame(struct flood *f)
{
	struct ether_header *eth = (struct ether_header *)f->frame;
	struct iphdr *ip = (struct iphdr *)(f->frame + sizeof(*eth));
	struct udphdr *udp = (struct udphdr *)(ip + 1);
	struct ifreq ifr = {0};

	if (strlen(f->ifname) >= sizeof(ifr.ifr_name)) {
		fprintf(stderr, "flood: interface name too long: %s\n",
			f->ifname);
		return -EINVAL;
	}
	strcpy(ifr.ifr_name, f->ifname);
	if (ioctl(f->fd, SIOCGIFHWADDR, &ifr) < 0) {
		fprintf(stderr, "flood: %s: %s\n", f->ifname, strerror(errno));
		return -errno;
	}
	memset(f->frame, 0, sizeof(f->frame));
	memcpy(eth->ether_dhost, f->dst_mac, ETH_ALEN);
	memcpy(eth->ether_shost, ifr.ifr_hwaddr.sa_data, ETH_ALEN);
	eth->ether_type = htons(ETHERTYPE_IP);
	ip->version = 4;
	ip->ihl = 5;
	ip->tot_len = htons((uint16_t)(f->size - sizeof(*eth)));
	ip->frag_off = htons(IP_DF);
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->saddr = f->src.sin_addr.s_addr;
	ip->daddr = f->dst.sin_addr.s_addr;
	ip->check = flood_csum(ip, sizeof(*ip));
	udp->source = f->src.sin_port;
	udp->dest = f->dst.sin_port;
	udp->len = htons((uint16_t)(f->size - sizeof(*eth) - sizeof(*ip)));
	f->len = f->size;
	return 0;
}

static int flood_open_packet(struct flood *f)
{
	struct sockaddr_ll ll = {0};
	int one = 1;

	f->fd = socket(AF_PACKET, SOCK_RAW, 0); /* protocol 0: send only */
	if (f->fd < 0) {
		fprintf(stderr, "flood: AF_PACKET socket: %s\n",
			strerror(errno));
		return -errno;
	}
	ll.sll_family = AF_PACKET;
	ll.sll_ifindex = (int)if_nametoindex(f->ifname);
	if (!ll.sll_ifindex) {
		fprintf(stderr, "flood: no interface %s\n", f->ifname);
		return -ENODEV;
	}
	if (bind(f->fd, (struct sockaddr *)&ll, sizeof(ll)) < 0) {
		fprintf(stderr, "flood: bind %s: %s\n", f->ifname,
			strerror(errno));
		return -errno;
	}
	if (setsockopt(f->fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one,
		       sizeof(one)) < 0)
		fprintf(stderr, "flood: PACKET_QDISC_BYPASS: %s (continuing)\n",
			strerror(errno));
	return flood_build_frame(f);
}

static int flood_open_udp(struct flood *f)
{
	struct timeval tv = {.tv_sec = 0, .tv_usec = 100000};

	f->fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (f->fd < 0) {
		fprintf(stderr, "flood: socket: %s\n", strerror(errno));
		return -errno;
	}
	/* A full send buffer blocks at most 100 ms, so the deadline holds. */
	setsockopt(f->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (bind(f->fd, (struct sockaddr *)&f->src, sizeof(f->src)) < 0) {
		fprintf(stderr, "flood: bind source: %s\n", strerror(errno));
		return -errno;
	}
	if (connect(f->fd, (struct sockaddr *)&f->dst, sizeof(f->dst)) < 0) {
		fprintf(stderr, "flood: connect: %s\n", strerror(errno));
		return -errno;
	}
	memset(f->frame, 0, sizeof(f->frame));
	f->len = f->size - FLOOD_HDRS;
	return 0;
}

/* The counts of one run. */
struct flood_result {
	uint64_t offered; /* packets due to be sent */
	uint64_t sent;	  /* taken by the stack */
	double secs;
};

/* Send for f->duration seconds. */
static void flood_run(struct flood *f, struct flood_result *res)
{
	struct mmsghdr msgs[FLOOD_MAX_BATCH];
	struct iovec iov = {.iov_base = f->frame, .iov_len = f->len};
	uint64_t start, deadline, now, due;
	unsigned int batch = f->batch, i;
	int n;

	memset(msgs, 0, sizeof(msgs));
	for (i = 0; i < FLOOD_MAX_BATCH; i++) {
		msgs[i].msg_hdr.msg_iov = &iov;
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	/* Small batches at low rates keep the stream smooth: one batch at
	 * most every 20 us worth of packets, never less than one packet. */
	if (f->rate && f->rate / 50000 + 1 < batch)
		batch = (unsigned int)(f->rate / 50000 + 1);

	start = bench_now_ns();
	deadline = start + (uint64_t)(f->duration * (double)BENCH_NSEC_PER_SEC);
	memset(res, 0, sizeof(*res));
	for (now = start; now < deadline && !bench_stop; now = bench_now_ns()) {
		if (f->rate) {
			/* the time at which the next batch is due */
			due = start + (res->offered + batch) *
					  BENCH_NSEC_PER_SEC / f->rate;
			if (due > deadline)
				break;
			if (due > now)
				bench_sleep_until(due);
		}
		/* paced: never wait for buffer space, that would be
		 * backpressure */
		n = sendmmsg(f->fd, msgs, batch, f->rate ? MSG_DONTWAIT : 0);
		if (n < 0 && errno == EINTR)
			continue;
		/* What was not taken (ENOBUFS, a full ring, an ICMP error on
		 * the connected socket) is lost, as on a wire. */
		res->offered += batch;
		if (n > 0)
			res->sent += (uint64_t)n;
	}
	res->secs =
	    (double)(bench_now_ns() - start) / (double)BENCH_NSEC_PER_SEC;
}

int main(int argc, char **argv)
{
	struct flood f = {.fd = -1};
	struct flood_result res;
	int err;

	if (flood_parse_args(&f, argc, argv))
		return 2;
	bench_catch_stop();
	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL,
	      0UL); /* precise pacing sleeps */

	err = f.ifname ? flood_open_packet(&f) : flood_open_udp(&f);
	if (err) {
		if (f.fd >= 0)
			close(f.fd);
		return 1;
	}
	flood_run(&f, &res);
	close(f.fd);
	printf("flood: offered=%llu sent=%llu refused=%llu seconds=%.3f "
	       "pps=%.0f sent_pps=%.0f\n",
	       (unsigned long long)res.offered, (unsigned long long)res.sent,
	       (unsigned long long)(res.offered - res.sent), res.secs,
	       res.secs > 0 ? (double)res.offered / res.secs : 0.0,
	       res.secs > 0 ? (double)res.sent / res.secs : 0.0);
	return 0;
}
