#include "config.h"
#include "stats_fields.h"
#include "fragmentation.h"
#include "mbuddy.h"

#define SNAP(m) offsetof(struct mb_snapshot, m)
#define API(m) (offsetof(struct mbuddy_stats, m) + 1)

_Static_assert(sizeof(size_t) == sizeof(uint64_t) && sizeof(unsigned long long) == sizeof(uint64_t),
	       "every field is read as 64 bits");

/* Each object's fields in their JSON order; each text block shows its
 * fields in this order too. */
const struct mb_stats_field mb_stats_fields[] = {
	{ "global", "free_pageblocks", NULL, MB_BLOCK_NONE, 0, SNAP(global_free), API(global_free_pageblocks) },
	{ "global", "resident_pageblocks", NULL, MB_BLOCK_NONE, 0, SNAP(global_resident),
	  API(global_resident_pageblocks) },

	{ "counters", "global_steals", "Global steals:", MB_BLOCK_BEAN, 0, SNAP(count.global_steals), API(global_steals) },
	{ "counters", "global_refills", "Global refills:", MB_BLOCK_BEAN, 0, SNAP(count.global_refills),
	  API(global_refills) },
	{ "counters", "mallocs", NULL, MB_BLOCK_NONE, 0, SNAP(mallocs), API(mallocs) },
	{ "counters", "frees", "objects freed", MB_BLOCK_COUNTERS, 0, SNAP(counts.frees), API(frees) },
	{ "counters", "large_objects", "large objects live", MB_BLOCK_COUNTERS, 0, SNAP(large_objects), 0 },
	{ "counters", NULL, "failed buddy requests", MB_BLOCK_COUNTERS, 0, SNAP(failures), 0 },
	{ "counters", "released_pageblocks", "pageblocks returned to kernel", MB_BLOCK_COUNTERS, 0,
	  SNAP(count.released_pageblocks), 0 },
	{ "counters", "release_failures", NULL, MB_BLOCK_NONE, 0, SNAP(count.release_failures), 0 },
	{ "counters", "calloc_zero_skips", "calloc clears skipped", MB_BLOCK_COUNTERS, 0, SNAP(calloc_zero_skips), 0 },
	{ "counters", "realloc_inplace_grows", "realloc in place (grow/shrink)", MB_BLOCK_COUNTERS, MB_FIELD_PAIR,
	  SNAP(inplace_grows), 0 },
	{ "counters", "realloc_inplace_shrinks", NULL, MB_BLOCK_NONE, 0, SNAP(inplace_shrinks), 0 },

	{ "heap", "reserved_bytes", "reserved (address space)", MB_BLOCK_MEMORY, 0, SNAP(region_bytes),
	  API(reserved_bytes) },
	{ "heap", "resident_bytes", "resident (process RSS)", MB_BLOCK_MEMORY, 0, SNAP(rss_bytes), API(resident_bytes) },
	{ "heap", "peak_resident_bytes", "  peak (high-water mark)", MB_BLOCK_MEMORY, 0, SNAP(peak_rss_bytes),
	  API(peak_resident_bytes) },
	{ "heap", "buddy_allocated_bytes", "taken from the buddy", MB_BLOCK_MEMORY, 0, SNAP(buddy_allocated_bytes),
	  API(buddy_allocated_bytes) },
	{ "heap", "slab_bytes", "  of which slabs", MB_BLOCK_MEMORY, 0, SNAP(slab_bytes), 0 },
	{ "heap", "live_bytes", "live (usable size)", MB_BLOCK_MEMORY, MB_FIELD_SIGNED, SNAP(live_bytes), API(live_bytes) },
	{ "heap", "peak_live_bytes", "  peak (sampled)", MB_BLOCK_MEMORY, 0, SNAP(peak_live_bytes),
	  API(peak_live_bytes) },
	{ "heap", "live_large_requested_bytes", "live large (as requested)", MB_BLOCK_MEMORY, MB_FIELD_SIGNED,
	  SNAP(counts.live_requested), 0 },
	{ "heap", "idle_pool_bytes", "idle in the global pool", MB_BLOCK_MEMORY, 0, SNAP(idle_pool_bytes), 0 },
	{ "heap", "released_bytes", "returned to the kernel", MB_BLOCK_MEMORY, 0, SNAP(released_bytes),
	  API(released_bytes) },
	{ "heap", "metadata_bytes", "metadata in use (out of band)", MB_BLOCK_MEMORY, 0, SNAP(meta_bytes), 0 },

	{ "huge", "mode", NULL, MB_BLOCK_NONE, 0, SNAP(hp_mode), API(huge.mode) },
	{ "huge", "anon_huge_bytes", "in huge pages (AnonHugePages)", MB_BLOCK_HUGE, MB_FIELD_BYTES,
	  SNAP(account.heap_anon_huge), API(huge.anon_huge_bytes) },
	{ "huge", "huge_bytes", "collapsed units", MB_BLOCK_HUGE, MB_FIELD_BYTES, SNAP(huge_bytes),
	  API(huge.huge_bytes) },
	{ "huge", "huge_bytes_kernnorclm", "  in KernNoRclm pageblocks", MB_BLOCK_HUGE, MB_FIELD_BYTES,
	  SNAP(huge_bytes_type[MB_KERNNORCLM]), API(huge.huge_bytes_type[0]) },
	{ "huge", "huge_bytes_kernrclm", "  in KernRclm pageblocks", MB_BLOCK_HUGE, MB_FIELD_BYTES,
	  SNAP(huge_bytes_type[MB_KERNRCLM]), API(huge.huge_bytes_type[1]) },
	{ "huge", "huge_bytes_userrclm", "  in UserRclm pageblocks", MB_BLOCK_HUGE, MB_FIELD_BYTES,
	  SNAP(huge_bytes_type[MB_USERRCLM]), API(huge.huge_bytes_type[2]) },
	{ "huge", "huge_bytes_global", "  in the global pool", MB_BLOCK_HUGE, MB_FIELD_BYTES,
	  SNAP(huge_bytes_type[MB_NTYPES]), API(huge.huge_bytes_type[3]) },
	{ "huge", "collapses", "collapses asked/refused", MB_BLOCK_HUGE, MB_FIELD_PAIR, SNAP(count.hp_asked),
	  API(huge.collapses) },
	{ "huge", "collapses_refused", NULL, MB_BLOCK_NONE, 0, SNAP(count.hp_refused), API(huge.collapses_refused) },
	{ "huge", "collapses_unwritten", "collapses put off, unwritten", MB_BLOCK_HUGE, 0,
	  SNAP(count.hp_unwritten), API(huge_collapses_unwritten) },
	{ "huge", "demotions", "demoted (sparse, purged)", MB_BLOCK_HUGE, 0, SNAP(count.hp_demoted),
	  API(huge.demotions) },
	{ "huge", "kept_free_pages", "free pages kept in huge units", MB_BLOCK_HUGE, 0, SNAP(count.hp_kept_pages),
	  API(huge.kept_free_pages) },
};
const size_t mb_stats_nfields = sizeof mb_stats_fields / sizeof mb_stats_fields[0];

const struct mb_stats_type_field mb_stats_type_fields[] = {
	{ "pageblocks", SNAP(pb_owned), offsetof(struct mbuddy_type_stats, pageblocks) },
	{ "allocs", SNAP(count.allocs), offsetof(struct mbuddy_type_stats, allocs) },
	{ "fallbacks", SNAP(count.fallbacks), offsetof(struct mbuddy_type_stats, fallbacks) },
	{ "failures", SNAP(count.failures), offsetof(struct mbuddy_type_stats, failures) },
	{ "objects", SNAP(counts.mallocs), offsetof(struct mbuddy_type_stats, objects) },
};
const size_t mb_stats_ntype_fields = sizeof mb_stats_type_fields / sizeof mb_stats_type_fields[0];

const struct mb_stats_index mb_stats_indices[] = {
	{ "unusable_free_space", "unusable ", mb_unusable_free_index, offsetof(struct mbuddy_stats, unusable_free_space) },
	{ "fragmentation_index", "fragidx  ", mb_fragmentation_index, offsetof(struct mbuddy_stats, fragmentation_index) },
};
const size_t mb_stats_nindices = sizeof mb_stats_indices / sizeof mb_stats_indices[0];
