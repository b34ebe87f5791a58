#include "config.h"
#include "metadata.h"
#include "region.h"

#include <stdint.h>
#include <string.h>

/* The arena is a small slab allocator of its own, in 2 MiB chunks of 4 KiB
 * pages. A record of up to SMALL_MAX bytes comes from a page that holds
 * records of one size (a multiple of GRAIN) only; a larger one takes a run
 * of whole pages. A page that becomes entirely free goes back to the free
 * pages, and mb_meta_release() hands free pages to the kernel, so the
 * records of a heap that shrank (slab descriptors, above all) stop costing
 * memory. Records of different groups never share a page, so the
 * descriptors of slabs that die together free whole pages together. Each
 * chunk starts with the descriptors of its pages. */

#define GRAIN 64
#define SMALL_MAX 2048
#define NSIZES (SMALL_MAX / GRAIN + 1)
#define CHUNK ((size_t)2 << 20)
#define PAGE ((size_t)4096)
#define CHUNK_PAGES (CHUNK / PAGE)
#define MAP_WORDS (CHUNK_PAGES / 64)

enum { PG_FREE = 0, PG_HEADER, PG_SMALL, PG_LARGE };

struct meta_page {
	struct meta_page *next, *prev; /* pages of one size with free records */
	void *free;                    /* free records in this page, linked */
	uint16_t live;                 /* small: records in use; large: run length */
	uint16_t size_k;               /* record size in GRAINs (small pages) */
	uint8_t group;                 /* small pages: records of this group only */
	uint8_t kind;
	uint8_t listed;
};

struct meta_chunk {
	struct meta_chunk *next;
	uint64_t free_map[MAP_WORDS];  /* pages free for reuse */
	uint64_t dirty_map[MAP_WORDS]; /* pages touched and not released since */
	struct meta_page pg[CHUNK_PAGES];
};

#define HEADER_PAGES ((sizeof(struct meta_chunk) + PAGE - 1) / PAGE)

static struct meta_chunk *chunks;
/* Pages with free records, per group and size. */
static struct meta_page *partial[MB_META_GROUPS][NSIZES];
static size_t mapped;

static char *page_addr(struct meta_chunk *c, size_t i)
{
	return (char *)c + i * PAGE;
}

static struct meta_chunk *chunk_of(const void *p)
{
	return (struct meta_chunk *)((uintptr_t)p & ~(uintptr_t)(CHUNK - 1));
}

static int bit(const uint64_t *m, size_t i)
{
	return (int)((m[i / 64] >> (i % 64)) & 1);
}

static void set_bits(uint64_t *m, size_t i, size_t n, int on)
{
	for (size_t j = i; j < i + n; j++) {
		if (on)
			m[j / 64] |= (uint64_t)1 << (j % 64);
		else
			m[j / 64] &= ~((uint64_t)1 << (j % 64));
	}
}

static struct meta_chunk *chunk_new(void)
{
	struct meta_chunk *c = mb_os_reserve(CHUNK, CHUNK);
	if (c)
		mb_os_set_use(c, MB_USE_ARENA);
	if (!c)
		return NULL;
	mapped += CHUNK;
	set_bits(c->free_map, HEADER_PAGES, CHUNK_PAGES - HEADER_PAGES, 1);
	set_bits(c->dirty_map, 0, HEADER_PAGES, 1);
	for (size_t i = 0; i < HEADER_PAGES; i++)
		c->pg[i].kind = PG_HEADER;
	c->next = chunks;
	chunks = c;
	return c;
}

/* The first run of n free pages in c, or 0 (page 0 is never free). */
static size_t find_run(const struct meta_chunk *c, size_t n)
{
	size_t run = 0;
	for (size_t i = HEADER_PAGES; i < CHUNK_PAGES; i++) {
		if (!(i % 64) && c->free_map[i / 64] == 0) {
			run = 0;
			i += 63;
			continue;
		}
		run = bit(c->free_map, i) ? run + 1 : 0;
		if (run == n)
			return i + 1 - n;
	}
	return 0;
}

/* n contiguous zeroed pages, first one's descriptor in *out. */
static void *pages_alloc(size_t n, struct meta_page **out)
{
	struct meta_chunk *c;
	size_t i = 0;
	for (c = chunks; c; c = c->next)
		if ((i = find_run(c, n)) != 0)
			break;
	if (!c) {
		c = chunk_new();
		if (!c)
			return NULL;
		i = HEADER_PAGES;
	}
	char *p = page_addr(c, i);
	for (size_t j = i; j < i + n; j++)
		if (bit(c->dirty_map, j))
			memset(page_addr(c, j), 0, PAGE);
	set_bits(c->free_map, i, n, 0);
	set_bits(c->dirty_map, i, n, 1);
	*out = &c->pg[i];
	return p;
}

static void pages_free(struct meta_chunk *c, size_t i, size_t n)
{
	memset(&c->pg[i], 0, n * sizeof(c->pg[0]));
	set_bits(c->free_map, i, n, 1);
}

static void list_add(struct meta_page *pg)
{
	pg->listed = 1;
	pg->prev = NULL;
	pg->next = partial[pg->group][pg->size_k];
	if (pg->next)
		pg->next->prev = pg;
	partial[pg->group][pg->size_k] = pg;
}

static void list_del(struct meta_page *pg)
{
	if (pg->prev)
		pg->prev->next = pg->next;
	else
		partial[pg->group][pg->size_k] = pg->next;
	if (pg->next)
		pg->next->prev = pg->prev;
	pg->next = pg->prev = NULL;
	pg->listed = 0;
}

static void *small_alloc(size_t k, unsigned group)
{
	struct meta_page *pg = partial[group][k];
	if (!pg) {
		char *base = pages_alloc(1, &pg);
		if (!base)
			return NULL;
		size_t sz = k * GRAIN, n = PAGE / sz;
		pg->kind = PG_SMALL;
		pg->size_k = (uint16_t)k;
		pg->group = (uint8_t)group;
		for (size_t j = n; j-- > 0;) {
			void **o = (void **)(base + j * sz);
			*o = pg->free;
			pg->free = o;
		}
		list_add(pg);
	}
	void **o = pg->free;
	pg->free = *o;
	pg->live++;
	if (!pg->free)
		list_del(pg);
	memset(o, 0, k * GRAIN);
	return o;
}

void *mb_meta_alloc(size_t n)
{
	return mb_meta_alloc_group(n, 0);
}

void *mb_meta_alloc_group(size_t n, unsigned group)
{
	if (n == 0 || n > MB_META_MAX || group >= MB_META_GROUPS)
		return NULL;
	if (n <= SMALL_MAX)
		return small_alloc((n + GRAIN - 1) / GRAIN, group);
	struct meta_page *pg;
	size_t np = (n + PAGE - 1) / PAGE;
	void *p = pages_alloc(np, &pg);
	if (p) {
		pg->kind = PG_LARGE;
		pg->live = (uint16_t)np;
	}
	return p;
}

void mb_meta_free(void *p, size_t n)
{
	if (!p)
		return;
	struct meta_chunk *c = chunk_of(p);
	size_t i = (size_t)((char *)p - (char *)c) / PAGE;
	struct meta_page *pg = &c->pg[i];
	if (pg->kind == PG_LARGE) {
		pages_free(c, i, pg->live);
		return;
	}
	(void)n;
	void **o = p;
	*o = pg->free;
	pg->free = o;
	pg->live--;
	if (pg->live == 0) {
		/* Every record of the page is free: they all leave its size's
		 * list with it. */
		if (pg->listed)
			list_del(pg);
		pages_free(c, i, 1);
	} else if (!pg->listed) {
		list_add(pg);
	}
}

static int any_dirty(const struct meta_chunk *c, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (bit(c->dirty_map, i))
			return 1;
	return 0;
}

/* Only whole pages of the system can go back (16 or 64 KiB on some
 * systems; chunks are aligned to 2 MiB): each run of free pages is cut to
 * the system pages inside it, and those that hold a dirty page are
 * released; a free page that shares a system page with one in use stays. */
size_t mb_meta_release(int *failed)
{
	size_t released = 0, sys = mb_os_page_size() / PAGE;
	*failed = 0;
	for (struct meta_chunk *c = chunks; c; c = c->next) {
		for (size_t i = HEADER_PAGES; i < CHUNK_PAGES;) {
			if (!bit(c->free_map, i)) {
				i++;
				continue;
			}
			size_t j = i;
			while (j < CHUNK_PAGES && bit(c->free_map, j))
				j++;
			size_t lo = (i + sys - 1) / sys * sys, hi = j / sys * sys;
			i = j;
			if (lo >= hi || !any_dirty(c, lo, hi))
				continue;
			if (mb_os_release(page_addr(c, lo), (hi - lo) * PAGE) != 0) {
				*failed = 1;
				return released; /* the pages stay dirty; later */
			}
			for (size_t k = lo; k < hi; k++)
				released += bit(c->dirty_map, k);
			set_bits(c->dirty_map, lo, hi - lo, 0);
		}
	}
	return released;
}

size_t mb_meta_mapped(void)
{
	return mapped;
}

size_t mb_meta_resident(void)
{
	size_t dirty = 0;
	for (struct meta_chunk *c = chunks; c; c = c->next)
		for (size_t w = 0; w < MAP_WORDS; w++)
			dirty += (size_t)__builtin_popcountll(c->dirty_map[w]);
	return dirty * PAGE;
}
