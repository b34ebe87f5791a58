/* Writes 8 bytes past the usable size of a fresh object of argv[1] bytes,
 * then frees it. Under MBUDDY_CHECK=1 the free must be reported. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100;
	char *p = malloc(n);
	if (!p)
		return 2;
	size_t u = malloc_usable_size(p);
	printf("%p\n", (void *)p);
	fflush(stdout);
	memset(p, 'x', u + 8);
	free(p);
	return 0;
}
