/* Memory for the allocator's own out-of-band records (slab descriptors,
 * thread caches, site tables), kept apart from the user's heap so an
 * overflow there cannot reach them. Callers hold the heap lock. */
#ifndef MB_METADATA_H
#define MB_METADATA_H

#include <stddef.h>

/* Zeroed memory of n bytes (n <= MB_META_MAX), or NULL. */
void *mb_meta_alloc(size_t n);
/* The same, on pages shared only with records of the same group
 * (< MB_META_GROUPS; the slab layer uses 1 + the slab key). */
void *mb_meta_alloc_group(size_t n, unsigned group);
#define MB_META_GROUPS 32
void mb_meta_free(void *p, size_t n);
/* Bytes mapped for metadata so far (address space). */
size_t mb_meta_mapped(void);
/* Bytes of metadata pages in use or not yet given back. */
size_t mb_meta_resident(void);
/* Give the kernel the pages no record uses; returns how many. *failed is
 * set when the kernel refused (the pages are retried next time). */
size_t mb_meta_release(int *failed);

/* The largest record: a thread heap (theap.h) is one. */
#define MB_META_MAX (1024 * 1024)

#endif
