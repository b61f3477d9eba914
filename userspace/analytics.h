/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * analytics.h - Record: one event per request or tunnel, written off the
 * hot path.
 *
 * Workers fill a struct analytics_event (a fixed-size record: strings are
 * copied in, truncated to fixed maxima and marked) and hand it to
 * analytics_enqueue(), which copies it into a bounded queue and never
 * blocks on I/O, never allocates. Each sink (the JSON-lines file sink
 * here, the PostgreSQL COPY sink of analytics_pg.h) has a writer thread
 * that takes every event from that one queue in batches. When a sink
 * fails, its events wait in a bounded in-memory spool, then in its disk
 * spool if it has one (analytics_spool.h), and are retried with
 * exponential backoff; only what exceeds the caps is dropped, and every
 * drop is counted. docs/analytics.md describes the fields, the JSON keys,
 * the database's columns and the drop semantics.
 */
#ifndef EDGE_ANALYTICS_H
#define EDGE_ANALYTICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"
#include "outcome.h"

struct passwd;

/*
 * The event's string fields: X(ID, member, size). size includes the NUL,
 * so a field holds size - 1 bytes. The member name is also the JSON key.
 * Append only (the bit in analytics_event.truncated is the position).
 */
#define ANALYTICS_STRINGS(X)                                                   \
	X(REQUEST_ID, request_id, 64)                                          \
	X(PROJECT_ID, project_id, 64)                                          \
	X(ENVIRONMENT_ID, environment_id, 64)                                  \
	X(DEPLOYMENT_ID, deployment_id, 64)                                    \
	X(HOST, host, 256)                                                     \
	X(METHOD, method, 24)                                                  \
	X(PATH, path, 1024)                                                    \
	X(CLIENT_IP, client_ip, 48)                                            \
	X(USER_AGENT, user_agent, 256)                                         \
	X(REFERRER, referrer, 512)                                             \
	X(TLS_VERSION, tls_version, 16)                                        \
	X(MOVER, mover, 16)                                                    \
	X(TLS_CIPHER, tls_cipher, 64)                                          \
	X(TLS_RESUMED, tls_resumed, 8)                                         \
	X(COLD_START_MS, cold_start_ms, 12)                                    \
	X(UPSTREAM_ADDR, upstream_addr, 128)                                   \
	X(UPSTREAM_STATUS, upstream_status, 4)                                 \
	X(HTTP_VERSION, http_version, 12)                                      \
	X(CHALLENGE, challenge, 8)                                             \
	X(AUTH, auth, 8)                                                       \
	X(TRACE_ID, trace_id, 33)                                              \
	X(SPAN_ID, span_id, 17)                                                \
	X(ATTEMPTS, attempts, 4)

enum analytics_field {
#define ANALYTICS_FIELD_ENUM(id, member, size) ANALYTICS_F_##id,
	ANALYTICS_STRINGS(ANALYTICS_FIELD_ENUM)
#undef ANALYTICS_FIELD_ENUM
	    ANALYTICS_F_MAX
};

enum analytics_kind {
	ANALYTICS_KIND_REQUEST = 0, /* one HTTP request/response */
	ANALYTICS_KIND_TUNNEL = 1,  /* an upgraded (101) connection, at close */
};

/* One record. Plain data: copy it, zero it, keep it on the stack. */
struct analytics_event {
	uint64_t time_ns;     /* start, CLOCK_REALTIME unix nanoseconds */
	uint64_t duration_ns; /* first byte of the request to the end */
	uint64_t upstream_ns; /* upstream connect to response head; 0: none */
	uint64_t bytes_in;    /* from the client (head and body) */
	uint64_t bytes_out;   /* to the client (head and body) */
	uint32_t truncated;   /* bit (1 << ANALYTICS_F_x): field was cut */
	uint16_t status;      /* status sent (or 499 / 101, see outcome.h) */
	uint8_t kind;	      /* enum analytics_kind */
	uint8_t outcome;      /* enum outcome */
#define ANALYTICS_FIELD_MEMBER(id, member, size) char member[size];
	ANALYTICS_STRINGS(ANALYTICS_FIELD_MEMBER)
#undef ANALYTICS_FIELD_MEMBER
};

/*
 * Copy s (len bytes, or up to its NUL if len is SIZE_MAX) into field f of
 * ev. What does not fit is cut at a UTF-8 character boundary and the field
 * is marked in ev->truncated; copying stops at an embedded NUL. Returns
 * true when the whole string fitted, false when it was cut (or f is
 * unknown, which leaves ev untouched). s may be NULL (empty field).
 */
bool analytics_event_set(struct analytics_event *ev, enum analytics_field f,
			 const char *s, size_t len);

/* The JSON key of field f ("user_agent"), or NULL out of range. */
const char *analytics_field_name(enum analytics_field f);

/* The size of field f's member, its NUL included (0 out of range), and
 * its value in ev (never NULL; "" out of range). */
size_t analytics_field_size(enum analytics_field f);
const char *analytics_event_get(const struct analytics_event *ev,
				enum analytics_field f);

/* The length of the valid UTF-8 sequence (RFC 3629: no overlong forms,
 * no surrogates, nothing above U+10FFFF) at p, at most n >= 1 bytes; 0
 * when the bytes there are not one. What the sinks replace by U+FFFD. */
size_t analytics_utf8_seq(const char *p, size_t n);

/*
 * The most bytes one JSON line takes: every string field at its longest
 * with every byte escaped as \u00XX (6 bytes), the keys, the numbers at
 * 20 digits, the truncated list, and a member of ANALYTICS_JSON_MEMBER_MAX
 * bytes (analytics_event_json_into).
 */
#define ANALYTICS_JSON_MEMBER_MAX 1024
#define ANALYTICS_JSON_FIELD_MAX(id, member, size) +(size) + 24
#define ANALYTICS_JSON_MAX                                                     \
	(6 * (0 ANALYTICS_STRINGS(ANALYTICS_JSON_FIELD_MAX)) + 1024 +          \
	 ANALYTICS_JSON_MEMBER_MAX)

/*
 * Format ev as one JSON object followed by "\n" (a JSON line) into out
 * (at least ANALYTICS_JSON_MAX bytes), no NUL; returns its length. member
 * (member_len bytes, at most ANALYTICS_JSON_MEMBER_MAX, may be 0) is put
 * first, as it is: one or more `"key":value,` already encoded (the file
 * sink's edge_host). Invalid UTF-8 in any field is replaced by U+FFFD,
 * control characters are escaped; a field is read no further than its
 * size even without its NUL. Never fails, never allocates.
 */
size_t analytics_event_json_into(const struct analytics_event *ev, char *out,
				 const char *member, size_t member_len);

/* The same into a newly allocated NUL-terminated string (*line, its
 * length in *len). Returns 0 or -ENOMEM. */
int analytics_event_json(const struct analytics_event *ev, char **line,
			 size_t *len);

/* s[0..n) as a JSON string, quotes included, into out (at least 6 * n +
 * 2 bytes): invalid UTF-8 replaced by U+FFFD, '"', '\\' and control
 * characters escaped as jansson does. Returns the bytes written. */
size_t analytics_json_string(char *out, const char *s, size_t n);

/* ---- sinks ------------------------------------------------------------ */

/* What a sink counts of its own (analytics_sink_ops.counters). */
struct analytics_sink_counters {
	uint64_t duplicates; /* events the destination already held (a
			      * replay), skipped: landed once all the same */
	uint64_t rejected;   /* events the destination refused as invalid:
			      * lost, counted here and logged */
	uint64_t connects;   /* connections made (the first and each
			      * reconnect) */
};

/*
 * Where batches go. Called from the sink's writer thread only, never
 * concurrently. write_batch writes events ev[0..n) in order: on success it
 * returns 0 with *done == n; on failure it returns -errno and sets *done to
 * how many leading events are stored for good (those are not offered
 * again; the rest are, in order, on the next call, unless they went to
 * the disk spool meanwhile: then they come back later, oldest first, so a
 * sink that keeps a disk spool must take a batch twice without harm, as
 * the PostgreSQL sink does). reopen (may be NULL) closes and reopens the
 * destination (log rotation); close releases everything, ctx included.
 * counters (may be NULL) reads the sink's own counters from any thread.
 */
struct analytics_sink_ops {
	const char *name;
	int (*write_batch)(void *ctx, const struct analytics_event *ev,
			   size_t n, size_t *done);
	int (*reopen)(void *ctx);
	void (*close)(void *ctx);
	void (*counters)(void *ctx, struct analytics_sink_counters *c);
};

struct analytics_sink {
	const struct analytics_sink_ops *ops;
	void *ctx;
};

/*
 * The JSON-lines file sink: appends to path (created 0640 when missing),
 * one write(2) per batch. The file is opened lazily and reopened after any
 * write error, so a path that comes back (disk space freed, file or
 * directory recreated) is picked up on the next retry. A line cut by a
 * short write is completed on the next call, never written twice.
 * Returns 0 and fills *sink, or -ENOMEM.
 */
int analytics_file_sink(const char *path, struct analytics_sink *sink);

/*
 * The same sink with its file opened now, before privileges drop: a file
 * created here is given to pw (NULL: edged keeps its user); one that pw
 * cannot write is a warning (reopening it later would fail). Returns 0,
 * or -errno with err saying "analytics.file: cannot open PATH: ...".
 */
int analytics_file_sink_open(const char *path, const struct passwd *pw,
			     struct analytics_sink *sink, struct errbuf *err);

/* How the file sink writes an event (analytics.format). */
enum analytics_format {
	ANALYTICS_FORMAT_JSON = 0, /* a JSON line (analytics_event_json) */
	ANALYTICS_FORMAT_COMBINED, /* nginx's "combined" text line */
};

/* Parse "json" or "combined"; returns 0 or -EINVAL. */
int analytics_format_parse(const char *s, enum analytics_format *out);

/*
 * Set a file sink's (analytics_file_sink*) format and, for JSON lines,
 * the edge_host every line carries (NULL or "": none). Before its first
 * batch. Returns 0 or -ENOMEM.
 */
int analytics_file_sink_set(struct analytics_sink *sink,
			    enum analytics_format fmt, const char *edge_host);

/* Longest line analytics_event_combined writes, its "\n" included. */
#define ANALYTICS_COMBINED_MAX 8192

/*
 * Format ev as one nginx "combined" access-log line into out (at least
 * ANALYTICS_COMBINED_MAX bytes), "\n" included, no NUL; returns its
 * length. Fields: client_ip, "-", "-", [time in UTC], "METHOD PATH
 * HTTP_VERSION", status, bytes_out, "referrer", "user_agent"; '"', '\\'
 * and bytes outside printable ASCII as \xHH (as nginx), an empty field
 * as "-". No allocation.
 */
size_t analytics_event_combined(const struct analytics_event *ev, char *out);

/* ---- the writer --------------------------------------------------------- */

/* Most sinks one writer feeds (each its own thread). */
#define ANALYTICS_SINKS_MAX 4

struct analytics_spool; /* analytics_spool.h */

struct analytics_conf {
	struct analytics_sink sink;   /* the first sink; taken over by
				       * analytics_new, even on failure */
	struct analytics_spool *disk; /* its disk spool, or NULL; taken over
				       * likewise */
	size_t queue_cap;	      /* events; 0: 8192 */
	size_t batch_max;	      /* events per write; 0: 512 */
	size_t spool_cap;	      /* events kept in memory per sink while
				       * it fails; 0: 16384; at least
				       * batch_max */
	unsigned flush_ms;	      /* longest an event waits; 0: 200 */
	unsigned retry_min_ms;	      /* first retry after a failure; 0: 100 */
	unsigned retry_max_ms;	      /* backoff ceiling; 0: 10000 */
};

/*
 * Counters, each monotonic but spooled. enqueued and dropped_queue_full
 * are the queue's; the others are summed over the sinks (with one sink,
 * its own). Per sink: enqueued = written + dropped_spool_full +
 * dropped_shutdown + (queued, spooled in memory or on disk now);
 * dropped_queue_full events were never enqueued.
 */
struct analytics_stats {
	uint64_t enqueued;
	uint64_t written;
	uint64_t dropped_queue_full;
	uint64_t dropped_spool_full;
	uint64_t dropped_shutdown; /* still unwritten when stop gave up */
	uint64_t write_errors;	   /* failed write_batch calls */
	uint64_t batches;	   /* successful write_batch calls */
	uint64_t spooled;	   /* gauge: waiting in memory now */
};

/* One sink's counters (analytics_sink_stats). */
struct analytics_sink_stats {
	const char *name; /* the sink's, e.g. "file", "pg" */
	uint64_t written, dropped_spool_full, dropped_shutdown, write_errors,
	    batches;
	uint64_t spooled;  /* gauge: waiting in memory */
	bool up;	   /* gauge: the last write worked (or none failed) */
	bool disk;	   /* it has a disk spool; then: */
	uint64_t spilled;  /* events written to the disk spool */
	uint64_t replayed; /* events written to the sink from it */
	uint64_t disk_files, disk_bytes, disk_events, disk_max_bytes; /* now */
	uint64_t disk_corrupt;	  /* files skipped (torn, corrupt) */
	uint64_t disk_put_errors; /* batches the spool failed to write */
	bool has_own;		  /* the sink has ops->counters: */
	struct analytics_sink_counters own; /* else zeros */
};

struct analytics;

/* Create the queue and the first sink's spool (allocated here, once). The
 * writer threads are not running yet: events enqueued before
 * analytics_start() wait in the queue. Returns 0 and sets *out, or
 * -EINVAL / -ENOMEM (the sink and disk spool are then closed). */
int analytics_new(const struct analytics_conf *conf, struct analytics **out);

/*
 * Add another sink (with its disk spool, or NULL) before
 * analytics_start(): it gets every event too, through a thread, a memory
 * spool and a retry schedule of its own, so that one sink failing or slow
 * never costs the other its events. Both are taken over, even on failure.
 * Returns 0, -ENOSPC (ANALYTICS_SINKS_MAX reached), -EBUSY (started) or
 * -ENOMEM.
 */
int analytics_add_sink(struct analytics *a, const struct analytics_sink *sink,
		       struct analytics_spool *disk);

/* Start the writer threads. Returns 0, -EALREADY, or -errno from
 * pthread_create (then none runs). */
int analytics_start(struct analytics *a);

/*
 * Stop the writers: everything enqueued before the call is written, then
 * the threads exit and are joined. A sink with a disk spool that fails,
 * or still has files to replay, puts what it holds in memory into the
 * disk spool (replayed at the next start) instead. Otherwise, if the sink
 * keeps failing, stop retries for up to about retry_max_ms and counts
 * what is left in dropped_shutdown. Returns 0 (also when not started).
 */
int analytics_stop(struct analytics *a);

/* Stop (if running), close the sinks, free everything. NULL is fine. */
void analytics_free(struct analytics *a);

/*
 * Queue a copy of *ev for writing. Callable from any thread; never blocks
 * on I/O, never allocates: the queue's mutex is held only for one memcpy.
 * Returns 0, or -ENOBUFS when the queue is full (counted in
 * dropped_queue_full) or -ESHUTDOWN after analytics_stop() began (also
 * counted in dropped_queue_full).
 */
int analytics_enqueue(struct analytics *a, const struct analytics_event *ev);

/* Ask the writers to reopen their sinks (SIGHUP, log rotation) before
 * their next write. Not async-signal-safe: call it from the event loop's
 * signal handler, not from a raw signal handler. */
void analytics_reopen(struct analytics *a);

/* A consistent-enough snapshot of the counters (each read atomically). */
void analytics_stats(struct analytics *a, struct analytics_stats *st);

/* How many sinks a has, and sink i's counters (0, or -ENOENT). */
unsigned analytics_nsinks(const struct analytics *a);
int analytics_sink_stats(struct analytics *a, unsigned i,
			 struct analytics_sink_stats *st);

#endif /* EDGE_ANALYTICS_H */
