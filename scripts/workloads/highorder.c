/* The seed experiment: high-order allocations under a fragmenting load.
 *
 * Mel Gorman's 2005 patch was judged by attempting 160 order-10 page
 * allocations while the machine ran a thrashing load: 3 succeeded on the
 * vanilla kernel, 81 with the typed free lists. Here the "machine" is a
 * heap capped at MBUDDY_HEAP_SIZE and an order-10 block is 4 MiB.
 *
 * The load mixes three lifetimes from three call sites: pinned objects that
 * are never freed and grow slowly, a FIFO cache that keeps turning over,
 * and temporaries freed soon after allocation. Like the kernel test, whose
 * page cache had filled memory before the compiles churned it, the cache
 * first grows until PEAK_PCT % of the heap is in use, then shrinks to a
 * steady FILL_PCT % and churns. Spaced through the churn, 160 times, the
 * program asks for malloc(4 MiB) and frees it at once; NULL is a failed
 * attempt. Whether the free quarter of the heap is in whole 4 MiB blocks
 * or in holes between pinned survivors decides the score.
 *
 * The heap is nearly full on purpose, so the load's own allocations may
 * fail too: like a kernel reclaiming its caches, the load then evicts the
 * oldest cache entries and retries, and only gives up on an allocation
 * when the cache is empty.
 *
 * Usage: highorder [FILL_PCT [ATTEMPTS [OPS_BETWEEN [PEAK_PCT]]]]
 *   FILL_PCT    steady load, percent of MBUDDY_HEAP_SIZE (default 70)
 *   ATTEMPTS    number of 4 MiB attempts (default 160, as in the patch)
 *   OPS_BETWEEN load operations between two attempts (default 15000)
 *   PEAK_PCT    load reached before the churn starts (default 95)
 * MBUDDY_HEAP_SIZE (default 256M) only sizes the load here; the allocator
 * enforces the cap. Under an allocator without a cap every attempt succeeds.
 */
#include "common.h"

#define MIN_OBJ 16
#define MAX_OBJ 4096
#define TEMP_SLOTS 256
#define ORDER10_BYTES ((size_t)4 << 20)
#define MAX_ATTEMPTS 10000
#define EVICT_BATCH 64 /* cache entries dropped per failed load allocation */

struct obj {
	struct obj *next;
	size_t size;
};

static struct rng rng = { 0x452821E638D01377ULL };

static struct obj *pinned_head;
static size_t pinned_bytes;
static struct obj *cache_head, *cache_tail;
static size_t cache_bytes, cache_cap;
static struct obj *temps[TEMP_SLOTS];

static unsigned long evictions, load_failures, pressure_events;

/* Drop up to n of the oldest cache entries; returns how many went. */
static size_t evict(size_t n)
{
	size_t done = 0;
	while (done < n && cache_head) {
		struct obj *o = cache_head;
		cache_head = o->next;
		if (!cache_head)
			cache_tail = NULL;
		cache_bytes -= o->size;
		free(o);
		done++;
	}
	evictions += done;
	return done;
}

/* The three call sites (see CALL_SITE). Each retries after reclaiming
 * cache memory, so a full heap slows the load down instead of stopping
 * it. */
CALL_SITE struct obj *pinned_alloc(size_t n);
CALL_SITE struct obj *cache_alloc(size_t n);
CALL_SITE struct obj *temp_alloc(size_t n);

struct obj *pinned_alloc(size_t n)
{
	struct obj *o;
	while (!(o = malloc(n))) {
		pressure_events++;
		if (!evict(EVICT_BATCH))
			break;
	}
	return o;
}

struct obj *cache_alloc(size_t n)
{
	struct obj *o;
	while (!(o = malloc(n))) {
		pressure_events++;
		if (!evict(EVICT_BATCH))
			break;
	}
	return o;
}

struct obj *temp_alloc(size_t n)
{
	struct obj *o;
	while (!(o = malloc(n))) {
		pressure_events++;
		if (!evict(EVICT_BATCH))
			break;
	}
	return o;
}

static struct obj *init_obj(struct obj *o, size_t n)
{
	o->next = NULL;
	o->size = n;
	memset(o + 1, (int)(n & 0xff), n - sizeof *o);
	return o;
}

static void add_pinned(void)
{
	size_t n = rng_logsize(&rng, MIN_OBJ, MAX_OBJ);
	struct obj *o = pinned_alloc(n);
	if (!o) {
		load_failures++;
		return;
	}
	init_obj(o, n)->next = pinned_head;
	pinned_head = o;
	pinned_bytes += n;
}

static void add_cache(void)
{
	size_t n = rng_logsize(&rng, MIN_OBJ, MAX_OBJ);
	struct obj *o = cache_alloc(n);
	if (!o) {
		load_failures++;
		return;
	}
	init_obj(o, n);
	if (cache_tail)
		cache_tail->next = o;
	else
		cache_head = o;
	cache_tail = o;
	cache_bytes += n;
	while (cache_bytes > cache_cap && cache_head)
		evict(1);
}

static void temp_op(void)
{
	unsigned i = (unsigned)rng_below(&rng, TEMP_SLOTS);
	free(temps[i]);
	temps[i] = NULL;
	size_t n = rng_logsize(&rng, MIN_OBJ, MAX_OBJ);
	struct obj *o = temp_alloc(n);
	if (!o) {
		load_failures++;
		return;
	}
	temps[i] = init_obj(o, n);
}

/* One load step: a cache insertion, two temporaries, and pinned objects
 * keeping pace with `pinned_goal`. */
static void load_step(size_t pinned_goal)
{
	add_cache();
	temp_op();
	temp_op();
	while (pinned_bytes < pinned_goal) {
		unsigned long before = load_failures;
		add_pinned();
		if (load_failures != before)
			break;
	}
}

/* One attempt at an order-10 block: 4 MiB, touched, freed at once. */
static int attempt(void)
{
	unsigned char *p = malloc(ORDER10_BYTES);
	if (!p)
		return 0;
	p[0] = 1;
	p[ORDER10_BYTES - 1] = 1;
	free(p);
	return 1;
}

int main(int argc, char **argv)
{
	long fill_pct = argc > 1 ? atol(argv[1]) : 70;
	long attempts = argc > 2 ? atol(argv[2]) : 160;
	long between = argc > 3 ? atol(argv[3]) : 15000;
	long peak_pct = argc > 4 ? atol(argv[4]) : 95;
	const char *hs = getenv("MBUDDY_HEAP_SIZE");
	size_t heap = parse_size(hs && *hs ? hs : "256M");
	if (fill_pct < 1 || peak_pct < fill_pct || peak_pct > 100 || attempts < 1 ||
	    attempts > MAX_ATTEMPTS || between < 1 || heap < ((size_t)16 << 20)) {
		fprintf(stderr, "usage: %s [FILL_PCT [ATTEMPTS(1-%d) [OPS_BETWEEN [PEAK_PCT]]]]\n"
			"  with 1 <= FILL_PCT <= PEAK_PCT <= 100 and MBUDDY_HEAP_SIZE >= 16M\n",
			argv[0], MAX_ATTEMPTS);
		return 1;
	}

	/* Budget: pinned grows from 4 % of the heap during the fill to 10 % by
	 * the end of the churn; the cache takes the rest of each target. */
	size_t fill = heap / 100 * (size_t)fill_pct, peak = heap / 100 * (size_t)peak_pct;
	size_t pinned_start = heap / 25, pinned_end = heap / 10;
	if (pinned_end > fill / 2) {
		pinned_end = fill / 2;
		pinned_start = pinned_end / 2;
	}

	/* Fill to the peak, pinned objects trickling in. A full heap (the
	 * first failed allocation) also ends the fill. */
	double t0 = now_sec();
	cache_cap = peak - pinned_start;
	while (cache_bytes + MAX_OBJ < cache_cap && !pressure_events)
		load_step((size_t)((double)pinned_start * cache_bytes / cache_cap));
	size_t peak_bytes = cache_bytes + pinned_bytes;

	/* Shrink to the steady load, oldest entries first. */
	cache_cap = fill - pinned_end;
	while (cache_bytes > cache_cap)
		evict(1);

	/* Churn, with the attempts spread evenly through it. */
	static char timeline[MAX_ATTEMPTS + 1];
	long success = 0;
	long total_ops = attempts * between;
	for (long a = 0; a < attempts; a++) {
		for (long k = 0; k < between; k++) {
			long done = a * between + k;
			load_step(pinned_start + (size_t)((double)(pinned_end - pinned_start) * done / total_ops));
		}
		int ok = attempt();
		success += ok;
		timeline[a] = ok ? 'S' : '.';
	}
	timeline[attempts] = '\0';
	double sec = now_sec() - t0;

	printf("Attempted allocations: %ld\n", attempts);
	printf("Success allocs:        %ld\n", success);
	printf("Failed allocs:         %ld\n", attempts - success);
	printf("%% Success:             %ld\n", success * 100 / attempts);
	printf("RESULT workload=highorder heap=%zu fill_pct=%ld peak_pct=%ld attempts=%ld "
	       "success=%ld peak_bytes=%zu pinned_bytes=%zu cache_bytes=%zu evictions=%lu "
	       "pressure_events=%lu load_failures=%lu sec=%.3f timeline=%s\n",
	       heap, fill_pct, peak_pct, attempts, success, peak_bytes, pinned_bytes, cache_bytes,
	       evictions, pressure_events, load_failures, sec, timeline);
	return 0;
}
