/* Per-thread caches of free small objects per (slab key, size class).
 * Entries are kept in arrays, never threaded through the objects, so user
 * memory never holds allocator pointers. */
#ifndef MB_TCACHE_H
#define MB_TCACHE_H

#include "compiler.h"
#include "heap.h"
#include "runcache.h"
#include "sizeclass.h"
#include "slab.h"
#include "thread.h"

/* A thread's tick (mb_tcache_tick) comes every time it has allocated this
 * many more bytes. */
#define MB_TCACHE_TICK_BYTES 65536

struct mb_tbin {
	uint32_t n, cap;
	struct mb_tentry *e;
};

struct mb_tcache {
	struct mb_tbin bin[MB_NKEYS][MB_NCLASSES]; /* cap 0 until the key's row exists */
	struct mb_counts counts;
	uint64_t next_tick;     /* counts.alloc_bytes at which mb_tcache_tick runs */
	uint64_t clock_sent;    /* counts.alloc_bytes already added to mb_alloc_clock */
	uint64_t flushed_ms;    /* when every bin was last emptied */
	struct mb_tcache *next, *prev; /* all live caches, for statistics */
	/* Entry storage of every class of one key, made on the key's first
	 * use: most threads touch one or two lanes of one or two types. */
	struct mb_tentry *row[MB_NKEYS];
	struct mb_runcache runs;  /* freed page runs of up to MB_RUN_MAX */
};

/* This thread's cache is mb_self.tc, and mb_self.tc_busy is set while it
 * is being created or torn down (thread.h); init.c decides when. */

/* A new, empty cache, counted among the live ones; NULL without memory. */
struct mb_tcache *mb_tcache_create(void);
/* Give every entry of tc back to the central structures, add its
 * counters to the heap's, free it. */
void mb_tcache_destroy(struct mb_tcache *tc);
/* Refill a bin from its central structure (slab.h); returns entries now in
 * the bin. */
uint32_t mb_tcache_refill(struct mb_tcache *tc, int key, unsigned sclass);
/* Give key's bins their storage; 0 on success (or if they have it). */
int mb_tcache_row(struct mb_tcache *tc, int key);
/* Give all but the newest `keep` entries of the bin of (key, class) back to
 * its central structure, as one batch. */
void mb_tcache_flush(struct mb_tcache *tc, int key, unsigned sclass, uint32_t keep);
/* Give every entry back: to the slabs themselves if to_slabs (at exit, at
 * trim, when the heap is full), else through the transfer caches; and the
 * cached page runs to the buddy. Returns the entries and runs given back. */
size_t mb_tcache_flush_all(struct mb_tcache *tc, int to_slabs);
/* Every MB_TCACHE_TICK_BYTES a thread allocates: advance the allocation clock and let
 * time-based work (cache flush, purge) happen even in a program whose
 * allocations never leave the fast path. */
void mb_tcache_tick(struct mb_tcache *tc);
/* On slow paths: empty every bin once per decay period, so objects cached
 * by a thread cannot keep idle slabs (and their pageblocks) alive. */
void mb_tcache_maybe_flush_all(struct mb_tcache *tc);
/* Every counter of the process: the heap's plus every live cache's, read
 * under the lock of the list of caches (which nests inside every other). */
void mb_tcache_sum_counts(struct mb_counts *out);

/* Around fork: the list's lock; in the child only the forking thread's
 * cache lives on. */
void mb_tcache_fork_prepare(void);
void mb_tcache_fork_parent(void);
void mb_tcache_fork_child(void);

/* ---- inline, for the fast paths ---- */

/* The bin of cache tc (this thread's, or NULL) that can serve n bytes of
 * key at once, with *c its size class; NULL when there is no cache, n is
 * not small or the bin is empty. The size class tables exist once the heap
 * is set up, which a cache implies. */
static inline struct mb_tbin *mb_tcache_ready_bin(struct mb_tcache *tc, size_t n, int key, unsigned *c)
{
	if (mb_likely(n <= MB_SMALL_MAX && tc != NULL)) {
		*c = mb_size_class(n);
		struct mb_tbin *bin = &tc->bin[key][*c];
		if (mb_likely(bin->n != 0))
			return bin;
	}
	return NULL;
}

/* Take the newest entry of a non-empty bin of class c, counted. */
static inline void *mb_tcache_pop(struct mb_tcache *tc, struct mb_tbin *bin, int key, unsigned c)
{
	struct mb_tentry e = bin->e[--bin->n];
	*e.st = MB_OBJ_ALLOCATED;
	tc->counts.mallocs[key]++;
	tc->counts.alloc_bytes += mb_classes[c].size;
	return e.p;
}

/* Whether the thread's next tick is due. */
static inline int mb_tcache_tick_due(const struct mb_tcache *tc)
{
	return tc->counts.alloc_bytes >= tc->next_tick;
}

/* Put p into cache tc (this thread's, or NULL) if it is a live small
 * object whose bin has room; 0 if it needs the general way (which also
 * catches NULL, foreign pointers and double frees). */
static inline int mb_tcache_push(struct mb_tcache *tc, void *p)
{
	struct mb_buddy *b = &mb_heap.buddy;
	uintptr_t off = (uintptr_t)p - b->base;
	if (mb_unlikely(off >= mb_heap.region_bytes))
		return 0;
	struct mb_page *m = &b->pages[off >> MB_PAGE_SHIFT];
	if (mb_unlikely(m->kind != MB_KIND_SLAB))
		return 0;
	/* Everything but the state byte comes from the page record and the
	 * class table. */
	unsigned c = m->sclass;
	const struct mb_class_info *ci = &mb_classes[c];
	uintptr_t start = ((uintptr_t)p & ~(uintptr_t)(MB_PAGE_SIZE - 1)) - ((uintptr_t)m->user16 << MB_PAGE_SHIFT);
	uintptr_t o = (uintptr_t)p - start;
	uint32_t i = (uint32_t)(((uint64_t)o * ci->magic) >> 32);
	struct mb_slab *s = m->user.ptr;
	/* i <= nobj, and state[nobj] is never MB_OBJ_ALLOCATED. */
	if (mb_unlikely((uintptr_t)i * ci->size != o || s->state[i] != MB_OBJ_ALLOCATED || tc == NULL))
		return 0;
	struct mb_tbin *bin = &tc->bin[m->user32][c];
	uint32_t n = bin->n;
	if (mb_unlikely(n >= bin->cap))
		return 0;
	s->state[i] = MB_OBJ_CACHED;
	tc->counts.frees++;
	tc->counts.freed_bytes += ci->size;
	bin->e[n].p = p;
	bin->e[n].st = &s->state[i];
	bin->n = n + 1;
	return 1;
}

#endif
