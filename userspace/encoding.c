// SPDX-License-Identifier: BSD-2-Clause
/*
 * encoding.c - content codings (encoding.h): Accept-Encoding read as RFC
 * 9110 has it, media types matched, and one streaming encoder per coding
 * behind the same four calls.
 */
#include <brotli/decode.h>
#include <brotli/encode.h>
#include <errno.h>
#include <stdatomic.h>
#include <event2/buffer.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "encoding.h"
#include "h1.h"

/* The window of br and zstd: 2^18 = 256 KiB (gzip's is 32 KiB). */
#define ENC_WINDOW_LOG 18
/* Bytes an encoder writes at a time into the output's reserved space. */
#define ENC_OUT_CHUNK 16384

static const char *const enc_names[ENC_N] = {"identity", "gzip", "br", "zstd"};

const char *enc_name(enum enc e)
{
	return (unsigned)e < ENC_N ? enc_names[e] : "?";
}

int enc_parse(const char *n, size_t len)
{
	int e;

	for (e = 0; e < ENC_N; e++)
		if (strlen(enc_names[e]) == len &&
		    h1_eq_n(n, enc_names[e], len))
			return e;
	return -1;
}

int enc_level_default(enum enc e)
{
	switch (e) {
	case ENC_GZIP:
		return 5;
	case ENC_BR:
		return 4;
	case ENC_ZSTD:
		return 3;
	default:
		return 0;
	}
}

int enc_level_max(enum enc e)
{
	switch (e) {
	case ENC_GZIP:
		return ENC_GZIP_LEVEL_MAX;
	case ENC_BR:
		return ENC_BR_LEVEL_MAX;
	case ENC_ZSTD:
		return ENC_ZSTD_LEVEL_MAX;
	default:
		return 0;
	}
}

/* ---- Accept-Encoding ---------------------------------------------------- */

static bool enc_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* The qvalue q[0..n) in thousandths ("0", "0.5", "1.000"), or -1 when it
 * is not one. */
static int enc_qvalue(const char *q, size_t n)
{
	int v = 0, scale = 1000;
	size_t i;

	if (n == 0 || (q[0] != '0' && q[0] != '1'))
		return -1;
	v = (q[0] - '0') * 1000;
	if (n == 1)
		return v;
	if (q[1] != '.' || n > 5)
		return -1;
	for (i = 2; i < n; i++) {
		if (q[i] < '0' || q[i] > '9')
			return -1;
		scale /= 10;
		v += (q[i] - '0') * scale;
	}
	return v > 1000 ? -1 : v;
}

/* One member m[0..n) of Accept-Encoding: its coding (-1: another, -2:
 * "*", -3: malformed) and its q in thousandths. */
static int enc_member(const char *m, size_t n, int *q)
{
	size_t i = 0, t;
	int c;

	while (i < n && h1_tchar((unsigned char)m[i]))
		i++;
	t = i;
	if (t == 0)
		return -3;
	c = (t == 1 && m[0] == '*') ? -2 : enc_parse(m, t);
	*q = 1000;
	/* parameters: only q counts ("; q=0.5"), others are ignored */
	while (i < n) {
		size_t k, keylen, v;

		while (i < n && enc_ows(m[i]))
			i++;
		if (i == n)
			break;
		if (m[i] != ';')
			return -3;
		i++;
		while (i < n && enc_ows(m[i]))
			i++;
		k = i;
		while (i < n && h1_tchar((unsigned char)m[i]))
			i++;
		keylen = i - k;
		if (keylen == 0 || i == n || m[i] != '=')
			return -3;
		v = ++i;
		while (i < n && m[i] != ';' && !enc_ows(m[i]))
			i++;
		if (keylen == 1 && (m[k] == 'q' || m[k] == 'Q')) {
			*q = enc_qvalue(m + v, i - v);
			if (*q < 0)
				return -3;
		}
	}
	return c;
}

enum enc enc_choose(const char *ae, size_t len, const enum enc *prefs, size_t n)
{
	int q[ENC_N], star = -1, c, mq;
	size_t i = 0, j, e0;
	enum enc best = ENC_IDENTITY;
	int bestq = 0;

	if (!ae)
		return ENC_IDENTITY;
	for (c = 0; c < ENC_N; c++)
		q[c] = -1; /* not named */
	while (i < len) {
		while (i < len && (enc_ows(ae[i]) || ae[i] == ','))
			i++;
		e0 = i;
		while (i < len && ae[i] != ',')
			i++;
		j = i;
		while (j > e0 && enc_ows(ae[j - 1]))
			j--;
		if (j == e0)
			continue;
		c = enc_member(ae + e0, j - e0, &mq);
		if (c == -2)
			star = mq;
		else if (c >= 0 && mq > q[c])
			q[c] = mq;
	}
	for (j = 0; j < n; j++) {
		c = (int)prefs[j];
		if (c <= ENC_IDENTITY || c >= ENC_N)
			continue;
		mq = q[c] >= 0 ? q[c] : star;
		if (mq > bestq) {
			bestq = mq;
			best = (enum enc)c;
		}
	}
	return best;
}

/* ---- media types -------------------------------------------------------- */

bool enc_type_valid(const char *t)
{
	const char *slash = strchr(t, '/');
	size_t i;

	if (!slash || slash == t || !slash[1])
		return false;
	for (i = 0; t[i]; i++)
		if (t + i != slash &&
		    !(h1_tchar((unsigned char)t[i]) &&
		      (t[i] != '*' || (t + i == slash + 1 && !t[i + 1]))))
			return false;
	return true;
}

bool enc_type_listed(const char *ct, size_t len, const char *const *types,
		     size_t n)
{
	size_t m = 0, tl, i;
	const char *slash;

	while (len && enc_ows(*ct))
		ct++, len--;
	while (m < len && ct[m] != ';' && !enc_ows(ct[m]))
		m++;
	slash = memchr(ct, '/', m);
	if (!slash)
		return false;
	for (i = 0; i < n; i++) {
		tl = strlen(types[i]);
		if (tl >= 2 && types[i][tl - 1] == '*' &&
		    types[i][tl - 2] == '/') {
			if ((size_t)(slash - ct) + 1 == tl - 1 &&
			    h1_eq_n(ct, types[i], tl - 1))
				return true;
		} else if (tl == m && h1_eq_n(ct, types[i], m)) {
			return true;
		}
	}
	return false;
}

/* ---- encoders ----------------------------------------------------------- */

/* Bytes every finished or freed encoder took in and gave out, by
 * coding (all threads). */
static atomic_ullong enc_total_in[ENC_N], enc_total_out[ENC_N];

void enc_totals(enum enc e, unsigned long long *in, unsigned long long *out)
{
	*in = *out = 0;
	if ((unsigned)e >= ENC_N)
		return;
	*in = atomic_load_explicit(&enc_total_in[e], memory_order_relaxed);
	*out = atomic_load_explicit(&enc_total_out[e], memory_order_relaxed);
}

struct enc_stream {
	enum enc e;
	size_t in, out;
	union {
		z_stream z;
		BrotliEncoderState *br;
		ZSTD_CStream *zs;
	} u;
};

struct enc_stream *enc_stream_new(enum enc e, int level)
{
	struct enc_stream *s;

	if (e <= ENC_IDENTITY || e >= ENC_N)
		return NULL;
	if (level <= 0)
		level = enc_level_default(e);
	if (level > enc_level_max(e))
		level = enc_level_max(e);
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->e = e;
	switch (e) {
	case ENC_GZIP:
		/* 15 + 16: a gzip wrapper; memLevel 8, zlib's default */
		if (deflateInit2(&s->u.z, level, Z_DEFLATED, 15 + 16, 8,
				 Z_DEFAULT_STRATEGY) != Z_OK)
			goto fail;
		break;
	case ENC_BR:
		s->u.br = BrotliEncoderCreateInstance(NULL, NULL, NULL);
		if (!s->u.br ||
		    !BrotliEncoderSetParameter(s->u.br, BROTLI_PARAM_QUALITY,
					       (uint32_t)level) ||
		    !BrotliEncoderSetParameter(s->u.br, BROTLI_PARAM_LGWIN,
					       ENC_WINDOW_LOG)) {
			if (s->u.br)
				BrotliEncoderDestroyInstance(s->u.br);
			goto fail;
		}
		break;
	default:
		s->u.zs = ZSTD_createCStream();
		if (!s->u.zs ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(
			s->u.zs, ZSTD_c_compressionLevel, level)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(
			s->u.zs, ZSTD_c_windowLog, ENC_WINDOW_LOG))) {
			ZSTD_freeCStream(s->u.zs);
			goto fail;
		}
		break;
	}
	return s;
fail:
	free(s);
	return NULL;
}

void enc_stream_free(struct enc_stream *s)
{
	if (!s)
		return;
	atomic_fetch_add_explicit(&enc_total_in[s->e], s->in,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&enc_total_out[s->e], s->out,
				  memory_order_relaxed);
	switch (s->e) {
	case ENC_GZIP:
		deflateEnd(&s->u.z);
		break;
	case ENC_BR:
		BrotliEncoderDestroyInstance(s->u.br);
		break;
	default:
		ZSTD_freeCStream(s->u.zs);
		break;
	}
	free(s);
}

/* Run the encoder over p[0..n) with op (ENC_OP_*), appending to out
 * until it has consumed the input and, for a flush or finish, emitted
 * everything. */
enum { ENC_OP_WRITE, ENC_OP_FLUSH, ENC_OP_FINISH };

static int enc_run(struct enc_stream *s, const void *p, size_t n, int op,
		   struct evbuffer *out)
{
	unsigned char tmp[ENC_OUT_CHUNK];
	struct evbuffer_iovec v = {tmp, sizeof(tmp)};
	bool more;

	s->in += n;
	do {
		size_t room = sizeof(tmp), made = 0;

		if (s->e == ENC_GZIP) {
			int flush = op == ENC_OP_FINISH	 ? Z_FINISH
				    : op == ENC_OP_FLUSH ? Z_SYNC_FLUSH
							 : Z_NO_FLUSH;
			int rc;

			s->u.z.next_in = (Bytef *)(uintptr_t)p;
			s->u.z.avail_in = (uInt)n;
			s->u.z.next_out = v.iov_base;
			s->u.z.avail_out = (uInt)room;
			rc = deflate(&s->u.z, flush);
			if (rc == Z_STREAM_ERROR)
				return -1;
			made = room - s->u.z.avail_out;
			p = s->u.z.next_in;
			n = s->u.z.avail_in;
			more = n > 0 || s->u.z.avail_out == 0 ||
			       (op == ENC_OP_FINISH && rc != Z_STREAM_END);
		} else if (s->e == ENC_BR) {
			BrotliEncoderOperation bop =
			    op == ENC_OP_FINISH	 ? BROTLI_OPERATION_FINISH
			    : op == ENC_OP_FLUSH ? BROTLI_OPERATION_FLUSH
						 : BROTLI_OPERATION_PROCESS;
			const uint8_t *in = p;
			uint8_t *o = v.iov_base;
			size_t left = room;

			if (!BrotliEncoderCompressStream(s->u.br, bop, &n, &in,
							 &left, &o, NULL))
				return -1;
			p = in;
			made = room - left;
			more = n > 0 || BrotliEncoderHasMoreOutput(s->u.br) ||
			       (op == ENC_OP_FINISH &&
				!BrotliEncoderIsFinished(s->u.br));
		} else {
			ZSTD_EndDirective d = op == ENC_OP_FINISH ? ZSTD_e_end
					      : op == ENC_OP_FLUSH
						  ? ZSTD_e_flush
						  : ZSTD_e_continue;
			ZSTD_inBuffer in = {p, n, 0};
			ZSTD_outBuffer o = {v.iov_base, room, 0};
			size_t r = ZSTD_compressStream2(s->u.zs, &o, &in, d);

			if (ZSTD_isError(r))
				return -1;
			p = (const char *)p + in.pos;
			n -= in.pos;
			made = o.pos;
			more = n > 0 || (d != ZSTD_e_continue && r != 0) ||
			       o.pos == room;
		}
		/* added, not reserved in out: a flush's few bytes join the
		 * last chain instead of taking a chain of 16 KiB each */
		if (made && evbuffer_add(out, tmp, made))
			return -1;
		s->out += made;
	} while (more);
	return 0;
}

int enc_stream_write(struct enc_stream *s, const void *p, size_t n,
		     struct evbuffer *out)
{
	return n ? enc_run(s, p, n, ENC_OP_WRITE, out) : 0;
}

int enc_stream_flush(struct enc_stream *s, struct evbuffer *out)
{
	return enc_run(s, NULL, 0, ENC_OP_FLUSH, out);
}

int enc_stream_finish(struct enc_stream *s, struct evbuffer *out)
{
	return enc_run(s, NULL, 0, ENC_OP_FINISH, out);
}

size_t enc_stream_in(const struct enc_stream *s)
{
	return s->in;
}

size_t enc_stream_out(const struct enc_stream *s)
{
	return s->out;
}

/* ---- decoders ----------------------------------------------------------- */

struct dec_stream {
	enum enc e;
	size_t out;
	bool ended; /* at a member's or frame's end */
	union {
		z_stream z;
		BrotliDecoderState *br;
		ZSTD_DStream *zs;
	} u;
};

struct dec_stream *dec_stream_new(enum enc e)
{
	struct dec_stream *d;

	if (e <= ENC_IDENTITY || e >= ENC_N)
		return NULL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->e = e;
	switch (e) {
	case ENC_GZIP:
		if (inflateInit2(&d->u.z, 15 + 16) != Z_OK)
			goto fail;
		break;
	case ENC_BR:
		if (!(d->u.br = BrotliDecoderCreateInstance(NULL, NULL, NULL)))
			goto fail;
		break;
	default:
		if (!(d->u.zs = ZSTD_createDStream()))
			goto fail;
		/* a frame may not ask for a window over 8 MiB */
		if (ZSTD_isError(ZSTD_DCtx_setParameter(
			d->u.zs, ZSTD_d_windowLogMax, 23))) {
			ZSTD_freeDStream(d->u.zs);
			goto fail;
		}
		break;
	}
	return d;
fail:
	free(d);
	return NULL;
}

void dec_stream_free(struct dec_stream *d)
{
	if (!d)
		return;
	switch (d->e) {
	case ENC_GZIP:
		inflateEnd(&d->u.z);
		break;
	case ENC_BR:
		BrotliDecoderDestroyInstance(d->u.br);
		break;
	default:
		ZSTD_freeDStream(d->u.zs);
		break;
	}
	free(d);
}

bool dec_stream_done(const struct dec_stream *d)
{
	return d->ended;
}

/* One step of the decoder: from *p (*n bytes) into o[0..room), *made written.
 * 0, or -1 when the input is not the coding's. */
static int dec_step(struct dec_stream *d, const uint8_t **p, size_t *n,
		    uint8_t *o, size_t room, size_t *made)
{
	*made = 0;
	/* at an end with nothing more: nothing to do (asking again would
	 * start another member or frame) */
	if (d->ended && *n == 0)
		return 0;
	if (d->e == ENC_GZIP) {
		int rc;

		if (d->ended) {
			/* another member follows */
			if (inflateReset(&d->u.z) != Z_OK)
				return -1;
			d->ended = false;
		}
		d->u.z.next_in = (Bytef *)(uintptr_t)*p;
		d->u.z.avail_in = (uInt)(*n > UINT32_MAX ? UINT32_MAX : *n);
		d->u.z.next_out = o;
		d->u.z.avail_out = (uInt)room;
		rc = inflate(&d->u.z, Z_NO_FLUSH);
		if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
			return -1;
		*n -= (size_t)(d->u.z.next_in - *p);
		*p = d->u.z.next_in;
		*made = room - d->u.z.avail_out;
		d->ended = rc == Z_STREAM_END;
		return 0;
	}
	if (d->e == ENC_BR) {
		BrotliDecoderResult r;
		size_t left = room;

		if (d->ended)
			return *n ? -1 : 0; /* bytes after the end */
		r = BrotliDecoderDecompressStream(d->u.br, n, p, &left, &o,
						  NULL);
		if (r == BROTLI_DECODER_RESULT_ERROR)
			return -1;
		*made = room - left;
		d->ended = r == BROTLI_DECODER_RESULT_SUCCESS;
		return 0;
	}
	{
		ZSTD_inBuffer in = {*p, *n, 0};
		ZSTD_outBuffer out = {o, room, 0};
		size_t r = ZSTD_decompressStream(d->u.zs, &out, &in);

		if (ZSTD_isError(r))
			return -1;
		*p += in.pos;
		*n -= in.pos;
		*made = out.pos;
		d->ended = r == 0;
		return 0;
	}
}

int dec_stream_write(struct dec_stream *d, const void *p, size_t n,
		     struct evbuffer *out, size_t max)
{
	const uint8_t *in = p;
	unsigned char tmp[ENC_OUT_CHUNK];
	size_t made, before;
	bool full;

	do {
		before = n;
		if (dec_step(d, &in, &n, tmp, sizeof(tmp), &made))
			return -1;
		full = made == sizeof(tmp);
		/* added, not reserved: a byte's output joins the last chain */
		if (made && evbuffer_add(out, tmp, made))
			return -1;
		d->out += made;
		if (d->out > max)
			return 1;
		/* no progress with input left: never a loop */
		if (!made && n && n == before)
			return -1;
	} while (n > 0 || full);
	return 0;
}
