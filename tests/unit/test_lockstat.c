/* The lock-stats counters (src/lockstat.c built with MB_LOCK_STATS, as
 * --enable-lock-stats does): acquisitions, recursion, contention,
 * handoffs, hold and wait time, rows per name, and fork. */
#include "config.h"
#include "lockstat.h"
#include "harness.h"

#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void spin_ns(long ns)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < ns);
}

/* mb_lockstat_collect() measures the tick rate over the time since the
 * first lock was registered or, when that is under 20 ms, over a 20 ms
 * sleep of its own, which a lock held by the caller would count as held:
 * every test starts with a lock registered at least that long ago, so that
 * each can also run alone. */
static void clock_running(void)
{
	static struct mb_lock first = MB_LOCK_INITIALIZER("first");
	static int done;
	if (done)
		return;
	done = 1;
	mb_lock_acquire(&first);
	mb_lock_release(&first);
	struct timespec pause = { 0, 25000000 };
	nanosleep(&pause, NULL);
}

static const struct mb_lockstat_row *row(const char *name)
{
	static struct mb_lockstat_row rows[16];
	size_t n = mb_lockstat_collect(rows, 16);
	for (size_t i = 0; i < n; i++)
		if (strcmp(rows[i].name, name) == 0)
			return &rows[i];
	return NULL;
}

static struct mb_lock solo = MB_LOCK_INITIALIZER_RECURSIVE("solo");

TEST(counts_one_thread)
{
	clock_running();
	ASSERT(mb_lockstat_enabled());
	ASSERT_EQ(row("solo"), NULL); /* not registered before its first use */
	for (int i = 0; i < 10; i++) {
		mb_lock_acquire(&solo);
		spin_ns(100000);
		mb_lock_release(&solo);
	}
	const struct mb_lockstat_row *r = row("solo");
	ASSERT_NE(r, NULL);
	ASSERT_EQ(r->instances, 1);
	ASSERT_EQ(r->shared, 0);
	ASSERT_EQ(r->acquisitions, 10);
	ASSERT_EQ(r->contended, 0);
	ASSERT_EQ(r->handoffs, 0);
	ASSERT_EQ(r->wait_ns, 0);
	/* 10 x 100 us held (more if preempted); the tick rate is estimated. */
	ASSERT_GE(r->hold_ns, 800000);
	ASSERT_LT(r->hold_ns, 1000000000);
	ASSERT_EQ(r->shared_hold_ns, 0);
}

TEST(recursion_is_one_acquisition)
{
	clock_running();
	mb_lock_acquire(&solo);
	mb_lock_release(&solo);
	uint64_t before = row("solo")->acquisitions;
	mb_lock_acquire(&solo);
	mb_lock_acquire(&solo);
	mb_lock_release(&solo);
	mb_lock_release(&solo);
	ASSERT_EQ(row("solo")->acquisitions, before + 1);
}

static struct mb_lock shared_lock = MB_LOCK_INITIALIZER("pair");
static volatile int holding, coming;

/* Holds the lock until the main thread is about to take it, and 50 ms
 * more, so that the main thread finds it held even on a busy machine. */
static void *hold_then_release(void *arg)
{
	(void)arg;
	mb_lock_acquire(&shared_lock);
	holding = 1;
	while (!coming)
		;
	spin_ns(50000000);
	mb_lock_release(&shared_lock);
	return NULL;
}

static void *take_once(void *arg)
{
	(void)arg;
	mb_lock_acquire(&shared_lock);
	mb_lock_release(&shared_lock);
	return NULL;
}

TEST(contention_and_handoff)
{
	clock_running();
	pthread_t t;
	ASSERT_EQ(pthread_create(&t, NULL, hold_then_release, NULL), 0);
	while (!holding)
		;
	coming = 1;
	mb_lock_acquire(&shared_lock); /* waits up to 50 ms */
	mb_lock_release(&shared_lock);
	pthread_join(t, NULL);
	const struct mb_lockstat_row *r = row("pair");
	ASSERT_NE(r, NULL);
	ASSERT_EQ(r->acquisitions, 2);
	ASSERT_EQ(r->contended, 1);
	ASSERT_EQ(r->handoffs, 1);
	/* Passed from one thread to the next only: not shared (yet). */
	ASSERT_EQ(r->shared, 0);
	ASSERT_EQ(r->shared_hold_ns, 0);
	/* The first thread is gone; a third takes it, then this one again:
	 * two live threads in turn. */
	ASSERT_EQ(pthread_create(&t, NULL, take_once, NULL), 0);
	pthread_join(t, NULL);
	mb_lock_acquire(&shared_lock);
	mb_lock_release(&shared_lock);
	r = row("pair");
	ASSERT_EQ(r->acquisitions, 4);
	ASSERT_EQ(r->handoffs, 3);
	ASSERT_EQ(r->shared, 1);
	ASSERT_GT(r->wait_ns, 0);
	ASSERT_GE(r->hold_ns, 40000000);
	ASSERT_EQ(r->shared_hold_ns, r->hold_ns);
	ASSERT_EQ(r->busiest_hold_ns, r->hold_ns); /* one lock of that name */
}

/* Waiters spin before they block (mb_lock_contended): whichever way a
 * waiter gets the lock, the holder is alone in it. Two threads count in
 * short critical sections, where waiters mostly get it by spinning. */
static struct mb_lock count_lock = MB_LOCK_INITIALIZER("count");
static struct mb_lock count_lock_recursive = MB_LOCK_INITIALIZER_RECURSIVE("count_recursive");
static volatile unsigned long counted;
#define COUNT_EACH 200000

static void *count_under(void *arg)
{
	struct mb_lock *l = arg;
	for (int i = 0; i < COUNT_EACH; i++) {
		mb_lock_acquire(l);
		counted = counted + 1;
		mb_lock_release(l);
	}
	return NULL;
}

TEST(exclusion_under_contention)
{
	clock_running();
	struct mb_lock *locks[] = { &count_lock, &count_lock_recursive };
	for (int k = 0; k < 2; k++) {
		counted = 0;
		pthread_t t;
		ASSERT_EQ(pthread_create(&t, NULL, count_under, locks[k]), 0);
		count_under(locks[k]);
		pthread_join(t, NULL);
		ASSERT_EQ(counted, 2UL * COUNT_EACH);
		const struct mb_lockstat_row *r = row(k ? "count_recursive" : "count");
		ASSERT_NE(r, NULL);
		ASSERT_EQ(r->acquisitions, 2UL * COUNT_EACH);
	}
}

static struct mb_lock family[3];

static void *take_family(void *arg)
{
	(void)arg;
	for (int i = 0; i < 2; i++) {
		mb_lock_acquire(&family[i]);
		mb_lock_release(&family[i]);
	}
	return NULL;
}

TEST(family_is_one_row)
{
	clock_running();
	for (int i = 0; i < 3; i++)
		mb_lock_init(&family[i], "family", 0);
	for (int i = 0; i < 3; i++)
		for (int k = 0; k <= i; k++) {
			mb_lock_acquire(&family[i]);
			mb_lock_release(&family[i]);
		}
	const struct mb_lockstat_row *r = row("family");
	ASSERT_NE(r, NULL);
	ASSERT_EQ(r->instances, 3);
	ASSERT_EQ(r->acquisitions, 6);
	ASSERT_EQ(r->shared, 0);
	ASSERT_EQ(r->busiest_hold_ns, 0);

	/* Two of them taken in turns by two threads, one held 10 ms longer:
	 * the row adds their hold times and names the longer one. */
	pthread_t t;
	ASSERT_EQ(pthread_create(&t, NULL, take_family, NULL), 0);
	pthread_join(t, NULL);
	for (int i = 0; i < 2; i++) {
		mb_lock_acquire(&family[i]);
		if (i == 1)
			spin_ns(10000000);
		mb_lock_release(&family[i]);
	}
	r = row("family");
	ASSERT_EQ(r->shared, 2);
	ASSERT_GE(r->busiest_hold_ns, 8000000);
	ASSERT_GT(r->shared_hold_ns, r->busiest_hold_ns);
	ASSERT_GT(r->busiest_hold_ns, r->shared_hold_ns - r->busiest_hold_ns);
}

static struct mb_lock waiter = MB_LOCK_INITIALIZER("waiter");

static void *try_held(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)mb_lock_try(&waiter);
}

TEST(try_and_condition_wait)
{
	clock_running();
	ASSERT_EQ(mb_lock_try(&waiter), 0);
	pthread_t t;
	void *rc;
	ASSERT_EQ(pthread_create(&t, NULL, try_held, NULL), 0);
	pthread_join(t, &rc);
	ASSERT_NE(rc, NULL); /* held: the try failed, and counts nothing */
	ASSERT_EQ(row("waiter")->acquisitions, 1);

	/* 30 ms waiting on a condition that nobody signals: not held then,
	 * and one more acquisition when the wait ends. */
	pthread_cond_t c;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c, &ca);
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += 30000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	while (mb_lock_cond_timedwait(&c, &waiter, &until) == 0)
		;
	mb_lock_release(&waiter);
	const struct mb_lockstat_row *r = row("waiter");
	ASSERT_GE(r->acquisitions, 2);
	ASSERT_LT(r->hold_ns, 20000000);
	ASSERT_EQ(mb_lock_try(&waiter), 0); /* and free again */
	mb_lock_release(&waiter);
}

TEST(fork_child_starts_unlocked)
{
	clock_running();
	mb_lock_acquire(&solo);
	uint64_t before = row("solo")->acquisitions;
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		mb_lock_after_fork_child(&solo, 1);
		mb_lock_acquire(&solo);
		mb_lock_release(&solo);
		_exit(row("solo")->acquisitions == before + 1 ? 0 : 1);
	}
	mb_lock_release(&solo);
	int status;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT(WIFEXITED(status));
	ASSERT_EQ(WEXITSTATUS(status), 0);
}
