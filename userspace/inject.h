/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * inject.h - script and pixel injection (issue 33; docs/configuration.md,
 * "inject"): an environment's head_end snippet goes before the first
 * "</head>" of a text/html response, its body_end snippet before the last
 * "</body>" (case-insensitive; white space may come before the '>').
 *
 * A page not coded streams through an inject_stream (below) unless it has
 * a length up to limits.max_inject_bytes; that one, and a gzip, br or
 * zstd page, the proxy reads whole before its head goes on (decoded, up
 * to the limit). Read whole and a tag found: the snippets go in, the
 * body is sent with its own Content-Length (or coded again for the
 * client, compress.h). An injected page, streamed or not, has no
 * Accept-Ranges and a strong ETag made weak. A page read whole that
 * cannot be (no tag, over the limit or a decompression bomb, a coding
 * edge does not read, a stream that does not decode) goes on exactly as
 * the upstream sent it, counted by result.
 *
 * Never read for injection: HEAD; 1xx, 204, 206 and 304; a request with
 * Range; a response with Cache-Control no-transform; a Content-Type not
 * text/html; a 101's tunnel.
 */
#ifndef EDGE_INJECT_H
#define EDGE_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include <stdint.h>

#include "encoding.h"
#include "h1.h"
#include "log.h"

struct evbuffer;

/* Bytes of one snippet, at most. */
#define INJECT_SNIPPET_MAX (64 * 1024)
/* limits.max_inject_bytes: its default and greatest value. */
#define INJECT_MAX_BYTES_DEFAULT (1024 * 1024)
#define INJECT_MAX_BYTES_MAX (64 * 1024 * 1024)

enum inject_at { INJECT_HEAD_END = 0, INJECT_BODY_END, INJECT_AT_N };

/* "head_end", "body_end". */
extern const char *const inject_at_name[INJECT_AT_N];

/* An environment's inject group: zeroed is none. */
struct config_inject {
	char *text[INJECT_AT_N]; /* NUL-terminated; NULL: none */
	size_t len[INJECT_AT_N];
	char *file[INJECT_AT_N]; /* read from this file (the file config's
				    { file = "..." }), NULL: inline */
};

/* Whether c has a snippet (NULL: false). */
bool inject_any(const struct config_inject *c);
/* A deep copy (0 or -ENOMEM, *to zeroed then); free. */
int inject_dup(const struct config_inject *from, struct config_inject *to);
void inject_free(struct config_inject *c);

/* Set snippet at to s[0..n) (copied; file: where it was read, NULL:
 * inline). 0; -EINVAL with err (too long, a NUL byte); -ENOMEM. */
int inject_set(struct config_inject *c, enum inject_at at, const char *s,
	       size_t n, const char *file, struct errbuf *err);

/* The group from the database's JSON (environments.inject: {"head_end":
 * "...", "body_end": "..."}; strings only, a database row names no
 * file): 0 (NULL or JSON null: none), -EINVAL with err (*out none),
 * -ENOMEM. inject_to_json writes what it reads (NULL when c has none). */
int inject_from_json(const json_t *o, struct config_inject *out,
		     struct errbuf *err);
json_t *inject_to_json(const struct config_inject *c);
/* What edgectl routes shows: null when c has none, else per snippet its
 * bytes and file ({"head_end": {"bytes": 120, "file": null}}). */
json_t *inject_summary_json(const struct config_inject *c);

/* What became of a response read for injection. */
enum inject_result {
	INJECT_INJECTED = 0,
	INJECT_NO_TAG,	    /* read whole: neither tag */
	INJECT_TOO_LARGE,   /* over limits.max_inject_bytes (a bomb too) */
	INJECT_UNDECODABLE, /* a coding edge does not read, or a stream
			       that does not decode */
	INJECT_RESULTS,
};
/* "injected", "no_tag", "too_large", "undecodable". */
const char *inject_result_name(enum inject_result r);
void inject_count(enum inject_result r);
/* Responses of each result since the process started (all threads). */
unsigned long long inject_total(enum inject_result r);

/*
 * Whether the body of rs (to rq) is read for injection of c: false for
 * the cases above. *coding is its Content-Encoding (ENC_IDENTITY for
 * none or "identity"), -1 for one edge cannot decode (several, or
 * another than gzip, br and zstd: counted undecodable by the caller,
 * the response passed on).
 */
bool inject_applies(const struct config_inject *c, const struct h1_request *rq,
		    const struct h1_response *rs, int *coding);

/* The snippets of c put into the page p[0..n), written to out. Returns
 * false, and writes nothing, when the page has neither tag. */
bool inject_apply(const struct config_inject *c, const char *p, size_t n,
		  struct evbuffer *out);

/*
 * A streamed page's injection: what is written goes out as it comes but
 * for a tag cut by the end of a piece (held until the next) and, from a
 * "</body>" on, what follows it (held until another "</body>" lets it go,
 * or the end puts body_end before it; past INJECT_HOLD_MAX held bytes
 * body_end goes before the held one and nothing more is looked for).
 */
#define INJECT_HOLD_MAX (64 * 1024)
struct inject_stream;
/* NULL when out of memory; c must outlive it. */
struct inject_stream *inject_stream_new(const struct config_inject *c);
void inject_stream_free(struct inject_stream *s);
/* Take p[0..n), write what may go on to out. 0 or -1 (out of memory). */
int inject_stream_write(struct inject_stream *s, const char *p, size_t n,
			struct evbuffer *out);
/* The page's end: what was held, with body_end before its held
 * "</body>". 0 or -1. */
int inject_stream_finish(struct inject_stream *s, struct evbuffer *out);
/* Whether a snippet went in so far. */
bool inject_stream_injected(const struct inject_stream *s);

/* Where the first "</head>" (at INJECT_HEAD_END) or the last "</body>"
 * (INJECT_BODY_END) of p[0..n) starts, or -1. */
long inject_find(enum inject_at at, const char *p, size_t n);

/*
 * Whether a Content-Security-Policy value csp[0..len) stops the inline
 * scripts of snippet s (a <script> element without src): its script-src
 * (or default-src when it has none) lacks 'unsafe-inline', or carries a
 * nonce or a hash (which make 'unsafe-inline' ignored). *dir and *dlen
 * are set to the directive that does.
 */
bool inject_csp_blocks(const char *csp, size_t len, const char *s,
		       const char **dir, size_t *dlen);

#endif /* EDGE_INJECT_H */
