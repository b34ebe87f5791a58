/* Producers allocate, consumers free (xmalloc-test-like).
 *
 * After Lever and Boreham's xmalloc test: some threads only allocate and
 * others only free what they were handed, the asymmetric pattern that
 * per-thread caches find hardest (the consumer's cache fills with memory
 * it never reuses, the producer's stays empty). With THREADS >= 2, the
 * threads form THREADS/2 producer/consumer pairs; a producer fills a
 * batch of BATCH objects (sizes log-uniform 8 B - 1 KiB), writes their
 * first word and passes the batch through a ring to its consumer, which
 * checks and frees them. With THREADS = 1 the one thread frees its own
 * batches, in the same order: the same work with no cross-thread free,
 * for the scaling reference. Runs for SECONDS.
 *
 * Usage: xmalloc THREADS SECONDS
 * Prints: RESULT workload=xmalloc threads=.. sec=.. ops=.. mops=..
 *   ops: objects allocated (and freed), mops: millions per second.
 */
#include "pairs.h"

#define MAX_THREADS 256
#define BATCH 64
#define RING 16 /* batches in flight per pair */

struct batch {
	void *obj[BATCH];
};

struct pair {
	struct pair_head h; /* counts batches */
	struct batch ring[RING];
};

static void make_batch(struct batch *b, struct rng *r, uint64_t seq)
{
	for (int i = 0; i < BATCH; i++) {
		size_t n = rng_logsize(r, 8, 1024);
		uint64_t *p = malloc(n < 8 ? 8 : n);
		if (!p)
			oom("producer", n);
		*p = seq;
		b->obj[i] = p;
	}
}

static void free_batch(struct batch *b, uint64_t seq)
{
	for (int i = 0; i < BATCH; i++) {
		if (*(uint64_t *)b->obj[i] != seq) {
			fprintf(stderr, "FATAL: batch %llu corrupted\n", (unsigned long long)seq);
			exit(3);
		}
		free(b->obj[i]);
	}
}

static void *producer(void *arg)
{
	struct pair *p = arg;
	struct rng r = { p->h.seed };
	size_t t = 0;
	while (!stop_requested()) {
		unsigned spins = 0;
		while (t - __atomic_load_n(&p->h.head, __ATOMIC_ACQUIRE) >= RING && !stop_requested())
			backoff(&spins);
		if (stop_requested())
			break;
		make_batch(&p->ring[t % RING], &r, t);
		__atomic_store_n(&p->h.tail, ++t, __ATOMIC_RELEASE);
	}
	p->h.produced = (uint64_t)t * BATCH;
	__atomic_store_n(&p->h.done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *consumer(void *arg)
{
	struct pair *p = arg;
	size_t h = 0;
	for (;;) {
		unsigned spins = 0;
		while (__atomic_load_n(&p->h.tail, __ATOMIC_ACQUIRE) == h) {
			if (__atomic_load_n(&p->h.done, __ATOMIC_ACQUIRE) &&
			    __atomic_load_n(&p->h.tail, __ATOMIC_ACQUIRE) == h) {
				p->h.consumed = (uint64_t)h * BATCH;
				return NULL;
			}
			backoff(&spins);
		}
		free_batch(&p->ring[h % RING], h);
		__atomic_store_n(&p->h.head, ++h, __ATOMIC_RELEASE);
	}
}

/* One thread: produce a ring's worth, then free it oldest first. */
static void *alone(void *arg)
{
	struct pair *p = arg;
	struct rng r = { p->h.seed };
	size_t t = 0;
	while (!stop_requested()) {
		for (int k = 0; k < RING; k++)
			make_batch(&p->ring[k], &r, t + (size_t)k);
		for (int k = 0; k < RING; k++)
			free_batch(&p->ring[k], t + (size_t)k);
		t += RING;
	}
	p->h.produced = p->h.consumed = (uint64_t)t * BATCH;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s THREADS SECONDS\n", argv[0]);
		return 1;
	}
	static struct pair pairs[MAX_THREADS / 2];
	static const struct pair_roles roles = { producer, consumer, alone };
	int threads;
	double sec;
	uint64_t ops = run_pairs(parse_threads(argv[1], MAX_THREADS), atof(argv[2]), pairs,
				 sizeof pairs[0], MAX_THREADS / 2, &roles, &threads, &sec);
	printf("RESULT workload=xmalloc threads=%d sec=%.3f ops=%llu mops=%.3f\n", threads, sec,
	       (unsigned long long)ops, (double)ops / sec / 1e6);
	return 0;
}
