/* SPDX-License-Identifier: BSD-2-Clause */
/* test_rules.c - rule list, ids, expiry, longest-prefix verdicts, the SSH
 * lockout check, and the state file (round trip, corrupt files rejected). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rules.h"
#include "state.h"
#include "unit.h"
#include "utf8.h"

#define NOW 1700000000LL

static struct rule mk(const char *cidr, uint8_t action, int64_t expires_at)
{
	struct rule x;

	memset(&x, 0, sizeof(x));
	ck_assert_int_eq(cidr_parse(cidr, &x.cidr, NULL, NULL), 0);
	x.action = action;
	x.expires_at = expires_at;
	return x;
}

static void add(struct rules *r, const char *cidr, uint8_t action,
		int64_t expires_at)
{
	struct rule x = mk(cidr, action, expires_at);

	ck_assert_int_eq(rules_set(r, &x, NULL, NULL), 0);
}

static struct cidr addr(const char *s)
{
	struct cidr c;

	ck_assert_int_eq(cidr_parse_addr(s, &c, NULL), 0);
	return c;
}

static struct policy_ports ports(const char *s)
{
	struct policy_ports p;

	ck_assert_int_eq(policy_ports_parse(s, &p, NULL), 0);
	return p;
}

/* One verdict case: source, port, policy, expected verdict. */
struct vcase {
	const char *src;
	unsigned port;
	uint32_t policy;
	enum rules_verdict want;
};

static const struct vcase vcases[] = {
    /* blocklist: longest prefix across block and allow */
    {"10.1.2.3", 80, EDGE_POLICY_BLOCKLIST, RULES_PASS},
    {"10.1.2.4", 80, EDGE_POLICY_BLOCKLIST, RULES_DROP_RULE},
    {"10.9.9.9", 22, EDGE_POLICY_BLOCKLIST, RULES_DROP_RULE},
    {"10.2.0.1", 80, EDGE_POLICY_BLOCKLIST, RULES_PASS},      /* allow /16 */
    {"10.2.3.1", 80, EDGE_POLICY_BLOCKLIST, RULES_DROP_RULE}, /* block /24 */
    {"11.0.0.1", 80, EDGE_POLICY_BLOCKLIST, RULES_PASS},
    {"192.0.2.1", 80, EDGE_POLICY_BLOCKLIST, RULES_PASS}, /* expired */
    /* allowlist: guarded ports need an allow rule */
    {"11.0.0.1", 80, EDGE_POLICY_ALLOWLIST, RULES_DROP_POLICY},
    {"11.0.0.1", 22, EDGE_POLICY_ALLOWLIST, RULES_PASS},
    {"10.1.2.3", 443, EDGE_POLICY_ALLOWLIST, RULES_PASS},
    {"10.1.2.4", 443, EDGE_POLICY_ALLOWLIST, RULES_DROP_RULE},
    {"10.1.2.4", 22, EDGE_POLICY_ALLOWLIST, RULES_DROP_RULE},
    {"10.2.0.1", 443, EDGE_POLICY_ALLOWLIST, RULES_PASS},
    {"198.51.100.1", 80, EDGE_POLICY_ALLOWLIST, RULES_DROP_POLICY},
    /* IPv6 */
    {"2001:db8::1", 80, EDGE_POLICY_BLOCKLIST, RULES_DROP_RULE},
    {"2001:db8:1::1", 80, EDGE_POLICY_BLOCKLIST, RULES_PASS},
    {"2001:db9::1", 80, EDGE_POLICY_ALLOWLIST, RULES_DROP_POLICY},
    {"2001:db8:1::1", 80, EDGE_POLICY_ALLOWLIST, RULES_PASS},
    /* an IPv4-mapped source is the IPv4 address */
    {"::ffff:10.1.2.3", 80, EDGE_POLICY_ALLOWLIST, RULES_PASS},
};

static void vrules(struct rules *r)
{
	memset(r, 0, sizeof(*r));
	add(r, "10.0.0.0/8", EDGE_ACT_BLOCK, 0);
	add(r, "10.1.2.3/32", EDGE_ACT_ALLOW, 0);
	add(r, "10.2.0.0/16", EDGE_ACT_ALLOW, NOW + 60);
	add(r, "10.2.3.0/24", EDGE_ACT_BLOCK, 0);
	add(r, "192.0.2.0/24", EDGE_ACT_BLOCK, NOW - 1); /* expired */
	add(r, "198.51.100.0/24", EDGE_ACT_ALLOW, NOW);	 /* expires now */
	add(r, "2001:db8::/32", EDGE_ACT_BLOCK, 0);
	add(r, "2001:db8:1::/48", EDGE_ACT_ALLOW, 0);
}

START_TEST(test_verdict)
{
	const struct vcase *t = &vcases[_i];
	struct policy_ports p = ports("80,443");
	struct rules r;
	struct cidr a = addr(t->src);

	vrules(&r);
	ck_assert_msg(
	    rules_verdict(&r, t->policy, &p, &a, t->port, NOW, NULL) == t->want,
	    "%s:%u policy %u", t->src, t->port, t->policy);
	rules_free(&r);
}
END_TEST

START_TEST(test_match_skips_expired)
{
	struct rules r = {0};
	const struct rule *m;
	struct cidr a = addr("10.1.2.3");

	add(&r, "10.0.0.0/8", EDGE_ACT_BLOCK, 0);
	add(&r, "10.1.0.0/16", EDGE_ACT_ALLOW, NOW + 10);
	m = rules_match(&r, &a, NOW);
	ck_assert_uint_eq(m->cidr.prefixlen, 16);
	m = rules_match(&r, &a, NOW + 10); /* the /16 has expired: the /8 */
	ck_assert_uint_eq(m->cidr.prefixlen, 8);
	rules_free(&r);
}
END_TEST

START_TEST(test_ids)
{
	struct rules r = {0};
	struct rule x = mk("10.0.0.0/8", EDGE_ACT_BLOCK, 0);
	struct cidr c;
	bool created;
	uint32_t id;

	ck_assert_int_eq(rules_set(&r, &x, &created, &id), 0);
	ck_assert(created);
	ck_assert_uint_eq(id, 0);
	x = mk("10.1.0.0/16", EDGE_ACT_ALLOW, 0);
	ck_assert_int_eq(rules_set(&r, &x, &created, &id), 0);
	ck_assert_uint_eq(id, 1);
	x = mk("10.2.0.0/16", EDGE_ACT_ALLOW, 0);
	ck_assert_int_eq(rules_set(&r, &x, &created, &id), 0);
	ck_assert_uint_eq(id, 2);
	/* replacing keeps the id and says so */
	x = mk("10.1.0.0/16", EDGE_ACT_BLOCK, NOW + 5);
	snprintf(x.comment, sizeof(x.comment), "changed");
	ck_assert_int_eq(rules_set(&r, &x, &created, &id), 0);
	ck_assert(!created);
	ck_assert_uint_eq(id, 1);
	ck_assert_uint_eq(r.n, 3);
	ck_assert_uint_eq(rules_find(&r, &x.cidr)->action, EDGE_ACT_BLOCK);
	ck_assert_str_eq(rules_find(&r, &x.cidr)->comment, "changed");
	/* the smallest free id is reused */
	ck_assert_int_eq(cidr_parse("10.0.0.0/8", &c, NULL, NULL), 0);
	ck_assert_int_eq(rules_del(&r, &c, NULL), 0);
	ck_assert_int_eq(rules_del(&r, &c, NULL), -ENOENT);
	x = mk("172.16.0.0/12", EDGE_ACT_BLOCK, 0);
	ck_assert_int_eq(rules_set(&r, &x, &created, &id), 0);
	ck_assert_uint_eq(id, 0);
	rules_free(&r);
}
END_TEST

START_TEST(test_full)
{
	struct rules r = {0};
	struct rule x;
	uint32_t i, id;

	memset(&x, 0, sizeof(x));
	x.cidr.family = AF_INET6;
	x.cidr.prefixlen = 128;
	x.action = EDGE_ACT_BLOCK;
	for (i = 0; i < EDGE_MAX_RULES; i++) {
		x.cidr.addr[12] = (uint8_t)(i >> 8);
		x.cidr.addr[13] = (uint8_t)i;
		x.id = EDGE_MAX_RULES - 1 - i;
		ck_assert_int_eq(rules_add_loaded(&r, &x), 0);
	}
	ck_assert_int_eq(rules_validate(&r), 0);
	ck_assert_int_eq(rules_add_loaded(&r, &x), -ENOSPC);
	x.cidr.addr[0] = 0x20;
	ck_assert_int_eq(rules_set(&r, &x, NULL, &id), -ENOSPC);
	ck_assert_ptr_nonnull(rules_find_sorted(&r, &r.v[100].cidr));
	ck_assert_ptr_null(rules_find_sorted(&r, &x.cidr));
	rules_free(&r);
}
END_TEST

START_TEST(test_validate_duplicates)
{
	struct rules r = {0};
	struct rule x = mk("10.0.0.0/8", EDGE_ACT_BLOCK, 0);

	x.id = 1;
	ck_assert_int_eq(rules_add_loaded(&r, &x), 0);
	x = mk("11.0.0.0/8", EDGE_ACT_BLOCK, 0);
	x.id = 1;
	ck_assert_int_eq(rules_add_loaded(&r, &x), 0);
	ck_assert_int_eq(rules_validate(&r), -EEXIST); /* same id */
	r.v[1].id = 2;
	ck_assert_int_eq(rules_validate(&r), 0);
	x = mk("10.0.0.0/8", EDGE_ACT_ALLOW, 0);
	x.id = 3;
	ck_assert_int_eq(rules_add_loaded(&r, &x), 0);
	ck_assert_int_eq(rules_validate(&r), -EEXIST); /* same prefix */
	x.id = EDGE_MAX_RULES;
	ck_assert_int_eq(rules_add_loaded(&r, &x), -ERANGE);
	rules_free(&r);
}
END_TEST

START_TEST(test_prune)
{
	struct rules r = {0}, gone = {0};

	add(&r, "10.0.0.0/8", EDGE_ACT_BLOCK, NOW - 1);
	add(&r, "10.1.0.0/16", EDGE_ACT_BLOCK, NOW + 100);
	add(&r, "10.2.0.0/16", EDGE_ACT_BLOCK, 0);
	add(&r, "10.3.0.0/16", EDGE_ACT_BLOCK, NOW);
	ck_assert_int_eq(rules_prune(&r, NOW, &gone), 2);
	ck_assert_uint_eq(r.n, 2);
	ck_assert_uint_eq(gone.n, 2);
	ck_assert_int_eq(rules_prune(&r, NOW, NULL), 0);
	ck_assert_int_eq(rules_prune(&r, NOW + 100, NULL), 1);
	ck_assert_uint_eq(r.n, 1);
	rules_free(&r);
	rules_free(&gone);
	rules_free(NULL);
}
END_TEST

START_TEST(test_comment)
{
	char long_c[RULE_COMMENT_MAX + 2];
	struct errbuf err = {""};

	ck_assert_int_eq(
	    rules_comment_check("abuse from AS64500 — ticket #12", &err), 0);
	memset(long_c, 'a', sizeof(long_c) - 1);
	long_c[sizeof(long_c) - 1] = '\0';
	ck_assert_int_eq(rules_comment_check(long_c, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "max 128"));
	long_c[RULE_COMMENT_MAX] = '\0';
	ck_assert_int_eq(rules_comment_check(long_c, &err), 0);
	ck_assert_int_eq(rules_comment_check("a\nb", &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "control"));
	ck_assert_int_eq(rules_comment_check("a\x7f", &err), -EINVAL);
	ck_assert_int_eq(rules_comment_check("tab\there", &err), -EINVAL);
	/* what the issue hit: refused, saying why and where */
	ck_assert_int_eq(rules_comment_check("bad\xff\xfe", &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "invalid UTF-8 at byte 4") != NULL, "%s",
		      err.msg);
	ck_assert_ptr_null(strstr(err.msg, "memory"));
}
END_TEST

/* One UTF-8 case: the text, whether rules_comment_check accepts it, and
 * for a refusal a fragment of the message (which names the byte). */
struct ucase {
	const char *s;
	bool ok;
	const char *frag;
};

static const struct ucase ucases[] = {
    /* well-formed: 1 to 4 bytes, the edges of each length */
    {"plain ascii ~", true, NULL},
    {"caf\xc3\xa9 \xe2\x9c\x93", true, NULL}, /* café ✓ */
    {"\xc2\xa0 no-break space", true, NULL},  /* U+00A0, after C1 */
    {"\xdf\xbf", true, NULL},		      /* U+07FF */
    {"\xe0\xa0\x80", true, NULL},	      /* U+0800 */
    {"\xed\x9f\xbf", true, NULL},	      /* U+D7FF */
    {"\xee\x80\x80", true, NULL},	      /* U+E000 */
    {"\xef\xbf\xbd", true, NULL},	      /* U+FFFD */
    {"\xf0\x90\x80\x80", true, NULL},	      /* U+10000 */
    {"\xf0\x9f\x98\x80 emoji", true, NULL},   /* U+1F600 */
    {"\xf4\x8f\xbf\xbf", true, NULL},	      /* U+10FFFF */
    /* bytes that never appear */
    {"bad\xff\xfe", false, "byte 4: 0xff never appears"},
    {"\xfe", false, "byte 1: 0xfe never appears"},
    {"ab\xf5\x80\x80\x80", false, "byte 3: 0xf5 never appears"},
    /* a continuation byte on its own */
    {"a\x80", false, "byte 2: 0x80 is a continuation byte"},
    {"\xc3\xa9\xa9", false, "byte 3: 0xa9 is a continuation byte"},
    /* overlong forms of '/' and of U+07FF, U+FFFF */
    {"\xc0\xaf", false, "byte 1: 0xc0 starts an overlong"},
    {"x\xc1\xbf", false, "byte 2: 0xc1 starts an overlong"},
    {"\xe0\x80\xaf", false, "byte 1: an overlong encoding"},
    {"\xe0\x9f\xbf", false, "byte 1: an overlong encoding"},
    {"\xf0\x80\x80\xaf", false, "byte 1: an overlong encoding"},
    {"\xf0\x8f\xbf\xbf", false, "byte 1: an overlong encoding"},
    /* UTF-16 surrogates */
    {"\xed\xa0\x80", false, "byte 1: a UTF-16 surrogate"},
    {"ok \xed\xbf\xbf", false, "byte 4: a UTF-16 surrogate"},
    /* above U+10FFFF */
    {"\xf4\x90\x80\x80", false, "byte 1: a code point above U+10FFFF"},
    /* truncated: at the end, and cut by another character */
    {"caf\xc3", false,
     "byte 4: truncated sequence (0xc3 needs 1 "
     "continuation byte, the text ends first)"},
    {"\xe2\x9c", false, "byte 1: truncated"},
    {"\xf0\x9f\x98", false, "byte 1: truncated"},
    {"\xe2\x9cz", false,
     "byte 1: truncated sequence (0xe2 needs 2 continuation bytes, byte 3 "
     "is 0x7a)"},
    {"\xc3\xc3\xa9", false, "byte 1: truncated"},
    /* control characters: C0, DEL, C1 */
    {"a\x1b[31m", false, "control character (U+001B) at byte 2"},
    {"\x01", false, "control character (U+0001) at byte 1"},
    {"del\x7f", false, "control character (U+007F) at byte 4"},
    {"ab\xc2\x85", false, "control character (U+0085) at byte 3"},
    {"\xc2\x9b[2J", false, "control character (U+009B) at byte 1"},
};

START_TEST(test_comment_utf8)
{
	const struct ucase *u = &ucases[_i];
	struct errbuf err = {""};
	int ret = rules_comment_check(u->s, &err);

	if (u->ok) {
		ck_assert_msg(ret == 0, "case %d refused: %s", _i, err.msg);
		return;
	}
	ck_assert_msg(ret == -EINVAL, "case %d accepted", _i);
	ck_assert_msg(strstr(err.msg, u->frag) != NULL,
		      "case %d: '%s' lacks '%s'", _i, err.msg, u->frag);
}
END_TEST

START_TEST(test_utf8_check)
{
	struct errbuf err = {""};
	size_t bad = 99;

	ck_assert_int_eq(utf8_check("", 0, &bad, &err), 0);
	/* the length is what counts, not a terminator */
	ck_assert_int_eq(utf8_check("\xe2\x9c\x93", 2, &bad, &err), -EILSEQ);
	ck_assert_uint_eq(bad, 0);
	ck_assert_int_eq(utf8_check("ab\xff", 3, &bad, &err), -EILSEQ);
	ck_assert_uint_eq(bad, 2);
	ck_assert_int_eq(utf8_check("ab\xff", 2, NULL, NULL), 0);
	/* utf8_check allows control characters, utf8_check_text does not */
	ck_assert_int_eq(utf8_check("a\tb", 3, NULL, &err), 0);
	ck_assert_int_eq(utf8_check_text("a\tb", 3, &err), -EINVAL);
	ck_assert_int_eq(utf8_check_text("a\xff", 2, &err), -EILSEQ);
}
END_TEST

START_TEST(test_ssh_parse)
{
	struct rules_ssh s;

	ck_assert_int_eq(rules_ssh_parse("192.0.2.10 51234 192.0.2.1 22", &s),
			 0);
	ck_assert_uint_eq(s.server_port, 22);
	ck_assert_uint_eq(s.client.prefixlen, 32);
	ck_assert_int_eq(
	    rules_ssh_parse("2001:db8::10 51234 2001:db8::1 2222", &s), 0);
	ck_assert_uint_eq(s.server_port, 2222);
	ck_assert_int_eq(
	    rules_ssh_parse("::ffff:192.0.2.10 1 ::ffff:192.0.2.1 22", &s), 0);
	ck_assert_uint_eq(s.client.family, AF_INET);
	ck_assert_int_eq(rules_ssh_parse(NULL, &s), -ENOENT);
	ck_assert_int_eq(rules_ssh_parse("", &s), -ENOENT);
	ck_assert_int_eq(rules_ssh_parse("192.0.2.10 51234 192.0.2.1", &s),
			 -EINVAL);
	ck_assert_int_eq(rules_ssh_parse("192.0.2.10 51234 192.0.2.1 22 x", &s),
			 -EINVAL);
	ck_assert_int_eq(rules_ssh_parse("bogus 1 192.0.2.1 22", &s), -EINVAL);
	ck_assert_int_eq(rules_ssh_parse("192.0.2.10 1 192.0.2.1 0", &s),
			 -EINVAL);
	ck_assert_int_eq(rules_ssh_parse("192.0.2.10 1 192.0.2.1 65536", &s),
			 -EINVAL);
	ck_assert_int_eq(rules_ssh_parse("192.0.2.10/24 1 192.0.2.1 22", &s),
			 -EINVAL);
}
END_TEST

START_TEST(test_ssh_cut_off)
{
	struct policy_ports web = ports("80,443"),
			    with_ssh = ports("22,80,443");
	struct errbuf why = {""};
	struct rules r = {0};
	struct rules_ssh s;

	ck_assert_int_eq(rules_ssh_parse("192.0.2.10 51234 192.0.2.1 22", &s),
			 0);
	/* nothing at all: fine either way when 22 is not guarded */
	ck_assert(
	    !rules_ssh_cut_off(&r, EDGE_POLICY_BLOCKLIST, &web, &s, NOW, NULL));
	ck_assert(
	    !rules_ssh_cut_off(&r, EDGE_POLICY_ALLOWLIST, &web, &s, NOW, NULL));
	/* allowlist guarding 22 without an allow rule cuts it off */
	ck_assert(rules_ssh_cut_off(&r, EDGE_POLICY_ALLOWLIST, &with_ssh, &s,
				    NOW, &why));
	ck_assert_ptr_nonnull(strstr(why.msg, "port 22 is guarded"));
	/* an allow rule covering the client keeps it */
	add(&r, "192.0.2.0/24", EDGE_ACT_ALLOW, NOW + 60);
	ck_assert(!rules_ssh_cut_off(&r, EDGE_POLICY_ALLOWLIST, &with_ssh, &s,
				     NOW, NULL));
	/* ... until it expires */
	ck_assert(rules_ssh_cut_off(&r, EDGE_POLICY_ALLOWLIST, &with_ssh, &s,
				    NOW + 60, NULL));
	/* a longer block rule wins over the allow */
	add(&r, "192.0.2.8/29", EDGE_ACT_BLOCK, 0);
	ck_assert(
	    rules_ssh_cut_off(&r, EDGE_POLICY_BLOCKLIST, &web, &s, NOW, &why));
	ck_assert_ptr_nonnull(strstr(why.msg, "blocked by 192.0.2.8/29"));
	/* and a longer allow wins over that block */
	add(&r, "192.0.2.10/32", EDGE_ACT_ALLOW, 0);
	ck_assert(!rules_ssh_cut_off(&r, EDGE_POLICY_ALLOWLIST, &with_ssh, &s,
				     NOW, NULL));
	rules_free(&r);
}
END_TEST

/* ---- state file ---------------------------------------------------- */

static char tmpdir[64];
static char path[128];

static void state_setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/edge-unit.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(path, sizeof(path), "%s/state.json", tmpdir);
}

static void state_teardown(void)
{
	char tmp[160];

	unlink(path);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	unlink(tmp);
	rmdir(tmpdir);
}

static void write_file(const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

START_TEST(test_state_round_trip)
{
	struct errbuf err = {""};
	struct state a, b;
	struct state_iface ifc = {"eth0", 2, STATE_MODE_NATIVE, 42, NOW, 0, ""};
	/* eth0 of two other namespaces, one named */
	struct state_iface ifb = {"eth0", 3,	      STATE_MODE_SKB, 43,
				  NOW,	  4026532001, "blue"};
	struct state_iface ifr = {"eth0",     4, STATE_MODE_SKB, 44, NOW,
				  4026532002, ""};
	struct rule x = mk("2001:db8::/32", EDGE_ACT_BLOCK, NOW + 600);
	struct stat sb;
	size_t i;

	state_init(&a);
	add(&a.rules, "10.0.0.0/8", EDGE_ACT_BLOCK, 0);
	add(&a.rules, "10.1.2.3/32", EDGE_ACT_ALLOW, 0);
	snprintf(x.comment, sizeof(x.comment), "say \"hi\" \\ ünïcode");
	ck_assert_int_eq(rules_set(&a.rules, &x, NULL, NULL), 0);
	a.policy = EDGE_POLICY_ALLOWLIST;
	ck_assert_int_eq(policy_ports_parse("80,443,8000-8100", &a.ports, NULL),
			 0);
	a.syn.rate = 100;
	a.syn.burst = 200;
	a.pkt.rate = 5000;
	a.pkt.burst = 5000;
	ck_assert_int_eq(state_iface_set(&a, &ifc, 4026531840), 0);
	ck_assert_int_eq(state_iface_set(&a, &ifb, 4026531840), 0);
	ck_assert_int_eq(state_iface_set(&a, &ifr, 4026531840), 0);
	/* the same name and namespace replaces; a record without one is
	 * init's (4026531840) */
	ifr.prog_id = 45;
	ck_assert_int_eq(state_iface_set(&a, &ifr, 4026531840), 0);
	ck_assert_uint_eq(a.n_ifaces, 3);
	ck_assert_ptr_eq(state_iface_find(&a, "eth0", 4026531840, 4026531840),
			 &a.ifaces[0]);
	ck_assert_ptr_eq(state_iface_find(&a, "eth0", 4026532001, 4026531840),
			 &a.ifaces[1]);
	ck_assert_uint_eq(
	    state_iface_find(&a, "eth0", 4026532002, 4026531840)->prog_id, 45);
	ck_assert_ptr_null(
	    state_iface_find(&a, "eth0", 4026532003, 4026531840));

	ck_assert_int_eq(state_save(path, &a, &err), 0);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 0777, 0600);
	ck_assert_int_eq(state_load(path, &b, &err), 0);

	ck_assert_uint_eq(b.policy, EDGE_POLICY_ALLOWLIST);
	ck_assert_mem_eq(&b.ports, &a.ports, sizeof(a.ports));
	ck_assert_uint_eq(b.syn.rate, 100);
	ck_assert_uint_eq(b.syn.burst, 200);
	ck_assert_uint_eq(b.pkt.rate, 5000);
	ck_assert_uint_eq(b.n_ifaces, 3);
	ck_assert_str_eq(b.ifaces[0].name, "eth0");
	ck_assert_uint_eq(b.ifaces[0].prog_id, 42);
	ck_assert_int_eq(b.ifaces[0].mode, STATE_MODE_NATIVE);
	ck_assert_uint_eq(b.ifaces[0].netns, 0);
	ck_assert_uint_eq(b.ifaces[1].netns, 4026532001);
	ck_assert_str_eq(b.ifaces[1].netns_name, "blue");
	ck_assert_uint_eq(b.ifaces[2].netns, 4026532002);
	ck_assert_str_eq(b.ifaces[2].netns_name, "");
	ck_assert_uint_eq(b.ifaces[2].prog_id, 45);
	ck_assert_uint_eq(b.rules.n, a.rules.n);
	for (i = 0; i < a.rules.n; i++) {
		const struct rule *ra = &a.rules.v[i];
		const struct rule *rb = rules_find(&b.rules, &ra->cidr);

		ck_assert_ptr_nonnull(rb);
		ck_assert_uint_eq(rb->id, ra->id);
		ck_assert_uint_eq(rb->action, ra->action);
		ck_assert_int_eq(rb->expires_at, ra->expires_at);
		ck_assert_str_eq(rb->comment, ra->comment);
	}
	state_free(&a);
	state_free(&b);
	state_free(NULL);
}
END_TEST

START_TEST(test_state_missing)
{
	struct errbuf err = {""};
	struct state st;

	ck_assert_int_eq(state_load(path, &st, &err), -ENOENT);
	ck_assert_uint_eq(st.rules.n, 0);
	ck_assert_uint_eq(st.policy, EDGE_POLICY_BLOCKLIST);
	ck_assert(policy_port_guarded(&st.ports, 80));
	ck_assert(policy_port_guarded(&st.ports, 443));
	state_free(&st);
}
END_TEST

#define GOOD_HEAD                                                              \
	"{\"version\":1,\"policy\":\"blocklist\",\"ports\":\"80,443\","        \
	"\"ratelimit\":{\"syn\":{\"per_minute\":0,\"burst\":0},\"pkt\":{"      \
	"\"per_minute\":0,"                                                    \
	"\"burst\":0}},"

static const char *const corrupt[] = {
    "",
    "{",
    "not json",
    "[]",
    "{\"version\":2,\"policy\":\"blocklist\",\"ports\":\"80\",\"rules\":[]}",
    "{\"policy\":\"blocklist\",\"ports\":\"80\",\"rules\":[]}",
    "{\"version\":1,\"policy\":\"denylist\",\"ports\":\"80\",\"rules\":[]}",
    "{\"version\":1,\"policy\":\"blocklist\",\"ports\":\"0\",\"rules\":[]}",
    GOOD_HEAD "\"rules\":{}}",
    GOOD_HEAD "\"rules\":[{\"id\":0,\"cidr\":\"1.2.3.4/33\",\"action\":"
	      "\"block\",\"expires_at\":null,\"comment\":\"\"}]}",
    GOOD_HEAD "\"rules\":[{\"id\":0,\"cidr\":\"10.1.0.0/8\",\"action\":"
	      "\"block\",\"expires_at\":null,\"comment\":\"\"}]}",
    GOOD_HEAD "\"rules\":[{\"id\":0,\"cidr\":\"10.0.0.0/8\",\"action\":"
	      "\"drop\",\"expires_at\":null,\"comment\":\"\"}]}",
    GOOD_HEAD "\"rules\":[{\"id\":16384,\"cidr\":\"10.0.0.0/8\",\"action\":"
	      "\"block\",\"expires_at\":null,\"comment\":\"\"}]}",
    GOOD_HEAD "\"rules\":[{\"id\":-1,\"cidr\":\"10.0.0.0/8\",\"action\":"
	      "\"block\",\"expires_at\":null,\"comment\":\"\"}]}",
    GOOD_HEAD "\"rules\":[{\"id\":0,\"cidr\":\"10.0.0.0/8\",\"action\":"
	      "\"block\",\"expires_at\":\"soon\",\"comment\":\"\"}]}",
    GOOD_HEAD "\"rules\":[{\"id\":0,\"cidr\":\"10.0.0.0/8\",\"action\":"
	      "\"block\",\"expires_at\":null,\"comment\":\"a\\nb\"}]}",
    GOOD_HEAD "\"rules\":[{\"id\":0,\"cidr\":\"10.0.0.0/8\",\"action\":"
	      "\"block\",\"expires_at\":null},{\"id\":0,\"cidr\":"
	      "\"11.0.0.0/8\",\"action\":\"block\",\"expires_at\":null}]}",
    GOOD_HEAD "\"rules\":[{\"id\":0,\"cidr\":\"10.0.0.0/8\",\"action\":"
	      "\"block\",\"expires_at\":null},{\"id\":1,\"cidr\":"
	      "\"10.0.0.0/8\",\"action\":\"allow\",\"expires_at\":null}]}",
    /* C1 control character, and a lone surrogate, as JSON escapes */
    GOOD_HEAD "\"rules\":[{\"id\":0,\"cidr\":\"10.0.0.0/8\",\"action\":"
	      "\"block\",\"expires_at\":null,\"comment\":\"a\\u009bb\"}]}",
    GOOD_HEAD "\"rules\":[{\"id\":0,\"cidr\":\"10.0.0.0/8\",\"action\":"
	      "\"block\",\"expires_at\":null,\"comment\":\"\\ud800\"}]}",
    /* invalid UTF-8 as raw bytes */
    GOOD_HEAD "\"rules\":[{\"id\":0,\"cidr\":\"10.0.0.0/8\",\"action\":"
	      "\"block\",\"expires_at\":null,\"comment\":\"bad\xff\xfe\"}]}",
    GOOD_HEAD "\"rules\":[],\"interfaces\":[{\"name\":\"e\\u0001\","
	      "\"ifindex\":2,\"mode\":\"native\",\"prog_id\":1,"
	      "\"attached_at\":1}]}",
    GOOD_HEAD "\"rules\":[], \"rules\":[]}",
    GOOD_HEAD "\"rules\":[],\"interfaces\":[{\"name\":\"eth0\"}]}",
    /* a namespace's inode that is not a number, a name with a slash, the
     * same name in the same namespace twice */
    GOOD_HEAD "\"rules\":[],\"interfaces\":[{\"name\":\"eth0\","
	      "\"ifindex\":2,\"mode\":\"native\",\"prog_id\":1,"
	      "\"attached_at\":1,\"netns\":\"blue\"}]}",
    GOOD_HEAD "\"rules\":[],\"interfaces\":[{\"name\":\"eth0\","
	      "\"ifindex\":2,\"mode\":\"native\",\"prog_id\":1,"
	      "\"attached_at\":1,\"netns\":5,\"netns_name\":\"a/b\"}]}",
    GOOD_HEAD "\"rules\":[],\"interfaces\":[{\"name\":\"eth0\","
	      "\"ifindex\":2,\"mode\":\"native\",\"prog_id\":1,"
	      "\"attached_at\":1,\"netns\":5},{\"name\":\"eth0\","
	      "\"ifindex\":3,\"mode\":\"native\",\"prog_id\":1,"
	      "\"attached_at\":1,\"netns\":5}]}",
    "{\"version\":1,\"policy\":\"blocklist\",\"ports\":\"80\",\"ratelimit\":"
    "{\"syn\":{\"per_minute\":100000000000000,\"burst\":1}},\"rules\":[]}",
};

START_TEST(test_state_corrupt)
{
	struct errbuf err = {""};
	struct state st;

	write_file(corrupt[_i]);
	ck_assert_int_lt(state_load(path, &st, &err), 0);
	ck_assert_msg(strstr(err.msg, path) != NULL, "case %d: '%s'", _i,
		      err.msg);
	ck_assert_msg(strstr(err.msg, "corrupt") != NULL, "case %d: '%s'", _i,
		      err.msg);
	/* never discarded */
	ck_assert_int_eq(access(path, F_OK), 0);
	state_free(&st);
}
END_TEST

START_TEST(test_state_minimal_ok)
{
	struct errbuf err = {""};
	struct state st;

	write_file(GOOD_HEAD "\"rules\":[{\"id\":7,\"cidr\":\"10.0.0.0/8\","
			     "\"action\":\"block\",\"expires_at\":null}]}");
	ck_assert_msg(state_load(path, &st, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(st.rules.n, 1);
	ck_assert_uint_eq(st.rules.v[0].id, 7);
	state_free(&st);
}
END_TEST

/* A state file must be readable back: text it cannot store is refused
 * before anything is written, and not as "out of memory". */
START_TEST(test_state_save_refuses_bad_text)
{
	struct errbuf err = {""};
	struct state a;
	struct rule x = mk("10.9.0.0/16", EDGE_ACT_BLOCK, 0);
	struct state_iface ifc = {"eth\xff", 2, STATE_MODE_NATIVE, 42, NOW,
				  0,	     ""};
	struct state_pending sp;
	char tmp[160];

	state_init(&a);
	snprintf(x.comment, sizeof(x.comment), "bad\xff\xfe");
	ck_assert_int_eq(rules_set(&a.rules, &x, NULL, NULL), 0);
	ck_assert_int_eq(state_prepare(&sp, path, &a, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "cannot encode the state: rule "
				      "10.9.0.0/16: comment has invalid "
				      "UTF-8 at byte 4") != NULL,
		      "%s", err.msg);
	ck_assert_ptr_null(strstr(err.msg, "memory"));
	ck_assert_int_eq(state_save(path, &a, &err), -EINVAL);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	ck_assert_int_ne(access(path, F_OK), 0);
	ck_assert_int_ne(access(tmp, F_OK), 0);
	state_free(&a);

	state_init(&a);
	ck_assert_int_eq(state_iface_set(&a, &ifc, 0), 0);
	ck_assert_int_eq(state_save(path, &a, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "interface name") != NULL, "%s", err.msg);
	ck_assert_int_ne(access(path, F_OK), 0);
	state_free(&a);
}
END_TEST

/* prepare writes beside the file and changes nothing visible; commit puts
 * it in place; abort leaves the old file. */
START_TEST(test_state_prepare_commit)
{
	struct errbuf err = {""};
	struct state a, b;
	struct state_pending sp;
	char tmp[160];

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	state_init(&a);
	add(&a.rules, "10.0.0.0/8", EDGE_ACT_BLOCK, 0);
	ck_assert_int_eq(state_save(path, &a, &err), 0);

	add(&a.rules, "10.1.0.0/16", EDGE_ACT_ALLOW, 0);
	ck_assert_int_eq(state_prepare(&sp, path, &a, &err), 0);
	ck_assert_int_eq(access(tmp, F_OK), 0);
	ck_assert_int_eq(state_load(path, &b, &err), 0);
	ck_assert_uint_eq(b.rules.n, 1); /* not yet */
	state_free(&b);
	state_abort(&sp);
	state_abort(&sp); /* twice is harmless */
	ck_assert_int_ne(access(tmp, F_OK), 0);
	ck_assert_int_eq(state_load(path, &b, &err), 0);
	ck_assert_uint_eq(b.rules.n, 1);
	state_free(&b);

	ck_assert_int_eq(state_prepare(&sp, path, &a, &err), 0);
	errbuf_clear(&err);
	ck_assert_int_eq(state_commit(&sp, &err), 0);
	ck_assert_str_eq(err.msg, "");
	ck_assert_int_ne(access(tmp, F_OK), 0);
	state_abort(&sp); /* after a commit: nothing to remove */
	ck_assert_int_eq(state_load(path, &b, &err), 0);
	ck_assert_uint_eq(b.rules.n, 2);
	state_free(&b);

	/* a temporary path that cannot be written: nothing changes */
	ck_assert_int_eq(mkdir(tmp, 0700), 0);
	ck_assert_int_lt(state_prepare(&sp, path, &a, &err), 0);
	ck_assert_msg(strstr(err.msg, "cannot write") != NULL, "%s", err.msg);
	ck_assert_int_eq(rmdir(tmp), 0);

	/* a rename that fails: the old file stays, the temporary goes */
	ck_assert_int_eq(state_prepare(&sp, path, &a, &err), 0);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	ck_assert_int_eq(access(tmp, F_OK), 0);
	ck_assert_int_lt(state_commit(&sp, &err), 0);
	ck_assert_msg(strstr(err.msg, "cannot replace") != NULL, "%s", err.msg);
	ck_assert_int_ne(access(tmp, F_OK), 0);
	ck_assert_int_eq(rmdir(path), 0);
	state_free(&a);
}
END_TEST

START_TEST(test_state_copy)
{
	struct state a, b;
	struct state_iface ifc = {"eth0", 2, STATE_MODE_SKB, 42, NOW, 0, ""};

	state_init(&a);
	add(&a.rules, "10.0.0.0/8", EDGE_ACT_BLOCK, 0);
	add(&a.rules, "2001:db8::/32", EDGE_ACT_ALLOW, NOW + 60);
	a.policy = EDGE_POLICY_ALLOWLIST;
	a.syn.rate = 600;
	ck_assert_int_eq(state_iface_set(&a, &ifc, 0), 0);
	ck_assert_int_eq(state_copy(&b, &a), 0);
	/* deep: changing one leaves the other */
	add(&a.rules, "11.0.0.0/8", EDGE_ACT_BLOCK, 0);
	a.rules.v[0].action = EDGE_ACT_ALLOW;
	state_iface_del(&a, "eth0", 0, 0);
	ck_assert_uint_eq(b.rules.n, 2);
	ck_assert_uint_eq(b.rules.v[0].action, EDGE_ACT_BLOCK);
	ck_assert_uint_eq(b.n_ifaces, 1);
	ck_assert_str_eq(b.ifaces[0].name, "eth0");
	ck_assert_uint_eq(b.policy, EDGE_POLICY_ALLOWLIST);
	ck_assert_uint_eq(b.syn.rate, 600);
	ck_assert_mem_eq(&b.ports, &a.ports, sizeof(a.ports));
	state_free(&a);
	state_free(&b);
	/* an empty one */
	state_init(&a);
	ck_assert_int_eq(state_copy(&b, &a), 0);
	ck_assert_uint_eq(b.rules.n, 0);
	ck_assert_ptr_null(b.rules.v);
	state_free(&b);
}
END_TEST

START_TEST(test_state_lock)
{
	struct errbuf err = {""};
	char sub[160];
	int fd, fd2;

	snprintf(sub, sizeof(sub), "%s/a/b", tmpdir);
	ck_assert_int_eq(state_lock(sub, true, false, &err), -ENOENT);
	fd = state_lock(sub, true, true, &err);
	ck_assert_int_ge(fd, 0);
	state_unlock(fd);
	/* readers share the lock */
	fd = state_lock(sub, false, false, &err);
	ck_assert_int_ge(fd, 0);
	fd2 = state_lock(sub, false, false, &err);
	ck_assert_int_ge(fd2, 0);
	state_unlock(fd2);
	state_unlock(fd);
	state_unlock(-1);
	rmdir(sub);
	snprintf(sub, sizeof(sub), "%s/a", tmpdir);
	rmdir(sub);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rules");
	TCase *tc = tcase_create("rules");
	TCase *ts = tcase_create("state");

	tcase_add_loop_test(tc, test_verdict, 0,
			    sizeof(vcases) / sizeof(vcases[0]));
	tcase_add_test(tc, test_match_skips_expired);
	tcase_add_test(tc, test_ids);
	tcase_add_test(tc, test_full);
	tcase_add_test(tc, test_validate_duplicates);
	tcase_add_test(tc, test_prune);
	tcase_add_test(tc, test_comment);
	tcase_add_loop_test(tc, test_comment_utf8, 0,
			    sizeof(ucases) / sizeof(ucases[0]));
	tcase_add_test(tc, test_utf8_check);
	tcase_add_test(tc, test_ssh_parse);
	tcase_add_test(tc, test_ssh_cut_off);
	suite_add_tcase(s, tc);

	tcase_add_checked_fixture(ts, state_setup, state_teardown);
	tcase_add_test(ts, test_state_round_trip);
	tcase_add_test(ts, test_state_missing);
	tcase_add_loop_test(ts, test_state_corrupt, 0,
			    sizeof(corrupt) / sizeof(corrupt[0]));
	tcase_add_test(ts, test_state_minimal_ok);
	tcase_add_test(ts, test_state_save_refuses_bad_text);
	tcase_add_test(ts, test_state_prepare_commit);
	tcase_add_test(ts, test_state_copy);
	tcase_add_test(ts, test_state_lock);
	suite_add_tcase(s, ts);

	return unit_run(s);
}
