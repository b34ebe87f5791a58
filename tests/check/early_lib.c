/* A library whose constructor allocates: when a program links it, that
 * malloc is the first of the process, made before libmbuddy has read its
 * options (libselinux does this in ls, cp, id, ...). */
#include <stdlib.h>
#include <string.h>

static char *early;

__attribute__((constructor)) static void allocate_early(void)
{
	early = malloc(100);
	if (early)
		memset(early, 'e', 100);
}

/* The object from the constructor; the caller frees it. */
char *early_object(void)
{
	return early;
}
