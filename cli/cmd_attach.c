/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cmd_attach.c - edgectl attach|detach|status: edge's XDP program on
 * interfaces, and the overall picture.
 *
 * attach fills the pinned maps from the state before the program first
 * runs, so a (re)attach never opens a window in which saved rules are
 * missing. detach unpins the maps once no program uses them any more.
 * An interface is recorded with the network namespace it was attached
 * in: detach acts in its own namespace only, and detach --all enters
 * each recorded one.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "attach.h"
#include "ctlutil.h"
#include "netns.h"
#include "utf8.h"

/* One interface argument, checked for length. */
static int att_iface_arg(const char *cmd, int argc, char **argv)
{
	if (optind >= argc)
		return ctl_usage_error(cmd, "%s: missing interface name", cmd);
	if (optind + 1 < argc)
		return ctl_usage_error(cmd, "%s: unexpected argument '%s'", cmd,
				       argv[optind + 1]);
	if (!*argv[optind])
		return ctl_usage_error(cmd, "%s: empty interface name", cmd);
	return CTL_OK;
}

static int att_ifindex(const char *name)
{
	int ifindex = 0;

	if (strlen(name) < IF_NAMESIZE)
		ifindex = (int)if_nametoindex(name);
	if (!ifindex)
		log_warnx("no such interface: %s", name);
	return ifindex;
}

/* The namespace an older file's record (no netns) is taken to be in:
 * PID 1's, or this one's when PID 1's cannot be read (a process without
 * CAP_SYS_PTRACE, such as edge-attach@'s unit, or in a container). */
static uint64_t att_init(uint64_t self)
{
	uint64_t init = netns_init();

	return init ? init : self;
}

/* mkdir -p on bpffs. 0711: others may look a pin up (stat) but neither
 * list the directory nor open a pin (0600, and CAP_BPF besides), so that
 * an unprivileged edged can tell the pins were replaced and say so. */
static int att_mkdir_pins(const char *dir)
{
	char buf[PATH_MAX];
	char *p;

	snprintf(buf, sizeof(buf), "%s", dir);
	for (p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0711) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0711) && errno != EEXIST)
		return -errno;
	return 0;
}

/* Unpin the maps when no program uses them any more. Programs that were
 * just detached may take a moment to be freed: poll up to a second. */
static void att_unpin_if_unused(struct ctl *c, bool *unpinned)
{
	bool in_use = true;
	int i, ret;

	*unpinned = false;
	if (!c->attached)
		return;
	attach_close_prog_fds();
	for (i = 0; i < 50; i++) {
		ret = attach_maps_in_use(&c->pins, &in_use);
		if (ret || !in_use)
			break;
		usleep(20000);
	}
	if (ret || in_use) {
		log_debug("maps in %s still in use (%s): pins kept", c->pin_dir,
			  ret ? strerror(-ret) : "by a program");
		return;
	}
	pins_close(&c->pins);
	c->attached = false;
	ret = pins_unpin(c->pin_dir);
	if (ret)
		log_warnx("cannot remove the pins in %s: %s", c->pin_dir,
			  strerror(-ret));
	else
		*unpinned = true;
}

/* Make the maps that exist match the state: a leftover of a failed
 * command or an entry written behind edgectl's back goes. Says what it
 * fixed. */
static int att_reconcile(struct ctl *c)
{
	struct pins_sync_stats st;
	struct errbuf err = {""};
	char what[256];
	int n = 0;

	if (pins_sync(&c->pins, &c->st, c->now, c->boot_now, &st, &err)) {
		log_warnx("cannot make the maps in %s match the state: %s",
			  c->pin_dir, err.msg);
		return CTL_FAIL;
	}
	what[0] = '\0';
	if (st.removed)
		n += snprintf(what + n, sizeof(what) - (size_t)n,
			      "removed %zu map entr%s that the state did not "
			      "hold",
			      st.removed, st.removed == 1 ? "y" : "ies");
	if (st.restored)
		n += snprintf(what + n, sizeof(what) - (size_t)n,
			      "%srestored %zu rule%s missing from the maps",
			      n ? ", " : "", st.restored,
			      st.restored == 1 ? "" : "s");
	if (st.corrected)
		snprintf(what + n, sizeof(what) - (size_t)n,
			 "%scorrected %zu map entr%s that differed from "
			 "the state",
			 n ? ", " : "", st.corrected,
			 st.corrected == 1 ? "y" : "ies");
	if (what[0])
		log_note("the maps in %s did not match the state: %s",
			 c->pin_dir, what);
	return CTL_OK;
}

int cmd_attach(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"mode", required_argument, NULL, 'm'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct errbuf err = {""}, derr = {""};
	struct attach_info info;
	struct state_iface ifc;
	bool created = false, unpinned;
	int mode = STATE_MODE_NONE, ifindex, o, ret;
	const char *name;

	optind = 0;
	while ((o = ctl_getopt(argc, argv, ":h", opts, "attach")) != -1) {
		switch (o) {
		case 'm':
			if (strcmp(optarg, "native") == 0)
				mode = STATE_MODE_NATIVE;
			else if (strcmp(optarg, "skb") == 0)
				mode = STATE_MODE_SKB;
			else
				return ctl_usage_error("attach",
						       "attach: unknown mode "
						       "'%s' (use native or "
						       "skb)",
						       optarg);
			break;
		case 'h':
			return ctl_usage_print("attach");
		default:
			return CTL_USAGE;
		}
	}
	ret = att_iface_arg("attach", argc, argv);
	if (ret)
		return ret;
	name = argv[optind];
	/* the state file must be able to record it */
	if (utf8_check_text(name, strlen(name), &err))
		return ctl_usage_error(
		    "attach", "attach: the interface name has %s", err.msg);

	ret = ctl_begin(c, CTL_WRITE | CTL_BPFFS);
	if (ret)
		return ret;
	/* whatever follows, maps that exist are made to match the state */
	if (c->attached) {
		ret = att_reconcile(c);
		if (ret)
			return ret;
	}
	ifindex = att_ifindex(name);
	if (!ifindex)
		return CTL_FAIL;
	ret = attach_query(ifindex, &info, &err);
	if (ret) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	}
	if (info.attached) {
		log_warnx("edge is already attached to %s (%s mode)", name,
			  state_mode_name(info.mode));
		return CTL_FAIL;
	}

	/* maps first, filled from the state, then the program */
	if (!c->attached) {
		ret = att_mkdir_pins(c->pin_dir);
		if (ret) {
			log_warnx("cannot create pin directory %s: %s",
				  c->pin_dir, strerror(-ret));
			return CTL_FAIL;
		}
		ret = attach_create_maps(c->pin_dir, &err);
		if (!ret)
			ret = pins_open(&c->pins, c->pin_dir, &err);
		if (!ret) {
			c->attached = true;
			created = true;
			ret = pins_sync(&c->pins, &c->st, c->now, c->boot_now,
					NULL, &err);
		}
		if (ret) {
			log_warnx("%s", err.msg);
			pins_close(&c->pins);
			c->attached = false;
			pins_unpin(c->pin_dir);
			return CTL_FAIL;
		}
	}
	ret = attach_iface(c->pin_dir, ifindex, mode, &info, &err);
	if (ret) {
		log_warnx("%s", err.msg[0] ? err.msg : strerror(-ret));
		if (created)
			att_unpin_if_unused(c, &unpinned);
		return CTL_FAIL;
	}

	/* record it; a state that cannot be saved takes the program off
	 * again */
	memset(&ifc, 0, sizeof(ifc));
	snprintf(ifc.name, sizeof(ifc.name), "%s", name);
	ifc.ifindex = ifindex;
	ifc.mode = info.mode;
	ifc.prog_id = info.prog_id;
	ifc.attached_at = c->now;
	ifc.netns = netns_self();
	netns_name(ifc.netns, ifc.netns_name, sizeof(ifc.netns_name));
	errbuf_clear(&err);
	ret = state_iface_set(&c->st, &ifc, att_init(ifc.netns));
	if (ret)
		errbuf_set(&err, "out of memory");
	else
		ret = state_save(c->state_path, &c->st, &err);
	if (ret) {
		if (attach_detach(ifindex, &derr)) {
			log_warnx("%s; and edge could not be taken off %s "
				  "again (%s): it runs there with the saved "
				  "rules but is not recorded in the state "
				  "(edgectl detach %s removes it)",
				  err.msg, name, derr.msg, name);
			return CTL_FAIL;
		}
		if (created)
			att_unpin_if_unused(c, &unpinned);
		log_warnx("%s; edge was taken off %s again: nothing was "
			  "changed",
			  err.msg, name);
		return CTL_FAIL;
	}
	if (err.msg[0])
		log_warnx("warning: %s", err.msg);
	printf("attached edge to %s (%s mode%s, program id %u); %zu rule%s, "
	       "policy %s\n",
	       name, state_mode_name(info.mode),
	       mode == STATE_MODE_NONE && info.mode == STATE_MODE_SKB
		   ? ": the driver has no native XDP"
		   : "",
	       info.prog_id, c->st.rules.n, c->st.rules.n == 1 ? "" : "s",
	       state_policy_name(c->st.policy));
	return CTL_OK;
}

/* What att_detach_here did. */
enum att_det {
	ATT_DET_DONE,	      /* edge taken off, the record forgotten */
	ATT_DET_FORGOTTEN,    /* no such interface: its record forgotten */
	ATT_DET_NOT_THERE,    /* no such interface, nor a record of it */
	ATT_DET_NOT_ATTACHED, /* edge was not on it (a record forgotten) */
	ATT_DET_FAILED,	      /* nothing changed, said why */
};

/*
 * Take edge off interface name of the network namespace this thread is
 * in, and forget its record there (ns, as state_iface_find takes it):
 * the state without it is written first, put in place once the program
 * is off. where (" in network namespace blue, inode N" or "") follows
 * the name in messages. Prints what it did.
 */
static enum att_det att_detach_here(struct ctl *c, const char *name,
				    uint64_t ns, uint64_t init,
				    const char *where)
{
	struct errbuf err = {""};
	struct state_pending sp;
	bool known;
	int ifindex = 0, ret;

	known = state_iface_del(&c->st, name, ns, init) == 0;
	if (strlen(name) < IF_NAMESIZE)
		ifindex = (int)if_nametoindex(name);
	if (!ifindex) {
		if (!known)
			return ATT_DET_NOT_THERE;
		if (ctl_change(c, NULL, NULL) != CTL_OK)
			return ATT_DET_FAILED;
		log_note("forgot %s%s, which no longer exists", name, where);
		return ATT_DET_FORGOTTEN;
	}
	/* the state without the interface is written first: when it cannot
	 * be, edge stays on the interface */
	ret = state_prepare(&sp, c->state_path, &c->st, &err);
	if (ret) {
		log_warnx("%s; nothing was changed: edge stays attached to "
			  "%s%s",
			  err.msg, name, where);
		return ATT_DET_FAILED;
	}
	ret = attach_detach(ifindex, &err);
	if (ret == -ENOENT) {
		log_warnx("edge is not attached to %s%s", name, where);
		errbuf_clear(&err);
		if (!known)
			state_abort(&sp);
		else if (state_commit(&sp, &err) || err.msg[0])
			log_warnx("%s", err.msg);
		return ATT_DET_NOT_ATTACHED;
	}
	if (ret) {
		state_abort(&sp);
		log_warnx("%s", err.msg);
		return ATT_DET_FAILED;
	}
	errbuf_clear(&err);
	ret = state_commit(&sp, &err);
	if (ret) {
		log_warnx("edge was detached from %s%s, but %s: the state file "
			  "still lists %s (status shows it stale; the next "
			  "'edgectl detach %s' forgets it)",
			  name, where, err.msg, name, name);
		return ATT_DET_FAILED;
	}
	if (err.msg[0])
		log_warnx("warning: %s", err.msg);
	printf("detached edge from %s%s\n", name, where);
	return ATT_DET_DONE;
}

/* The namespace a record is in (an older file's record: att_init's). */
static uint64_t att_rec_netns(const struct state_iface *f, uint64_t init)
{
	return f->netns ? f->netns : init;
}

/* " in DESCRIPTION" of a record's namespace, for messages. */
static const char *att_where(const struct state_iface *f, uint64_t init,
			     char *buf, size_t len)
{
	char d[NETNS_NAME_MAX + 64];

	snprintf(buf, len, " in %s",
		 netns_describe(att_rec_netns(f, init), f->netns_name, d,
				sizeof(d)));
	return buf;
}

/* edgectl detach --all: every recorded interface, each in its own
 * namespace (one that is gone: its records forgotten), then every
 * interface of this namespace edge still runs on. */
static int att_detach_all(struct ctl *c, uint64_t self, uint64_t init)
{
	char where[NETNS_NAME_MAX + 80];
	struct if_nameindex *all, *it;
	struct state_iface *recs = NULL, *f;
	bool failed = false;
	size_t i, nrec = c->st.n_ifaces, n = 0;
	int fd, back, ret;

	/* the records as loaded: each done changes c->st */
	if (nrec && !(recs = malloc(nrec * sizeof(*recs)))) {
		log_warnx("out of memory");
		return CTL_FAIL;
	}
	if (nrec)
		memcpy(recs, c->st.ifaces, nrec * sizeof(*recs));
	for (i = 0; i < nrec; i++) {
		uint64_t ns;

		f = &recs[i];
		ns = att_rec_netns(f, init);
		att_where(f, init, where, sizeof(where));
		if (ns == self || !ns) {
			ret = att_detach_here(c, f->name, ns, init, "");
		} else if ((fd = netns_open(ns)) == -ENOENT) {
			state_iface_del(&c->st, f->name, ns, init);
			ret = ATT_DET_FAILED;
			if (ctl_change(c, NULL, NULL) == CTL_OK) {
				log_note("forgot %s%s: that namespace is gone",
					 f->name, where);
				ret = ATT_DET_FORGOTTEN;
			}
		} else if (fd < 0 || (ret = netns_enter(fd, &back)) < 0) {
			log_warnx("cannot enter the %s of %s: %s", where + 4,
				  f->name, strerror(fd < 0 ? -fd : -ret));
			if (fd >= 0)
				close(fd);
			ret = ATT_DET_FAILED;
		} else {
			close(fd);
			ret = att_detach_here(c, f->name, ns, init, where);
			if (netns_leave(back)) {
				log_warnx("cannot go back to this network "
					  "namespace: stopping");
				free(recs);
				return CTL_FAIL;
			}
		}
		if (ret == ATT_DET_FAILED) {
			/* kept: the state file still has it, and so must
			 * every later write of c->st */
			failed = true;
			if (!state_iface_find(&c->st, f->name, ns, init) &&
			    state_iface_set(&c->st, f, init))
				log_warnx("out of memory");
		}
		n += ret == ATT_DET_DONE;
	}
	free(recs);
	/* edge on an interface of this namespace that is not recorded (one
	 * whose record failed above is left as it is) */
	all = if_nameindex();
	for (it = all; it && it->if_index; it++) {
		struct attach_info info;

		if (state_iface_find(&c->st, it->if_name, self, init) ||
		    attach_query((int)it->if_index, &info, NULL) ||
		    !info.attached)
			continue;
		snprintf(where, sizeof(where), " (not recorded in the state)");
		ret = att_detach_here(c, it->if_name, self, init, where);
		if (ret == ATT_DET_FAILED)
			failed = true;
		n += ret == ATT_DET_DONE;
	}
	if (all)
		if_freenameindex(all);
	if (!n && !failed)
		printf("edge is attached to no interface\n");
	return failed ? CTL_FAIL : CTL_OK;
}

int cmd_detach(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"all", no_argument, NULL, 'a'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	char where[NETNS_NAME_MAX + 80];
	bool all = false, unpinned = false;
	uint64_t self, init;
	size_t i, others = 0;
	int o, ret;
	enum att_det det;
	const char *name;

	optind = 0;
	while ((o = ctl_getopt(argc, argv, ":h", opts, "detach")) != -1) {
		if (o == 'a')
			all = true;
		else if (o == 'h')
			return ctl_usage_print("detach");
		else
			return CTL_USAGE;
	}
	if (all && optind < argc)
		return ctl_usage_error(
		    "detach", "detach: --all takes no interface ('%s')",
		    argv[optind]);
	if (!all) {
		ret = att_iface_arg("detach", argc, argv);
		if (ret)
			return ret;
	}
	ret = ctl_begin(c, CTL_WRITE | CTL_BPFFS);
	if (ret)
		return ret;
	self = netns_self();
	init = att_init(self);
	if (all) {
		ret = att_detach_all(c, self, init);
		goto unpin;
	}
	name = argv[optind];
	/* the same name recorded in other namespaces: theirs, not this one's */
	for (i = 0; i < c->st.n_ifaces; i++)
		if (strcmp(c->st.ifaces[i].name, name) == 0 &&
		    att_rec_netns(&c->st.ifaces[i], init) != self)
			others++;
	det = att_detach_here(c, name, self, init, "");
	ret = det == ATT_DET_DONE ? CTL_OK : CTL_FAIL;
	if (det == ATT_DET_NOT_THERE || det == ATT_DET_FORGOTTEN)
		log_warnx("no such interface: %s (here, in %s)", name,
			  netns_describe(self, NULL, where, sizeof(where)));
	for (i = 0; others && i < c->st.n_ifaces; i++) {
		const struct state_iface *f = &c->st.ifaces[i];

		if (strcmp(f->name, name) || att_rec_netns(f, init) == self)
			continue;
		att_where(f, init, where, sizeof(where));
		log_note("%s%s is another interface: left attached and "
			 "recorded (detach it there, e.g. nsenter "
			 "--net=%s/%s edgectl detach %s, or edgectl detach "
			 "--all)",
			 name, where, NETNS_RUN_DIR,
			 f->netns_name[0] ? f->netns_name : "NAME", name);
	}
unpin:
	att_unpin_if_unused(c, &unpinned);
	if (unpinned)
		printf("edge is attached nowhere now: maps unpinned from %s "
		       "(rules stay saved in %s)\n",
		       c->pin_dir, c->state_path);
	return ret;
}

/* ---- status ------------------------------------------------------- */

struct status_iface {
	char name[IF_NAMESIZE];
	uint64_t netns;			 /* the namespace it is in */
	char netns_name[NETNS_NAME_MAX]; /* its name ("" for none) */
	bool here;			 /* this process's namespace */
	int ifindex;			 /* now; 0 when gone */
	struct attach_info info;
	bool recorded;	       /* in the state */
	const char *condition; /* "attached", "stale: ..." */
};

static int status_add(struct status_iface **v, size_t *n, const char *name,
		      uint64_t netns)
{
	struct status_iface *nv;
	size_t i;

	for (i = 0; i < *n; i++)
		if (strcmp((*v)[i].name, name) == 0 && (*v)[i].netns == netns)
			return (int)i;
	nv = realloc(*v, (*n + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	memset(&nv[*n], 0, sizeof(nv[*n]));
	snprintf(nv[*n].name, sizeof(nv[*n].name), "%s", name);
	nv[*n].netns = netns;
	return (int)(*n)++;
}

/* s->ifindex and s->info of an interface of another namespace, looked at
 * from inside it; the condition when that cannot be done. */
static void status_foreign(struct status_iface *s)
{
	int fd = netns_open(s->netns), back;

	if (fd == -ENOENT) {
		s->condition = "stale: its network namespace is gone";
		return;
	}
	if (fd < 0 || netns_enter(fd, &back)) {
		s->condition = "in another network namespace (not looked at: "
			       "cannot enter it)";
		if (fd >= 0)
			close(fd);
		return;
	}
	close(fd);
	s->ifindex = (int)if_nametoindex(s->name);
	if (s->ifindex)
		attach_query(s->ifindex, &s->info, NULL);
	if (netns_leave(back))
		log_warnx("cannot go back to this network namespace");
}

/* Every interface that is recorded (in its network namespace) or has
 * edge on it here, with its status. */
static int status_ifaces(struct ctl *c, struct status_iface **out, size_t *n)
{
	struct if_nameindex *all, *it;
	uint32_t ours = c->attached ? attach_map_id(&c->pins) : 0;
	uint64_t self = netns_self(), init = att_init(self);
	size_t i;
	int k;

	*out = NULL;
	*n = 0;
	for (i = 0; i < c->st.n_ifaces; i++) {
		const struct state_iface *f = &c->st.ifaces[i];

		k = status_add(out, n, f->name, att_rec_netns(f, init));
		if (k < 0)
			return k;
		(*out)[k].recorded = true;
		snprintf((*out)[k].netns_name, sizeof((*out)[k].netns_name),
			 "%s", f->netns_name);
	}
	all = if_nameindex();
	for (it = all; it && it->if_index; it++) {
		struct attach_info info;

		if (attach_query((int)it->if_index, &info, NULL) ||
		    !info.attached)
			continue;
		k = status_add(out, n, it->if_name, self);
		if (k < 0) {
			if_freenameindex(all);
			return k;
		}
	}
	if (all)
		if_freenameindex(all);
	for (i = 0; i < *n; i++) {
		struct status_iface *s = &(*out)[i];

		s->here = s->netns == self;
		if (!s->netns_name[0])
			netns_name(s->netns, s->netns_name,
				   sizeof(s->netns_name));
		if (!s->here) {
			status_foreign(s);
			if (s->condition)
				continue;
		} else {
			s->ifindex = (int)if_nametoindex(s->name);
			if (s->ifindex)
				attach_query(s->ifindex, &s->info, NULL);
		}
		if (!s->ifindex)
			s->condition = "stale: interface is gone";
		else if (!s->info.attached)
			s->condition = "stale: edge's program is gone";
		else if (ours && s->info.counters_map_id &&
			 s->info.counters_map_id != ours)
			s->condition = "attached, with maps other than those "
				       "pinned here";
		else if (!s->recorded)
			s->condition = "attached (not recorded in the state)";
		else
			s->condition = "attached";
	}
	return 0;
}

static void status_rl_text(const struct policy_rl *rl, char *buf, size_t len)
{
	char rate[32];

	if (!rl->rate) {
		snprintf(buf, len, "off");
		return;
	}
	policy_rate_format(rl->rate, rate, sizeof(rate));
	snprintf(buf, len, "%s per source, burst %llu", rate,
		 (unsigned long long)rl->burst);
}

static json_t *status_rl_json(const struct policy_rl *rl)
{
	if (!rl->rate)
		return json_null();
	return json_pack("{s:I,s:I}", "per_minute", (json_int_t)rl->rate,
			 "burst", (json_int_t)rl->burst);
}

int cmd_status(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	static const char *const ctr_names[] = {
#define STATUS_CTR_NAME(id, name, help) name,
	    EDGE_COUNTERS(STATUS_CTR_NAME)
#undef STATUS_CTR_NAME
	};
	struct errbuf bpffs = {""};
	struct status_iface *ifs = NULL;
	uint64_t ctr[EDGE_CTR_MAX];
	size_t nifs = 0, i, nblock = 0, nv6 = 0, nttl = 0, nrules = 0;
	struct errbuf derr = {""};
	json_t *dstatus = NULL;
	bool json = false, have_ctr = false;
	int dret;
	char *ports = NULL, syn[64], pkt[64];
	int o, ret;

	optind = 0;
	while ((o = ctl_getopt(argc, argv, ":h", opts, "status")) != -1) {
		if (o == 'j')
			json = true;
		else if (o == 'h')
			return ctl_usage_print("status");
		else
			return CTL_USAGE;
	}
	if (optind < argc)
		return ctl_usage_error(
		    "status", "status: unexpected argument '%s'", argv[optind]);
	ret = ctl_begin(c, CTL_READ);
	if (ret)
		return ret;
	pins_check_bpffs(c->pin_dir, &bpffs);
	if (status_ifaces(c, &ifs, &nifs)) {
		log_warnx("out of memory");
		ret = CTL_FAIL;
		goto out;
	}
	for (i = 0; i < c->st.rules.n; i++) {
		const struct rule *x = &c->st.rules.v[i];

		if (rules_expired(x, c->now))
			continue;
		nrules++;
		nblock += x->action == EDGE_ACT_BLOCK;
		nv6 += x->cidr.family != AF_INET;
		nttl += x->expires_at != 0;
	}
	if (c->attached)
		have_ctr = pins_counters_read(&c->pins, ctr) == 0;
	dret = ctl_daemon_call(c, "status", &dstatus, &derr);
	ports = policy_ports_format(&c->st.ports);
	if (!ports) {
		log_warnx("out of memory");
		ret = CTL_FAIL;
		goto out;
	}
	status_rl_text(&c->st.syn, syn, sizeof(syn));
	status_rl_text(&c->st.pkt, pkt, sizeof(pkt));

	if (json) {
		json_t *root, *jifs = json_array(), *jctr = NULL;

		for (i = 0; jifs && i < nifs; i++) {
			const struct status_iface *s = &ifs[i];

			json_array_append_new(
			    jifs,
			    json_pack(
				"{s:s,s:o,s:b,s:s,s:o,s:s,s:I,s:o,s:b}", "name",
				s->name, "ifindex",
				s->ifindex ? json_integer(s->ifindex)
					   : json_null(),
				"attached", s->info.attached, "mode",
				state_mode_name(s->info.mode), "prog_id",
				s->info.attached ? json_integer(s->info.prog_id)
						 : json_null(),
				"condition", s->condition, "netns",
				(json_int_t)s->netns, "netns_name",
				s->netns_name[0] ? json_string(s->netns_name)
						 : json_null(),
				"netns_here", s->here));
		}
		if (have_ctr) {
			jctr = json_object();
			for (i = 0; jctr && i < EDGE_CTR_MAX; i++)
				json_object_set_new(
				    jctr, ctr_names[i],
				    json_integer((json_int_t)ctr[i]));
		}
		root = json_pack(
		    "{s:s,s:s,s:b,s:o,s:s,s:s,s:o,"
		    "s:{s:o,s:o},s:{s:I,s:I,s:I,s:I,s:I},"
		    "s:o,s:o}",
		    "version", EDGECTL_VERSION, "pin_dir", c->pin_dir, "pinned",
		    c->attached, "bpffs_error",
		    bpffs.msg[0] ? json_string(bpffs.msg) : json_null(),
		    "state_file", c->state_path, "policy",
		    state_policy_name(c->st.policy), "ports",
		    json_string(ports), "ratelimit", "syn",
		    status_rl_json(&c->st.syn), "pkt",
		    status_rl_json(&c->st.pkt), "rules", "total",
		    (json_int_t)nrules, "block", (json_int_t)nblock, "allow",
		    (json_int_t)(nrules - nblock), "ipv6", (json_int_t)nv6,
		    "with_ttl", (json_int_t)nttl, "daemon",
		    ctl_daemon_status_json(c, dret, dstatus, &derr), "counters",
		    jctr ? jctr : json_null());
		if (root && jifs)
			json_object_set_new(root, "interfaces", jifs);
		else
			json_decref(jifs);
		/* the fleet's database, with --pg (null without) */
		if (root)
			json_object_set_new(root, "database",
					    c->pg ? ctl_db_status_json(c)
						  : json_null());
		dstatus = NULL; /* consumed */
		ret = ctl_json_print(root);
		goto out;
	}

	printf("edgectl %s\n", EDGECTL_VERSION);
	printf("pins:       %s (%s)\n", c->pin_dir,
	       c->attached ? "maps pinned" : "no maps pinned");
	if (bpffs.msg[0])
		printf("            %s\n", bpffs.msg);
	printf("state:      %s\n", c->state_path);
	if (nifs == 0)
		printf("interfaces: none (edgectl attach IFACE)\n");
	else
		printf("interfaces:\n");
	for (i = 0; i < nifs; i++) {
		const struct status_iface *s = &ifs[i];
		char idx[16] = "-", prog[16] = "-";

		if (s->ifindex)
			snprintf(idx, sizeof(idx), "%d", s->ifindex);
		if (s->info.attached)
			snprintf(prog, sizeof(prog), "%u", s->info.prog_id);
		printf("  %-15s ifindex %-5s %-6s prog %-7s %s", s->name, idx,
		       s->info.attached ? state_mode_name(s->info.mode) : "-",
		       prog, s->condition);
		if (!s->here) {
			char d[NETNS_NAME_MAX + 64];

			printf(" [%s]", netns_describe(s->netns, s->netns_name,
						       d, sizeof(d)));
		}
		printf("\n");
	}
	printf("policy:     %s (guarded ports: %s%s)\n",
	       state_policy_name(c->st.policy), ports,
	       c->st.policy == EDGE_POLICY_ALLOWLIST
		   ? ""
		   : ", for QUIC's new connections only");
	printf("ratelimit:  new connections (TCP SYN, QUIC Initial): %s\n",
	       syn);
	printf("            packets: %s\n", pkt);
	printf("rules:      %zu (%zu block, %zu allow; %zu IPv4, %zu IPv6; "
	       "%zu with a TTL)\n",
	       nrules, nblock, nrules - nblock, nrules - nv6, nv6, nttl);
	ctl_daemon_status_print(c, dret, dstatus, &derr);
	if (c->pg)
		ctl_db_status_print(c);
	if (have_ctr) {
		printf("counters:\n");
		for (i = 0; i < EDGE_CTR_MAX; i++)
			printf("  %-18s %llu\n", ctr_names[i],
			       (unsigned long long)ctr[i]);
	} else {
		printf("counters:   none (no maps pinned)\n");
	}
	ret = CTL_OK;
out:
	json_decref(dstatus);
	free(ports);
	free(ifs);
	return ret;
}
