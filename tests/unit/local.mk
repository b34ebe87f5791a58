# Unit tests: one program per layer or leaf of src/ (doc/design.md), each
# one source file on the harness tests/unit/harness.h, linked against the
# core (libmbcore.la) directly and run without any preload.
#
# A new test: add its program to unit_tests and give it its _SOURCES and
# _LDADD below. make check, distcheck and the sanitizer step of
# scripts/run-tests.sh (which asks `make print-unit-tests`) all take the
# tests from unit_tests.
unit_ldadd = libmbcore.la $(LIBUNWIND_LIBS) -ldl -lpthread

unit_tests = \
	tests/unit/test_buddy \
	tests/unit/test_buddy_random \
	tests/unit/test_meta \
	tests/unit/test_meta_16k \
	tests/unit/test_out \
	tests/unit/test_profile_key \
	tests/unit/test_lockstat \
	tests/unit/test_reclaim_type \
	tests/unit/test_sizeclass \
	tests/unit/test_fragmentation \
	tests/unit/test_profile_format \
	tests/unit/test_options \
	tests/unit/test_large \
	tests/unit/test_purge \
	tests/unit/test_background \
	tests/unit/test_own_thread \
	tests/unit/test_inbox \
	tests/unit/test_slab \
	tests/unit/test_site \
	tests/unit/test_huge \
	tests/unit/test_symbolize \
	tests/unit/test_account

check_PROGRAMS += $(unit_tests)
TESTS += $(unit_tests)
EXTRA_DIST += tests/unit/harness.h

.PHONY: print-unit-tests
print-unit-tests:
	@echo $(unit_tests)

tests_unit_test_buddy_SOURCES = tests/unit/test_buddy.c
tests_unit_test_buddy_LDADD = $(unit_ldadd)
tests_unit_test_buddy_random_SOURCES = tests/unit/test_buddy_random.c
tests_unit_test_buddy_random_LDADD = $(unit_ldadd)
tests_unit_test_meta_SOURCES = tests/unit/test_meta.c
tests_unit_test_meta_LDADD = $(unit_ldadd)
# test_meta again, with the system's pages seen as 16 KiB (as on many
# aarch64 systems).
tests_unit_test_meta_16k_SOURCES = tests/unit/test_meta.c
tests_unit_test_meta_16k_LDADD = $(unit_ldadd)
tests_unit_test_meta_16k_CPPFLAGS = $(AM_CPPFLAGS) -DTEST_SYSTEM_PAGE=16384
tests_unit_test_out_SOURCES = tests/unit/test_out.c
tests_unit_test_out_LDADD = $(unit_ldadd)
tests_unit_test_profile_key_SOURCES = tests/unit/test_profile_key.c
tests_unit_test_profile_key_LDADD = $(unit_ldadd)
tests_unit_test_reclaim_type_SOURCES = tests/unit/test_reclaim_type.c
tests_unit_test_reclaim_type_LDADD = $(unit_ldadd)
tests_unit_test_sizeclass_SOURCES = tests/unit/test_sizeclass.c
tests_unit_test_sizeclass_LDADD = $(unit_ldadd)
tests_unit_test_fragmentation_SOURCES = tests/unit/test_fragmentation.c
tests_unit_test_fragmentation_LDADD = $(unit_ldadd)
tests_unit_test_profile_format_SOURCES = tests/unit/test_profile_format.c
tests_unit_test_profile_format_LDADD = $(unit_ldadd)
tests_unit_test_options_SOURCES = tests/unit/test_options.c
tests_unit_test_options_LDADD = $(unit_ldadd)
tests_unit_test_large_SOURCES = tests/unit/test_large.c
tests_unit_test_large_LDADD = $(unit_ldadd)
tests_unit_test_purge_SOURCES = tests/unit/test_purge.c
tests_unit_test_purge_LDADD = $(unit_ldadd)
tests_unit_test_background_SOURCES = tests/unit/test_background.c
tests_unit_test_background_LDADD = $(unit_ldadd)
tests_unit_test_own_thread_SOURCES = tests/unit/test_own_thread.c
tests_unit_test_own_thread_LDADD = $(unit_ldadd)
tests_unit_test_inbox_SOURCES = tests/unit/test_inbox.c
tests_unit_test_inbox_LDADD = $(unit_ldadd)
tests_unit_test_slab_SOURCES = tests/unit/test_slab.c
tests_unit_test_slab_LDADD = $(unit_ldadd)
tests_unit_test_site_SOURCES = tests/unit/test_site.c
tests_unit_test_site_LDADD = $(unit_ldadd)
tests_unit_test_huge_SOURCES = tests/unit/test_huge.c
tests_unit_test_huge_LDADD = $(unit_ldadd)
# -rdynamic: the program's own functions in its dynamic symbol table, as
# dladdr and symbolize.c read it.
tests_unit_test_symbolize_SOURCES = tests/unit/test_symbolize.c
tests_unit_test_symbolize_LDADD = $(unit_ldadd) -lm
tests_unit_test_symbolize_LDFLAGS = -rdynamic

# The lock counters of --enable-lock-stats, built in whatever the
# configuration: lockstat.c compiled here with MB_LOCK_STATS on, without
# the core.
tests_unit_test_lockstat_SOURCES = tests/unit/test_lockstat.c src/lockstat.c
tests_unit_test_lockstat_CPPFLAGS = $(AM_CPPFLAGS) -DMB_LOCK_STATS=1
tests_unit_test_lockstat_LDADD = -lpthread
tests_unit_test_account_SOURCES = tests/unit/test_account.c
tests_unit_test_account_LDADD = $(unit_ldadd)
