/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pgdb_probe.c - lib/pgdb on one connection kept open, as edged keeps
 * its own (tests/pg/test_pg_migrate.sh):
 *
 *   pgdb_probe CONNINFO
 *
 * Connects with pgdb_connect (application name "pgdb-probe"), runs
 * pgdb_migrate twice, and prints, one per line:
 *
 *   migrate RET APPLIED      each run's return value and count
 *   error MESSAGE            a run's message, when it failed
 *   locks N                  advisory locks this session still holds
 *   socket KEEPALIVE IDLE INTERVAL COUNT USER_TIMEOUT
 *                            the socket's options as libpq set them
 *   app NAME                 application_name as the server sees it
 *
 * Exits 0 when it could connect, 1 otherwise.
 */
#include <libpq-fe.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <sys/socket.h>

#include "pgdb.h"

static int sockopt(int fd, int level, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);

	if (getsockopt(fd, level, name, &v, &len))
		return -1;
	return v;
}

static void query(PGconn *conn, const char *label, const char *sql)
{
	PGresult *res = PQexec(conn, sql);

	printf("%s %s\n", label,
	       PQresultStatus(res) == PGRES_TUPLES_OK ? PQgetvalue(res, 0, 0)
						      : "?");
	PQclear(res);
}

int main(int argc, char **argv)
{
	struct errbuf err = {""};
	PGconn *conn;
	int i, ret, applied, fd;

	if (argc != 2) {
		fprintf(stderr, "usage: pgdb_probe CONNINFO\n");
		return 1;
	}
	if (pgdb_connect(argv[1], "pgdb-probe", &conn, &err)) {
		printf("error %s\n", err.msg);
		return 1;
	}
	for (i = 0; i < 2; i++) {
		ret = pgdb_migrate(conn, "pgdb_probe", NULL, NULL, &applied,
				   &err);
		printf("migrate %d %d\n", ret, applied);
		if (ret)
			printf("error %s\n", err.msg);
	}
	query(conn, "locks",
	      "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
	      "AND pid = pg_backend_pid()");
	fd = PQsocket(conn);
	printf("socket %d %d %d %d %d\n", sockopt(fd, SOL_SOCKET, SO_KEEPALIVE),
	       sockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE),
	       sockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL),
	       sockopt(fd, IPPROTO_TCP, TCP_KEEPCNT),
	       sockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT));
	query(conn, "app", "SELECT current_setting('application_name')");
	PQfinish(conn);
	return 0;
}
