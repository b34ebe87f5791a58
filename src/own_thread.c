#include "config.h"
#include "own_thread.h"

#include "reclaim_type.h"
#include "thread.h"

#include <pthread.h>
#include <signal.h>

/* What the library's own threads allocate (dlopen's records of libunwind,
 * in the loader) lives as long as the process: it takes the own key's
 * slabs (reclaim_type.h), away from the program's objects, where an
 * overflow of theirs would reach it, and the slabs such a thread leaves
 * at its exit are adopted only by a thread allocating with that key. */
static void *run(void *arg)
{
	const struct mb_own_thread *t = arg;
	mb_self.type_hint = MB_OWN_KEY;
	pthread_setname_np(pthread_self(), t->name);
	return t->fn(NULL);
}

int mb_own_thread_start(const struct mb_own_thread *t, size_t stack_bytes)
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
	pthread_t id;
	int rc = pthread_create(&id, &a, run, (void *)t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
	return rc;
}
