/* The background purge thread: memory comes back to the kernel while the
 * program makes no allocator call at all, with no daemon process. One
 * thread inside the process, started the first time a purge is due (never
 * in a process that frees nothing, nor in one that has run for less than
 * MBUDDY_DECAY_MS, or MB_BG_ALONE_AGE_MS while it has no other thread),
 * asleep until the oldest queued memory is due, woken
 * when something is queued while it sleeps with nothing to wait for.
 * All signals are blocked in it; it never allocates; MBUDDY_BACKGROUND=0
 * turns it off (slow paths then purge in small steps themselves). */
#ifndef MB_BACKGROUND_H
#define MB_BACKGROUND_H

#include <stdint.h>

/* A process of one thread gets the purge thread no younger than this,
 * however short the decay: the first thread created makes glibc lock
 * what it need not lock alone, for good (every getc of sqlite3's shell
 * took a lock: its import ran 12% slower with the thread started at
 * 100 ms). Until then its slow paths return the memory themselves; a
 * process that already has threads pays nothing more for one. */
#define MB_BG_ALONE_AGE_MS 500

/* Slow paths call this, with no lock held, when they may owe maintenance:
 * it returns at once unless something is due, then starts the thread (the
 * first time a purge is due) or wakes it (if it sleeps with nothing to wait
 * for), or, without a thread, does a bounded step of the work itself. */
void mb_purge_maybe(void);
/* The same after a free, which never starts the thread: glibc frees the
 * TLS vectors of cached thread stacks while it holds the lock of its stack
 * cache, which pthread_create takes (a hang under python3's threads). The
 * next allocator call that is not a free starts it. */
void mb_purge_maybe_after_free(void);

/* fork: the child has no such thread; it starts its own when needed. */
void mb_background_fork_child(void);

#endif
