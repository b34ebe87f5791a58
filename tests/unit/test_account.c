/* The account of the resident set (account.c) over a heap of its own,
 * both ways it is taken: from /proc/self/smaps_rollup with the
 * allocator's mappings, the heap region and the main stack measured by
 * mincore (every account of a process with no anonymous huge pages),
 * and mapping by mapping from /proc/self/smaps. Part by part, the two
 * agree; the heap's parts add up to the heap region's resident pages;
 * the parts add up to the resident set; and a process with anonymous
 * huge pages is read from smaps, which alone says whose they are. */
#include "config.h"
#include "harness.h"
#include "account.h"
#include "large.h"
#include "out.h"


#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define PAGE ((uint64_t)MB_PAGE_SIZE)

/* AnonHugePages of the whole process, in bytes; 0 if unreadable. */
static uint64_t anon_huge_now(void)
{
	char buf[4096];
	if (mb_read_small("/proc/self/smaps_rollup", buf, sizeof buf) <= 0)
		return 0;
	const char *f = strstr(buf, "\nAnonHugePages:");
	return f ? (uint64_t)strtoull(f + 15, NULL, 10) << 10 : 0;
}

/* Within slack bytes and a hundredth: what the process touched between
 * the two accounts. */
static void near(const char *what, uint64_t cheap, uint64_t exact, uint64_t slack)
{
	uint64_t d = cheap > exact ? cheap - exact : exact - cheap;
	if (d > slack + exact / 100)
		FAIL("%s: %" PRIu64 " KiB from smaps_rollup and mincore, %" PRIu64 " KiB from smaps", what,
		     cheap >> 10, exact >> 10);
}

static void adds_up(const char *how, const struct mb_account *a)
{
	uint64_t sum = mb_account_sum(a);
	if ((sum > a->rss ? sum - a->rss : a->rss - sum) > a->rss / 50)
		FAIL("%s: parts %" PRIu64 " KiB, resident set %" PRIu64 " KiB", how, sum >> 10, a->rss >> 10);
	near("heap: walked against resident", a->heap_walked, a->heap_rss, 2 * PAGE);
}

/* Both accounts taken from the same depth of stack, twice each so that
 * what the first takes touch (their buffers) is resident for both. */
static __attribute__((noinline)) void take_both(struct mb_account *cheap, struct mb_account *exact)
{
	for (int i = 0; i < 2; i++) {
		ASSERT_EQ(mb_account_take(cheap), 0);
		ASSERT_EQ(mb_account_take_by(exact, MB_ACCOUNT_BY_MAPPING), 0);
	}
}

/* A stack of some 300 KiB below this frame, written: the main stack's
 * resident pages reach well past the few the test needs otherwise. */
static __attribute__((noinline)) void deep(struct mb_account *cheap, struct mb_account *exact)
{
	volatile char pad[300 * KiB];
	for (size_t i = 0; i < sizeof pad; i += 512)
		pad[i] = (char)i;
	take_both(cheap, exact);
	(void)pad[7];
}

TEST(cheap_account_agrees_with_smaps)
{
	test_heap_setup(64 * MiB, MB_MAX_ORDER_DEFAULT, 3600000);
	/* Heap: large objects written in part, some freed. */
	void *obj[40];
	for (int i = 0; i < 40; i++) {
		obj[i] = mb_large_alloc((size_t)(i % 8 + 5) * 16 * KiB, 0, MB_USERRCLM, 0);
		ASSERT(obj[i] != NULL);
		memset(obj[i], 1, (size_t)(i % 8 + 1) * 8 * KiB);
	}
	for (int i = 0; i < 40; i += 3)
		mb_large_free(obj[i], &mb_heap.buddy.pages[mb_buddy_page_index(&mb_heap.buddy, obj[i])]);
	/* Not the heap: a private mapping of the program's, written in
	 * part, and a file mapped privately, of which it read 512 KiB and
	 * wrote 256: the written pages are its own copies, anonymous. */
	char *own = mmap(NULL, 4 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(own != MAP_FAILED);
	madvise(own, 4 * MiB, MADV_NOHUGEPAGE);
	memset(own, 2, 1 * MiB + 12 * KiB);
	FILE *tmp = tmpfile();
	ASSERT(tmp != NULL);
	ASSERT_EQ(ftruncate(fileno(tmp), 1 * MiB), 0);
	char *file = mmap(NULL, 1 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE, fileno(tmp), 0);
	ASSERT(file != MAP_FAILED);
	volatile char sum = 0;
	for (size_t i = 0; i < 512 * KiB; i += PAGE)
		sum += file[i];
	memset(file, 4, 256 * KiB);
	if (anon_huge_now())
		SKIP("the process has anonymous huge pages already: no account from smaps_rollup");

	struct mb_account cheap, exact;
	deep(&cheap, &exact);
	ASSERT_EQ(cheap.by_mapping, 0);
	ASSERT_EQ(exact.by_mapping, 1);
	adds_up("from smaps_rollup", &cheap);
	adds_up("from smaps", &exact);
	near("heap region", cheap.heap_rss, exact.heap_rss, 2 * PAGE);
	ASSERT(cheap.heap_rss >= 20 * 64 * KiB);
	near("metadata", cheap.meta_rss, exact.meta_rss, 2 * PAGE);
	for (int u = 0; u < MB_USE_COUNT; u++)
		near("metadata by use", cheap.meta_use[u], exact.meta_use[u], 2 * PAGE);
	ASSERT(cheap.meta_use[MB_USE_PAGES] > 0);
	/* The stack of deep() and its callers: resident, and the same to
	 * the page, from the same depth. */
	ASSERT(exact.stack_rss >= 300 * KiB);
	if (cheap.stack_rss != exact.stack_rss)
		FAIL("main stack: %" PRIu64 " KiB by mincore, %" PRIu64 " KiB from smaps", cheap.stack_rss >> 10,
		     exact.stack_rss >> 10);
	near("file pages", cheap.file_rss, exact.file_rss, 4 * PAGE);
	ASSERT(cheap.file_rss >= 256 * KiB);
	ASSERT(cheap.anon_rss >= 1 * MiB + 256 * KiB);
	near("other private memory", cheap.anon_rss, exact.anon_rss, 4 * PAGE);
	ASSERT_EQ(cheap.heap_anon_huge, 0);
	NOTE("resident %" PRIu64 " KiB: heap %" PRIu64 ", metadata %" PRIu64 ", files %" PRIu64 ", stack %" PRIu64
	     ", other %" PRIu64 " (smaps: %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 ")",
	     cheap.rss >> 10, cheap.heap_rss >> 10, cheap.meta_rss >> 10, cheap.file_rss >> 10, cheap.stack_rss >> 10,
	     cheap.anon_rss >> 10, exact.heap_rss >> 10, exact.meta_rss >> 10, exact.file_rss >> 10,
	     exact.stack_rss >> 10, exact.anon_rss >> 10);
	munmap(own, 4 * MiB);
	munmap(file, 1 * MiB);
	fclose(tmp);
	for (int i = 0; i < 40; i++)
		if (i % 3)
			mb_large_free(obj[i], &mb_heap.buddy.pages[mb_buddy_page_index(&mb_heap.buddy, obj[i])]);
}

/* With anonymous huge pages anywhere in the process, the account reads
 * smaps: the rollup cannot say whether they are the heap's. */
TEST(huge_pages_are_read_by_mapping)
{
	test_heap_setup(64 * MiB, MB_MAX_ORDER_DEFAULT, 3600000);
	size_t len = 8 * MiB;
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(m != MAP_FAILED);
	char *huge = (char *)(((uintptr_t)m + 2 * MiB - 1) & ~(uintptr_t)(2 * MiB - 1));
	madvise(huge, 4 * MiB, MADV_HUGEPAGE);
	memset(huge, 3, 4 * MiB);
	if (!anon_huge_now()) {
		munmap(m, len);
		SKIP("no transparent huge page came (THP off or memory fragmented)");
	}
	struct mb_account a;
	ASSERT_EQ(mb_account_take(&a), 0);
	ASSERT_EQ(a.by_mapping, 1);
	adds_up("with huge pages", &a);
	ASSERT_EQ(a.heap_anon_huge, 0); /* they are the program's, not the heap's */
	ASSERT(a.anon_rss >= 4 * MiB);
	munmap(m, len);
}
