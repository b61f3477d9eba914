/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_ctl.c - the control socket (ctl.c with lib/ctlproto.c as client)
 * and the admin listener (admin.c), each served by an event loop on a
 * thread of this process.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "admin.h"
#include "ctl.h"
#include "ctlproto.h"
#include "metrics.h"
#include "unit.h"

#define RELOAD_ERROR "/etc/edge/edge.conf:12: listen: bad address 'x'"

static char tmpdir[64];
static char sockpath[100];
static struct event_base *base;
static pthread_t loop_thread;
static bool loop_running;
static atomic_int handler_calls;

static int fake_routes(void *ctx, json_t **result, struct errbuf *err)
{
	(void)ctx;
	(void)err;
	atomic_fetch_add(&handler_calls, 1);
	*result = json_pack("{s:i,s:[{s:s,s:s}]}", "generation", 7, "routes",
			    "domain", "a.example.com", "project", "p1");
	return *result ? 0 : -ENOMEM;
}

static int fake_reload(void *ctx, json_t **result, struct errbuf *err)
{
	(void)ctx;
	(void)result;
	errbuf_set(err, "%s", RELOAD_ERROR);
	return -EINVAL;
}

static int fake_stats(void *ctx, json_t **result, struct errbuf *err)
{
	(void)ctx;
	(void)err;
	*result = json_pack("{s:{s:i}}", "counters", "requests_total", 5);
	return 0;
}

static const struct ctl_handlers fake = {
    .routes = fake_routes,
    .reload = fake_reload,
    .status = NULL,
    .stats = fake_stats,
};

static const char *sockdir(void)
{
	static char dir[160];

	snprintf(dir, sizeof(dir), "%s/run", tmpdir);
	return dir;
}

static void *loop_main(void *arg)
{
	(void)arg;
	event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY);
	return NULL;
}

/* Stops the loop from inside: a loopbreak sent before the loop has
 * started would be forgotten, an activated event is not. */
static struct event *stopper;

static void loop_stop_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	event_base_loopbreak(base);
}

static void loop_start(void)
{
	ck_assert_int_eq(pthread_create(&loop_thread, NULL, loop_main, NULL),
			 0);
	loop_running = true;
}

static void loop_stop(void)
{
	if (!loop_running)
		return;
	event_active(stopper, EV_READ, 0);
	pthread_join(loop_thread, NULL);
	loop_running = false;
}

static void setup(void)
{
	ck_assert_int_eq(evthread_use_pthreads(), 0);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/edge-ctl.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(sockpath, sizeof(sockpath), "%s/run/edged.sock", tmpdir);
	base = event_base_new();
	ck_assert_ptr_nonnull(base);
	stopper = event_new(base, -1, 0, loop_stop_cb, NULL);
	ck_assert_ptr_nonnull(stopper);
	atomic_store(&handler_calls, 0);
}

static void teardown(void)
{
	char cmd[128];

	loop_stop();
	event_free(stopper);
	event_base_free(base);
	base = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tmpdir);
}

/* A server on sockpath with the fake handlers, its loop running. */
static struct ctl_server *server_up(void)
{
	struct errbuf err = {""};
	struct ctl_server *s = NULL;
	int ret;

	ret = ctl_server_start(base, sockpath, &fake, NULL, &s, &err);
	ck_assert_msg(ret == 0, "ctl_server_start: %d %s", ret, err.msg);
	loop_start();
	return s;
}

static void server_down(struct ctl_server *s)
{
	loop_stop();
	ctl_server_free(s);
}

/* ctlproto_call with {"cmd": cmd}. */
static int call(const char *cmd, json_t **result, struct errbuf *err)
{
	json_t *req = json_pack("{s:s}", "cmd", cmd);
	int ret;

	ck_assert_ptr_nonnull(req);
	ret = ctlproto_call(sockpath, req, result, 3000, err);
	json_decref(req);
	return ret;
}

static int raw_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Read until EOF (at most size-1 bytes, 3 s): the NUL-terminated text. */
static size_t read_all(int fd, char *buf, size_t size)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	size_t len = 0;
	ssize_t n;

	while (len + 1 < size) {
		ck_assert_msg(poll(&p, 1, 3000) == 1, "no answer in 3 s");
		n = read(fd, buf + len, size - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	return len;
}

/* Send bytes on a raw connection and return the answer. */
static void raw_call(const void *req, size_t len, char *out, size_t size)
{
	int fd = raw_connect(sockpath);

	ck_assert_int_eq(send(fd, req, len, MSG_NOSIGNAL), (ssize_t)len);
	read_all(fd, out, size);
	close(fd);
}

START_TEST(test_routes)
{
	struct ctl_server *s = server_up();
	struct errbuf err = {""};
	json_t *result = NULL, *want;

	ck_assert_int_eq(call("routes", &result, &err), 0);
	want = json_pack("{s:i,s:[{s:s,s:s}]}", "generation", 7, "routes",
			 "domain", "a.example.com", "project", "p1");
	ck_assert_msg(json_equal(result, want), "routes result differs");
	json_decref(want);
	json_decref(result);
	ck_assert_int_eq(call("stats", &result, &err), 0);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(
		json_object_get(result, "counters"), "requests_total")),
	    5);
	json_decref(result);
	server_down(s);
}
END_TEST

START_TEST(test_errors_passed_through)
{
	struct ctl_server *s = server_up();
	struct errbuf err = {""};
	json_t *result = NULL;

	ck_assert_int_eq(call("reload", &result, &err), -EREMOTEIO);
	ck_assert_ptr_null(result);
	ck_assert_str_eq(err.msg, RELOAD_ERROR);
	ck_assert_int_eq(call("frobnicate", &result, &err), -EREMOTEIO);
	ck_assert_ptr_nonnull(strstr(err.msg, "unknown command 'frobnicate'"));
	ck_assert_int_eq(call("status", &result, &err), -EREMOTEIO);
	ck_assert_str_eq(err.msg, "status is not supported by this edged");
	server_down(s);
}
END_TEST

START_TEST(test_bad_requests)
{
	struct ctl_server *s = server_up();
	struct errbuf err = {""};
	json_t *req, *result = NULL;
	char *big, out[512];
	size_t n = CTLPROTO_REQUEST_MAX + 4096;

	raw_call("not json\n", 9, out, sizeof(out));
	ck_assert_ptr_nonnull(strstr(out, "\"ok\":false"));
	ck_assert_ptr_nonnull(strstr(out, "not JSON"));
	raw_call("[1,2]\n", 6, out, sizeof(out));
	ck_assert_ptr_nonnull(strstr(out, "not a JSON object"));
	raw_call("{\"cmd\":5}\n", 10, out, sizeof(out));
	ck_assert_ptr_nonnull(strstr(out, "no \\\"cmd\\\" string"));
	/* the last line may lack its newline when the client shuts down */
	{
		int fd = raw_connect(sockpath);

		ck_assert_int_eq(send(fd, "{\"cmd\":\"routes\"}", 16, 0), 16);
		shutdown(fd, SHUT_WR);
		read_all(fd, out, sizeof(out));
		close(fd);
		ck_assert_ptr_nonnull(strstr(out, "\"ok\":true"));
	}

	/* oversize: refused, and the server lives on */
	big = malloc(n + 1);
	ck_assert_ptr_nonnull(big);
	memset(big, 'x', n);
	big[n] = '\0';
	req = json_pack("{s:s,s:s}", "cmd", "routes", "pad", big);
	ck_assert_int_eq(ctlproto_call(sockpath, req, &result, 3000, &err),
			 -EREMOTEIO);
	ck_assert_ptr_nonnull(strstr(err.msg, "request too large"));
	json_decref(req);
	big[n - 1] = '\n';
	raw_call(big, n, out, sizeof(out));
	ck_assert_ptr_nonnull(strstr(out, "request too large"));
	free(big);
	ck_assert_int_eq(call("routes", &result, &err), 0);
	json_decref(result);
	server_down(s);
}
END_TEST

START_TEST(test_idle_client_timed_out)
{
	struct errbuf err = {""};
	struct ctl_server *s = NULL;
	json_t *result = NULL;
	char out[64];
	int idle;

	ck_assert_int_eq(
	    ctl_server_start(base, sockpath, &fake, NULL, &s, &err), 0);
	ctl_server_set_timeout(s, 300);
	loop_start();
	idle = raw_connect(sockpath);
	/* others are served meanwhile */
	ck_assert_int_eq(call("routes", &result, &err), 0);
	json_decref(result);
	/* and the idle one is closed without an answer */
	ck_assert_uint_eq(read_all(idle, out, sizeof(out)), 0);
	close(idle);
	ck_assert_int_eq(call("routes", &result, &err), 0);
	json_decref(result);
	server_down(s);
}
END_TEST

START_TEST(test_too_many_clients)
{
	struct ctl_server *s = server_up();
	struct errbuf err = {""};
	json_t *result = NULL;
	int fds[CTL_CLIENTS_MAX], i, ret;

	for (i = 0; i < CTL_CLIENTS_MAX; i++)
		fds[i] = raw_connect(sockpath);
	/* give the loop time to accept them all */
	usleep(200000);
	ret = call("routes", &result, &err);
	ck_assert_int_eq(ret, -EREMOTEIO);
	ck_assert_ptr_nonnull(strstr(err.msg, "busy"));
	for (i = 0; i < CTL_CLIENTS_MAX; i++)
		close(fds[i]);
	usleep(200000);
	ck_assert_int_eq(call("routes", &result, &err), 0);
	json_decref(result);
	server_down(s);
}
END_TEST

START_TEST(test_socket_files)
{
	struct errbuf err = {""};
	struct ctl_server *s = NULL, *s2 = NULL;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	char dir[160];
	int fd;

	/* a stale socket (its daemon died) is replaced */
	snprintf(dir, sizeof(dir), "%s/run", tmpdir);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sockpath);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	ck_assert_int_eq(
	    ctl_server_start(base, sockpath, &fake, NULL, &s, &err), 0);
	ck_assert_int_eq(stat(sockpath, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0600);

	/* a second server on a live path refuses */
	ck_assert_int_eq(
	    ctl_server_start(base, sockpath, &fake, NULL, &s2, &err),
	    -EADDRINUSE);
	ck_assert_ptr_null(s2);
	ck_assert_ptr_nonnull(strstr(err.msg, "another edged is running"));
	ck_assert_int_eq(stat(sockpath, &st), 0); /* untouched */

	/* free removes the socket; the path is free again */
	ctl_server_free(s);
	ck_assert_int_eq(stat(sockpath, &st), -1);
	ck_assert_int_eq(ctl_server_start(base, sockpath, NULL, NULL, &s, &err),
			 0);
	ctl_server_free(s);

	/* something else at the path is never removed */
	fd = creat(sockpath, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(
	    ctl_server_start(base, sockpath, &fake, NULL, &s, &err), -EEXIST);
	ck_assert_ptr_nonnull(strstr(err.msg, "not a socket"));
	ck_assert_int_eq(stat(sockpath, &st), 0);
	ctl_server_free(NULL);
}
END_TEST

static int fake_routes_b(void *ctx, json_t **result, struct errbuf *err)
{
	(void)ctx;
	(void)err;
	*result = json_pack("{s:i}", "generation", 8);
	return *result ? 0 : -ENOMEM;
}

static const struct ctl_handlers fake_b = {.routes = fake_routes_b};

static int fake_retire(void *ctx, pid_t peer, json_t **result,
		       struct errbuf *err)
{
	(void)ctx;
	(void)peer;
	(void)err;
	atomic_fetch_add(&handler_calls, 1);
	*result = json_pack("{s:i}", "pid", 1);
	return 0;
}

static const struct ctl_handlers fake_r = {.retire = fake_retire};

/* A retire read after its asker stopped waiting (this daemon was
 * stopped): ignored; one whose asker waits: handled. */
START_TEST(test_retire_asker_gone)
{
	struct errbuf err = {""};
	struct ctl_server *s = NULL;
	json_t *result = NULL;
	const char req[] = "{\"cmd\":\"retire\"}\n";
	int fd;

	ck_assert_int_eq(
	    ctl_server_start(base, sockpath, &fake_r, NULL, &s, &err), 0);
	/* the loop not running yet: the request waits, its asker goes */
	fd = raw_connect(sockpath);
	ck_assert_int_eq(send(fd, req, strlen(req), MSG_NOSIGNAL),
			 (ssize_t)strlen(req));
	close(fd);
	loop_start();
	for (int i = 0; i < 50; i++)
		usleep(10000);
	ck_assert_int_eq(atomic_load(&handler_calls), 0);
	ck_assert_int_eq(call("retire", &result, &err), 0);
	ck_assert_int_eq(atomic_load(&handler_calls), 1);
	json_decref(result);
	server_down(s);
}
END_TEST

/* The generation the server at sockpath answers routes with. */
static int answering(void)
{
	struct errbuf err = {""};
	json_t *result = NULL;
	int ret = call("routes", &result, &err), g;

	ck_assert_msg(ret == 0, "routes: %d %s", ret, err.msg);
	g = (int)json_integer_value(json_object_get(result, "generation"));
	json_decref(result);
	return g;
}

/* A successor on its predecessor's lock and listening socket: silent
 * until commit, the only one answering after the hand-over, and the path
 * removed by whichever owns it last. */
START_TEST(test_successor)
{
	struct errbuf err = {""};
	struct ctl_server *a = server_up(), *b = NULL;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int fd;

	ck_assert_int_eq(ctl_server_start_successor(
			     base, sockpath, dup(ctl_server_lock_fd(a)),
			     dup(ctl_server_listen_fd(a)), &fake_b, NULL, &b,
			     &err),
			 0);
	ck_assert_int_eq(answering(), 7);
	ck_assert_int_eq(answering(), 7);
	loop_stop();
	ctl_server_hand_over(a);
	ck_assert_int_eq(ctl_server_commit(b, &err), 0);
	loop_start();
	ck_assert_int_eq(answering(), 8);
	loop_stop();
	ctl_server_free(a); /* handed over: the path stays */
	ck_assert_int_eq(stat(sockpath, &st), 0);
	loop_start();
	ck_assert_int_eq(answering(), 8);
	server_down(b);
	ck_assert_int_eq(stat(sockpath, &st), -1);

	/* nothing, or a socket listening elsewhere, is refused */
	ck_assert_int_eq(ctl_server_start_successor(base, sockpath, -1, -1,
						    &fake_b, NULL, &b, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "no lock handed over"));
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/other.sock", tmpdir);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(fd, 4), 0);
	ck_assert_int_eq(ctl_server_start_successor(
			     base, sockpath, open("/dev/null", O_RDONLY), fd,
			     &fake_b, NULL, &b, &err),
			 -EINVAL);
	ck_assert_ptr_null(b);
	ck_assert_ptr_nonnull(strstr(err.msg, "not one listening there"));
}
END_TEST

START_TEST(test_dir_created_0700)
{
	struct ctl_server *s = server_up();
	struct stat st;
	char dir[160];

	snprintf(dir, sizeof(dir), "%s/run", tmpdir);
	ck_assert_int_eq(stat(dir, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0700);
	server_down(s);
}
END_TEST

START_TEST(test_not_running)
{
	struct errbuf err = {""};
	json_t *result = NULL;
	char want[256];

	ck_assert_int_eq(call("routes", &result, &err), -ENOENT);
	snprintf(want, sizeof(want),
		 "edged is not running (no control socket at %s)", sockpath);
	ck_assert_str_eq(err.msg, want);
}
END_TEST

/* A socket that accepts connections but never answers: bounded wait. */
START_TEST(test_client_timeout)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct errbuf err = {""};
	json_t *req = json_pack("{s:s}", "cmd", "routes"), *result = NULL;
	char dir[160];
	int fd;

	snprintf(dir, sizeof(dir), "%s/run", tmpdir);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sockpath);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(fd, 4), 0);
	ck_assert_int_eq(ctlproto_call(sockpath, req, &result, 200, &err),
			 -ETIMEDOUT);
	ck_assert_ptr_nonnull(strstr(err.msg, "did not answer within 200 ms"));
	ck_assert_ptr_null(result);
	json_decref(req);
	close(fd);
}
END_TEST

/* A peer of another uid: reads are fine, changes are refused. */
START_TEST(test_peer_credentials)
{
	struct ctl_server *s;
	int status;
	pid_t pid;

	if (geteuid() != 0)
		return; /* needs to switch uid */
	s = server_up();
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct errbuf err = {""};
		json_t *result = NULL;

		if (setresgid(65534, 65534, 65534) ||
		    setresuid(65534, 65534, 65534))
			_exit(10);
		/* mode 0600, owned by root: cannot even connect */
		if (call("routes", &result, &err) != -EACCES ||
		    !strstr(err.msg, "permission denied"))
			_exit(11);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_int_eq(WEXITSTATUS(status), 0);

	/* open the way for the other uid: the daemon's check is left */
	ck_assert_int_eq(chmod(sockpath, 0666), 0);
	ck_assert_int_eq(chmod(tmpdir, 0755), 0);
	ck_assert_int_eq(chmod(sockdir(), 0755), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct errbuf err = {""};
		json_t *result = NULL;

		if (setresgid(65534, 65534, 65534) ||
		    setresuid(65534, 65534, 65534))
			_exit(10);
		if (call("routes", &result, &err) != 0)
			_exit(12);
		json_decref(result);
		if (call("reload", &result, &err) != -EREMOTEIO ||
		    strcmp(err.msg,
			   "permission denied: reload needs root or edged's "
			   "user") != 0)
			_exit(13);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	server_down(s);
}
END_TEST

/* Which requests need a privileged peer: upstream lists for anyone,
 * its actions (and splice's mode) change the daemon. */
START_TEST(test_request_changes)
{
	static const struct {
		const char *req;
		bool changes;
	} cases[] = {
	    {"{\"cmd\":\"upstream\"}", false},
	    {"{\"cmd\":\"upstream\",\"action\":\"list\"}", false},
	    {"{\"cmd\":\"upstream\",\"action\":\"drain\"}", true},
	    {"{\"cmd\":\"upstream\",\"action\":\"enable\"}", true},
	    {"{\"cmd\":\"upstream\",\"action\":\"bogus\"}", true},
	    {"{\"cmd\":\"splice\"}", false},
	    {"{\"cmd\":\"splice\",\"mode\":\"off\"}", true},
	    {"{\"cmd\":\"routes\"}", false},
	    {"{\"cmd\":\"reload\"}", true},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *req = json_loads(cases[i].req, 0, NULL);

		ck_assert_ptr_nonnull(req);
		ck_assert_msg(
		    ctlproto_request_changes(
			json_string_value(json_object_get(req, "cmd")), req) ==
			cases[i].changes,
		    "%s", cases[i].req);
		json_decref(req);
	}
}
END_TEST

/* ---- admin ------------------------------------------------------------ */

static atomic_bool draining;

static bool fake_healthy(void *ctx)
{
	(void)ctx;
	return !atomic_load(&draining);
}

struct admin_fixture {
	struct metrics *m;
	struct admin *a;
	int port;
};

static void admin_up(struct admin_fixture *f)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	struct sockaddr_storage ss;
	struct errbuf err = {""};
	socklen_t len;
	struct metrics_counter *c;

	f->m = metrics_new();
	ck_assert_ptr_nonnull(f->m);
	c = metrics_counter_new(f->m, "edge_test_total", "A test counter.",
				NULL);
	metrics_counter_add(c, 3);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_msg(admin_start(base, (struct sockaddr *)&sin, sizeof(sin),
				  -1, f->m, fake_healthy, NULL, &f->a,
				  &err) == 0,
		      "admin_start: %s", err.msg);
	ck_assert_int_eq(admin_local_addr(f->a, &ss, &len), 0);
	f->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	ck_assert_int_gt(f->port, 0);
	atomic_store(&draining, false);
	loop_start();
}

static void admin_down(struct admin_fixture *f)
{
	loop_stop();
	admin_free(f->a);
	metrics_free(f->m);
}

/* One HTTP/1.0 exchange; the whole response in out. Returns the status. */
static int http(int port, const char *method, const char *path, char *out,
		size_t size)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	char req[256];
	int fd, n, code = 0;

	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	n = snprintf(req, sizeof(req), "%s %s HTTP/1.0\r\nHost: x\r\n\r\n",
		     method, path);
	ck_assert_int_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
	read_all(fd, out, size);
	close(fd);
	ck_assert_int_eq(sscanf(out, "HTTP/1.%*d %d", &code), 1);
	return code;
}

START_TEST(test_admin_metrics)
{
	struct admin_fixture f;
	char out[8192];

	admin_up(&f);
	ck_assert_int_eq(http(f.port, "GET", "/metrics", out, sizeof(out)),
			 200);
	ck_assert_ptr_nonnull(
	    strstr(out, "Content-Type: text/plain; version=0.0.4"));
	ck_assert_ptr_nonnull(strstr(out, "# TYPE edge_test_total counter"));
	ck_assert_ptr_nonnull(strstr(out, "\nedge_test_total 3\n"));
	ck_assert_int_eq(http(f.port, "GET", "/metrics?x=1", out, sizeof(out)),
			 200);
	admin_down(&f);
}
END_TEST

START_TEST(test_admin_healthz)
{
	struct admin_fixture f;
	char out[4096];

	admin_up(&f);
	ck_assert_int_eq(http(f.port, "GET", "/healthz", out, sizeof(out)),
			 200);
	ck_assert_ptr_nonnull(strstr(out, "\r\n\r\nok\n"));
	atomic_store(&draining, true);
	ck_assert_int_eq(http(f.port, "GET", "/healthz", out, sizeof(out)),
			 503);
	ck_assert_ptr_nonnull(strstr(out, "\r\n\r\ndraining\n"));
	ck_assert_int_eq(http(f.port, "HEAD", "/healthz", out, sizeof(out)),
			 503);
	ck_assert_ptr_null(strstr(out, "draining"));
	admin_down(&f);
}
END_TEST

START_TEST(test_admin_404_405)
{
	struct admin_fixture f;
	char out[4096];

	admin_up(&f);
	ck_assert_int_eq(http(f.port, "GET", "/", out, sizeof(out)), 404);
	ck_assert_int_eq(http(f.port, "GET", "/metricsx", out, sizeof(out)),
			 404);
	ck_assert_int_eq(http(f.port, "POST", "/metrics", out, sizeof(out)),
			 405);
	ck_assert_ptr_nonnull(strstr(out, "Allow: GET, HEAD"));
	ck_assert_int_eq(http(f.port, "DELETE", "/healthz", out, sizeof(out)),
			 405);
	ck_assert_int_eq(http(f.port, "PUT", "/nope", out, sizeof(out)), 404);
	admin_down(&f);
}
END_TEST

START_TEST(test_admin_bind_error)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	struct errbuf err = {""};
	struct admin_fixture f;
	struct admin *a = NULL;

	admin_up(&f);
	sin.sin_port = htons((uint16_t)f.port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(admin_start(base, (struct sockaddr *)&sin, sizeof(sin),
				     -1, f.m, NULL, NULL, &a, &err),
			 -EADDRINUSE);
	ck_assert_ptr_null(a);
	ck_assert_ptr_nonnull(strstr(err.msg, "127.0.0.1:"));
	admin_free(NULL);
	admin_down(&f);
}
END_TEST

static Suite *ctl_suite(void)
{
	Suite *s = suite_create("ctl");
	TCase *tc = tcase_create("ctl");
	TCase *ta = tcase_create("admin");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, test_routes);
	tcase_add_test(tc, test_successor);
	tcase_add_test(tc, test_retire_asker_gone);
	tcase_add_test(tc, test_request_changes);
	tcase_add_test(tc, test_errors_passed_through);
	tcase_add_test(tc, test_bad_requests);
	tcase_add_test(tc, test_idle_client_timed_out);
	tcase_add_test(tc, test_too_many_clients);
	tcase_add_test(tc, test_socket_files);
	tcase_add_test(tc, test_dir_created_0700);
	tcase_add_test(tc, test_not_running);
	tcase_add_test(tc, test_client_timeout);
	tcase_add_test(tc, test_peer_credentials);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(ta, setup, teardown);
	tcase_set_timeout(ta, 20);
	tcase_add_test(ta, test_admin_metrics);
	tcase_add_test(ta, test_admin_healthz);
	tcase_add_test(ta, test_admin_404_405);
	tcase_add_test(ta, test_admin_bind_error);
	suite_add_tcase(s, ta);
	return s;
}

int main(void)
{
	return unit_run(ctl_suite());
}
