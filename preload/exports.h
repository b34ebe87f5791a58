/* What every file of preload/ shares: the attribute of an exported
 * name, the caller's return address that classification keys sites on,
 * the slab key of a classification result, and the prototypes of exported
 * names that no system header declares. */
#ifndef MB_EXPORTS_H
#define MB_EXPORTS_H

#include <malloc.h>
#include <stddef.h>

#include "reclaim_type.h"

/* The library is built with -fvisibility=hidden: only what is marked so
 * is exported. */
#define EXPORT __attribute__((visibility("default")))
/* Where the exported function returns to: the call site. Only meaningful
 * in the exported function itself, or in a function inlined into it. */
#define CALLER __builtin_return_address(0)
/* The slab key of what the classifier returned (its flags masked off). */
#define T(t) ((t) & MB_KEY_MASK)

void cfree(void *p);

/* This library's own malloc, free, calloc and realloc (malloc_api.c). */
void *mb_own_malloc(size_t n);
void mb_own_free(void *p);
void *mb_own_calloc(size_t nmemb, size_t size);
void *mb_own_realloc(void *p, size_t n);
/* Whether the process's malloc family is ours; if not, tell the report
 * (served.c). Once, at start, with the heap ready. */
void mb_check_served(void);
/* The definition the process's calls to name reach (served.c): own, this
 * library's, or another object's; never a PLT stub of the executable. */
void *mb_process_symbol(const char *name, void *own);
void free_sized(void *p, size_t n);
void free_aligned_sized(void *p, size_t align, size_t n);
struct mallinfo __libc_mallinfo(void);
int __libc_mallopt(int param, int value);
void *__libc_malloc(size_t n);
void __libc_free(void *p);
void *__libc_calloc(size_t a, size_t b);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t a, size_t n);
void *__libc_valloc(size_t n);
void *__libc_pvalloc(size_t n);

void *_Znwm(size_t n);
void *_Znam(size_t n);
void *_ZnwmRKSt9nothrow_t(size_t n, const void *nt);
void *_ZnamRKSt9nothrow_t(size_t n, const void *nt);
void *_ZnwmSt11align_val_t(size_t n, size_t a);
void *_ZnamSt11align_val_t(size_t n, size_t a);
void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *nt);
void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *nt);
void _ZdlPv(void *p);
void _ZdaPv(void *p);
void _ZdlPvm(void *p, size_t n);
void _ZdaPvm(void *p, size_t n);
void _ZdlPvRKSt9nothrow_t(void *p, const void *nt);
void _ZdaPvRKSt9nothrow_t(void *p, const void *nt);
void _ZdlPvSt11align_val_t(void *p, size_t a);
void _ZdaPvSt11align_val_t(void *p, size_t a);
void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a);
void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a);
void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *nt);
void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *nt);

#endif
