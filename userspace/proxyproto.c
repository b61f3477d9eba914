// SPDX-License-Identifier: BSD-2-Clause
/*
 * proxyproto.c - the PROXY protocol, versions 1 and 2 (proxyproto.h).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "proxyproto.h"

static const uint8_t pp_v2_sig[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
				      0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};
static const char pp_v1_sig[] = "PROXY ";

const char *pp_reason(int r)
{
	switch (r) {
	case PP_NEED_MORE:
		return "truncated";
	case PP_NOT_PROXY:
		return "not a PROXY protocol header";
	case PP_TOO_LONG:
		return "header too long";
	case PP_BAD_V1:
		return "malformed v1 header";
	case PP_BAD_VERSION:
		return "v2: unknown version or command";
	case PP_BAD_FAMILY:
		return "v2: unknown or unsupported address family";
	case PP_BAD_LENGTH:
		return "v2: length shorter than its addresses";
	case PP_BAD_TLV:
		return "v2: malformed TLV";
	default:
		return r > 0 ? "ok" : "unknown";
	}
}

/* A v1 port: 0..65535, digits only, no leading zero. */
static bool pp_v1_port(const char *s, size_t n, uint16_t *out)
{
	unsigned v = 0;
	size_t i;

	if (n == 0 || n > 5 || (n > 1 && s[0] == '0'))
		return false;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > 65535)
		return false;
	*out = (uint16_t)v;
	return true;
}

/* A v1 address of family af into ss (port 0). */
static bool pp_v1_addr(int af, const char *s, size_t n,
		       struct sockaddr_storage *ss, socklen_t *len)
{
	char buf[INET6_ADDRSTRLEN];

	if (n == 0 || n >= sizeof(buf))
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	memset(ss, 0, sizeof(*ss));
	if (af == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;

		a->sin_family = AF_INET;
		*len = sizeof(*a);
		return inet_pton(AF_INET, buf, &a->sin_addr) == 1;
	}
	struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

	a->sin6_family = AF_INET6;
	*len = sizeof(*a);
	return inet_pton(AF_INET6, buf, &a->sin6_addr) == 1;
}

static void pp_set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

/* An IPv4-mapped IPv6 address in ss made IPv4. */
static void pp_unmap(struct sockaddr_storage *ss, socklen_t *len)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0,    0,
					   0, 0, 0, 0, 0xff, 0xff};
	struct sockaddr_in6 s6;
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

	if (ss->ss_family != AF_INET6)
		return;
	memcpy(&s6, ss, sizeof(s6));
	if (memcmp(s6.sin6_addr.s6_addr, mapped, sizeof(mapped)) != 0)
		return;
	memset(ss, 0, sizeof(*ss));
	s4->sin_family = AF_INET;
	s4->sin_port = s6.sin6_port;
	memcpy(&s4->sin_addr, s6.sin6_addr.s6_addr + 12, 4);
	*len = sizeof(*s4);
}

static int pp_parse_v1(const uint8_t *buf, size_t len, struct pp_info *out)
{
	const char *p = (const char *)buf, *tok[5];
	size_t n = len < PP_V1_MAX ? len : PP_V1_MAX, end, i, k, tl[5];
	uint16_t sport, dport;
	int af;

	/* the line: printable ASCII up to CRLF */
	for (end = 0; end < n; end++) {
		if (buf[end] == '\r')
			break;
		if (buf[end] < 0x20 || buf[end] > 0x7e)
			return PP_BAD_V1;
	}
	if (end == n)
		return len >= PP_V1_MAX ? PP_TOO_LONG : PP_NEED_MORE;
	if (end + 1 == len)
		return end + 2 > PP_V1_MAX ? PP_TOO_LONG : PP_NEED_MORE;
	if (buf[end + 1] != '\n')
		return PP_BAD_V1;
	if (end + 2 > PP_V1_MAX)
		return PP_TOO_LONG;
	memset(out, 0, sizeof(*out));
	out->version = 1;
	/* UNKNOWN, and whatever follows it: the peer's address stands */
	i = sizeof(pp_v1_sig) - 1;
	if (end - i >= 7 && memcmp(p + i, "UNKNOWN", 7) == 0 &&
	    (end - i == 7 || p[i + 7] == ' ')) {
		out->unknown = true;
		return (int)(end + 2);
	}
	/* TCP4|TCP6, then four fields, single spaces */
	if (end - i < 5 || memcmp(p + i, "TCP", 3) != 0 || p[i + 4] != ' ')
		return PP_BAD_V1;
	if (p[i + 3] == '4')
		af = AF_INET;
	else if (p[i + 3] == '6')
		af = AF_INET6;
	else
		return PP_BAD_V1;
	i += 5;
	for (k = 0; k < 4; k++) {
		tok[k] = p + i;
		while (i < end && p[i] != ' ')
			i++;
		tl[k] = (size_t)(p + i - tok[k]);
		if (tl[k] == 0)
			return PP_BAD_V1;
		if (k < 3) {
			if (i == end)
				return PP_BAD_V1;
			i++; /* the one space */
		}
	}
	if (i != end)
		return PP_BAD_V1;
	if (!pp_v1_addr(af, tok[0], tl[0], &out->src, &out->src_len) ||
	    !pp_v1_addr(af, tok[1], tl[1], &out->dst, &out->dst_len) ||
	    !pp_v1_port(tok[2], tl[2], &sport) ||
	    !pp_v1_port(tok[3], tl[3], &dport))
		return PP_BAD_V1;
	pp_set_port(&out->src, sport);
	pp_set_port(&out->dst, dport);
	pp_unmap(&out->src, &out->src_len);
	pp_unmap(&out->dst, &out->dst_len);
	return (int)(end + 2);
}

static int pp_parse_v2(const uint8_t *buf, size_t len, struct pp_info *out)
{
	size_t total, off, end, need;
	unsigned cmd, fam;

	if (len < 16)
		return PP_NEED_MORE;
	if (buf[12] >> 4 != 2 || (buf[12] & 0x0f) > 1)
		return PP_BAD_VERSION;
	cmd = buf[12] & 0x0f;
	fam = buf[13];
	/* LOCAL: the family is to be ignored */
	switch (cmd == 0 ? 0x00 : fam) {
	case 0x00:
	case 0x11:
	case 0x12:
	case 0x21:
	case 0x22:
	case 0x31:
	case 0x32:
		break;
	default:
		return PP_BAD_FAMILY;
	}
	total = 16 + ((size_t)buf[14] << 8 | buf[15]);
	if (total > PP_V2_MAX)
		return PP_TOO_LONG;
	/* what the family needs is known before the whole header comes */
	need = fam >> 4 == 1   ? 12
	       : fam >> 4 == 2 ? 36
	       : fam >> 4 == 3 ? 216
			       : 0;
	if (cmd == 1 && (fam & 0x0f) == 2)
		return PP_BAD_FAMILY; /* UDP over a stream */
	if (cmd == 1 && total - 16 < need)
		return PP_BAD_LENGTH;
	if (len < total)
		return PP_NEED_MORE;
	memset(out, 0, sizeof(*out));
	out->version = 2;
	if (cmd == 0) {
		out->local = true;
		return (int)total;
	}
	if (fam == 0x00 || fam >> 4 == 3) {
		/* UNSPEC, UNIX: a client the sender could not name */
		out->unknown = true;
		return (int)total;
	}
	if (fam >> 4 == 1) {
		struct sockaddr_in *s = (struct sockaddr_in *)&out->src;
		struct sockaddr_in *d = (struct sockaddr_in *)&out->dst;

		s->sin_family = d->sin_family = AF_INET;
		memcpy(&s->sin_addr, buf + 16, 4);
		memcpy(&d->sin_addr, buf + 20, 4);
		memcpy(&s->sin_port, buf + 24, 2);
		memcpy(&d->sin_port, buf + 26, 2);
		out->src_len = out->dst_len = sizeof(*s);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)&out->src;
		struct sockaddr_in6 *d = (struct sockaddr_in6 *)&out->dst;

		s->sin6_family = d->sin6_family = AF_INET6;
		memcpy(&s->sin6_addr, buf + 16, 16);
		memcpy(&d->sin6_addr, buf + 32, 16);
		memcpy(&s->sin6_port, buf + 48, 2);
		memcpy(&d->sin6_port, buf + 50, 2);
		out->src_len = out->dst_len = sizeof(*s);
	}
	pp_unmap(&out->src, &out->src_len);
	pp_unmap(&out->dst, &out->dst_len);
	/* the TLVs after the addresses fill the rest exactly; skipped */
	end = total;
	for (off = 16 + need; off < end;) {
		size_t l;

		if (end - off < 3)
			return PP_BAD_TLV;
		l = (size_t)buf[off + 1] << 8 | buf[off + 2];
		if (l > end - off - 3)
			return PP_BAD_TLV;
		off += 3 + l;
	}
	return (int)total;
}

int pp_parse(const uint8_t *buf, size_t len, struct pp_info *out)
{
	size_t n;

	if (len == 0)
		return PP_NEED_MORE;
	if (buf[0] == 'P') {
		n = len < sizeof(pp_v1_sig) - 1 ? len : sizeof(pp_v1_sig) - 1;
		if (memcmp(buf, pp_v1_sig, n) != 0)
			return PP_NOT_PROXY;
		if (len < sizeof(pp_v1_sig) - 1)
			return PP_NEED_MORE;
		return pp_parse_v1(buf, len, out);
	}
	n = len < sizeof(pp_v2_sig) ? len : sizeof(pp_v2_sig);
	if (memcmp(buf, pp_v2_sig, n) != 0)
		return PP_NOT_PROXY;
	return pp_parse_v2(buf, len, out);
}

/* sa as an IPv6 address (an IPv4 one mapped) and its port. */
static void pp_as6(const struct sockaddr *sa, struct in6_addr *a,
		   uint16_t *port)
{
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

		*a = s6->sin6_addr;
		*port = s6->sin6_port;
		return;
	}
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

	memset(a, 0, sizeof(*a));
	a->s6_addr[10] = a->s6_addr[11] = 0xff;
	memcpy(&a->s6_addr[12], &s4->sin_addr, 4);
	*port = s4->sin_port;
}

static bool pp_inet(const struct sockaddr *sa)
{
	return sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6);
}

size_t pp_write(unsigned version, const struct sockaddr *src,
		const struct sockaddr *dst, uint8_t *buf)
{
	bool v4 = pp_inet(src) && pp_inet(dst) && src->sa_family == AF_INET &&
		  dst->sa_family == AF_INET;
	bool known = pp_inet(src) && pp_inet(dst);
	struct in6_addr s6, d6;
	uint16_t sp = 0, dp = 0;

	if (version == 1) {
		char s[INET6_ADDRSTRLEN], d[INET6_ADDRSTRLEN];
		int n;

		if (!known) {
			memcpy(buf, "PROXY UNKNOWN\r\n", 15);
			return 15;
		}
		if (v4) {
			const struct sockaddr_in *a = (const void *)src;
			const struct sockaddr_in *b = (const void *)dst;

			inet_ntop(AF_INET, &a->sin_addr, s, sizeof(s));
			inet_ntop(AF_INET, &b->sin_addr, d, sizeof(d));
			sp = a->sin_port;
			dp = b->sin_port;
		} else {
			pp_as6(src, &s6, &sp);
			pp_as6(dst, &d6, &dp);
			inet_ntop(AF_INET6, &s6, s, sizeof(s));
			inet_ntop(AF_INET6, &d6, d, sizeof(d));
		}
		n = snprintf((char *)buf, PP_WRITE_MAX,
			     "PROXY %s %s %s %u %u\r\n", v4 ? "TCP4" : "TCP6",
			     s, d, ntohs(sp), ntohs(dp));
		return n > 0 && n < PP_WRITE_MAX ? (size_t)n : 0;
	}
	if (version != 2)
		return 0;
	memcpy(buf, pp_v2_sig, sizeof(pp_v2_sig));
	if (!known) {
		buf[12] = 0x21; /* PROXY, UNSPEC: a client with no address */
		buf[13] = 0x00;
		buf[14] = buf[15] = 0;
		return 16;
	}
	buf[12] = 0x21; /* PROXY */
	if (v4) {
		const struct sockaddr_in *a = (const void *)src;
		const struct sockaddr_in *b = (const void *)dst;

		buf[13] = 0x11;
		buf[14] = 0;
		buf[15] = 12;
		memcpy(buf + 16, &a->sin_addr, 4);
		memcpy(buf + 20, &b->sin_addr, 4);
		memcpy(buf + 24, &a->sin_port, 2);
		memcpy(buf + 26, &b->sin_port, 2);
		return 28;
	}
	pp_as6(src, &s6, &sp);
	pp_as6(dst, &d6, &dp);
	buf[13] = 0x21;
	buf[14] = 0;
	buf[15] = 36;
	memcpy(buf + 16, &s6, 16);
	memcpy(buf + 32, &d6, 16);
	memcpy(buf + 48, &sp, 2);
	memcpy(buf + 50, &dp, 2);
	return 52;
}

size_t pp_write_local(unsigned version, uint8_t *buf)
{
	if (version == 1) {
		memcpy(buf, "PROXY UNKNOWN\r\n", 15);
		return 15;
	}
	if (version != 2)
		return 0;
	memcpy(buf, pp_v2_sig, sizeof(pp_v2_sig));
	buf[12] = 0x20; /* LOCAL */
	buf[13] = 0x00;
	buf[14] = buf[15] = 0;
	return 16;
}
