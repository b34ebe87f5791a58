/* Helpers shared by the benchmark workloads. Header-only so that each
 * workload stays a single standalone program (cc -O2 prog.c -o prog).
 * Everything here avoids malloc: the allocator under test should see only
 * the workload's own requests. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <fcntl.h>
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
