/* SPDX-License-Identifier: BSD-2-Clause */
/* sockreg.c - the sockets a successor takes over (sockreg.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctlproto.h"
#include "sockreg.h"

struct sockreg_ent {
	enum sockreg_kind kind;
	uint64_t id;
	int fd;
	char *addr;
};

struct sockreg_list {
	struct sockreg_ent *v;
	size_t n, cap;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct sockreg_list own, inherited;
static int *handed; /* sockreg_handover's array */

static const char *const kind_names[SOCKREG_KINDS] = {
    "http", "https",   "tcp",	     "admin",
    "lock", "control", "quic-socks", "quic-cfg",
};

const char *sockreg_kind_name(enum sockreg_kind k)
{
	return k < SOCKREG_KINDS ? kind_names[k] : "?";
}

static int kind_of(const char *s)
{
	int k;

	for (k = 0; k < SOCKREG_KINDS; k++)
		if (strcmp(s, kind_names[k]) == 0)
			return k;
	return -1;
}

/* Append (fd taken, addr copied). 0 or -ENOMEM (fd closed). */
static int list_add(struct sockreg_list *l, enum sockreg_kind k,
		    const char *addr, uint64_t id, int fd)
{
	struct sockreg_ent *v;
	char *a = strdup(addr ? addr : "");

	if (a && l->n == l->cap) {
		v = realloc(l->v, (l->cap ? l->cap * 2 : 16) * sizeof(*v));
		if (v) {
			l->v = v;
			l->cap = l->cap ? l->cap * 2 : 16;
		}
	}
	if (!a || l->n == l->cap) {
		free(a);
		close(fd);
		return -ENOMEM;
	}
	l->v[l->n++] =
	    (struct sockreg_ent){.kind = k, .id = id, .fd = fd, .addr = a};
	return 0;
}

/* Close and forget entry i. */
static void list_del(struct sockreg_list *l, size_t i)
{
	close(l->v[i].fd);
	free(l->v[i].addr);
	l->v[i] = l->v[--l->n];
}

int sockreg_add(enum sockreg_kind k, const char *addr, uint64_t id, int fd)
{
	int d = fcntl(fd, F_DUPFD_CLOEXEC, 3), rc;

	if (d < 0)
		return -errno;
	pthread_mutex_lock(&mu);
	rc = list_add(&own, k, addr, id, d);
	pthread_mutex_unlock(&mu);
	return rc;
}

void sockreg_drop(enum sockreg_kind k, uint64_t id)
{
	size_t i;

	pthread_mutex_lock(&mu);
	for (i = own.n; i-- > 0;)
		if (own.v[i].kind == k && own.v[i].id == id)
			list_del(&own, i);
	pthread_mutex_unlock(&mu);
}

void sockreg_close_all(void)
{
	pthread_mutex_lock(&mu);
	while (own.n)
		list_del(&own, own.n - 1);
	free(own.v);
	own.v = NULL;
	own.cap = 0;
	free(handed);
	handed = NULL;
	pthread_mutex_unlock(&mu);
}

int sockreg_handover(const int **fds, size_t *n, json_t **desc)
{
	json_t *a = json_array(), *e;
	size_t i;
	int rc = 0;

	*fds = NULL;
	*n = 0;
	*desc = NULL;
	pthread_mutex_lock(&mu);
	free(handed);
	handed = own.n ? malloc(own.n * sizeof(*handed)) : NULL;
	if (!a || (own.n && !handed)) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; i < own.n; i++) {
		e = json_pack("{s:s, s:s, s:I}", "kind",
			      kind_names[own.v[i].kind], "addr", own.v[i].addr,
			      "id", (json_int_t)own.v[i].id);
		if (!e || json_array_append_new(a, e)) {
			rc = -ENOMEM;
			goto out;
		}
		handed[i] = own.v[i].fd;
	}
	*fds = handed;
	*n = own.n;
	*desc = a;
	a = NULL;
out:
	pthread_mutex_unlock(&mu);
	json_decref(a);
	return rc;
}

int sockreg_inherit(const char *ctl_path, struct errbuf *err)
{
	struct ctlproto_fds fds = {0};
	json_t *req = json_pack("{s:s}", "cmd", "handover"), *res = NULL, *e;
	size_t i;
	int rc, k;

	if (!req) {
		errbuf_set(err, "out of memory");
		return -ENOMEM;
	}
	rc = ctlproto_call_fds(ctl_path, req, &res, &fds, 0, err);
	json_decref(req);
	if (rc)
		goto out;
	if (!json_is_array(res) || json_array_size(res) != fds.n) {
		errbuf_set(err,
			   "the running edged's handover does not add up (%zu "
			   "sockets received)",
			   fds.n);
		rc = -EBADMSG;
		goto out;
	}
	pthread_mutex_lock(&mu);
	json_array_foreach(res, i, e)
	{
		const char *kind =
		    json_string_value(json_object_get(e, "kind"));
		const char *addr =
		    json_string_value(json_object_get(e, "addr"));
		json_int_t id = json_integer_value(json_object_get(e, "id"));

		k = kind ? kind_of(kind) : -1;
		if (k < 0 || !addr) {
			close(fds.v[i]); /* a later edged's kind: not ours */
			fds.v[i] = -1;
			continue;
		}
		if (list_add(&inherited, (enum sockreg_kind)k, addr,
			     id > 0 ? (uint64_t)id : 0, fds.v[i]))
			rc = -ENOMEM;
		fds.v[i] = -1;
	}
	pthread_mutex_unlock(&mu);
	if (rc) {
		errbuf_set(err, "out of memory");
		sockreg_inherit_done(SOCKREG_KINDS);
	}
out:
	ctlproto_fds_close(&fds);
	json_decref(res);
	return rc;
}

int sockreg_take(enum sockreg_kind k, const char *addr)
{
	uint64_t id;

	return sockreg_take_id(k, addr, &id);
}

bool sockreg_inherited(enum sockreg_kind k, uint64_t *id)
{
	bool found = false;
	size_t i;

	pthread_mutex_lock(&mu);
	for (i = 0; i < inherited.n && !found; i++)
		if (inherited.v[i].kind == k) {
			*id = inherited.v[i].id;
			found = true;
		}
	pthread_mutex_unlock(&mu);
	return found;
}

int sockreg_take_id(enum sockreg_kind k, const char *addr, uint64_t *id)
{
	size_t i;
	int fd = -1;

	pthread_mutex_lock(&mu);
	for (i = 0; i < inherited.n; i++)
		if (inherited.v[i].kind == k &&
		    strcmp(inherited.v[i].addr, addr) == 0) {
			fd = inherited.v[i].fd;
			*id = inherited.v[i].id;
			inherited.v[i].fd = -1;
			free(inherited.v[i].addr);
			inherited.v[i] = inherited.v[--inherited.n];
			break;
		}
	pthread_mutex_unlock(&mu);
	return fd;
}

void sockreg_inherit_done(enum sockreg_kind k)
{
	size_t i;

	pthread_mutex_lock(&mu);
	for (i = inherited.n; i-- > 0;) {
		if (k != SOCKREG_KINDS && inherited.v[i].kind != k)
			continue;
		log_note("upgrade: the running edged's %s socket %s is not "
			 "in this configuration: closed",
			 kind_names[inherited.v[i].kind], inherited.v[i].addr);
		list_del(&inherited, i);
	}
	if (!inherited.n) {
		free(inherited.v);
		inherited.v = NULL;
		inherited.cap = 0;
	}
	pthread_mutex_unlock(&mu);
}
