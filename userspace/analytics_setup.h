/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * analytics_setup.h - Record: edged's analytics writer as its
 * configuration asks (the analytics group, pg and host_name): the
 * PostgreSQL sink with its disk spool, the JSON-lines file sink, both, or
 * none.
 */
#ifndef EDGE_ANALYTICS_SETUP_H
#define EDGE_ANALYTICS_SETUP_H

#include <pwd.h>

#include "analytics.h"
#include "config.h"

/*
 * Make cfg's analytics writer (not started): the database sink when pg
 * is set and analytics.database is true, with its disk spool when
 * analytics.spool is set; the file sink when analytics.file is set.
 * What needs rights is opened here, so call it before privileges drop:
 * pw (NULL: edged keeps its user) is the user edged becomes, given what
 * is created here (analytics_spool_open, analytics_file_sink_open).
 * Returns 0 with *out (NULL when no sink is configured), or -errno with
 * err saying what was wrong ("analytics.spool: ...").
 */
int analytics_setup(const struct config *cfg, const struct passwd *pw,
		    struct analytics **out, struct errbuf *err);

#endif /* EDGE_ANALYTICS_SETUP_H */
