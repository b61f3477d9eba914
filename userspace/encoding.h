/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * encoding.h - content codings for response compression (issue 33):
 * which coding a client's Accept-Encoding and a server's preference give,
 * whether a Content-Type is one to compress, and streaming encoders for
 * gzip (zlib), br (libbrotli) and zstd (libzstd) into an evbuffer.
 *
 * An encoder's memory is bounded by its level and window (windows of
 * 32 KiB for gzip, 256 KiB for br and zstd), whatever the body's length:
 * a chunk is compressed as it comes, flushed on demand (a stream's
 * pause), finished at its end.
 *
 * Pure but for the coders' allocation.
 */
#ifndef EDGE_ENCODING_H
#define EDGE_ENCODING_H

#include <stdbool.h>
#include <stddef.h>

struct evbuffer;

enum enc {
	ENC_IDENTITY = 0,
	ENC_GZIP,
	ENC_BR,
	ENC_ZSTD,
	ENC_N,
};

/* "identity", "gzip", "br", "zstd". */
const char *enc_name(enum enc e);
/* The coding named n[0..len) (case-insensitive), or -1. */
int enc_parse(const char *n, size_t len);

/* Levels each coding takes, and edge's defaults (the cost nginx's gzip
 * level 1..6 buys: fast enough to be worth it per request). */
#define ENC_GZIP_LEVEL_MAX 9
#define ENC_BR_LEVEL_MAX 11
#define ENC_ZSTD_LEVEL_MAX 19
int enc_level_default(enum enc e);
int enc_level_max(enum enc e);

/*
 * The coding to answer with: the first of prefs[0..n) the client's
 * Accept-Encoding value ae[0..len) (the fields joined with ", "; NULL: it
 * sent none) accepts with the highest q-value (RFC 9110 section
 * 12.5.3: "*" stands for any coding it does not name, q=0 refuses, a
 * malformed member is ignored); ENC_IDENTITY when it accepts none of
 * them (or sent no Accept-Encoding).
 */
enum enc enc_choose(const char *ae, size_t len, const enum enc *prefs,
		    size_t n);

/* Whether the media type of Content-Type value ct[0..len) (its
 * parameters ignored, case-insensitive) is one of types[0..n): "type/sub"
 * exactly, or "type/" and a star for every subtype of type. */
bool enc_type_listed(const char *ct, size_t len, const char *const *types,
		     size_t n);

/* Whether media type t is written as enc_type_listed takes it. */
bool enc_type_valid(const char *t);

/* A streaming encoder. */
struct enc_stream;

/* An encoder of coding e (not ENC_IDENTITY) at level (0: the default;
 * clamped to the coding's range). NULL when out of memory. */
struct enc_stream *enc_stream_new(enum enc e, int level);
void enc_stream_free(struct enc_stream *s);

/* Compress p[0..n) into out (what the encoder can emit now; it may hold
 * some back). 0, or -1 (out of memory, an encoder error). */
int enc_stream_write(struct enc_stream *s, const void *p, size_t n,
		     struct evbuffer *out);
/* Emit all that was written so far, decodable as it is (a stream's
 * pause: SSE, long polls). 0 or -1. */
int enc_stream_flush(struct enc_stream *s, struct evbuffer *out);
/* End the stream (its trailer: gzip's CRC and length, zstd's frame end).
 * 0 or -1; nothing may be written after. */
int enc_stream_finish(struct enc_stream *s, struct evbuffer *out);

/* Bytes taken in and given out so far. */
size_t enc_stream_in(const struct enc_stream *s);
size_t enc_stream_out(const struct enc_stream *s);

/* A streaming decoder (a compressed upstream body read for injection,
 * inject.h): gzip (its members one after another), br, zstd (its
 * frames). */
struct dec_stream;

/* A decoder of coding e (not ENC_IDENTITY); NULL when out of memory. */
struct dec_stream *dec_stream_new(enum enc e);
void dec_stream_free(struct dec_stream *d);
/* Decode p[0..n) into out. 0: all taken; 1: the output passed max bytes
 * in all (a bomb, or a body too large: stopped there, out holds more
 * than max); -1: not a valid stream of the coding (bytes after its end
 * included). */
int dec_stream_write(struct dec_stream *d, const void *p, size_t n,
		     struct evbuffer *out, size_t max);
/* Whether what was written ends where a stream of the coding may end
 * (a truncated body does not). */
bool dec_stream_done(const struct dec_stream *d);

/* Bytes the encoders of coding e took in and gave out, counted when each
 * is freed (all threads, since the process started). */
void enc_totals(enum enc e, unsigned long long *in, unsigned long long *out);

#endif /* EDGE_ENCODING_H */
