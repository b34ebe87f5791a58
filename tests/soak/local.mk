# Soak test (issue 7): a multi-threaded, forking program that verifies every
# byte it wrote; soak-quick.test runs it under LD_PRELOAD=$MBUDDY_LIB for
# $MBUDDY_SOAK_SECONDS (default 20) seconds. The program itself is not in
# TESTS: only the .test script runs it. Longer runs by hand:
#   LD_PRELOAD=.libs/libmbuddy.so tests/soak/soak --seconds 1200 --report 60
# -fno-builtin: the compiler must not fold or drop the allocator calls.
check_PROGRAMS += tests/soak/soak
tests_soak_soak_SOURCES = tests/soak/soak.c
tests_soak_soak_CFLAGS = $(AM_CFLAGS) -fno-builtin
tests_soak_soak_LDADD = -lpthread

TESTS += tests/soak/soak-quick.test
EXTRA_DIST += tests/soak/soak-quick.test
