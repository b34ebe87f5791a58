/* The slowest single call: malloc and free timed one by one on a heap
 * full of holes, after an idle spell.
 *
 * Throughput hides stalls: an allocator that does its maintenance
 * (purging, coalescing, returning memory) in bulk inside one unlucky call
 * looks fine on average and stalls a server's request. A load spike
 * (loadspike.h: CACHE_BYTES of cache turned over, PINNED_BYTES of
 * survivors) leaves the heap full of holes; the program stays idle for
 * IDLE_MS with no allocator call (time enough for any decay timer to come
 * due), then makes CALLS single calls, each timed on its own with
 * clock_gettime(CLOCK_MONOTONIC): a random slot of a table of 16384 is
 * freed if it holds an object, or filled otherwise, with a size of 16 B -
 * 4 KiB (19 in 20) or 4 - 64 KiB (1 in 20), so both the small-object and
 * the page paths run. The timer's own cost (some tens of ns) is in every
 * figure alike.
 *
 * Usage: latency CALLS [CACHE_BYTES PINNED_BYTES [IDLE_MS]]
 * Prints: RESULT workload=latency calls=.. p50_ns=.. p99_ns=.. p999_ns=.. max_ns=..
 *         max_malloc_ns=.. max_free_ns=.. timed_sec=.. work_sec=..
 *   timed_sec: the sum of the timed calls; work_sec: the whole run without
 *   the idle time.
 */
#include <sys/mman.h>

#include "loadspike.h"

#define SLOTS 16384

static inline uint64_t ns_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* The timings live outside the heap under test. */
static void *map(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	return p;
}

CALL_SITE void *timed_alloc(size_t n);
void *timed_alloc(size_t n)
{
	return malloc(n);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s CALLS [CACHE_BYTES PINNED_BYTES [IDLE_MS]]\n", argv[0]);
		return 1;
	}
	size_t calls = parse_size(argv[1]);
	size_t cache = argc > 3 ? parse_size(argv[2]) : (size_t)160 << 20;
	size_t pinned = argc > 3 ? parse_size(argv[3]) : (size_t)28 << 20;
	double idle = (argc > 4 ? atof(argv[4]) : 1200) / 1000.0;
	if (calls < 1) {
		fprintf(stderr, "CALLS must be at least 1\n");
		return 1;
	}
	static struct spike s = { .rng = { 0x3F84D5B5B5470917ULL } };
	double t0 = now_sec();
	spike_load(&s, cache, pinned);
	spike_drop(&s);
	double t_idle = now_sec();
	sleep_sec(idle);
	double t_calls = now_sec();

	struct rng r = { 0x9216D5D98979FB1BULL };
	static void *slot[SLOTS];
	uint32_t *lat = map(calls * sizeof(uint32_t));
	uint64_t max_malloc = 0, max_free = 0, sum = 0;
	for (size_t i = 0; i < calls; i++) {
		size_t k = rng_below(&r, SLOTS);
		uint64_t t0, t1;
		if (slot[k]) {
			t0 = ns_now();
			free(slot[k]);
			t1 = ns_now();
			slot[k] = NULL;
			if (t1 - t0 > max_free)
				max_free = t1 - t0;
		} else {
			size_t sz = rng_below(&r, 20) ? rng_logsize(&r, 16, 4096) : rng_logsize(&r, 4096, 65536);
			t0 = ns_now();
			slot[k] = timed_alloc(sz);
			t1 = ns_now();
			if (!slot[k])
				oom("timed", sz);
			*(volatile char *)slot[k] = 1;
			if (t1 - t0 > max_malloc)
				max_malloc = t1 - t0;
		}
		sum += t1 - t0;
		lat[i] = t1 - t0 > UINT32_MAX ? UINT32_MAX : (uint32_t)(t1 - t0);
	}
	double work = (t_idle - t0) + (now_sec() - t_calls);
	qsort(lat, calls, sizeof *lat, cmp_u32);
	printf("RESULT workload=latency calls=%zu p50_ns=%u p99_ns=%u p999_ns=%u max_ns=%u "
	       "max_malloc_ns=%llu max_free_ns=%llu timed_sec=%.4f work_sec=%.3f\n",
	       calls, lat[calls / 2], lat[(size_t)((double)calls * 0.99)],
	       lat[(size_t)((double)calls * 0.999)], lat[calls - 1], (unsigned long long)max_malloc,
	       (unsigned long long)max_free, (double)sum / 1e9, work);
	for (size_t k = 0; k < SLOTS; k++)
		free(slot[k]);
	if (spike_corrupted(&s)) {
		fprintf(stderr, "FATAL: pinned objects corrupted\n");
		return 3;
	}
	return 0;
}
