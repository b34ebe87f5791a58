#include "config.h"
#include "sizeclass.h"
#include "buddy.h"

struct mb_class_info mb_classes[MB_NCLASSES];
uint8_t mb_class_small[MB_SMALL_MAX / 16 + 1];

/* Pages per slab: the fewest that hold enough objects for a slab to serve
 * a burst with at most 1/32 of the slab past the last object, else the
 * least waste. Any count of pages up to MB_SLAB_MAX_PAGES: the buddy takes
 * a block of the next power of two and gives the rest back, so a 320-byte
 * class needs no 6% tail on every page (a page holds 12 objects and 256
 * spare bytes; two pages hold 25 and 192). Small slabs drain and go back
 * to the buddy sooner; a slab's pages are written in order, so pages past
 * the objects in use cost nothing resident. */
static uint32_t pick_slab_pages(uint32_t size)
{
	uint32_t want = size <= 256 ? 16 : size <= 2048 ? 8 : 4;
	uint32_t best = MB_SLAB_MAX_PAGES, best_waste = 0, best_bytes = 0;
	for (uint32_t pages = 1; pages <= MB_SLAB_MAX_PAGES; pages++) {
		uint32_t bytes = pages * (uint32_t)MB_PAGE_SIZE;
		uint32_t nobj = bytes / size;
		if (nobj < want)
			continue;
		uint32_t waste = bytes - nobj * size;
		if (waste * 32 <= bytes)
			return pages;
		if (!best_bytes || (uint64_t)waste * best_bytes < (uint64_t)best_waste * bytes) {
			best = pages;
			best_waste = waste;
			best_bytes = bytes;
		}
	}
	return best;
}

void mb_sizeclass_init(void)
{
	unsigned c = 0;
	for (uint32_t s = 16; s <= 128; s += 16)
		mb_classes[c++].size = s;
	for (uint32_t base = 128; base < MB_SMALL_MAX; base *= 2) {
		/* Eight classes per doubling: with four, jq's 392-byte values
		 * took 448 bytes and its 272-byte ones 320 (14% of its small
		 * objects' bytes were rounding, against 7% now), and a page
		 * and a header (a database's page cache) rounds up by an
		 * eighth at most. */
		for (uint32_t k = 1; k <= 8; k++)
			mb_classes[c++].size = base + k * (base / 8);
	}
	for (c = 0; c < MB_NCLASSES; c++) {
		struct mb_class_info *ci = &mb_classes[c];
		ci->slab_pages = pick_slab_pages(ci->size);
		ci->nobj = ci->slab_pages * (uint32_t)MB_PAGE_SIZE / ci->size;
		ci->magic = (uint32_t)(((uint64_t)1 << 32) / ci->size + 1);
		uint32_t cap = MB_TCACHE_BYTES / ci->size;
		ci->cache_cap = cap > MB_TCACHE_MAX ? MB_TCACHE_MAX : cap < 2 ? 2 : cap;
	}
	c = 0;
	for (size_t i = 0; i <= MB_SMALL_MAX / 16; i++) {
		size_t n = i * 16;
		while (mb_classes[c].size < n)
			c++;
		mb_class_small[i] = (uint8_t)c;
	}
}

int mb_size_class_aligned(size_t n, size_t align)
{
	if (n > MB_SMALL_MAX)
		return -1;
	for (unsigned c = mb_size_class(n); c < MB_NCLASSES; c++) {
		uint32_t s = mb_classes[c].size;
		if ((s & -s) >= align)
			return (int)c;
	}
	return -1;
}
