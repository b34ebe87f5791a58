#include "config.h"
#include "region.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static _Atomic long fault_after[MB_FAULT_KINDS];
static _Atomic long fault_count[MB_FAULT_KINDS];
static _Atomic unsigned long fault_hits[MB_FAULT_KINDS];

void mb_os_inject_fault(int kind, long after, long count)
{
	atomic_store(&fault_after[kind], after);
	atomic_store(&fault_count[kind], count);
}

unsigned long mb_os_faults_injected(int kind)
{
	return atomic_load(&fault_hits[kind]);
}

/* True when this call must fail. Cheap when no fault is armed. */
static int fault_now(int kind)
{
	if (atomic_load_explicit(&fault_count[kind], memory_order_relaxed) <= 0)
		return 0;
	if (atomic_fetch_sub(&fault_after[kind], 1) > 0)
		return 0;
	if (atomic_fetch_sub(&fault_count[kind], 1) <= 0)
		return 0;
	atomic_fetch_add(&fault_hits[kind], 1);
	return 1;
}

size_t mb_os_page_size(void)
{
	static size_t page;
	if (!page) {
		long v = sysconf(_SC_PAGESIZE);
		page = v > 0 && !((size_t)v & ((size_t)v - 1)) ? (size_t)v : MB_OS_PAGE_MIN;
	}
	return page;
}

/* Every mapping this library made and still has, so that the report can
 * tell the allocator's own memory from the program's. A spin lock: the
 * table is touched at each reservation only. */
#define MAX_MAPPINGS 1024
static struct mb_os_mapping mappings[MAX_MAPPINGS];
static size_t nmappings, mappings_lost;
static _Atomic int mappings_busy;

static void mappings_lock(void)
{
	while (atomic_exchange_explicit(&mappings_busy, 1, memory_order_acquire))
		;
}

static void mappings_unlock(void)
{
	atomic_store_explicit(&mappings_busy, 0, memory_order_release);
}

static void mapping_add(uintptr_t lo, size_t size)
{
	mappings_lock();
	if (nmappings < MAX_MAPPINGS)
		mappings[nmappings++] = (struct mb_os_mapping){ lo, lo + size, MB_USE_OTHER };
	else
		mappings_lost++;
	mappings_unlock();
}

static void mapping_remove(uintptr_t lo)
{
	mappings_lock();
	for (size_t i = 0; i < nmappings; i++)
		if (mappings[i].lo == lo) {
			mappings[i] = mappings[--nmappings];
			break;
		}
	mappings_unlock();
}

void mb_os_set_use(void *p, int use)
{
	mappings_lock();
	for (size_t i = 0; i < nmappings; i++)
		if (mappings[i].lo == (uintptr_t)p)
			mappings[i].use = use;
	mappings_unlock();
}

/* Fork: held across it, so that the child's table is whole. */
void mb_os_fork_prepare(void)
{
	mappings_lock();
}

void mb_os_fork_parent(void)
{
	mappings_unlock();
}

void mb_os_fork_child(void)
{
	atomic_store_explicit(&mappings_busy, 0, memory_order_relaxed);
}

size_t mb_os_mappings(struct mb_os_mapping *out, size_t max, size_t *lost)
{
	mappings_lock();
	size_t n = nmappings < max ? nmappings : max;
	for (size_t i = 0; i < n; i++)
		out[i] = mappings[i];
	*lost = mappings_lost + (nmappings - n);
	mappings_unlock();
	return n;
}

void *mb_os_reserve(size_t size, size_t align)
{
	if (fault_now(MB_FAULT_RESERVE)) {
		errno = ENOMEM;
		return NULL;
	}
	/* Over-reserve, then trim both ends to reach the alignment; the ends
	 * trimmed are whole pages of the system. Even at the page's
	 * alignment a page is over-reserved and trimmed: the kernel places
	 * each new mapping right below the last one, and without the hole
	 * the trim leaves it merges the two, so that /proc/self/smaps, which
	 * the account reads mapping by mapping (account.c), would show the
	 * metadata inside the heap region's mapping. */
	size_t page = mb_os_page_size();
	if (align < page)
		align = page;
	size = (size + page - 1) & ~(page - 1);
	size_t span = size + align;
	if (span < size)
		return NULL;
	char *p = mmap(NULL, span, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	uintptr_t start = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
	size_t head = start - (uintptr_t)p;
	size_t tail = span - head - size;
	if (head)
		munmap(p, head);
	if (tail)
		munmap((char *)start + size, tail);
	mapping_add(start, size);
	return (void *)start;
}

/* The kernel's page: the unit of every mapping. */
#define OS_PAGE ((size_t)4096)

void *mb_os_reserve_records(size_t n, size_t *bytes)
{
	size_t len = (n + OS_PAGE - 1) & ~(OS_PAGE - 1);
	if (bytes)
		*bytes = len;
	return mb_os_reserve(len, OS_PAGE);
}

void mb_os_unreserve(void *p, size_t size)
{
	mapping_remove((uintptr_t)p);
	munmap(p, size);
}

int mb_os_release(void *p, size_t size)
{
	if (fault_now(MB_FAULT_RELEASE))
		return -1;
	/* The kernel rounds the length up to its page size, which can be
	 * larger than the heap's 4 KiB pages (16 or 64 KiB on some aarch64
	 * and ppc64 systems): a range of 4 KiB pages inside one system page
	 * would take live neighbours with it. Such a range stays. */
	size_t page = mb_os_page_size();
	if (((uintptr_t)p | size) & (page - 1)) {
		errno = EINVAL;
		return -1;
	}
	/* MADV_DONTNEED on private anonymous memory frees the pages now and
	 * guarantees zero-fill on the next touch, which calloc relies on. */
	return madvise(p, size, MADV_DONTNEED);
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

/* A small file of /sys read whole, without allocating; "" if unreadable. */
static void read_sys(const char *path, char *buf, size_t len)
{
	buf[0] = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
}

int mb_os_thp_enabled(void)
{
	char buf[128];
	read_sys("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", buf, sizeof buf);
	if (strncmp(buf, "2097152", 7) != 0 || mb_os_page_size() != OS_PAGE)
		return MB_THP_NONE;
	read_sys("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf);
	/* The setting in force is in brackets: "always [madvise] never". */
	if (strstr(buf, "[always]"))
		return MB_THP_ALWAYS;
	if (strstr(buf, "[madvise]"))
		return MB_THP_MADVISE;
	return strstr(buf, "[never]") ? MB_THP_NEVER : MB_THP_NONE;
}

int mb_os_hugepage(void *p, size_t size)
{
	return madvise(p, size, MADV_HUGEPAGE);
}

int mb_os_collapse(void *p, size_t size)
{
	if (fault_now(MB_FAULT_COLLAPSE))
		return EAGAIN;
	return madvise(p, size, MADV_COLLAPSE) == 0 ? 0 : errno;
}

long mb_os_resident_pages(void *p, size_t npages)
{
	unsigned char vec[MB_OS_RESIDENT_MAX];
	if (mb_os_page_size() != OS_PAGE)
		return -1;
	long n = 0;
	for (size_t done = 0; done < npages;) {
		size_t k = npages - done < MB_OS_RESIDENT_MAX ? npages - done : MB_OS_RESIDENT_MAX;
		if (mincore((char *)p + done * OS_PAGE, k * OS_PAGE, vec) != 0)
			return -1;
		for (size_t i = 0; i < k; i++)
			n += vec[i] & 1;
		done += k;
	}
	return n;
}

void *mb_os_reserve_region(size_t want, size_t min, size_t align, size_t *got)
{
	for (size_t sz = want & ~(align - 1); sz >= min && sz >= align; sz = (sz / 2) & ~(align - 1)) {
		void *p = mb_os_reserve(sz, align);
		if (p) {
			*got = sz;
			return p;
		}
	}
	*got = 0;
	return NULL;
}
