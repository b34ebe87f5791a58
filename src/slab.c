#include "config.h"
#include "slab.h"
#include "lockstat.h"
#include "metadata.h"
#include "report.h"
#include "theap.h"

#include <stddef.h>
#include <string.h>

_Static_assert(MB_NKEYS <= MB_BUDDY_HOMES, "every slab key needs a buddy home");
_Static_assert(MB_NKEYS < MB_META_GROUPS, "every slab key needs a metadata group");
_Static_assert(offsetof(struct mb_slab, used) == 64 && offsetof(struct mb_slab, w) == 80,
	       "a line read by every free, then one the owner writes, with the first bitmap words");
_Static_assert(sizeof(((struct mb_slab *)0)->released) * 8 >= 16, "a bit per page of the largest slab");

static uint64_t none_remote;
struct mb_slab mb_slab_none = {
	.nwords = 1,
	.list = MB_SLAB_NONE,
	.remote = &none_remote,
	.w = { { 0, ~(uint64_t)0, 0 } },
};

/* Abandoned slabs of one (key, class), the fullest looked for first. */
struct abandoned {
	struct mb_lock lock;
	struct mb_slab *head;
	uint64_t n; /* read without the lock as a hint */
} __attribute__((aligned(64)));

static struct abandoned abandoned[MB_NKEYS][MB_NCLASSES] = {
	[0 ... MB_NKEYS - 1] = { [0 ... MB_NCLASSES - 1] = { .lock = MB_LOCK_INITIALIZER("abandoned") } },
};
/* Bit c of abandoned_ever[k]: (k, c) has had an abandoned slab. The purge
 * looks at those lists only: the table is 64 KiB, mostly never touched. */
_Static_assert(MB_NCLASSES <= 64, "one word of classes per key");
static uint64_t abandoned_ever[MB_NKEYS];

/* ---- geometry ---- */

static unsigned nwords_of(unsigned nobj)
{
	return nobj / 64 + 1; /* index nobj too: a pointer past the last object */
}

static size_t remote_offset(unsigned nwords)
{
	size_t o = offsetof(struct mb_slab, w) + nwords * sizeof(struct mb_slab_word);
	return (o + 63) & ~(size_t)63; /* remote frees write lines of their own */
}

static size_t descriptor_bytes(unsigned nobj)
{
	unsigned nw = nwords_of(nobj);
	return remote_offset(nw) + nw * sizeof(uint64_t);
}

/* ---- create and destroy ---- */

/* The owner tag (slab.h) of a slab of key owned by h (NULL: nobody). */
static uint32_t owner_tag(const struct mb_theap *h, int key)
{
	return mb_theap_id(h) << MB_SLAB_TAG_KEY_BITS | (uint32_t)key;
}

/* s becomes h's (NULL: nobody's): the descriptor's owner, and the owner
 * tag of its page records. */
static void set_owner(struct mb_slab *s, struct mb_theap *h)
{
	struct mb_buddy *b = &mb_heap.buddy;
	size_t idx = mb_buddy_page_index(b, (void *)s->start);
	uint32_t tag = owner_tag(h, s->key);
	__atomic_store_n(&s->owner, h, __ATOMIC_RELEASE);
	for (size_t i = idx; i < idx + mb_classes[s->sclass].slab_pages; i++)
		__atomic_store_n(&b->pages[i].user32, tag, __ATOMIC_RELAXED);
}

struct mb_slab *mb_slab_create(int key, unsigned c, struct mb_theap *h)
{
	struct mb_buddy *b = &mb_heap.buddy;
	const struct mb_class_info *ci = &mb_classes[c];
	size_t bytes = descriptor_bytes(ci->nobj);
	mb_heap_lock();
	/* A lane's slabs (the sites set apart) fill a home pageblock of
	 * their own at a time (buddy.h): what a lane frees leaves pageblocks
	 * whole. The keys of the types share their type's pageblocks, resident
	 * memory first, outside the lanes' homes: their objects are the rest
	 * of the program, whose frees leave the holes their next slabs fill.
	 * The own key's few slabs go with the default key's: with a home of
	 * their own, libunwind's few KiB held a pageblock, in a capped heap
	 * one its high-order allocations lacked (a third of them lost in one
	 * of the sweep's configurations, 101 of 160 against 133). */
	int who = key == MB_OWN_KEY ? MB_DEFAULT_TYPE : key;
	long idx = key >= MB_FIRST_LANE && key < MB_OWN_KEY
			   ? mb_buddy_alloc_home(b, ci->slab_pages, mb_key_type(key), who, NULL)
			   : mb_buddy_alloc_shared(b, ci->slab_pages, mb_key_type(key), who, NULL);
	if (idx < 0) {
		mb_heap_unlock();
		return NULL;
	}
	/* Descriptors are grouped by key like the slabs: when a type's slabs
	 * die, their descriptors' pages are freed whole too. */
	struct mb_slab *s = mb_meta_alloc_group(bytes, 1u + (unsigned)key);
	if (!s) {
		mb_buddy_free(b, (size_t)idx);
		mb_heap_unlock();
		return NULL;
	}
	for (size_t i = (size_t)idx; i < (size_t)idx + ci->slab_pages; i++) {
		struct mb_page *m = &b->pages[i];
		m->user.ptr = s;
		m->sclass = (uint8_t)c;
		m->user16 = (uint16_t)(i - (size_t)idx);
		m->user32 = owner_tag(h, key);
		m->kind = MB_KIND_SLAB;
		b->slab_magic[i] = ci->magic;
	}
	mb_heap.slab_pages += ci->slab_pages;
	mb_heap_unlock();

	unsigned nw = nwords_of(ci->nobj);
	s->start = (uintptr_t)mb_buddy_page_addr(b, (size_t)idx);
	s->size = ci->size;
	s->magic = ci->magic;
	s->nobj = (uint16_t)ci->nobj;
	s->nwords = (uint16_t)nw;
	s->key = (uint8_t)key;
	s->sclass = (uint8_t)c;
	s->bin = (uint16_t)(key * MB_NCLASSES + c);
	s->remote = (uint64_t *)((char *)s + remote_offset(nw));
	for (unsigned k = 0; k < nw; k++) {
		unsigned lo = k * 64, n = ci->nobj > lo ? ci->nobj - lo : 0;
		uint64_t objs = n >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1;
		s->w[k].free = objs;
		s->w[k].sampled = ~objs; /* past the last object: no object */
		s->w[k].cached = 0;
	}
	__atomic_store_n(&s->owner, h, __ATOMIC_RELEASE);
	return s;
}

void mb_slab_destroy(struct mb_slab *s)
{
	struct mb_buddy *b = &mb_heap.buddy;
	const struct mb_class_info *ci = &mb_classes[s->sclass];
	size_t idx = mb_buddy_page_index(b, (void *)s->start);
	mb_heap_lock();
	for (size_t i = idx; i < idx + ci->slab_pages; i++) {
		b->pages[i].kind = MB_KIND_NONE;
		b->pages[i].user16 = 0;
		b->pages[i].user32 = 0;
		b->pages[i].user.ptr = NULL;
	}
	/* Pages handed back while free read as zero: the buddy need not
	 * take them for dirty, but it takes any page of a slab for dirty. */
	mb_heap_stamp_locked();
	mb_buddy_free(b, idx);
	mb_heap.slab_pages -= ci->slab_pages;
	mb_meta_free(s, descriptor_bytes(ci->nobj));
	mb_heap_unlock();
}

/* ---- the owner's bitmaps ---- */

static void *object_addr(const struct mb_slab *s, uint32_t i)
{
	return (void *)(s->start + (uintptr_t)i * s->size);
}

unsigned mb_slab_collect(struct mb_slab *s)
{
	/* Cleared first: a remote free from now on sets it again. */
	__atomic_store_n(&s->has_remote, 0, __ATOMIC_SEQ_CST);
	unsigned got = 0;
	for (unsigned k = 0; k < s->nwords; k++) {
		if (!__atomic_load_n(&s->remote[k], __ATOMIC_RELAXED))
			continue;
		uint64_t r = __atomic_exchange_n(&s->remote[k], 0, __ATOMIC_ACQUIRE);
		struct mb_slab_word *w = &s->w[k];
		uint64_t gone = r & (w->free | w->cached);
		if (mb_unlikely(gone))
			mb_fatal_pointer("free", "double free detected (freed by two threads)",
					 object_addr(s, k * 64 + (unsigned)__builtin_ctzll(gone)));
		mb_word_store(&w->free, w->free | r);
		/* A sample freed by another thread told classification then. */
		mb_word_store(&w->sampled, w->sampled & ~r);
		got += (unsigned)__builtin_popcountll(r);
	}
	s->used = (uint16_t)(s->used - got);
	return got;
}

int mb_slab_find_free(struct mb_slab *s)
{
	for (unsigned k = s->cursor; k < s->nwords; k++)
		if (s->w[k].free) {
			s->cursor = (uint16_t)k;
			return 1;
		}
	for (unsigned k = 0; k < s->cursor; k++)
		if (s->w[k].free) {
			s->cursor = (uint16_t)k;
			return 1;
		}
	return 0;
}

/* ---- another thread's free ---- */

int mb_slab_free_remote(struct mb_slab *s, uint32_t i, void *p)
{
	uint64_t bit = (uint64_t)1 << (i & 63);
	unsigned k = i >> 6;
	/* Freed by the owner already: the owner's bits are read without its
	 * knowledge, which is enough to catch a free of an object that lies
	 * free, not two frees racing each other. */
	if ((mb_word_load(&s->w[k].free) | mb_word_load(&s->w[k].cached)) & bit)
		mb_fatal_pointer("free", "double free detected", p);
	/* Against the owner moving s to its full list meanwhile: it looks
	 * at the remote bits after the move and a fence (theap.c), this
	 * looks at the list after setting its bit, both sequentially
	 * consistent, so one of the two sees the other. (On x86 the locked
	 * OR is the fence: no second one.) */
	uint64_t old = __atomic_fetch_or(&s->remote[k], bit, __ATOMIC_SEQ_CST);
	if (old & bit)
		mb_fatal_pointer("free", "double free detected", p);
	if (!__atomic_load_n(&s->has_remote, __ATOMIC_RELAXED))
		__atomic_store_n(&s->has_remote, 1, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&s->list, __ATOMIC_SEQ_CST) == MB_SLAB_FULL;
}

/* ---- abandoned slabs ---- */

static void ab_push(struct abandoned *a, struct mb_slab *s)
{
	s->list = MB_SLAB_ABANDONED;
	s->prev = NULL;
	s->next = a->head;
	if (a->head)
		a->head->prev = s;
	a->head = s;
	__atomic_store_n(&a->n, a->n + 1, __ATOMIC_RELAXED);
	uint64_t bit = (uint64_t)1 << s->sclass;
	if (!(__atomic_load_n(&abandoned_ever[s->key], __ATOMIC_RELAXED) & bit))
		__atomic_fetch_or(&abandoned_ever[s->key], bit, __ATOMIC_RELAXED);
}

static void ab_unlink(struct abandoned *a, struct mb_slab *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		a->head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->next = s->prev = NULL;
	__atomic_store_n(&s->list, MB_SLAB_NONE, __ATOMIC_RELAXED);
	__atomic_store_n(&a->n, a->n - 1, __ATOMIC_RELAXED);
}

void mb_slab_abandon(struct mb_slab *s)
{
	struct abandoned *a = &abandoned[s->key][s->sclass];
	mb_lock_acquire(&a->lock);
	set_owner(s, NULL);
	ab_push(a, s);
	mb_lock_release(&a->lock);
}

/* With the list's lock held: s becomes h's, on no list. */
static void take_over(struct abandoned *a, struct mb_slab *s, struct mb_theap *h)
{
	ab_unlink(a, s);
	set_owner(s, h);
}

/* After an adoption, as the new owner: the remote frees that came
 * meanwhile, and the pages it may touch again. */
static void settle_adopted(struct mb_slab *s)
{
	mb_slab_collect(s);
	s->released = 0;
	s->cursor = 0;
}

#define ADOPT_SCAN 16

struct mb_slab *mb_slab_adopt_any(int key, unsigned c, struct mb_theap *h)
{
	struct abandoned *a = &abandoned[key][c];
	if (!__atomic_load_n(&a->n, __ATOMIC_RELAXED))
		return NULL;
	mb_lock_acquire(&a->lock);
	/* The fullest of the first few that has a free object: survivors
	 * gather in few slabs. */
	struct mb_slab *best = a->head;
	unsigned seen = 0;
	for (struct mb_slab *s = a->head; s && seen < ADOPT_SCAN; s = s->next, seen++)
		if (s->used < s->nobj && (best->used == best->nobj || s->used > best->used))
			best = s;
	if (best)
		take_over(a, best, h);
	mb_lock_release(&a->lock);
	if (best)
		settle_adopted(best);
	return best;
}

int mb_slab_adopt(struct mb_slab *s, struct mb_theap *h)
{
	struct abandoned *a = &abandoned[s->key][s->sclass];
	mb_lock_acquire(&a->lock);
	int ok = __atomic_load_n(&s->list, __ATOMIC_RELAXED) == MB_SLAB_ABANDONED && mb_slab_owner(s) == NULL;
	if (ok)
		take_over(a, s, h);
	mb_lock_release(&a->lock);
	if (ok)
		settle_adopted(s);
	return ok;
}

/* ---- purge ---- */

/* Whether page pg of s may go back to the kernel: not gone already, every
 * object on it reclaimable, not part of a dense huge unit (its release
 * would split the huge page, buddy.h). */
static int page_releasable(const struct mb_slab *s, uint32_t pg)
{
	if (s->released & (1u << pg))
		return 0;
	uint32_t lo = pg * (uint32_t)MB_PAGE_SIZE / s->size;
	uint32_t hi = ((pg + 1) * (uint32_t)MB_PAGE_SIZE - 1) / s->size;
	if (hi >= s->nobj)
		hi = s->nobj - 1u;
	for (uint32_t i = lo; i <= hi; i++)
		if (!mb_slab_is_reclaimable(s, i))
			return 0;
	struct mb_buddy *b = &mb_heap.buddy;
	return !mb_buddy_hp_keep(b, mb_buddy_page_index(b, (void *)(s->start + ((uintptr_t)pg << MB_PAGE_SHIFT))));
}

size_t mb_slab_release_free_pages(struct mb_slab *s, size_t budget, unsigned *failed)
{
	struct mb_buddy *b = &mb_heap.buddy;
	const struct mb_class_info *ci = &mb_classes[s->sclass];
	size_t released = 0;
	/* Consecutive pages in one call: each call costs the other
	 * processors a TLB shootdown. */
	for (uint32_t pg = 0; pg < ci->slab_pages && released < budget;) {
		if (!page_releasable(s, pg)) {
			pg++;
			continue;
		}
		uint32_t end = pg + 1;
		while (end < ci->slab_pages && released + (end - pg) < budget && page_releasable(s, end))
			end++;
		void *addr = (void *)(s->start + ((uintptr_t)pg << MB_PAGE_SHIFT));
		if (b->release && b->release(addr, (size_t)(end - pg) << MB_PAGE_SHIFT) != 0) {
			++*failed;
			return released;
		}
		for (; pg < end; pg++) {
			s->released = (uint16_t)(s->released | (1u << pg));
			released++;
		}
	}
	return released;
}

/* A slab is sparse when at most a quarter of its objects are in use:
 * worth the system calls. */
static int sparse(const struct mb_slab *s)
{
	return s->used * 4u <= s->nobj;
}

size_t mb_slab_purge_abandoned(size_t budget, unsigned *failed)
{
	size_t released = 0;
	*failed = 0;
	for (int k = 0; k < MB_NKEYS; k++) {
		for (uint64_t m = __atomic_load_n(&abandoned_ever[k], __ATOMIC_RELAXED); m; m &= m - 1) {
			struct abandoned *a = &abandoned[k][__builtin_ctzll(m)];
			if (!__atomic_load_n(&a->n, __ATOMIC_RELAXED))
				continue;
			mb_lock_acquire(&a->lock);
			struct mb_slab *next;
			for (struct mb_slab *s = a->head; s; s = next) {
				next = s->next;
				/* Nobody owns it: the list's lock makes this
				 * thread its owner for the moment. */
				mb_slab_collect(s);
				if (s->used == 0) {
					ab_unlink(a, s);
					mb_slab_destroy(s);
				} else if (released < budget && !*failed && sparse(s)) {
					released += mb_slab_release_free_pages(s, budget - released, failed);
				}
			}
			mb_lock_release(&a->lock);
		}
	}
	return released;
}

/* ---- fork ---- */

void mb_slab_fork_prepare(void)
{
	for (int k = 0; k < MB_NKEYS; k++)
		for (unsigned c = 0; c < MB_NCLASSES; c++)
			mb_lock_acquire(&abandoned[k][c].lock);
}

void mb_slab_fork_parent(void)
{
	for (int k = MB_NKEYS - 1; k >= 0; k--)
		for (unsigned c = MB_NCLASSES; c-- > 0;)
			mb_lock_release(&abandoned[k][c].lock);
}

void mb_slab_fork_child(void)
{
	for (int k = 0; k < MB_NKEYS; k++)
		for (unsigned c = 0; c < MB_NCLASSES; c++)
			mb_lock_after_fork_child(&abandoned[k][c].lock, 0);
}
