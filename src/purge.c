#include "config.h"
#include "purge.h"
#include "heap.h"
#include "metadata.h"
#include "options.h"
#include "slab.h"

#include <stdint.h>

static uint64_t next_purge_ms;

void mb_purge(int force)
{
	struct mb_buddy *b = &mb_heap.buddy;
	unsigned failed;
	size_t slab_pages = mb_slab_purge(SIZE_MAX, force, &failed);
	mb_heap_lock();
	uint64_t now = mb_now_ms();
	b->clock = now;
	b->count.release_failures += failed;
	mb_heap.released_bytes += (uint64_t)slab_pages << MB_PAGE_SHIFT;
	uint64_t idle_since = force ? UINT64_MAX : (now > mb_opt.decay_ms ? now - mb_opt.decay_ms : 0);
	size_t n = mb_buddy_release(b, idle_since, SIZE_MAX);
	mb_heap.released_bytes += (uint64_t)n * (b->pb_pages << MB_PAGE_SHIFT);
	mb_heap.released_bytes += mb_buddy_release_free_blocks(b, MB_PURGE_MIN_ORDER, force) << MB_PAGE_SHIFT;
	int meta_failed;
	mb_meta_release(&meta_failed); /* records of slabs that are gone */
	if (meta_failed)
		b->count.release_failures++;
	mb_heap_unlock();
}

void mb_purge_maybe(void)
{
	uint64_t now = mb_now_ms();
	uint64_t due = __atomic_load_n(&next_purge_ms, __ATOMIC_RELAXED);
	if (now < due)
		return;
	/* One thread wins the period; the others go on. */
	if (!__atomic_compare_exchange_n(&next_purge_ms, &due, now + mb_opt.decay_ms / 2, 0, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return;
	mb_purge(0);
}
