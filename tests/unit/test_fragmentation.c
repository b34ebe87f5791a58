/* The kernel's fragmentation metrics (fragmentation.c, after mm/vmstat.c):
 * the unusable free space index and the fragmentation index of a target
 * order, on free-block counts worked out by hand, their edge cases, and
 * random counts against the kernel's integer arithmetic (thousandths). */
#include "config.h"
#include "harness.h"
#include "fragmentation.h"

#define EPS 1e-12

static double unusable(const uint64_t *nr, unsigned j)
{
	return mb_unusable_free_index(nr, 11, j);
}

static double fragidx(const uint64_t *nr, unsigned j)
{
	return mb_fragmentation_index(nr, 11, j);
}

/* Nothing free: all of it (none) is unusable, and a failure would be for
 * lack of memory, not fragmentation. */
TEST(nothing_free)
{
	uint64_t nr[11] = { 0 };
	for (unsigned j = 0; j < 11; j++) {
		ASSERT_EQ(unusable(nr, j), 1.0);
		ASSERT_EQ(fragidx(nr, j), 0.0);
	}
}

/* One free order-3 block (8 pages): every order up to 3 is served from it
 * (index -1: a block of that order is free); above, all 8 pages are
 * unusable, and a failure is due to lack of memory more than to
 * fragmentation: 1 - (1 + 8/2^j) / 1 = -8/2^j... which the kernel's
 * formula does give, a negative value for few blocks (-0.5 at order 4). */
TEST(one_block)
{
	uint64_t nr[11] = { [3] = 1 };
	for (unsigned j = 0; j <= 3; j++) {
		ASSERT_EQ(unusable(nr, j), 0.0);
		ASSERT_EQ(fragidx(nr, j), -1.0);
	}
	for (unsigned j = 4; j < 11; j++) {
		ASSERT_EQ(unusable(nr, j), 1.0);
		ASSERT_NEAR(fragidx(nr, j), -8.0 / (double)(1u << j), EPS);
	}
	ASSERT_EQ(fragidx(nr, 4), -0.5);
}

/* Eight single pages: usable at order 0 only. The fragmentation index
 * grows towards 1 with the order: 1 - (1 + 8/2^j) / 8. */
TEST(scattered_pages)
{
	uint64_t nr[11] = { [0] = 8 };
	ASSERT_EQ(unusable(nr, 0), 0.0);
	ASSERT_EQ(fragidx(nr, 0), -1.0);
	for (unsigned j = 1; j < 11; j++)
		ASSERT_EQ(unusable(nr, j), 1.0);
	ASSERT_NEAR(fragidx(nr, 1), 0.375, EPS); /* 1 - 5/8 */
	ASSERT_NEAR(fragidx(nr, 2), 0.625, EPS); /* 1 - 3/8 */
	ASSERT_NEAR(fragidx(nr, 3), 0.75, EPS);  /* 1 - 2/8 */
	ASSERT_NEAR(fragidx(nr, 10), 1.0 - (1.0 + 8.0 / 1024) / 8, EPS);
}

/* 4 order-0, 2 order-1 and 1 order-2 blocks: 12 free pages in 7 blocks.
 * Order 1 can use the order-1 and order-2 blocks, 8 of the 12 pages;
 * order 2 the order-2 block, 4 pages; order 3 nothing. */
TEST(mixed_orders)
{
	uint64_t nr[11] = { 4, 2, 1 };
	ASSERT_EQ(unusable(nr, 0), 0.0);
	ASSERT_NEAR(unusable(nr, 1), 4.0 / 12, EPS);
	ASSERT_NEAR(unusable(nr, 2), 8.0 / 12, EPS);
	ASSERT_EQ(unusable(nr, 3), 1.0);
	ASSERT_EQ(fragidx(nr, 0), -1.0);
	ASSERT_EQ(fragidx(nr, 1), -1.0);
	ASSERT_EQ(fragidx(nr, 2), -1.0);
	ASSERT_NEAR(fragidx(nr, 3), 1.0 - (1.0 + 12.0 / 8) / 7, EPS); /* 0.642857... */
	ASSERT_NEAR(fragidx(nr, 4), 1.0 - (1.0 + 12.0 / 16) / 7, EPS);
}

/* Only orders below norders count: a block counted past it is not there. */
TEST(norders_bounds_the_counts)
{
	uint64_t nr[11] = { 2, 0, 0, 0, 1 };
	ASSERT_EQ(mb_unusable_free_index(nr, 4, 1), 1.0);
	ASSERT_NEAR(mb_fragmentation_index(nr, 4, 1), 1.0 - (1.0 + 2.0 / 2) / 2, EPS);
	ASSERT_NEAR(mb_unusable_free_index(nr, 5, 1), 2.0 / 18, EPS);
	ASSERT_EQ(mb_fragmentation_index(nr, 5, 1), -1.0);
}

/* The kernel's own arithmetic, in thousandths (mm/vmstat.c). */
static long kernel_unusable(const uint64_t *nr, unsigned norders, unsigned j)
{
	uint64_t pages = 0, suitable = 0;
	for (unsigned o = 0; o < norders; o++) {
		pages += nr[o] << o;
		if (o >= j)
			suitable += nr[o] << (o - j);
	}
	if (!pages)
		return 1000;
	return (long)((pages - (suitable << j)) * 1000 / pages);
}

static long kernel_fragidx(const uint64_t *nr, unsigned norders, unsigned j)
{
	uint64_t pages = 0, blocks = 0, suitable = 0;
	for (unsigned o = 0; o < norders; o++) {
		pages += nr[o] << o;
		blocks += nr[o];
		if (o >= j)
			suitable += nr[o] << (o - j);
	}
	if (!blocks)
		return 0;
	if (suitable)
		return -1000;
	return 1000 - (long)((1000 + pages * 1000 / ((uint64_t)1 << j)) / blocks);
}

TEST(random_counts_match_the_kernel)
{
	uint64_t seed = 0x243f6a8885a308d3ULL;
	for (int round = 0; round < 20000; round++) {
		uint64_t nr[16] = { 0 };
		unsigned norders = 6 + (unsigned)(round % 11);
		for (unsigned o = 0; o < norders; o++) {
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			unsigned r = (unsigned)(seed >> 33);
			/* Often empty, at times huge, mostly small. */
			nr[o] = r % 3 == 0 ? 0 : r % 17 == 0 ? r % (1u << 20) : r % 50;
		}
		for (unsigned j = 0; j < norders; j++) {
			double u = mb_unusable_free_index(nr, norders, j), f = mb_fragmentation_index(nr, norders, j);
			long ku = kernel_unusable(nr, norders, j), kf = kernel_fragidx(nr, norders, j);
			/* The kernel's unsigned divisions truncate: one for
			 * the unusable index, two for the fragmentation index
			 * (whose value is 1000 minus a truncated quotient). */
			if (!(u * 1000 >= ku - 1e-9 && u * 1000 < ku + 1))
				FAIL("unusable index %.6f at order %u of %u, kernel %ld/1000", u, j, norders, ku);
			if (!(f * 1000 > kf - 2 && f * 1000 <= kf + 1e-9))
				FAIL("fragmentation index %.6f at order %u of %u, kernel %ld/1000", f, j, norders, kf);
			ASSERT_LE(u, 1.0);
			ASSERT_GE(u, 0.0);
			ASSERT_LE(f, 1.0);
			ASSERT_GE(f, -1.0);
		}
	}
}
