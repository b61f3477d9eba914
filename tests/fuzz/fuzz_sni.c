/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fuzz_sni.c - libFuzzer target for userspace/sni.c.
 *
 * data[0] is the framing of the rest of the input (from data[2]):
 *   0x00..0x3f  the stream as it is;
 *   0x40..0x7f  a server_name's host name, put in a ClientHello whose
 *               every length is right, so that mutations reach the name's
 *               rules: the answer must be SNI_FOUND with that name (lower
 *               case, one trailing dot less), SNI_NONE or SNI_BAD;
 *   0x80..0xff  a ClientHello's body, which gets its handshake header, so
 *               that mutations reach the hello's fields rather than its
 *               record headers.
 * Both built framings are cut into handshake records of data[0] & 0x3f
 * (0x7f for a body) bytes, 0 meaning 2^14. data[1] picks a prefix to
 * parse as well. The seeds (tests/fuzz/corpus/sni) are real clients'
 * hellos in the raw and body framings (tests/tools/capture_clienthello.py)
 * and names.
 *
 * Asserts, on buffers of exactly their length (ASan sees any read past
 * them): the result is one of the five; name is "" unless SNI_FOUND, and
 * then a host name as sni.h promises; need is 0 unless SNI_NEED_MORE,
 * and then len < need <= SNI_PEEK_MAX; SNI_PEEK_MAX bytes are always an
 * answer; the prefix waits or answers as the whole does, its need no
 * greater than the whole's when both wait, and no greater than the
 * whole's length when the whole is a valid hello.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sni.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                               \
	do {                                                                   \
		if (!(x))                                                      \
			abort();                                               \
	} while (0)

/* A name SNI_FOUND may give: 1..253 bytes, labels of 1..63 lower-case
 * letters, digits, '-' and '_', the last neither all digits nor "0x" and
 * hex digits (an IPv4 address). */
static void name_ok(const char *n)
{
	size_t len = strlen(n), label = 0, i;
	const char *last;

	CHECK(len >= 1 && len <= SNI_NAME_MAX);
	for (i = 0; i < len; i++) {
		char c = n[i];

		if (c == '.') {
			CHECK(label > 0);
			label = 0;
			continue;
		}
		CHECK((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_');
		CHECK(++label <= 63);
	}
	CHECK(label > 0);
	last = n + len - label;
	if (label >= 2 && last[0] == '0' && last[1] == 'x') {
		for (i = 2; i < label; i++)
			if (!strchr("0123456789abcdef", last[i]))
				break;
	} else {
		for (i = 0; i < label; i++)
			if (last[i] < '0' || last[i] > '9')
				break;
	}
	CHECK(i < label); /* a byte that makes it no number */
}

static enum sni_result parse(const uint8_t *buf, size_t len, char *name,
			     size_t *need)
{
	enum sni_result r = sni_parse(buf, len, name, need);
	char other[SNI_NAME_MAX + 1];

	CHECK(r >= SNI_NEED_MORE && r <= SNI_BAD);
	if (r == SNI_FOUND)
		name_ok(name);
	else
		CHECK(name[0] == '\0');
	if (r == SNI_NEED_MORE)
		CHECK(*need > len && *need <= SNI_PEEK_MAX);
	else
		CHECK(*need == 0);
	CHECK(len < SNI_PEEK_MAX || r != SNI_NEED_MORE);
	CHECK(sni_parse(buf, len, other, NULL) == r);
	CHECK(strcmp(name, other) == 0);
	return r;
}

/* The body as a ClientHello in records of frag bytes; its length in *len. */
static uint8_t *frame(const uint8_t *body, size_t n, size_t frag, size_t *len)
{
	size_t hs = n + 4, nrec = (hs + frag - 1) / frag, off = 0, k, i = 0;
	uint8_t *out = malloc(hs + 5 * nrec), *h = malloc(hs);

	CHECK(out && h);
	h[0] = 1;
	h[1] = (uint8_t)(n >> 16);
	h[2] = (uint8_t)(n >> 8);
	h[3] = (uint8_t)n;
	memcpy(h + 4, body, n);
	while (off < hs) {
		k = hs - off < frag ? hs - off : frag;
		out[i++] = 22;
		out[i++] = 3;
		out[i++] = 1;
		out[i++] = (uint8_t)(k >> 8);
		out[i++] = (uint8_t)k;
		memcpy(out + i, h + off, k);
		i += k;
		off += k;
	}
	free(h);
	*len = i;
	return out;
}

/* A ClientHello body (TLS 1.3's legacy fields, one cipher suite) with
 * only a server_name extension holding name[0..n); its length in *len. */
static uint8_t *hello_with(const uint8_t *name, size_t n, size_t *len)
{
	static const uint8_t head[] = {3, 3};
	static const uint8_t mid[] = {0, 0, 2, 0x13, 0x01, 1, 0};
	size_t i = 0, ext = n + 9;
	uint8_t *b = malloc(sizeof(head) + 32 + sizeof(mid) + 2 + ext);

	CHECK(b);
	memcpy(b, head, sizeof(head));
	i += sizeof(head);
	memset(b + i, 0x5a, 32); /* random */
	i += 32;
	memcpy(b + i, mid, sizeof(mid)); /* session id, suites, compression */
	i += sizeof(mid);
	b[i++] = (uint8_t)(ext >> 8); /* extensions */
	b[i++] = (uint8_t)ext;
	b[i++] = 0; /* server_name */
	b[i++] = 0;
	b[i++] = (uint8_t)((n + 5) >> 8);
	b[i++] = (uint8_t)(n + 5);
	b[i++] = (uint8_t)((n + 3) >> 8); /* ServerNameList */
	b[i++] = (uint8_t)(n + 3);
	b[i++] = 0; /* host_name */
	b[i++] = (uint8_t)(n >> 8);
	b[i++] = (uint8_t)n;
	memcpy(b + i, name, n);
	*len = i + n;
	return b;
}

/* In name mode: what sni_parse may answer for name[0..n). */
static void name_mode(const uint8_t *name, size_t n, enum sni_result r,
		      const char *got)
{
	size_t i, m = n && name[n - 1] == '.' ? n - 1 : n;

	CHECK(r == SNI_FOUND || r == SNI_NONE || r == SNI_BAD);
	if (r != SNI_FOUND)
		return;
	CHECK(strlen(got) == m);
	for (i = 0; i < m; i++) {
		uint8_t c = name[i];

		CHECK(got[i] == ((c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[SNI_NAME_MAX + 1], pname[SNI_NAME_MAX + 1];
	size_t len, k, need, pneed;
	enum sni_result r, pr;
	uint8_t *buf, *pre;

	if (size < 2)
		return 0;
	if (data[0] & 0x80) {
		buf = frame(data + 2, size - 2,
			    (data[0] & 0x7f) ? (size_t)(data[0] & 0x7f) : 16384,
			    &len);
	} else if (data[0] & 0x40) {
		uint8_t *body = hello_with(data + 2, size - 2, &len);

		buf = frame(body, len,
			    (data[0] & 0x3f) ? (size_t)(data[0] & 0x3f) : 16384,
			    &len);
		free(body);
	} else {
		len = size - 2;
		buf = malloc(len ? len : 1);
		CHECK(buf);
		memcpy(buf, data + 2, len);
	}
	r = parse(buf, len, name, &need);
	if ((data[0] & 0xc0) == 0x40)
		name_mode(data + 2, size - 2, r, name);

	k = (size_t)data[1] * len / 255;
	pre = malloc(k ? k : 1);
	CHECK(pre);
	memcpy(pre, buf, k);
	pr = parse(pre, k, pname, &pneed);
	if (pr != SNI_NEED_MORE) {
		CHECK(pr == r && strcmp(pname, name) == 0);
	} else if (r == SNI_NEED_MORE) {
		CHECK(pneed <= need);
	} else if (r == SNI_FOUND || r == SNI_NONE) {
		CHECK(pneed <= len);
	}
	free(pre);
	free(buf);
	return 0;
}
