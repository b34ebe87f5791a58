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
#include "exports.h"
#include "classify.h"
#include "heap.h"
#include "init.h"
#include "mbuddy.h"
#include "tcache.h"

#define EXPORT __attribute__((visibility("default")))
#define CALLER __builtin_return_address(0)
#define T(t) ((t) & MB_KEY_MASK)

/* Set up before the program's own constructors where possible, so our fork
 * handlers are registered early (prepare handlers run last-registered
 * first) and the first allocation finds the heap ready. */
__attribute__((constructor(101))) static void heap_init_early(void)
{
	mb_process_init();
}

/* malloc when the call site needs the classifier's slow path. */
static __attribute__((noinline)) void *malloc_classify_slow(size_t n, void *ra)
{
	int t = mb_classify_site_slow(ra, n);
	return mb_sampled(mb_malloc(n, T(t)), t, n);
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

EXPORT void free(void *p)
{
	mb_free_inline(p, "free");
}

EXPORT void cfree(void *p)
{
	mb_free(p, "cfree");
}

EXPORT void *calloc(size_t nmemb, size_t size)
{
	int t = mb_classify(CALLER, nmemb * size);
	return mb_sampled(mb_calloc(nmemb, size, T(t)), t, nmemb * size);
}

/* realloc for the caller that returns to ra. A block that stayed in place
 * keeps its own sample state. */
static void *realloc_for(void *p, size_t n, void *ra, const char *func)
{
	int t = mb_classify(ra, n);
	void *q = mb_realloc(p, n, T(t), func);
	return q != p ? mb_sampled(q, t, n) : q;
}

EXPORT void *realloc(void *p, size_t n)
{
	return realloc_for(p, n, CALLER, "realloc");
}

EXPORT void *reallocarray(void *p, size_t nmemb, size_t size)
{
	size_t n;
	if (__builtin_mul_overflow(nmemb, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc_for(p, n, CALLER, "reallocarray");
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
	int t = mb_classify(ra, n);
	return mb_sampled(mb_memalign(align, n, T(t)), t, n);
}

EXPORT void *memalign(size_t align, size_t n)
{
	return memalign_rounded(align, n, CALLER);
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
	return memalign_rounded(align, n, CALLER);
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	if (align % sizeof(void *) != 0 || !power_of_two(align))
		return EINVAL;
	int saved = errno;
	int t = mb_classify(CALLER, n);
	void *p = mb_sampled(mb_memalign(align, n, T(t)), t, n);
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
	return mb_usable_size(p, "malloc_usable_size");
}

EXPORT int malloc_trim(size_t pad)
{
	(void)pad;
	return mb_trim();
}

/* mallopt's tunables belong to glibc's arenas; none applies here. glibc
 * returns 0 for a parameter it does not accept. */
EXPORT int mallopt(int param, int value)
{
	(void)param;
	(void)value;
	return 0;
}

static void fill_mallinfo2(struct mallinfo2 *mi)
{
	struct mb_counts c;
	*mi = (struct mallinfo2){ 0 };
	if (mb_process_init() != 0)
		return;
	mb_heap_lock();
	mb_tcache_sum_counts(&c);
	struct mb_buddy *b = &mb_heap.buddy;
	size_t held = b->pages_allocated << MB_PAGE_SHIFT;
	mi->arena = held;                                 /* bytes taken from the region */
	mi->ordblks = b->nr_global - (b->nblocks - b->pb_high); /* free pageblocks, of those used so far */
	mi->hblks = mb_heap.large_objects;                /* page-granular objects */
	mi->hblkhd = 0;
	mi->uordblks = (size_t)(c.alloc_bytes - c.freed_bytes);
	mi->fordblks = held > mi->uordblks ? held - mi->uordblks : 0;
	mi->keepcost = b->nr_dirty * (b->pb_pages << MB_PAGE_SHIFT); /* idle, resident */
	mb_heap_unlock();
}

EXPORT struct mallinfo2 mallinfo2(void)
{
	struct mallinfo2 mi;
	fill_mallinfo2(&mi);
	return mi;
}

EXPORT struct mallinfo mallinfo(void)
{
	struct mallinfo2 m2;
	fill_mallinfo2(&m2);
	struct mallinfo mi = {
		.arena = (int)m2.arena, .ordblks = (int)m2.ordblks, .hblks = (int)m2.hblks,
		.hblkhd = (int)m2.hblkhd, .uordblks = (int)m2.uordblks, .fordblks = (int)m2.fordblks,
		.keepcost = (int)m2.keepcost,
	};
	return mi;
}

/* glibc's internal names, which some programs and libraries call. */
EXPORT void *__libc_malloc(size_t n) { int t = mb_classify(CALLER, n); return mb_sampled(mb_malloc(n, T(t)), t, n); }
EXPORT void __libc_free(void *p) { mb_free(p, "free"); }
EXPORT void *__libc_calloc(size_t a, size_t b) { int t = mb_classify(CALLER, a * b); return mb_sampled(mb_calloc(a, b, T(t)), t, a * b); }
EXPORT void *__libc_realloc(void *p, size_t n) { return realloc_for(p, n, CALLER, "realloc"); }
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

/* dlclose can unmap code whose return addresses sites are keyed on. */
EXPORT int dlclose(void *handle)
{
	static int (*real_dlclose)(void *);
	if (!real_dlclose)
		real_dlclose = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
	int rc = real_dlclose ? real_dlclose(handle) : -1;
	if (rc == 0)
		mb_classify_code_unmapped();
	return rc;
}

EXPORT int mbuddy_set_thread_type(int type)
{
	int prev = mb_self.type_hint;
	mb_self.type_hint = valid_type(type) ? type : -1;
	return prev;
}
