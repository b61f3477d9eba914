/* SPDX-License-Identifier: BSD-2-Clause */
/* test_upreg.c - the process-wide endpoint registry seen through two
 * workers' upstream states: one entry per address, admin states (drain,
 * disabled) applied to every worker's selection and pools, ejections
 * counted once, in-flight summed, bounds, the rendered series, the last
 * failure, and the failures' log limit per endpoint and reason. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <event2/buffer.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "upreg.h"
#include "upstream_ctl.h"
#include "upstream.h"
#include "unit.h"

#define SEC 1000000000ULL
#define T0 (1000 * SEC)

static struct config_addr addr(unsigned host, unsigned port)
{
	struct config_addr a;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&a.ss;

	memset(&a, 0, sizeof(a));
	s4->sin_family = AF_INET;
	s4->sin_port = htons((uint16_t)port);
	s4->sin_addr.s_addr = htonl(0x0a000000u | host);
	a.len = sizeof(*s4);
	snprintf(a.text, sizeof(a.text), "10.%u.%u.%u:%u", (host >> 16) & 255,
		 (host >> 8) & 255, host & 255, port);
	return a;
}

static struct upreg *g;
static struct upstream_worker *w1, *w2;
static struct config_addr eps[2];

static void setup(void)
{
	g = upreg_new();
	ck_assert_ptr_nonnull(g);
	ck_assert_int_eq(upstream_worker_new(&w1), 0);
	ck_assert_int_eq(upstream_worker_new(&w2), 0);
	upstream_worker_set_registry(w1, g);
	upstream_worker_set_registry(w2, g);
	eps[0] = addr(1, 80);
	eps[1] = addr(2, 80);
}

static void teardown(void)
{
	upstream_worker_free(w1);
	upstream_worker_free(w2);
	upreg_free(g);
}

static struct upstream_ep *pick(struct upstream_worker *w, size_t n)
{
	struct upstream_ep *ep = NULL;

	ck_assert_int_eq(upstream_select(w, 1, 0, eps, n,
					 CONFIG_BALANCE_ROUND_ROBIN, NULL, T0,
					 NULL, 0, &ep),
			 0);
	return ep;
}

/* Two workers and two routes' worth of selections: one entry each. */
START_TEST(test_one_entry_per_endpoint)
{
	struct upstream_ep *a = pick(w1, 2), *b = pick(w2, 2);

	ck_assert_uint_eq(upreg_count(g), 2);
	pick(w1, 2);
	pick(w2, 2);
	ck_assert_uint_eq(upreg_count(g), 2);
	ck_assert_ptr_nonnull(upstream_ep_shared(a));
	/* the same address in two workers: the same entry */
	ck_assert_ptr_eq(upstream_ep_shared(a), upstream_ep_shared(b));
	upstream_inflight_add(a, 1);
	upstream_inflight_add(b, 1);
	ck_assert_uint_eq(atomic_load(&upstream_ep_shared(a)->inflight), 2);
	upstream_inflight_add(a, -1);
	upstream_inflight_add(a, -1); /* floored per worker: no underflow */
	ck_assert_uint_eq(atomic_load(&upstream_ep_shared(a)->inflight), 1);
	/* a worker going away puts its references and its in-flight */
	upstream_worker_free(w2);
	w2 = NULL;
	ck_assert_uint_eq(atomic_load(&upstream_ep_shared(a)->inflight), 0);
	ck_assert_uint_eq(upreg_count(g), 2);
	upstream_worker_free(w1);
	w1 = NULL;
	ck_assert_uint_eq(upreg_count(g), 0);
}
END_TEST

/* drain: no worker chooses it while another is available; in panic mode
 * it still may be; disabled never is. */
START_TEST(test_admin_states)
{
	struct upstream_ep *ep = NULL;
	enum upreg_admin old;
	int i;

	pick(w1, 2);
	ck_assert_int_eq(upreg_set_admin(g, &eps[0], UPREG_DRAIN, &old), 0);
	ck_assert_int_eq(old, UPREG_ENABLED);
	for (i = 0; i < 10; i++) {
		ck_assert_str_eq(upstream_ep_addr(pick(w1, 2))->text,
				 eps[1].text);
		ck_assert_str_eq(upstream_ep_addr(pick(w2, 2))->text,
				 eps[1].text);
	}
	/* alone, drained: chosen in panic mode rather than failing */
	ck_assert_str_eq(upstream_ep_addr(pick(w2, 1))->text, eps[0].text);
	ck_assert_int_eq(upreg_set_admin(g, &eps[0], UPREG_DISABLED, &old), 0);
	ck_assert_int_eq(old, UPREG_DRAIN);
	ck_assert_int_eq(upstream_select(w2, 1, 0, eps, 1,
					 CONFIG_BALANCE_ROUND_ROBIN, NULL, T0,
					 NULL, 0, &ep),
			 -EHOSTUNREACH);
	ck_assert_int_eq(upreg_set_admin(g, &eps[0], UPREG_ENABLED, &old), 0);
	ck_assert_int_eq(old, UPREG_DISABLED);
	for (i = 0; i < 4; i++)
		if (strcmp(upstream_ep_addr(pick(w1, 2))->text, eps[0].text) ==
		    0)
			break;
	ck_assert_int_lt(i, 4);
}
END_TEST

/* A drained endpoint's pool: what is given is closed, what was idle is
 * closed by take and by expire. */
START_TEST(test_drain_closes_pool)
{
	struct upstream_ep *ep = pick(w1, 1);
	int sv[2], sv2[2];
	char b;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv2), 0);
	upstream_pool_give(w1, ep, sv[0], T0);
	ck_assert_int_eq(upreg_set_admin(g, &eps[0], UPREG_DRAIN, NULL), 0);
	upstream_pool_expire(w1, T0 + 1);
	/* the pooled end was closed: its peer reads EOF */
	ck_assert_int_eq(read(sv[1], &b, 1), 0);
	upstream_pool_give(w1, ep, sv2[0], T0);
	ck_assert_int_eq(read(sv2[1], &b, 1), 0);
	ck_assert_int_eq(upstream_pool_take(w1, ep, T0 + 2), -1);
	close(sv[1]);
	close(sv2[1]);
}
END_TEST

/* Passive health: ejected by both workers, logged and counted once; back
 * only when no worker has it ejected any more. */
START_TEST(test_ejection_once)
{
	struct upstream_ep *a, *b;
	struct upreg_ep *e;
	char buf[UPREG_WHY_STR_MAX];
	int i;

	a = pick(w1, 1);
	b = pick(w2, 1);
	e = upstream_ep_shared(a);
	ck_assert_str_eq(upreg_health(e), "healthy");
	for (i = 0; i < 3; i++)
		upstream_report_why(w1, a, false, T0, UPREG_WHY_CONNECT,
				    ECONNREFUSED);
	ck_assert_str_eq(upreg_health(e), "ejected");
	ck_assert_uint_eq(atomic_load(&e->ejections), 1);
	for (i = 0; i < 3; i++)
		upstream_report_why(w2, b, false, T0, UPREG_WHY_CONNECT_TIMEOUT,
				    0);
	ck_assert_uint_eq(atomic_load(&e->ejections), 1);
	ck_assert_uint_eq(atomic_load(&e->ejected_by), 2);
	ck_assert_uint_eq(atomic_load(&e->connect_errors), 6);
	ck_assert_pstr_eq(upreg_last_error(e, buf, sizeof(buf)),
			  "connect timed out");
	/* a half-open failure in w1: the same ejection, not a new one */
	upstream_report(w1, a, false, T0 + 11 * SEC);
	ck_assert_uint_eq(atomic_load(&e->ejections), 1);
	upstream_report(w1, a, true, T0 + 40 * SEC);
	ck_assert_str_eq(upreg_health(e), "ejected");
	upstream_report(w2, b, true, T0 + 40 * SEC);
	ck_assert_str_eq(upreg_health(e), "healthy");
	ck_assert_uint_eq(atomic_load(&e->ejected_by), 0);
	/* a success while healthy does not underflow it */
	upstream_report(w2, b, true, T0 + 41 * SEC);
	ck_assert_uint_eq(atomic_load(&e->ejected_by), 0);
}
END_TEST

/* An admin state outlives the workers' references (a reload's new
 * endpoints find it); enable lets the entry go. */
START_TEST(test_admin_outlives_refs)
{
	struct upstream_ep *ep;

	pick(w1, 1);
	ck_assert_int_eq(upreg_set_admin(g, &eps[0], UPREG_DRAIN, NULL), 0);
	upstream_worker_free(w1);
	w1 = NULL;
	ck_assert_uint_eq(upreg_count(g), 1);
	ck_assert(upreg_known(g, &eps[0]));
	ep = pick(w2, 1);
	ck_assert_int_eq(upreg_admin_of(upstream_ep_shared(ep)), UPREG_DRAIN);
	upstream_worker_free(w2);
	w2 = NULL;
	ck_assert_int_eq(upreg_set_admin(g, &eps[0], UPREG_ENABLED, NULL), 0);
	ck_assert_uint_eq(upreg_count(g), 0);
	ck_assert(!upreg_known(g, &eps[0]));
	/* draining an endpoint no worker has met creates its entry */
	ck_assert_int_eq(upreg_set_admin(g, &eps[1], UPREG_DISABLED, NULL), 0);
	ck_assert(upreg_known(g, &eps[1]));
}
END_TEST

/* At most UPREG_MAX entries: past it no shared state, counted. */
START_TEST(test_bounded)
{
	struct upreg_ep **e = calloc(UPREG_MAX, sizeof(*e));
	struct config_addr a;
	unsigned i;

	ck_assert_ptr_nonnull(e);
	for (i = 0; i < UPREG_MAX; i++) {
		a = addr(100 + i, 80);
		e[i] = upreg_get(g, &a);
		ck_assert_ptr_nonnull(e[i]);
	}
	a = addr(100 + UPREG_MAX, 80);
	ck_assert_ptr_null(upreg_get(g, &a));
	ck_assert_uint_eq(upreg_full(g), 1);
	ck_assert_int_eq(upreg_set_admin(g, &a, UPREG_DRAIN, NULL), -ENOSPC);
	for (i = 0; i < UPREG_MAX; i++)
		upreg_put(g, e[i]);
	ck_assert_uint_eq(upreg_count(g), 0);
	free(e);
}
END_TEST

/* The rendered families: one series per endpoint, labelled. */
START_TEST(test_render)
{
	struct evbuffer *out = evbuffer_new();
	struct upstream_ep *a = pick(w1, 1);
	struct upreg_ep *e = upstream_ep_shared(a);
	char *text;
	size_t n;

	upreg_count_request(e);
	upreg_count_request(e);
	upreg_count_response(e, 503, 3000000);
	upreg_count_connect(e, 2000000);
	upreg_count_bytes(e, 10, 20);
	ck_assert_int_eq(upreg_render(g, out), 0);
	n = evbuffer_get_length(out);
	text = calloc(1, n + 1);
	evbuffer_remove(out, text, n);
	ck_assert_ptr_nonnull(strstr(
	    text, "edge_upstream_endpoint_requests_total{endpoint=\"10.0.0.1:"
		  "80\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(
	    text, "edge_upstream_endpoint_responses_total{endpoint=\"10.0.0.1:"
		  "80\",class=\"5xx\"} 1\n"));
	ck_assert_ptr_nonnull(
	    strstr(text, "edge_upstream_endpoint_response_seconds_bucket{"
			 "endpoint=\"10.0.0.1:80\",le=\"0.005\"} 1\n"));
	ck_assert_ptr_nonnull(
	    strstr(text, "edge_upstream_endpoint_connect_seconds_sum{"
			 "endpoint=\"10.0.0.1:80\"} 0.002\n"));
	ck_assert_ptr_nonnull(strstr(
	    text, "edge_upstream_endpoint_bytes_total{endpoint=\"10.0.0.1:"
		  "80\",direction=\"received\"} 20\n"));
	ck_assert_ptr_nonnull(strstr(
	    text, "edge_upstream_endpoint_admin_state{endpoint=\"10.0.0.1:"
		  "80\",state=\"enabled\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(
	    text, "edge_upstream_endpoint_healthy{endpoint=\"10.0.0.1:80\"} "
		  "1\n"));
	/* one HELP per family */
	ck_assert_ptr_null(strstr(
	    strstr(text, "# HELP edge_upstream_endpoint_requests_total") + 1,
	    "# HELP edge_upstream_endpoint_requests_total"));
	free(text);
	evbuffer_free(out);
}
END_TEST

/* Run fn with stderr going to a file; what it wrote, NUL-terminated (free
 * it). */
static char *capture(void (*fn)(void))
{
	char path[] = "/tmp/edge-upreg-log.XXXXXX", *buf;
	int fd = mkstemp(path), saved = dup(STDERR_FILENO);
	off_t n;

	ck_assert_int_ge(fd, 0);
	unlink(path);
	fflush(stderr);
	dup2(fd, STDERR_FILENO);
	fn();
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	n = lseek(fd, 0, SEEK_END);
	buf = calloc(1, (size_t)n + 1);
	ck_assert_int_eq(pread(fd, buf, (size_t)n, 0), n);
	close(fd);
	return buf;
}

static size_t said;
static void say_held(void)
{
	said = upreg_log_held(g);
}

static struct upreg_ep *gone;
static void put_gone(void)
{
	upreg_put(g, gone);
}

/* Failures' lines: one a second per endpoint and reason, whichever
 * worker, the count held back said by upreg_log_held once the second is
 * over (and not before, nor twice); an entry freed says what it held. */
START_TEST(test_failure_log_limit)
{
	struct upreg_ep *a = upstream_ep_shared(pick(w1, 1));
	struct upreg_ep *b, *c;
	struct config_addr third = addr(3, 80);
	uint64_t held = 99;
	char *out;
	int i;

	b = upstream_ep_shared(pick(w2, 2));
	b = upstream_ep_shared(pick(w2, 2)); /* round robin: the other */
	ck_assert_ptr_ne(a, b);
	ck_assert(upreg_log_allow(a, UPREG_WHY_CONNECT, &held));
	ck_assert_uint_eq(held, 0);
	for (i = 0; i < 49; i++)
		ck_assert(!upreg_log_allow(a, UPREG_WHY_CONNECT, &held));
	/* another reason, another endpoint: lines of their own */
	ck_assert(upreg_log_allow(a, UPREG_WHY_BAD_RESPONSE, &held));
	ck_assert(upreg_log_allow(b, UPREG_WHY_CONNECT, &held));
	ck_assert(!upreg_log_allow(b, UPREG_WHY_CONNECT, &held));
	/* the second is not over: nothing said yet */
	out = capture(say_held);
	ck_assert_uint_eq(said, 0);
	ck_assert_str_eq(out, "");
	free(out);
	usleep(1100 * 1000);
	out = capture(say_held);
	ck_assert_uint_eq(said, 2);
	ck_assert_msg(strstr(out, "upstream 10.0.0.1:80: connect failed, and "
				  "more held back (49 suppressed)\n"),
		      "%s", out);
	ck_assert_msg(strstr(out, "upstream 10.0.0.2:80: connect failed, and "
				  "more held back (1 suppressed)\n"),
		      "%s", out);
	free(out);
	/* said once; and that line took the second's place */
	out = capture(say_held);
	ck_assert_uint_eq(said, 0);
	free(out);
	ck_assert(!upreg_log_allow(a, UPREG_WHY_CONNECT, &held));
	/* an entry that goes away says what it held back */
	c = upreg_get(g, &third);
	ck_assert(upreg_log_allow(c, UPREG_WHY_RESPONSE_TIMEOUT, &held));
	for (i = 0; i < 3; i++)
		ck_assert(
		    !upreg_log_allow(c, UPREG_WHY_RESPONSE_TIMEOUT, &held));
	ck_assert_uint_eq(upreg_count(g), 3);
	gone = c;
	out = capture(put_gone);
	ck_assert_uint_eq(upreg_count(g), 2);
	ck_assert_str_eq(out, "edge: upstream 10.0.0.3:80: no response head "
			      "in time, and more held back (3 suppressed)\n");
	free(out);
	/* a full registry's endpoints (NULL) share one limit */
	ck_assert(upreg_log_allow(NULL, UPREG_WHY_CONNECT, &held));
}
END_TEST

/* The last failure: its reason with the errno's text, when and how long
 * ago, in the list's JSON; none before the first. */
START_TEST(test_last_failure)
{
	struct upreg_ep *e = upstream_ep_shared(pick(w1, 1));
	json_t *all, *o;
	char buf[UPREG_WHY_STR_MAX];
	time_t now;

	ck_assert_ptr_null(upreg_last_error(e, buf, sizeof(buf)));
	all = upreg_dump_json(g);
	o = json_object_get(all, "10.0.0.1:80");
	ck_assert(json_is_null(json_object_get(o, "last_error")));
	ck_assert(json_is_null(json_object_get(o, "last_error_age")));
	ck_assert_int_eq(
	    json_integer_value(json_object_get(o, "last_error_at")), 0);
	json_decref(all);
	now = time(NULL);
	upstream_report_why(w1, pick(w1, 1), false, T0, UPREG_WHY_CONNECT,
			    ECONNREFUSED);
	ck_assert_str_eq(upreg_last_error(e, buf, sizeof(buf)),
			 "connect failed: Connection refused");
	ck_assert_uint_eq(atomic_load(&e->connect_errors), 1);
	ck_assert_uint_eq(atomic_load(&e->failures), 1);
	all = upreg_dump_json(g);
	o = json_object_get(all, "10.0.0.1:80");
	ck_assert_str_eq(json_string_value(json_object_get(o, "last_error")),
			 "connect failed: Connection refused");
	ck_assert_int_le(
	    json_integer_value(json_object_get(o, "last_error_age")), 1);
	ck_assert_int_ge(
	    json_integer_value(json_object_get(o, "last_error_at")), now);
	json_decref(all);
	/* a body's failure: the last failure, not a passive-health one */
	upreg_set_failure(e, UPREG_WHY_BODY_CLOSED, 0);
	ck_assert_str_eq(upreg_last_error(e, buf, sizeof(buf)),
			 "closed before the end of the response body");
	ck_assert_uint_eq(atomic_load(&e->failures), 1);
	ck_assert_str_eq(
	    upreg_why_format(UPREG_WHY_CLOSED, ECONNRESET, buf, sizeof(buf)),
	    "closed without a response head: Connection reset by "
	    "peer");
}
END_TEST

/* edgectl upstream drain with a hostile endpoint: a short message that
 * quotes the endpoint once (cut), whatever its length. */
START_TEST(test_ctl_bad_endpoint_message)
{
	static char huge[5000];
	const char *bad[] = {huge,
			     "",
			     "1.2.3.4",
			     "[::1]",
			     "1.2.3.4:0",
			     "[fe80::1%eth0]:80",
			     "host.example:80"};
	struct errbuf err;
	json_t *req, *res;
	bool changed;
	size_t i;

	memset(huge, 'x', sizeof(huge) - 3);
	memcpy(huge + sizeof(huge) - 3, ":1", 3);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err.msg[0] = '\0';
		req = json_pack("{s:s,s:s}", "action", "drain", "endpoint",
				bad[i]);
		ck_assert_int_eq(
		    upstream_ctl(g, NULL, req, &res, &changed, &err), -EINVAL);
		ck_assert_ptr_null(res);
		ck_assert_msg(
		    strncmp(err.msg, "upstream drain: bad endpoint", 28) == 0,
		    "%s", err.msg);
		ck_assert_msg(strlen(err.msg) < 200, "%zu bytes: %s",
			      strlen(err.msg), err.msg);
		json_decref(req);
	}
}
END_TEST

static Suite *upreg_suite(void)
{
	Suite *s = suite_create("upreg");
	TCase *tc = tcase_create("registry");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_one_entry_per_endpoint);
	tcase_add_test(tc, test_admin_states);
	tcase_add_test(tc, test_drain_closes_pool);
	tcase_add_test(tc, test_ejection_once);
	tcase_add_test(tc, test_admin_outlives_refs);
	tcase_add_test(tc, test_bounded);
	tcase_add_test(tc, test_render);
	tcase_add_test(tc, test_failure_log_limit);
	tcase_add_test(tc, test_last_failure);
	tcase_add_test(tc, test_ctl_bad_endpoint_message);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(upreg_suite());
}
