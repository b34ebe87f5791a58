/* Three direct call sites with distinct lifetimes - pinned objects, a FIFO
 * cache, temporaries - interleaved as a program would. Each must end up in
 * its own type, and within a bounded number of allocations. With WRAPPED,
 * all three go through one shared wrapper function instead. */
#include "three_sites_load.h"

enum { ROUNDS = 400000 };

int main(void)
{
	need_libmbuddy();
	struct three_sites l = { calloc(CACHE, sizeof(void *)), calloc(ROUNDS / 8 + 1, sizeof(void *)), 0, NULL };
	long settled = -1;
	char *last_temp = NULL;
	for (long i = 0; i < ROUNDS; i++) {
		three_sites_round(&l, i);
		char *t = l.temp;
		if (i == ROUNDS - 1)
			last_temp = t;
		else
			free(t);
		/* Settled: this round's objects all have their own type. */
		if (settled < 0 && i % 8 == 0 && pointer_type(l.pins[l.npins - 1]) == 0 &&
		    pointer_type(l.cache[i % CACHE]) == 1 && pointer_type(t) == 2)
			settled = i + 1;
	}
	int bad = 0;
	/* The last round's objects, from the very same call paths. */
	bad += expect_type("pinned site", l.pins[l.npins - 1], 0);
	bad += expect_type("FIFO cache site", l.cache[(ROUNDS - 1) % CACHE], 1);
	bad += expect_type("temporaries site", last_temp, 2);
	printf("all three sites settled after %ld rounds (bound %d)\n", settled, ROUNDS);
	if (settled < 0)
		bad++;
	return bad ? 1 : 0;
}
