/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * metrics.c - the metrics registry and its Prometheus text rendering.
 *
 * Families and series are linked lists in registration order, changed and
 * walked only under the registry's mutex; the values inside a series are
 * atomics that workers update without it.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "edge_maps.h"
#include "metrics.h"

enum metrics_type {
	METRICS_COUNTER,
	METRICS_GAUGE,
	METRICS_HISTOGRAM,
};

static const char *const metrics_type_names[] = {
    [METRICS_COUNTER] = "counter",
    [METRICS_GAUGE] = "gauge",
    [METRICS_HISTOGRAM] = "histogram",
};

struct metrics_series {
	struct metrics_series *next;
	char *labels;		/* rendered: a="x",b="y" (escaped), or "" */
	_Atomic uint64_t count; /* counter; histogram: unused */
	_Atomic int64_t gauge;
	/* histogram */
	uint64_t bounds[METRICS_BUCKETS_MAX];
	size_t nbounds;
	uint64_t unit;
	_Atomic uint64_t buckets[METRICS_BUCKETS_MAX + 1]; /* last: +Inf */
	_Atomic uint64_t sum;
};

/* The public handles are the series itself. */
struct metrics_counter {
	struct metrics_series s;
};
struct metrics_gauge {
	struct metrics_series s;
};
struct metrics_histogram {
	struct metrics_series s;
};

struct metrics_family {
	struct metrics_family *next;
	char *name;
	char *help;
	enum metrics_type type;
	struct metrics_series *first, *last;
};

struct metrics {
	pthread_mutex_t mu;
	struct metrics_family *first, *last;
};

const uint64_t metrics_duration_bounds_ns[] = {
    1000000,	2500000,    5000000,	 10000000,  25000000,
    50000000,	100000000,  250000000,	 500000000, 1000000000,
    2500000000, 5000000000, 10000000000,
};
const size_t metrics_duration_nbounds =
    sizeof(metrics_duration_bounds_ns) / sizeof(metrics_duration_bounds_ns[0]);

struct metrics *metrics_new(void)
{
	struct metrics *m = calloc(1, sizeof(*m));

	if (m)
		pthread_mutex_init(&m->mu, NULL);
	return m;
}

static void metrics_series_free(struct metrics_series *s)
{
	if (!s)
		return;
	free(s->labels);
	free(s);
}

void metrics_free(struct metrics *m)
{
	struct metrics_family *f, *fn;
	struct metrics_series *s, *sn;

	if (!m)
		return;
	for (f = m->first; f; f = fn) {
		fn = f->next;
		for (s = f->first; s; s = sn) {
			sn = s->next;
			metrics_series_free(s);
		}
		free(f->name);
		free(f->help);
		free(f);
	}
	pthread_mutex_destroy(&m->mu);
	free(m);
}

/* ---- text helpers ---------------------------------------------------- */

static bool metrics_name_ok(const char *s, bool metric)
{
	size_t i;

	if (metric && strncmp(s, "edge_", 5) != 0)
		return false;
	if (!metric && (s[0] == '\0' || strncmp(s, "__", 2) == 0))
		return false;
	for (i = 0; s[i]; i++) {
		char ch = s[i];
		bool alpha = (ch >= 'a' && ch <= 'z') ||
			     (ch >= 'A' && ch <= 'Z') || ch == '_' ||
			     (metric && ch == ':');

		if (!alpha && !(i > 0 && ch >= '0' && ch <= '9'))
			return false;
	}
	return i > 0;
}

/* Growing string for rendering labels at registration. */
struct metrics_str {
	char *p;
	size_t len, cap;
	bool oom;
};

static void str_add(struct metrics_str *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		char *p;

		while (cap < b->len + n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

/* Label values escape \, " and newline; HELP text \ and newline. */
static void str_add_escaped(struct metrics_str *b, const char *s, bool quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			str_add(b, "\\\\", 2);
		else if (*s == '\n')
			str_add(b, "\\n", 2);
		else if (quote && *s == '"')
			str_add(b, "\\\"", 2);
		else
			str_add(b, s, 1);
	}
}

static char *metrics_labels(const char *const *labels, bool histogram)
{
	struct metrics_str b = {0};
	size_t i;

	str_add(&b, "", 0);
	for (i = 0; labels && labels[i]; i += 2) {
		if (!labels[i + 1] || i / 2 >= METRICS_LABELS_MAX ||
		    !metrics_name_ok(labels[i], false) ||
		    (histogram && strcmp(labels[i], "le") == 0)) {
			free(b.p);
			return NULL;
		}
		if (i)
			str_add(&b, ",", 1);
		str_add(&b, labels[i], strlen(labels[i]));
		str_add(&b, "=\"", 2);
		str_add_escaped(&b, labels[i + 1], true);
		str_add(&b, "\"", 1);
	}
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	return b.p;
}

/* ---- registration ------------------------------------------------------ */

/* Histogram settings, checked and set under the registry's lock. */
struct metrics_hconf {
	const uint64_t *bounds;
	size_t nbounds;
	uint64_t unit;
};

static bool metrics_hconf_eq(const struct metrics_series *s,
			     const struct metrics_hconf *hc)
{
	return s->nbounds == hc->nbounds && s->unit == hc->unit &&
	       (hc->nbounds == 0 ||
		memcmp(s->bounds, hc->bounds,
		       hc->nbounds * sizeof(*hc->bounds)) == 0);
}

static struct metrics_series *
metrics_register(struct metrics *m, enum metrics_type type, const char *name,
		 const char *help, const char *const *labels,
		 const struct metrics_hconf *hc)
{
	struct metrics_family *f;
	struct metrics_series *s = NULL;
	char *lbl;

	if (!m || !name || !metrics_name_ok(name, true))
		return NULL;
	lbl = metrics_labels(labels, type == METRICS_HISTOGRAM);
	if (!lbl)
		return NULL;
	pthread_mutex_lock(&m->mu);
	for (f = m->first; f; f = f->next)
		if (strcmp(f->name, name) == 0)
			break;
	if (f && f->type != type)
		goto out;
	if (f) {
		for (s = f->first; s; s = s->next)
			if (strcmp(s->labels, lbl) == 0)
				break;
		if (s) {
			/* the same series again; other buckets: refuse */
			if (hc && !metrics_hconf_eq(s, hc))
				s = NULL;
			goto out;
		}
	} else {
		f = calloc(1, sizeof(*f));
		if (!f)
			goto out;
		f->name = strdup(name);
		f->help = strdup(help ? help : "");
		f->type = type;
		if (!f->name || !f->help) {
			free(f->name);
			free(f->help);
			free(f);
			goto out;
		}
		if (m->last)
			m->last->next = f;
		else
			m->first = f;
		m->last = f;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		goto out;
	s->labels = lbl;
	lbl = NULL;
	if (hc) {
		if (hc->nbounds)
			memcpy(s->bounds, hc->bounds,
			       hc->nbounds * sizeof(*hc->bounds));
		s->nbounds = hc->nbounds;
		s->unit = hc->unit;
	}
	if (f->last)
		f->last->next = s;
	else
		f->first = s;
	f->last = s;
out:
	pthread_mutex_unlock(&m->mu);
	free(lbl);
	return s;
}

struct metrics_counter *metrics_counter_new(struct metrics *m, const char *name,
					    const char *help,
					    const char *const *labels)
{
	return (struct metrics_counter *)metrics_register(
	    m, METRICS_COUNTER, name, help, labels, NULL);
}

struct metrics_gauge *metrics_gauge_new(struct metrics *m, const char *name,
					const char *help,
					const char *const *labels)
{
	return (struct metrics_gauge *)metrics_register(m, METRICS_GAUGE, name,
							help, labels, NULL);
}

struct metrics_histogram *
metrics_histogram_new(struct metrics *m, const char *name, const char *help,
		      const char *const *labels, const uint64_t *bounds,
		      size_t nbounds, uint64_t unit)
{
	struct metrics_hconf hc = {bounds, nbounds, unit};
	struct metrics_series *s;
	uint64_t u;
	size_t i;

	if (nbounds > METRICS_BUCKETS_MAX || (nbounds && !bounds))
		return NULL;
	for (i = 1; i < nbounds; i++)
		if (bounds[i] <= bounds[i - 1])
			return NULL;
	/* unit must be a power of ten so that output is an exact decimal */
	for (u = unit; u > 1 && u % 10 == 0; u /= 10)
		;
	if (unit == 0 || u != 1)
		return NULL;
	s = metrics_register(m, METRICS_HISTOGRAM, name, help, labels, &hc);
	return (struct metrics_histogram *)s;
}

/* ---- updates ------------------------------------------------------------ */

void metrics_counter_add(struct metrics_counter *c, uint64_t n)
{
	if (c)
		atomic_fetch_add_explicit(&c->s.count, n, memory_order_relaxed);
}

void metrics_gauge_set(struct metrics_gauge *g, int64_t v)
{
	if (g)
		atomic_store_explicit(&g->s.gauge, v, memory_order_relaxed);
}

void metrics_gauge_add(struct metrics_gauge *g, int64_t d)
{
	if (g)
		atomic_fetch_add_explicit(&g->s.gauge, d, memory_order_relaxed);
}

void metrics_histogram_observe(struct metrics_histogram *h, uint64_t v)
{
	size_t lo = 0, hi;

	if (!h)
		return;
	/* first bound >= v; nbounds (the +Inf bucket) when none */
	hi = h->s.nbounds;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (h->s.bounds[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	atomic_fetch_add_explicit(&h->s.buckets[lo], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->s.sum, v, memory_order_relaxed);
}

uint64_t metrics_counter_get(const struct metrics_counter *c)
{
	return c ? atomic_load_explicit(&c->s.count, memory_order_relaxed) : 0;
}

int64_t metrics_gauge_get(const struct metrics_gauge *g)
{
	return g ? atomic_load_explicit(&g->s.gauge, memory_order_relaxed) : 0;
}

/* ---- rendering ------------------------------------------------------------
 */

void metrics_fmt_scaled(char *buf, size_t len, uint64_t v, uint64_t unit)
{
	uint64_t frac = v % unit;
	int digits = 0, n;
	uint64_t u;

	if (unit == 1 || frac == 0) {
		snprintf(buf, len, "%llu", (unsigned long long)(v / unit));
		return;
	}
	for (u = unit; u > 1; u /= 10)
		digits++;
	n = snprintf(buf, len, "%llu.%0*llu", (unsigned long long)(v / unit),
		     digits, (unsigned long long)frac);
	while (n > 0 && (size_t)n < len && buf[n - 1] == '0')
		buf[--n] = '\0';
}

int metrics_render_help(struct evbuffer *out, const char *name,
			const char *help, const char *type)
{
	struct metrics_str b = {0};
	int rc;

	str_add(&b, "", 0);
	str_add_escaped(&b, help, false);
	if (b.oom) {
		free(b.p);
		return -ENOMEM;
	}
	rc = evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, b.p,
				 name, type);
	free(b.p);
	return rc < 0 ? -ENOMEM : 0;
}

int metrics_render_buckets(struct evbuffer *out, const char *name,
			   const char *labels, const uint64_t *bounds,
			   size_t nbounds, const _Atomic uint64_t *buckets,
			   const _Atomic uint64_t *sum_p, uint64_t unit)
{
	uint64_t cum = 0, sum;
	char le[48], sumbuf[48];
	const char *sep = labels[0] ? "," : "";
	size_t i;
	int rc = 0;

	for (i = 0; i <= nbounds; i++) {
		cum += atomic_load_explicit(&buckets[i], memory_order_relaxed);
		if (i < nbounds)
			metrics_fmt_scaled(le, sizeof(le), bounds[i], unit);
		else
			snprintf(le, sizeof(le), "+Inf");
		if (evbuffer_add_printf(out, "%s_bucket{%s%sle=\"%s\"} %llu\n",
					name, labels, sep, le,
					(unsigned long long)cum) < 0)
			rc = -ENOMEM;
	}
	sum = atomic_load_explicit(sum_p, memory_order_relaxed);
	metrics_fmt_scaled(sumbuf, sizeof(sumbuf), sum, unit);
	if (labels[0]) {
		if (evbuffer_add_printf(
			out, "%s_sum{%s} %s\n%s_count{%s} %llu\n", name, labels,
			sumbuf, name, labels, (unsigned long long)cum) < 0)
			rc = -ENOMEM;
	} else {
		if (evbuffer_add_printf(out, "%s_sum %s\n%s_count %llu\n", name,
					sumbuf, name,
					(unsigned long long)cum) < 0)
			rc = -ENOMEM;
	}
	return rc;
}

void metrics_buckets_observe(const uint64_t *bounds, size_t nbounds,
			     _Atomic uint64_t *buckets, _Atomic uint64_t *sum,
			     uint64_t v)
{
	size_t lo = 0, hi = nbounds;

	/* first bound >= v; nbounds (the +Inf bucket) when none */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (bounds[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	atomic_fetch_add_explicit(&buckets[lo], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(sum, v, memory_order_relaxed);
}

static int metrics_render_histogram(struct evbuffer *out, const char *name,
				    const struct metrics_series *s)
{
	return metrics_render_buckets(out, name, s->labels, s->bounds,
				      s->nbounds, s->buckets, &s->sum, s->unit);
}

static int metrics_render_series(struct evbuffer *out,
				 const struct metrics_family *f,
				 const struct metrics_series *s)
{
	char val[32];
	int rc;

	if (f->type == METRICS_HISTOGRAM)
		return metrics_render_histogram(out, f->name, s);
	if (f->type == METRICS_COUNTER)
		snprintf(val, sizeof(val), "%llu",
			 (unsigned long long)atomic_load_explicit(
			     &s->count, memory_order_relaxed));
	else
		snprintf(val, sizeof(val), "%lld",
			 (long long)atomic_load_explicit(&s->gauge,
							 memory_order_relaxed));
	if (s->labels[0])
		rc = evbuffer_add_printf(out, "%s{%s} %s\n", f->name, s->labels,
					 val);
	else
		rc = evbuffer_add_printf(out, "%s %s\n", f->name, val);
	return rc < 0 ? -ENOMEM : 0;
}

int metrics_render(struct metrics *m, struct evbuffer *out)
{
	const struct metrics_family *f;
	const struct metrics_series *s;
	int rc = 0;

	pthread_mutex_lock(&m->mu);
	for (f = m->first; f && rc == 0; f = f->next) {
		rc = metrics_render_help(out, f->name, f->help,
					 metrics_type_names[f->type]);
		for (s = f->first; s && rc == 0; s = s->next)
			rc = metrics_render_series(out, f, s);
	}
	pthread_mutex_unlock(&m->mu);
	return rc;
}

/* ---- XDP counters ----------------------------------------------------------
 */

struct metrics_xdp_ctr {
	const char *name;
};

static const struct metrics_xdp_ctr metrics_xdp_ctrs[EDGE_CTR_MAX] = {
#define METRICS_XDP_ROW(id, n, help) [EDGE_CTR_##id] = {n},
    EDGE_COUNTERS(METRICS_XDP_ROW)
#undef METRICS_XDP_ROW
};

/* The verdict counters, as edge_maps.h defines them. */
static bool metrics_xdp_is_verdict(const char *name)
{
	return strcmp(name, "passed") == 0 || strncmp(name, "dropped_", 8) == 0;
}

int metrics_render_xdp(struct evbuffer *out, const uint64_t *values,
		       size_t nvalues)
{
	static const struct {
		bool verdict;
		const char *name, *label, *help;
	} fam[] = {
	    {true, "edge_xdp_packets_total", "verdict",
	     "Packets seen by the XDP program, by verdict."},
	    {false, "edge_xdp_events_total", "event",
	     "Packets the XDP program counted further (malformed, "
	     "fragments, ...)."},
	};
	size_t k, i;
	int rc = 0;

	for (k = 0; k < sizeof(fam) / sizeof(fam[0]); k++) {
		rc = metrics_render_help(out, fam[k].name, fam[k].help,
					 "counter");
		for (i = 0; i < EDGE_CTR_MAX && rc == 0; i++) {
			const char *n = metrics_xdp_ctrs[i].name;

			if (metrics_xdp_is_verdict(n) != fam[k].verdict)
				continue;
			if (evbuffer_add_printf(
				out, "%s{%s=\"%s\"} %llu\n", fam[k].name,
				fam[k].label, n,
				(unsigned long long)(i < nvalues && values
							 ? values[i]
							 : 0)) < 0)
				rc = -ENOMEM;
		}
		if (rc)
			break;
	}
	return rc;
}

/* ---- the process -------------------------------------------------------- */

/* Seconds since the epoch the system booted (/proc/stat's btime), or -1. */
static long long metrics_boot_time(void)
{
	char line[256];
	long long bt = -1;
	FILE *f = fopen("/proc/stat", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "btime %lld", &bt) == 1)
			break;
	fclose(f);
	return bt;
}

/* The descriptors open (/proc/self/fd's entries, less the one reading
 * it), or -1 when /proc will not say. */
static long metrics_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	long n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n > 0 ? n - 1 : 0;
}

static int metrics_render_one(struct evbuffer *out, const char *name,
			      const char *help, const char *type,
			      const char *value)
{
	int rc = metrics_render_help(out, name, help, type);

	if (rc == 0 && evbuffer_add_printf(out, "%s %s\n", name, value) < 0)
		rc = -ENOMEM;
	return rc;
}

int metrics_render_process(struct evbuffer *out)
{
	unsigned long long utime = 0, stime = 0, start = 0, vsize = 0;
	long long rss = 0, threads = 0, boot;
	long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE), fds;
	char buf[1024], v[64], *p;
	struct rlimit rl;
	size_t n;
	FILE *f;
	int rc = 0;

	f = fopen("/proc/self/stat", "re");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* the name is in parentheses and may hold anything: the fields
	 * follow the last ')'; utime is the 14th field, the state the 3rd */
	p = strrchr(buf, ')');
	if (!p || tck <= 0 || page <= 0 ||
	    sscanf(p + 1,
		   " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu "
		   "%*d %*d %*d %*d %lld %*d %llu %llu %lld",
		   &utime, &stime, &threads, &start, &vsize, &rss) != 6)
		return 0;
	/* ticks to milliseconds, shown as an exact decimal */
	metrics_fmt_scaled(v, sizeof(v), (utime + stime) * 1000 / (uint64_t)tck,
			   1000);
	rc = metrics_render_one(out, "process_cpu_seconds_total",
				"Total user and system CPU time spent in "
				"seconds.",
				"counter", v);
	snprintf(v, sizeof(v), "%lld", rss * page);
	if (rc == 0)
		rc = metrics_render_one(out, "process_resident_memory_bytes",
					"Resident memory size in bytes.",
					"gauge", v);
	snprintf(v, sizeof(v), "%llu", vsize);
	if (rc == 0)
		rc = metrics_render_one(out, "process_virtual_memory_bytes",
					"Virtual memory size in bytes.",
					"gauge", v);
	boot = metrics_boot_time();
	if (rc == 0 && boot >= 0) {
		metrics_fmt_scaled(
		    v, sizeof(v),
		    (uint64_t)boot * 100 + start * 100 / (uint64_t)tck, 100);
		rc = metrics_render_one(out, "process_start_time_seconds",
					"Start time of the process since unix "
					"epoch in seconds.",
					"gauge", v);
	}
	fds = metrics_open_fds();
	if (rc == 0 && fds >= 0) {
		snprintf(v, sizeof(v), "%ld", fds);
		rc = metrics_render_one(out, "process_open_fds",
					"Number of open file descriptors.",
					"gauge", v);
	}
	if (rc == 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		snprintf(v, sizeof(v), "%llu",
			 rl.rlim_cur == RLIM_INFINITY
			     ? 0ULL
			     : (unsigned long long)rl.rlim_cur);
		rc = metrics_render_one(out, "process_max_fds",
					"Maximum number of open file "
					"descriptors.",
					"gauge", v);
	}
	snprintf(v, sizeof(v), "%lld", threads);
	if (rc == 0)
		rc = metrics_render_one(out, "process_threads",
					"Number of OS threads in the process.",
					"gauge", v);
	return rc;
}
