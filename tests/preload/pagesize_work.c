/* Work for pagesize.test: objects of many sizes, half of them freed, the
 * heap trimmed (every free block and idle pageblock handed back to the
 * kernel), then the survivors checked, freed, and the heap trimmed again. */
#define _GNU_SOURCE 1
#include "ptest.h"

#include <malloc.h>

enum { N = 20000 };
static unsigned char *obj[N];
static size_t len[N];

int main(void)
{
	pt_init("pagesize_work");
	uint64_t rng = 42;
	for (int i = 0; i < N; i++) {
		len[i] = pt_rand_log(&rng, 16, 200000);
		obj[i] = malloc(len[i]);
		PT_REQUIRE(obj[i] != NULL, "malloc(%zu)", len[i]);
		pt_fill(obj[i], len[i], (uint64_t)i);
	}
	for (int i = 0; i < N; i += 2) {
		free(obj[i]);
		obj[i] = NULL;
	}
	malloc_trim(0);
	size_t bad = 0;
	for (int i = 1; i < N; i += 2)
		bad += !pt_intact(obj[i], len[i], (uint64_t)i);
	PT_CHECK(bad == 0, "%zu objects lost their contents when the heap was trimmed", bad);
	for (int i = 1; i < N; i += 2)
		free(obj[i]);
	malloc_trim(0);
	return pt_finish();
}
