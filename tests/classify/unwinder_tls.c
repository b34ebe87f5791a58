/* What libunwind allocates through malloc while libmbuddy unwinds a stack
 * stays away from the program's objects: glibc gives a dlopen'ed library's
 * thread-local variables a block from malloc in each thread that first
 * touches them, and libunwind's are touched by a thread's first unwind,
 * from inside an allocation. Such a block, among the program's objects of
 * its size, was overwritten by an overflow of theirs (the overflow test
 * crashed in unw_backtrace about once in a hundred runs); it must come
 * from slabs of the library's own key, which hold nothing of the
 * program's: objects of its size allocated after it, none on its page. Checked in the main thread and in a second one. Exit 77 when
 * libunwind's block is not the allocator's (glibc put it in static TLS).
 *
 * The same holds for dlopen's records of libunwind, allocated by whoever
 * loads it: the first unwinding allocation itself in a process with one
 * thread, a loader thread of libmbuddy's in one with others (with an
 * argument, a thread is started first and blocks until the end,
 * two_threads.h); that thread's slabs, abandoned at its exit, would
 * otherwise be adopted by the program's threads. */
#define _GNU_SOURCE 1
#include "classify_common.h"
#include "two_threads.h"

#include <link.h>
#include <malloc.h>
#include <stdint.h>
#include <string.h>

#define PAGE ((uintptr_t)4096)
#define OBJECTS 2048

/* Whether the program's objects of p's size keep off p's page: 64 KiB of
 * them and 64 more, at most OBJECTS, allocated now (filling its slabs'
 * free slots first), then freed. Not more: a site with 256 KiB live would
 * be set apart in a slab key of its own, whose slabs never share a page
 * with anything else's. */
static int expect_apart(const char *what, const void *p)
{
	size_t size = malloc_usable_size((void *)p);
	int n = (int)((64 << 10) / size) + 64;
	if (n > OBJECTS)
		n = OBJECTS;
	static void *obj[OBJECTS];
	int shared = 0;
	for (int i = 0; i < n; i++) {
		obj[i] = keep(malloc(size));
		if (obj[i] && ((uintptr_t)obj[i] & ~(PAGE - 1)) == ((uintptr_t)p & ~(PAGE - 1)))
			shared++;
	}
	for (int i = 0; i < n; i++)
		free(obj[i]);
	printf("%-28s %zu bytes: %d of the program's %d on its page (want 0)\n", what, size, shared, n);
	return shared != 0;
}

static int find_tls(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	if (info->dlpi_name && strstr(info->dlpi_name, "libunwind") && info->dlpi_tls_data) {
		*(void **)data = info->dlpi_tls_data;
		return 1;
	}
	return 0;
}

/* This thread's block of libunwind's thread-local variables, once its
 * allocations have made libmbuddy unwind; NULL if none came. */
static void *unwinder_tls(void)
{
	void *tls = NULL;
	for (long i = 0; i < (1L << 24) && !tls; i++) {
		free(keep(malloc(16 + (size_t)(i & 7) * 16)));
		if ((i & 1023) == 0)
			dl_iterate_phdr(find_tls, &tls);
	}
	return tls;
}

static int check(const char *thread)
{
	void *tls = unwinder_tls();
	if (!tls) {
		printf("%s: libunwind's thread-local block never appeared\n", thread);
		return 1;
	}
	if (pointer_type(tls) < 0) {
		printf("%s: libunwind's thread-local block %p is not libmbuddy's (static TLS)\n", thread, tls);
		return 77;
	}
	char what[64];
	snprintf(what, sizeof what, "%s: libunwind's TLS", thread);
	return expect_apart(what, tls);
}

static void *second(void *arg)
{
	*(int *)arg = check("second thread");
	return NULL;
}

int main(int argc, char **argv)
{
	(void)argv;
	pthread_t t;
	if (argc > 1 && second_thread_start() != 0)
		return 1;
	need_libmbuddy();
	/* dlopen's handle is the library's link_map, the start of the block
	 * the loader allocated for it. */
	void *map = dlopen(MB_LIBUNWIND_SONAME, RTLD_NOW | RTLD_NOLOAD);
	int rc0 = !map ? 1 : expect_apart(argc > 1 ? "link_map (loader thread)" : "link_map (loaded in place)", map);
	int rc = check("main thread"), rc2 = 1;
	if (pthread_create(&t, NULL, second, &rc2) != 0 || pthread_join(t, NULL) != 0)
		return 1;
	if (argc > 1)
		second_thread_end();
	if (rc0)
		return 1;
	if (rc == 77 || rc2 == 77)
		return 77;
	return rc || rc2;
}
