/* fork() while other threads allocate: libmbuddy must take its locks in a
 * pthread_atfork prepare handler and reset them in the child, so the child
 * never inherits a lock held by a thread that does not exist there.
 *
 * Background threads allocate and free all the time (small, medium and
 * large sizes, realloc, malloc_trim and mallinfo2, which hold the heap lock
 * for longer), so a fork lands at random points inside the allocator.
 * They also swap small objects through a shared table and free what they
 * find there, which another thread allocated: those frees are posted to
 * the allocating thread's inbox, so forks land among posts in flight and
 * waiting; every child frees what the table holds, objects of heaps whose
 * threads it does not have.
 * Another thread takes libmbuddy's statistics without a pause (their
 * memory account reads /proc/self/smaps under locks of its own), and every
 * child takes them once. The main thread forks repeatedly; some forks are made from another
 * thread. Each child mallocs, reallocs and frees plenty (large sizes
 * included), starts a thread of its own, every few iterations forks a
 * grandchild (with a thread of its own allocating) that does the same, and
 * exits 0. The program's own atfork handlers allocate as well. A child that
 * deadlocks is killed by its alarm and counted as a failure.
 *
 * First, in a fresh process (this program run again with the argument
 * "atfork-first"), the program registers an allocating prepare handler
 * BEFORE its first malloc, as libraries do from their constructors: the
 * allocator's own handlers must still run so that the program's prepare
 * handler can allocate (glibc's malloc takes its locks after all handlers). */
#define _GNU_SOURCE 1
#include "ptest.h"

#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

#define NBUSY 3
#define MIN_FORKS 30
#define MAX_FORKS 400
#define MAX_SECONDS 2.5
#define CHILD_TIMEOUT 20

static atomic_int stop;
static atomic_long busy_ops;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- threads keeping the allocator busy ---- */

static size_t busy_size(uint64_t *r)
{
	unsigned k = (unsigned)(pt_rand(r) % 100);
	if (k < 75)
		return pt_rand_log(r, 1, 1024);
	if (k < 95)
		return pt_rand_log(r, 1024, 64 * KiB);
	return pt_rand_log(r, 64 * KiB, 6 * MiB);
}

/* libmbuddy's statistics, whose memory account walks /proc/self/smaps
 * under locks of its own: a fork in the middle must not leave them held. */
typedef int stats_read_fn(void *st, size_t size);
static stats_read_fn *stats_read;

static void take_stats(void)
{
	static _Alignas(64) unsigned char st[8192];
	if (stats_read)
		stats_read(st, sizeof st);
}

/* Takes the statistics without a pause, so that forks land in them. */
static void *stats_taker(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
		take_stats();
	return NULL;
}

/* Small objects any busy thread may free: each starts with its own
 * address, checked before the free. */
#define XCHG 1024
static void *_Atomic xchg[XCHG];

static void *xchg_new(uint64_t *r)
{
	size_t n = pt_rand_log(r, sizeof(uintptr_t), 2 * KiB);
	uintptr_t *q = malloc(n);
	PT_REQUIRE(q != NULL, "exchange: allocation of %zu failed", n);
	*q = (uintptr_t)q;
	return q;
}

/* Returns 0 if old was intact (or NULL) and is freed. */
static int xchg_free(void *old)
{
	if (!old)
		return 0;
	if (*(uintptr_t *)old != (uintptr_t)old)
		return 1;
	free(old);
	return 0;
}

static void *busy(void *arg)
{
	uint64_t r = 0x51ED27A1F00DULL * ((uintptr_t)arg + 3);
	enum { N = 256 };
	void *slot[N] = { 0 };
	size_t len[N] = { 0 };
	long ops = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		unsigned i = (unsigned)(pt_rand(&r) % N);
		unsigned op = (unsigned)(pt_rand(&r) % 1000);
		if (op < 2) {
			malloc_trim(0);
		} else if (op < 4) {
			(void)mallinfo2();

		} else if (!slot[i]) {
			len[i] = busy_size(&r);
			slot[i] = op < 300 ? calloc(1, len[i]) : malloc(len[i]);
			PT_REQUIRE(slot[i] != NULL, "busy thread: allocation of %zu failed", len[i]);
			memset(slot[i], (int)(i & 0xff), len[i] < 4096 ? len[i] : 4096);
		} else if (op >= 900) {
			void *old = atomic_exchange(&xchg[pt_rand(&r) % XCHG], xchg_new(&r));
			PT_REQUIRE(xchg_free(old) == 0, "busy thread: exchanged block %p damaged", old);
		} else if (op < 600) {
			unsigned char *c = slot[i];
			PT_REQUIRE(c[0] == (unsigned char)(i & 0xff), "busy thread: block %p damaged", slot[i]);
			free(slot[i]);
			slot[i] = NULL;
		} else {
			size_t n = busy_size(&r);
			void *q = realloc(slot[i], n);
			PT_REQUIRE(q != NULL, "busy thread: realloc to %zu failed", n);
			slot[i] = q;
			len[i] = n;
			memset(q, (int)(i & 0xff), n < 4096 ? n : 4096);
		}
		ops++;
	}
	for (int i = 0; i < N; i++)
		free(slot[i]);
	atomic_fetch_add(&busy_ops, ops);
	return NULL;
}

/* ---- the program's own atfork handlers, which allocate ---- */

static void *atfork_block;

static void prepare_handler(void)
{
	void *p = malloc(100);
	free(p);
	atfork_block = malloc(300);
}

static void parent_handler(void)
{
	free(atfork_block);
	atfork_block = NULL;
}

static void child_handler(void)
{
	/* The child's handlers run after libmbuddy's (registered first). */
	void *p = malloc(5000);
	if (!p)
		_exit(40);
	free(atfork_block);
	atfork_block = NULL;
	free(p);
}

/* ---- what every child does ---- */

static void *child_thread(void *arg)
{
	uint64_t r = (uintptr_t)arg | 1;
	for (int i = 0; i < 500; i++) {
		size_t n = busy_size(&r);
		unsigned char *p = malloc(n);
		if (!p)
			return (void *)1;
		pt_fill(p, n < 8192 ? n : 8192, n);
		if (!pt_intact(p, n < 8192 ? n : 8192, n))
			return (void *)2;
		free(p);
	}
	return NULL;
}

/* Returns 0 on success or a small code saying what went wrong. */
static int child_work(uint64_t seed)
{
	uint64_t r = seed | 1;
	take_stats(); /* deadlocks if a fork kept the account's locks held */
	enum { N = 300 };
	static unsigned char *p[N];
	static size_t len[N];
	static uint64_t sd[N];
	/* Plenty of small and medium blocks. */
	for (int i = 0; i < N; i++) {
		len[i] = pt_rand_log(&r, 1, i % 10 == 0 ? 256 * KiB : 2 * KiB);
		p[i] = malloc(len[i]);
		if (!p[i])
			return 10;
		sd[i] = pt_rand(&r);
		pt_fill(p[i], len[i], sd[i]);
	}
	/* Large ones, written at both ends and in the middle. */
	static const size_t big[] = { 1 * MiB, 4 * MiB + 1, 9 * MiB };
	for (size_t k = 0; k < sizeof big / sizeof big[0]; k++) {
		unsigned char *b = malloc(big[k]);
		if (!b)
			return 11;
		b[0] = 1;
		b[big[k] / 2] = 2;
		b[big[k] - 1] = 3;
		unsigned char *c = calloc(1, big[k]);
		if (!c)
			return 12;
		if (c[0] || c[big[k] / 2] || c[big[k] - 1])
			return 13;
		if (b[0] != 1 || b[big[k] / 2] != 2 || b[big[k] - 1] != 3)
			return 14;
		free(c);
		free(b);
	}
	/* A realloc chain from 1 byte to 16 MiB and back, contents checked. */
	unsigned char *g = malloc(1);
	size_t gn = 1;
	if (!g)
		return 15;
	pt_fill(g, 1, 77);
	for (size_t n = 2; n <= 5 * MiB; n = n * 2 + 13) {
		unsigned char *q = realloc(g, n);
		if (!q)
			return 16;
		if (!pt_intact(q, gn, 77))
			return 17;
		pt_fill_range(q, gn, n, 77);
		g = q;
		gn = n;
	}
	for (size_t n = gn / 3; n > 1; n /= 3) {
		unsigned char *q = realloc(g, n);
		if (!q)
			return 18;
		if (!pt_intact(q, n, 77))
			return 19;
		g = q;
		gn = n;
	}
	free(g);
	/* What the exchange holds: objects of the parent's other threads,
	 * some of them posted to an inbox of a heap this child lets go of,
	 * or to this thread's. */
	for (int i = 0; i < XCHG; i++)
		if (xchg_free(atomic_exchange(&xchg[i], NULL)))
			return 24;
	/* A thread of the child's own. */
	pthread_t t;
	void *res = (void *)1;
	if (pthread_create(&t, NULL, child_thread, (void *)(uintptr_t)seed) != 0)
		return 20;
	pthread_join(t, &res);
	if (res != NULL)
		return 21;
	for (int i = 0; i < N; i++) {
		if (!pt_intact(p[i], len[i], sd[i]))
			return 22;
		if (i % 2) {
			unsigned char *q = realloc(p[i], len[i] * 2 + 1);
			if (!q || !pt_intact(q, len[i], sd[i]))
				return 23;
			p[i] = q;
		}
		free(p[i]);
	}
	return 0;
}

static const char *describe(int st, char *buf, size_t n)
{
	if (WIFEXITED(st))
		snprintf(buf, n, "exit status %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, n, "killed by signal %d%s", WTERMSIG(st),
			 WTERMSIG(st) == SIGALRM ? " (timeout: deadlock?)" : "");
	else
		snprintf(buf, n, "status 0x%x", st);
	return buf;
}

/* Fork one child (from whatever thread calls this) and wait for it. */
static int fork_and_check(uint64_t seed, int nested)
{
	pid_t pid = fork();
	if (pid < 0) {
		pt_msg("FAIL: fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		alarm(CHILD_TIMEOUT);
		int rc = child_work(seed);
		if (rc)
			_exit(rc);
		if (nested) {
			/* Fork again from the child while a thread of the child
			 * allocates. */
			pthread_t t;
			if (pthread_create(&t, NULL, child_thread, (void *)(uintptr_t)(seed + 1)) != 0)
				_exit(30);
			pid_t g = fork();
			if (g < 0)
				_exit(31);
			if (g == 0) {
				alarm(CHILD_TIMEOUT);
				_exit(child_work(seed * 3) ? 32 : 0);
			}
			int gst;
			if (waitpid(g, &gst, 0) != g)
				_exit(33);
			pthread_join(t, NULL);
			if (!WIFEXITED(gst) || WEXITSTATUS(gst) != 0) {
				char d[96];
				pt_msg("FAIL: grandchild %d: %s", (int)g, describe(gst, d, sizeof d));
				_exit(34);
			}
		}
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid) {
		pt_msg("FAIL: waitpid: %s", strerror(errno));
		return -1;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char d[96];
		pt_msg("FAIL: child %d (seed %llu%s): %s", (int)pid, (unsigned long long)seed, nested ? ", nested" : "",
		       describe(st, d, sizeof d));
		return -1;
	}
	return 0;
}

static void *forking_thread(void *arg)
{
	return (void *)(intptr_t)fork_and_check((uintptr_t)arg, 0);
}

/* The program registers its (allocating) handlers before it ever calls
 * malloc, then forks. */
static int atfork_first(void)
{
	if (pthread_atfork(prepare_handler, parent_handler, child_handler) != 0)
		return 2;
	alarm(4);
	void *p = malloc(pt_hide_size(10));
	free(p);
	pid_t pid = fork();
	if (pid < 0)
		return 3;
	if (pid == 0)
		_exit(child_work(99));
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 4;
	return 0;
}

static void check_atfork_first(const char *self)
{
	pid_t pid = fork();
	PT_REQUIRE(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		execl("/proc/self/exe", self, "atfork-first", (char *)NULL);
		_exit(127);
	}
	int st;
	PT_REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid");
	char d[96];
	PT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	         "fork in a program whose allocating pthread_atfork prepare handler was registered before its first "
	         "malloc: %s", describe(st, d, sizeof d));
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "atfork-first") == 0)
		return atfork_first();
	pt_init("fork_threads");
	pt_watchdog(120);
	stats_read = (stats_read_fn *)dlsym(RTLD_DEFAULT, "mbuddy_stats_read");
	check_atfork_first(argv[0]);

	/* Now with the program's handlers registered after the allocator's,
	 * which the first malloc registers. */
	void *first = malloc(pt_hide_size(10));
	free(first);
	PT_REQUIRE(pthread_atfork(prepare_handler, parent_handler, child_handler) == 0, "pthread_atfork");

	pthread_t b[NBUSY];
	for (uintptr_t i = 0; i < NBUSY; i++)
		PT_REQUIRE(pthread_create(&b[i], NULL, busy, (void *)i) == 0, "pthread_create");
	pthread_t taker;
	PT_REQUIRE(pthread_create(&taker, NULL, stats_taker, NULL) == 0, "pthread_create");
	usleep(20000);

	double t0 = now_s();
	int forks = 0, failed = 0, from_threads = 0, nested = 0;
	uint64_t r = 12345;
	while (forks < MAX_FORKS && (forks < MIN_FORKS || now_s() - t0 < MAX_SECONDS)) {
		uint64_t seed = pt_rand(&r);
		int rc;
		if (forks % 7 == 3) {
			/* fork from a thread other than the main one */
			pthread_t t;
			void *res;
			PT_REQUIRE(pthread_create(&t, NULL, forking_thread, (void *)(uintptr_t)seed) == 0, "pthread_create");
			pthread_join(t, &res);
			rc = (int)(intptr_t)res;
			from_threads++;
		} else {
			int nest = forks % 10 == 5;
			rc = fork_and_check(seed, nest);
			nested += nest;
		}
		forks++;
		if (rc)
			failed++;
		if (failed >= 5)
			break;
		/* Let the busy threads get back into the allocator. */
		usleep((useconds_t)(pt_rand(&r) % 2000));
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < NBUSY; i++)
		pthread_join(b[i], NULL);
	pthread_join(taker, NULL);
	int damaged = 0;
	for (int i = 0; i < XCHG; i++)
		damaged += xchg_free(atomic_exchange(&xchg[i], NULL));

	PT_CHECK(failed == 0, "%d of %d children failed", failed, forks);
	PT_CHECK(damaged == 0, "%d exchanged blocks damaged", damaged);
	PT_CHECK(atomic_load(&busy_ops) > 1000, "the busy threads did only %ld operations", atomic_load(&busy_ops));
	pt_msg("%d forks (%d from other threads, %d nested), %ld operations by busy threads, %.2f s", forks,
	       from_threads, nested, atomic_load(&busy_ops), now_s() - t0);
	/* The parent still works after all those forks. */
	void *p = malloc(10 * MiB);
	PT_CHECK(p != NULL, "malloc after the forks");
	free(p);
	return pt_finish();
}
