/* Fault injection and heap exhaustion against the libmbuddy core, linked in
 * directly (no preload; tests/fault/fault.test runs this program).
 *
 * With MBUDDY_HEAP_SIZE=32M (8 pageblocks of 4 MiB) and MBUDDY_DECAY_MS=0
 * (every slow path purges), it
 *  - makes mmap fail (mb_os_inject_fault(MB_FAULT_RESERVE, ...)) while the
 *    heap initialises (region, page records, call-site tables), when the
 *    first thread cache and the first slab descriptor are made, when the
 *    metadata arena grows in the middle of filling the heap, and when a
 *    new thread makes its cache;
 *  - drives the heap to exhaustion in the middle of every size path: slab
 *    objects (64 B), page objects (64 KiB), multi-pageblock runs (12 MiB),
 *    realloc growth; every failure must be NULL with errno ENOMEM and leave
 *    the old block alone, every other entry point must fail cleanly while
 *    the heap is full, then after freeing some memory allocations work
 *    again and every survivor still holds its contents;
 *  - makes madvise fail (MB_FAULT_RELEASE) at chosen points of purges, and
 *    all the time while memory churns: nothing may be lost, and calloc must
 *    still return zeroed memory from pages that could not be released;
 *  - after each part runs mb_buddy_check() and, once everything is freed and
 *    this thread's cache flushed (mb_trim), requires every pageblock back in
 *    the global pool: nothing leaked.
 * It prints the number of injected faults the heap survived.
 *
 * Exit status: 0 pass, 1 fail (Automake protocol). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc.h"
#include "buddy.h"
#include "heap.h"
#include "init.h"
#include "metadata.h"
#include "region.h"
#include "theap.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define HEAP (32 * MiB)
#define PB (4 * MiB)

static const char *phase = "start";

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("fault_inject: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
}

#define REQUIRE(cond, ...)                                                           \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fflush(stdout);                                              \
			fprintf(stderr, "fault_inject: FAIL [%s] %s:%d: %s\n  ", phase, \
				__FILE__, __LINE__, #cond);                          \
			fprintf(stderr, __VA_ARGS__);                                \
			fprintf(stderr, "\n");                                       \
			exit(1);                                                     \
		}                                                                    \
	} while (0)

/* Keep the compiler from reasoning about allocator results. */
static inline void *hide(void *p)
{
	__asm__ volatile("" : "+r"(p) : : "memory");
	return p;
}

/* ---- contents ---- */

static inline uint8_t pat(uint32_t tag, size_t i)
{
	return (uint8_t)(tag * 131u + i * 7u + (i >> 12));
}

/* The bytes of an n-byte object that carry its tag: all of a small one;
 * for larger ones, 64 bytes at each page start and the last 256 bytes.
 * Only those below `limit` are written or checked. */
static void tag_walk(unsigned char *p, size_t n, size_t limit, uint32_t tag, int check, const char *what)
{
	size_t step = n <= 8 * KiB ? n : MB_PAGE_SIZE;
	size_t span = n <= 8 * KiB ? n : 64;
	if (limit > n)
		limit = n;
	for (size_t o = 0; o < limit; o += step) {
		size_t end = o + span < limit ? o + span : limit;
		for (size_t i = o; i < end; i++) {
			if (!check)
				p[i] = pat(tag, i);
			else
				REQUIRE(p[i] == pat(tag, i), "%s: object %p (%zu bytes, tag %u) corrupted at offset %zu",
					what, (void *)p, n, tag, i);
		}
	}
	for (size_t i = n > 256 ? n - 256 : 0; i < limit; i++) {
		if (!check)
			p[i] = pat(tag, i);
		else
			REQUIRE(p[i] == pat(tag, i), "%s: object %p (%zu bytes, tag %u) corrupted at offset %zu", what,
				(void *)p, n, tag, i);
	}
}

static void tag_fill(void *p, size_t n, uint32_t tag)
{
	tag_walk(p, n, n, tag, 0, NULL);
}

static void tag_check(void *p, size_t n, uint32_t tag, const char *what)
{
	tag_walk(p, n, n, tag, 1, what);
}

/* After a realloc from `old` bytes to `now`: what was tagged below `now`
 * is still there; then the block is tagged for its new size. */
static void tag_moved(void *p, size_t old, size_t now, uint32_t tag, const char *what)
{
	tag_walk(p, old, now, tag, 1, what);
	tag_fill(p, now, tag);
}

static void zero_check(const void *p, size_t n, const char *what)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++) {
		if (n > MiB && (i & (MB_PAGE_SIZE - 1)) == 256)
			i = (i | (MB_PAGE_SIZE - 1)) - 255; /* large: the ends of every page */
		if (i >= n)
			break;
		REQUIRE(c[i] == 0, "%s: byte %zu of %zu is 0x%02x, not zero", what, i, n, c[i]);
	}
}

/* ---- the heap's own view ---- */

static void check_heap(const char *when)
{
	char err[512];
	mb_heap_lock();
	int rc = mb_buddy_check(&mb_heap.buddy, err, sizeof err);
	mb_heap_unlock();
	REQUIRE(rc == 0, "buddy check %s: %s", when, err);
}

static size_t nr_global(void)
{
	mb_heap_lock();
	size_t n = mb_heap.buddy.nr_global;
	mb_heap_unlock();
	return n;
}

/* Everything is free: after flushing this thread's cache, every pageblock
 * must be back in the global pool. */
static void expect_empty(const char *when)
{
	mb_trim();
	check_heap(when);
	struct mb_buddy *b = &mb_heap.buddy;
	mb_heap_lock();
	size_t g = b->nr_global, nb = b->nblocks, pages = b->pages_allocated;
	uint64_t slab_pages = mb_heap.slab_pages, large = mb_heap.large_objects;
	mb_heap_unlock();
	REQUIRE(pages == 0 && slab_pages == 0 && large == 0,
		"%s: %zu pages allocated, %llu slab pages, %llu large objects with nothing live", when, pages,
		(unsigned long long)slab_pages, (unsigned long long)large);
	REQUIRE(g == nb, "%s: %zu of %zu pageblocks in the global pool: memory leaked", when, g, nb);
}

/* ---- a list of live objects ---- */

struct obj {
	void *p;
	size_t n;
	uint32_t tag;
};

struct objs {
	struct obj *v;
	size_t n, cap;
};

static uint32_t next_tag = 1;

static void objs_push(struct objs *o, void *p, size_t n)
{
	if (o->n == o->cap) {
		o->cap = o->cap ? o->cap * 2 : 1024;
		o->v = realloc(o->v, o->cap * sizeof(*o->v)); /* glibc: the core is not the process malloc */
		REQUIRE(o->v != NULL, "out of memory for the test's own bookkeeping");
	}
	uint32_t tag = next_tag++;
	tag_fill(p, n, tag);
	o->v[o->n++] = (struct obj){ p, n, tag };
}

static void objs_check(const struct objs *o, const char *what)
{
	for (size_t i = 0; i < o->n; i++)
		if (o->v[i].p)
			tag_check(o->v[i].p, o->v[i].n, o->v[i].tag, what);
}

static void obj_free(struct obj *x, const char *what)
{
	if (!x->p)
		return;
	tag_check(x->p, x->n, x->tag, what);
	errno = 1234;
	mb_free(x->p, "free");
	REQUIRE(errno == 1234, "free changed errno to %d", errno);
	x->p = NULL;
}

static void objs_free_all(struct objs *o, const char *what)
{
	for (size_t i = 0; i < o->n; i++)
		obj_free(&o->v[i], what);
	free(o->v);
	memset(o, 0, sizeof(*o));
}

/* Allocate n-byte objects of a type until the heap says no; returns how
 * many were obtained. Each failure must be ENOMEM. */
static size_t fill(struct objs *o, size_t n, int type, size_t max)
{
	size_t got = 0;
	while (got < max) {
		errno = 0;
		void *p = hide(mb_malloc(n, type));
		if (!p) {
			REQUIRE(errno == ENOMEM, "malloc(%zu) failed with errno %d, not ENOMEM", n, errno);
			break;
		}
		objs_push(o, p, n);
		got++;
	}
	return got;
}

/* While the heap is full: every entry point that needs new pages fails
 * with ENOMEM, and a failed realloc leaves its block alone. */
static void everything_fails(struct obj *victim, int slabs_too)
{
	static const size_t sizes[] = { 20 * KiB, 64 * KiB, 1 * MiB, 4 * MiB, 12 * MiB };
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		for (int t = 0; t < MB_NTYPES; t++) {
			errno = 0;
			void *p = hide(mb_malloc(sizes[i], t));
			REQUIRE(!p && errno == ENOMEM, "malloc(%zu, type %d) = %p, errno %d on a full heap", sizes[i], t,
				p, errno);
		}
		errno = 0;
		void *p = hide(mb_calloc(1, sizes[i], MB_USERRCLM));
		REQUIRE(!p && errno == ENOMEM, "calloc(1, %zu) = %p, errno %d on a full heap", sizes[i], p, errno);
		errno = 0;
		p = hide(mb_memalign(2 * MiB, sizes[i], MB_KERNRCLM));
		REQUIRE(!p && errno == ENOMEM, "memalign(2M, %zu) = %p, errno %d on a full heap", sizes[i], p, errno);
		errno = 0;
		p = hide(mb_memalign(8 * MiB, sizes[i], MB_KERNRCLM));
		REQUIRE(!p && errno == ENOMEM, "memalign(8M, %zu) = %p, errno %d on a full heap", sizes[i], p, errno);
		if (victim && victim->n < sizes[i]) {
			errno = 0;
			p = hide(mb_realloc(victim->p, sizes[i], MB_KERNNORCLM, "realloc"));
			REQUIRE(!p && errno == ENOMEM, "realloc(%zu -> %zu) = %p, errno %d on a full heap", victim->n,
				sizes[i], p, errno);
			tag_check(victim->p, victim->n, victim->tag, "after a failed realloc");
		}
	}
	if (slabs_too) {
		/* Classes with nothing cached: they need a new slab. */
		static const size_t small[] = { 16, 200, 1000, 3000, 16384 };
		for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
			errno = 0;
			void *p = hide(mb_malloc(small[i], MB_USERRCLM));
			REQUIRE(!p && errno == ENOMEM, "malloc(%zu) = %p, errno %d on a full heap", small[i], p, errno);
		}
	}
	errno = 0;
	void *p = hide(mb_calloc((size_t)1 << 33, (size_t)1 << 33, MB_KERNNORCLM));
	REQUIRE(!p && errno == ENOMEM, "calloc overflow = %p, errno %d", p, errno);
	check_heap("while full");
}

/* ---- init faults: forked children of a process whose heap is untouched ---- */

static unsigned long *child_faults; /* shared with the children */

static unsigned long faults_now(void)
{
	return mb_os_faults_injected(MB_FAULT_RESERVE) + mb_os_faults_injected(MB_FAULT_RELEASE);
}

static void init_child(int scenario)
{
	mb_os_inject_fault(MB_FAULT_RESERVE, scenario == 2 ? 1 : scenario == 3 ? 2 : 0,
			   scenario == 0 ? 1 : scenario == 1 ? 1000 : scenario == 2 ? 1 : 1000);
	int rc = mb_process_init();
	if (scenario == 3) /* every table of classification failed; no more */
		mb_os_inject_fault(MB_FAULT_RESERVE, 0, 0);
	switch (scenario) {
	case 0: /* the region: the first try fails, half the size is taken */
		REQUIRE(rc == 0, "heap failed after one failed region mmap");
		REQUIRE(mb_heap.region_bytes == HEAP / 2, "region of %zu MiB after one failed mmap, want %zu",
			mb_heap.region_bytes >> 20, HEAP / 2 >> 20);
		break;
	case 1: /* every mmap fails: the heap is unusable, cleanly */
	case 2: /* the page records cannot be mapped */
		REQUIRE(rc != 0, "heap initialised though every mmap failed (scenario %d)", scenario);
		for (int i = 0; i < 2; i++) {
			void *p;
			errno = 0;
			p = hide(mb_malloc(64, MB_KERNNORCLM));
			REQUIRE(!p && errno == ENOMEM, "malloc(64) = %p errno %d without a heap", p, errno);
			errno = 0;
			p = hide(mb_malloc(MiB, MB_USERRCLM));
			REQUIRE(!p && errno == ENOMEM, "malloc(1M) = %p errno %d without a heap", p, errno);
			errno = 0;
			p = hide(mb_calloc(4, 100, MB_KERNRCLM));
			REQUIRE(!p && errno == ENOMEM, "calloc = %p errno %d without a heap", p, errno);
			errno = 0;
			p = hide(mb_memalign(4096, 100, MB_KERNRCLM));
			REQUIRE(!p && errno == ENOMEM, "memalign = %p errno %d without a heap", p, errno);
			errno = 0;
			p = hide(mb_realloc(NULL, 100, MB_KERNRCLM, "realloc"));
			REQUIRE(!p && errno == ENOMEM, "realloc(NULL) = %p errno %d without a heap", p, errno);
			mb_free(NULL, "free");
			REQUIRE(mb_usable_size(NULL, "malloc_usable_size") == 0, "usable size of NULL");
			REQUIRE(mb_trim() == 0, "trim without a heap released memory");
		}
		*child_faults += faults_now();
		return;
	case 3: /* the call-site tables: classification off, the heap works */
		REQUIRE(rc == 0, "heap failed when only the call-site tables could not be mapped");
		break;
	}
	struct objs o = { 0 };
	REQUIRE(fill(&o, 6 * MiB, MB_KERNRCLM, 1) == 1, "a 6 MiB run after an init fault");
	for (int t = 0; t < MB_NTYPES; t++) {
		REQUIRE(fill(&o, 64, t, 1000) == 1000, "64-byte objects after an init fault");
		REQUIRE(fill(&o, 100 * KiB, t, 10) == 10, "100 KiB objects after an init fault");
	}
	check_heap("after an init fault");
	objs_free_all(&o, "init child");
	expect_empty("init child");
	*child_faults += faults_now();
}

static void init_faults(void)
{
	phase = "init faults";
	static const char *const names[] = {
		"region mmap fails once", "every mmap fails", "page-record mmap fails", "call-site table mmaps fail",
	};
	for (int sc = 0; sc < 4; sc++) {
		fflush(stdout);
		pid_t pid = fork();
		REQUIRE(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			init_child(sc);
			fflush(stdout);
			_exit(0);
		}
		int st;
		REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid");
		REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0, "init scenario '%s' failed (status %#x)", names[sc], st);
		say("init: %s: survived", names[sc]);
	}
}

/* ---- metadata faults ---- */

/* The first small allocation makes the thread cache and a slab descriptor,
 * both from a fresh metadata chunk: fail both mmaps. */
static void first_metadata_faults(void)
{
	phase = "first metadata chunk";
	if (mb_meta_mapped() != 0) {
		say("metadata already mapped before main: first-chunk faults skipped");
		return;
	}
	unsigned long f0 = faults_now();
	mb_os_inject_fault(MB_FAULT_RESERVE, 0, 2);
	errno = 0;
	void *p = hide(mb_malloc(64, MB_KERNNORCLM));
	REQUIRE(faults_now() - f0 == 2, "%lu faults injected by the first small malloc, want 2", faults_now() - f0);
	REQUIRE(!p && errno == ENOMEM, "malloc(64) = %p errno %d without any metadata", p, errno);
	REQUIRE(mb_self.heap == NULL, "a thread cache exists though its mmap failed");
	REQUIRE(nr_global() == mb_heap.buddy.nblocks, "the slab's pageblock was not given back");
	check_heap("after the first metadata faults");
	/* One more failure: no cache, but the slab is made - the object comes
	 * straight from it. */
	mb_os_inject_fault(MB_FAULT_RESERVE, 0, 1);
	p = hide(mb_malloc(64, MB_KERNNORCLM));
	REQUIRE(p != NULL, "malloc(64) failed when only the thread cache could not be made");
	REQUIRE(mb_self.heap == NULL, "a thread cache exists though its mmap failed");
	struct objs o = { 0 };
	objs_push(&o, p, 64);
	REQUIRE(fill(&o, 64, MB_KERNNORCLM, 100) == 100, "malloc(64) once the faults are over");
	REQUIRE(mb_self.heap != NULL, "no thread cache once mmap works again");
	objs_free_all(&o, "first metadata faults");
	expect_empty("after the first metadata faults");
	say("metadata: thread cache and first slab descriptor mmaps failed: %lu faults survived", faults_now() - f0);
}

/* Fill the heap with 16-byte objects (the most slab descriptor bytes per
 * heap page) with one mmap failure armed: it hits when the metadata arena
 * has to grow, in the middle of the fill. The arena first has every free
 * page taken, up to a fresh chunk that the fill outgrows. */
static void arena_growth_fault(void)
{
	phase = "metadata arena growth";
	enum { MAXH = 8192 };
	static void *held[MAXH];
	int nheld = 0;
	mb_heap_lock();
	for (;;) {
		size_t m = mb_meta_mapped();
		REQUIRE(nheld < MAXH && (held[nheld] = mb_meta_alloc(4096)) != NULL, "cannot take metadata pages");
		nheld++;
		if (mb_meta_mapped() != m)
			break; /* a fresh chunk: its other pages are all the fill has */
	}
	mb_heap_unlock();
	unsigned long f0 = faults_now();
	size_t mapped0 = mb_meta_mapped();
	mb_os_inject_fault(MB_FAULT_RESERVE, 0, 1);
	struct objs o = { 0 };
	size_t got = 0, nulls = 0;
	for (;;) {
		unsigned long before = faults_now();
		errno = 0;
		void *p = hide(mb_malloc(16, MB_KERNRCLM));
		if (!p) {
			REQUIRE(errno == ENOMEM, "malloc(16) failed with errno %d", errno);
			nulls++;
			if (faults_now() == before)
				break; /* really full */
			check_heap("after a failed arena growth");
			continue;
		}
		objs_push(&o, p, 16);
		got++;
	}
	REQUIRE(faults_now() - f0 == 1, "the arena never grew while filling the heap (%zu objects, %zu KiB mapped)",
		got, mb_meta_mapped() >> 10);
	REQUIRE(mb_meta_mapped() > mapped0, "the arena did not grow after the fault");
	REQUIRE(got * 16 > HEAP / 2, "only %zu 16-byte objects from a 32 MiB heap", got);
	everything_fails(&o.v[o.n / 2], 1);
	objs_check(&o, "full of 16-byte objects");
	/* Free the most recent quarter: whole slabs; new objects fit again. */
	for (size_t i = o.n - o.n / 4; i < o.n; i++)
		obj_free(&o.v[i], "freeing a quarter");
	mb_trim();
	struct objs more = { 0 };
	REQUIRE(fill(&more, 16, MB_KERNRCLM, 1000) == 1000, "malloc(16) after freeing a quarter of the heap");
	REQUIRE(fill(&more, 64 * KiB, MB_USERRCLM, 4) == 4, "malloc(64K) after freeing a quarter of the heap");
	objs_check(&o, "after freeing a quarter");
	check_heap("after freeing a quarter");
	objs_free_all(&more, "arena growth");
	objs_free_all(&o, "arena growth");
	mb_heap_lock();
	for (int i = 0; i < nheld; i++)
		mb_meta_free(held[i], 4096);
	mb_heap_unlock();
	expect_empty("after the arena growth fault");
	say("metadata: arena growth failed mid-fill: %zu objects of 16 B, %zu NULL, heap full, recovered", got,
	    nulls);
}

/* A new thread whose cache cannot be made works without one. */
static size_t thread_allocs;
static void *thread_body(void *arg)
{
	(void)arg;
	struct objs o = { 0 };
	REQUIRE(fill(&o, 64, MB_USERRCLM, 1) == 1, "thread: first malloc(64) without a cache");
	REQUIRE(mb_self.heap == NULL, "thread: a cache exists though its mmap failed");
	REQUIRE(fill(&o, 64, MB_USERRCLM, 500) == 500, "thread: malloc(64) once mmap works again");
	REQUIRE(fill(&o, 1000, MB_KERNRCLM, 100) == 100, "thread: malloc(1000)");
	REQUIRE(mb_self.heap != NULL, "thread: still no cache once mmap works again");
	thread_allocs = o.n;
	objs_free_all(&o, "thread");
	return NULL;
}

static void thread_cache_fault(void)
{
	phase = "thread cache";
	unsigned long f0 = faults_now();
	/* Take every free metadata block of a thread cache's size, then the
	 * arena's bump space, until it must grow (one mmap failure is used up
	 * doing so): the new thread's cache needs a fresh chunk. */
	mb_free(hide(mb_malloc(64, MB_KERNNORCLM)), "free");
	REQUIRE(mb_self.heap != NULL, "the main thread has no cache");
	size_t tc_bytes = sizeof(*mb_self.heap);
	REQUIRE(tc_bytes <= MB_META_MAX, "a thread cache of %zu bytes", tc_bytes);
	enum { MAXB = 1024 };
	static void *held[MAXB];
	int nheld = 0;
	mb_os_inject_fault(MB_FAULT_RESERVE, 0, 1);
	mb_heap_lock();
	while (nheld < MAXB && (held[nheld] = mb_meta_alloc(tc_bytes)) != NULL)
		nheld++;
	mb_heap_unlock();
	REQUIRE(faults_now() - f0 == 1, "could not drain the metadata arena (%d blocks of %zu bytes)", nheld, tc_bytes);
	mb_os_inject_fault(MB_FAULT_RESERVE, 0, 1);
	pthread_t th;
	REQUIRE(pthread_create(&th, NULL, thread_body, NULL) == 0, "pthread_create");
	REQUIRE(pthread_join(th, NULL) == 0, "pthread_join");
	REQUIRE(faults_now() - f0 == 2, "the thread's cache did not hit the armed fault (%lu)", faults_now() - f0);
	mb_heap_lock();
	for (int i = 0; i < nheld; i++)
		mb_meta_free(held[i], tc_bytes);
	mb_heap_unlock();
	expect_empty("after the thread");
	say("metadata: a thread's cache could not be made: %zu allocations without and with it, %lu faults survived",
	    thread_allocs, faults_now() - f0);
}

/* ---- exhaustion in the middle of every size path ---- */

static void exhaust_slab(void)
{
	phase = "exhaustion: 64 B slab objects";
	struct objs o = { 0 };
	size_t got = fill(&o, 64, MB_KERNNORCLM, SIZE_MAX);
	REQUIRE(got * 64 > HEAP * 3 / 4, "only %zu 64-byte objects from a 32 MiB heap", got);
	REQUIRE(nr_global() == 0, "64-byte objects failed with pageblocks still in the global pool");
	everything_fails(&o.v[0], 1);
	objs_check(&o, "heap full of 64-byte objects");
	/* Free every other object: the 64-byte class works again, pages do not. */
	for (size_t i = 0; i < o.n; i += 2)
		obj_free(&o.v[i], "freeing every other");
	struct objs more = { 0 };
	REQUIRE(fill(&more, 64, MB_KERNNORCLM, got / 4) == got / 4, "malloc(64) after freeing half the objects");
	objs_check(&o, "after freeing every other");
	objs_check(&more, "new 64-byte objects");
	check_heap("after refilling");
	objs_free_all(&more, "slab path");
	objs_free_all(&o, "slab path");
	expect_empty("after the slab path");
	say("exhaustion: %zu objects of 64 B filled the heap; every path failed with ENOMEM; refilled", got);
}

static void exhaust_pages(void)
{
	phase = "exhaustion: 64 KiB page objects";
	mb_os_inject_fault(MB_FAULT_RELEASE, 3, 1000); /* purges fail too */
	unsigned long f0 = faults_now();
	struct objs o = { 0 };
	size_t got = 0;
	for (int t = 0;; t = (t + 1) % MB_NTYPES) {
		size_t k = fill(&o, 64 * KiB, t, 37);
		got += k;
		if (k < 37)
			break;
	}
	REQUIRE(got == HEAP / (64 * KiB), "%zu objects of 64 KiB from an empty 32 MiB heap, want %zu", got,
		HEAP / (64 * KiB));
	everything_fails(&o.v[1], 1);
	objs_check(&o, "heap full of 64 KiB objects");
	for (size_t i = 0; i < o.n; i += 2)
		obj_free(&o.v[i], "freeing every other");
	if (nr_global() < 3) {
		errno = 0;
		void *p = hide(mb_malloc(12 * MiB, MB_KERNRCLM));
		REQUIRE(!p && errno == ENOMEM, "12 MiB run = %p errno %d with %zu global pageblocks", p, errno,
			nr_global());
	}
	struct objs more = { 0 };
	REQUIRE(fill(&more, 64 * KiB, MB_USERRCLM, got / 2) == got / 2, "malloc(64K) after freeing half of them");
	REQUIRE(fill(&more, 64 * KiB, MB_USERRCLM, 1) == 0, "more 64 KiB objects than the heap holds");
	objs_check(&o, "after refilling");
	objs_check(&more, "new 64 KiB objects");
	check_heap("after refilling");
	objs_free_all(&more, "page path");
	objs_free_all(&o, "page path");
	mb_os_inject_fault(MB_FAULT_RELEASE, 0, 0);
	expect_empty("after the page path");
	say("exhaustion: %zu objects of 64 KiB filled the heap (and %lu madvise failures); refilled", got,
	    faults_now() - f0);
}

static void exhaust_runs(void)
{
	phase = "exhaustion: 12 MiB runs";
	struct objs runs = { 0 }, pages = { 0 };
	size_t got = fill(&runs, 12 * MiB, MB_KERNNORCLM, 10);
	REQUIRE(got == 2, "%zu runs of 12 MiB from an empty 32 MiB heap, want 2", got);
	size_t small = fill(&pages, 64 * KiB, MB_USERRCLM, SIZE_MAX);
	REQUIRE(small == 2 * PB / (64 * KiB), "%zu objects of 64 KiB beside two 12 MiB runs, want %zu", small,
		2 * PB / (64 * KiB));
	everything_fails(&runs.v[0], 1);
	errno = 0;
	void *p = hide(mb_realloc(runs.v[1].p, 16 * MiB, MB_KERNNORCLM, "realloc"));
	REQUIRE(!p && errno == ENOMEM, "realloc(12M -> 16M) = %p errno %d on a full heap", p, errno);
	/* Shrinking in place works on a full heap. */
	p = hide(mb_realloc(runs.v[1].p, 9 * MiB, MB_KERNNORCLM, "realloc"));
	REQUIRE(p != NULL, "realloc(12M -> 9M) failed on a full heap");
	runs.v[1].p = p;
	tag_moved(p, 12 * MiB, 9 * MiB, runs.v[1].tag, "after shrinking a run");
	runs.v[1].n = 9 * MiB;
	objs_check(&runs, "after shrinking a run");
	/* Free one run: a run of the same size fits again. */
	obj_free(&runs.v[0], "freeing a run");
	REQUIRE(fill(&runs, 12 * MiB, MB_KERNRCLM, 2) == 1, "12 MiB runs after freeing one");
	/* Free the page objects: the shrunk run grows back across pageblocks. */
	for (size_t i = 0; i < pages.n; i++)
		obj_free(&pages.v[i], "freeing the page objects");
	size_t grow = 16 * MiB;
	void *old = runs.v[1].p;
	p = hide(mb_realloc(runs.v[1].p, grow, MB_KERNNORCLM, "realloc"));
	REQUIRE(p != NULL, "realloc(9M -> 16M) failed with %zu global pageblocks", nr_global());
	tag_moved(p, 9 * MiB, grow, runs.v[1].tag, "run grown by realloc");
	runs.v[1].p = p;
	runs.v[1].n = grow;
	objs_check(&runs, "after growing a run");
	check_heap("after the run path");
	objs_free_all(&pages, "run path");
	objs_free_all(&runs, "run path");
	expect_empty("after the run path");
	say("exhaustion: two 12 MiB runs and %zu objects of 64 KiB filled the heap; refilled; grown %s", small,
	    p == old ? "in place" : "by moving");
}

static void exhaust_realloc(void)
{
	phase = "exhaustion: realloc growth";
	struct objs pins = { 0 };
	/* Something in the way: one object per pageblock-ish. */
	REQUIRE(fill(&pins, 200 * KiB, MB_KERNNORCLM, 3) == 3, "pins");
	REQUIRE(fill(&pins, 100, MB_KERNRCLM, 50) == 50, "small pins");
	unsigned char *p = hide(mb_malloc(24, MB_USERRCLM));
	REQUIRE(p != NULL, "malloc(24)");
	size_t n = 24, steps = 0;
	uint32_t tag = next_tag++;
	tag_fill(p, n, tag);
	for (;;) {
		size_t want = n + n / 2 + 40;
		errno = 0;
		unsigned char *q = hide(mb_realloc(p, want, MB_USERRCLM, "realloc"));
		if (!q) {
			REQUIRE(errno == ENOMEM, "realloc(%zu -> %zu) failed with errno %d", n, want, errno);
			tag_check(p, n, tag, "after the failed growth");
			break;
		}
		tag_moved(q, n, want, tag, "after realloc growth");
		p = q;
		n = want;
		steps++;
	}
	REQUIRE(n >= 8 * MiB, "realloc growth stopped at %zu bytes in a 32 MiB heap", n);
	size_t reached = n;
	/* Keep the heap full around it: other paths fail, shrinking works. */
	struct objs rest = { 0 };
	fill(&rest, 64 * KiB, MB_KERNRCLM, SIZE_MAX);
	fill(&rest, 64, MB_KERNRCLM, SIZE_MAX);
	struct obj big = { p, n, tag };
	everything_fails(&big, 0);
	unsigned char *q = hide(mb_realloc(p, n / 3, MB_USERRCLM, "realloc"));
	REQUIRE(q == p, "realloc shrink of a %zu-byte block moved or failed (%p)", n, (void *)q);
	tag_moved(p, n, n / 3, tag, "after shrinking");
	n /= 3;
	/* Growing back into what the shrink gave up works on the full heap. */
	q = hide(mb_realloc(p, n + n / 2, MB_USERRCLM, "realloc"));
	REQUIRE(q != NULL, "realloc could not grow back into pages it had just given up");
	tag_moved(q, n, n + n / 2, tag, "after growing back");
	p = q;
	n += n / 2;
	objs_check(&pins, "pins");
	objs_check(&rest, "the rest");
	check_heap("after realloc growth");
	struct obj last = { p, n, tag };
	obj_free(&last, "grown block");
	objs_free_all(&rest, "realloc path");
	objs_free_all(&pins, "realloc path");
	expect_empty("after the realloc path");
	say("exhaustion: realloc grew a block in %zu steps to %zu KiB, then ENOMEM; shrank and regrew it on a full heap",
	    steps, reached >> 10);
}

/* ---- madvise failures during purges ---- */

static void churn(struct objs *o, int calloc_too)
{
	static const size_t sizes[] = { 64, 3000, 20 * KiB, 64 * KiB, 300 * KiB };
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		for (int t = 0; t < MB_NTYPES; t++) {
			void *p;
			if (calloc_too) {
				p = hide(mb_calloc(1, sizes[i], t));
				REQUIRE(p != NULL, "calloc(%zu) failed on a near-empty heap", sizes[i]);
				zero_check(p, sizes[i], "calloc after failed releases");
			} else {
				p = hide(mb_malloc(sizes[i], t));
				REQUIRE(p != NULL, "malloc(%zu) failed on a near-empty heap", sizes[i]);
			}
			objs_push(o, p, sizes[i]);
			/* Make every page dirty. */
			memset(p, 0xA5, sizes[i]);
			tag_fill(p, sizes[i], o->v[o->n - 1].tag);
		}
	}
	void *a = hide(mb_malloc(4 * MiB, MB_KERNRCLM)), *b = hide(mb_malloc(6 * MiB, MB_USERRCLM));
	REQUIRE(a && b, "large blocks on a near-empty heap");
	memset(a, 0x5A, 4 * MiB);
	memset(b, 0x5A, 6 * MiB);
	objs_push(o, a, 4 * MiB);
	objs_push(o, b, 6 * MiB);
}

static void release_faults(void)
{
	phase = "madvise faults";
	unsigned long f0 = faults_now();
	struct mb_buddy *b = &mb_heap.buddy;
	/* One failure at each of the first releases of a purge of everything. */
	for (long after = 0; after < 12; after++) {
		struct objs o = { 0 };
		churn(&o, 0);
		mb_os_inject_fault(MB_FAULT_RELEASE, after, 1);
		objs_free_all(&o, "before the purge");
		mb_trim();
		mb_trim(); /* the fault is used up: what stayed resident goes now */
		REQUIRE(b->nr_dirty == 0, "%zu pageblocks still resident after two trims (fault after %ld)",
			b->nr_dirty, after);
		mb_os_inject_fault(MB_FAULT_RELEASE, 0, 0);
		expect_empty("after a failed release");
		/* Whatever was or was not released: calloc gives zeros. */
		struct objs z = { 0 };
		churn(&z, 1);
		objs_free_all(&z, "calloc after failed release");
		expect_empty("after calloc");
	}
	/* Neighbouring ranges go back in one call, so a purge of everything
	 * makes fewer calls than there are blocks: the later points may
	 * never come. */
	unsigned long single = faults_now() - f0;
	REQUIRE(single >= 6, "only %lu of 12 single release faults hit", single);

	/* Every release fails while memory churns: nothing goes back to the
	 * kernel, so nothing may be taken for zero. */
	mb_os_inject_fault(MB_FAULT_RELEASE, 0, 1L << 40);
	for (int round = 0; round < 4; round++) {
		struct objs o = { 0 };
		churn(&o, round & 1);
		objs_free_all(&o, "churn with failing releases");
		REQUIRE(mb_trim() == 0, "trim reported memory released while every madvise fails");
		check_heap("with failing releases");
	}
	REQUIRE(b->nr_dirty > 0, "no resident pageblock left though every release failed");
	mb_heap_lock();
	size_t resident = b->nr_dirty;
	mb_heap_unlock();
	struct objs z = { 0 };
	churn(&z, 1);
	objs_free_all(&z, "calloc with failing releases");
	mb_os_inject_fault(MB_FAULT_RELEASE, 0, 0);
	REQUIRE(mb_trim() == 1, "trim released nothing once madvise works again");
	REQUIRE(b->nr_dirty == 0, "%zu pageblocks still resident after trim", b->nr_dirty);
	expect_empty("after the failing releases");
	say("madvise: failures at the first 12 release points and during churn (%zu resident pageblocks kept): "
	    "%lu faults survived",
	    resident, faults_now() - f0);
}

/* ---- set-up ---- */

static void set_env(char **argv)
{
	static const char *const want[][2] = {
		{ "MBUDDY_HEAP_SIZE", "32M" },
		{ "MBUDDY_DECAY_MS", "0" },
		{ "MBUDDY_MAX_ORDER", "11" },
		{ "MBUDDY_CLASSIFY", "auto" },
		{ "MBUDDY_CHECK", "0" }, /* the exact counts assume no canaries */
		/* Faults are armed for the purges this program makes: a purge
		 * thread would take them at its own moments. */
		{ "MBUDDY_BACKGROUND", "0" },
	};
	static const char *const unwanted[] = {
		"MBUDDY_STATS", "MBUDDY_STATS_SIGNAL", "MBUDDY_PROFILE", "MBUDDY_RULES", "LD_PRELOAD",
	};
	int changed = 0;
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		const char *v = getenv(want[i][0]);
		if (!v || strcmp(v, want[i][1]) != 0) {
			setenv(want[i][0], want[i][1], 1);
			changed = 1;
		}
	}
	for (size_t i = 0; i < sizeof unwanted / sizeof unwanted[0]; i++)
		if (getenv(unwanted[i])) {
			unsetenv(unwanted[i]);
			changed = 1;
		}
	/* The options are read when the heap initialises: if a constructor
	 * did that already, start again with the right environment. */
	if (changed && __atomic_load_n(&mb_process_state, __ATOMIC_ACQUIRE) != MB_PROCESS_NEW) {
		execv("/proc/self/exe", argv);
		perror("fault_inject: execv /proc/self/exe");
		exit(1);
	}
}

int main(int argc, char **argv)
{
	(void)argc;
	set_env(argv);
	child_faults = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(child_faults != MAP_FAILED, "mmap");

	if (__atomic_load_n(&mb_process_state, __ATOMIC_ACQUIRE) == MB_PROCESS_NEW)
		init_faults();
	else
		say("the heap was initialised before main: init faults skipped");

	REQUIRE(mb_process_init() == 0, "the heap cannot be initialised");
	REQUIRE(mb_heap.region_bytes == HEAP && mb_heap.buddy.pb_pages * MB_PAGE_SIZE == PB,
		"heap of %zu MiB with %zu KiB pageblocks, want 32 MiB and 4 MiB", mb_heap.region_bytes >> 20,
		mb_heap.buddy.pb_pages * MB_PAGE_SIZE >> 10);
	check_heap("at start");

	first_metadata_faults();
	thread_cache_fault();
	exhaust_slab();
	exhaust_pages();
	exhaust_runs();
	exhaust_realloc();
	arena_growth_fault();
	release_faults();

	phase = "end";
	expect_empty("at the end");
	unsigned long reserve = mb_os_faults_injected(MB_FAULT_RESERVE), release = mb_os_faults_injected(MB_FAULT_RELEASE);
	say("PASS: survived %lu injected faults (%lu mmap, %lu madvise in this process, %lu in init children); "
	    "release failures counted by the buddy: %llu",
	    reserve + release + *child_faults, reserve, release, *child_faults,
	    (unsigned long long)mb_heap.buddy.count.release_failures);
	return 0;
}
