/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pins.c - reading and writing edge's pinned maps.
 */
#include <errno.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "pins.h"

/* What each map must look like; the BPF program declares the same. */
struct pins_spec {
	const char *name;
	enum bpf_map_type type;
	uint32_t key_size;
	uint32_t value_size;
	uint32_t max_entries;
};

static const struct pins_spec pins_specs[PINS_NMAPS] = {
    [PINS_RULES_V4] = {EDGE_MAP_RULES_V4, BPF_MAP_TYPE_LPM_TRIE,
		       sizeof(struct edge_lpm_v4), sizeof(struct edge_rule),
		       EDGE_RULES_V4_MAX},
    [PINS_RULES_V6] = {EDGE_MAP_RULES_V6, BPF_MAP_TYPE_LPM_TRIE,
		       sizeof(struct edge_lpm_v6), sizeof(struct edge_rule),
		       EDGE_RULES_V6_MAX},
    [PINS_RULE_HITS] = {EDGE_MAP_RULE_HITS, BPF_MAP_TYPE_PERCPU_ARRAY,
			sizeof(__u32), sizeof(__u64), EDGE_MAX_RULES},
    [PINS_CONFIG] = {EDGE_MAP_CONFIG, BPF_MAP_TYPE_ARRAY, sizeof(__u32),
		     sizeof(struct edge_config), 1},
    [PINS_PORTS] = {EDGE_MAP_PORTS, BPF_MAP_TYPE_ARRAY, sizeof(__u32),
		    sizeof(struct edge_port), EDGE_PORTS_MAX},
    [PINS_RATELIMIT] = {EDGE_MAP_RATELIMIT, BPF_MAP_TYPE_LRU_HASH,
			sizeof(struct edge_rl_key),
			sizeof(struct edge_rl_state), EDGE_RATELIMIT_MAX},
    [PINS_COUNTERS] = {EDGE_MAP_COUNTERS, BPF_MAP_TYPE_PERCPU_ARRAY,
		       sizeof(__u32), sizeof(__u64), EDGE_COUNTERS_SLOTS},
};

const char *pins_map_name(enum pins_map m)
{
	return m < PINS_NMAPS ? pins_specs[m].name : "?";
}

int pins_path(const char *dir, enum pins_map m, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/%s", dir, pins_map_name(m));

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int pins_check_bpffs(const char *dir, struct errbuf *err)
{
	char path[PATH_MAX];
	struct statfs sfs;
	char *slash;

	if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path)) {
		errbuf_set(err, "pin directory path too long");
		return -ENAMETOOLONG;
	}
	for (;;) {
		if (statfs(path, &sfs) == 0)
			break;
		if (errno != ENOENT) {
			int ret = -errno;

			errbuf_set(err, "cannot check %s: %s", path,
				   strerror(errno));
			return ret;
		}
		slash = strrchr(path, '/');
		if (!slash || slash == path) {
			snprintf(path, sizeof(path), "/");
			if (statfs(path, &sfs))
				return -errno;
			break;
		}
		*slash = '\0';
	}
	if ((unsigned long)sfs.f_type != (unsigned long)BPF_FS_MAGIC) {
		errbuf_set(err,
			   "no bpffs at %s (for pin directory %s); mount one "
			   "with: mount -t bpf bpf /sys/fs/bpf",
			   path, dir);
		return -ENODEV;
	}
	return 0;
}

bool pins_exist(const char *dir)
{
	char path[PATH_MAX];
	int m;

	for (m = 0; m < PINS_NMAPS; m++)
		if (!pins_path(dir, (enum pins_map)m, path, sizeof(path)) &&
		    access(path, F_OK) == 0)
			return true;
	return false;
}

void pins_init(struct pins *p)
{
	int m;

	memset(p, 0, sizeof(*p));
	for (m = 0; m < PINS_NMAPS; m++)
		p->fd[m] = -1;
}

void pins_close(struct pins *p)
{
	int m;

	if (!p)
		return;
	for (m = 0; m < PINS_NMAPS; m++) {
		if (p->fd[m] >= 0)
			close(p->fd[m]);
		p->fd[m] = -1;
	}
}

static int pins_check_map(int fd, const struct pins_spec *s, const char *path,
			  uint32_t *id, struct errbuf *err)
{
	struct bpf_map_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len)) {
		int ret = -errno;

		errbuf_set(err, "cannot inspect %s: %s", path, strerror(errno));
		return ret;
	}
	if (info.type != s->type || info.key_size != s->key_size ||
	    info.value_size != s->value_size ||
	    info.max_entries != s->max_entries) {
		errbuf_set(err,
			   "pinned map %s is incompatible with this edgectl "
			   "(type %u key %u value %u entries %u, expected "
			   "type %u key %u value %u entries %u): it was left "
			   "by another version of edge; detach edge from "
			   "every interface and remove the pins (rm -r %s)",
			   path, info.type, info.key_size, info.value_size,
			   info.max_entries, s->type, s->key_size,
			   s->value_size, s->max_entries, path);
		return -EPROTO;
	}
	*id = info.id;
	return 0;
}

int pins_open(struct pins *p, const char *dir, struct errbuf *err)
{
	char path[PATH_MAX];
	int m, ret = 0, ncpus;

	pins_init(p);
	snprintf(p->dir, sizeof(p->dir), "%s", dir);
	if (!pins_exist(dir))
		return -ENOENT;
	ncpus = libbpf_num_possible_cpus();
	if (ncpus < 1) {
		errbuf_set(err, "cannot count possible CPUs");
		return ncpus < 0 ? ncpus : -EINVAL;
	}
	p->ncpus = ncpus;
	for (m = 0; m < PINS_NMAPS; m++) {
		ret = pins_path(dir, (enum pins_map)m, path, sizeof(path));
		if (ret)
			goto fail;
		p->fd[m] = bpf_obj_get(path);
		if (p->fd[m] < 0) {
			ret = -errno;
			if (ret == -ENOENT) {
				errbuf_set(err,
					   "pinned maps in %s are "
					   "incompatible with this edgectl: "
					   "%s is missing (left by another "
					   "version of edge?); detach edge "
					   "from every interface and remove "
					   "%s",
					   dir, pins_map_name((enum pins_map)m),
					   dir);
				ret = -EPROTO;
			} else {
				errbuf_set(err, "cannot open pinned map %s: %s",
					   path, strerror(-ret));
			}
			goto fail;
		}
		ret = pins_check_map(p->fd[m], &pins_specs[m], path, &p->id[m],
				     err);
		if (ret == 0) {
			struct stat sb;

			p->ino[m] = stat(path, &sb) == 0 ? sb.st_ino : 0;
		}
		if (ret)
			goto fail;
	}
	return 0;
fail:
	pins_close(p);
	return ret;
}

bool pins_replaced(const struct pins *p)
{
	char path[PATH_MAX];
	int m, fd;

	for (m = 0; m < PINS_NMAPS; m++) {
		struct bpf_map_info info;
		__u32 len = sizeof(info);
		bool other;

		if (p->fd[m] < 0 ||
		    pins_path(p->dir, (enum pins_map)m, path, sizeof(path)))
			continue;
		fd = bpf_obj_get(path);
		if (fd < 0) {
			struct stat sb;

			if (errno == ENOENT)
				return true;
			/* a user that may not open pins may still see one
			 * gone or pinned anew (another inode) */
			if (stat(path, &sb))
				return errno == ENOENT;
			if (p->ino[m] && sb.st_ino != p->ino[m])
				return true;
			continue;
		}
		memset(&info, 0, sizeof(info));
		other = bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
			info.id != p->id[m];
		close(fd);
		if (other)
			return true;
	}
	return false;
}

/* The LPM key of c in the map for its family; returns the map's fd. */
static int pins_rule_key(struct pins *p, const struct cidr *c,
			 struct edge_lpm_v6 *key)
{
	memset(key, 0, sizeof(*key));
	key->prefixlen = c->prefixlen;
	if (c->family == AF_INET) {
		memcpy(key->addr, c->addr, 4);
		return p->fd[PINS_RULES_V4];
	}
	memcpy(key->addr, c->addr, 16);
	return p->fd[PINS_RULES_V6];
}

uint64_t pins_expiry_ns(int64_t expires_at, int64_t wall_now, uint64_t boot_now)
{
	uint64_t secs = (uint64_t)(expires_at - wall_now);

	if (secs > (UINT64_MAX - boot_now) / 1000000000ULL)
		return UINT64_MAX;
	return boot_now + secs * 1000000000ULL;
}

int pins_rule_put(struct pins *p, const struct rule *x, int64_t wall_now,
		  uint64_t boot_now)
{
	struct edge_lpm_v6 key; /* an edge_lpm_v4 is its prefix */
	struct edge_rule v;
	int fd = pins_rule_key(p, &x->cidr, &key);

	memset(&v, 0, sizeof(v));
	if (x->expires_at) {
		if (x->expires_at <= wall_now) {
			int ret = pins_rule_del(p, &x->cidr);

			return ret == -ENOENT ? 0 : ret;
		}
		v.expires_ns =
		    pins_expiry_ns(x->expires_at, wall_now, boot_now);
	}
	v.id = x->id;
	v.action = x->action;
	v.prefixlen = x->cidr.prefixlen;
	if (bpf_map_update_elem(fd, &key, &v, BPF_ANY))
		return -errno;
	return 0;
}

int pins_rule_get(struct pins *p, const struct cidr *c, struct edge_rule *out)
{
	struct edge_lpm_v6 key;
	int fd = pins_rule_key(p, c, &key);

	if (bpf_map_lookup_elem(fd, &key, out))
		return -errno;
	return 0;
}

/* Every key of the LPM trie fd (keys ksz bytes long) into *keys (n of
 * them, cap their room; the caller frees *keys), all first so that the
 * caller may change the map while it walks them; at most 4 *
 * EDGE_MAX_RULES, so that a map changing under the walk never loops
 * forever. 0, or -ENOMEM. */
static int pins_trie_keys(int fd, size_t ksz, struct edge_lpm_v6 **keys,
			  size_t *n, size_t *cap)
{
	struct edge_lpm_v6 key, next;
	void *prev = NULL;

	*n = 0;
	memset(&key, 0, sizeof(key));
	memset(&next, 0, sizeof(next));
	while (bpf_map_get_next_key(fd, prev, &next) == 0 &&
	       *n < 4 * EDGE_MAX_RULES) {
		if (*n == *cap) {
			size_t c = *cap ? *cap * 2 : 64;
			struct edge_lpm_v6 *nk =
			    realloc(*keys, c * sizeof(*nk));

			if (!nk)
				return -ENOMEM;
			*keys = nk;
			*cap = c;
		}
		memcpy(&(*keys)[(*n)++], &next, sizeof(next));
		memcpy(&key, &next, ksz);
		prev = &key;
	}
	return 0;
}

int pins_rules_each(struct pins *p,
		    int (*fn)(void *arg, const struct cidr *c,
			      const struct edge_rule *v),
		    void *arg)
{
	static const int fam[2] = {AF_INET, AF_INET6};
	struct edge_lpm_v6 *keys = NULL;
	size_t n, cap = 0, i;
	int f, ret = 0;

	for (f = 0; f < 2 && !ret; f++) {
		int fd = p->fd[f ? PINS_RULES_V6 : PINS_RULES_V4];
		size_t ksz =
		    f ? sizeof(struct edge_lpm_v6) : sizeof(struct edge_lpm_v4);

		ret = pins_trie_keys(fd, ksz, &keys, &n, &cap);
		if (ret)
			break;
		for (i = 0; i < n && !ret; i++) {
			struct edge_rule v;
			struct cidr c;

			if (bpf_map_lookup_elem(fd, &keys[i], &v))
				continue; /* gone meanwhile */
			memset(&c, 0, sizeof(c));
			c.family = (uint8_t)fam[f];
			c.prefixlen = (uint8_t)keys[i].prefixlen;
			memcpy(c.addr, keys[i].addr, f ? 16 : 4);
			ret = fn(arg, &c, &v);
		}
	}
	free(keys);
	return ret;
}

int pins_rule_del(struct pins *p, const struct cidr *c)
{
	struct edge_lpm_v6 key;
	int fd = pins_rule_key(p, c, &key);

	if (bpf_map_delete_elem(fd, &key))
		return -errno;
	return 0;
}

int pins_hits_zero(struct pins *p, uint32_t id)
{
	__u64 *vals = calloc((size_t)p->ncpus, sizeof(__u64));
	int ret = 0;

	if (!vals)
		return -ENOMEM;
	if (bpf_map_update_elem(p->fd[PINS_RULE_HITS], &id, vals, BPF_ANY))
		ret = -errno;
	free(vals);
	return ret;
}

static int pins_percpu_sum(struct pins *p, int fd, uint32_t key, uint64_t *sum)
{
	__u64 *vals = calloc((size_t)p->ncpus, sizeof(__u64));
	int i, ret = 0;

	if (!vals)
		return -ENOMEM;
	*sum = 0;
	if (bpf_map_lookup_elem(fd, &key, vals)) {
		ret = -errno;
		goto out;
	}
	for (i = 0; i < p->ncpus; i++)
		*sum += vals[i];
out:
	free(vals);
	return ret;
}

int pins_hits_read(struct pins *p, uint32_t id, uint64_t *sum)
{
	return pins_percpu_sum(p, p->fd[PINS_RULE_HITS], id, sum);
}

int pins_hits_read_range(struct pins *p, uint32_t first, uint32_t n,
			 uint64_t *sums)
{
	int fd = p->fd[PINS_RULE_HITS];
	size_t nc = (size_t)p->ncpus;
	__u32 *keys = NULL, last, cursor, count, k;
	bool started = first > 0;
	__u64 *vals = NULL;
	int ret = 0;

	if (!n)
		return 0;
	if (first >= EDGE_MAX_RULES || n > EDGE_MAX_RULES - first)
		return -ERANGE;
	memset(sums, 0, n * sizeof(*sums));
	last = first + n - 1;
	keys = malloc(n * sizeof(*keys));
	vals = malloc(n * nc * sizeof(*vals));
	if (!keys || !vals) {
		ret = -ENOMEM;
		goto out;
	}
	/* one system call for them all: an array's batch goes on after
	 * the key it is given (none: from key 0) */
	cursor = first - 1;
	for (;;) {
		count = n;
		if (bpf_map_lookup_batch(fd, started ? &cursor : NULL, &cursor,
					 keys, vals, &count, NULL)) {
			if (errno != ENOENT)
				ret = -errno;
			if (errno != ENOENT || !count)
				break;
		}
		for (k = 0; k < count; k++) {
			if (keys[k] < first || keys[k] > last)
				continue;
			for (size_t c = 0; c < nc; c++)
				sums[keys[k] - first] += vals[k * nc + c];
		}
		if (!count || keys[count - 1] >= last)
			break;
		started = true; /* cursor: the last key read */
	}
	if (ret == -EINVAL || ret == -ENOTSUP || ret == -EOPNOTSUPP) {
		/* a kernel without batches for arrays: one at a time */
		ret = 0;
		for (k = 0; k < n && !ret; k++)
			ret = pins_percpu_sum(p, fd, first + k, &sums[k]);
	}
out:
	free(keys);
	free(vals);
	return ret;
}

int pins_counters_read(struct pins *p, uint64_t out[EDGE_CTR_MAX])
{
	uint32_t i;
	int ret;

	for (i = 0; i < EDGE_CTR_MAX; i++) {
		ret = pins_percpu_sum(p, p->fd[PINS_COUNTERS], i, &out[i]);
		if (ret)
			return ret;
	}
	return 0;
}

static int pins_ports_write(struct pins *p, const struct policy_ports *ports)
{
	__u32 *keys = malloc(EDGE_PORTS_MAX * sizeof(*keys));
	struct edge_port *vals = malloc(EDGE_PORTS_MAX * sizeof(*vals));
	__u32 i, count = EDGE_PORTS_MAX;
	int ret = 0;

	if (!keys || !vals) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < EDGE_PORTS_MAX; i++) {
		keys[i] = i;
		vals[i].guarded = policy_port_guarded(ports, i) ? 1 : 0;
	}
	if (bpf_map_update_batch(p->fd[PINS_PORTS], keys, vals, &count, NULL) ==
	    0)
		goto out;
	/* no batch support: one by one */
	for (i = 0; i < EDGE_PORTS_MAX; i++) {
		if (bpf_map_update_elem(p->fd[PINS_PORTS], &keys[i], &vals[i],
					BPF_ANY)) {
			ret = -errno;
			goto out;
		}
	}
out:
	free(keys);
	free(vals);
	return ret;
}

int pins_config_write(struct pins *p, const struct state *st)
{
	struct edge_config cfg;
	__u32 key = 0;
	int ret;

	memset(&cfg, 0, sizeof(cfg));
	cfg.policy = st->policy;
	ret = policy_rl_conf(&st->syn, &cfg.syn);
	if (!ret)
		ret = policy_rl_conf(&st->pkt, &cfg.pkt);
	if (ret)
		return ret;
	/* ports first: switching to allowlist must find them in place */
	ret = pins_ports_write(p, &st->ports);
	if (ret)
		return ret;
	if (bpf_map_update_elem(p->fd[PINS_CONFIG], &key, &cfg, BPF_ANY))
		return -errno;
	return 0;
}

/* Delete the entries of one LPM trie whose prefix has no rule in st. */
static int pins_sync_trie(struct pins *p, int family, const struct state *st,
			  const struct rules *sorted, size_t *removed)
{
	int fd = p->fd[family == AF_INET ? PINS_RULES_V4 : PINS_RULES_V6];
	size_t ksz = family == AF_INET ? sizeof(struct edge_lpm_v4)
				       : sizeof(struct edge_lpm_v6);
	struct edge_lpm_v6 *keys = NULL;
	size_t n = 0, cap = 0, i;
	int ret;

	ret = pins_trie_keys(fd, ksz, &keys, &n, &cap);
	if (ret)
		goto out;
	for (i = 0; i < n; i++) {
		struct cidr c;
		struct edge_rule v;

		memset(&c, 0, sizeof(c));
		c.family = (uint8_t)family;
		c.prefixlen = (uint8_t)keys[i].prefixlen;
		memcpy(c.addr, keys[i].addr, family == AF_INET ? 4 : 16);
		if (rules_find_sorted(sorted, &c))
			continue;
		if (bpf_map_lookup_elem(fd, &keys[i], &v))
			v.id = EDGE_MAX_RULES; /* gone meanwhile: no hits */
		if (v.id >= EDGE_LOCAL_RULES_MAX && v.id < EDGE_MAX_RULES)
			continue; /* the database's, edged's to keep */
		if (v.id < EDGE_MAX_RULES) {
			/* the id may belong to a rule in st now: only zero
			 * hits of ids no rule of st uses */
			size_t k;
			bool used = false;

			for (k = 0; k < st->rules.n; k++)
				used |= st->rules.v[k].id == v.id;
			if (!used)
				pins_hits_zero(p, v.id);
		}
		if (bpf_map_delete_elem(fd, &keys[i])) {
			if (errno == ENOENT)
				continue;
			ret = -errno;
			goto out;
		}
		(*removed)++;
	}
out:
	free(keys);
	return ret;
}

/* Whether the entry for rule x is missing (*missing) or differs from
 * what pins_rule_put writes (*differs). Expiry times are compared only
 * as "expires or not": the conversion to boot time moves them by up to a
 * second at every write. */
static void pins_rule_compare(struct pins *p, const struct rule *x,
			      bool *missing, bool *differs)
{
	struct edge_lpm_v6 key;
	struct edge_rule v;
	int fd = pins_rule_key(p, &x->cidr, &key);

	*missing = *differs = false;
	if (bpf_map_lookup_elem(fd, &key, &v)) {
		*missing = errno == ENOENT;
		return;
	}
	*differs = v.id != x->id || v.action != x->action ||
		   v.prefixlen != x->cidr.prefixlen ||
		   (v.expires_ns == 0) != (x->expires_at == 0);
}

int pins_sync(struct pins *p, const struct state *st, int64_t wall_now,
	      uint64_t boot_now, struct pins_sync_stats *stats,
	      struct errbuf *err)
{
	struct pins_sync_stats dummy;
	struct rules sorted = {0};
	char c[CIDR_STR_MAX];
	size_t i;
	int ret;

	if (!stats)
		stats = &dummy;
	memset(stats, 0, sizeof(*stats));
	sorted.n = sorted.cap = st->rules.n;
	sorted.v = st->rules.n ? malloc(st->rules.n * sizeof(*sorted.v)) : NULL;
	if (st->rules.n && !sorted.v) {
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	if (sorted.v)
		memcpy(sorted.v, st->rules.v, st->rules.n * sizeof(*sorted.v));
	rules_sort(&sorted);
	/* every rule written before any stale entry goes: no moment in
	 * which a prefix that stays blocked is not */
	for (i = 0; i < st->rules.n; i++) {
		const struct rule *x = &st->rules.v[i];
		bool missing, differs;

		if (!rules_expired(x, wall_now)) {
			pins_rule_compare(p, x, &missing, &differs);
			stats->restored += missing;
			stats->corrected += differs;
		}
		ret = pins_rule_put(p, x, wall_now, boot_now);
		if (ret) {
			errbuf_set(err, "cannot write rule %s: %s",
				   cidr_format(&x->cidr, c, sizeof(c)),
				   strerror(-ret));
			rules_free(&sorted);
			return ret;
		}
	}
	ret = pins_sync_trie(p, AF_INET, st, &sorted, &stats->removed);
	if (!ret)
		ret = pins_sync_trie(p, AF_INET6, st, &sorted, &stats->removed);
	rules_free(&sorted);
	if (ret) {
		errbuf_set(err, "cannot clean the rule maps in %s: %s", p->dir,
			   strerror(-ret));
		return ret;
	}
	ret = pins_config_write(p, st);
	if (ret)
		errbuf_set(err, "cannot write the configuration maps: %s",
			   strerror(-ret));
	return ret;
}

int pins_unpin(const char *dir)
{
	char path[PATH_MAX];
	int m, ret = 0;

	for (m = 0; m < PINS_NMAPS; m++) {
		if (pins_path(dir, (enum pins_map)m, path, sizeof(path)))
			return -ENAMETOOLONG;
		if (unlink(path) && errno != ENOENT && !ret)
			ret = -errno;
	}
	if (rmdir(dir) && errno != ENOENT && errno != ENOTEMPTY &&
	    errno != EEXIST && !ret)
		ret = -errno;
	return ret;
}
