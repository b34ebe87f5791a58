/* A program that loads libraries with dlopen(RTLD_DEEPBIND), as Debian's
 * php loads its extensions, and passes memory both ways across the
 * boundary: deep_lib.so (C) and deep_lib_cxx.so (C++, which brings
 * libstdc++ in deep-bound too). It runs under glibc alone, and must run
 * the same under libmbuddy (deepbind.test runs it both ways, with the
 * libraries bound lazily and with LD_BIND_NOW=1).
 *
 *   deepbind [now|lazy]     the dlopen mode besides RTLD_DEEPBIND
 *
 * The libraries are found the way glibc finds them for this program: by
 * bare name through its RUNPATH ($ORIGIN/.libs), and by a path starting
 * with $ORIGIN. libmbuddy's dlopen must keep that working although it
 * calls glibc's dlopen itself. */
#include "ptest.h"

#include <malloc.h>

typedef void *(*alloc_fn)(size_t);
typedef void (*free_fn)(void *);

static void *sym(void *h, const char *name)
{
	void *f = dlsym(h, name);
	PT_REQUIRE(f != NULL, "dlsym(%s): %s", name, dlerror());
	return f;
}

static int (*pointer_type)(const void *);

/* Under libmbuddy: whether p is in its heap. */
static int ours(const void *p)
{
	return !pointer_type || pointer_type(p) >= 0;
}

static void fill(void *p, size_t n, int c)
{
	memset(p, c, n);
}

static int filled(const void *p, size_t n, int c)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i] != (unsigned char)c)
			return 0;
	return 1;
}

static void c_library(int mode)
{
	dlerror(); /* pt_init's lookups may have failed */
	void *h = dlopen("deep_lib.so", mode | RTLD_DEEPBIND);
	PT_REQUIRE(h != NULL, "dlopen(deep_lib.so) by the program's RUNPATH: %s", dlerror());
	PT_CHECK(dlerror() == NULL, "dlerror() after a successful dlopen is not NULL");
	char *(*ctor_string)(void) = (char *(*)(void))sym(h, "deep_ctor_string");
	char *(*ctor_big)(void) = (char *(*)(void))sym(h, "deep_ctor_big");
	alloc_fn lib_malloc = (alloc_fn)sym(h, "deep_malloc");
	void *(*lib_calloc)(size_t, size_t) = (void *(*)(size_t, size_t))sym(h, "deep_calloc");
	void *(*lib_realloc)(void *, size_t) = (void *(*)(void *, size_t))sym(h, "deep_realloc");
	free_fn lib_free = (free_fn)sym(h, "deep_free");
	size_t (*lib_usable)(void *) = (size_t(*)(void *))sym(h, "deep_usable_size");
	char *(*lib_strdup)(const char *) = (char *(*)(const char *))sym(h, "deep_strdup");
	void *(*lib_aligned)(size_t, size_t) = (void *(*)(size_t, size_t))sym(h, "deep_aligned");
	void *(*lib_malloc_address)(void) = (void *(*)(void))sym(h, "deep_malloc_address");
	void (*lib_free_pointers)(void *, void *) = (void (*)(void *, void *))sym(h, "deep_free_through_pointers");

	/* The library frees what the program allocated. */
	for (int i = 0; i < 1000; i++) {
		size_t n = (size_t)(i % 64 + 1) * 24 + (i % 100 == 0 ? 100000 : 0);
		char *p = malloc(n);
		PT_REQUIRE(p != NULL, "malloc(%zu)", n);
		fill(p, n, i & 0xff);
		lib_free(pt_hide(p));
	}
	/* The program frees what the library allocated, which is libmbuddy's
	 * once rebound. */
	for (int i = 0; i < 1000; i++) {
		size_t n = (size_t)(i % 64 + 1) * 24;
		char *p = i % 2 ? lib_malloc(n) : lib_calloc(1, n);
		PT_REQUIRE(p != NULL, "the library's allocation of %zu", n);
		PT_CHECK(i % 2 || filled(p, n, 0), "the library's calloc is not zeroed");
		PT_CHECK(ours(p), "the library's malloc is not libmbuddy's after dlopen");
		fill(p, n, 1);
		free(p);
	}
	/* What the constructor allocated, before anyone could rebind: glibc's. */
	char *s = ctor_string();
	PT_REQUIRE(s != NULL, "no string from the constructor");
	PT_CHECK(strcmp(s, "allocated in the constructor") == 0, "the constructor's string: %s", s);
	PT_CHECK(malloc_usable_size(s) >= 29, "malloc_usable_size of the constructor's string");
	free(s);
	char *big = ctor_big();
	PT_REQUIRE(big != NULL, "no block from the constructor");
	big = realloc(big, 3 << 20);
	PT_REQUIRE(big != NULL, "realloc of the constructor's block");
	PT_CHECK(filled(big, 1 << 20, 0x5a), "realloc of the constructor's block lost its contents");
	PT_CHECK(malloc_usable_size(big) >= 3u << 20, "malloc_usable_size of the constructor's block");
	free(big);

	/* realloc across the boundary, both ways. */
	char *r = malloc(40);
	PT_REQUIRE(r != NULL, "malloc(40)");
	fill(r, 40, 7);
	r = lib_realloc(r, 50000);
	PT_REQUIRE(r != NULL && filled(r, 40, 7), "the library's realloc of the program's block");
	r = realloc(r, 10);
	PT_REQUIRE(r != NULL && filled(r, 10, 7), "the program's realloc of that block");
	r = lib_realloc(r, 0); /* glibc's realloc(p, 0) frees */
	char *t = lib_malloc(30);
	PT_REQUIRE(t != NULL, "the library's malloc(30)");
	fill(t, 30, 9);
	t = realloc(t, 100000);
	PT_REQUIRE(t != NULL && filled(t, 30, 9), "the program's realloc of the library's block");
	lib_free(t);

	void *u = malloc(100);
	PT_CHECK(lib_usable(u) >= 100, "the library's malloc_usable_size of the program's block");
	free(u);
	char *d = lib_strdup("copied by libc for the library");
	PT_CHECK(d && strcmp(d, "copied by libc for the library") == 0, "strdup");
	lib_free(d);
	void *a = lib_aligned(4096, 5000);
	PT_CHECK(a && ((uintptr_t)a & 4095) == 0, "the library's posix_memalign");
	free(a);
	/* The library's pointers to malloc and free. */
	PT_CHECK(lib_malloc_address() == dlsym(RTLD_DEFAULT, "malloc"), "the library's &malloc is not the program's");
	void *p1 = malloc(70), *p2 = malloc(7000);
	lib_free_pointers(p1, p2);
	PT_CHECK(dlclose(h) == 0, "dlclose(deep_lib.so): %s", dlerror());
}

static void cxx_library(int mode)
{
	void *h = dlopen("$ORIGIN/.libs/deep_lib_cxx.so", mode | RTLD_DEEPBIND);
	PT_REQUIRE(h != NULL, "dlopen($ORIGIN/.libs/deep_lib_cxx.so): %s", dlerror());
	size_t (*release)(void) = (size_t(*)(void))sym(h, "deep_cxx_release");
	alloc_fn lib_new = (alloc_fn)sym(h, "deep_cxx_new");
	free_fn lib_delete = (free_fn)sym(h, "deep_cxx_delete");
	alloc_fn lib_new_aligned = (alloc_fn)sym(h, "deep_cxx_new_aligned");
	free_fn lib_delete_aligned = (free_fn)sym(h, "deep_cxx_delete_aligned");
	size_t (*strings)(int) = (size_t(*)(int))sym(h, "deep_cxx_strings");

	/* The process's operators: libmbuddy's (a C program has no other in
	 * its global scope). */
	alloc_fn op_new = (alloc_fn)dlsym(RTLD_DEFAULT, "_Znwm");
	free_fn op_delete = (free_fn)dlsym(RTLD_DEFAULT, "_ZdlPv");
	for (int i = 0; i < 500; i++) {
		size_t n = (size_t)(i % 50 + 1) * 16;
		void *p = lib_new(n);
		PT_REQUIRE(p != NULL, "the library's operator new(%zu)", n);
		PT_CHECK(ours(p), "the library's operator new is not libmbuddy's after dlopen");
		fill(p, n, 3);
		if (op_delete)
			op_delete(p);
		else
			lib_delete(p);
		if (op_new) {
			void *q = op_new(n);
			fill(q, n, 4);
			lib_delete(q);
		}
	}
	void *al = lib_new_aligned(1000);
	PT_CHECK(al && ((uintptr_t)al & 255) == 0, "the library's aligned operator new");
	lib_delete_aligned(al);
	PT_CHECK(strings(5000) > 5000 * 20, "strings in the library");
	PT_CHECK(release() == 200, "the constructor's string");
	PT_CHECK(dlclose(h) == 0, "dlclose(deep_lib_cxx.so): %s", dlerror());
}

int main(int argc, char **argv)
{
	int mode = argc > 1 && strcmp(argv[1], "lazy") == 0 ? RTLD_LAZY : RTLD_NOW;
	pt_init("deepbind");
	pointer_type = (int (*)(const void *))pt_sym("mbuddy_pointer_type");

	/* Without RTLD_DEEPBIND: glibc's dlopen, seeing this program as its
	 * caller, finds the library through the program's RUNPATH. */
	void *plain = dlopen("dlopen_lib.so", RTLD_NOW);
	PT_REQUIRE(plain != NULL, "dlopen(dlopen_lib.so) by the program's RUNPATH: %s", dlerror());
	PT_CHECK(dlclose(plain) == 0, "dlclose(dlopen_lib.so): %s", dlerror());

	c_library(mode);
	cxx_library(mode);
	c_library(mode); /* loaded a second time, rebound again */

	/* A deep-bound dlopen that fails says why. */
	PT_CHECK(dlopen("deep_lib-does-not-exist.so", RTLD_NOW | RTLD_DEEPBIND) == NULL, "dlopen of a missing library");
	const char *err = dlerror();
	PT_CHECK(err && strstr(err, "deep_lib-does-not-exist.so"), "dlerror() after a failed deep-bound dlopen: %s",
	      err ? err : "(null)");
	if (pt_failures)
		return 1;
	printf("deep-bound libraries: memory crossed both ways, %s binding\n", mode == RTLD_LAZY ? "lazy" : "immediate");
	return 0;
}
