/* Memory for the allocator's own out-of-band records (slab descriptors,
 * thread caches, site tables), kept apart from the user's heap so an
 * overflow there cannot reach them. Callers hold the heap lock. */
#ifndef MB_METADATA_H
#define MB_METADATA_H

#include <stddef.h>

/* Zeroed memory of n bytes (n <= MB_META_MAX), or NULL. */
void *mb_meta_alloc(size_t n);
void mb_meta_free(void *p, size_t n);
/* Bytes mapped for metadata so far. */
size_t mb_meta_mapped(void);

#define MB_META_MAX (256 * 1024)

#endif
