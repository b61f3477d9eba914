/* SPDX-License-Identifier: BSD-2-Clause */
/* test_analytics_pg.c - the PostgreSQL sink's COPY text: escaping (tabs,
 * newlines, carriage returns, backslashes), invalid UTF-8 replaced, NULL
 * for empty fields, and one event's row column by column, read back the
 * way COPY's text format reads it. The sink against a real server is
 * tests/integration/test_edged_analytics_pg.sh's. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analytics_pg.h"
#include "unit.h"

/* COPY's reading of one text value (the escapes the sink writes, and \N
 * as NULL): into out, or NULL for \N. */
static const char *unescape(const char *v, size_t n, char *out)
{
	size_t i, o = 0;

	if (n == 2 && v[0] == '\\' && v[1] == 'N')
		return NULL;
	for (i = 0; i < n; i++) {
		if (v[i] != '\\') {
			out[o++] = v[i];
			continue;
		}
		ck_assert_uint_lt(i + 1, n);
		switch (v[++i]) {
		case '\\':
			out[o++] = '\\';
			break;
		case 'n':
			out[o++] = '\n';
			break;
		case 'r':
			out[o++] = '\r';
			break;
		case 't':
			out[o++] = '\t';
			break;
		default:
			ck_abort_msg("unexpected escape \\%c", v[i]);
		}
	}
	out[o] = '\0';
	return out;
}

/* Split a row (one line, newline included) at its tabs: the columns'
 * values, unescaped, in col[] (NULL for \N); returns how many. */
#define COLS 31
static size_t split(const char *row, size_t len, char store[COLS][4096],
		    const char *col[COLS])
{
	size_t n = 0, start = 0, i;

	ck_assert_uint_gt(len, 0);
	ck_assert_int_eq(row[len - 1], '\n');
	ck_assert_ptr_eq(memchr(row, '\n', len), row + len - 1);
	for (i = 0; i < len; i++) {
		if (row[i] != '\t' && row[i] != '\n')
			continue;
		ck_assert_uint_lt(n, COLS);
		col[n] = unescape(row + start, i - start, store[n]);
		n++;
		start = i + 1;
	}
	return n;
}

static const char *text(const char *s, bool null_if_empty, char *out)
{
	size_t n = analytics_pg_copy_text(s, null_if_empty, out);

	out[n] = '\0';
	return out;
}

START_TEST(test_copy_text)
{
	char out[256];

	ck_assert_str_eq(text("plain /path?q=1", true, out), "plain /path?q=1");
	ck_assert_str_eq(text("a\tb", true, out), "a\\tb");
	ck_assert_str_eq(text("a\nb\rc", true, out), "a\\nb\\rc");
	ck_assert_str_eq(text("back\\slash\\", true, out), "back\\\\slash\\\\");
	/* "\." alone on a line would end COPY's data: it cannot appear */
	ck_assert_str_eq(text("\\.", true, out), "\\\\.");
	ck_assert_str_eq(text("\\N", true, out), "\\\\N");
	ck_assert_str_eq(text("", true, out), "\\N");
	ck_assert_str_eq(text("", false, out), "");
	/* valid UTF-8 kept; each invalid byte one U+FFFD */
	ck_assert_str_eq(
	    text("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", true, out),
	    "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	ck_assert_str_eq(text("a\xff"
			      "b",
			      true, out),
			 "a\xef\xbf\xbd"
			 "b");
	ck_assert_str_eq(text("\xc3", true, out), "\xef\xbf\xbd");
	/* overlong, surrogate, beyond U+10FFFF, truncated sequence */
	ck_assert_str_eq(text("\xc0\x80", true, out),
			 "\xef\xbf\xbd\xef\xbf\xbd");
	ck_assert_str_eq(text("\xed\xa0\x80", true, out),
			 "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	ck_assert_str_eq(text("\xf4\x90\x80\x80", true, out),
			 "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	ck_assert_str_eq(text("\xe2\x82\t", true, out),
			 "\xef\xbf\xbd\xef\xbf\xbd\\t");
	/* other control characters are plain data in COPY text */
	ck_assert_str_eq(text("\x01\x7f", true, out), "\x01\x7f");
}
END_TEST

static void fill(struct analytics_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->time_ns = 1700000000123456789ULL;
	ev->duration_ns = 1500999;
	ev->upstream_ns = 999;
	ev->bytes_in = 100;
	ev->bytes_out = UINT64_MAX; /* clamped to bigint's largest */
	ev->status = 502;
	ev->kind = ANALYTICS_KIND_REQUEST;
	ev->outcome = OUTCOME_UPSTREAM_UNAVAILABLE;
	analytics_event_set(ev, ANALYTICS_F_REQUEST_ID, "req-1", SIZE_MAX);
	analytics_event_set(ev, ANALYTICS_F_PROJECT_ID, "p1", SIZE_MAX);
	analytics_event_set(ev, ANALYTICS_F_ENVIRONMENT_ID, "e1", SIZE_MAX);
	analytics_event_set(ev, ANALYTICS_F_HOST, "app.example.com", SIZE_MAX);
	analytics_event_set(ev, ANALYTICS_F_METHOD, "GET", SIZE_MAX);
	analytics_event_set(ev, ANALYTICS_F_PATH, "/a\tb\nc\\d\re", SIZE_MAX);
	analytics_event_set(ev, ANALYTICS_F_CLIENT_IP, "203.0.113.9", SIZE_MAX);
	analytics_event_set(ev, ANALYTICS_F_USER_AGENT, "ua\xff", SIZE_MAX);
	analytics_event_set(ev, ANALYTICS_F_TLS_VERSION, "TLSv1.3", SIZE_MAX);
}

START_TEST(test_row)
{
	static char store[COLS][4096];
	static char row[ANALYTICS_PG_ROW_MAX];
	const char *col[COLS];
	struct analytics_event ev;
	size_t len;

	fill(&ev);
	len = analytics_pg_row(&ev, row);
	ck_assert_uint_eq(split(row, len, store, col), COLS);
	/* the temporary table's columns, docs/analytics.md's order */
	ck_assert_str_eq(col[0], "req-1");
	ck_assert_str_eq(col[1], "2023-11-14 22:13:20.123456+00");
	ck_assert_str_eq(col[2], "request");
	ck_assert_str_eq(col[3], "p1");
	ck_assert_str_eq(col[4], "e1");
	ck_assert_ptr_null(col[5]); /* deployment_id: empty is NULL */
	ck_assert_str_eq(col[6], "app.example.com");
	ck_assert_str_eq(col[7], "GET");
	ck_assert_str_eq(col[8], "/a\tb\nc\\d\re");
	ck_assert_str_eq(col[9], "502");
	ck_assert_str_eq(col[10], "100");
	ck_assert_str_eq(col[11], "9223372036854775807");
	ck_assert_str_eq(col[12], "1500"); /* microseconds, truncated */
	ck_assert_str_eq(col[13], "0");
	ck_assert_str_eq(col[14], "203.0.113.9");
	ck_assert_str_eq(col[15], "ua\xef\xbf\xbd");
	ck_assert_ptr_null(col[16]); /* referrer */
	ck_assert_str_eq(col[17], "TLSv1.3");
	ck_assert_str_eq(col[18], "upstream_unavailable");
	ck_assert_ptr_null(col[19]); /* mover: a request has none */
	ck_assert_ptr_null(col[20]); /* tls_cipher: not set */
	ck_assert_ptr_null(col[21]); /* tls_resumed */
	ck_assert_ptr_null(col[22]); /* cold_start_ms: waited for no wake */
	ck_assert_ptr_null(col[23]); /* upstream_addr: none */
	ck_assert_ptr_null(col[24]); /* upstream_status */
	ck_assert_ptr_null(col[25]); /* http_version */
	ck_assert_ptr_null(col[26]); /* challenge: none */
	ck_assert_ptr_null(col[27]); /* auth: none */
	ck_assert_ptr_null(col[28]); /* trace_id: none */
	ck_assert_ptr_null(col[29]); /* span_id: none */
	ck_assert_ptr_null(col[30]); /* attempts: none */
	analytics_event_set(&ev, ANALYTICS_F_UPSTREAM_ADDR, "[2001:db8::1]:80",
			    SIZE_MAX);
	analytics_event_set(&ev, ANALYTICS_F_UPSTREAM_STATUS, "503", SIZE_MAX);
	analytics_event_set(&ev, ANALYTICS_F_HTTP_VERSION, "HTTP/1.0",
			    SIZE_MAX);
	len = analytics_pg_row(&ev, row);
	ck_assert_uint_eq(split(row, len, store, col), COLS);
	ck_assert_str_eq(col[23], "[2001:db8::1]:80");
	ck_assert_str_eq(col[24], "503");
	ck_assert_str_eq(col[25], "HTTP/1.0");
	analytics_event_set(&ev, ANALYTICS_F_CHALLENGE, "passed", SIZE_MAX);
	len = analytics_pg_row(&ev, row);
	ck_assert_uint_eq(split(row, len, store, col), COLS);
	ck_assert_str_eq(col[26], "passed");
	analytics_event_set(&ev, ANALYTICS_F_AUTH, "jwt", SIZE_MAX);
	len = analytics_pg_row(&ev, row);
	ck_assert_uint_eq(split(row, len, store, col), COLS);
	ck_assert_str_eq(col[27], "jwt");
	analytics_event_set(&ev, ANALYTICS_F_TRACE_ID,
			    "4bf92f3577b34da6a3ce929d0e0e4736", SIZE_MAX);
	analytics_event_set(&ev, ANALYTICS_F_SPAN_ID, "00f067aa0ba902b7",
			    SIZE_MAX);
	len = analytics_pg_row(&ev, row);
	ck_assert_uint_eq(split(row, len, store, col), COLS);
	ck_assert_str_eq(col[28], "4bf92f3577b34da6a3ce929d0e0e4736");
	ck_assert_str_eq(col[29], "00f067aa0ba902b7");
	analytics_event_set(&ev, ANALYTICS_F_COLD_START_MS, "87", SIZE_MAX);
	len = analytics_pg_row(&ev, row);
	ck_assert_uint_eq(split(row, len, store, col), COLS);
	ck_assert_str_eq(col[22], "87");
	memset(ev.cold_start_ms, 0, sizeof(ev.cold_start_ms));
	analytics_event_set(&ev, ANALYTICS_F_TLS_CIPHER,
			    "TLS_AES_128_GCM_SHA256", SIZE_MAX);
	analytics_event_set(&ev, ANALYTICS_F_TLS_RESUMED, "true", SIZE_MAX);
	len = analytics_pg_row(&ev, row);
	ck_assert_uint_eq(split(row, len, store, col), COLS);
	ck_assert_str_eq(col[20], "TLS_AES_128_GCM_SHA256");
	ck_assert_str_eq(col[21], "true");

	/* a tunnel; an empty event: the NOT NULL columns stay strings */
	ev.kind = ANALYTICS_KIND_TUNNEL;
	analytics_event_set(&ev, ANALYTICS_F_MOVER, "copy+sockmap", SIZE_MAX);
	len = analytics_pg_row(&ev, row);
	ck_assert_uint_eq(split(row, len, store, col), COLS);
	ck_assert_str_eq(col[2], "tunnel");
	ck_assert_str_eq(col[19], "copy+sockmap");
	memset(&ev, 0, sizeof(ev));
	len = analytics_pg_row(&ev, row);
	ck_assert_uint_eq(split(row, len, store, col), COLS);
	ck_assert_str_eq(col[0], "");
	ck_assert_str_eq(col[1], "1970-01-01 00:00:00.000000+00");
	ck_assert_str_eq(col[18], "ok");
	ck_assert_ptr_null(col[6]);
}
END_TEST

/* The largest row fits ANALYTICS_PG_ROW_MAX: every field full of bytes
 * that each become three (invalid UTF-8), or two (backslashes). */
START_TEST(test_row_max)
{
	static char row[ANALYTICS_PG_ROW_MAX];
	static char store[COLS][4096];
	const char *col[COLS];
	struct analytics_event ev;
	char big[2048];
	unsigned f, pass;
	size_t len;

	for (pass = 0; pass < 2; pass++) {
		memset(big, pass ? '\\' : '\xff', sizeof(big));
		memset(&ev, 0, sizeof(ev));
		ev.time_ns = UINT64_MAX;
		ev.duration_ns = ev.upstream_ns = UINT64_MAX;
		ev.bytes_in = ev.bytes_out = UINT64_MAX;
		ev.status = UINT16_MAX; /* not a smallint: NULL */
		for (f = 0; f < ANALYTICS_F_MAX; f++)
			analytics_event_set(&ev, (enum analytics_field)f, big,
					    sizeof(big));
		len = analytics_pg_row(&ev, row);
		ck_assert_uint_lt(len, ANALYTICS_PG_ROW_MAX);
		ck_assert_uint_eq(split(row, len, store, col), COLS);
		ck_assert_ptr_null(col[9]);
		ck_assert_uint_eq(strlen(col[8]), pass ? 1023 : 3 * 1023);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("analytics_pg");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_copy_text);
	tcase_add_test(tc, test_row);
	tcase_add_test(tc, test_row_max);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
