/* libunwind is loaded late (src/unwinder.c): in place in a process with
 * one thread, by a thread of its own in a process with others. Either
 * way the pipe libunwind opens must land on the two descriptors held for
 * it since the start, so that a program sees the same descriptors taken
 * before and after the load (CPython's test_tempfile checks that a child
 * does not have its parent's descriptor). Not before the heap has held
 * 1 MiB, however many samples a smaller one takes. With an argument, a
 * thread is started first and blocks until the end, so the load takes
 * the thread path; without, the in-place one. */
#include "classify_common.h"

#include "two_threads.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* The lowest descriptor the program would get now. */
static int lowest_free(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	close(fd);
	return fd;
}

int main(int argc, char **argv)
{
	(void)argv;
	if (argc > 1 && second_thread_start() != 0)
		return 1;
	int before = lowest_free();
	if (unwinder_loaded()) {
		fprintf(stderr, "libunwind is loaded before any allocation: nothing to test\n");
		return 99;
	}
	/* A small heap is never unwound: 256 samples, past classification's
	 * wake-up and a thread's first 64, with less than 1 MiB held. */
	struct timespec wait = { 0, 60 * 1000 * 1000 };
	nanosleep(&wait, NULL);
	for (long i = 0; i < 256 * 1024; i++)
		free(keep(malloc(64)));
	if (unwinder_loaded()) {
		printf("libunwind loaded while the heap held less than 1 MiB\n");
		return 1;
	}
	need_libmbuddy(); /* waits for the load, allocating */
	int loaded = unwinder_loaded(), after = lowest_free();
	printf("%s: libunwind %s; lowest free descriptor %d before the load, %d after\n",
	       argc > 1 ? "with a second thread" : "one thread", loaded ? "loaded" : "NOT loaded", before, after);
	if (argc > 1)
		second_thread_end();
	return loaded && after == before ? 0 : 1;
}
