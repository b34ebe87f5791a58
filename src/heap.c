#include "config.h"
#include "heap.h"
#include "options.h"
#include "region.h"

#include <stddef.h>
#include <time.h>

/* Every free reads base, npages and pages (the page look-up): one line,
 * which nothing written after set-up shares (compiler.h). */
_Static_assert(offsetof(struct mb_heap, buddy) % MB_CACHE_LINE == 0 &&
		       offsetof(struct mb_buddy, pages) + sizeof(void *) <= MB_CACHE_LINE &&
		       offsetof(struct mb_buddy, dirty_head) >= MB_CACHE_LINE,
	       "the page look-up's fields on a line of their own");

/* Recursive: fork's prepare handlers all run in the forking thread, and one
 * registered after ours may allocate while ours holds the lock. */
struct mb_heap mb_heap = { .lock = MB_LOCK_INITIALIZER_RECURSIVE("heap") };
uint64_t mb_alloc_clock;

uint64_t mb_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t mb_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t mb_cost_wait_ms(uint64_t took_us)
{
	return (took_us * 49 + 999) / 1000;
}

void mb_heap_fork_child(void)
{
	mb_lock_after_fork_child(&mb_heap.lock, 1);
	/* A child is a new process: young, as far as the purge thread goes. */
	mb_heap.started_ms = mb_now_ms();
}

/* MBUDDY_HUGEPAGES against what the system allows. auto: dense units are
 * collapsed (MADV_COLLAPSE changes no mapping's flags, so the region stays
 * one mapping and khugepaged leaves it alone); always: the whole region
 * is advised MADV_HUGEPAGE too, so that faults take huge pages; never, or
 * a system with THP off: nothing, as before huge pages were known. */
static void huge_setup(struct mb_buddy *b, void *base, size_t size)
{
	mb_heap.thp = mb_os_thp_enabled();
	mb_heap.hugepages = mb_opt.hugepages;
	if (mb_heap.thp <= MB_THP_NEVER || !b->nunits)
		mb_heap.hugepages = MB_HUGE_NEVER;
	if (mb_heap.hugepages == MB_HUGE_NEVER)
		return;
	if (mb_heap.hugepages == MB_HUGE_ALWAYS && mb_os_hugepage(base, size) != 0)
		mb_heap.hugepages = MB_HUGE_AUTO;
	b->hp_all = mb_heap.hugepages == MB_HUGE_ALWAYS || mb_heap.thp == MB_THP_ALWAYS;
	b->hp_promote = MB_HP_PROMOTE;
	b->hp_demote = MB_HP_DEMOTE;
	b->hp_settle_ms = MB_HP_SETTLE_MS;
	b->hp_resident = MB_HP_RESIDENT;
	b->hp_recheck_min_ms = b->hp_recheck_ms = MB_HP_RECHECK_MS;
	b->hp_on = 1;
}

int mb_heap_init(void)
{
	size_t pb_bytes = (size_t)1 << (mb_opt.max_order - 1 + MB_PAGE_SHIFT);
	size_t got;
	void *base = mb_os_reserve_region(mb_opt.heap_size, 2 * pb_bytes, pb_bytes, &got);
	if (base)
		mb_os_set_use(base, MB_USE_HEAP);
	if (!base) {
		mb_warn("cannot reserve a heap region of %zu MiB or any smaller size; every allocation will fail",
			mb_opt.heap_size >> 20);
		return -1;
	}
	if (got < mb_opt.heap_size)
		mb_warn("reserved a heap of %zu MiB, less than the %zu MiB asked for", got >> 20,
			mb_opt.heap_size >> 20);
	if (mb_buddy_init(&mb_heap.buddy, base, got, mb_opt.max_order) != 0) {
		mb_os_unreserve(base, got);
		mb_warn("cannot reserve the page metadata for a %zu MiB heap", got >> 20);
		return -1;
	}
	mb_heap.region_bytes = got;
	mb_heap.buddy.clock = mb_heap.started_ms = mb_now_ms();
	huge_setup(&mb_heap.buddy, base, got);
	return 0;
}
