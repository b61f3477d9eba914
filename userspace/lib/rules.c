/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rules.c - the rule list: ids, expiry, longest-prefix verdicts.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "rules.h"
#include "utf8.h"

void rules_free(struct rules *r)
{
	if (!r)
		return;
	free(r->v);
	r->v = NULL;
	r->n = 0;
	r->cap = 0;
}

const char *rules_action_name(uint8_t action)
{
	switch (action) {
	case EDGE_ACT_BLOCK:
		return "block";
	case EDGE_ACT_ALLOW:
		return "allow";
	default:
		return "?";
	}
}

int rules_action_parse(const char *s, uint8_t *action)
{
	if (s && strcmp(s, "block") == 0)
		*action = EDGE_ACT_BLOCK;
	else if (s && strcmp(s, "allow") == 0)
		*action = EDGE_ACT_ALLOW;
	else
		return -EINVAL;
	return 0;
}

int rules_comment_check(const char *s, struct errbuf *err)
{
	struct errbuf sub = {""};
	size_t n;

	if (!s)
		return 0;
	n = strlen(s);
	if (n > RULE_COMMENT_MAX) {
		errbuf_set(err, "comment is %zu bytes long (max %d)", n,
			   RULE_COMMENT_MAX);
		return -EINVAL;
	}
	if (utf8_check_text(s, n, &sub)) {
		errbuf_set(err, "comment has %s", sub.msg);
		return -EINVAL;
	}
	return 0;
}

struct rule *rules_find(const struct rules *r, const struct cidr *c)
{
	size_t i;

	for (i = 0; i < r->n; i++)
		if (cidr_equal(&r->v[i].cidr, c))
			return &r->v[i];
	return NULL;
}

bool rules_expired(const struct rule *x, int64_t now)
{
	return x->expires_at != 0 && x->expires_at <= now;
}

static int rules_grow(struct rules *r)
{
	struct rule *nv;
	size_t cap;

	if (r->n < r->cap)
		return 0;
	cap = r->cap ? r->cap * 2 : 16;
	nv = realloc(r->v, cap * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	r->v = nv;
	r->cap = cap;
	return 0;
}

_Static_assert(EDGE_LOCAL_RULES_MAX % 64 == 0, "ids in 64-bit words");

static int rules_id_alloc(const struct rules *r, uint32_t *id)
{
	/* a bit per id, on the stack: this runs once per rule added, and
	 * a project of the database's adds each of its rules (a heap
	 * block here cost a page of fresh memory per rule under ASan) */
	uint64_t used[EDGE_LOCAL_RULES_MAX / 64];
	uint32_t i, w;
	size_t k;

	/* the host's own rules take ids below EDGE_LOCAL_RULES_MAX; the
	 * database's (edged's) the rest */
	if (r->n >= EDGE_LOCAL_RULES_MAX)
		return -ENOSPC;
	memset(used, 0, sizeof(used));
	for (k = 0; k < r->n; k++)
		if (r->v[k].id < EDGE_LOCAL_RULES_MAX)
			used[r->v[k].id / 64] |= 1ull << (r->v[k].id % 64);
	for (w = 0; w < EDGE_LOCAL_RULES_MAX / 64 && used[w] == UINT64_MAX; w++)
		;
	if (w == EDGE_LOCAL_RULES_MAX / 64)
		return -ENOSPC;
	for (i = 0; used[w] & (1ull << i); i++)
		;
	*id = w * 64 + i;
	return 0;
}

int rules_set(struct rules *r, const struct rule *x, bool *created,
	      uint32_t *id)
{
	struct rule *cur = rules_find(r, &x->cidr);
	uint32_t nid;
	int ret;

	if (cur) {
		nid = cur->id;
		*cur = *x;
		cur->id = nid;
		if (created)
			*created = false;
		if (id)
			*id = nid;
		return 0;
	}
	ret = rules_id_alloc(r, &nid);
	if (ret)
		return ret;
	ret = rules_grow(r);
	if (ret)
		return ret;
	r->v[r->n] = *x;
	r->v[r->n].id = nid;
	r->n++;
	if (created)
		*created = true;
	if (id)
		*id = nid;
	return 0;
}

int rules_add_loaded(struct rules *r, const struct rule *x)
{
	int ret;

	if (x->id >= EDGE_MAX_RULES)
		return -ERANGE;
	if (r->n >= EDGE_MAX_RULES)
		return -ENOSPC;
	ret = rules_grow(r);
	if (ret)
		return ret;
	r->v[r->n++] = *x;
	return 0;
}

int rules_del(struct rules *r, const struct cidr *c, struct rule *removed)
{
	struct rule *x = rules_find(r, c);

	if (!x)
		return -ENOENT;
	if (removed)
		*removed = *x;
	*x = r->v[r->n - 1];
	r->n--;
	return 0;
}

int rules_prune(struct rules *r, int64_t now, struct rules *removed)
{
	size_t i, kept = 0, nexp = 0;
	int ret;

	for (i = 0; i < r->n; i++)
		nexp += rules_expired(&r->v[i], now);
	if (nexp == 0)
		return 0;
	if (removed) {
		while (removed->cap < removed->n + nexp) {
			size_t want = removed->n + nexp;
			struct rule *nv =
			    realloc(removed->v, want * sizeof(*nv));

			if (!nv)
				return -ENOMEM;
			removed->v = nv;
			removed->cap = want;
		}
	}
	for (i = 0; i < r->n; i++) {
		if (rules_expired(&r->v[i], now)) {
			if (removed)
				removed->v[removed->n++] = r->v[i];
			continue;
		}
		r->v[kept++] = r->v[i];
	}
	r->n = kept;
	ret = (int)nexp;
	return ret;
}

static int rules_cmp(const void *pa, const void *pb)
{
	const struct rule *a = pa, *b = pb;
	int c;

	if (a->cidr.family != b->cidr.family)
		return a->cidr.family == AF_INET ? -1 : 1;
	c = memcmp(a->cidr.addr, b->cidr.addr, sizeof(a->cidr.addr));
	if (c)
		return c;
	return (int)a->cidr.prefixlen - (int)b->cidr.prefixlen;
}

void rules_sort(struct rules *r)
{
	if (r->n > 1)
		qsort(r->v, r->n, sizeof(r->v[0]), rules_cmp);
}

int rules_validate(struct rules *r)
{
	unsigned char *used;
	size_t i;
	int ret = 0;

	used = calloc(EDGE_MAX_RULES, 1);
	if (!used)
		return -ENOMEM;
	for (i = 0; i < r->n && !ret; i++) {
		if (r->v[i].id >= EDGE_MAX_RULES || used[r->v[i].id])
			ret = -EEXIST;
		else
			used[r->v[i].id] = 1;
	}
	free(used);
	if (ret)
		return ret;
	rules_sort(r);
	for (i = 1; i < r->n; i++)
		if (cidr_equal(&r->v[i - 1].cidr, &r->v[i].cidr))
			return -EEXIST;
	return 0;
}

const struct rule *rules_find_sorted(const struct rules *r,
				     const struct cidr *c)
{
	struct rule key;

	if (!r->n)
		return NULL;
	memset(&key, 0, sizeof(key));
	key.cidr = *c;
	return bsearch(&key, r->v, r->n, sizeof(r->v[0]), rules_cmp);
}

const struct rule *rules_match(const struct rules *r, const struct cidr *a,
			       int64_t now)
{
	const struct rule *best = NULL;
	size_t i;

	for (i = 0; i < r->n; i++) {
		const struct rule *x = &r->v[i];

		if (rules_expired(x, now) || !cidr_contains(&x->cidr, a))
			continue;
		if (!best || x->cidr.prefixlen > best->cidr.prefixlen)
			best = x;
	}
	return best;
}

enum rules_verdict rules_verdict(const struct rules *r, uint32_t policy,
				 const struct policy_ports *ports,
				 const struct cidr *a, unsigned dport,
				 int64_t now, const struct rule **by)
{
	const struct rule *m = rules_match(r, a, now);

	if (by)
		*by = m;
	if (m && m->action == EDGE_ACT_BLOCK)
		return RULES_DROP_RULE;
	if (policy == EDGE_POLICY_ALLOWLIST &&
	    policy_port_guarded(ports, dport) &&
	    !(m && m->action == EDGE_ACT_ALLOW))
		return RULES_DROP_POLICY;
	return RULES_PASS;
}

/* Next space-separated field of s at *pos, into buf. */
static int rules_ssh_field(const char *s, size_t *pos, char *buf, size_t len)
{
	size_t i = *pos, n = 0;

	while (s[i] == ' ')
		i++;
	while (s[i] && s[i] != ' ') {
		if (n + 1 >= len)
			return -EINVAL;
		buf[n++] = s[i++];
	}
	buf[n] = '\0';
	*pos = i;
	return n ? 0 : -EINVAL;
}

static int rules_ssh_port(const char *s, unsigned *port)
{
	unsigned long v;
	char *end;

	if (!isdigit((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < 1 || v > 65535)
		return -EINVAL;
	*port = (unsigned)v;
	return 0;
}

int rules_ssh_parse(const char *s, struct rules_ssh *out)
{
	char f[4][CIDR_INPUT_MAX + 1];
	unsigned cport;
	size_t pos = 0;
	int i;

	if (!s || !*s)
		return -ENOENT;
	for (i = 0; i < 4; i++)
		if (rules_ssh_field(s, &pos, f[i], sizeof(f[i])))
			return -EINVAL;
	while (s[pos] == ' ')
		pos++;
	if (s[pos])
		return -EINVAL;
	if (cidr_parse_addr(f[0], &out->client, NULL))
		return -EINVAL;
	if (rules_ssh_port(f[1], &cport) ||
	    rules_ssh_port(f[3], &out->server_port))
		return -EINVAL;
	return 0;
}

bool rules_ssh_cut_off(const struct rules *r, uint32_t policy,
		       const struct policy_ports *ports,
		       const struct rules_ssh *ssh, int64_t now,
		       struct errbuf *why)
{
	const struct rule *by = NULL;
	char a[CIDR_STR_MAX], b[CIDR_STR_MAX];
	enum rules_verdict v;

	v = rules_verdict(r, policy, ports, &ssh->client, ssh->server_port, now,
			  &by);
	cidr_format_addr(&ssh->client, a, sizeof(a));
	switch (v) {
	case RULES_DROP_RULE:
		errbuf_set(why, "your SSH client %s would be blocked by %s", a,
			   cidr_format(&by->cidr, b, sizeof(b)));
		return true;
	case RULES_DROP_POLICY:
		errbuf_set(why,
			   "your SSH client %s would be cut off: port %u is "
			   "guarded by the allowlist and no allow rule "
			   "covers %s",
			   a, ssh->server_port, a);
		return true;
	case RULES_PASS:
		break;
	}
	return false;
}
