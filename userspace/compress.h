/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * compress.h - response compression (issue 33; docs/configuration.md,
 * "compression"): whether a response is compressed and with which coding
 * (the environment's group, the client's Accept-Encoding, the response's
 * own fields), and the changes to its head, as an hdr.h edit:
 * Content-Encoding, Vary: Accept-Encoding, a strong ETag made weak (the
 * framing is edge's: the length goes, the body is chunked on HTTP/1.1).
 * The body is encoded by the body pump (body.h) with encoding.h's
 * encoder.
 *
 * Never compressed: HEAD; 1xx, 204, 206 and 304; a request with Range; a
 * response with a Content-Encoding (identity aside) or Cache-Control
 * no-transform; a Content-Type not listed, or none; a length known and
 * under min_bytes, or 0; a 101's tunnel.
 */
#ifndef EDGE_COMPRESS_H
#define EDGE_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include <stdint.h>

#include "encoding.h"
#include "h1.h"
#include "hdr.h"
#include "log.h"

/* An environment's compression group. */
struct config_compression {
	bool enabled;
	enum enc algos[ENC_N]; /* preference order */
	size_t n_algos;
	uint64_t min_bytes;
	char **types; /* media types (enc_type_valid); NULL: the defaults */
	size_t n_types;
	int level[ENC_N]; /* per coding; 0: encoding.h's default */
};

#define COMPRESS_MIN_BYTES_DEFAULT 1024
#define COMPRESS_TYPES_MAX 64

/* The default types (every text type, JSON, JavaScript, XML, SVG,
 * ...). */
extern const char *const compress_default_types[];
extern const size_t compress_n_default_types;

/* c set to the defaults: enabled, zstd, br, gzip, 1 KiB, the default
 * types, default levels. */
void compress_defaults(struct config_compression *c);
/* A deep copy (0 or -ENOMEM, *to as the defaults then); free. */
int compress_dup(const struct config_compression *from,
		 struct config_compression *to);
void compress_free(struct config_compression *c);

/* The group from the database's JSON (environments.compression: the
 * file's keys, min_bytes a number of bytes): 0 (NULL or JSON null: the
 * defaults), -EINVAL with err (*out the defaults), -ENOMEM.
 * compress_to_json writes what it reads. */
int compress_from_json(const json_t *o, struct config_compression *out,
		       struct errbuf *err);
json_t *compress_to_json(const struct config_compression *c);

/* The coding to answer rs (to rq) with; ENC_IDENTITY: as it is. cl is
 * the length edge would send (-1: unknown); c NULL: the defaults. */
enum enc compress_choose(const struct config_compression *c,
			 const struct h1_request *rq,
			 const struct h1_response *rs, int64_t cl);

/* The head's changes for coding e (not identity), as an hdr.h edit
 * chained before next (NULL: none). ce holds spans of rs. */
struct compress_edit {
	struct hdr_edit base;
	enum enc e;
	const char *etag; /* rs's strong ETag value, NULL: none */
	size_t etag_len;
};
const struct hdr_edit *compress_edit_init(struct compress_edit *ce, enum enc e,
					  const struct h1_response *rs,
					  const struct hdr_edit *next);

#endif /* EDGE_COMPRESS_H */
