/* SPDX-License-Identifier: BSD-2-Clause */
/* test_analytics_spool.c - the analytics disk spool: the file format
 * (round trip, every truncation and a flipped bit refused), torn and
 * corrupt files skipped and counted, oldest first across a restart, the
 * cap, a write the file system refuses (told apart from the cap, with
 * its errno and path), and the directory's checks at open. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "analytics_spool.h"
#include "unit.h"

static char tmpdir[64];
static char dir[128];

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/edge-spool.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(dir, sizeof(dir), "%s/spool", tmpdir);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static void fill(struct analytics_event *ev, unsigned i)
{
	char id[32];

	memset(ev, 0, sizeof(*ev));
	snprintf(id, sizeof(id), "ev-%u", i);
	ev->time_ns = 1700000000123456789ULL + i;
	ev->duration_ns = 1500000 + i;
	ev->upstream_ns = 1000000;
	ev->bytes_in = 100 + i;
	ev->bytes_out = UINT64_MAX - i;
	ev->status = (uint16_t)(200 + i % 300);
	ev->kind = i % 2 ? ANALYTICS_KIND_TUNNEL : ANALYTICS_KIND_REQUEST;
	ev->outcome = (uint8_t)(i % OUTCOME_MAX);
	analytics_event_set(ev, ANALYTICS_F_REQUEST_ID, id, SIZE_MAX);
	analytics_event_set(ev, ANALYTICS_F_HOST, "app.example.com", SIZE_MAX);
	analytics_event_set(ev, ANALYTICS_F_PATH, "/a\tb\nc\\d", SIZE_MAX);
	analytics_event_set(ev, ANALYTICS_F_USER_AGENT, "ua \xff\xfe",
			    SIZE_MAX);
}

/* Two events hold the same data (every field, the truncation marks). */
static void same(const struct analytics_event *a,
		 const struct analytics_event *b)
{
	unsigned f;

	ck_assert_uint_eq(a->time_ns, b->time_ns);
	ck_assert_uint_eq(a->duration_ns, b->duration_ns);
	ck_assert_uint_eq(a->upstream_ns, b->upstream_ns);
	ck_assert_uint_eq(a->bytes_in, b->bytes_in);
	ck_assert_uint_eq(a->bytes_out, b->bytes_out);
	ck_assert_uint_eq(a->truncated, b->truncated);
	ck_assert_uint_eq(a->status, b->status);
	ck_assert_uint_eq(a->kind, b->kind);
	ck_assert_uint_eq(a->outcome, b->outcome);
	for (f = 0; f < ANALYTICS_F_MAX; f++)
		ck_assert_str_eq(
		    analytics_event_get(a, (enum analytics_field)f),
		    analytics_event_get(b, (enum analytics_field)f));
}

static struct analytics_spool *open_spool(uint64_t max)
{
	struct analytics_spool *s = NULL;
	struct errbuf err = {""};

	ck_assert_msg(analytics_spool_open(dir, max, NULL, &s, &err) == 0, "%s",
		      err.msg);
	return s;
}

/* Put events [first, first + n) as one file. */
static int put(struct analytics_spool *s, unsigned first, unsigned n)
{
	struct analytics_event ev[64];
	unsigned i;

	ck_assert_uint_le(n, 64);
	for (i = 0; i < n; i++)
		fill(&ev[i], first + i);
	return analytics_spool_put(s, ev, n, NULL);
}

/* Peek the oldest file: its first event's number (-1: none) and count. */
static int peek_first(struct analytics_spool *s, size_t *n)
{
	struct analytics_event *ev;
	unsigned first;
	int rc;

	rc = analytics_spool_peek(s, &ev, n);
	if (rc == -ENOENT)
		return -1;
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(sscanf(ev[0].request_id, "ev-%u", &first), 1);
	free(ev);
	return (int)first;
}

/* The path of the spool's file with sequence number seq. */
static const char *file_path(uint64_t seq)
{
	static char p[256];

	snprintf(p, sizeof(p), "%s/%020llu.spool", dir,
		 (unsigned long long)seq);
	return p;
}

static size_t count_files(void)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

START_TEST(test_encode_round_trip)
{
	struct analytics_event in[5], *out;
	char big[2000];
	unsigned char *buf;
	size_t len, n, i;

	for (i = 0; i < 5; i++)
		fill(&in[i], (unsigned)i);
	/* a field cut when it was recorded keeps its mark */
	memset(big, 'x', sizeof(big));
	ck_assert(
	    !analytics_event_set(&in[3], ANALYTICS_F_PATH, big, sizeof(big)));
	/* every field at its largest */
	for (i = 0; i < ANALYTICS_F_MAX; i++)
		analytics_event_set(&in[4], (enum analytics_field)i, big,
				    sizeof(big));
	ck_assert_int_eq(analytics_spool_encode(in, 5, &buf, &len), 0);
	ck_assert_int_eq(analytics_spool_decode(buf, len, &out, &n), 0);
	ck_assert_uint_eq(n, 5);
	for (i = 0; i < 5; i++)
		same(&in[i], &out[i]);
	ck_assert(out[3].truncated & (1u << ANALYTICS_F_PATH));
	free(out);
	free(buf);
}
END_TEST

/* A file cut at any length, or with any one byte changed, is refused as
 * a whole: never half a batch, never a crash. */
START_TEST(test_decode_refuses_damage)
{
	struct analytics_event in[3], *out;
	unsigned char *buf;
	size_t len, n, i;

	for (i = 0; i < 3; i++)
		fill(&in[i], (unsigned)i);
	ck_assert_int_eq(analytics_spool_encode(in, 3, &buf, &len), 0);
	for (i = 0; i < len; i++)
		ck_assert_int_eq(analytics_spool_decode(buf, i, &out, &n),
				 -EBADMSG);
	for (i = 0; i < len; i++) {
		buf[i] ^= 0x20;
		ck_assert_msg(analytics_spool_decode(buf, len, &out, &n) ==
				  -EBADMSG,
			      "byte %zu flipped was accepted", i);
		buf[i] ^= 0x20;
	}
	ck_assert_int_eq(analytics_spool_decode(buf, len, &out, &n), 0);
	free(out);
	free(buf);
}
END_TEST

/* Oldest first, and after a restart the new files come after the old. */
START_TEST(test_order_across_restart)
{
	struct analytics_spool *s = open_spool(1 << 20);
	struct analytics_spool_stats st;
	size_t n;

	ck_assert(analytics_spool_empty(s));
	ck_assert_int_eq(peek_first(s, &n), -1);
	ck_assert_int_eq(put(s, 0, 10), 0);
	ck_assert_int_eq(put(s, 10, 5), 0);
	ck_assert_int_eq(put(s, 15, 1), 0);
	analytics_spool_stats(s, &st);
	ck_assert_uint_eq(st.files, 3);
	ck_assert_uint_eq(st.events, 16);
	ck_assert_int_eq(peek_first(s, &n), 0);
	ck_assert_uint_eq(n, 10);
	/* peeking twice gives the same file until it is popped */
	ck_assert_int_eq(peek_first(s, &n), 0);
	ck_assert_int_eq(analytics_spool_pop(s), 0);
	analytics_spool_close(s);

	s = open_spool(1 << 20);
	analytics_spool_stats(s, &st);
	ck_assert_uint_eq(st.files, 2);
	ck_assert_uint_eq(st.events, 6);
	ck_assert_int_eq(put(s, 16, 2), 0);
	ck_assert_int_eq(peek_first(s, &n), 10);
	ck_assert_uint_eq(n, 5);
	ck_assert_int_eq(analytics_spool_pop(s), 0);
	ck_assert_int_eq(peek_first(s, &n), 15);
	ck_assert_int_eq(analytics_spool_pop(s), 0);
	ck_assert_int_eq(peek_first(s, &n), 16);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(analytics_spool_pop(s), 0);
	ck_assert(analytics_spool_empty(s));
	ck_assert_int_eq(analytics_spool_pop(s), -ENOENT);
	analytics_spool_stats(s, &st);
	ck_assert_uint_eq(st.files + st.bytes + st.events + st.corrupt, 0);
	ck_assert_uint_eq(count_files(), 0);
	analytics_spool_close(s);
	analytics_spool_close(NULL);
}
END_TEST

/* Two spools on one directory (an upgrade's two edged): the second's
 * batches never take the first's file names; a later open finds all. */
START_TEST(test_two_writers)
{
	struct analytics_spool *a = open_spool(1 << 20);
	struct analytics_spool *b = open_spool(1 << 20);
	struct analytics_spool_stats st;
	size_t n;

	ck_assert_int_eq(put(a, 0, 3), 0);
	ck_assert_int_eq(put(b, 3, 4), 0); /* the number a took: the next */
	ck_assert_int_eq(put(a, 7, 5), 0);
	ck_assert_uint_eq(count_files(), 3);
	analytics_spool_close(a);
	analytics_spool_close(b);
	a = open_spool(1 << 20);
	b = open_spool(1 << 20);
	analytics_spool_stats(a, &st);
	ck_assert_uint_eq(st.files, 3);
	ck_assert_uint_eq(st.events, 12);
	ck_assert_int_eq(peek_first(a, &n), 0);
	ck_assert_uint_eq(n, 3);
	/* a sends the first file; b, which listed it too, goes on to the
	 * next without calling the first lost */
	ck_assert_int_eq(analytics_spool_pop(a), 0);
	ck_assert_int_eq(peek_first(b, &n), 3);
	ck_assert_uint_eq(n, 4);
	analytics_spool_stats(b, &st);
	ck_assert_uint_eq(st.corrupt, 0);
	analytics_spool_close(a);
	analytics_spool_close(b);
}
END_TEST

/* A write cut short (the temporary file), a file cut after its rename
 * (torn), a file with a byte changed (checksum) and one whose header is
 * garbage: each skipped, deleted and counted; the good ones replayed in
 * order. */
/* A PID no process has: a child's, reaped. */
static pid_t dead_pid(void)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
	return pid;
}

START_TEST(test_torn_and_corrupt_skipped)
{
	struct analytics_spool *s = open_spool(1 << 20);
	struct analytics_spool_stats st;
	char tmp[256];
	struct stat sb;
	size_t n;
	int fd;
	unsigned char b;

	ck_assert_int_eq(put(s, 0, 3), 0);  /* 0: good */
	ck_assert_int_eq(put(s, 3, 3), 0);  /* 1: torn below */
	ck_assert_int_eq(put(s, 6, 3), 0);  /* 2: good */
	ck_assert_int_eq(put(s, 9, 3), 0);  /* 3: a byte changed */
	ck_assert_int_eq(put(s, 12, 3), 0); /* 4: good */
	analytics_spool_close(s);
	ck_assert_int_eq(stat(file_path(1), &sb), 0);
	ck_assert_int_eq(truncate(file_path(1), sb.st_size / 2), 0);
	fd = open(file_path(3), O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &b, 1, 60), 1);
	b ^= 1;
	ck_assert_int_eq(pwrite(fd, &b, 1, 60), 1);
	close(fd);
	/* writes cut short (the name before PIDs, and a dead writer's), and
	 * garbage under a spool file's name */
	snprintf(tmp, sizeof(tmp), "%s/.tmp-%020u.spool", dir, 5u);
	fd = open(tmp, O_WRONLY | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "EDGEASPL", 8), 8);
	close(fd);
	snprintf(tmp, sizeof(tmp), "%s/.tmp-%ld-%020u.spool", dir,
		 (long)dead_pid(), 5u);
	fd = open(tmp, O_WRONLY | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	/* one a living process writes now (an upgrade's other edged): its
	 * own, left alone, its number not taken */
	snprintf(tmp, sizeof(tmp), "%s/.tmp-%ld-%020u.spool", dir,
		 (long)getppid(), 8u);
	fd = open(tmp, O_WRONLY | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	fd = open(file_path(6), O_WRONLY | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(
	    write(fd, "not a spool file at all, but 32+ bytes", 38), 38);
	close(fd);
	/* and a file that is not the spool's, left alone */
	snprintf(tmp, sizeof(tmp), "%s/README", dir);
	fd = open(tmp, O_WRONLY | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);

	s = open_spool(1 << 20);
	analytics_spool_stats(s, &st);
	/* at open: the two temporary files, the torn one, the garbage
	 * header; the changed byte is not seen until the file is read */
	ck_assert_uint_eq(st.corrupt, 4);
	ck_assert_uint_eq(st.files, 4);
	ck_assert_int_eq(peek_first(s, &n), 0);
	ck_assert_int_eq(analytics_spool_pop(s), 0);
	ck_assert_int_eq(peek_first(s, &n), 6);
	ck_assert_int_eq(analytics_spool_pop(s), 0);
	/* the changed byte is found when the file is read */
	ck_assert_int_eq(peek_first(s, &n), 12);
	analytics_spool_stats(s, &st);
	ck_assert_uint_eq(st.corrupt, 5);
	ck_assert_uint_eq(st.files, 1);
	ck_assert_int_eq(analytics_spool_pop(s), 0);
	/* new names never reuse an old one, even a temporary's */
	ck_assert_int_eq(put(s, 20, 1), 0);
	ck_assert_int_eq(access(file_path(9), F_OK), 0);
	analytics_spool_close(s);
	ck_assert_uint_eq(count_files(), 2); /* README and file 9 */
	snprintf(tmp, sizeof(tmp), "%s/.tmp-%ld-%020u.spool", dir,
		 (long)getppid(), 8u);
	ck_assert_int_eq(access(tmp, F_OK), 0); /* the living writer's */
}
END_TEST

/* The cap: a batch that would pass it is refused, nothing written; room
 * made by a pop is used again. */
START_TEST(test_cap)
{
	struct analytics_event ev;
	struct analytics_spool *s;
	struct analytics_spool_stats st;
	unsigned char *buf;
	size_t one, n;
	int i, ok = 0;

	fill(&ev, 0);
	ck_assert_int_eq(analytics_spool_encode(&ev, 1, &buf, &one), 0);
	free(buf);
	/* room for three one-event files of this size and a bit */
	s = open_spool(3 * one + one / 2);
	for (i = 0; i < 10; i++) {
		int rc = put(s, (unsigned)i, 1);

		if (rc == 0)
			ok++;
		else
			ck_assert_int_eq(rc, ANALYTICS_SPOOL_FULL);
	}
	ck_assert_int_eq(ok, 3);
	analytics_spool_stats(s, &st);
	ck_assert_uint_eq(st.files, 3);
	ck_assert_uint_le(st.bytes, st.max_bytes);
	ck_assert_uint_eq(st.put_errors, 0);
	ck_assert_uint_eq(count_files(), 3);
	ck_assert_int_eq(peek_first(s, &n), 0);
	ck_assert_int_eq(analytics_spool_pop(s), 0);
	ck_assert_int_eq(put(s, 50, 1), 0);
	ck_assert_int_eq(put(s, 51, 1), ANALYTICS_SPOOL_FULL);
	ck_assert_int_eq(peek_first(s, &n), 1);
	analytics_spool_close(s);
}
END_TEST

/* A write the file system refuses (here RLIMIT_FSIZE: EFBIG; a full disk
 * is tests/pg/test_edged_analytics_pg.sh's) is an error with its errno,
 * the file and the step, never the cap: nothing left behind, counted in
 * put_errors; the next batch that fits goes in. */
START_TEST(test_write_error)
{
	struct analytics_event ev[64];
	struct analytics_spool *s;
	struct analytics_spool_stats st;
	struct errbuf err = {""};
	struct rlimit rl, small;
	char want[320];
	unsigned i;
	int rc, set, reset;

	for (i = 0; i < 64; i++)
		fill(&ev[i], i);
	s = open_spool(1 << 20);
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &rl), 0);
	small.rlim_cur = 100;
	small.rlim_max = rl.rlim_max;
	signal(SIGXFSZ, SIG_IGN);
	/* no check assertion while the limit holds: check writes its own
	 * records to a file */
	set = setrlimit(RLIMIT_FSIZE, &small);
	rc = analytics_spool_put(s, ev, 64, &err);
	reset = setrlimit(RLIMIT_FSIZE, &rl);
	ck_assert_int_eq(set, 0);
	ck_assert_int_eq(reset, 0);
	ck_assert_int_eq(rc, -EFBIG);
	snprintf(want, sizeof(want),
		 "%s/.tmp-%ld-00000000000000000000.spool: "
		 "write: File too large",
		 dir, (long)getpid());
	ck_assert_str_eq(err.msg, want);
	analytics_spool_stats(s, &st);
	ck_assert_uint_eq(st.put_errors, 1);
	ck_assert_uint_eq(st.files, 0);
	ck_assert_uint_eq(st.bytes, 0);
	ck_assert_uint_eq(count_files(), 0);
	/* the cap is said as the cap */
	analytics_spool_close(s);
	s = open_spool(100);
	ck_assert_int_eq(analytics_spool_put(s, ev, 64, &err),
			 ANALYTICS_SPOOL_FULL);
	ck_assert_msg(strstr(err.msg, dir) && strstr(err.msg, "would pass"),
		      "%s", err.msg);
	analytics_spool_close(s);
	s = open_spool(1 << 20);
	ck_assert_int_eq(analytics_spool_put(s, ev, 64, &err), 0);
	analytics_spool_stats(s, &st);
	ck_assert_uint_eq(st.files, 1);
	ck_assert_uint_eq(st.put_errors, 0);
	analytics_spool_close(s);
}
END_TEST

/* The directory: made when missing (its parent must exist), refused when
 * it is a file, or not writable by the user edged becomes. */
START_TEST(test_open_checks)
{
	struct analytics_spool *s = NULL;
	struct errbuf err = {""};
	struct passwd *pw;
	char p[192];
	struct stat sb;
	int fd;

	snprintf(p, sizeof(p), "%s/no/such", tmpdir);
	ck_assert_int_eq(analytics_spool_open(p, 1 << 20, NULL, &s, &err),
			 -ENOENT);
	ck_assert_ptr_null(s);
	ck_assert_msg(strstr(err.msg, "analytics.spool: cannot create") &&
			  strstr(err.msg, "its parent must exist"),
		      "%s", err.msg);
	snprintf(p, sizeof(p), "%s/file", tmpdir);
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(analytics_spool_open(p, 1 << 20, NULL, &s, &err),
			 -ENOTDIR);
	ck_assert_msg(strstr(err.msg, "not a directory"), "%s", err.msg);

	/* as root: the directory is given to the user edged becomes, and one
	 * that user cannot write is refused */
	pw = getpwnam("nobody");
	if (geteuid() != 0 || !pw)
		return;
	ck_assert_int_eq(analytics_spool_open(dir, 1 << 20, pw, &s, &err), 0);
	analytics_spool_close(s);
	ck_assert_int_eq(stat(dir, &sb), 0);
	ck_assert_uint_eq(sb.st_uid, pw->pw_uid);
	ck_assert_uint_eq(sb.st_mode & 0777, 0700);
	snprintf(p, sizeof(p), "%s/roots", tmpdir);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	ck_assert_int_eq(analytics_spool_open(p, 1 << 20, pw, &s, &err),
			 -EACCES);
	ck_assert_msg(strstr(err.msg, "not writable by user \"nobody\""), "%s",
		      err.msg);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("analytics_spool");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_encode_round_trip);
	tcase_add_test(tc, test_two_writers);
	tcase_add_test(tc, test_decode_refuses_damage);
	tcase_add_test(tc, test_order_across_restart);
	tcase_add_test(tc, test_torn_and_corrupt_skipped);
	tcase_add_test(tc, test_cap);
	tcase_add_test(tc, test_write_error);
	tcase_add_test(tc, test_open_checks);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
