/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * analytics_setup.c - Record: the analytics writer from the configuration
 * (analytics_setup.h).
 */
#include <errno.h>
#include <string.h>

#include "analytics_pg.h"
#include "analytics_setup.h"
#include "analytics_spool.h"

int analytics_setup(const struct config *cfg, const struct passwd *pw,
		    struct analytics **out, struct errbuf *err)
{
	const struct config_analytics *an = &cfg->analytics;
	struct analytics_conf ac;
	struct analytics_sink file = {NULL, NULL};
	struct analytics *a = NULL;
	bool db = cfg->pg && an->database;
	int rc;

	*out = NULL;
	errbuf_clear(err);
	memset(&ac, 0, sizeof(ac));
	ac.queue_cap = an->queue;
	ac.spool_cap = an->spool_memory;
	if (an->file && an->file[0]) {
		rc = analytics_file_sink_open(an->file, pw, &file, err);
		if (rc)
			return rc;
		rc = analytics_file_sink_set(
		    &file, (enum analytics_format)an->format, cfg->host_name);
		if (rc) {
			errbuf_set(err, "analytics.file: out of memory");
			goto fail;
		}
	}
	if (db) {
		if (an->spool && an->spool[0]) {
			rc = analytics_spool_open(an->spool, an->spool_max, pw,
						  &ac.disk, err);
			if (rc)
				goto fail;
		}
		rc = analytics_pg_sink(cfg->pg, cfg->host_name, &ac.sink);
		if (rc) {
			analytics_spool_close(ac.disk);
			goto fail;
		}
	} else if (file.ops) {
		ac.sink = file;
		file.ops = NULL;
	} else {
		return 0;
	}
	rc = analytics_new(&ac, &a);
	if (rc)
		goto fail;
	if (file.ops) {
		rc = analytics_add_sink(a, &file, NULL);
		file.ops = NULL;
		if (rc) {
			analytics_free(a);
			goto fail;
		}
	}
	*out = a;
	return 0;
fail:
	if (file.ops && file.ops->close)
		file.ops->close(file.ctx);
	if (!err->msg[0])
		errbuf_set(err, "analytics: %s", strerror(-rc));
	return rc;
}
