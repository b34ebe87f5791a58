#include "config.h"
#include "runcache.h"
#include "heap.h"
#include "large.h"
#include "report.h"

_Static_assert(MB_RUN_MAX / MB_PAGE_SIZE < MB_LARGE_BLOCK_MIN_PAGES,
	       "a cached run is never the head of a block: runs are cut to their length");

void *mb_runcache_get(struct mb_runcache *rc, struct mb_counts *counts, size_t n, int key)
{
	size_t npages = (n + MB_PAGE_SIZE - 1) >> MB_PAGE_SHIFT;
	int type = mb_key_type(key);
	struct mb_runbin *bin = &rc->bin[type][npages - MB_RUN_MIN_PAGES];
	if (!bin->n) {
		/* Half a bin from the buddy, in one heap-lock section. */
		if (rc->bytes + (MB_RUN_CAP / 2) * (npages << MB_PAGE_SHIFT) > MB_RUN_BUDGET)
			mb_runcache_flush(rc);
		bin->n = mb_large_alloc_cached(npages, type, bin->run, MB_RUN_CAP / 2);
		rc->bytes += (size_t)bin->n * (npages << MB_PAGE_SHIFT);
		if (!bin->n)
			return NULL;
	}
	void *p = bin->run[--bin->n];
	struct mb_page *m = &mb_heap.buddy.pages[mb_buddy_page_index(&mb_heap.buddy, p)];
	rc->bytes -= npages << MB_PAGE_SHIFT;
	m->user.u64 = n;
	__atomic_store_n(&m->user16, 0, __ATOMIC_RELAXED);
	counts->mallocs[type]++;
	counts->alloc_bytes += npages << MB_PAGE_SHIFT;
	counts->live_requested += (int64_t)n;
	return p;
}

int mb_runcache_put(struct mb_runcache *rc, struct mb_counts *counts, void *p, struct mb_page *m)
{
	size_t npages = m->npages, bytes = npages << MB_PAGE_SHIFT;
	if (npages < MB_RUN_MIN_PAGES || npages >= MB_RUN_MIN_PAGES + MB_RUN_LENGTHS)
		return 0;
	/* Over the budget: the runs held are those no allocation asked for
	 * lately (of a type the thread's call sites no longer get, say). */
	int gave = 0;
	if (rc->bytes + bytes > MB_RUN_BUDGET)
		gave = mb_runcache_flush(rc) != 0;
	int type = m->type;
	struct mb_runbin *bin = &rc->bin[type][npages - MB_RUN_MIN_PAGES];
	if (bin->n == MB_RUN_CAP) {
		/* The older half back to the buddy, in one heap-lock section. */
		uint32_t drop = MB_RUN_CAP / 2;
		mb_large_free_cached(bin->run, drop);
		for (uint32_t i = drop; i < bin->n; i++)
			bin->run[i - drop] = bin->run[i];
		bin->n -= drop;
		rc->bytes -= drop * bytes;
		gave = 1;
	}
	/* Two threads freeing the same run at once: one of them sees it
	 * cached already. */
	uint16_t old = __atomic_load_n(&m->user16, __ATOMIC_RELAXED);
	do {
		if (old & MB_LARGE_CACHED)
			mb_fatal_pointer("free", "double free detected", p);
	} while (!__atomic_compare_exchange_n(&m->user16, &old, MB_LARGE_CACHED, 1, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	counts->frees++;
	counts->freed_bytes += bytes;
	counts->live_requested -= (int64_t)m->user.u64;
	bin->run[bin->n++] = p;
	rc->bytes += bytes;
	return gave ? 2 : 1;
}

size_t mb_runcache_flush(struct mb_runcache *rc)
{
	size_t n = 0;
	for (int t = 0; t < MB_NTYPES; t++)
		for (unsigned l = 0; l < MB_RUN_LENGTHS; l++) {
			struct mb_runbin *bin = &rc->bin[t][l];
			mb_large_free_cached(bin->run, bin->n);
			n += bin->n;
			bin->n = 0;
		}
	rc->bytes = 0;
	return n;
}
