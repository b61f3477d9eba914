/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * log.c - stderr messages with the tool's name, as text or JSON lines,
 * rate limits per call site, and the error buffer.
 *
 * libbpf and libxdp print a lot, some of it alarming and expected (a
 * native attach that is refused before the generic one works). Their
 * output goes to debug: it shows only with -v or EDGE_DEBUG=1.
 *
 * A line is built whole in a buffer on the stack (sized so that the
 * longest message, fully escaped, fits: nothing is cut in the middle of
 * an escape) and written with one write(2).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>
#include <xdp/libxdp.h>

#include "log.h"

/* The longest program name written. */
#define LOG_PROG_MAX 64
/* Room for the longest line: every field at its longest with every byte
 * escaped as \ufffd or \u00XX (6 bytes), plus keys, time and count. */
#define LOG_LINE_MAX (6 * (LOG_MSG_MAX + 2 * LOG_CTX_MAX + LOG_PROG_MAX) + 256)

enum log_level {
	LOG_LEVEL_WARN,
	LOG_LEVEL_NOTE,
	LOG_LEVEL_DEBUG,
};

static const char *log_progname = "edge";
static bool log_is_verbose;
static _Atomic int log_fmt = LOG_FORMAT_TEXT;
static _Atomic bool log_syslog;

/* A line being built; never overflows (appends stop at the end, which
 * LOG_LINE_MAX makes unreachable). */
struct log_buf {
	char p[LOG_LINE_MAX];
	size_t len;
};

void errbuf_set(struct errbuf *err, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

void errbuf_clear(struct errbuf *err)
{
	if (err)
		err->msg[0] = '\0';
}

static void log_put(struct log_buf *b, const char *s, size_t n)
{
	if (n > sizeof(b->p) - b->len)
		n = sizeof(b->p) - b->len;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void log_puts(struct log_buf *b, const char *s)
{
	log_put(b, s, strlen(s));
}

static void log_printf(struct log_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void log_printf(struct log_buf *b, const char *fmt, ...)
{
	size_t room = sizeof(b->p) - b->len;
	va_list ap;
	int n;

	if (!room)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		b->len += (size_t)n < room ? (size_t)n : room - 1;
}

/* The length of the well-formed UTF-8 sequence (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF) at s[0..n), 0 if none. */
static size_t log_utf8_len(const unsigned char *s, size_t n)
{
	size_t len, i;
	unsigned char lo = 0x80, hi = 0xbf;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4;
	else
		return 0;
	if (len > n)
		return 0;
	/* the second byte's range excludes overlongs and surrogates */
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

/* s[0..n) as the inside of a JSON string. */
static void log_put_json(struct log_buf *b, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, run = 0, len;

	while (i + run < n) {
		unsigned char c = u[i + run];

		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
			run++;
			continue;
		}
		if (c >= 0x80) {
			len = log_utf8_len(u + i + run, n - i - run);
			if (len) {
				run += len;
				continue;
			}
		}
		log_put(b, s + i, run);
		i += run;
		run = 0;
		switch (c) {
		case '"':
			log_puts(b, "\\\"");
			break;
		case '\\':
			log_puts(b, "\\\\");
			break;
		case '\n':
			log_puts(b, "\\n");
			break;
		case '\r':
			log_puts(b, "\\r");
			break;
		case '\t':
			log_puts(b, "\\t");
			break;
		default:
			if (c >= 0x80)
				log_puts(b, "\\ufffd");
			else
				log_printf(b, "\\u%04x", c);
		}
		i++;
	}
	log_put(b, s + i, run);
}

/* s[0..n) for a text line: control characters (but tab, unless
 * space_too) as \xHH; with space_too, spaces too (context fields, so
 * that they stay one word each). */
static void log_put_text(struct log_buf *b, const char *s, size_t n,
			 bool space_too)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i, start = 0;

	for (i = 0; i < n; i++) {
		if ((u[i] >= 0x20 && u[i] != 0x7f &&
		     !(space_too && u[i] == ' ')) ||
		    (u[i] == '\t' && !space_too))
			continue;
		log_put(b, s + start, i - start);
		log_printf(b, "\\x%02x", u[i]);
		start = i + 1;
	}
	log_put(b, s + start, n - start);
}

static size_t log_cap(const char *s, size_t max)
{
	return strnlen(s, max);
}

static void log_json_field(struct log_buf *b, const char *key, const char *v,
			   size_t max)
{
	log_printf(b, ",\"%s\":\"", key);
	log_put_json(b, v, log_cap(v, max));
	log_puts(b, "\"");
}

static void log_write(const struct log_buf *b)
{
	size_t off = 0;
	ssize_t n;

	while (off < b->len) {
		n = write(STDERR_FILENO, b->p + off, b->len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		off += (size_t)n;
	}
}

static void log_time(struct log_buf *b)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	log_printf(b, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
		   tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		   (int)(ts.tv_nsec / 1000000));
}

/* Write one line: level, the context (ctx may be NULL), the message
 * (fmt, ap, then ": strerror(errnum)" when errnum), and how many lines
 * its site held back (when suppressed). Keeps errno. */
static void log_emit(enum log_level lvl, const struct log_ctx *ctx, int errnum,
		     uint64_t suppressed, const char *fmt, va_list ap)
{
	static const char *const names[] = {"warn", "note", "debug"};
	static const char *const prefix[] = {"", "note: ", "debug: "};
	const char *client = ctx ? ctx->client : NULL;
	const char *rid = ctx ? ctx->request_id : NULL;
	int saved = errno;
	char msg[LOG_MSG_MAX], ebuf[128];
	struct log_buf b;
	size_t n, skip = 0;
	int w;

	w = vsnprintf(msg, sizeof(msg), fmt, ap);
	n = w < 0 ? 0 : (size_t)w < sizeof(msg) ? (size_t)w : sizeof(msg) - 1;
	if (errnum) {
		w = snprintf(msg + n, sizeof(msg) - n, ": %s",
			     strerror_r(errnum, ebuf, sizeof(ebuf)));
		if (w > 0)
			n += (size_t)w < sizeof(msg) - n ? (size_t)w
							 : sizeof(msg) - n - 1;
	}
	b.len = 0;
	if (atomic_load_explicit(&log_fmt, memory_order_relaxed) ==
	    LOG_FORMAT_JSON) {
		log_puts(&b, "{\"time\":\"");
		log_time(&b);
		log_printf(&b, "\",\"level\":\"%s\"", names[lvl]);
		log_json_field(&b, "prog", log_progname, LOG_PROG_MAX);
		log_puts(&b, ",\"msg\":\"");
		log_put_json(&b, msg, n);
		log_puts(&b, "\"");
		if (client)
			log_json_field(&b, "client", client, LOG_CTX_MAX);
		if (rid)
			log_json_field(&b, "request_id", rid, LOG_CTX_MAX);
		if (suppressed)
			log_printf(&b, ",\"suppressed\":%llu",
				   (unsigned long long)suppressed);
		log_puts(&b, "}\n");
	} else {
		log_put_text(&b, log_progname,
			     log_cap(log_progname, LOG_PROG_MAX), false);
		log_puts(&b, ": ");
		skip = b.len;
		log_puts(&b, prefix[lvl]);
		if (client) {
			log_puts(&b, "client=");
			log_put_text(&b, client, log_cap(client, LOG_CTX_MAX),
				     true);
		}
		if (rid) {
			log_puts(&b, client ? " request_id=" : "request_id=");
			log_put_text(&b, rid, log_cap(rid, LOG_CTX_MAX), true);
		}
		if (client || rid)
			log_puts(&b, ": ");
		log_put_text(&b, msg, n, false);
		if (suppressed)
			log_printf(&b, " (%llu suppressed)",
				   (unsigned long long)suppressed);
		log_puts(&b, "\n");
	}
	if (atomic_load_explicit(&log_syslog, memory_order_relaxed)) {
		static const int pri[] = {LOG_WARNING, LOG_NOTICE, LOG_DEBUG};

		/* syslog adds the ident and its own time: the line from
		 * after "prog: " (text), without its newline */
		size_t end = b.len;

		if (end > skip && b.p[end - 1] == '\n')
			end--;
		syslog(pri[lvl], "%.*s", (int)(end - skip), b.p + skip);
	} else
		log_write(&b);
	errno = saved;
}

/* log_emit with a format of its own. */
static void log_emitf(enum log_level lvl, const struct log_ctx *ctx,
		      const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void log_emitf(enum log_level lvl, const struct log_ctx *ctx,
		      const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_emit(lvl, ctx, 0, 0, fmt, ap);
	va_end(ap);
}

/* A library's message as debug lines, one per line it holds. */
static void log_lib_vprint(const char *lib, const char *fmt, va_list ap)
{
	char buf[LOG_MSG_MAX];
	char *line, *nl;

	if (!log_is_verbose)
		return;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	for (line = buf; *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		log_emitf(LOG_LEVEL_DEBUG, NULL, "%s: %s", lib, line);
		if (!nl)
			break;
	}
}

static int log_libbpf_print(enum libbpf_print_level level, const char *fmt,
			    va_list ap)
{
	(void)level;
	log_lib_vprint("libbpf", fmt, ap);
	return 0;
}

static int log_libxdp_print(enum libxdp_print_level level, const char *fmt,
			    va_list ap)
{
	(void)level;
	log_lib_vprint("libxdp", fmt, ap);
	return 0;
}

void log_init(const char *progname, bool verbose)
{
	log_progname = progname;
	log_is_verbose = verbose;
	libbpf_set_print(log_libbpf_print);
	libxdp_set_print(log_libxdp_print);
}

bool log_verbose(void)
{
	return log_is_verbose;
}

bool log_syslog_available(void)
{
	struct stat st;

	return !stat("/dev/log", &st) && S_ISSOCK(st.st_mode);
}

int log_use_syslog(void)
{
	if (!log_syslog_available())
		return -ENOENT;
	openlog(log_progname, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	atomic_store_explicit(&log_syslog, true, memory_order_relaxed);
	return 0;
}

int log_format_parse(const char *s, enum log_format *out)
{
	if (!strcmp(s, "text"))
		*out = LOG_FORMAT_TEXT;
	else if (!strcmp(s, "json"))
		*out = LOG_FORMAT_JSON;
	else
		return -EINVAL;
	return 0;
}

const char *log_format_name(enum log_format f)
{
	switch (f) {
	case LOG_FORMAT_TEXT:
		return "text";
	case LOG_FORMAT_JSON:
		return "json";
	}
	return NULL;
}

void log_set_format(enum log_format f)
{
	atomic_store_explicit(&log_fmt, (int)f, memory_order_relaxed);
}

enum log_format log_get_format(void)
{
	return (enum log_format)atomic_load_explicit(&log_fmt,
						     memory_order_relaxed);
}

void log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_WARN, NULL, 0, 0, fmt, ap);
	va_end(ap);
}

void log_warn(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_WARN, NULL, saved, 0, fmt, ap);
	va_end(ap);
}

void log_note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_NOTE, NULL, 0, 0, fmt, ap);
	va_end(ap);
}

void log_debug(const char *fmt, ...)
{
	va_list ap;

	if (!log_is_verbose)
		return;
	va_start(ap, fmt);
	log_emit(LOG_LEVEL_DEBUG, NULL, 0, 0, fmt, ap);
	va_end(ap);
}

void log_warnx_ctx(const struct log_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_WARN, ctx, 0, 0, fmt, ap);
	va_end(ap);
}

void log_warn_ctx(const struct log_ctx *ctx, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_WARN, ctx, saved, 0, fmt, ap);
	va_end(ap);
}

void log_note_ctx(const struct log_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_NOTE, ctx, 0, 0, fmt, ap);
	va_end(ap);
}

void log_debug_ctx(const struct log_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	if (!log_is_verbose)
		return;
	va_start(ap, fmt);
	log_emit(LOG_LEVEL_DEBUG, ctx, 0, 0, fmt, ap);
	va_end(ap);
}

/*
 * GCRA, the token bucket as one timestamp: tat is when the bucket will be
 * full again. A line may go at now while tat - now <= (burst - 1) *
 * interval, and moves tat on by one interval. One CAS publishes that.
 * A line refused is counted as held back when count says so.
 */
static bool log_site_take(struct log_site *site, uint64_t now_ns,
			  uint64_t *suppressed, bool count)
{
	uint64_t burst = site->burst ? site->burst : 1;
	uint64_t tau = (burst - 1) * site->interval_ns;
	uint64_t tat =
	    atomic_load_explicit(&site->tat_ns, memory_order_relaxed);
	uint64_t from;

	do {
		from = tat > now_ns ? tat : now_ns;
		if (from - now_ns > tau) {
			if (count)
				atomic_fetch_add_explicit(&site->suppressed, 1,
							  memory_order_relaxed);
			return false;
		}
	} while (!atomic_compare_exchange_weak_explicit(
	    &site->tat_ns, &tat, from + site->interval_ns, memory_order_relaxed,
	    memory_order_relaxed));
	*suppressed = atomic_exchange_explicit(&site->suppressed, 0,
					       memory_order_relaxed);
	return true;
}

bool log_site_allow(struct log_site *site, uint64_t now_ns,
		    uint64_t *suppressed)
{
	return log_site_take(site, now_ns, suppressed, true);
}

bool log_site_take_held(struct log_site *site, uint64_t now_ns,
			uint64_t *suppressed)
{
	if (!atomic_load_explicit(&site->suppressed, memory_order_relaxed))
		return false;
	/* a line another thread let through meanwhile may have taken the
	 * count: then the token is spent, harmlessly */
	return log_site_take(site, now_ns, suppressed, false) &&
	       *suppressed != 0;
}

uint64_t log_clock_ns(void)
{
	struct timespec ts;

	/* a few ms of resolution is plenty for limits of a second, and
	 * this clock is cheaper */
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* log_emit for site when its limit lets the line through. */
static void log_site_vemit(struct log_site *site, enum log_level lvl,
			   const struct log_ctx *ctx, int errnum,
			   const char *fmt, va_list ap)
{
	uint64_t suppressed;

	if (lvl == LOG_LEVEL_DEBUG && !log_is_verbose)
		return;
	if (log_site_allow(site, log_clock_ns(), &suppressed))
		log_emit(lvl, ctx, errnum, suppressed, fmt, ap);
}

void log_warnx_held(const struct log_ctx *ctx, uint64_t suppressed,
		    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_WARN, ctx, 0, suppressed, fmt, ap);
	va_end(ap);
}

void log_site_warnx(struct log_site *site, const struct log_ctx *ctx,
		    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_site_vemit(site, LOG_LEVEL_WARN, ctx, 0, fmt, ap);
	va_end(ap);
}

void log_site_warn(struct log_site *site, const struct log_ctx *ctx,
		   const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	log_site_vemit(site, LOG_LEVEL_WARN, ctx, saved, fmt, ap);
	va_end(ap);
	errno = saved;
}

void log_site_note(struct log_site *site, const struct log_ctx *ctx,
		   const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_site_vemit(site, LOG_LEVEL_NOTE, ctx, 0, fmt, ap);
	va_end(ap);
}

void log_site_debug(struct log_site *site, const struct log_ctx *ctx,
		    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_site_vemit(site, LOG_LEVEL_DEBUG, ctx, 0, fmt, ap);
	va_end(ap);
}

bool log_rl_allow(struct log_rl *rl, uint64_t now_ns, uint64_t interval_ns,
		  uint64_t *suppressed)
{
	if (rl->next_ns && now_ns < rl->next_ns) {
		rl->suppressed++;
		return false;
	}
	*suppressed = rl->suppressed;
	rl->suppressed = 0;
	rl->next_ns = now_ns + interval_ns;
	if (!rl->next_ns)
		rl->next_ns = 1;
	return true;
}
