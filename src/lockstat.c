#include "config.h"
#include "lockstat.h"
#include "thread.h"

#include <string.h>
#include <time.h>

static void init_mutex(pthread_mutex_t *m, int recursive)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, recursive ? PTHREAD_MUTEX_RECURSIVE : PTHREAD_MUTEX_NORMAL);
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
}

/* The allocator's locks are held for a microsecond or two (a buddy
 * operation, a slab changing lists), while sleeping on the futex and being
 * woken costs tens of microseconds, more in a VM: with two threads taking
 * the heap lock for page runs, blocking at once made nearly every
 * contended acquisition a sleep and a wake-up (alloc-test at 2 threads:
 * 4,800 futex calls in 0.4 s). So a waiter first spins, with backoff,
 * reading the lock word and trying only when it looks free, as glibc's
 * adaptive mutexes and jemalloc's do; about 1,000 pauses (a few
 * microseconds), then it blocks, so that a holder that lost its
 * processor does not keep the waiter spinning. */
#define MB_LOCK_SPIN_MAX 512

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	__atomic_signal_fence(__ATOMIC_SEQ_CST); /* re-read the lock word */
#endif
}

void mb_lock_contended(pthread_mutex_t *m)
{
	for (unsigned spins = 1; spins <= MB_LOCK_SPIN_MAX; spins <<= 1) {
		for (unsigned i = 0; i < spins; i++)
			cpu_relax();
		if (__atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED) == 0 && pthread_mutex_trylock(m) == 0)
			return;
	}
	pthread_mutex_lock(m);
}

#ifndef MB_LOCK_STATS

void mb_lock_init(struct mb_lock *l, const char *name, int recursive)
{
	(void)name;
	init_mutex(&l->mutex, recursive);
}

void mb_lock_after_fork_child(struct mb_lock *l, int recursive)
{
	init_mutex(&l->mutex, recursive);
}

int mb_lockstat_enabled(void)
{
	return 0;
}

size_t mb_lockstat_collect(struct mb_lockstat_row *rows, size_t max)
{
	(void)rows;
	(void)max;
	return 0;
}

#else

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Ticks: the TSC where there is one (a few cycles to read, where
 * clock_gettime costs tens of nanoseconds and every acquisition reads the
 * clock), converted to nanoseconds when the report is written. */
#if defined(__x86_64__)
#include <x86intrin.h>
static inline uint64_t ticks(void) { return __rdtsc(); }
#else
static inline uint64_t ticks(void) { return mono_ns(); }
#endif

static struct mb_lock *registry;
static uint64_t next_thread_id;
static __thread uint64_t thread_id MB_TLS;
/* The clocks when the first lock registered, for the tick rate. */
static uint64_t start_ticks, start_ns;

static inline void bump(uint64_t *c, uint64_t by)
{
	/* Written only under the lock; read by the report without it. */
	__atomic_store_n(c, *c + by, __ATOMIC_RELAXED);
}

static void register_lock(struct mb_lock *l)
{
	uint64_t zero = 0;
	uint64_t now = ticks();
	if (__atomic_compare_exchange_n(&start_ticks, &zero, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		__atomic_store_n(&start_ns, mono_ns(), __ATOMIC_RELEASE);
	l->st.registered = 1;
	struct mb_lock *head = __atomic_load_n(&registry, __ATOMIC_RELAXED);
	do
		l->st.next = head;
	while (!__atomic_compare_exchange_n(&registry, &head, l, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

/* The counting that follows taking l; t0: when a contended wait began. */
static void acquired(struct mb_lock *l, int contended, uint64_t t0)
{
	struct mb_lock_counters *s = &l->st;
	if (s->depth++ > 0)
		return; /* the holder again (recursive): one acquisition */
	uint64_t now = ticks();
	if (!s->registered)
		register_lock(l);
	if (!thread_id)
		thread_id = __atomic_add_fetch(&next_thread_id, 1, __ATOMIC_RELAXED);
	bump(&s->acquisitions, 1);
	if (contended) {
		bump(&s->contended, 1);
		bump(&s->wait_ticks, now - t0);
	}
	if (s->last_owner != thread_id) {
		/* A thread that held the lock before the last holder did is
		 * alive with it: the lock is shared, not passed down a chain
		 * of threads that each exit (a successor inheriting work). */
		if (s->last_owner)
			bump(&s->handoffs, 1);
		if (s->prev_owner == thread_id)
			bump(&s->returns, 1);
		s->prev_owner = s->last_owner;
		__atomic_store_n(&s->last_owner, thread_id, __ATOMIC_RELAXED);
	}
	s->since = now;
}

void mb_lockstat_acquire(struct mb_lock *l)
{
	uint64_t t0 = 0;
	int contended = pthread_mutex_trylock(&l->mutex) != 0;
	if (contended) {
		t0 = ticks();
		mb_lock_contended(&l->mutex);
	}
	acquired(l, contended, t0);
}

int mb_lockstat_try(struct mb_lock *l)
{
	int rc = pthread_mutex_trylock(&l->mutex);
	if (rc == 0)
		acquired(l, 0, 0);
	return rc;
}

int mb_lockstat_cond_timedwait(pthread_cond_t *c, struct mb_lock *l, const struct timespec *abstime)
{
	/* The hold ends while waiting; the wake-up takes the lock again. */
	struct mb_lock_counters *s = &l->st;
	unsigned depth = s->depth;
	bump(&s->hold_ticks, ticks() - s->since);
	s->depth = 0;
	int rc = pthread_cond_timedwait(c, &l->mutex, abstime);
	acquired(l, 0, 0);
	s->depth = depth;
	return rc;
}

void mb_lockstat_release(struct mb_lock *l)
{
	struct mb_lock_counters *s = &l->st;
	if (--s->depth == 0)
		bump(&s->hold_ticks, ticks() - s->since);
	pthread_mutex_unlock(&l->mutex);
}

void mb_lock_init(struct mb_lock *l, const char *name, int recursive)
{
	memset(&l->st, 0, sizeof l->st);
	l->st.name = name;
	init_mutex(&l->mutex, recursive);
}

void mb_lock_after_fork_child(struct mb_lock *l, int recursive)
{
	/* The parent's holder was the forking thread, in prepare: its hold
	 * ends here uncounted. */
	l->st.depth = 0;
	init_mutex(&l->mutex, recursive);
}

int mb_lockstat_enabled(void)
{
	return 1;
}

/* Ticks per nanosecond, measured over the process's life so far (or over
 * a short sleep if that is too short to say). */
static double tick_rate(void)
{
	uint64_t t0 = __atomic_load_n(&start_ticks, __ATOMIC_RELAXED);
	uint64_t n0 = __atomic_load_n(&start_ns, __ATOMIC_ACQUIRE);
	if (!n0 || mono_ns() - n0 < 20000000) {
		t0 = ticks();
		n0 = mono_ns();
		struct timespec pause = { 0, 20000000 };
		nanosleep(&pause, NULL);
	}
	uint64_t t1 = ticks(), n1 = mono_ns();
	return n1 > n0 && t1 > t0 ? (double)(t1 - t0) / (double)(n1 - n0) : 1.0;
}

static uint64_t load(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

size_t mb_lockstat_collect(struct mb_lockstat_row *rows, size_t max)
{
	double rate = tick_rate();
	size_t n = 0;
	for (struct mb_lock *l = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); l; l = l->st.next) {
		const struct mb_lock_counters *s = &l->st;
		const char *name = s->name ? s->name : "unnamed";
		size_t r = 0;
		while (r < n && strcmp(rows[r].name, name) != 0)
			r++;
		if (r == n) {
			if (n == max)
				continue;
			memset(&rows[n], 0, sizeof rows[n]);
			rows[n++].name = name;
		}
		uint64_t hold_ns = (uint64_t)((double)load(&s->hold_ticks) / rate);
		uint64_t handoffs = load(&s->handoffs);
		int shared = load(&s->returns) > 0;
		rows[r].instances++;
		rows[r].acquisitions += load(&s->acquisitions);
		rows[r].contended += load(&s->contended);
		rows[r].handoffs += handoffs;
		rows[r].hold_ns += hold_ns;
		rows[r].wait_ns += (uint64_t)((double)load(&s->wait_ticks) / rate);
		if (shared) {
			rows[r].shared++;
			rows[r].shared_hold_ns += hold_ns;
			if (hold_ns > rows[r].busiest_hold_ns)
				rows[r].busiest_hold_ns = hold_ns;
		}
	}
	return n;
}

#endif
