/* Support for the tests in tests/preload/: programs linked normally against
 * libc and run by run-preloaded.sh under LD_PRELOAD=libmbuddy.so.
 *
 * They never link against libmbuddy: everything libmbuddy-specific is found
 * with dlsym(RTLD_DEFAULT, ...), which is also how a test proves that it
 * really runs under libmbuddy and not under glibc's malloc.
 *
 * Exit statuses follow the Automake protocol: 0 pass, 1 fail, 77 skip. */
#ifndef MB_PTEST_H
#define MB_PTEST_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PT_SKIP 77

/* 1 once pt_init() found libmbuddy in the process. */
static int pt_mbuddy;
/* Failed non-fatal checks. */
static volatile int pt_failures;
static const char *pt_name = "ptest";

/* Messages go through write(2) on one line: safe in forked children, in
 * threads and while the heap is exhausted (no stdio buffer, no malloc). */
static inline void pt_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static inline void pt_msg(const char *fmt, ...)
{
	char buf[768];
	int saved = errno;
	int n = snprintf(buf, sizeof buf, "%s: ", pt_name);
	va_list ap;
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof buf - 2)
		n = (int)sizeof buf - 2;
	buf[n++] = '\n';
	ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
	(void)w;
	errno = saved;
}

/* A failed check that lets the test go on, so one run reports them all. */
#define PT_CHECK(cond, ...)                                                    \
	do {                                                                   \
		if (!(cond)) {                                                 \
			pt_failures++;                                         \
			pt_msg("FAIL %s:%d: %s", __FILE__, __LINE__, #cond);   \
			pt_msg("     " __VA_ARGS__);                           \
		}                                                              \
	} while (0)

/* A failed check after which going on makes no sense. */
#define PT_REQUIRE(cond, ...)                                                  \
	do {                                                                   \
		if (!(cond)) {                                                 \
			pt_msg("FATAL %s:%d: %s", __FILE__, __LINE__, #cond);  \
			pt_msg("     " __VA_ARGS__);                           \
			_exit(1);                                              \
		}                                                              \
	} while (0)

/* PT_RUN(fn): run one test function of the program, then say how it went
 * and how long it took. With pt_only set (glibc_api takes it from its
 * argument), only the function of that name runs. */
static const char *pt_only __attribute__((unused));

#include <time.h>

static inline double pt_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define PT_RUN(fn)                                                             \
	do {                                                                   \
		if (pt_only && strcmp(pt_only, #fn) != 0)                      \
			break;                                                 \
		double t0_ = pt_now_s();                                       \
		int f0_ = pt_failures;                                         \
		fn();                                                          \
		pt_msg("%-24s %s (%.2f s)", #fn, pt_failures == f0_ ? "ok" : "FAILED", pt_now_s() - t0_); \
	} while (0)

/* Hide a value from the optimiser, so it cannot fold allocator calls whose
 * arguments it knows (malloc(SIZE_MAX), free(&local)) or drop a malloc/free
 * pair whose result is not used. */
static inline void *pt_hide(void *p)
{
	__asm__ volatile("" : "+r"(p) : : "memory");
	return p;
}

static inline size_t pt_hide_size(size_t n)
{
	__asm__ volatile("" : "+r"(n));
	return n;
}

static inline void *pt_sym(const char *name)
{
	return dlsym(RTLD_DEFAULT, name);
}

/* Find libmbuddy in the process: its mbuddy_set_thread_type must resolve.
 * Without it the test fails, unless MBUDDY_TEST_ALLOW_OTHER=1 (to run the
 * suite against another allocator), where checks of libmbuddy-specific
 * behaviour are skipped. */
static inline void pt_init(const char *name)
{
	pt_name = name;
	void *probe = pt_sym("mbuddy_set_thread_type");
	if (probe) {
		pt_mbuddy = 1;
		return;
	}
	const char *allow = getenv("MBUDDY_TEST_ALLOW_OTHER");
	if (allow && strcmp(allow, "1") == 0) {
		pt_msg("note: libmbuddy is not loaded (LD_PRELOAD=%s); running against the default allocator",
		       getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "");
		return;
	}
	pt_msg("FAIL: not running under libmbuddy: dlsym(RTLD_DEFAULT, \"mbuddy_set_thread_type\") is NULL "
	       "(LD_PRELOAD=%s; set MBUDDY_TEST_ALLOW_OTHER=1 to test another allocator)",
	       getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "(unset)");
	exit(1);
}

/* Check that each named symbol, as the program resolves it, is defined in
 * the same object as mbuddy_set_thread_type. Returns the failures. */
static inline int pt_check_interposed(const char *const *names)
{
	Dl_info lib, info;
	int bad = 0;
	if (!pt_mbuddy)
		return 0;
	void *probe = pt_sym("mbuddy_set_thread_type");
	if (!probe || !dladdr(probe, &lib)) {
		pt_msg("FAIL: dladdr(mbuddy_set_thread_type) failed");
		pt_failures++;
		return 1;
	}
	for (; *names; names++) {
		void *s = pt_sym(*names);
		if (!s) {
			pt_msg("FAIL: %s is not defined anywhere in the process", *names);
			bad++;
			continue;
		}
		if (!dladdr(s, &info) || info.dli_fbase != lib.dli_fbase) {
			pt_msg("FAIL: %s resolves to %s, not to libmbuddy (%s)", *names,
			       info.dli_fname ? info.dli_fname : "?", lib.dli_fname);
			bad++;
		}
	}
	pt_failures += bad;
	return bad;
}

/* ---- random numbers (xorshift64*), one state per thread ---- */

static inline uint64_t pt_rand(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [lo, hi]. */
static inline size_t pt_rand_range(uint64_t *s, size_t lo, size_t hi)
{
	return lo + (size_t)(pt_rand(s) % (hi - lo + 1));
}

/* Roughly log-uniform in [lo, hi]: as many small sizes as big ones. */
static inline size_t pt_rand_log(uint64_t *s, size_t lo, size_t hi)
{
	unsigned bits_lo = 63 - (unsigned)__builtin_clzll(lo | 1);
	unsigned bits_hi = 63 - (unsigned)__builtin_clzll(hi | 1);
	unsigned b = bits_lo + (unsigned)(pt_rand(s) % (bits_hi - bits_lo + 1));
	size_t base = (size_t)1 << b;
	size_t n = base + (size_t)(pt_rand(s) % base);
	if (n < lo)
		n = lo;
	if (n > hi)
		n = hi;
	return n;
}

/* ---- content patterns ----
 * Byte i of a block with seed s is byte (i % 8) of pt_word(s, i / 8), so the
 * pattern depends on the position: a copy to the wrong offset, a lost tail
 * or memory shared by two blocks all show up. */

static inline uint64_t pt_word(uint64_t seed, size_t k)
{
	uint64_t z = (seed ^ (uint64_t)k) * 0x9E3779B97F4A7C15ULL;
	return z ^ (z >> 32);
}

static inline unsigned char pt_byte(uint64_t seed, size_t i)
{
	return (unsigned char)(pt_word(seed, i / 8) >> ((i % 8) * 8));
}

/* Write the pattern into bytes [from, to) of block p. */
static inline void pt_fill_range(void *p, size_t from, size_t to, uint64_t seed)
{
	unsigned char *c = (unsigned char *)p;
	size_t i = from;
	while (i < to && (i % 8))
		c[i] = pt_byte(seed, i), i++;
	for (; i + 8 <= to; i += 8) {
		uint64_t w = pt_word(seed, i / 8);
		memcpy(c + i, &w, 8);
	}
	for (; i < to; i++)
		c[i] = pt_byte(seed, i);
}

/* The first offset in [from, to) that does not hold the pattern, or SIZE_MAX. */
static inline size_t pt_check_range(const void *p, size_t from, size_t to, uint64_t seed)
{
	const unsigned char *c = (const unsigned char *)p;
	size_t i = from;
	for (; i < to && (i % 8); i++)
		if (c[i] != pt_byte(seed, i))
			return i;
	for (; i + 8 <= to; i += 8) {
		uint64_t w = pt_word(seed, i / 8), v;
		memcpy(&v, c + i, 8);
		if (v != w) {
			for (size_t j = i; j < i + 8; j++)
				if (c[j] != pt_byte(seed, j))
					return j;
		}
	}
	for (; i < to; i++)
		if (c[i] != pt_byte(seed, i))
			return i;
	return SIZE_MAX;
}

static inline void pt_fill(void *p, size_t n, uint64_t seed)
{
	pt_fill_range(p, 0, n, seed);
}

static inline int pt_intact(const void *p, size_t n, uint64_t seed)
{
	return pt_check_range(p, 0, n, seed) == SIZE_MAX;
}

/* Index of the first non-zero byte of [p, p+n), or SIZE_MAX. */
static inline size_t pt_first_nonzero(const void *p, size_t n)
{
	const unsigned char *c = (const unsigned char *)p;
	size_t i = 0;
	for (; i < n && ((uintptr_t)(c + i) % 8); i++)
		if (c[i])
			return i;
	for (; i + 8 <= n; i += 8) {
		uint64_t v;
		memcpy(&v, c + i, 8);
		if (v)
			break;
	}
	for (; i < n; i++)
		if (c[i])
			return i;
	return SIZE_MAX;
}

/* A watchdog: a test that hangs (a deadlock) fails instead of blocking the
 * suite. The handler only uses async-signal-safe calls. */
#include <signal.h>

static inline void pt_watchdog_fired(int sig)
{
	static const char m[] = "FAIL: watchdog: the test did not finish in time (deadlock?)\n";
	ssize_t w = write(STDERR_FILENO, m, sizeof m - 1);
	(void)w;
	(void)sig;
	_exit(1);
}

static inline void pt_watchdog(unsigned seconds)
{
	signal(SIGALRM, pt_watchdog_fired);
	alarm(seconds);
}

static inline int pt_finish(void)
{
	if (pt_failures) {
		pt_msg("%d check(s) failed", pt_failures);
		return 1;
	}
	pt_msg("PASS%s", pt_mbuddy ? "" : " (not under libmbuddy)");
	return 0;
}

#endif
