/* Lock figures for an allocator built on pthread mutexes, as libmbuddy's
 * --enable-lock-stats gives them for its own locks.
 *
 * Preloaded before the allocator (LD_PRELOAD="lockprof.so liballoc.so"),
 * this library interposes pthread_mutex_lock, _trylock and _unlock: the
 * allocator's calls to them through the dynamic linker come here and go
 * on to glibc's implementations (__pthread_mutex_*, exported by libc).
 * Per mutex it counts acquisitions, contended acquisitions (a lock call
 * that had to wait, or a successful try after failed tries by the same
 * thread: spin-then-lock mutexes such as jemalloc's), handoffs (taken by
 * a thread other than the last holder), whether it is shared (a thread
 * took it again after another did), and the time held and waited, on
 * the same clock and with the same rules as src/lockstat.c. Calls glibc
 * makes internally (stdio, condition variables) do not pass through
 * here, and neither does an allocator's own spin lock: only allocators
 * whose locks are pthread mutexes can be measured this way (jemalloc;
 * not glibc, mimalloc or tcmalloc).
 *
 * At exit it writes one line per mutex taken, in the format of
 * libmbuddy's report,
 *   lockstat name=mutexN instances=1 shared=0|1 acquisitions=.. contended=..
 *            handoffs=.. hold_ns=.. wait_ns=.. shared_hold_ns=.. busiest_hold_ns=..
 * to the file named by LOCKPROF_OUT (nothing without it). Nothing here
 * allocates. Build: cc -O2 -shared -fPIC -o lockprof.so lockprof.c
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

int __pthread_mutex_lock(pthread_mutex_t *m);
int __pthread_mutex_trylock(pthread_mutex_t *m);
int __pthread_mutex_unlock(pthread_mutex_t *m);

#define TABLE 4096 /* mutexes tracked; more are passed through uncounted */

struct entry {
	pthread_mutex_t *mutex; /* claimed once, never released */
	unsigned depth;
	uint64_t last_owner, prev_owner, since;
	uint64_t acquisitions, contended, handoffs, returns, hold_ticks, wait_ticks;
};

static struct entry table[TABLE];
static uint64_t next_thread_id, start_ticks, start_ns;
static __thread uint64_t thread_id __attribute__((tls_model("initial-exec")));
/* The mutex this thread failed to take, and since when. */
static __thread pthread_mutex_t *failed_on __attribute__((tls_model("initial-exec")));
static __thread uint64_t failed_since __attribute__((tls_model("initial-exec")));

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct entry *lookup(pthread_mutex_t *m)
{
	size_t h = ((uintptr_t)m >> 4) * 0x9E3779B97F4A7C15ULL >> 52; /* 12 bits */
	for (size_t i = 0; i < TABLE; i++) {
		struct entry *e = &table[(h + i) % TABLE];
		pthread_mutex_t *cur = __atomic_load_n(&e->mutex, __ATOMIC_ACQUIRE);
		if (cur == m)
			return e;
		if (!cur && __atomic_compare_exchange_n(&e->mutex, &cur, m, 0, __ATOMIC_ACQ_REL,
							__ATOMIC_ACQUIRE))
			return e;
		if (cur == m)
			return e;
	}
	return NULL;
}

static inline void bump(uint64_t *c, uint64_t by)
{
	__atomic_store_n(c, *c + by, __ATOMIC_RELAXED);
}

/* Called with m just taken. */
static void acquired(pthread_mutex_t *m, uint64_t wait_from)
{
	/* A failed try stays pending only while the thread keeps trying the
	 * same mutex (a spin loop); any other lock operation ends it, so an
	 * opportunistic try that gave up is not charged to a later lock. */
	if (failed_on && failed_on != m)
		failed_on = NULL;
	struct entry *e = lookup(m);
	if (!e || e->depth++ > 0)
		return;
	uint64_t now = __rdtsc();
	if (!start_ticks) {
		uint64_t zero = 0;
		if (__atomic_compare_exchange_n(&start_ticks, &zero, now, 0, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			__atomic_store_n(&start_ns, mono_ns(), __ATOMIC_RELEASE);
	}
	if (!thread_id)
		thread_id = __atomic_add_fetch(&next_thread_id, 1, __ATOMIC_RELAXED);
	bump(&e->acquisitions, 1);
	if (failed_on == m) {
		wait_from = failed_since;
		failed_on = NULL;
	}
	if (wait_from) {
		bump(&e->contended, 1);
		bump(&e->wait_ticks, now - wait_from);
	}
	if (e->last_owner != thread_id) {
		if (e->last_owner)
			bump(&e->handoffs, 1);
		if (e->prev_owner == thread_id)
			bump(&e->returns, 1);
		e->prev_owner = e->last_owner;
		e->last_owner = thread_id;
	}
	e->since = now;
}

int pthread_mutex_trylock(pthread_mutex_t *m)
{
	int rc = __pthread_mutex_trylock(m);
	if (rc == 0) {
		acquired(m, 0);
	} else if (failed_on != m) {
		failed_on = m;
		failed_since = __rdtsc();
	}
	return rc;
}

int pthread_mutex_lock(pthread_mutex_t *m)
{
	if (__pthread_mutex_trylock(m) == 0) {
		acquired(m, 0);
		return 0;
	}
	uint64_t t0 = __rdtsc();
	int rc = __pthread_mutex_lock(m);
	if (rc == 0)
		acquired(m, t0);
	return rc;
}

int pthread_mutex_unlock(pthread_mutex_t *m)
{
	if (failed_on && failed_on != m)
		failed_on = NULL;
	struct entry *e = lookup(m);
	if (e && e->depth > 0 && --e->depth == 0)
		bump(&e->hold_ticks, __rdtsc() - e->since);
	return __pthread_mutex_unlock(m);
}

__attribute__((destructor)) static void report(void)
{
	const char *path = getenv("LOCKPROF_OUT");
	if (!path || !start_ns)
		return;
	double rate = (double)(__rdtsc() - start_ticks) / (double)(mono_ns() - start_ns);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return;
	for (size_t i = 0; i < TABLE; i++) {
		const struct entry *e = &table[i];
		uint64_t acq = __atomic_load_n(&e->acquisitions, __ATOMIC_RELAXED);
		if (!acq)
			continue;
		uint64_t hold = (uint64_t)((double)e->hold_ticks / rate);
		char line[320];
		int n = snprintf(line, sizeof line,
				 "lockstat name=mutex%zu instances=1 shared=%d acquisitions=%llu contended=%llu "
				 "handoffs=%llu hold_ns=%llu wait_ns=%llu shared_hold_ns=%llu busiest_hold_ns=%llu\n",
				 i, e->returns > 0, (unsigned long long)acq, (unsigned long long)e->contended,
				 (unsigned long long)e->handoffs, (unsigned long long)hold,
				 (unsigned long long)((double)e->wait_ticks / rate),
				 (unsigned long long)(e->returns ? hold : 0),
				 (unsigned long long)(e->returns ? hold : 0));
		if (n > 0 && write(fd, line, (size_t)n) != n)
			break;
	}
	close(fd);
}
