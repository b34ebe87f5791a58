/* Size classes (sizeclass.c): every small size maps to the smallest class
 * that holds it; classes are 16-aligned and increasing; slab geometry fits
 * (objects within the slab, the slab within the smallest pageblock, enough
 * objects per slab); the magic number divides exactly at every offset of a
 * slab; aligned requests get the smallest class whose objects are aligned. */
#include "config.h"
#include "harness.h"
#include "sizeclass.h"

/* Set up once: the tables are process-wide, as init.c builds them. */
static void classes(void)
{
	static int done;
	if (!done)
		mb_sizeclass_init();
	done = 1;
}

TEST(classes_increase_in_16_byte_steps)
{
	classes();
	ASSERT_EQ(mb_classes[0].size, 16);
	ASSERT_EQ(mb_classes[MB_NCLASSES - 1].size, MB_SMALL_MAX);
	for (unsigned c = 0; c < MB_NCLASSES; c++) {
		ASSERT_EQ(mb_classes[c].size % MB_ALIGNMENT, 0);
		if (c)
			ASSERT_GT(mb_classes[c].size, mb_classes[c - 1].size);
	}
}

/* Up to 128 bytes the steps are the alignment; above, four classes per
 * doubling, so an object never wastes 20% of its class or more. */
TEST(waste_is_bounded)
{
	classes();
	for (unsigned c = 1; c < MB_NCLASSES; c++) {
		uint32_t s = mb_classes[c].size, prev = mb_classes[c - 1].size;
		uint32_t worst = s - (prev + 1); /* bytes unused by the smallest request of class c */
		if (s <= 128)
			ASSERT_EQ(s - prev, MB_ALIGNMENT);
		else
			ASSERT_LT(worst * 5, s);
	}
}

/* Every size from 0 to MB_SMALL_MAX: its class holds it, the class below
 * does not. */
TEST(every_size_maps_to_the_smallest_class)
{
	classes();
	for (size_t n = 0; n <= MB_SMALL_MAX; n++) {
		unsigned c = mb_size_class(n);
		ASSERT_LT(c, MB_NCLASSES);
		if (mb_classes[c].size < n || (c && mb_classes[c - 1].size >= n))
			FAIL("size %zu in class %u of %u bytes (the class below: %u bytes)", n, c, mb_classes[c].size,
			     c ? mb_classes[c - 1].size : 0);
	}
}

TEST(slab_geometry)
{
	classes();
	size_t pb_min_pages = (size_t)1 << (MB_MAX_ORDER_MIN - 1);
	for (unsigned c = 0; c < MB_NCLASSES; c++) {
		const struct mb_class_info *ci = &mb_classes[c];
		size_t bytes = (size_t)ci->slab_pages * MB_PAGE_SIZE;
		ASSERT_GE(ci->slab_pages, 1);
		/* A slab is one buddy block: it fits in the smallest pageblock. */
		ASSERT_LE(ci->slab_pages, pb_min_pages);
		ASSERT_EQ(ci->nobj, bytes / ci->size);
		ASSERT_LE((size_t)ci->nobj * ci->size, bytes);
		ASSERT_LE(ci->nobj, UINT16_MAX); /* struct mb_slab counts objects in 16 bits */
		/* Enough objects for a burst. */
		unsigned want = ci->size <= 256 ? 16u : ci->size <= 2048 ? 8u : 4u;
		ASSERT_GE(ci->nobj, want);
		ASSERT_LE(ci->slab_pages, MB_SLAB_MAX_PAGES);
		/* The tail past the last object: at most 1/32 of the slab,
		 * unless no slab of a page count that holds enough objects
		 * does better, and no more pages than that takes. */
		size_t tail = bytes - (size_t)ci->nobj * ci->size;
		for (size_t pages = 1; pages <= MB_SLAB_MAX_PAGES; pages++) {
			size_t b2 = pages * MB_PAGE_SIZE, n2 = b2 / ci->size, t2 = b2 - n2 * ci->size;
			if (n2 < want)
				continue;
			if (tail * 32 > bytes && t2 * bytes < tail * b2)
				FAIL("class %u (%u bytes): %u pages waste %zu bytes, %zu pages only %zu", c, ci->size,
				     ci->slab_pages, tail, pages, t2);
			if (t2 * 32 <= b2 && pages < ci->slab_pages)
				FAIL("class %u (%u bytes): %zu pages hold enough with a tail of %zu, not %u", c,
				     ci->size, pages, t2, ci->slab_pages);
		}
	}
	/* Example: 320-byte objects, 12 to a page with 256 bytes spare,
	 * take two pages (25 objects, 192 bytes spare). */
	const struct mb_class_info *c320 = &mb_classes[mb_size_class(320)];
	ASSERT_EQ(c320->size, 320);
	ASSERT_EQ(c320->slab_pages, 2);
	ASSERT_EQ(c320->nobj, 25);
}

/* (offset * magic) >> 32 is offset / size at every byte of a slab, which
 * the free fast path relies on to find an object's index; and the low 32
 * bits of the product are below the magic number exactly at an object's
 * start, which it relies on to tell an object's start from a pointer
 * inside it with no second multiply. */
TEST(magic_division_is_exact)
{
	classes();
	for (unsigned c = 0; c < MB_NCLASSES; c++) {
		const struct mb_class_info *ci = &mb_classes[c];
		uint64_t bytes = (uint64_t)ci->slab_pages * MB_PAGE_SIZE;
		for (uint64_t off = 0; off < bytes; off++) {
			uint64_t prod = off * ci->magic, q = prod >> 32;
			if (q != off / ci->size)
				FAIL("class %u (%u bytes): offset %" PRIu64 " * magic %u >> 32 = %" PRIu64
				     ", want %" PRIu64,
				     c, ci->size, off, ci->magic, q, off / ci->size);
			if (((uint32_t)prod < ci->magic) != (off % ci->size == 0))
				FAIL("class %u (%u bytes): offset %" PRIu64 ": low half %u against magic %u, "
				     "start of an object: %d",
				     c, ci->size, off, (uint32_t)prod, ci->magic, off % ci->size == 0);
		}
	}
}

/* The smallest class holding n whose object addresses are multiples of
 * align, found the slow way. */
static int smallest_aligned(size_t n, size_t align)
{
	for (unsigned c = 0; c < MB_NCLASSES; c++) {
		uint32_t s = mb_classes[c].size;
		if (s >= n && (s & -s) >= align)
			return (int)c;
	}
	return -1;
}

TEST(aligned_classes)
{
	classes();
	for (size_t align = 1; align <= MB_PAGE_SIZE; align *= 2)
		for (size_t n = 0; n <= MB_SMALL_MAX; n++) {
			int c = mb_size_class_aligned(n, align), want = smallest_aligned(n, align);
			if (c != want)
				FAIL("mb_size_class_aligned(%zu, %zu) = %d, want %d", n, align, c, want);
		}
	/* Examples: 16-byte objects are 16-aligned; 100 bytes at 64 take the
	 * 128-byte class; 4096-aligned objects are the 4096-byte class. */
	ASSERT_EQ(mb_classes[mb_size_class_aligned(1, 16)].size, 16);
	ASSERT_EQ(mb_classes[mb_size_class_aligned(100, 64)].size, 128);
	ASSERT_EQ(mb_classes[mb_size_class_aligned(1, 4096)].size, 4096);
	ASSERT_EQ(mb_size_class_aligned(MB_SMALL_MAX + 1, 16), -1);
	ASSERT_EQ(mb_size_class_aligned(SIZE_MAX, 16), -1);
	/* Nothing above 8192 bytes is a multiple of 16384 but the last class. */
	ASSERT_EQ(mb_classes[mb_size_class_aligned(9000, 8192)].size, MB_SMALL_MAX);
}

/* Objects are multiples of their alignment only if the slab's buddy block
 * is aligned at least as much: a block of k pages is aligned to the power
 * of two at or above k pages. */
TEST(slab_blocks_carry_the_alignment)
{
	classes();
	for (unsigned c = 0; c < MB_NCLASSES; c++) {
		uint32_t s = mb_classes[c].size, pages = mb_classes[c].slab_pages;
		size_t block = MB_PAGE_SIZE;
		while (block < (size_t)pages * MB_PAGE_SIZE)
			block *= 2;
		if (block % (s & -s) != 0)
			FAIL("class %u: %u-byte objects in %zu-byte aligned blocks", c, s, block);
	}
}

/* A thread cache keeps up to MB_TCACHE_MAX objects of a small class and
 * at most MB_TCACHE_BYTES of a large one, but never fewer than two. */
TEST(thread_cache_capacity)
{
	classes();
	ASSERT_EQ(mb_classes[mb_size_class(16)].cache_cap, MB_TCACHE_MAX);
	ASSERT_EQ(mb_classes[mb_size_class(1024)].cache_cap, MB_TCACHE_MAX);
	ASSERT_EQ(mb_classes[mb_size_class(4096)].cache_cap, MB_TCACHE_BYTES / 4096);
	ASSERT_EQ(mb_classes[mb_size_class(MB_SMALL_MAX)].cache_cap, 2);
	for (unsigned c = 0; c < MB_NCLASSES; c++) {
		uint32_t cap = mb_classes[c].cache_cap;
		ASSERT_LE(cap, MB_TCACHE_MAX);
		ASSERT_GE(cap, 2);
		if (cap > 2)
			ASSERT_LE((uint64_t)cap * mb_classes[c].size, MB_TCACHE_BYTES);
	}
}
