/* Run under LD_PRELOAD by stats-api.test: a few allocations, then the
 * statistics twice with nothing in between, through mbuddy_stats_read()
 * and as a JSON report written to argv[1]. Prints the fields of struct
 * mbuddy_stats as "name value" lines for the test to compare. The API is
 * found with dlsym, in the preloaded library. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mbuddy.h"

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s JSON_OUT\n", argv[0]);
		return 2;
	}
	void *(*typed_malloc)(size_t, int) = (void *(*)(size_t, int))dlsym(RTLD_DEFAULT, "mbuddy_malloc");
	/* What mbuddy_stats_get(&st) of mbuddy.h calls: the exported
	 * mbuddy_stats_get has the first release's structure. */
	int (*stats_read)(struct mbuddy_stats *, size_t) =
		(int (*)(struct mbuddy_stats *, size_t))dlsym(RTLD_DEFAULT, "mbuddy_stats_read");
	int (*stats_print)(int, int) = (int (*)(int, int))dlsym(RTLD_DEFAULT, "mbuddy_stats_print");
	if (!typed_malloc || !stats_read || !stats_print) {
		fprintf(stderr, "the mbuddy_* functions are not there: not run under LD_PRELOAD=libmbuddy.so?\n");
		return 1;
	}
	static void *keep[4096];
	for (int i = 0; i < 4096; i++)
		keep[i] = malloc((size_t)(i % 64 + 1) * 24);
	for (int i = 0; i < 4096; i += 3)
		free(keep[i]);
	void *big = malloc(3 << 20);
	void *typed = typed_malloc(100, MBUDDY_USERRCLM);
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || !big || !typed)
		return 2;

	struct mbuddy_stats st;
	if (stats_read(&st, sizeof st) != (int)sizeof st || stats_print(fd, MBUDDY_STATS_JSON) != 0)
		return 1;
	close(fd);

	printf("max_order %u\n", st.max_order);
	printf("pageblock_bytes %llu\n", st.pageblock_bytes);
	printf("reserved_bytes %llu\n", st.reserved_bytes);
	printf("buddy_allocated_bytes %llu\n", st.buddy_allocated_bytes);
	printf("live_bytes %llu\n", st.live_bytes);
	printf("released_bytes %llu\n", st.released_bytes);
	printf("global_free_pageblocks %llu\n", st.global_free_pageblocks);
	printf("global_resident_pageblocks %llu\n", st.global_resident_pageblocks);
	printf("global_steals %llu\n", st.global_steals);
	printf("global_refills %llu\n", st.global_refills);
	printf("mallocs %llu\n", st.mallocs);
	printf("frees %llu\n", st.frees);
	printf("peak_live_bytes %llu\n", st.peak_live_bytes);
	printf("served %d\n", st.served);
	for (int t = 0; t < 3; t++) {
		const struct mbuddy_type_stats *ts = &st.types[t];
		printf("type%d.pageblocks %llu\n", t, ts->pageblocks);
		printf("type%d.allocs %llu\n", t, ts->allocs);
		printf("type%d.fallbacks %llu\n", t, ts->fallbacks);
		printf("type%d.failures %llu\n", t, ts->failures);
		printf("type%d.objects %llu\n", t, ts->objects);
		for (unsigned o = 0; o + 1 < st.max_order; o++)
			printf("type%d.free.%u %llu\n", t, o, ts->free[o]);
	}
	for (unsigned o = 0; o < st.max_order; o++) {
		printf("unusable_free_space.%u %.4f\n", o, st.unusable_free_space[o]);
		printf("fragmentation_index.%u %.4f\n", o, st.fragmentation_index[o]);
	}
	free(big);
	free(typed);
	return 0;
}
