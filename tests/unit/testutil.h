/* Minimal test support: fatal checks and a buddy over a private region. */
#ifndef MB_TESTUTIL_H
#define MB_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "buddy.h"
#include "region.h"

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, \
				__LINE__, #cond);                            \
			exit(1);                                             \
		}                                                            \
	} while (0)

static inline void check_buddy_at(const struct mb_buddy *b, const char *file, int line)
{
	char err[512];
	if (mb_buddy_check(b, err, sizeof err)) {
		fprintf(stderr, "%s:%d: buddy check failed: %s\n", file, line, err);
		exit(1);
	}
}
#define CHECK_BUDDY(b) check_buddy_at((b), __FILE__, __LINE__)

/* A buddy of `npb` pageblocks of order max_order-1 over its own mapping. */
static inline void test_buddy_new(struct mb_buddy *b, size_t npb, unsigned max_order)
{
	size_t pb_bytes = ((size_t)1 << (max_order - 1)) << MB_PAGE_SHIFT;
	void *base = mb_os_reserve(npb * pb_bytes, pb_bytes);
	CHECK(base != NULL);
	CHECK(mb_buddy_init(b, base, npb * pb_bytes, max_order) == 0);
	CHECK_BUDDY(b);
}

static inline void test_buddy_free_region(struct mb_buddy *b)
{
	void *base = (void *)b->base;
	size_t size = b->npages << MB_PAGE_SHIFT;
	mb_buddy_destroy(b);
	mb_os_unreserve(base, size);
}

#define RUN(test)                                                            \
	do {                                                                 \
		fprintf(stderr, "  %s\n", #test);                            \
		test();                                                      \
	} while (0)

#endif
