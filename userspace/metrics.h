/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * metrics.h - a small registry rendered as Prometheus text (format 0.0.4).
 *
 * Metrics are registered at start-up (allocates, takes the registry's
 * lock) and updated from any thread afterwards without locks: every series
 * is a set of relaxed atomic 64-bit values. Atomics rather than per-worker
 * shards: one increment per request stage is a few nanoseconds, and a
 * scrape then needs no cooperation from the workers; a series that ever
 * shows up as contended in a profile can be sharded behind the same
 * functions.
 *
 * A family (one name, help and type) holds one or more series, each with
 * its own label set, rendered in registration order under one HELP/TYPE
 * pair. Names must match [a-zA-Z_:][a-zA-Z0-9_:]* and start with "edge_";
 * label values are escaped on output.
 */
#ifndef EDGE_METRICS_H
#define EDGE_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct evbuffer;
struct metrics;
struct metrics_counter;
struct metrics_gauge;
struct metrics_histogram;

/* Most buckets a histogram may have (besides +Inf). */
#define METRICS_BUCKETS_MAX 32
/* Most label pairs on one series. */
#define METRICS_LABELS_MAX 8

/* Create an empty registry. Returns NULL when out of memory. */
struct metrics *metrics_new(void);

/* Free the registry and every metric in it (pointers returned by the
 * registration functions become invalid). NULL is fine. */
void metrics_free(struct metrics *m);

/*
 * Register a series. labels is NULL or a NULL-terminated list of name,
 * value pairs ({"outcome", "ok", NULL}); names and values are copied.
 * Registering the same name again adds a series to the family (help is
 * then ignored; the type must match); the same name with the same labels
 * returns the existing series. Returns NULL on an invalid name, a type
 * clash, too many labels or no memory. Thread-safe, but meant for
 * start-up.
 */
struct metrics_counter *metrics_counter_new(struct metrics *m, const char *name,
					    const char *help,
					    const char *const *labels);
struct metrics_gauge *metrics_gauge_new(struct metrics *m, const char *name,
					const char *help,
					const char *const *labels);

/*
 * A histogram of unsigned values with fixed buckets: bounds[0..nbounds)
 * strictly increasing upper bounds (inclusive, as Prometheus' le), in the
 * recorded unit; +Inf is implicit. unit divides values on output: record
 * nanoseconds with unit 1000000000 and the text shows seconds (exact
 * decimals, no floating point). Same registration rules as counters.
 */
struct metrics_histogram *
metrics_histogram_new(struct metrics *m, const char *name, const char *help,
		      const char *const *labels, const uint64_t *bounds,
		      size_t nbounds, uint64_t unit);

/* Default request-duration buckets in nanoseconds (1 ms .. 10 s). */
extern const uint64_t metrics_duration_bounds_ns[];
extern const size_t metrics_duration_nbounds;

/* Updates: any thread, lock-free, NULL c/g/h ignored. */
void metrics_counter_add(struct metrics_counter *c, uint64_t n);
void metrics_gauge_set(struct metrics_gauge *g, int64_t v);
void metrics_gauge_add(struct metrics_gauge *g, int64_t d);
void metrics_histogram_observe(struct metrics_histogram *h, uint64_t v);

/* Current values (tests, edgectl stats). */
uint64_t metrics_counter_get(const struct metrics_counter *c);
int64_t metrics_gauge_get(const struct metrics_gauge *g);

/*
 * Append the registry in Prometheus text format 0.0.4 to out: per family
 * "# HELP", "# TYPE", then its series; histograms as _bucket{le=...}
 * (cumulative, +Inf last), _sum and _count. Values read during the render
 * are each atomic; a histogram's _count is the sum of the buckets it
 * rendered, so +Inf always equals _count. Returns 0 or -ENOMEM.
 */
int metrics_render(struct metrics *m, struct evbuffer *out);

/*
 * Append the XDP program's counters (bpf/edge_maps.h EDGE_COUNTERS),
 * summed over CPUs by the caller: values[i] for enum edge_counter i,
 * nvalues of them (missing ones render as 0). The verdict counters
 * ("passed", "dropped_*": exactly one counts each packet) become
 * edge_xdp_packets_total{verdict="..."}, the others, which describe
 * packets further, edge_xdp_events_total{event="..."}. Returns 0 or
 * -ENOMEM.
 */
int metrics_render_xdp(struct evbuffer *out, const uint64_t *values,
		       size_t nvalues);

/*
 * Append the process's own metrics under the names every Prometheus
 * client library uses (so dashboards made for them work):
 * process_cpu_seconds_total (utime + stime), process_resident_memory_bytes,
 * process_virtual_memory_bytes, process_start_time_seconds (unix),
 * process_open_fds and process_max_fds (the soft RLIMIT_NOFILE), and
 * process_threads. Read from /proc/self at each call; a value /proc will
 * not give (process_open_fds once the process is not dumpable after a
 * privilege drop, say) is left out rather than shown wrong. Returns 0 or
 * -ENOMEM.
 */
int metrics_render_process(struct evbuffer *out);

/*
 * For series that live outside a registry (rendered by their owner, e.g.
 * upreg.c's per-endpoint series): v / unit as an exact decimal ("0.005",
 * "2", "1.5") into buf; a family's "# HELP" and "# TYPE" lines; one
 * histogram's _bucket, _sum and _count lines from its raw atomics
 * (buckets[0..nbounds], the last +Inf), labels the rendered label pairs
 * (a="x",b="y", or ""); and an observation into such atomics. The
 * render functions return 0 or -ENOMEM.
 */
void metrics_fmt_scaled(char *buf, size_t len, uint64_t v, uint64_t unit);
int metrics_render_help(struct evbuffer *out, const char *name,
			const char *help, const char *type);
int metrics_render_buckets(struct evbuffer *out, const char *name,
			   const char *labels, const uint64_t *bounds,
			   size_t nbounds, const _Atomic uint64_t *buckets,
			   const _Atomic uint64_t *sum_p, uint64_t unit);
void metrics_buckets_observe(const uint64_t *bounds, size_t nbounds,
			     _Atomic uint64_t *buckets, _Atomic uint64_t *sum,
			     uint64_t v);

#endif /* EDGE_METRICS_H */
