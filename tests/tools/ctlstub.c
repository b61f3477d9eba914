/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ctlstub.c - a stand-in for edged's control socket in CLI tests: answers
 * each request with a canned response. libc only.
 *
 *   ctlstub SOCKET DIR
 *
 * Listens on SOCKET (mode 0600). For every connection, reads one request
 * line, takes its "cmd" and answers with the contents of DIR/CMD.json as
 * they are (one line is expected), or {"ok":false,...} when there is no
 * such file; appends the request line to DIR/requests.log. Serves until
 * killed.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define STUB_REQ_MAX 65536
#define STUB_RESP_MAX (1 << 20)

static char stub_req[STUB_REQ_MAX + 1];
static char stub_resp[STUB_RESP_MAX];

/* The value of "cmd" in req (a compact JSON object), or "". */
static void stub_cmd(const char *req, char *cmd, size_t size)
{
	const char *p = strstr(req, "\"cmd\":\"");
	size_t n = 0;

	cmd[0] = '\0';
	if (!p)
		return;
	p += strlen("\"cmd\":\"");
	while (p[n] && p[n] != '"' && n + 1 < size) {
		/* names only: keep the file lookup inside DIR */
		if (p[n] == '/' || p[n] == '.')
			return;
		n++;
	}
	memcpy(cmd, p, n);
	cmd[n] = '\0';
}

static void stub_write(int fd, const char *buf, size_t len)
{
	ssize_t n;

	while (len) {
		n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

static void stub_serve(int c, const char *dir)
{
	char cmd[64], path[4096];
	size_t len = 0;
	ssize_t n;
	int f;

	while (len < STUB_REQ_MAX) {
		n = read(c, stub_req + len, STUB_REQ_MAX - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (memchr(stub_req, '\n', len))
			break;
	}
	stub_req[len] = '\0';
	snprintf(path, sizeof(path), "%s/requests.log", dir);
	f = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (f >= 0) {
		stub_write(f, stub_req, len);
		close(f);
	}
	stub_cmd(stub_req, cmd, sizeof(cmd));
	snprintf(path, sizeof(path), "%s/%s.json", dir, cmd);
	f = *cmd ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (f < 0) {
		static const char none[] =
		    "{\"ok\":false,\"error\":\"ctlstub: no canned answer\"}\n";

		stub_write(c, none, sizeof(none) - 1);
		return;
	}
	len = 0;
	while (len < sizeof(stub_resp) &&
	       (n = read(f, stub_resp + len, sizeof(stub_resp) - len)) > 0)
		len += (size_t)n;
	close(f);
	stub_write(c, stub_resp, len);
}

int main(int argc, char **argv)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, c;

	if (argc != 3) {
		fprintf(stderr, "usage: ctlstub SOCKET DIR\n");
		return 2;
	}
	if (strlen(argv[1]) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "ctlstub: socket path too long\n");
		return 2;
	}
	memcpy(sa.sun_path, argv[1], strlen(argv[1]) + 1);
	signal(SIGPIPE, SIG_IGN);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	unlink(argv[1]);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    chmod(argv[1], 0600) != 0 || listen(fd, 16) != 0) {
		perror("ctlstub");
		return 1;
	}
	for (;;) {
		c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR)
				continue;
			perror("ctlstub: accept");
			return 1;
		}
		stub_serve(c, argv[2]);
		close(c);
	}
}
