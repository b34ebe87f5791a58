/* Three direct call sites with distinct lifetimes - pinned objects, a FIFO
 * cache, temporaries - interleaved as a program would. Each must end up in
 * its own type, and within a bounded number of allocations. With WRAPPED,
 * all three go through one shared wrapper function instead. */
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

enum { CACHE = 40000, ROUNDS = 400000 };

int main(void)
{
	need_libmbuddy();
	void **cache = calloc(CACHE, sizeof(void *));
	void **pins = calloc(ROUNDS / 8 + 1, sizeof(void *));
	int npins = 0;
	long settled = -1;
	char *last_temp = NULL;
	for (long i = 0; i < ROUNDS; i++) {
		size_t n = 48 + (size_t)(i * 7919 % 200);
		char *t = temp_alloc(n);
		memset(t, 1, n);
		long c = i % CACHE;
		free(cache[c]);
		cache[c] = cache_alloc(n);
		if (i % 8 == 0)
			pins[npins++] = pinned_alloc(n);
		if (i == ROUNDS - 1)
			last_temp = t;
		else
			free(t);
		/* Settled: this round's objects all have their own type. */
		if (settled < 0 && i % 8 == 0 && pointer_type(pins[npins - 1]) == 0 &&
		    pointer_type(cache[c]) == 1 && pointer_type(t) == 2)
			settled = i + 1;
	}
	int bad = 0;
	/* The last round's objects, from the very same call paths. */
	bad += expect_type("pinned site", pins[npins - 1], 0);
	bad += expect_type("FIFO cache site", cache[(ROUNDS - 1) % CACHE], 1);
	bad += expect_type("temporaries site", last_temp, 2);
	printf("all three sites settled after %ld rounds (bound %d)\n", settled, ROUNDS);
	if (settled < 0)
		bad++;
	return bad ? 1 : 0;
}
