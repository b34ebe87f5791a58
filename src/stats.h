/* The report. A snapshot of the heap taken under the lock, then
 * written as text for people (buddyinfo / pagetypeinfo style, the patch's
 * bean counters) or JSON for tools, with plain write(2) calls so that a
 * dump never allocates from the heap it describes. */
#ifndef MB_STATS_H
#define MB_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "out.h"
#include "stats_snapshot.h"

/* Write a full report; format is enum mb_stats_format. 0 on success.
 * The heap must be set up. */
int mb_stats_write(int fd, int format);

/* Once the heap is set up: keep a copy of stderr for the exit report. */
void mb_stats_init(void);
/* The report MBUDDY_STATS asks for at exit (once). */
void mb_stats_dump_at_exit(void);
/* A report asked for while the program runs (MBUDDY_STATS_SIGNAL): where
 * MBUDDY_STATS says, or on stderr without it. Outside every lock. */
void mb_stats_dump_requested(void);
void mb_stats_fork_child(void);

#endif
