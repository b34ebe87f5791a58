# Programs that run under LD_PRELOAD=libmbuddy.so (tests/preload/run-preloaded.sh,
# the LOG_COMPILER of tests without an extension). They link only against
# libc, libdl and libpthread; libmbuddy is found at run time with dlsym.
# -fno-builtin: the compiler must not fold, merge or drop the allocator
# calls under test (malloc+memset into calloc, malloc/free pairs, ...).
preload_cflags = $(AM_CFLAGS) -fno-builtin
preload_ldadd = -lpthread -ldl

preload_tests = \
	tests/preload/api_conformance \
	tests/preload/cxx_operators \
	tests/preload/threads_stress \
	tests/preload/remote_free \
	tests/preload/free_only_thread \
	tests/preload/fork_threads \
	tests/preload/fork_caches \
	tests/preload/dlopen_loop \
	tests/preload/exhaustion \
	tests/preload/background_purge \
	tests/preload/purge_thread_tls \
	tests/preload/overflow_metadata

check_PROGRAMS += $(preload_tests) tests/preload/misuse tests/preload/cache_aging
TESTS += $(preload_tests) tests/preload/misuse.test tests/preload/cache-aging.test
EXTRA_DIST += \
	tests/preload/run-preloaded.sh \
	tests/preload/misuse.test \
	tests/preload/cache-aging.test \
	tests/preload/exhaustion.env \
	tests/preload/glibc_api.env \
	tests/preload/free_only_thread.env

tests_preload_cache_aging_SOURCES = tests/preload/cache_aging.c tests/preload/ptest.h
tests_preload_cache_aging_CFLAGS = $(preload_cflags)
tests_preload_cache_aging_LDADD = $(preload_ldadd)

tests_preload_api_conformance_SOURCES = tests/preload/api_conformance.c tests/preload/ptest.h
tests_preload_api_conformance_CFLAGS = $(preload_cflags)
tests_preload_api_conformance_LDADD = $(preload_ldadd)

tests_preload_cxx_operators_SOURCES = tests/preload/cxx_operators.cc tests/preload/ptest.h
tests_preload_cxx_operators_CXXFLAGS = -std=gnu++17 -Wall -Wextra -fno-builtin
tests_preload_cxx_operators_LDADD = $(preload_ldadd)

tests_preload_threads_stress_SOURCES = tests/preload/threads_stress.c tests/preload/ptest.h
tests_preload_threads_stress_CFLAGS = $(preload_cflags)
tests_preload_threads_stress_LDADD = $(preload_ldadd)

tests_preload_remote_free_SOURCES = tests/preload/remote_free.c tests/preload/ptest.h
tests_preload_remote_free_CFLAGS = $(preload_cflags)
tests_preload_remote_free_LDADD = $(preload_ldadd)

tests_preload_free_only_thread_SOURCES = tests/preload/free_only_thread.c tests/preload/ptest.h
tests_preload_free_only_thread_CFLAGS = $(preload_cflags)
tests_preload_free_only_thread_LDADD = $(preload_ldadd)

tests_preload_background_purge_SOURCES = tests/preload/background_purge.c tests/preload/ptest.h
tests_preload_background_purge_CFLAGS = $(preload_cflags)
tests_preload_background_purge_LDADD = $(preload_ldadd)

tests_preload_purge_thread_tls_SOURCES = tests/preload/purge_thread_tls.c tests/preload/ptest.h
tests_preload_purge_thread_tls_CFLAGS = $(preload_cflags)
tests_preload_purge_thread_tls_LDADD = $(preload_ldadd)

tests_preload_fork_threads_SOURCES = tests/preload/fork_threads.c tests/preload/ptest.h
tests_preload_fork_threads_CFLAGS = $(preload_cflags)
tests_preload_fork_threads_LDADD = $(preload_ldadd)

tests_preload_fork_caches_SOURCES = tests/preload/fork_caches.c tests/preload/ptest.h
tests_preload_fork_caches_CFLAGS = $(preload_cflags)
tests_preload_fork_caches_LDADD = $(preload_ldadd)

tests_preload_dlopen_loop_SOURCES = tests/preload/dlopen_loop.c tests/preload/ptest.h
tests_preload_dlopen_loop_CFLAGS = $(preload_cflags)
tests_preload_dlopen_loop_LDADD = $(preload_ldadd)

# The module dlopen_loop loads: tests/preload/.libs/dlopen_lib.so.
check_LTLIBRARIES += tests/preload/dlopen_lib.la
tests_preload_dlopen_lib_la_SOURCES = tests/preload/dlopen_lib.c
tests_preload_dlopen_lib_la_LDFLAGS = -module -rpath /nowhere -avoid-version

# Libraries loaded with dlopen(RTLD_DEEPBIND), as Debian's php loads its
# extensions, and memory crossing between them and the program. The program
# finds them through its RUNPATH (new dtags: its own, not inherited) and
# $ORIGIN; deepbind.test runs it under glibc alone and under libmbuddy.
check_PROGRAMS += tests/preload/deepbind
tests_preload_deepbind_SOURCES = tests/preload/deepbind.c tests/preload/ptest.h
tests_preload_deepbind_CFLAGS = $(preload_cflags)
tests_preload_deepbind_LDADD = $(preload_ldadd)
tests_preload_deepbind_LDFLAGS = -Wl,--enable-new-dtags,-rpath,'$$ORIGIN/.libs'
check_LTLIBRARIES += tests/preload/deep_lib.la tests/preload/deep_lib_cxx.la
tests_preload_deep_lib_la_SOURCES = tests/preload/deep_lib.c
tests_preload_deep_lib_la_CFLAGS = $(AM_CFLAGS) -fno-builtin
tests_preload_deep_lib_la_LDFLAGS = -module -rpath /nowhere -avoid-version
tests_preload_deep_lib_cxx_la_SOURCES = tests/preload/deep_lib_cxx.cc
tests_preload_deep_lib_cxx_la_CXXFLAGS = -std=gnu++17 -Wall -Wextra -fno-builtin
tests_preload_deep_lib_cxx_la_LDFLAGS = -module -rpath /nowhere -avoid-version
TESTS += tests/preload/deepbind.test
EXTRA_DIST += tests/preload/deepbind.test

# Runs with MBUDDY_HEAP_SIZE=64M from tests/preload/exhaustion.env.
tests_preload_exhaustion_SOURCES = tests/preload/exhaustion.c tests/preload/ptest.h
tests_preload_exhaustion_CFLAGS = $(preload_cflags)
tests_preload_exhaustion_LDADD = $(preload_ldadd)

tests_preload_overflow_metadata_SOURCES = tests/preload/overflow_metadata.c tests/preload/ptest.h
tests_preload_overflow_metadata_CFLAGS = $(preload_cflags)
tests_preload_overflow_metadata_LDADD = $(preload_ldadd)

# Death tests: not a test itself, driven case by case by misuse.test.
tests_preload_misuse_SOURCES = tests/preload/misuse.c tests/preload/ptest.h
tests_preload_misuse_CFLAGS = $(preload_cflags)
tests_preload_misuse_LDADD = $(preload_ldadd)

# glibc's other functions: malloc_stats, malloc_info, free_sized,
# free_aligned_sized, mallopt, aligned_alloc's errors, __libc_ names.
check_PROGRAMS += tests/preload/glibc_api
TESTS += tests/preload/glibc_api
tests_preload_glibc_api_SOURCES = tests/preload/glibc_api.c tests/preload/ptest.h
tests_preload_glibc_api_CFLAGS = $(preload_cflags)
tests_preload_glibc_api_LDADD = $(preload_ldadd)

# Pages of 16 KiB, as on many aarch64 systems: memory goes back to the
# kernel in whole system pages only.
check_LTLIBRARIES += tests/preload/pagesize_shim.la
tests_preload_pagesize_shim_la_SOURCES = tests/preload/pagesize_shim.c
tests_preload_pagesize_shim_la_LDFLAGS = -module -rpath /nowhere -avoid-version
tests_preload_pagesize_shim_la_LIBADD = -ldl
check_PROGRAMS += tests/preload/pagesize_work
tests_preload_pagesize_work_SOURCES = tests/preload/pagesize_work.c tests/preload/ptest.h
tests_preload_pagesize_work_CFLAGS = $(preload_cflags)
tests_preload_pagesize_work_LDADD = $(preload_ldadd)
TESTS += tests/preload/pagesize.test
EXTRA_DIST += tests/preload/pagesize.test
