#include "config.h"
#include "heap.h"
#include "metadata.h"
#include "options.h"
#include "region.h"
#include "alloc.h"
#include "classify.h"
#include "report.h"
#include "slab.h"
#include "stats.h"
#include "tcache.h"

#include <errno.h>
#include <string.h>
#include <time.h>

/* Recursive: fork's prepare handlers all run in the forking thread, and one
 * registered after ours may allocate while ours holds the lock. */
struct mb_heap mb_heap = { .lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP };
volatile int mb_heap_state;
static __thread int init_owner MB_TLS;
uint64_t mb_alloc_clock;


uint64_t mb_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Every allocator lock is taken before fork, in one order (sites, then the
 * heap), so the child starts with none held by a thread it does not have. */
static void atfork_prepare(void)
{
	mb_classify_lock();
	mb_heap_lock();
}

static void atfork_parent(void)
{
	mb_heap_unlock();
	mb_classify_unlock();
}

void mb_mutex_init_recursive(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
}

static void atfork_child(void)
{
	mb_mutex_init_recursive(&mb_heap.lock);
	mb_classify_after_fork_child();
	mb_stats_after_fork_child();
	mb_tcache_after_fork_child();
}

static int heap_init(void)
{
	mb_options_init();
	mb_sizeclass_init();
	size_t pb_bytes = (size_t)1 << (mb_opt.max_order - 1 + MB_PAGE_SHIFT);
	size_t got;
	void *base = mb_os_reserve_region(mb_opt.heap_size, 2 * pb_bytes, pb_bytes, &got);
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
	if (mb_opt.check) {
		mb_canary_init();
		mb_canaries = 1;
	}
	mb_heap.buddy.clock = mb_now_ms();
	mb_tcache_init_key();
	return 0;
}

int mb_heap_ensure(void)
{
	int s = __atomic_load_n(&mb_heap_state, __ATOMIC_ACQUIRE);
	if (__builtin_expect(s == 2, 1))
		return 0;
	if (s == 3)
		return -1;
	int expected = 0;
	if (__atomic_compare_exchange_n(&mb_heap_state, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		init_owner = 1;
		int rc = heap_init();
		__atomic_store_n(&mb_heap_state, rc == 0 ? 2 : 3, __ATOMIC_RELEASE);
		init_owner = 0;
		if (rc == 0) {
			/* These may allocate, so they run once the heap is ready. */
			pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
			mb_stats_init();
			mb_classify_init();
		}
		return rc;
	}
	if (init_owner)
		return -1; /* an allocation from inside our own initialisation */
	while ((s = __atomic_load_n(&mb_heap_state, __ATOMIC_ACQUIRE)) == 1)
		sched_yield();
	return s == 2 ? 0 : -1;
}

void mb_purge_locked(int force)
{
	struct mb_buddy *b = &mb_heap.buddy;
	uint64_t now = mb_now_ms();
	b->clock = now;
	uint64_t idle_since = force ? UINT64_MAX : (now > mb_opt.decay_ms ? now - mb_opt.decay_ms : 0);
	size_t n = mb_buddy_release(b, idle_since, SIZE_MAX);
	mb_heap.released_bytes += (uint64_t)n * (b->pb_pages << MB_PAGE_SHIFT);
	mb_heap.released_bytes += mb_buddy_release_free_blocks(b, MB_PURGE_MIN_ORDER, force) << MB_PAGE_SHIFT;
	mb_heap.released_bytes += mb_slab_purge_locked() << MB_PAGE_SHIFT;
	int failed;
	mb_meta_release(&failed); /* records of slabs that are gone */
	if (failed)
		b->count.release_failures++;
}

void mb_purge_maybe_locked(void)
{
	uint64_t now = mb_now_ms();
	mb_heap.buddy.clock = now;
	if (now < mb_heap.next_purge_ms)
		return;
	mb_heap.next_purge_ms = now + mb_opt.decay_ms / 2;
	mb_purge_locked(0);
}

void *mb_large_alloc(size_t bytes, size_t align, int key, int zero)
{
	struct mb_buddy *b = &mb_heap.buddy;
	int type = mb_key_type(key); /* pages have no lanes */
	if (bytes > mb_heap.region_bytes || align > mb_heap.region_bytes) {
		errno = ENOMEM;
		return NULL;
	}
	size_t npages = (bytes + MB_PAGE_SIZE - 1) >> MB_PAGE_SHIFT;
	size_t apages = align > MB_PAGE_SIZE ? align >> MB_PAGE_SHIFT : 1;
	if (npages == 0)
		npages = 1;
	int zeroed = 0;
	long idx;

	mb_heap_lock();
	if (apages <= 1 || (npages > b->pb_pages && apages <= b->pb_pages)) {
		/* Buddy blocks are aligned to their order, runs to a pageblock. */
		idx = mb_buddy_alloc(b, npages, type, &zeroed);
	} else if (npages <= b->pb_pages && apages <= b->pb_pages) {
		idx = mb_buddy_alloc(b, npages > apages ? npages : apages, type, &zeroed);
		if (idx >= 0)
			mb_buddy_resize(b, (size_t)idx, npages);
	} else {
		/* Alignment above a pageblock: over-allocate, then cut the
		 * misaligned head off. */
		idx = mb_buddy_alloc(b, npages + apages, type, &zeroed);
		if (idx >= 0) {
			/* The region is only pageblock-aligned: align the address. */
			uintptr_t addr = (uintptr_t)mb_buddy_page_addr(b, (size_t)idx);
			uintptr_t aligned = (addr + align - 1) & ~(uintptr_t)(align - 1);
			size_t start = (size_t)idx + ((aligned - addr) >> MB_PAGE_SHIFT);
			if (start != (size_t)idx) {
				mb_buddy_split(b, (size_t)idx, start);
				mb_buddy_free(b, (size_t)idx);
				idx = (long)start;
			}
			mb_buddy_resize(b, (size_t)idx, npages);
		}
	}
	if (idx < 0) {
		mb_purge_maybe_locked();
		mb_heap_unlock();
		errno = ENOMEM;
		return NULL;
	}
	struct mb_page *m = &b->pages[idx];
	m->kind = MB_KIND_LARGE;
	m->user16 = 0;
	m->user.u64 = bytes;
	mb_heap.large_objects++;
	mb_heap.counts.mallocs[type]++;
	mb_heap.counts.alloc_bytes += npages << MB_PAGE_SHIFT;
	mb_heap.counts.live_requested += (int64_t)bytes;
	mb_alloc_clock_advance(npages << MB_PAGE_SHIFT);
	if (zero && zeroed)
		mb_heap.calloc_zero_skips++;
	mb_purge_maybe_locked();
	mb_heap_unlock();

	void *p = mb_buddy_page_addr(b, (size_t)idx);
	if (zero && !zeroed)
		memset(p, 0, bytes);
	return p;
}

void mb_large_free(void *p, struct mb_page *m)
{
	struct mb_buddy *b = &mb_heap.buddy;
	mb_heap_lock();
	/* Checked under the lock, so two racing frees cannot both pass. */
	if (m->state != MB_PG_ALLOC || m->kind != MB_KIND_LARGE) {
		mb_heap_unlock();
		mb_fatal_pointer("free", "double free or invalid pointer", p);
	}
	size_t idx = (size_t)(m - b->pages);
	mb_heap.large_objects--;
	mb_heap.counts.frees++;
	mb_heap.counts.freed_bytes += (size_t)m->npages << MB_PAGE_SHIFT;
	mb_heap.counts.live_requested -= (int64_t)m->user.u64;
	m->kind = MB_KIND_NONE;
	m->user16 = 0;
	m->user.u64 = 0;
	mb_buddy_free(b, idx);
	mb_purge_maybe_locked();
	mb_heap_unlock();
}
