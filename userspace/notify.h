/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * notify.h - the service manager's readiness protocol (sd_notify(3)),
 * spoken by edged itself: datagrams such as "READY=1" to the unix socket
 * named by $NOTIFY_SOCKET (a path, or "@name" for the abstract
 * namespace). Without NOTIFY_SOCKET every call is a no-op.
 *
 * The socket is connected once at start (notify_init, still root), so
 * that messages still arrive after privileges drop, and from a socket
 * directory the new user could not reach. Only the control loop's thread
 * calls notify_send.
 */
#ifndef EDGE_NOTIFY_H
#define EDGE_NOTIFY_H

/* Connect to $NOTIFY_SOCKET, if set, and unset it (nothing edged starts
 * should speak for it). Returns 0 (also without NOTIFY_SOCKET) or -errno
 * (the caller logs and carries on: readiness is not worth a refusal). */
int notify_init(void);

/* Send state ("READY=1", "RELOADING=1", "STOPPING=1", ...), newline-
 * separated assignments. Returns 0, also when there is no socket, or
 * -errno. */
int notify_send(const char *state);

/* Close the socket (again a no-op afterwards). */
void notify_close(void);

#endif /* EDGE_NOTIFY_H */
