#include "config.h"
#include "tcache.h"
#include "lockstat.h"
#include "metadata.h"
#include "options.h"
#include "background.h"
#include "purge.h"

/* Every live cache, for the counters. Its lock nests inside every other
 * lock and takes none itself. */
static struct mb_tcache *all_caches;
static struct mb_lock caches_lock = MB_LOCK_INITIALIZER_RECURSIVE("caches");

static size_t row_bytes(void)
{
	size_t entries = 0;
	for (unsigned c = 0; c < MB_NCLASSES; c++)
		entries += mb_classes[c].tcache_cap;
	return entries * sizeof(struct mb_tentry);
}

/* Into the heap's counters: atomically, since cache-less paths and large
 * objects add to them without the list's lock. */
static void counts_fold(struct mb_counts *to, const struct mb_counts *from)
{
	for (int k = 0; k < MB_NKEYS; k++)
		mb_counts_add(to->mallocs[k], from->mallocs[k]);
	mb_counts_add(to->frees, from->frees);
	mb_counts_add(to->alloc_bytes, from->alloc_bytes);
	mb_counts_add(to->freed_bytes, from->freed_bytes);
	mb_counts_add(to->live_requested, from->live_requested);
}

static void counts_read(struct mb_counts *to, const struct mb_counts *from)
{
	for (int k = 0; k < MB_NKEYS; k++)
		to->mallocs[k] += __atomic_load_n(&from->mallocs[k], __ATOMIC_RELAXED);
	to->frees += __atomic_load_n(&from->frees, __ATOMIC_RELAXED);
	to->alloc_bytes += __atomic_load_n(&from->alloc_bytes, __ATOMIC_RELAXED);
	to->freed_bytes += __atomic_load_n(&from->freed_bytes, __ATOMIC_RELAXED);
	to->live_requested += __atomic_load_n(&from->live_requested, __ATOMIC_RELAXED);
}

void mb_tcache_destroy(struct mb_tcache *tc)
{
	/* Through the transfer caches: a thread that replaces this one takes
	 * them back in batches; what nobody takes goes to the slabs at the
	 * next purge but one. */
	mb_tcache_flush_all(tc, 0);
	mb_lock_acquire(&caches_lock);
	counts_fold(&mb_heap.counts, &tc->counts);
	if (tc->prev)
		tc->prev->next = tc->next;
	else
		all_caches = tc->next;
	if (tc->next)
		tc->next->prev = tc->prev;
	mb_lock_release(&caches_lock);
	mb_heap_lock();
	for (int k = 0; k < MB_NKEYS; k++)
		if (tc->row[k])
			mb_meta_free(tc->row[k], row_bytes());
	mb_meta_free(tc, sizeof(*tc));
	mb_heap_unlock();
	mb_purge_maybe();
}

struct mb_tcache *mb_tcache_create(void)
{
	mb_heap_lock();
	struct mb_tcache *tc = mb_meta_alloc(sizeof(*tc));
	mb_heap_unlock();
	if (!tc)
		return NULL;
	tc->flushed_ms = mb_now_ms();
	tc->next_tick = MB_TCACHE_TICK_BYTES;
	mb_lock_acquire(&caches_lock);
	tc->next = all_caches;
	if (all_caches)
		all_caches->prev = tc;
	all_caches = tc;
	mb_lock_release(&caches_lock);
	return tc;
}

int mb_tcache_row(struct mb_tcache *tc, int key)
{
	if (tc->row[key])
		return 0;
	mb_heap_lock();
	struct mb_tentry *e = mb_meta_alloc(row_bytes());
	mb_heap_unlock();
	if (!e)
		return -1;
	tc->row[key] = e;
	for (unsigned c = 0; c < MB_NCLASSES; c++) {
		tc->bin[key][c].e = e;
		tc->bin[key][c].cap = mb_classes[c].tcache_cap;
		e += mb_classes[c].tcache_cap;
	}
	return 0;
}

uint32_t mb_tcache_refill(struct mb_tcache *tc, int key, unsigned c)
{
	struct mb_tbin *bin = &tc->bin[key][c];
	if (mb_tcache_row(tc, key) != 0)
		return 0;
	unsigned want = bin->cap / 2;
	if (want == 0)
		want = 1;
	bin->n += mb_slab_take(key, c, bin->e + bin->n, want);
	return bin->n;
}

void mb_tcache_flush(struct mb_tcache *tc, int key, unsigned c, uint32_t keep)
{
	struct mb_tbin *bin = &tc->bin[key][c];
	if (bin->n <= keep)
		return;
	uint32_t drop = bin->n - keep;
	/* The oldest entries are at the bottom: return those. */
	mb_slab_give(key, c, bin->e, drop, 0);
	for (uint32_t i = 0; i < keep; i++)
		bin->e[i] = bin->e[i + drop];
	bin->n = keep;
	mb_purge_maybe();
}

size_t mb_tcache_flush_all(struct mb_tcache *tc, int to_slabs)
{
	size_t n = 0;
	for (int k = 0; k < MB_NKEYS; k++) {
		if (!tc->row[k])
			continue;
		for (unsigned c = 0; c < MB_NCLASSES; c++) {
			struct mb_tbin *bin = &tc->bin[k][c];
			if (!bin->n)
				continue;
			mb_slab_give(k, c, bin->e, bin->n, to_slabs);
			n += bin->n;
			bin->n = 0;
		}
	}
	return n + mb_runcache_flush(tc);
}

void mb_tcache_maybe_flush_all(struct mb_tcache *tc)
{
	uint64_t now = mb_now_ms();
	if (now - tc->flushed_ms < 2 * mb_purge_period_ms())
		return;
	tc->flushed_ms = now;
	mb_tcache_flush_all(tc, 0);
	mb_purge_maybe();
}

void mb_tcache_tick(struct mb_tcache *tc)
{
	mb_alloc_clock_advance(tc->counts.alloc_bytes - tc->clock_sent);
	tc->clock_sent = tc->counts.alloc_bytes;
	tc->next_tick = tc->counts.alloc_bytes + MB_TCACHE_TICK_BYTES;
	mb_tcache_maybe_flush_all(tc);
}

void mb_tcache_sum_counts(struct mb_counts *out)
{
	*out = (struct mb_counts){ 0 };
	mb_lock_acquire(&caches_lock);
	counts_read(out, &mb_heap.counts);
	for (struct mb_tcache *tc = all_caches; tc; tc = tc->next)
		counts_read(out, &tc->counts);
	mb_lock_release(&caches_lock);
}

void mb_tcache_fork_prepare(void)
{
	mb_lock_acquire(&caches_lock);
}

void mb_tcache_fork_parent(void)
{
	mb_lock_release(&caches_lock);
}

void mb_tcache_fork_child(void)
{
	mb_lock_after_fork_child(&caches_lock, 1);
	/* Only the forking thread survives; the other threads' caches stay
	 * allocated (their objects are simply lost, as with every malloc), but
	 * their counters must not be counted twice. Keep ours. */
	struct mb_tcache *self = mb_self.tc;
	for (struct mb_tcache *tc = all_caches; tc; tc = tc->next)
		if (tc != self)
			counts_fold(&mb_heap.counts, &tc->counts);
	all_caches = self;
	if (self)
		self->next = self->prev = NULL;
}
