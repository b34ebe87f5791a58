/* Server simulation after Larson and Krishnan's benchmark (larson-like).
 *
 * A server keeps per-connection state that request threads replace
 * piecemeal, and its threads come and go. Each of THREADS lanes owns an
 * array of SLOTS objects; the thread working a lane repeatedly frees a
 * random slot and allocates a new object of random size in it. After
 * QUOTA replacements the thread starts its successor, hands it the lane
 * (the array and everything in it) and exits, so objects allocated by one
 * thread are freed by the next. The main thread fills the arrays first,
 * so the very first frees are cross-thread too. Runs for SECONDS and
 * counts replacements.
 *
 * Sizes: uniform in [MIN, MAX] (as the original), or with DIST 'l'
 * log-uniform, every power-of-two octave equally likely (the "sized"
 * variant over a wider range).
 *
 * Usage: larson THREADS SECONDS [MIN MAX [DIST [SLOTS [QUOTA]]]]
 * Prints: RESULT workload=larson threads=.. sec=.. ops=.. mops=.. threads_started=..
 *   ops: malloc calls (each replacing a freed object), mops: millions per second.
 */
#include "common.h"

#define MAX_THREADS 256

/* A line of its own: r and ops are written at every operation. */
struct lane {
	_Alignas(64) void **slots;
	struct rng r;
	uint64_t ops;
};

static size_t min_size = 8, max_size = 1000, nslots = 1000, quota = 20000;
static int log_sizes;
static int running; /* lanes whose chain of threads has not ended */
static uint64_t threads_started;

static size_t pick_size(struct rng *r)
{
	if (log_sizes)
		return rng_logsize(r, min_size, max_size);
	return min_size + rng_below(r, max_size - min_size + 1);
}

static void *fill(size_t n, uint64_t tag)
{
	void *p = malloc(n);
	if (!p)
		oom("larson", n);
	memcpy(p, &tag, n < sizeof tag ? n : sizeof tag);
	return p;
}

static void *worker(void *arg)
{
	struct lane *l = arg;
	for (;;) {
		for (size_t i = 0; i < quota && !stop_requested(); i++) {
			size_t k = rng_below(&l->r, nslots);
			free(l->slots[k]);
			l->slots[k] = fill(pick_size(&l->r), l->ops);
			l->ops++;
		}
		if (stop_requested())
			break;
		/* Hand the lane to a new thread; if none can start, go on here. */
		pthread_t t;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		int rc = pthread_create(&t, &a, worker, l);
		pthread_attr_destroy(&a);
		if (rc == 0) {
			__atomic_fetch_add(&threads_started, 1, __ATOMIC_RELAXED);
			return NULL;
		}
	}
	__atomic_fetch_sub(&running, 1, __ATOMIC_RELEASE);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s THREADS SECONDS [MIN MAX [DIST [SLOTS [QUOTA]]]]\n", argv[0]);
		return 1;
	}
	int nthreads = parse_threads(argv[1], MAX_THREADS);
	double seconds = atof(argv[2]);
	if (argc > 4) {
		min_size = parse_size(argv[3]);
		max_size = parse_size(argv[4]);
	}
	if (argc > 5)
		log_sizes = argv[5][0] == 'l';
	if (argc > 6)
		nslots = parse_size(argv[6]);
	if (argc > 7)
		quota = parse_size(argv[7]);
	if (min_size < 1 || max_size < min_size || nslots < 1 || quota < 1) {
		fprintf(stderr, "need 1 <= MIN <= MAX, SLOTS >= 1, QUOTA >= 1\n");
		return 1;
	}

	static struct lane lanes[MAX_THREADS];
	for (int t = 0; t < nthreads; t++) {
		lanes[t].r.s = 0x9E3779B97F4A7C15ULL * (uint64_t)(t + 1) | 1;
		lanes[t].slots = calloc(nslots, sizeof(void *));
		if (!lanes[t].slots)
			oom("slots", nslots * sizeof(void *));
		for (size_t k = 0; k < nslots; k++)
			lanes[t].slots[k] = fill(pick_size(&lanes[t].r), k);
	}
	running = nthreads;
	threads_started = (uint64_t)nthreads;
	double t0 = now_sec();
	for (int t = 0; t < nthreads; t++) {
		pthread_t th = start_thread(worker, &lanes[t]);
		pthread_detach(th);
	}
	run_for(seconds);
	while (__atomic_load_n(&running, __ATOMIC_ACQUIRE) > 0)
		sleep_sec(0.0005);
	double sec = now_sec() - t0;

	uint64_t ops = 0;
	for (int t = 0; t < nthreads; t++) {
		ops += lanes[t].ops;
		for (size_t k = 0; k < nslots; k++)
			free(lanes[t].slots[k]);
		free(lanes[t].slots);
	}
	printf("RESULT workload=larson threads=%d sec=%.3f ops=%llu mops=%.3f threads_started=%llu\n",
	       nthreads, sec, (unsigned long long)ops, (double)ops / sec / 1e6,
	       (unsigned long long)__atomic_load_n(&threads_started, __ATOMIC_RELAXED));
	return 0;
}
