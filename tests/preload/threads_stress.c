/* Threads under LD_PRELOAD=libmbuddy.so:
 *  - workers doing random malloc/calloc/memalign/realloc/free of random
 *    sizes (16 B .. 4 MiB), every block filled with a pattern that is
 *    checked before it is resized or freed;
 *  - cross-thread frees: a shared queue of blocks allocated by one thread
 *    and verified, reallocated or freed by another;
 *  - hundreds of short-lived threads that allocate, hand blocks over, free
 *    blocks of others and exit (their thread caches are torn down), some
 *    of them also allocating and freeing from a TLS destructor that runs
 *    after libmbuddy's own cache destructor;
 *  - at the end, libmbuddy's live-byte accounting must come back to where
 *    it started.
 * It runs about two seconds. */
#define _GNU_SOURCE 1
#include "ptest.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

#define NWORKERS 6
#define NSLOTS 512
#define SHORT_THREADS 400
#define SHORT_PARALLEL 4
#define RUN_SECONDS 2.0

struct block {
	unsigned char *p;
	size_t n;
	uint64_t seed;
};

static atomic_int stop;
static atomic_long ops_done, handoffs, short_done, tls_dtor_runs;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the hand-over queue (blocks allocated in one thread, used in another) ---- */

#define QCAP 1024
static struct block queue[QCAP];
static size_t q_head, q_len;
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;

static int q_push(struct block b)
{
	int ok = 0;
	pthread_mutex_lock(&q_lock);
	if (q_len < QCAP) {
		queue[(q_head + q_len) % QCAP] = b;
		q_len++;
		ok = 1;
	}
	pthread_mutex_unlock(&q_lock);
	if (ok)
		atomic_fetch_add(&handoffs, 1);
	return ok;
}

static int q_pop(struct block *b)
{
	int ok = 0;
	pthread_mutex_lock(&q_lock);
	if (q_len) {
		*b = queue[q_head];
		q_head = (q_head + 1) % QCAP;
		q_len--;
		ok = 1;
	}
	pthread_mutex_unlock(&q_lock);
	return ok;
}

/* ---- blocks ---- */

static size_t pick_size(uint64_t *r)
{
	unsigned k = (unsigned)(pt_rand(r) % 1000);
	if (k < 700)
		return pt_rand_log(r, 1, 256);
	if (k < 950)
		return pt_rand_log(r, 257, 16 * KiB);
	if (k < 995)
		return pt_rand_log(r, 16 * KiB, 256 * KiB);
	return pt_rand_log(r, 256 * KiB, 4 * MiB);
}

static void verify(const struct block *b, const char *when)
{
	size_t bad = pt_check_range(b->p, 0, b->n, b->seed);
	PT_REQUIRE(bad == SIZE_MAX, "%s: block %p (%zu bytes) corrupted at offset %zu", when, (void *)b->p, b->n, bad);
}

static void block_new(struct block *b, uint64_t *r)
{
	size_t n = pick_size(r);
	unsigned how = (unsigned)(pt_rand(r) % 10);
	unsigned char *p;
	if (how < 6) {
		p = malloc(n);
	} else if (how < 8) {
		p = calloc(1, n);
		PT_REQUIRE(p != NULL, "calloc(1, %zu) failed", n);
		size_t nz = pt_first_nonzero(p, n);
		PT_REQUIRE(nz == SIZE_MAX, "calloc(1, %zu) = %p: byte %zu is not zero", n, (void *)p, nz);
	} else if (how < 9) {
		size_t al = (size_t)16 << (pt_rand(r) % 9);
		p = memalign(al, n);
		PT_REQUIRE(p == NULL || ((uintptr_t)p & (al - 1)) == 0, "memalign(%zu, %zu) = %p", al, n, (void *)p);
	} else {
		p = realloc(NULL, n);
	}
	PT_REQUIRE(p != NULL, "allocation of %zu bytes failed (errno %d)", n, errno);
	PT_REQUIRE(malloc_usable_size(p) >= n, "usable size of %p < %zu", (void *)p, n);
	b->p = p;
	b->n = n;
	b->seed = pt_rand(r);
	pt_fill(p, n, b->seed);
}

static void block_free(struct block *b, const char *when)
{
	verify(b, when);
	free(b->p);
	b->p = NULL;
}

static void block_realloc(struct block *b, uint64_t *r)
{
	size_t n = pt_rand(r) % 4 ? pick_size(r) : b->n + pt_rand_range(r, 1, 64);
	verify(b, "before realloc");
	unsigned char *q = realloc(b->p, n);
	PT_REQUIRE(q != NULL, "realloc(%zu -> %zu) failed", b->n, n);
	size_t keep = b->n < n ? b->n : n;
	size_t bad = pt_check_range(q, 0, keep, b->seed);
	PT_REQUIRE(bad == SIZE_MAX, "realloc(%p, %zu -> %zu) = %p lost contents at offset %zu", (void *)b->p, b->n, n,
		(void *)q, bad);
	pt_fill_range(q, keep, n, b->seed);
	b->p = q;
	b->n = n;
}

/* ---- long-lived workers ---- */

static void *worker(void *arg)
{
	uint64_t r = 0x9E3779B97F4A7C15ULL * ((uintptr_t)arg + 1);
	struct block *slots = calloc(NSLOTS, sizeof *slots);
	PT_REQUIRE(slots != NULL, "calloc");
	int (*set_type)(int) = (int (*)(int))pt_sym("mbuddy_set_thread_type");
	long ops = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		struct block *b = &slots[pt_rand(&r) % NSLOTS];
		unsigned op = (unsigned)(pt_rand(&r) % 100);
		if (set_type && op == 99)
			set_type((int)(pt_rand(&r) % 4) - 1); /* -1: back to classification */
		if (!b->p) {
			if (op < 70) {
				block_new(b, &r);
			} else if (op < 95) {
				struct block got;
				if (q_pop(&got)) {
					verify(&got, "taken from the queue");
					*b = got; /* kept, later reallocated or freed here */
				}
			} else {
				struct block give;
				block_new(&give, &r);
				if (!q_push(give))
					block_free(&give, "queue full");
			}
		} else {
			if (op < 45) {
				block_free(b, "before free");
			} else if (op < 80) {
				block_realloc(b, &r);
			} else if (op < 90) {
				verify(b, "handing over");
				if (q_push(*b))
					b->p = NULL;
			} else {
				verify(b, "spot check");
			}
		}
		ops++;
	}
	for (int i = 0; i < NSLOTS; i++)
		if (slots[i].p)
			block_free(&slots[i], "worker exit");
	free(slots);
	atomic_fetch_add(&ops_done, ops);
	return NULL;
}

/* ---- short-lived threads ---- */

static pthread_key_t late_key;

/* Runs after libmbuddy's thread-cache destructor (its key was created
 * first, at the process's first malloc): frees a block allocated earlier
 * by this thread and allocates and frees some more. */
static void late_destructor(void *arg)
{
	struct block *b = arg;
	verify(b, "TLS destructor");
	free(b->p);
	uint64_t r = (uintptr_t)b;
	for (int i = 0; i < 20; i++) {
		struct block t;
		block_new(&t, &r);
		block_free(&t, "in TLS destructor");
	}
	free(b);
	atomic_fetch_add(&tls_dtor_runs, 1);
}

static void *short_thread(void *arg)
{
	uint64_t r = 0xD1B54A32D192ED03ULL * ((uintptr_t)arg + 7);
	struct block mine[32];
	int n = (int)pt_rand_range(&r, 1, 32);
	for (int i = 0; i < n; i++)
		block_new(&mine[i], &r);
	/* Take blocks from others: free some, keep some until the end. */
	for (int i = 0; i < 8; i++) {
		struct block got;
		if (q_pop(&got)) {
			if (pt_rand(&r) % 2) {
				block_free(&got, "short thread, taken");
			} else {
				block_realloc(&got, &r);
				if (!q_push(got))
					block_free(&got, "queue full");
			}
		}
	}
	/* Free half (into this thread's cache), hand a few over, and leave
	 * with the rest freed just before exit. */
	for (int i = 0; i < n; i++) {
		unsigned w = (unsigned)(pt_rand(&r) % 3);
		if (w == 0)
			block_free(&mine[i], "short thread");
		else if (w == 1 && q_push(mine[i]))
			mine[i].p = NULL;
	}
	if ((uintptr_t)arg % 3 == 0) {
		struct block *late = malloc(sizeof *late);
		PT_REQUIRE(late != NULL, "malloc");
		block_new(late, &r);
		pthread_setspecific(late_key, late);
	}
	for (int i = 0; i < n; i++)
		if (mine[i].p)
			block_free(&mine[i], "short thread exit");
	atomic_fetch_add(&short_done, 1);
	return NULL;
}

static void *spawner(void *arg)
{
	(void)arg;
	uintptr_t id = 0;
	while (id < SHORT_THREADS) {
		pthread_t t[SHORT_PARALLEL];
		int k = 0;
		for (; k < SHORT_PARALLEL && id < SHORT_THREADS; k++, id++) {
			pthread_attr_t at;
			pthread_attr_init(&at);
			/* Some detached: nobody joins them, they clean up alone. */
			int detach = id % 5 == 4;
			if (detach)
				pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
			int rc = pthread_create(&t[k], &at, short_thread, (void *)id);
			pthread_attr_destroy(&at);
			PT_REQUIRE(rc == 0, "pthread_create: %s", strerror(rc));
			if (detach)
				t[k] = 0;
		}
		for (int i = 0; i < k; i++)
			if (t[i])
				pthread_join(t[i], NULL);
	}
	/* Let detached ones finish. */
	double until = now_s() + 5;
	while (atomic_load(&short_done) < SHORT_THREADS && now_s() < until)
		usleep(1000);
	return NULL;
}

int main(void)
{
	pt_init("threads_stress");
	pt_watchdog(60);
	PT_REQUIRE(pthread_key_create(&late_key, late_destructor) == 0, "pthread_key_create");

	size_t live0 = mallinfo2().uordblks;
	double t0 = now_s();
	pthread_t w[NWORKERS], sp;
	for (uintptr_t i = 0; i < NWORKERS; i++)
		PT_REQUIRE(pthread_create(&w[i], NULL, worker, (void *)i) == 0, "pthread_create");
	PT_REQUIRE(pthread_create(&sp, NULL, spawner, NULL) == 0, "pthread_create");
	pthread_join(sp, NULL);
	while (now_s() - t0 < RUN_SECONDS)
		usleep(10000);
	atomic_store(&stop, 1);
	for (int i = 0; i < NWORKERS; i++)
		pthread_join(w[i], NULL);

	struct block b;
	long drained = 0;
	while (q_pop(&b)) {
		block_free(&b, "draining the queue");
		drained++;
	}
	PT_CHECK(atomic_load(&short_done) == SHORT_THREADS, "%ld of %d short-lived threads finished",
	         atomic_load(&short_done), SHORT_THREADS);
	PT_CHECK(atomic_load(&tls_dtor_runs) >= SHORT_THREADS / 3 - 1, "TLS destructors ran %ld times",
	         atomic_load(&tls_dtor_runs));
	pt_msg("%ld worker ops, %ld hand-overs, %ld short-lived threads, %ld left in the queue, %.2f s",
	       atomic_load(&ops_done), atomic_load(&handoffs), atomic_load(&short_done), drained, now_s() - t0);

	/* Every block is freed: libmbuddy's accounting of live bytes must be
	 * back near its starting point (thread caches folded in on exit). */
	if (pt_mbuddy) {
		malloc_trim(0);
		size_t live1 = mallinfo2().uordblks;
		PT_CHECK(live1 <= live0 + 256 * KiB && live1 + 256 * KiB >= live0,
		         "mallinfo2().uordblks was %zu before the threads and is %zu after everything was freed", live0,
		         live1);
	}
	/* And the heap still serves every size. */
	for (size_t n = 1; n <= 32 * MiB; n *= 3) {
		void *p = malloc(n);
		PT_CHECK(p != NULL, "malloc(%zu) after the stress", n);
		if (p)
			memset(p, 1, n);
		free(p);
	}
	return pt_finish();
}
