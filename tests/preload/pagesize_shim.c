/* Preloaded before libmbuddy: the system's pages look 16 KiB large to it
 * (sysconf, getpagesize), as on many aarch64 systems, and every
 * madvise(MADV_DONTNEED) is checked against that size. The kernel rounds
 * the length of such a call up to its pages, so a call that is not made of
 * whole pages would, on a real 16 KiB system, discard the live neighbours
 * of what it releases. At exit the counts are printed on stderr:
 *   pagesize_shim: N madvise(MADV_DONTNEED) calls, M not on whole 16 KiB pages
 * Only libmbuddy is told the fake size: libunwind, which checks memory
 * with mincore(), must see the kernel's real one. Nothing here allocates:
 * it runs inside the allocator's set-up. */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FAKE_PAGE ((size_t)16384)

long __sysconf(int name);
long sysconf(int name);
int getpagesize(void);
int madvise(void *addr, size_t len, int advice);

static unsigned long calls, unaligned;

/* Whether the code at pc belongs to libmbuddy. */
static int from_libmbuddy(void *pc)
{
	Dl_info info;
	return dladdr(pc, &info) && info.dli_fname && strstr(info.dli_fname, "libmbuddy");
}

long sysconf(int name)
{
	if (name == _SC_PAGESIZE && from_libmbuddy(__builtin_return_address(0)))
		return (long)FAKE_PAGE;
	return __sysconf(name);
}

int getpagesize(void)
{
	return from_libmbuddy(__builtin_return_address(0)) ? (int)FAKE_PAGE : (int)__sysconf(_SC_PAGESIZE);
}

int madvise(void *addr, size_t len, int advice)
{
	if (advice == MADV_DONTNEED) {
		__atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
		if (((uintptr_t)addr | len) & (FAKE_PAGE - 1))
			__atomic_fetch_add(&unaligned, 1, __ATOMIC_RELAXED);
	}
	return (int)syscall(SYS_madvise, addr, len, advice);
}

__attribute__((destructor(101))) static void report(void)
{
	char buf[160];
	int n = snprintf(buf, sizeof buf, "pagesize_shim: %lu madvise(MADV_DONTNEED) calls, %lu not on whole %zu KiB pages\n",
			 calls, unaligned, FAKE_PAGE >> 10);
	ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
	(void)w;
}
