// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_tcproute.c - the TCP routes of every source merged (tcproute.h):
 * the database's rows checked against the settings' listen addresses,
 * the file's routes and each other (refused, or giving way to the file:
 * counted apart), the limit, slots kept by a route while it lives and
 * not given again while a gone route's connections count on them, an
 * unchanged set of rows changing and counting nothing, and a reload's
 * environments with their undo. The listeners are the integration
 * tests' (tests/pg/test_edged_tcp_routes_pg.sh).
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "route_tcp.h"
#include "tcproute.h"
#include "unit.h"
#include "worker.h"

static struct config cfg;
static struct config_addr listen_v[1], tls_v[1];
static struct config_tcp_route file_v[2];
static char env_f[] = "fenv", sni_a[] = "a.test";
static struct worker_shared sh;

static void addr(const char *s, struct config_addr *a)
{
	struct errbuf e = {""};

	ck_assert_msg(config_addr_parse(s, a, &e) == 0, "%s", e.msg);
}

/* Settings: listen 127.0.0.1:8080, tls.listen 127.0.0.1:8444, admin
 * 127.0.0.1:9090; the file's routes 127.0.0.1:5000 (plain) and
 * 0.0.0.0:8443 sni a.test. */
static void setup(void)
{
	memset(&cfg, 0, sizeof(cfg));
	memset(&sh, 0, sizeof(sh));
	addr("127.0.0.1:8080", &listen_v[0]);
	cfg.listen = listen_v;
	cfg.n_listen = 1;
	addr("127.0.0.1:9090", &cfg.admin_listen);
	addr("127.0.0.1:8444", &tls_v[0]);
	cfg.tls.listen = tls_v;
	cfg.tls.n_listen = 1;
	memset(file_v, 0, sizeof(file_v));
	addr("127.0.0.1:5000", &file_v[0].listen);
	file_v[0].environment = env_f;
	addr("0.0.0.0:8443", &file_v[1].listen);
	file_v[1].environment = env_f;
	file_v[1].sni = sni_a;
	cfg.tcp_routes = file_v;
	cfg.n_tcp_routes = 2;
	sh.cfg = &cfg;
}

static struct tcproute_row row(int64_t id, const char *listen, const char *sni)
{
	struct tcproute_row r;

	memset(&r, 0, sizeof(r));
	r.id = id;
	snprintf(r.listen, sizeof(r.listen), "%s", listen);
	snprintf(r.sni, sizeof(r.sni), "%s", sni ? sni : "");
	snprintf(r.env_id, sizeof(r.env_id), "denv");
	return r;
}

/* The list's route (listen, sni), NULL when not in it. */
static const struct route_tcp *find(const struct tcproute *tr,
				    const char *listen, const char *sni)
{
	struct route_tcp_list l;
	const struct route_tcp *v; /* tr's */
	size_t i;

	tcproute_list(tr, &l);
	v = l.v;
	for (i = 0; i < l.n; i++)
		if (strcmp(v[i].listen, listen) == 0 &&
		    strcmp(v[i].sni, sni ? sni : "") == 0)
			return &v[i];
	return NULL;
}

/* The list is one the route table takes. */
static void table_takes(const struct tcproute *tr)
{
	struct route_tcp_list l;
	struct route_tcp_set *s;
	struct errbuf e = {""};

	tcproute_list(tr, &l);
	ck_assert_msg(route_tcp_set_new(l.v, l.n, &s, &e) == 0, "%s", e.msg);
	route_tcp_set_put(s);
}

START_TEST(test_merge)
{
	struct tcproute_row v[] = {
	    row(1, "127.0.0.1:6000", NULL),	/* ok */
	    row(2, "0.0.0.0:8443", "b.test"),	/* joins the file's */
	    row(3, "0.0.0.0:8443", "a.test"),	/* the file's: conflict */
	    row(4, "127.0.0.1:5000", NULL),	/* the file's: conflict */
	    row(5, "0.0.0.0:5000", NULL),	/* over the file's: conflict */
	    row(6, "127.0.0.1:8080", NULL),	/* listen[0]: refused */
	    row(7, "0.0.0.0:9090", NULL),	/* over admin: refused */
	    row(8, "127.0.0.1:6000", "x.test"), /* beside plain: refused */
	    row(9, "0.0.0.0:6000", NULL),	/* over row 1: refused */
	    row(10, "[::]:6000", NULL),		/* v6: ok */
	    row(11, "[::]:6000", NULL),		/* twice: refused */
	    row(12, "not an address", NULL),	/* refused */
	    row(13, "127.0.0.1:7000", "*.w.test") /* ok */
	};
	struct tcproute_counts c;
	struct tcproute *tr;
	const struct route_tcp *r;
	struct route_tcp_list l;

	ck_assert_int_eq(tcproute_new(&cfg, &sh, &tr), 0);
	tcproute_list(tr, &l);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_uint_eq(l.v[1].slot, 1);
	ck_assert_uint_eq(l.v[1].src, ROUTE_SRC_FILE);
	ck_assert_int_eq(tcproute_set_db(tr, v, 13, &c), 1);
	ck_assert_uint_eq(c.refused, 6);
	ck_assert_uint_eq(c.conflicts, 3);
	tcproute_list(tr, &l);
	ck_assert_uint_eq(l.n, 6);
	/* the file's first, then the database's by id */
	ck_assert_str_eq(l.v[0].listen, "127.0.0.1:5000");
	ck_assert_str_eq(l.v[2].listen, "127.0.0.1:6000");
	ck_assert_str_eq(l.v[3].sni, "b.test");
	ck_assert_str_eq(l.v[4].listen, "[::]:6000");
	ck_assert_str_eq(l.v[5].sni, "*.w.test");
	ck_assert_uint_eq(l.v[2].src, ROUTE_SRC_DB);
	ck_assert_str_eq(l.v[2].env_id, "denv");
	ck_assert_uint_eq(l.v[2].slot, 2);
	ck_assert_uint_eq(l.v[5].slot, 5);
	r = find(tr, "0.0.0.0:8443", "a.test");
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->src, ROUTE_SRC_FILE);
	table_takes(tr);
	tcproute_applied(tr, true);

	/* the same rows again: nothing changed, nothing counted */
	ck_assert_int_eq(tcproute_set_db(tr, v, 13, &c), 0);
	ck_assert_uint_eq(c.refused + c.conflicts, 0);
	/* ... unless the route writer did not take the last list */
	tcproute_applied(tr, false);
	ck_assert_int_eq(tcproute_set_db(tr, v, 13, &c), 1);
	tcproute_applied(tr, true);
	tcproute_free(tr);
}
END_TEST

/* The database's routes stay off the HTTPS addresses (tls.listen). */
START_TEST(test_tls_listen)
{
	struct tcproute_row v[] = {
	    row(1, "127.0.0.1:8444", NULL),   /* tls.listen[0]: refused */
	    row(2, "0.0.0.0:8444", "c.test"), /* over it: refused */
	    row(3, "127.0.0.1:8445", NULL),   /* ok */
	};
	struct tcproute_counts c;
	struct tcproute *tr;

	ck_assert_int_eq(tcproute_new(&cfg, &sh, &tr), 0);
	ck_assert_int_eq(tcproute_set_db(tr, v, 3, &c), 1);
	ck_assert_uint_eq(c.refused, 2);
	ck_assert_ptr_null(find(tr, "127.0.0.1:8444", NULL));
	ck_assert_ptr_nonnull(find(tr, "127.0.0.1:8445", NULL));
	tcproute_applied(tr, true);
	tcproute_free(tr);
}
END_TEST

/* proxy_protocol and send_proxy of the database's rows: carried into the
 * list; a row whose proxy_protocol is not its address's other routes'
 * refused (or, against the file's, left out), the first by id keeping
 * the address. */
START_TEST(test_proxy_protocol)
{
	struct tcproute_row v[] = {
	    row(1, "127.0.0.1:6000", NULL),	/* pp, send v2: ok */
	    row(2, "127.0.0.1:7000", "a.test"), /* pp: ok */
	    row(3, "127.0.0.1:7000", "b.test"), /* no pp: refused */
	    row(4, "0.0.0.0:8443", "c.test"),	/* pp vs the file's */
	    row(5, "127.0.0.1:7000", "d.test"), /* pp: ok */
	};
	struct tcproute_counts c;
	struct tcproute *tr;
	const struct route_tcp *r;

	v[0].proxy_protocol = true;
	v[0].send_proxy = CONFIG_SEND_PROXY_V2;
	v[1].proxy_protocol = true;
	v[3].proxy_protocol = true;
	v[4].proxy_protocol = true;
	ck_assert_int_eq(tcproute_new(&cfg, &sh, &tr), 0);
	ck_assert_int_eq(tcproute_set_db(tr, v, 5, &c), 1);
	ck_assert_uint_eq(c.refused, 1);
	ck_assert_uint_eq(c.conflicts, 1);
	r = find(tr, "127.0.0.1:6000", NULL);
	ck_assert_ptr_nonnull(r);
	ck_assert(r->proxy_protocol);
	ck_assert_int_eq(r->send_proxy, CONFIG_SEND_PROXY_V2);
	ck_assert_ptr_nonnull(find(tr, "127.0.0.1:7000", "a.test"));
	ck_assert_ptr_null(find(tr, "127.0.0.1:7000", "b.test"));
	ck_assert_ptr_null(find(tr, "0.0.0.0:8443", "c.test"));
	r = find(tr, "127.0.0.1:7000", "d.test");
	ck_assert_ptr_nonnull(r);
	ck_assert(r->proxy_protocol);
	ck_assert_int_eq(r->send_proxy, CONFIG_SEND_PROXY_INHERIT);
	r = find(tr, "127.0.0.1:5000", NULL); /* the file's */
	ck_assert(!r->proxy_protocol);
	table_takes(tr);
	tcproute_applied(tr, true);
	/* a change of proxy_protocol alone is a change */
	v[0].proxy_protocol = false;
	ck_assert_int_eq(tcproute_set_db(tr, v, 5, &c), 1);
	ck_assert(!find(tr, "127.0.0.1:6000", NULL)->proxy_protocol);
	tcproute_applied(tr, true);
	tcproute_free(tr);
}
END_TEST

/* A route keeps its slot while it lives; a new one takes the lowest free
 * slot on which no connection still counts. */
START_TEST(test_slots)
{
	struct tcproute_row v[3] = {row(1, "127.0.0.1:6000", NULL),
				    row(2, "127.0.0.1:6001", NULL),
				    row(3, "127.0.0.1:6002", NULL)};
	struct tcproute_counts c;
	struct tcproute *tr;

	ck_assert_int_eq(tcproute_new(&cfg, &sh, &tr), 0);
	ck_assert_int_eq(tcproute_set_db(tr, v, 3, &c), 1);
	ck_assert_uint_eq(find(tr, "127.0.0.1:6000", NULL)->slot, 2);
	ck_assert_uint_eq(find(tr, "127.0.0.1:6002", NULL)->slot, 4);
	/* 6000 goes with a connection still open on it, 6001 with none */
	atomic_store(&sh.tcp_open[2], 1);
	v[0] = row(4, "127.0.0.1:7000", NULL);
	v[1] = row(5, "127.0.0.1:7001", NULL);
	ck_assert_int_eq(tcproute_set_db(tr, v, 3, &c), 1);
	ck_assert_uint_eq(find(tr, "127.0.0.1:6002", NULL)->slot, 4);
	ck_assert_uint_eq(find(tr, "127.0.0.1:7000", NULL)->slot, 3);
	ck_assert_uint_eq(find(tr, "127.0.0.1:7001", NULL)->slot, 5);
	ck_assert_ptr_null(find(tr, "127.0.0.1:6000", NULL));
	table_takes(tr);
	tcproute_free(tr);
}
END_TEST

/* ROUTE_TCP_MAX in all, the file's first: the rows past it refused. */
START_TEST(test_limit)
{
	struct tcproute_row *v = calloc(ROUTE_TCP_MAX, sizeof(*v));
	struct tcproute_counts c;
	struct tcproute *tr;
	struct route_tcp_list l;
	char a[64];
	int i;

	ck_assert_ptr_nonnull(v);
	for (i = 0; i < ROUTE_TCP_MAX; i++) {
		snprintf(a, sizeof(a), "127.0.0.2:%d", 10000 + i);
		v[i] = row(i + 1, a, NULL);
	}
	ck_assert_int_eq(tcproute_new(&cfg, &sh, &tr), 0);
	ck_assert_int_eq(tcproute_set_db(tr, v, ROUTE_TCP_MAX, &c), 1);
	tcproute_list(tr, &l);
	ck_assert_uint_eq(l.n, ROUTE_TCP_MAX);
	ck_assert_uint_eq(c.refused, 2); /* the two files' routes' room */
	ck_assert_str_eq(l.v[ROUTE_TCP_MAX - 1].listen, "127.0.0.2:11021");
	table_takes(tr);
	tcproute_free(tr);
	free(v);
}
END_TEST

/* A reload: the file's routes take the environments the new file gives
 * their (listen, sni); one it no longer has keeps its own; undo gives
 * them back. Other addresses or names: the next start's. */
START_TEST(test_reload)
{
	struct config next = cfg;
	struct config_tcp_route nv[2];
	char e2[] = "fenv2";
	struct route_tcp *undo;
	struct tcproute *tr;

	ck_assert_int_eq(tcproute_new(&cfg, &sh, &tr), 0);
	memcpy(nv, file_v, sizeof(nv));
	nv[1].environment = e2;
	next.tcp_routes = nv;
	ck_assert(!tcproute_file_moved(tr, &next));
	ck_assert_int_eq(tcproute_reload(tr, &next, &undo), 0);
	ck_assert_str_eq(find(tr, "0.0.0.0:8443", "a.test")->env_id, "fenv2");
	ck_assert_str_eq(find(tr, "127.0.0.1:5000", NULL)->env_id, "fenv");
	tcproute_undo(tr, undo);
	ck_assert_str_eq(find(tr, "0.0.0.0:8443", "a.test")->env_id, "fenv");
	next.n_tcp_routes = 1; /* one route fewer */
	ck_assert(tcproute_file_moved(tr, &next));
	ck_assert_int_eq(tcproute_reload(tr, &next, &undo), 0);
	free(undo);
	ck_assert_str_eq(find(tr, "0.0.0.0:8443", "a.test")->env_id, "fenv");
	nv[1].sni = NULL; /* another name */
	next.n_tcp_routes = 2;
	ck_assert(tcproute_file_moved(tr, &next));
	tcproute_free(tr);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tcproute");
	TCase *tc = tcase_create("tcproute");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_merge);
	tcase_add_test(tc, test_slots);
	tcase_add_test(tc, test_tls_listen);
	tcase_add_test(tc, test_proxy_protocol);
	tcase_add_test(tc, test_limit);
	tcase_add_test(tc, test_reload);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
