/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * netns.h - network namespaces as edgectl records and finds them: by the
 * inode of their nsfs file (/proc/self/ns/net), unique while the
 * namespace lives, and by name where `ip netns` gave one (/run/netns).
 */
#ifndef EDGE_NETNS_H
#define EDGE_NETNS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where `ip netns` keeps its names. */
#define NETNS_RUN_DIR "/run/netns"

/* A namespace's name, NUL included (a file name in NETNS_RUN_DIR). */
#define NETNS_NAME_MAX (NAME_MAX + 1)

/* The inode of this thread's network namespace; 0 when it cannot be
 * read (no /proc). */
uint64_t netns_self(void);

/* The inode of PID 1's network namespace (the host's, from where this
 * process stands); 0 when it cannot be read. */
uint64_t netns_init(void);

/* The name NETNS_RUN_DIR gives namespace ino into name (len bytes):
 * true when one does, else false with name "". */
bool netns_name(uint64_t ino, char *name, size_t len);

/*
 * "network namespace NAME, inode N", "PID 1's network namespace, inode
 * N" or "network namespace inode N" into buf, for messages (returned);
 * name is the one recorded (NULL or "": looked up now).
 */
const char *netns_describe(uint64_t ino, const char *name, char *buf,
			   size_t len);

/*
 * Open namespace ino (O_RDONLY, for setns): through its name in
 * NETNS_RUN_DIR, else a process in it (/proc/PID/ns/net). Returns the
 * fd, -ENOENT when nothing holds such a namespace any more (it is gone),
 * or another -errno.
 */
int netns_open(uint64_t ino);

/*
 * Move this thread into the namespace open at fd (setns CLONE_NEWNET),
 * with *back set to an fd of the one it leaves. Returns 0 or -errno
 * (then still where it was).
 */
int netns_enter(int fd, int *back);

/* Go back to the namespace netns_enter left (closing back). Returns 0 or
 * -errno. */
int netns_leave(int back);

#endif /* EDGE_NETNS_H */
