/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * netns.c - network namespaces by inode and name (netns.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "netns.h"

static uint64_t netns_ino_of(const char *path)
{
	struct stat sb;

	if (stat(path, &sb))
		return 0;
	return (uint64_t)sb.st_ino;
}

uint64_t netns_self(void)
{
	return netns_ino_of("/proc/thread-self/ns/net");
}

uint64_t netns_init(void)
{
	return netns_ino_of("/proc/1/ns/net");
}

bool netns_name(uint64_t ino, char *name, size_t len)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;
	bool found = false;

	if (len)
		name[0] = '\0';
	if (!ino || !(d = opendir(NETNS_RUN_DIR)))
		return false;
	while (!found && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", NETNS_RUN_DIR,
			 de->d_name);
		if (netns_ino_of(path) == ino && strlen(de->d_name) < len) {
			snprintf(name, len, "%s", de->d_name);
			found = true;
		}
	}
	closedir(d);
	return found;
}

const char *netns_describe(uint64_t ino, const char *name, char *buf,
			   size_t len)
{
	char now[NETNS_NAME_MAX];

	if (!name || !*name)
		name = netns_name(ino, now, sizeof(now)) ? now : "";
	if (*name)
		snprintf(buf, len, "network namespace %s, inode %llu", name,
			 (unsigned long long)ino);
	else if (ino && ino == netns_init())
		snprintf(buf, len, "PID 1's network namespace, inode %llu",
			 (unsigned long long)ino);
	else
		snprintf(buf, len, "network namespace inode %llu",
			 (unsigned long long)ino);
	return buf;
}

/* Open path when it is namespace ino: the fd, or -1. */
static int netns_try(const char *path, uint64_t ino)
{
	struct stat sb;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (fstat(fd, &sb) || (uint64_t)sb.st_ino != ino) {
		close(fd);
		return -1;
	}
	return fd;
}

int netns_open(uint64_t ino)
{
	char name[NETNS_NAME_MAX], path[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int fd = -1;

	if (!ino)
		return -ENOENT;
	if (netns_name(ino, name, sizeof(name))) {
		snprintf(path, sizeof(path), "%s/%s", NETNS_RUN_DIR, name);
		fd = netns_try(path, ino);
		if (fd >= 0)
			return fd;
	}
	d = opendir("/proc");
	if (!d)
		return -errno;
	while (fd < 0 && (de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/ns/net", de->d_name);
		fd = netns_try(path, ino);
	}
	closedir(d);
	return fd >= 0 ? fd : -ENOENT;
}

int netns_enter(int fd, int *back)
{
	int rc;

	*back = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (*back < 0)
		return -errno;
	if (setns(fd, CLONE_NEWNET)) {
		rc = -errno;
		close(*back);
		*back = -1;
		return rc;
	}
	return 0;
}

int netns_leave(int back)
{
	int rc = 0;

	if (back < 0)
		return -EBADF;
	if (setns(back, CLONE_NEWNET))
		rc = -errno;
	close(back);
	return rc;
}
