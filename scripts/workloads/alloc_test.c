/* Per-thread random allocation bursts (alloc-test-like).
 *
 * After the alloc-test benchmark: each thread, on its own, alternates at
 * random between bursts of allocation and bursts of freeing over a table
 * of SLOTS pointers. A burst covers 1-64 consecutive slots from a random
 * start: an allocation burst fills them (freeing what was there), a
 * freeing burst empties them, so objects born together tend to die
 * together, and the live set wanders around half the table. Sizes are
 * skewed small: 80% 8-64 B, 15% 64 B - 1 KiB, 5% 1-64 KiB (log-uniform
 * within each range); every object gets its first word written. Fixed
 * work per thread (MALLOCS allocations): the figure is the time.
 *
 * Usage: alloc_test THREADS MALLOCS [SLOTS]
 * Prints: RESULT workload=alloc-test threads=.. sec=.. ops=.. mops=..
 */
#include "common.h"

#define MAX_THREADS 256
#define MAX_BURST 64

static size_t mallocs_per_thread, nslots = 8192;

struct worker {
	uint64_t seed;
};

static size_t pick_size(struct rng *r)
{
	unsigned pick = (unsigned)rng_below(r, 100);
	return pick < 80 ? rng_logsize(r, 8, 64)
	     : pick < 95 ? rng_logsize(r, 64, 1024)
			 : rng_logsize(r, 1024, 65536);
}

static void *run(void *arg)
{
	struct worker *w = arg;
	struct rng r = { w->seed };
	uint64_t **slot = calloc(nslots, sizeof *slot);
	if (!slot)
		oom("slots", nslots * sizeof *slot);
	size_t done = 0;
	while (done < mallocs_per_thread) {
		size_t len = 1 + rng_below(&r, MAX_BURST);
		size_t start = rng_below(&r, nslots);
		int allocate = rng_below(&r, 2) == 0;
		for (size_t i = 0; i < len; i++) {
			size_t k = (start + i) % nslots;
			free(slot[k]);
			slot[k] = NULL;
			if (allocate && done < mallocs_per_thread) {
				size_t n = pick_size(&r);
				slot[k] = malloc(n);
				if (!slot[k])
					oom("alloc_test", n);
				*slot[k] = done++;
			}
		}
	}
	for (size_t k = 0; k < nslots; k++)
		free(slot[k]);
	free(slot);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s THREADS MALLOCS [SLOTS]\n", argv[0]);
		return 1;
	}
	int nthreads = parse_threads(argv[1], MAX_THREADS);
	mallocs_per_thread = parse_size(argv[2]);
	if (argc > 3)
		nslots = parse_size(argv[3]);
	if (nslots < MAX_BURST) {
		fprintf(stderr, "SLOTS must be at least %d\n", MAX_BURST);
		return 1;
	}
	static struct worker ws[MAX_THREADS];
	for (int i = 0; i < nthreads; i++)
		ws[i].seed = 0x13198A2E03707344ULL * (uint64_t)(i + 1) | 1;
	double sec = run_threads(nthreads, run, ws, sizeof ws[0], 0);
	unsigned long long ops = (unsigned long long)nthreads * mallocs_per_thread;
	printf("RESULT workload=alloc-test threads=%d sec=%.3f ops=%llu mops=%.3f\n", nthreads, sec, ops,
	       (double)ops / sec / 1e6);
	return 0;
}
