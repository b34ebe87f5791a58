# MBUDDY_CHECK=1 canaries.
check_PROGRAMS += tests/check/overflow
tests_check_overflow_SOURCES = tests/check/overflow.c
tests_check_overflow_CFLAGS = $(AM_CFLAGS) -fno-builtin
TESTS += tests/check/canary.test
EXTRA_DIST += tests/check/canary.test
