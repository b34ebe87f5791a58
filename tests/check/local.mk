# MBUDDY_CHECK=1 canaries.
check_PROGRAMS += tests/check/overflow
tests_check_overflow_SOURCES = tests/check/overflow.c
tests_check_overflow_CFLAGS = $(AM_CFLAGS) -fno-builtin
TESTS += tests/check/canary.test
EXTRA_DIST += tests/check/canary.test

# The first malloc of a process, from a library constructor that runs
# before libmbuddy's set-up, freed by main.
check_LTLIBRARIES += tests/check/libearly.la
tests_check_libearly_la_SOURCES = tests/check/early_lib.c
tests_check_libearly_la_CFLAGS = $(AM_CFLAGS) -fno-builtin
tests_check_libearly_la_LDFLAGS = -avoid-version -rpath /nowhere
check_PROGRAMS += tests/check/early_free
tests_check_early_free_SOURCES = tests/check/early_free.c
tests_check_early_free_CFLAGS = $(AM_CFLAGS) -fno-builtin
tests_check_early_free_LDADD = tests/check/libearly.la
tests_check_early_free_LDFLAGS = -no-install
TESTS += tests/check/early.test
EXTRA_DIST += tests/check/early.test
