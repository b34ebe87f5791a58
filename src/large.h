/* Page-granular objects: requests above MB_SMALL_MAX, and aligned requests
 * that no size class can meet, take whole pages from the buddy under the
 * heap lock. The first page's record says what the object is: kind
 * MB_KIND_LARGE, user.u64 the bytes asked for, user16 MB_LARGE_* flags. */
#ifndef MB_LARGE_H
#define MB_LARGE_H

#include <stddef.h>

#include "buddy.h"

/* mb_page.user16 of a large object's first page */
#define MB_LARGE_SAMPLED 0x1 /* a classification sample */
#define MB_LARGE_CACHED 0x2  /* freed, kept in a thread's cache of runs (runcache.h) */

/* bytes (> 0) at alignment align (a power of two, 0 for none) for slab key
 * `key` (pages have no lanes: only its type counts); zero asks for zeroed
 * memory. NULL with errno ENOMEM when the heap has no room. */
void *mb_large_alloc(size_t bytes, size_t align, int key, int zero);
/* Free p, whose first page record is m; a page that is not a live large
 * object is reported and aborts. */
void mb_large_free(void *p, struct mb_page *m);
/* For a thread's cache of runs (runcache.h), in one heap-lock section:
 * up to n runs of npages pages of `type`, marked MB_LARGE_CACHED (not yet
 * the program's), into out[]; returns how many. */
unsigned mb_large_alloc_cached(size_t npages, int type, void **out, unsigned n);
/* The same: free n runs the cache held (their counters were settled when
 * they were cached). */
void mb_large_free_cached(void *const *run, unsigned n);
/* Resize p (record m) in place to n bytes (MB_SMALL_MAX < n <= the heap):
 * 0 when done, -1 when the following pages are taken and p has to move.
 * A page that is not a live large object is reported, naming func. */
int mb_large_resize(void *p, struct mb_page *m, size_t n, const char *func);

#endif
