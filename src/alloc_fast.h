/* The lock-free fast paths of malloc and free, inline so the exported
 * entry points of preload/ are one function each: a small object popped
 * from, or pushed to, the calling thread's cache. Anything else (no cache,
 * an empty or full bin, canaries, large or invalid pointers) goes to the
 * general functions of alloc.h, which check everything. */
#ifndef MB_ALLOC_FAST_H
#define MB_ALLOC_FAST_H

#include <stdint.h>

#include "alloc.h"
#include "heap.h"
#include "slab.h"
#include "tcache.h"

#define mb_likely(x) __builtin_expect(!!(x), 1)
#define mb_unlikely(x) __builtin_expect(!!(x), 0)

/* The thread cache's 64 KiB tick (see tcache.h), then p. */
void *mb_tick_then(struct mb_tcache *tc, void *p);

/* Take the newest entry of a non-empty bin. */
static inline void *mb_tcache_pop(struct mb_tcache *tc, struct mb_tbin *bin, int key, unsigned c)
{
	struct mb_tentry e = bin->e[--bin->n];
	*e.st = MB_OBJ_ALLOCATED;
	tc->counts.mallocs[key]++;
	tc->counts.alloc_bytes += mb_classes[c].size;
	if (mb_unlikely(tc->counts.alloc_bytes >= tc->next_tick))
		return mb_tick_then(tc, e.p);
	return e.p;
}

/* A small object of key from cache tc (this thread's, or NULL), or NULL
 * to go the general way. The size class tables exist once the heap is
 * initialised, which a thread cache implies. */
static inline void *mb_malloc_cached(struct mb_tcache *tc, size_t n, int key)
{
	if (mb_likely(n <= MB_SMALL_MAX && tc != NULL)) {
		unsigned c = mb_size_class(n);
		struct mb_tbin *bin = &tc->bin[key][c];
		if (mb_likely(bin->n != 0))
			return mb_tcache_pop(tc, bin, key, c);
	}
	return NULL;
}

/* Put p into cache tc (this thread's, or NULL) if it is a live small
 * object whose bin has room; 0 if it needs the general way (which also catches NULL,
 * foreign pointers and double frees). */
static inline int mb_free_cached(struct mb_tcache *tc, void *p)
{
	struct mb_buddy *b = &mb_heap.buddy;
	uintptr_t off = (uintptr_t)p - b->base;
	if (mb_unlikely(off >= mb_heap.region_bytes))
		return 0;
	struct mb_page *m = &b->pages[off >> MB_PAGE_SHIFT];
	if (mb_unlikely(m->kind != MB_KIND_SLAB))
		return 0;
	/* Everything but the state byte comes from the page record and the
	 * class table. */
	unsigned c = m->sclass;
	const struct mb_class_info *ci = &mb_classes[c];
	uintptr_t start = ((uintptr_t)p & ~(uintptr_t)(MB_PAGE_SIZE - 1)) - ((uintptr_t)m->user16 << MB_PAGE_SHIFT);
	uintptr_t o = (uintptr_t)p - start;
	uint32_t i = (uint32_t)(((uint64_t)o * ci->magic) >> 32);
	struct mb_slab *s = m->user.ptr;
	/* i <= nobj, and state[nobj] is never MB_OBJ_ALLOCATED. */
	if (mb_unlikely((uintptr_t)i * ci->size != o || s->state[i] != MB_OBJ_ALLOCATED || tc == NULL))
		return 0;
	struct mb_tbin *bin = &tc->bin[m->user32][c];
	uint32_t n = bin->n;
	if (mb_unlikely(n >= bin->cap))
		return 0;
	s->state[i] = MB_OBJ_CACHED;
	tc->counts.frees++;
	tc->counts.freed_bytes += ci->size;
	bin->e[n].p = p;
	bin->e[n].st = &s->state[i];
	bin->n = n + 1;
	return 1;
}

/* malloc and free for the exported entry points: the fast path inline,
 * the general function otherwise, each reached by a tail call so the
 * entry point needs no stack frame. With canaries (MBUDDY_CHECK=1)
 * mb_tc_fast is NULL, so every call takes the general way, which checks
 * them and then uses the thread's cache. */
static inline void *mb_malloc_inline(size_t n, int key)
{
	struct mb_tcache *tc = mb_tc_fast;
	if (mb_likely(n <= MB_SMALL_MAX && tc != NULL)) {
		unsigned c = mb_size_class(n);
		struct mb_tbin *bin = &tc->bin[key][c];
		if (mb_likely(bin->n != 0))
			return mb_tcache_pop(tc, bin, key, c);
	}
	return mb_malloc(n, key);
}

static inline void mb_free_inline(void *p, const char *func)
{
	if (mb_likely(mb_free_cached(mb_tc_fast, p)))
		return;
	mb_free(p, func);
}

#endif
