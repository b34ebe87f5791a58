/* The unit-test harness. Every program of tests/unit/ is one source file
 * that includes this header and nothing else of the harness; it links the
 * core (libmbcore.la) directly, without any preload, and tests one layer
 * or leaf of src/ (doc/design.md).
 *
 * A test is a function defined with TEST(); main() comes from here:
 *
 *	#include "config.h"
 *	#include "harness.h"
 *	#include "reclaim_type.h"
 *
 *	TEST(alias_cache)
 *	{
 *		ASSERT_EQ(mb_type_parse("cache", 5), MB_KERNRCLM);
 *	}
 *
 * Running: the tests run in the order of the file, each announced by name;
 * `./test_x NAME...` runs only those named, `./test_x --list` lists them.
 * Checks are fatal: the first that fails prints file:line, the check and,
 * for comparisons, both values, names the test and exits with status 1
 * (the allocator's state after a broken invariant is not worth going on
 * with). SKIP("why") ends the current test as skipped; a program whose
 * tests were all skipped exits with 77, Automake's "skipped".
 *
 * Checks (a and b are evaluated once):
 *	ASSERT(cond)
 *	ASSERT_EQ(a, b) ASSERT_NE ASSERT_LT ASSERT_LE ASSERT_GT ASSERT_GE
 *		integers, floating point or pointers, compared by value
 *		(-1 is less than 0u, unlike C's comparison)
 *	ASSERT_NEAR(a, b, eps)    |a - b| <= eps, in long double
 *	ASSERT_STR_EQ(a, b)       strings (NULL allowed)
 *	ASSERT_CONTAINS(s, part)  part is a substring of s
 *	ASSERT_BUDDY(b)           every invariant of mb_buddy_check() holds
 *	FAIL(fmt, ...)            an unconditional failure
 * NOTE(fmt, ...) prints a line of information under the test's name.
 *
 * Helpers for the layers: a buddy over a private region (test_buddy_new),
 * the process heap of heap.h set up and torn down without init.c
 * (test_heap_setup), the resident pages of a range (test_resident_pages),
 * and a function run in a child process with its
 * output captured (test_child_run), for code that runs once per process
 * (options) or aborts. */
#ifndef MB_HARNESS_H
#define MB_HARNESS_H

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buddy.h"
#include "heap.h"
#include "options.h"
#include "region.h"

/* ---- registration ---- */

struct test_case {
	const char *name;
	void (*fn)(void);
	int line;
};

#define TEST_MAX 256
static struct test_case test_cases[TEST_MAX];
static unsigned test_ncases;
static const char *test_program = "test";
static const char *test_current;    /* the running test's name */
static int test_in_child;           /* in a child of test_child_run() */
static jmp_buf test_skip_jmp;
static char test_skip_reason[256];

static inline void test_register(const char *name, void (*fn)(void), int line)
{
	if (test_ncases == TEST_MAX) {
		fprintf(stderr, "harness: more than %d tests in one program\n", TEST_MAX);
		exit(99);
	}
	test_cases[test_ncases++] = (struct test_case){ name, fn, line };
}

/* Defines test_NAME and registers it before main() runs. */
#define TEST(name)                                                                                 \
	static void test_##name(void);                                                             \
	__attribute__((constructor)) static void test_register_##name(void)                      \
	{                                                                                          \
		test_register(#name, test_##name, __LINE__);                                       \
	}                                                                                          \
	static void test_##name(void)

/* ---- failures ---- */

static inline void test_vmsg(const char *fmt, va_list ap)
{
	vfprintf(stderr, fmt, ap);
}

static inline void test_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void test_msg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	test_vmsg(fmt, ap);
	va_end(ap);
}

/* The end of a failed check: the test is named and the program exits.
 * _exit, not exit: in a forked child, exit would run the parent's atexit
 * handlers and flush its stdio buffers a second time. */
static inline __attribute__((noreturn)) void test_die(void)
{
	if (test_current && !test_in_child)
		fprintf(stderr, "[ FAIL ] %s\n", test_current);
	fflush(NULL);
	_exit(1);
}

static inline __attribute__((noreturn, format(printf, 3, 4))) void test_fail(const char *file, int line,
									     const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s:%d: failed: ", file, line);
	va_start(ap, fmt);
	test_vmsg(fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	test_die();
}

#define FAIL(...) test_fail(__FILE__, __LINE__, __VA_ARGS__)

#define ASSERT(cond)                                                                               \
	do {                                                                                       \
		if (!(cond))                                                                       \
			test_fail(__FILE__, __LINE__, "ASSERT(%s)", #cond);                        \
	} while (0)

/* ---- comparisons of values of any scalar type ---- */

struct test_value {
	enum { TEST_SIGNED, TEST_UNSIGNED, TEST_FLOAT, TEST_POINTER } kind;
	intmax_t i;
	uintmax_t u;
	long double f;
};

static inline struct test_value test_value_i(intmax_t v)
{
	return (struct test_value){ .kind = TEST_SIGNED, .i = v };
}
static inline struct test_value test_value_u(uintmax_t v)
{
	return (struct test_value){ .kind = TEST_UNSIGNED, .u = v };
}
static inline struct test_value test_value_f(long double v)
{
	return (struct test_value){ .kind = TEST_FLOAT, .f = v };
}
static inline struct test_value test_value_p(const volatile void *v)
{
	return (struct test_value){ .kind = TEST_POINTER, .u = (uintptr_t)v };
}

/* The value of x, whatever its scalar type (an enum is its integer type,
 * an array its address). */
#define TEST_VALUE(x)                                                                              \
	_Generic((x),                                                                              \
		_Bool: test_value_u, char: test_value_i, signed char: test_value_i,                \
		short: test_value_i, int: test_value_i, long: test_value_i, long long: test_value_i, \
		unsigned char: test_value_u, unsigned short: test_value_u, unsigned: test_value_u, \
		unsigned long: test_value_u, unsigned long long: test_value_u,                     \
		float: test_value_f, double: test_value_f, long double: test_value_f,              \
		default: test_value_p)(x)

static inline long double test_value_ld(struct test_value v)
{
	return v.kind == TEST_FLOAT ? v.f : v.kind == TEST_SIGNED ? (long double)v.i : (long double)v.u;
}

/* -1, 0 or 1 as a is below, equal to or above b, by mathematical value. */
static inline int test_compare(struct test_value a, struct test_value b)
{
	if (a.kind == TEST_FLOAT || b.kind == TEST_FLOAT) {
		long double x = test_value_ld(a), y = test_value_ld(b);
		return x < y ? -1 : x > y ? 1 : x == y ? 0 : 2; /* 2: a NaN, equal to nothing */
	}
	if (a.kind == TEST_SIGNED && b.kind == TEST_SIGNED)
		return a.i < b.i ? -1 : a.i > b.i;
	if (a.kind == TEST_SIGNED && a.i < 0)
		return -1;
	if (b.kind == TEST_SIGNED && b.i < 0)
		return 1;
	uintmax_t x = a.kind == TEST_SIGNED ? (uintmax_t)a.i : a.u;
	uintmax_t y = b.kind == TEST_SIGNED ? (uintmax_t)b.i : b.u;
	return x < y ? -1 : x > y;
}

static inline const char *test_value_str(struct test_value v, char *buf, size_t len)
{
	switch (v.kind) {
	case TEST_SIGNED:
		if (v.i > 9 || v.i < -9)
			snprintf(buf, len, "%jd (0x%jx)", v.i, (uintmax_t)v.i);
		else
			snprintf(buf, len, "%jd", v.i);
		break;
	case TEST_UNSIGNED:
		if (v.u > 9)
			snprintf(buf, len, "%ju (0x%jx)", v.u, v.u);
		else
			snprintf(buf, len, "%ju", v.u);
		break;
	case TEST_FLOAT:
		snprintf(buf, len, "%.17Lg", v.f);
		break;
	default:
		snprintf(buf, len, "%p", (void *)(uintptr_t)v.u);
	}
	return buf;
}

static inline __attribute__((noreturn)) void test_fail_cmp(const char *file, int line, const char *check,
							    const char *a, const char *b, struct test_value va,
							    struct test_value vb)
{
	char x[96], y[96];
	fprintf(stderr, "%s:%d: failed: %s(%s, %s)\n", file, line, check, a, b);
	fprintf(stderr, "    %s = %s\n", a, test_value_str(va, x, sizeof x));
	fprintf(stderr, "    %s = %s\n", b, test_value_str(vb, y, sizeof y));
	test_die();
}

/* test_compare() is -1, 0 or 1, or 2 when a NaN makes them unordered. */
#define TEST_CMP_(check, a, b, ok)                                                                 \
	do {                                                                                       \
		struct test_value a_ = TEST_VALUE(a), b_ = TEST_VALUE(b);                          \
		int c_ = test_compare(a_, b_);                                                     \
		if (!(ok))                                                                         \
			test_fail_cmp(__FILE__, __LINE__, check, #a, #b, a_, b_);                  \
	} while (0)

#define ASSERT_EQ(a, b) TEST_CMP_("ASSERT_EQ", a, b, c_ == 0)
#define ASSERT_NE(a, b) TEST_CMP_("ASSERT_NE", a, b, c_ != 0)
#define ASSERT_LT(a, b) TEST_CMP_("ASSERT_LT", a, b, c_ == -1)
#define ASSERT_LE(a, b) TEST_CMP_("ASSERT_LE", a, b, c_ == -1 || c_ == 0)
#define ASSERT_GT(a, b) TEST_CMP_("ASSERT_GT", a, b, c_ == 1)
#define ASSERT_GE(a, b) TEST_CMP_("ASSERT_GE", a, b, c_ == 1 || c_ == 0)

#define ASSERT_NEAR(a, b, eps)                                                                     \
	do {                                                                                       \
		long double a_ = (a), b_ = (b), e_ = (eps);                                        \
		if (!(a_ - b_ <= e_ && b_ - a_ <= e_))                                             \
			test_fail(__FILE__, __LINE__, "ASSERT_NEAR(%s, %s, %s)\n    %s = %.17Lg\n    %s = %.17Lg", \
				  #a, #b, #eps, #a, a_, #b, b_);                                    \
	} while (0)

#define ASSERT_STR_EQ(a, b)                                                                        \
	do {                                                                                       \
		const char *a_ = (a), *b_ = (b);                                                   \
		if (a_ != b_ && (!a_ || !b_ || strcmp(a_, b_) != 0))                               \
			test_fail(__FILE__, __LINE__, "ASSERT_STR_EQ(%s, %s)\n    %s = %s%s%s\n    %s = %s%s%s", \
				  #a, #b, #a, a_ ? "\"" : "", a_ ? a_ : "NULL", a_ ? "\"" : "", #b,       \
				  b_ ? "\"" : "", b_ ? b_ : "NULL", b_ ? "\"" : "");                    \
	} while (0)

#define ASSERT_CONTAINS(s, part)                                                                   \
	do {                                                                                       \
		const char *s_ = (s), *p_ = (part);                                                \
		if (!s_ || !strstr(s_, p_))                                                        \
			test_fail(__FILE__, __LINE__, "ASSERT_CONTAINS(%s, %s)\n    %s = \"%s\"\n    %s = \"%s\"", \
				  #s, #part, #s, s_ ? s_ : "(NULL)", #part, p_);                        \
	} while (0)

/* ---- skipping and notes ---- */

static inline __attribute__((noreturn, format(printf, 1, 2))) void test_skip(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(test_skip_reason, sizeof test_skip_reason, fmt, ap);
	va_end(ap);
	if (test_in_child) {
		fprintf(stderr, "skipped in a child: %s\n", test_skip_reason);
		fflush(NULL);
		_exit(77);
	}
	longjmp(test_skip_jmp, 1);
}

#define SKIP(...) test_skip(__VA_ARGS__)

static inline __attribute__((format(printf, 1, 2))) void test_note(const char *fmt, ...)
{
	va_list ap;
	fputs("         ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

#define NOTE(...) test_note(__VA_ARGS__)

/* ---- a child process with its output captured ---- */

struct test_child {
	int status;       /* exit status; 128 + the signal if one killed it */
	size_t len;       /* bytes in out (the rest was dropped) */
	char out[16384];  /* what it wrote on stdout and stderr, NUL-terminated */
};

/* Run fn(arg) in a child process, its stdout and stderr captured into
 * c->out; a failed check in fn ends the child with status 1 and its
 * message in c->out. Returns c->status. */
static inline int test_child_run(struct test_child *c, void (*fn)(void *), void *arg)
{
	int fds[2];
	if (pipe(fds) != 0)
		FAIL("pipe: %s", strerror(errno));
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], STDOUT_FILENO);
		dup2(fds[1], STDERR_FILENO);
		close(fds[1]);
		/* A child may abort on purpose: no core file. */
		struct rlimit no_core = { 0, 0 };
		setrlimit(RLIMIT_CORE, &no_core);
		test_in_child = 1;
		fn(arg);
		fflush(NULL);
		_exit(0);
	}
	close(fds[1]);
	c->len = 0;
	for (;;) {
		char buf[4096];
		ssize_t n = read(fds[0], buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		size_t room = sizeof c->out - 1 - c->len, k = (size_t)n < room ? (size_t)n : room;
		memcpy(c->out + c->len, buf, k);
		c->len += k;
	}
	c->out[c->len] = 0;
	close(fds[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			FAIL("waitpid: %s", strerror(errno));
	c->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return c->status;
}

/* The child ended with status 0; else its output is shown. */
#define ASSERT_CHILD_OK(c)                                                                         \
	do {                                                                                       \
		if ((c)->status != 0)                                                              \
			test_fail(__FILE__, __LINE__, "the child exited with status %d; its output:\n%s", \
				  (c)->status, (c)->out);                                           \
	} while (0)

/* Lines of text that start with prefix. */
static inline unsigned test_count_lines(const char *text, const char *prefix)
{
	unsigned n = 0;
	size_t len = strlen(prefix);
	for (const char *l = text; *l;) {
		n += strncmp(l, prefix, len) == 0;
		const char *nl = strchr(l, '\n');
		if (!nl)
			break;
		l = nl + 1;
	}
	return n;
}

/* ---- the buddy and the heap ---- */

static inline void test_buddy_check_at(const struct mb_buddy *b, const char *file, int line)
{
	char err[512];
	if (mb_buddy_check(b, err, sizeof err))
		test_fail(file, line, "ASSERT_BUDDY: %s", err);
}
#define ASSERT_BUDDY(b) test_buddy_check_at((b), __FILE__, __LINE__)

/* A buddy of `npb` pageblocks of order max_order-1 over its own mapping. */
static inline void test_buddy_new(struct mb_buddy *b, size_t npb, unsigned max_order)
{
	size_t pb_bytes = ((size_t)1 << (max_order - 1)) << MB_PAGE_SHIFT;
	void *base = mb_os_reserve(npb * pb_bytes, pb_bytes);
	ASSERT(base != NULL);
	ASSERT_EQ(mb_buddy_init(b, base, npb * pb_bytes, max_order), 0);
	ASSERT_BUDDY(b);
}

static inline void test_buddy_free_region(struct mb_buddy *b)
{
	void *base = (void *)b->base;
	size_t size = b->npages << MB_PAGE_SHIFT;
	mb_buddy_destroy(b);
	mb_os_unreserve(base, size);
}

/* Give back the heap of test_heap_setup(), if there is one. */
static inline void test_heap_teardown(void)
{
	if (!mb_heap.region_bytes)
		return;
	test_buddy_free_region(&mb_heap.buddy);
	/* Everything but the lock, which comes first and stays as it is. */
	_Static_assert(offsetof(struct mb_heap, lock) == 0, "the heap's lock is not its first field");
	size_t keep = offsetof(struct mb_heap, buddy);
	memset((char *)&mb_heap + keep, 0, sizeof mb_heap - keep);
}

/* The process heap (heap.h) of `bytes` with pageblocks of order
 * max_order-1, set up as init.c does it but without the rest of the
 * process (no thread caches, no classification, no purge thread: memory
 * goes back in the bounded steps of the slow paths), decay_ms as the
 * decay time and `hugepages` as MBUDDY_HUGEPAGES. A heap set up before is
 * torn down first. */
static inline void test_heap_setup_huge(size_t bytes, unsigned max_order, uint64_t decay_ms, int hugepages)
{
	test_heap_teardown();
	mb_opt.heap_size = bytes;
	mb_opt.max_order = max_order;
	mb_opt.decay_ms = decay_ms;
	mb_opt.background = 0;
	mb_opt.hugepages = hugepages;
	ASSERT_EQ(mb_heap_init(), 0);
	ASSERT_EQ(mb_heap.region_bytes, bytes);
	ASSERT_BUDDY(&mb_heap.buddy);
}

/* The same without huge pages: what a layer does page by page. */
static inline void test_heap_setup(size_t bytes, unsigned max_order, uint64_t decay_ms)
{
	test_heap_setup_huge(bytes, max_order, decay_ms, MB_HUGE_NEVER);
}

/* Pages of [p, p + len) (whole pages, at most 64 MiB) that the kernel
 * holds resident, by mincore(2). */
static inline size_t test_resident_pages(const void *p, size_t len)
{
	static unsigned char v[((size_t)64 << 20) / MB_PAGE_SIZE];
	ASSERT_LE(len / MB_PAGE_SIZE, sizeof v);
	ASSERT_EQ(mincore((void *)p, len, v), 0);
	size_t n = 0;
	for (size_t i = 0; i < len / MB_PAGE_SIZE; i++)
		n += v[i] & 1;
	return n;
}

/* ---- main ---- */

static inline double test_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static inline int test_by_line(const void *a, const void *b)
{
	return ((const struct test_case *)a)->line - ((const struct test_case *)b)->line;
}

static inline int test_selected(const struct test_case *t, int argc, char **argv)
{
	if (argc < 2)
		return 1;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], t->name) == 0)
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	const char *slash = strrchr(argv[0], '/');
	test_program = slash ? slash + 1 : argv[0];
	/* Constructors run in no promised order: the file's order is. */
	qsort(test_cases, test_ncases, sizeof test_cases[0], test_by_line);
	if (argc == 2 && strcmp(argv[1], "--list") == 0) {
		for (unsigned i = 0; i < test_ncases; i++)
			printf("%s\n", test_cases[i].name);
		return 0;
	}
	for (int i = 1; i < argc; i++) {
		unsigned k = 0;
		while (k < test_ncases && strcmp(argv[i], test_cases[k].name) != 0)
			k++;
		if (k == test_ncases) {
			fprintf(stderr, "%s: no test named %s (--list lists them)\n", test_program, argv[i]);
			return 99;
		}
	}
	/* volatile: kept across the longjmp of a skip. */
	volatile unsigned passed = 0, skipped = 0;
	for (volatile unsigned i = 0; i < test_ncases; i++) {
		const struct test_case *t = &test_cases[i];
		if (!test_selected(t, argc, argv))
			continue;
		test_current = t->name;
		fprintf(stderr, "[ RUN  ] %s\n", t->name);
		double t0 = test_now_ms();
		if (setjmp(test_skip_jmp) == 0) {
			t->fn();
			fprintf(stderr, "[   OK ] %s (%.0f ms)\n", t->name, test_now_ms() - t0);
			passed++;
		} else {
			fprintf(stderr, "[ SKIP ] %s: %s\n", t->name, test_skip_reason);
			skipped++;
		}
		test_current = NULL;
	}
	fprintf(stderr, "%s: %u passed, %u skipped\n", test_program, passed, skipped);
	if (passed + skipped == 0) {
		fprintf(stderr, "%s: no test ran\n", test_program);
		return 99;
	}
	return passed == 0 ? 77 : 0;
}

#endif
