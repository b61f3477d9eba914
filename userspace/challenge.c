/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * challenge.c - the proof-of-work challenge's tokens, passes, page and
 * tables (challenge.h).
 */
#include "challenge.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/hmac.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "b64url.h"
#include "challenge_page.h" /* challenge_page_html[], scripts/text2c */
#include "h1.h"
#include "siphash.h"

#define CHAL_MAC_LEN 16 /* bytes of the HMAC kept: 22 base64url digits */
#define CHAL_B64_MAC 22
#define CHAL_RAND_LEN 16

const char chal_page_csp[] =
    "default-src 'none'; script-src 'unsafe-inline' blob:; worker-src "
    "blob:; style-src 'unsafe-inline'; form-action 'self'; base-uri "
    "'none'; frame-ancestors 'none'";

static const char *const mode_names[] = {
    [CHAL_OFF] = "off",
    [CHAL_NEW_IP] = "new_ip",
    [CHAL_ON_RATE_LIMIT] = "on_rate_limit",
    [CHAL_ALWAYS] = "always",
};

static const char *const check_names[CHAL_CHECK_MAX] = {
    [CHAL_GOOD] = "good",	    [CHAL_ABSENT] = "absent",
    [CHAL_MALFORMED] = "malformed", [CHAL_FORGED] = "forged",
    [CHAL_EXPIRED] = "expired",	    [CHAL_UNSOLVED] = "unsolved",
    [CHAL_REPLAYED] = "replayed",
};

const char *chal_mode_name(enum chal_mode m)
{
	return (unsigned)m <= CHAL_ALWAYS ? mode_names[m] : "unknown";
}

int chal_mode_parse(const char *s, enum chal_mode *m)
{
	for (unsigned i = 0; i <= CHAL_ALWAYS; i++)
		if (strcmp(s, mode_names[i]) == 0) {
			*m = (enum chal_mode)i;
			return 0;
		}
	return -EINVAL;
}

const char *chal_check_name(enum chal_check c)
{
	return (unsigned)c < CHAL_CHECK_MAX ? check_names[c] : "unknown";
}

void chal_prefix(const struct cidr *peer, struct cidr *out)
{
	unsigned bits = peer->family == AF_INET ? 24 : 64, i;

	memset(out, 0, sizeof(*out));
	out->family = peer->family;
	out->prefixlen = (uint8_t)bits;
	for (i = 0; i < bits / 8; i++)
		out->addr[i] = peer->addr[i];
}

int chal_keys_parse(const char *text, size_t len, struct chal_keys *out,
		    char *err, size_t errlen)
{
	size_t i = 0, line = 0;
	unsigned bits;

	memset(out, 0, sizeof(*out));
	while (i < len) {
		size_t s = i, e, j;

		while (i < len && text[i] != '\n')
			i++;
		e = i;
		if (i < len)
			i++;
		line++;
		while (e > s && (text[e - 1] == '\r' || text[e - 1] == ' ' ||
				 text[e - 1] == '\t'))
			e--;
		if (e == s)
			continue; /* a blank line */
		if (out->n == 2) {
			snprintf(err, errlen,
				 "line %zu: at most two keys (the first signs, "
				 "both verify)",
				 line);
			goto bad;
		}
		if (e - s != 2 * CHAL_KEY_LEN) {
			snprintf(err, errlen,
				 "line %zu: a key is %d hex digits (%d random "
				 "bytes: openssl rand -hex %d), not %zu bytes",
				 line, 2 * CHAL_KEY_LEN, CHAL_KEY_LEN,
				 CHAL_KEY_LEN, e - s);
			goto bad;
		}
		for (j = 0, bits = 0; j < CHAL_KEY_LEN; j++) {
			int hi = h1_hexval(text[s + 2 * j]);
			int lo = h1_hexval(text[s + 2 * j + 1]);

			if (hi < 0 || lo < 0) {
				snprintf(err, errlen,
					 "line %zu: not a hex digit", line);
				goto bad;
			}
			out->k[out->n][j] = (uint8_t)(hi << 4 | lo);
			bits |= out->k[out->n][j];
		}
		if (!bits) {
			snprintf(err, errlen,
				 "line %zu: a key of zeros is no secret "
				 "(openssl rand -hex %d)",
				 line, CHAL_KEY_LEN);
			goto bad;
		}
		out->n++;
	}
	if (out->n == 0) {
		snprintf(err, errlen, "no key (%d hex digits a line)",
			 2 * CHAL_KEY_LEN);
		goto bad;
	}
	return 0;
bad:
	OPENSSL_cleanse(out, sizeof(*out));
	return -EINVAL;
}

/* ---- HMAC-SHA-256 with a context kept per key ---------------------------- */

/*
 * Each thread keeps an HMAC-SHA-256 context keyed with each of the last
 * few keys it used, and MACs with a copy of it: OpenSSL 3.0's one-shot
 * HMAC() fetches the MAC and the digest at every call, which cost more
 * than the rest of a pass's check. Failing any of that: the one-shot.
 */
#define CHAL_HMAC_SLOTS 4

struct chal_hmac_slot {
	uint8_t key[CHAL_KEY_LEN];
	EVP_MAC_CTX *ctx; /* NULL: empty */
};

struct chal_hmacs {
	struct chal_hmac_slot s[CHAL_HMAC_SLOTS];
	unsigned next;
};

static pthread_once_t chal_hmac_once = PTHREAD_ONCE_INIT;
static pthread_key_t chal_hmac_key;
static EVP_MAC *chal_hmac_alg; /* NULL: the one-shot only */

static void chal_hmacs_free(void *p)
{
	struct chal_hmacs *h = p;

	for (unsigned i = 0; h && i < CHAL_HMAC_SLOTS; i++)
		EVP_MAC_CTX_free(h->s[i].ctx);
	if (h)
		OPENSSL_cleanse(h, sizeof(*h));
	free(h);
}

static void chal_hmac_init(void)
{
	if (pthread_key_create(&chal_hmac_key, chal_hmacs_free) == 0)
		chal_hmac_alg = EVP_MAC_fetch(NULL, "HMAC", NULL);
}

/* This thread's context keyed with key, made at its first use; NULL
 * when none can be. */
static const EVP_MAC_CTX *chal_hmac_ctx(const uint8_t *key)
{
	struct chal_hmacs *h;
	struct chal_hmac_slot *s;
	OSSL_PARAM p[2];
	unsigned i;

	pthread_once(&chal_hmac_once, chal_hmac_init);
	if (!chal_hmac_alg)
		return NULL;
	h = pthread_getspecific(chal_hmac_key);
	if (!h) {
		h = calloc(1, sizeof(*h));
		if (!h || pthread_setspecific(chal_hmac_key, h)) {
			free(h);
			return NULL;
		}
	}
	for (i = 0; i < CHAL_HMAC_SLOTS; i++)
		if (h->s[i].ctx &&
		    CRYPTO_memcmp(h->s[i].key, key, CHAL_KEY_LEN) == 0)
			return h->s[i].ctx;
	s = &h->s[h->next++ % CHAL_HMAC_SLOTS];
	EVP_MAC_CTX_free(s->ctx);
	s->ctx = EVP_MAC_CTX_new(chal_hmac_alg);
	p[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
						(char *)"SHA256", 0);
	p[1] = OSSL_PARAM_construct_end();
	if (!s->ctx || EVP_MAC_init(s->ctx, key, CHAL_KEY_LEN, p) != 1) {
		EVP_MAC_CTX_free(s->ctx);
		s->ctx = NULL;
		return NULL;
	}
	memcpy(s->key, key, CHAL_KEY_LEN);
	return s->ctx;
}

/* HMAC-SHA-256 of d (n bytes) under key into md (32 bytes): whether it
 * was made. */
static bool chal_hmac(const uint8_t *key, const uint8_t *d, size_t n,
		      uint8_t *md)
{
	const EVP_MAC_CTX *base = chal_hmac_ctx(key);
	EVP_MAC_CTX *c = base ? EVP_MAC_CTX_dup(base) : NULL;
	unsigned ml = 0;
	size_t out = 0;
	bool ok;

	if (c) {
		ok = EVP_MAC_update(c, d, n) == 1 &&
		     EVP_MAC_final(c, md, &out, EVP_MAX_MD_SIZE) == 1 &&
		     out == 32;
		EVP_MAC_CTX_free(c);
		if (ok)
			return true;
	}
	return HMAC(EVP_sha256(), key, CHAL_KEY_LEN, d, n, md, &ml) && ml == 32;
}

/* HMAC-SHA-256 under key of: what, env, the prefix and the signed text,
 * each ended by a NUL (so that no two inputs run together), as
 * CHAL_B64_MAC base64url digits into out. */
static void chal_mac(const uint8_t *key, char what, const char *env,
		     const struct cidr *prefix, const char *text, size_t tlen,
		     char *out)
{
	uint8_t buf[512], md[EVP_MAX_MD_SIZE];
	size_t n = 0, el = strlen(env);

	if (el > 256)
		el = 256; /* ids are at most 64 bytes (config_id) */
	if (tlen > sizeof(buf) - el - 24)
		tlen = sizeof(buf) - el - 24;
	buf[n++] = (uint8_t)what;
	buf[n++] = 0;
	memcpy(buf + n, env, el);
	n += el;
	buf[n++] = 0;
	buf[n++] = prefix->family;
	buf[n++] = prefix->prefixlen;
	memcpy(buf + n, prefix->addr, 16);
	n += 16;
	memcpy(buf + n, text, tlen);
	n += tlen;
	if (!chal_hmac(key, buf, n, md))
		memset(md, 0, sizeof(md)); /* matches no MAC edge makes */
	b64url_encode(md, CHAL_MAC_LEN, out);
}

/* Whether mac (CHAL_B64_MAC digits) is text's under one of keys. */
static bool chal_mac_ok(const struct chal_keys *keys, char what,
			const char *env, const struct cidr *prefix,
			const char *text, size_t tlen, const char *mac)
{
	char want[CHAL_B64_MAC + 1];
	bool ok = false;

	for (unsigned i = 0; i < keys->n && i < 2; i++) {
		chal_mac(keys->k[i], what, env, prefix, text, tlen, want);
		ok |= CRYPTO_memcmp(want, mac, CHAL_B64_MAC) == 0;
	}
	return ok;
}

/* A decimal of at most 19 digits, no sign, no leading zero but "0". */
static bool chal_decimal(const char *s, size_t n, uint64_t *v)
{
	uint64_t x = 0;

	if (n == 0 || n > 19 || (n > 1 && s[0] == '0'))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		x = x * 10 + (uint64_t)(s[i] - '0');
	}
	*v = x;
	return true;
}

size_t chal_token_make(const struct chal_keys *keys, const char *env,
		       const struct cidr *prefix, unsigned difficulty,
		       uint64_t now, char *out)
{
	uint8_t rnd[CHAL_RAND_LEN];
	char r64[32];
	int n;

	if (keys->n == 0 || RAND_bytes(rnd, sizeof(rnd)) != 1)
		return 0;
	b64url_encode(rnd, sizeof(rnd), r64);
	n = snprintf(out, CHAL_TOKEN_MAX, "1.%llu.%u.%s.",
		     (unsigned long long)(now + CHAL_TOKEN_TTL_S), difficulty,
		     r64);
	if (n < 0 || (size_t)n + CHAL_B64_MAC >= CHAL_TOKEN_MAX)
		return 0;
	chal_mac(keys->k[0], 't', env, prefix, out, (size_t)n, out + n);
	return (size_t)n + CHAL_B64_MAC;
}

/* Leading zero bits of md (32 bytes). */
static unsigned chal_zero_bits(const uint8_t *md)
{
	unsigned z = 0;

	for (unsigned i = 0; i < SHA256_DIGEST_LENGTH; i++) {
		if (md[i]) {
			return z + (unsigned)__builtin_clz(md[i]) - 24;
		}
		z += 8;
	}
	return z;
}

enum chal_check chal_solution_check(const struct chal_keys *keys,
				    const char *env, const struct cidr *prefix,
				    const char *token, size_t tlen,
				    const char *n, size_t nlen, uint64_t now,
				    uint64_t *tag, uint64_t *until)
{
	const char *p = token, *end = token + tlen, *f[5];
	size_t fl[5];
	uint64_t exp, diff, nv;
	uint8_t buf[CHAL_TOKEN_MAX + 24], md[SHA256_DIGEST_LENGTH];
	unsigned i;

	if (tlen >= CHAL_TOKEN_MAX)
		return CHAL_MALFORMED;
	/* "1.EXP.DIFF.RAND.MAC" */
	for (i = 0; i < 5; i++) {
		const char *d = i < 4 ? memchr(p, '.', (size_t)(end - p)) : end;

		if (!d)
			return CHAL_MALFORMED;
		f[i] = p;
		fl[i] = (size_t)(d - p);
		p = d + (i < 4);
	}
	if (fl[0] != 1 || f[0][0] != '1' || !chal_decimal(f[1], fl[1], &exp) ||
	    !chal_decimal(f[2], fl[2], &diff) || diff < 1 ||
	    diff > CHAL_DIFFICULTY_MAX || fl[4] != CHAL_B64_MAC)
		return CHAL_MALFORMED;
	if (!chal_mac_ok(keys, 't', env, prefix, token, (size_t)(f[4] - token),
			 f[4]))
		return CHAL_FORGED;
	if (exp < now || exp > now + 2 * CHAL_TOKEN_TTL_S)
		return CHAL_EXPIRED;
	if (!chal_decimal(n, nlen, &nv))
		return CHAL_UNSOLVED;
	memcpy(buf, token, tlen);
	buf[tlen] = '.';
	memcpy(buf + tlen + 1, n, nlen);
	SHA256(buf, tlen + 1 + nlen, md);
	if (chal_zero_bits(md) < diff)
		return CHAL_UNSOLVED;
	*tag = siphash_key(f[4], CHAL_B64_MAC);
	*until = exp;
	return CHAL_GOOD;
}

size_t chal_pass_make(const struct chal_keys *keys, const char *env,
		      const struct cidr *prefix, uint64_t exp, char *out)
{
	int n =
	    snprintf(out, CHAL_PASS_MAX, "1.%llu.", (unsigned long long)exp);

	if (keys->n == 0 || n < 0 || (size_t)n + CHAL_B64_MAC >= CHAL_PASS_MAX)
		return 0;
	chal_mac(keys->k[0], 'p', env, prefix, out, (size_t)n, out + n);
	return (size_t)n + CHAL_B64_MAC;
}

static enum chal_check chal_pass_one(const struct chal_keys *keys,
				     const char *env, const struct cidr *prefix,
				     const char *v, size_t n, uint64_t now,
				     uint64_t *exp)
{
	const char *d;

	/* "1.EXP.MAC" */
	if (n < 4 || v[0] != '1' || v[1] != '.')
		return CHAL_MALFORMED;
	d = memchr(v + 2, '.', n - 2);
	if (!d || (size_t)(v + n - d - 1) != CHAL_B64_MAC ||
	    !chal_decimal(v + 2, (size_t)(d - v - 2), exp))
		return CHAL_MALFORMED;
	if (!chal_mac_ok(keys, 'p', env, prefix, v, (size_t)(d + 1 - v), d + 1))
		return CHAL_FORGED;
	if (*exp <= now || *exp > now + CHAL_TTL_MAX_S + 3600)
		return CHAL_EXPIRED;
	return CHAL_GOOD;
}

/* What chal_pass_scan's pairs are checked against, and what they gave. */
struct chal_scan {
	const struct chal_keys *keys;
	const char *env;
	const struct cidr *prefix;
	const char *name; /* with its '=' */
	size_t nl;
	uint64_t now, *exp;
	unsigned tried;
	enum chal_check *first;
};

/* One Cookie pair: 1 when it is a good pass, -1 when the name's tries
 * are spent, else 0 (go on). */
static int chal_scan_pair(const char *v, size_t n, void *arg)
{
	struct chal_scan *sc = arg;
	enum chal_check c;

	if (n < sc->nl || memcmp(v, sc->name, sc->nl) != 0)
		return 0;
	/* a client's own few, not an attacker's thousand HMACs a request */
	if (sc->tried++ == CHAL_PASSES_TRIED)
		return -1;
	v += sc->nl;
	n -= sc->nl;
	if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
		v++;
		n -= 2;
	}
	c = sc->keys->n ? chal_pass_one(sc->keys, sc->env, sc->prefix, v, n,
					sc->now, sc->exp)
			: CHAL_FORGED;
	if (c == CHAL_GOOD)
		return 1;
	if (*sc->first == CHAL_ABSENT)
		*sc->first = c;
	return 0;
}

/* Whether a pass cookie named name (with its '=') among h's Cookie
 * fields is good; *first gets the first failure so far. */
static bool chal_pass_scan(const struct chal_keys *keys, const char *env,
			   const struct cidr *prefix, const struct h1_head *h,
			   const char *name, uint64_t now, uint64_t *exp,
			   enum chal_check *first)
{
	struct chal_scan sc = {keys, env, prefix, name, strlen(name),
			       now,  exp, 0,	  first};
	int rc = 0;

	for (size_t i = 0; i < h->nheaders && rc == 0; i++)
		if (h1_eq(h->headers[i].name, h->headers[i].name_len, "cookie"))
			rc = h1_each(h->headers[i].value,
				     h->headers[i].value_len, ';',
				     chal_scan_pair, &sc);
	return rc == 1;
}

enum chal_check chal_pass_find(const struct chal_keys *keys, const char *env,
			       const struct cidr *prefix,
			       const struct h1_head *h, uint64_t now,
			       uint64_t *exp)
{
	enum chal_check first = CHAL_ABSENT;

	/* each name tried apart: a sibling subdomain cannot set __Host-
	 * ones, so its junk edge_pass cookies never crowd out the pass of a
	 * client on HTTPS */
	if (chal_pass_scan(keys, env, prefix, h, CHAL_COOKIE_TLS "=", now, exp,
			   &first) ||
	    chal_pass_scan(keys, env, prefix, h, CHAL_COOKIE "=", now, exp,
			   &first))
		return CHAL_GOOD;
	return first;
}

bool chal_query_param(const char *q, size_t qlen, const char *name,
		      const char **v, size_t *vlen)
{
	size_t nl = strlen(name), s, e;

	for (s = 0; s < qlen; s = e + 1) {
		for (e = s; e < qlen && q[e] != '&'; e++)
			;
		if (e - s > nl && memcmp(q + s, name, nl) == 0 &&
		    q[s + nl] == '=') {
			*v = q + s + nl + 1;
			*vlen = e - s - nl - 1;
			return true;
		}
	}
	return false;
}

int chal_return_path(const char *r, size_t rlen, char *out, size_t len)
{
	size_t i, o = 0;

	for (i = 0; i < rlen; i++) {
		int c = (unsigned char)r[i];

		if (c == '%') {
			int hi = i + 2 < rlen ? h1_hexval(r[i + 1]) : -1;
			int lo = i + 2 < rlen ? h1_hexval(r[i + 2]) : -1;

			if (hi < 0 || lo < 0)
				goto bad;
			c = hi << 4 | lo;
			i += 2;
		} else if (c == '+') {
			goto bad; /* encodeURIComponent never makes one */
		}
		if (c <= 0x20 || c >= 0x7f || o + 1 >= len)
			goto bad;
		out[o++] = (char)c;
	}
	out[o] = '\0';
	if (o == 0 || out[0] != '/' || out[1] == '/' || out[1] == '\\')
		goto bad;
	return 0;
bad:
	if (len >= 2)
		memcpy(out, "/", 2);
	return -EINVAL;
}

/* Append s (n bytes) to b at *o, when it fits in cap. */
static void put(char *b, size_t *o, size_t cap, const char *s, size_t n)
{
	if (*o + n <= cap)
		memcpy(b + *o, s, n);
	*o += n;
}

char *chal_page(const char *token, unsigned difficulty, const char *ret,
		size_t *len)
{
	static const char *const ph[] = {"{{TOKEN}}", "{{DIFFICULTY}}",
					 "{{RETURN}}", "{{ACTION}}"};
	const char *t = challenge_page_html, *end = t + strlen(t);
	size_t cap = strlen(t) + strlen(token) + 6 * strlen(ret) + 64, o = 0;
	char *b = malloc(cap + 1), dnum[16];

	if (!b)
		return NULL;
	snprintf(dnum, sizeof(dnum), "%u", difficulty);
	while (t < end) {
		const char *m = strstr(t, "{{");
		unsigned k;

		if (!m)
			m = end;
		put(b, &o, cap, t, (size_t)(m - t));
		t = m;
		if (t == end)
			break;
		for (k = 0; k < 4; k++)
			if (strncmp(t, ph[k], strlen(ph[k])) == 0)
				break;
		if (k == 4) {
			put(b, &o, cap, t, 2);
			t += 2;
			continue;
		}
		t += strlen(ph[k]);
		if (k == 0)
			put(b, &o, cap, token, strlen(token));
		else if (k == 1)
			put(b, &o, cap, dnum, strlen(dnum));
		else if (k == 3)
			put(b, &o, cap, CHAL_PATH, sizeof(CHAL_PATH) - 1);
		else {
			/* a JSON string safe inside <script>: the path is
			 * printable ASCII (chal_return_path) */
			put(b, &o, cap, "\"", 1);
			for (const char *c = ret; *c; c++) {
				if (*c == '<' || *c == '>' || *c == '&' ||
				    *c == '\'') {
					char u[8];

					snprintf(u, sizeof(u), "\\u%04x",
						 (unsigned)*c);
					put(b, &o, cap, u, 6);
				} else if (*c == '"' || *c == '\\') {
					char u[2] = {'\\', *c};

					put(b, &o, cap, u, 2);
				} else
					put(b, &o, cap, c, 1);
			}
			put(b, &o, cap, "\"", 1);
		}
	}
	if (o > cap) { /* cannot happen: cap counts the worst case */
		free(b);
		return NULL;
	}
	b[o] = '\0';
	*len = o;
	return b;
}

/* ---- the tables ------------------------------------------------------------
 */

#define CHAL_WAYS 8

struct chal_slot {
	uint64_t key;
	uint64_t until; /* 0: free */
};

struct chal_table {
	pthread_mutex_t mu;
	size_t nsets;
	struct chal_slot *slots;
};

struct chal_table *chal_table_new(size_t slots)
{
	struct chal_table *t = calloc(1, sizeof(*t));
	size_t sets = 1;

	if (!t)
		return NULL;
	while (sets * CHAL_WAYS < slots)
		sets <<= 1;
	t->nsets = sets;
	t->slots = calloc(sets * CHAL_WAYS, sizeof(*t->slots));
	if (!t->slots) {
		free(t);
		return NULL;
	}
	pthread_mutex_init(&t->mu, NULL);
	return t;
}

void chal_table_free(struct chal_table *t)
{
	if (!t)
		return;
	pthread_mutex_destroy(&t->mu);
	free(t->slots);
	free(t);
}

static struct chal_slot *chal_set(struct chal_table *t, uint64_t key)
{
	return &t->slots[(key & (t->nsets - 1)) * CHAL_WAYS];
}

bool chal_table_has(struct chal_table *t, uint64_t key, uint64_t now)
{
	struct chal_slot *s;
	bool has = false;

	pthread_mutex_lock(&t->mu);
	s = chal_set(t, key);
	for (unsigned i = 0; i < CHAL_WAYS; i++)
		if (s[i].until > now && s[i].key == key)
			has = true;
	pthread_mutex_unlock(&t->mu);
	return has;
}

bool chal_table_add(struct chal_table *t, uint64_t key, uint64_t until,
		    uint64_t now)
{
	struct chal_slot *s, *v = NULL;
	bool added = true;

	pthread_mutex_lock(&t->mu);
	s = chal_set(t, key);
	for (unsigned i = 0; i < CHAL_WAYS; i++) {
		if (s[i].until > now && s[i].key == key) {
			added = false;
			goto out;
		}
		if (!v || s[i].until < v->until)
			v = &s[i]; /* a free or expired slot first */
	}
	v->key = key;
	v->until = until;
out:
	pthread_mutex_unlock(&t->mu);
	return added;
}

size_t chal_table_count(struct chal_table *t, uint64_t now)
{
	size_t n = 0;

	pthread_mutex_lock(&t->mu);
	for (size_t i = 0; i < t->nsets * CHAL_WAYS; i++)
		n += t->slots[i].until > now;
	pthread_mutex_unlock(&t->mu);
	return n;
}

uint64_t chal_table_key(char what, const char *env, const struct cidr *prefix)
{
	uint8_t buf[300];
	size_t el = strlen(env), n = 0;

	if (el > 256)
		el = 256;
	buf[n++] = (uint8_t)what;
	memcpy(buf + n, env, el);
	n += el;
	buf[n++] = 0;
	buf[n++] = prefix->family;
	buf[n++] = prefix->prefixlen;
	memcpy(buf + n, prefix->addr, 16);
	n += 16;
	return siphash_key(buf, n);
}

/* ---- this process's own -------------------------------------------------- */

static const char *const result_names[CHAL_R_MAX] = {
    [CHAL_R_ISSUED] = "issued",
    [CHAL_R_SOLVED] = "solved",
    [CHAL_R_PASSED] = "passed",
    [CHAL_R_FAILED] = "failed",
};

static _Atomic uint64_t chal_results[CHAL_R_MAX];
static _Atomic uint64_t chal_fails[CHAL_CHECK_MAX];

const char *chal_result_name(enum chal_result r)
{
	return (unsigned)r < CHAL_R_MAX ? result_names[r] : "unknown";
}

void chal_count(enum chal_result r)
{
	if ((unsigned)r < CHAL_R_MAX)
		atomic_fetch_add_explicit(&chal_results[r], 1,
					  memory_order_relaxed);
}

uint64_t chal_total(enum chal_result r)
{
	return (unsigned)r < CHAL_R_MAX
		   ? atomic_load_explicit(&chal_results[r],
					  memory_order_relaxed)
		   : 0;
}

void chal_fail_count(enum chal_check c)
{
	if ((unsigned)c < CHAL_CHECK_MAX)
		atomic_fetch_add_explicit(&chal_fails[c], 1,
					  memory_order_relaxed);
}

uint64_t chal_fail_total(enum chal_check c)
{
	return (unsigned)c < CHAL_CHECK_MAX
		   ? atomic_load_explicit(&chal_fails[c], memory_order_relaxed)
		   : 0;
}

/* Whether row a signs before row b (newer first: signs_from, then id). */
static bool chal_row_newer(const struct chal_key_row *a,
			   const struct chal_key_row *b)
{
	return a->signs_from > b->signs_from ||
	       (a->signs_from == b->signs_from && a->id > b->id);
}

void chal_keys_pick(const struct chal_key_row *v, size_t n, int64_t now,
		    struct chal_keys *out, int64_t *signer, int64_t *other,
		    int64_t *next)
{
	const struct chal_key_row *sig = NULL, *prev = NULL, *pend = NULL;
	size_t i;

	memset(out, 0, sizeof(*out));
	*signer = *other = *next = 0;
	/* the signer; the next to sign (the earliest time to come, of
	 * those the highest id: the one that will sign then) */
	for (i = 0; i < n; i++) {
		const struct chal_key_row *r = &v[i];

		if (r->signs_from > now) {
			if (!pend || r->signs_from < pend->signs_from ||
			    (r->signs_from == pend->signs_from &&
			     r->id > pend->id))
				pend = r;
		} else if (!sig || chal_row_newer(r, sig))
			sig = r;
	}
	/* the one that signed before: the newest of an earlier time (a
	 * row of the signer's own time never signed), else of the same */
	for (i = 0; sig && i < n; i++) {
		const struct chal_key_row *r = &v[i];

		bool re, pe;

		if (r == sig || r->signs_from > now)
			continue;
		re = r->signs_from < sig->signs_from;
		pe = prev && prev->signs_from < sig->signs_from;
		if (!prev || (re && !pe) ||
		    (re == pe && chal_row_newer(r, prev)))
			prev = r;
	}
	if (pend)
		*next = pend->signs_from;
	if (!sig)
		return;
	memcpy(out->k[0], sig->k, CHAL_KEY_LEN);
	out->n = 1;
	*signer = sig->id;
	if (pend || prev) {
		const struct chal_key_row *o = pend ? pend : prev;

		memcpy(out->k[1], o->k, CHAL_KEY_LEN);
		out->n = 2;
		*other = o->id;
	}
}

static pthread_mutex_t chal_db_mu = PTHREAD_MUTEX_INITIALIZER;
static struct chal_keys chal_db;

void chal_db_keys_set(const struct chal_keys *keys)
{
	pthread_mutex_lock(&chal_db_mu);
	chal_db = *keys;
	pthread_mutex_unlock(&chal_db_mu);
}

void chal_db_keys_get(struct chal_keys *out)
{
	pthread_mutex_lock(&chal_db_mu);
	*out = chal_db;
	pthread_mutex_unlock(&chal_db_mu);
}

static pthread_once_t chal_key_once = PTHREAD_ONCE_INIT;
static pthread_once_t chal_mem_once = PTHREAD_ONCE_INIT;
static struct chal_keys chal_rnd;
static struct chal_table *chal_mems[CHAL_MEMS];

static void chal_key_init(void)
{
	if (RAND_bytes(chal_rnd.k[0], CHAL_KEY_LEN) == 1)
		chal_rnd.n = 1; /* else no key: every pass and token fails */
}

static void chal_mem_init(void)
{
	for (unsigned m = 0; m < CHAL_MEMS; m++)
		chal_mems[m] = chal_table_new(65536);
}

const struct chal_keys *chal_random_keys(void)
{
	pthread_once(&chal_key_once, chal_key_init);
	return &chal_rnd;
}

struct chal_table *chal_mem(enum chal_mem m)
{
	pthread_once(&chal_mem_once, chal_mem_init);
	return (unsigned)m < CHAL_MEMS ? chal_mems[m] : NULL;
}

#define CHAL_ENV_MAX 64 /* an id's bytes (config_id) */

static pthread_mutex_t chal_force_mu = PTHREAD_MUTEX_INITIALIZER;
static char (*chal_forced_ids)[CHAL_ENV_MAX + 1];
static _Atomic size_t chal_n_forced;

int chal_force(const char *env, bool on)
{
	size_t i, n, el = strlen(env);
	int rc = 0;

	if (el == 0 || el > CHAL_ENV_MAX)
		return -EINVAL;
	pthread_mutex_lock(&chal_force_mu);
	n = atomic_load(&chal_n_forced);
	for (i = 0; i < n; i++)
		if (strcmp(chal_forced_ids[i], env) == 0)
			break;
	if (on && i == n) {
		if (!chal_forced_ids)
			chal_forced_ids =
			    calloc(CHAL_FORCED_MAX, sizeof(*chal_forced_ids));
		if (!chal_forced_ids)
			rc = -ENOMEM;
		else if (n == CHAL_FORCED_MAX)
			rc = -ENOSPC;
		else {
			memcpy(chal_forced_ids[n], env, el + 1);
			atomic_store(&chal_n_forced, n + 1);
		}
	} else if (!on && i < n) {
		memcpy(chal_forced_ids[i], chal_forced_ids[n - 1],
		       sizeof(chal_forced_ids[i]));
		atomic_store(&chal_n_forced, n - 1);
	}
	pthread_mutex_unlock(&chal_force_mu);
	return rc;
}

bool chal_forced(const char *env)
{
	bool on = false;
	size_t i, n;

	if (atomic_load_explicit(&chal_n_forced, memory_order_relaxed) == 0)
		return false;
	pthread_mutex_lock(&chal_force_mu);
	n = atomic_load(&chal_n_forced);
	for (i = 0; i < n && !on; i++)
		on = strcmp(chal_forced_ids[i], env) == 0;
	pthread_mutex_unlock(&chal_force_mu);
	return on;
}

void chal_forced_each(void (*fn)(void *arg, const char *env), void *arg)
{
	size_t i;

	pthread_mutex_lock(&chal_force_mu);
	for (i = 0; i < atomic_load(&chal_n_forced); i++)
		fn(arg, chal_forced_ids[i]);
	pthread_mutex_unlock(&chal_force_mu);
}
