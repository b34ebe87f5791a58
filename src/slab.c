#include "config.h"
#include "slab.h"
#include "lockstat.h"
#include "metadata.h"

#include <string.h>

_Static_assert(MB_NKEYS <= MB_BUDDY_HOMES, "every slab key needs a buddy home");
_Static_assert(MB_NKEYS < MB_META_GROUPS, "every slab key needs a metadata group");

/* The central structure of one (slab key, class), under its own lock.
 *
 * The transfer cache: free objects that thread caches flushed, kept as
 * entries so a flush and a refill move a whole batch in one copy, and
 * objects freed by one thread reach another that allocates without a walk
 * over slab states. Bounded to MB_XFER_BATCHES batches so it cannot hoard
 * memory; what no refill used between two purges goes back to the slabs.
 *
 * The slabs with free objects, by how full they are: allocation takes from
 * the fullest, so survivors gather in few slabs and the emptiest ones drain
 * and go back to the buddy. One slab that drains is kept, entirely free, so
 * that a class whose slabs hold few objects does not create and destroy a
 * slab (under the heap lock) every few allocations; a purge that finds it
 * unused since the previous one gives it back. */
#define MB_FULLNESS_BUCKETS 4
#define MB_XFER_BATCHES 4
struct mb_central {
	struct mb_lock lock;
	struct mb_tentry *xfer; /* newest last; NULL until first needed */
	uint32_t xn, xcap;
	uint32_t xlow;          /* fewest entries since the last purge */
	uint32_t xfailed;       /* no storage could be had: slabs only */
	struct mb_slab *head[MB_FULLNESS_BUCKETS], *tail[MB_FULLNESS_BUCKETS];
	struct mb_slab *empty;  /* one entirely free slab kept for reuse, or NULL */
	uint8_t empty_idle;     /* and it was already there at the last purge */
	uint64_t nslabs;   /* slabs of this (key, class), full or not */
	uint64_t nlisted;
} __attribute__((aligned(64)));

/* Recursive, like the heap lock (heap.c): fork's prepare handler holds them
 * all, and another handler may allocate meanwhile. */
static struct mb_central central[MB_NKEYS][MB_NCLASSES] = {
	[0 ... MB_NKEYS - 1] = { [0 ... MB_NCLASSES - 1] = { .lock = MB_LOCK_INITIALIZER_RECURSIVE("central") } },
};

static void central_lock(struct mb_central *ce)
{
	mb_lock_acquire(&ce->lock);
}

static void central_unlock(struct mb_central *ce)
{
	mb_lock_release(&ce->lock);
}

/* The bucket a slab with free objects belongs in: its used quarter. */
static unsigned fullness(const struct mb_slab *s)
{
	unsigned used = (unsigned)(s->nobj - s->nfree);
	return used * MB_FULLNESS_BUCKETS / s->nobj;
}

static void list_push(struct mb_central *ce, struct mb_slab *s, unsigned k)
{
	s->listed = (uint8_t)(k + 1);
	ce->nlisted++;
	s->prev = NULL;
	s->next = ce->head[k];
	if (ce->head[k])
		ce->head[k]->prev = s;
	else
		ce->tail[k] = s;
	ce->head[k] = s;
}

static void list_unlink(struct mb_central *ce, struct mb_slab *s)
{
	unsigned k = s->listed - 1u;
	if (s->prev)
		s->prev->next = s->next;
	else
		ce->head[k] = s->next;
	if (s->next)
		s->next->prev = s->prev;
	else
		ce->tail[k] = s->prev;
	s->next = s->prev = NULL;
	s->listed = 0;
	ce->nlisted--;
}

/* Put s on the list its fullness calls for (or none when it is full). */
static void relist(struct mb_central *ce, struct mb_slab *s)
{
	if (!s->nfree) {
		if (s->listed)
			list_unlink(ce, s);
		return;
	}
	unsigned k = fullness(s);
	if (s->listed == k + 1)
		return;
	if (s->listed)
		list_unlink(ce, s);
	list_push(ce, s, k);
}

/* The fullest slab with free objects. */
static struct mb_slab *fullest(struct mb_central *ce)
{
	for (int k = MB_FULLNESS_BUCKETS - 1; k >= 0; k--)
		if (ce->head[k])
			return ce->head[k];
	return NULL;
}

/* With ce's lock held: a new slab of (key, class c), from the buddy. */
static struct mb_slab *slab_create(struct mb_central *ce, int key, unsigned c)
{
	struct mb_buddy *b = &mb_heap.buddy;
	const struct mb_class_info *ci = &mb_classes[c];
	/* Each KernNoRclm key fills a home pageblock of its own: its lanes
	 * hold the unsettled sites too, and one of them may turn out to be a
	 * cache while another is pinned, so their slabs must not interleave;
	 * then the pageblocks of the lane that empties go back whole. The
	 * other types' objects are known to die: their slabs reuse any free
	 * block of the type, which keeps them dense. */
	int home = mb_key_type(key) == MB_KERNNORCLM ? key : -1;
	mb_heap_lock();
	long idx = mb_buddy_alloc_home(b, ci->slab_pages, mb_key_type(key), home, NULL);
	if (idx < 0) {
		mb_heap_unlock();
		return NULL;
	}
	/* Descriptors are grouped by key like the slabs: when a lane's
	 * slabs die, their descriptors' pages are freed whole too. */
	struct mb_slab *s = mb_meta_alloc_group(sizeof(*s) + ci->nobj + 1, 1u + (unsigned)key);
	if (!s) {
		mb_buddy_free(b, (size_t)idx);
		mb_heap_unlock();
		return NULL;
	}
	mb_heap.slab_pages += ci->slab_pages;
	mb_heap_unlock();
	s->start = (uintptr_t)mb_buddy_page_addr(b, (size_t)idx);
	s->size = ci->size;
	s->magic = ci->magic;
	s->nobj = (uint16_t)ci->nobj;
	s->nfree = (uint16_t)ci->nobj;
	/* An address in the tail past the last object reads as no object,
	 * so the free fast path needs no bounds check. */
	s->state[ci->nobj] = MB_OBJ_BEYOND;
	s->key = (uint8_t)key;
	s->sclass = (uint8_t)c;
	/* The pages are ours alone from here: no other thread looks at their
	 * records until an object of the slab is handed out, under ce's lock. */
	for (size_t i = (size_t)idx; i < (size_t)idx + ci->slab_pages; i++) {
		struct mb_page *m = &b->pages[i];
		m->user.ptr = s;
		m->sclass = (uint8_t)c;
		m->user16 = (uint16_t)(i - (size_t)idx);
		m->user32 = (uint32_t)key;
		m->kind = MB_KIND_SLAB;
	}
	ce->nslabs++;
	return s;
}

/* With ce's lock held: s, entirely free, goes back to the buddy. */
static void slab_destroy(struct mb_central *ce, struct mb_slab *s)
{
	struct mb_buddy *b = &mb_heap.buddy;
	const struct mb_class_info *ci = &mb_classes[s->sclass];
	size_t idx = mb_buddy_page_index(b, (void *)s->start);
	ce->nslabs--;
	mb_heap_lock();
	for (size_t i = idx; i < idx + ci->slab_pages; i++) {
		b->pages[i].kind = MB_KIND_NONE;
		b->pages[i].user16 = 0;
		b->pages[i].user32 = 0;
		b->pages[i].user.ptr = NULL;
	}
	mb_heap_stamp_locked();
	mb_buddy_free(b, idx);
	mb_heap.slab_pages -= ci->slab_pages;
	mb_meta_free(s, sizeof(*s) + ci->nobj + 1);
	mb_heap_unlock();
}

/* With ce's lock held: up to `want` free objects from the slabs. */
static unsigned take_from_slabs(struct mb_central *ce, int key, unsigned c, struct mb_tentry *out, unsigned want)
{
	struct mb_buddy *b = &mb_heap.buddy;
	unsigned n = 0;
	while (n < want) {
		struct mb_slab *s = fullest(ce);
		if (!s) {
			s = slab_create(ce, key, c);
			if (!s)
				break;
		}
		if (s == ce->empty)
			ce->empty = NULL;
		uint32_t i = s->scan;
		while (n < want && s->nfree) {
			uint8_t *z = memchr(s->state + i, MB_OBJ_FREE, s->nobj - i);
			if (!z) {
				i = 0;
				continue;
			}
			i = (uint32_t)(z - s->state);
			*z = MB_OBJ_CACHED;
			/* Its pages may have been released: they are in use
			 * again. The slab's page flags are under ce's lock. */
			uintptr_t a = s->start + (uintptr_t)i * s->size;
			size_t first = mb_buddy_page_index(b, (void *)a);
			size_t last = mb_buddy_page_index(b, (void *)(a + s->size - 1));
			for (size_t pg = first; pg <= last; pg++)
				b->pages[pg].flags |= MB_PGF_DIRTY;
			s->nfree--;
			out[n].p = (void *)a;
			out[n].st = z;
			n++;
			i++;
			if (i == s->nobj)
				i = 0;
		}
		s->scan = (uint16_t)i;
		relist(ce, s);
	}
	return n;
}

/* With ce's lock held: cached objects back to their slabs. */
static void give_to_slabs(struct mb_central *ce, const struct mb_tentry *e, unsigned n)
{
	struct mb_buddy *b = &mb_heap.buddy;
	for (unsigned k = 0; k < n; k++) {
		struct mb_slab *s = b->pages[mb_buddy_page_index(b, e[k].p)].user.ptr;
		*e[k].st = MB_OBJ_FREE;
		s->nfree++;
		if (s->nfree == s->nobj && ce->empty) {
			/* Entirely free, and one is kept already: give the
			 * pages back so the pageblock can coalesce and
			 * eventually return to the global pool. */
			if (s->listed)
				list_unlink(ce, s);
			slab_destroy(ce, s);
			continue;
		}
		if (s->nfree == s->nobj) {
			ce->empty = s;
			ce->empty_idle = 0;
		}
		relist(ce, s);
	}
}

/* With ce's lock held: the kept empty slab goes back to the buddy if it
 * was already kept, unused, at the last purge (or at once if force). */
static void empty_purge(struct mb_central *ce, int force)
{
	struct mb_slab *s = ce->empty;
	if (!s)
		return;
	if (!force && !ce->empty_idle) {
		ce->empty_idle = 1;
		return;
	}
	ce->empty = NULL;
	if (s->listed)
		list_unlink(ce, s);
	slab_destroy(ce, s);
}

/* Entries of one transfer batch of class c: what a refill asks for and a
 * flush gives back (tcache.c). */
static uint32_t batch_of(unsigned c)
{
	uint32_t n = mb_classes[c].tcache_cap / 2;
	return n ? n : 1;
}

/* With ce's lock held: the transfer cache's storage, made on first use;
 * 0 without it (then objects go to the slabs). */
static int xfer_ready(struct mb_central *ce, unsigned c)
{
	if (ce->xfer)
		return 1;
	if (ce->xfailed)
		return 0;
	uint32_t cap = MB_XFER_BATCHES * batch_of(c);
	mb_heap_lock();
	ce->xfer = mb_meta_alloc(cap * sizeof(struct mb_tentry));
	mb_heap_unlock();
	if (!ce->xfer) {
		ce->xfailed = 1;
		return 0;
	}
	ce->xcap = cap;
	return 1;
}

unsigned mb_slab_take(int key, unsigned c, struct mb_tentry *out, unsigned want)
{
	struct mb_central *ce = &central[key][c];
	central_lock(ce);
	unsigned n = ce->xn < want ? ce->xn : want;
	if (n) {
		ce->xn -= n;
		memcpy(out, ce->xfer + ce->xn, n * sizeof(*out));
		if (ce->xn < ce->xlow)
			ce->xlow = ce->xn;
	}
	if (n < want)
		n += take_from_slabs(ce, key, c, out + n, want - n);
	central_unlock(ce);
	return n;
}

void mb_slab_give(int key, unsigned c, const struct mb_tentry *e, unsigned n, int to_slabs)
{
	struct mb_central *ce = &central[key][c];
	central_lock(ce);
	if (!to_slabs && xfer_ready(ce, c) && ce->xcap - ce->xn >= n) {
		memcpy(ce->xfer + ce->xn, e, n * sizeof(*e));
		ce->xn += n;
	} else {
		give_to_slabs(ce, e, n);
	}
	central_unlock(ce);
}

/* With ce's lock held: the oldest n entries of the transfer cache go back
 * to their slabs. */
static void xfer_drain(struct mb_central *ce, uint32_t n)
{
	if (n > ce->xn)
		n = ce->xn;
	if (!n)
		return;
	give_to_slabs(ce, ce->xfer, n);
	memmove(ce->xfer, ce->xfer + n, (ce->xn - n) * sizeof(*ce->xfer));
	ce->xn -= n;
}

/* With ce's lock held: release the free pages of the emptiest slabs of
 * class c, at most budget. */
static size_t release_sparse(struct mb_central *ce, unsigned c, size_t budget, unsigned *failed)
{
	struct mb_buddy *b = &mb_heap.buddy;
	const struct mb_class_info *ci = &mb_classes[c];
	size_t released = 0;
	if (ci->slab_pages < 2)
		return 0; /* a one-page slab with a free page is destroyed */
	for (struct mb_slab *s = ce->head[0]; s && released < budget; s = s->next) {
		size_t first = mb_buddy_page_index(b, (void *)s->start);
		for (uint32_t pg = 0; pg < ci->slab_pages && released < budget; pg++) {
			struct mb_page *m = &b->pages[first + pg];
			if (!(m->flags & MB_PGF_DIRTY))
				continue;
			uint32_t lo = pg * (uint32_t)MB_PAGE_SIZE / s->size;
			uint32_t hi = ((pg + 1) * (uint32_t)MB_PAGE_SIZE - 1) / s->size;
			if (hi >= s->nobj)
				hi = s->nobj - 1;
			int busy = lo > hi;
			for (uint32_t i = lo; i <= hi && !busy; i++)
				busy = s->state[i] != MB_OBJ_FREE;
			if (busy)
				continue;
			if (b->release && b->release(mb_buddy_page_addr(b, first + pg), MB_PAGE_SIZE) != 0) {
				++*failed;
				return released;
			}
			m->flags &= (uint8_t)~MB_PGF_DIRTY;
			released++;
		}
	}
	return released;
}

/* Whether a central structure has anything a purge could return: read
 * without its lock, as a hint (a missed one waits for the next purge). */
static int central_busy(const struct mb_central *ce)
{
	return __atomic_load_n(&ce->nslabs, __ATOMIC_RELAXED) != 0 ||
	       __atomic_load_n(&ce->xn, __ATOMIC_RELAXED) != 0;
}

size_t mb_slab_purge(size_t budget, int force, unsigned *failed)
{
	size_t released = 0;
	*failed = 0;
	for (int k = 0; k < MB_NKEYS; k++) {
		for (unsigned c = 0; c < MB_NCLASSES; c++) {
			struct mb_central *ce = &central[k][c];
			if (!central_busy(ce))
				continue;
			central_lock(ce);
			xfer_drain(ce, force ? ce->xn : ce->xlow);
			ce->xlow = ce->xn;
			empty_purge(ce, force);
			if (released < budget && !*failed)
				released += release_sparse(ce, c, budget - released, failed);
			central_unlock(ce);
		}
	}
	return released;
}

size_t mb_slab_drain(void)
{
	size_t moved = 0;
	for (int k = 0; k < MB_NKEYS; k++) {
		for (unsigned c = 0; c < MB_NCLASSES; c++) {
			struct mb_central *ce = &central[k][c];
			if (!central_busy(ce))
				continue;
			central_lock(ce);
			moved += ce->xn + (ce->empty != NULL);
			xfer_drain(ce, ce->xn);
			ce->xlow = 0;
			empty_purge(ce, 1);
			central_unlock(ce);
		}
	}
	return moved;
}

void mb_slab_fork_prepare(void)
{
	for (int k = 0; k < MB_NKEYS; k++)
		for (unsigned c = 0; c < MB_NCLASSES; c++)
			central_lock(&central[k][c]);
}

void mb_slab_fork_parent(void)
{
	for (int k = MB_NKEYS - 1; k >= 0; k--)
		for (unsigned c = MB_NCLASSES; c-- > 0;)
			central_unlock(&central[k][c]);
}

void mb_slab_fork_child(void)
{
	for (int k = 0; k < MB_NKEYS; k++)
		for (unsigned c = 0; c < MB_NCLASSES; c++)
			mb_lock_after_fork_child(&central[k][c].lock, 1);
}
