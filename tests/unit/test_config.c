/* SPDX-License-Identifier: BSD-2-Clause */
/* test_config.c - edged's configuration: defaults, the example, and every
 * kind of bad key or value naming FILE:LINE: KEY. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "edge_maps.h"
#include "unit.h"

#define CK_NELEM(a) (sizeof(a) / sizeof((a)[0]))

static char tmpdir[64];

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/edge-config.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Write len bytes of text to tmpdir/name; returns its path (static
 * buffer, one per name slot: the main file or another). */
static const char *write_file(const char *name, const char *text, size_t len)
{
	static char paths[2][128];
	char *path = paths[strcmp(name, "edge.conf") != 0];
	FILE *f;

	snprintf(path, sizeof(paths[0]), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(text, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
	return path;
}

/* Write the string text to tmpdir/name; returns its path (write_file). */
static const char *write_text(const char *name, const char *text)
{
	return write_file(name, text, strlen(text));
}

/* Write text to tmpdir/edge.conf; returns its path (static buffer). */
static const char *write_conf(const char *text)
{
	return write_text("edge.conf", text);
}

/* One project "p", environment "e", with extra lines inside the
 * environment (ENV_EXTRA) and the project (PROJ_EXTRA). */
#define PROJ(PROJ_EXTRA, ENV_EXTRA)                                            \
	"projects = ( {\n"                                                     \
	"  id = \"p\";\n" PROJ_EXTRA "  environments = ( {\n"                  \
	"    id = \"e\";\n"                                                    \
	"    domains = [ \"a.example.com\" ];\n"                               \
	"    deployment = { id = \"d\"; upstreams = [ \"127.0.0.1:80\" ]; "    \
	"};\n" ENV_EXTRA "  } );\n"                                            \
	"} );\n"

/* One deployment with LINE (its health_check) inside. */
#define HC_ENV(LINE)                                                           \
	"projects = ( { id = \"p\"; environments = ( { id = \"e\";\n"          \
	"  domains = [ \"a.example.com\" ];\n"                                 \
	"  deployment = { id = \"d\"; upstreams = [ \"127.0.0.1:80\" "         \
	"];\n" LINE "  };\n} ); } );\n"

/* The error must sit on the line marked "#!" (line 0: none). */
struct bad {
	const char *text;
	const char *key; /* "KEY: " follows "FILE:LINE: " */
	const char *msg;
};

static const struct bad bad[] = {
    {"bogus = 1; #!\n", "bogus", "unknown key"},
    {"io_uring = \"on\"; #!\n", "io_uring", "true or false"},
    {"io_uring = 1; #!\n", "io_uring", "true or false"},
    /* wake (docs/wake.md) */
    {"wake = { command = \"w %s\"; max_concurrent = 0; #!\n};\n",
     "wake.max_concurrent", "out of range"},
    {"wake = { command = \"w %s\"; timeout = \"50ms\"; #!\n};\n",
     "wake.timeout", "out of range"},
    {"wake = { command = \"w %s\"; timeout = \"soon\"; #!\n};\n",
     "wake.timeout", ""},
    {"wake = { command = \"w %s\"; probe_interval = \"2s\"; #!\n};\n",
     "wake.probe_interval", "out of range"},
    {"wake = { command = \"w %s\"; output_max = 2097152; #!\n};\n",
     "wake.output_max", "out of range"},
    {"wake = { command = \"w %s\"; retry_max = \"500ms\"; #!\n};\n",
     "wake.retry_max", "out of range"},
    {"wake = { command = \"w %s\"; retry_max = \"2h\"; #!\n};\n",
     "wake.retry_max", "out of range"},
    {"wake = { command = \"wake %d\"; #!\n};\n", "wake.command",
     "only %s (the environment's id) and %% may follow %"},
    {"wake = { command = \"w\\t%s\"; #!\n};\n", "wake.command",
     "a control character at byte 1"},
    {"wake = { command = \"w %s\"; retries = 3; #!\n};\n", "wake.retries",
     "unknown key"},
    {"projects = ( { id = \"p\"; environments = ( { id = \"e\";\n"
     " domains = [ \"a.test\" ]; on_demand = true; #!\n"
     " deployment = { id = \"d\"; upstreams = [ \"127.0.0.1:1\" ]; }; "
     "} ); } );\n",
     "projects[0].environments[0].on_demand", "wake.command"},
    {"projects = ( { id = \"p\"; environments = ( { id = \"e\";\n"
     " domains = [ \"a.test\" ]; idle_timeout = \"1m\"; #!\n"
     " deployment = { id = \"d\"; upstreams = [ \"127.0.0.1:1\" ]; }; "
     "} ); } );\n",
     "projects[0].environments[0].idle_timeout", "on_demand = true"},
    {"limits = {\n max_headerz = 5; #!\n};\n", "limits.max_headerz",
     "unknown key"},
    /* http2 */
    {"http2 = {\n window = 65535; #!\n};\n", "http2.window", "unknown key"},
    {"http2 = true; #!\n", "http2", "expected a group"},
    {"http2 = {\n enabled = \"yes\"; #!\n};\n", "http2.enabled",
     "true or false"},
    {"http2 = {\n cleartext = 1; #!\n};\n", "http2.cleartext", "true or false"},
    {"http2 = {\n max_concurrent_streams = 0; #!\n};\n",
     "http2.max_concurrent_streams", "0 is out of range 1..4096"},
    {"http2 = {\n max_concurrent_streams = 4097; #!\n};\n",
     "http2.max_concurrent_streams", "4097 is out of range 1..4096"},
    {"http2 = {\n max_concurrent_streams = \"128\"; #!\n};\n",
     "http2.max_concurrent_streams", "expected an integer"},
    {"http2 = {\n initial_window_size = 16777217; #!\n};\n",
     "http2.initial_window_size",
     "16777217 bytes is out of range 1024..16777216"},
    {"http2 = {\n initial_window_size = \"17M\"; #!\n};\n",
     "http2.initial_window_size",
     "17825792 bytes is out of range 1024..16777216"},
    {"http2 = {\n initial_window_size = 1023; #!\n};\n",
     "http2.initial_window_size", "1023 bytes is out of range"},
    {"http2 = {\n initial_window_size = -1; #!\n};\n",
     "http2.initial_window_size", "negative size -1"},
    {"http2 = {\n initial_window_size = \"64x\"; #!\n};\n",
     "http2.initial_window_size", "unknown size unit"},
    {"http2 = {\n max_header_list_size = \"2M\"; #!\n};\n",
     "http2.max_header_list_size",
     "2097152 bytes is out of range 1024..1048576"},
    {"http2 = {\n max_header_list_size = 512; #!\n};\n",
     "http2.max_header_list_size", "512 bytes is out of range 1024..1048576"},
    {"workers = 0; #!\n", "workers", "out of range"},
    {"workers = 300; #!\n", "workers", "out of range"},
    {"workers = \"2\"; #!\n", "workers", "expected an integer"},
    {"listen = [ \"1.2.3.4\" ]; #!\n", "listen[0]", "expected ADDR:PORT"},
    {"listen = [ \"example.com:80\" ]; #!\n", "listen[0]", "not a numeric"},
    {"listen = [ \"1.2.3.4:0\" ]; #!\n", "listen[0]", "1..65535"},
    {"listen = [ \"1.2.3.4:65536\" ]; #!\n", "listen[0]", "1..65535"},
    {"listen = [ \"1.2.3.04:80\" ]; #!\n", "listen[0]", "not a numeric"},
    {"listen = [ \"::1:80\" ]; #!\n", "listen[0]", "brackets"},
    {"listen = [ \"[::1:80\" ]; #!\n", "listen[0]", "[IPV6]:PORT"},
    {"listen = [ \"1.2.3.4:80\",\n \"1.2.3.4:80\" ]; #!\n", "listen[1]",
     "listed twice"},
    {"listen = \"1.2.3.4:80\"; #!\n", "listen", "expected a list"},
    {"listen = [ 80 ]; #!\n", "listen[0]", "expected an address string"},
    {"listen = ( { address = \"1.2.3.4:80\"; proxy = true; } ); #!\n",
     "listen[0].proxy", "unknown key"},
    {"listen = ( { proxy_protocol = true; } ); #!\n", "listen[0].address",
     "missing (required)"},
    {"listen = ( { address = \"1.2.3.4:80\"; proxy_protocol = \"yes\"; } "
     "); #!\n",
     "listen[0].proxy_protocol", "expected"},
    {"listen = ( { address = \"1.2.3.4\"; } ); #!\n", "listen[0]",
     "expected ADDR:PORT"},
    {"admin_listen = \"0.0.0.0:8080\"; #!\n", "admin_listen", "also in listen"},
    {"user = \"-x\"; #!\n", "user", "not a valid user name"},
    {"user = 5; #!\n", "user", "expected a string"},
    {"control_socket = \"run/edged.sock\"; #!\n", "control_socket",
     "absolute path"},
    {"pin_dir = \"bpf\"; #!\n", "pin_dir", "absolute path"},
    {"limits = {\n max_request_line = 10; #!\n};\n", "limits.max_request_line",
     "out of range"},
    {"limits = {\n max_body_bytes = \"10X\"; #!\n};\n", "limits.max_body_bytes",
     "unknown size unit"},
    {"limits = {\n max_body_bytes = -1; #!\n};\n", "limits.max_body_bytes",
     "negative"},
    {"limits = {\n body_buffer = \"17M\"; #!\n};\n", "limits.body_buffer",
     "out of range 0..16777216"},
    {"limits = {\n body_buffer = -1; #!\n};\n", "limits.body_buffer",
     "negative"},
    {"limits = {\n body_buffer = \"64Q\"; #!\n};\n", "limits.body_buffer",
     "unknown size unit"},
    {"limits = {\n body_buffer = true; #!\n};\n", "limits.body_buffer",
     "expected a size"},
    {"timeouts = {\n body_min_rate = -1; #!\n};\n", "timeouts.body_min_rate",
     "out of range"},
    {"limits = 5; #!\n", "limits", "expected a group"},
    {"timeouts = {\n header = 10; #!\n};\n", "timeouts.header",
     "expected a duration string"},
    {"timeouts = {\n header = \"10\"; #!\n};\n", "timeouts.header",
     "needs a unit"},
    {"timeouts = {\n header = \"0s\"; #!\n};\n", "timeouts.header",
     "longer than zero"},
    {"timeouts = {\n drain = \"1s1m\"; #!\n};\n", "timeouts.drain",
     "units must go"},
    {"timeouts = {\n header = \"1h\"; #!\n};\n", "timeouts.header",
     "out of range"},
    {"timeouts = {\n tunnel_idle = \"200h\"; #!\n};\n", "timeouts.tunnel_idle",
     "too long"},
    {"ratelimit = {\n rate = \"fast\"; #!\n};\n", "ratelimit.rate", ""},
    {"ratelimit = {\n burst = 0; #!\n};\n", "ratelimit.burst", "out of range"},
    {"upstream = {\n eject_after = 0; #!\n};\n", "upstream.eject_after",
     "out of range"},
    {"upstream = {\n eject_base = \"50ms\"; #!\n};\n", "upstream.eject_base",
     "out of range"},
    {"upstream = {\n eject_base = \"2m\"; #!\n eject_max = \"1m\";\n};\n",
     "upstream.eject_base", "longer than eject_max"},
    {"upstream = {\n eject_ater = 2; #!\n};\n", "upstream.eject_ater",
     "unknown key"},
    {"analytics = {\n queue = 1; #!\n};\n", "analytics.queue", "out of range"},
    {"analytics = {\n file = \"x.jsonl\"; #!\n};\n", "analytics.file",
     "absolute path"},
    {"analytics = {\n spool = \"/var/spool/edge\"; #!\n};\n", "analytics.spool",
     "needs pg set and analytics.database true"},
    {"pg = \"dbname=edge password secret\"; #!\n", "pg",
     "bad connection string: missing \"=\" after"},
    {"pg = \"dbname='edge\"; #!\n", "pg", "unterminated quoted string"},
    {"pg = \"postgresql://edge:s3cret@[::1/edge\"; #!\n", "pg",
     "bad connection string: "},
    {"pg = \"dbname=edge nosuchoption=1\"; #!\n", "pg",
     "invalid connection option \"nosuchoption\""},
    {"pg = \"dbname=edge\";\npg_snapshot = \"/tmp\"; #!\n", "pg_snapshot",
     "/tmp is a directory, not a file"},
    {"pg = \"dbname=edge\";\npg_snapshot = \"/dev/null\"; #!\n", "pg_snapshot",
     "not a regular file"},
    {"pg = \"dbname=edge\";\nanalytics = {\n database = false;\n"
     " spool = \"/var/spool/edge\"; #!\n};\n",
     "analytics.spool", "needs pg set"},
    {"pg = \"dbname=edge\";\nanalytics = {\n spool = \"spool\"; #!\n};\n",
     "analytics.spool", "absolute path"},
    {"analytics = {\n spool_max = \"63K\"; #!\n};\n", "analytics.spool_max",
     "out of range"},
    {"analytics = {\n spool_max = \"1025G\"; #!\n};\n", "analytics.spool_max",
     "too large"},
    {"analytics = {\n spool_memory = 511; #!\n};\n", "analytics.spool_memory",
     "out of range"},
    {"analytics = {\n database = \"no\"; #!\n};\n", "analytics.database", ""},
    {"analytics = {\n spools = \"/x\"; #!\n};\n", "analytics.spools",
     "unknown key"},
    {"trusted_proxies = [ \"10.0.0.0/8\", \"10.0.0.0/33\" ]; #!\n",
     "trusted_proxies[1]", "prefix length"},
    {"trusted_proxies = [ \"proxy.example\" ]; #!\n", "trusted_proxies[0]", ""},
    {"trusted_proxies = [ \"10.0.0.0/8\",\n \"10.1.0.0/8\" ]; #!\n",
     "trusted_proxies[1]", "10.0.0.0/8 is listed twice"},
    {"trusted_proxies = \"10.0.0.0/8\"; #!\n", "trusted_proxies",
     "expected a list"},
    {"trusted_proxies = [ 10 ]; #!\n", "trusted_proxies[0]",
     "expected a string"},
    {"projects = { }; #!\n", "projects", "expected a list"},
    {"projects = ( { #!\n environments = ( ); } );\n", "projects[0].id",
     "missing"},
    {"projects = ( { id = \"a b\"; #!\n} );\n", "projects[0].id",
     "only letters"},
    {"projects = ( { id = \"p\"; #!\n} );\n", "projects[0].environments",
     "missing"},
    {"projects = ( { id = \"p\";\n environments = ( ); #!\n} );\n",
     "projects[0].environments", "at least one"},
    {PROJ("  enabled = \"yes\"; #!\n", ""), "projects[0].enabled",
     "expected true or false"},
    {PROJ("  ip_allow = [ \"10.0.0.0/33\" ]; #!\n", ""),
     "projects[0].ip_allow[0]", "prefix"},
    {PROJ("  ip_allow = [ \"10.0.0.0/8\" ];\n"
	  "  ip_block = [ \"10.0.0.0/8\" ]; #!\n",
	  ""),
     "projects[0].ip_block[0]", "already in ip_allow"},
    {PROJ("  colour = \"red\"; #!\n", ""), "projects[0].colour", "unknown key"},
    {HC_ENV("  health_check = { type = \"udp\"; }; #!\n"),
     "projects[0].environments[0].deployment.health_check.type",
     "must be \"http\" or \"tcp\""},
    {HC_ENV("  health_check = { path = \"/h\"; }; #!\n"),
     "projects[0].environments[0].deployment.health_check.type",
     "missing (required)"},
    {HC_ENV("  health_check = { type = \"http\"; path = \"h\"; }; #!\n"),
     "projects[0].environments[0].deployment.health_check.path",
     "must start with"},
    {HC_ENV("  health_check = { type = \"tcp\"; path = \"/h\"; }; #!\n"),
     "projects[0].environments[0].deployment.health_check.path",
     "only for type"},
    {HC_ENV("  health_check = { type = \"http\"; interval = \"1s\"; "
	    "timeout = \"2s\"; }; #!\n"),
     "projects[0].environments[0].deployment.health_check",
     "timeout (2000 ms) is longer than interval (1000 ms)"},
    {HC_ENV("  health_check = { type = \"http\"; expect_status = 99; }; "
	    "#!\n"),
     "projects[0].environments[0].deployment.health_check.expect_status",
     "out of range"},
    {HC_ENV("  health_check = { type = \"http\"; fall = 0; }; #!\n"),
     "projects[0].environments[0].deployment.health_check.fall",
     "out of range"},
    {PROJ("", "    domain = [ \"x.example.com\" ]; #!\n"),
     "projects[0].environments[0].domain", "unknown key"},
    {"projects = ( { id = \"p\"; environments = ( { id = \"e\";\n"
     "  domains = [ \"a.example.com:80\" ]; #!\n"
     "  deployment = { id = \"d\"; upstreams = [ \"127.0.0.1:80\" ]; };\n"
     "} ); } );\n",
     "projects[0].environments[0].domains[0]", "no port"},
    {"projects = ( { id = \"p\"; environments = ( { id = \"e\";\n"
     "  domains = [ \"a.*.example.com\" ]; #!\n"
     "  deployment = { id = \"d\"; upstreams = [ \"127.0.0.1:80\" ]; };\n"
     "} ); } );\n",
     "projects[0].environments[0].domains[0]", "leftmost label"},
    {"projects = ( { id = \"p\"; environments = ( { id = \"e\";\n"
     "  domains = [ \"*.com\" ]; #!\n"
     "  deployment = { id = \"d\"; upstreams = [ \"127.0.0.1:80\" ]; };\n"
     "} ); } );\n",
     "projects[0].environments[0].domains[0]", "two labels"},
    {"projects = ( { id = \"p\"; environments = ( { id = \"e\";\n"
     "  domains = [ \"a234567890123456789012345678901234567890123456789012"
     "345678901234.com\" ]; #!\n"
     "  deployment = { id = \"d\"; upstreams = [ \"127.0.0.1:80\" ]; };\n"
     "} ); } );\n",
     "projects[0].environments[0].domains[0]", "longer than 63"},
    {"projects = ( { id = \"p\"; environments = ( { id = \"e\";\n"
     "  domains = [ \"a.example.com.\" ]; #!\n"
     "  deployment = { id = \"d\"; upstreams = [ \"127.0.0.1:80\" ]; };\n"
     "} ); } );\n",
     "projects[0].environments[0].domains[0]", "trailing dot"},
    {PROJ("", "") "projects2 = 1; #!\n", "projects2", "unknown key"},
    {"projects = ( { id = \"p\"; environments = ( { id = \"e\";\n"
     "  domains = [ \"a.example.com\" ];\n"
     "  deployment = { id = \"d\"; upstreams = [ \"127.0.0.1:80\" ]; };\n"
     "}, { id = \"f\";\n"
     "  domains = [ \"A.example.com\" ]; #!\n"
     "  deployment = { id = \"d2\"; upstreams = [ \"127.0.0.1:80\" ]; };\n"
     "} ); } );\n",
     "projects[0].environments[1].domains[0]", "already used by"},
    {"projects = ( { id = \"p\"; environments = ( { id = \"e\";\n"
     "  domains = [ \"a.example.com\" ];\n"
     "  deployment = { id = \"d\"; upstreams = [ \"127.0.0.1:80\" ]; };\n"
     "} ); }, { id = \"p\"; #!\n environments = ( ); } );\n",
     "projects[1].id", "already used by projects[0].id"},
    {PROJ("", "    routes = ( { prefix = \"/fn\"; },\n"
	      "      { prefix = \"/fn\"; } ); #!\n"),
     "projects[0].environments[0].routes[1]", "already routed"},
    {PROJ("", "    routes = ( { prefix = \"fn\"; } ); #!\n"),
     "projects[0].environments[0].routes[0].prefix", "start with '/'"},
    {PROJ("", "    routes = ( { prefix = \"/fn/\"; } ); #!\n"),
     "projects[0].environments[0].routes[0].prefix", "trailing"},
    {PROJ("", "    routes = ( { prefix = \"/a/../b\"; } ); #!\n"),
     "projects[0].environments[0].routes[0].prefix", "'..'"},
    {PROJ("", "    routes = ( { prefix = \"/a%20\"; } ); #!\n"),
     "projects[0].environments[0].routes[0].prefix", "invalid character"},
    {PROJ("", "    routes = ( { prefix = \"/a\"; strip = true; } ); #!\n"),
     "projects[0].environments[0].routes[0].strip", "unknown key"},
    {PROJ("", "    routes = ( { prefix = \"/a\";\n"
	      "      upstreams = [ \"localhost:80\" ]; } ); #!\n"),
     "projects[0].environments[0].routes[0].upstreams[0]", "not resolved"},
    {"projects = ( { id = \"p\"; environments = ( { id = \"e\";\n"
     "  domains = [ \"a.example.com\" ];\n"
     "  deployment = { id = \"d\";\n upstreams = [ ]; }; #!\n"
     "} ); } );\n",
     "projects[0].environments[0].deployment.upstreams", "needs 1..64"},
    {"projects = ( { id = \"p\"; environments = ( { id = \"e\";\n"
     "  domains = [ \"a.example.com\" ];\n"
     "  deployment = { id = \"d\"; upstreams = [ \"127.0.0.1:80\" ];\n"
     "    balance = \"random\"; }; #!\n"
     "} ); } );\n",
     "projects[0].environments[0].deployment.balance", "round_robin"},
    {HC_ENV("    send_proxy = \"v3\"; #!\n"),
     "projects[0].environments[0].deployment.send_proxy",
     "\"v3\": expected off, v1 or v2"},
    {HC_ENV("    send_proxy = true; #!\n"),
     "projects[0].environments[0].deployment.send_proxy", "expected a string"},
    {"projects = ( { id = \"p\"; environments = ( { id = \"e\"; #!\n"
     "  domains = [ \"a.example.com\" ];\n"
     "} ); } );\n",
     "projects[0].environments[0].deployment", "missing"},
    {PROJ("", "    security_headers = { frame_options = \"ALLOW\"; }; #!\n"),
     "projects[0].environments[0].security_headers.frame_options",
     "expected \"DENY\""},
    {PROJ("", "    max_body_bytes = \"2T\"; #!\n"),
     "projects[0].environments[0].max_body_bytes", "unknown size unit"},
    {"listen = [ ; #!\n", "", "syntax"},
    /* paths the rows above leave out, one per getter or check */
    {"workers = 1.5; #!\n", "workers", "expected an integer, found a float"},
    {"user = { }; #!\n", "user", "expected a string, found a group"},
    {"user = \"a b\"; #!\n", "user", "not a valid user name"},
    {"admin_listen = \"localhost:9090\"; #!\n", "admin_listen", "not resolved"},
    {"control_socket = \"/run/edge/"
     "0123456789012345678901234567890123456789012345678901234567890123456789"
     "0123456789012345678901234567\"; #!\n",
     "control_socket", "longer than 107 bytes"},
    {"limits = {\n max_body_bytes = \"10KB\"; #!\n};\n",
     "limits.max_body_bytes", "trailing text after the size"},
    {"limits = {\n max_body_bytes = \"1025G\"; #!\n};\n",
     "limits.max_body_bytes", "size too large"},
    {"limits = {\n max_headers = [ 1 ]; #!\n};\n", "limits.max_headers",
     "expected an integer, found a list"},
    {"timeouts = {\n body = \"\"; #!\n};\n", "timeouts.body", "empty duration"},
    {"timeouts = {\n drain = \"99999999999999999999s\"; #!\n};\n",
     "timeouts.drain", "too long"},
    {"projects = ( { id = \"a234567890123456789012345678901234567890123456789"
     "0123456789012345\"; #!\n} );\n",
     "projects[0].id", "must be 1..64 bytes"},
    {PROJ("  name = \"\"; #!\n", ""), "projects[0].name",
     "must be 1..128 bytes"},
    {PROJ("  name = \"a\\tb\"; #!\n", ""), "projects[0].name",
     "control character"},
    {PROJ("  ip_allow = [ \"10.0.0.0/8\", \"10.0.0.0/8\" ]; #!\n", ""),
     "projects[0].ip_allow[1]", "already in ip_allow"},
    {"projects = ( { id = \"p\"; environments = ( { id = \"e\"; #!\n"
     "  deployment = { id = \"d\"; upstreams = [ \"127.0.0.1:80\" ]; };\n"
     "} ); } );\n",
     "projects[0].environments[0].domains", "missing (required)"},
    {"projects = ( { id = \"p\"; environments = ( { id = \"e\";\n"
     "  domains = [ ]; #!\n"
     "  deployment = { id = \"d\"; upstreams = [ \"127.0.0.1:80\" ]; };\n"
     "} ); } );\n",
     "projects[0].environments[0].domains", "needs at least one domain"},
    {"projects = ( { id = \"p\"; environments = ( { id = \"e\";\n"
     "  domains = [ \"a.example.com\" ];\n"
     "  deployment = { id = \"d\"; }; #!\n"
     "} ); } );\n",
     "projects[0].environments[0].deployment.upstreams", "missing (required)"},
    {PROJ("", "    routes = { }; #!\n"), "projects[0].environments[0].routes",
     "expected a list ( { ... }, ... )"},
    {PROJ("", "    routes = ( 5 ); #!\n"),
     "projects[0].environments[0].routes[0]", "expected a group"},
    {PROJ("", "    routes = ( { prefix = \"/a\"; balance = \"x\"; } ); #!\n"),
     "projects[0].environments[0].routes[0].balance", "least_inflight"},
    {PROJ("", "    security_headers = 5; #!\n"),
     "projects[0].environments[0].security_headers", "expected a group"},
    {PROJ("", "    security_headers = { hsts_max_age = \"1y\"; }; #!\n"),
     "projects[0].environments[0].security_headers.hsts_max_age",
     "unknown unit 'y'"},
    /* one duration grammar: ms is a unit everywhere, but a setting in
     * whole seconds refuses what is not whole seconds */
    {PROJ("", "    security_headers = { hsts_max_age = \"1500ms\"; }; #!\n"),
     "projects[0].environments[0].security_headers.hsts_max_age",
     "not whole seconds"},
    {"timeouts = {\n header = \"1x\"; #!\n};\n", "timeouts.header",
     "unknown unit 'x'"},
    {"timeouts = {\n tunnel_idle = \"7d1ms\"; #!\n};\n", "timeouts.tunnel_idle",
     "too long (max 7d)"},
    {PROJ("", "    security_headers = { referrer_policy = \"x\"; }; #!\n"),
     "projects[0].environments[0].security_headers.referrer_policy",
     "not a Referrer-Policy"},
    {PROJ("", "    security_headers = { nosniff = 1; }; #!\n"),
     "projects[0].environments[0].security_headers.nosniff",
     "expected true or false, found an integer"},
    /* integers are read as written (libconfig 1.5 keeps 32 bits of an
     * integer without an L suffix) and reported as written */
    {"workers = 99999999999999999999; #!\n", "workers",
     "99999999999999999999 is out of range 1..256"},
    {"workers = 0x101; #!\n", "workers", "0x101 is out of range 1..256"},
    {"limits = {\n max_connections = 4294967297; #!\n};\n",
     "limits.max_connections", "4294967297 is out of range 1..1000000"},
    {"limits = {\n max_body_bytes = 2000000000000; #!\n};\n",
     "limits.max_body_bytes",
     "2000000000000 bytes is out of range 0..1099511627776"},
    {"limits = {\n max_body_bytes = -5000000000; #!\n};\n",
     "limits.max_body_bytes", "negative size -5000000000"},
    {"timeouts = {\n body_min_rate = -99999999999999999999; #!\n};\n",
     "timeouts.body_min_rate",
     "-99999999999999999999 is out of range 0..1073741824"},
    {"ratelimit = {\n burst = 0x1FFFFFFFFFFFFFFFF; #!\n};\n", "ratelimit.burst",
     "0x1FFFFFFFFFFFFFFFF is out of range 1..100000000"},
    /* tcp_routes: plain TCP routes */
    {"tcp_routes = { }; #!\n", "tcp_routes", "expected a list"},
    {"tcp_routes = ( \"0.0.0.0:5432\" ); #!\n", "tcp_routes[0]",
     "expected a group"},
    {"tcp_routes = ( { environment = \"e\"; } ); #!\n", "tcp_routes[0].listen",
     "missing (required)"},
    {"tcp_routes = ( { listen = \"0.0.0.0:5432\"; } ); #!\n",
     "tcp_routes[0].environment", "missing (required)"},
    {"tcp_routes = ( { listen = \"0.0.0.0:5432\"; environment = \"e\";\n"
     "  port = 5; } ); #!\n",
     "tcp_routes[0].port", "unknown key"},
    {"tcp_routes = ( { listen = \"db.internal:5432\"; #!\n"
     "  environment = \"e\"; } );\n",
     "tcp_routes[0].listen", "not resolved"},
    {"tcp_routes = ( { listen = \"0.0.0.0:0\"; #!\n"
     "  environment = \"e\"; } );\n",
     "tcp_routes[0].listen", "1..65535"},
    {"tcp_routes = ( { listen = 5432; environment = \"e\"; } ); #!\n",
     "tcp_routes[0].listen", "expected a string"},
    {"tcp_routes = ( { listen = \"0.0.0.0:5432\";\n"
     "  environment = \"a b\"; } ); #!\n",
     "tcp_routes[0].environment", "only letters"},
    {"tcp_routes = ( { listen = \"0.0.0.0:5432\";\n"
     "  environment = \"\"; } ); #!\n",
     "tcp_routes[0].environment", "must be 1..64 bytes"},
    {"listen = [ \"127.0.0.1:8080\" ];\n"
     "tcp_routes = ( { listen = \"127.0.0.1:8080\"; #!\n"
     "  environment = \"e\"; } );\n",
     "tcp_routes[0].listen", "127.0.0.1:8080 is also listen[0]"},
    {"listen = [ \"127.0.0.1:8080\" ];\n"
     "tcp_routes = ( { listen = \"0.0.0.0:8080\"; #!\n"
     "  environment = \"e\"; } );\n",
     "tcp_routes[0].listen",
     "0.0.0.0:8080 takes the port of listen[0] (127.0.0.1:8080)"},
    {"listen = [ \"[::]:8080\" ];\n"
     "tcp_routes = ( { listen = \"[::1]:8080\"; #!\n"
     "  environment = \"e\"; } );\n",
     "tcp_routes[0].listen", "takes the port of listen[0] ([::]:8080)"},
    {"tcp_routes = ( { listen = \"127.0.0.1:9090\"; #!\n"
     "  environment = \"e\"; } );\n",
     "tcp_routes[0].listen", "127.0.0.1:9090 is also admin_listen"},
    {"tcp_routes = ( { listen = \"0.0.0.0:5432\"; environment = \"a\"; },\n"
     "  { listen = \"0.0.0.0:5432\"; #!\n environment = \"b\"; } );\n",
     "tcp_routes[1].listen", "0.0.0.0:5432 is also tcp_routes[0].listen"},
    {"tcp_routes = ( { listen = \"10.0.0.1:5432\"; environment = \"a\"; },\n"
     "  { listen = \"0.0.0.0:5432\"; #!\n environment = \"b\"; } );\n",
     "tcp_routes[1].listen",
     "takes the port of tcp_routes[0].listen (10.0.0.1:5432)"},
    {"tcp_routes = ( { listen = \"0.0.0.0:5432\"; environment = \"e\";\n"
     "  send_proxy = \"V2\"; } ); #!\n",
     "tcp_routes[0].send_proxy", "expected off, v1 or v2"},
    {"tcp_routes = ( { listen = \"0.0.0.0:5432\"; environment = \"e\";\n"
     "  proxy_protocol = 1; } ); #!\n",
     "tcp_routes[0].proxy_protocol", "expected"},
    {"tcp_routes = ( { listen = \"0.0.0.0:5432\"; environment = \"a\";\n"
     "  proxy_protocol = true; },\n"
     "  { listen = \"0.0.0.0:5432\"; #!\n environment = \"b\"; } );\n",
     "tcp_routes[1].listen", "0.0.0.0:5432 is also tcp_routes[0].listen"},
    {"tcp_routes = ( { listen = \"0.0.0.0:8443\"; sni = \"a.test\";\n"
     "  environment = \"a\"; proxy_protocol = true; },\n"
     "  { listen = \"0.0.0.0:8443\"; sni = \"b.test\"; #!\n"
     "  environment = \"b\"; } );\n",
     "tcp_routes[1]",
     "proxy_protocol: 0.0.0.0:8443 is also "
     "tcp_routes[0].listen, which says otherwise"},
    /* tcp_routes with sni: TLS passthrough routes */
    {"tcp_routes = ( { listen = \"0.0.0.0:8443\"; sni = 5; #!\n"
     "  environment = \"e\"; } );\n",
     "tcp_routes[0].sni", "expected a string"},
    {"tcp_routes = ( { listen = \"0.0.0.0:8443\"; sni = \"a..b\"; #!\n"
     "  environment = \"e\"; } );\n",
     "tcp_routes[0].sni", "(or \"*\": the listen address's default)"},
    {"tcp_routes = ( { listen = \"0.0.0.0:8443\"; sni = \"a.test:443\"; #!\n"
     "  environment = \"e\"; } );\n",
     "tcp_routes[0].sni", "the listen address's default"},
    {"tcp_routes = ( { listen = \"0.0.0.0:8443\"; sni = \"10.0.0.1\"; #!\n"
     "  environment = \"e\"; } );\n",
     "tcp_routes[0].sni", "\"10.0.0.1\" is an IP address"},
    {"tcp_routes = ( { listen = \"0.0.0.0:8443\"; sni = \"*.test\"; #!\n"
     "  environment = \"e\"; } );\n",
     "tcp_routes[0].sni", "two labels"},
    {"tcp_routes = ( { listen = \"0.0.0.0:8443\"; sni = \"a.test\";\n"
     "  environment = \"a\"; },\n"
     "  { listen = \"0.0.0.0:8443\"; #!\n environment = \"b\"; } );\n",
     "tcp_routes[1].listen",
     "0.0.0.0:8443 is also tcp_routes[0].listen, and only TLS passthrough "
     "routes (sni) share a listen address"},
    {"tcp_routes = ( { listen = \"0.0.0.0:8443\"; environment = \"a\"; },\n"
     "  { listen = \"0.0.0.0:8443\"; #!\n sni = \"*\"; environment = \"b\"; "
     "} );\n",
     "tcp_routes[1].listen", "only TLS passthrough routes (sni) share"},
    {"tcp_routes = ( { listen = \"0.0.0.0:8443\"; sni = \"A.Test\";\n"
     "  environment = \"a\"; },\n"
     "  { listen = \"0.0.0.0:8443\"; #!\n sni = \"a.test\"; environment = "
     "\"b\"; } );\n",
     "tcp_routes[1].listen",
     "0.0.0.0:8443 has sni \"a.test\" twice (also tcp_routes[0].listen)"},
    {"tcp_routes = ( { listen = \"127.0.0.1:8443\"; sni = \"a.test\";\n"
     "  environment = \"a\"; },\n"
     "  { listen = \"0.0.0.0:8443\"; #!\n sni = \"b.test\"; environment = "
     "\"b\"; } );\n",
     "tcp_routes[1].listen",
     "takes the port of tcp_routes[0].listen (127.0.0.1:8443)"},
    /* tls: HTTPS addresses apart from the others, certificates given */
    {"listen = [ \"127.0.0.1:8080\" ];\n"
     "tls = { listen = [ \"127.0.0.1:8080\" ]; #!\n"
     "  certificates = ( { cert = \"/c\"; key = \"/k\"; } ); };\n",
     "tls.listen[0]", "127.0.0.1:8080 is also listen[0]"},
    {"listen = [ \"127.0.0.1:8080\" ];\n"
     "tls = { listen = [ \"0.0.0.0:8080\" ]; #!\n"
     "  certificates = ( { cert = \"/c\"; key = \"/k\"; } ); };\n",
     "tls.listen[0]", "takes the port of listen[0]"},
    {"tls = { listen = [ \"127.0.0.1:9090\" ]; #!\n"
     "  certificates = ( { cert = \"/c\"; key = \"/k\"; } ); };\n",
     "tls.listen[0]", "is also admin_listen"},
    {"tcp_routes = ( { listen = \"127.0.0.1:8443\"; environment = \"e\"; } "
     ");\n"
     "tls = { listen = [ \"127.0.0.1:8443\" ]; #!\n"
     "  certificates = ( { cert = \"/c\"; key = \"/k\"; } ); };\n",
     "tls.listen[0]", "is also tcp_routes[0].listen"},
    {"tls = { listen = [ \"127.0.0.1:8443\",\n"
     " \"0.0.0.0:8443\" ]; #!\n"
     "  certificates = ( { cert = \"/c\"; key = \"/k\"; } ); };\n",
     "tls.listen[1]", "takes the port of tls.listen[0]"},
    {"tls = { #!\n certificates = ( { cert = \"/c\"; key = \"/k\"; } ); };\n",
     "tls", "listen: missing"},
    {"tls = { listen = [ \"127.0.0.1:8443\" ];\n"
     "  quic_listen = [ \"127.0.0.1:8443\",\n \"0.0.0.0:8443\" ]; #!\n"
     "  certificates = ( { cert = \"/c\"; key = \"/k\"; } ); };\n",
     "tls.quic_listen[1]", "takes the port of tls.quic_listen[0]"},
    {"tls = { listen = [ \"127.0.0.1:8443\" ];\n"
     "  quic_listen = [ \"nope\" ]; #!\n"
     "  certificates = ( { cert = \"/c\"; key = \"/k\"; } ); };\n",
     "tls.quic_listen[0]", ""},
    {"tls = { listen = [ \"127.0.0.1:8443\" ];\n"
     "  quic_early_data = true; #!\n"
     "  certificates = ( { cert = \"/c\"; key = \"/k\"; } ); };\n",
     "tls.quic_early_data", "needs quic_listen (0-RTT is HTTP/3's)"},
    {"tls = { listen = [ \"127.0.0.1:8443\" ]; }; #!\n", "tls",
     "certificates missing"},
    {"tls = { listen = [ \"127.0.0.1:8443\" ];\n certificates = ( ); #!\n"
     "};\n",
     "tls.certificates", "empty"},
    {"tls = { listen = [ \"127.0.0.1:8443\" ];\n"
     " certificates = ( { cert = \"/c\"; } ); #!\n};\n",
     "tls.certificates[0].key", "missing"},
    {"tls = { listen = [ \"127.0.0.1:8443\" ];\n"
     " certificates = ( { cert = \"c.pem\"; key = \"/k\"; } ); #!\n};\n",
     "tls.certificates[0].cert", "must be an absolute path"},
    {"tls = { listen = [ \"127.0.0.1:8443\" ];\n"
     " certificates = ( { cert = \"/c\"; key = \"/k\"; pem = 1; } ); #!\n"
     "};\n",
     "tls.certificates[0].pem", "unknown key"},
    {"tls = { session_ticket_rotation = \"10s\"; }; #!\n",
     "tls.session_ticket_rotation", "out of range"},
    {"timeouts = { tls_handshake = \"50ms\"; }; #!\n", "timeouts.tls_handshake",
     "out of range"},
    /* the text itself, before libconfig reads it */
    {"projects = ( { id = \"p\"; environments = ( { id = \"e\";\n"
     "  domains = [ \"a\\x00.test\" ]; #!\n"
     "  deployment = { id = \"d\"; upstreams = [ \"127.0.0.1:80\" ]; };\n"
     "} ); } );\n",
     "", "\"\\x00\" in a string"},
    {"workers = 2;\n/* a comment #!\n never closed\n", "",
     "comment never closed"},
    {"workers = 2;\nuser = \"nobody; #!\n", "", "string never closed"},
    {"workers = 2;\n@include \"\\q.conf\" #!\n", "",
     "@include: unknown escape"},
};

static int marked_line(const char *text)
{
	const char *m = strstr(text, "#!"), *p;
	int line = 1;

	if (!m)
		return 0;
	for (p = text; p < m; p++)
		line += *p == '\n';
	return line;
}

/* config_load_all: every group checked past an error, each project too;
 * the first error is config_load's. */
START_TEST(test_load_all)
{
	static const char text[] = "workers = 0;\n"
				   "log_format = \"xml\";\n"
				   "projects = ( { id = \"a b\"; },\n"
				   "  { id = \"ok\"; environments = 3; } );\n";
	struct config_errs *errs = calloc(1, sizeof(*errs));
	struct errbuf err = {""};
	struct config *c = NULL;
	const char *path = write_conf(text);

	ck_assert_ptr_nonnull(errs);
	ck_assert_int_eq(config_load_all(path, &c, NULL, errs), -EINVAL);
	ck_assert_ptr_null(c);
	ck_assert_uint_eq(errs->n, 4);
	ck_assert_ptr_nonnull(strstr(errs->msg[0], ":1: workers: "));
	ck_assert_ptr_nonnull(strstr(errs->msg[1], ":2: log_format: "));
	ck_assert_ptr_nonnull(strstr(errs->msg[2], ":3: projects[0].id: "));
	ck_assert_ptr_nonnull(strstr(errs->msg[3], ":4: projects[1]."));
	ck_assert_int_eq(config_load(path, &c, NULL, &err), -EINVAL);
	ck_assert_str_eq(err.msg, errs->msg[0]);
	free(errs);
}
END_TEST

START_TEST(test_bad)
{
	const struct bad *t = &bad[_i];
	struct errbuf err = {""};
	struct config *c = NULL;
	struct route_src *src = NULL;
	char want[256];
	const char *path = write_conf(t->text);

	ck_assert_int_eq(config_load(path, &c, &src, &err), -EINVAL);
	ck_assert_ptr_null(c);
	ck_assert_ptr_null(src);
	if (t->key[0])
		snprintf(want, sizeof(want), "%s:%d: %s: ", path,
			 marked_line(t->text), t->key);
	else
		snprintf(want, sizeof(want), "%s:%d: ", path,
			 marked_line(t->text));
	ck_assert_msg(strncmp(err.msg, want, strlen(want)) == 0,
		      "case %d: '%s' does not start with '%s'", _i, err.msg,
		      want);
	ck_assert_msg(strstr(err.msg, t->msg) != NULL,
		      "case %d: '%s' lacks '%s'", _i, err.msg, t->msg);
}
END_TEST

/* tcp_routes: each a listen address and an environment id, kept in the
 * order written (a route's slot); 0.0.0.0 and [::] on one port, two
 * addresses on one port and a route beside an HTTP port do not clash;
 * none by default; at most CONFIG_TCP_ROUTES_MAX. */
START_TEST(test_tcp_routes)
{
	struct errbuf err = {""};
	struct config *c = NULL;
	struct route_src *src = NULL;
	char *text, *p, want[128];
	size_t i, len = 0;

	ck_assert_int_eq(
	    config_load(write_conf("listen = [ \"127.0.0.1:8080\" ];\n"
				   "tcp_routes = (\n"
				   "  { listen = \"0.0.0.0:15432\";\n"
				   "    environment = \"db-prod\"; },\n"
				   "  { listen = \"[::]:15432\";\n"
				   "    environment = \"db-prod\"; },\n"
				   "  { listen = \"127.0.0.1:6379\";\n"
				   "    environment = \"cache\"; },\n"
				   "  { listen = \"127.0.0.2:6379\";\n"
				   "    environment = \"cache-2\"; },\n"
				   "  { listen = \"127.0.0.2:8081\";\n"
				   "    environment = \"x\"; }\n"
				   ");\n"),
			&c, &src, &err),
	    0);
	ck_assert_uint_eq(c->n_tcp_routes, 5);
	ck_assert_str_eq(c->tcp_routes[0].listen.text, "0.0.0.0:15432");
	ck_assert_str_eq(c->tcp_routes[0].environment, "db-prod");
	ck_assert_str_eq(c->tcp_routes[1].listen.text, "[::]:15432");
	ck_assert_int_eq(c->tcp_routes[1].listen.ss.ss_family, AF_INET6);
	ck_assert_str_eq(c->tcp_routes[2].environment, "cache");
	ck_assert_str_eq(c->tcp_routes[3].listen.text, "127.0.0.2:6379");
	ck_assert_str_eq(c->tcp_routes[4].environment, "x");
	ck_assert_ptr_null(c->tcp_routes[0].sni);
	config_free(c);
	route_src_free(src);
	c = NULL;
	src = NULL;

	/* TLS passthrough routes share their address, names lowercased */
	ck_assert_int_eq(
	    config_load(
		write_conf("tcp_routes = (\n"
			   "  { listen = \"0.0.0.0:8443\";\n"
			   "    sni = \"DB.Example.com\";\n"
			   "    environment = \"db\"; },\n"
			   "  { listen = \"0.0.0.0:8443\";\n"
			   "    sni = \"*.apps.example.com\";\n"
			   "    environment = \"apps\"; },\n"
			   "  { listen = \"0.0.0.0:8443\"; sni = \"*\";\n"
			   "    environment = \"fallback\"; },\n"
			   "  { listen = \"0.0.0.0:5432\";\n"
			   "    environment = \"pg\"; }\n"
			   ");\n"
			   "timeouts = { client_hello = \"2s\"; };\n"),
		&c, &src, &err),
	    0);
	ck_assert_uint_eq(c->n_tcp_routes, 4);
	ck_assert_str_eq(c->tcp_routes[0].sni, "db.example.com");
	ck_assert_str_eq(c->tcp_routes[1].sni, "*.apps.example.com");
	ck_assert_str_eq(c->tcp_routes[2].sni, "*");
	ck_assert_str_eq(c->tcp_routes[2].environment, "fallback");
	ck_assert_ptr_null(c->tcp_routes[3].sni);
	ck_assert_uint_eq(c->timeouts.client_hello_ms, 2000);
	config_free(c);
	route_src_free(src);
	c = NULL;
	src = NULL;

	ck_assert_int_eq(
	    config_load(write_conf("limits = { };\n"), &c, &src, &err), 0);
	ck_assert_uint_eq(c->n_tcp_routes, 0);
	ck_assert_ptr_null(c->tcp_routes);
	config_free(c);
	route_src_free(src);
	c = NULL;
	src = NULL;

	/* the most, then one more */
	text = malloc(64 * (CONFIG_TCP_ROUTES_MAX + 1) + 64);
	ck_assert_ptr_nonnull(text);
	p = text;
	len += (size_t)sprintf(p, "tcp_routes = (\n");
	for (i = 0; i < CONFIG_TCP_ROUTES_MAX; i++)
		len += (size_t)sprintf(text + len,
				       "%s{ listen = \"127.0.0.1:%zu\"; "
				       "environment = \"e\"; }\n",
				       i ? "," : "", 20000 + i);
	sprintf(text + len, ");\n");
	ck_assert_msg(config_load(write_conf(text), &c, &src, &err) == 0, "%s",
		      err.msg);
	ck_assert_uint_eq(c->n_tcp_routes, CONFIG_TCP_ROUTES_MAX);
	config_free(c);
	route_src_free(src);
	c = NULL;
	src = NULL;
	len += (size_t)sprintf(text + len, ",{ listen = \"127.0.0.1:30000\"; "
					   "environment = \"e\"; }\n);\n");
	ck_assert_int_eq(config_load(write_conf(text), &c, &src, &err),
			 -EINVAL);
	snprintf(want, sizeof(want),
		 ":1: tcp_routes: at most %d TCP routes, has %d",
		 CONFIG_TCP_ROUTES_MAX, CONFIG_TCP_ROUTES_MAX + 1);
	ck_assert_msg(strstr(err.msg, want) != NULL, "%s", err.msg);
	free(text);
}
END_TEST

/* tls: the addresses and certificates as written, the ticket rotation
 * and the handshake timeout; none by default. */
START_TEST(test_tls)
{
	struct errbuf err = {""};
	struct config *c = NULL;
	struct route_src *src = NULL;

	ck_assert_msg(
	    config_load(
		write_conf(
		    "tls = { listen = [ \"0.0.0.0:443\", \"[::]:443\" ];\n"
		    "  session_ticket_rotation = \"12h\";\n"
		    "  certificates = (\n"
		    "    { cert = \"/e/a.pem\"; key = \"/e/a.key\"; },\n"
		    "    { cert = \"/e/b.pem\"; key = \"/e/b.key\";\n"
		    "      ocsp = \"/e/b.ocsp\"; } ); };\n"
		    "timeouts = { tls_handshake = \"3s\"; };\n"),
		&c, &src, &err) == 0,
	    "%s", err.msg);
	ck_assert_uint_eq(c->tls.n_listen, 2);
	ck_assert_str_eq(c->tls.listen[1].text, "[::]:443");
	ck_assert_uint_eq(c->tls.n_certs, 2);
	ck_assert_str_eq(c->tls.certs[0].cert, "/e/a.pem");
	ck_assert_str_eq(c->tls.certs[0].ocsp, "");
	ck_assert_str_eq(c->tls.certs[1].ocsp, "/e/b.ocsp");
	ck_assert_uint_eq(c->tls.ticket_rotation_ms, 12 * 3600 * 1000ULL);
	ck_assert_uint_eq(c->timeouts.tls_handshake_ms, 3000);
	ck_assert_uint_eq(c->tls.n_quic_listen, 0);
	ck_assert(!c->tls.gnutls);
	config_free(c);
	route_src_free(src);
	c = NULL;
	src = NULL;

	/* QUIC on the HTTPS port (UDP beside TCP), v4 and v6: the store
	 * keeps GnuTLS copies */
	ck_assert_msg(
	    config_load(
		write_conf(
		    "tls = { listen = [ \"0.0.0.0:443\" ];\n"
		    "  quic_listen = [ \"0.0.0.0:443\", \"[::]:443\" ];\n"
		    "  certificates = (\n"
		    "    { cert = \"/e/a.pem\"; key = \"/e/a.key\"; } ); };\n"),
		&c, &src, &err) == 0,
	    "%s", err.msg);
	ck_assert_uint_eq(c->tls.n_quic_listen, 2);
	ck_assert_str_eq(c->tls.quic_listen[1].text, "[::]:443");
	ck_assert(c->tls.gnutls);
	ck_assert(c->tls.quic_advertise);   /* the default */
	ck_assert(!c->tls.quic_early_data); /* the default */
	config_free(c);
	route_src_free(src);
	c = NULL;
	src = NULL;
	ck_assert_msg(
	    config_load(write_conf("tls = { listen = [ \"0.0.0.0:443\" ];\n"
				   "  quic_listen = [ \"0.0.0.0:443\" ];\n"
				   "  quic_advertise = false;\n"
				   "  quic_early_data = true;\n"
				   "  certificates = (\n"
				   "    { cert = \"/e/a.pem\"; key = "
				   "\"/e/a.key\"; } ); };\n"),
			&c, &src, &err) == 0,
	    "%s", err.msg);
	ck_assert(!c->tls.quic_advertise);
	ck_assert(c->tls.quic_early_data);
	config_free(c);
	route_src_free(src);
	c = NULL;
	src = NULL;

	ck_assert_int_eq(
	    config_load(write_conf("limits = { };\n"), &c, &src, &err), 0);
	ck_assert_uint_eq(c->tls.n_listen, 0);
	ck_assert_uint_eq(c->tls.n_certs, 0);
	ck_assert_uint_eq(c->tls.ticket_rotation_ms, 3600 * 1000ULL);
	ck_assert_uint_eq(c->timeouts.tls_handshake_ms, 10000);
	config_free(c);
	route_src_free(src);
}
END_TEST

START_TEST(test_defaults)
{
	struct errbuf err = {""};
	struct config *c = NULL;
	struct route_src *src = NULL;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	ck_assert_int_eq(
	    config_load(write_conf("limits = { };\n"), &c, &src, &err), 0);
	ck_assert_uint_eq(c->n_listen, 1);
	ck_assert_str_eq(c->listen[0].text, "0.0.0.0:8080");
	ck_assert_uint_eq(c->workers, ncpu > 256 ? 256 : ncpu);
	ck_assert_str_eq(c->user, "nobody");
	ck_assert_str_eq(c->admin_listen.text, "127.0.0.1:9090");
	ck_assert_str_eq(c->control_socket, "/run/edge/edged.sock");
	ck_assert_str_eq(c->pin_dir, EDGE_PIN_DIR_DEFAULT);
	ck_assert(c->io_uring);
	ck_assert_uint_eq(c->limits.max_connections, 10000);
	ck_assert_uint_eq(c->limits.max_request_line, 8192);
	ck_assert_uint_eq(c->limits.max_header_bytes, 32768);
	ck_assert_uint_eq(c->limits.max_headers, 100);
	ck_assert_uint_eq(c->limits.max_body_bytes, 10 << 20);
	ck_assert_uint_eq(c->limits.max_inflight, 16384);
	ck_assert_uint_eq(c->limits.max_inflight_per_route, 4096);
	ck_assert_uint_eq(c->limits.body_buffer, 64 * 1024);
	ck_assert_uint_eq(c->timeouts.header_ms, 10000);
	ck_assert_uint_eq(c->timeouts.body_ms, 30000);
	ck_assert_uint_eq(c->timeouts.body_min_rate, 1024);
	ck_assert_uint_eq(c->timeouts.idle_keepalive_ms, 60000);
	ck_assert_uint_eq(c->timeouts.upstream_connect_ms, 5000);
	ck_assert_uint_eq(c->timeouts.upstream_response_ms, 60000);
	ck_assert_uint_eq(c->timeouts.tunnel_idle_ms, 300000);
	ck_assert_uint_eq(c->timeouts.drain_ms, 30000);
	ck_assert_uint_eq(c->ratelimit.per_min, 0);
	ck_assert(c->http2.enabled);
	ck_assert(c->http2.cleartext);
	ck_assert_uint_eq(c->http2.max_concurrent_streams, 128);
	ck_assert_uint_eq(c->http2.initial_window_size, 65535);
	ck_assert_uint_eq(c->http2.max_header_list_size, 65536);
	ck_assert_uint_eq(c->upstream.eject_after, 3);
	ck_assert_uint_eq(c->upstream.eject_base_ms, 10000);
	ck_assert_uint_eq(c->upstream.eject_max_ms, 300000);
	ck_assert_str_eq(c->analytics.file, "");
	ck_assert_uint_eq(c->analytics.queue, 65536);
	ck_assert(c->analytics.database);
	ck_assert_str_eq(c->analytics.spool, "");
	ck_assert_uint_eq(c->analytics.spool_max, 256 << 20);
	ck_assert_uint_eq(c->analytics.spool_memory, 16384);
	ck_assert_uint_eq(c->wake.restart_window_ms, 10000);
	ck_assert_uint_eq(c->wake.retry_max_ms, 60000);
	ck_assert_ptr_null(c->pg);
	ck_assert_uint_eq(c->trusted_proxies.n, 0);
	ck_assert_uint_eq(src->n_projects, 0);
	ck_assert_uint_eq(c->n_warnings, 0);
	config_free(c);
	route_src_free(src);
	config_free(NULL);
	route_src_free(NULL);
}
END_TEST

/* wake.retry_max: the back-off's cap (docs/wake.md, "The back-off"). */
START_TEST(test_wake_retry_max)
{
	struct config *c = NULL;
	struct errbuf err;
	struct route_src *src = NULL;

	ck_assert_int_eq(config_load(write_conf("wake = { command = \"w %s\"; "
						"retry_max = \"5m\"; };\n"),
				     &c, &src, &err),
			 0);
	ck_assert_uint_eq(c->wake.retry_max_ms, 300000);
	config_free(c);
	route_src_free(src);
	ck_assert_int_eq(config_load(write_conf("wake = { command = \"w %s\"; "
						"retry_max = \"1s\"; };\n"),
				     &c, &src, &err),
			 0);
	ck_assert_uint_eq(c->wake.retry_max_ms, 1000);
	config_free(c);
	route_src_free(src);
}
END_TEST

/* The http2 group: each key set, sizes as integers or with a suffix,
 * both ends of each range; a key left out keeps its default. */
START_TEST(test_http2)
{
	struct errbuf err = {""};
	struct config *c = NULL;

	ck_assert_msg(
	    config_load(write_conf("http2 = {\n"
				   "  enabled = false;\n"
				   "  cleartext = false;\n"
				   "  max_concurrent_streams = 4096;\n"
				   "  initial_window_size = \"16M\";\n"
				   "  max_header_list_size = \"1M\";\n"
				   "};\n"),
			&c, NULL, &err) == 0,
	    "%s", err.msg);
	ck_assert(!c->http2.enabled);
	ck_assert(!c->http2.cleartext);
	ck_assert_uint_eq(c->http2.max_concurrent_streams, 4096);
	ck_assert_uint_eq(c->http2.initial_window_size, 16777216);
	ck_assert_uint_eq(c->http2.max_header_list_size, 1 << 20);
	config_free(c);
	c = NULL;
	ck_assert_msg(config_load(write_conf("http2 = {\n"
					     "  max_concurrent_streams = 1;\n"
					     "  initial_window_size = \"1k\";\n"
					     "  max_header_list_size = 1024;\n"
					     "};\n"),
				  &c, NULL, &err) == 0,
		      "%s", err.msg);
	ck_assert(c->http2.enabled);
	ck_assert(c->http2.cleartext);
	ck_assert_uint_eq(c->http2.max_concurrent_streams, 1);
	ck_assert_uint_eq(c->http2.initial_window_size, 1024);
	ck_assert_uint_eq(c->http2.max_header_list_size, 1024);
	config_free(c);
	c = NULL;
	ck_assert_msg(config_load(write_conf("http2 = { cleartext = false; "
					     "initial_window_size = 1048576; "
					     "};\n"),
				  &c, NULL, &err) == 0,
		      "%s", err.msg);
	ck_assert(c->http2.enabled);
	ck_assert(!c->http2.cleartext);
	ck_assert_uint_eq(c->http2.max_concurrent_streams, 128);
	ck_assert_uint_eq(c->http2.initial_window_size, 1 << 20);
	ck_assert_uint_eq(c->http2.max_header_list_size, 65536);
	config_free(c);
}
END_TEST

/* The analytics group: the database sink's keys, and what a reload
 * compares (they apply at the next start). */
START_TEST(test_analytics_keys)
{
	struct errbuf err = {""};
	struct config *c = NULL, *d = NULL;
	const char *text =
	    "pg = \"host=127.0.0.1 dbname=edge\";\n"
	    "analytics = { spool = \"/var/spool/edge\"; spool_max = \"1G\"; "
	    "spool_memory = 1024; file = \"/var/log/edge/r.jsonl\"; };\n";

	ck_assert_msg(config_load(write_conf(text), &c, NULL, &err) == 0, "%s",
		      err.msg);
	ck_assert_str_eq(c->pg, "host=127.0.0.1 dbname=edge");
	ck_assert(c->analytics.database);
	ck_assert_str_eq(c->analytics.spool, "/var/spool/edge");
	ck_assert_uint_eq(c->analytics.spool_max, 1ULL << 30);
	ck_assert_uint_eq(c->analytics.spool_memory, 1024);
	ck_assert_str_eq(c->analytics.file, "/var/log/edge/r.jsonl");
	ck_assert_msg(config_load(write_conf(text), &d, NULL, &err) == 0, "%s",
		      err.msg);
	ck_assert(!config_analytics_differs(&c->analytics, &d->analytics));
	d->analytics.spool_max++;
	ck_assert(config_analytics_differs(&c->analytics, &d->analytics));
	d->analytics.spool_max--;
	d->analytics.database = false;
	ck_assert(config_analytics_differs(&c->analytics, &d->analytics));
	config_free(d);
	d = NULL;
	/* the database sink off: no spool needed, none allowed */
	ck_assert_msg(
	    config_load(write_conf("pg = \"dbname=edge\";\n"
				   "analytics = { database = false; };\n"),
			&d, NULL, &err) == 0,
	    "%s", err.msg);
	ck_assert(!d->analytics.database);
	ck_assert(config_analytics_differs(&c->analytics, &d->analytics));
	config_free(c);
	config_free(d);
}
END_TEST

/* A deployment's health_check, its defaults and the copy a route
 * source makes of it. */
START_TEST(test_health_check)
{
	struct config *c = NULL;
	struct route_src *src = NULL;
	struct route_src_project cp;
	struct errbuf err = {""};
	const struct config_health_check *hc;

	ck_assert_msg(
	    config_load(write_conf(HC_ENV("  health_check = { type = \"http\"; "
					  "path = \"/healthz?x=1\"; rise = 4; "
					  "};\n")),
			&c, &src, &err) == 0,
	    "%s", err.msg);
	hc = &src->projects[0].envs[0].deployment.hc;
	ck_assert_int_eq(hc->type, CONFIG_HC_HTTP);
	ck_assert_str_eq(hc->path, "/healthz?x=1");
	ck_assert_uint_eq(hc->interval_ms, 2000);
	ck_assert_uint_eq(hc->timeout_ms, 1000);
	ck_assert_uint_eq(hc->expect_status, 200);
	ck_assert_uint_eq(hc->rise, 4);
	ck_assert_uint_eq(hc->fall, 3);
	ck_assert_int_eq(route_src_project_dup(&src->projects[0], &cp), 0);
	ck_assert_str_eq(cp.envs[0].deployment.hc.path, "/healthz?x=1");
	ck_assert_uint_eq(cp.envs[0].deployment.hc.rise, 4);
	route_src_project_clear(&cp);
	route_src_free(src);
	config_free(c);
	ck_assert_int_eq(config_load(write_conf(HC_ENV("")), &c, &src, &err),
			 0);
	ck_assert_int_eq(src->projects[0].envs[0].deployment.hc.type,
			 CONFIG_HC_NONE);
	route_src_free(src);
	config_free(c);
}
END_TEST

/* The same health_check written as the file's group and as the
 * database's JSON object (config_health_check_json): the same check, or
 * the same message after the key. */
struct hc_same {
	const char *group; /* inside health_check = { ... } */
	const char *json;
};

static const struct hc_same hc_sames[] = {
    {"type = \"tcp\";", "{\"type\": \"tcp\"}"},
    {"type = \"http\"; path = \"/healthz\"; interval = \"200ms\"; "
     "timeout = \"150ms\"; expect_status = 204; rise = 3; fall = 4;",
     "{\"type\": \"http\", \"path\": \"/healthz\", \"interval\": \"200ms\", "
     "\"timeout\": \"150ms\", \"expect_status\": 204, \"rise\": 3, "
     "\"fall\": 4}"},
    {"type = \"http\"; interval = \"1h\"; timeout = \"1m\";",
     "{\"type\": \"http\", \"interval\": \"1h\", \"timeout\": \"1m\"}"},
    {"path = \"/h\";", "{\"path\": \"/h\"}"},
    {"type = \"udp\";", "{\"type\": \"udp\"}"},
    {"type = 7;", "{\"type\": 7}"},
    {"type = \"http\"; bogus = 1;", "{\"type\": \"http\", \"bogus\": 1}"},
    {"type = \"http\"; path = \"h\";", "{\"type\": \"http\", \"path\": \"h\"}"},
    {"type = \"tcp\"; path = \"/h\";", "{\"type\": \"tcp\", \"path\": \"/h\"}"},
    {"type = \"http\"; path = \"/a b\";",
     "{\"type\": \"http\", \"path\": \"/a b\"}"},
    {"type = \"http\"; interval = \"5x\";",
     "{\"type\": \"http\", \"interval\": \"5x\"}"},
    {"type = \"http\"; interval = 5;", "{\"type\": \"http\", \"interval\": 5}"},
    {"type = \"http\"; interval = \"99ms\";",
     "{\"type\": \"http\", \"interval\": \"99ms\"}"},
    {"type = \"http\"; timeout = \"2m\";",
     "{\"type\": \"http\", \"timeout\": \"2m\"}"},
    {"type = \"http\"; interval = \"1s\"; timeout = \"2s\";",
     "{\"type\": \"http\", \"interval\": \"1s\", \"timeout\": \"2s\"}"},
    {"type = \"http\"; expect_status = 600;",
     "{\"type\": \"http\", \"expect_status\": 600}"},
    {"type = \"http\"; expect_status = \"200\";",
     "{\"type\": \"http\", \"expect_status\": \"200\"}"},
    {"type = \"http\"; rise = 0;", "{\"type\": \"http\", \"rise\": 0}"},
    {"type = \"http\"; fall = -1;", "{\"type\": \"http\", \"fall\": -1}"},
    {"type = \"http\"; fall = 1.5;", "{\"type\": \"http\", \"fall\": 1.5}"},
    {"type = \"http\"; fall = true;", "{\"type\": \"http\", \"fall\": true}"},
};

START_TEST(test_health_check_same)
{
	const struct hc_same *t = &hc_sames[_i];
	struct config_health_check fh, jh;
	struct config *c = NULL;
	struct route_src *src = NULL;
	struct errbuf ferr = {""}, jerr = {""};
	char text[1024], *key;
	json_t *o = json_loads(t->json, 0, NULL);
	int frc, jrc;

	ck_assert_ptr_nonnull(o);
	snprintf(text, sizeof(text), HC_ENV("  health_check = { %s };\n"),
		 t->group);
	frc = config_load(write_conf(text), &c, &src, &ferr);
	jrc = config_health_check_json(o, &jh, &jerr);
	ck_assert_msg(frc == jrc, "%s: file %d (%s), JSON %d (%s)", t->group,
		      frc, ferr.msg, jrc, jerr.msg);
	if (frc == 0) {
		memset(&fh, 0, sizeof(fh));
		fh = src->projects[0].envs[0].deployment.hc;
		ck_assert_mem_eq(&fh, &jh, sizeof(fh));
		ck_assert_int_ne(fh.type, CONFIG_HC_NONE);
	} else {
		/* "FILE:LINE: ...deployment.health_check.KEY: MSG" against
		 * "KEY: MSG"; a fault of the group's: "...health_check: MSG"
		 * against "MSG" */
		key = strstr(ferr.msg, "deployment.health_check");
		ck_assert_msg(key != NULL, "%s", ferr.msg);
		key += strlen("deployment.health_check");
		if (*key == '.')
			key++;
		else if (strncmp(key, ": ", 2) == 0)
			key += 2;
		ck_assert_str_eq(key, jerr.msg);
	}
	json_decref(o);
	route_src_free(src);
	config_free(c);
}
END_TEST

START_TEST(test_values)
{
	struct errbuf err = {""};
	struct config *c = NULL;
	struct route_src *src = NULL;
	const struct route_src_env *e;
	const char *text =
	    "listen = [ \"[::]:443\", \"127.0.0.1:80\" ];\n"
	    "workers = 3;\n"
	    "io_uring = false;\n"
	    "limits = { max_body_bytes = \"2M\"; max_header_bytes = 4096; "
	    "body_buffer = \"16M\"; };\n"
	    "timeouts = { header = \"1m30s\"; upstream_connect = \"250ms\"; "
	    "body = \"1s\"; body_min_rate = 0; };\n"
	    "ratelimit = { rate = \"10/s\"; }; upstream = { eject_after = 5; "
	    "eject_base = \"1s\"; eject_max = \"1h\"; };\n" PROJ(
		"  ip_block = [ \"10.1.2.3/8\" ];\n",
		"    max_body_bytes = 0;\n"
		"    routes = ( { prefix = \"/fn\"; strip_prefix = true; } );\n"
		"    security_headers = { hsts = true; hsts_max_age = \"1d\"; "
		"};"
		"\n");

	ck_assert_msg(config_load(write_conf(text), &c, &src, &err) == 0, "%s",
		      err.msg);
	ck_assert_str_eq(c->listen[0].text, "[::]:443");
	ck_assert_uint_eq(c->workers, 3);
	ck_assert(!c->io_uring);
	ck_assert_uint_eq(c->limits.max_body_bytes, 2 << 20);
	ck_assert_uint_eq(c->limits.max_header_bytes, 4096);
	ck_assert_uint_eq(c->limits.body_buffer, 16 << 20);
	ck_assert_uint_eq(c->timeouts.header_ms, 90000);
	ck_assert_uint_eq(c->timeouts.body_ms, 1000);
	ck_assert_uint_eq(c->timeouts.body_min_rate, 0);
	ck_assert_uint_eq(c->timeouts.upstream_connect_ms, 250);
	ck_assert_uint_eq(c->ratelimit.per_min, 600);
	ck_assert_uint_eq(c->ratelimit.burst, 10);
	ck_assert_uint_eq(c->upstream.eject_after, 5);
	ck_assert_uint_eq(c->upstream.eject_base_ms, 1000);
	ck_assert_uint_eq(c->upstream.eject_max_ms, 3600000);
	e = &src->projects[0].envs[0];
	ck_assert_uint_eq(e->max_body_bytes, 0);
	ck_assert_uint_eq(e->routes[0].max_body_bytes, 0);
	ck_assert(e->routes[0].strip_prefix);
	ck_assert(e->security.hsts);
	ck_assert(e->security.nosniff);
	ck_assert_uint_eq(e->security.hsts_max_age_s, 86400);
	ck_assert_str_eq(e->name, "e");
	ck_assert_str_eq(src->projects[0].name, "p");
	ck_assert(src->projects[0].enabled);
	/* host bits: normalised, with a warning naming file, line and key */
	ck_assert_uint_eq(c->n_warnings, 1);
	ck_assert_ptr_nonnull(
	    strstr(c->warnings[0], ":9: projects[0].ip_block[0]: "));
	ck_assert_ptr_nonnull(strstr(c->warnings[0], "10.0.0.0/8"));
	config_free(c);
	route_src_free(src);
}
END_TEST

/* listen and tls.listen entries as groups: proxy_protocol per address. */
START_TEST(test_listen_groups)
{
	static const char text[] =
	    "listen = ( \"127.0.0.1:18080\",\n"
	    "  { address = \"127.0.0.1:18081\"; proxy_protocol = true; },\n"
	    "  { address = \"127.0.0.1:18082\"; } );\n";
	struct errbuf err = {""};
	struct config *c = NULL;

	ck_assert_msg(config_load(write_conf(text), &c, NULL, &err) == 0, "%s",
		      err.msg);
	ck_assert_uint_eq(c->n_listen, 3);
	ck_assert_str_eq(c->listen[1].text, "127.0.0.1:18081");
	ck_assert(!c->listen[0].proxy_protocol);
	ck_assert(c->listen[1].proxy_protocol);
	ck_assert(!c->listen[2].proxy_protocol);
	/* no trusted_proxies: every connection to it would be closed */
	ck_assert_uint_eq(c->n_warnings, 1);
	ck_assert_ptr_nonnull(strstr(c->warnings[0],
				     "listen[1]: proxy_protocol with "
				     "trusted_proxies empty"));
	config_free(c);
}
END_TEST

/* send_proxy per deployment (default off) and per TCP route (default:
 * the deployment's), proxy_protocol per TCP route, shared by the TLS
 * passthrough routes of an address. */
START_TEST(test_send_proxy)
{
	static const char text[] =
	    "trusted_proxies = [ \"10.0.0.0/8\" ];\n"
	    "tcp_routes = (\n"
	    "  { listen = \"127.0.0.1:5000\"; environment = \"e\"; },\n"
	    "  { listen = \"127.0.0.1:5001\"; environment = \"e\";\n"
	    "    send_proxy = \"off\"; proxy_protocol = true; },\n"
	    "  { listen = \"127.0.0.1:8443\"; sni = \"a.test\";\n"
	    "    environment = \"e\"; send_proxy = \"v1\";\n"
	    "    proxy_protocol = true; },\n"
	    "  { listen = \"127.0.0.1:8443\"; sni = \"b.test\";\n"
	    "    environment = \"e\"; proxy_protocol = true; } );\n"
	    "projects = ( { id = \"p\"; environments = (\n"
	    "  { id = \"e\"; domains = [ \"a.example.com\" ];\n"
	    "    deployment = { id = \"d\"; upstreams = [ \"127.0.0.1:80\" ];\n"
	    "      send_proxy = \"v2\"; }; },\n"
	    "  { id = \"f\"; domains = [ \"f.example.com\" ];\n"
	    "    deployment = { id = \"d2\";\n"
	    "      upstreams = [ \"127.0.0.1:81\" ]; }; } ); } );\n";
	struct errbuf err = {""};
	struct config *c = NULL;
	struct route_src *src = NULL;

	ck_assert_msg(config_load(write_conf(text), &c, &src, &err) == 0, "%s",
		      err.msg);
	ck_assert_uint_eq(c->n_tcp_routes, 4);
	ck_assert_int_eq(c->tcp_routes[0].send_proxy,
			 CONFIG_SEND_PROXY_INHERIT);
	ck_assert(!c->tcp_routes[0].listen.proxy_protocol);
	ck_assert_int_eq(c->tcp_routes[1].send_proxy, CONFIG_SEND_PROXY_OFF);
	ck_assert(c->tcp_routes[1].listen.proxy_protocol);
	ck_assert_int_eq(c->tcp_routes[2].send_proxy, CONFIG_SEND_PROXY_V1);
	ck_assert(c->tcp_routes[3].listen.proxy_protocol);
	ck_assert_int_eq(src->projects[0].envs[0].deployment.send_proxy,
			 CONFIG_SEND_PROXY_V2);
	ck_assert_int_eq(src->projects[0].envs[1].deployment.send_proxy,
			 CONFIG_SEND_PROXY_OFF);
	/* the version a connection gets: the route's, else the
	 * deployment's */
	ck_assert_uint_eq(config_send_proxy_version(CONFIG_SEND_PROXY_INHERIT,
						    CONFIG_SEND_PROXY_V2),
			  2);
	ck_assert_uint_eq(config_send_proxy_version(CONFIG_SEND_PROXY_OFF,
						    CONFIG_SEND_PROXY_V2),
			  0);
	ck_assert_uint_eq(config_send_proxy_version(CONFIG_SEND_PROXY_V1,
						    CONFIG_SEND_PROXY_OFF),
			  1);
	ck_assert_uint_eq(config_send_proxy_version(CONFIG_SEND_PROXY_INHERIT,
						    CONFIG_SEND_PROXY_INHERIT),
			  0);
	config_free(c);
	route_src_free(src);
}
END_TEST

/* A TCP route with proxy_protocol and trusted_proxies empty: warned. */
START_TEST(test_tcp_pp_untrusted)
{
	static const char text[] =
	    "tcp_routes = ( { listen = \"127.0.0.1:5000\"; environment = "
	    "\"e\";\n"
	    "  proxy_protocol = true; } );\n";
	struct errbuf err = {""};
	struct config *c = NULL;

	ck_assert_msg(config_load(write_conf(text), &c, NULL, &err) == 0, "%s",
		      err.msg);
	ck_assert_uint_eq(c->n_warnings, 1);
	ck_assert_ptr_nonnull(strstr(c->warnings[0],
				     "tcp_routes[0]: proxy_protocol with "
				     "trusted_proxies empty"));
	config_free(c);
}
END_TEST

/* trusted_proxies: IPv4 and IPv6 prefixes and bare addresses, host bits
 * and IPv4-mapped prefixes normalised with a warning each, a /0 warned
 * about; at most TRUSTED_MAX; a peer inside one is trusted. */
START_TEST(test_trusted_proxies)
{
	static const char text[] =
	    "trusted_proxies = [ \"10.0.0.0/8\", \"2001:db8::/32\",\n"
	    "  \"192.0.2.7\", \"::1\",\n"
	    "  \"172.16.1.2/12\",\n"
	    "  \"::ffff:198.51.100.0/120\",\n"
	    "  \"::/0\" ];\n";
	struct errbuf err = {""};
	struct config *c = NULL;
	struct cidr a;
	char *big;
	size_t n, i;

	ck_assert_msg(config_load(write_conf(text), &c, NULL, &err) == 0, "%s",
		      err.msg);
	ck_assert_uint_eq(c->trusted_proxies.n, 7);
	ck_assert_uint_eq(c->n_warnings, 3);
	ck_assert_ptr_nonnull(strstr(c->warnings[0],
				     ":3: trusted_proxies[4]: "
				     "\"172.16.1.2/12\" has host "
				     "bits set; using "
				     "172.16.0.0/12"));
	ck_assert_ptr_nonnull(strstr(c->warnings[1],
				     ":4: trusted_proxies[5]: \"::ffff:"
				     "198.51.100.0/120\" is IPv4-mapped; "
				     "using 198.51.100.0/24"));
	ck_assert_ptr_nonnull(strstr(c->warnings[2], ":5: trusted_proxies[6]: "
						     "::/0 trusts every IPv6 "
						     "peer"));
	ck_assert_int_eq(cidr_parse_addr("10.9.8.7", &a, NULL), 0);
	ck_assert(trusted_has(&c->trusted_proxies, &a));
	/* an IPv4-mapped peer is its IPv4 address */
	ck_assert_int_eq(cidr_parse_addr("::ffff:198.51.100.9", &a, NULL), 0);
	ck_assert(trusted_has(&c->trusted_proxies, &a));
	ck_assert_int_eq(cidr_parse_addr("192.0.2.8", &a, NULL), 0);
	ck_assert(!trusted_has(&c->trusted_proxies, &a));
	/* an address that could not be read: never, even under ::/0 */
	memset(&a, 0, sizeof(a));
	ck_assert(!trusted_has(&c->trusted_proxies, &a));
	config_free(c);

	/* TRUSTED_MAX entries load, one more does not */
	for (n = TRUSTED_MAX; n <= TRUSTED_MAX + 1; n++) {
		big = malloc(64 + n * 24);
		ck_assert_ptr_nonnull(big);
		strcpy(big, "trusted_proxies = [ ");
		for (i = 0; i < n; i++)
			sprintf(big + strlen(big), "%s\"10.%zu.%zu.0/24\"",
				i ? ", " : "", i / 256, i % 256);
		strcat(big, " ];\n");
		c = NULL;
		if (n == TRUSTED_MAX) {
			ck_assert_msg(
			    config_load(write_conf(big), &c, NULL, &err) == 0,
			    "%s", err.msg);
			ck_assert_uint_eq(c->trusted_proxies.n, TRUSTED_MAX);
			config_free(c);
		} else {
			ck_assert_int_eq(
			    config_load(write_conf(big), &c, NULL, &err),
			    -EINVAL);
			ck_assert_ptr_nonnull(
			    strstr(err.msg, "trusted_proxies[256]: more than "
					    "256 entries"));
		}
		free(big);
	}
}
END_TEST

/* One duration grammar for every setting: d, h, m, s and ms wherever a
 * duration goes; each setting keeps its own range and resolution. */
START_TEST(test_duration_grammar)
{
	struct errbuf err = {""};
	struct config *c = NULL;
	struct route_src *src = NULL;
	const char *text =
	    "timeouts = { tunnel_idle = \"1d\"; header = \"1m30s500ms\"; "
	    "drain = \"1h\"; };\n" PROJ(
		"",
		"    security_headers = { hsts_max_age = \"2000ms\"; };\n"
		"  }, {\n"
		"    id = \"e2\"; domains = [ \"b.example.com\" ];\n"
		"    deployment = { id = \"d2\"; upstreams = [ "
		"\"127.0.0.1:81\" ]; };\n"
		"    security_headers = { hsts_max_age = \"1d12h\"; };\n"
		"  }, {\n"
		"    id = \"e3\"; domains = [ \"c.example.com\" ];\n"
		"    deployment = { id = \"d3\"; upstreams = [ "
		"\"127.0.0.1:82\" ]; };\n"
		"    security_headers = { hsts_max_age = \"31536000\"; };\n");

	ck_assert_msg(config_load(write_conf(text), &c, &src, &err) == 0, "%s",
		      err.msg);
	ck_assert_uint_eq(c->timeouts.tunnel_idle_ms, 86400000);
	ck_assert_uint_eq(c->timeouts.header_ms, 90500);
	ck_assert_uint_eq(c->timeouts.drain_ms, 3600000);
	ck_assert_uint_eq(src->projects[0].envs[0].security.hsts_max_age_s, 2);
	ck_assert_uint_eq(src->projects[0].envs[1].security.hsts_max_age_s,
			  129600);
	/* a bare number of seconds, as configurations have written it */
	ck_assert_uint_eq(src->projects[0].envs[2].security.hsts_max_age_s,
			  31536000);
	config_free(c);
	route_src_free(src);
}
END_TEST

/* The settings apart from the projects: what a project leaves to the
 * settings stays unresolved in the file source (the table gets it from
 * the settings in force), and a caller may check the projects without
 * keeping them. */
START_TEST(test_projects_apart)
{
	struct errbuf err = {""};
	struct config *c = NULL;
	struct route_src *src = NULL;
	struct route_defaults def;
	const char *text =
	    "limits = { max_body_bytes = \"2M\"; max_inflight_per_route = 7; "
	    "};\n" PROJ("",
			"    routes = ( { prefix = \"/a\"; },\n"
			"      { prefix = \"/b\"; max_body_bytes = 9; } );\n");
	const struct route_src_env *e;

	ck_assert_msg(config_load(write_conf(text), &c, &src, &err) == 0, "%s",
		      err.msg);
	e = &src->projects[0].envs[0];
	ck_assert_uint_eq(e->max_body_bytes, ROUTE_SRC_INHERIT);
	ck_assert_uint_eq(e->routes[0].max_body_bytes, ROUTE_SRC_INHERIT);
	ck_assert_uint_eq(e->routes[1].max_body_bytes, 9);
	config_route_defaults(c, &def);
	ck_assert_uint_eq(def.max_body_bytes, 2 << 20);
	ck_assert_uint_eq(def.max_inflight_per_route, 7);
	config_free(c);
	route_src_free(src);
	c = NULL;
	/* no list wanted: checked all the same */
	ck_assert_int_eq(config_load(write_conf(text), &c, NULL, &err), 0);
	config_free(c);
	c = NULL;
	ck_assert_int_eq(config_load(write_conf(PROJ("", "    bogus = 1;\n")),
				     &c, NULL, &err),
			 -EINVAL);
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(
	    strstr(err.msg, "projects[0].environments[0].bogus: unknown key"));
}
END_TEST

START_TEST(test_example)
{
	struct errbuf err = {""};
	struct config *c = NULL;
	struct route_src *src = NULL;
	int rc;

	rc = config_load("examples/edge.conf", &c, &src, &err);
	if (rc == -ENOENT) /* run from build/tests */
		rc = config_load("../../examples/edge.conf", &c, &src, &err);
	ck_assert_msg(rc == 0, "%s", err.msg);
	ck_assert_uint_eq(src->n_projects, 3);
	ck_assert_uint_eq(c->n_warnings, 0);
	ck_assert_str_eq(src->projects[0].envs[1].domains[0],
			 "*.preview.shop.example.com");
	ck_assert_uint_eq(src->projects[0].envs[0].routes[0].max_body_bytes,
			  50 << 20);
	ck_assert(!src->projects[2].enabled);
	config_free(c);
	route_src_free(src);
}
END_TEST

START_TEST(test_missing_file)
{
	struct errbuf err = {""};
	struct config *c = NULL;
	struct route_src *src = NULL;
	char path[128];

	snprintf(path, sizeof(path), "%s/none.conf", tmpdir);
	ck_assert_int_eq(config_load(path, &c, &src, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "none.conf: No such file"));
}
END_TEST

/* ---- the file itself: what libconfig would choke on -------------------- */

/* Make tmpdir/name a kind of file that is not regular. */
static void make_special(const char *kind, const char *path)
{
	if (strcmp(kind, "dir") == 0) {
		ck_assert_int_eq(mkdir(path, 0755), 0);
	} else if (strcmp(kind, "fifo") == 0) {
		ck_assert_int_eq(mkfifo(path, 0644), 0);
	} else if (strcmp(kind, "socket") == 0) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);

		ck_assert_int_ge(fd, 0);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
		ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)),
				 0);
		/* the socket file outlives fd; teardown removes it */
		close(fd);
	} else {
		ck_abort_msg("unknown kind %s", kind);
	}
}

static const struct special {
	const char *kind; /* make_special's, or a path to use as it is */
	const char *what;
} specials[] = {
    {"dir", "a directory"},
    {"fifo", "a FIFO"}, /* the old code blocked in fopen: Check's timeout */
    {"socket", "a socket"},
    {"/dev/null", "a character device"},
};

/* The configuration path is not a regular file: refused before anything
 * reads it (libconfig's scanner calls exit(2) on a directory, and a FIFO
 * blocks its fopen), with "PATH: not a regular file (WHAT)". */
START_TEST(test_not_regular)
{
	const struct special *t = &specials[_i];
	struct errbuf err = {""};
	struct config *c = NULL;
	struct route_src *src = NULL;
	char path[128], want[256];

	if (t->kind[0] == '/') {
		snprintf(path, sizeof(path), "%s", t->kind);
	} else {
		snprintf(path, sizeof(path), "%s/edge.conf", tmpdir);
		make_special(t->kind, path);
	}
	ck_assert_int_eq(config_load(path, &c, &src, &err), -EINVAL);
	ck_assert_ptr_null(c);
	ck_assert_ptr_null(src);
	snprintf(want, sizeof(want), "%s: not a regular file (%s)", path,
		 t->what);
	ck_assert_str_eq(err.msg, want);
}
END_TEST

/* A file with no settings (empty, truncated to nothing, only blanks or
 * comments) is an error, not "all defaults, no projects". */
START_TEST(test_empty)
{
	static const char *const texts[] = {
	    "",
	    "\n  \t\n\n",
	    "# only a comment\n// and another\n/* and a\n   block */\n",
	};
	struct errbuf err = {""};
	struct config *c = NULL;
	struct route_src *src = NULL;
	const char *path = write_conf(texts[_i]);
	char want[256];

	ck_assert_int_eq(config_load(path, &c, &src, &err), -EINVAL);
	ck_assert_ptr_null(c);
	ck_assert_ptr_null(src);
	snprintf(want, sizeof(want), "%s: no settings (empty file?)", path);
	ck_assert_str_eq(err.msg, want);
}
END_TEST

/* A NUL byte anywhere is refused with its line (libconfig cuts a string
 * at one: "x\0y" loaded as "x"). */
START_TEST(test_nul)
{
#define NUL_CASE(text, line)                                                   \
	{                                                                      \
		text, sizeof(text) - 1, line                                   \
	}
	static const struct {
		const char *text;
		size_t len;
		int line;
	} t[] = {
	    NUL_CASE("workers = 2;\nuser = \"dae\0mon\";\n", 2),
	    NUL_CASE("workers = 2;\n\n  \0\n", 3),
	};
#undef NUL_CASE
	struct errbuf err = {""};
	struct config *c = NULL;
	struct route_src *src = NULL;
	const char *path = write_file("edge.conf", t[_i].text, t[_i].len);
	char want[256];

	ck_assert_int_eq(config_load(path, &c, &src, &err), -EINVAL);
	ck_assert_ptr_null(c);
	ck_assert_ptr_null(src);
	snprintf(want, sizeof(want), "%s:%d: NUL byte", path, t[_i].line);
	ck_assert_msg(strncmp(err.msg, want, strlen(want)) == 0,
		      "'%s' does not start with '%s'", err.msg, want);
}
END_TEST

/* Integers are read exactly as written, decimal or hex, with or without
 * an L suffix (libconfig 1.5 keeps only 32 bits without one). */
START_TEST(test_exact_integers)
{
	struct errbuf err = {""};
	struct config *c = NULL;
	struct route_src *src = NULL;
	const char *text =
	    "workers = +3;\n"
	    "limits = { max_body_bytes = 5000000000;\n"
	    "  max_connections = 0x10; body_buffer = 16777216L;\n"
	    "  max_inflight = 0x2710L; };\n"
	    "analytics = { queue = 0x10000; };\n" PROJ(
		"", "    max_body_bytes = 0x140000000;\n"
		    "    routes = ( { prefix = \"/a\";\n"
		    "      max_body_bytes = 1099511627776; } );\n");

	ck_assert_msg(config_load(write_conf(text), &c, &src, &err) == 0, "%s",
		      err.msg);
	ck_assert_uint_eq(c->workers, 3);
	ck_assert_uint_eq(c->limits.max_body_bytes, 5000000000ULL);
	ck_assert_uint_eq(c->limits.max_connections, 16);
	ck_assert_uint_eq(c->limits.body_buffer, 16777216);
	ck_assert_uint_eq(c->limits.max_inflight, 10000);
	ck_assert_uint_eq(c->analytics.queue, 65536);
	ck_assert_uint_eq(src->projects[0].envs[0].max_body_bytes, 5ULL << 30);
	ck_assert_uint_eq(src->projects[0].envs[0].routes[0].max_body_bytes,
			  1ULL << 40);
	config_free(c);
	route_src_free(src);
}
END_TEST

/* A file larger than the cap is refused before it is read (a sparse one
 * here, so the test writes nothing). */
START_TEST(test_too_large)
{
	struct errbuf err = {""};
	struct config *c = NULL;
	struct route_src *src = NULL;
	const char *path = write_conf("workers = 2;\n");
	char want[256];

	ck_assert_int_eq(truncate(path, (16 << 20) + 1), 0);
	ck_assert_int_eq(config_load(path, &c, &src, &err), -EFBIG);
	ck_assert_ptr_null(c);
	ck_assert_ptr_null(src);
	snprintf(want, sizeof(want), "%s: larger than 16 MiB", path);
	ck_assert_msg(strncmp(err.msg, want, strlen(want)) == 0,
		      "'%s' does not start with '%s'", err.msg, want);
}
END_TEST

/* ---- @include ------------------------------------------------------------ */

/* Includes are read as the main file is, relative to the main file's
 * folder (nested ones too), an absolute path as it is; what they set is
 * read exactly, and errors in them name the included file and its line. */
START_TEST(test_include)
{
	struct errbuf err = {""};
	struct config *c = NULL;
	struct route_src *src = NULL;
	char sub[128], text[512], want[256];
	const char *path;

	snprintf(sub, sizeof(sub), "%s/sub", tmpdir);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	write_text("sub/a.conf",
		   "# nested includes are relative to the main file's folder\n"
		   "  @include \"sub/b.conf\" // a comment may follow\n"
		   "limits = { max_body_bytes = 5000000000; };\n");
	write_text("sub/b.conf", "user = \"daemon\";");
	write_text("abs.conf", "workers = 3;\n");
	snprintf(text, sizeof(text),
		 "listen = [ \"127.0.0.1:81\" ];\n"
		 "@include \"sub/a.conf\"\n"
		 "@include \"%s/abs.conf\"\n"
		 "admin_listen = \"127.0.0.1:9091\";\n",
		 tmpdir);
	path = write_conf(text);
	ck_assert_msg(config_load(path, &c, &src, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(c->listen[0].text, "127.0.0.1:81");
	ck_assert_str_eq(c->user, "daemon");
	ck_assert_uint_eq(c->limits.max_body_bytes, 5000000000ULL);
	ck_assert_uint_eq(c->workers, 3);
	ck_assert_str_eq(c->admin_listen.text, "127.0.0.1:9091");
	config_free(c);
	route_src_free(src);
	c = NULL;
	src = NULL;

	/* an error in the innermost file, then one after the includes */
	write_text("sub/b.conf", "\n\nuser = \"-x\";\n");
	ck_assert_int_eq(config_load(path, &c, &src, &err), -EINVAL);
	snprintf(want, sizeof(want), "%s/sub/b.conf:3: user: ", tmpdir);
	ck_assert_msg(strncmp(err.msg, want, strlen(want)) == 0,
		      "'%s' does not start with '%s'", err.msg, want);
	write_text("sub/b.conf", "user = \"daemon\";\n");
	write_conf("@include \"sub/a.conf\"\n"
		   "\n"
		   "workers = 0;\n");
	ck_assert_int_eq(config_load(path, &c, &src, &err), -EINVAL);
	snprintf(want, sizeof(want), "%s:3: workers: 0 is out of range", path);
	ck_assert_msg(strncmp(err.msg, want, strlen(want)) == 0,
		      "'%s' does not start with '%s'", err.msg, want);
	/* a syntax error in an included file */
	write_text("sub/b.conf", "user = ;\n");
	ck_assert_int_eq(config_load(path, &c, &src, &err), -EINVAL);
	snprintf(want, sizeof(want), "%s/sub/b.conf:1: syntax", tmpdir);
	ck_assert_msg(strncmp(err.msg, want, strlen(want)) == 0,
		      "'%s' does not start with '%s'", err.msg, want);
}
END_TEST

static const struct bad_include {
	const char *kind; /* tmpdir/inc made by make_special, or NULL */
	const char *text; /* the main file, "#!" on the @include's line */
	const char *msg;  /* after "PATH:LINE: " */
} bad_includes[] = {
    {"dir", "workers = 2;\n@include \"inc\" #!\n",
     "@include \"inc\": TMP/inc: not a regular file (a directory)"},
    {"fifo", "workers = 2;\n@include \"inc\" #!\n",
     "@include \"inc\": TMP/inc: not a regular file (a FIFO)"},
    {NULL, "workers = 2;\n@include \"\" #!\n",
     "@include \"\": TMP/: not a regular file (a directory)"},
    {NULL, "workers = 2;\n@include \"none.conf\" #!\n",
     "@include \"none.conf\": TMP/none.conf: No such file or directory"},
    {NULL, "workers = 2;\n@include \"edge.conf\" #!\n",
     "@include \"edge.conf\": TMP/edge.conf is already being read (an "
     "@include cycle)"},
    {NULL, "workers = 2;\n@include \"edge.conf\" workers = 3; #!\n",
     "only a comment may follow @include \"edge.conf\" on its line"},
};

/* An @include that cannot be read is refused, naming the line of the
 * @include, before libconfig could block on it or exit. */
START_TEST(test_include_bad)
{
	const struct bad_include *t = &bad_includes[_i];
	struct errbuf err = {""};
	struct config *c = NULL;
	struct route_src *src = NULL;
	char inc[128], want[512], msg[384];
	const char *path, *p;
	size_t n = 0;

	snprintf(inc, sizeof(inc), "%s/inc", tmpdir);
	if (t->kind)
		make_special(t->kind, inc);
	for (p = t->msg; *p && n + 64 < sizeof(msg); p++)
		if (strncmp(p, "TMP", 3) == 0) {
			n += (size_t)snprintf(msg + n, sizeof(msg) - n, "%s",
					      tmpdir);
			p += 2;
		} else {
			msg[n++] = *p;
		}
	msg[n] = '\0';
	path = write_conf(t->text);
	ck_assert_int_eq(config_load(path, &c, &src, &err) < 0, 1);
	ck_assert_ptr_null(c);
	ck_assert_ptr_null(src);
	snprintf(want, sizeof(want), "%s:%d: %s", path, marked_line(t->text),
		 msg);
	ck_assert_str_eq(err.msg, want);
}
END_TEST

/* A NUL byte in an included file names that file and line. */
START_TEST(test_include_nul)
{
	struct errbuf err = {""};
	struct config *c = NULL;
	struct route_src *src = NULL;
	char want[256];
	const char *path;

	write_file("inc.conf", "user = \"x\0y\";\n", 14);
	path = write_conf("workers = 2;\n@include \"inc.conf\"\n");
	ck_assert_int_eq(config_load(path, &c, &src, &err), -EINVAL);
	snprintf(want, sizeof(want), "%s/inc.conf:1: NUL byte", tmpdir);
	ck_assert_msg(strncmp(err.msg, want, strlen(want)) == 0,
		      "'%s' does not start with '%s'", err.msg, want);
}
END_TEST

START_TEST(test_helpers)
{
	struct errbuf err = {""};
	struct config_addr a;
	char d[300];
	uint64_t ms;

	ck_assert_int_eq(config_addr_parse("[2001:DB8::1]:8443", &a, &err), 0);
	ck_assert_str_eq(a.text, "[2001:db8::1]:8443");
	ck_assert_int_eq(config_addr_parse("[fe80::1%eth0]:80", &a, &err),
			 -EINVAL);
	ck_assert_int_eq(config_duration_parse("1h2m3s4ms", &ms, &err), 0);
	ck_assert_uint_eq(ms, 3723004);
	ck_assert_int_eq(config_duration_parse("500ms", &ms, &err), 0);
	ck_assert_uint_eq(ms, 500);
	ck_assert_int_eq(config_duration_parse("5ms5s", &ms, &err), -EINVAL);
	snprintf(d, sizeof(d), "WWW.Example.COM");
	ck_assert_int_eq(config_domain_check(d, false, &err), 0);
	ck_assert_str_eq(d, "www.example.com");
	snprintf(d, sizeof(d), "*.Example.com");
	ck_assert_int_eq(config_domain_check(d, false, &err), -EINVAL);
	ck_assert_int_eq(config_domain_check(d, true, &err), 0);
	ck_assert_str_eq(d, "*.example.com");
	snprintf(d, sizeof(d), "-a.example.com");
	ck_assert_int_eq(config_domain_check(d, true, &err), -EINVAL);
	snprintf(d, sizeof(d), "a..example.com");
	ck_assert_int_eq(config_domain_check(d, true, &err), -EINVAL);
	memset(d, 'a', 254);
	d[254] = '\0';
	ck_assert_int_eq(config_domain_check(d, true, &err), -EINVAL);
	ck_assert_str_eq(config_balance_name(CONFIG_BALANCE_IP_HASH),
			 "ip_hash");
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, test_bad, 0, sizeof(bad) / sizeof(bad[0]));
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_trusted_proxies);
	tcase_add_test(tc, test_listen_groups);
	tcase_add_test(tc, test_send_proxy);
	tcase_add_test(tc, test_tcp_pp_untrusted);
	tcase_add_test(tc, test_wake_retry_max);
	tcase_add_test(tc, test_tcp_routes);
	tcase_add_test(tc, test_tls);
	tcase_add_test(tc, test_values);
	tcase_add_test(tc, test_health_check);
	tcase_add_loop_test(tc, test_health_check_same, 0,
			    sizeof(hc_sames) / sizeof(hc_sames[0]));
	tcase_add_test(tc, test_analytics_keys);
	tcase_add_test(tc, test_http2);
	tcase_add_test(tc, test_example);
	tcase_add_test(tc, test_duration_grammar);
	tcase_add_test(tc, test_projects_apart);
	tcase_add_test(tc, test_missing_file);
	tcase_add_test(tc, test_helpers);
	tcase_add_test(tc, test_load_all);
	tcase_add_loop_test(tc, test_not_regular, 0, CK_NELEM(specials));
	tcase_add_loop_test(tc, test_empty, 0, 3);
	tcase_add_loop_test(tc, test_nul, 0, 2);
	tcase_add_test(tc, test_exact_integers);
	tcase_add_test(tc, test_too_large);
	tcase_add_test(tc, test_include);
	tcase_add_loop_test(tc, test_include_bad, 0, CK_NELEM(bad_includes));
	tcase_add_test(tc, test_include_nul);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(config_suite());
}
