#include "config.h"
#include "own_thread.h"

#include <pthread.h>
#include <signal.h>

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
	int rc = pthread_create(&t, &a, fn, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
	if (rc == 0)
		pthread_setname_np(t, name);
	return rc;
}
