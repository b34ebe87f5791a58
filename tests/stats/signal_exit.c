/* Allocates once, then, without another allocation: raises the signal
 * named by argv[1] ("-" for none), and does what argv[2] says before it
 * exits: "none", "sleep" (half a second), or "close" (closes descriptors
 * 1 and 2, as coreutils do at exit). A report the signal asked for must
 * come out all the same. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: signal_exit SIGNUM|- none|sleep|close\n");
		return 2;
	}
	volatile char *p = malloc(100);
	p[0] = 1;
	free((void *)p);
	if (strcmp(argv[1], "-") != 0)
		raise(atoi(argv[1]));
	if (strcmp(argv[2], "sleep") == 0) {
		struct timespec ts = { 0, 500 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	} else if (strcmp(argv[2], "close") == 0) {
		close(1);
		close(2);
	}
	return 0;
}
