/* Unit tests of the typed buddy core, with the consistency checker run after
 * every operation. */
#include "config.h"
#include "harness.h"

#include <string.h>
#include <sys/mman.h>

static struct mb_buddy B;

static long alloc_ok(struct mb_buddy *b, size_t n, int type)
{
	long idx = mb_buddy_alloc(b, n, type, NULL);
	ASSERT_GE(idx, 0);
	ASSERT_BUDDY(b);
	ASSERT_EQ(b->pages[idx].state, MB_PG_ALLOC);
	ASSERT_EQ(b->pages[idx].npages, n);
	return idx;
}

static void free_ok(struct mb_buddy *b, long idx)
{
	mb_buddy_free(b, (size_t)idx);
	ASSERT_BUDDY(b);
}

static int all_lists_empty(const struct mb_buddy *b)
{
	for (int t = 0; t < MB_NTYPES; t++)
		for (unsigned o = 0; o < b->pb_order; o++)
			if (b->free_area[t][o].nr_free)
				return 0;
	return 1;
}

/* Everything was freed: every pageblock back in the pool, no list holds a
 * block; the region goes. */
static void whole_again_and_gone(struct mb_buddy *b)
{
	ASSERT_EQ(b->nr_global, b->nblocks);
	ASSERT(all_lists_empty(b));
	test_buddy_free_region(b);
}

/* An order-k request splits a fresh pageblock into one free block at every
 * order from k to the top, and freeing it coalesces all the way back. */
TEST(split_and_coalesce_every_order)
{
	test_buddy_new(&B, 2, MB_MAX_ORDER_DEFAULT);
	for (unsigned k = 0; k <= B.pb_order; k++) {
		long idx = alloc_ok(&B, (size_t)1 << k, MB_USERRCLM);
		ASSERT_EQ(idx % (1L << k), 0);
		for (unsigned o = 0; o < B.pb_order; o++)
			ASSERT_EQ(B.free_area[MB_USERRCLM][o].nr_free, (o >= k ? 1u : 0u));
		ASSERT_EQ(B.nr_global, 1);
		free_ok(&B, idx);
		ASSERT_EQ(B.nr_global, 2);
		ASSERT(all_lists_empty(&B));
	}
	ASSERT_EQ(B.count.global_steals, B.pb_order + 1);
	ASSERT_EQ(B.count.global_refills, B.pb_order + 1);

	/* Two order-0 pages coalesce into one order-1 block when both free. */
	long a = alloc_ok(&B, 1, MB_KERNRCLM), c = alloc_ok(&B, 1, MB_KERNRCLM);
	ASSERT_EQ((a ^ c), 1);
	free_ok(&B, a);
	ASSERT_EQ(B.free_area[MB_KERNRCLM][0].nr_free, 1);
	free_ok(&B, c);
	ASSERT_EQ(B.nr_global, 2);
	ASSERT(all_lists_empty(&B));
	test_buddy_free_region(&B);
}

/* Stealing from the global pool reserves the whole pageblock for the type. */
TEST(steal_reserves_pageblock)
{
	test_buddy_new(&B, 4, MB_MAX_ORDER_DEFAULT);
	long u = alloc_ok(&B, 1, MB_USERRCLM);
	size_t pbu = (size_t)u >> B.pb_order;
	ASSERT_EQ(mb_buddy_pb_type(&B, pbu), MB_USERRCLM);
	ASSERT_EQ(B.pb_owned[MB_USERRCLM], 1);
	ASSERT_EQ(B.count.global_steals, 1);

	/* Another type never shares it while the pool has pageblocks. */
	long k = alloc_ok(&B, 1, MB_KERNNORCLM);
	ASSERT_NE(((size_t)k >> B.pb_order), pbu);
	ASSERT_EQ(mb_buddy_pb_type(&B, (size_t)k >> B.pb_order), MB_KERNNORCLM);
	/* The same type keeps using its own pageblock. */
	long u2 = alloc_ok(&B, 3, MB_USERRCLM);
	ASSERT_EQ(((size_t)u2 >> B.pb_order), pbu);
	ASSERT_EQ(B.count.global_steals, 2);
	ASSERT_EQ(B.count.allocs[MB_USERRCLM], 2);
	ASSERT_EQ(B.count.allocs[MB_KERNNORCLM], 1);
	free_ok(&B, u);
	free_ok(&B, k);
	free_ok(&B, u2);
	ASSERT_EQ(B.nr_global, 4);
	test_buddy_free_region(&B);
}

/* Freeing everything, in any order, returns every pageblock to the pool. */
TEST(free_everything_returns_pool)
{
	test_buddy_new(&B, 8, 8);
	long idx[600];
	int n = 0;
	unsigned seed = 7;
	for (int i = 0; i < 600; i++) {
		seed = seed * 1103515245 + 12345;
		size_t np = 1 + (seed >> 16) % 40;
		long x = mb_buddy_alloc(&B, np, (int)((seed >> 8) % 3), NULL);
		if (x >= 0)
			idx[n++] = x;
	}
	ASSERT_BUDDY(&B);
	ASSERT_GT(n, 10);
	for (int i = 0; i < n; i += 2)
		free_ok(&B, idx[i]);
	for (int i = 1; i < n; i += 2)
		free_ok(&B, idx[i]);
	ASSERT_EQ(B.nr_global, B.nblocks);
	ASSERT(all_lists_empty(&B));
	ASSERT_EQ(B.pages_allocated, 0);
	for (int t = 0; t < MB_NTYPES; t++)
		ASSERT_EQ(B.pb_owned[t], 0);
	test_buddy_free_region(&B);
}

/* Two home users allocating in turn fill separate pageblocks, each one
 * completely before the next; freeing everything of one user gives its
 * pageblocks back whole while the other's stay. */
TEST(homes_keep_users_apart)
{
	test_buddy_new(&B, 8, 8); /* pageblocks of 128 pages */
	long a[256], c[256];
	for (int i = 0; i < 256; i++) {
		a[i] = mb_buddy_alloc_home(&B, 2, MB_KERNNORCLM, 0, NULL);
		c[i] = mb_buddy_alloc_home(&B, 2, MB_KERNNORCLM, 1, NULL);
		ASSERT_GE(a[i], 0);
		ASSERT_GE(c[i], 0);
		ASSERT_BUDDY(&B);
	}
	/* 256 allocations of 2 pages are 4 full pageblocks per user. */
	for (int i = 0; i < 256; i++) {
		ASSERT_NE((size_t)a[i] >> B.pb_order, (size_t)c[i] >> B.pb_order);
		ASSERT_EQ((size_t)a[i] >> B.pb_order, (size_t)a[i & ~63] >> B.pb_order);
	}
	ASSERT_EQ(B.nr_global, 0);
	for (int i = 0; i < 256; i++)
		free_ok(&B, c[i]);
	ASSERT_EQ(B.nr_global, 4);
	ASSERT_EQ(B.pb_owned[MB_KERNNORCLM], 4);
	/* The home is refilled, and then a block outside the other home. */
	for (int i = 0; i < 64; i++)
		c[i] = mb_buddy_alloc_home(&B, 2, MB_KERNNORCLM, 1, NULL);
	ASSERT_EQ(B.nr_global, 3);
	for (int i = 0; i < 64; i++)
		free_ok(&B, c[i]);
	for (int i = 0; i < 256; i++)
		free_ok(&B, a[i]);
	whole_again_and_gone(&B);
}

/* A block freed in a home user's home long ago, now behind more than
 * HOME_SCAN blocks freed since in another pageblock of its type, is still
 * the one it gets: the home does not move to where memory was freed last. */
TEST(home_block_found_deep_in_the_lists)
{
	test_buddy_new(&B, 8, 8);
	/* The home user fills one pageblock, a plain user the next. */
	long home[128], other[128];
	size_t hpb = 0;
	for (int i = 0; i < 128; i++) {
		home[i] = mb_buddy_alloc_home(&B, 1, MB_KERNRCLM, 0, NULL);
		ASSERT_GE(home[i], 0);
		if (i == 0)
			hpb = (size_t)home[0] >> B.pb_order;
		ASSERT_EQ((size_t)home[i] >> B.pb_order, hpb);
	}
	for (int i = 0; i < 128; i++)
		other[i] = alloc_ok(&B, 1, MB_KERNRCLM);
	size_t opb = (size_t)other[0] >> B.pb_order;
	ASSERT_NE(opb, hpb);
	/* One page freed in the home, then 20 single pages (no two of them
	 * buddies) in the other pageblock. */
	free_ok(&B, home[5]);
	for (int i = 0; i < 40; i += 2)
		free_ok(&B, other[i]);
	int pos = 0;
	for (uint32_t idx = B.free_area[MB_KERNRCLM][0].head; idx != MB_NIL && (long)idx != home[5]; idx = B.pages[idx].next)
		pos++;
	ASSERT_GE(pos, 16);
	ASSERT_EQ(B.free_area[MB_KERNRCLM][0].nr_free, 21);
	/* The home's page it is, and the home stays. */
	long again = mb_buddy_alloc_home(&B, 1, MB_KERNRCLM, 0, NULL);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(again, home[5]);
	ASSERT_EQ(B.home[0], (long)hpb);
	/* With the home full, a block elsewhere, and the home follows it. */
	long next = mb_buddy_alloc_home(&B, 1, MB_KERNRCLM, 0, NULL);
	ASSERT_BUDDY(&B);
	ASSERT_EQ((size_t)next >> B.pb_order, opb);
	ASSERT_EQ(B.home[0], (long)opb);
	free_ok(&B, next);
	for (int i = 0; i < 128; i++) {
		free_ok(&B, home[i]);
		if (i % 2 || i >= 40)
			free_ok(&B, other[i]);
	}
	whole_again_and_gone(&B);
}

/* A user that shares its type's pageblocks takes the pages a plain user
 * freed last, resident, before the clean remainder of the pageblock it
 * took from the pool: a home user would carve that remainder first. The
 * pageblock it took from becomes its home. */
TEST(shared_user_takes_resident_memory_first)
{
	test_buddy_new(&B, 8, 8); /* pageblocks of 128 pages */
	long plain[128];
	for (int i = 0; i < 128; i++)
		plain[i] = alloc_ok(&B, 1, MB_KERNRCLM);
	size_t q = (size_t)plain[0] >> B.pb_order;
	int zeroed = -1;
	long first = mb_buddy_alloc_shared(&B, 1, MB_KERNRCLM, 0, &zeroed);
	ASSERT_BUDDY(&B);
	size_t p = (size_t)first >> B.pb_order;
	ASSERT_NE(p, q);
	ASSERT_EQ(zeroed, 1);
	ASSERT_EQ(B.home[0], (long)p);
	/* Every other page of the plain user's pageblock freed (no two of
	 * them buddies): dirty single pages, while the shared user's
	 * pageblock has 127 clean ones. */
	for (int i = 0; i < 128; i += 2)
		free_ok(&B, plain[i]);
	long next = mb_buddy_alloc_shared(&B, 1, MB_KERNRCLM, 0, &zeroed);
	ASSERT_BUDDY(&B);
	ASSERT_EQ((size_t)next >> B.pb_order, q);
	ASSERT_EQ(zeroed, 0);
	ASSERT_EQ(B.home[0], (long)q);
	/* A row of resident blocks for a request that is not a power of two:
	 * pages 8-9 (one block once merged) and 10, not a clean block of 4. */
	free_ok(&B, plain[9]);
	long row = mb_buddy_alloc_shared(&B, 3, MB_KERNRCLM, 0, &zeroed);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(row, plain[8]);
	ASSERT_EQ(zeroed, 0);
	free_ok(&B, row);
	free_ok(&B, next);
	free_ok(&B, first);
	for (int i = 1; i < 128; i += 2)
		if (i != 9)
			free_ok(&B, plain[i]);
	whole_again_and_gone(&B);
}

/* A shared user never takes memory in another user's home, neither a
 * block nor a row, even when that is all the resident memory there is:
 * a fresh pageblock rather than a lane's holes. */
TEST(shared_user_keeps_out_of_other_homes)
{
	test_buddy_new(&B, 8, 8);
	long lane[128];
	for (int i = 0; i < 128; i++) {
		lane[i] = mb_buddy_alloc_home(&B, 1, MB_KERNRCLM, 5, NULL);
		ASSERT_GE(lane[i], 0);
	}
	ASSERT_BUDDY(&B);
	size_t h = (size_t)lane[0] >> B.pb_order;
	ASSERT_EQ(B.home[5], (long)h);
	/* Holes in the lane's home: a row (pages 4-5 merged, then 6) and a
	 * single page (10). */
	free_ok(&B, lane[4]);
	free_ok(&B, lane[5]);
	free_ok(&B, lane[6]);
	free_ok(&B, lane[10]);
	long one = mb_buddy_alloc_shared(&B, 1, MB_KERNRCLM, 0, NULL);
	ASSERT_BUDDY(&B);
	ASSERT_GE(one, 0);
	ASSERT_NE((size_t)one >> B.pb_order, h);
	long three = mb_buddy_alloc_shared(&B, 3, MB_KERNRCLM, 0, NULL);
	ASSERT_BUDDY(&B);
	ASSERT_GE(three, 0);
	ASSERT_NE((size_t)three >> B.pb_order, h);
	ASSERT_EQ(B.home[5], (long)h);
	/* The lane takes its own holes back. */
	long back = mb_buddy_alloc_home(&B, 1, MB_KERNRCLM, 5, NULL);
	ASSERT_BUDDY(&B);
	ASSERT_EQ((size_t)back >> B.pb_order, h);
	free_ok(&B, back);
	free_ok(&B, one);
	free_ok(&B, three);
	for (int i = 0; i < 128; i++)
		if (i != 4 && i != 5 && i != 6 && i != 10)
			free_ok(&B, lane[i]);
	whole_again_and_gone(&B);
}

/* Take single pages of type from its own lists until they are empty. */
static void fill_own_lists(struct mb_buddy *b, int type, long *held, int *nheld)
{
	while (1) {
		int found = 0;
		for (unsigned o = 0; o < b->pb_order; o++)
			found |= b->free_area[type][o].nr_free != 0;
		if (!found)
			break;
		held[(*nheld)++] = alloc_ok(b, 1, type);
	}
}

/* Reclaimable types borrow free blocks inside other types' pageblocks
 * before they take a pageblock from the pool; KernNoRclm takes from the
 * pool first. No borrowing changes a pageblock's owner. */
TEST(reclaimable_borrow_before_global)
{
	test_buddy_new(&B, 4, MB_MAX_ORDER_MIN);
	long held[64 + 8];
	int nheld = 0;
	long k = held[nheld++] = alloc_ok(&B, 1, MB_KERNNORCLM);
	size_t pbk = (size_t)k >> B.pb_order;
	ASSERT_EQ(B.nr_global, 3);
	ASSERT_EQ(B.count.global_steals, 1);

	long u = held[nheld++] = alloc_ok(&B, 1, MB_USERRCLM);
	long r = held[nheld++] = alloc_ok(&B, 1, MB_KERNRCLM);
	ASSERT_EQ(((size_t)u >> B.pb_order), pbk);
	ASSERT_EQ(((size_t)r >> B.pb_order), pbk);
	ASSERT_EQ(B.nr_global, 3);
	ASSERT_EQ(B.count.global_steals, 1);
	ASSERT_EQ(B.count.fallbacks[MB_USERRCLM], 1);
	ASSERT_EQ(B.count.fallbacks[MB_KERNRCLM], 1);
	ASSERT_EQ(mb_buddy_pb_type(&B, pbk), MB_KERNNORCLM);
	ASSERT_EQ(B.pb_owned[MB_KERNNORCLM], 1);
	ASSERT_EQ(B.pb_owned[MB_USERRCLM], 0);
	ASSERT_EQ(B.pb_owned[MB_KERNRCLM], 0);

	/* A UserRclm pageblock with one free page, then KernNoRclm's own
	 * lists emptied: KernNoRclm takes a new pageblock from the pool, not
	 * the UserRclm page. */
	long w = held[nheld++] = alloc_ok(&B, B.pb_pages - 1, MB_USERRCLM);
	size_t pbw = (size_t)w >> B.pb_order;
	ASSERT_EQ(mb_buddy_pb_type(&B, pbw), MB_USERRCLM);
	ASSERT_EQ(B.nr_global, 2);
	fill_own_lists(&B, MB_KERNNORCLM, held, &nheld);
	long y = held[nheld++] = alloc_ok(&B, 1, MB_KERNNORCLM);
	ASSERT_NE(((size_t)y >> B.pb_order), pbw);
	ASSERT_NE(((size_t)y >> B.pb_order), pbk);
	ASSERT_EQ(B.count.fallbacks[MB_KERNNORCLM], 0);
	ASSERT_EQ(B.nr_global, 1);
	ASSERT_EQ(B.free_area[MB_USERRCLM][0].nr_free, 1);

	/* The borrowed pages free into their owner's lists, and every
	 * pageblock drains back to the pool. */
	free_ok(&B, u);
	ASSERT_EQ(B.free_area[MB_USERRCLM][0].nr_free, 1);
	ASSERT_EQ(B.pb_owned[MB_USERRCLM], 1);
	for (int i = 0; i < nheld; i++)
		if (held[i] != u)
			free_ok(&B, held[i]);
	ASSERT_EQ(B.nr_global, B.nblocks);
	ASSERT(all_lists_empty(&B));
	test_buddy_free_region(&B);
}

/* With the pool empty, each type falls back to the others' lists in the
 * patch's order; every fallback is counted and no pageblock changes its
 * owner, however free it is. */
TEST(fallback_order)
{
	for (int type = 0; type < MB_NTYPES; type++) {
		test_buddy_new(&B, 3, MB_MAX_ORDER_MIN);
		long held[3 * 64 + 8];
		int nheld = 0;
		long first[MB_NTYPES];
		/* One pageblock per type, all but one page in use, then the
		 * pool is empty. */
		for (int t = 0; t < MB_NTYPES; t++)
			first[t] = held[nheld++] = alloc_ok(&B, B.pb_pages - 1, t);
		ASSERT_EQ(B.nr_global, 0);
		for (int t = 0; t < MB_NTYPES; t++)
			ASSERT(B.pb_owned[t] == 1 && B.free_area[t][0].nr_free == 1);
		long own = held[nheld++] = alloc_ok(&B, 1, type);
		ASSERT_EQ((own >> B.pb_order), (first[type] >> B.pb_order));
		ASSERT_EQ(B.count.fallbacks[type], 0);

		int f1 = mb_fallback_order[type][1], f2 = mb_fallback_order[type][2];
		long x = alloc_ok(&B, 1, type);
		ASSERT_EQ((x >> B.pb_order), (first[f1] >> B.pb_order));
		ASSERT_EQ(B.count.fallbacks[type], 1);
		ASSERT_EQ(mb_buddy_pb_type(&B, (size_t)x >> B.pb_order), f1);
		held[nheld++] = x;

		long y = alloc_ok(&B, 1, type);
		ASSERT_EQ((y >> B.pb_order), (first[f2] >> B.pb_order));
		ASSERT_EQ(B.count.fallbacks[type], 2);
		ASSERT_EQ(mb_buddy_pb_type(&B, (size_t)y >> B.pb_order), f2);
		held[nheld++] = y;
		for (int t = 0; t < MB_NTYPES; t++)
			ASSERT_EQ(B.pb_owned[t], 1);

		/* Everything is full: the request fails and nothing changes. */
		ASSERT_EQ(mb_buddy_alloc(&B, 1, type, NULL), -1);
		ASSERT_EQ(B.count.failures[type], 1);
		ASSERT_BUDDY(&B);

		/* A page taken by fallback is freed into its pageblock owner's
		 * lists, and the pageblocks still drain back to the pool. */
		free_ok(&B, x);
		ASSERT_EQ(B.free_area[f1][0].nr_free, 1);
		for (int i = 0; i < nheld; i++)
			if (held[i] != x)
				free_ok(&B, held[i]);
		ASSERT_EQ(B.nr_global, 3);
		ASSERT(all_lists_empty(&B));
		test_buddy_free_region(&B);
	}
}

/* Requests above one pageblock take runs of contiguous whole pageblocks,
 * with the unused tail of the last one given back. */
TEST(multi_pageblock_runs)
{
	test_buddy_new(&B, 8, MB_MAX_ORDER_MIN);
	size_t pbp = B.pb_pages;
	long r = alloc_ok(&B, 2 * pbp + pbp / 2 + 3, MB_KERNRCLM);
	ASSERT_EQ(r % (long)pbp, 0);
	ASSERT_EQ(B.nr_global, 5);
	ASSERT_EQ(B.pb_owned[MB_KERNRCLM], 3);
	ASSERT_EQ(B.pages_allocated, 2 * pbp + pbp / 2 + 3);
	/* The tail of the third pageblock serves small KernRclm requests. */
	long s = alloc_ok(&B, 1, MB_KERNRCLM);
	ASSERT_EQ((s >> B.pb_order), (r >> B.pb_order) + 2);
	free_ok(&B, r);
	ASSERT_EQ(B.nr_global, 7);
	free_ok(&B, s);
	ASSERT_EQ(B.nr_global, 8);

	/* Exactly n pageblocks. */
	r = alloc_ok(&B, 4 * pbp, MB_USERRCLM);
	ASSERT_EQ(B.nr_global, 4);
	ASSERT(all_lists_empty(&B));
	free_ok(&B, r);

	/* A hole in the pool: a run of 5 needs contiguous pageblocks. */
	long whole[8], hole = -1;
	for (int i = 0; i < 8; i++)
		whole[i] = alloc_ok(&B, pbp, MB_USERRCLM);
	for (int i = 0; i < 8; i++) {
		if (whole[i] >> B.pb_order == 1)
			hole = whole[i];
		else
			free_ok(&B, whole[i]);
	}
	ASSERT_GE(hole, 0);
	long big = alloc_ok(&B, 5 * pbp, MB_USERRCLM);
	ASSERT_EQ(big >> B.pb_order, 2);
	ASSERT_EQ(mb_buddy_alloc(&B, 2 * pbp, MB_USERRCLM, NULL), -1);
	ASSERT_BUDDY(&B);
	free_ok(&B, big);
	free_ok(&B, hole);
	ASSERT_EQ(B.nr_global, 8);
	test_buddy_free_region(&B);
}

/* A capped region runs out cleanly and stays usable. */
TEST(exhaustion)
{
	test_buddy_new(&B, 4, MB_MAX_ORDER_MIN);
	long held[4 * 32 + 1];
	int n = 0;
	for (;;) {
		long x = mb_buddy_alloc(&B, 3, n % 3, NULL);
		if (x < 0)
			break;
		held[n++] = x;
		ASSERT_LE(n, 4 * 32);
	}
	ASSERT_BUDDY(&B);
	ASSERT_EQ(B.pages_allocated, (size_t)n * 3);
	/* The single pages left between them are still there to take. */
	for (;;) {
		long x = mb_buddy_alloc(&B, 1, n % 3, NULL);
		if (x < 0)
			break;
		held[n++] = x;
		ASSERT_LE(n, 4 * 32);
	}
	ASSERT_EQ(B.pages_allocated, B.npages);
	ASSERT_EQ(mb_buddy_alloc(&B, B.pb_pages, MB_KERNNORCLM, NULL), -1);
	ASSERT_EQ(mb_buddy_alloc(&B, B.npages + 1, MB_KERNNORCLM, NULL), -1);
	ASSERT_EQ(mb_buddy_alloc(&B, 0, MB_KERNNORCLM, NULL), -1);
	ASSERT_BUDDY(&B);
	/* Free one: the memory is usable again. */
	free_ok(&B, held[--n]);
	long x = alloc_ok(&B, 1, MB_KERNNORCLM);
	held[n++] = x;
	while (n)
		free_ok(&B, held[--n]);
	ASSERT_EQ(B.nr_global, 4);
	test_buddy_free_region(&B);
}

/* Non-power-of-two requests take exactly what they ask for. */
TEST(exact_sizes)
{
	test_buddy_new(&B, 2, MB_MAX_ORDER_DEFAULT);
	for (size_t n = 1; n <= 70; n++) {
		long x = alloc_ok(&B, n, MB_KERNNORCLM);
		ASSERT_EQ(B.pages_allocated, n);
		long y = alloc_ok(&B, 1, MB_KERNNORCLM);
		/* With tails given back, the next page may sit right after. */
		ASSERT_EQ(B.pages_allocated, n + 1);
		free_ok(&B, x);
		free_ok(&B, y);
		ASSERT_EQ(B.nr_global, 2);
	}
	test_buddy_free_region(&B);
}

/* A block keeps its tail: a request of 17 pages takes a whole block of
 * 32, which nothing else gets while it lives, and whose free leaves the
 * pageblock whole. Its reserved pages count toward the pageblock's pages
 * taken but not toward its 2 MiB unit's pages in use. */
TEST(block_keeps_its_tail)
{
	test_buddy_new(&B, 2, MB_MAX_ORDER_DEFAULT);
	int zeroed = 0;
	long a = mb_buddy_alloc_block(&B, 17, MB_USERRCLM, &zeroed);
	ASSERT_GE(a, 0);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(a % 32, 0);
	ASSERT_EQ(zeroed, 1);
	ASSERT_EQ(B.pages[a].npages, 32);
	ASSERT_EQ(B.pages[a].used, 17);
	ASSERT_EQ(mb_buddy_pages_used(&B.pages[a]), 17);
	ASSERT_EQ(B.pages_allocated, 32);
	ASSERT_EQ(B.hp_used[(size_t)a >> MB_HP_SHIFT], 17);
	ASSERT_EQ(B.nr_tails, 0); /* fresh pages: nothing to give back */
	for (size_t i = (size_t)a + 17; i < (size_t)a + 32; i++) {
		ASSERT_EQ(B.pages[i].state, MB_PG_TAIL);
		ASSERT_EQ(B.pages[i].flags & MB_PGF_DIRTY, 0);
	}
	/* Single pages fill the rest of the pageblock around it, never its
	 * tail. */
	for (size_t n = 0; n < B.pb_pages - 32; n++) {
		long x = mb_buddy_alloc(&B, 1, MB_USERRCLM, NULL);
		ASSERT_GE(x, 0);
		ASSERT((x < a || x >= a + 32));
	}
	ASSERT_BUDDY(&B);
	ASSERT_EQ(B.nr_global, 1);
	for (size_t i = (size_t)a & ~(B.pb_pages - 1); i < ((size_t)a | (B.pb_pages - 1)) + 1; i++)
		if (i < (size_t)a || i >= (size_t)a + 32)
			mb_buddy_free(&B, i);
	ASSERT_BUDDY(&B);
	/* Freed, the block is whole again, and so is its pageblock. */
	ASSERT_EQ(mb_buddy_free(&B, (size_t)a), 32);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(B.pages_allocated, 0);
	ASSERT_EQ(B.hp_used[(size_t)a >> MB_HP_SHIFT], 0);
	whole_again_and_gone(&B);
}

/* A block of `used` pages (of 32) where an object of 32 pages was written
 * and freed: its reserved pages are dirty. */
static long block_on_written_pages(size_t used, int *zeroed)
{
	long w = alloc_ok(&B, 32, MB_KERNRCLM);
	memset(mb_buddy_page_addr(&B, (size_t)w), 0x77, 32 * MB_PAGE_SIZE);
	free_ok(&B, w);
	long a = mb_buddy_alloc_block(&B, used, MB_KERNRCLM, zeroed);
	ASSERT_EQ(a, w);
	ASSERT_BUDDY(&B);
	return a;
}

/* The rest of a purge batch: released, put back. */
static void finish_batch(struct mb_purge_batch *bt)
{
	mb_buddy_purge_release(&B, bt);
	mb_buddy_purge_done(&B, bt);
	ASSERT_BUDDY(&B);
}

/* Reserved pages that an earlier user wrote stay, and go back with the
 * purge once the block has kept them for the decay: taken as a range of
 * their own (the block busy meanwhile), released, clean, the block's
 * still. A release the kernel refuses leaves them dirty, to be tried
 * again. */
TEST(block_tail_goes_back_with_the_purge)
{
	test_buddy_new(&B, 2, MB_MAX_ORDER_DEFAULT);
	int zeroed;
	B.clock = 200;
	long a = block_on_written_pages(20, &zeroed);
	ASSERT_EQ(zeroed, 0);
	ASSERT_EQ(B.nr_tails, 1);
	ASSERT_EQ(B.tails_oldest, 200);
	ASSERT_LE(B.oldest, 200);
	for (size_t i = (size_t)a + 20; i < (size_t)a + 32; i++)
		ASSERT_EQ(B.pages[i].flags & MB_PGF_DIRTY, MB_PGF_DIRTY);
	/* Not yet: left dirty at 200. */
	struct mb_purge_batch bt;
	B.clock = 250;
	mb_buddy_purge_take(&B, 199, 100000, &bt);
	for (unsigned k = 0; k < bt.n; k++)
		ASSERT_EQ(bt.r[k].tail, 0);
	finish_batch(&bt);
	ASSERT_EQ(B.nr_tails, 1);
	/* Refused by the kernel: dirty still, and noted again. */
	mb_os_inject_fault(MB_FAULT_RELEASE, 0, 1);
	ASSERT_EQ(mb_buddy_purge_take(&B, 200, 100000, &bt), 12);
	ASSERT_EQ(bt.n, 1);
	ASSERT_EQ(bt.r[0].tail, 1);
	ASSERT_EQ(bt.r[0].head, (size_t)a);
	ASSERT_EQ(bt.r[0].idx, (size_t)a + 20);
	ASSERT_EQ(bt.r[0].npages, 12);
	ASSERT_EQ(B.pages[a].flags & MB_PGF_TAIL_BUSY, MB_PGF_TAIL_BUSY);
	ASSERT_BUDDY(&B);
	finish_batch(&bt);
	ASSERT_EQ(B.pages[a].flags & MB_PGF_TAIL_BUSY, 0);
	ASSERT_EQ(B.pages[a + 31].flags & MB_PGF_DIRTY, MB_PGF_DIRTY);
	ASSERT_EQ(B.nr_tails, 1);
	ASSERT_EQ(B.tails_oldest, 250); /* a decay from now */
	/* A younger block's tail waits while the older one's is due. */
	B.clock = 300;
	long a2 = block_on_written_pages(20, &zeroed);
	ASSERT_EQ(B.tails_oldest, 250);
	B.clock = 400;
	ASSERT_EQ(mb_buddy_purge_take(&B, 299, 100000, &bt), 12);
	ASSERT_EQ(bt.n, 1);
	ASSERT_EQ(bt.r[0].head, (size_t)a);
	finish_batch(&bt);
	ASSERT_EQ(B.nr_tails, 1);
	ASSERT_EQ(B.tails_oldest, 300);
	/* a's are clean, not resident, the block's still; freed, a2 leaves
	 * its pageblock no dirty reserved page: the next purge takes its
	 * free pages and looks at the pageblock no more. */
	free_ok(&B, a2);
	ASSERT_GE(mb_buddy_purge(&B, 400, 100000), 32);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(B.nr_tails, 0);
	ASSERT_EQ(B.tails_oldest, UINT64_MAX);
	for (size_t i = (size_t)a + 20; i < (size_t)a + 32; i++) {
		ASSERT_EQ(B.pages[i].flags & MB_PGF_DIRTY, 0);
		ASSERT_EQ(B.pages[i].state, MB_PG_TAIL);
	}
	ASSERT_EQ(test_resident_pages(mb_buddy_page_addr(&B, (size_t)a + 20), 12 * MB_PAGE_SIZE), 0);
	ASSERT_EQ(B.pages[a].used, 20);
	/* In use again within the block: 20 -> 28 pages are dirty (the
	 * caller writes them), nothing reserved is; 28 -> 10 leaves 18 dirty
	 * reserved pages, noted for the purge. */
	mb_buddy_block_use(&B, (size_t)a, 28);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(B.pages[a].used, 28);
	ASSERT_EQ(B.nr_tails, 0);
	ASSERT_EQ(B.hp_used[(size_t)a >> MB_HP_SHIFT], 28);
	memset(mb_buddy_page_addr(&B, (size_t)a), 0x78, 28 * MB_PAGE_SIZE);
	mb_buddy_block_use(&B, (size_t)a, 10);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(B.nr_tails, 1);
	ASSERT_EQ(B.hp_used[(size_t)a >> MB_HP_SHIFT], 10);
	ASSERT_EQ(mb_buddy_purge(&B, 400, 100000), 18);
	ASSERT_BUDDY(&B);
	/* Freed, its upper half (all given back) is taken by a request that
	 * is told it reads as zero, and does. */
	free_ok(&B, a);
	long lo = mb_buddy_alloc(&B, 16, MB_KERNRCLM, &zeroed);
	ASSERT_EQ(lo, a);
	ASSERT_EQ(zeroed, 0);
	long z = mb_buddy_alloc(&B, 16, MB_KERNRCLM, &zeroed);
	ASSERT_EQ(z, a + 16);
	ASSERT_EQ(zeroed, 1);
	const unsigned char *zp = mb_buddy_page_addr(&B, (size_t)z);
	for (size_t j = 0; j < 16 * MB_PAGE_SIZE; j += 512)
		ASSERT_EQ(zp[j], 0);
	free_ok(&B, lo);
	free_ok(&B, z);
	whole_again_and_gone(&B);
}

/* A block's dirty reserved pages in a huge page the purge keeps whole
 * stay, as the free pages of such a unit do; in a huge unit fallen
 * sparse, they go, and the huge page with them. */
TEST(block_tail_in_a_huge_unit)
{
	test_buddy_new(&B, 2, MB_MAX_ORDER_DEFAULT);
	int zeroed;
	long a = block_on_written_pages(20, &zeroed);
	size_t u = ((size_t)a + 20) >> MB_HP_SHIFT;
	B.hp_on = 1;
	B.hp_flags[u] |= MB_HPF_HUGE;
	B.hp_demote = 16; /* 20 pages in use: dense */
	B.clock = 1000;
	struct mb_purge_batch bt;
	mb_buddy_purge_take(&B, 1000, 100000, &bt);
	for (unsigned k = 0; k < bt.n; k++)
		ASSERT_EQ(bt.r[k].tail, 0);
	finish_batch(&bt);
	ASSERT_EQ(B.pages[a + 31].flags & MB_PGF_DIRTY, MB_PGF_DIRTY);
	ASSERT_EQ(B.nr_tails, 1);
	/* Sparse now: taken, and the unit is no longer huge. */
	B.hp_demote = 64;
	uint64_t demoted = B.count.hp_demoted;
	mb_buddy_block_use(&B, (size_t)a, 20); /* a block noted again */
	ASSERT_EQ(mb_buddy_purge(&B, 1000, 100000), 12);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(B.hp_flags[u] & MB_HPF_HUGE, 0);
	ASSERT_EQ(B.count.hp_demoted, demoted + 1);
	ASSERT_EQ(B.pages[a + 31].flags & MB_PGF_DIRTY, 0);
	B.hp_on = 0;
	free_ok(&B, a);
	whole_again_and_gone(&B);
}

/* A collapse faults in the whole 2 MiB unit, a block's clean reserved
 * pages too: they are dirty from then on, and their pageblock is flagged
 * for the purge, which looks at them once the unit turns sparse (the
 * fuzzer found the flag missing). */
TEST(collapse_notes_block_tails)
{
	test_buddy_new(&B, 2, MB_MAX_ORDER_DEFAULT);
	int zeroed;
	long a = mb_buddy_alloc_block(&B, 20, MB_USERRCLM, &zeroed);
	ASSERT_GE(a, 0);
	ASSERT_EQ(zeroed, 1);
	ASSERT_EQ(B.pages[a + 31].flags & MB_PGF_DIRTY, 0);
	ASSERT_EQ(B.nr_tails, 0);
	size_t u = (size_t)a >> MB_HP_SHIFT, pb = (size_t)a >> B.pb_order;
	B.clock = 500;
	mb_buddy_hp_done(&B, u, MB_HP_COLLAPSED);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(B.hp_flags[u] & MB_HPF_HUGE, MB_HPF_HUGE);
	ASSERT_EQ(B.pages[a + 31].flags & MB_PGF_DIRTY, MB_PGF_DIRTY);
	ASSERT_EQ(B.pb_flags[pb] & MB_PBF_TAILS, MB_PBF_TAILS);
	ASSERT_EQ(B.nr_tails, 1);
	ASSERT_EQ(B.tails_oldest, 500);
	free_ok(&B, a);
	ASSERT_EQ(B.nr_tails, 0);
	whole_again_and_gone(&B);
}

/* Grown past its block, every page of a block allocation is in use;
 * shrunk below what it used, it is an allocation like any. */
TEST(block_resized)
{
	test_buddy_new(&B, 2, MB_MAX_ORDER_DEFAULT);
	int zeroed;
	long a = mb_buddy_alloc_block(&B, 17, MB_KERNRCLM, &zeroed);
	ASSERT_EQ(mb_buddy_resize(&B, (size_t)a, 40), 0);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(B.pages[a].npages, 40);
	ASSERT_EQ(B.pages[a].used, 0);
	ASSERT_EQ(B.pages_allocated, 40);
	ASSERT_EQ(B.hp_used[(size_t)a >> MB_HP_SHIFT], 40);
	for (size_t i = (size_t)a; i < (size_t)a + 40; i++)
		ASSERT_EQ(B.pages[i].flags & MB_PGF_DIRTY, MB_PGF_DIRTY);
	free_ok(&B, a);
	/* Shrunk below what it uses: a plain allocation of 9 pages. */
	a = mb_buddy_alloc_block(&B, 17, MB_KERNRCLM, &zeroed);
	ASSERT_EQ(mb_buddy_resize(&B, (size_t)a, 9), 0);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(B.pages[a].npages, 9);
	ASSERT_EQ(B.pages[a].used, 0);
	ASSERT_EQ(B.hp_used[(size_t)a >> MB_HP_SHIFT], 9);
	free_ok(&B, a);
	/* Shrunk within its reserved pages: still a block in use to 17. */
	a = mb_buddy_alloc_block(&B, 17, MB_KERNRCLM, &zeroed);
	ASSERT_EQ(mb_buddy_resize(&B, (size_t)a, 24), 0);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(B.pages[a].npages, 24);
	ASSERT_EQ(B.pages[a].used, 17);
	ASSERT_EQ(B.pages_allocated, 24);
	free_ok(&B, a);
	/* A block is asked for a size below a pageblock: nothing else. */
	ASSERT_EQ(mb_buddy_alloc_block(&B, 0, MB_KERNRCLM, &zeroed), -1);
	ASSERT_EQ(mb_buddy_alloc_block(&B, B.pb_pages + 1, MB_KERNRCLM, &zeroed), -1);
	ASSERT_BUDDY(&B);
	whole_again_and_gone(&B);
}

TEST(resize_in_place)
{
	test_buddy_new(&B, 6, MB_MAX_ORDER_MIN);
	size_t pbp = B.pb_pages;
	long a = alloc_ok(&B, 5, MB_USERRCLM);
	ASSERT_EQ(mb_buddy_resize(&B, (size_t)a, 8), 0);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(B.pages[a].npages, 8);
	ASSERT_EQ(B.pages_allocated, 8);
	ASSERT_EQ(mb_buddy_resize(&B, (size_t)a, 2), 0);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(mb_buddy_resize(&B, (size_t)a, 20), 0);
	ASSERT_BUDDY(&B);
	/* Blocked by a neighbour. */
	long nb = alloc_ok(&B, 1, MB_USERRCLM);
	ASSERT_EQ(nb, a + 20);
	ASSERT_EQ(mb_buddy_resize(&B, (size_t)a, 21), -1);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(B.pages[a].npages, 20);
	free_ok(&B, nb);
	/* Grow across pageblocks into the global pool. */
	ASSERT_EQ(mb_buddy_resize(&B, (size_t)a, 3 * pbp + 7), 0);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(B.pages_allocated, 3 * pbp + 7);
	ASSERT_EQ(mb_buddy_resize(&B, (size_t)a, pbp + 1), 0);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(mb_buddy_resize(&B, (size_t)a, 6 * pbp + 1), -1);
	ASSERT_BUDDY(&B);
	free_ok(&B, a);
	ASSERT_EQ(B.nr_global, 6);
	ASSERT(all_lists_empty(&B));
	test_buddy_free_region(&B);
}

/* Idle pageblocks go back to the kernel oldest first; they read as zero and
 * the next allocation knows it. */
TEST(release_and_zeroed)
{
	test_buddy_new(&B, 4, MB_MAX_ORDER_MIN);
	int zeroed = 0;
	B.clock = 10;
	long a = mb_buddy_alloc(&B, 4, MB_KERNNORCLM, &zeroed);
	ASSERT_GE(a, 0);
	ASSERT_EQ(zeroed, 1);
	memset(mb_buddy_page_addr(&B, (size_t)a), 0xab, 4 * MB_PAGE_SIZE);
	free_ok(&B, a);
	ASSERT_EQ(B.nr_dirty, 1);
	long b2 = mb_buddy_alloc(&B, 4, MB_KERNNORCLM, &zeroed);
	ASSERT_EQ(b2, a);
	ASSERT_EQ(zeroed, 0);
	long c = alloc_ok(&B, B.pb_pages, MB_USERRCLM);
	free_ok(&B, b2);
	B.clock = 20;
	free_ok(&B, c);
	ASSERT_EQ(B.nr_dirty, 2);
	ASSERT_EQ(mb_buddy_purge(&B, 5, 100000), 0);   /* nothing idle that long */
	ASSERT_EQ(mb_buddy_purge(&B, 15, 100000), B.pb_pages);  /* the older one */
	ASSERT_BUDDY(&B);
	ASSERT_EQ(B.nr_dirty, 1);
	ASSERT_EQ(B.count.released_pageblocks, 1);
	ASSERT_EQ(mb_buddy_purge(&B, 100, 100000), B.pb_pages);
	ASSERT_EQ(B.nr_dirty, 0);
	ASSERT_BUDDY(&B);
	long d = mb_buddy_alloc(&B, 4, MB_KERNNORCLM, &zeroed);
	ASSERT_EQ(d, a);
	ASSERT_EQ(zeroed, 1);
	unsigned char *p = mb_buddy_page_addr(&B, (size_t)d);
	for (size_t i = 0; i < 4 * MB_PAGE_SIZE; i++)
		ASSERT_EQ(p[i], 0);
	free_ok(&B, d);
	test_buddy_free_region(&B);
}

/* A release that the kernel refuses keeps the pageblock queued. */
TEST(release_failure)
{
	test_buddy_new(&B, 2, MB_MAX_ORDER_MIN);
	long a = alloc_ok(&B, 1, MB_KERNNORCLM);
	free_ok(&B, a);
	mb_os_inject_fault(MB_FAULT_RELEASE, 0, 1);
	ASSERT_EQ(mb_buddy_purge(&B, 0, 10000), 0);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(B.count.release_failures, 1);
	ASSERT_EQ(B.nr_dirty, 1);
	ASSERT_EQ(mb_buddy_purge(&B, 0, 10000), B.pb_pages);
	ASSERT_BUDDY(&B);
	test_buddy_free_region(&B);
}

TEST(bad_parameters)
{
	struct mb_buddy b;
	size_t pb_bytes = (size_t)1 << (MB_MAX_ORDER_DEFAULT - 1 + MB_PAGE_SHIFT);
	void *base = mb_os_reserve(2 * pb_bytes, pb_bytes);
	ASSERT(base);
	ASSERT_EQ(mb_buddy_init(&b, base, 2 * pb_bytes, MB_MAX_ORDER_MIN - 1), -1);
	ASSERT_EQ(mb_buddy_init(&b, base, 2 * pb_bytes, MB_MAX_ORDER_MAX + 1), -1);
	ASSERT_EQ(mb_buddy_init(&b, (char *)base + 4096, pb_bytes, MB_MAX_ORDER_DEFAULT), -1);
	ASSERT_EQ(mb_buddy_init(&b, base, pb_bytes + 4096, MB_MAX_ORDER_DEFAULT), -1);
	mb_os_unreserve(base, 2 * pb_bytes);
}

/* Pages of [p, p + len) that are resident. */
static size_t resident_pages(const void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(MB_PAGE_SIZE - 1);
	size_t n = ((uintptr_t)p + len - a + MB_PAGE_SIZE - 1) >> MB_PAGE_SHIFT;
	unsigned char *v = malloc(n);
	ASSERT(v);
	ASSERT_EQ(mincore((void *)a, n << MB_PAGE_SHIFT, v), 0);
	size_t r = 0;
	for (size_t i = 0; i < n; i++)
		r += v[i] & 1;
	free(v);
	return r;
}

/* Set-up writes nothing per pageblock, and a run of whole pageblocks
 * writes one page record, at its head: the metadata made resident does
 * not grow with the heap or with the run. */
TEST(setup_and_runs_touch_no_records)
{
#ifdef MB_DEBUG_CHECKS
	SKIP("the checker run after every operation reads the metadata this test wants untouched");
#endif
	struct mb_buddy b;
	size_t pb_bytes = (size_t)1 << (MB_MAX_ORDER_MIN - 1 + MB_PAGE_SHIFT);
	size_t size = (size_t)256 << 30; /* two million pageblocks */
	void *base = mb_os_reserve(size, pb_bytes);
	ASSERT(base);
	ASSERT_EQ(mb_buddy_init(&b, base, size, MB_MAX_ORDER_MIN), 0);
	ASSERT_EQ(resident_pages(b.meta_base, b.meta_bytes), 0);

	/* 4 GiB: 32768 pageblocks; their records fill 32 MiB. */
	size_t n = ((size_t)4 << 30) >> MB_PAGE_SHIFT;
	int zeroed = 0;
	long r = mb_buddy_alloc(&b, n, MB_USERRCLM, &zeroed);
	ASSERT_GE(r, 0);
	ASSERT_EQ(zeroed, 1);
	size_t nblocks_run = n >> b.pb_order;
	size_t records_alloc = resident_pages(b.pages, n * sizeof(struct mb_page));
	size_t after_alloc = resident_pages(b.meta_base, b.meta_bytes);
	mb_buddy_free(&b, (size_t)r);
	size_t records_free = resident_pages(b.pages, n * sizeof(struct mb_page));
	size_t after_free = resident_pages(b.meta_base, b.meta_bytes);
	/* Only the head's record; of the arrays per pageblock (type, flags,
	 * pages used, queue links and time: 22 bytes), what the run covers. */
	ASSERT_LE(records_alloc, 1);
	ASSERT_LE(records_free, 1);
	size_t per_pb = (nblocks_run * 22 + MB_PAGE_SIZE - 1) / MB_PAGE_SIZE + 8;
	ASSERT_LE(after_alloc, per_pb);
	ASSERT_LE(after_free, per_pb);
	/* Pageblocks a run covered come back dirty: reused, they are
	 * reported not zeroed, through a run or through the buddy. */
	long r2 = mb_buddy_alloc(&b, n, MB_USERRCLM, &zeroed);
	ASSERT_EQ(r2, r);
	ASSERT_EQ(zeroed, 0);
	mb_buddy_free(&b, (size_t)r2);
	long s = mb_buddy_alloc(&b, 3, MB_KERNRCLM, &zeroed);
	ASSERT_GE(s, 0);
	ASSERT_EQ(zeroed, 0);
	mb_buddy_free(&b, (size_t)s);
	mb_buddy_destroy(&b);
	mb_os_unreserve(base, size);
}

/* Runs cut in two (aligned large allocations), shrunk and grown keep the
 * records of the pageblocks they cover whole untouched and stay
 * consistent. */
TEST(run_split_shrink_grow)
{
	test_buddy_new(&B, 16, MB_MAX_ORDER_MIN);
	size_t pbp = B.pb_pages;
	long r = alloc_ok(&B, 6 * pbp, MB_KERNRCLM);
	/* Cut in the middle of the third pageblock, free the head part. */
	mb_buddy_split(&B, (size_t)r, (size_t)r + 2 * pbp + 5);
	ASSERT_BUDDY(&B);
	free_ok(&B, r);
	long t = r + 2 * (long)pbp + 5;
	ASSERT_EQ(B.pages[t].npages, 4 * pbp - 5);
	/* Shrink into the fourth pageblock, then grow across three more. */
	ASSERT_EQ(mb_buddy_resize(&B, (size_t)t, pbp + 3), 0);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(mb_buddy_resize(&B, (size_t)t, 5 * pbp), 0);
	ASSERT_BUDDY(&B);
	/* Cut exactly at a pageblock boundary. */
	size_t at = (((size_t)t >> B.pb_order) + 2) << B.pb_order;
	mb_buddy_split(&B, (size_t)t, at);
	ASSERT_BUDDY(&B);
	free_ok(&B, (long)at);
	free_ok(&B, t);
	ASSERT_EQ(B.nr_global, B.nblocks);
	ASSERT(all_lists_empty(&B));
	test_buddy_free_region(&B);
}

/* Free blocks of an owned pageblock are queued when dirty pages are freed
 * in it; a purge takes adjacent ones as one span, off the lists while the
 * kernel takes them, and puts them back clean and merged. */
TEST(purge_freed_spans)
{
	test_buddy_new(&B, 4, MB_MAX_ORDER_MIN); /* pageblocks of 32 pages */
	long a[8];
	B.clock = 1;
	for (int i = 0; i < 8; i++) {
		a[i] = alloc_ok(&B, 4, MB_KERNRCLM);
		memset(mb_buddy_page_addr(&B, (size_t)a[i]), 0x5a, 4 * MB_PAGE_SIZE);
	}
	ASSERT_EQ(mb_buddy_nr_freed(&B), 0);
	ASSERT_EQ(B.oldest, UINT64_MAX);
	/* Free 1, 2, 3 (one span of 12 pages) and 6: two ranges. */
	B.clock = 5;
	free_ok(&B, a[1]);
	B.clock = 6;
	free_ok(&B, a[2]);
	free_ok(&B, a[3]);
	free_ok(&B, a[6]);
	ASSERT_EQ(mb_buddy_nr_freed(&B), 1);
	ASSERT_EQ(B.oldest, 5);
	struct mb_purge_batch bt;
	ASSERT_EQ(mb_buddy_purge_take(&B, 4, 1000, &bt), 0); /* not idle long enough */
	ASSERT_EQ(mb_buddy_purge_take(&B, 5, 1000, &bt), 16);
	ASSERT_EQ(bt.n, 2);
	ASSERT_EQ(bt.r[0].idx, (size_t)a[1]);
	ASSERT_EQ(bt.r[0].npages, 12);
	ASSERT(!bt.r[0].global);
	ASSERT_EQ(bt.r[1].idx, (size_t)a[6]);
	ASSERT_EQ(bt.r[1].npages, 4);
	ASSERT_EQ(mb_buddy_nr_freed(&B), 0);
	ASSERT_EQ(B.oldest, UINT64_MAX);
	ASSERT_EQ(B.pages_inflight, 16);
	ASSERT_BUDDY(&B);
	/* In flight: nothing hands those pages out, and frees go on. */
	long x = alloc_ok(&B, 4, MB_KERNRCLM);
	ASSERT_GE(x, (long)B.pb_pages); /* a new pageblock: the first one's free pages are all in flight */
	free_ok(&B, a[7]);
	ASSERT_EQ(mb_buddy_nr_freed(&B), 1);
	mb_buddy_purge_release(&B, &bt);
	ASSERT(bt.r[0].ok);
	ASSERT(bt.r[1].ok);
	mb_buddy_purge_done(&B, &bt);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(B.pages_inflight, 0);
	/* a[6] merged with a[7]'s pages, which are still dirty: queued. */
	ASSERT_EQ(mb_buddy_nr_freed(&B), 1);
	for (long p = a[1]; p < a[1] + 12; p++)
		ASSERT(!(B.pages[p].flags & MB_PGF_DIRTY));
	/* Reused, the released pages are known zero; a[6] and a[7] are not. */
	free_ok(&B, x);
	int z1 = 0, z2 = 0;
	long y1 = mb_buddy_alloc(&B, 8, MB_KERNRCLM, &z1);
	long y2 = mb_buddy_alloc(&B, 8, MB_KERNRCLM, &z2);
	ASSERT_BUDDY(&B);
	long clean = y1 == a[2] ? y1 : y2;
	ASSERT_EQ(clean, a[2]);
	ASSERT(y1 == a[6] || y2 == a[6]);
	ASSERT_EQ((y1 == a[2] ? z1 : z2), 1);
	ASSERT_EQ((y1 == a[2] ? z2 : z1), 0);
	const unsigned char *p = mb_buddy_page_addr(&B, (size_t)clean);
	for (size_t i = 0; i < 8 * MB_PAGE_SIZE; i++)
		ASSERT_EQ(p[i], 0);
	free_ok(&B, y1);
	free_ok(&B, y2);
	for (int i = 0; i < 8; i++)
		if (i != 1 && i != 2 && i != 3 && i != 6 && i != 7)
			free_ok(&B, a[i]);
	ASSERT_EQ(B.nr_global, 4);
	test_buddy_free_region(&B);
}

/* Free blocks still resident are handed out before those the kernel took
 * back: a block that comes back released goes to the tail of its list,
 * so a steady working set does not fault in released pages while freed
 * ones it could reuse wait to be purged. */
TEST(resident_blocks_before_released_ones)
{
	test_buddy_new(&B, 2, MB_MAX_ORDER_MIN);
	long a[5];
	for (int i = 0; i < 5; i++) {
		a[i] = alloc_ok(&B, 4, MB_KERNRCLM);
		memset(mb_buddy_page_addr(&B, (size_t)a[i]), 0x5a, 4 * MB_PAGE_SIZE);
	}
	B.clock = 5;
	free_ok(&B, a[1]);
	struct mb_purge_batch bt;
	ASSERT_EQ(mb_buddy_purge_take(&B, 5, 1000, &bt), 4);
	/* Freed while a[1] is in flight: resident, on the list first. */
	B.clock = 6;
	free_ok(&B, a[3]);
	mb_buddy_purge_release(&B, &bt);
	ASSERT(bt.r[0].ok);
	mb_buddy_purge_done(&B, &bt);
	ASSERT_BUDDY(&B);
	/* Both are lone 4-page blocks (their buddies are allocated), the
	 * released one freed last: the resident one comes first. */
	int z1 = 9;
	long y1 = mb_buddy_alloc(&B, 4, MB_KERNRCLM, &z1);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(y1, a[3]);
	ASSERT_EQ(z1, 0);
	ASSERT_EQ(B.pages[a[1]].state, MB_PG_FREE);
	free_ok(&B, y1);
	for (int i = 0; i < 5; i++)
		if (i != 1 && i != 3)
			free_ok(&B, a[i]);
	ASSERT_BUDDY(&B);
	test_buddy_free_region(&B);
}

/* A pageblock that memory is taken from again is not idle: it is queued
 * anew, and its free blocks wait a whole decay time from then. */
TEST(purge_requeue_on_reuse)
{
	test_buddy_new(&B, 2, MB_MAX_ORDER_MIN);
	B.clock = 1;
	long a = alloc_ok(&B, 4, MB_USERRCLM), c = alloc_ok(&B, 4, MB_USERRCLM);
	B.clock = 5;
	free_ok(&B, a);
	ASSERT_EQ(mb_buddy_nr_freed(&B), 1);
	ASSERT_EQ(B.oldest, 5);
	B.clock = 9;
	long d = alloc_ok(&B, 1, MB_USERRCLM);
	ASSERT_EQ(mb_buddy_nr_freed(&B), 1);
	ASSERT_EQ(B.oldest, 9);
	struct mb_purge_batch bt;
	ASSERT_EQ(mb_buddy_purge_take(&B, 6, 1000, &bt), 0);
	ASSERT_GT(mb_buddy_purge_take(&B, 9, 1000, &bt), 0);
	mb_buddy_purge_release(&B, &bt);
	mb_buddy_purge_done(&B, &bt);
	ASSERT_BUDDY(&B);
	free_ok(&B, c);
	free_ok(&B, d);
	test_buddy_free_region(&B);
}

/* Neighbouring global pageblocks idle as long go back in one range, within
 * the budget, and stay out of the pool while the kernel takes them. */
TEST(purge_coalesces_pageblocks)
{
	test_buddy_new(&B, 8, MB_MAX_ORDER_MIN);
	size_t pbp = B.pb_pages;
	B.clock = 1;
	long r = alloc_ok(&B, 5 * pbp, MB_USERRCLM);
	free_ok(&B, r);
	ASSERT_EQ(B.nr_dirty, 5);
	ASSERT_EQ(B.nr_global, 8);
	struct mb_purge_batch bt;
	/* A budget of 3 pageblocks takes three of them, as one range. */
	ASSERT_EQ(mb_buddy_purge_take(&B, 1, 3 * pbp, &bt), 3 * pbp);
	ASSERT_EQ(bt.n, 1);
	ASSERT(bt.r[0].global);
	ASSERT_EQ(bt.r[0].npages, 3 * pbp);
	ASSERT_EQ(B.nr_inflight, 3);
	ASSERT_EQ(B.nr_global, 5);
	ASSERT_EQ(B.nr_dirty, 2);
	ASSERT_BUDDY(&B);
	/* A run of 6 does not fit while they are out; one of 3 does. */
	ASSERT_EQ(mb_buddy_alloc(&B, 6 * pbp, MB_USERRCLM, NULL), -1);
	long s = alloc_ok(&B, 3 * pbp, MB_USERRCLM);
	ASSERT_EQ(s, (long)(3 * pbp)); /* first fit, past the pageblocks in flight */
	mb_buddy_purge_release(&B, &bt);
	mb_buddy_purge_done(&B, &bt);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(B.nr_inflight, 0);
	ASSERT_EQ(B.nr_global, 5);
	ASSERT_EQ(B.count.released_pageblocks, 3);
	B.clock = 2;
	free_ok(&B, s);
	ASSERT_EQ(mb_buddy_purge(&B, 1, SIZE_MAX), 0);
	ASSERT_EQ(mb_buddy_purge(&B, 2, SIZE_MAX), 3 * pbp);
	ASSERT_EQ(B.nr_dirty, 0);
	ASSERT_EQ(B.oldest, UINT64_MAX);
	ASSERT_BUDDY(&B);
	test_buddy_free_region(&B);
}

/* A request of a size that is not a power of two takes free pages in a
 * row where the heap has them resident (a block and the free blocks after
 * it), rather than an aligned block of the next power of two from clean
 * memory; the row stays inside its pageblock, and the heap drains back to
 * the pool. */
TEST(resident_row_before_clean_block)
{
	test_buddy_new(&B, 2, MB_MAX_ORDER_MIN); /* pageblocks of 32 pages */
	long x = alloc_ok(&B, 4, MB_USERRCLM);
	long y = alloc_ok(&B, 4, MB_USERRCLM);
	long z = alloc_ok(&B, 8, MB_USERRCLM);
	long c = alloc_ok(&B, 16, MB_USERRCLM);
	size_t pb = (size_t)x >> B.pb_order;
	ASSERT_EQ((size_t)y, (size_t)x + 4);
	ASSERT_EQ((size_t)z, (size_t)x + 8);
	ASSERT_EQ(B.nr_global, 1);
	/* Pages 4-15 free, resident, as an order-2 and an order-3 block: no
	 * aligned block of 16 pages holds 12 of them. */
	free_ok(&B, y);
	free_ok(&B, z);
	ASSERT_EQ(B.free_area[MB_USERRCLM][2].nr_free, 1);
	ASSERT_EQ(B.free_area[MB_USERRCLM][3].nr_free, 1);
	int zeroed = 9;
	/* Aligned to 8 pages, the row (at page 4) does not do: a clean block
	 * of 16 from the pool. */
	long q = mb_buddy_alloc_aligned(&B, 12, 8, MB_USERRCLM, &zeroed);
	ASSERT_BUDDY(&B);
	ASSERT_GE(q, 0);
	ASSERT_EQ(q & 7, 0);
	ASSERT_NE((size_t)q >> B.pb_order, pb);
	ASSERT_EQ(zeroed, 1);
	ASSERT_EQ(B.nr_global, 0);
	free_ok(&B, q);
	ASSERT_EQ(B.nr_global, 1);
	long r = mb_buddy_alloc_aligned(&B, 12, 4, MB_USERRCLM, &zeroed);
	ASSERT_BUDDY(&B);
	ASSERT_EQ(r, y);
	ASSERT_EQ(zeroed, 0);
	ASSERT_EQ(B.nr_global, 1);
	ASSERT_EQ(B.pages[r].npages, 12);
	/* 13 pages: no row of them is free, so a block of 16 from the pool
	 * (the pageblock q had, resident), trimmed; the rest of it stays
	 * free. */
	long s = mb_buddy_alloc(&B, 13, MB_USERRCLM, &zeroed);
	ASSERT_BUDDY(&B);
	ASSERT_GE(s, 0);
	ASSERT_EQ((size_t)s >> B.pb_order, (size_t)q >> B.pb_order);
	ASSERT_EQ(zeroed, 0);
	ASSERT_EQ(B.nr_global, 0);
	free_ok(&B, r);
	free_ok(&B, s);
	free_ok(&B, x);
	free_ok(&B, c);
	ASSERT_EQ(B.nr_global, B.nblocks);
	ASSERT(all_lists_empty(&B));
	test_buddy_free_region(&B);
}

/* A row never runs into the next pageblock, even one of the same type
 * that starts with free pages: its pages have another pageblock's
 * bookkeeping. */
TEST(resident_row_stays_in_its_pageblock)
{
	test_buddy_new(&B, 3, MB_MAX_ORDER_MIN);
	size_t pbp = B.pb_pages;
	long a = alloc_ok(&B, pbp - 4, MB_KERNRCLM); /* pageblock 0, trimmed */
	long b = alloc_ok(&B, 4, MB_KERNRCLM);        /* its last 4 pages */
	long c = alloc_ok(&B, 4, MB_KERNRCLM);        /* pageblock 1 */
	long e = alloc_ok(&B, 4, MB_KERNRCLM);
	long d = alloc_ok(&B, 8, MB_KERNRCLM);
	long f = alloc_ok(&B, 16, MB_KERNRCLM);
	ASSERT_EQ((size_t)b, pbp - 4);
	ASSERT_EQ((size_t)c, pbp);
	ASSERT_EQ((size_t)f, pbp + 16);
	free_ok(&B, b);
	free_ok(&B, c);
	/* 4 free pages end pageblock 0 and 4 start pageblock 1: a request
	 * of 6 is not served across the edge, but from the pool. */
	long r = mb_buddy_alloc(&B, 6, MB_KERNRCLM, NULL);
	ASSERT_BUDDY(&B);
	ASSERT_GE(r, 0);
	ASSERT_EQ((size_t)r >> B.pb_order, 2);
	free_ok(&B, r);
	free_ok(&B, a);
	free_ok(&B, e);
	free_ok(&B, d);
	free_ok(&B, f);
	ASSERT_EQ(B.nr_global, B.nblocks);
	ASSERT(all_lists_empty(&B));
	test_buddy_free_region(&B);
}

/* --enable-debug-checks: an operation on a buddy whose invariants are
 * broken aborts, naming the operation and the invariant. */
static void alloc_after_corruption(void *arg)
{
	(void)arg;
	long a = mb_buddy_alloc(&B, 1, MB_USERRCLM, NULL);
	/* A free list's count that no longer matches its blocks. */
	B.free_area[MB_USERRCLM][0].nr_free += 5;
	mb_buddy_alloc(&B, 1, MB_USERRCLM, NULL);
	(void)a;
}

TEST(debug_checks_abort_on_a_broken_invariant)
{
#ifndef MB_DEBUG_CHECKS
	SKIP("a build without --enable-debug-checks");
#else
	test_buddy_new(&B, 2, MB_MAX_ORDER_MIN);
	struct test_child c;
	test_child_run(&c, alloc_after_corruption, NULL);
	if (c.status != 128 + SIGABRT || !strstr(c.out, "libmbuddy: buddy invariant broken after mb_buddy_alloc"))
		FAIL("status %d, want %d (SIGABRT) and the checker's message in:\n%s", c.status, 128 + SIGABRT,
		     c.out);
	test_buddy_free_region(&B);
#endif
}
