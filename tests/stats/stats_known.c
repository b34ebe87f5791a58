/* A known sequence of operations on a fresh heap, then the statistics are
 * checked exactly: free blocks per type and order, bean counters, and the
 * fragmentation indices computed by hand. Linked with the core, no preload
 * (so only these operations touch the heap). Writes the text and JSON
 * dumps to argv[1] and argv[2] for stats-known.test to compare. */
#include "config.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "alloc.h"
#include "fragmentation.h"
#include "heap.h"
#include "options.h"
#include "stats.h"

static int bad;
#define EXPECT(cond)                                                         \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
			bad++;                                               \
		}                                                            \
	} while (0)

static int write_dump(const char *path, int format)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	int rc = mb_stats_write(fd, format);
	close(fd);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s TEXT_OUT JSON_OUT\n", argv[0]);
		return 2;
	}
	/* The environment (set by stats-known.test): four 4 MiB pageblocks,
	 * one type, nothing returned to the kernel. */

	/* 5 pages: an order-3 block from a fresh pageblock, 3 pages given back. */
	void *a = mb_malloc(4 * 4096 + 1, MB_KERNNORCLM);
	/* A whole pageblock, then freed: one steal and one refill. */
	void *b = mb_malloc(4 << 20, MB_KERNNORCLM);
	EXPECT(a && b);
	mb_free(b, "free");

	struct mb_snapshot s;
	mb_stats_snapshot(&s);
	static const uint64_t want_free[10] = { 1, 1, 0, 1, 1, 1, 1, 1, 1, 1 };
	for (unsigned o = 0; o < 10; o++) {
		EXPECT(s.nr_free[MB_KERNNORCLM][o] == want_free[o]);
		EXPECT(s.nr_free[MB_KERNRCLM][o] == 0 && s.nr_free[MB_USERRCLM][o] == 0);
	}
	EXPECT(s.nblocks == 4 && s.global_free == 3 && s.pb_high == 2);
	EXPECT(s.pb_owned[MB_KERNNORCLM] == 1 && s.pb_owned[MB_KERNRCLM] == 0);
	EXPECT(s.count.global_steals == 2 && s.count.global_refills == 1);
	EXPECT(s.count.allocs[MB_KERNNORCLM] == 2 && s.count.allocs[MB_KERNRCLM] == 0);
	EXPECT(s.count.fallbacks[0] == 0 && s.count.fallbacks[1] == 0 && s.count.fallbacks[2] == 0);
	EXPECT(s.pages_allocated == 5);
	EXPECT(s.counts.mallocs[MB_KERNNORCLM] == 2 && s.counts.frees == 1);

	/* By hand, over the two pageblocks used so far: 1019 + 1024 = 2043
	 * free pages; blocks of orders 0,1,3..9 and one of order 10. */
	uint64_t nr[11] = { 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1 };
	double u2 = mb_unusable_free_index(nr, 11, 2), u10 = mb_unusable_free_index(nr, 11, 10);
	EXPECT(fabs(u2 - 3.0 / 2043.0) < 1e-12);   /* only the 1+2 pages below order 2 */
	EXPECT(fabs(u10 - 1019.0 / 2043.0) < 1e-12);
	EXPECT(mb_unusable_free_index(nr, 11, 0) == 0.0);
	EXPECT(mb_fragmentation_index(nr, 11, 10) == -1.0); /* an order-10 block is free */
	/* With no order-10 block left: 1019 free pages in 9 blocks. */
	uint64_t nr2[11] = { 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0 };
	EXPECT(fabs(mb_fragmentation_index(nr2, 11, 10) - (1.0 - (1.0 + 1019.0 / 1024.0) / 9.0)) < 1e-12);
	uint64_t none[11] = { 0 };
	EXPECT(mb_unusable_free_index(none, 11, 3) == 1.0 && mb_fragmentation_index(none, 11, 3) == 0.0);

	EXPECT(write_dump(argv[1], MB_STATS_TEXT) == 0);
	EXPECT(write_dump(argv[2], MB_STATS_JSON) == 0);
	mb_free(a, "free");
	printf("%s\n", bad ? "stats: MISMATCH" : "stats: all values as computed by hand");
	return bad ? 1 : 0;
}
