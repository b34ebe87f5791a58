/* Shared by the classification tests: they run under LD_PRELOAD and read
 * libmbuddy's verdicts through the public API, found with dlsym. */
#ifndef CLASSIFY_COMMON_H
#define CLASSIFY_COMMON_H

#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NI __attribute__((noinline, noipa)) /* no inlining, no identical-code folding */

static const char *const type_name[] = { "KernNoRclm", "KernRclm", "UserRclm" };
static int (*pointer_type)(const void *);

/* Keeps a pointer observable so calls are not tail calls or optimised out. */
static void *volatile sink;
static inline void *keep(void *p)
{
	sink = p;
	return p;
}

/* Whether libunwind is loaded (libmbuddy loads it, MB_LIBUNWIND_SONAME). */
static int unwinder_loaded(void)
{
	void *h = dlopen(MB_LIBUNWIND_SONAME, RTLD_NOW | RTLD_NOLOAD);
	if (h)
		dlclose(h);
	return h != NULL;
}

/* Classification sleeps through a process's first 2,048 allocations or
 * 10 ms, unwinds no sample before the heap has held 1 MiB, and loads
 * libunwind in a thread of its own when a thread first unwinds
 * (libmbuddy(3), MBUDDY_CLASSIFY): these tests judge what it learns from
 * their very first allocations, stacks included, so they wait the 10 ms
 * out, then hold a 1 MiB block while they allocate temporaries until
 * libunwind is there. */
#define UNWIND_HEAP_BYTES ((size_t)1 << 20)
static void need_libmbuddy(void)
{
	pointer_type = (int (*)(const void *))dlsym(RTLD_DEFAULT, "mbuddy_pointer_type");
	if (!pointer_type) {
		fprintf(stderr, "not running under libmbuddy (no mbuddy_pointer_type)\n");
		exit(77);
	}
	struct timespec wait = { 0, 20 * 1000 * 1000 };
	nanosleep(&wait, NULL);
	void *held = keep(malloc(UNWIND_HEAP_BYTES));
	for (long i = 0; i < (1L << 28) && ((i & 4095) || !unwinder_loaded()); i++)
		free(keep(malloc(16)));
	free(held);
}

static inline int expect_type(const char *what, const void *p, int want)
{
	int got = pointer_type(p);
	printf("%-28s %-10s (want %s)\n", what, got >= 0 ? type_name[got] : "none", type_name[want]);
	return got == want ? 0 : 1;
}

#endif
