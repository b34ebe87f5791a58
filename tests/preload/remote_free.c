/* Objects freed by threads other than the one that allocated them, at
 * volume, and objects that outlive the thread that allocated them.
 *
 *  - Pairs of threads: a producer allocates objects of every small size
 *    class and some page-sized ones, fills each with a pattern of its own
 *    and passes it through a ring to its consumer, which checks the
 *    pattern and frees it (one in eight it reallocates first). Producers
 *    live for a few thousand objects and hand their ring to a successor,
 *    so many objects are freed after the thread that allocated them has
 *    exited, its cache torn down.
 *  - Orphans: threads allocate a table of objects and exit; then four
 *    other threads check and free them all at once, each taking every
 *    fourth object.
 *  - Successors: a thread per round frees some of what the last round's
 *    thread left live and leaves half of its own objects live; the slabs
 *    of the exited threads are adopted and their holes filled.
 *  - At the end, with everything freed and malloc_trim(0) called, the live
 *    bytes and the memory held from the buddy are back where they started:
 *    no object is lost in a thread cache of an exited thread or in a
 *    transfer cache.
 * The program runs itself once more with MBUDDY_CHECK=1, so every object
 * also carries a canary that each free verifies. */
#define _GNU_SOURCE 1
#include "ptest.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

#define NPAIRS 3
#define PER_PAIR 120000
#define PER_PRODUCER 5000
#define RING 512
#define NORPHANS 4
#define ORPHANS_EACH 6000

struct obj {
	unsigned char *p;
	size_t n;
	uint64_t seed;
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Mostly small, every class; one in 64 above the small-object limit. */
static size_t pick_size(uint64_t *s)
{
	uint64_t r = rnd(s);
	if ((r & 63) == 0)
		return 16 * KiB + 1 + (size_t)((r >> 8) % (48 * KiB));
	unsigned shift = 4 + (unsigned)((r >> 8) % 11); /* 16 B .. 16 KiB */
	size_t n = (size_t)1 << shift;
	return n / 2 + 1 + (size_t)((r >> 16) % (n / 2));
}

static void fill(struct obj *o)
{
	uint64_t s = o->seed;
	for (size_t i = 0; i + 8 <= o->n; i += 8) {
		uint64_t v = rnd(&s);
		memcpy(o->p + i, &v, 8);
	}
	for (size_t i = o->n & ~(size_t)7; i < o->n; i++)
		o->p[i] = (unsigned char)o->seed;
}

static int intact(const struct obj *o)
{
	uint64_t s = o->seed;
	for (size_t i = 0; i + 8 <= o->n; i += 8) {
		uint64_t v = rnd(&s);
		if (memcmp(o->p + i, &v, 8) != 0)
			return 0;
	}
	for (size_t i = o->n & ~(size_t)7; i < o->n; i++)
		if (o->p[i] != (unsigned char)o->seed)
			return 0;
	return 1;
}

static struct obj make(uint64_t *s)
{
	struct obj o = { NULL, pick_size(s), rnd(s) | 1 };
	o.p = pt_hide(malloc(o.n));
	PT_REQUIRE(o.p != NULL, "malloc(%zu) failed", o.n);
	fill(&o);
	return o;
}

static void check_and_free(struct obj *o, const char *who)
{
	PT_REQUIRE(intact(o), "%s: object %p of %zu bytes was overwritten", who, (void *)o->p, o->n);
	free(o->p);
	o->p = NULL;
}

/* ---- producer/consumer pairs, producers replaced as they go ---- */

struct pair {
	struct obj ring[RING];
	_Alignas(64) atomic_size_t head; /* written by the producer */
	_Alignas(64) atomic_size_t tail; /* written by the consumer */
	uint64_t seed;
	size_t produced;
	atomic_int producers;
};

static atomic_long remote_frees, producers_started;

static void *producer(void *arg)
{
	struct pair *pr = arg;
	size_t quota = pr->produced + PER_PRODUCER;
	while (pr->produced < quota && pr->produced < PER_PAIR) {
		size_t h = atomic_load_explicit(&pr->head, memory_order_relaxed);
		if (h - atomic_load_explicit(&pr->tail, memory_order_acquire) == RING) {
			sched_yield();
			continue;
		}
		pr->ring[h % RING] = make(&pr->seed);
		atomic_store_explicit(&pr->head, h + 1, memory_order_release);
		pr->produced++;
	}
	if (pr->produced < PER_PAIR) {
		/* The successor takes over; this thread's objects in the ring
		 * will be freed after it is gone. */
		pthread_t t;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		PT_REQUIRE(pthread_create(&t, &a, producer, pr) == 0, "pthread_create");
		pthread_attr_destroy(&a);
		atomic_fetch_add(&producers_started, 1);
		return NULL;
	}
	atomic_store(&pr->producers, 0);
	return NULL;
}

static void *consumer(void *arg)
{
	struct pair *pr = arg;
	size_t done = 0;
	uint64_t s = pr->seed ^ 0x5555;
	while (done < PER_PAIR) {
		size_t t = atomic_load_explicit(&pr->tail, memory_order_relaxed);
		if (t == atomic_load_explicit(&pr->head, memory_order_acquire)) {
			sched_yield();
			continue;
		}
		struct obj o = pr->ring[t % RING];
		atomic_store_explicit(&pr->tail, t + 1, memory_order_release);
		if ((rnd(&s) & 7) == 0) {
			/* Reallocated by another thread first. */
			PT_REQUIRE(intact(&o), "consumer: object %p of %zu bytes overwritten before realloc", (void *)o.p,
				o.n);
			size_t n = pick_size(&s);
			unsigned char *q = pt_hide(realloc(o.p, n));
			PT_REQUIRE(q != NULL, "realloc(%zu) failed", n);
			size_t keep = n < o.n ? n : o.n;
			/* The prefix survives the move. */
			uint64_t ss = o.seed;
			for (size_t i = 0; i + 8 <= keep; i += 8) {
				uint64_t v = rnd(&ss);
				PT_REQUIRE(memcmp(q + i, &v, 8) == 0, "realloc lost the contents at byte %zu of %zu", i, keep);
			}
			o.p = q;
			o.n = n;
			fill(&o);
		}
		check_and_free(&o, "consumer");
		atomic_fetch_add_explicit(&remote_frees, 1, memory_order_relaxed);
		done++;
	}
	return NULL;
}

static void pairs(void)
{
	static struct pair pr[NPAIRS];
	pthread_t c[NPAIRS];
	for (int i = 0; i < NPAIRS; i++) {
		pr[i].seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1) | 1;
		atomic_store(&pr[i].producers, 1);
		pthread_t t;
		PT_REQUIRE(pthread_create(&t, NULL, producer, &pr[i]) == 0, "pthread_create");
		pthread_detach(t);
		PT_REQUIRE(pthread_create(&c[i], NULL, consumer, &pr[i]) == 0, "pthread_create");
	}
	for (int i = 0; i < NPAIRS; i++)
		pthread_join(c[i], NULL);
	for (int i = 0; i < NPAIRS; i++)
		while (atomic_load(&pr[i].producers))
			sched_yield();
}

/* ---- orphans: freed by others after their thread exited ---- */

static struct obj orphans[NORPHANS][ORPHANS_EACH];

static void *orphan_maker(void *arg)
{
	struct obj *tab = arg;
	uint64_t s = (uint64_t)(uintptr_t)arg | 1;
	for (int i = 0; i < ORPHANS_EACH; i++)
		tab[i] = make(&s);
	return NULL;
}

static void *orphan_freer(void *arg)
{
	uintptr_t k = (uintptr_t)arg;
	for (int t = 0; t < NORPHANS; t++)
		for (int i = (int)k; i < ORPHANS_EACH; i += 4)
			check_and_free(&orphans[t][i], "orphan freer");
	return NULL;
}

static void orphan_round(void)
{
	pthread_t t[NORPHANS];
	for (int i = 0; i < NORPHANS; i++)
		PT_REQUIRE(pthread_create(&t[i], NULL, orphan_maker, orphans[i]) == 0, "pthread_create");
	for (int i = 0; i < NORPHANS; i++)
		pthread_join(t[i], NULL);
	/* Every maker has exited; its objects live on. */
	for (uintptr_t i = 0; i < 4; i++)
		PT_REQUIRE(pthread_create(&t[i], NULL, orphan_freer, (void *)i) == 0, "pthread_create");
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
}

/* ---- threads replaced every round, with objects still live ----
 * Each round's thread frees half of the survivors of the round before
 * (objects of slabs whose owner has exited), allocates objects of one
 * size and leaves every other one live, so its slabs are half empty when
 * it exits. The next threads must adopt those slabs and fill their holes:
 * the heap stays near the bytes that live, where a heap that only made
 * new slabs would hold about twice that. */

#define SUCCESSORS 40
#define SUCCESSOR_OBJS 16384
#define SUCCESSOR_SIZE 64
static void *survivors[SUCCESSORS][SUCCESSOR_OBJS / 2];
static size_t survivors_live;

static void *successor(void *arg)
{
	uintptr_t k = (uintptr_t)arg;
	if (k > 0)
		for (int i = 0; i < SUCCESSOR_OBJS / 2; i += 2) {
			unsigned char *q = survivors[k - 1][i];
			PT_CHECK(q[0] == (unsigned char)(k - 1 + i), "a survivor of an exited thread lost its contents");
			free(q);
			survivors[k - 1][i] = NULL;
			survivors_live -= SUCCESSOR_SIZE;
		}
	for (int i = 0; i < SUCCESSOR_OBJS; i++) {
		unsigned char *p = malloc(pt_hide_size(SUCCESSOR_SIZE));
		PT_REQUIRE(p, "malloc(%d)", SUCCESSOR_SIZE);
		p[0] = (unsigned char)(k + (size_t)i / 2);
		if (i & 1) {
			survivors[k][i / 2] = p;
			survivors_live += SUCCESSOR_SIZE;
		} else {
			free(p);
		}
	}
	return NULL;
}

static void successor_rounds(void)
{
	malloc_trim(0);
	size_t arena0 = mallinfo2().arena;
	for (uintptr_t k = 0; k < SUCCESSORS; k++) {
		pthread_t t;
		PT_REQUIRE(pthread_create(&t, NULL, successor, (void *)k) == 0, "pthread_create");
		pthread_join(t, NULL);
	}
	size_t arena1 = mallinfo2().arena, live = survivors_live;
	size_t arena = arena1 > arena0 ? arena1 - arena0 : 0;
	for (int k = 0; k < SUCCESSORS; k++)
		for (int i = 0; i < SUCCESSOR_OBJS / 2; i++)
			free(survivors[k][i]);
	if (pt_mbuddy)
		PT_CHECK(arena <= live + live / 4 + MiB,
			 "%d threads left %zu KiB live in half-empty slabs, and the heap grew by %zu KiB: the slabs of "
			 "exited threads were not reused", SUCCESSORS, live >> 10, arena >> 10);
}

/* ---- the whole, and the accounting ---- */

int main(int argc, char **argv)
{
	pt_init("remote_free");
	pt_watchdog(120);
	int checked = getenv("MBUDDY_CHECK") && strcmp(getenv("MBUDDY_CHECK"), "1") == 0;
	size_t live0 = mallinfo2().uordblks, arena0 = mallinfo2().arena;
	pairs();
	for (int r = 0; r < 3; r++)
		orphan_round();
	successor_rounds();
	pt_msg("%s%ld objects freed by another thread, %ld producer threads, %d orphans freed after their "
	       "thread exited", checked ? "MBUDDY_CHECK=1: " : "", atomic_load(&remote_frees),
	       atomic_load(&producers_started) + NPAIRS, 3 * NORPHANS * ORPHANS_EACH);
	if (pt_mbuddy) {
		malloc_trim(0);
		size_t live1 = mallinfo2().uordblks;
		PT_CHECK(live1 <= live0 + 64 * KiB && live1 + 64 * KiB >= live0,
		         "mallinfo2().uordblks was %zu before the threads and is %zu after everything was freed", live0,
		         live1);
		/* Memory held from the buddy: nothing stuck in a cache. */
		size_t arena1 = mallinfo2().arena;
		PT_CHECK(arena1 <= arena0 + MiB, "%zu KiB taken from the heap before, %zu KiB after everything was "
		         "freed and trimmed", arena0 >> 10, arena1 >> 10);
	}
	if (!checked && argc == 1) {
		/* Again with canaries on every object. */
		pid_t pid = fork();
		PT_REQUIRE(pid >= 0, "fork");
		if (pid == 0) {
			setenv("MBUDDY_CHECK", "1", 1);
			execv("/proc/self/exe", argv);
			_exit(99);
		}
		int st;
		PT_REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid");
		PT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the run with MBUDDY_CHECK=1 failed (status %#x)", st);
	}
	return pt_finish();
}
