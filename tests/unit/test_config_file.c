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

/* ---- ${NAME} from the environment ------------------------------------------
 */

/* Read tmpdir/edge.conf holding text into *f: its return code, and the
 * string setting "a" as libconfig reads the text into a (64 bytes), when
 * it reads. */
static int read_a(const char *text, struct config_file *f, struct errbuf *err,
		  char *a, size_t size)
{
	char path[128];
	const char *v = NULL;
	config_t lc;
	int rc;

	put("edge.conf", text, path);
	memset(f, 0, sizeof(*f));
	a[0] = '\0';
	rc = config_file_read(path, f, err);
	if (rc)
		return rc;
	config_init(&lc);
	ck_assert_msg(config_read_string(&lc, f->text) == CONFIG_TRUE, "%s: %s",
		      config_error_text(&lc), f->text);
	ck_assert_int_eq(config_lookup_string(&lc, "a", &v), CONFIG_TRUE);
	snprintf(a, size, "%s", v);
	config_destroy(&lc);
	return 0;
}

struct env_case {
	const char *text; /* the file */
	const char *want; /* "a", or the error's end after "edge.conf:" */
};

/* Values, defaults and what is left as it is; EDGE_T_SET is "v1",
 * EDGE_T_EMPTY "", EDGE_T_UNSET unset. */
static const struct env_case env_ok[] = {
    {"a = \"${EDGE_T_SET}\";\n", "v1"},
    {"a = \"x-${EDGE_T_SET}-${EDGE_T_SET}y\";\n", "x-v1-v1y"},
    {"a = \"${EDGE_T_UNSET:-dflt}\";\n", "dflt"},
    {"a = \"${EDGE_T_SET:-dflt}\";\n", "v1"},
    {"a = \"${EDGE_T_EMPTY:-d $ x}\";\n", "d $ x"},
    {"a = \"<${EDGE_T_EMPTY}>\";\n", "<>"},
    {"a = \"<${EDGE_T_UNSET:-}>\";\n", "<>"},
    {"a = \"$${EDGE_T_SET}\";\n", "${EDGE_T_SET}"},
    {"a = \"$$${EDGE_T_SET}\";\n", "$${EDGE_T_SET}"},
    {"a = \"$path$query $$ $ a$ $EDGE_T_SET {x}\";\n",
     "$path$query $$ $ a$ $EDGE_T_SET {x}"},
    {"a = \"\\\\${EDGE_T_SET}\" \"${EDGE_T_SET}\";\n", "\\v1v1"},
    {"# ${EDGE_T_UNSET}\na = /* ${EDGE_T_UNSET} */ \"ok\"; // ${X\n", "ok"},
};

START_TEST(test_env_values)
{
	const struct env_case *c = &env_ok[_i];
	struct config_file f;
	struct errbuf err;
	char a[64];

	ck_assert_int_eq(setenv("EDGE_T_SET", "v1", 1), 0);
	ck_assert_int_eq(setenv("EDGE_T_EMPTY", "", 1), 0);
	ck_assert_int_eq(unsetenv("EDGE_T_UNSET"), 0);
	ck_assert_msg(read_a(c->text, &f, &err, a, sizeof(a)) == 0, "%s: %s",
		      c->text, err.msg);
	ck_assert_str_eq(a, c->want);
	config_file_free(&f);
}
END_TEST

/* What is refused, with its file and line. */
static const struct env_case env_bad[] = {
    {"b = 1;\na = \"${EDGE_T_UNSET}\";\n",
     "2: ${EDGE_T_UNSET} is not set in the environment"},
    {"a = \"x\ny ${EDGE_T_UNSET}\";\n",
     "2: ${EDGE_T_UNSET} is not set in the environment"},
    {"a = \"${1A}\";\n",
     "1: \"${1A}\": a name ([A-Za-z_][A-Za-z0-9_]*) must follow \"${\""},
    {"a = \"${}\";\n",
     "1: \"${}\": a name ([A-Za-z_][A-Za-z0-9_]*) must follow \"${\""},
    {"a = \"${A.B}\";\n", "1: \"${A.B}\": a name is [A-Za-z_][A-Za-z0-9_]*"},
    {"a = \"${A-x}\";\n",
     "1: \"${A-x}\": only ${NAME} and ${NAME:-DEFAULT} are known"},
    {"a = \"${A:=x}\";\n",
     "1: \"${A:=x}\": only ${NAME} and ${NAME:-DEFAULT} are known"},
    {"a = \"${EDGE_T_SET\";\n",
     "1: \"${EDGE_T_SET\": not closed (a '}' missing before the string's "
     "end or the line's)"},
    {"a = \"${EDGE_T_SET:-x\n}\";\n",
     "1: \"${EDGE_T_SET:-x\": not closed (a '}' missing before the "
     "string's end or the line's)"},
    {"a = \"${A:-a\\\\b}\";\n",
     "1: \"${A:-a\\\\b}\": a default may not hold '\\' or \"${\""},
    {"a = \"${A:-${B}}\";\n",
     "1: \"${A:-${B}\": a default may not hold '\\' or \"${\""},
};

START_TEST(test_env_refused)
{
	const struct env_case *c = &env_bad[_i];
	struct config_file f;
	struct errbuf err;
	char a[64], want[256];

	ck_assert_int_eq(setenv("EDGE_T_SET", "v1", 1), 0);
	ck_assert_int_eq(unsetenv("EDGE_T_UNSET"), 0);
	ck_assert_int_eq(read_a(c->text, &f, &err, a, sizeof(a)), -EINVAL);
	snprintf(want, sizeof(want), "%s/edge.conf:%s", tmpdir, c->want);
	ck_assert_str_eq(err.msg, want);
	config_file_free(&f);
}
END_TEST

/* A value is libconfig's exactly, whatever bytes it holds, and lines stay
 * the file's; one over CONFIG_FILE_VAR_MAX is refused. */
START_TEST(test_env_escaped)
{
	static const char val[] = "q\"uote\\back\\\\x41\nnl\r\t\f\x01\x7f"
				  "\xc3\xa9 \\x00 ${NOT} $$";
	struct config_file f;
	struct errbuf err;
	char a[64], *big, *text;
	const char *file, *p;
	unsigned line, lines = 0;
	int i;

	ck_assert_int_eq(setenv("EDGE_T_VAL", val, 1), 0);
	ck_assert_msg(read_a("a = \"${EDGE_T_VAL}\";\nb = 2;\n", &f, &err, a,
			     sizeof(a)) == 0,
		      "%s", err.msg);
	ck_assert_str_eq(a, val);
	for (p = f.text; *p; p++)
		lines += *p == '\n';
	ck_assert_uint_eq(lines, 2); /* no newline of the value's */
	config_file_where(&f, 2, &file, &line);
	ck_assert_uint_eq(line, 2);
	config_file_free(&f);

	big = malloc(CONFIG_FILE_VAR_MAX + 2);
	ck_assert_ptr_nonnull(big);
	memset(big, 'x', CONFIG_FILE_VAR_MAX + 1);
	big[CONFIG_FILE_VAR_MAX + 1] = '\0';
	ck_assert_int_eq(setenv("EDGE_T_VAL", big, 1), 0);
	ck_assert_int_eq(
	    read_a("a = \"${EDGE_T_VAL}\";\n", &f, &err, a, sizeof(a)),
	    -EINVAL);
	ck_assert_msg(strstr(err.msg, "edge.conf:1: ${EDGE_T_VAL} is longer "
				      "than 64 KiB") != NULL,
		      "%s", err.msg);
	config_file_free(&f);
	big[CONFIG_FILE_VAR_MAX] = '\0'; /* just the most */
	ck_assert_int_eq(setenv("EDGE_T_VAL", big, 1), 0);
	ck_assert_int_eq(
	    read_a("a = \"${EDGE_T_VAL}\";\n", &f, &err, a, sizeof(a)), 0);
	config_file_free(&f);
	/* and the whole text stays within CONFIG_FILE_MAX */
	ck_assert_int_eq(CONFIG_FILE_MAX / CONFIG_FILE_VAR_MAX, 256);
	text = calloc(300, 20);
	ck_assert_ptr_nonnull(text);
	strcpy(text, "a = [\"\"");
	for (i = 0; i < 300; i++)
		strcat(text, ",\"${EDGE_T_VAL}\"");
	strcat(text, "];\n");
	ck_assert_int_eq(read_a(text, &f, &err, a, sizeof(a)), -EFBIG);
	ck_assert_msg(strstr(err.msg, "larger than 16 MiB") != NULL, "%s",
		      err.msg);
	config_file_free(&f);
	free(text);
	free(big);
	unsetenv("EDGE_T_VAL");
}
END_TEST

/* In an included file: its own file and lines; in an @include's name. */
START_TEST(test_env_in_include)
{
	struct config_file f;
	struct errbuf err;
	char main_path[128], inc[128], want[256];
	const char *file;
	unsigned line;

	ck_assert_int_eq(setenv("EDGE_T_SET", "v1", 1), 0);
	ck_assert_int_eq(unsetenv("EDGE_T_UNSET"), 0);
	ck_assert_int_eq(snprintf(want, sizeof(want), "%s/d", tmpdir) > 0, 1);
	ck_assert_int_eq(mkdir(want, 0755), 0);
	ck_assert_int_eq(setenv("EDGE_T_DIR", "d", 1), 0);
	put("d/inc.conf", "b = \"${EDGE_T_SET}\n\";\nc = \"${EDGE_T_SET}\";\n",
	    inc);
	put("edge.conf",
	    "a = 1;\n@include \"${EDGE_T_DIR}/inc.conf\"\nd = 2;\n", main_path);
	memset(&f, 0, sizeof(f));
	ck_assert_msg(config_file_read(main_path, &f, &err) == 0, "%s",
		      err.msg);
	ck_assert_str_eq(f.text,
			 "a = 1;\nb = \"v1\n\";\nc = \"v1\";\nd = 2;\n");
	config_file_where(&f, 4, &file, &line);
	ck_assert_str_eq(file, inc);
	ck_assert_uint_eq(line, 3);
	config_file_where(&f, 5, &file, &line);
	ck_assert_str_eq(file, main_path);
	ck_assert_uint_eq(line, 3);
	config_file_free(&f);

	put("d/inc.conf", "b = 1;\n\nc = \"${EDGE_T_UNSET}\";\n", inc);
	memset(&f, 0, sizeof(f));
	ck_assert_int_eq(config_file_read(main_path, &f, &err), -EINVAL);
	snprintf(want, sizeof(want),
		 "%s:3: ${EDGE_T_UNSET} is not set in the environment", inc);
	ck_assert_str_eq(err.msg, want);
	config_file_free(&f);

	put("edge.conf", "a = 1;\n@include \"${EDGE_T_UNSET}/inc.conf\"\n",
	    main_path);
	memset(&f, 0, sizeof(f));
	ck_assert_int_eq(config_file_read(main_path, &f, &err), -EINVAL);
	snprintf(want, sizeof(want),
		 "%s:2: @include \"${EDGE_T_UNSET}/inc.conf\": "
		 "${EDGE_T_UNSET} is not set in the environment",
		 main_path);
	ck_assert_str_eq(err.msg, want);
	config_file_free(&f);
	unsetenv("EDGE_T_DIR");
}
END_TEST

/* ---- @include with a glob --------------------------------------------------
 */

/* Every match, in strcmp order; none: nothing; a plain name that is not
 * there: an error as ever. */
START_TEST(test_include_glob)
{
	struct config_file f;
	struct errbuf err;
	char main_path[128], p[128], want[512];

	ck_assert_int_eq(snprintf(want, sizeof(want), "%s/conf.d", tmpdir) > 0,
			 1);
	ck_assert_int_eq(mkdir(want, 0755), 0);
	put("conf.d/b.conf", "b = 2;\n", p);
	put("conf.d/a.conf", "a = 1;", p); /* no newline at the end */
	put("conf.d/B.conf", "B = 0;\n", p);
	put("conf.d/c.conf.off", "c = 3;\n", p);
	put("conf.d/aa.conf", "aa = 11;\n", p);
	put("edge.conf",
	    "x = 0;\n@include \"conf.d/*.conf\"\n@include \"none/*.conf\"\n"
	    "@include \"conf.d/[z]\"\ny = 9;\n",
	    main_path);
	memset(&f, 0, sizeof(f));
	ck_assert_msg(config_file_read(main_path, &f, &err) == 0, "%s",
		      err.msg);
	ck_assert_str_eq(f.text, "x = 0;\nB = 0;\na = 1;\naa = 11;\nb = 2;\n"
				 "y = 9;\n");
	ck_assert_uint_eq(f.n_files, 5);
	snprintf(want, sizeof(want), "%s/conf.d/a.conf", tmpdir);
	ck_assert_str_eq(f.files[2], want);
	config_file_free(&f);

	/* each match is checked as an include is: a directory is refused */
	snprintf(want, sizeof(want), "%s/conf.d/d.conf", tmpdir);
	ck_assert_int_eq(mkdir(want, 0755), 0);
	memset(&f, 0, sizeof(f));
	ck_assert_int_eq(config_file_read(main_path, &f, &err), -EINVAL);
	snprintf(want, sizeof(want),
		 "%s:2: @include \"conf.d/*.conf\": %s/conf.d/d.conf: not a "
		 "regular file (a directory)",
		 main_path, tmpdir);
	ck_assert_str_eq(err.msg, want);
	config_file_free(&f);

	/* the main file's folder is no pattern */
	snprintf(want, sizeof(want), "%s/x[1]*", tmpdir);
	ck_assert_int_eq(mkdir(want, 0755), 0);
	snprintf(want, sizeof(want), "%s/x[1]*/conf.d", tmpdir);
	ck_assert_int_eq(mkdir(want, 0755), 0);
	put("x[1]*/conf.d/a.conf", "a = 1;\n", p);
	put("x[1]*/edge.conf", "@include \"conf.d/*\"\n", main_path);
	memset(&f, 0, sizeof(f));
	ck_assert_msg(config_file_read(main_path, &f, &err) == 0, "%s",
		      err.msg);
	ck_assert_str_eq(f.text, "a = 1;\n");
	config_file_free(&f);

	snprintf(main_path, sizeof(main_path), "%s/edge.conf", tmpdir);
	put("edge.conf", "x = 0;\n@include \"conf.d/none.conf\"\n", main_path);
	memset(&f, 0, sizeof(f));
	ck_assert_int_eq(config_file_read(main_path, &f, &err), -ENOENT);
	snprintf(want, sizeof(want),
		 "%s:2: @include \"conf.d/none.conf\": %s/conf.d/none.conf: "
		 "No such file or directory",
		 main_path, tmpdir);
	ck_assert_str_eq(err.msg, want);
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
	tcase_add_loop_test(tc, test_env_values, 0,
			    (int)(sizeof(env_ok) / sizeof(env_ok[0])));
	tcase_add_loop_test(tc, test_env_refused, 0,
			    (int)(sizeof(env_bad) / sizeof(env_bad[0])));
	tcase_add_test(tc, test_env_escaped);
	tcase_add_test(tc, test_env_in_include);
	tcase_add_test(tc, test_include_glob);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(config_file_suite());
}
