/* Death tests: each case performs one misuse of the allocator, after
 * printing on stdout the address it is about to pass. libmbuddy must write
 * "libmbuddy: <function>(): <what>: <address>" to stderr and abort; the
 * driver misuse.test checks all of that. If the misuse goes unnoticed the
 * program says so and exits with status 3.
 *
 *   misuse CASE      run one case
 *   misuse --list    print the cases, one per line:
 *                    name, function, pattern for the kind of error
 */
#define _GNU_SOURCE 1
#include "ptest.h"

#include <malloc.h>
#include <pthread.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static char global_buf[256];

/* Print the address the misuse is about, flushed before the crash. */
static void *announce(void *p)
{
	printf("%p\n", p);
	fflush(stdout);
	return pt_hide(p);
}

static void not_detected(const char *what)
{
	fprintf(stderr, "misuse: %s was NOT detected\n", what);
	exit(3);
}

/* ---- the cases ---- */

static void double_free_at_once(void)
{
	/* The first free sets the object's free bit in a slab this thread
	 * owns. */
	void *p = malloc(48);
	free(p);
	free(announce(p));
	not_detected("double free of a small object just freed");
}

static void double_free_small(void)
{
	/* The first free's object is one of many freed in its slab, which
	 * stays alive: a neighbour is kept. */
	enum { N = 2000 };
	static void *others[N];
	void *p = malloc(48);
	void *neighbour = malloc(48); /* keeps p's slab alive */
	for (int i = 0; i < N; i++)
		others[i] = malloc(48);
	free(p);
	for (int i = 0; i < N; i++)
		free(others[i]);
	free(announce(p));
	(void)neighbour;
	not_detected("double free of a small object returned to its slab");
}

static void *free_arg(void *arg)
{
	free(arg);
	return NULL;
}

/* Free p from another thread, which does not own p's slab. */
static void free_in_thread(void *p)
{
	pthread_t t;
	if (pthread_create(&t, NULL, free_arg, p) != 0)
		exit(4);
	pthread_join(t, NULL);
}

static void double_free_remote_then_owner(void)
{
	/* Another thread frees it into the slab's remote bits; then the
	 * owner frees it again. A neighbour keeps the slab in use. */
	void *p = malloc(80), *neighbour = malloc(80);
	free_in_thread(p);
	free(announce(p));
	(void)neighbour;
	not_detected("double free by the owner of an object another thread freed");
}

static void double_free_owner_then_remote(void)
{
	void *p = malloc(80), *neighbour = malloc(80);
	free(p);
	free_in_thread(announce(p));
	(void)neighbour;
	not_detected("double free by another thread of an object its owner freed");
}

static void double_free_two_threads(void)
{
	void *p = malloc(80), *neighbour = malloc(80);
	free_in_thread(p);
	free_in_thread(announce(p));
	(void)neighbour;
	not_detected("double free by two threads, neither the owner");
}

static void *alloc_and_free_in_thread(void *arg)
{
	void **out = arg;
	/* Two objects of one slab of this thread: the second keeps the
	 * slab (and the first's bit) alive after the thread exits. */
	out[0] = malloc(100);
	out[1] = malloc(100);
	free(out[0]);
	return NULL; /* its slab is abandoned at thread exit */
}

static void double_free_other_thread(void)
{
	void *p[2] = { NULL, NULL };
	pthread_t t;
	if (pthread_create(&t, NULL, alloc_and_free_in_thread, p) != 0)
		exit(4);
	pthread_join(t, NULL);
	free(announce(p[0]));
	not_detected("double free of an object freed by a thread that exited");
}

static void double_free_medium(void)
{
	void *p = malloc(64 * KiB);
	free(p);
	free(announce(p));
	not_detected("double free of a 64 KiB block");
}

static void double_free_large(void)
{
	void *p = malloc(8 * MiB);
	memset(p, 1, 4096);
	free(p);
	free(announce(p));
	not_detected("double free of an 8 MiB block");
}

/* 16-32 KiB: page runs that the freeing thread keeps in its cache. */
static void double_free_run(void)
{
	void *p = malloc(24 * KiB);
	free(p);
	free(announce(p));
	not_detected("double free of a cached 24 KiB run");
}

static void realloc_freed_run(void)
{
	void *p = malloc(20 * KiB);
	free(p);
	void *q = realloc(announce(p), 28 * KiB);
	(void)q;
	not_detected("realloc of a freed, cached 20 KiB run");
}

static void double_delete(void)
{
	/* Through the C++ operators, found by name. */
	void *(*op_new)(size_t) = (void *(*)(size_t))pt_sym("_Znwm");
	void (*op_delete)(void *) = (void (*)(void *))pt_sym("_ZdlPv");
	if (!op_new || !op_delete)
		exit(4);
	void *p = op_new(40);
	op_delete(p);
	op_delete(announce(p));
	not_detected("double operator delete");
}

static void interior_small(void)
{
	unsigned char *p = malloc(64);
	free(announce(p + 16));
	not_detected("free of a pointer inside a small object");
}

static void interior_large(void)
{
	unsigned char *p = malloc(MiB);
	free(announce(p + 8192));
	not_detected("free of a pointer inside a large block (page boundary)");
}

static void interior_large_offset(void)
{
	unsigned char *p = malloc(MiB);
	free(announce(p + 16));
	not_detected("free of a pointer inside a large block's first page");
}

static void free_stack(void)
{
	char buf[64];
	memset(buf, 0, sizeof buf);
	free(announce(buf));
	not_detected("free of a stack address");
}

static void free_global(void)
{
	free(announce(global_buf));
	not_detected("free of a global");
}

static void realloc_freed_small(void)
{
	void *p = malloc(100);
	free(p);
	void *q = realloc(announce(p), 200);
	(void)q;
	not_detected("realloc of a freed small object");
}

static void realloc_freed_large(void)
{
	void *p = malloc(2 * MiB);
	free(p);
	void *q = realloc(announce(p), 3 * MiB);
	(void)q;
	not_detected("realloc of a freed large block");
}

static void usable_size_freed_small(void)
{
	void *p = malloc(100);
	free(p);
	size_t n = malloc_usable_size(announce(p));
	(void)n;
	not_detected("malloc_usable_size of a freed small object");
}

static void usable_size_freed_large(void)
{
	void *p = malloc(3 * MiB);
	free(p);
	size_t n = malloc_usable_size(announce(p));
	(void)n;
	not_detected("malloc_usable_size of a freed large block");
}

/* C23's sized frees: a size the object never had, an alignment it does
 * not have, and a double free. Looked up at run time: a C library before
 * glibc 2.43 has none. */
static void *sym_or_exit(const char *name)
{
	void *f = pt_sym(name);
	if (!f) {
		fprintf(stderr, "misuse: %s is not defined in this process\n", name);
		exit(3);
	}
	return f;
}

static void free_sized_too_large(void)
{
	void (*fs)(void *, size_t) = (void (*)(void *, size_t))sym_or_exit("free_sized");
	void *p = malloc(100);
	fs(announce(p), 4096);
	not_detected("free_sized with a size larger than the object");
}

static void free_sized_double(void)
{
	void (*fs)(void *, size_t) = (void (*)(void *, size_t))sym_or_exit("free_sized");
	void *p = malloc(3 * MiB);
	fs(p, 3 * MiB);
	fs(announce(p), 3 * MiB);
	not_detected("free_sized of a freed object");
}

static void free_sized_double_small(void)
{
	/* The first free_sized puts the object in the thread cache, as free
	 * does. */
	void (*fs)(void *, size_t) = (void (*)(void *, size_t))sym_or_exit("free_sized");
	void *p = malloc(40);
	fs(p, 40);
	fs(announce(p), 40);
	not_detected("free_sized of a small object in the thread cache");
}

/* cfree and glibc's internal __libc_free take the general path, which
 * puts an object in the thread cache too: a second free of it is caught
 * there as well. */
static void double_free_by(const char *name, const char *what)
{
	void (*f)(void *) = (void (*)(void *))sym_or_exit(name);
	void *p = malloc(48);
	f(p);
	f(announce(p));
	not_detected(what);
}

static void cfree_double(void)
{
	double_free_by("cfree", "double cfree of a small object");
}

static void libc_free_double(void)
{
	double_free_by("__libc_free", "double __libc_free of a small object");
}

static void free_aligned_sized_misaligned(void)
{
	void (*fas)(void *, size_t, size_t) = (void (*)(void *, size_t, size_t))sym_or_exit("free_aligned_sized");
	char *p = aligned_alloc(64, 64);
	/* The smallest power of two p is not aligned to. */
	size_t a = 128;
	while ((uintptr_t)p & (a - 1) ? 0 : (a <<= 1))
		;
	fas(announce(p), a, 64);
	not_detected("free_aligned_sized with an alignment the object does not have");
}

struct misuse_case {
	const char *name;
	void (*run)(void);
	const char *function; /* as libmbuddy names it, without "()" */
	const char *kind;     /* extended regex for the kind of error */
};

static const struct misuse_case cases[] = {
	{ "double-free-at-once", double_free_at_once, "free", "double free" },
	{ "double-free-small", double_free_small, "free", "double free" },
	{ "double-free-remote-then-owner", double_free_remote_then_owner, "free", "double free" },
	{ "double-free-owner-then-remote", double_free_owner_then_remote, "free", "double free" },
	{ "double-free-two-threads", double_free_two_threads, "free", "double free" },
	{ "double-free-thread-exit", double_free_other_thread, "free", "double free" },
	{ "double-free-medium", double_free_medium, "free", "double free" },
	{ "double-free-large", double_free_large, "free", "double free" },
	{ "double-free-run", double_free_run, "free", "double free" },
	{ "double-delete", double_delete, "operator delete", "double free" },
	{ "interior-small", interior_small, "free", "invalid pointer" },
	{ "interior-large", interior_large, "free", "invalid pointer" },
	{ "interior-large-offset", interior_large_offset, "free", "invalid pointer" },
	{ "free-stack", free_stack, "free", "invalid pointer" },
	{ "free-global", free_global, "free", "invalid pointer" },
	{ "realloc-freed-small", realloc_freed_small, "realloc", "use after free|double free|freed" },
	{ "realloc-freed-large", realloc_freed_large, "realloc", "use after free|double free|freed" },
	{ "realloc-freed-run", realloc_freed_run, "realloc", "use after free|double free|freed" },
	{ "usable-size-freed-small", usable_size_freed_small, "malloc_usable_size",
	  "invalid pointer|use after free|freed" },
	{ "usable-size-freed-large", usable_size_freed_large, "malloc_usable_size",
	  "invalid pointer|use after free|freed" },
	{ "free-sized-too-large", free_sized_too_large, "free_sized", "invalid size" },
	{ "free-sized-double", free_sized_double, "free_sized", "double free|invalid pointer|use after free" },
	{ "free-sized-double-small", free_sized_double_small, "free_sized",
	  "double free|invalid pointer|use after free" },
	{ "cfree-double", cfree_double, "cfree", "double free" },
	{ "libc-free-double", libc_free_double, "free", "double free" },
	{ "free-aligned-sized-misaligned", free_aligned_sized_misaligned, "free_aligned_sized",
	  "invalid alignment" },
};

int main(int argc, char **argv)
{
	size_t n = sizeof cases / sizeof cases[0];
	if (argc == 2 && strcmp(argv[1], "--list") == 0) {
		for (size_t i = 0; i < n; i++)
			printf("%s\t%s\t%s\n", cases[i].name, cases[i].function, cases[i].kind);
		return 0;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: misuse CASE | --list\n");
		return 2;
	}
	pt_init("misuse");
	/* stdout's buffer must not come from the heap in the middle of a case. */
	static char outbuf[BUFSIZ];
	setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
	for (size_t i = 0; i < n; i++)
		if (strcmp(argv[1], cases[i].name) == 0) {
			/* Warm up: the allocator and a thread cache exist. */
			void *w = malloc(10);
			free(w);
			cases[i].run();
			return 3;
		}
	fprintf(stderr, "misuse: unknown case %s\n", argv[1]);
	return 2;
}
