/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cmd_stats.c - edgectl stats: the XDP program's counters (summed over
 * CPUs) and each rule's hits, once or every few seconds with rates.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "edgectl.h"

struct stats_ctr {
	const char *name;
	const char *help;
};

static const struct stats_ctr stats_ctrs[EDGE_CTR_MAX] = {
#define STATS_CTR(id, name, help) [EDGE_CTR_##id] = {name, help},
    EDGE_COUNTERS(STATS_CTR)
#undef STATS_CTR
};

/* One reading of the counters and of every rule's hits. */
struct stats_sample {
	uint64_t ctr[EDGE_CTR_MAX];
	uint64_t *hits; /* parallel to the state's rules */
	double t;	/* CLOCK_MONOTONIC seconds */
};

static double stats_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int stats_read(struct ctl *c, struct stats_sample *s)
{
	size_t i;
	int ret;

	s->t = stats_now();
	ret = pins_counters_read(&c->pins, s->ctr);
	if (ret)
		return ret;
	for (i = 0; i < c->st.rules.n; i++) {
		ret =
		    pins_hits_read(&c->pins, c->st.rules.v[i].id, &s->hits[i]);
		if (ret)
			return ret;
	}
	return 0;
}

/* Rate between two samples, per second; -1 when there is no earlier one. */
static double stats_rate(uint64_t now, uint64_t then, double dt)
{
	if (dt <= 0 || now < then)
		return 0;
	return (double)(now - then) / dt;
}

/* daemon: edged's "stats" result for the "daemon" key (consumed; NULL:
 * null), used only when !compact. */
static int stats_print_json(struct ctl *c, const struct stats_sample *s,
			    const struct stats_sample *prev, bool compact,
			    json_t *daemon)
{
	json_t *root, *ctr = json_object(), *rates = NULL,
		      *rules = json_array();
	double dt = prev ? s->t - prev->t : 0;
	char cidr[CIDR_STR_MAX];
	char *text;
	size_t i;

	if (prev)
		rates = json_object();
	for (i = 0; ctr && i < EDGE_CTR_MAX; i++) {
		json_object_set_new(ctr, stats_ctrs[i].name,
				    json_integer((json_int_t)s->ctr[i]));
		if (rates)
			json_object_set_new(
			    rates, stats_ctrs[i].name,
			    json_real(stats_rate(s->ctr[i], prev->ctr[i], dt)));
	}
	for (i = 0; rules && i < c->st.rules.n; i++) {
		const struct rule *x = &c->st.rules.v[i];
		json_t *r = json_pack("{s:s,s:s,s:I,s:I}", "cidr",
				      cidr_format(&x->cidr, cidr, sizeof(cidr)),
				      "action", rules_action_name(x->action),
				      "id", (json_int_t)x->id, "hits",
				      (json_int_t)s->hits[i]);

		if (r && prev)
			json_object_set_new(
			    r, "rate",
			    json_real(
				stats_rate(s->hits[i], prev->hits[i], dt)));
		json_array_append_new(rules, r);
	}
	root = json_pack("{s:I,s:o,s:o}", "time", (json_int_t)time(NULL),
			 "counters", ctr, "rules", rules);
	if (root && rates)
		json_object_set_new(root, "rates", rates);
	else
		json_decref(rates);
	if (!compact) {
		if (root)
			json_object_set_new(root, "daemon",
					    daemon ? daemon : json_null());
		else
			json_decref(daemon);
		return ctl_json_print(root);
	}
	text = root ? json_dumps(root, JSON_COMPACT) : NULL;
	json_decref(root);
	if (!text) {
		log_warnx("out of memory");
		return CTL_FAIL;
	}
	printf("%s\n", text);
	free(text);
	fflush(stdout);
	return CTL_OK;
}

static void stats_print_text(struct ctl *c, const struct stats_sample *s,
			     const struct stats_sample *prev)
{
	double dt = prev ? s->t - prev->t : 0;
	char cidr[CIDR_STR_MAX];
	size_t i;

	if (prev) {
		char when[32];
		time_t t = time(NULL);
		struct tm tm;

		localtime_r(&t, &tm);
		strftime(when, sizeof(when), "%H:%M:%S", &tm);
		printf("--- %s (rates over %.1fs)\n", when, dt);
		printf("%-18s %14s %12s  %s\n", "COUNTER", "TOTAL", "PER SEC",
		       "MEANING");
	} else {
		printf("%-18s %14s  %s\n", "COUNTER", "TOTAL", "MEANING");
	}
	for (i = 0; i < EDGE_CTR_MAX; i++) {
		if (prev)
			printf("%-18s %14llu %12.1f  %s\n", stats_ctrs[i].name,
			       (unsigned long long)s->ctr[i],
			       stats_rate(s->ctr[i], prev->ctr[i], dt),
			       stats_ctrs[i].help);
		else
			printf("%-18s %14llu  %s\n", stats_ctrs[i].name,
			       (unsigned long long)s->ctr[i],
			       stats_ctrs[i].help);
	}
	if (c->st.rules.n == 0) {
		printf("\nno rules\n");
	} else {
		printf("\n%-6s  %-43s %14s%s\n", "ACTION", "RULE", "HITS",
		       prev ? "      PER SEC" : "");
		for (i = 0; i < c->st.rules.n; i++) {
			const struct rule *x = &c->st.rules.v[i];

			printf("%-6s  %-43s %14llu",
			       rules_action_name(x->action),
			       cidr_format(&x->cidr, cidr, sizeof(cidr)),
			       (unsigned long long)s->hits[i]);
			if (prev)
				printf(
				    " %12.1f",
				    stats_rate(s->hits[i], prev->hits[i], dt));
			printf("\n");
		}
	}
	fflush(stdout);
}

/* Parse --interval: seconds, decimals allowed, 0.1 .. 3600. */
static int stats_parse_interval(const char *s, double *out)
{
	char *end;
	double v;

	if (!s || !*s || !(isdigit((unsigned char)*s) || *s == '.'))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !isfinite(v) || v < 0.1 || v > 3600)
		return -EINVAL;
	*out = v;
	return 0;
}

static int stats_parse_count(const char *s, unsigned long *out)
{
	unsigned long v;
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < 1 || v > 1000000000UL)
		return -EINVAL;
	*out = v;
	return 0;
}

static void stats_sleep(double secs)
{
	struct timespec ts;

	ts.tv_sec = (time_t)secs;
	ts.tv_nsec = (long)((secs - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

int cmd_stats(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"watch", no_argument, NULL, 'w'},
	    {"interval", required_argument, NULL, 'i'},
	    {"count", required_argument, NULL, 'n'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct stats_sample a = {.hits = NULL}, b = {.hits = NULL};
	struct errbuf derr = {""};
	json_t *daemon = NULL;
	struct stats_sample *cur = &a, *prev = &b, *tmp;
	bool json = false, watch = false, has_interval = false,
	     has_count = false;
	unsigned long count = 0, k;
	double interval = 1.0;
	int o, ret;

	optind = 0;
	while ((o = ctl_getopt(argc, argv, ":h", opts, "stats")) != -1) {
		switch (o) {
		case 'j':
			json = true;
			break;
		case 'w':
			watch = true;
			break;
		case 'i':
			if (stats_parse_interval(optarg, &interval))
				return ctl_usage_error("stats",
						       "bad --interval '%s': "
						       "seconds from 0.1 to "
						       "3600",
						       optarg);
			has_interval = true;
			break;
		case 'n':
			if (stats_parse_count(optarg, &count))
				return ctl_usage_error("stats",
						       "bad --count '%s': a "
						       "whole number from 1",
						       optarg);
			has_count = true;
			break;
		case 'h':
			return ctl_usage_print("stats");
		default:
			return CTL_USAGE;
		}
	}
	if (optind < argc)
		return ctl_usage_error(
		    "stats", "stats: unexpected argument '%s'", argv[optind]);
	if ((has_interval || has_count) && !watch)
		return ctl_usage_error("stats",
				       "stats: --interval and --count need "
				       "--watch");

	ret = ctl_begin(c, CTL_READ | CTL_BPFFS);
	if (ret)
		return ret;
	/* edged's request counters, once (not with --watch) */
	if (!watch && ctl_daemon_call(c, "stats", &daemon, &derr))
		log_debug("no daemon counters: %s", derr.msg);
	if (!c->attached) {
		if (!daemon) {
			log_warnx("edge is not attached (no maps pinned in %s)",
				  c->pin_dir);
			return CTL_FAIL;
		}
		/* the daemon's counters are still worth showing */
		log_note("edge is not attached (no maps pinned in %s): "
			 "edged's counters only",
			 c->pin_dir);
		if (json)
			return ctl_json_print(
			    json_pack("{s:I,s:n,s:[],s:o}", "time",
				      (json_int_t)time(NULL), "counters",
				      "rules", "daemon", daemon));
		ctl_daemon_stats_print(daemon);
		json_decref(daemon);
		return CTL_OK;
	}
	rules_sort(&c->st.rules);
	a.hits = calloc(c->st.rules.n + 1, sizeof(uint64_t));
	b.hits = calloc(c->st.rules.n + 1, sizeof(uint64_t));
	if (!a.hits || !b.hits) {
		log_warnx("out of memory");
		ret = CTL_FAIL;
		goto out;
	}
	if (stats_read(c, cur)) {
		log_warnx("cannot read the counters in %s", c->pin_dir);
		ret = CTL_FAIL;
		goto out;
	}
	if (!watch) {
		if (json) {
			ret = stats_print_json(c, cur, NULL, false, daemon);
			daemon = NULL;
		} else {
			stats_print_text(c, cur, NULL);
			if (daemon)
				ctl_daemon_stats_print(daemon);
		}
		goto out;
	}
	for (k = 0; !has_count || k < count; k++) {
		tmp = prev;
		prev = cur;
		cur = tmp;
		stats_sleep(interval);
		if (stats_read(c, cur)) {
			log_warnx("cannot read the counters in %s (edge "
				  "detached?)",
				  c->pin_dir);
			ret = CTL_FAIL;
			goto out;
		}
		if (json) {
			ret = stats_print_json(c, cur, prev, true, NULL);
			if (ret)
				goto out;
		} else {
			if (k)
				printf("\n");
			stats_print_text(c, cur, prev);
		}
	}
	ret = CTL_OK;
out:
	json_decref(daemon);
	free(a.hits);
	free(b.hits);
	return ret;
}
