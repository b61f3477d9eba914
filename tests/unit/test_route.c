/* SPDX-License-Identifier: BSD-2-Clause */
/* test_route.c - Resolve: exact and wildcard domains, path prefixes,
 * normalisation of Host, disabled projects, IP rules, generations. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "route.h"
#include "route_src_fixture.h"
#include "unit.h"

static const char conf_text[] =
    "limits = { max_inflight_per_route = 2; };\n"
    "projects = ( {\n"
    "  id = \"shop\";\n"
    "  ip_block = [ \"203.0.113.0/24\", \"2001:db8:bad::/48\" ];\n"
    "  ip_allow = [ \"203.0.113.7\" ];\n"
    "  environments = ( {\n"
    "    id = \"prod\"; name = \"production\";\n"
    "    domains = [ \"shop.example.com\", \"www.shop.example.com\" ];\n"
    "    deployment = { id = \"d1\"; upstreams = [ \"10.0.0.1:80\" ]; };\n"
    "    routes = ( { prefix = \"/fn\"; strip_prefix = true;\n"
    "                 upstreams = [ \"10.0.0.9:81\" ]; balance = \"ip_hash\";\n"
    "                 max_body_bytes = 5; },\n"
    "               { prefix = \"/fn/deep\"; },\n"
    "               { prefix = \"/api\"; } );\n"
    "  }, {\n"
    "    id = \"preview\";\n"
    "    domains = [ \"*.preview.example.com\" ];\n"
    "    deployment = { id = \"d2\"; upstreams = [ \"[fd00::1]:80\" ]; };\n"
    "  } );\n"
    "}, {\n"
    "  id = \"blog\";\n"
    "  ip_allow = [ \"198.51.100.0/24\" ];\n"
    "  environments = ( { id = \"blog-prod\";\n"
    "    domains = [ \"blog.example.com\", \"x.preview.example.com\" ];\n"
    "    deployment = { id = \"d3\"; upstreams = [ \"10.0.0.3:80\" ]; };\n"
    "  } );\n"
    "}, {\n"
    "  id = \"old\"; enabled = false;\n"
    "  environments = ( { id = \"old-prod\";\n"
    "    domains = [ \"old.example.com\" ];\n"
    "    deployment = { id = \"d4\"; upstreams = [ \"10.0.0.4:80\" ]; };\n"
    "  } );\n"
    "} );\n";

static struct route_table *tab;

static struct route_table *build(void)
{
	char dir[] = "/tmp/edge-route.XXXXXX", path[64];
	struct errbuf err = {""};
	struct route_table *t = NULL;
	struct route_defaults def;
	struct route_src *src = NULL;
	struct config *c = NULL;
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/edge.conf", dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(conf_text, f);
	fclose(f);
	ck_assert_msg(config_load(path, &c, &src, &err) == 0, "%s", err.msg);
	unlink(path);
	rmdir(dir);
	config_route_defaults(c, &def);
	ck_assert_int_eq(
	    route_table_build((const struct route_src *const *)&src, 1, &def,
			      &t, &err),
	    0);
	config_free(c);
	route_src_free(src); /* the table keeps its own copy */
	return t;
}

static void setup(void)
{
	tab = build();
}

static void teardown(void)
{
	route_table_put(tab);
	tab = NULL;
}

static enum route_status look(const char *host, const char *path,
			      struct route_match *m)
{
	return route_lookup(tab, host, strlen(host), path, strlen(path), m);
}

struct host_case {
	const char *host;
	enum route_status st;
	const char *env;
};

static const struct host_case hosts[] = {
    {"shop.example.com", ROUTE_OK, "prod"},
    {"SHOP.Example.COM", ROUTE_OK, "prod"},
    {"shop.example.com:8080", ROUTE_OK, "prod"},
    {"shop.example.com.", ROUTE_OK, "prod"},
    {"Shop.Example.Com.:443", ROUTE_OK, "prod"},
    {"www.shop.example.com", ROUTE_OK, "prod"},
    {"a.preview.example.com", ROUTE_OK, "preview"},
    {"PR-17.Preview.example.com", ROUTE_OK, "preview"},
    /* an exact domain wins over the wildcard */
    {"x.preview.example.com", ROUTE_OK, "blog-prod"},
    {"a.b.preview.example.com", ROUTE_DOMAIN_NOT_FOUND, NULL},
    {"preview.example.com", ROUTE_DOMAIN_NOT_FOUND, NULL},
    {".preview.example.com", ROUTE_DOMAIN_NOT_FOUND, NULL},
    {"example.com", ROUTE_DOMAIN_NOT_FOUND, NULL},
    {"nope.example.org", ROUTE_DOMAIN_NOT_FOUND, NULL},
    {"", ROUTE_DOMAIN_NOT_FOUND, NULL},
    {"[::1]:8080", ROUTE_DOMAIN_NOT_FOUND, NULL},
    {"10.0.0.1", ROUTE_DOMAIN_NOT_FOUND, NULL},
    {"old.example.com", ROUTE_PROJECT_DISABLED, "old-prod"},
};

START_TEST(test_hosts)
{
	const struct host_case *c = &hosts[_i];
	struct route_match m;

	ck_assert_int_eq(look(c->host, "/", &m), c->st);
	if (c->env)
		ck_assert_str_eq(m.env_id, c->env);
}
END_TEST

START_TEST(test_match_fields)
{
	struct route_match m;

	ck_assert_int_eq(look("shop.example.com", "/x?y", &m), ROUTE_OK);
	ck_assert_str_eq(m.project_id, "shop");
	ck_assert_str_eq(m.project_name, "shop");
	ck_assert_str_eq(m.env_name, "production");
	ck_assert_str_eq(m.deployment_id, "d1");
	ck_assert_ptr_null(m.prefix);
	ck_assert_uint_eq(m.n_upstreams, 1);
	ck_assert_str_eq(m.upstreams[0].text, "10.0.0.1:80");
	ck_assert_int_eq(m.balance, CONFIG_BALANCE_ROUND_ROBIN);
	ck_assert_uint_eq(m.max_body_bytes, 10 << 20);
	ck_assert(m.security->nosniff);
	ck_assert_uint_eq(m.path_len, 4);
	ck_assert(!m.path_slash);
	ck_assert_int_eq(look("old.example.com", "/", &m),
			 ROUTE_PROJECT_DISABLED);
	ck_assert_str_eq(m.project_id, "old");
}
END_TEST

struct path_case {
	const char *path;
	const char *prefix; /* NULL: default route */
	const char *sent;   /* the target sent upstream */
};

static const struct path_case paths[] = {
    {"/", NULL, "/"},
    {"/fn", "/fn", "/"},
    {"/fn/", "/fn", "/"},
    {"/fn/x/y", "/fn", "/x/y"},
    {"/fn?q=1", "/fn", "/?q=1"},
    {"/fn/x?q=/fn", "/fn", "/x?q=/fn"},
    {"/fnx", NULL, "/fnx"},
    {"/fn-other", NULL, "/fn-other"},
    {"/FN", NULL, "/FN"},
    {"/fn/deep", "/fn/deep", "/fn/deep"},
    {"/fn/deeper", "/fn", "/deeper"},
    {"/fn/deep/1", "/fn/deep", "/fn/deep/1"},
    {"/api", "/api", "/api"},
    {"/api#frag", "/api", "/api#frag"},
    {"/ap", NULL, "/ap"},
    {"/x/fn", NULL, "/x/fn"},
    {"*", NULL, "*"},
};

START_TEST(test_paths)
{
	const struct path_case *c = &paths[_i];
	struct route_match m;
	char sent[128];

	ck_assert_int_eq(look("shop.example.com", c->path, &m), ROUTE_OK);
	if (c->prefix)
		ck_assert_str_eq(m.prefix, c->prefix);
	else
		ck_assert_ptr_null(m.prefix);
	snprintf(sent, sizeof(sent), "%s%.*s", m.path_slash ? "/" : "",
		 (int)m.path_len, m.path);
	ck_assert_str_eq(sent, c->sent);
}
END_TEST

START_TEST(test_route_overrides)
{
	struct route_match m, d;

	ck_assert_int_eq(look("shop.example.com", "/fn/a", &m), ROUTE_OK);
	ck_assert_str_eq(m.upstreams[0].text, "10.0.0.9:81");
	ck_assert_int_eq(m.balance, CONFIG_BALANCE_IP_HASH);
	ck_assert_uint_eq(m.max_body_bytes, 5);
	ck_assert_int_eq(look("shop.example.com", "/", &d), ROUTE_OK);
	ck_assert_uint_ne(m.route_key, d.route_key);
	ck_assert_uint_ne(m.route_key, 0);
	ck_assert_ptr_ne(m.inflight, d.inflight);
	ck_assert_uint_eq(route_table_nroutes(tab), 7);
	/* per-route cap from limits.max_inflight_per_route */
	ck_assert_int_eq(admit_inflight_enter(NULL, m.inflight), 0);
	ck_assert_int_eq(admit_inflight_enter(NULL, m.inflight), 0);
	ck_assert_int_eq(admit_inflight_enter(NULL, m.inflight), -EBUSY);
	ck_assert_int_eq(admit_inflight_enter(NULL, d.inflight), 0);
	admit_inflight_leave(NULL, m.inflight);
	admit_inflight_leave(NULL, m.inflight);
	admit_inflight_leave(NULL, d.inflight);
}
END_TEST

static bool allowed(const char *host, const char *ip)
{
	struct route_match m;
	struct cidr a;

	ck_assert_int_eq(look(host, "/", &m), ROUTE_OK);
	ck_assert_int_eq(cidr_parse_addr(ip, &a, NULL), 0);
	return route_ip_allowed(&m, &a);
}

START_TEST(test_ip_rules)
{
	/* block list with one allowed host inside it */
	ck_assert(allowed("shop.example.com", "192.0.2.1"));
	ck_assert(!allowed("shop.example.com", "203.0.113.8"));
	ck_assert(allowed("shop.example.com", "203.0.113.7"));
	ck_assert(!allowed("a.preview.example.com", "2001:db8:bad::1"));
	ck_assert(allowed("a.preview.example.com", "2001:db8:bae::1"));
	ck_assert(allowed("shop.example.com", "::ffff:192.0.2.1"));
	/* an allow list admits only its prefixes */
	ck_assert(allowed("blog.example.com", "198.51.100.20"));
	ck_assert(!allowed("blog.example.com", "192.0.2.1"));
	ck_assert(!allowed("blog.example.com", "2001:db8::1"));
}
END_TEST

START_TEST(test_refcount_swap)
{
	struct route_holder h;
	struct route_table *req, *t2, *cur;
	struct route_match m;

	route_holder_init(&h, route_table_get(tab));
	/* a request holds the first generation */
	req = route_table_current(&h);
	ck_assert_ptr_eq(req, tab);
	t2 = build();
	ck_assert_uint_gt(route_table_generation(t2),
			  route_table_generation(tab));
	route_table_swap(&h, t2);
	/* the fixture's reference and the request's keep it alive */
	route_table_put(tab);
	tab = NULL;
	ck_assert_int_eq(route_lookup(req, "shop.example.com", 16, "/", 1, &m),
			 ROUTE_OK);
	ck_assert_str_eq(m.env_id, "prod");
	cur = route_table_current(&h);
	ck_assert_ptr_eq(cur, t2);
	route_table_put(cur);
	route_table_put(req); /* freed here: ASan tells if not, or twice */
	tab = route_table_current(&h);
	route_holder_clear(&h);
	ck_assert_ptr_null(route_table_current(&h));
	route_table_put(NULL);
	ck_assert_ptr_null(route_table_get(NULL));
}
END_TEST

START_TEST(test_dump_json)
{
	json_t *j = route_dump_json(tab), *routes, *r;
	char *s;

	ck_assert_ptr_nonnull(j);
	routes = json_object_get(j, "routes");
	/* 2 domains x 4 routes, 1 wildcard, 2 blog, 1 old */
	ck_assert_uint_eq(json_array_size(routes), 12);
	r = json_array_get(routes, 0);
	ck_assert_str_eq(json_string_value(json_object_get(r, "domain")),
			 "*.preview.example.com");
	s = json_dumps(j, JSON_COMPACT);
	ck_assert_ptr_nonnull(
	    strstr(s, "\"domain\":\"shop.example.com\",\"prefix\":\"/fn\""));
	ck_assert_ptr_nonnull(strstr(s, "\"upstreams\":[\"[fd00::1]:80\"]"));
	free(s);
	json_decref(j);
}
END_TEST

/* What a source leaves to the settings comes from the defaults the
 * table is built with: the body limit of an environment (and its routes)
 * that set none, every route's in-flight cap. */
START_TEST(test_defaults)
{
	struct errbuf err = {""};
	struct route_src *one = fx_src();
	const struct route_src *srcs[1] = {one};
	struct route_defaults def = {123, 1};
	struct route_src_env *env;
	struct route_table *t = NULL;
	struct route_match m;

	env = fx_env(fx_project(one, "p"), "e", "10.0.0.1:80", "d.test", NULL);
	fx_route(env, "/own", 5);
	fx_route(env, "/env", ROUTE_SRC_INHERIT);
	ck_assert_int_eq(route_table_build(srcs, 1, &def, &t, &err), 0);
	ck_assert_int_eq(route_lookup(t, "d.test", 6, "/", 1, &m), ROUTE_OK);
	ck_assert_uint_eq(m.max_body_bytes, 123);
	ck_assert_int_eq(admit_inflight_enter(NULL, m.inflight), 0);
	ck_assert_int_eq(admit_inflight_enter(NULL, m.inflight), -EBUSY);
	admit_inflight_leave(NULL, m.inflight);
	ck_assert_int_eq(route_lookup(t, "d.test", 6, "/env", 4, &m), ROUTE_OK);
	ck_assert_uint_eq(m.max_body_bytes, 123);
	ck_assert_int_eq(route_lookup(t, "d.test", 6, "/own", 4, &m), ROUTE_OK);
	ck_assert_uint_eq(m.max_body_bytes, 5);
	route_table_put(t);
	/* an environment's own limit is its routes' default */
	env->max_body_bytes = 0;
	ck_assert_int_eq(route_table_build(srcs, 1, &def, &t, &err), 0);
	ck_assert_int_eq(route_lookup(t, "d.test", 6, "/env/x", 6, &m),
			 ROUTE_OK);
	ck_assert_uint_eq(m.max_body_bytes, 0);
	ck_assert_int_eq(route_lookup(t, "d.test", 6, "/", 1, &m), ROUTE_OK);
	ck_assert_uint_eq(m.max_body_bytes, 0);
	ck_assert_int_eq(route_lookup(t, "d.test", 6, "/own", 4, &m), ROUTE_OK);
	ck_assert_uint_eq(m.max_body_bytes, 5);
	route_table_put(t);
	route_src_free(one);
}
END_TEST

/* Claims: a domain + prefix routed to an environment of another project
 * (or source) than the domain's own; a domain only claimed with prefixes
 * answers nothing else; the same prefix claimed twice is refused. */
START_TEST(test_claims)
{
	struct errbuf err = {""};
	struct route_src *a = fx_src(), *b = fx_src();
	const struct route_src *srcs[2] = {a, b};
	struct route_defaults def = {0, 0};
	struct route_src_env *shop, *fn, *only;
	struct route_table *t = NULL;
	struct route_match m;

	shop = fx_env(fx_project(a, "shop"), "shop-prod", "10.0.0.1:80",
		      "shop.test", NULL);
	fx_route(shop, "/own", ROUTE_SRC_INHERIT);
	fn = fx_env(fx_project(b, "fns"), "fn-prod", "10.0.0.9:90", "fn.test",
		    NULL);
	fx_claim(fn, "shop.test", "/fn", true);
	fx_claim(fn, "api.test", "/v1", false);
	fx_claim(fn, "*.preview.test", "/hook", false);
	(void)only;
	ck_assert_int_eq(route_table_build(srcs, 2, &def, &t, &err), 0);
	/* shop.test keeps its own routes */
	ck_assert_int_eq(route_lookup(t, "shop.test", 9, "/", 1, &m), ROUTE_OK);
	ck_assert_str_eq(m.env_id, "shop-prod");
	ck_assert_int_eq(route_lookup(t, "shop.test", 9, "/own/x", 6, &m),
			 ROUTE_OK);
	ck_assert_str_eq(m.env_id, "shop-prod");
	/* its /fn goes to the other project's environment, stripped */
	ck_assert_int_eq(route_lookup(t, "shop.test", 9, "/fn/x?q", 7, &m),
			 ROUTE_OK);
	ck_assert_str_eq(m.project_id, "fns");
	ck_assert_str_eq(m.env_id, "fn-prod");
	ck_assert_str_eq(m.deployment_id, "fn-prod-d");
	ck_assert_str_eq(m.upstreams[0].text, "10.0.0.9:90");
	ck_assert_str_eq(m.prefix, "/fn");
	ck_assert_uint_eq(m.path_len, 4);
	ck_assert(memcmp(m.path, "/x?q", 4) == 0);
	/* a domain only claimed with a prefix: that prefix, nothing else */
	ck_assert_int_eq(route_lookup(t, "api.test", 8, "/v1/users", 9, &m),
			 ROUTE_OK);
	ck_assert_str_eq(m.env_id, "fn-prod");
	ck_assert_uint_eq(m.path_len, 9); /* not stripped */
	ck_assert_int_eq(route_lookup(t, "api.test", 8, "/", 1, &m),
			 ROUTE_DOMAIN_NOT_FOUND);
	ck_assert_int_eq(route_lookup(t, "api.test", 8, "/v1x", 4, &m),
			 ROUTE_DOMAIN_NOT_FOUND);
	ck_assert_int_eq(route_lookup(t, "a.preview.test", 14, "/hook", 5, &m),
			 ROUTE_OK);
	ck_assert_str_eq(m.env_id, "fn-prod");
	/* the claim's route has a gauge of its own */
	ck_assert_ptr_nonnull(m.inflight);
	/* a disabled target project answers 403 through the claim */
	b->projects[0].enabled = false;
	route_table_put(t);
	ck_assert_int_eq(route_table_build(srcs, 2, &def, &t, &err), 0);
	ck_assert_int_eq(route_lookup(t, "shop.test", 9, "/fn", 3, &m),
			 ROUTE_PROJECT_DISABLED);
	ck_assert_int_eq(route_lookup(t, "shop.test", 9, "/", 1, &m), ROUTE_OK);
	route_table_put(t);
	/* the same prefix claimed twice (or already a route there) */
	fx_claim(shop, "shop.test", "/fn", false);
	t = NULL;
	ck_assert_int_eq(route_table_build(srcs, 2, &def, &t, &err), -EEXIST);
	ck_assert_ptr_null(t);
	ck_assert(strstr(err.msg, "shop.test/fn is routed twice") != NULL);
	route_src_free(a);
	route_src_free(b);
}
END_TEST

START_TEST(test_empty_table)
{
	struct errbuf err = {""};
	struct route_defaults def = {10 << 20, 4096};
	struct route_src empty = {NULL, 0};
	const struct route_src *srcs[2] = {&empty, NULL};
	struct route_table *t = NULL;
	struct route_match m;
	json_t *j;

	/* an empty source, and a source with nothing yet */
	ck_assert_int_eq(route_table_build(srcs, 2, &def, &t, &err), 0);
	ck_assert_int_eq(route_lookup(t, "a.b", 3, "/", 1, &m),
			 ROUTE_DOMAIN_NOT_FOUND);
	j = route_dump_json(t);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "routes")), 0);
	json_decref(j);
	route_table_put(t);
}
END_TEST

START_TEST(test_path_normal)
{
	static const char *const good[] = {
	    "/",
	    "/a",
	    "/a/",
	    "/a/b.c",
	    "/a%20b",
	    "/%3F%3a",
	    "/a?x=//./..",
	    "/.well-known/x",
	    "/a..b/...",
	    "*",
	    "",
	};
	static const char *const bad[] = {
	    "//a",	"/a//b",  "/./a",   "/a/.",    "/a/../b", "/..",
	    "/%61dmin", "/a%2Fb", "/a%2fb", "/%7E",    "/a%5Cb",  "/a\\b",
	    "/a%",	"/a%4",	  "/a%zz",  "/x/..?q", "/%2e",	  "/%2E%2e/x",
	};
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ck_assert_msg(route_path_normal(good[i], strlen(good[i])), "%s",
			      good[i]);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!route_path_normal(bad[i], strlen(bad[i])), "%s",
			      bad[i]);
}
END_TEST

static Suite *route_suite(void)
{
	Suite *s = suite_create("route");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, test_hosts, 0,
			    sizeof(hosts) / sizeof(hosts[0]));
	tcase_add_loop_test(tc, test_paths, 0,
			    sizeof(paths) / sizeof(paths[0]));
	tcase_add_test(tc, test_match_fields);
	tcase_add_test(tc, test_route_overrides);
	tcase_add_test(tc, test_ip_rules);
	tcase_add_test(tc, test_refcount_swap);
	tcase_add_test(tc, test_dump_json);
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_claims);
	tcase_add_test(tc, test_empty_table);
	tcase_add_test(tc, test_path_normal);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(route_suite());
}
