/* The process-wide heap: one typed buddy over the reserved region, the
 * lock that serialises it and every structure built on it, the heap-wide
 * counters and the clocks. */
#ifndef MB_HEAP_H
#define MB_HEAP_H

#include <pthread.h>
#include <stdint.h>

#include "buddy.h"
#include "lockstat.h"

/* What a page of the region holds, in mb_page.kind. */
enum mb_page_kind {
	MB_KIND_NONE = 0,
	MB_KIND_SLAB = 1,  /* every page of a slab; user.ptr = its mb_slab,
			    * sclass its class, user16 the page's index in
			    * the slab, user32 its owner tag (slab.h) */
	MB_KIND_LARGE = 2, /* first page of a page-granular object (large.h) */
};

/* Counters kept per thread and folded into the heap's on thread exit. Live
 * bytes are alloc_bytes - freed_bytes, so each fast path adds to one. */
struct mb_counts {
	uint64_t mallocs[MB_NKEYS];  /* allocations served, per slab key (large: per type) */
	uint64_t frees;
	uint64_t alloc_bytes;        /* usable bytes handed out, ever */
	uint64_t freed_bytes;        /* usable bytes given back, ever */
	int64_t live_requested;      /* bytes the program asked for, large objects */
};

/* Add v to a counter of mb_heap.counts, which any thread may update. */
#define mb_counts_add(field, v) __atomic_fetch_add(&(field), (v), __ATOMIC_RELAXED)

struct mb_heap {
	struct mb_lock lock;
	struct mb_buddy buddy;       /* its set-up fields on lines of their own */
	/* Set up once; read where a pointer may be glibc's. */
	MB_LINE_ALIGNED size_t region_bytes;
	uint64_t started_ms;         /* mb_now_ms() when the heap was set up */
	MB_LINE_ALIGNED struct mb_counts counts; /* folded from exited threads, cache-less
						  * paths and large objects; written
						  * atomically */
	uint64_t slab_pages;         /* pages held by slabs */
	uint64_t large_objects;
	uint64_t released_bytes;     /* handed back to the kernel */
	uint64_t calloc_zero_skips;  /* calloc memsets avoided on fresh pages */
	uint64_t inplace_grows, inplace_shrinks;
	int hugepages;               /* the MBUDDY_HUGEPAGES mode in force (options.h):
				      * never where the system has no THP, or
				      * it is set to never */
	int thp;                     /* the system's setting, enum mb_os_thp */
	uint64_t hp_after_ms;        /* no collapse pass before this: they take
				      * at most 2% of the run (purge.c) */
	uint64_t fresh_matched;      /* of buddy.fresh_pages, those a release
				      * has matched (purge.c) */
};

/* Huge pages (buddy.h): a unit is a candidate once this many of its 512
 * pages are allocated, and a huge unit keeps its free pages resident
 * while at least MB_HP_DEMOTE of them are. A candidate waits
 * MB_HP_SETTLE_MS before its collapse: what is freed at once is not
 * collapsed. See "Huge pages" in libmbuddy(3). */
#define MB_HP_PROMOTE 480
#define MB_HP_DEMOTE 384
#define MB_HP_SETTLE_MS 50
/* A candidate is collapsed only with this many of its pages resident: a
 * collapse faults in the rest, memory the program allocated but never
 * wrote (idle: 1.36x live 1.5 s after the drop with every dense unit
 * collapsed, 1.32x with these only, 1.31x with no huge pages). Else it is
 * looked at again MB_HP_RECHECK_MS later, and at doubling waits. */
#define MB_HP_RESIDENT 500
#define MB_HP_RECHECK_MS 1000
/* A collapse due for this long starts the purge thread (background.c). */
#define MB_HP_THREAD_MS 1000

extern struct mb_heap mb_heap;

/* Reserve the region (MBUDDY_HEAP_SIZE, or the largest smaller one the
 * kernel grants) and set the buddy up over it, with the options parsed.
 * Returns 0, or -1 after saying why on stderr. Never allocates. */
int mb_heap_init(void);

static inline void mb_heap_lock(void) { mb_lock_acquire(&mb_heap.lock); }
static inline void mb_heap_unlock(void) { mb_lock_release(&mb_heap.lock); }
/* In a fork child: the lock, which the parent's prepare handler held. */
void mb_heap_fork_child(void);

/* Milliseconds on a coarse monotonic clock. */
uint64_t mb_now_ms(void);
/* Microseconds on the precise monotonic clock: for timing work that may
 * take less than a tick of mb_now_ms()'s. */
uint64_t mb_now_us(void);
/* Background work (an account of the peak, a pass of huge-page
 * collapses) that took took_us is not run again for this many ms after
 * it ended: 49 times its cost, so that it takes at most 2% of the run,
 * however large the process. */
uint64_t mb_cost_wait_ms(uint64_t took_us);

/* With the heap lock held, before freeing to the buddy: the time the buddy
 * stamps on pageblocks that fall idle (the decay counts from it). */
static inline void mb_heap_stamp_locked(void)
{
	mb_heap.buddy.clock = mb_now_ms();
}

/* The allocation clock: bytes handed out so far. Approximate: a thread adds
 * its allocations at each classification sample (classify.c), large
 * objects add theirs at once. Classification measures object lifetimes
 * on it. */
extern uint64_t mb_alloc_clock;

static inline void mb_alloc_clock_advance(uint64_t bytes)
{
	__atomic_fetch_add(&mb_alloc_clock, bytes, __ATOMIC_RELAXED);
}

static inline uint64_t mb_alloc_clock_now(void)
{
	return __atomic_load_n(&mb_alloc_clock, __ATOMIC_RELAXED);
}

#endif
