/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * analytics_spool.c - Record: the disk spool (analytics_spool.h).
 *
 * A file is a 32-byte header and the batch's records, little-endian:
 *
 *   header   "EDGEASPL"  u32 version (1)  u32 events  u64 payload bytes
 *            u32 crc32 of the payload     u32 crc32 of the 28 bytes before
 *   record   u64 time_ns, duration_ns, upstream_ns, bytes_in, bytes_out
 *            u32 truncated  u16 status  u8 kind  u8 outcome
 *            u8 fields, then per field (ANALYTICS_STRINGS order) u16 length
 *            and its bytes
 *
 * Records carry their own field count, so files written before a field
 * was appended read back with that field empty, and a field this binary
 * does not know is skipped. The spool keeps the list of its files
 * (sequence number, size, events) in memory, oldest first; the directory
 * is only read at open.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "analytics_spool.h"

#define SPOOL_MAGIC "EDGEASPL"
#define SPOOL_VERSION 1
#define SPOOL_HEADER 32
#define SPOOL_SUFFIX ".spool"
#define SPOOL_TMP_PREFIX ".tmp-"
#define SPOOL_SEQ_DIGITS 20
/* A living writer's temporary file younger than this is its write under
 * way. */
#define SPOOL_TMP_FRESH_S 600
/* Names tried for a batch when another process took the number. */
#define SPOOL_NAME_TRIES 64
/* the fixed part of a record, before its fields */
#define SPOOL_RECORD_FIXED (5 * 8 + 4 + 2 + 1 + 1 + 1)

struct spool_file {
	uint64_t seq;
	uint64_t bytes;
	uint64_t events;
};

struct analytics_spool {
	char *dir;
	int dfd;
	uint64_t max_bytes;
	/* the files, oldest first: f[head..n) */
	struct spool_file *f;
	size_t head, n, cap;
	uint64_t next_seq;
	_Atomic uint64_t files, bytes, events, corrupt, put_errors;
};

/* ---- the encoding ------------------------------------------------------- */

static void put_le(unsigned char *p, uint64_t v, unsigned bytes)
{
	unsigned i;

	for (i = 0; i < bytes; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, unsigned bytes)
{
	uint64_t v = 0;
	unsigned i;

	for (i = 0; i < bytes; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static size_t spool_record_max(void)
{
	size_t n = SPOOL_RECORD_FIXED;
	unsigned f;

	for (f = 0; f < ANALYTICS_F_MAX; f++)
		n += 2 + analytics_field_size((enum analytics_field)f);
	return n;
}

/* Append ev's record at p; returns its length. */
static size_t spool_record_put(unsigned char *p,
			       const struct analytics_event *ev)
{
	unsigned char *o = p;
	unsigned f;

	put_le(o, ev->time_ns, 8);
	put_le(o + 8, ev->duration_ns, 8);
	put_le(o + 16, ev->upstream_ns, 8);
	put_le(o + 24, ev->bytes_in, 8);
	put_le(o + 32, ev->bytes_out, 8);
	put_le(o + 40, ev->truncated, 4);
	put_le(o + 44, ev->status, 2);
	o[46] = ev->kind;
	o[47] = ev->outcome;
	o[48] = ANALYTICS_F_MAX;
	o += SPOOL_RECORD_FIXED;
	for (f = 0; f < ANALYTICS_F_MAX; f++) {
		const char *s =
		    analytics_event_get(ev, (enum analytics_field)f);
		size_t len = strlen(s);

		put_le(o, len, 2);
		memcpy(o + 2, s, len);
		o += 2 + len;
	}
	return (size_t)(o - p);
}

int analytics_spool_encode(const struct analytics_event *ev, size_t n,
			   unsigned char **out, size_t *len)
{
	unsigned char *buf;
	size_t i, off = SPOOL_HEADER;

	buf = malloc(SPOOL_HEADER + n * spool_record_max());
	if (!buf)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		off += spool_record_put(buf + off, &ev[i]);
	memcpy(buf, SPOOL_MAGIC, 8);
	put_le(buf + 8, SPOOL_VERSION, 4);
	put_le(buf + 12, n, 4);
	put_le(buf + 16, off - SPOOL_HEADER, 8);
	put_le(buf + 24,
	       crc32(0, buf + SPOOL_HEADER, (uInt)(off - SPOOL_HEADER)), 4);
	put_le(buf + 28, crc32(0, buf, 28), 4);
	*out = buf;
	*len = off;
	return 0;
}

/* Check a header: 0 with the events and payload bytes it announces. */
static int spool_header(const unsigned char *h, uint64_t *events,
			uint64_t *payload)
{
	if (memcmp(h, SPOOL_MAGIC, 8) != 0 ||
	    get_le(h + 28, 4) != crc32(0, h, 28) ||
	    get_le(h + 8, 4) != SPOOL_VERSION)
		return -EBADMSG;
	*events = get_le(h + 12, 4);
	*payload = get_le(h + 16, 8);
	if (*events == 0 || *events > ANALYTICS_SPOOL_FILE_EVENTS_MAX ||
	    *payload > ANALYTICS_SPOOL_FILE_BYTES_MAX - SPOOL_HEADER ||
	    *payload < *events * SPOOL_RECORD_FIXED)
		return -EBADMSG;
	return 0;
}

int analytics_spool_decode(const unsigned char *buf, size_t len,
			   struct analytics_event **ev, size_t *n)
{
	const unsigned char *p, *end;
	struct analytics_event *v;
	uint64_t events, payload, i;

	*ev = NULL;
	*n = 0;
	if (len < SPOOL_HEADER || spool_header(buf, &events, &payload) < 0 ||
	    payload != len - SPOOL_HEADER ||
	    get_le(buf + 24, 4) != crc32(0, buf + SPOOL_HEADER, (uInt)payload))
		return -EBADMSG;
	v = calloc(events, sizeof(*v));
	if (!v)
		return -ENOMEM;
	p = buf + SPOOL_HEADER;
	end = buf + len;
	for (i = 0; i < events; i++) {
		struct analytics_event *e = &v[i];
		uint32_t trunc;
		unsigned f, nf;

		if ((size_t)(end - p) < SPOOL_RECORD_FIXED)
			goto bad;
		e->time_ns = get_le(p, 8);
		e->duration_ns = get_le(p + 8, 8);
		e->upstream_ns = get_le(p + 16, 8);
		e->bytes_in = get_le(p + 24, 8);
		e->bytes_out = get_le(p + 32, 8);
		trunc = (uint32_t)get_le(p + 40, 4);
		e->status = (uint16_t)get_le(p + 44, 2);
		e->kind = p[46];
		e->outcome = p[47];
		nf = p[48];
		p += SPOOL_RECORD_FIXED;
		for (f = 0; f < nf; f++) {
			size_t flen;

			if (end - p < 2)
				goto bad;
			flen = (size_t)get_le(p, 2);
			if ((size_t)(end - p - 2) < flen)
				goto bad;
			/* a field this binary knows; one cut to fit is
			 * marked as truncated, like any other */
			if (f < ANALYTICS_F_MAX)
				analytics_event_set(e, (enum analytics_field)f,
						    (const char *)p + 2, flen);
			p += 2 + flen;
		}
		/* the marks as written (of the fields known here), and any
		 * cut above */
		e->truncated |= trunc & ((1u << ANALYTICS_F_MAX) - 1);
	}
	if (p != end)
		goto bad;
	*ev = v;
	*n = (size_t)events;
	return 0;
bad:
	free(v);
	return -EBADMSG;
}

/* ---- the list of files ---------------------------------------------- */

static int spool_list_add(struct analytics_spool *s, uint64_t seq,
			  uint64_t bytes, uint64_t events)
{
	struct spool_file *nf;

	if (s->head > 0 && s->n == s->cap) {
		memmove(s->f, s->f + s->head, (s->n - s->head) * sizeof(*s->f));
		s->n -= s->head;
		s->head = 0;
	}
	if (s->n == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 64;

		nf = realloc(s->f, ncap * sizeof(*nf));
		if (!nf)
			return -ENOMEM;
		s->f = nf;
		s->cap = ncap;
	}
	s->f[s->n].seq = seq;
	s->f[s->n].bytes = bytes;
	s->f[s->n].events = events;
	s->n++;
	atomic_fetch_add(&s->files, 1);
	atomic_fetch_add(&s->bytes, bytes);
	atomic_fetch_add(&s->events, events);
	return 0;
}

/* Forget the oldest file (deleted, or passed over). */
static void spool_list_drop_head(struct analytics_spool *s)
{
	struct spool_file *f = &s->f[s->head];

	atomic_fetch_sub(&s->files, 1);
	atomic_fetch_sub(&s->bytes, f->bytes);
	atomic_fetch_sub(&s->events, f->events);
	s->head++;
	if (s->head == s->n)
		s->head = s->n = 0;
}

static int spool_cmp(const void *a, const void *b)
{
	const struct spool_file *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void spool_name(char *buf, size_t len, const char *prefix, uint64_t seq,
		       const char *suffix)
{
	snprintf(buf, len, "%s%0*llu%s", prefix, SPOOL_SEQ_DIGITS,
		 (unsigned long long)seq, suffix);
}

/* The sequence number of a spool file's name, or false. */
static bool spool_parse_name(const char *name, const char *prefix,
			     const char *suffix, uint64_t *seq)
{
	size_t pl = strlen(prefix), sl = strlen(suffix), i;
	uint64_t v = 0;

	if (strlen(name) != pl + SPOOL_SEQ_DIGITS + sl ||
	    strncmp(name, prefix, pl) != 0 ||
	    strcmp(name + pl + SPOOL_SEQ_DIGITS, suffix) != 0)
		return false;
	for (i = pl; i < pl + SPOOL_SEQ_DIGITS; i++) {
		if (name[i] < '0' || name[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(name[i] - '0');
	}
	*seq = v;
	return true;
}

/* ---- open ------------------------------------------------------------- */

/* Whether pw may create and delete files in a directory of st. */
static bool spool_writable_by(const struct stat *st, const struct passwd *pw)
{
	if (pw->pw_uid == 0 || st->st_uid == pw->pw_uid)
		return (st->st_mode & (S_IWUSR | S_IXUSR)) ==
		       (S_IWUSR | S_IXUSR);
	if (st->st_gid == pw->pw_gid)
		return (st->st_mode & (S_IWGRP | S_IXGRP)) ==
		       (S_IWGRP | S_IXGRP);
	return (st->st_mode & (S_IWOTH | S_IXOTH)) == (S_IWOTH | S_IXOTH);
}

/* A temporary file's writer (.tmp-PID-SEQ.spool): whether that process
 * lives and is not this one (another edged, an upgrade's, writing it
 * now) and the file is recent (a write takes milliseconds: an older one
 * is a dead writer's whose PID was reused); *seq its number. False for
 * one of this name's without a PID. */
static bool spool_tmp_busy(const struct analytics_spool *s, const char *name,
			   uint64_t *seq)
{
	struct stat st;
	const char *p = name + strlen(SPOOL_TMP_PREFIX), *dash;
	char *end;
	long pid;

	dash = strchr(p, '-');
	if (!dash || dash == p || *p < '1' || *p > '9')
		return false;
	errno = 0;
	pid = strtol(p, &end, 10);
	if (end != dash || errno || pid <= 0 || pid > INT32_MAX ||
	    !spool_parse_name(dash + 1, "", SPOOL_SUFFIX, seq))
		return false;
	return pid != (long)getpid() &&
	       (kill((pid_t)pid, 0) == 0 || errno == EPERM) &&
	       fstatat(s->dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       st.st_mtime + SPOOL_TMP_FRESH_S > time(NULL);
}

/* A file left by a previous run: listed when its header is good; a torn
 * temporary file or a bad header is removed and counted; a temporary
 * file another living edged writes is left to it. */
static int spool_scan_one(struct analytics_spool *s, const char *name,
			  const struct passwd *pw)
{
	unsigned char h[SPOOL_HEADER];
	uint64_t seq, events, payload;
	struct stat st;
	ssize_t r;
	int fd, rc;

	if (strncmp(name, SPOOL_TMP_PREFIX, strlen(SPOOL_TMP_PREFIX)) == 0 &&
	    spool_tmp_busy(s, name, &seq)) {
		if (seq >= s->next_seq)
			s->next_seq = seq + 1;
		return 0;
	}
	/* .tmp-SEQ.spool (before PIDs) or .tmp-PID-SEQ.spool: cut short */
	if (strncmp(name, SPOOL_TMP_PREFIX, strlen(SPOOL_TMP_PREFIX)) == 0 &&
	    spool_parse_name(strrchr(name, '-') + 1, "", SPOOL_SUFFIX, &seq)) {
		log_warnx("analytics: spool %s: removing %s, a write cut "
			  "short (crash?)",
			  s->dir, name);
		unlinkat(s->dfd, name, 0);
		atomic_fetch_add(&s->corrupt, 1);
		if (seq >= s->next_seq)
			s->next_seq = seq + 1;
		return 0;
	}
	if (!spool_parse_name(name, "", SPOOL_SUFFIX, &seq))
		return 0; /* not ours: left alone */
	if (seq >= s->next_seq)
		s->next_seq = seq + 1;
	fd = openat(s->dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		log_warnx("analytics: spool %s: %s: cannot read it, passing "
			  "it over",
			  s->dir, name);
		if (fd >= 0)
			close(fd);
		atomic_fetch_add(&s->corrupt, 1);
		return 0;
	}
	r = pread(fd, h, sizeof(h), 0);
	close(fd);
	if (r != (ssize_t)sizeof(h) || spool_header(h, &events, &payload) ||
	    (uint64_t)st.st_size != SPOOL_HEADER + payload) {
		log_warnx("analytics: spool %s: %s is torn or corrupt, "
			  "removing it",
			  s->dir, name);
		unlinkat(s->dfd, name, 0);
		atomic_fetch_add(&s->corrupt, 1);
		return 0;
	}
	if (pw && st.st_uid != pw->pw_uid &&
	    fchownat(s->dfd, name, pw->pw_uid, pw->pw_gid, AT_SYMLINK_NOFOLLOW))
		log_warn("analytics: spool %s: chown %s", s->dir, name);
	rc = spool_list_add(s, seq, (uint64_t)st.st_size, events);
	return rc;
}

static int spool_scan(struct analytics_spool *s, const struct passwd *pw,
		      struct errbuf *err)
{
	struct dirent *de;
	DIR *d;
	int fd, rc = 0;

	fd = dup(s->dfd);
	if (fd < 0 || !(d = fdopendir(fd))) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		errbuf_set(err, "analytics.spool: %s: cannot list it: %s",
			   s->dir, strerror(-rc));
		return rc;
	}
	while (rc == 0 && (de = readdir(d)))
		rc = spool_scan_one(s, de->d_name, pw);
	closedir(d);
	if (rc) {
		errbuf_set(err, "%s: out of memory", s->dir);
		return rc;
	}
	if (s->n > 1)
		qsort(s->f, s->n, sizeof(*s->f), spool_cmp);
	if (s->n)
		log_note("analytics: spool %s: %zu file(s), %llu events from "
			 "a previous run, replayed first",
			 s->dir, s->n, (unsigned long long)s->events);
	return 0;
}

int analytics_spool_open(const char *dir, uint64_t max_bytes,
			 const struct passwd *pw, struct analytics_spool **out,
			 struct errbuf *err)
{
	struct analytics_spool *s;
	bool made = false;
	struct stat st;
	int rc;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s || !(s->dir = strdup(dir))) {
		free(s);
		errbuf_set(err, "analytics.spool: out of memory");
		return -ENOMEM;
	}
	s->dfd = -1;
	s->max_bytes = max_bytes;
	if (mkdir(dir, 0700) == 0)
		made = true;
	else if (errno != EEXIST) {
		rc = -errno;
		errbuf_set(err, "analytics.spool: cannot create %s: %s%s", dir,
			   strerror(-rc),
			   rc == -ENOENT ? " (its parent must exist)" : "");
		goto fail;
	}
	s->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dfd < 0) {
		rc = -errno;
		errbuf_set(err, "analytics.spool: cannot open %s: %s", dir,
			   rc == -ENOTDIR ? "not a directory" : strerror(-rc));
		goto fail;
	}
	if (fstat(s->dfd, &st)) {
		rc = -errno;
		errbuf_set(err, "analytics.spool: %s: %s", dir, strerror(-rc));
		goto fail;
	}
	if (made && pw && fchown(s->dfd, pw->pw_uid, pw->pw_gid)) {
		rc = -errno;
		errbuf_set(err,
			   "analytics.spool: %s: cannot give it to user "
			   "\"%s\": %s",
			   dir, pw->pw_name, strerror(-rc));
		goto fail;
	}
	if (!made && pw && !spool_writable_by(&st, pw)) {
		rc = -EACCES;
		errbuf_set(err,
			   "analytics.spool: %s is not writable by user "
			   "\"%s\", whom edged runs as (owner uid %u, group "
			   "%u, mode %04o): chown it to that user, or remove "
			   "it and edged creates it",
			   dir, pw->pw_name, (unsigned)st.st_uid,
			   (unsigned)st.st_gid, (unsigned)(st.st_mode & 07777));
		goto fail;
	}
	if (!pw && faccessat(s->dfd, ".", W_OK | X_OK, AT_EACCESS)) {
		rc = -errno;
		errbuf_set(err, "analytics.spool: %s is not writable: %s", dir,
			   strerror(-rc));
		goto fail;
	}
	rc = spool_scan(s, pw, err);
	if (rc)
		goto fail;
	*out = s;
	return 0;
fail:
	analytics_spool_close(s);
	return rc;
}

void analytics_spool_close(struct analytics_spool *s)
{
	if (!s)
		return;
	if (s->dfd >= 0)
		close(s->dfd);
	free(s->f);
	free(s->dir);
	free(s);
}

/* ---- writing and reading ---------------------------------------------- */

static int spool_write_all(int fd, const unsigned char *p, size_t len)
{
	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int analytics_spool_put(struct analytics_spool *s,
			const struct analytics_event *ev, size_t n,
			struct errbuf *err)
{
	char tmp[96], name[64], pfx[32];
	unsigned char *buf = NULL;
	const char *step = "create";
	size_t len;
	int fd = -1, rc, tries = 0;

	if (n == 0 || n > ANALYTICS_SPOOL_FILE_EVENTS_MAX) {
		errbuf_set(err, "%s: a batch of %zu events", s->dir, n);
		return -EINVAL;
	}
	rc = analytics_spool_encode(ev, n, &buf, &len);
	if (rc) {
		errbuf_set(err, "%s: out of memory", s->dir);
		return rc;
	}
	if (atomic_load(&s->bytes) + len > s->max_bytes) {
		errbuf_set(err,
			   "%s holds %llu bytes of files, and a batch of %zu "
			   "would pass its %llu",
			   s->dir, (unsigned long long)atomic_load(&s->bytes),
			   len, (unsigned long long)s->max_bytes);
		free(buf);
		return ANALYTICS_SPOOL_FULL;
	}
	/* the writer's PID in the temporary name: another edged sharing the
	 * directory never takes it, nor removes it while this one lives */
	snprintf(pfx, sizeof(pfx), "%s%ld-", SPOOL_TMP_PREFIX, (long)getpid());
	spool_name(tmp, sizeof(tmp), pfx, s->next_seq, SPOOL_SUFFIX);
	spool_name(name, sizeof(name), "", s->next_seq, SPOOL_SUFFIX);
	fd = openat(s->dfd, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		rc = -errno;
		goto fail;
	}
	step = "write";
	rc = spool_write_all(fd, buf, len);
	if (rc == 0) {
		step = "fsync";
		if (fsync(fd))
			rc = -errno;
	}
	if (close(fd) && rc == 0) {
		step = "close";
		rc = -errno;
	}
	fd = -1;
	/* never over a file of the same name: another edged's (an
	 * upgrade's two share the directory) takes the next number */
	while (rc == 0 &&
	       renameat2(s->dfd, tmp, s->dfd, name, RENAME_NOREPLACE)) {
		if (errno != EEXIST || ++tries > SPOOL_NAME_TRIES) {
			step = "rename to its name";
			rc = -errno;
			break;
		}
		s->next_seq++;
		spool_name(name, sizeof(name), "", s->next_seq, SPOOL_SUFFIX);
	}
	if (rc)
		goto fail;
	s->next_seq++;
	/* the rename is durable once the directory is */
	if (fsync(s->dfd))
		log_warn_rl("analytics: spool %s: fsync of the directory",
			    s->dir);
	free(buf);
	rc = spool_list_add(s, s->next_seq - 1, len, n);
	if (rc)
		errbuf_set(err, "%s: out of memory", s->dir);
	return rc;
fail:
	errbuf_set(err, "%s/%s: %s: %s", s->dir, tmp, step, strerror(-rc));
	unlinkat(s->dfd, tmp, 0);
	s->next_seq++; /* never reuse a name a failed write may have left */
	atomic_fetch_add(&s->put_errors, 1);
	free(buf);
	return rc;
}

/* Read the whole of the oldest file into a new buffer. */
static int spool_read_head(struct analytics_spool *s, unsigned char **buf,
			   size_t *len)
{
	char name[64];
	struct stat st;
	unsigned char *b;
	size_t off = 0;
	int fd, rc = 0;

	spool_name(name, sizeof(name), "", s->f[s->head].seq, SPOOL_SUFFIX);
	fd = openat(s->dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		rc = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < SPOOL_HEADER ||
	    (uint64_t)st.st_size > ANALYTICS_SPOOL_FILE_BYTES_MAX) {
		rc = -EBADMSG;
		goto out;
	}
	b = malloc((size_t)st.st_size);
	if (!b) {
		rc = -ENOMEM;
		goto out;
	}
	while (off < (size_t)st.st_size) {
		ssize_t r =
		    pread(fd, b + off, (size_t)st.st_size - off, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = r < 0 ? -errno : -EBADMSG;
			free(b);
			goto out;
		}
		off += (size_t)r;
	}
	*buf = b;
	*len = off;
out:
	close(fd);
	return rc;
}

int analytics_spool_peek(struct analytics_spool *s, struct analytics_event **ev,
			 size_t *n)
{
	unsigned char *buf = NULL;
	char name[64];
	size_t len = 0;
	int rc;

	while (s->head < s->n) {
		spool_name(name, sizeof(name), "", s->f[s->head].seq,
			   SPOOL_SUFFIX);
		rc = spool_read_head(s, &buf, &len);
		if (rc == 0) {
			rc = analytics_spool_decode(buf, len, ev, n);
			free(buf);
			if (rc == 0 || rc == -ENOMEM)
				return rc;
		}
		if (rc == -ENOMEM)
			return rc;
		if (rc == -ENOENT) {
			/* gone: sent by the other edged of an upgrade, which
			 * shares the directory (the database keeps each
			 * request once) */
			spool_list_drop_head(s);
			continue;
		}
		log_warnx("analytics: spool %s: %s: %s, passing it over "
			  "(%llu events lost)",
			  s->dir, name,
			  rc == -EBADMSG ? "torn or corrupt" : strerror(-rc),
			  (unsigned long long)s->f[s->head].events);
		unlinkat(s->dfd, name, 0);
		atomic_fetch_add(&s->corrupt, 1);
		spool_list_drop_head(s);
	}
	return -ENOENT;
}

int analytics_spool_pop(struct analytics_spool *s)
{
	char name[64];

	if (s->head == s->n)
		return -ENOENT;
	spool_name(name, sizeof(name), "", s->f[s->head].seq, SPOOL_SUFFIX);
	if (unlinkat(s->dfd, name, 0) && errno != ENOENT)
		log_warn_rl("analytics: spool %s: cannot remove %s", s->dir,
			    name);
	spool_list_drop_head(s);
	return 0;
}

const char *analytics_spool_dir(const struct analytics_spool *s)
{
	return s->dir;
}

bool analytics_spool_empty(const struct analytics_spool *s)
{
	return s->head == s->n;
}

void analytics_spool_stats(const struct analytics_spool *s,
			   struct analytics_spool_stats *st)
{
	st->files = atomic_load(&s->files);
	st->bytes = atomic_load(&s->bytes);
	st->events = atomic_load(&s->events);
	st->max_bytes = s->max_bytes;
	st->corrupt = atomic_load(&s->corrupt);
	st->put_errors = atomic_load(&s->put_errors);
}
