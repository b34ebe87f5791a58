/* Layer 4: per-thread caches of free small objects per (slab key, size class).
 * Entries are kept in arrays, never threaded through the objects, so user
 * memory never holds allocator pointers. */
#ifndef MB_TCACHE_H
#define MB_TCACHE_H

#include "heap.h"
#include "slab.h"
#include "thread.h"

struct mb_tbin {
	uint32_t n, cap;
	struct mb_tentry *e;
};

struct mb_tcache {
	struct mb_tbin bin[MB_NKEYS][MB_NCLASSES]; /* cap 0 until the key's row exists */
	struct mb_counts counts;
	uint64_t next_tick;     /* counts.alloc_bytes at which mb_tcache_tick runs */
	uint64_t clock_sent;    /* counts.alloc_bytes already added to mb_alloc_clock */
	uint64_t flushed_ms;    /* when every bin was last emptied */
	struct mb_tcache *next, *prev; /* all live caches, for statistics */
	/* Entry storage of every class of one key, made on the key's first
	 * use: most threads touch one or two lanes of one or two types. */
	struct mb_tentry *row[MB_NKEYS];
};

/* This thread's cache is mb_tc, and mb_tc_busy is set while it is being
 * created or torn down (thread.h); init.c decides when that happens. */

/* A new, empty cache, counted among the live ones; NULL without memory. */
struct mb_tcache *mb_tcache_create(void);
/* Give every entry of tc back, add its counters to the heap's, free it. */
void mb_tcache_destroy(struct mb_tcache *tc);
/* Refill a bin from the central slabs; returns entries now in the bin. */
uint32_t mb_tcache_refill(struct mb_tcache *tc, int key, unsigned sclass);
/* Give key's bins their storage; 0 on success (or if they have it). */
int mb_tcache_row(struct mb_tcache *tc, int key);
/* Return the older half of a full bin to the slabs. */
void mb_tcache_flush(struct mb_tcache *tc, struct mb_tbin *bin, uint32_t keep);
/* Flush every bin of this thread (before fork, at trim, at exit). */
size_t mb_tcache_flush_all(struct mb_tcache *tc); /* returns entries flushed */
/* Every 64 KiB a thread allocates: advance the allocation clock and let
 * time-based work (cache flush, purge) happen even in a program whose
 * allocations never leave the fast path. */
void mb_tcache_tick(struct mb_tcache *tc);
/* On slow paths: empty every bin once per decay period, so objects cached
 * by a thread cannot keep idle slabs (and their pageblocks) alive. */
void mb_tcache_maybe_flush_all(struct mb_tcache *tc);
/* Sum the counters of every live cache into *out (lock held). */
void mb_tcache_sum_counts_locked(struct mb_counts *out);

/* In a fork child: only the forking thread's cache lives on. */
void mb_tcache_fork_child(void);

#endif
