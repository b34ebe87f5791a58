/* Cross-thread producer/consumer churn at full speed, in Mops/s.
 *
 * The rate at which one thread can allocate small objects that another
 * thread frees: a producer mallocs 16-128 B objects (log-uniform), writes
 * a sequence number into each and pushes it through a single-producer,
 * single-consumer ring of RING pointers; the consumer checks and frees
 * it. Unlike xthread (larger payloads, filled), there is almost no work
 * besides malloc and free, so the allocator's remote-free path sets the
 * pace. THREADS >= 2 runs THREADS/2 such pairs; THREADS = 1 runs the same
 * ring in one thread (push, and once the ring is full pop and free the
 * oldest): the same objects and order with no cross-thread free.
 *
 * Usage: churn THREADS SECONDS [RING]
 * Prints: RESULT workload=churn threads=.. sec=.. ops=.. mops=..
 */
#include "pairs.h"

#define MAX_THREADS 64
#define RING_MAX 65536

struct pair {
	struct pair_head h;
	uint64_t *ring[RING_MAX];
};

static size_t ring_size = 1024;

static uint64_t *make(struct rng *r, uint64_t seq)
{
	size_t n = rng_logsize(r, 16, 128);
	uint64_t *p = malloc(n);
	if (!p)
		oom("churn", n);
	*p = seq;
	return p;
}

static void check_free(uint64_t *p, uint64_t seq)
{
	if (*p != seq) {
		fprintf(stderr, "FATAL: object %llu arrived as %llu\n", (unsigned long long)seq,
			(unsigned long long)*p);
		exit(3);
	}
	free(p);
}

static void *producer(void *arg)
{
	struct pair *q = arg;
	struct rng r = { q->h.seed };
	size_t t = 0, head_seen = 0;
	while (!stop_requested()) {
		if (t - head_seen >= ring_size) {
			unsigned spins = 0;
			while (t - (head_seen = __atomic_load_n(&q->h.head, __ATOMIC_ACQUIRE)) >= ring_size &&
			       !stop_requested())
				backoff(&spins);
			if (t - head_seen >= ring_size)
				break;
		}
		q->ring[t % ring_size] = make(&r, t);
		__atomic_store_n(&q->h.tail, ++t, __ATOMIC_RELEASE);
	}
	q->h.produced = t;
	__atomic_store_n(&q->h.done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *consumer(void *arg)
{
	struct pair *q = arg;
	size_t h = 0, tail_seen = 0;
	for (;;) {
		if (h == tail_seen) {
			unsigned spins = 0;
			while ((tail_seen = __atomic_load_n(&q->h.tail, __ATOMIC_ACQUIRE)) == h) {
				if (__atomic_load_n(&q->h.done, __ATOMIC_ACQUIRE) &&
				    __atomic_load_n(&q->h.tail, __ATOMIC_ACQUIRE) == h) {
					q->h.consumed = h;
					return NULL;
				}
				backoff(&spins);
			}
		}
		check_free(q->ring[h % ring_size], h);
		__atomic_store_n(&q->h.head, ++h, __ATOMIC_RELEASE);
	}
}

static void *alone(void *arg)
{
	struct pair *q = arg;
	struct rng r = { q->h.seed };
	size_t t = 0, h = 0;
	while (!stop_requested()) {
		if (t - h == ring_size) {
			check_free(q->ring[h % ring_size], h);
			h++;
		}
		q->ring[t % ring_size] = make(&r, t);
		t++;
	}
	for (; h < t; h++)
		check_free(q->ring[h % ring_size], h);
	q->h.produced = q->h.consumed = t;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s THREADS SECONDS [RING]\n", argv[0]);
		return 1;
	}
	if (argc > 3)
		ring_size = parse_size(argv[3]);
	if (ring_size < 1 || ring_size > RING_MAX) {
		fprintf(stderr, "RING must be 1..%d\n", RING_MAX);
		return 1;
	}
	static struct pair pairs[MAX_THREADS / 2];
	static const struct pair_roles roles = { producer, consumer, alone };
	int threads;
	double sec;
	uint64_t ops = run_pairs(parse_threads(argv[1], MAX_THREADS), atof(argv[2]), pairs,
				 sizeof pairs[0], MAX_THREADS / 2, &roles, &threads, &sec);
	printf("RESULT workload=churn threads=%d sec=%.3f ops=%llu mops=%.3f\n", threads, sec,
	       (unsigned long long)ops, (double)ops / sec / 1e6);
	return 0;
}
