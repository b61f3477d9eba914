/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * outcome.c - the outcome table's accessors and the JSON error body.
 */
#include <errno.h>
#include <string.h>

#include "outcome.h"

struct outcome_info {
	const char *name;
	int status;
	const char *reason;
};

static const struct outcome_info outcome_table[OUTCOME_MAX] = {
#define OUTCOME_ROW(id, n, s, r) [OUTCOME_##id] = {n, s, r},
    EDGE_OUTCOMES(OUTCOME_ROW)
#undef OUTCOME_ROW
};

static bool outcome_valid(enum outcome o)
{
	return (unsigned)o < OUTCOME_MAX;
}

const char *outcome_name(enum outcome o)
{
	return outcome_valid(o) ? outcome_table[o].name : "unknown";
}

int outcome_status(enum outcome o)
{
	return outcome_valid(o) ? outcome_table[o].status : 0;
}

const char *outcome_reason(enum outcome o)
{
	return outcome_valid(o) ? outcome_table[o].reason : "unknown outcome";
}

bool outcome_sends_error(enum outcome o)
{
	return outcome_status(o) != 0;
}

int outcome_from_name(const char *name, enum outcome *o)
{
	unsigned i;

	for (i = 0; i < OUTCOME_MAX; i++) {
		if (strcmp(outcome_table[i].name, name) == 0) {
			*o = (enum outcome)i;
			return 0;
		}
	}
	return -ENOENT;
}

/* Bounded writer into the caller's buffer; off counts what would have
 * been written so that overflow is detected once, at the end. */
struct outcome_out {
	char *buf;
	size_t len;
	size_t off;
};

static void out_raw(struct outcome_out *w, const char *s, size_t n)
{
	if (w->off < w->len && n <= w->len - w->off)
		memcpy(w->buf + w->off, s, n);
	w->off += n;
}

static void out_str(struct outcome_out *w, const char *s)
{
	out_raw(w, s, strlen(s));
}

/* A JSON string's contents (without the quotes). */
static void out_escaped(struct outcome_out *w, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p;
	char esc[6];

	for (p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\') {
			esc[0] = '\\';
			esc[1] = (char)*p;
			out_raw(w, esc, 2);
		} else if (*p < 0x20) {
			memcpy(esc, "\\u00", 4);
			esc[4] = hex[*p >> 4];
			esc[5] = hex[*p & 0xf];
			out_raw(w, esc, 6);
		} else if (*p >= 0x7f) {
			out_str(w, "\\ufffd");
		} else {
			out_raw(w, (const char *)p, 1);
		}
	}
}

ssize_t outcome_error_body(enum outcome o, const char *request_id, char *buf,
			   size_t len)
{
	struct outcome_out w = {buf, len, 0};

	out_str(&w, "{\"error\":\"");
	out_escaped(&w, outcome_name(o));
	out_str(&w, "\",\"message\":\"");
	out_escaped(&w, outcome_reason(o));
	out_str(&w, "\",\"request_id\":\"");
	out_escaped(&w, request_id ? request_id : "");
	out_str(&w, "\"}");
	if (w.off >= len) {
		if (len)
			buf[0] = '\0';
		return -ENOSPC;
	}
	buf[w.off] = '\0';
	return (ssize_t)w.off;
}

enum outcome outcome_of_parse(int status)
{
	switch (status) {
	case 414:
		return OUTCOME_URI_TOO_LONG;
	case 431:
		return OUTCOME_HEADERS_TOO_LARGE;
	case 501:
		return OUTCOME_NOT_IMPLEMENTED;
	case 505:
		return OUTCOME_VERSION_NOT_SUPPORTED;
	case 417:
		return OUTCOME_EXPECTATION_FAILED;
	default:
		return OUTCOME_BAD_REQUEST;
	}
}
