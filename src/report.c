#include "config.h"
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void mb_fatal_pointer(const char *func, const char *what, const void *p)
{
	char buf[256];
	int n = snprintf(buf, sizeof buf, "libmbuddy: %s(): %s: %p\n", func, what, p);
	if (n > (int)sizeof buf)
		n = (int)sizeof buf;
	ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
	(void)w;
	abort();
}
