/* The malloc-level operations every entry point is built from. `key` is
 * the slab key chosen by the caller (reclaim_type.h: a reclaim type, from
 * classification, the typed API or the default, and a lane). Errors follow glibc: NULL with errno = ENOMEM. */
#ifndef MB_ALLOC_H
#define MB_ALLOC_H

#include <stddef.h>

void *mb_malloc(size_t n, int key);
void *mb_calloc(size_t nmemb, size_t size, int key);
void *mb_realloc(void *p, size_t n, int key, const char *func);
void *mb_memalign(size_t align, size_t n, int key);
void mb_free(void *p, const char *func);
size_t mb_usable_size(const void *p, const char *func);

/* Release everything idle now; returns 1 if memory was released. */
int mb_trim(void);

#endif
