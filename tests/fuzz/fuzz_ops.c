/* libFuzzer target: the input is a program of malloc-level operations run
 * against the libmbuddy core (linked in directly, no preload) on a table of
 * 256 slots. Each operation is an op byte (operation, and a reclaim type),
 * a slot byte and its arguments: mb_malloc with the default type or any of
 * the three, calloc (and calloc overflow), realloc (to any size, growing,
 * shrinking, from NULL, to 0), memalign at alignments from 1 B to 64 MiB and
 * absurd ones, free, free of a range of slots, usable size, mb_trim, bursts
 * of same-size allocations, a heap check, and arming an injected mmap or
 * madvise failure (mb_os_inject_fault). Sizes cover the slab classes and
 * their edges, page objects, multi-pageblock runs, more than the heap and
 * SIZE_MAX. After every step the result is checked against a shadow model:
 *
 *  - every live object holds its slot's byte pattern (written over its whole
 *    usable size; objects above 64 KiB are sampled: the first 128 bytes of
 *    each page and the last 128 bytes), so contents survive realloc and no
 *    other operation writes into a live object;
 *  - calloc memory reads as zero; results are aligned (16 bytes, or the
 *    memalign alignment) and lie inside the heap region;
 *  - usable size >= request (page-rounded for page objects), stable while
 *    the object lives;
 *  - no two live objects overlap (interval check over usable sizes);
 *  - every NULL comes with errno == ENOMEM, and a failed realloc leaves the
 *    block alone; a request that fits in one pageblock does not fail while
 *    a pageblock is in the global pool (unless a fault was armed); free
 *    preserves errno;
 *  - every 64 operations and at the end of each input, mb_buddy_check() under
 *    the heap lock, plus the page record of every live object (slab state
 *    byte, or head page and length);
 *  - at the end of each input everything is freed and mb_trim() called: every
 *    pageblock must be back in the global pool (nothing leaked), released to
 *    the kernel, and the byte counters back to zero.
 *
 * The heap is small (MBUDDY_HEAP_SIZE=64M, 16 pageblocks of 4 MiB) and
 * MBUDDY_DECAY_MS=0, so exhaustion and purging happen all the time. These
 * two are set only when absent from the environment, so a run can choose
 * others, and MBUDDY_MAX_ORDER or MBUDDY_CHECK=1 (canaries) too. If the heap
 * was already initialised when the fuzzer starts (by a constructor), the
 * program sets them and executes itself again.
 *
 * FUZZ_OPS_LAX (see below) steps over known bugs to keep fuzzing past them.
 *
 * Build: tests/fuzz/build-fuzzer.sh, `make fuzz-build` or `make fuzz`:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I<builddir> -Isrc \
 *         -Iinclude src/[every core source].c tests/fuzz/fuzz_ops.c \
 *         -lunwind -lpthread -ldl
 * The core takes its memory with mmap, so AddressSanitizer sees it as
 * ordinary addressable memory and never reports on it; the harness's own
 * bookkeeping is static. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "buddy.h"
#include "heap.h"
#include "init.h"
#include "large.h"
#include "canary.h"
#include "options.h"
#include "region.h"
#include "slab.h"
#include "theap.h"

#define NSLOTS 256
#define FULL_LIMIT ((size_t)64 << 10) /* objects up to this are filled whole */
#define SAMPLE 128                    /* bytes sampled per page above that */
#define CHECK_EVERY 64
#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* Whole-heap loops of the harness need no coverage feedback. */
#if defined(__clang__) && __clang_major__ >= 13
#define NOCOV __attribute__((no_sanitize("coverage")))
#else
#define NOCOV
#endif

struct slot {
	unsigned char *p;
	size_t req;    /* bytes asked for */
	size_t usable; /* mb_usable_size() when allocated */
	size_t align;  /* alignment promised */
	uint8_t tag;
};

static struct slot slots[NSLOTS];
static unsigned long op_count;
static unsigned long inputs;
static const char *cur_op = "start";

/* ---- failure reporting ---- */

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "fuzz_ops: FAILED in %s (op %lu of input %lu): ", cur_op, op_count, inputs);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

#define REQUIRE(cond, ...)                                                   \
	do {                                                                 \
		if (!(cond))                                                 \
			fail(__VA_ARGS__);                                   \
	} while (0)

/* ---- patterns ----
 * Byte i of an object with tag t is ptab[(i + t * 257) % PERIOD]: a random
 * table whose period is prime, so no copy shifted by whole pages or by a
 * slab object size matches. Fills and checks are memcpy/memcmp of table
 * runs. */

#define PERIOD 65521
static uint8_t ptab[PERIOD + 65536];
static const uint8_t zeros[65536];

static void pat_init(void)
{
	uint64_t x = 0x9E3779B97F4A7C15ULL;
	for (size_t i = 0; i < PERIOD; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		ptab[i] = (uint8_t)(x >> 32);
	}
	/* the tail repeats the head, so any run of up to 64 KiB is contiguous */
	for (size_t i = PERIOD; i < sizeof ptab; i++)
		ptab[i] = ptab[i - PERIOD];
}

static inline uint8_t pat(uint8_t tag, size_t i)
{
	return ptab[(i + (size_t)tag * 257) % PERIOD];
}

static void fill_range(unsigned char *p, uint8_t tag, size_t lo, size_t hi)
{
	while (lo < hi) {
		size_t k = hi - lo < 65536 ? hi - lo : 65536;
		memcpy(p + lo, ptab + (lo + (size_t)tag * 257) % PERIOD, k);
		lo += k;
	}
}

/* Offset of the first byte in [lo, hi) that differs from the pattern (or
 * from zero when zero is set), or hi. */
static size_t scan_range(const unsigned char *p, uint8_t tag, size_t lo, size_t hi, int zero)
{
	while (lo < hi) {
		size_t k = hi - lo < 65536 ? hi - lo : 65536;
		const uint8_t *want = zero ? zeros : ptab + (lo + (size_t)tag * 257) % PERIOD;
		if (memcmp(p + lo, want, k) != 0) {
			for (size_t i = 0; i < k; i++)
				if (p[lo + i] != want[i])
					return lo + i;
		}
		lo += k;
	}
	return hi;
}

/* Fill [lo, hi) (mode 0) or verify it (1 pattern, 2 zero); returns the
 * first bad offset or SIZE_MAX. */
static size_t range_op(unsigned char *p, uint8_t tag, size_t lo, size_t hi, int mode)
{
	if (mode == 0) {
		fill_range(p, tag, lo, hi);
		return SIZE_MAX;
	}
	size_t bad = scan_range(p, tag, lo, hi, mode == 2);
	return bad < hi ? bad : SIZE_MAX;
}

/* Walk the ranges an object of `len` bytes is filled over, clipped to
 * [0, limit): the whole object when small, else the start of every page
 * and the tail. Returns the first bad offset or SIZE_MAX. */
static size_t walk(unsigned char *p, uint8_t tag, size_t len, size_t limit, int mode)
{
	/* mode: 0 fill, 1 verify pattern, 2 verify zero */
	if (limit > len)
		limit = len;
	if (len <= FULL_LIMIT)
		return range_op(p, tag, 0, limit, mode);
	for (size_t o = 0;; o += MB_PAGE_SIZE) {
		size_t lo = o, hi = o + SAMPLE;
		int last = 0;
		if (hi >= len - SAMPLE) { /* the page runs into the tail */
			hi = len;
			last = 1;
		}
		if (lo > limit)
			break;
		if (hi > limit)
			hi = limit;
		size_t bad = range_op(p, tag, lo, hi, mode);
		if (bad != SIZE_MAX)
			return bad;
		if (last)
			break;
	}
	/* The tail, when it does not follow a page start directly. */
	size_t lo = len - SAMPLE, hi = limit;
	return lo < hi ? range_op(p, tag, lo, hi, mode) : SIZE_MAX;
}

static void verify_slot(const struct slot *s, size_t limit, const char *when)
{
	size_t bad = walk(s->p, s->tag, s->usable, limit, 1);
	REQUIRE(bad == SIZE_MAX,
		"%s: object %p (%zu bytes asked, %zu usable, slot %td) corrupted at offset %zu: 0x%02x, expected 0x%02x",
		when, (void *)s->p, s->req, s->usable, s - slots, bad, s->p[bad], pat(s->tag, bad));
}

/* ---- the shadow model ---- */

/* Set once a fault was armed in this input: from then on, failures of
 * requests that should have fitted are excused. */
static int fuzz_fault_armed;

/* Known bugs can be stepped over to keep fuzzing, with words in the
 * environment variable FUZZ_OPS_LAX:
 *   slabdirty  the head page of a slab whose idle pages were purged may be
 *              clean, which mb_buddy_check() rejects ("allocated page N is
 *              not marked dirty"): such pages are marked dirty for the
 *              duration of the check. */
static int lax_slabdirty;

/* Bytes of canary after every object (MBUDDY_CHECK=1), 0 without. */
static size_t extra;
#define PGF_LAX 0x80 /* a flag bit the buddy does not use */

static size_t free_global(void)
{
	mb_heap_lock();
	size_t n = mb_heap.buddy.nr_global;
	mb_heap_unlock();
	return n;
}

static void check_overlap(const struct slot *s)
{
	uintptr_t a = (uintptr_t)s->p, ae = a + s->usable;
	for (int i = 0; i < NSLOTS; i++) {
		const struct slot *o = &slots[i];
		if (o == s || !o->p)
			continue;
		uintptr_t b = (uintptr_t)o->p, be = b + o->usable;
		REQUIRE(ae <= b || be <= a, "object %p+%zu (slot %td) overlaps live object %p+%zu (slot %d)",
			(void *)s->p, s->usable, s - slots, (void *)o->p, o->usable, i);
	}
}

/* A fresh result for slot s of n bytes: check it and fill it. */
static void adopt(struct slot *s, void *p, size_t n, size_t align, int zeroed, uint8_t tag)
{
	struct mb_buddy *b = &mb_heap.buddy;
	REQUIRE(mb_buddy_contains(b, p), "%p is outside the heap region", p);
	REQUIRE(((uintptr_t)p & (MB_ALIGNMENT - 1)) == 0, "%p is not %d-byte aligned", p, MB_ALIGNMENT);
	REQUIRE(align <= 1 || ((uintptr_t)p & (align - 1)) == 0, "%p is not aligned to %zu", p, align);
	size_t u = mb_usable_size(p, "fuzz");
	REQUIRE(u >= n, "usable size %zu of %p is below the %zu bytes asked", u, p, n);
	REQUIRE((uintptr_t)p + u <= b->base + mb_heap.region_bytes, "%p+%zu runs past the heap region", p, u);
	/* With MBUDDY_CHECK=1 every request is `extra` bytes longer and the
	 * usable size as many bytes shorter (the canary). */
	size_t raw_n = n + extra, raw_u = u + extra;
	if (raw_n > MB_SMALL_MAX)
		REQUIRE(raw_u == ((raw_n + MB_PAGE_SIZE - 1) & ~(MB_PAGE_SIZE - 1)),
			"large object %p of %zu bytes has usable size %zu", p, n, u);
	else if (raw_u > MB_SMALL_MAX) /* only an aligned request becomes a page object */
		REQUIRE(align > 1 && ((uintptr_t)p & (MB_PAGE_SIZE - 1)) == 0 && (raw_u & (MB_PAGE_SIZE - 1)) == 0,
			"small request %p of %zu bytes has usable size %zu", p, n, u);
	s->p = p;
	s->req = n;
	s->usable = u;
	s->align = align;
	s->tag = tag;
	check_overlap(s);
	if (zeroed) {
		/* calloc clears the whole usable size, as glibc the whole chunk */
		size_t z = u;
		size_t bad = walk(s->p, 0, z, z, 2);
		REQUIRE(bad == SIZE_MAX, "calloc(%zu) = %p: byte %zu is 0x%02x, not zero", n, p, bad, s->p[bad]);
	}
	walk(s->p, tag, u, u, 0);
}

static void release_slot(struct slot *s)
{
	if (!s->p)
		return;
	verify_slot(s, s->usable, "before free");
	REQUIRE(mb_usable_size(s->p, "fuzz") == s->usable, "usable size of %p changed from %zu", (void *)s->p,
		s->usable);
	errno = 4242;
	mb_free(s->p, "free");
	REQUIRE(errno == 4242, "free(%p) changed errno to %d", (void *)s->p, errno);
	memset(s, 0, sizeof(*s));
}

/* Would a request of n bytes at alignment align certainly succeed now? A
 * request within one pageblock cannot fail while the global pool has one,
 * unless a fault was injected. */
static int must_fit(size_t n, size_t align, size_t nr_global)
{
	size_t pb = mb_heap.buddy.pb_pages << MB_PAGE_SHIFT;
	return nr_global > 0 && !fuzz_fault_armed && n <= pb - extra && align <= pb;
}

static void null_result(size_t n, size_t align, size_t nr_global, const char *what)
{
	REQUIRE(errno == ENOMEM, "%s(%zu, align %zu) returned NULL with errno %d", what, n, align, errno);
	REQUIRE(!must_fit(n, align, nr_global), "%s(%zu, align %zu) failed with %zu global pageblocks free",
		what, n, align, nr_global);
}

/* ---- heap-wide checks ---- */

NOCOV static void check_heap(const char *when, int contents)
{
	char err[512];
	struct mb_buddy *b = &mb_heap.buddy;
	mb_heap_lock();
	if (lax_slabdirty)
		for (size_t i = 0; i < b->npages; i++) {
			struct mb_page *m = &b->pages[i];
			if (m->state == MB_PG_ALLOC && m->kind == MB_KIND_SLAB && !(m->flags & MB_PGF_DIRTY))
				m->flags |= MB_PGF_DIRTY | PGF_LAX;
		}
	int rc = mb_buddy_check(b, err, sizeof err);
	if (lax_slabdirty)
		for (size_t i = 0; i < b->npages; i++) {
			struct mb_page *m = &b->pages[i];
			if (m->flags & PGF_LAX)
				m->flags &= (uint8_t)~(MB_PGF_DIRTY | PGF_LAX);
		}
	if (rc == 0) {
		for (int i = 0; i < NSLOTS; i++) {
			struct slot *s = &slots[i];
			if (!s->p)
				continue;
			size_t idx = mb_buddy_page_index(b, s->p);
			struct mb_page *m = &b->pages[idx];
			int pbt = mb_buddy_pb_type(b, idx >> b->pb_order);
			if (pbt == MB_PB_GLOBAL) {
				snprintf(err, sizeof err, "live object %p lies in a global pageblock", (void *)s->p);
				rc = -1;
			} else if (m->kind == MB_KIND_SLAB) {
				struct mb_slab *sl = mb_slab_of_page(m);
				long k = sl ? mb_slab_index(sl, s->p) : -1;
				if (k < 0 || mb_slab_is_free(sl, (uint32_t)k) || sl->size != s->usable + extra) {
					snprintf(err, sizeof err, "live small object %p: slab record disagrees", (void *)s->p);
					rc = -1;
				}
			} else if (m->kind == MB_KIND_LARGE) {
				if (m->state != MB_PG_ALLOC || mb_large_pages(m) << MB_PAGE_SHIFT != s->usable + extra) {
					snprintf(err, sizeof err, "live large object %p: head page state %u, %zu of %u pages",
						 (void *)s->p, m->state, mb_large_pages(m), m->npages);
					rc = -1;
				}
			} else {
				snprintf(err, sizeof err, "live object %p: page kind %u", (void *)s->p, m->kind);
				rc = -1;
			}
			if (rc)
				break;
		}
	}
	mb_heap_unlock();
	REQUIRE(rc == 0, "%s: heap check: %s", when, err);
	for (int i = 0; contents && i < NSLOTS; i++)
		if (slots[i].p)
			verify_slot(&slots[i], slots[i].usable, when);
}

/* ---- reading the input ---- */

struct input {
	const uint8_t *p;
	size_t n;
};

static uint8_t u8(struct input *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

static uint32_t u16(struct input *in)
{
	uint32_t v = u8(in);
	return v | (uint32_t)u8(in) << 8;
}

static uint32_t u32(struct input *in)
{
	uint32_t v = u16(in);
	return v | u16(in) << 16;
}

static size_t gen_size(struct input *in)
{
	static const size_t edges[] = {
		0, 1, 8, 15, 16, 17, 31, 32, 48, 64, 100, 127, 128, 129, 160, 255, 256, 257,
		1000, 1024, 2048, 4095, 4096, 4097, 8191, 8192, 12288, 16383, 16384, 16385,
		20480, 32768, 65535, 65536, 65537, 131072, 1 * MiB, 2 * MiB - 1, 2 * MiB,
		4 * MiB - 4096, 4 * MiB - 1, 4 * MiB, 4 * MiB + 1, 4 * MiB + 4096, 8 * MiB,
		12 * MiB, 12 * MiB + 1, 16 * MiB, 32 * MiB, 60 * MiB,
	};
	uint8_t sel = u8(in);
	if (sel < 96)
		return u8(in) % 129;
	if (sel < 160)
		return u16(in) % (MB_SMALL_MAX + 1);
	if (sel < 184)
		return edges[u8(in) % (sizeof edges / sizeof edges[0])];
	if (sel < 224)
		return MB_SMALL_MAX + 1 + u32(in) % (1 * MiB);
	if (sel < 246)
		return 1 * MiB + u32(in) % (5 * MiB);
	if (sel < 252)
		return 6 * MiB + u32(in) % (30 * MiB);
	if (sel < 254)
		return mb_heap.region_bytes - 4096 + u16(in) % 8192;
	return SIZE_MAX - u16(in);
}

static size_t gen_align(struct input *in)
{
	uint8_t v = u8(in);
	if (v == 255)
		return (size_t)1 << 63;
	if (v == 254)
		return (size_t)1 << 40;
	return (size_t)1 << (v % 27); /* 1 B .. 64 MiB */
}

/* ---- operations ---- */

enum {
	OP_MALLOC,       /* mb_malloc, the default type */
	OP_TYPED,        /* mb_malloc with the type in the op byte */
	OP_CALLOC,
	OP_REALLOC,
	OP_MEMALIGN,
	OP_FREE,
	OP_USABLE,
	OP_TRIM,
	OP_GROW,         /* realloc to a larger size, close to the old one */
	OP_SHRINK,       /* realloc to a smaller size */
	OP_FREE_RANGE,
	OP_CHECK,
	OP_FAULT,
	OP_BURST,        /* many same-size allocations */
	OP_CALLOC_OVF,
	OP_REALLOC_NULL, /* realloc(NULL, n) and realloc(p, 0) */
	NOPS
};

static const char *const op_names[NOPS] = {
	"malloc", "typed malloc", "calloc", "realloc", "memalign", "free", "usable size", "trim",
	"realloc grow", "realloc shrink", "free range", "check", "fault", "burst", "calloc overflow",
	"realloc null/zero",
};

static void do_alloc(struct slot *s, int kind, size_t n, size_t align, int type, uint8_t tag)
{
	release_slot(s);
	size_t nr_global = free_global();
	unsigned long f0 = mb_os_faults_injected(MB_FAULT_RESERVE);
	void *p;
	errno = 0;
	switch (kind) {
	case OP_CALLOC:
		p = mb_calloc(1, n, type);
		break;
	case OP_MEMALIGN:
		p = mb_memalign(align, n, type);
		break;
	default:
		p = mb_malloc(n, type);
		break;
	}
	if (!p) {
		if (mb_os_faults_injected(MB_FAULT_RESERVE) != f0)
			REQUIRE(errno == ENOMEM, "NULL with errno %d after an injected mmap failure", errno);
		else
			null_result(n, kind == OP_MEMALIGN ? align : 0, nr_global, op_names[kind]);
		return;
	}
	adopt(s, p, n, kind == OP_MEMALIGN ? align : 0, kind == OP_CALLOC, tag);
}

static void do_realloc(struct slot *s, size_t n, int type, uint8_t tag)
{
	if (!s->p) {
		do_alloc(s, OP_MALLOC, n, 0, type, tag);
		return;
	}
	verify_slot(s, s->usable, "before realloc");
	struct slot old = *s;
	size_t nr_global = free_global();
	errno = 0;
	void *p = mb_realloc(s->p, n, type, "realloc");
	if (n == 0) {
		REQUIRE(p == NULL, "realloc(p, 0) returned %p", p);
		memset(s, 0, sizeof(*s));
		return;
	}
	if (!p) {
		/* The old block is untouched and still owned. */
		null_result(n, 0, nr_global, "realloc");
		verify_slot(s, s->usable, "after failed realloc");
		REQUIRE(mb_usable_size(s->p, "fuzz") == s->usable, "failed realloc changed the usable size");
		return;
	}
	memset(s, 0, sizeof(*s));
	struct mb_buddy *b = &mb_heap.buddy;
	REQUIRE(mb_buddy_contains(b, p), "realloc result %p is outside the heap", p);
	size_t u = mb_usable_size(p, "fuzz");
	REQUIRE(u >= n, "realloc(%zu) result %p has usable size %zu", n, p, u);
	/* Contents: the old usable bytes up to the new size survive (the old
	 * pattern was written over the old usable size). */
	struct slot moved = old;
	moved.p = p;
	size_t keep = old.usable < n ? old.usable : n;
	size_t bad = walk(moved.p, old.tag, old.usable, keep, 1);
	REQUIRE(bad == SIZE_MAX,
		"realloc(%p, %zu) -> %p lost contents at offset %zu (old size %zu usable %zu): 0x%02x, expected 0x%02x",
		(void *)old.p, n, p, bad, old.req, old.usable, moved.p[bad], pat(old.tag, bad));
	adopt(s, p, n, 0, 0, tag);
}

static void do_op(struct input *in)
{
	uint8_t opb = u8(in);
	unsigned op = opb % NOPS;
	int type = (opb / NOPS) % MB_NTYPES;
	uint8_t idx = u8(in);
	struct slot *s = &slots[idx];
	uint8_t tag = (uint8_t)(op_count * 37 + idx);
	cur_op = op_names[op];

	switch (op) {
	case OP_MALLOC:
		do_alloc(s, OP_MALLOC, gen_size(in), 0, MB_KERNNORCLM, tag);
		break;
	case OP_TYPED:
		do_alloc(s, OP_MALLOC, gen_size(in), 0, type, tag);
		break;
	case OP_CALLOC:
		do_alloc(s, OP_CALLOC, gen_size(in), 0, type, tag);
		break;
	case OP_MEMALIGN: {
		size_t align = gen_align(in);
		do_alloc(s, OP_MEMALIGN, gen_size(in), align, type, tag);
		break;
	}
	case OP_REALLOC:
		do_realloc(s, gen_size(in), type, tag);
		break;
	case OP_GROW: {
		size_t step = u8(in);
		size_t base = s->p ? s->req : gen_size(in);
		size_t n = base + step * (step < 128 ? 16 : 4096);
		do_realloc(s, n ? n : 1, type, tag);
		break;
	}
	case OP_SHRINK: {
		if (!s->p)
			break;
		size_t n = s->req >> (1 + u8(in) % 4);
		do_realloc(s, n ? n : 1, type, tag);
		break;
	}
	case OP_FREE:
		release_slot(s);
		break;
	case OP_USABLE:
		if (s->p) {
			verify_slot(s, s->usable, "usable size");
			REQUIRE(mb_usable_size(s->p, "malloc_usable_size") == s->usable,
				"usable size of %p changed", (void *)s->p);
		}
		REQUIRE(mb_usable_size(NULL, "malloc_usable_size") == 0, "usable size of NULL is not 0");
		break;
	case OP_TRIM:
		mb_trim();
		break;
	case OP_FREE_RANGE: {
		unsigned len = u8(in) % 64 + 1;
		for (unsigned i = 0; i < len; i++)
			release_slot(&slots[(idx + i) % NSLOTS]);
		break;
	}
	case OP_CHECK:
		check_heap("check op", 1);
		break;
	case OP_FAULT: {
		/* Arm one kind of fault: mmap (metadata growth) or madvise
		 * (purge). Only releases are common enough to hit often. */
		int kind = idx & 1 ? MB_FAULT_RESERVE : MB_FAULT_RELEASE;
		long after = u8(in) % 16;
		long count = u8(in) % 8 + 1;
		mb_os_inject_fault(kind, after, count);
		fuzz_fault_armed = 1;
		break;
	}
	case OP_BURST: {
		unsigned len = u8(in) % 32 + 1;
		size_t n = gen_size(in);
		if (n > 256 * KiB)
			n = n % (256 * KiB);
		for (unsigned i = 0; i < len; i++)
			do_alloc(&slots[(idx + i) % NSLOTS], OP_MALLOC, n, 0, type, (uint8_t)(tag + i));
		break;
	}
	case OP_CALLOC_OVF: {
		size_t a = (size_t)1 << (32 + u8(in) % 31), c = (SIZE_MAX / a) + 1 + u8(in);
		errno = 0;
		void *p = mb_calloc(c, a, type);
		REQUIRE(p == NULL && errno == ENOMEM, "calloc(%zu, %zu) = %p, errno %d", c, a, p, errno);
		break;
	}
	case OP_REALLOC_NULL: {
		if (s->p) {
			verify_slot(s, s->usable, "before realloc(p, 0)");
			errno = 0;
			void *p = mb_realloc(s->p, 0, type, "realloc");
			REQUIRE(p == NULL, "realloc(p, 0) = %p", p);
			memset(s, 0, sizeof(*s));
		} else {
			do_realloc(s, gen_size(in), type, tag);
		}
		break;
	}
	}
	op_count++;
	if (op_count % CHECK_EVERY == 0)
		check_heap("periodic", 0);
}

/* Free everything; the heap must hold nothing afterwards. */
static void end_of_input(void)
{
	cur_op = "end of input";
	check_heap("end of input", 1);
	mb_os_inject_fault(MB_FAULT_RESERVE, 0, 0);
	mb_os_inject_fault(MB_FAULT_RELEASE, 0, 0);
	for (int i = 0; i < NSLOTS; i++)
		release_slot(&slots[i]);
	fuzz_fault_armed = 0;
	mb_trim(); /* flushes this thread's cache, purges everything */
	check_heap("after freeing everything", 0);

	struct mb_buddy *b = &mb_heap.buddy;
	mb_heap_lock();
	struct mb_counts c;
	size_t nr_global = b->nr_global, nblocks = b->nblocks, pages = b->pages_allocated, dirty = b->nr_dirty;
	uint64_t slab_pages = mb_heap.slab_pages, large = mb_heap.large_objects;
	mb_theap_sum_counts(&c);
	mb_heap_unlock();
	REQUIRE(pages == 0, "%zu pages still allocated with no live object", pages);
	REQUIRE(slab_pages == 0 && large == 0, "%llu slab pages and %llu large objects left with no live object",
		(unsigned long long)slab_pages, (unsigned long long)large);
	REQUIRE(nr_global == nblocks, "%zu of %zu pageblocks in the global pool after freeing everything", nr_global,
		nblocks);
	REQUIRE(dirty == 0, "%zu pageblocks still resident after a forced trim", dirty);
	REQUIRE(c.alloc_bytes == c.freed_bytes && c.live_requested == 0,
		"byte counters: %llu allocated, %llu freed, %lld requested live, with no live object",
		(unsigned long long)c.alloc_bytes, (unsigned long long)c.freed_bytes, (long long)c.live_requested);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	/* Options are read when the heap initialises, which may already have
	 * happened (a constructor): then set them and start again. */
	static const char *const defaults[][2] = {
		{ "MBUDDY_HEAP_SIZE", "64M" },
		{ "MBUDDY_DECAY_MS", "0" },
		/* No purge thread: its timing would make inputs irreproducible
		 * (the unit tests cover memory in flight). */
		{ "MBUDDY_BACKGROUND", "0" },
	};
	static const char *const unwanted[] = {
		"MBUDDY_STATS", "MBUDDY_PROFILE", "MBUDDY_RULES", "MBUDDY_STATS_SIGNAL", "LD_PRELOAD",
	};
	int changed = 0;
	for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
		if (!getenv(defaults[i][0])) {
			setenv(defaults[i][0], defaults[i][1], 1);
			changed = 1;
		}
	for (size_t i = 0; i < sizeof unwanted / sizeof unwanted[0]; i++)
		if (getenv(unwanted[i])) {
			unsetenv(unwanted[i]);
			changed = 1;
		}
	if (changed && __atomic_load_n(&mb_process_state, __ATOMIC_ACQUIRE) != MB_PROCESS_NEW) {
		execv("/proc/self/exe", *argv);
		perror("fuzz_ops: execv /proc/self/exe");
		abort();
	}
	pat_init();
	const char *lax = getenv("FUZZ_OPS_LAX");
	lax_slabdirty = lax && strstr(lax, "slabdirty");
	if (mb_process_init() != 0) {
		fprintf(stderr, "fuzz_ops: the heap cannot be initialised\n");
		abort();
	}
	extra = mb_opt.check ? MB_CANARY_BYTES : 0;
	fprintf(stderr, "fuzz_ops: heap of %zu MiB, %zu pageblocks of %zu KiB%s%s\n", mb_heap.region_bytes >> 20,
		mb_heap.buddy.nblocks, (mb_heap.buddy.pb_pages << MB_PAGE_SHIFT) >> 10,
		extra ? ", canaries (MBUDDY_CHECK=1)" : "", lax_slabdirty ? ", lax slab dirty check" : "");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	inputs++;
	op_count = 0;
	while (in.n)
		do_op(&in);
	end_of_input();
	return 0;
}
