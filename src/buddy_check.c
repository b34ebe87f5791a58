/* Consistency checker for the typed buddy: verifies every invariant the
 * allocator relies on. O(pages) - for tests and debug builds. */
#include "config.h"
#include "buddy.h"

#include <stdarg.h>
#include <stdio.h>

static int fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (err && len)
		vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -1;
}

static int check_lists(const struct mb_buddy *b, char *err, size_t len)
{
	for (int t = 0; t < MB_NTYPES; t++) {
		for (unsigned o = 0; o < MB_MAX_ORDER_MAX; o++) {
			const struct mb_free_area *a = &b->free_area[t][o];
			if (o >= b->pb_order) {
				if (a->head != MB_NIL || a->nr_free)
					return fail(err, len, "list %s/%u above the pageblock order is not empty",
						    mb_type_names[t], o);
				continue;
			}
			uint64_t n = 0;
			uint32_t prev = MB_NIL;
			for (uint32_t i = a->head; i != MB_NIL; i = b->pages[i].next) {
				const struct mb_page *p = &b->pages[i];
				if (++n > b->npages)
					return fail(err, len, "list %s/%u loops", mb_type_names[t], o);
				if (p->prev != prev)
					return fail(err, len, "page %u: prev link %u, expected %u", i, p->prev, prev);
				if (p->state != MB_PG_FREE || p->order != o)
					return fail(err, len, "page %u on list %s/%u has state %u order %u",
						    i, mb_type_names[t], o, p->state, p->order);
				if (i & ((1u << o) - 1))
					return fail(err, len, "free block %u misaligned for order %u", i, o);
				if (mb_buddy_pb_type(b, i >> b->pb_order) != t)
					return fail(err, len, "free block %u on %s list lies in a %d pageblock",
						    i, mb_type_names[t], mb_buddy_pb_type(b, i >> b->pb_order));
				prev = i;
			}
			if (prev != a->tail)
				return fail(err, len, "list %s/%u tail %u, expected %u", mb_type_names[t], o, a->tail, prev);
			if (n != a->nr_free)
				return fail(err, len, "list %s/%u holds %llu blocks, nr_free says %llu",
					    mb_type_names[t], o, (unsigned long long)n, (unsigned long long)a->nr_free);
		}
	}
	return 0;
}

/* Walk one pageblock that is owned by a type. *run carries the pages of an
 * allocation that continues from the previous pageblock. */
static int check_pageblock(const struct mb_buddy *b, size_t pb, size_t *run,
			   uint64_t nfree[MB_NTYPES][MB_MAX_ORDER_MAX], size_t *inflight, size_t *reserved,
			   char *err, size_t len)
{
	int type = mb_buddy_pb_type(b, pb);
	size_t i = pb << b->pb_order, end = i + b->pb_pages, used = 0;
	*reserved = 0;
	if (!(b->pb_flags[pb] & MB_PBF_RECORDS)) {
		/* No records: one allocation covers it whole, continuing from
		 * an earlier pageblock or starting at its first page. */
		const struct mb_page *p = &b->pages[i];
		if (*run >= b->pb_pages) {
			*run -= b->pb_pages;
		} else if (*run == 0 && p->state == MB_PG_ALLOC && p->npages >= b->pb_pages && p->type < MB_NTYPES) {
			*run = p->npages - b->pb_pages;
		} else {
			return fail(err, len, "pageblock %zu has no page records but no allocation covers it", pb);
		}
		if (!(b->pb_flags[pb] & MB_PBF_DIRTY))
			return fail(err, len, "pageblock %zu is allocated but not marked dirty", pb);
		if (b->pb_used[pb] != b->pb_pages)
			return fail(err, len, "pageblock %zu is covered by an allocation, pb_used says %u", pb, b->pb_used[pb]);
		return 0;
	}
	if (*run) {
		size_t take = *run < b->pb_pages ? *run : b->pb_pages;
		for (size_t j = i; j < i + take; j++)
			if (b->pages[j].state != MB_PG_TAIL)
				return fail(err, len, "page %zu inside a multi-pageblock allocation has state %u",
					    j, b->pages[j].state);
		used += take;
		i += take;
		*run -= take;
	}
	while (i < end) {
		const struct mb_page *p = &b->pages[i];
		if (p->state == MB_PG_FREE || p->state == MB_PG_PURGING) {
			unsigned o = p->order;
			size_t n = (size_t)1 << o;
			if (o >= b->pb_order || (i & (n - 1)) || i + n > end)
				return fail(err, len, "free block %zu of order %u does not fit its pageblock", i, o);
			size_t buddy = i ^ n;
			if (p->state == MB_PG_FREE && b->pages[buddy].state == MB_PG_FREE && b->pages[buddy].order == o)
				return fail(err, len, "free buddies %zu and %zu of order %u are not merged", i, buddy, o);
			for (size_t j = i + 1; j < i + n; j++)
				if (b->pages[j].state != MB_PG_NONE)
					return fail(err, len, "page %zu inside free block %zu has state %u",
						    j, i, b->pages[j].state);
			if (p->state == MB_PG_FREE)
				nfree[type][o]++;
			else
				*inflight += n;
			i += n;
		} else if (p->state == MB_PG_ALLOC) {
			size_t n = p->npages;
			if (n == 0 || p->type >= MB_NTYPES)
				return fail(err, len, "allocation at page %zu has length %zu type %u", i, n, p->type);
			size_t here = n < end - i ? n : end - i;
			for (size_t j = i + 1; j < i + here; j++)
				if (b->pages[j].state != MB_PG_TAIL)
					return fail(err, len, "page %zu inside allocation %zu has state %u",
						    j, i, b->pages[j].state);
			/* An allocated page may be clean: the slab layer hands
			 * idle pages of sparse slabs back to the kernel. */
			if (p->used && (p->used >= n || n > b->pb_pages))
				return fail(err, len, "allocation at page %zu uses %u of its %zu pages", i, p->used, n);
			if ((p->flags & MB_PGF_TAIL_BUSY) && !p->used)
				return fail(err, len, "allocation at page %zu is busy but reserves no page", i);
			if (p->used) {
				*reserved += n - p->used;
				/* Dirty reserved pages: the purge must look. */
				int dirty = 0;
				for (size_t j = i + p->used; j < i + n; j++)
					dirty |= b->pages[j].flags & MB_PGF_DIRTY;
				if (dirty && !(p->flags & MB_PGF_TAIL_BUSY) && !(b->pb_flags[pb] & MB_PBF_TAILS))
					return fail(err, len, "block at page %zu has dirty reserved pages, its pageblock "
						    "is not flagged", i);
			}
			*run = n - here;
			used += here;
			i += here;
		} else {
			return fail(err, len, "page %zu in %s pageblock %zu is neither free nor allocated (state %u)",
				    i, mb_type_names[type], pb, p->state);
		}
	}
	if (used != b->pb_used[pb])
		return fail(err, len, "pageblock %zu has %zu pages in use, pb_used says %u", pb, used, b->pb_used[pb]);
	return 0;
}

/* A purge queue: linked both ways, oldest first, each entry flagged
 * queued; of global pageblocks (global: the resident queue) or of owned
 * ones of type `type` (that type's freed queue). */
static int check_queue(const struct mb_buddy *b, uint32_t head, uint32_t tail, size_t count, int global, int type,
		       const char *name, char *err, size_t len)
{
	size_t n = 0;
	uint32_t prev = MB_NIL;
	for (uint32_t pb = head; pb != MB_NIL; pb = b->pb_next[pb] - 1u) {
		if (++n > b->nblocks)
			return fail(err, len, "%s queue loops", name);
		if ((mb_buddy_pb_type(b, pb) == MB_PB_GLOBAL) != global || (!global && mb_buddy_pb_type(b, pb) != type) ||
		    !(b->pb_flags[pb] & MB_PBF_QUEUED))
			return fail(err, len, "pageblock %u on the %s queue: type %d, flags 0x%x", pb, name,
				    mb_buddy_pb_type(b, pb), b->pb_flags[pb]);
		if (global && !(b->pb_flags[pb] & MB_PBF_DIRTY))
			return fail(err, len, "clean pageblock %u on the %s queue", pb, name);
		if (b->pb_prev[pb] - 1u != prev)
			return fail(err, len, "%s queue: pageblock %u: prev link broken", name, pb);
		if (prev != MB_NIL && b->pb_freed_at[prev] > b->pb_freed_at[pb])
			return fail(err, len, "%s queue out of age order at pageblock %u", name, pb);
		prev = pb;
	}
	if (prev != tail || n != count)
		return fail(err, len, "%s queue holds %zu pageblocks, counter says %zu", name, n, count);
	return 0;
}

int mb_buddy_check(const struct mb_buddy *b, char *err, size_t len)
{
	uint64_t nfree[MB_NTYPES][MB_MAX_ORDER_MAX];
	size_t owned[MB_NTYPES] = { 0 }, nglobal = 0, allocated = 0, run = 0, nrecords = 0;
	size_t inflight_pb = 0, inflight_pages = 0, nqueued = 0;

	if (check_lists(b, err, len))
		return -1;
	for (int t = 0; t < MB_NTYPES; t++)
		for (unsigned o = 0; o < MB_MAX_ORDER_MAX; o++)
			nfree[t][o] = 0;

	for (size_t pb = 0; pb < b->nblocks; pb++) {
		int type = mb_buddy_pb_type(b, pb);
		int in_global = !((b->owned_map[pb / 64] >> (pb % 64)) & 1);
		uint8_t flags = b->pb_flags[pb];
		nrecords += !!(flags & MB_PBF_RECORDS);
		nqueued += !!(flags & MB_PBF_QUEUED);
		if (type == MB_PB_GLOBAL && !in_global) {
			/* Out of the pool while the kernel takes it back. */
			if (!(flags & MB_PBF_INFLIGHT) || (flags & MB_PBF_QUEUED) || b->pb_used[pb])
				return fail(err, len, "global pageblock %zu is out of the pool, flags 0x%x", pb, flags);
			if (run)
				return fail(err, len, "allocation runs into pageblock %zu being released", pb);
			inflight_pb++;
			continue;
		}
		if (flags & MB_PBF_INFLIGHT)
			return fail(err, len, "pageblock %zu is marked in flight but is not", pb);
		if (in_global != (type == MB_PB_GLOBAL))
			return fail(err, len, "pageblock %zu: usemap %d but global bit %d", pb, type, in_global);
		if (pb >= b->pb_high && (!in_global || flags))
			return fail(err, len, "pageblock %zu above the high-water mark %zu is in use", pb, b->pb_high);
		if (in_global) {
			if (!(flags & MB_PBF_QUEUED) != !(flags & MB_PBF_DIRTY))
				return fail(err, len, "global pageblock %zu: flags 0x%x, dirty ones are queued", pb, flags);
			if (run)
				return fail(err, len, "allocation runs into global pageblock %zu", pb);
			if (b->pb_used[pb])
				return fail(err, len, "global pageblock %zu has %u pages in use", pb, b->pb_used[pb]);
			nglobal++;
			continue;
		}
		owned[type]++;
		size_t reserved;
		if (check_pageblock(b, pb, &run, nfree, &inflight_pages, &reserved, err, len))
			return -1;
		allocated += b->pb_used[pb];
		if (b->nunits) {
			/* Blocks' reserved pages are allocated (pb_used) but not
			 * in use (hp_used). */
			size_t per = b->pb_pages >> MB_HP_SHIFT, sum = 0;
			for (size_t u = pb * per; u < (pb + 1) * per; u++)
				sum += b->hp_used[u];
			if (sum + reserved != b->pb_used[pb])
				return fail(err, len,
					    "pageblock %zu: its 2 MiB units count %zu pages in use, pb_used %u, %zu reserved",
					    pb, sum, b->pb_used[pb], reserved);
		}
	}
	size_t unwritten = 0;
	for (size_t u = 0; u < b->nunits; u++)
		unwritten += (b->hp_flags[u] & MB_HPF_UNWRITTEN) != 0;
	if (unwritten != b->hp_nr_unwritten || (unwritten && b->hp_recheck_at == UINT64_MAX &&
						  b->hp_pending == 0))
		return fail(err, len, "%zu units flagged unwritten, hp_nr_unwritten %zu, their look %s", unwritten,
			    b->hp_nr_unwritten, b->hp_recheck_at == UINT64_MAX ? "never due" : "due");
	size_t tails = 0;
	for (size_t pb = 0; pb < b->nblocks; pb++)
		tails += (b->pb_flags[pb] & MB_PBF_TAILS) != 0;
	if (tails != b->nr_tails)
		return fail(err, len, "%zu pageblocks flagged for blocks' reserved pages, nr_tails %zu", tails,
			    b->nr_tails);
	if (run)
		return fail(err, len, "an allocation runs past the end of the region");

	for (int t = 0; t < MB_NTYPES; t++) {
		for (unsigned o = 0; o < b->pb_order; o++)
			if (nfree[t][o] != b->free_area[t][o].nr_free)
				return fail(err, len, "%s order %u: %llu free blocks in the pages, %llu on the list",
					    mb_type_names[t], o, (unsigned long long)nfree[t][o],
					    (unsigned long long)b->free_area[t][o].nr_free);
		if (owned[t] != b->pb_owned[t])
			return fail(err, len, "%s owns %zu pageblocks, counter says %zu", mb_type_names[t], owned[t], b->pb_owned[t]);
	}
	if (nrecords != b->nr_records)
		return fail(err, len, "%zu pageblocks have page records, counter says %zu", nrecords, b->nr_records);
	if (nglobal != b->nr_global)
		return fail(err, len, "%zu pageblocks in the global pool, counter says %zu", nglobal, b->nr_global);
	if (allocated != b->pages_allocated)
		return fail(err, len, "%zu pages allocated, counter says %zu", allocated, b->pages_allocated);
	if (inflight_pb != b->nr_inflight || inflight_pages != b->pages_inflight)
		return fail(err, len, "%zu pageblocks and %zu pages in flight, counters say %zu and %zu", inflight_pb,
			    inflight_pages, b->nr_inflight, b->pages_inflight);
	if (b->count.global_steals - b->count.global_refills != b->nblocks - b->nr_global - b->nr_inflight)
		return fail(err, len, "steals %llu - refills %llu != pageblocks out of the pool %zu",
			    (unsigned long long)b->count.global_steals, (unsigned long long)b->count.global_refills,
			    b->nblocks - b->nr_global);

	if (check_queue(b, b->dirty_head, b->dirty_tail, b->nr_dirty, 1, -1, "resident", err, len))
		return -1;
	uint64_t oldest = b->dirty_head != MB_NIL ? b->pb_freed_at[b->dirty_head] : UINT64_MAX;
	for (int t = 0; t < MB_NTYPES; t++) {
		if (check_queue(b, b->freed_head[t], b->freed_tail[t], b->nr_freed_of[t], 0, t, mb_type_names[t], err, len))
			return -1;
		if (b->freed_head[t] != MB_NIL && b->pb_freed_at[b->freed_head[t]] < oldest)
			oldest = b->pb_freed_at[b->freed_head[t]];
	}
	size_t nfreed = mb_buddy_nr_freed(b);
	if (nqueued != b->nr_dirty + nfreed)
		return fail(err, len, "%zu pageblocks flagged queued, the queues hold %zu", nqueued, b->nr_dirty + nfreed);
	if (b->tails_oldest < oldest)
		oldest = b->tails_oldest; /* blocks' dirty reserved pages */
	if (b->oldest != oldest)
		return fail(err, len, "oldest queued stamp %llu, the queue heads say %llu", (unsigned long long)b->oldest,
			    (unsigned long long)oldest);
	return 0;
}
