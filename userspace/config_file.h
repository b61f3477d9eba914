/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * config_file.h - the configuration's text, read before libconfig parses
 * it: the file and every file it @includes, each opened without blocking,
 * refused unless it is a regular file, bounded in size and read whole,
 * then lexed in libconfig's syntax to refuse what libconfig would get
 * wrong and to keep every integer exactly as written.
 *
 * Why: libconfig 1.5 calls exit(2) from its scanner when handed a
 * directory, blocks in fopen() on a FIFO, cuts a string at a NUL byte
 * (and drops a "\x00" escape), and keeps only 32 bits of an integer
 * written without an L suffix. So libconfig never opens a file here:
 * config_file_read() expands each @include itself into one text, which
 * config_load() hands to config_read_string(), and a line of that text is
 * mapped back to its file and line with config_file_where().
 *
 * The lexer follows libconfig's scanner (lib/scanner.l): '#' and "//"
 * comments to the end of the line, "/" "*" ... "*" "/" comments, strings
 * with the escapes \\ \" \f \n \r \t \xNN, names, integers (decimal with
 * an optional sign, hex "0x..."; either with an L or LL suffix), floats,
 * and `@include "FILE"` at the start of a line (after blanks). It adds
 * rules of its own: no NUL byte anywhere, no "\x00" in a string, no
 * comment or string left open at the end of a file, only a comment after
 * an @include on its line, and in an @include's file name only the
 * escapes \\ and \".
 *
 * In a string and in an @include's file name, "${NAME}" (NAME
 * [A-Za-z_][A-Za-z0-9_]*) is the environment variable NAME's value, an
 * error when it is not set; "${NAME:-DEFAULT}" is DEFAULT when NAME is
 * unset or empty (DEFAULT holds no '}', '"', '\\', newline or "${");
 * "$${" is "${"; any other '$' stays. A value goes into the text escaped
 * so that libconfig reads it back exactly, on the line it was on.
 *
 * Used by config.c only; does no logging and keeps no global state.
 */
#ifndef EDGE_CONFIG_FILE_H
#define EDGE_CONFIG_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

/* Bytes of the whole text: the main file with everything it includes. */
#define CONFIG_FILE_MAX (16u << 20)
/* @include nesting below the main file (libconfig 1.5's own limit). */
#define CONFIG_FILE_DEPTH_MAX 10
/* @include lines followed in one read, all files together. */
#define CONFIG_FILE_INCLUDES_MAX 4096
/* Bytes of an environment variable's value a ${NAME} takes. */
#define CONFIG_FILE_VAR_MAX (64u << 10)
/* Bytes of the NAME of a ${NAME}. */
#define CONFIG_FILE_VAR_NAME_MAX 255
/* Bytes of an integer literal's text kept for messages, with its NUL. */
#define CONFIG_FILE_INT_TEXT 32

/* One integer literal, in the order the text holds them. */
struct config_file_int {
	uint64_t mag; /* its magnitude, when !big */
	bool neg;     /* written with a '-' */
	bool big;     /* the magnitude does not fit in 64 bits */
	bool hex;     /* written "0x..." */
	/* as written ("5000000000", "0x1F", "16L"); a longer one is cut
	 * short, ending in "..." */
	char text[CONFIG_FILE_INT_TEXT];
};

/* Lines of the text that come from one file, from line on. */
struct config_file_span {
	unsigned line;	    /* its first line in text, from 1 */
	unsigned file_line; /* that line's number in the file */
	size_t file;	    /* index in files */
};

struct config_file {
	char *text; /* NUL-terminated, no other NUL, no @include left */
	size_t len;
	/* files[0] is the main file's path as given; then every included
	 * file as it was opened (the main file's folder + "/" + its name,
	 * or its absolute name) */
	char **files;
	size_t n_files;
	struct config_file_span *spans; /* ascending by line */
	size_t n_spans;
	struct config_file_int *ints;
	size_t n_ints;
};

/*
 * Read the configuration file at path, and every file it @includes, into
 * *f (which the caller zeroed). An @include "NAME" stands for NAME's text
 * in its place: NAME is relative to the main file's folder (a nested
 * include's too), or absolute. A NAME with '*', '?' or '[' is a glob(3)
 * pattern: every file it matches, in strcmp order, each counted as an
 * @include; a pattern matching nothing stands for nothing. Each file is
 * opened with O_NONBLOCK (so a FIFO cannot block the open) and must be a
 * regular file; all of them together may hold CONFIG_FILE_MAX bytes; no
 * file may be included from inside itself.
 *
 * Reads the environment (getenv) for ${NAME}; changes nothing.
 *
 * Returns 0; or with err holding "FILE: message", "FILE:LINE: message"
 * for what is wrong at a line, or "FILE:LINE: @include \"NAME\": PATH:
 * message" for an included file that cannot be read:
 *   -ENOENT, -EACCES, ... the file could not be opened or read (errno);
 *   -EINVAL  not a regular file ("PATH: not a regular file (a FIFO)"), a
 *            NUL byte, "\x00" in a string, a comment or string not
 *            closed, a malformed @include, nesting too deep or a cycle,
 *            a malformed "${", a variable not set ("FILE:LINE: ${NAME}
 *            is not set in the environment") or longer than
 *            CONFIG_FILE_VAR_MAX;
 *   -EFBIG   larger than CONFIG_FILE_MAX;
 *   -ENOMEM.
 * After an error *f holds whatever was read; config_file_free() frees it.
 */
int config_file_read(const char *path, struct config_file *f,
		     struct errbuf *err);

/*
 * The file (*file, one of f->files) and the line in it (*file_line) of
 * line `line` of f->text. Line 0, or a text with no lines, gives the main
 * file and line 0.
 */
void config_file_where(const struct config_file *f, unsigned line,
		       const char **file, unsigned *file_line);

/* Free what *f holds and zero it. f may be NULL. */
void config_file_free(struct config_file *f);

#endif /* EDGE_CONFIG_FILE_H */
