/* The statistics part of the public API (mbuddy.h). */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "exports.h"
#include "fragmentation.h"
#include "heap.h"
#include "init.h"
#include "mbuddy.h"
#include "options.h"
#include "stats.h"
#include "stats_fields.h"

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
