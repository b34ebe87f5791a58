#include "config.h"
#include "stats_snapshot.h"
#include "metadata.h"
#include "out.h"
#include "tcache.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static uint64_t read_rss(void)
{
	char buf[128];
	if (mb_read_small("/proc/self/statm", buf, sizeof buf) <= 0)
		return 0;
	unsigned long size, resident;
	if (sscanf(buf, "%lu %lu", &size, &resident) != 2)
		return 0;
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

void mb_stats_snapshot(struct mb_snapshot *s)
{
	struct mb_buddy *b = &mb_heap.buddy;
	memset(s, 0, sizeof(*s));
	s->rss_bytes = read_rss();
	mb_heap_lock();
	s->max_order = b->max_order;
	s->pb_order = b->pb_order;
	s->region_bytes = mb_heap.region_bytes;
	s->nblocks = b->nblocks;
	s->pb_bytes = b->pb_pages << MB_PAGE_SHIFT;
	for (int t = 0; t < MB_NTYPES; t++) {
		for (unsigned o = 0; o < b->pb_order; o++)
			s->nr_free[t][o] = b->free_area[t][o].nr_free;
		s->pb_owned[t] = b->pb_owned[t];
	}
	s->global_free = b->nr_global;
	s->pb_high = b->pb_high;
	s->global_resident = b->nr_dirty;
	s->count = b->count;
	mb_tcache_sum_counts(&s->counts);
	/* Allocations are counted per slab key; the report shows types. */
	for (int k = MB_NTYPES; k < MB_NKEYS; k++) {
		s->counts.mallocs[mb_key_type(k)] += s->counts.mallocs[k];
		s->counts.mallocs[k] = 0;
	}
	s->pages_allocated = b->pages_allocated;
	s->slab_pages = mb_heap.slab_pages;
	s->large_objects = mb_heap.large_objects;
	s->released_bytes = mb_heap.released_bytes;
	s->calloc_zero_skips = mb_heap.calloc_zero_skips;
	s->inplace_grows = mb_heap.inplace_grows;
	s->inplace_shrinks = mb_heap.inplace_shrinks;
	/* The page array is reserved for the whole region; records are
	 * written only for pageblocks split into blocks (a run of whole
	 * pageblocks has one, at its head). */
	s->meta_bytes = mb_meta_resident() + b->nr_records * b->pb_pages * sizeof(struct mb_page);
	mb_heap_unlock();
	for (int t = 0; t < MB_NTYPES; t++) {
		s->mallocs += s->counts.mallocs[t];
		s->failures += s->count.failures[t];
	}
	s->buddy_allocated_bytes = (uint64_t)s->pages_allocated << MB_PAGE_SHIFT;
	s->slab_bytes = s->slab_pages << MB_PAGE_SHIFT;
	s->idle_pool_bytes = (uint64_t)s->global_resident * s->pb_bytes;
	s->live_bytes = (int64_t)(s->counts.alloc_bytes - s->counts.freed_bytes);
}

/* Free blocks of every type per order, and at the top order the global
 * pageblocks of the part of the heap in use so far: counting the whole
 * reservation would make every index read "no fragmentation". */
void mb_stats_free_blocks(const struct mb_snapshot *s, uint64_t nr[MB_MAX_ORDER_MAX])
{
	for (unsigned o = 0; o < s->max_order; o++) {
		nr[o] = 0;
		for (int t = 0; t < MB_NTYPES; t++)
			nr[o] += s->nr_free[t][o];
	}
	nr[s->pb_order] += s->global_free - (s->nblocks - s->pb_high);
}
