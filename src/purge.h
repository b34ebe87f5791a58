/* Memory return: what has been idle for MBUDDY_DECAY_MS goes back to the
 * kernel. Whole pageblocks of the global pool first, oldest first; then free
 * blocks inside owned pageblocks, free pages of sparsely used slabs, and the
 * metadata pages no record uses any more. Callers hold the heap lock. */
#ifndef MB_PURGE_H
#define MB_PURGE_H

/* Release everything idle for longer than the decay time (everything idle
 * when force is set). */
void mb_purge_locked(int force);
/* Purge if half a decay period has passed since the last purge; advances
 * the buddy's clock either way. Slow paths call it as they pass. */
void mb_purge_maybe_locked(void);

#endif
