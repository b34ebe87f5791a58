#include "config.h"
#include "large.h"
#include "heap.h"
#include "region.h"
#include "report.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

/* Zero the whole usable size of a new object whose pages may hold data:
 * from CLEAR_BY_KERNEL_MIN up, the kernel does it (madvise frees the pages,
 * which read as zero when touched), costing neither the time to write them
 * nor resident memory for pages the program may never touch; below,
 * memset. The pages are resident already, so writing them costs no memory,
 * and a buffer that is filled anyway (a decoder's, a request body's) would
 * pay a page fault per page to the kernel instead: 5-25 MiB buffers in a
 * loop ran 4x slower through the kernel than with memset. */
#define CLEAR_BY_KERNEL_MIN ((size_t)64 << 20)
static void clear(void *p, size_t len, int by_kernel)
{
	if (by_kernel && mb_os_release(p, len) == 0)
		return;
	memset(p, 0, len);
}

/* With the heap lock held: until the purge has handed back the reserved
 * pages of m's block (MB_PGF_TAIL_BUSY), the lock is dropped in turns, as
 * the block's pages must stay as they are meanwhile. A few microseconds,
 * the length of one madvise. */
static void wait_tail(struct mb_page *m)
{
	while (__atomic_load_n(&m->flags, __ATOMIC_RELAXED) & MB_PGF_TAIL_BUSY) {
		mb_heap_unlock();
		sched_yield();
		mb_heap_lock();
	}
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
	int block = apages <= 1 && npages >= MB_LARGE_BLOCK_MIN_PAGES && npages < MB_LARGE_BLOCK_MAX_PAGES &&
		    npages < b->pb_pages && (npages & (npages - 1));

	mb_heap_lock();
	/* Blocks spend the heap's room: only while the pageblocks in use
	 * are an eighth of the heap at most (a heap that MBUDDY_HEAP_SIZE
	 * keeps small needs its pageblocks whole, for requests of one). */
	block = block && (b->nblocks - b->nr_global) * 8 <= b->nblocks;
	if (block) {
		idx = mb_buddy_alloc_block(b, npages, type, &zeroed);
	} else if (apages <= 1 || (npages > b->pb_pages && apages <= b->pb_pages)) {
		/* No alignment beyond a page, or runs (aligned to a pageblock). */
		idx = mb_buddy_alloc(b, npages, type, &zeroed);
	} else if (npages <= b->pb_pages && apages <= b->pb_pages) {
		idx = mb_buddy_alloc_aligned(b, npages, apages, type, &zeroed);
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
		mb_heap_unlock();
		errno = ENOMEM;
		return NULL;
	}
	struct mb_page *m = &b->pages[idx];
	m->kind = MB_KIND_LARGE;
	m->user16 = 0;
	m->user.u64 = bytes;
	mb_counts_add(mb_heap.large_objects, 1);
	mb_counts_add(mb_heap.counts.mallocs[type], 1);
	mb_counts_add(mb_heap.counts.alloc_bytes, npages << MB_PAGE_SHIFT);
	mb_counts_add(mb_heap.counts.live_requested, (int64_t)bytes);
	mb_alloc_clock_advance(npages << MB_PAGE_SHIFT);
	int by_kernel = zero && !zeroed && (npages << MB_PAGE_SHIFT) >= CLEAR_BY_KERNEL_MIN;
	if (zero && (zeroed || by_kernel))
		mb_heap.calloc_zero_skips++;
	mb_heap_unlock();

	void *p = mb_buddy_page_addr(b, (size_t)idx);
	if (zero && !zeroed)
		clear(p, npages << MB_PAGE_SHIFT, by_kernel);
	return p;
}

/* With the heap lock held: the pages of p (record m) back to the buddy. */
static void free_pages_locked(struct mb_page *m)
{
	struct mb_buddy *b = &mb_heap.buddy;
	size_t idx = (size_t)(m - b->pages);
	mb_counts_add(mb_heap.large_objects, -1);
	m->kind = MB_KIND_NONE;
	m->user16 = 0;
	m->user.u64 = 0;
	mb_heap_stamp_locked();
	mb_buddy_free(b, idx);
}

void mb_large_free(void *p, struct mb_page *m)
{
	mb_heap_lock();
	wait_tail(m);
	/* Checked under the lock, so two racing frees cannot both pass. */
	if (m->state != MB_PG_ALLOC || m->kind != MB_KIND_LARGE || (m->user16 & MB_LARGE_CACHED)) {
		mb_heap_unlock();
		mb_fatal_pointer("free", "double free or invalid pointer", p);
	}
	mb_counts_add(mb_heap.counts.frees, 1);
	mb_counts_add(mb_heap.counts.freed_bytes, mb_large_pages(m) << MB_PAGE_SHIFT);
	mb_counts_add(mb_heap.counts.live_requested, -(int64_t)m->user.u64);
	free_pages_locked(m);
	mb_heap_unlock();
}

unsigned mb_large_alloc_cached(size_t npages, int type, void **out, unsigned n)
{
	struct mb_buddy *b = &mb_heap.buddy;
	unsigned got = 0;
	mb_heap_lock();
	while (got < n) {
		long idx = mb_buddy_alloc(b, npages, type, NULL);
		if (idx < 0)
			break;
		struct mb_page *m = &b->pages[idx];
		m->kind = MB_KIND_LARGE;
		m->user16 = MB_LARGE_CACHED;
		m->user.u64 = 0;
		mb_counts_add(mb_heap.large_objects, 1);
		out[got++] = mb_buddy_page_addr(b, (size_t)idx);
	}
	mb_heap_unlock();
	return got;
}

void mb_large_free_cached(void *const *run, unsigned n)
{
	struct mb_buddy *b = &mb_heap.buddy;
	if (!n)
		return;
	mb_heap_lock();
	for (unsigned i = 0; i < n; i++)
		free_pages_locked(&b->pages[mb_buddy_page_index(b, run[i])]);
	mb_heap_unlock();
}

int mb_large_resize(void *p, struct mb_page *m, size_t n, const char *func)
{
	struct mb_buddy *b = &mb_heap.buddy;
	size_t npages = (n + MB_PAGE_SIZE - 1) >> MB_PAGE_SHIFT;
	size_t idx = (size_t)(m - b->pages);
	mb_heap_lock();
	wait_tail(m);
	if (m->state != MB_PG_ALLOC || m->kind != MB_KIND_LARGE || (m->user16 & MB_LARGE_CACHED)) {
		mb_heap_unlock();
		mb_fatal_pointer(func, "double free or invalid pointer", p);
	}
	size_t old_pages = mb_large_pages(m);
	mb_heap_stamp_locked(); /* a shrink frees pages */
	int ok = 1;
	if (m->used && npages <= m->npages)
		/* Within its block: its reserved pages give and take. */
		mb_buddy_block_use(b, idx, npages);
	else
		ok = mb_buddy_resize(b, idx, npages) == 0;
	if (ok) {
		if (npages > old_pages)
			mb_counts_add(mb_heap.counts.alloc_bytes, (npages - old_pages) << MB_PAGE_SHIFT);
		else
			mb_counts_add(mb_heap.counts.freed_bytes, (old_pages - npages) << MB_PAGE_SHIFT);
		mb_counts_add(mb_heap.counts.live_requested, (int64_t)n - (int64_t)m->user.u64);
		m->user.u64 = n;
		if (npages > old_pages)
			mb_heap.inplace_grows++;
		else if (npages < old_pages)
			mb_heap.inplace_shrinks++;
	}
	mb_heap_unlock();
	return ok ? 0 : -1;
}
