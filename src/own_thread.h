/* The library's own threads (the purge thread, libunwind's loader):
 * detached, started with every signal blocked, so that no signal of the
 * program is ever delivered to them, named for ps and gdb, and allocating
 * with the own key, MB_OWN_KEY (thread.h's type hint). */
#ifndef MB_OWN_THREAD_H
#define MB_OWN_THREAD_H

#include <stddef.h>

/* What such a thread runs and its name: in static storage, since the
 * thread reads it after its start returns. */
struct mb_own_thread {
	void *(*fn)(void *); /* called with NULL */
	const char *name;    /* at most 15 characters */
};

/* Start t->fn(NULL) in such a thread, with a stack of stack_bytes (0:
 * the default). The thread names itself before it runs t->fn: a detached
 * thread may have exited by the time pthread_create returns, and naming
 * it from outside then wrote into a thread descriptor glibc had already
 * freed (threads_stress crashed in pthread_setname_np about once in 40
 * runs on a loaded machine). 0, or pthread_create's error. */
int mb_own_thread_start(const struct mb_own_thread *t, size_t stack_bytes);

#endif
