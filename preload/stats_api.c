/* The statistics part of the public API (mbuddy.h). */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "fragmentation.h"
#include "heap.h"
#include "init.h"
#include "mbuddy.h"
#include "options.h"
#include "stats.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT int mbuddy_stats_get(struct mbuddy_stats *st)
{
	struct mb_snapshot s;
	if (!st) {
		errno = EINVAL;
		return -1;
	}
	if (mb_process_init() != 0)
		return -1;
	mb_stats_snapshot(&s);
	memset(st, 0, sizeof(*st));
	st->max_order = s.max_order;
	st->pageblock_bytes = s.pb_bytes;
	st->reserved_bytes = s.region_bytes;
	st->resident_bytes = s.rss_bytes;
	st->buddy_allocated_bytes = (unsigned long long)s.pages_allocated << MB_PAGE_SHIFT;
	st->live_bytes = s.counts.alloc_bytes - s.counts.freed_bytes;
	st->released_bytes = s.released_bytes;
	st->global_free_pageblocks = s.global_free;
	st->global_resident_pageblocks = s.global_resident;
	st->global_steals = s.count.global_steals;
	st->global_refills = s.count.global_refills;
	st->frees = s.counts.frees;
	for (int t = 0; t < MB_NTYPES; t++) {
		struct mbuddy_type_stats *ts = &st->types[t];
		for (unsigned o = 0; o < s.pb_order; o++)
			ts->free[o] = s.nr_free[t][o];
		ts->pageblocks = s.pb_owned[t];
		ts->allocs = s.count.allocs[t];
		ts->fallbacks = s.count.fallbacks[t];
		ts->failures = s.count.failures[t];
		ts->objects = s.counts.mallocs[t];
		st->mallocs += s.counts.mallocs[t];
	}
	uint64_t nr[MB_MAX_ORDER_MAX] = { 0 };
	mb_stats_free_blocks(&s, nr);
	for (unsigned o = 0; o < s.max_order; o++) {
		st->unusable_free_space[o] = mb_unusable_free_index(nr, s.max_order, o);
		st->fragmentation_index[o] = mb_fragmentation_index(nr, s.max_order, o);
	}
	return 0;
}

EXPORT int mbuddy_stats_print(int fd, int format)
{
	if (format != MBUDDY_STATS_TEXT && format != MBUDDY_STATS_JSON) {
		errno = EINVAL;
		return -1;
	}
	if (mb_process_init() != 0)
		return -1;
	return mb_stats_write(fd, format == MBUDDY_STATS_JSON ? MB_STATS_JSON : MB_STATS_TEXT);
}

EXPORT int mbuddy_pointer_type(const void *p)
{
	struct mb_buddy *b = &mb_heap.buddy;
	if (mb_process_state != MB_PROCESS_READY || !p || (uintptr_t)p - b->base >= mb_heap.region_bytes)
		return -1;
	mb_heap_lock();
	size_t idx = mb_buddy_page_index(b, p);
	int allocated = mb_buddy_page_allocated(b, idx);
	int type = mb_buddy_pb_type(b, idx >> b->pb_order);
	mb_heap_unlock();
	if (!allocated)
		return -1;
	return type;
}
