/* Objects loaded with dlopen(RTLD_DEEPBIND) (deepbind.c). Their own
 * dependencies come first in their lookups, so libc's malloc family wins
 * over libmbuddy's for them: dlopen rebinds their references to ours, and
 * what glibc's malloc handed out before that (in their constructors) goes
 * back to glibc's own functions. */
#ifndef MB_DEEPBIND_H
#define MB_DEEPBIND_H

#include <stddef.h>
#include <stdint.h>

#include "heap.h"

/* Nonzero once a deep-bound dlopen has started: pointers outside the
 * heap region may then come from glibc's malloc. */
extern int mb_deepbind_active;

/* glibc's own functions, found in libc.so.6 before mb_deepbind_active is
 * set (and so read after it with acquire order). */
struct mb_glibc_malloc {
	void (*free)(void *);
	void *(*realloc)(void *, size_t);
	size_t (*usable_size)(void *);
};
extern struct mb_glibc_malloc mb_glibc;

/* Whether p is glibc's to free: not NULL, outside the heap region, and a
 * deep-bound object may have allocated it. Before any deep-bound load,
 * such a pointer is not one the process can have, and the general paths
 * report it as invalid. */
static inline int mb_glibc_pointer(const void *p)
{
	return __builtin_expect(__atomic_load_n(&mb_deepbind_active, __ATOMIC_ACQUIRE) != 0, 0) && p != NULL &&
	       (uintptr_t)p - mb_heap.buddy.base >= mb_heap.region_bytes;
}

#endif
