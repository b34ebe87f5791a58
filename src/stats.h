/* The report. A snapshot of the heap taken under the lock, then
 * written as text for people (buddyinfo / pagetypeinfo style, the patch's
 * bean counters) or JSON for tools, with plain write(2) calls so that a
 * dump never allocates from the heap it describes. */
#ifndef MB_STATS_H
#define MB_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "buddy.h"
#include "heap.h"
#include "out.h"

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
	/* Derived from the above, so that every field of the report is one
	 * value here (stats_fields.h). */
	uint64_t mallocs;            /* objects allocated, all types */
	uint64_t failures;           /* buddy requests refused, all types */
	uint64_t buddy_allocated_bytes, slab_bytes, idle_pool_bytes;
	int64_t live_bytes;          /* usable bytes of live objects */
};

/* Free blocks per order over all types, for the fragmentation indices: the
 * global pool counts at the top order, for the pageblocks used so far. */
void mb_stats_free_blocks(const struct mb_snapshot *s, uint64_t nr[MB_MAX_ORDER_MAX]);

/* Take a snapshot (takes and releases the heap lock). */
void mb_stats_snapshot(struct mb_snapshot *s);

/* Write a full report; format is enum mb_stats_format. 0 on success.
 * The heap must be set up. */
int mb_stats_write(int fd, int format);

/* Once the heap is set up: keep a copy of stderr for the exit report. */
void mb_stats_init(void);
/* The report MBUDDY_STATS asks for at exit (once). */
void mb_stats_dump_at_exit(void);
/* A report asked for while the program runs (MBUDDY_STATS_SIGNAL): where
 * MBUDDY_STATS says, or on stderr without it. Outside every lock. */
void mb_stats_dump_requested(void);
void mb_stats_fork_child(void);

#endif
