/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ctlutil.h - what edgectl's command files share: the run's context, the
 * exit codes, the steps every command takes (ctlutil.c: root check, lock,
 * state, pins, database), usage errors and options (help.c), and the
 * commands edgectl.c dispatches to. Nothing here is edgectl.c's: the
 * command files do not depend on the main file.
 */
#ifndef EDGECTL_CTLUTIL_H
#define EDGECTL_CTLUTIL_H

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
struct pg_conn;
struct ctl {
	const char *pin_dir;
	const char *state_dir;
	const char *ctl_sock; /* edged's control socket */
	const char *pg;	      /* --pg / EDGE_PG: libpq's string, or NULL */
	struct pg_conn *db;   /* open once ctl_db_open succeeded */
	char state_path[PATH_MAX];
	int lock_fd;
	struct state st;
	struct state saved; /* CTL_WRITE: st as the state file holds it */
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

/* Print the help of cmd on stdout (cli/help.c): a command's usage line,
 * what it does and its options; a group's ("ip") commands; NULL: the
 * general usage, every command's usage line and the global options.
 * Returns CTL_OK. */
int ctl_usage_print(const char *cmd);

/* Check that every long option in longopts (--help aside) has its line
 * in cmd's help (NULL: the global options'); prints an internal error
 * for each one missing and returns -1, else 0. ctl_getopt calls it when
 * it returns 'h', so that every COMMAND --help checks its command. */
struct option;
int ctl_help_check(const struct option *longopts, const char *cmd);

/* Whether cmd ("ip", "stats", "ip block") has help: a command of the
 * table or a group of its commands. */
bool ctl_help_has(const char *cmd);

/* getopt_long with edgectl's usage errors (cli/help.c): short options,
 * the long options and the command for usage messages (NULL for the
 * global options); returns the next option like
 * getopt_long, or -1 at the end. On a bad option prints a usage error
 * ("CMD: unknown option '--x'", or without "CMD: " for a global option)
 * and returns '?'. argv[0] is the command. */
struct option;
int ctl_getopt(int argc, char **argv, const char *shortopts,
	       const struct option *longopts, const char *cmd);

/* Returns CTL_OK when running as root; prints why not and returns
 * CTL_FAIL otherwise. */
int ctl_need_root(void);

/*
 * Start a command that uses the state (and the maps when attached):
 * check root, bpffs when asked, lock, load the state and open the pins if
 * they exist. With CTL_WRITE, c->saved gets a copy of the state and
 * expired rules are removed from the maps and the state (a ctl_change of
 * its own). Returns CTL_OK, or CTL_FAIL after printing why.
 * ctl_end must follow either way.
 */
int ctl_begin(struct ctl *c, unsigned flags);

/* A change to the maps, made by ctl_change once the state is written but
 * before it is put in place: called only when c->attached. Returns 0 or
 * -errno with err saying what failed. */
typedef int (*ctl_apply_fn)(struct ctl *c, const void *arg, struct errbuf *err);

/*
 * Make a change the command has made to c->st, all or nothing between the
 * state file and the maps: encode and write the new state beside the old
 * one (state_prepare), apply the change to the maps with apply(c, arg)
 * when attached (apply may be NULL), then put the state in place
 * (state_commit). When applying or the commit fails, the maps are brought
 * back to c->saved, the temporary file removed, and the message says what
 * failed and that nothing was changed (or, should restoring the maps fail
 * too, that they may hold the change and how to reconcile them). Returns
 * CTL_OK (c->saved then equals c->st) or CTL_FAIL; after CTL_FAIL c->st
 * still holds the change and the command must end.
 */
int ctl_change(struct ctl *c, ctl_apply_fn apply, const void *arg);

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
/* The same with the request req (consumed; NULL: out of memory, said in
 * err). */
int ctl_daemon_send(const struct ctl *c, json_t *req, json_t **result,
		    struct errbuf *err);
/* The same with one more string member, {"cmd": cmd, key: value} (none
 * when key is NULL). */
int ctl_daemon_call_with(const struct ctl *c, const char *cmd, const char *key,
			 const char *value, json_t **result,
			 struct errbuf *err);

/* The daemon's part of `edgectl status`, from ctl_daemon_call(c, "status")
 * returning ret with result and err: as JSON ({running, socket, status,
 * error}; result is consumed, NULL when out of memory) or as the
 * "daemon:" line. */
json_t *ctl_daemon_status_json(const struct ctl *c, int ret, json_t *result,
			       const struct errbuf *err);
void ctl_daemon_status_print(const struct ctl *c, int ret, const json_t *result,
			     const struct errbuf *err);

/* The daemon's counters from a "stats" result, as a table on stdout;
 * with prev (an earlier result, dt seconds before), a per-second column. */
void ctl_daemon_stats_print(const json_t *result, const json_t *prev,
			    double dt);

/*
 * The database. ctl_db_open connects to c->pg (masked messages,
 * application_name "edgectl") and checks the schema: at least version min
 * and not newer than this build. Prints why not and returns CTL_FAIL;
 * CTL_OK with c->db open. ctl_db_connect only connects (nothing when
 * c->db is open already), returning 0 or -errno with err saying why, and
 * prints nothing. ctl_db_close (ctl_end calls it) closes it.
 */
int ctl_db_open(struct ctl *c, int min);
int ctl_db_connect(struct ctl *c, struct errbuf *err);
void ctl_db_close(struct ctl *c);

/* The database's line of `edgectl status` (c->pg set; cmd_db.c): as JSON (a new
 * reference, NULL when out of memory) or as the "database:" line. */
json_t *ctl_db_status_json(struct ctl *c);
void ctl_db_status_print(struct ctl *c);

/* edgectl ip block|allow|del|list --pg (cmd_ip_pg.c), its arguments
 * parsed (ip_args.h). */
struct ctl_ip_args;
int ctl_ip_pg(struct ctl *c, const struct ctl_ip_args *a);

/* Commands: argv[0] is the command's own name. Return an exit code. */
int cmd_attach(struct ctl *c, int argc, char **argv);
int cmd_detach(struct ctl *c, int argc, char **argv);
int cmd_status(struct ctl *c, int argc, char **argv);
int cmd_ip(struct ctl *c, int argc, char **argv);
int cmd_ratelimit(struct ctl *c, int argc, char **argv);
int cmd_stats(struct ctl *c, int argc, char **argv);
int cmd_routes(struct ctl *c, int argc, char **argv);
/* edgectl envs [--json]: the on-demand environments (docs/wake.md). */
int cmd_envs(struct ctl *c, int argc, char **argv);
int cmd_reload(struct ctl *c, int argc, char **argv);
int cmd_upgrade(struct ctl *c, int argc, char **argv);
int cmd_splice(struct ctl *c, int argc, char **argv);
int cmd_upstream(struct ctl *c, int argc, char **argv);
int cmd_challenge(struct ctl *c, int argc, char **argv);
int cmd_certs(struct ctl *c, int argc, char **argv);
int cmd_db(struct ctl *c, int argc, char **argv);
int cmd_hosts(struct ctl *c, int argc, char **argv);
/* edgectl help [COMMAND...] (cli/help.c). */
int cmd_help(struct ctl *c, int argc, char **argv);

/* Print JSON to stdout (and a newline), consuming the reference.
 * CTL_OK or CTL_FAIL. */
int ctl_json_print(json_t *j);

#endif /* EDGECTL_CTLUTIL_H */
