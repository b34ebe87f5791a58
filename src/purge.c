#include "config.h"
#include "purge.h"
#include "heap.h"
#include "metadata.h"
#include "options.h"
#include "slab.h"

#include <stdint.h>

void mb_purge_locked(int force)
{
	struct mb_buddy *b = &mb_heap.buddy;
	uint64_t now = mb_now_ms();
	b->clock = now;
	uint64_t idle_since = force ? UINT64_MAX : (now > mb_opt.decay_ms ? now - mb_opt.decay_ms : 0);
	size_t n = mb_buddy_release(b, idle_since, SIZE_MAX);
	mb_heap.released_bytes += (uint64_t)n * (b->pb_pages << MB_PAGE_SHIFT);
	mb_heap.released_bytes += mb_buddy_release_free_blocks(b, MB_PURGE_MIN_ORDER, force) << MB_PAGE_SHIFT;
	mb_heap.released_bytes += mb_slab_purge_locked() << MB_PAGE_SHIFT;
	int failed;
	mb_meta_release(&failed); /* records of slabs that are gone */
	if (failed)
		b->count.release_failures++;
}

void mb_purge_maybe_locked(void)
{
	uint64_t now = mb_now_ms();
	mb_heap.buddy.clock = now;
	if (now < mb_heap.next_purge_ms)
		return;
	mb_heap.next_purge_ms = now + mb_opt.decay_ms / 2;
	mb_purge_locked(0);
}
