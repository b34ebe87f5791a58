/* Slabs: small objects carved from buddy pages. A slab belongs to one
 * (slab key, size class): one reclaim type and one lane of it, so objects
 * of different lifetimes never share a page.
 * Object states live out of band, one byte per object, so neither an
 * overflow nor a double free can corrupt a free list. */
#ifndef MB_SLAB_H
#define MB_SLAB_H

#include <stdint.h>

#include "heap.h"
#include "sizeclass.h"

enum mb_obj_state {
	MB_OBJ_FREE = 0,      /* free in its slab */
	MB_OBJ_ALLOCATED = 1, /* owned by the program */
	MB_OBJ_CACHED = 2,    /* free, held in some thread's cache */
	MB_OBJ_SAMPLED = 3,   /* owned by the program, and a classification sample */
	MB_OBJ_BEYOND = 4,    /* state[nobj]: the slab's tail past its last object */
};

struct mb_slab {
	struct mb_slab *next, *prev; /* central list of slabs with free objects */
	uintptr_t start;             /* object 0 */
	uint32_t size, magic;
	uint16_t nobj, nfree;        /* nfree counts MB_OBJ_FREE only */
	uint16_t scan;               /* refill resumes scanning here */
	uint8_t key, sclass;         /* slab key (reclaim_type.h), size class */
	uint8_t listed;
	uint8_t pad[3];
	uint8_t state[];             /* enum mb_obj_state, one per object, then MB_OBJ_BEYOND */
};

/* One cached free object: its address and its state byte. */
struct mb_tentry {
	void *p;
	uint8_t *st;
};

/* The slab that holds p, and p's object index; NULL if p is not the start
 * of an object in a slab page. */
static inline struct mb_slab *mb_slab_of(const struct mb_page *m, const void *p, uint32_t *index)
{
	struct mb_slab *s = m->user.ptr;
	uintptr_t off = (uintptr_t)p - s->start;
	uint32_t i = (uint32_t)(((uint64_t)off * s->magic) >> 32);
	if ((uintptr_t)i * s->size != off || i >= s->nobj)
		return NULL;
	*index = i;
	return s;
}

/* The central structure of each (slab key, class) has a lock of its own;
 * the heap lock is taken inside it only to create or destroy a slab. Lock
 * order: site lock, then central locks (in index order when more than one),
 * then the heap lock. */

/* Move up to `want` free objects of (key, class) into out[], marked
 * cached: the newest from the transfer cache first, then from the fullest
 * slabs, creating slabs as needed. Returns how many were taken (0 when
 * the heap is exhausted). Takes the class's central lock. */
unsigned mb_slab_take(int key, unsigned sclass, struct mb_tentry *out, unsigned want);

/* Give back n cached objects of (key, class): as one batch into the
 * transfer cache when it has room and to_slabs is 0, else each to its slab
 * (a slab left entirely free goes back to the buddy). Takes the class's
 * central lock. */
void mb_slab_give(int key, unsigned sclass, const struct mb_tentry *e, unsigned n, int to_slabs);

/* With no lock held: return to their slabs the transfer-cache objects no
 * refill used since the last call (all of them if force) and the kept
 * empty slab no refill used since then, then give the
 * kernel back the pages of sparsely used slabs on which every object is
 * free (they read as zero when reused, and an object's contents are
 * undefined anyway), at most `budget` pages. Takes each central lock in
 * turn. Returns pages released; *failed counts refused releases. */
size_t mb_slab_purge(size_t budget, int force, unsigned *failed);

/* With no lock held: every transfer cache back to the slabs, and every
 * kept empty slab to the buddy (the heap is full). Returns the objects and
 * slabs moved. */
size_t mb_slab_drain(void);

/* Around fork: take every central lock in index order, release them, or
 * (in the child) make them anew. */
void mb_slab_fork_prepare(void);
void mb_slab_fork_parent(void);
void mb_slab_fork_child(void);

#endif
