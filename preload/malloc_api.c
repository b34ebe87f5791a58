/* The exported malloc API of glibc Linux. Each entry point only
 * picks the reclaim type for its caller and translates the call. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "alloc.h"
#include "classify.h"
#include "entry.h"
#include "exports.h"
#include "heap.h"
#include "init.h"
#include "mbuddy.h"
#include "modules.h"
#include "site_unload.h"
#include "report.h"
#include "theap.h"

/* Set up before the program's own constructors where possible, so our fork
 * handlers are registered early (prepare handlers run last-registered
 * first) and the first allocation finds the heap ready. */
__attribute__((constructor(101))) static void heap_init_early(void)
{
	if (mb_process_init() == 0)
		mb_check_served();
}

/* malloc when the call site needs the classifier's slow path. */
static __attribute__((noinline)) void *malloc_classify_slow(size_t n, void *ra)
{
	return site_malloc_slow(ra, n);
}

/* The fast paths of classification and of the thread cache, inline: no
 * stack frame, and every other case is a tail call. */
EXPORT void *malloc(size_t n)
{
	int key;
	if (__builtin_expect(mb_classify_fast(CALLER, &key), 1))
		return mb_malloc_inline(n, key);
	return malloc_classify_slow(n, CALLER);
}

/* glibc's free takes back what glibc's malloc handed out. What it does
 * with a pointer it never handed out is its own affair: most are caught
 * ("free(): invalid pointer") and abort, as they do without libmbuddy.
 * Before any deep-bound load, no such pointer can be the program's, and
 * mb_free reports it as libmbuddy always has. Returns 1 if glibc took p. */
static inline int freed_by_glibc(void *p)
{
	if (!mb_glibc_pointer(p))
		return 0;
	mb_glibc.free(p);
	return 1;
}

__attribute__((noinline)) void mb_free_general(void *p, const char *func)
{
	if (!freed_by_glibc(p))
		mb_free(p, func);
}

__attribute__((noinline)) void mb_free_declined_general(void *p, const char *func)
{
	if (!freed_by_glibc(p))
		mb_free_declined(p, func);
}

EXPORT void free(void *p)
{
	free_entry(p, "free");
}

EXPORT void cfree(void *p)
{
	mb_free_general(p, "cfree");
}

/* C23's sized frees (glibc 2.43). The size is checked as far as the
 * object can tell: one larger than its usable size is a size it never had.
 * A smaller one cannot be told from a correct one (size classes, in-place
 * realloc), so it is accepted. */
static void check_size(void *p, size_t n, const char *func)
{
	if (n > mb_usable_size(p, func))
		mb_fatal_pointer(func, "invalid size (larger than the object)", p);
}

EXPORT void free_sized(void *p, size_t n)
{
	if (p && !mb_glibc_pointer(p))
		check_size(p, n, "free_sized");
	mb_free_general(p, "free_sized");
}

EXPORT void *calloc(size_t nmemb, size_t size)
{
	return site_calloc(CALLER, nmemb, size);
}

EXPORT void *realloc(void *p, size_t n)
{
	return site_realloc(CALLER, p, n, "realloc");
}

/* Our own definitions, bound inside this library: the address of malloc
 * taken here is the one the process resolves, which may be another's
 * (served.c). */
#if defined(__has_attribute) && __has_attribute(copy)
#define OWN_ATTRS(name) alias(#name), visibility("hidden"), copy(name)
#else
#define OWN_ATTRS(name) alias(#name), visibility("hidden")
#endif
#define OWN(name) extern __typeof(name) mb_own_##name __attribute__((OWN_ATTRS(name)))
OWN(malloc);
OWN(free);
OWN(calloc);
OWN(realloc);

EXPORT void *reallocarray(void *p, size_t nmemb, size_t size)
{
	size_t n;
	if (__builtin_mul_overflow(nmemb, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	return site_realloc(CALLER, p, n, "reallocarray");
}

static int power_of_two(size_t a)
{
	return a && !(a & (a - 1));
}

/* glibc's memalign rounds an alignment that is not a power of two up. */
static void *memalign_rounded(size_t align, size_t n, void *ra)
{
	if (align > SIZE_MAX / 2 + 1) {
		errno = EINVAL;
		return NULL;
	}
	if (!power_of_two(align)) {
		size_t a = 1;
		while (a < align)
			a <<= 1;
		align = a;
	}
	return site_memalign(ra, align, n);
}

EXPORT void *memalign(size_t align, size_t n)
{
	return memalign_rounded(align, n, CALLER);
}

/* glibc 2.38 and later: an alignment that is not a power of two is an
 * error here, while memalign keeps rounding it up. */
EXPORT void *aligned_alloc(size_t align, size_t n)
{
	if (!power_of_two(align)) {
		errno = EINVAL;
		return NULL;
	}
	return memalign_rounded(align, n, CALLER);
}

EXPORT void free_aligned_sized(void *p, size_t align, size_t n)
{
	if (p && !mb_glibc_pointer(p)) {
		if (!power_of_two(align) || ((uintptr_t)p & (align - 1)))
			mb_fatal_pointer("free_aligned_sized", "invalid alignment (the object is not so aligned)", p);
		check_size(p, n, "free_aligned_sized");
	}
	mb_free_general(p, "free_aligned_sized");
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	if (align % sizeof(void *) != 0 || !power_of_two(align))
		return EINVAL;
	int saved = errno;
	void *p = site_memalign(CALLER, align, n);
	if (!p) {
		errno = saved;
		return ENOMEM;
	}
	*out = p;
	return 0;
}

EXPORT void *valloc(size_t n)
{
	return memalign_rounded((size_t)sysconf(_SC_PAGESIZE), n, CALLER);
}

EXPORT void *pvalloc(size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t r = (n + page - 1) & ~(page - 1);
	if (r < n) {
		errno = ENOMEM;
		return NULL;
	}
	return memalign_rounded(page, r ? r : page, CALLER);
}

EXPORT size_t malloc_usable_size(void *p)
{
	if (mb_glibc_pointer(p))
		return mb_glibc.usable_size(p);
	return mb_usable_size(p, "malloc_usable_size");
}

EXPORT int malloc_trim(size_t pad)
{
	(void)pad;
	return mb_trim();
}

/* glibc's internal names, which some programs and libraries call. */
EXPORT void *__libc_malloc(size_t n) { return site_malloc(CALLER, n); }
EXPORT void __libc_free(void *p) { mb_free_general(p, "free"); }
EXPORT void *__libc_calloc(size_t a, size_t b) { return site_calloc(CALLER, a, b); }
EXPORT void *__libc_realloc(void *p, size_t n) { return site_realloc(CALLER, p, n, "realloc"); }
EXPORT void *__libc_memalign(size_t a, size_t n) { return memalign_rounded(a, n, CALLER); }
EXPORT void *__libc_valloc(size_t n) { return memalign_rounded((size_t)sysconf(_SC_PAGESIZE), n, CALLER); }
EXPORT void *__libc_pvalloc(size_t n) { return pvalloc(n); }

/* ---- the typed API of mbuddy.h ---- */

static int valid_type(int type)
{
	return type >= 0 && type < MB_NTYPES;
}

EXPORT void *mbuddy_malloc(size_t n, int type)
{
	if (!valid_type(type)) {
		errno = EINVAL;
		return NULL;
	}
	return mb_malloc(n, type);
}

EXPORT void *mbuddy_calloc(size_t nmemb, size_t size, int type)
{
	if (!valid_type(type)) {
		errno = EINVAL;
		return NULL;
	}
	return mb_calloc(nmemb, size, type);
}

/* dlclose can unmap code whose return addresses sites are keyed on: the
 * modules loaded before it tell afterwards which code went away. */
EXPORT int dlclose(void *handle)
{
	static int (*real_dlclose)(void *);
	if (!real_dlclose)
		real_dlclose = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
	if (!real_dlclose)
		return -1;
	struct mb_modules before;
	int known = mb_classify_ready && mb_modules_take(&before) == 0;
	int rc = real_dlclose(handle);
	if (rc == 0 && mb_classify_ready)
		mb_sites_code_unmapped(known ? &before : NULL);
	if (known)
		mb_modules_drop(&before);
	return rc;
}

EXPORT int mbuddy_set_thread_type(int type)
{
	int prev = mb_self.type_hint;
	mb_self.type_hint = valid_type(type) ? type : -1;
	return prev;
}
