/* A size class the program stopped using gives back what its thread cache
 * holds, classification on or off (theap.c's aging, on the slow path the
 * sampling countdown brings every few hundred allocations even to a
 * thread the cache serves entirely): 24 objects of 1,000 bytes freed into
 * the thread cache, then malloc/free pairs of 16 bytes for up to 2 s,
 * which the cache serves without leaving the fast path. Within that time
 * the cached bytes (mbuddy_stats_read's account_slab_free_cached) must
 * fall below 4 KiB. cache-aging.test runs it with MBUDDY_DECAY_MS=40 (the
 * bins aged every 100 ms), MBUDDY_CLASSIFY unset and off. */
#define _GNU_SOURCE 1
#include "ptest.h"
#include "mbuddy.h"

#include <dlfcn.h>
#include <time.h>

#define N 24
#define SIZE 1000

int main(void)
{
	pt_init("cache_aging");
	if (!pt_mbuddy)
		return pt_finish();
	int (*stats_read)(struct mbuddy_stats *, size_t) =
		(int (*)(struct mbuddy_stats *, size_t))dlsym(RTLD_DEFAULT, "mbuddy_stats_read");
	PT_REQUIRE(stats_read != NULL, "no mbuddy_stats_read");
	static struct mbuddy_stats st;
	void *p[N];
	for (int i = 0; i < N; i++) {
		PT_REQUIRE((p[i] = malloc(SIZE)) != NULL, "malloc(%d)", SIZE);
		memset(p[i], 1, SIZE); /* resident: the account counts resident bytes */
	}
	for (int i = 0; i < N; i++)
		free(p[i]);
	PT_REQUIRE(stats_read(&st, sizeof st) > 0, "mbuddy_stats_read");
	unsigned long long before = st.account_slab_free_cached;
	PT_CHECK(before >= (unsigned long long)N * SIZE, "%llu bytes cached after %d frees of %d bytes", before, N,
		 SIZE);
	double start = 1e3 * pt_now_s(), took = 0;
	unsigned long long cached = before;
	while ((took = 1e3 * pt_now_s() - start) < 2000 && cached >= 4096) {
		for (int i = 0; i < 100000; i++) {
			void *q = malloc(16);
			PT_REQUIRE(q != NULL, "malloc(16)");
			*(volatile char *)q = 1;
			free(q);
		}
		PT_REQUIRE(stats_read(&st, sizeof st) > 0, "mbuddy_stats_read");
		cached = st.account_slab_free_cached;
	}
	pt_msg("cached bytes: %llu after the frees, %llu %.0f ms later", before, cached, took);
	PT_CHECK(cached < 4096, "the thread cache still held %llu bytes after %.0f ms of other allocations", cached,
		 took);
	return pt_finish();
}
