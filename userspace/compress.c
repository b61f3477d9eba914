// SPDX-License-Identifier: BSD-2-Clause
/*
 * compress.c - response compression's decision and head (compress.h).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress.h"

const char *const compress_default_types[] = {
    "text/*",
    "application/json",
    "application/javascript",
    "application/xml",
    "application/xhtml+xml",
    "application/rss+xml",
    "application/atom+xml",
    "application/ld+json",
    "application/manifest+json",
    "application/vnd.api+json",
    "application/wasm",
    "image/svg+xml",
    "image/x-icon",
    "font/ttf",
    "font/otf",
};
const size_t compress_n_default_types =
    sizeof(compress_default_types) / sizeof(compress_default_types[0]);

void compress_defaults(struct config_compression *c)
{
	memset(c, 0, sizeof(*c));
	c->enabled = true;
	c->algos[0] = ENC_ZSTD;
	c->algos[1] = ENC_BR;
	c->algos[2] = ENC_GZIP;
	c->n_algos = 3;
	c->min_bytes = COMPRESS_MIN_BYTES_DEFAULT;
}

void compress_free(struct config_compression *c)
{
	size_t i;

	for (i = 0; c->types && i < c->n_types; i++)
		free(c->types[i]);
	free(c->types);
	c->types = NULL;
	c->n_types = 0;
}

int compress_dup(const struct config_compression *from,
		 struct config_compression *to)
{
	size_t i;

	*to = *from;
	to->types = NULL;
	to->n_types = 0;
	if (!from->types)
		return 0;
	to->types = calloc(from->n_types + 1, sizeof(*to->types));
	if (!to->types)
		goto fail;
	for (i = 0; i < from->n_types; i++, to->n_types++)
		if (!(to->types[i] = strdup(from->types[i])))
			goto fail;
	return 0;
fail:
	compress_free(to);
	compress_defaults(to);
	return -ENOMEM;
}

enum enc compress_choose(const struct config_compression *c,
			 const struct h1_request *rq,
			 const struct h1_response *rs, int64_t cl)
{
	static const struct config_compression def = {
	    .enabled = true,
	    .algos = {ENC_ZSTD, ENC_BR, ENC_GZIP},
	    .n_algos = 3,
	    .min_bytes = COMPRESS_MIN_BYTES_DEFAULT,
	};
	const struct h1_header *ct, *ce;
	char ae[1024];
	size_t n = 0;
	unsigned i;

	if (!c)
		c = &def;
	if (!c->enabled || rq->method == H1_M_HEAD || rs->upgrade ||
	    rs->code < 200 || rs->code == 204 || rs->code == 206 ||
	    rs->code == 304 || rs->body == H1_BODY_NONE)
		return ENC_IDENTITY;
	/* an empty body stays empty, whatever min_bytes says */
	if (cl == 0 || (cl > 0 && (uint64_t)cl < c->min_bytes))
		return ENC_IDENTITY;
	if (h1_head_field(&rq->h, "range"))
		return ENC_IDENTITY;
	ce = h1_head_field(&rs->h, "content-encoding");
	if (ce && !(ce->value_len == 8 && h1_eq_n(ce->value, "identity", 8)))
		return ENC_IDENTITY;
	if (h1_head_has(&rs->h, "cache-control", "no-transform"))
		return ENC_IDENTITY;
	ct = h1_head_field(&rs->h, "content-type");
	if (!ct ||
	    !enc_type_listed(ct->value, ct->value_len,
			     c->types ? (const char *const *)c->types
				      : compress_default_types,
			     c->types ? c->n_types : compress_n_default_types))
		return ENC_IDENTITY;
	/* the client's Accept-Encoding fields, as one list */
	for (i = 0; i < rq->h.nheaders; i++) {
		const struct h1_header *f = &rq->h.headers[i];

		if (f->name_len != 15 ||
		    !h1_eq_n(f->name, "accept-encoding", 15))
			continue;
		if (n + f->value_len + 2 > sizeof(ae))
			break; /* what fits */
		if (n) {
			ae[n++] = ',';
			ae[n++] = ' ';
		}
		memcpy(ae + n, f->value, f->value_len);
		n += f->value_len;
	}
	if (!n)
		return ENC_IDENTITY;
	return enc_choose(ae, n, c->algos, c->n_algos);
}

static bool compress_drop(const struct hdr_edit *ed, const char *name, size_t n)
{
	const struct compress_edit *ce = (const struct compress_edit *)ed;

	return (n == 16 && h1_eq_n(name, "content-encoding", 16)) ||
	       (ce->etag && n == 4 && h1_eq_n(name, "etag", 4));
}

static void compress_add(const struct hdr_edit *ed, struct hdr_buf *b)
{
	const struct compress_edit *ce = (const struct compress_edit *)ed;

	hdr_buf_str(b, "Content-Encoding: ");
	hdr_buf_str(b, enc_name(ce->e));
	hdr_buf_str(b, "\r\nVary: Accept-Encoding\r\n");
	if (ce->etag) {
		hdr_buf_str(b, "ETag: W/");
		hdr_buf_add(b, ce->etag, ce->etag_len);
		hdr_buf_str(b, "\r\n");
	}
}

const struct hdr_edit *compress_edit_init(struct compress_edit *ce, enum enc e,
					  const struct h1_response *rs,
					  const struct hdr_edit *next)
{
	const struct h1_header *et = h1_head_field(&rs->h, "etag");

	memset(ce, 0, sizeof(*ce));
	ce->base.drop = compress_drop;
	ce->base.add = compress_add;
	ce->base.next = next;
	ce->e = e;
	/* a strong validator names these bytes: the coded ones are others */
	if (et && et->value_len >= 2 && et->value[0] == '"') {
		ce->etag = et->value;
		ce->etag_len = et->value_len;
	}
	return &ce->base;
}

int compress_from_json(const json_t *o, struct config_compression *out,
		       struct errbuf *err)
{
	const char *k;
	json_t *v, *el;
	size_t i, j;
	int e;

	compress_defaults(out);
	if (!o || json_is_null(o))
		return 0;
	if (!json_is_object(o)) {
		errbuf_set(err, "compression: an object is needed");
		return -EINVAL;
	}
	json_object_foreach((json_t *)o, k, v)
	{
		if (strcmp(k, "enabled") == 0) {
			if (!json_is_boolean(v)) {
				errbuf_set(err, "compression.enabled: true or "
						"false");
				goto fail;
			}
			out->enabled = json_is_true(v);
		} else if (strcmp(k, "min_bytes") == 0) {
			if (!json_is_integer(v) || json_integer_value(v) < 0) {
				errbuf_set(err, "compression.min_bytes: a "
						"number of bytes");
				goto fail;
			}
			out->min_bytes = (uint64_t)json_integer_value(v);
		} else if (strcmp(k, "algorithms") == 0) {
			if (!json_is_array(v) || json_array_size(v) == 0 ||
			    json_array_size(v) > ENC_N - 1) {
				errbuf_set(err, "compression.algorithms: 1 to "
						"3 of zstd, br, gzip");
				goto fail;
			}
			out->n_algos = 0;
			json_array_foreach(v, i, el)
			{
				e = json_is_string(el)
					? enc_parse(json_string_value(el),
						    json_string_length(el))
					: -1;
				for (j = 0; e > ENC_IDENTITY && j < i; j++)
					if (out->algos[j] == (enum enc)e)
						e = -1;
				if (e <= ENC_IDENTITY) {
					errbuf_set(
					    err,
					    "compression.algorithms[%zu]: "
					    "zstd, br or gzip, once",
					    i);
					goto fail;
				}
				out->algos[out->n_algos++] = (enum enc)e;
			}
		} else if (strcmp(k, "types") == 0) {
			if (!json_is_array(v) ||
			    json_array_size(v) > COMPRESS_TYPES_MAX) {
				errbuf_set(err,
					   "compression.types: a list of at "
					   "most %d media types",
					   COMPRESS_TYPES_MAX);
				goto fail;
			}
			out->types =
			    calloc(json_array_size(v) + 1, sizeof(*out->types));
			if (!out->types)
				goto nomem;
			json_array_foreach(v, i, el)
			{
				if (!json_is_string(el) ||
				    strlen(json_string_value(el)) !=
					json_string_length(el) ||
				    !enc_type_valid(json_string_value(el))) {
					errbuf_set(err,
						   "compression.types[%zu]: "
						   "\"type/subtype\" or "
						   "\"type/\" and a star",
						   i);
					goto fail;
				}
				out->types[i] = strdup(json_string_value(el));
				if (!out->types[i])
					goto nomem;
				out->n_types++;
			}
		} else if (strcmp(k, "level") == 0) {
			const char *lk;
			json_t *lv;

			if (!json_is_object(v)) {
				errbuf_set(err, "compression.level: an object "
						"{gzip, br, zstd}");
				goto fail;
			}
			json_object_foreach(v, lk, lv)
			{
				e = enc_parse(lk, strlen(lk));
				if (e <= ENC_IDENTITY || !json_is_integer(lv) ||
				    json_integer_value(lv) < 1 ||
				    json_integer_value(lv) >
					enc_level_max((enum enc)e)) {
					errbuf_set(
					    err,
					    "compression.level.%.16s: gzip "
					    "1..9, br 1..11, zstd 1..19",
					    lk);
					goto fail;
				}
				out->level[e] = (int)json_integer_value(lv);
			}
		} else {
			errbuf_set(err, "compression: unknown key \"%.40s\"",
				   k);
			goto fail;
		}
	}
	return 0;
nomem:
	compress_free(out);
	compress_defaults(out);
	return -ENOMEM;
fail:
	compress_free(out);
	compress_defaults(out);
	return -EINVAL;
}

json_t *compress_to_json(const struct config_compression *c)
{
	json_t *o = json_pack("{s:b, s:I}", "enabled", c->enabled, "min_bytes",
			      (json_int_t)c->min_bytes),
	       *a = json_array(), *t = NULL, *l = json_object();
	size_t i;
	int e;

	if (!o || !a || !l)
		goto fail;
	for (i = 0; i < c->n_algos; i++)
		if (json_array_append_new(a,
					  json_string(enc_name(c->algos[i]))))
			goto fail;
	for (e = ENC_GZIP; e < ENC_N; e++)
		if (c->level[e] &&
		    json_object_set_new(l, enc_name((enum enc)e),
					json_integer(c->level[e])))
			goto fail;
	if (c->types) {
		t = json_array();
		for (i = 0; t && i < c->n_types; i++)
			if (json_array_append_new(t, json_string(c->types[i])))
				goto fail;
		if (!t || json_object_set_new(o, "types", t))
			goto fail;
		t = NULL;
	}
	if (json_object_set_new(o, "algorithms", a) ||
	    json_object_set_new(o, "level", l)) {
		a = l = NULL;
		goto fail;
	}
	return o;
fail:
	json_decref(t);
	json_decref(a);
	json_decref(l);
	json_decref(o);
	return NULL;
}
