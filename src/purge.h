/* Memory return: what has been idle for MBUDDY_DECAY_MS goes back to the
 * kernel. Transfer-cache objects no thread used and free pages of sparsely
 * used slabs first (slab.h, under the central locks); then, under the heap
 * lock, whole pageblocks of the global pool, oldest first, free blocks
 * inside owned pageblocks, and the metadata pages no record uses any more. */
#ifndef MB_PURGE_H
#define MB_PURGE_H

/* With no lock held: release everything idle for longer than the decay
 * time (everything idle when force is set). */
void mb_purge(int force);
/* With no lock held: purge if half a decay period has passed since the
 * last purge. Slow paths call it as they pass, when they may owe
 * maintenance; one thread at a time does the work. */
void mb_purge_maybe(void);

#endif
