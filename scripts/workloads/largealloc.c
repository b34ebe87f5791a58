/* One huge allocation, never touched: what it costs in time and in
 * resident metadata.
 *
 * A program may reserve a large buffer it fills only in part (a hash
 * table sized for the worst case, a memory-mapped arena). Its cost should
 * not grow with its size: no record per page written, no page zeroed.
 * For each SIZE this workload times malloc(SIZE) and free() of the same
 * pointer, and reads the RSS just before the malloc and just after it,
 * before the program touches the memory: the difference is what the
 * allocator itself made resident for the allocation (its metadata). An
 * allocation that fails (an allocator that maps eagerly hits the
 * kernel's overcommit limit) is reported with ok_X=0.
 *
 * Usage: largealloc SIZE...   (e.g. 8G 32G)
 * Prints: RESULT workload=largealloc, then per SIZE (X = the argument in
 *   lower case): ok_X=0|1 malloc_us_X=.. free_us_X=.. us_X=.. meta_kib_X=..
 *   left_kib_X=.. (RSS left above the start after the free)
 */
#include <ctype.h>

#include "common.h"

#define MAX_SIZES 8

int main(int argc, char **argv)
{
	if (argc < 2 || argc > MAX_SIZES + 1) {
		fprintf(stderr, "usage: %s SIZE... (at most %d)\n", argv[0], MAX_SIZES);
		return 1;
	}
	/* Neither the allocator's start-up nor the first faults on the code
	 * this loop runs (file pages count in RSS too) are part of the
	 * figure. */
	free(malloc(64));
	free(malloc(1 << 20));
	(void)now_sec();
	(void)rss_bytes();
	char line[2048];
	int len = snprintf(line, sizeof line, "RESULT workload=largealloc");
	for (int i = 1; i < argc; i++) {
		size_t size = parse_size(argv[i]);
		char key[32];
		size_t k = 0;
		for (const char *s = argv[i]; *s && k < sizeof key - 1; s++)
			key[k++] = (char)tolower((unsigned char)*s);
		key[k] = 0;

		size_t rss0 = rss_bytes();
		double t0 = now_sec();
		void *p = malloc(size);
		double t1 = now_sec();
		size_t rss1 = rss_bytes();
		free(p);
		double t2 = now_sec();
		size_t rss2 = rss_bytes();
		long meta = p ? ((long)rss1 - (long)rss0) / 1024 : 0;
		long left = ((long)rss2 - (long)rss0) / 1024;
		len += snprintf(line + len, sizeof line - (size_t)len,
				" ok_%s=%d malloc_us_%s=%.1f free_us_%s=%.1f us_%s=%.1f meta_kib_%s=%ld left_kib_%s=%ld",
				key, p != NULL, key, (t1 - t0) * 1e6, key, (t2 - t1) * 1e6, key, (t2 - t0) * 1e6,
				key, meta, key, left);
	}
	puts(line);
	return 0;
}
