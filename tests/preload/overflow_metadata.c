/* libmbuddy keeps its metadata out of band (object states, free lists and
 * thread-cache entries live outside user memory), so a heap overflow can
 * clobber only user data, never the allocator's own structures.
 *
 * For several size classes: allocate many objects of the class, free some
 * (into the thread cache and, past its capacity, back to their slabs),
 * then overflow live objects by writing 64 bytes past their end, into free
 * and allocated neighbours alike. The program then "repairs" its own
 * clobbered data and does lots of malloc/calloc/free in that class: every
 * object handed out must be distinct from every live one, never overlap
 * one, calloc must still give zeroes, and nothing may abort or crash.
 * The same is done for page-granular blocks whose next page is another of
 * the test's blocks.
 *
 * Against an allocator with in-band free lists (glibc) this test is
 * expected to crash or abort; that is the point of it. Bookkeeping lives
 * in mmap'd memory so the overflows can only hit the test's own objects. */
#define _GNU_SOURCE 1
#include "ptest.h"

#include <malloc.h>
#include <sys/mman.h>

#define KiB ((size_t)1 << 10)
#define OVERFLOW 64
#define NOBJ 3000
#define CHURN 150000
#define HBITS 19
#define MAXOBJ ((size_t)200000)
#define HSIZE ((size_t)1 << HBITS)

static void *xmap(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	PT_REQUIRE(p != MAP_FAILED, "mmap(%zu)", bytes);
	return p;
}

/* ---- an open-addressing set of addresses (value: slot index + 1) ---- */

struct hset {
	uintptr_t *key;
	uint32_t *val;
	size_t n;
};

static size_t h_hash(uintptr_t k)
{
	return (size_t)((k * 0x9E3779B97F4A7C15ULL) >> (64 - HBITS));
}

static void h_init(struct hset *h)
{
	if (!h->key) {
		h->key = xmap(HSIZE * sizeof *h->key);
		h->val = xmap(HSIZE * sizeof *h->val);
	}
	memset(h->key, 0, HSIZE * sizeof *h->key);
	h->n = 0;
}

static uint32_t h_get(const struct hset *h, uintptr_t k)
{
	for (size_t i = h_hash(k);; i = (i + 1) & (HSIZE - 1)) {
		if (h->key[i] == k)
			return h->val[i];
		if (!h->key[i])
			return 0;
	}
}

static void h_put(struct hset *h, uintptr_t k, uint32_t v)
{
	PT_REQUIRE(h->n < HSIZE / 2, "address set full");
	size_t i = h_hash(k);
	while (h->key[i] && h->key[i] != k)
		i = (i + 1) & (HSIZE - 1);
	if (!h->key[i])
		h->n++;
	h->key[i] = k;
	h->val[i] = v;
}

/* Backward-shift deletion keeps probe chains intact. */
static void h_del(struct hset *h, uintptr_t k)
{
	size_t i = h_hash(k);
	while (h->key[i] != k) {
		if (!h->key[i])
			return;
		i = (i + 1) & (HSIZE - 1);
	}
	h->key[i] = 0;
	h->n--;
	for (size_t j = (i + 1) & (HSIZE - 1); h->key[j]; j = (j + 1) & (HSIZE - 1)) {
		size_t home = h_hash(h->key[j]);
		/* Move j back to i if its home is not in (i, j]. */
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			h->key[i] = h->key[j];
			h->val[i] = h->val[j];
			h->key[j] = 0;
			i = j;
		}
	}
}

/* ---- objects of one class ---- */

struct obj {
	unsigned char *p;
	uint64_t seed;
	int live;
};

static struct obj *objs;    /* every object the test got, live or freed */
static size_t nobjs;
static struct hset all;     /* address -> index+1 in objs, live or freed by the test */
static struct hset live;    /* address -> index+1, live only */
static uint64_t rng = 0xFEEDFACE;

static size_t new_obj(unsigned char *p, size_t size, int zeroed)
{
	PT_REQUIRE(p != NULL, "allocation of %zu bytes failed", size);
	uint32_t prev = h_get(&live, (uintptr_t)p);
	PT_REQUIRE(prev == 0, "the allocator handed out %p, which is live (object %u)", (void *)p, prev - 1);
	if (zeroed) {
		size_t nz = pt_first_nonzero(p, size);
		PT_REQUIRE(nz == SIZE_MAX, "calloc returned %p with byte %zu = 0x%02x after overflows", (void *)p, nz,
			p[nz]);
	}
	size_t i;
	uint32_t known = h_get(&all, (uintptr_t)p);
	if (known) {
		i = known - 1;
		PT_REQUIRE(!objs[i].live, "bookkeeping");
	} else {
		PT_REQUIRE(nobjs < MAXOBJ, "more than %zu distinct addresses for %d live objects", MAXOBJ, NOBJ);
		i = nobjs++;
		objs[i].p = p;
		h_put(&all, (uintptr_t)p, (uint32_t)i + 1);
	}
	objs[i].live = 1;
	objs[i].seed = pt_rand(&rng);
	pt_fill(p, size, objs[i].seed);
	h_put(&live, (uintptr_t)p, (uint32_t)i + 1);
	return i;
}

static void free_obj(size_t i, size_t size, const char *when)
{
	size_t bad = pt_check_range(objs[i].p, 0, size, objs[i].seed);
	PT_REQUIRE(bad == SIZE_MAX, "%s: live object %p (%zu bytes) changed at offset %zu: another object overlaps it",
		when, (void *)objs[i].p, size, bad);
	free(objs[i].p);
	objs[i].live = 0;
	h_del(&live, (uintptr_t)objs[i].p);
}

/* A random live object, or SIZE_MAX if there is none. */
static size_t random_live(void)
{
	if (!live.n)
		return SIZE_MAX;
	for (;;) {
		size_t i = (size_t)(pt_rand(&rng) % nobjs);
		if (objs[i].live)
			return i;
	}
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

/* Live objects sorted by address must be at least `size` apart. */
static void check_no_overlap(size_t size, const char *when)
{
	static uintptr_t *tmp;
	if (!tmp)
		tmp = xmap(MAXOBJ * sizeof *tmp);
	size_t n = 0;
	for (size_t i = 0; i < nobjs; i++)
		if (objs[i].live)
			tmp[n++] = (uintptr_t)objs[i].p;
	qsort(tmp, n, sizeof *tmp, cmp_ptr);
	for (size_t i = 1; i < n; i++)
		PT_REQUIRE(tmp[i] - tmp[i - 1] >= size, "%s: live objects %p and %p (%zu bytes) overlap", when,
			(void *)tmp[i - 1], (void *)tmp[i], size);
}

/* Is every byte of [a, a+len) inside objects the test got (live or freed)? */
static int ours(uintptr_t a, size_t len, size_t size)
{
	for (uintptr_t x = a; x < a + len; x += size)
		if (!h_get(&all, x))
			return 0;
	return 1;
}

static void one_class(size_t size)
{
	nobjs = 0;
	h_init(&all);
	h_init(&live);
	for (size_t i = 0; i < NOBJ; i++) {
		size_t k = new_obj(malloc(size), size, 0);
		if (pt_mbuddy)
			PT_CHECK(malloc_usable_size(objs[k].p) == size, "malloc(%zu) has usable size %zu: not a class size",
			         size, malloc_usable_size(objs[k].p));
	}
	/* Free every third: the most recent stay in the thread cache, the
	 * older ones went back to their slabs. */
	for (size_t i = 0; i < NOBJ; i += 3)
		free_obj(i, size, "first frees");

	/* Overflow live objects whose next 64 bytes are test objects. */
	int done = 0, hit_free = 0, hit_live = 0;
	for (size_t i = 1; i < nobjs && done < 200; i += 7) {
		if (!objs[i].live)
			continue;
		uintptr_t end = (uintptr_t)objs[i].p + size;
		if (!ours(end, OVERFLOW, size))
			continue;
		memset((void *)end, 0xCC, OVERFLOW);
		done++;
		for (uintptr_t x = end; x < end + OVERFLOW; x += size) {
			size_t j = h_get(&all, x) - 1;
			if (objs[j].live) {
				hit_live++;
				pt_fill(objs[j].p, size, objs[j].seed); /* the program repairs its data */
			} else {
				hit_free++;
			}
		}
	}
	PT_CHECK(done >= 50 && hit_free > 0 && hit_live > 0,
	         "class %zu: only %d overflows (%d free, %d live neighbours hit): the objects were not adjacent", size, done,
	         hit_free, hit_live);

	/* Churn: the allocator must behave as if nothing had happened. */
	for (long op = 0; op < CHURN; op++) {
		size_t i = random_live();
		unsigned w = (unsigned)(pt_rand(&rng) % 10);
		if (i != SIZE_MAX && (w < 5 || live.n >= NOBJ)) {
			free_obj(i, size, "churn");
			i = random_live();
		} else if (w < 8) {
			new_obj(malloc(size), size, 0);
		} else {
			new_obj(calloc(1, size), size, 1);
		}
		if (op % 30000 == 0)
			check_no_overlap(size, "churn");
		/* Now and then overflow again, into whatever is next. */
		if (op % 5000 == 0 && i != SIZE_MAX) {
			uintptr_t end = (uintptr_t)objs[i].p + size;
			if (ours(end, OVERFLOW, size)) {
				memset((void *)end, 0xDD, OVERFLOW);
				for (uintptr_t x = end; x < end + OVERFLOW; x += size) {
					size_t j = h_get(&all, x) - 1;
					if (objs[j].live)
						pt_fill(objs[j].p, size, objs[j].seed);
				}
			}
		}
	}
	check_no_overlap(size, "end");
	for (size_t i = 0; i < nobjs; i++)
		if (objs[i].live)
			free_obj(i, size, "final frees");
	pt_msg("class %zu: %d overflows (%d free and %d live neighbours), %d churn operations, %zu distinct objects", size,
	       done, hit_free, hit_live, CHURN, nobjs);
}

/* Page-granular blocks: overflow into the next page when it starts
 * another of the test's blocks (live or freed). calloc of these blocks is
 * not checked for zeroes: an overflow into a freed block dirties pages the
 * allocator may have given back to the kernel and trusts to read as zero
 * (as every calloc does with fresh pages); that is the program's fault,
 * not a corruption of the allocator. */
static void large_blocks(void)
{
	enum { N = 300 };
	const size_t size = 8 * 4096; /* a power of two of pages: neighbours are adjacent */
	nobjs = 0;
	h_init(&all);
	h_init(&live);
	for (int i = 0; i < N; i++)
		new_obj(malloc(size - 100), size - 100, 0);
	for (int i = 0; i < N; i += 3)
		free_obj((size_t)i, size - 100, "large frees");
	int done = 0;
	for (size_t i = 0; i < nobjs; i++) {
		if (!objs[i].live || malloc_usable_size(objs[i].p) != size)
			continue;
		uintptr_t end = (uintptr_t)objs[i].p + size;
		uint32_t next = h_get(&all, end);
		if (!next)
			continue;
		memset((void *)end, 0xEE, OVERFLOW);
		if (objs[next - 1].live)
			pt_fill(objs[next - 1].p, size - 100, objs[next - 1].seed);
		done++;
	}
	for (long op = 0; op < 20000; op++) {
		size_t i = random_live();
		if (i != SIZE_MAX && (pt_rand(&rng) % 2 || live.n >= N))
			free_obj(i, size - 100, "large churn");
		else if (pt_rand(&rng) % 3)
			new_obj(malloc(size - 100), size - 100, 0);
		else /* not checked for zeroes: see below */
			new_obj(calloc(1, size - 100), size - 100, 0);
	}
	check_no_overlap(size, "large blocks");
	for (size_t i = 0; i < nobjs; i++)
		if (objs[i].live)
			free_obj(i, size - 100, "large final frees");
	pt_msg("page-granular blocks: %d overflows into the next block", done);
	if (pt_mbuddy)
		PT_CHECK(done > 0, "no two page-granular blocks were adjacent: nothing was tested");
}

int main(void)
{
	pt_init("overflow_metadata");
	pt_watchdog(60);
	objs = xmap(MAXOBJ * sizeof *objs);
	static const size_t classes[] = { 16, 48, 64, 128, 256, 1024, 4096 };
	for (size_t k = 0; k < sizeof classes / sizeof classes[0]; k++)
		one_class(classes[k]);
	large_blocks();
	return pt_finish();
}
