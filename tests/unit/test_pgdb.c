/* SPDX-License-Identifier: BSD-2-Clause */
/* test_pgdb.c - lib/pgdb without a server: passwords masked in every form
 * libpq's strings and messages carry them, the connection parameters
 * (keepalives and the connect timeout added unless set), a refused
 * connection's message, and the embedded migrations. The server side is
 * in tests/pg/. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pgdb.h"
#include "unit.h"

struct mask_case {
	const char *in, *secret, *out;
};

static const struct mask_case masks[] = {
    {"host=x password=secret port=1", NULL, "host=x password=*** port=1"},
    {"password = 'se cr\\'et' dbname=e", NULL, "password = *** dbname=e"},
    {"PASSWORD=abc", NULL, "PASSWORD=***"},
    {"sslpassword=abc host=h", NULL, "sslpassword=*** host=h"},
    {"password=", NULL, "password=***"},
    {"password='unterminated", NULL, "password=***"},
    {"postgresql://u:s3cret@h:5432/db", NULL, "postgresql://u:***@h:5432/db"},
    {"postgres://u:p@ss@h/db", NULL, "postgres://u:***@h/db"},
    {"postgres://u@h/db", NULL, "postgres://u@h/db"},
    {"postgres://h:5432/db", NULL, "postgres://h:5432/db"},
    {"postgresql://h/db?password=abc&x=1", NULL,
     "postgresql://h/db?password=***"},
    {"auth failed for hunter22, hunter22!", "hunter22",
     "auth failed for ***, ***!"},
    {"short ab stays", "ab", "short ab stays"},
    {"password authentication failed for user \"u\"", NULL,
     "password authentication failed for user \"u\""},
    {"no secret here", "", "no secret here"},
};

START_TEST(test_mask)
{
	const struct mask_case *m = &masks[_i];
	char out[256];

	pgdb_mask(m->in, m->secret, out, sizeof(out));
	ck_assert_str_eq(out, m->out);
}
END_TEST

START_TEST(test_mask_short_buffer)
{
	char out[12];

	/* cut, terminated, and the value never shows even in part */
	pgdb_mask("password=abcdefghijkl", NULL, out, sizeof(out));
	ck_assert_str_eq(out, "password=**");
	pgdb_mask("anything", NULL, out, 1);
	ck_assert_str_eq(out, "");
}
END_TEST

/* The value of key in p, NULL when absent. */
static const char *param(const struct pgdb_params *p, const char *key)
{
	size_t i;

	for (i = 0; p->keys[i]; i++)
		if (strcmp(p->keys[i], key) == 0)
			return p->vals[i];
	return NULL;
}

START_TEST(test_params_defaults)
{
	struct pgdb_params p;
	struct errbuf err = {""};

	unsetenv("PGCONNECT_TIMEOUT");
	unsetenv("PGAPPNAME");
	unsetenv("PGCLIENTENCODING");
	ck_assert_int_eq(pgdb_params_init(&p, "host=h dbname=d password=pw",
					  "edgectl", &err),
			 0);
	ck_assert_str_eq(param(&p, "host"), "h");
	ck_assert_str_eq(param(&p, "dbname"), "d");
	ck_assert_str_eq(param(&p, "keepalives"), "1");
	ck_assert_str_eq(param(&p, "keepalives_idle"), "10");
	ck_assert_str_eq(param(&p, "keepalives_interval"), "5");
	ck_assert_str_eq(param(&p, "keepalives_count"), "3");
	ck_assert_str_eq(param(&p, "connect_timeout"), "10");
	ck_assert_str_eq(param(&p, "tcp_user_timeout"), "30000");
	ck_assert_str_eq(param(&p, "application_name"), "edgectl");
	ck_assert_str_eq(param(&p, "client_encoding"), "UTF8");
	ck_assert_str_eq(p.secret, "pw");
	pgdb_params_free(&p);
	pgdb_params_free(&p); /* twice is harmless */
}
END_TEST

START_TEST(test_params_kept)
{
	struct pgdb_params p;
	struct errbuf err = {""};
	size_t i, n = 0;

	ck_assert_int_eq(
	    pgdb_params_init(&p,
			     "host=h keepalives=0 keepalives_idle=99 "
			     "connect_timeout=3 application_name=mine",
			     "edgectl", &err),
	    0);
	ck_assert_str_eq(param(&p, "keepalives"), "0");
	ck_assert_str_eq(param(&p, "keepalives_idle"), "99");
	ck_assert_str_eq(param(&p, "connect_timeout"), "3");
	ck_assert_str_eq(param(&p, "application_name"), "mine");
	/* the ones not set still come */
	ck_assert_str_eq(param(&p, "keepalives_count"), "3");
	ck_assert_ptr_null(p.secret);
	for (i = 0; p.keys[i]; i++)
		n += strcmp(p.keys[i], "keepalives") == 0;
	ck_assert_uint_eq(n, 1);
	pgdb_params_free(&p);

	/* the environment's timeout is libpq's to apply */
	setenv("PGCONNECT_TIMEOUT", "7", 1);
	ck_assert_int_eq(pgdb_params_init(&p, "host=h", NULL, &err), 0);
	ck_assert_ptr_null(param(&p, "connect_timeout"));
	ck_assert_ptr_null(param(&p, "application_name"));
	unsetenv("PGCONNECT_TIMEOUT");
	pgdb_params_free(&p);
}
END_TEST

START_TEST(test_params_uri)
{
	struct pgdb_params p;
	struct errbuf err = {""};

	ck_assert_int_eq(
	    pgdb_params_init(&p, "postgresql://u:pw%40x@db.example:6543/edge",
			     NULL, &err),
	    0);
	ck_assert_str_eq(param(&p, "host"), "db.example");
	ck_assert_str_eq(param(&p, "port"), "6543");
	ck_assert_str_eq(param(&p, "user"), "u");
	ck_assert_str_eq(p.secret, "pw@x");
	ck_assert_str_eq(param(&p, "keepalives"), "1");
	pgdb_params_free(&p);
}
END_TEST

START_TEST(test_params_bad)
{
	struct pgdb_params p;
	struct errbuf err = {""};

	/* the unquoted password ends at the space: libpq then quotes the
	 * rest of it as a keyword it cannot read */
	ck_assert_int_eq(
	    pgdb_params_init(&p, "host=h password=abc defgh", NULL, &err),
	    -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "bad connection string"));
	ck_assert_ptr_null(strstr(err.msg, "defgh"));
	ck_assert_ptr_null(strstr(err.msg, "abc"));
	pgdb_params_free(&p);
	ck_assert_int_eq(pgdb_params_init(&p, "nokey", NULL, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "\"nokey\""));
	ck_assert_int_eq(pgdb_params_init(&p, "bogus=1", NULL, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "bogus"));
}
END_TEST

START_TEST(test_connect_refused)
{
	struct errbuf err = {""};
	PGconn *conn = (PGconn *)1;

	/* nothing listens on port 1 of the loopback */
	ck_assert_int_eq(pgdb_connect("host=127.0.0.1 port=1 user=u "
				      "password=Sekr3tPass dbname=d",
				      "test", &conn, &err),
			 -ECONNREFUSED);
	ck_assert_ptr_null(conn);
	ck_assert_ptr_nonnull(strstr(err.msg, "cannot connect to PostgreSQL"));
	ck_assert_ptr_nonnull(strstr(err.msg, "Connection refused"));
	ck_assert_ptr_null(strstr(err.msg, "Sekr3tPass"));
	ck_assert_ptr_null(strchr(err.msg, '\n'));
}
END_TEST

START_TEST(test_migrations)
{
	int v;

	ck_assert_int_ge(pgdb_latest(), 2);
	ck_assert_str_eq(pgdb_migration_name(1), "control_plane");
	ck_assert_str_eq(pgdb_migration_name(2), "ip_rules_unique");
	/* numbers may skip (one reserved by another change), never the
	 * first three nor the last */
	for (v = 1; v <= 3; v++)
		ck_assert_ptr_nonnull(pgdb_migration_name(v));
	ck_assert_ptr_nonnull(pgdb_migration_name(pgdb_latest()));
	ck_assert_ptr_null(pgdb_migration_name(0));
	ck_assert_ptr_null(pgdb_migration_name(pgdb_latest() + 1));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pgdb");
	TCase *tc = tcase_create("pgdb");

	tcase_add_loop_test(tc, test_mask, 0,
			    (int)(sizeof(masks) / sizeof(masks[0])));
	tcase_add_test(tc, test_mask_short_buffer);
	tcase_add_test(tc, test_params_defaults);
	tcase_add_test(tc, test_params_kept);
	tcase_add_test(tc, test_params_uri);
	tcase_add_test(tc, test_params_bad);
	tcase_add_test(tc, test_connect_refused);
	tcase_add_test(tc, test_migrations);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
