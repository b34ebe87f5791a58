# Unit tests of the buddy core: plain programs, no preload.
unit_ldadd = libmbcore.la
unit_cflags = $(AM_CFLAGS) -DMB_TEST_CHECKS=1

check_PROGRAMS += tests/unit/test_buddy tests/unit/test_buddy_random tests/unit/test_meta tests/unit/test_out \
	tests/unit/test_profile_key
TESTS += tests/unit/test_buddy tests/unit/test_buddy_random tests/unit/test_meta tests/unit/test_out \
	tests/unit/test_profile_key

tests_unit_test_buddy_SOURCES = tests/unit/test_buddy.c tests/unit/testutil.h
tests_unit_test_buddy_LDADD = $(unit_ldadd)
tests_unit_test_buddy_CFLAGS = $(unit_cflags)
tests_unit_test_buddy_random_SOURCES = tests/unit/test_buddy_random.c tests/unit/testutil.h
tests_unit_test_buddy_random_LDADD = $(unit_ldadd)
tests_unit_test_buddy_random_CFLAGS = $(unit_cflags)
tests_unit_test_meta_SOURCES = tests/unit/test_meta.c tests/unit/testutil.h
tests_unit_test_meta_LDADD = $(unit_ldadd)
tests_unit_test_meta_CFLAGS = $(unit_cflags)
check_PROGRAMS += tests/unit/test_meta_16k
TESTS += tests/unit/test_meta_16k
tests_unit_test_meta_16k_SOURCES = tests/unit/test_meta.c tests/unit/testutil.h
tests_unit_test_meta_16k_LDADD = $(unit_ldadd)
tests_unit_test_meta_16k_CFLAGS = $(unit_cflags) -DTEST_SYSTEM_PAGE=16384
tests_unit_test_out_SOURCES = tests/unit/test_out.c tests/unit/testutil.h
tests_unit_test_out_LDADD = $(unit_ldadd)
tests_unit_test_out_CFLAGS = $(unit_cflags)
tests_unit_test_profile_key_SOURCES = tests/unit/test_profile_key.c tests/unit/testutil.h
tests_unit_test_profile_key_LDADD = $(unit_ldadd) $(LIBUNWIND_LIBS) -ldl
tests_unit_test_profile_key_CFLAGS = $(unit_cflags)

# The lock counters of --enable-lock-stats, built in whatever the
# configuration: lockstat.c compiled here with MB_LOCK_STATS on.
check_PROGRAMS += tests/unit/test_lockstat
TESTS += tests/unit/test_lockstat
tests_unit_test_lockstat_SOURCES = tests/unit/test_lockstat.c tests/unit/testutil.h src/lockstat.c
tests_unit_test_lockstat_CFLAGS = $(unit_cflags) -DMB_LOCK_STATS=1
