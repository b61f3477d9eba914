/* SPDX-License-Identifier: BSD-2-Clause */
/* test_config_file.c - the configuration's text before libconfig: the
 * lexer agrees with libconfig's scanner on generated files (same parse,
 * one recorded literal per integer setting, with libconfig's bits), an
 * @include is expanded only where libconfig would expand it, and lines
 * of the text map back to their files. */
#include <check.h>
#include <errno.h>
#include <libconfig.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config_file.h"
#include "unit.h"

static char tmpdir[64];

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/edge-cfile.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Write text to tmpdir/name; its path in path (128 bytes). */
static void put(const char *name, const char *text, char *path)
{
	FILE *f;

	snprintf(path, 128, "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
}

/* ---- generated files, read by both -------------------------------------- */

static uint64_t rng = 88172645463325252ULL;

static unsigned pick(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

#define PICK(a) ((a)[pick(sizeof(a) / sizeof((a)[0]))])

static const char *const g_ints[] = {
    "0",
    "1",
    "-1",
    "+7",
    "007",
    "-0",
    "2147483647",
    "2147483648",
    "-2147483648",
    "-2147483649",
    "4294967297",
    "5000000000",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "99999999999999999999",
    "0x0",
    "0x1F",
    "0XffffFFFF",
    "0x100000000",
    "0xFFFFFFFFFFFFFFFF",
    "0x1FFFFFFFFFFFFFFFF",
    "5L",
    "-5LL",
    "12345678901L",
    "0x140000000L",
};
static const char *const g_floats[] = {"1.5", ".5",	 "1e3",	 "1.",
				       "-.5", "12.5e-3", "-1E+2"};
static const char *const g_strings[] = {
    "\"s\"",	    "\"a\\\"b\"",
    "\"\\x41\\n\"", "\"\\x4g\"",
    "\"\\\\\"",	    "\"a\nb\"",
    "\"x\" \"y\"",  "\"# no\"",
    "\"/* no\"",    "\"a\n@include \\\"x\\\"\n\""};
static const char *const g_bools[] = {"true", "FALSE", "True"};
static const char *const g_space[] = {
    "", " ", "\t", "\n", "\r\n", " # c\n", " // c\n", " /* c */ ", "/*\n*\n*/"};
static const char *const g_names[] = {"a",   "b1",	"x-1", "*w",
				      "c_d", "trueish", "L",   "e5"};

struct gen {
	char buf[8192];
	size_t n;
};

static void emit(struct gen *g, const char *s)
{
	size_t l = strlen(s);

	if (g->n + l < sizeof(g->buf)) {
		memcpy(g->buf + g->n, s, l);
		g->n += l;
		g->buf[g->n] = '\0';
	}
}

static void gen_scalar(struct gen *g, unsigned kind)
{
	if (kind < 3)
		emit(g, PICK(g_ints));
	else if (kind == 3)
		emit(g, PICK(g_floats));
	else if (kind == 4)
		emit(g, PICK(g_strings));
	else
		emit(g, PICK(g_bools));
}

static void gen_group(struct gen *g, int depth);

static void gen_value(struct gen *g, int depth)
{
	unsigned r = pick(100), i, n = pick(5), kind = pick(6);

	if (depth > 3 || r < 50) {
		gen_scalar(g, kind);
	} else if (r < 65) { /* an array: scalars of one kind */
		emit(g, "[");
		for (i = 0; i < n; i++) {
			emit(g, i ? "," : "");
			emit(g, PICK(g_space));
			gen_scalar(g, kind);
		}
		emit(g, "]");
	} else if (r < 80) {
		emit(g, "(");
		for (i = 0; i < n; i++) {
			emit(g, i ? "," : "");
			emit(g, PICK(g_space));
			gen_value(g, depth + 1);
		}
		emit(g, ")");
	} else {
		emit(g, "{");
		gen_group(g, depth + 1);
		emit(g, "}");
	}
}

static void gen_group(struct gen *g, int depth)
{
	static const char *const assign[] = {"=", ":"};
	static const char *const end[] = {";", ",", ""};
	size_t i, n = sizeof(g_names) / sizeof(g_names[0]);

	for (i = 0; i < n; i++) {
		if (pick(2))
			continue;
		emit(g, PICK(g_space));
		emit(g, g_names[i]);
		emit(g, PICK(g_space));
		emit(g, PICK(assign));
		emit(g, PICK(g_space));
		gen_value(g, depth);
		emit(g, PICK(end));
		emit(g, PICK(g_space));
	}
}

/* What libconfig makes of a literal, in its low 32 bits (config.c's
 * cfg_int_low32, restated). */
static uint32_t low32(const struct config_file_int *v)
{
	if (v->hex)
		return (uint32_t)(v->big ? UINT64_MAX : v->mag);
	if (v->neg)
		return (uint32_t)(v->big || v->mag > (1ULL << 63) ? 1ULL << 63
								  : 0 - v->mag);
	return (uint32_t)(v->big || v->mag > (uint64_t)INT64_MAX
			      ? (uint64_t)INT64_MAX
			      : v->mag);
}

/* Walk s in order, matching every integer setting to the next literal. */
static void match_ints(const config_setting_t *s, const struct config_file *f,
		       size_t *k, const char *text)
{
	int i, type = config_setting_type(s);

	if (type == CONFIG_TYPE_INT || type == CONFIG_TYPE_INT64) {
		ck_assert_msg(*k < f->n_ints, "more integers than literals: %s",
			      text);
		ck_assert_msg((uint32_t)config_setting_get_int64(s) ==
				  low32(&f->ints[*k]),
			      "literal %s is not libconfig's %lld: %s",
			      f->ints[*k].text, config_setting_get_int64(s),
			      text);
		(*k)++;
		return;
	}
	for (i = 0;
	     config_setting_is_aggregate(s) && i < config_setting_length(s);
	     i++)
		match_ints(config_setting_get_elem(s, i), f, k, text);
}

START_TEST(test_agrees_with_libconfig)
{
	static struct gen g;
	char path[128], *raw;
	int i, parsed = 0;

	for (i = 0; i < 3000; i++) {
		struct config_file f;
		struct errbuf err;
		config_t a, b;
		int ra, rb;
		size_t k = 0;

		g.n = 0;
		g.buf[0] = '\0';
		gen_group(&g, 0);
		put("gen.conf", g.buf, path);
		memset(&f, 0, sizeof(f));
		ck_assert_msg(config_file_read(path, &f, &err) == 0, "%s: %s",
			      err.msg, g.buf);
		/* libconfig needs a newline after a last '#' comment (flex's
		 * '$'); the text always ends in one */
		ck_assert_int_ge(asprintf(&raw, "%s\n", g.buf), 0);
		config_init(&a);
		config_init(&b);
		ra = config_read_string(&a, raw);
		rb = config_read_string(&b, f.text);
		ck_assert_msg(ra == rb,
			      "libconfig %s the file, %s the text: %s",
			      ra ? "parses" : "refuses",
			      rb ? "parses" : "refuses", g.buf);
		if (rb == CONFIG_TRUE) {
			match_ints(config_root_setting(&b), &f, &k, g.buf);
			ck_assert_msg(k == f.n_ints,
				      "%zu integers, %zu literals: %s", k,
				      f.n_ints, g.buf);
			parsed++;
		}
		config_destroy(&a);
		config_destroy(&b);
		config_file_free(&f);
		free(raw);
	}
	ck_assert_int_gt(parsed, 1000); /* the generator makes real files */
}
END_TEST

/* ---- @include --------------------------------------------------------------
 */

/* An @include inside a string or a comment, or not at the start of its
 * line, is text: only libconfig's include_open starts one. */
START_TEST(test_include_only_at_line_start)
{
	static const char *const texts[] = {
	    "a = 1;\n/*\n@include \"none\"\n*/\n",
	    "a = \"x\n@include \\\"none\\\"\n\";\n",
	    "a = 1; # @include \"none\"\n",
	    "a = 1; @include \"none\"\n",
	    "a = 1;\n@include\"none\"\n",
	};
	struct config_file f;
	struct errbuf err;
	char path[128];

	put("edge.conf", texts[_i], path);
	memset(&f, 0, sizeof(f));
	ck_assert_msg(config_file_read(path, &f, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(f.text, texts[_i]);
	ck_assert_uint_eq(f.n_files, 1);
	config_file_free(&f);
}
END_TEST

/* The text of an include in place of its line; every line of the text
 * maps back to its file and line. */
START_TEST(test_include_text_and_lines)
{
	struct config_file f;
	struct errbuf err;
	char main_path[128], inc[128], want[256];
	const char *file;
	unsigned line;

	ck_assert_int_eq(snprintf(want, sizeof(want), "%s/d", tmpdir) > 0, 1);
	ck_assert_int_eq(mkdir(want, 0755), 0);
	put("d/inc.conf", "b = 2;\nc = 3;", inc); /* no newline at the end */
	put("d/empty.conf", "", want);
	put("edge.conf",
	    "a = 1;\n"
	    "  @include \"d/inc.conf\"  # the rest of the line goes too\n"
	    "@include \"d/empty.conf\"\n"
	    "d = 0x10;\n",
	    main_path);
	memset(&f, 0, sizeof(f));
	ck_assert_msg(config_file_read(main_path, &f, &err) == 0, "%s",
		      err.msg);
	ck_assert_str_eq(f.text, "a = 1;\nb = 2;\nc = 3;\nd = 0x10;\n");
	ck_assert_uint_eq(f.n_ints, 4);
	ck_assert_str_eq(f.ints[3].text, "0x10");
	ck_assert(f.ints[3].hex);
	ck_assert_uint_eq(f.ints[3].mag, 16);
	ck_assert_uint_eq(f.n_files, 3);
	ck_assert_str_eq(f.files[1], inc);
	config_file_where(&f, 1, &file, &line);
	ck_assert_str_eq(file, main_path);
	ck_assert_uint_eq(line, 1);
	config_file_where(&f, 3, &file, &line);
	ck_assert_str_eq(file, inc);
	ck_assert_uint_eq(line, 2);
	config_file_where(&f, 4, &file, &line);
	ck_assert_str_eq(file, main_path);
	ck_assert_uint_eq(line, 4);
	config_file_where(&f, 0, &file, &line);
	ck_assert_str_eq(file, main_path);
	ck_assert_uint_eq(line, 0);
	config_file_free(&f);
	config_file_free(NULL);
}
END_TEST

/* An @include nested deeper than CONFIG_FILE_DEPTH_MAX is refused. */
START_TEST(test_include_depth)
{
	struct config_file f;
	struct errbuf err;
	char name[32], text[64], path[128];
	int i;

	for (i = 0; i <= CONFIG_FILE_DEPTH_MAX; i++) {
		snprintf(name, sizeof(name), "%d.conf", i);
		snprintf(text, sizeof(text), "@include \"%d.conf\"\n", i + 1);
		put(name, text, path);
	}
	put("11.conf", "a = 1;\n", path);
	snprintf(path, sizeof(path), "%s/0.conf", tmpdir);
	memset(&f, 0, sizeof(f));
	ck_assert_int_eq(config_file_read(path, &f, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "/10.conf:1: @include \"11.conf\": "
				      "nested more than 10 deep") != NULL,
		      "%s", err.msg);
	config_file_free(&f);
}
END_TEST

static Suite *config_file_suite(void)
{
	Suite *s = suite_create("config_file");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_agrees_with_libconfig);
	tcase_add_loop_test(tc, test_include_only_at_line_start, 0, 5);
	tcase_add_test(tc, test_include_text_and_lines);
	tcase_add_test(tc, test_include_depth);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(config_file_suite());
}
