/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * config_host.h - what `edged --check` checks of the host beside the
 * file: that the user exists, that the directories edged writes are
 * there and writable by that user, and that the listen addresses are
 * free.
 */
#ifndef EDGE_CONFIG_HOST_H
#define EDGE_CONFIG_HOST_H

#include <pwd.h>

#include "config.h"

/*
 * Check the host for c, adding each problem to errs as "FILE: KEY:
 * what" (c->path, the key path such as "listen[0]"):
 *   - user names an account (getpwnam);
 *   - analytics.file's directory exists, and the user can write the file
 *     (when it exists) or the directory (a directory it cannot write,
 *     with no file yet, is a note: edged makes the file as root);
 *   - the directories edged will write as that user (analytics.spool,
 *     pg_snapshot's when pg is set) exist, or for those
 *     edged makes as root (the spool, the snapshot's, control_socket's)
 *     their parent does, and are writable by the user: checked in a
 *     child that has become the user (root only; as anyone else the
 *     check is of the caller, noted in *notes when it differs);
 *   - each listen address (listen, tls.listen, admin_listen, tcp_routes)
 *     can be bound now (SO_REUSEADDR, never SO_REUSEPORT, the socket
 *     closed at once): one a running edged holds is in use too.
 * notes (may be NULL) gets what was not checked. Returns the number of
 * problems added.
 */
size_t config_host_check(const struct config *c, struct config_errs *errs,
			 struct config_errs *notes);

/* A check run as some user: 0 or -errno, with err saying what failed. */
typedef int (*config_host_fn)(void *arg, struct errbuf *err);

/*
 * Run fn(arg, err) as pw, the way edged runs once it has dropped to its
 * user (drop_privileges: the primary group only, gid, uid): as root, in
 * a child that becomes pw and sends back fn's result and message (fn's
 * other effects stay in the child); as anyone else, or with pw NULL,
 * right here as the caller. Returns fn's result, or -errno with err set
 * when the child could not run it.
 */
int config_host_as_user(const struct passwd *pw, config_host_fn fn, void *arg,
			struct errbuf *err);

#endif /* EDGE_CONFIG_HOST_H */
