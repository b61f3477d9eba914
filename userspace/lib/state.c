/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * state.c - the state file (JSON via jansson) and its lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state.h"
#include "utf8.h"

void state_init(struct state *st)
{
	memset(st, 0, sizeof(*st));
	st->policy = EDGE_POLICY_BLOCKLIST;
	policy_ports_parse(POLICY_PORTS_DEFAULT, &st->ports, NULL);
}

int state_copy(struct state *to, const struct state *from)
{
	state_init(to);
	to->policy = from->policy;
	to->ports = from->ports;
	to->syn = from->syn;
	to->pkt = from->pkt;
	if (from->rules.n) {
		to->rules.v = malloc(from->rules.n * sizeof(*to->rules.v));
		if (!to->rules.v)
			goto fail;
		memcpy(to->rules.v, from->rules.v,
		       from->rules.n * sizeof(*to->rules.v));
		to->rules.n = to->rules.cap = from->rules.n;
	}
	if (from->n_ifaces) {
		to->ifaces = malloc(from->n_ifaces * sizeof(*to->ifaces));
		if (!to->ifaces)
			goto fail;
		memcpy(to->ifaces, from->ifaces,
		       from->n_ifaces * sizeof(*to->ifaces));
		to->n_ifaces = from->n_ifaces;
	}
	return 0;
fail:
	state_free(to);
	state_init(to);
	return -ENOMEM;
}

void state_free(struct state *st)
{
	if (!st)
		return;
	rules_free(&st->rules);
	free(st->ifaces);
	st->ifaces = NULL;
	st->n_ifaces = 0;
}

const char *state_mode_name(int mode)
{
	switch (mode) {
	case STATE_MODE_NATIVE:
		return "native";
	case STATE_MODE_SKB:
		return "skb";
	default:
		return "none";
	}
}

const char *state_policy_name(uint32_t policy)
{
	return policy == EDGE_POLICY_ALLOWLIST ? "allowlist" : "blocklist";
}

struct state_iface *state_iface_find(const struct state *st, const char *name,
				     uint64_t netns, uint64_t init)
{
	size_t i;

	for (i = 0; i < st->n_ifaces; i++)
		if (strcmp(st->ifaces[i].name, name) == 0 &&
		    (st->ifaces[i].netns ? st->ifaces[i].netns : init) == netns)
			return &st->ifaces[i];
	return NULL;
}

int state_iface_set(struct state *st, const struct state_iface *ifc,
		    uint64_t init)
{
	struct state_iface *cur = state_iface_find(
	    st, ifc->name, ifc->netns ? ifc->netns : init, init);
	struct state_iface *nv;

	if (cur) {
		*cur = *ifc;
		return 0;
	}
	nv = realloc(st->ifaces, (st->n_ifaces + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	st->ifaces = nv;
	st->ifaces[st->n_ifaces++] = *ifc;
	return 0;
}

int state_iface_del(struct state *st, const char *name, uint64_t netns,
		    uint64_t init)
{
	struct state_iface *cur = state_iface_find(st, name, netns, init);

	if (!cur)
		return -ENOENT;
	*cur = st->ifaces[st->n_ifaces - 1];
	st->n_ifaces--;
	return 0;
}

/* ---- loading ------------------------------------------------------ */

static int state_get_int(json_t *obj, const char *key, bool nullable,
			 json_int_t min, json_int_t max, json_int_t *out,
			 const char *where, struct errbuf *err)
{
	json_t *v = json_object_get(obj, key);

	if (!v) {
		errbuf_set(err, "%s: missing '%s'", where, key);
		return -EINVAL;
	}
	if (nullable && json_is_null(v)) {
		*out = 0;
		return 0;
	}
	if (!json_is_integer(v)) {
		errbuf_set(err, "%s: '%s' is not an integer", where, key);
		return -EINVAL;
	}
	*out = json_integer_value(v);
	if (*out < min || *out > max) {
		errbuf_set(err, "%s: '%s' out of range", where, key);
		return -EINVAL;
	}
	return 0;
}

static const char *state_get_str(json_t *obj, const char *key,
				 const char *where, struct errbuf *err)
{
	json_t *v = json_object_get(obj, key);

	if (!v || !json_is_string(v)) {
		errbuf_set(err, "%s: '%s' is missing or not a string", where,
			   key);
		return NULL;
	}
	return json_string_value(v);
}

static int state_load_rule(json_t *o, size_t idx, struct rule *x,
			   struct errbuf *err)
{
	struct errbuf sub = {""};
	char where[64];
	const char *s;
	json_int_t v;
	unsigned notes;
	int ret;

	snprintf(where, sizeof(where), "rules[%zu]", idx);
	memset(x, 0, sizeof(*x));
	if (!json_is_object(o)) {
		errbuf_set(err, "%s is not an object", where);
		return -EINVAL;
	}
	s = state_get_str(o, "cidr", where, err);
	if (!s)
		return -EINVAL;
	ret = cidr_parse(s, &x->cidr, &notes, &sub);
	if (ret || notes) {
		errbuf_set(err, "%s: bad cidr %s", where,
			   ret ? sub.msg : "(not normalised)");
		return -EINVAL;
	}
	s = state_get_str(o, "action", where, err);
	if (!s)
		return -EINVAL;
	if (rules_action_parse(s, &x->action)) {
		errbuf_set(err, "%s: unknown action '%s'", where, s);
		return -EINVAL;
	}
	ret = state_get_int(o, "id", false, 0, EDGE_MAX_RULES - 1, &v, where,
			    err);
	if (ret)
		return ret;
	x->id = (uint32_t)v;
	ret =
	    state_get_int(o, "expires_at", true, 0, INT64_MAX, &v, where, err);
	if (ret)
		return ret;
	x->expires_at = v;
	s = json_object_get(o, "comment")
		? state_get_str(o, "comment", where, err)
		: "";
	if (!s)
		return -EINVAL;
	if (rules_comment_check(s, &sub)) {
		errbuf_set(err, "%s: %s", where, sub.msg);
		return -EINVAL;
	}
	snprintf(x->comment, sizeof(x->comment), "%s", s);
	return 0;
}

static int state_load_rl(json_t *o, const char *name, struct policy_rl *rl,
			 struct errbuf *err)
{
	struct edge_rl_conf conf;
	char where[64];
	json_t *r;
	json_int_t v;
	int ret;

	snprintf(where, sizeof(where), "ratelimit.%s", name);
	r = o ? json_object_get(o, name) : NULL;
	if (!r)
		return 0;
	if (!json_is_object(r)) {
		errbuf_set(err, "%s is not an object", where);
		return -EINVAL;
	}
	ret = state_get_int(r, "per_minute", false, 0, EDGE_RL_RATE_MAX, &v,
			    where, err);
	if (ret)
		return ret;
	rl->rate = (uint64_t)v;
	ret = state_get_int(r, "burst", false, 0, EDGE_RL_BURST_MAX, &v, where,
			    err);
	if (ret)
		return ret;
	rl->burst = (uint64_t)v;
	if (policy_rl_conf(rl, &conf)) {
		errbuf_set(err, "%s: rate or burst out of range", where);
		return -EINVAL;
	}
	return 0;
}

static int state_load_iface(json_t *o, size_t idx, struct state_iface *ifc,
			    struct errbuf *err)
{
	char where[64];
	const char *s;
	json_int_t v;
	int ret;

	snprintf(where, sizeof(where), "interfaces[%zu]", idx);
	memset(ifc, 0, sizeof(*ifc));
	if (!json_is_object(o)) {
		errbuf_set(err, "%s is not an object", where);
		return -EINVAL;
	}
	s = state_get_str(o, "name", where, err);
	if (!s)
		return -EINVAL;
	if (!*s || strlen(s) >= IF_NAMESIZE ||
	    utf8_check_text(s, strlen(s), NULL)) {
		errbuf_set(err, "%s: bad interface name", where);
		return -EINVAL;
	}
	snprintf(ifc->name, sizeof(ifc->name), "%s", s);
	ret = state_get_int(o, "ifindex", false, 0, INT_MAX, &v, where, err);
	if (ret)
		return ret;
	ifc->ifindex = (int)v;
	s = state_get_str(o, "mode", where, err);
	if (!s)
		return -EINVAL;
	if (strcmp(s, "native") == 0)
		ifc->mode = STATE_MODE_NATIVE;
	else if (strcmp(s, "skb") == 0)
		ifc->mode = STATE_MODE_SKB;
	else {
		errbuf_set(err, "%s: unknown mode '%s'", where, s);
		return -EINVAL;
	}
	ret = state_get_int(o, "prog_id", false, 0, UINT32_MAX, &v, where, err);
	if (ret)
		return ret;
	ifc->prog_id = (uint32_t)v;
	ret = state_get_int(o, "attached_at", false, 0, INT64_MAX, &v, where,
			    err);
	if (ret)
		return ret;
	ifc->attached_at = v;
	/* the namespace: absent in an older edgectl's file */
	if (json_object_get(o, "netns")) {
		ret = state_get_int(o, "netns", false, 0, INT64_MAX, &v, where,
				    err);
		if (ret)
			return ret;
		ifc->netns = (uint64_t)v;
	}
	if (json_object_get(o, "netns_name")) {
		s = state_get_str(o, "netns_name", where, err);
		if (!s)
			return -EINVAL;
		if (strlen(s) >= sizeof(ifc->netns_name) || strchr(s, '/') ||
		    utf8_check_text(s, strlen(s), NULL)) {
			errbuf_set(err, "%s: bad netns_name", where);
			return -EINVAL;
		}
		snprintf(ifc->netns_name, sizeof(ifc->netns_name), "%s", s);
	}
	return 0;
}

/* Whether st records ifc's name in ifc's namespace already (netns 0, an
 * older file's, being one namespace of its own). */
static bool state_iface_dup(const struct state *st,
			    const struct state_iface *ifc)
{
	size_t i;

	for (i = 0; i < st->n_ifaces; i++)
		if (strcmp(st->ifaces[i].name, ifc->name) == 0 &&
		    st->ifaces[i].netns == ifc->netns)
			return true;
	return false;
}

static int state_from_json(json_t *root, struct state *st, struct errbuf *err)
{
	struct errbuf sub = {""};
	json_t *a, *o;
	const char *s;
	json_int_t v;
	size_t i;
	int ret;

	if (!json_is_object(root)) {
		errbuf_set(err, "not a JSON object");
		return -EINVAL;
	}
	ret =
	    state_get_int(root, "version", false, 0, INT32_MAX, &v, "top", err);
	if (ret)
		return ret;
	if (v != STATE_VERSION) {
		errbuf_set(err,
			   "unsupported version %lld (this edgectl reads "
			   "version %d)",
			   (long long)v, STATE_VERSION);
		return -EINVAL;
	}
	s = state_get_str(root, "policy", "top", err);
	if (!s)
		return -EINVAL;
	if (strcmp(s, "blocklist") == 0)
		st->policy = EDGE_POLICY_BLOCKLIST;
	else if (strcmp(s, "allowlist") == 0)
		st->policy = EDGE_POLICY_ALLOWLIST;
	else {
		errbuf_set(err, "unknown policy '%s'", s);
		return -EINVAL;
	}
	s = state_get_str(root, "ports", "top", err);
	if (!s)
		return -EINVAL;
	if (policy_ports_parse(s, &st->ports, &sub)) {
		errbuf_set(err, "%s", sub.msg);
		return -EINVAL;
	}
	o = json_object_get(root, "ratelimit");
	if (o && !json_is_object(o)) {
		errbuf_set(err, "'ratelimit' is not an object");
		return -EINVAL;
	}
	ret = state_load_rl(o, "syn", &st->syn, err);
	if (!ret)
		ret = state_load_rl(o, "pkt", &st->pkt, err);
	if (ret)
		return ret;

	a = json_object_get(root, "rules");
	if (!json_is_array(a)) {
		errbuf_set(err, "'rules' is missing or not an array");
		return -EINVAL;
	}
	for (i = 0; i < json_array_size(a); i++) {
		struct rule x;

		ret = state_load_rule(json_array_get(a, i), i, &x, err);
		if (ret)
			return ret;
		ret = rules_add_loaded(&st->rules, &x);
		if (ret == -ENOMEM)
			return ret;
		if (ret) {
			errbuf_set(err, "rules[%zu]: too many rules", i);
			return -EINVAL;
		}
	}
	ret = rules_validate(&st->rules);
	if (ret == -ENOMEM)
		return ret;
	if (ret) {
		errbuf_set(err, "two rules share a prefix or an id");
		return -EINVAL;
	}
	a = json_object_get(root, "interfaces");
	if (a && !json_is_array(a)) {
		errbuf_set(err, "'interfaces' is not an array");
		return -EINVAL;
	}
	for (i = 0; a && i < json_array_size(a); i++) {
		struct state_iface ifc;

		ret = state_load_iface(json_array_get(a, i), i, &ifc, err);
		if (ret)
			return ret;
		if (state_iface_dup(st, &ifc)) {
			errbuf_set(err,
				   "interfaces[%zu]: duplicate name and "
				   "namespace",
				   i);
			return -EINVAL;
		}
		ret = state_iface_set(st, &ifc, 0);
		if (ret)
			return ret;
	}
	return 0;
}

int state_load(const char *path, struct state *st, struct errbuf *err)
{
	struct errbuf sub = {""};
	json_error_t jerr;
	json_t *root = NULL;
	struct stat sb;
	int fd, ret;

	state_init(st);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		if (ret != -ENOENT)
			errbuf_set(err, "cannot read state file %s: %s", path,
				   strerror(-ret));
		return ret;
	}
	if (fstat(fd, &sb) == 0 && !S_ISREG(sb.st_mode)) {
		errbuf_set(err, "state file %s is not a regular file", path);
		ret = -EINVAL;
		goto out;
	}
	root = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		errbuf_set(err,
			   "state file %s is corrupt (line %d, column %d: "
			   "%s); fix or move it away (rules in it would be "
			   "lost)",
			   path, jerr.line, jerr.column, jerr.text);
		ret = -EINVAL;
		goto out;
	}
	ret = state_from_json(root, st, &sub);
	if (ret) {
		errbuf_set(err,
			   "state file %s is corrupt: %s; fix or move it "
			   "away (rules in it would be lost)",
			   path, sub.msg[0] ? sub.msg : strerror(-ret));
		state_free(st);
		state_init(st);
	}
out:
	json_decref(root);
	close(fd);
	return ret;
}

/* ---- saving ------------------------------------------------------- */

static json_t *state_rl_json(const struct policy_rl *rl)
{
	return json_pack("{s:I,s:I}", "per_minute", (json_int_t)rl->rate,
			 "burst", (json_int_t)rl->burst);
}

/* Check what the file stores as text the way the loader will, so that a
 * state that cannot be read back is never written. */
static int state_check_text(const struct state *st, struct errbuf *err)
{
	struct errbuf sub = {""};
	char c[CIDR_STR_MAX];
	size_t i;

	for (i = 0; i < st->rules.n; i++) {
		const struct rule *r = &st->rules.v[i];

		if (rules_comment_check(r->comment, &sub)) {
			errbuf_set(err, "rule %s: %s",
				   cidr_format(&r->cidr, c, sizeof(c)),
				   sub.msg);
			return -EINVAL;
		}
	}
	for (i = 0; i < st->n_ifaces; i++) {
		const char *name = st->ifaces[i].name;
		const char *ns = st->ifaces[i].netns_name;

		if (utf8_check_text(name, strlen(name), &sub)) {
			errbuf_set(err, "interface name: %s", sub.msg);
			return -EINVAL;
		}
		if (utf8_check_text(ns, strlen(ns), &sub)) {
			errbuf_set(err, "network namespace name: %s", sub.msg);
			return -EINVAL;
		}
	}
	return 0;
}

/* The JSON of st into *out. Returns 0 or -errno with err saying why:
 * -ENOMEM only when memory ran out. */
static int state_to_json(const struct state *st, json_t **out,
			 struct errbuf *err)
{
	json_t *root = NULL, *rules, *ifaces, *x;
	json_error_t jerr;
	char *ports = NULL;
	char c[CIDR_STR_MAX];
	struct rules sorted = {0};
	size_t i;
	int ret;

	*out = NULL;
	ret = state_check_text(st, err);
	if (ret)
		return ret;
	ret = -ENOMEM;
	errbuf_set(err, "out of memory");
	memset(&jerr, 0, sizeof(jerr));
	ports = policy_ports_format(&st->ports);
	rules = json_array();
	ifaces = json_array();
	if (!ports || !rules || !ifaces)
		goto fail;
	/* a sorted copy keeps the file stable and diffable */
	if (st->rules.n) {
		sorted.v = malloc(st->rules.n * sizeof(*sorted.v));
		if (!sorted.v)
			goto fail;
		memcpy(sorted.v, st->rules.v, st->rules.n * sizeof(*sorted.v));
		sorted.n = sorted.cap = st->rules.n;
		rules_sort(&sorted);
	}
	for (i = 0; i < sorted.n; i++) {
		const struct rule *r = &sorted.v[i];

		x = json_pack_ex(
		    &jerr, 0, "{s:I,s:s,s:s,s:o,s:s}", "id", (json_int_t)r->id,
		    "cidr", cidr_format(&r->cidr, c, sizeof(c)), "action",
		    rules_action_name(r->action), "expires_at",
		    r->expires_at ? json_integer(r->expires_at) : json_null(),
		    "comment", r->comment);
		if (!x)
			goto fail_pack;
		if (json_array_append_new(rules, x))
			goto fail;
	}
	for (i = 0; i < st->n_ifaces; i++) {
		const struct state_iface *f = &st->ifaces[i];

		x = json_pack_ex(&jerr, 0, "{s:s,s:i,s:s,s:I,s:I}", "name",
				 f->name, "ifindex", f->ifindex, "mode",
				 state_mode_name(f->mode), "prog_id",
				 (json_int_t)f->prog_id, "attached_at",
				 (json_int_t)f->attached_at);
		if (!x)
			goto fail_pack;
		if (f->netns &&
		    (json_object_set_new(x, "netns",
					 json_integer((json_int_t)f->netns)) ||
		     (f->netns_name[0] &&
		      json_object_set_new(x, "netns_name",
					  json_string(f->netns_name))))) {
			json_decref(x);
			goto fail;
		}
		if (json_array_append_new(ifaces, x))
			goto fail;
	}
	root = json_pack_ex(
	    &jerr, 0, "{s:i,s:s,s:s,s:{s:o,s:o},s:o,s:o}", "version",
	    STATE_VERSION, "policy", state_policy_name(st->policy), "ports",
	    ports, "ratelimit", "syn", state_rl_json(&st->syn), "pkt",
	    state_rl_json(&st->pkt), "rules", rules, "interfaces", ifaces);
	rules = ifaces = NULL; /* stolen by json_pack, even on failure */
	if (!root)
		goto fail_pack;
	*out = root;
	ret = 0;
	errbuf_clear(err);
	goto fail;
fail_pack:
	/* jansson says why: memory, or a value it cannot hold */
	if (json_error_code(&jerr) != json_error_out_of_memory) {
		ret = -EINVAL;
		errbuf_set(err, "%s",
			   jerr.text[0] ? jerr.text
					: "a value JSON cannot hold");
	}
fail:
	json_decref(rules);
	json_decref(ifaces);
	free(sorted.v);
	free(ports);
	return ret;
}

static int state_write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int state_prepare(struct state_pending *sp, const char *path,
		  const struct state *st, struct errbuf *err)
{
	struct errbuf sub = {""};
	json_t *root = NULL;
	char *text = NULL;
	int fd = -1, ret;

	memset(sp, 0, sizeof(*sp));
	if (snprintf(sp->path, sizeof(sp->path), "%s", path) >=
		(int)sizeof(sp->path) ||
	    snprintf(sp->tmp, sizeof(sp->tmp), "%s.tmp", path) >=
		(int)sizeof(sp->tmp)) {
		errbuf_set(err, "state path too long: %s", path);
		return -ENAMETOOLONG;
	}
	ret = state_to_json(st, &root, &sub);
	if (!ret) {
		text = json_dumps(root, JSON_INDENT(2));
		if (!text) {
			ret = -ENOMEM;
			errbuf_set(&sub, "out of memory");
		}
	}
	if (ret) {
		errbuf_set(err, "cannot encode the state: %s", sub.msg);
		goto out;
	}
	fd = open(sp->tmp,
		  O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		ret = -errno;
		errbuf_set(err, "cannot write %s: %s", sp->tmp, strerror(-ret));
		goto out;
	}
	sp->ready = true; /* ours to remove from here on */
	ret = state_write_all(fd, text, strlen(text));
	if (!ret)
		ret = state_write_all(fd, "\n", 1);
	if (!ret && (fchmod(fd, 0600) || fsync(fd)))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (ret)
		errbuf_set(err, "cannot write %s: %s", sp->tmp, strerror(-ret));
out:
	if (ret)
		state_abort(sp);
	free(text);
	json_decref(root);
	return ret;
}

int state_commit(struct state_pending *sp, struct errbuf *err)
{
	char dir[PATH_MAX], *slash;
	int dfd, ret;

	if (!sp->ready) {
		errbuf_set(err, "no state file prepared");
		return -EINVAL;
	}
	if (rename(sp->tmp, sp->path)) {
		ret = -errno;
		errbuf_set(err, "cannot replace %s: %s", sp->path,
			   strerror(-ret));
		state_abort(sp);
		return ret;
	}
	sp->ready = false;
	/* in place; what follows only makes it survive a crash */
	snprintf(dir, sizeof(dir), "%s", sp->path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir)
		*slash = '\0';
	else
		snprintf(dir, sizeof(dir), "%s", slash ? "/" : ".");
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd))
		errbuf_set(err,
			   "%s was replaced, but syncing directory %s failed "
			   "(%s): the change may not survive a crash",
			   sp->path, dir, strerror(errno));
	if (dfd >= 0)
		close(dfd);
	return 0;
}

void state_abort(struct state_pending *sp)
{
	if (!sp || !sp->ready)
		return;
	unlink(sp->tmp);
	sp->ready = false;
}

int state_save(const char *path, const struct state *st, struct errbuf *err)
{
	struct state_pending sp;
	int ret;

	ret = state_prepare(&sp, path, st, err);
	if (!ret)
		ret = state_commit(&sp, err);
	return ret;
}

/* ---- lock --------------------------------------------------------- */

/* mkdir -p with mode for every directory created. */
static int state_mkdirs(const char *dir, mode_t mode)
{
	char buf[PATH_MAX];
	char *p;

	if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) && errno != EEXIST)
		return -errno;
	return 0;
}

int state_lock(const char *dir, bool exclusive, bool create, struct errbuf *err)
{
	int fd, ret;

	if (create) {
		ret = state_mkdirs(dir, 0700);
		if (ret) {
			errbuf_set(err, "cannot create state directory %s: %s",
				   dir, strerror(-ret));
			return ret;
		}
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		if (ret != -ENOENT || create)
			errbuf_set(err, "cannot open state directory %s: %s",
				   dir, strerror(-ret));
		return ret;
	}
	while (flock(fd, exclusive ? LOCK_EX : LOCK_SH)) {
		if (errno == EINTR)
			continue;
		ret = -errno;
		errbuf_set(err, "cannot lock state directory %s: %s", dir,
			   strerror(-ret));
		close(fd);
		return ret;
	}
	return fd;
}

void state_unlock(int fd)
{
	if (fd < 0)
		return;
	flock(fd, LOCK_UN);
	close(fd);
}
