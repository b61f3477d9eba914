/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * body.h - the body pump: an HTTP/1.1 message body copied from one
 * evbuffer to another, its framing read (a length, chunked, or until the
 * close) and written (as read, or re-chunked), a chunked body's trailer
 * section kept, chunked data counted against a limit before it is
 * written. The proxy pumps request bodies (client to upstream) and
 * response bodies (upstream to client) with it.
 *
 * Thread-safety: a struct body belongs to its request's worker.
 */
#ifndef EDGE_BODY_H
#define EDGE_BODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "admit.h"
#include "h1.h"

struct evbuffer;

/* How a body in flight is delimited on each side. */
enum body_kind {
	BODY_NONE = 0,
	BODY_LENGTH,  /* left bytes */
	BODY_CHUNKED, /* decoded with h1_chunked_feed */
	BODY_CLOSE,   /* until the sender closes */
};

/* A body being copied from one evbuffer to another. */
struct body {
	enum body_kind in; /* framing read */
	bool out_chunked;  /* re-chunk what is written */
	bool done;	   /* the whole body was copied */
	/* write trailers after the last chunk when out_chunked */
	bool pass_trailers;
	uint64_t left;	 /* BODY_LENGTH: bytes still to copy */
	uint64_t copied; /* data bytes copied so far */
	struct h1_chunked ck;
	/* counted before any chunked data is written: NULL, no limit */
	struct admit_body *limit;
	/* a chunked body's trailer section as read ("Name: value\r\n"
	 * lines), NULL when it had none */
	struct evbuffer *trailers;
	/* the data written is encoded (body_encode), NULL: as it is */
	struct enc_stream *enc;
	struct evbuffer *zbuf; /* the encoder's output before framing */
	/* the data is a streamed page given its snippets first (inject.h),
	 * NULL: as it is */
	struct inject_stream *inj;
	struct evbuffer *ibuf; /* the injection's output */
};

struct enc_stream;
struct inject_stream;

/* Make b copy a body of kind in (left bytes for BODY_LENGTH), re-chunking
 * when out_chunked (a body of a length then ends with its last chunk; one
 * delimited by the close, with body_close's); a chunked one keeps its
 * trailer section (body_free frees it). b holds nothing before (zeroed,
 * or freed). */
void body_init(struct body *b, enum body_kind in, uint64_t left,
	       bool out_chunked);

/*
 * Copy what in holds of the body into out (framing decoded, re-encoded
 * as b says), at most max bytes of data (the rest stays in in). Returns 1
 * when the body is complete (b->done; bytes after it stay in in), 0 when
 * more is needed, -1 on a chunked framing error (b->ck.err) or out of
 * memory, or -EFBIG
 * when chunked data would pass b->limit (that data is not written, nor is
 * the last chunk). *data is the data bytes copied by this call.
 */
int body_pump(struct body *b, struct evbuffer *in, struct evbuffer *out,
	      size_t max, uint64_t *data);

/* Write the last chunk of a chunked body to out, with the fields of tr
 * (lines as struct body's; NULL: none) that may go on as trailers
 * (hdr_trailer_next). Returns the bytes written. */
size_t body_last_chunk(struct evbuffer *out, struct evbuffer *tr);

/* From now on the data b writes goes through enc (b owns it: body_free
 * frees it; a response's compression, compress.h): what was written is
 * flushed whenever the input runs dry (the sender paused), the encoder
 * finished at the body's end. 0 or -ENOMEM (enc freed). */
int body_encode(struct body *b, struct enc_stream *enc);

/* From now on the data b writes goes through inj first (b owns it),
 * then the encoder if any: 0 or -ENOMEM (inj freed). */
int body_inject(struct body *b, struct inject_stream *inj);

/* The end of a body delimited by the close (BODY_CLOSE at the sender's
 * EOF): the encoder's end, and the last chunk when out_chunked with the
 * fields of tr. Returns the bytes written to out. */
size_t body_close(struct body *b, struct evbuffer *out, struct evbuffer *tr);

/* Free what b holds (its trailers, its encoder, its injection). */
void body_free(struct body *b);

#endif /* EDGE_BODY_H */
