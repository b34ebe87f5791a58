/* Every malloc entry point of glibc Linux, as a program sees it under
 * LD_PRELOAD=libmbuddy.so: results, alignment, usable sizes, zeroing,
 * contents kept by realloc, and errno on every error.
 *
 * Where glibc's behaviour is the reference (realloc(p, 0) frees, malloc(0)
 * is a unique pointer, memalign rounds a non-power-of-two alignment up),
 * the test says so. Checks of libmbuddy's own promises (the typed API,
 * mallinfo2 accounting, errno kept by posix_memalign on ENOMEM) run only
 * when libmbuddy is loaded. */
#define _GNU_SOURCE 1
#include "ptest.h"

#include <malloc.h>
#include <stdlib.h>
#include <sys/mman.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

static size_t page_size;

static int aligned_to(const void *p, size_t a)
{
	return ((uintptr_t)p & (a - 1)) == 0;
}

/* ---- a pool of live blocks, for the overlap check ---- */

struct blk {
	unsigned char *p;
	size_t n;     /* bytes asked for */
	size_t usable;
	uint64_t seed;
};

static struct blk *pool;
static size_t npool, cap_pool;
static uint64_t rng = 0x1234567887654321ULL;

/* Record a block, fill all of its usable size, as a program may use it. */
static void pool_add(void *p, size_t n)
{
	if (npool == cap_pool) {
		cap_pool = cap_pool ? cap_pool * 2 : 1024;
		pool = realloc(pool, cap_pool * sizeof *pool);
		PT_REQUIRE(pool != NULL, "cannot grow the block pool");
	}
	struct blk *b = &pool[npool++];
	b->p = p;
	b->n = n;
	b->usable = malloc_usable_size(p);
	b->seed = pt_rand(&rng);
	pt_fill(p, b->usable, b->seed);
}

static int cmp_blk(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)((const struct blk *)a)->p, y = (uintptr_t)((const struct blk *)b)->p;
	return x < y ? -1 : x > y;
}

/* Sort by address: [p, p + usable) of neighbours must not meet, and every
 * block must still hold its pattern. Then free them all. */
static void pool_check_and_free(const char *what)
{
	qsort(pool, npool, sizeof *pool, cmp_blk);
	size_t overlaps = 0, damaged = 0;
	for (size_t i = 0; i < npool; i++) {
		if (i + 1 < npool && pool[i].p + pool[i].usable > pool[i + 1].p) {
			if (overlaps++ < 5)
				pt_msg("%s: blocks overlap: %p+%zu and %p+%zu", what, (void *)pool[i].p,
				       pool[i].usable, (void *)pool[i + 1].p, pool[i + 1].usable);
		}
		if (!pt_intact(pool[i].p, pool[i].usable, pool[i].seed)) {
			if (damaged++ < 5)
				pt_msg("%s: block %p (%zu bytes) lost its contents at offset %zu", what,
				       (void *)pool[i].p, pool[i].usable,
				       pt_check_range(pool[i].p, 0, pool[i].usable, pool[i].seed));
		}
	}
	PT_CHECK(overlaps == 0, "%s: %zu overlapping pairs among %zu live blocks", what, overlaps, npool);
	PT_CHECK(damaged == 0, "%s: %zu blocks damaged among %zu", what, damaged, npool);
	/* Free in random order. */
	for (size_t i = npool; i > 1; i--) {
		size_t j = (size_t)(pt_rand(&rng) % i);
		struct blk t = pool[i - 1];
		pool[i - 1] = pool[j];
		pool[j] = t;
	}
	for (size_t i = 0; i < npool; i++)
		free(pool[i].p);
	npool = 0;
}

/* ---- the proof that libmbuddy serves this process ---- */

static void test_interposition(void)
{
	static const char *const names[] = {
		"malloc", "free", "calloc", "realloc", "reallocarray", "memalign",
		"posix_memalign", "aligned_alloc", "valloc", "pvalloc",
		"malloc_usable_size", "malloc_trim", "mallinfo2", "mallinfo", "mallopt", "cfree",
		"__libc_malloc", "__libc_free", "__libc_calloc", "__libc_realloc",
		"__libc_memalign", "__libc_valloc", "__libc_pvalloc",
		"mbuddy_malloc", "mbuddy_calloc", "mbuddy_set_thread_type", NULL,
	};
	pt_check_interposed(names);
}

/* ---- zero sizes ---- */

static void test_zero_sizes(void)
{
	/* glibc: malloc(0) is a unique, freeable, non-NULL pointer. */
	void *a = malloc(pt_hide_size(0)), *b = malloc(pt_hide_size(0));
	PT_CHECK(a && b && a != b, "malloc(0) gave %p and %p", a, b);
	PT_CHECK(aligned_to(a, 16) && aligned_to(b, 16), "malloc(0) misaligned: %p %p", a, b);
	free(a);
	free(b);

	void *c = calloc(0, 1), *d = calloc(1, 0), *e = calloc(0, 0);
	PT_CHECK(c && d && e, "calloc with a zero count or size gave NULL: %p %p %p", c, d, e);
	free(c);
	free(d);
	free(e);

	void *r = realloc(NULL, 0); /* glibc: malloc(0) */
	PT_CHECK(r != NULL, "realloc(NULL, 0) gave NULL");
	free(r);
	r = reallocarray(NULL, 0, 8);
	PT_CHECK(r != NULL, "reallocarray(NULL, 0, 8) gave NULL");
	free(r);

	for (size_t al = 1; al <= MiB; al <<= 1) {
		void *m = memalign(al, 0);
		PT_CHECK(m && aligned_to(m, al), "memalign(%zu, 0) = %p", al, m);
		free(m);
		m = aligned_alloc(al, 0);
		PT_CHECK(m && aligned_to(m, al), "aligned_alloc(%zu, 0) = %p", al, m);
		free(m);
		if (al >= sizeof(void *)) {
			void *q = (void *)1;
			int rc = posix_memalign(&q, al, 0);
			PT_CHECK(rc == 0 && q && aligned_to(q, al), "posix_memalign(%zu, 0) = %d, %p", al, rc, q);
			if (rc == 0)
				free(q);
		}
	}
	void *v = valloc(0);
	PT_CHECK(v && aligned_to(v, page_size), "valloc(0) = %p", v);
	free(v);
	v = pvalloc(0);
	PT_CHECK(v && aligned_to(v, page_size), "pvalloc(0) = %p", v);
	free(v);

	PT_CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) = %zu", malloc_usable_size(NULL));
	free(NULL);
}

/* ---- alignments: every power of two from 1 to 1 MiB, and beyond ---- */

static void check_aligned_block(const char *fn, void *p, size_t al, size_t n)
{
	PT_CHECK(p != NULL, "%s(%zu, %zu) gave NULL (errno %d)", fn, al, n, errno);
	if (!p)
		return;
	PT_CHECK(aligned_to(p, al), "%s(%zu, %zu) = %p is not aligned", fn, al, n, p);
	PT_CHECK(aligned_to(p, al < 16 ? al : 16), "%s: %p", fn, p);
	size_t u = malloc_usable_size(p);
	PT_CHECK(u >= n, "%s(%zu, %zu): usable size %zu < %zu", fn, al, n, u, n);
	pool_add(p, n);
}

static void test_alignments(void)
{
	for (size_t al = 1; al <= MiB; al <<= 1) {
		size_t sizes[] = { 1, al > 1 ? al - 1 : 2, al, al + 1, 3 * al, 100, 5000, 70000 };
		for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
			size_t n = sizes[k];
			check_aligned_block("memalign", memalign(al, n), al, n);
			check_aligned_block("aligned_alloc", aligned_alloc(al, n), al, n);
			if (al >= sizeof(void *)) {
				void *p = NULL;
				int saved = errno = 4242;
				int rc = posix_memalign(&p, al, n);
				PT_CHECK(rc == 0, "posix_memalign(%zu, %zu) returned %d", al, n, rc);
				PT_CHECK(errno == saved, "posix_memalign changed errno on success");
				if (rc == 0)
					check_aligned_block("posix_memalign", p, al, n);
			}
		}
	}
	/* Alignments above a pageblock (4 MiB by default): the over-allocating
	 * path. */
	for (size_t al = 2 * MiB; al <= GiB; al <<= 1) {
		size_t sizes[] = { 1, 3 * page_size, 5 * MiB + 1 };
		for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
			size_t n = sizes[k];
			check_aligned_block("memalign", memalign(al, n), al, n);
			check_aligned_block("aligned_alloc", aligned_alloc(al, n), al, n);
			void *p = NULL;
			int rc = posix_memalign(&p, al, n);
			PT_CHECK(rc == 0, "posix_memalign(%zu, %zu) returned %d", al, n, rc);
			if (rc == 0)
				check_aligned_block("posix_memalign", p, al, n);
		}
	}
	/* Aligned blocks keep their contents through realloc, both ways. */
	for (size_t al = 64; al <= 64 * MiB; al <<= 3) {
		size_t n = 100 * KiB;
		unsigned char *p = memalign(al, n);
		PT_CHECK(p != NULL, "memalign(%zu, %zu) failed", al, n);
		if (!p)
			continue;
		pt_fill(p, n, al);
		unsigned char *q = realloc(p, 3 * MiB);
		PT_CHECK(q && pt_intact(q, n, al), "realloc of a %zu-aligned block to 3 MiB lost contents", al);
		if (!q) {
			free(p);
			continue;
		}
		pt_fill_range(q, n, 3 * MiB, al);
		p = realloc(q, 10);
		PT_CHECK(p && pt_intact(p, 10, al), "realloc of a %zu-aligned block to 10 bytes lost contents", al);
		free(p ? p : q);
	}
	/* malloc itself: 16 bytes (the x86-64 glibc guarantee) for every size. */
	for (size_t n = 0; n <= 20000; n += (n < 512 ? 1 : 97)) {
		void *p = malloc(n);
		PT_CHECK(p && aligned_to(p, 16), "malloc(%zu) = %p", n, p);
		if (p)
			pool_add(p, n);
	}
	/* glibc's memalign rounds an alignment that is not a power of two up. */
	void *p = memalign(24, 100);
	PT_CHECK(p && aligned_to(p, 8), "memalign(24, 100) = %p", p);
	if (pt_mbuddy)
		PT_CHECK(p && aligned_to(p, 32), "memalign(24, 100) = %p: not rounded up to 32", p);
	if (p)
		pool_add(p, 100);
	p = memalign(3 * page_size, 10);
	PT_CHECK(p && aligned_to(p, page_size), "memalign(3 pages, 10) = %p", p);
	if (pt_mbuddy)
		PT_CHECK(p && aligned_to(p, 4 * page_size), "memalign(3 pages, 10) = %p: not rounded up", p);
	if (p)
		pool_add(p, 10);

	pool_check_and_free("aligned blocks");
}

/* ---- huge sizes and errno ---- */

static size_t heap_size(void)
{
	const char *v = getenv("MBUDDY_HEAP_SIZE");
	size_t sz = 64 * GiB;
	if (v && *v) {
		char *end;
		unsigned long long x = strtoull(v, &end, 10);
		unsigned shift = 0;
		switch (*end) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		case 't': case 'T': shift = 40; break;
		}
		if (x)
			sz = (size_t)x << shift;
	}
	return sz;
}

#define EXPECT_ENOMEM(call, desc)                                                 \
	do {                                                                      \
		errno = 0;                                                        \
		void *r_ = (call);                                                \
		int e_ = errno;                                                   \
		PT_CHECK(r_ == NULL && e_ == ENOMEM, "%s: got %p, errno %d (%s), want NULL/ENOMEM", \
		         desc, r_, e_, strerror(e_));                                \
		if (r_)                                                           \
			free(r_);                                                 \
	} while (0)

static void test_huge(void)
{
	size_t huge[] = { SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - page_size, SIZE_MAX - page_size + 2,
			  SIZE_MAX / 2 + 1, SIZE_MAX / 2, (size_t)1 << 48, 0, 0 };
	size_t nh = sizeof huge / sizeof huge[0] - 2;
	if (pt_mbuddy) {
		/* Just above the heap: must fail even though the address space
		 * could hold it. */
		huge[nh++] = heap_size() + 1;
		huge[nh++] = heap_size() + 64 * MiB;
	}
	char desc[128];
	for (size_t i = 0; i < nh; i++) {
		size_t n = pt_hide_size(huge[i]);
		snprintf(desc, sizeof desc, "malloc(%zu)", n);
		EXPECT_ENOMEM(malloc(n), desc);
		snprintf(desc, sizeof desc, "calloc(1, %zu)", n);
		EXPECT_ENOMEM(calloc(1, n), desc);
		snprintf(desc, sizeof desc, "calloc(%zu, 1)", n);
		EXPECT_ENOMEM(calloc(n, 1), desc);
		snprintf(desc, sizeof desc, "realloc(NULL, %zu)", n);
		EXPECT_ENOMEM(realloc(NULL, n), desc);
		snprintf(desc, sizeof desc, "reallocarray(NULL, 1, %zu)", n);
		EXPECT_ENOMEM(reallocarray(NULL, 1, n), desc);
		snprintf(desc, sizeof desc, "memalign(64, %zu)", n);
		EXPECT_ENOMEM(memalign(64, n), desc);
		snprintf(desc, sizeof desc, "memalign(page, %zu)", n);
		EXPECT_ENOMEM(memalign(page_size, n), desc);
		snprintf(desc, sizeof desc, "memalign(8M, %zu)", n);
		EXPECT_ENOMEM(memalign(8 * MiB, n), desc);
		snprintf(desc, sizeof desc, "aligned_alloc(64, %zu)", n);
		EXPECT_ENOMEM(aligned_alloc(64, n), desc);
		snprintf(desc, sizeof desc, "valloc(%zu)", n);
		EXPECT_ENOMEM(valloc(n), desc);
		snprintf(desc, sizeof desc, "pvalloc(%zu)", n);
		EXPECT_ENOMEM(pvalloc(n), desc);

		/* posix_memalign reports through its return value. */
		void *q = (void *)&desc;
		errno = 4242;
		int rc = posix_memalign(&q, 64, n);
		PT_CHECK(rc == ENOMEM, "posix_memalign(64, %zu) returned %d, want ENOMEM", n, rc);
		PT_CHECK(q == (void *)&desc, "posix_memalign(64, %zu) changed *memptr on failure", n);
		if (pt_mbuddy)
			PT_CHECK(errno == 4242, "posix_memalign(64, %zu) changed errno to %d", n, errno);

		/* realloc and reallocarray of a live block: NULL, ENOMEM, and the
		 * block is untouched and still usable. */
		size_t sizes[] = { 40, 100 * KiB };
		for (int k = 0; k < 2; k++) {
			unsigned char *p = malloc(sizes[k]);
			PT_REQUIRE(p != NULL, "malloc(%zu)", sizes[k]);
			pt_fill(p, sizes[k], 99);
			snprintf(desc, sizeof desc, "realloc(%zu-byte block, %zu)", sizes[k], n);
			errno = 0;
			void *r = realloc(pt_hide(p), n);
			PT_CHECK(r == NULL && errno == ENOMEM, "%s: got %p, errno %d", desc, r, errno);
			PT_CHECK(pt_intact(p, sizes[k], 99), "%s: the old block was damaged", desc);
			errno = 0;
			r = reallocarray(pt_hide(p), 1, n);
			PT_CHECK(r == NULL && errno == ENOMEM, "reallocarray(p, 1, %zu): got %p, errno %d", n, r, errno);
			PT_CHECK(pt_intact(p, sizes[k], 99), "reallocarray(p, 1, %zu): the old block was damaged", n);
			p = realloc(p, sizes[k] * 2); /* still a valid block */
			PT_CHECK(p && pt_intact(p, sizes[k], 99), "block unusable after a failed realloc");
			free(p);
		}
	}

	/* Multiplication overflow. */
	size_t ov[][2] = { { SIZE_MAX / 2 + 1, 2 }, { 2, SIZE_MAX / 2 + 1 }, { SIZE_MAX, SIZE_MAX },
			   { (size_t)1 << 32, (size_t)1 << 32 }, { SIZE_MAX / 3 + 1, 3 }, { 65537, SIZE_MAX / 65536 } };
	for (size_t i = 0; i < sizeof ov / sizeof ov[0]; i++) {
		size_t a = pt_hide_size(ov[i][0]), b = pt_hide_size(ov[i][1]);
		snprintf(desc, sizeof desc, "calloc(%zu, %zu)", a, b);
		EXPECT_ENOMEM(calloc(a, b), desc);
		snprintf(desc, sizeof desc, "reallocarray(NULL, %zu, %zu)", a, b);
		EXPECT_ENOMEM(reallocarray(NULL, a, b), desc);
		unsigned char *p = malloc(64);
		PT_REQUIRE(p != NULL, "malloc(64)");
		pt_fill(p, 64, 5);
		errno = 0;
		void *r = reallocarray(pt_hide(p), a, b);
		PT_CHECK(r == NULL && errno == ENOMEM, "reallocarray(p, %zu, %zu): %p, errno %d", a, b, r, errno);
		PT_CHECK(pt_intact(p, 64, 5), "reallocarray overflow damaged the block");
		free(p);
	}

	/* Bad alignments. posix_memalign: EINVAL as return value, errno and
	 * *memptr untouched. memalign/aligned_alloc: an alignment above
	 * SIZE_MAX/2+1 cannot be rounded up to a power of two: EINVAL. */
	size_t bad[] = { 0, 1, 2, 4, 3, 12, 24, 48, 100, 4097, SIZE_MAX, SIZE_MAX / 2, SIZE_MAX / 2 + 2 };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		void *q = (void *)&desc;
		errno = 4343;
		int rc = posix_memalign(&q, pt_hide_size(bad[i]), 16);
		PT_CHECK(rc == EINVAL, "posix_memalign(align %zu) returned %d, want EINVAL", bad[i], rc);
		PT_CHECK(errno == 4343, "posix_memalign(align %zu) changed errno to %d", bad[i], errno);
		PT_CHECK(q == (void *)&desc, "posix_memalign(align %zu) changed *memptr", bad[i]);
	}
	size_t badm[] = { SIZE_MAX, SIZE_MAX - 1, SIZE_MAX / 2 + 2, SIZE_MAX - page_size };
	for (size_t i = 0; i < sizeof badm / sizeof badm[0]; i++) {
		size_t a = pt_hide_size(badm[i]);
		errno = 0;
		void *r = memalign(a, 16);
		PT_CHECK(r == NULL && errno == EINVAL, "memalign(%zu, 16): %p, errno %d, want EINVAL", a, r, errno);
		errno = 0;
		r = aligned_alloc(a, 16);
		PT_CHECK(r == NULL && errno == EINVAL, "aligned_alloc(%zu, 16): %p, errno %d, want EINVAL", a, r, errno);
	}
	/* The largest power of two is a valid alignment nothing can satisfy. */
	size_t top = pt_hide_size(SIZE_MAX / 2 + 1);
	EXPECT_ENOMEM(memalign(top, 16), "memalign(2^63, 16)");
	void *q = NULL;
	PT_CHECK(posix_memalign(&q, top, 16) == ENOMEM, "posix_memalign(2^63, 16) did not return ENOMEM");
	if (pt_mbuddy) {
		EXPECT_ENOMEM(memalign(heap_size() * 2, 16), "memalign(2 x heap, 16)");
		EXPECT_ENOMEM(memalign(64, heap_size() + page_size), "memalign(64, heap + 1 page)");
	}

	/* After all those failures, everything still works. */
	void *ok = malloc(100);
	PT_CHECK(ok != NULL, "malloc(100) failed after the error cases");
	free(ok);
}

/* ---- free and errno ---- */

static void test_free_errno(void)
{
	size_t sizes[] = { 1, 16, 100, 1000, 16384, 16385, 64 * KiB, MiB, 5 * MiB, 20 * MiB };
	void *ps[64 * 10];
	for (int round = 0; round < 3; round++) {
		/* Many frees in a row: the thread-cache fast path, its flushes
		 * to the slabs, and large frees that return memory. */
		size_t n = 0;
		for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
			for (int j = 0; j < (sizes[k] >= MiB ? 2 : 64); j++) {
				ps[n] = malloc(sizes[k]);
				PT_REQUIRE(ps[n] != NULL, "malloc(%zu)", sizes[k]);
				memset(ps[n], 0x5a, sizes[k] < 4096 ? sizes[k] : 4096);
				n++;
			}
		for (size_t i = 0; i < n; i++) {
			int want = (int)(1000 + i);
			errno = want;
			free(ps[i]);
			PT_CHECK(errno == want, "free() of block %zu changed errno from %d to %d", i, want, errno);
			if (errno != want)
				break;
		}
	}
	errno = 77;
	free(NULL);
	PT_CHECK(errno == 77, "free(NULL) changed errno");
	/* A large free after its decay time, when free itself may purge. */
	void *big = malloc(16 * MiB);
	PT_REQUIRE(big != NULL, "malloc(16M)");
	memset(big, 1, 16 * MiB);
	free(big);
	usleep(600 * 1000);
	big = malloc(6 * MiB);
	PT_REQUIRE(big != NULL, "malloc(6M)");
	errno = 1234;
	free(big);
	PT_CHECK(errno == 1234, "free() of a large block after the decay time changed errno to %d", errno);
}

/* ---- realloc ---- */

static size_t live_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks;
}

static void test_realloc_zero(void)
{
	/* glibc: realloc(p, 0) frees p and returns NULL. The live count
	 * must drop by the block; a call may also start the library's
	 * purge thread, whose TLS glibc allocates through malloc (some 280
	 * bytes, once a process), so a block that seems not freed is tried
	 * once more before that counts as a failure. */
	size_t sizes[] = { 1, 100, 16384, 100 * KiB, 8 * MiB };
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		size_t before = 0, after = 0;
		for (int attempt = 0; attempt < 2; attempt++) {
			void *p = malloc(sizes[k]);
			PT_REQUIRE(p != NULL, "malloc(%zu)", sizes[k]);
			memset(p, 7, sizes[k]);
			before = pt_mbuddy ? live_bytes() : 0;
			errno = 555;
			void *r = realloc(p, pt_hide_size(0));
			PT_CHECK(r == NULL, "realloc(%zu-byte block, 0) returned %p, want NULL (glibc frees)", sizes[k], r);
			PT_CHECK(errno == 555, "realloc(p, 0) changed errno to %d", errno);
			if (r) {
				free(r);
				break;
			}
			after = pt_mbuddy ? live_bytes() : 0;
			if (after + sizes[k] <= before)
				break;
		}
		if (pt_mbuddy)
			PT_CHECK(after + sizes[k] <= before, "realloc(%zu-byte block, 0) did not free it: live %zu -> %zu",
			         sizes[k], before, after);
	}
	void *p = malloc(50);
	void *r = reallocarray(p, 0, 10);
	PT_CHECK(r == NULL, "reallocarray(p, 0, 10) = %p, want NULL (glibc frees)", r);
	if (r)
		free(r);
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return x < y ? -1 : x > y;
}

/* Every size-class boundary (found through malloc_usable_size) and every
 * page-count boundary around powers of two and pageblocks, 16 B .. 64 MiB. */
static size_t *boundary_sizes(size_t *count)
{
	size_t cap = 4096, n = 0;
	size_t *s = malloc(cap * sizeof *s);
	PT_REQUIRE(s != NULL, "malloc");
	for (size_t k = 1; k <= 40 * KiB;) {
		void *p = malloc(k);
		PT_REQUIRE(p != NULL, "malloc(%zu)", k);
		size_t u = malloc_usable_size(p);
		free(p);
		PT_CHECK(u >= k, "malloc_usable_size(malloc(%zu)) = %zu", k, u);
		if (u < k)
			u = k;
		s[n++] = k;
		if (u > k)
			s[n++] = u;
		k = u + 1;
		if (n > cap - 4)
			break;
	}
	for (unsigned b = 4; b <= 26; b++) {
		size_t base = (size_t)1 << b;
		long d[] = { -4097, -4096, -1, 0, 1, 4096, 4097 };
		for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
			long v = (long)base + d[i];
			if (v >= 16 && (size_t)v <= 64 * MiB && n < cap)
				s[n++] = (size_t)v;
		}
		if (n < cap && base + base / 2 <= 64 * MiB)
			s[n++] = base + base / 2;
	}
	qsort(s, n, sizeof *s, cmp_size);
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if (m == 0 || s[m - 1] != s[i])
			s[m++] = s[i];
	*count = m;
	return s;
}

static void test_realloc_contents(void)
{
	size_t ns;
	size_t *sz = boundary_sizes(&ns);
	uint64_t seed = 0xabcdef;

	/* Growing through every boundary. */
	unsigned char *p = malloc(sz[0]);
	PT_REQUIRE(p != NULL, "malloc");
	pt_fill(p, sz[0], seed);
	size_t cur = sz[0];
	for (size_t i = 1; i < ns; i++) {
		unsigned char *q = realloc(p, sz[i]);
		PT_CHECK(q != NULL, "realloc(%zu -> %zu) failed", cur, sz[i]);
		if (!q)
			break;
		size_t bad = pt_check_range(q, 0, cur, seed);
		PT_CHECK(bad == SIZE_MAX, "realloc grow %zu -> %zu lost contents at offset %zu", cur, sz[i], bad);
		PT_CHECK(malloc_usable_size(q) >= sz[i], "realloc(%zu): usable %zu", sz[i], malloc_usable_size(q));
		PT_CHECK(aligned_to(q, 16), "realloc returned %p", (void *)q);
		pt_fill_range(q, cur, sz[i], seed);
		p = q;
		cur = sz[i];
	}
	/* Shrinking through every boundary. */
	for (size_t i = ns; i-- > 0;) {
		if (sz[i] >= cur)
			continue;
		unsigned char *q = realloc(p, sz[i]);
		PT_CHECK(q != NULL, "realloc(%zu -> %zu) failed", cur, sz[i]);
		if (!q)
			break;
		size_t bad = pt_check_range(q, 0, sz[i], seed);
		PT_CHECK(bad == SIZE_MAX, "realloc shrink %zu -> %zu lost contents at offset %zu", cur, sz[i], bad);
		PT_CHECK(malloc_usable_size(q) >= sz[i], "realloc(%zu): usable %zu", sz[i], malloc_usable_size(q));
		p = q;
		cur = sz[i];
	}
	free(p);

	/* A random walk with neighbours allocated around, so some resizes
	 * happen in place and some move; the neighbours must not change. */
	uint64_t r = 42;
	enum { NB = 24 };
	struct { unsigned char *p; size_t n; uint64_t seed; } nb[NB];
	for (int i = 0; i < NB; i++) {
		nb[i].n = pt_rand_log(&r, 1, 2 * MiB);
		nb[i].p = malloc(nb[i].n);
		PT_REQUIRE(nb[i].p != NULL, "malloc(%zu)", nb[i].n);
		nb[i].seed = pt_rand(&r);
		pt_fill(nb[i].p, nb[i].n, nb[i].seed);
	}
	for (int step = 0; step < 1000; step++) {
		int i = (int)(pt_rand(&r) % NB);
		size_t n = pt_rand_log(&r, 1, step % 100 == 0 ? 16 * MiB : 3 * MiB);
		unsigned char *q = realloc(nb[i].p, n);
		PT_CHECK(q != NULL, "realloc(%zu -> %zu) failed", nb[i].n, n);
		if (!q)
			continue;
		size_t keep = nb[i].n < n ? nb[i].n : n;
		size_t bad = pt_check_range(q, 0, keep, nb[i].seed);
		PT_CHECK(bad == SIZE_MAX, "random realloc %zu -> %zu lost contents at %zu", nb[i].n, n, bad);
		pt_fill_range(q, keep, n, nb[i].seed);
		nb[i].p = q;
		nb[i].n = n;
		if (step % 256 == 0)
			for (int j = 0; j < NB; j++)
				PT_CHECK(pt_intact(nb[j].p, nb[j].n, nb[j].seed), "neighbour %d damaged at step %d", j, step);
	}
	for (int i = 0; i < NB; i++) {
		PT_CHECK(pt_intact(nb[i].p, nb[i].n, nb[i].seed), "block %d damaged after the walk", i);
		free(nb[i].p);
	}

	/* In-place growth must not swallow a live neighbour. */
	for (int round = 0; round < 50; round++) {
		size_t n1 = pt_rand_log(&r, 20 * KiB, 4 * MiB), n2 = pt_rand_log(&r, 20 * KiB, 4 * MiB);
		unsigned char *a = malloc(n1), *b = malloc(n2);
		PT_REQUIRE(a && b, "malloc");
		pt_fill(a, n1, 1);
		pt_fill(b, n2, 2);
		unsigned char *a2 = realloc(a, n1 * 3);
		PT_REQUIRE(a2 != NULL, "realloc");
		PT_CHECK(pt_intact(a2, n1, 1), "grown block lost its contents");
		PT_CHECK(pt_intact(b, n2, 2), "growing %zu -> %zu damaged the next block", n1, n1 * 3);
		PT_CHECK(a2 + n1 * 3 <= b || b + n2 <= a2, "grown block %p+%zu overlaps %p+%zu", (void *)a2, n1 * 3,
		         (void *)b, n2);
		pt_fill(a2, n1 * 3, 3);
		PT_CHECK(pt_intact(b, n2, 2), "writing the grown block damaged its neighbour");
		free(a2);
		free(b);
	}
	free(sz);
}

/* ---- calloc ---- */

static size_t rss_now(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	PT_REQUIRE(f != NULL, "cannot read /proc/self/statm");
	unsigned long size = 0, res = 0;
	PT_REQUIRE(fscanf(f, "%lu %lu", &size, &res) == 2, "cannot parse /proc/self/statm");
	fclose(f);
	return res * (size_t)sysconf(_SC_PAGESIZE);
}

static void test_calloc(void)
{
	size_t sizes[] = { 1, 15, 16, 17, 100, 128, 129, 1000, 4096, 4097, 16383, 16384, 16385,
			   64 * KiB, 100 * KiB, MiB, 4 * MiB, 8 * MiB + 1 };
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		size_t n = sizes[k];
		int rounds = n >= MiB ? 8 : 200;
		for (int i = 0; i < rounds; i++) {
			unsigned char *p = malloc(n);
			PT_REQUIRE(p != NULL, "malloc(%zu)", n);
			memset(p, 0xff, malloc_usable_size(p));
			free(p);
			unsigned char *q = calloc(1, n);
			PT_REQUIRE(q != NULL, "calloc(1, %zu)", n);
			/* The whole usable size, as glibc clears the whole chunk. */
			size_t nz = pt_first_nonzero(q, malloc_usable_size(q));
			PT_CHECK(nz == SIZE_MAX, "calloc(1, %zu) (round %d, reused %s) byte %zu is 0x%02x", n, i,
			         p == q ? "the same block" : "memory", nz, nz == SIZE_MAX ? 0 : q[nz]);
			memset(q, 0xff, malloc_usable_size(q));
			free(q);
			if (nz != SIZE_MAX)
				break;
		}
	}
	/* nmemb x size forms and a batch of many live ones. */
	void *live[300];
	for (int i = 0; i < 300; i++) {
		size_t a = (size_t)(i % 17 + 1), b = (size_t)(i * 37 % 1500 + 1);
		unsigned char *p = calloc(a, b);
		PT_REQUIRE(p != NULL, "calloc(%zu, %zu)", a, b);
		PT_CHECK(pt_first_nonzero(p, a * b) == SIZE_MAX, "calloc(%zu, %zu) not zeroed", a, b);
		memset(p, 0xee, a * b);
		live[i] = p;
	}
	for (int i = 0; i < 300; i++)
		free(live[i]);
	for (int i = 0; i < 300; i++) {
		size_t a = (size_t)(i % 17 + 1), b = (size_t)(i * 37 % 1500 + 1);
		unsigned char *p = calloc(b, a);
		PT_REQUIRE(p != NULL, "calloc(%zu, %zu)", b, a);
		PT_CHECK(pt_first_nonzero(p, a * b) == SIZE_MAX, "calloc(%zu, %zu) of reused memory not zeroed", b, a);
		live[i] = p;
	}
	for (int i = 0; i < 300; i++)
		free(live[i]);

	/* Pages freed by an in-place shrink, by an aligned allocation's cut-off
	 * head, and pages returned by malloc_trim, reused by calloc. */
	uint64_t r = 7;
	for (int round = 0; round < 40; round++) {
		size_t big = pt_rand_log(&r, 64 * KiB, 12 * MiB);
		unsigned char *p = malloc(big);
		PT_REQUIRE(p != NULL, "malloc(%zu)", big);
		memset(p, 0xff, big);
		size_t small = pt_rand_log(&r, 20 * KiB, big / 2 + 20 * KiB);
		unsigned char *p2 = realloc(p, small);
		PT_REQUIRE(p2 != NULL, "realloc");
		unsigned char *cs[4];
		for (int i = 0; i < 4; i++) {
			size_t cn = pt_rand_log(&r, 16 * KiB, big);
			cs[i] = calloc(1, cn);
			PT_REQUIRE(cs[i] != NULL, "calloc(1, %zu)", cn);
			size_t nz = pt_first_nonzero(cs[i], malloc_usable_size(cs[i]));
			PT_CHECK(nz == SIZE_MAX, "calloc(1, %zu) after shrinking %zu -> %zu: byte %zu is 0x%02x", cn, big,
			         small, nz, nz == SIZE_MAX ? 0 : cs[i][nz]);
			memset(cs[i], 0xff, cn);
		}
		free(p2);
		for (int i = 0; i < 4; i++)
			free(cs[i]);
		if (round % 8 == 7)
			malloc_trim(0);
		size_t al = (size_t)1 << pt_rand_range(&r, 13, 24);
		unsigned char *a = memalign(al, pt_rand_log(&r, 1, 6 * MiB));
		PT_REQUIRE(a != NULL, "memalign");
		free(a);
		size_t cn = pt_rand_log(&r, 16 * KiB, 16 * MiB);
		unsigned char *c = calloc(cn, 1);
		PT_REQUIRE(c != NULL, "calloc(%zu, 1)", cn);
		size_t nz = pt_first_nonzero(c, malloc_usable_size(c));
		PT_CHECK(nz == SIZE_MAX, "calloc(%zu, 1) after aligned allocations: byte %zu is 0x%02x", cn, nz,
		         nz == SIZE_MAX ? 0 : c[nz]);
		memset(c, 0xff, cn);
		free(c);
	}

	/* A large calloc over memory just written and freed: the kernel
	 * clears it (it is not written again page by page, and stops being
	 * resident); over other memory, none is made resident. */
	if (pt_mbuddy) {
		size_t n = 256 * MiB;
		unsigned char *w = malloc(n);
		PT_REQUIRE(w != NULL, "malloc(%zu)", n);
		memset(w, 0xff, n);
		free(w);
		size_t before = rss_now();
		unsigned char *z = calloc(1, n);
		PT_REQUIRE(z != NULL, "calloc(1, %zu)", n);
		size_t after = rss_now();
		if (z == w)
			PT_CHECK(after + 128 * MiB <= before, "calloc(1, 256 MiB) over freed written memory: RSS %zu MiB, "
			         "was %zu MiB (cleared with memset?)", after / MiB, before / MiB);
		else
			PT_CHECK(after <= before + 16 * MiB, "calloc(1, 256 MiB): RSS %zu MiB, was %zu MiB", after / MiB,
			         before / MiB);
		for (size_t i = 0; i < n; i += 4096 * 7 + 1)
			PT_CHECK(z[i] == 0, "calloc(1, 256 MiB): byte %zu is 0x%02x", i, z[i]);
		free(z);
	}
}

/* ---- usable sizes and no overlap among many live blocks ---- */

static void test_many_live(void)
{
	uint64_t r = 99;
	for (int i = 0; i < 20000; i++) {
		size_t n;
		unsigned kind = (unsigned)(pt_rand(&r) % 100);
		if (kind < 70)
			n = pt_rand_log(&r, 0, 512);
		else if (kind < 95)
			n = pt_rand_log(&r, 512, 64 * KiB);
		else if (kind < 99)
			n = pt_rand_log(&r, 64 * KiB, MiB);
		else
			n = pt_rand_log(&r, MiB, 2 * MiB);
		void *p;
		switch (pt_rand(&r) % 8) {
		case 0: p = calloc(1, n); break;
		case 1: p = memalign((size_t)1 << pt_rand_range(&r, 0, 12), n); break;
		case 2: {
			void *q = NULL;
			p = posix_memalign(&q, (size_t)8 << pt_rand_range(&r, 0, 9), n) == 0 ? q : NULL;
			break;
		}
		case 3: p = realloc(malloc(n / 2 + 1), n); break;
		default: p = malloc(n); break;
		}
		PT_CHECK(p != NULL, "allocation of %zu failed", n);
		if (!p)
			continue;
		size_t u = malloc_usable_size(p);
		PT_CHECK(u >= n, "usable size %zu < request %zu", u, n);
		pool_add(p, n);
		/* Keep most, free some, so memory is reused while others live. */
		if (pt_rand(&r) % 4 == 0) {
			size_t j = (size_t)(pt_rand(&r) % npool);
			PT_CHECK(pt_intact(pool[j].p, pool[j].usable, pool[j].seed), "block %p damaged", (void *)pool[j].p);
			free(pool[j].p);
			pool[j] = pool[--npool];
		}
	}
	pool_check_and_free("many live blocks");
}

/* ---- trim, mallinfo2, cfree, valloc, pvalloc ---- */

static long rss_pages(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long size = 0, rss = -1;
	if (f) {
		if (fscanf(f, "%ld %ld", &size, &rss) != 2)
			rss = -1;
		fclose(f);
	}
	return rss;
}

static void test_trim_mallinfo(void)
{
	int rc = malloc_trim(0);
	PT_CHECK(rc == 0 || rc == 1, "malloc_trim(0) = %d", rc);
	rc = malloc_trim(1 << 20);
	PT_CHECK(rc == 0 || rc == 1, "malloc_trim(1M) = %d", rc);

	struct mallinfo2 m0 = mallinfo2();
	unsigned char *p = malloc(32 * MiB);
	PT_REQUIRE(p != NULL, "malloc(32M)");
	memset(p, 1, 32 * MiB);
	void *smalls[1000];
	for (int i = 0; i < 1000; i++) {
		smalls[i] = malloc(100);
		PT_REQUIRE(smalls[i] != NULL, "malloc(100)");
	}
	struct mallinfo2 m1 = mallinfo2();
	long rss1 = rss_pages();
	if (pt_mbuddy) {
		PT_CHECK(m1.uordblks >= m0.uordblks + 32 * MiB + 100000,
		         "mallinfo2().uordblks went from %zu to %zu after allocating 32.1 MB", m0.uordblks, m1.uordblks);
		PT_CHECK(m1.arena >= m1.uordblks, "mallinfo2(): arena %zu < uordblks %zu", m1.arena, m1.uordblks);
	}
	free(p);
	for (int i = 0; i < 1000; i++)
		free(smalls[i]);
	struct mallinfo2 m2 = mallinfo2();
	if (pt_mbuddy)
		PT_CHECK(m2.uordblks + 32 * MiB + 100000 <= m1.uordblks,
		         "mallinfo2().uordblks went from %zu to %zu after freeing 32.1 MB", m1.uordblks, m2.uordblks);
	rc = malloc_trim(0);
	PT_CHECK(rc == 0 || rc == 1, "malloc_trim(0) = %d", rc);
	long rss2 = rss_pages();
	if (pt_mbuddy) {
		PT_CHECK(rc == 1, "malloc_trim(0) after freeing 32 MB of written memory returned %d, want 1", rc);
		if (rss1 > 0 && rss2 > 0)
			PT_CHECK(rss1 - rss2 >= (long)(24 * MiB / page_size),
			         "RSS went from %ld to %ld pages: malloc_trim did not give the 32 MB back", rss1, rss2);
	}
}

static void test_cfree_valloc(void)
{
	void (*cf)(void *) = (void (*)(void *))pt_sym("cfree");
	if (pt_mbuddy)
		PT_CHECK(cf != NULL, "cfree is not exported");
	if (cf) {
		for (int i = 0; i < 100; i++) {
			void *p = malloc((size_t)i * 1000);
			errno = 31;
			cf(p);
			PT_CHECK(errno == 31, "cfree changed errno");
		}
		cf(NULL);
	}
	size_t sizes[] = { 1, 100, page_size - 1, page_size, page_size + 1, 3 * page_size, 100 * KiB, 5 * MiB };
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		size_t n = sizes[k];
		void *v = valloc(n);
		PT_CHECK(v && aligned_to(v, page_size), "valloc(%zu) = %p", n, v);
		if (v) {
			PT_CHECK(malloc_usable_size(v) >= n, "valloc(%zu): usable %zu", n, malloc_usable_size(v));
			pool_add(v, n);
		}
		size_t rounded = (n + page_size - 1) & ~(page_size - 1);
		v = pvalloc(n);
		PT_CHECK(v && aligned_to(v, page_size), "pvalloc(%zu) = %p", n, v);
		if (v) {
			PT_CHECK(malloc_usable_size(v) >= rounded, "pvalloc(%zu): usable %zu < %zu", n,
			         malloc_usable_size(v), rounded);
			pool_add(v, rounded);
		}
	}
	pool_check_and_free("valloc/pvalloc");
}

/* ---- the typed API of mbuddy.h, through dlsym ---- */

static void test_typed_api(void)
{
	if (!pt_mbuddy)
		return;
	void *(*tm)(size_t, int) = (void *(*)(size_t, int))pt_sym("mbuddy_malloc");
	void *(*tc)(size_t, size_t, int) = (void *(*)(size_t, size_t, int))pt_sym("mbuddy_calloc");
	int (*st)(int) = (int (*)(int))pt_sym("mbuddy_set_thread_type");
	PT_REQUIRE(tm && tc && st, "the typed API is incomplete");

	size_t sizes[] = { 0, 8, 100, 5000, 16384, 100 * KiB, 3 * MiB };
	for (int t = 0; t < 3; t++)
		for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
			void *p = tm(sizes[k], t);
			PT_CHECK(p && aligned_to(p, 16), "mbuddy_malloc(%zu, %d) = %p", sizes[k], t, p);
			if (p)
				pool_add(p, sizes[k]);
			unsigned char *c = tc(3, sizes[k], t);
			PT_CHECK(c != NULL, "mbuddy_calloc(3, %zu, %d) = NULL", sizes[k], t);
			if (c) {
				PT_CHECK(pt_first_nonzero(c, 3 * sizes[k]) == SIZE_MAX, "mbuddy_calloc not zeroed");
				pool_add(c, 3 * sizes[k]);
			}
		}
	int badt[] = { -1, 3, 4, 100, -100 };
	for (size_t i = 0; i < sizeof badt / sizeof badt[0]; i++) {
		errno = 0;
		void *p = tm(10, badt[i]);
		PT_CHECK(p == NULL && errno == EINVAL, "mbuddy_malloc(10, %d) = %p, errno %d, want EINVAL", badt[i], p,
		         errno);
		errno = 0;
		p = tc(1, 10, badt[i]);
		PT_CHECK(p == NULL && errno == EINVAL, "mbuddy_calloc(1, 10, %d) = %p, errno %d", badt[i], p, errno);
	}
	errno = 0;
	void *p = tc(SIZE_MAX / 2 + 1, 2, 0);
	PT_CHECK(p == NULL && errno == ENOMEM, "mbuddy_calloc overflow: %p, errno %d", p, errno);
	p = tm(SIZE_MAX, 1);
	PT_CHECK(p == NULL && errno == ENOMEM, "mbuddy_malloc(SIZE_MAX): %p, errno %d", p, errno);

	int prev = st(2);
	PT_CHECK(prev == -1, "mbuddy_set_thread_type: initial setting %d, want -1", prev);
	for (int t = -1; t < 3; t++) {
		int was = st(t);
		for (int i = 0; i < 50; i++) {
			size_t n = (size_t)i * 700 + 1;
			void *q = malloc(n);
			PT_CHECK(q != NULL, "malloc under thread type %d", t);
			if (q)
				pool_add(q, n);
		}
		PT_CHECK(st(t) == t, "mbuddy_set_thread_type(%d) did not stick (previous was %d)", t, was);
	}
	st(7); /* out of range: back to classification */
	PT_CHECK(st(-1) == -1, "mbuddy_set_thread_type(7) should mean -1");
	pool_check_and_free("typed blocks");
}

int main(void)
{
	pt_init("api_conformance");
	page_size = (size_t)sysconf(_SC_PAGESIZE);
	pt_watchdog(120);

	PT_RUN(test_interposition);
	PT_RUN(test_zero_sizes);
	PT_RUN(test_alignments);
	PT_RUN(test_huge);
	PT_RUN(test_free_errno);
	PT_RUN(test_realloc_zero);
	PT_RUN(test_realloc_contents);
	PT_RUN(test_calloc);
	PT_RUN(test_many_live);
	PT_RUN(test_trim_mallinfo);
	PT_RUN(test_cfree_valloc);
	PT_RUN(test_typed_api);
	free(pool);
	return pt_finish();
}
