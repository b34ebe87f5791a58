/* Page-granular objects (large.c) over a heap of its own (heap.h set up by
 * the harness, without the rest of the process): allocation and free of
 * every size from one page to several pageblocks, with the page record
 * and the counters that describe an object, alignment up to beyond a
 * pageblock, zeroed memory whatever the pages held before, resizing in
 * place (growing into free pages and whole pageblocks, refusing when the
 * next pages are taken, shrinking), objects that keep the whole block of
 * the next power of two (their reserved pages, the purge's release of
 * them, a free or realloc waiting for it, a heap short of room), the
 * heap's limits, the cached runs of the thread caches and the run cache
 * that keeps them (runcache.c), and frees of what is not a live object.
 * The buddy checker runs after every operation; every test ends with the
 * heap's pageblocks all back in the global pool. */
#include "config.h"
#include "harness.h"
#include "large.h"
#include "purge.h"
#include "runcache.h"
#include "sizeclass.h"

#include <pthread.h>
#include <signal.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define PAGE MB_PAGE_SIZE

static struct mb_buddy *const B = &mb_heap.buddy;

/* A heap of 64 MiB in 4 MiB pageblocks, nothing purged by decay. */
static void heap(void)
{
	test_heap_setup(64 * MiB, MB_MAX_ORDER_DEFAULT, 3600000);
}

static struct mb_page *record(const void *p)
{
	ASSERT(mb_buddy_contains(B, p));
	return &B->pages[mb_buddy_page_index(B, p)];
}

static size_t pages_of(size_t bytes)
{
	return (bytes + PAGE - 1) / PAGE;
}

/* The pages the buddy hands out for an object of `bytes` at alignment
 * align, allocated now: its own, or a block of the next power of two
 * while the heap has room (large.h). */
static size_t taken_for(size_t bytes, size_t align)
{
	size_t n = pages_of(bytes), block = 1;
	if (align > PAGE || n < MB_LARGE_BLOCK_MIN_PAGES || n >= MB_LARGE_BLOCK_MAX_PAGES || n >= B->pb_pages ||
	    !(n & (n - 1)) || (B->nblocks - B->nr_global) * 8 > B->nblocks)
		return n;
	while (block < n)
		block *= 2;
	return block;
}

/* Allocate and check what the object's first page says. */
static void *alloc_ok(size_t bytes, size_t align, int key, int zero)
{
	uint64_t objects = mb_heap.large_objects, live = (uint64_t)mb_heap.counts.live_requested;
	size_t taken = taken_for(bytes, align);
	void *p = mb_large_alloc(bytes, align, key, zero);
	if (!p)
		FAIL("mb_large_alloc(%zu, %zu, key %d, zero %d) failed", bytes, align, key, zero);
	ASSERT_BUDDY(B);
	ASSERT_EQ((uintptr_t)p % PAGE, 0);
	if (align)
		ASSERT_EQ((uintptr_t)p % align, 0);
	struct mb_page *m = record(p);
	ASSERT_EQ(m->state, MB_PG_ALLOC);
	ASSERT_EQ(m->kind, MB_KIND_LARGE);
	ASSERT_EQ(m->user.u64, bytes);
	ASSERT_EQ(m->user16, 0);
	ASSERT_EQ(mb_large_pages(m), pages_of(bytes));
	ASSERT_EQ(m->npages, taken);
	ASSERT_EQ(m->type, mb_key_type(key));
	ASSERT_EQ(mb_heap.large_objects, objects + 1);
	ASSERT_EQ((uint64_t)mb_heap.counts.live_requested, live + bytes);
	return p;
}

static void free_ok(void *p)
{
	struct mb_page *m = record(p);
	uint64_t objects = mb_heap.large_objects, frees = mb_heap.counts.frees;
	size_t allocated = B->pages_allocated, n = m->npages;
	mb_large_free(p, m);
	ASSERT_BUDDY(B);
	ASSERT_EQ(m->kind, MB_KIND_NONE);
	ASSERT_EQ(mb_heap.large_objects, objects - 1);
	ASSERT_EQ(mb_heap.counts.frees, frees + 1);
	ASSERT_EQ(B->pages_allocated, allocated - n);
}

/* Everything given back: the pool holds every pageblock again, and the
 * counters balance. */
static void all_back(void)
{
	ASSERT_BUDDY(B);
	ASSERT_EQ(B->pages_allocated, 0);
	ASSERT_EQ(B->nr_global, B->nblocks);
	ASSERT_EQ(mb_heap.large_objects, 0);
	ASSERT_EQ(mb_heap.counts.live_requested, 0);
	ASSERT_EQ(mb_heap.counts.alloc_bytes, mb_heap.counts.freed_bytes);
}

/* Each size, filled end to end with its own byte; all alive together,
 * then freed in an order unlike the allocation's. */
TEST(sizes)
{
	heap();
	static const size_t sizes[] = {
		MB_SMALL_MAX + 1, 20 * KiB, 32 * KiB, 33 * KiB, 100 * KiB, 1 * MiB - 1, 1 * MiB, 3 * MiB + 5,
		4 * MiB - PAGE, 4 * MiB, 4 * MiB + 1, 9 * MiB, 12 * MiB,
	};
	enum { N = sizeof sizes / sizeof sizes[0] };
	unsigned char *p[N];
	size_t total = 0;
	for (int i = 0; i < N; i++) {
		int key = i % MB_NTYPES;
		p[i] = alloc_ok(sizes[i], 0, key, 0);
		memset(p[i], i + 1, sizes[i]);
		total += record(p[i])->npages;
		ASSERT_EQ(B->pages_allocated, total);
	}
	size_t own = 0;
	for (int i = 0; i < N; i++)
		own += pages_of(sizes[i]);
	ASSERT_EQ(mb_heap.counts.alloc_bytes, own * PAGE);
	for (int k = 0; k < 2; k++)
		for (int i = k; i < N; i += 2) {
			for (size_t j = 0; j < sizes[i]; j += 4093)
				ASSERT_EQ(p[i][j], i + 1);
			ASSERT_EQ(p[i][sizes[i] - 1], i + 1);
			free_ok(p[i]);
		}
	all_back();
}

/* Every key gives its pages its type. */
TEST(keys_give_types)
{
	heap();
	for (int key = 0; key < MB_NKEYS; key++) {
		if (mb_key_type(key) >= MB_NTYPES)
			continue;
		void *p = alloc_ok(64 * KiB, 0, key, 0);
		size_t pb = mb_buddy_page_index(B, p) >> B->pb_order;
		ASSERT_EQ(mb_buddy_pb_type(B, pb), mb_key_type(key));
		free_ok(p);
	}
	all_back();
}

/* Every alignment from a page to four pageblocks, for sizes below, at
 * and above the alignment and a pageblock: the address is aligned and the
 * object has exactly its own pages (the over-allocation is given back). */
TEST(alignment)
{
	heap();
	static const size_t sizes[] = { 20 * KiB, 64 * KiB, 1 * MiB + 3, 4 * MiB, 5 * MiB };
	for (size_t align = PAGE; align <= 16 * MiB; align *= 2)
		for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
			/* Something in the way, so that alignment is not free. */
			void *pad = alloc_ok(3 * PAGE, 0, MB_USERRCLM, 0);
			void *p = alloc_ok(sizes[i], align, MB_USERRCLM, 0);
			ASSERT_EQ(B->pages_allocated, 3 + record(p)->npages);
			memset(p, 0x5a, sizes[i]);
			free_ok(pad);
			free_ok(p);
			all_back();
		}
}

static void all_zero(const unsigned char *p, size_t n, const char *what)
{
	for (size_t j = 0; j < n; j++)
		if (p[j])
			FAIL("%s, %zu bytes: byte %zu is %#x", what, n, j, p[j]);
}

/* Zeroed objects read as zero, wherever their pages come from: fresh
 * pages (the clear is skipped, and counted), and pages written before. */
TEST(zeroing)
{
	heap();
	uint64_t skips = mb_heap.calloc_zero_skips;
	unsigned char *p = alloc_ok(100 * KiB, 0, MB_KERNRCLM, 1);
	ASSERT_EQ(mb_heap.calloc_zero_skips, skips + 1);
	all_zero(p, 100 * KiB, "fresh");
	free_ok(p);
	static const size_t sizes[] = { 17 * KiB, 200 * KiB, 4 * MiB, 6 * MiB + 1 };
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t n = pages_of(sizes[i]) * PAGE;
		p = alloc_ok(sizes[i], 0, MB_KERNRCLM, 0);
		memset(p, 0xee, n);
		free_ok(p);
		p = alloc_ok(sizes[i], 0, MB_KERNRCLM, 1);
		all_zero(p, n, "reused");
		free_ok(p);
	}
	all_back();
}

/* Below 64 MiB, pages that hold data are cleared with memset: a heap of
 * two pageblocks, so that the second object has the first one's pages. */
TEST(zeroing_by_memset)
{
	test_heap_setup(8 * MiB, MB_MAX_ORDER_DEFAULT, 3600000);
	unsigned char *p = alloc_ok(8 * MiB, 0, MB_USERRCLM, 0);
	memset(p, 0xab, 8 * MiB);
	free_ok(p);
	uint64_t skips = mb_heap.calloc_zero_skips;
	unsigned char *again = alloc_ok(8 * MiB, 0, MB_USERRCLM, 1);
	ASSERT_EQ(again, p);
	ASSERT_EQ(mb_heap.calloc_zero_skips, skips);
	all_zero(again, 8 * MiB, "cleared by memset");
	free_ok(again);
	all_back();
}

/* From 64 MiB up, a zeroed object on pages that hold data is cleared by
 * handing its pages to the kernel: a heap of exactly 64 MiB, so that the
 * second object has the first one's pages. */
TEST(zeroing_by_the_kernel)
{
	test_heap_setup(64 * MiB, MB_MAX_ORDER_DEFAULT, 3600000);
	unsigned char *big = alloc_ok(64 * MiB, 0, MB_KERNRCLM, 0);
	for (size_t j = 0; j < 64 * MiB; j += PAGE)
		big[j] = big[j + PAGE - 1] = 1;
	free_ok(big);
	uint64_t skips = mb_heap.calloc_zero_skips;
	unsigned char *again = alloc_ok(64 * MiB, 0, MB_KERNRCLM, 1);
	ASSERT_EQ(again, big);
	ASSERT_EQ(mb_heap.calloc_zero_skips, skips + 1); /* no memset */
	for (size_t j = 0; j < 64 * MiB; j += PAGE)
		if (again[j] || again[j + PAGE - 1])
			FAIL("64 MiB zeroed by the kernel: page %zu not zero", j / PAGE);
	free_ok(again);
	all_back();
}

static void resize_ok(void *p, size_t n)
{
	struct mb_page *m = record(p);
	uint64_t grows = mb_heap.inplace_grows, shrinks = mb_heap.inplace_shrinks;
	size_t before = mb_large_pages(m);
	int64_t live = mb_heap.counts.live_requested;
	uint64_t was = m->user.u64;
	if (mb_large_resize(p, m, n, "realloc") != 0)
		FAIL("resize of %zu pages to %zu bytes in place failed", before, n);
	ASSERT_BUDDY(B);
	ASSERT_EQ(mb_large_pages(m), pages_of(n));
	ASSERT_EQ(m->user.u64, n);
	ASSERT_EQ(mb_heap.counts.live_requested, live + (int64_t)n - (int64_t)was);
	ASSERT_EQ(mb_heap.inplace_grows, grows + (pages_of(n) > before));
	ASSERT_EQ(mb_heap.inplace_shrinks, shrinks + (pages_of(n) < before));
}

TEST(resize_in_place)
{
	heap();
	unsigned char *p = alloc_ok(64 * KiB, 0, MB_KERNNORCLM, 0);
	memset(p, 7, 64 * KiB);
	/* Within the pages it has, and into the free pages after it. */
	resize_ok(p, 64 * KiB - 100);
	resize_ok(p, 200 * KiB);
	resize_ok(p, 1 * MiB);
	/* Across the end of its pageblock into whole free pageblocks. */
	resize_ok(p, 9 * MiB);
	memset(p, 8, 9 * MiB);
	/* Shrinking gives the tail back at once. */
	resize_ok(p, 5 * MiB + 1);
	ASSERT_EQ(B->pages_allocated, pages_of(5 * MiB + 1));
	resize_ok(p, 20 * KiB);
	ASSERT_EQ(B->pages_allocated, 5);
	for (size_t j = 0; j < 20 * KiB; j++)
		ASSERT_EQ(p[j], 8);
	free_ok(p);
	all_back();
}

/* A size just past a power of two of pages (64 KiB and a header, 17
 * pages) takes a block of 32: its usable size is its own 17 pages, the
 * other 15 are reserved for it; those its block's last owner wrote stay
 * resident until the purge hands them back. A realloc within the block
 * stays in place, one past the block grows into the free pages after it,
 * and its free leaves the heap whole. */
TEST(block_objects)
{
	heap();
	unsigned char *w = alloc_ok(128 * KiB, 0, MB_USERRCLM, 0); /* 32 pages */
	memset(w, 0xee, 128 * KiB);
	free_ok(w);
	size_t n = 64 * KiB + 8;
	unsigned char *p = alloc_ok(n, 0, MB_USERRCLM, 0);
	ASSERT_EQ(p, w);
	struct mb_page *m = record(p);
	ASSERT_EQ(m->npages, 32);
	ASSERT_EQ(mb_large_pages(m), 17);
	ASSERT_EQ(B->pages_allocated, 32);
	ASSERT_EQ(test_resident_pages(p, 32 * PAGE), 32);
	ASSERT_EQ(mb_purge(1), 15);
	ASSERT_BUDDY(B);
	ASSERT_EQ(test_resident_pages(p, 17 * PAGE), 17);
	ASSERT_EQ(test_resident_pages(p + 17 * PAGE, 15 * PAGE), 0);
	memset(p, 1, n);
	uint64_t grows = mb_heap.inplace_grows;
	resize_ok(p, 100 * KiB); /* 25 pages */
	ASSERT_EQ(mb_heap.inplace_grows, grows + 1);
	ASSERT_EQ(m->npages, 32);
	memset(p + n, 2, 100 * KiB - n);
	resize_ok(p, 40 * KiB);  /* 10 pages */
	ASSERT_EQ(m->npages, 32);
	ASSERT_EQ(mb_purge(1), 15);
	ASSERT_EQ(test_resident_pages(p, 10 * PAGE), 10);
	ASSERT_EQ(test_resident_pages(p + 10 * PAGE, 22 * PAGE), 0);
	for (size_t j = 0; j < 40 * KiB; j++)
		ASSERT_EQ(p[j], 1);
	resize_ok(p, 200 * KiB); /* 50 pages, past the block */
	ASSERT_EQ(m->npages, 50);
	ASSERT_EQ(B->pages_allocated, 50);
	for (size_t j = 0; j < 40 * KiB; j++)
		ASSERT_EQ(p[j], 1);
	free_ok(p);
	all_back();
}

struct waiter {
	void *p;
	int resize;
	int done; /* atomic */
};

static void *free_or_resize(void *arg)
{
	struct waiter *w = arg;
	if (w->resize)
		ASSERT_EQ(mb_large_resize(w->p, record(w->p), 100 * KiB, "realloc"), 0);
	else
		mb_large_free(w->p, record(w->p));
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* While the purge hands a block's reserved pages back (its lock dropped
 * for madvise), a free or a realloc of the block waits: its pages must
 * not go to another request, nor to the object, meanwhile. */
TEST(free_and_realloc_wait_for_a_tail_in_flight)
{
	heap();
	for (int resize = 0; resize < 2; resize++) {
		unsigned char *w = alloc_ok(128 * KiB, 0, MB_USERRCLM, 0);
		memset(w, 0xee, 128 * KiB);
		free_ok(w);
		void *p = alloc_ok(64 * KiB + 8, 0, MB_USERRCLM, 0);
		struct mb_purge_batch bt;
		mb_heap_lock();
		mb_buddy_purge_take(B, UINT64_MAX, 1 << 20, &bt);
		mb_heap_unlock();
		ASSERT_EQ(record(p)->flags & MB_PGF_TAIL_BUSY, MB_PGF_TAIL_BUSY);
		struct waiter wt = { p, resize, 0 };
		pthread_t t;
		ASSERT_EQ(pthread_create(&t, NULL, free_or_resize, &wt), 0);
		struct timespec ts = { 0, 50 * 1000000L };
		nanosleep(&ts, NULL);
		ASSERT_EQ(__atomic_load_n(&wt.done, __ATOMIC_ACQUIRE), 0);
		ASSERT_EQ(record(p)->state, MB_PG_ALLOC);
		ASSERT_EQ(mb_large_pages(record(p)), 17);
		mb_buddy_purge_release(B, &bt);
		mb_heap_lock();
		mb_buddy_purge_done(B, &bt);
		mb_heap_unlock();
		ASSERT_EQ(pthread_join(t, NULL), 0);
		ASSERT_EQ(wt.done, 1);
		if (resize) {
			ASSERT_EQ(mb_large_pages(record(p)), 25);
			free_ok(p);
		} else {
			ASSERT_EQ(record(p)->kind, MB_KIND_NONE);
		}
		all_back();
	}
}

/* Blocks spend the heap's room: once more than an eighth of its
 * pageblocks are in use, an object is cut to its length. */
TEST(no_blocks_in_a_heap_short_of_room)
{
	heap(); /* 16 pageblocks */
	void *big[2];
	for (int i = 0; i < 2; i++)
		big[i] = alloc_ok(4 * MiB, 0, MB_USERRCLM, 0);
	void *p = alloc_ok(64 * KiB + 8, 0, MB_USERRCLM, 0); /* the third pageblock */
	ASSERT_EQ(record(p)->npages, 32);
	void *q = alloc_ok(64 * KiB + 8, 0, MB_USERRCLM, 0);
	ASSERT_EQ(record(q)->npages, 17);
	ASSERT_EQ(mb_large_pages(record(q)), 17);
	free_ok(q);
	free_ok(p);
	for (int i = 0; i < 2; i++)
		free_ok(big[i]);
	all_back();
}

/* Growing stops at the next object: the object is left as it was. */
TEST(resize_blocked)
{
	heap();
	unsigned char *a = alloc_ok(32 * KiB, 0, MB_USERRCLM, 0);
	unsigned char *b = alloc_ok(32 * KiB, 0, MB_USERRCLM, 0);
	ASSERT_EQ(b, a + 32 * KiB); /* buddies */
	struct mb_page *m = record(a);
	uint64_t grows = mb_heap.inplace_grows;
	ASSERT_EQ(mb_large_resize(a, m, 40 * KiB, "realloc"), -1);
	ASSERT_BUDDY(B);
	ASSERT_EQ(m->npages, 8);
	ASSERT_EQ(m->user.u64, 32 * KiB);
	ASSERT_EQ(mb_heap.inplace_grows, grows);
	/* Nor past the end of the heap. */
	ASSERT_EQ(mb_large_resize(b, record(b), 65 * MiB, "realloc"), -1);
	ASSERT_BUDDY(B);
	free_ok(b);
	resize_ok(a, 40 * KiB);
	free_ok(a);
	all_back();
}

/* What the heap cannot give: ENOMEM, nothing changed. */
TEST(limits)
{
	heap();
	errno = 0;
	ASSERT_EQ(mb_large_alloc(65 * MiB, 0, MB_USERRCLM, 0), NULL);
	ASSERT_EQ(errno, ENOMEM);
	errno = 0;
	ASSERT_EQ(mb_large_alloc(64 * KiB, 128 * MiB, MB_USERRCLM, 0), NULL);
	ASSERT_EQ(errno, ENOMEM);
	ASSERT_BUDDY(B);
	/* The whole heap in one object, then not a page more. */
	void *all = alloc_ok(64 * MiB, 0, MB_KERNRCLM, 0);
	errno = 0;
	ASSERT_EQ(mb_large_alloc(20 * KiB, 0, MB_KERNRCLM, 0), NULL);
	ASSERT_EQ(errno, ENOMEM);
	ASSERT_BUDDY(B);
	free_ok(all);
	/* An alignment that only the over-allocation could meet. */
	void *pad = alloc_ok(20 * KiB, 0, MB_KERNRCLM, 0);
	errno = 0;
	ASSERT_EQ(mb_large_alloc(60 * MiB, 8 * MiB, MB_KERNRCLM, 0), NULL);
	ASSERT_EQ(errno, ENOMEM);
	ASSERT_BUDDY(B);
	free_ok(pad);
	all_back();
}

/* The runs a thread cache keeps: flagged cached, counted as objects of
 * the heap but not as the program's. */
TEST(cached_runs)
{
	heap();
	void *run[8];
	uint64_t mallocs = mb_heap.counts.mallocs[MB_USERRCLM];
	ASSERT_EQ(mb_large_alloc_cached(5, MB_USERRCLM, run, 8), 8);
	ASSERT_BUDDY(B);
	ASSERT_EQ(mb_heap.large_objects, 8);
	ASSERT_EQ(B->pages_allocated, 40);
	ASSERT_EQ(mb_heap.counts.mallocs[MB_USERRCLM], mallocs);
	for (int i = 0; i < 8; i++) {
		struct mb_page *m = record(run[i]);
		ASSERT_EQ(m->kind, MB_KIND_LARGE);
		ASSERT_EQ(m->user16, MB_LARGE_CACHED);
		ASSERT_EQ(m->npages, 5);
		ASSERT_EQ(m->type, MB_USERRCLM);
		/* Not the program's: it cannot resize one in place. */
	}
	mb_large_free_cached(run, 8);
	ASSERT_BUDDY(B);
	ASSERT_EQ(mb_heap.large_objects, 0);
	mb_large_free_cached(run, 0);
	all_back();
	/* No more than the heap holds. */
	void *many[20];
	ASSERT_EQ(mb_large_alloc_cached(1024, MB_KERNRCLM, many, 20), 16);
	ASSERT_BUDDY(B);
	mb_large_free_cached(many, 16);
	all_back();
}

/* A thread's run cache (runcache.h): a run freed into it is kept whole
 * (1) until its bin is full, then the older half goes back to the buddy
 * (2: the caller looks for memory to purge then, and only then); a run
 * over the budget first sends every run back (2); the newest run comes
 * out first. */
TEST(run_cache_says_when_runs_go_back)
{
	heap();
	static struct mb_runcache rc;
	struct mb_counts counts;
	memset(&rc, 0, sizeof rc);
	memset(&counts, 0, sizeof counts);
	size_t n = MB_RUN_MIN_PAGES * PAGE; /* the shortest run kept */
	void *run[MB_RUN_CAP + 1];
	for (int i = 0; i <= MB_RUN_CAP; i++)
		run[i] = alloc_ok(n, 0, MB_USERRCLM, 0);
	for (int i = 0; i < MB_RUN_CAP; i++)
		ASSERT_EQ(mb_runcache_put(&rc, &counts, run[i], record(run[i])), 1);
	size_t allocated = B->pages_allocated;
	ASSERT_EQ(rc.bytes, MB_RUN_CAP * n);
	ASSERT_EQ(mb_runcache_put(&rc, &counts, run[MB_RUN_CAP], record(run[MB_RUN_CAP])), 2);
	ASSERT_BUDDY(B);
	ASSERT_EQ(B->pages_allocated, allocated - (MB_RUN_CAP / 2) * MB_RUN_MIN_PAGES);
	ASSERT_EQ(rc.bytes, (MB_RUN_CAP / 2 + 1) * n);
	ASSERT_EQ(counts.frees, MB_RUN_CAP + 1);
	/* Last in, first out, with the program's size on its record. */
	void *p = mb_runcache_get(&rc, &counts, n - 100, MB_USERRCLM);
	ASSERT_EQ(p, run[MB_RUN_CAP]);
	ASSERT_EQ(record(p)->user16, 0);
	ASSERT_EQ(record(p)->user.u64, n - 100);
	ASSERT_EQ(mb_runcache_put(&rc, &counts, p, record(p)), 1);
	/* Runs of every length and type, never a bin's last: the run that
	 * would pass the budget sends every run back first. */
	size_t big = (MB_RUN_MIN_PAGES + MB_RUN_LENGTHS - 1) * PAGE, last = 0;
	int gave = 0;
	for (int t = 0; t < MB_NTYPES && !gave; t++)
		for (size_t len = MB_RUN_MIN_PAGES; len < MB_RUN_MIN_PAGES + MB_RUN_LENGTHS && !gave; len++)
			for (int i = 0; i < MB_RUN_CAP - 1 && !gave; i++) {
				void *q = alloc_ok(len * PAGE, 0, t, 0);
				size_t before = rc.bytes;
				int r = mb_runcache_put(&rc, &counts, q, record(q));
				ASSERT_NE(r, 0);
				if (r == 2) {
					ASSERT_GT(before + len * PAGE, MB_RUN_BUDGET);
					gave = 1;
					last = len * PAGE;
				}
				ASSERT_LE(rc.bytes, MB_RUN_BUDGET);
			}
	ASSERT_EQ(gave, 1);
	ASSERT_EQ(rc.bytes, last);
	ASSERT_BUDDY(B);
	/* Too long for the cache: not kept. */
	void *huge_run = alloc_ok(big + PAGE, 0, MB_USERRCLM, 0);
	ASSERT_EQ(mb_runcache_put(&rc, &counts, huge_run, record(huge_run)), 0);
	free_ok(huge_run);
	ASSERT_EQ(mb_runcache_flush(&rc), 1);
	ASSERT_EQ(rc.bytes, 0);
	/* The runs' frees were counted where a thread counts them: fold them
	 * into the heap's, as a thread's exit does, for the balance. */
	mb_heap.counts.live_requested += counts.live_requested;
	mb_heap.counts.freed_bytes += counts.freed_bytes;
	mb_heap.counts.alloc_bytes += counts.alloc_bytes;
	all_back();
}

/* ---- misuse: reported, and the process aborts ---- */

static void *victim;

static void double_free(void *arg)
{
	(void)arg;
	mb_large_free(victim, record(victim));
	mb_large_free(victim, record(victim));
}

static void free_cached(void *arg)
{
	(void)arg;
	void *run;
	ASSERT_EQ(mb_large_alloc_cached(4, MB_KERNRCLM, &run, 1), 1);
	mb_large_free(run, record(run));
}

static void resize_freed(void *arg)
{
	(void)arg;
	mb_large_free(victim, record(victim));
	mb_large_resize(victim, record(victim), 64 * KiB, "realloc");
}

static void expect_abort(void (*fn)(void *), const char *message)
{
	struct test_child c;
	test_child_run(&c, fn, NULL);
	if (c.status != 128 + SIGABRT || !strstr(c.out, message))
		FAIL("status %d, want %d (SIGABRT), and \"%s\" in:\n%s", c.status, 128 + SIGABRT, message, c.out);
}

TEST(misuse_aborts)
{
	heap();
	victim = alloc_ok(40 * KiB, 0, MB_KERNRCLM, 0);
	char msg[128];
	snprintf(msg, sizeof msg, "libmbuddy: free(): double free or invalid pointer: %p", victim);
	expect_abort(double_free, msg);
	expect_abort(free_cached, "libmbuddy: free(): double free or invalid pointer");
	snprintf(msg, sizeof msg, "libmbuddy: realloc(): double free or invalid pointer: %p", victim);
	expect_abort(resize_freed, msg);
	/* The parent's heap is untouched. */
	free_ok(victim);
	all_back();
}
