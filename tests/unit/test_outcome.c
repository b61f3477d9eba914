/* SPDX-License-Identifier: BSD-2-Clause */
/* test_outcome.c - the outcome table and the JSON error bodies. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include <jansson.h>

#include "outcome.h"
#include "unit.h"

START_TEST(test_names_unique)
{
	unsigned i, j;
	enum outcome o;

	for (i = 0; i < OUTCOME_MAX; i++) {
		const char *n = outcome_name((enum outcome)i);

		ck_assert_uint_gt(strlen(n), 0);
		ck_assert_uint_gt(strlen(outcome_reason((enum outcome)i)), 0);
		for (j = 0; n[j]; j++)
			ck_assert(n[j] == '_' || (n[j] >= 'a' && n[j] <= 'z'));
		for (j = i + 1; j < OUTCOME_MAX; j++)
			ck_assert_str_ne(n, outcome_name((enum outcome)j));
		ck_assert_int_eq(outcome_from_name(n, &o), 0);
		ck_assert_int_eq(o, i);
	}
	ck_assert_int_eq(outcome_from_name("nope", &o), -ENOENT);
	ck_assert_str_eq(outcome_name(OUTCOME_MAX), "unknown");
	ck_assert_int_eq(outcome_status(OUTCOME_MAX), 0);
}
END_TEST

START_TEST(test_statuses)
{
	unsigned i;

	for (i = 0; i < OUTCOME_MAX; i++) {
		int s = outcome_status((enum outcome)i);

		ck_assert(s == 0 || (s >= 400 && s <= 599) ||
			  (i == OUTCOME_HTTPS_REDIRECT && s == 308) ||
			  (i == OUTCOME_REDIRECT && s == 301) ||
			  (i == OUTCOME_CHALLENGE_PASSED && s == 303) ||
			  (i == OUTCOME_AUTH_REDIRECT && s == 302) ||
			  (i == OUTCOME_ACME_CHALLENGE && s == 200));
		ck_assert(outcome_sends_error((enum outcome)i) == (s != 0));
	}
	ck_assert_int_eq(outcome_status(OUTCOME_OK), 0);
	ck_assert_int_eq(outcome_status(OUTCOME_CLIENT_CLOSED), 0);
	ck_assert_int_eq(outcome_status(OUTCOME_TUNNEL), 0);
	ck_assert_int_eq(outcome_status(OUTCOME_DOMAIN_NOT_FOUND), 503);
	ck_assert_int_eq(outcome_status(OUTCOME_ROUTE_NOT_FOUND), 404);
	ck_assert_int_eq(outcome_status(OUTCOME_PROJECT_DISABLED), 403);
	ck_assert_int_eq(outcome_status(OUTCOME_IP_DENIED), 403);
	ck_assert_int_eq(outcome_status(OUTCOME_RATE_LIMITED), 429);
	ck_assert_int_eq(outcome_status(OUTCOME_BODY_TOO_LARGE), 413);
	ck_assert_int_eq(outcome_status(OUTCOME_HEADER_TIMEOUT), 408);
	ck_assert_int_eq(outcome_status(OUTCOME_BAD_REQUEST), 400);
	ck_assert_int_eq(outcome_status(OUTCOME_URI_TOO_LONG), 414);
	ck_assert_int_eq(outcome_status(OUTCOME_HEADERS_TOO_LARGE), 431);
	ck_assert_int_eq(outcome_status(OUTCOME_NOT_IMPLEMENTED), 501);
	ck_assert_int_eq(outcome_status(OUTCOME_VERSION_NOT_SUPPORTED), 505);
	ck_assert_int_eq(outcome_status(OUTCOME_EXPECTATION_FAILED), 417);
	ck_assert_int_eq(outcome_status(OUTCOME_OVERLOADED), 503);
	ck_assert_int_eq(outcome_status(OUTCOME_WAKE_THROTTLED), 503);
	ck_assert_int_eq(outcome_status(OUTCOME_WAKE_PENDING), 503);
	ck_assert_int_eq(outcome_status(OUTCOME_UPSTREAM_UNAVAILABLE), 502);
	ck_assert_int_eq(outcome_status(OUTCOME_UPSTREAM_TIMEOUT), 504);
	ck_assert_int_eq(outcome_status(OUTCOME_UPSTREAM_BAD_RESPONSE), 502);
	ck_assert_int_eq(outcome_status(OUTCOME_SHUTTING_DOWN), 503);
	ck_assert_int_eq(outcome_status(OUTCOME_CONNECTION_LIMIT), 503);
	ck_assert_int_eq(outcome_status(OUTCOME_INTERNAL_ERROR), 500);
	ck_assert_int_eq(outcome_status(OUTCOME_BODY_TIMEOUT), 408);
	ck_assert_str_eq(outcome_name(OUTCOME_BODY_TIMEOUT), "body_timeout");
}
END_TEST

static void check_body(enum outcome o, const char *id)
{
	char buf[1024];
	json_error_t err;
	json_t *j;
	ssize_t n;

	n = outcome_error_body(o, id, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	ck_assert_uint_eq(strlen(buf), (size_t)n);
	j = json_loads(buf, 0, &err);
	ck_assert_msg(j != NULL, "%s: %s", buf, err.text);
	ck_assert_uint_eq(json_object_size(j), 3);
	ck_assert_str_eq(json_string_value(json_object_get(j, "error")),
			 outcome_name(o));
	ck_assert_str_eq(json_string_value(json_object_get(j, "message")),
			 outcome_reason(o));
	ck_assert_ptr_nonnull(
	    json_string_value(json_object_get(j, "request_id")));
	json_decref(j);
}

START_TEST(test_bodies)
{
	unsigned i;

	for (i = 0; i < OUTCOME_MAX; i++) {
		check_body((enum outcome)i, "abc-123");
		check_body((enum outcome)i, NULL);
	}
}
END_TEST

START_TEST(test_hostile_id)
{
	const char *id = "a\"b\\c\n\r\t\x01\x7f\xff\xc3\xa9}{\"x\":1";
	char buf[512];
	json_t *j;
	ssize_t n;

	n = outcome_error_body(OUTCOME_BAD_REQUEST, id, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	j = json_loads(buf, 0, NULL);
	ck_assert_ptr_nonnull(j);
	ck_assert_uint_eq(json_object_size(j), 3);
	ck_assert_str_eq(json_string_value(json_object_get(j, "request_id")),
			 "a\"b\\c\n\r\t\x01\xef\xbf\xbd\xef\xbf\xbd"
			 "\xef\xbf\xbd\xef\xbf\xbd}{\"x\":1");
	json_decref(j);
	ck_assert_str_eq(buf, "{\"error\":\"bad_request\",\"message\":\"the "
			      "request is malformed\",\"request_id\":\"a\\\"b"
			      "\\\\c\\u000a\\u000d\\u0009\\u0001\\ufffd\\ufffd"
			      "\\ufffd\\ufffd}{\\\"x\\\":1\"}");
}
END_TEST

START_TEST(test_enospc)
{
	char buf[256];
	ssize_t n, m;

	n = outcome_error_body(OUTCOME_OVERLOADED, "id", buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	/* exactly enough (with the NUL) fits, one byte less does not */
	memset(buf, 'x', sizeof(buf));
	m = outcome_error_body(OUTCOME_OVERLOADED, "id", buf, (size_t)n + 1);
	ck_assert_int_eq(m, n);
	ck_assert_int_eq(buf[n], '\0');
	ck_assert_int_eq(buf[n + 1], 'x');
	m = outcome_error_body(OUTCOME_OVERLOADED, "id", buf, (size_t)n);
	ck_assert_int_eq(m, -ENOSPC);
	ck_assert_str_eq(buf, "");
	ck_assert_int_eq(outcome_error_body(OUTCOME_OVERLOADED, "id", NULL, 0),
			 -ENOSPC);
}
END_TEST

static Suite *outcome_suite(void)
{
	Suite *s = suite_create("outcome");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_names_unique);
	tcase_add_test(tc, test_statuses);
	tcase_add_test(tc, test_bodies);
	tcase_add_test(tc, test_hostile_id);
	tcase_add_test(tc, test_enospc);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(outcome_suite());
}
