/* glibc's functions beyond malloc/free, as a program sees them under
 * LD_PRELOAD=libmbuddy.so: the reports malloc_stats and malloc_info
 * describe libmbuddy's heap (not glibc's empty arena), C23's free_sized
 * and free_aligned_sized free libmbuddy's objects, mallopt answers as
 * glibc does for the parameters glibc accepts, aligned_alloc refuses an
 * alignment that is not a power of two (glibc 2.38) while memalign rounds
 * it up, and the __libc_ names of mallinfo and mallopt are libmbuddy's. */
#define _GNU_SOURCE 1
#include "ptest.h"

#include <malloc.h>

#define MiB ((size_t)1 << 20)

typedef void (*free_sized_fn)(void *, size_t);
typedef void (*free_aligned_sized_fn)(void *, size_t, size_t);
typedef int (*mallopt_fn)(int, int);
typedef struct mallinfo (*mallinfo_fn)(void);

static void test_interposition(void)
{
	static const char *const names[] = {
		"malloc_stats", "malloc_info", "free_sized", "free_aligned_sized",
		"__libc_mallinfo", "__libc_mallopt", "mallinfo", "mallinfo2", "mallopt", NULL,
	};
	pt_check_interposed(names);
}

/* ---- mallopt ---- */

static void test_mallopt(void)
{
	static const struct {
		int param, value, want;
	} cases[] = {
		{ M_MXFAST, 0, 1 },          { M_MXFAST, 64, 1 },       { M_MXFAST, 160, 1 },
		{ M_MXFAST, 161, 0 },        { M_MXFAST, -1, 0 },       { M_TRIM_THRESHOLD, 128 << 10, 1 },
		{ M_TOP_PAD, 0, 1 },         { M_MMAP_THRESHOLD, 1 << 20, 1 }, { M_MMAP_MAX, 0, 1 },
		{ M_CHECK_ACTION, 3, 1 },    { M_PERTURB, 0xa5, 1 },    { M_PERTURB, 0, 1 },
		{ M_ARENA_TEST, 8, 1 },      { M_ARENA_MAX, 1, 1 },     { M_ARENA_MAX, 0, 1 },
		/* Parameters glibc does not know (it answers 1, a documented bug). */
		{ M_NLBLKS, 1, 0 },          { M_GRAIN, 1, 0 },         { M_KEEP, 1, 0 },
		{ 0, 1, 0 },                 { 12345, 1, 0 },
	};
	mallopt_fn libc_mallopt = (mallopt_fn)pt_sym("__libc_mallopt");
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int p = cases[i].param, v = cases[i].value, want = cases[i].want;
		if (!pt_mbuddy && want == 0 && p != M_MXFAST)
			continue; /* glibc answers 1 */
		int got = mallopt(p, v);
		PT_CHECK(got == want, "mallopt(%d, %d) = %d, want %d", p, v, got, want);
		if (libc_mallopt) {
			got = libc_mallopt(p, v);
			PT_CHECK(got == want, "__libc_mallopt(%d, %d) = %d, want %d", p, v, got, want);
		}
	}
	/* They change nothing: allocation goes on as before. */
	unsigned char *q = malloc(100);
	PT_REQUIRE(q != NULL, "malloc after mallopt");
	q[0] = 1;
	free(q);
}

/* ---- aligned_alloc and memalign ---- */

static void test_alignment_errors(void)
{
	size_t bad[] = { 0, 3, 24, 48, 100, 4097, 3 << 20 };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		size_t a = pt_hide_size(bad[i]);
		errno = 0;
		void *p = aligned_alloc(a, 64);
		PT_CHECK(p == NULL && errno == EINVAL, "aligned_alloc(%zu, 64) = %p, errno %d; want NULL, EINVAL", a, p,
		         errno);
		if (p)
			free(p);
		if (a == 0)
			continue;
		size_t up = 1;
		while (up < a)
			up <<= 1;
		p = memalign(a, 64);
		PT_CHECK(p && ((uintptr_t)p & (up - 1)) == 0, "memalign(%zu, 64) = %p, want aligned to %zu", a, p, up);
		free(p);
	}
	void *p = aligned_alloc(pt_hide_size(64), 64);
	PT_CHECK(p && ((uintptr_t)p & 63) == 0, "aligned_alloc(64, 64) = %p", p);
	free(p);
}

/* ---- free_sized, free_aligned_sized ---- */

static size_t live(void)
{
	return mallinfo2().uordblks;
}

static void test_sized_frees(void)
{
	free_sized_fn fs = (free_sized_fn)pt_sym("free_sized");
	free_aligned_sized_fn fas = (free_aligned_sized_fn)pt_sym("free_aligned_sized");
	if (!pt_mbuddy && (!fs || !fas)) {
		pt_msg("note: this C library has no free_sized; skipped");
		return;
	}
	PT_REQUIRE(fs && fas, "free_sized or free_aligned_sized is not defined");
	fs(NULL, 10);
	fas(NULL, 64, 10);

	/* Live bytes fall by what was freed, small and large. */
	size_t sizes[] = { 1, 100, 1000, 16384, 100000, 5 * MiB };
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t n = sizes[i];
		enum { N = 64 };
		void *v[N];
		size_t before = live();
		for (int k = 0; k < N; k++) {
			v[k] = malloc(n);
			PT_REQUIRE(v[k] != NULL, "malloc(%zu)", n);
			memset(v[k], 0x5a, n);
		}
		size_t mid = live();
		for (int k = 0; k < N; k++)
			fs(pt_hide(v[k]), n);
		size_t after = live();
		/* Slack for what another thread may allocate meanwhile: the
		 * allocator's purge thread can start during the frees, and
		 * glibc's pthread_create allocates its thread's TLS vector. */
		const size_t slack = 4096;
		PT_CHECK(mid + slack >= before + N * n && after + N * n <= mid + slack,
		         "free_sized of %d objects of %zu bytes: live bytes %zu -> %zu -> %zu", N, n, before, mid, after);
	}
	/* realloc shrinks in place: the new size is the one to give. */
	char *r = malloc(120);
	PT_REQUIRE(r != NULL, "malloc(120)");
	r = realloc(r, 100);
	PT_REQUIRE(r != NULL, "realloc(100)");
	fs(pt_hide(r), 100);

	size_t aligns[] = { 16, 64, 4096, 65536, 4 * MiB };
	for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
		size_t a = aligns[i], n = 3 * a + 5;
		size_t before = live();
		void *p = aligned_alloc(a, n);
		PT_REQUIRE(p != NULL, "aligned_alloc(%zu, %zu)", a, n);
		memset(p, 1, n);
		fas(pt_hide(p), a, n);
		size_t after = live();
		PT_CHECK(after <= before, "free_aligned_sized(%zu, %zu) left live bytes at %zu (were %zu)", a, n, after,
		         before);
	}
	/* calloc'd and realloc'd objects too. */
	void *c = calloc(10, 10);
	PT_REQUIRE(c != NULL, "calloc");
	fs(pt_hide(c), 100);
}

/* ---- malloc_stats ---- */

/* Run fn with stderr sent to a temporary file; its contents in buf. */
static void capture_stderr(void (*fn)(void), char *buf, size_t len)
{
	char path[] = "/tmp/glibc_api.XXXXXX";
	int fd = mkstemp(path);
	PT_REQUIRE(fd >= 0, "mkstemp");
	unlink(path);
	fflush(stderr);
	int saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	fn();
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	ssize_t n = pread(fd, buf, len - 1, 0);
	buf[n > 0 ? n : 0] = 0;
	close(fd);
}

static size_t field(const char *text, const char *label, int nth)
{
	const char *p = text;
	for (int i = 0; i <= nth; i++) {
		p = strstr(p, label);
		if (!p)
			return SIZE_MAX;
		p += strlen(label);
	}
	return (size_t)strtoull(p, NULL, 10);
}

static void test_malloc_stats(void)
{
	enum { N = 20 };
	void *keep[N];
	for (int i = 0; i < N; i++) {
		keep[i] = malloc(MiB);
		PT_REQUIRE(keep[i] != NULL, "malloc(1 MiB)");
		memset(keep[i], 1, MiB);
	}
	static char out[8192];
	capture_stderr(malloc_stats, out, sizeof out);
	size_t sys = field(out, "system bytes     =", 0), used = field(out, "in use bytes     =", 0);
	size_t tsys = field(out, "system bytes     =", 1), tused = field(out, "in use bytes     =", 1);
	PT_CHECK(strncmp(out, "Arena 0:\n", 9) == 0 && strstr(out, "Total (incl. mmap):\n") &&
		         strstr(out, "max mmap regions =") && strstr(out, "max mmap bytes   ="),
	         "malloc_stats() is not in glibc's format:\n%s", out);
	PT_CHECK(used != SIZE_MAX && used >= N * MiB, "malloc_stats(): in use bytes %zu with %d MiB live:\n%s", used, N,
	         out);
	PT_CHECK(sys != SIZE_MAX && sys >= used, "malloc_stats(): system bytes %zu < in use bytes %zu", sys, used);
	PT_CHECK(tsys == sys && tused == used, "malloc_stats(): the totals differ from the one arena:\n%s", out);
	for (int i = 0; i < N; i++)
		free(keep[i]);
}

/* ---- malloc_info ---- */

/* The attribute name="..." of the first element that starts with tag. */
static size_t xml_attr(const char *xml, const char *tag, const char *name)
{
	const char *p = strstr(xml, tag);
	if (!p)
		return SIZE_MAX;
	const char *end = strchr(p, '>');
	char key[64];
	snprintf(key, sizeof key, " %s=\"", name);
	const char *a = strstr(p, key);
	if (!a || (end && a > end))
		return SIZE_MAX;
	return (size_t)strtoull(a + strlen(key), NULL, 10);
}

static void test_malloc_info(void)
{
	/* Two large objects in one pageblock, the first freed: free blocks
	 * of some order now sit on a type's lists. */
	void *a = malloc(MiB), *b = malloc(MiB);
	PT_REQUIRE(a && b, "malloc(1 MiB) x 2");
	memset(a, 1, MiB);
	memset(b, 1, MiB);
	free(a);
	void *keep = malloc(10 * MiB);
	PT_REQUIRE(keep != NULL, "malloc(10 MiB)");
	memset(keep, 2, 10 * MiB);

	char *xml = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&xml, &len);
	PT_REQUIRE(f != NULL, "open_memstream");
	int rc = malloc_info(0, f);
	fclose(f);
	PT_CHECK(rc == 0, "malloc_info(0, f) = %d", rc);
	PT_REQUIRE(xml != NULL, "no output");
	PT_CHECK(strncmp(xml, "<malloc version=\"1\">\n", 21) == 0 && strstr(xml, "</malloc>\n"),
	         "malloc_info: not glibc's XML:\n%.400s", xml);
	if (pt_mbuddy) {
		PT_CHECK(strstr(xml, "<heap nr=\"0\" type=\"KernNoRclm\">") && strstr(xml, "<heap nr=\"1\" type=\"KernRclm\">") &&
			         strstr(xml, "<heap nr=\"2\" type=\"UserRclm\">"),
		         "malloc_info: no heap per reclaim type:\n%.600s", xml);
		/* The free blocks listed add up to the totals. */
		size_t count = 0, bytes = 0, rows = 0;
		for (const char *p = strstr(xml, "<size "); p; p = strstr(p + 1, "<size ")) {
			count += xml_attr(p, "<size ", "count");
			bytes += xml_attr(p, "<size ", "total");
			rows++;
		}
		const char *tail = strstr(xml, "</heap>\n<total type=\"rest\"");
		PT_REQUIRE(tail != NULL, "malloc_info: no totals after the heaps:\n%s", xml);
		size_t tcount = xml_attr(tail, "<total type=\"rest\"", "count");
		size_t tsize = xml_attr(tail, "<total type=\"rest\"", "size");
		PT_CHECK(rows > 0, "malloc_info: no free block listed after a free(1 MiB):\n%s", xml);
		PT_CHECK(count == tcount && bytes == tsize, "malloc_info: sizes add up to %zu blocks, %zu bytes; totals %zu, %zu",
		         count, bytes, tcount, tsize);
		size_t sys = xml_attr(tail, "<system type=\"current\"", "size");
		size_t aspace = xml_attr(tail, "<aspace type=\"total\"", "size");
		PT_CHECK(sys != SIZE_MAX && sys >= 11 * MiB, "malloc_info: system current %zu with 11 MiB live", sys);
		PT_CHECK(aspace != SIZE_MAX && aspace >= sys && aspace >= ((size_t)1 << 30),
		         "malloc_info: aspace total %zu (the reservation)", aspace);
	}
	free(xml);
	errno = 0;
	f = fopen("/dev/null", "w");
	PT_REQUIRE(f != NULL, "fopen(/dev/null)");
	rc = malloc_info(1, f);
	fclose(f);
	PT_CHECK(rc == EINVAL, "malloc_info(1, f) = %d, want EINVAL", rc);
	free(b);
	free(keep);
}

/* ---- __libc_mallinfo ---- */

static void test_libc_mallinfo(void)
{
	mallinfo_fn mi = (mallinfo_fn)pt_sym("__libc_mallinfo");
	PT_REQUIRE(mi != NULL, "__libc_mallinfo is not defined");
	void *p = malloc(8 * MiB);
	PT_REQUIRE(p != NULL, "malloc(8 MiB)");
	struct mallinfo m = mi();
	size_t l = live();
	PT_CHECK((size_t)m.uordblks >= 8 * MiB && (size_t)m.uordblks <= l + MiB,
	         "__libc_mallinfo().uordblks = %d with 8 MiB live (mallinfo2: %zu)", m.uordblks, l);
	free(p);
}

/* ---- mallinfo2().ordblks ----
 * As libmbuddy(3) says: the whole free pageblocks of the global pool in
 * the part of the heap used so far, not the never touched rest of the
 * reservation (which would read thousands in a fresh process). */

static void test_ordblks(void)
{
	if (!pt_mbuddy)
		return; /* glibc counts its free chunks */
	size_t pb = 4 * MiB; /* the default pageblock (MBUDDY_MAX_ORDER 11) */
	size_t reserved = 16384; /* pageblocks of the default 64 GiB heap */
	unsigned char *p = malloc(pt_hide_size(6 * pb));
	PT_REQUIRE(p != NULL, "malloc of six pageblocks");
	p[0] = 1;
	p[6 * pb - 1] = 1;
	size_t held = mallinfo2().ordblks;
	free(pt_hide(p));
	size_t after = mallinfo2().ordblks;
	PT_CHECK(after >= held + 5 && after <= held + 7, "ordblks %zu with six pageblocks live, %zu once they are freed",
	         held, after);
	PT_CHECK(after < reserved / 4, "ordblks %zu: the never used part of the %zu pageblocks counted?", after,
	         reserved);
}

int main(int argc, char **argv)
{
	pt_only = argc > 1 ? argv[1] : NULL; /* with an argument, only the test of that name */
	pt_init("glibc_api");
	pt_watchdog(120);
	PT_RUN(test_interposition);
	PT_RUN(test_mallopt);
	PT_RUN(test_alignment_errors);
	PT_RUN(test_sized_frees);
	PT_RUN(test_malloc_stats);
	PT_RUN(test_malloc_info);
	PT_RUN(test_libc_mallinfo);
	PT_RUN(test_ordblks);
	return pt_finish();
}
