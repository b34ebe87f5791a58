/* What the report shows, copied from the heap under its locks, so that
 * the report is written from a private copy and never touches the heap. */
#ifndef MB_STATS_SNAPSHOT_H
#define MB_STATS_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "buddy.h"
#include "heap.h"
#include "account.h"

struct mb_snapshot {
	unsigned max_order, pb_order;
	size_t region_bytes, nblocks, pb_bytes;
	uint64_t nr_free[MB_NTYPES][MB_MAX_ORDER_MAX];
	size_t global_free, global_resident;
	size_t pb_high; /* pageblocks below this index have been used */
	size_t pb_owned[MB_NTYPES];
	struct mb_buddy_counters count;
	struct mb_counts counts;
	size_t pages_allocated;
	uint64_t slab_pages, large_objects, released_bytes, calloc_zero_skips;
	uint64_t inplace_grows, inplace_shrinks;
	size_t meta_bytes;
	uint64_t rss_bytes;
	uint64_t peak_live_bytes;    /* highest live_bytes sampled (mb_stats_sample_peak) */
	uint64_t peak_rss_bytes;     /* the kernel's high-water mark of RSS */
	uint64_t served;             /* 1: malloc reaches libmbuddy (mb_stats_not_served) */
	const char *foreign_symbol;  /* served == 0: the first function that is not ours, */
	const char *foreign_object;  /* and the object that defines it */
	uint64_t hp_mode;            /* MBUDDY_HUGEPAGES in force (enum mb_hugepages) */
	int hp_thp;                  /* the system's THP setting (enum mb_os_thp) */
	uint64_t huge_bytes;         /* units flagged huge (buddy.h), all of them */
	uint64_t huge_bytes_type[MB_NTYPES + 1]; /* by owner type; [MB_NTYPES]: the pool */
	int forked;                  /* counters count since a fork (else since start) */
	int forked_from;             /* the parent's pid at that fork */
	/* Derived from the above, so that every field of the report is one
	 * value here (stats_fields.h). */
	uint64_t mallocs;            /* objects allocated, all types */
	uint64_t failures;           /* buddy requests refused, all types */
	uint64_t buddy_allocated_bytes, slab_bytes, idle_pool_bytes;
	int64_t live_bytes;          /* usable bytes of live objects */
	/* Where the resident set is (mb_stats_take_account), now and at the
	 * peak; zero until taken. */
	struct mb_account account, account_peak;
	int has_account, has_account_peak;
};

/* Free blocks per order over all types, for the fragmentation indices: the
 * global pool counts at the top order, for the pageblocks used so far. */
void mb_stats_free_blocks(const struct mb_snapshot *s, uint64_t nr[MB_MAX_ORDER_MAX]);

/* Take a snapshot (takes and releases the heap lock). Counters (the
 * buddy's bean counters, objects allocated and freed, bytes returned, the
 * calloc and realloc counts) count since the process started or, in a fork
 * child, since the fork: children do not report their parent's work again. */
void mb_stats_snapshot(struct mb_snapshot *s);

/* Add the account of the resident set to s, and the one taken at the
 * peak if there is one: a walk over the heap and /proc/self/smaps, for
 * the report and mbuddy_stats_read(), not for mallinfo. */
void mb_stats_take_account(struct mb_snapshot *s);

/* Sample live bytes for the peak; cheap enough for slow paths, which call
 * it through the lifecycle's deferred work. */
void mb_stats_sample_peak(void);

/* In a fork child, after every lock and thread cache has been set right:
 * counters restart from here, the peak from the live bytes inherited. */
void mb_stats_snapshot_fork_child(void);

/* The process's `symbol` resolves to a definition in `object`, not to
 * libmbuddy's: what it allocates through it is not served here. Strings
 * are copied. Once, at start. */
void mb_stats_not_served(const char *symbol, const char *object);

#endif
