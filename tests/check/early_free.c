/* Frees the object the constructor of early_lib allocated before
 * libmbuddy's set-up: with MBUDDY_CHECK=1 that object must carry a canary
 * like any other, so the free is quiet. */
#include <stdio.h>
#include <stdlib.h>

char *early_object(void);

int main(void)
{
	char *p = early_object();
	if (!p) {
		fprintf(stderr, "the constructor's malloc failed\n");
		return 1;
	}
	for (int i = 0; i < 100; i++)
		if (p[i] != 'e') {
			fprintf(stderr, "the constructor's object changed at byte %d\n", i);
			return 1;
		}
	free(p);
	puts("freed the constructor's object");
	return 0;
}
