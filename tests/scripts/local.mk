# The benchmark scripts' own machinery: the workload generator and the
# sweep driver on tiny configurations.
TESTS += tests/scripts/sweep.test
EXTRA_DIST += tests/scripts/sweep.test
