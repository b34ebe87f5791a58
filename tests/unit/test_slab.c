/* Thread-owned slabs (slab.c, theap.c) over the process heap of heap.h set
 * up by the harness, without the rest of the process: thread heaps made
 * with mb_theap_create(), objects taken the way the fast and slow paths of
 * alloc.c take them (mb_theap_pop, then mb_theap_alloc_slow) and freed the
 * way raw_free() frees them (mb_theap_push, then mb_theap_freed,
 * mb_theap_look or mb_theap_free). Covered: objects of one (key, class) never overlap and
 * stay inside their slab; a slab whose objects all went back leaves for
 * the empty list, up to the heap's budget, and from there (at once past
 * the budget, or when swept) to the buddy
 * (the buddy's allocated pages back where they started); the
 * settle rule of a full slab, at its exact boundary; double frees, owned
 * and remote, abort with the address; remote frees from a second thread
 * are collected by the owner, none lost; the slabs of an exited thread are
 * adopted by the next heap that needs their class or frees into them;
 * mb_theap_purge() hands back the whole free pages of sparse slabs, not of
 * the current one, and the slab still works after; the thread cache hands
 * back the last freed object first, keeps its objects' pages from the
 * purge, and empties into the slabs when the heap gives memory back, at
 * exit, and bin by bin when no allocation took from a bin for a purge
 * period, whose current slab then stops being current; frees posted to the
 * owner's inbox (inbox.h) leave its bits alone until it takes them, none
 * lost, a full inbox sends them to the remote bits, double frees through
 * it abort with the address, an exiting owner takes its posts, and a
 * fork's child takes every heap's. The buddy checker runs after every
 * phase.
 *
 * The heap is set up once for the whole program: thread heaps live in
 * metadata outside it and stay on the list of heaps, so every test gives
 * back everything it took. */
#include "config.h"
#include "harness.h"
#include "sizeclass.h"
#include "slab.h"
#include "theap.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define PAGE MB_PAGE_SIZE

static struct mb_buddy *const B = &mb_heap.buddy;
static size_t base_pages, base_slab_pages;
static uint32_t cache_cap[MB_NCLASSES];

/* The thread cache on or off: the slab lists' rules are tested with it
 * off, so that every free reaches its slab; it has tests of its own. */
static void thread_cache(int on)
{
	for (unsigned c = 0; c < MB_NCLASSES; c++)
		mb_classes[c].cache_cap = on ? cache_cap[c] : 0;
}

/* The first size class whose slabs have at least min_pages pages and
 * min_obj to max_obj objects, some of them across page edges. */
static unsigned class_with(unsigned min_pages, unsigned min_obj, unsigned max_obj)
{
	for (unsigned c = 0; c < MB_NCLASSES; c++) {
		const struct mb_class_info *ci = &mb_classes[c];
		if (ci->slab_pages >= min_pages && ci->nobj >= min_obj && ci->nobj <= max_obj &&
		    MB_PAGE_SIZE % ci->size != 0)
			return c;
	}
	FAIL("no size class of %u pages or more and %u to %u objects", min_pages, min_obj, max_obj);
	return 0;
}

/* The heap, once; the buddy's allocated pages noted as the baseline; the
 * thread cache off. */
static void heap(void)
{
	static int ready;
	if (!ready) {
		mb_sizeclass_init();
		for (unsigned c = 0; c < MB_NCLASSES; c++)
			cache_cap[c] = mb_classes[c].cache_cap;
		test_heap_setup(64 * MiB, MB_MAX_ORDER_DEFAULT, 3600000);
		ready = 1;
	}
	thread_cache(0);
	ASSERT_BUDDY(B);
	base_pages = B->pages_allocated;
	base_slab_pages = mb_heap.slab_pages;
}

/* Everything given back: the buddy holds what it held before the test. */
static void all_back(void)
{
	ASSERT_BUDDY(B);
	ASSERT_EQ(mb_heap.slab_pages, base_slab_pages);
	ASSERT_EQ(B->pages_allocated, base_pages);
}

/* An object as malloc_small() takes it. */
static void *take(struct mb_theap *h, int key, unsigned c)
{
	size_t n = mb_classes[c].size;
	void *p = mb_theap_pop(h, key, c, n);
	if (!p)
		p = mb_theap_alloc_slow(h, key, c, n);
	if (!p)
		FAIL("no object of key %d class %u", key, c);
	struct mb_slab *s = mb_theap_slab_of(p);
	ASSERT_NE(s, NULL);
	ASSERT_EQ(s->key, key);
	ASSERT_EQ(s->sclass, c);
	ASSERT_EQ(mb_slab_owner(s), h);
	long i = mb_slab_index(s, p);
	ASSERT_GE(i, 0);
	ASSERT(!mb_slab_is_free(s, (uint32_t)i));
	/* Inside its slab's pages. */
	ASSERT_GE((uintptr_t)p, s->start);
	ASSERT_LE((uintptr_t)p + s->size, s->start + (uintptr_t)mb_classes[c].slab_pages * PAGE);
	return p;
}

static void slab_and_index(void *p, struct mb_slab **sp, uint32_t *ip)
{
	struct mb_slab *s = mb_theap_slab_of(p);
	ASSERT_NE(s, NULL);
	long i = mb_slab_index(s, p);
	ASSERT_GE(i, 0);
	*sp = s;
	*ip = (uint32_t)i;
}

/* A free as raw_free() does it, by h (which may not own p; NULL: a
 * thread with no heap of its own, seen as another thread), with the
 * posts waiting in h's inbox taken first when the push declines for them,
 * as free_slow does. */
static void give(struct mb_theap *h, void *p)
{
	struct mb_slab *s;
	int r = mb_theap_push(h, p, &s);
	if (r == 0 && h && mb_inbox_pending(&h->inbox)) {
		mb_theap_drain(h);
		r = mb_theap_push_now(h, p, &s);
	}
	if (r == 2)
		mb_theap_freed(h, s);
	else if (r == 3)
		mb_theap_look(h, s);
	else if (r == 0) {
		uint32_t i;
		slab_and_index(p, &s, &i);
		mb_theap_free(h, s, i, p);
	}
}

/* Objects in h's thread cache of (key, c): its stack and its hot object
 * (theap.h). */
static unsigned held(struct mb_theap *h, int key, unsigned c)
{
	struct mb_tcache *tc = mb_theap_tcache(h, key, c);
	return tc->n + (tc->hot != NULL);
}

static int by_addr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

/* Distinct, and no two closer than the class size. */
static void no_overlap(void **v, size_t n, size_t size)
{
	uintptr_t *a = malloc(n * sizeof *a);
	ASSERT_NE(a, NULL);
	for (size_t i = 0; i < n; i++)
		a[i] = (uintptr_t)v[i];
	qsort(a, n, sizeof *a, by_addr);
	for (size_t i = 1; i < n; i++)
		if (a[i] - a[i - 1] < size)
			FAIL("objects %#jx and %#jx overlap (size %zu)", (uintmax_t)a[i - 1], (uintmax_t)a[i], size);
	free(a);
}

TEST(objects_never_overlap_and_all_go_back)
{
	heap();
	struct mb_theap *h = mb_theap_create();
	ASSERT_NE(h, NULL);
	static const unsigned classes[] = { 0, 3, 8, 15, 20, 30, 38, 51 };
	for (size_t k = 0; k < sizeof classes / sizeof classes[0]; k++) {
		unsigned c = classes[k];
		const struct mb_class_info *ci = &mb_classes[c];
		/* Three slabs and a bit. */
		size_t n = 3 * ci->nobj + 2;
		void **v = malloc(n * sizeof *v);
		ASSERT_NE(v, NULL);
		for (size_t i = 0; i < n; i++) {
			v[i] = take(h, MB_DEFAULT_TYPE, c);
			memset(v[i], (int)i, ci->size); /* an overlap would show to ASan too */
		}
		ASSERT_BUDDY(B);
		no_overlap(v, n, ci->size);
		ASSERT_EQ(mb_heap.slab_pages, base_slab_pages + 4 * ci->slab_pages);
		ASSERT_EQ(mb_theap_tcache(h, MB_DEFAULT_TYPE, c)->nalloc, n);
		/* Freed in allocation order: each full slab goes to the empty
		 * list as its last object goes (three slabs are well within
		 * the heap's budget of empty slabs); the current one stays. */
		for (size_t i = 0; i < n; i++) {
			give(h, v[i]);
			if (i + 1 == ci->nobj) {
				ASSERT_EQ(h->empty[MB_DEFAULT_TYPE][c].n, 1);
				ASSERT_EQ(h->empty_bytes, ci->slab_pages * PAGE);
			}
		}
		ASSERT_BUDDY(B);
		ASSERT_EQ(mb_theap_tcache(h, MB_DEFAULT_TYPE, c)->nfree, n);
		ASSERT_EQ(h->empty[MB_DEFAULT_TYPE][c].n, 3);
		ASSERT_EQ(mb_heap.slab_pages, base_slab_pages + 4 * ci->slab_pages);
		/* The empty ones and the current slab, empty, go back when
		 * asked for. */
		ASSERT_EQ(mb_theap_give_back(h), 1);
		ASSERT_EQ(h->empty_bytes, 0);
		all_back();
		free(v);
	}
	mb_theap_destroy(h);
	all_back();
}

/* The own key's slabs (reclaim_type.h: libunwind's blocks, allocated for
 * the library) hold nothing of the program's, and take no pageblock of
 * their own: they are of the default type, in the default key's home. */
TEST(own_key_slabs_share_the_default_home)
{
	heap();
	struct mb_theap *h = mb_theap_create();
	ASSERT_NE(h, NULL);
	ASSERT_EQ(mb_key_type(MB_OWN_KEY), MB_DEFAULT_TYPE);
	void *prog = take(h, MB_DEFAULT_TYPE, 0);
	size_t owned[MB_NTYPES];
	for (int t = 0; t < MB_NTYPES; t++)
		owned[t] = B->pb_owned[t];
	void *own = take(h, MB_OWN_KEY, 0);
	size_t ip = mb_buddy_page_index(B, prog), io = mb_buddy_page_index(B, own);
	ASSERT_NE(B->pages[ip].user.ptr, B->pages[io].user.ptr);
	ASSERT_EQ(mb_slab_tag_key(B->pages[io].user32), MB_OWN_KEY);
	ASSERT_EQ(io >> B->pb_order, ip >> B->pb_order);
	for (int t = 0; t < MB_NTYPES; t++)
		ASSERT_EQ(B->pb_owned[t], owned[t]);
	ASSERT_BUDDY(B);
	give(h, own);
	give(h, prog);
	mb_theap_give_back(h);
	mb_theap_destroy(h);
	all_back();
}

/* The keys of the types share their type's pageblocks: a new slab of the
 * default key takes the one-page hole freed last in another pageblock,
 * resident, rather than the clean pages its current pageblock still has
 * (buddy.h: mb_buddy_alloc_shared). A lane fills a home of its own first,
 * clean pages and all, and keeps out of the default key's pageblock, as
 * the default key keeps out of a lane's. */
TEST(type_keys_take_resident_holes_lanes_keep_homes)
{
	heap();
	struct mb_theap *h = mb_theap_create();
	ASSERT_NE(h, NULL);
	unsigned c = 0;
	ASSERT_EQ(mb_classes[c].slab_pages, 1);
	unsigned nobj = mb_classes[c].nobj;
	/* Two pageblocks of single pages, taken as large objects are. */
	size_t n = 2 * B->pb_pages;
	long *plain = malloc(n * sizeof *plain);
	ASSERT_NE(plain, NULL);
	mb_heap_lock();
	for (size_t i = 0; i < n; i++) {
		plain[i] = mb_buddy_alloc(B, 1, MB_DEFAULT_TYPE, NULL);
		ASSERT_GE(plain[i], 0);
	}
	mb_heap_unlock();
	size_t q = (size_t)plain[0] >> B->pb_order, r = (size_t)plain[n - 1] >> B->pb_order;
	ASSERT_NE(q, r);
	/* The default key's first slab: a fresh pageblock, whose other pages
	 * stay free and clean. */
	void **v = malloc(2 * (nobj + 1) * sizeof *v);
	ASSERT_NE(v, NULL);
	v[0] = take(h, MB_DEFAULT_TYPE, c);
	size_t p = mb_buddy_page_index(B, v[0]) >> B->pb_order;
	ASSERT_NE(p, q);
	ASSERT_NE(p, r);
	/* Holes in the first plain pageblock, none of them buddies: the next
	 * slab takes the one freed last. */
	mb_heap_lock();
	for (size_t i = 1; i < 6; i += 2)
		mb_buddy_free(B, (size_t)plain[i]);
	mb_heap_unlock();
	ASSERT_BUDDY(B);
	for (unsigned i = 1; i <= nobj; i++)
		v[i] = take(h, MB_DEFAULT_TYPE, c);
	ASSERT_EQ(mb_buddy_page_index(B, v[nobj]), (size_t)plain[5]);
	ASSERT_EQ(B->home[MB_DEFAULT_TYPE], (long)q);
	/* A lane's first slab: not among the default key's holes. */
	int lane = MB_FIRST_LANE;
	ASSERT_EQ(mb_key_type(lane), MB_DEFAULT_TYPE);
	void **w = v + nobj + 1;
	w[0] = take(h, lane, c);
	size_t home = mb_buddy_page_index(B, w[0]) >> B->pb_order;
	ASSERT_NE(home, q);
	ASSERT_EQ(B->home[lane], (long)home);
	/* With a hole freed in the second plain pageblock, no one's home, the
	 * lane's next slab still comes from its home. */
	mb_heap_lock();
	mb_buddy_free(B, (size_t)plain[n - 2]);
	mb_heap_unlock();
	for (unsigned i = 1; i <= nobj; i++)
		w[i] = take(h, lane, c);
	ASSERT_EQ(mb_buddy_page_index(B, w[nobj]) >> B->pb_order, home);
	ASSERT_BUDDY(B);
	for (unsigned i = 0; i <= nobj; i++) {
		give(h, v[i]);
		give(h, w[i]);
	}
	mb_theap_give_back(h);
	mb_heap_lock();
	for (size_t i = 0; i < n; i++)
		if (i != 1 && i != 3 && i != 5 && i != n - 2)
			mb_buddy_free(B, (size_t)plain[i]);
	mb_heap_unlock();
	free(plain);
	free(v);
	mb_theap_destroy(h);
	all_back();
}

/* Emptied slabs are kept for their class up to MB_THEAP_EMPTY_BYTES, the
 * rest go to the buddy at once; the kept ones serve the class's next slabs
 * before the buddy is asked for any; the sweep of the purge gives them
 * back whole, and so does a thread's exit. */
TEST(emptied_slabs_kept_to_the_budget_then_swept)
{
	heap();
	const unsigned c = MB_NCLASSES - 1; /* 16 KiB objects, the largest slabs */
	const struct mb_class_info *ci = &mb_classes[c];
	const size_t slab = ci->slab_pages * PAGE, keep = MB_THEAP_EMPTY_BYTES / slab;
	const size_t nslabs = keep + 5, n = nslabs * ci->nobj;
	ASSERT_GT(keep, 1);
	struct mb_theap *h = mb_theap_create();
	ASSERT_NE(h, NULL);
	void **v = malloc(n * sizeof *v);
	ASSERT_NE(v, NULL);
	for (int round = 0; round < 2; round++) {
		for (size_t i = 0; i < n; i++)
			v[i] = take(h, MB_DEFAULT_TYPE, c);
		no_overlap(v, n, ci->size);
		/* The second round took the kept slabs before any new one. */
		ASSERT_EQ(mb_heap.slab_pages, base_slab_pages + nslabs * ci->slab_pages);
		ASSERT_EQ(h->empty_bytes, 0);
		for (size_t i = 0; i < n; i++)
			give(h, v[i]);
		ASSERT_BUDDY(B);
		/* All but the current one emptied: keep of them kept. */
		ASSERT_EQ(h->empty[MB_DEFAULT_TYPE][c].n, keep);
		ASSERT_EQ(h->empty_bytes, keep * slab);
		ASSERT_LE(h->empty_bytes, MB_THEAP_EMPTY_BYTES);
		ASSERT_EQ(mb_heap.slab_pages, base_slab_pages + (keep + 1) * ci->slab_pages);
		for (struct mb_slab *s = h->empty[MB_DEFAULT_TYPE][c].head; s; s = s->next) {
			ASSERT_EQ(s->list, MB_SLAB_EMPTY);
			ASSERT_EQ(s->used, 0);
		}
	}
	/* The sweep: the kept slabs go back whole, the current one stays. */
	unsigned failed = 9;
	mb_theap_purge(1000, &failed);
	ASSERT_EQ(failed, 0);
	ASSERT_EQ(h->empty[MB_DEFAULT_TYPE][c].n, 0);
	ASSERT_EQ(h->empty_bytes, 0);
	ASSERT_EQ(mb_heap.slab_pages, base_slab_pages + ci->slab_pages);
	ASSERT_BUDDY(B);
	/* Kept again, then the thread exits: nothing stays. */
	for (size_t i = 0; i < 2 * ci->nobj; i++)
		v[i] = take(h, MB_DEFAULT_TYPE, c);
	for (size_t i = 0; i < 2 * ci->nobj; i++)
		give(h, v[i]);
	ASSERT_EQ(h->empty[MB_DEFAULT_TYPE][c].n, 1);
	mb_theap_destroy(h);
	all_back();
	free(v);
}

/* The general path's free (samples, and whatever the push declines)
 * says when the slab changed lists, as the push does (2): the caller
 * then tells the purge, which schedules its sweep of the kept empty
 * slabs only when told (purge.c). */
TEST(general_path_free_says_when_its_slab_moved)
{
	heap();
	const unsigned c = MB_NCLASSES - 1;
	const struct mb_class_info *ci = &mb_classes[c];
	struct mb_theap *h = mb_theap_create();
	ASSERT_NE(h, NULL);
	const size_t n = 2 * ci->nobj;
	void **v = malloc(n * sizeof *v);
	ASSERT_NE(v, NULL);
	for (size_t k = 0; k < n; k++)
		v[k] = take(h, MB_DEFAULT_TYPE, c);
	struct mb_slab *s;
	uint32_t i;
	slab_and_index(v[0], &s, &i);
	ASSERT_EQ(s->list, MB_SLAB_FULL);
	unsigned moves = 0;
	for (size_t k = 0; k < n; k++) {
		struct mb_slab *sk;
		slab_and_index(v[k], &sk, &i);
		int before = sk->list;
		int r = mb_theap_free(h, sk, i, v[k]);
		ASSERT_NE(r, 0);
		/* An emptied slab stays (kept, or current): its list is read. */
		ASSERT_EQ(r == 2, sk->list != before);
		moves += r == 2;
	}
	/* The full one went to the partial list, then to the kept ones. */
	ASSERT_GE(moves, 2);
	ASSERT_EQ(s->list, MB_SLAB_EMPTY);
	mb_theap_destroy(h);
	all_back();
	free(v);
}

/* The rule itself, on a descriptor of each size: a full slab settles at
 * exactly max(nobj / 4, min(nobj / 2, 8)) free objects, an empty one
 * unless it is current, and a partial or current one otherwise never. */
TEST(settle_rule_boundary)
{
	for (unsigned nobj = 1; nobj <= 300; nobj++) {
		unsigned half = nobj / 2 < 8 ? nobj / 2 : 8, need = nobj / 4 > half ? nobj / 4 : half;
		if (need == 0)
			need = 1;
		struct mb_slab s = { .nobj = (uint16_t)nobj, .list = MB_SLAB_FULL };
		for (unsigned fr = 0; fr <= nobj; fr++) {
			s.used = (uint16_t)(nobj - fr);
			s.list = MB_SLAB_FULL;
			if (mb_slab_settle_due(&s) != (fr >= need))
				FAIL("full slab of %u objects with %u free: settle %d, expected %d", nobj, fr,
				     mb_slab_settle_due(&s), fr >= need);
			s.list = MB_SLAB_PARTIAL;
			ASSERT_EQ(mb_slab_settle_due(&s), fr == nobj);
			s.list = MB_SLAB_CURRENT;
			ASSERT_EQ(mb_slab_settle_due(&s), 0);
		}
	}
	/* The documented points: a quarter of 64, of 256; 8 of 25; half of
	 * 10 and of 8. One free short of the threshold, then at it. */
	static const struct { uint16_t nobj, need; } points[] = { { 64, 16 }, { 256, 64 }, { 25, 8 }, { 10, 5 }, { 8, 4 } };
	for (size_t k = 0; k < sizeof points / sizeof points[0]; k++) {
		struct mb_slab s = { .nobj = points[k].nobj, .list = MB_SLAB_FULL };
		s.used = (uint16_t)(points[k].nobj - points[k].need + 1);
		ASSERT_EQ(mb_slab_settle_due(&s), 0);
		s.used = (uint16_t)(points[k].nobj - points[k].need);
		ASSERT_EQ(mb_slab_settle_due(&s), 1);
	}
}

/* The same through the heap: a full slab stays on the full list until the
 * free that reaches the threshold, which moves it to the partial list,
 * and its objects are handed out again before any new slab. */
TEST(full_slab_settles_at_the_threshold)
{
	heap();
	struct mb_theap *h = mb_theap_create();
	ASSERT_NE(h, NULL);
	static const unsigned classes[] = { 0, 3, 6, 8, 11, 13, 15, 28 };
	for (size_t k = 0; k < sizeof classes / sizeof classes[0]; k++) {
		unsigned c = classes[k];
		unsigned nobj = mb_classes[c].nobj;
		unsigned half = nobj / 2 < 8 ? nobj / 2 : 8, need = nobj / 4 > half ? nobj / 4 : half;
		void **v = malloc((nobj + 1) * sizeof *v);
		ASSERT_NE(v, NULL);
		for (unsigned i = 0; i <= nobj; i++)
			v[i] = take(h, 1, c);
		struct mb_slab *a = mb_theap_slab_of(v[0]);
		ASSERT_EQ(mb_theap_slab_of(v[nobj - 1]), a);
		ASSERT_NE(mb_theap_slab_of(v[nobj]), a);
		ASSERT_EQ(a->list, MB_SLAB_FULL);
		ASSERT_EQ(h->full[1][c].n, 1);
		for (unsigned i = 0; i < need; i++) {
			if (a->list != MB_SLAB_FULL)
				FAIL("class %u (%u objects): left the full list after %u frees, expected %u", c,
				     nobj, i, need);
			give(h, v[i]);
		}
		if (a->list != MB_SLAB_PARTIAL)
			FAIL("class %u (%u objects): not on the partial list after %u frees (list %d)", c, nobj,
			     need, a->list);
		ASSERT_EQ(h->full[1][c].n, 0);
		ASSERT_EQ(h->partial[1][c].n, 1);
		ASSERT_BUDDY(B);
		/* Exhaust the current slab: the next object comes from a. */
		size_t pages = mb_heap.slab_pages;
		struct mb_slab *cur = h->bin[1][c].cur;
		void **w = malloc(nobj * sizeof *w);
		ASSERT_NE(w, NULL);
		unsigned nw = 0;
		while (cur->used < cur->nobj)
			w[nw++] = take(h, 1, c);
		for (unsigned i = 0; i < need; i++) {
			v[i] = take(h, 1, c);
			ASSERT_EQ(mb_theap_slab_of(v[i]), a);
		}
		ASSERT_EQ(mb_heap.slab_pages, pages);
		for (unsigned i = 0; i <= nobj; i++)
			give(h, v[i]);
		for (unsigned i = 0; i < nw; i++)
			give(h, w[i]);
		mb_theap_give_back(h);
		all_back();
		free(v);
		free(w);
	}
	mb_theap_destroy(h);
	all_back();
}

/* ---- double frees, in a child: they abort ---- */

/* Who frees the object, the first and the second time: its owner, or
 * another thread (NULL: a remote free, which sets a remote bit). */
struct double_free {
	int first_remote, second_remote;
};

static void double_free(void *arg)
{
	const struct double_free *d = arg;
	struct mb_theap *h = mb_theap_create();
	void *keep = take(h, MB_DEFAULT_TYPE, 2);
	void *p = take(h, MB_DEFAULT_TYPE, 2);
	printf("object %p\n", p);
	fflush(stdout);
	give(d->first_remote ? NULL : h, p);
	give(d->second_remote ? NULL : h, p);
	(void)keep;
	printf("not caught\n");
}

/* fn(arg), in a child, prints "object %p" and must abort with that
 * object's address before it prints "not caught". */
static void expect_abort_in(void (*fn)(void *), void *arg)
{
	struct test_child c;
	test_child_run(&c, fn, arg);
	ASSERT_EQ(c.status, 128 + SIGABRT);
	void *p = NULL;
	const char *o = strstr(c.out, "object ");
	ASSERT(o != NULL);
	ASSERT_EQ(sscanf(o, "object %p", &p), 1);
	char want[128];
	snprintf(want, sizeof want, "libmbuddy: free(): double free detected");
	ASSERT_CONTAINS(c.out, want);
	snprintf(want, sizeof want, ": %p\n", p);
	ASSERT_CONTAINS(c.out, want);
	ASSERT(strstr(c.out, "not caught") == NULL);
}

static void expect_abort(struct double_free d)
{
	expect_abort_in(double_free, &d);
}

TEST(double_free_aborts_with_the_address)
{
	heap();
	/* Without the thread cache, then with it (the owner's first free
	 * leaves the object in its cache). */
	for (int cache = 0; cache <= 1; cache++) {
		thread_cache(cache);
		expect_abort((struct double_free){ 0, 0 }); /* the owner twice */
		expect_abort((struct double_free){ 1, 1 }); /* another thread twice */
		expect_abort((struct double_free){ 0, 1 }); /* the owner, then another thread */
		expect_abort((struct double_free){ 1, 0 }); /* another thread, then the owner */
	}
	all_back(); /* the children's objects were theirs */
}

/* The hot object of a thread cache (theap.h) is not marked in its slab. A
 * remote free that raced with the owner's (it looked before the object
 * was hot) only sets its remote bit; the owner catches it before it hands
 * the object out again, or as it puts its cache back into the slabs. */
enum hot_then { HOT_TAKEN, HOT_FLUSHED };

static void hot_freed_remotely(void *arg)
{
	enum hot_then then = *(const enum hot_then *)arg;
	struct mb_theap *h = mb_theap_create();
	void *keep = take(h, MB_DEFAULT_TYPE, 2);
	void *p = take(h, MB_DEFAULT_TYPE, 2);
	printf("object %p\n", p);
	fflush(stdout);
	give(h, p);
	struct mb_slab *s;
	uint32_t i;
	slab_and_index(p, &s, &i);
	ASSERT(mb_theap_is_hot(h, s, p));
	mb_slab_free_remote(s, i, p);
	if (then == HOT_TAKEN)
		take(h, MB_DEFAULT_TYPE, 2);
	else
		mb_theap_flush_cache(h, 1);
	(void)keep;
	printf("not caught\n");
}

TEST(hot_object_freed_by_another_thread_aborts)
{
	heap();
	thread_cache(1);
	enum hot_then then = HOT_TAKEN;
	expect_abort_in(hot_freed_remotely, &then);
	then = HOT_FLUSHED;
	expect_abort_in(hot_freed_remotely, &then);
	all_back();
}

/* A free followed by a malloc of the same class writes no bitmap word:
 * the object freed last waits in the thread cache unmarked (theap.h). */
TEST(free_then_malloc_of_a_class_writes_no_bitmap)
{
	heap();
	thread_cache(1);
	struct mb_theap *h = mb_theap_create();
	ASSERT_NE(h, NULL);
	void *keep = take(h, MB_DEFAULT_TYPE, 4);
	void *p = take(h, MB_DEFAULT_TYPE, 4);
	struct mb_slab *s;
	uint32_t i;
	slab_and_index(p, &s, &i);
	struct mb_slab_word before = s->w[i >> 6];
	unsigned used = s->used;
	for (int round = 0; round < 3; round++) {
		give(h, p);
		ASSERT_EQ(s->w[i >> 6].free, before.free);
		ASSERT_EQ(s->w[i >> 6].cached, before.cached);
		ASSERT_EQ(held(h, MB_DEFAULT_TYPE, 4), 1);
		ASSERT_EQ(take(h, MB_DEFAULT_TYPE, 4), p);
		ASSERT_EQ(s->w[i >> 6].free, before.free);
		ASSERT_EQ(s->w[i >> 6].cached, before.cached);
		ASSERT_EQ(s->used, used);
	}
	give(h, p);
	give(h, keep);
	mb_theap_give_back(h);
	mb_theap_destroy(h);
	all_back();
}

/* The free fast path takes back every object of a slab it owns, of every
 * class, on every page of the slab: it finds the object's index from the
 * page record and the slab's magic number beside it (buddy.h's
 * slab_magic), with no descriptor and no class table. A push that declined
 * would leave the objects to the general path, correct but slow. A
 * pointer inside an object (its second and last byte, and its middle) it
 * declines, for the general path to report. */
TEST(fast_path_takes_back_every_object_of_every_class)
{
	heap();
	struct mb_theap *h = mb_theap_create();
	ASSERT_NE(h, NULL);
	for (unsigned c = 0; c < MB_NCLASSES; c++) {
		const struct mb_class_info *ci = &mb_classes[c];
		void **v = calloc(ci->nobj, sizeof *v);
		ASSERT_NE(v, NULL);
		for (uint32_t k = 0; k < ci->nobj; k++)
			v[k] = take(h, MB_DEFAULT_TYPE, c);
		/* A fresh heap's first slab of the class holds them all. */
		struct mb_slab *first = mb_theap_slab_of(v[0]);
		size_t idx = mb_buddy_page_index(B, (void *)first->start);
		for (uint32_t pg = 0; pg < ci->slab_pages; pg++)
			ASSERT_EQ(B->slab_magic[idx + pg], ci->magic);
		for (uint32_t k = 0; k < ci->nobj; k++) {
			ASSERT_EQ(mb_theap_slab_of(v[k]), first);
			struct mb_slab *s;
			const size_t inside[] = { 1, ci->size / 2, ci->size - 1 };
			for (unsigned j = 0; j < 3; j++)
				if (mb_theap_push(h, (char *)v[k] + inside[j], &s) != 0)
					FAIL("class %u (%u B): object %u + %zu taken as an object", c, ci->size, k,
					     inside[j]);
			int r = mb_theap_push(h, v[k], &s);
			if (r == 0)
				FAIL("class %u (%u B): object %u of %u declined by the fast path", c, ci->size, k,
				     ci->nobj);
			if (r == 2)
				mb_theap_freed(h, s);
			else if (r == 3)
				mb_theap_look(h, s);
		}
		free(v);
	}
	mb_theap_give_back(h);
	mb_theap_destroy(h);
	all_back();
}

/* ---- remote frees ---- */

struct remote_job {
	void **v;
	size_t n;
};

/* A second thread, with a heap of its own, frees the objects. */
static void *remote_free_all(void *arg)
{
	struct remote_job *j = arg;
	struct mb_theap *h2 = mb_theap_create();
	if (!h2)
		return (void *)1;
	for (size_t i = 0; i < j->n; i++)
		give(h2, j->v[i]);
	int bad = mb_theap_tcache(h2, MB_DEFAULT_TYPE, 3)->nfree != j->n;
	mb_theap_destroy(h2);
	return (void *)(uintptr_t)bad;
}

static void in_thread(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	ASSERT_EQ(pthread_create(&t, NULL, fn, arg), 0);
	void *r;
	ASSERT_EQ(pthread_join(t, &r), 0);
	ASSERT_EQ(r, NULL);
}

TEST(remote_frees_are_collected)
{
	heap();
	const unsigned c = 3;
	unsigned nobj = mb_classes[c].nobj;
	struct mb_theap *h = mb_theap_create();
	ASSERT_NE(h, NULL);
	/* Slab a full (on the full list), slab b current and full too. */
	void **v = malloc(2 * nobj * sizeof *v);
	ASSERT_NE(v, NULL);
	for (unsigned i = 0; i < 2 * nobj; i++)
		v[i] = take(h, MB_DEFAULT_TYPE, c);
	struct mb_slab *a = mb_theap_slab_of(v[0]), *b = mb_theap_slab_of(v[nobj]);
	ASSERT_EQ(a->list, MB_SLAB_FULL);
	ASSERT_EQ(b->list, MB_SLAB_CURRENT);
	ASSERT_EQ(b->used, nobj);
	size_t pages = mb_heap.slab_pages;

	struct remote_job j = { v, 2 * nobj };
	in_thread(remote_free_all, &j);
	ASSERT_BUDDY(B);
	/* Free by their remote bits only; the owner's bits untouched. */
	for (unsigned i = 0; i < 2 * nobj; i++) {
		struct mb_slab *s;
		uint32_t k;
		slab_and_index(v[i], &s, &k);
		ASSERT(mb_slab_is_free(s, k));
		ASSERT_EQ((s->w[k >> 6].free >> (k & 63)) & 1, 0);
		ASSERT_EQ((s->remote[k >> 6] >> (k & 63)) & 1, 1);
	}
	ASSERT_EQ(a->has_remote, 1);
	ASSERT_EQ(b->has_remote, 1);
	ASSERT_EQ(a->used, nobj);
	ASSERT_EQ(b->used, nobj);
	ASSERT_EQ(h->revive[MB_DEFAULT_TYPE][c], 1); /* a is full: the owner was told */
	ASSERT_EQ(a->list, MB_SLAB_FULL);

	/* The owner takes them all again, with no new slab: none lost. */
	void **w = malloc(2 * nobj * sizeof *w);
	ASSERT_NE(w, NULL);
	for (unsigned i = 0; i < 2 * nobj; i++)
		w[i] = take(h, MB_DEFAULT_TYPE, c);
	ASSERT_EQ(mb_heap.slab_pages, pages);
	ASSERT_EQ(a->used, nobj);
	ASSERT_EQ(b->used, nobj);
	ASSERT_EQ(a->remote[0] | b->remote[0], 0);
	uintptr_t *x = malloc(2 * nobj * sizeof *x), *y = malloc(2 * nobj * sizeof *y);
	ASSERT(x && y);
	for (unsigned i = 0; i < 2 * nobj; i++) {
		x[i] = (uintptr_t)v[i];
		y[i] = (uintptr_t)w[i];
	}
	qsort(x, 2 * nobj, sizeof *x, by_addr);
	qsort(y, 2 * nobj, sizeof *y, by_addr);
	ASSERT_EQ(memcmp(x, y, 2 * nobj * sizeof *x), 0);
	/* One more needs a new slab. */
	void *extra = take(h, MB_DEFAULT_TYPE, c);
	ASSERT_EQ(mb_heap.slab_pages, pages + mb_classes[c].slab_pages);
	give(h, extra);
	for (unsigned i = 0; i < 2 * nobj; i++)
		give(h, w[i]);
	mb_theap_give_back(h);
	mb_theap_destroy(h);
	all_back();
	free(v);
	free(w);
	free(x);
	free(y);
}

/* ---- an exited thread's slabs ---- */

struct exit_job {
	unsigned c;
	void **live;  /* what it leaves alive */
	size_t nlive;
	size_t nfree; /* free objects it leaves in its slabs */
};

static void *allocate_and_exit(void *arg)
{
	struct exit_job *j = arg;
	unsigned nobj = mb_classes[j->c].nobj;
	struct mb_theap *h = mb_theap_create();
	if (!h)
		return (void *)1;
	/* Three slabs: the first two full, then every other object of all
	 * three freed, so that they all have free objects and live ones. */
	size_t n = 3 * nobj;
	void **v = malloc(n * sizeof *v);
	if (!v)
		return (void *)1;
	for (size_t i = 0; i < n; i++)
		v[i] = take(h, MB_DEFAULT_TYPE, j->c);
	j->nlive = j->nfree = 0;
	for (size_t i = 0; i < n; i++)
		if (i % 2)
			give(h, v[i]), j->nfree++;
		else
			j->live[j->nlive++] = v[i];
	free(v);
	mb_theap_destroy(h); /* as at thread exit */
	return NULL;
}

/* The owner's id in the page record of p (slab.h's owner tag): what the
 * free fast path goes by. */
static uint32_t page_owner_id(const void *p)
{
	return mb_slab_tag_id(B->pages[mb_buddy_page_index(B, p)].user32);
}

TEST(abandoned_slabs_are_adopted)
{
	heap();
	struct exit_job j = { .c = 4 };
	unsigned nobj = mb_classes[j.c].nobj;
	j.live = malloc(3 * nobj * sizeof *j.live);
	ASSERT_NE(j.live, NULL);
	in_thread(allocate_and_exit, &j);
	ASSERT_BUDDY(B);
	ASSERT_EQ(mb_heap.slab_pages, base_slab_pages + 3 * mb_classes[j.c].slab_pages);
	for (size_t i = 0; i < j.nlive; i++) {
		struct mb_slab *s = mb_theap_slab_of(j.live[i]);
		ASSERT_EQ(mb_slab_owner(s), NULL);
		ASSERT_EQ(s->list, MB_SLAB_ABANDONED);
		/* Nobody's, to the fast path too: the exited thread's heap
		 * is kept for the next one, with its id. */
		ASSERT_EQ(page_owner_id(j.live[i]), 0);
	}

	/* Another heap that needs the class takes the abandoned slabs'
	 * free objects, every one, before any new slab. */
	struct mb_theap *h = mb_theap_create();
	ASSERT_NE(h, NULL);
	size_t pages = mb_heap.slab_pages;
	void **w = malloc(j.nfree * sizeof *w);
	ASSERT_NE(w, NULL);
	for (size_t i = 0; i < j.nfree; i++) {
		w[i] = take(h, MB_DEFAULT_TYPE, j.c);
		for (size_t k = 0; k < j.nlive; k++)
			ASSERT_NE(w[i], j.live[k]);
	}
	ASSERT_EQ(mb_heap.slab_pages, pages);
	no_overlap(w, j.nfree, mb_classes[j.c].size);
	for (size_t i = 0; i < j.nlive; i++) {
		ASSERT_EQ(mb_slab_owner(mb_theap_slab_of(j.live[i])), h);
		ASSERT_EQ(page_owner_id(j.live[i]), h->id);
	}
	ASSERT_BUDDY(B);
	for (size_t i = 0; i < j.nfree; i++)
		give(h, w[i]);
	for (size_t i = 0; i < j.nlive; i++)
		give(h, j.live[i]);
	mb_theap_give_back(h);
	all_back();

	/* Again, and this time the live objects are freed by a heap that
	 * never allocated the class: it adopts each slab it frees into. */
	in_thread(allocate_and_exit, &j);
	for (size_t i = 0; i < j.nlive; i++) {
		struct mb_slab *s = mb_theap_slab_of(j.live[i]);
		give(h, j.live[i]);
		if (s->used) {
			ASSERT_EQ(mb_slab_owner(s), h);
			ASSERT_EQ(page_owner_id(j.live[i]), h->id);
		}
	}
	ASSERT_BUDDY(B);
	mb_theap_give_back(h);
	mb_theap_destroy(h);
	all_back();
	free(w);
	free(j.live);
}

/* ---- the purge of sparse slabs ---- */

/* Two slabs' worth of objects of class c taken by h, each written with
 * 0xa5 (the first slab full, the second current); the caller frees the
 * array. */
static void **two_slabs_written(struct mb_theap *h, unsigned c)
{
	const struct mb_class_info *ci = &mb_classes[c];
	void **v = malloc(2 * ci->nobj * sizeof *v);
	ASSERT_NE(v, NULL);
	for (unsigned i = 0; i < 2 * ci->nobj; i++) {
		v[i] = take(h, MB_DEFAULT_TYPE, c);
		memset(v[i], 0xa5, ci->size);
	}
	return v;
}

/* The buddy's release, counting its calls. */
static int (*real_release)(void *, size_t);
static unsigned release_calls;
static int counting_release(void *addr, size_t len)
{
	release_calls++;
	return real_release(addr, len);
}

TEST(purge_releases_free_pages_of_sparse_slabs)
{
	heap();
	const unsigned c = class_with(4, 8, 16); /* objects across page edges */
	const struct mb_class_info *ci = &mb_classes[c];
	unsigned nobj = ci->nobj;
	ASSERT_GT(ci->slab_pages, 2);
	struct mb_theap *h = mb_theap_create();
	ASSERT_NE(h, NULL);
	void **v = two_slabs_written(h, c);
	struct mb_slab *a = mb_theap_slab_of(v[0]), *b = mb_theap_slab_of(v[nobj]);
	/* Both sparse: a keeps its object 1 only, b (current) its last. */
	for (unsigned i = 0; i < nobj; i++)
		if (i != 1)
			give(h, v[i]);
	for (unsigned i = nobj; i < 2 * nobj - 1; i++)
		give(h, v[i]);
	ASSERT_EQ(a->used, 1);
	ASSERT_EQ(a->list, MB_SLAB_PARTIAL);
	ASSERT_EQ(b->list, MB_SLAB_CURRENT);
	ASSERT_EQ(test_resident_pages((void *)a->start, ci->slab_pages * PAGE), ci->slab_pages);
	ASSERT_EQ(test_resident_pages((void *)b->start, ci->slab_pages * PAGE), ci->slab_pages);
	/* Expected: a's pages that object 1 does not touch. */
	uintptr_t lo = (uintptr_t)v[1] - a->start, hi = lo + ci->size - 1;
	size_t expect = 0;
	for (size_t pg = 0; pg < ci->slab_pages; pg++)
		expect += !(pg * PAGE <= hi && lo < (pg + 1) * PAGE);
	ASSERT_GT(expect, 0);

	unsigned failed = 9;
	real_release = B->release;
	B->release = counting_release;
	release_calls = 0;
	size_t got = mb_theap_purge(1000, &failed);
	B->release = real_release;
	ASSERT_EQ(failed, 0);
	ASSERT_EQ(got, expect);
	/* The free pages follow object 1's: one call for them all. */
	ASSERT_EQ(release_calls, 1);
	ASSERT_EQ(test_resident_pages((void *)a->start, ci->slab_pages * PAGE), ci->slab_pages - expect);
	ASSERT_EQ(test_resident_pages((void *)b->start, ci->slab_pages * PAGE), ci->slab_pages);
	ASSERT_EQ(b->released, 0);
	ASSERT_EQ((size_t)__builtin_popcount(a->released), expect);
	/* Not twice. */
	ASSERT_EQ(mb_theap_purge(1000, &failed), 0);
	ASSERT_BUDDY(B);
	ASSERT_EQ(((uint32_t *)v[1])[0], 0xa5a5a5a5u); /* the live object untouched */

	/* a still works: once b runs out, a is current and every one of its
	 * free objects is handed out and written. */
	size_t pages = mb_heap.slab_pages;
	void **w = malloc(2 * nobj * sizeof *w);
	ASSERT_NE(w, NULL);
	unsigned nw = 0;
	while (b->used < b->nobj)
		w[nw++] = take(h, MB_DEFAULT_TYPE, c);
	for (unsigned i = 0; i < nobj - 1; i++) {
		w[nw] = take(h, MB_DEFAULT_TYPE, c);
		ASSERT_EQ(mb_theap_slab_of(w[nw]), a);
		memset(w[nw], 0x5a, ci->size);
		nw++;
	}
	ASSERT_EQ(a->list, MB_SLAB_CURRENT);
	ASSERT_EQ(a->released, 0);
	ASSERT_EQ(a->used, nobj);
	ASSERT_EQ(mb_heap.slab_pages, pages);
	ASSERT_EQ(((uint32_t *)v[1])[0], 0xa5a5a5a5u);
	ASSERT_BUDDY(B);
	give(h, v[1]);
	give(h, v[2 * nobj - 1]);
	for (unsigned i = 0; i < nw; i++)
		give(h, w[i]);
	mb_theap_give_back(h);
	mb_theap_destroy(h);
	all_back();
	free(v);
	free(w);
}

/* Only sparse slabs are purged, and a budget of one page releases one
 * page. */
TEST(purge_only_sparse_and_keeps_to_its_budget)
{
	heap();
	const unsigned c = class_with(8, 5, 11); /* 3 objects in use: not sparse, 1: sparse */
	const struct mb_class_info *ci = &mb_classes[c];
	unsigned nobj = ci->nobj;
	struct mb_theap *h = mb_theap_create();
	ASSERT_NE(h, NULL);
	void **v = malloc((nobj + 1) * sizeof *v);
	ASSERT_NE(v, NULL);
	for (unsigned i = 0; i <= nobj; i++) {
		v[i] = take(h, MB_DEFAULT_TYPE, c);
		memset(v[i], 1, ci->size);
	}
	struct mb_slab *a = mb_theap_slab_of(v[0]);
	/* Three of eleven in use: more than a quarter, not sparse, so its
	 * free pages stay, though most of its pages are free. */
	for (unsigned i = 3; i < nobj; i++)
		give(h, v[i]);
	ASSERT_EQ(a->used, 3);
	ASSERT_EQ(a->list, MB_SLAB_PARTIAL);
	unsigned failed;
	ASSERT_EQ(mb_theap_purge(1000, &failed), 0);
	ASSERT_EQ(a->released, 0);
	give(h, v[1]);
	give(h, v[2]);
	ASSERT_EQ(a->used, 1);
	ASSERT_EQ(mb_theap_purge(1, &failed), 1);
	ASSERT_EQ(__builtin_popcount(a->released), 1);
	size_t more = mb_theap_purge(1000, &failed);
	ASSERT_GT(more, 0);
	ASSERT_EQ((size_t)__builtin_popcount(a->released), 1 + more);
	give(h, v[0]);
	give(h, v[nobj]);
	mb_theap_give_back(h);
	mb_theap_destroy(h);
	all_back();
	free(v);
}

/* ---- the thread cache ---- */

/* The owner's frees go to its thread cache up to the class's capacity and
 * come back last in, first out; a cached object is free to everyone but
 * still counts as used in its slab and is not reclaimable; frees past the
 * capacity reach the slab. */
TEST(thread_cache_hands_back_the_last_freed_first)
{
	heap();
	thread_cache(1);
	const unsigned c = 3;
	const unsigned cap = mb_classes[c].cache_cap;
	ASSERT_GT(cap, 1);
	ASSERT_LE(cap, MB_TCACHE_MAX);
	struct mb_theap *h = mb_theap_create();
	ASSERT_NE(h, NULL);
	const unsigned n = cap + 5;
	void **v = malloc(n * sizeof *v);
	ASSERT_NE(v, NULL);
	for (unsigned i = 0; i < n; i++)
		v[i] = take(h, MB_DEFAULT_TYPE, c);
	struct mb_slab *s = mb_theap_slab_of(v[0]);
	ASSERT_EQ(mb_theap_slab_of(v[n - 1]), s);
	unsigned used = s->used;
	for (unsigned i = 0; i < cap; i++)
		give(h, v[i]);
	ASSERT_EQ(held(h, MB_DEFAULT_TYPE, c), cap);
	ASSERT_EQ(s->used, used);
	/* The first one, freed into an empty cache, is hot: not marked in
	 * its slab. */
	ASSERT_EQ(mb_theap_tcache(h, MB_DEFAULT_TYPE, c)->hot, v[0]);
	for (unsigned i = 0; i < cap; i++) {
		uint32_t k = (uint32_t)mb_slab_index(s, v[i]);
		ASSERT(i == 0 ? mb_theap_is_hot(h, s, v[i]) : mb_slab_is_free(s, k));
		ASSERT(!mb_slab_is_reclaimable(s, k));
	}
	/* Past the capacity: into the slab. */
	give(h, v[cap]);
	give(h, v[cap + 1]);
	ASSERT_EQ(held(h, MB_DEFAULT_TYPE, c), cap);
	ASSERT_EQ(s->used, used - 2);
	ASSERT(mb_slab_is_reclaimable(s, (uint32_t)mb_slab_index(s, v[cap])));
	ASSERT_EQ(mb_theap_tcache(h, MB_DEFAULT_TYPE, c)->nfree, cap + 2);
	/* Back last in, first out, then from the slab. */
	for (unsigned i = cap; i-- > 0;) {
		void *p = take(h, MB_DEFAULT_TYPE, c);
		ASSERT_EQ(p, v[i]);
	}
	ASSERT_EQ(held(h, MB_DEFAULT_TYPE, c), 0);
	ASSERT_EQ(s->used, used - 2);
	v[cap] = take(h, MB_DEFAULT_TYPE, c);
	v[cap + 1] = take(h, MB_DEFAULT_TYPE, c);
	no_overlap(v, n, mb_classes[c].size);
	ASSERT_EQ(s->used, used);
	ASSERT_EQ(mb_theap_tcache(h, MB_DEFAULT_TYPE, c)->nalloc, n + cap + 2);
	/* At exit, the cache goes back into the slabs and they to the buddy. */
	for (unsigned i = 0; i < n; i++)
		give(h, v[i]);
	ASSERT_EQ(held(h, MB_DEFAULT_TYPE, c), cap);
	mb_theap_destroy(h);
	ASSERT_EQ(held(h, MB_DEFAULT_TYPE, c), 0);
	all_back();
	free(v);
}

/* A fork's child flushes the caches of the threads it does not have
 * (mb_theap_flush_cache without settle), which the fork may have caught
 * between two stores: an entry that names nothing, or a live object (an
 * entry a pop had left behind), is left out, and so is the hot object (the
 * thread may have been handing it out); the cached objects go back into
 * their slabs. */
TEST(thread_cache_of_a_lost_thread_flushed_entry_by_entry)
{
	heap();
	thread_cache(1);
	const unsigned c = 3;
	struct mb_theap *h = mb_theap_create();
	ASSERT_NE(h, NULL);
	void *live = take(h, MB_DEFAULT_TYPE, c);
	void *cached = take(h, MB_DEFAULT_TYPE, c);
	void *hot = take(h, MB_DEFAULT_TYPE, c);
	struct mb_slab *s = mb_theap_slab_of(cached);
	ASSERT_EQ(mb_theap_slab_of(hot), s);
	unsigned used = s->used;
	give(h, hot); /* into the empty cache: hot */
	give(h, cached);
	struct mb_tcache *tc = mb_theap_tcache(h, MB_DEFAULT_TYPE, c);
	ASSERT_EQ(tc->n, 1);
	ASSERT_EQ(tc->hot, hot);
	/* Entries past the pushed one: never written, and a live object. */
	tc->e[1].p = NULL;
	tc->e[2].p = live;
	tc->e[2].bit_at = tc->e[0].bit_at;
	tc->n = 3;
	ASSERT_EQ(mb_theap_flush_cache(h, 0), 1);
	ASSERT_EQ(tc->n, 0);
	ASSERT_EQ(tc->hot, NULL);
	ASSERT_EQ(s->used, used - 1);
	ASSERT(mb_slab_is_free(s, (uint32_t)mb_slab_index(s, cached)));
	ASSERT(!mb_slab_is_free(s, (uint32_t)mb_slab_index(s, live)));
	ASSERT(!mb_slab_is_free(s, (uint32_t)mb_slab_index(s, hot)));
	ASSERT_BUDDY(B);
	give(h, live);
	give(h, hot);
	mb_theap_give_back(h);
	mb_theap_destroy(h);
	all_back();
}

/* A slab that only cached objects keep from emptying empties when the
 * heap gives memory back; until then the purge leaves the pages of cached
 * objects resident, and their contents as the owner left them. */
TEST(thread_cache_pages_kept_from_the_purge_until_given_back)
{
	heap();
	thread_cache(1);
	const unsigned c = class_with(4, 8, 16); /* objects across page edges */
	struct mb_class_info *ci = &mb_classes[c];
	ci->cache_cap = 3; /* so that a slab of cached objects only is sparse */
	const unsigned nobj = ci->nobj, cap = ci->cache_cap;
	ASSERT_GT(ci->slab_pages, 2);
	ASSERT_LE(cap * 4, nobj); /* a slab holding only cached objects is sparse */
	struct mb_theap *h = mb_theap_create();
	ASSERT_NE(h, NULL);
	void **v = two_slabs_written(h, c);
	struct mb_slab *a = mb_theap_slab_of(v[0]);
	ASSERT_EQ(a->list, MB_SLAB_FULL);
	/* a's last objects go to the cache, the others to a. */
	for (unsigned i = nobj; i-- > 0;)
		give(h, v[i]);
	ASSERT_EQ(held(h, MB_DEFAULT_TYPE, c), cap);
	ASSERT_EQ(a->used, cap);
	ASSERT_EQ(a->list, MB_SLAB_PARTIAL);
	unsigned failed = 9;
	size_t got = mb_theap_purge(1000, &failed);
	ASSERT_EQ(failed, 0);
	ASSERT_GT(got, 0);
	for (unsigned i = nobj - cap; i < nobj; i++) {
		uintptr_t lo = (uintptr_t)v[i] - a->start, hi = lo + ci->size - 1;
		for (uintptr_t pg = lo / PAGE; pg <= hi / PAGE; pg++) {
			ASSERT_EQ(a->released & (1u << pg), 0);
			ASSERT_EQ(test_resident_pages((void *)(a->start + pg * PAGE), PAGE), 1);
		}
		ASSERT_EQ(((uint32_t *)v[i])[0], 0xa5a5a5a5u);
	}
	ASSERT_BUDDY(B);
	/* Given back: the cache empties into a, which goes to the buddy. */
	ASSERT_EQ(mb_theap_give_back(h), 1);
	ASSERT_EQ(held(h, MB_DEFAULT_TYPE, c), 0);
	ASSERT_EQ(mb_heap.slab_pages, base_slab_pages + ci->slab_pages);
	for (unsigned i = nobj; i < 2 * nobj; i++)
		give(h, v[i]);
	mb_theap_give_back(h);
	mb_theap_destroy(h);
	all_back();
	free(v);
}

/* The next slow path of h looks at the clock, and a purge period has
 * passed since its thread cache was last aged. */
static void tick_due(struct mb_theap *h)
{
	h->slow_calls = 63;
	h->aged_ms = mb_now_ms() - mb_purge_period_ms();
	mb_theap_tick(h);
}

/* A bin that no allocation took from for a purge period gives its thread
 * cache back into its slabs at the thread's next slow path, and its
 * current slab stops being current: to the partial list, where the purge
 * may hand back its free pages, or to the buddy if nothing in it lives. A
 * bin allocated from meanwhile keeps both until it too stays idle for a
 * period. */
/* A bin that frees 256 objects or more past its full cache with no
 * allocation between (a load dropping) sheds its cache into the slabs and
 * keeps it off, so that an idle thread does not keep the last objects'
 * pages; once it allocates again, the next look turns the cache back on.
 * Frees and allocations taking turns at a full cache never shed it. */
TEST(shedding_bin_drops_its_cache_until_it_allocates)
{
	heap();
	thread_cache(1);
	const unsigned c = 3;
	const unsigned cap = mb_classes[c].cache_cap;
	const unsigned every = MB_TCACHE_STORM_EVERY, looks = MB_TCACHE_SHED;
	ASSERT_GT(cap, 2);
	struct mb_theap *h = mb_theap_create();
	ASSERT_NE(h, NULL);
	struct mb_tcache *tc = mb_theap_tcache(h, MB_DEFAULT_TYPE, c);
	const unsigned n = cap + looks * every + (looks + 1) * every + every + 10;
	void **v = malloc(n * sizeof *v);
	ASSERT_NE(v, NULL);
	for (unsigned i = 0; i < n; i++)
		v[i] = take(h, MB_DEFAULT_TYPE, c);
	for (unsigned i = 0; i < cap; i++)
		give(h, v[i]);
	ASSERT_EQ(held(h, MB_DEFAULT_TYPE, c), cap);
	/* Taking turns at a full cache, for twice the frees that shed: kept. */
	unsigned next = cap;
	for (unsigned k = 0; k < looks * every; k++) {
		give(h, v[next++]); /* past the full cache: into its slab */
		void *p = take(h, MB_DEFAULT_TYPE, c);
		ASSERT_EQ(held(h, MB_DEFAULT_TYPE, c), cap - 1);
		give(h, p);
		ASSERT_EQ(held(h, MB_DEFAULT_TYPE, c), cap);
	}
	ASSERT_EQ(tc->cap, cap);
	/* Then only frees: the cache is kept for looks * every of them at
	 * least, and shed one look later at the most. */
	unsigned freed = 0;
	while (held(h, MB_DEFAULT_TYPE, c) == cap) {
		ASSERT_LE(freed, (looks + 1) * every);
		give(h, v[next++]);
		freed++;
	}
	ASSERT_GT(freed, looks * every);
	ASSERT_EQ(held(h, MB_DEFAULT_TYPE, c), 0);
	ASSERT_EQ(tc->cap, 0);
	for (unsigned i = 0; i < next; i++) {
		struct mb_slab *s = mb_theap_slab_of(v[i]);
		ASSERT(mb_slab_is_reclaimable(s, (uint32_t)mb_slab_index(s, v[i])));
	}
	for (unsigned k = 0; k < 10; k++)
		give(h, v[next++]);
	ASSERT_EQ(held(h, MB_DEFAULT_TYPE, c), 0);
	ASSERT_BUDDY(B);
	/* Allocations: within a look's worth of frees the cache is back. */
	const unsigned again = every + 2;
	for (unsigned i = 0; i < again; i++)
		v[i] = take(h, MB_DEFAULT_TYPE, c);
	for (unsigned i = 0; i < again; i++)
		give(h, v[i]);
	ASSERT_EQ(tc->cap, cap);
	ASSERT_GE(held(h, MB_DEFAULT_TYPE, c), 1);
	while (next < n)
		give(h, v[next++]);
	mb_theap_give_back(h);
	mb_theap_destroy(h);
	all_back();
	free(v);
}

TEST(idle_bins_age_back_into_their_slabs)
{
	heap();
	thread_cache(1);
	const unsigned idle = 3, busy = 5, n = 4;
	ASSERT_GE(mb_classes[idle].cache_cap, n);
	ASSERT_GE(mb_classes[busy].cache_cap, n);
	struct mb_theap *h = mb_theap_create();
	ASSERT_NE(h, NULL);
	void *vi[n], *vb[n];
	for (unsigned i = 0; i < n; i++) {
		vi[i] = take(h, MB_DEFAULT_TYPE, idle);
		vb[i] = take(h, MB_DEFAULT_TYPE, busy);
	}
	struct mb_slab *si = mb_theap_slab_of(vi[0]), *sb = mb_theap_slab_of(vb[0]);
	/* vi[0] stays live. */
	for (unsigned i = 0; i < n; i++) {
		if (i)
			give(h, vi[i]);
		give(h, vb[i]);
	}
	ASSERT_EQ(held(h, MB_DEFAULT_TYPE, idle), n - 1);
	ASSERT_EQ(held(h, MB_DEFAULT_TYPE, busy), n);
	ASSERT_EQ(si->used, n);
	size_t slab_pages = mb_heap.slab_pages;
	/* Both allocated from since the heap was made: neither is idle. */
	tick_due(h);
	ASSERT_EQ(held(h, MB_DEFAULT_TYPE, idle), n - 1);
	ASSERT_EQ(held(h, MB_DEFAULT_TYPE, busy), n);
	ASSERT_EQ(h->bin[MB_DEFAULT_TYPE][idle].cur, si);
	/* A period with an allocation of the busy class only. */
	give(h, take(h, MB_DEFAULT_TYPE, busy));
	tick_due(h);
	ASSERT_EQ(held(h, MB_DEFAULT_TYPE, idle), 0);
	ASSERT_EQ(si->used, 1);
	for (unsigned i = 1; i < n; i++)
		ASSERT(mb_slab_is_reclaimable(si, (uint32_t)mb_slab_index(si, vi[i])));
	ASSERT_EQ(h->bin[MB_DEFAULT_TYPE][idle].cur, &mb_slab_none);
	ASSERT_EQ(si->list, MB_SLAB_PARTIAL);
	ASSERT_EQ(held(h, MB_DEFAULT_TYPE, busy), n);
	ASSERT_EQ(h->bin[MB_DEFAULT_TYPE][busy].cur, sb);
	ASSERT_EQ(mb_heap.slab_pages, slab_pages);
	ASSERT_BUDDY(B);
	/* A period with no allocation at all: the busy class is idle now,
	 * and its slab, with nothing live, goes back to the buddy. */
	tick_due(h);
	ASSERT_EQ(held(h, MB_DEFAULT_TYPE, busy), 0);
	ASSERT_EQ(h->bin[MB_DEFAULT_TYPE][busy].cur, &mb_slab_none);
	ASSERT_EQ(mb_heap.slab_pages, slab_pages - mb_classes[busy].slab_pages);
	ASSERT_BUDDY(B);
	/* The idle class again: its partial slab becomes current. */
	void *p = take(h, MB_DEFAULT_TYPE, idle);
	ASSERT_EQ(mb_theap_slab_of(p), si);
	ASSERT_EQ(h->bin[MB_DEFAULT_TYPE][idle].cur, si);
	give(h, p);
	give(h, vi[0]);
	mb_theap_give_back(h);
	mb_theap_destroy(h);
	all_back();
}

/* ---- frees posted to the owner's inbox (inbox.h) ---- */

/* A free of p by the thread of heap `by`, which does not own p's slab, as
 * alloc.c's free_slow tries it first: 1 if posted. */
static int post(struct mb_theap *by, void *p)
{
	struct mb_slab *s;
	uint32_t i;
	slab_and_index(p, &s, &i);
	return mb_theap_post_free(by, s, i, p);
}

/* Whether p is free to its owner h: in its bits, its cache or hot. */
static int free_to(struct mb_theap *h, void *p)
{
	struct mb_slab *s;
	uint32_t i;
	slab_and_index(p, &s, &i);
	return mb_slab_is_free(s, i) || mb_theap_is_hot(h, s, p);
}

TEST(posted_frees_are_taken_by_their_owner)
{
	heap();
	const unsigned c = 3;
	unsigned n = 2 * mb_classes[c].nobj;
	ASSERT_LE(n, MB_INBOX_SLOTS);
	void **v = malloc(n * sizeof *v);
	ASSERT_NE(v, NULL);
	for (int cache = 0; cache <= 1; cache++) {
		thread_cache(cache);
		struct mb_theap *h = mb_theap_create(), *h2 = mb_theap_create();
		for (unsigned k = 0; k < n; k++)
			v[k] = take(h, MB_DEFAULT_TYPE, c);
		size_t pages = mb_heap.slab_pages;
		for (unsigned k = 0; k < n; k++)
			ASSERT_EQ(post(h2, v[k]), 1);
		/* Nothing of the owner's written: still live, no remote bit. */
		ASSERT(mb_inbox_pending(&h->inbox));
		for (unsigned k = 0; k < n; k++) {
			struct mb_slab *s;
			uint32_t i;
			slab_and_index(v[k], &s, &i);
			ASSERT(!free_to(h, v[k]));
			ASSERT_EQ((s->remote[i >> 6] >> (i & 63)) & 1, 0);
		}
		mb_theap_drain(h);
		ASSERT(!mb_inbox_pending(&h->inbox));
		for (unsigned k = 0; k < n; k++)
			ASSERT(free_to(h, v[k]));
		/* All taken again with no new slab: none lost. */
		for (unsigned k = 0; k < n; k++)
			v[k] = take(h, MB_DEFAULT_TYPE, c);
		ASSERT_EQ(mb_heap.slab_pages, pages);
		for (unsigned k = 0; k < n; k++)
			give(h, v[k]);
		mb_theap_give_back(h);
		mb_theap_destroy(h);
		mb_theap_destroy(h2);
		all_back();
	}
	free(v);
}

TEST(a_full_inbox_refuses_and_the_free_sets_a_remote_bit)
{
	heap();
	thread_cache(1);
	const unsigned c = 0, n = MB_INBOX_SLOTS + 40;
	void **v = malloc(n * sizeof *v);
	ASSERT_NE(v, NULL);
	struct mb_theap *h = mb_theap_create(), *h2 = mb_theap_create();
	for (unsigned k = 0; k < n; k++)
		v[k] = take(h, MB_DEFAULT_TYPE, c);
	unsigned posted = 0;
	for (unsigned k = 0; k < n; k++) {
		if (post(h2, v[k])) {
			posted++;
			continue;
		}
		give(h2, v[k]); /* the usual way: its remote bit */
		struct mb_slab *s;
		uint32_t i;
		slab_and_index(v[k], &s, &i);
		ASSERT_EQ((s->remote[i >> 6] >> (i & 63)) & 1, 1);
	}
	ASSERT_EQ(posted, MB_INBOX_SLOTS);
	/* The owner's next free takes the posts first. */
	void *mine = take(h, MB_DEFAULT_TYPE, c);
	give(h, mine);
	ASSERT(!mb_inbox_pending(&h->inbox));
	for (unsigned k = 0; k < n; k++)
		ASSERT(free_to(h, v[k]));
	mb_theap_give_back(h);
	mb_theap_destroy(h);
	mb_theap_destroy(h2);
	all_back();
	free(v);
}

TEST(an_exiting_owner_takes_its_posts)
{
	heap();
	thread_cache(1);
	const unsigned c = 5, n = 50;
	void *v[50];
	struct mb_theap *h = mb_theap_create(), *h2 = mb_theap_create();
	for (unsigned k = 0; k < n; k++)
		v[k] = take(h, MB_DEFAULT_TYPE, c);
	for (unsigned k = 0; k < n; k++)
		ASSERT_EQ(post(h2, v[k]), 1);
	/* Its thread exits with the posts waiting: none is lost, every slab
	 * goes back whole, and the closed inbox refuses posts. */
	mb_theap_destroy(h);
	ASSERT_EQ(mb_inbox_post(&h->inbox, v[0]), 0);
	mb_theap_destroy(h2);
	all_back();
}

/* Who frees the object first and second through the inbox: its owner,
 * or another thread that posts it. */
enum posted_double { OWNER_THEN_POST, POST_THEN_POST, POST_THEN_OWNER };

static void posted_double_free(void *arg)
{
	enum posted_double d = *(const enum posted_double *)arg;
	struct mb_theap *h = mb_theap_create(), *h2 = mb_theap_create(), *h3 = mb_theap_create();
	void *keep = take(h, MB_DEFAULT_TYPE, 2);
	void *p = take(h, MB_DEFAULT_TYPE, 2);
	printf("object %p\n", p);
	fflush(stdout);
	switch (d) {
	case OWNER_THEN_POST: /* caught by the post, from the owner's bits */
		give(h, p);
		post(h2, p);
		break;
	case POST_THEN_POST: /* both posted; caught when the owner takes them */
		ASSERT_EQ(post(h2, p), 1);
		ASSERT_EQ(post(h3, p), 1);
		mb_theap_drain(h);
		break;
	case POST_THEN_OWNER: /* caught by the owner's free, which takes the post first */
		ASSERT_EQ(post(h2, p), 1);
		give(h, p);
		break;
	}
	(void)keep;
	printf("not caught\n");
}

TEST(posted_double_frees_abort_with_the_address)
{
	heap();
	for (int cache = 0; cache <= 1; cache++) {
		thread_cache(cache);
		for (enum posted_double d = OWNER_THEN_POST; d <= POST_THEN_OWNER; d++)
			expect_abort_in(posted_double_free, &d);
	}
	all_back();
}

/* ---- fork with posts waiting ---- */

struct fork_posts {
	struct mb_theap *h, *h2;
	void **a, **b;
	unsigned n;
};

/* The child: h's thread forked, h2's is not in it. */
static void fork_child_with_posts(void *arg)
{
	struct fork_posts *f = arg;
	mb_self.heap = f->h;
	mb_theap_fork_prepare();
	mb_theap_fork_child();
	/* h2's posts were taken as it was let go of; h's are takeable past
	 * the slot that a thread of the parent claimed and never filled. */
	mb_theap_drain(f->h);
	ASSERT(!mb_inbox_pending(&f->h->inbox));
	for (unsigned k = 0; k < f->n; k++)
		ASSERT(free_to(f->h, f->a[k]));
	mb_theap_give_back(f->h);
	mb_theap_destroy(f->h);
	all_back();
	printf("child done\n");
}

TEST(fork_child_takes_every_heap_s_posts)
{
	heap();
	thread_cache(1);
	const unsigned c = 4, n = 20;
	void *a[20], *b[20];
	struct mb_theap *h = mb_theap_create(), *h2 = mb_theap_create();
	for (unsigned k = 0; k < n; k++) {
		a[k] = take(h, MB_DEFAULT_TYPE, c);
		b[k] = take(h2, MB_DEFAULT_TYPE, c);
	}
	for (unsigned k = 0; k < n / 2; k++)
		ASSERT_EQ(post(h2, a[k]), 1);
	/* A post of a thread the child will not have: slot claimed, never
	 * filled there. */
	uint64_t claimed = h->inbox.tail;
	h->inbox.tail = claimed + 1;
	for (unsigned k = n / 2; k < n; k++)
		ASSERT_EQ(post(h2, a[k]), 1);
	for (unsigned k = 0; k < n; k++)
		ASSERT_EQ(post(h, b[k]), 1);
	struct fork_posts f = { h, h2, a, b, n };
	struct test_child ch;
	test_child_run(&ch, fork_child_with_posts, &f);
	if (ch.status != 0)
		FAIL("child: status %d: %s", ch.status, ch.out);
	ASSERT_CONTAINS(ch.out, "child done");

	/* The parent: the claimed post arrives (an object of h's), then the
	 * rest are taken in order. */
	void *late = take(h, MB_DEFAULT_TYPE, c);
	struct mb_inbox_slot *slot = &h->inbox.slot[claimed % MB_INBOX_SLOTS];
	slot->p = late;
	__atomic_store_n(&slot->seq, claimed + 1, __ATOMIC_RELEASE);
	mb_theap_drain(h);
	mb_theap_drain(h2);
	for (unsigned k = 0; k < n; k++) {
		ASSERT(free_to(h, a[k]));
		ASSERT(free_to(h2, b[k]));
	}
	ASSERT(free_to(h, late));
	mb_theap_give_back(h);
	mb_theap_give_back(h2);
	mb_theap_destroy(h);
	mb_theap_destroy(h2);
	all_back();
}
