/* fork() while other threads hold cached objects and the central
 * structures of the slabs are busy.
 *
 * Before the forks, "holder" threads allocate and free objects of every
 * small size class, so their thread caches and the transfer caches are
 * full, and then wait, holding them, until the end. Meanwhile two
 * producer/consumer pairs move small objects from one thread to another
 * as fast as they can, so thread caches flush into the central structures
 * and refill from them all the time, and a fork finds their locks taken at
 * random points. The main thread forks repeatedly. Each child (alarm: a
 * deadlock is a failure) allocates, checks and frees objects of every size
 * from the fork's own thread and from a thread it starts, which pulls
 * objects out of the transfer caches the parent's threads filled; a
 * child's objects must hold their contents, and the child exits 0. Under
 * libmbuddy, the holders' thread caches must be gone from the child (their
 * objects free again): its report counts in threads' caches less than a
 * quarter of what the parent counted with the holders' caches full. */
#define _GNU_SOURCE 1
#include "ptest.h"

#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>

#include "mbuddy.h"

#define KiB ((size_t)1 << 10)

#define NHOLDERS 2
#define NPAIRS 2
#define RING 256
#define MIN_FORKS 40
#define MAX_SECONDS 3.0
#define CHILD_TIMEOUT 20

static atomic_int stop, holders_ready;
static atomic_long moved;

/* libmbuddy's statistics (NULL under another allocator), and what the
 * parent's report counted in threads' caches once the holders were full. */
static int (*stats_read)(struct mbuddy_stats *, size_t);
static unsigned long long parent_cached;

static unsigned long long cached_in_threads(void)
{
	static struct mbuddy_stats st;
	if (stats_read(&st, sizeof st) < 0)
		return ~0ULL;
	return st.account_slab_free_cached;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Sizes 16 B .. 16 KiB, every class, by step. */
static size_t class_size(unsigned i)
{
	return 16 + (size_t)(i * 97) % (16 * KiB - 16);
}

static void *holder(void *arg)
{
	(void)arg;
	enum { N = 4000 };
	static _Thread_local void *held[N];
	for (int round = 0; round < 3; round++) {
		for (unsigned i = 0; i < N; i++) {
			held[i] = pt_hide(malloc(class_size(i)));
			PT_REQUIRE(held[i] != NULL, "holder: malloc");
			memset(held[i], 0x5a, 16);
		}
		for (unsigned i = 0; i < N; i++)
			free(held[i]);
	}
	atomic_fetch_add(&holders_ready, 1);
	while (!atomic_load(&stop))
		usleep(1000);
	return NULL;
}

struct pair {
	void *ring[RING];
	_Alignas(64) atomic_size_t head;
	_Alignas(64) atomic_size_t tail;
};

static void *producer(void *arg)
{
	struct pair *p = arg;
	uint64_t s = (uintptr_t)arg | 1;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		size_t h = atomic_load_explicit(&p->head, memory_order_relaxed);
		if (h - atomic_load_explicit(&p->tail, memory_order_acquire) == RING) {
			sched_yield();
			continue;
		}
		s = s * 6364136223846793005ULL + 1442695040888963407ULL;
		size_t n = 16 + (size_t)(s >> 33) % 2048;
		uint64_t *o = pt_hide(malloc(n));
		PT_REQUIRE(o != NULL, "producer: malloc(%zu)", n);
		*o = h;
		p->ring[h % RING] = o;
		atomic_store_explicit(&p->head, h + 1, memory_order_release);
	}
	return NULL;
}

static void *consumer(void *arg)
{
	struct pair *p = arg;
	for (;;) {
		size_t t = atomic_load_explicit(&p->tail, memory_order_relaxed);
		if (t == atomic_load_explicit(&p->head, memory_order_acquire)) {
			if (atomic_load(&stop) && t == atomic_load(&p->head))
				return NULL;
			sched_yield();
			continue;
		}
		uint64_t *o = p->ring[t % RING];
		PT_REQUIRE(*o == t, "consumer: object %zu holds %llu", t, (unsigned long long)*o);
		free(o);
		atomic_store_explicit(&p->tail, t + 1, memory_order_release);
		atomic_fetch_add_explicit(&moved, 1, memory_order_relaxed);
	}
}

/* ---- in the child ---- */

static void *child_work(void *arg)
{
	uintptr_t salt = (uintptr_t)arg;
	enum { N = 3000 };
	static _Thread_local unsigned char *obj[N];
	for (int round = 0; round < 2; round++) {
		for (unsigned i = 0; i < N; i++) {
			size_t n = i % 50 == 0 ? 20 * KiB + i : class_size(i + (unsigned)salt);
			obj[i] = pt_hide(malloc(n));
			if (!obj[i]) {
				pt_msg("FAIL child: malloc(%zu) returned NULL", n);
				_exit(1);
			}
			memset(obj[i], (int)(i + salt) & 0xff, n < 64 ? n : 64);
		}
		for (unsigned i = 0; i < N; i++) {
			size_t n = i % 50 == 0 ? 20 * KiB + i : class_size(i + (unsigned)salt);
			for (size_t k = 0; k < (n < 64 ? n : 64); k++)
				if (obj[i][k] != (unsigned char)((i + salt) & 0xff)) {
					pt_msg("FAIL child: object %u of %zu bytes overwritten", i, n);
					_exit(1);
				}
			free(obj[i]);
		}
	}
	return NULL;
}

static void child(void)
{
	alarm(CHILD_TIMEOUT);
	if (stats_read) {
		/* This thread's own cache first, then what is left: the
		 * holders exist no more. */
		malloc_trim(0);
		unsigned long long c = cached_in_threads();
		if (c * 4 >= parent_cached) {
			pt_msg("FAIL child: %llu bytes in threads' caches after the fork (the parent: %llu)", c,
			       parent_cached);
			_exit(1);
		}
	}
	child_work((void *)1);
	pthread_t t;
	if (pthread_create(&t, NULL, child_work, (void *)2) != 0) {
		pt_msg("FAIL child: pthread_create");
		_exit(1);
	}
	pthread_join(t, NULL);
	malloc_trim(0);
	_exit(0);
}

int main(void)
{
	pt_init("fork_caches");
	pt_watchdog(120);
	pthread_t h[NHOLDERS], pc[2 * NPAIRS];
	static struct pair pairs[NPAIRS];
	for (int i = 0; i < NHOLDERS; i++)
		PT_REQUIRE(pthread_create(&h[i], NULL, holder, NULL) == 0, "pthread_create");
	while (atomic_load(&holders_ready) < NHOLDERS)
		usleep(1000);
	if (pt_mbuddy) {
		stats_read = (int (*)(struct mbuddy_stats *, size_t))dlsym(RTLD_DEFAULT, "mbuddy_stats_read");
		PT_REQUIRE(stats_read != NULL, "mbuddy_stats_read");
		parent_cached = cached_in_threads();
		PT_CHECK(parent_cached >= 64 * KiB && parent_cached != ~0ULL,
			 "the holders' caches: %llu bytes in threads' caches", parent_cached);
	}
	for (int i = 0; i < NPAIRS; i++) {
		PT_REQUIRE(pthread_create(&pc[2 * i], NULL, producer, &pairs[i]) == 0, "pthread_create");
		PT_REQUIRE(pthread_create(&pc[2 * i + 1], NULL, consumer, &pairs[i]) == 0, "pthread_create");
	}
	double t0 = now_s();
	int forks = 0, bad = 0;
	while (forks < MIN_FORKS || now_s() - t0 < MAX_SECONDS) {
		if (forks >= MIN_FORKS * 10)
			break;
		pid_t pid = fork();
		PT_REQUIRE(pid >= 0, "fork");
		if (pid == 0)
			child();
		int st;
		PT_REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid");
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			pt_msg("FAIL: child %d of fork %d ended with status %#x%s", (int)pid, forks, st,
			       WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ? " (deadlock: killed by its alarm)" : "");
			bad++;
		}
		forks++;
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 2 * NPAIRS; i++)
		pthread_join(pc[i], NULL);
	for (int i = 0; i < NHOLDERS; i++)
		pthread_join(h[i], NULL);
	PT_CHECK(bad == 0, "%d of %d children failed", bad, forks);
	PT_CHECK(atomic_load(&moved) > 0, "no object moved between threads");
	pt_msg("%d forks while %d threads held caches (%llu bytes in threads' caches) and %d pairs moved %ld "
	       "objects between threads",
	       forks, NHOLDERS, parent_cached, NPAIRS, atomic_load(&moved));
	return pt_finish();
}
