#include "config.h"
#include "tcache.h"
#include "metadata.h"
#include "options.h"
#include "purge.h"

/* Every live cache, for the counters. Under the heap lock. */
static struct mb_tcache *all_caches;

static size_t row_bytes(void)
{
	size_t entries = 0;
	for (unsigned c = 0; c < MB_NCLASSES; c++)
		entries += mb_classes[c].tcache_cap;
	return entries * sizeof(struct mb_tentry);
}

static void counts_add(struct mb_counts *to, const struct mb_counts *from)
{
	for (int k = 0; k < MB_NKEYS; k++)
		to->mallocs[k] += from->mallocs[k];
	to->frees += from->frees;
	to->alloc_bytes += from->alloc_bytes;
	to->freed_bytes += from->freed_bytes;
	to->live_requested += from->live_requested;
}

void mb_tcache_destroy(struct mb_tcache *tc)
{
	mb_tcache_flush_all(tc);
	mb_heap_lock();
	counts_add(&mb_heap.counts, &tc->counts);
	if (tc->prev)
		tc->prev->next = tc->next;
	else
		all_caches = tc->next;
	if (tc->next)
		tc->next->prev = tc->prev;
	for (int k = 0; k < MB_NKEYS; k++)
		if (tc->row[k])
			mb_meta_free(tc->row[k], row_bytes());
	mb_meta_free(tc, sizeof(*tc));
	mb_heap_unlock();
}

struct mb_tcache *mb_tcache_create(void)
{
	mb_heap_lock();
	struct mb_tcache *tc = mb_meta_alloc(sizeof(*tc));
	if (tc) {
		tc->flushed_ms = mb_now_ms();
		tc->next_tick = MB_TCACHE_TICK_BYTES;
		tc->next = all_caches;
		if (all_caches)
			all_caches->prev = tc;
		all_caches = tc;
	}
	mb_heap_unlock();
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
	mb_heap_lock();
	bin->n += mb_slab_refill_locked(key, c, bin->e + bin->n, want);
	mb_heap_unlock();
	return bin->n;
}

static void flush_locked(struct mb_tentry *e, uint32_t n)
{
	struct mb_buddy *b = &mb_heap.buddy;
	for (uint32_t i = 0; i < n; i++) {
		struct mb_page *m = &b->pages[mb_buddy_page_index(b, e[i].p)];
		struct mb_slab *s = m->user.ptr;
		mb_slab_put_locked(s, (uint32_t)(e[i].st - s->state));
	}
}

void mb_tcache_flush(struct mb_tbin *bin, uint32_t keep)
{
	if (bin->n <= keep)
		return;
	uint32_t drop = bin->n - keep;
	mb_heap_lock();
	/* The oldest entries are at the bottom: return those. */
	flush_locked(bin->e, drop);
	mb_purge_maybe_locked();
	mb_heap_unlock();
	for (uint32_t i = 0; i < keep; i++)
		bin->e[i] = bin->e[i + drop];
	bin->n = keep;
}

size_t mb_tcache_flush_all(struct mb_tcache *tc)
{
	size_t n = 0;
	mb_heap_lock();
	for (int k = 0; k < MB_NKEYS; k++)
		for (unsigned c = 0; c < MB_NCLASSES; c++) {
			struct mb_tbin *bin = &tc->bin[k][c];
			flush_locked(bin->e, bin->n);
			n += bin->n;
			bin->n = 0;
		}
	mb_heap_unlock();
	return n;
}

void mb_tcache_maybe_flush_all(struct mb_tcache *tc)
{
	uint64_t now = mb_now_ms();
	if (now - tc->flushed_ms < mb_opt.decay_ms)
		return;
	tc->flushed_ms = now;
	mb_tcache_flush_all(tc);
	mb_heap_lock();
	mb_purge_maybe_locked();
	mb_heap_unlock();
}

void mb_tcache_tick(struct mb_tcache *tc)
{
	mb_alloc_clock_advance(tc->counts.alloc_bytes - tc->clock_sent);
	tc->clock_sent = tc->counts.alloc_bytes;
	tc->next_tick = tc->counts.alloc_bytes + MB_TCACHE_TICK_BYTES;
	mb_tcache_maybe_flush_all(tc);
}

void mb_tcache_sum_counts_locked(struct mb_counts *out)
{
	for (struct mb_tcache *tc = all_caches; tc; tc = tc->next)
		counts_add(out, &tc->counts);
}

void mb_tcache_fork_child(void)
{
	/* Only the forking thread survives; the other threads' caches stay
	 * allocated (their objects are simply lost, as with every malloc), but
	 * their counters must not be counted twice. Keep ours. */
	struct mb_tcache *self = mb_tc;
	for (struct mb_tcache *tc = all_caches; tc; tc = tc->next)
		if (tc != self)
			counts_add(&mb_heap.counts, &tc->counts);
	all_caches = self;
	if (self)
		self->next = self->prev = NULL;
}
