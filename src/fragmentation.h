/* The kernel's fragmentation metrics (mm/vmstat.c), for a target order j
 * over free-block counts nr_free[0..norders-1]. */
#ifndef MB_FRAGMENTATION_H
#define MB_FRAGMENTATION_H

#include <stdint.h>

/* Share of free memory that cannot serve an order-j request (1 when
 * nothing is free). */
double mb_unusable_free_index(const uint64_t *nr_free, unsigned norders, unsigned j);

/* Whether a failure at order j would be due to fragmentation (towards 1)
 * or lack of memory (towards 0); -1 when an order-j block is free. */
double mb_fragmentation_index(const uint64_t *nr_free, unsigned norders, unsigned j);

#endif
