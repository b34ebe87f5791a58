/* Three-lifetime phase change: how much memory does the heap keep after a
 * program drops its caches?
 *
 * Models a server that builds up state under load: long-lived "pinned"
 * objects (configuration, interned strings) trickle in while a FIFO cache
 * fills and turns over and request temporaries come and go, all
 * interleaved and of mixed sizes (16 B - 4 KiB). Then the load stops: the
 * cache and the temporaries are dropped and only a light trickle of small
 * temporaries continues. A heap that mixed lifetimes on the same pages is
 * left holding pages pinned by scattered survivors; the RSS after the drop,
 * against the bytes still live, shows how much.
 *
 * The three lifetimes come from three distinct call sites (pinned_alloc,
 * cache_alloc, temp_alloc), as a call-site classifier would see them.
 *
 * Usage: phase CACHE_BYTES PINNED_BYTES LIGHT_MS [SEED]
 * Prints: RESULT workload=phase live_bytes=.. rss_after_drop=.. ...
 */
#include <errno.h>
#include <time.h>

#include "common.h"

/* Every object starts with this header: the cache FIFO and the pinned list
 * are intrusive, so the workload needs no bookkeeping arrays on the heap. */
struct obj {
	struct obj *next;
	size_t size;
};

#define MIN_OBJ 16
#define MAX_OBJ 4096
#define TEMP_SLOTS 256  /* temporaries live for ~TEMP_SLOTS temp operations */
#define LIGHT_SLOTS 64
#define LIGHT_BURST 1000 /* light load: this many alloc/free pairs per ms */

static struct rng rng = { 0x9E3779B97F4A7C15ULL };

/* The three call sites (see CALL_SITE). */
CALL_SITE struct obj *pinned_alloc(size_t n);
CALL_SITE struct obj *cache_alloc(size_t n);
CALL_SITE struct obj *temp_alloc(size_t n);

struct obj *pinned_alloc(size_t n)
{
	struct obj *o = malloc(n);
	if (!o)
		oom("pinned_alloc", n);
	return o;
}

struct obj *cache_alloc(size_t n)
{
	struct obj *o = malloc(n);
	if (!o)
		oom("cache_alloc", n);
	return o;
}

struct obj *temp_alloc(size_t n)
{
	struct obj *o = malloc(n);
	if (!o)
		oom("temp_alloc", n);
	return o;
}

/* Fill the object as its owner would, keeping the header. */
static struct obj *init_obj(struct obj *o, size_t n)
{
	o->next = NULL;
	o->size = n;
	memset(o + 1, (int)(n & 0xff), n - sizeof *o);
	return o;
}

static struct obj *pinned_head;
static size_t pinned_bytes;
static struct obj *cache_head, *cache_tail;
static size_t cache_bytes;
static struct obj *temps[TEMP_SLOTS];

static void add_pinned(void)
{
	size_t n = rng_logsize(&rng, MIN_OBJ, MAX_OBJ);
	struct obj *o = init_obj(pinned_alloc(n), n);
	o->next = pinned_head;
	pinned_head = o;
	pinned_bytes += n;
}

static size_t add_cache(size_t cap)
{
	size_t n = rng_logsize(&rng, MIN_OBJ, MAX_OBJ);
	struct obj *o = init_obj(cache_alloc(n), n);
	if (cache_tail)
		cache_tail->next = o;
	else
		cache_head = o;
	cache_tail = o;
	cache_bytes += n;
	/* FIFO eviction: the oldest entries go first. */
	while (cache_bytes > cap && cache_head) {
		struct obj *old = cache_head;
		cache_head = old->next;
		if (!cache_head)
			cache_tail = NULL;
		cache_bytes -= old->size;
		free(old);
	}
	return n;
}

/* Replace a random slot: lifetimes are geometric with a short mean. */
static void temp_op(struct obj **slots, unsigned nslots, size_t lo, size_t hi)
{
	unsigned i = (unsigned)rng_below(&rng, nslots);
	free(slots[i]);
	size_t n = rng_logsize(&rng, lo, hi);
	slots[i] = init_obj(temp_alloc(n), n);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: %s CACHE_BYTES PINNED_BYTES LIGHT_MS [SEED]\n", argv[0]);
		return 1;
	}
	size_t cache_cap = parse_size(argv[1]);
	size_t pinned_target = parse_size(argv[2]);
	long light_ms = atol(argv[3]);
	if (argc > 4)
		rng.s = strtoull(argv[4], NULL, 0) | 1;

	size_t rss_start = rss_bytes();
	double t0 = now_sec();

	/* Load: the cache fills, then turns over once more; pinned objects
	 * arrive in proportion so that they are spread through the whole run;
	 * two temporaries per cache insertion. */
	size_t cache_total = 0, goal = 2 * cache_cap;
	while (cache_total < goal) {
		cache_total += add_cache(cache_cap);
		temp_op(temps, TEMP_SLOTS, MIN_OBJ, MAX_OBJ);
		temp_op(temps, TEMP_SLOTS, MIN_OBJ, MAX_OBJ);
		if (pinned_bytes < (double)pinned_target * cache_total / goal)
			add_pinned();
	}
	double t_load = now_sec() - t0;
	size_t rss_before = rss_bytes();

	/* The drop: the cache and every temporary go. */
	while (cache_head) {
		struct obj *o = cache_head;
		cache_head = o->next;
		free(o);
	}
	cache_tail = NULL;
	cache_bytes = 0;
	for (unsigned i = 0; i < TEMP_SLOTS; i++) {
		free(temps[i]);
		temps[i] = NULL;
	}

	/* Light load from the same temporary call site, paced like a mostly
	 * idle program, so allocators that purge lazily get their chance. */
	static struct obj *light[LIGHT_SLOTS];
	double t_end = now_sec() + light_ms / 1000.0;
	unsigned long light_ops = 0;
	while (now_sec() < t_end) {
		for (int k = 0; k < LIGHT_BURST; k++)
			temp_op(light, LIGHT_SLOTS, MIN_OBJ, 256);
		light_ops += LIGHT_BURST;
		sleep_ms(1);
	}
	size_t live = pinned_bytes;
	for (unsigned i = 0; i < LIGHT_SLOTS; i++)
		live += light[i] ? light[i]->size : 0;
	size_t rss_after = rss_bytes();

	/* Prove the pinned objects are intact (and keep them reachable). */
	size_t nobj = 0, bad = 0;
	for (struct obj *o = pinned_head; o; o = o->next, nobj++)
		bad += o->size > sizeof *o && ((unsigned char *)(o + 1))[0] != (o->size & 0xff);
	if (bad) {
		fprintf(stderr, "FATAL: %zu pinned objects corrupted\n", bad);
		return 3;
	}
	printf("RESULT workload=phase live_bytes=%zu rss_after_drop=%zu rss_start=%zu "
	       "rss_before_drop=%zu load_sec=%.3f light_ops=%lu pinned_objs=%zu\n",
	       live, rss_after, rss_start, rss_before, t_load, light_ops, nobj);
	return 0;
}
