/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * log.h - messages for edge's tools, and an error buffer that carries a
 * failure's text up to whoever prints it.
 *
 * Every message is one line on stderr, written with one write(2), so lines
 * from several threads never interleave. Two formats (log_set_format):
 *
 *   text  "edged: message", "edged: note: message", "edged: debug: ...";
 *         with a connection's context (the *_ctx functions)
 *         "edged: client=203.0.113.9 request_id=4bf92f35: message".
 *         Control characters (but tab) in the message, and control
 *         characters and spaces in the context, are written as \xHH, so
 *         one call is always one line and each context field one word.
 *   json  one object per line: {"time":"2024-05-01T12:34:56.789Z",
 *         "level":"warn"|"note"|"debug","prog":"edged","msg":"...",
 *         "client":"...","request_id":"...","suppressed":N}; client,
 *         request_id and suppressed only when present. Always valid JSON:
 *         quotes, backslashes and control characters are escaped, bytes
 *         that are not well-formed UTF-8 become \ufffd.
 *
 * Messages are cut at LOG_MSG_MAX bytes, context fields at LOG_CTX_MAX.
 * All the log_* functions are thread-safe (the format, the program name
 * and verbosity are set at start-up or, for the format, with an atomic
 * store) and keep errno as it was.
 *
 * Rate limits per call site (log_warnx_rl and friends, below) keep an
 * attack or an exhausted resource from becoming a log flood.
 */
#ifndef EDGE_LOG_H
#define EDGE_LOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ERRBUF_LEN 512

/* The longest message (after formatting, with strerror), in bytes. */
#define LOG_MSG_MAX 2048
/* The longest client or request id written, in bytes. */
#define LOG_CTX_MAX 256

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
 * text both go to log_debug, so they appear only when verbose (a
 * multi-line message becomes one debug line per line). progname must
 * outlive logging (a string literal or argv[0]). */
void log_init(const char *progname, bool verbose);

/* Whether debug output is on. */
bool log_verbose(void);

/*
 * From now on, every message goes to syslog (facility daemon, the program
 * name as ident, with the pid) instead of stderr: for a daemon that
 * detaches, whose stderr becomes /dev/null. Warnings are LOG_WARNING,
 * notes LOG_NOTICE, debug LOG_DEBUG; the text is the line without its
 * "prog: " prefix (text format) or the JSON object (json format). The
 * connection to /dev/log is made at once (LOG_NDELAY), before a chroot
 * or a privilege drop could prevent it. Returns 0, or -ENOENT when there
 * is no /dev/log (no syslog daemon: lines would be lost; the caller says
 * so while stderr is still open, and logging stays on stderr).
 */
int log_use_syslog(void);

/* Whether /dev/log is a socket (a syslog daemon, journald's included,
 * listens there). */
bool log_syslog_available(void);

enum log_format {
	LOG_FORMAT_TEXT = 0, /* the default */
	LOG_FORMAT_JSON,
};

/* Parse the config key log_format: "text" or "json" into *out. Returns 0,
 * or -EINVAL (then *out is unchanged). */
int log_format_parse(const char *s, enum log_format *out);

/* "text" or "json" (NULL for a value outside the enum). */
const char *log_format_name(enum log_format f);

/* Write every later message in format f. Thread-safe: lines already being
 * written keep the format they started with. */
void log_set_format(enum log_format f);

/* The format messages are written in now. */
enum log_format log_get_format(void);

/* "progname: message\n" on stderr. */
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Like log_warnx, then ": strerror(errno)". */
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "progname: note: message\n" on stderr. */
void log_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "progname: debug: message\n" on stderr, only when verbose. */
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * A connection's context, written with each of its messages: the client's
 * address as text and the request's id (its X-Request-ID). Either may be
 * NULL (left out); so may ctx itself (then these are log_warnx etc.).
 * The strings are only read during the call. Bytes that came from a
 * client are fine: they are escaped as the format needs.
 */
struct log_ctx {
	const char *client;
	const char *request_id;
};

/* log_warnx, log_warn, log_note, log_debug with ctx's fields. */
void log_warnx_ctx(const struct log_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void log_warn_ctx(const struct log_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void log_note_ctx(const struct log_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void log_debug_ctx(const struct log_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Rate limits per call site. Each log_*_rl macro below owns one static
 * struct log_site, shared by every thread that runs that line: a token
 * bucket of LOG_RL_BURST lines refilled at one line per
 * LOG_RL_INTERVAL_MS. So a site writes at most LOG_RL_BURST lines at
 * once, and at most LOG_RL_BURST + T / LOG_RL_INTERVAL_MS lines in any T
 * ms; the rest are counted, and the next line that gets through says how
 * many were held back since the previous one ("... (N suppressed)" in
 * text, "suppressed":N in JSON). Lock-free (one compare-and-swap per
 * line written, one atomic add per line held back). A debug line
 * that is off (not verbose) costs nothing and is not counted.
 */
#define LOG_RL_BURST 10
#define LOG_RL_INTERVAL_MS 1000

/* One call site's limit. Zero-initialised state; set burst and
 * interval_ns with LOG_SITE_INIT. burst 0 counts as 1. */
struct log_site {
	_Atomic uint64_t tat_ns;     /* when the bucket is full again */
	_Atomic uint64_t suppressed; /* held back since the last line */
	uint64_t interval_ns;	     /* one line per interval_ns ... */
	uint32_t burst;		     /* ... and up to burst at once */
};

#define LOG_SITE_INIT(burst_, interval_ms_)                                    \
	{                                                                      \
		.interval_ns = (uint64_t)(interval_ms_)*1000000ull,            \
		.burst = (burst_)                                              \
	}

/* Whether site may write a line at now_ns (CLOCK_MONOTONIC); if so,
 * *suppressed is how many it held back since its previous line (then
 * reset to 0), else the line is counted as held back. Thread-safe. */
bool log_site_allow(struct log_site *site, uint64_t now_ns,
		    uint64_t *suppressed);

/* Whether site holds back lines that no line has counted yet and its
 * limit lets a line through at now_ns: if so, *suppressed is their count
 * (reset to 0), and the line that says so is the caller's to write (it
 * counts against the limit as one). For a held-back count that must not
 * wait for a next line that may never come: a timer asks. Thread-safe. */
bool log_site_take_held(struct log_site *site, uint64_t now_ns,
			uint64_t *suppressed);

/* Now on the clock the limits run on (monotonic, ns; a few ms of
 * resolution). */
uint64_t log_clock_ns(void);

/* log_warnx_ctx for a line that a limit of the caller's let through,
 * written with the count that limit held back before it (0: none) as
 * log_site_warnx writes it. */
void log_warnx_held(const struct log_ctx *ctx, uint64_t suppressed,
		    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* log_warnx_ctx, log_warn_ctx, log_note_ctx, log_debug_ctx through site's
 * limit (ctx may be NULL). Thread-safe. */
void log_site_warnx(struct log_site *site, const struct log_ctx *ctx,
		    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void log_site_warn(struct log_site *site, const struct log_ctx *ctx,
		   const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void log_site_note(struct log_site *site, const struct log_ctx *ctx,
		   const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void log_site_debug(struct log_site *site, const struct log_ctx *ctx,
		    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The call site's own limit, then fn(site, ctx, fmt, ...). */
#define LOG_RL_CALL(fn, ctx, ...)                                              \
	do {                                                                   \
		static struct log_site log_site_ =                             \
		    LOG_SITE_INIT(LOG_RL_BURST, LOG_RL_INTERVAL_MS);           \
		fn(&log_site_, (ctx), __VA_ARGS__);                            \
	} while (0)

/* log_warnx(fmt, ...) etc., limited per call site (above). Statements,
 * printf-checked. */
#define log_warnx_rl(...) LOG_RL_CALL(log_site_warnx, NULL, __VA_ARGS__)
#define log_warn_rl(...) LOG_RL_CALL(log_site_warn, NULL, __VA_ARGS__)
#define log_note_rl(...) LOG_RL_CALL(log_site_note, NULL, __VA_ARGS__)
#define log_debug_rl(...) LOG_RL_CALL(log_site_debug, NULL, __VA_ARGS__)
#define log_warnx_ctx_rl(ctx, ...) LOG_RL_CALL(log_site_warnx, ctx, __VA_ARGS__)
#define log_warn_ctx_rl(ctx, ...) LOG_RL_CALL(log_site_warn, ctx, __VA_ARGS__)
#define log_note_ctx_rl(ctx, ...) LOG_RL_CALL(log_site_note, ctx, __VA_ARGS__)
#define log_debug_ctx_rl(ctx, ...) LOG_RL_CALL(log_site_debug, ctx, __VA_ARGS__)

/*
 * A rate limit for one source of messages owned by one thread (a
 * worker's listener out of descriptors, say): at most one message per
 * interval, the caller formats the held-back count itself. Not
 * thread-safe: one per thread and source. For a limit shared by threads,
 * use a struct log_site.
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
