# The benchmark scripts' own machinery: the workload generator and the
# sweep driver on tiny configurations.
TESTS += tests/scripts/sweep.test
EXTRA_DIST += tests/scripts/sweep.test

# No inline assembly; configure refuses hosts it cannot support.
TESTS += tests/scripts/portability.test
EXTRA_DIST += tests/scripts/portability.test
