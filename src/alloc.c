/* Fast paths through the thread cache, slow paths through the central
 * structures of the slabs (small objects) or the heap lock (large ones).
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
#include "tcache.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* Slow work is reached by tail calls, so the fast paths need no saved
 * registers and no stack frame. */
__attribute__((noinline)) void *mb_tick_then(struct mb_tcache *tc, void *p)
{
	mb_tcache_tick(tc);
	mb_deferred_poll();
	return p;
}

/* The heap is full: the free objects this thread's cache and the transfer
 * caches hold may be all that keeps some slabs, and so their pages, from
 * going back to the buddy, and free memory may be out of reach while the
 * kernel takes it back. Gives them back and waits for the release; returns
 * 1 if there was either (a retry may succeed). */
static int give_back_cache(void)
{
	struct mb_tcache *tc = mb_self.tc;
	size_t n = tc ? mb_tcache_flush_all(tc, 1) : 0;
	n += mb_slab_drain();
	return mb_purge_settle() | (n != 0);
}

/* A page-granular allocation, retried once after the thread's cache was
 * given back. errno is ENOMEM only if the retry fails too. */
static void *large_alloc(size_t n, size_t align, int key, int zero)
{
	struct mb_tcache *tc = mb_self.tc;
	if (n <= MB_RUN_MAX && align <= MB_PAGE_SIZE && tc) {
		void *p = mb_runcache_get(tc, n, key);
		if (p) {
			if (zero)
				memset(p, 0, ((n + MB_PAGE_SIZE - 1) & ~(MB_PAGE_SIZE - 1)));
			return p;
		}
	}
	int saved = errno;
	void *p = mb_large_alloc(n, align, key, zero);
	if (p == NULL && give_back_cache()) {
		p = mb_large_alloc(n, align, key, zero);
		if (p)
			errno = saved;
	}
	return p;
}

/* The size class tables exist once the heap is initialised, which a thread
 * cache implies; the slow path (re)computes the class after initialising. */
static __attribute__((noinline)) void *small_slow(size_t n, int key)
{
	if (mb_process_init() != 0) {
		errno = ENOMEM;
		return NULL;
	}
	mb_deferred_poll();
	unsigned c = mb_size_class(n);
	struct mb_tcache *tc = mb_self.tc;
	if (!tc)
		tc = mb_thread_init();
	if (tc) {
		mb_tcache_maybe_flush_all(tc);
		struct mb_tbin *bin = &tc->bin[key][c];
		if (bin->n || mb_tcache_refill(tc, key, c))
			return mb_alloc_pop(tc, bin, key, c);
		if (give_back_cache() && mb_tcache_refill(tc, key, c))
			return mb_alloc_pop(tc, bin, key, c);
		errno = ENOMEM;
		return NULL;
	}
	/* No cache in this thread right now: one object straight from a slab. */
	struct mb_tentry e;
	if (!mb_slab_take(key, c, &e, 1)) {
		errno = ENOMEM;
		return NULL;
	}
	*e.st = MB_OBJ_ALLOCATED;
	mb_counts_add(mb_heap.counts.mallocs[key], 1);
	mb_counts_add(mb_heap.counts.alloc_bytes, mb_classes[c].size);
	return e.p;
}

/* n must be a size of class c's range, or c's own size (aligned requests). */
static inline void *malloc_small(size_t n, int key)
{
	struct mb_tcache *tc = mb_self.tc;
	unsigned c;
	struct mb_tbin *bin = mb_tcache_ready_bin(tc, n, key, &c);
	if (mb_likely(bin != NULL))
		return mb_alloc_pop(tc, bin, key, c);
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

static __attribute__((noinline)) void small_free_slow(struct mb_slab *s, uint32_t i, uint8_t *st)
{
	struct mb_tcache *tc = mb_self.tc;
	if (!tc)
		tc = mb_thread_init();
	if (tc) {
		mb_tcache_maybe_flush_all(tc);
		struct mb_tbin *bin = &tc->bin[s->key][s->sclass];
		if (mb_tcache_row(tc, s->key) != 0)
			goto direct;
		if (bin->n == bin->cap)
			mb_tcache_flush(tc, s->key, s->sclass, bin->cap / 2);
		tc->counts.frees++;
		tc->counts.freed_bytes += s->size;
		bin->e[bin->n].p = (void *)(s->start + (uintptr_t)i * s->size);
		bin->e[bin->n].st = st;
		bin->n++;
		return;
	}
direct:
	mb_counts_add(mb_heap.counts.frees, 1);
	mb_counts_add(mb_heap.counts.freed_bytes, s->size);
	struct mb_tentry e = { (void *)(s->start + (uintptr_t)i * s->size), st };
	mb_slab_give(s->key, s->sclass, &e, 1, 1);
}

/* The page record of p if p lies in the heap, else NULL. */
static inline struct mb_page *page_of(const void *p)
{
	struct mb_buddy *b = &mb_heap.buddy;
	uintptr_t off = (uintptr_t)p - b->base;
	if (mb_unlikely(off >= mb_heap.region_bytes))
		return NULL;
	return &b->pages[off >> MB_PAGE_SHIFT];
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
		struct mb_slab *s = mb_slab_of(m, p, ip);
		if (mb_unlikely(s == NULL))
			mb_fatal_pointer(func, "invalid pointer (not the start of an object)", p);
		if (mb_unlikely(s->state[*ip] != MB_OBJ_ALLOCATED && s->state[*ip] != MB_OBJ_SAMPLED))
			mb_fatal_pointer(func, freeing ? "double free detected" : "use after free (pointer already freed)", p);
		*sp = s;
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

/* Everything that is not a valid small object going into a thread cache
 * with room: NULL, errors, sampled objects, large objects, full bins. */
static __attribute__((noinline)) void free_slow(void *p, const char *func)
{
	if (mb_unlikely(p == NULL))
		return;
	struct mb_slab *s;
	uint32_t i;
	struct mb_page *m = live_or_die(p, func, 1, &s, &i);
	if (mb_likely(s != NULL)) {
		uint8_t *st = &s->state[i];
		if (*st == MB_OBJ_SAMPLED)
			mb_classify_freed(p);
		*st = MB_OBJ_CACHED;
		int saved = errno;
		small_free_slow(s, i, st);
		errno = saved;
		return;
	}
	int saved = errno;
	if (m->user16 & MB_LARGE_SAMPLED)
		mb_classify_freed(p);
	struct mb_tcache *tc = mb_self.tc;
	if (!tc || !mb_runcache_put(tc, p, m))
		mb_large_free(p, m);
	errno = saved;
}

static inline void raw_free(void *p, const char *func)
{
	/* NULL and foreign pointers fall outside the region: the slow path
	 * sorts them out. */
	if (mb_likely(mb_tcache_push(mb_self.tc, p)))
		return;
	free_slow(p, func);
}

static inline size_t raw_usable_size(const void *p, const char *func)
{
	if (!p)
		return 0;
	struct mb_slab *s;
	uint32_t i;
	struct mb_page *m = live_or_die(p, func, 0, &s, &i);
	return s ? s->size : (size_t)m->npages << MB_PAGE_SHIFT;
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
	size_t old_bytes = (size_t)m->npages << MB_PAGE_SHIFT;
	if (n <= MB_SMALL_MAX)
		return move(p, old_bytes, n, key, func);
	if (n > mb_heap.region_bytes) {
		errno = ENOMEM;
		return NULL;
	}
	if (mb_large_resize(p, m, n, func) == 0)
		return p;
	return move(p, old_bytes, n, key, func);
}

int mb_trim(void)
{
	if (mb_process_init() != 0)
		return 0;
	struct mb_tcache *tc = mb_self.tc;
	if (tc)
		mb_tcache_flush_all(tc, 1);
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
