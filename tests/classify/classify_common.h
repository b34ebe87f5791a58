/* Shared by the classification tests: they run under LD_PRELOAD and read
 * libmbuddy's verdicts through the public API, found with dlsym. */
#ifndef CLASSIFY_COMMON_H
#define CLASSIFY_COMMON_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NI __attribute__((noinline, noipa)) /* no inlining, no identical-code folding */

static const char *const type_name[] = { "KernNoRclm", "KernRclm", "UserRclm" };
static int (*pointer_type)(const void *);

/* Classification sleeps through a process's first 32,768 allocations or
 * 10 ms (libmbuddy(3), MBUDDY_CLASSIFY): these tests judge what it
 * learns from their very first allocations, so they wait the 10 ms out,
 * and it wakes at the next check (within 2,048 allocations). */
static void need_libmbuddy(void)
{
	pointer_type = (int (*)(const void *))dlsym(RTLD_DEFAULT, "mbuddy_pointer_type");
	if (!pointer_type) {
		fprintf(stderr, "not running under libmbuddy (no mbuddy_pointer_type)\n");
		exit(77);
	}
	struct timespec wait = { 0, 20 * 1000 * 1000 };
	nanosleep(&wait, NULL);
}

/* Keeps a pointer observable so calls are not tail calls or optimised out. */
static void *volatile sink;
static inline void *keep(void *p)
{
	sink = p;
	return p;
}

static int expect_type(const char *what, const void *p, int want)
{
	int got = pointer_type(p);
	printf("%-28s %-10s (want %s)\n", what, got >= 0 ? type_name[got] : "none", type_name[want]);
	return got == want ? 0 : 1;
}

#endif
