/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * analytics_spool.h - Record: the disk spool, where a sink's batches wait
 * while the sink (the database) is away and its in-memory spool is full.
 *
 * A directory of files, one per batch, named by a sequence number
 * (00000000000000000042.spool) and replayed oldest first. Each file is
 * written beside its final name (.tmp-00000000000000000042), fsync'd,
 * renamed into place and the directory fsync'd, so a file with a final
 * name is whole unless the disk lied; a header with a checksum of its own
 * and one of the records catches that (a torn or corrupt file is
 * skipped, deleted and counted, never half-replayed). The files' bytes are
 * capped (spool_max): a batch that would pass the cap is refused and its
 * events are the caller's to drop and count. Files a previous run left
 * are found at open and replayed first.
 *
 * One thread uses a spool (the sink's writer thread, after open on the
 * main thread); analytics_spool_stats() may be called from any thread.
 * docs/analytics.md describes the file format.
 */
#ifndef EDGE_ANALYTICS_SPOOL_H
#define EDGE_ANALYTICS_SPOOL_H

#include <pwd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analytics.h"
#include "log.h"

/* Bounds of one spool file, so that a damaged header cannot make a
 * reader allocate without limit. */
#define ANALYTICS_SPOOL_FILE_EVENTS_MAX 65536
#define ANALYTICS_SPOOL_FILE_BYTES_MAX (64u << 20)

struct analytics_spool;

struct analytics_spool_stats {
	uint64_t files;	     /* gauge: files waiting */
	uint64_t bytes;	     /* gauge: their size */
	uint64_t events;     /* gauge: events in them (from their headers) */
	uint64_t max_bytes;  /* the cap */
	uint64_t corrupt;    /* files skipped: torn, bad checksum, unreadable */
	uint64_t put_errors; /* batches not written: I/O errors (the cap's
			      * refusals are not errors) */
};

/*
 * Open the spool directory dir (an absolute path), creating it (0700)
 * when missing; its parent must exist. When pw is not NULL, edged will
 * run as that user: a directory made here is given to it, one that
 * already exists must be writable by it (owner or group bits), and files
 * a previous run left that it does not own are given to it. Without pw,
 * the directory must be writable by this process. Files left by a
 * previous run are listed (oldest first), leftover temporary files of a
 * write cut short are removed and counted as corrupt. Returns 0 and sets
 * *out, or -errno with err saying what is wrong with the directory
 * ("analytics.spool: /var/spool/edge: ..."). Call it before privileges
 * are dropped.
 */
int analytics_spool_open(const char *dir, uint64_t max_bytes,
			 const struct passwd *pw, struct analytics_spool **out,
			 struct errbuf *err);

/* Close the spool (files stay on disk). NULL is fine. */
void analytics_spool_close(struct analytics_spool *s);

/* analytics_spool_put refused a batch for the cap, not for an error. */
#define ANALYTICS_SPOOL_FULL 1

/*
 * Write ev[0..n) (1 <= n <= ANALYTICS_SPOOL_FILE_EVENTS_MAX) as one new
 * file, the newest: atomically and durably, as above. Returns 0;
 * ANALYTICS_SPOOL_FULL when it would take the files past max_bytes
 * (nothing written, not an error; err: "DIR holds N bytes of files, and
 * a batch of M would pass its MAX"); or -errno when the file system
 * refused (ENOSPC, EDQUOT, EIO ... at the create, a write, the fsync,
 * the close or the rename): nothing left behind, counted in put_errors,
 * err naming the file, the step and strerror ("/var/spool/edge/
 * .tmp-00000000000000000042.spool: write: No space left on device").
 * -EINVAL for a bad n, -ENOMEM. err may be NULL.
 */
int analytics_spool_put(struct analytics_spool *s,
			const struct analytics_event *ev, size_t n,
			struct errbuf *err);

/* The spool's directory, as opened. */
const char *analytics_spool_dir(const struct analytics_spool *s);

/*
 * Read the oldest file: *ev is a new array (free() it) of its *n events.
 * A file that is torn, fails its checksums or cannot be read is logged,
 * deleted when it can be, counted in corrupt and passed over for the
 * next. Returns 0, -ENOENT when there is no file, or -ENOMEM.
 */
int analytics_spool_peek(struct analytics_spool *s, struct analytics_event **ev,
			 size_t *n);

/* Delete the oldest file (its events were written). Returns 0 or
 * -ENOENT when there is none; a failing unlink is logged (the file is
 * then replayed again at the next start: replays are idempotent). */
int analytics_spool_pop(struct analytics_spool *s);

/* Whether no file waits. */
bool analytics_spool_empty(const struct analytics_spool *s);

/* The counters (each read atomically). */
void analytics_spool_stats(const struct analytics_spool *s,
			   struct analytics_spool_stats *st);

/*
 * The spool file's encoding, for tests: ev[0..n) as a whole file (header
 * and records) in a new buffer *out of *len bytes (free() it). Returns 0
 * or -ENOMEM. And the reverse: the file's bytes into a new array *ev of
 * *n events, or -EBADMSG when they are not a whole, valid file.
 */
int analytics_spool_encode(const struct analytics_event *ev, size_t n,
			   unsigned char **out, size_t *len);
int analytics_spool_decode(const unsigned char *buf, size_t len,
			   struct analytics_event **ev, size_t *n);

#endif /* EDGE_ANALYTICS_SPOOL_H */
