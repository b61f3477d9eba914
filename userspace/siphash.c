/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * siphash.c - SipHash-2-4 (Aumasson and Bernstein) under a per-process
 * key (siphash.h).
 */
#include <endian.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>

#include "siphash.h"

static uint8_t siph_k[16];
static pthread_once_t siph_once = PTHREAD_ONCE_INIT;

static void siph_init(void)
{
	if (RAND_bytes(siph_k, sizeof(siph_k)) == 1)
		return;
	if (getrandom(siph_k, sizeof(siph_k), 0) == (ssize_t)sizeof(siph_k))
		return;
	/* no entropy at all: the hash still spreads, it is only guessable */
	memcpy(siph_k, "edge-siphash-k!!", sizeof(siph_k));
}

static uint64_t siph_rotl(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

/* p[0..8) as a little-endian number: one load (the byte loop this was
 * compiled to eight loads and shifts per word). */
static uint64_t siph_le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

#define SIPH_ROUND                                                             \
	do {                                                                   \
		v0 += v1;                                                      \
		v1 = siph_rotl(v1, 13);                                        \
		v1 ^= v0;                                                      \
		v0 = siph_rotl(v0, 32);                                        \
		v2 += v3;                                                      \
		v3 = siph_rotl(v3, 16);                                        \
		v3 ^= v2;                                                      \
		v0 += v3;                                                      \
		v3 = siph_rotl(v3, 21);                                        \
		v3 ^= v0;                                                      \
		v2 += v1;                                                      \
		v1 = siph_rotl(v1, 17);                                        \
		v1 ^= v2;                                                      \
		v2 = siph_rotl(v2, 32);                                        \
	} while (0)

uint64_t siphash_key(const void *data, size_t len)
{
	const uint8_t *in = data;
	uint64_t k0, k1, v0, v1, v2, v3, b = (uint64_t)len << 56, m;
	size_t i, left = len & 7;

	pthread_once(&siph_once, siph_init);
	k0 = siph_le64(siph_k);
	k1 = siph_le64(siph_k + 8);
	v0 = 0x736f6d6570736575ull ^ k0;
	v1 = 0x646f72616e646f6dull ^ k1;
	v2 = 0x6c7967656e657261ull ^ k0;
	v3 = 0x7465646279746573ull ^ k1;

	for (i = 0; i + 8 <= len; i += 8) {
		m = siph_le64(in + i);
		v3 ^= m;
		SIPH_ROUND;
		SIPH_ROUND;
		v0 ^= m;
	}
	while (left--)
		b |= (uint64_t)in[i + left] << (8 * left);
	v3 ^= b;
	SIPH_ROUND;
	SIPH_ROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPH_ROUND;
	SIPH_ROUND;
	SIPH_ROUND;
	SIPH_ROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}
