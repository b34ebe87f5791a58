/* The load of three_sites, three_sites_wrapped and wrapper_unwinds: three
 * call sites with distinct lifetimes - pinned objects (one round in
 * eight), a FIFO cache of CACHE objects, temporaries - allocated by one
 * round at a time. With WRAPPED, all three go through one shared wrapper
 * function (xmalloc), called from three functions at one stack depth.
 *
 * A round is one out-of-line function, so that each call site exists
 * once: a loop the compiler duplicated would add deep sites behind the
 * same caller. */
#ifndef THREE_SITES_LOAD_H
#define THREE_SITES_LOAD_H

#include "classify_common.h"

#include <string.h>

#ifdef WRAPPED
NI static void *xmalloc(size_t n)
{
	void *p = malloc(n);
	if (!p)
		abort();
	return keep(p);
}
#define ALLOC xmalloc
#else
#define ALLOC malloc
#endif

NI static void *pinned_alloc(size_t n) { return keep(ALLOC(n)); }
NI static void *cache_alloc(size_t n) { return keep(ALLOC(n)); }
NI static void *temp_alloc(size_t n) { return keep(ALLOC(n)); }

enum { CACHE = 40000 };

struct three_sites {
	void **cache; /* CACHE slots */
	void **pins;  /* one slot per eight rounds */
	int npins;
	char *temp;   /* this round's temporary, for the caller to free */
};

/* Round i: a temporary, written; the cache slot i % CACHE replaced; every
 * eighth round a pinned object. Returns the allocations made. */
NI static long three_sites_round(struct three_sites *l, long i)
{
	size_t n = 48 + (size_t)(i * 7919 % 200);
	l->temp = temp_alloc(n);
	memset(l->temp, 1, n);
	long c = i % CACHE;
	free(l->cache[c]);
	l->cache[c] = cache_alloc(n);
	if (i % 8 != 0)
		return 2;
	l->pins[l->npins++] = pinned_alloc(n);
	return 3;
}

#endif
