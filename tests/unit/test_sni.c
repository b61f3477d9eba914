/* SPDX-License-Identifier: BSD-2-Clause */
/* test_sni.c - the ClientHello SNI reader: hellos captured from real
 * clients (sni_fixtures.h, made by tests/tools/capture_clienthello.py),
 * also split over two records at every point, and a table of hellos built
 * here, one change each from a valid one; each parsed whole and at every
 * prefix (which must wait, or give the whole's answer, never another). */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sni.h"
#include "sni_fixtures.h"
#include "unit.h"

#define S(lit) lit, sizeof(lit) - 1
#define BUF_MAX (1 << 17)
#define MIN_HELLO 50 /* record header, handshake header, smallest body */

static const char *rn(enum sni_result r)
{
	return sni_result_name(r);
}

/* ck_assert_msg for loops that run millions of times: Check records
 * every ck_assert it passes (a message to the parent, and under ASan a
 * chunk that LeakSanitizer walks at exit), EXPECT only the failure. */
#define EXPECT(cond, ...)                                                      \
	do {                                                                   \
		if (!(cond))                                                   \
			ck_abort_msg(__VA_ARGS__);                             \
	} while (0)

/* ---- checks shared by every case ----------------------------------------
 */

/*
 * Parse in[0..len) whole and every prefix of it, each copied to the end of
 * a buffer of exactly len bytes (so that ASan sees any read past it). A
 * prefix answers SNI_NEED_MORE, with name "" and len < need <=
 * SNI_PEEK_MAX, or the whole's answer. When the whole is a valid hello
 * (FOUND or NONE) ending at hello_end, every shorter prefix waits and its
 * need is at most hello_end, and exactly hello_end once the last record
 * (its payload at last_payload) has begun.
 */
static void check_prefixes(const char *what, const uint8_t *in, size_t len,
			   enum sni_result res, const char *want,
			   size_t hello_end, size_t last_payload)
{
	bool valid = res == SNI_FOUND || res == SNI_NONE;
	char name[SNI_NAME_MAX + 1];
	uint8_t *tail = malloc(len ? len : 1);
	size_t k, need = 12345;
	enum sni_result r;

	ck_assert_ptr_nonnull(tail);
	memcpy(tail, in, len);
	r = sni_parse(tail, len, name, &need);
	ck_assert_msg(r == res, "%s: %s, want %s", what, rn(r), rn(res));
	if (r == SNI_FOUND)
		ck_assert_msg(!strcmp(name, want),
			      "%s: name \"%s\" want \"%s\"", what, name, want);
	else
		ck_assert_msg(name[0] == '\0', "%s: name \"%s\"", what, name);
	if (r != SNI_NEED_MORE)
		ck_assert_uint_eq(need, 0);
	for (k = 0; k < len; k++) {
		const uint8_t *p = tail + len - k;

		memcpy(tail + len - k, in, k);
		need = 12345;
		r = sni_parse(p, k, name, &need);
		if (r == SNI_NEED_MORE) {
			EXPECT(name[0] == '\0', "%s: %zu: name", what, k);
			EXPECT(need > k && need <= SNI_PEEK_MAX,
			       "%s: prefix %zu: need %zu", what, k, need);
			EXPECT(k < SNI_PEEK_MAX, "%s: waits at %zu", what, k);
			if (valid)
				EXPECT(
				    need <= hello_end &&
					(k < last_payload || need == hello_end),
				    "%s: prefix %zu: need %zu, the hello ends "
				    "at %zu",
				    what, k, need, hello_end);
			continue;
		}
		EXPECT(r == res, "%s: prefix %zu: %s, want %s", what, k, rn(r),
		       rn(res));
		EXPECT(!valid || k >= hello_end,
		       "%s: prefix %zu: %s before the hello's end %zu", what, k,
		       rn(r), hello_end);
		EXPECT(need == 0, "%s: prefix %zu: need %zu", what, k, need);
		EXPECT(r != SNI_FOUND || !strcmp(name, want),
		       "%s: prefix %zu: name \"%s\"", what, k, name);
	}
	free(tail);
}

/* The raw offset of the payload of the last record of the hello in
 * in[0..len) (its records fill len exactly). */
static size_t last_payload_of(const uint8_t *in, size_t len)
{
	size_t pos = 0, last = 0;

	while (pos + 5 <= len) {
		last = pos + 5;
		pos += 5 + ((size_t)in[pos + 3] << 8 | in[pos + 4]);
	}
	ck_assert_uint_eq(pos, len);
	return last;
}

/* ---- hellos captured from real clients ---------------------------------- */

#define NFX (sizeof(sni_fixtures) / sizeof(sni_fixtures[0]))

START_TEST(test_fixture)
{
	const struct sni_fixture *f = &sni_fixtures[_i];
	char name[SNI_NAME_MAX + 1];
	size_t hello_end = f->res == SNI_BAD ? 0 : f->len;

	check_prefixes(f->what, f->hello, f->len, f->res, f->name, hello_end,
		       last_payload_of(f->hello, f->len));
	/* need is optional */
	ck_assert_int_eq(sni_parse(f->hello, f->len, name, NULL), f->res);
}
END_TEST

/* The handshake bytes of a fixture's records into hs; returns how many. */
static size_t fx_handshake(const struct sni_fixture *f, uint8_t *hs)
{
	size_t pos = 0, n = 0, k;

	while (pos < f->len) {
		k = (size_t)f->hello[pos + 3] << 8 | f->hello[pos + 4];
		memcpy(hs + n, f->hello + pos + 5, k);
		n += k;
		pos += 5 + k;
	}
	return n;
}

/* Records of at most frag bytes (cuts: the first record ends at cut, the
 * rest is one record) of hs[0..n) into out; returns the length. */
static size_t frame(const uint8_t *hs, size_t n, size_t frag, size_t cut,
		    uint8_t *out)
{
	size_t off = 0, len = 0, k;

	while (off < n) {
		k = cut && off == 0 ? cut : n - off;
		if (frag && k > frag)
			k = frag;
		out[len++] = 22;
		out[len++] = 3;
		out[len++] = 1;
		out[len++] = (uint8_t)(k >> 8);
		out[len++] = (uint8_t)k;
		memcpy(out + len, hs + off, k);
		len += k;
		off += k;
	}
	return len;
}

static uint8_t hs_buf[BUF_MAX], rec_buf[BUF_MAX];

/* Every real hello split over two records at every point, and in records
 * of one byte: the same answer. */
START_TEST(test_fixture_split)
{
	const struct sni_fixture *f = &sni_fixtures[_i];
	char name[SNI_NAME_MAX + 1], what[256];
	size_t n, len, cut;
	enum sni_result r;

	if (f->res == SNI_BAD)
		return;
	n = fx_handshake(f, hs_buf);
	for (cut = 1; cut < n; cut++) {
		len = frame(hs_buf, n, 0, cut, rec_buf);
		r = sni_parse(rec_buf, len, name, NULL);
		EXPECT(r == f->res, "%s cut at %zu: %s", f->id, cut, rn(r));
		EXPECT(r != SNI_FOUND || !strcmp(name, f->name),
		       "%s cut at %zu: name \"%s\"", f->id, cut, name);
	}
	len = frame(hs_buf, n, 1, 0, rec_buf);
	snprintf(what, sizeof(what), "%s in 1-byte records", f->id);
	check_prefixes(what, rec_buf, len, f->res, f->name, len, len - 1);
}
END_TEST

/* What follows the hello's last record (a ChangeCipherSpec, early data,
 * anything) is not looked at. */
START_TEST(test_fixture_after)
{
	static const uint8_t after[] = {20, 3, 3, 0, 1, 1, 0xff, 0, 'x'};
	const struct sni_fixture *f = &sni_fixtures[_i];
	char name[SNI_NAME_MAX + 1];
	enum sni_result r;

	memcpy(rec_buf, f->hello, f->len);
	memcpy(rec_buf + f->len, after, sizeof(after));
	r = sni_parse(rec_buf, f->len + sizeof(after), name, NULL);
	ck_assert_msg(r == f->res, "%s: %s", f->id, rn(r));
	if (r == SNI_FOUND)
		ck_assert_str_eq(name, f->name);
}
END_TEST

/* ---- hellos built here ---------------------------------------------------
 */

/* Changes to the default hello (a handshake record 0x0301 holding one
 * ClientHello 0x0303 with a 32-byte session id, two cipher suites, null
 * compression, a GREASE extension, server_name, supported_versions). A
 * _D change adds v to the length field that it names, and nothing to
 * what the field counts. */
enum mk {
	M_END = 0,
	M_REC_VER,   /* the first record's version */
	M_REC_D,     /* the first record's length */
	M_FRAG,	     /* records of at most v bytes */
	M_REC2_TYPE, /* the type of the records after the first */
	M_REC2_VER,  /* ... and their version */
	M_HS_TYPE,   /* handshake type */
	M_MSG_D,     /* the handshake's 24-bit length */
	M_CLI_VER,   /* legacy_version */
	M_SID,	     /* session id bytes */
	M_SID_D,
	M_CS, /* cipher suites bytes */
	M_CS_D,
	M_COMP, /* compression methods: v bytes of 1, or {1, 0} when v < 0 */
	M_COMP_D,
	M_NO_EXTS, /* no extensions block */
	M_BARE,	   /* no extensions but server_name */
	M_EXTS_D,
	M_EXT_TAIL, /* v bytes of 0xee at the end of the extensions block */
	M_SNI_D,    /* the server_name extension's length */
	M_SNI_NIL,  /* an empty server_name extension */
	M_LIST_D,   /* the ServerNameList's length */
	M_NTYPE,    /* name_type */
	M_NAME_D,   /* the HostName's length */
	M_TWO,	    /* a second name in the list */
	M_DUP,	    /* a second server_name extension (v: its name differs) */
	M_PAD,	    /* a padding extension of v bytes */
	M_RAW,	    /* padded to v bytes of record in all (one record) */
	M_TRAIL,    /* v bytes after the hello inside its last record */
	M_AFTER,    /* a ChangeCipherSpec record after the hello */
	M_LONG,	    /* the name: v bytes, labels of 63 'A' */
	M_DOT,	    /* ... and a trailing dot */
};

struct mut {
	enum mk k;
	long v;
};

struct bcase {
	const char *what;
	const char *name; /* the server_name; NULL: none */
	size_t nlen;	  /* 0: strlen(name) */
	struct mut m[4];
	enum sni_result res;
	const char *want; /* FOUND: the name expected; NULL: M_LONG's */
	long cut;	  /* < 0: parse all but the last -cut bytes */
};

#define A16 "aaaaaaaaaaaaaaaa"
#define A63 A16 A16 A16 "aaaaaaaaaaaaaaa"

#define F(w, n, ...)                                                           \
	{                                                                      \
		w, n, 0, {__VA_ARGS__}, SNI_FOUND, n, 0                        \
	}
#define FW(w, n, want, ...)                                                    \
	{                                                                      \
		w, n, 0, {__VA_ARGS__}, SNI_FOUND, want, 0                     \
	}
#define R(w, n, res, ...)                                                      \
	{                                                                      \
		w, n, 0, {__VA_ARGS__}, SNI_##res, NULL, 0                     \
	}
#define RN(w, lit, res)                                                        \
	{                                                                      \
		w, lit, sizeof(lit) - 1, {{M_END, 0}}, SNI_##res, NULL, 0      \
	}
#define RNM(w, lit, res, ...)                                                  \
	{                                                                      \
		w, lit, sizeof(lit) - 1, {__VA_ARGS__}, SNI_##res, NULL, 0     \
	}
/* cut where the server_name extension (the only one: M_BARE) has given
 * its first `at` bytes, the rest of its `len` being there or not */
#define CUT(w, res, at, len, ...)                                              \
	{                                                                      \
		w, E, 0, {M(BARE, 1), __VA_ARGS__}, SNI_##res, NULL,           \
		    -(long)(len) + (at)                                        \
	}
#define M(k, v)                                                                \
	{                                                                      \
		M_##k, v                                                       \
	}
#define E "example.com"

static const struct bcase bcases[] = {
    /* found */
    F("plain", E),
    FW("upper case lowered", "WWW.Example.COM", "www.example.com"),
    FW("trailing dot stripped", "www.example.com.", "www.example.com"),
    F("one label", "localhost"),
    F("underscore tolerated", "_a.b_c.example.com"),
    F("hyphens anywhere tolerated", "-a-.x--y.example.com"),
    F("a label of digits, not the last", "123.example.com"),
    F("digits and letters in the last label", "a.b1"),
    FW("every letter and digit",
       "abcdefghijklmnopqrstuvwxyz.0123456789.ABCDEFGHIJKLMNOPQRSTUVWXYZ.a",
       "abcdefghijklmnopqrstuvwxyz.0123456789.abcdefghijklmnopqrstuvwxyz.a"),
    F("0x and a letter that is no hex digit", "a.0xg"),
    F("0x and an underscore", "a.0x_"),
    F("a label of 63", A63 ".com"),
    R("253 bytes", NULL, FOUND, M(LONG, 253)),
    R("254 bytes with a trailing dot", NULL, FOUND, M(LONG, 253), M(DOT, 1)),
    F("record version 0x0300 (RFC 5246 E.1)", E, M(REC_VER, 0x0300)),
    F("record version 0x0302", E, M(REC_VER, 0x0302)),
    F("record version 0x0303", E, M(REC_VER, 0x0303)),
    F("record version 0x0304", E, M(REC_VER, 0x0304)),
    F("legacy_version 0x0301", E, M(CLI_VER, 0x0301)),
    F("legacy_version 0x0304", E, M(CLI_VER, 0x0304)),
    F("no session id", E, M(SID, 0)),
    F("null not the first compression method", E, M(COMP, -1)),
    F("only server_name", E, M(BARE, 1)),
    F("1-byte records", E, M(FRAG, 1)),
    F("2-byte records", E, M(FRAG, 2)),
    F("3-byte records", E, M(FRAG, 3)),
    F("7-byte records", E, M(FRAG, 7)),
    F("two records of 60 and the rest", E, M(FRAG, 60)),
    F("later records of another version", E, M(FRAG, 60), M(REC2_VER, 0x0303)),
    F("a ChangeCipherSpec after the hello", E, M(AFTER, 1)),
    F("exactly SNI_PEEK_MAX bytes", E, M(RAW, SNI_PEEK_MAX)),
    F("SNI_PEEK_MAX bytes in records of 4096", E, M(RAW, SNI_PEEK_MAX),
      M(FRAG, 4096)),
    /* valid without a name */
    R("no server_name", NULL, NONE),
    R("no extensions", NULL, NONE, M(NO_EXTS, 1)),
    R("an empty extensions block", NULL, NONE, M(BARE, 1)),
    R("IPv4", "192.0.2.1", NONE),
    R("IPv4 with a trailing dot", "192.0.2.1.", NONE),
    R("IPv4, two parts", "10.1", NONE),
    R("IPv4, one hex part", "0x7F000001", NONE),
    R("a numeric last label", "example.123", NONE),
    R("a numeric last label with a leading zero", "example.0123", NONE),
    R("IPv6", "2001:db8::1", NONE),
    R("IPv6 loopback", "::1", NONE),
    R("IPv6 in brackets", "[2001:DB8::1]", NONE),
    R("IPv6, IPv4-mapped", "::ffff:192.0.2.1", NONE),
    /* not TLS */
    R("record major version 2", E, NOT_TLS, M(REC_VER, 0x0203)),
    /* the record layer */
    R("record version 0x0305", E, BAD, M(REC_VER, 0x0305)),
    R("record version 0x03ff", E, BAD, M(REC_VER, 0x03ff)),
    R("a record longer than the hello", E, BAD, M(REC_D, 1)),
    R("a record shorter than the hello", E, BAD, M(REC_D, -1)),
    R("an alert inside the hello", E, BAD, M(FRAG, 60), M(REC2_TYPE, 21)),
    R("application data inside the hello", E, BAD, M(FRAG, 60),
      M(REC2_TYPE, 23)),
    R("ChangeCipherSpec inside the hello", E, BAD, M(FRAG, 60),
      M(REC2_TYPE, 20)),
    R("later record version 0x0305", E, BAD, M(FRAG, 60), M(REC2_VER, 0x0305)),
    R("later record major version 2", E, BAD, M(FRAG, 60), M(REC2_VER, 0x0203)),
    R("a byte after the hello in its record", E, BAD, M(TRAIL, 1)),
    R("SNI_PEEK_MAX + 1 bytes", E, BAD, M(RAW, SNI_PEEK_MAX + 1)),
    R("a hello of 20000 bytes", E, BAD, M(PAD, 20000)),
    R("past SNI_PEEK_MAX in 1-byte records", E, BAD, M(PAD, 2700), M(FRAG, 1)),
    /* the handshake message */
    R("ServerHello", E, BAD, M(HS_TYPE, 2)),
    R("handshake type 0", E, BAD, M(HS_TYPE, 0)),
    R("message length + 1", E, BAD, M(MSG_D, 1)),
    R("message length - 1", E, BAD, M(MSG_D, -1)),
    R("message shorter than any hello", NULL, BAD, M(NO_EXTS, 1), M(SID, 0),
      M(CS, 2), M(MSG_D, -1)),
    R("legacy_version 0x0300 (SSL 3.0)", E, BAD, M(CLI_VER, 0x0300)),
    R("legacy_version 0x0200", E, BAD, M(CLI_VER, 0x0200)),
    R("legacy_version 0x0305", E, BAD, M(CLI_VER, 0x0305)),
    R("legacy_version 0x0403", E, BAD, M(CLI_VER, 0x0403)),
    R("session id of 33", E, BAD, M(SID, 33)),
    R("session id length + 1", E, BAD, M(SID_D, 1)),
    R("session id length - 1", E, BAD, M(SID_D, -1)),
    R("no cipher suites", E, BAD, M(CS, 0)),
    R("odd cipher suites", E, BAD, M(CS, 3)),
    R("cipher suites length + 1", E, BAD, M(CS_D, 1)),
    R("cipher suites length - 2", E, BAD, M(CS_D, -2)),
    R("no compression methods", E, BAD, M(COMP, 0)),
    R("no null compression", E, BAD, M(COMP, 1)),
    R("compression length + 1", E, BAD, M(COMP_D, 1)),
    R("a byte where extensions would be", NULL, BAD, M(NO_EXTS, 1), M(MSG_D, 1),
      M(TRAIL, 1)),
    R("extensions length + 1", E, BAD, M(EXTS_D, 1)),
    R("extensions length - 1", E, BAD, M(EXTS_D, -1)),
    R("extensions length - 4", E, BAD, M(EXTS_D, -4)),
    R("extensions length - 4, no server_name", NULL, BAD, M(EXTS_D, -4)),
    R("1 byte of an extension's header at the end", E, BAD, M(EXT_TAIL, 1)),
    R("3 bytes of an extension's header at the end", E, BAD, M(EXT_TAIL, 3)),
    R("an extension longer than the block", E, BAD, M(EXT_TAIL, 4)),
    /* server_name */
    R("server_name length + 1", E, BAD, M(SNI_D, 1)),
    R("server_name length - 1", E, BAD, M(SNI_D, -1)),
    R("server_name length past the block", E, BAD, M(SNI_D, 100)),
    R("server_name empty", NULL, BAD, M(SNI_NIL, 1)),
    R("server_name of 1 byte", E, BAD, M(SNI_D, -(long)sizeof(E) - 3)),
    R("list length + 1", E, BAD, M(LIST_D, 1)),
    R("list length - 1", E, BAD, M(LIST_D, -1)),
    R("list length 0", E, BAD, M(LIST_D, -(long)sizeof(E) - 2)),
    R("a list of 2 bytes, no room for a name", E, BAD,
      M(SNI_D, -(long)sizeof(E)), M(LIST_D, -(long)sizeof(E))),
    R("name type 1", E, BAD, M(NTYPE, 1)),
    R("name type 255", E, BAD, M(NTYPE, 255)),
    R("two names in the list", E, BAD, M(TWO, 1)),
    R("name length + 1", E, BAD, M(NAME_D, 1)),
    R("name length - 1", E, BAD, M(NAME_D, -1)),
    R("list and name lengths - 1", E, BAD, M(LIST_D, -1), M(NAME_D, -1)),
    RNM("a name shorter than its list, the rest an extension",
	"a.example\xfe\xfe\x00\x00", BAD, M(NAME_D, -4)),
    /* bad as soon as the bytes show it: no field read past its container */
    CUT("1 byte of server_name, and no more bytes", BAD, 1,
	2 + 1 + 2 + sizeof(E) - 1, M(SNI_D, -(long)sizeof(E) - 3)),
    CUT("a list of 2, and no more bytes", BAD, 4, 2 + 1 + 2 + sizeof(E) - 1,
	M(SNI_D, -(long)sizeof(E)), M(LIST_D, -(long)sizeof(E))),
    R("empty name", "", BAD),
    R("254 bytes without a dot", NULL, BAD, M(LONG, 254)),
    R("255 bytes with a trailing dot", NULL, BAD, M(LONG, 254), M(DOT, 1)),
    R("a label of 64", A63 "a.com", BAD),
    RN("NUL inside", "exa\0mple.com", BAD),
    RN("NUL at the end", "example.com\0", BAD),
    RN("NUL after an IPv6 address", "::1\0", BAD),
    R("space", "exa mple.com", BAD),
    R("wildcard", "*.example.com", BAD),
    R("percent", "ex%41mple.com", BAD),
    R("slash", "example.com/a", BAD),
    R("port", "example.com:443", BAD),
    R("UTF-8", "\xc3\xa9t\xc3\xa9.example.com", BAD),
    R("DEL", "exa\x7fmple.com", BAD),
    R("empty label", "a..example.com", BAD),
    R("leading dot", ".example.com", BAD),
    R("only a dot", ".", BAD),
    R("two trailing dots", "example.com..", BAD),
    R("an IPv6 address with a zone", "fe80::1%eth0", BAD),
    R("an IPv6 address, bracket unclosed", "[::1", BAD),
    R("not an IPv6 address", "a:b", BAD),
    R("a colon", ":", BAD),
    R("IPv6, too many groups", "1:2:3:4:5:6:7:8:9", BAD),
    R("server_name twice", E, BAD, M(DUP, 0)),
    R("server_name twice, two names", E, BAD, M(DUP, 1)),
    R("server_name twice, the second an address", "192.0.2.1", BAD, M(DUP, 0)),
};

static bool mut(const struct bcase *c, enum mk k, long *v)
{
	unsigned i;

	for (i = 0; i < sizeof(c->m) / sizeof(c->m[0]); i++)
		if (c->m[i].k == k) {
			if (v)
				*v = c->m[i].v;
			return true;
		}
	return false;
}

static long mut_or(const struct bcase *c, enum mk k, long def)
{
	long v;

	return mut(c, k, &v) ? v : def;
}

struct w {
	uint8_t *b;
	size_t n;
};

static void w_put(struct w *w, const void *p, size_t n)
{
	EXPECT(w->n + n <= BUF_MAX, "builder: past %d bytes", BUF_MAX);
	memcpy(w->b + w->n, p, n);
	w->n += n;
}

static void w_int(struct w *w, unsigned long v, unsigned width)
{
	while (width--) {
		uint8_t b = (uint8_t)(v >> (8 * width));

		w_put(w, &b, 1);
	}
}

static void w_fill(struct w *w, size_t n, uint8_t b)
{
	EXPECT(w->n + n <= BUF_MAX, "builder: past %d bytes", BUF_MAX);
	memset(w->b + w->n, b, n);
	w->n += n;
}

/* A length field of width bytes, filled by w_close */
static size_t w_open(struct w *w, unsigned width)
{
	w_int(w, 0, width);
	return w->n;
}

static void w_close(struct w *w, size_t at, unsigned width, long delta)
{
	unsigned long v = (unsigned long)((long)(w->n - at) + delta);
	unsigned i;

	for (i = 0; i < width; i++)
		w->b[at - width + i] = (uint8_t)(v >> (8 * (width - 1 - i)));
}

/* The name of M_LONG: n bytes of labels of 63 'A', the last shorter. */
static void long_name(char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		s[i] = i % 64 == 63 ? '.' : 'A';
	s[n] = '\0';
}

static void server_name(struct w *w, const struct bcase *c, const char *name,
			size_t nlen)
{
	size_t ext, list, hn;

	w_int(w, 0, 2);
	if (mut(c, M_SNI_NIL, NULL)) {
		w_int(w, 0, 2);
		return;
	}
	ext = w_open(w, 2);
	list = w_open(w, 2);
	w_int(w, (unsigned long)mut_or(c, M_NTYPE, 0), 1);
	hn = w_open(w, 2);
	w_put(w, name, nlen);
	w_close(w, hn, 2, mut_or(c, M_NAME_D, 0));
	if (mut(c, M_TWO, NULL)) {
		w_int(w, 0, 1);
		hn = w_open(w, 2);
		w_put(w, S("second.example.com"));
		w_close(w, hn, 2, 0);
	}
	w_close(w, list, 2, mut_or(c, M_LIST_D, 0));
	w_close(w, ext, 2, mut_or(c, M_SNI_D, 0));
}

/* The handshake bytes of case c, with pad bytes of padding (< 0: none). */
static size_t build_hs(const struct bcase *c, const char *name, size_t nlen,
		       long pad, uint8_t *out)
{
	static const uint8_t suites[] = {0x13, 0x01, 0xc0, 0x2f, 0x00, 0x9c};
	static const uint8_t versions[] = {0x00, 0x2b, 0x00, 0x03,
					   0x02, 0x03, 0x04};
	struct w w = {out, 0};
	size_t msg, at, n;
	long v;

	w_int(&w, (unsigned long)mut_or(c, M_HS_TYPE, 1), 1);
	msg = w_open(&w, 3);
	w_int(&w, (unsigned long)mut_or(c, M_CLI_VER, 0x0303), 2);
	w_fill(&w, 32, 0x5a); /* random */
	at = w_open(&w, 1);
	w_fill(&w, (size_t)mut_or(c, M_SID, 32), 0x33);
	w_close(&w, at, 1, mut_or(c, M_SID_D, 0));
	at = w_open(&w, 2);
	n = (size_t)mut_or(c, M_CS, 4);
	ck_assert_uint_le(n, sizeof(suites));
	w_put(&w, suites, n);
	w_close(&w, at, 2, mut_or(c, M_CS_D, 0));
	at = w_open(&w, 1);
	v = mut_or(c, M_COMP, 0);
	if (v < 0)
		w_put(&w, "\x01\x00", 2);
	else if (mut(c, M_COMP, NULL))
		w_fill(&w, (size_t)v, 1);
	else
		w_int(&w, 0, 1);
	w_close(&w, at, 1, mut_or(c, M_COMP_D, 0));
	if (!mut(c, M_NO_EXTS, NULL)) {
		bool bare = mut(c, M_BARE, NULL);

		at = w_open(&w, 2);
		if (!bare)
			w_put(&w, "\x0a\x0a\x00\x00", 4); /* GREASE */
		if (name || mut(c, M_SNI_NIL, NULL))
			server_name(&w, c, name, nlen);
		if (name && mut(c, M_DUP, &v))
			server_name(&w, c, v ? "other.example.com" : name,
				    v ? strlen("other.example.com") : nlen);
		if (!bare)
			w_put(&w, versions, sizeof(versions));
		if (pad >= 0) {
			w_int(&w, 21, 2);
			w_int(&w, (unsigned long)pad, 2);
			w_fill(&w, (size_t)pad, 0);
		}
		w_fill(&w, (size_t)mut_or(c, M_EXT_TAIL, 0), 0xee);
		w_close(&w, at, 2, mut_or(c, M_EXTS_D, 0));
	}
	w_close(&w, msg, 3, mut_or(c, M_MSG_D, 0));
	w_fill(&w, (size_t)mut_or(c, M_TRAIL, 0), 0xee);
	return w.n;
}

/* Case c as records into out: its length; *hello_end and *last_payload
 * where the hello's records end and the last one's payload starts. */
static size_t build(const struct bcase *c, uint8_t *out, char *name,
		    size_t *hello_end, size_t *last_payload)
{
	size_t nlen = c->nlen, n, off = 0, k, frag;
	struct w w = {out, 0};
	long pad = mut_or(c, M_PAD, -1), v;
	unsigned ver = (unsigned)mut_or(c, M_REC_VER, 0x0301);
	bool first = true;

	if (mut(c, M_LONG, &v)) {
		long_name(name, (size_t)v);
		if (mut(c, M_DOT, NULL))
			strcat(name, ".");
	} else if (c->name) {
		memcpy(name, c->name, nlen ? nlen : strlen(c->name) + 1);
	}
	if (c->name || mut(c, M_LONG, NULL))
		nlen = nlen ? nlen : strlen(name);
	frag = (size_t)mut_or(c, M_FRAG, 16384);
	if (mut(c, M_RAW, &v)) { /* the most padding that fits in v */
		n = build_hs(c, c->name || nlen ? name : NULL, nlen, 0, hs_buf);
		for (pad = v - 5 - (long)n; pad > 0; pad--) {
			k = n + (size_t)pad;
			if (k + 5 * ((k + frag - 1) / frag) <= (size_t)v)
				break;
		}
	}
	n = build_hs(c, c->name || nlen ? name : NULL, nlen, pad, hs_buf);
	while (off < n) {
		k = n - off < frag ? n - off : frag;
		w_int(&w,
		      first ? 22 : (unsigned long)mut_or(c, M_REC2_TYPE, 22),
		      1);
		w_int(&w,
		      first ? ver : (unsigned long)mut_or(c, M_REC2_VER, ver),
		      2);
		w_int(&w,
		      (unsigned long)((long)k +
				      (first ? mut_or(c, M_REC_D, 0) : 0)),
		      2);
		*last_payload = w.n;
		w_put(&w, hs_buf + off, k);
		off += k;
		first = false;
	}
	*hello_end = w.n;
	if (mut(c, M_AFTER, NULL))
		w_put(&w, "\x14\x03\x03\x00\x01\x01", 6);
	return w.n;
}

START_TEST(test_built)
{
	const struct bcase *c = &bcases[_i];
	char name[SNI_NAME_MAX + 8], want[SNI_NAME_MAX + 8];
	size_t len, end = 0, last = 0;
	long v;

	len = build(c, rec_buf, name, &end, &last);
	if (c->cut < 0) {
		ck_assert_uint_gt(len, (size_t)-c->cut);
		len -= (size_t)-c->cut;
	}
	if (c->res == SNI_FOUND && !c->want) { /* M_LONG's name */
		ck_assert(mut(c, M_LONG, &v));
		long_name(want, (size_t)v);
		for (v = 0; want[v]; v++)
			want[v] = want[v] == 'A' ? 'a' : want[v];
	}
	check_prefixes(c->what, rec_buf, len, c->res, c->want ? c->want : want,
		       end, last);
	if (mut(c, M_RAW, &v) && !c->cut) /* the size meant */
		ck_assert_uint_eq(len, (size_t)v);
}
END_TEST

/* ---- other first bytes ---------------------------------------------------
 */

struct raw_case {
	const char *what;
	const char *in;
	size_t len;
	enum sni_result res;
	size_t need; /* on SNI_NEED_MORE */
};

#define RAW(w, lit, res, need)                                                 \
	{                                                                      \
		w, lit, sizeof(lit) - 1, SNI_##res, need                       \
	}

static const struct raw_case raws[] = {
    RAW("nothing yet", "", NEED_MORE, 1),
    RAW("a handshake record's first byte", "\x16", NEED_MORE, MIN_HELLO),
    RAW("a record header's start", "\x16\x03\x01\x00", NEED_MORE, MIN_HELLO),
    RAW("a record header", "\x16\x03\x01\x01\x00", NEED_MORE, 5 + 256),
    RAW("a 1-byte record", "\x16\x03\x01\x00\x01\x01", NEED_MORE,
	MIN_HELLO + 5),
    RAW("a handshake header", "\x16\x03\x01\x01\x00\x01\x00\x00\xfc", NEED_MORE,
	5 + 256),
    RAW("a handshake header in 1-byte records",
	"\x16\x03\x01\x00\x01\x01\x16\x03\x01\x00\x01\x00"
	"\x16\x03\x01\x00\x01\x00\x16\x03\x01\x00\x01\x29",
	NEED_MORE, 4 * 6 + 5 + 41),
    RAW("HTTP", "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", NOT_TLS, 0),
    RAW("HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", NOT_TLS, 0),
    RAW("SSH", "SSH-2.0-OpenSSH_9.2\r\n", NOT_TLS, 0),
    RAW("a NUL", "\0", NOT_TLS, 0),
    RAW("an alert record", "\x15\x03\x01\x00\x02\x02\x28", NOT_TLS, 0),
    RAW("application data", "\x17\x03\x03\x00\x01\x00", NOT_TLS, 0),
    RAW("handshake type, major version 2", "\x16\x02", NOT_TLS, 0),
    RAW("handshake type, major version 0", "\x16\x00\x01\x00\x05", NOT_TLS, 0),
    RAW("a high byte", "\x80", NEED_MORE, 4),
    RAW("a high byte, no SSLv2 hello", "\x80\x00\x01\x03", NOT_TLS, 0),
    RAW("a high byte, SSLv2 server hello", "\x80\x2e\x04\x00", NOT_TLS, 0),
    RAW("a high byte, SSLv2 hello of version 2.x", "\x80\x2e\x01\x02", NOT_TLS,
	0),
    RAW("0xff", "\xff\xff\xff\xff\xff", NOT_TLS, 0),
    /* SSL 2.0 CLIENT-HELLOs: 7 cipher specs and a 16-byte challenge */
    RAW("SSLv2-compatible hello of TLS 1.0",
	"\x80\x2e\x01\x03\x01\x00\x15\x00\x00\x00\x10"
	"\x00\x00\x39\x00\x00\x38\x00\x00\x35\x00\x00\x16\x00\x00\x13"
	"\x00\x00\x0a\x07\x00\xc0" /* SSL2_DES_192_EDE3_CBC_WITH_MD5 */
	"0123456789abcdef",
	BAD, 0),
    RAW("SSL 2.0 hello",
	"\x80\x1f\x01\x00\x02\x00\x06\x00\x00\x00\x10"
	"\x07\x00\xc0\x05\x00\x80"
	"0123456789abcdef",
	BAD, 0),
    RAW("an empty record", "\x16\x03\x01\x00\x00", BAD, 0),
    RAW("a record of 2^14 + 1", "\x16\x03\x01\x40\x01", BAD, 0),
    RAW("a record of 2^14 (past SNI_PEEK_MAX)", "\x16\x03\x01\x40\x00", BAD, 0),
    RAW("a record of SNI_PEEK_MAX - 5", "\x16\x03\x01\x3f\xfb", NEED_MORE,
	SNI_PEEK_MAX),
    RAW("a hello longer than SNI_PEEK_MAX allows",
	"\x16\x03\x01\x3f\xfb\x01\x00\x3f\xf8", BAD, 0),
    RAW("a hello of SNI_PEEK_MAX - 5", "\x16\x03\x01\x3f\xfb\x01\x00\x3f\xf7",
	NEED_MORE, SNI_PEEK_MAX),
    RAW("a hello whose records cannot end by SNI_PEEK_MAX",
	"\x16\x03\x01\x3f\xfa\x01\x00\x3f\xf7", BAD, 0),
    RAW("a hello of 2^24 - 1", "\x16\x03\x01\x00\x10\x01\xff\xff\xff", BAD, 0),
    RAW("a ServerHello", "\x16\x03\x03\x00\x10\x02\x00\x00\x0c", BAD, 0),
    RAW("a ServerHello's first byte", "\x16\x03\x03\x00\x10\x02", BAD, 0),
    RAW("a hello of 40", "\x16\x03\x01\x00\x2c\x01\x00\x00\x28", BAD, 0),
};

START_TEST(test_raw)
{
	const struct raw_case *c = &raws[_i];
	char name[SNI_NAME_MAX + 1];
	size_t need = 12345;
	enum sni_result r;

	check_prefixes(c->what, (const uint8_t *)c->in, c->len, c->res, NULL, 0,
		       0);
	r = sni_parse((const uint8_t *)c->in, c->len, name, &need);
	ck_assert_int_eq(r, c->res);
	ck_assert_msg(need == c->need, "%s: need %zu want %zu", c->what, need,
		      c->need);
}
END_TEST

START_TEST(test_names)
{
	ck_assert_str_eq(sni_result_name(SNI_NEED_MORE), "need_more");
	ck_assert_str_eq(sni_result_name(SNI_FOUND), "found");
	ck_assert_str_eq(sni_result_name(SNI_NONE), "none");
	ck_assert_str_eq(sni_result_name(SNI_NOT_TLS), "not_tls");
	ck_assert_str_eq(sni_result_name(SNI_BAD), "bad");
	ck_assert_str_eq(sni_result_name((enum sni_result)5), "?");
	ck_assert_str_eq(sni_result_name((enum sni_result) - 1), "?");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sni");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_fixture, 0, NFX);
	tcase_add_loop_test(tc, test_fixture_split, 0, NFX);
	tcase_add_loop_test(tc, test_fixture_after, 0, NFX);
	tcase_add_loop_test(tc, test_built, 0,
			    sizeof(bcases) / sizeof(bcases[0]));
	tcase_add_loop_test(tc, test_raw, 0, sizeof(raws) / sizeof(raws[0]));
	tcase_add_test(tc, test_names);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
