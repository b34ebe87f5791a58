/* A second thread that blocks until released, so that the process has
 * two threads and libmbuddy loads libunwind by a thread of its own
 * (src/unwinder.c) rather than in place. */
#ifndef TWO_THREADS_H
#define TWO_THREADS_H

#include <pthread.h>

static pthread_mutex_t second_gate = PTHREAD_MUTEX_INITIALIZER;
static pthread_t second_thread;

static void *second_blocked(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&second_gate);
	pthread_mutex_unlock(&second_gate);
	return NULL;
}

/* 0, or pthread_create's error. */
static int second_thread_start(void)
{
	pthread_mutex_lock(&second_gate);
	return pthread_create(&second_thread, NULL, second_blocked, NULL);
}

static void second_thread_end(void)
{
	pthread_mutex_unlock(&second_gate);
	pthread_join(second_thread, NULL);
}

#endif
