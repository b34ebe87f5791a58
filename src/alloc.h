/* The malloc-level operations every entry point is built from. `key` is
 * the slab key chosen by the caller (reclaim_type.h: a reclaim type, from
 * classification, the typed API or the default). Errors follow glibc:
 * NULL with errno = ENOMEM. */
#ifndef MB_ALLOC_H
#define MB_ALLOC_H

#include <stddef.h>

#include "compiler.h"
#include "theap.h"
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
 * each: a small object taken from, or given back to, a slab the calling
 * thread owns, inline, and anything else (no heap, an exhausted word of
 * the current slab, canaries, large or invalid pointers, another thread's
 * slab) a tail call to the general functions, which check everything. So
 * the entry points need no stack frame. */

/* The current slab of h's bin (key, class c) has no free object at its
 * cursor: the next one, from the thread heap's slow path. */
void *mb_malloc_small_slow(struct mb_theap *h, size_t n, int key, unsigned c);

/* With canaries (MBUDDY_CHECK=1) mb_self.fast is NULL, so every call takes
 * the general way, which checks them and then uses the thread's heap. */
static inline void *mb_malloc_inline(size_t n, int key)
{
	struct mb_theap *h = mb_self.fast;
	if (mb_likely(n <= MB_SMALL_MAX && h != NULL)) {
		unsigned c = mb_size_class(n);
		void *p = mb_theap_pop(h, key, c, n);
		if (mb_likely(p != NULL))
			return p;
		return mb_malloc_small_slow(h, n, key, c);
	}
	return mb_malloc(n, key);
}

/* A slow path of the calling thread that allocates nothing itself: its
 * thread heap's time-based work (theap.h's mb_theap_tick). */
void mb_alloc_tick(void);

/* The slab of an object just freed on a fast path (the entry points'
 * free, preload/entry.h) must change lists. */
void mb_free_settle(struct mb_slab *s);
/* mb_theap_look() for the free fast path's 3. */
void mb_free_look(struct mb_slab *s);
/* The free of p, not NULL, that the calling thread's fast path declined
 * (mb_theap_push on mb_self.fast returned 0): everything mb_free checks,
 * without the push again, which would decline it again (with canaries,
 * mb_self.fast is NULL and mb_free does it all). */
void mb_free_declined(void *p, const char *func);

#endif
