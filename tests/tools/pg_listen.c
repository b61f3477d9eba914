/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pg_listen.c - a PostgreSQL listener for the tests (tests/pg/):
 *
 *   pg_listen CONNINFO SECONDS CHANNEL...
 *
 * LISTENs on every CHANNEL, prints "ready" once the server has them all,
 * then one line "CHANNEL PAYLOAD" per notification, in the order the
 * server delivers them (commit order), flushed at once. Exits 0 after a
 * notification on the channel "edge_test_stop" (listened to as well), 3
 * when SECONDS pass first, 1 on an error.
 */
#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STOP_CHANNEL "edge_test_stop"

static int listen_on(PGconn *conn, const char *channel)
{
	char *id = PQescapeIdentifier(conn, channel, strlen(channel));
	char sql[512];
	PGresult *res;
	int ok;

	if (!id)
		return -1;
	snprintf(sql, sizeof(sql), "LISTEN %s", id);
	PQfreemem(id);
	res = PQexec(conn, sql);
	ok = PQresultStatus(res) == PGRES_COMMAND_OK;
	if (!ok)
		fprintf(stderr, "pg_listen: %s", PQerrorMessage(conn));
	PQclear(res);
	return ok ? 0 : -1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	PGconn *conn;
	double end;
	int i;

	if (argc < 4) {
		fprintf(stderr,
			"usage: pg_listen CONNINFO SECONDS CHANNEL...\n");
		return 1;
	}
	conn = PQconnectdb(argv[1]);
	if (PQstatus(conn) != CONNECTION_OK) {
		fprintf(stderr, "pg_listen: %s", PQerrorMessage(conn));
		return 1;
	}
	for (i = 3; i < argc; i++)
		if (listen_on(conn, argv[i]))
			return 1;
	if (listen_on(conn, STOP_CHANNEL))
		return 1;
	printf("ready\n");
	fflush(stdout);
	end = now_s() + atof(argv[2]);
	for (;;) {
		struct pollfd pfd = {PQsocket(conn), POLLIN, 0};
		PGnotify *n;
		double left = end - now_s();

		if (left <= 0) {
			fprintf(stderr, "pg_listen: no %s within %s s\n",
				STOP_CHANNEL, argv[2]);
			return 3;
		}
		if (poll(&pfd, 1, (int)(left * 1000) + 1) < 0 &&
		    errno != EINTR) {
			perror("pg_listen: poll");
			return 1;
		}
		if (!PQconsumeInput(conn)) {
			fprintf(stderr, "pg_listen: %s", PQerrorMessage(conn));
			return 1;
		}
		while ((n = PQnotifies(conn))) {
			if (strcmp(n->relname, STOP_CHANNEL) == 0) {
				PQfreemem(n);
				PQfinish(conn);
				return 0;
			}
			printf("%s %s\n", n->relname, n->extra);
			fflush(stdout);
			PQfreemem(n);
		}
	}
}
