/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * log.h - messages for edge's tools, and an error buffer that carries a
 * failure's text up to whoever prints it.
 */
#ifndef EDGE_LOG_H
#define EDGE_LOG_H

#include <stdbool.h>
#include <stddef.h>

#define ERRBUF_LEN 512

/* A failure's message, filled by the function that failed and printed by
 * the caller at the top. An empty msg means "no detail". */
struct errbuf {
	char msg[ERRBUF_LEN];
};

/* Set err's message (printf-style). err may be NULL. Returns nothing. */
void errbuf_set(struct errbuf *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Empty err's message. err may be NULL. */
void errbuf_clear(struct errbuf *err);

/* Set the prefix of every message ("edgectl") and whether debug messages
 * are shown. Also routes libbpf's and libxdp's output: warnings and debug
 * text both go to log_debug, so they appear only when verbose. */
void log_init(const char *progname, bool verbose);

/* Whether debug output is on. */
bool log_verbose(void);

/* "progname: message\n" on stderr. */
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Like log_warnx, then ": strerror(errno)". */
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "progname: note: message\n" on stderr. */
void log_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "progname: debug: message\n" on stderr, only when verbose. */
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* EDGE_LOG_H */
