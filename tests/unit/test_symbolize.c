/* Names for code addresses (symbolize.c): for every address, the same
 * object, symbol and offset as dladdr(3) gives, in one call for many
 * addresses of several objects: functions of libc, of libm, of this
 * program (exported and static), addresses inside them and past their
 * ends, and addresses in no object at all. */
#include "config.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "symbolize.h"
#include "harness.h"

int test_exported_function(int x);
__attribute__((noinline, used, visibility("default"))) int test_exported_function(int x)
{
	return x * 3 + 1;
}

__attribute__((noinline)) static int local_function(int x)
{
	return x * 5 + 2;
}

/* dladdr's answer for pc, in mb_symbol's terms. */
static struct mb_symbol by_dladdr(void *pc)
{
	struct mb_symbol s = { 0 };
	Dl_info info;
	if (dladdr(pc, &info) && info.dli_fname) {
		s.object = info.dli_fname;
		s.name = info.dli_sname;
		s.offset = (uintptr_t)pc - (uintptr_t)(info.dli_sname ? info.dli_saddr : info.dli_fbase);
	}
	return s;
}

static void same(void *pc, const struct mb_symbol *got)
{
	struct mb_symbol want = by_dladdr(pc);
	if ((want.object == NULL) != (got->object == NULL) ||
	    (want.object && strcmp(want.object, got->object) != 0) || (want.name == NULL) != (got->name == NULL) ||
	    (want.name && strcmp(want.name, got->name) != 0) || (want.object && want.offset != got->offset))
		FAIL("%p: dladdr says %s %s+0x%lx, mb_symbolize %s %s+0x%lx", pc, want.object ? want.object : "-",
		     want.name ? want.name : "-", (unsigned long)want.offset, got->object ? got->object : "-",
		     got->name ? got->name : "-", (unsigned long)got->offset);
}

TEST(as_dladdr_for_many_objects_at_once)
{
	void *fns[] = {
		(void *)malloc, (void *)strlen, (void *)printf, (void *)qsort, (void *)dladdr, (void *)mmap,
		(void *)cos, (void *)sqrt, (void *)test_exported_function, (void *)local_function, (void *)main,
		(void *)mb_symbolize,
	};
	enum { NF = sizeof fns / sizeof fns[0], OFFS = 5 };
	static const uintptr_t offsets[OFFS] = { 0, 1, 7, 64, 300 };
	void *pc[NF * OFFS + 3];
	size_t n = 0;
	for (size_t i = 0; i < NF; i++)
		for (size_t k = 0; k < OFFS; k++)
			pc[n++] = (char *)fns[i] + offsets[k];
	/* In no object: the heap, an anonymous mapping, an address near 0. */
	void *heap = malloc(64), *anon = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(anon != MAP_FAILED);
	pc[n++] = heap;
	pc[n++] = anon;
	pc[n++] = (void *)(uintptr_t)0x1000;
	struct mb_symbol got[sizeof pc / sizeof pc[0]];
	mb_symbolize(pc, n, got);
	size_t named = 0;
	for (size_t i = 0; i < n; i++) {
		same(pc[i], &got[i]);
		named += got[i].name != NULL;
	}
	/* Not a vacuous comparison: most addresses have a symbol. */
	ASSERT_GE(named, NF * 2);
	ASSERT(got[n - 1].object == NULL && got[n - 2].object == NULL && got[n - 3].object == NULL);
	free(heap);
	munmap(anon, 4096);
	ASSERT_EQ(test_exported_function(1) + local_function(1), 11);
}

TEST(nothing_to_name)
{
	struct mb_symbol none;
	mb_symbolize(NULL, 0, &none);
}
