/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * b64url.h - base64url without padding (RFC 4648 section 5), as JWTs and
 * edge's own tokens write it.
 */
#ifndef EDGE_B64URL_H
#define EDGE_B64URL_H

#include <stddef.h>
#include <stdint.h>

/* Characters b64url_encode writes for n bytes, without the NUL. */
#define B64URL_LEN(n) (((n)*4 + 2) / 3)

/* Encode n bytes of in: B64URL_LEN(n) characters and a NUL into out. */
void b64url_encode(const uint8_t *in, size_t n, char *out);

/* Decode in (n characters of the base64url alphabet, no padding, no
 * whitespace) into out (room for n * 3 / 4 bytes). Returns the bytes
 * written, or -1 for a character outside the alphabet, a length no
 * encoding has (n % 4 == 1) or stray low bits in the last character
 * (each byte string has one encoding). */
long b64url_decode(const char *in, size_t n, uint8_t *out);

#endif /* EDGE_B64URL_H */
