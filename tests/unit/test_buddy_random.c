/* Randomized test: long sequences of alloc (pages, or blocks that keep a
 * reserved tail), free, resize, block use, split and purge against a
 * shadow model of page ownership, with the consistency checker
 * after every operation. A purge is taken in one operation and finished
 * some operations later, as the allocator does it with its lock dropped:
 * meanwhile its pages belong to nobody and nothing may hand them out. MB_RANDOM_OPS sets the total number of operations (default
 * 10,000,000), MB_RANDOM_SEED the seed. */
#include "config.h"
#include "harness.h"

#include <stdint.h>
#include <string.h>

#define MAX_LIVE 512

struct live {
	long idx;
	size_t npages; /* taken from the buddy */
	size_t used;   /* of a block, the pages in use (0: all) */
	uint8_t tag;
};

/* The pages of l its owner writes: a block's reserved ones are not. */
static size_t in_use(const struct live *l)
{
	return l->used ? l->used : l->npages;
}

static uint64_t rng_state;
static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static uint16_t *owner; /* shadow: which live slot + 1 owns each page */
#define INFLIGHT 0xffff  /* shadow owner of pages being released */

static void shadow_set(size_t idx, size_t n, uint16_t v, uint16_t expect)
{
	for (size_t i = idx; i < idx + n; i++) {
		if (owner[i] != expect)
			FAIL("page %zu owned by %u, expected %u", i, owner[i], expect);
		owner[i] = v;
	}
}

/* The bytes tagged in an allocation of n pages at idx: its first and last,
 * and the first of every pageblock inside it (pages of runs have no page
 * records, and must still be known dirty when reused). */
static size_t tag_spot(const struct mb_buddy *b, size_t idx, size_t n, size_t k)
{
	if (k == 0)
		return 0;
	size_t pb_first = ((idx >> b->pb_order) + k) << b->pb_order;
	if (pb_first < idx + n)
		return (pb_first - idx) << MB_PAGE_SHIFT;
	return (n << MB_PAGE_SHIFT) - 1;
}

static void tag_write(struct mb_buddy *b, struct live *l)
{
	unsigned char *p = mb_buddy_page_addr(b, (size_t)l->idx);
	size_t last = (in_use(l) << MB_PAGE_SHIFT) - 1;
	for (size_t k = 0;; k++) {
		size_t at = tag_spot(b, (size_t)l->idx, in_use(l), k);
		p[at] = l->tag;
		if (at == last)
			break;
	}
}

static void tag_verify_value(struct mb_buddy *b, size_t idx, size_t n, unsigned char v)
{
	unsigned char *p = mb_buddy_page_addr(b, idx);
	size_t last = (n << MB_PAGE_SHIFT) - 1;
	for (size_t k = 0;; k++) {
		size_t at = tag_spot(b, idx, n, k);
		ASSERT_EQ(p[at], v);
		if (at == last)
			break;
	}
}

static void tag_verify(struct mb_buddy *b, struct live *l)
{
	tag_verify_value(b, (size_t)l->idx, in_use(l), l->tag);
}

/* Whether the purge is handing back l's reserved pages: then its owner
 * must leave it alone. */
static int busy(const struct mb_buddy *b, const struct live *l)
{
	return (b->pages[l->idx].flags & MB_PGF_TAIL_BUSY) != 0;
}

/* Release what a purge took and put it back: its pages read as zero. A
 * block's reserved pages stay its own. */
static void finish_purge(struct mb_buddy *b, struct mb_purge_batch *bt)
{
	mb_buddy_purge_release(b, bt);
	for (unsigned k = 0; k < bt->n; k++) {
		struct mb_purge_range *r = &bt->r[k];
		ASSERT(r->ok);
		if (!r->tail)
			shadow_set(r->idx, r->npages, 0, INFLIGHT);
		const unsigned char *p = mb_buddy_page_addr(b, r->idx);
		ASSERT_EQ(p[0], 0);
		ASSERT_EQ(p[(r->npages << MB_PAGE_SHIFT) - 1], 0);
	}
	mb_buddy_purge_done(b, bt);
}

static size_t random_npages(const struct mb_buddy *b)
{
	uint64_t r = rnd() % 100;
	if (r < 60)
		return 1 + rnd() % 4;
	if (r < 90)
		return 1 + rnd() % (b->pb_pages / 2);
	if (r < 97)
		return 1 + rnd() % b->pb_pages;
	return b->pb_pages + 1 + rnd() % (2 * b->pb_pages);
}

static unsigned long run(unsigned max_order, size_t npb, unsigned long ops)
{
	struct mb_buddy b;
	struct live live[MAX_LIVE];
	int nlive = 0;
	unsigned long fails = 0;
	struct mb_purge_batch bt;
	int inflight = 0;
	test_buddy_new(&b, npb, max_order);
	owner = calloc(b.npages, sizeof(*owner));
	ASSERT(owner);

	for (unsigned long op = 0; op < ops; op++) {
		int pick;
		uint64_t r = rnd() % 100;
		b.clock = op;
		if (r < 45 && nlive < MAX_LIVE) {
			size_t n = random_npages(&b);
			int type = (int)(rnd() % 3);
			int zeroed;
			/* Half the allocations go through homes (of any user,
			 * whatever its type was before), half of those as a
			 * user that shares its type's pageblocks. */
			int who = (int)(rnd() % (2 * MB_BUDDY_HOMES)) - MB_BUDDY_HOMES;
			int shared = rnd() % 2;
			size_t block = 1;
			while (block < n)
				block *= 2;
			int as_block = block != n && block <= b.pb_pages && rnd() % 4 == 0;
			long idx = as_block ? mb_buddy_alloc_block(&b, n, type, &zeroed)
					    : who < 0 ? mb_buddy_alloc(&b, n, type, &zeroed)
					    : shared  ? mb_buddy_alloc_shared(&b, n, type, who, &zeroed)
						      : mb_buddy_alloc_home(&b, n, type, who, &zeroed);
			if (idx < 0) {
				fails++;
			} else {
				struct live *l = &live[nlive];
				l->idx = idx;
				l->npages = as_block ? block : n;
				l->used = as_block ? n : 0;
				l->tag = (uint8_t)(rnd() | 1);
				ASSERT_EQ(b.pages[idx].npages, l->npages);
				ASSERT_EQ(b.pages[idx].used, l->used);
				n = l->npages;
				if (zeroed)
					tag_verify_value(&b, (size_t)idx, in_use(l), 0);
				shadow_set((size_t)idx, n, (uint16_t)(nlive + 1), 0);
				tag_write(&b, l);
				nlive++;
			}
		} else if (r < 85 && nlive && !busy(&b, &live[pick = (int)(rnd() % (unsigned)nlive)])) {
			/* Not a block whose reserved pages the purge is handing
			 * back: its owner waits for that (large.c). */
			int i = pick;
			struct live *l = &live[i];
			tag_verify(&b, l);
			shadow_set((size_t)l->idx, l->npages, 0, (uint16_t)(i + 1));
			ASSERT_EQ(mb_buddy_free(&b, (size_t)l->idx), l->npages);
			live[i] = live[--nlive];
			if (i < nlive)
				shadow_set((size_t)live[i].idx, live[i].npages, (uint16_t)(i + 1),
					   (uint16_t)(nlive + 1));
		} else if (r < 89 && nlive && nlive < MAX_LIVE) {
			/* Cut one in two, as aligned large allocations do. */
			int i = (int)(rnd() % (unsigned)nlive);
			struct live *l = &live[i];
			if (l->used) {
				/* A block: another share of it in use (not while
				 * the purge hands its reserved pages back). */
				if (!busy(&b, l)) {
					tag_verify(&b, l);
					size_t u = 1 + rnd() % l->npages;
					mb_buddy_block_use(&b, (size_t)l->idx, u);
					l->used = u < l->npages ? u : 0;
					ASSERT_EQ(b.pages[l->idx].used, l->used);
					tag_write(&b, l);
				}
			} else if (l->npages >= 2) {
				tag_verify(&b, l);
				size_t at = (size_t)l->idx + 1 + rnd() % (l->npages - 1);
				mb_buddy_split(&b, (size_t)l->idx, at);
				struct live *t = &live[nlive];
				t->idx = (long)at;
				t->npages = (size_t)l->idx + l->npages - at;
				t->used = 0;
				t->tag = (uint8_t)(rnd() | 1);
				l->npages = at - (size_t)l->idx;
				shadow_set(at, t->npages, (uint16_t)(nlive + 1), (uint16_t)(i + 1));
				nlive++;
				tag_write(&b, l);
				tag_write(&b, t);
			}
		} else if (r < 97 && nlive && !busy(&b, &live[pick = (int)(rnd() % (unsigned)nlive)])) {
			int i = pick;
			struct live *l = &live[i];
			size_t n = random_npages(&b);
			tag_verify(&b, l);
			size_t old = l->npages;
			if (n < old) {
				ASSERT_EQ(mb_buddy_resize(&b, (size_t)l->idx, n), 0);
				shadow_set((size_t)l->idx + n, old - n, 0, (uint16_t)(i + 1));
				l->npages = n;
				if (l->used >= n)
					l->used = 0; /* cut into what it used */
			} else if (mb_buddy_resize(&b, (size_t)l->idx, n) == 0) {
				shadow_set((size_t)l->idx + old, n - old, (uint16_t)(i + 1), 0);
				if (n > old)
					l->used = 0; /* grown: every page in use */
				l->npages = n;
			}
			ASSERT_EQ(b.pages[l->idx].used, l->used);
			tag_write(&b, l);
		} else if (!inflight && rnd() % 4 == 0) {
			mb_buddy_purge(&b, op - rnd() % 64, 1 + rnd() % (4 * b.pb_pages));
		} else if (!inflight) {
			if (mb_buddy_purge_take(&b, op - rnd() % 64, 1 + rnd() % (4 * b.pb_pages), &bt)) {
				for (unsigned k = 0; k < bt.n; k++)
					if (!bt.r[k].tail)
						shadow_set(bt.r[k].idx, bt.r[k].npages, INFLIGHT, 0);
				inflight = 1;
			}
		} else {
			finish_purge(&b, &bt);
			inflight = 0;
		}
		ASSERT_BUDDY(&b);
		size_t total = 0;
		for (int i = 0; i < nlive; i++)
			total += live[i].npages;
		ASSERT_EQ(total, b.pages_allocated);
	}
	if (inflight)
		finish_purge(&b, &bt);
	while (nlive) {
		struct live *l = &live[--nlive];
		tag_verify(&b, l);
		mb_buddy_free(&b, (size_t)l->idx);
	}
	ASSERT_BUDDY(&b);
	ASSERT_EQ(b.nr_global, b.nblocks);
	free(owner);
	test_buddy_free_region(&b);
	return fails;
}

TEST(random_operations)
{
	const char *s = getenv("MB_RANDOM_OPS");
	unsigned long total = s ? strtoul(s, NULL, 10) : 10000000UL;
	const char *seed = getenv("MB_RANDOM_SEED");
	rng_state = seed ? strtoull(seed, NULL, 10) : 0x9e3779b97f4a7c15ULL;
	if (!rng_state)
		rng_state = 1;
	/* Small regions keep the O(pages) checker cheap and hit exhaustion,
	 * fallbacks and runs often. */
	static const struct { unsigned max_order; size_t npb; } cfg[] = {
		{ 6, 4 }, { 6, 9 }, { 7, 3 }, { 8, 5 },
	};
	unsigned long per = total / 4, done = 0, fails = 0;
	for (int i = 0; i < 4; i++) {
		unsigned long n = i == 3 ? total - done : per;
		fails += run(cfg[i].max_order, cfg[i].npb, n);
		done += n;
	}
	NOTE("%lu operations checked, %lu allocations refused for lack of memory", done, fails);
}
