/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * h2mem.c - a paging allocator for an nghttp2 session (h2mem.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "h2mem.h"

static void *h2mem_malloc(size_t size, void *user)
{
	struct h2mem *m = user;
	size_t len = (size + H2MEM_PAGE - 1) / H2MEM_PAGE * H2MEM_PAGE;
	void *p;

	if (size < H2MEM_MIN || m->n == H2MEM_MAX)
		return malloc(size);
	p = aligned_alloc(H2MEM_PAGE, len);
	if (p) {
		m->b[m->n].p = p;
		m->b[m->n].len = len;
		m->b[m->n].out = false;
		m->n++;
	}
	return p;
}

void h2mem_mark(struct h2mem *m, const uint8_t *p)
{
	unsigned i;

	for (i = 0; i < m->n; i++) {
		const uint8_t *b = m->b[i].p;

		if (p >= b && p < b + m->b[i].len) {
			m->b[i].out = true;
			return;
		}
	}
}

/* Forget p if it is a page allocation: its length, else 0. */
static size_t h2mem_unpage(struct h2mem *m, void *p)
{
	size_t len;
	unsigned i;

	for (i = 0; i < m->n; i++) {
		if (m->b[i].p != p)
			continue;
		len = m->b[i].len;
		m->b[i] = m->b[--m->n];
		return len;
	}
	return 0;
}

static void h2mem_free(void *p, void *user)
{
	if (p)
		h2mem_unpage(user, p);
	free(p);
}

static void *h2mem_calloc(size_t n, size_t size, void *user)
{
	void *p;

	if (size && n > SIZE_MAX / size)
		return NULL;
	if (n * size < H2MEM_MIN)
		return calloc(n, size);
	p = h2mem_malloc(n * size, user);
	if (p)
		memset(p, 0, n * size);
	return p;
}

static void *h2mem_realloc(void *p, size_t size, void *user)
{
	struct h2mem *m = user;
	size_t old;
	void *q;

	if (!p)
		return h2mem_malloc(size, user);
	old = h2mem_unpage(m, p);
	if (!old) /* a malloc'ed block stays one */
		return realloc(p, size);
	q = size ? h2mem_malloc(size, user) : NULL;
	if (!q) {
		if (size) { /* p is kept, still a page allocation */
			m->b[m->n].p = p;
			m->b[m->n].len = old;
			m->b[m->n].out = false;
			m->n++;
		} else {
			free(p);
		}
		return NULL;
	}
	memcpy(q, p, old < size ? old : size);
	free(p);
	return q;
}

void h2mem_init(struct h2mem *m, nghttp2_mem *out)
{
	memset(m, 0, sizeof(*m));
	*out = (nghttp2_mem){m, h2mem_malloc, h2mem_free, h2mem_calloc,
			     h2mem_realloc};
}

void h2mem_release(struct h2mem *m)
{
	unsigned i;

	for (i = 0; i < m->n; i++)
		if (m->b[i].out)
			madvise(m->b[i].p, m->b[i].len, MADV_DONTNEED);
}
