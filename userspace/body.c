/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * body.c - the body pump (body.h).
 */
#include <errno.h>
#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>

#include "body.h"
#include "encoding.h"
#include "hdr.h"
#include "inject.h"
#include "sockio.h"

/* Largest piece of a chunked body made contiguous for the decoder. */
#define BODY_CHUNK_PIECE 16384
/* Coded output shorter than this is copied into the output, not moved. */
#define BODY_COPY_MAX 4096

void body_init(struct body *b, enum body_kind in, uint64_t left,
	       bool out_chunked)
{
	memset(b, 0, sizeof(*b));
	b->in = in;
	b->left = left;
	b->out_chunked = out_chunked;
	b->done = in == BODY_NONE || (in == BODY_LENGTH && left == 0);
	h1_chunked_init(&b->ck, NULL);
	b->ck.keep_trailers = true;
}

void body_free(struct body *b)
{
	if (b->trailers)
		evbuffer_free(b->trailers);
	b->trailers = NULL;
	enc_stream_free(b->enc);
	b->enc = NULL;
	if (b->zbuf)
		evbuffer_free(b->zbuf);
	b->zbuf = NULL;
	inject_stream_free(b->inj);
	b->inj = NULL;
	if (b->ibuf)
		evbuffer_free(b->ibuf);
	b->ibuf = NULL;
}

int body_inject(struct body *b, struct inject_stream *inj)
{
	if (!inj)
		return -ENOMEM;
	b->ibuf = evbuffer_new();
	if (!b->ibuf) {
		inject_stream_free(inj);
		return -ENOMEM;
	}
	b->inj = inj;
	return 0;
}

int body_encode(struct body *b, struct enc_stream *enc)
{
	b->zbuf = evbuffer_new();
	if (!b->zbuf) {
		enc_stream_free(enc);
		return -ENOMEM;
	}
	b->enc = enc;
	return 0;
}

size_t body_last_chunk(struct evbuffer *out, struct evbuffer *tr)
{
	const char *p, *name, *value;
	size_t len, off = 0, nlen, vlen, n = 5;

	evbuffer_add(out, "0\r\n", 3);
	len = tr ? evbuffer_get_length(tr) : 0;
	p = len ? (const char *)evbuffer_pullup(tr, (ssize_t)len) : NULL;
	while (p &&
	       hdr_trailer_next(p, len, &off, &name, &nlen, &value, &vlen)) {
		evbuffer_add(out, name, nlen);
		evbuffer_add(out, ": ", 2);
		evbuffer_add(out, value, vlen);
		evbuffer_add(out, "\r\n", 2);
		n += nlen + vlen + 4;
	}
	evbuffer_add(out, "\r\n", 2);
	return n;
}

/* Move what the encoder made so far to out, as one chunk when
 * chunked. */
static void body_emit_coded(struct body *b, struct evbuffer *out)
{
	size_t n = evbuffer_get_length(b->zbuf);

	if (n == 0)
		return;
	if (b->out_chunked)
		evbuffer_add_printf(out, "%zx\r\n", n);
	/* a flush's few bytes are copied into out's last chain: moved, each
	 * would hold a chain of its own while a slow client lets out grow */
	if (n < BODY_COPY_MAX) {
		evbuffer_add(out, evbuffer_pullup(b->zbuf, (ssize_t)n), n);
		evbuffer_drain(b->zbuf, n);
	} else {
		evbuffer_add_buffer(out, b->zbuf);
	}
	if (b->out_chunked)
		evbuffer_add(out, "\r\n", 2);
}

/* Write n bytes of data to out (through the encoder, if any), as one
 * chunk when chunked. -1 when the encoder failed. */
static int body_emit_data(struct body *b, struct evbuffer *out, const char *p,
			  size_t n)
{
	if (n == 0)
		return 0;
	if (b->enc) {
		if (enc_stream_write(b->enc, p, n, b->zbuf))
			return -1;
		body_emit_coded(b, out);
		return 0;
	}
	if (b->out_chunked)
		evbuffer_add_printf(out, "%zx\r\n", n);
	evbuffer_add(out, p, n);
	if (b->out_chunked)
		evbuffer_add(out, "\r\n", 2);
	return 0;
}

/* Give what the injection made to the encoder or the framing. */
static int body_emit_injected(struct body *b, struct evbuffer *out)
{
	size_t n = evbuffer_get_length(b->ibuf);
	int rc;

	if (!n)
		return 0;
	rc = body_emit_data(b, out, (const char *)evbuffer_pullup(b->ibuf, -1),
			    n);
	evbuffer_drain(b->ibuf, n);
	return rc;
}

/* Write n bytes of data: through the injection first, if any. */
static int body_emit(struct body *b, struct evbuffer *out, const char *p,
		     size_t n)
{
	if (!b->inj)
		return body_emit_data(b, out, p, n);
	if (n && inject_stream_write(b->inj, p, n, b->ibuf))
		return -1;
	return body_emit_injected(b, out);
}

/* The body's end: the injection's and the encoder's, written. -1 on a
 * failure. */
static int body_enc_finish(struct body *b, struct evbuffer *out)
{
	if (b->inj && (inject_stream_finish(b->inj, b->ibuf) ||
		       body_emit_injected(b, out)))
		return -1;
	if (!b->enc)
		return 0;
	if (enc_stream_finish(b->enc, b->zbuf))
		return -1;
	body_emit_coded(b, out);
	return 0;
}

/* The sender paused (its input ran dry): what was encoded goes now. */
static int body_enc_flush(struct body *b, struct evbuffer *out)
{
	if (!b->enc)
		return 0;
	if (enc_stream_flush(b->enc, b->zbuf))
		return -1;
	body_emit_coded(b, out);
	return 0;
}

size_t body_close(struct body *b, struct evbuffer *out, struct evbuffer *tr)
{
	size_t before = evbuffer_get_length(out), n = 0;

	(void)body_enc_finish(b, out); /* a failure: the stream is cut */
	n = evbuffer_get_length(out) - before;
	if (b->out_chunked)
		n += body_last_chunk(out, tr);
	b->done = true;
	return n;
}

int body_pump(struct body *b, struct evbuffer *in, struct evbuffer *out,
	      size_t max, uint64_t *data)
{
	size_t n, take, consumed, doff, dlen;
	const char *p;
	int rc;

	*data = 0;
	if (b->done)
		return 1;
	switch (b->in) {
	case BODY_NONE:
		b->done = true;
		return 1;
	case BODY_LENGTH:
	case BODY_CLOSE:
		n = evbuffer_get_length(in);
		if (n > max)
			n = max;
		if (b->in == BODY_LENGTH && n > b->left)
			n = (size_t)b->left;
		if (b->out_chunked || b->enc || b->inj) {
			p = (const char *)evbuffer_pullup(in, (ssize_t)n);
			if (body_emit(b, out, p, n))
				return -1;
			evbuffer_drain(in, n);
		} else {
			if (sockio_move(in, out, n))
				return -1;
		}
		*data = n;
		b->copied += n;
		if (b->in == BODY_LENGTH) {
			b->left -= n;
			b->done = b->left == 0;
		}
		if (b->done) {
			if (body_enc_finish(b, out))
				return -1;
			if (b->out_chunked)
				body_last_chunk(out, NULL);
		} else if (evbuffer_get_length(in) == 0 &&
			   body_enc_flush(b, out)) {
			return -1;
		}
		return b->done;
	case BODY_CHUNKED:
		while (*data < max && evbuffer_get_length(in) > 0) {
			take = evbuffer_get_length(in);
			if (take > BODY_CHUNK_PIECE)
				take = BODY_CHUNK_PIECE;
			/* a data span is never longer than the bytes fed */
			if (take > max - *data)
				take = (size_t)(max - *data);
			p = (const char *)evbuffer_pullup(in, (ssize_t)take);
			rc = h1_chunked_feed(&b->ck, p, take, &consumed, &doff,
					     &dlen);
			if (rc < 0)
				return -1;
			if (rc == H1_CHUNK_TRAILER) {
				if (!b->trailers)
					b->trailers = evbuffer_new();
				if (!b->trailers ||
				    evbuffer_add(b->trailers, p + doff, dlen))
					return -1;
			}
			if (rc == H1_CHUNK_DATA) {
				if (b->limit &&
				    admit_body_add(b->limit, dlen) == -EFBIG)
					return -EFBIG;
				if (body_emit(b, out, p + doff, dlen))
					return -1;
				*data += dlen;
				b->copied += dlen;
			}
			evbuffer_drain(in, consumed);
			if (rc == H1_CHUNK_DONE) {
				if (body_enc_finish(b, out))
					return -1;
				if (b->out_chunked)
					body_last_chunk(out, b->pass_trailers
								 ? b->trailers
								 : NULL);
				b->done = true;
				return 1;
			}
		}
		if (evbuffer_get_length(in) == 0 && body_enc_flush(b, out))
			return -1;
		return 0;
	}
	return -1;
}
