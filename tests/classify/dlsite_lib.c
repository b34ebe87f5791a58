/* Built twice: one copy whose objects die young, one whose objects are kept.
 * Loaded in turn at (often) the same address, the same code offsets then
 * mean different lifetimes. */
#include <stdlib.h>

void *lib_alloc(size_t n);
void *lib_work(int rounds);
void *lib_work_via(void *(*alloc)(size_t), int rounds);

static void *volatile sink;
#ifndef LIFETIME_SHORT
static void *kept[20000];
#endif

__attribute__((noinline)) void *lib_alloc(size_t n)
{
	void *p = malloc(n);
	sink = p;
	return p;
}

/* Runs the library's workload through alloc; returns one live object from
 * its site. */
__attribute__((noinline)) void *lib_work_via(void *(*alloc)(size_t), int rounds)
{
	void *last = NULL;
	for (int i = 0; i < rounds; i++) {
		void *p = alloc(64);
#ifdef LIFETIME_SHORT
		if (last)
			free(last);
		last = p;
#else
		kept[i % 20000] = p;
		last = p;
#endif
	}
	return last;
}

/* The same through the library's own call site. */
void *lib_work(int rounds)
{
	return lib_work_via(lib_alloc, rounds);
}
