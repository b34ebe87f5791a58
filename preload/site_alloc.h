/* The one pattern of every allocating entry point of preload/: classify
 * the call site, allocate with the slab key it gave, and tell
 * classification about the object when it picked it as a sample. Inline,
 * so an entry point that uses them has no frame of theirs, and `ra`,
 * the caller's return address (CALLER), must be taken by the exported
 * function itself. malloc and operator new keep their own inline fast
 * paths (mb_classify_fast, then the thread cache) and come here only
 * when the site needs the classifier's slow path. */
#ifndef MB_SITE_ALLOC_H
#define MB_SITE_ALLOC_H

#include <stddef.h>

#include "alloc.h"
#include "classify.h"
#include "exports.h"

/* malloc with the classification t (from mb_classify or
 * mb_classify_site_slow). */
static inline void *malloc_as(int t, size_t n)
{
	return mb_sampled(mb_malloc(n, T(t)), t, n);
}

static inline void *site_malloc(void *ra, size_t n)
{
	return malloc_as(mb_classify(ra, n), n);
}

/* For a caller whose mb_classify_fast() already said no: the countdown
 * is counted, so only the slow path runs. */
static inline void *site_malloc_slow(void *ra, size_t n)
{
	return malloc_as(mb_classify_site_slow(ra, n), n);
}

/* The product may overflow: mb_calloc fails then, and the classifier
 * only takes the size as a hint. */
static inline void *site_calloc(void *ra, size_t nmemb, size_t size)
{
	int t = mb_classify(ra, nmemb * size);
	return mb_sampled(mb_calloc(nmemb, size, T(t)), t, nmemb * size);
}

/* align: a power of two. */
static inline void *site_memalign(void *ra, size_t align, size_t n)
{
	int t = mb_classify(ra, n);
	return mb_sampled(mb_memalign(align, n, T(t)), t, n);
}

/* A block that stayed in place keeps its own sample state. */
static inline void *site_realloc(void *ra, void *p, size_t n, const char *func)
{
	int t = mb_classify(ra, n);
	void *q = mb_realloc(p, n, T(t), func);
	return q != p ? mb_sampled(q, t, n) : q;
}

#endif
