/* Huge pages (buddy.h, purge.c, MBUDDY_HUGEPAGES) over a heap of its own,
 * with no purge thread. A dense heap (long-lived objects filling
 * pageblocks) gets huge pages within the region once its units have
 * stayed dense for the settle time; a sparse one gets none and keeps its
 * resident set; a purge keeps a dense huge unit whole, demotes it once it
 * falls sparse, and hands a wholly free one back; refused collapses are
 * asked again once and then no more; units mostly unwritten wait for
 * their pages. The kernel must allow huge pages:
 * each test is skipped where THP is "never" or the collapse is refused
 * as unsupported. */
#include "config.h"
#include "harness.h"
#include "large.h"
#include "purge.h"

#include <sys/mman.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define OBJ (64 * KiB)
#define NOBJ 256 /* 16 MiB: four pageblocks, eight units */

static struct mb_buddy *const B = &mb_heap.buddy;
static void *obj[NOBJ];

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* AnonHugePages (or Rss) of the heap region, in bytes, from smaps. */
static size_t region_kib(const char *field)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	ASSERT_NE(f, NULL);
	char line[512];
	int in = 0;
	size_t total = 0, fl = strlen(field);
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = lo < B->base + (B->npages << MB_PAGE_SHIFT) && hi > B->base;
			continue;
		}
		if (in && strncmp(line, field, fl) == 0 && line[fl] == ':')
			total += strtoul(line + fl + 1, NULL, 10);
	}
	fclose(f);
	return total << 10;
}

static size_t anon_huge(void) { return region_kib("AnonHugePages"); }
static size_t region_rss(void) { return region_kib("Rss"); }

/* A heap in auto mode, or the test is skipped. */
static void setup(uint64_t decay_ms)
{
	test_heap_setup_huge(64 * MiB, MB_MAX_ORDER_DEFAULT, decay_ms, MB_HUGE_AUTO);
	if (mb_heap.hugepages == MB_HUGE_NEVER)
		SKIP("transparent huge pages are off here (THP \"never\" or unavailable)");
	ASSERT_EQ(B->hp_on, 1);
	ASSERT_EQ(B->nunits, (size_t)64 * MiB / (2 * MiB));
}

static void fill(size_t n)
{
	for (size_t i = 0; i < n; i++) {
		obj[i] = mb_large_alloc(OBJ, 0, MB_KERNNORCLM, 0);
		ASSERT_NE(obj[i], NULL);
		memset(obj[i], (int)i + 1, OBJ);
	}
	ASSERT_BUDDY(B);
}

static void give(size_t i)
{
	mb_large_free(obj[i], &B->pages[mb_buddy_page_index(B, obj[i])]);
	obj[i] = NULL;
}

/* Past the settle time, then a purge pass as the purge thread makes it. */
static void settle_and_purge(void)
{
	sleep_ms(MB_HP_SETTLE_MS + 20);
	mb_purge(0);
	ASSERT_BUDDY(B);
	if (!B->hp_on)
		SKIP("the kernel refuses MADV_COLLAPSE here (EINVAL/EPERM/ENOSYS)");
}

/* Dense: every unit collapsed, the region's memory in huge pages, and
 * the resident set no larger than the data. The contents survive. */
TEST(dense_heap_gets_huge_pages)
{
	setup(10000);
	size_t rss0 = region_rss();
	fill(NOBJ);
	ASSERT_EQ(anon_huge(), 0);
	ASSERT_EQ(B->hp_pending, 8);
	settle_and_purge();
	test_note("collapses %llu, refused %llu, AnonHugePages %zu KiB of %zu KiB",
		  (unsigned long long)B->count.hp_asked, (unsigned long long)B->count.hp_refused, anon_huge() >> 10,
		  (size_t)NOBJ * OBJ >> 10);
	if (B->count.hp_collapsed == 0)
		SKIP("every collapse was refused (%llu): no huge pages to be had now",
		     (unsigned long long)B->count.hp_refused);
	ASSERT_GT(anon_huge(), 0);
	ASSERT_EQ(anon_huge(), (size_t)B->count.hp_collapsed * 2 * MiB);
	ASSERT_LE(region_rss(), rss0 + (size_t)NOBJ * OBJ);
	for (size_t i = 0; i < NOBJ; i++)
		ASSERT_EQ(((unsigned char *)obj[i])[OBJ - 1], (unsigned char)(i + 1));
	ASSERT_EQ(B->hp_pending, 0);
	ASSERT_EQ(B->hp_due, UINT64_MAX);
}

/* Sparse: objects freed before the settle time leave each unit half
 * used: nothing is collapsed, nothing is made resident. */
TEST(sparse_heap_gets_none)
{
	setup(10000);
	fill(NOBJ);
	for (size_t i = 0; i < NOBJ; i += 2)
		give(i);
	ASSERT_BUDDY(B);
	size_t rss = region_rss();
	settle_and_purge();
	ASSERT_EQ(B->count.hp_asked, 0);
	ASSERT_EQ(anon_huge(), 0);
	ASSERT_LE(region_rss(), rss);
	ASSERT_EQ(B->hp_pending, 0);
}

/* A few frees leave a huge unit dense: the purge keeps it whole. More
 * make it sparse: it is demoted and its free pages go back. Freed whole,
 * its memory goes back whole. */
TEST(purge_keeps_dense_huge_units)
{
	setup(0);
	fill(64); /* one pageblock, two units */
	settle_and_purge();
	if (B->count.hp_collapsed < 2)
		SKIP("the kernel collapsed %llu of 2 units", (unsigned long long)B->count.hp_collapsed);
	ASSERT_EQ(anon_huge(), 4 * MiB);
	give(0); /* unit 0: 496 of 512 pages */
	sleep_ms(MB_PURGE_INTERVAL_MS + 40);
	mb_purge(0);
	ASSERT_BUDDY(B);
	ASSERT_GT(B->count.hp_kept_pages, 0);
	ASSERT_EQ(anon_huge(), 4 * MiB);
	for (size_t i = 1; i < 12; i++) /* unit 0: 320 pages, below the demote mark */
		give(i);
	sleep_ms(MB_PURGE_INTERVAL_MS + 40);
	mb_purge(0);
	ASSERT_BUDDY(B);
	ASSERT_EQ(B->count.hp_demoted, 1);
	ASSERT_EQ(anon_huge(), 2 * MiB);
	size_t rss = region_rss();
	for (size_t i = 12; i < 64; i++)
		give(i);
	sleep_ms(MB_PURGE_INTERVAL_MS + 40);
	mb_purge(0);
	ASSERT_BUDDY(B);
	ASSERT_EQ(anon_huge(), 0);
	ASSERT_LT(region_rss(), rss - 2 * MiB);
}

/* The collapses take at most 2% of the run: a pass that took d ms puts
 * the next off to 49 d after its end, and the purge's next due time says
 * so. Sixteen dense units: the first pass collapses eight; while the wait
 * lasts (made a minute here, so that a slow machine cannot outlive it)
 * a purge collapses none; once it is over, the other eight. */
TEST(collapses_wait_fifty_times_their_cost)
{
	setup(10000);
	static void *more[2 * NOBJ];
	for (size_t i = 0; i < 2 * NOBJ; i++) {
		more[i] = mb_large_alloc(OBJ, 0, MB_KERNNORCLM, 0);
		ASSERT_NE(more[i], NULL);
		memset(more[i], (int)i + 1, OBJ);
	}
	ASSERT_EQ(B->hp_pending, 16);
	sleep_ms(MB_HP_SETTLE_MS + 20);
	uint64_t t0 = mb_now_ms(), us0 = now_us();
	mb_purge(0);
	uint64_t t1 = mb_now_ms(), us1 = now_us();
	ASSERT_BUDDY(B);
	if (!B->hp_on || B->count.hp_collapsed < 8)
		SKIP("the kernel collapsed %llu of 8 units", (unsigned long long)B->count.hp_collapsed);
	/* The wait is 49 times the pass: after one of a few microseconds (a
	 * kernel that collapses with no copy) the purge may look again past
	 * it. A purge of a millisecond or more leaves a wait of 49 ms at
	 * least, which the second pass could not have outlived. */
	if (B->count.hp_asked != 8 && us1 - us0 < 1000)
		SKIP("the kernel collapsed 16 units in %llu us: no wait to see", (unsigned long long)(us1 - us0));
	/* t0 and t1 are on the coarse clock: a tick (up to 10 ms) either side. */
	uint64_t after = mb_heap.hp_after_ms;
	ASSERT_GT(after, t0);
	ASSERT_LE(after, t1 + 49 * (t1 - t0 + 10) + 1);
	mb_heap.hp_after_ms = mb_now_ms() + 60000;
	ASSERT_GE(mb_purge_next_due(), mb_heap.hp_after_ms);
	mb_purge(0);
	ASSERT_EQ(B->count.hp_asked, 8);
	ASSERT_EQ(B->hp_pending, 8);
	mb_heap.hp_after_ms = mb_now_ms();
	mb_purge(0);
	ASSERT_BUDDY(B);
	ASSERT_EQ(B->count.hp_asked, 16);
	ASSERT_EQ(B->hp_pending, 0);
	for (size_t i = 0; i < 2 * NOBJ; i++) {
		ASSERT_EQ(((unsigned char *)more[i])[OBJ - 1], (unsigned char)(i + 1));
		mb_large_free(more[i], &B->pages[mb_buddy_page_index(B, more[i])]);
	}
}

/* Refused: asked again once after the settle time, then never, and the
 * units stay on 4 KiB pages. */
TEST(refused_collapse_asked_twice_then_no_more)
{
	setup(10000);
	mb_os_inject_fault(MB_FAULT_COLLAPSE, 0, 1000);
	fill(64);
	settle_and_purge();
	ASSERT_EQ(B->count.hp_asked, 2);
	ASSERT_EQ(B->count.hp_refused, 2);
	ASSERT_EQ(B->hp_pending, 2);
	settle_and_purge();
	ASSERT_EQ(B->count.hp_asked, 4);
	ASSERT_EQ(B->count.hp_refused, 4);
	ASSERT_EQ(B->hp_pending, 0);
	ASSERT_EQ(B->hp_due, UINT64_MAX);
	/* More allocations in those units: no candidacy. */
	give(3);
	obj[3] = mb_large_alloc(OBJ, 0, MB_KERNNORCLM, 0);
	ASSERT_NE(obj[3], NULL);
	ASSERT_EQ(B->hp_pending, 0);
	mb_os_inject_fault(MB_FAULT_COLLAPSE, 0, 0);
	ASSERT_EQ(anon_huge(), 0);
}

/* Objects allocated but written on one page in sixteen: the units are
 * dense, but a collapse would make the other fifteen resident. They are
 * not collapsed, nothing is made resident, and they are looked at again
 * after the recheck wait (made short here), which doubles while they
 * stay unwritten. Once the program has written them, they are
 * collapsed. */
TEST(unwritten_units_wait_for_their_pages)
{
	setup(10000);
	B->hp_recheck_min_ms = B->hp_recheck_ms = 100;
	for (size_t i = 0; i < 64; i++) { /* one pageblock, two units */
		obj[i] = mb_large_alloc(OBJ, 0, MB_KERNNORCLM, 0);
		ASSERT_NE(obj[i], NULL);
		memset(obj[i], (int)i + 1, 4 * KiB);
	}
	ASSERT_EQ(B->hp_pending, 2);
	size_t rss = region_rss();
	mb_heap.hp_after_ms = 0;
	settle_and_purge();
	ASSERT_EQ(B->count.hp_asked, 0);
	ASSERT_EQ(B->count.hp_unwritten, 2);
	ASSERT_EQ(B->hp_nr_unwritten, 2);
	ASSERT_EQ(anon_huge(), 0);
	ASSERT_LE(region_rss(), rss + 64 * KiB);
	ASSERT_NE(B->hp_recheck_at, UINT64_MAX);
	ASSERT_EQ(B->hp_due, B->hp_recheck_at);
	/* Still unwritten at the next look: put off again, for twice as long. */
	sleep_ms(100 + 20);
	mb_heap.hp_after_ms = 0;
	mb_purge(0);
	ASSERT_BUDDY(B);
	ASSERT_EQ(B->count.hp_asked, 0);
	ASSERT_EQ(B->count.hp_unwritten, 4);
	ASSERT_EQ(B->hp_recheck_ms, 200);
	ASSERT_EQ(anon_huge(), 0);
	/* Written: collapsed at the next look, not before. */
	for (size_t i = 0; i < 64; i++)
		memset(obj[i], (int)i + 1, OBJ);
	mb_heap.hp_after_ms = 0;
	mb_purge(0);
	ASSERT_EQ(B->count.hp_asked, 0);
	sleep_ms(200 + 20);
	mb_heap.hp_after_ms = 0;
	mb_purge(0);
	ASSERT_BUDDY(B);
	if (B->count.hp_collapsed < 2)
		SKIP("the kernel collapsed %llu of 2 units", (unsigned long long)B->count.hp_collapsed);
	ASSERT_EQ(B->count.hp_asked, 2);
	ASSERT_EQ(anon_huge(), 4 * MiB);
	ASSERT_EQ(B->hp_nr_unwritten, 0);
	ASSERT_EQ(B->hp_due, UINT64_MAX);
	for (size_t i = 0; i < 64; i++)
		ASSERT_EQ(((unsigned char *)obj[i])[OBJ - 1], (unsigned char)(i + 1));
	/* A unit turning dense: the heap grows, the wait is short again. */
	B->hp_recheck_ms = 400;
	for (size_t i = 64; i < 96; i++) {
		obj[i] = mb_large_alloc(OBJ, 0, MB_KERNNORCLM, 0);
		ASSERT_NE(obj[i], NULL);
	}
	ASSERT_EQ(B->hp_recheck_ms, 100);
}

/* MBUDDY_HUGEPAGES=never: nothing counted, nothing collapsed. */
TEST(never_does_nothing)
{
	test_heap_setup_huge(64 * MiB, MB_MAX_ORDER_DEFAULT, 10000, MB_HUGE_NEVER);
	ASSERT_EQ(B->hp_on, 0);
	fill(NOBJ);
	ASSERT_EQ(B->hp_pending, 0);
	ASSERT_EQ(mb_purge_next_due(), UINT64_MAX);
	sleep_ms(MB_HP_SETTLE_MS + 20);
	mb_purge(0);
	ASSERT_EQ(B->count.hp_asked, 0);
	ASSERT_EQ(anon_huge(), 0);
}
