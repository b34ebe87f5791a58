/* Helpers shared by the benchmark workloads. Header-only so that each
 * workload stays a single standalone program (cc -O2 prog.c -o prog).
 * Everything here avoids malloc: the allocator under test should see only
 * the workload's own requests. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A function that must stay a distinct call site of malloc, as a call-site
 * classifier sees it: not inlined, cloned, or merged with an identical
 * function (GCC's identical-code folding turned three such wrappers into
 * one address). Not static, so that with -rdynamic dladdr() can name it,
 * e.g. in MBUDDY_RULES. */
#if defined(__GNUC__) && !defined(__clang__)
#define CALL_SITE __attribute__((noipa))
#else
#define CALL_SITE __attribute__((noinline))
#endif

/* Report an allocation that must not fail and stop: a benchmark run with a
 * missing allocation would measure something else. */
static inline void oom(const char *where, size_t size)
{
	fprintf(stderr, "FATAL: allocation of %zu bytes failed in %s\n", size, where);
	exit(2);
}

/* xorshift64*: fast, deterministic, good enough for workload shapes. */
struct rng {
	uint64_t s;
};

static inline uint64_t rng_next(struct rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [0, n). The modulo bias is irrelevant at these ranges. */
static inline uint64_t rng_below(struct rng *r, uint64_t n)
{
	return rng_next(r) % n;
}

/* Roughly log-uniform size in [lo, hi] (powers of two): programs allocate
 * many more small objects than big ones, and every octave gets equal
 * weight. */
static inline size_t rng_logsize(struct rng *r, size_t lo, size_t hi)
{
	unsigned lo_sh = 0, hi_sh = 0;
	while (((size_t)1 << (lo_sh + 1)) <= lo)
		lo_sh++;
	while (((size_t)1 << hi_sh) < hi)
		hi_sh++;
	unsigned sh = lo_sh + (unsigned)rng_below(r, hi_sh - lo_sh);
	size_t s = ((size_t)1 << sh) + rng_below(r, (size_t)1 << sh);
	if (s < lo)
		s = lo;
	if (s > hi)
		s = hi;
	return s;
}

static inline double now_sec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Resident set size in bytes, from /proc/self/statm. Plain open/read on a
 * stack buffer: stdio would allocate, and the measurement must not. */
static inline size_t rss_bytes(void)
{
	char buf[128];
	int fd = open("/proc/self/statm", O_RDONLY);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	unsigned long size_pages = 0, rss_pages = 0;
	if (sscanf(buf, "%lu %lu", &size_pages, &rss_pages) != 2)
		return 0;
	return (size_t)rss_pages * (size_t)sysconf(_SC_PAGESIZE);
}

static inline void sleep_sec(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* Write a byte in every page of the object (and its first word), so that
 * what it occupies is resident and counted in RSS, at a cost that does not
 * grow with the object's bytes as a full memset would. */
static inline void touch_pages(void *p, size_t n, uint64_t tag)
{
	unsigned char *c = p;
	if (n >= sizeof tag)
		memcpy(c, &tag, sizeof tag);
	for (size_t off = 4096; off < n; off += 4096)
		c[off] = (unsigned char)tag;
	if (n)
		c[n - 1] = (unsigned char)tag;
}

/* Start a thread or stop the benchmark: a missing thread would measure
 * something else. */
static inline pthread_t start_thread(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	int rc = pthread_create(&t, NULL, fn, arg);
	if (rc) {
		fprintf(stderr, "FATAL: pthread_create: %s\n", strerror(rc));
		exit(2);
	}
	return t;
}

/* Wait for the other side of a queue: spin briefly, then yield, as two
 * threads on two cores usually both run but the machine may be shared. */
static inline void backoff(unsigned *spins)
{
	if (++*spins < 64)
		__builtin_ia32_pause();
	else
		sched_yield();
}

/* Timed workloads: the main thread sleeps for the duration, then raises
 * the flag that every worker polls once per operation. */
static volatile int bench_stop;

static inline int stop_requested(void)
{
	return __atomic_load_n(&bench_stop, __ATOMIC_RELAXED);
}

static inline void run_for(double seconds)
{
	sleep_sec(seconds);
	__atomic_store_n(&bench_stop, 1, __ATOMIC_RELAXED);
}

/* Start n threads, fn(args + i * stride) each; with seconds > 0 raise
 * the stop flag after that long; wait for them all. Returns the elapsed
 * seconds. */
#define MAX_RUN_THREADS 256
static inline double run_threads(int n, void *(*fn)(void *), void *args, size_t stride,
				 double seconds)
{
	pthread_t th[MAX_RUN_THREADS];
	double t0 = now_sec();
	for (int i = 0; i < n; i++)
		th[i] = start_thread(fn, (char *)args + (size_t)i * stride);
	if (seconds > 0)
		run_for(seconds);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	return now_sec() - t0;
}

/* A positive thread count argument, at most max. */
static inline int parse_threads(const char *s, int max)
{
	int t = atoi(s);
	if (t < 1 || t > max) {
		fprintf(stderr, "THREADS must be 1..%d\n", max);
		exit(1);
	}
	return t;
}

/* Parse a positive integer argument with an optional K/M/G suffix. */
static inline size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	switch (*end) {
	case 'k': case 'K': v <<= 10; break;
	case 'm': case 'M': v <<= 20; break;
	case 'g': case 'G': v <<= 30; break;
	default: break;
	}
	return (size_t)v;
}

#endif
