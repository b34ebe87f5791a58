#include "config.h"
#include "heap.h"
#include "options.h"
#include "region.h"
#include "alloc.h"
#include "classify.h"
#include "report.h"
#include "stats.h"
#include "tcache.h"

#include <sched.h>
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
