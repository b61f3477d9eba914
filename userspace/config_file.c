/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * config_file.c - the configuration's text before libconfig reads it
 * (config_file.h): each file opened without blocking and refused unless
 * regular, read whole within CONFIG_FILE_MAX, lexed as libconfig's
 * scanner lexes it, its @includes expanded in place and its integers
 * recorded as written.
 *
 * The text is built as the files are lexed: the bytes of a file up to an
 * @include are copied, then the included file's (which ends in a
 * newline, so that no token runs across the seam), then the file goes on
 * after the @include's line. Every change of file starts a span, so that
 * a line of the text can be traced back to a file and a line in it.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_file.h"

#define CF_MIB (1u << 20)

/* One file being lexed. */
struct cf_src {
	const char *buf; /* its bytes, NUL-terminated, no other NUL */
	size_t len;
	size_t pos;	/* next byte to lex */
	size_t flushed; /* bytes of buf copied to the text (or skipped) */
	size_t file;	/* index in f->files */
	unsigned line;	/* the line pos is on */
	dev_t dev;
	ino_t ino;
};

/* One read: the text being built and the files being lexed. */
struct cf {
	struct config_file *f;
	struct errbuf *err;
	char *dir; /* the main file's folder; NULL for the current one */
	size_t cap, spans_cap, ints_cap, files_cap;
	unsigned lines;	 /* newlines in f->text so far */
	size_t includes; /* @include lines followed so far */
	struct cf_src *stack[CONFIG_FILE_DEPTH_MAX + 1];
	size_t depth; /* files in stack */
};

static bool cf_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* The value of hex digit c, or -1. */
static int cf_xdigit(char c)
{
	if (cf_digit(c))
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* libconfig's names: [A-Za-z*][-A-Za-z0-9_*]* */
static bool cf_name_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '*';
}

static bool cf_name_char(char c)
{
	return cf_name_start(c) || cf_digit(c) || c == '-' || c == '_';
}

/* ---- errors ---------------------------------------------------------------
 */

/* "FILE:LINE: message" about s's file. Returns -EINVAL. */
static int cf_fail(struct cf *x, const struct cf_src *s, unsigned line,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int cf_fail(struct cf *x, const struct cf_src *s, unsigned line,
		   const char *fmt, ...)
{
	char msg[ERRBUF_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	errbuf_set(x->err, "%s:%u: %s", x->f->files[s->file], line, msg);
	return -EINVAL;
}

static int cf_nomem(struct cf *x, const char *path)
{
	errbuf_set(x->err, "%s: out of memory", path);
	return -ENOMEM;
}

static int cf_too_large(struct cf *x, const char *site, const char *path)
{
	errbuf_set(x->err,
		   "%s%s: larger than %u MiB, the most a configuration may "
		   "take with what it includes",
		   site, path, CONFIG_FILE_MAX / CF_MIB);
	return -EFBIG;
}

/* ---- building the text ------------------------------------------------------
 */

/* Make room for need elements of size bytes in *v, of *cap. */
static int cf_grow(void **v, size_t *cap, size_t need, size_t size)
{
	size_t ncap = *cap ? *cap : 16;
	void *nv;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap *= 2;
	nv = realloc(*v, ncap * size);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = ncap;
	return 0;
}

/* Append n bytes to the text, within CONFIG_FILE_MAX. */
static int cf_put(struct cf *x, const char *p, size_t n)
{
	struct config_file *f = x->f;
	const char *nl = p, *end = p + n;

	if (n > CONFIG_FILE_MAX - f->len)
		return cf_too_large(x, "", f->files[0]);
	if (cf_grow((void **)&f->text, &x->cap, f->len + n + 1, 1) < 0)
		return cf_nomem(x, f->files[0]);
	memcpy(f->text + f->len, p, n);
	f->len += n;
	f->text[f->len] = '\0';
	while ((nl = memchr(nl, '\n', (size_t)(end - nl))) != NULL) {
		x->lines++;
		nl++;
	}
	return 0;
}

/* Copy s's bytes up to upto into the text. */
static int cf_flush(struct cf *x, struct cf_src *s, size_t upto)
{
	int rc = cf_put(x, s->buf + s->flushed, upto - s->flushed);

	s->flushed = upto;
	return rc;
}

/* The text from its next line on comes from line file_line of file. */
static int cf_span(struct cf *x, size_t file, unsigned file_line)
{
	struct config_file *f = x->f;
	struct config_file_span sp = {x->lines + 1, file_line, file};

	if (f->n_spans && f->spans[f->n_spans - 1].line == sp.line) {
		f->spans[f->n_spans - 1] = sp; /* the last one got no line */
		return 0;
	}
	if (cf_grow((void **)&f->spans, &x->spans_cap, f->n_spans + 1,
		    sizeof(sp)) < 0)
		return cf_nomem(x, f->files[0]);
	f->spans[f->n_spans++] = sp;
	return 0;
}

/* Record the integer literal p[0..len), hex or decimal. */
static int cf_int(struct cf *x, const char *p, size_t len, bool hex)
{
	struct config_file *f = x->f;
	struct config_file_int *v;
	size_t i = 0;

	if (cf_grow((void **)&f->ints, &x->ints_cap, f->n_ints + 1,
		    sizeof(*v)) < 0)
		return cf_nomem(x, f->files[0]);
	v = &f->ints[f->n_ints++];
	memset(v, 0, sizeof(*v));
	v->hex = hex;
	if (hex) {
		for (i = 2; i < len && cf_xdigit(p[i]) >= 0; i++) {
			if (v->big || v->mag >> 60)
				v->big = true;
			else
				v->mag =
				    v->mag << 4 | (uint64_t)cf_xdigit(p[i]);
		}
	} else {
		if (p[0] == '-' || p[0] == '+') {
			v->neg = p[0] == '-';
			i = 1;
		}
		for (; i < len && cf_digit(p[i]); i++) {
			uint64_t d = (uint64_t)(p[i] - '0');

			if (v->big || v->mag > (UINT64_MAX - d) / 10)
				v->big = true;
			else
				v->mag = v->mag * 10 + d;
		}
	}
	if (len < sizeof(v->text)) {
		memcpy(v->text, p, len);
	} else {
		memcpy(v->text, p, sizeof(v->text) - 4);
		memcpy(v->text + sizeof(v->text) - 4, "...", 4);
	}
	return 0;
}

/* ---- the lexer (libconfig's lib/scanner.l, INITIAL state) --------------- */

static size_t cf_digits(const char *p)
{
	size_t n = 0;

	while (cf_digit(p[n]))
		n++;
	return n;
}

/* [eE][-+]?[0-9]+ at p: its length, or 0. */
static size_t cf_exponent(const char *p)
{
	size_t i = 1, d;

	if (p[0] != 'e' && p[0] != 'E')
		return 0;
	if (p[i] == '+' || p[i] == '-')
		i++;
	d = cf_digits(p + i);
	return d ? i + d : 0;
}

/* The longest float at p, or 0: ([-+]?[0-9]*\.[0-9]*EXP?) or
 * ([-+]?[0-9]+(\.[0-9]*)?EXP). */
static size_t cf_float(const char *p)
{
	size_t i = p[0] == '+' || p[0] == '-';
	size_t d = cf_digits(p + i), k = i + d, a = 0, b = 0, e;

	if (p[k] == '.') {
		k++;
		k += cf_digits(p + k);
		a = k + cf_exponent(p + k);
	}
	if (d) {
		k = i + d;
		if (p[k] == '.') {
			k++;
			k += cf_digits(p + k);
		}
		e = cf_exponent(p + k);
		b = e ? k + e : 0;
	}
	return a > b ? a : b;
}

/* n plus an "L" or "LL" suffix at p + n (n when there is none). */
static size_t cf_suffix(const char *p, size_t n)
{
	if (n && p[n] == 'L')
		n += p[n + 1] == 'L' ? 2 : 1;
	return n;
}

/* A number at s->pos (a digit, sign or dot): the longest of libconfig's
 * float, integer and hex rules wins, the earlier rule on a tie, as in
 * flex; a lone sign is one byte of garbage for libconfig to refuse. */
static int cf_number(struct cf *x, struct cf_src *s)
{
	const char *p = s->buf + s->pos;
	size_t sign = p[0] == '+' || p[0] == '-', d = cf_digits(p + sign);
	size_t best = cf_float(p), dec = cf_suffix(p, d ? sign + d : 0);
	size_t hex = 0;
	bool is_int = false, is_hex = false;
	int rc = 0;

	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X') &&
	    cf_xdigit(p[2]) >= 0) {
		hex = 3;
		while (cf_xdigit(p[hex]) >= 0)
			hex++;
		hex = cf_suffix(p, hex);
	}
	if (dec > best) {
		best = dec;
		is_int = true;
	}
	if (hex > best) {
		best = hex;
		is_int = false;
		is_hex = true;
	}
	if (is_int || is_hex)
		rc = cf_int(x, p, best, is_hex);
	s->pos += best ? best : 1;
	return rc;
}

/* ---- ${NAME} in strings and @include names --------------------------------
 */

/* One "${NAME}" or "${NAME:-DEFAULT}", as cf_var_parse read it. */
struct cf_var {
	size_t len; /* from the '$' through the '}' */
	char name[CONFIG_FILE_VAR_NAME_MAX + 1];
	const char *dflt; /* its DEFAULT; NULL without ":-" */
	size_t dlen;
};

static bool cf_var_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* Parse the "${" at p into *v. Returns 0, or -EINVAL with *why saying
 * what is wrong: a bad name, no '}' on its line and before the string's
 * end, or a default holding '"', '\\' or "${". */
static int cf_var_parse(const char *p, struct cf_var *v, const char **why)
{
	size_t i = 2, n = 0;

	memset(v, 0, sizeof(*v));
	if (!cf_var_start(p[i])) {
		*why = "a name ([A-Za-z_][A-Za-z0-9_]*) must follow \"${\"";
		return -EINVAL;
	}
	while (cf_var_start(p[i]) || cf_digit(p[i])) {
		if (n == CONFIG_FILE_VAR_NAME_MAX) {
			*why = "the name is too long";
			return -EINVAL;
		}
		v->name[n++] = p[i++];
	}
	if (p[i] == ':' && p[i + 1] == '-') {
		i += 2;
		v->dflt = p + i;
		while (p[i] && !strchr("}\"\\\n", p[i]) &&
		       !(p[i] == '$' && p[i + 1] == '{'))
			i++;
		v->dlen = (size_t)(p + i - v->dflt);
		if (p[i] == '\\' || p[i] == '$') {
			*why = "a default may not hold '\\' or \"${\"";
			return -EINVAL;
		}
	}
	if (p[i] == '}') {
		v->len = i + 1;
		return 0;
	}
	if (!p[i] || p[i] == '"' || p[i] == '\n')
		*why = "not closed (a '}' missing before the string's end "
		       "or the line's)";
	else if (strchr(":-=?+", p[i]))
		*why = "only ${NAME} and ${NAME:-DEFAULT} are known";
	else
		*why = "a name is [A-Za-z_][A-Za-z0-9_]*";
	return -EINVAL;
}

/* Bytes of a "${..." at p to show in a message: through its '}', or to
 * the string's or the line's end, at most 40. */
static size_t cf_var_shown(const char *p)
{
	size_t n = strcspn(p, "}\"\n");

	n += p[n] == '}';
	return n < 40 ? n : 40;
}

/* The value of *v: the environment's, or its default when the variable is
 * unset (or empty, given a default). Returns 0, or -EINVAL with *why. */
static int cf_var_value(const struct cf_var *v, const char **val, size_t *len,
			const char **why)
{
	const char *e = getenv(v->name);

	if (v->dflt && (!e || !e[0])) {
		*val = v->dflt;
		*len = v->dlen;
		return 0;
	}
	if (!e) {
		*why = "is not set in the environment";
		return -EINVAL;
	}
	*len = strlen(e);
	if (*len > CONFIG_FILE_VAR_MAX) {
		*why = "is longer than 64 KiB";
		return -EINVAL;
	}
	*val = e;
	return 0;
}

/* Append val[0..len) to the text as a libconfig string reads it back:
 * '"' and '\\' escaped, control bytes as \n \r \t \f or \xNN, no raw
 * newline (so the text's lines stay the files'). */
static int cf_put_escaped(struct cf *x, const char *val, size_t len)
{
	char out[512];
	size_t i, n = 0;
	int rc;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)val[i];
		const char *esc = NULL;

		if (n + 4 > sizeof(out)) {
			rc = cf_put(x, out, n);
			if (rc)
				return rc;
			n = 0;
		}
		switch (c) {
		case '"':
			esc = "\\\"";
			break;
		case '\\':
			esc = "\\\\";
			break;
		case '\n':
			esc = "\\n";
			break;
		case '\r':
			esc = "\\r";
			break;
		case '\t':
			esc = "\\t";
			break;
		case '\f':
			esc = "\\f";
			break;
		default:
			break;
		}
		if (esc) {
			memcpy(out + n, esc, 2);
			n += 2;
		} else if (c < 0x20 || c == 0x7f) {
			n += (size_t)snprintf(out + n, 5, "\\x%02x", c);
		} else {
			out[n++] = (char)c;
		}
	}
	return cf_put(x, out, n);
}

/* The "$" at s->buf[*i], inside a string: "$${" becomes "${", "${...}"
 * its value (escaped), anything else stays. *i goes past what it read. */
static int cf_dollar(struct cf *x, struct cf_src *s, size_t *i)
{
	const char *b = s->buf, *val, *why = NULL;
	struct cf_var v;
	size_t len;
	int rc;

	if (b[*i + 1] == '$' && b[*i + 2] == '{') {
		rc = cf_flush(x, s, *i);
		s->flushed = *i + 1; /* the first '$' goes */
		*i += 3;
		return rc;
	}
	if (b[*i + 1] != '{') {
		(*i)++;
		return 0;
	}
	if (cf_var_parse(b + *i, &v, &why) < 0)
		return cf_fail(x, s, s->line, "\"%.*s\": %s",
			       (int)cf_var_shown(b + *i), b + *i, why);
	if (cf_var_value(&v, &val, &len, &why) < 0)
		return cf_fail(x, s, s->line, "${%s} %s", v.name, why);
	rc = cf_flush(x, s, *i);
	if (rc == 0)
		rc = v.dflt && val == v.dflt ? cf_put(x, val, len)
					     : cf_put_escaped(x, val, len);
	*i += v.len;
	s->flushed = *i;
	return rc;
}

/* A string at s->pos, to its closing quote, its ${NAME}s replaced. */
static int cf_string(struct cf *x, struct cf_src *s)
{
	const char *b = s->buf;
	unsigned line = s->line;
	size_t i = s->pos + 1;

	for (;;) {
		switch (b[i]) {
		case '\0':
			return cf_fail(x, s, line,
				       "string never closed (a '\"' missing)");
		case '"':
			s->pos = i + 1;
			return 0;
		case '\n':
			s->line++;
			i++;
			break;
		case '\\':
			if (b[i + 1] && strchr("nrtf\\\"", b[i + 1])) {
				i += 2;
			} else if ((b[i + 1] == 'x' || b[i + 1] == 'X') &&
				   cf_xdigit(b[i + 2]) >= 0 &&
				   cf_xdigit(b[i + 3]) >= 0) {
				if (cf_xdigit(b[i + 2]) == 0 &&
				    cf_xdigit(b[i + 3]) == 0)
					return cf_fail(x, s, s->line,
						       "\"\\x00\" in a string "
						       "(a NUL byte is not "
						       "allowed)");
				i += 4;
			} else {
				i++; /* a backslash as it is */
			}
			break;
		case '$': {
			int rc = cf_dollar(x, s, &i);

			if (rc)
				return rc;
			break;
		}
		default:
			i++;
		}
	}
}

/* A block comment at s->pos, to its end. */
static int cf_comment(struct cf *x, struct cf_src *s)
{
	const char *b = s->buf, *end = strstr(b + s->pos + 2, "*/"), *p;

	if (!end)
		return cf_fail(x, s, s->line,
			       "comment never closed (a '*/' missing)");
	for (p = b + s->pos; p < end; p++)
		s->line += *p == '\n';
	s->pos = (size_t)(end - b) + 2;
	return 0;
}

/* A '#' or "//" comment at s->pos, up to its newline. */
static void cf_line_comment(struct cf_src *s)
{
	while (s->buf[s->pos] && s->buf[s->pos] != '\n')
		s->pos++;
}

/* libconfig's include_open, ^[ \t]*@include[ \t]+\", at p (the start of
 * a line): the length up to and including the quote, or 0. */
static size_t cf_include_open(const char *p)
{
	size_t i = strspn(p, " \t"), j;

	if (strncmp(p + i, "@include", 8) != 0)
		return 0;
	i += 8;
	j = strspn(p + i, " \t");
	if (j == 0 || p[i + j] != '"')
		return 0;
	return i + j + 1;
}

static int cf_file(struct cf *x, const char *path, const char *site);

/* An @include's NAME (its escapes undone) with its ${NAME}s replaced,
 * into out[0..size): a file name, nothing escaped. */
static int cf_include_vars(struct cf *x, const struct cf_src *s, unsigned line,
			   const char *name, char *out, size_t size)
{
	const char *val, *why = NULL;
	struct cf_var v;
	size_t i = 0, n = 0, len;

	while (name[i]) {
		if (name[i] == '$' && name[i + 1] == '$' &&
		    name[i + 2] == '{') {
			val = "${";
			len = 2;
			i += 3;
		} else if (name[i] == '$' && name[i + 1] == '{') {
			if (cf_var_parse(name + i, &v, &why) < 0)
				return cf_fail(
				    x, s, line, "@include \"%s\": \"%.*s\": %s",
				    name, (int)cf_var_shown(name + i), name + i,
				    why);
			if (cf_var_value(&v, &val, &len, &why) < 0)
				return cf_fail(x, s, line,
					       "@include \"%s\": ${%s} %s",
					       name, v.name, why);
			i += v.len;
		} else {
			val = name + i;
			len = 1;
			i++;
		}
		if (len >= size - n)
			return cf_fail(x, s, line,
				       "@include \"%s\": the file name is "
				       "longer than %zu bytes",
				       name, size - 1);
		memcpy(out + n, val, len);
		n += len;
	}
	out[n] = '\0';
	return 0;
}

/* s with a '\\' before each byte glob(3) would read as special; NULL
 * when out of memory. */
static char *cf_glob_quote(const char *s)
{
	char *q = malloc(2 * strlen(s) + 1), *o = q;

	if (!q)
		return NULL;
	for (; *s; s++) {
		if (strchr("*?[\\", *s))
			*o++ = '\\';
		*o++ = *s;
	}
	*o = '\0';
	return q;
}

static int cf_strcmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The files matching pattern (an @include's, at line of s), in strcmp
 * order, each appended as an @include of it would be; none: nothing. */
static int cf_glob(struct cf *x, const struct cf_src *s, unsigned line,
		   const char *pattern, const char *site)
{
	glob_t g;
	size_t i;
	int rc, e;

	memset(&g, 0, sizeof(g));
	errno = 0;
	rc = glob(pattern, GLOB_ERR | GLOB_NOSORT, NULL, &g);
	/* a folder of the pattern that is not there matches nothing too */
	if (rc == GLOB_NOMATCH ||
	    (rc == GLOB_ABORTED && (errno == ENOENT || errno == ENOTDIR))) {
		rc = 0;
	} else if (rc == GLOB_NOSPACE) {
		rc = cf_nomem(x, x->f->files[0]);
	} else if (rc != 0) {
		e = errno ? errno : EIO;
		errbuf_set(x->err, "%s%s: a folder could not be read: %s", site,
			   pattern, strerror(e));
		rc = -e;
	} else {
		qsort(g.gl_pathv, g.gl_pathc, sizeof(*g.gl_pathv), cf_strcmp);
		/* the line counted one file already */
		for (i = 0; rc == 0 && i < g.gl_pathc; i++)
			if (i && ++x->includes > CONFIG_FILE_INCLUDES_MAX)
				rc = cf_fail(x, s, line,
					     "more than %d included files",
					     CONFIG_FILE_INCLUDES_MAX);
			else
				rc = cf_file(x, g.gl_pathv[i], site);
	}
	globfree(&g);
	return rc;
}

/* The @include line at s->pos, whose opening quote ends at s->pos + n:
 * the text so far, then the included file's in place of the line. */
static int cf_include(struct cf *x, struct cf_src *s, size_t n)
{
	const char *b = s->buf;
	size_t i = s->pos + n, len = 0, dl;
	unsigned line = s->line;
	char name[PATH_MAX], full[PATH_MAX], *path = NULL, *site = NULL;
	char *qdir = NULL;
	const char *dir;
	bool pattern;
	int rc;

	for (;; i++) {
		char c = b[i];

		if (c == '\0' || c == '\n')
			return cf_fail(x, s, line,
				       "@include: the file name is not closed "
				       "on its line (a '\"' missing)");
		if (c == '"')
			break;
		if (c == '\\') {
			c = b[++i];
			if (c != '\\' && c != '"')
				return cf_fail(x, s, line,
					       "@include: unknown escape "
					       "'\\%c' in the file name (only "
					       "\\\\ and \\\" are known)",
					       c > ' ' && c < 0x7f ? c : '?');
		}
		if (len + 1 >= sizeof(name))
			return cf_fail(x, s, line,
				       "@include: the file name is longer "
				       "than %zu bytes",
				       sizeof(name) - 1);
		name[len++] = c;
	}
	name[len] = '\0';
	/* only blanks and a comment may follow: the line goes as a whole */
	i += 1 + strspn(b + i + 1, " \t\r\f");
	if (b[i] == '#' || (b[i] == '/' && b[i + 1] == '/'))
		i += strcspn(b + i, "\n");
	if (b[i] && b[i] != '\n')
		return cf_fail(x, s, line,
			       "only a comment may follow @include \"%s\" on "
			       "its line",
			       name);
	if (++x->includes > CONFIG_FILE_INCLUDES_MAX)
		return cf_fail(x, s, line, "more than %d @include lines",
			       CONFIG_FILE_INCLUDES_MAX);
	rc = cf_flush(x, s, s->pos);
	if (rc)
		return rc;
	rc = cf_include_vars(x, s, line, name, full, sizeof(full));
	if (rc)
		return rc;
	/* a name with a glob's special bytes is a pattern: the folder it is
	 * relative to is quoted in it */
	pattern = strpbrk(full, "*?[") != NULL;
	dir = x->dir;
	if (dir && pattern)
		dir = qdir = cf_glob_quote(x->dir);
	dl = dir ? strlen(dir) : 0;
	if (full[0] == '/' || !x->dir)
		path = strdup(full);
	else if (dir && asprintf(&path, "%s%s%s", dir,
				 dir[dl - 1] == '/' ? "" : "/", full) < 0)
		path = NULL;
	free(qdir);
	if (!path || asprintf(&site, "%s:%u: @include \"%s\": ",
			      x->f->files[s->file], line, name) < 0) {
		free(path);
		return cf_nomem(x, x->f->files[0]);
	}
	if (pattern)
		rc = cf_glob(x, s, line, path, site);
	else
		rc = cf_file(x, path, site);
	free(site);
	free(path);
	if (rc)
		return rc;
	if (b[i]) { /* through the newline */
		i++;
		s->line++;
	}
	s->pos = s->flushed = i;
	return cf_span(x, s->file, s->line);
}

/* Lex s from its start to its end, expanding its @includes. */
static int cf_lex(struct cf *x, struct cf_src *s)
{
	const char *b = s->buf;
	size_t n;
	int rc = 0;

	while (rc == 0 && b[s->pos]) {
		size_t p = s->pos;
		char c = b[p];

		if ((p == 0 || b[p - 1] == '\n') &&
		    (n = cf_include_open(b + p)) != 0) {
			rc = cf_include(x, s, n);
			continue;
		}
		if (c == '\n') {
			s->line++;
			s->pos++;
		} else if (c == '"') {
			rc = cf_string(x, s);
		} else if (c == '#' || (c == '/' && b[p + 1] == '/')) {
			cf_line_comment(s);
		} else if (c == '/' && b[p + 1] == '*') {
			rc = cf_comment(x, s);
		} else if (cf_digit(c) || c == '+' || c == '-' || c == '.') {
			rc = cf_number(x, s);
		} else if (cf_name_start(c)) {
			/* a name, true or false: digits and signs in it are
			 * not numbers */
			while (cf_name_char(b[++s->pos]))
				;
		} else {
			s->pos++;
		}
	}
	return rc;
}

/* ---- files ------------------------------------------------------------------
 */

static const char *cf_kind(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	return "of an unknown type";
}

static int cf_not_regular(struct cf *x, const char *site, const char *path,
			  mode_t m)
{
	errbuf_set(x->err, "%s%s: not a regular file (%s)", site, path,
		   cf_kind(m));
	return -EINVAL;
}

static int cf_errno(struct cf *x, const char *site, const char *path)
{
	int e = errno;

	errbuf_set(x->err, "%s%s: %s", site, path, strerror(e));
	return -e;
}

/* Read the regular file fd, of st_size bytes, into a new NUL-terminated
 * *out of *len bytes: at most limit bytes, or -EFBIG. */
static int cf_read_fd(struct cf *x, const char *site, const char *path, int fd,
		      off_t st_size, size_t limit, char **out, size_t *len)
{
	size_t n = 0, cap;
	char *buf, *nb;
	ssize_t r;

	if (st_size < 0 || (uint64_t)st_size > limit)
		return cf_too_large(x, site, path);
	/* one byte more, to see the file grow, and one for the NUL */
	cap = (size_t)st_size + 2;
	buf = malloc(cap);
	if (!buf)
		return cf_nomem(x, path);
	for (;;) {
		if (n + 1 == cap) {
			cap = cap * 2 < limit + 2 ? cap * 2 : limit + 2;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				return cf_nomem(x, path);
			}
			buf = nb;
		}
		r = read(fd, buf + n, cap - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(buf);
			return cf_errno(x, site, path);
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > limit) {
			free(buf);
			return cf_too_large(x, site, path);
		}
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

/* Open path, a regular file, without blocking, and read it whole into
 * s->buf (*buf, to free), within what is left of CONFIG_FILE_MAX. */
static int cf_open(struct cf *x, const char *site, const char *path,
		   struct cf_src *s, char **buf)
{
	size_t pending = 0, limit = 0, i;
	struct stat st;
	int fd, rc, fl;

	/* stat first, so that a device is never opened at all; then open
	 * with O_NONBLOCK (a FIFO put there meanwhile cannot block the
	 * open) and look again at what was opened */
	if (stat(path, &st) < 0)
		return cf_errno(x, site, path);
	if (!S_ISREG(st.st_mode))
		return cf_not_regular(x, site, path, st.st_mode);
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return cf_errno(x, site, path);
	if (fstat(fd, &st) < 0) {
		rc = cf_errno(x, site, path);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = cf_not_regular(x, site, path, st.st_mode);
		goto out;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	/* the files still being lexed hold bytes not yet in the text */
	for (i = 0; i < x->depth; i++)
		pending += x->stack[i]->len - x->stack[i]->flushed;
	if (x->f->len + pending < CONFIG_FILE_MAX)
		limit = CONFIG_FILE_MAX - x->f->len - pending;
	rc = cf_read_fd(x, site, path, fd, st.st_size, limit, buf, &s->len);
	s->buf = *buf;
	s->dev = st.st_dev;
	s->ino = st.st_ino;
out:
	close(fd);
	return rc;
}

static int cf_add_file(struct cf *x, const char *path, size_t *index)
{
	struct config_file *f = x->f;
	char *copy = strdup(path);

	if (!copy || cf_grow((void **)&f->files, &x->files_cap, f->n_files + 1,
			     sizeof(*f->files)) < 0) {
		free(copy);
		return cf_nomem(x, path);
	}
	*index = f->n_files;
	f->files[f->n_files++] = copy;
	return 0;
}

/* Read the file at path (site: "" for the main file, else "FILE:LINE:
 * @include \"NAME\": ", the @include's place, for errors about opening
 * it) and append its text, its includes expanded. */
static int cf_file(struct cf *x, const char *path, const char *site)
{
	struct cf_src s;
	char *buf = NULL;
	const char *nul;
	size_t i;
	int rc;

	memset(&s, 0, sizeof(s));
	if (x->depth > CONFIG_FILE_DEPTH_MAX) {
		errbuf_set(x->err, "%snested more than %d deep", site,
			   CONFIG_FILE_DEPTH_MAX);
		return -EINVAL;
	}
	rc = cf_open(x, site, path, &s, &buf);
	for (i = 0; rc == 0 && i < x->depth; i++)
		if (x->stack[i]->dev == s.dev && x->stack[i]->ino == s.ino) {
			errbuf_set(x->err,
				   "%s%s is already being read (an @include "
				   "cycle)",
				   site, path);
			rc = -EINVAL;
		}
	if (rc == 0)
		rc = cf_add_file(x, path, &s.file);
	if (rc)
		goto out;
	s.line = 1;
	nul = memchr(s.buf, '\0', s.len);
	if (nul) {
		const char *p;

		for (p = s.buf; p < nul; p++)
			s.line += *p == '\n';
		rc = cf_fail(x, &s, s.line,
			     "NUL byte (a configuration file is text)");
		goto out;
	}
	x->stack[x->depth++] = &s;
	rc = cf_span(x, s.file, 1);
	if (rc == 0)
		rc = cf_lex(x, &s);
	if (rc == 0)
		rc = cf_flush(x, &s, s.len);
	/* a newline at the end keeps this file's last token its own */
	if (rc == 0 && s.len && s.buf[s.len - 1] != '\n')
		rc = cf_put(x, "\n", 1);
	x->depth--;
out:
	free(buf);
	return rc;
}

int config_file_read(const char *path, struct config_file *f,
		     struct errbuf *err)
{
	struct cf x;
	char *copy = strdup(path);
	const char *dir;
	int rc;

	memset(&x, 0, sizeof(x));
	x.f = f;
	x.err = err;
	if (!copy) {
		errbuf_set(err, "%s: out of memory", path);
		return -ENOMEM;
	}
	/* relative @includes are looked for in the main file's folder */
	dir = dirname(copy);
	if (strcmp(dir, ".") != 0) {
		x.dir = strdup(dir);
		if (!x.dir) {
			free(copy);
			errbuf_set(err, "%s: out of memory", path);
			return -ENOMEM;
		}
	}
	free(copy);
	rc = cf_file(&x, path, "");
	if (rc == 0 && !f->text)
		rc = cf_put(&x, "", 0); /* an empty file: an empty text */
	free(x.dir);
	return rc;
}

void config_file_where(const struct config_file *f, unsigned line,
		       const char **file, unsigned *file_line)
{
	size_t lo = 0, hi = f->n_spans;

	*file = f->n_files ? f->files[0] : NULL;
	*file_line = 0;
	if (line == 0 || f->n_spans == 0 || f->spans[0].line > line)
		return;
	/* the last span that starts at or before line */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->spans[mid].line <= line)
			lo = mid;
		else
			hi = mid;
	}
	*file = f->files[f->spans[lo].file];
	*file_line = f->spans[lo].file_line + (line - f->spans[lo].line);
}

void config_file_free(struct config_file *f)
{
	size_t i;

	if (!f)
		return;
	for (i = 0; i < f->n_files; i++)
		free(f->files[i]);
	free(f->files);
	free(f->text);
	free(f->spans);
	free(f->ints);
	memset(f, 0, sizeof(*f));
}
