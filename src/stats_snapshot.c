#include "config.h"
#include "stats_snapshot.h"
#include "metadata.h"
#include "out.h"
#include "theap.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Counters as they were at the last fork, in the child: its report counts
 * from there. Only cumulative counters; live bytes, pageblocks owned and
 * the like are state and stay as inherited. */
static struct {
	struct mb_buddy_counters count;
	uint64_t mallocs[MB_NTYPES], frees; /* per type */
	uint64_t released_bytes, calloc_zero_skips, inplace_grows, inplace_shrinks;
	int forked, forked_from;
} since;

/* Highest live bytes sampled, and when the last sample was taken. */
static uint64_t peak_live, last_sample_ms;

static int served_not;
static char foreign_symbol[32], foreign_object[512];

/* The kernel's high-water mark of this address space's RSS: VmHWM, which
 * an exec starts anew (getrusage's ru_maxrss would carry the peak of the
 * program that exec'd this one). */
static uint64_t read_peak_rss(void)
{
	char buf[4096];
	const char *p;
	unsigned long long kib;
	if (mb_read_small("/proc/self/status", buf, sizeof buf) > 0 && (p = strstr(buf, "\nVmHWM:")) &&
	    sscanf(p + 7, "%llu", &kib) == 1)
		return (uint64_t)kib << 10;
	struct rusage ru;
	return getrusage(RUSAGE_SELF, &ru) == 0 ? (uint64_t)ru.ru_maxrss << 10 : 0;
}

static uint64_t live_now(void)
{
	struct mb_counts c;
	mb_theap_sum_counts(&c);
	return c.alloc_bytes > c.freed_bytes ? c.alloc_bytes - c.freed_bytes : 0;
}

static uint64_t raise_peak(uint64_t live)
{
	uint64_t p = __atomic_load_n(&peak_live, __ATOMIC_RELAXED);
	while (live > p && !__atomic_compare_exchange_n(&peak_live, &p, live, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return live > p ? live : p;
}

/* At most once per tick of mb_now_ms()'s coarse clock (a few ms), in one
 * thread: the sum walks every thread cache under their list's lock. */
void mb_stats_sample_peak(void)
{
	uint64_t now = mb_now_ms(), last = __atomic_load_n(&last_sample_ms, __ATOMIC_RELAXED);
	if (now == last || !__atomic_compare_exchange_n(&last_sample_ms, &last, now, 0, __ATOMIC_RELAXED,
							 __ATOMIC_RELAXED))
		return;
	raise_peak(live_now());
	mb_account_watch_peak();
}

static void since_fork(struct mb_snapshot *s)
{
	_Static_assert(sizeof(struct mb_buddy_counters) % sizeof(uint64_t) == 0, "bean counters are 64-bit");
	uint64_t *now = (uint64_t *)&s->count;
	const uint64_t *base = (const uint64_t *)&since.count;
	for (size_t i = 0; i < sizeof(s->count) / sizeof(uint64_t); i++)
		now[i] -= base[i];
	for (int t = 0; t < MB_NTYPES; t++)
		s->counts.mallocs[t] -= since.mallocs[t];
	s->counts.frees -= since.frees;
	s->released_bytes -= since.released_bytes;
	s->calloc_zero_skips -= since.calloc_zero_skips;
	s->inplace_grows -= since.inplace_grows;
	s->inplace_shrinks -= since.inplace_shrinks;
	s->forked = since.forked;
	s->forked_from = since.forked_from;
}

/* What the heap holds and has counted. */
static void read_heap(struct mb_snapshot *s)
{
	struct mb_buddy *b = &mb_heap.buddy;
	mb_heap_lock();
	s->max_order = b->max_order;
	s->pb_order = b->pb_order;
	s->region_bytes = mb_heap.region_bytes;
	s->nblocks = b->nblocks;
	s->pb_bytes = b->pb_pages << MB_PAGE_SHIFT;
	for (int t = 0; t < MB_NTYPES; t++) {
		for (unsigned o = 0; o < b->pb_order; o++)
			s->nr_free[t][o] = b->free_area[t][o].nr_free;
		s->pb_owned[t] = b->pb_owned[t];
	}
	s->global_free = b->nr_global;
	s->pb_high = b->pb_high;
	s->global_resident = b->nr_dirty;
	s->count = b->count;
	s->pages_allocated = b->pages_allocated;
	s->slab_pages = mb_heap.slab_pages;
	s->large_objects = mb_heap.large_objects;
	s->released_bytes = mb_heap.released_bytes;
	s->calloc_zero_skips = mb_heap.calloc_zero_skips;
	s->inplace_grows = mb_heap.inplace_grows;
	s->inplace_shrinks = mb_heap.inplace_shrinks;
	/* The page array is reserved for the whole region; records are
	 * written only for pageblocks split into blocks (a run of whole
	 * pageblocks has one, at its head), and slabs' magic numbers only
	 * in those. */
	s->meta_bytes = mb_meta_resident() + b->nr_records * b->pb_pages * (sizeof(struct mb_page) + sizeof(uint32_t));
	s->hp_mode = (uint64_t)mb_heap.hugepages;
	s->hp_thp = mb_heap.thp;
	if (b->nunits) {
		size_t per = b->pb_pages >> MB_HP_SHIFT, end = b->pb_high * per;
		for (size_t u = 0; u < end; u++)
			if (b->hp_flags[u] & MB_HPF_HUGE) {
				int t = mb_buddy_pb_type(b, u / per);
				s->huge_bytes_type[t < MB_NTYPES ? t : MB_NTYPES] += MB_HP_PAGES << MB_PAGE_SHIFT;
				s->huge_bytes += MB_HP_PAGES << MB_PAGE_SHIFT;
			}
	}
	mb_heap_unlock();
	/* The list of thread heaps is taken before the heap lock, never
	 * inside it. */
	mb_theap_sum_counts(&s->counts);
	/* Allocations are counted per slab key; the report shows types (a
	 * lane's as it is now). */
	for (int k = MB_FIRST_LANE; k < MB_NKEYS; k++) {
		s->counts.mallocs[mb_key_type(k)] += s->counts.mallocs[k];
		s->counts.mallocs[k] = 0;
	}
}

void mb_stats_snapshot(struct mb_snapshot *s)
{
	memset(s, 0, sizeof(*s));
	s->rss_bytes = mb_read_rss();
	read_heap(s);
	since_fork(s);
	for (int t = 0; t < MB_NTYPES; t++) {
		s->mallocs += s->counts.mallocs[t];
		s->failures += s->count.failures[t];
	}
	s->buddy_allocated_bytes = (uint64_t)s->pages_allocated << MB_PAGE_SHIFT;
	s->slab_bytes = s->slab_pages << MB_PAGE_SHIFT;
	s->idle_pool_bytes = (uint64_t)s->global_resident * s->pb_bytes;
	s->live_bytes = (int64_t)(s->counts.alloc_bytes - s->counts.freed_bytes);
	s->peak_live_bytes = raise_peak(s->live_bytes > 0 ? (uint64_t)s->live_bytes : 0);
	s->peak_rss_bytes = read_peak_rss();
	s->served = !served_not;
	s->foreign_symbol = foreign_symbol;
	s->foreign_object = foreign_object;
}

void mb_stats_take_account(struct mb_snapshot *s)
{
	mb_account_take(&s->account);
	s->has_account = 1;
	s->has_account_peak = mb_account_at_peak(&s->account_peak) == 0;
	/* The peak column is the highest resident set an account saw: this
	 * one, if nothing sampled before was higher. */
	if (s->has_account_peak && s->account.rss >= s->account_peak.rss)
		s->account_peak = s->account;
}

void mb_stats_snapshot_fork_child(void)
{
	static struct mb_snapshot now; /* the child has one thread */
	memset(&now, 0, sizeof now);
	read_heap(&now);
	since.count = now.count;
	for (int t = 0; t < MB_NTYPES; t++)
		since.mallocs[t] = now.counts.mallocs[t];
	since.frees = now.counts.frees;
	since.released_bytes = now.released_bytes;
	since.calloc_zero_skips = now.calloc_zero_skips;
	since.inplace_grows = now.inplace_grows;
	since.inplace_shrinks = now.inplace_shrinks;
	since.forked = 1;
	since.forked_from = (int)getppid();
	uint64_t live = now.counts.alloc_bytes - now.counts.freed_bytes;
	__atomic_store_n(&peak_live, (int64_t)live > 0 ? live : 0, __ATOMIC_RELAXED);
	__atomic_store_n(&last_sample_ms, 0, __ATOMIC_RELAXED);
}

void mb_stats_not_served(const char *symbol, const char *object)
{
	snprintf(foreign_symbol, sizeof foreign_symbol, "%s", symbol);
	snprintf(foreign_object, sizeof foreign_object, "%s", object && *object ? object : "an unnamed object");
	served_not = 1;
}

/* Free blocks of every type per order, and at the top order the global
 * pageblocks of the part of the heap in use so far: counting the whole
 * reservation would make every index read "no fragmentation". */
void mb_stats_free_blocks(const struct mb_snapshot *s, uint64_t nr[MB_MAX_ORDER_MAX])
{
	for (unsigned o = 0; o < s->max_order; o++) {
		nr[o] = 0;
		for (int t = 0; t < MB_NTYPES; t++)
			nr[o] += s->nr_free[t][o];
	}
	nr[s->pb_order] += s->global_free - (s->nblocks - s->pb_high);
}
