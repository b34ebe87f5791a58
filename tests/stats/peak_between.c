/* A resident set whose peak no account of the report can see: 32 MiB
 * written and freed in the process's first milliseconds (no account is
 * taken in the first 50 ms, account.c), then, 80 ms on, 16 MiB of small
 * objects, a MiB every 2 ms so that the accounts see them grow, freed
 * before exit. malloc_trim()
 * hands the first load's pages back at once: the high-water mark is the
 * first load's, the largest account the second's.
 *
 * Prints "first_ms=N": how long main took to write and free the first
 * load (the heap was set up before main, so the process was older). */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

#define SMALL 256
#define NSMALL ((16u << 20) / SMALL)
#define PER_MIB ((1u << 20) / SMALL)
static void *small[NSMALL];

int main(void)
{
	double t0 = now_ms();
	size_t big = (size_t)32 << 20;
	char *p = malloc(big);
	if (!p)
		return 1;
	memset(p, 1, big);
	free(p);
	malloc_trim(0);
	double first = now_ms() - t0;
	struct timespec pause = { 0, 80 * 1000000L }, step = { 0, 2 * 1000000L };
	nanosleep(&pause, NULL);
	for (unsigned i = 0; i < NSMALL; i++) {
		if (!(small[i] = malloc(SMALL)))
			return 1;
		memset(small[i], 2, SMALL);
		if (i % PER_MIB == PER_MIB - 1)
			nanosleep(&step, NULL);
	}
	for (unsigned i = 0; i < NSMALL; i++)
		free(small[i]);
	printf("first_ms=%.0f\n", first);
	return 0;
}
