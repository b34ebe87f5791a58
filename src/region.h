/* The operating system. Reserves the heap region and the
 * out-of-band metadata mappings, and hands pages back to the kernel. */
#ifndef MB_REGION_H
#define MB_REGION_H

#include <stddef.h>
#include <stdint.h>

/* The system's page size (sysconf), which may be larger than the heap's own
 * 4 KiB pages: 16 or 64 KiB on some aarch64 and ppc64 systems. */
size_t mb_os_page_size(void);
#define MB_OS_PAGE_MIN ((size_t)4096)

/* Reserve `size` bytes of address space aligned to `align` (a power of two;
 * at least the system's page), MAP_NORESERVE, nothing touched. Returns
 * NULL on failure. */
void *mb_os_reserve(size_t size, size_t align);
/* Reserve room for n bytes of the allocator's own data, in whole pages
 * (zeroed, page-aligned); *bytes (if not NULL) gets the size reserved, to
 * give back to mb_os_unreserve. NULL on failure. */
void *mb_os_reserve_records(size_t n, size_t *bytes);
/* Return a reservation (tests only; the heap lives as long as the process). */
void mb_os_unreserve(void *p, size_t size);

/* Fork handlers of the mapping table (init.c). */
void mb_os_fork_prepare(void);
void mb_os_fork_parent(void);
void mb_os_fork_child(void);

/* The mappings reserved and not given back, [lo, hi): up to max into out;
 * *lost counts those that did not fit or were never recorded. */
struct mb_os_mapping {
	uintptr_t lo, hi;
	int use; /* enum mb_os_use */
};
/* What a mapping holds, for the report's account. */
enum mb_os_use {
	MB_USE_OTHER,   /* anything not said */
	MB_USE_HEAP,    /* the heap region */
	MB_USE_PAGES,   /* the buddy's page records and bitmaps */
	MB_USE_ARENA,   /* the metadata arena: slab descriptors, thread heaps */
	MB_USE_SITES,   /* classification's call-site tables */
	MB_USE_SAMPLES, /* classification's sample table */
	MB_USE_COUNT
};
/* Say what the mapping at p (as mb_os_reserve returned it) holds. */
void mb_os_set_use(void *p, int use);
size_t mb_os_mappings(struct mb_os_mapping *out, size_t max, size_t *lost);
/* Give the pages back to the kernel; they read as zero when next touched.
 * Returns 0 on success; -1 (EINVAL, nothing changed) for a range that is
 * not made of whole pages of the system, which stays resident. */
int mb_os_release(void *p, size_t size);

/* Transparent huge pages. The system's setting
 * (/sys/kernel/mm/transparent_hugepage/enabled): */
enum mb_os_thp { MB_THP_NONE = -1 /* no THP, or not a 2 MiB one */, MB_THP_NEVER = 0, MB_THP_MADVISE = 1,
		 MB_THP_ALWAYS = 2 };
int mb_os_thp_enabled(void);
/* MADV_HUGEPAGE over [p, p+size): faults there may take huge pages.
 * 0, or -1 with errno. */
int mb_os_hugepage(void *p, size_t size);
/* MADV_COLLAPSE over [p, p+size), 2 MiB aligned: the kernel builds huge
 * pages of what is mapped there now, faulting the rest in as zeros.
 * Returns 0, or the errno the kernel answered (EINVAL where it is not
 * supported, EAGAIN/ENOMEM where it could not now). */
int mb_os_collapse(void *p, size_t size);
/* How many of the 4 KiB pages of [p, p + npages pages) are resident
 * (mincore, MB_OS_RESIDENT_MAX pages at a time); -1 if it cannot say: a
 * page of the range not mapped, or a system page other than 4 KiB. */
#define MB_OS_RESIDENT_MAX 512
long mb_os_resident_pages(void *p, size_t npages);

/* Reserve the largest region not above `want` bytes, halving on failure
 * down to `min`. Sizes are rounded down to multiples of `align`.
 * Returns the base and writes the size obtained to *got. */
void *mb_os_reserve_region(size_t want, size_t min, size_t align, size_t *got);

/* Fault injection for tests: the next `after` calls succeed, then `count`
 * calls of that kind fail. Kinds: 0 = reserve (mmap), 1 = release (madvise),
 * 2 = collapse (MADV_COLLAPSE, which then answers EAGAIN). */
enum { MB_FAULT_RESERVE = 0, MB_FAULT_RELEASE = 1, MB_FAULT_COLLAPSE = 2, MB_FAULT_KINDS = 3 };
void mb_os_inject_fault(int kind, long after, long count);
unsigned long mb_os_faults_injected(int kind);

#endif
