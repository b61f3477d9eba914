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
#include <stddef.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

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

const char *config_scheme_name(enum config_scheme s)
{
	switch (s) {
	case CONFIG_SCHEME_HTTP:
		return "http";
	case CONFIG_SCHEME_HTTPS:
		return "https";
	case CONFIG_SCHEME_H2C:
		return "h2c";
	case CONFIG_SCHEME_UNIX:
		return "unix";
	case CONFIG_SCHEME_N:
		break;
	}
	return "?";
}

static int config_unix_parse(const char *s, const char *path,
			     struct config_addr *out, struct errbuf *err)
{
	struct sockaddr_un *un = (struct sockaddr_un *)&out->ss;
	size_t n = strlen(path);

	if (path[0] != '/') {
		errbuf_set(err,
			   "\"%s\": a Unix socket needs an absolute "
			   "path: unix:/PATH",
			   s);
		return -EINVAL;
	}
	_Static_assert(sizeof("unix:") + sizeof(un->sun_path) - 1 <=
			   sizeof(out->text),
		       "the longest unix: text fits an endpoint's");
	if (n >= sizeof(un->sun_path)) {
		errbuf_set(err,
			   "\"%.64s...\": a Unix socket path is at most %zu "
			   "bytes",
			   s, sizeof(un->sun_path) - 1);
		return -EINVAL;
	}
	/* it goes into logs, metrics' labels, JSON and edgectl's columns
	 * as it is */
	for (size_t i = 0; i < n; i++)
		if (path[i] <= ' ' || path[i] >= 0x7f || path[i] == '"' ||
		    path[i] == '\\') {
			errbuf_set(
			    err,
			    "\"%.64s\": a Unix socket path of printable "
			    "ASCII without spaces, quotes or backslashes",
			    s);
			return -EINVAL;
		}
	un->sun_family = AF_UNIX;
	memcpy(un->sun_path, path, n + 1);
	out->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	out->scheme = CONFIG_SCHEME_UNIX;
	snprintf(out->text, sizeof(out->text), "unix:%s", path);
	return 0;
}

int config_endpoint_parse(const char *s, unsigned schemes,
			  struct config_addr *out, struct errbuf *err)
{
	static const struct {
		const char *prefix;
		enum config_scheme scheme;
	} pre[] = {
	    {"http://", CONFIG_SCHEME_HTTP},
	    {"https://", CONFIG_SCHEME_HTTPS},
	    {"h2c://", CONFIG_SCHEME_H2C},
	    {"unix:", CONFIG_SCHEME_UNIX},
	};
	enum config_scheme sc = CONFIG_SCHEME_HTTP;
	const char *rest = s;
	struct config_addr a;
	size_t i, n;
	int rc;

	memset(&a, 0, sizeof(a));
	if (!s || !*s) {
		errbuf_set(err, "empty address");
		return -EINVAL;
	}
	for (i = 0; i < sizeof(pre) / sizeof(pre[0]); i++) {
		n = strlen(pre[i].prefix);
		if (strncasecmp(s, pre[i].prefix, n) == 0) {
			sc = pre[i].scheme;
			rest = s + n;
			break;
		}
	}
	if (rest == s && strstr(s, "://")) {
		errbuf_set(err,
			   "\"%.64s\": unknown scheme (http://, https://, "
			   "h2c:// or unix:)",
			   s);
		return -EINVAL;
	}
	if (!(schemes & (1u << sc))) {
		errbuf_set(err,
			   "\"%.64s\": %s%s endpoints are not supported here",
			   s, config_scheme_name(sc),
			   sc == CONFIG_SCHEME_UNIX ? ":" : "://");
		return -EINVAL;
	}
	if (sc == CONFIG_SCHEME_UNIX)
		rc = config_unix_parse(s, rest, &a, err);
	else if (strpbrk(rest, "/?#@")) {
		errbuf_set(err,
			   "\"%.64s\": an endpoint is an address and a port, "
			   "no path or user",
			   s);
		rc = -EINVAL;
	} else {
		rc = config_addr_parse(rest, &a, err);
		if (rc == 0 && sc != CONFIG_SCHEME_HTTP) {
			/* "https://" and the longest "[V6]:PORT" fit */
			char t[CONFIG_ADDR_STR_MAX + 16];

			snprintf(t, sizeof(t), "%s://%s",
				 config_scheme_name(sc), a.text);
			memcpy(a.text, t, sizeof(a.text) - 1);
		}
		a.scheme = sc;
	}
	if (rc)
		return rc;
	*out = a;
	return 0;
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

static const char *const config_send_proxy_names[] = {"", "off", "v1", "v2"};

int config_send_proxy_parse(const char *s, enum config_send_proxy *out,
			    struct errbuf *err)
{
	int i = config_choice(s, config_send_proxy_names,
			      CONFIG_NELEM(config_send_proxy_names));

	if (i <= 0) {
		errbuf_set(err, "\"%s\": expected off, v1 or v2", s);
		return -EINVAL;
	}
	*out = (enum config_send_proxy)i;
	return 0;
}

const char *config_send_proxy_name(enum config_send_proxy v)
{
	return (size_t)v < CONFIG_NELEM(config_send_proxy_names)
		   ? config_send_proxy_names[v]
		   : "?";
}

unsigned config_send_proxy_version(enum config_send_proxy route,
				   enum config_send_proxy dep)
{
	enum config_send_proxy v =
	    route != CONFIG_SEND_PROXY_INHERIT ? route : dep;

	return v == CONFIG_SEND_PROXY_V1   ? 1
	       : v == CONFIG_SEND_PROXY_V2 ? 2
					   : 0;
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

/* ---- health checks ---------------------------------------------------------
 */

const char *const config_hc_keys[CONFIG_HC_NKEYS + 1] = {
    "type",	     "path", "interval", "timeout",
    "expect_status", "rise", "fall",	 NULL};

/* A string value: def when absent (NULL: required). */
static int config_hc_str(const struct config_value *v, const char *def,
			 const char **out, struct errbuf *err)
{
	switch (v->kind) {
	case CONFIG_VALUE_ABSENT:
		if (!def) {
			errbuf_set(err, "missing (required)");
			return -EINVAL;
		}
		*out = def;
		return 0;
	case CONFIG_VALUE_STRING:
		*out = v->str;
		return 0;
	case CONFIG_VALUE_INT:
		errbuf_set(err, "expected a string, found an integer");
		return -EINVAL;
	case CONFIG_VALUE_BOOL:
	case CONFIG_VALUE_OTHER:
		break;
	}
	errbuf_set(err, "expected a string, found %s", v->text);
	return -EINVAL;
}

/* A duration value in ms within [min, max], def when absent. */
static int config_hc_ms(const struct config_value *v, uint64_t def,
			uint64_t min, uint64_t max, uint64_t *out,
			struct errbuf *err)
{
	uint64_t ms;

	*out = def;
	if (v->kind == CONFIG_VALUE_ABSENT)
		return 0;
	if (v->kind != CONFIG_VALUE_STRING) {
		errbuf_set(err,
			   "expected a duration string such as \"10s\", "
			   "found %s",
			   v->kind == CONFIG_VALUE_INT ? "an integer"
						       : v->text);
		return -EINVAL;
	}
	if (config_duration_parse(v->str, &ms, err) < 0)
		return -EINVAL;
	if (ms < min || ms > max) {
		errbuf_set(err, "\"%s\" is out of range %llums..%llums", v->str,
			   (unsigned long long)min, (unsigned long long)max);
		return -EINVAL;
	}
	*out = ms;
	return 0;
}

/* An integer value within [min, max], def when absent. */
static int config_hc_count(const struct config_value *v, uint64_t def,
			   uint64_t min, uint64_t max, uint64_t *out,
			   struct errbuf *err)
{
	*out = def;
	if (v->kind == CONFIG_VALUE_ABSENT)
		return 0;
	if (v->kind != CONFIG_VALUE_INT) {
		errbuf_set(err, "expected an integer, found %s",
			   v->kind == CONFIG_VALUE_STRING ? "a string"
							  : v->text);
		return -EINVAL;
	}
	if (v->big || (v->neg && v->mag) || v->mag < min || v->mag > max) {
		errbuf_set(err, "%s is out of range %llu..%llu", v->text,
			   (unsigned long long)min, (unsigned long long)max);
		return -EINVAL;
	}
	*out = v->mag;
	return 0;
}

int config_health_check_of(const struct config_value v[CONFIG_HC_NKEYS],
			   struct config_health_check *hc, int *key,
			   struct errbuf *err)
{
	const char *t = NULL, *pa = NULL;
	uint64_t n[CONFIG_HC_NKEYS];
	size_t i;
	int k;

	memset(hc, 0, sizeof(*hc));
	*key = CONFIG_HC_KEY_TYPE;
	if (config_hc_str(&v[CONFIG_HC_KEY_TYPE], NULL, &t, err))
		return -EINVAL;
	if (strcmp(t, "http") == 0) {
		hc->type = CONFIG_HC_HTTP;
	} else if (strcmp(t, "tcp") == 0) {
		hc->type = CONFIG_HC_TCP;
	} else {
		errbuf_set(err, "must be \"http\" or \"tcp\"");
		return -EINVAL;
	}
	*key = CONFIG_HC_KEY_PATH;
	if (config_hc_str(&v[CONFIG_HC_KEY_PATH], "/", &pa, err))
		goto bad;
	if (pa[0] != '/' || strlen(pa) >= CONFIG_HC_PATH_MAX) {
		errbuf_set(err,
			   "must start with \"/\" and be shorter than %d "
			   "bytes",
			   CONFIG_HC_PATH_MAX);
		goto bad;
	}
	for (i = 0; pa[i]; i++)
		if ((unsigned char)pa[i] <= ' ' || pa[i] == 0x7f) {
			errbuf_set(err, "no spaces or control characters");
			goto bad;
		}
	if (hc->type == CONFIG_HC_TCP && strcmp(pa, "/") != 0) {
		errbuf_set(err, "only for type \"http\"");
		goto bad;
	}
	snprintf(hc->path, sizeof(hc->path), "%s", pa);
	k = CONFIG_HC_KEY_INTERVAL;
	if (config_hc_ms(&v[k], 2000, 100, 3600 * 1000, &n[k], err))
		goto bad_k;
	k = CONFIG_HC_KEY_TIMEOUT;
	if (config_hc_ms(&v[k], 1000, 10, 60 * 1000, &n[k], err))
		goto bad_k;
	k = CONFIG_HC_KEY_EXPECT_STATUS;
	if (config_hc_count(&v[k], 200, 100, 599, &n[k], err))
		goto bad_k;
	k = CONFIG_HC_KEY_RISE;
	if (config_hc_count(&v[k], 2, 1, 100, &n[k], err))
		goto bad_k;
	k = CONFIG_HC_KEY_FALL;
	if (config_hc_count(&v[k], 3, 1, 100, &n[k], err))
		goto bad_k;
	if (n[CONFIG_HC_KEY_TIMEOUT] > n[CONFIG_HC_KEY_INTERVAL]) {
		*key = -1;
		errbuf_set(err,
			   "timeout (%llu ms) is longer than interval (%llu "
			   "ms)",
			   (unsigned long long)n[CONFIG_HC_KEY_TIMEOUT],
			   (unsigned long long)n[CONFIG_HC_KEY_INTERVAL]);
		goto bad;
	}
	hc->interval_ms = n[CONFIG_HC_KEY_INTERVAL];
	hc->timeout_ms = n[CONFIG_HC_KEY_TIMEOUT];
	hc->expect_status = (unsigned)n[CONFIG_HC_KEY_EXPECT_STATUS];
	hc->rise = (unsigned)n[CONFIG_HC_KEY_RISE];
	hc->fall = (unsigned)n[CONFIG_HC_KEY_FALL];
	return 0;
bad_k:
	*key = k;
bad:
	memset(hc, 0, sizeof(*hc)); /* never a part of a check */
	return -EINVAL;
}

/* What a JSON value is, in a message. */
static const char *config_json_type_name(const json_t *j)
{
	switch (json_typeof(j)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a float";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	case JSON_NULL:
		return "null";
	}
	return "something else";
}

/* A JSON array's items into v's (a list). */
static void config_json_items(const json_t *a, struct config_value *v)
{
	size_t i;

	v->list = true;
	v->more_items = json_array_size(a) > CONFIG_VALUE_ITEMS_MAX;
	for (i = 0; i < json_array_size(a) && i < CONFIG_VALUE_ITEMS_MAX; i++) {
		const json_t *x = json_array_get(a, i);

		/* a NUL inside a string: not the string it seems */
		v->items[i] =
		    json_is_string(x) && strlen(json_string_value(x)) ==
					     json_string_length(x)
			? json_string_value(x)
			: NULL;
	}
	v->n_items = i;
}

/* The members of JSON object o named keys[0..n) into v[0..n) (num: room
 * for an integer's text each): 0, or -EINVAL with err for a value that
 * is not an object, an unknown key or a NUL inside a string. */
static int config_json_values(const json_t *o, const char *const *keys, int n,
			      struct config_value *v, char (*num)[24],
			      struct errbuf *err)
{
	const char *name;
	json_t *m;
	int i;

	memset(v, 0, (size_t)n * sizeof(*v));
	if (!o || !json_is_object(o)) {
		errbuf_set(err, "expected a JSON object, found %s",
			   o ? config_json_type_name(o) : "nothing");
		return -EINVAL;
	}
	/* an unknown key first, as the file's group does */
	json_object_foreach((json_t *)o, name, m)
	{
		for (i = 0; i < n; i++)
			if (strcmp(name, keys[i]) == 0)
				break;
		if (i == n) {
			errbuf_set(err, "%.64s: unknown key", name);
			return -EINVAL;
		}
	}
	for (i = 0; i < n; i++) {
		m = json_object_get(o, keys[i]);
		if (!m)
			continue;
		if (json_is_string(m)) {
			v[i].kind = CONFIG_VALUE_STRING;
			v[i].str = json_string_value(m);
			/* a NUL inside would cut the value short unseen */
			if (strlen(v[i].str) != json_string_length(m)) {
				errbuf_set(err, "%s: a NUL byte in the string",
					   keys[i]);
				return -EINVAL;
			}
		} else if (json_is_integer(m)) {
			json_int_t x = json_integer_value(m);

			v[i].kind = CONFIG_VALUE_INT;
			v[i].neg = x < 0;
			v[i].mag = x < 0 ? 0 - (uint64_t)x : (uint64_t)x;
			snprintf(num[i], sizeof(num[i]), "%lld", (long long)x);
			v[i].text = num[i];
		} else if (json_is_boolean(m)) {
			v[i].kind = CONFIG_VALUE_BOOL;
			v[i].b = json_is_true(m);
			v[i].text = "a boolean";
		} else {
			v[i].kind = CONFIG_VALUE_OTHER;
			v[i].text = config_json_type_name(m);
			if (json_is_array(m))
				config_json_items(m, &v[i]);
		}
	}
	return 0;
}

int config_health_check_json(const json_t *o, struct config_health_check *hc,
			     struct errbuf *err)
{
	struct config_value v[CONFIG_HC_NKEYS];
	char num[CONFIG_HC_NKEYS][24];
	int key = -1;

	memset(hc, 0, sizeof(*hc));
	if (config_json_values(o, config_hc_keys, CONFIG_HC_NKEYS, v, num, err))
		return -EINVAL;
	if (config_health_check_of(v, hc, &key, err) == 0)
		return 0;
	if (key >= 0 && err) { /* err NULL: a snapshot's value, no words */
		struct errbuf e = *err;

		errbuf_set(err, "%s: %s", config_hc_keys[key], e.msg);
	}
	return -EINVAL;
}

json_t *config_health_check_to_json(const struct config_health_check *hc)
{
	char iv[32], to[32];

	snprintf(iv, sizeof(iv), "%llums", (unsigned long long)hc->interval_ms);
	snprintf(to, sizeof(to), "%llums", (unsigned long long)hc->timeout_ms);
	return json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:i}", "type",
			 hc->type == CONFIG_HC_TCP ? "tcp" : "http", "path",
			 hc->path, "interval", iv, "timeout", to,
			 "expect_status", (int)hc->expect_status, "rise",
			 (int)hc->rise, "fall", (int)hc->fall);
}

const char *const config_up_tls_keys[CONFIG_UP_TLS_NKEYS + 1] = {
    "verify", "server_name", "ca", "cert", "key", NULL};

/* A path value into buf (CONFIG_PATH_MAX): absolute, "" when absent. */
static int config_up_tls_path(const struct config_value *v, char *buf,
			      struct errbuf *err)
{
	const char *s = "";

	if (config_hc_str(v, "", &s, err))
		return -EINVAL;
	if (*s && (s[0] != '/' || strlen(s) >= CONFIG_PATH_MAX)) {
		errbuf_set(err, "an absolute path of at most %d bytes",
			   CONFIG_PATH_MAX - 1);
		return -EINVAL;
	}
	for (size_t i = 0; s[i]; i++)
		if ((unsigned char)s[i] < ' ' || s[i] == 0x7f) {
			errbuf_set(err, "a control character in the path");
			return -EINVAL;
		}
	snprintf(buf, CONFIG_PATH_MAX, "%s", s);
	return 0;
}

int config_up_tls_of(const struct config_value v[CONFIG_UP_TLS_NKEYS],
		     struct config_up_tls *t, int *key, struct errbuf *err)
{
	const struct config_value *x;
	const char *sn = "";
	unsigned char ip[16];
	struct errbuf e;

	memset(t, 0, sizeof(*t));
	*key = CONFIG_UP_TLS_KEY_VERIFY;
	x = &v[CONFIG_UP_TLS_KEY_VERIFY];
	if (x->kind != CONFIG_VALUE_ABSENT && x->kind != CONFIG_VALUE_BOOL) {
		errbuf_set(err, "expected a boolean, found %s",
			   x->kind == CONFIG_VALUE_STRING ? "a string"
			   : x->kind == CONFIG_VALUE_INT  ? "an integer"
							  : x->text);
		return -EINVAL;
	}
	t->no_verify = x->kind == CONFIG_VALUE_BOOL && !x->b;
	*key = CONFIG_UP_TLS_KEY_SERVER_NAME;
	if (config_hc_str(&v[CONFIG_UP_TLS_KEY_SERVER_NAME], "", &sn, err))
		return -EINVAL;
	if (*sn) {
		/* a name as a domain is written (lowercase, no wildcard),
		 * or a numeric address */
		snprintf(t->server_name, sizeof(t->server_name), "%s", sn);
		errbuf_clear(&e);
		if (strlen(sn) > CONFIG_HOST_MAX ||
		    (inet_pton(AF_INET, sn, ip) != 1 &&
		     inet_pton(AF_INET6, sn, ip) != 1 &&
		     config_domain_check(t->server_name, false, &e) < 0)) {
			errbuf_set(err, "a host name or a numeric address%s%s",
				   e.msg[0] ? ": " : "", e.msg);
			return -EINVAL;
		}
	}
	*key = CONFIG_UP_TLS_KEY_CA;
	if (config_up_tls_path(&v[*key], t->ca, err))
		return -EINVAL;
	*key = CONFIG_UP_TLS_KEY_CERT;
	if (config_up_tls_path(&v[*key], t->cert, err))
		return -EINVAL;
	*key = CONFIG_UP_TLS_KEY_KEY;
	if (config_up_tls_path(&v[*key], t->key, err))
		return -EINVAL;
	if (!*t->cert != !*t->key) {
		*key = -1;
		errbuf_set(err, "cert and key go together (a client "
				"certificate and its key), or neither");
		return -EINVAL;
	}
	return 0;
}

int config_up_tls_json(const json_t *o, struct config_up_tls *t,
		       struct errbuf *err)
{
	struct config_value v[CONFIG_UP_TLS_NKEYS];
	char num[CONFIG_UP_TLS_NKEYS][24];
	int key = -1;

	memset(t, 0, sizeof(*t));
	if (config_json_values(o, config_up_tls_keys, CONFIG_UP_TLS_NKEYS, v,
			       num, err))
		return -EINVAL;
	if (config_up_tls_of(v, t, &key, err) == 0)
		return 0;
	memset(t, 0, sizeof(*t));
	if (key >= 0 && err) {
		struct errbuf e = *err;

		errbuf_set(err, "%s: %s", config_up_tls_keys[key], e.msg);
	}
	return -EINVAL;
}

json_t *config_up_tls_to_json(const struct config_up_tls *t)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if ((t->no_verify && json_object_set_new(o, "verify", json_false())) ||
	    (t->server_name[0] &&
	     json_object_set_new(o, "server_name",
				 json_string(t->server_name))) ||
	    (t->ca[0] && json_object_set_new(o, "ca", json_string(t->ca))) ||
	    (t->cert[0] &&
	     json_object_set_new(o, "cert", json_string(t->cert))) ||
	    (t->key[0] && json_object_set_new(o, "key", json_string(t->key)))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* This file must build without libconfig (config_check.h). */
#ifdef LIBCONFIG_VER_MAJOR
#error "config_check.c must not depend on libconfig"
#endif

int config_retry_on_parse(const char *s, unsigned *bit, struct errbuf *err)
{
	static const char *const names[] = {"connect", "reset", "502", "503",
					    "504"};
	size_t i;

	for (i = 0; i < CONFIG_NELEM(names); i++)
		if (strcmp(s, names[i]) == 0) {
			*bit = 1u << i;
			return 0;
		}
	errbuf_set(err, "\"%s\": expected connect, reset, 502, 503 or 504", s);
	return -EINVAL;
}

int config_percent_parse(const char *s, unsigned *pct, struct errbuf *err)
{
	unsigned v = 0;
	size_t i;

	for (i = 0; s[i] >= '0' && s[i] <= '9' && i < 4; i++)
		v = v * 10 + (unsigned)(s[i] - '0');
	if (i == 0 || strcmp(s + i, "%") != 0 || v > 100) {
		errbuf_set(err, "\"%s\": expected a percentage 0%%..100%%", s);
		return -EINVAL;
	}
	*pct = v;
	return 0;
}

int config_hedge_after_parse(const char *s, struct config_hedge *h,
			     struct errbuf *err)
{
	unsigned v = 0;
	uint64_t ms;
	size_t i;

	if (s[0] == 'p') {
		for (i = 1; s[i] >= '0' && s[i] <= '9' && i < 4; i++)
			v = v * 10 + (unsigned)(s[i] - '0');
		if (i == 1 || s[i] != '\0' || v < CONFIG_HEDGE_PCT_MIN ||
		    v > CONFIG_HEDGE_PCT_MAX) {
			errbuf_set(err,
				   "\"%s\": expected a percentile p%u..p%u or "
				   "a duration",
				   s, CONFIG_HEDGE_PCT_MIN,
				   CONFIG_HEDGE_PCT_MAX);
			return -EINVAL;
		}
		h->pct = v;
		h->after_ms = 0;
		return 0;
	}
	if (config_duration_parse(s, &ms, err) < 0)
		return -EINVAL;
	if (ms < CONFIG_HEDGE_AFTER_MIN_MS || ms > CONFIG_HEDGE_AFTER_MAX_MS) {
		errbuf_set(err, "\"%s\" is out of range %ums..%ums", s,
			   CONFIG_HEDGE_AFTER_MIN_MS,
			   CONFIG_HEDGE_AFTER_MAX_MS);
		return -EINVAL;
	}
	h->pct = 0;
	h->after_ms = ms;
	return 0;
}

/* ---- retry and circuit -----------------------------------------------------
 */

const char *const config_retry_keys[CONFIG_RETRY_NKEYS + 1] = {
    "on", "max", "budget", "backoff", NULL};
const char *const config_circuit_keys[CONFIG_CIRCUIT_NKEYS + 1] = {
    "errors", "window", "min_requests", "open_for", NULL};
const char *const config_hedge_keys[CONFIG_HEDGE_NKEYS + 1] = {"after", "max",
							       NULL};

/* A percentage value (config_percent_parse) within [min, 100], def when
 * absent. */
static int config_pct(const struct config_value *v, const char *def,
		      unsigned min, unsigned *out, struct errbuf *err)
{
	const char *s;

	if (config_hc_str(v, def, &s, err))
		return -EINVAL;
	if (config_percent_parse(s, out, err))
		return -EINVAL;
	if (*out < min) {
		errbuf_set(err,
			   "\"%s\": %u%% would open the circuit on any "
			   "request: expected %u%%..100%%",
			   s, *out, min);
		return -EINVAL;
	}
	return 0;
}

int config_retry_of(const struct config_value v[CONFIG_RETRY_NKEYS],
		    struct config_retry *rt, int *key, int *item,
		    struct errbuf *err)
{
	const struct config_value *on = &v[CONFIG_RETRY_KEY_ON];
	uint64_t n;
	unsigned bit;
	size_t i;

	memset(rt, 0, sizeof(*rt));
	*item = -1;
	*key = CONFIG_RETRY_KEY_ON;
	if (on->kind == CONFIG_VALUE_ABSENT) {
		rt->on = CONFIG_RETRY_ON_CONNECT | CONFIG_RETRY_ON_RESET |
			 CONFIG_RETRY_ON_502 | CONFIG_RETRY_ON_503 |
			 CONFIG_RETRY_ON_504;
	} else if (on->kind != CONFIG_VALUE_OTHER || !on->list) {
		errbuf_set(err, "expected a list [ ... ], found %s",
			   on->kind == CONFIG_VALUE_STRING ? "a string"
			   : on->kind == CONFIG_VALUE_INT  ? "an integer"
							   : on->text);
		goto bad;
	} else if (on->more_items) {
		errbuf_set(err, "more than %d items", CONFIG_VALUE_ITEMS_MAX);
		goto bad;
	} else {
		for (i = 0; i < on->n_items; i++) {
			*item = (int)i;
			if (!on->items[i]) {
				errbuf_set(err, "expected a string");
				goto bad;
			}
			if (config_retry_on_parse(on->items[i], &bit, err))
				goto bad;
			rt->on |= bit;
		}
		*item = -1;
	}
	*key = CONFIG_RETRY_KEY_MAX;
	if (config_hc_count(&v[*key], 2, 0, CONFIG_RETRY_MAX, &n, err))
		goto bad;
	rt->max = (unsigned)n;
	*key = CONFIG_RETRY_KEY_BUDGET;
	if (config_pct(&v[*key], "20%", 0, &rt->budget, err))
		goto bad;
	*key = CONFIG_RETRY_KEY_BACKOFF;
	if (config_hc_ms(&v[*key], 25, 1, CONFIG_RETRY_BACKOFF_MAX_MS,
			 &rt->backoff_ms, err))
		goto bad;
	rt->set = true;
	return 0;
bad:
	memset(rt, 0, sizeof(*rt));
	return -EINVAL;
}

int config_circuit_of(const struct config_value v[CONFIG_CIRCUIT_NKEYS],
		      struct config_circuit *cc, int *key, struct errbuf *err)
{
	memset(cc, 0, sizeof(*cc));
	*key = CONFIG_CIRCUIT_KEY_ERRORS;
	if (config_pct(&v[*key], "50%", 1, &cc->errors, err))
		goto bad;
	*key = CONFIG_CIRCUIT_KEY_WINDOW;
	if (config_hc_ms(&v[*key], 10000, CONFIG_CIRCUIT_WINDOW_MIN_MS,
			 CONFIG_CIRCUIT_WINDOW_MAX_MS, &cc->window_ms, err))
		goto bad;
	*key = CONFIG_CIRCUIT_KEY_MIN_REQUESTS;
	if (config_hc_count(&v[*key], 20, 1, CONFIG_CIRCUIT_MIN_REQUESTS_MAX,
			    &cc->min_requests, err))
		goto bad;
	*key = CONFIG_CIRCUIT_KEY_OPEN_FOR;
	if (config_hc_ms(&v[*key], 5000, CONFIG_CIRCUIT_OPEN_FOR_MIN_MS,
			 CONFIG_CIRCUIT_OPEN_FOR_MAX_MS, &cc->open_for_ms, err))
		goto bad;
	cc->set = true;
	return 0;
bad:
	memset(cc, 0, sizeof(*cc));
	return -EINVAL;
}

int config_hedge_of(const struct config_value v[CONFIG_HEDGE_NKEYS],
		    struct config_hedge *h, int *key, struct errbuf *err)
{
	const char *after;
	uint64_t n;

	memset(h, 0, sizeof(*h));
	*key = CONFIG_HEDGE_KEY_AFTER;
	if (config_hc_str(&v[*key], "p95", &after, err) ||
	    config_hedge_after_parse(after, h, err))
		goto bad;
	*key = CONFIG_HEDGE_KEY_MAX;
	if (config_hc_count(&v[*key], 1, 1, CONFIG_HEDGE_MAX, &n, err))
		goto bad;
	h->max = (unsigned)n;
	h->set = true;
	return 0;
bad:
	memset(h, 0, sizeof(*h));
	return -EINVAL;
}

int config_retry_json(const json_t *o, struct config_retry *rt,
		      struct errbuf *err)
{
	struct config_value v[CONFIG_RETRY_NKEYS];
	char num[CONFIG_RETRY_NKEYS][24];
	int key = -1, item = -1;

	memset(rt, 0, sizeof(*rt));
	if (config_json_values(o, config_retry_keys, CONFIG_RETRY_NKEYS, v, num,
			       err))
		return -EINVAL;
	if (config_retry_of(v, rt, &key, &item, err) == 0)
		return 0;
	if (err) { /* NULL: a snapshot's value, no words */
		struct errbuf e = *err;

		if (item >= 0)
			errbuf_set(err, "%s[%d]: %s", config_retry_keys[key],
				   item, e.msg);
		else
			errbuf_set(err, "%s: %s", config_retry_keys[key],
				   e.msg);
	}
	return -EINVAL;
}

int config_circuit_json(const json_t *o, struct config_circuit *cc,
			struct errbuf *err)
{
	struct config_value v[CONFIG_CIRCUIT_NKEYS];
	char num[CONFIG_CIRCUIT_NKEYS][24];
	int key = -1;

	memset(cc, 0, sizeof(*cc));
	if (config_json_values(o, config_circuit_keys, CONFIG_CIRCUIT_NKEYS, v,
			       num, err))
		return -EINVAL;
	if (config_circuit_of(v, cc, &key, err) == 0)
		return 0;
	if (err) {
		struct errbuf e = *err;

		errbuf_set(err, "%s: %s", config_circuit_keys[key], e.msg);
	}
	return -EINVAL;
}

int config_hedge_json(const json_t *o, struct config_hedge *h,
		      struct errbuf *err)
{
	struct config_value v[CONFIG_HEDGE_NKEYS];
	char num[CONFIG_HEDGE_NKEYS][24];
	int key = -1;

	memset(h, 0, sizeof(*h));
	if (config_json_values(o, config_hedge_keys, CONFIG_HEDGE_NKEYS, v, num,
			       err))
		return -EINVAL;
	if (config_hedge_of(v, h, &key, err) == 0)
		return 0;
	if (err) {
		struct errbuf e = *err;

		errbuf_set(err, "%s: %s", config_hedge_keys[key], e.msg);
	}
	return -EINVAL;
}

json_t *config_retry_to_json(const struct config_retry *rt)
{
	static const char *const names[] = {"connect", "reset", "502", "503",
					    "504"};
	json_t *on = json_array();
	char budget[8], backoff[32];
	size_t i;

	if (!on)
		return NULL;
	for (i = 0; i < CONFIG_NELEM(names); i++)
		if ((rt->on & (1u << i)) &&
		    json_array_append_new(on, json_string(names[i]))) {
			json_decref(on);
			return NULL;
		}
	snprintf(budget, sizeof(budget), "%u%%", rt->budget);
	snprintf(backoff, sizeof(backoff), "%llums",
		 (unsigned long long)rt->backoff_ms);
	return json_pack("{s:o, s:i, s:s, s:s}", "on", on, "max", (int)rt->max,
			 "budget", budget, "backoff", backoff);
}

json_t *config_circuit_to_json(const struct config_circuit *cc)
{
	char errors[8], window[32], open_for[32];

	snprintf(errors, sizeof(errors), "%u%%", cc->errors);
	snprintf(window, sizeof(window), "%llums",
		 (unsigned long long)cc->window_ms);
	snprintf(open_for, sizeof(open_for), "%llums",
		 (unsigned long long)cc->open_for_ms);
	return json_pack("{s:s, s:s, s:I, s:s}", "errors", errors, "window",
			 window, "min_requests", (json_int_t)cc->min_requests,
			 "open_for", open_for);
}

json_t *config_hedge_to_json(const struct config_hedge *h)
{
	char after[32];

	if (h->pct)
		snprintf(after, sizeof(after), "p%u", h->pct);
	else
		snprintf(after, sizeof(after), "%llums",
			 (unsigned long long)h->after_ms);
	return json_pack("{s:s, s:i}", "after", after, "max", (int)h->max);
}
