/* Threads that come and go with objects of mixed size and lifetime
 * (mstress-like).
 *
 * After mimalloc's stress test: the work runs in ROUNDS; each round
 * starts THREADS fresh threads and waits for them to end, so every
 * thread's cached memory must find its way back when it exits. A thread
 * does OPS allocations of mixed size (90% 8-256 B, 9% up to 8 KiB, 1% up
 * to 256 KiB, log-uniform within each range; every page written):
 *   40% temporaries, freed 16 allocations later;
 *   50% kept in the thread's working set of 4000 objects, replacing (and
 *       freeing) a random one, all freed when the thread ends;
 *   10% swapped into a process-wide transfer array of 1000 slots; what
 *       was there, allocated by another thread or an earlier round, is
 *       freed.
 * Fixed work: the figures are the time and the peak RSS.
 *
 * Usage: mstress THREADS ROUNDS [OPS]
 * Prints: RESULT workload=mstress threads=.. rounds=.. sec=.. ops=.. mops=..
 */
#include "common.h"

#define MAX_THREADS 256
#define WORKING 4000
#define TEMPS 16
#define TRANSFER 1000

static void *transfer[TRANSFER];
static size_t ops_per_thread = 40000;

struct worker {
	uint64_t seed;
};

static void *alloc_obj(struct rng *r)
{
	unsigned pick = (unsigned)rng_below(r, 100);
	size_t n = pick < 90 ? rng_logsize(r, 8, 256)
		 : pick < 99 ? rng_logsize(r, 256, 8192)
			     : rng_logsize(r, 8192, 262144);
	void *p = malloc(n);
	if (!p)
		oom("mstress", n);
	touch_pages(p, n, n);
	return p;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	struct rng r = { w->seed };
	void *working[WORKING] = { 0 };
	void *temps[TEMPS] = { 0 };
	for (size_t i = 0; i < ops_per_thread; i++) {
		unsigned what = (unsigned)rng_below(&r, 100);
		void *p = alloc_obj(&r);
		if (what < 40) {
			free(temps[i % TEMPS]);
			temps[i % TEMPS] = p;
		} else if (what < 90) {
			size_t k = rng_below(&r, WORKING);
			free(working[k]);
			working[k] = p;
		} else {
			size_t k = rng_below(&r, TRANSFER);
			free(__atomic_exchange_n(&transfer[k], p, __ATOMIC_ACQ_REL));
		}
	}
	for (int k = 0; k < TEMPS; k++)
		free(temps[k]);
	for (int k = 0; k < WORKING; k++)
		free(working[k]);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s THREADS ROUNDS [OPS]\n", argv[0]);
		return 1;
	}
	int nthreads = parse_threads(argv[1], MAX_THREADS);
	long rounds = atol(argv[2]);
	if (argc > 3)
		ops_per_thread = parse_size(argv[3]);
	if (rounds < 1) {
		fprintf(stderr, "ROUNDS must be at least 1\n");
		return 1;
	}
	static struct worker ws[MAX_THREADS];
	double t0 = now_sec();
	for (long round = 0; round < rounds; round++) {
		for (int i = 0; i < nthreads; i++)
			ws[i].seed = 0xA4093822299F31D0ULL * (uint64_t)(round * nthreads + i + 1) | 1;
		run_threads(nthreads, run, ws, sizeof ws[0], 0);
	}
	for (int k = 0; k < TRANSFER; k++)
		free(transfer[k]);
	double sec = now_sec() - t0;
	unsigned long long ops = (unsigned long long)rounds * (unsigned long long)nthreads * ops_per_thread;
	printf("RESULT workload=mstress threads=%d rounds=%ld sec=%.3f ops=%llu mops=%.3f\n", nthreads,
	       rounds, sec, ops, (double)ops / sec / 1e6);
	return 0;
}
