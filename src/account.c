#include "config.h"
#include "account.h"
#include "heap.h"
#include "large.h"
#include "lockstat.h"
#include "options.h"
#include "out.h"
#include "purge.h"
#include "region.h"
#include "slab.h"
#include "theap.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- by mapping: /proc/self/smaps ---- */

#define MAX_OURS 1024

struct ours {
	struct mb_os_mapping m[MAX_OURS];
	size_t n;
	uintptr_t heap_lo, heap_hi;
};

/* The use of our mapping overlapping [lo, hi), or -1 if none is ours. */
static int ours_use(const struct ours *o, uintptr_t lo, uintptr_t hi)
{
	for (size_t i = 0; i < o->n; i++)
		if (lo < o->m[i].hi && hi > o->m[i].lo)
			return o->m[i].use;
	return -1;
}

/* One mapping's header line: its range, and what its name says. */
struct mapping {
	uintptr_t lo, hi;
	enum { M_HEAP, M_META, M_FILE, M_STACK, M_ANON } kind;
	int use; /* M_META: enum mb_os_use */
};

static void parse_header(const char *line, const struct ours *o, struct mapping *m)
{
	char *end;
	unsigned long lo = strtoul(line, &end, 16), hi = *end == '-' ? strtoul(end + 1, NULL, 16) : 0;
	m->lo = lo;
	m->hi = hi;
	/* The name is the sixth field, if any. */
	const char *p = line;
	for (int f = 0; f < 5 && p; f++) {
		p = strchr(p, ' ');
		while (p && *p == ' ')
			p++;
	}
	if (lo < o->heap_hi && hi > o->heap_lo)
		m->kind = M_HEAP;
	else if ((m->use = ours_use(o, lo, hi)) >= 0)
		m->kind = M_META;
	else if (p && *p == '/')
		m->kind = M_FILE;
	else if (p && strncmp(p, "[stack]", 7) == 0)
		m->kind = M_STACK;
	else
		m->kind = M_ANON;
}

/* One line of smaps: a mapping's header, or one of its fields (only Rss
 * and AnonHugePages count). */
static void smaps_line(struct mb_account *a, const struct ours *o, struct mapping *cur, const char *line)
{
	if (line[0] >= 'A' && line[0] <= 'Z') {
		/* strtoull rather than sscanf: a report reads a few hundred. */
		if (line[0] == 'A' && cur->kind == M_HEAP && strncmp(line, "AnonHugePages:", 14) == 0)
			a->heap_anon_huge += (uint64_t)strtoull(line + 14, NULL, 10) << 10;
		/* A file mapping's pages the program wrote (relocations, data)
		 * are its private copies: anonymous, as smaps_rollup counts
		 * them (account_by_rollup). Rss comes before Anonymous. */
		if (line[0] == 'A' && cur->kind == M_FILE && strncmp(line, "Anonymous:", 10) == 0) {
			uint64_t anon = (uint64_t)strtoull(line + 10, NULL, 10) << 10;
			a->file_rss -= anon < a->file_rss ? anon : a->file_rss;
			a->anon_rss += anon;
		}
		if (line[0] != 'R' || strncmp(line, "Rss:", 4) != 0)
			return;
		uint64_t b = (uint64_t)strtoull(line + 4, NULL, 10) << 10;
		switch (cur->kind) {
		case M_HEAP: a->heap_rss += b; break;
		case M_META:
			a->meta_rss += b;
			a->meta_use[cur->use] += b;
			break;
		case M_FILE: a->file_rss += b; break;
		case M_STACK: a->stack_rss += b; break;
		default: a->anon_rss += b; break;
		}
	} else {
		parse_header(line, o, cur);
	}
}

/* Sums the Rss of every mapping by kind, with no allocation: line by line
 * with memchr, in a buffer on the stack (smaps has some twenty lines per
 * mapping, of which two count, and a short process's report reads it at
 * exit). */
static int read_smaps(struct mb_account *a, const struct ours *o)
{
	int fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	enum { CHUNK = 8192, LINE_MAX_KEPT = 512 };
	char buf[CHUNK + LINE_MAX_KEPT + 1];
	size_t have = 0; /* the start of a line the last read cut */
	struct mapping cur = { 0, 0, M_ANON, 0 };
	ssize_t got;
	while ((got = read(fd, buf + have, CHUNK)) > 0) {
		size_t end = have + (size_t)got, start = 0;
		char *nl;
		while ((nl = memchr(buf + start, '\n', end - start)) != NULL) {
			*nl = 0;
			smaps_line(a, o, &cur, buf + start);
			start = (size_t)(nl - buf) + 1;
		}
		have = end - start;
		if (have > LINE_MAX_KEPT) {
			/* A longer line (a mapping's path) is cut: its head is
			 * all a header needs. */
			buf[start + LINE_MAX_KEPT] = 0;
			have = LINE_MAX_KEPT;
		}
		memmove(buf, buf + start, have);
	}
	close(fd);
	return got < 0 ? -1 : 0;
}

/* ---- the whole process at once: /proc/self/smaps_rollup ---- */

/* /proc/self/smaps makes the kernel format some twenty lines for every
 * mapping: 0.25 ms of a 0.4 ms report in a process of 250 mappings (a
 * compiler's, cmake's), most of the report's cost in a short process.
 * smaps_rollup walks the same page tables and formats one mapping's worth
 * (0.05 ms there with a few MB resident; the walk visits every resident
 * page: 0.1 ms for 25 MB). It has no per-mapping figures; the allocator's
 * own mappings and the main stack are measured with mincore instead, and
 * what is left of the anonymous pages is the program's other memory. It
 * cannot tell whose the anonymous huge pages are: a process that has any
 * is accounted from smaps, mapping by mapping. */

struct rollup {
	uint64_t rss, anon, anon_huge;
};

static int read_rollup(struct rollup *r)
{
	char buf[4096]; /* about 1 KiB: one header and some twenty fields */
	if (mb_read_small("/proc/self/smaps_rollup", buf, sizeof buf) <= 0)
		return -1;
	static const struct {
		const char *name;
		size_t at;
	} field[] = {
		{ "\nRss:", offsetof(struct rollup, rss) },
		{ "\nAnonymous:", offsetof(struct rollup, anon) },
		{ "\nAnonHugePages:", offsetof(struct rollup, anon_huge) },
	};
	for (size_t i = 0; i < sizeof field / sizeof field[0]; i++) {
		const char *f = strstr(buf, field[i].name);
		if (!f)
			return -1;
		*(uint64_t *)((char *)r + field[i].at) =
			(uint64_t)strtoull(f + strlen(field[i].name), NULL, 10) << 10;
	}
	return 0;
}

/* The resident bytes of [lo, hi) (rounded out to pages, all mapped), or
 * -1 if a page of it is not mapped. */
static int64_t resident_bytes(uintptr_t lo, uintptr_t hi)
{
	lo &= ~(uintptr_t)(MB_PAGE_SIZE - 1);
	hi = (hi + MB_PAGE_SIZE - 1) & ~(uintptr_t)(MB_PAGE_SIZE - 1);
	long n = mb_os_resident_pages((void *)lo, (hi - lo) >> MB_PAGE_SHIFT);
	return n < 0 ? -1 : (int64_t)n << MB_PAGE_SHIFT;
}

static int mapped(uintptr_t lo, uintptr_t hi)
{
	return resident_bytes(lo, hi) >= 0;
}

extern void *__libc_stack_end; /* glibc's: the stack pointer at start */

/* The main thread's stack: the mapping around the stack pointer the
 * program started with, found with mincore, which fails on a page that
 * is not mapped: up from it, and down to the gap the kernel keeps below
 * a stack. Steps double, then halve: some twenty calls. 0, or -1. */
static int main_stack(uintptr_t *lo, uintptr_t *hi)
{
	size_t page = MB_PAGE_SIZE;
	uintptr_t at = (uintptr_t)__libc_stack_end & ~(uintptr_t)(page - 1);
	if (!at || !mapped(at, at + page))
		return -1;
	uintptr_t top = at + page, bottom = at;
	size_t step = page;
	while (top + step > top && mapped(top, top + step)) {
		top += step;
		step *= 2;
	}
	for (; step > page; step /= 2)
		if (mapped(top, top + step / 2))
			top += step / 2;
	step = page;
	while (bottom >= step && mapped(bottom - step, bottom)) {
		bottom -= step;
		step *= 2;
	}
	for (; step > page; step /= 2)
		if (bottom >= step / 2 && mapped(bottom - step / 2, bottom))
			bottom -= step / 2;
	*lo = bottom;
	*hi = top;
	return 0;
}

/* The account's parts outside the heap from r and mincore; the heap
 * region's resident bytes counted apart from the walk, which they should
 * equal. */
static void account_by_rollup(struct mb_account *a, const struct ours *o, const struct rollup *r)
{
	const struct mb_buddy *b = &mb_heap.buddy;
	size_t used = __atomic_load_n(&b->pb_high, __ATOMIC_RELAXED) << (b->pb_order + MB_PAGE_SHIFT);
	int64_t n = resident_bytes(o->heap_lo, o->heap_lo + used);
	a->heap_rss = n > 0 ? (uint64_t)n : 0;
	for (size_t i = 0; i < o->n; i++) {
		if (o->m[i].lo < o->heap_hi && o->m[i].hi > o->heap_lo)
			continue;
		uintptr_t lo[3] = { o->m[i].lo }, hi[3] = { o->m[i].hi };
		int spans = 1;
		if (o->m[i].lo == (uintptr_t)b->meta_base)
			spans = mb_buddy_meta_spans(b, lo, hi);
		for (int k = 0; k < spans; k++) {
			/* -1: unmapped meanwhile (a table that grew): nothing */
			n = resident_bytes(lo[k], hi[k]);
			if (n > 0) {
				a->meta_rss += (uint64_t)n;
				a->meta_use[o->m[i].use] += (uint64_t)n;
			}
		}
	}
	uintptr_t lo, hi;
	if (main_stack(&lo, &hi) == 0 && (n = resident_bytes(lo, hi)) > 0)
		a->stack_rss = (uint64_t)n;
	a->file_rss = r->rss > r->anon ? r->rss - r->anon : 0;
	uint64_t ours = a->heap_rss + a->meta_rss + a->stack_rss;
	a->anon_rss = r->anon > ours ? r->anon - ours : 0;
}

/* ---- the heap region, page by page ---- */

struct walk {
	struct mb_account *a;
	uint64_t small_live[MB_NKEYS][MB_NCLASSES];
	unsigned char vec[1u << (MB_MAX_ORDER_MAX - 1)]; /* mincore of one pageblock */
	size_t vec_pb;                                   /* the pageblock vec holds */
	uint64_t walked;
};

static int resident(struct walk *w, const struct mb_buddy *b, size_t idx)
{
	size_t pb = idx >> b->pb_order;
	if (pb != w->vec_pb) {
		w->vec_pb = pb;
		if (mincore(mb_buddy_page_addr(b, pb << b->pb_order), b->pb_pages << MB_PAGE_SHIFT, w->vec) != 0)
			memset(w->vec, 1, b->pb_pages); /* cannot tell: counted */
	}
	return w->vec[idx & (b->pb_pages - 1)] & 1;
}

/* Free objects among [a, z] of s; of them, in the owner's thread cache
 * in *cached. */
static unsigned count_free(const struct mb_slab *s, uint32_t a, uint32_t z, unsigned *cached)
{
	unsigned n = 0;
	*cached = 0;
	for (uint32_t k = a >> 6; k <= z >> 6; k++) {
		uint64_t c = mb_word_load(&s->w[k].cached);
		uint64_t bits = mb_word_load(&s->w[k].free) | c | __atomic_load_n(&s->remote[k], __ATOMIC_RELAXED);
		uint64_t lo = k == a >> 6 ? ~(uint64_t)0 << (a & 63) : ~(uint64_t)0;
		uint64_t hi = k == z >> 6 ? ~(uint64_t)0 >> (63 - (z & 63)) : ~(uint64_t)0;
		n += (unsigned)__builtin_popcountll(bits & lo & hi);
		*cached += (unsigned)__builtin_popcountll(c & lo & hi);
	}
	return n;
}

static enum mb_account_where where_of(const struct mb_slab *s)
{
	switch (__atomic_load_n(&s->list, __ATOMIC_RELAXED)) {
	case MB_SLAB_CURRENT: return MB_ACC_CURRENT;
	case MB_SLAB_FULL: return MB_ACC_FULL;
	case MB_SLAB_ABANDONED: return MB_ACC_ABANDONED;
	default: return MB_ACC_PARTIAL;
	}
}

/* One resident page of slab s: its bytes as live objects, free objects
 * and tail. */
static void slab_page(struct walk *w, const struct mb_slab *s, uint32_t pg)
{
	struct mb_account *a = w->a;
	uint64_t pstart = (uint64_t)pg << MB_PAGE_SHIFT, pend = pstart + MB_PAGE_SIZE;
	uint64_t end_objs = (uint64_t)s->nobj * s->size;
	uint64_t free_bytes = 0, live_bytes = 0, cached_bytes = 0;
	if (pstart < end_objs) {
		uint32_t first = (uint32_t)(pstart / s->size);
		uint32_t last = (uint32_t)(((pend < end_objs ? pend : end_objs) - 1) / s->size);
		/* The objects wholly inside the page by counting; the two that
		 * straddle its edges by their share. */
		for (uint32_t i = first; i <= last; i++) {
			uint64_t os = (uint64_t)i * s->size, oe = os + s->size;
			if (os >= pstart && oe <= pend && i != first && i != last)
				continue;
			uint64_t part = (oe < pend ? oe : pend) - (os > pstart ? os : pstart);
			if (mb_slab_is_free(s, i)) {
				free_bytes += part;
				if (mb_slab_is_cached(s, i))
					cached_bytes += part;
			} else {
				live_bytes += part;
			}
		}
		if (last > first + 1) {
			unsigned cached, f = count_free(s, first + 1, last - 1, &cached);
			free_bytes += (uint64_t)f * s->size;
			cached_bytes += (uint64_t)cached * s->size;
			live_bytes += (uint64_t)(last - first - 1 - f) * s->size;
		}
	}
	uint64_t tail = MB_PAGE_SIZE - free_bytes - live_bytes;
	int type = mb_key_type(s->key);
	a->slab_free += free_bytes;
	a->slab_free_where[where_of(s)] += free_bytes - cached_bytes;
	a->slab_free_where[MB_ACC_CACHED] += cached_bytes;
	a->slab_free_type[type] += free_bytes;
	a->slab_free_class[s->sclass] += free_bytes;
	a->slab_tail += tail;
	w->small_live[s->key & MB_KEY_MASK][s->sclass] += live_bytes;
}

/* The resident pages of the allocation whose head is idx. */
static void allocation(struct walk *w, const struct mb_buddy *b, size_t idx)
{
	const struct mb_page *m = &b->pages[idx];
	struct mb_account *a = w->a;
	size_t np = m->npages;
	if (m->kind == MB_KIND_SLAB) {
		const struct mb_slab *s = m->user.ptr;
		for (size_t i = 0; i < np; i++)
			if (resident(w, b, idx + i)) {
				slab_page(w, s, (uint32_t)i);
				w->walked += MB_PAGE_SIZE;
			}
		return;
	}
	int cached = m->kind == MB_KIND_LARGE && (__atomic_load_n(&m->user16, __ATOMIC_RELAXED) & MB_LARGE_CACHED);
	uint64_t req = m->kind == MB_KIND_LARGE && !cached ? m->user.u64 : 0;
	for (size_t i = 0; i < np; i++) {
		if (!resident(w, b, idx + i))
			continue;
		w->walked += MB_PAGE_SIZE;
		if (cached || m->kind != MB_KIND_LARGE) {
			/* A run a thread keeps for its next allocation (or a
			 * record not yet written: taken for one). */
			a->run_cache += MB_PAGE_SIZE;
			continue;
		}
		uint64_t off = (uint64_t)i << MB_PAGE_SHIFT;
		uint64_t asked = req > off ? (req - off < MB_PAGE_SIZE ? req - off : MB_PAGE_SIZE) : 0;
		a->large_requested += asked;
		a->large_rounding += MB_PAGE_SIZE - asked;
	}
}

/* Free pages [idx, idx + n) still resident. */
static void free_range(struct walk *w, const struct mb_buddy *b, size_t idx, size_t n)
{
	int owner = mb_buddy_pb_type(b, idx >> b->pb_order);
	int t = owner == MB_PB_GLOBAL ? MB_NTYPES : owner;
	for (size_t i = 0; i < n; i++)
		if (resident(w, b, idx + i)) {
			w->a->free_pages += MB_PAGE_SIZE;
			w->a->free_pages_type[t] += MB_PAGE_SIZE;
			w->walked += MB_PAGE_SIZE;
		}
}

/* With the heap lock held. */
static void walk_heap(struct walk *w)
{
	const struct mb_buddy *b = &mb_heap.buddy;
	w->vec_pb = SIZE_MAX;
	size_t end = b->pb_high << b->pb_order;
	size_t idx = 0;
	while (idx < end) {
		size_t pb = idx >> b->pb_order;
		if (mb_buddy_pb_type(b, pb) == MB_PB_GLOBAL) {
			free_range(w, b, idx, b->pb_pages);
			idx += b->pb_pages;
			continue;
		}
		const struct mb_page *m = &b->pages[idx];
		if (m->state == MB_PG_ALLOC) {
			allocation(w, b, idx);
			idx += m->npages ? m->npages : 1;
		} else if (m->state == MB_PG_FREE || m->state == MB_PG_PURGING) {
			size_t n = (size_t)1 << m->order;
			free_range(w, b, idx, n);
			idx += n;
		} else {
			/* A page the walk cannot place (it follows a record the
			 * checker would reject): counted as free, looked at
			 * one page at a time. */
			free_range(w, b, idx, 1);
			idx++;
		}
	}
}

/* The bytes asked for of the small objects found live, per key and class:
 * their share of each class's usable bytes, as in every allocation. */
static void small_requested(struct walk *w)
{
	static struct mb_class_counts cc; /* under the account lock */
	mb_theap_sum_classes(&cc);
	struct mb_account *a = w->a;
	for (int k = 0; k < MB_NKEYS; k++)
		for (unsigned c = 0; c < MB_NCLASSES; c++) {
			uint64_t live = w->small_live[k][c];
			if (!live)
				continue;
			uint64_t usable = cc.nalloc[k][c] * mb_classes[c].size;
			uint64_t asked = usable ? (uint64_t)((double)live * ((double)cc.req[k][c] / (double)usable)) : live;
			if (asked > live)
				asked = live;
			a->small_requested += asked;
			a->small_rounding += live - asked;
		}
}

/* An object the walk counted as live that is free: from the live bytes of
 * its key and class to the free bytes of `where`. Its class and key from
 * its page record: its slab may be gone by now. */
static void freed_object(struct walk *w, const void *p, int where)
{
	const struct mb_buddy *b = &mb_heap.buddy;
	size_t idx = mb_buddy_page_index(b, p);
	if (idx >= b->npages)
		return;
	const struct mb_page *m = &b->pages[idx];
	if (m->kind != MB_KIND_SLAB)
		return;
	unsigned c = m->sclass;
	int key = mb_slab_tag_key(__atomic_load_n(&m->user32, __ATOMIC_RELAXED));
	uint64_t size = mb_classes[c].size, *live = &w->small_live[key & MB_KEY_MASK][c];
	if (*live < size)
		return;
	*live -= size;
	struct mb_account *a = w->a;
	a->slab_free += size;
	a->slab_free_where[where] += size;
	a->slab_free_type[mb_key_type(key)] += size;
	a->slab_free_class[c] += size;
}

/* A hot object of a thread cache (theap.h): freed and cached, though its
 * slab counts it as live. */
static void hot_object(void *ctx, const void *p)
{
	freed_object(ctx, p, MB_ACC_CACHED);
}

/* An object another thread freed and posted to its owner (inbox.h),
 * which has not taken it yet: live in its slab. */
static void posted_object(void *ctx, const void *p)
{
	freed_object(ctx, p, MB_ACC_FULL);
}

/* One account at a time: the walk's buffers are static. */
static struct mb_lock account_lock = MB_LOCK_INITIALIZER("account");
static struct walk the_walk;
static struct ours the_ours;

int mb_account_take(struct mb_account *a)
{
	return mb_account_take_by(a, MB_ACCOUNT_CHEAPEST);
}

int mb_account_take_by(struct mb_account *a, int how)
{
	memset(a, 0, sizeof(*a));
	mb_lock_acquire(&account_lock);
	mb_purge_pause();
	struct walk *w = &the_walk;
	memset(w->small_live, 0, sizeof w->small_live);
	w->a = a;
	w->walked = 0;
	mb_heap_lock();
	walk_heap(w);
	mb_heap_unlock();
	mb_theap_hot_each(hot_object, w);
	mb_theap_posted_each(posted_object, w);
	small_requested(w);
	a->heap_walked = w->walked;

	struct ours *o = &the_ours;
	size_t lost;
	o->n = mb_os_mappings(o->m, MAX_OURS, &lost);
	o->heap_lo = mb_heap.buddy.base;
	o->heap_hi = mb_heap.buddy.base + mb_heap.region_bytes;
	a->mappings_unknown = lost;
	struct rollup r;
	int rc = 0;
	/* mincore counts the heap's pages where they are the system's. */
	if (how == MB_ACCOUNT_CHEAPEST && mb_os_page_size() == MB_PAGE_SIZE && read_rollup(&r) == 0 &&
	    r.anon_huge == 0) {
		account_by_rollup(a, o, &r);
	} else {
		a->by_mapping = 1;
		rc = read_smaps(a, o);
	}
	a->rss = mb_read_rss();
	mb_purge_resume();
	mb_lock_release(&account_lock);
	a->taken_ms = mb_now_ms();
	return rc;
}

/* ---- the peak ---- */

static struct mb_account peak;
static int have_peak;
static uint64_t next_look_ms, peak_rss_seen;
static struct mb_lock peak_lock = MB_LOCK_INITIALIZER("account_peak");

#define PEAK_LOOK_MS 10
#define PEAK_STEP(r) ((r) + (r) / 10)
#define PEAK_MIN ((uint64_t)4 << 20)
/* No look before the process has lived this long: a short process's
 * resident set only grows as it loads and runs, so the report's account
 * at exit is its peak, and each account taken meanwhile (a walk of the
 * heap, and /proc/self/smaps, which makes the kernel walk every page
 * table) would be a tenth of its run. */
#define PEAK_FIRST_MS 50
/* After an account, the next look waits mb_cost_wait_ms() of it: the
 * peak's accounts take at most 2% of the run, however large the process. */

void mb_account_watch_peak(void)
{
	if (!mb_opt.stats)
		return;
	uint64_t now = mb_now_ms();
	if (now < __atomic_load_n(&next_look_ms, __ATOMIC_RELAXED) || now - mb_heap.started_ms < PEAK_FIRST_MS ||
	    mb_lock_try(&peak_lock) != 0)
		return;
	__atomic_store_n(&next_look_ms, now + PEAK_LOOK_MS, __ATOMIC_RELAXED);
	uint64_t start_us = mb_now_us();
	uint64_t rss = mb_read_rss();
	if (rss >= PEAK_MIN && rss > PEAK_STEP(peak_rss_seen)) {
		static struct mb_account a; /* under peak_lock */
		if (mb_account_take(&a) == 0) {
			peak = a;
			have_peak = 1;
			peak_rss_seen = a.rss;
		}
		uint64_t wait = mb_cost_wait_ms(mb_now_us() - start_us);
		if (wait > PEAK_LOOK_MS)
			__atomic_store_n(&next_look_ms, mb_now_ms() + wait, __ATOMIC_RELAXED);
	}
	mb_lock_release(&peak_lock);
}

/* Fork: an account in progress in another thread would leave its locks
 * held in the child. Outermost of all the allocator's locks. */
void mb_account_fork_prepare(void)
{
	mb_lock_acquire(&peak_lock);
	mb_lock_acquire(&account_lock);
}

void mb_account_fork_parent(void)
{
	mb_lock_release(&account_lock);
	mb_lock_release(&peak_lock);
}

void mb_account_fork_child(void)
{
	mb_lock_after_fork_child(&account_lock, 0);
	mb_lock_after_fork_child(&peak_lock, 0);
}

int mb_account_at_peak(struct mb_account *a)
{
	mb_lock_acquire(&peak_lock);
	int ok = have_peak;
	if (ok)
		*a = peak;
	mb_lock_release(&peak_lock);
	return ok ? 0 : -1;
}
