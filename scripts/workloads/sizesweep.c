/* Size sweep from 8 B to 1 MiB.
 *
 * For each size on a 1, 1.25, 1.5, 1.75 x 2^k ladder (plus sizes just past
 * each power of two, which land at the bottom of the next size class),
 * allocate a batch, write one byte per page of each object (first and last
 * byte for small ones), then free the batch in a shuffled order. Batches
 * hold a bounded number of bytes, so small sizes test the allocator's fast
 * path and large sizes its page handling (mmap thresholds, reuse, purging).
 *
 * Usage: sizesweep ROUNDS [BATCH_BYTES]
 * Prints: RESULT workload=sizesweep sizes=.. allocs=.. sec=..
 */
#include "common.h"

#define MAX_BATCH 4096
#define MAX_SIZE ((size_t)1 << 20)

static void *slot[MAX_BATCH];

static void touch(unsigned char *p, size_t n, unsigned char v)
{
	for (size_t off = 0; off < n; off += 4096)
		p[off] = v;
	p[n - 1] = v;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s ROUNDS [BATCH_BYTES]\n", argv[0]);
		return 1;
	}
	long rounds = atol(argv[1]);
	size_t batch_bytes = argc > 2 ? parse_size(argv[2]) : (size_t)8 << 20;

	size_t sizes[256];
	unsigned nsizes = 0;
	for (size_t p2 = 8; p2 <= MAX_SIZE; p2 *= 2)
		for (unsigned q = 4; q < 8; q++) {
			size_t s = p2 * q / 4;
			if (s <= MAX_SIZE)
				sizes[nsizes++] = s;
			if (q == 4 && p2 >= 16 && p2 < MAX_SIZE)
				sizes[nsizes++] = p2 + 8; /* just past a power of two */
		}

	struct rng r = { 0x13198A2E03707344ULL };
	unsigned long allocs = 0;
	double t0 = now_sec();
	for (long round = 0; round < rounds; round++) {
		for (unsigned si = 0; si < nsizes; si++) {
			size_t n = sizes[si];
			size_t count = batch_bytes / n;
			if (count > MAX_BATCH)
				count = MAX_BATCH;
			if (count < 2)
				count = 2;
			for (size_t i = 0; i < count; i++) {
				slot[i] = malloc(n);
				if (!slot[i])
					oom("sizesweep", n);
				touch(slot[i], n, (unsigned char)i);
			}
			allocs += count;
			/* Fisher-Yates: free order unrelated to allocation order. */
			for (size_t i = count - 1; i > 0; i--) {
				size_t j = rng_below(&r, i + 1);
				void *t = slot[i];
				slot[i] = slot[j];
				slot[j] = t;
			}
			for (size_t i = 0; i < count; i++)
				free(slot[i]);
		}
	}
	double sec = now_sec() - t0;
	printf("RESULT workload=sizesweep sizes=%u allocs=%lu sec=%.3f\n", nsizes, allocs, sec);
	return 0;
}
