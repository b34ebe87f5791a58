/* The purge thread (background.c) over a heap of its own. It is not
 * started before a purge is due, nor in a process that freed nothing,
 * nor in a process of one thread younger than MB_BG_ALONE_AGE_MS (its
 * calls return the memory), while one that had other threads gets it at
 * the decay time;
 * once due, the first slow path starts it (one thread, named mbuddy-purge,
 * every signal blocked) and it returns the memory by itself; asleep with
 * nothing queued, it is woken when memory is freed and returns that too
 * once idle for the decay time, not before, with no further allocator call
 * from the program; a fork child starts its own; a process younger than
 * the decay time starts it once its heap has handed out 64 MiB. The test
 * only reads the heap under the heap lock, and runs the buddy checker
 * there. */
#include "config.h"
#include "harness.h"
#include "background.h"
#include "large.h"
#include "purge.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/single_threaded.h>

#define MiB ((size_t)1 << 20)
#define DECAY 200

static struct mb_buddy *const B = &mb_heap.buddy;

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* The process's threads named mbuddy-purge; the tid of one in *tid. */
static int purge_threads(pid_t *tid)
{
	DIR *d = opendir("/proc/self/task");
	ASSERT_NE(d, NULL);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		char path[300], comm[32] = "";
		snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof comm, f) && strcmp(comm, "mbuddy-purge\n") == 0) {
			n++;
			if (tid)
				*tid = (pid_t)atoi(e->d_name);
		}
		fclose(f);
	}
	closedir(d);
	return n;
}

/* Pageblocks queued as resident and idle, read under the heap lock, with
 * the buddy checked there. */
static size_t dirty_pageblocks(void)
{
	mb_heap_lock();
	size_t n = B->nr_dirty;
	char err[512];
	int bad = mb_buddy_check(B, err, sizeof err);
	mb_heap_unlock();
	if (bad)
		FAIL("buddy check: %s", err);
	return n;
}

static void *take(size_t bytes)
{
	void *p = mb_large_alloc(bytes, 0, MB_KERNRCLM, 0);
	ASSERT_NE(p, NULL);
	memset(p, 1, bytes);
	return p;
}

/* A free as alloc.c makes it: the pages back, then the purge told. */
static void give(void *p)
{
	mb_large_free(p, &B->pages[mb_buddy_page_index(B, p)]);
	mb_purge_maybe();
}

/* Wait up to ms for the queue of `queued` pageblocks to empty; none may
 * go before `due`, when they have been idle for the decay time. */
static void returned_within(unsigned ms, uint64_t due, size_t queued)
{
	for (unsigned waited = 0;; waited += 5) {
		size_t n = dirty_pageblocks();
		uint64_t now = mb_now_ms();
		if (n < queued && now < due)
			FAIL("%zu of %zu pageblocks returned %llu ms before they were due", queued - n, queued,
			     (unsigned long long)(due - now));
		if (n == 0)
			return;
		if (waited >= ms)
			FAIL("%zu pageblocks still resident %u ms on, %lld ms past due", n, ms,
			     (long long)(now - due));
		sleep_ms(5);
	}
}

/* The process's heap for the whole program: the thread, once started,
 * stays with the heap it purges. */
static void heap(void)
{
	static int done;
	if (!done) {
		test_heap_setup(32 * MiB, MB_MAX_ORDER_DEFAULT, DECAY);
		mb_opt.background = 1;
	}
	done = 1;
}

/* ---- the age at which the thread starts, alone or not ---- */

/* In a child: a heap of its own, and no purge thread yet. */
static void fresh_heap(size_t bytes, uint64_t decay_ms)
{
	mb_background_fork_child(); /* the parent's thread is not the child's */
	test_heap_setup(bytes, MB_MAX_ORDER_DEFAULT, decay_ms);
	mb_opt.background = 1;
}

/* Decay 50 ms: memory freed is due at once, and the thread waits only for
 * the process's age. */
#define QUICK_DECAY 50

/* Alone (the child of a process that never had another thread), no
 * thread before MB_BG_ALONE_AGE_MS however short the decay: the calls
 * return the memory themselves. Then the first call that finds memory
 * queued starts it. */
static void alone(void *arg)
{
	(void)arg;
	if (!__libc_single_threaded)
		FAIL("this process had another thread before this test: run it first");
	fresh_heap(32 * MiB, QUICK_DECAY);
	give(take(8 * MiB));
	uint64_t due = mb_purge_next_due();
	while (mb_now_ms() < due)
		sleep_ms(5);
	for (int i = 0; i < 100 && dirty_pageblocks(); i++) {
		mb_purge_maybe();
		if (mb_now_ms() - mb_heap.started_ms < MB_BG_ALONE_AGE_MS)
			ASSERT_EQ(purge_threads(NULL), 0);
		sleep_ms(1);
	}
	ASSERT_EQ(dirty_pageblocks(), 0);
	ASSERT_EQ(purge_threads(NULL), 0);
	while (mb_now_ms() - mb_heap.started_ms < MB_BG_ALONE_AGE_MS)
		sleep_ms(5);
	give(take(8 * MiB)); /* the call after it starts the thread */
	mb_purge_maybe();
	for (int i = 0; i < 200 && !purge_threads(NULL); i++)
		sleep_ms(5);
	ASSERT_EQ(purge_threads(NULL), 1);
	returned_within(QUICK_DECAY + 1000, mb_purge_next_due(), 2);
}

TEST(alone_waits_for_its_age)
{
	struct test_child c;
	test_child_run(&c, alone, NULL);
	ASSERT_CHILD_OK(&c);
}

static void *nothing(void *arg)
{
	return arg;
}

/* With another thread once created, the thread starts when the first
 * memory is due, one decay time into the process. */
static void with_threads(void *arg)
{
	(void)arg;
	pthread_t t;
	ASSERT_EQ(pthread_create(&t, NULL, nothing, NULL), 0);
	ASSERT_EQ(pthread_join(t, NULL), 0);
	ASSERT_EQ(__libc_single_threaded, 0);
	fresh_heap(32 * MiB, QUICK_DECAY);
	give(take(8 * MiB));
	uint64_t due = mb_purge_next_due();
	while (mb_now_ms() < due)
		sleep_ms(5);
	mb_purge_maybe();
	for (int i = 0; i < 200 && !purge_threads(NULL); i++)
		sleep_ms(5);
	ASSERT_EQ(purge_threads(NULL), 1);
	ASSERT_LT(mb_now_ms() - mb_heap.started_ms, MB_BG_ALONE_AGE_MS);
	returned_within(QUICK_DECAY + 1000, due, 2);
}

TEST(with_threads_starts_at_the_decay)
{
	struct test_child c;
	test_child_run(&c, with_threads, NULL);
	ASSERT_CHILD_OK(&c);
}

/* Until something is due, no thread. */
TEST(not_started_before_due)
{
	heap();
	ASSERT_EQ(purge_threads(NULL), 0);
	mb_purge_maybe();
	void *p = take(8 * MiB);
	ASSERT_EQ(purge_threads(NULL), 0); /* nothing freed yet */
	give(p);                           /* calls mb_purge_maybe() */
	uint64_t due = mb_purge_next_due();
	mb_purge_maybe();
	if (mb_now_ms() < due) {
		ASSERT_EQ(purge_threads(NULL), 0);
		ASSERT_EQ(dirty_pageblocks(), 2);
	}
}

/* Due: the next slow path starts the thread, which returns the memory by
 * itself, and blocks every signal. */
TEST(started_when_due)
{
	heap();
	uint64_t due = mb_purge_next_due();
	if (due == UINT64_MAX) {
		give(take(8 * MiB));
		due = mb_purge_next_due();
	}
	/* Alone, as this process is, the thread also waits for the
	 * process's age. */
	while (mb_now_ms() < due || mb_now_ms() - mb_heap.started_ms < MB_BG_ALONE_AGE_MS)
		sleep_ms(5);
	mb_purge_maybe();
	pid_t tid = 0;
	for (int i = 0; i < 200 && !purge_threads(&tid); i++)
		sleep_ms(5);
	ASSERT_EQ(purge_threads(&tid), 1);
	returned_within(2000, due, 2);
	/* Every signal blocked: SigBlk all ones but SIGKILL and SIGSTOP,
	 * which cannot be blocked, and the C library's own two below
	 * SIGRTMIN, which pthread_sigmask() leaves alone. */
	char path[64], line[128];
	snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
	FILE *f = fopen(path, "r");
	ASSERT_NE(f, NULL);
	unsigned long long blocked = 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "SigBlk: %llx", &blocked) == 1)
			break;
	fclose(f);
	unsigned long long all = ~0ULL & ~(1ULL << (SIGKILL - 1)) & ~(1ULL << (SIGSTOP - 1));
	for (int sig = SIGSYS + 1; sig < SIGRTMIN; sig++)
		all &= ~(1ULL << (sig - 1));
	ASSERT_EQ(blocked & all, all);
}

/* Asleep with nothing queued, the thread is woken by a free and returns
 * the memory once it is due, while the program makes no call at all. */
TEST(woken_by_a_free)
{
	heap();
	if (!purge_threads(NULL))
		SKIP("no purge thread: started_when_due did not run first");
	ASSERT_EQ(dirty_pageblocks(), 0);
	sleep_ms(50); /* let it fall asleep, nothing to wait for */
	void *p = take(8 * MiB);
	give(p);
	uint64_t due = mb_purge_next_due();
	returned_within(DECAY + 1000, due, 2);
	ASSERT_EQ(purge_threads(NULL), 1);
	/* Again, a few times: still one thread. */
	for (int i = 0; i < 3; i++) {
		give(take(4 * MiB));
		due = mb_purge_next_due();
		returned_within(DECAY + 1000, due, 1);
	}
	ASSERT_EQ(purge_threads(NULL), 1);
	mb_heap_lock();
	ASSERT_GE(B->count.released_pageblocks, 5);
	mb_heap_unlock();
}

/* ---- fork: the child has no thread until it needs its own ---- */

static void fork_prepare(void)
{
	mb_purge_fork_prepare();
	mb_heap_lock();
}

static void fork_parent(void)
{
	mb_heap_unlock();
	mb_purge_fork_parent();
}

static void fork_child(void)
{
	mb_heap_fork_child();
	mb_purge_fork_child();
	mb_background_fork_child();
}

static void child(void *arg)
{
	(void)arg;
	ASSERT_EQ(purge_threads(NULL), 0);
	give(take(8 * MiB));
	uint64_t due = mb_purge_next_due();
	while (mb_now_ms() < due)
		sleep_ms(5);
	mb_purge_maybe();
	returned_within(2000, due, 2);
	ASSERT_EQ(purge_threads(NULL), 1);
}

TEST(fork_child_starts_its_own)
{
	heap();
	/* As init.c registers them, for the locks this test takes. */
	ASSERT_EQ(pthread_atfork(fork_prepare, fork_parent, fork_child), 0);
	struct test_child c;
	test_child_run(&c, child, NULL);
	ASSERT_CHILD_OK(&c);
}

/* ---- a young process with a large heap ---- */

/* A process younger than the decay time gets the thread as soon as memory
 * is queued once its heap has handed out 64 MiB; below that, not before
 * it has lived a decay time (not_started_before_due). In a child, with a
 * heap of its own that stays young for 10 s. */
static void young_process(void *arg)
{
	(void)arg;
	fresh_heap(128 * MiB, 10000);
	void *keep = take(56 * MiB);
	give(take(4 * MiB));
	ASSERT_NE(mb_purge_release_due(), UINT64_MAX);
	ASSERT_EQ(purge_threads(NULL), 0);
	void *more = take(8 * MiB); /* 64 MiB handed out */
	give(take(4 * MiB));
	for (int i = 0; i < 200 && !purge_threads(NULL); i++)
		sleep_ms(5);
	ASSERT_EQ(purge_threads(NULL), 1);
	ASSERT_LT(mb_now_ms() - mb_heap.started_ms, 10000);
	give(more);
	give(keep);
}

TEST(started_young_by_a_large_heap)
{
	struct test_child c;
	test_child_run(&c, young_process, NULL);
	ASSERT_CHILD_OK(&c);
}

/* Dense and large, nothing freed: the first call after a collapse falls
 * due starts the thread, not one a second later (a program that builds
 * a table and then only reads it makes no more calls). */
static void dense_young_process(void *arg)
{
	(void)arg;
	mb_background_fork_child();
	test_heap_setup_huge(128 * MiB, MB_MAX_ORDER_DEFAULT, 10000, MB_HUGE_AUTO);
	mb_opt.background = 1;
	ASSERT_NE(mb_heap.hugepages, MB_HUGE_NEVER);
	void *keep = take(64 * MiB);
	ASSERT_EQ(mb_purge_release_due(), UINT64_MAX);
	ASSERT_NE(B->hp_due, UINT64_MAX);
	ASSERT_EQ(purge_threads(NULL), 0);
	sleep_ms(MB_HP_SETTLE_MS + 20);
	mb_purge_maybe(); /* an allocator call's slow path, once */
	for (int i = 0; i < 400 && !purge_threads(NULL); i++)
		sleep_ms(5);
	ASSERT_EQ(purge_threads(NULL), 1);
	give(keep);
}

TEST(started_for_a_collapse_by_a_large_heap)
{
	int thp = mb_os_thp_enabled();
	if (thp == MB_THP_NONE || thp == MB_THP_NEVER)
		SKIP("transparent huge pages are off here (THP \"never\" or unavailable)");
	struct test_child c;
	test_child_run(&c, dense_young_process, NULL);
	ASSERT_CHILD_OK(&c);
}
