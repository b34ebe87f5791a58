/* Large zero-filled buffers, 5-25 MiB, allocated and freed in a loop.
 *
 * Models a program that decodes one image, archive member or request body
 * after another into a fresh zeroed buffer: calloc (or malloc + memset,
 * alternately, as both idioms are common), fill part of it, read it back,
 * free it. An allocator that returns every freed buffer to the kernel at
 * once pays page faults and zeroing on every iteration; one that keeps them
 * must still hand out zeroed memory for calloc.
 *
 * Usage: largebuf ITERATIONS
 * Prints: RESULT workload=largebuf iterations=.. bytes=.. sec=..
 */
#include "common.h"

#define MIN_BUF ((size_t)5 << 20)
#define MAX_BUF ((size_t)25 << 20)

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s ITERATIONS\n", argv[0]);
		return 1;
	}
	long iters = atol(argv[1]);
	struct rng r = { 0x082EFA98EC4E6C89ULL };
	unsigned long long bytes = 0, sum = 0;
	double t0 = now_sec();
	for (long i = 0; i < iters; i++) {
		size_t n = MIN_BUF + rng_below(&r, MAX_BUF - MIN_BUF + 1);
		unsigned char *p;
		if (i % 2) {
			p = calloc(1, n);
			if (!p)
				oom("largebuf calloc", n);
		} else {
			p = malloc(n);
			if (!p)
				oom("largebuf malloc", n);
			memset(p, 0, n);
		}
		/* Decode into the first part, as much as the input held. */
		size_t used = n / 4 + rng_below(&r, n / 2);
		for (size_t off = 0; off < used; off += 64)
			p[off] = (unsigned char)(off >> 6);
		/* Consume: every page, so untouched zero pages count too. The
		 * bytes past `used` must still read as zero. */
		for (size_t off = 0; off < n; off += 4096) {
			if (off >= used && p[off]) {
				fprintf(stderr, "FATAL: buffer not zeroed at %zu\n", off);
				return 3;
			}
			sum += p[off];
		}
		bytes += n;
		free(p);
	}
	double sec = now_sec() - t0;
	printf("RESULT workload=largebuf iterations=%ld bytes=%llu sec=%.3f checksum=%llu\n",
	       iters, bytes, sec, sum);
	return 0;
}
