/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * analytics_pg.h - Record: the PostgreSQL sink. Batches of events go into
 * request_events through COPY, on a connection of the sink's own, from
 * the sink's writer thread (it serves no requests).
 *
 * Each batch is one statement string, so one implicit transaction: COPY
 * into a session's temporary table (ON COMMIT DELETE ROWS), then INSERT
 * INTO request_events SELECT ... ON CONFLICT (request_id) DO NOTHING. A
 * batch written twice (its COMMIT's answer lost, or replayed from the disk
 * spool) lands once. A batch the database refuses for its data (SQLSTATE
 * classes 22, 23, 54) is written again one event at a time, so that one
 * bad event is rejected (counted, logged) and its neighbours land.
 *
 * libpq is used without blocking, every wait bounded: connecting by
 * ANALYTICS_PG_CONNECT_MS, each batch by ANALYTICS_PG_BATCH_MS (and the
 * server's statement_timeout), so a database that hangs costs the writer
 * seconds, not forever; then the connection is dropped and made again on
 * the next try (the writer backs off between tries). TCP keepalives are
 * on. docs/analytics.md maps the fields to the columns.
 */
#ifndef EDGE_ANALYTICS_PG_H
#define EDGE_ANALYTICS_PG_H

#include <stddef.h>

#include "analytics.h"

/* Bounds of a wait (milliseconds). */
#define ANALYTICS_PG_CONNECT_MS 5000
#define ANALYTICS_PG_BATCH_MS 15000
/* The server's statement_timeout for the sink's session. */
#define ANALYTICS_PG_STATEMENT_MS 10000

/* Most bytes one event takes as a line of COPY text: every string field
 * at its largest with each byte escaped or replaced (3 bytes), the
 * numbers, the time, the tabs and the newline. */
#define ANALYTICS_PG_ROW_MAX 9216

/* The application_name of the sink's sessions (pg_stat_activity). */
#define ANALYTICS_PG_APPLICATION "edged analytics"

/*
 * Append s (NUL-terminated) to out as a value of COPY's text format:
 * backslash, newline, carriage return and tab escaped (\\ \n \r \t), each
 * byte of invalid UTF-8 replaced by U+FFFD; out must have room for
 * 3 * strlen(s) bytes. The empty string is written as \N (NULL) when
 * null_if_empty, else as nothing (an empty string). Returns the bytes
 * written (no NUL is added).
 */
size_t analytics_pg_copy_text(const char *s, bool null_if_empty, char *out);

/*
 * ev as one line of COPY text for the sink's temporary table (its columns
 * in the order of docs/analytics.md, newline included), into out, which
 * holds ANALYTICS_PG_ROW_MAX bytes. Returns its length.
 */
size_t analytics_pg_row(const struct analytics_event *ev, char *out);

/*
 * The PostgreSQL sink: events into request_events of the database
 * conninfo (libpq's connection string or URI), edge_host their
 * edge_host. Nothing is connected here: the first write connects.
 * Returns 0 and fills *sink, or -ENOMEM.
 */
int analytics_pg_sink(const char *conninfo, const char *edge_host,
		      struct analytics_sink *sink);

#endif /* EDGE_ANALYTICS_PG_H */
