/* Where every resident byte of the process is.
 *
 * The process's resident set is split first by mapping: the heap region,
 * the allocator's other mappings (its metadata: page records, slab
 * descriptors, thread heaps, call-site and sample tables), and what is not
 * the allocator's at all (the pages of the program's files, the main
 * stack, other private memory: thread stacks, the program's own mmaps,
 * glibc's brk heap, the pages of its files it wrote). The kernel sums the
 * whole process in /proc/self/smaps_rollup, and the allocator's mappings
 * and the main stack are measured with mincore(2); a process with
 * anonymous huge pages is read mapping by mapping from /proc/self/smaps,
 * five times slower, which alone says whose they are. Then the heap
 * region's resident pages, found with mincore(2), are split by what the
 * page records and the slabs say each byte is: live objects (the bytes
 * asked for, and the rounding up to a size class or to pages), free
 * objects in slabs (by where the slab is or in a thread's cache, by type
 * and by size class), the
 * tails of slabs past their last object, runs cached by threads, and free
 * pages not yet handed back to the kernel. The parts add up to the
 * resident set the kernel reports, but for what changes while the account
 * is taken.
 *
 * The bytes asked for are exact for large objects; for small ones they
 * are estimated per size class and key from the bytes asked for by every
 * allocation so far (theap.h), which the rounding then completes. */
#ifndef MB_ACCOUNT_H
#define MB_ACCOUNT_H

#include <stdint.h>

#include "reclaim_type.h"
#include "region.h"
#include "sizeclass.h"

/* Where a slab with free objects is (slab.h's lists). */
enum mb_account_where {
	MB_ACC_CURRENT,   /* a thread allocates from it */
	MB_ACC_PARTIAL,   /* a thread's, with free objects */
	MB_ACC_FULL,      /* a thread's, freed into by other threads */
	MB_ACC_ABANDONED, /* its thread exited */
	MB_ACC_CACHED,    /* not a slab: objects in threads' caches (theap.h) */
	MB_ACC_NWHERE
};

struct mb_account {
	uint64_t rss;              /* the kernel's resident set */
	/* by mapping */
	uint64_t heap_rss;         /* the heap region */
	uint64_t heap_anon_huge;   /* of which in huge pages (AnonHugePages) */
	uint64_t meta_rss;         /* the allocator's other mappings */
	uint64_t meta_use[MB_USE_COUNT]; /* by what the mapping holds */
	uint64_t file_rss;         /* the program's file-backed mappings */
	uint64_t stack_rss;        /* the main thread's stack */
	uint64_t anon_rss;         /* other anonymous memory */
	/* the heap region's resident pages */
	uint64_t small_requested;  /* small objects: bytes asked for (estimated) */
	uint64_t small_rounding;   /* small objects: up to their size class */
	uint64_t large_requested;  /* large objects: bytes asked for */
	uint64_t large_rounding;   /* large objects: up to whole pages */
	uint64_t slab_free;        /* free objects in slabs */
	uint64_t slab_free_where[MB_ACC_NWHERE];
	uint64_t slab_free_type[MB_NTYPES];
	uint64_t slab_free_class[MB_NCLASSES];
	uint64_t slab_tail;        /* slabs past their last object */
	uint64_t run_cache;        /* freed runs kept by threads */
	uint64_t free_pages;       /* free pages waiting to be handed back */
	uint64_t free_pages_type[MB_NTYPES + 1]; /* by the pageblock's owner; [MB_NTYPES]: the pool */
	uint64_t heap_walked;      /* the sum of the heap region's parts */
	uint64_t mappings_unknown; /* mappings of ours the account could not list */
	uint64_t taken_ms;         /* when it was taken, on mb_now_ms()'s clock */
	uint64_t by_mapping;       /* 1: read from smaps; 0: from smaps_rollup */
};

/* Take the account now. Takes the heap lock for the walk over the region
 * (never with an allocator lock held). 0, or -1 when /proc could not be
 * read (the parts inside the heap are still filled). */
int mb_account_take(struct mb_account *a);
/* The same, read from /proc/self/smaps whatever the process holds with
 * MB_ACCOUNT_BY_MAPPING (tests compare the two ways). */
enum { MB_ACCOUNT_CHEAPEST, MB_ACCOUNT_BY_MAPPING };
int mb_account_take_by(struct mb_account *a, int how);

/* The parts that should add up to the resident set. */
static inline uint64_t mb_account_sum(const struct mb_account *a)
{
	return a->heap_walked + a->meta_rss + a->file_rss + a->stack_rss + a->anon_rss;
}

/* Fork handlers (init.c): the account's locks come first. */
void mb_account_fork_prepare(void);
void mb_account_fork_parent(void);
void mb_account_fork_child(void);

/* The account taken when the resident set last rose a tenth above the one
 * before (only with a report asked for, MBUDDY_STATS): what the peak was
 * made of. 0 if there is one. */
int mb_account_at_peak(struct mb_account *a);
/* On slow paths, at most every few milliseconds: take the peak's account
 * if the resident set rose enough. */
void mb_account_watch_peak(void);

#endif
