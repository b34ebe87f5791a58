/* The malloc-level operations every entry point is built from. `key` is
 * the slab key chosen by the caller (reclaim_type.h: a reclaim type, from
 * classification, the typed API or the default, and a lane). Errors follow glibc: NULL with errno = ENOMEM. */
#ifndef MB_ALLOC_H
#define MB_ALLOC_H

#include <stddef.h>

#include "compiler.h"
#include "tcache.h"
#include "thread.h"

void *mb_malloc(size_t n, int key);
void *mb_calloc(size_t nmemb, size_t size, int key);
void *mb_realloc(void *p, size_t n, int key, const char *func);
void *mb_memalign(size_t align, size_t n, int key);
void mb_free(void *p, const char *func);
size_t mb_usable_size(const void *p, const char *func);

/* Release everything idle now; returns 1 if memory was released. */
int mb_trim(void);

/* ---- the fast paths ----
 * malloc and free of the exported entry points (preload/) are one function
 * each: a small object popped from, or pushed to, the calling thread's
 * cache inline, and anything else (no cache, an empty or full bin,
 * canaries, large or invalid pointers) a tail call to the general
 * functions above, which check everything. So the entry points need no
 * stack frame. */

/* The thread's tick (mb_tcache_tick) and the work deferred to slow paths,
 * then p. */
void *mb_tick_then(struct mb_tcache *tc, void *p);

/* Take an object from a ready bin (mb_tcache_ready_bin); the tick when it
 * is due. */
static inline void *mb_alloc_pop(struct mb_tcache *tc, struct mb_tbin *bin, int key, unsigned c)
{
	void *p = mb_tcache_pop(tc, bin, key, c);
	if (mb_unlikely(mb_tcache_tick_due(tc)))
		return mb_tick_then(tc, p);
	return p;
}

/* With canaries (MBUDDY_CHECK=1) mb_self.fast is NULL, so every call takes
 * the general way, which checks them and then uses the thread's cache. */
static inline void *mb_malloc_inline(size_t n, int key)
{
	struct mb_tcache *tc = mb_self.fast;
	unsigned c;
	struct mb_tbin *bin = mb_tcache_ready_bin(tc, n, key, &c);
	if (mb_likely(bin != NULL))
		return mb_alloc_pop(tc, bin, key, c);
	return mb_malloc(n, key);
}

static inline void mb_free_inline(void *p, const char *func)
{
	if (mb_likely(mb_tcache_push(mb_self.fast, p)))
		return;
	mb_free(p, func);
}

#endif
