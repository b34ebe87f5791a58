#include "config.h"
#include "own_thread.h"

#include "reclaim_type.h"
#include "thread.h"

#include <pthread.h>
#include <signal.h>

union thread_fn {
	void *arg;
	void *(*fn)(void *);
};

/* What the library's own threads allocate (dlopen's records of libunwind,
 * in the loader) lives as long as the process: it takes the own key's
 * slabs (reclaim_type.h), away from the program's objects, where an
 * overflow of theirs would reach it, and the slabs such a thread leaves
 * at its exit are adopted only by a thread allocating with that key. */
static void *run(void *arg)
{
	union thread_fn u = { .arg = arg };
	mb_self.type_hint = MB_OWN_KEY;
	return u.fn(NULL);
}

int mb_own_thread_start(void *(*fn)(void *), size_t stack_bytes, const char *name)
{
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (stack_bytes)
		pthread_attr_setstacksize(&a, stack_bytes);
	/* The thread inherits the mask: a full one. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_t t;
	union thread_fn u = { .fn = fn };
	int rc = pthread_create(&t, &a, run, u.arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
	if (rc == 0)
		pthread_setname_np(t, name);
	return rc;
}
