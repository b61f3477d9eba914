/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * attach.c - attaching edge's XDP program with libxdp.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/libxdp.h>

#include "attach.h"
#include "edge_xdp.skel.h"

static int attach_libxdp_mode(int mode)
{
	return mode == STATE_MODE_SKB ? XDP_MODE_SKB : XDP_MODE_NATIVE;
}

static int attach_state_mode(enum xdp_attach_mode m)
{
	switch (m) {
	case XDP_MODE_NATIVE:
		return STATE_MODE_NATIVE;
	case XDP_MODE_SKB:
		return STATE_MODE_SKB;
	default:
		return STATE_MODE_NONE;
	}
}

static const char *attach_strerror(int ret, char *buf, size_t len)
{
	if (libxdp_strerror(ret, buf, len))
		snprintf(buf, len, "%s", strerror(ret < 0 ? -ret : ret));
	return buf;
}

/* The first map id of prog_fd's maps that is the counters map by name. */
static uint32_t attach_prog_counters_id(int prog_fd)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info), ids[64], i, n;

	memset(&info, 0, sizeof(info));
	info.nr_map_ids = 64;
	info.map_ids = (__u64)(unsigned long)ids;
	if (bpf_obj_get_info_by_fd(prog_fd, &info, &len))
		return 0;
	n = info.nr_map_ids < 64 ? info.nr_map_ids : 64;
	for (i = 0; i < n; i++) {
		struct bpf_map_info mi;
		__u32 mlen = sizeof(mi);
		int fd = bpf_map_get_fd_by_id(ids[i]);
		bool match;

		if (fd < 0)
			continue;
		memset(&mi, 0, sizeof(mi));
		match = bpf_obj_get_info_by_fd(fd, &mi, &mlen) == 0 &&
			strcmp(mi.name, EDGE_MAP_COUNTERS) == 0;
		close(fd);
		if (match)
			return ids[i];
	}
	return 0;
}

static bool attach_is_edge(struct xdp_program *prog)
{
	const char *name = xdp_program__name(prog);

	return name && strcmp(name, EDGE_XDP_PROG_NAME) == 0;
}

int attach_query(int ifindex, struct attach_info *info, struct errbuf *err)
{
	struct xdp_multiprog *mp;
	struct xdp_program *prog = NULL;
	char buf[128];
	int ret;

	memset(info, 0, sizeof(*info));
	mp = xdp_multiprog__get_from_ifindex(ifindex);
	ret = (int)libxdp_get_error(mp);
	if (ret == -ENOENT || (!ret && !mp))
		return 0; /* no XDP program at all */
	if (ret) {
		errbuf_set(err, "cannot query XDP programs on ifindex %d: %s",
			   ifindex, attach_strerror(ret, buf, sizeof(buf)));
		return ret;
	}
	if (xdp_multiprog__is_legacy(mp)) {
		prog = xdp_multiprog__main_prog(mp);
		if (prog && !attach_is_edge(prog))
			prog = NULL;
	} else {
		while ((prog = xdp_multiprog__next_prog(prog, mp)))
			if (attach_is_edge(prog))
				break;
	}
	if (prog) {
		info->attached = true;
		info->mode = attach_state_mode(xdp_multiprog__attach_mode(mp));
		info->prog_id = xdp_program__id(prog);
		info->counters_map_id =
		    attach_prog_counters_id(xdp_program__fd(prog));
	}
	xdp_multiprog__close(mp);
	return 0;
}

/* Open the embedded object with every map pinned in pin_dir. */
static int attach_open(const char *pin_dir, struct bpf_object **objp,
		       struct xdp_program **progp, struct errbuf *err)
{
	struct bpf_object_open_opts oopts = {.sz = sizeof(oopts),
					     .object_name = "edge_xdp"};
	struct xdp_program_opts xopts = {.sz = sizeof(xopts)};
	struct bpf_object *obj;
	struct xdp_program *prog;
	struct bpf_map *map;
	const void *bytes;
	char path[PATH_MAX], buf[128];
	size_t sz;
	int ret;

	*objp = NULL;
	*progp = NULL;
	bytes = edge_xdp__elf_bytes(&sz);
	obj = bpf_object__open_mem(bytes, sz, &oopts);
	ret = (int)libbpf_get_error(obj);
	if (ret) {
		errbuf_set(err, "cannot open edge's BPF object: %s",
			   attach_strerror(ret, buf, sizeof(buf)));
		return ret;
	}
	for (map = bpf_object__next_map(obj, NULL); map;
	     map = bpf_object__next_map(obj, map)) {
		const char *name = bpf_map__name(map);

		if (strchr(name, '.')) /* .rodata, .bss: not shared */
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", pin_dir, name) >=
		    (int)sizeof(path)) {
			ret = -ENAMETOOLONG;
			errbuf_set(err, "pin path too long: %s", pin_dir);
			goto fail;
		}
		ret = bpf_map__set_pin_path(map, path);
		if (ret) {
			errbuf_set(err, "cannot set pin path %s: %s", path,
				   strerror(-ret));
			goto fail;
		}
	}
	xopts.obj = obj;
	xopts.prog_name = EDGE_XDP_PROG_NAME;
	prog = xdp_program__create(&xopts);
	ret = (int)libxdp_get_error(prog);
	if (ret) {
		errbuf_set(err, "cannot find program %s in edge's object: %s",
			   EDGE_XDP_PROG_NAME,
			   attach_strerror(ret, buf, sizeof(buf)));
		goto fail;
	}
	*objp = obj;
	*progp = prog;
	return 0;
fail:
	bpf_object__close(obj);
	return ret;
}

int attach_create_maps(const char *pin_dir, struct errbuf *err)
{
	struct bpf_object *obj = NULL;
	struct xdp_program *prog = NULL;
	struct bpf_program *bp;
	char buf[128];
	int ret;

	ret = attach_open(pin_dir, &obj, &prog, err);
	if (ret)
		return ret;
	for (bp = bpf_object__next_program(obj, NULL); bp;
	     bp = bpf_object__next_program(obj, bp))
		bpf_program__set_autoload(bp, false);
	ret = bpf_object__load(obj);
	if (ret)
		errbuf_set(err, "cannot create edge's maps in %s: %s", pin_dir,
			   attach_strerror(ret, buf, sizeof(buf)));
	xdp_program__close(prog);
	bpf_object__close(obj);
	return ret;
}

/* One attach attempt in one mode. */
static int attach_try(const char *pin_dir, int ifindex, int mode,
		      uint32_t *prog_id, struct errbuf *err)
{
	struct bpf_object *obj = NULL;
	struct xdp_program *prog = NULL;
	int ret;

	ret = attach_open(pin_dir, &obj, &prog, err);
	if (ret)
		return ret;
	ret = xdp_program__attach(
	    prog, ifindex, (enum xdp_attach_mode)attach_libxdp_mode(mode), 0);
	if (!ret)
		*prog_id = xdp_program__id(prog);
	xdp_program__close(prog);
	bpf_object__close(obj);
	return ret;
}

/*
 * libxdp shares an interface between programs only through its dispatcher.
 * A program attached without it (by ip link, another loader, or by libxdp
 * itself where the kernel refuses the dispatcher) cannot be joined: say
 * which program is in the way instead of a bare EBUSY.
 */
static int attach_check_foreign(int ifindex, struct errbuf *err)
{
	struct xdp_multiprog *mp = xdp_multiprog__get_from_ifindex(ifindex);
	struct xdp_program *main_prog;
	int ret = 0;

	if (libxdp_get_error(mp))
		return 0; /* nothing attached, or unreadable: let attach say */
	main_prog = xdp_multiprog__main_prog(mp);
	if (main_prog && xdp_multiprog__is_legacy(mp) &&
	    !attach_is_edge(main_prog)) {
		errbuf_set(err,
			   "the interface already has an XDP program (%s, id "
			   "%u) attached without libxdp's dispatcher, so edge "
			   "cannot run beside it; remove it first (xdp-loader "
			   "unload, or ip link set dev IFACE xdp off)",
			   xdp_program__name(main_prog),
			   xdp_program__id(main_prog));
		ret = -EBUSY;
	}
	xdp_multiprog__close(mp);
	return ret;
}

int attach_iface(const char *pin_dir, int ifindex, int mode,
		 struct attach_info *info, struct errbuf *err)
{
	char buf[128], buf2[128];
	uint32_t prog_id = 0;
	int ret, ret2;

	memset(info, 0, sizeof(*info));
	ret = attach_check_foreign(ifindex, err);
	if (ret)
		return ret;
	if (mode == STATE_MODE_NONE) {
		ret = attach_try(pin_dir, ifindex, STATE_MODE_NATIVE, &prog_id,
				 err);
		if (ret == 0) {
			mode = STATE_MODE_NATIVE;
		} else if (err && err->msg[0]) {
			return ret; /* could not even open the object */
		} else {
			log_debug("native attach failed (%s), trying skb mode",
				  attach_strerror(ret, buf, sizeof(buf)));
			ret2 = attach_try(pin_dir, ifindex, STATE_MODE_SKB,
					  &prog_id, err);
			if (ret2) {
				if (!err || !err->msg[0])
					errbuf_set(
					    err,
					    "cannot attach XDP: native "
					    "mode: %s; skb mode: %s",
					    attach_strerror(ret, buf,
							    sizeof(buf)),
					    attach_strerror(ret2, buf2,
							    sizeof(buf2)));
				return ret2;
			}
			mode = STATE_MODE_SKB;
		}
	} else {
		ret = attach_try(pin_dir, ifindex, mode, &prog_id, err);
		if (ret) {
			if (!err || !err->msg[0])
				errbuf_set(
				    err, "cannot attach XDP in %s mode: %s",
				    state_mode_name(mode),
				    attach_strerror(ret, buf, sizeof(buf)));
			return ret;
		}
	}
	/* report what the kernel says, not what was asked */
	ret = attach_query(ifindex, info, NULL);
	if (ret || !info->attached) {
		info->attached = true;
		info->mode = mode;
		info->prog_id = prog_id;
	}
	return 0;
}

int attach_detach(int ifindex, struct errbuf *err)
{
	struct xdp_multiprog *mp;
	struct xdp_program *prog = NULL;
	enum xdp_attach_mode m;
	char buf[128];
	int ret, found = 0;

	mp = xdp_multiprog__get_from_ifindex(ifindex);
	ret = (int)libxdp_get_error(mp);
	if (ret == -ENOENT || (!ret && !mp))
		return -ENOENT;
	if (ret) {
		errbuf_set(err, "cannot query XDP programs on ifindex %d: %s",
			   ifindex, attach_strerror(ret, buf, sizeof(buf)));
		return ret;
	}
	m = xdp_multiprog__attach_mode(mp);
	if (xdp_multiprog__is_legacy(mp)) {
		prog = xdp_multiprog__main_prog(mp);
		if (prog && attach_is_edge(prog)) {
			found = 1;
			ret = xdp_program__detach(prog, ifindex, m, 0);
		}
	} else {
		while ((prog = xdp_multiprog__next_prog(prog, mp))) {
			if (!attach_is_edge(prog))
				continue;
			found = 1;
			ret = xdp_program__detach(prog, ifindex, m, 0);
			break;
		}
	}
	xdp_multiprog__close(mp);
	if (!found)
		return -ENOENT;
	if (ret) {
		errbuf_set(err, "cannot detach XDP from ifindex %d: %s",
			   ifindex, attach_strerror(ret, buf, sizeof(buf)));
		return ret;
	}
	/* a second edge program (should never happen): remove it too */
	{
		struct attach_info info;

		if (attach_query(ifindex, &info, NULL) == 0 && info.attached)
			return attach_detach(ifindex, err);
	}
	return 0;
}

uint32_t attach_map_id(const struct pins *p)
{
	struct bpf_map_info mi;
	__u32 len = sizeof(mi);

	memset(&mi, 0, sizeof(mi));
	if (p->fd[PINS_COUNTERS] < 0 ||
	    bpf_obj_get_info_by_fd(p->fd[PINS_COUNTERS], &mi, &len))
		return 0;
	return mi.id;
}

int attach_maps_in_use(const struct pins *p, bool *in_use)
{
	uint32_t want = attach_map_id(p), id = 0;

	*in_use = false;
	if (!want)
		return -ENOENT;
	while (bpf_prog_get_next_id(id, &id) == 0) {
		struct bpf_prog_info info;
		__u32 len = sizeof(info), ids[64], i, n;
		int fd = bpf_prog_get_fd_by_id(id);

		if (fd < 0)
			continue; /* gone meanwhile */
		memset(&info, 0, sizeof(info));
		info.nr_map_ids = 64;
		info.map_ids = (__u64)(unsigned long)ids;
		if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) {
			n = info.nr_map_ids < 64 ? info.nr_map_ids : 64;
			for (i = 0; i < n; i++)
				if (ids[i] == want)
					*in_use = true;
			if (*in_use)
				log_debug("map %u is used by program %u", want,
					  id);
		}
		close(fd);
		if (*in_use)
			break;
	}
	return 0;
}

void attach_close_prog_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[64], target[64];
		ssize_t n;
		int fd;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		fd = atoi(e->d_name);
		if (fd == dirfd(d) || fd <= 2)
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		if (strcmp(target, "anon_inode:bpf-prog") == 0) {
			log_debug("closing program fd %d left open by libxdp",
				  fd);
			close(fd);
		}
	}
	closedir(d);
}
