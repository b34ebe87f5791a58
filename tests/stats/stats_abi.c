/* struct mbuddy_stats across versions. Linked with -lmbuddy, as a program
 * that uses the API is, and run under LD_PRELOAD of the same library.
 *
 * - An old caller: a copy of the structure of the first release (up to
 *   fragmentation_index), followed by guard bytes, passed to the exported
 *   symbol mbuddy_stats_get found with dlsym, as a binary built then calls
 *   it. The guard bytes must be untouched and its fields those of a new
 *   read of the same moment.
 * - A new caller: mbuddy_stats_get(&st) of this header (a macro that
 *   passes sizeof st to mbuddy_stats_read) fills every field, the three
 *   added last included, and nothing after the structure.
 * - mbuddy_stats_read with sizes that end inside a field writes the whole
 *   fields before it only; a size larger than the structure gets the
 *   bytes past it zeroed and the structure's size as result; NULL is
 *   EINVAL.
 * Exit status 0, or 1 with a message per failed check. */
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mbuddy.h"

/* The structure as include/mbuddy.h declared it before 3861388. */
struct old_type_stats {
	unsigned long long free[16];
	unsigned long long pageblocks, allocs, fallbacks, failures, objects;
};
struct old_stats {
	unsigned max_order;
	unsigned long long pageblock_bytes;
	unsigned long long reserved_bytes;
	unsigned long long resident_bytes;
	unsigned long long buddy_allocated_bytes;
	unsigned long long live_bytes;
	unsigned long long released_bytes;
	unsigned long long global_free_pageblocks;
	unsigned long long global_resident_pageblocks;
	unsigned long long global_steals, global_refills;
	unsigned long long mallocs, frees;
	struct old_type_stats types[3];
	double unusable_free_space[16];
	double fragmentation_index[16];
};

#define GUARD 0xA5
#define GUARD_BYTES 256

static int failures;

static void check(int ok, const char *what)
{
	if (!ok) {
		printf("FAIL: %s\n", what);
		failures++;
	}
}

static int untouched(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != GUARD)
			return 0;
	return 1;
}

int main(void)
{
	static void *keep[2000];
	for (int i = 0; i < 2000; i++)
		keep[i] = malloc((size_t)(i % 40 + 1) * 16);
	for (int i = 0; i < 2000; i += 2)
		free(keep[i]);

	check(offsetof(struct mbuddy_stats, peak_resident_bytes) == sizeof(struct old_stats),
	      "the new structure does not start with the old one");

	int (*old_get)(struct old_stats *) = (int (*)(struct old_stats *))dlsym(RTLD_DEFAULT, "mbuddy_stats_get");
	if (!old_get) {
		printf("FAIL: no symbol mbuddy_stats_get\n");
		return 1;
	}
	static struct {
		struct old_stats st;
		unsigned char guard[GUARD_BYTES];
	} old;
	static struct {
		struct mbuddy_stats st;
		unsigned char guard[GUARD_BYTES];
	} now;
	memset(&old, GUARD, sizeof old);
	memset(&now, GUARD, sizeof now);

	/* Nothing allocates between the two reads. */
	int rc_old = old_get(&old.st);
	int rc_new = mbuddy_stats_get(&now.st);
	check(rc_old == 0, "the exported mbuddy_stats_get failed");
	check(rc_new == 0, "mbuddy_stats_get of the header failed");
	check(untouched(old.guard, sizeof old.guard), "an old caller's bytes after its structure were written");
	check(untouched(now.guard, sizeof now.guard), "a new caller's bytes after its structure were written");

	/* The old caller's fields: those of the new read, the resident set
	 * (the kernel's count) excepted. */
	struct old_stats expect;
	memcpy(&expect, &now.st, sizeof expect);
	expect.resident_bytes = old.st.resident_bytes;
	check(memcmp(&expect, &old.st, sizeof expect) == 0, "an old caller's fields differ from a new read's");
	check(old.st.max_order == now.st.max_order && old.st.max_order >= 6, "max_order");
	check(old.st.pageblock_bytes == (4096ull << (old.st.max_order - 1)), "pageblock_bytes");
	check(old.st.mallocs >= 2000 && old.st.frees >= 1000, "an old caller's counters");
	printf("old caller: %zu bytes, max_order %u, %llu mallocs, %llu frees, guard intact\n",
	       sizeof old.st, old.st.max_order, old.st.mallocs, old.st.frees);

	/* The fields added since. */
	check(now.st.served == 1, "served is not 1");
	check(now.st.peak_live_bytes >= now.st.live_bytes && now.st.peak_live_bytes > 0, "peak_live_bytes");
	check(now.st.peak_resident_bytes >= now.st.resident_bytes / 2 && now.st.peak_resident_bytes > 0,
	      "peak_resident_bytes");
	printf("new caller: %zu bytes, served %d, peak live %llu, peak resident %llu\n", sizeof now.st,
	       now.st.served, now.st.peak_live_bytes, now.st.peak_resident_bytes);

	/* Sizes inside a field: the whole fields before it only. */
	memset(&now, GUARD, sizeof now);
	size_t cut = offsetof(struct mbuddy_stats, peak_live_bytes) + 3;
	int n = mbuddy_stats_read(&now.st, cut);
	check(n == (int)offsetof(struct mbuddy_stats, peak_live_bytes), "a size inside peak_live_bytes");
	check(untouched((unsigned char *)&now.st + n, sizeof now - (size_t)n), "bytes past whole fields written");
	memset(&now, GUARD, sizeof now);
	n = mbuddy_stats_read(&now.st, 7);
	check(n == (int)sizeof now.st.max_order, "a size of 7 bytes");
	check(untouched((unsigned char *)&now.st + n, sizeof now - (size_t)n), "bytes past max_order written");
	memset(&now, GUARD, sizeof now);
	check(mbuddy_stats_read(&now.st, 0) == 0 && untouched((unsigned char *)&now, sizeof now), "a size of 0");

	/* A newer caller's larger structure: what this library lacks is zero. */
	memset(&now, GUARD, sizeof now);
	n = mbuddy_stats_read(&now.st, sizeof now.st + 64);
	check(n == (int)sizeof now.st, "a larger size does not give the structure's size");
	check(now.st.served == 1, "served, read with a larger size");
	int zero = 1;
	for (size_t i = 0; i < 64; i++)
		zero &= now.guard[i] == 0;
	check(zero, "the bytes past the structure, within the size given, are not zero");
	check(untouched(now.guard + 64, sizeof now.guard - 64), "bytes past the size given written");

	errno = 0;
	check(mbuddy_stats_read(NULL, sizeof now.st) == -1 && errno == EINVAL, "NULL is not EINVAL");
	errno = 0;
	check(old_get(NULL) == -1 && errno == EINVAL, "NULL to the exported mbuddy_stats_get is not EINVAL");

	for (int i = 1; i < 2000; i += 2)
		free(keep[i]);
	if (failures)
		return 1;
	printf("PASS: old and new callers of the statistics\n");
	return 0;
}
