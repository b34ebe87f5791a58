/* Private working sets for a fixed time (glibc bench-malloc-thread-like).
 *
 * After glibc's benchtests/bench-malloc-thread: each thread owns a
 * working set of WS blocks and, until the time is up, frees a random
 * block and allocates a new one of random size in its place. Sizes have a
 * density inversely proportional to the size (log-uniform, 8 B - 32 KiB),
 * so small blocks dominate. No object crosses threads: this measures how
 * the allocator's per-thread state scales when threads share nothing.
 *
 * Usage: glibc_thread THREADS SECONDS [WS]
 * Prints: RESULT workload=glibc-thread threads=.. sec=.. ops=.. mops=.. mops_per_thread=..
 *   ops: malloc calls, all threads.
 */
#include "common.h"

#define MAX_THREADS 256

/* A line of its own: the rng is written at every operation, and a line
 * shared with the other thread would time the coherence traffic, not
 * the allocator. */
struct worker {
	_Alignas(64) struct rng r;
	uint64_t ops;
	double sec;
};

static size_t ws_size = 2000;

static void *alloc_block(struct rng *r)
{
	size_t n = rng_logsize(r, 8, 32768);
	void *p = malloc(n);
	if (!p)
		oom("glibc_thread", n);
	memset(p, 0x3c, n < 16 ? n : 16);
	return p;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	void **ws = calloc(ws_size, sizeof(void *));
	if (!ws)
		oom("working set", ws_size * sizeof(void *));
	for (size_t k = 0; k < ws_size; k++)
		ws[k] = alloc_block(&w->r);
	double t0 = now_sec();
	uint64_t ops = 0;
	while (!stop_requested()) {
		size_t k = rng_below(&w->r, ws_size);
		free(ws[k]);
		ws[k] = alloc_block(&w->r);
		ops++;
	}
	w->sec = now_sec() - t0;
	w->ops = ops;
	for (size_t k = 0; k < ws_size; k++)
		free(ws[k]);
	free(ws);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s THREADS SECONDS [WS]\n", argv[0]);
		return 1;
	}
	int nthreads = parse_threads(argv[1], MAX_THREADS);
	double seconds = atof(argv[2]);
	if (argc > 3)
		ws_size = parse_size(argv[3]);
	if (ws_size < 1) {
		fprintf(stderr, "WS must be at least 1\n");
		return 1;
	}
	static struct worker ws[MAX_THREADS];
	for (int i = 0; i < nthreads; i++)
		ws[i].r.s = 0x452821E638D01377ULL * (uint64_t)(i + 1) | 1;
	double sec = run_threads(nthreads, run, ws, sizeof ws[0], seconds);
	/* Per thread, as glibc's benchmark reports it: each over its own
	 * timed loop. */
	uint64_t ops = 0;
	double per_thread = 0;
	for (int i = 0; i < nthreads; i++) {
		ops += ws[i].ops;
		per_thread += (double)ws[i].ops / ws[i].sec / 1e6 / nthreads;
	}
	printf("RESULT workload=glibc-thread threads=%d sec=%.3f ops=%llu mops=%.3f mops_per_thread=%.3f\n",
	       nthreads, sec, (unsigned long long)ops, (double)ops / sec / 1e6, per_thread);
	return 0;
}
