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

/* What made a report be written. */
enum mb_stats_trigger { MB_TRIGGER_API, MB_TRIGGER_EXIT, MB_TRIGGER_SIGNAL };

/* Write a full report, asked for through the API; format is enum
 * mb_stats_format. 0 on success. The heap must be set up. */
int mb_stats_write(int fd, int format);

/* Once the heap is set up: keep a copy of stderr for the exit report. */
void mb_stats_init(void);
/* The reports MBUDDY_STATS and MBUDDY_STATS_JSON_FILE ask for at exit (once;
 * only in the process MBUDDY_STATS_PID names, if set). */
void mb_stats_dump_at_exit(void);
/* A report asked for while the program runs (MBUDDY_STATS_SIGNAL): where
 * MBUDDY_STATS says, or on stderr without it. Outside every lock. */
void mb_stats_dump_requested(void);
/* In a fork child, once the thread caches are set right: the dump lock,
 * and counters that start again from the fork. */
void mb_stats_fork_child(void);

#endif
