/* A thread's cache of page runs just above the small-object
 * limit. Objects of MB_SMALL_MAX < n <= MB_RUN_MAX bytes are page runs of
 * the buddy (large.h), whose every allocation and free would take the heap
 * lock; programs whose sizes spread over a wide range use them often. A
 * freed run of 5 to 8 pages stays in the freeing thread's cache, per type
 * and length, for the next allocation of that length, as jemalloc's
 * thread cache keeps its large classes up to 32 KiB; and like the bins of
 * small objects, an empty bin takes half a bin of runs from the buddy and a
 * full one gives half back, each in one heap-lock section. A bin that
 * allocations and frees reach at random does a random walk between empty
 * and full, which takes about (cap / 2)^2 calls: sixteen runs rather than
 * eight take the heap lock four times less often (glibc-thread-like sizes
 * of 8 B - 32 KiB: 6.4 -> 1.7 acquisitions per 1,000 mallocs). */
#ifndef MB_RUNCACHE_H
#define MB_RUNCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "buddy.h"
#include "sizeclass.h"

#define MB_RUN_MAX ((size_t)32 << 10)
#define MB_RUN_MIN_PAGES (MB_SMALL_MAX / MB_PAGE_SIZE + 1)
#define MB_RUN_LENGTHS (MB_RUN_MAX / MB_PAGE_SIZE - MB_RUN_MIN_PAGES + 1)
#define MB_RUN_CAP 16                   /* runs per (type, length) */
#define MB_RUN_BUDGET ((size_t)2 << 20) /* bytes of runs per thread */

struct mb_runbin {
	uint32_t n;
	void *run[MB_RUN_CAP]; /* oldest first */
};

struct mb_runcache {
	struct mb_runbin bin[MB_NTYPES][MB_RUN_LENGTHS];
	size_t bytes;
};

struct mb_counts;

/* A cached run for n bytes (MB_SMALL_MAX < n <= MB_RUN_MAX) of key's
 * type, taken from rc and counted as allocated in counts (the owning
 * thread heap's); NULL if none. */
void *mb_runcache_get(struct mb_runcache *rc, struct mb_counts *counts, size_t n, int key);
/* Keep the live run p (first page record m) in rc instead of freeing it:
 * 1 if kept (counted as freed in counts), 2 if kept and older runs went
 * back to the buddy to make room, 0 if it does not fit (free it the usual
 * way). A run already freed is reported as a double free and aborts. */
int mb_runcache_put(struct mb_runcache *rc, struct mb_counts *counts, void *p, struct mb_page *m);
/* Free every run rc holds; returns how many. */
size_t mb_runcache_flush(struct mb_runcache *rc);

#endif
