/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * siphash.h - SipHash-2-4 under one random key per process: the hash of
 * every table edged keys by something a client or a tenant chooses
 * (upstream endpoints, the route table's domains and ids), so that
 * nobody can pick names that collide on purpose.
 */
#ifndef EDGE_SIPHASH_H
#define EDGE_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* The hash of data[0..len) under the process's key (drawn from OpenSSL's
 * RAND_bytes, else getrandom, at the first call; thread-safe). */
uint64_t siphash_key(const void *data, size_t len);

#endif /* EDGE_SIPHASH_H */
