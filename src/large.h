/* Page-granular objects: requests above MB_SMALL_MAX, and aligned requests
 * that no size class can meet, take whole pages from the buddy under the
 * heap lock. The first page's record says what the object is: kind
 * MB_KIND_LARGE, user.u64 the bytes asked for, user16 MB_LARGE_* flags.
 *
 * An object of more pages than a run (runcache.h) and up to 512 KiB, not
 * a power of two, takes a whole block of the next power of two
 * (mb_buddy_alloc_block) while the heap has room for it (large.c): the
 * pages past its own stay reserved for it, so that its free gives the
 * block back whole, and those an earlier user wrote go back to the kernel
 * with the purge once the object has lived a decay time. Its usable size
 * is its own pages; a realloc within the block resizes it in place. */
#ifndef MB_LARGE_H
#define MB_LARGE_H

#include <stddef.h>

#include "buddy.h"

/* The objects that take a block: more pages than the longest run of a
 * thread's cache (runcache.h), whose runs are cut to their length, and a
 * block of 512 KiB at most: the tail of a larger object leaves pieces of
 * 256 KiB and more, which other requests take as they are, while a block
 * would hold its pageblock's space from the other allocations of its type. */
#define MB_LARGE_BLOCK_MIN_PAGES 9
#define MB_LARGE_BLOCK_MAX_PAGES 128

/* mb_page.user16 of a large object's first page */
#define MB_LARGE_SAMPLED 0x1 /* a classification sample */
#define MB_LARGE_CACHED 0x2  /* freed, kept in a thread's cache of runs (runcache.h) */

/* bytes (> 0) at alignment align (a power of two, 0 for none) for slab key
 * `key` (pages have no lanes: only its type counts); zero asks for zeroed
 * memory. NULL with errno ENOMEM when the heap has no room. */
void *mb_large_alloc(size_t bytes, size_t align, int key, int zero);
/* The pages large object m (its first page's record) uses: its usable size. */
static inline size_t mb_large_pages(const struct mb_page *m)
{
	return mb_buddy_pages_used(m);
}
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
