/* libunwind, loaded with dlopen when classification first unwinds, not
 * linked: a short process, which classification sleeps through, or a
 * small one, whose samples are not unwound (classify.c), never loads it,
 * nor liblzma behind it, and saves their loading and relocation, a fifth
 * of a millisecond, and their pages.
 *
 * The first allocation that wants a stack loads it, in place if the
 * process has one thread; with others, it starts a thread that loads it
 * and goes on without a stack, as do the others until it is loaded (a
 * millisecond or so). Never an allocation of the dynamic loader itself
 * (it may be loading another object, with its lists half built); the
 * next slow path asks again. */
#ifndef MB_UNWINDER_H
#define MB_UNWINDER_H

#define UNW_LOCAL_ONLY
#include <libunwind.h>

struct mb_unw {
	int (*backtrace)(void **, int);
	int (*init_local)(unw_cursor_t *, unw_context_t *);
	int (*step)(unw_cursor_t *);
	int (*get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);
	int (*getcontext)(unw_context_t *); /* where libunwind's is a function */
};

/* Filled once mb_unwinder_ready() has returned 1. */
extern struct mb_unw mb_unw;

/* 1 when libunwind is loaded and set up (a cache per thread), by this
 * call or before; else 0, and the load is started unless ra, the
 * allocation's caller, lies in the dynamic loader, it is under way, or
 * it failed (a warning says so once: classification goes on without
 * stacks). */
int mb_unwinder_ready(const void *ra);

/* At start, with classification on: two descriptors held for the pipe
 * libunwind opens when it is loaded and keeps. It lands on them then, so
 * the program sees the same descriptors taken as when libunwind was
 * linked and set up at start, whenever it is loaded: a program that
 * checks which descriptors a child inherits (CPython's test_tempfile)
 * finds the same numbers free in both. */
void mb_unwinder_reserve(void);

/* Fork's child: a load that another thread had under way is tried again. */
void mb_unwinder_fork_child(void);

#endif
