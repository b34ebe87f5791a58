#include "config.h"
#include "slab.h"
#include "metadata.h"

#include <string.h>

_Static_assert(MB_NKEYS <= MB_BUDDY_HOMES, "every slab key needs a buddy home");
_Static_assert(MB_NKEYS < MB_META_GROUPS, "every slab key needs a metadata group");

/* Slabs of one (slab key, class) with free objects, by how full they are:
 * allocation takes from the fullest, so survivors gather in few slabs and
 * the emptiest ones drain and go back to the buddy. Under the heap lock. */
#define MB_FULLNESS_BUCKETS 4
struct mb_central {
	struct mb_slab *head[MB_FULLNESS_BUCKETS], *tail[MB_FULLNESS_BUCKETS];
	uint64_t nslabs;   /* slabs of this (key, class), full or not */
	uint64_t nlisted;
};

static struct mb_central central[MB_NKEYS][MB_NCLASSES];

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

static struct mb_slab *slab_create_locked(int key, unsigned c)
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
	long idx = mb_buddy_alloc_home(b, ci->slab_pages, mb_key_type(key), home, NULL);
	if (idx < 0)
		return NULL;
	/* Descriptors are grouped by key like the slabs: when a lane's
	 * slabs die, their descriptors' pages are freed whole too. */
	struct mb_slab *s = mb_meta_alloc_group(sizeof(*s) + ci->nobj + 1, 1u + (unsigned)key);
	if (!s) {
		mb_buddy_free(b, (size_t)idx);
		return NULL;
	}
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
	for (size_t i = (size_t)idx; i < (size_t)idx + ci->slab_pages; i++) {
		struct mb_page *m = &b->pages[i];
		m->user.ptr = s;
		m->sclass = (uint8_t)c;
		m->user16 = (uint16_t)(i - (size_t)idx);
		m->user32 = (uint32_t)key;
		m->kind = MB_KIND_SLAB;
	}
	central[key][c].nslabs++;
	mb_heap.slab_pages += ci->slab_pages;
	return s;
}

static void slab_destroy_locked(struct mb_slab *s)
{
	struct mb_buddy *b = &mb_heap.buddy;
	const struct mb_class_info *ci = &mb_classes[s->sclass];
	size_t idx = mb_buddy_page_index(b, (void *)s->start);
	for (size_t i = idx; i < idx + ci->slab_pages; i++) {
		b->pages[i].kind = MB_KIND_NONE;
		b->pages[i].user16 = 0;
		b->pages[i].user32 = 0;
		b->pages[i].user.ptr = NULL;
	}
	mb_buddy_free(b, idx);
	central[s->key][s->sclass].nslabs--;
	mb_heap.slab_pages -= ci->slab_pages;
	mb_meta_free(s, sizeof(*s) + ci->nobj + 1);
}

size_t mb_slab_purge_locked(void)
{
	struct mb_buddy *b = &mb_heap.buddy;
	size_t released = 0;
	for (int k = 0; k < MB_NKEYS; k++) {
		for (unsigned c = 0; c < MB_NCLASSES; c++) {
			const struct mb_class_info *ci = &mb_classes[c];
			if (ci->slab_pages < 2)
				continue; /* a one-page slab with a free page is destroyed */
			struct mb_central *ce = &central[k][c];
			for (struct mb_slab *s = ce->head[0]; s; s = s->next) {
				size_t first = mb_buddy_page_index(b, (void *)s->start);
				for (uint32_t pg = 0; pg < ci->slab_pages; pg++) {
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
						b->count.release_failures++;
						return released;
					}
					m->flags &= (uint8_t)~MB_PGF_DIRTY;
					released++;
				}
			}
		}
	}
	return released;
}

unsigned mb_slab_refill_locked(int key, unsigned c, struct mb_tentry *out, unsigned want)
{
	struct mb_central *ce = &central[key][c];
	unsigned n = 0;
	while (n < want) {
		struct mb_slab *s = fullest(ce);
		if (!s) {
			s = slab_create_locked(key, c);
			if (!s)
				break;
		}
		uint32_t i = s->scan;
		while (n < want && s->nfree) {
			uint8_t *z = memchr(s->state + i, MB_OBJ_FREE, s->nobj - i);
			if (!z) {
				i = 0;
				continue;
			}
			i = (uint32_t)(z - s->state);
			*z = MB_OBJ_CACHED;
			/* Its pages may have been released: they are in use again. */
			uintptr_t a = s->start + (uintptr_t)i * s->size;
			size_t first = mb_buddy_page_index(&mb_heap.buddy, (void *)a);
			size_t last = mb_buddy_page_index(&mb_heap.buddy, (void *)(a + s->size - 1));
			for (size_t pg = first; pg <= last; pg++)
				mb_heap.buddy.pages[pg].flags |= MB_PGF_DIRTY;
			s->nfree--;
			out[n].p = (void *)(s->start + (uintptr_t)i * s->size);
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

void mb_slab_put_locked(struct mb_slab *s, uint32_t index)
{
	struct mb_central *ce = &central[s->key][s->sclass];
	s->state[index] = MB_OBJ_FREE;
	s->nfree++;
	if (s->nfree == s->nobj) {
		/* Entirely free: give the pages back so the pageblock can
		 * coalesce and eventually return to the global pool. */
		if (s->listed)
			list_unlink(ce, s);
		slab_destroy_locked(s);
		return;
	}
	relist(ce, s);
}
