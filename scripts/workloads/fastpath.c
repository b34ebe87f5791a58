/* Small-object fast path: malloc+free cost in nanoseconds per operation.
 *
 * The other workloads time whole programs; this one isolates the path
 * every small allocation takes when the per-thread cache can serve it. One
 * operation is one malloc() plus one free(). Sizes cycle through eight
 * small sizes (16 B - 256 B), so several size classes are in use. Every
 * object gets one byte written, as a program would, and its pointer is
 * passed to an empty asm statement, so the compiler can neither drop the
 * malloc/free pair (GCC removes unused pairs) nor merge iterations.
 *
 *   pair    malloc(n), write, free(p) of the same pointer, in a loop: the
 *           best case, the cache hands back what it just took.
 *   batch   64 objects of one size allocated, then freed in the same order
 *           (oldest first), size changing per batch: the cache must hold
 *           64 entries of a class and cope with FIFO order.
 *   pair1t  the pair loop in one spawned thread: the reference for the
 *           scaling ratio (the main thread may be special, e.g. glibc's
 *           main arena), measured exactly like pair2t.
 *   pair2t  the pair loop in two spawned threads at once, OPS each. The
 *           time of a repetition runs from the earliest thread's start to
 *           the latest one's end, so ns/op is per thread and includes any
 *           waiting on the other; scale2t = pair2t_ns / pair1t_ns (1.0 =
 *           perfect scaling, 2.0 = fully serialised).
 *
 * Each part runs one untimed warm-up repetition, then REPS timed ones, and
 * reports the best (minimum): the least disturbed by other processes on a
 * shared machine. Times from clock_gettime(CLOCK_MONOTONIC). With two
 * threads on a busy or single-CPU machine scale2t rises for every
 * allocator alike; compare it across allocators of the same run.
 *
 * Usage: fastpath OPS [REPS]   (OPS operations per repetition and thread)
 * Prints: RESULT workload=fastpath ops=.. pair_ns=.. batch_ns=..
 *         pair1t_ns=.. pair2t_ns=.. scale2t=..
 */
#include <pthread.h>

#include "common.h"

#define NSIZES 8
#define BATCH 64
#define MAX_REPS 100

static const size_t sizes[NSIZES] = { 16, 24, 32, 48, 64, 96, 128, 256 };

static size_t ops;
static unsigned reps = 3;

/* The pointer escapes into an asm statement that may read memory: the
 * write before it is observable and the allocation cannot be elided. */
static inline void use(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

/* The two loops are the call sites (see CALL_SITE): one distinct caller of
 * malloc each, never inlined into the timing code. */
CALL_SITE void pair_loop(size_t n);
CALL_SITE void batch_loop(size_t n);

void pair_loop(size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t sz = sizes[i & (NSIZES - 1)];
		unsigned char *p = malloc(sz);
		if (!p)
			oom("pair_loop", sz);
		p[0] = (unsigned char)i;
		use(p);
		free(p);
	}
}

/* n operations, rounded up to whole batches. */
void batch_loop(size_t n)
{
	void *slot[BATCH];
	for (size_t b = 0; b * BATCH < n; b++) {
		size_t sz = sizes[b & (NSIZES - 1)];
		for (size_t j = 0; j < BATCH; j++) {
			unsigned char *p = malloc(sz);
			if (!p)
				oom("batch_loop", sz);
			p[0] = (unsigned char)j;
			use(p);
			slot[j] = p;
		}
		for (size_t j = 0; j < BATCH; j++)
			free(slot[j]);
	}
}

static size_t round_batch(size_t n)
{
	return (n + BATCH - 1) / BATCH * BATCH;
}

/* Best ns/op of `reps` timed runs of loop(n), after one warm-up. */
static double time_best(void (*loop)(size_t), size_t n)
{
	loop(n);
	double best = 0;
	for (unsigned r = 0; r < reps; r++) {
		double t0 = now_sec();
		loop(n);
		double ns = (now_sec() - t0) * 1e9 / (double)n;
		if (r == 0 || ns < best)
			best = ns;
	}
	return best;
}

/* ---------------------------------------------------------- threaded part */

static pthread_barrier_t barrier;
/* Per repetition (0 is the warm-up) and thread: start and end times. */
static double t_start[MAX_REPS + 1][2], t_end[MAX_REPS + 1][2];

static void *pair_worker(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	for (unsigned r = 0; r <= reps; r++) {
		/* Both threads start together; the slower one's end counts. */
		pthread_barrier_wait(&barrier);
		t_start[r][id] = now_sec();
		pair_loop(ops);
		t_end[r][id] = now_sec();
	}
	return NULL;
}

/* Best per-thread ns/op of the pair loop run by `k` threads at once. */
static double time_threads(unsigned k)
{
	pthread_t tid[2];
	if (pthread_barrier_init(&barrier, NULL, k)) {
		fprintf(stderr, "FATAL: pthread_barrier_init failed\n");
		exit(2);
	}
	for (unsigned i = 0; i < k; i++)
		if (pthread_create(&tid[i], NULL, pair_worker, (void *)(uintptr_t)i)) {
			fprintf(stderr, "FATAL: pthread_create failed\n");
			exit(2);
		}
	for (unsigned i = 0; i < k; i++)
		pthread_join(tid[i], NULL);
	pthread_barrier_destroy(&barrier);
	double best = 0;
	for (unsigned r = 1; r <= reps; r++) {
		double lo = t_start[r][0], hi = t_end[r][0];
		for (unsigned i = 1; i < k; i++) {
			if (t_start[r][i] < lo)
				lo = t_start[r][i];
			if (t_end[r][i] > hi)
				hi = t_end[r][i];
		}
		double ns = (hi - lo) * 1e9 / (double)ops;
		if (r == 1 || ns < best)
			best = ns;
	}
	return best;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s OPS [REPS]\n", argv[0]);
		return 1;
	}
	ops = parse_size(argv[1]);
	if (argc > 2)
		reps = (unsigned)parse_size(argv[2]);
	if (ops < BATCH || reps < 1 || reps > MAX_REPS) {
		fprintf(stderr, "OPS must be at least %d, REPS 1..%d\n", BATCH, MAX_REPS);
		return 1;
	}
	ops = round_batch(ops);

	double pair = time_best(pair_loop, ops);
	double batch = time_best(batch_loop, ops);
	double pair1t = time_threads(1);
	double pair2t = time_threads(2);
	printf("RESULT workload=fastpath ops=%zu reps=%u pair_ns=%.2f batch_ns=%.2f "
	       "pair1t_ns=%.2f pair2t_ns=%.2f scale2t=%.3f\n",
	       ops, reps, pair, batch, pair1t, pair2t, pair2t / pair1t);
	return 0;
}
