/* Run under LD_PRELOAD by fork-counters.test. The parent keeps 5000 small
 * objects, reaches a peak of 64 MiB live and falls back, then forks; the
 * child allocates 1000 objects. Through mbuddy_stats_read(): the parent's
 * peak is at least 64 MiB while its live bytes are far below; the child's
 * counters start at the fork (fewer than 5000 mallocs, at least 1000 after
 * its own) and its peak restarts from what it inherited. Both exit
 * normally, so MBUDDY_STATS gets an exit report from each (the test reads
 * them). Exit status 0, or 1 with a message. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mbuddy.h"

#define MIB (1u << 20)

static int (*stats_read)(struct mbuddy_stats *, size_t);

static struct mbuddy_stats get(void)
{
	struct mbuddy_stats st;
	if (stats_read(&st, sizeof st) != (int)sizeof st) {
		fprintf(stderr, "mbuddy_stats_read failed\n");
		exit(1);
	}
	return st;
}

static int check(int ok, const char *who, const char *what, unsigned long long v)
{
	if (!ok)
		fprintf(stderr, "%s: %s (%llu)\n", who, what, v);
	return ok;
}

int main(void)
{
	/* What mbuddy_stats_get(&st) of mbuddy.h calls: the exported
	 * mbuddy_stats_get has the first release's structure, without the
	 * peaks and served. */
	stats_read = (int (*)(struct mbuddy_stats *, size_t))dlsym(RTLD_DEFAULT, "mbuddy_stats_read");
	if (!stats_read) {
		fprintf(stderr, "mbuddy_stats_read is not there: not run under LD_PRELOAD=libmbuddy.so?\n");
		return 1;
	}
	static void *keep[5000], *big[64];
	for (int i = 0; i < 5000; i++)
		keep[i] = malloc(64);
	for (int i = 0; i < 64; i++) {
		big[i] = malloc(MIB);
		if (!big[i])
			return 1;
		memset(big[i], 1, MIB);
	}
	/* The peak is sampled on slow paths at most once per tick of a coarse
	 * clock: let one pass, and take a slow path (a large malloc). */
	nanosleep(&(struct timespec){ .tv_nsec = 30 * 1000 * 1000 }, NULL);
	void *one = malloc(MIB);
	free(one);
	for (int i = 0; i < 64; i++)
		free(big[i]);

	struct mbuddy_stats p = get();
	int ok = check(p.served == 1, "parent", "served is not 1", (unsigned long long)p.served);
	ok &= check(p.peak_live_bytes >= 64ull * MIB, "parent", "peak live below 64 MiB", p.peak_live_bytes);
	ok &= check(p.live_bytes < 16ull * MIB, "parent", "live not back below 16 MiB", p.live_bytes);
	ok &= check(p.mallocs >= 5000, "parent", "fewer than 5000 mallocs", p.mallocs);
	ok &= check(p.peak_resident_bytes >= 64ull * MIB, "parent", "peak RSS below 64 MiB", p.peak_resident_bytes);
	fflush(NULL);

	pid_t pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		struct mbuddy_stats c0 = get();
		ok = check(c0.mallocs < 100, "child", "inherited the parent's mallocs", c0.mallocs);
		ok &= check(c0.peak_live_bytes < 16ull * MIB, "child", "inherited the parent's peak", c0.peak_live_bytes);
		ok &= check(c0.peak_live_bytes >= c0.live_bytes, "child", "peak below live", c0.peak_live_bytes);
		for (int i = 0; i < 1000; i++)
			keep[i] = malloc(32);
		struct mbuddy_stats c1 = get();
		ok &= check(c1.mallocs >= 1000 && c1.mallocs < 5000, "child", "mallocs not counted since the fork",
			    c1.mallocs);
		exit(ok ? 0 : 1);
	}
	int status;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		ok = check(0, "parent", "the child failed", (unsigned long long)status);
	return ok ? 0 : 1;
}
