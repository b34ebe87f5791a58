/* Sampled objects: the evidence behind every site's key.
 *
 * A sampled object is recorded, out of band, with its site (and deep
 * site), its birth on the allocation clock (heap.h) and its weight: how
 * many allocations it stands for (1 for a learning sample, the sampling
 * period for the others), so that a site's live samples estimate the bytes
 * it holds. As it ages, a live sample counts for its site as "lasting"
 * once it has outlived the young threshold and as "old" once it has
 * outlived the old one; when it is freed, its lifetime decides: young or
 * lasting. The thresholds scale with the heap: young is freed before 1/64
 * of the heap is allocated again, old has outlived the allocation of twice
 * the heap (or four times the site's own mean lifetime, for a big cache
 * that turns over slowly).
 *
 * Under the site lock (site.h). */
#ifndef MB_SAMPLE_H
#define MB_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

struct mb_site;

/* Reserve the table; -1 without memory. */
int mb_samples_init(void);

/* p (n bytes), just allocated by this thread for site s (and deep site d,
 * or NULL) with slab key `key`, is a sample standing for `weight`
 * allocations. Marks it in its slab or page record, so that its free
 * comes here. */
void mb_sample_add(void *p, size_t n, struct mb_site *s, struct mb_site *d, uint64_t weight, int key);

/* A sampled object is being freed (its slab or page record says so). */
void mb_sample_freed(const void *p);

/* Age the live samples by the allocation clock. Called with each new
 * sample and each freed one. */
void mb_samples_age_locked(void);

#endif
