/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ctlproto.h - the control protocol between edged and edgectl, shared by
 * both sides (the daemon's server is userspace/ctl.c).
 *
 * A unix stream socket (default /run/edge/edged.sock, mode 0600). One
 * request per connection: the client sends one JSON object on one line,
 * {"cmd": "routes" | "reload" | "status" | "stats", ...}, at most
 * CTLPROTO_REQUEST_MAX bytes; the server answers with one JSON object,
 * {"ok": true, "result": ...} or {"ok": false, "error": "..."}, followed
 * by a newline, then closes the connection.
 *
 * Commands that change the daemon (reload) are accepted only from a peer
 * whose uid (SO_PEERCRED) is 0 or the daemon's own; the others from
 * anyone who can open the socket (which its mode already limits).
 */
#ifndef EDGE_CTLPROTO_H
#define EDGE_CTLPROTO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "log.h"

/* Where edged listens unless told otherwise. */
#define CTLPROTO_SOCK_DEFAULT "/run/edge/edged.sock"
/* Largest request line, newline included. */
#define CTLPROTO_REQUEST_MAX (64 * 1024)
/* Largest response a client accepts (a big route table fits). */
#define CTLPROTO_RESPONSE_MAX (64 * 1024 * 1024)
/* A client's default bound on one call, connect to last byte. */
#define CTLPROTO_TIMEOUT_MS 5000

/*
 * Whether cmd changes the daemon and so needs a privileged peer (uid 0 or
 * the daemon's own). Unknown commands count as changing.
 */
bool ctlproto_cmd_changes(const char *cmd);

/* Whether the request req (its command cmd) changes the daemon: as
 * ctlproto_cmd_changes, but splice without "mode", upstream without
 * "action" (or with "list") and challenge without "on" only read. */
bool ctlproto_request_changes(const char *cmd, const json_t *req);

/*
 * Parse one request (len bytes at buf, without or with its trailing
 * newline): a JSON object with a string "cmd". Returns 0 with *req (a new
 * reference) and *cmd (pointing into *req), or -EINVAL / -E2BIG with err
 * saying what was wrong.
 */
int ctlproto_request_parse(const char *buf, size_t len, json_t **req,
			   const char **cmd, struct errbuf *err);

/*
 * The response line for a result (stolen; NULL means JSON null) or for an
 * error message: compact JSON and a newline, malloc'd. NULL when out of
 * memory.
 */
char *ctlproto_response_ok(json_t *result);
char *ctlproto_response_error(const char *msg);

/*
 * Send request (a JSON object with "cmd"; not consumed) to the daemon at
 * path and wait at most timeout_ms (<= 0: CTLPROTO_TIMEOUT_MS) for the
 * whole answer. Returns 0 with *result holding the daemon's result (a new
 * reference; JSON null when it sent none), or:
 *   -ENOENT, -ECONNREFUSED  "edged is not running (no control socket at
 *                           PATH)"
 *   -EACCES                 permission denied on the socket
 *   -ETIMEDOUT              no complete answer in time
 *   -EBADMSG                an answer that is not the protocol
 *   -EREMOTEIO              the daemon answered {"ok": false}: err holds
 *                           its error text exactly
 *   other -errno            err names the socket and the reason
 * err always says what went wrong.
 */
int ctlproto_call(const char *path, const json_t *request, json_t **result,
		  int timeout_ms, struct errbuf *err);

/* Descriptors the daemon sent with its answer (SCM_RIGHTS, before the
 * answer's JSON: each with one byte of whitespace), in the order sent. */
#define CTLPROTO_FDS_MAX 4096  /* more are closed */
#define CTLPROTO_FDS_BATCH 250 /* at most in one message (SCM_MAX_FD 253) */
struct ctlproto_fds {
	int *v;
	size_t n, cap;
};

/* ctlproto_call, keeping the descriptors that came with the answer in
 * *fds (zeroed first by the caller; NULL: they are closed). They are
 * kept on an error too: ctlproto_fds_close. */
int ctlproto_call_fds(const char *path, const json_t *request, json_t **result,
		      struct ctlproto_fds *fds, int timeout_ms,
		      struct errbuf *err);

/* Close every descriptor of fds and free it (zeroed after); NULL ok. */
void ctlproto_fds_close(struct ctlproto_fds *fds);

#endif /* EDGE_CTLPROTO_H */
