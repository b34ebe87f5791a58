/* What the report shows, copied from the heap under its locks, so that
 * the report is written from a private copy and never touches the heap. */
#ifndef MB_STATS_SNAPSHOT_H
#define MB_STATS_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "buddy.h"
#include "heap.h"

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

#endif
