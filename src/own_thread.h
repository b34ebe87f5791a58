/* The library's own threads (the purge thread, libunwind's loader):
 * detached, started with every signal blocked, so that no signal of the
 * program is ever delivered to them, named for ps and gdb, and allocating
 * with the own key, MB_OWN_KEY (thread.h's type hint). */
#ifndef MB_OWN_THREAD_H
#define MB_OWN_THREAD_H

#include <stddef.h>

/* Start fn(NULL) in such a thread, with a stack of stack_bytes (0: the
 * default). 0, or pthread_create's error. */
int mb_own_thread_start(void *(*fn)(void *), size_t stack_bytes, const char *name);

#endif
