/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * utf8.c - strict UTF-8 and control-character checks for stored text.
 */
#include <errno.h>
#include <stdio.h>

#include "utf8.h"

/* The bad sequence starts at pos; why says what is wrong with it. */
static int utf8_fail(size_t pos, const char *why, size_t *bad,
		     struct errbuf *err)
{
	if (bad)
		*bad = pos;
	errbuf_set(err, "invalid UTF-8 at byte %zu: %s", pos + 1, why);
	return -EILSEQ;
}

int utf8_check(const char *s, size_t len, size_t *bad, struct errbuf *err)
{
	const unsigned char *p = (const unsigned char *)s;
	char why[128];
	size_t i = 0, n, k;

	while (i < len) {
		unsigned char b = p[i];
		/* the range the second byte must be in: narrower after the
		 * leads that could start an overlong form, a surrogate or a
		 * code point above U+10FFFF */
		unsigned char lo = 0x80, hi = 0xbf;

		if (b < 0x80) {
			i++;
			continue;
		}
		if (b < 0xc0) {
			snprintf(why, sizeof(why),
				 "0x%02x is a continuation byte without a "
				 "lead byte",
				 b);
			return utf8_fail(i, why, bad, err);
		}
		if (b < 0xc2) {
			snprintf(why, sizeof(why),
				 "0x%02x starts an overlong encoding", b);
			return utf8_fail(i, why, bad, err);
		}
		if (b >= 0xf5) {
			snprintf(why, sizeof(why),
				 "0x%02x never appears in UTF-8", b);
			return utf8_fail(i, why, bad, err);
		}
		if (b < 0xe0) {
			n = 1;
		} else if (b < 0xf0) {
			n = 2;
			lo = b == 0xe0 ? 0xa0 : lo;
			hi = b == 0xed ? 0x9f : hi;
		} else {
			n = 3;
			lo = b == 0xf0 ? 0x90 : lo;
			hi = b == 0xf4 ? 0x8f : hi;
		}
		for (k = 1; k <= n; k++) {
			unsigned char c;

			if (i + k >= len) {
				snprintf(why, sizeof(why),
					 "truncated sequence (0x%02x needs %zu "
					 "continuation byte%s, the text ends "
					 "first)",
					 b, n, n == 1 ? "" : "s");
				return utf8_fail(i, why, bad, err);
			}
			c = p[i + k];
			if (c < 0x80 || c > 0xbf) {
				snprintf(why, sizeof(why),
					 "truncated sequence (0x%02x needs %zu "
					 "continuation byte%s, byte %zu is "
					 "0x%02x)",
					 b, n, n == 1 ? "" : "s", i + k + 1, c);
				return utf8_fail(i, why, bad, err);
			}
			if (k > 1 || (c >= lo && c <= hi))
				continue;
			if (b == 0xed)
				return utf8_fail(i,
						 "a UTF-16 surrogate "
						 "(U+D800..U+DFFF)",
						 bad, err);
			if (b == 0xf4)
				return utf8_fail(i,
						 "a code point above "
						 "U+10FFFF",
						 bad, err);
			return utf8_fail(i, "an overlong encoding", bad, err);
		}
		i += n + 1;
	}
	return 0;
}

int utf8_check_text(const char *s, size_t len, struct errbuf *err)
{
	const unsigned char *p = (const unsigned char *)s;
	unsigned cp = 0;
	size_t i;
	int ret;

	ret = utf8_check(s, len, NULL, err);
	if (ret)
		return ret;
	for (i = 0; i < len; i++) {
		if (p[i] < 0x20 || p[i] == 0x7f)
			cp = p[i];
		else if (p[i] == 0xc2 && i + 1 < len && p[i + 1] < 0xa0)
			cp = p[i + 1]; /* C1: U+0080..U+009F */
		else
			continue;
		errbuf_set(err, "a control character (U+%04X) at byte %zu", cp,
			   i + 1);
		return -EINVAL;
	}
	return 0;
}
