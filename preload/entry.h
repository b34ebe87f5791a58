/* The patterns of the entry points of preload/, each in one place.
 *
 * Allocating: classify the call site, allocate with the slab key it gave,
 * and tell classification about the object when it picked it as a sample.
 * Inline, so an entry point that uses them has no frame of theirs, and
 * `ra`, the caller's return address (CALLER), must be taken by the
 * exported function itself. malloc and operator new keep their own inline
 * fast paths (mb_classify_fast, then the thread heap) and come here only
 * when the site needs the classifier's slow path.
 *
 * Freeing: the thread heap inline, then one tail call to the general
 * path, which hands glibc back what glibc's malloc allocated for a
 * deep-bound object (deepbind.h). */
#ifndef MB_ENTRY_H
#define MB_ENTRY_H

#include <stddef.h>

#include "alloc.h"
#include "classify.h"
#include "deepbind.h"
#include "exports.h"
#include "theap.h"
#include "thread.h"

/* malloc with the classification t (from mb_classify or
 * mb_classify_site_slow). */
static inline void *malloc_as(int t, size_t n)
{
	return mb_sampled(mb_malloc(n, T(t)), t, n);
}

/* The classifier's slow path, which the sampling countdown brings every
 * few hundred allocations even to a thread whose every object comes from
 * its thread cache: the thread heap's time-based work rides on it. */
static inline int classify_slow(void *ra, size_t n)
{
	mb_alloc_tick();
	return mb_classify_site_slow(ra, n);
}

static inline int classify(void *ra, size_t n)
{
	int key;
	if (__builtin_expect(mb_classify_fast(ra, &key), 1))
		return key;
	return classify_slow(ra, n);
}

static inline void *site_malloc(void *ra, size_t n)
{
	return malloc_as(classify(ra, n), n);
}

/* For a caller whose mb_classify_fast() already said no: the countdown
 * is counted, so only the slow path runs. */
static inline void *site_malloc_slow(void *ra, size_t n)
{
	return malloc_as(classify_slow(ra, n), n);
}

/* The product may overflow: mb_calloc fails then, and the classifier
 * only takes the size as a hint. */
static inline void *site_calloc(void *ra, size_t nmemb, size_t size)
{
	int t = classify(ra, nmemb * size);
	return mb_sampled(mb_calloc(nmemb, size, T(t)), t, nmemb * size);
}

/* align: a power of two. */
static inline void *site_memalign(void *ra, size_t align, size_t n)
{
	int t = classify(ra, n);
	return mb_sampled(mb_memalign(align, n, T(t)), t, n);
}

/* A block that stayed in place keeps its own sample state. One that
 * glibc's malloc allocated stays glibc's: glibc's realloc moves it or
 * frees it (a size of 0) as it would have. */
static inline void *site_realloc(void *ra, void *p, size_t n, const char *func)
{
	if (mb_glibc_pointer(p))
		return mb_glibc.realloc(p, n);
	int t = classify(ra, n);
	void *q = mb_realloc(p, n, T(t), func);
	return q != p ? mb_sampled(q, t, n) : q;
}

/* A free that takes no fast path (cfree, the sized frees): glibc's
 * pointers, and everything mb_free does (malloc_api.c). */
void mb_free_general(void *p, const char *func);
/* A free that free_entry's fast path declined, p not NULL: glibc's
 * pointers, and everything mb_free_declined checks. */
void mb_free_declined_general(void *p, const char *func);

/* free and operator delete: the object back into a slab the thread
 * owns, or a tail call. NULL returns on the declined side, where it
 * costs the fast path nothing: a program that frees NULL as often as
 * objects (alloc-test's bursts over half-empty slots) took the whole
 * general path, the fast path's test included, for each. (Only those
 * entry points: with more, the compiler stops inlining the fast path.) */
static inline void free_entry(void *p, const char *func)
{
	struct mb_slab *s;
	int r = mb_theap_push(mb_self.fast, p, &s);
	if (mb_likely(r == 1))
		return;
	if (r == 2)
		return mb_free_settle(s);
	if (r == 3)
		return mb_free_look(s);
	if (p == NULL)
		return;
	mb_free_declined_general(p, func);
}

#endif
