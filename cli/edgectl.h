/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * edgectl.h - what edgectl's command files share: the run's context, the
 * exit codes and helpers for usage errors, locking and the state.
 */
#ifndef EDGECTL_H
#define EDGECTL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "ctlproto.h"
#include "log.h"
#include "pins.h"
#include "state.h"

#define EDGECTL_VERSION "0.1.0"

/* Exit codes. */
#define CTL_OK 0
#define CTL_FAIL 1  /* the command could not be done */
#define CTL_USAGE 2 /* the command line was wrong */

/* The daemon's control socket's default (--socket, EDGE_CONTROL_SOCKET). */
#define CTL_DAEMON_SOCK CTLPROTO_SOCK_DEFAULT

/* ctl_begin flags. */
#define CTL_WRITE 0x1 /* exclusive lock (dir created), prune, may save */
#define CTL_READ 0x2  /* shared lock while loading, no changes */
#define CTL_BPFFS 0x4 /* the pin directory must be on a bpffs */

/* One run of edgectl. */
struct ctl {
	const char *pin_dir;
	const char *state_dir;
	const char *ctl_sock; /* edged's control socket */
	char state_path[PATH_MAX];
	int lock_fd;
	struct state st;
	struct pins pins;
	bool attached;	   /* pins open: rules go to the maps at once */
	int64_t now;	   /* wall clock, unix seconds */
	uint64_t boot_now; /* CLOCK_BOOTTIME, ns */
};

/* Print "edgectl: <message>" and the command's one-line usage on stderr;
 * returns CTL_USAGE. cmd names the usage line ("ip block", ...; NULL for
 * the general one). */
int ctl_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Print the usage of cmd (NULL: everything) on stdout; returns CTL_OK. */
int ctl_usage_print(const char *cmd);

/* Short options, the long options and the command for usage messages;
 * returns the next option like getopt_long, or -1 at the end. On a bad
 * option prints a usage error and returns '?'. argv[0] is the command. */
struct option;
int ctl_getopt(int argc, char **argv, const char *shortopts,
	       const struct option *longopts, const char *cmd);

/* Returns CTL_OK when running as root; prints why not and returns
 * CTL_FAIL otherwise. */
int ctl_need_root(void);

/*
 * Start a command that uses the state (and the maps when attached):
 * check root, bpffs when asked, lock, load the state and open the pins if
 * they exist. With CTL_WRITE, expired rules are removed from the maps and
 * the state (saved at once). Returns CTL_OK, or CTL_FAIL after printing why.
 * ctl_end must follow either way.
 */
int ctl_begin(struct ctl *c, unsigned flags);

/* Save the state; CTL_OK or CTL_FAIL after printing why. */
int ctl_save(struct ctl *c);

/* Release everything ctl_begin took. Safe to call twice. */
void ctl_end(struct ctl *c);

/*
 * Send {"cmd": cmd} to edged at c->ctl_sock (cmd_daemon.c). Returns 0 with
 * *result (a new reference), or -errno from ctlproto_call with err saying
 * why: -ENOENT/-ECONNREFUSED when edged is not running, -EREMOTEIO with
 * edged's own error text.
 */
int ctl_daemon_call(const struct ctl *c, const char *cmd, json_t **result,
		    struct errbuf *err);

/* The daemon's part of `edgectl status`, from ctl_daemon_call(c, "status")
 * returning ret with result and err: as JSON ({running, socket, status,
 * error}; result is consumed, NULL when out of memory) or as the
 * "daemon:" line. */
json_t *ctl_daemon_status_json(const struct ctl *c, int ret, json_t *result,
			       const struct errbuf *err);
void ctl_daemon_status_print(const struct ctl *c, int ret, const json_t *result,
			     const struct errbuf *err);

/* The daemon's counters from a "stats" result, as a table on stdout. */
void ctl_daemon_stats_print(const json_t *result);

/* Commands: argv[0] is the command's own name. Return an exit code. */
int cmd_attach(struct ctl *c, int argc, char **argv);
int cmd_detach(struct ctl *c, int argc, char **argv);
int cmd_status(struct ctl *c, int argc, char **argv);
int cmd_ip(struct ctl *c, int argc, char **argv);
int cmd_ratelimit(struct ctl *c, int argc, char **argv);
int cmd_stats(struct ctl *c, int argc, char **argv);
int cmd_routes(struct ctl *c, int argc, char **argv);
int cmd_reload(struct ctl *c, int argc, char **argv);

/* Print JSON to stdout (and a newline), consuming the reference.
 * CTL_OK or CTL_FAIL. */
int ctl_json_print(json_t *j);

#endif /* EDGECTL_H */
