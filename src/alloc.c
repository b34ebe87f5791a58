/* Fast paths through the slabs the thread's heap owns (theap.h), slow paths
 * through its partial and full lists and the buddy (small objects) or the
 * heap lock (large ones).
 * Every pointer the program hands back is checked against the out-of-band
 * metadata before anything is written. */
#include "config.h"
#include "alloc.h"
#include "canary.h"
#include "classify.h"
#include "heap.h"
#include "init.h"
#include "options.h"
#include "large.h"
#include "background.h"
#include "purge.h"
#include "report.h"
#include "runcache.h"
#include "slab.h"
#include "theap.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* The heap is full: what this thread holds and nothing uses (cached runs,
 * current slabs left entirely free) and the abandoned slabs that became
 * entirely free may be all that keeps pages from the buddy, and free
 * memory may be out of reach while the kernel takes it back. Gives them
 * back and waits for the release; returns 1 if there was any (a retry may
 * succeed). */
static int give_back_cache(void)
{
	struct mb_theap *h = mb_self.heap;
	int any = h ? mb_theap_give_back(h) : 0;
	any |= mb_orphan_give_back();
	unsigned failed;
	mb_slab_purge_abandoned(0, &failed);
	return mb_purge_settle() | any;
}

/* A page-granular allocation, retried once after the thread's caches were
 * given back. errno is ENOMEM only if the retry fails too. */
static void *large_alloc(size_t n, size_t align, int key, int zero)
{
	struct mb_theap *h = mb_self.heap;
	if (n <= MB_RUN_MAX && align <= MB_PAGE_SIZE && h) {
		void *p = mb_runcache_get(&h->runs, &h->counts, n, key);
		if (p) {
			if (zero)
				memset(p, 0, ((n + MB_PAGE_SIZE - 1) & ~(MB_PAGE_SIZE - 1)));
			return p;
		}
	}
	int saved = errno;
	/* Clean pages the buddy hands out meanwhile (another thread's may
	 * count too): a run taken clean pays for what waits at once. */
	uint64_t fresh = __atomic_load_n(&mb_heap.buddy.fresh_pages, __ATOMIC_RELAXED);
	void *p = mb_large_alloc(n, align, key, zero);
	if (p == NULL && give_back_cache()) {
		p = mb_large_alloc(n, align, key, zero);
		if (p)
			errno = saved;
	}
	mb_purge_offset_run(__atomic_load_n(&mb_heap.buddy.fresh_pages, __ATOMIC_RELAXED) - fresh);
	mb_purge_maybe();
	return p;
}

/* A small object from h's slabs, or with no heap from the orphan heap;
 * retried once after the caches were given back. */
static void slabs_moved(void);

static void *small_from(struct mb_theap *h, size_t n, int key, unsigned c)
{
	/* A thread that allocates and seldom frees (a producer) takes what
	 * other threads posted to it here, before its inbox fills. */
	if (h && mb_unlikely(mb_inbox_pending(&h->inbox)) && mb_theap_drain(h))
		slabs_moved();
	void *p = h ? mb_theap_alloc_slow(h, key, c, n) : mb_orphan_alloc(key, c, n);
	if (mb_unlikely(p == NULL)) {
		if (give_back_cache())
			p = h ? mb_theap_alloc_slow(h, key, c, n) : mb_orphan_alloc(key, c, n);
		if (p == NULL)
			errno = ENOMEM;
	}
	mb_deferred_poll();
	mb_purge_maybe();
	return p;
}

void mb_alloc_tick(void)
{
	struct mb_theap *h = mb_self.heap;
	if (h)
		mb_theap_tick(h);
}

__attribute__((noinline)) void *mb_malloc_small_slow(struct mb_theap *h, size_t n, int key, unsigned c)
{
	return small_from(h, n, key, c);
}

/* The size class tables exist once the heap is initialised, which a thread
 * heap implies; the slow path (re)computes the class after initialising. */
static __attribute__((noinline)) void *small_slow(size_t n, int key)
{
	if (mb_process_init() != 0) {
		errno = ENOMEM;
		return NULL;
	}
	struct mb_theap *h = mb_self.heap;
	if (!h)
		h = mb_thread_init();
	return small_from(h, n, key, mb_size_class(n));
}

/* n must be a size of class c's range, or c's own size (aligned requests). */
static inline void *malloc_small(size_t n, int key)
{
	struct mb_theap *h = mb_self.heap;
	if (mb_likely(h != NULL)) {
		unsigned c = mb_size_class(n);
		void *p = mb_theap_pop(h, key, c, n);
		if (mb_likely(p != NULL))
			return p;
		return small_from(h, n, key, c);
	}
	return small_slow(n, key);
}

static inline void *raw_malloc(size_t n, int key)
{
	if (mb_likely(n <= MB_SMALL_MAX))
		return malloc_small(n, key);
	if (mb_process_init() != 0) {
		errno = ENOMEM;
		return NULL;
	}
	mb_deferred_poll();
	return large_alloc(n, 0, key, 0);
}

static inline void *raw_calloc(size_t nmemb, size_t size, int key)
{
	size_t n;
	if (mb_unlikely(__builtin_mul_overflow(nmemb, size, &n))) {
		errno = ENOMEM;
		return NULL;
	}
	if (n <= MB_SMALL_MAX) {
		void *p = malloc_small(n, key);
		if (p) /* the whole object, as glibc clears the whole chunk */
			memset(p, 0, mb_classes[mb_size_class(n)].size);
		return p;
	}
	if (mb_process_init() != 0) {
		errno = ENOMEM;
		return NULL;
	}
	return large_alloc(n, 0, key, 1);
}

static inline void *raw_memalign(size_t align, size_t n, int key)
{
	if (align <= MB_ALIGNMENT)
		return raw_malloc(n, key);
	if (mb_process_init() != 0) {
		errno = ENOMEM;
		return NULL;
	}
	if (align <= MB_PAGE_SIZE) {
		int c = mb_size_class_aligned(n, align);
		if (c >= 0)
			return malloc_small(mb_classes[c].size, key);
	}
	return large_alloc(n, align, key, 0);
}

/* ---- free ---- */

/* The page record of p if p lies in the heap, else NULL. */
static inline struct mb_page *page_of(const void *p)
{
	struct mb_buddy *b = &mb_heap.buddy;
	size_t i = mb_buddy_page_index(b, p);
	if (mb_unlikely(i >= b->npages))
		return NULL;
	return &b->pages[i];
}

/* The page record of p, which must be a live allocation (for a small
 * object *sp and *ip name its slab and index, else *sp is NULL). Anything
 * else is reported naming func; an object already freed is a "double
 * free" when freeing, a "use after free" otherwise. */
static struct mb_page *live_or_die(const void *p, const char *func, int freeing, struct mb_slab **sp, uint32_t *ip)
{
	struct mb_page *m = page_of(p);
	if (mb_unlikely(m == NULL))
		mb_fatal_pointer(func, "invalid pointer (not allocated by libmbuddy)", p);
	if (mb_likely(m->kind == MB_KIND_SLAB)) {
		struct mb_slab *s = mb_slab_of_page(m);
		long i = mb_slab_index(s, p);
		if (mb_unlikely(i < 0))
			mb_fatal_pointer(func, "invalid pointer (not the start of an object)", p);
		if (mb_unlikely(mb_slab_is_free(s, (uint32_t)i) || mb_theap_is_hot(mb_self.heap, s, p)))
			mb_fatal_pointer(func, freeing ? "double free detected" : "use after free (pointer already freed)", p);
		*sp = s;
		*ip = (uint32_t)i;
		return m;
	}
	if (mb_unlikely(m->kind != MB_KIND_LARGE || m->state != MB_PG_ALLOC || ((uintptr_t)p & (MB_PAGE_SIZE - 1))))
		mb_fatal_pointer(func,
				 m->state == MB_PG_TAIL || m->kind == MB_KIND_LARGE ? "invalid pointer (inside an allocation)"
				 : freeing ? "double free or invalid pointer"
					   : "use after free or invalid pointer",
				 p);
	if (mb_unlikely(__atomic_load_n(&m->user16, __ATOMIC_RELAXED) & MB_LARGE_CACHED))
		mb_fatal_pointer(func, freeing ? "double free detected" : "use after free (pointer already freed)", p);
	*sp = NULL;
	return m;
}

/* A slab changed lists: one that went back to the buddy may have left a
 * pageblock idle, one that emptied partly free pages; the purge learns
 * when it falls due. */
static void slabs_moved(void)
{
	mb_purge_slabs_freed();
	mb_purge_maybe_after_free();
}

__attribute__((noinline)) void mb_free_settle(struct mb_slab *s)
{
	mb_theap_freed(mb_self.heap, s);
	slabs_moved();
}

__attribute__((noinline)) void mb_free_look(struct mb_slab *s)
{
	if (mb_theap_look(mb_self.heap, s))
		slabs_moved();
}

/* What a push that freed p (r: 2 or 3, mb_theap_push) left to do to its
 * slab s. */
static inline void after_push(int r, struct mb_slab *s)
{
	if (r == 2)
		mb_free_settle(s);
	else if (r == 3)
		mb_free_look(s);
}

/* What the free fast path leaves of p (not NULL) on account of h's inbox
 * (inbox.h), the calling thread's heap: posts waiting, which are taken
 * first (one of them may be p: then this free is a double free), then p
 * pushed again; or p an object of another thread's slab, posted to its
 * owner. Returns 1 if p is freed. */
static int free_posted(struct mb_theap *h, void *p)
{
	if (mb_inbox_pending(&h->inbox)) {
		if (mb_theap_drain(h))
			slabs_moved();
		struct mb_slab *s;
		int r = mb_theap_push_now(mb_self.fast, p, &s);
		if (r) {
			after_push(r, s);
			return 1;
		}
	}
	struct mb_slab *s = mb_theap_slab_of(p);
	long i = s ? mb_slab_index(s, p) : -1;
	return i >= 0 && mb_theap_post_free(h, s, (uint32_t)i, p);
}

/* Everything the free fast path leaves: NULL, errors, samples, large
 * objects, other threads' slabs, threads without a heap. */
static __attribute__((noinline)) void free_slow(void *p, const char *func)
{
	if (mb_unlikely(p == NULL))
		return;
	struct mb_theap *me = mb_self.heap;
	if (me && free_posted(me, p))
		return;
	struct mb_slab *s;
	uint32_t i;
	struct mb_page *m = live_or_die(p, func, 1, &s, &i);
	int saved = errno;
	/* A thread that only frees (the consumer of a queue) gets its heap
	 * here, as one that allocates does at its first malloc: its frees
	 * are then counted in its own lines, not in the exited threads'
	 * shared counters with an atomic operation each. */
	struct mb_theap *h = mb_self.heap;
	if (mb_unlikely(h == NULL) && __atomic_load_n(&mb_process_state, __ATOMIC_ACQUIRE) == MB_PROCESS_READY)
		h = mb_thread_init();
	/* A remote bit, or a run kept whole in the thread's cache, frees no
	 * page: no purge to look at (a third of a cross-thread workload's
	 * frees would look at the clock, and a tenth of glibc-thread's). */
	int may_queue = 1;
	if (mb_likely(s != NULL)) {
		/* Told before the object is free: then its owner may hand it
		 * out, and sample it, again. */
		if (mb_slab_is_sampled(s, i))
			mb_classify_freed(p);
		if (h) {
			int r = mb_theap_free(h, s, i, p);
			may_queue = r == 1;
			if (r == 2)
				slabs_moved(); /* as mb_free_settle */
		} else
			mb_orphan_free(s, i, p);
	} else {
		if (m->user16 & MB_LARGE_SAMPLED)
			mb_classify_freed(p);
		int kept = h ? mb_runcache_put(&h->runs, &h->counts, p, m) : 0;
		if (!kept)
			mb_large_free(p, m);
		may_queue = kept != 1;
		/* A thread that only frees must age its run cache too. */
		if (h)
			mb_theap_tick(h);
	}
	if (may_queue)
		mb_purge_maybe_after_free();
	errno = saved;
}

static inline void raw_free(void *p, const char *func)
{
	struct mb_slab *s;
	int r = mb_theap_push(mb_self.heap, p, &s);
	if (mb_likely(r == 1))
		return;
	if (r)
		after_push(r, s);
	else
		free_slow(p, func);
}

static inline size_t raw_usable_size(const void *p, const char *func)
{
	if (!p)
		return 0;
	struct mb_slab *s;
	uint32_t i;
	struct mb_page *m = live_or_die(p, func, 0, &s, &i);
	return s ? s->size : mb_large_pages(m) << MB_PAGE_SHIFT;
}

/* ---- realloc ---- */

static void *move(void *p, size_t old, size_t n, int key, const char *func)
{
	void *q = raw_malloc(n, key);
	if (!q)
		return NULL; /* the old block is left untouched, as C requires */
	memcpy(q, p, old < n ? old : n);
	raw_free(p, func);
	return q;
}

static inline void *raw_realloc(void *p, size_t n, int key, const char *func)
{
	if (!p)
		return raw_malloc(n, key);
	if (n == 0) {
		raw_free(p, func); /* glibc frees and returns NULL */
		return NULL;
	}
	struct mb_slab *s;
	uint32_t i;
	struct mb_page *m = live_or_die(p, func, 0, &s, &i);
	if (s) {
		/* Same class: nothing to do. */
		if (n <= MB_SMALL_MAX && mb_size_class(n) == s->sclass)
			return p;
		return move(p, s->size, n, key, func);
	}
	size_t old_bytes = mb_large_pages(m) << MB_PAGE_SHIFT;
	if (n <= MB_SMALL_MAX)
		return move(p, old_bytes, n, key, func);
	if (n > mb_heap.region_bytes) {
		errno = ENOMEM;
		return NULL;
	}
	if (mb_large_resize(p, m, n, func) == 0) {
		mb_purge_maybe();
		return p;
	}
	return move(p, old_bytes, n, key, func);
}

int mb_trim(void)
{
	if (mb_process_init() != 0)
		return 0;
	struct mb_theap *h = mb_self.heap;
	if (h)
		mb_theap_give_back(h);
	mb_orphan_give_back();
	uint64_t before = __atomic_load_n(&mb_heap.released_bytes, __ATOMIC_RELAXED);
	mb_purge(1);
	return __atomic_load_n(&mb_heap.released_bytes, __ATOMIC_RELAXED) != before;
}

/* ---- MBUDDY_CHECK=1: a canary in the last 8 bytes of every object ----
 *
 * Each request gets MB_CANARY_BYTES more bytes, and the last ones of the
 * object's usable size hold its canary (canary.h). The usable size the
 * program sees is that much smaller. */

static void *arm(void *p, const char *func)
{
	if (p) {
		size_t u = raw_usable_size(p, func);
		uint64_t v = mb_canary_value((char *)p + u - MB_CANARY_BYTES);
		memcpy((char *)p + u - MB_CANARY_BYTES, &v, MB_CANARY_BYTES);
	}
	return p;
}

static void verify(const void *p, const char *func)
{
	size_t u = raw_usable_size(p, func);
	uint64_t v;
	memcpy(&v, (const char *)p + u - MB_CANARY_BYTES, MB_CANARY_BYTES);
	if (v != mb_canary_value((const char *)p + u - MB_CANARY_BYTES))
		mb_fatal_pointer(func, "heap overflow detected (canary after the object overwritten)", p);
}

/* Whether new objects get canaries. MBUDDY_CHECK is parsed when the heap is
 * set up, and the first allocation of the process may come before that
 * (from a library constructor): the heap is set up first, so that object
 * is armed too, since free will verify it. */
static inline int canaries_on(void)
{
	if (mb_unlikely(__atomic_load_n(&mb_process_state, __ATOMIC_ACQUIRE) != MB_PROCESS_READY))
		mb_process_init(); /* on failure the allocation fails as well */
	return mb_opt.check;
}

static int grow(size_t n, size_t *out)
{
	if (n > SIZE_MAX - MB_CANARY_BYTES) {
		errno = ENOMEM;
		return -1;
	}
	*out = n + MB_CANARY_BYTES;
	return 0;
}

void *mb_malloc(size_t n, int key)
{
	if (mb_likely(!canaries_on()))
		return raw_malloc(n, key);
	size_t m;
	return grow(n, &m) ? NULL : arm(raw_malloc(m, key), "malloc");
}

void *mb_calloc(size_t nmemb, size_t size, int key)
{
	if (mb_likely(!canaries_on()))
		return raw_calloc(nmemb, size, key);
	size_t n, m;
	if (__builtin_mul_overflow(nmemb, size, &n) || grow(n, &m)) {
		errno = ENOMEM;
		return NULL;
	}
	return arm(raw_calloc(1, m, key), "calloc");
}

void *mb_memalign(size_t align, size_t n, int key)
{
	if (mb_likely(!canaries_on()))
		return raw_memalign(align, n, key);
	size_t m;
	return grow(n, &m) ? NULL : arm(raw_memalign(align, m, key), "memalign");
}

void mb_free_declined(void *p, const char *func)
{
	if (__builtin_expect(mb_opt.check, 0))
		mb_free(p, func);
	else
		free_slow(p, func);
}

void mb_free(void *p, const char *func)
{
	if (__builtin_expect(mb_opt.check && p != NULL, 0))
		verify(p, func);
	raw_free(p, func);
}

size_t mb_usable_size(const void *p, const char *func)
{
	size_t u = raw_usable_size(p, func);
	return mb_opt.check && p ? u - MB_CANARY_BYTES : u;
}

void *mb_realloc(void *p, size_t n, int key, const char *func)
{
	if (mb_likely(!canaries_on()))
		return raw_realloc(p, n, key, func);
	if (p)
		verify(p, func);
	if (p && n == 0)
		return raw_realloc(p, 0, key, func);
	size_t m;
	if (grow(n, &m))
		return NULL;
	void *q = raw_realloc(p, m, key, func);
	return q ? arm(q, func) : NULL;
}
