/* A wrapper (xmalloc) called from three functions at one stack depth,
 * each with its own lifetime, as three_sites_wrapped: once the sites have
 * settled, its allocations must be told apart without an unwind per call.
 * The return address and the stack depth alone are the same for the
 * three; the wrapper's own return address, read from its frame at the
 * offset an unwind taught, is not. libmbuddy's calls to libunwind's
 * unw_backtrace are counted by interposing it (this program exports its
 * own, which libmbuddy finds before libunwind's when it loads libunwind,
 * libunwind.so here): over the measured rounds there must be
 * fewer than one unwind per eight allocations (samples and rechecks only;
 * before the caller slot, an unwind for each), and the three objects must
 * still get their three types. */
#define _GNU_SOURCE
#define WRAPPED
#include "config.h"
#include "three_sites_load.h"

static int (*real_backtrace)(void **, int);
static volatile long unwinds;

__attribute__((visibility("default"))) int unw_backtrace(void **buf, int size)
{
	unwinds++;
	return real_backtrace ? real_backtrace(buf, size) : 0;
}

/* Behind this program if something linked libunwind, else in the copy
 * libmbuddy loads (MB_LIBUNWIND_SONAME, config.h), loaded here first. */
static void find_real(void)
{
	real_backtrace = (int (*)(void **, int))dlsym(RTLD_NEXT, "unw_backtrace");
	void *lib;
	if (!real_backtrace && (lib = dlopen(MB_LIBUNWIND_SONAME, RTLD_NOW | RTLD_LOCAL)) != NULL)
		real_backtrace = (int (*)(void **, int))dlsym(lib, "unw_backtrace");
}

enum { ROUNDS = 400000, MEASURED = 200000 };

int main(void)
{
	need_libmbuddy();
	find_real();
	if (!real_backtrace) {
		fprintf(stderr, "libunwind's unw_backtrace not found behind this program\n");
		return 77;
	}
	struct three_sites l = { calloc(CACHE, sizeof(void *)), calloc((ROUNDS + MEASURED) / 8 + 1, sizeof(void *)), 0,
				 NULL };
	long allocs = 0, before = 0;
	for (long i = 0; i < ROUNDS + MEASURED; i++) {
		if (i == ROUNDS) {
			before = unwinds;
			allocs = 0;
		}
		allocs += three_sites_round(&l, i);
		if (i < ROUNDS + MEASURED - 1)
			free(l.temp);
	}
	long counted = unwinds - before;
	int bad = 0;
	bad += expect_type("pinned site", l.pins[l.npins - 1], 0);
	bad += expect_type("FIFO cache site", l.cache[(ROUNDS + MEASURED - 1) % CACHE], 1);
	bad += expect_type("temporaries site", l.temp, 2);
	printf("unwinds over the last %d rounds: %ld for %ld allocations (limit %ld)\n", MEASURED, counted,
	       allocs, allocs / 8);
	if (counted >= allocs / 8)
		bad++;
	return bad ? 1 : 0;
}
