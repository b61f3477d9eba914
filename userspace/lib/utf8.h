/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * utf8.h - checking that text edgectl stores (comments, interface names)
 * is what the JSON state file can hold and a terminal can show: strict
 * UTF-8 and no control characters.
 *
 * Pure functions: no I/O.
 */
#ifndef EDGE_UTF8_H
#define EDGE_UTF8_H

#include <stddef.h>

#include "log.h"

/*
 * Check that the len bytes at s are well-formed UTF-8 (RFC 3629): no
 * stray continuation bytes, no truncated sequences, no overlong forms, no
 * UTF-16 surrogates (U+D800..U+DFFF), nothing above U+10FFFF, and no
 * bytes that never occur in UTF-8 (0xc0, 0xc1, 0xf5..0xff). Returns 0, or
 * -EILSEQ with err saying "invalid UTF-8 at byte N (1-based, the first
 * byte of the bad sequence): what is wrong" and *bad set to N - 1 when bad
 * is not NULL.
 */
int utf8_check(const char *s, size_t len, size_t *bad, struct errbuf *err);

/*
 * utf8_check, then no control characters: C0 (U+0000..U+001F), DEL
 * (U+007F) and C1 (U+0080..U+009F). Returns 0, -EILSEQ (as utf8_check)
 * or -EINVAL with err saying "a control character (U+XXXX) at byte N".
 */
int utf8_check_text(const char *s, size_t len, struct errbuf *err);

#endif /* EDGE_UTF8_H */
