/* The purge thread in a program with large thread-local arrays.
 *
 * glibc carves a thread's static TLS out of the stack size it is asked
 * for, so a thread created with a fixed small stack in a program that has
 * 56 KiB of thread-local data either cannot start (EINVAL) or starts with
 * a few KiB of stack and overflows it at its first lazily bound call.
 * Here 32 MiB are written and freed, a purge falls due, and the program
 * goes idle: the purge thread must start, survive, and hand the memory
 * back while the program makes no allocator call. */
#define _GNU_SOURCE 1
#include "ptest.h"
#include "background.h" /* MB_BG_ALONE_AGE_MS */

#include <time.h>

#define MiB ((size_t)1 << 20)
#define NBLOCKS 512
#define BLOCK (64 * 1024)

static _Thread_local char big_tls[56 * 1024];

static size_t rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	PT_REQUIRE(f, "cannot read /proc/self/statm");
	unsigned long size = 0, res = 0;
	PT_REQUIRE(fscanf(f, "%lu %lu", &size, &res) == 2, "cannot parse /proc/self/statm");
	fclose(f);
	return res * (size_t)sysconf(_SC_PAGESIZE);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0)
		;
}

int main(int argc, char **argv)
{
	(void)argc;
	pt_init("purge_thread_tls");
	if (!pt_mbuddy)
		return PT_SKIP;
	const char *decay = getenv("MBUDDY_DECAY_MS");
	if (!decay || strcmp(decay, "50") != 0) {
		setenv("MBUDDY_DECAY_MS", "50", 1);
		execv("/proc/self/exe", argv);
		PT_REQUIRE(0, "cannot run itself again: %s", strerror(errno));
	}
	pt_watchdog(60);
	memset(big_tls, 1, sizeof big_tls);
	static void *blocks[NBLOCKS];
	for (int i = 0; i < NBLOCKS; i++) {
		blocks[i] = malloc(BLOCK);
		PT_REQUIRE(blocks[i], "malloc(%d) failed", BLOCK);
		memset(blocks[i], i, BLOCK);
	}
	for (int i = 0; i < NBLOCKS; i++)
		free(blocks[i]);
	size_t before = rss_bytes();
	/* Past the decay time and past the age at which a process of one
	 * thread gets the thread (MB_BG_ALONE_AGE_MS). */
	sleep_ms(MB_BG_ALONE_AGE_MS + 100);
	free(pt_hide(malloc(BLOCK))); /* a purge is due: the thread starts */
	for (long t = 0; t < 3000; t += 20) {
		sleep_ms(20);
		if (rss_bytes() + 24 * MiB <= before)
			return big_tls[7] == 1 ? 0 : 1;
	}
	PT_REQUIRE(0, "RSS stayed at %zu KiB (was %zu KiB): no purge thread returned the memory", rss_bytes() >> 10,
		before >> 10);
	return 1;
}
