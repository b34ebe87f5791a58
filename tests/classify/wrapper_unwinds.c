/* A wrapper (xmalloc) called from three functions at one stack depth,
 * each with its own lifetime, as three_sites_wrapped: once the sites have
 * settled, its allocations must be told apart without an unwind per call.
 * The return address and the stack depth alone are the same for the
 * three; the wrapper's own return address, read from its frame at the
 * offset an unwind taught, is not. libmbuddy's calls to libunwind's
 * unw_backtrace are counted by interposing it (this program exports its
 * own, found before libunwind's): over the measured rounds there must be
 * fewer than one unwind per eight allocations (samples and rechecks only;
 * before the caller slot, an unwind for each), and the three objects must
 * still get their three types. */
#define _GNU_SOURCE
#include "classify_common.h"

#include <string.h>

static int (*real_backtrace)(void **, int);
static volatile long unwinds;

__attribute__((visibility("default"))) int unw_backtrace(void **buf, int size)
{
	unwinds++;
	return real_backtrace ? real_backtrace(buf, size) : 0;
}

__attribute__((constructor)) static void find_real(void)
{
	real_backtrace = (int (*)(void **, int))dlsym(RTLD_NEXT, "unw_backtrace");
}

NI static void *xmalloc(size_t n)
{
	void *p = malloc(n);
	if (!p)
		abort();
	return keep(p);
}

NI static void *pinned_alloc(size_t n) { return keep(xmalloc(n)); }
NI static void *cache_alloc(size_t n) { return keep(xmalloc(n)); }
NI static void *temp_alloc(size_t n) { return keep(xmalloc(n)); }

enum { CACHE = 40000, ROUNDS = 400000, MEASURED = 200000 };

/* One round, out of line, so that each of the three call sites exists
 * once: a loop the compiler duplicated would add deep sites behind the
 * same caller (another test's matter). Returns the allocations made. */
NI static long one_round(long i, void **cache, void **pins, int *npins, char **tp)
{
	size_t n = 48 + (size_t)(i * 7919 % 200);
	char *t = temp_alloc(n);
	memset(t, 1, n);
	long c = i % CACHE;
	free(cache[c]);
	cache[c] = cache_alloc(n);
	*tp = t;
	if (i % 8 != 0)
		return 2;
	pins[(*npins)++] = pinned_alloc(n);
	return 3;
}

int main(void)
{
	need_libmbuddy();
	if (!real_backtrace) {
		fprintf(stderr, "libunwind's unw_backtrace not found behind this program\n");
		return 77;
	}
	void **cache = calloc(CACHE, sizeof(void *));
	void **pins = calloc((ROUNDS + MEASURED) / 8 + 1, sizeof(void *));
	int npins = 0;
	long allocs = 0, before = 0;
	char *t = NULL;
	for (long i = 0; i < ROUNDS + MEASURED; i++) {
		if (i == ROUNDS) {
			before = unwinds;
			allocs = 0;
		}
		allocs += one_round(i, cache, pins, &npins, &t);
		if (i < ROUNDS + MEASURED - 1)
			free(t);
	}
	long counted = unwinds - before;
	int bad = 0;
	bad += expect_type("pinned site", pins[npins - 1], 0);
	bad += expect_type("FIFO cache site", cache[(ROUNDS + MEASURED - 1) % CACHE], 1);
	bad += expect_type("temporaries site", t, 2);
	printf("unwinds over the last %d rounds: %ld for %ld allocations (limit %ld)\n", MEASURED, counted,
	       allocs, allocs / 8);
	if (counted >= allocs / 8)
		bad++;
	return bad ? 1 : 0;
}
