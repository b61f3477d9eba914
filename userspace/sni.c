/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sni.c - the server_name of a TLS ClientHello (RFC 8446 section 4.1.2,
 * RFC 5246 section 7.4.1.2, RFC 6066 section 3). Pure: no I/O, no
 * allocation. The rules, and why, are in docs/tls.md.
 *
 * The handshake message is read through a cursor that walks the record
 * layer as it goes (struct sni_rd), so a ClientHello split over several
 * records is read in place, without a copy. Every check uses only bytes
 * already read and lengths already declared, never len, so a prefix is
 * answered either as the whole would be or SNI_NEED_MORE: running out of
 * bytes is the only way to SNI_NEED_MORE, and a length that points past
 * its container is SNI_BAD wherever the bytes end.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <string.h>

#include "sni.h"

#define SNI_REC_HDR 5		/* type, version, length */
#define SNI_REC_MAX 16384	/* a record's plaintext: 2^14 */
#define SNI_HS_HDR 4		/* msg_type, 24-bit length */
#define SNI_CT_HANDSHAKE 22	/* ContentType handshake */
#define SNI_HT_CLIENT_HELLO 1	/* HandshakeType client_hello */
#define SNI_EXT_SERVER_NAME 0	/* ExtensionType server_name */
#define SNI_NT_HOST_NAME 0	/* NameType host_name */
#define SNI_SID_MAX 32		/* legacy_session_id<0..32> */
#define SNI_RANDOM 32		/* Random */
#define SNI_LABEL_MAX 63	/* RFC 1035 section 2.3.4 */
#define SNI_SSL2_CLIENT_HELLO 1 /* SSL 2.0 msg_type CLIENT-HELLO */
#define SNI_SSL2_MIN 9		/* its fixed part: type, version, lengths */
#define SNI_SSL2_PREFIX 4	/* bytes that tell an SSLv2 hello */
/* the smallest ClientHello body: version, random, an empty session id,
 * one cipher suite, one compression method, no extensions */
#define SNI_BODY_MIN (2 + SNI_RANDOM + 1 + 2 + 2 + 1 + 1)

/* A record longer than 2^14 (RFC 8446 section 5.1) cannot end within
 * SNI_PEEK_MAX, so the bound on a record's end refuses it as well. */
_Static_assert(SNI_PEEK_MAX <= SNI_REC_HDR + SNI_REC_MAX,
	       "rd_record relies on SNI_PEEK_MAX to refuse long records");

static const char *const sni_names[] = {
    [SNI_NEED_MORE] = "need_more", [SNI_FOUND] = "found", [SNI_NONE] = "none",
    [SNI_NOT_TLS] = "not_tls",	   [SNI_BAD] = "bad",
};

const char *sni_result_name(enum sni_result r)
{
	if ((unsigned)r >= sizeof(sni_names) / sizeof(sni_names[0]))
		return "?";
	return sni_names[r];
}

/*
 * A cursor over the handshake stream that the records carry. pos is the
 * raw offset of the next byte, inside the current record's payload
 * (pos < rec_end) or at its end, where the next record's header starts.
 * off counts the handshake bytes read; total is the ClientHello's length
 * (header included) once its header is read, 0 until then.
 */
struct sni_rd {
	const uint8_t *buf;
	size_t len;
	size_t pos;
	size_t rec_end; /* raw end of the current record; 0 before the first */
	size_t off;
	size_t total;
	size_t need;	     /* on SNI_NEED_MORE */
	enum sni_result res; /* SNI_NEED_MORE or SNI_BAD once a read fails */
};

/*
 * The least total length of the stream at which a valid ClientHello
 * that begins with what was read could end. The handshake bytes still
 * wanted (to total, or to the smallest ClientHello while its length is
 * unknown): when they fit in the current record, the hello ends with that
 * record (its last record holds nothing else); when not, the rest needs
 * a record header more at least. Never shrinks as bytes are read.
 */
static size_t rd_least_end(const struct sni_rd *r)
{
	size_t want =
	    (r->total ? r->total : SNI_HS_HDR + SNI_BODY_MIN) - r->off;
	size_t room = r->rec_end - r->pos;

	if (r->rec_end == 0)
		return SNI_REC_HDR + want;
	if (want <= room)
		return r->rec_end;
	return r->rec_end + SNI_REC_HDR + (want - room);
}

/* Out of bytes: SNI_NEED_MORE with need, or SNI_BAD when no valid
 * ClientHello could end within SNI_PEEK_MAX. Returns false. */
static bool rd_more(struct sni_rd *r)
{
	r->need = rd_least_end(r);
	r->res = r->need > SNI_PEEK_MAX ? SNI_BAD : SNI_NEED_MORE;
	return false;
}

static bool rd_bad(struct sni_rd *r)
{
	r->res = SNI_BAD;
	return false;
}

/*
 * The record header at pos, judged byte by byte as it arrives: a
 * handshake record of TLS's major version 3, minor 0..4 (RFC 5246
 * appendix E.1 lets a client send its lowest version, {3,0}, here; RFC
 * 8446 section 5.1 has servers ignore it), not empty (RFC 8446 section 5.1
 * forbids empty handshake fragments), ending within SNI_PEEK_MAX (and so
 * at most 2^14 bytes long). sni_run has told a first record that is not
 * a handshake record of major version 3 from TLS already.
 */
static bool rd_record(struct sni_rd *r)
{
	const uint8_t *h = r->buf + r->pos;
	size_t have = r->len - r->pos, n;

	if ((have >= 1 && h[0] != SNI_CT_HANDSHAKE) ||
	    (have >= 2 && h[1] != 3) || (have >= 3 && h[2] > 4))
		return rd_bad(r);
	if (have < SNI_REC_HDR)
		return rd_more(r);
	n = (size_t)h[3] << 8 | h[4];
	if (n == 0 || r->pos + SNI_REC_HDR + n > SNI_PEEK_MAX)
		return rd_bad(r);
	r->pos += SNI_REC_HDR;
	r->rec_end = r->pos + n;
	return true;
}

/* n handshake bytes into out (NULL: skipped), across records. Past the
 * ClientHello's declared end: SNI_BAD. */
static bool rd_take(struct sni_rd *r, uint8_t *out, size_t n)
{
	size_t k;

	if (r->total && n > r->total - r->off)
		return rd_bad(r);
	while (n > 0) {
		if (r->pos == r->rec_end && !rd_record(r))
			return false;
		if (r->pos == r->len)
			return rd_more(r);
		k = r->rec_end - r->pos;
		if (k > r->len - r->pos)
			k = r->len - r->pos;
		if (k > n)
			k = n;
		if (out) {
			memcpy(out, r->buf + r->pos, k);
			out += k;
		}
		r->pos += k;
		r->off += k;
		n -= k;
	}
	return true;
}

static bool rd_u8(struct sni_rd *r, unsigned *v)
{
	uint8_t b[1];

	if (!rd_take(r, b, 1))
		return false;
	*v = b[0];
	return true;
}

static bool rd_u16(struct sni_rd *r, unsigned *v)
{
	uint8_t b[2];

	if (!rd_take(r, b, 2))
		return false;
	*v = (unsigned)b[0] << 8 | b[1];
	return true;
}

/* What the ClientHello named: nothing (no server_name), a host name, an IP
 * address, or something invalid. */
enum sni_host { SNI_HOST_NONE, SNI_HOST_NAME, SNI_HOST_ADDR, SNI_HOST_BAD };

static bool sni_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static bool sni_hex(unsigned char c)
{
	return sni_digit(c) || (c >= 'a' && c <= 'f');
}

/* A last label that makes the name an IPv4 address as inet_aton and the
 * WHATWG URL parser read one: all digits, or "0x" and hex digits (lower
 * case by now). No top-level domain looks like that (RFC 3696 section 2). */
static bool sni_numeric(const char *l, size_t n)
{
	size_t i = 0;

	if (n >= 2 && l[0] == '0' && l[1] == 'x') {
		for (i = 2; i < n; i++)
			if (!sni_hex((unsigned char)l[i]))
				return false;
		return true;
	}
	for (; i < n; i++)
		if (!sni_digit((unsigned char)l[i]))
			return false;
	return true;
}

/* An IPv6 literal, bare or in brackets (h is NUL-terminated). */
static bool sni_ipv6(char *h, size_t n)
{
	struct in6_addr a;
	bool ok;

	if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
		h[n - 1] = '\0';
		ok = inet_pton(AF_INET6, h + 1, &a) == 1;
		h[n - 1] = ']';
		return ok;
	}
	return inet_pton(AF_INET6, h, &a) == 1;
}

/*
 * Check and lower-case the host name h[0..n) (1..SNI_NAME_MAX bytes,
 * NUL-terminated, its trailing dot gone): labels of 1..63 letters,
 * digits, '-' and '_'. A literal IP address is not a host name (RFC 6066
 * section 3 forbids it): SNI_HOST_ADDR, treated as no server_name.
 */
static enum sni_host sni_host(char *h, size_t n)
{
	size_t i, label = 0;

	if (memchr(h, ':', n))
		return sni_ipv6(h, n) ? SNI_HOST_ADDR : SNI_HOST_BAD;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)h[i];

		if (c == '.') {
			if (label == 0)
				return SNI_HOST_BAD;
			label = 0;
			continue;
		}
		if (c >= 'A' && c <= 'Z')
			h[i] = (char)(c - 'A' + 'a');
		else if (!sni_digit(c) && !(c >= 'a' && c <= 'z') && c != '-' &&
			 c != '_')
			return SNI_HOST_BAD;
		if (++label > SNI_LABEL_MAX)
			return SNI_HOST_BAD;
	}
	if (label == 0)
		return SNI_HOST_BAD;
	return sni_numeric(h + n - label, label) ? SNI_HOST_ADDR
						 : SNI_HOST_NAME;
}

/*
 * The server_name extension's data, elen bytes (RFC 6066 section 3): a
 * ServerNameList holding exactly one host_name, as OpenSSL and BoringSSL
 * require, of 1..253 bytes (254 with a trailing dot, which is dropped).
 * No field is read past its container: the list's length needs 2 bytes
 * of the extension, an entry's header 3 of the list. The name goes to
 * host; *kind says what it is.
 */
static bool sni_ext(struct sni_rd *r, size_t elen, char *host,
		    enum sni_host *kind)
{
	unsigned list, type, n;

	if (elen < 2)
		return rd_bad(r);
	if (!rd_u16(r, &list))
		return false;
	if (list + 2 != elen || list < 3)
		return rd_bad(r);
	if (!rd_u8(r, &type) || !rd_u16(r, &n))
		return false;
	if (type != SNI_NT_HOST_NAME || n + 3 != list || n == 0 ||
	    n > SNI_NAME_MAX + 1)
		return rd_bad(r);
	if (!rd_take(r, (uint8_t *)host, n < SNI_NAME_MAX ? n : SNI_NAME_MAX))
		return false;
	if (n == SNI_NAME_MAX + 1) { /* only with a trailing dot */
		uint8_t dot[1];

		if (!rd_take(r, dot, 1))
			return false;
		if (dot[0] != '.')
			return rd_bad(r);
		n--;
	} else if (host[n - 1] == '.') {
		n--;
	}
	host[n] = '\0';
	if (n == 0 || memchr(host, '\0', n))
		return rd_bad(r);
	*kind = sni_host(host, n);
	if (*kind == SNI_HOST_BAD)
		return rd_bad(r);
	return true;
}

/*
 * The ClientHello body after the handshake header: legacy_version 0x0301
 * ..0x0304 (SSL 3.0 is forbidden, RFC 7568), random, session id of at
 * most 32 bytes, a non-empty even list of cipher suites, compression
 * methods that include null (so not empty), and either nothing more or
 * an extensions block that ends exactly with the message, server_name at
 * most once. The block ending where the message does, rd_take's bound is
 * the block's: an extension's header or data past it is SNI_BAD there.
 */
static bool sni_hello(struct sni_rd *r, char *host, enum sni_host *kind)
{
	unsigned ver, n, m, i, type;
	bool null = false, seen = false;

	if (!rd_u16(r, &ver))
		return false;
	if (ver < 0x0301 || ver > 0x0304)
		return rd_bad(r);
	if (!rd_take(r, NULL, SNI_RANDOM) || !rd_u8(r, &n))
		return false;
	if (n > SNI_SID_MAX)
		return rd_bad(r);
	if (!rd_take(r, NULL, n) || !rd_u16(r, &n))
		return false;
	if (n == 0 || n % 2)
		return rd_bad(r);
	if (!rd_take(r, NULL, n) || !rd_u8(r, &n))
		return false;
	for (i = 0; i < n; i++) {
		if (!rd_u8(r, &m))
			return false;
		null |= m == 0;
	}
	if (!null)
		return rd_bad(r);
	if (r->off == r->total) /* no extensions: TLS 1.2 and before */
		return true;
	if (!rd_u16(r, &n))
		return false;
	if (n != r->total - r->off)
		return rd_bad(r);
	while (r->off < r->total) {
		if (!rd_u16(r, &type) || !rd_u16(r, &n))
			return false;
		if (type != SNI_EXT_SERVER_NAME) {
			if (!rd_take(r, NULL, n))
				return false;
			continue;
		}
		if (seen) /* RFC 8446 section 4.2: one of each type */
			return rd_bad(r);
		seen = true;
		if (!sni_ext(r, n, host, kind))
			return false;
	}
	return true;
}

/* The first bytes are not a TLS record: an SSL 2.0 CLIENT-HELLO (RFC 6176
 * forbids clients to send one, and it has no extensions) is SNI_BAD,
 * anything else SNI_NOT_TLS. */
static enum sni_result sni_not_record(const uint8_t *buf, size_t len,
				      size_t *need)
{
	size_t n;

	if (!(buf[0] & 0x80))
		return SNI_NOT_TLS;
	if (len < SNI_SSL2_PREFIX) {
		*need = SNI_SSL2_PREFIX;
		return SNI_NEED_MORE;
	}
	n = (size_t)(buf[0] & 0x7f) << 8 | buf[1];
	if (n >= SNI_SSL2_MIN && buf[2] == SNI_SSL2_CLIENT_HELLO &&
	    (buf[3] == 3 || buf[3] == 0))
		return SNI_BAD;
	return SNI_NOT_TLS;
}

/* The whole parse; host gets the name when SNI_FOUND. */
static enum sni_result sni_run(const uint8_t *buf, size_t len, char *host,
			       size_t *need)
{
	struct sni_rd r = {.buf = buf, .len = len};
	enum sni_host kind = SNI_HOST_NONE;
	unsigned type, hi, lo;

	if (len == 0) {
		*need = 1;
		return SNI_NEED_MORE;
	}
	if (buf[0] != SNI_CT_HANDSHAKE)
		return sni_not_record(buf, len, need);
	if (len >= 2 && buf[1] != 3)
		return SNI_NOT_TLS;
	if (!rd_u8(&r, &type))
		goto out;
	if (type != SNI_HT_CLIENT_HELLO)
		return SNI_BAD;
	if (!rd_u8(&r, &hi) || !rd_u16(&r, &lo))
		goto out;
	r.total = SNI_HS_HDR + ((size_t)hi << 16 | lo);
	if (r.total < SNI_HS_HDR + SNI_BODY_MIN) /* and rd_least_end grows */
		return SNI_BAD;
	if (!sni_hello(&r, host, &kind))
		goto out;
	if (r.pos != r.rec_end) /* its last record holds nothing else */
		return SNI_BAD;
	return kind == SNI_HOST_NAME ? SNI_FOUND : SNI_NONE;
out:
	*need = r.need;
	return r.res;
}

enum sni_result sni_parse(const uint8_t *buf, size_t len,
			  char name[SNI_NAME_MAX + 1], size_t *need)
{
	char host[SNI_NAME_MAX + 1];
	size_t n = 0;
	enum sni_result res;

	name[0] = '\0';
	res = sni_run(buf, len, host, &n);
	if (res == SNI_FOUND)
		memcpy(name, host, strlen(host) + 1);
	if (need)
		*need = res == SNI_NEED_MORE ? n : 0;
	return res;
}
