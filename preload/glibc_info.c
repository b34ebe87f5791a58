/* Layer 7: glibc's functions that describe and tune its heap (mallinfo,
 * mallinfo2, malloc_stats, malloc_info, mallopt, and their __libc_
 * names), answered for libmbuddy's heap in glibc's formats. Without them a
 * program would reach glibc's and read its arena, which holds nothing. */
#include "config.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "exports.h"
#include "init.h"
#include "stats.h"

/* A snapshot of the heap; all zero when it cannot be set up. */
static void snapshot(struct mb_snapshot *s)
{
	if (mb_process_init() == 0)
		mb_stats_snapshot(s);
	else
		memset(s, 0, sizeof *s);
}

/* Free pageblocks of the global pool in the part of the heap used so far:
 * the never touched rest of the reservation is not free memory of the
 * program's heap any more than unmapped address space is. */
static size_t pool_free_used_part(const struct mb_snapshot *s)
{
	return s->global_free - (s->nblocks - s->pb_high);
}

static size_t taken_bytes(const struct mb_snapshot *s)
{
	return s->pages_allocated << MB_PAGE_SHIFT;
}

static size_t live_bytes(const struct mb_snapshot *s)
{
	return (size_t)(s->counts.alloc_bytes - s->counts.freed_bytes);
}

static void fill_mallinfo2(struct mallinfo2 *mi)
{
	struct mb_snapshot s;
	snapshot(&s);
	*mi = (struct mallinfo2){ 0 };
	mi->arena = taken_bytes(&s);           /* slabs and large objects */
	mi->ordblks = pool_free_used_part(&s); /* free pageblocks */
	mi->hblks = s.large_objects;           /* page-granular objects */
	mi->uordblks = live_bytes(&s);
	mi->fordblks = mi->arena > mi->uordblks ? mi->arena - mi->uordblks : 0;
	mi->keepcost = s.global_resident * s.pb_bytes; /* idle, resident */
}

EXPORT struct mallinfo2 mallinfo2(void)
{
	struct mallinfo2 mi;
	fill_mallinfo2(&mi);
	return mi;
}

static struct mallinfo mallinfo_int(void)
{
	struct mallinfo2 m2;
	fill_mallinfo2(&m2);
	struct mallinfo mi = {
		.arena = (int)m2.arena, .ordblks = (int)m2.ordblks, .hblks = (int)m2.hblks,
		.hblkhd = (int)m2.hblkhd, .uordblks = (int)m2.uordblks, .fordblks = (int)m2.fordblks,
		.keepcost = (int)m2.keepcost,
	};
	return mi;
}

EXPORT struct mallinfo mallinfo(void)
{
	return mallinfo_int();
}

EXPORT struct mallinfo __libc_mallinfo(void)
{
	return mallinfo_int();
}

/* glibc's lines on stderr, the heap as its one arena. libmbuddy never maps
 * an object on its own, hence no mmap regions. */
EXPORT void malloc_stats(void)
{
	struct mb_snapshot s;
	snapshot(&s);
	size_t sys = taken_bytes(&s), used = live_bytes(&s);
	int saved = errno;
	fprintf(stderr,
		"Arena 0:\n"
		"system bytes     = %10zu\n"
		"in use bytes     = %10zu\n"
		"Total (incl. mmap):\n"
		"system bytes     = %10zu\n"
		"in use bytes     = %10zu\n"
		"max mmap regions = %10u\n"
		"max mmap bytes   = %10lu\n",
		sys, used, sys, used, 0u, 0ul);
	errno = saved;
}

/* glibc's XML: one <heap> per reclaim type, whose free blocks are the
 * <sizes>; the global pool and the reservation in the totals. Elements
 * with no equivalent here (fast bins, mmapped chunks, mprotect) are left
 * out rather than filled with zeros. */
static void xml_type(FILE *fp, const struct mb_snapshot *s, int t, size_t *count, size_t *bytes)
{
	size_t n = 0, b = 0;
	fprintf(fp, "<heap nr=\"%d\" type=\"%s\">\n<sizes>\n", t, mb_type_names[t]);
	for (unsigned o = 0; o < s->pb_order; o++) {
		size_t blk = MB_PAGE_SIZE << o, c = (size_t)s->nr_free[t][o];
		if (!c)
			continue;
		fprintf(fp, "  <size from=\"%zu\" to=\"%zu\" total=\"%zu\" count=\"%zu\"/>\n", blk, blk, c * blk, c);
		n += c;
		b += c * blk;
	}
	fprintf(fp,
		"</sizes>\n"
		"<total type=\"rest\" count=\"%zu\" size=\"%zu\"/>\n"
		"<system type=\"current\" size=\"%zu\"/>\n"
		"</heap>\n",
		n, b, s->pb_owned[t] * s->pb_bytes);
	*count += n;
	*bytes += b;
}

EXPORT int malloc_info(int options, FILE *fp)
{
	if (options != 0)
		return EINVAL; /* returned, not set, as glibc does */
	struct mb_snapshot s;
	snapshot(&s);
	size_t count = 0, bytes = 0, owned = 0;
	fputs("<malloc version=\"1\">\n", fp);
	for (int t = 0; t < MB_NTYPES; t++) {
		xml_type(fp, &s, t, &count, &bytes);
		owned += s.pb_owned[t];
	}
	size_t pool = pool_free_used_part(&s);
	fprintf(fp,
		"<total type=\"rest\" count=\"%zu\" size=\"%zu\"/>\n"
		"<total type=\"global\" count=\"%zu\" size=\"%zu\"/>\n"
		"<system type=\"current\" size=\"%zu\"/>\n"
		"<system type=\"max\" size=\"%zu\"/>\n"
		"<aspace type=\"total\" size=\"%zu\"/>\n"
		"</malloc>\n",
		count, bytes, pool, pool * s.pb_bytes, (owned + s.global_resident) * s.pb_bytes,
		s.pb_high * s.pb_bytes, s.region_bytes);
	return 0;
}

/* glibc's parameters are accepted, with glibc's answer, and change
 * nothing: libmbuddy has no fast bins, no top chunk to trim, no mmapped
 * chunks and no arenas. A parameter glibc does not know gets 0 (glibc
 * itself answers 1, which its manual calls a bug). */
EXPORT int mallopt(int param, int value)
{
	switch (param) {
	case M_MXFAST:
		/* glibc refuses fast bins above 80 * sizeof(size_t) / 4 bytes. */
		return value >= 0 && (size_t)value <= 80 * sizeof(size_t) / 4;
	case M_TRIM_THRESHOLD:
	case M_TOP_PAD:
	case M_MMAP_THRESHOLD:
	case M_MMAP_MAX:
	case M_CHECK_ACTION:
	case M_PERTURB:
	case M_ARENA_TEST:
	case M_ARENA_MAX:
		return 1;
	default:
		return 0;
	}
}

EXPORT int __libc_mallopt(int param, int value)
{
	return mallopt(param, value);
}
