/* The C++ operator new/delete family, under their Itanium-ABI names, so a
 * C++ program's allocations reach the same typed heap without libmbuddy
 * itself depending on libstdc++. A failing throwing new follows the
 * standard: call the new-handler until it gives up, then throw bad_alloc,
 * both found in the program's own libstdc++ at that moment. */
#include "config.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "alloc.h"
#include "classify.h"
#include "entry.h"
#include "exports.h"
#include "options.h"

typedef void (*new_handler_fn)(void);

/* What the standard asks of a failed operator new: call the new-handler
 * and try again, until there is no handler; then the throwing forms throw
 * std::bad_alloc and the nothrow forms return null (since C++11 they call
 * the new-handler like the throwing ones). */
static void *new_failed(size_t n, size_t align, void *ra, int nothrow)
{
	new_handler_fn (*get_handler)(void) = (new_handler_fn(*)(void))dlsym(RTLD_DEFAULT, "_ZSt15get_new_handlerv");
	for (;;) {
		new_handler_fn h = get_handler ? get_handler() : NULL;
		if (!h && nothrow)
			return NULL;
		if (!h) {
			void (*throw_bad_alloc)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "_ZSt17__throw_bad_allocv");
			if (throw_bad_alloc)
				throw_bad_alloc();
			mb_warn("operator new: out of memory for %zu bytes and no std::bad_alloc to throw", n);
			abort();
		}
		h();
		void *p = align ? site_memalign(ra, align, n) : site_malloc(ra, n);
		if (p)
			return p;
	}
}

static __attribute__((noinline)) void *op_new_slow(size_t n, void *ra)
{
	void *p = site_malloc_slow(ra, n);
	return __builtin_expect(p != NULL, 1) ? p : new_failed(n, 0, ra, 0);
}

/* Like malloc: the fast paths inline, the rest one tail call away. */
static inline void *op_new(size_t n, void *ra)
{
	int key;
	if (__builtin_expect(mb_classify_fast(ra, &key), 1)) {
		void *p = mb_malloc_inline(n, key);
		return __builtin_expect(p != NULL, 1) ? p : new_failed(n, 0, ra, 0);
	}
	return op_new_slow(n, ra);
}

static inline void *op_new_aligned(size_t n, size_t align, void *ra)
{
	void *p = site_memalign(ra, align, n);
	return p ? p : new_failed(n, align, ra, 0);
}

static inline void *op_new_nothrow(size_t n, size_t align, void *ra)
{
	void *p = align ? site_memalign(ra, align, n) : site_malloc(ra, n);
	return p ? p : new_failed(n, align, ra, 1);
}

/* new, new[] */
EXPORT void *_Znwm(size_t n) { return op_new(n, CALLER); }
EXPORT void *_Znam(size_t n) { return op_new(n, CALLER); }
/* nothrow */
EXPORT void *_ZnwmRKSt9nothrow_t(size_t n, const void *nt) { (void)nt; return op_new_nothrow(n, 0, CALLER); }
EXPORT void *_ZnamRKSt9nothrow_t(size_t n, const void *nt) { (void)nt; return op_new_nothrow(n, 0, CALLER); }
/* aligned */
EXPORT void *_ZnwmSt11align_val_t(size_t n, size_t a) { return op_new_aligned(n, a, CALLER); }
EXPORT void *_ZnamSt11align_val_t(size_t n, size_t a) { return op_new_aligned(n, a, CALLER); }
EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *nt) { (void)nt; return op_new_nothrow(n, a, CALLER); }
EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *nt) { (void)nt; return op_new_nothrow(n, a, CALLER); }

/* delete, delete[], sized, aligned, nothrow: all checked like free(). */
EXPORT void _ZdlPv(void *p) { free_entry(p, "operator delete"); }
EXPORT void _ZdaPv(void *p) { free_entry(p, "operator delete[]"); }
EXPORT void _ZdlPvm(void *p, size_t n) { (void)n; free_entry(p, "operator delete"); }
EXPORT void _ZdaPvm(void *p, size_t n) { (void)n; free_entry(p, "operator delete[]"); }
EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *nt) { (void)nt; free_entry(p, "operator delete"); }
EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const void *nt) { (void)nt; free_entry(p, "operator delete[]"); }
EXPORT void _ZdlPvSt11align_val_t(void *p, size_t a) { (void)a; free_entry(p, "operator delete"); }
EXPORT void _ZdaPvSt11align_val_t(void *p, size_t a) { (void)a; free_entry(p, "operator delete[]"); }
EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a) { (void)n; (void)a; free_entry(p, "operator delete"); }
EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a) { (void)n; (void)a; free_entry(p, "operator delete[]"); }
EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *nt) { (void)a; (void)nt; free_entry(p, "operator delete"); }
EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *nt) { (void)a; (void)nt; free_entry(p, "operator delete[]"); }
