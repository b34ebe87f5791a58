/* Running out of heap under LD_PRELOAD=libmbuddy.so with
 * MBUDDY_HEAP_SIZE=64M (tests/preload/exhaustion.env; without it the
 * program sets it and runs itself again).
 *
 * For each size range (64 B, 1000 B and 16 KiB objects, 64 KiB, 8 MiB, and
 * one block grown by realloc), allocate until NULL: errno must be ENOMEM,
 * the amount obtained must be plausible for a 64 MiB heap (not more, and
 * not much less), every block must still hold its tag, and while the heap
 * is full every other entry point must fail cleanly with ENOMEM. Then
 * free everything: the process carries on and the same amount can be
 * allocated again (and a different size range after a full one).
 *
 * Bookkeeping lives in mmap'd memory so the test itself takes no heap.
 * The whole runs a second time with MBUDDY_DECAY_MS=0, where memory on its
 * way back to the kernel is met all the time. */
#define _GNU_SOURCE 1
#include "ptest.h"

#include <malloc.h>
#include <sys/mman.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define HEAP (64 * MiB)
#define MAXPTRS ((size_t)2 << 20)

static void **ptrs;

/* Allocate `n`-byte blocks until malloc fails; tag each; returns the count. */
static size_t fill_heap(size_t n, const char *what)
{
	size_t count = 0;
	for (;;) {
		PT_REQUIRE(count < MAXPTRS, "%s: more than %zu blocks of %zu bytes from a 64 MiB heap", what, MAXPTRS, n);
		errno = 0;
		unsigned char *p = malloc(n);
		if (!p) {
			PT_CHECK(errno == ENOMEM, "%s: malloc(%zu) failed with errno %d (%s), want ENOMEM", what, n, errno,
			         strerror(errno));
			break;
		}
		/* Tag the first and last word (and so touch the memory). */
		uint64_t tag = (uint64_t)count * 0x9E3779B97F4A7C15ULL + n;
		memcpy(p, &tag, n < 8 ? n : 8);
		if (n >= 16)
			memcpy(p + n - 8, &tag, 8);
		ptrs[count++] = p;
	}
	return count;
}

static void check_and_free(size_t count, size_t n, const char *what)
{
	size_t bad = 0;
	for (size_t i = 0; i < count; i++) {
		unsigned char *p = ptrs[i];
		uint64_t tag = (uint64_t)i * 0x9E3779B97F4A7C15ULL + n, a = 0, b = tag;
		memcpy(&a, p, n < 8 ? n : 8);
		if (n >= 16)
			memcpy(&b, p + n - 8, 8);
		if (memcmp(&a, &tag, n < 8 ? n : 8) != 0 || b != tag)
			bad++;
	}
	PT_CHECK(bad == 0, "%s: %zu of %zu blocks lost their tags (overlapping blocks?)", what, bad, count);
	for (size_t i = 0; i < count; i++)
		free(ptrs[i]);
}

/* With the heap full: every entry point that needs new pages fails with
 * ENOMEM and leaves its arguments alone. */
static void everything_fails(const char *what)
{
	void *p;
	errno = 0;
	p = malloc(256 * KiB);
	PT_CHECK(!p && errno == ENOMEM, "%s: malloc(256K) = %p, errno %d", what, p, errno);
	free(p);
	errno = 0;
	p = calloc(1, 256 * KiB);
	PT_CHECK(!p && errno == ENOMEM, "%s: calloc(1, 256K) = %p, errno %d", what, p, errno);
	free(p);
	errno = 0;
	p = memalign(MiB, 10);
	PT_CHECK(!p && errno == ENOMEM, "%s: memalign(1M, 10) = %p, errno %d", what, p, errno);
	free(p);
	errno = 0;
	p = aligned_alloc(64 * KiB, 64 * KiB);
	PT_CHECK(!p && errno == ENOMEM, "%s: aligned_alloc(64K, 64K) = %p, errno %d", what, p, errno);
	free(p);
	errno = 0;
	p = valloc(300 * KiB);
	PT_CHECK(!p && errno == ENOMEM, "%s: valloc(300K) = %p, errno %d", what, p, errno);
	free(p);
	void *q = &p;
	errno = 1234;
	int rc = posix_memalign(&q, 4096, 512 * KiB);
	PT_CHECK(rc == ENOMEM && q == (void *)&p, "%s: posix_memalign(4096, 512K) = %d", what, rc);
	errno = 0;
	p = reallocarray(NULL, 1000, 1000);
	PT_CHECK(!p && errno == ENOMEM, "%s: reallocarray(NULL, 1000, 1000) = %p, errno %d", what, p, errno);
	free(p);
}

struct range {
	size_t size;
	const char *name;
	size_t min_count; /* at least this many from an otherwise empty 64 MiB heap */
};

static void exhaust(const struct range *rg)
{
	size_t n = rg->size, max = HEAP / n;
	size_t c1 = fill_heap(n, rg->name);
	pt_msg("%s: %zu blocks (%zu KiB of a %zu KiB heap)", rg->name, c1, c1 * n / KiB, HEAP / KiB);
	PT_CHECK(c1 <= max, "%s: %zu blocks of %zu bytes from a 64 MiB heap: MBUDDY_HEAP_SIZE not applied?", rg->name,
	         c1, n);
	PT_CHECK(c1 >= rg->min_count, "%s: only %zu blocks of %zu bytes from a 64 MiB heap (want >= %zu)", rg->name, c1,
	         n, rg->min_count);
	if (n <= 64 * KiB) /* no room left for a few dozen pages */
		everything_fails(rg->name);
	/* The blocks that did fit are all intact, and freeing gives them back. */
	check_and_free(c1, n, rg->name);
	size_t c2 = fill_heap(n, rg->name);
	PT_CHECK(c2 + c2 / 50 + 2 >= c1, "%s: after freeing everything only %zu blocks fit again (first time %zu)", rg->name,
	         c2, c1);
	check_and_free(c2, n, rg->name);
}

static void realloc_growth(void)
{
	size_t step = 3 * MiB + 123, n = 1000;
	unsigned char *p = malloc(n);
	PT_REQUIRE(p != NULL, "malloc(1000)");
	pt_fill(p, n, 5);
	/* A few blocks in the way, so some growth must move. */
	void *bump[6];
	for (int i = 0; i < 6; i++) {
		bump[i] = malloc(MiB);
		PT_REQUIRE(bump[i] != NULL, "malloc(1M)");
	}
	for (;;) {
		size_t want = n + step;
		errno = 0;
		unsigned char *q = realloc(p, want);
		if (!q) {
			PT_CHECK(errno == ENOMEM, "realloc(%zu -> %zu) failed with errno %d, want ENOMEM", n, want, errno);
			break;
		}
		p = q;
		pt_fill_range(p, n, want, 5);
		n = want;
		if (n > HEAP) {
			PT_CHECK(0, "realloc grew a block to %zu bytes in a 64 MiB heap", n);
			break;
		}
	}
	pt_msg("realloc growth: reached %zu KiB", n / KiB);
	/* Growing by 3 MiB steps while other 6 MiB are held: moves need the
	 * old and new copies at once, so about half the heap is the ceiling.
	 * The floor is a quarter: what lives for good, the allocator's own
	 * records among it (libunwind's, in the own key's slabs, loaded when
	 * scheduling has it), holds a pageblock wherever the heap had room
	 * at that moment, and one held in the middle halves the longest run
	 * (21.5 MiB was seen in a loaded test run, 51 MiB usually). */
	PT_CHECK(n >= 16 * MiB, "realloc growth stopped at %zu bytes in a 64 MiB heap", n);
	PT_CHECK(pt_intact(p, n, 5), "the block lost its contents when realloc failed");
	/* Grow one page at a time at the limit: in-place growth until it
	 * cannot, then ENOMEM with the block intact. */
	for (;;) {
		errno = 0;
		unsigned char *q = realloc(p, n + 4096);
		if (!q) {
			PT_CHECK(errno == ENOMEM, "realloc by one page failed with errno %d", errno);
			break;
		}
		p = q;
		pt_fill_range(p, n, n + 4096, 5);
		n += 4096;
		if (n > HEAP) {
			PT_CHECK(0, "realloc grew a block to %zu bytes", n);
			break;
		}
	}
	PT_CHECK(pt_intact(p, n, 5), "the block lost its contents at the limit");
	/* Shrinking always works, even with the heap full. */
	unsigned char *q = realloc(p, n / 4);
	PT_CHECK(q != NULL, "realloc shrinking %zu -> %zu failed with the heap full", n, n / 4);
	if (q) {
		p = q;
		n /= 4;
	}
	PT_CHECK(pt_intact(p, n, 5), "shrinking lost contents");
	free(p);
	for (int i = 0; i < 6; i++)
		free(bump[i]);
}

/* After a heap full of small objects is freed, large blocks fit again
 * (slabs went back to the buddy and coalesced), and the other way round. */
static void mixed(void)
{
	size_t c = fill_heap(64, "small before large");
	check_and_free(c, 64, "small before large");
	void *big[8];
	int got = 0;
	for (int i = 0; i < 8; i++) {
		big[i] = malloc(6 * MiB);
		got += big[i] != NULL;
	}
	pt_msg("after freeing %zu small blocks: %d of 8 blocks of 6 MiB fit", c, got);
	PT_CHECK(got >= 6, "after freeing a heap full of small blocks only %d blocks of 6 MiB fit in 64 MiB", got);
	for (int i = 0; i < 8; i++)
		free(big[i]);
	size_t l = fill_heap(8 * MiB, "large before small");
	check_and_free(l, 8 * MiB, "large before small");
	size_t s = fill_heap(1000, "small after large");
	PT_CHECK(s >= HEAP / 1000 * 3 / 4, "after freeing large blocks only %zu blocks of 1000 bytes fit", s);
	check_and_free(s, 1000, "small after large");
}

int main(int argc, char **argv)
{
	(void)argc;
	pt_init("exhaustion");
	if (!pt_mbuddy) {
		pt_msg("SKIP: exhausting the default allocator would exhaust the machine");
		return PT_SKIP;
	}
	const char *mo = getenv("MBUDDY_MAX_ORDER");
	if (mo && atoi(mo) > 14) {
		pt_msg("SKIP: MBUDDY_MAX_ORDER=%s: a 64 MiB heap is less than two pageblocks", mo);
		return PT_SKIP;
	}
	const char *hs = getenv("MBUDDY_HEAP_SIZE");
	if (!hs || strcmp(hs, "64M") != 0) {
		/* The heap is sized at the first malloc, long before main: run
		 * again with the size set. */
		if (getenv("MBUDDY_EXHAUSTION_REEXEC")) {
			pt_msg("FAIL: MBUDDY_HEAP_SIZE=64M did not survive exec");
			return 1;
		}
		setenv("MBUDDY_HEAP_SIZE", "64M", 1);
		setenv("MBUDDY_EXHAUSTION_REEXEC", "1", 1);
		execv("/proc/self/exe", argv);
		pt_msg("FAIL: cannot run again with MBUDDY_HEAP_SIZE=64M: %s", strerror(errno));
		return 1;
	}
	pt_watchdog(60);
	ptrs = mmap(NULL, MAXPTRS * sizeof *ptrs, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	PT_REQUIRE(ptrs != MAP_FAILED, "mmap");

	static const struct range ranges[] = {
		{ 64, "small 64 B", HEAP / 64 * 9 / 10 },
		{ 1000, "small 1000 B", HEAP / 1000 * 8 / 10 },
		{ 16 * KiB, "small 16 KiB", HEAP / (16 * KiB) * 9 / 10 },
		{ 64 * KiB, "medium 64 KiB", HEAP / (64 * KiB) * 9 / 10 },
		{ 8 * MiB, "large 8 MiB", 5 },
	};
	for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
		exhaust(&ranges[i]);
	realloc_growth();
	mixed();

	/* The process carries on: every size works again. */
	for (size_t n = 1; n <= 16 * MiB; n = n * 4 + 1) {
		void *p = malloc(n);
		PT_CHECK(p != NULL, "malloc(%zu) at the end failed", n);
		if (p)
			memset(p, 3, n);
		free(p);
	}
	if (pt_failures || getenv("MBUDDY_DECAY_MS"))
		return pt_finish();
	/* Once more with MBUDDY_DECAY_MS=0: freed memory is handed back at
	 * once, so allocations keep meeting memory on its way to the kernel,
	 * out of reach for a moment. They must wait for it, not fail. */
	pt_msg("again with MBUDDY_DECAY_MS=0");
	setenv("MBUDDY_DECAY_MS", "0", 1);
	execv("/proc/self/exe", argv);
	pt_msg("FAIL: cannot run again with MBUDDY_DECAY_MS=0: %s", strerror(errno));
	return 1;
}
