/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * h2mem.h - an allocator for one nghttp2 session (nghttp2_mem) whose
 * output buffer can be given back while the session is idle: malloc's,
 * but allocations of at least H2MEM_MIN bytes (nghttp2's output buffer:
 * a frame's 16 KiB and its header) are whole pages, at most H2MEM_MAX of
 * them at once per session, remembered so that those nghttp2's output
 * came from can be handed back to the kernel (h2mem_release) and come
 * back zeroed as nghttp2 writes them.
 *
 * Thread-safety: a struct h2mem belongs to its session's thread.
 */
#ifndef EDGE_H2MEM_H
#define EDGE_H2MEM_H

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define H2MEM_PAGE 4096
#define H2MEM_MIN 16384
#define H2MEM_MAX 4

struct h2mem {
	unsigned n;
	struct {
		void *p;
		size_t len; /* whole pages */
		bool out;   /* nghttp2's output came from it */
	} b[H2MEM_MAX];
};

/* Empty m, and *out the nghttp2_mem that allocates through it (m must
 * live as long as the session made with it). */
void h2mem_init(struct h2mem *m, nghttp2_mem *out);

/* nghttp2's output p (nghttp2_session_mem_send's): the page allocation
 * it lies in is its output buffer. */
void h2mem_mark(struct h2mem *m, const uint8_t *p);

/* Give the pages of the output buffer back to the kernel (madvise
 * MADV_DONTNEED): only while nghttp2 has nothing to send, so that it
 * holds nothing it reads again there (the next frame is packed from the
 * buffer's start). */
void h2mem_release(struct h2mem *m);

#endif /* EDGE_H2MEM_H */
