#include "config.h"
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The n bytes snprintf wanted for buf (size bytes), then abort. */
static __attribute__((noreturn)) void write_and_abort(const char *buf, size_t size, int n)
{
	if (n > (int)size)
		n = (int)size;
	if (n > 0) {
		ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
		(void)w;
	}
	abort();
}

void mb_fatal_pointer(const char *func, const char *what, const void *p)
{
	char buf[256];
	write_and_abort(buf, sizeof buf, snprintf(buf, sizeof buf, "libmbuddy: %s(): %s: %p\n", func, what, p));
}

void mb_fatal_invariant(const char *op, const char *broken)
{
	char buf[512];
	write_and_abort(buf, sizeof buf,
			snprintf(buf, sizeof buf, "libmbuddy: buddy invariant broken after %s: %s\n", op, broken));
}
