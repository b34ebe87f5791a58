/* The background purge thread: memory comes back to the kernel while the
 * program makes no allocator call at all, with no daemon process. One
 * thread inside the process, started the first time a purge is due (never
 * in a process that frees nothing, nor in one that has run for less than
 * MBUDDY_DECAY_MS), asleep until the oldest queued memory is due, woken
 * when something is queued while it sleeps with nothing to wait for.
 * All signals are blocked in it; it never allocates; MBUDDY_BACKGROUND=0
 * turns it off (slow paths then purge in small steps themselves). */
#ifndef MB_BACKGROUND_H
#define MB_BACKGROUND_H

#include <stdint.h>

/* Called by mb_purge_maybe() with the time the oldest queued memory is due:
 * starts the thread if that time has come, wakes it if it sleeps past it.
 * Returns 1 if the thread takes care of it, 0 if the caller must. */
int mb_background_kick(uint64_t due);

/* Whether the thread runs (for the report). */
int mb_background_running(void);

/* fork: the child has no such thread; it starts its own when needed. */
void mb_background_fork_child(void);

#endif
