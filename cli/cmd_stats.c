/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cmd_stats.c - edgectl stats: the XDP program's counters (summed over
 * CPUs) and each rule's hits, and edged's counters when it answers, once
 * or every few seconds with rates; either alone when the other is not
 * there.
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

#include "ctlutil.h"

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
	json_t *daemon; /* edged's "stats" result; NULL: no answer */
	double t;	/* CLOCK_MONOTONIC seconds */
};

static double stats_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The XDP counters and hits (when edge is attached), then edged's
 * counters (when daemon is set: NULL in s->daemon when it does not
 * answer, why in derr). Fails only when the pinned maps cannot be read. */
static int stats_read(struct ctl *c, struct stats_sample *s, bool daemon,
		      struct errbuf *derr)
{
	size_t i;
	int ret;

	s->t = stats_now();
	json_decref(s->daemon);
	s->daemon = NULL;
	if (daemon && ctl_daemon_call(c, "stats", &s->daemon, derr))
		s->daemon = NULL;
	if (!c->attached)
		return 0;
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

/* edged's "stats" result d with, after prev (NULL: none), "rates" per
 * second of its counters; a new reference, or null. */
static json_t *stats_daemon_json(const json_t *d, const json_t *prev, double dt)
{
	const json_t *now = json_object_get(d, "counters");
	const json_t *then = json_object_get(prev, "counters");
	json_t *out, *rates, *v, *b;
	const char *name;

	if (!d)
		return json_null();
	out = json_deep_copy(d);
	if (!out || !prev)
		return out ? out : json_null();
	rates = json_object();
	json_object_foreach((json_t *)now, name, v)
	{
		b = json_object_get(then, name);
		if (rates && json_is_integer(v) && json_is_integer(b))
			json_object_set_new(
			    rates, name,
			    json_real(stats_rate(
				(uint64_t)json_integer_value(v),
				(uint64_t)json_integer_value(b), dt)));
	}
	if (rates)
		json_object_set_new(out, "rates", rates);
	return out;
}

/* One JSON object: the XDP counters and rules (null and empty when edge
 * is not attached), with rates after prev, and edged's result under
 * "daemon" (null when it did not answer; with "rates" after prev).
 * compact: one line (--watch). */
static int stats_print_json(struct ctl *c, const struct stats_sample *s,
			    const struct stats_sample *prev, bool compact)
{
	json_t *root, *ctr = NULL, *rates = NULL, *rules = json_array();
	double dt = prev ? s->t - prev->t : 0;
	char cidr[CIDR_STR_MAX];
	char *text;
	size_t i;

	if (c->attached) {
		ctr = json_object();
		if (prev)
			rates = json_object();
	}
	for (i = 0; ctr && i < EDGE_CTR_MAX; i++) {
		json_object_set_new(ctr, stats_ctrs[i].name,
				    json_integer((json_int_t)s->ctr[i]));
		if (rates)
			json_object_set_new(
			    rates, stats_ctrs[i].name,
			    json_real(stats_rate(s->ctr[i], prev->ctr[i], dt)));
	}
	for (i = 0; rules && c->attached && i < c->st.rules.n; i++) {
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
	root = json_pack(
	    "{s:I,s:o,s:o,s:o}", "time", (json_int_t)time(NULL), "counters",
	    ctr ? ctr : json_null(), "rules", rules, "daemon",
	    stats_daemon_json(s->daemon, prev ? prev->daemon : NULL, dt));
	if (root && rates)
		json_object_set_new(root, "rates", rates);
	else
		json_decref(rates);
	if (!compact)
		return ctl_json_print(root);
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

/* The tables: the XDP counters and rules when edge is attached, edged's
 * counters when it answered (daemon: whether it is asked; derr why it
 * did not answer), with rates after prev. */
static void stats_print_text(struct ctl *c, const struct stats_sample *s,
			     const struct stats_sample *prev, bool daemon,
			     const struct errbuf *derr)
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
	}
	if (!c->attached)
		goto daemon;
	if (prev)
		printf("%-18s %14s %12s  %s\n", "COUNTER", "TOTAL", "PER SEC",
		       "MEANING");
	else
		printf("%-18s %14s  %s\n", "COUNTER", "TOTAL", "MEANING");
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
daemon:
	if (s->daemon)
		ctl_daemon_stats_print(s->daemon, prev ? prev->daemon : NULL,
				       dt);
	else if (daemon && prev)
		printf("\nDAEMON COUNTER: edged did not answer (%s)\n",
		       derr->msg);
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
	struct stats_sample *cur = &a, *prev = &b, *tmp;
	bool daemon;
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
	rules_sort(&c->st.rules);
	a.hits = calloc(c->st.rules.n + 1, sizeof(uint64_t));
	b.hits = calloc(c->st.rules.n + 1, sizeof(uint64_t));
	if (!a.hits || !b.hits) {
		log_warnx("out of memory");
		ret = CTL_FAIL;
		goto out;
	}
	/* edged's request counters when it answers: asked at every refresh
	 * from then on */
	if (stats_read(c, cur, true, &derr)) {
		log_warnx("cannot read the counters in %s", c->pin_dir);
		ret = CTL_FAIL;
		goto out;
	}
	daemon = cur->daemon != NULL;
	if (!daemon)
		log_debug("no daemon counters: %s", derr.msg);
	if (!c->attached) {
		if (!daemon) {
			log_warnx("edge is not attached (no maps pinned in %s)",
				  c->pin_dir);
			ret = CTL_FAIL;
			goto out;
		}
		/* the daemon's counters are still worth showing */
		log_note("edge is not attached (no maps pinned in %s): "
			 "edged's counters only",
			 c->pin_dir);
	}
	if (!watch) {
		if (json)
			ret = stats_print_json(c, cur, NULL, false);
		else
			stats_print_text(c, cur, NULL, daemon, &derr);
		goto out;
	}
	for (k = 0; !has_count || k < count; k++) {
		tmp = prev;
		prev = cur;
		cur = tmp;
		stats_sleep(interval);
		if (stats_read(c, cur, daemon, &derr)) {
			log_warnx("cannot read the counters in %s (edge "
				  "detached?)",
				  c->pin_dir);
			ret = CTL_FAIL;
			goto out;
		}
		if (!c->attached && !cur->daemon) {
			log_warnx("edged did not answer: %s", derr.msg);
			ret = CTL_FAIL;
			goto out;
		}
		if (json) {
			ret = stats_print_json(c, cur, prev, true);
			if (ret)
				goto out;
		} else {
			if (k)
				printf("\n");
			stats_print_text(c, cur, prev, daemon, &derr);
		}
	}
	ret = CTL_OK;
out:
	json_decref(a.daemon);
	json_decref(b.daemon);
	free(a.hits);
	free(b.hits);
	return ret;
}
