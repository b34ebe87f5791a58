/* Allocator locks, and the contention figures of a lock-stats build.
 *
 * Every lock in the allocator is a struct mb_lock taken with
 * mb_lock_acquire() and mb_lock_release(). In a normal build that is a
 * pthread mutex and nothing else. Configured with --enable-lock-stats
 * (MB_LOCK_STATS), each lock also counts its acquisitions, the contended
 * ones (the mutex was held by another thread), handoffs (taken by a
 * thread other than the one that took it last), returns (handoffs back to
 * the holder before last: two threads alive at the same time take turns),
 * and the time it was held and waited for. The counters are written only by the holder, under the
 * lock itself, so they cost no atomic operation.
 *
 * A lock registers itself on its first acquisition; the report adds up
 * the locks of one name, so a family of locks (one per size class, say)
 * is initialised with one name and reported as one row. Locks must live
 * as long as the process (they stay on the registry). */
#ifndef MB_LOCKSTAT_H
#define MB_LOCKSTAT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#ifdef MB_LOCK_STATS
struct mb_lock;
struct mb_lock_counters {
	const char *name;
	struct mb_lock *next;      /* registry */
	int registered;
	unsigned depth;            /* recursive re-entries of the holder */
	uint64_t last_owner;       /* thread id (lockstat.c) of the last holder */
	uint64_t prev_owner;       /* the holder before it, another thread */
	uint64_t since;            /* tick of the outermost acquisition */
	uint64_t acquisitions, contended, handoffs, returns;
	uint64_t hold_ticks, wait_ticks;
};
#define MB_LOCK_COUNTERS_INIT(lockname) , .st = { .name = (lockname) }
#else
#define MB_LOCK_COUNTERS_INIT(lockname)
#endif

struct mb_lock {
	pthread_mutex_t mutex;
#ifdef MB_LOCK_STATS
	struct mb_lock_counters st;
#endif
};

/* Static initialisers; the name is what the report calls the lock.
 * Recursive: fork's prepare handlers may allocate while ours hold the
 * lock (see heap.c). */
#define MB_LOCK_INITIALIZER(lockname) \
	{ .mutex = PTHREAD_MUTEX_INITIALIZER MB_LOCK_COUNTERS_INIT(lockname) }
#define MB_LOCK_INITIALIZER_RECURSIVE(lockname) \
	{ .mutex = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP MB_LOCK_COUNTERS_INIT(lockname) }

/* A lock created at run time (in zeroed or fresh memory). */
void mb_lock_init(struct mb_lock *l, const char *name, int recursive);
/* In a fork child: a new mutex, the counters kept, nothing held. */
void mb_lock_after_fork_child(struct mb_lock *l, int recursive);

/* Take m, held by another thread a moment ago: spin, then block. */
void mb_lock_contended(pthread_mutex_t *m);

/* mb_lock_try() returns 0 when it took the lock, as pthread_mutex_trylock.
 * mb_lock_cond_timedwait() waits on c as pthread_cond_timedwait does with
 * the lock's mutex: the lock is not held while waiting, and taken again
 * (one more acquisition) when it returns. */
#ifdef MB_LOCK_STATS
void mb_lockstat_acquire(struct mb_lock *l);
int mb_lockstat_try(struct mb_lock *l);
void mb_lockstat_release(struct mb_lock *l);
int mb_lockstat_cond_timedwait(pthread_cond_t *c, struct mb_lock *l, const struct timespec *abstime);

static inline void mb_lock_acquire(struct mb_lock *l) { mb_lockstat_acquire(l); }
static inline int mb_lock_try(struct mb_lock *l) { return mb_lockstat_try(l); }
static inline void mb_lock_release(struct mb_lock *l) { mb_lockstat_release(l); }
static inline int mb_lock_cond_timedwait(pthread_cond_t *c, struct mb_lock *l,
					 const struct timespec *abstime)
{
	return mb_lockstat_cond_timedwait(c, l, abstime);
}
#else
static inline void mb_lock_acquire(struct mb_lock *l)
{
	if (__builtin_expect(pthread_mutex_trylock(&l->mutex) != 0, 0))
		mb_lock_contended(&l->mutex);
}
static inline int mb_lock_try(struct mb_lock *l) { return pthread_mutex_trylock(&l->mutex); }
static inline void mb_lock_release(struct mb_lock *l) { pthread_mutex_unlock(&l->mutex); }
static inline int mb_lock_cond_timedwait(pthread_cond_t *c, struct mb_lock *l,
					 const struct timespec *abstime)
{
	return pthread_cond_timedwait(c, &l->mutex, abstime);
}
#endif

/* One row of the report: the locks of one name, added up. */
struct mb_lockstat_row {
	const char *name;
	unsigned instances;        /* locks of this name taken at least once */
	unsigned shared;           /* of which taken in turns by live threads (returns > 0) */
	uint64_t acquisitions, contended, handoffs;
	uint64_t hold_ns, wait_ns;
	uint64_t shared_hold_ns;   /* held, in the shared locks */
	uint64_t busiest_hold_ns;  /* held, in the shared lock held longest */
};

/* 1 in a lock-stats build. */
int mb_lockstat_enabled(void);
/* Fill up to max rows, one per name; returns the number of
 * names (0 in a normal build). Reads the counters without taking the
 * locks: figures of a lock being used at that moment may be a few
 * operations apart. */
size_t mb_lockstat_collect(struct mb_lockstat_row *rows, size_t max);

#endif
