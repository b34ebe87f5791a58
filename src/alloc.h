/* The malloc-level operations every entry point is built from. `type` is
 * the reclaim type chosen by the caller (classification, the typed API or
 * the default). Errors follow glibc: NULL with errno = ENOMEM. */
#ifndef MB_ALLOC_H
#define MB_ALLOC_H

#include <stddef.h>

void *mb_malloc(size_t n, int type);
void *mb_calloc(size_t nmemb, size_t size, int type);
void *mb_realloc(void *p, size_t n, int type, const char *func);
void *mb_memalign(size_t align, size_t n, int type);
void mb_free(void *p, const char *func);
size_t mb_usable_size(const void *p, const char *func);
/* MBUDDY_CHECK=1: canaries after every object (see alloc.c). */
extern int mb_canaries;
void mb_canary_init(void);

/* Release everything idle now; returns 1 if memory was released. */
int mb_trim(void);

#endif
