/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * clk.h - edged's one clock: monotonic and wall-clock nanoseconds, read
 * at most once per batch of a loop's callbacks.
 *
 * A thread that runs an event loop attaches it (clk_attach): its first
 * clk_now_ns() (clk_real_ns()) in a batch reads the clock, keeps the
 * value and activates an event that forgets it after the callbacks queued
 * at that moment, so a request's times are those of the batches that
 * handled its bytes (at most one batch behind), and a loop kept busy
 * without a pause (a stream) still sees time pass. A thread without an
 * attached loop reads the clock at every call.
 */
#ifndef EDGE_CLK_H
#define EDGE_CLK_H

#include <stdint.h>

struct event_base;

/* Monotonic nanoseconds (CLOCK_MONOTONIC). */
uint64_t clk_now_ns(void);

/* Monotonic nanoseconds read now, whatever the batch's reading (which
 * it replaces): an end that must not look as early as the batch's
 * start, such as the duration of an answer edge wrote in that batch. */
uint64_t clk_fresh_ns(void);

/* Wall-clock nanoseconds (CLOCK_REALTIME). */
uint64_t clk_real_ns(void);

/* Batch this thread's readings by base's callbacks, until clk_detach.
 * Returns 0 or -ENOMEM. */
int clk_attach(struct event_base *base);

/* Stop batching on this thread (before its loop's base is freed). */
void clk_detach(void);

#endif /* EDGE_CLK_H */
