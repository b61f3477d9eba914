/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * b64url.c - base64url without padding.
 */
#include "b64url.h"

static const char b64_alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmn"
				"opqrstuvwxyz0123456789-_";

void b64url_encode(const uint8_t *in, size_t n, char *out)
{
	const char *a = b64_alpha;
	size_t i, o = 0;

	for (i = 0; i + 2 < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 |
			     in[i + 2];

		out[o++] = a[v >> 18 & 63];
		out[o++] = a[v >> 12 & 63];
		out[o++] = a[v >> 6 & 63];
		out[o++] = a[v & 63];
	}
	if (n - i == 1) {
		out[o++] = a[in[i] >> 2];
		out[o++] = a[(in[i] & 3) << 4];
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)in[i] << 8 | in[i + 1];

		out[o++] = a[v >> 10 & 63];
		out[o++] = a[v >> 4 & 63];
		out[o++] = a[(v & 15) << 2];
	}
	out[o] = '\0';
}

static int b64_val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '-')
		return 62;
	if (c == '_')
		return 63;
	return -1;
}

long b64url_decode(const char *in, size_t n, uint8_t *out)
{
	uint32_t acc = 0;
	unsigned bits = 0;
	size_t i, o = 0;

	if (n % 4 == 1)
		return -1;
	for (i = 0; i < n; i++) {
		int v = b64_val(in[i]);

		if (v < 0)
			return -1;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (uint8_t)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	if (acc != 0) /* the last character's unused bits */
		return -1;
	return (long)o;
}
