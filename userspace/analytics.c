/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * analytics.c - Record: the event, the queue, and one writer thread per
 * sink (a lane) with its memory spool and, optionally, its disk spool.
 *
 * The queue is a ring of packed events (struct analytics_packed: the
 * numbers, then the string fields' bytes) behind one mutex. A producer
 * packs outside it and holds it for a bounds check (events and bytes) and
 * one copy of a few hundred bytes; a lock-free ring can replace it behind
 * the same analytics_enqueue() if profiles ever say otherwise. Every lane
 * has its own head: a slot and its bytes are free once the slowest lane
 * has passed them, and a lane never holds the mutex while it unpacks,
 * formats or writes (events between its head and the tail are not
 * overwritten until every head has passed them).
 *
 * A lane moves events from the queue into its spool (an array of
 * spool_cap events it alone touches), writes the spool in batches of
 * batch_max and drops what it wrote. While the sink fails the spool keeps
 * the events and the lane retries after min..max backoff. When the spool
 * is full, its oldest batch goes to the disk spool if the lane has one,
 * else the newest events are dropped and counted, so that what is kept
 * stays in order. The disk's files are older than anything in memory, so
 * they are written first: one batch per turn of the loop, taking new
 * events from the queue in between, until none is left.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analytics.h"
#include "analytics_spool.h"
#include "log.h"

#define ANALYTICS_QUEUE_DEFAULT 8192
#define ANALYTICS_BATCH_DEFAULT 512
#define ANALYTICS_SPOOL_DEFAULT 16384
#define ANALYTICS_FLUSH_MS_DEFAULT 200
#define ANALYTICS_RETRY_MIN_MS_DEFAULT 100
#define ANALYTICS_RETRY_MAX_MS_DEFAULT 10000
_Static_assert(ANALYTICS_F_MAX < 32, "analytics_event.truncated: 32 bits");
_Static_assert(ANALYTICS_SINKS_MAX <= 32, "analytics_enqueue: wake mask");

/* Queue-full drops are reported at most this often. */
#define ANALYTICS_DROP_LOG_NS (10 * 1000000000ULL)

/* ---- the event ------------------------------------------------------ */

struct analytics_field_info {
	const char *name;
	size_t off;
	size_t size;
};

static const struct analytics_field_info analytics_fields[ANALYTICS_F_MAX] = {
#define ANALYTICS_FIELD_ROW(id, member, sz)                                    \
	[ANALYTICS_F_##                                                        \
	    id] = {#member, offsetof(struct analytics_event, member), sz},
    ANALYTICS_STRINGS(ANALYTICS_FIELD_ROW)
#undef ANALYTICS_FIELD_ROW
};

const char *analytics_field_name(enum analytics_field f)
{
	return (unsigned)f < ANALYTICS_F_MAX ? analytics_fields[f].name : NULL;
}

bool analytics_event_set(struct analytics_event *ev, enum analytics_field f,
			 const char *s, size_t len)
{
	const struct analytics_field_info *fi;
	char *dst;
	size_t n;
	bool whole = true;

	if ((unsigned)f >= ANALYTICS_F_MAX)
		return false;
	fi = &analytics_fields[f];
	dst = (char *)ev + fi->off;
	if (!s)
		len = 0;
	else if (len == SIZE_MAX)
		len = strlen(s);
	else
		len = strnlen(s, len);
	n = len;
	if (n > fi->size - 1) {
		n = fi->size - 1;
		/* do not split a UTF-8 sequence: back off continuation bytes */
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
		whole = false;
	}
	if (n)
		memcpy(dst, s, n);
	dst[n] = '\0';
	if (whole)
		ev->truncated &= ~(1u << f);
	else
		ev->truncated |= 1u << f;
	return whole;
}

size_t analytics_field_size(enum analytics_field f)
{
	return (unsigned)f < ANALYTICS_F_MAX ? analytics_fields[f].size : 0;
}

const char *analytics_event_get(const struct analytics_event *ev,
				enum analytics_field f)
{
	if ((unsigned)f >= ANALYTICS_F_MAX)
		return "";
	return (const char *)ev + analytics_fields[f].off;
}

size_t analytics_utf8_seq(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t len, i;
	uint32_t cp;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		len = 2;
		cp = p[0] & 0x1f;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		len = 3;
		cp = p[0] & 0x0f;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		len = 4;
		cp = p[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* ---- the JSON line ------------------------------------------------- */

/* Bytes that go into a JSON string as they are: printable ASCII but '"'
 * and '\\' (0x7f too, as jansson writes it); the rest are escaped, or
 * checked as UTF-8. */
static const unsigned char json_plain[256] = {
    [0x20] = 1,
    [0x21] = 1,
    [0x23 ... 0x5b] = 1,
    [0x5d ... 0x7f] = 1,
};

size_t analytics_json_string(char *out, const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0, i = 0, run, k;

	out[o++] = '"';
	while (i < n) {
		for (run = i; run < n && json_plain[p[run]]; run++)
			;
		if (run > i) {
			memcpy(out + o, p + i, run - i);
			o += run - i;
			i = run;
			if (i == n)
				break;
		}
		if (p[i] >= 0x80) {
			k = analytics_utf8_seq(s + i, n - i);
			if (k == 0) { /* not UTF-8: U+FFFD for the byte */
				memcpy(out + o, "\xef\xbf\xbd", 3);
				o += 3;
				i++;
			} else {
				memcpy(out + o, p + i, k);
				o += k;
				i += k;
			}
			continue;
		}
		out[o++] = '\\';
		switch (p[i]) {
		case '"':
		case '\\':
			out[o++] = (char)p[i];
			break;
		case '\b':
			out[o++] = 'b';
			break;
		case '\f':
			out[o++] = 'f';
			break;
		case '\n':
			out[o++] = 'n';
			break;
		case '\r':
			out[o++] = 'r';
			break;
		case '\t':
			out[o++] = 't';
			break;
		default:
			memcpy(out + o, "u00", 3);
			o += 3;
			out[o++] = hex[p[i] >> 4];
			out[o++] = hex[p[i] & 15];
		}
		i++;
	}
	out[o++] = '"';
	return o;
}

/* Decimal digits of v at out; returns how many. */
static size_t json_u64(char *out, uint64_t v)
{
	char t[20];
	size_t n = 0, i;

	do {
		t[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (i = 0; i < n; i++)
		out[i] = t[n - 1 - i];
	return n;
}

static size_t json_lit(char *out, const char *s)
{
	size_t n = strlen(s);

	memcpy(out, s, n);
	return n;
}

/* "YYYY-MM-DDTHH:MM:SS.NNNNNNNNNZ" (quoted) for unix nanoseconds; the
 * part up to the seconds is kept per thread, so gmtime_r runs once a
 * second, not once a record. */
static size_t json_time(char *out, uint64_t ns)
{
	static __thread int64_t last_sec = -1;
	static __thread char last[32];
	static __thread size_t last_len;
	int64_t sec = (int64_t)(ns / 1000000000ULL);
	unsigned frac = (unsigned)(ns % 1000000000ULL);
	size_t o = 0;
	int i;

	if (sec != last_sec) {
		time_t t = (time_t)sec;
		struct tm tm;

		if (!gmtime_r(&t, &tm))
			return json_lit(out, "null");
		last_len =
		    strftime(last, sizeof(last), "%Y-%m-%dT%H:%M:%S", &tm);
		if (!last_len)
			return json_lit(out, "null");
		last_sec = sec;
	}
	out[o++] = '"';
	memcpy(out + o, last, last_len);
	o += last_len;
	out[o++] = '.';
	for (i = 8; i >= 0; i--) {
		out[o + (size_t)i] = (char)('0' + frac % 10);
		frac /= 10;
	}
	o += 9;
	out[o++] = 'Z';
	out[o++] = '"';
	return o;
}

/* A field's value: null when empty; the digits of cold_start_ms,
 * upstream_status and attempts as a number (null when there are none),
 * tls_resumed as a boolean, the rest as strings. Bounded by the field's size
 * even if its NUL is missing (a record read back from a damaged disk spool). */
static size_t json_field(char *out, const struct analytics_event *ev,
			 unsigned i)
{
	const struct analytics_field_info *fi = &analytics_fields[i];
	const char *v = (const char *)ev + fi->off;
	size_t n = strnlen(v, fi->size);

	if (n == 0)
		return json_lit(out, "null");
	if (i == ANALYTICS_F_TLS_RESUMED)
		return json_lit(out, n == 4 && memcmp(v, "true", 4) == 0
					 ? "true"
					 : "false");
	if (i == ANALYTICS_F_COLD_START_MS ||
	    i == ANALYTICS_F_UPSTREAM_STATUS || i == ANALYTICS_F_ATTEMPTS) {
		uint64_t x = 0;
		size_t d;

		for (d = 0; d < n && d < 19 && v[d] >= '0' && v[d] <= '9'; d++)
			x = x * 10 + (uint64_t)(v[d] - '0');
		return d ? json_u64(out, x) : json_lit(out, "null");
	}
	return analytics_json_string(out, v, n);
}

size_t analytics_event_json_into(const struct analytics_event *ev, char *out,
				 const char *member, size_t member_len)
{
	size_t o = 0;
	unsigned i;
	bool any = false;

#define KEY(k) (o += json_lit(out + o, "\"" k "\":"))
	out[o++] = '{';
	if (member_len) {
		memcpy(out + o, member, member_len);
		o += member_len;
	}
	KEY("time");
	o += json_time(out + o, ev->time_ns);
	out[o++] = ',';
	KEY("kind");
	o += json_lit(out + o, ev->kind == ANALYTICS_KIND_TUNNEL
				   ? "\"tunnel\""
				   : "\"request\"");
	for (i = 0; i < ANALYTICS_F_MAX; i++) {
		out[o++] = ',';
		out[o++] = '"';
		o += json_lit(out + o, analytics_fields[i].name);
		out[o++] = '"';
		out[o++] = ':';
		o += json_field(out + o, ev, i);
		if (i != ANALYTICS_F_PATH)
			continue;
		out[o++] = ',';
		KEY("status");
		o += json_u64(out + o, ev->status);
		out[o++] = ',';
		KEY("outcome");
		o += analytics_json_string(
		    out + o, outcome_name((enum outcome)ev->outcome),
		    strlen(outcome_name((enum outcome)ev->outcome)));
		out[o++] = ',';
		KEY("bytes_in");
		o += json_u64(out + o, ev->bytes_in);
		out[o++] = ',';
		KEY("bytes_out");
		o += json_u64(out + o, ev->bytes_out);
		out[o++] = ',';
		KEY("duration_ns");
		o += json_u64(out + o, ev->duration_ns);
		out[o++] = ',';
		KEY("upstream_ns");
		o += json_u64(out + o, ev->upstream_ns);
	}
	for (i = 0; i < ANALYTICS_F_MAX; i++) {
		if (!(ev->truncated & (1u << i)))
			continue;
		if (!any)
			o += json_lit(out + o, ",\"truncated\":[");
		else
			out[o++] = ',';
		out[o++] = '"';
		o += json_lit(out + o, analytics_fields[i].name);
		out[o++] = '"';
		any = true;
	}
	if (any)
		out[o++] = ']';
#undef KEY
	out[o++] = '}';
	out[o++] = '\n';
	return o;
}

int analytics_event_json(const struct analytics_event *ev, char **line,
			 size_t *len)
{
	char *s = malloc(ANALYTICS_JSON_MAX + 1);
	size_t n;

	if (!s)
		return -ENOMEM;
	n = analytics_event_json_into(ev, s, NULL, 0);
	s[n] = '\0';
	*line = s;
	*len = n;
	return 0;
}

/* ---- the combined text line ----------------------------------------- */

int analytics_format_parse(const char *s, enum analytics_format *out)
{
	if (strcmp(s, "json") == 0)
		*out = ANALYTICS_FORMAT_JSON;
	else if (strcmp(s, "combined") == 0)
		*out = ANALYTICS_FORMAT_COMBINED;
	else
		return -EINVAL;
	return 0;
}

/* Append s to out at *o as nginx escapes a logged variable: '"', '\\'
 * and bytes outside 0x20..0x7e as \xHH; "" as "-". */
static void combined_str_n(char *out, size_t *o, const char *s, size_t size)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p = (const unsigned char *)s;
	const unsigned char *end = p + strnlen(s, size);

	if (p == end) {
		out[(*o)++] = '-';
		return;
	}
	for (; p < end; p++) {
		if (*p < 0x20 || *p > 0x7e || *p == '"' || *p == '\\') {
			out[(*o)++] = '\\';
			out[(*o)++] = 'x';
			out[(*o)++] = hex[*p >> 4];
			out[(*o)++] = hex[*p & 15];
		} else {
			out[(*o)++] = (char)*p;
		}
	}
}

/* A field, read no further than its member's size. */
#define combined_str(out, o, field)                                            \
	combined_str_n((out), (o), (field), sizeof(field))

size_t analytics_event_combined(const struct analytics_event *ev, char *out)
{
	static const char *const mon[] = {"Jan", "Feb", "Mar", "Apr",
					  "May", "Jun", "Jul", "Aug",
					  "Sep", "Oct", "Nov", "Dec"};
	time_t sec = (time_t)(ev->time_ns / 1000000000ULL);
	struct tm tm;
	size_t o = 0;

	combined_str(out, &o, ev->client_ip);
	memcpy(out + o, " - - [", 6);
	o += 6;
	if (!gmtime_r(&sec, &tm))
		memset(&tm, 0, sizeof(tm));
	o +=
	    (size_t)snprintf(out + o, 32, "%02d/%s/%04d:%02d:%02d:%02d +0000",
			     tm.tm_mday, mon[tm.tm_mon % 12], tm.tm_year + 1900,
			     tm.tm_hour, tm.tm_min, tm.tm_sec);
	memcpy(out + o, "] \"", 3);
	o += 3;
	if (ev->method[0]) {
		combined_str(out, &o, ev->method);
		out[o++] = ' ';
		combined_str(out, &o, ev->path);
		if (ev->http_version[0]) {
			out[o++] = ' ';
			combined_str(out, &o, ev->http_version);
		}
	} else {
		out[o++] = '-'; /* no request line was read */
	}
	o += (size_t)snprintf(out + o, 48, "\" %u %llu \"", ev->status,
			      (unsigned long long)ev->bytes_out);
	combined_str(out, &o, ev->referrer);
	memcpy(out + o, "\" \"", 3);
	o += 3;
	combined_str(out, &o, ev->user_agent);
	out[o++] = '"';
	out[o++] = '\n';
	return o;
}

/* ---- the writer ------------------------------------------------------- */

struct analytics_lane {
	struct analytics *a;
	struct analytics_sink sink;
	struct analytics_spool *disk; /* NULL: memory only */
	pthread_t thread;
	pthread_cond_t cond;

	/* under a->mu */
	uint64_t head;
	bool waiting, reopen_req;
	/* waiting with nothing to write or retry: no deadline until the
	 * next event comes (an idle lane sleeps), then flush_ms */
	bool idle;

	/* the lane's thread only */
	struct analytics_event *spool;
	size_t nspool;
	struct analytics_event *replay; /* the oldest disk file, read */
	size_t nreplay, replay_done;
	bool failing, spool_full_logged;
	int disk_logged; /* what the disk spool last said: 0, FULL, -errno */
	uint64_t retry_at, backoff_ns, fail_count;

	_Atomic uint64_t written, dropped_spool_full, dropped_shutdown,
	    write_errors, batches, spooled, spilled, replayed;
	_Atomic bool up;
};

struct analytics {
	struct analytics_conf conf;

	pthread_mutex_t mu;
	/* under mu: the ring of packed events. Event i (a count from 0) is
	 * qlen[i % queue_cap] bytes at byte position qoff[i % queue_cap] (a
	 * count too) of qb, qbytes long; btail is where the next one goes.
	 * A lane reads events between its head and tail without the mutex:
	 * neither their slot nor their bytes are reused until every head
	 * has passed them. */
	unsigned char *qb;
	size_t qbytes;
	uint64_t *qoff;
	uint32_t *qlen;
	uint64_t tail, btail;
	bool stopping;

	struct analytics_lane lane[ANALYTICS_SINKS_MAX];
	unsigned nlanes;
	bool started; /* owner's (start/stop) */

	/* lane 0's thread only: it reports queue drops */
	uint64_t qdrop_logged, qdrop_log_at;

	_Atomic uint64_t enqueued, dropped_queue_full;
};

/* ---- packed events in the queue -------------------------------------- */

/* An event in the queue: these numbers, then each string field's bytes
 * (len[] of them, no NUL), so that a request's record costs the queue
 * what it holds (a few hundred bytes), not the 2.5 KiB of its struct. */
struct analytics_packed {
	uint64_t time_ns, duration_ns, upstream_ns, bytes_in, bytes_out;
	uint32_t truncated;
	uint16_t status;
	uint8_t kind, outcome;
	uint16_t len[ANALYTICS_F_MAX];
};
#define ANALYTICS_PACKED_MAX                                                   \
	(sizeof(struct analytics_packed) + sizeof(struct analytics_event))
/* the queue's bytes: this many per event it may hold (a typical record
 * packs to 200-400), and never less than a few of the longest */
#define ANALYTICS_QUEUE_BYTES_PER_EVENT 512

/* Pack ev into out (ANALYTICS_PACKED_MAX bytes); returns the length. A
 * field is taken up to its NUL, at most its size - 1 bytes. */
static size_t analytics_pack(const struct analytics_event *ev,
			     unsigned char *out)
{
	struct analytics_packed h = {
	    .time_ns = ev->time_ns,
	    .duration_ns = ev->duration_ns,
	    .upstream_ns = ev->upstream_ns,
	    .bytes_in = ev->bytes_in,
	    .bytes_out = ev->bytes_out,
	    .truncated = ev->truncated,
	    .status = ev->status,
	    .kind = ev->kind,
	    .outcome = ev->outcome,
	};
	size_t o = sizeof(h), n;
	unsigned f;

	for (f = 0; f < ANALYTICS_F_MAX; f++) {
		const char *v = (const char *)ev + analytics_fields[f].off;

		n = strnlen(v, analytics_fields[f].size - 1);
		h.len[f] = (uint16_t)n;
		memcpy(out + o, v, n);
		o += n;
	}
	memcpy(out, &h, sizeof(h));
	return o;
}

/* The event packed in in[0..len) into ev, every field NUL-terminated and
 * the rest of the struct zero. */
static void analytics_unpack(const unsigned char *in, size_t len,
			     struct analytics_event *ev)
{
	struct analytics_packed h;
	size_t o = sizeof(h), n;
	unsigned f;

	memset(ev, 0, sizeof(*ev));
	if (len < sizeof(h))
		return;
	memcpy(&h, in, sizeof(h));
	ev->time_ns = h.time_ns;
	ev->duration_ns = h.duration_ns;
	ev->upstream_ns = h.upstream_ns;
	ev->bytes_in = h.bytes_in;
	ev->bytes_out = h.bytes_out;
	ev->truncated = h.truncated;
	ev->status = h.status;
	ev->kind = h.kind;
	ev->outcome = h.outcome;
	for (f = 0; f < ANALYTICS_F_MAX; f++) {
		n = h.len[f];
		if (n > analytics_fields[f].size - 1 || n > len - o)
			break;
		memcpy((char *)ev + analytics_fields[f].off, in + o, n);
		o += n;
	}
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static struct timespec ns_to_ts(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000ULL),
			      (long)(ns % 1000000000ULL)};

	return ts;
}

#define CTR_ADD(x, field, n)                                                   \
	atomic_fetch_add_explicit(&(x)->field, (n), memory_order_relaxed)
#define CTR_GET(x, field)                                                      \
	atomic_load_explicit(&(x)->field, memory_order_relaxed)
#define CTR_SET(x, field, v)                                                   \
	atomic_store_explicit(&(x)->field, (v), memory_order_relaxed)

static void analytics_sink_close(const struct analytics_sink *sk)
{
	if (sk->ops && sk->ops->close)
		sk->ops->close(sk->ctx);
}

/* Set up lane a->lane[a->nlanes] for sink and disk (taken over). */
static int analytics_lane_init(struct analytics *a,
			       const struct analytics_sink *sink,
			       struct analytics_spool *disk)
{
	struct analytics_lane *l = &a->lane[a->nlanes];
	pthread_condattr_t ca;
	int rc;

	memset(l, 0, sizeof(*l));
	l->a = a;
	l->sink = *sink;
	l->disk = disk;
	l->backoff_ns = a->conf.retry_min_ms * 1000000ULL;
	atomic_init(&l->up, true);
	l->spool = calloc(a->conf.spool_cap, sizeof(*l->spool));
	if (!l->spool)
		goto fail;
	if (pthread_condattr_init(&ca))
		goto fail;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	rc = pthread_cond_init(&l->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (rc)
		goto fail;
	/* a lane added later starts where the queue is now */
	l->head = a->tail;
	a->nlanes++;
	return 0;
fail:
	free(l->spool);
	analytics_sink_close(sink);
	analytics_spool_close(disk);
	memset(l, 0, sizeof(*l));
	return -ENOMEM;
}

int analytics_new(const struct analytics_conf *conf, struct analytics **out)
{
	struct analytics *a;
	int rc;

	*out = NULL;
	if (!conf->sink.ops || !conf->sink.ops->write_batch) {
		analytics_sink_close(&conf->sink);
		analytics_spool_close(conf->disk);
		return -EINVAL;
	}
	a = calloc(1, sizeof(*a));
	if (!a) {
		analytics_sink_close(&conf->sink);
		analytics_spool_close(conf->disk);
		return -ENOMEM;
	}
	a->conf = *conf;
	if (!a->conf.queue_cap)
		a->conf.queue_cap = ANALYTICS_QUEUE_DEFAULT;
	if (!a->conf.batch_max)
		a->conf.batch_max = ANALYTICS_BATCH_DEFAULT;
	if (a->conf.batch_max > ANALYTICS_SPOOL_FILE_EVENTS_MAX)
		a->conf.batch_max = ANALYTICS_SPOOL_FILE_EVENTS_MAX;
	if (!a->conf.spool_cap)
		a->conf.spool_cap = ANALYTICS_SPOOL_DEFAULT;
	if (a->conf.spool_cap < a->conf.batch_max)
		a->conf.spool_cap = a->conf.batch_max;
	if (!a->conf.flush_ms)
		a->conf.flush_ms = ANALYTICS_FLUSH_MS_DEFAULT;
	if (!a->conf.retry_min_ms)
		a->conf.retry_min_ms = ANALYTICS_RETRY_MIN_MS_DEFAULT;
	if (!a->conf.retry_max_ms)
		a->conf.retry_max_ms = ANALYTICS_RETRY_MAX_MS_DEFAULT;
	if (a->conf.retry_max_ms < a->conf.retry_min_ms)
		a->conf.retry_max_ms = a->conf.retry_min_ms;
	a->qbytes = a->conf.queue_cap * ANALYTICS_QUEUE_BYTES_PER_EVENT;
	if (a->qbytes < 4 * ANALYTICS_PACKED_MAX)
		a->qbytes = 4 * ANALYTICS_PACKED_MAX;
	a->qb = malloc(a->qbytes);
	a->qoff = calloc(a->conf.queue_cap, sizeof(*a->qoff));
	a->qlen = calloc(a->conf.queue_cap, sizeof(*a->qlen));
	if (!a->qb || !a->qoff || !a->qlen) {
		free(a->qb);
		free(a->qoff);
		free(a->qlen);
		analytics_sink_close(&conf->sink);
		analytics_spool_close(conf->disk);
		free(a);
		return -ENOMEM;
	}
	pthread_mutex_init(&a->mu, NULL);
	rc = analytics_lane_init(a, &conf->sink, conf->disk);
	if (rc) {
		pthread_mutex_destroy(&a->mu);
		free(a->qb);
		free(a->qoff);
		free(a->qlen);
		free(a);
		return rc;
	}
	*out = a;
	return 0;
}

int analytics_add_sink(struct analytics *a, const struct analytics_sink *sink,
		       struct analytics_spool *disk)
{
	int rc = 0;

	if (!sink->ops || !sink->ops->write_batch)
		rc = -EINVAL;
	else if (a->started)
		rc = -EBUSY;
	else if (a->nlanes == ANALYTICS_SINKS_MAX)
		rc = -ENOSPC;
	if (rc) {
		analytics_sink_close(sink);
		analytics_spool_close(disk);
		return rc;
	}
	pthread_mutex_lock(&a->mu);
	rc = analytics_lane_init(a, sink, disk);
	pthread_mutex_unlock(&a->mu);
	return rc;
}

/* The slowest lane's head: the queue's free space ends there. Under mu. */
static uint64_t analytics_min_head(const struct analytics *a)
{
	uint64_t h = a->lane[0].head;
	unsigned i;

	for (i = 1; i < a->nlanes; i++)
		if (a->lane[i].head < h)
			h = a->lane[i].head;
	return h;
}

/* Bytes of the ring in use: from the oldest event a lane still needs to
 * the tail. Under mu. */
static size_t analytics_queue_bytes(const struct analytics *a, uint64_t h)
{
	return h == a->tail
		   ? 0
		   : (size_t)(a->btail - a->qoff[h % a->conf.queue_cap]);
}

int analytics_enqueue(struct analytics *a, const struct analytics_event *ev)
{
	unsigned char packed[ANALYTICS_PACKED_MAX];
	size_t n = analytics_pack(ev, packed), at, first;
	unsigned wake = 0, i;
	uint64_t h;
	int rc = 0;

	pthread_mutex_lock(&a->mu);
	h = analytics_min_head(a);
	if (a->stopping) {
		rc = -ESHUTDOWN;
	} else if (a->tail - h >= a->conf.queue_cap ||
		   analytics_queue_bytes(a, h) + n > a->qbytes) {
		rc = -ENOBUFS;
	} else {
		at = (size_t)(a->btail % a->qbytes);
		first = a->qbytes - at < n ? a->qbytes - at : n;
		memcpy(a->qb + at, packed, first);
		memcpy(a->qb, packed + first, n - first);
		a->qoff[a->tail % a->conf.queue_cap] = a->btail;
		a->qlen[a->tail % a->conf.queue_cap] = (uint32_t)n;
		a->btail += n;
		a->tail++;
		for (i = 0; i < a->nlanes; i++) {
			struct analytics_lane *l = &a->lane[i];

			if (l->waiting &&
			    a->tail - l->head >= a->conf.batch_max) {
				l->waiting = false;
				wake |= 1u << i;
			} else if (l->waiting && l->idle) {
				l->idle = false; /* its flush_ms starts */
				wake |= 1u << i;
			}
		}
	}
	pthread_mutex_unlock(&a->mu);
	for (i = 0; wake; i++, wake >>= 1)
		if (wake & 1)
			pthread_cond_signal(&a->lane[i].cond);
	if (rc)
		CTR_ADD(a, dropped_queue_full, 1);
	else
		CTR_ADD(a, enqueued, 1);
	return rc;
}

void analytics_reopen(struct analytics *a)
{
	unsigned i;

	pthread_mutex_lock(&a->mu);
	for (i = 0; i < a->nlanes; i++)
		a->lane[i].reopen_req = true;
	pthread_mutex_unlock(&a->mu);
	for (i = 0; i < a->nlanes; i++)
		pthread_cond_signal(&a->lane[i].cond);
}

unsigned analytics_nsinks(const struct analytics *a)
{
	return a->nlanes;
}

int analytics_sink_stats(struct analytics *a, unsigned i,
			 struct analytics_sink_stats *st)
{
	struct analytics_lane *l;

	memset(st, 0, sizeof(*st));
	if (i >= a->nlanes)
		return -ENOENT;
	l = &a->lane[i];
	st->name = l->sink.ops->name;
	st->written = CTR_GET(l, written);
	st->dropped_spool_full = CTR_GET(l, dropped_spool_full);
	st->dropped_shutdown = CTR_GET(l, dropped_shutdown);
	st->write_errors = CTR_GET(l, write_errors);
	st->batches = CTR_GET(l, batches);
	st->spooled = CTR_GET(l, spooled);
	st->up = atomic_load_explicit(&l->up, memory_order_relaxed);
	if (l->disk) {
		struct analytics_spool_stats ds;

		analytics_spool_stats(l->disk, &ds);
		st->disk = true;
		st->spilled = CTR_GET(l, spilled);
		st->replayed = CTR_GET(l, replayed);
		st->disk_files = ds.files;
		st->disk_bytes = ds.bytes;
		st->disk_events = ds.events;
		st->disk_max_bytes = ds.max_bytes;
		st->disk_corrupt = ds.corrupt;
		st->disk_put_errors = ds.put_errors;
	}
	if (l->sink.ops->counters) {
		st->has_own = true;
		l->sink.ops->counters(l->sink.ctx, &st->own);
	}
	return 0;
}

void analytics_stats(struct analytics *a, struct analytics_stats *st)
{
	unsigned i;

	memset(st, 0, sizeof(*st));
	st->enqueued = CTR_GET(a, enqueued);
	st->dropped_queue_full = CTR_GET(a, dropped_queue_full);
	for (i = 0; i < a->nlanes; i++) {
		struct analytics_lane *l = &a->lane[i];

		st->written += CTR_GET(l, written);
		st->dropped_spool_full += CTR_GET(l, dropped_spool_full);
		st->dropped_shutdown += CTR_GET(l, dropped_shutdown);
		st->write_errors += CTR_GET(l, write_errors);
		st->batches += CTR_GET(l, batches);
		st->spooled += CTR_GET(l, spooled);
	}
}

/* A write failed: count it, say so once per episode, back off. */
static void analytics_lane_failed(struct analytics_lane *l, int rc)
{
	const struct analytics_conf *c = &l->a->conf;

	CTR_ADD(l, write_errors, 1);
	l->fail_count++;
	if (!l->failing) {
		if (l->disk)
			log_warnx("analytics: %s sink failed: %s; keeping up "
				  "to %zu events in memory, then in the disk "
				  "spool, and retrying",
				  l->sink.ops->name, strerror(-rc),
				  c->spool_cap);
		else
			log_warnx("analytics: %s sink failed: %s; keeping up "
				  "to %zu events in memory and retrying",
				  l->sink.ops->name, strerror(-rc),
				  c->spool_cap);
	}
	l->failing = true;
	atomic_store_explicit(&l->up, false, memory_order_relaxed);
	l->retry_at = mono_ns() + l->backoff_ns;
	l->backoff_ns *= 2;
	if (l->backoff_ns > c->retry_max_ms * 1000000ULL)
		l->backoff_ns = c->retry_max_ms * 1000000ULL;
}

static void analytics_lane_worked(struct analytics_lane *l)
{
	if (!l->failing)
		return;
	log_note("analytics: %s sink recovered after %llu failed writes",
		 l->sink.ops->name, (unsigned long long)l->fail_count);
	l->failing = false;
	l->spool_full_logged = false;
	l->disk_logged = 0;
	l->fail_count = 0;
	l->backoff_ns = l->a->conf.retry_min_ms * 1000000ULL;
	atomic_store_explicit(&l->up, true, memory_order_relaxed);
}

/* Whether the disk spool holds events (read or still in files). */
static bool analytics_lane_backlog(const struct analytics_lane *l)
{
	return l->disk && (l->replay || !analytics_spool_empty(l->disk));
}

/* Write one batch from the oldest disk file. Returns 0 (also when there
 * was none), or -errno from the sink (already counted). */
static int analytics_lane_replay(struct analytics_lane *l)
{
	const struct analytics_sink *sk = &l->sink;
	size_t n, done = 0;
	int rc;

	if (!l->replay) {
		rc = analytics_spool_peek(l->disk, &l->replay, &l->nreplay);
		if (rc == -ENOENT)
			return 0;
		if (rc) {
			/* out of memory: back off as for a failed write */
			analytics_lane_failed(l, rc);
			return rc;
		}
		l->replay_done = 0;
	}
	n = l->nreplay - l->replay_done;
	if (n > l->a->conf.batch_max)
		n = l->a->conf.batch_max;
	rc =
	    sk->ops->write_batch(sk->ctx, l->replay + l->replay_done, n, &done);
	if (done > n)
		done = n;
	l->replay_done += done;
	CTR_ADD(l, written, done);
	CTR_ADD(l, replayed, done);
	if (rc < 0) {
		analytics_lane_failed(l, rc);
		return rc;
	}
	CTR_ADD(l, batches, 1);
	analytics_lane_worked(l);
	if (l->replay_done == l->nreplay) {
		analytics_spool_pop(l->disk);
		free(l->replay);
		l->replay = NULL;
		l->nreplay = l->replay_done = 0;
	}
	return 0;
}

/* Write the disk spool's oldest batch if there is one (older events
 * first), else the memory spool in batches; stop at the first failure
 * and back off. */
static void analytics_lane_flush(struct analytics_lane *l)
{
	const struct analytics_sink *sk = &l->sink;
	size_t off = 0, n, done;
	int rc = 0;

	if (analytics_lane_backlog(l)) {
		analytics_lane_replay(l);
		if (analytics_lane_backlog(l))
			return;
	}
	while (off < l->nspool) {
		n = l->nspool - off;
		if (n > l->a->conf.batch_max)
			n = l->a->conf.batch_max;
		done = 0;
		rc = sk->ops->write_batch(sk->ctx, l->spool + off, n, &done);
		if (done > n)
			done = n;
		off += done;
		CTR_ADD(l, written, done);
		if (rc < 0)
			break;
		CTR_ADD(l, batches, 1);
	}
	if (off) {
		memmove(l->spool, l->spool + off,
			(l->nspool - off) * sizeof(*l->spool));
		l->nspool -= off;
	}
	CTR_SET(l, spooled, l->nspool);
	if (rc < 0)
		analytics_lane_failed(l, rc);
	else if (off)
		analytics_lane_worked(l);
}

/* Move the memory spool's oldest k events to the disk spool. Returns 0,
 * or nonzero when nothing moved (no disk spool, ANALYTICS_SPOOL_FULL, or
 * -errno from the file system). The cap and each error are logged once
 * until the disk spool takes a batch again or the sink recovers. */
static int analytics_lane_spill(struct analytics_lane *l, size_t k)
{
	struct errbuf err = {""};
	int rc;

	if (k > l->nspool)
		k = l->nspool;
	if (!l->disk || k == 0)
		return -ENOSPC;
	rc = analytics_spool_put(l->disk, l->spool, k, &err);
	if (rc) {
		if (rc != l->disk_logged)
			log_warnx("analytics: %s sink: the disk spool %s: %s; "
				  "dropping events until the sink recovers%s",
				  l->sink.ops->name,
				  rc == ANALYTICS_SPOOL_FULL
				      ? "is full (analytics.spool_max)"
				      : "cannot be written",
				  err.msg,
				  rc == ANALYTICS_SPOOL_FULL
				      ? ""
				      : " or the disk spool can be written "
					"again");
		l->disk_logged = rc;
		return rc;
	}
	if (l->disk_logged < 0)
		log_note("analytics: %s sink: the disk spool %s takes batches "
			 "again",
			 l->sink.ops->name, analytics_spool_dir(l->disk));
	l->disk_logged = 0;
	memmove(l->spool, l->spool + k, (l->nspool - k) * sizeof(*l->spool));
	l->nspool -= k;
	CTR_ADD(l, spilled, k);
	CTR_SET(l, spooled, l->nspool);
	return 0;
}

/* Event j of the queue, which the calling lane has not passed, into ev. */
static void analytics_queue_get(struct analytics *a, uint64_t j,
				struct analytics_event *ev)
{
	unsigned char packed[ANALYTICS_PACKED_MAX];
	size_t len = a->qlen[j % a->conf.queue_cap],
	       at = (size_t)(a->qoff[j % a->conf.queue_cap] % a->qbytes), first;

	if (len > sizeof(packed))
		len = sizeof(packed);
	first = a->qbytes - at < len ? a->qbytes - at : len;
	memcpy(packed, a->qb + at, first);
	memcpy(packed + first, a->qb, len - first);
	analytics_unpack(packed, len, ev);
}

/* Move queued events [h, t) into the spool, the oldest batches going to
 * disk when it is full. Returns how many were taken off the queue
 * (spooled, or dropped while the sink fails and its retry is not due:
 * when it is, they wait in the queue for the retry's outcome). */
static uint64_t analytics_lane_take(struct analytics_lane *l, uint64_t h,
				    uint64_t t, uint64_t now)
{
	struct analytics *a = l->a;
	uint64_t n = t - h, taken = 0, room, k, i;

	while (taken < n) {
		room = a->conf.spool_cap - l->nspool;
		k = n - taken < room ? n - taken : room;
		for (i = 0; i < k; i++)
			analytics_queue_get(a, h + taken + i,
					    &l->spool[l->nspool++]);
		taken += k;
		if (taken == n)
			break;
		if (analytics_lane_spill(l, a->conf.batch_max) == 0)
			continue;
		if (!l->failing || now >= l->retry_at)
			break; /* the sink works, or may: the rest waits in
				* the queue */
		/* the sink is failing and the spools are full: drop the
		 * newest */
		CTR_ADD(l, dropped_spool_full, n - taken);
		if (!l->spool_full_logged)
			log_warnx("analytics: spool full (%zu events in "
				  "memory%s), dropping events until the %s "
				  "sink recovers",
				  a->conf.spool_cap,
				  l->disk ? ", the disk spool too" : "",
				  l->sink.ops->name);
		l->spool_full_logged = true;
		taken = n;
	}
	CTR_SET(l, spooled, l->nspool);
	return taken;
}

static void analytics_log_queue_drops(struct analytics *a, uint64_t now)
{
	uint64_t d = CTR_GET(a, dropped_queue_full);

	if (d == a->qdrop_logged || now < a->qdrop_log_at)
		return;
	log_warnx("analytics: queue full, %llu events dropped",
		  (unsigned long long)(d - a->qdrop_logged));
	a->qdrop_logged = d;
	a->qdrop_log_at = now + ANALYTICS_DROP_LOG_NS;
}

/* Stopping with a disk spool: what memory holds goes to disk (replayed at
 * the next start) rather than wait for a failing sink or jump ahead of
 * the files still to replay. */
static void analytics_lane_spill_all(struct analytics_lane *l)
{
	while (l->nspool && analytics_lane_spill(l, l->a->conf.batch_max) == 0)
		;
}

/* Events left in the queue by a take while a retry was due (they waited
 * for its outcome) are taken at once when it failed: spooled if there is
 * room, else dropped, however few they are. Without this, fewer than
 * batch_max of them would wait for the next retry, and the one after, and
 * be written or dropped depending on when the lane woke. Called with
 * a->mu held. */
static bool analytics_lane_must_take(const struct analytics_lane *l)
{
	return l->failing && l->a->tail != l->head && mono_ns() < l->retry_at;
}

static void *analytics_lane_main(void *arg)
{
	struct analytics_lane *l = arg;
	struct analytics *a = l->a;
	uint64_t h, t, now, stop_deadline = 0, left;
	bool stopping, reopen;

	for (;;) {
		pthread_mutex_lock(&a->mu);
		/* wait unless there is work: a batch, a stop, a reopen, or
		 * files to replay into a sink that works */
		if (!a->stopping && !l->reopen_req &&
		    a->tail - l->head < a->conf.batch_max &&
		    (l->failing || !analytics_lane_backlog(l)) &&
		    !analytics_lane_must_take(l)) {
			uint64_t when =
			    l->failing
				? l->retry_at
				: mono_ns() + a->conf.flush_ms * 1000000ULL;
			struct timespec ts = ns_to_ts(when);

			l->waiting = true;
			while (!a->stopping && !l->reopen_req &&
			       a->tail - l->head < a->conf.batch_max) {
				/* nothing to write or retry: no deadline
				 * until an event comes (an idle lane
				 * sleeps), then flush_ms from it */
				if (!l->failing && !l->nspool &&
				    a->tail == l->head) {
					l->idle = true;
					pthread_cond_wait(&l->cond, &a->mu);
					l->idle = false;
					ts = ns_to_ts(mono_ns() +
						      a->conf.flush_ms *
							  1000000ULL);
					continue;
				}
				if (pthread_cond_timedwait(&l->cond, &a->mu,
							   &ts) == ETIMEDOUT)
					break;
			}
			l->waiting = false;
		}
		stopping = a->stopping;
		reopen = l->reopen_req;
		l->reopen_req = false;
		h = l->head;
		t = a->tail;
		pthread_mutex_unlock(&a->mu);

		now = mono_ns();
		if (stopping && !stop_deadline)
			stop_deadline = now + a->conf.retry_max_ms * 1000000ULL;
		if (reopen) {
			if (l->sink.ops->reopen)
				l->sink.ops->reopen(l->sink.ctx);
			l->retry_at = now; /* a new destination: try it now */
		}
		h += analytics_lane_take(l, h, t, now);
		pthread_mutex_lock(&a->mu);
		l->head = h;
		pthread_mutex_unlock(&a->mu);
		if (stopping && l->disk &&
		    (l->failing || analytics_lane_backlog(l)))
			analytics_lane_spill_all(l);
		/* stopping, the files wait for the next start; what memory
		 * still holds (the disk spool refused it) is written */
		if ((l->nspool || (!stopping && analytics_lane_backlog(l))) &&
		    (!l->failing || now >= l->retry_at))
			analytics_lane_flush(l);
		if (l == &a->lane[0])
			analytics_log_queue_drops(a, now);
		if (!stopping)
			continue;
		if (h == t && l->nspool == 0)
			break;
		now = mono_ns();
		if ((l->failing || l->disk) && now >= stop_deadline)
			break;
		if (l->failing && l->retry_at > now) {
			struct timespec ts = ns_to_ts(
			    (l->retry_at < stop_deadline ? l->retry_at
							 : stop_deadline) -
			    now);

			nanosleep(&ts, NULL);
		}
	}
	/* stop gave up on a failing sink: count what is left */
	pthread_mutex_lock(&a->mu);
	left = a->tail - l->head;
	l->head = a->tail;
	pthread_mutex_unlock(&a->mu);
	left += l->nspool;
	if (left) {
		CTR_ADD(l, dropped_shutdown, left);
		log_warnx("analytics: %s sink: %llu events not written at "
			  "shutdown",
			  l->sink.ops->name, (unsigned long long)left);
	}
	l->nspool = 0;
	CTR_SET(l, spooled, 0);
	return NULL;
}

int analytics_start(struct analytics *a)
{
	unsigned i;
	int rc;

	if (a->started)
		return -EALREADY;
	pthread_mutex_lock(&a->mu);
	a->stopping = false;
	pthread_mutex_unlock(&a->mu);
	for (i = 0; i < a->nlanes; i++) {
		rc = pthread_create(&a->lane[i].thread, NULL,
				    analytics_lane_main, &a->lane[i]);
		if (rc) {
			pthread_mutex_lock(&a->mu);
			a->stopping = true;
			pthread_mutex_unlock(&a->mu);
			while (i-- > 0) {
				pthread_cond_signal(&a->lane[i].cond);
				pthread_join(a->lane[i].thread, NULL);
			}
			return -rc;
		}
	}
	a->started = true;
	return 0;
}

int analytics_stop(struct analytics *a)
{
	unsigned i;

	pthread_mutex_lock(&a->mu);
	a->stopping = true;
	pthread_mutex_unlock(&a->mu);
	for (i = 0; i < a->nlanes; i++)
		pthread_cond_signal(&a->lane[i].cond);
	if (!a->started)
		return 0;
	for (i = 0; i < a->nlanes; i++)
		pthread_join(a->lane[i].thread, NULL);
	a->started = false;
	return 0;
}

void analytics_free(struct analytics *a)
{
	unsigned i;

	if (!a)
		return;
	analytics_stop(a);
	for (i = 0; i < a->nlanes; i++) {
		struct analytics_lane *l = &a->lane[i];
		uint64_t left = a->tail - l->head;

		if (left)
			CTR_ADD(l, dropped_shutdown, left);
		analytics_sink_close(&l->sink);
		analytics_spool_close(l->disk);
		pthread_cond_destroy(&l->cond);
		free(l->spool);
		free(l->replay);
	}
	pthread_mutex_destroy(&a->mu);
	free(a->qb);
	free(a->qoff);
	free(a->qlen);
	free(a);
}
