/* Size classes of small objects: 16-byte steps to 128 (the alignment
 * malloc owes: an object wastes less than 16 bytes, which is up to 47% of
 * a 32-byte class), then eight classes per doubling up to 16 KiB, so that
 * above 128 bytes no object wastes 12% of its class. Larger requests are
 * whole pages from the buddy. */
#ifndef MB_SIZECLASS_H
#define MB_SIZECLASS_H

#include <stddef.h>
#include <stdint.h>

#define MB_NCLASSES 64
#define MB_SMALL_MAX 16384
#define MB_ALIGNMENT 16 /* malloc's guarantee on x86-64 glibc */
#define MB_SLAB_MAX_PAGES 16
/* A thread cache (theap.h) holds at most this many objects of a class,
 * and at most this many bytes of it: 30 (its hot object and a stack of
 * 29, in 512 bytes), so that a burst of frees and allocations of a few
 * dozen small objects stays in the cache (alloc-test at 2 threads 10%
 * faster than with 7, larson 20%, measured with 31), while a class above
 * 1 KiB is bounded by its bytes as before. */
#define MB_TCACHE_MAX 30
#define MB_TCACHE_BYTES ((uint32_t)32 << 10)

struct mb_class_info {
	uint32_t size;       /* object size */
	uint32_t slab_pages; /* pages per slab */
	uint32_t nobj;       /* objects per slab */
	uint32_t magic;      /* (offset * magic) >> 32 == offset / size, and
			      * (uint32_t)(offset * magic) < magic exactly
			      * when size divides offset, at every offset of
			      * a slab (floor(2^32 / size) + 1, sizes up to
			      * 16 KiB, slabs up to 64 KiB) */
	uint32_t cache_cap;  /* objects a thread cache keeps at most */
};

extern struct mb_class_info mb_classes[MB_NCLASSES];
extern uint8_t mb_class_small[MB_SMALL_MAX / 16 + 1];

void mb_sizeclass_init(void);

/* Byte offset off of a slab of the class whose magic number is magic:
 * the index of the object it falls in, in *i, and whether it is that
 * object's start. One multiply: the index is the product's high half, and
 * its low half is below magic exactly at a start (see magic above). */
static inline int mb_class_object_at(uint64_t off, uint32_t magic, uint32_t *i)
{
	uint64_t q = off * magic;
	*i = (uint32_t)(q >> 32);
	return (uint32_t)q < magic;
}

static inline unsigned mb_size_class(size_t n)
{
	return mb_class_small[(n + 15) >> 4];
}

/* The smallest class that holds n bytes at alignment `align` (a power of
 * two up to a page), or -1. Object addresses in a slab are multiples of
 * the largest power of two dividing the class size. */
int mb_size_class_aligned(size_t n, size_t align);

#endif
