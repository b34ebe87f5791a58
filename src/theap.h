/* Thread heaps: each thread allocates small objects from slabs it owns,
 * one current slab per (slab key, size class), and frees into them, with
 * no atomic operation and no lock (the free fast path of alloc.h). An
 * object of another thread's slab goes back with one atomic OR on that
 * slab (slab.h), which its owner collects when its current slab runs dry.
 *
 * In front of the slabs, a heap's thread cache keeps, per (key, class),
 * the last few objects the thread freed into its own slabs (up to
 * MB_TCACHE_MAX, and MB_TCACHE_BYTES of a class), and hands them out
 * again first, last in first out: an object freed a moment ago is still in
 * the processor's cache, where the slab's lowest free bit is not. The
 * objects stay out of band (the slab's cached bits, slab.h, or the hot
 * slot: struct mb_tcache): a cached object counts as used in its slab, so
 * the purge leaves its page and the slab cannot empty under it, and a
 * second free of it is a double free.
 * The cache goes back into the slabs when the heap gives memory back, at
 * thread exit, and bin by bin once no allocation took from a bin for a
 * purge period (mb_theap_tick), when the bin's current slab also stops
 * being current (the purge leaves current slabs alone), so that a class
 * the program stopped using does not keep its last objects' pages
 * resident; and at once when the bin sheds, freeing on and on with no
 * allocation (mb_theap_look).
 *
 * Besides its current slabs a heap keeps, per (key, class), the slabs it
 * owns with free objects (partial), without (full), and a few it emptied
 * (empty, up to MB_THEAP_EMPTY_BYTES in all), so that a class whose live
 * objects come and go around a slab's worth does not take a slab from the
 * buddy, under the heap lock of heap.h, and give it back at every turn;
 * the sweep of the purge gives them back. Those lists are
 * guarded by the heap's lock, which the owner takes only when a slab
 * changes lists, another thread only to move a full slab it freed into to
 * the partial list, and the purge to hand back the free pages of sparse
 * partial slabs (a slab the owner may allocate from is never touched).
 * When a thread exits, its slabs with live objects are abandoned (slab.h)
 * and its heap is kept for the next thread: nothing is unmapped, so a
 * thread that still holds a pointer to it never reads freed memory.
 *
 * Lock order: (the account's and the purge lock, outside this file,) the
 * orphan heap's lock, the list of heaps, heap locks (in list order), the
 * abandoned lists' locks, the heap lock of heap.h. */
#ifndef MB_THEAP_H
#define MB_THEAP_H

#include "compiler.h"
#include "heap.h"
#include "inbox.h"
#include "lockstat.h"
#include "runcache.h"
#include "sizeclass.h"
#include "slab.h"
#include "thread.h"

/* One (key, class) of a heap: the slab its allocations come from once
 * the thread cache is empty. Its counters are the thread cache's, whose
 * first line every malloc and free writes anyway. */
struct mb_bin {
	struct mb_slab *cur; /* never NULL: mb_slab_none when there is none */
};

/* One (key, class) of a thread cache: its hot object, and a stack of
 * objects freed by the owner, each with where its cached bit is (the slab
 * word's address, and the bit's index in the top byte: descriptors are
 * mapped below 2^47), so that taking one back touches nothing but that
 * word: no page record, no slab header.
 *
 * A free that finds the cache empty makes its object hot, not marked in
 * its slab; the next ones go on the stack, marked; a malloc takes the
 * stack's top, and the hot object once the stack is empty: last in, first
 * out all the same. A free followed by a malloc of the class (the
 * commonest pattern there is) then writes no bitmap word: with a cached
 * bit set by each free and cleared by each malloc, every call waited on
 * the one before through that word (fastpath's pair 13.8 -> 8.5 ns). So
 * an object is cached when its cached bit is set or it is its owner's hot
 * object: a second free of it is caught by the fast path's pointer test
 * and live_or_die (alloc.c) for the owner, by another thread's free
 * (mb_theap_free, by the slab's hot field: the owner's thread cache is a
 * line it writes at every call), and, when a free by another thread raced
 * the owner's, before the owner hands it out again (mb_theap_pop leaves
 * that to mb_theap_alloc_slow when the slab has remote frees), collects
 * its slab or puts its cache back. n + (hot != NULL) is at most cap.
 * 512 bytes, so that indexing one is a shift. The bin's counters share
 * the line of n, which every malloc and free of the bin writes. */
struct mb_tcache {
	uint32_t n;
	uint32_t cap;    /* mb_classes[].cache_cap, where n is; 0 while the
			  * bin sheds (mb_theap_look) */
	uint64_t nalloc; /* objects handed out */
	uint64_t req;    /* bytes asked for, for the rounding estimate */
	uint64_t nfree;  /* objects this thread freed, whoever owns them */
	void *hot;       /* atomic (the account reads it); NULL: none */
	struct mb_slab *hot_slab;
	struct {
		void *p;
		uintptr_t bit_at;
	} __attribute__((aligned(16))) e[MB_TCACHE_MAX - 1]; /* none across two lines */
} __attribute__((aligned(128)));
#define MB_TCACHE_BIT_SHIFT 56
/* Shedding (mb_theap_look): every MB_TCACHE_STORM_EVERY frees of a bin
 * that find its cache full, a look at whether it allocated since the look
 * before; MB_TCACHE_SHED looks in a row that find it did not (256 frees or
 * more with no allocation) and the bin sheds its cache. A burst that frees
 * a few caches' worth and takes them back (fastpath's batch: 64 at a
 * time) keeps it; a load that drops sheds it. */
#define MB_TCACHE_STORM_EVERY 64
#define MB_TCACHE_SHED 4

struct mb_slabq {
	struct mb_slab *head;
	uint32_t n;
};

/* Bytes of empty slabs a heap keeps at most, until the purge's sweep. A
 * slab given back at once is split by the next request of another size
 * (a run, a slab of another class) and the next slab of its class takes
 * fresh pages: with 1 MiB, glibc-thread peaked at 20.5 MiB, 12.3 with 4
 * (free pages not yet returned at the peak 4.8 -> 1.1 MiB); 8 and 16
 * MiB change nothing more. */
#define MB_THEAP_EMPTY_BYTES ((size_t)4096 << 10)

struct mb_theap {
	struct mb_bin bin[MB_NKEYS][MB_NCLASSES];
	uint32_t id;               /* its own, from 1, in its slabs' page records (slab.h) */
	struct mb_tcache tc[MB_NKEYS * MB_NCLASSES]; /* by slab->bin */
	struct mb_counts counts;   /* large objects (small ones: the bins) */
	uint32_t slow_calls;       /* slow paths since the last look at the clock */
	uint64_t flushed_ms;       /* when the run cache was last given back */
	uint64_t aged_ms;          /* when the thread cache was last aged */
	/* Per bin, the low 32 bits of tc[].nalloc when the thread cache was
	 * last aged: a bin whose count has not moved since is idle. */
	uint32_t aged_nalloc[MB_NKEYS * MB_NCLASSES];
	struct mb_lock lock;       /* the lists, and which slab is current */
	struct mb_slabq partial[MB_NKEYS][MB_NCLASSES];
	struct mb_slabq full[MB_NKEYS][MB_NCLASSES];
	struct mb_slabq empty[MB_NKEYS][MB_NCLASSES];
	size_t empty_bytes;        /* of the slabs on the empty lists */
	/* Set by another thread that freed into a full slab of (key, class):
	 * the owner moves such slabs to the partial list. */
	uint8_t revive[MB_NKEYS][MB_NCLASSES] __attribute__((aligned(64)));
	/* Bit c of used[k]: bin (k, c) has had a slab or counted a free. The
	 * walks over a heap's bins visit these only, so that a short process
	 * touches no page of the heap's tables it does not use. Set by the
	 * owner (or under the orphan heap's lock), never cleared. */
	uint64_t used[MB_NKEYS];
	/* Per bin, for mb_theap_look: the low 16 bits of tc[].nalloc at the
	 * last look, and how many looks in a row found it unchanged. */
	uint16_t storm_mark[MB_NKEYS * MB_NCLASSES];
	uint8_t storm[MB_NKEYS * MB_NCLASSES];
	struct mb_theap *next, *prev; /* every heap, in use or kept for reuse */
	int in_use;
	struct mb_runcache runs;   /* freed page runs of up to MB_RUN_MAX */
	/* Objects of its slabs that other threads freed (inbox.h), taken by
	 * the owner before each free of its own that leaves the fast path
	 * and on its slow paths; closed when its thread exits. */
	struct mb_inbox inbox;
};

/* This thread's heap is mb_self.heap; mb_self.heap_busy is set while it is
 * being created or torn down (thread.h); init.c decides when. */

/* A heap for a new thread (a kept one, or a new one); NULL without memory. */
struct mb_theap *mb_theap_create(void);
/* At thread exit: slabs with live objects abandoned, the others and the
 * run cache given back, counters kept; the heap is kept for reuse. */
void mb_theap_destroy(struct mb_theap *h);

/* Allocate n bytes of class c for key when mb_theap_pop() found nothing:
 * the hot object once its slab's remote frees are looked at; the current
 * slab's next free word, remote frees, a partial slab, an abandoned one,
 * a new one. NULL (errno untouched) when the heap is full. */
void *mb_theap_alloc_slow(struct mb_theap *h, int key, unsigned c, size_t n);
/* After a free fast path left s entirely free or took it off the full
 * list: its lists, or the buddy. */
void mb_theap_freed(struct mb_theap *h, struct mb_slab *s);
/* Free object i (at p) of s, which h (this thread's, or NULL) may not
 * own; everything the fast path left to the general path: samples,
 * another owner's slabs, abandoned ones, double frees. Counted in h. A
 * sample must have been reported to classification first: once the
 * object is free, its owner may hand it out and sample it again. Returns
 * 0 when the object went back to another thread's slab with a remote
 * bit (no slab changed hands or lists here: nothing for the purge); 2
 * when a slab changed lists or hands (the caller tells the purge, as
 * after a free fast path that settles a slab); 1 otherwise. */
int mb_theap_free(struct mb_theap *h, struct mb_slab *s, uint32_t i, void *p);

/* p, the start of object i of slab s, freed by the thread whose heap is
 * h (not NULL), when s belongs to another thread's heap: checked against
 * that owner's bits, then posted to its inbox. Returns 1 if posted, 0 if
 * the caller must free it the usual way (s is h's, abandoned or the
 * orphan heap's, p is a sample, or the owner's inbox is full or closed).
 * A double free that the bits show is reported with its address. */
int mb_theap_post_free(struct mb_theap *h, struct mb_slab *s, uint32_t i, void *p);
/* Free what other threads posted to h's inbox, as h's owner would have
 * (h: the calling thread's heap); errno is left as it was. Returns 1 if a
 * slab changed lists or hands: the caller tells the purge, as after a
 * free fast path that settles a slab. */
int mb_theap_drain(struct mb_theap *h);

/* The heap of threads that have none (before their set-up, while it runs,
 * after their exit): used under its own lock, taken by these two. */
void *mb_orphan_alloc(int key, unsigned c, size_t n);
void mb_orphan_free(struct mb_slab *s, uint32_t i, void *p);
/* mb_theap_give_back() of the orphan heap. */
int mb_orphan_give_back(void);

/* After mb_theap_push() returned 3 for s, in h (the caller's): s settled
 * if its lists must change (as mb_theap_freed does), and a look at its
 * bin (MB_TCACHE_STORM_EVERY): a bin that has allocated since the last
 * look gets its cache back if it had shed it; one that has not, at the
 * MB_TCACHE_SHED-th look in a row, is shedding (a load that drops): its
 * cache goes back into the slabs and stays off (capacity 0, every free
 * to its slab) until a look finds an allocation again. Else the last
 * objects it freed would keep their pages resident while the thread
 * idles, where aging (mb_theap_tick) never comes. Returns 1 if a slab
 * changed lists or a cache was shed. */
int mb_theap_look(struct mb_theap *h, struct mb_slab *s);

/* The objects h's thread cache holds, back into their slabs as free.
 * With settle, by h's owner: slabs whose lists must change are settled
 * (mb_theap_freed); without, h has no thread any more and the caller
 * lets go of its slabs. Returns the objects put back. */
unsigned mb_theap_flush_cache(struct mb_theap *h, int settle);

/* Every slow path: once in a while, time-based work: the run cache given
 * back, and the bins no allocation took from for a purge period aged
 * (their thread cache back into their slabs and their current slab to the
 * partial list or the buddy, where the purge can return their pages). */
void mb_theap_tick(struct mb_theap *h);
/* Give back what h (the caller's) holds that nothing uses: the run
 * cache, and slabs left entirely free, by the owner or by other threads.
 * Returns 1 if anything went. */
int mb_theap_give_back(struct mb_theap *h);

/* With the purge lock held and no other: the empty slabs heaps keep, back
 * to the buddy, and the free pages of sparse slabs of every heap, at most
 * budget (a heap whose lock is held is skipped). Returns pages released;
 * *failed counts refused releases. */
size_t mb_theap_purge(size_t budget, unsigned *failed);

/* Every counter of the process: exited threads' and every live heap's.
 * Small objects count in alloc_bytes/freed_bytes/mallocs as usable sizes. */
void mb_theap_sum_counts(struct mb_counts *out);
/* Per (key, class): objects allocated and freed, bytes asked for, summed
 * over every heap, live and exited. */
struct mb_class_counts {
	uint64_t nalloc[MB_NKEYS][MB_NCLASSES];
	uint64_t nfree[MB_NKEYS][MB_NCLASSES];
	uint64_t req[MB_NKEYS][MB_NCLASSES];
};
void mb_theap_sum_classes(struct mb_class_counts *out);
/* fn(ctx, p) for the hot object p (see struct mb_tcache) of every bin of
 * every heap in use, read as it is now; under the list of heaps' lock,
 * none of the allocator's other locks held. */
void mb_theap_hot_each(void (*fn)(void *ctx, const void *p), void *ctx);
/* fn(ctx, p) for each object other threads posted to a heap in use and
 * its owner has not taken yet (inbox.h), read as it is now; under the list
 * of heaps' lock, none of the allocator's other locks held. */
void mb_theap_posted_each(void (*fn)(void *ctx, const void *p), void *ctx);
/* Around fork: every heap's lock; in the child only the forking thread's
 * heap lives on, the others' slabs are abandoned. */
void mb_theap_fork_prepare(void);
void mb_theap_fork_parent(void);
void mb_theap_fork_child(void);

/* ---- inline, for the fast paths ---- */

/* h's id (0 for NULL: no owner). */
static inline uint32_t mb_theap_id(const struct mb_theap *h)
{
	return h ? h->id : 0;
}

/* The thread cache of h's bin (key, class c). */
static inline struct mb_tcache *mb_theap_tcache(struct mb_theap *h, int key, unsigned c)
{
	return &h->tc[key * MB_NCLASSES + c];
}

/* tc's hot object (not NULL), handed out for n bytes: out of the slot
 * and its slab's mark. */
static inline void *mb_tcache_take_hot(struct mb_tcache *tc, size_t n)
{
	void *hot = tc->hot;
	__atomic_store_n(&tc->hot_slab->hot, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&tc->hot, NULL, __ATOMIC_RELAXED);
	tc->nalloc++;
	tc->req += n;
	return hot;
}

/* An object of class c for key from h's thread cache, else from its
 * current slab; NULL when that slab's word is empty, or the hot object's
 * slab has remote frees (mb_theap_alloc_slow looks at them). */
static inline void *mb_theap_pop(struct mb_theap *h, int key, unsigned c, size_t n)
{
	struct mb_bin *bin = &h->bin[key][c];
	struct mb_tcache *tc = mb_theap_tcache(h, key, c);
	if (mb_likely(tc->n != 0)) {
		uint32_t top = --tc->n;
		uintptr_t at = tc->e[top].bit_at;
		uint64_t *cached = (uint64_t *)(at & (((uintptr_t)1 << MB_TCACHE_BIT_SHIFT) - 1));
		mb_word_store(cached, *cached & ~((uint64_t)1 << (at >> MB_TCACHE_BIT_SHIFT)));
		void *p = tc->e[top].p;
		tc->nalloc++;
		tc->req += n;
		return p;
	}
	if (mb_likely(tc->hot != NULL)) {
		/* Remote frees in its slab: the slow path looks at them (a
		 * call here would give every malloc a stack frame). */
		if (mb_unlikely(__atomic_load_n(&tc->hot_slab->has_remote, __ATOMIC_RELAXED)))
			return NULL;
		return mb_tcache_take_hot(tc, n);
	}
	struct mb_slab *s = bin->cur;
	struct mb_slab_word *w = &s->w[s->cursor];
	uint64_t f = w->free;
	if (mb_unlikely(f == 0))
		return NULL;
	mb_word_store(&w->free, f & (f - 1));
	s->used++;
	tc->nalloc++;
	tc->req += n;
	return (void *)(s->start + ((uintptr_t)s->cursor * 64 + (unsigned)__builtin_ctzll(f)) * s->size);
}

/* Whether p is the hot object of h (or NULL) in the bin of s, its slab:
 * freed, though its slab counts it as live. */
static inline int mb_theap_is_hot(struct mb_theap *h, const struct mb_slab *s, const void *p)
{
	return h && __atomic_load_n(&h->tc[s->bin].hot, __ATOMIC_RELAXED) == p;
}

/* The slab of p if p lies in a slab page, else NULL. */
static inline struct mb_slab *mb_theap_slab_of(const void *p)
{
	struct mb_buddy *b = &mb_heap.buddy;
	/* npages, not mb_heap.region_bytes: the same bound, in the line of
	 * base and pages. */
	size_t i = mb_buddy_page_index(b, p);
	if (mb_unlikely(i >= b->npages))
		return NULL;
	const struct mb_page *m = &b->pages[i];
	if (mb_unlikely(m->kind != MB_KIND_SLAB))
		return NULL;
	return m->user.ptr;
}

/* Free p if it is a live object, not a sample, of a slab h (or NULL)
 * owns: into h's thread cache, or its free bit set when the cache of its
 * class is full; no lock, nothing written to user memory. Returns 0
 * when p needs the general path (which also catches NULL, foreign
 * pointers and double frees), 1 when done, 2 when done and the slab *sp
 * must change lists (mb_theap_freed), 3 when done and its bin is due a
 * look (mb_theap_look, which settles *sp too). */
/* Whether a free must settle s: a full slab goes back to the partial list
 * once a quarter of it is free, and at least half of it (rounded down) or
 * 8 objects, whichever is fewer (not at its first free, or a slab would go
 * back and forth between the lists at every object, taking the heap's lock
 * each time); a slab that empties goes to the buddy, unless it is being
 * allocated from. */
static inline int mb_slab_settle_due(const struct mb_slab *s)
{
	uint32_t nobj = s->nobj, free_now = nobj - s->used;
	uint32_t half = nobj / 2 < 8 ? nobj / 2 : 8;
	uint32_t need = nobj / 4 > half ? nobj / 4 : half;
	return (s->list == MB_SLAB_FULL && free_now >= (need ? need : 1)) ||
	       (s->used == 0 && s->list != MB_SLAB_CURRENT);
}

static inline int mb_theap_push_now(struct mb_theap *h, void *p, struct mb_slab **sp)
{
	/* Everything but the bitmap word from the page record and the
	 * slab's magic number beside it: the descriptor's first line stays
	 * out of the way. */
	struct mb_buddy *b = &mb_heap.buddy;
	size_t pi = mb_buddy_page_index(b, p);
	if (mb_unlikely(pi >= b->npages || h == NULL))
		return 0;
	const struct mb_page *m = &b->pages[pi];
	uint32_t tag = __atomic_load_n(&m->user32, __ATOMIC_RELAXED);
	if (mb_unlikely(m->kind != MB_KIND_SLAB || mb_slab_tag_id(tag) != h->id))
		return 0;
	unsigned c = m->sclass;
	uint32_t magic = b->slab_magic[pi];
	uintptr_t off = ((uintptr_t)p & (MB_PAGE_SIZE - 1)) + ((uintptr_t)m->user16 << MB_PAGE_SHIFT);
	uint32_t i;
	int at_start = mb_class_object_at(off, magic, &i);
	struct mb_slab *s = m->user.ptr;
	struct mb_slab_word *w = &s->w[i >> 6];
	uint64_t bit = (uint64_t)1 << (i & 63);
	/* Past the last object the sampled bits are set: no bounds test. */
	if (mb_unlikely(!at_start || ((w->free | w->sampled | w->cached) & bit) ||
			(s->has_remote && (__atomic_load_n(&s->remote[i >> 6], __ATOMIC_RELAXED) & bit))))
		return 0;
	struct mb_tcache *tc = &h->tc[mb_slab_tag_key(tag) * MB_NCLASSES + c];
	tc->nfree++;
	void *hot = tc->hot;
	if (mb_unlikely(hot == p))
		return 0; /* a double free: live_or_die reports it */
	if (mb_likely(hot == NULL && tc->n < tc->cap)) {
		tc->hot_slab = s;
		/* For another thread's free, which reads this line anyway. */
		__atomic_store_n(&s->hot, (uint16_t)(i + 1), __ATOMIC_RELAXED);
		/* Last: a fork's child drops the hot objects of the threads it
		 * does not have, whatever their state. */
		__atomic_store_n(&tc->hot, p, __ATOMIC_RELAXED);
		return 1;
	}
	/* On the stack, marked cached in its word, which the test above has
	 * just read. */
	if (mb_likely(tc->n + 1 < tc->cap)) {
		tc->e[tc->n].p = p;
		tc->e[tc->n].bit_at = (uintptr_t)&w->cached | (uintptr_t)(i & 63) << MB_TCACHE_BIT_SHIFT;
		/* After the entry: a fork's child, which flushes the caches of
		 * the threads it does not have, never counts an entry that the
		 * parent's thread had not written yet (a plain store on x86). */
		__atomic_store_n(&tc->n, tc->n + 1, __ATOMIC_RELEASE);
		mb_word_store(&w->cached, w->cached | bit);
		return 1;
	}
	mb_word_store(&w->free, w->free | bit);
	s->used--;
	*sp = s;
	if (mb_unlikely((tc->nfree & (MB_TCACHE_STORM_EVERY - 1)) == 0))
		return 3;
	return mb_unlikely(mb_slab_settle_due(s)) ? 2 : 1;
}

/* mb_theap_push_now, unless posts wait in h's inbox: one of them may be
 * p, whose free is then a double free that the push must see. The
 * general path (free_posted in alloc.c) takes them first. */
static inline int mb_theap_push(struct mb_theap *h, void *p, struct mb_slab **sp)
{
	if (mb_unlikely(h != NULL && mb_inbox_pending(&h->inbox)))
		return 0;
	return mb_theap_push_now(h, p, sp);
}

#endif
