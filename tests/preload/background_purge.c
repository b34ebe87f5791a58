/* The background purge thread (MBUDDY_DECAY_MS=50 from
 * tests/preload/background_purge.env; the program sets it and runs itself
 * again otherwise).
 *
 *  - A process that only allocates never gets the thread.
 *  - A process of one thread younger than half a second does not get it
 *    either when a purge is due: its calls return the memory.
 *  - Once a purge is due in an older process the thread starts, named
 *    mbuddy-purge, with every
 *    signal blocked; memory freed before the program goes idle comes back
 *    to the kernel while the program makes no allocator call.
 *  - fork while the thread runs (and other threads churn, so that releases
 *    are in flight): the child starts with one thread, allocates and frees
 *    normally, gets a purge thread of its own once it frees enough and
 *    waits, gives the memory back, and exits cleanly; the parent's thread
 *    keeps working afterwards.
 *  - MBUDDY_BACKGROUND=0 (the program runs itself again with it): no thread
 *    ever starts, and memory still comes back at the next calls.
 *  - A program whose main thread calls pthread_exit() while another thread
 *    works ends when that thread does, with status 0, though the purge
 *    thread runs (it must not keep the process alive). */
#define _GNU_SOURCE 1
#include "ptest.h"
#include "background.h" /* MB_BG_ALONE_AGE_MS */

#include <dirent.h>
#include <malloc.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define NBLOCKS 512
#define BLOCK (64 * 1024)

/* Every signal but those no mask can hold (KILL, STOP) and glibc's own
 * (32, 33), as /proc shows a mask. */
#define ALL_BLOCKABLE 0xfffffffe7ffbfeffULL

/* Reads a small file into buf with system calls only (no allocation: the
 * count must not be changed by the counting). */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return n;
}

/* Threads of this process, how many are named mbuddy-purge, and whether
 * those block every signal. Allocates nothing. */
static int count_threads(int *purge_threads, int *purge_mask_full)
{
	int dfd = open("/proc/self/task", O_RDONLY | O_DIRECTORY);
	PT_REQUIRE(dfd >= 0, "cannot open /proc/self/task");
	int n = 0;
	*purge_threads = 0;
	*purge_mask_full = 1;
	char dents[8192];
	long got;
	while ((got = syscall(SYS_getdents64, dfd, dents, sizeof dents)) > 0) {
		for (long off = 0; off < got;) {
			struct dirent64 *e = (struct dirent64 *)(dents + off);
			off += e->d_reclen;
			if (e->d_name[0] == '.')
				continue;
			n++;
			char path[128], buf[4096];
			snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
			if (read_small(path, buf, sizeof buf) <= 0 || strncmp(buf, "mbuddy-purge", 12) != 0)
				continue;
			(*purge_threads)++;
			snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
			if (read_small(path, buf, sizeof buf) <= 0)
				continue;
			const char *m = strstr(buf, "SigBlk:");
			unsigned long long mask = m ? strtoull(m + 7, NULL, 16) : 0;
			*purge_mask_full &= (mask & ALL_BLOCKABLE) == ALL_BLOCKABLE;
		}
	}
	close(dfd);
	return n;
}

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

static double started_s;

/* Milliseconds since main began: at most the heap's age. */
static double age_ms(void)
{
	return (pt_now_s() - started_s) * 1e3;
}

static void *blocks[NBLOCKS];

/* 32 MiB of written blocks, then all of them freed: the freeing calls are
 * the last allocator calls before the program sleeps. */
static void grow_and_drop(void)
{
	for (int i = 0; i < NBLOCKS; i++) {
		blocks[i] = malloc(BLOCK);
		PT_REQUIRE(blocks[i], "malloc(%d) failed", BLOCK);
		memset(blocks[i], i, BLOCK);
	}
	for (int i = 0; i < NBLOCKS; i++)
		free(blocks[i]);
}

/* RSS comes down by most of the 32 MiB within `ms`, with no allocator call. */
static int returned_while_idle(size_t before, long ms)
{
	for (long t = 0; t < ms; t += 20) {
		sleep_ms(20);
		if (rss_bytes() + 24 * MiB <= before)
			return 1;
	}
	return 0;
}

static atomic_int stop;

static void *churn(void *arg)
{
	uint64_t r = (uint64_t)(uintptr_t)arg;
	void *held[64] = { 0 };
	while (!atomic_load(&stop)) {
		unsigned k = (unsigned)(pt_rand(&r) % 64);
		free(held[k]);
		held[k] = malloc(pt_rand_log(&r, 16, 256 * 1024));
		if (held[k])
			memset(held[k], 1, 16);
	}
	for (int k = 0; k < 64; k++)
		free(held[k]);
	return NULL;
}

static int child(void)
{
	int purge, full;
	if (count_threads(&purge, &full) != 1 || purge)
		_exit(10); /* the parent's threads are not copied */
	void *p = malloc(100);
	free(p);
	/* The parent's churning threads freed memory that the child inherits
	 * resident and not yet returned; its own blocks could reuse those
	 * holes and leave RSS where it was. Hand them back first, so that
	 * the 32 MiB below show. */
	malloc_trim(0);
	size_t base = rss_bytes();
	grow_and_drop();
	size_t before = rss_bytes();
	if (before < base + 24 * MiB)
		_exit(11);
	sleep_ms(120); /* past the decay time: the next call finds a purge due */
	free(malloc(BLOCK));
	if (!returned_while_idle(before, 3000))
		_exit(12);
	count_threads(&purge, &full);
	if (purge != 1)
		_exit(13);
	_exit(0);
}

static void forks_while_running(void)
{
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		PT_REQUIRE(pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 7)) == 0, "pthread_create");
	for (int i = 0; i < 20; i++) {
		pid_t pid = fork();
		PT_REQUIRE(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0)
			child();
		int st;
		PT_REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid");
		PT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork %d: child status 0x%x (10: threads copied, "
		         "11: no memory used, 12: memory not returned while idle, 13: no purge thread)", i, st);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
}

static int run_background_off(void)
{
	int purge, full;
	grow_and_drop();
	size_t before = rss_bytes();
	sleep_ms(120);
	/* The next calls return it in steps (passes are 10 ms apart). */
	for (int i = 0; i < 200 && rss_bytes() + 24 * MiB > before; i++) {
		free(malloc(BLOCK));
		sleep_ms(12);
	}
	PT_CHECK(rss_bytes() + 24 * MiB <= before, "MBUDDY_BACKGROUND=0: RSS %zu MiB after the calls, %zu MiB before",
	         rss_bytes() / MiB, before / MiB);
	count_threads(&purge, &full);
	PT_CHECK(purge == 0, "MBUDDY_BACKGROUND=0 but a purge thread runs");
	return pt_finish();
}

static void *last_worker(void *arg)
{
	(void)arg;
	grow_and_drop();
	sleep_ms(120);
	free(malloc(BLOCK)); /* a purge is due: the thread starts */
	sleep_ms(100);
	return NULL;
}

static void run_main_exits_first(void)
{
	pthread_t t;
	PT_REQUIRE(pthread_create(&t, NULL, last_worker, NULL) == 0, "pthread_create");
	pthread_exit(NULL);
}

/* Runs this program with `mode` and the environment change, waits up to
 * `seconds` for it; returns its wait status, or -1 if it did not end. */
static int run_mode(char **argv, const char *mode, const char *var, const char *val, int seconds)
{
	pid_t pid = fork();
	PT_REQUIRE(pid >= 0, "fork");
	if (pid == 0) {
		if (var)
			setenv(var, val, 1);
		char *args[] = { argv[0], (char *)mode, NULL };
		execv("/proc/self/exe", args);
		_exit(99);
	}
	int st;
	for (int ms = 0; ms < seconds * 1000; ms += 20) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		PT_REQUIRE(w >= 0, "waitpid");
		if (w == pid)
			return st;
		sleep_ms(20);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

int main(int argc, char **argv)
{
	pt_init("background_purge");
	if (!pt_mbuddy)
		return PT_SKIP;
	const char *decay = getenv("MBUDDY_DECAY_MS");
	if (!decay || strcmp(decay, "50") != 0) {
		setenv("MBUDDY_DECAY_MS", "50", 1);
		execv("/proc/self/exe", argv);
		PT_REQUIRE(0, "cannot run itself again: %s", strerror(errno));
	}
	if (argc > 1 && strcmp(argv[1], "background-off") == 0)
		return run_background_off();
	if (argc > 1 && strcmp(argv[1], "main-exits-first") == 0)
		run_main_exits_first();
	pt_watchdog(120);
	started_s = pt_now_s();

	int purge, full;
	/* Allocating only, for longer than the decay time: no thread. */
	for (int i = 0; i < NBLOCKS; i++)
		blocks[i] = malloc(BLOCK);
	sleep_ms(120);
	for (int i = 0; i < NBLOCKS; i++)
		blocks[i + 0] = realloc(blocks[i], BLOCK);
	PT_CHECK(count_threads(&purge, &full) == 1 && purge == 0, "a purge thread started in a process that frees nothing");
	for (int i = 0; i < NBLOCKS; i++)
		free(blocks[i]);

	/* Freed, then calls once the purge is due: a process of one thread
	 * younger than half a second (MB_BG_ALONE_AGE_MS) gets no thread,
	 * and its calls return the memory themselves. */
	grow_and_drop();
	size_t before = rss_bytes();
	sleep_ms(120);
	for (int i = 0; i < 40 && rss_bytes() + 24 * MiB > before; i++) {
		free(malloc(BLOCK));
		sleep_ms(12);
	}
	count_threads(&purge, &full);
	PT_CHECK(purge == 0 || age_ms() >= MB_BG_ALONE_AGE_MS - 50,
	         "a purge thread started within %.0f ms of a process of one thread", age_ms());
	PT_CHECK(rss_bytes() + 24 * MiB <= before, "alone: RSS %zu MiB after the calls, %zu MiB before",
	         rss_bytes() / MiB, before / MiB);

	/* Older, memory queued, then a call: the thread starts and returns
	 * what is freed next while the program sleeps. */
	while (age_ms() < MB_BG_ALONE_AGE_MS + 100)
		sleep_ms(20);
	grow_and_drop();
	free(malloc(BLOCK));
	count_threads(&purge, &full);
	PT_CHECK(purge == 1, "no purge thread after a purge came due (%d)", purge);
	PT_CHECK(full, "the purge thread does not block every signal");
	grow_and_drop();
	before = rss_bytes();
	PT_CHECK(returned_while_idle(before, 3000), "RSS still %zu MiB 3 s after dropping 32 MiB (was %zu MiB)",
	         rss_bytes() / MiB, before / MiB);

	forks_while_running();

	/* The parent's thread still works. */
	grow_and_drop();
	before = rss_bytes();
	PT_CHECK(returned_while_idle(before, 3000), "after the forks: RSS still %zu MiB 3 s after dropping 32 MiB",
	         rss_bytes() / MiB);
	PT_CHECK(count_threads(&purge, &full) == 2 && purge == 1, "threads after the forks: %d, purge threads %d",
	         count_threads(&purge, &full), purge);

	/* Again with the thread turned off. */
	int st = run_mode(argv, "background-off", "MBUDDY_BACKGROUND", "0", 60);
	PT_CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "MBUDDY_BACKGROUND=0 run: status 0x%x", st);

	/* The main thread leaves first; the process ends with its last thread. */
	st = run_mode(argv, "main-exits-first", NULL, NULL, 20);
	PT_CHECK(st != -1, "the process did not end 20 s after its last thread: the purge thread keeps it alive");
	PT_CHECK(st == -1 || (WIFEXITED(st) && WEXITSTATUS(st) == 0), "main-exits-first run: status 0x%x", st);
	return pt_finish();
}
