/* Slabs: small objects carved from buddy pages. A slab holds objects of
 * one size class and one reclaim type, and belongs to one thread heap
 * (theap.h), its owner, or to nobody once its owner has exited
 * ("abandoned", until another thread adopts it).
 *
 * Every object's state lives out of band, in the slab's descriptor:
 *  - `free`, one bit per object, written by the owner only: set when the
 *    object is free. The owner allocates by clearing the lowest set bit of
 *    the word at `cursor` and frees by setting its bit, with no atomic
 *    operation and no lock;
 *  - `sampled`, one bit per object, written by the owner: the object is a
 *    classification sample (its free must tell classify.c), or lies past
 *    the last object (a pointer there is no object);
 *  - `cached`, one bit per object, written by the owner: the object was
 *    freed into the owner's thread cache (theap.h), which hands it out
 *    again first; it is free to nobody else, and its memory stays;
 *  - `remote`, one bit per object, in cache lines of its own: set with one
 *    atomic OR by a thread that frees an object of a slab it does not own.
 *    The owner folds those bits into `free` when its free bits run out.
 *  - `hot`, the one object of the slab that may be its owner's hot object
 *    (theap.h): freed, in the owner's thread cache, but not marked cached.
 * So neither an overflow in user memory nor a double free can corrupt the
 * allocator: a free whose bit says the object is free already is reported
 * with its address. */
#ifndef MB_SLAB_H
#define MB_SLAB_H

#include <stdint.h>

#include "compiler.h"
#include "heap.h"
#include "sizeclass.h"

struct mb_theap;

/* Which list of its owner (or of the abandoned slabs) a slab is on. */
enum mb_slab_list {
	MB_SLAB_NONE = 0,      /* on none: being moved */
	MB_SLAB_CURRENT = 1,   /* the owner allocates from it */
	MB_SLAB_PARTIAL = 2,   /* has free objects, the owner will use it next */
	MB_SLAB_FULL = 3,      /* no free object the owner knows of */
	MB_SLAB_ABANDONED = 4, /* its owner exited; adopted by the next thread
				* that needs its class or frees into it */
	MB_SLAB_EMPTY = 5,     /* entirely free, kept by its owner for the
				* class's next slab (theap.h) */
};

struct mb_slab_word {
	uint64_t free;    /* 1 = free (owner-written) */
	uint64_t sampled; /* 1 = a sample, or no object (owner-written) */
	uint64_t cached;  /* 1 = in the owner's thread cache (owner-written) */
};

struct mb_slab {
	/* Set when the slab is made (the owner: when it changes hands) and
	 * read by every free, the owner's and other threads': a line that
	 * nothing written at every call shares, so a thread that frees into
	 * a slab another thread allocates from reads it from its own cache. */
	uintptr_t start;        /* object 0 */
	uint32_t size, magic;   /* (offset * magic) >> 32 == offset / size */
	uint16_t nobj;
	uint16_t nwords;        /* words of the bitmaps: nobj / 64 + 1 */
	uint8_t key, sclass;    /* reclaim type, size class */
	uint16_t bin;           /* key * MB_NCLASSES + sclass: its owner's bin */
	struct mb_theap *owner; /* atomic; NULL when abandoned */
	uint64_t *remote;       /* atomic words, nwords of them */
	/* The list `list` names: written only when a slab joins or leaves
	 * a list, and here they keep the descriptor of a 64-127-object
	 * slab at 192 bytes. */
	struct mb_slab *next, *prev;
	/* Written by the owner as it allocates and frees: on the line of
	 * the first bitmap words, which it writes too. */
	MB_LINE_ALIGNED uint16_t used; /* objects not free in the owner's bitmap: live,
					* cached, or freed remotely and not yet collected */
	uint16_t cursor;        /* the word the owner allocates from */
	uint8_t list;           /* enum mb_slab_list */
	uint8_t has_remote;     /* atomic: remote bits may be set */
	uint16_t released;      /* pages handed back to the kernel while free,
				 * one bit per page; cleared when the owner
				 * allocates from the slab again */
	/* 1 + the index of the object that is its owner's hot object
	 * (theap.h), 0 if none: written by the owner with plain stores,
	 * read by another thread's free, on a line it reads anyway. */
	uint16_t hot;
	struct mb_slab_word w[]; /* nwords */
};

/* A slab with no free object and no owner: the current slab of an empty
 * bin, so that the allocation fast path needs no NULL test. */
extern struct mb_slab mb_slab_none;

/* Owner-written words that other threads read (a remote free checks them)
 * are accessed as relaxed atomics. */
#define mb_word_load(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define mb_word_store(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

static inline struct mb_theap *mb_slab_owner(const struct mb_slab *s)
{
	return __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);
}

/* The index of the object that p starts in slab s, or -1 if p is not the
 * start of an object. */
static inline long mb_slab_index(const struct mb_slab *s, const void *p)
{
	uint32_t i;
	if (!mb_class_object_at((uintptr_t)p - s->start, s->magic, &i) || i >= s->nobj)
		return -1;
	return i;
}

/* A slab page's record names the slab's owner and key in its user32
 * (the owner's id, theap.h, above the key's bits; id 0: no owner), so that
 * the owner's free fast path finds everything it must know before the
 * object's bitmap word in the page record and the class table, without
 * the descriptor's first line: a miss less per free of a slab not in the
 * processor's cache. Written whenever the slab changes hands, with the
 * descriptor's owner, by the thread that takes or lets go of it. */
#define MB_SLAB_TAG_KEY_BITS 4
_Static_assert(MB_NKEYS <= 1 << MB_SLAB_TAG_KEY_BITS, "a slab key fits its bits of the owner tag");
#define MB_SLAB_TAG_MAX_ID (UINT32_MAX >> MB_SLAB_TAG_KEY_BITS)

static inline uint32_t mb_slab_tag_id(uint32_t tag)
{
	return tag >> MB_SLAB_TAG_KEY_BITS;
}

static inline int mb_slab_tag_key(uint32_t tag)
{
	return (int)(tag & ((1u << MB_SLAB_TAG_KEY_BITS) - 1));
}

/* The slab of a page record of kind MB_KIND_SLAB. */
static inline struct mb_slab *mb_slab_of_page(const struct mb_page *m)
{
	return m->user.ptr;
}

/* Whether object i is not live: free in the owner's bitmap, in its
 * thread cache, or freed remotely. */
static inline int mb_slab_is_free(const struct mb_slab *s, uint32_t i)
{
	uint64_t bit = (uint64_t)1 << (i & 63);
	const struct mb_slab_word *w = &s->w[i >> 6];
	return ((mb_word_load(&w->free) | mb_word_load(&w->cached) |
		 __atomic_load_n(&s->remote[i >> 6], __ATOMIC_RELAXED)) & bit) != 0;
}

/* Whether object i's memory may be handed back to the kernel: free, and
 * not in the owner's thread cache, from which it is handed out again
 * with no lock. */
static inline int mb_slab_is_reclaimable(const struct mb_slab *s, uint32_t i)
{
	uint64_t bit = (uint64_t)1 << (i & 63);
	const struct mb_slab_word *w = &s->w[i >> 6];
	return ((mb_word_load(&w->free) | __atomic_load_n(&s->remote[i >> 6], __ATOMIC_RELAXED)) & ~mb_word_load(&w->cached) & bit) != 0;
}

/* ---- the owner's operations (theap.c), with no lock ---- */

/* A new slab of (key, class c) from the buddy, owned by h, on no list;
 * NULL when the heap is full. Takes the heap lock. */
struct mb_slab *mb_slab_create(int key, unsigned c, struct mb_theap *h);
/* s, entirely free and on no list, back to the buddy. Takes the heap lock. */
void mb_slab_destroy(struct mb_slab *s);
/* Fold the remote bits into the free bits; returns the objects gained.
 * An object found freed both remotely and by the owner is a double free,
 * reported with its address. */
unsigned mb_slab_collect(struct mb_slab *s);
/* Point the cursor at a word with free bits, from the cursor on and then
 * from the start; 0 when there is none. */
int mb_slab_find_free(struct mb_slab *s);
/* Allocate from a slab with free bits at the cursor (the general paths;
 * the fast path does the same inline). */
static inline void *mb_slab_pop(struct mb_slab *s)
{
	struct mb_slab_word *w = &s->w[s->cursor];
	uint64_t f = w->free;
	unsigned bit = (unsigned)__builtin_ctzll(f);
	mb_word_store(&w->free, f & (f - 1));
	s->used++;
	return (void *)(s->start + ((uintptr_t)s->cursor * 64 + bit) * s->size);
}

/* Mark live object i of s, owned by the calling thread, as a
 * classification sample: its free will tell classify.c. */
static inline void mb_slab_mark_sampled(struct mb_slab *s, uint32_t i)
{
	struct mb_slab_word *w = &s->w[i >> 6];
	mb_word_store(&w->sampled, w->sampled | (uint64_t)1 << (i & 63));
}

/* Whether object i is a sample (read by any thread). */
static inline int mb_slab_is_sampled(const struct mb_slab *s, uint32_t i)
{
	return (mb_word_load(&s->w[i >> 6].sampled) >> (i & 63)) & 1;
}

/* Whether object i is in its owner's thread cache. */
static inline int mb_slab_is_cached(const struct mb_slab *s, uint32_t i)
{
	return (mb_word_load(&s->w[i >> 6].cached) >> (i & 63)) & 1;
}

/* ---- another thread's free ---- */

/* Free object i (address p) of s, owned by another thread or by nobody,
 * with one atomic OR; a double free is reported. Returns 1 if s is on its
 * owner's list of full slabs: the owner must be told (theap.c). */
int mb_slab_free_remote(struct mb_slab *s, uint32_t i, void *p);

/* ---- abandoned slabs: one list per (key, class), each under its lock ---- */

/* Slabs of an exiting thread: owner cleared, remote bits pending. */
void mb_slab_abandon(struct mb_slab *s);
/* Take the fullest abandoned slab of (key, c) for h (owner set, on no
 * list, remote bits collected); NULL if none. */
struct mb_slab *mb_slab_adopt_any(int key, unsigned c, struct mb_theap *h);
/* Take abandoned slab s for h, if it is still abandoned: 1 if taken (as
 * mb_slab_adopt_any), 0 if another thread was first. */
int mb_slab_adopt(struct mb_slab *s, struct mb_theap *h);

/* With no lock held: collect the remote frees of abandoned slabs, give
 * the entirely free ones back to the buddy, and the kernel the free pages
 * of sparse ones, at most `budget` pages. Returns the pages released;
 * *failed counts refused releases. */
size_t mb_slab_purge_abandoned(size_t budget, unsigned *failed);
/* Release the pages of s on which every object is free, at most budget;
 * the caller keeps the owner from allocating from s meanwhile. */
size_t mb_slab_release_free_pages(struct mb_slab *s, size_t budget, unsigned *failed);

/* Around fork: every abandoned list's lock. */
void mb_slab_fork_prepare(void);
void mb_slab_fork_parent(void);
void mb_slab_fork_child(void);

#endif
