/* The lifecycle: when each layer below is set up, forked and wound down.
 * The process is set up on its first allocation (or by the preload
 * library's constructor, whichever comes first); a thread gets its heap on
 * its first small allocation and lets go of it when it exits; fork takes
 * every lock in one order; at exit the report is written and the profile
 * saved. Work asked for where it cannot run (a report requested by a
 * signal) waits for the next slow path. The layers below never call up
 * here: they only offer set-up, fork and exit functions that this layer
 * calls in order. */
#ifndef MB_INIT_H
#define MB_INIT_H

struct mb_theap;

enum mb_process_state {
	MB_PROCESS_NEW = 0,      /* nothing set up yet */
	MB_PROCESS_STARTING = 1, /* one thread sets up; the others wait */
	MB_PROCESS_READY = 2,
	MB_PROCESS_FAILED = 3,   /* no heap could be reserved: allocations fail */
};

/* An enum mb_process_state, read and written atomically. */
extern volatile int mb_process_state;

/* Set the process up if that has not happened yet. Returns 0 once it is
 * ready, -1 if it failed or when called from inside the set-up itself (an
 * allocation made by a library the set-up calls). */
int mb_process_init(void);

/* The calling thread's heap, created on first use; NULL when the thread
 * cannot have one now (its heap is being made or torn down, or the thread
 * is exiting). Call with the process ready. */
struct mb_theap *mb_thread_init(void);

/* Slow paths call this outside every lock: it runs the work that was
 * deferred to such a moment (a report asked for by MBUDDY_STATS_SIGNAL). */
void mb_deferred_poll(void);

#endif
