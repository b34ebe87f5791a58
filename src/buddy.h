/* The typed buddy allocator of Mel Gorman's 2005 patch, over the
 * 4 KiB pages of one reserved region.
 *
 * Three free-list arrays [type][order] for orders below the pageblock order,
 * a global pool of whole pageblocks (2^(MAX_ORDER-1) pages), a 2-bit usemap
 * that records which type owns each pageblock, and the patch's fallback
 * order. All metadata lives outside the region, like the kernel's struct
 * page array. The core knows nothing of malloc, threads or locking: callers
 * serialise access. */
#ifndef MB_BUDDY_H
#define MB_BUDDY_H

#include <stddef.h>
#include <stdint.h>

#include "compiler.h"
#include "reclaim_type.h"

#define MB_PAGE_SHIFT 12
#define MB_PAGE_SIZE ((size_t)1 << MB_PAGE_SHIFT)

/* MAX_ORDER as in the patch: orders 0 .. MAX_ORDER-1; the largest block,
 * order MAX_ORDER-1, is the pageblock. */
#define MB_MAX_ORDER_DEFAULT 11
#define MB_MAX_ORDER_MIN 6  /* pageblock of 128 KiB: room for every slab */
#define MB_MAX_ORDER_MAX 16 /* pageblock of 128 MiB */

#define MB_NIL UINT32_MAX

/* mb_buddy_pb_type() of a pageblock in the global pool. The usemap stores
 * type + 1, so that its all-zero start reads "global" everywhere. */
#define MB_PB_GLOBAL 3

/* Per-pageblock flags (pb_flags). All zero, as the untouched reservation
 * reads, means: in the global pool, clean, no page records. Set-up thus
 * writes nothing per pageblock, and neither does a run of whole
 * pageblocks: their page records stay zero but for the run's first. */
#define MB_PBF_DIRTY 0x1   /* a page may hold data: not known to read as zero */
#define MB_PBF_RECORDS 0x2 /* the page records describe every page (else they
			    * are all zero, except the head of a run that
			    * starts here) */
#define MB_PBF_QUEUED 0x4  /* on a purge queue: the resident one (global and
			    * dirty) or the freed one (owned, with dirty
			    * free pages) */
#define MB_PBF_INFLIGHT 0x8 /* global, being handed back: out of the pool */
#define MB_PBF_TAILS 0x10   /* may hold blocks whose reserved pages are dirty
			     * (mb_buddy_alloc_block): the purge looks */

enum mb_page_state {
	MB_PG_NONE = 0,  /* inside a block, or never used */
	MB_PG_FREE = 1,  /* head of a free block on a type's list */
	MB_PG_ALLOC = 2, /* first page of an allocation */
	MB_PG_TAIL = 3,  /* a later page of an allocation */
	MB_PG_PURGING = 4, /* head of a free block being handed back to the
			    * kernel: on no list until mb_buddy_purge_done() */
};

#define MB_PGF_DIRTY 0x1 /* written since the kernel last gave it to us zeroed */
#define MB_PGF_TAIL_BUSY 0x2 /* head of a block whose reserved pages the purge
			      * is handing back: it must wait (large.c) */

/* One per page of the region, 32 bytes. */
struct mb_page {
	union {
		uint32_t next; /* free-list link (free heads) */
		uint32_t used; /* alloc heads of a block (mb_buddy_alloc_block):
				* the pages in use, the rest reserved; 0: all */
	};
	union {
		uint32_t prev;       /* free-list link (free heads) */
		uint32_t tail_since; /* alloc heads of a block: the clock (low 32
				      * bits) when dirty pages were last left
				      * among its reserved ones */
	};
	uint8_t order;       /* block order (free heads) */
	uint8_t state;       /* enum mb_page_state */
	uint8_t flags;       /* MB_PGF_* */
	uint8_t type;        /* type the allocation asked for (alloc heads) */
	uint32_t npages;     /* allocation length in pages (alloc heads) */
	/* The fields below belong to the layer above; the buddy never reads
	 * them. Kept here so one lookup answers "what is this address". */
	uint8_t kind;
	uint8_t sclass;
	uint16_t user16;
	uint32_t user32;
	union {
		void *ptr;
		uint64_t u64;
	} user;
};

struct mb_free_area {
	uint32_t head, tail;
	uint64_t nr_free;
};

/* The patch's bean counters, plus the ones a process heap needs. */
struct mb_buddy_counters {
	uint64_t global_steals;       /* pageblocks taken from the global pool */
	uint64_t global_refills;      /* pageblocks returned to the global pool */
	uint64_t allocs[MB_NTYPES];   /* buddy allocations requested per type */
	uint64_t fallbacks[MB_NTYPES];/* served from another type's lists */
	uint64_t failures[MB_NTYPES]; /* requests that found no memory */
	uint64_t released_pageblocks; /* pageblocks handed back to the kernel */
	uint64_t release_failures;    /* madvise calls that failed */
	/* Huge pages (the units below). */
	uint64_t hp_asked;            /* MADV_COLLAPSE calls made */
	uint64_t hp_collapsed;        /* of those, the kernel built a huge page */
	uint64_t hp_refused;          /* of those, refused (EAGAIN, ENOMEM, EINVAL...) */
	uint64_t hp_demoted;          /* huge units purged once they fell sparse */
	uint64_t hp_kept_pages;       /* free pages a purge left in dense huge units */
	uint64_t hp_unwritten;        /* dense units not collapsed: too few pages resident */
};

/* Huge pages. The kernel's transparent huge page covers 2 MiB, 512 of the
 * buddy's pages: a "unit". With huge pages on (mb_buddy.hp_on), the buddy
 * counts the pages allocated in each unit; a unit that reaches
 * hp_promote pages becomes a candidate (MB_HPF_CAND), which the purge
 * layer collapses into a huge page with no lock held (huge.c). A purge
 * leaves the free pages of a huge unit resident while it holds at least
 * hp_demote allocated pages (splitting a huge page to return a few 4 KiB
 * pages costs every other page its TLB reach); below, the unit is demoted
 * and its free pages go back as any others. A wholly free unit goes back
 * whole. Units exist only when a pageblock holds whole units.
 * A collapse makes every page of the unit resident: one whose pages were
 * allocated but mostly not written (the untouched end of a large
 * object or a new slab) is not collapsed while fewer than hp_resident of
 * them are resident. It is looked at again after hp_recheck_min_ms, the
 * wait doubling (up to MB_HP_RECHECK_GROWTH times) while no unit turns
 * dense, so that a program filling a buffer slowly gets its huge pages and
 * an idle one is not woken for nothing. */
#define MB_HP_RECHECK_GROWTH 64
#define MB_HP_SHIFT 9
#define MB_HP_PAGES ((size_t)1 << MB_HP_SHIFT)
#define MB_HPF_HUGE 0x1  /* collapsed: the kernel maps it with one huge page */
#define MB_HPF_CAND 0x2  /* dense: waits for a collapse */
#define MB_HPF_TRY1 0x4  /* one collapse was refused */
#define MB_HPF_NOMORE 0x8 /* two were: no more until the unit empties */
#define MB_HPF_UNWRITTEN 0x10 /* dense, but fewer than hp_resident of its pages
			       * were resident: looked at again later */

/* Users of mb_buddy_alloc_home() and mb_buddy_alloc_shared() (the slab
 * layer's keys). */
#define MB_BUDDY_HOMES 16

struct mb_buddy {
	/* Set by mb_buddy_init, then only read: every free looks its
	 * pointer up through base, npages and pages. */
	MB_LINE_ALIGNED uintptr_t base;
	size_t npages;
	size_t nblocks;       /* pageblocks in the region */
	unsigned max_order;   /* MAX_ORDER */
	unsigned pb_order;    /* MAX_ORDER - 1 */
	size_t pb_pages;

	struct mb_page *pages; /* npages entries */
	/* Per page of a slab: its class's magic number (sizeclass.h),
	 * written by the slab layer when it carves the slab; the buddy never
	 * reads it, and hands its pages back with a pageblock's records.
	 * Here, so that the free fast path loads it beside the page record
	 * rather than from the class table after it (its chain of dependent
	 * loads is its cost). */
	uint32_t *slab_magic;
	uint64_t *usemap;      /* 2 bits per pageblock: owner type + 1, 0 = global */
	uint64_t *owned_map;   /* 1 bit per pageblock: out of the global pool */
	uint8_t *pb_flags;     /* MB_PBF_* */
	uint32_t *pb_used;     /* pages allocated in each pageblock */

	/* The purge queues, oldest first, so memory goes back to the kernel
	 * in the order it fell idle: resident ("dirty") pageblocks of the
	 * global pool, and owned pageblocks where dirty pages were freed,
	 * stamped with the clock when the first of them was. A pageblock is
	 * on one queue at most. Links hold index + 1, so that zero means
	 * none. */
	uint32_t *pb_next, *pb_prev;
	uint64_t *pb_freed_at;
	/* When an owned pageblock joined the freed queue; its stamp starts
	 * over each time memory is taken from it again, but only for
	 * max_wait_ms: a pageblock that the program keeps dipping into must
	 * still give back its other free pages. 0: no limit. */
	uint64_t *pb_queued_since;
	uint64_t max_wait_ms;
	/* Free memory of an owned pageblock of type t counts as idle this
	 * much sooner than it was freed (its stamp is this much earlier):
	 * the purge's decay is shorter by as much for that type. 0 for
	 * every type unless set (purge.c). */
	uint64_t head_start_ms[MB_NTYPES];
	/* What follows changes under the heap's lock: from a line of its own
	 * on. */
	MB_LINE_ALIGNED uint32_t dirty_head, dirty_tail; /* MB_NIL when empty */
	size_t nr_dirty;
	/* The freed queues, one per type of the pageblocks on it (so that
	 * each stays in the order of its stamps with its own head start);
	 * mb_buddy_nr_freed() counts all three. */
	uint32_t freed_head[MB_NTYPES], freed_tail[MB_NTYPES];
	size_t nr_freed_of[MB_NTYPES];
	uint64_t oldest;      /* the oldest stamp on any queue or dirty
			       * reserved pages of a block, UINT64_MAX if
			       * none; may be read without the lock */
	size_t nr_tails;      /* pageblocks flagged MB_PBF_TAILS */
	uint64_t tails_oldest; /* no block left dirty reserved pages before
				* this, UINT64_MAX: none did */
	size_t nr_inflight;   /* global pageblocks being handed back */
	size_t pages_inflight; /* pages of free blocks being handed back */
	size_t clean_hint; /* no clean global pageblock below this index */
	size_t pb_high;    /* pageblocks below this index have been used; the
			    * ones above are global and clean, unlooked at */

	struct mb_free_area free_area[MB_NTYPES][MB_MAX_ORDER_MAX];
	long home[MB_BUDDY_HOMES]; /* each home user's current pageblock, or -1 */
	size_t nr_global;
	size_t nr_records;    /* pageblocks whose page records are in use */
	size_t pb_owned[MB_NTYPES];
	size_t pages_allocated;
	struct mb_buddy_counters count;

	uint64_t clock; /* caller's clock, stamped on pageblocks as they idle */
	uint64_t fresh_pages; /* clean pages handed out while freed memory was
			       * queued for release (purge.h, mb_purge_offset) */
	int (*release)(void *addr, size_t len);

	/* Huge pages (above): per 2 MiB unit, pages allocated and MB_HPF_*
	 * flags; nunits is 0 when pageblocks are smaller than a unit. */
	uint16_t *hp_used;
	uint8_t *hp_flags;
	size_t nunits;
	int hp_on;            /* candidates are marked and huge units kept */
	int hp_all;           /* every unit may be huge (MBUDDY_HUGEPAGES=always) */
	uint32_t hp_promote;  /* pages allocated that make a unit a candidate */
	uint32_t hp_demote;   /* below this, a huge unit is purged as any */
	size_t hp_pending;    /* units marked MB_HPF_CAND */
	uint64_t hp_due;      /* when the oldest candidate may be collapsed
			       * (clock + settle time), UINT64_MAX if none;
			       * may be read without the lock */
	uint64_t hp_settle_ms;
	uint32_t hp_resident;       /* resident pages a collapse needs */
	size_t hp_nr_unwritten;     /* units flagged MB_HPF_UNWRITTEN */
	uint64_t hp_recheck_at;     /* when they are looked at again, UINT64_MAX if none */
	uint64_t hp_recheck_ms;     /* the wait after that */
	uint64_t hp_recheck_min_ms;

	size_t meta_bytes; /* size of the metadata reservation */
	void *meta_base;
};

/* The patch's fallback_allocs table. */
extern const int mb_fallback_order[MB_NTYPES][MB_NTYPES];

/* Set up the buddy over [base, base+size); base must be aligned to the
 * pageblock size and size a multiple of it. Metadata comes from its own
 * reservation. Returns 0, or -1 with errno set. */
int mb_buddy_init(struct mb_buddy *b, void *base, size_t size, unsigned max_order);
void mb_buddy_destroy(struct mb_buddy *b);
/* The parts of the metadata reservation that can have been written: the
 * page records and slab magic numbers of the pageblocks below pb_high,
 * and the per-pageblock arrays. The rest of the page array is sized for
 * the whole region and never touched (the account counts only these
 * parts: mincore over 600 MB of untouched records would cost more than
 * the rest of a report). Returns how many of 3 spans it filled. */
int mb_buddy_meta_spans(const struct mb_buddy *b, uintptr_t lo[3], uintptr_t hi[3]);

/* Allocate exactly npages pages of the given type. A request of 2^k pages is
 * one order-k block. Other sizes take a row of free blocks where one starts
 * with resident pages, else the next order and give the tail back: the
 * first page is aligned to the largest power of two that divides npages at
 * least, no more. More than a pageblock takes a run of whole global
 * pageblocks. Returns the first page index, or -1. *zeroed (may be NULL) is
 * set when every page is known to read as zero. */
long mb_buddy_alloc(struct mb_buddy *b, size_t npages, enum mb_type type, int *zeroed);
/* The same, the first page aligned to align pages (a power of two, at most
 * a pageblock's pages). */
long mb_buddy_alloc_aligned(struct mb_buddy *b, size_t npages, size_t align, enum mb_type type, int *zeroed);
/* The same for home user `who` (< MB_BUDDY_HOMES), who fills one pageblock
 * of its own at a time: first its current home, then a free block outside
 * every other user's home, then a whole pageblock from the global pool, and
 * only then anything rmqueue finds. A user's pages stay together instead of
 * interleaving with other users', so what one user frees leaves pageblocks
 * whole. Only blocks of up to a pageblock use the home. */
long mb_buddy_alloc_home(struct mb_buddy *b, size_t npages, enum mb_type type, int who, int *zeroed);
/* The same for user `who` (< MB_BUDDY_HOMES) that shares its type's
 * pageblocks: the memory mb_buddy_alloc() would take, resident first, but
 * never in another user's home; the pageblock it comes from becomes who's
 * home, which the other users keep out of in turn. Filling a home first
 * would carve clean pages while the memory the user just freed lies in
 * other pageblocks, resident and idle until the purge hands it back:
 * with the slab keys of the types so (slab.c), mstress-like churn (threads
 * replaced every round) peaked at 22.8 MiB instead of 16.9. */
long mb_buddy_alloc_shared(struct mb_buddy *b, size_t npages, enum mb_type type, int who, int *zeroed);

/* A request of npages (not a power of two, the next one at most a
 * pageblock) as the first pages of a whole aligned block of the next power
 * of two, one allocation: its other pages are reserved for it, never
 * handed to another request. So when it is freed the block comes back
 * whole. Trimmed to npages, its tail would go to requests of other sizes,
 * and what the allocation leaves when freed would be pieces that fit no
 * request of its size: the holes a program's buffers of 64 KiB plus a
 * header leave (17 pages, git), which the heap cannot reuse and grows
 * beside. Reserved pages that an earlier user of the block wrote stay as
 * they are, resident, while the block is young: the next block of its
 * size would have to fault them in again; those of a block that lives on
 * past the decay time go back to the kernel with the purge
 * (mb_buddy_purge_take), as free memory does. *zeroed says whether the
 * first npages read as zero. Returns the first page, or -1. */
long mb_buddy_alloc_block(struct mb_buddy *b, size_t npages, enum mb_type type, int *zeroed);
/* Change how many pages of block allocation idx are in use, within its
 * block: those below `used` are the caller's (dirty from now on), the rest
 * reserved. Reserved pages do not count toward a 2 MiB unit's pages in
 * use: a unit of blocks half used is no candidate for a huge page, whose
 * collapse would make them resident. Growing an allocation past its block
 * (mb_buddy_resize) makes every page of it in use. Not while the purge
 * hands its reserved pages back (MB_PGF_TAIL_BUSY). */
void mb_buddy_block_use(struct mb_buddy *b, size_t idx, size_t used);

/* The pages allocation h (a head) uses: all but a block's reserved ones. */
static inline size_t mb_buddy_pages_used(const struct mb_page *h)
{
	return h->used ? h->used : h->npages;
}

/* Free the allocation whose first page is idx (state MB_PG_ALLOC; the caller
 * validates). Returns its length in pages. */
size_t mb_buddy_free(struct mb_buddy *b, size_t idx);

/* Change an allocation's length in place: shrinking always works, growing
 * works when the following pages are free. Returns 0 on success, -1 when
 * the allocation was left unchanged. */
int mb_buddy_resize(struct mb_buddy *b, size_t idx, size_t new_npages);

/* ---- memory return, in three steps so that the kernel is called
 * without the caller's lock ----
 * take: under the lock, free dirty memory of the pageblocks queued at or
 * before `idle_since` (oldest first) comes off the free lists and out of
 * the pool as ranges, neighbours coalesced: whole global pageblocks, and
 * spans of adjacent free blocks in owned ones. Nothing can hand it out.
 * Then, room left, the dirty reserved pages of blocks that left them so
 * at or before `idle_since`: their blocks are flagged MB_PGF_TAIL_BUSY.
 * release: without the lock, madvise each range.
 * done: under the lock, the ranges go back, clean where the kernel took
 * them, and merge as frees do; a block's reserved pages stay its own. */
#define MB_PURGE_RANGES 32
struct mb_purge_range {
	size_t idx, npages;
	size_t head;    /* reserved pages of a block: its head; else idx */
	uint8_t global; /* whole pageblocks of the global pool */
	uint8_t tail;   /* reserved pages of a live block */
	uint8_t ok;     /* the kernel took it */
};
struct mb_purge_batch {
	unsigned n;
	size_t pages;
	struct mb_purge_range r[MB_PURGE_RANGES];
};
/* Take about `budget` pages at most (one pageblock or one span of free
 * blocks always fits). Returns the pages taken. */
size_t mb_buddy_purge_take(struct mb_buddy *b, uint64_t idle_since, size_t budget, struct mb_purge_batch *bt);
void mb_buddy_purge_release(const struct mb_buddy *b, struct mb_purge_batch *bt);
void mb_buddy_purge_done(struct mb_buddy *b, struct mb_purge_batch *bt);
/* The three in a row, until `budget` pages or nothing is left: for callers
 * that need not drop a lock. Returns the pages released. */
size_t mb_buddy_purge(struct mb_buddy *b, uint64_t idle_since, size_t budget);

/* Cut the allocation at idx in two at page `at`: [idx, at) and the rest
 * become separate allocations of the same type. */
void mb_buddy_split(struct mb_buddy *b, size_t idx, size_t at);

/* Consistency checker: returns 0, or -1 with a description in err. */
int mb_buddy_check(const struct mb_buddy *b, char *err, size_t errlen);

static inline int mb_buddy_pb_type(const struct mb_buddy *b, size_t pb)
{
	unsigned stored = (unsigned)(b->usemap[pb / 32] >> ((pb % 32) * 2)) & 3;
	return (int)((stored + 3) & 3); /* 0 (untouched) reads MB_PB_GLOBAL */
}

/* Whether pageblock pb holds pages the kernel would have to give back. */
static inline int mb_buddy_pb_resident(const struct mb_buddy *b, size_t pb)
{
	return mb_buddy_pb_type(b, pb) != MB_PB_GLOBAL || (b->pb_flags[pb] & MB_PBF_DIRTY);
}

/* Whether page idx belongs to an allocation: pages inside a run of whole
 * pageblocks have no record of their own. */
static inline int mb_buddy_page_allocated(const struct mb_buddy *b, size_t idx)
{
	size_t pb = idx >> b->pb_order;
	if (mb_buddy_pb_type(b, pb) == MB_PB_GLOBAL)
		return 0;
	if (!(b->pb_flags[pb] & MB_PBF_RECORDS))
		return 1;
	return b->pages[idx].state == MB_PG_ALLOC || b->pages[idx].state == MB_PG_TAIL;
}

/* Owned pageblocks on the freed queues, of every type. */
static inline size_t mb_buddy_nr_freed(const struct mb_buddy *b)
{
	size_t n = 0;
	for (int t = 0; t < MB_NTYPES; t++)
		n += b->nr_freed_of[t];
	return n;
}

static inline size_t mb_buddy_page_index(const struct mb_buddy *b, const void *p)
{
	return ((uintptr_t)p - b->base) >> MB_PAGE_SHIFT;
}

static inline void *mb_buddy_page_addr(const struct mb_buddy *b, size_t idx)
{
	return (void *)(b->base + (idx << MB_PAGE_SHIFT));
}

static inline int mb_buddy_contains(const struct mb_buddy *b, const void *p)
{
	return (uintptr_t)p - b->base < (b->npages << MB_PAGE_SHIFT);
}

/* Whether a purge must leave page idx resident: it lies in a unit that is
 * (or, with hp_all, may be) one huge page, still dense. A hint that may be
 * read without the lock. */
static inline int mb_buddy_hp_keep(const struct mb_buddy *b, size_t idx)
{
	if (!b->hp_on || !b->nunits)
		return 0;
	size_t u = idx >> MB_HP_SHIFT;
	return (b->hp_all || (b->hp_flags[u] & MB_HPF_HUGE)) && b->hp_used[u] >= b->hp_demote;
}

/* Huge pages, under the lock: up to max candidates still dense, their
 * MB_HPF_CAND (and MB_HPF_UNWRITTEN) cleared, into units[] (those no
 * longer dense are dropped); the unwritten units become candidates again
 * first if their wait is over. Returns how many. */
size_t mb_buddy_hp_take(struct mb_buddy *b, size_t *units, size_t max);
/* What became of unit u: collapsed; refused (tried once more after the
 * settle time, then not until the unit empties); or unwritten (looked at
 * again once the wait is over, or when the unit next takes pages). */
enum mb_hp_result {
	MB_HP_COLLAPSED,  /* the kernel built the huge page */
	MB_HP_REFUSED,    /* it refused */
	MB_HP_UNWRITTEN,  /* not asked: fewer than hp_resident pages resident */
};
void mb_buddy_hp_done(struct mb_buddy *b, size_t u, enum mb_hp_result r);

/* Free-block counts for the kernel's fragmentation indices (see stats). */
static inline uint64_t mb_buddy_nr_free(const struct mb_buddy *b, int type, unsigned order)
{
	return b->free_area[type][order].nr_free;
}

#endif
