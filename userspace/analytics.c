/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * analytics.c - Record: the event queue, the writer thread, the spool and
 * the JSON-lines file sink.
 *
 * The queue is a ring of fixed-size events behind one mutex. A producer
 * holds the mutex for a bounds check and one memcpy (about 2 KiB), which
 * at the request rates of one host costs less than the request's own
 * parsing; a lock-free ring (per-slot sequence numbers) can replace it
 * behind the same analytics_enqueue() if profiles ever say otherwise. The
 * writer never holds the mutex while it formats or writes: slots between
 * head and tail belong to it until it advances head.
 *
 * The writer moves events from the queue into the spool (an array of
 * spool_cap events it alone touches), writes the spool in batches of
 * batch_max and drops what it wrote. While the sink fails the spool keeps
 * the events and the writer retries after min..max backoff; events beyond
 * the spool's cap are counted as dropped, newest first, so that what is
 * kept stays in order.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "analytics.h"
#include "log.h"

#define ANALYTICS_QUEUE_DEFAULT 8192
#define ANALYTICS_BATCH_DEFAULT 512
#define ANALYTICS_SPOOL_DEFAULT 16384
#define ANALYTICS_FLUSH_MS_DEFAULT 200
#define ANALYTICS_RETRY_MIN_MS_DEFAULT 100
#define ANALYTICS_RETRY_MAX_MS_DEFAULT 10000
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

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if none. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
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

/* A JSON string for a field: null when empty, invalid UTF-8 bytes
 * replaced by U+FFFD. */
static json_t *analytics_json_str(const char *s)
{
	/* every field is below 1024 bytes; each byte becomes at most 3 */
	char fixed[1024 * 3 + 1];
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), i = 0, o = 0, k;

	if (n == 0)
		return json_null();
	while (i < n) {
		k = utf8_seq(p + i, n - i);
		if (k == 0)
			break;
		i += k;
	}
	if (i == n)
		return json_stringn(s, n);
	memcpy(fixed, s, i);
	o = i;
	while (i < n && o + 3 < sizeof(fixed)) {
		k = utf8_seq(p + i, n - i);
		if (k == 0) {
			memcpy(fixed + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		} else {
			if (o + k >= sizeof(fixed))
				break;
			memcpy(fixed + o, p + i, k);
			o += k;
			i += k;
		}
	}
	return json_stringn(fixed, o);
}

static json_t *analytics_json_time(uint64_t ns)
{
	char buf[64];
	struct tm tm;
	time_t sec = (time_t)(ns / 1000000000ULL);
	size_t n;

	if (!gmtime_r(&sec, &tm))
		return json_null();
	n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, sizeof(buf) - n, ".%09uZ",
		 (unsigned)(ns % 1000000000ULL));
	return json_string(buf);
}

static int analytics_set(json_t *o, const char *key, json_t *v)
{
	return v ? json_object_set_new(o, key, v) : -1;
}

int analytics_event_json(const struct analytics_event *ev, char **line,
			 size_t *len)
{
	json_t *o, *trunc = NULL;
	char *s = NULL;
	size_t n;
	unsigned i;
	int bad = 0;

	o = json_object();
	if (!o)
		return -ENOMEM;
	bad |= analytics_set(o, "time", analytics_json_time(ev->time_ns));
	bad |= analytics_set(o, "kind",
			     json_string(ev->kind == ANALYTICS_KIND_TUNNEL
					     ? "tunnel"
					     : "request"));
	for (i = 0; i < ANALYTICS_F_MAX; i++) {
		const struct analytics_field_info *fi = &analytics_fields[i];

		bad |= analytics_set(
		    o, fi->name,
		    analytics_json_str((const char *)ev + fi->off));
		if (i == ANALYTICS_F_PATH) {
			bad |= analytics_set(o, "status",
					     json_integer(ev->status));
			bad |= analytics_set(o, "outcome",
					     json_string(outcome_name(
						 (enum outcome)ev->outcome)));
			bad |= analytics_set(
			    o, "bytes_in",
			    json_integer((json_int_t)ev->bytes_in));
			bad |= analytics_set(
			    o, "bytes_out",
			    json_integer((json_int_t)ev->bytes_out));
			bad |= analytics_set(
			    o, "duration_ns",
			    json_integer((json_int_t)ev->duration_ns));
			bad |= analytics_set(
			    o, "upstream_ns",
			    json_integer((json_int_t)ev->upstream_ns));
		}
		if (ev->truncated & (1u << i)) {
			if (!trunc)
				trunc = json_array();
			bad |=
			    json_array_append_new(trunc, json_string(fi->name));
		}
	}
	if (trunc)
		bad |= analytics_set(o, "truncated", trunc);
	if (!bad)
		s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!s)
		return -ENOMEM;
	n = strlen(s);
	/* json_dumps allocates with malloc by default; add the newline */
	{
		char *t = realloc(s, n + 2);

		if (!t) {
			free(s);
			return -ENOMEM;
		}
		s = t;
	}
	s[n++] = '\n';
	s[n] = '\0';
	*line = s;
	*len = n;
	return 0;
}

/* ---- the JSON-lines file sink ----------------------------------------- */

struct file_sink {
	char *path;
	int fd;
	size_t partial; /* bytes of the next event's line already written */
	char *buf;
	size_t cap;
	size_t *ends; /* end offset of each line in buf */
	size_t ends_cap;
};

static int file_sink_grow(struct file_sink *fs, size_t need)
{
	size_t cap = fs->cap ? fs->cap : 65536;
	char *p;

	if (need <= fs->cap)
		return 0;
	while (cap < need)
		cap *= 2;
	p = realloc(fs->buf, cap);
	if (!p)
		return -ENOMEM;
	fs->buf = p;
	fs->cap = cap;
	return 0;
}

static int file_sink_write_batch(void *ctx, const struct analytics_event *ev,
				 size_t n, size_t *done)
{
	struct file_sink *fs = ctx;
	size_t i, len = 0, pos;
	int rc = 0;

	*done = 0;
	if (n > fs->ends_cap) {
		size_t *e = realloc(fs->ends, n * sizeof(*e));

		if (!e)
			return -ENOMEM;
		fs->ends = e;
		fs->ends_cap = n;
	}
	for (i = 0; i < n; i++) {
		char *line;
		size_t ll;

		rc = analytics_event_json(&ev[i], &line, &ll);
		if (rc == 0) {
			rc = file_sink_grow(fs, len + ll);
			if (rc == 0)
				memcpy(fs->buf + len, line, ll);
			free(line);
		}
		if (rc < 0)
			return rc;
		len += ll;
		fs->ends[i] = len;
	}
	if (fs->fd < 0) {
		fs->fd =
		    open(fs->path,
			 O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK,
			 0640);
		if (fs->fd < 0)
			return -errno;
	}
	pos = fs->partial < fs->ends[0] ? fs->partial : 0;
	while (pos < len) {
		ssize_t w = write(fs->fd, fs->buf + pos, len - pos);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = w < 0 ? -errno : -EIO;
			break;
		}
		pos += (size_t)w;
	}
	for (i = 0; i < n && fs->ends[i] <= pos; i++)
		;
	*done = i;
	fs->partial = pos - (i ? fs->ends[i - 1] : 0);
	if (rc < 0) {
		/* reopen on the next try: the path may come back */
		close(fs->fd);
		fs->fd = -1;
	}
	return rc;
}

static int file_sink_reopen(void *ctx)
{
	struct file_sink *fs = ctx;

	if (fs->fd >= 0)
		close(fs->fd);
	fs->fd = -1;
	/* a line cut in the old file is written whole to the new one */
	fs->partial = 0;
	return 0;
}

static void file_sink_close(void *ctx)
{
	struct file_sink *fs = ctx;

	if (!fs)
		return;
	if (fs->fd >= 0)
		close(fs->fd);
	free(fs->path);
	free(fs->buf);
	free(fs->ends);
	free(fs);
}

static const struct analytics_sink_ops file_sink_ops = {
    .name = "file",
    .write_batch = file_sink_write_batch,
    .reopen = file_sink_reopen,
    .close = file_sink_close,
};

int analytics_file_sink(const char *path, struct analytics_sink *sink)
{
	struct file_sink *fs = calloc(1, sizeof(*fs));

	if (!fs)
		return -ENOMEM;
	fs->fd = -1;
	fs->path = strdup(path);
	if (!fs->path) {
		free(fs);
		return -ENOMEM;
	}
	sink->ops = &file_sink_ops;
	sink->ctx = fs;
	return 0;
}

/* ---- the writer ------------------------------------------------------- */

struct analytics {
	struct analytics_conf conf;

	pthread_mutex_t mu;
	pthread_cond_t cond;
	/* under mu */
	struct analytics_event *q;
	uint64_t head, tail;
	bool stopping, reopen_req, writer_waiting;

	/* owner's (start/stop) */
	pthread_t thread;
	bool started;

	/* writer thread only */
	struct analytics_event *spool;
	size_t nspool;
	bool failing, spool_full_logged;
	uint64_t retry_at, backoff_ns, fail_count;
	uint64_t qdrop_logged, qdrop_log_at;

	_Atomic uint64_t enqueued, written, dropped_queue_full,
	    dropped_spool_full, dropped_shutdown, write_errors, batches,
	    spooled;
};

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

#define CTR_ADD(a, field, n)                                                   \
	atomic_fetch_add_explicit(&(a)->field, (n), memory_order_relaxed)
#define CTR_GET(a, field)                                                      \
	atomic_load_explicit(&(a)->field, memory_order_relaxed)

int analytics_new(const struct analytics_conf *conf, struct analytics **out)
{
	struct analytics *a;
	pthread_condattr_t ca;
	int rc = -ENOMEM;

	*out = NULL;
	if (!conf->sink.ops || !conf->sink.ops->write_batch) {
		if (conf->sink.ops && conf->sink.ops->close)
			conf->sink.ops->close(conf->sink.ctx);
		return -EINVAL;
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		goto fail;
	a->conf = *conf;
	if (!a->conf.queue_cap)
		a->conf.queue_cap = ANALYTICS_QUEUE_DEFAULT;
	if (!a->conf.batch_max)
		a->conf.batch_max = ANALYTICS_BATCH_DEFAULT;
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
	a->backoff_ns = a->conf.retry_min_ms * 1000000ULL;
	a->q = calloc(a->conf.queue_cap, sizeof(*a->q));
	a->spool = calloc(a->conf.spool_cap, sizeof(*a->spool));
	if (!a->q || !a->spool)
		goto fail_free;
	if (pthread_condattr_init(&ca))
		goto fail_free;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	rc = -pthread_cond_init(&a->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (rc)
		goto fail_free;
	pthread_mutex_init(&a->mu, NULL);
	*out = a;
	return 0;

fail_free:
	free(a->q);
	free(a->spool);
	free(a);
fail:
	if (conf->sink.ops->close)
		conf->sink.ops->close(conf->sink.ctx);
	return rc;
}

int analytics_enqueue(struct analytics *a, const struct analytics_event *ev)
{
	bool wake = false;
	int rc = 0;

	pthread_mutex_lock(&a->mu);
	if (a->stopping) {
		rc = -ESHUTDOWN;
	} else if (a->tail - a->head >= a->conf.queue_cap) {
		rc = -ENOBUFS;
	} else {
		memcpy(&a->q[a->tail % a->conf.queue_cap], ev, sizeof(*ev));
		a->tail++;
		if (a->writer_waiting &&
		    a->tail - a->head >= a->conf.batch_max) {
			a->writer_waiting = false;
			wake = true;
		}
	}
	pthread_mutex_unlock(&a->mu);
	if (wake)
		pthread_cond_signal(&a->cond);
	if (rc)
		CTR_ADD(a, dropped_queue_full, 1);
	else
		CTR_ADD(a, enqueued, 1);
	return rc;
}

void analytics_reopen(struct analytics *a)
{
	pthread_mutex_lock(&a->mu);
	a->reopen_req = true;
	pthread_mutex_unlock(&a->mu);
	pthread_cond_signal(&a->cond);
}

void analytics_stats(struct analytics *a, struct analytics_stats *st)
{
	st->enqueued = CTR_GET(a, enqueued);
	st->written = CTR_GET(a, written);
	st->dropped_queue_full = CTR_GET(a, dropped_queue_full);
	st->dropped_spool_full = CTR_GET(a, dropped_spool_full);
	st->dropped_shutdown = CTR_GET(a, dropped_shutdown);
	st->write_errors = CTR_GET(a, write_errors);
	st->batches = CTR_GET(a, batches);
	st->spooled = CTR_GET(a, spooled);
}

/* Write the spool in batches; stop at the first failure and back off. */
static void analytics_flush_spool(struct analytics *a)
{
	const struct analytics_sink *sk = &a->conf.sink;
	size_t off = 0, n, done;
	int rc = 0;

	while (off < a->nspool) {
		n = a->nspool - off;
		if (n > a->conf.batch_max)
			n = a->conf.batch_max;
		done = 0;
		rc = sk->ops->write_batch(sk->ctx, a->spool + off, n, &done);
		if (done > n)
			done = n;
		off += done;
		CTR_ADD(a, written, done);
		if (rc < 0)
			break;
		CTR_ADD(a, batches, 1);
	}
	if (off) {
		memmove(a->spool, a->spool + off,
			(a->nspool - off) * sizeof(*a->spool));
		a->nspool -= off;
	}
	atomic_store_explicit(&a->spooled, a->nspool, memory_order_relaxed);
	if (rc < 0) {
		CTR_ADD(a, write_errors, 1);
		a->fail_count++;
		if (!a->failing)
			log_warnx("analytics: %s sink failed: %s; keeping up "
				  "to %zu events in memory and retrying",
				  sk->ops->name, strerror(-rc),
				  a->conf.spool_cap);
		a->failing = true;
		a->retry_at = mono_ns() + a->backoff_ns;
		a->backoff_ns *= 2;
		if (a->backoff_ns > a->conf.retry_max_ms * 1000000ULL)
			a->backoff_ns = a->conf.retry_max_ms * 1000000ULL;
	} else if (a->failing) {
		log_note("analytics: %s sink recovered after %llu failed "
			 "writes",
			 sk->ops->name, (unsigned long long)a->fail_count);
		a->failing = false;
		a->spool_full_logged = false;
		a->fail_count = 0;
		a->backoff_ns = a->conf.retry_min_ms * 1000000ULL;
	}
}

/* Move queued events [h, t) into the spool. Returns how many were taken
 * off the queue (spooled, or dropped while the sink fails). */
static uint64_t analytics_take(struct analytics *a, uint64_t h, uint64_t t)
{
	uint64_t n = t - h, room = a->conf.spool_cap - a->nspool, i, take;

	take = n < room ? n : room;
	for (i = 0; i < take; i++)
		memcpy(&a->spool[a->nspool++],
		       &a->q[(h + i) % a->conf.queue_cap], sizeof(*a->spool));
	atomic_store_explicit(&a->spooled, a->nspool, memory_order_relaxed);
	if (take == n || !a->failing)
		return take;
	/* the sink is failing and the spool is full: drop the newest */
	CTR_ADD(a, dropped_spool_full, n - take);
	if (!a->spool_full_logged)
		log_warnx("analytics: spool full (%zu events), dropping events "
			  "until the %s sink recovers",
			  a->conf.spool_cap, a->conf.sink.ops->name);
	a->spool_full_logged = true;
	return n;
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

static void *analytics_main(void *arg)
{
	struct analytics *a = arg;
	uint64_t h, t, now, stop_deadline = 0, left;
	bool stopping, reopen;

	for (;;) {
		pthread_mutex_lock(&a->mu);
		if (!a->stopping && !a->reopen_req &&
		    a->tail - a->head < a->conf.batch_max) {
			uint64_t when =
			    a->failing
				? a->retry_at
				: mono_ns() + a->conf.flush_ms * 1000000ULL;
			struct timespec ts = ns_to_ts(when);

			a->writer_waiting = true;
			while (!a->stopping && !a->reopen_req &&
			       a->tail - a->head < a->conf.batch_max) {
				if (pthread_cond_timedwait(&a->cond, &a->mu,
							   &ts) == ETIMEDOUT)
					break;
			}
			a->writer_waiting = false;
		}
		stopping = a->stopping;
		reopen = a->reopen_req;
		a->reopen_req = false;
		h = a->head;
		t = a->tail;
		pthread_mutex_unlock(&a->mu);

		now = mono_ns();
		if (stopping && !stop_deadline)
			stop_deadline = now + a->conf.retry_max_ms * 1000000ULL;
		if (reopen) {
			if (a->conf.sink.ops->reopen)
				a->conf.sink.ops->reopen(a->conf.sink.ctx);
			a->retry_at = now; /* a new destination: try it now */
		}
		h += analytics_take(a, h, t);
		pthread_mutex_lock(&a->mu);
		a->head = h;
		pthread_mutex_unlock(&a->mu);
		if (a->nspool && (!a->failing || now >= a->retry_at))
			analytics_flush_spool(a);
		analytics_log_queue_drops(a, now);
		if (!stopping)
			continue;
		if (h == t && a->nspool == 0)
			break;
		now = mono_ns();
		if (a->failing && now >= stop_deadline)
			break;
		if (a->failing && a->retry_at > now) {
			struct timespec ts = ns_to_ts(
			    (a->retry_at < stop_deadline ? a->retry_at
							 : stop_deadline) -
			    now);

			nanosleep(&ts, NULL);
		}
	}
	/* stop gave up on a failing sink: count what is left */
	pthread_mutex_lock(&a->mu);
	left = a->tail - a->head;
	a->head = a->tail;
	pthread_mutex_unlock(&a->mu);
	left += a->nspool;
	if (left) {
		CTR_ADD(a, dropped_shutdown, left);
		log_warnx("analytics: %llu events not written at shutdown",
			  (unsigned long long)left);
	}
	a->nspool = 0;
	atomic_store_explicit(&a->spooled, 0, memory_order_relaxed);
	return NULL;
}

int analytics_start(struct analytics *a)
{
	int rc;

	if (a->started)
		return -EALREADY;
	pthread_mutex_lock(&a->mu);
	a->stopping = false;
	pthread_mutex_unlock(&a->mu);
	rc = pthread_create(&a->thread, NULL, analytics_main, a);
	if (rc)
		return -rc;
	a->started = true;
	return 0;
}

int analytics_stop(struct analytics *a)
{
	pthread_mutex_lock(&a->mu);
	a->stopping = true;
	pthread_mutex_unlock(&a->mu);
	pthread_cond_signal(&a->cond);
	if (!a->started)
		return 0;
	pthread_join(a->thread, NULL);
	a->started = false;
	return 0;
}

void analytics_free(struct analytics *a)
{
	uint64_t left;

	if (!a)
		return;
	analytics_stop(a);
	left = a->tail - a->head;
	if (left)
		CTR_ADD(a, dropped_shutdown, left);
	if (a->conf.sink.ops->close)
		a->conf.sink.ops->close(a->conf.sink.ctx);
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->mu);
	free(a->q);
	free(a->spool);
	free(a);
}
