/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fuzz_proxyproto.c - libFuzzer target for userspace/proxyproto.c.
 *
 * The input is a connection's first bytes. Asserts, on buffers of
 * exactly their length (ASan sees any read past them): the answer is a
 * length or one of the reasons; a length is at most PP_V1_MAX for v1
 * and PP_V2_MAX for v2 and no more than the input; every shorter prefix
 * of a header waits for more, and the header alone gives the same
 * answer (what follows it never matters); a header that names a client
 * names an IPv4 or IPv6 one, and pp_write's header for it (both
 * versions) reads back to the same addresses and ports. The seeds
 * (tests/fuzz/corpus/proxyproto) are v1 TCP4, TCP6 and UNKNOWN lines
 * and v2 TCP4 with TLVs, TCP6 and LOCAL headers.
 */
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxyproto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                               \
	do {                                                                   \
		if (!(x))                                                      \
			abort();                                               \
	} while (0)

/* A copy of data[0..n) in a buffer of exactly n bytes. */
static uint8_t *dup_exact(const uint8_t *data, size_t n)
{
	uint8_t *b = malloc(n ? n : 1);

	CHECK(b);
	if (n)
		memcpy(b, data, n);
	return b;
}

static int parse_exact(const uint8_t *data, size_t n, struct pp_info *pi)
{
	uint8_t *b = dup_exact(data, n);
	int r = pp_parse(b, n, pi);

	free(b);
	return r;
}

static bool same_addr(const struct sockaddr_storage *a,
		      const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a,
					 *y = (const void *)b;

		return x->sin_port == y->sin_port &&
		       memcmp(&x->sin_addr, &y->sin_addr, 4) == 0;
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;

	return x->sin6_port == y->sin6_port &&
	       memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_info pi, pk;
	uint8_t w[PP_WRITE_MAX];
	size_t k, n;
	unsigned v;
	int r, rk;

	r = parse_exact(data, size, &pi);
	CHECK(r >= PP_BAD_TLV);
	CHECK(pp_reason(r) != NULL);
	if (r == PP_NEED_MORE) {
		CHECK(size < PP_V2_MAX);
		return 0;
	}
	if (r < 0)
		return 0;
	CHECK((size_t)r <= size);
	CHECK(pi.version == 1 || pi.version == 2);
	CHECK(pi.version == 2 || r <= PP_V1_MAX);
	CHECK(r <= PP_V2_MAX);
	/* the header alone, and its prefixes */
	CHECK(parse_exact(data, (size_t)r, &pk) == r);
	CHECK(pk.local == pi.local && pk.unknown == pi.unknown);
	CHECK(!(pi.local && pi.unknown));
	for (k = 0; k < (size_t)r; k += 1 + k / 8) {
		rk = parse_exact(data, k, &pk);
		CHECK(rk == PP_NEED_MORE);
	}
	if (pi.local || pi.unknown)
		return 0;
	CHECK(pi.src.ss_family == AF_INET || pi.src.ss_family == AF_INET6);
	CHECK(pi.dst.ss_family == AF_INET || pi.dst.ss_family == AF_INET6);
	for (v = 1; v <= 2; v++) {
		n = pp_write(v, (const struct sockaddr *)&pi.src,
			     (const struct sockaddr *)&pi.dst, w);
		CHECK(n > 0 && n <= PP_WRITE_MAX);
		CHECK(parse_exact(w, n, &pk) == (int)n);
		CHECK(!pk.local && !pk.unknown);
		CHECK(same_addr(&pi.src, &pk.src));
		CHECK(same_addr(&pi.dst, &pk.dst));
	}
	return 0;
}
