#include "config.h"
#include "theap.h"
#include "metadata.h"
#include "options.h"
#include "report.h"

#include <errno.h>
#include <string.h>

_Static_assert(sizeof(struct mb_theap) <= MB_META_MAX, "a thread heap is one metadata allocation");
_Static_assert(MB_NCLASSES <= 64, "a heap's used bins are one word per key");
_Static_assert((sizeof(struct mb_tcache) & (sizeof(struct mb_tcache) - 1)) == 0,
	       "a bin's thread cache is found with a shift");

/* Every heap, in use or kept for the next thread, under this lock. */
static struct mb_theap *all_heaps;
static struct mb_lock heaps_lock = MB_LOCK_INITIALIZER_RECURSIVE("heaps");
/* What the heaps of exited threads counted, and frees by threads that had
 * none: added atomically, read under the list's lock. */
static struct mb_class_counts exited;
static uint64_t exited_used[MB_NKEYS]; /* the bins of exited that counted */

/* Threads with no heap of their own share this one, under orphan_lock. */
static struct mb_theap orphan;
static int orphan_ready;
static struct mb_lock orphan_lock = MB_LOCK_INITIALIZER_RECURSIVE("orphan");

/* ---- the bins a heap uses ---- */

/* The next bin after i (k * 64 + c, whatever MB_NCLASSES is) marked in
 * used[], or -1: walks visit for (int i = -1; (i = next_bin(used, i)) >= 0;)
 * and take the bin's key and class with used_key() and used_class(). */
static int next_bin(const uint64_t *used, int i)
{
	for (i++; i < MB_NKEYS * 64; i = (i | 63) + 1) {
		uint64_t m = __atomic_load_n(&used[i >> 6], __ATOMIC_RELAXED) >> (i & 63);
		if (m)
			return i + __builtin_ctzll(m);
	}
	return -1;
}

static int used_key(int i)
{
	return i >> 6;
}

static unsigned used_class(int i)
{
	return (unsigned)i & 63;
}

static void mark_bits(uint64_t *used, int k, unsigned c)
{
	uint64_t bit = (uint64_t)1 << c;
	if (!(__atomic_load_n(&used[k], __ATOMIC_RELAXED) & bit))
		__atomic_fetch_or(&used[k], bit, __ATOMIC_RELAXED);
}

/* Bin (k, c) of h is in use: its thread cache gets its capacity then, so
 * that a new heap's caches stay untouched zero pages until used. */
static void mark_used(struct mb_theap *h, int k, unsigned c)
{
	if (__atomic_load_n(&h->used[k], __ATOMIC_RELAXED) & ((uint64_t)1 << c))
		return;
	mb_theap_tcache(h, k, c)->cap = mb_classes[c].cache_cap;
	mark_bits(h->used, k, c);
}

/* ---- lists ---- */

static size_t slab_bytes(const struct mb_slab *s)
{
	return (size_t)mb_classes[s->sclass].slab_pages << MB_PAGE_SHIFT;
}

static void q_push(struct mb_slabq *q, struct mb_slab *s, int list)
{
	__atomic_store_n(&s->list, (uint8_t)list, __ATOMIC_RELAXED);
	s->prev = NULL;
	s->next = q->head;
	if (q->head)
		q->head->prev = s;
	q->head = s;
	q->n++;
}

static void q_unlink(struct mb_slabq *q, struct mb_slab *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		q->head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->next = s->prev = NULL;
	q->n--;
	__atomic_store_n(&s->list, MB_SLAB_NONE, __ATOMIC_RELAXED);
}

/* Whether another thread freed objects of s since the owner last looked. */
static int remote_pending(const struct mb_slab *s)
{
	if (__atomic_load_n(&s->has_remote, __ATOMIC_SEQ_CST))
		return 1;
	for (unsigned k = 0; k < s->nwords; k++)
		if (__atomic_load_n(&s->remote[k], __ATOMIC_RELAXED))
			return 1;
	return 0;
}

/* With h's lock held: s, on no list, goes on the full list; but if
 * another thread freed into it meanwhile, on the partial one. A remote
 * free looks at the list after setting its bit (slab.c), this looks at
 * the bits after setting the list: one of the two sees the other, so no
 * freed object is stranded on a list the owner does not allocate from. */
static void park_full_locked(struct mb_theap *h, struct mb_slab *s)
{
	struct mb_slabq *full = &h->full[s->key][s->sclass];
	q_push(full, s, MB_SLAB_FULL);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (remote_pending(s)) {
		q_unlink(full, s);
		q_push(&h->partial[s->key][s->sclass], s, MB_SLAB_PARTIAL);
	}
}

static void park_full(struct mb_theap *h, struct mb_slab *s)
{
	mb_lock_acquire(&h->lock);
	park_full_locked(h, s);
	mb_lock_release(&h->lock);
}

/* With h's lock held: s (on no list) is the bin's current slab. The owner
 * writes its pages again, so none counts as handed back. */
static void make_current(struct mb_theap *h, struct mb_slab *s)
{
	__atomic_store_n(&s->list, MB_SLAB_CURRENT, __ATOMIC_RELAXED);
	s->released = 0;
	h->bin[s->key][s->sclass].cur = s;
}

/* With h's lock held: full slabs of (key, c) that other threads freed
 * into go to the partial list; they said so with the bin's revive flag,
 * which the caller cleared before taking the lock. */
static void revive_locked(struct mb_theap *h, int key, unsigned c)
{
	struct mb_slabq *full = &h->full[key][c];
	struct mb_slab *next;
	for (struct mb_slab *s = full->head; s; s = next) {
		next = s->next;
		if (remote_pending(s)) {
			q_unlink(full, s);
			q_push(&h->partial[key][c], s, MB_SLAB_PARTIAL);
		}
	}
}

/* ---- allocation ---- */

#define PARTIAL_SCAN 8

/* With h's lock held: the fullest of the first few partial slabs of
 * (key, c), unlinked; NULL if none. */
static struct mb_slab *take_partial(struct mb_theap *h, int key, unsigned c)
{
	struct mb_slabq *q = &h->partial[key][c];
	struct mb_slab *best = NULL;
	unsigned seen = 0;
	for (struct mb_slab *s = q->head; s && seen < PARTIAL_SCAN; s = s->next, seen++)
		if (!best || s->used > best->used)
			best = s;
	if (best)
		q_unlink(q, best);
	return best;
}

/* A hot object (theap.h) that another thread freed too: its remote bit
 * set, or once collected its free bit. */
static void check_hot(struct mb_tcache *tc, struct mb_slab *s)
{
	void *hot = tc->hot;
	if (!hot || tc->hot_slab != s)
		return;
	uint32_t i = (uint32_t)mb_slab_index(s, hot);
	uint64_t bit = (uint64_t)1 << (i & 63);
	if ((s->w[i >> 6].free | __atomic_load_n(&s->remote[i >> 6], __ATOMIC_RELAXED)) & bit)
		mb_fatal_pointer("free", "double free detected (freed by two threads)", hot);
}

/* The owner h folds in the remote frees of s: none may be of the hot
 * object of s's bin, which its slab counts as live. */
static unsigned collect(struct mb_theap *h, struct mb_slab *s)
{
	unsigned got = mb_slab_collect(s);
	if (got)
		check_hot(&h->tc[s->bin], s);
	return got;
}

/* Whether s (h's) has a free object the owner can take, remote frees
 * folded in. */
static int has_free(struct mb_theap *h, struct mb_slab *s)
{
	return mb_slab_find_free(s) || (collect(h, s) && mb_slab_find_free(s));
}

/* A slab of (key, c) with a free object, made current in place of old
 * (exhausted, or mb_slab_none): a partial one (survivors gather in the
 * fullest), an abandoned one, a new one. The lists change in one hold of
 * h's lock, as this runs every few dozen allocations of a class. */
static struct mb_slab *next_slab(struct mb_theap *h, int key, unsigned c, struct mb_slab *old)
{
	int revive_wanted = __atomic_load_n(&h->revive[key][c], __ATOMIC_RELAXED);
	if (revive_wanted)
		__atomic_store_n(&h->revive[key][c], 0, __ATOMIC_SEQ_CST);
	mb_lock_acquire(&h->lock);
	if (old != &mb_slab_none) {
		/* Exhausted: parked until frees come back to it. */
		h->bin[key][c].cur = &mb_slab_none;
		__atomic_store_n(&old->list, MB_SLAB_NONE, __ATOMIC_RELAXED);
		park_full_locked(h, old);
	}
	if (revive_wanted)
		revive_locked(h, key, c);
	struct mb_slab *s;
	while ((s = take_partial(h, key, c)) != NULL) {
		if (has_free(h, s)) {
			make_current(h, s);
			mb_lock_release(&h->lock);
			return s;
		}
		park_full_locked(h, s);
	}
	if ((s = h->empty[key][c].head) != NULL) {
		q_unlink(&h->empty[key][c], s);
		h->empty_bytes -= slab_bytes(s);
		mb_slab_find_free(s);
		make_current(h, s);
		mb_lock_release(&h->lock);
		return s;
	}
	mb_lock_release(&h->lock);
	while ((s = mb_slab_adopt_any(key, c, h)) != NULL) {
		if (mb_slab_find_free(s)) {
			mb_lock_acquire(&h->lock);
			make_current(h, s);
			mb_lock_release(&h->lock);
			return s;
		}
		park_full(h, s);
	}
	s = mb_slab_create(key, c, h);
	if (s) {
		mb_lock_acquire(&h->lock);
		make_current(h, s);
		mb_lock_release(&h->lock);
	}
	return s;
}

void *mb_theap_alloc_slow(struct mb_theap *h, int key, unsigned c, size_t n)
{
	struct mb_tcache *tc = mb_theap_tcache(h, key, c);
	void *hot = tc->hot;
	if (hot && !tc->n) {
		/* The fast path left it: its slab had remote frees. */
		check_hot(tc, tc->hot_slab);
		mb_tcache_take_hot(tc, n);
		mb_theap_tick(h);
		return hot;
	}
	mark_used(h, key, c);
	struct mb_bin *bin = &h->bin[key][c];
	struct mb_slab *s = bin->cur;
	/* The current slab's next word, or its remote frees, need no lock. */
	if (s == &mb_slab_none || !(mb_slab_find_free(s) ||
				    (__atomic_load_n(&s->has_remote, __ATOMIC_RELAXED) && collect(h, s) &&
				     mb_slab_find_free(s)))) {
		if ((s = next_slab(h, key, c, s)) == NULL)
			return NULL;
	}
	void *p = mb_slab_pop(s);
	tc->nalloc++;
	tc->req += n;
	mb_theap_tick(h);
	return p;
}

/* ---- free ---- */

void mb_theap_freed(struct mb_theap *h, struct mb_slab *s)
{
	int destroy = 0;
	mb_lock_acquire(&h->lock);
	if (s->list == MB_SLAB_FULL) {
		q_unlink(&h->full[s->key][s->sclass], s);
		q_push(&h->partial[s->key][s->sclass], s, MB_SLAB_PARTIAL);
	}
	if (s->used == 0 && s->list == MB_SLAB_PARTIAL) {
		/* Entirely free and not being allocated from: kept for the
		 * class's next slab while the heap keeps few, else its pages
		 * go back to the buddy, where they merge with their buddies. */
		q_unlink(&h->partial[s->key][s->sclass], s);
		size_t bytes = slab_bytes(s);
		if (h->empty_bytes + bytes <= MB_THEAP_EMPTY_BYTES) {
			q_push(&h->empty[s->key][s->sclass], s, MB_SLAB_EMPTY);
			h->empty_bytes += bytes;
		} else {
			destroy = 1;
		}
	}
	mb_lock_release(&h->lock);
	if (destroy)
		mb_slab_destroy(s);
	mb_theap_tick(h);
}

/* Object i of s, owned by h (whose owner or lock the caller is). Returns
 * 1 if s changed lists (mb_theap_freed). */
static int free_owned(struct mb_theap *h, struct mb_slab *s, uint32_t i, void *p)
{
	struct mb_slab_word *w = &s->w[i >> 6];
	uint64_t bit = (uint64_t)1 << (i & 63);
	if (mb_slab_is_free(s, i) || mb_theap_is_hot(h, s, p))
		mb_fatal_pointer("free", "double free detected", p);
	/* A sample: the caller told classification (alloc.c). */
	if (w->sampled & bit)
		mb_word_store(&w->sampled, w->sampled & ~bit);
	mb_word_store(&w->free, w->free | bit);
	s->used--;
	mark_used(h, s->key, s->sclass);
	mb_theap_tcache(h, s->key, s->sclass)->nfree++;
	if (!mb_slab_settle_due(s))
		return 0;
	mb_theap_freed(h, s);
	return 1;
}

int mb_theap_free(struct mb_theap *h, struct mb_slab *s, uint32_t i, void *p)
{
	struct mb_theap *o = mb_slab_owner(s);
	if (o == h && h)
		return free_owned(h, s, i, p) ? 2 : 1;
	if (o == &orphan && h != &orphan) {
		/* Nobody collects the orphan heap's remote frees: its
		 * objects are freed as its owner, under its lock. */
		mb_orphan_free(s, i, p);
		return 1;
	}
	if (!o && h && mb_slab_adopt(s, h)) {
		/* Its owner has exited: this thread takes it over. */
		mb_lock_acquire(&h->lock);
		q_push(&h->partial[s->key][s->sclass], s, MB_SLAB_PARTIAL);
		mb_lock_release(&h->lock);
		free_owned(h, s, i, p);
		return 2;
	}
	/* The owner's hot object (theap.h): caught here if it is hot still,
	 * else before the owner hands it out again. */
	if (__atomic_load_n(&s->hot, __ATOMIC_RELAXED) == i + 1)
		mb_fatal_pointer("free", "double free detected (freed by two threads)", p);
	int key = s->key, c = s->sclass;
	if (mb_slab_free_remote(s, i, p) && o)
		__atomic_store_n(&o->revive[key][c], 1, __ATOMIC_RELAXED);
	/* s may be gone already: only what was read before is used. */
	if (h) {
		mark_used(h, key, c);
		mb_theap_tcache(h, key, c)->nfree++;
	} else {
		mark_bits(exited_used, key, c);
		__atomic_fetch_add(&exited.nfree[key][c], 1, __ATOMIC_RELAXED);
	}
	return 0;
}

/* ---- frees posted by other threads (inbox.h) ---- */

int mb_theap_post_free(struct mb_theap *h, struct mb_slab *s, uint32_t i, void *p)
{
	struct mb_theap *o = mb_slab_owner(s);
	if (o == NULL || o == h || o == &orphan)
		return 0;
	/* The checks of a remote free (mb_theap_free): the owner's bits and
	 * hot object are read, not written. A sample goes the general way,
	 * which tells classification. */
	uint64_t bit = (uint64_t)1 << (i & 63);
	const struct mb_slab_word *w = &s->w[i >> 6];
	uint64_t bits = mb_word_load(&w->free) | mb_word_load(&w->cached) | mb_word_load(&w->sampled);
	if (mb_unlikely(bits & bit)) {
		if ((mb_word_load(&w->free) | mb_word_load(&w->cached)) & bit)
			mb_fatal_pointer("free", "double free detected", p);
		return 0;
	}
	if (mb_unlikely(__atomic_load_n(&s->hot, __ATOMIC_RELAXED) == i + 1))
		mb_fatal_pointer("free", "double free detected (freed by two threads)", p);
	/* The owner counts the free when it takes the object. */
	return mb_inbox_post(&o->inbox, p);
}

/* With cache, as the owner's own frees (into its thread cache first);
 * without, straight into the slabs (a heap whose thread is gone or
 * going, whose thread cache is let go of). Returns 1 if a slab changed
 * lists or hands. */
static int drain_inbox(struct mb_theap *h, int cache)
{
	void *p;
	int moved = 0;
	while ((p = mb_inbox_take(&h->inbox)) != NULL) {
		/* As the owner's own free: the push checks the object is a
		 * live one of h's slabs, not cached and not hot. */
		if (cache) {
			struct mb_slab *fs;
			int r = mb_theap_push_now(h, p, &fs);
			if (r == 2) {
				mb_theap_freed(h, fs);
				moved = 1;
			} else if (r == 3) {
				moved |= mb_theap_look(h, fs);
			}
			if (r)
				continue;
		}
		/* Posted as the start of a live object of a slab of h; a
		 * second free of it may have come first since. */
		struct mb_slab *s = mb_theap_slab_of(p);
		long i = s ? mb_slab_index(s, p) : -1;
		if (i < 0)
			mb_fatal_pointer("free", "double free or invalid pointer", p);
		if (mb_slab_owner(s) != h) {
			/* Posted to this heap's earlier thread, whose slabs
			 * went to others when it exited. */
			moved |= mb_theap_free(h, s, (uint32_t)i, p) == 2;
			continue;
		}
		if (mb_slab_is_free(s, (uint32_t)i) || mb_theap_is_hot(h, s, p))
			mb_fatal_pointer("free", "double free detected (freed by two threads)", p);
		moved |= free_owned(h, s, (uint32_t)i, p);
	}
	return moved;
}

int mb_theap_drain(struct mb_theap *h)
{
	int saved = errno; /* a malloc or free that succeeds leaves errno as it was */
	int moved = drain_inbox(h, 1);
	errno = saved;
	return moved;
}

/* ---- the thread cache ---- */

/* Object i of s, out of h's thread cache, free in its slab. No other
 * entry names s once it is empty, so with settle (the owner's flush) it
 * may go to the buddy here. */
static void put_back(struct mb_theap *h, struct mb_slab *s, uint32_t i, int settle)
{
	struct mb_slab_word *w = &s->w[i >> 6];
	mb_word_store(&w->free, w->free | (uint64_t)1 << (i & 63));
	s->used--;
	if (settle && mb_slab_settle_due(s))
		mb_theap_freed(h, s);
}

/* The objects of one bin's thread cache back into their slabs (see
 * mb_theap_flush_cache). */
static unsigned flush_bin(struct mb_theap *h, struct mb_tcache *tc, int settle)
{
	unsigned put = 0;
	void *hot = tc->hot;
	if (hot) {
		struct mb_slab *s = tc->hot_slab;
		if (settle)
			check_hot(tc, s);
		/* (A fork's child checks that the slab is the object's.) */
		if (settle || mb_theap_slab_of(hot) == s)
			__atomic_store_n(&s->hot, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&tc->hot, NULL, __ATOMIC_RELAXED);
		/* Without settle (a fork's child) the hot object is lost: the
		 * fork may have caught its thread handing it out. */
		if (settle) {
			put_back(h, s, (uint32_t)mb_slab_index(s, hot), 1);
			put++;
		}
	}
	while (tc->n) {
		void *p = tc->e[--tc->n].p;
		struct mb_slab *s = mb_theap_slab_of(p);
		long i = s ? mb_slab_index(s, p) : -1;
		struct mb_slab_word *w = i >= 0 ? &s->w[i >> 6] : NULL;
		uint64_t bit = (uint64_t)1 << (i & 63);
		/* Without settle the cache is a fork child's copy of a thread
		 * it does not have, which the fork may have caught between
		 * two stores: only an entry whose object is marked cached in
		 * one of h's slabs is put back (an object that thread was
		 * freeing or taking is lost with it; a live one is never
		 * marked free). */
		if (!settle && (i < 0 || mb_slab_owner(s) != h || !(w->cached & bit)))
			continue;
		mb_word_store(&w->cached, w->cached & ~bit);
		put_back(h, s, (uint32_t)i, settle);
		put++;
	}
	return put;
}

int mb_theap_look(struct mb_theap *h, struct mb_slab *s)
{
	unsigned bin = s->bin, c = s->sclass;
	struct mb_tcache *tc = &h->tc[bin];
	int moved = 0;
	if (mb_slab_settle_due(s)) {
		mb_theap_freed(h, s); /* which may give s back */
		moved = 1;
	}
	if ((uint16_t)tc->nalloc != h->storm_mark[bin]) {
		h->storm_mark[bin] = (uint16_t)tc->nalloc;
		h->storm[bin] = 0;
		tc->cap = mb_classes[c].cache_cap;
		return moved;
	}
	if (!tc->cap || ++h->storm[bin] < MB_TCACHE_SHED)
		return moved;
	/* Off first: the slabs flush_bin settles may free into this bin. */
	tc->cap = 0;
	h->storm[bin] = 0;
	flush_bin(h, tc, 1);
	return 1;
}

unsigned mb_theap_flush_cache(struct mb_theap *h, int settle)
{
	unsigned put = 0;
	for (int b = -1; (b = next_bin(h->used, b)) >= 0;)
		put += flush_bin(h, mb_theap_tcache(h, used_key(b), used_class(b)), settle);
	return put;
}

/* The current slab of an idle bin (key, c) stops being current: the
 * purge, which leaves current slabs alone, may then hand back its free
 * pages, or the buddy take it back whole. */
static void retire_current(struct mb_theap *h, int key, unsigned c)
{
	struct mb_slab *s = h->bin[key][c].cur;
	if (s == &mb_slab_none)
		return;
	if (remote_pending(s))
		collect(h, s);
	mb_lock_acquire(&h->lock);
	h->bin[key][c].cur = &mb_slab_none;
	if (s->used)
		q_push(&h->partial[key][c], s, MB_SLAB_PARTIAL);
	else
		__atomic_store_n(&s->list, MB_SLAB_NONE, __ATOMIC_RELAXED);
	mb_lock_release(&h->lock);
	if (!s->used)
		mb_slab_destroy(s);
}

/* The bins of h that no allocation took from since the last call: their
 * thread cache back into their slabs, and their current slab retired. A
 * cached object counts as used in its slab, so until then neither the
 * slab can empty nor the purge return its page: a program whose load has
 * moved on to other sizes would keep up to MB_TCACHE_BYTES of every class
 * it once used, and the free objects of its current slab. */
static void age_bins(struct mb_theap *h)
{
	for (int b = -1; (b = next_bin(h->used, b)) >= 0;) {
		int k = used_key(b);
		unsigned c = used_class(b);
		struct mb_tcache *tc = mb_theap_tcache(h, k, c);
		uint32_t *mark = &h->aged_nalloc[k * MB_NCLASSES + c];
		if ((uint32_t)tc->nalloc == *mark) {
			flush_bin(h, tc, 1);
			retire_current(h, k, c);
		}
		*mark = (uint32_t)tc->nalloc;
	}
}

/* ---- heaps without a thread ---- */

/* The last id given to a heap: heaps are never freed, so ids are unique.
 * The tag's bits would run out only past 2^28 heaps of over 500 KiB. */
static uint32_t last_heap_id;

static void heap_init(struct mb_theap *h)
{
	mb_inbox_open(&h->inbox);
	h->id = __atomic_add_fetch(&last_heap_id, 1, __ATOMIC_RELAXED);
	if (h->id > MB_SLAB_TAG_MAX_ID)
		mb_fatal_invariant("thread heap", "heap ids exhausted");
	for (int k = 0; k < MB_NKEYS; k++)
		for (unsigned c = 0; c < MB_NCLASSES; c++)
			h->bin[k][c].cur = &mb_slab_none;
	mb_lock_init(&h->lock, "theap", 0);
}

static void orphan_ready_locked(void)
{
	if (orphan_ready)
		return;
	heap_init(&orphan);
	orphan.in_use = 1;
	orphan.flushed_ms = orphan.aged_ms = mb_now_ms();
	orphan_ready = 1;
	mb_lock_acquire(&heaps_lock);
	orphan.next = all_heaps;
	if (all_heaps)
		all_heaps->prev = &orphan;
	all_heaps = &orphan;
	mb_lock_release(&heaps_lock);
}

void *mb_orphan_alloc(int key, unsigned c, size_t n)
{
	mb_lock_acquire(&orphan_lock);
	orphan_ready_locked();
	void *p = mb_theap_pop(&orphan, key, c, n);
	if (!p)
		p = mb_theap_alloc_slow(&orphan, key, c, n);
	mb_lock_release(&orphan_lock);
	return p;
}

void mb_orphan_free(struct mb_slab *s, uint32_t i, void *p)
{
	if (mb_slab_owner(s) != &orphan) {
		mb_theap_free(NULL, s, i, p);
		return;
	}
	mb_lock_acquire(&orphan_lock);
	if (mb_slab_owner(s) == &orphan)
		free_owned(&orphan, s, i, p);
	else
		mb_theap_free(NULL, s, i, p);
	mb_lock_release(&orphan_lock);
}

/* ---- life of a heap ---- */

struct mb_theap *mb_theap_create(void)
{
	struct mb_theap *h = NULL;
	mb_lock_acquire(&heaps_lock);
	for (struct mb_theap *x = all_heaps; x; x = x->next)
		if (!x->in_use) {
			h = x;
			h->in_use = 1;
			break;
		}
	mb_lock_release(&heaps_lock);
	if (!h) {
		mb_heap_lock();
		h = mb_meta_alloc(sizeof(*h));
		mb_heap_unlock();
		if (!h)
			return NULL;
		heap_init(h);
		h->in_use = 1;
		mb_lock_acquire(&heaps_lock);
		h->next = all_heaps;
		if (all_heaps)
			all_heaps->prev = h;
		all_heaps = h;
		mb_lock_release(&heaps_lock);
	} else {
		/* Closed when its last thread exited (heap_init opened a
		 * new one). */
		mb_inbox_open(&h->inbox);
	}
	/* The thread cache's capacities, as they are now (a test changes
	 * them between heaps); a bin not used yet gets its own when it is. */
	for (int b = -1; (b = next_bin(h->used, b)) >= 0;)
		mb_theap_tcache(h, used_key(b), used_class(b))->cap = mb_classes[used_class(b)].cache_cap;
	h->flushed_ms = h->aged_ms = mb_now_ms();
	return h;
}

/* A slab its owner lets go of: back to the buddy if nothing in it lives,
 * else abandoned. */
static void let_go(struct mb_slab *s)
{
	mb_slab_collect(s);
	if (s->used == 0)
		mb_slab_destroy(s);
	else
		mb_slab_abandon(s);
}

/* With h's lock held: the empty slabs h keeps of (key, c), to the buddy.
 * Returns 1 if there was any. */
static int give_back_empty(struct mb_theap *h, int key, unsigned c)
{
	struct mb_slabq *q = &h->empty[key][c];
	struct mb_slab *s;
	int any = 0;
	while ((s = q->head) != NULL) {
		q_unlink(q, s);
		h->empty_bytes -= slab_bytes(s);
		mb_slab_destroy(s);
		any = 1;
	}
	return any;
}

/* With h's lock held: every slab of h let go of. */
static void let_go_all(struct mb_theap *h)
{
	for (int b = -1; (b = next_bin(h->used, b)) >= 0;) {
		int k = used_key(b);
		unsigned c = used_class(b);
		struct mb_bin *bin = &h->bin[k][c];
		if (bin->cur != &mb_slab_none) {
			struct mb_slab *s = bin->cur;
			bin->cur = &mb_slab_none;
			__atomic_store_n(&s->list, MB_SLAB_NONE, __ATOMIC_RELAXED);
			let_go(s);
		}
		struct mb_slab *s;
		while ((s = h->partial[k][c].head) != NULL) {
			q_unlink(&h->partial[k][c], s);
			let_go(s);
		}
		while ((s = h->full[k][c].head) != NULL) {
			q_unlink(&h->full[k][c], s);
			let_go(s);
		}
		give_back_empty(h, k, c);
		h->revive[k][c] = 0;
	}
}

/* Into the totals of exited threads, and zeroed for the next thread. */
static void fold_counters(struct mb_theap *h)
{
	for (int b = -1; (b = next_bin(h->used, b)) >= 0;) {
		int k = used_key(b);
		unsigned c = used_class(b);
		struct mb_tcache *tc = mb_theap_tcache(h, k, c);
		mark_bits(exited_used, k, c);
		__atomic_fetch_add(&exited.nalloc[k][c], tc->nalloc, __ATOMIC_RELAXED);
		__atomic_fetch_add(&exited.nfree[k][c], tc->nfree, __ATOMIC_RELAXED);
		__atomic_fetch_add(&exited.req[k][c], tc->req, __ATOMIC_RELAXED);
		tc->nalloc = tc->nfree = tc->req = 0;
	}
	for (int k = 0; k < MB_NKEYS; k++)
		mb_counts_add(mb_heap.counts.mallocs[k], h->counts.mallocs[k]);
	mb_counts_add(mb_heap.counts.frees, h->counts.frees);
	mb_counts_add(mb_heap.counts.alloc_bytes, h->counts.alloc_bytes);
	mb_counts_add(mb_heap.counts.freed_bytes, h->counts.freed_bytes);
	mb_counts_add(mb_heap.counts.live_requested, h->counts.live_requested);
	memset(&h->counts, 0, sizeof h->counts);
}

void mb_theap_destroy(struct mb_theap *h)
{
	/* Posts fail from here on: other threads set remote bits instead,
	 * which the slabs keep when they are abandoned. */
	mb_inbox_close(&h->inbox);
	drain_inbox(h, 0);
	mb_theap_flush_cache(h, 1);
	mb_runcache_flush(&h->runs);
	mb_lock_acquire(&h->lock);
	let_go_all(h);
	mb_lock_release(&h->lock);
	mb_lock_acquire(&heaps_lock);
	fold_counters(h);
	h->in_use = 0;
	mb_lock_release(&heaps_lock);
}

void mb_theap_tick(struct mb_theap *h)
{
	if (++h->slow_calls & 63)
		return;
	uint64_t now = mb_now_ms();
	if (now - h->aged_ms >= mb_purge_period_ms()) {
		h->aged_ms = now;
		age_bins(h);
	}
	if (now - h->flushed_ms < 2 * mb_purge_period_ms())
		return;
	h->flushed_ms = now;
	/* Runs no allocation asked for lately, of a size or type the
	 * thread's sites no longer get, say. */
	mb_runcache_flush(&h->runs);
}

/* With h's lock held: the slabs of q that other threads emptied, to the
 * buddy. */
static int give_back_emptied(struct mb_slabq *q)
{
	int any = 0;
	struct mb_slab *next;
	for (struct mb_slab *s = q->head; s; s = next) {
		next = s->next;
		if (remote_pending(s))
			mb_slab_collect(s);
		if (s->used)
			continue;
		q_unlink(q, s);
		mb_slab_destroy(s);
		any = 1;
	}
	return any;
}

int mb_theap_give_back(struct mb_theap *h)
{
	int any = mb_theap_flush_cache(h, 1) != 0;
	any |= mb_runcache_flush(&h->runs) != 0;
	mb_lock_acquire(&h->lock);
	for (int b = -1; (b = next_bin(h->used, b)) >= 0;) {
		int k = used_key(b);
		unsigned c = used_class(b);
		struct mb_bin *bin = &h->bin[k][c];
		struct mb_slab *s = bin->cur;
		if (s != &mb_slab_none && remote_pending(s))
			mb_slab_collect(s);
		if (s != &mb_slab_none && !s->used) {
			bin->cur = &mb_slab_none;
			__atomic_store_n(&s->list, MB_SLAB_NONE, __ATOMIC_RELAXED);
			mb_slab_destroy(s);
			any = 1;
		}
		any |= give_back_emptied(&h->partial[k][c]);
		any |= give_back_emptied(&h->full[k][c]);
		any |= give_back_empty(h, k, c);
	}
	mb_lock_release(&h->lock);
	return any;
}

int mb_orphan_give_back(void)
{
	mb_lock_acquire(&orphan_lock);
	int any = orphan_ready && mb_theap_give_back(&orphan);
	mb_lock_release(&orphan_lock);
	return any;
}

/* ---- purge ---- */

/* At most a quarter of the objects in use: worth the system calls. */
static int sparse(const struct mb_slab *s)
{
	return __atomic_load_n(&s->used, __ATOMIC_RELAXED) * 4u <= s->nobj;
}

static size_t release_list(struct mb_slabq *q, size_t budget, unsigned *failed)
{
	size_t released = 0;
	for (struct mb_slab *s = q->head; s && released < budget && !*failed; s = s->next)
		if (sparse(s))
			released += mb_slab_release_free_pages(s, budget - released, failed);
	return released;
}

size_t mb_theap_purge(size_t budget, unsigned *failed)
{
	size_t released = 0;
	*failed = 0;
	mb_lock_acquire(&heaps_lock);
	for (struct mb_theap *h = all_heaps; h && released < budget && !*failed; h = h->next) {
		if (!h->in_use || mb_lock_try(&h->lock) != 0)
			continue;
		/* Not the current slabs: their owner allocates from them
		 * without the lock. The others change hands under it. The
		 * empty slabs the owner kept go back to the buddy whole: a
		 * sweep period after they emptied at most. */
		for (int b = -1; (b = next_bin(h->used, b)) >= 0;) {
			int k = used_key(b);
			unsigned c = used_class(b);
			give_back_empty(h, k, c);
			released += release_list(&h->partial[k][c], budget - released, failed);
			released += release_list(&h->full[k][c], budget - released, failed);
		}
		mb_lock_release(&h->lock);
	}
	mb_lock_release(&heaps_lock);
	return released;
}

/* ---- counters ---- */

/* Adds bins (k, c) marked in used of counts in to out. */
static void add_classes(struct mb_class_counts *out, const struct mb_class_counts *in, const uint64_t *used)
{
	for (int b = -1; (b = next_bin(used, b)) >= 0;) {
		int k = used_key(b);
		unsigned c = used_class(b);
		out->nalloc[k][c] += __atomic_load_n(&in->nalloc[k][c], __ATOMIC_RELAXED);
		out->nfree[k][c] += __atomic_load_n(&in->nfree[k][c], __ATOMIC_RELAXED);
		out->req[k][c] += __atomic_load_n(&in->req[k][c], __ATOMIC_RELAXED);
	}
}

static void add_bins(struct mb_class_counts *out, struct mb_theap *h)
{
	for (int b = -1; (b = next_bin(h->used, b)) >= 0;) {
		int k = used_key(b);
		unsigned c = used_class(b);
		const struct mb_tcache *tc = mb_theap_tcache(h, k, c);
		out->nalloc[k][c] += __atomic_load_n(&tc->nalloc, __ATOMIC_RELAXED);
		out->nfree[k][c] += __atomic_load_n(&tc->nfree, __ATOMIC_RELAXED);
		out->req[k][c] += __atomic_load_n(&tc->req, __ATOMIC_RELAXED);
	}
}

static void counts_read(struct mb_counts *to, const struct mb_counts *from)
{
	for (int k = 0; k < MB_NKEYS; k++)
		to->mallocs[k] += __atomic_load_n(&from->mallocs[k], __ATOMIC_RELAXED);
	to->frees += __atomic_load_n(&from->frees, __ATOMIC_RELAXED);
	to->alloc_bytes += __atomic_load_n(&from->alloc_bytes, __ATOMIC_RELAXED);
	to->freed_bytes += __atomic_load_n(&from->freed_bytes, __ATOMIC_RELAXED);
	to->live_requested += __atomic_load_n(&from->live_requested, __ATOMIC_RELAXED);
}

void mb_theap_sum_classes(struct mb_class_counts *out)
{
	memset(out, 0, sizeof(*out));
	mb_lock_acquire(&heaps_lock);
	add_classes(out, &exited, exited_used);
	for (struct mb_theap *h = all_heaps; h; h = h->next)
		if (h->in_use)
			add_bins(out, h);
	mb_lock_release(&heaps_lock);
}

void mb_theap_hot_each(void (*fn)(void *ctx, const void *p), void *ctx)
{
	mb_lock_acquire(&heaps_lock);
	for (struct mb_theap *h = all_heaps; h; h = h->next) {
		if (!h->in_use)
			continue;
		for (int b = -1; (b = next_bin(h->used, b)) >= 0;) {
			void *hot = __atomic_load_n(&mb_theap_tcache(h, used_key(b), used_class(b))->hot, __ATOMIC_RELAXED);
			if (hot)
				fn(ctx, hot);
		}
	}
	mb_lock_release(&heaps_lock);
}

void mb_theap_posted_each(void (*fn)(void *ctx, const void *p), void *ctx)
{
	mb_lock_acquire(&heaps_lock);
	for (struct mb_theap *h = all_heaps; h; h = h->next)
		if (h->in_use && h != &orphan)
			mb_inbox_each(&h->inbox, fn, ctx);
	mb_lock_release(&heaps_lock);
}

/* Objects of bin (k, c) counted into out's totals. */
static void add_totals(struct mb_counts *out, int k, unsigned c, uint64_t nalloc, uint64_t nfree)
{
	uint64_t size = mb_classes[c].size;
	out->mallocs[k] += nalloc;
	out->frees += nfree;
	out->alloc_bytes += nalloc * size;
	out->freed_bytes += nfree * size;
}

/* Called often (the peak's sampling): no table of every class, and only
 * the bins that counted anything. */
void mb_theap_sum_counts(struct mb_counts *out)
{
	memset(out, 0, sizeof(*out));
	mb_lock_acquire(&heaps_lock);
	for (int b = -1; (b = next_bin(exited_used, b)) >= 0;) {
		int k = used_key(b);
		unsigned c = used_class(b);
		add_totals(out, k, c, __atomic_load_n(&exited.nalloc[k][c], __ATOMIC_RELAXED),
			   __atomic_load_n(&exited.nfree[k][c], __ATOMIC_RELAXED));
	}
	counts_read(out, &mb_heap.counts);
	for (struct mb_theap *h = all_heaps; h; h = h->next) {
		if (!h->in_use)
			continue;
		for (int b = -1; (b = next_bin(h->used, b)) >= 0;) {
			const struct mb_tcache *tc = mb_theap_tcache(h, used_key(b), used_class(b));
			add_totals(out, used_key(b), used_class(b), __atomic_load_n(&tc->nalloc, __ATOMIC_RELAXED),
				   __atomic_load_n(&tc->nfree, __ATOMIC_RELAXED));
		}
		counts_read(out, &h->counts);
	}
	mb_lock_release(&heaps_lock);
}

/* ---- fork ---- */

void mb_theap_fork_prepare(void)
{
	mb_lock_acquire(&orphan_lock);
	mb_lock_acquire(&heaps_lock);
	for (struct mb_theap *h = all_heaps; h; h = h->next)
		mb_lock_acquire(&h->lock);
}

void mb_theap_fork_parent(void)
{
	for (struct mb_theap *h = all_heaps; h; h = h->next)
		mb_lock_release(&h->lock);
	mb_lock_release(&heaps_lock);
	mb_lock_release(&orphan_lock);
}

void mb_theap_fork_child(void)
{
	mb_lock_after_fork_child(&orphan_lock, 1);
	mb_lock_after_fork_child(&heaps_lock, 1);
	for (struct mb_theap *h = all_heaps; h; h = h->next)
		mb_lock_after_fork_child(&h->lock, 0);
	/* Only the forking thread lives on: the other threads' slabs are
	 * abandoned, for the child's threads to adopt, and their heaps kept
	 * for reuse. Their run caches are lost, as their objects are. */
	struct mb_theap *self = mb_self.heap;
	for (struct mb_theap *h = all_heaps; h; h = h->next) {
		if (!h->in_use || h == &orphan)
			continue;
		/* What the child's one thread can take of the posts. */
		mb_inbox_fork_child(&h->inbox);
		if (h == self)
			continue;
		mb_theap_flush_cache(h, 0);
		mb_inbox_close(&h->inbox); /* opened again with the heap */
		drain_inbox(h, 0);
		let_go_all(h);
		fold_counters(h);
		memset(&h->runs, 0, sizeof h->runs);
		h->in_use = 0;
	}
}
