// SPDX-License-Identifier: BSD-2-Clause
/*
 * propprobe.c - how long a route change takes to become routable.
 *
 *   propprobe db CONNINFO PROXY_PORT N ENV_ID PREFIX
 *       N times: INSERT a domain "PREFIX<i>.prop" for environment ENV_ID
 *       in its own transaction (COMMIT returns: t0), then ask the proxy
 *       for that host over one keep-alive connection until it answers
 *       200 (t1). Prints one line per change: "i microseconds".
 *   propprobe poll PROXY_PORT HOST
 *       Ask for HOST until it answers 200; prints the microseconds it
 *       took from the start (for a change made by someone else, e.g. an
 *       nginx reload started just before).
 *
 * The proxy is asked over a persistent connection, again PROBE_GAP_US
 * after an answer comes (a 503 or 404 while the change is not there
 * yet), so the figure is the change's latency plus at most one round
 * trip on loopback and the gap (a tenth of a millisecond): asking
 * without a pause would take a CPU from the proxy and the database on a
 * small machine. Changes are PROBE_PAUSE_US apart (a deploy pipeline
 * does not insert back to back).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PROBE_TIMEOUT_US 30000000ull
#define PROBE_GAP_US 100
#define PROBE_PAUSE_US 10000

static void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
}

static int probe_connect(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		perror("propprobe: connect");
		exit(1);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* One request on *fd; its status, reconnecting when the proxy closed. */
static int probe_ask(int *fd, int port, const char *host)
{
	char req[512], buf[65536];
	size_t got = 0;
	ssize_t n;
	char *end, *cl;
	size_t head, body = 0;
	int status;

	snprintf(req, sizeof(req),
		 "GET / HTTP/1.1\r\nHost: %s\r\nUser-Agent: propprobe\r\n\r\n",
		 host);
	for (;;) {
		if (send(*fd, req, strlen(req), MSG_NOSIGNAL) < 0)
			goto again;
		got = 0;
		for (;;) {
			n = recv(*fd, buf + got, sizeof(buf) - 1 - got, 0);
			if (n <= 0)
				goto again;
			got += (size_t)n;
			buf[got] = '\0';
			end = strstr(buf, "\r\n\r\n");
			if (!end)
				continue;
			head = (size_t)(end + 4 - buf);
			cl = strcasestr(buf, "\r\ncontent-length:");
			body = cl && cl < end ? strtoul(cl + 17, NULL, 10) : 0;
			if (got >= head + body)
				break;
		}
		status = atoi(buf + 9);
		if (strcasestr(buf, "\r\nconnection: close"))
			goto reopen;
		return status;
	again:
		close(*fd);
		*fd = probe_connect(port);
		continue;
	reopen:
		close(*fd);
		*fd = probe_connect(port);
		return status;
	}
}

/* Ask until 200; the microseconds that took, or exit after the timeout. */
static uint64_t probe_until_200(int *fd, int port, const char *host,
				uint64_t t0)
{
	while (probe_ask(fd, port, host) != 200) {
		if (now_us() - t0 > PROBE_TIMEOUT_US) {
			fprintf(stderr, "propprobe: %s not routable in 30 s\n",
				host);
			exit(1);
		}
		sleep_us(PROBE_GAP_US);
	}
	return now_us() - t0;
}

static int probe_db(int argc, char **argv)
{
	const char *conninfo = argv[2], *env = argv[5], *prefix = argv[6];
	int port = atoi(argv[3]), n = atoi(argv[4]), i, fd;
	const char *params[2];
	char host[256];
	PGconn *pg;
	PGresult *res;
	uint64_t t0;

	(void)argc;
	pg = PQconnectdb(conninfo);
	if (PQstatus(pg) != CONNECTION_OK) {
		fprintf(stderr, "propprobe: %s", PQerrorMessage(pg));
		return 1;
	}
	fd = probe_connect(port);
	for (i = 0; i < n; i++) {
		snprintf(host, sizeof(host), "%s%d.prop", prefix, i);
		params[0] = host;
		params[1] = env;
		res =
		    PQexecParams(pg,
				 "INSERT INTO domains (domain, environment_id) "
				 "VALUES ($1, $2)",
				 2, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			fprintf(stderr, "propprobe: %s",
				PQresultErrorMessage(res));
			return 1;
		}
		PQclear(res);
		/* autocommit: the INSERT's answer comes after its COMMIT */
		t0 = now_us();
		printf(
		    "%d %llu\n", i,
		    (unsigned long long)probe_until_200(&fd, port, host, t0));
		fflush(stdout);
		sleep_us(PROBE_PAUSE_US);
	}
	close(fd);
	PQfinish(pg);
	return 0;
}

int main(int argc, char **argv)
{
	int fd;

	if (argc == 7 && strcmp(argv[1], "db") == 0)
		return probe_db(argc, argv);
	if (argc == 4 && strcmp(argv[1], "poll") == 0) {
		uint64_t t0 = now_us();

		fd = probe_connect(atoi(argv[2]));
		printf("%llu\n", (unsigned long long)probe_until_200(
				     &fd, atoi(argv[2]), argv[3], t0));
		return 0;
	}
	fprintf(stderr, "usage: propprobe db CONNINFO PORT N ENV PREFIX\n"
			"       propprobe poll PORT HOST\n");
	return 2;
}
