/* libmbuddy public interface. See libmbuddy(3). */
#ifndef MBUDDY_H
#define MBUDDY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The patch's reclaim types: how long an object is expected to live. */
enum mbuddy_type {
	MBUDDY_KERNNORCLM = 0, /* long-lived or never freed ("pinned") */
	MBUDDY_KERNRCLM = 1,   /* medium-lived, freed in bulk ("cache") */
	MBUDDY_USERRCLM = 2,   /* short-lived ("short") */
};

/* Allocate with an explicit type: the GFP-flag equivalent. Free the result
 * with free(). An invalid type gives NULL with errno = EINVAL. */
void *mbuddy_malloc(size_t size, int type);
void *mbuddy_calloc(size_t nmemb, size_t size, int type);

/* ---- statistics (see STATISTICS in libmbuddy(3)) ---- */

#define MBUDDY_MAX_ORDERS 16
enum { MBUDDY_STATS_TEXT = 0, MBUDDY_STATS_JSON = 1 };

struct mbuddy_type_stats {
	unsigned long long free[MBUDDY_MAX_ORDERS]; /* free blocks per order */
	unsigned long long pageblocks; /* pageblocks owned */
	unsigned long long allocs;     /* buddy allocations requested */
	unsigned long long fallbacks;  /* of those, served from another type */
	unsigned long long failures;   /* of those, refused for lack of memory */
	unsigned long long objects;    /* malloc-level allocations of this type */
};

/* Where the resident memory of the process is, in bytes: the parts add
 * up to `resident` (see "Where the resident memory is" in STATISTICS of
 * libmbuddy(3)). */
struct mbuddy_account {
	unsigned long long resident;
	unsigned long long small_requested, small_rounding; /* live small objects */
	unsigned long long large_requested, large_rounding; /* live large objects */
	unsigned long long slab_free;        /* free objects in slabs, of which: */
	unsigned long long slab_free_current, slab_free_partial, slab_free_full, slab_free_abandoned;
	unsigned long long slab_tail;        /* slabs past their last object */
	unsigned long long run_cache;        /* runs cached by threads */
	unsigned long long free_pages;       /* free, not yet returned to the kernel */
	unsigned long long metadata;         /* the allocator's own mappings */
	unsigned long long file_backed;      /* not heap: program and libraries */
	unsigned long long main_stack;
	unsigned long long other_anonymous;
};

/* Huge pages (see "Huge pages" in STATISTICS of libmbuddy(3)). */
struct mbuddy_huge {
	unsigned long long mode;            /* in force: 0 auto, 1 always, 2 never */
	unsigned long long anon_huge_bytes; /* AnonHugePages of the heap region (smaps) */
	unsigned long long huge_bytes;      /* 2 MiB units collapsed at libmbuddy's request */
	unsigned long long huge_bytes_type[4]; /* of those, by the pageblock's type; [3]: the global pool */
	unsigned long long collapses;       /* MADV_COLLAPSE calls */
	unsigned long long collapses_refused; /* of those, refused by the kernel */
	unsigned long long demotions;       /* huge units whose free pages went back once sparse */
	unsigned long long kept_free_pages; /* free pages purges left in dense huge units */
};

/* New fields are only ever added at the end: a program reads the
 * statistics with the size of the structure it was built with
 * (mbuddy_stats_read), so a library with more fields writes only what the
 * program knows of, and one with fewer leaves the rest zero. */
struct mbuddy_stats {
	unsigned max_order;            /* MAX_ORDER; pageblock order is max_order-1 */
	unsigned long long pageblock_bytes;
	unsigned long long reserved_bytes;       /* the heap region */
	unsigned long long resident_bytes;       /* process RSS */
	unsigned long long buddy_allocated_bytes;
	unsigned long long live_bytes;           /* usable bytes of live objects */
	unsigned long long released_bytes;       /* returned to the kernel so far */
	unsigned long long global_free_pageblocks;
	unsigned long long global_resident_pageblocks;
	unsigned long long global_steals, global_refills;
	unsigned long long mallocs, frees;
	struct mbuddy_type_stats types[3];
	double unusable_free_space[MBUDDY_MAX_ORDERS];
	double fragmentation_index[MBUDDY_MAX_ORDERS];
	/* The first layout ended here, and the exported mbuddy_stats_get,
	 * which programs built with it call, writes no further. Added since: */
	unsigned long long peak_resident_bytes;  /* high-water mark of RSS */
	unsigned long long peak_live_bytes;      /* highest live_bytes sampled */
	int served;        /* 0: the process's malloc is not libmbuddy's */
	struct mbuddy_account account;         /* now */
	struct mbuddy_account account_at_peak; /* when RSS last rose a tenth; zero if never taken */
	struct mbuddy_huge huge;
	/* Of account.slab_free and account_at_peak.slab_free: objects freed
	 * into threads' caches, which hand them out again first. */
	unsigned long long account_slab_free_cached;
	unsigned long long account_at_peak_slab_free_cached;
	/* Dense 2 MiB units not collapsed because too few of their pages
	 * were resident (huge.collapses counts the calls made). */
	unsigned long long huge_collapses_unwritten;
};

/* Fill *st, of `size` bytes (pass sizeof *st), with a snapshot of the
 * heap: the whole fields that fit in size, nothing after them. Returns the
 * number of bytes filled; a larger size than this library's structure
 * gets its bytes past that set to zero (fields it does not know). -1 if st
 * is NULL (EINVAL) or the heap could not be set up. */
int mbuddy_stats_read(struct mbuddy_stats *st, size_t size);
/* Fill *st with a snapshot of the heap. Returns 0, or -1 if the heap could
 * not be set up. The exported function serves programs built before
 * mbuddy_stats_read existed and writes only the fields they knew (up to
 * fragmentation_index); a program built with this header calls
 * mbuddy_stats_read with the size of its structure instead. */
int mbuddy_stats_get(struct mbuddy_stats *st);
#define mbuddy_stats_get(st) (mbuddy_stats_read((st), sizeof *(st)) < 0 ? -1 : 0)
/* Write the report to a file descriptor in MBUDDY_STATS_TEXT or _JSON. */
int mbuddy_stats_print(int fd, int format);
/* The reclaim type live allocation p was made with (the slab or large
 * object holding it), or -1. With fallbacks, the pageblock around it may
 * belong to another type. */
int mbuddy_pointer_type(const void *p);

/* Give every allocation of this thread the type `type` (or, with -1, let
 * call-site classification decide again). Returns the previous setting. */
int mbuddy_set_thread_type(int type);

#ifdef __cplusplus
}
#endif

#endif
