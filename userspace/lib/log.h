/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * log.h - messages for edge's tools, and an error buffer that carries a
 * failure's text up to whoever prints it.
 */
#ifndef EDGE_LOG_H
#define EDGE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/*
 * A rate limit for one source of messages (a listener out of descriptors,
 * say), so that an attack or an exhausted resource cannot become a log
 * flood: at most one message per interval. Not thread-safe: one per
 * thread and source.
 */
struct log_rl {
	uint64_t next_ns;    /* no message before this (monotonic ns) */
	uint64_t suppressed; /* messages held back since the last one */
};

/* Whether a message from rl may be written at now_ns; if so, *suppressed
 * is the number held back since the previous one (then reset) and the
 * next may come interval_ns later. Otherwise the message is counted as
 * held back. */
bool log_rl_allow(struct log_rl *rl, uint64_t now_ns, uint64_t interval_ns,
		  uint64_t *suppressed);

#endif /* EDGE_LOG_H */
