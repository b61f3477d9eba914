/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ctlutil.c - the steps edgectl's commands share (ctlutil.h): the root
 * check, the lock, the state and the pins (ctl_begin, ctl_end), a change
 * made all or nothing between the state file and the maps (ctl_change),
 * the database's connection, and JSON output.
 */
#include <errno.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctlutil.h"
#include "pgdb.h"

int ctl_need_root(void)
{
	if (geteuid() == 0)
		return CTL_OK;
	log_warnx("this command needs root (CAP_BPF and CAP_NET_ADMIN)");
	return CTL_FAIL;
}

int ctl_json_print(struct json_t *j)
{
	char *s;

	if (!j) {
		log_warnx("out of memory");
		return CTL_FAIL;
	}
	s = json_dumps(j, JSON_INDENT(2));
	json_decref(j);
	if (!s) {
		log_warnx("out of memory");
		return CTL_FAIL;
	}
	printf("%s\n", s);
	free(s);
	return CTL_OK;
}

static void ctl_clock(struct ctl *c)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	c->now = (int64_t)ts.tv_sec;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	c->boot_now =
	    (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Bring the maps back to c->saved after a failed change. */
static int ctl_maps_restore(struct ctl *c, struct errbuf *err)
{
	return pins_sync(&c->pins, &c->saved, c->now, c->boot_now, NULL, err);
}

int ctl_change(struct ctl *c, ctl_apply_fn apply, const void *arg)
{
	struct errbuf err = {""}, rerr = {""};
	struct state_pending sp;
	struct state copy;
	bool applied = false;
	int ret;

	ret = state_prepare(&sp, c->state_path, &c->st, &err);
	if (ret) {
		log_warnx("%s; nothing was changed", err.msg);
		return CTL_FAIL;
	}
	if (apply && c->attached) {
		applied = true;
		ret = apply(c, arg, &err);
		if (ret) {
			state_abort(&sp);
			goto undo;
		}
	}
	errbuf_clear(&err);
	ret = state_commit(&sp, &err);
	if (ret)
		goto undo;
	if (err.msg[0])
		log_warnx("warning: %s", err.msg);
	/* later changes in this run are undone to this point */
	if (state_copy(&copy, &c->st) == 0) {
		state_free(&c->saved);
		c->saved = copy;
	} else {
		/* c->saved stays one step behind. Only the prune makes a
		 * change before another one, and it removes expired rules,
		 * which pins_sync deletes from the maps anyway: an undo to
		 * the older state gives the same maps. */
		log_debug("out of memory copying the state");
	}
	return CTL_OK;
undo:
	if (applied && ctl_maps_restore(c, &rerr)) {
		log_warnx("%s; the maps could not be brought back either (%s) "
			  "and may hold the change the state file does not: "
			  "'edgectl attach IFACE' on an attached interface "
			  "makes them match the state file",
			  err.msg, rerr.msg);
		return CTL_FAIL;
	}
	log_warnx("%s; nothing was changed", err.msg);
	return CTL_FAIL;
}

/* Delete the map entries of the expired rules in arg (struct rules). */
static int ctl_prune_apply(struct ctl *c, const void *arg, struct errbuf *err)
{
	const struct rules *gone = arg;
	char s[CIDR_STR_MAX];
	size_t i;
	int ret;

	for (i = 0; i < gone->n; i++) {
		ret = pins_rule_del(&c->pins, &gone->v[i].cidr);
		if (ret && ret != -ENOENT) {
			errbuf_set(err,
				   "cannot remove expired rule %s from the "
				   "map: %s",
				   cidr_format(&gone->v[i].cidr, s, sizeof(s)),
				   strerror(-ret));
			return ret;
		}
	}
	return 0;
}

/* Remove expired rules from maps and state. */
static int ctl_prune(struct ctl *c)
{
	struct rules gone = {0};
	char s[CIDR_STR_MAX];
	size_t i;
	int n, ret = CTL_OK;

	n = rules_prune(&c->st.rules, c->now, &gone);
	if (n < 0) {
		log_warnx("out of memory");
		return CTL_FAIL;
	}
	for (i = 0; i < gone.n; i++)
		log_debug("rule %s expired: removing it",
			  cidr_format(&gone.v[i].cidr, s, sizeof(s)));
	if (n > 0)
		ret = ctl_change(c, ctl_prune_apply, &gone);
	rules_free(&gone);
	return ret;
}

int ctl_begin(struct ctl *c, unsigned flags)
{
	struct errbuf err = {""};
	bool write = flags & CTL_WRITE;
	int ret;

	if (ctl_need_root())
		return CTL_FAIL;
	ctl_clock(c);
	if (flags & CTL_BPFFS) {
		if (pins_check_bpffs(c->pin_dir, &err)) {
			log_warnx("%s", err.msg);
			return CTL_FAIL;
		}
	}
	ret = state_lock(c->state_dir, write, write, &err);
	if (ret == -ENOENT && !write) {
		/* nothing saved yet: defaults, nothing to lock */
	} else if (ret < 0) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	} else {
		c->lock_fd = ret;
	}
	ret = state_load(c->state_path, &c->st, &err);
	if (ret && ret != -ENOENT) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	}
	if (write && state_copy(&c->saved, &c->st)) {
		log_warnx("out of memory");
		return CTL_FAIL;
	}
	if (!write) {
		/* readers only need a consistent snapshot */
		state_unlock(c->lock_fd);
		c->lock_fd = -1;
	}
	ret = pins_open(&c->pins, c->pin_dir, &err);
	if (ret == 0) {
		c->attached = true;
	} else if (ret != -ENOENT) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	}
	if (write)
		return ctl_prune(c);
	return CTL_OK;
}

void ctl_end(struct ctl *c)
{
	ctl_db_close(c);
	pins_close(&c->pins);
	c->attached = false;
	state_free(&c->st);
	state_free(&c->saved);
	state_unlock(c->lock_fd);
	c->lock_fd = -1;
}

int ctl_db_connect(struct ctl *c, struct errbuf *err)
{
	PGconn *conn;
	int ret;

	if (c->db)
		return 0;
	ret = pgdb_connect(c->pg, "edgectl", &conn, err);
	if (ret)
		return ret;
	c->db = conn;
	return 0;
}

int ctl_db_open(struct ctl *c, int min)
{
	struct errbuf err = {""};

	if (ctl_db_connect(c, &err) ||
	    pgdb_schema_check(c->db, min, NULL, &err)) {
		log_warnx("%s", err.msg);
		return CTL_FAIL;
	}
	return CTL_OK;
}

void ctl_db_close(struct ctl *c)
{
	if (c->db)
		PQfinish(c->db);
	c->db = NULL;
}
