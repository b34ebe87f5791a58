/* The metadata arena: records are zeroed and never overlap, a page holds
 * records of one group and size, and pages freed whole go back to the
 * kernel. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "metadata.h"
#include "harness.h"

#define PAGE 4096u

/* Built a second time as test_meta_16k: the system's pages look 16 KiB
 * large to the library (sysconf defined here wins over the C library's),
 * as on many aarch64 systems. Only whole system pages can be given back;
 * a page freed next to one in use stays, and is cleared when reused. */
#ifdef TEST_SYSTEM_PAGE
#include <unistd.h>
long __sysconf(int name);
long sysconf(int name)
{
	return name == _SC_PAGESIZE ? TEST_SYSTEM_PAGE : __sysconf(name);
}
#define SYS_PAGES (TEST_SYSTEM_PAGE / PAGE)
#else
#define SYS_PAGES 1u
#endif
#define N 6000
#define SMALL_BYTES 2048 /* the largest record carved from a shared page */

struct rec {
	unsigned char *p;
	size_t n;
	unsigned group;
};
static struct rec recs[N];

static uint64_t seed = 12345;
static uint64_t rnd(void)
{
	seed ^= seed << 13;
	seed ^= seed >> 7;
	seed ^= seed << 17;
	return seed;
}

static size_t random_size(void)
{
	switch (rnd() % 4) {
	case 0:
		return 1 + rnd() % 128;
	case 1:
		return 1 + rnd() % 2048;
	case 2:
		return 2049 + rnd() % 40000;
	default:
		return 1 + rnd() % MB_META_MAX;
	}
}

static void check_zero_and_fill(struct rec *r, unsigned char tag)
{
	for (size_t i = 0; i < r->n; i++)
		ASSERT_EQ(r->p[i], 0);
	memset(r->p, tag, r->n);
}

/* No two live records overlap, and small records of different groups
 * never share a page. */
static void check_disjoint(int n)
{
	for (int i = 0; i < n; i++) {
		if (!recs[i].p)
			continue;
		for (int j = i + 1; j < n; j++) {
			if (!recs[j].p)
				continue;
			ASSERT(recs[i].p + recs[i].n <= recs[j].p || recs[j].p + recs[j].n <= recs[i].p);
			if (recs[i].n <= 2048 && recs[j].n <= 2048 && recs[i].group != recs[j].group)
				ASSERT_NE((uintptr_t)recs[i].p / PAGE, (uintptr_t)recs[j].p / PAGE);
		}
	}
}

static void free_all(void)
{
	for (int i = 0; i < N; i++)
		if (recs[i].p) {
			mb_meta_free(recs[i].p, recs[i].n);
			recs[i].p = NULL;
		}
}

/* Random churn with contents checked: records come zeroed, keep what was
 * written in them, and never overlap. */
TEST(churn)
{
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < N; i++) {
			struct rec *r = &recs[i];
			if (r->p && rnd() % 2) {
				for (size_t k = 0; k < r->n; k++)
					ASSERT_EQ(r->p[k], (unsigned char)i);
				mb_meta_free(r->p, r->n);
				r->p = NULL;
			} else if (!r->p && rnd() % 3 == 0) {
				r->n = random_size();
				r->group = (unsigned)(rnd() % MB_META_GROUPS);
				r->p = mb_meta_alloc_group(r->n, r->group);
				ASSERT_NE(r->p, NULL);
				ASSERT_EQ(((uintptr_t)r->p & 63), 0);
				check_zero_and_fill(r, (unsigned char)i);
			}
		}
	}
	check_disjoint(1500);
	free_all();
}

TEST(bad_requests)
{
	ASSERT_EQ(mb_meta_alloc(0), NULL);
	ASSERT_EQ(mb_meta_alloc(MB_META_MAX + 1), NULL);
	ASSERT_EQ(mb_meta_alloc_group(64, MB_META_GROUPS), NULL);
	void *p = mb_meta_alloc(MB_META_MAX);
	ASSERT_NE(p, NULL);
	ASSERT_EQ((uintptr_t)p % PAGE, 0);
	mb_meta_free(p, MB_META_MAX);
	mb_meta_free(NULL, 64); /* like free(NULL) */
}

/* Free everything: every page but the chunk headers goes back. */
TEST(free_pages_go_back)
{
	for (int i = 0; i < 500; i++) {
		recs[i].n = random_size();
		recs[i].group = (unsigned)(rnd() % MB_META_GROUPS);
		recs[i].p = mb_meta_alloc_group(recs[i].n, recs[i].group);
		ASSERT_NE(recs[i].p, NULL);
		memset(recs[i].p, 1, recs[i].n);
	}
	free_all();
	size_t before = mb_meta_resident();
	int failed;
	size_t released = mb_meta_release(&failed);
	ASSERT(!failed);
	ASSERT_GT(released, 0);
	ASSERT_EQ(mb_meta_resident(), before - released * PAGE);
	size_t chunks = mb_meta_mapped() / (2u << 20);
	/* The headers only, and the rest of the system page they end in. */
	ASSERT_LE(mb_meta_resident(), chunks * ((6 + SYS_PAGES - 1) / SYS_PAGES * SYS_PAGES) * PAGE);
	ASSERT_EQ(mb_meta_release(&failed), 0);
	ASSERT(!failed);
	NOTE("%zu chunk(s), %zu pages released", chunks, released);
}

/* A release the kernel refuses leaves the pages resident, to be released
 * by the next call. */
TEST(refused_release_is_retried)
{
	struct rec r = { mb_meta_alloc(8 * PAGE), 8 * PAGE, 0 };
	ASSERT_NE(r.p, NULL);
	memset(r.p, 1, r.n);
	mb_meta_free(r.p, r.n);
	size_t before = mb_meta_resident();
	int failed;
	mb_os_inject_fault(MB_FAULT_RELEASE, 0, 1);
	ASSERT_EQ(mb_meta_release(&failed), 0);
	ASSERT(failed);
	ASSERT_EQ(mb_os_faults_injected(MB_FAULT_RELEASE), 1);
	ASSERT_EQ(mb_meta_resident(), before);
	ASSERT_GT(mb_meta_release(&failed), 0);
	ASSERT(!failed);
	ASSERT_LT(mb_meta_resident(), before);
}

/* Released pages, and pages reused without a release, come back zeroed. */
TEST(reused_pages_are_zeroed)
{
	struct rec r = { mb_meta_alloc(3 * PAGE), 3 * PAGE, 0 };
	ASSERT_NE(r.p, NULL);
	check_zero_and_fill(&r, 0xAB);
	mb_meta_free(r.p, r.n);
	r.p = mb_meta_alloc(3 * PAGE);
	check_zero_and_fill(&r, 0xCD);
	mb_meta_free(r.p, r.n);
	int failed;
	mb_meta_release(&failed);
	r.p = mb_meta_alloc(3 * PAGE);
	check_zero_and_fill(&r, 0xEF);
	mb_meta_free(r.p, r.n);
	/* A small record on a page whose records were all freed. */
	struct rec s = { mb_meta_alloc(SMALL_BYTES), SMALL_BYTES, 0 };
	check_zero_and_fill(&s, 0x11);
	mb_meta_free(s.p, s.n);
	s.p = mb_meta_alloc(SMALL_BYTES);
	check_zero_and_fill(&s, 0x22);
	mb_meta_free(s.p, s.n);
}
