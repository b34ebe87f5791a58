/* The statistics part of the public API (mbuddy.h). */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "exports.h"
#include "fragmentation.h"
#include "heap.h"
#include "init.h"
#include "mbuddy.h"
#include "options.h"
#include "account.h"
#include "stats.h"
#include "stats_fields.h"

static void account_fill(struct mbuddy_account *to, const struct mb_account *a)
{
	to->resident = a->rss;
	to->small_requested = a->small_requested;
	to->small_rounding = a->small_rounding;
	to->large_requested = a->large_requested;
	to->large_rounding = a->large_rounding;
	to->slab_free = a->slab_free;
	to->slab_free_current = a->slab_free_where[MB_ACC_CURRENT];
	to->slab_free_partial = a->slab_free_where[MB_ACC_PARTIAL];
	to->slab_free_full = a->slab_free_where[MB_ACC_FULL];
	to->slab_free_abandoned = a->slab_free_where[MB_ACC_ABANDONED];
	to->slab_tail = a->slab_tail;
	to->run_cache = a->run_cache;
	to->free_pages = a->free_pages;
	to->metadata = a->meta_rss;
	to->file_backed = a->file_rss;
	to->main_stack = a->stack_rss;
	to->other_anonymous = a->anon_rss;
}

/* The whole snapshot in this library's layout. */
static int stats_fill(struct mbuddy_stats *st)
{
	struct mb_snapshot s;
	if (mb_process_init() != 0)
		return -1;
	mb_stats_snapshot(&s);
	mb_stats_take_account(&s);
	memset(st, 0, sizeof(*st));
	account_fill(&st->account, &s.account);
	st->account_slab_free_cached = s.account.slab_free_where[MB_ACC_CACHED];
	if (s.has_account_peak) {
		account_fill(&st->account_at_peak, &s.account_peak);
		st->account_at_peak_slab_free_cached = s.account_peak.slab_free_where[MB_ACC_CACHED];
	}
	st->max_order = s.max_order;
	st->pageblock_bytes = s.pb_bytes;
	st->served = (int)s.served;
	/* Every other field comes from the report's tables (stats_fields.h). */
	for (size_t i = 0; i < mb_stats_nfields; i++) {
		const struct mb_stats_field *f = &mb_stats_fields[i];
		if (f->api)
			*(unsigned long long *)((char *)st + f->api - 1) = mb_stats_field_value(f, &s);
	}
	for (int t = 0; t < MB_NTYPES; t++) {
		struct mbuddy_type_stats *ts = &st->types[t];
		for (unsigned o = 0; o < s.pb_order; o++)
			ts->free[o] = s.nr_free[t][o];
		for (size_t i = 0; i < mb_stats_ntype_fields; i++) {
			const struct mb_stats_type_field *f = &mb_stats_type_fields[i];
			*(unsigned long long *)((char *)ts + f->api) = mb_stats_type_value(f, &s, t);
		}
	}
	uint64_t nr[MB_MAX_ORDER_MAX] = { 0 };
	mb_stats_free_blocks(&s, nr);
	for (size_t i = 0; i < mb_stats_nindices; i++) {
		double *index = (double *)((char *)st + mb_stats_indices[i].api);
		for (unsigned o = 0; o < s.max_order; o++)
			index[o] = mb_stats_indices[i].value(nr, s.max_order, o);
	}
	return 0;
}

/* Where each field of struct mbuddy_stats ends, in order: a caller's
 * size is cut down to whole fields. A field added to the structure must
 * be added here (the assertion below checks the last one). */
#define END(f) (offsetof(struct mbuddy_stats, f) + sizeof(((struct mbuddy_stats *)0)->f))
static const size_t field_end[] = {
	END(max_order), END(pageblock_bytes), END(reserved_bytes), END(resident_bytes),
	END(buddy_allocated_bytes), END(live_bytes), END(released_bytes),
	END(global_free_pageblocks), END(global_resident_pageblocks), END(global_steals),
	END(global_refills), END(mallocs), END(frees), END(types), END(unusable_free_space),
	END(fragmentation_index), END(peak_resident_bytes), END(peak_live_bytes), END(served), END(account),
	END(account_at_peak), END(huge), END(account_slab_free_cached), END(account_at_peak_slab_free_cached),
	END(huge_collapses_unwritten),
};
_Static_assert(sizeof(struct mbuddy_stats) - END(huge_collapses_unwritten) < _Alignof(struct mbuddy_stats),
	       "the last field of struct mbuddy_stats is not the last of field_end[]");

/* The structure of the first release, which programs built with it pass
 * to mbuddy_stats_get: everything before peak_resident_bytes. */
#define STATS_V0_SIZE offsetof(struct mbuddy_stats, peak_resident_bytes)

/* The bytes of the whole fields that fit in size. */
static size_t whole_fields(size_t size)
{
	if (size >= sizeof(struct mbuddy_stats))
		return sizeof(struct mbuddy_stats);
	size_t n = 0;
	for (size_t i = 0; i < sizeof field_end / sizeof field_end[0] && field_end[i] <= size; i++)
		n = field_end[i];
	return n;
}

static int stats_read(struct mbuddy_stats *st, size_t size)
{
	struct mbuddy_stats all;
	if (!st) {
		errno = EINVAL;
		return -1;
	}
	if (stats_fill(&all) != 0)
		return -1;
	size_t n = whole_fields(size);
	memcpy(st, &all, n);
	/* A program built with a newer header: the fields this library does
	 * not have read as zero, and the result tells where they start. */
	if (size > sizeof all)
		memset((char *)st + n, 0, size - n);
	return (int)n;
}

EXPORT int mbuddy_stats_read(struct mbuddy_stats *st, size_t size)
{
	return stats_read(st, size);
}

/* The symbol that programs built before mbuddy_stats_read call, with the
 * structure of that time; mbuddy.h maps a new program's calls of this
 * name onto mbuddy_stats_read with its own size. */
EXPORT int(mbuddy_stats_get)(struct mbuddy_stats *st)
{
	return stats_read(st, STATS_V0_SIZE) < 0 ? -1 : 0;
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
	size_t pb = idx >> b->pb_order;
	int allocated = mb_buddy_page_allocated(b, idx);
	/* The type the allocation asked for: a reclaimable slab may sit in a
	 * free block of another type's pageblock (mbuddy(7), Fallback order). */
	const struct mb_page *m = &b->pages[idx];
	int records = (b->pb_flags[pb] & MB_PBF_RECORDS) != 0;
	int type = mb_buddy_pb_type(b, pb);
	if (records && m->kind == MB_KIND_SLAB)
		type = mb_key_type((int)m->user32);
	else if (m->state == MB_PG_ALLOC)
		type = m->type;
	mb_heap_unlock();
	if (!allocated)
		return -1;
	return type;
}
