/* The typed buddy allocator (see buddy.h). Names follow mm/page_alloc.c:
 * rmqueue, expand, the global pool, usemap, fallback order. */
#include "config.h"
#include "buddy.h"
#include "region.h"
#include "report.h"

#include <errno.h>
#include <string.h>

const int mb_fallback_order[MB_NTYPES][MB_NTYPES] = {
	{ MB_KERNNORCLM, MB_KERNRCLM, MB_USERRCLM },
	{ MB_KERNRCLM, MB_KERNNORCLM, MB_USERRCLM },
	{ MB_USERRCLM, MB_KERNNORCLM, MB_KERNRCLM },
};

/* ---- usemap and global-pool bitmaps ---- */

static void set_pb_type(struct mb_buddy *b, size_t pb, int type)
{
	uint64_t *w = &b->usemap[pb / 32];
	unsigned shift = (pb % 32) * 2;
	uint64_t stored = (uint64_t)((type + 1) & 3); /* MB_PB_GLOBAL is stored as 0 */
	*w = (*w & ~((uint64_t)3 << shift)) | (stored << shift);
}

static int global_test(const struct mb_buddy *b, size_t pb)
{
	return !((b->owned_map[pb / 64] >> (pb % 64)) & 1);
}

static void owned_set(struct mb_buddy *b, size_t pb)
{
	b->owned_map[pb / 64] |= (uint64_t)1 << (pb % 64);
}

static void owned_clear(struct mb_buddy *b, size_t pb)
{
	b->owned_map[pb / 64] &= ~((uint64_t)1 << (pb % 64));
}

/* The first index in [from, to) whose bit in map is `want`, else to. */
static size_t find_bit(const uint64_t *map, size_t from, size_t to, int want)
{
	for (size_t i = from; i < to;) {
		uint64_t w = map[i / 64];
		if (!want)
			w = ~w;
		w &= ~(uint64_t)0 << (i % 64);
		if (w) {
			size_t j = (i & ~(size_t)63) + (size_t)__builtin_ctzll(w);
			return j < to ? j : to;
		}
		i = (i & ~(size_t)63) + 64;
	}
	return to;
}

/* ---- free lists of page indices ---- */

static void list_add(struct mb_buddy *b, struct mb_free_area *a, uint32_t idx, int at_tail)
{
	struct mb_page *p = &b->pages[idx];
	if (a->head == MB_NIL) {
		p->next = p->prev = MB_NIL;
		a->head = a->tail = idx;
	} else if (at_tail) {
		p->next = MB_NIL;
		p->prev = a->tail;
		b->pages[a->tail].next = idx;
		a->tail = idx;
	} else {
		p->prev = MB_NIL;
		p->next = a->head;
		b->pages[a->head].prev = idx;
		a->head = idx;
	}
	a->nr_free++;
}

static void list_del(struct mb_buddy *b, struct mb_free_area *a, uint32_t idx)
{
	struct mb_page *p = &b->pages[idx];
	if (p->prev != MB_NIL)
		b->pages[p->prev].next = p->next;
	else
		a->head = p->next;
	if (p->next != MB_NIL)
		b->pages[p->next].prev = p->prev;
	else
		a->tail = p->prev;
	p->next = p->prev = MB_NIL;
	a->nr_free--;
}

/* Put a free block on its owner type's list (no merging). */
static void add_free_block(struct mb_buddy *b, size_t idx, unsigned order, int type, int at_tail)
{
	struct mb_page *p = &b->pages[idx];
	p->state = MB_PG_FREE;
	p->order = (uint8_t)order;
	list_add(b, &b->free_area[type][order], (uint32_t)idx, at_tail);
}

/* ---- page records of a pageblock ---- */

/* Zero a pageblock's page records: hand their pages back when they fill
 * whole pages, else clear them. Its slab magic numbers go back with them
 * when they fill whole pages; nothing reads them before a slab is carved
 * there again and rewrites them, so they need no clearing. */
static void records_clear(struct mb_buddy *b, size_t pb)
{
	if (!(b->pb_flags[pb] & MB_PBF_RECORDS))
		return;
	struct mb_page *r = &b->pages[pb << b->pb_order];
	size_t bytes = b->pb_pages * sizeof(struct mb_page);
	if (bytes % MB_PAGE_SIZE != 0 || !b->release || b->release(r, bytes) != 0)
		memset(r, 0, bytes);
	size_t magic_bytes = b->pb_pages * sizeof(uint32_t);
	if (magic_bytes % MB_PAGE_SIZE == 0 && b->release)
		(void)b->release(&b->slab_magic[pb << b->pb_order], magic_bytes);
	b->pb_flags[pb] &= (uint8_t)~MB_PBF_RECORDS;
	b->nr_records--;
}

/* The pageblock's records are about to describe its pages one by one.
 * Records that were all zero say "clean" for every page: right for a
 * clean pageblock, and corrected for a dirty one. */
static void records_on(struct mb_buddy *b, size_t pb)
{
	uint8_t *f = &b->pb_flags[pb];
	if (*f & MB_PBF_RECORDS)
		return;
	*f |= MB_PBF_RECORDS;
	b->nr_records++;
	if (*f & MB_PBF_DIRTY) {
		size_t first = pb << b->pb_order;
		for (size_t i = first; i < first + b->pb_pages; i++)
			b->pages[i].flags = MB_PGF_DIRTY;
	}
}

/* ---- the global pool ---- */

static void hp_forget(struct mb_buddy *b, size_t pb);

/* ---- the purge queues ---- */

/* Queue links are stored as index + 1: zero (untouched) means none. */
static uint32_t q_next(const struct mb_buddy *b, uint32_t pb) { return b->pb_next[pb] - 1u; }
static uint32_t q_prev(const struct mb_buddy *b, uint32_t pb) { return b->pb_prev[pb] - 1u; }
static void q_set_next(struct mb_buddy *b, uint32_t pb, uint32_t to) { b->pb_next[pb] = to + 1u; }
static void q_set_prev(struct mb_buddy *b, uint32_t pb, uint32_t to) { b->pb_prev[pb] = to + 1u; }

struct queue {
	uint32_t *head, *tail;
	size_t *n;
	uint64_t head_start; /* stamps this much before the clock */
};

static struct queue dirty_q(struct mb_buddy *b) { return (struct queue){ &b->dirty_head, &b->dirty_tail, &b->nr_dirty, 0 }; }
/* The freed queue of owned pageblock pb's type. */
static struct queue freed_q(struct mb_buddy *b, size_t pb)
{
	int t = mb_buddy_pb_type(b, pb);
	return (struct queue){ &b->freed_head[t], &b->freed_tail[t], &b->nr_freed_of[t], b->head_start_ms[t] };
}

static uint64_t queue_head_stamp(const struct mb_buddy *b, uint32_t head)
{
	return head != MB_NIL ? b->pb_freed_at[head] : UINT64_MAX;
}

/* The oldest head of the freed queues, or MB_NIL. */
static uint32_t freed_oldest(const struct mb_buddy *b)
{
	uint32_t f = MB_NIL;
	for (int t = 0; t < MB_NTYPES; t++)
		if (queue_head_stamp(b, b->freed_head[t]) < queue_head_stamp(b, f))
			f = b->freed_head[t];
	return f;
}

static void oldest_update(struct mb_buddy *b)
{
	uint64_t d = queue_head_stamp(b, b->dirty_head), f = queue_head_stamp(b, freed_oldest(b));
	uint64_t o = d < f ? d : f;
	if (b->tails_oldest < o)
		o = b->tails_oldest;
	/* Sequentially consistent: a background purger that is about to
	 * sleep either sees it or is seen sleeping (purge.c). */
	__atomic_store_n(&b->oldest, o, __ATOMIC_SEQ_CST);
}

static void q_append(struct mb_buddy *b, struct queue q, size_t pb)
{
	b->pb_flags[pb] |= MB_PBF_QUEUED;
	b->pb_freed_at[pb] = b->clock > q.head_start ? b->clock - q.head_start : 0;
	b->pb_next[pb] = 0;
	q_set_prev(b, (uint32_t)pb, *q.tail);
	if (*q.tail != MB_NIL)
		q_set_next(b, *q.tail, (uint32_t)pb);
	else
		*q.head = (uint32_t)pb;
	*q.tail = (uint32_t)pb;
	(*q.n)++;
	if (*q.head == pb)
		oldest_update(b);
}

static void q_unlink(struct mb_buddy *b, struct queue q, size_t pb)
{
	uint32_t n = q_next(b, (uint32_t)pb), p = q_prev(b, (uint32_t)pb);
	if (p != MB_NIL)
		q_set_next(b, p, n);
	else
		*q.head = n;
	if (n != MB_NIL)
		q_set_prev(b, n, p);
	else
		*q.tail = p;
	b->pb_next[pb] = b->pb_prev[pb] = 0;
	b->pb_flags[pb] &= (uint8_t)~MB_PBF_QUEUED;
	(*q.n)--;
	if (p == MB_NIL)
		oldest_update(b);
}

/* Dirty pages were freed in owned pageblock pb: queue it, stamped now,
 * unless it waits already. */
static void freed_note(struct mb_buddy *b, size_t pb)
{
	if (!(b->pb_flags[pb] & MB_PBF_QUEUED)) {
		q_append(b, freed_q(b, pb), pb);
		b->pb_queued_since[pb] = b->clock;
	}
}

/* ---- the global pool ---- */

/* Whether any page of pageblock pb, which has records, is dirty. */
static int records_dirty(const struct mb_buddy *b, size_t pb)
{
	size_t first = pb << b->pb_order;
	for (size_t i = first; i < first + b->pb_pages; i++)
		if (b->pages[i].flags & MB_PGF_DIRTY)
			return 1;
	return 0;
}

/* A whole pageblock comes back: it joins the global pool. A dirty one is
 * queued for release by age; a clean one (its pages all handed back
 * already) needs no records any more. */
static void global_refill(struct mb_buddy *b, size_t pb, int owner)
{
	if (b->pb_flags[pb] & MB_PBF_QUEUED)
		q_unlink(b, freed_q(b, pb), pb);
	if (b->pb_flags[pb] & MB_PBF_TAILS) {
		/* Wholly free: no block is left in it. */
		b->pb_flags[pb] &= (uint8_t)~MB_PBF_TAILS;
		b->nr_tails--;
	}
	set_pb_type(b, pb, MB_PB_GLOBAL);
	owned_clear(b, pb);
	b->nr_global++;
	b->pb_owned[owner]--;
	b->count.global_refills++;

	int dirty = b->pb_flags[pb] & MB_PBF_RECORDS ? records_dirty(b, pb) : (b->pb_flags[pb] & MB_PBF_DIRTY);
	if (!dirty) {
		records_clear(b, pb);
		hp_forget(b, pb);
		b->pb_flags[pb] = 0;
		if (pb < b->clean_hint)
			b->clean_hint = pb;
		return;
	}
	b->pb_flags[pb] |= MB_PBF_DIRTY;
	q_append(b, dirty_q(b), pb);
}

/* Take pageblock pb out of the global pool and reserve it for type. */
static void global_take(struct mb_buddy *b, size_t pb, int type)
{
	if (b->pb_flags[pb] & MB_PBF_QUEUED)
		q_unlink(b, dirty_q(b), pb);
	owned_set(b, pb);
	b->nr_global--;
	set_pb_type(b, pb, type);
	b->pb_owned[type]++;
	b->count.global_steals++;
	if (pb >= b->pb_high)
		b->pb_high = pb + 1;
}

/* The lowest global pageblock at or above `from`. Only the part below the
 * high-water mark is searched: every pageblock above it is global. */
static long global_find_from(const struct mb_buddy *b, size_t from)
{
	size_t pb = find_bit(b->owned_map, from, b->pb_high, 0);
	if (pb == b->pb_high && from > pb)
		pb = from;
	return pb < b->nblocks ? (long)pb : -1;
}

/* Pick a pageblock to steal: the most recently idled resident one (its pages
 * are still mapped, so no faults), else the lowest clean one (keeps the heap
 * compact). */
static long global_pick(struct mb_buddy *b)
{
	if (b->nr_global == 0)
		return -1;
	if (b->dirty_tail != MB_NIL)
		return b->dirty_tail;
	for (;;) {
		long pb = global_find_from(b, b->clean_hint);
		if (pb < 0) {
			if (b->clean_hint == 0)
				return -1;
			b->clean_hint = 0; /* hint was stale; rescan once */
			continue;
		}
		b->clean_hint = (size_t)pb;
		return pb;
	}
}

/* First fit for n contiguous global pageblocks, within the part of the heap
 * used so far or starting there and running on past the high-water mark. */
static long global_find_run(const struct mb_buddy *b, size_t n)
{
	size_t limit = b->pb_high + n < b->nblocks ? b->pb_high + n : b->nblocks;
	size_t s = 0;
	while (s + n <= limit) {
		s = find_bit(b->owned_map, s, limit, 0);
		if (s + n > limit)
			return -1;
		size_t e = find_bit(b->owned_map, s, s + n, 1);
		if (e == s + n)
			return (long)s;
		s = e + 1;
	}
	return -1;
}

/* ---- split, merge, and the page-state bookkeeping ---- */

/* Split the order-`high` block at idx down to `low`, returning upper halves
 * to the owner type's lists: expand() in mm/page_alloc.c. */
static void expand(struct mb_buddy *b, size_t idx, unsigned low, unsigned high, int owner)
{
	while (high > low) {
		high--;
		add_free_block(b, idx + ((size_t)1 << high), high, owner, 0);
	}
}

/* Free one aligned block, merging with free buddies inside its pageblock.
 * A block that grows to pageblock size goes back to the global pool; else,
 * if `dirty`, its pageblock is queued for purging. */
static void free_block(struct mb_buddy *b, size_t idx, unsigned order, int dirty)
{
	size_t pb = idx >> b->pb_order;
	int owner = mb_buddy_pb_type(b, pb);
	while (order < b->pb_order) {
		size_t buddy = idx ^ ((size_t)1 << order);
		struct mb_page *bp = &b->pages[buddy];
		if (bp->state != MB_PG_FREE || bp->order != order)
			break;
		list_del(b, &b->free_area[owner][order], (uint32_t)buddy);
		bp->state = MB_PG_NONE;
		b->pages[idx].state = MB_PG_NONE;
		idx &= buddy;
		order++;
	}
	if (order == b->pb_order) {
		global_refill(b, pb, owner);
		return;
	}
	/* A block the kernel took back goes last: resident free blocks are
	 * handed out first, so that a steady working set does not fault in
	 * released pages while freed ones wait to be purged. Else the
	 * kernel's heuristic: if the next-order buddy is free, this block
	 * may merge soon, so hand out others first. */
	int to_tail = !dirty;
	if (!to_tail && order + 1 < b->pb_order) {
		size_t higher = (idx & ~((size_t)1 << order)) ^ ((size_t)1 << (order + 1));
		to_tail = b->pages[higher].state == MB_PG_FREE && b->pages[higher].order == order + 1;
	}
	add_free_block(b, idx, order, owner, to_tail);
	if (dirty)
		freed_note(b, pb);
}

/* Largest order k with idx aligned to 2^k and idx + 2^k <= end, capped at
 * the pageblock order: the greedy decomposition of a range into blocks. */
static unsigned range_block_order(const struct mb_buddy *b, size_t idx, size_t end)
{
	unsigned k = idx ? (unsigned)__builtin_ctzll(idx) : b->pb_order;
	if (k > b->pb_order)
		k = b->pb_order;
	while (idx + ((size_t)1 << k) > end)
		k--;
	return k;
}

/* Free pages [idx, end): each aligned piece is freed with merging. */
static void free_range(struct mb_buddy *b, size_t idx, size_t end)
{
	while (idx < end) {
		unsigned k = range_block_order(b, idx, end);
		b->pages[idx].state = MB_PG_NONE;
		free_block(b, idx, k, 1);
		idx += (size_t)1 << k;
	}
}

/* Give back [idx, end), the end of a block just taken off a list (or of the
 * last block of a row: take_resident_range): no piece can merge, since
 * every piece's buddy overlaps the part being kept. */
static void trim_range(struct mb_buddy *b, size_t idx, size_t end, int owner)
{
	while (idx < end) {
		unsigned k = range_block_order(b, idx, end);
		add_free_block(b, idx, k, owner, 0);
		idx += (size_t)1 << k;
	}
}

/* Clean pages handed out while freed memory waits on a purge queue: the
 * heap grows beside idle memory it did not reuse (mb_buddy.fresh_pages). */
static void note_fresh(struct mb_buddy *b, size_t clean)
{
	if (clean && b->oldest != UINT64_MAX)
		b->fresh_pages += clean;
}

/* Mark [idx, idx+n), inside one pageblock with records, allocated;
 * returns 1 when every page was still zero. */
static int claim_pages(struct mb_buddy *b, size_t idx, size_t n)
{
	size_t clean = 0;
	b->pb_flags[idx >> b->pb_order] |= MB_PBF_DIRTY;
	for (size_t i = idx; i < idx + n; i++) {
		struct mb_page *p = &b->pages[i];
		clean += !(p->flags & MB_PGF_DIRTY);
		p->flags = MB_PGF_DIRTY;
		p->state = MB_PG_TAIL;
	}
	note_fresh(b, clean);
	return clean == n;
}

/* A build configured with --enable-debug-checks runs the whole checker
 * (buddy_check.c, O(pages)) after every operation that changes the
 * buddy, and aborts at the first broken invariant, naming it. */
#ifdef MB_DEBUG_CHECKS
static void debug_check(const struct mb_buddy *b, const char *op)
{
	char err[256];
	if (mb_buddy_check(b, err, sizeof err) != 0)
		mb_fatal_invariant(op, err);
}
#else
static inline void debug_check(const struct mb_buddy *b, const char *op)
{
	(void)b;
	(void)op;
}
#endif

/* ---- huge pages (buddy.h) ---- */

static void hp_mark(struct mb_buddy *b, size_t u)
{
	b->hp_flags[u] |= MB_HPF_CAND;
	if (!b->hp_pending++)
		__atomic_store_n(&b->hp_due, b->clock + b->hp_settle_ms, __ATOMIC_SEQ_CST);
}

static void hp_unwritten_clear(struct mb_buddy *b, size_t u)
{
	if (!(b->hp_flags[u] & MB_HPF_UNWRITTEN))
		return;
	b->hp_flags[u] &= (uint8_t)~MB_HPF_UNWRITTEN;
	if (!--b->hp_nr_unwritten)
		b->hp_recheck_at = UINT64_MAX;
}

/* When the huge pass is due next: a candidate's settle time, else the
 * unwritten units' wait. */
static void hp_due_update(struct mb_buddy *b)
{
	uint64_t due = b->hp_pending ? b->clock : b->hp_nr_unwritten ? b->hp_recheck_at : UINT64_MAX;
	__atomic_store_n(&b->hp_due, due, __ATOMIC_SEQ_CST);
}

/* The pages allocated per unit; a unit that turns dense is marked. */
static void hp_account(struct mb_buddy *b, size_t idx, size_t n, int sign)
{
	while (n) {
		size_t u = idx >> MB_HP_SHIFT;
		size_t room = ((u + 1) << MB_HP_SHIFT) - idx;
		size_t take = n < room ? n : room;
		if (sign > 0) {
			b->hp_used[u] = (uint16_t)(b->hp_used[u] + take);
			if (b->hp_on && b->hp_used[u] >= b->hp_promote &&
			    !(b->hp_flags[u] & (MB_HPF_HUGE | MB_HPF_CAND | MB_HPF_NOMORE))) {
				hp_mark(b, u);
				/* The heap grows: the waits of unwritten
				 * units start again from the shortest. */
				b->hp_recheck_ms = b->hp_recheck_min_ms;
			}
		} else {
			b->hp_used[u] = (uint16_t)(b->hp_used[u] - take);
			if (!b->hp_used[u]) { /* refusals are forgotten once it empties */
				b->hp_flags[u] &= (uint8_t)~(MB_HPF_TRY1 | MB_HPF_NOMORE);
				hp_unwritten_clear(b, u);
			}
		}
		idx += take;
		n -= take;
	}
}

/* Pageblock pb's memory went back to the kernel: no huge page is left. */
static void hp_forget(struct mb_buddy *b, size_t pb)
{
	if (!b->nunits)
		return;
	size_t per = b->pb_pages >> MB_HP_SHIFT;
	for (size_t u = pb * per; u < (pb + 1) * per; u++)
		b->hp_flags[u] &= (uint8_t)~MB_HPF_HUGE;
}

static void tails_note_unit(struct mb_buddy *b, size_t u);

size_t mb_buddy_hp_take(struct mb_buddy *b, size_t *units, size_t max)
{
	size_t n = 0, end = b->pb_high << (b->pb_order - MB_HP_SHIFT);
	if (!b->nunits)
		return 0;
	if (b->hp_nr_unwritten && b->clock >= b->hp_recheck_at) {
		for (size_t u = 0; u < end; u++)
			if ((b->hp_flags[u] & (MB_HPF_UNWRITTEN | MB_HPF_CAND)) == MB_HPF_UNWRITTEN)
				hp_mark(b, u);
		b->hp_recheck_at = UINT64_MAX; /* set again if some still are */
		b->hp_recheck_ms *= 2;
		if (b->hp_recheck_ms > b->hp_recheck_min_ms * MB_HP_RECHECK_GROWTH)
			b->hp_recheck_ms = b->hp_recheck_min_ms * MB_HP_RECHECK_GROWTH;
	}
	for (size_t u = 0; u < end && b->hp_pending && n < max; u++) {
		if (!(b->hp_flags[u] & MB_HPF_CAND))
			continue;
		b->hp_flags[u] &= (uint8_t)~MB_HPF_CAND;
		b->hp_pending--;
		hp_unwritten_clear(b, u);
		if (b->hp_used[u] >= b->hp_promote && !(b->hp_flags[u] & MB_HPF_HUGE))
			units[n++] = u;
	}
	hp_due_update(b);
	return n;
}

/* Whether unit u of pageblock pb, not collapsed, is worth another look:
 * huge pages still on, the unit still dense, its pageblock still owned. */
static int hp_still_dense(const struct mb_buddy *b, size_t u, size_t pb)
{
	return b->hp_on && b->hp_used[u] >= b->hp_promote && mb_buddy_pb_type(b, pb) != MB_PB_GLOBAL;
}

void mb_buddy_hp_done(struct mb_buddy *b, size_t u, enum mb_hp_result r)
{
	size_t pb = (u << MB_HP_SHIFT) >> b->pb_order;
	if (r == MB_HP_UNWRITTEN) {
		b->count.hp_unwritten++;
		if ((b->hp_flags[u] & (MB_HPF_UNWRITTEN | MB_HPF_CAND | MB_HPF_HUGE)) || !hp_still_dense(b, u, pb))
			return; /* looked at again anyway, or no longer dense */
		b->hp_flags[u] |= MB_HPF_UNWRITTEN;
		b->hp_nr_unwritten++;
		if (b->hp_recheck_at == UINT64_MAX)
			b->hp_recheck_at = b->clock + b->hp_recheck_ms;
		hp_due_update(b);
		return;
	}
	b->count.hp_asked++;
	if (r == MB_HP_REFUSED) {
		b->count.hp_refused++;
		if (b->hp_flags[u] & MB_HPF_TRY1) {
			b->hp_flags[u] |= MB_HPF_NOMORE;
		} else {
			/* Often transient (EAGAIN: pages just faulted in, not
			 * yet on the kernel's LRU lists): once more, later. */
			b->hp_flags[u] |= MB_HPF_TRY1;
			if (hp_still_dense(b, u, pb))
				hp_mark(b, u);
		}
		return;
	}
	b->count.hp_collapsed++;
	if (mb_buddy_pb_type(b, pb) == MB_PB_GLOBAL)
		return; /* freed meanwhile: its purge splits it */
	b->hp_flags[u] |= MB_HPF_HUGE;
	/* The collapse faulted the unit's free pages in: they are resident
	 * now, zero still but to be handed back once the unit is sparse. */
	b->pb_flags[pb] |= MB_PBF_DIRTY;
	if (b->pb_flags[pb] & MB_PBF_RECORDS) {
		for (size_t i = u << MB_HP_SHIFT; i < (u + 1) << MB_HP_SHIFT; i++)
			b->pages[i].flags |= MB_PGF_DIRTY;
		tails_note_unit(b, u);
	}
	debug_check(b, "mb_buddy_hp_done");
}

static void account_pages(struct mb_buddy *b, size_t idx, size_t n, int sign)
{
	if (b->nunits)
		hp_account(b, idx, n, sign);
	while (n) {
		size_t pb = idx >> b->pb_order;
		size_t room = ((pb + 1) << b->pb_order) - idx;
		size_t take = n < room ? n : room;
		if (sign > 0)
			b->pb_used[pb] += (uint32_t)take;
		else
			b->pb_used[pb] -= (uint32_t)take;
		idx += take;
		n -= take;
	}
}

/* A pageblock wholly inside the allocation whose head is at or before its
 * start, so far without records of its own, gets them: it is about to be
 * cut (split or shrink). Its pages are dirty: the program had them. */
static void records_materialize(struct mb_buddy *b, size_t pb)
{
	if (b->pb_flags[pb] & MB_PBF_RECORDS)
		return;
	records_on(b, pb);
	size_t first = pb << b->pb_order;
	for (size_t i = first; i < first + b->pb_pages; i++)
		if (b->pages[i].state != MB_PG_ALLOC)
			b->pages[i].state = MB_PG_TAIL;
}

static void set_head(struct mb_buddy *b, size_t idx, size_t npages, int type)
{
	struct mb_page *h = &b->pages[idx];
	h->state = MB_PG_ALLOC;
	h->npages = (uint32_t)npages;
	h->type = (uint8_t)type;
	h->used = 0;
}

/* ---- allocation ---- */

/* Take free block idx of order o off list a and split it down to `order`,
 * the upper halves going to owner's lists. */
static long take_block(struct mb_buddy *b, struct mb_free_area *a, uint32_t idx, unsigned order, unsigned o,
		       int owner)
{
	list_del(b, a, idx);
	b->pages[idx].state = MB_PG_NONE;
	expand(b, idx, order, o, owner);
	return idx;
}

/* A whole pageblock from the global pool for type, split down to `order`;
 * -1 if the pool is empty. */
static long take_global(struct mb_buddy *b, unsigned order, int type)
{
	long pb = global_pick(b);
	if (pb < 0)
		return -1;
	global_take(b, (size_t)pb, type);
	records_on(b, (size_t)pb);
	size_t idx = (size_t)pb << b->pb_order;
	expand(b, idx, order, b->pb_order, type);
	return (long)idx;
}

/* How many list entries per order a home user looks at, for a block in
 * its home or, failing that, outside the other homes. */
#define HOME_SCAN 16

/* Whether pageblock pb is the home of a user other than who. */
static int others_home(const struct mb_buddy *b, size_t pb, int who)
{
	for (int h = 0; h < MB_BUDDY_HOMES; h++)
		if (h != who && b->home[h] == (long)pb)
			return 1;
	return 0;
}

/* The first free block of order >= order on type t's lists, taken and
 * split for type `type` (its upper halves stay on t's lists: the pageblock
 * keeps its owner); for a user of homes who (-1: none), the first of each
 * order's first HOME_SCAN blocks that is not in another user's home. -1
 * if there is none. */
static long take_from_type(struct mb_buddy *b, unsigned order, int t, int type, int who)
{
	for (unsigned o = order; o < b->pb_order; o++) {
		struct mb_free_area *a = &b->free_area[t][o];
		uint32_t idx = a->head;
		for (int k = 0; k < HOME_SCAN && idx != MB_NIL; k++, idx = b->pages[idx].next) {
			if (who >= 0 && others_home(b, idx >> b->pb_order, who))
				continue;
			if (t != type)
				b->count.fallbacks[type]++;
			return take_block(b, a, idx, order, o, t);
		}
	}
	return -1;
}

static unsigned order_for(size_t npages)
{
	return npages <= 1 ? 0 : 64 - (unsigned)__builtin_clzll(npages - 1);
}

/* How many list entries per order take_resident_range() looks at. */
#define RANGE_SCAN 16

/* npages free pages in a row, npages not a power of two, starting with a
 * resident block of type t's lists: a block of one or two orders below
 * the request's, then the free blocks that follow it in its pageblock.
 * A buddy would take an aligned block of the next power of two, often
 * clean while the memory a similar request just freed lies in pieces
 * that no aligned block covers (a 272 KiB buffer freed as 256 + 16 KiB,
 * its neighbour since taken). A row in the home of a user other than who
 * (-1: no user) is not taken. *end: the end of the last block taken off
 * the lists, past the request; -1 if there is no such row. */
static long take_resident_range(struct mb_buddy *b, size_t npages, size_t align, int t, int who, size_t *end)
{
	unsigned order = order_for(npages);
	for (unsigned o = order - 1; o + 3 > order; o--) {
		struct mb_free_area *a = &b->free_area[t][o];
		uint32_t idx = a->head;
		for (int k = 0; k < RANGE_SCAN && idx != MB_NIL; k++, idx = b->pages[idx].next) {
			if (!(b->pages[idx].flags & MB_PGF_DIRTY) || (idx & (align - 1)) ||
			    (who >= 0 && others_home(b, (size_t)idx >> b->pb_order, who)))
				continue;
			size_t pb_end = (((size_t)idx >> b->pb_order) + 1) << b->pb_order;
			size_t j = (size_t)idx + ((size_t)1 << o);
			while (j - idx < npages && j < pb_end && b->pages[j].state == MB_PG_FREE)
				j += (size_t)1 << b->pages[j].order;
			if (j - idx < npages)
				continue;
			/* Every block of the row is on t's lists: they share
			 * the first one's pageblock. */
			for (size_t x = idx; x < j;) {
				unsigned xo = b->pages[x].order;
				list_del(b, &b->free_area[t][xo], (uint32_t)x);
				b->pages[x].state = MB_PG_NONE;
				x += (size_t)1 << xo;
			}
			*end = j;
			return idx;
		}
		if (o == 0)
			break;
	}
	return -1;
}

/* From type t's lists, for a request of type `type` (by user who, -1:
 * none, kept out of the other users' homes): a row of free blocks that
 * starts resident (take_resident_range) when npages is not a power of
 * two, else a block of the request's order. */
static long take_from(struct mb_buddy *b, size_t npages, size_t align, unsigned order, int t, int type, int who,
		      size_t *end)
{
	if (npages & (npages - 1)) {
		long idx = take_resident_range(b, npages, align, t, who, end);
		if (idx >= 0) {
			if (t != type)
				b->count.fallbacks[type]++;
			return idx;
		}
	}
	return take_from_type(b, order, t, type, who);
}

/* __rmqueue of the patch, with two changes that the generated workloads
 * of `make sweep` chose (doc/design.md, "Placement"):
 * - KernNoRclm, whose objects live long, keeps the patch's order: its own
 *   lists, a whole pageblock from the global pool, then the others' lists.
 *   The reclaimable types use free blocks inside the other types'
 *   pageblocks before they take a pageblock from the pool: their objects
 *   die soon and give those holes back, while every pageblock they take
 *   from the pool is one fewer whole block for a large request.
 * - A fallback never changes a pageblock's owner: the borrowed block is
 *   freed back into its owner's lists. Retyping a mostly free pageblock,
 *   as later kernels do, stranded its free space in the new owner's
 *   lists.
 * order: the block order that holds npages at the alignment asked, the
 * caller's (which trims that block to npages); a row (take_from) sets
 * *end instead. */
static long rmqueue(struct mb_buddy *b, size_t npages, size_t align, unsigned order, int type, size_t *end)
{
	long idx = take_from(b, npages, align, order, type, type, -1, end);
	if (idx >= 0)
		return idx;
	int borrow_first = type != MB_KERNNORCLM;
	if (!borrow_first && (idx = take_global(b, order, type)) >= 0)
		return idx;
	for (int i = 1; i < MB_NTYPES; i++)
		if ((idx = take_from(b, npages, align, order, mb_fallback_order[type][i], type, -1, end)) >= 0)
			return idx;
	return borrow_first ? take_global(b, order, type) : -1;
}

/* Take global pageblock pb into a run (or the growth of an allocation)
 * that covers it whole: no page record is written. Returns 1 if it was
 * clean. */
static int take_covered(struct mb_buddy *b, size_t pb, int type)
{
	int clean = !(b->pb_flags[pb] & MB_PBF_DIRTY);
	if (clean)
		note_fresh(b, b->pb_pages);
	global_take(b, pb, type);
	records_clear(b, pb);
	b->pb_flags[pb] |= MB_PBF_DIRTY;
	return clean;
}

/* Pages [idx, end) of the global pageblock that ends an allocation: they
 * get records, and the rest of the pageblock goes to type's lists.
 * Returns 1 if the pages were clean. */
static int take_partial(struct mb_buddy *b, size_t idx, size_t end, int type)
{
	size_t pb = idx >> b->pb_order;
	global_take(b, pb, type);
	records_on(b, pb);
	int zero = claim_pages(b, idx, end - idx);
	trim_range(b, end, (pb + 1) << b->pb_order, type);
	return zero;
}

/* A run of whole global pageblocks: one record at its head, none for the
 * pages inside, records for the last pageblock only when the run ends in
 * the middle of it. */
static long alloc_run(struct mb_buddy *b, size_t npages, int type, int *zeroed)
{
	size_t n = (npages + b->pb_pages - 1) >> b->pb_order;
	long first = global_find_run(b, n);
	if (first < 0)
		return -1;
	size_t idx = (size_t)first << b->pb_order, end = idx + npages;
	size_t whole = npages >> b->pb_order;
	int zero = 1;
	for (size_t pb = (size_t)first; pb < (size_t)first + whole; pb++)
		zero &= take_covered(b, pb, type);
	if (whole < n)
		zero &= take_partial(b, (size_t)(first + (long)whole) << b->pb_order, end, type);
	*zeroed = zero;
	return (long)idx;
}

/* For a walk over a pageblock's page records: how many pages the free
 * block, block being purged or allocation that page i heads covers; 1
 * for any other page (the tail of a run from an earlier pageblock). */
static size_t walk_len(const struct mb_buddy *b, size_t i)
{
	const struct mb_page *p = &b->pages[i];
	if (p->state == MB_PG_FREE || p->state == MB_PG_PURGING)
		return (size_t)1 << p->order;
	if (p->state == MB_PG_ALLOC && p->npages)
		return p->npages;
	return 1;
}

/* The smallest free block of at least `order` in pageblock pb (with
 * records), found by walking its blocks; -1 if none. A block being
 * purged is on no list: not taken. */
static long smallest_free_in(const struct mb_buddy *b, size_t pb, unsigned order)
{
	size_t i = pb << b->pb_order, end = i + b->pb_pages;
	long best = -1;
	unsigned best_order = b->pb_order;
	for (; i < end; i += walk_len(b, i)) {
		const struct mb_page *p = &b->pages[i];
		if (p->state == MB_PG_FREE && p->order >= order && p->order < best_order) {
			best = (long)i;
			best_order = p->order;
			if (best_order == order)
				break;
		}
	}
	return best;
}

/* A block of `order` in who's home pageblock, smallest order first as the
 * buddy always takes (splitting a big block while small ones are free
 * would break up the pageblocks that could become whole again): each
 * order's list is searched for a block in the home among its first
 * HOME_SCAN entries (a home being filled keeps its remainder at the list
 * heads, so this usually stops at the first entry), then the home's own
 * blocks are walked. Without the walk a block freed in the home long ago,
 * behind the blocks freed since in other pageblocks, was not found: the
 * home moved to whichever pageblock had freed last, and a key's one-page
 * slabs ended up strewn one every few dozen pages over every pageblock of
 * its type, where no large request fits between them (mstress-like churn
 * took a new pageblock for every 256 KiB run beside 12 MiB free, and
 * peaked 12-15% higher). */
static long take_in_home(struct mb_buddy *b, int who, unsigned order, int type)
{
	size_t pb = (size_t)b->home[who];
	if (mb_buddy_pb_type(b, pb) != type || b->pb_pages - b->pb_used[pb] < ((size_t)1 << order))
		return -1;
	for (unsigned o = order; o < b->pb_order; o++) {
		struct mb_free_area *a = &b->free_area[type][o];
		uint32_t idx = a->head;
		for (int k = 0; k < HOME_SCAN && idx != MB_NIL; k++, idx = b->pages[idx].next) {
			if ((idx >> b->pb_order) == pb)
				return take_block(b, a, idx, order, o, type);
		}
	}
	long idx = smallest_free_in(b, pb, order);
	if (idx < 0)
		return -1;
	unsigned o = b->pages[idx].order;
	return take_block(b, &b->free_area[type][o], (uint32_t)idx, order, o, type);
}

/* User who's block outside every other user's home: a home user's when its
 * home is full (mb_buddy_alloc_home()), a sharing user's always
 * (mb_buddy_alloc_shared()). As rmqueue takes it, resident memory first:
 * a row of resident blocks for npages not a power of two, else the
 * smallest order's first blocks (those freed last); then a whole pageblock
 * from the global pool, and only then anything rmqueue finds. *end as
 * rmqueue sets it. */
static long rmqueue_home(struct mb_buddy *b, size_t npages, unsigned order, int type, int who, size_t *end)
{
	long idx = take_from(b, npages, 1, order, type, type, who, end);
	if (idx < 0)
		idx = take_global(b, order, type);
	return idx >= 0 ? idx : rmqueue(b, npages, 1, order, type, end);
}

/* align: a power of two of pages, at most a pageblock's (runs of more
 * than a pageblock are aligned to one); who: a user of homes, or -1;
 * home_first: who fills its home before anything else
 * (mb_buddy_alloc_home()), else it shares (mb_buddy_alloc_shared()); used:
 * the first pages the caller uses (npages but for a block, whose other
 * pages stay as they are: see mb_buddy_alloc_block()). */
static long alloc_pages(struct mb_buddy *b, size_t npages, size_t align, enum mb_type type, int who, int home_first,
			int *zeroed, size_t used)
{
	int zero_dummy;
	if (!zeroed)
		zeroed = &zero_dummy;
	*zeroed = 0;
	if (npages == 0 || (unsigned)type >= MB_NTYPES || npages > b->npages || align == 0 ||
	    (align & (align - 1)) || align > b->pb_pages)
		return -1;
	b->count.allocs[type]++;

	long idx;
	if (npages > b->pb_pages) {
		idx = alloc_run(b, npages, type, zeroed);
	} else {
		unsigned order = order_for(npages > align ? npages : align);
		size_t end = 0; /* where the free memory taken ends */
		if (who < 0) {
			idx = rmqueue(b, npages, align, order, type, &end);
		} else {
			idx = home_first && b->home[who] >= 0 ? take_in_home(b, who, order, type) : -1;
			if (idx < 0)
				idx = rmqueue_home(b, npages, order, type, who, &end);
			if (idx >= 0)
				b->home[who] = idx >> b->pb_order;
		}
		if (idx >= 0) {
			size_t pb = (size_t)idx >> b->pb_order;
			if ((b->pb_flags[pb] & MB_PBF_QUEUED) &&
			    (!b->max_wait_ms || b->clock - b->pb_queued_since[pb] < b->max_wait_ms)) {
				/* Memory is taken from it again: it is not idle,
				 * so its wait starts over (for a while). */
				q_unlink(b, freed_q(b, pb), pb);
				q_append(b, freed_q(b, pb), pb);
			}
			size_t owner = (size_t)mb_buddy_pb_type(b, pb);
			*zeroed = claim_pages(b, (size_t)idx, used);
			for (size_t i = (size_t)idx + used; i < (size_t)idx + npages; i++)
				b->pages[i].state = MB_PG_TAIL;
			if (!end)
				end = (size_t)idx + ((size_t)1 << order);
			trim_range(b, (size_t)idx + npages, end, (int)owner);
		}
	}
	if (idx < 0) {
		b->count.failures[type]++;
		return -1;
	}
	set_head(b, (size_t)idx, npages, type);
	account_pages(b, (size_t)idx, npages, +1);
	b->pages_allocated += npages;
	return idx;
}

long mb_buddy_alloc(struct mb_buddy *b, size_t npages, enum mb_type type, int *zeroed)
{
	long idx = alloc_pages(b, npages, 1, type, -1, 0, zeroed, npages);
	debug_check(b, "mb_buddy_alloc");
	return idx;
}

long mb_buddy_alloc_aligned(struct mb_buddy *b, size_t npages, size_t align, enum mb_type type, int *zeroed)
{
	long idx = alloc_pages(b, npages, align, type, -1, 0, zeroed, npages);
	debug_check(b, "mb_buddy_alloc_aligned");
	return idx;
}

long mb_buddy_alloc_home(struct mb_buddy *b, size_t npages, enum mb_type type, int who, int *zeroed)
{
	long idx = alloc_pages(b, npages, 1, type, who, 1, zeroed, npages);
	debug_check(b, "mb_buddy_alloc_home");
	return idx;
}

long mb_buddy_alloc_shared(struct mb_buddy *b, size_t npages, enum mb_type type, int who, int *zeroed)
{
	long idx = alloc_pages(b, npages, 1, type, who, 0, zeroed, npages);
	debug_check(b, "mb_buddy_alloc_shared");
	return idx;
}

/* Block allocation idx has dirty reserved pages from now on: the purge
 * looks at its pageblock, and at it once it has kept them so for the
 * decay (mb_buddy_purge_take). */
static void tail_note(struct mb_buddy *b, size_t idx)
{
	size_t pb = idx >> b->pb_order;
	b->pages[idx].tail_since = (uint32_t)b->clock;
	if (!(b->pb_flags[pb] & MB_PBF_TAILS)) {
		b->pb_flags[pb] |= MB_PBF_TAILS;
		b->nr_tails++;
	}
	if (b->clock < b->tails_oldest) {
		b->tails_oldest = b->clock;
		oldest_update(b);
	}
}

/* After unit u's collapse: the reserved pages of its blocks are resident
 * too, and the purge must know (tail_note), to hand them back once the
 * unit turns sparse. A block lies in one unit: it is aligned to its size,
 * at most a unit's. */
static void tails_note_unit(struct mb_buddy *b, size_t u)
{
	for (size_t i = u << MB_HP_SHIFT; i < (u + 1) << MB_HP_SHIFT; i += walk_len(b, i))
		if (b->pages[i].state == MB_PG_ALLOC && b->pages[i].used)
			tail_note(b, i);
}

/* The first and last dirty page among the reserved ones of block
 * allocation idx; 0 if none. */
static int tail_dirty(const struct mb_buddy *b, size_t idx, size_t *first, size_t *last)
{
	const struct mb_page *h = &b->pages[idx];
	if (!h->used)
		return 0;
	*first = SIZE_MAX;
	for (size_t i = idx + h->used; i < idx + h->npages; i++)
		if (b->pages[i].flags & MB_PGF_DIRTY) {
			if (*first == SIZE_MAX)
				*first = i;
			*last = i;
		}
	return *first != SIZE_MAX;
}

/* Of block allocation idx, the pages below `used` in use, and the rest
 * reserved, as they are. Pages that come into use are marked dirty (the
 * caller writes them); those in use already were, when they were claimed. */
static void block_use(struct mb_buddy *b, size_t idx, size_t used)
{
	struct mb_page *h = &b->pages[idx];
	size_t was = mb_buddy_pages_used(h);
	if (b->nunits && used != was)
		hp_account(b, idx + (used < was ? used : was), used < was ? was - used : used - was,
			   used < was ? -1 : +1);
	h->used = used < h->npages ? (uint32_t)used : 0;
	size_t clean = 0;
	for (size_t i = idx + was; i < idx + used; i++) {
		clean += !(b->pages[i].flags & MB_PGF_DIRTY);
		b->pages[i].flags |= MB_PGF_DIRTY;
	}
	note_fresh(b, clean);
	size_t first, last;
	if (tail_dirty(b, idx, &first, &last))
		tail_note(b, idx);
}

long mb_buddy_alloc_block(struct mb_buddy *b, size_t npages, enum mb_type type, int *zeroed)
{
	size_t block = (size_t)1 << order_for(npages);
	if (npages == 0 || block > b->pb_pages)
		return -1;
	long idx = alloc_pages(b, block, 1, type, -1, 0, zeroed, npages);
	if (idx >= 0)
		block_use(b, (size_t)idx, npages);
	debug_check(b, "mb_buddy_alloc_block");
	return idx;
}

void mb_buddy_block_use(struct mb_buddy *b, size_t idx, size_t used)
{
	block_use(b, idx, used);
	debug_check(b, "mb_buddy_block_use");
}

/* Free the allocated pages [idx, end) of the allocation whose head is
 * `head`: a pageblock without records goes straight back to the global
 * pool, untouched but for the head's record if it is there; the pages of
 * any other are freed with merging. */
static void release_range(struct mb_buddy *b, size_t idx, size_t end, size_t head)
{
	while (idx < end) {
		size_t pb = idx >> b->pb_order;
		size_t pb_end = (pb + 1) << b->pb_order;
		size_t stop = end < pb_end ? end : pb_end;
		if (!(b->pb_flags[pb] & MB_PBF_RECORDS)) {
			if (idx == head)
				memset(&b->pages[idx], 0, sizeof(struct mb_page));
			global_refill(b, pb, mb_buddy_pb_type(b, pb));
		} else {
			for (size_t i = idx; i < stop; i++)
				b->pages[i].state = MB_PG_NONE;
			free_range(b, idx, stop);
		}
		idx = stop;
	}
}

size_t mb_buddy_free(struct mb_buddy *b, size_t idx)
{
	size_t n = b->pages[idx].npages, used = mb_buddy_pages_used(&b->pages[idx]);
	if (b->nunits && used < n)
		hp_account(b, idx + used, n - used, +1); /* reserved: counted out */
	account_pages(b, idx, n, -1);
	b->pages_allocated -= n;
	release_range(b, idx, idx + n, idx);
	debug_check(b, "mb_buddy_free");
	return n;
}

/* ---- in-place resize ---- */

/* The free block that contains page i, or -1. */
static long free_block_containing(const struct mb_buddy *b, size_t i, unsigned *order)
{
	for (unsigned o = 0; o < b->pb_order; o++) {
		size_t h = i & ~(((size_t)1 << o) - 1);
		const struct mb_page *p = &b->pages[h];
		if (p->state == MB_PG_FREE && p->order >= o && h + ((size_t)1 << p->order) > i) {
			*order = p->order;
			return (long)h;
		}
	}
	return -1;
}

/* Claim the free pages [start, end) inside one pageblock. */
static int claim_free_range(struct mb_buddy *b, size_t start, size_t end)
{
	unsigned o;
	for (size_t i = start; i < end;) {
		long h = free_block_containing(b, i, &o);
		if (h < 0)
			return -1;
		i = (size_t)h + ((size_t)1 << o);
	}
	int owner = mb_buddy_pb_type(b, start >> b->pb_order);
	for (size_t i = start; i < end;) {
		long h = free_block_containing(b, i, &o);
		size_t hend = (size_t)h + ((size_t)1 << o);
		list_del(b, &b->free_area[owner][o], (uint32_t)h);
		b->pages[h].state = MB_PG_NONE;
		trim_range(b, (size_t)h, start > (size_t)h ? start : (size_t)h, owner);
		trim_range(b, end < hend ? end : hend, hend, owner);
		i = hend;
	}
	claim_pages(b, start, end - start);
	return 0;
}

static int resize_pages(struct mb_buddy *b, size_t idx, size_t new_npages)
{
	struct mb_page *h = &b->pages[idx];
	size_t old = h->npages;
	if (new_npages == 0)
		return -1;
	if (new_npages == old)
		return 0;
	if (new_npages < old) {
		size_t cut = idx + new_npages, end = idx + old;
		if (cut & (b->pb_pages - 1))
			records_materialize(b, cut >> b->pb_order);
		if (h->used) {
			/* A block's reserved pages that go are counted back
			 * in first, as mb_buddy_free() does. */
			size_t from = h->used > new_npages ? h->used : new_npages;
			if (b->nunits)
				hp_account(b, idx + from, old - from, +1);
			if (h->used >= new_npages)
				h->used = 0;
		}
		account_pages(b, cut, old - new_npages, -1);
		b->pages_allocated -= old - new_npages;
		h->npages = (uint32_t)new_npages;
		release_range(b, cut, end, idx);
		return 0;
	}
	/* Grow: the new pages must be free, in the same pageblock, or whole
	 * global pageblocks that follow. */
	size_t start = idx + old, end = idx + new_npages;
	if (end > b->npages)
		return -1;
	size_t pb_end = ((start - 1) >> b->pb_order) + 1; /* first pb after the allocation's last page */
	size_t in_pb_end = pb_end << b->pb_order;
	if (end <= in_pb_end) {
		if (claim_free_range(b, start, end) < 0)
			return -1;
	} else {
		/* Spans further pageblocks: they must all be global. The part
		 * still in the current pageblock must be free too. */
		size_t last_pb = (end - 1) >> b->pb_order;
		for (size_t pb = pb_end; pb <= last_pb; pb++)
			if (!global_test(b, pb))
				return -1;
		if (start < in_pb_end) {
			unsigned o;
			for (size_t i = start; i < in_pb_end;) {
				long fh = free_block_containing(b, i, &o);
				if (fh < 0)
					return -1;
				i = (size_t)fh + ((size_t)1 << o);
			}
			claim_free_range(b, start, in_pb_end);
		}
		int type = h->type;
		size_t whole_end = end >> b->pb_order; /* first pageblock not covered whole */
		for (size_t pb = pb_end; pb < whole_end; pb++)
			take_covered(b, pb, type);
		if (whole_end <= last_pb)
			take_partial(b, whole_end << b->pb_order, end, type);
	}
	if (h->used)
		/* A block grown past its end: its reserved pages are in use. */
		block_use(b, idx, old);
	account_pages(b, start, end - start, +1);
	b->pages_allocated += end - start;
	h->npages = (uint32_t)new_npages;
	h->state = MB_PG_ALLOC;
	return 0;
}

int mb_buddy_resize(struct mb_buddy *b, size_t idx, size_t new_npages)
{
	int r = resize_pages(b, idx, new_npages);
	debug_check(b, "mb_buddy_resize");
	return r;
}

/* ---- memory return ---- */

static void batch_add(struct mb_purge_batch *bt, size_t idx, size_t npages, int global)
{
	struct mb_purge_range *r = &bt->r[bt->n++];
	r->idx = idx;
	r->npages = npages;
	r->head = idx;
	r->global = (uint8_t)global;
	r->tail = 0;
	r->ok = 0;
	bt->pages += npages;
}

static int queued_global(const struct mb_buddy *b, size_t pb, uint64_t idle_since)
{
	return pb < b->nblocks && global_test(b, pb) && (b->pb_flags[pb] & MB_PBF_QUEUED) &&
	       b->pb_freed_at[pb] <= idle_since;
}

/* Global pageblock pb, and its queued neighbours idle as long, as one range
 * out of the pool. */
static void take_global_range(struct mb_buddy *b, size_t pb, uint64_t idle_since, size_t room,
			      struct mb_purge_batch *bt)
{
	size_t max = room >> b->pb_order ? room >> b->pb_order : 1;
	size_t lo = pb, hi = pb + 1;
	while (hi - lo < max && queued_global(b, hi, idle_since))
		hi++;
	while (hi - lo < max && lo > 0 && queued_global(b, lo - 1, idle_since))
		lo--;
	for (size_t p = lo; p < hi; p++) {
		q_unlink(b, dirty_q(b), p);
		owned_set(b, p);
		b->pb_flags[p] |= MB_PBF_INFLIGHT;
		b->nr_global--;
		b->nr_inflight++;
	}
	batch_add(bt, lo << b->pb_order, (hi - lo) << b->pb_order, 1);
}

static int block_dirty(const struct mb_buddy *b, size_t idx, size_t n)
{
	for (size_t j = idx; j < idx + n; j++)
		if (b->pages[j].flags & MB_PGF_DIRTY)
			return 1;
	return 0;
}

/* The spans of adjacent free blocks of owned pageblock pb that hold a dirty
 * page come off the lists. Returns 0 when the batch filled up before the
 * pageblock was done: it stays queued, at the head. */
static int take_freed(struct mb_buddy *b, size_t pb, size_t budget, struct mb_purge_batch *bt)
{
	int owner = mb_buddy_pb_type(b, pb);
	size_t i = pb << b->pb_order, end = i + b->pb_pages;
	while (i < end) {
		if (b->pages[i].state != MB_PG_FREE) {
			i += walk_len(b, i);
		} else {
			size_t s = i;
			int dirty = 0;
			/* With huge pages, a span stays inside the unit where
			 * it starts: each unit is kept or returned alone. */
			while (i < end && b->pages[i].state == MB_PG_FREE &&
			       (!b->nunits || (i >> MB_HP_SHIFT) == (s >> MB_HP_SHIFT) || i == s)) {
				size_t n = (size_t)1 << b->pages[i].order;
				dirty = dirty || block_dirty(b, i, n);
				i += n;
			}
			if (!dirty)
				continue;
			if (mb_buddy_hp_keep(b, s)) {
				b->count.hp_kept_pages += i - s;
				continue;
			}
			if (b->nunits && (b->hp_flags[s >> MB_HP_SHIFT] & MB_HPF_HUGE)) {
				/* Sparse, or wholly free: the huge page goes. */
				b->hp_flags[s >> MB_HP_SHIFT] &= (uint8_t)~MB_HPF_HUGE;
				if (b->hp_used[s >> MB_HP_SHIFT])
					b->count.hp_demoted++;
			}
			if (bt->n == MB_PURGE_RANGES || bt->pages >= budget)
				return 0;
			for (size_t j = s; j < i;) {
				unsigned o = b->pages[j].order;
				list_del(b, &b->free_area[owner][o], (uint32_t)j);
				b->pages[j].state = MB_PG_PURGING;
				j += (size_t)1 << o;
			}
			b->pages_inflight += i - s;
			batch_add(bt, s, i - s, 0);
		}
	}
	q_unlink(b, freed_q(b, pb), pb);
	return 1;
}

/* The clock when block allocation h last left dirty reserved pages. */
static uint64_t tail_stamp(const struct mb_buddy *b, const struct mb_page *h)
{
	return b->clock - (uint32_t)((uint32_t)b->clock - h->tail_since);
}

/* Room left in bt, the dirty reserved pages of blocks that have kept them
 * since idle_since or before, one range per block (flagged busy until
 * done). A pageblock found with no others left is no longer looked at. */
static void take_tails(struct mb_buddy *b, uint64_t idle_since, size_t budget, struct mb_purge_batch *bt)
{
	if (!b->nr_tails || b->tails_oldest > idle_since)
		return;
	uint64_t oldest = UINT64_MAX;
	int complete = 1;
	for (size_t pb = 0; pb < b->pb_high && complete; pb++) {
		if (!(b->pb_flags[pb] & MB_PBF_TAILS))
			continue;
		int left = 0;
		size_t end = (pb + 1) << b->pb_order;
		for (size_t i = pb << b->pb_order; i < end;) {
			struct mb_page *p = &b->pages[i];
			size_t first, last;
			if (p->state == MB_PG_FREE || p->state == MB_PG_PURGING) {
				i += (size_t)1 << p->order;
				continue;
			}
			if (p->state != MB_PG_ALLOC) {
				i++; /* an allocation from an earlier pageblock */
				continue;
			}
			if (!(p->flags & MB_PGF_TAIL_BUSY) && tail_dirty(b, i, &first, &last)) {
				uint64_t since = tail_stamp(b, p);
				if (mb_buddy_hp_keep(b, first)) {
					/* In a huge page the purge keeps whole, as its
					 * free pages are: looked at again when a block
					 * next leaves dirty reserved pages. */
					left = 1;
				} else if (since > idle_since) {
					left = 1;
					oldest = since < oldest ? since : oldest;
				} else if (bt->n == MB_PURGE_RANGES || bt->pages >= budget) {
					left = 1;
					complete = 0;
				} else {
					size_t u = first >> MB_HP_SHIFT;
					if (b->nunits && (b->hp_flags[u] & MB_HPF_HUGE)) {
						/* Sparse: the huge page goes, as take_freed
						 * lets it go. */
						b->hp_flags[u] &= (uint8_t)~MB_HPF_HUGE;
						b->count.hp_demoted++;
					}
					batch_add(bt, first, last + 1 - first, 0);
					bt->r[bt->n - 1].head = i;
					bt->r[bt->n - 1].tail = 1;
					p->flags |= MB_PGF_TAIL_BUSY;
				}
			}
			i += p->npages;
		}
		if (!left) {
			b->pb_flags[pb] &= (uint8_t)~MB_PBF_TAILS;
			b->nr_tails--;
		}
	}
	/* Not looked at to the end: some are due still, and the stamp
	 * stays as early as it was. */
	if (complete) {
		b->tails_oldest = oldest;
		oldest_update(b);
	}
}

/* A block's reserved pages back from the kernel: clean if it took them,
 * else dirty still, to be tried again a decay later. */
static void done_tail(struct mb_buddy *b, const struct mb_purge_range *r)
{
	b->pages[r->head].flags &= (uint8_t)~MB_PGF_TAIL_BUSY;
	if (!r->ok) {
		tail_note(b, r->head);
		return;
	}
	for (size_t i = r->idx; i < r->idx + r->npages; i++)
		b->pages[i].flags &= (uint8_t)~MB_PGF_DIRTY;
}

size_t mb_buddy_purge_take(struct mb_buddy *b, uint64_t idle_since, size_t budget, struct mb_purge_batch *bt)
{
	bt->n = 0;
	bt->pages = 0;
	while (bt->n < MB_PURGE_RANGES && bt->pages < budget) {
		uint32_t g = b->dirty_head, f = freed_oldest(b);
		uint64_t gs = queue_head_stamp(b, g), fs = queue_head_stamp(b, f);
		if (gs <= fs && gs <= idle_since && g != MB_NIL)
			take_global_range(b, g, idle_since, budget - bt->pages, bt);
		else if (fs <= idle_since && f != MB_NIL) {
			if (!take_freed(b, f, budget, bt))
				break;
		} else
			break;
	}
	take_tails(b, idle_since, budget, bt);
	debug_check(b, "mb_buddy_purge_take");
	return bt->pages;
}

void mb_buddy_purge_release(const struct mb_buddy *b, struct mb_purge_batch *bt)
{
	for (unsigned k = 0; k < bt->n; k++) {
		struct mb_purge_range *r = &bt->r[k];
		r->ok = !b->release || b->release(mb_buddy_page_addr(b, r->idx), r->npages << MB_PAGE_SHIFT) == 0;
	}
}

/* A global range back in the pool: clean, without records, if released;
 * else dirty and queued again. */
static void done_global(struct mb_buddy *b, const struct mb_purge_range *r)
{
	for (size_t pb = r->idx >> b->pb_order; pb < (r->idx + r->npages) >> b->pb_order; pb++) {
		owned_clear(b, pb);
		b->pb_flags[pb] &= (uint8_t)~MB_PBF_INFLIGHT;
		b->nr_global++;
		b->nr_inflight--;
		if (!r->ok) {
			q_append(b, dirty_q(b), pb);
			continue;
		}
		records_clear(b, pb);
		hp_forget(b, pb);
		b->pb_flags[pb] = 0;
		if (pb < b->clean_hint)
			b->clean_hint = pb;
		b->count.released_pageblocks++;
	}
}

/* The free blocks of a span go back, clean if released, merging. */
static void done_freed(struct mb_buddy *b, const struct mb_purge_range *r)
{
	for (size_t j = r->idx; j < r->idx + r->npages;) {
		unsigned o = b->pages[j].order;
		size_t n = (size_t)1 << o;
		if (r->ok)
			for (size_t i = j; i < j + n; i++)
				b->pages[i].flags &= (uint8_t)~MB_PGF_DIRTY;
		b->pages[j].state = MB_PG_NONE;
		free_block(b, j, o, !r->ok);
		j += n;
	}
	b->pages_inflight -= r->npages;
}

void mb_buddy_purge_done(struct mb_buddy *b, struct mb_purge_batch *bt)
{
	for (unsigned k = 0; k < bt->n; k++) {
		struct mb_purge_range *r = &bt->r[k];
		if (!r->ok)
			b->count.release_failures++;
		if (r->global)
			done_global(b, r);
		else if (r->tail)
			done_tail(b, r);
		else
			done_freed(b, r);
	}
	debug_check(b, "mb_buddy_purge_done");
}

size_t mb_buddy_purge(struct mb_buddy *b, uint64_t idle_since, size_t budget)
{
	size_t released = 0;
	struct mb_purge_batch bt;
	while (released < budget && mb_buddy_purge_take(b, idle_since, budget - released, &bt)) {
		mb_buddy_purge_release(b, &bt);
		mb_buddy_purge_done(b, &bt);
		for (unsigned k = 0; k < bt.n; k++) {
			if (!bt.r[k].ok)
				return released; /* the kernel refuses: try later */
			released += bt.r[k].npages;
		}
	}
	return released;
}

void mb_buddy_split(struct mb_buddy *b, size_t idx, size_t at)
{
	struct mb_page *h = &b->pages[idx];
	size_t n = h->npages;
	if (at & (b->pb_pages - 1))
		records_materialize(b, at >> b->pb_order);
	set_head(b, at, n - (at - idx), h->type);
	h->npages = (uint32_t)(at - idx);
	debug_check(b, "mb_buddy_split");
}

/* ---- set-up ---- */

int mb_buddy_init(struct mb_buddy *b, void *base, size_t size, unsigned max_order)
{
	memset(b, 0, sizeof(*b));
	if (max_order < MB_MAX_ORDER_MIN || max_order > MB_MAX_ORDER_MAX) {
		errno = EINVAL;
		return -1;
	}
	b->max_order = max_order;
	for (int h = 0; h < MB_BUDDY_HOMES; h++)
		b->home[h] = -1;
	b->pb_order = max_order - 1;
	b->pb_pages = (size_t)1 << b->pb_order;
	size_t pb_bytes = b->pb_pages << MB_PAGE_SHIFT;
	if (((uintptr_t)base & (pb_bytes - 1)) || size < pb_bytes || (size & (pb_bytes - 1))) {
		errno = EINVAL;
		return -1;
	}
	b->base = (uintptr_t)base;
	b->npages = size >> MB_PAGE_SHIFT;
	b->nblocks = b->npages >> b->pb_order;
	if (b->npages > MB_NIL) {
		errno = EINVAL;
		return -1;
	}

	/* One reservation for every metadata array; untouched parts cost no
	 * memory, so the page array is sized for the whole region. */
	size_t words = (b->nblocks + 63) / 64;
	size_t sz_pages = b->npages * sizeof(struct mb_page);
	size_t sz_magic = b->npages * sizeof(uint32_t);
	size_t sz_use = ((b->nblocks + 31) / 32) * sizeof(uint64_t);
	size_t sz_owned = words * sizeof(uint64_t);
	size_t sz_flags = b->nblocks;
	size_t sz_used = b->nblocks * sizeof(uint32_t);
	size_t sz_links = b->nblocks * sizeof(uint32_t);
	size_t sz_time = b->nblocks * sizeof(uint64_t);
	size_t nunits = b->pb_pages >= MB_HP_PAGES ? b->npages >> MB_HP_SHIFT : 0;
	size_t sz_hp = nunits * (sizeof(uint16_t) + sizeof(uint8_t)) + 64;
	size_t total = sz_pages + sz_magic + sz_use + sz_owned + sz_flags + sz_used + 2 * sz_links + 2 * sz_time + sz_hp + 64 * 8;
	total = (total + MB_PAGE_SIZE - 1) & ~(MB_PAGE_SIZE - 1);
	char *m = mb_os_reserve(total, MB_PAGE_SIZE);
	if (m)
		mb_os_set_use(m, MB_USE_PAGES);
	if (!m) {
		errno = ENOMEM;
		return -1;
	}
	b->meta_base = m;
	b->meta_bytes = total;
	b->pages = (struct mb_page *)m;                m += sz_pages;
	b->slab_magic = (uint32_t *)m;                 m += (sz_magic + 63) & ~(size_t)63;
	b->usemap = (uint64_t *)m;                     m += (sz_use + 63) & ~(size_t)63;
	b->owned_map = (uint64_t *)m;                  m += (sz_owned + 63) & ~(size_t)63;
	b->pb_flags = (uint8_t *)m;                    m += (sz_flags + 63) & ~(size_t)63;
	b->pb_used = (uint32_t *)m;                    m += (sz_used + 63) & ~(size_t)63;
	b->pb_next = (uint32_t *)m;                    m += (sz_links + 63) & ~(size_t)63;
	b->pb_prev = (uint32_t *)m;                    m += (sz_links + 63) & ~(size_t)63;
	b->pb_freed_at = (uint64_t *)m;               m += (sz_time + 63) & ~(size_t)63;
	b->pb_queued_since = (uint64_t *)m;           m += (sz_time + 63) & ~(size_t)63;
	b->nunits = nunits;
	b->hp_used = (uint16_t *)m;                    m += (nunits * sizeof(uint16_t) + 63) & ~(size_t)63;
	b->hp_flags = (uint8_t *)m;
	b->hp_due = UINT64_MAX;
	b->hp_promote = b->hp_demote = UINT32_MAX;
	b->hp_recheck_at = UINT64_MAX;

	for (int t = 0; t < MB_NTYPES; t++)
		for (unsigned o = 0; o < MB_MAX_ORDER_MAX; o++)
			b->free_area[t][o].head = b->free_area[t][o].tail = MB_NIL;
	/* Every pageblock starts in the global pool, clean, never touched:
	 * the zeroes of the fresh reservation say so, nothing is written. */
	b->nr_global = b->nblocks;
	b->dirty_head = b->dirty_tail = MB_NIL;
	for (int t = 0; t < MB_NTYPES; t++)
		b->freed_head[t] = b->freed_tail[t] = MB_NIL;
	b->oldest = UINT64_MAX;
	b->tails_oldest = UINT64_MAX;
	b->release = mb_os_release;
	return 0;
}

int mb_buddy_meta_spans(const struct mb_buddy *b, uintptr_t lo[3], uintptr_t hi[3])
{
	size_t pages = __atomic_load_n(&b->pb_high, __ATOMIC_RELAXED) << b->pb_order;
	uintptr_t end = (uintptr_t)b->meta_base + b->meta_bytes;
	lo[0] = (uintptr_t)b->pages;
	hi[0] = (uintptr_t)(b->pages + pages);
	lo[1] = (uintptr_t)b->slab_magic;
	hi[1] = (uintptr_t)(b->slab_magic + pages);
	lo[2] = (uintptr_t)b->usemap;
	hi[2] = end;
	return 3;
}

void mb_buddy_destroy(struct mb_buddy *b)
{
	if (b->meta_base)
		mb_os_unreserve(b->meta_base, b->meta_bytes);
	memset(b, 0, sizeof(*b));
}
