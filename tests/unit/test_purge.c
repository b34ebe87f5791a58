/* Memory return (purge.c) over a heap of its own, with no purge thread:
 * the way a program's slow paths call it (mb_purge_maybe() without a
 * thread is mb_purge_step()). Idle memory goes back once it has been
 * idle for the decay time and not before; a step does a bounded amount of
 * work (one pageblock, or at most MB_PURGE_INLINE_BUDGET pages of free
 * spans) and passes are MB_PURGE_INTERVAL_MS apart; free spans inside
 * pageblocks in use go back without touching their live neighbours; a
 * forced purge takes everything at once; a release the kernel refuses
 * keeps the memory queued, and nothing is lost; a run of whole
 * pageblocks taken clean while freed memory waits releases as much at
 * once, and growth of any kind as much as has been idle 10 ms, at once;
 * free pages of the types classification sets sites apart in wait
 * a quarter of the decay; a pageblock the program keeps taking pieces
 * from waits a purge period. The buddy checker runs after every step. Time
 * is the real clock (mb_now_ms): the tests sleep through decay times of a
 * fraction of a second. */
#include "config.h"
#include "harness.h"
#include "background.h"
#include "large.h"
#include "purge.h"
#include "reclaim_type.h"

#include <sys/mman.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define PAGE MB_PAGE_SIZE
#define DECAY 200

static struct mb_buddy *const B = &mb_heap.buddy;

static void *take(size_t bytes, int fill)
{
	void *p = mb_large_alloc(bytes, 0, MB_KERNRCLM, 0);
	ASSERT_NE(p, NULL);
	memset(p, fill, bytes);
	ASSERT_BUDDY(B);
	return p;
}

static void give(void *p)
{
	mb_large_free(p, &B->pages[mb_buddy_page_index(B, p)]);
	ASSERT_BUDDY(B);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Sleep until mb_now_ms() reaches `when`. */
static void wait_until(uint64_t when)
{
	ASSERT_NE(when, UINT64_MAX);
	while (mb_now_ms() < when)
		sleep_ms(2);
}

static size_t released_pages(void)
{
	return mb_heap.released_bytes / PAGE;
}

/* One step as a slow path takes it; returns the pages it released. */
static size_t step(void)
{
	size_t before = released_pages();
	mb_purge_step(mb_purge_next_due());
	ASSERT_BUDDY(B);
	return released_pages() - before;
}

TEST(nothing_queued)
{
	test_heap_setup(32 * MiB, MB_MAX_ORDER_DEFAULT, DECAY);
	ASSERT_EQ(mb_purge_next_due(), UINT64_MAX);
	ASSERT_EQ(step(), 0);
	ASSERT_EQ(mb_purge(0), 0);
	ASSERT_EQ(mb_purge(1), 0);
	ASSERT_EQ(mb_purge_settle(), 0);
	/* Allocated and never freed: nothing to return either. */
	void *p = take(8 * MiB, 1);
	ASSERT_EQ(mb_purge_next_due(), UINT64_MAX);
	ASSERT_EQ(mb_purge(1), 0);
	ASSERT_EQ(test_resident_pages(p, 8 * MiB), 2048);
	give(p);
	ASSERT_NE(mb_purge_next_due(), UINT64_MAX);
}

/* Two pageblocks freed whole: nothing goes back before the decay time,
 * then one pageblock per step, the steps a pass interval apart. */
TEST(idle_pageblocks_go_back_after_the_decay)
{
	test_heap_setup(32 * MiB, MB_MAX_ORDER_DEFAULT, DECAY);
	unsigned char *p = take(8 * MiB, 1);
	uint64_t freed_at = mb_now_ms();
	give(p);
	ASSERT_EQ(B->nr_dirty, 2);
	uint64_t due = mb_purge_next_due();
	ASSERT_GE(due, freed_at + DECAY);
	ASSERT_LE(due, mb_now_ms() + DECAY);

	/* Before the decay: nothing, however often asked (checked only if
	 * the machine did not stall past the decay meanwhile). */
	size_t n = 0;
	for (int i = 0; i < 5; i++)
		n += step();
	n += mb_purge(0);
	size_t dirty = B->nr_dirty, res = test_resident_pages(p, 8 * MiB);
	if (mb_now_ms() < due) {
		ASSERT_EQ(n, 0);
		ASSERT_EQ(dirty, 2);
		ASSERT_EQ(res, 2048);
	} else {
		SKIP("the machine stalled past the decay time: nothing to check");
	}

	/* Then a step gives one pageblock back... */
	wait_until(due);
	uint64_t t = mb_now_ms();
	ASSERT_EQ(step(), 1024);
	ASSERT_EQ(B->nr_dirty, 1);
	ASSERT_EQ(test_resident_pages(p, 8 * MiB), 1024);
	/* ...and the next pass is an interval later. */
	uint64_t next = mb_purge_next_due();
	ASSERT_GE(next, t + MB_PURGE_INTERVAL_MS);
	n = step();
	if (mb_now_ms() < next)
		ASSERT_EQ(n, 0);
	wait_until(next);
	if (n == 0)
		ASSERT_EQ(step(), 1024);
	ASSERT_EQ(B->nr_dirty, 0);
	ASSERT_EQ(test_resident_pages(p, 8 * MiB), 0);
	ASSERT_EQ(B->count.released_pageblocks, 2);
	ASSERT_EQ(mb_purge_next_due(), UINT64_MAX);
	/* Back in the pool clean: taken again, known to read as zero. */
	ASSERT_EQ(B->nr_global, B->nblocks);
	void *q = mb_large_alloc(8 * MiB, 0, MB_KERNRCLM, 1);
	ASSERT_EQ(q, p);
	ASSERT_EQ(mb_heap.calloc_zero_skips, 1);
	give(q);
}

/* Memory freed and taken again before the decay is not idle: it is not
 * handed back. */
TEST(reused_memory_stays)
{
	test_heap_setup(32 * MiB, MB_MAX_ORDER_DEFAULT, DECAY);
	unsigned char *p = take(4 * MiB, 1);
	give(p);
	ASSERT_EQ(B->nr_dirty, 1);
	unsigned char *q = take(4 * MiB, 2);
	ASSERT_EQ(q, p);
	ASSERT_EQ(B->nr_dirty, 0);
	sleep_ms(DECAY + 20);
	ASSERT_EQ(step(), 0);
	ASSERT_EQ(test_resident_pages(q, 4 * MiB), 1024);
	ASSERT_EQ(q[4 * MiB - 1], 2);
	give(q);
}

/* A pageblock in use, every other 8-page object freed: its 64 free spans
 * go back at most MB_PURGE_INLINE_BUDGET pages per step, and the objects
 * in between keep their pages and their contents. */
TEST(free_spans_of_pageblocks_in_use)
{
	test_heap_setup(32 * MiB, MB_MAX_ORDER_DEFAULT, DECAY);
	enum { N = 128, SPAN = 8 };
	unsigned char *obj[N];
	for (int i = 0; i < N; i++)
		obj[i] = take(SPAN * PAGE, i + 1);
	/* One pageblock, filled. */
	uintptr_t lo = (uintptr_t)obj[0];
	for (int i = 0; i < N; i++)
		if ((uintptr_t)obj[i] < lo)
			lo = (uintptr_t)obj[i];
	ASSERT_EQ((lo - B->base) % (4 * MiB), 0);
	ASSERT_EQ(B->pages_allocated, N * SPAN);
	int freed = 0;
	for (int i = 0; i < N; i++)
		if ((((uintptr_t)obj[i] - lo) / (SPAN * PAGE)) % 2 == 0) {
			give(obj[i]);
			obj[i] = NULL;
			freed++;
		}
	ASSERT_EQ(freed, N / 2);
	ASSERT_EQ(mb_buddy_nr_freed(B), 1); /* queued: an owned pageblock with dirty free pages */
	ASSERT_EQ(B->nr_dirty, 0);

	wait_until(mb_purge_next_due());
	size_t total = 0;
	int steps = 0;
	while (total < (size_t)freed * SPAN) {
		uint64_t next = mb_purge_next_due();
		ASSERT_NE(next, UINT64_MAX);
		wait_until(next);
		size_t n = step();
		ASSERT_GT(n, 0);
		ASSERT_LE(n, MB_PURGE_INLINE_BUDGET);
		total += n;
		ASSERT_LT(++steps, 10);
	}
	ASSERT_EQ(total, (size_t)freed * SPAN);
	ASSERT_GE(steps, freed * SPAN / MB_PURGE_INLINE_BUDGET);
	ASSERT_EQ(mb_buddy_nr_freed(B), 0);
	ASSERT_EQ(mb_purge_next_due(), UINT64_MAX);
	ASSERT_EQ(test_resident_pages((void *)lo, 4 * MiB), (size_t)(N - freed) * SPAN);
	for (int i = 0; i < N; i++)
		if (obj[i]) {
			for (size_t j = 0; j < SPAN * PAGE; j += 511)
				ASSERT_EQ(obj[i][j], i + 1);
			give(obj[i]);
		}
	ASSERT_EQ(B->nr_global, B->nblocks);
}

/* Free pages in a pageblock of a type other than the default (where
 * classification puts the sites it sets apart) wait a quarter of the
 * decay time; the default type's wait all of it. */
TEST(set_apart_types_wait_a_quarter)
{
	test_heap_setup(32 * MiB, MB_MAX_ORDER_DEFAULT, 400);
	mb_purge_init();
	ASSERT_EQ(B->head_start_ms[MB_DEFAULT_TYPE], 0);
	ASSERT_EQ(B->head_start_ms[MB_KERNRCLM], 300);
	ASSERT_EQ(B->head_start_ms[MB_KERNNORCLM], 300);
	/* A KernNoRclm pageblock, filled (nothing borrows from it), and
	 * a UserRclm one; in each a live object and a freed one. */
	const size_t kb = 4 * MiB - 64 * KiB;
	unsigned char *k_freed = mb_large_alloc(kb, 0, MB_KERNNORCLM, 0);
	unsigned char *k_live = mb_large_alloc(64 * KiB, 0, MB_KERNNORCLM, 0);
	unsigned char *u_live = mb_large_alloc(64 * KiB, 0, MB_USERRCLM, 0);
	unsigned char *u_freed = mb_large_alloc(64 * KiB, 0, MB_USERRCLM, 0);
	ASSERT(k_live && k_freed && u_live && u_freed);
	ASSERT_NE(mb_buddy_page_index(B, k_live) >> B->pb_order, mb_buddy_page_index(B, u_live) >> B->pb_order);
	memset(k_live, 1, 64 * KiB);
	memset(k_freed, 2, kb);
	memset(u_live, 3, 64 * KiB);
	memset(u_freed, 4, 64 * KiB);
	uint64_t freed_at = mb_now_ms();
	give(u_freed);
	give(k_freed);
	ASSERT_EQ(mb_buddy_nr_freed(B), 2);
	ASSERT_EQ(B->nr_freed_of[MB_USERRCLM], 1);
	ASSERT_EQ(B->nr_freed_of[MB_KERNNORCLM], 1);
	/* The KernNoRclm pageblock is due first, a quarter decay on. */
	uint64_t due = mb_purge_next_due();
	ASSERT_LE(due, mb_now_ms() + 100);
	size_t n = step();
	if (mb_now_ms() < due)
		ASSERT_EQ(n, 0);
	while (B->nr_freed_of[MB_KERNNORCLM]) {
		wait_until(mb_purge_next_due());
		step();
	}
	ASSERT_EQ(test_resident_pages(k_freed, kb), 0);
	if (mb_now_ms() < freed_at + 400) {
		ASSERT_EQ(test_resident_pages(u_freed, 64 * KiB), 16);
		ASSERT_EQ(B->nr_freed_of[MB_USERRCLM], 1);
		ASSERT_GE(mb_purge_next_due(), freed_at + 400);
	}
	/* Then the UserRclm one, the whole decay on. */
	wait_until(mb_purge_next_due());
	step();
	ASSERT_EQ(test_resident_pages(u_freed, 64 * KiB), 0);
	ASSERT_EQ(mb_buddy_nr_freed(B), 0);
	ASSERT_EQ(test_resident_pages(k_live, 64 * KiB), 16);
	ASSERT_EQ(test_resident_pages(u_live, 64 * KiB), 16);
	ASSERT_EQ(k_live[64 * KiB - 1], 1);
	ASSERT_EQ(u_live[0], 3);
	give(k_live);
	give(u_live);
	ASSERT_EQ(B->nr_global, B->nblocks);
}

/* A pageblock the program keeps taking pieces from is not idle: its free
 * pages stay a purge period (two and a half decay times) past the first
 * free, however long each piece waits, then go back all the same. With a
 * wait of half a decay time (the rule before the decay fell to 100 ms),
 * a working set that came and went in such a pageblock was handed back
 * and faulted in again every 150 ms. */
TEST(dipped_pageblock_waits_a_period)
{
	test_heap_setup(32 * MiB, MB_MAX_ORDER_DEFAULT, 100);
	mb_purge_init();
	ASSERT_EQ(mb_purge_period_ms(), 250);
	ASSERT_EQ(B->max_wait_ms, 250);
	/* One UserRclm pageblock (the default type: no head start), half
	 * of it freed. */
	unsigned char *live = mb_large_alloc(2 * MiB, 0, MB_USERRCLM, 0);
	unsigned char *freed = mb_large_alloc(2 * MiB, 0, MB_USERRCLM, 0);
	ASSERT(live && freed);
	ASSERT_EQ(mb_buddy_page_index(B, live) >> B->pb_order, mb_buddy_page_index(B, freed) >> B->pb_order);
	memset(live, 1, 2 * MiB);
	memset(freed, 2, 2 * MiB);
	uint64_t first = mb_now_ms();
	give(freed);
	ASSERT_EQ(mb_buddy_nr_freed(B), 1);
	/* A piece taken from it and given back every 10 ms. */
	size_t released = 0;
	while (mb_now_ms() < first + 1500 && !released) {
		void *piece = mb_large_alloc(16 * KiB, 0, MB_USERRCLM, 0);
		ASSERT_NE(piece, NULL);
		ASSERT_EQ(mb_buddy_page_index(B, piece) >> B->pb_order, mb_buddy_page_index(B, live) >> B->pb_order);
		memset(piece, 3, 16 * KiB);
		give(piece);
		uint64_t before = mb_now_ms();
		released = step();
		/* A step at 240 ms finds the last piece taken 10 ms before at
		 * most, not a decay time. */
		if (released && before < first + 240)
			FAIL("%zu pages released %llu ms after the first free, while pieces are taken every 10 ms",
			     released, (unsigned long long)(before - first));
		sleep_ms(10);
	}
	ASSERT_GT(released, 0);
	while (mb_buddy_nr_freed(B)) {
		wait_until(mb_purge_next_due());
		step();
	}
	ASSERT_EQ(test_resident_pages(freed, 2 * MiB), 0);
	ASSERT_EQ(test_resident_pages(live, 2 * MiB), 512);
	ASSERT_EQ(live[2 * MiB - 1], 1);
	give(live);
	ASSERT_EQ(B->nr_global, B->nblocks);
}

/* Forced: everything queued goes back at once, idle or not. */
TEST(forced_purge_takes_everything)
{
	test_heap_setup(32 * MiB, MB_MAX_ORDER_DEFAULT, 3600000);
	unsigned char *p = take(12 * MiB, 1), *q = take(64 * KiB, 2), *r = take(64 * KiB, 3);
	give(p);
	give(q);
	ASSERT_EQ(B->nr_dirty, 3);
	ASSERT_EQ(mb_buddy_nr_freed(B), 1);
	size_t n = mb_purge(1);
	ASSERT_BUDDY(B);
	ASSERT_GE(n, 3 * 1024 + 16);
	ASSERT_EQ(B->nr_dirty, 0);
	ASSERT_EQ(mb_buddy_nr_freed(B), 0);
	ASSERT_EQ(test_resident_pages(p, 12 * MiB), 0);
	ASSERT_EQ(test_resident_pages(q, 64 * KiB), 0);
	ASSERT_EQ(test_resident_pages(r, 64 * KiB), 16);
	ASSERT_EQ(mb_purge_next_due(), UINT64_MAX);
	give(r);
	ASSERT_GE(mb_purge(1), 16);
	ASSERT_EQ(B->nr_global, B->nblocks);
	ASSERT_EQ(B->nr_dirty, 0);
}

/* A run of whole pageblocks taken clean while a freed pageblock waits
 * for the decay (it could not take it: a pageblock in use lies between)
 * pays at once for what it took, from what is queued, before the program
 * writes it; a run that reused resident memory, or fewer pages than a
 * pageblock, release nothing. */
TEST(fresh_run_releases_what_waits)
{
	test_heap_setup(32 * MiB, MB_MAX_ORDER_DEFAULT, 3600000);
	unsigned char *a = take(4 * MiB, 1), *piece = take(64 * KiB, 2);
	give(a);
	ASSERT_EQ(B->nr_dirty, 1);
	/* Nothing fresh, or fewer pages than a pageblock: nothing goes. */
	mb_purge_offset_run(B->pb_pages);
	ASSERT_EQ(test_resident_pages(a, 4 * MiB), 1024);
	uint64_t small = B->fresh_pages;
	unsigned char *piece2 = take(64 * KiB, 6);
	ASSERT_EQ(B->fresh_pages - small, 16);
	mb_purge_offset_run(16);
	ASSERT_EQ(test_resident_pages(a, 4 * MiB), 1024);
	uint64_t fresh = B->fresh_pages;
	size_t before = released_pages();
	unsigned char *run = mb_large_alloc(8 * MiB, 0, MB_KERNRCLM, 0);
	ASSERT_NE(run, NULL);
	ASSERT_BUDDY(B);
	ASSERT(run > piece); /* not where a was: the piece is in between */
	ASSERT_EQ(B->fresh_pages - fresh, 2048);
	mb_purge_offset_run(B->fresh_pages - fresh);
	ASSERT_BUDDY(B);
	ASSERT_EQ(released_pages() - before, 1024);
	ASSERT_EQ(test_resident_pages(a, 4 * MiB), 0);
	ASSERT_EQ(B->nr_dirty, 0);
	ASSERT_EQ(piece[0], 2);
	memset(run, 4, 8 * MiB);
	/* Nothing is left queued: the same call again releases nothing. */
	mb_purge_offset_run(2048);
	ASSERT_EQ(released_pages() - before, 1024);
	ASSERT_EQ(test_resident_pages(run, 8 * MiB), 2048);
	give(run);
	/* Taken again, it was resident: no fresh pages, nothing released. */
	fresh = B->fresh_pages;
	unsigned char *again = take(8 * MiB, 3);
	ASSERT_EQ(again, run);
	ASSERT_EQ(B->fresh_pages, fresh);
	give(again);
	give(piece2);
	give(piece);
}

/* The heap grows fresh pages (a run of whole pageblocks, which the free
 * spans of pageblocks in use cannot hold) while memory freed 20 ms ago
 * waits for the decay: the growth is paid with it at once, a budget per
 * call and the next call right after, not one batch per interval. Once
 * nothing idle is left the debt is settled: memory freed afterwards waits
 * for the decay, or for more growth. */
TEST(growth_pays_with_idle_memory_at_once)
{
	test_heap_setup(64 * MiB, MB_MAX_ORDER_DEFAULT, 3600000);
	/* Two pageblocks, each with a live object that keeps it in use. */
	unsigned char *p0 = take(64 * KiB, 1), *a = take(2 * MiB, 2), *b = take(1 * MiB, 3), *c = take(512 * KiB, 4);
	unsigned char *d = take(2 * MiB, 5), *e = take(1 * MiB, 6), *p1 = take(960 * KiB, 7);
	give(a);
	give(b);
	give(d);
	give(e);
	sleep_ms(20);
	uint64_t fresh = B->fresh_pages;
	size_t before = released_pages();
	unsigned char *g = mb_large_alloc(8 * MiB, 0, MB_KERNNORCLM, 0);
	ASSERT_NE(g, NULL);
	ASSERT_BUDDY(B);
	ASSERT_EQ(B->fresh_pages - fresh, 2048);
	mb_purge_offset();
	mb_purge_offset();
	ASSERT_BUDDY(B);
	ASSERT_EQ(released_pages() - before, 1536);
	ASSERT_EQ(test_resident_pages(a, 2 * MiB) + test_resident_pages(b, 1 * MiB), 0);
	ASSERT_EQ(test_resident_pages(d, 2 * MiB) + test_resident_pages(e, 1 * MiB), 0);
	give(c);
	sleep_ms(20);
	mb_purge_offset();
	ASSERT_EQ(released_pages() - before, 1536);
	ASSERT_EQ(test_resident_pages(c, 512 * KiB), 128);
	ASSERT_EQ(p0[0] + p1[0], 8);
	give(g);
	give(p1);
	give(p0);
}

/* Idle memory in more spans than one batch holds (MB_PURGE_RANGES): one
 * call pays the debt with all of them, batch after batch. */
TEST(growth_pays_batch_after_batch)
{
	test_heap_setup(64 * MiB, MB_MAX_ORDER_DEFAULT, 3600000);
	enum { SPANS = MB_PURGE_RANGES + MB_PURGE_RANGES / 2 };
	unsigned char *kept[SPANS], *freed[SPANS];
	for (int i = 0; i < SPANS; i++) {
		kept[i] = take(64 * KiB, 1);
		freed[i] = take(64 * KiB, 2);
	}
	for (int i = 0; i < SPANS; i++)
		give(freed[i]);
	sleep_ms(20);
	uint64_t fresh = B->fresh_pages;
	size_t before = released_pages();
	unsigned char *g = mb_large_alloc(8 * MiB, 0, MB_KERNNORCLM, 0);
	ASSERT_NE(g, NULL);
	ASSERT_EQ(B->fresh_pages - fresh, 2048);
	mb_purge_offset();
	ASSERT_BUDDY(B);
	ASSERT_GE(released_pages() - before, SPANS * 16);
	for (int i = 0; i < SPANS; i++) {
		ASSERT_EQ(test_resident_pages(freed[i], 64 * KiB), 0);
		ASSERT_EQ(test_resident_pages(kept[i], 64 * KiB), 16);
	}
	give(g);
	for (int i = 0; i < SPANS; i++)
		give(kept[i]);
}

/* The kernel refuses (fault injected): the memory stays queued and
 * resident, the failure is counted, and it goes back once the kernel
 * takes it. */
TEST(refused_release_stays_queued)
{
	test_heap_setup(32 * MiB, MB_MAX_ORDER_DEFAULT, 3600000);
	unsigned char *p = take(8 * MiB, 7);
	give(p);
	mb_os_inject_fault(MB_FAULT_RELEASE, 0, 1000);
	ASSERT_EQ(mb_purge(1), 0);
	ASSERT_BUDDY(B);
	mb_os_inject_fault(MB_FAULT_RELEASE, 0, 0);
	ASSERT_GE(B->count.release_failures, 1);
	ASSERT_EQ(B->nr_dirty, 2);
	ASSERT_EQ(B->nr_global, B->nblocks);
	ASSERT_EQ(test_resident_pages(p, 8 * MiB), 2048);
	ASSERT_EQ(p[8 * MiB - 1], 7);
	ASSERT_EQ(mb_purge(1), 2048);
	ASSERT_BUDDY(B);
	ASSERT_EQ(B->nr_dirty, 0);
	ASSERT_EQ(test_resident_pages(p, 8 * MiB), 0);
}

/* Without a purge thread, mb_purge_maybe() is the bounded step itself. */
TEST(maybe_steps_without_a_thread)
{
	test_heap_setup(32 * MiB, MB_MAX_ORDER_DEFAULT, 50);
	ASSERT_EQ(mb_opt.background, 0);
	unsigned char *p = take(8 * MiB, 1);
	give(p);
	uint64_t due = mb_purge_next_due();
	mb_purge_maybe();
	if (mb_now_ms() < due)
		ASSERT_EQ(B->nr_dirty, 2);
	wait_until(due);
	mb_purge_maybe();
	ASSERT_BUDDY(B);
	ASSERT_LE(B->nr_dirty, 1); /* at most one pageblock per step */
	if (B->nr_dirty) {
		wait_until(mb_purge_next_due());
		mb_purge_maybe();
	}
	ASSERT_BUDDY(B);
	ASSERT_EQ(B->nr_dirty, 0);
	ASSERT_EQ(test_resident_pages(p, 8 * MiB), 0);
}
