/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * config_check.c - checks of single values of projects, environments,
 * deployments and routes, without libconfig (config_check.h): what the
 * file loader and any other source of projects accept alike.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "cidr.h"
#include "config_check.h"
#include "duration.h"
#include "edge_maps.h"

#define CONFIG_NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- endpoints ---------------------------------------------------------- */

static int config_port_parse(const char *p, unsigned *port)
{
	unsigned v = 0;

	if (!*p || *p == '0')
		return -EINVAL;
	for (; *p; p++) {
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		v = v * 10 + (unsigned)(*p - '0');
		if (v > 65535)
			return -EINVAL;
	}
	*port = v;
	return 0;
}

int config_addr_parse(const char *s, struct config_addr *out,
		      struct errbuf *err)
{
	char host[INET6_ADDRSTRLEN + 1], buf[INET6_ADDRSTRLEN];
	const char *colon, *ps;
	struct config_addr a;
	unsigned port;
	size_t hl;

	memset(&a, 0, sizeof(a));
	if (!s || !*s) {
		errbuf_set(err, "empty address");
		return -EINVAL;
	}
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close || close[1] != ':') {
			errbuf_set(err, "\"%s\": expected [IPV6]:PORT", s);
			return -EINVAL;
		}
		hl = (size_t)(close - s - 1);
		ps = close + 2;
		if (hl == 0 || hl >= sizeof(host))
			goto bad_ip;
		memcpy(host, s + 1, hl);
		host[hl] = '\0';
		if (strchr(host, '%')) {
			errbuf_set(err, "\"%s\": zone ids are not supported",
				   s);
			return -EINVAL;
		}
		{
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a.ss;

			if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
				goto bad_ip;
			in6->sin6_family = AF_INET6;
			a.len = sizeof(*in6);
		}
	} else {
		struct sockaddr_in *in4 = (struct sockaddr_in *)&a.ss;
		struct cidr c;

		colon = strrchr(s, ':');
		if (!colon) {
			errbuf_set(err, "\"%s\": expected ADDR:PORT", s);
			return -EINVAL;
		}
		if (memchr(s, ':', (size_t)(colon - s))) {
			errbuf_set(err,
				   "\"%s\": an IPv6 address needs brackets: "
				   "[ADDR]:PORT",
				   s);
			return -EINVAL;
		}
		hl = (size_t)(colon - s);
		ps = colon + 1;
		if (hl == 0 || hl >= sizeof(host))
			goto bad_ip;
		memcpy(host, s, hl);
		host[hl] = '\0';
		/* cidr_parse_addr is strict about IPv4 (no leading zeros, four
		 * octets); a host name is refused here, never resolved */
		if (cidr_parse_addr(host, &c, NULL) < 0 || c.family != AF_INET)
			goto bad_ip;
		memcpy(&in4->sin_addr, c.addr, 4);
		in4->sin_family = AF_INET;
		a.len = sizeof(*in4);
	}
	if (config_port_parse(ps, &port) < 0) {
		errbuf_set(err, "\"%s\": port must be 1..65535", s);
		return -EINVAL;
	}
	if (a.ss.ss_family == AF_INET) {
		struct sockaddr_in *in4 = (struct sockaddr_in *)&a.ss;

		in4->sin_port = htons((uint16_t)port);
		inet_ntop(AF_INET, &in4->sin_addr, buf, sizeof(buf));
		snprintf(a.text, sizeof(a.text), "%s:%u", buf, port);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a.ss;

		in6->sin6_port = htons((uint16_t)port);
		inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
		snprintf(a.text, sizeof(a.text), "[%s]:%u", buf, port);
	}
	*out = a;
	return 0;
bad_ip:
	errbuf_set(err,
		   "\"%s\": not a numeric IPv4 or IPv6 address (host names "
		   "are not resolved)",
		   s);
	return -EINVAL;
}

bool config_addr_overlaps(const struct config_addr *a,
			  const struct config_addr *b)
{
	if (a->ss.ss_family != b->ss.ss_family)
		return false;
	if (a->ss.ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)&a->ss;
		const struct sockaddr_in *y = (const void *)&b->ss;

		return x->sin_port == y->sin_port &&
		       (x->sin_addr.s_addr == y->sin_addr.s_addr ||
			x->sin_addr.s_addr == htonl(INADDR_ANY) ||
			y->sin_addr.s_addr == htonl(INADDR_ANY));
	}
	if (a->ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)&a->ss;
		const struct sockaddr_in6 *y = (const void *)&b->ss;

		return x->sin6_port == y->sin6_port &&
		       (IN6_ARE_ADDR_EQUAL(&x->sin6_addr, &y->sin6_addr) ||
			IN6_IS_ADDR_UNSPECIFIED(&x->sin6_addr) ||
			IN6_IS_ADDR_UNSPECIFIED(&y->sin6_addr));
	}
	return false;
}

/* ---- names --------------------------------------------------------------- */

int config_domain_check(char *s, bool wildcard_ok, struct errbuf *err)
{
	size_t len, label = 0, i;
	char *p;

	if (!s || !*s) {
		errbuf_set(err, "empty domain");
		return -EINVAL;
	}
	len = strlen(s);
	if (len > CONFIG_HOST_MAX) {
		errbuf_set(err, "\"%.40s...\": longer than %d bytes", s,
			   CONFIG_HOST_MAX);
		return -EINVAL;
	}
	p = s;
	if (p[0] == '*') {
		if (!wildcard_ok) {
			errbuf_set(err, "\"%s\": no wildcard allowed here", s);
			return -EINVAL;
		}
		if (p[1] != '.' || p[2] == '\0') {
			errbuf_set(err,
				   "\"%s\": a wildcard must be the whole "
				   "leftmost label, as in *.example.com",
				   s);
			return -EINVAL;
		}
		p += 2;
	}
	if (strchr(p, '.') == NULL && p != s) {
		errbuf_set(err,
			   "\"%s\": a wildcard needs at least two labels "
			   "after it",
			   s);
		return -EINVAL;
	}
	for (i = 0; p[i]; i++) {
		unsigned char ch = (unsigned char)p[i];

		if (ch == '.') {
			if (label == 0) {
				errbuf_set(err, "\"%s\": empty label", s);
				return -EINVAL;
			}
			if (p[i - 1] == '-') {
				errbuf_set(err, "\"%s\": a label ends with '-'",
					   s);
				return -EINVAL;
			}
			label = 0;
			continue;
		}
		if (ch == '*') {
			errbuf_set(err,
				   "\"%s\": '*' is allowed only as the whole "
				   "leftmost label",
				   s);
			return -EINVAL;
		}
		if (ch == ':') {
			errbuf_set(err, "\"%s\": a domain has no port", s);
			return -EINVAL;
		}
		if (!isalnum(ch) && ch != '-') {
			errbuf_set(err, "\"%s\": invalid character '%c'", s,
				   isprint(ch) ? ch : '?');
			return -EINVAL;
		}
		if (ch == '-' && label == 0) {
			errbuf_set(err, "\"%s\": a label starts with '-'", s);
			return -EINVAL;
		}
		if (++label > 63) {
			errbuf_set(err, "\"%s\": a label is longer than 63", s);
			return -EINVAL;
		}
		p[i] = (char)tolower(ch);
	}
	if (label == 0) {
		errbuf_set(err,
			   "\"%s\": empty label (write domains without a "
			   "trailing dot)",
			   s);
		return -EINVAL;
	}
	if (p[i - 1] == '-') {
		errbuf_set(err, "\"%s\": a label ends with '-'", s);
		return -EINVAL;
	}
	return 0;
}

int config_sni_check(char *s, struct errbuf *err)
{
	struct errbuf e;
	const char *last;

	if (strcmp(s, "*") == 0)
		return 0;
	errbuf_clear(&e);
	if (config_domain_check(s, true, &e) < 0) {
		errbuf_set(err, "%s (or \"*\": the listen address's default)",
			   e.msg);
		return -EINVAL;
	}
	/* a name whose last label is all digits is an IPv4 address, which
	 * a ClientHello never names (RFC 6066): a route never taken */
	last = strrchr(s, '.');
	last = last ? last + 1 : s;
	if (*last && strspn(last, "0123456789") == strlen(last)) {
		errbuf_set(err,
			   "\"%s\" is an IP address, which no ClientHello "
			   "names (RFC 6066): a route never taken",
			   s);
		return -EINVAL;
	}
	return 0;
}

int config_prefix_check(const char *v, struct errbuf *e)
{
	const char *p, *seg;

	if (v[0] != '/') {
		errbuf_set(e, "\"%s\": must start with '/'", v);
		return -EINVAL;
	}
	if (strlen(v) < 2 || strlen(v) > CONFIG_PREFIX_MAX) {
		errbuf_set(e,
			   "\"%s\": must be 2..%d bytes (\"/\" is the "
			   "environment itself)",
			   v, CONFIG_PREFIX_MAX);
		return -EINVAL;
	}
	for (seg = p = v + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			size_t n = (size_t)(p - seg);

			if (n == 0) {
				errbuf_set(e,
					   "\"%s\": empty segment or trailing "
					   "'/'",
					   v);
				return -EINVAL;
			}
			if ((n == 1 && seg[0] == '.') ||
			    (n == 2 && seg[0] == '.' && seg[1] == '.')) {
				errbuf_set(e, "\"%s\": '.' or '..' segment", v);
				return -EINVAL;
			}
			if (*p == '\0')
				break;
			seg = p + 1;
			continue;
		}
		if (!isalnum((unsigned char)*p) &&
		    !strchr("-._~!$&'()*+,;=:@", *p)) {
			errbuf_set(e, "\"%s\": invalid character '%c'", v,
				   isprint((unsigned char)*p) ? *p : '?');
			return -EINVAL;
		}
	}
	return 0;
}

bool config_is_word(const char *s)
{
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("._-", *s))
			return false;
	return true;
}

int config_id_check(const char *s, struct errbuf *err)
{
	if (!*s || strlen(s) > CONFIG_ID_MAX) {
		errbuf_set(err, "must be 1..%d bytes", CONFIG_ID_MAX);
		return -EINVAL;
	}
	if (!config_is_word(s)) {
		errbuf_set(err,
			   "\"%s\": only letters, digits, '.', '_' and '-' "
			   "are allowed",
			   s);
		return -EINVAL;
	}
	return 0;
}

int config_name_check(const char *s, struct errbuf *err)
{
	const char *p;

	if (!*s || strlen(s) > CONFIG_NAME_MAX) {
		errbuf_set(err, "must be 1..%d bytes", CONFIG_NAME_MAX);
		return -EINVAL;
	}
	for (p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			errbuf_set(err, "control character");
			return -EINVAL;
		}
	return 0;
}

/* ---- IP rules ------------------------------------------------------------ */

int config_ip_rule_add(struct rules *rules, uint8_t action, const char *s,
		       struct errbuf *note, struct errbuf *err)
{
	char a[CIDR_STR_MAX];
	const struct rule *old;
	unsigned notes = 0;
	struct rule r;
	uint32_t id;
	int rc;

	errbuf_clear(note);
	memset(&r, 0, sizeof(r));
	if (cidr_parse(s, &r.cidr, &notes, err) < 0)
		return -EINVAL;
	cidr_format(&r.cidr, a, sizeof(a));
	old = rules_find(rules, &r.cidr);
	if (old) {
		errbuf_set(err, "%s is already in ip_%s", a,
			   old->action == EDGE_ACT_ALLOW ? "allow" : "block");
		return -EINVAL;
	}
	r.action = action;
	rc = rules_set(rules, &r, NULL, &id);
	if (rc == -ENOSPC) {
		errbuf_set(err, "too many rules (%d)", EDGE_MAX_RULES);
		return -EINVAL;
	}
	if (rc < 0) {
		errbuf_set(err, "out of memory");
		return rc;
	}
	if (notes & CIDR_NOTE_HOST_BITS)
		errbuf_set(note, "\"%s\" has host bits set; using %s", s, a);
	return 0;
}

/* ---- choices ------------------------------------------------------------- */

/* Indexed by enum config_balance. */
static const char *const config_balance_names[] = {
    "round_robin",
    "least_inflight",
    "ip_hash",
};

/* The index of s in names[0..n), or -1. */
static int config_choice(const char *s, const char *const *names, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(names[i], s) == 0)
			return (int)i;
	return -1;
}

int config_balance_parse(const char *s, enum config_balance *out,
			 struct errbuf *err)
{
	int i = config_choice(s, config_balance_names,
			      CONFIG_NELEM(config_balance_names));

	if (i < 0) {
		errbuf_set(err,
			   "\"%s\": expected round_robin, least_inflight or "
			   "ip_hash",
			   s);
		return -EINVAL;
	}
	*out = (enum config_balance)i;
	return 0;
}

const char *config_balance_name(enum config_balance b)
{
	return (size_t)b < CONFIG_NELEM(config_balance_names)
		   ? config_balance_names[b]
		   : "?";
}

int config_frame_options_check(const char *s, struct errbuf *err)
{
	static const char *const frames[] = {"", "DENY", "SAMEORIGIN"};

	if (config_choice(s, frames, CONFIG_NELEM(frames)) < 0) {
		errbuf_set(err,
			   "\"%s\": expected \"DENY\", \"SAMEORIGIN\" or \"\"",
			   s);
		return -EINVAL;
	}
	return 0;
}

int config_referrer_policy_check(const char *s, struct errbuf *err)
{
	static const char *const referrers[] = {
	    "",
	    "no-referrer",
	    "no-referrer-when-downgrade",
	    "origin",
	    "origin-when-cross-origin",
	    "same-origin",
	    "strict-origin",
	    "strict-origin-when-cross-origin",
	    "unsafe-url",
	};

	if (config_choice(s, referrers, CONFIG_NELEM(referrers)) < 0) {
		errbuf_set(err, "\"%s\": not a Referrer-Policy", s);
		return -EINVAL;
	}
	return 0;
}

/* ---- durations ----------------------------------------------------------- */

int config_duration_parse(const char *s, uint64_t *ms, struct errbuf *err)
{
	return duration_parse_ms(s, CONFIG_DURATION_MAX_MS, ms, err);
}

/* This file must build without libconfig (config_check.h). */
#ifdef LIBCONFIG_VER_MAJOR
#error "config_check.c must not depend on libconfig"
#endif
