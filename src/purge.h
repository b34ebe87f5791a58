/* Memory return: what has been idle for MBUDDY_DECAY_MS goes back to the
 * kernel, in bounded batches whose madvise calls run with no allocator lock
 * held (buddy.h: take, release, done). Whole pageblocks of the global pool
 * and spans of free blocks in owned pageblocks come from the buddy's purge
 * queues, oldest first, neighbours coalesced; then the free pages of
 * sparsely used slabs, abandoned ones and those of thread heaps whose lock
 * is free (a sweep, due a purge period after a slow-path free), and the
 * metadata pages no record uses any more. The work is done by the
 * background purge thread (background.h) once it runs, else in small steps
 * by the slow paths of malloc and free.
 *
 * Lock order: the purge lock, the thread heaps' locks (tried), the
 * abandoned slabs' locks, the heap lock. Call all with no allocator lock
 * held. */
#ifndef MB_PURGE_H
#define MB_PURGE_H

#include <stddef.h>
#include <stdint.h>

#include "options.h" /* mb_purge_period_ms() */

/* Pages a malloc or free may hand back itself when no thread does it. */
#define MB_PURGE_INLINE_BUDGET 256
/* Passes over the purge queues are at least this far apart. */
#define MB_PURGE_INTERVAL_MS 10
/* Pages per batch of the background thread, between lock drops. */
#define MB_PURGE_BATCH_BUDGET 4096
/* Free slab pages released per pass (each class's central lock is held
 * while its pages are released). */
#define MB_PURGE_SWEEP_BUDGET 256

/* A bounded amount of what is due (the queues' memory if `due`, from
 * mb_purge_next_due(), has come; caches and slabs if their period has),
 * unless another thread is purging. For the slow paths, through
 * mb_purge_maybe() (background.h), when no thread does the work. */
void mb_purge_step(unsigned long long due);

/* Release everything due (everything queued, and every transfer cache's
 * objects back to their slabs, if force), in batches; returns the pages
 * released. Waits for a purge in flight elsewhere. */
size_t mb_purge(int force);

/* The heap grows only at the cost of what is idle: the pages the buddy
 * handed out clean (faulted in by the program) since the last call are
 * matched by as many pages of the free memory queued for release, oldest
 * first, released now rather than after the decay time. Free memory the
 * heap could not use for a request (holes too small, in pageblocks of
 * another type) would otherwise stay resident beside the new memory.
 * Call with no allocator lock held. */
void mb_purge_offset(void);
/* A large allocation just took `pages` clean pages (a pageblock's at
 * least: a run of whole pageblocks, which a heap whose pageblocks are
 * spread among types seldom finds free side by side): the debt is paid
 * at once, up to `pages`, from whatever is queued, before the program
 * writes the run, so that its peak does not hold both. */
void mb_purge_offset_run(uint64_t pages);
/* Objects were freed on a slow path: their slabs' free pages are looked at
 * within a purge period (a sweep falls due). */
void mb_purge_slabs_freed(void);

/* No purge runs between these two (the purge lock, held): the account
 * (account.h) counts the resident pages of the heap page by page, then
 * reads the kernel's figures, and memory handed back in between made its
 * parts add up to more than the resident set (4-6% for a python3 of 80
 * MiB, one run in six). */
void mb_purge_pause(void);
void mb_purge_resume(void);
/* Sets the heap's purge limits from the options, before the first
 * allocation. */
void mb_purge_init(void);

/* When the oldest queued memory becomes due, or a dense unit's collapse
 * into a huge page (buddy.h), on mb_now_ms()'s clock, or UINT64_MAX when
 * nothing is. */
unsigned long long mb_purge_next_due(void);
/* The same for queued memory only: what starts the purge thread. */
unsigned long long mb_purge_release_due(void);

/* Wait until no release is in flight (an allocation that failed may
 * succeed once the memory is back); returns 1 if one was. */
int mb_purge_settle(void);

/* fork: the purge lock is taken before the heap lock, so the child never
 * sees memory in flight. */
void mb_purge_fork_prepare(void);
void mb_purge_fork_parent(void);
void mb_purge_fork_child(void);

#endif
