/* False sharing induced by the allocator (cache-scratch and cache-thrash
 * after Hoard's benchmarks).
 *
 * Two threads writing to different small objects that happen to share a
 * cache line slow each other down as if they shared data. Whether that
 * happens is up to the allocator:
 *   thrash   (active) each thread repeatedly allocates a SIZE-byte object,
 *            writes every byte of it REPS times, and frees it. An
 *            allocator that hands neighbouring objects to different
 *            threads makes them fight over one line.
 *   scratch  (passive) the main thread allocates one small object per
 *            thread, side by side, and hands them out; each thread frees
 *            the one it got, then runs the thrash loop. An allocator that
 *            reuses the freed object (or its line) for the thread that
 *            freed it puts the threads back on the main thread's line.
 * Fixed work per thread (ITERS objects); the figure is the time.
 *
 * Usage: false_sharing MODE THREADS ITERS REPS [SIZE]   (MODE: thrash|scratch)
 * Prints: RESULT workload=cache-MODE threads=.. sec=.. ops=.. mops=..
 */
#include "common.h"

#define MAX_THREADS 256

static size_t iters, reps, size = 8;

struct worker {
	void *given; /* scratch: the main thread's object to free first */
};

static void *run(void *arg)
{
	struct worker *w = arg;
	free(w->given);
	for (size_t i = 0; i < iters; i++) {
		volatile unsigned char *p = malloc(size);
		if (!p)
			oom("false_sharing", size);
		for (size_t r = 0; r < reps; r++)
			for (size_t j = 0; j < size; j++)
				p[j]++;
		free((void *)p);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: %s thrash|scratch THREADS ITERS REPS [SIZE]\n", argv[0]);
		return 1;
	}
	int scratch = strcmp(argv[1], "scratch") == 0;
	if (!scratch && strcmp(argv[1], "thrash") != 0) {
		fprintf(stderr, "MODE must be thrash or scratch\n");
		return 1;
	}
	int nthreads = parse_threads(argv[2], MAX_THREADS);
	iters = parse_size(argv[3]);
	reps = parse_size(argv[4]);
	if (argc > 5)
		size = parse_size(argv[5]);
	if (size < 1) {
		fprintf(stderr, "SIZE must be at least 1\n");
		return 1;
	}
	static struct worker ws[MAX_THREADS];
	if (scratch)
		for (int i = 0; i < nthreads; i++)
			if (!(ws[i].given = malloc(size)))
				oom("main", size);
	double sec = run_threads(nthreads, run, ws, sizeof ws[0], 0);
	unsigned long long ops = (unsigned long long)nthreads * iters;
	printf("RESULT workload=cache-%s threads=%d sec=%.3f ops=%llu mops=%.3f\n", argv[1], nthreads, sec,
	       ops, (double)ops / sec / 1e6);
	return 0;
}
